local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 8, tokens_per_thread = 3 },
  targets = { ptx = true },
}
