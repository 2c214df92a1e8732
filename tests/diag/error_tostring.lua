-- an error object with __tostring: not run (it could raise or loop)
error(setmetatable({}, { __tostring = function() return "boom" end }))
