-- np=2,4,8  The Linear layers of Llama 3 70B (hidden 8192, FFN 28672, 64 query / 8 KV heads of 128)
-- under NVFP4 with sequence parallelism, at a small sequence length on CPU, TP 2/4/8 as ranks allow.
--
-- Megatron's layout: QKV [8192 -> 10240] and FC1 (gate+up) [8192 -> 2*28672] are column parallel,
-- the attention projection [8192 -> 8192] and FC2 [28672 -> 8192] row parallel; grad_output is
-- 3-D [S/TP, 1, H] as in the seed case.  Each layer runs forward and backward and is checked for
-- shapes and against the same layer under the fp32 baseline recipe (output < 0.18, dgrad and
-- wgrad < 0.22).  Arguments: SL=<per-rank sequence length, default 32>, SCALE=<divide every
-- feature count, default 1>, B=<batch, default 1>; `make check` runs SCALE=16.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local clock = nvfp4.clock or os.clock     -- wall clock when the module has one

local P = sc.params({SL = 32, SCALE = 1, B = 1}, 1800)   -- full size: up to a minute per case on a CPU

local world = nvfp4.world()
local HID, FFN, QKV = 8192 // P.SCALE, 28672 // P.SCALE, 10240 // P.SCALE
local LAYERS = {
  qkv      = {K = HID, N = QKV,     par = "column"},
  attn_out = {K = HID, N = HID,     par = "row"},
  fc1      = {K = HID, N = 2 * FFN, par = "column"},
  fc2      = {K = FFN, N = HID,     par = "row"},
}
local function say (fmt, ...) if world.rank == 0 then print(fmt:format(...)); io.stdout:flush() end end

sc.case("llama3-70b layer", {{"layer", {"qkv", "attn_out", "fc1", "fc2"}}, {"TP", {2, 4, 8}}},
        function (p)
  sc.need_ranks(p.TP)
  local L = LAYERS[p.layer]
  local tp = sc.group(p.TP)
  local S, B = P.SL * p.TP, P.B
  local xs = L.par == "row" and {S, B, L.K // p.TP} or {P.SL, B, L.K}
  local ys = L.par == "row" and {P.SL, B, L.N} or {S, B, L.N // p.TP}
  local x = nvfp4.randn(xs, "bf16", {seed = p.seed + world.rank})
  local dy = nvfp4.randn(ys, "bf16", {seed = p.seed + 1000 + world.rank})
  local cfg = {in_features = L.K, out_features = L.N, parallel = L.par, sequence_parallel = true,
               group = tp, params_dtype = "bf16", init_seed = 7 + tp.rank}
  local t0 = clock()
  local l <close> = nvfp4.linear(cfg)
  local y = l:forward(x)
  local dx, dw = l:backward(dy)
  local t = clock() - t0
  sc.shape(dx:shape(), x:shape(), "grad_input = input shape")
  sc.shape(dw:shape(), L.par == "row" and {L.N, L.K // p.TP} or {L.N // p.TP, L.K},
           "grad_weight = local weight shape")
  cfg.recipe = "fp32"
  local base <close> = nvfp4.linear(cfg)
  local yb = base:forward(x)
  local dxb, dwb = base:backward(dy)
  local ey, edx, edw = nvfp4.rel_error_group(tp, y, yb), nvfp4.rel_error_group(tp, dx, dxb),
                       nvfp4.rel_error_group(tp, dw, dwb)
  say("#   %-8s TP=%d  W_r %s  x %s  nvfp4 fwd+bwd %.2f s  errors: y %.3f dx %.3f dw %.3f",
      p.layer, p.TP, tostring(l:weight():shape()), tostring(x:shape()), t, ey, edx, edw)
  sc.ok(ey < 0.18, ("output error %.4f < 0.18"):format(ey))
  sc.ok(edx < 0.22, ("dgrad error %.4f < 0.22"):format(edx))
  sc.ok(edw < 0.22, ("wgrad error %.4f < 0.22"):format(edw))
end)

sc.run()
