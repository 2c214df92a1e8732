-- a constraint runs while the kernels are checked: a kernel{} it declares
-- would be lost, so it is an error at the call (it was silently dropped)
local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.bf16,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = { spirv = true },
  sweep = {
    tile = { tokens_per_cta = { 2, 4 } },
    constraints = { function(v)
      kernel { name = "extra", op = "dequant_gather", layout = L.bf16,
               tile = { values_per_thread = 8, tokens_per_cta = 2 }, targets = { spirv = true } }
      return true
    end },
  },
}
