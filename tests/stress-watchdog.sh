#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# stress-watchdog.sh - the stress test's watchdog catches a hang: with
# get_page blocking for ever after 300 ms, stress-test must exit with 3
# (hang) and print every thread's state, instead of hanging or passing.
prog=${top_builddir:-.}/tests/stress-test
out=$("$prog" --hang-after-ms 300 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 77 ] && exit 77
if [ $rc -ne 3 ]; then
	echo "FAIL: stress-test --hang-after-ms exited $rc, expected 3"
	exit 1
fi
for want in "watchdog:" "worker0" "resharder" "main" "bdi:"; do
	case $out in
	*"$want"*) ;;
	*) echo "FAIL: the hang report lacks \"$want\""; exit 1 ;;
	esac
done
echo "PASS: the watchdog reported the hang"
