-- included by include_cycle.lua (no .err: not a test of its own)
return include "include_cycle.lua"
