#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# usdt-probes.sh - the USDT probes in libpwb.so are the ones lib/probes.h
# lists, each at least once, and doc/design.md shows each
#
# lib/probes.h's table is the list. Skipped (77) where the library was
# built without <sys/sdt.h> or readelf cannot read its notes.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
so=$top_builddir/lib/.libs/libpwb.so
READELF=${READELF:-readelf}

if ! grep -q '^#define HAVE_SYS_SDT_H 1' "$top_builddir/config.h"; then
	echo "SKIP: built without <sys/sdt.h> (install systemtap-sdt-dev)"
	exit 77
fi
if ! command -v "$READELF" >/dev/null 2>&1; then
	echo "SKIP: no readelf to read the probe notes"
	exit 77
fi
if [ ! -e "$so" ]; then
	echo "SKIP: no shared library at $so (configured with --disable-shared?)"
	exit 77
fi

# " *   name   (args)   what" lines of the comment's table.
want=$(sed -n 's/^ \*   \([a-z_]*\) *(.*$/\1/p' "$top_srcdir/lib/probes.h" |
	sort -u)
have=$("$READELF" -n "$so" |
	awk '/Provider: pwb/ { p = 1; next }
	     p && /Name:/ { print $2; p = 0 }' | sort -u)
if [ -z "$want" ]; then
	echo "FAIL: no probe list found in lib/probes.h"
	exit 1
fi
fail=0
if [ "$want" != "$have" ]; then
	echo "FAIL: probes in libpwb.so differ from lib/probes.h's list"
	diff <(echo "$want") <(echo "$have") | sed 's/^/  /'
	fail=1
fi
for p in $want; do
	if ! grep -q "sdt_pwb:$p\|usdt:[^ ]*:pwb:$p" "$top_srcdir/doc/design.md"; then
		echo "FAIL: doc/design.md shows no one-liner for probe $p"
		fail=1
	fi
done
[ $fail -eq 0 ] && echo "PASS: $(echo "$want" | wc -l) probes, each in libpwb.so and doc/design.md"
exit $fail
