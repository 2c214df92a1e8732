local L = include "no_such_layouts.lua"
