-- finalizers run with hooks off, outside the budget: refused
setmetatable({}, { __gc = function() while true do end end })
