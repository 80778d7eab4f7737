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

-- outside a case, sc.skip and sc.need_ranks say so, with their reason (a skip mark raised there read
-- "(error object is a table value)"); a grid axis with no values is refused in either form (the list
-- form registered no case, silently: "0 passed, 0 failed")
do
  local ok, e = pcall(sc.skip, "not here")
  assert(not ok and tostring(e):find("sc.skip outside a case (not here): it ends the case under way as skipped",
                                     1, true), tostring(e))
  ok, e = pcall(sc.need_ranks, world.size + 1)
  assert(not ok and tostring(e):find(("sc.need_ranks(%d) outside a case: it skips the case under way (needs a "
                                      .. "multiple of %d ranks, have %d)"):format(world.size + 1, world.size + 1,
                                                                                  world.size), 1, true), tostring(e))
  -- sc.case's own arguments, named as the other helpers' (it said "case: name must be a string" without
  -- what was given), at the caller's line; a nil fn after a grid (a misspelt name) is #3, not a grid in
  -- fn's place
  for _, t in ipairs{{"bad argument #1 to 'sc.case' (name must be a string, got number)", 5, function () end},
                     {"bad argument #2 to 'sc.case' (case 'x' needs a function, got number)", "x", 5},
                     {"bad argument #3 to 'sc.case' (case 'x' needs a function, got nil)", "x", {B = {1}}, nil},
                     {"bad argument #2 to 'sc.case' (case 'x': grid must be a table, got string)", "x", "B",
                      function () end}} do
    local n = t[1]:find("needs a function, got number", 1, true) and 3 or 4
    ok, e = pcall(function () local r = sc.case(table.unpack(t, 2, n)); return r end)
    local line = debug.getinfo(1, "l").currentline - 1
    assert(not ok and tostring(e) == ("%s:%d: %s"):format(debug.getinfo(1, "S").short_src, line, t[1]), tostring(e))
  end
  for _, grid in ipairs{{{"B", {}}}, {B = {}}, {{"TP", {2}}, {"B", {}}}} do
    ok, e = pcall(sc.case, "empty axis", grid, function () end)
    assert(not ok and tostring(e):find("grid parameter 'B' must be a non-empty list of values", 1, true),
           tostring(e))
  end
end

sc.case("sc.error passes a skip on", function ()
  -- sc.error around a call that skips the case passes the skip on (it took it for an error that
  -- matched nothing: a case meant to skip at some rank counts failed)
  local ok, e = pcall(sc.error, "x", function () sc.skip("inner") end)
  sc.ok(not ok and type(e) == "table" and e.reason == "inner", "the skip mark, got " .. tostring(e))
end)

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

sc.case("the framework's helpers refuse bad arguments at the caller's line", function ()
  local function at (want, f, ...)
    local ok, e = pcall(f, ...)
    local line = debug.getinfo(2, "l").currentline
    local tail = "fw_errors.lua:" .. line .. ": " .. want
    sc.ok(not ok, want .. " raises")
    sc.ok(tostring(e):sub(-#tail) == tail and #tostring(e) > #tail, "got " .. tostring(e))
  end
  -- each call is on the line of its `at`, not a tail call (Lua names no caller for one)
  at("bad argument #3 to 'sc.eq' (what must be a string or nil, got table)", function () local r = sc.eq(1, 1, {}); return r end)
  at("bad argument #2 to 'sc.ok' (what must be a string or nil, got number)", function () local r = sc.ok(true, 5); return r end)
  at("bad argument #4 to 'sc.close' (what must be a string or nil, got table)", function () local r = sc.close(1, 1, 0.1, {}); return r end)
  at("bad argument #1 to 'sc.need_ranks' (n must be an integer >= 1, got 0)", function () local r = sc.need_ranks(0); return r end)
  at("bad argument #1 to 'sc.need_ranks' (n must be an integer >= 1, got string)", function () local r = sc.need_ranks("2"); return r end)
  at("bad argument #1 to 'sc.log' (fmt must be a string, got nil)", function () local r = sc.log(nil); return r end)
  at("bad argument #1 to 'sc.assertion' (name must be a string, got nil)", function () local r = sc.assertion(nil, print); return r end)
  at("bad argument #2 to 'sc.assertion' (check must be a function, got nil)", function () local r = sc.assertion("x", nil); return r end)
  at("bad argument #1 to 'sc.error' (pattern must be a string, got table)", function () local r = sc.error({}, error); return r end)
  -- f that is no function: it raised "attempt to call a nil value", which sc.error("nil", nil) passed
  at("bad argument #2 to 'sc.error' (f must be a function, got nil)", function () local r = sc.error("nil", nil); return r end)
  at("bad argument #2 to 'sc.error' (f must be a function, got userdata)", function () local r = sc.error("value", x); return r end)
  -- tol and expected as the other helpers' arguments (they said "close: tol must be a number" without
  -- what was given; a NaN tol failed every comparison)
  at("bad argument #3 to 'sc.close' (tol must be a number, got string)", function () local r = sc.close(1, 1, "0.1"); return r end)
  at("bad argument #3 to 'sc.close' (tol must be a number, got nan)", function () local r = sc.close(1, 1, 0/0); return r end)
  at("bad argument #2 to 'sc.shapes' (expected must be a table of shapes, got number)", function () local r = sc.shapes({}, 5); return r end)
  -- sc.params' own arguments (a number for defaults raised "bad argument #1 to 'for iterator'" in the framework)
  at("bad argument #1 to 'sc.params' (defaults must be a table, got number)", function () local r = sc.params(5); return r end)
  at("bad argument #2 to 'sc.params' (timeout must be a number of seconds > 0, got string)", function () local r = sc.params({}, "60"); return r end)
  -- a plain table that is no shape fails at the caller's line too (it raised inside the framework)
  at("dims: expected {64, -1} is no shape: shape dim 2 must be a non-negative integer, got -1", function () local r = sc.shape(nvfp4.shape{64, 1}, {64, -1}, "dims"); return r end)
  at("dw: actual {1.5} is no shape: shape dim 1 must be a non-negative integer, got 1.5", function () local r = sc.shapes({dw = {1.5}}, {dw = {1}}, "dw"); return r end)
  at("bad argument #1 to 'sc.skip' (reason must be a string, got number)", function () local r = sc.skip(42); return r end)
  at("bad argument #1 to 'sc.skip' (reason must be a string, got table)", function () local r = sc.skip({}); return r end)
end)

sc.case("a collective that succeeds still returns its values", function ()
  sc.eq(world:all_reduce_max(world.rank), world.size - 1, "all_reduce_max")
end)

sc.run()
