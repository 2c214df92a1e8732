-- no pattern matching in the sandbox (its backtracking has no bound)
local i = ("abc"):find("b")
