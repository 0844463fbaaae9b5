/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sqlite-bench.h - pwb-bench's sqlite workload (bench/sqlite-bench.c). */
#ifndef PWB_SQLITE_BENCH_H
#define PWB_SQLITE_BENCH_H

#include <stdbool.h>
#include <stdio.h>

/* Print the pwb/unix table to @out; images and files go in @dir. Return 0
 * if every ratio met its goal, 1 if one did not, -1 on an error. */
int pwb_bench_sqlite(FILE *out, const char *dir, double seconds,
		     unsigned int runs);

/* The bulk-insert table (sqlite-bulk): large transactions with one and three
 * indexes, DELETE and WAL, without and with a busy loop per CPU beside
 * them. Same return values. */
int pwb_bench_sqlite_bulk(FILE *out, const char *dir, unsigned int runs);

#endif
