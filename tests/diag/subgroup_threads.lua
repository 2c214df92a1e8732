local L = include "layouts.lua"
-- 32 threads are not whole sub-groups of 64
kernel {
  name = "g",
  op = "paged_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 1 },
  targets = { spirv = { subgroups = true, subgroup_size = 64 } },
}
