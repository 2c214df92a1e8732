local L = include "layouts.lua"
