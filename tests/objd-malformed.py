# SPDX-License-Identifier: LGPL-2.1-or-later
"""objd-malformed.py - bad requests against a running pwb-objd (run by
tests/objd-malformed-test.sh, which starts the daemon with --timeout 3).

Each case sends raw bytes over the Unix socket and accepts an HTTP error
reply or a closed connection, never a 2xx, a hang past the daemon's
timeout or a dead daemon. Afterwards: the object stored first is unchanged,
no key appeared, no inode stays open, and every byte the
aborted PUTs reserved is free again.

Usage: objd-malformed.py SOCKET
"""
import json
import socket
import sys
import time

sock_path = sys.argv[1]
fails = 0


def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(sock_path)
    return s


def exchange(data, close_after=False, read=True):
    """Send @data; return the status code of the reply (0: the daemon closed
    the connection without one)."""
    s = conn()
    try:
        try:
            s.sendall(data)
        except OSError:
            return 0        # refused mid-send: closed
        if close_after:
            return None
        if not read:
            return None
        buf = b""
        while b"\r\n" not in buf:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                return 0
            if not d:
                return 0
            buf += d
        line = buf.split(b"\r\n", 1)[0].split()
        return int(line[1]) if len(line) > 1 and line[1].isdigit() else -1
    finally:
        s.close()


def request(method, path, body=b""):
    """A well-formed request: (status, body)."""
    s = conn()
    try:
        s.sendall(("%s %s HTTP/1.1\r\nHost: objd\r\nConnection: close\r\n"
                   "Content-Length: %d\r\n\r\n" % (method, path, len(body)))
                  .encode() + body)
        buf = b""
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            buf += d
    finally:
        s.close()
    head, _, rest = buf.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def stats():
    st, body = request("GET", "/-/stats")
    assert st == 200, st
    return json.loads(body)


def check(name, got, allowed):
    global fails
    if got in allowed:
        print("ok: %s: %s" % (name, "closed" if got == 0 and
                                  name[0] != " " and allowed is ERR else got))
    else:
        print("FAIL: %s: got %s, allowed %s" % (name, got, allowed))
        fails += 1


ERR = set(range(400, 600)) | {0}

# An object that nothing below may change.
keep = bytes(range(256)) * 4096
st, _ = request("PUT", "/keep", keep)
check("PUT keep", st, {201, 204})
before = stats()

# Truncated headers, then the client goes away; and one that stays.
for i, cut in enumerate((5, 17, 30, 44)):
    exchange(b"PUT /trunc HTTP/1.1\r\nHost: objd\r\nContent-Length: 10\r\n"[:cut],
             close_after=True)
t0 = time.time()
check("truncated header, client waits", exchange(
    b"GET /keep HTTP/1.1\r\nHost: ob"), ERR)
check("  ... answered or closed within the timeout (3 s) + 10 s",
      time.time() - t0 < 13, {True})

# Content-Length: huge, negative, garbage, two different ones.
check("Content-Length 2^64+", exchange(
    b"PUT /cl HTTP/1.1\r\nHost: objd\r\n"
    b"Content-Length: 99999999999999999999999999\r\n\r\nxx"), ERR)
check("Content-Length 1 TB (over --max-object)", exchange(
    b"PUT /cl HTTP/1.1\r\nHost: objd\r\nContent-Length: 1000000000000\r\n\r\n"),
    {413, 0})
check("Content-Length -5", exchange(
    b"PUT /cl HTTP/1.1\r\nHost: objd\r\nContent-Length: -5\r\n\r\nxx"), ERR)
check("Content-Length garbage", exchange(
    b"PUT /cl HTTP/1.1\r\nHost: objd\r\nContent-Length: 12abc\r\n\r\nxx"), ERR)
check("two Content-Lengths", exchange(
    b"PUT /cl HTTP/1.1\r\nHost: objd\r\nContent-Length: 2\r\n"
    b"Content-Length: 3\r\n\r\nxxx"), ERR)

# Unknown and odd methods; a bad request line; binary junk.
for m in (b"FOO", b"PATCH", b"TRACE", b"OPTIONS", b"CONNECT", b"G\x01T"):
    check("method %r" % m, exchange(
        m + b" /keep HTTP/1.1\r\nHost: objd\r\n\r\n"), ERR)
check("no HTTP version", exchange(b"GET /keep\r\n\r\n"), ERR)
check("HTTP/9.9", exchange(b"GET /keep HTTP/9.9\r\nHost: objd\r\n\r\n"), ERR)
check("junk", exchange(bytes(range(256)) * 64), ERR)

# Keys: 10,000 bytes, a NUL, an escape of a NUL, the daemon's own prefix.
check("10,000-byte key, PUT", exchange(
    b"PUT /" + b"k" * 10000 + b" HTTP/1.1\r\nHost: objd\r\n"
    b"Content-Length: 1\r\n\r\nx"), ERR)
check("10,000-byte key, GET", exchange(
    b"GET /" + b"k" * 10000 + b" HTTP/1.1\r\nHost: objd\r\n\r\n"), ERR)
check("1,025-byte key", exchange(
    b"PUT /" + b"k" * 1025 + b" HTTP/1.1\r\nHost: objd\r\n"
    b"Content-Length: 1\r\n\r\nx"), ERR)
check("%00 in a key", exchange(
    b"PUT /a%00b HTTP/1.1\r\nHost: objd\r\nContent-Length: 1\r\n\r\nx"), ERR)
check("reserved key", exchange(
    b"PUT /-/stats HTTP/1.1\r\nHost: objd\r\nContent-Length: 1\r\n\r\nx"), ERR)
check("1 MB header", exchange(
    b"GET /keep HTTP/1.1\r\nHost: objd\r\nX-Big: " + b"a" * 1000000 +
    b"\r\n\r\n"), ERR)
check("bad chunked body", exchange(
    b"PUT /chunk HTTP/1.1\r\nHost: objd\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"zz\r\nxx\r\n"), ERR)

# Clients that go away mid-body: new keys and an overwrite of keep.
for key in (b"/gone1", b"/gone2", b"/keep"):
    exchange(b"PUT " + key + b" HTTP/1.1\r\nHost: objd\r\n"
             b"Content-Length: 1048576\r\n\r\n" + b"y" * 300000,
             close_after=True)
exchange(b"PUT /gone3 HTTP/1.1\r\nHost: objd\r\nTransfer-Encoding: chunked"
         b"\r\n\r\n10000\r\n" + b"z" * 65536 + b"\r\n", close_after=True)

# 500 idle connections (half with a partial request), then a real request
# must still be served, and the idle ones must not have changed anything.
idle = []
for i in range(500):
    s = conn()
    if i % 2:
        s.sendall(b"PUT /idle%d HTTP/1.1\r\nHost: objd\r\n" % i)
    idle.append(s)
st, body = request("GET", "/keep")
check("GET with 500 idle connections open", st, {200})
check("  ... the right bytes", body == keep, {True})
for s in idle:
    s.close()

# Let the daemon notice the closed connections and finish the aborts.
deadline = time.time() + 30
while True:
    after = stats()
    if (after["pwb"]["free_bytes"] == before["pwb"]["free_bytes"] and
            after["open_inodes"] == 0) or \
            time.time() > deadline:
        break
    time.sleep(0.2)
st, body = request("GET", "/keep")
check("keep unchanged", st == 200 and body == keep, {True})
st, body = request("GET", "/?list")
check("no new key", body, {b"keep\n"})
check("objects", after["objects"], {1})
check("no inode left open (none leaked)", after["open_inodes"], {0})
check("free bytes as before (aborted PUTs freed)",
      after["pwb"]["free_bytes"], {before["pwb"]["free_bytes"]})
check("reserved bytes 0", after["pwb"]["reserved_bytes"], {0})
check("aborted PUTs counted", after["objd"]["aborted_puts"] >= 4, {True})
print("%d failed" % fails)
sys.exit(1 if fails else 0)
