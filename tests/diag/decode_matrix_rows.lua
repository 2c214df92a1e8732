-- 16 heads are 128 threads: 16-value lanes would dequantize 4 K rows a pass.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 16, matrix = true },
  targets = { ptx = true },
}
