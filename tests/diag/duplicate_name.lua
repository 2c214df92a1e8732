local L = include "layouts.lua"
local t = { values_per_thread = 16, tokens_per_cta = 8 }
kernel { name = "g", op = "dequant_gather", layout = L.fp8_ds_mla_v4, tile = t, targets = { ptx = true } }
kernel {
  name = "g",
  op = "paged_gather", layout = L.fp8_ds_mla_v4, tile = t, targets = { ptx = true } }
