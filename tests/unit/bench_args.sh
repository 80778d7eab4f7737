#!/bin/sh
# bench/cuda_bench rejects a bad mode, iteration count or quant-at shape with a message naming it and
# the rule, exit status 2, before it touches a GPU (so this runs on machines without one); bench/quantize_cpu
# its bad arguments likewise.
B=${top_builddir:-.}/bench/cuda_bench
Q=${top_builddir:-.}/bench/quantize_cpu
test -x "$B" || { echo "bench_args.sh: $B is not built"; exit 99; }
test -x "$Q" || { echo "bench_args.sh: $Q is not built"; exit 99; }
failed=0
expect () {  # expect DESCRIPTION PATTERN ARGS..  (cuda_bench; P=program overrides)
  d=$1; pat=$2; shift 2
  out=$("${P:-$B}" "$@" 2>&1); rc=$?
  if [ "$rc" -eq 2 ] && printf '%s\n' "$out" | grep -q -- "$pat"; then echo "ok - $d"
  else echo "not ok - $d (exit $rc: $out)"; failed=1; fi
}
expect "M and K missing" "usage: cuda_bench quant-at M K" quant-at
expect "K missing" "usage: cuda_bench quant-at M K" quant-at 64
expect "M = 0" "\[M, K\] = \[0, 8192\]: M and K must be positive" quant-at 0 8192
expect "K negative" "\[M, K\] = \[64, -16\]" quant-at 64 -16
expect "K not a multiple of 16" "\[M, K\] = \[64, 24\].*multiples of 16" quant-at 64 24
expect "M not a multiple of 16" "\[M, K\] = \[8, 16\]: M and K must be positive multiples of 16" quant-at 8 16
expect "unknown mode" "usage: cuda_bench \[quant|" qaunt
expect "mode with a suffix" "usage: cuda_bench \[quant|" linearx
expect "iterations 0" "iterations '0' must be an integer in 1..1000000" quant 0
expect "iterations not a number" "iterations 'ten'" linear-lib ten
expect "quant-at iterations -3" "iterations '-3'" quant-at 64 64 -3
expect "an argument too many" "usage: cuda_bench \[quant|" quant 10 10
expect "M not a number" "\[M, K\] = \[abc, 128\]" quant-at abc 128
expect "K with trailing junk" "\[M, K\] = \[64, 16abc\]" quant-at 64 16abc
P=$Q expect "quantize_cpu: M alone" "usage: quantize_cpu \[M K \[reps\]\]" 1024
P=$Q expect "quantize_cpu: M not a number" "\[M, K\] = \[abc, 1024\]: M and K must be positive multiples of 16" abc 1024
P=$Q expect "quantize_cpu: M not a multiple of 16" "\[M, K\] = \[8, 1024\]" 8 1024
P=$Q expect "quantize_cpu: K negative" "\[M, K\] = \[64, -16\]" 64 -16
P=$Q expect "quantize_cpu: reps 0" "reps '0' must be a positive integer" 64 64 0
exit $failed
