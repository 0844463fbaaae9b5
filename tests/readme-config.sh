#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# readme-config.sh - README.md's configuration table names every field of
# struct pwb_bdi_config, and no other
#
# The fields come from include/pwb.h (the struct's declarations, comments
# dropped; a function pointer counts by its name); the table's fields are
# the back-quoted names in the first cell of each row under
# "| field | default | meaning |". Exit 0 if the two lists are equal.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
hdr=$top_srcdir/include/pwb.h
readme=$top_srcdir/README.md
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pwb-readme.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

awk '
/^struct pwb_bdi_config \{/ { in_struct = 1; next }
in_struct && /^\};/ { exit }
!in_struct { next }
{
	line = $0
	# drop comments, possibly spanning lines
	out = ""
	while (line != "") {
		if (in_comment) {
			p = index(line, "*/")
			if (!p) { line = ""; break }
			line = substr(line, p + 2)
			in_comment = 0
		} else {
			p = index(line, "/*")
			if (!p) { out = out line; break }
			out = out substr(line, 1, p - 1)
			line = substr(line, p + 2)
			in_comment = 1
		}
	}
	decl = decl " " out
	if (decl !~ /;/)
		next
	if (match(decl, /\(\*[A-Za-z_][A-Za-z0-9_]*\)/))
		name = substr(decl, RSTART + 2, RLENGTH - 3)
	else {
		sub(/[ \t]*(\[[^]]*\])?[ \t]*;.*/, "", decl)
		name = decl
		sub(/.*[^A-Za-z0-9_]/, "", name)
	}
	print name
	decl = ""
}' "$hdr" | LC_ALL=C sort >"$tmp/hdr"

awk -F'|' '
/^\| field \| default \| meaning \|/ { in_table = 1; next }
in_table && !/^\|/ { exit }
in_table && $2 !~ /^ *-+ *$/ {
	cell = $2
	while (match(cell, /`[A-Za-z_][A-Za-z0-9_]*`/)) {
		print substr(cell, RSTART + 1, RLENGTH - 2)
		cell = substr(cell, RSTART + RLENGTH)
	}
}' "$readme" | LC_ALL=C sort >"$tmp/readme"

if [ ! -s "$tmp/hdr" ] || [ ! -s "$tmp/readme" ]; then
	echo "FAIL: no fields found (pwb.h: $(wc -l <"$tmp/hdr"), README:" \
		"$(wc -l <"$tmp/readme"))"
	exit 1
fi
if ! cmp -s "$tmp/hdr" "$tmp/readme"; then
	echo "FAIL: README.md's config table and struct pwb_bdi_config differ:"
	LC_ALL=C comm -23 "$tmp/hdr" "$tmp/readme" | sed 's/^/  no row: /'
	LC_ALL=C comm -13 "$tmp/hdr" "$tmp/readme" | sed 's/^/  not a field: /'
	exit 1
fi
echo "PASS: README.md's config table lists the $(wc -l <"$tmp/hdr") fields" \
	"of struct pwb_bdi_config"
exit 0
