local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  rope = { first = 448, dims = 64 },
  targets = { ptx = true },
}
