#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# bench-smoke.sh - bench/pwb-bench runs every workload to the end and
# prints its table, its JSON and its CSV. A correctness check of the
# measuring tool the README documents, not a measurement: the sizes are
# tiny and no figure is judged (speed is read from the bench by hand; see
# bench/README.md).
#
# Environment (exported by Makefile.am's AM_TESTS_ENVIRONMENT):
# top_builddir, top_srcdir, PWB_TEST_DIR. Exit 77 (skip) under a
# sanitizer build (tests/smoke-lib.sh, smoke_start, says why).
set -u

top_builddir=${top_builddir:-$(pwd)}
dir=${PWB_TEST_DIR:-/var/tmp}
bench=$top_builddir/bench/pwb-bench

. "${top_srcdir:-$top_builddir}/tests/smoke-lib.sh"
smoke_start "$bench"
out=$(mktemp "$dir/bench-smoke-XXXXXX") || exit 1
trap 'rm -f "$out" "$out.err"' EXIT

# run NAME ARGS...: the bench must exit 0; its stdout is kept in $out.
run() {
	local name=$1
	shift
	smoke_run "$name" "$bench" --dir "$dir" "$@"
}

expect() {
	smoke_expect "$@"
}

backend=io_uring
if ! "$bench" --dir "$dir" --workload seed --size 4M --runs 1 --no-fio \
	--no-kernel >"$out" 2>"$out.err"; then
	if grep -q io_uring "$out.err"; then
		echo "note: io_uring refused here, the I/O workloads use psync:"
		cat "$out.err"
		backend=psync
	fi
fi

# The I/O workloads against fio (when installed) and the kernel.
small=(--backend "$backend" --size 8M --threads 2 --inodes 4 --runs 1)
for wl in seed rand4k skew fsync; do
	run "$wl" --workload "$wl" "${small[@]}" &&
		expect "$wl" "^$wl +$backend +2 "
done
# A sweep, as CSV: a header and one row per count.
if run sweep --workload rand4k "${small[@]}" --sweep 1,2 --csv; then
	expect sweep "^workload,backend,contexts,"
	expect sweep "^rand4k,$backend,1,"
	expect sweep "^rand4k,$backend,2,"
fi
# One file on 1 and 2 contexts under "region", both patterns; the per-
# context split is printed with -v.
if run one-file --workload one-file "${small[@]}" --sweep 1,2 -v; then
	for wl in one-file-seq one-file-rand; do
		expect one-file "^$wl +$backend +1 "
		expect one-file "^$wl +$backend +2 .*scaling vs 1 ctx"
	done
	expect one-file "region:bytes=[0-9]+M +written pages per context: [1-9][0-9]* [1-9]"
fi
# The engine alone, and the tracking memory, as JSON.
if run engine --workload markdirty,null,memory --null-pages 65536 \
	--md-pages 65536 --mem-inodes 1000 --repeat 1 --json; then
	for wl in markdirty null memory; do
		expect engine "\"workload\": \"$wl\""
	done
fi
# The engine's own speed (issue 29), printed on every run so that a
# regression shows in the log the day it lands; not judged (a shared
# machine's figures are noise to a threshold). Compare with bench/README.md
# ("Engine figures") or with an older build run beside this one.
echo "engine figures (printed, not judged; load $(cut -d' ' -f1-3 /proc/loadavg)):"
for args in "--workload null --repeat 3" \
	"--workload markdirty --repeat 3" \
	"--workload rand4k --backend null --size 64M --contexts 1 --runs 3 --no-fio --no-kernel"; do
	# shellcheck disable=SC2086
	if run engine-figures $args; then
		expect engine-figures "^(null|markdirty|rand4k) +null "
		grep -E "^(null|markdirty|rand4k) +null " "$out" | sed 's/^/  /'
	fi
done
# Throttling: a short run (the first 5 s are warm-up). Not the shortest it
# allows, 6 s: the per-second samples are counted in sampler ticks, and on a
# loaded machine (make distcheck) a tick late left 5 samples and a failure.
if run throttle --workload throttle --backend "$backend" --size 16M \
	--dirty-limit 8M --duration 8 --runs 1 --no-fio; then
	expect throttle "^throttle +$backend "
	expect throttle "w/d [0-9.]+ \(>=0.9\)"
fi

# Memory domains: three bdis, one slowed by the delay fault, in a domain
# and with separate budgets; N bdis in /dev/shm (a skip line where tmpfs
# refuses O_DIRECT).
if run domain --workload domain --backend "$backend" --size 8M \
	--duration 0.5 --runs 1; then
	expect domain "^domain +[0-9.]+ +[0-9.]+ .*fast x[0-9.]+ vs alone"
	expect domain "^separate +[0-9.]+ "
fi
if run multidev --workload multidev --backend "$backend" --size 8M \
	--dirty-limit 1M --duration 0.5 --runs 1 --devices 2; then
	expect multidev "^(one domain .*x[0-9.]+ vs separate|multidev: skipped)"
fi

# The write-ahead rule's cost: transactions with and without it.
if run wal --workload wal --backend "$backend" --size 8M --threads 2 \
	--duration 1 --runs 1; then
	expect wal "^wal +$backend +2 "
	expect wal "enforced/plain [0-9.]+ \(>=0.8"
fi

# The data path (issue 12): library-owned pages against the kernel's page
# cache and fio, reclaim on 1 and 2 contexts; frag needs the allocator
# (it says "skipped" without one, and prints no row).
if run datapath \
	--workload pcache-write,pcache-read,pcache-uncached,pcache-seqread,reclaim \
	--backend "$backend" --size 8M --threads 2 --runs 1 --repeat 1; then
	for wl in pcache-write pcache-read pcache-uncached pcache-seqread; do
		expect datapath "^$wl +$backend +2 "
	done
	expect datapath "^reclaim +null +1 "
	expect datapath "^reclaim +null +2 .*x[0-9.]+ vs 1 ctx"
fi
if run frag --workload frag --backend "$backend" --size 8M --threads 2 \
	--runs 1 && grep -q "^frag " "$out"; then
	expect frag "^frag +$backend +1 .*extents per inode"
	expect frag "^frag +$backend +2 .*extents per inode"
fi
# sqlite: only in a bench built with sqlite3 (it says so otherwise).
if run sqlite --workload sqlite --runs 1 --duration 0.2 &&
	! grep -q "built without sqlite3" "$out.err"; then
	expect sqlite "^WAL +NORMAL +[0-9]+ +[0-9]+ +[0-9.]+ "
fi

# bench/hit-scale: a cached pwb_read()'s own cost, 1 and 2 threads, on
# an image file of its own (the null backend writes nothing to it).
img=$(mktemp "$dir/hit-scale-XXXXXX") || exit 1
truncate -s 16M "$img"
for n in 1 2; do
	if smoke_run hit-scale "$top_builddir/bench/hit-scale" "$img" $n 1000
	then
		expect hit-scale "^hit-scale: $n threads?, 1000 calls each: pwb_read .* [0-9.]+ ns/call, memcpy .* [0-9.]+ ns/call"
	fi
done
rm -f "$img"

[ $fails -eq 0 ] || exit 1
echo "pwb-bench ran every workload"
exit 0
