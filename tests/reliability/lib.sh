# tests/reliability/lib.sh -- sourced by the failure-injection tests.
#   inject MODE NP RANK: run inject.lua under mpirun at NP ranks with the
#   failure MODE on RANK and a short per-case timeout, then assert on the
#   exit status, the elapsed time and the message naming RANK and the case.
#   Mode none is the control run: run it first, at every NP used.
# Environment: top_builddir (make check sets it), MPIRUN (SH_LOG_COMPILER
# passes configure's), NVFP4_INJECT_TIMEOUT (default 2 s).
: "${top_builddir:=.}" "${MPIRUN:=mpirun}" "${NVFP4_INJECT_TIMEOUT:=2}"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../testlib.sh"
prog="$top_builddir/lua/nvfp4-lua"
test -x "$prog" || { echo "$prog is not built" >&2; exit 99; }
T=$NVFP4_INJECT_TIMEOUT
# The framework's staged deadlines end a stuck job by T + 2 grace (grace =
# max(0.5, T/20)) after the failure; the rest is the job's start and
# teardown.  Those are measured by the control runs (mode none, at each np
# the script uses; the longest counts), since a busy machine (make -j check
# of the CUDA build, ranks creating CUDA contexts on one GPU) stretches them
# to 10 s and more: a failure run may take the control's time + LIMIT.
LIMIT=$(awk -v t="$T" 'BEGIN { g = t / 20; if (g < 0.5) g = 0.5; print t + 2 * g + 6 }')
base=0
failures=0
log=$(mktemp "${TMPDIR:-/tmp}/inject.XXXXXX")
trap 'rm -f "$log"' EXIT

now () { date +%s.%N; }

# Open MPI 4's mpirun (ORTE): there a failed rank ends the job by exiting, which mpirun turns into the job's
# end, not by MPI_Abort (nvfp4L_end_job, lua/lnvfp4.h), so no abort banner and none of the garbled help
# messages of aborts that come together; with INJECT_ABORT0=1 the runs set orte_abort_non_zero_exit to 0,
# where the rank must take MPI_Abort instead
orte=0
"$MPIRUN" --version 2>/dev/null | grep -q 'Open MPI) [1-4]\.' && orte=1

bad () {
  echo "not ok: $*"
  echo "---- output ----"; cat "$log"; echo "----------------"
  failures=$((failures + 1))
}

# inject MODE NP RANK
inject () {
  mode=$1 np=$2 rank=$3 tag="inj$$-$1-$2"
  echo "== mpirun -np $np nvfp4-lua inject.lua --timeout $T --inject $mode --rank $rank"
  t0=$(now)
  env ${INJECT_ABORT0:+OMPI_MCA_orte_abort_non_zero_exit=0} \
  timeout 120 "$MPIRUN" -np "$np" "$prog" "$here/inject.lua" --timeout "$T" \
    --inject "$mode" --rank "$rank" --tag "$tag" >"$log" 2>&1 </dev/null
  rc=$?
  dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  if test "$mode" = none; then
    echo "   exit $rc after $dt s (the control: start and teardown)"
    base=$(awk -v d="$dt" -v b="$base" 'BEGIN { print (d > b ? d : b) }')
  else
    lim=$(awk -v l="$LIMIT" -v b="$base" 'BEGIN { print l + b }')
    echo "   exit $rc after $dt s (limit $lim s: $LIMIT + the control's $base s)"
    if awk -v d="$dt" -v l="$lim" 'BEGIN { exit !(d > l) }'; then
      bad "$mode np=$np: took $dt s, more than $lim s"
    fi
  fi
  sleep 0.2
  if pgrep -f -- "--tag $tag" >/dev/null 2>&1; then
    bad "$mode np=$np: a rank of the job is still running after mpirun returned"
  fi
  case $mode in
    none)
      test $rc -eq 0 || bad "none np=$np: exit $rc, expected 0"
      grep -q "^3 passed, 0 failed" "$log" || bad "none np=$np: no '3 passed, 0 failed' line"
      return ;;
  esac
  test $rc -ne 0 || bad "$mode np=$np: exit 0 after a failure on rank $rank"
  if test $orte = 1; then
    if test -n "${INJECT_ABORT0:-}"; then
      grep -q "MPI_ABORT was invoked" "$log" ||
        bad "$mode np=$np, orte_abort_non_zero_exit 0: the job did not end by MPI_Abort"
    else
      grep -q "MPI_ABORT was invoked" "$log" &&
        bad "$mode np=$np: the job ended by MPI_Abort under Open MPI 4's mpirun (nvfp4L_end_job exits there)"
      grep -q "ORTE_ERROR_LOG" "$log" && bad "$mode np=$np: mpirun said ORTE_ERROR_LOG"
    fi
  fi
  if test "$mode" = ended; then
    # the cases all passed (their summary stands); the top-level collective after them ends the job
    grep -q "^3 passed, 0 failed" "$log" || bad "ended np=$np: no '3 passed, 0 failed' line"
    first=$(grep -m1 '^\[rank [0-9]*\]' "$log")
    printf '%s\n' "$first" | grep -q "^\[rank [0-9]*\] rank $rank ended its script (status 0) and joins no more collectives, while this rank waits in a collective over it\$" ||
      bad "ended np=$np: first rank message is '$first', expected '[rank r] rank $rank ended its script (status 0) ...'"
    test $rc -ne 0 && echo "   ok: $first" | cut -c1-160
    return
  fi
  # the first rank that speaks must name the rank with the failure and the case: the failed one itself,
  # or (an error) a rank that waited for it in a collective, ended by its failure note
  first=$(grep -m1 '^\[rank [0-9]*\]' "$log")
  case $mode in
    error) want="[rank r] case 'injected error' (waiting in comm:all_gather at ..): rank $rank failed in this case and will not join it: ..injected failure on rank $rank"
           grep -qF "injected failure on rank $rank" "$log" ||
             bad "error np=$np: the error message is not reported"
           # (a pattern: the waiting rank may be any)
           printf '%s\n' "$first" | grep -q "^\[rank [0-9]*\] case 'injected error' (waiting in comm:all_gather at .*): rank $rank failed in this case and will not join it: .*injected failure on rank $rank\$" &&
             want=$first ;;
    exit)  want="[rank $rank] case 'injected exit' called os.exit(0)" ;;
    hang)  want="[rank $rank] case 'injected hang' timed out after $T s"
           # the spinning rank says where its script was (the watchdog's hook: lnvfp4comm.c wd_locate)
           line=$(grep -n 'while true do n = n + 1 end' "$here/inject.lua" | cut -d: -f1)
           grep -q "^\[rank $rank\] its script was running .*inject\.lua:$line\$" "$log" ||
             bad "hang np=$np: no '[rank $rank] its script was running ..inject.lua:$line' line" ;;
  esac
  case $first in
    "$want"*) echo "   ok: $first" | cut -c1-160 ;;
    *) bad "$mode np=$np: first rank message is '$first', expected '$want...'" ;;
  esac
  grep -q "^FAIL\|^PASS  after the injection\|passed, " "$log" &&
    bad "$mode np=$np: the job went on to report verdicts after the failure"
}

finish () {
  if test $failures -ne 0; then echo "$failures check(s) failed"; exit 1; fi
  echo "all checks passed"
  exit 0
}
