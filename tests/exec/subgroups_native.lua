-- subgroups_native.lua: a kernel that requires sub-groups of 64 and carries
-- no emulation: an OpenCL device without that size (PoCL) must refuse it,
-- with a status and a message, before launching anything
-- (tests/exec/test_subgroups.c).
local L = include "layouts.lua"

kernel {
  name = "dequant_gather_sg64",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = { spirv = { subgroups = true, subgroup_size = 64 } },
}
