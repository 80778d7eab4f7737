-- np=2,4  nvfp4.linear is collective over its group: options refused on one rank only (by the binding or by
-- the library) reach the other ranks as errors instead of leaving them waiting in the first forward; settings
-- that pass on every rank but differ between ranks (sequence parallelism, in_features) are refused on every
-- rank, naming the setting; a forward whose x has another shape on one rank is refused on every rank, naming
-- both shapes.  Each call must return on every rank; a rank left waiting would hang the test.
local nvfp4 = require "nvfp4"
local w = nvfp4.world()
local me, size, last = w.rank, w.size, w.size - 1

local function fails (pattern, f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error with: " .. pattern)
  assert(tostring(e):find(pattern, 1, true), ("expected '%s', got: %s"):format(pattern, tostring(e)))
  return e
end

local function opts (t)
  local o = {in_features = 64 * size, out_features = 64, parallel = "row", group = w}
  for k, v in pairs(t or {}) do o[k] = v end
  return o
end

print("testing options refused on one rank")
-- by the binding (an unknown key, a bad rule name), then by the library (the RHT pairing rule)
local bogus = opts()
if me == 0 then bogus.bogus = 1 end
fails(me == 0 and "unknown option 'bogus'" or "linear_create: rank 0 failed", nvfp4.linear, bogus)
fails(me == last and "option 'rule' must be one of" or ("linear_create: rank " .. last .. " failed"),
      nvfp4.linear, opts{rule = me == last and "2d" or "nd"})
fails(me == last and "input RHT is on but grad RHT is off" or ("linear_create: rank " .. last .. " failed"),
      nvfp4.linear, opts{grad_rht = me ~= last})

print("testing settings that differ between ranks")
local e = fails("linear_create: the ranks disagree on sequence_parallel (from 0 to 1)",
                nvfp4.linear, opts{sequence_parallel = me ~= last})
local agreed = w:all_gather_string(e)
for r = 2, #agreed do assert(agreed[r] == agreed[1], "the same message on every rank") end
fails(("linear_create: the ranks disagree on in_features (from %d to %d)"):format(32 * size, 64 * size),
      nvfp4.linear, opts{in_features = (me == last and 32 or 64) * size})
-- each rank's own: the seeds
local l <close> = nvfp4.linear(opts{sequence_parallel = true, seed = 1 + me, init_seed = 5 + me})
assert(l:config().sequence_parallel == true)

print("testing a forward whose x differs on one rank")
fails(("linear_forward: x: ranks disagree: rank %d has [48, 1, 64] bf16, rank 0 has [32, 1, 64] bf16"):format(last),
      l.forward, l, nvfp4.randn({me == last and 48 or 32, 1, 64}, "bf16"))
local y = l:forward(nvfp4.randn({32, 1, 64}, "bf16", {seed = 3 + me}))
assert(y:shape() == nvfp4.shape{32 // size, 1, 64}, tostring(y:shape()))
print("OK")
