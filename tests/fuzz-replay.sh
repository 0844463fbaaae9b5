#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Replay the fuzz corpus (seeds and every crash the fuzzer ever found) as a
# regression test, without libFuzzer: tests/fuzz_replay runs each input.
set -eu
top_srcdir=${top_srcdir:-..}
top_builddir=${top_builddir:-.}
exec "$top_builddir/tests/fuzz_replay" "$top_srcdir"/tests/fuzz/corpus/*
