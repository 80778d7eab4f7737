-- np=2  sc.group: one TP group per size kept from case to case, closed and split afresh after a failed case
-- or when a case closed it (on every rank or some), closed when the run ends.  Run by framework.sh (case c
-- fails on purpose).
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local world = nvfp4.world()
local first, one

sc.case("a: the first call splits", function ()
  first = sc.group(2)
  sc.eq(first.size, 2, "its size")
  sc.ok(rawequal(sc.group(2), first), "the same group again within the case")
end)

sc.case("b: kept for the next case", function ()
  sc.ok(rawequal(sc.group(2), first), "case a's group")
  one = sc.group(1)
  sc.eq(one.size, 1, "a group of another size")
end)

sc.case("c: fails on rank 1", function ()
  sc.group(2):barrier()
  sc.eq(world.rank, 0, "the rank")
end)

sc.case("d: after a failed case every group is new", function ()
  sc.ok(first:isclosed() and one:isclosed(), "the groups kept before are closed")
  local g = sc.group(2)
  sc.ok(not rawequal(g, first) and not g:isclosed(), "a new group")
  first = g
  g:close()                                  -- a case closing it anyway
end)

sc.case("e: a group a case closed is split afresh", function ()
  local g = sc.group(2)
  sc.ok(not rawequal(g, first) and not g:isclosed(), "a new group")
  sc.eq(g:all_reduce_max(world.rank), 1, "it works")
  first = g
end)

sc.case("f: closed on rank 1 only, the case passes", function ()
  first = sc.group(2)
  if world.rank == 1 then first:close() end
end)

sc.case("g: every rank splits afresh after it, together", function ()
  local g = sc.group(2)                      -- rank 1 alone splitting would wait for rank 0
  sc.ok(not rawequal(g, first) and not g:isclosed(), "a new group on every rank")
  sc.eq(g:all_reduce_max(world.rank), 1, "it works")
  first = g
end)

sc.run()
print(("[rank %d] after the run, the kept group is closed: %s"):format(world.rank, tostring(first:isclosed())))
