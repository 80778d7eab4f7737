#!/bin/sh
# bench/cuda_bench quant-at rejects a bad shape with a message naming it and the rule, exit status 2,
# before it touches a GPU (so this runs on machines without one).
B=${top_builddir:-.}/bench/cuda_bench
test -x "$B" || { echo "bench_args.sh: $B is not built"; exit 99; }
failed=0
expect () {  # expect DESCRIPTION PATTERN ARGS..
  d=$1; pat=$2; shift 2
  out=$("$B" "$@" 2>&1); rc=$?
  if [ "$rc" -eq 2 ] && printf '%s\n' "$out" | grep -q -- "$pat"; then echo "ok - $d"
  else echo "not ok - $d (exit $rc: $out)"; failed=1; fi
}
expect "M and K missing" "usage: cuda_bench quant-at M K" quant-at
expect "K missing" "usage: cuda_bench quant-at M K" quant-at 64
expect "M = 0" "\[M, K\] = \[0, 8192\]: M and K must be positive" quant-at 0 8192
expect "K negative" "\[M, K\] = \[64, -16\]" quant-at 64 -16
expect "K not a multiple of 16" "\[M, K\] = \[64, 24\].*K a multiple of 16" quant-at 64 24
expect "M not a number" "\[M, K\] = \[abc, 128\]" quant-at abc 128
exit $failed
