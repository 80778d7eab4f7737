-- np=2,4,8  Row-parallel Linear backward with sequence parallelism: grad_output shards [S/TP, B, H]
-- gathered along S in NVFP4 (rowwise + columnwise) must equal quantizing the full tensor; TE 2.21's
-- "nd" columnwise rule fails with "not allocated" for B = 1 and gives a too-narrow scale for odd B.
-- H = 48 as well as 64: H/16 = 3 scale columns a row, so the rowwise scale's padding to 4 is seen.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local S_L = 32                              -- per-rank sequence length (the hidden size H: p.H)
local world = nvfp4.world()
local GRID = {{"TP", {2, 4, 8}}, {"B", {1, 2, 3, 4, 5}}, {"H", {64, 48}}}
local BOTH = {rowwise = true, columnwise = true}

local function ru (x, m) return (x + m - 1) // m * m end

-- The full [S, B, H] tensor of this TP group (the same on its ranks), this
-- rank's shard of it, the group, and the full tensor quantized on one rank.
local function setup (p)
  sc.need_ranks(p.TP)
  local tp = sc.group(p.TP)
  local S = S_L * p.TP
  local full = nvfp4.randn({S, p.B, p.H}, "bf16", {seed = p.seed + world.rank // p.TP})
  local shard = full:narrow(1, tp.rank * S_L + 1, S_L)
  return tp, shard, nvfp4.quantize(full, BOTH), S * p.B
end

sc.case("gather flat2d", GRID, function (p)
  local tp, shard, ref, M = setup(p)
  local H = p.H
  local g = tp:all_gather(shard, {quantize = BOTH})
  sc.shape(g:shape(), {S_L * p.TP, p.B, H}, "gathered shape")
  sc.shape(g:rowwise_data_shape(), {S_L * p.TP, p.B, H // 2}, "rowwise data")
  sc.shape(g:rowwise_scale_shape(), {ru(M, 128), ru(H // 16, 4)}, "rowwise scale_inv")
  sc.shape(g:columnwise_data_shape(), {H, M // 2}, "columnwise data (always 2-D)")
  sc.shape(g:columnwise_scale_shape(), {ru(H, 128), ru(M // 16, 4)}, "columnwise scale_inv")
  sc.bytes(g, ref, "gathered vs the full tensor quantized")
end)

sc.case("gather nd (TE 2.21)", GRID, function (p)
  local tp, shard, ref, M = setup(p)
  local H = p.H
  local opts = {quantize = BOTH, rule = "nd"}
  local U = nvfp4.cw_rule("nd", shard:shape()).scale_width
  if p.B == 1 then
    sc.eq(U, 0, "nd rule's unpadded columnwise scale width")
    sc.error("not allocated", function () return tp:all_gather(shard, opts) end)
    return
  end
  local g = tp:all_gather(shard, opts)
  sc.bytes(g:bytes("rowwise_data"), ref:bytes("rowwise_data"), "rowwise data")
  sc.bytes(g:bytes("columnwise_data"), ref:bytes("columnwise_data"), "columnwise data")
  if p.B % 2 == 1 then
    sc.eq(U, S_L * (p.B - 1) // 16, "nd width per rank (correct: " .. S_L * p.B // 16 .. ")")
    sc.shape(g:columnwise_scale_shape(), {ru(H, 128), ru(U * p.TP, 4)}, "nd columnwise scale_inv")
    sc.ok(g:columnwise_scale_shape()[2] < ru(M // 16, 4), "nd scale narrower than " .. ru(M // 16, 4))
  else
    sc.bytes(g, ref, "nd with even B: still right")
  end
end)

-- With the RHT on the columnwise copy (the Linear's grad_output quantizer) the two usages have their
-- own amaxes (the rotated tensor's for columnwise): the gathered tensor keeps each one, reduced.
sc.case("gather flat2d, RHT", {{"TP", {2, 4}}, {"B", {1, 3}}, {"H", {64}}}, function (p)
  local tp, shard = setup(p)
  local RHT = {rowwise = true, columnwise = true, rht = true}
  local g = tp:all_gather(shard, {quantize = RHT})
  local ref = nvfp4.quantize(tp:all_gather(shard), RHT)
  sc.bytes(g, ref, "gathered with the RHT vs the full tensor quantized with it")
end)

sc.case("gather async", {{"TP", {2}}, {"B", {1, 3}}, {"H", {64}}}, function (p)
  local tp, shard, ref = setup(p)
  local h <close> = tp:all_gather(shard, {quantize = BOTH, async = true})
  local g = h:wait()
  sc.ok(rawequal(h:wait(), g), "a second wait returns the same tensor")
  sc.eq(h:finish_count(), 1, "finish steps run")
  sc.bytes(g, ref, "async gather vs the full tensor quantized")
end)

sc.run()
