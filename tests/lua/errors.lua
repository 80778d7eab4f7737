-- Single-rank tests of the binding's error messages: unknown option keys, wrong types, bad values,
-- closed handles and library errors all raise, naming the argument and the rule.
local nvfp4 = require "nvfp4"

local function checkerror (msg, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error with: " .. msg)
  assert(err:find(msg, 1, true), "expected '" .. msg .. "', got: " .. tostring(err))
end

local x = nvfp4.randn({32, 64}, "bf16", {seed = 1})
local world = nvfp4.world()

print("testing option tables")
checkerror("bad argument #2 to 'quantize' (unknown option 'colwise')",
           function () return nvfp4.quantize(x, {colwise = true}) end)
checkerror("bad argument #2 to 'quantize' (option 'rowwise' must be a boolean, got number)",
           function () return nvfp4.quantize(x, {rowwise = 1}) end)
checkerror("bad argument #2 to 'quantize' (option 'seed' must be an integer, got 1.5)",
           function () return nvfp4.quantize(x, {sr = true, seed = 1.5}) end)
checkerror("bad argument #2 to 'quantize' (option 'offset' must be an integer, got '7' (a string))",
           function () return nvfp4.quantize(x, {sr = true, offset = "7"}) end)
checkerror("bad argument #2 to 'quantize' (option 'seed' must be an integer, got table)",
           function () return nvfp4.quantize(x, {sr = true, seed = {}}) end)
checkerror("bad argument #2 to 'quantize' (option 'seed' needs sr = true)",
           function () return nvfp4.quantize(x, {seed = 3}) end)
checkerror("bad argument #2 to 'quantize' (option 'offset' needs sr = true)",
           function () return nvfp4.quantize(x, {offset = 3}) end)
-- with sr = true the options read after it are still checked (they were
-- skipped: the binding popped the options table)
checkerror("4over6 excludes stochastic rounding",
           function () return nvfp4.quantize(x, {sr = true, four_over_six = true}) end)
checkerror("bad argument #2 to 'quantize' (option 'emax' must be 256 or 448)",
           function () return nvfp4.quantize(x, {sr = true, four_over_six = true, emax = 999}) end)
checkerror("bad argument #2 to 'quantize' (option 'amax' must be a number or {rowwise, columnwise})",
           function () return nvfp4.quantize(x, {amax = "big"}) end)
-- strings are no numbers inside a table either ({"1", "2"} was taken where "1" is refused)
checkerror("bad argument #2 to 'quantize' (option 'amax' must be a number or {rowwise, columnwise})",
           function () return nvfp4.quantize(x, {columnwise = true, amax = {"1", "2"}}) end)
checkerror("bad argument #2 to 'quantize' (option 'amax' must be a number or {rowwise, columnwise})",
           function () return nvfp4.quantize(x, {amax = {1, "2"}}) end)
-- a NaN amax reads "nan" whatever its sign bit (printf gives "-nan" for a
-- set one); both signs made from their bit patterns, as -(0/0) may be either
local pnan = string.unpack("<d", string.pack("<i8", 0x7ff8000000000000))
local nnan = string.unpack("<d", string.pack("<i8", 0xfff8000000000000))
assert(pnan ~= pnan and nnan ~= nnan and string.pack("<d", nnan):byte(8) == 0xff
       and string.pack("<d", pnan):byte(8) == 0x7f)
for _, nan in ipairs{pnan, nnan} do
  checkerror("quantize: given rowwise amax nan must be >= 0 and not NaN",
             function () return nvfp4.quantize(x, {amax = nan}) end)
  checkerror("quantize: given columnwise amax nan must be >= 0 and not NaN",
             function () return nvfp4.quantize(x, {columnwise = true, amax = {1, nan}}) end)
end
-- a 1-D input to a Linear is one row: M = 1, said so
checkerror("linear: input [64]: M=1 (the product of its leading dims: a 1-D input is one row) is not a multiple of 16",
           function () return nvfp4.linear{in_features = 64, out_features = 16}:forward(nvfp4.randn({64}, "bf16")) end)
checkerror("bad argument #2 to 'quantize' (option 'amax_group' must be an nvfp4.comm, got number)",
           function () return nvfp4.quantize(x, {amax_group = 1}) end)
checkerror("bad argument #2 to 'quantize' (option keys must be strings, got number)",
           function () return nvfp4.quantize(x, {true}) end)
checkerror("bad argument #2 to 'quantize' (table expected, got string)",
           function () return nvfp4.quantize(x, "rowwise") end)
checkerror("bad argument #3 to 'randn' (unknown option 'sed')",
           function () return nvfp4.randn({4}, "fp32", {sed = 1}) end)
checkerror("bad argument #3 to 'randn' (option 'lo/hi' only apply to uniform)",
           function () return nvfp4.randn({4}, "fp32", {lo = 0}) end)
checkerror("bad argument #3 to 'uniform' (option 'lo' must be a number, got string)",
           function () return nvfp4.uniform({4}, "fp32", {lo = "x"}) end)
checkerror("bad argument #3 to 'uniform' (option 'lo' must be less than hi)",
           function () return nvfp4.uniform({4}, "fp32", {lo = 1, hi = 0}) end)
-- a rule name is refused in the same words everywhere, the value quoted
checkerror("bad argument #2 to 'all_gather' (option 'rule' must be one of 'flat2d', 'nd'; got '2d')",
           function () return world:all_gather(x, {rule = "2d"}) end)
checkerror("bad argument #2 to 'all_gather' (option 'rule' must be one of 'flat2d', 'nd'; got number)",
           function () return world:all_gather(x, {rule = 2}) end)
checkerror("bad argument #1 to 'cw_rule' (rule must be one of 'flat2d', 'nd'; got '2d')",
           function () return nvfp4.cw_rule("2d", {16, 16}) end)
checkerror("bad argument #1 to 'linear' (option 'rule' must be one of 'flat2d', 'nd'; got '2d')",
           function () return nvfp4.linear{in_features = 64, out_features = 16, rule = "2d"} end)
-- objects inside option tables: the option is named, on the call's own argument
checkerror("bad argument #2 to 'all_gather' (option 'quantize' has an unknown option 'colwise')",
           function () return world:all_gather(x, {quantize = {colwise = true}}) end)
checkerror("bad argument #2 to 'all_gather' (option 'quantize' must be a table of quantize options, got number)",
           function () return world:all_gather(x, {quantize = 5}) end)
-- a bad value inside quantize = {..}: the call's argument and the option's full name (it said #3, the
-- inner table's stack slot, and 'rowwise' alone)
checkerror("bad argument #2 to 'all_gather' (option 'quantize.rowwise' must be a boolean, got string)",
           function () return world:all_gather(x, {quantize = {rowwise = "yes"}}) end)
checkerror("bad argument #3 to 'all_gather' (option 'quantize.rht' must be a boolean, got number)",
           function () return world:all_gather(x, 1, {quantize = {rowwise = true, rht = 3}}) end)
checkerror("bad argument #2 to 'all_gather' (option 'quantize.emax' must be 256 or 448)",
           function () return world:all_gather(x, {quantize = {rowwise = true, four_over_six = true, emax = 3}}) end)
-- and the next error of a call whose options sit where the nested table sat is its own: after a nested
-- option's error, and after a nested table whose own __index raised (a static kept the nested naming, so
-- these said "#2 ... (option 'quantize.rule' ...)")
local strict = setmetatable({rowwise = true}, {__index = function (_, k) error("no default for " .. k, 0) end})
checkerror("no default for", function () return world:all_gather(x, {quantize = strict}) end)
checkerror("bad argument #3 to 'all_gather' (option 'rule' must be one of 'flat2d', 'nd'; got '2d')",
           function () return world:all_gather(x, 1, {rule = "2d"}) end)
checkerror("bad argument #2 to 'all_gather' (option 'quantize.rowwise' must be a boolean, got string)",
           function () return world:all_gather(x, {quantize = {rowwise = "yes"}}) end)
checkerror("bad argument #3 to 'all_gather' (option 'rule' must be one of 'flat2d', 'nd'; got '2d')",
           function () return world:all_gather(x, 1, {rule = "2d"}) end)
checkerror("bad argument #5 to 'gemm' (option 'bias' must be an nvfp4.tensor, got number)",
           function () local q = nvfp4.quantize(x); return nvfp4.gemm(q, "rowwise", q, "rowwise", {bias = 5}) end)
-- the checks that run in a function of their own (all_gather, quantize, linear) name a call without a
-- name through its table, self counted, as Lua names any such call (they said #1 to 'all_gather')
checkerror("bad argument #2 to 'nvfp4.comm.all_gather' (nvfp4.tensor expected, got number)",
           world.all_gather, world, 5)
checkerror("bad argument #1 to 'nvfp4.quantize' (nvfp4.tensor expected, got number)", nvfp4.quantize, 5)
-- a rule on a plain gather (no quantize): refused, not ignored
checkerror("bad argument #2 to 'all_gather' (option 'rule' needs an NVFP4 gather (fp4 x or quantize = {..})",
           function () return world:all_gather(x, {rule = "nd"}) end)
checkerror("bad argument #1 to 'linear' (option 'group' must be an nvfp4.comm, got number)",
           function () return nvfp4.linear{in_features = 64, out_features = 16, group = 5} end)
checkerror("bad argument #5 to 'gemm' (option 'bias' must be an nvfp4.tensor, got number)",
           function () local q = nvfp4.quantize(x); return nvfp4.gemm(q, "rowwise", q, "rowwise", {bias = 5}) end)
checkerror("gemm_ref64 takes no options",
           function () local q = nvfp4.quantize(x); return nvfp4.gemm_ref64(q, "rowwise", q, "rowwise", {}) end)
do
  local g = world:split(1)
  g:close()
  checkerror("bad argument #2 to 'quantize' (option 'amax_group' is a closed nvfp4.comm)",
             function () return nvfp4.quantize(x, {amax_group = g}) end)
end
checkerror("bad argument #2 to 'all_gather' (unknown option 'rules')",
           function () return world:all_gather(x, {rules = "nd"}) end)
checkerror("option 'async' needs an NVFP4 gather",
           function () return world:all_gather(x, {async = true}) end)
checkerror("option 'rowwise/columnwise' apply to an fp4 tensor",
           function () return world:all_gather(x, {rowwise = true}) end)
checkerror("the gather runs along dim 1 only", function () return world:all_gather(x, 2) end)
-- the library's messages that reach Lua name dims without a number (they said "dim 0", a dim Lua has not)
checkerror("the NVFP4 gather needs >= 2 (the first dim is gathered, the last is K)",
           function () return world:all_gather(nvfp4.zeros({16}), {quantize = {}}) end)
checkerror("x is a scalar; collectives along the first dim need ndim >= 1",
           function () return world:all_reduce(nvfp4.zeros({})) end)

print("testing types and values")
checkerror("bad argument #2 to 'zeros' (dtype must be one of 'fp32', 'bf16', 'u8'; got 'int8')",
           function () return nvfp4.zeros({4}, "int8") end)
checkerror("bad argument #2 to 'randn' (dtype must be one of 'fp32', 'bf16'; got number)",
           function () return nvfp4.randn({4}, 16) end)
-- what computes on values lists only fp32 and bf16 (u8 was listed, then refused by another rule)
checkerror("bad argument #2 to 'uniform' (dtype must be one of 'fp32', 'bf16'; got 'u8')",
           function () return nvfp4.uniform({4}, "u8") end)
checkerror("bad argument #1 to 'zeros' (shape dim 2 must be a non-negative integer, got -1)",
           function () return nvfp4.zeros({4, -1}) end)
checkerror("bad argument #1 to 'nvfp4.randn' (shape dim 1 must be a non-negative integer, got 4.5)",
           nvfp4.randn, {4.5, 16}, "fp32")
checkerror("bad argument #1 to 'shape' (shape dim 1 must be a non-negative integer, got 'a' (a string))",
           function () return nvfp4.shape{"a"} end)
checkerror("bad argument #1 to 'zeros' (shape dim 1 must be a non-negative integer, got '-1' (a string))",
           function () return nvfp4.zeros({"-1"}) end)
checkerror("bad argument #1 to 'zeros' (shape dim 2 must be a non-negative integer, got '16' (a string))",
           function () return nvfp4.zeros({4, "16"}) end)
assert(nvfp4.isatty(2^32 + 1) == false and nvfp4.isatty(-1) == false)
checkerror("bad argument #1 to 'zeros' (shape dim 2 must be a non-negative integer, got nan)",
           function () return nvfp4.zeros({4, 0/0}) end)
checkerror("bad argument #1 to 'zeros' (shape dim 1 must be a non-negative integer, got table)",
           function () return nvfp4.zeros({{}}) end)
-- a shape past 2^60 elements is refused by every maker at its argument (randn and
-- zeros named the library's 'tensor'); a size the host cannot give names the call
-- and the bytes (Lua's own message says only "not enough memory")
for _, f in ipairs{"zeros", "ones", "arange", "randn", "uniform"} do
  checkerror("bad argument #1 to '?' (shape has more than 2^60 elements)",   -- nvfp4[f]: no name
             function () return nvfp4[f]({math.maxinteger}) end)
  checkerror("bad argument #1 to '?' (shape has more than 2^60 elements)",
             function () return nvfp4[f]({1 << 31, 1 << 30}) end)
end
checkerror("bad argument #1 to 'randn' (shape has more than 2^60 elements)",
           function () return nvfp4.randn({math.maxinteger}) end)
checkerror("bad argument #1 to 'zeros' (shape has more than 2^60 elements)",
           function () return nvfp4.zeros(1 << 61) end)
-- 256 TiB, past a process's address space: refused even where the kernel overcommits memory (the GPU
-- machine's does: 4 TiB was granted there)
checkerror("ones: cannot allocate 281474976710656 bytes of host memory (out of memory)",
           function () return nvfp4.ones({1 << 46}) end)
checkerror("arange: cannot allocate 281474976710656 bytes of host memory (out of memory)",
           function () return nvfp4.arange(1 << 47, "bf16") end)
-- a comm indexed by a non-string is nil, as a tensor is (it raised "string expected")
assert(world[{}] == nil and world[1] == nil and x[{}] == nil and world.size == 1)
-- watchdog_junit(nil, pre, post) lost its path silently; only a bare call forgets
checkerror("bad argument #1 to 'watchdog_junit' (string expected, got nil (only a call without pre and post forgets the file))",
           function () return nvfp4.watchdog_junit(nil, "<a>", "</a>") end)
nvfp4.watchdog_junit()
checkerror("bad argument #1 to 'tensor' (ragged table", function () return nvfp4.tensor({{1, 2}, {3}}) end)
checkerror("bad argument #1 to 'tensor' (ragged table: a row at depth 2 has length 2, expected 0)",
           function () return nvfp4.tensor({{}, {1, 2}}) end)
assert(tostring(nvfp4.tensor({{}, {}}):shape()) == "[2, 0]" and tostring(nvfp4.tensor({}):shape()) == "[0]")
-- an element is a number, as a shape's dim is ("1" was converted)
checkerror("bad argument #1 to 'tensor' (element 2 is a string, not a number)",
           function () return nvfp4.tensor({1, "2"}) end)
checkerror("bad argument #1 to 'tensor' (element 3 is a string, not a number)",
           function () return nvfp4.tensor({{1, 2}, {"0x10", 4}}, "u8") end)
checkerror("bad argument #1 to 'tensor' (u8 value 256 is not in 0..255)",
           function () return nvfp4.tensor({256}, "u8") end)
checkerror("bad argument #1 to 'tensor' (u8 value -3 is not in 0..255)",
           function () return nvfp4.tensor({1, -3}, "u8") end)
checkerror("bad argument #1 to 'tensor' (u8 value 2.5 is not an integer in 0..255)",
           function () return nvfp4.tensor({2.5}, "u8") end)
checkerror("is not an integer in 0..255)",
           function () return nvfp4.tensor({0/0}, "u8") end)
checkerror("bad argument #1 to 'quantize' (nvfp4.tensor expected, got table)",
           function () return nvfp4.quantize({1, 2}) end)
checkerror("bad argument #1 to 'narrow' (dim 4 is outside 1..2)", function () return x:narrow(4, 1, 1) end)
checkerror("bad argument #1 to 'convert' (dtype must be one of 'fp32', 'bf16'; got 'f16')",
           function () return x:convert("f16") end)
checkerror("bad argument #1 to 'convert' (dtype must be one of 'fp32', 'bf16'; got 'u8')",
           function () return x:convert("u8") end)
checkerror("tensor_convert: the tensor is fp4", function () return nvfp4.quantize(x):convert("bf16") end)
checkerror("bad argument #3 to 'narrow' (start 20 + length 20 runs past dim 1 of size 32)",
           function () return x:narrow(1, 20, 20) end)
checkerror("bad argument #2 to 'narrow' (start 66 is outside 1..65 (dim 2 has size 64))",
           function () return x:narrow(2, 66, 0) end)
-- a method called where Lua has no name for the call (pcall(t.reshape, t, x)) is named through its
-- table, as Lua names string.rep ("bad argument #2 to '?'" before)
checkerror("bad argument #2 to 'nvfp4.tensor.reshape' (table expected, got number)", x.reshape, x, 5)
checkerror("bad argument #4 to 'nvfp4.tensor.narrow' (start 20 + length 20 runs past dim 1 of size 32)",
           x.narrow, x, 1, 20, 20)
checkerror("bad argument #1 to 'nvfp4.tensor.shape' (nvfp4.tensor expected, got number)", x.shape, 7)
checkerror("bad argument #2 to 'nvfp4.comm.split' (number expected, got string)", world.split, world, "two")
do
  local lin <close> = nvfp4.linear{in_features = 32, out_features = 16}
  checkerror("bad argument #2 to 'nvfp4.linear.forward' (nvfp4.tensor expected, got boolean)",
             lin.forward, lin, true)
end
checkerror("bad argument #3 to 'narrow' (length -1 is negative)", function () return x:narrow(1, 1, -1) end)
checkerror("calling 'narrow' on bad self (needs a plain tensor (fp4: dequantize it or use bytes(name)))",
           function () return nvfp4.quantize(x):narrow(1, 1, 1) end)
checkerror("calling 'narrow' on bad self (a 0-d tensor has no dim to narrow)",
           function () return nvfp4.zeros({}):narrow(1, 1, 1) end)
checkerror("bad argument #1 to 'get' (index 33 is outside 1..32)", function () return x:get(33, 1) end)
checkerror("get: a 2-D tensor needs 2 indices, got 1", function () return x:get(1) end)
checkerror("bad argument #1 to 'buffer_shape' (buffer must be one of 'rowwise_data', 'rowwise_scale_inv', "
           .. "'columnwise_data', 'columnwise_scale_inv'; got 'scale')",
           function () return nvfp4.quantize(x):buffer_shape("scale") end)
checkerror("calling 'amax' on bad self (needs an fp4 tensor, got bf16)", function () return x:amax() end)
-- (checked by the library after the ranks agree: a rank refusing tp alone left the others in the split)
checkerror("split: tp=3 must be >= 1 and divide the communicator size 1", function () return world:split(3) end)
checkerror("split: tp=-4 must be >= 1", function () return world:split(-4) end)
checkerror("split: tp=10000000000 must be >= 1 and divide the communicator size 1",
           function () return world:split(10000000000) end)
checkerror("bad argument #1 to 'split' (number expected, got string)", function () return world:split("two") end)
-- a numeric string is no integer either, as in a shape or an option table ("2" was converted
-- where {"2"} and {seed = "2"} are refused)
checkerror("bad argument #1 to 'split' (number expected, got string)", function () return world:split("1") end)
checkerror("bad argument #1 to 'narrow' (number expected, got string)", function () return x:narrow("1", 1, 2) end)
checkerror("bad argument #2 to 'narrow' (number expected, got string)", function () return x:narrow(1, "1", 2) end)
checkerror("bad argument #3 to 'narrow' (number expected, got string)", function () return x:narrow(1, 1, "2") end)
checkerror("bad argument #2 to 'get' (number expected, got string)", function () return x:get(1, "1") end)
checkerror("bad argument #1 to 'exit_status' (number expected, got string)",
           function () return nvfp4.exit_status("0") end)
checkerror("bad argument #1 to 'isatty' (number expected, got string)", function () return nvfp4.isatty("1") end)
-- a refused value is named (these said the rule alone)
checkerror("bad argument #1 to 'exit_status' (exit status must be in 0..255, got 300)",
           function () return nvfp4.exit_status(300) end)
checkerror("bad argument #1 to 'zeros' (length must be >= 0, got -3)", function () return nvfp4.zeros(-3) end)
checkerror("bad argument #1 to 'shape' (shape has 9 dims, more than 8)",
           function () return nvfp4.shape{1, 1, 1, 1, 1, 1, 1, 1, 1} end)
checkerror("bad argument #1 to 'watchdog' (seconds must be a number >= 0, got nan)",
           function () return nvfp4.watchdog(0 / 0, "x") end)
checkerror("bad argument #6 to 'watchdog' (linger must be a number of seconds in [0, 3600], got 5000)",
           function () return nvfp4.watchdog(1, "x", 1, "", "", 5000) end)
checkerror("bad argument #1 to 'watchdog_tell' (case number must be > 0, got 0)",
           function () return nvfp4.watchdog_tell(0, "x") end)

print("testing closed handles")
local c = nvfp4.zeros({16, 16})
c:close()
checkerror("bad argument #1 to 'quantize' (tensor is closed)", function () return nvfp4.quantize(c) end)
checkerror("tensor is closed", function () return c:tolist() end)
-- a closed tensor's methods name themselves also where Lua has no name for the call, as handles' do
checkerror("calling 'tolist' on bad self (tensor is closed)", function () return c:tolist() end)
checkerror("calling 'shape' on bad self (tensor is closed)", c.shape, c)
checkerror("calling 'reshape' on bad self (tensor is closed)", c.reshape, c, {256})
checkerror("calling 'columnwise_shape' on bad self (tensor is closed)", c.columnwise_shape, c)
-- ... and where Lua has a name of its own for the call: a field's (t.shape(t)) or none it can tell (t[m](t))
checkerror("calling 'shape' on bad self (tensor is closed)", function () return c.shape(c) end)
checkerror("calling 'columnwise_shape' on bad self (tensor is closed)", function () return c.columnwise_shape(c) end)
for _, m in ipairs{"numel", "bytes", "clone", "amax"} do
  checkerror(("calling '%s' on bad self (tensor is closed)"):format(m), function () return c[m](c) end)
end
checkerror("bad argument #1 to 'nvfp4.dequantize' (tensor is closed)", nvfp4.dequantize, c)
checkerror("calling 'dequantize' on bad self (tensor is closed)", c.dequantize, c)
checkerror("calling 'dequantize' on bad self (tensor is closed)", function () return c:dequantize() end)
-- dequantize's dtype: the message lists the two it takes (it listed u8, which it then refused)
checkerror("bad argument #2 to 'nvfp4.dequantize' (dtype must be one of 'fp32', 'bf16'; got 'fp4')",
           nvfp4.dequantize, nvfp4.quantize(nvfp4.zeros({16, 16})), "fp4")
checkerror("bad argument #2 to 'nvfp4.dequantize' (dtype must be one of 'fp32', 'bf16'; got 'u8')",
           nvfp4.dequantize, nvfp4.quantize(nvfp4.zeros({16, 16})), "u8")
do   -- a closed handle names the method, also when Lua has no name for it (pcall(h.wait, h))
  local h = world:all_gather(x, {quantize = {rowwise = true}, async = true})
  h:close()
  checkerror("calling 'wait' on bad self (handle is closed)", h.wait, h)
  checkerror("calling 'finish_count' on bad self (handle is closed)", h.finish_count, h)
  checkerror("calling 'wait' on bad self (handle is closed)", function () return h:wait() end)
  local w = world:all_gather(x, {quantize = {rowwise = true}, async = true})
  local g = w:wait()
  w:close()
  assert(rawequal(w:wait(), g), "a handle waited for before its close still returns its tensor")
end

do   -- a closed communicator: its methods name themselves (also through pcall(g.barrier, g)), its fields raise
  local g = world:split(1)
  g:close()
  checkerror("calling 'all_gather' on bad self (communicator is closed)", function () return g:all_gather(x) end)
  checkerror("calling 'barrier' on bad self (communicator is closed)", g.barrier, g)
  for _, m in ipairs{"split", "all_reduce_max", "all_gather_int", "all_gather_string", "reduce_scatter",
                     "all_reduce"} do
    checkerror(("calling '%s' on bad self (communicator is closed)"):format(m), g[m], g, 1)
  end
  checkerror("communicator is closed (reading 'rank')", function () return g.rank end)
  checkerror("communicator is closed (reading 'transport')", function () return g.transport end)
  assert(tostring(g) == "nvfp4.comm (closed)", tostring(g))
  g:close()   -- closing again does nothing
  checkerror("bad argument #1 to 'linear' (option 'group' is a closed nvfp4.comm)",
             function () return nvfp4.linear{in_features = 64, out_features = 48, group = g} end)
end

print("testing library errors")
checkerror("(invalid argument)", function () return nvfp4.quantize(nvfp4.zeros({4, 24})) end)
checkerror("24", function () return nvfp4.quantize(nvfp4.zeros({4, 24})) end)
checkerror("Input is not allocated", function () return nvfp4.swap_first_dims(nvfp4.zeros({2, 0, 4})) end)
checkerror("reshape: [32, 64] cannot become [3, 64]", function () return x:reshape{3, 64} end)
checkerror("bad argument #5 to 'gemm' (option 'dtype' must be one of 'fp32', 'bf16'; got 'f16')",
           function () return nvfp4.gemm(x, "rowwise", x, "rowwise", {dtype = "f16"}) end)
checkerror("bad argument #5 to 'gemm' (option 'dtype' must be one of 'fp32', 'bf16'; got 'u8')",
           function () return nvfp4.gemm(x, "rowwise", x, "rowwise", {dtype = "u8"}) end)
checkerror("bad argument #2 to 'gemm' (usage must be one of 'rowwise', 'columnwise'; got 'row')",
           function () return nvfp4.gemm(x, "row", x, "rowwise") end)
checkerror("bad argument #1 to 'linear' (option 'params_dtype' must be one of 'fp32', 'bf16'; got boolean)",
           function () return nvfp4.linear{in_features = 64, out_features = 48, params_dtype = true} end)
checkerror("bad argument #1 to 'linear' (option 'params_dtype' must be one of 'fp32', 'bf16'; got 'u8')",
           function () return nvfp4.linear{in_features = 64, out_features = 48, params_dtype = "u8"} end)

print("testing the Linear layer's 4over6 recipe option")
checkerror("option 'four_over_six' must be one of 'none', 'weights', 'activations', 'all'; got 'grads'",
           function () return nvfp4.linear{in_features = 64, out_features = 48, four_over_six = "grads"} end)
checkerror("4over6 activations exclude the input's RHT",    -- a config rule: refused at creation
           function () return nvfp4.linear{in_features = 64, out_features = 48, four_over_six = "activations"} end)
local lin = nvfp4.linear{in_features = 64, out_features = 48, four_over_six = "all", input_rht = false,
                   grad_rht = false}
local y = lin:forward(nvfp4.randn({32, 64}, "bf16", {seed = 1}))
assert(y:shape() == nvfp4.shape{32, 48})
print("OK")
