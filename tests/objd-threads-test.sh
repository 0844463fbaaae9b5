#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-threads-test.sh - pwb-objd on libmicrohttpd's epoll pool
# (--threads): every request gets its answer and its bytes, and what
# would wait is done by the stage workers.
#
# One pool thread serves every connection (--threads 1): PUTs of an
# inline 4 KiB object and of a 1 MiB one on the device are acknowledged
# (each PUT's durable stage runs with its connection suspended: /-/stats
# "stage_puts" for the one with an inode) and read back whole; after a
# restart (nothing cached) the device object's GET cannot be served from
# the cache, so its reads go to the stage workers ("stage_reads") and it
# returns the same bytes. Then the curl test (every operation, error and
# restart), the race test (GETs racing PUTs and DELETEs of the same keys)
# and the buckets test (a flooded bucket's writes wait for its budget:
# on the pool, through the workers) run on a pool of two threads.
. "${top_srcdir:-.}/tests/objd-lib.sh"

truncate -s 256M "$IMG"
head -c 4096 /dev/urandom >"$W/small"
head -c 1048576 /dev/urandom >"$W/large"

stat_of() {	# NAME: a counter of /-/stats
	ocurl /-/stats --max-time 30 |
		sed -n "s/.*\"$1\": \\([0-9]*\\).*/\\1/p"
}

objd_start --threads 1 || exit 1
for f in small large; do
	code=$(ocurl "/t/$f" -T "$W/$f" -o /dev/null -w '%{http_code}' \
		--max-time 30)
	check "PUT of the $f object on one pool thread" 201 "$code"
	ocurl "/t/$f" --max-time 30 -o "$W/$f.back"
	check "its GET" 0 "$(cmp -s "$W/$f" "$W/$f.back"; echo $?)"
done
check "the PUT with an inode went through a stage worker" 1 \
	"$(stat_of stage_puts)"
objd_stop
check "SIGTERM exits 0" 0 $?
objd_start --threads 1 || exit 1
for f in small large; do
	ocurl "/t/$f" --max-time 30 -o "$W/$f.cold"
	check "a cold GET of the $f object on one pool thread" 0 \
		"$(cmp -s "$W/$f" "$W/$f.cold"; echo $?)"
done
n=$(stat_of stage_reads)
[ "${n:-0}" -gt 0 ]
check "the cold GET read through the stage workers" 0 $?
objd_stop
check "SIGTERM exits 0 again" 0 $?
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 20 lines):"
	tail -n 20 "$W/objd.err"
fi
[ $fails -eq 0 ] || exit 1

# The other tests, on a pool of two threads.
OBJD_TEST_ARGS="--threads 2"
export OBJD_TEST_ARGS
for t in objd-curl-test.sh objd-race-test.sh objd-buckets-test.sh; do
	echo "--- $t with --threads 2"
	sh "$top_srcdir/tests/$t" || { echo "FAIL: $t with --threads 2"; exit 1; }
done
