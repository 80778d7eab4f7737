#!/bin/sh
# Where nvfp4-lua takes `require "nvfp4.scenario"` from (setpath in lua/nvfp4-lua.c): the build tree's
# program from the source tree's lua/ (so make check tests the file being edited); any copy of it -- an
# installed one, here one staged under the build tree as `make install DESTDIR=$PWD/stage` leaves it --
# from $(pkgdatadir)/lua, where make install puts the framework; either from $NVFP4_LUA_PATH when set;
# without /proc, the build tree's program run by its path still from the source tree's lua/.
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-..}
prog=$builddir/lua/nvfp4-lua
test -x "$prog" || { echo "luapath.sh: $prog is not built"; exit 99; }
test -n "${pkgdatadir:-}" || { echo "luapath.sh: \$pkgdatadir is not set (make check sets it)"; exit 99; }
. "$srcdir/tests/testlib.sh"
# under the build tree, not in $TMPDIR: a path under the build directory is what made an installed
# copy take the source tree's modules before (the program was told apart by its path)
stage=$(mktemp -d "$(cd "$builddir" && pwd)/luapath-stage.XXXXXX") || exit 99
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/bin" "$stage/lua" && cp "$prog" "$stage/bin/nvfp4-lua" &&
  ln -s "$(cd "$builddir/lua" && pwd)/nvfp4-lua" "$stage/bin/link" || exit 99

# first DIR PROGRAM..: the directory the program prepends to package.path is DIR (both resolved
# with pwd -P when they exist: the source tree's is configured as .../_build/..); why not: in $why
why=$stage/why
first () {
  want=$1; shift
  got=$("$@" -e 'print((package.path:match("^(.-)/%?%.lua;")))' </dev/null 2>&1) ||
    { echo "$*: $got" >>"$why"; return 1; }
  test -d "$got" && got=$(cd "$got" && pwd -P)
  test -d "$want" && want=$(cd "$want" && pwd -P)
  test "$got" = "$want" || { echo "$*: package.path starts with '$got', expected '$want'" >>"$why"; return 1; }
}
src=$srcdir/lua
check "the build tree's nvfp4-lua takes the source tree's lua/" first "$src" "$prog"
check "... also when run through a symbolic link to it" first "$src" "$stage/bin/link"
plain=$("$prog" -e 'print((package.path:match("^(.-)/%?%.lua;")))' </dev/null 2>&1)
check "... as a plain path (a VPATH build's is configured as .../_build/..; tracebacks name modules by it)" \
  test "$plain" = "$(cd "$src" && pwd -P)"
check "a copy of it (an install staged under the build tree) takes \$(pkgdatadir)/lua" \
  first "$pkgdatadir/lua" "$stage/bin/nvfp4-lua"
# without /proc (macOS, the BSDs; here a private mount namespace with an empty /proc, where one can be
# made: root, or a user namespace), the program is told by argv[0]: run by its path, it is still the
# build tree's
# noproc UNSHARE-FLAGS PROGRAM ARGS..: run it with an empty /proc
noproc () {
  nsflags=$1; shift
  unshare $nsflags sh -c 'mount -t tmpfs none /proc && test ! -e /proc/self/exe && exec "$@"' sh "$@"
}
if noproc -m "$prog" -e '' </dev/null >/dev/null 2>&1; then ns=-m
elif noproc -rm "$prog" -e '' </dev/null >/dev/null 2>&1; then ns=-rm
else ns=; echo "# without /proc: not checked (unshare cannot mount over /proc here)"; fi
test -z "$ns" || check "without /proc, the build tree's nvfp4-lua (by its path) takes the source tree's lua/" \
  first "$src" noproc $ns "$prog"
check "\$NVFP4_LUA_PATH comes first for the copy" \
  first "$stage/lua" env NVFP4_LUA_PATH="$stage/lua" "$stage/bin/nvfp4-lua"
check "... and for the build tree's program" first "$stage/lua" env NVFP4_LUA_PATH="$stage/lua" "$prog"
test "$failed" -eq 0 || cat "$why"
exit "$failed"
