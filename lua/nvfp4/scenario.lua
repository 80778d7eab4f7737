-- nvfp4.scenario: the scenario framework of nvfp4-lua.
-- Cases with parameter grids, assertions that print what they compare, a
-- verdict per case agreed across ranks, a per-case timeout (nvfp4.watchdog
-- ends the job), and reports: a human line per case, TAP 13, JUnit XML.
--
--   local sc = require "nvfp4.scenario"
--   sc.case("name", {B = {1, 2}, TP = {2, 4}}, function (p) ... end)
--   sc.run()
--
-- Options come from nvfp4-lua's command line (before the script) or from
-- the script's own arguments (after it): --list, --filter PATTERN,
-- --timeout S, --tap, --junit FILE, --verbose, --seed N.  A script with
-- options of its own takes them out of arg before sc.run(), which rejects
-- any other argument that looks like an option (plain ones such as S=512
-- stay in arg for the script).

local nvfp4 = require "nvfp4"

local M = {}
local cases = {}                 -- every registered case, in order
local casenames = {}             -- their full names (a set)
local current = nil              -- the running case's record

local PASS, SKIP, FAIL = 0, 1, 2
local clock = nvfp4.clock or os.clock   -- wall clock when the module has one
local VERDICT = {[PASS] = "PASS", [SKIP] = "SKIP", [FAIL] = "FAIL"}
local SKIPMARK = {}              -- metatable that marks a skip "error"


-- ---- options -------------------------------------------------------------

local OPTS_WITH_VALUE = {filter = true, timeout = true, junit = true, seed = true}
local OPTS_FLAG = {list = true, tap = true, verbose = true}
local LUA_OPTS = {backend = true, help = true, version = true}   -- nvfp4-lua's (and -e)

-- The script's arguments as given (sc.params and the framework take theirs
-- out of arg later), for the replay commands: a failed case replays with
-- the script's own arguments (S=512) and options such as --timeout.
local ARGS = {}
for i = 1, arg and #arg or 0 do ARGS[i] = arg[i] end

-- The words t[i..j] shell-quoted for a replay command, less what a replay
-- sets itself or must not repeat (--seed, --filter; --list, --tap, --junit,
-- --verbose: a pasted replay would overwrite the run's report).
local function replay_words (t, i, j)
  local out = {}
  while i <= j do
    local a = t[i]
    local name, val = a:match("^%-%-([%w_]+)=(.*)$")
    name = name or a:match("^%-%-([%w_]+)$")
    if a == "-v" then name = "verbose" end
    if name and OPTS_WITH_VALUE[name] and name ~= "timeout" then
      if val == nil then i = i + 1 end          -- its value too
    elseif not (name and OPTS_FLAG[name] and val == nil) then
      out[#out + 1] = M.shellquote(a)
    end
    i = i + 1
  end
  return out
end

-- ARGS as replay words, with a leading blank ("" when none).
local function replay_args ()
  local out = replay_words(ARGS, 1, #ARGS)
  return #out > 0 and (" " .. table.concat(out, " ")) or ""
end

local function scriptname ()
  return (arg and arg[0]) or "(script)"
end

-- Take the framework's options out of the script's arguments (so the script
-- sees only its own) and merge them over nvfp4.options.
local function getoptions ()
  local o = {}
  for k, v in pairs(nvfp4.options) do o[k] = v end
  local rest, i = {}, 1
  while arg and arg[i] ~= nil do
    local a = arg[i]
    local name, val = a:match("^%-%-([%w_]+)=(.*)$")
    name = name or a:match("^%-%-([%w_]+)$")
    if a == "-v" then name = "verbose" end
    if name and OPTS_FLAG[name] and val == nil then
      o[name] = true
    elseif name and OPTS_WITH_VALUE[name] then
      if val == nil then
        i = i + 1
        val = arg[i]
        if val == nil then error("option '--" .. name .. "' needs a value", 0) end
      end
      o[name] = val
    elseif name and LUA_OPTS[name] or a == "-e" then
      -- nvfp4-lua's own: it reads them before the script only
      error(("'%s' is an option of nvfp4-lua: give it before the script (nvfp4-lua %s ... %s)")
            :format(a, a, (arg and arg[0]) or "script.lua"), 0)
    elseif a:find("^%-%-?%a") then
      -- a script takes its own options out of arg before sc.run(), so what
      -- is left is a typo or an option for another script
      error("unknown option '" .. a .. "' (the framework's: --list, --filter PATTERN, --timeout S, "
            .. "--tap, --junit FILE, --verbose or -v, --seed N)", 0)
    else
      rest[#rest + 1] = a
    end
    i = i + 1
  end
  if arg then
    for j = 1, math.max(#arg, #rest) do arg[j] = rest[j] end
  end
  if o.seed ~= nil then
    -- decimal digits only (as sc.params' NAME=integer; 1e3 and 0x10 would convert)
    local s = tostring(o.seed):match("^%d+$") and math.tointeger(tonumber(o.seed))
    if not s or s < 0 then
      error("--seed: '" .. tostring(o.seed) .. "' is not a non-negative decimal integer below 2^63", 0)
    end
    o.seed = s
    nvfp4.options.seed, nvfp4.seed = s, s      -- the default seed of nvfp4.randn etc.
  end
  local given = o.timeout
  o.timeout = tonumber(o.timeout or 60)
  if o.timeout == nil or not (o.timeout > 0 and o.timeout < math.huge) then
    error(("--timeout must be a positive, finite number of seconds, got '%s'"):format(tostring(given)), 0)
  end
  o.timeout = math.min(o.timeout, 1e8)       -- ~3 years: the watchdog's deadline stays in range
  return o
end


-- A helper's bad argument, at the scenario's line: "bad argument #n to
-- 'sc.name' (msg)", as Lua's own functions say it.
local function argcheck (cond, n, name, msg, level)
  if not cond then error(("bad argument #%d to 'sc.%s' (%s)"):format(n, name, msg), level or 3) end
end

-- ---- cases and grids -----------------------------------------------------

-- A value as text: a plain table as a constructor, {1, 2, a = 3}.  For a
-- message (limit true) at most about 200 characters, three levels deep
-- ("{...}"), building no more than that; for a case's name and JUnit
-- (limit nil) whole, so that grid values differing late give different
-- names (a table nested past 20 levels, or a cycle, is "{...}").
local function fmtvalue (v, limit)
  local budget, total, path = limit and 200 or math.huge, 0, {}
  local function fmt (x, depth, quote)
    if type(x) == "string" then return quote and ("%q"):format(x) or x end
    if type(x) ~= "table" or getmetatable(x) ~= nil then return tostring(x) end
    -- three levels for a message; for a name, a table on its own path (a
    -- cycle) is "{...}", and past 64 KiB of text in all the rest is "..."
    if depth >= (limit and 3 or 20) or path[x] or total > 65536 then return "{...}" end
    path[x] = true
    local parts, keys, n, used = {}, {}, #x, 0
    for k in pairs(x) do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
    end
    table.sort(keys, function (a, b) return tostring(a) < tostring(b) end)
    for i = 1, n + #keys do
      if used > budget then parts[#parts + 1] = "..."; break end
      local k = i <= n and i or keys[i - n]
      local item = fmt(x[k], depth + 1, true)
      if i > n then
        item = (type(k) == "string" and k:match("^[%a_][%w_]*$") and k or "[" .. fmt(k, depth + 1, true) .. "]")
               .. " = " .. item
      end
      parts[#parts + 1] = item
      used = used + #item + 2
      total = total + #item + 2
    end
    path[x] = nil
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  local s = fmt(v, 0, false)
  return (limit and #s > 200) and s:sub(1, 197) .. "...}" or s
end

-- Equality for sc.eq: plain tables (no metatable) by contents, the same
-- keys with equal values in turn; anything else as ==.  seen: the pairs of
-- tables being compared (a cycle compares as equal where it closes).
local function same (a, b, seen)
  if rawequal(a, b) then return true end
  if type(a) ~= "table" or type(b) ~= "table" or getmetatable(a) ~= nil or getmetatable(b) ~= nil then
    return a == b
  end
  seen = seen or {}
  seen[a] = seen[a] or {}
  if seen[a][b] then return true end
  seen[a][b] = true
  for k, v in pairs(a) do if not same(v, b[k], seen) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- The ordered parameter names of a grid: {B = {..}} sorted by name, or a
-- list of pairs {{"S", {..}}, {"B", {..}}} in the given order.
local function gridaxes (grid)
  local axes = {}
  if grid[1] ~= nil then
    for i, pair in ipairs(grid) do
      if type(pair) ~= "table" or type(pair[1]) ~= "string" or type(pair[2]) ~= "table" then
        error(("grid entry %d must be {name, {values..}}"):format(i), 3)
      end
      if #pair[2] == 0 then   -- as the keyed form: an empty axis made no case at all, silently
        error(("grid parameter '%s' must be a non-empty list of values"):format(pair[1]), 3)
      end
      axes[#axes + 1] = {name = pair[1], values = pair[2]}
    end
  else
    local names = {}
    for k in pairs(grid) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      if type(grid[k]) ~= "table" or #grid[k] == 0 then
        error(("grid parameter '%s' must be a non-empty list of values"):format(k), 3)
      end
      axes[#axes + 1] = {name = k, values = grid[k]}
    end
  end
  local seen = {}
  for i, ax in ipairs(axes) do
    if ax.name == "seed" then
      error("grid parameter 'seed' is reserved: p.seed is the case's own seed (name it otherwise)", 3)
    end
    if seen[ax.name] then   -- the later list would replace the earlier in every point
      error(("grid parameter '%s' is given twice (entries %d and %d): give it once, with all its values")
            :format(ax.name, seen[ax.name], i), 3)
    end
    seen[ax.name] = i
  end
  return axes
end

local function expand (axes, i, p, out)
  if i > #axes then
    local copy = {}
    for k, v in pairs(p) do copy[k] = v end
    out[#out + 1] = copy
    return
  end
  for _, v in ipairs(axes[i].values) do
    p[axes[i].name] = v
    expand(axes, i + 1, p, out)
  end
  p[axes[i].name] = nil
end

--- sc.case(name, [grid,] fn): register a case, or one case per point of
-- the grid, named "name [B=1, TP=2]".  fn(p) gets the parameters plus
-- p.seed, a seed derived from the run seed and the case's full name.
function M.case (name, ...)
  local grid, fn = ...
  if current then
    error("sc.case inside a case: register cases at the top level, before sc.run() (this one would "
          .. "never run)", 2)
  end
  -- fn's argument number: sc.case("x", grid, f) with f nil (a misspelt name) is #3, not a grid in fn's place
  local nfn = select("#", ...) >= 2 and 3 or 2
  if nfn == 2 then grid, fn = nil, grid end
  argcheck(type(name) == "string", 1, "case", "name must be a string, got " .. type(name))
  argcheck(type(fn) == "function", nfn, "case", ("case '%s' needs a function, got %s"):format(name, type(fn)))
  local new = {}
  if grid == nil then
    new[1] = {name = name, params = {}, order = {}, fn = fn}
  else
    argcheck(type(grid) == "table", 2, "case", ("case '%s': grid must be a table, got %s"):format(name, type(grid)))
    local axes = gridaxes(grid)
    local points = {}
    expand(axes, 1, {}, points)
    for _, p in ipairs(points) do
      local parts, order = {}, {}
      for _, ax in ipairs(axes) do
        parts[#parts + 1] = ax.name .. "=" .. fmtvalue(p[ax.name])
        order[#order + 1] = ax.name
      end
      new[#new + 1] = {name = name .. " [" .. table.concat(parts, ", ") .. "]",
                       params = p, order = order, fn = fn}
    end
  end
  -- a case is known by its full name: --filter selects by it and p.seed is
  -- derived from it, so two cases of one name could not be told apart
  -- (checked for the whole grid before any of it is registered)
  local names = {}
  for _, c in ipairs(new) do
    if casenames[c.name] or names[c.name] then
      error(("case '%s' is registered twice (case names must be unique: --filter and p.seed go by "
             .. "the name)"):format(c.name), 2)
    end
    names[c.name] = true
  end
  for _, c in ipairs(new) do
    cases[#cases + 1] = c
    casenames[c.name] = true
  end
end

-- FNV-1a over the name, mixed with the run seed: a case's seed does not
-- depend on which other cases run (so --filter replays it).
local function caseseed (runseed, name)
  local h = 0x811c9dc5
  for i = 1, #name do
    h = ((h ~ name:byte(i)) * 0x01000193) & 0xffffffff
  end
  return (runseed * 0x9E3779B1 + h) & 0x7fffffff
end


-- ---- assertions ----------------------------------------------------------

local function count ()
  if current then current.asserts = current.asserts + 1 end
end

local function logpass (what, detail)
  if current and current.verbose then
    current.log[#current.log + 1] = "ok: " .. (what or "check") .. (detail and (": " .. detail) or "")
  end
end

-- A library error's message without the position Lua gave it (the
-- framework's own line), for fail to put the scenario's line in front.
local function bare (e)
  return (tostring(e):gsub("^[^\n]-:%d+: ", "", 1))
end

local function fail (what, msg, level)
  error((what and (what .. ": ") or "") .. msg, (level or 2) + 1)
end

local function checkwhat (what, n, name)
  argcheck(what == nil or type(what) == "string", n, name,
           "what must be a string or nil, got " .. type(what), 4)
end

--- sc.ok(cond, what): a plain truth assertion.
function M.ok (cond, what)
  checkwhat(what, 2, "ok")
  count()
  if not cond then fail(what or "assertion", "failed", 2) end
  logpass(what)
  return cond
end

--- sc.eq(actual, expected, what): actual == expected, printing both;
-- plain tables (no metatable) compare by contents ({1, 2} equals {1, 2}).
function M.eq (actual, expected, what)
  checkwhat(what, 3, "eq")
  count()
  if not same(actual, expected) then
    fail(what, ("expected %s, got %s"):format(fmtvalue(expected, true), fmtvalue(actual, true)), 2)
  end
  if current and current.verbose then logpass(what, fmtvalue(actual, true)) end
  return actual
end

-- A plain table as a shape; one that is no shape fails at the scenario's line
-- (sc.shape's and sc.shapes' caller), saying which side it was.
local function asshape (s, which, what)
  if type(s) == "table" and getmetatable(s) == nil then
    local ok, r = pcall(nvfp4.shape, s)
    if not ok then
      fail(what, ("%s %s is no shape: %s"):format(which, fmtvalue(s, true),
                                                  (bare(r):gsub("^bad argument #1 to '[^']*' %((.*)%)$", "%1"))), 3)
    end
    return r
  end
  return s
end

--- sc.shape(actual, expected, what): shape equality; plain tables are
-- taken as shapes.  Prints "[a, b] vs expected [c, d]".
function M.shape (actual, expected, what)
  checkwhat(what, 3, "shape")
  count()
  if actual == nil then fail(what, "no shape (the buffer is absent), expected " .. tostring(asshape(expected, "expected", what)), 2) end
  actual, expected = asshape(actual, "actual", what), asshape(expected, "expected", what)
  if actual ~= expected then
    fail(what, ("shape %s, expected %s"):format(tostring(actual), tostring(expected)), 2)
  end
  logpass(what, tostring(actual))
  return actual
end

--- sc.shapes(actual, expected, what): tables of named shapes (for layers:
-- {dgrad = .., wgrad = ..}); every name of expected must match.
function M.shapes (actual, expected, what)
  checkwhat(what, 3, "shapes")
  argcheck(type(expected) == "table", 2, "shapes", "expected must be a table of shapes, got " .. type(expected))
  if type(actual) ~= "table" then
    count()
    fail(what, ("got %s, expected a table of shapes"):format(type(actual)), 2)
  end
  local names = {}
  for k in pairs(expected) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    count()
    local a, e = asshape(actual[k], "actual", what), asshape(expected[k], "expected", what)
    if a ~= e then
      fail(what, ("%s: shape %s, expected %s"):format(k, tostring(a), tostring(e)), 2)
    end
  end
  logpass(what, #names .. " shapes")
end

--- sc.bytes(a, b, what): byte equality of two tensors (nvfp4.equal: every
-- buffer and the amaxes) or two strings; prints the first differing
-- index (0-based byte) and both values.
function M.bytes (a, b, what)
  checkwhat(what, 3, "bytes")
  count()
  if type(a) == "string" and type(b) == "string" then
    if #a ~= #b then fail(what, ("sizes differ: %d vs %d bytes"):format(#a, #b), 2) end
    if a ~= b then
      local i = 1
      while a:byte(i) == b:byte(i) do i = i + 1 end
      fail(what, ("first difference at byte %d (0-based) of %d: 0x%02x vs 0x%02x")
           :format(i - 1, #a, a:byte(i), b:byte(i)), 2)
    end
    logpass(what, #a .. " bytes equal")
    return true
  end
  local called, ok, msg = pcall(nvfp4.equal, a, b)
  if not called then fail(what, bare(ok), 2) end      -- e.g. a closed tensor: at the scenario's line
  if not ok then fail(what, msg, 2) end
  logpass(what, "bytes equal")
  return true
end

--- sc.close(actual, expected, tol, what): relative error <= tol; tensors
-- (nvfp4.rel_error: ||a-b|| / ||b||) or numbers (|a-b| / |b|).
function M.close (actual, expected, tol, what)
  checkwhat(what, 4, "close")
  -- a NaN tol failed every comparison ("relative error 0 > threshold nan")
  argcheck(type(tol) == "number" and tol == tol, 3, "close",
           "tol must be a number, got " .. (tol ~= tol and "nan" or type(tol)))
  count()
  local err
  if type(actual) == "number" and type(expected) == "number" then
    err = math.abs(actual - expected) / (expected ~= 0 and math.abs(expected) or 1)
  elseif type(actual) == "userdata" and type(expected) == "userdata" then
    local ok, e = pcall(nvfp4.rel_error, actual, expected)
    if not ok then fail(what, bare(e), 2) end           -- shapes differ: at the scenario's line
    err = e
  else       -- e.g. a layer's db (nil without a bias): the scenario's line, not ours
    fail(what, ("cannot compare %s with %s (two numbers or two tensors)")
               :format(actual == nil and "nil" or type(actual), expected == nil and "nil" or type(expected)), 2)
  end
  if not (err <= tol) then
    fail(what, ("relative error %.3g > threshold %.3g"):format(err, tol), 2)
  end
  logpass(what, ("relative error %.3g <= %.3g"):format(err, tol))
  return err
end

--- sc.error(pattern, f, ...): f(...) must raise an error whose message
-- contains pattern (plain text first, then as a Lua pattern).  Returns
-- the message.
function M.error (pattern, f, ...)
  argcheck(type(pattern) == "string", 1, "error", "pattern must be a string, got " .. type(pattern))
  -- a value in f's place (sc.error("x", nvfp4.quantize(bad)): the call made too early) raised
  -- "attempt to call a ... value", which a pattern such as "value" took for the expected error
  argcheck(type(f) == "function" or (getmetatable(f) or {}).__call ~= nil, 2, "error",
           "f must be a function, got " .. type(f))
  count()
  local ok, msg = pcall(f, ...)
  if ok then
    fail(nil, ("expected an error matching '%s', but the call succeeded"):format(pattern), 2)
  end
  if getmetatable(msg) == SKIPMARK then error(msg, 0) end   -- f skipped the case: so does this
  msg = tostring(msg)
  local found = msg:find(pattern, 1, true)
  if not found then
    local pok, r = pcall(string.find, msg, pattern)
    found = pok and r
  end
  if not found then
    fail(nil, ("expected an error matching '%s', got: %s"):format(pattern, msg), 2)
  end
  logpass("error", msg)
  return msg
end

--- sc.skip(reason): end the case as skipped.
function M.skip (reason)
  argcheck(reason == nil or type(reason) == "string", 1, "skip",
           "reason must be a string, got " .. type(reason))
  if not current then
    error(("sc.skip outside a case (%s): it ends the case under way as skipped; call it inside a case's "
           .. "function"):format(reason or "skipped"), 2)
  end
  error(setmetatable({reason = reason or "skipped"}, SKIPMARK), 0)
end

--- sc.need_ranks(n): skip unless the world has a multiple of n ranks.
function M.need_ranks (n)
  argcheck(math.type(n) == "integer" and n >= 1, 1, "need_ranks",
           "n must be an integer >= 1, got " .. (type(n) == "number" and tostring(n) or type(n)))
  local size = nvfp4.world().size
  local why = (size < n or size % n ~= 0) and ("needs a multiple of %d ranks, have %d"):format(n, size)
  if not current then
    error(("sc.need_ranks(%d) outside a case: it skips the case under way (%s); call it inside a case's "
           .. "function (at the top level, compare nvfp4.world().size and call sc.usage)")
          :format(n, why or "the world has " .. size), 2)
  end
  if why then M.skip(why) end
end

--- sc.log(fmt, ...): a line in the case's verbose output.
function M.log (fmt, ...)
  argcheck(type(fmt) == "string", 1, "log", "fmt must be a string, got " .. type(fmt))
  if current then current.log[#current.log + 1] = fmt:format(...) end
end

--- sc.assertion(name, check): add an assertion sc[name](...) built from
-- check(...) -> ok, message (e.g. for a Linear layer's outputs).
function M.assertion (name, check)
  argcheck(type(name) == "string", 1, "assertion", "name must be a string, got " .. type(name))
  argcheck(type(check) == "function" or (getmetatable(check) or {}).__call ~= nil, 2, "assertion",
           "check must be a function, got " .. type(check))
  if M[name] ~= nil then error("assertion '" .. name .. "' already exists", 2) end
  M[name] = function (...)
    count()
    local ok, msg = check(...)
    if not ok then fail(name, msg or "failed", 2) end
    logpass(name, msg)
    return ok
  end
end


-- ---- reports -------------------------------------------------------------

local function xmlesc (s)
  return (tostring(s):gsub("[&<>\"']", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                         ['"'] = "&quot;", ["'"] = "&apos;"})
                     :gsub("[%z\1-\8\11\12\14-\31]", "?"))
end

local function yamlstr (s)
  return "'" .. tostring(s):gsub("'", "''"):gsub("\n", " | ") .. "'"
end

local function rankslist (ranks)
  return table.concat(ranks, ", ")
end

-- The --filter that runs the case named name alone: the name itself, or,
-- when it is part of another case's name (a case 'shape' beside 'shapes'),
-- the name as an anchored Lua pattern (no name contains "^shape$" as it
-- is, so --filter takes it as a pattern).
local allnames                   -- "\0name1\0name2\0...", built once per run (sc.run)
local function replay_filter (name)
  local first = allnames:find(name, 1, true)
  if first and allnames:find(name, first + 1, true) then      -- also inside another name
    return "^" .. name:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0") .. "$"
  end
  return name
end

-- results: {name, case, verdict, ranks, message, detail, time, seed}.  The
-- file is written whole to file .. ".tmp" and renamed, so a reader never sees
-- half a file; sc.run writes it before each case too (the pending case as
-- failed), so a job that a timeout, an os.exit or a crash ends leaves a file
-- that says so.
local function junitxml (script, results, seed, total)
  local f = {}
  function f:write (s) self[#self + 1] = s end
  local nf, ns = 0, 0
  for _, r in ipairs(results) do
    if r.verdict == FAIL then nf = nf + 1 elseif r.verdict == SKIP then ns = ns + 1 end
  end
  f:write('<?xml version="1.0" encoding="UTF-8"?>\n')
  f:write(('<testsuites tests="%d" failures="%d" skipped="%d" time="%.3f">\n'):format(#results, nf, ns, total))
  f:write(('  <testsuite name="%s" tests="%d" failures="%d" errors="0" skipped="%d" time="%.3f">\n')
          :format(xmlesc(script), #results, nf, ns, total))
  f:write('    <properties>\n')
  f:write(('      <property name="seed" value="%d"/>\n'):format(seed))
  f:write(('      <property name="np" value="%d"/>\n'):format(nvfp4.world().size))
  f:write(('      <property name="backend" value="%s"/>\n'):format(xmlesc(nvfp4.backend())))
  f:write('    </properties>\n')
  for _, r in ipairs(results) do
    f:write(('    <testcase classname="%s" name="%s" time="%.3f">\n')
            :format(xmlesc(script), xmlesc(r.name), r.time))
    f:write('      <properties>\n')
    for _, k in ipairs(r.case.order) do
      f:write(('        <property name="%s" value="%s"/>\n'):format(xmlesc(k), xmlesc(fmtvalue(r.case.params[k]))))
    end
    f:write(('        <property name="case_seed" value="%d"/>\n'):format(r.seed))
    if r.verdict == FAIL and #r.ranks > 0 then
      f:write(('        <property name="ranks" value="%s"/>\n'):format(rankslist(r.ranks)))
    end
    f:write('      </properties>\n')
    if r.verdict == FAIL then
      local where = #r.ranks > 0 and (" (on rank%s %s)"):format(#r.ranks > 1 and "s" or "", rankslist(r.ranks)) or ""
      f:write(('      <failure message="%s" type="failure">%s</failure>\n')
              :format(xmlesc(r.message .. where), xmlesc(r.detail)))
    elseif r.verdict == SKIP then
      f:write(('      <skipped message="%s"/>\n'):format(xmlesc(r.message)))
    end
    f:write('    </testcase>\n')
  end
  f:write('  </testsuite>\n</testsuites>\n')
  return table.concat(f)
end

local function writefile (file, text)
  local f, err = io.open(file .. ".tmp", "w")
  if not f then error("--junit: " .. err, 0) end
  f:write(text)
  f:close()
  local ok, rerr = os.rename(file .. ".tmp", file)
  if not ok then error("--junit: " .. rerr, 0) end
end

local function writejunit (file, script, results, seed, total)
  writefile(file, junitxml(script, results, seed, total))
end


-- ---- running -------------------------------------------------------------

--- sc.usage(msg): a usage error of the script, raised at its top level
--- (its arguments break one of its rules): "<script>: msg" on one line,
--- exit status 2, no traceback, before any case (as sc.params' errors).
--- Every rank has the same arguments, so every rank raises it alike.
function M.usage (msg)
  local raise = debug.getregistry()["nvfp4.usage_error"] or function (m) error(m, 0) end
  raise(("%s: %s"):format(scriptname(), tostring(msg)))
end

--- sc.params(defaults [, timeout]): the script's NAME=integer arguments
--- (S=512 H=1024), taken out of arg so that the framework does not see
--- them, over a copy of defaults.  A usage error (status 2, a line naming
--- the known ones, before any case): an unknown upper-case NAME with an
--- integer, a name of defaults in another case (s=5 for S), a value of a
--- name of defaults that is not a decimal integer or is past 64 bits.
--- Other name=value arguments (MODE=row) stay in arg for the script.  The
--- value of a framework option (--filter 'TP=2') is not taken for one.
--- timeout: the default --timeout for this script when the command line
--- gives none (a full-size run takes minutes).
local params_called = false   -- sc.params ran: sc.run() notes NAME=integer words left unread otherwise

function M.params (defaults, timeout)
  params_called = true
  argcheck(type(defaults) == "table", 1, "params", "defaults must be a table, got " .. type(defaults))
  argcheck(timeout == nil or (type(timeout) == "number" and timeout > 0), 2, "params",
           "timeout must be a number of seconds > 0, got " .. (type(timeout) == "number" and ("%g"):format(timeout)
                                                                or type(timeout)))
  -- a --timeout before the script (nvfp4.options) counts as given too: the default appended
  -- to arg below would override it
  local P, names, upper, i, have_timeout = {}, {}, {}, 1, nvfp4.options.timeout ~= nil
  for k, v in pairs(defaults) do P[k] = v; names[#names + 1] = k; upper[k:upper()] = k end
  table.sort(names)
  local function bad (msg)
    M.usage(("%s (%s)"):format(msg, #names == 0 and "this script takes no NAME=integer"
                               or "this script takes " .. table.concat(names, "=<integer>, ") .. "=<integer>"))
  end
  arg = arg or {}
  while arg[i] ~= nil do
    local a = arg[i]
    local opt = a:match("^%-%-([%w%-]+)$")
    local k, v = a:match("^([%a_][%w_]*)=(.*)$")
    -- ours: a name of defaults, one of them in another case (s=5 for S=5),
    -- or an unknown upper-case NAME with an integer (S=512's typo); any
    -- other name=value (MODE=row) is left to the script
    if k and P[k] == nil and not upper[k:upper()] and not (k:match("^%u[%u%d_]*$") and v:match("^%-?%d+$")) then
      k = nil
    end
    if a:match("^%-%-timeout") then have_timeout = true end
    if opt and OPTS_WITH_VALUE[opt] then
      i = i + 2                                 -- the option and its value
    elseif k then
      if P[k] == nil then
        bad(upper[k:upper()] and ("unknown argument '%s' (did you mean %s?)"):format(a, upper[k:upper()])
            or ("unknown argument '%s'"):format(a))
      end
      local n = v:match("^%-?%d+$") and math.tointeger(tonumber(v))
      if not n then
        bad(("%s: '%s' is not %s"):format(k, v, v:match("^%-?%d+$") and "a 64-bit integer"
                                                   or "a decimal integer"))
      end
      P[k] = n
      table.remove(arg, i)
    else
      i = i + 1
    end
  end
  if timeout and not have_timeout then arg[#arg + 1] = "--timeout=" .. timeout end
  return P
end

local function squote (s)               -- s in single quotes
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- sc.shellquote(s): s as one word for a POSIX shell: as it is when it
-- holds only letters, digits and ._/-+=:,@%, else in single quotes (a
-- quote inside as '\''), so that a printed replay command pastes as it is
-- from a path with a blank.
function M.shellquote (s)
  s = tostring(s)
  if s ~= "" and not s:find("[^%w%._/%-%+=:,@%%]") then return s end
  return squote(s)
end

--- sc.program([replay]): the command that runs this script as it was
-- typed, up to the script: the program and its options before the script
-- (e.g. "_build/lua/nvfp4-lua --backend cuda"), each word shell-quoted;
-- with replay true, for printing replay commands, without the options a
-- replay sets itself or must not repeat (--seed, --filter; --junit, --tap,
-- --list, --verbose: a pasted replay would overwrite the run's report).
function M.program (replay)
  local i, words = 0, {}
  while arg and arg[i - 1] ~= nil do i = i - 1 end
  if i == 0 then return "nvfp4-lua" end
  if replay then                                -- the program itself, then its options filtered
    words = replay_words(arg, i + 1, -1)
    table.insert(words, 1, M.shellquote(arg[i]))
  else
    for j = i, -1 do words[#words + 1] = M.shellquote(arg[j]) end
  end
  return table.concat(words, " ")
end

--- sc.group(tp): in a case (or a script's own case loop, as the layout
-- fuzz's), the world split into groups of tp consecutive ranks
-- (world:split(tp)), kept by the framework from case to case as a
-- training run keeps its TP group: over NCCL a split is a new
-- communicator (about 0.7 s with its warm-up on two H200s), which a
-- scenario that splits per case spends most of its time on.  Collective
-- like split (every rank calls it, in the same order).  The framework owns
-- it: a case does not close it (after a case that closed one, on any rank,
-- sc.run closes them all on every rank, says so once, and the next call
-- splits afresh).  After a case that failed on some rank (or was skipped on
-- some only) every kept group is closed, since one may hold a collective
-- that some rank never joined; so are they when the run ends.
local groups, warned = {}, false
function M.group (tp)
  local g = groups[tp]
  if g == nil or g:isclosed() then
    local w = nvfp4.world()
    local ok, r = pcall(w.split, w, tp)
    -- split's error at the scenario's line, as the assertions' (not here);
    -- a size the world cannot hold: the case wants sc.need_ranks first
    if not ok then
      local e = bare(r)
      if math.type(tp) == "integer" and tp >= 1 and w.size % tp ~= 0 then
        e = e .. ("; sc.need_ranks(%d) first skips a case the world cannot hold"):format(tp)
      end
      error(e, 2)
    end
    g = r
    groups[tp] = g
  end
  return g
end

--- sc.close_groups(): close sc.group's kept groups now (sc.run does it
-- after a failed case and at its end; for a script with its own case loop,
-- such as the layout fuzz).
function M.close_groups ()
  for k, g in pairs(groups) do
    g:close()
    groups[k] = nil
  end
end
local close_groups = M.close_groups

--- sc.backend_name(comm): the backend as the run headers print it: "cpu",
-- or for CUDA with the transport of comm (default the world), e.g.
-- "cuda (nccl)" or "cuda (mpi-staged)": which collectives a run exercised.
function M.backend_name (comm)
  local b = nvfp4.backend()
  if b == "cpu" then return b end
  return ("%s (%s)"):format(b, (comm or nvfp4.world()).transport)
end

local function handler (e)
  if getmetatable(e) == SKIPMARK then return e end
  return {message = tostring(e), traceback = debug.traceback(tostring(e), 2), str = type(e) == "string"}
end

-- The running case's deadline {at = clock, grace = s, timeout = s}, nil
-- between cases.  A rank's watchdog fires at `at` while the case runs in
-- its own code or after the case failed on it (it waits for the others'
-- verdicts), at + grace while it waits inside a collective (for a peer
-- that failed, hung or left), and at + 2 grace after the case ended well
-- on it.  So the first "[rank r] ... timed out" names the rank that hung
-- or failed, and the job still ends within timeout + 2 grace.
local deadline = nil
local caseserial = 0             -- cases started in this process (every sc.run): their notes' number
local self_source = debug.getinfo(1, "S").source   -- this file, skipped when naming a scenario's line
local bailout = nil              -- "Bail out!" under --tap: a hang ends the TAP stream properly

-- A rank waiting in a collective lingers a grace (and a quarter second) after
-- its message before it ends the job, so that a rank that left the case
-- without joining that collective (due at 2 grace) says so too: "[rank 1]
-- ... (it ended on this rank ...)" beside the others' "(waiting in
-- comm:all_gather ...)" names the rank that skipped it.
local function arm (graces, label)
  local d = deadline
  nvfp4.watchdog(math.max(d.at + graces * d.grace - nvfp4.clock(), 0.001), label,
                 d.timeout + graces * d.grace, bailout or "", d.replay and ("replay: " .. d.replay),
                 graces == 1 and d.grace + 0.25 or 0)
end

-- The error e of collective `name` called through pcall, as a direct
-- comm:name(..) call would have raised it: Lua gives a C function called by
-- pcall neither its name nor its caller's line, and counts self among the
-- arguments ("bad argument #3 to '?'").  The caller is the function `level`
-- levels above relocate's own caller.
local function relocate (e, name, level, plainfn)
  if type(e) ~= "string" or e:find("^[^\n]-:%d+: ") then return e end
  e = e:gsub("^bad argument #(%d+) to '%?'", function (n)
    n = tonumber(n) - (plainfn and 0 or 1)
    if n == 0 then return "calling '" .. name .. "' on bad self" end
    return ("bad argument #%d to '%s'"):format(n, name)
  end, 1)
  local info = debug.getinfo(level + 1, "Sl")
  if info and info.currentline and info.currentline > 0 then
    e = info.short_src .. ":" .. info.currentline .. ": " .. e
  end
  return e
end

-- Wrap the communicator's collectives (once per process) so that a rank
-- inside one during a case gets the later deadline and a label naming the
-- collective; in and out of cases their errors read as unwrapped (relocate).
local guarded = false
local function guardcollectives (world)
  if guarded then return end
  guarded = true
  local idx = debug.getmetatable(world).__index     -- (getmetatable gives the type's name)
  local _, methods = debug.getupvalue(idx, 1)
  if type(methods) ~= "table" then return end     -- not the C closure we know
  -- f wrapped: inside a case the later deadline, and a label naming `what`
  -- (shown as "<what>"); `waits(...)` says whether this call can wait for
  -- other ranks (nil: always)
  local function guard (f, name, what, waits, plainfn)
    return function (...)
      local label = deadline and current and current.label
      if label and waits and not waits(...) then label = nil end
      if label then
        -- the scenario's line, where two collectives could be: the first caller outside this file and C
        -- (sc.group's split is called from here, through pcall)
        local lvl, at = 2, debug.getinfo(2, "Sl")
        while at and (at.what == "C" or at.source == self_source) do
          lvl = lvl + 1
          at = debug.getinfo(lvl, "Sl")
        end
        at = at and at.currentline and at.currentline > 0 and (" at " .. at.short_src .. ":" .. at.currentline) or ""
        arm(1, label .. " (waiting in " .. what .. at .. " for the other ranks)")
      end
      local r = table.pack(pcall(f, ...))
      if label and deadline then arm(0, label) end
      if not r[1] then error(relocate(r[2], name, 2, plainfn), 0) end
      return table.unpack(r, 2, r.n)
    end
  end
  for _, name in ipairs{"split", "barrier", "all_gather", "reduce_scatter", "all_reduce",
                        "all_reduce_max", "all_gather_int", "all_gather_string"} do
    local f = methods[name]
    if f then methods[name] = guard(f, name, "comm:" .. name) end
  end
  -- the other calls that are collective over a group: a layer's forward and
  -- backward (when it has one), rel_error_group, quantize with amax_group
  local lmt = debug.getregistry()["nvfp4.linear"]
  if lmt and type(lmt.__index) == "table" then
    for _, name in ipairs{"forward", "backward"} do
      local f = lmt.__index[name]
      if f then
        lmt.__index[name] = guard(f, name, "linear:" .. name, function (l)
          local ok, cfg = pcall(l.config, l)
          return ok and cfg.tp > 1
        end)
      end
    end
  end
  -- a layer's creation over a group is collective too (its options agreed)
  nvfp4.linear = guard(nvfp4.linear, "linear", "nvfp4.linear", function (o)
    return type(o) == "table" and o.group ~= nil
  end, true)
  if nvfp4.rel_error_group then
    nvfp4.rel_error_group = guard(nvfp4.rel_error_group, "rel_error_group", "nvfp4.rel_error_group",
                                  nil, true)
  end
  nvfp4.quantize = guard(nvfp4.quantize, "quantize", "nvfp4.quantize (amax_group)", function (_, o)
    return type(o) == "table" and o.amax_group ~= nil
  end, true)
end

--- sc.run(): run the selected cases on every rank, agree on each verdict,
-- report on rank 0, and set nvfp4-lua's exit status: 1 when a case failed,
-- 2 for a usage error (an unknown option or bad value, a --filter that
-- matches no case, ranks with different case lists), before any case runs.
-- Returns true when no case failed.
function M.run ()
  if current then error("sc.run() inside a case: call it once, at the end of the script", 2) end
  local world = nvfp4.world()
  local okopt, o = pcall(getoptions)
  if not okopt then       -- the same arguments on every rank: all stop here
    if world.rank == 0 then io.stderr:write(("%s: %s\n"):format(scriptname(), tostring(o))) end
    nvfp4.exit_status(2)
    return false
  end
  local me = world.rank
  local out = (me == 0)
  -- B=2 given to a script that calls no sc.params was dropped without a word (the run went on at
  -- the script's own sizes): say so, as a note (a script reading arg itself may take it)
  if out and not params_called and arg then
    for _, a in ipairs(arg) do
      if a:match("^%u[%u%d_]*=%-?%d+$") then
        io.stderr:write(("%s: note: argument '%s' is not read by the framework: this script calls no "
                         .. "sc.params, which takes NAME=integer arguments\n"):format(scriptname(), a))
      end
    end
  end
  local tty = nvfp4.isatty(1)
  local human = out and not o.tap
  local chatty = human and (tty or o.verbose)
  local seed = nvfp4.seed
  local script = scriptname()

  -- --filter is plain text when some case name contains it as is, else a
  -- Lua pattern: decided once for the whole list, so "[TP=2, B=1]" does not
  -- turn into a character class for the cases it does not name.
  local plain = false
  if o.filter then
    for _, c in ipairs(cases) do
      if c.name:find(o.filter, 1, true) then plain = true; break end
    end
  end
  local selected = {}
  for _, c in ipairs(cases) do
    local keep = true
    if o.filter then
      local ok, r = pcall(string.find, c.name, o.filter, 1, plain)
      keep = ok and r ~= nil
    end
    if keep then selected[#selected + 1] = c end
  end

  -- a filter that selects nothing is a usage error, as an unknown option is
  -- (status 2; a failed case gives 1)
  local nomatch = #cases > 0 and #selected == 0
  local function refuse_nomatch ()
    if out then
      -- a filter with pattern characters was read as a Lua pattern (no name contains it as is): say so
      local magic = o.filter:find("[%^%$%(%)%%%.%[%]%*%+%-%?]")
      io.stderr:write(("%s: no case matches --filter '%s' (%d case%s; --list names them)%s\n")
                      :format(script, o.filter, #cases, #cases == 1 and "" or "s",
                              magic and "; no name contains it as is, so it was read as a Lua pattern, in "
                              .. "which ^$()%.[]*+-? are special: escape them with % (%+, %[) to match "
                              .. "them as text" or ""))
    end
    nvfp4.exit_status(2)
    return false
  end
  if o.list then
    if nomatch then return refuse_nomatch() end
    if out then for _, c in ipairs(selected) do print(c.name) end end
    return true
  end
  -- (no per-rank exit before the ranks compare their lists below: a rank
  -- whose filter matched nothing would leave the others waiting there)

  -- verdicts travel on their own communicator, so they never match a
  -- collective that a failed rank left half-done on the world
  local vcomm <close> = world:split(world.size)
  guardcollectives(world)
  do
    local names = {}
    for i, c in ipairs(cases) do names[i] = c.name end
    allnames = "\0" .. table.concat(names, "\0") .. "\0"
  end
  -- --junit's file is written at the end, by rank 0: a path it cannot write
  -- is a usage error now, not a failure after every case ran
  do
    local why
    if out and o.junit then     -- its .tmp is written, then renamed over it (a directory cannot be)
      local f0, _, code = io.open(o.junit, "r")     -- taken to exist unless ENOENT (2) says not
      local existed = f0 ~= nil or code ~= 2
      if f0 then f0:close() end
      for _, path in ipairs{o.junit .. ".tmp", o.junit} do
        local f, e = io.open(path, "a")
        if f then
          f:close()
          if path ~= o.junit or not existed then os.remove(path) end
        elseif not why then
          why = tostring(e):gsub("^" .. path:gsub("%p", "%%%0"), "", 1)
        end
      end
    end
    if vcomm:all_reduce_max(why and 1 or 0) == 1 then
      if out then io.stderr:write(("%s: --junit: cannot write '%s'%s\n"):format(script, o.junit, why)) end
      nvfp4.exit_status(2)
      return false
    end
  end
  -- the verdicts are agreed case by case, so every rank must run the same
  -- cases in the same order (a list built with pairs() differs between
  -- processes, a case registered on some ranks only shifts the others)
  do
    -- the names length-prefixed: joined by "\n", {"a\nb", "c"} and {"a", "b\nc"} read the same
    local packed = {}
    for i, c in ipairs(selected) do packed[i] = string.pack("<s4", c.name) end
    packed = table.concat(packed)
    local lists = vcomm:all_gather_string(caseseed(0, packed) .. ":" .. #selected)
    local differ = false
    for r = 2, #lists do differ = differ or lists[r] ~= lists[1] end
    if differ then
      local all = vcomm:all_gather_string(packed)
      if out then
        local function list (joined)
          local l, pos = {}, 1
          while pos <= #joined do l[#l + 1], pos = string.unpack("<s4", joined, pos) end
          return l
        end
        local first = list(all[1])
        local why
        for r = 2, #all do
          local k = 0
          for _, n in ipairs(list(all[r])) do
            k = k + 1
            if n ~= first[k] and not why then
              why = ("rank %d's case %d is '%s', rank 0's %s"):format(r - 1, k, n,
                    first[k] and ("'" .. first[k] .. "'") or "list has only " .. #first)
            end
          end
          if not why and k ~= #first then
            why = ("rank %d has %d cases, rank 0 %d"):format(r - 1, k, #first)
          end
        end
        io.stderr:write(("%s: the ranks run different cases: %s (register the same cases in the same "
                         .. "order on every rank; pairs() order differs between processes)\n")
                        :format(script, why or "their lists differ"))
      end
      nvfp4.exit_status(2)
      return false
    end
  end
  if nomatch then return refuse_nomatch() end
  bailout = o.tap and "Bail out!" or nil
  if out and o.tap then
    print("TAP version 13")
    print(("1..%d"):format(#selected))
  end
  if out then
    print(("# %s: %d case%s, np=%d, backend %s, seed %d (replay: --seed %d)")
          :format(script, #selected, #selected == 1 and "" or "s", world.size, M.backend_name(world), seed,
                  seed))
    io.stdout:flush()
  end

  local results, nfail, nskip, t_all = {}, 0, 0, clock()
  local failed_here = false              -- a case failed on this rank
  -- A case that calls os.exit ends the job (mpirun kills the others); say
  -- which rank and case did it, and never exit 0 from the middle of a case.
  local real_exit = os.exit
  local lastlabel = nil                  -- the case that ran last, between cases (its finalizers run then)
  os.exit = function (code, close)
    if current or lastlabel then
      local where = current and current.label
                    or lastlabel .. " (after it, between cases: a __gc finalizer of its objects?)"
      io.stdout:flush()
      local asked = type(code) == "string" and ("%q"):format(code) or tostring(code)
      -- the status the process ends with: the low byte of the integer (as the OS keeps it: 256 was 0),
      -- and never 0 from the middle of a case (nil, true, "0", 256 and false are 1)
      local n = 1
      if type(code) == "number" or type(code) == "string" then
        n = math.tointeger(tonumber(code))
        if n == nil then
          error(("bad argument #1 to 'os.exit' (an integer or a boolean, got %s)"):format(asked), 2)
        end
        n = n & 0xFF
        if n == 0 then n = 1 end
      elseif code ~= nil and type(code) ~= "boolean" then
        error(("bad argument #1 to 'os.exit' (an integer or a boolean, got %s)"):format(type(code)), 2)
      end
      io.stderr:write(("[rank %d] %s called os.exit(%s): the job ends with status %d\n")
                      :format(me, where, asked, n))
      io.stderr:flush()
      return real_exit(n, close)
    end
    return real_exit(code, close)
  end
  for i, c in ipairs(selected) do
    local p = {}
    for k, v in pairs(c.params) do p[k] = v end
    p.seed = caseseed(seed, c.name)
    local label = ("case '%s'"):format(c.name)
    lastlabel = label
    -- the command that runs this case again, as the run was started
    local replay = ("mpirun -np %d %s %s%s --seed %d --filter %s")
                   :format(world.size, M.program(true), M.shellquote(script), replay_args(), seed,
                           squote(replay_filter(c.name)))
    -- provisional (rank 0): what stays if the job ends inside this case; why: what rank 0 knows of it.
    -- Should rank 0's watchdog end the job (a timeout, or a peer's note while rank 0 waits for it), the
    -- watchdog writes the file again with the line it says in place of `why`
    local function provisional (why, detail)
      local mark = "@@nvfp4-watchdog-line@@"
      results[#results + 1] = {name = c.name, case = c, verdict = FAIL, ranks = {}, seed = p.seed, time = 0,
                               message = "the job ended during this case (" .. mark .. "); replay: " .. replay,
                               detail = detail or ""}
      local xml = junitxml(script, results, seed, clock() - t_all)
      results[#results] = nil
      local at = xml:find(mark, 1, true)
      local pre, post = xml:sub(1, at - 1), xml:sub(at + #mark)
      writefile(o.junit, pre .. xmlesc(why) .. post)
      nvfp4.watchdog_junit(o.junit, pre, post)
    end
    if out and o.junit then
      provisional("a timeout, a rank's failure while another waited for it in a collective, an os.exit or "
                  .. "a crash on some rank: see the job's output")
    end
    -- Staged deadlines (see guardcollectives), so that the rank to blame
    -- speaks first when a case does not end on every rank.
    current = {asserts = 0, log = {}, verbose = o.verbose, label = label}
    deadline = {at = nvfp4.clock() + o.timeout, grace = math.max(0.5, 0.05 * o.timeout),
                timeout = o.timeout, replay = replay}
    arm(0, label)
    caseserial = caseserial + 1         -- the same on every rank; never reused in the process
    nvfp4.watchdog_case(caseserial)     -- a peer's note that it left this case ends a wait for it at once
    local t0 = clock()
    local ok, e = xpcall(c.fn, handler, p)
    nvfp4.watchdog_case(0)
    local status, msg, detail, endlabel = PASS, "", "", nil
    if not ok and getmetatable(e) == SKIPMARK then
      status, msg = SKIP, e.reason
    elseif not ok then
      status, msg, detail = FAIL, e.message, e.traceback
      -- an error from a call in tail position of the case's own function
      -- (`return nvfp4.quantize(..)`) has no line: Lua dropped that frame,
      -- so the tail calls sit right on xpcall; name the case's function
      if e.str and not msg:find("^[^\n]-:%d+: ")
         and detail:find("(...tail calls...)\n\t[C]: in function 'xpcall'", 1, true) then
        local info = debug.getinfo(c.fn, "S")
        msg = ("%s:%d: %s (raised in a tail call (`return f(..)`) of the case's function, which starts at "
               .. "that line: Lua keeps no line for such a call)"):format(info.short_src, info.linedefined, msg)
      end
      endlabel = label .. " (it failed on this rank: " .. msg .. "; the other ranks did not finish it)"
      arm(0, endlabel)
      -- should the job end before the ranks agree on the verdict (a peer waiting for this rank), the
      -- JUnit file keeps rank 0's error
      if out and o.junit then
        provisional("it failed on rank 0: " .. msg .. "; the job ended before the ranks agreed on the "
                    .. "verdict: a rank waiting for rank 0 in a collective, or a timeout", detail)
      end
    end
    if status ~= FAIL then
      endlabel = label .. " (it ended on this rank; the other ranks did not finish it)"
      arm(2, endlabel)
    end
    -- this rank joins no more of the case's collectives: a rank waiting for it in one ends the job,
    -- naming it (rather than at the case's timeout)
    nvfp4.watchdog_tell(caseserial, status == FAIL and "failed in this case and will not join it: " .. msg
                           or status == SKIP and "skipped this case (" .. msg .. ") without joining it"
                           or "ended this case without joining it")
    local log = current.log
    current = nil
    -- free the case's tensors now; a __gc finalizer that does not return is named as such (the
    -- timeout read as if the case had ended well here and a peer had not finished it)
    local graces = status == FAIL and 0 or 2         -- as endlabel was armed
    arm(graces, label .. " (it ended on this rank, but the garbage collection after it has not returned: "
        .. "a __gc finalizer of the case's objects)")
    collectgarbage()
    arm(graces, endlabel)
    deadline = nil
    local verdict = vcomm:all_reduce_max(status)
    local per = vcomm:all_gather_int(status)
    if verdict == FAIL and status == FAIL then failed_here = true end
    local ranks = {}
    for r, s in ipairs(per) do if s == verdict and verdict ~= PASS then ranks[#ranks + 1] = r - 1 end end
    -- a kept group closed by the case, on some ranks or all: every rank
    -- closes the kept groups, so that the next sc.group splits on all of them
    -- (one rank splitting alone would wait for the others); said once
    local closed = 0
    for _, g in pairs(groups) do if g:isclosed() then closed = 1 end end
    closed = vcomm:all_reduce_max(closed)
    if closed == 1 and not warned and out then
      warned = true               -- once a run: a <close> on it costs a split a case
      io.stderr:write(("note: a case ('%s') closed an sc.group group; they are closed on every rank and split "
                       .. "afresh: the framework owns them (no <close> or close() on one)\n"):format(c.name))
    end
    if closed == 1 or (verdict ~= PASS and (verdict == FAIL or #ranks < #per)) then close_groups() end
    if verdict ~= PASS then
      -- the message of the lowest rank with this verdict (rank 0 reports),
      -- each cut to 64 KiB (the gather takes at most 16 MiB per rank); a
      -- failure's, of the lowest rank whose error is its own: a library
      -- collective's "rank r failed (...) (another rank failed)" (EPEER) only
      -- points at the rank whose reason it is
      local function cut (s)
        if #s <= 65536 then return s end
        return s:sub(1, 65536) .. ("... (%d more bytes)"):format(#s - 65536)
      end
      local msgs = vcomm:all_gather_string(status == verdict and cut(msg) or "")
      local dets = vcomm:all_gather_string(status == verdict and cut(detail) or "")
      local pick = ranks[1]
      if verdict == FAIL then
        for _, r in ipairs(ranks) do
          if not msgs[r + 1]:find("(another rank failed)", 1, true) then pick = r; break end
        end
      end
      msg, detail = msgs[pick + 1], dets[pick + 1]
      if pick ~= ranks[1] then msg = ("[rank %d] %s"):format(pick, msg) end
    end
    nvfp4.watchdog(0)
    if out and o.junit then nvfp4.watchdog_junit() end    -- the verdict is agreed: the provisional is stale
    local dt = clock() - t0
    results[#results + 1] = {name = c.name, case = c, verdict = verdict, ranks = ranks,
                             message = msg, detail = detail, time = dt, seed = p.seed}
    if verdict == FAIL then nfail = nfail + 1 elseif verdict == SKIP then nskip = nskip + 1 end

    if out and o.tap then
      local tname = c.name:gsub("[\r\n]+", " "):gsub("#", "\\#")   -- one line; '#' starts a directive
      if verdict == PASS then
        print(("ok %d - %s"):format(i, tname))
      elseif verdict == SKIP then
        print(("ok %d - %s # SKIP %s"):format(i, tname, (msg:gsub("[\r\n]+", " "))))
      else
        print(("not ok %d - %s"):format(i, tname))
        print("  ---")
        print("  message: " .. yamlstr(msg))
        print("  ranks: [" .. rankslist(ranks) .. "]")
        print(("  seed: %d"):format(p.seed))
        print("  replay: " .. yamlstr(replay))
        print("  ...")
      end
    elseif human then
      if verdict == FAIL then
        print(("FAIL  %s  (on rank%s %s)"):format(c.name, #ranks > 1 and "s" or "", rankslist(ranks)))
        print("      " .. msg:gsub("\n", "\n      "))
        print("      replay: " .. replay)
        if o.verbose then      -- the traceback, without the message it repeats
          local tb = detail:sub(1, #msg + 1) == msg .. "\n" and detail:sub(#msg + 2) or detail
          print("      " .. tb:gsub("\n", "\n      "))
        end
      elseif chatty then
        print(("%s  %s%s  (%.2f s)"):format(VERDICT[verdict], c.name,
              verdict == SKIP and (": " .. msg) or "", dt))
      end
      if o.verbose then for _, l in ipairs(log) do print("      " .. l) end end
    end
    if out then io.stdout:flush() end
  end

  lastlabel = nil
  os.exit = real_exit
  close_groups()
  local total = clock() - t_all
  local npass = #selected - nfail - nskip
  if out then
    local line = ("%d passed, %d failed, %d skipped (seed %d, %.1f s)")
                 :format(npass, nfail, nskip, seed, total)
    print((o.tap and "# " or "") .. line)
    if o.junit then writejunit(o.junit, script, results, seed, total) end
    io.stdout:flush()
    if nskip > 0 and nskip == #selected then   -- status 0, but nothing was checked (a wrong -np?)
      io.stderr:write(("note: every case was skipped (np=%d): nothing was checked; the first said: %s\n")
                      :format(world.size, results[1] and results[1].message or ""))
      io.stderr:flush()
    end
  end
  -- 1 where a case failed on this rank, 0 on the others: under mpirun the
  -- job's status is then 1 and its "first process to exit non-zero" is a
  -- rank that failed (with every rank at 1 it named any, often rank 0)
  if failed_here then nvfp4.exit_status(1) end
  M.results = results
  return nfail == 0
end

M.PASS, M.SKIP, M.FAIL = PASS, SKIP, FAIL
return M
