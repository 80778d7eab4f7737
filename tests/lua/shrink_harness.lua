-- shrink_harness.lua: the part tests/lua/fuzz_shrink*.lua share.  run(big,
-- want, msg, what) replays the case `big` (a Lua table's text) through the
-- layout fuzz (scenarios/fuzz/layouts.lua --replay), in which the caller has
-- planted a fault (in the oracle or the layer), and checks on rank 0 that the
-- shrinker ends at the case `want` failing with a message that holds `msg`:
-- "ok - <what>" and exit status 0, else "not ok" with what it got and 1.  The
-- fuzz's own verdict (1: the case failed) is not the test's.
local nvfp4 = require "nvfp4"
local top = (arg[0]:match("^(.*)/tests/lua/[^/]*$") or ".")

return function (big, want, msg, what)
  local lines = {}                        -- the fuzz's lines, kept (rank 0 prints them)
  local print0 = print
  print = function (...) local s = table.concat({...}, "\t"); lines[#lines + 1] = s; print0(s) end
  arg = {[0] = top .. "/scenarios/fuzz/layouts.lua", "--replay", big}
  local exit_status = nvfp4.exit_status
  nvfp4.exit_status = function () end
  dofile(arg[0])
  print = print0
  if nvfp4.world().rank == 0 then
    local text = table.concat(lines, "\n")
    local shrunk = text:match("as a Lua table: (%b{})")
    local got = text:match("to a case that fails with: ([^\n]*)") or ""
    local ok = shrunk == want and got:find(msg, 1, true) ~= nil
    print(ok and ("ok - " .. what)
             or ("not ok - shrunk to %s (wanted %s), failing with: %s"):format(tostring(shrunk), want, got))
    exit_status(ok and 0 or 1)
  end
end
