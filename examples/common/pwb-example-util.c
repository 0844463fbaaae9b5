// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pwb-example-util.c - helpers the example programs share (see
 * pwb-example-util.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "pwb-example-util.h"

int pwbex_parse_size(const char *s, uint64_t *out)
{
	unsigned int shift = 0;
	uint64_t v = 0;

	/* By hand rather than strtoull(), which takes blanks, a sign (and
	 * negates "-1" into a huge value) and, with base 0, hex and octal. */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	switch (*s) {
	case 'k': case 'K': shift = 10; s++; break;
	case 'm': case 'M': shift = 20; s++; break;
	case 'g': case 'G': shift = 30; s++; break;
	default: break;
	}
	if (*s)
		return -EINVAL;
	/* A value the suffix would push past 64 bits is refused, not
	 * wrapped (17179869184G would become 0). */
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int pwbex_inode_extents(struct pwb_inode *inode, struct pwb_extent **extp,
			size_t *nrp)
{
	struct pwb_extent *x = NULL;
	size_t total = 0, cap = 0;
	int ret;

	for (;;) {
		ret = pwb_inode_extents(inode, x, cap, &total);
		if (ret) {
			free(x);
			return ret;
		}
		if (total <= cap)
			break;
		/* It has more than we made room for: count again, with some
		 * slack for extents a concurrent writeback may add. */
		free(x);
		cap = total + 8;
		x = malloc(cap * sizeof(*x));
		if (!x)
			return -ENOMEM;
	}
	if (!total) {
		free(x);
		x = NULL;
	}
	*extp = x;
	*nrp = total;
	return 0;
}
