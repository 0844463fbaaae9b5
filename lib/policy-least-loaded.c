// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-least-loaded.c - "least-loaded": the context with the fewest
 * dirty pages takes the inode
 *
 * For skewed workloads, where hashing can put several hot inodes on one
 * context while others idle. The decision is made once, at the inode's
 * first dirtying, from each context's dirty_pages counter read lock-free
 * (uatomic) over the RCU-published context array: a snapshot that racing
 * dirtiers may make stale at once, which costs balance, never correctness.
 * The scan starts at the inode-hash context and moves on only for a
 * strictly smaller count, so equal loads (an idle bdi) spread inodes like
 * inode-hash does instead of piling them onto context 0.
 */
#include "base.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "bdi.h"

static int least_loaded_init(struct pwb_bdi *bdi, const char *args,
			     void **state)
{
	*state = bdi;
	return pwb__policy_no_args("least-loaded", args);
}

static int least_loaded_select(void *state,
			       const struct pwb_policy_inode *info,
			       unsigned int nr_wb_ctx)
{
	struct pwb_bdi *bdi = state;
	struct pwb__wb_ctx_array *arr;
	unsigned int i, k, n, start, best;
	uint64_t best_pages, pages;

	/* Nests inside the caller's read-side section, if any. */
	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	n = PWB__MIN(nr_wb_ctx, arr->nr);
	start = best = pwb__policy_hash(info->ino, n);
	best_pages = pwb__wb_dirty_pages(arr->ctx[best]);
	for (k = 1; k < n && best_pages; k++) {
		i = (start + k) % n;
		pages = pwb__wb_dirty_pages(arr->ctx[i]);
		if (pages < best_pages) {
			best = i;
			best_pages = pages;
		}
	}
	pwb__rcu_read_unlock();
	return (int)best;
}

const struct pwb_policy_ops pwb__policy_least_loaded = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "least-loaded",
	.init = least_loaded_init,
	.select = least_loaded_select,
};
