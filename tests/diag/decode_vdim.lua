local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v32,
  tile = { values_per_thread = 32, heads_per_cta = 4 },
  v_dim = 520,
  targets = { ptx = true },
}
