-- library work is charged before it is done: an empty string.rep is
-- empty at once, table.move over 10^15 nil slots exceeds the budget
local s = string.rep("", 1e15)
table.move({}, 1, 1e15, 2)
