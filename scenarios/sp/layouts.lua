-- np=2,4,8  The Linear layer over tensor layouts: B = 1..5, TP 1/2/4/8, row and column parallel, SP on
-- and off, 2-D and 3-D inputs, each NVFP4 recipe option switched off, 4over6; odd B under `nd` must be caught.
--
-- Every case checks that forward and backward complete with the right shapes (grad_input = input,
-- grad_weight = local weight) and that the NVFP4 results stay within the recipe's error bounds of
-- an unquantized layer with the same weights and the same parallel flow (the fp32 baseline recipe):
-- output < 0.18, dgrad and wgrad < 0.22.  Small sizes: this runs in `make check`.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local world = nvfp4.world()
local K, N = 128, 128                      -- in/out features (K/TP, N/TP multiples of 16 at TP 8)
local SL = 16                              -- per-rank sequence length under SP

-- Shapes of x and dy for one layout.
local function layout (par, sp, tp, B, ndim)
  local S = sp and SL * tp or SL
  local lead = ndim == 3 and {S, B} or {S * B}
  local xs, ys = {}, {}
  local function with (t, last)
    local r = {}
    for i, d in ipairs(t) do r[i] = d end
    r[#r + 1] = last
    return r
  end
  if par == "row" then
    xs = with(lead, K // tp)
    local yl = {table.unpack(lead)}
    if sp then yl[1] = yl[1] // tp end
    ys = with(yl, N)
  else
    local xl = {table.unpack(lead)}
    if sp then xl[1] = xl[1] // tp end
    xs = with(xl, K)
    ys = with(lead, N // tp)
  end
  return xs, ys
end

-- Run the NVFP4 layer and its fp32 baseline twin; check shapes and errors.
local function check (p, opts)
  sc.need_ranks(p.TP)
  local tp = sc.group(p.TP)
  local sp = p.SP == "on"
  local xs, ys = layout(p.par, sp, p.TP, p.B, p.ndim or 3)
  -- replicated tensors (column x, row dy without SP) are the same on the group's ranks
  local g = world.rank // p.TP
  local xrep, yrep = p.par == "column" and not sp, p.par == "row" and not sp
  -- p.amax_by_rank: each rank's x in (-(1 + rank), 1 + rank), so that the shards' amaxes surely
  -- differ (randn shards share their bf16 maximum in about one case of fifty)
  local x = p.amax_by_rank
            and nvfp4.uniform(xs, "bf16", {seed = p.seed + world.rank, lo = -1 - world.rank, hi = 1 + world.rank})
            or nvfp4.randn(xs, "bf16", {seed = p.seed + (xrep and 100 * g or world.rank)})
  local dy = nvfp4.randn(ys, "bf16", {seed = p.seed + 1000 + (yrep and 100 * g or world.rank)})
  local cfg = {in_features = K, out_features = N, parallel = p.par, sequence_parallel = sp,
               group = tp, init_seed = p.seed % 1000 + tp.rank, bias = true}
  for k, v in pairs(opts or {}) do cfg[k] = v end
  local l <close> = nvfp4.linear(cfg)
  cfg.recipe, cfg.rule, cfg.frozen_weight = "fp32", nil, nil
  for _, k in ipairs{"input_rht", "weight_2d", "grad_rht", "grad_sr", "amax_reduction",
                     "four_over_six"} do cfg[k] = nil end
  local base <close> = nvfp4.linear(cfg)
  local y, yb = l:forward(x), base:forward(x)
  local dx, dw, db = l:backward(dy)
  local dxb, dwb, dbb = base:backward(dy)
  sc.shape(y:shape(), yb:shape(), "output")
  sc.shape(dx:shape(), x:shape(), "grad_input = input shape")
  local ey = nvfp4.rel_error_group(tp, y, yb)
  local edx = nvfp4.rel_error_group(tp, dx, dxb)
  sc.ok(ey < 0.18, ("output error %.4f < 0.18"):format(ey))
  sc.ok(edx < 0.22, ("dgrad error %.4f < 0.22"):format(edx))
  sc.close(db, dbb, 1e-2, "grad_bias (from the unquantized grad_output)")
  if cfg.frozen_weight == nil and not (opts or {}).frozen_weight then
    sc.shape(dw:shape(), l:weight():shape(), "grad_weight = local weight shape")
    local edw = nvfp4.rel_error_group(tp, dw, dwb)
    sc.ok(edw < 0.22, ("wgrad error %.4f < 0.22"):format(edw))
  else
    sc.eq(dw, nil, "no grad_weight for a frozen weight")
  end
  -- how each operand crossed the TP group (l:gather_path): TE's NVFP4 all-gather of quantized shards
  -- wherever SP gathers one (every shard here is quantizable: M_l = 16 B), the baseline's plain gather
  local gathered = p.TP > 1 and sp
  local want = (opts or {}).recipe and "plain" or "nvfp4"
  local frozen = (opts or {}).frozen_weight
  for name, on in pairs{grad_output = p.par == "row", fprop_input = p.par == "column",
                        wgrad_input = p.par == "column", weight = false} do
    local mine = on and not (frozen and name == "wgrad_input")   -- the baseline's weight is not frozen
    sc.eq(l:gather_path(name), gathered and mine and want or nil, name .. " gathered as")
    sc.eq(base:gather_path(name), gathered and on and "plain" or nil, "baseline's " .. name .. " gathered as")
  end
  sc.log("errors: output %.4f dgrad %.4f", ey, edx)
end

sc.case("3-D layouts", {{"par", {"row", "column"}}, {"SP", {"on", "off"}}, {"TP", {1, 2, 4, 8}},
                        {"B", {1, 2, 3, 4, 5}}}, function (p)
  check(p)
end)

sc.case("2-D inputs", {{"par", {"row", "column"}}, {"SP", {"on", "off"}}, {"TP", {1, 2, 4, 8}}},
        function (p)
  p.B, p.ndim = 3, 2
  check(p)
end)

sc.case("recipe option off", {{"off", {"rht", "weight_2d", "grad_sr", "amax_reduction",
                                         "frozen_weight"}},
                               {"par", {"row", "column"}}}, function (p)
  p.SP, p.TP, p.B = "on", 2, 3
  if p.off == "rht" then check(p, {input_rht = false, grad_rht = false})
  elseif p.off == "amax_reduction" and p.par == "column" then
    -- each rank quantizes its input shard with its own amax; the NVFP4 gather refuses
    -- shards that do not share one global scale (TE would decode them silently wrong)
    p.amax_by_rank = true
    sc.error("must share one global scale", check, p, {amax_reduction = false})
  else check(p, {[p.off] = p.off == "frozen_weight"}) end
end)

-- The RHT cancels in wgrad (dY^T X) only when both columnwise operands carry it.
sc.case("rht on one wgrad operand only", {{"off", {"input_rht", "grad_rht"}}}, function (p)
  sc.error("needs the RHT on both columnwise operands or on neither", nvfp4.linear,
           {in_features = K, out_features = N, [p.off] = false})
  local l <close> = nvfp4.linear{in_features = K, out_features = N, [p.off] = false,
                                 frozen_weight = true}   -- no wgrad: allowed
  sc.ok(l ~= nil, "frozen weight: one-sided RHT accepted")
end)

-- 4over6 (spec §9.1) on the weight, or on weight and input (whose RHT must then be off; wgrad
-- wants RHT on both columnwise operands or neither, so the grad's goes too).
sc.case("4over6 recipe", {{"fo6", {"weights", "all"}}, {"par", {"row", "column"}}}, function (p)
  p.SP, p.TP, p.B = "on", 2, 3
  if p.fo6 == "all" then check(p, {four_over_six = "all", input_rht = false, grad_rht = false})
  else check(p, {four_over_six = "weights"}) end
end)

sc.case("baseline recipes", {{"recipe", {"bf16", "fp32"}}, {"par", {"row", "column"}}}, function (p)
  p.SP, p.TP, p.B = "on", 2, 2
  check(p, {recipe = p.recipe})
end)

-- A grad_output shard that is not quantizable (M_l = 8 B, not a multiple of 16 for odd B) takes TE's
-- high-precision fallback: gathered in bf16 and quantized after, where the columnwise rule plays no
-- part (so `nd` completes too); l:gather_path says so. The gathered M = 8 B TP must be a multiple of 16.
sc.case("grad_output fallback", {{"TP", {2, 4}}, {"B", {1, 3}}, {"rule", {"flat2d", "nd"}}}, function (p)
  sc.need_ranks(p.TP)
  local tp = sc.group(p.TP)
  local S = 8 * p.TP
  local x = nvfp4.randn({S, p.B, K // p.TP}, "bf16", {seed = p.seed + world.rank})
  local dy = nvfp4.randn({S // p.TP, p.B, N}, "bf16", {seed = p.seed + 1000 + world.rank})
  local l <close> = nvfp4.linear{in_features = K, out_features = N, parallel = "row", sequence_parallel = true,
                                 group = tp, rule = p.rule, init_seed = 3 + tp.rank, keep_operands = true}
  l:forward(x)
  sc.eq(l:gather_path("grad_output"), nil, "grad_output before a backward")
  local dx, dw = l:backward(dy)
  sc.eq(l:gather_path("grad_output"), "fallback", "grad_output gathered as")
  sc.shape(dx:shape(), x:shape(), "grad_input = input shape")
  sc.shape(dw:shape(), l:weight():shape(), "grad_weight = local weight shape")
  local g = l:operand("grad_output")
  sc.shape(g:shape(), {S, p.B, N}, "gathered grad_output")
  sc.shape(g:buffer_shape("columnwise_data"), {N, S * p.B // 2}, "its columnwise data, 2-D [K, M/2]")
  l:forward(x)
  sc.eq(l:gather_path("grad_output"), nil, "a forward forgets the last backward's gather")
  sc.error("got 'grad_outptu'", l.gather_path, l, "grad_outptu")
end)

-- TE 2.21's columnwise rule in the row+SP grad gather: B = 1 crashes in the gather, odd B > 1
-- gathers a too-narrow scale that the wgrad GEMM's shape check refuses, even B is right.
sc.case("nd rule", {{"TP", {2, 4, 8}}, {"B", {1, 2, 3, 4, 5}}}, function (p)
  sc.need_ranks(p.TP)
  local tp = sc.group(p.TP)
  local xs, ys = layout("row", true, p.TP, p.B, 3)
  local x = nvfp4.randn(xs, "bf16", {seed = p.seed + world.rank})
  local dy = nvfp4.randn(ys, "bf16", {seed = p.seed + 1000 + world.rank})
  local function mk (rule)
    return nvfp4.linear{in_features = K, out_features = N, parallel = "row", sequence_parallel = true,
                        group = tp, rule = rule, init_seed = 3 + tp.rank}
  end
  local nd <close> = mk("nd")
  local fixed <close> = mk("flat2d")
  nd:forward(x)
  fixed:forward(x)
  local dxf, dwf = fixed:backward(dy)
  if p.B == 1 then
    sc.error("not allocated", nd.backward, nd, dy)
  elseif p.B % 2 == 1 then
    local M = SL * p.TP * p.B
    sc.error(("invalid columnwise_scale_inv shape (expected (128,%d)"):format((M // 16 + 3) // 4 * 4),
             nd.backward, nd, dy)
    sc.error("linear backward: wgrad (dW = dY^T X) GEMM on grad_output gathered with rule nd",
             nd.backward, nd, dy)
  else
    local dx, dw = nd:backward(dy)
    sc.close(dx, dxf, 0, "nd with even B: dgrad as flat2d")
    sc.close(dw, dwf, 0, "nd with even B: wgrad as flat2d")
  end
end)

-- What a layer was built with (l:config()), and a parallel layer without its group: in a job of
-- several ranks it would run as TP = 1 on each, without the gather a scenario means to test.
sc.case("config and group", function ()
  if world.size < 2 or K % (16 * world.size) ~= 0 then   -- a row-parallel layer over the whole world
    sc.skip(("needs 2 or more ranks dividing K/16 = %d, have %d"):format(K // 16, world.size))
  end
  local tp = sc.group(world.size)
  local l <close> = nvfp4.linear{in_features = K, out_features = N, parallel = "row", sequence_parallel = true,
                                 group = tp, rule = "nd", grad_sr = false, keep_operands = true}
  local c = l:config()
  sc.eq(c.parallel, "row", "parallel")
  sc.eq(c.sequence_parallel, true, "sequence_parallel")
  sc.eq(c.tp, world.size, "tp")
  sc.eq(c.rule, "nd", "rule")
  sc.eq(c.grad_sr, false, "grad_sr")
  sc.eq(c.grad_rht, true, "grad_rht (TE's default)")
  sc.eq(c.in_features, K, "in_features")
  sc.ok(c.group == tp, "the group itself")
  sc.error("parallel mode row without a TP group in a job of " .. world.size .. " ranks",
           nvfp4.linear, {in_features = K, out_features = N, parallel = "row", sequence_parallel = true})
  local plain <close> = nvfp4.linear{in_features = K, out_features = N}   -- no parallel mode: no group needed
  sc.eq(plain:config().tp, 1, "tp without a group")
end)

sc.run()
