#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# abi-diff.sh - the built libpwb.so is ABI-compatible with the committed
# baseline tests/abi/libpwb.abi (abidiff, from abigail-tools)
#
# Compatible means: no function removed or changed, and no exported type
# changed except (tests/abi/libpwb.abignore) fields appended at the end of
# the structs that grow (pwb.h, "Structs that cross the ABI") and the
# insides of the opaque handles. Added functions are fine.
#
# Usage: tests/abi-diff.sh            compare (make check, make abi-check)
#        tests/abi-diff.sh --update   rewrite the baseline from this build
#                                     (make abi-baseline; at a release)
# Environment: top_builddir, top_srcdir. Exit 0 if compatible, 1 if not
# (the report is printed), 77 if abidiff is missing or the library has no
# debug information to compare.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
so=$top_builddir/lib/.libs/libpwb.so
baseline=$top_srcdir/tests/abi/libpwb.abi
supp=$top_srcdir/tests/abi/libpwb.abignore

if [ ! -e "$so" ]; then
	echo "SKIP: no shared library at $so (configured with --disable-shared?)"
	exit 77
fi
for tool in abidw abidiff; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "SKIP: $tool not found (Debian: apt-get install abigail-tools)"
		exit 77
	fi
done
if ! readelf -S "$so" 2>/dev/null | grep -q '\.debug_info'; then
	echo "SKIP: $so has no debug information (configure with CFLAGS=-g)"
	exit 77
fi

if [ "${1:-}" = --update ]; then
	abidw --no-corpus-path --no-show-locs --type-id-style hash "$so" \
		>"$baseline.tmp" && mv "$baseline.tmp" "$baseline" || exit 1
	echo "wrote $baseline"
	exit 0
fi

if [ ! -f "$baseline" ]; then
	echo "FAIL: no baseline at $baseline"
	exit 1
fi
report=$(mktemp "${TMPDIR:-/tmp}/pwb-abidiff.XXXXXX") || exit 1
trap 'rm -f "$report"' EXIT
abidiff --no-added-syms --suppressions "$supp" "$baseline" "$so" \
	>"$report" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
	cat "$report"
	# abidiff's bits: 1 error, 2 usage, 4 ABI change, 8 incompatible
	echo "FAIL: abidiff exit status $rc: the ABI differs from $baseline"
	echo "(a deliberate change at a release: make abi-baseline)"
	exit 1
fi
echo "PASS: libpwb.so is ABI-compatible with tests/abi/libpwb.abi"
exit 0
