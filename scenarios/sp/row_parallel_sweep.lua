-- np=2,4  The seed case's layer over TP = 2, 4 and B = 1, 2, 3, 5: a row-parallel, sequence-parallel Linear's
-- backward gathers grad_output [S/TP, B, N]. Under `flat2d` backward completes and the gathered grad_output
-- (l:operand) has 2-D columnwise buffers, [N, M/2] and [ru(N, 128), ru(M/16, 4)], M = S·B, and equals the
-- full tensor quantized as the layer's grad quantizer does (RHT on the columnwise copy; grad_sr off, whose
-- bits follow each shard's own element index). Under `nd` B = 1 fails with "not allocated", an odd B > 1 in
-- the wgrad GEMM's scale-shape check (the gather alone gives a scale TP·U wide, U = S/TP·(B-1)/16), and an
-- even B completes with the same buffers as `flat2d`.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()
local S_L, K, N = 16, 128, 64              -- per-rank sequence, in_features, out_features
local DY_Q = {rowwise = true, columnwise = true, rht = true}

local function ru (x, m) return (x + m - 1) // m * m end

sc.case("row+SP backward", {{"TP", {2, 4}}, {"B", {1, 2, 3, 5}}}, function (p)
  sc.need_ranks(p.TP)
  local tp = sc.group(p.TP)
  local S, M = S_L * p.TP, S_L * p.TP * p.B
  local x = nvfp4.randn({S, p.B, K // p.TP}, "bf16", {seed = p.seed + world.rank})
  local full = nvfp4.randn({S, p.B, N}, "bf16", {seed = p.seed + 1000 + world.rank // p.TP})
  local dy = full:narrow(1, tp.rank * S_L + 1, S_L)                 -- this rank's [S/TP, B, N]
  local function layer (rule)
    return nvfp4.linear{in_features = K, out_features = N, parallel = "row", sequence_parallel = true,
                        group = tp, rule = rule, grad_sr = false, keep_operands = true}
  end

  local l <close> = layer("flat2d")
  l:forward(x)
  local dx, dw = l:backward(dy)
  sc.shape(dx:shape(), {S, p.B, K // p.TP}, "dgrad")
  sc.shape(dw:shape(), {N, K // p.TP}, "wgrad")
  sc.eq(l:gather_path("grad_output"), "nvfp4", "grad_output's gather")
  local g = l:operand("grad_output")
  sc.shape(g:columnwise_data_shape(), {N, M // 2}, "flat2d columnwise data")
  sc.shape(g:columnwise_scale_shape(), {ru(N, 128), ru(M // 16, 4)}, "flat2d columnwise scale")
  sc.bytes(g, nvfp4.quantize(full, DY_Q), "gathered grad_output vs the full tensor quantized")

  local ln <close> = layer("nd")
  ln:forward(x)
  if p.B == 1 then
    sc.error("not allocated", function () return ln:backward(dy) end)
  elseif p.B % 2 == 1 then
    sc.error("invalid columnwise_scale_inv shape", function () return ln:backward(dy) end)
    local U = S_L * (p.B - 1) // 16                                  -- correct: S_L·B/16
    local gq = tp:all_gather(dy, {quantize = DY_Q, rule = "nd"})
    sc.shape(gq:columnwise_data_shape(), {N, M // 2}, "nd columnwise data")
    sc.shape(gq:columnwise_scale_shape(), {ru(N, 128), ru(U * p.TP, 4)}, "nd columnwise scale, too narrow")
  else
    ln:backward(dy)
    sc.bytes(ln:operand("grad_output"), g, "nd with even B: the same gathered grad_output")
  end
end)

sc.run()
