-- table.unpack over [0, maxinteger]: its span, e - f + 1, does not fit an
-- integer (found by fuzz_spec: signed overflow in the pricing)
local ok = pcall(table.unpack, {}, 0, math.maxinteger)
while true do end
