-- Two warps a 16-head row block: heads_per_cta must be a multiple of 16.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 24, matrix = true },
  targets = { ptx = true },
}
