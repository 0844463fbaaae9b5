// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * stripe.c - an example libpwb shard policy plugin: device stripes, round
 * robin over the writeback contexts
 *
 * The device is cut into stripes of "size" bytes (spec "stripe:size=64M";
 * suffix K, M, G or T; default 64M, a multiple of the bdi's page size).
 * An inode goes to the context of the stripe holding its first dirtied
 * page: stripe s to context s % nr_wb_ctx. Unlike alloc-group, the number
 * of stripes follows from the size, not from the device.
 *
 *	device:   | s0 | s1 | s2 | s3 | s4 | s5 | ...
 *	context:    0    1    2    0    1    2      (nr_wb_ctx = 3)
 *
 * Built out of tree with nothing but pkg-config (see Makefile and
 * README.md), loaded with pwb_policy_load("/abs/path/stripe.so"). It uses
 * only the public API of <pwb-policy.h>, so the same source also builds
 * inside the libpwb tree, as a test module.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pwb-policy.h>

#define STRIPE_DEFAULT_SIZE (64ull << 20)

/* One instance per bdi: written by init, then only read (select runs on
 * many threads at once, so it must not change shared state). */
struct stripe {
	uint64_t size;		/* bytes per stripe */
};

/* "123", "64K", "64M", "1G", "2T": 0, or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned int shift = 0;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return -EINVAL;
	}
	if (*s && s[1])
		return -EINVAL;
	if (shift && v > UINT64_MAX >> shift)
		return -EINVAL;
	*out = v << shift;
	return 0;
}

/* @args is NULL or "key=value[,key=value...]" (the library checked the
 * syntax); we know one key. */
static int stripe_init(struct pwb_bdi *bdi, const char *args, void **state)
{
	uint64_t size = STRIPE_DEFAULT_SIZE;
	struct pwb_bdi_info info;
	struct stripe *st;
	int ret;

	if (args) {
		char *copy = strdup(args), *save = NULL, *kv;

		if (!copy)
			return -ENOMEM;
		ret = 0;
		for (kv = strtok_r(copy, ",", &save); kv && !ret;
		     kv = strtok_r(NULL, ",", &save)) {
			if (!strncmp(kv, "size=", 5))
				ret = parse_size(kv + 5, &size);
			else
				ret = -EINVAL;	/* unknown key */
		}
		free(copy);
		if (ret)
			return ret;
	}
	/* init runs on a complete bdi: its geometry is there to check. */
	ret = pwb_bdi_info(bdi, &info);
	if (ret)
		return ret;
	if (!size || size % info.page_size)
		return -EINVAL;
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->size = size;
	*state = st;
	return 0;
}

static void stripe_fini(void *state)
{
	free(state);
}

/* Called by whichever thread dirties the inode first, with no libpwb lock
 * held: may ask the application where the page lives. */
static int stripe_select(void *state, const struct pwb_policy_inode *info,
			 unsigned int nr_wb_ctx)
{
	const struct stripe *st = state;
	uint64_t off;

	/*
	 * A page the application cannot map yet: place the inode by its
	 * number. (Returning the error instead would work too: the library
	 * then uses inode-hash itself, but counts it as a policy failure.)
	 */
	if (pwb_policy_map_page(info->inode, info->index, &off))
		return (int)(info->ino % nr_wb_ctx);
	return (int)((off / st->size) % nr_wb_ctx);
}

static const struct pwb_policy_ops stripe_ops = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "stripe",
	.init = stripe_init,
	.fini = stripe_fini,
	.select = stripe_select,
};

/* The one symbol libpwb looks up. We use nothing newer than ABI 1, which
 * every libpwb that loads plugins serves. */
const struct pwb_policy_ops *pwb_policy_entry(unsigned int abi_version)
{
	return abi_version >= 1 ? &stripe_ops : NULL;
}
