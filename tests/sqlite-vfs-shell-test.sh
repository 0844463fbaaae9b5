#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# sqlite-vfs-shell-test.sh - the stock sqlite3 shell loads the "pwb" VFS
# from the build tree (.load examples/sqlite-vfs/.libs/libpwbvfs) and runs
# SQL on file:NAME?vfs=pwb&device=IMAGE in every journal mode; a second
# shell reads back what the first committed. Exit 77 without the shell,
# or under a sanitizer build (the stock shell cannot load an instrumented
# extension; tests/check_sqlite_vfs covers the same through the C API).
set -u

if [ -n "${PWB_SANITIZERS:-}" ]; then
	echo "SKIP: sanitizer build ($PWB_SANITIZERS): the stock sqlite3 shell cannot load an instrumented libpwbvfs.so"
	exit 77
fi
if ! command -v sqlite3 >/dev/null 2>&1; then
	echo "SKIP: no sqlite3 shell (sh tools/install-deps installs it)"
	exit 77
fi
builddir=${top_builddir:-.}
so=$builddir/examples/sqlite-vfs/.libs/libpwbvfs.so
if [ ! -f "$so" ]; then
	echo "FAIL: $so was not built"
	exit 1
fi
dir=${PWB_TEST_DIR:-/var/tmp}
img=$dir/sqlvfs-shell-$$.img
work=$(mktemp -d "${TMPDIR:-/tmp}/sqlvfs-shell.XXXXXX") || exit 1
cleanup() {
	rm -rf "$work"
	rm -f "$img" "$img".pwb-*
}
trap cleanup EXIT
cd "$work" || exit 1

fail() {
	echo "FAIL: $*"
	exit 1
}

# run SQL...: one shell, the extension loaded by its path without ".so".
run() {
	{
		echo ".bail on"
		echo ".load ${so%.so}"
		echo ".open file:shell.db?vfs=pwb&device=$img"
		cat
	} | sqlite3 2>&1
}

out=$(run <<'SQL'
.vfsname
PRAGMA page_size=4096;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO t SELECT i, printf('v%06d', i) FROM n;
COMMIT;
SELECT count(*) FROM t;
PRAGMA integrity_check;
SQL
)
[ "$out" = "pwb
20000
ok" ] || fail "first shell said: $out"
# The database lives in the image, not in the directory the shell ran in.
[ ! -e shell.db ] || fail "shell.db was created as a plain file"

for mode in delete truncate persist wal; do
	out=$(run <<SQL
PRAGMA journal_mode=$mode;
BEGIN;
UPDATE t SET v = v || '-$mode' WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
INSERT INTO t(v) VALUES('$mode');
COMMIT;
BEGIN;
DELETE FROM t;
ROLLBACK;
SELECT count(*) FROM t WHERE v = '$mode';
PRAGMA integrity_check;
SQL
)
	[ "$out" = "$mode
1
ok" ] || fail "journal_mode=$mode: $out"
done

# A new shell (a new process, nothing cached) sees all of it.
out=$(run <<'SQL'
VACUUM;
SELECT count(*) FROM t;
SELECT count(*) FROM t WHERE v LIKE '%-delete-truncate-persist-wal';
SELECT v FROM t WHERE id = 20004;
PRAGMA integrity_check;
SQL
)
[ "$out" = "18186
2598
wal
ok" ] || fail "reopen said: $out"
# libpwb's counters from inside the session: after a committed insert the
# bdi has written pages and flushed the device; one counter by name; an
# unknown name is an error, not an empty answer.
out=$(run <<'SQL'
INSERT INTO t(v) VALUES('stats');
PRAGMA pwb_stats = device_flushes;
SQL
)
case $out in
''|0|*[!0-9]*) fail "PRAGMA pwb_stats = device_flushes said: $out" ;;
esac
out=$(run <<'SQL'
INSERT INTO t(v) VALUES('stats');
PRAGMA pwb_stats;
SQL
)
echo "$out" | grep -Eq '^written_pages [1-9][0-9]*$' ||
	fail "PRAGMA pwb_stats has no written_pages above 0: $out"
echo "$out" | grep -Eq '^busy_bytes [0-9]+$' ||
	fail "PRAGMA pwb_stats has no busy_bytes: $out"
out=$(run <<'SQL' || true
PRAGMA pwb_stats = no_such_counter;
SQL
)
echo "$out" | grep -q 'no counter named "no_such_counter"' ||
	fail "an unknown counter said: $out"
echo "PASS: sqlite3 $(sqlite3 --version | cut -d' ' -f1) loaded $so"
