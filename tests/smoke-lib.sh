# SPDX-License-Identifier: LGPL-2.1-or-later
#
# smoke-lib.sh - sourced by the smoke tests of the measuring tools
# (bench-smoke.sh, objd-bench-smoke.sh): a command's output kept in one
# file, its summary lines looked for there, failures counted. Set $out to
# a file of your own (removed by you, with $out.err) before the first
# call; $fails counts the failures.
fails=0

# smoke_start PROGRAM: exit 77 (skip) under a sanitizer build (the
# benches' writers rewrite page memory that may be in flight, which is
# the application's business and would be reported as a race; the code
# they drive has tests of its own there), 1 if PROGRAM was not built.
smoke_start() {
	if [ -n "${PWB_SANITIZERS:-}" ]; then
		echo "SKIP: the bench is not run under sanitizers" \
			"($PWB_SANITIZERS)"
		exit 77
	fi
	if [ ! -x "$1" ]; then
		echo "FAIL: $1 was not built"
		exit 1
	fi
}

# smoke_run NAME CMD...: CMD must exit 0; its stdout is kept in $out, its
# stderr in $out.err, both shown if it fails.
smoke_run() {
	smoke_name=$1
	shift
	if ! "$@" >"$out" 2>"$out.err"; then
		echo "FAIL $smoke_name: $* exited non-zero:"
		cat "$out" "$out.err"
		fails=$((fails + 1))
		return 1
	fi
	return 0
}

# smoke_expect NAME PATTERN: $out holds a line matching the extended regex.
smoke_expect() {
	if ! grep -Eq "$2" "$out"; then
		echo "FAIL $1: no line matching /$2/ in:"
		cat "$out" "$out.err"
		fails=$((fails + 1))
	fi
}
