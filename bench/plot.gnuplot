# SPDX-License-Identifier: LGPL-2.1-or-later
# Throughput against writeback contexts, from pwb-bench's CSV:
#
#   bench/pwb-bench --workload rand4k --sweep 1,2,4,8 --csv > rand4k.csv
#   gnuplot -e "csv='rand4k.csv'; wl='rand4k'" bench/plot.gnuplot
#
# Writes <csv without .csv>-<wl>.png (override with out='file.png').
# CSV columns: workload,backend,contexts,depth,threads,bytes,libpwb,fio,
# kernel,unit,io_submitted,io_extents,secs. fio and kernel are -1 when
# they were not measured; such points are left out.

if (!exists("csv")) csv = "pwb-bench.csv"
if (!exists("wl")) wl = "seed"
if (!exists("out")) out = sprintf("%s-%s.png", csv[1:strlen(csv) - 4], wl)

set datafile separator ","
set terminal pngcairo size 900,560 noenhanced
set output out
set title sprintf("pwb-bench %s: throughput against writeback contexts", wl)
set xlabel "writeback contexts"
set ylabel "MiB/s (Mpages/s or Mcalls/s for null and markdirty)"
set logscale x 2
set grid
set key top left
set yrange [0:*]

# Rows of the chosen workload only; -1 means "not measured".
sel(col) = (strcol(1) eq wl && column(col) >= 0) ? column(col) : 1/0

plot csv every ::1 using 3:(sel(7)) with linespoints lw 2 pt 7 title "libpwb", \
     csv every ::1 using 3:(sel(8)) with linespoints lw 2 pt 5 title "fio (numjobs = contexts)", \
     csv every ::1 using 3:(sel(9)) with lines dt 2 lw 2 title "kernel page cache"
