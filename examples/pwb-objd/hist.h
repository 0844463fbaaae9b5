/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hist.h - lock-free latency histograms of pwb-objd (examples/pwb-objd)
 *
 * Each power of two of nanoseconds from 2^10 (1 us) to 2^40 (18 min) is a
 * range split in HIST_SUB equal buckets, so a bucket is at most 1/HIST_SUB
 * of its value wide: a percentile read from it (its upper bound) is at
 * most 12.5% above the true one. Below 1 us is bucket 0, 2^40 ns and up
 * the last. Any thread adds with relaxed atomic increments (no lock, no
 * per-thread state); a reader copies the buckets one by one, so a
 * snapshot taken while requests end may miss the newest few.
 */
#ifndef OBJD_HIST_H
#define OBJD_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 3
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MIN_SHIFT 10
#define HIST_MAX_SHIFT 40
#define HIST_NR (2 + (HIST_MAX_SHIFT - HIST_MIN_SHIFT) * HIST_SUB)

struct hist {
	uint64_t sum_ns;		/* atomic */
	uint64_t b[HIST_NR];		/* atomic */
};

/* Count one sample of @ns nanoseconds. Any thread; lock-free. */
void hist_add(struct hist *h, uint64_t ns);

/* Copy @h into @out (relaxed loads); the sample count is returned. */
uint64_t hist_snapshot(const struct hist *h, struct hist *out);

/* The bucket a sample of @ns goes to. */
unsigned int hist_index(uint64_t ns);

/* Bucket @i holds samples below this many ns (UINT64_MAX: the last). */
uint64_t hist_upper_ns(unsigned int i);

/* The quantile of @ppm millionths (500000: the median) of the @count
 * samples of snapshot @s, as the upper bound of its bucket, in ns; 0 when
 * there is no sample. */
uint64_t hist_quantile(const struct hist *s, uint64_t count,
		       unsigned int ppm);

#endif
