local t = nil
kernel { name = t.x }
