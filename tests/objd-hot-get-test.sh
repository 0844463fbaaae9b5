#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-hot-get-test.sh - pwb-objd serves repeated GETs of a hot object
# from libpwb's page cache: its inode stays open after the request
# (--idle-open), so the pages the first GET read stay cached and the
# next GETs read nothing from the device (libpwb's read_ios in /-/stats
# does not move). With --idle-open 0 the inode closes after each GET and
# every GET reads again: the same test must see that, or it measures
# nothing. A GET of a PUT's object right after the PUT reads nothing
# either (the PUT's pages are still cached).
. "${top_srcdir:-.}/tests/objd-lib.sh"

fallocate -l 256M "$IMG" 2>/dev/null || truncate -s 256M "$IMG"
head -c 1048576 /dev/urandom >"$W/obj.bin"

# read_ios: libpwb's device reads so far, from /-/stats.
read_ios() {
	ocurl /-/stats | tr ',{' '\n\n' |
		sed -n 's/^ *"read_ios": *\([0-9]*\).*/\1/p' | head -n 1
}

# get KEY: GET it, compare with obj.bin, print the HTTP code.
get() {
	ocurl "/$1" -o "$W/got" -w '%{http_code}'
	cmp -s "$W/got" "$W/obj.bin" || echo " (body differs)"
}

# run IDLE_OPEN: PUT, restart (nothing cached), then GET 3 times; print
# the reads of the first GET and of the two after it.
run() {
	objd_start --idle-open "$1" || exit 1
	check "PUT hot (idle-open $1)" 201 \
		"$(ocurl "/hot$1" -T "$W/obj.bin" -H 'Expect:' -o /dev/null \
			-w '%{http_code}')"
	r0=$(read_ios)
	check "GET after the PUT (idle-open $1)" 200 "$(get "hot$1")"
	after_put=$(( $(read_ios) - r0 ))
	objd_stop || { echo "FAIL: SIGTERM"; fails=$((fails + 1)); }
	objd_start --idle-open "$1" || exit 1
	r0=$(read_ios)
	check "first GET after a restart (idle-open $1)" 200 "$(get "hot$1")"
	r1=$(read_ios)
	check "second GET (idle-open $1)" 200 "$(get "hot$1")"
	check "third GET (idle-open $1)" 200 "$(get "hot$1")"
	r2=$(read_ios)
	objd_stop || { echo "FAIL: SIGTERM"; fails=$((fails + 1)); }
	echo "idle-open $1: device reads: GET after the PUT $after_put;" \
		"first GET after a restart $((r1 - r0)), the next two $((r2 - r1))"
}

run 256
check "the GET right after its PUT read nothing from the device" 0 \
	"$after_put"
[ $((r1 - r0)) -gt 0 ]
check "the first GET after a restart read from the device" 0 $?
check "the next GETs of the hot object read nothing from the device" 0 \
	$((r2 - r1))

run 0
[ $((r2 - r1)) -gt 0 ]
check "with --idle-open 0 every GET reads again (the test sees it)" 0 $?

if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 20 lines):"
	tail -n 20 "$W/objd.err"
fi
[ $fails -eq 0 ]
