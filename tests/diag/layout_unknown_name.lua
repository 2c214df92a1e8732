-- a layout name the library lacks is a nil: say which name, not "missing"
local L = include "layouts.lua"
kernel {
  name = "g",
  op = "dequant_gather",
  layout = L.no_such_layout,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = { spirv = true },
}
