-- a string doubling until the cap
local s = "x"
while true do
  s = s .. s
end
