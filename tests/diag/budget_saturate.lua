-- a budget near the largest integer: the charge saturates, never overflows
for i = 1, 3 do pcall(table.unpack, {}, 1, math.maxinteger) end
while true do end
