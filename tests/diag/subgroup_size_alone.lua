local L = include "layouts.lua"
-- a sub-group size without sub-group code
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = {
    spirv = { subgroup_size = 64 },
  },
}
