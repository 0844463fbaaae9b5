// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-region.c - "region": one inode on many contexts
 *
 * What the 2026 version of the parallel-writeback series does for XFS: it
 * predicts, when a folio is dirtied, the allocation group it will be
 * written to, keeps per-group dirty state per inode and runs one worker
 * per group. Here the device is cut into regions of bytes=SIZE and every
 * dirty page goes, by the device offset map_page gives for it when it
 * becomes dirty, to the context owning its region:
 *
 *	device:   | region 0 | region 1 | region 2 | region 3 | ...
 *	context:       0          1          2          0        (nr = 3)
 *
 * so a database in one big file is written by as many flushers as there
 * are contexts, each in one sequential stream over its own regions. The
 * library keeps the per-inode, per-context state (region.c); this file
 * only answers "which context for this page".
 *
 * Arguments: bytes=SIZE (suffix K/M/G/T, a positive multiple of the page
 * size, at most the device size). Default: the device size divided by
 * the number of contexts, rounded down to 1 MiB (at least 1 MiB),
 * recomputed when the number changes, so that each context owns a region.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"

#include <stdlib.h>
#include <string.h>

#define REGION_ROUND (1ull << 20)

struct region {
	uint64_t capacity;	/* device bytes */
	uint64_t bytes;		/* uatomic: region size (default: tracks
				 * the number of contexts) */
	bool fixed;		/* bytes= given */
};

/*
 * The default region size for @nr contexts on @capacity bytes: rounded
 * down to 1 MiB, so that every context owns a region (the remainder, less
 * than nr MiB, makes one more, on context 0), and at least 1 MiB.
 */
static uint64_t default_bytes(uint64_t capacity, unsigned int nr)
{
	uint64_t per = capacity / (nr ? nr : 1) / REGION_ROUND * REGION_ROUND;

	return per ? per : REGION_ROUND;
}

static int region_arg(void *arg, const char *key, const char *val)
{
	uint64_t *bytes = arg;

	if (strcmp(key, "bytes"))
		return pwb__err(-EINVAL, "policy region: unknown argument "
					 "\"%s\" (known: bytes)",
				key);
	if (*bytes)
		return pwb__err(-EINVAL, "policy region: bytes given twice");
	if (pwb__parse_size(val, bytes) || !*bytes)
		return pwb__err(-EINVAL, "policy region: bytes=\"%s\" is not "
					 "a positive size (bytes, or with "
					 "suffix K, M, G or T)",
				val);
	return 0;
}

static int region_init(struct pwb_bdi *bdi, const char *args, void **state)
{
	uint64_t page = pwb__page_size(bdi), bytes = 0;
	struct region *r;
	unsigned int nr;
	int ret;

	ret = pwb__policy_args_each("region", args, region_arg, &bytes);
	if (ret)
		return ret;
	if (bytes && bytes % page)
		return pwb__err(-EINVAL, "policy region: bytes=%llu is not a "
					 "multiple of the page size %llu",
				(unsigned long long)bytes,
				(unsigned long long)page);
	if (bytes > bdi->capacity)
		return pwb__err(-EINVAL, "policy region: bytes=%llu is larger "
					 "than the device (%llu bytes)",
				(unsigned long long)bytes,
				(unsigned long long)bdi->capacity);
	r = malloc(sizeof(*r));
	if (!r)
		return pwb__err(-ENOMEM, "out of memory");
	r->capacity = bdi->capacity;
	r->fixed = bytes != 0;
	/* pwb_bdi_set_policy() builds a policy while the contexts may be
	 * re-sharded: the array is read in a read-side section, and a
	 * count that changes before the policy is installed is passed to
	 * region_nr_changed() then. */
	rcu_read_lock();
	nr = PWB__RCU_DEREF(bdi->ctxs)->nr;
	pwb__rcu_read_unlock();
	r->bytes = bytes ? bytes : default_bytes(bdi->capacity, nr);
	*state = r;
	return 0;
}

static void region_fini(void *state)
{
	free(state);
}

static void region_nr_changed(void *state, unsigned int nr)
{
	struct region *r = state;

	if (!r->fixed)
		pwb__aset(&r->bytes, default_bytes(r->capacity, nr));
}

/* Per page and per inode alike: the context of the page's region. */
static int region_select(void *state, const struct pwb_policy_inode *info,
			 unsigned int nr_wb_ctx)
{
	struct region *r = state;
	uint64_t off;
	int ret;

	/* The application's map_page: we hold no lock (see region.c). */
	ret = pwb__policy_map_page(info->inode, info->index, &off);
	if (ret)
		return ret;
	return (int)(off / pwb__aread(&r->bytes) % nr_wb_ctx);
}

const struct pwb_policy_ops pwb__policy_region = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "region",
	.init = region_init,
	.fini = region_fini,
	.select = region_select,
	.nr_wb_ctx_changed = region_nr_changed,
	.flags = PWB_POLICY_F_PER_PAGE,
	.select_page = region_select,
};
