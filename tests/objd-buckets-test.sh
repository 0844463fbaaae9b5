#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-buckets-test.sh - pwb-objd's buckets are tenants: a bucket flooded
# with PUTs does not stall a light bucket's PUTs. Through curl: the light
# bucket's PUT latency (curl's time_total) alone and while clients flood
# another bucket with large PUTs. Each bucket may hold 1M dirty
# (--bucket-dirty), all of them 8M (--dirty-limit): the flood is throttled
# by its own bucket's budget, and the light bucket's writers, far below
# theirs, never wait (checked in its tenant's stats). The light bucket's
# p99 beside the flood and alone is printed as a figure (see the end).
#
# What makes a p99 noisy here, and what the test does about it:
#  - The machine's own load (other builds and tests) changes over time:
#    the two conditions alternate in short rounds, so both see the same
#    background, and each has ROUNDS x LIGHT_CLIENTS x PER samples (600:
#    the p99 is the 6th slowest, not one outlier).
#  - A curl process per request would measure fork and exec: each light
#    client is one curl on one connection sending PER PUTs, timed by
#    curl itself per request.
#  - The flood's clients burn CPU the daemon does not control (reading
#    files, copying to the socket): they run at nice 10. The daemon's
#    own work for the flood (copying, checksums, writeback) is not
#    niced: that is what the buckets must contain.
#  - The first PUTs of a bucket make its tenant and grow the index: a
#    warm-up round is not counted.
#  - Sparse images allocate host blocks inside the first writes: the
#    image is fallocate()d where the host file system can.
# OBJD_BUCKETS_SHARED=1 is for checking the test itself: it runs the
# same with one bucket for all keys (keys without '/'), which must fail.
. "${top_srcdir:-.}/tests/objd-lib.sh"

ROUNDS=${OBJD_BUCKETS_ROUNDS:-3}
LIGHT_CLIENTS=2
PER=${OBJD_BUCKETS_PER:-100}
FLOOD_CLIENTS=4

fallocate -l 1G "$IMG" 2>/dev/null || truncate -s 1G "$IMG"
head -c 65536 /dev/urandom >"$W/light.bin"
head -c 4194304 /dev/urandom >"$W/flood.bin"
if [ "${OBJD_BUCKETS_SHARED:-0}" = 1 ]; then
	LB=light-
	FB=flood-
	fb=
	lb=
else
	LB=light/
	FB=flood/
	fb=flood
	lb=light
fi
objd_start --dirty-limit 8M --bucket-dirty 1M --bucket-rate "$fb=16M" ||
	exit 1

# light TAG CLIENT: PER PUTs of 64 KiB on one connection, one time_total
# (seconds) a line in $W/t.TAG.CLIENT.
light() {
	_args=
	_i=0
	while [ $_i -lt $PER ]; do
		_args="$_args -T $W/light.bin http://objd/$LB$1-$2-$_i"
		_i=$((_i + 1))
	done
	# shellcheck disable=SC2086 # $_args is a list of arguments
	curl -s --unix-socket "$SOCK" -H 'Expect:' -o /dev/null \
		-w '%{http_code} %{time_total}\n' $_args >"$W/t.$1.$2"
}

# All light clients at once; their times appended to $W/lat.KIND.
light_round() {
	_pids=
	_c=1
	while [ $_c -le $LIGHT_CLIENTS ]; do
		light "$2" $_c &
		_pids="$_pids $!"
		_c=$((_c + 1))
	done
	# shellcheck disable=SC2086
	wait $_pids
	_c=1
	while [ $_c -le $LIGHT_CLIENTS ]; do
		cat "$W/t.$2.$_c" >>"$W/lat.$1"
		_c=$((_c + 1))
	done
}

# The flood: clients PUTting 4 MiB objects, four a connection, until
# $W/stop exists.
flood_client() {
	_n=0
	while [ ! -e "$W/stop" ]; do
		curl -s --unix-socket "$SOCK" -H 'Expect:' -o /dev/null \
			-w '%{http_code}\n' \
			-T "$W/flood.bin" "http://objd/${FB}$1-$_n-0" \
			-T "$W/flood.bin" "http://objd/${FB}$1-$_n-1" \
			-T "$W/flood.bin" "http://objd/${FB}$1-$_n-2" \
			-T "$W/flood.bin" "http://objd/${FB}$1-$_n-3" \
			>>"$W/flood.codes"
		_n=$((_n + 1))
	done
}
flood_start() {
	rm -f "$W/stop"
	flood_pids=
	_c=1
	while [ $_c -le $FLOOD_CLIENTS ]; do
		flood_client $_c &
		flood_pids="$flood_pids $!"
		# Its curls inherit the nice value.
		renice -n 10 -p $! >/dev/null 2>&1
		_c=$((_c + 1))
	done
	# Until the flood has filled its bucket's budget.
	sleep 1
}
flood_stop() {
	touch "$W/stop"
	# shellcheck disable=SC2086
	wait $flood_pids
}

# stat BUCKET FIELD: the bucket's field in /-/stats.
stat() {
	ocurl /-/stats | sed -n "s/.*\"$1\": {\\([^}]*\\)}.*/\\1/p" |
		sed -n "s/.*\"$2\": \\([0-9.]*\\).*/\\1/p"
}

# p99 FILE: the 99th percentile of the times (the smallest time with 99%
# of the samples at or below it), in milliseconds.
p99() {
	awk '{ print $2 }' "$1" | sort -n |
		awk '{ v[NR] = $1 } END { i = int((NR * 99 + 99) / 100);
			printf "%.1f\n", v[i] * 1000 }'
}

light_round warm w
rm -f "$W/lat.warm"
r=1
while [ $r -le "$ROUNDS" ]; do
	light_round alone "a$r"
	flood_start
	light_round flood "f$r"
	flood_stop
	r=$((r + 1))
done

n_alone=$(wc -l <"$W/lat.alone")
n_flood=$(wc -l <"$W/lat.flood")
check "light PUTs alone all answered 201" "$n_alone" \
	"$(grep -c '^201 ' "$W/lat.alone")"
check "light PUTs under the flood all answered 201" "$n_flood" \
	"$(grep -c '^201 ' "$W/lat.flood")"
check "flood PUTs all answered 201 or 204" 0 \
	"$(grep -vc '^20[14]$' "$W/flood.codes")"
flood_puts=$(stat "$fb" puts)
flood_thr=$(stat "$fb" throttle_events)
light_thr=$(stat "$lb" throttle_events)
echo "flood bucket: $flood_puts PUTs, throttled $flood_thr times;" \
	"light bucket throttled $light_thr times"
[ "${flood_thr:-0}" -gt 0 ]
check "the flood was throttled by its bucket's budget" 0 $?
# With OBJD_BUCKETS_SHARED=1 both are the root bucket: this must fail.
check "the light bucket's writers never waited" 0 "$light_thr"

# The light bucket's p99 beside the flood against alone is printed, not
# asserted: a latency ratio is a figure of the machine it runs on (the
# project measures speed with its benches, never with a timed pass/fail
# test). On a quiet 2-CPU VM it was about 3x (4-5 ms alone, 12-15 ms
# beside the flood; 23 ms without the flood's rate cap): the flood's
# writes and the light PUTs' device flushes share one device queue,
# which the tenants do not divide. What the buckets must do, and the
# checks above assert, is keep the light bucket's writers from waiting
# on the flood's dirty budget. With all buckets in one tenant they waited
# (thousands of throttle events) and the p99 went 2.7x-4x above this.
a=$(p99 "$W/lat.alone")
f=$(p99 "$W/lat.flood")
echo "figure: light bucket PUT p99: alone $a ms, beside the flood $f ms," \
	"x$(awk -v a="$a" -v f="$f" 'BEGIN { printf "%.2f", (a > 0 ? f / a : 0) }')" \
	"($(wc -l <"$W/lat.alone") and $(wc -l <"$W/lat.flood") samples)"

objd_stop || { echo "FAIL: SIGTERM: exit status $?"; fails=$((fails + 1)); }
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 20 lines):"
	tail -n 20 "$W/objd.err"
fi
[ $fails -eq 0 ]
