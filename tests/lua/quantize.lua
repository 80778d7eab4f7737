-- Single-rank tests of quantize / dequantize / swap_first_dims and the NVFP4 buffer accessors,
-- with the buffer shapes of spec/sp-linear-and-gather.md §7.1 and the bookkeeping of §7.2.
local nvfp4 = require "nvfp4"
local S = nvfp4.shape

print("testing buffer shapes of [S, 1, H] and [S_l, 5, H]")
local x = nvfp4.randn({64, 1, 256}, "bf16", {seed = 3})
local q = nvfp4.quantize(x, {rowwise = true, columnwise = true})
assert(tostring(q) == "nvfp4.tensor fp4 [64, 1, 256] " .. nvfp4.backend(), tostring(q))
assert(q:shape() == S{64, 1, 256} and q:dtype() == "fp4")
assert(q:rowwise_data_shape() == S{64, 1, 128}, tostring(q:rowwise_data_shape()))
assert(q:rowwise_scale_shape() == S{128, 16}, tostring(q:rowwise_scale_shape()))
assert(q:columnwise_shape() == S{256, 32}, tostring(q:columnwise_shape()))
assert(q:columnwise_scale_shape() == S{256, 4}, tostring(q:columnwise_scale_shape()))
assert(#q:bytes("rowwise_data") == 64 * 128 and #q:bytes("columnwise_scale_inv") == 256 * 4)
assert(q:has_rowwise() and q:has_columnwise())
local bs = nvfp4.buffer_shapes{32, 5, 64}          -- (64,5,64,2) per rank
assert(bs.rowwise_data == S{32, 5, 32} and bs.rowwise_scale_inv == S{256, 4})
assert(bs.columnwise_data == S{64, 80} and bs.columnwise_scale_inv == S{128, 12})

print("testing buffer_shapes against what quantize makes")
-- a copy quantize cannot make has no field (M = 12: the formulas gave columnwise_scale_inv [128, 0])
bs = nvfp4.buffer_shapes{12, 1, 64}
assert(bs.rowwise_data == S{12, 1, 32} and bs.rowwise_scale_inv == S{128, 4}, tostring(bs.rowwise_scale_inv))
assert(bs.columnwise_data == nil and bs.columnwise_scale_inv == nil, tostring(bs.columnwise_scale_inv))
for _, shape in ipairs{{32, 5, 64}, {12, 1, 64}, {3, 0}, {16}, {0, 16}, {48, 1, 16}} do
  bs = nvfp4.buffer_shapes(shape)
  local r = nvfp4.quantize(nvfp4.zeros(shape))
  for _, b in ipairs{"rowwise_data", "rowwise_scale_inv"} do
    assert(bs[b] == r:buffer_shape(b), ("%s %s: %s vs quantize's %s"):format(S(shape), b, bs[b], r:buffer_shape(b)))
  end
  local okc, c = pcall(nvfp4.quantize, nvfp4.zeros(shape), {columnwise = true})
  for _, b in ipairs{"columnwise_data", "columnwise_scale_inv"} do
    local want = okc and c:buffer_shape(b) or nil
    assert(bs[b] == want, ("%s %s: %s vs quantize's %s"):format(S(shape), b, bs[b], want))
  end
end
-- K = 72: quantize's error, the rowwise rule (it gave rowwise_scale_inv [384, 4])
for _, shape in ipairs{{64, 5, 72}, {4, 24}} do
  local ok, e = pcall(nvfp4.buffer_shapes, shape)
  local _, qe = pcall(nvfp4.quantize, nvfp4.zeros(shape))
  assert(not ok and e == qe:gsub("^quantize: ", "buffer_shapes: "), tostring(e) .. " vs " .. qe)
end
assert(select(2, pcall(nvfp4.buffer_shapes, {64, 5, 72})) ==
       "buffer_shapes: shape [64, 5, 72]: last dim K=72 is not a multiple of 16 (invalid argument)")

print("testing the columnwise rules")
local f, n = nvfp4.cw_rule("flat2d", {32, 5, 64}), nvfp4.cw_rule("nd", {32, 5, 64})
assert(f.in_shape_t == S{64, 80} and f.packed_cols == 80 and f.scale_width == 10)
assert(n.in_shape_t == S{64, 32, 2} and n.packed_cols == 64 and n.scale_width == 8)
assert(nvfp4.cw_rule("nd", {2048, 1, 8192}).scale_width == 0)

print("testing amax and usages")
local ax = 0
for _, row in ipairs(x:reshape{64, 256}:tolist()) do
  for _, v in ipairs(row) do ax = math.max(ax, math.abs(v)) end
end
assert(q:amax() == ax and q:amax("columnwise") == ax, q:amax())
local r = nvfp4.quantize(x)                          -- default: rowwise only
assert(r:has_rowwise() and not r:has_columnwise() and r:columnwise_shape() == nil)
local qa = nvfp4.quantize(x, {amax = 2 * ax})
assert(qa:amax() == 2 * ax, qa:amax())

print("testing dequantize and equal")
local d = nvfp4.dequantize(q, "fp32")
assert(d:shape() == x:shape() and d:dtype() == "fp32")
local err = nvfp4.rel_error(d, x)
assert(err > 0 and err < 0.2, "NVFP4 round trip error " .. err)
-- the columnwise copy, dequantized: [K, M], the transposed values, with its own round-trip error
do
  local dc = nvfp4.dequantize(q, "bf16", "columnwise")
  local M = x:shape()[1] * x:shape()[2]
  assert(dc:shape() == nvfp4.shape{x:shape()[3], M} and dc:dtype() == "bf16", tostring(dc:shape()))
  local xt = nvfp4.swap_first_dims(x:reshape({M, x:shape()[3]}))
  local ec = nvfp4.rel_error(dc, xt)
  assert(ec > 0 and ec < 0.2 and ec ~= err, "columnwise round trip error " .. ec)
  local ok2, e2 = pcall(nvfp4.dequantize, r, "fp32", "columnwise")
  assert(not ok2 and tostring(e2):find("no columnwise copy", 1, true), tostring(e2))
  ok2, e2 = pcall(nvfp4.dequantize, q, "fp32", "cols")
  assert(not ok2 and tostring(e2):find("usage must be one of 'rowwise', 'columnwise'; got 'cols'", 1, true), tostring(e2))
end
assert(nvfp4.equal(nvfp4.quantize(x, {rowwise = true, columnwise = true}), q))
local ok, msg = nvfp4.equal(r, q)
assert(not ok and msg == "columnwise usage: absent vs present", msg)
local q2 = nvfp4.quantize(nvfp4.randn({64, 1, 256}, "bf16", {seed = 4}), {rowwise = true, columnwise = true})
ok, msg = nvfp4.equal(q, q2)
assert(not ok and msg:find("^rowwise_data: first difference at byte %d+ %(0%-based%)"), msg)

print("testing stochastic rounding and RHT options")
local s1 = nvfp4.quantize(x, {columnwise = true, sr = true, seed = 11})
local s2 = nvfp4.quantize(x, {columnwise = true, sr = true, seed = 11})
local s3 = nvfp4.quantize(x, {columnwise = true, sr = true, seed = 12})
assert(nvfp4.equal(s1, s2), "SR replays from its seed")
assert(not nvfp4.equal(s1, s3), "another SR seed, other bytes")
-- RHT with an Inf or a NaN in a columnwise block (every output sums every input): the block's
-- 16 outputs are Inf or NaN; the amax ignores NaN, and the NaN block's codes are 0x7 (+6). The
-- other columns (ones, row 9 at 2^-100; no signs) give y_0 = 15/4, the rest +-1/4. The wide-integer
-- path read such a block's exponent field 255 as 2^128 (amax 1.5 * 2^126, the other scales 0).
do
  local rows = {}
  for r = 1, 16 do
    rows[r] = {}
    for c = 1, 16 do rows[r][c] = r == 9 and 0x1p-100 or 1.0 end   -- > 41 binades apart
  end
  rows[7][4] = 0 / 0
  local qn = nvfp4.quantize(nvfp4.tensor(rows, "bf16"), {columnwise = true, rht = true, rht_signs = false})
  assert(qn:amax("columnwise") == 3.75, "RHT amax with a NaN block: " .. qn:amax("columnwise"))
  assert(qn:bytes("columnwise_data"):sub(25, 32) == string.rep("\x77", 8), "the NaN block's codes")
  rows[7][4] = -math.huge
  local qi = nvfp4.quantize(nvfp4.tensor(rows, "bf16"), {columnwise = true, rht = true, rht_signs = false})
  assert(qi:amax("columnwise") == math.huge, "RHT amax with an Inf block: " .. qi:amax("columnwise"))
end
-- the options after sr = true are taken (a given amax was dropped, 4over6 too)
local sa = nvfp4.quantize(x, {rowwise = true, columnwise = true, sr = true, seed = 11, amax = 100})
assert(sa:amax() == 100 and sa:amax("columnwise") == 100, "SR with a given amax: " .. sa:amax())
assert(not nvfp4.equal(sa, nvfp4.quantize(x, {rowwise = true, columnwise = true, sr = true, seed = 11})))
local h = nvfp4.quantize(x, {rowwise = true, columnwise = true, rht = true})
assert(h:columnwise_shape() == S{256, 32})
assert(nvfp4.equal(nvfp4.quantize(nvfp4.randn({32, 32}, "fp32", {seed = 1}), {two_d = true}),
                   nvfp4.quantize(nvfp4.randn({32, 32}, "fp32", {seed = 1}), {two_d = true})))

print("testing 4over6 (spec TV10)")
local tv10 = nvfp4.tensor({{5.0, 4.09375, -3.90625, 2.046875, 1.0, -0.6015625, 0.44921875, 3.046875,
                            -2.90625, 1.546875, 0.2001953125, -4.59375, 2.453125, -1.1015625,
                            0.80078125, 3.59375}}, "bf16")
local f6 = nvfp4.quantize(tv10, {four_over_six = true, amax = 20})
assert(f6:bytes("rowwise_scale_inv"):byte(1) == 0x6C)
assert(f6:bytes("rowwise_data") == "\x56\x3D\x92\x41\x2C\xE0\xA4\x51")
assert(nvfp4.dequantize(f6, "fp32"):get(1, 1) == 5.0 and nvfp4.dequantize(f6, "fp32"):get(1, 2) == 3.75)
-- 2-D 4over6 with a given amax pair: each copy chooses its tiles' scales with its own amax, as
-- the plain 2-D blocks do (the columnwise copy took the rowwise amax's choice)
do
  local x2 = nvfp4.randn({64, 64}, "bf16", {seed = 5})
  local function q (row, col, amax)
    return nvfp4.quantize(x2, {rowwise = row, columnwise = col, two_d = true, four_over_six = true,
                               amax = amax})
  end
  local both, colonly, rowonly = q(true, true, {3, 40}), q(false, true, 40), q(true, false, 3)
  for _, b in ipairs{"columnwise_data", "columnwise_scale_inv"} do
    assert(both:bytes(b) == colonly:bytes(b), "2-D 4over6 " .. b .. " with its own amax")
  end
  for _, b in ipairs{"rowwise_data", "rowwise_scale_inv"} do
    assert(both:bytes(b) == rowonly:bytes(b), "2-D 4over6 " .. b .. " with its own amax")
  end
  assert(not nvfp4.equal(q(false, true, 3), colonly), "the amax changes the columnwise choice")
end
local f448 = nvfp4.quantize(tv10, {four_over_six = true, amax = 20, emax = 448})
assert(f448:bytes("rowwise_scale_inv"):byte(1) == 0x72)
assert(f448:bytes("rowwise_data") == "\x56\x3D\x92\x51\x3C\xE0\xA4\x51")
-- the error metric's option reaches the library: "mae" is the default, "mse" chooses other scales for
-- some blocks of random data (its arithmetic is checked in test_ref_quantize and the cross test)
do
  local xr = nvfp4.randn({256, 256}, "bf16", {seed = 12})
  local mae = nvfp4.quantize(xr, {four_over_six = true})
  assert(nvfp4.equal(mae, nvfp4.quantize(xr, {four_over_six = true, four_over_six_error = "mae"})))
  local mse = nvfp4.quantize(xr, {four_over_six = true, four_over_six_error = "mse"})
  assert(mse:bytes("rowwise_scale_inv") ~= mae:bytes("rowwise_scale_inv"), "mse chose as mae everywhere")
  assert(nvfp4.equal(mse, nvfp4.quantize(xr, {four_over_six = true, four_over_six_error = "mse"})))
end
for _, bad in ipairs{{{four_over_six = true, rht = true, columnwise = true}, "4over6 excludes RHT"},
                     {{four_over_six_error = "mse"}, "option 'four_over_six_error' needs four_over_six = true"},
                     {{rht_signs = false}, "option 'rht_signs' needs rht = true"},
                     {{amax = {1, "x"}}, "option 'amax' must be a number or {rowwise, columnwise}"},
                     {{emax = 448}, "needs four_over_six"},
                     {{four_over_six = true, emax = 300}, "must be 256 or 448"},
                     {{four_over_six = true, four_over_six_error = "l1"}, "\"mae\" or \"mse\""}} do
  local okq, e = pcall(nvfp4.quantize, x, bad[1])
  assert(not okq and e:find(bad[2], 1, true), e)
end

print("testing swap_first_dims")
local a = nvfp4.arange({2, 3, 2})
local sw = nvfp4.swap_first_dims(a)
assert(sw:shape() == S{3, 2, 2} and sw:get(3, 2, 1) == a:get(2, 3, 1))
print("OK")
