-- tile.pair shares a token's dequantization between two CTAs of the
-- warpgroup form; sm_90 has no wgmma, so this kernel takes the warp form.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, pair = true },
  targets = { ptx = { arch = "sm_90" } },
}
