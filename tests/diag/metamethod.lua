-- a table whose reads raise: the checker must report it, not abort
local t = setmetatable({ name = "g" }, { __index = function(_, k) error("no field " .. k) end })
kernel(t)
