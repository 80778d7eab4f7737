-- Nightly layout fuzz: random tensor layouts through the NVFP4 all-gather and
-- the TP/SP Linear layer, drawn from a seed, checked against properties; a
-- failing case is shrunk and printed as a command line and a Lua table.
--
--   mpirun -np 4 nvfp4-lua scenarios/fuzz/layouts.lua --minutes 10 --junit fuzz.xml
--   mpirun -np 2 nvfp4-lua scenarios/fuzz/layouts.lua --cases 40 --seed 7
--   mpirun -np 2 nvfp4-lua scenarios/fuzz/layouts.lua --seed 7 --case 12    (replay)
--   mpirun -np 2 nvfp4-lua scenarios/fuzz/layouts.lua --replay '{kind = "gather", ..}'
--   mpirun -np 2 nvfp4-lua scenarios/fuzz/layouts.lua --rule nd --cases 60 \
--          --expect "gathered columnwise_scale_inv: shape"
--
-- Options (after the script, or --seed/--timeout/--junit before it; --help
-- prints this):
--   --minutes M | --cases N   how long to run (default --cases 50; at least
--                             one case runs)
--   --seed S                  the run seed (default: nvfp4-lua's); case K of
--                             seed S is always the same case
--   --case K                  run only case K (replay), shrinking it if it fails
--   --replay TABLE            run one case given as a Lua table (as printed;
--                             a key no case has, or one missing, is refused;
--                             S may be 0, and a gather's H; without a rule
--                             it takes --rule's)
--                             (one of --minutes, --cases, --case, --replay)
--   --rule flat2d | nd        the gather's columnwise rule (default flat2d, the
--                             fix); nd: TE 2.21's (cases are drawn exactly as
--                             usual; only the rule differs)
--   --expect TEXT             exit 0 only if a case failed with TEXT in its
--                             message (make check: --rule nd must find odd B)
--   --no-shrink, --max-shrink N (shrink runs, default 300), --timeout S (per
--   case, default 60), --junit FILE, -v (print every case)
-- A bad option value ends the job with exit status 2, as the framework's do.
--
-- Output: a progress line "#   N cases so far, F failures" every 5 s, a
-- failure's FAIL line and replay command at once (before shrinking), and last
-- the summary "# N cases, F failures, ..." (.ci/nightly reads it: a job that
-- a crash or a timeout ends has none).  With --junit, rank 0 rewrites the
-- file before every case, naming the case under way as failed ("the job ended
-- during this case", with its replay command), so a crash or a timeout still
-- leaves the case to triage; the last write holds the verdicts.
--
-- A case: kind "gather" (a shard [S_l, d.., H] gathered over a TP group with
-- quantize options, sync or async; or, fp4_input, the shard quantized first
-- with its amax reduced over the group, holding both copies, the rowwise or
-- the columnwise one, gathered as it is or requantized) or "linear" (column/row parallel, SP on or
-- off, recipe switches incl. 4over6, forward + backward; gathers may use 4over6).  TP divides the world; with TP
-- below the world size there are several groups.  Shards may be empty (S = 0:
-- M_l = 0 on every rank, field case BH-22, in a gather or a Linear layer's
-- SP gathers) and a gather's H may be 0 (K = 0; the layer refuses
-- in_features 0): the oracle's shapes are spec §1's with M or K = 0.
-- Properties:
--   shapes   every buffer's shape equals the oracle below, computed here from
--            the spec (sp-linear-and-gather.md §1, §7), not by the library;
--   gather   = quantize(the gathered tensor), byte for byte (every buffer and
--            both amaxes); with SR only shapes and numerics (SR's random bits
--            follow the element index, so shards round differently); an FP4
--            shard lacking a wanted columnwise copy is requantized from its
--            rowwise one: = quantize(dequantize(quantize(gathered, rowwise)));
--            one lacking a wanted rowwise copy must be refused;
--   fallback a shard that is not quantizable (M_l % 16 != 0) goes through the
--            high-precision path; if the whole is not quantizable either, the
--            error must say so;
--   linear   forward and backward complete with the oracle's shapes, finite
--            values, and errors against an fp32 layer with the same weights
--            within the Linear layer's bounds (y 0.18, dx and dw 0.22, each
--            plus 1/sqrt(numel) for the sampling spread of small tensors); with
--            frozen_weight no dw; an input whose M (product of x's leading
--            dims on a rank) is not a multiple of 16 must fail, frozen weight
--            too (te.Linear quantizes it locally, column+SP included, and its
--            NVFP4 quantizer wants M % 16 for any usage; the grad's row+SP
--            gather falls back, but its whole M is x's); column
--            +SP without the amax reduction must fail, if at all, with the
--            gather's "one global scale" error (§2.2); --rule nd reaches the
--            layer's grad gather (row+SP backward) too;
--   replay   the same case run twice gives the same bytes.
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"

local world = nvfp4.world()
local me = world.rank
local out = me == 0


-- ---- options ---------------------------------------------------------------

-- The options, each with what its value must be (for the usage errors).
-- --seed: decimal digits (a sign reaches the check below), as nvfp4-lua's and
-- sc's --seed: math.tointeger converts '1e3' and '0x10' (1000, 16), and the
-- replay line would then show another spelling.
local function decimal (v) return v:match("^%-?%d+$") and math.tointeger(tonumber(v)) or nil end
local WITHVAL = {
  minutes = {tonumber, "a positive number of minutes"}, cases = {math.tointeger, "a whole number, 1 or more"},
  case = {math.tointeger, "a whole number, 1 or more"}, seed = {decimal, "a non-negative integer"},
  timeout = {tonumber, "a positive number of seconds"}, junit = {tostring, "a file name"},
  replay = {tostring, "a Lua table, as a failure prints it"}, rule = {tostring, "flat2d or nd"},
  ["max-shrink"] = {math.tointeger, "a whole number, 0 or more"}, expect = {tostring, "a text"},
}
local OPTIONS = "--minutes M | --cases N | --case K | --replay TABLE, --seed S, --rule flat2d|nd, " ..
                "--expect TEXT, --no-shrink, --max-shrink N, --timeout S, --junit FILE, -v, --help"
local LUA_OPTS = {backend = true, version = true, e = true}   -- nvfp4-lua's: before the script

local function parseargs ()
  local o = {seed = nvfp4.seed, timeout = tonumber(nvfp4.options.timeout) or 60,
             junit = nvfp4.options.junit, verbose = nvfp4.options.verbose, rule = "flat2d"}
  local flags = {["no-shrink"] = true, verbose = true, help = true}
  local given = {}
  local i = 1
  while arg[i] do
    local a = arg[i]
    local name, val = a:match("^%-%-([%w%-]+)=(.*)$")
    name = name or a:match("^%-%-([%w%-]+)$")
    if a == "-v" then name = "verbose" elseif a == "-e" then name = "e" end
    if name and flags[name] and val == nil then
      o[name] = true
    elseif name and WITHVAL[name] then
      if val == nil then i = i + 1; val = arg[i] end
      if val == nil then error(("option '--%s' needs a value (%s)"):format(name, WITHVAL[name][2]), 0) end
      local v = WITHVAL[name][1](val)
      if v == nil or v ~= v then error(("--%s must be %s, got '%s'"):format(name, WITHVAL[name][2], val), 0) end
      o[name], given[name] = v, true
    elseif name and LUA_OPTS[name] then
      error(("'%s' is an option of nvfp4-lua: give it before the script (nvfp4-lua %s ... layouts.lua)")
            :format(a, a), 0)
    else
      error(("unknown argument '%s' (this script's options: %s)"):format(a, OPTIONS), 0)
    end
    i = i + 1
  end
  local function need (ok, msg) if not ok then error(msg, 0) end end
  local how = {}
  for _, k in ipairs{"minutes", "cases", "case", "replay"} do if given[k] then how[#how + 1] = "--" .. k end end
  need(#how <= 1, "give one of --minutes, --cases, --case and --replay (got " .. table.concat(how, " and ") .. ")")
  o.rule_given = given.rule
  need(o.rule == "flat2d" or o.rule == "nd", "--rule must be flat2d or nd, got '" .. tostring(o.rule) .. "'")
  need(not nvfp4.options.tap, "layouts.lua: no TAP output (its report: the lines it prints, --junit FILE)")
  need(not nvfp4.options.list and not nvfp4.options.filter, "layouts.lua: no --list or --filter (its cases " ..
       "are drawn from the seed, not registered): --case K runs case K alone")
  need(not o.minutes or (o.minutes > 0 and o.minutes < math.huge),
       "--minutes must be a positive, finite number, got " .. tostring(o.minutes))
  need(not o.cases or o.cases >= 1, "--cases must be 1 or more, got " .. tostring(o.cases))
  need(not o.case or o.case >= 1, "--case must be 1 or more (the cases a seed draws), got " .. tostring(o.case))
  need(o.timeout > 0 and o.timeout < math.huge, "--timeout must be a positive, finite number of seconds, got " ..
       tostring(o.timeout))
  need(not o["max-shrink"] or o["max-shrink"] >= 0, "--max-shrink must be 0 or more")
  need(math.type(o.seed) == "integer" and o.seed >= 0, "--seed must be a non-negative integer, got " ..
       tostring(o.seed))
  if not o.minutes and not o.cases and not o.case and not o.replay then o.cases = 50 end
  nvfp4.seed = o.seed
  return o
end


-- ---- a small deterministic generator (splitmix64) --------------------------

local function rng (seed)
  local s = seed
  local g = {}
  function g.next ()
    s = s + 0x9E3779B97F4A7C15
    local z = s
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  function g.int (lo, hi) return lo + (g.next() >> 1) % (hi - lo + 1) end
  function g.pick (t) return t[g.int(1, #t)] end
  function g.chance (p) return g.int(0, 999) < p * 1000 end
  return g
end

local function divisors (n)
  local d = {}
  for k = 1, n do if n % k == 0 then d[#d + 1] = k end end
  return d
end


local function ru (x, m) return (x + m - 1) // m * m end
local function prod (t) local p = 1 for _, v in ipairs(t) do p = p * v end return p end


-- ---- drawing a case ------------------------------------------------------------

local LEAD = {1, 1, 2, 3, 4, 5, 7, 8}         -- middle dims: 1 and odd values often
local SL = {16, 16, 32, 48, 64, 8, 12, 24, 40} -- per-rank rows: some not multiples of 16

-- Case k of run seed s: a plain table of numbers, strings and booleans.
local function draw (s, k, rule)
  local g = rng(s * 1000003 + k)
  local c = {data = g.int(1, 1 << 30)}
  local tps = {}
  for _, d in ipairs(divisors(world.size)) do if d >= 2 or world.size == 1 then tps[#tps + 1] = d end end
  c.tp = g.chance(0.1) and 1 or g.pick(tps)
  c.kind = g.chance(0.6) and "gather" or "linear"
  c.dtype = g.chance(0.7) and "bf16" or "fp32"
  local nd = g.int(2, 4)
  c.lead = {}
  for i = 2, nd - 1 do c.lead[#c.lead + 1] = g.pick(LEAD) end
  c.H = 16 * g.pick{1, 2, 3, 4, 5, 6, 8, 9, 12, 16}
  if c.kind == "gather" then
    c.S = g.pick(SL)                              -- per-rank rows (dim 0)
    c.rowwise = g.chance(0.8)
    c.columnwise = not c.rowwise or g.chance(0.7)
    c.rht = c.dtype == "bf16" and c.columnwise and g.chance(0.4)
    c.sr = g.chance(0.25)
    c.two_d = not c.rht and not c.sr and g.chance(0.25)   -- 2D excludes both (spec §7)
    c.fo6 = not c.rht and not c.sr and not c.two_d and g.chance(0.2)   -- 4over6 (§9.1), 1D
    c.async = g.chance(0.3)
    c.rule = rule
    -- drawn last, so that the fields above stay what they were for a seed:
    -- an FP4 shard (quantized with its amax reduced over the group) holding
    -- both copies, the rowwise or the columnwise one, gathered as it is or
    -- requantized (a wanted columnwise copy it lacks)
    local fp4 = g.chance(0.35)
    local have = g.pick{"both", "rowwise", "rowwise", "columnwise"}
    -- drawn after those: empty shards (S = 0, so M_l = 0: field case BH-22;
    -- README "Deliberate differences") and a zero-width hidden dim (K = 0),
    -- both of which the gather accepts with spec §1's shapes (M = 0: data
    -- [K, 0], scale [ru(K, 128), 0]; K = 0: rowwise scale [ru(M, 128), 0])
    if g.chance(0.06) then c.S = 0 end
    if g.chance(0.03) then c.H = 0 end
    if fp4 and c.S * prod(c.lead) % 16 == 0 then
      c.fp4_input = have
      if have == "rowwise" then c.rht = false end   -- a rowwise-only shard is not rotated
    end
  else
    c.parallel = c.tp == 1 and g.pick{"none", "column", "row"} or g.pick{"column", "row"}
    c.sp = c.parallel ~= "none" and g.chance(0.7)
    c.S = 16 * g.pick{1, 1, 2, 3}                -- per-rank sequence rows with SP
    c.N = 16 * g.pick{1, 2, 3, 4, 6}
    c.bias = g.chance(0.5)
    c.rht = c.dtype == "bf16" and g.chance(0.7)   -- input and grad RHT: both or neither
    c.grad_sr = g.chance(0.6)
    c.weight_2d = g.chance(0.7)
    c.amax_reduction = g.chance(0.8)
    c.fo6_recipe = g.pick{"none", "none", "weights", "all"}
    if c.fo6_recipe == "all" then c.rht = false end      -- 4over6 inputs take no RHT
    -- drawn last, so that the fields above stay what they were for a seed
    c.frozen = g.chance(0.15)
    if g.chance(0.15) then c.S = g.pick{8, 12, 24, 40} end  -- x's M may not be quantizable
    -- after those: empty sequence shards (S = 0: x, dy and the SP gathers
    -- of M = 0, field case BH-22); K = 0 and N = 0 the layer refuses
    -- (in_features/out_features must be positive multiples of 16), not drawn
    if g.chance(0.05) then c.S = 0 end
    c.rule = rule
  end
  return c
end


-- ---- the oracle: shapes from the spec, computed here -----------------------------

local function cat (...)
  local r = {}
  for _, t in ipairs{...} do for _, v in ipairs(t) do r[#r + 1] = v end end
  return r
end

-- The buffers of an NVFP4 tensor of logical shape s (spec §1); M is the
-- product of the leading dims (not numel / K: K may be 0), either may be 0.
local function buffers (s)
  local K = s[#s]
  local M = prod(table.move(s, 1, #s - 1, 1, {}))
  local rd = {}
  for i = 1, #s - 1 do rd[i] = s[i] end
  rd[#s] = K // 2
  return {rowwise_data = rd, rowwise_scale_inv = {ru(M, 128), ru(K // 16, 4)},
          columnwise_data = {K, M // 2}, columnwise_scale_inv = {ru(K, 128), ru(M // 16, 4)}}
end

local function fmt (v)
  if type(v) == "table" then
    local p = {}
    for _, x in ipairs(v) do p[#p + 1] = fmt(x) end
    return "{" .. table.concat(p, ", ") .. "}"
  elseif type(v) == "string" then return ("%q"):format(v) end
  return tostring(v)
end

local KEYS = {"kind", "tp", "dtype", "S", "lead", "H", "N", "rowwise", "columnwise", "rht", "sr",
              "two_d", "async", "rule", "parallel", "sp", "bias",
              "grad_sr", "weight_2d", "amax_reduction", "fo6", "fo6_recipe", "frozen", "fp4_input", "data"}

local function show (c)
  local p = {}
  for _, k in ipairs(KEYS) do if c[k] ~= nil then p[#p + 1] = k .. " = " .. fmt(c[k]) end end
  return "{" .. table.concat(p, ", ") .. "}"
end

local function copy (c)
  local r = {}
  for k, v in pairs(c) do r[k] = type(v) == "table" and table.move(v, 1, #v, 1, {}) or v end
  return r
end


-- ---- running a case --------------------------------------------------------------

-- Soft checks: record the first failure and go on, so that every rank still
-- joins every collective of the case; the case raises at its end.
local Check = {}
Check.__index = Check
local function newcheck () return setmetatable({first = nil}, Check) end
function Check:run (f, ...)
  if self.first then return end
  local ok, e = pcall(f, ...)
  if not ok then self.first = tostring(e) end
end
function Check:shape (t, name, want, what)
  self:run(function ()
    local got = name and t:buffer_shape(name) or t:shape()
    sc.shape(got, want, what .. (name and (" " .. name) or ""))
  end)
end
function Check:finite (t, what)
  self:run(function ()
    local n = nvfp4.rel_error(t, nvfp4.zeros(t:shape(), t:dtype() == "bf16" and "bf16" or "fp32"))
    if not (n == n and n < math.huge) then error(what .. ": not finite (norm " .. tostring(n) .. ")", 0) end
  end)
end

local function qopts (c)
  return {rowwise = c.rowwise or nil, columnwise = c.columnwise or nil, rht = c.rht or nil,
          sr = c.sr or nil, two_d = c.two_d or nil, four_over_six = c.fo6 or nil}
end

-- The FP4 shard of an fp4_input case: quantized with the case's options and
-- its amax reduced over the group, holding the copies fp4_input names.
local function fp4_shard (c, shard, tp)
  local o = qopts(c)
  o.rowwise = c.fp4_input ~= "columnwise" or nil
  o.columnwise = c.fp4_input ~= "rowwise" or nil
  o.rht = o.columnwise and o.rht or nil
  o.amax_group = tp
  return nvfp4.quantize(shard, o)
end

-- What the gather of case c must equal (byte for byte, without SR): the
-- gathered tensor quantized; for an FP4 shard lacking a wanted columnwise
-- copy, which the gather requantizes from its rowwise copy with the group's
-- amax (the shard's 2D and 4over6 settings, no RHT), the gathered tensor
-- quantized rowwise, dequantized to its dtype, quantized again.
local function expected (c, full, q)
  if c.fp4_input == "rowwise" and c.columnwise then
    local r = nvfp4.quantize(full, {rowwise = true, two_d = q.two_d, four_over_six = q.four_over_six})
    return nvfp4.quantize(nvfp4.dequantize(r, c.dtype), q)
  end
  return nvfp4.quantize(full, q)
end

local function gather_case (c, tp, chk)
  local q = qopts(c)
  local Sg = c.S * c.tp
  local full_shape = cat({Sg}, c.lead, {c.H})
  local full = nvfp4.randn(full_shape, c.dtype, {seed = c.data + me // c.tp})
  local shard = full:narrow(1, tp.rank * c.S + 1, c.S)
  local M = Sg * prod(c.lead)                  -- the gathered M (H may be 0)
  local fp4 = c.fp4_input and c.S * prod(c.lead) % 16 == 0   -- an FP4 shard is quantizable
  local x = fp4 and fp4_shard(c, shard, tp) or shard
  local function gather ()
    local opts = {quantize = not fp4 and q or nil, rule = c.rule ~= "flat2d" and c.rule or nil}
    if fp4 then opts.rowwise, opts.columnwise = c.rowwise or nil, c.columnwise or nil end
    if c.async then
      opts.async = true
      local h <close> = tp:all_gather(x, opts)
      return h:wait()
    end
    return tp:all_gather(x, opts)
  end
  if M % 16 ~= 0 then                        -- not quantizable even when gathered
    chk:run(sc.error, "not quantizable either", gather)
    return
  end
  if fp4 and c.fp4_input == "columnwise" and c.rowwise then   -- nothing to requantize from
    chk:run(sc.error, "x has only a columnwise copy", gather)
    return
  end
  local g = gather()
  local want = buffers(full_shape)
  chk:shape(g, nil, full_shape, "gathered")
  for _, b in ipairs{"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"} do
    local has = b:find("^row") and c.rowwise or b:find("^col") and c.columnwise
    if has then chk:shape(g, b, want[b], "gathered")
    else chk:run(function () sc.ok(g:buffer_shape(b) == nil, b .. " absent") end) end
  end
  if not c.sr then
    chk:run(function () sc.bytes(g, expected(c, full, q), "gather vs quantize(gathered)") end)
  end
  if c.rowwise then                            -- only the rowwise copy dequantizes
    local dq = nvfp4.dequantize(g, "fp32")
    chk:finite(dq, "dequantized gather")
    chk:run(function () sc.close(dq, full, 0.3, "dequantized gather vs the full tensor") end)
  end
  local again = gather()
  chk:run(sc.bytes, again, g, "same case twice")
end

local function linear_case (c, tp, chk)
  local T = c.tp
  local K, N = c.H * (c.parallel == "row" and T or 1), c.N * (c.parallel == "column" and T or 1)
  local Sg = c.S * T
  local xS, dyS                                 -- dim 0 of x and dy on this rank
  if c.parallel == "column" then xS, dyS = c.sp and c.S or Sg, Sg
  elseif c.parallel == "row" then xS, dyS = Sg, c.sp and c.S or Sg
  else xS, dyS = c.S, c.S end
  local Kl = c.parallel == "row" and K // T or K
  local Nl = c.parallel == "column" and N // T or N
  local xshape, yshape = cat({xS}, c.lead, {Kl}), cat({dyS}, c.lead, {Nl})
  local cfg = {in_features = K, out_features = N, bias = c.bias, parallel = c.parallel,
               sequence_parallel = c.sp, group = tp, input_rht = c.rht,
               grad_rht = c.rht, grad_sr = c.grad_sr, weight_2d = c.weight_2d,
               amax_reduction = c.amax_reduction, four_over_six = c.fo6_recipe,
               rule = c.rule, frozen_weight = c.frozen, seed = c.data, init_seed = c.data + 1}
  local x = nvfp4.randn(xshape, c.dtype, {seed = c.data + 2 + me})
  local dy = nvfp4.randn(yshape, c.dtype, {seed = c.data + 3 + me})
  local function run (recipe, w)
    local conf = {}
    for k, v in pairs(cfg) do conf[k] = v end
    conf.recipe = recipe
    if recipe ~= "nvfp4" then
      conf.input_rht, conf.grad_rht, conf.grad_sr, conf.weight_2d, conf.amax_reduction = nil, nil, nil, nil, nil
      conf.four_over_six = nil
    end
    local l <close> = nvfp4.linear(conf)
    if w then l:set_weight(w) end
    local y = l:forward(x)
    local dx, dw, db = l:backward(dy)
    return y, dx, dw, db, l:weight()
  end
  -- x's M (this rank's, the same on every rank) not a multiple of 16: the
  -- NVFP4 layer must refuse it, naming M, frozen weight or not (TE's NVFP4
  -- quantizer wants M % 16 for a rowwise-only copy too)
  if xS * prod(c.lead) % 16 ~= 0 then
    chk:run(sc.error, "is not a multiple of 16", run, "nvfp4")
    return
  end
  -- Column-parallel SP without the amax reduction gathers NVFP4 shards quantized
  -- with different amaxes: the gather refuses them (one global scale per tensor).
  -- It may pass only where every shard's amax is the same (bf16 shards can tie).
  if c.parallel == "column" and c.sp and not c.amax_reduction and T > 1 then
    local ok, e = pcall(run, "nvfp4")
    local a = nvfp4.quantize(x):amax()             -- this shard's max|x|
    local hi, lo = tp:all_reduce_max(a), -tp:all_reduce_max(-a)
    chk:run(function ()
      if ok and hi ~= lo then
        error(("the layer gathered shards whose amaxes differ (%.9g to %.9g) instead of refusing them")
              :format(lo, hi), 0)
      end
      if not ok and not tostring(e):find("must share one global scale", 1, true) then error(e, 0) end
    end)
    return
  end
  local y, dx, dw, db, w = run("nvfp4")
  chk:shape(y, nil, yshape, "y")
  chk:shape(dx, nil, xshape, "dx")
  if c.frozen then chk:run(sc.ok, dw == nil, "no dw with a frozen weight")
  else chk:shape(dw, nil, {Nl, Kl}, "dw") end
  if c.bias then chk:shape(db, nil, {Nl}, "db") else chk:run(sc.ok, db == nil, "no db without a bias") end
  chk:finite(y, "y"); chk:finite(dx, "dx")
  if dw then chk:finite(dw, "dw") end
  local ry, rdx, rdw = run("fp32", w)
  local grp = T > 1 and tp or nil
  -- errors over the whole group (collective: every rank computes them).
  -- Row-parallel SP gathers the grad in high precision and always reduces its
  -- amax in the gather, so every case that gets here is bounded.
  -- The errors are sample statistics of the random data: over a tensor of n
  -- elements their spread (standard deviation from case to case) is about
  -- 0.16/sqrt(n) for y and 0.26/sqrt(n) to 0.4/sqrt(n) for dx and dw (measured
  -- over 300-600 data seeds at 16 x 16 to 64 x 64, every recipe option), while
  -- the means stay near 0.15 (y) and 0.18 (dx, dw). So each bound gets
  -- 1/sqrt(n) more, six spreads or more: without it, y at 16 x 16 (mean 0.147,
  -- spread 0.0097) broke 0.18 once in 8 176 cases (0.187). A wrong layout or
  -- scale gives errors near 1.
  local function bound (base, t) return base + (t:numel() > 0 and 1 / math.sqrt(t:numel()) or 0) end
  local ey, edx = nvfp4.rel_error_group(grp, y, ry), nvfp4.rel_error_group(grp, dx, rdx)
  local edw = dw and nvfp4.rel_error_group(grp, dw, rdw) or 0
  local by, bdx, bdw = bound(0.18, y), bound(0.22, dx), dw and bound(0.22, dw) or 0.22
  chk:run(function ()
    if not (ey <= by and edx <= bdx and edw <= bdw) then
      error(("errors against fp32: y %.3f (bound %.3f), dx %.3f (bound %.3f), dw %.3f (bound %.3f)")
            :format(ey, by, edx, bdx, edw, bdw), 0)
    end
  end)
  local y2, dx2, dw2 = run("nvfp4")
  chk:run(sc.bytes, y2, y, "y, same case twice")
  chk:run(sc.bytes, dx2, dx, "dx, same case twice")
  if dw then chk:run(sc.bytes, dw2, dw, "dw, same case twice") end
end

local vcomm                                   -- verdicts, apart from the cases' collectives
local opts
local the_replay                              -- the --replay case, checked (replay_case)

-- The cases' TP groups: sc.group's, one per size kept from case to case as
-- a training run keeps its TP group (a split is a new communicator, which
-- over NCCL, with its warm-up, cost about 1.4 s a case: 0.7 cases/s on two
-- H200s, against 45-140 with the ranks staged on one).  After a failed case
-- a group may hold a collective some rank never joined, so they are closed
-- then (sc.close_groups: this loop is the fuzz's own, not sc.run's) and the
-- next case splits afresh.  Every rank draws the same cases, so the splits
-- come in the same order on every rank.
local group, close_groups = sc.group, sc.close_groups

-- Run case c on every rank; returns ok, message (agreed: every rank sees
-- the same result, the message of the lowest failing rank).
local function runcase (c, label)
  nvfp4.watchdog(opts.timeout, label)
  local ok, e = pcall(function ()
    local tp = group(c.tp)
    local chk = newcheck()
    if c.kind == "gather" then gather_case(c, tp, chk) else linear_case(c, tp, chk) end
    if chk.first then error(chk.first, 0) end
  end)
  if not ok then
    nvfp4.watchdog(opts.timeout, label .. " (it failed on this rank: " .. tostring(e) ..
                   "; the other ranks did not finish it)")
  end
  collectgarbage()
  local bad = vcomm:all_reduce_max(ok and 0 or 1)
  local msg = ""
  if bad == 1 then
    local msgs = vcomm:all_gather_string(ok and "" or tostring(e))
    for r, m in ipairs(msgs) do
      if m ~= "" then msg = ("rank %d: %s"):format(r - 1, m) break end
    end
  end
  if bad == 1 then close_groups() end
  nvfp4.watchdog(0)
  return bad == 0, msg
end


-- ---- shrinking -----------------------------------------------------------------

-- Smaller variants of c, simplest first: fewer dims, smaller sizes, leading
-- dims toward 1, TP toward 2, options off.  A leading dim may also fold into
-- S (S * v, the dim gone): a shard's M (S times the leading dims) stays, and
-- S then shrinks on its own.  Without it a case whose M is a multiple of 16
-- only through the product (S = 12, lead {4, 3}) was a local minimum: every
-- smaller S or leading dim makes the shard not quantizable (the fallback,
-- another outcome).  Every move makes the case smaller or drops a dim, so
-- shrinking does not cycle.  S and H never go to 0 here (the draw makes
-- empty shards and K = 0 itself): an empty tensor's shapes fail in their own
-- way under the same signature, so the --rule nd case of fuzz_report.sh
-- (odd B: a columnwise scale [128, 4] for [128, 8]) slid to H = 0, lead {1}
-- ([0, 0] for [0, 4]) when they did.
local function candidates (c)
  local out = {}
  local function add (f)
    local d = copy(c)
    if f(d) ~= false then
      -- an FP4 shard needs a quantizable shard: a smaller S or dim drops it
      if d.fp4_input and d.S * prod(d.lead) % 16 ~= 0 then d.fp4_input = nil end
      out[#out + 1] = d
    end
  end
  for i = 1, #c.lead do add(function (d) table.remove(d.lead, i) end) end
  for i, v in ipairs(c.lead) do
    if v > 1 then add(function (d) table.remove(d.lead, i); d.S = c.S * v end) end
  end
  for i, v in ipairs(c.lead) do
    if v > 1 then
      add(function (d) d.lead[i] = 1 end)
      if v > 2 then add(function (d) d.lead[i] = v // 2 end) end
      add(function (d) d.lead[i] = v - 1 end)
      if v > 2 then add(function (d) d.lead[i] = v - 2 end) end   -- keeps parity (odd B)
    end
  end
  if c.H > 16 then
    add(function (d) d.H = 16 end)
    add(function (d) d.H = math.max(16, c.H // 32 * 16) end)
  end
  if c.N and c.N > 16 then add(function (d) d.N = 16 end) end
  if c.S > 16 then add(function (d) d.S = 16 end) end
  if c.kind == "gather" and c.S > 1 then add(function (d) d.S = c.S // 2 end) end
  if c.kind == "linear" and c.S > 16 then
    -- halving toward 16 in multiples of 16, and 32 less, which keeps the
    -- parity of S/16 (as v - 2 keeps a leading dim's): 16 less alone flips
    -- it, so a failure that wants S/16 odd and above 1 stopped at S = 112
    local half = math.max(16, c.S // 32 * 16)
    if half > 16 then add(function (d) d.S = half end) end
    if c.S - 32 >= 16 and c.S - 32 ~= half then add(function (d) d.S = c.S - 32 end) end
    add(function (d) d.S = c.S - 16 end)
  end
  if c.tp > 2 and world.size % 2 == 0 then add(function (d) d.tp = 2 end) end
  for _, k in ipairs{"async", "sr", "rht", "two_d", "bias", "grad_sr",
                     "weight_2d", "amax_reduction", "sp", "fo6", "frozen"} do
    if c[k] then add(function (d) d[k] = false end) end
  end
  if c.fo6_recipe and c.fo6_recipe ~= "none" then add(function (d) d.fo6_recipe = "none" end) end
  if c.fp4_input then add(function (d) d.fp4_input = nil end) end
  if c.rowwise and c.columnwise then
    add(function (d) d.rowwise = false end)
    add(function (d) d.columnwise = false; d.rht = false end)
  end
  if c.dtype == "fp32" then add(function (d) d.dtype = "bf16" end) end
  return out
end

-- What kind of failure a message is: the check or the error without the
-- rank, the position, numbers (a hex byte whole: 0x7b, not #x#b) and shapes
-- ("gathered columnwise_scale_inv: shape [#], expected [#]").  Shrinking keeps it, so that a case does not
-- slide into another, simpler failure on the way down.
local function signature (msg)
  return (msg:gsub("^rank %d+: ", ""):gsub("^[^:]*%.lua:%d+: ", ""):gsub("%b[]", "[#]")
             :gsub("0x%x+", "#"):gsub("%d+", "#"))
end

-- With --minutes, shrinking ends by the run's deadline plus a minute or a
-- tenth of the budget, whichever is more (rank 0's clock decides, as for the
-- cases), so that a failure found late still gets shrunk a little and the
-- run stays bounded.
local shrink_until

local function shrink (c, msg)
  local steps, runs = 0, 0
  local sig = signature(msg)
  local limit = opts["max-shrink"] or 300
  local progress = true
  while progress and runs < limit do
    progress = false
    for _, d in ipairs(candidates(c)) do
      if shrink_until and
         vcomm:all_reduce_max(me == 0 and nvfp4.clock() >= shrink_until and 1 or 0) == 1 then
        return c, msg, steps, runs, true
      end
      runs = runs + 1
      local ok, m = runcase(d, "fuzz shrink step " .. steps + 1 .. " " .. show(d))
      if not ok and signature(m) == sig then
        c, msg, steps, progress = d, m, steps + 1, true
        break
      end
      if runs >= limit then break end
    end
  end
  return c, msg, steps, runs
end


-- ---- reports ---------------------------------------------------------------------

-- Text for XML 1.0: valid UTF-8 (bytes of a broken sequence become '?'),
-- no control characters (C0 other than tab and newline, and DEL, as \xNN),
-- the five markup characters as entities; in an attribute, tab and newline
-- as character references too (a parser would turn them into spaces).
local function xmlesc (s, attr)
  s = tostring(s)
  while true do                           -- each byte where no character starts: '?'
    local ok, bad = utf8.len(s)
    if ok then break end
    s = s:sub(1, bad - 1) .. "?" .. s:sub(bad + 1)
  end
  s = s:gsub("[%z\1-\8\11-\31\127]", function (c) return ("\\x%02x"):format(c:byte()) end)
  s = s:gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;"})
  if attr then s = s:gsub("[\t\n]", {["\t"] = "&#9;", ["\n"] = "&#10;"}) end
  return s
end

-- The JUnit file: one testsuite "fuzz.layouts.npN" (the rank count in the
-- name, so the runs at 2 and 4 ranks do not collide), one testcase for the
-- cases that passed (a name that stays the same from night to night; the
-- count is a property), one per failure named by seed and case, and, while
-- a case runs, that case as failed (the job may end in it).
local function writejunit (file, n, fails, secs, running)
  local suite = "fuzz.layouts.np" .. world.size
  local nf = #fails + (running and 1 or 0)
  local f, err = io.open(file, "w")
  if not f then   -- as the framework says it: the path quoted, then why (io.open's text after the path)
    local why = tostring(err):sub(1, #file + 2) == file .. ": " and tostring(err):sub(#file + 3) or tostring(err)
    error(("--junit: cannot write '%s': %s"):format(file, why), 0)
  end
  f:write('<?xml version="1.0" encoding="UTF-8"?>\n')
  f:write(('<testsuites tests="%d" failures="%d" time="%.3f">\n'):format(nf + 1, nf, secs))
  f:write(('  <testsuite name="%s" tests="%d" failures="%d" errors="0" skipped="0" time="%.3f">\n')
          :format(suite, nf + 1, nf, secs))
  f:write('    <properties>\n')
  for _, kv in ipairs{{"seed", opts.seed}, {"np", world.size}, {"backend", nvfp4.backend()},
                      {"rule", opts.rule}, {"cases", n}, {"passed", n - #fails}} do
    f:write(('      <property name="%s" value="%s"/>\n'):format(kv[1], xmlesc(kv[2], true)))
  end
  f:write('    </properties>\n')
  f:write(('    <testcase classname="%s" name="layout fuzz" time="%.3f">\n'):format(suite, secs))
  f:write(('      <system-out>%d cases, %d passed (seed %d, rule %s)</system-out>\n    </testcase>\n')
          :format(n, n - #fails, opts.seed, opts.rule))
  local function failed (name, time, msg, text)
    f:write(('    <testcase classname="%s" name="%s" time="%.3f">\n'):format(suite, xmlesc(name, true), time))
    f:write(('      <failure message="%s" type="failure">%s</failure>\n'):format(xmlesc(msg, true), xmlesc(text)))
    f:write('    </testcase>\n')
  end
  for _, r in ipairs(fails) do
    failed(r.k > 0 and ("seed %d case %d"):format(opts.seed, r.k) or "the --replay case", r.secs or 0, r.msg,
           r.report)
  end
  if running then
    failed(("seed %d case %d"):format(opts.seed, running.k), 0,
           "the job ended during this case (a crash, a timeout or an os.exit)",
           "replay: " .. running.replay .. "\ncase: " .. running.show)
  end
  f:write('  </testsuite>\n</testsuites>\n')
  f:close()
end

local function say (fmtstr, ...)
  if out then print(fmtstr:format(...)); io.stdout:flush() end
end


-- ---- main ------------------------------------------------------------------------

-- A usage error (a bad option, an unwritable --junit file) ends the job with
-- status 2 on every rank, as the framework's usage errors do.
local function usage (msg)
  if out then
    io.stderr:write(msg:find("^layouts%.lua: ") and "" or "layouts.lua: ", msg, "\n")
    io.stderr:flush()
  end
  world:barrier()
  os.exit(2)
end

-- The --replay table: a case as a failure prints it.  Refused (a usage
-- error, before any case) when it is not a table, holds a key no case has,
-- lacks one its kind needs, asks for a TP that does not divide the ranks, or
-- names another rule than an explicit --rule; without a rule it takes
-- --rule's (flat2d by default).
local function replay_case (text)
  local f, e = load("return " .. text, "=--replay", "t", {})
  local ok, c = false, e
  if f then ok, c = pcall(f) end
  if not ok or type(c) ~= "table" then
    error(("--replay: not a Lua table (%s); a failure prints one: {kind = \"gather\", tp = 2, ...}")
          :format(ok and ("got " .. type(c)) or tostring(c)), 0)
  end
  local known = {}
  for _, k in ipairs(KEYS) do known[k] = true end
  for k in pairs(c) do
    if not known[k] then
      error(("--replay: unknown key '%s' (a case's keys: %s)"):format(tostring(k), table.concat(KEYS, ", ")), 0)
    end
  end
  if c.kind ~= "gather" and c.kind ~= "linear" then
    error(("--replay: kind must be \"gather\" or \"linear\", got %s"):format(fmt(c.kind)), 0)
  end
  local need = {"tp", "dtype", "S", "lead", "H", "data"}
  if c.kind == "linear" then need[#need + 1] = "N"; need[#need + 1] = "parallel" end
  for _, k in ipairs(need) do
    if c[k] == nil then error(("--replay: a %s case needs '%s'"):format(c.kind, k), 0) end
  end
  local function posint (v) return math.type(v) == "integer" and v >= 1 end
  -- S may be 0 (empty shards), and H in a gather case (K = 0); the Linear
  -- layer refuses in_features 0
  local zero_ok = {S = true, H = c.kind == "gather"}
  for _, k in ipairs{"tp", "S", "H", "N"} do
    if c[k] ~= nil and not (posint(c[k]) or zero_ok[k] and c[k] == 0) then
      error(("--replay: %s must be a whole number, %s or more, got %s")
            :format(k, zero_ok[k] and 0 or 1, fmt(c[k])), 0)
    end
  end
  local lead_ok = type(c.lead) == "table"
  for i = 1, lead_ok and #c.lead or 0 do lead_ok = lead_ok and posint(c.lead[i]) end
  if not lead_ok then error("--replay: lead must be a list of whole numbers, 1 or more (the middle dims)", 0) end
  if math.type(c.data) ~= "integer" then error("--replay: data must be an integer (the tensors' seed)", 0) end
  for _, k in ipairs{"rowwise", "columnwise", "rht", "sr", "two_d", "async", "sp", "bias", "grad_sr", "weight_2d",
                     "amax_reduction", "fo6", "frozen"} do
    if c[k] ~= nil and type(c[k]) ~= "boolean" then
      error(("--replay: %s must be true or false, got %s"):format(k, fmt(c[k])), 0)
    end
  end
  local function oneof (k, set)
    local shown = {}
    for _, v in ipairs(set) do
      if c[k] == v then return end
      shown[#shown + 1] = fmt(v)
    end
    error(("--replay: %s must be %s, got %s"):format(k, table.concat(shown, ", "), fmt(c[k])), 0)
  end
  if c.kind == "gather" and not c.rowwise and not c.columnwise then
    error("--replay: a gather case wants rowwise = true, columnwise = true or both", 0)
  end
  if c.fp4_input ~= nil then
    if c.kind ~= "gather" then error("--replay: fp4_input is a gather case's key", 0) end
    oneof("fp4_input", {"both", "rowwise", "columnwise"})
  end
  if c.kind == "linear" then
    oneof("parallel", {"none", "column", "row"})
    if c.fo6_recipe ~= nil then oneof("fo6_recipe", {"none", "weights", "activations", "all"}) end
  end
  if world.size % c.tp ~= 0 then
    error(("--replay: tp = %d does not divide the %d ranks (mpirun -np %d, or a multiple)")
          :format(c.tp, world.size, c.tp), 0)
  end
  if c.rule ~= nil and c.rule ~= "flat2d" and c.rule ~= "nd" then
    error(("--replay: rule must be \"flat2d\" or \"nd\", got %s"):format(fmt(c.rule)), 0)
  end
  if c.rule ~= nil and opts.rule_given and c.rule ~= opts.rule then
    error(("--replay: the table's rule = \"%s\" and --rule %s disagree"):format(c.rule, opts.rule), 0)
  end
  c.rule = c.rule or opts.rule
  return c
end

-- The script's header up to its output section: --help.
local function help ()
  local f = io.open(arg[0] or "", "r")
  if not f then return "usage: mpirun -np N nvfp4-lua layouts.lua [" .. OPTIONS .. "]" end
  local lines = {}
  for l in f:lines() do
    if not l:find("^%-%-") or l:find("^%-%- Output:") then break end
    lines[#lines + 1] = l:gsub("^%-%- ?", "")
  end
  f:close()
  return table.concat(lines, "\n")
end

do
  local ok, o = pcall(parseargs)
  if not ok then usage(tostring(o)) end
  opts = o
end
if opts.help then                        -- the job ends normally (MPI_Finalize), status 0
  if out then print(help()); io.stdout:flush() end
  return
end
if opts.replay then
  local ok, c = pcall(replay_case, opts.replay)
  if not ok then usage(tostring(c)) end
  the_replay = c
  opts.rule = c.rule                     -- the run's rule (header, JUnit) is the case's
end
vcomm = world:split(world.size)
local script = arg[0] or "scenarios/fuzz/layouts.lua"
local np = world.size
local rulearg = opts.rule ~= "flat2d" and (" --rule " .. opts.rule) or ""
local prog = sc.program(true)           -- as typed, e.g. _build/lua/nvfp4-lua --backend cuda (no --junit)
local envb = os.getenv("NVFP4_BACKEND")  -- the nightly's way to pick the backend: the replay keeps it
local mpirun = (envb and envb ~= "" and ("NVFP4_BACKEND=" .. envb .. " ") or "") .. "mpirun"

local function replaycmd (k)
  return ("%s -np %d %s %s --seed %d --case %d%s"):format(mpirun, np, prog, sc.shellquote(script),
                                                          opts.seed, k, rulearg)
end

-- A failure: its FAIL line and replay command first (a crash while
-- shrinking must not lose them), then the shrunk case.
local function report (k, c0, msg0, secs)
  local head = {
    k and ("FAIL  case %d (seed %d): %s"):format(k, opts.seed, msg0) or ("FAIL  the --replay case: %s"):format(msg0),
    k and ("      replay:  " .. replaycmd(k)) or ("      replay:  %s -np %d %s %s --replay '%s'")
                                                     :format(mpirun, np, prog, script, show(c0)),
  }
  say("%s", table.concat(head, "\n"))
  local lines = {}
  local c = c0
  if not opts["no-shrink"] then
    local msg, steps, runs, cut
    c, msg, steps, runs, cut = shrink(c0, msg0)
    lines = {
      ("      shrunk in %d steps (%d runs%s) to a case that fails with: %s"):format(steps, runs,
        cut and ", cut short by --minutes" or "", msg),
      ("      minimal: %s -np %d %s %s --replay '%s'"):format(mpirun, np, prog, script, show(c)),
    }
  end
  lines[#lines + 1] = "      as a Lua table: " .. show(c)
  say("%s", table.concat(lines, "\n"))
  local text = table.concat(head, "\n") .. "\n" .. table.concat(lines, "\n")
  return {k = k or 0, msg = msg0, report = text, minimal = c, secs = secs}
end

local t0 = nvfp4.clock()
local fails, n = {}, 0
if opts.junit then
  -- written at once (and before every case): an old file of an earlier run
  -- does not survive a job that ends early, and an unwritable path is found
  -- now, not after the run
  local ok, e = true, nil
  if out then ok, e = pcall(writejunit, opts.junit, 0, fails, 0) end
  if vcomm:all_reduce_max(ok and 0 or 1) == 1 then usage(e or "--junit: rank 0 cannot write the file") end
end
if the_replay then
  say("# %s: np=%d, backend %s, rule %s, the case given by --replay", script, np, sc.backend_name(world),
      opts.rule)
else
  say("# %s: np=%d, backend %s, seed %d, rule %s, %s (replay: --seed %d)", script, np, sc.backend_name(world),
      opts.seed, opts.rule, opts.case and ("case " .. opts.case) or opts.cases and (opts.cases .. " cases")
      or (opts.minutes .. " minutes"), opts.seed)
end

if the_replay then
  local c = the_replay
  n = 1
  local ts = nvfp4.clock()
  local ok, msg = runcase(c, "fuzz replay " .. show(c))
  if ok then say("PASS  %s", show(c)) else fails[1] = report(nil, c, msg, nvfp4.clock() - ts) end
else
  local first, last = opts.case or 1, opts.case or opts.cases or math.maxinteger
  local deadline = opts.minutes and t0 + 60 * opts.minutes
  shrink_until = deadline and deadline + math.max(60, 6 * opts.minutes)
  local tick = t0
  for k = first, last do
    if deadline and k > first then
      -- every rank must stop after the same case: rank 0's clock decides
      -- (the first case always runs: a run of no case would pass)
      local stop = vcomm:all_reduce_max(nvfp4.clock() >= deadline and me == 0 and 1 or 0)
      if stop == 1 then break end
    end
    local c = draw(opts.seed, k, opts.rule)
    if opts.verbose then say("      case %d: %s", k, show(c)) end
    local ts = nvfp4.clock()
    if out and opts.junit then
      writejunit(opts.junit, n, fails, ts - t0, {k = k, replay = replaycmd(k), show = show(c)})
    end
    local ok, msg = runcase(c, ("fuzz case %d (seed %d; replay: %s) %s"):format(k, opts.seed, replaycmd(k),
                                                                             show(c)))
    n = n + 1
    if not ok then
      if out and opts.junit then
        -- the failure stands in the file before its shrinking, which may take minutes: a job that ends
        -- there (an interrupt, a crash) leaves it as failed, not as the case under way
        fails[#fails + 1] = {k = k, msg = msg, secs = nvfp4.clock() - ts,
                             report = "replay: " .. replaycmd(k) .. "\ncase: " .. show(c) ..
                                      "\n(written before the failure was shrunk)"}
        writejunit(opts.junit, n, fails, nvfp4.clock() - t0)
        fails[#fails] = nil
      end
      fails[#fails + 1] = report(k, c, msg, nvfp4.clock() - ts)
    end
    local now = nvfp4.clock()
    if now - tick >= 5 then
      tick = now
      say("#   %d cases so far, %d failures, %.1f cases/s (%.0f s)", n, #fails, n / (now - t0), now - t0)
    end
  end
end

close_groups()
local secs = nvfp4.clock() - t0
say("# %d cases, %d failures, %.1f cases/s, %.0f cases/min (%.1f s)", n, #fails, n / secs, 60 * n / secs, secs)
if out and opts.junit then writejunit(opts.junit, n, fails, secs) end
if opts.expect then
  local found
  for _, r in ipairs(fails) do
    if r.msg:find(opts.expect, 1, true) then found = found or r end
  end
  if found then
    say("ok: the expected failure ('%s') was found in case %d%s %s", opts.expect, found.k,
        opts["no-shrink"] and ":" or " and shrunk to", show(found.minimal))
  else
    say("FAIL  no case failed with '%s' (--expect)", opts.expect)
  end
  nvfp4.exit_status(found and 0 or 1)
else
  nvfp4.exit_status(#fails > 0 and 1 or 0)
end
