-- includes are relative to the spec folder or a -I folder
local L = include "/etc/passwd"
