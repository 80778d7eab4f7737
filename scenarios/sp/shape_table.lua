-- np=2,4  The shape table of spec/sp-linear-and-gather.md §7, row by row at its own sizes: per rank a
-- grad_output shard [S/TP, B, H] of the row+SP backward, quantized rowwise + columnwise (§7.1), the
-- columnwise bookkeeping of the fixed flat2d rule and of TE 2.21's nd rule with its verdict -- crash,
-- silently narrow scale, or fine (§7.2) -- and the gathered buffers, equal to the full tensor quantized
-- (§7.3). The numbers below are the table's, not formulas. A row runs where the world has exactly TP
-- ranks (np 2: the five TP = 2 rows; np 4: the TP = 4 one) and is skipped elsewhere.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local world = nvfp4.world()
local BOTH = {rowwise = true, columnwise = true}

-- loc: §7.1 (rowwise data, rowwise scale, columnwise data, columnwise scale); fix / nd: §7.2
-- (in_shape_t, C_t, U); verdict, nd_scale (the padded scale nd gathers) and gemm (the wgrad check's
-- message): §7.2's last columns; out: §7.3 (M and the four gathered buffers)
local ROWS = {
  {S = 4096, B = 1, H = 8192, TP = 2,
   loc = {{2048, 1, 4096}, {2048, 512}, {8192, 1024}, {8192, 128}},
   fix = {{8192, 1024}, 1024, 128}, nd = {{8192, 2048, 0}, 0, 0}, verdict = "crash",
   out = {4096, {4096, 1, 4096}, {4096, 512}, {8192, 2048}, {8192, 256}}},
  {S = 4096, B = 3, H = 8192, TP = 2,
   loc = {{2048, 3, 4096}, {6144, 512}, {8192, 3072}, {8192, 384}},
   fix = {{8192, 3072}, 3072, 384}, nd = {{8192, 2048, 1}, 2048, 256}, verdict = "narrow",
   nd_scale = {8192, 512}, gemm = "invalid columnwise_scale_inv shape (expected (8192,768), got (8192,512))",
   out = {12288, {4096, 3, 4096}, {12288, 512}, {8192, 6144}, {8192, 768}}},
  {S = 4096, B = 2, H = 8192, TP = 2,
   loc = {{2048, 2, 4096}, {4096, 512}, {8192, 2048}, {8192, 256}},
   fix = {{8192, 2048}, 2048, 256}, nd = {{8192, 2048, 1}, 2048, 256}, verdict = "fine",
   out = {8192, {4096, 2, 4096}, {8192, 512}, {8192, 4096}, {8192, 512}}},
  {S = 8192, B = 1, H = 8192, TP = 4,
   loc = {{2048, 1, 4096}, {2048, 512}, {8192, 1024}, {8192, 128}},
   fix = {{8192, 1024}, 1024, 128}, nd = {{8192, 2048, 0}, 0, 0}, verdict = "crash",
   out = {8192, {8192, 1, 4096}, {8192, 512}, {8192, 4096}, {8192, 512}}},
  {S = 128, B = 1, H = 256, TP = 2,
   loc = {{64, 1, 128}, {128, 16}, {256, 32}, {256, 4}},
   fix = {{256, 32}, 32, 4}, nd = {{256, 64, 0}, 0, 0}, verdict = "crash",
   out = {128, {128, 1, 128}, {128, 16}, {256, 64}, {256, 8}}},
  {S = 64, B = 5, H = 64, TP = 2,
   loc = {{32, 5, 32}, {256, 4}, {64, 80}, {128, 12}},
   fix = {{64, 80}, 80, 10}, nd = {{64, 32, 2}, 64, 8}, verdict = "narrow",
   nd_scale = {128, 16}, gemm = "invalid columnwise_scale_inv shape (expected (128,20), got (128,16))",
   out = {320, {64, 5, 32}, {384, 4}, {64, 160}, {128, 20}}},
}

local NAMES = {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"}

-- t's four buffer shapes by name, and the four of a table row in the same form
local function buffers (t)
  local b = {}
  for _, n in ipairs(NAMES) do b[n] = t:buffer_shape(n) end
  return b
end

local function named (four)
  local b = {}
  for i, n in ipairs(NAMES) do b[n] = four[i] end
  return b
end

local function rowname (r) return ("(%d,%d,%d,%d)"):format(r.S, r.B, r.H, r.TP) end

local function bookkeeping (rule, shard, want)
  local c = nvfp4.cw_rule(rule, shard:shape())
  sc.shape(c.in_shape_t, want[1], rule .. " in_shape_t")
  sc.eq(c.packed_cols, want[2], rule .. " C_t (packed columns)")
  sc.eq(c.scale_width, want[3], rule .. " U (unpadded scale width)")
end

-- Row r of the scale s (a tensor's padded buffer of `width` bytes a row), bytes lo..hi (1-based).
local function cut (s, width, r, lo, hi) return s:sub(r * width + lo, r * width + hi) end

for _, r in ipairs(ROWS) do
  sc.case("§7 " .. rowname(r), function (p)
    if world.size ~= r.TP then sc.skip(("the row's TP = %d needs np %d"):format(r.TP, r.TP)) end
    local S_l = r.S // r.TP
    local full <close> = nvfp4.uniform({r.S, r.B, r.H}, "bf16", {seed = p.seed, lo = -4, hi = 4})
    local shard = full:narrow(1, world.rank * S_l + 1, S_l)
    -- §7.1: the shard quantized on its own (the buffers the gather's local cast makes)
    local q = nvfp4.quantize(shard, BOTH)
    sc.shapes(buffers(q), named(r.loc), "§7.1 local buffers")
    q:close()
    -- §7.2: the two rules' bookkeeping, then what the nd gather does
    bookkeeping("flat2d", shard, r.fix)
    bookkeeping("nd", shard, r.nd)
    local ref <close> = nvfp4.quantize(full, BOTH)
    local ndopts = {quantize = BOTH, rule = "nd"}
    if r.verdict == "crash" then
      sc.error("swap_first_dims: Input is not allocated", function () return world:all_gather(shard, ndopts) end)
    else
      local g = world:all_gather(shard, ndopts)
      sc.bytes(g:bytes("rowwise_data"), ref:bytes("rowwise_data"), "nd: rowwise data right")
      sc.bytes(g:bytes("columnwise_data"), ref:bytes("columnwise_data"), "nd: columnwise data right")
      if r.verdict == "fine" then
        sc.bytes(g, ref, "nd with even B: every buffer right")
      else
        sc.shape(g:columnwise_scale_shape(), r.nd_scale, "nd: the too-narrow columnwise scale")
        sc.error(r.gemm, function () return nvfp4.gemm(g, "columnwise", g, "columnwise") end)
        -- what it holds (§7.2): row k is, rank by rank, the first U of that rank's M_l/16 scale columns
        local U, W, Wl = r.nd[3], r.nd_scale[2], r.loc[4][2]
        local a = ref:amax()
        local got = g:bytes("columnwise_scale_inv")
        for t = 0, r.TP - 1 do
          local mine = nvfp4.quantize(full:narrow(1, t * S_l + 1, S_l), {rowwise = true, columnwise = true,
                                                                        amax = {a, ref:amax("columnwise")}})
          local want = mine:bytes("columnwise_scale_inv")
          for k = 0, r.H - 1 do
            local x, y = cut(got, W, k, t * U + 1, (t + 1) * U), cut(want, Wl, k, 1, U)
            if x ~= y then sc.bytes(x, y, ("nd scale row %d, rank %d's columns"):format(k, t)) end
          end
          mine:close()
        end
        sc.ok(true, "nd scale: each rank's first " .. U .. " columns of " .. r.out[1] // r.TP // 16)
      end
      g:close()
    end
    -- §7.3: the fixed rule's gather is the full tensor quantized
    local g <close> = world:all_gather(shard, {quantize = BOTH})
    sc.shape(g:shape(), {r.S, r.B, r.H}, "§7.3 gathered shape (M = " .. r.out[1] .. ")")
    sc.shapes(buffers(g), named{r.out[2], r.out[3], r.out[4], r.out[5]}, "§7.3 gathered buffers")
    sc.bytes(g, ref, "gathered vs the full tensor quantized")
  end)
end

sc.run()
