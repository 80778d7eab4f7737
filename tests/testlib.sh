# tests/testlib.sh -- sourced by the shell tests (tests/lua/*.sh, tests/reliability/lib.sh):
#   the environment mpirun needs here (as root, oversubscribed, in a sandbox; each value only if unset),
#   testlib_tmp PREFIX: a temporary directory in $tmp, removed on exit;
#   check DESCRIPTION COMMAND..: "ok - .." or "not ok - .." (then $failed is 1); $npassed and
#     $nfailed count them (for a closing "N passed, N failed" line).
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
