-- a budget near the largest integer: the overflows
for i = 0, 3 do pcall(table.unpack, {}, 0, math.maxinteger) end
while true do end
