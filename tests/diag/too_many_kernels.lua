-- one kernel{} more than a spec holds: an error at that kernel{} (it was
-- "file: error:" with no line)
local L = include "layouts.lua"
for i = 1, 257 do
  kernel { name = "g" .. i, op = "dequant_gather", layout = L.bf16,
           tile = { values_per_thread = 8, tokens_per_cta = 2 }, targets = { spirv = true } }
end
