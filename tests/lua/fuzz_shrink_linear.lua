-- np=2
-- The layout fuzz shrinks a Linear case's S in steps that keep the parity of
-- M_l/16: a fault seen only where x's M on a rank is an odd multiple of 16,
-- 48 or more, stopped at S = 112 (16 less flips the parity, and S = 16 is
-- below 48); halving toward 16 in multiples of 16 and 32 less take it down
-- to S = 48.  Here the layer is made to fail its forward on such an M.
local nvfp4 = require "nvfp4"
local linear = nvfp4.linear
nvfp4.linear = function (conf)
  local l = linear(conf)
  local function forward (_, x)
    local s = x:shape()
    local M = x:numel() // s[#s]
    if conf.recipe == "nvfp4" and M % 16 == 0 and M // 16 % 2 == 1 and M >= 48 then
      error(("planted: x's M = %d is an odd multiple of 16"):format(M), 0)
    end
    return l:forward(x)
  end
  return setmetatable({}, {
    __index = function (_, k)
      if k == "forward" then return forward end
      return function (_, ...) return l[k](l, ...) end
    end,
    __close = function () l:close() end})
end
local run = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/shrink_harness.lua")
local big = '{kind = "linear", tp = 2, dtype = "bf16", S = 112, lead = {}, H = 16, N = 16, rht = false, ' ..
            'rule = "flat2d", parallel = "column", sp = true, bias = false, grad_sr = false, weight_2d = false, ' ..
            'amax_reduction = false, fo6_recipe = "none", frozen = false, data = 17}'
local want = big:gsub("S = 112", "S = 48")
run(big, want, "planted: x's M = 48 is an odd multiple of 16",
    "the Linear case shrank from S = 112 to S = 48, failing as it did")
