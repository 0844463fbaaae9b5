#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# abi-check.sh - the exported ABI is exactly what the sources say it is
#
# Three lists must be equal:
#   (a) the dynamic symbols libpwb.so defines (nm -D --defined-only, types
#       T/D/B/R, version suffixes and version node names dropped),
#   (b) the global names of lib/libpwb.sym,
#   (c) the names declared with PWB_API in include/pwb.h and
#       include/pwb-policy.h (the policy authors' header).
# Also: every exported symbol carries a version node; no node of
# libpwb.sym is newer than the package; PWB_VERSION_MAJOR/MINOR/PATCH in
# pwb.h equal the package version (config.h's PACKAGE_VERSION, else
# configure.ac's AC_INIT); debian/libpwb0.symbols, where the tree has it,
# is what debian/check-symbols derives from libpwb.sym; the TLS block
# (readelf's PT_TLS) is at most 512 bytes.
#
# Exit 0 if all hold, 1 otherwise (printing the differences), 77 if no
# shared library was built.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
top_builddir=${top_builddir:-$(pwd)}
NM=${NM:-nm}

so=$top_builddir/lib/.libs/libpwb.so
sym=$top_srcdir/lib/libpwb.sym
hdr=$top_srcdir/include/pwb.h
policy_hdr=$top_srcdir/include/pwb-policy.h

if [ ! -e "$so" ]; then
	echo "SKIP: no shared library at $so (configured with --disable-shared?)"
	exit 77
fi
if ! command -v "$NM" >/dev/null 2>&1; then
	echo "FAIL: $NM not found"
	exit 1
fi
for f in "$sym" "$hdr" "$policy_hdr"; do
	if [ ! -f "$f" ]; then
		echo "FAIL: $f is missing"
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pwb-abi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# (a) Defined dynamic symbols of code and data. Version nodes show up as
# type A symbols (and are dropped by the type filter); "name@@NODE" and
# "name@NODE" lose their suffix.
"$NM" -D --defined-only "$so" >"$tmp/nm.raw" || {
	echo "FAIL: $NM -D $so failed"
	exit 1
}
awk 'NF >= 3 && $2 ~ /^[TDBR]$/ { print $3 }' "$tmp/nm.raw" |
	sed 's/@.*//' | grep -v '^PWB_[0-9]' | LC_ALL=C sort -u >"$tmp/so"

# (b) Global names in the version script: drop comments, then collect
# "name;" between "global:" and "local:" (or the end of the node).
sed -e 's://.*$::' "$sym" |
	awk '
	{
		line = $0
		out = ""
		# strip /* ... */ comments, possibly spanning lines
		while (line != "") {
			if (incomment) {
				p = index(line, "*/")
				if (!p) { line = ""; break }
				line = substr(line, p + 2)
				incomment = 0
			} else {
				p = index(line, "/*")
				if (!p) { out = out line; line = ""; break }
				out = out substr(line, 1, p - 1)
				line = substr(line, p + 2)
				incomment = 1
			}
		}
		print out
	}' |
	awk '
	/\{/ { innode = 1; global = 1; sub(/.*\{/, "") }
	/global:/ { global = 1; sub(/.*global:/, "") }
	/local:/ { global = 0; next }
	/\}/ { innode = 0; global = 0; next }
	innode && global {
		gsub(/[ \t]/, "")
		n = split($0, parts, ";")
		for (i = 1; i <= n; i++)
			if (parts[i] ~ /^[A-Za-z_][A-Za-z0-9_]*$/)
				print parts[i]
	}' | LC_ALL=C sort -u >"$tmp/sym"

# (c) PWB_API declarations: the identifier before the first "(" (a
# function) or before ";", "=" or "[" (an object) on the PWB_API line.
sed -n '/^[[:space:]]*PWB_API[[:space:]]/{
	s/(.*//
	s/[[:space:]]*[;=[].*//
	s/.*[^A-Za-z0-9_]//
	p
}' "$hdr" "$policy_hdr" | LC_ALL=C sort -u >"$tmp/hdr"

for f in so sym hdr; do
	if [ ! -s "$tmp/$f" ]; then
		echo "FAIL: found no symbols in the $f list"
		fail=1
	fi
done

compare() { # label-a file-a label-b file-b
	if ! cmp -s "$2" "$4"; then
		echo "FAIL: $1 and $3 differ:"
		LC_ALL=C comm -23 "$2" "$4" | sed "s/^/  only in $1: /"
		LC_ALL=C comm -13 "$2" "$4" | sed "s/^/  only in $3: /"
		fail=1
	fi
}
compare "libpwb.so exports" "$tmp/so" "libpwb.sym" "$tmp/sym"
compare "libpwb.sym" "$tmp/sym" "PWB_API in the headers" "$tmp/hdr"
compare "libpwb.so exports" "$tmp/so" "PWB_API in the headers" "$tmp/hdr"

# Every export is versioned (only checkable when nm prints versions).
if grep -q '@' "$tmp/nm.raw"; then
	unversioned=$(awk 'NF >= 3 && $2 ~ /^[TDBR]$/ && $3 !~ /@/ { print $3 }' \
		"$tmp/nm.raw")
	if [ -n "$unversioned" ]; then
		echo "FAIL: exported without a version node:"
		echo "$unversioned" | sed 's/^/  /'
		fail=1
	fi
fi

# Versions: pwb.h against the package.
hver() {
	sed -n "s/^#define[[:space:]]*PWB_VERSION_$1[[:space:]]*\([0-9][0-9]*\).*/\1/p" "$hdr"
}
hdr_version="$(hver MAJOR).$(hver MINOR).$(hver PATCH)"
pkg_version=
if [ -f "$top_builddir/config.h" ]; then
	pkg_version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
		"$top_builddir/config.h")
fi
if [ -z "$pkg_version" ] && [ -f "$top_srcdir/configure.ac" ]; then
	pkg_version=$(sed -n 's/^AC_INIT(\[[^]]*\],[[:space:]]*\[\([^]]*\)\].*/\1/p' \
		"$top_srcdir/configure.ac" | head -n 1)
fi
if [ -z "$pkg_version" ]; then
	echo "FAIL: cannot find the package version"
	fail=1
elif [ "$hdr_version" != "$pkg_version" ]; then
	echo "FAIL: pwb.h says version $hdr_version, the package is $pkg_version"
	fail=1
fi

# No version node may be newer than the release (PWB_<major>.<minor> or
# PWB_<major>.<minor>.<patch>).
major=$(hver MAJOR)
minor=$(hver MINOR)
patch=$(hver PATCH)
# shellcheck disable=SC2013 # node names are single words
for node in $(sed -n 's/^[[:space:]]*\(PWB_[0-9][0-9.]*\)[[:space:]]*{.*/\1/p' "$sym"); do
	v=${node#PWB_}
	nmaj=${v%%.*}
	rest=${v#*.}
	nmin=${rest%%.*}
	npat=0
	[ "$rest" != "$nmin" ] && npat=${rest#*.}
	if [ "$nmaj" -gt "$major" ] ||
		{ [ "$nmaj" -eq "$major" ] && [ "$nmin" -gt "$minor" ]; } ||
		{ [ "$nmaj" -eq "$major" ] && [ "$nmin" -eq "$minor" ] &&
			[ "$npat" -gt "$patch" ]; }; then
		echo "FAIL: libpwb.sym node $node is newer than version $hdr_version"
		fail=1
	fi
done

# The Debian symbols file follows libpwb.sym (a new export that misses it
# fails only the package build, late in CI; here it fails make check).
deb_sym=$top_srcdir/debian/libpwb0.symbols
if [ -f "$deb_sym" ] && [ -f "$top_srcdir/debian/check-symbols" ] &&
	command -v perl >/dev/null 2>&1; then
	if ! sh "$top_srcdir/debian/check-symbols" "$sym" "$deb_sym" \
		>"$tmp/deb.out" 2>&1; then
		echo "FAIL: debian/libpwb0.symbols does not follow libpwb.sym:"
		sed 's/^/  /' "$tmp/deb.out"
		fail=1
	fi
fi

# The library's TLS block fits the static TLS room a dlopen()ed library
# gets: PWB__TLS_FAST (initial-exec) puts the whole block there, and
# glibc's surplus for dlopen() is about 512 bytes by default (the SQLite
# extension is loaded that way; 1,880 bytes made the sqlite3 shell fail
# with "cannot allocate memory in static TLS block").
READELF=${READELF:-readelf}
tls_max=512
if command -v "$READELF" >/dev/null 2>&1; then
	tls=$("$READELF" -lW "$so" | awk '$1 == "TLS" { print $6 }')
	if [ -n "$tls" ] && [ $((tls)) -gt $tls_max ]; then
		echo "FAIL: libpwb.so's TLS block is $((tls)) bytes, more than" \
			"the $tls_max a dlopen()ed library can count on"
		fail=1
	fi
fi

if [ $fail -ne 0 ]; then
	exit 1
fi
echo "PASS: $(wc -l <"$tmp/so") exported symbols == libpwb.sym == PWB_API" \
	"declarations in pwb.h and pwb-policy.h; version $hdr_version"
exit 0
