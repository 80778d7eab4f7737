#!/bin/sh
# Host scratch buffers under an address-space limit: t:bytes() of a 200 MB tensor (a 200 MB scratch buffer
# and a 200 MB string a call, both Lua's) twelve times in 1.1 GB more than the program's own start, the
# collector stopped, must run: Lua's failed allocation collects the dead buffers and tries again (the
# binding once probed the state's allocator directly, which collects nothing: a call failed with 'cannot
# allocate ... bytes of host memory' while the garbage was held). And a scratch buffer past the limit
# names its call and size.
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
exit $fail
