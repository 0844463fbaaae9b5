#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# outside-program.sh - build a program against an installed libpwb using
# nothing but pkg-config, and run it.
#
# Installs the built tree with `make install DESTDIR=<tmp>`, compiles
# tests/outside/outside.c with only `$CC outside.c $(pkg-config --cflags
# --libs pwb)` (PKG_CONFIG_SYSROOT_DIR pointing at the staged install) and
# runs it against the staged library. Works under `make distcheck`: it
# writes only below $top_builddir/tests.
#
# Environment (exported by Makefile.am's AM_TESTS_ENVIRONMENT):
# top_builddir, top_srcdir, MAKE, CC, PWB_TEST_DIR. Exit 77 (skip) only if
# pkg-config is missing.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
MAKE=${MAKE:-make}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
PWB_TEST_DIR=${PWB_TEST_DIR:-/var/tmp}
export PWB_TEST_DIR

# A sanitizer build's library needs an instrumented program (and its
# runtime loaded first); a program built with nothing but pkg-config's
# flags is not one. The plain build runs this test.
if [ -n "${PWB_SANITIZERS:-}" ]; then
	echo "SKIP: library built with -fsanitize=$PWB_SANITIZERS; an outside" \
		"program built with only pkg-config's flags cannot load it"
	exit 77
fi

if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
	echo "SKIP: $PKG_CONFIG not found; cannot build an outside program"
	exit 77
fi

src=$top_srcdir/tests/outside/outside.c
if [ ! -f "$src" ]; then
	echo "FAIL: $src is missing"
	exit 1
fi

mkdir -p "$top_builddir/tests" || exit 1
tmp=$(mktemp -d "$top_builddir/tests/tmp-outside.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage

# 1. Install into the staging directory. Clear MAKEFLAGS' jobserver and
#    command-line variables of the enclosing `make check` (such as TESTS=)
#    so that this is a plain `make install`.
echo "outside-program: installing into $stage"
# shellcheck disable=SC2086 # $MAKE may carry options
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	$MAKE -C "$top_builddir" install DESTDIR="$stage" \
	>"$tmp/install.log" 2>&1; then
	echo "FAIL: make install DESTDIR=$stage failed:"
	cat "$tmp/install.log"
	exit 1
fi

# 2. Find the installed pwb.pc wherever libdir points (/usr/local/lib,
#    a multiarch directory, lib64, a distcheck prefix...).
pc=$(find "$stage" -path '*/pkgconfig/pwb.pc' | head -n 1)
if [ -z "$pc" ]; then
	echo "FAIL: make install did not install pwb.pc"
	find "$stage" -type f | sed 's/^/  /'
	exit 1
fi
pcdir=$(dirname "$pc")
# libdir as configured (no sysroot), e.g. /usr/local/lib.
libdir=$(PKG_CONFIG_PATH=$pcdir PKG_CONFIG_SYSROOT_DIR='' \
	"$PKG_CONFIG" --variable=libdir pwb)
if [ -z "$libdir" ] || [ ! -d "$stage$libdir" ]; then
	echo "FAIL: pwb.pc's libdir '$libdir' is not in the staged install"
	exit 1
fi
if [ "$stage$libdir/pkgconfig" != "$pcdir" ]; then
	echo "note: pwb.pc is in $pcdir, not in \$libdir/pkgconfig"
fi

# 3. Compile with nothing but what pkg-config says.
flags=$(PKG_CONFIG_SYSROOT_DIR=$stage PKG_CONFIG_PATH=$pcdir \
	"$PKG_CONFIG" --cflags --libs pwb) || {
	echo "FAIL: $PKG_CONFIG --cflags --libs pwb failed"
	exit 1
}
echo "outside-program: $CC outside.c $flags"
# $CC and $flags are word-split on purpose.
# shellcheck disable=SC2086
if ! $CC "$src" $flags -o "$tmp/outside"; then
	echo "FAIL: the outside program does not compile"
	exit 1
fi

# 4. Run it against the staged library, and make sure that is the one used.
export LD_LIBRARY_PATH="$stage$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if command -v ldd >/dev/null 2>&1; then
	so=$(ldd "$tmp/outside" | awk '/libpwb\.so/ { print $3 }')
	case $so in
	"$stage"/*) echo "outside-program: runs against $so" ;;
	*)
		echo "FAIL: outside program resolves libpwb to '$so'," \
			"not the staged install"
		exit 1
		;;
	esac
fi
"$tmp/outside"
rc=$?
if [ $rc -ne 0 ]; then
	echo "FAIL: the outside program exited with $rc"
	exit 1
fi
echo "PASS: outside program built with pkg-config works"
exit 0
