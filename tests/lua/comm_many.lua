-- np=17
-- More ranks than the agreement's table on the stack holds (16): the metadata round takes a table on
-- the heap, after an agreement on that allocation. Gathers, a bad argument on one rank (its own error
-- there, EPEER naming it elsewhere, never a hang or a false EMISMATCH) and ranks in different calls.
local nvfp4 = require "nvfp4"
local w = nvfp4.world()
local me, size = w.rank, w.size
assert(size > 16, "run at more than 16 ranks (mpirun -np 17)")

local function fails (want, f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "expected an error with: " .. want)
  assert(tostring(e):find(want, 1, true), ("expected '%s', got: %s"):format(want, tostring(e)))
  return tostring(e)
end

print("testing the gathers")
local full = nvfp4.randn({16 * size, 32}, "bf16", {seed = 5})
local shard = full:narrow(1, me * 16 + 1, 16)
assert(nvfp4.equal(w:all_gather(shard), full), "plain gather == the full tensor")
local BOTH = {rowwise = true, columnwise = true}
assert(nvfp4.equal(w:all_gather(shard, {quantize = BOTH}), nvfp4.quantize(full, BOTH)),
       "NVFP4 gather == quantize(full)")

print("testing a bad argument on rank 0 only")
-- rank 0's binding refuses its option and tells the others through a plain gather of nothing, while
-- they are in the NVFP4 gather: the allocation round before the metadata round must not compare the
-- calls (it did, and gave every rank EMISMATCH instead of rank 0's error and EPEER)
fails(me == 0 and "has an unknown option 'colwise'" or "all_gather: rank 0 failed before the collective",
      w.all_gather, w, shard, {quantize = me == 0 and {colwise = true} or {rowwise = true}})

print("testing ranks in different calls")
fails(me == size - 1 and "rank " .. (size - 1) .. " in all_gather_plain, rank 0 in all_gather"
      or "the ranks are in different calls on this comm",
      w.all_gather, w, shard, me == size - 1 and {} or {quantize = BOTH})
assert(nvfp4.equal(w:all_gather(shard), full), "the comm still works")
print("OK")
