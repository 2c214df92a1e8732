-- one allocation past the memory cap
local s = string.rep("x", 1e9)
