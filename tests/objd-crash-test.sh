#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-crash-test.sh - pwb-objd SIGKILLed under 8 curl clients loses no
# acknowledged object and shows no half-written one (tests/objd-crash.py),
# with objects of 0 to 8 MiB and then with objects of 4 KiB.
# OBJD_CRASH_SEED=N repeats a run; OBJD_CRASH_OBJECTS=N changes its size
# (10000; 1000 in the sanitizer builds, whose daemon is several times
# slower, and with PWB_TEST_QUICK set).
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed"
	exit 77
fi
if { [ -n "$PWB_SANITIZERS" ] || [ -n "${PWB_TEST_QUICK:-}" ]; } &&
	[ -z "$OBJD_CRASH_OBJECTS" ]; then
	OBJD_CRASH_OBJECTS=1000
	export OBJD_CRASH_OBJECTS
fi
python3 "$top_srcdir/tests/objd-crash.py" "$OBJD" "$W" $OBJD_CRASH_SEED
rc=$?
# Again with objects of 4 KiB, which live in the index (--inline-max): a
# PUT's bytes are durable with its index commit alone.
if [ $rc -eq 0 ]; then
	rm -rf "$W/img" "$W/img.index"
	OBJD_CRASH_SIZE=4096 python3 "$top_srcdir/tests/objd-crash.py" \
		"$OBJD" "$W" $OBJD_CRASH_SEED
	rc=$?
fi
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 40 lines):"
	tail -n 40 "$W/objd.err"
fi
exit $rc
