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
# returns the same bytes.
#
# GET ?verify, DELETE and POST /-/sync each wait off the one pool thread:
# while one of them is held, a GET of the inline object on another
# connection is answered. Each is held for a known time, or until the
# test lets it go: the verify by the device (libpwb's fault injection,
# PWB_FAULT=read_delay: its first read waits HOLD_MS), the DELETE by
# another LMDB writer in the index (tests/objd-index-hold.py: the
# committer waits for it), the sync by the device (PWB_FAULT=delay: its
# first write waits HOLD_MS, the pages of a PUT whose body is still
# coming). The DELETE is still held when SIGTERM comes: the daemon waits
# for it before it stops, and exits 0 with the key gone.
#
# Then the curl test (every operation, error and restart), the race test
# (GETs racing PUTs and DELETEs of the same keys) and the buckets test (a
# flooded bucket's writes wait for its budget: on the pool, through the
# workers) run on a pool of two threads.
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed"
	exit 77
fi

truncate -s 256M "$IMG"
head -c 4096 /dev/urandom >"$W/small"
head -c 1048576 /dev/urandom >"$W/large"

stat_of() {	# NAME: a counter of /-/stats (the first, for libpwb's)
	ocurl /-/stats --max-time "${2:-30}" |
		sed -n "s/.*\"$1\": \\([0-9]*\\).*/\\1/p" | head -n 1
}

# until_true COMMAND...: run it every 0.1 s until it succeeds, for 30 s at
# most (each try may take up to 5 s: a /-/stats the pool does not answer);
# 0 once it did, 1 if it never did.
until_true() {
	_end=$(($(date +%s) + 30))
	until "$@"; do
		[ "$(date +%s)" -lt $_end ] || return 1
		sleep 0.1
	done
}
stat_is() {	# NAME VALUE
	[ "$(stat_of "$1" 5)" = "$2" ]
}
stat_above() {	# NAME VALUE
	[ "$(stat_of "$1" 5)" -gt "$2" ] 2>/dev/null
}
holds() {	# FILE WORD: FILE's first line is WORD
	[ "$(head -n 1 "$1" 2>/dev/null)" = "$2" ]
}

# beside WHAT OUT: while WHAT waits (its curl writes OUT once answered),
# a GET of the inline object on another connection is answered, and WHAT
# still waits after it.
beside() {
	code=$(ocurl /t/small -o "$W/small.beside" -w '%{http_code}' \
		--max-time 30)
	waiting=yes
	[ -s "$2" ] && waiting=no
	check "while $1 waits, a GET on another connection is answered" \
		"200 yes" "$code $waiting"
	check "its bytes" 0 "$(cmp -s "$W/small" "$W/small.beside"; echo $?)"
}
HOLD_MS=5000

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

# GET ?verify: its first read from the device waits HOLD_MS (nothing is
# cached after the restart).
PWB_FAULT=read_delay:nth=1,delay_ms=$HOLD_MS
export PWB_FAULT
objd_start --threads 1 --verbose || exit 1
unset PWB_FAULT
ocurl "/t/large?verify" -w '%{http_code}' --max-time 60 >"$W/verify.out" &
vpid=$!
until_true stat_is stage_verifies 1
check "GET ?verify waits suspended for a stage worker" 0 $?
beside "GET ?verify" "$W/verify.out"
wait $vpid
check "GET ?verify's answer (ok, CRC, size, status)" "ok 1048576 200" \
	"$(tr '\n' ' ' <"$W/verify.out" | awk '{ print $1, $3, $4 }')"

# DELETE: the committer waits for another writer in the index, which
# lets go when its standard input (the fifo) ends.
mkfifo "$W/hold"
python3 "$top_srcdir/tests/objd-index-hold.py" "$IMG.index" \
	<"$W/hold" >"$W/held" &
hpid=$!
exec 3>"$W/hold"
until_true holds "$W/held" held
check "another writer holds the index" 0 $?
# (Each job in the background closes the fifo's write ends it inherited:
# a reader sees its end only once every writer closed.)
(exec 3>&-; ocurl /t/large -X DELETE -w '%{http_code}' --max-time 60 \
	>"$W/delete.out") &
dpid=$!
until_true stat_is stage_deletes 1
check "DELETE waits suspended for the committer" 0 $?
beside "DELETE" "$W/delete.out"
# SIGTERM with the DELETE suspended: the daemon waits for it, then stops.
kill -TERM "$OBJD_PID"
until_true grep -q stopping "$W/objd.err"
exec 3>&-
wait $hpid
check "the other writer lets go" 0 $?
wait $dpid
wait "$OBJD_PID"
check "SIGTERM with a DELETE suspended exits 0" 0 $?
OBJD_PID=

# POST /-/sync: the first write to the device waits HOLD_MS; the pages
# to write are those of a PUT whose body (from a fifo) is still coming.
PWB_FAULT=delay:nth=1,delay_ms=$HOLD_MS
export PWB_FAULT
objd_start --threads 1 || exit 1
unset PWB_FAULT
check "the DELETE held at SIGTERM is done" 404 \
	"$(ocurl /t/large -o /dev/null -w '%{http_code}' --max-time 30)"
mkfifo "$W/body"
ocurl /t/up -T - -w '%{http_code}' --max-time 60 <"$W/body" \
	>"$W/up.out" &
upid=$!
exec 4>"$W/body"
cat "$W/large" >&4
until_true stat_above dirty_pages 0
check "the PUT's first bytes are dirty in the cache" 0 $?
(exec 4>&-; ocurl /-/sync -X POST -w '%{http_code}' --max-time 60 \
	>"$W/sync.out") &
spid=$!
until_true stat_is stage_syncs 1
check "POST /-/sync waits suspended for a stage worker" 0 $?
beside "POST /-/sync" "$W/sync.out"
wait $spid
check "POST /-/sync's answer" "synced 200" "$(tr '\n' ' ' <"$W/sync.out")"
exec 4>&-
wait $upid
check "the PUT whose pages the sync wrote" 201 "$(cat "$W/up.out")"
ocurl /t/up --max-time 30 -o "$W/up.back"
check "its GET" 0 "$(cmp -s "$W/large" "$W/up.back"; echo $?)"
objd_stop
check "SIGTERM exits 0 after the syncs" 0 $?

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
