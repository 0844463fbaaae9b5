/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* domain-bench.h - pwb-bench's domain and multidev workloads
 * (bench/domain-bench.c). */
#ifndef PWB_DOMAIN_BENCH_H
#define PWB_DOMAIN_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pwb_bench_domain_opts {
	const char *dir;	/* domain: where the three images go */
	const char *shm_dir;	/* multidev: where the N images go */
	const char *backend;	/* of the fast bdis */
	unsigned int contexts;	/* of the fast bdis */
	double seconds;		/* measured part of a run, after 1 s */
	unsigned int runs;	/* figures are medians of this many */
	uint64_t dirty_limit;	/* domain: the budget of all three;
				 * multidev: each bdi's */
	uint64_t img_bytes;	/* each image */
	unsigned int devices;	/* multidev: bdis, 2..16 */
	bool verbose;		/* each run on stderr */
	/* multidev: what N threads of a loop that shares nothing give
	 * against one on this machine (the engine's scaling ceiling),
	 * measured in every run; NULL: not shown. */
	double (*cpu_scaling)(unsigned int threads);
};

/* Print the workload's table to @out. 0, or -errno on a failure (said on
 * stderr). multidev prints a skip line and returns 0 where the images'
 * file system refuses O_DIRECT. */
int pwb_bench_domain(FILE *out, const struct pwb_bench_domain_opts *o);
int pwb_bench_multidev(FILE *out, const struct pwb_bench_domain_opts *o);

#endif
