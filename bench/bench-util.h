/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-util.h - the small helpers every pwb-bench workload file uses
 * (bench/bench-util.c). Not thread-safe only where noted. */
#ifndef PWB_BENCH_UTIL_H
#define PWB_BENCH_UTIL_H

/* Seconds on CLOCK_MONOTONIC. Any thread. */
double bench_now_s(void);

/* qsort() comparison of two doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* The median of the @n (> 0) values of @v, which it sorts in place. */
double bench_median(double *v, unsigned int n);

#endif
