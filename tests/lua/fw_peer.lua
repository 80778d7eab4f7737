-- np=2  A failure whose lowest failing rank only has a peer's error: rank 1 passes a bad argument to a
-- library collective, rank 0 gets "rank 1 failed (...) (another rank failed)".  The verdict quotes rank 1's
-- own reason.  Run by framework.sh (both cases fail on purpose).
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()

sc.case("bad argument on rank 1", function ()
  local x = nvfp4.zeros({2 * world.size, 16})
  world:all_reduce(world.rank == 1 and 5 or x)
end)

sc.case("own errors on both ranks", function ()
  error("own error on rank " .. world.rank, 0)
end)

sc.run()
