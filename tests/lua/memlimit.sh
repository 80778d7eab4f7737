#!/bin/sh
# Host scratch buffers under an address-space limit: t:bytes() of a 200 MB tensor (a 200 MB scratch buffer
# and a 200 MB string a call, both Lua's) twelve times in 1.1 GB more than the program's own start, the
# collector stopped, must run: Lua's failed allocation collects the dead buffers and tries again (the
# binding once probed the state's allocator directly, which collects nothing: a call failed with 'cannot
# allocate ... bytes of host memory' while the garbage was held). And a scratch buffer past the limit
# names its call and size; a dead tensor is collected for an allocation that failed; and a collective
# whose buffers do not fit on one rank tells the others.
builddir=${top_builddir:-.}
prog=$builddir/lua/nvfp4-lua
test -x "$prog" || { echo "memlimit.sh: $prog is not built"; exit 99; }
export NVFP4_BACKEND=cpu MALLOC_ARENA_MAX=2
# the address space of a started program (MPI, BLAS and CUDA's libraries), in kB
base=$("$prog" -e 'local n = require "nvfp4"; n.zeros(1)
for l in io.lines("/proc/self/status") do local v = l:match("^VmSize:%s*(%d+)") if v then print(v) end end' 2>/dev/null)
case $base in
  ''|*[!0-9]*) echo "SKIP: no VmSize in /proc/self/status"; exit 77 ;;
esac
# a sanitizer's shadow memory reserves terabytes: no limit can be set over it
test "$base" -lt 100000000 || { echo "SKIP: the program maps $base kB at start (sanitizers?)"; exit 77; }
lim=$((base + 200000 + 900000))
echo "address space at start: $base kB; ulimit -v $lim"
out=$( (ulimit -v $lim && "$prog" -e '
local nvfp4 = require "nvfp4"
local x = nvfp4.zeros({50000000})                      -- 200 MB, the library'"'"'s
collectgarbage("stop")   -- only an allocation that fails collects now (Lua'"'"'s emergency collection)
for i = 1, 12 do
  local ok, e = pcall(function () local s = x:bytes(); return #s end)
  if not ok then print("call " .. i .. ": " .. tostring(e)) os.exit(1) end
end
print("12 calls of 400 MB: done")
local ok, e = pcall(function () local t = nvfp4.ones({1000000000}); return t end)
print(ok and "4 GB: allocated" or e)') 2>&1); rc=$?
echo "$out"
fail=0
test $rc -eq 0 || { echo "not ok: exit $rc"; fail=1; }
case $out in
  *"ones: cannot allocate 4000000000 bytes of host memory (out of memory)"*) echo "ok: past the limit, named" ;;
  *) echo "not ok: past the limit, expected 'ones: cannot allocate 4000000000 bytes of host memory'"; fail=1 ;;
esac
# A library allocation that fails collects the garbage and is made again (nvfp4L_nomem_collect): with
# 400 MB live the next collection is due past 800 MB of library memory, so a dead 350 MB tensor is still
# there when 300 MB are asked for, which the limit (875 MB above the start) refuses until it is gone
# (175 MB to spare either way: the threads' malloc arenas, 64 MB of address space each, vary from run to
# run on a machine of many cores; MALLOC_ARENA_MAX keeps them few).
lim2=$((base + 875000))
echo "ulimit -v $lim2"
out=$( (ulimit -v $lim2 && "$prog" -e '
local nvfp4 = require "nvfp4"
local x = nvfp4.zeros({100000000})                     -- 400 MB, live
local y = nvfp4.zeros({1})                             -- a collection: the next one past 800 MB
y = nvfp4.zeros({87500000})                            -- 350 MB
y = nil
local ok, z = pcall(nvfp4.zeros, {75000000})           -- 300 MB
print(ok and ("300 MB: allocated, library memory " .. nvfp4.memory()) or z)
print(#x:shape())') 2>&1); rc=$?
echo "$out"
test $rc -eq 0 || { echo "not ok: exit $rc"; fail=1; }
case $out in
  *"300 MB: allocated, library memory 700000000"*) echo "ok: the dead tensor collected, the allocation made again" ;;
  *) echo "not ok: expected the 250 MB allocation to succeed after a collection"; fail=1 ;;
esac
# A collective's buffers past the limit on one rank: every rank learns of it.  A BF16 all_reduce
# at np 2 makes its result (200 MB here), the gathered shards (400 MB) and, for the sum, an FP32
# accumulator (400 MB); rank 1 has room for the first two only.  The accumulator came after the
# exchange: rank 1 failed alone and rank 0 went on with a sum; now it is made before the ranks agree,
# so rank 0 gets "rank 1 failed".  (200 MB to spare either way, as above.)
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe-1}
base2=$(${MPIRUN:-mpirun} -np 2 "$prog" -e 'local n = require "nvfp4"; local w = n.world(); n.zeros(1)
for l in io.lines("/proc/self/status") do local v = l:match("^VmSize:%s*(%d+)") if v then print(w.rank, v) end end' 2>/dev/null </dev/null |
  awk '$1 == 1 { print $2 }')
case $base2 in
  ''|*[!0-9]*) echo "not ok: no address space measured at np 2"; exit 1 ;;
esac
lim3=$((base2 + 200000 + 200000 + 400000 + 200000))
echo "np 2: rank 1's address space at start: $base2 kB; its ulimit -v $lim3"
cat >"${TMPDIR:-/tmp}/memlimit_$$.lua" <<'EOS'
local nvfp4 = require "nvfp4"
local w = nvfp4.world()
local x = nvfp4.zeros({100000000}, "bf16")             -- 200 MB
local ok, e = pcall(w.all_reduce, w, x)
print(("rank %d: %s"):format(w.rank, ok and "summed" or tostring(e)))
EOS
out=$(${MPIRUN:-mpirun} -np 1 "$prog" "${TMPDIR:-/tmp}/memlimit_$$.lua" : \
      -np 1 sh -c "ulimit -v $lim3 && exec \"\$0\" \"\$1\"" "$prog" "${TMPDIR:-/tmp}/memlimit_$$.lua" \
      </dev/null 2>&1); rc=$?
rm -f "${TMPDIR:-/tmp}/memlimit_$$.lua"
echo "$out"
test $rc -eq 0 || { echo "not ok: exit $rc"; fail=1; }
case $out in
  *"rank 1: "*"cannot allocate"*"out of memory"*) echo "ok: rank 1 out of memory" ;;
  *) echo "not ok: expected rank 1 to run out of memory in the sum"; fail=1 ;;
esac
case $out in
  *"rank 0: "*"rank 1 failed"*) echo "ok: rank 0 told" ;;
  *) echo "not ok: expected rank 0 to get 'rank 1 failed'"; fail=1 ;;
esac
exit $fail
