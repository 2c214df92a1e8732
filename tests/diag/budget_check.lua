-- a loop in a metamethod the checker reaches
kernel(setmetatable({}, { __index = function() while true do end end }))
