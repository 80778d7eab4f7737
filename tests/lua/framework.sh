#!/bin/sh
# Tests of the scenario framework (lua/nvfp4/scenario.lua) through whole runs of nvfp4-lua:
# verdicts agreed across ranks, TAP 13, JUnit XML, --list, --filter, --seed replay, the timeout.
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-..}/tests/lua
RS="$builddir/tests/run-scenario"
test -x "$RS" || { echo "framework.sh: $RS is not built"; exit 99; }
. "${top_srcdir:-..}/tests/testlib.sh"
testlib_tmp nvfp4-fw
count () { grep -c -- "$1" "$2"; }

"$RS" "$srcdir/fw_cases.lua" --verbose --seed 7 >"$tmp/run1" 2>&1; rc=$?
cat "$tmp/run1"
check "a failed case gives exit status 1" test "$rc" -eq 1
check "the failure is reported once, naming rank 1" test "$(count 'FAIL  fails on rank 1 only  (on rank 1)' "$tmp/run1")" -eq 1
check "mpirun's block names rank 1, where it failed (every rank exited 1: it named any)" \
  grep -q "Process name: \[\[[0-9]*,[0-9]*\],1\]" "$tmp/run1"
check "the failure prints what it compared" grep -q "the answer: expected 42, got 41" "$tmp/run1"
check "cases after the failure still run" grep -q "PASS  after the failure" "$tmp/run1"
check "the expected-error case passes" grep -q "PASS  expected error" "$tmp/run1"
check "grid cases are named with their parameters" grep -q "PASS  grid \[n=3\]" "$tmp/run1"
check "the summary counts" grep -q "6 passed, 1 failed, 1 skipped (seed 7" "$tmp/run1"
check "the run prints its seed" grep -q "seed 7 (replay: --seed 7)" "$tmp/run1"
check "the header names the backend (CUDA: with its transport, as comm.transport)" \
  grep -Eq "^# .*fw_cases.lua: 8 cases, np=2, backend (cpu|cuda \((nccl|mpi-staged|mpi)\)), seed 7 " "$tmp/run1"
check "--verbose prints the failure's message once (the traceback does not repeat it)" \
  test "$(count 'the answer: expected 42, got 41' "$tmp/run1")" -eq 1
check "... and the traceback" grep -q "stack traceback:" "$tmp/run1"

check "a failure prints the command that replays it" \
  grep -q "replay: mpirun -np 2 .*fw_cases.lua --seed 7 --filter 'fails on rank 1 only'" "$tmp/run1"

"$RS" "$srcdir/fw_peer.lua" >"$tmp/peer" 2>&1; rc=$?
cat "$tmp/peer"
check "a peer's error on rank 0: exit status 1" test "$rc" -eq 1
check "... the verdict quotes the rank whose reason it is, not rank 0's 'rank 1 failed'" \
  grep -q "^      \[rank 1\] .*bad argument #1 to 'all_reduce' (nvfp4.tensor expected, got number)" "$tmp/peer"
check "... and still names both ranks" grep -q "FAIL  bad argument on rank 1  (on ranks 0, 1)" "$tmp/peer"
check "own errors everywhere: the lowest rank's, with no prefix" grep -q "^      own error on rank 0$" "$tmp/peer"

# os.exit in a case: the status is the low byte of the integer, never 0 (256 and "0" ended 0); a
# code that is no integer is the case's own error, naming os.exit
for c in 256 '"0"' 3 true; do
  "$RS" "$srcdir/fw_exit.lua" "$c" >"$tmp/exit" 2>&1; rc=$?
  want=1; test "$c" = 3 && want=3
  check "os.exit($c) in a case: exit status $want" test "$rc" -eq "$want"
  check "... and it says so" grep -qF "[rank 0] case 'exits' called os.exit($c): the job ends with status $want" "$tmp/exit"
done
"$RS" "$srcdir/fw_exit.lua" 1.5 --verbose >"$tmp/exit" 2>&1; rc=$?
check "os.exit(1.5) in a case: the case fails (exit status 1)" test "$rc" -eq 1
check "... naming os.exit" grep -q "fw_exit.lua:6: bad argument #1 to 'os.exit' (an integer or a boolean, got 1.5)" "$tmp/exit"
check "... and the run reports it" grep -q "^0 passed, 1 failed, 0 skipped" "$tmp/exit"

"$RS" "$srcdir/fw_exitclose.lua" >"$tmp/exitclose" 2>&1; rc=$?
check "os.exit(3, true): the main thread's <close> handlers it runs can make a tensor, its finalizers cannot (status 3)" \
  test "$rc" -eq 3
test "$rc" -eq 3 || sed 's/^/# /' "$tmp/exitclose"

"$RS" "$srcdir/fw_gc.lua" --timeout 6 >"$tmp/gc" 2>&1; rc=$?
check "a finalizer that raises is a Lua warning on its rank" \
  grep -q "^\[rank 1\] Lua warning: error in __gc (.*fw_gc.lua:[0-9]*: finalizer fails)" "$tmp/gc"
check "... and its case passes" grep -q "^PASS  gc raises" "$tmp/gc"
grep -q "^PASS  gc raises" "$tmp/gc" && grep -q "^\[rank 1\] Lua warning: error in __gc" "$tmp/gc" ||
  sed 's/^/# /' "$tmp/gc"      # what it said instead (CI's log)
check "a finalizer that never returns: the job ends (exit status 124)" test "$rc" -eq 124
check "... its rank's timeout names the garbage collection" \
  grep -q "^\[rank 1\] case 'gc hangs' (it ended on this rank, but the garbage collection after it has not returned: a __gc finalizer of the case's objects) timed out after" "$tmp/gc"

"$RS" "$srcdir/fw_gc.lua" exit --timeout 6 >"$tmp/gcx" 2>&1; rc=$?
check "a finalizer calling os.exit(0) between cases: exit status 1" test "$rc" -eq 1
check "... naming the case before it" \
  grep -qF "[rank 1] case 'gc exits' (after it, between cases: a __gc finalizer of its objects?) called os.exit(0): the job ends with status 1" "$tmp/gcx"

"$RS" "$srcdir/fw_names.lua" >"$tmp/names" 2>&1; rc=$?
check "case lists that differ only where names hold a newline: exit status 2" test "$rc" -eq 2
check "... naming the first difference" grep -q "the ranks run different cases: rank 1's case 1 is 'a', rank 0's 'a" "$tmp/names"
check "... before any case runs" test -z "$(grep '^PASS\|^FAIL' "$tmp/names")"

"$RS" "$srcdir/fw_group.lua" --timeout 10 >"$tmp/group" 2>&1; rc=$?
cat "$tmp/group"
check "sc.group: a failed case gives exit status 1" test "$rc" -eq 1
check "... the group is kept from case to case, and its checks pass" grep -q "6 passed, 1 failed, 0 skipped" "$tmp/group"
check "... the failed case is the one that fails on purpose" grep -q "FAIL  c: fails on rank 1  (on rank 1)" "$tmp/group"
check "... a case that closed it is told once, on rank 0" \
  test "$(count "closed an sc.group group; they are closed on every rank and split afresh" "$tmp/group")" -eq 1
check "... the run closes the kept groups when it ends" \
  test "$(count 'after the run, the kept group is closed: true' "$tmp/group")" -eq 2

"$RS" "$srcdir/fw_cases.lua" --filtr grid >"$tmp/typo" 2>&1; rc=$?
check "an option the framework does not know ends the run with status 2" test "$rc" -eq 2
check "... in one line, without a traceback" test -z "$(grep 'stack traceback' "$tmp/typo")"
check "... naming it" grep -q "unknown option '--filtr' (the framework's: --list" "$tmp/typo"
check "... before any case runs" test -z "$(grep '^PASS\|^FAIL' "$tmp/typo")"
"$RS" "$srcdir/fw_cases.lua" --backend cpu >"$tmp/late" 2>&1; rc=$?
check "nvfp4-lua's --backend after the script: exit status 2" test "$rc" -eq 2
check "... saying it goes before the script" \
  grep -q "'--backend' is an option of nvfp4-lua: give it before the script (nvfp4-lua --backend ... " "$tmp/late"
check "... before any case runs" test -z "$(grep '^PASS\|^FAIL' "$tmp/late")"

"$RS" "$srcdir/fw_cases.lua" --seed 7 >"$tmp/run2" 2>&1
"$RS" "$srcdir/fw_cases.lua" --seed 8 >"$tmp/run3" 2>&1
grep -o 'SEEDED rank [0-9]*: [^ ]* [^ ]* [0-9.e+-]*' "$tmp/run1" | sort >"$tmp/s1"
grep -o 'SEEDED rank [0-9]*: [^ ]* [^ ]* [0-9.e+-]*' "$tmp/run2" | sort >"$tmp/s2"
grep -o 'SEEDED rank [0-9]*: [^ ]* [^ ]* [0-9.e+-]*' "$tmp/run3" | sort >"$tmp/s3"
check "--seed replays the random values" cmp "$tmp/s1" "$tmp/s2"
check "seeded values were printed on both ranks" test "$(wc -l <"$tmp/s1")" -eq 2
check "another seed gives other values" test -n "$(cmp "$tmp/s1" "$tmp/s3" 2>&1)"
check "quiet mode still reports the failure" grep -q "FAIL  fails on rank 1 only" "$tmp/run2"

"$RS" "$srcdir/fw_cases.lua" --tap --junit "$tmp/j.xml" >"$tmp/tap" 2>&1
cat "$tmp/tap"
check "TAP: version line" grep -q "^TAP version 13$" "$tmp/tap"
check "TAP: plan" grep -q "^1\.\.8$" "$tmp/tap"
check "TAP: 7 ok lines" test "$(count '^ok ' "$tmp/tap")" -eq 7
check "TAP: 1 not ok line" test "$(count '^not ok 4 - fails on rank 1 only$' "$tmp/tap")" -eq 1
check "TAP: skip directive" grep -q "^ok 6 - skipped # SKIP not today$" "$tmp/tap"
check "TAP: YAML block names the ranks" grep -q "^  ranks: \[1\]$" "$tmp/tap"
check "JUnit: counts" grep -q 'tests="8" failures="1" errors="0" skipped="1"' "$tmp/j.xml"
check "JUnit: grid parameters" grep -q '<property name="n" value="2"/>' "$tmp/j.xml"
check "JUnit: each case's seed" test "$(count '<property name="case_seed"' "$tmp/j.xml")" -eq 8
check "JUnit: a failure names its ranks" grep -q 'expected 42, got 41 (on rank 1)" type="failure"' "$tmp/j.xml"
if command -v python3 >/dev/null 2>&1; then
  check "JUnit: well-formed XML" python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/j.xml"
elif command -v xmllint >/dev/null 2>&1; then
  check "JUnit: well-formed XML" xmllint --noout "$tmp/j.xml"
fi

"$RS" "$srcdir/fw_cases.lua" --list >"$tmp/list" 2>&1; rc=$?
check "--list exits 0" test "$rc" -eq 0
check "--list names 8 cases and runs none" test "$(count '^grid \[n=\|^fails on\|^expected error$\|^skipped$\|^seeded$\|^after the failure$' "$tmp/list")" -eq 8 -a "$(count SEEDED "$tmp/list")" -eq 0
"$RS" "$srcdir/fw_cases.lua" --filter "grid" --verbose >"$tmp/filter" 2>&1; rc=$?
check "--filter runs only the matching cases" grep -q "3 passed, 0 failed, 0 skipped" "$tmp/filter"
check "--filter without the failing case exits 0" test "$rc" -eq 0
"$RS" "$srcdir/fw_cases.lua" --filter "no such case" >"$tmp/nomatch" 2>&1; rc=$?
check "--filter that matches nothing is a usage error: exit status 2 (a failed case gives 1)" test "$rc" -eq 2
check "... saying so, with the number of cases" \
  grep -q "fw_cases.lua: no case matches --filter 'no such case' (8 cases; --list names them)" "$tmp/nomatch"
check "... before any case runs" test -z "$(grep '^PASS\|^FAIL\|passed' "$tmp/nomatch")"
check "... without a word on patterns when the filter has no pattern character" \
  test "$(count 'Lua pattern' "$tmp/nomatch")" -eq 0
"$RS" "$srcdir/fw_cases.lua" --filter "grid+x [n=2]" >"$tmp/magic" 2>&1; rc=$?
check "a filter with pattern characters that matches nothing: exit 2, saying it was read as a Lua pattern and how to escape" \
  test "$rc" -eq 2 -a "$(count "no name contains it as is, so it was read as a Lua pattern, in which ^\$()%.\[\]\*+-? are special: escape them with % (%+, %\[)" "$tmp/magic")" -eq 1
"$RS" "$srcdir/fw_cases.lua" --list --filter "no such case" >"$tmp/lnomatch" 2>&1; rc=$?
check "--list with a --filter that matches nothing: exit status 2 too" \
  test "$rc" -eq 2 -a "$(count 'no case matches' "$tmp/lnomatch")" -eq 1
"$RS" "$srcdir/fw_cases.lua" --filter "[n=2]" --verbose >"$tmp/fplain" 2>&1
check "--filter with a name fragment is plain text (one grid case)" grep -q "1 passed, 0 failed, 0 skipped" "$tmp/fplain"
"$RS" "$srcdir/fw_cases.lua" --filter "n=[13]" --verbose >"$tmp/fpat" 2>&1
check "--filter falls back to a Lua pattern" grep -q "2 passed, 0 failed, 0 skipped" "$tmp/fpat"
echo 'print("from stdin " .. require("nvfp4").backend())' | "$builddir/lua/nvfp4-lua" - >"$tmp/stdin" 2>&1
check "nvfp4-lua - reads the script from standard input" grep -Eq "^from stdin (cpu|cuda)$" "$tmp/stdin"
"$builddir/lua/nvfp4-lua" -e 'error("boom")' /dev/null >"$tmp/alone" 2>&1; rc=$?
check "an uncaught error on a single rank exits 1" test "$rc" -eq 1
check "... naming the rank, the place and the message" grep -q '^\[rank 0\] (command line):1: boom' "$tmp/alone"
check "... without Open MPI's abort banner (no peers to stop)" test -z "$(grep MPI_ABORT "$tmp/alone")"

# under mpirun only rank 0 gets standard input: it reads the script and sends it to the others
# (mpirun called directly here: what tests/run-scenario sets for root in a container)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
echo 'local w = require("nvfp4").world(); print("rank " .. w.rank .. " max " .. w:all_reduce_max(w.rank))' |
  ${MPIRUN:-mpirun} -np 2 "$builddir/lua/nvfp4-lua" - >"$tmp/stdin2" 2>&1; rc=$?
check "mpirun -np 2 nvfp4-lua -: every rank runs the script from standard input" \
  test "$rc" -eq 0 -a "$(count '^rank [01] max 1$' "$tmp/stdin2")" -eq 2

# misuse of the framework: clear messages, no hang, no crash
cat >"$tmp/order.lua" <<'EOS'
-- np=2
local sc = require "nvfp4.scenario"
local w = require("nvfp4").world()
local names = w.rank == 0 and {"a", "b", "c"} or {"a", "c", "b"}   -- as pairs() may give them
for _, n in ipairs(names) do sc.case(n, function () sc.ok(true, n) end) end
if w.rank == 1 then sc.case("only on rank 1", function () error("never run") end) end
sc.run()
EOS
"$RS" "$tmp/order.lua" >"$tmp/order" 2>&1; rc=$?
check "cases in another order on some rank: exit status 2, no case runs" \
  test "$rc" -ne 0 -a -z "$(grep '^PASS\|^FAIL\|passed' "$tmp/order")"
check "... naming the first difference" \
  grep -q "the ranks run different cases: rank 1's case 2 is 'c', rank 0's 'b'" "$tmp/order"
cat >"$tmp/filter1.lua" <<'EOS'
-- np=2
local sc = require "nvfp4.scenario"
if require("nvfp4").world().rank == 0 then sc.case("alpha", function () end) else sc.case("beta", function () end) end
sc.run()
EOS
"$RS" "$tmp/filter1.lua" --filter alpha >"$tmp/filter1" 2>&1; rc=$?
check "--filter matching on some ranks only: no hang, the lists' difference reported" \
  grep -q "the ranks run different cases: rank 1 has 0 cases, rank 0 1" "$tmp/filter1"
printf '#!/usr/bin/env nvfp4-lua\nprint("rank " .. require("nvfp4").world().rank .. " shebang")\n' |
  ${MPIRUN:-mpirun} -np 2 "$builddir/lua/nvfp4-lua" - >"$tmp/shebang" 2>&1
check "a script on standard input may start with a #! line (as a file may)" \
  test "$(count ' shebang$' "$tmp/shebang")" -eq 2
cat >"$tmp/misuse.lua" <<'EOS'
-- np=1
local sc = require "nvfp4.scenario"
sc.case("nested", function () sc.case("inner", function () end) end)
sc.case("run inside", function () sc.run() end)
sc.case("long message", function () error(string.rep("x", 100000)) end)
sc.case("close nil", function () sc.close(nil, require("nvfp4").zeros({2}), 0.1, "grad_bias") end)
local ok, e = pcall(sc.case, "g", {seed = {1, 2}}, function () end)
print("grid seed: " .. tostring(e))
sc.run()
EOS
"$RS" "$tmp/misuse.lua" >"$tmp/misuse" 2>&1
check "sc.case inside a case fails that case, saying why" grep -q "sc.case inside a case: register cases at the top level" "$tmp/misuse"
check "sc.run inside a case fails that case, saying why" grep -q "sc.run() inside a case" "$tmp/misuse"
check "a 100 KB failure message is reported, cut" grep -Eq "x\.\.\. \([0-9]+ more bytes\)" "$tmp/misuse"
check "a grid parameter named seed is refused" grep -q "grid parameter 'seed' is reserved" "$tmp/misuse"
check "sc.close with a nil tensor fails at the scenario's line" \
  grep -q "misuse.lua:6: grad_bias: cannot compare nil with userdata" "$tmp/misuse"
check "... and the run still ends with its summary" grep -q "0 passed, 4 failed, 0 skipped" "$tmp/misuse"
cat >"$tmp/register.lua" <<'EOS'
-- np=1
local sc = require "nvfp4.scenario"
local function try (...) local ok, e = pcall(sc.case, ...); print("REGISTER " .. tostring(ok) .. " " .. tostring(e)) end
try("a", {{"B", {1, 2}}, {"B", {3}}}, function () end)          -- collapsed to two 'a [B=3, B=3]'
sc.case("b", function () end)
try("b", function () end)                                        -- same name, same seed
sc.case("c", {B = {1, 2}}, function () end)
try("c", {{"B", {3, 2}}}, function () end)                       -- 'c [B=2]' again
try("d", {{"B", {1, 1}}}, function () end)                       -- a value repeated in one grid
sc.run()
EOS
"$RS" "$tmp/register.lua" --list >"$tmp/register" 2>&1; rc=$?
cat "$tmp/register"
check "a grid parameter given twice is refused at registration, naming it" \
  grep -q "^REGISTER false grid parameter 'B' is given twice (entries 1 and 2)" "$tmp/register"
check "a second case of the same name is refused, naming it" \
  grep -q "^REGISTER false case 'b' is registered twice (case names must be unique" "$tmp/register"
check "... also for a grid point that repeats an earlier case's name" \
  grep -q "^REGISTER false case 'c \[B=2\]' is registered twice" "$tmp/register"
check "... and for a value repeated within one grid" \
  grep -q "^REGISTER false case 'd \[B=1\]' is registered twice" "$tmp/register"
check "a refused registration registers none of its cases (--list: b, c [B=1], c [B=2])" \
  test "$rc" -eq 0 -a "$(grep -v '^REGISTER\|^==' "$tmp/register" | tr '\n' ,)" = "b,c [B=1],c [B=2],"
printf -- '-- np=1\nlocal sc = require "nvfp4.scenario"\nsc.case("x", function () end)\nsc.case("x", function () end)\nsc.run()\n' \
  >"$tmp/register2.lua"
"$RS" "$tmp/register2.lua" >"$tmp/register2" 2>&1
check "... raised at the scenario's line" grep -q "register2.lua:4: case 'x' is registered twice" "$tmp/register2"
"$RS" "$srcdir/fw_cases.lua" --filter "grid" --timeout 1e300 >"$tmp/bigto" 2>&1; rc=$?
check "--timeout 1e300 is no deadline (the watchdog's overflowed and hung)" test "$rc" -eq 0
"$RS" "$srcdir/fw_cases.lua" --timeout inf >"$tmp/infto" 2>&1; rc=$?
check "--timeout inf: refused in one line" grep -q "timeout must be a positive, finite number" "$tmp/infto"
for v in abc 0 -1 inf nan; do
  "$RS" "$srcdir/fw_cases.lua" --timeout "$v" >"$tmp/badto" 2>&1; rc=$?
  check "--timeout $v: exit status 2, the message echoes the value" \
    test "$rc" -eq 2 -a "$(count "timeout must be a positive, finite number of seconds, got '$v'$" "$tmp/badto")" -eq 1
done
for v in 1e3 0x10 -1 1.0 abc 99999999999999999999; do
  "$RS" "$srcdir/fw_cases.lua" --seed "$v" >"$tmp/badseed" 2>&1; rc=$?
  check "--seed $v: exit status 2 before any case, the message echoes the value" \
    test "$rc" -eq 2 -a "$(count "seed: '$v' is not a non-negative decimal integer below 2^63" "$tmp/badseed")" -ge 1 \
    -a "$(count 'PASS' "$tmp/badseed")" -eq 0
done
"$builddir/lua/nvfp4-lua" --seed 1e3 -e 'print("ran")' /dev/null >"$tmp/badseed0" 2>&1; rc=$?
check "nvfp4-lua --seed 1e3 (before the script): exit status 2, the same message, nothing run" \
  test "$rc" -eq 2 -a "$(count "seed: '1e3' is not a non-negative decimal integer below 2^63" "$tmp/badseed0")" -eq 1 \
  -a "$(count '^ran' "$tmp/badseed0")" -eq 0
"$RS" "$srcdir/fw_cases.lua" --filter grid --seed 0042 >"$tmp/seed42" 2>&1; rc=$?
check "--seed 0042: taken as 42 (leading zeros are decimal)" grep -q "seed 42 (replay: --seed 42)" "$tmp/seed42"

# timed OUT ARGS..: run-scenario ARGS, its output into OUT; sets rc and took (whole seconds)
timed () {
  out=$1; shift
  start=$(date +%s)
  "$RS" "$@" >"$out" 2>&1; rc=$?
  took=$(( $(date +%s) - start ))
}
# rank 1 fails before a barrier that rank 0 enters: its failure note ends the job at once (status 1), from
# rank 0, naming the case, the collective and its line, the failed rank and its error (the job waited for
# the case's timeout, 60 s by default)
timed "$tmp/to" "$srcdir/fw_timeout.lua" --timeout 30 --junit "$tmp/jt.xml"
cat "$tmp/to"
check "a rank failing before a collective the other waits in ends the job with status 1" test "$rc" -eq 1
check "... at once, not at the case's timeout (30 s)" test "$took" -lt 15
check "... the waiting rank names the case, where it waits, the failed rank and its error" \
  grep -q "^\[rank 0\] case 'hangs' (waiting in comm:barrier at .*fw_timeout.lua:11 for the other ranks): rank 1 failed in this case and will not join it: .*fw_timeout.lua:10: rank 1 gives up" "$tmp/to"
check "no later case ran" test "$(count 'NEVER REACHED' "$tmp/to")" -eq 0
check "JUnit after a timeout: the cases so far, the hung one failed" \
  grep -q 'tests="2" failures="1"' "$tmp/jt.xml"
check "... saying the job ended in it" grep -q "the job ended during this case" "$tmp/jt.xml"
check "... with the command that replays it (there was none)" \
  grep -q "replay: mpirun -np 2 .*fw_timeout.lua --timeout 30 --seed [0-9]* --filter &apos;hangs&apos;" "$tmp/jt.xml"
check "... and the line rank 0 said: the case, where it waited, the failed rank and its error (it gave only the possible causes)" \
  grep -q "the job ended during this case (case &apos;hangs&apos; (waiting in comm:barrier at .*fw_timeout.lua:11 for the other ranks): rank 1 failed in this case and will not join it: .*fw_timeout.lua:10: rank 1 gives up); replay: " "$tmp/jt.xml"
if command -v python3 >/dev/null; then
  check "... still well-formed XML" python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/jt.xml"
fi
long=$(printf 'y%.0s' $(seq 1 9000))
"$RS" "$srcdir/fw_timeout.lua" --timeout 30 "long=$long" >"$tmp/tolong" 2>&1
check "... a replay command too long for the watchdog's line ends in ' ...' (it was cut silently)" \
  grep -q "^\[rank [01]\] replay: mpirun -np 2 .*fw_timeout.lua --timeout 30 long=yyy*y \.\.\.\$" "$tmp/tolong"
check "the message is followed by the case's replay command (there was none)" \
  grep -q "^\[rank 0\] replay: mpirun -np 2 .*fw_timeout.lua --timeout 30 --seed [0-9]* --filter 'hangs'\$" "$tmp/to"
# a failed rank whose peer stays in its own code (no collective to end): the timeout ends the case, the
# failed rank first, saying why it waited
case2 () {
  printf '%s\n' '-- np=2' 'local nvfp4 = require "nvfp4"' 'local sc = require "nvfp4.scenario"' \
    'local w = nvfp4.world()' "sc.case(\"$2\", function ()" "$3" 'end)' 'sc.run()' >"$1"
}
case2 "$tmp/failspin.lua" spins '  if w.rank == 1 then error("rank 1 gives up") end
  nvfp4.watchdog(0); local t = nvfp4.clock(); while nvfp4.clock() - t < 60 do end'
timed "$tmp/failspin" "$tmp/failspin.lua" --timeout 1
check "a failed rank whose peer does not finish the case times out at S, saying why it waited" \
  grep -q "^\[rank 1\] case 'spins' (it failed on this rank: .*rank 1 gives up; the other ranks did not finish it) timed out after 1 s" "$tmp/failspin"
check "... and ends the job (124) soon after" test "$rc" -eq 124 -a "$took" -lt 30
# scen FILE NP: a scenario of NP ranks, the usual header (nvfp4, sc, w = the world), then standard input
scen () {
  { printf '%s\n' "-- np=$2" 'local nvfp4 = require "nvfp4"' 'local sc = require "nvfp4.scenario"' \
      'local w = nvfp4.world()'; cat; } >"$1"
}
# a failed rank and its peer's collective over other ranks (TP groups {0, 1} and {2, 3}): rank 3's note does
# not end the wait of ranks 0 and 1, whose group completes; the case fails, the next runs
scen "$tmp/othergroup.lua" 4 <<'EOS'
sc.case("other group", function ()
  local g = sc.group(2)
  if w.rank == 3 then error("rank 3 gives up") end
  if w.rank == 0 then local t = nvfp4.clock(); while nvfp4.clock() - t < 1.5 do end end
  if w.rank < 2 then g:barrier() end
end)
sc.case("next", function () print("NEXT RAN") end)
sc.run()
EOS
"$RS" "$tmp/othergroup.lua" --timeout 20 >"$tmp/othergroup" 2>&1; rc=$?
check "a note from a rank outside the collective's group ends nothing: the case fails, the next runs" \
  test "$rc" -eq 1 -a "$(count 'NEXT RAN' "$tmp/othergroup")" -ge 1
check "... the failure reported as usual" grep -q "rank 3 gives up" "$tmp/othergroup"
# only a wait in a collective's agreement counts: rank 0 quantizing its large shard after the amax_group
# reduction that rank 1 joined is not waiting for rank 1, whose case then fails (it was ended as if rank 1
# would not join); a layer's creation is such a wait (it was not counted, and waited for the timeout)
scen "$tmp/localwork.lua" 2 <<'EOS'
sc.case("local work", function ()
  local x = nvfp4.randn({w.rank == 0 and 8192 or 16, 4096}, "bf16")
  nvfp4.quantize(x, {rowwise = true, columnwise = true, rht = true, amax_group = w})
  sc.ok(w.rank ~= 1, "rank 1's own check")
end)
sc.case("layer", function ()
  if w.rank == 1 then error("rank 1 gives up") end
  nvfp4.linear{in_features = 32, out_features = 32, parallel = "column", group = w}
end)
sc.run()
EOS
timed "$tmp/localwork" "$tmp/localwork.lua" --timeout 30 --filter "local work"
check "a rank's local work after a collective its failed peer joined: the case fails as usual, the run ends" \
  grep -q "^0 passed, 1 failed" "$tmp/localwork"
timed "$tmp/layerwait" "$tmp/localwork.lua" --timeout 30 --filter "layer"
check "a layer's creation waiting for a failed rank: ended at once, naming it" \
  test "$rc" -eq 1 -a "$took" -lt 15 -a "$(count "^\[rank 0\] case 'layer' (waiting in nvfp4.linear at .*localwork.lua:[0-9]* for the other ranks): rank 1 failed in this case and will not join it: .*rank 1 gives up" "$tmp/layerwait")" -eq 1
# the grace G = max(0.5 s, 5 % of S) of a rank waiting in a collective (README): here rank 1 disarms its
# own deadline and stays in its code, so rank 0, in the barrier, is the first to time out, at S + G
case2 "$tmp/grace.lua" waits '  if w.rank == 1 then nvfp4.watchdog(0); local t = nvfp4.clock(); while nvfp4.clock() - t < 60 do end end
  w:barrier()'
timed "$tmp/grace" "$tmp/grace.lua" --timeout 1
check "a rank waiting in a collective times out at S + G: 'timed out after 1.5 s' for --timeout 1, naming the line it waits at" \
  grep -q "^\[rank 0\] case 'waits' (waiting in comm:barrier at .*grace.lua:7 for the other ranks) timed out after 1.5 s" "$tmp/grace"
check "... and ends the job" test "$rc" -ne 0 -a "$took" -lt 30
# a collective that completes while the rank that timed out in it lingers: that rank still ends the job
# (124), it does not go on to finish the case with status 0 after saying "timed out"
case2 "$tmp/late.lua" late '  if w.rank == 1 then nvfp4.watchdog(0); local t = nvfp4.clock(); while nvfp4.clock() - t < 1.8 do end end
  w:barrier()'
"$RS" "$tmp/late.lua" --timeout 1 >"$tmp/late" 2>&1; rc=$?
check "a collective completed during the linger: rank 0 said it timed out" \
  grep -q "^\[rank 0\] case 'late' (waiting in comm:barrier at .*late.lua:7 for the other ranks) timed out after 1.5 s" "$tmp/late"
check "... and the job ends with status 124 (not 0)" test "$rc" -eq 124
# nvfp4.watchdog with a linger that fired, then a script that ends during the linger (a disarm, or no
# further call): the job still ends with 124 (it exited 0)
for disarm in 'nvfp4.watchdog(0)' ''; do
  cat >"$tmp/wdl.lua" <<EOS
local nvfp4 = require "nvfp4"
local t0 = nvfp4.clock()
nvfp4.watchdog(0.3, "step", nil, "", "", 2.0)
while nvfp4.clock() - t0 < 0.6 do end
$disarm
EOS
  "$RS" "$tmp/wdl.lua" >"$tmp/wdl" 2>&1; rc=$?
  check "a watchdog that fired and lingers ends the job with 124 when the script ends first (${disarm:-no disarm})" \
    test "$rc" -eq 124
done
# ... and one armed, not yet due, when the script ends stays armed through the end: rank 0 ends with it
# while rank 1 waits in a barrier rank 0 skipped; the job ends with its message (it hung). Without the
# notes: with them, rank 0's note that its script ended may end the job first (the next check)
cat >"$tmp/armed.lua" <<'EOS'
-- np=2
local nvfp4 = require "nvfp4"
local w = nvfp4.world()
nvfp4.watchdog(2, "rank " .. w.rank .. " step")
if w.rank == 1 then nvfp4.watchdog(0) w:barrier() end
EOS
NVFP4_CASE_NOTES=0 timed "$tmp/armed" "$tmp/armed.lua"
check "a watchdog armed when the script ends still ends the job (124, its message) while a peer hangs" \
  test "$rc" -eq 124 -a "$took" -lt 30
check "... naming it" grep -q "^\[rank 0\] rank 0 step timed out after 2 s" "$tmp/armed"
# with the notes, whichever comes first ends it: that watchdog (124) or rank 0's ended note (1), at
# once when rank 1 begins to wait after the note came, else 5 s after it
timed "$tmp/armed" "$tmp/armed.lua"
check "with the notes: the job ends (124 or 1) within the limit" \
  test "$took" -lt 30 -a \( "$rc" -eq 124 -o "$rc" -eq 1 \)
check "... saying why" grep -q "^\[rank 0\] rank 0 step timed out after 2 s\|^\[rank 1\] rank 0 ended its script (status 0) and joins no more collectives, while this rank waits in a collective over it" "$tmp/armed"
# a rank that leaves the case without joining a collective the others wait in: its note ends the job at
# once, from the waiting rank, naming it; so does a rank that skips the case (sc.skip) before it
case2 "$tmp/skip.lua" skips '  if w.rank == 0 then w:barrier() end'
timed "$tmp/skip" "$tmp/skip.lua" --timeout 30
check "a collective skipped by rank 1: rank 0 says where it waits and that rank 1 ended the case" \
  grep -q "^\[rank 0\] case 'skips' (waiting in comm:barrier at .*skip.lua:6 for the other ranks): rank 1 ended this case without joining it\$" "$tmp/skip"
check "... and the job ends at once (status 1)" test "$rc" -eq 1 -a "$took" -lt 15
case2 "$tmp/skip2.lua" skipped '  if w.rank == 1 then sc.skip("no GPU here") end
  w:barrier()'
timed "$tmp/skip2" "$tmp/skip2.lua" --timeout 30
check "a rank that skipped the case before a collective: named with its reason" \
  grep -q "^\[rank 0\] case 'skipped' (waiting in comm:barrier at .*skip2.lua:7 for the other ranks): rank 1 skipped this case (no GPU here) without joining it\$" "$tmp/skip2"
check "... and the job ends at once (status 1)" test "$rc" -eq 1 -a "$took" -lt 15
# sc.group's split, called by the framework: the wait names the scenario's line (it named none)
case2 "$tmp/grpwait.lua" grpwait '  if w.rank == 1 then error("rank 1 gives up") end
  sc.group(2)'
timed "$tmp/grpwait" "$tmp/grpwait.lua" --timeout 30
check "a wait in sc.group's split names the scenario's line" \
  grep -q "^\[rank 0\] case 'grpwait' (waiting in comm:split at .*grpwait.lua:7 for the other ranks): rank 1 failed" "$tmp/grpwait"
# rank 0 (which writes --junit) fails before a collective rank 1 waits in: the JUnit file keeps its error
case2 "$tmp/fail0.lua" fails0 '  if w.rank == 0 then error("rank 0 gives up") end
  w:barrier()'
timed "$tmp/fail0" "$tmp/fail0.lua" --timeout 30 --junit "$tmp/fail0.xml"
check "rank 0's failure before a collective: rank 1 ends the job at once, naming it" \
  test "$rc" -eq 1 -a "$took" -lt 15 -a "$(count "^\[rank 1\] case 'fails0' (waiting in comm:barrier.*): rank 0 failed in this case" "$tmp/fail0")" -eq 1
check "... and the JUnit file has rank 0's error (it said only that the job ended)" \
  grep -q "the job ended during this case (it failed on rank 0: .*fail0.lua:6: rank 0 gives up; the job ended before" "$tmp/fail0.xml"
# without the notes (NVFP4_CASE_NOTES=0, or no MPI_THREAD_MULTIPLE) the timeout ends it: the waiting ranks
# linger a grace after their message, so that its own line (due at S + 2G) names the rank too
NVFP4_CASE_NOTES=0 timed "$tmp/skip" "$tmp/skip.lua" --timeout 1 --junit "$tmp/skip.xml"
check "notes off, a collective skipped by rank 1: rank 0 says where it waits" \
  grep -q "^\[rank 0\] case 'skips' (waiting in comm:barrier at .*skip.lua:6 for the other ranks) timed out after 1.5 s" "$tmp/skip"
check "... and rank 1 that it left the case (the rank that skipped it is named)" \
  grep -q "^\[rank 1\] case 'skips' (it ended on this rank; the other ranks did not finish it) timed out after 2 s" "$tmp/skip"
check "... and the job ends" test "$rc" -ne 0 -a "$took" -lt 30
# a peer's long multibyte error, cut at a byte count in its note: the rewritten file stays well-formed
case2 "$tmp/utf.lua" utf '  if w.rank == 1 then error(string.rep("\195\169", 600), 0) end
  w:barrier()'
timed "$tmp/utf" "$tmp/utf.lua" --timeout 30 --junit "$tmp/utf.xml"
if command -v python3 >/dev/null; then
  check "a note cut inside a UTF-8 character: the JUnit file is still well-formed XML, with the error" \
    python3 -c "import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]).toxml(); assert 'éééé' in d" "$tmp/utf.xml"
fi
check "... and the JUnit file has rank 0's timeout line (it gave only the possible causes)" \
  grep -q "the job ended during this case (case &apos;skips&apos; (waiting in comm:barrier at .*skip.lua:6 for the other ranks) timed out after 1.5 s); replay: " "$tmp/skip.xml"
"$RS" "$srcdir/fw_timeout.lua" --timeout 30 --tap >"$tmp/totap" 2>/dev/null
check "TAP after a failure note: a Bail out! line naming the rank, the case and the failed rank" \
  grep -q "^Bail out! \[rank 0\] case 'hangs' (waiting in comm:barrier .*): rank 1 failed in this case" "$tmp/totap"
"$RS" "$tmp/failspin.lua" --timeout 1 --tap >"$tmp/spintap" 2>/dev/null
check "TAP after a timeout: a Bail out! line naming the rank and the case" \
  grep -q "^Bail out! \[rank 1\] case 'spins'.* timed out after 1 s" "$tmp/spintap"
# a failed case whose name is part of another's: its replay command runs it alone
cat >"$tmp/shape.lua" <<'EOS'
local sc = require "nvfp4.scenario"
sc.case("shape", function () sc.eq(1, 2, "x") end)
sc.case("shapes [B=1]", function () end)
sc.run()
EOS
"$RS" "$tmp/shape.lua" >"$tmp/shape" 2>&1
check "the replay filter of 'shape' beside 'shapes [B=1]' is anchored" \
  grep -q -- "--filter '^shape\$'" "$tmp/shape"
"$RS" "$tmp/shape.lua" --filter '^shape$' >"$tmp/shape2" 2>&1
check "... and runs that case alone" grep -q "^0 passed, 1 failed, 0 skipped" "$tmp/shape2"
# a script whose path holds a blank and a quote: its replay command pastes into a shell as it is
mkdir -p "$tmp/a b"
cp "$tmp/shape.lua" "$tmp/a b/it's.lua"
"$RS" "$tmp/a b/it's.lua" >"$tmp/quoted" 2>&1
sh -c "$(sed -n 's/^ *replay: //p' "$tmp/quoted" | head -n 1)" >"$tmp/quoted2" 2>&1
check "a replay command from a path with a blank and a quote runs the case again" \
  grep -q "^0 passed, 1 failed, 0 skipped" "$tmp/quoted2"
# a replay command carries the script's own arguments and --timeout, not the reporting options
cat >"$tmp/param.lua" <<'EOS'
local sc = require "nvfp4.scenario"
local P = sc.params({N = 1})
sc.case("N is 1", function () sc.eq(P.N, 1, "N") end)
sc.run()
EOS
"$RS" "$tmp/param.lua" N=2 --timeout 30 -v --junit "$tmp/param.xml" >"$tmp/param" 2>&1
check "a replay command carries the script's arguments and --timeout, not -v or --junit" \
  grep -q -- "param.lua N=2 --timeout 30 --seed [0-9]* --filter 'N is 1'\$" "$tmp/param"
sh -c "$(sed -n 's/^ *replay: //p' "$tmp/param" | head -n 1)" >"$tmp/param2" 2>&1
check "... and pasted, fails the same way" grep -q "N: expected 1, got 2" "$tmp/param2"
"$builddir/lua/nvfp4-lua" --junit "$tmp/pj.xml" -v --seed 3 --backend cpu "$tmp/param.lua" N=2 >"$tmp/param3" 2>&1
check "... nor the reporting options given before the script (a pasted replay would overwrite the JUnit file)" \
  grep -q -- "replay: mpirun -np 1 [^ ]*nvfp4-lua --backend cpu [^ ]*param.lua N=2 --seed 3 --filter 'N is 1'\$" \
  "$tmp/param3"
# sc.params' default --timeout yields to one given before the script as well as after it (it overrode it)
cat >"$tmp/ptime.lua" <<'EOS'
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
sc.params({N = 1}, 1800)
sc.case("spins", function () local t = nvfp4.clock(); while nvfp4.clock() - t < 4 do end end)
sc.run()
EOS
"$builddir/lua/nvfp4-lua" --timeout 1 "$tmp/ptime.lua" >"$tmp/ptime" 2>&1; rc=$?
check "sc.params(defaults, 1800) keeps a --timeout 1 given before the script (exit status 124)" \
  sh -c "test $rc -eq 124 && grep -q \"case 'spins' timed out after 1 s\" '$tmp/ptime'"
"$RS" "$tmp/param.lua" N=2 --tap >"$tmp/paramtap" 2>&1
check "TAP: the failure's YAML block has the replay command" \
  grep -q -- "^  replay: 'mpirun -np 1 .*param.lua N=2 --seed [0-9]* --filter ''N is 1'''\$" "$tmp/paramtap"
# sc.params: a bad NAME=value is a usage error (status 2, one line naming the script's arguments, no
# traceback, no case run); it kept the default (S=1e3, S=, s=5) or set nil (a value past 64 bits) before,
# and an unknown NAME gave status 1 with a traceback
for a in "N=1e3" "N=" "N=0x10" "N=99999999999999999999" "n=5" "B=2"; do
  "$RS" "$tmp/param.lua" "$a" >"$tmp/pbad" 2>&1; rc=$?
  check "sc.params '$a': exit status 2" test "$rc" -eq 2
  check "... one line naming the script's arguments, no traceback, no case" \
    sh -c "grep -q 'param.lua: .*(this script takes N=<integer>)' '$tmp/pbad' && ! grep -q 'stack traceback\|^PASS\|^FAIL' '$tmp/pbad'"
done
"$RS" "$tmp/param.lua" n=5 >"$tmp/pbad" 2>&1
check "... 'n=5' asks whether N was meant" grep -q "unknown argument 'n=5' (did you mean N?)" "$tmp/pbad"
"$RS" "$tmp/param.lua" N=-3 foo=1 MODE=row >"$tmp/pneg" 2>&1
check "... a negative integer is one, and another name=value (foo=1, MODE=row) is left to the script" \
  grep -q "N: expected 1, got -3" "$tmp/pneg"
# a usage error under mpirun is said once (by rank 0), not once per rank; a script that cannot be opened is one
"${MPIRUN:-mpirun}" -np 2 "$builddir/lua/nvfp4-lua" --seed abc "$srcdir/fw_cases.lua" </dev/null >"$tmp/u2" 2>&1; rc=$?
check "a usage error at 2 ranks: exit status 2, its line once, no MPI_Abort" \
  sh -c "test $rc -eq 2 && test \$(grep -c 'seed' '$tmp/u2') -eq 1 && grep -q '^--seed: .*abc' '$tmp/u2' &&
         ! grep -q 'MPI_ABORT' '$tmp/u2'"
"${MPIRUN:-mpirun}" -np 2 "$builddir/lua/nvfp4-lua" "$tmp/no-such-script.lua" </dev/null >"$tmp/u3" 2>&1; rc=$?
check "a script that cannot be opened: exit status 2 (lua's 1), said once" \
  sh -c "test $rc -eq 2 && test \$(grep -c 'cannot open' '$tmp/u3') -eq 1"
# an error from a call in tail position names the case's function (Lua dropped the caller's line)
cat >"$tmp/tail.lua" <<'EOS'
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
local x = nvfp4.zeros({16, 16})
sc.case("tail", function ()
  return nvfp4.quantize(x, {colwise = true})
end)
local function f () error("no position", 0) end
local function g () return f() end
sc.case("deeper", function ()
  g()                                       -- an ordinary call: its tail call is g's, not the case's
end)
sc.run()
EOS
"$RS" "$tmp/tail.lua" >"$tmp/tail" 2>&1
check "an error in a tail call names the case's function's line" \
  grep -q "tail.lua:4: bad argument #2 to 'quantize' (unknown option 'colwise') (raised in a tail call" "$tmp/tail"
check "... only where the case's own call was the tail call" grep -q "^      no position\$" "$tmp/tail"
# a run whose every case was skipped (a wrong -np) still exits 0, and says on standard error that nothing was checked
cat >"$tmp/skipall.lua" <<'EOS'
local sc = require "nvfp4.scenario"
sc.case("a", function () sc.need_ranks(4) end)
sc.case("b", function () sc.need_ranks(4) end)
sc.run()
EOS
"$RS" "$tmp/skipall.lua" >"$tmp/skipall" 2>&1; rc=$?
check "every case skipped: exit 0, with a note that nothing was checked" \
  sh -c "test $rc -eq 0 && grep -q 'note: every case was skipped (np=1): nothing was checked; the first said: needs a multiple of 4 ranks' '$tmp/skipall'"
# B=2 given to a script that calls no sc.params: the run went on at the script's own sizes without a word
"$RS" "$tmp/skipall.lua" B=2 MODE=row >"$tmp/noparams" 2>&1; rc=$?
check "NAME=integer to a script without sc.params: a note naming it (exit 0)" \
  sh -c "test $rc -eq 0 && grep -q \"skipall.lua: note: argument 'B=2' is not read by the framework: this script calls no sc.params\" '$tmp/noparams'"
check "... none for a name=value that is no NAME=integer (MODE=row)" sh -c "! grep -q \"'MODE=row'\" '$tmp/noparams'"
check "... none when no such argument is given" sh -c "! grep -q 'is not read by the framework' '$tmp/skipall'"
# sc.usage: the seed scenario refuses sizes its story cannot hold (status 2, one line, no case): at S=16 a
# shard's M is 8, so the gather took its fallback and case 1 failed 'the call succeeded'; S=0 passed hollow
seed="${top_srcdir:-..}/scenarios/sp/row_parallel_b1.lua"
for a in "S=16 H=512" "S=0 H=512" "S=256 H=520"; do
  "$RS" "$seed" $a REF=0 >"$tmp/sbad" 2>&1; rc=$?
  check "seed scenario '$a': exit status 2, before any case, no traceback" \
    sh -c "test $rc -eq 2 && ! grep -q 'stack traceback\|^PASS\|^FAIL' '$tmp/sbad'"
done
"$RS" "$seed" S=16 H=512 REF=0 >"$tmp/sbad" 2>&1
check "... naming the rule and a size that holds" \
  grep -q "row_parallel_b1.lua: S=16 B=1: a rank's grad_output .* M = S/TP\*B = 8, not a multiple of 16.*S must be a multiple of 32)" "$tmp/sbad"
cat >"$tmp/lower.lua" <<'EOS'
local t = {}; t[1] = t; t[2] = t; t[3] = t            -- a grid value that holds itself
local sc = require "nvfp4.scenario"
sc.case("grid", {{"v", {(("x"):rep(250) .. "1"), (("x"):rep(250) .. "2")}}}, function () end)
sc.case("cyclic", {{"v", {t}}}, function () end)
local P = sc.params({bits = 8})
sc.case("bits", function () sc.eq(P.bits, 4, "bits") end)
sc.run()
EOS
"$RS" "$tmp/lower.lua" bits=4 >"$tmp/lower" 2>&1
check "... a lower-case name of the script's is taken (bits=4 kept 8)" grep -q "^PASS  bits" "$tmp/lower"
check "grid values that differ past 200 characters name two cases (they were one, refused as twice)" \
  test "$(grep -c '^PASS  grid \[v=x*[12]\]' "$tmp/lower")" -eq 2
check "... and a table grid value that holds itself names its case (3^20 expansions hung)" \
  grep -q "^PASS  cyclic \[v={{...}, {...}, {...}}\]" "$tmp/lower"
# --junit to a file rank 0 cannot write: a usage error before any case (it failed after every case ran)
"$RS" "$srcdir/fw_cases.lua" --junit "$tmp/no/such/dir/j.xml" >"$tmp/jbad" 2>&1; rc=$?
check "--junit to an unwritable path: exit status 2, before any case" \
  sh -c "test $rc -eq 2 && ! grep -q '^PASS\|^FAIL' '$tmp/jbad'"
check "... naming the path as given (not its .tmp) and why" \
  grep -q "fw_cases.lua: --junit: cannot write '$tmp/no/such/dir/j.xml': No such file or directory" "$tmp/jbad"
mkdir -p "$tmp/jdir"
"$RS" "$srcdir/fw_cases.lua" --junit "$tmp/jdir" >"$tmp/jbad" 2>&1; rc=$?
check "... and to a directory (its .tmp could be written, the rename over it not)" \
  sh -c "test $rc -eq 2 && grep -q \"cannot write '$tmp/jdir': Is a directory\" '$tmp/jbad'"
# sc.close and sc.bytes: a library error (shapes differ, a closed tensor) fails at the scenario's line with
# the check's label (it named the framework's line); sc.eq compares plain tables by contents
cat >"$tmp/lib.lua" <<'EOS'
local nvfp4 = require "nvfp4"
local sc = require "nvfp4.scenario"
sc.case("close shapes", function ()
  sc.close(nvfp4.randn({4, 16}), nvfp4.randn({16, 4}), 0.1, "mismatch")
end)
sc.case("bytes closed", function ()
  local t = nvfp4.randn({4, 16}); t:close()
  sc.bytes(t, nvfp4.randn({4, 16}), "closed one")
end)
sc.case("eq lists", function () sc.eq({1, 2, {3, a = "x"}}, {1, 2, {3, a = "x"}}, "lists") end)
sc.case("eq maps", function () sc.eq({a = 1, 2}, {a = 2, 2}, "maps") end)
sc.case("eq cycles", function ()
  local a, b, c = {}, {}, {}
  a.x = a; b.x = c; c.x = b
  sc.eq(a, b, "cycles of different lengths")
end)
sc.run()
EOS
"$RS" "$tmp/lib.lua" >"$tmp/lib" 2>&1
check "sc.close of tensors of different shapes fails at the scenario's line, with its label" \
  grep -q "lib.lua:4: mismatch: rel_error: shapes differ: \[4, 16\] vs \[16, 4\]" "$tmp/lib"
check "sc.bytes of a closed tensor fails at the scenario's line, with its label" \
  grep -q "lib.lua:8: closed one: bad argument #1 to 'nvfp4.equal' (tensor is closed)" "$tmp/lib"
check "sc.eq: plain tables equal by contents pass" grep -q "^PASS  eq lists" "$tmp/lib"
check "... tables with cycles of different lengths compare (no stack overflow)" grep -q "^PASS  eq cycles" "$tmp/lib"
check "... and differing ones print both as constructors" \
  grep -q "lib.lua:11: maps: expected {2, a = 2}, got {2, a = 1}" "$tmp/lib"
# sc.group's errors (split's) at the scenario's line
printf '%s\n' 'local sc = require "nvfp4.scenario"' 'sc.case("group of 3", function () local g = sc.group(3) end)' \
  'sc.run()' >"$tmp/group3.lua"
"$RS" "$tmp/group3.lua" >"$tmp/group3" 2>&1
check "sc.group(3) on one rank fails the case at the scenario's line" \
  grep -q "group3.lua:2: split: tp=3 must be >= 1 and divide the communicator size 1.*; sc.need_ranks(3) first skips a case the world cannot hold" "$tmp/group3"
# the same usage errors before the script (nvfp4-lua's own parsing): exit status 2 too (they gave 1)
for a in "--filtr x" "--seed abc" "--backend foo"; do
  "$builddir/lua/nvfp4-lua" $a "$srcdir/fw_cases.lua" >"$tmp/pre" 2>&1; rc=$?
  check "'$a' before the script: exit status 2" test "$rc" -eq 2
done
check "... --backend names the value and the rule" grep -q -- "--backend: 'foo' is not cpu or cuda" "$tmp/pre"
# --help, --version, a script that is not there
"$builddir/lua/nvfp4-lua" --help >"$tmp/help" 2>&1; rc=$?
check "--help: exit 0, the usage with the framework's options and the environment" \
  test "$rc" -eq 0 -a "$(head -n 1 "$tmp/help")" = "usage: nvfp4-lua [options] [script [args]]" \
    -a "$(count '^  --junit FILE\|^  NVFP4_BACKEND\|^Lua modules (require "nvfp4.scenario") are searched for first in' "$tmp/help")" -eq 3
"$builddir/lua/nvfp4-lua" --version >"$tmp/version" 2>&1; rc=$?
check "--version: exit 0, one line naming the library, Lua and MPI" \
  test "$rc" -eq 0 -a "$(wc -l <"$tmp/version")" -eq 1 -a "$(count '^nvfp4-lua: nvfp4 [0-9][0-9.]*.*; Lua 5\.4\.[0-9]*; .*MPI' "$tmp/version")" -eq 1
"$builddir/lua/nvfp4-lua" "$tmp/no-such-script.lua" >"$tmp/nosuch" 2>&1; rc=$?
check "a script that is not there: exit status 2 (the command line's), naming it" \
  test "$rc" -eq 2 -a "$(count "^cannot open $tmp/no-such-script.lua: No such file or directory" "$tmp/nosuch")" -eq 1
# --backend cuda where it cannot start (a build without CUDA, no GPU): the option's error before the script
"$builddir/lua/nvfp4-lua" --backend cuda "$srcdir/fw_cases.lua" >"$tmp/nocuda" 2>&1; rc=$?
if test "$rc" -ne 2 && ! grep -q "cannot create a context" "$tmp/nocuda"; then
  echo "# --backend cuda started here: its failure to start is not checked"
else
  check "--backend cuda that cannot start: exit status 2" test "$rc" -eq 2
  check "... one line naming the option and the reason" grep -q "^--backend cuda: nvfp4: cannot create a context: " "$tmp/nocuda"
  check "... without a traceback, before the script" sh -c "! grep -q 'stack traceback\|^# \|^PASS' '$tmp/nocuda'"
  # its default, $NVFP4_BACKEND, alike (it gave status 1 and a traceback from the script's require)
  NVFP4_BACKEND=cuda "$builddir/lua/nvfp4-lua" "$srcdir/fw_cases.lua" >"$tmp/nocuda" 2>&1; rc=$?
  check "NVFP4_BACKEND=cuda that cannot start: exit status 2, one line naming the variable and the reason" \
    test "$rc" -eq 2 -a "$(count "^NVFP4_BACKEND=cuda: nvfp4: cannot create a context: " "$tmp/nocuda")" -eq 1
  check "... without a traceback, before the script" sh -c "! grep -q 'stack traceback\|^# \|^PASS' '$tmp/nocuda'"
fi
NVFP4_BACKEND=gpu "$builddir/lua/nvfp4-lua" "$srcdir/fw_cases.lua" >"$tmp/gpu" 2>&1; rc=$?
check "NVFP4_BACKEND=gpu: exit status 2, naming the variable, the value and the rule" \
  test "$rc" -eq 2 -a "$(count "NVFP4_BACKEND: 'gpu' is not cpu or cuda" "$tmp/gpu")" -eq 1
NVFP4_BACKEND= "$builddir/lua/nvfp4-lua" "$srcdir/fw_cases.lua" --filter grid >"$tmp/empty" 2>&1; rc=$?
check "an empty NVFP4_BACKEND is unset (the default backend)" test "$rc" -eq 0
exit $failed
