local L = include "layouts.lua"
kernel {
  name = "w",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  rope = { first = 440, dims = 64 },
  targets = { ptx = true },
}
