#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-fuzz.sh - build the libFuzzer harness with clang and run it.
#
# Usage: run-fuzz.sh SRCDIR BUILDDIR SECONDS
# The harness and the library sources are compiled together with
# -fsanitize=fuzzer,address,undefined; the corpus starts from
# tests/fuzz/corpus (kept in git: every crash found becomes a file there
# and is replayed by `make check` through fuzz-replay). Exit 0 when the
# time ran out with no crash; libFuzzer's status otherwise.
set -eu
src=$1
build=$2
secs=${3:-60}
CLANG=${CLANG:-clang}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "run-fuzz: $CLANG not found (sh tools/install-deps installs it)" >&2
	exit 1
fi
out=$build/tests/fuzz
mkdir -p "$out/work-corpus"
cp "$src"/tests/fuzz/corpus/* "$out/work-corpus/" 2>/dev/null || true
# shellcheck disable=SC2046
"$CLANG" -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fsanitize-recover=alignment \
	-DPWB_BUILDING_LIB -DHAVE_CONFIG_H -I"$build" -I"$src/include" \
	-I"$src/lib" $(pkg-config --cflags liburcu-bp liburing 2>/dev/null) \
	-o "$out/fuzz_api" "$src/tests/fuzz/fuzz_api.c" "$src"/lib/*.c \
	$(pkg-config --libs liburcu-bp liburcu-cds) \
	$(pkg-config --libs liburing 2>/dev/null) -pthread
PWB_TEST_DIR=${PWB_TEST_DIR:-$out}
export PWB_TEST_DIR
# liburcu-bp's header does an access UBSan calls misaligned (its own code):
# tests/ubsan.supp silences that header alone.
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$src/tests/ubsan.supp" \
ASAN_OPTIONS=detect_leaks=1 \
"$out/fuzz_api" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
	-artifact_prefix="$out/" -print_final_stats=1 "$out/work-corpus"
