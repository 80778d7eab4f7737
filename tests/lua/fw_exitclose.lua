-- np=1  (run by framework.sh) os.exit(3, true) in a function with a pending <close> variable: lua_close runs
-- the main thread's <close> handlers first, which can make objects (the collector finalizes them: the ASan
-- build reports a leak otherwise), and then the finalizers, which cannot (Lua would never finalize what they
-- made). Exit status 3 when both hold; 4: the handler was refused; 5: a finalizer could make a tensor.
local nvfp4 = require "nvfp4"
keep_for_lua_close = setmetatable({}, {__gc = function ()
  local ok, e = pcall(nvfp4.zeros, {16})
  if ok or not tostring(e):find("cannot make a tensor while the Lua state closes", 1, true) then
    io.stderr:write("FAIL: a finalizer at lua_close: ", tostring(e), "\n")
    os.exit(5)
  end
end})
local function leave ()
  local handler <close> = setmetatable({}, {__close = function ()
    local ok, t = pcall(nvfp4.zeros, {1024})
    if not ok then
      io.stderr:write("FAIL: the <close> handler: ", tostring(t), "\n")
      os.exit(4)
    end
    made_in_the_handler = t
  end})
  os.exit(3, true)
end
leave()
