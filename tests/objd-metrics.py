# SPDX-License-Identifier: LGPL-2.1-or-later
"""objd-metrics.py - pwb-objd's GET /-/metrics against the Prometheus text
format, and its counts against requests made (run by
tests/objd-metrics-test.sh against a running daemon).

Every line must parse: "# HELP name text", "# TYPE name type" or a sample
"name{label="value",...} number"; every sample belongs to a family whose
TYPE came first; no sample repeats. Each histogram has, per label set,
buckets whose "le" grow and whose counts never fall, a "+Inf" bucket equal
to its _count, and a _sum. Then a known set of requests must move the
counters and the histograms' counts by exactly their number, and
/-/stats's percentiles must agree with the histograms' counts.

Usage: objd-metrics.py SOCKET
"""
import json
import math
import re
import sys

import objd_http

sock_path = sys.argv[1]
fails = []

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
SAMPLE = re.compile(r"^(%s)(\{(?:%s(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))
HELP = re.compile(r"^# HELP (%s) .*$" % NAME)
TYPE = re.compile(r"^# TYPE (%s) (counter|gauge|histogram|summary|untyped)$"
                  % NAME)


def request(method, path, body=None):
    return objd_http.request(sock_path, method, path, body)


def number(s):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    return float(s)


def parse(text):
    """{(name, labels-tuple): value}, {family: type}; problems appended."""
    types, samples = {}, {}
    if not text.endswith("\n"):
        fails.append("metrics: no newline at the end")
    for n, line in enumerate(text.split("\n")[:-1], 1):
        m = TYPE.match(line)
        if m:
            if m.group(1) in types:
                fails.append("line %d: second TYPE for %s" % (n, m.group(1)))
            types[m.group(1)] = m.group(2)
            continue
        if HELP.match(line):
            continue
        m = SAMPLE.match(line)
        if not m:
            fails.append("line %d does not parse: %r" % (n, line))
            continue
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            v = number(value)
        except ValueError:
            fails.append("line %d: bad value %r" % (n, value))
            continue
        fam = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == \
                    "histogram":
                fam = name[:-len(suf)]
        if fam not in types:
            fails.append("line %d: %s has no TYPE before it" % (n, name))
        lab = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                               labels))
        key = (name, lab)
        if key in samples:
            fails.append("line %d: %s%s repeated" % (n, name, labels))
        samples[key] = v
    return samples, types


def check_histograms(samples, types):
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for (name, lab), v in samples.items():
            if name == fam + "_bucket":
                rest = tuple(x for x in lab if x[0] != "le")
                le = [x[1] for x in lab if x[0] == "le"]
                if len(le) != 1:
                    fails.append("%s bucket without one le" % fam)
                    continue
                series.setdefault(rest, []).append((number(le[0]), v))
        if not series:
            fails.append("%s: no buckets" % fam)
        for rest, bs in series.items():
            order = [le for le, _ in bs]
            if order != sorted(order):
                pass    # order of lines is checked below, per family
            bs.sort()
            if bs[-1][0] != math.inf:
                fails.append("%s%s: no +Inf bucket" % (fam, rest))
            for (l1, c1), (l2, c2) in zip(bs, bs[1:]):
                if c2 < c1:
                    fails.append("%s%s: bucket le=%g has %d, below le=%g's"
                                 " %d" % (fam, rest, l2, c2, l1, c1))
            cnt = samples.get((fam + "_count", rest))
            if cnt is None or (fam + "_sum", rest) not in samples:
                fails.append("%s%s: no _count or _sum" % (fam, rest))
            elif cnt != bs[-1][1]:
                fails.append("%s%s: +Inf bucket %d, _count %d" %
                             (fam, rest, bs[-1][1], cnt))


def metrics():
    st, body, r = request("GET", "/-/metrics")
    if st != 200:
        sys.exit("FAIL: /-/metrics: %d" % st)
    ctype = r.getheader("Content-Type", "")
    if not ctype.startswith("text/plain"):
        fails.append("Content-Type %r" % ctype)
    s, t = parse(body.decode())
    check_histograms(s, t)
    return s, t


def hist_count(s, op):
    return s.get(("objd_request_duration_seconds_count", (("op", op),)), -1)


def hist_sum(s, op):
    return s.get(("objd_request_duration_seconds_sum", (("op", op),)), -1)


s0, t0 = metrics()
for fam in ("objd_puts_total", "objd_index_commits_total", "objd_objects",
            "objd_request_duration_seconds", "pwb_device_flushes"):
    if fam not in t0:
        fails.append("no family %s" % fam)
# 5 PUTs (2 inline, 3 on the device), 4 GETs (one 404), 2 HEADs, 1 DELETE
# and 1 DELETE of a missing key.
for i in range(5):
    st, _, _ = request("PUT", "/m/%d" % i, b"x" * (100 if i < 2 else 300000))
    if st != 201:
        fails.append("PUT /m/%d: %d" % (i, st))
for p in ("/m/0", "/m/3", "/m/4", "/m/none"):
    request("GET", p)
request("HEAD", "/m/0")
request("HEAD", "/m/3")
request("DELETE", "/m/1")
request("DELETE", "/m/1")
s1, _ = metrics()


def moved(name, want, lab=()):
    a, b = s0.get((name, lab)), s1.get((name, lab))
    if a is None or b is None or b - a != want:
        fails.append("%s%s moved from %s to %s, not by %d" %
                     (name, dict(lab), a, b, want))


moved("objd_puts_total", 5)
moved("objd_inline_puts_total", 2)
moved("objd_gets_total", 3)
moved("objd_heads_total", 2)
moved("objd_deletes_total", 1)
moved("objd_objects", 4)
for op, n in (("put", 5), ("get", 4), ("head", 2), ("delete", 2)):
    moved("objd_request_duration_seconds_count", n, (("op", op),))
    if not hist_sum(s1, op) > hist_sum(s0, op):
        fails.append("the %s latency sum did not grow" % op)
if not s1[("objd_index_commits_total", ())] > s0[("objd_index_commits_total", ())]:
    fails.append("no index commit counted")

st, body, _ = request("GET", "/-/stats")
js = json.loads(body)
for op in ("put", "get", "head", "delete"):
    lat = js["latency"][op]
    if lat["count"] != hist_count(s1, op):
        fails.append("stats %s count %d, metrics %d" %
                     (op, lat["count"], hist_count(s1, op)))
    if not 0 < lat["p50_us"] <= lat["p99_us"] <= lat["p999_us"]:
        fails.append("stats %s percentiles out of order: %s" % (op, lat))
if not js["puts_per_commit"] > 0:
    fails.append("puts_per_commit %s" % js["puts_per_commit"])

for f in fails[:40]:
    print("FAIL: " + f)
print("objd-metrics: %d samples, %d families; %d problems" %
      (len(s1), len(t0), len(fails)))
sys.exit(1 if fails else 0)
