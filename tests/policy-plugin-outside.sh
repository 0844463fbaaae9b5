#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# policy-plugin-outside.sh - the example shard policy plugin builds out of
# tree with its own plain Makefile and nothing but pkg-config, and the demo
# loads it and uses it.
#
# Copies examples/policy-plugin/{Makefile,stripe.c} to a scratch
# directory, points pkg-config at a pwb.pc describing this build tree (the
# same Cflags/Libs shape as the installed one: the two public headers side
# by side, -lpwb), runs `make` there, then runs the build tree's pwb-demo
# with --plugin <abs path>/stripe.so --policy stripe:size=1M and expects
# it to verify every byte with policy "stripe". No `make install`, so it
# can run in parallel with tests/outside-program.sh.
#
# Environment (exported by Makefile.am's AM_TESTS_ENVIRONMENT):
# top_builddir, top_srcdir, MAKE, CC, PWB_TEST_DIR. Exit 77 (skip) if
# pkg-config is missing or no shared library was built.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
MAKE=${MAKE:-make}
CC=${CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}

# A sanitizer build's library needs an instrumented program (and its
# runtime loaded first); a program built with nothing but pkg-config's
# flags is not one. The plain build runs this test.
if [ -n "${PWB_SANITIZERS:-}" ]; then
	echo "SKIP: library built with -fsanitize=$PWB_SANITIZERS; an outside" \
		"program built with only pkg-config's flags cannot load it"
	exit 77
fi

if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
	echo "SKIP: $PKG_CONFIG not found; cannot build the plugin"
	exit 77
fi
if ! ls "$top_builddir"/lib/.libs/libpwb.so >/dev/null 2>&1; then
	echo "SKIP: no shared libpwb in $top_builddir/lib/.libs"
	exit 77
fi
demo=$top_builddir/examples/pwb-demo
if [ ! -x "$demo" ]; then
	echo "FAIL: $demo was not built"
	exit 1
fi

mkdir -p "$top_builddir/tests" || exit 1
tmp=$(mktemp -d "$top_builddir/tests/tmp-plugin.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# 1. A pwb.pc for this build tree; pkg-config searches PKG_CONFIG_PATH
#    first, so it wins over any installed libpwb.
mkdir -p "$tmp/pc" "$tmp/plugin" "$tmp/run" || exit 1
version=$(sed -n 's/^Version: *//p' "$top_builddir/pwb.pc")
cat >"$tmp/pc/pwb.pc" <<EOF
Name: pwb
Description: libpwb, uninstalled (tests/policy-plugin-outside.sh)
Version: ${version:-0}
Libs: -L$top_builddir/lib/.libs -lpwb
Cflags: -I$top_srcdir/include
EOF
export PKG_CONFIG_PATH="$tmp/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# 2. The plugin's own Makefile, run where nothing of the tree is around.
cp "$top_srcdir/examples/policy-plugin/Makefile" \
	"$top_srcdir/examples/policy-plugin/stripe.c" "$tmp/plugin/" || exit 1
echo "policy-plugin-outside: make in $tmp/plugin with" \
	"$($PKG_CONFIG --cflags --libs pwb)"
# shellcheck disable=SC2086 # $MAKE may carry options
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	$MAKE -C "$tmp/plugin" CC="$CC" CFLAGS="-O2 -g -Wall -Wextra -Werror" \
	>"$tmp/make.log" 2>&1; then
	echo "FAIL: the example plugin does not build out of tree:"
	cat "$tmp/make.log"
	exit 1
fi
cat "$tmp/make.log"
if [ ! -f "$tmp/plugin/stripe.so" ]; then
	echo "FAIL: make did not produce stripe.so"
	exit 1
fi

# 3. Load it into the demo and use it. The demo writes its image into the
#    current directory, which is on the build tree's file system.
cd "$tmp/run" || exit 1
"$demo" --plugin "$tmp/plugin/stripe.so" --policy stripe:size=1M \
	--contexts 4 --inodes 32 --mib 16 --threads 4 >"$tmp/demo.log" 2>&1
rc=$?
cat "$tmp/demo.log"
if [ $rc -ne 0 ]; then
	echo "FAIL: pwb-demo with the plugin exited with $rc"
	exit 1
fi
if ! grep -q "policy stripe" "$tmp/demo.log"; then
	echo "FAIL: pwb-demo did not report policy stripe"
	exit 1
fi
echo "PASS: the example plugin builds with pkg-config only, loads and works"
exit 0
