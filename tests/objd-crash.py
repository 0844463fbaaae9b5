# SPDX-License-Identifier: LGPL-2.1-or-later
"""objd-crash.py - pwb-objd under SIGKILL (run by tests/objd-crash-test.sh).

8 client threads PUT objects with curl (sizes 0 to 8 MiB, log-uniform
squared: a few GB for 10,000 objects), some keys twice (an overwrite).
Each thread owns its keys, so a key's PUTs never overlap and the expected
content is exact. The daemon is SIGKILLed once a random number of PUTs
were acknowledged (plus a random delay), then restarted:
 - every acknowledged object must be there, byte for byte, and the daemon
   must find its CRC-32C right (GET ?verify);
 - an object whose PUT had no answer must be absent, its old content or
   its new content, never anything else; no key no PUT named may appear.
Then the clients finish the work, the daemon gets SIGTERM (exit 0), starts
again, and all objects are checked once more.

Usage: objd-crash.py DAEMON WORKDIR [SEED]
Environment: OBJD_CRASH_OBJECTS (default 10000), OBJD_CRASH_CLIENTS (8),
OBJD_CRASH_SIZE (every object that many bytes instead: 4096 tests the
objects the daemon keeps in its index, --inline-max).
"""
import math
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib

import objd_http

daemon, work = sys.argv[1], sys.argv[2]
seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.randrange(1 << 32)
nobj = int(os.environ.get("OBJD_CRASH_OBJECTS", "10000"))
nclients = int(os.environ.get("OBJD_CRASH_CLIENTS", "8"))
fixed_size = os.environ.get("OBJD_CRASH_SIZE")
# Odd seeds run the daemon with --keep-open (every inode open), even ones
# with inodes opened on demand.
mode = ["--keep-open"] if seed % 2 else []
# OBJD_TEST_ARGS (objd-lib.sh): more daemon options, before the test's own.
mode = os.environ.get("OBJD_TEST_ARGS", "").split() + mode
print("objd-crash: seed %d (OBJD_CRASH_SEED=%d reproduces the plan), "
      "%d objects, %d clients, %s" % (seed, seed, nobj, nclients,
                                      " ".join(mode) if mode else "inodes on demand"),
      flush=True)
rng = random.Random(seed)

img = os.path.join(work, "img")
sock = os.path.join(work, "objd.sock")
shm = "/dev/shm" if os.path.isdir("/dev/shm") else work
files = os.path.join(shm, "pwb-objd-crash.%d" % os.getpid())
os.makedirs(files)

MAX = 8 << 20
LO, HI = math.log(64), math.log(MAX)
POOL = rng.randbytes(MAX + (16 << 20))


def size_of(r):
    if fixed_size:
        r.random()      # the same plan (keys, kill point) as without
        return int(fixed_size)
    if r.random() < 0.01:
        return 0
    return int(math.exp(LO + (HI - LO) * r.random() ** 2))


def content(key, ver, size):
    """Bytes of version @ver of @key: a header naming both, then a slice
    of the random pool that depends on them."""
    head = ("%s:%d:" % (key, ver)).encode()
    off = zlib.crc32(head) % (16 << 20)
    return (head + POOL[off:off + size])[:size]


# The plan: client t owns keys i with i % nclients == t; about 5% of its
# keys are PUT a second time, later in its list.
keys = ["obj/%05d" % i for i in range(nobj)]
sizes = {}
plans = [[] for _ in range(nclients)]
for i, k in enumerate(keys):
    plans[i % nclients].append((k, 1))
for t in range(nclients):
    mine = [k for (k, _) in plans[t]]
    for k in rng.sample(mine, len(mine) // 20):
        pos = rng.randrange(len(plans[t]) // 2, len(plans[t]) + 1)
        plans[t].insert(pos, (k, 2))
for t in range(nclients):
    for (k, v) in plans[t]:
        sizes[(k, v)] = size_of(rng)
total = sum(sizes.values())
print("objd-crash: %d PUTs, %.2f GiB%s" % (sum(map(len, plans)), total / 2**30,
      ", %s bytes each" % fixed_size if fixed_size else ""), flush=True)

lock = threading.Lock()
acked = {}      # key -> last acknowledged version
unknown = {}    # key -> versions sent after it without an answer
nacked = 0
cursor = [0] * nclients     # next plan entry of each client
errors = []                 # from the client threads


def request(method, path, headers=None):
    return objd_http.request(sock, method, path, headers=headers,
                             timeout=120)


def start():
    out = open(os.path.join(work, "objd.out"), "w")
    err = open(os.path.join(work, "objd.err"), "a")
    p = subprocess.Popen([daemon, "--device", img, "--socket", sock,
                          "--max-object", "16M"] + mode, stdout=out,
                         stderr=err)
    t0 = time.time()
    while True:
        if p.poll() is not None:
            sys.exit("FAIL: the daemon exited with %d at start" % p.returncode)
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            break
        except OSError:
            if time.time() - t0 > 120:
                sys.exit("FAIL: the daemon did not start")
            time.sleep(0.05)
    print("objd-crash: daemon up in %.2f s" % (time.time() - t0), flush=True)
    return p


BATCH = 8


def client(t, stop_at):
    """PUT plan entries cursor[t].. in curl batches until the plan ends or
    curl fails (the daemon is gone)."""
    global nacked
    plan = plans[t]
    while cursor[t] < len(plan):
        batch = plan[cursor[t]:cursor[t] + BATCH]
        cfg = []
        for j, (k, v) in enumerate(batch):
            f = os.path.join(files, "%d.%d" % (t, j))
            with open(f, "wb") as fh:
                fh.write(content(k, v, sizes[(k, v)]))
            cfg.append('upload-file = "%s"\nurl = "http://objd/%s"\n'
                       'output = "/dev/null"\n' % (f, k))
        with lock:
            for (k, v) in batch:
                unknown.setdefault(k, []).append(v)
        p = subprocess.run(
            ["curl", "-s", "--unix-socket", sock, "-K", "-",
             "-w", "%{http_code} %{url_effective}\\n"],
            input="".join(cfg).encode(), stdout=subprocess.PIPE)
        codes = {}
        for line in p.stdout.decode().splitlines():
            code, url = line.split(" ", 1)
            codes.setdefault(url.split("/", 3)[3], []).append(code)
        failed = False
        with lock:
            for (k, v) in batch:
                c = codes.get(k, ["000"]).pop(0) if codes.get(k) else "000"
                if c in ("201", "204") and not failed:
                    acked[k] = v
                    unknown[k] = []
                    nacked += 1
                    cursor[t] += 1
                else:
                    failed = True
                    # 000: no answer; 100: only "100 Continue" came
                    if c not in ("000", "100"):
                        errors.append("PUT %s answered %s" % (k, c))
        if failed:
            return
        if stop_at is not None and nacked >= stop_at[0]:
            stop_at[1].set()


def run_clients(stop_at=None):
    ts = [threading.Thread(target=client, args=(t, stop_at))
          for t in range(nclients)]
    for th in ts:
        th.start()
    return ts


def check_key(k, final, listed, out):
    """Check @k against what the clients know; append problems to @out."""
    ok = []
    if k in acked:
        ok.append(acked[k])
    elif not final:
        ok.append(None)     # never acknowledged: may be absent
    if not final:
        ok += unknown.get(k, [])
    st, body, r = request("GET", "/" + k)
    if st == 404:
        got = None
    elif st == 200:
        got = "?"
        for v in ok:
            if v is not None and body == content(k, v, sizes[(k, v)]):
                got = v
        if got == "?":
            out.append("%s: %d bytes, not a version the clients sent "
                       "(allowed %s)" % (k, len(body), ok))
            return
        # After the kill every object's CRC; at the end every tenth (the
        # bytes were compared already).
        if not final or int(k[-5:]) % 10 == 0:
            vs, vb, _ = request("GET", "/" + k + "?verify")
            if vs != 200:
                out.append("%s: verify: %d %s" % (k, vs, vb))
    else:
        out.append("GET %s: %d" % (k, st))
        return
    if got not in ok:
        out.append("%s: version %s, allowed %s" % (k, got, ok))
    if (got is not None) != (k in listed):
        out.append("%s: in the list: %s, GET found: %s" %
                   (k, k in listed, got is not None))


def verify(phase, final):
    """Check every key, from nclients threads."""
    t0 = time.time()
    st, body, _ = request("GET", "/?list")
    listed = set(body.decode().split("\n")) - {""}
    outs = [[] for _ in range(nclients)]

    def part(t):
        try:
            for k in keys[t::nclients]:
                check_key(k, final, listed, outs[t])
        except Exception as e:      # a dead daemon, a timeout
            outs[t].append("verifier %d: %r" % (t, e))
    ts = [threading.Thread(target=part, args=(t,)) for t in range(nclients)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    problems = [m for o in outs for m in o]
    extra = listed - set(keys)
    if extra:
        problems.append("listed but never PUT: %s" % sorted(extra)[:10])
    for m in problems[:50]:
        print("FAIL: " + m)
    print("objd-crash: %s: %d objects acknowledged, %d keys checked, %d "
          "problems (%.1f s)" % (phase, len(acked), len(keys), len(problems),
                                 time.time() - t0), flush=True)
    return len(problems)


bad = 0
try:
    truncate = open(img, "wb")
    truncate.truncate(max(2 * total, 256 << 20) + (1 << 30))
    truncate.close()
    d = start()
    target = rng.randrange(nobj // 20, nobj * 6 // 10 + 1)
    delay = rng.uniform(0, 0.3)
    ev = threading.Event()
    t0 = time.time()
    ts = run_clients((target, ev))
    while not ev.wait(0.1):
        if not any(th.is_alive() for th in ts):
            break
    time.sleep(delay)
    d.send_signal(signal.SIGKILL)
    d.wait()
    for th in ts:
        th.join()
    print("objd-crash: SIGKILL after %d acknowledged PUTs (target %d + "
          "%.3f s), %.1f s in" % (nacked, target, delay, time.time() - t0),
          flush=True)
    d = start()
    bad += verify("after SIGKILL", False)
    # Finish the work: unanswered PUTs are sent again (new answers).
    for k in unknown:
        unknown[k] = []
    t1 = time.time()
    ts = run_clients()
    for th in ts:
        th.join()
    print("objd-crash: the rest of the PUTs took %.1f s" % (time.time() - t1),
          flush=True)
    for m in errors:
        print("FAIL: " + m)
        bad += 1
    if any(cursor[t] < len(plans[t]) for t in range(nclients)):
        print("FAIL: the clients could not finish")
        bad += 1
    st, body, _ = request("GET", "/-/stats")
    print("objd-crash: stats after the run: %s" %
          body.decode().split("\n")[1:3], flush=True)
    d.send_signal(signal.SIGTERM)
    rc = d.wait()
    if rc != 0:
        print("FAIL: SIGTERM: exit status %d" % rc)
        bad += 1
    t1 = time.time()
    d = start()
    print("objd-crash: restart with %d objects took %.2f s" %
          (len(acked), time.time() - t1), flush=True)
    bad += verify("after SIGTERM and restart", True)
    if len(acked) != nobj:
        print("FAIL: %d of %d objects stored" % (len(acked), nobj))
        bad += 1
    d.send_signal(signal.SIGTERM)
    rc = d.wait()
    if rc != 0:
        print("FAIL: last SIGTERM: exit status %d" % rc)
        bad += 1
finally:
    for f in os.listdir(files):
        os.unlink(os.path.join(files, f))
    os.rmdir(files)
    if 'd' in dir() and d.poll() is None:
        d.kill()
        d.wait()

print("objd-crash: seed %d: %s" % (seed, "FAILED" if bad else "passed"))
sys.exit(1 if bad else 0)
