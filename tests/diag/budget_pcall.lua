-- pcall cannot catch the budget error and go on
while true do
  pcall(function() while true do end end)
end
