local L = include "layouts.lua"
-- PTX's warp is fixed: no sub-group switch there
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = {
    ptx = { subgroups = true, subgroup_size = 32 },
  },
}
