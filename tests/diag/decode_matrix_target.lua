-- The warp-matrix form needs bf16 matrix instructions on every target named.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 64, matrix = true },
  targets = { ptx = true, spirv = true },
}
