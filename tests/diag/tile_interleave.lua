local L = include "layouts.lua"
-- pieces of 16 / 4 = 4 values would be fine, but 512 / 3 is not whole
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4, interleave = 3 },
  targets = { ptx = true },
}
