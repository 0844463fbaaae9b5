#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# man-check.sh - every exported function has a complete, installed man page
#
#  (a) the functions libpwb.so defines (nm -D --defined-only, version
#      suffixes dropped) == the pages tools/gen-man wrote to man/man3 of
#      the build tree;
#  (b) every page has NAME, SYNOPSIS, DESCRIPTION, CONTEXT, RETURN VALUE,
#      ERRORS and SEE ALSO, its comment had a Context: line, and groff
#      (where installed) formats it, and the hand-written pages, without a
#      warning;
#  (c) `make install-man3-pages install-man DESTDIR=<tmp>` installs a page
#      for every exported function, libpwb.7 and pwb-demo.1;
#  (d) when examples/pwb-objd was built: doc/pwb-objd.1 has an OPTIONS
#      entry "-x, --long" for every option `pwb-objd --help` prints, and
#      no other; every --long the page names (outside EXAMPLES, where
#      curl's are) is one of them; and (c) installed it as man1/pwb-objd.1
#      (groff checks it in (b), built or not);
#  and doc/api.md, the guide, names every page as `name(3)`.
#
# Environment (from Makefile.am): top_builddir, top_srcdir, MAKE. Exit 0
# if all hold, 1 otherwise, 77 if no shared library was built.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
MAKE=${MAKE:-make}
NM=${NM:-nm}
so=$top_builddir/lib/.libs/libpwb.so
pages=$top_builddir/man/man3

if [ ! -e "$so" ]; then
	echo "SKIP: no shared library at $so (configured with --disable-shared?)"
	exit 77
fi
tmp=$(mktemp -d "$top_builddir/tests/tmp-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

"$NM" -D --defined-only "$so" |
	awk 'NF >= 3 && $2 ~ /^[TW]$/ { sub(/@.*/, "", $3); print $3 }' |
	LC_ALL=C sort -u >"$tmp/so"
if [ ! -s "$tmp/so" ]; then
	echo "FAIL: $NM found no functions in $so"
	exit 1
fi
ls "$pages" 2>/dev/null | sed -n 's/\.3$//p' | LC_ALL=C sort -u >"$tmp/pages"
if ! cmp -s "$tmp/so" "$tmp/pages"; then
	echo "FAIL: exported functions and man pages differ:"
	LC_ALL=C comm -23 "$tmp/so" "$tmp/pages" | sed 's/^/  no page: /'
	LC_ALL=C comm -13 "$tmp/so" "$tmp/pages" | sed 's/^/  page of no export: /'
	fail=1
fi

for f in "$pages"/*.3; do
	[ -f "$f" ] || continue
	for sec in NAME SYNOPSIS DESCRIPTION CONTEXT "RETURN VALUE" ERRORS \
		"SEE ALSO"; do
		if ! grep -q "^\.SH $sec\$" "$f"; then
			echo "FAIL: ${f##*/} has no $sec section"
			fail=1
		fi
	done
	if grep -q '^\.\\" gen-man: ' "$f"; then
		echo "FAIL: ${f##*/}: $(sed -n 's/^\.\\" gen-man: //p' "$f")"
		fail=1
	fi
done
if command -v groff >/dev/null 2>&1; then
	for f in "$pages"/*.3 "$top_srcdir"/doc/*.[17]; do
		[ -f "$f" ] || continue
		w=$(groff -man -ww -z "$f" 2>&1)
		if [ -n "$w" ]; then
			echo "FAIL: groff warns about ${f##*/}: $w"
			fail=1
		fi
	done
else
	echo "note: groff not found, pages not formatted"
fi

# doc/api.md, the guide, points to every page.
for fn in $(cat "$tmp/so"); do
	if ! grep -q "\`$fn(3)\`" "$top_srcdir/doc/api.md"; then
		echo "FAIL: doc/api.md does not point to $fn(3)"
		fail=1
	fi
done

# (d) pwb-objd's options: --help prints "  -x, --long ARG  text" lines; the
# page's OPTIONS entries are the lines after .TP, '.BI "\-x, \-\-long " arg'.
# groff's \- is a plain - here and font escapes are dropped.
objd=$top_builddir/examples/pwb-objd/pwb-objd
objd_page=$top_srcdir/doc/pwb-objd.1
if [ -x "$objd" ]; then
	if ! "$objd" --help >"$tmp/objd-help" 2>&1; then
		echo "FAIL: pwb-objd --help failed:"
		cat "$tmp/objd-help"
		fail=1
	fi
	sed -n 's/^  *\(-[A-Za-z]\), \(--[a-z][a-z-]*\).*/\1, \2/p' \
		"$tmp/objd-help" | LC_ALL=C sort -u >"$tmp/objd-help-opts"
	sed 's/.*, //' "$tmp/objd-help-opts" | LC_ALL=C sort -u \
		>"$tmp/objd-help-long"
	sed 's/\\-/-/g; s/\\f[BIRP]//g' "$objd_page" >"$tmp/objd-page"
	awk '/^\.SH / { sec = $0 } sec == ".SH OPTIONS"' "$tmp/objd-page" |
		awk 'tag { print; tag = 0 } /^\.TP/ { tag = 1 }' \
		>"$tmp/objd-entries"
	sed -n 's/^\.[A-Z]*  *"\{0,1\}\(-[A-Za-z]\), \(--[a-z][a-z-]*\).*/\1, \2/p' \
		"$tmp/objd-entries" | LC_ALL=C sort -u >"$tmp/objd-page-opts"
	awk '/^\.SH / { sec = $0 } sec == ".SH EXAMPLES" { next }
		{ while (match($0, /--[a-z][a-z-]*/)) {
			print substr($0, RSTART, RLENGTH)
			$0 = substr($0, RSTART + RLENGTH)
		} }' "$tmp/objd-page" | LC_ALL=C sort -u >"$tmp/objd-page-long"
	if [ ! -s "$tmp/objd-help-opts" ]; then
		echo "FAIL: no \"-x, --long\" option lines in pwb-objd --help"
		fail=1
	fi
	if grep -v '^\.[A-Z]*  *"\{0,1\}-[A-Za-z], --[a-z]' \
		"$tmp/objd-entries" >"$tmp/objd-odd"; then
		echo "FAIL: doc/pwb-objd.1: OPTIONS entries not of the form" \
			"'-x, --long':"
		sed 's/^/  /' "$tmp/objd-odd"
		fail=1
	fi
	if ! cmp -s "$tmp/objd-help-opts" "$tmp/objd-page-opts"; then
		echo "FAIL: pwb-objd --help and the OPTIONS of doc/pwb-objd.1" \
			"differ:"
		LC_ALL=C comm -23 "$tmp/objd-help-opts" "$tmp/objd-page-opts" |
			sed 's/^/  in --help, not in the page: /'
		LC_ALL=C comm -13 "$tmp/objd-help-opts" "$tmp/objd-page-opts" |
			sed 's/^/  in the page, not in --help: /'
		fail=1
	fi
	LC_ALL=C comm -13 "$tmp/objd-help-long" "$tmp/objd-page-long" \
		>"$tmp/objd-unknown"
	if [ -s "$tmp/objd-unknown" ]; then
		echo "FAIL: doc/pwb-objd.1 names options pwb-objd --help does" \
			"not have:"
		sed 's/^/  /' "$tmp/objd-unknown"
		fail=1
	fi
fi

# (c) Clear the enclosing make's jobserver and command-line variables so
# that this is a plain install.
# shellcheck disable=SC2086 # $MAKE may carry options
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL $MAKE -C "$top_builddir" \
	install-man3-pages install-man DESTDIR="$tmp/stage" \
	>"$tmp/install.log" 2>&1; then
	echo "FAIL: installing the man pages failed:"
	cat "$tmp/install.log"
	exit 1
fi
find "$tmp/stage" -name '*.3' | sed 's|.*/||; s/\.3$//' |
	LC_ALL=C sort -u >"$tmp/installed"
if ! cmp -s "$tmp/so" "$tmp/installed"; then
	echo "FAIL: installed section 3 pages differ from the exports:"
	LC_ALL=C comm -23 "$tmp/so" "$tmp/installed" | sed 's/^/  not installed: /'
	fail=1
fi
for p in libpwb.7 pwb-demo.1; do
	if [ -z "$(find "$tmp/stage" -name "$p")" ]; then
		echo "FAIL: $p not installed"
		fail=1
	fi
done
if [ -x "$objd" ] &&
	[ -z "$(find "$tmp/stage" -path '*/man1/pwb-objd.1')" ]; then
	echo "FAIL: pwb-objd was built but man1/pwb-objd.1 was not installed"
	fail=1
fi

[ $fail -eq 0 ] || exit 1
echo "PASS: $(wc -l <"$tmp/so") exported functions, each with a complete" \
	"installed man page"
exit 0
