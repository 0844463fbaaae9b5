#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-malformed-test.sh - malformed requests, clients that vanish and 500
# idle connections get an error or a closed connection from pwb-objd,
# never a crash, a leak or a changed object (tests/objd-malformed.py);
# then SIGTERM exits 0 (in the ASan build: without a leak report).
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed"
	exit 77
fi
truncate -s 256M "$IMG"
objd_start --timeout 3 --max-object 64M || exit 1
python3 "$top_srcdir/tests/objd-malformed.py" "$SOCK"
rc=$?
if ! kill -0 "$OBJD_PID" 2>/dev/null; then
	echo "FAIL: the daemon died"
	rc=1
else
	objd_stop
	src=$?
	echo "SIGTERM: exit status $src"
	[ $src -eq 0 ] || rc=1
fi
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 40 lines):"
	tail -n 40 "$W/objd.err"
fi
exit $rc
