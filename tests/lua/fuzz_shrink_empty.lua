-- np=2
-- The layout fuzz draws empty shards (S = 0: M_l = 0, field case BH-22), runs
-- them through the oracle's byte check and shrinks them as any case.  Here
-- the oracle's quantize of an empty gathered tensor is made to drop its
-- columnwise copy (as a library that lost an empty shard's columnwise copy
-- would compare), and a large empty case must fail and shrink to the
-- smallest empty gather of both copies, S staying 0 on the way down (the
-- leading dims gone, H to 16, the options off; without the rowwise copy it
-- fails another way, so that one stays).
local nvfp4 = require "nvfp4"
local quantize = nvfp4.quantize
nvfp4.quantize = function (x, o)   -- the oracle's quantize of the gathered tensor (no amax_group)
  if type(o) == "table" and o.columnwise and not o.amax_group and x:dtype() ~= "fp4" and x:shape()[1] == 0 then
    local p = {}
    for k, v in pairs(o) do p[k] = v end
    p.columnwise, p.rowwise, p.rht = nil, true, nil
    o = p
  end
  return quantize(x, o)
end
local run = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/shrink_harness.lua")
local big = '{kind = "gather", tp = 2, dtype = "fp32", S = 0, lead = {5, 3}, H = 144, rowwise = true, ' ..
            'columnwise = true, rht = false, sr = false, two_d = true, async = true, rule = "flat2d", ' ..
            'fo6 = false, data = 947894655}'
local want = '{kind = "gather", tp = 2, dtype = "bf16", S = 0, lead = {}, H = 16, rowwise = true, ' ..
             'columnwise = true, rht = false, sr = false, two_d = false, async = false, rule = "flat2d", ' ..
             'fo6 = false, data = 947894655}'
run(big, want, "gather vs quantize(gathered): columnwise usage: present vs absent",
    "the empty case shrank to the smallest empty gather, failing as it did")
