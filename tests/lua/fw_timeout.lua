-- np=2  Framework self-test, run by tests/lua/framework.sh with --timeout 1 (expected: the job ends
-- non-zero, naming the case): rank 1 fails before a barrier that rank 0 then waits in forever.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()

sc.case("quick", function () sc.ok(true, "nothing") end)

sc.case("hangs", function ()
  if world.rank == 1 then error("rank 1 gives up") end
  world:barrier()
end)

sc.case("never reached", function () print("NEVER REACHED") end)
sc.run()
