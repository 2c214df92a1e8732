-- ../ may not leave the spec folder and the -I folders
local L = include "../../../../../../../../etc/passwd"
