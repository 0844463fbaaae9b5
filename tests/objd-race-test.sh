#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-race-test.sh - GETs of pwb-objd racing PUTs and DELETEs of the same
# keys see 404 or a complete version, never a freed or half-replaced
# object; nothing leaks (tests/objd-race.py). Both inode modes, 5 s each.
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed"
	exit 77
fi
truncate -s 256M "$IMG"
rc=0
secs=5		# seconds of racing per mode; 2 with PWB_TEST_QUICK (README)
[ -n "${PWB_TEST_QUICK:-}" ] && secs=2
# The third run races objects of 8 KiB, kept in the index (--inline-max).
for mode in "" --keep-open inline; do
	echo "pwb-objd ${mode:-(inodes on demand)}"
	size=
	if [ "$mode" = inline ]; then
		mode=
		size=8192
	fi
	objd_start $mode || exit 1
	python3 "$top_srcdir/tests/objd-race.py" "$SOCK" "$secs" $size || rc=1
	objd_stop || { echo "FAIL: SIGTERM: exit status $?"; rc=1; }
done
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 40 lines):"
	tail -n 40 "$W/objd.err"
fi
exit $rc
