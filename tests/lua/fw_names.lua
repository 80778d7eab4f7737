-- np=2  (run by framework.sh) Case lists that differ but read the same joined by "\n": rank 0
-- registers {"a\nb", "c"}, rank 1 {"a", "b\nc"}. The check that every rank runs the same cases must
-- refuse them (it compared the joined text: the ranks then ran different cases under one verdict).
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local w = nvfp4.world()
local names = w.rank == 0 and {"a\nb", "c"} or {"a", "b\nc"}
sc.case(names[1], function () end)
sc.case(names[2], function () w:barrier() end)
sc.run()
