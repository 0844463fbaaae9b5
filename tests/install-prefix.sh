#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# install-prefix.sh - `make install prefix=DIR` installs under DIR, like
# --prefix and DESTDIR (libtool once refused: "cannot install
# 'examples/sqlite-vfs/libpwbvfs.la' to a directory not ending in
# /usr/local/lib/libpwb"): the library, the headers, pwb.pc naming DIR, the
# programs and the SQLite extension with DIR/lib as their run path, the
# man pages. Then a plain `make` links the build tree for the configured
# directories again.
#
# The install relinks the build tree's libraries and programs, so
# Makefile.am runs this test after every other one.
#
# Environment (exported by Makefile.am's AM_TESTS_ENVIRONMENT):
# top_builddir, MAKE. Skipped (77) without a shared library.
set -u

top_builddir=${top_builddir:-$(pwd)}
MAKE=${MAKE:-make}
# CI's later runs (sanitizers, lockdep, coverage) set PWB_TEST_QUICK: the
# install is the build system's, the same in every build, and its two
# relinks of the whole tree cost those builds a minute or more each.
if [ -n "${PWB_TEST_QUICK:-}" ]; then
	echo "SKIP: PWB_TEST_QUICK is set (CI's first make check ran this)"
	exit 77
fi
if ! ls "$top_builddir"/lib/.libs/libpwb.so >/dev/null 2>&1; then
	echo "SKIP: no shared libpwb in $top_builddir/lib/.libs"
	exit 77
fi
tmp=$(mktemp -d "$top_builddir/tests/tmp-prefix.XXXXXX") || exit 1
dir=$tmp/prefix
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
# mk ARGS...: a plain make of the build tree (not the enclosing make
# check's jobserver and command-line variables).
mk() {
	# shellcheck disable=SC2086 # $MAKE may carry options
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $MAKE -C "$top_builddir" "$@"
}
restore() {
	if ! mk all >"$tmp/restore.log" 2>&1; then
		echo "FAIL: make all after the install failed:"
		cat "$tmp/restore.log"
		rm -rf "$tmp"
		exit 1
	fi
	rm -rf "$tmp"
}
trap restore EXIT

if ! mk install prefix="$dir" >"$tmp/install.log" 2>&1; then
	cat "$tmp/install.log"
	fail "make install prefix=$dir failed"
	exit 1
fi
for f in lib/libpwb.so include/pwb.h include/pwb-policy.h \
	lib/pkgconfig/pwb.pc bin/pwb-demo share/man/man1/pwb-demo.1 \
	share/man/man7/libpwb.7 share/man/man3/pwb_bdi_open.3; do
	[ -e "$dir/$f" ] || fail "$f is not installed under the prefix"
done
grep -qx "prefix=$dir" "$dir/lib/pkgconfig/pwb.pc" ||
	fail "pwb.pc does not name the prefix: $(head -n 1 "$dir/lib/pkgconfig/pwb.pc")"
grep -q "^URL:" "$dir/lib/pkgconfig/pwb.pc" &&
	fail "pwb.pc has a URL: $(grep "^URL:" "$dir/lib/pkgconfig/pwb.pc")"
# The run paths name the prefix's lib, where libpwb.so.0 now is.
if command -v readelf >/dev/null 2>&1; then
	for f in bin/pwb-demo lib/libpwb/libpwbvfs.so; do
		[ -e "$dir/$f" ] || continue
		readelf -d "$dir/$f" | grep -q "R.*PATH.*\[$dir/lib\]" ||
			fail "$f: run path is not $dir/lib:" \
				"$(readelf -d "$dir/$f" | grep PATH)"
	done
fi
if grep -q '^HAVE_SQLITE3_TRUE = $' "$top_builddir/Makefile"; then
	[ -e "$dir/lib/libpwb/libpwbvfs.so" ] ||
		fail "lib/libpwb/libpwbvfs.so is not installed under the prefix"
fi
"$dir/bin/pwb-demo" --help >/dev/null || fail "the installed pwb-demo does not run"

[ $fails -eq 0 ] || exit 1
echo "PASS: make install prefix=$dir installs everything there"
exit 0
