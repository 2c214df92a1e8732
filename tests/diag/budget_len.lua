-- a __len that claims a huge table: table.remove is charged by the length it
-- will walk (found in review: it walked 10^15 nil slots uncharged)
local t = setmetatable({}, { __len = function() return 1000000000000000 end })
table.remove(t, 1)
