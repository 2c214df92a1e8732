-- error() with no message
local x = 1
error()
