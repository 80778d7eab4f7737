-- np=2  Framework self-test, run by tests/lua/framework.sh (its expected exit status is 1): a grid,
-- a case that fails on rank 1 only, an expected error, a skip, a seeded case, a case after the failure.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()

sc.case("grid", {n = {1, 2, 3}}, function (p)
  sc.eq(p.n * 4 // 4, p.n, "n")
end)

sc.case("fails on rank 1 only", function ()
  world:barrier()                                 -- collectives before the failure are fine
  sc.eq(world.rank == 1 and 41 or 42, 42, "the answer")
end)

sc.case("expected error", function ()
  sc.error("unknown option 'colwise'", function ()
    return nvfp4.quantize(nvfp4.zeros({16, 16}), {colwise = true})
  end)
end)

sc.case("skipped", function () sc.skip("not today") end)

sc.case("seeded", function (p)
  local t = nvfp4.randn({4}, "fp32", {seed = p.seed})
  print(("SEEDED rank %d: %d %.9g %.9g"):format(world.rank, p.seed, t:get(1),
                                                 nvfp4.randn({1}, "fp32"):get(1)))
end)

sc.case("after the failure", function () sc.ok(world:all_reduce_max(world.rank) == world.size - 1, "max rank") end)

sc.run()
