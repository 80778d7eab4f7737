#!/bin/sh
# tests/install/symbols.sh -- make check: the static library defines no global name outside its own
# prefixes, so that a program linking lib/libnvfp4.a may have a convert_kernel or transpose16_vec of its
# own: every external symbol is nvfp4_* (the API), nvfp4i_* (internal, C or C++-mangled: _Z<n>nvfp4i_...)
# or the C++ runtime's DW.ref.__gxx_personality_v0 (the CUDA objects' exception personality); under
# AddressSanitizer also its ODR indicators of those names (gcc: __odr_asan.nvfp4i_cpu_ops; clang:
# __odr_asan_gen_...).  The kernels are static __global__ (their launch stubs local with them).  77
# (skip) without nm.
: "${top_builddir:=.}" "${top_srcdir:=..}" "${NM:=nm}"
. "$top_srcdir/tests/testlib.sh"
command -v "$NM" >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }
testlib_tmp nvfp4-syms
lib=$top_builddir/lib/libnvfp4.a
test -f "$lib" || { echo "$lib is missing"; exit 99; }
"$NM" -g --defined-only "$lib" > "$tmp/all" 2>/dev/null
check "nm lists the library's external symbols" grep -q ' T nvfp4_quantize$' "$tmp/all"
awk 'NF == 3 { print $3 }' "$tmp/all" |
  grep -Ev '^((__odr_asan(\.|_gen_))?(nvfp4i?_|_Z[0-9]+nvfp4i?_)|DW\.ref\.__gxx_personality_v0$)' | sort -u > "$tmp/stray"
check "no external symbol outside nvfp4_ and nvfp4i_" test ! -s "$tmp/stray"
test -s "$tmp/stray" && sed 's/^/    stray: /' "$tmp/stray" | head -n 20
echo "$npassed passed, $nfailed failed"
exit "$failed"
