#!/bin/sh
# tests/configure.sh -- make check: configure's own checks, run in a scratch directory on the source tree
# (each case stops at its error, a second or two): the README's options refused as they should be, with a
# message that says what to do. Skips (77) in a build inside the source tree, whose configured srcdir
# configure refuses to build elsewhere.
: "${top_srcdir:=..}"
. "$top_srcdir/tests/testlib.sh"
srcdir=$(cd "$top_srcdir" && pwd)
test -f "$srcdir/config.status" && { echo "SKIP: the source tree is configured in place"; exit 77; }
testlib_tmp nvfp4-configure
# refused DESCRIPTION PATTERN [VAR=VALUE..] ARGS..: configure (in $tmp/b, environment VAR=VALUE..) ends with
# status 1 and an error line matching PATTERN (grep -E)
refused () {
  d=$1 pat=$2; shift 2
  rm -rf "$tmp/b" && mkdir "$tmp/b" || exit 99
  (cd "$tmp/b" && env "$@" >"$tmp/out" 2>&1); rc=$?
  if test "$rc" -ne 0 && grep -E "^configure: error: .*$pat" "$tmp/out" >/dev/null; then
    echo "ok - $d"; npassed=$((npassed + 1))
  else
    echo "not ok - $d (exit $rc, expected an error matching '$pat')"; tail -n 5 "$tmp/out" | sed 's/^/    /'
    failed=1; nfailed=$((nfailed + 1))
  fi
}
cfg=$srcdir/configure
# --with-cuda-arch: checked with or without nvcc; the kernels need sm_89 (ptxas refused sm_80 in make)
refused "--with-cuda-arch=sm_80,sm_90: sm_80 refused, naming the oldest supported" \
  "'sm_80' is older .*sm_89 or later" "$cfg" -q --with-cuda-arch=sm_80,sm_90
refused "--with-cuda-arch=sm90: not of the form sm_XY" "'sm90' is not of the form sm_XY" \
  "$cfg" -q --with-cuda-arch=sm90
refused "--with-cuda-arch= (empty): refused" "the list is empty" "$cfg" -q --with-cuda-arch=
# --with-cuda where the toolkit or its cuBLAS is missing (here cublas_v2.h hidden behind its include guard):
# an error naming what to install (a toolkit without cuBLAS configured, and make failed at the link)
refused "--with-cuda, cuBLAS missing: the error names what to install" \
  "(cuBLAS .* not found|nvcc or cuda_runtime.h not found).*: install" \
  "$cfg" -q --with-cuda --without-nccl CPPFLAGS=-DCUBLAS_V2_H_
# --with-nccl=DIR without NCCL there (where this build has CUDA: without it --with-nccl only warns)
if grep -q '^#define HAVE_CUDA 1' "${top_builddir:-.}/config.h" 2>/dev/null; then
  refused "--with-nccl=DIR without NCCL: the error names the package" "install NCCL \\(libnccl-dev\\)" \
    "$cfg" -q --with-nccl=/nonexistent
fi
# without pkg-config: the Lua error names pkg-config (it named liblua5.4-dev only, which may be installed)
refused "no pkg-config: the error names pkg-config, not only Lua's package" \
  "pkg-config, which is missing: apt-get install pkg-config" PKG_CONFIG=/nonexistent/pkg-config \
  "$cfg" -q --without-cuda
# ... and LUA_CFLAGS/LUA_LIBS (the README's override) need no pkg-config: configure completes with them
lua_cflags=$(${PKG_CONFIG:-pkg-config} --cflags lua5.4 2>/dev/null) && lua_libs=$(${PKG_CONFIG:-pkg-config} --libs lua5.4 2>/dev/null)
if test -n "${lua_libs:-}"; then
  rm -rf "$tmp/b" && mkdir "$tmp/b" || exit 99
  checkv "no pkg-config, LUA_CFLAGS/LUA_LIBS given: configure completes and the Makefile has them" sh -c \
    "cd '$tmp/b' && PKG_CONFIG=/nonexistent/pkg-config '$cfg' -q --without-cuda LUA_CFLAGS='$lua_cflags' LUA_LIBS='$lua_libs' &&
     grep -qxF 'LUA_LIBS = $lua_libs' Makefile"
else
  echo "# no lua5.4.pc: the LUA_CFLAGS/LUA_LIBS case is not checked"
fi
echo "$npassed passed, $nfailed failed"
exit "$failed"
