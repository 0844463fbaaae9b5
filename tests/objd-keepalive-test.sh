#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-keepalive-test.sh - a client of pwb-objd keeps one connection for
# all its requests, refused ones included (404, 400, 405, a chunked 413):
# curl with several requests on one connection, then ab -k (apache2-utils;
# that part is skipped without it) over TCP. The daemon's own count of
# connections (/-/stats "connections") must move by the client's count.
. "${top_srcdir:-.}/tests/objd-lib.sh"

conns() { ocurl /-/stats | sed -n 's/.*"connections": \([0-9]*\).*/\1/p'; }

truncate -s 256M "$IMG"
port=
if command -v python3 >/dev/null 2>&1; then
	port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
fi
objd_start --max-object 1M ${port:+--tcp-port $port} || exit 1

printf 'hello' >"$W/small"
head -c 100000 /dev/urandom >"$W/100k"
head -c 1100000 /dev/zero >"$W/toobig"
# Refusals whose body was read (or that have none) keep the connection:
# a 404 GET, a 400 PUT (reserved key) with a body, a 405, a chunked PUT
# past --max-object (read to its end, then 413), a 404 DELETE, a 414.
# (--next starts curl's options afresh: each request names the socket.)
long=$(head -c 1100 /dev/zero | tr '\0' k)
c0=$(conns)
curl -v \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' http://objd/k/none --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -T "$W/small" http://objd/-/reserved --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -T "$W/100k" http://objd/k/a --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -X PATCH http://objd/k/a --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -X DELETE http://objd/k/none --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -T - -H 'Expect:' http://objd/k/huge --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -T "$W/small" "http://objd/$long" --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' -X POST -d x http://objd/k/a --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' http://objd/k/a \
	<"$W/toobig" >"$W/codes" 2>"$W/curl.log"
c1=$(conns)
check "answers" "404 400 201 405 404 413 414 405 200" "$(tr '\n' ' ' <"$W/codes" | sed 's/ $//')"
check "curl opened one connection" 1 "$(grep -c '^\* Connected to' "$W/curl.log")"
check "no reply says Connection: close" 0 \
	"$(grep -ci '^< Connection: close' "$W/curl.log")"
# c1 counts the connection that asked for it.
check "the daemon counted one connection" 1 $((c1 - c0 - 1))

# A PUT refused by its Content-Length alone is answered before its body,
# which is not read: that connection closes (the next request opens one).
c0=$(conns)
curl -s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' \
	-T "$W/toobig" http://objd/k/big --next \
	-s --unix-socket "$SOCK" -o /dev/null -w '%{http_code}\n' http://objd/k/a >"$W/codes2"
c1=$(conns)
check "early 413, then a GET" "413 200" "$(tr '\n' ' ' <"$W/codes2" | sed 's/ $//')"
check "an early 413 closes its connection" 2 $((c1 - c0 - 1))

if ! command -v ab >/dev/null 2>&1 || [ -z "$port" ]; then
	echo "skip: ab -k (apache2-utils not installed, or no python3)"
else
	abrun() {	# what expect-keepalive ab-options...
		what=$1 want=$2
		shift 2
		c0=$(conns)
		ab -k -q "$@" >"$W/ab.out" 2>&1
		c1=$(conns)
		check "ab -k $what: complete" 200 \
			"$(sed -n 's/^Complete requests: *//p' "$W/ab.out")"
		check "ab -k $what: failed" 0 \
			"$(sed -n 's/^Failed requests: *//p' "$W/ab.out")"
		check "ab -k $what: keep-alive" "$want" \
			"$(sed -n 's/^Keep-Alive requests: *//p' "$W/ab.out")"
		check "ab -k $what: 4 connections" 4 $((c1 - c0 - 1))
	}
	abrun "GET 404" 200 -n 200 -c 4 "http://127.0.0.1:$port/k/none"
	check "ab -k GET 404: all non-2xx" 200 \
		"$(sed -n 's/^Non-2xx responses: *//p' "$W/ab.out")"
	abrun "GET 200" 200 -n 200 -c 4 "http://127.0.0.1:$port/k/a"
	abrun "PUT 400" 200 -n 200 -c 4 -u "$W/small" -T text/plain \
		"http://127.0.0.1:$port/-/reserved"
	abrun "PUT 201/204" 200 -n 200 -c 4 -u "$W/small" -T text/plain \
		"http://127.0.0.1:$port/k/ab"
fi
objd_stop; check "SIGTERM exits 0" 0 $?
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr:"
	cat "$W/objd.err"
fi
[ $fails -eq 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all checks passed"
