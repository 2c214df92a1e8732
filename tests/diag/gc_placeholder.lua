-- __gc = false would still mark the object for finalization
local mt = { __gc = false }
local o = setmetatable({}, mt)
mt.__gc = function() while true do end end
