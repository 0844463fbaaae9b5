#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# http-sink-test.sh - bench/http-sink, the ceiling objd-bench measures
# pwb-objd against, answers as objd-bench expects: in each mode (raw, and
# mhd and mhd-epoll where it is built with libmicrohttpd) one curl client
# PUTs bodies of 0 bytes, 3 bytes, 1 MiB (with "Expect: 100-continue") and
# 70 KiB over ONE kept-alive connection, each answered 201 with the CRC-32C
# of the body as its ETag (--crc), and the sink counts every request and
# byte. A sink that closed connections or read a body short would
# measure something else than pwb-objd's clients do. Not a measurement.
# Each mode is checked on a Unix socket and on TCP (--tcp-port, which
# objd-bench -w uses for wrk), where python3 can name a free port.
#
# Environment: top_builddir, PWB_TEST_DIR. Exit 77 without curl.
set -u

top_builddir=${top_builddir:-$(pwd)}
dir=${PWB_TEST_DIR:-/var/tmp}
sink=$top_builddir/bench/http-sink

command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
if [ ! -x "$sink" ]; then
	echo "FAIL: $sink was not built"
	exit 1
fi
w=$(mktemp -d "$dir/http-sink-XXXXXX") || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT

: >"$w/b0"
printf abc >"$w/b1"
head -c 1048576 /dev/urandom >"$w/b2"
head -c 71680 /dev/urandom >"$w/b3"
# CRC-32C of "abc" is 364b3fb7.
fail=0
modes=raw
"$sink" --mode mhd --check 2>/dev/null && modes="raw mhd mhd-epoll"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null)
for m in $modes; do
for t in unix ${port:+tcp}; do
	if [ "$t" = unix ]; then
		"$sink" --socket "$w/sock" --mode "$m" --crc >"$w/out" \
			2>"$w/err" &
		url=http://sink sock=$w/sock
	else
		"$sink" --tcp-port "$port" --mode "$m" --crc >"$w/out" \
			2>"$w/err" &
		url=http://127.0.0.1:$port sock=
	fi
	pid=$!
	n=0
	while ! grep -q serving "$w/out" 2>/dev/null; do
		n=$((n + 1))
		if [ $n -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "FAIL: $m $t: the sink did not start"; cat "$w/err"
			exit 1
		fi
		sleep 0.1
	done
	curl -s ${sock:+--unix-socket "$sock"} \
		-T "$w/b0" "$url/0" -T "$w/b1" "$url/1" \
		-T "$w/b2" "$url/2" -T "$w/b3" "$url/3" \
		-D "$w/heads" -o /dev/null \
		-w '%{http_code} %{num_connects}\n' >"$w/codes"
	kill -TERM "$pid"
	wait "$pid"
	pid=
	got=$(tr '\n' ' ' <"$w/codes")
	want="201 1 201 0 201 0 201 0 "
	if [ "$got" != "$want" ]; then
		echo "FAIL: $m $t: codes and connections [$got], want [$want]"
		fail=1
	fi
	if ! tr -d '\r' <"$w/heads" | grep -qi '^ETag: "364b3fb7"$'; then
		echo "FAIL: $m $t: no ETag with the CRC-32C of abc"
		fail=1
	fi
	want="http-sink: 4 requests, $((3 + 1048576 + 71680)) body bytes"
	if ! grep -qx "$want" "$w/out"; then
		echo "FAIL: $m $t: counted [$(tail -n 1 "$w/out")], want [$want]"
		fail=1
	fi
	[ $fail = 0 ] &&
		echo "ok: $m mode, $t: 4 PUTs on one connection, 201 each"
done
done
exit $fail
