-- tile.pair's CTAs copy dequantized rows to each other in 16-byte pieces:
-- values_per_thread / interleave must be 8 (here 64 / 4 = 16), which
-- choose_form checks before any code is generated.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 4, pair = true },
  targets = { ptx = { arch = "sm_90a" } },
}
