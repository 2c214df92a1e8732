-- 1,024 points, more than 256 of them valid: an error at the sweep, not
-- 256 kernels and the rest dropped with exit status 0
local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.bf16,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = { spirv = true },
  sweep = {
    tile = { tokens_per_cta = { 1, 2, 4, 8, 16, 32, 64, 128 }, values_per_thread = { 1, 2, 4, 8, 16, 32, 64, 128 },
             tokens_per_thread = { 1, 2, 4, 8 }, interleave = { 1, 2, 4, 8 } },
  },
}
