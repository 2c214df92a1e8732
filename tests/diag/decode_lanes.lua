local L = include "layouts.lua"
-- 576 dims in 16-value lanes are 36 lanes: more than one 32-wide reduction
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v32,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = { ptx = true },
}
