-- np=1  (run by framework.sh with an argument) A case that calls os.exit(CODE), CODE a Lua
-- expression given as the script's argument: the job never ends 0 from the middle of a case, and the
-- status it says is the one it ends with (256 ended 0, "0" ended 0, 1.5 named an internal function).
local sc = require "nvfp4.scenario"
local code = assert(load("return " .. assert(arg[1], "give CODE")))()
sc.case("exits", function () os.exit(code) end)
sc.run()
