/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tenant-bench.h - pwb-bench's tenants workload (bench/tenant-bench.c). */
#ifndef PWB_TENANT_BENCH_H
#define PWB_TENANT_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct pwb_bench_tenant_opts {
	const char *dir;	/* where the image goes */
	double seconds;		/* measured part of each phase, after 1 s */
	unsigned int runs;	/* figures are medians of this many */
	uint64_t dirty_limit;	/* the bdi's dirty_bytes */
	uint64_t img_bytes;	/* the image */
	bool verbose;		/* each run on stderr */
};

/* Print the workload's table to @out. 0, or -errno on a failure (said on
 * stderr). */
int pwb_bench_tenants(FILE *out, const struct pwb_bench_tenant_opts *o);

#endif
