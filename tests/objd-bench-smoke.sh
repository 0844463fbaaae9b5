#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# objd-bench-smoke.sh - bench/objd-bench, the command issue 28's PUT and
# GET figures come from (bench/README.md), runs each of its modes to the
# end on tiny sizes and prints its summary lines: curl clients with the
# one-client run and the sinks, GETs alone (-G, once with --threads
# passed through to the daemon), and wrk clients (-w) where wrk is
# installed. A check of the measuring tool, not a measurement: no figure
# is judged.
#
# Environment (Makefile.am's AM_TESTS_ENVIRONMENT): top_builddir,
# top_srcdir, PWB_TEST_DIR, PWB_SANITIZERS. Exit 77 (skip) without curl,
# or under a sanitizer build (the daemon's own tests run there).
set -u

top_builddir=${top_builddir:-$(pwd)}
top_srcdir=${top_srcdir:-$top_builddir}
dir=${PWB_TEST_DIR:-/var/tmp}

. "$top_srcdir/tests/smoke-lib.sh"
smoke_start "$top_builddir/examples/pwb-objd/pwb-objd"
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
out=$(mktemp "$dir/objd-bench-smoke-XXXXXX") || exit 1
trap 'rm -f "$out" "$out.err"' EXIT
# objd-bench runs from the build tree, where it finds the daemon and the
# sink.
cd "$top_builddir" || exit 1

run() {
	name=$1
	shift
	smoke_run "$name" sh "$top_srcdir/bench/objd-bench" -d "$dir" "$@"
}

expect() {
	smoke_expect "$@"
}

num='[0-9]+(\.[0-9]+)?'
if run curl -c 2 -n 3 -r 1 -s 64K -1; then
	expect curl "^median: pwb-objd $num MiB/s, null I/O $num, fio $num"
	expect curl "^median: [0-9]+ PUTs/s, one client [0-9]+ PUTs/s"
	expect curl "^median: sink mhd $num MiB/s, raw $num"
	expect curl "^pwb-objd: .* [0-9]+ PUTs in [0-9]+ index commits"
fi
if run get -G -c 2 -n 3 -r 1 -s 256K; then
	expect get "^median: GET cold $num MiB/s, hot $num, fio read $num"
fi
if run get-threads -G -c 2 -n 3 -r 1 -s 256K -- --threads 2; then
	expect get-threads "daemon options: --threads 2"
	expect get-threads "^median: GET cold $num MiB/s"
fi
if command -v wrk >/dev/null && command -v python3 >/dev/null; then
	if run wrk -w -c 2 -n 3 -r 1 -s 4K -1; then
		expect wrk "^median: [0-9]+ PUTs/s, one client [0-9]+ PUTs/s"
		expect wrk "^median: epoll sink $num MiB/s"
	fi
else
	echo "note: no wrk (or python3): objd-bench -w not run"
fi
[ "$fails" -eq 0 ] || exit 1
echo "PASS: objd-bench ran in every mode"
