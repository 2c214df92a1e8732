-- tile.prefetch has the warpgroup form's producers prefetch the next K
-- tile; sm_90 has no wgmma, so this kernel takes the warp form.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, prefetch = true },
  targets = { ptx = { arch = "sm_90" } },
}
