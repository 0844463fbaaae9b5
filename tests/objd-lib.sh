# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-lib.sh - sourced by the tests of examples/pwb-objd: finds the
# daemon (exit 77 when it was not built or curl is missing), makes a work
# directory with a sparse image, starts and stops the daemon.
#
# After sourcing: $OBJD (the program), $W (work directory, removed at
# exit), $IMG, $SOCK; objd_start [options] sets $OBJD_PID (the
# environment's OBJD_TEST_ARGS, if set, go before the options); objd_stop sends
# SIGTERM and returns the daemon's exit status; objd_kill sends SIGKILL.

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
OBJD=$top_builddir/examples/pwb-objd/pwb-objd
if [ ! -x "$OBJD" ]; then
	echo "SKIP: $OBJD not built (libmicrohttpd or lmdb missing)"
	exit 77
fi
if ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: curl not installed"
	exit 77
fi
W=$(mktemp -d "${TMPDIR:-/var/tmp}/pwb-objd-test.XXXXXX") || exit 1
IMG=$W/img
SOCK=$W/objd.sock
OBJD_PID=
objd_cleanup() {
	if [ -n "$OBJD_PID" ]; then
		kill -KILL "$OBJD_PID" 2>/dev/null
		wait "$OBJD_PID" 2>/dev/null
	fi
	rm -rf "$W"
}
trap objd_cleanup EXIT
trap 'exit 1' INT TERM

# The daemon's sanitizer builds start slowly: wait up to 60 s for it.
# objd.out goes first, here: the background job's own truncation may come
# after the first grep, which then saw the last run's "serving" line and
# sent requests to a daemon not yet listening (curl: 000 under load).
objd_start() {
	rm -f "$W/ready" "$W/objd.out"
	# shellcheck disable=SC2086 # OBJD_TEST_ARGS: words, unquoted
	"$OBJD" --device "$IMG" --socket "$SOCK" ${OBJD_TEST_ARGS:-} "$@" \
		>"$W/objd.out" \
		2>>"$W/objd.err" &
	OBJD_PID=$!
	i=0
	while ! grep -q serving "$W/objd.out" 2>/dev/null; do
		if ! kill -0 "$OBJD_PID" 2>/dev/null; then
			echo "FAIL: the daemon did not start:"
			cat "$W/objd.err"
			wait "$OBJD_PID"
			OBJD_PID=
			return 1
		fi
		i=$((i + 1))
		if [ $i -gt 600 ]; then
			echo "FAIL: the daemon did not start in 60 s"
			return 1
		fi
		sleep 0.1
	done
	return 0
}

objd_stop() {
	kill -TERM "$OBJD_PID"
	wait "$OBJD_PID"
	rc=$?
	OBJD_PID=
	return $rc
}

objd_kill() {
	kill -KILL "$OBJD_PID"
	wait "$OBJD_PID" 2>/dev/null
	OBJD_PID=
}

# curl on the socket: ocurl PATH [curl options]
ocurl() {
	_path=$1
	shift
	curl -s --unix-socket "$SOCK" "$@" "http://objd$_path"
}

# check WHAT EXPECTED GOT: print ok or FAIL, counting failures in $fails.
fails=0
check() {
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1: expected [$2], got [$3]"
		fails=$((fails + 1))
	fi
}
