local L = include "../../specs/layouts.lua"
