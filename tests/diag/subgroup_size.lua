local L = include "layouts.lua"
-- a sub-group size no PTX warp or AMDGCN wavefront has
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = {
    spirv = { subgroups = true, subgroup_size = 16 },
  },
}
