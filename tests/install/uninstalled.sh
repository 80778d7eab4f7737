#!/bin/sh
# tests/install/uninstalled.sh -- make check: a program built against the build tree, before any install,
# with the flags of nvfp4-uninstalled.pc (PKG_CONFIG_PATH=<build dir> pkg-config --cflags --libs nvfp4,
# README "The C library"): tests/install/consumer.c compiles and runs at 2 ranks, as make installcheck
# builds it against the installed copy (tests/install/installed.sh).  77 (skip) without pkg-config.
: "${top_builddir:=.}" "${top_srcdir:=..}" "${MPIRUN:=mpirun}" "${CC:=cc}" "${PKG_CONFIG:=pkg-config}"
. "$top_srcdir/tests/testlib.sh"
command -v "$PKG_CONFIG" >/dev/null 2>&1 || { echo "SKIP: no pkg-config"; exit 77; }
testlib_tmp nvfp4-uninst
build=$(cd "$top_builddir" && pwd)
test -f "$build/nvfp4-uninstalled.pc" || { echo "$build/nvfp4-uninstalled.pc is missing"; exit 99; }
PKG_CONFIG_PATH=$build${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
check "pkg-config takes nvfp4-uninstalled.pc from the build directory" \
  sh -c "'$PKG_CONFIG' --path nvfp4 | grep -q 'nvfp4-uninstalled.pc\$'"
# (pkg-config escapes a blank in the path: "/a b" comes as "/a\ b")
check "... whose library is the build tree's" \
  test "$("$PKG_CONFIG" --variable=abs_top_builddir nvfp4 | sed 's/\\ / /g')" = "$build"
flags=$("$PKG_CONFIG" --cflags --libs nvfp4) || flags=
# $CC unquoted: it may be several words ("ccache gcc", "gcc -std=gnu11")
checkv "consumer.c builds with those flags" pcflags "$flags" $CC -o "$tmp/consumer" \
  "$top_srcdir/tests/install/consumer.c"
checkv "... and runs at 2 ranks" ranks2 '^consumer: ok' "$tmp/consumer"
echo "$npassed passed, $nfailed failed"
exit "$failed"
