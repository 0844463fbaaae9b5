#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-metrics-test.sh - pwb-objd's GET /-/metrics parses line by line as
# the Prometheus text format, its histograms are whole, and known requests
# move its counts by their number (tests/objd-metrics.py).
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed"
	exit 77
fi
truncate -s 256M "$IMG"
objd_start || exit 1
python3 "$top_srcdir/tests/objd-metrics.py" "$SOCK"
rc=$?
objd_stop || { echo "FAIL: SIGTERM: exit status $?"; rc=1; }
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 40 lines):"
	tail -n 40 "$W/objd.err"
fi
exit $rc
