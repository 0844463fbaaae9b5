#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# demo-args.sh - examples/pwb-demo refuses what it cannot do, says why,
# and leaves no image behind:
#
#  1. --mib 1000000 (more than the memory) exits 2 before creating the
#     image, naming --mib; it once took all the memory, met the OOM killer
#     and left a 1 TB sparse image;
#  2. an unknown --policy fails after the image was created: the image is
#     removed, and the message lists every built-in policy;
#  3. SIGTERM during a run removes the image (writes are delayed with
#     PWB_FAULT so that the run is still going);
#  4. --keep keeps it.
#
# Each run is in an empty directory of its own on the build tree's file
# system (the demo creates ./pwb-demo.img).
#
# Environment (exported by Makefile.am's AM_TESTS_ENVIRONMENT):
# top_builddir. Runs 3 and 4 write pages the demo's threads rewrite while
# they are in flight (the demo's design), which a sanitizer build reports
# as a race: they are skipped there.
set -u

top_builddir=${top_builddir:-$(pwd)}
demo=$top_builddir/examples/pwb-demo
if [ ! -x "$demo" ]; then
	echo "FAIL: $demo was not built"
	exit 1
fi
mkdir -p "$top_builddir/tests" || exit 1
tmp=$(mktemp -d "$top_builddir/tests/tmp-demo.XXXXXX") || exit 1
pid=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# fresh NAME: an empty directory $tmp/NAME, made the current one.
fresh() {
	mkdir "$tmp/$1" && cd "$tmp/$1" || exit 1
}

# 1. Too big for the memory: refused with exit 2, no image.
fresh mib
"$demo" --mib 1000000 >out 2>err
rc=$?
cat err
[ $rc -eq 2 ] || fail "--mib 1000000 exited $rc, not 2"
grep -q -- "--mib 1000000 needs .* MiB of memory" err ||
	fail "--mib 1000000: no message naming the memory it needs"
[ -e pwb-demo.img ] && fail "--mib 1000000 left pwb-demo.img behind"

# 2. Refused by libpwb after the image exists: the image goes.
fresh policy
"$demo" --mib 16 --inodes 4 --policy no-such-policy >out 2>err
rc=$?
cat err
[ $rc -ne 0 ] || fail "--policy no-such-policy exited 0"
for p in inode-hash alloc-group least-loaded hint xarray shared-list region; do
	grep -q "unknown shard policy.*$p" err ||
		fail "the unknown-policy message does not list $p"
done
[ -e pwb-demo.img ] && fail "--policy no-such-policy left pwb-demo.img behind"

if [ -n "${PWB_SANITIZERS:-}" ]; then
	echo "SKIP 3, 4: the demo's runs are not checked under sanitizers" \
		"($PWB_SANITIZERS)"
	[ $fails -eq 0 ] && echo "PASS: 1, 2"
	[ $fails -eq 0 ]
	exit
fi

# 3. SIGTERM while the flushers are slowed down: each write takes 5 s,
#    so the 4 MiB run is still going when the signal comes (the image
#    exists by then).
fresh sigterm
PWB_FAULT=delay:every=1,delay_ms=5000 "$demo" --mib 4 --inodes 4 \
	--contexts 1 >out 2>err &
pid=$!
for i in $(seq 600); do
	grep -q "^4 inodes x" out 2>/dev/null && break
	sleep 0.1
done
[ -e pwb-demo.img ] || fail "SIGTERM: pwb-demo.img did not appear"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
cat out err
[ $rc -eq 143 ] || fail "SIGTERM: the demo exited $rc, not 143 (the signal)"
[ -e pwb-demo.img ] && fail "SIGTERM left pwb-demo.img behind"

# 4. --keep keeps the image, and the run passes.
fresh keep
"$demo" --mib 4 --inodes 4 --keep >out 2>err
rc=$?
[ $rc -eq 0 ] || { cat out err; fail "--keep: the demo exited $rc"; }
grep -q "kept ./pwb-demo.img" out || fail "--keep: no \"kept\" line"
[ -e pwb-demo.img ] || fail "--keep: pwb-demo.img was removed"

[ $fails -eq 0 ] || exit 1
echo "PASS: refusals, errors and SIGTERM leave no image; --keep keeps it"
exit 0
