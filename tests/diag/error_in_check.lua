-- a metamethod raising a non-string while the checker reads the table
kernel(setmetatable({}, { __index = function() error({}) end }))
