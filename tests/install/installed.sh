#!/bin/sh
# tests/install/installed.sh -- make installcheck: the installed copy as a downstream user takes it, from a
# directory outside the source and build trees: the files are there, nvfp4.pc follows what configure
# found, the headers compile alone, a program builds with `pkg-config --cflags --libs nvfp4` (C and C++)
# and runs, and the installed nvfp4-lua runs scenarios with the installed framework.
# Ends with "N passed, N failed" (exit 1 on a failure).
# The Makefile passes the install directories (bindir, includedir, libdir, pkgdatadir, docdir), VERSION,
# CC, PKG_CONFIG, MPIRUN, top_srcdir and how configure found MPI and OpenBLAS (mpi_how, MPI_CFLAGS,
# MPI_LIBS, blas_how, BLAS_LIBS); CXX (default c++) comes from the environment, and without it the C++
# checks are left out. DESTDIR is not supported: the installed nvfp4-lua looks for its framework where
# it was configured to be, not under a staging directory.
for v in bindir includedir libdir pkgdatadir docdir VERSION CC PKG_CONFIG MPIRUN top_srcdir mpi_how blas_how; do
  eval "test -n \"\${$v:-}\"" && continue
  if test "$v" = PKG_CONFIG; then
    echo "installed.sh: PKG_CONFIG is empty: configure found no pkg-config, which these checks (and nvfp4.pc's users) need"
  else echo "installed.sh: \$$v is empty (make installcheck sets it from configure)"; fi
  exit 1
done
test -z "${DESTDIR:-}" || { echo "installed.sh: DESTDIR='$DESTDIR': make installcheck checks an install at its prefix"; exit 1; }
srcdir=$(cd "$top_srcdir" && pwd)
. "$srcdir/tests/testlib.sh"
testlib_tmp nvfp4-installcheck
cd "$tmp" || exit 1
PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH
lua=$bindir/nvfp4-lua

for f in "$lua" "$libdir/libnvfp4.a" "$includedir/nvfp4.h" "$includedir/nvfp4_mpi.h" \
         "$libdir/pkgconfig/nvfp4.pc" "$pkgdatadir/lua/nvfp4/scenario.lua" "$docdir/README.md" \
         "$docdir/NUMERICS.md" "$pkgdatadir/scenarios/sp/row_parallel_b1.lua" \
         "$pkgdatadir/scenarios/fuzz/layouts.lua" "$pkgdatadir/valgrind.supp"; do
  check "installed: $f" test -f "$f"
done

# ---- the C library through pkg-config -------------------------------------------------------
checkv "pkg-config --modversion nvfp4 is $VERSION" sh -c "test \"\$($PKG_CONFIG --modversion nvfp4)\" = '$VERSION'"
cflags=$($PKG_CONFIG --cflags nvfp4) && libs=$($PKG_CONFIG --libs nvfp4) ||
  { check "pkg-config --cflags --libs nvfp4" false; cflags= libs=; }
# nvfp4.pc follows what configure found ($mpi_how, $blas_how): a dependency found through pkg-config is
# named, so that its .pc where nvfp4 is used gives its flags -- here a stand-in .pc first on
# PKG_CONFIG_PATH, whose flags must come through, its Libs.private with --static (a static link needs
# them) -- and one found otherwise has its flags as configure found them ($MPI_*, $BLAS_LIBS)
mkdir "$tmp/pc"
# standin_has WORD PKG-CONFIG-OPTIONS..: nvfp4's flags, with the stand-ins first, have the word WORD
standin_has () {
  w=$1; shift
  flags=$(PKG_CONFIG_PATH=$tmp/pc:$PKG_CONFIG_PATH $PKG_CONFIG "$@" nvfp4) || return 1
  case " $flags " in *" $w "*) ;; *) echo "'$w' is not in pkg-config $* nvfp4: $flags"; return 1 ;; esac
}
# has_words WORDS FLAGS: each word of WORDS is one of FLAGS
has_words () {
  for w in $1; do
    case " $2 " in *" $w "*) ;; *) echo "'$w' is not in: $2"; return 1 ;; esac
  done
}
for dep in "MPI ompi-c ${mpi_how:-}" "OpenBLAS openblas ${blas_how:-}"; do
  set -- $dep
  name=$1 m=$2 how=${3:-}
  if test "$how" = pkg-config; then
    printf 'Name: %s\nDescription: stand-in\nVersion: 99\nCflags: -I/stand-in/%s\nLibs: -lstandin-%s\nLibs.private: -lstandin-private-%s\n' \
      "$m" "$m" "$m" "$m" >"$tmp/pc/$m.pc"
    checkv "nvfp4.pc takes $name's flags from the $m.pc where it is used: Libs" standin_has "-lstandin-$m" --libs
    checkv "... its Libs.private with --static" standin_has "-lstandin-private-$m" --static --libs
    # nvfp4_mpi.h includes mpi.h; no installed header includes cblas.h
    test "$name" = MPI && checkv "... its Cflags" standin_has "-I/stand-in/$m" --cflags
  elif test "$name" = MPI; then
    checkv "nvfp4.pc has MPI's flags as configure found them ($how)" \
      has_words "${MPI_CFLAGS:-} ${MPI_LIBS:-}" "$cflags $libs"
  else
    checkv "nvfp4.pc has OpenBLAS's flags as configure found them ($how)" has_words "${BLAS_LIBS:-}" "$libs"
  fi
done
# builds LANG EXT COMPILER..: in LANG (sources named .EXT), each header alone (and twice) compiles with
# -Wall -Wextra -Werror, and tests/install/consumer.c builds with pkg-config's flags and runs at 2 ranks
builds () {
  lang=$1 ext=$2; shift 2
  for h in nvfp4.h nvfp4_mpi.h; do
    printf '#include <%s>\n#include <%s>\nint main (void) { return 0; }\n' "$h" "$h" >"$tmp/h.$ext"
    checkv "$h compiles alone (and twice) in $lang with -Wall -Wextra -Werror" \
      pcflags "$cflags" "$@" -Wall -Wextra -Werror -c "$tmp/h.$ext" -o "$tmp/h.o"
  done
  cp "$srcdir/tests/install/consumer.c" "$tmp/consumer.$ext"
  checkv "a $lang program builds with $1 and pkg-config's flags" \
    pcflags "$cflags $libs" "$@" -o "$tmp/consumer-$ext" "$tmp/consumer.$ext"
  checkv "... and runs at 2 ranks" ranks2 '^consumer: ok' "$tmp/consumer-$ext"
}
builds C c $CC
# the README's valgrind recipe, as written there, on that program (one rank): no error, no definite leak
if command -v valgrind >/dev/null 2>&1; then
  ompisupp=/usr/share/openmpi/openmpi-valgrind.supp
  test -f "$ompisupp" && ompisupp="--suppressions=$ompisupp" || ompisupp=
  checkv "the README's valgrind recipe: the C program alone, with \$(pkgdatadir)/valgrind.supp, 0 errors" \
    env OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_backing_directory=/tmp \
      OMPI_MCA_btl_vader_single_copy_mechanism=none valgrind -q --error-exitcode=9 --leak-check=full \
      --num-callers=40 --errors-for-leak-kinds=definite $ompisupp \
      "--suppressions=$pkgdatadir/valgrind.supp" "$tmp/consumer-c"
else
  echo "# valgrind is not installed: the README's valgrind recipe is not checked"
fi
if command -v mpicc >/dev/null 2>&1; then
  checkv "... and with mpicc and pkg-config's flags (the README's other way)" \
    pcflags "$cflags $libs" mpicc -o "$tmp/consumer-mpicc" "$srcdir/tests/install/consumer.c"
fi
# C++: the headers are extern "C"; the same program, compiled as C++ with the same flags
cxx=${CXX:-c++}
if command -v "$cxx" >/dev/null 2>&1; then
  builds C++ cc $cxx
fi

# ---- the installed nvfp4-lua ----------------------------------------------------------------
checkv "nvfp4-lua --help: usage on standard output, status 0" \
  sh -c "'$lua' --help </dev/null >'$tmp/help' 2>/dev/null && grep -q '^usage: nvfp4-lua' '$tmp/help'"
checkv "... naming \$(pkgdatadir)/lua as where Lua modules are searched for first" \
  sh -c "'$lua' --help </dev/null | grep -qF 'searched for first in $pkgdatadir/lua'"
checkv "nvfp4-lua --version names nvfp4 $VERSION" sh -c "'$lua' --version </dev/null | grep -q 'nvfp4 $VERSION'"
# scenario_from EXPECTED: the installed nvfp4-lua's nvfp4.scenario is the file EXPECTED
scenario_from () {
  got=$("$lua" -e 'print(package.searchpath("nvfp4.scenario", package.path))' </dev/null 2>&1)
  test "$got" = "$1" || { echo "nvfp4.scenario is $got, expected $1"; return 1; }
}
checkv "nvfp4-lua takes nvfp4.scenario from \$(pkgdatadir)/lua" scenario_from "$pkgdatadir/lua/nvfp4/scenario.lua"
mkdir -p "$tmp/mylua/nvfp4" && echo 'return {mine = true}' >"$tmp/mylua/nvfp4/scenario.lua"
checkv "... and from \$NVFP4_LUA_PATH when it is set" \
  sh -c "NVFP4_LUA_PATH='$tmp/mylua' '$lua' -e 'assert(require(\"nvfp4.scenario\").mine)' </dev/null"
cp "$srcdir/scenarios/sp/gather_grad_output.lua" "$tmp/gather.lua"
checkv "mpirun -np 2 nvfp4-lua runs a scenario copied out of the tree" \
  ranks2 '^[1-9][0-9]* passed, 0 failed' "$lua" gather.lua
checkv "the installed seed scenario runs (S=512 H=1024: nd fails as TE 2.21 did, flat2d completes)" \
  ranks2 '^2 passed, 0 failed' "$lua" "$pkgdatadir/scenarios/sp/row_parallel_b1.lua" S=512 H=1024

echo "$npassed passed, $nfailed failed (installcheck)"
exit "$failed"
