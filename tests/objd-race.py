# SPDX-License-Identifier: LGPL-2.1-or-later
"""objd-race.py - GETs racing PUTs and DELETEs of the same keys (run by
tests/objd-race-test.sh against a running pwb-objd).

Writers replace two hot keys over and over (every version is 256 KiB of
one byte value) and now and then delete them; readers GET them whole and
by ranges. Every answer must be 404 or one complete version (a single
byte value throughout, the right length): a reader must never see an
inode freed under it, half a replacement or another object's blocks.
Afterwards, with the keys deleted, every byte is free again and no inode
is left open: replaced objects read while being replaced were freed by
their last reader.

Usage: objd-race.py SOCKET SECONDS [SIZE]
SIZE (default 256 KiB): the versions' size; one at or below the daemon's
--inline-max races objects kept in the index instead.
"""
import json
import random
import sys
import threading
import time

import objd_http

sock_path, seconds = sys.argv[1], float(sys.argv[2])
SIZE = int(sys.argv[3]) if len(sys.argv) > 3 else 256 << 10
KEYS = ["/hot/a", "/hot/b"]
problems = []
counts = {"put": 0, "get": 0, "404": 0, "del": 0}
lock = threading.Lock()


def request(method, path, body=None, headers=None):
    return objd_http.request(sock_path, method, path, body, headers)[:2]


def bump(what):
    with lock:
        counts[what] += 1


def guarded(fn):
    """A thread's exception (a reply cut short, a dead daemon) is a
    problem too."""
    def run(*args):
        try:
            fn(*args)
        except Exception as e:
            problems.append("%s: %r" % (fn.__name__, e))
    return run


@guarded
def writer(seed, stop):
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(KEYS)
        if rng.random() < 0.1:
            st, _ = request("DELETE", k)
            if st not in (204, 404):
                problems.append("DELETE %s: %d" % (k, st))
            bump("del")
            continue
        v = rng.randrange(1, 256)
        st, _ = request("PUT", k, bytes([v]) * SIZE)
        if st not in (201, 204):
            problems.append("PUT %s: %d" % (k, st))
        bump("put")


@guarded
def reader(seed, stop):
    rng = random.Random(seed)
    while not stop.is_set():
        k = rng.choice(KEYS)
        if rng.random() < 0.5:
            st, body = request("GET", k)
            want = SIZE
        else:
            a = rng.randrange(SIZE)
            b = rng.randrange(a, SIZE)
            st, body = request("GET", k, headers={"Range": "bytes=%d-%d" % (a, b)})
            want = b - a + 1
        if st == 404:
            bump("404")
            continue
        if st not in (200, 206) or len(body) != want or \
                body.count(body[:1]) != len(body) or body[:1] == b"\0":
            problems.append("GET %s: %d, %d bytes (want %d), %d distinct "
                            "values" % (k, st, len(body), want, len(set(body))))
        bump("get")


def stats():
    return json.loads(request("GET", "/-/stats")[1])


free0 = stats()["pwb"]["free_bytes"]
stop = threading.Event()
ts = [threading.Thread(target=writer, args=(i, stop)) for i in range(3)]
ts += [threading.Thread(target=reader, args=(100 + i, stop)) for i in range(5)]
for t in ts:
    t.start()
time.sleep(seconds)
stop.set()
for t in ts:
    t.join()
for k in KEYS:
    request("DELETE", k)
s = stats()
if s["pwb"]["free_bytes"] != free0:
    problems.append("free bytes %d, %d before" % (s["pwb"]["free_bytes"], free0))
if s["open_inodes"] != 0:
    problems.append("%d inodes still open" % s["open_inodes"])
for p in problems[:20]:
    print("FAIL: " + p)
print("objd-race: %s; %d problems" % (counts, len(problems)))
sys.exit(1 if problems else 0)
