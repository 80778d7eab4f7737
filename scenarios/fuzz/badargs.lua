-- np=1,2
-- Bad-input fuzz: every module function and method called with random wrong
-- arguments (types, shapes, dtypes, negative and huge sizes, closed tensors,
-- userdata of another kind, mismatched ranks).  Every call must raise a Lua
-- error whose message is a clear string (names the argument, value or rule);
-- nothing may crash or hang.  On 2+ ranks, the collectives also get
-- arguments that differ between ranks (shapes, dtypes, ndim, usages, rules):
-- every rank must get an error, none may be left waiting.
--   nvfp4-lua scenarios/fuzz/badargs.lua [--seed S] [--calls N]
-- (run it under valgrind --leak-check=full at one rank to check for leaks)
--
-- Not covered here: tensors from another backend (one process has one
-- context; the C tests cover the cross-context check), and a bad argument
-- on one rank only that the binding refuses before the collective: the binding tells the other
-- ranks through the library for the comm methods, quantize with amax_group, a layer's
-- forward/backward and rel_error_group (tests/lua/comm.lua); for a closed layer or comm the
-- others wait and the harness's per-case timeout ends the job (see tests/reliability).
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local world = nvfp4.world()
local CALLS = 40                    -- random calls per function and case
for i = 1, #arg do
  if arg[i] == "--calls" then CALLS = math.tointeger(tonumber(arg[i + 1])) or CALLS end
end
for i = #arg, 1, -1 do
  if arg[i] == "--calls" then table.remove(arg, i + 1); table.remove(arg, i) end
end

-- ---- values --------------------------------------------------------------------

local function closed ()
  local t = nvfp4.zeros({16, 16})
  t:close()
  return t
end

local function fp4 () return nvfp4.quantize(nvfp4.randn({16, 32}, "bf16", {seed = 1}), {rowwise = true, columnwise = true}) end
local function plain () return nvfp4.randn({16, 32}, "fp32", {seed = 2}) end

-- Wrong values for each kind of parameter (functions: made fresh per call).
local ANY_WRONG = {false, 0, -1, 1.5, "x", {}, io.stdout, print, closed}
local WRONG = {
  tensor = {nil, 3, "t", {}, {1, 2}, io.stdout, closed, function () return world end},
  plain = {nil, 3, "t", {}, io.stdout, closed, fp4},
  fp4 = {nil, 3, "t", {}, io.stdout, closed, plain},
  shape = {nil, -3, "shape", {-1}, {1.5}, {"a"}, {16, -16}, {1, 2, 3, 4, 5, 6, 7, 8, 9},
           {math.maxinteger, math.maxinteger}, {1 << 40, 1 << 40}, {1 << 62}, io.stdout, {{1}}},
  dtype = {"fp64", "FP32", 3, {}, true},
  dim = {0, -1, 99, 1.5, "one", {}, math.mininteger},
  int = {-1, 1.5, "n", {}, math.mininteger},
  str = {"bogus", 7, {}, true, ""},
  opts = {7, "rowwise", true, {bogus = 1}, {rowwise = "yes"}, {seed = "s"}, {1, 2}, {amax = "big"},
          {amax_group = 3}, {[1.5] = true}},
  comm = {nil, 3, "w", {}, io.stdout, closed},
  string = {nil, {}, true, io.stdout, print},
}

local function draw (g, kind)
  local pool = WRONG[kind] or ANY_WRONG
  local v = pool[g(1, #pool + 1)]        -- sometimes past the end: nil
  if type(v) == "function" and v ~= print then v = v() end
  return v
end

-- ---- the functions: name, callable, parameter kinds, a valid argument list ----

local function linear () return nvfp4.linear{in_features = 32, out_features = 16} end
local API = {
  {"nvfp4.shape", nvfp4.shape, {"shape"}},
  {"nvfp4.buffer_shapes", nvfp4.buffer_shapes, {"shape"}},
  {"nvfp4.cw_rule", nvfp4.cw_rule, {"str", "shape"}, function () return "nd", {16, 3, 64} end},
  {"nvfp4.tensor", nvfp4.tensor, {"shape", "dtype"}, function () return {{1, 2}}, "fp32" end},
  {"nvfp4.from_bytes", nvfp4.from_bytes, {"shape", "dtype", "string"},
   function () return {2, 2}, "bf16", string.rep("\0", 8) end},
  {"nvfp4.zeros", nvfp4.zeros, {"shape", "dtype"}, function () return {16, 16}, "bf16" end},
  {"nvfp4.ones", nvfp4.ones, {"shape", "dtype"}, function () return {16, 16}, "bf16" end},
  {"nvfp4.arange", nvfp4.arange, {"shape", "dtype"}, function () return {16, 16}, "fp32" end},
  {"nvfp4.randn", nvfp4.randn, {"shape", "dtype", "opts"}, function () return {16, 16}, "bf16", {seed = 1} end},
  {"nvfp4.uniform", nvfp4.uniform, {"shape", "dtype", "opts"}, function () return {16, 16}, "fp32", {lo = 0, hi = 1} end},
  {"nvfp4.quantize", nvfp4.quantize, {"plain", "opts"}, function () return plain(), {rowwise = true} end},
  {"nvfp4.dequantize", nvfp4.dequantize, {"fp4", "dtype"}, function () return fp4(), "fp32" end},
  {"nvfp4.swap_first_dims", nvfp4.swap_first_dims, {"plain"}, function () return plain() end},
  {"nvfp4.equal", nvfp4.equal, {"tensor", "tensor"}, function () return plain(), plain() end},
  {"nvfp4.rel_error", nvfp4.rel_error, {"plain", "plain"}, function () return plain(), plain() end},
  {"nvfp4.exit_status", nvfp4.exit_status, {"int"}, function () return 0 end},
  {"nvfp4.gemm", nvfp4.gemm, {"fp4", "str", "fp4", "str", "opts"},
   function () return fp4(), "rowwise", fp4(), "rowwise", {} end},
  {"nvfp4.gemm_ref64", nvfp4.gemm_ref64, {"fp4", "str", "fp4", "str"},
   function () return fp4(), "rowwise", fp4(), "rowwise" end},
  {"nvfp4.linear", nvfp4.linear, {"opts"}, function () return {in_features = 32, out_features = 16} end},
  {"t:reshape", function (...) return plain():reshape(...) end, {"shape"}, function () return {32, 16} end},
  {"t:narrow", function (...) return plain():narrow(...) end, {"dim", "int", "int"}, function () return 1, 1, 8 end},
  {"t:convert", function (...) return plain():convert(...) end, {"str"}, function () return "bf16" end},
  {"t:dequantize", function (...) return fp4():dequantize(...) end, {"dtype", "str"},
   function () return "bf16", "columnwise" end},
  {"t:get", function (...) return plain():get(...) end, {"int", "int"}, function () return 1, 1 end},
  {"t:bytes", function (...) return fp4():bytes(...) end, {"str"}, function () return "rowwise_data" end},
  {"t:amax", function (...) return fp4():amax(...) end, {"str"}, function () return "columnwise" end},
  {"t:buffer_shape", function (...) return fp4():buffer_shape(...) end, {"str"}, function () return "rowwise_data" end},
  {"world:split", function (...) return world:split(...) end, {"int"}, function () return world.size end},
  {"world:all_gather", function (...) return world:all_gather(...) end, {"plain", "opts"},
   function () return plain(), {quantize = {rowwise = true}} end},
  {"world:reduce_scatter", function (...) return world:reduce_scatter(...) end, {"plain"},
   function () return nvfp4.zeros({16 * world.size, 16}) end},
  {"world:all_reduce", function (...) return world:all_reduce(...) end, {"plain"}, function () return plain() end},
  {"world:all_reduce_max", function (...) return world:all_reduce_max(...) end, {"int"}, function () return 1 end},
  {"world:all_gather_int", function (...) return world:all_gather_int(...) end, {"int"}, function () return 1 end},
  {"world:all_gather_string", function (...) return world:all_gather_string(...) end, {"string"},
   function () return "s" end},
  {"l:forward", function (...) return linear():forward(...) end, {"plain"},
   function () return nvfp4.randn({16, 32}, "bf16") end},
  {"l:set_weight", function (...) return linear():set_weight(...) end, {"plain"},
   function () return nvfp4.zeros({16, 32}) end},
  {"l:operand", function (...) return linear():operand(...) end, {"str"}, function () return "weight" end},
}

-- A message is clear when it is a non-empty string that says what was wrong
-- (Lua's "bad argument #n to 'f' (...)", or a library message naming the
-- value or rule), not a bare status or a C-level placeholder.
local CLEAR = {"bad argument", "expected", "must", "not ", "invalid", "needs", "closed", "unknown",
               "outside", "exceeds", "too ", "only", "cannot", "mismatch", "differ", "disagree",
               "no "}
local function clear (msg)
  if type(msg) ~= "string" or #msg < 12 or msg:find("(null)", 1, true) then return false end
  for _, w in ipairs(CLEAR) do if msg:find(w, 1, true) then return true end end
  return false
end

-- How wrong values may still be valid for a parameter kind (e.g. nil for an
-- optional table): those draws are skipped, not counted as a pass.
local function isvalid (kind, v)
  if v == nil then return kind == "opts" or kind == "dtype" or kind == "str" end
  if kind == "opts" and type(v) == "table" and next(v) == nil then return true end
  return false
end

sc.case("every function refuses wrong arguments with a clear error", function (p)
  local g = (function ()
    local s = p.seed
    return function (lo, hi) s = (s * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
      return lo + (s >> 33) % (hi - lo + 1) end
  end)()
  local calls, refused, msgs = 0, 0, {}
  for _, f in ipairs(API) do
    local name, fn, kinds, good = f[1], f[2], f[3], f[4]
    for _ = 1, CALLS do
      -- a valid argument list with one or more positions made wrong
      local args = good and table.pack(good()) or {n = #kinds}
      local bad = g(1, #kinds)
      local n = args.n or #kinds
      local skip = false
      for i = 1, #kinds do
        if i == bad or (not good) or g(1, 4) == 1 then
          args[i] = draw(g, kinds[i])
          if isvalid(kinds[i], args[i]) then skip = true end
        end
      end
      if bad > n then n = bad end
      if not skip then
        calls = calls + 1
        local ok, e = pcall(fn, table.unpack(args, 1, n))
        if ok then
          -- some draws are valid after all (an int that is in range...):
          -- accept only when no position got a value of the wrong type
          local wrongtype = false
          for i = 1, #kinds do
            local v, k = args[i], kinds[i]
            if k == "shape" and type(v) ~= "table" then wrongtype = true end
            if (k == "plain" or k == "fp4" or k == "tensor") and (type(v) ~= "userdata" or v == io.stdout) then wrongtype = true end
            if k == "opts" and type(v) ~= "table" then wrongtype = true end
            if k == "string" and type(v) ~= "string" then wrongtype = true end
          end
          sc.ok(not wrongtype, ("%s refuses a wrong-typed argument (%s)"):format(name,
                table.concat((function () local t = {} for i = 1, n do t[i] = tostring(args[i]) end return t end)(), ", ")))
        else
          refused = refused + 1
          sc.ok(clear(e), ("%s: the error is clear: %s"):format(name, tostring(e)))
          msgs[#msgs + 1] = e
        end
      end
      nvfp4.watchdog(0)
      nvfp4.exit_status(0)
    end
  end
  sc.log("%d calls, %d refused; e.g. %s", calls, refused, msgs[1] or "")
  sc.ok(refused > calls // 2, ("most calls refused (%d of %d)"):format(refused, calls))
  collectgarbage()
end)

sc.case("the watchdog refuses bad times", function ()
  sc.error("seconds must be a number >= 0", nvfp4.watchdog, -1, "x")
  sc.error("seconds must be a number >= 0", nvfp4.watchdog, 0 / 0, "x")
  sc.error("number expected", nvfp4.watchdog, "soon", "x")
  nvfp4.watchdog(0)
end)

sc.case("watchdog_junit refuses incomplete or binary arguments", function ()
  sc.error("string expected", nvfp4.watchdog_junit, "j.xml")
  sc.error("string expected", nvfp4.watchdog_junit, "j.xml", "<a>", {})
  sc.error("must not contain a zero byte", nvfp4.watchdog_junit, "j\0.xml", "<a>", "</a>")
  nvfp4.watchdog_junit()
end)

-- ---- mismatched ranks: arguments that differ between ranks ------------------------

local me = world.rank
local MISMATCH = {
  {"shape", function () return world:all_gather(nvfp4.randn({16 * (me + 1), 32}, "bf16"),
                                                {quantize = {rowwise = true}}) end},
  {"dtype", function () return world:all_gather(nvfp4.randn({16, 32}, me == 0 and "bf16" or "fp32"),
                                                {quantize = {rowwise = true}}) end},
  {"ndim", function () return world:all_gather(nvfp4.randn(me == 0 and {16, 32} or {16, 1, 32}, "bf16"),
                                               {quantize = {rowwise = true}}) end},
  {"usages", function () return world:all_gather(nvfp4.randn({16, 32}, "bf16"),
                                                 {quantize = {rowwise = true, columnwise = me == 0}}) end},
  {"rule", function () return world:all_gather(nvfp4.randn({16, 3, 32}, "bf16"),
             {quantize = {columnwise = true}, rule = me == 0 and "nd" or "flat2d"}) end},
  {"rht", function () return world:all_gather(nvfp4.randn({16, 32}, "bf16"),
             {quantize = {columnwise = true, rht = me == 0}}) end},
  {"plain shape", function () return world:all_gather(nvfp4.zeros({8, 16 + 16 * me})) end},
  {"reduce_scatter", function () return world:reduce_scatter(nvfp4.zeros({2 * world.size, 16 * (me + 1)})) end},
  {"all_reduce dtype", function () return world:all_reduce(nvfp4.zeros({4, 16}, me == 0 and "fp32" or "bf16")) end},
  {"fp4 usages", function ()
     return world:all_gather(nvfp4.quantize(nvfp4.randn({16, 32}, "bf16"), {rowwise = true, columnwise = me == 0}))
   end},
}

sc.case("mismatched ranks: every rank gets an error", function ()
  if world.size < 2 then sc.skip("needs 2 ranks") end
  for _, m in ipairs(MISMATCH) do
    local ok, e = pcall(m[2])
    -- every rank must agree that it failed (and nobody may hang: the
    -- per-case timeout would end the job)
    local failed = world:all_gather_int(ok and 0 or 1)
    for r, f in ipairs(failed) do
      sc.eq(f, 1, ("%s mismatch: rank %d's call failed"):format(m[1], r - 1))
    end
    sc.ok(clear(e), ("%s mismatch: the error is clear: %s"):format(m[1], tostring(e)))
    sc.log("%s: %s", m[1], tostring(e))
  end
end)

sc.run()
