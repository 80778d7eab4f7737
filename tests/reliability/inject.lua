-- Failure injection for the reliability tests (tests/reliability/*.sh run it
-- under mpirun at 2 and 4 ranks; it is not a scenario of its own).
--   nvfp4-lua inject.lua --timeout S --inject MODE --rank R
-- MODE: error (a Lua error on rank R in the middle of a case, after one
-- collective and before the next), exit (rank R calls os.exit(0) there),
-- hang (rank R spins in a busy loop), ended (every case passes; then, outside any case, the
-- other ranks enter a collective that rank R, its script ended, never joins), none (nothing: the
-- control run).
-- --tag T is ignored (the driver finds leftover processes by it).
-- Every other rank goes on into the next collective and waits for rank R:
-- the harness must end the whole job within the timeout, naming R and the
-- case.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local mode, victim = "none", 1
for i = 1, #arg do
  if arg[i] == "--inject" then mode = arg[i + 1] end
  if arg[i] == "--rank" then victim = math.tointeger(tonumber(arg[i + 1])) end
end
local MODES = {none = true, error = true, exit = true, hang = true, ended = true}
if not MODES[mode] then error("--inject: unknown mode '" .. tostring(mode) .. "'", 0) end
-- take our arguments out before the framework reads the rest
for i = #arg, 1, -1 do
  if arg[i] == "--inject" or arg[i] == "--rank" or arg[i] == "--tag" then
    table.remove(arg, i + 1)
    table.remove(arg, i)
  end
end

local world = nvfp4.world()
if victim == nil or victim < 0 or victim >= world.size then
  error(("--rank must be in 0..%d"):format(world.size - 1), 0)
end

-- one gather before the cases, outside their short timeout: the first use of the transport and of the
-- kernels (NCCL's connections, CUDA's lazy module loading) took more than the 2 s of a case under
-- make -j check on two GPUs
world:all_gather(nvfp4.randn({16, 1, 64}, "bf16", {seed = 1}), {quantize = {rowwise = true, columnwise = true}})

sc.case("warm-up gather", function ()
  local x = nvfp4.randn({16, 1, 64}, "bf16", {seed = 1 + world.rank})
  local g = world:all_gather(x, {quantize = {rowwise = true, columnwise = true}})
  sc.shape(g:shape(), {16 * world.size, 1, 64}, "gathered shape")
end)

sc.case("injected " .. mode, function ()
  local x = nvfp4.randn({16, 2, 64}, "bf16", {seed = 7 + world.rank})
  local q = {rowwise = true, columnwise = true}
  world:all_gather(x, {quantize = q})                  -- every rank gets here
  if world.rank == victim then
    if mode == "error" then
      error("injected failure on rank " .. victim)
    elseif mode == "exit" then
      os.exit(0)
    elseif mode == "hang" then
      local n = 0
      while true do n = n + 1 end                      -- never returns
    end
  end
  local g = world:all_gather(x, {quantize = q})        -- the others wait here
  sc.shape(g:shape(), {16 * world.size, 2, 64}, "gathered shape")
end)

sc.case("after the injection", function ()
  world:barrier()
end)

sc.run()
-- top-level code, which no case guards: rank R has ended and sits in MPI_Finalize (this waited for ever)
if mode == "ended" and world.rank ~= victim then world:barrier() end
