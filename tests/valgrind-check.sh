#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# valgrind-check.sh - every Check suite under valgrind memcheck ("make
# check-valgrind"). Check's fork mode is off (CK_FORK=no) so valgrind sees
# the tests themselves; tests/valgrind.supp names liburcu's never-joined
# call_rcu thread and nothing of libpwb's. A suite fails on any memcheck
# error or definite leak. Slow (tens of minutes); not part of CI.
#
# usage: valgrind-check.sh BUILDDIR SRCDIR [suite...]
set -u
builddir=$1
srcdir=$2
shift 2
if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIP: valgrind is not installed (apt-get install valgrind)"
	exit 77
fi
suites=${*:-$(cd "$builddir" && ls tests/check_* 2>/dev/null |
	grep -v '\.\(o\|log\|trs\)$')}
failed=0
for t in $suites; do
	log="$builddir/$t.valgrind.log"
	printf '%-28s ' "$t"
	if (cd "$builddir" && PWB_TEST_DIR="$builddir/tests" CK_FORK=no \
		PWB_TEST_UNDER_VALGRIND=1 \
		CK_DEFAULT_TIMEOUT=0 \
		./libtool --mode=execute valgrind --quiet --error-exitcode=99 \
		--leak-check=full --errors-for-leak-kinds=definite \
		--suppressions="$srcdir/tests/valgrind.supp" "./$t") \
		>"$log" 2>&1; then
		echo ok
	else
		echo "FAILED (see $log)"
		failed=$((failed + 1))
	fi
done
echo "$failed suite(s) failed under valgrind"
[ "$failed" -eq 0 ]
