-- np=2,4
-- The layout fuzz finds TE 2.21's columnwise bug on its own: with the gather's
-- `nd` rule (and cases drawn exactly as in the nightly run) a short run must
-- fail with a too-narrow gathered columnwise scale (odd second-to-last dim)
-- and shrink it; the test passes only if it does.
local top = (arg[0]:match("^(.*)/tests/lua/[^/]*$") or ".")
arg = {[0] = top .. "/scenarios/fuzz/layouts.lua", "--rule", "nd", "--cases", "40",
       "--seed", "20250101", "--expect", "gathered columnwise_scale_inv: shape"}
dofile(arg[0])
