#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# objd-devices-test.sh - pwb-objd with --device twice: objects spread over
# both devices by their keys, every one readable and intact after a
# restart; the index refuses the devices in another order or one short;
# bucket options checked (bad input exits 2); per-bucket and per-device
# figures in /-/stats and /-/metrics.
. "${top_srcdir:-.}/tests/objd-lib.sh"
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: python3 not installed (reads /-/stats)"
	exit 77
fi

IMG2=$W/img2
truncate -s 256M "$IMG" "$IMG2"
code() { ocurl "$@" -o /dev/null -w '%{http_code}'; }
must_exit() { timeout -s KILL 60 "$OBJD" "$@"; }

# Bucket options: a bad value exits 2 with the reason.
bad() {
	must_exit --device "$IMG" "$@" >/dev/null 2>"$W/err.opt"
	check "$* exits 2" 2 $?
	[ -s "$W/err.opt" ]
	check "$*: says why" 0 $?
}
bad --bucket-weight photos
bad --bucket-weight photos=0
bad --bucket-weight photos=10001
bad --bucket-weight photos=1x
bad --bucket-weight photos=-5
bad --bucket-weight a/b=5
bad --bucket-weight photos=5 --bucket-weight photos=6
bad --bucket-rate photos=0
bad --bucket-rate photos=fast
bad --bucket-dirty 4K
bad --dirty-limit 64K
bad --max-buckets 0
bad --device "$IMG"
grep -q "are the same device" "$W/err.opt"
check "the same device twice: says so" 0 $?

objd_start --device "$IMG2" --bucket-weight photos=500 --max-buckets 3 ||
	exit 1
head -c 65536 /dev/urandom >"$W/obj"
i=0
while [ $i -lt 40 ]; do
	printf '%05d' $i | cat - "$W/obj" >"$W/o.$i"
	b=$((i % 2))
	[ "$(code "/b$b/k$i" -T "$W/o.$i")" = 201 ] || echo "PUT b$b/k$i failed"
	i=$((i + 1))
done
check "PUT into a third bucket (photos, b0, b1 made)" 507 \
	"$(code /more/x -T "$W/obj")"
ocurl /-/stats >"$W/stats"
# Both devices wrote (64 KiB objects are not inline).
for d in 0 1; do
	w=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["devices"][int(sys.argv[2])]["pwb"]["bytes_written"])' \
		"$W/stats" $d 2>/dev/null)
	[ "${w:-0}" -ge $((4 * 65536)) ]
	check "device $d holds objects" 0 $?
done
python3 -c 'import json, sys
b = json.load(open(sys.argv[1]))["buckets"]
assert b["b0"]["puts"] == 20 and b["b1"]["puts"] == 20, b
assert b["b0"]["bytes"] == 20 * 65541, b
assert b["photos"]["weight"] == 500 and b["b0"]["weight"] == 100, b
assert b["b0"]["dirtied_bytes"] >= 20 * 65541, b' "$W/stats"
check "per-bucket figures in /-/stats" 0 $?
m=$(ocurl /-/metrics)
check "per-bucket PUTs in /-/metrics" 'objd_bucket_puts_total{bucket="b1"} 20' \
	"$(echo "$m" | grep '^objd_bucket_puts_total{bucket="b1"}')"
check "per-bucket weight in /-/metrics" 'objd_bucket_weight{bucket="photos"} 500' \
	"$(echo "$m" | grep '^objd_bucket_weight{bucket="photos"}')"
objd_stop
check "SIGTERM: exit 0" 0 $?

# The devices in another order, or one short: refused, exit 2.
must_exit --device "$IMG2" --device "$IMG" --index "$IMG.index" \
	--socket "$SOCK" >/dev/null 2>"$W/err.order"
check "devices swapped: exit 2" 2 $?
grep -q "in the order the index records" "$W/err.order"
check "devices swapped: says so" 0 $?
must_exit --device "$IMG" --socket "$SOCK" >/dev/null 2>"$W/err.short"
check "one device short: exit 2" 2 $?
grep -q "objects of 2 devices, 1 given" "$W/err.short"
check "one device short: says so" 0 $?

# Restart: every object back, byte for byte, from its device.
objd_start --device "$IMG2" || exit 1
ok=0
i=0
while [ $i -lt 40 ]; do
	b=$((i % 2))
	ocurl "/b$b/k$i" -o "$W/got"
	cmp -s "$W/o.$i" "$W/got" && ok=$((ok + 1))
	i=$((i + 1))
done
check "all 40 objects read back after the restart" 40 $ok
check "verify after the restart" ok "$(ocurl '/b1/k39?verify' | cut -d' ' -f1)"
check "DELETE after the restart" 204 "$(code /b0/k0 -X DELETE)"
check "GET of the deleted one" 404 "$(code /b0/k0)"
check "replace after the restart" 204 "$(code /b1/k1 -T "$W/o.2")"
ocurl /b1/k1 -o "$W/got"
cmp -s "$W/o.2" "$W/got"; check "the replacement reads back" 0 $?
objd_stop
check "SIGTERM: exit 0" 0 $?
if [ -s "$W/objd.err" ]; then
	echo "daemon's stderr (last 20 lines):"
	tail -n 20 "$W/objd.err"
fi
[ $fails -eq 0 ]
