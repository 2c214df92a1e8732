local L = include "layouts.lua"
kernel {
  name = "w",
  op = "kv_insert",
  layout = L.fp8_per_tensor,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = { ptx = true },
}
