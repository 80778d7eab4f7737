-- np=2
-- The layout fuzz's shrinker keeps a byte difference's kind whatever the two
-- bytes are: a failure "first difference at byte N: 0x5c vs 0x7b" is the same
-- failure as "0x30 vs 0x41" (the signature took the hex digits a-f for part of
-- the check, so a smaller case failing the same way with other bytes was
-- refused and shrinking stopped at the case it was given).  Here the gather's
-- oracle is made to disagree with every rowwise gather (quantize(full) of
-- another tensor of the same shape: every byte differs, whatever the case),
-- and a large failing case must shrink to the smallest rowwise gather (S = 8:
-- a shard that falls back, the gathered M = 16 quantized).
local nvfp4 = require "nvfp4"
local quantize = nvfp4.quantize
nvfp4.quantize = function (x, o)   -- the oracle's quantize of the gathered tensor (no amax_group)
  if type(o) == "table" and o.rowwise and not o.amax_group and x:dtype() ~= "fp4" then
    x = nvfp4.randn(x:shape(), x:dtype(), {seed = 12345})
  end
  return quantize(x, o)
end
local run = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/shrink_harness.lua")
local big = '{kind = "gather", tp = 2, dtype = "fp32", S = 16, lead = {5, 3}, H = 144, rowwise = true, ' ..
            'columnwise = true, rht = false, sr = false, two_d = true, async = true, rule = "flat2d", ' ..
            'fo6 = false, data = 947894655}'
local want = '{kind = "gather", tp = 2, dtype = "bf16", S = 8, lead = {}, H = 16, rowwise = true, ' ..
             'columnwise = false, rht = false, sr = false, two_d = false, async = false, rule = "flat2d", ' ..
             'fo6 = false, data = 947894655}'
run(big, want, "gather vs quantize(gathered): rowwise_data: first difference at byte 0 ",
    "the case shrank to the smallest rowwise gather, failing as it did")
