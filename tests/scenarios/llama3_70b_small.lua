-- np=2,4,8
-- make check: scenarios/models/llama3_70b.lua with every feature count divided by 16.
arg = {[0] = arg[0], "SCALE=16", "SL=16", table.unpack(arg)}
dofile((os.getenv("top_srcdir") or ".") .. "/scenarios/models/llama3_70b.lua")
