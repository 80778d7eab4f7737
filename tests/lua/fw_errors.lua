-- np=2  Errors raised by a collective inside a case read as they do outside the framework: the
-- caller's file:line, the method's name and the argument counted without self.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()
local x = nvfp4.randn({32, 64}, "bf16", {seed = 1})

-- The message with its "file:line: " taken off, and that line.
local function split (e)
  local line, rest = tostring(e):match("^[^\n]-:(%d+): (.*)$")
  return rest or tostring(e), tonumber(line)
end

-- outside any case: the plain method, as the binding raises it (the calls are not tail calls, whose
-- caller Lua cannot name)
local _, plain_gather = pcall(function () local g = world:all_gather(x, {rule = "flat"}); return g end)
local _, plain_split = pcall(function () local g = world:split(3); return g end)

sc.case("a comm argument error keeps its place and name", function ()
  local ok, e = pcall(function () local g = world:all_gather(x, {rule = "flat"}); return g end)
  local here = debug.getinfo(1, "l").currentline - 1
  sc.ok(not ok, "all_gather with rule = \"flat\" raises")
  local msg, line = split(e)
  sc.eq(msg, (split(plain_gather)), "the message as outside a case")
  sc.eq(line, here, "the caller's line")
  sc.ok(msg:find("bad argument #2 to 'all_gather' (option 'rule' must be", 1, true) ~= nil, "names all_gather: " .. msg)
end)

sc.case("split's argument error too", function ()
  local ok, e = pcall(function () local g = world:split(3); return g end)
  sc.ok(not ok, "split(3) at 2 ranks raises")
  sc.eq((split(e)), (split(plain_split)), "the message as outside a case")
  sc.ok(tostring(e):find("fw_errors.lua:%d+: split: tp=3 must be >= 1 and divide the communicator size") ~= nil,
        "names split: " .. tostring(e))
end)

sc.case("a collective that succeeds still returns its values", function ()
  sc.eq(world:all_reduce_max(world.rank), world.size - 1, "all_reduce_max")
end)

sc.run()
