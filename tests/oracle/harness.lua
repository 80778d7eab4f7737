-- Reads cases (one a line) from arg[1], quantizes each with the library, writes the buffers
-- to arg[2].  Case line: id|dtype|d1,d2,..|opts|hexbytes
-- opts: key=value separated by ';' (row, col, rht, signs, sr, seed, offset, two_d, fo6, err, emax, amax, amaxc)
-- Result line: id|OK|rd|rs|cd|cs|ar|ac|deq_r_f32|deq_r_bf16|deq_c_f32|deq_c_bf16   (hex; '-' absent)  or id|ERR|message
local nvfp4 = require "nvfp4"
local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end
local function unhex(h) return (h:gsub("..", function(cc) return string.char(tonumber(cc, 16)) end)) end
local fin = assert(io.open(arg[1]))
local fout = assert(io.open(arg[2], "w"))
for line in fin:lines() do
  local id, dt, shp, opts, data = line:match("^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$")
  local shape = {}
  for d in shp:gmatch("[^,]+") do shape[#shape + 1] = tonumber(d) end
  local o = {}
  local amax, amaxc
  for kv in opts:gmatch("[^;]+") do
    local k, v = kv:match("^([^=]+)=(.*)$")
    if k == "row" then o.rowwise = v == "1"
    elseif k == "col" then o.columnwise = v == "1"
    elseif k == "rht" then o.rht = v == "1"
    elseif k == "signs" then o.rht_signs = v == "1"
    elseif k == "sr" then o.sr = v == "1"
    elseif k == "seed" then o.seed = math.tointeger(tonumber(v))
    elseif k == "offset" then o.offset = math.tointeger(tonumber(v))
    elseif k == "two_d" then o.two_d = v == "1"
    elseif k == "fo6" then o.four_over_six = v == "1"
    elseif k == "err" then o.four_over_six_error = v
    elseif k == "emax" then o.emax = tonumber(v)
    elseif k == "amax" then amax = tonumber(v)
    elseif k == "amaxc" then amaxc = tonumber(v)
    else error("bad opt " .. k) end
  end
  if amaxc then o.amax = {amax, amaxc} elseif amax then o.amax = amax end
  local ok, res = pcall(function()
    local x = nvfp4.from_bytes(shape, dt, unhex(data))
    local q = nvfp4.quantize(x, o)
    local parts = {}
    for _, b in ipairs{"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"} do
      local okb, by = pcall(q.bytes, q, b)
      if okb and by then parts[#parts + 1] = hex(by) else parts[#parts + 1] = "-" end
    end
    parts[#parts + 1] = q:has_rowwise() and hex(string.pack("<f", q:amax("rowwise"))) or "-"
    parts[#parts + 1] = q:has_columnwise() and hex(string.pack("<f", q:amax("columnwise"))) or "-"
    if q:has_rowwise() then
      parts[#parts + 1] = hex(nvfp4.dequantize(q, "fp32"):bytes())
      parts[#parts + 1] = hex(nvfp4.dequantize(q, "bf16"):bytes())
    else parts[#parts + 1] = "-"; parts[#parts + 1] = "-" end
    if q:has_columnwise() then
      parts[#parts + 1] = hex(nvfp4.dequantize(q, "fp32", "columnwise"):bytes())
      parts[#parts + 1] = hex(nvfp4.dequantize(q, "bf16", "columnwise"):bytes())
    else parts[#parts + 1] = "-"; parts[#parts + 1] = "-" end
    return table.concat(parts, "|")
  end)
  if ok then fout:write(id, "|OK|", res, "\n")
  else fout:write(id, "|ERR|", (tostring(res):gsub("[\r\n|]", " ")), "\n") end
end
fout:close()
