#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-curl-test.sh - examples/pwb-objd through curl: PUT, GET, Range,
# HEAD, DELETE, list, stats, sync, verify; the socket's mode; options;
# objects kept across a SIGTERM (which exits 0) and a restart; the space
# of replaced and deleted objects given back; the same with --keep-open.
. "${top_srcdir:-.}/tests/objd-lib.sh"

code() { ocurl "$@" -o /dev/null -w '%{http_code}'; }
free_bytes() { ocurl /-/stats | sed -n 's/.*"free_bytes": \([0-9]*\).*/\1/p'; }

truncate -s 256M "$IMG"

# Options: --help exits 0, a bad option or value exits 2.
"$OBJD" --help >/dev/null; check "--help exits 0" 0 $?
"$OBJD" --device "$IMG" --no-such-option 2>/dev/null; check "unknown option exits 2" 2 $?
"$OBJD" --device "$IMG" --contexts x 2>/dev/null; check "bad --contexts exits 2" 2 $?
"$OBJD" --device "$IMG" --cache-size -5 2>/dev/null; check "negative --cache-size exits 2" 2 $?
"$OBJD" 2>/dev/null; check "no --device exits 2" 2 $?
# Each call below must end by itself; one that starts serving instead
# is killed after a minute (and fails its check).
must_exit() { timeout -s KILL 60 "$OBJD" "$@"; }
# 17179869184G is 2^64 bytes: refused, not wrapped to 0.
must_exit --device "$IMG" --max-object 17179869184G 2>/dev/null
check "--max-object past 64 bits exits 2" 2 $?
must_exit --device "$IMG" --cache-size 16777216T 2>/dev/null
check "unknown suffix exits 2" 2 $?
must_exit --device "$IMG" --inline-max 129K 2>/dev/null
check "--inline-max above 128K exits 2" 2 $?
# A cache or a device too small to be of use is refused with the minimum
# (they were taken without a word); the tiny device gets no index.
must_exit --device "$IMG" --cache-size 1 2>"$W/err.cache"
check "--cache-size 1 exits 2" 2 $?
grep -q "^pwb-objd: --cache-size 1 is below the minimum of 1048576" \
	"$W/err.cache"
check "--cache-size 1: names the minimum" 0 $?
truncate -s 4K "$W/tiny"
must_exit --device "$W/tiny" 2>"$W/err.tiny"
check "a 4 KiB device exits 2" 2 $?
grep -q "tiny holds 4096 bytes, below the minimum of 1048576" "$W/err.tiny"
check "a 4 KiB device: says so" 0 $?
check "a 4 KiB device: no index" no \
	"$([ -e "$W/tiny.index" ] && echo yes || echo no)"
rm -f "$W/tiny"
# A TCP port someone listens on: exit 1, naming the port and the reason.
if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import signal, socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
signal.pause()' >"$W/port" &
	holder=$!
	i=0
	while [ ! -s "$W/port" ] && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	port=$(cat "$W/port")
	must_exit --device "$IMG" --tcp-port "$port" >/dev/null \
		2>"$W/err.tcp"
	check "a TCP port in use: exit 1" 1 $?
	grep -q "could not listen on TCP 127.0.0.1:$port: Address already in use" \
		"$W/err.tcp"
	check "a TCP port in use: names the port and the reason" 0 $?
	kill "$holder"
	wait "$holder" 2>/dev/null
else
	echo "skip: a TCP port in use (no python3)"
fi

# Something at the socket path that is not a socket is neither replaced
# nor removed: the daemon refuses to start.
echo keep >"$SOCK"
must_exit --device "$IMG" --socket "$SOCK" >/dev/null 2>"$W/err.sock"
check "a file at the socket path: exit 1" 1 $?
check "a file at the socket path is kept" keep "$(cat "$SOCK")"
grep -q "not a socket" "$W/err.sock"; check "a file at the socket path: says so" 0 $?
rm -f "$SOCK"

objd_start --max-object 16M || exit 1
check "socket mode" "srw-------" "$(ls -l "$SOCK" | cut -c1-10)"

# One daemon per device: a second one, through another path to the same
# image and with its own socket and index, exits 1 and leaves the first
# serving.
ln -s "$IMG" "$W/img.link"
must_exit --device "$W/img.link" --socket "$W/second.sock" \
	--index "$W/second.index" >/dev/null 2>"$W/err.second"
check "a second daemon on the device: exit 1" 1 $?
grep -q "in use by another pwb-objd" "$W/err.second"
check "a second daemon on the device: says so" 0 $?
check "a second daemon on the device: no socket" no \
	"$([ -e "$W/second.sock" ] && echo yes || echo no)"
check "the first daemon still serves" 200 "$(code /-/stats)"
free0=$(free_bytes)

# The CRC-32C check value of "123456789" is e3069283.
printf 123456789 >"$W/nine"
check "PUT new: 201" 201 "$(code /k/nine -T "$W/nine")"
check "ETag is the CRC-32C" '"e3069283"' \
	"$(ocurl /k/nine -I | tr -d '\r' | sed -n 's/^ETag: //p')"
check "GET" 123456789 "$(ocurl /k/nine)"
check "Range a-b" 345 "$(ocurl /k/nine -r 2-4)"
check "Range a-b: 206" 206 "$(code /k/nine -r 2-4)"
check "Range a-" 789 "$(ocurl /k/nine -r 6-)"
check "Range -n" 89 "$(ocurl /k/nine -H 'Range: bytes=-2')"
check "Range past the end: 416" 416 "$(code /k/nine -r 9-20)"
check "Range past the end: Content-Range" "bytes */9" \
	"$(ocurl /k/nine -r 9-20 -D - -o /dev/null | tr -d '\r' | sed -n 's/^Content-Range: //p')"
check "HEAD: Content-Length" 9 \
	"$(ocurl /k/nine -I | tr -d '\r' | sed -n 's/^Content-Length: //p')"
check "HEAD: no body" "" "$(ocurl /k/nine -X HEAD -m 5 --max-filesize 0 -o - 2>/dev/null | head -c 1)"

# A 3 MiB object through a pipe (chunked upload), byte for byte.
head -c 3145728 /dev/urandom >"$W/big"
check "PUT chunked: 201" 201 "$(cat "$W/big" | code /k/big -T -)"
ocurl /k/big -o "$W/big.out"
cmp -s "$W/big" "$W/big.out"; check "GET 3 MiB is the same" 0 $?
ocurl /k/big -r 1000000-1999999 -o "$W/big.mid"
dd if="$W/big" bs=1000000 skip=1 count=1 2>/dev/null | cmp -s - "$W/big.mid"
check "Range in the middle of 3 MiB" 0 $?
check "verify" "ok" "$(ocurl '/k/big?verify' | cut -d' ' -f1)"

# Empty object; overwrite; delete; list.
check "PUT empty: 201" 201 "$(code /k/empty -T /dev/null)"
check "GET empty: 200" 200 "$(code /k/empty)"
check "GET empty: no bytes" 0 "$(ocurl /k/empty | wc -c)"
printf new >"$W/new"
check "PUT over: 204" 204 "$(code /k/nine -T "$W/new")"
check "GET after overwrite" new "$(ocurl /k/nine)"
check "GET missing: 404" 404 "$(code /k/none)"
check "DELETE missing: 404" 404 "$(code /k/none -X DELETE)"
check "list" "k/big k/empty k/nine" "$(ocurl '/?list' | tr '\n' ' ' | sed 's/ $//')"

# Inline objects (up to --inline-max, 16K by default) live in the index:
# nine, empty and the overwrite so far; 16384 bytes still are, 16385 are
# not (sent chunked: moved from memory to an inode as it grows), and a
# key switches between the two kinds in both directions.
inl() { ocurl /-/stats | sed -n 's/.*"inline_puts": \([0-9]*\).*/\1/p'; }
check "inline PUTs so far" 3 "$(inl)"
head -c 16384 /dev/urandom >"$W/16k"
head -c 16385 /dev/urandom >"$W/16k1"
check "PUT 16384 bytes: 201" 201 "$(code /k/edge -T "$W/16k")"
check "16384 bytes are inline" 4 "$(inl)"
check "PUT 16385 bytes chunked: 201" 201 "$(cat "$W/16k1" | code /k/over -T -)"
check "16385 bytes are not" 4 "$(inl)"
ocurl /k/edge -o "$W/16k.out"; cmp -s "$W/16k" "$W/16k.out"
check "GET inline 16384 is the same" 0 $?
ocurl /k/over -o "$W/16k1.out"; cmp -s "$W/16k1" "$W/16k1.out"
check "GET 16385 is the same" 0 $?
check "inline Range" "$(dd if="$W/16k" bs=1 skip=100 count=50 2>/dev/null | od -An -tx1)" \
	"$(ocurl /k/edge -r 100-149 | od -An -tx1)"
check "inline HEAD: Content-Length" 16384 \
	"$(ocurl /k/edge -I | tr -d '\r' | sed -n 's/^Content-Length: //p')"
check "inline verify" ok "$(ocurl '/k/edge?verify' | cut -d' ' -f1)"
check "inline over a device object: 204" 204 "$(code /k/over -T "$W/new")"
check "device object over an inline one: 204" 204 "$(code /k/edge -T "$W/16k1")"
ocurl /k/edge -o "$W/16k1.out"; cmp -s "$W/16k1" "$W/16k1.out"
check "GET after the switch" 0 $?
check "DELETE inline: 204" 204 "$(code /k/over -X DELETE)"
check "DELETE device object: 204" 204 "$(code /k/edge -X DELETE)"
check "DELETE inline again: 404" 404 "$(code /k/over -X DELETE)"

# A client's requests share one connection: GETs, a 404, the listing and
# the stats are answered once their request is whole, and none closes it.
curl -sv --unix-socket "$SOCK" http://objd/k/big -o /dev/null \
	http://objd/k/none -o /dev/null 'http://objd/?list' -o /dev/null \
	http://objd/-/stats -o /dev/null http://objd/k/nine -o /dev/null \
	2>"$W/keep.log"
check "five GETs on one connection" 1 "$(grep -c '^\* Connected to' "$W/keep.log")"
check "no reply says Connection: close" 0 \
	"$(grep -ci '^< Connection: close' "$W/keep.log")"
check "list with prefix" "k/empty" "$(ocurl '/?list&prefix=k/e' | tr '\n' ' ' | sed 's/ $//')"
check "stats: objects" 3 "$(ocurl /-/stats | sed -n 's/^  "objects": \([0-9]*\),/\1/p')"
check "sync: 200" 200 "$(code /-/sync -X POST)"
check "unknown method: 405" 405 "$(code /k/nine -X PATCH)"
check "POST elsewhere: 405" 405 "$(code /k/nine -X POST -d x)"
check "key with a control character: 400" 400 "$(code /k/%01x)"
check "empty key: 400" 400 "$(code / -X PUT --data-binary @"$W/new")"
check "reserved key: 400" 400 "$(code /-/mine -T "$W/new")"
check "too big: 413" 413 "$(head -c 17000000 /dev/zero | code /k/huge -T - -H 'Content-Length: 17000000')"
check "too big, chunked: 413" 413 "$(head -c 17000000 /dev/zero | code /k/huge -T -)"
check "too big: not stored" 404 "$(code /k/huge)"

# SIGTERM exits 0; everything is there after a restart.
objd_stop; check "SIGTERM exits 0" 0 $?
check "socket removed at exit" no "$( [ -e "$SOCK" ] && echo yes || echo no)"
objd_start || exit 1
check "after restart: GET" new "$(ocurl /k/nine)"
ocurl /k/big -o "$W/big.out2"
cmp -s "$W/big" "$W/big.out2"; check "after restart: 3 MiB the same" 0 $?
check "after restart: verify" ok "$(ocurl '/k/big?verify' | cut -d' ' -f1)"
check "after restart: list" "k/big k/empty k/nine" "$(ocurl '/?list' | tr '\n' ' ' | sed 's/ $//')"

# Deleting everything gives every byte back (replaced objects' too).
for k in big empty nine; do
	check "DELETE k/$k: 204" 204 "$(code /k/$k -X DELETE)"
done
check "GET deleted: 404" 404 "$(code /k/big)"
check "space given back" "$free0" "$(free_bytes)"
objd_stop; check "SIGTERM exits 0 again" 0 $?
objd_start || exit 1
check "deleted stays deleted" "" "$(ocurl '/?list')"
check "space free after restart" "$free0" "$(free_bytes)"
objd_stop; check "SIGTERM exits 0 (3)" 0 $?

# --keep-open: every object's inode stays open; the same answers (with
# --inline-max 0, so that the small object has an inode too).
objd_start --keep-open --inline-max 0 || exit 1
check "keep-open: PUT" 201 "$(code /k/a -T "$W/big")"
check "keep-open: PUT over" 204 "$(code /k/a -T "$W/nine")"
check "keep-open: GET" 123456789 "$(ocurl /k/a)"
check "keep-open: one inode open" 1 "$(ocurl /-/stats | sed -n 's/^  "open_inodes": \([0-9]*\),/\1/p')"
objd_stop; check "keep-open: SIGTERM exits 0" 0 $?
objd_start --keep-open --inline-max 0 || exit 1
check "keep-open: GET after restart" 123456789 "$(ocurl /k/a)"
check "keep-open: DELETE" 204 "$(code /k/a -X DELETE)"
check "keep-open: space given back" "$free0" "$(free_bytes)"
check "keep-open: no inode open" 0 "$(ocurl /-/stats | sed -n 's/^  "open_inodes": \([0-9]*\),/\1/p')"
objd_stop; check "keep-open: last SIGTERM exits 0" 0 $?

# A full device: 507, the space of the failed PUT given back at once.
IMG=$W/small.img
truncate -s 32M "$IMG"
objd_start --max-object 128M || exit 1
free0=$(free_bytes)
head -c 40000000 /dev/zero >"$W/40m"
check "device full: 507" 507 "$(code /k/full -T "$W/40m")"
check "device full: not stored" 404 "$(code /k/full)"
check "device full: space given back" "$free0" "$(free_bytes)"
check "device full: a small PUT still works" 201 "$(code /k/small -T "$W/nine")"
objd_stop; check "last SIGTERM exits 0" 0 $?

if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr:"
	cat "$W/objd.err"
fi
[ $fails -eq 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all checks passed"
