#!/bin/sh
# The library's quantize and dequantize against an independent model of spec/nvfp4-numerics.md
# (tests/oracle/nvfp4_oracle.py, Python 3's standard library only, written from the spec without reading
# lib/): the model reproduces the spec's 12 test vectors (section 16); 200 random and adversarial cases
# (every option and direction, bf16 and fp32, ties, E4M3 scale ties, zeros, -0, tiny blocks, Inf, NaN, bit
# patterns, SR corners, RHT rounding traps, 4over6 tiles whose pick depends on the summation order, given
# amaxes) give the same bytes in every buffer, padding and amaxes included, and the same dequantized
# values; and five deliberate deviations from the spec put into the model (mutate.py) each make the
# comparison fail, so that its pass means something. Skipped (77) without python3. The nightly runs more
# cases with the night's seed (.ci/nightly, ORACLE_CASES).
: "${top_builddir:=.}" "${top_srcdir:=..}"
. "$top_srcdir/tests/testlib.sh"
prog="$top_builddir/lua/nvfp4-lua"
dir="$top_srcdir/tests/oracle"
test -x "$prog" || { echo "$prog is not built"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 here to run the oracle"; exit 77; }
testlib_tmp nvfp4-or
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the source tree

checkv "the model gives the spec's test vectors (section 16)" python3 "$dir/test_vectors.py"
checkv "200 cases: the library's bytes are the model's" \
  python3 "$dir/compare.py" --lua "$prog" --seed 1 --n 200 --out "$tmp/cmp"
check "... all 200 counted" grep -q "^200 passed, 0 failed" "$tmp/out"
# mutate.py exits 1 when the comparison fails, which is what a deviation must do
mutant () {   # description MUTATION [compare.py options]: the mutated model disagrees with the library
  d=$1; m=$2; shift 2
  python3 "$dir/mutate.py" "$m" --lua "$prog" --seed 3 --out "$tmp/$m" "$@" >"$tmp/mut" 2>&1
  rc=$?
  check "a deviation is caught: $d" test "$rc" -eq 1
  test "$rc" -eq 1 || tail -n 5 "$tmp/mut" | sed 's/^/    /'
}
mutant "E2M1 ties rounded up (section 5.1)" e2m1_tie_up --n 40
mutant "-0 coded as 0x0" neg0 --n 40
mutant "SR bytes in PTX's order within a word (NUMERICS.md 5.2)" sr_ptxmap --only sr --n 20
mutant "2D 4over6 errors summed in row order, not the tree (section 9.1)" fo6_seq --only fo6tile --n 20
mutant "dequantize with S_dec (section 10)" deq_sdec --n 40
echo "$npassed passed, $nfailed failed"
exit "$failed"
