-- np=2  (run by framework.sh with --timeout 6, time for the first cases under ASan on a loaded machine,
-- and with "exit") Finalizers run by the framework's
-- garbage collection after a case: one that raises is a Lua warning on standard error (Lua dropped it
-- without a word), one that never returns is named by the timeout on its rank (it read as if the case
-- had ended well there), and (with "exit") one that calls os.exit(0) is named with the case before it
-- and ends the job with status 1 (it said nothing: Open MPI's block alone).
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local w = nvfp4.world()
sc.case("gc raises", function ()
  if w.rank == 1 then setmetatable({}, {__gc = function () error("finalizer fails") end}) end
  w:barrier()
end)
sc.case("gc exits", function ()
  if w.rank == 1 and arg[1] == "exit" then setmetatable({}, {__gc = function () os.exit(0) end}) end
  w:barrier()
end)
sc.case("gc hangs", function ()
  if w.rank == 1 then setmetatable({}, {__gc = function () while true do end end}) end
  w:barrier()
end)
sc.run()
