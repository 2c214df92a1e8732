-- a NUL inside a name would cut it short in the plan and the file names
local L = include "layouts.lua"
kernel { name = "g\0/../x", op = "dequant_gather", layout = L.fp8_ds_mla_v4,
         tile = { values_per_thread = 16, tokens_per_cta = 4 }, targets = { ptx = true } }
