-- a cycle of includes is named
local L = include "include_cycle_b.lua"
