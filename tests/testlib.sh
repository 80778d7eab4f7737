# tests/testlib.sh -- sourced by the shell tests (tests/lua/*.sh, tests/reliability/lib.sh):
#   the environment mpirun needs here (as root, oversubscribed, in a sandbox; each value only if unset),
#   testlib_tmp PREFIX: a temporary directory in $tmp, removed on exit;
#   check DESCRIPTION COMMAND..: "ok - .." or "not ok - .." (then $failed is 1); $npassed and
#     $nfailed count them (for a closing "N passed, N failed" line);
#   checkv, ranks2, pcflags (below): a check showing its command's output, a 2-rank run, pkg-config's
#     flags after a command (tests/install/*.sh).
: "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
: "${OMPI_MCA_rmaps_base_oversubscribe:=1}" "${OMPI_MCA_plm:=isolated}"
: "${OMPI_MCA_btl_vader_backing_directory:=/tmp}" "${OMPI_MCA_btl_vader_single_copy_mechanism:=none}"
: "${OPENBLAS_NUM_THREADS:=1}"
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe \
       OMPI_MCA_plm OMPI_MCA_btl_vader_backing_directory OMPI_MCA_btl_vader_single_copy_mechanism \
       OPENBLAS_NUM_THREADS
failed=0 npassed=0 nfailed=0
testlib_tmp () {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
  trap 'rm -rf "$tmp"' EXIT
}
check () {
  d=$1; shift
  if "$@" >/dev/null 2>&1; then echo "ok - $d"; npassed=$((npassed + 1))
  else echo "not ok - $d"; failed=1; nfailed=$((nfailed + 1)); fi
}

# checkv DESCRIPTION COMMAND..: check, showing the command's output ($tmp/out) when it fails
checkv () {
  d=$1; shift
  "$@" >"$tmp/out" 2>&1
  rc=$?
  check "$d" test "$rc" -eq 0
  test "$rc" -eq 0 || sed 's/^/    /' "$tmp/out" | tail -n 30
}
# ranks2 PATTERN PROGRAM ARGS..: $MPIRUN -np 2 PROGRAM ARGS.. ends well, with a line matching PATTERN (-E)
ranks2 () {
  pat=$1; shift
  "${MPIRUN:-mpirun}" -np 2 "$@" </dev/null >"$tmp/run" 2>&1 && grep -qE "$pat" "$tmp/run" ||
    { cat "$tmp/run"; return 1; }
}
# pcflags FLAGS COMMAND..: COMMAND.. then FLAGS (pkg-config's), split as a Makefile or `eval` splits them:
# pkg-config escapes a blank in a path (a prefix "/a b" gives -I/a\ b/include, one argument); COMMAND may
# be several words ($CC unquoted: "ccache gcc", "gcc -std=gnu11")
pcflags () { pcf=$1; shift; eval '"$@"' "$pcf"; }
