-- np=2,4
-- make check's short run of the nightly layout fuzz (scenarios/fuzz/layouts.lua):
-- a fixed seed, so CI sees the same cases every time; the nightly job runs
--   mpirun -np 4 nvfp4-lua scenarios/fuzz/layouts.lua --minutes 10 --junit fuzz.xml
local top = (arg[0]:match("^(.*)/tests/lua/[^/]*$") or ".")
arg = {[0] = top .. "/scenarios/fuzz/layouts.lua", "--cases", "80", "--seed", "20250101"}
dofile(arg[0])
