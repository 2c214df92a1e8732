-- a misspelt layout name: the closest one the spec made
local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v5, -- (v4)
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = { spirv = true },
}
