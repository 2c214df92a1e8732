-- tile.p names how the matrix forms hold P for the P V product: "bf16"
-- (rounded once, as FlashMLA) or "bf16x2" (bf16 hi + lo); nothing else.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, p = "fp16" },
  targets = { ptx = { arch = "sm_90a" } },
}
