-- np=2
-- make check: the seed scenario (scenarios/sp/row_parallel_b1.lua) at a reduced size; the full
-- size (S = 4096, H = 8192) is the README's main job.
arg = {[0] = arg[0], "S=256", "H=512", table.unpack(arg)}
dofile((os.getenv("top_srcdir") or ".") .. "/scenarios/sp/row_parallel_b1.lua")
