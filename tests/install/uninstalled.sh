#!/bin/sh
# tests/install/uninstalled.sh -- make check: a program built against the build tree, before any install,
# with the flags of nvfp4-uninstalled.pc (PKG_CONFIG_PATH=<build dir> pkg-config --cflags --libs nvfp4,
# README "The C library"): tests/install/consumer.c compiles and runs at 2 ranks.  77 (skip) without
# pkg-config.
: "${top_builddir:=.}" "${top_srcdir:=..}" "${MPIRUN:=mpirun}" "${CC:=cc}" "${PKG_CONFIG:=pkg-config}"
. "$top_srcdir/tests/testlib.sh"
command -v "$PKG_CONFIG" >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }
testlib_tmp nvfp4-uninst
build=$(cd "$top_builddir" && pwd)
test -f "$build/nvfp4-uninstalled.pc" || { echo "$build/nvfp4-uninstalled.pc is missing"; exit 99; }
flags=$(PKG_CONFIG_PATH=$build${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} "$PKG_CONFIG" --cflags --libs nvfp4)
check "pkg-config takes nvfp4-uninstalled.pc from the build directory" \
  sh -c "PKG_CONFIG_PATH='$build' '$PKG_CONFIG' --path nvfp4 | grep -q 'nvfp4-uninstalled.pc\$'"
check "... its flags name the build tree's library" sh -c "echo '$flags' | grep -q '$build/lib/libnvfp4.a'"
# the flags go through eval, as a Makefile's $(shell ...) would take them (a path with a blank is escaped)
if eval "\"\$CC\" -o \"\$tmp/consumer\" \"\$top_srcdir/tests/install/consumer.c\" $flags" >"$tmp/cc" 2>&1; then
  check "consumer.c builds with those flags" true
  "$MPIRUN" -np 2 "$tmp/consumer" </dev/null >"$tmp/run" 2>&1
  check "... and runs at 2 ranks" grep -q "^consumer: ok" "$tmp/run"
  grep -q "^consumer: ok" "$tmp/run" || cat "$tmp/run"
else
  check "consumer.c builds with those flags" false
  cat "$tmp/cc"
fi
echo "$npassed passed, $nfailed failed"
exit "$failed"
