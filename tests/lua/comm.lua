-- np=2,4  Communicators from Lua: host-value collectives agree before they reduce (a bad argument on one
-- rank is the same error on every rank, no rank waits), stay exact for 64-bit integers and keep NaN;
-- split refuses different tp per rank; a group of one ignores the gather's rule; nvfp4.linear agrees on its
-- options and settings, a layer's forward on x's shape, and the NVFP4 recipe refuses an M that is not a
-- multiple of 16 (frozen weight too); the world cannot be closed; a layer refuses a closed group; a group
-- closed or collected on one rank only leaves the others going.
local nvfp4 = require "nvfp4"
local w = nvfp4.world()
local me, size = w.rank, w.size
local last = size - 1
-- its sizes are cut by powers of two (64 // size, 16 * TP dividing 64): another rank count is a skip
-- that says so, not an assertion deep inside
if size ~= 2 and size ~= 4 then
  if me == 0 then
    io.stderr:write(("tests/lua/comm.lua: written for 2 or 4 ranks, not %d: skipped\n"):format(size))
  end
  os.exit(77)
end

local function fails (pattern, f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error with: " .. pattern)
  assert(tostring(e):find(pattern, 1, true), ("expected '%s', got: %s"):format(pattern, tostring(e)))
  return e
end

print("testing all_reduce_max and all_gather_int")
-- a NaN on the last rank only: NaN on every rank (MPI_MAX alone kept it or dropped it by rank order)
local v = w:all_reduce_max(me == size - 1 and 0 / 0 or 0.5)
assert(v ~= v, "NaN from the last rank: " .. tostring(v))
local l = w:all_reduce_max({1.5, me == 1 and 0 / 0 or 2, 3})
assert(l[1] == 1.5 and l[2] ~= l[2] and l[3] == 3)
-- 64-bit integers stay exact and integers (they went through a C int: 2^40 gave 0)
assert(w:all_reduce_max(1 << 40) == 1 << 40)
assert(w:all_reduce_max(me == 0 and (1 << 31) or -5) == 1 << 31)
assert(math.type(w:all_reduce_max(3)) == "integer" and math.type(w:all_reduce_max(me == 0 and 1.5 or 3)) == "float")
local g = w:all_gather_int((1 << 32) + me)
for r = 1, size do assert(g[r] == (1 << 32) + r - 1, g[r]) end
-- bad arguments on one rank: every rank raises the same error, and the comm still works
fails("the ranks' lists differ in length: rank 1 has 3 values, rank 0 has 2", w.all_reduce_max, w,
      me == 0 and {1, 2} or {1, 2, 3})
fails("the ranks' lists differ in length: rank " .. (size - 1) .. " has 1 value, rank 0 has 2",
      w.all_reduce_max, w, me == size - 1 and {7} or {1, 2})
-- the rank named is the lowest that gave a bad argument; every rank says what it gave (the same error)
local function badarg (r, what, got, ...)
  local e = fails(("rank %d gave something else than %s"):format(r, what), ...)
  local tail = ("rank %d gave something else than %s (got %s))"):format(r, what, got)
  assert(tostring(e):sub(-#tail) == tail, tostring(e))
end
badarg(size - 1, "a number or a list of numbers", "'x' (a string) at index 2",
       w.all_reduce_max, w, me == size - 1 and {1, "x"} or {1, 2})
assert(w:all_reduce_max(me) == size - 1)
badarg(1, "an integer", "1.5", w.all_gather_int, w, me == 1 and 1.5 or 1)
badarg(0, "an integer", "'7' (a string)", w.all_gather_int, w, me == 0 and "7" or 7)
badarg(0, "a number or a list of numbers", "'5' (a string) at index 1", w.all_reduce_max, w,
       me == 0 and {"5"} or {5})
badarg(0, "a string", "5", w.all_gather_string, w, me == 0 and 5 or "x")
badarg(0, "a number or a list of numbers", "'x' (a string)", w.all_reduce_max, w, "x")   -- every rank: the lowest
badarg(0, "a number or a list of numbers", "nil", w.all_reduce_max, w)
badarg(last, "an integer", "'" .. ("x"):rep(123) .. "...", w.all_gather_int, w,    -- a long one cut
       me == last and ("x"):rep(500) or 1)
assert(#w:all_gather_string("ok") == size)
-- ranks in different collectives (these, the library's, the barrier): every rank raises, none waits (they
-- met in MPI calls of each other's and hung, or read each other's data)
fails("the ranks are in different calls on this comm: rank " .. last .. " in all_gather_int, rank 0 in all_reduce_max",
      me == last and w.all_gather_int or w.all_reduce_max, w, 3)
fails("rank " .. last .. " in comm_barrier, rank 0 in all_gather_string",
      me == last and w.barrier or w.all_gather_string, w, "s")
fails("rank " .. last .. " in all_reduce_max, rank 0 in all_gather_plain",
      me == last and w.all_reduce_max or w.all_gather, w, me == last and 1 or nvfp4.zeros({1, 16}, "fp32"))
w:barrier()
assert(w:all_gather_int(me)[size] == last)

print("testing quantize with amax_group")
-- options the binding refuses on one rank only: the others learn of it from the library (they waited
-- in its agreement before the amax reduction)
do
  local x = nvfp4.randn({16, 32}, "bf16", {seed = 1})
  local opts = me == 1 and {amax_group = w, colwise = true} or {amax_group = w}
  local ok, e = pcall(nvfp4.quantize, x, opts)
  assert(not ok, "an error on every rank")
  assert(tostring(e):find(me == 1 and "unknown option 'colwise'" or "quantize: rank 1 failed", 1, true),
         tostring(e))
  assert(nvfp4.quantize(x, {amax_group = w}):amax() == w:all_reduce_max(nvfp4.quantize(x):amax()))
  -- a rank that gives its amax next to ranks that compute theirs, without RHT: one reduction of the pairs,
  -- (a, a) for a computed one, and every rank holds the result in both directions (the computing ranks
  -- once kept their own columnwise amax, which the gather then took for the group's)
  local mine = nvfp4.quantize(x):amax()
  local q = nvfp4.quantize(x, me == 0 and {amax_group = w, rowwise = true, columnwise = true, amax = {0.5, 64}}
                               or {amax_group = w, rowwise = true, columnwise = true})
  local row, col = w:all_reduce_max(me == 0 and 0.5 or mine), w:all_reduce_max(me == 0 and 64 or mine)
  assert(q:amax() == row and q:amax("columnwise") == col,
         string.format("amaxes %g %g, expected %g %g", q:amax(), q:amax("columnwise"), row, col))
  local g = w:all_gather(q, {rowwise = true, columnwise = true})
  assert(g:amax() == row and g:amax("columnwise") == col)
end

print("testing a layer's and rel_error_group's tensor arguments")
-- a tensor the binding refuses on one rank (closed, or not one): the others learn of it from the library
do
  local lay = nvfp4.linear{in_features = 32, out_features = 16 * size, parallel = "column", group = w}
  local x = nvfp4.randn({16, 32}, "bf16", {seed = 2})
  local bad = nvfp4.randn({16, 32}, "bf16")
  bad:close()
  local ok, e = pcall(lay.forward, lay, me == 1 and bad or x)
  assert(not ok and tostring(e):find(me == 1 and "tensor is closed" or "linear_forward: rank 1 failed", 1, true),
         tostring(e))
  local y = lay:forward(x)                         -- the layer still works
  ok, e = pcall(lay.backward, lay, me == 0 and "dy" or y)
  assert(not ok and tostring(e):find(me == 0 and "nvfp4.tensor expected" or "linear_backward: rank 0 failed",
                                     1, true), tostring(e))
  ok, e = pcall(nvfp4.rel_error_group, w, y, me == 1 and 5 or y)
  assert(not ok and tostring(e):find(me == 1 and "nvfp4.tensor expected" or "rel_error_group: rank 1 failed", 1, true),
         tostring(e))
  assert(nvfp4.rel_error_group(w, y, y) == 0)
  -- one [M, K] matrix whatever its leading dims' split; a transposed reference is refused on every rank
  local a = nvfp4.arange({16, 32})
  assert(nvfp4.rel_error_group(w, a:reshape({4, 4, 32}), a) == 0)
  ok, e = pcall(nvfp4.rel_error_group, w, a, nvfp4.arange({32, 16}))
  assert(not ok and tostring(e):find("rel_error_group: x [16, 32] and ref [32, 16] are different [M, K] "
                                     .. "matrices ([16, 32] vs [32, 16];", 1, true), tostring(e))
  ok, e = pcall(nvfp4.rel_error_group, w, a, me == 0 and nvfp4.arange({16, 16}) or a)
  assert(not ok and tostring(e):find(me == 0 and "rel_error_group: x [16, 32] and ref [16, 16] are different"
                                     or "rel_error_group: rank 0 failed", 1, true), tostring(e))
  assert(nvfp4.rel_error_group(w, y, y) == 0)   -- the group still works
  lay:close()
end

print("testing a plain collective on an fp4 tensor")
fails("all_reduce_sum: x is an fp4 tensor; an NVFP4 tensor goes through the NVFP4 all-gather (nvfp4_all_gather, "
      .. "Lua's comm:all_gather), or dequantize it first", w.all_reduce, w, nvfp4.quantize(nvfp4.randn({16, 32})))

print("testing the world's __gc called by Lua code")
debug.getmetatable(w).__gc(w)    -- nothing, as w:close(): the process shares the world
assert(not w:isclosed() and w:all_reduce_max(me) == size - 1)

print("testing all_gather with thousands of extra arguments")
-- they are ignored, as Lua's own functions do; all of them went onto a C stack of 20 free slots (heap
-- corruption where the coroutine's stack had grown first)
do
  local x = nvfp4.randn({16, 32}, "bf16", {seed = 5})
  local big, extra = {}, {}
  for i = 1, 6000 do big[i] = false end
  for i = 1, 6500 do extra[i] = false end
  local g = coroutine.wrap(function ()
    local _ = select("#", table.unpack(big))
    return w:all_gather(x, 1, nil, table.unpack(extra))
  end)()
  assert(nvfp4.equal(g:narrow(1, me * 16 + 1, 16), x))
end

print("testing the sums' and split's arguments on one rank")
-- a tensor the binding refuses on one rank (closed, or not one), a tp that is no integer or outside int:
-- the others learn of it from the library instead of waiting in the collective, and the comm still works
do
  local x = nvfp4.randn({2 * size, 16}, "fp32", {seed = 4})
  local bad = nvfp4.randn({2 * size, 16}, "fp32")
  bad:close()
  local ok, e = pcall(w.reduce_scatter, w, me == 1 and 5 or x)
  assert(not ok and tostring(e):find(me == 1 and "nvfp4.tensor expected" or "reduce_scatter: rank 1 failed",
                                     1, true), tostring(e))
  ok, e = pcall(w.all_reduce, w, me == 0 and bad or x)
  assert(not ok and tostring(e):find(me == 0 and "tensor is closed" or "all_reduce_sum: rank 0 failed", 1, true),
         tostring(e))
  ok, e = pcall(w.split, w, me == 1 and "two" or 1)
  assert(not ok and tostring(e):find(me == 1 and "number expected, got string" or "split: rank 1 failed",
                                     1, true), tostring(e))
  ok, e = pcall(w.split, w, me == 0 and 2^40 or 1)
  assert(not ok and tostring(e):find(me == 0 and "split: tp=1099511627776 must be >= 1" or "split: rank 0 failed",
                                     1, true), tostring(e))
  assert(w:all_reduce(x):shape() == x:shape())           -- the comm still works
  assert(w:reduce_scatter(x):shape() == nvfp4.shape{2, 16})
end

print("testing all_gather's options on one rank")
do
  local x = nvfp4.randn({16, 32}, "bf16", {seed = 3})
  local ok, e = pcall(w.all_gather, w, x, me == 1 and {rules = "nd"} or {})
  -- called without a name (through pcall), named through its table and with self counted, as Lua names
  -- pcall(string.rep, ..)'s errors (it said #2 to 'all_gather')
  assert(not ok and tostring(e):find(me == 1 and "bad argument #3 to 'nvfp4.comm.all_gather' (unknown option 'rules')"
                                     or "all_gather_plain: rank 1 failed", 1, true), tostring(e))
  ok, e = pcall(w.all_gather, w, x, {quantize = me == 0 and {colwise = true} or {rowwise = true}})
  assert(not ok and tostring(e):find(me == 0 and "option 'quantize' has an unknown option 'colwise'"
                                     or "all_gather: rank 0 failed", 1, true), tostring(e))
  -- an amax_group there was silently replaced by the gather's own comm
  ok, e = pcall(w.all_gather, w, x, {quantize = {rowwise = true, amax_group = me == last and w or nil}})
  assert(not ok and tostring(e):find(me == last and "option 'quantize.amax_group' is not taken: the gather "
                                     .. "reduces the amax over its own communicator (leave it out)"
                                     or ("all_gather: rank " .. last .. " failed"), 1, true), tostring(e))
  assert(w:all_gather(x):shape() == nvfp4.shape{16 * size, 32})
end

print("testing what the README says of a layer's amax_reduction and frozen_weight")
do
  -- amax_reduction = false: row+SP backward's grad gather still reduces its amax over the group
  local x = nvfp4.randn({16 * size, 1, 64 // size}, "bf16", {seed = 4})
  local dy = nvfp4.uniform({16, 1, 32}, "bf16", {seed = 5 + me, lo = -(me + 1), hi = me + 1})
  local amax_l = nvfp4.quantize(dy):amax()
  local amax_g = w:all_reduce_max(amax_l)
  assert(w:all_reduce_max(-amax_l) ~= -amax_g, "the ranks' amaxes differ")
  local row = nvfp4.linear{in_features = 64, out_features = 32, parallel = "row", sequence_parallel = true,
                           group = w, amax_reduction = false, keep_operands = true}
  row:forward(x)
  -- the full grad_output is refused, saying it is this rank's shard; the layer loses nothing
  if size > 1 then
    fails(("grad_output bf16 [%d, 1, 32] does not match the output bf16 [16, 1, 32] (row parallel with "
           .. "sequence_parallel: this rank's shard of grad_output"):format(16 * size),
          row.backward, row, nvfp4.zeros({16 * size, 1, 32}, "bf16"))
    -- the shard's shape in another dtype: no word of shards
    local e = fails("grad_output fp32 [16, 1, 32] does not match the output bf16 [16, 1, 32]",
                    row.backward, row, nvfp4.zeros({16, 1, 32}, "fp32"))
    assert(not e:find("shard", 1, true), e)
  end
  local dx, dw = row:backward(dy)
  assert(dx:shape() == x:shape() and dw ~= nil)
  local go = row:operand("grad_output")
  assert(go:amax() == amax_g, ("grad_output's amax %s, the group's %s"):format(go:amax(), amax_g))
  row:close()
  -- ... while column+SP forward refuses the shards' different amaxes
  local col = nvfp4.linear{in_features = 64, out_features = 16 * size, parallel = "column",
                           sequence_parallel = true, group = w, amax_reduction = false}
  fails("differs from rank", col.forward, col, nvfp4.uniform({16, 1, 64}, "bf16",
                                                            {seed = 6 + me, lo = -(me + 1), hi = me + 1}))
  col:close()
  -- frozen_weight: backward returns dx, nil (no wgrad), nil (no bias)
  local frozen = nvfp4.linear{in_features = 64, out_features = 32, parallel = "row", sequence_parallel = true,
                              group = w, frozen_weight = true}
  frozen:forward(x)
  local r = table.pack(frozen:backward(dy))
  assert(r.n == 3 and r[1]:shape() == x:shape() and r[2] == nil and r[3] == nil, tostring(r[2]))
  frozen:close()
  -- an input whose M is not a multiple of 16: the NVFP4 recipe refuses it, frozen weight too, naming M;
  -- the bf16 and fp32 recipes quantize nothing and take it
  local x24 = nvfp4.randn({24, 1, 64}, "bf16", {seed = 7})
  for _, fw in ipairs{false, true} do
    local lay <close> = nvfp4.linear{in_features = 64, out_features = 16 * size, parallel = "column",
                                     group = w, frozen_weight = fw}
    fails("linear: input [24, 1, 64]: M=24 (the product of its leading dims) is not a multiple of 16",
          lay.forward, lay, x24)
  end
  for _, recipe in ipairs{"bf16", "fp32"} do
    local lay <close> = nvfp4.linear{in_features = 64, out_features = 16 * size, parallel = "column",
                                     group = w, recipe = recipe, frozen_weight = true}
    assert(lay:forward(x24):shape() == nvfp4.shape{24, 1, 16}, recipe)
  end
  -- nvfp4.clock: a monotonic wall clock in seconds, a float
  local t0 = nvfp4.clock()
  assert(math.type(t0) == "float" and nvfp4.clock() >= t0)
end

print("testing split")
local e = fails("split: the ranks disagree on tp: rank 1 has " .. size .. ", rank 0 has 1", w.split, w,
                me == 1 and size or 1)
local agreed = w:all_gather_string(e)
for r = 2, #agreed do assert(agreed[r] == agreed[1], "the same message on every rank") end
-- a tp the library refuses on one rank only: every rank gets an error (the check ran in the
-- binding on that rank alone and left the others in the split)
fails("split", w.split, w, me == 0 and 0 or 1)
local one <close> = w:split(1)
assert(one.size == 1)
-- a group of one ignores the gather's rule (TE quantizes and returns at world size 1): B = 1 under nd
-- gives quantize(x), not TE 2.21's zero-width scale
do
  local BOTH = {rowwise = true, columnwise = true}
  local x = nvfp4.randn({32, 1, 64}, "bf16", {seed = 8})
  local gx = one:all_gather(x, {quantize = BOTH, rule = "nd"})
  assert(gx:columnwise_shape() == nvfp4.shape{64, 16}, tostring(gx:columnwise_shape()))
  assert(nvfp4.equal(gx, nvfp4.quantize(x, BOTH)))
end

local function opts (t)
  local o = {in_features = 64 * size, out_features = 64, parallel = "row", group = w}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end

-- nvfp4.linear is collective over its group: options refused on one rank only (by the binding or by the
-- library) reach the other ranks instead of leaving them waiting in the first forward; settings that pass on
-- every rank but differ between ranks are refused on every rank, naming the setting; a forward whose x has
-- another shape on one rank is refused on every rank, naming both shapes
print("testing linear creation: options refused on one rank")
-- by the binding (an unknown key, a bad rule name), then by the library (the RHT pairing rule)
local bogus = opts()
if me == 0 then bogus.bogus = 1 end
fails(me == 0 and "unknown option 'bogus'" or "linear_create: rank 0 failed", nvfp4.linear, bogus)
fails(me == last and "option 'rule' must be one of" or ("linear_create: rank " .. last .. " failed"),
      nvfp4.linear, opts{rule = me == last and "2d" or "nd"})
fails(me == last and "input RHT is on but grad RHT is off" or ("linear_create: rank " .. last .. " failed"),
      nvfp4.linear, opts{grad_rht = me ~= last})

print("testing settings that differ between ranks")
local ce = fails("linear_create: the ranks disagree on sequence_parallel: rank " .. last .. " has off, rank 0 has on",
                nvfp4.linear, opts{sequence_parallel = me ~= last})
local cagreed = w:all_gather_string(ce)
for r = 2, #cagreed do assert(cagreed[r] == cagreed[1], "the same message on every rank") end
fails(("linear_create: the ranks disagree on in_features: rank %d has %d, rank 0 has %d"):format(last, 32 * size, 64 * size),
      nvfp4.linear, opts{in_features = (me == last and 32 or 64) * size})
-- each rank's own: the seeds
local al <close> = nvfp4.linear(opts{sequence_parallel = true, seed = 1 + me, init_seed = 5 + me})
assert(al:config().sequence_parallel == true)

print("testing a forward whose x differs on one rank")
fails(("linear_forward: x: ranks disagree: rank %d has [48, 1, 64] bf16, rank 0 has [32, 1, 64] bf16"):format(last),
      al.forward, al, nvfp4.randn({me == last and 48 or 32, 1, 64}, "bf16"))
local ay = al:forward(nvfp4.randn({32, 1, 64}, "bf16", {seed = 3 + me}))
assert(ay:shape() == nvfp4.shape{32 // size, 1, 64}, tostring(ay:shape()))
print("testing a layer's bias: l:bias(), l:set_bias(b)")
-- zero at creation; a new one, fp32 or bf16, converted to the params dtype, is Y for a zero input (exactly:
-- the GEMM's sums are 0), the bias added to every row, after the all-reduce for row parallel (TE)
for _, par in ipairs{"column", "row"} do
  for _, pd in ipairs{"fp32", "bf16"} do
    for _, bd in ipairs{"fp32", "bf16"} do
      local K, N = 64, 64 * size
      local l = nvfp4.linear{in_features = K, out_features = N, parallel = par, group = w, bias = true,
                             params_dtype = pd}
      local nb = par == "column" and N // size or N
      local b0 = l:bias()
      assert(b0:dtype() == pd and b0:shape() == nvfp4.shape{nb}, tostring(b0))
      for j = 1, nb do assert(b0:get(j) == 0) end
      local vals = {}
      for j = 1, nb do vals[j] = (j - 1) * 0.25 - 3 end        -- exact in bf16
      l:set_bias(nvfp4.tensor(vals, bd))
      local b = l:bias()
      assert(b:dtype() == pd, b:dtype())
      for j = 1, nb do assert(b:get(j) == vals[j], ("bias[%d] %g, set %g"):format(j, b:get(j), vals[j])) end
      local xk = par == "column" and K or K // size
      local y = l:forward(nvfp4.zeros({16, 2, xk}, "bf16"))
      assert(y:shape() == nvfp4.shape{16, 2, nb}, tostring(y))
      for _, i in ipairs{1, 16} do
        for _, k in ipairs{1, 2} do
          for j = 1, nb do
            assert(y:get(i, k, j) == vals[j], ("%s %s/%s: y[%d, %d, %d] = %g, bias %g")
                   :format(par, pd, bd, i, k, j, y:get(i, k, j), vals[j]))
          end
        end
      end
      fails("linear: bias shape [" .. (nb + 16) .. "] does not match the local bias shape [" .. nb .. "]",
            l.set_bias, l, nvfp4.zeros({nb + 16}))
      fails("linear: bias dtype u8 is not fp32 or bf16", l.set_bias, l, nvfp4.zeros({nb}, "u8"))
      l:close()
    end
  end
end
do
  local l <close> = nvfp4.linear{in_features = 64, out_features = 64}
  assert(l:bias() == nil)
  fails("linear: this layer has no bias", l.set_bias, l, nvfp4.zeros({64}))
end

print("testing the objects' names (tostring)")
assert(tostring(w) == ("nvfp4.comm rank %d of %d %s"):format(me, size, w.transport), tostring(w))
assert(nvfp4.backend() ~= "cpu" or w.transport == "mpi", w.transport)
do
  local l = nvfp4.linear{in_features = 64, out_features = 64}
  assert(tostring(l):find("^nvfp4%.linear 0?x?%x+$"), tostring(l))
  l:close()
  assert(tostring(l) == "nvfp4.linear (closed)", tostring(l))
  local h = w:all_gather(nvfp4.zeros({16, 64}), {quantize = {rowwise = true}, async = true})
  assert(tostring(h) == "nvfp4.handle", tostring(h))
  h:wait()
  h:close()
  assert(tostring(h) == "nvfp4.handle (closed)", tostring(h))
  local g = w:split(size)
  g:close()
  assert(tostring(g) == "nvfp4.comm (closed)", tostring(g))
end

print("testing a wait that a finalizer runs inside h:wait()")
do
  local h = w:all_gather(nvfp4.zeros({16, 64}), {quantize = {rowwise = true}, async = true})
  local inner
  nvfp4.zeros({25000000})                 -- 100 MB, dead: the next tensor made collects first
  setmetatable({}, {__gc = function () inner = h:wait() end})
  local g = h:wait()                      -- raised "handle already taken" when the finalizer took it
  assert(inner ~= nil and rawequal(g, inner), "two waits gave two tensors")
  assert(rawequal(h:wait(), g))
  h:close()
end

print("testing a quantize with amax_group whose tensor a finalizer closes on one rank")
do
  -- the quantize completes on every rank (rank 0 said "tensor is closed" after the group's agreement
  -- and its peers, waiting in the quantize, got another rank's call)
  collectgarbage()
  local x = nvfp4.randn({16, 32}, "bf16", {seed = 21})      -- the same on every rank
  local want = nvfp4.quantize(x, {rowwise = true})
  if me == 0 then
    nvfp4.zeros({25000000})               -- 100 MB, dead: the next tensor made collects first
    setmetatable({}, {__gc = function () x:close() end})
  end
  local q = nvfp4.quantize(x, {rowwise = true, amax_group = w})
  assert(nvfp4.equal(q, want) and (me ~= 0 or x:isclosed()))
  assert(w:all_reduce_max(me) == last)
end

print("testing a comm closed on one rank by a call's own option code")
do
  -- the call holds the comm it was given: closed by its options' __index (rank 0 only), a gather over it
  -- completes; a group or amax_group option closed so is refused on that rank, and the others learn of it
  -- (they were left waiting in the library's agreement)
  local x = nvfp4.randn({32, 32}, "fp32", {seed = 1})
  local g = w:split(size)
  local closer = function (key) return function (_, k) if k == key and me == 0 then g:close() end end end
  local gx = g:all_gather(x, setmetatable({quantize = {rowwise = true}}, {__index = closer("rule")}))
  assert(gx:shape() == nvfp4.shape{32 * size, 32} and (me ~= 0 or tostring(g) == "nvfp4.comm (closed)"))
  assert(w:all_reduce_max(me) == last)
  -- the option is read once on every rank, refused or not: an error path that read it again ran its
  -- __index once more on the refusing rank alone (a collective there would have hung)
  local reads = 0
  local closing = function (key, t)
    return setmetatable(t, {__index = function (_, k) if k == key then
                              reads = reads + 1
                              if me == 0 then g:close() end
                              return g end end})
  end
  g = w:split(size)
  fails(me == 0 and "option 'group' is a closed nvfp4.comm" or "linear_create: rank 0 failed", nvfp4.linear,
        closing("group", {in_features = 32, out_features = 16 * size, parallel = "column"}))
  assert(reads == 1, reads)
  g = w:split(size)
  fails(me == 0 and "option 'amax_group' is a closed nvfp4.comm" or "quantize: rank 0 failed", nvfp4.quantize,
        nvfp4.randn({16, 32}, "bf16"), closing("amax_group", {rowwise = true}))
  assert(reads == 2, reads)
  -- a layer whose group one rank closed: that rank refuses its backward and forward, the others learn of it
  g = w:split(size)
  local lg = nvfp4.linear{in_features = 32, out_features = 16 * size, parallel = "column", group = g}
  local xb = nvfp4.randn({16, 32}, "bf16", {seed = 2})
  assert(lg:forward(xb):shape() == nvfp4.shape{16, 16})
  if me == 0 then g:close() end
  fails(me == 0 and "its group (comm) was closed" or "linear_backward: rank 0 failed", lg.backward, lg,
        nvfp4.randn({16, 16}, "bf16"))
  fails(me == 0 and "its group (comm) was closed" or "linear_forward: rank 0 failed", lg.forward, lg, xb)
  assert(w:all_reduce_max(me) == last)
  lg:close()
  g:close()
end

print("testing closing")
do local ww <close> = nvfp4.world() end         -- the shared world: closing it does nothing
w:close()
assert(w.size == size and w:all_reduce_max(1) == 1, "the world stays open")
local function layer ()
  local tp <close> = w:split(size)                -- closed when this returns
  return nvfp4.linear{in_features = 32, out_features = 16 * size, parallel = "column", group = tp}
end
local lin = layer()
-- named however the method is called (pcall(lin.forward, ..) gave "bad argument #1 to '?'")
fails("calling 'forward' on bad self (its group (comm) was closed: close a layer before its group)",
      lin.forward, lin, nvfp4.randn({16, 32}, "bf16"))
fails("calling 'config' on bad self (its group (comm) was closed", lin.config, lin)
lin:close()
fails("calling 'weight' on bad self (linear layer is closed)", lin.weight, lin)

-- a rowwise-only gather of shards quantized with RHT equals quantizing the full tensor rowwise: the RHT
-- belongs to the columnwise copy it does not have (nvfp4.equal said "decoded differently: RHT ...")
do
  local full = nvfp4.randn({16 * size, 32}, "bf16", {seed = 5})
  local q = nvfp4.quantize(full:narrow(1, me * 16 + 1, 16),
                           {rowwise = true, columnwise = true, rht = true, amax_group = w})
  local ok, why = nvfp4.equal(w:all_gather(q, {rowwise = true}), nvfp4.quantize(full, {rowwise = true}))
  assert(ok, why)
end

-- an FP4 shard whose amax no one has read yet (a quantize that computed it keeps it where it was
-- computed) is gathered as it is: the shards' amaxes are read back and compared (the same data on
-- every rank here, so they agree), and the gathered tensor carries them
do
  local part = nvfp4.randn({16, 64}, "bf16", {seed = 8})        -- the same on every rank
  local q = nvfp4.quantize(part, {rowwise = true, columnwise = true})
  local g = w:all_gather(q, {rowwise = true, columnwise = true})
  local a = nvfp4.quantize(part):amax()
  assert(g:amax() == a and g:amax("columnwise") == a and q:amax() == a, tostring(g:amax()))
  assert(g:shape() == nvfp4.shape{16 * size, 64})
  -- the bytes of quantizing the gathered plain shards (whose amax is the same)
  local ok, why = nvfp4.equal(g, nvfp4.quantize(w:all_gather(part), {rowwise = true, columnwise = true}))
  assert(ok, why)
end

-- a group closed, or freed by the collector, on one rank only: the others go on and close it later (over
-- NCCL the closing rank waited for its peers in ncclCommDestroy until the job's timeout)
do
  local a, b = w:split(size), w:split(size)
  assert(a:all_reduce_max(me) == last and b:all_reduce_max(me) == last)
  if me == last then a:close(); b = nil; collectgarbage(); collectgarbage() end
  assert(w:all_reduce_max(me) == last, "the world after a group closed on one rank")
  local c <close> = w:split(size)
  assert(c:all_reduce_max(me) == last, "a new group after it")
  if me ~= last then a:close(); b:close() end
end

print("OK")
