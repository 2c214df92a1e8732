local L = include "layouts.lua"
-- an emulation of sub-groups the kernel does not use
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = {
    spirv = { subgroups = false, emulate_subgroups = true },
  },
}
