// SPDX-License-Identifier: LGPL-2.1-or-later
/* hist.c - lock-free latency histograms of pwb-objd (see hist.h) */
#include <string.h>

#include "hist.h"

unsigned int hist_index(uint64_t ns)
{
	unsigned int e;

	if (ns < (1ull << HIST_MIN_SHIFT))
		return 0;
	if (ns >= (1ull << HIST_MAX_SHIFT))
		return HIST_NR - 1;
	e = 63u - (unsigned int)__builtin_clzll(ns);
	/* The bits below the leading one pick the sub-bucket. */
	return 1 + (e - HIST_MIN_SHIFT) * HIST_SUB +
	       (unsigned int)((ns >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1));
}

uint64_t hist_upper_ns(unsigned int i)
{
	unsigned int e, s;

	if (i == 0)
		return 1ull << HIST_MIN_SHIFT;
	if (i >= HIST_NR - 1)
		return UINT64_MAX;
	e = HIST_MIN_SHIFT + (i - 1) / HIST_SUB;
	s = (i - 1) % HIST_SUB;
	return (uint64_t)(HIST_SUB + s + 1) << (e - HIST_SUB_BITS);
}

void hist_add(struct hist *h, uint64_t ns)
{
	__atomic_add_fetch(&h->b[hist_index(ns)], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->sum_ns, ns, __ATOMIC_RELAXED);
}

uint64_t hist_snapshot(const struct hist *h, struct hist *out)
{
	uint64_t n = 0;

	out->sum_ns = __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < HIST_NR; i++) {
		out->b[i] = __atomic_load_n(&h->b[i], __ATOMIC_RELAXED);
		n += out->b[i];
	}
	return n;
}

uint64_t hist_quantile(const struct hist *s, uint64_t count, unsigned int ppm)
{
	uint64_t rank, seen = 0;

	if (!count)
		return 0;
	/* The smallest value with at least @ppm millionths of the samples
	 * at or below it. */
	rank = (count * ppm + 999999) / 1000000;
	if (rank < 1)
		rank = 1;
	for (unsigned int i = 0; i < HIST_NR; i++) {
		seen += s->b[i];
		if (seen >= rank)
			return hist_upper_ns(i);
	}
	return UINT64_MAX;
}
