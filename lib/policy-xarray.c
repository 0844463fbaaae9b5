// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-xarray.c - "xarray": contiguous key ranges, passes in key order
 *
 * What Christoph Hellwig asked of the parallel-writeback series: keep dirty
 * inodes in an XArray rather than in "global-ish linked lists". Here each
 * inode gets a key, the device page of its first dirtied page (key=offset,
 * the default) or its inode number (key=ino); the key space is cut into
 * nr_wb_ctx contiguous ranges, one per context:
 *
 *	keys:     0 ............ space/3 ........... 2*space/3 ........ space
 *	context:  |----- 0 -------|-------- 1 --------|-------- 2 --------|
 *
 * and the policy sets PWB_POLICY_F_ORDERED, so each pass of a context holds
 * the inodes it picked in a radix tree (xarray.c) and writes them in key
 * order: with key=offset one context sweeps its region of the device from
 * low to high offsets, pass after pass, like an elevator. Expiry is not
 * changed by the order: which inodes a pass picks is still decided by
 * dirtied_when on the FIFO b_dirty list.
 *
 * Arguments: key=offset|ino; ino_range=N (key=ino only: inode numbers
 * 0 .. N-1 are split among the contexts, larger ones go to the last;
 * default 2^32). An inode whose first page cannot be mapped (key=offset)
 * gets key 0 and is placed by inode-hash.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_INO_RANGE (1ull << 32)

struct xarray_policy {
	bool by_ino;		/* key=ino */
	uint64_t space;		/* keys 0 .. space-1 are split */
	unsigned int page_shift;
};

struct xa_args {
	int by_ino;		/* -1: not given */
	uint64_t ino_range;	/* 0: not given */
};

static int xa_arg(void *arg, const char *key, const char *val)
{
	struct xa_args *a = arg;

	if (!strcmp(key, "key")) {
		if (a->by_ino >= 0)
			goto dup;
		if (!strcmp(val, "offset"))
			a->by_ino = 0;
		else if (!strcmp(val, "ino"))
			a->by_ino = 1;
		else
			return pwb__err(-EINVAL, "policy xarray: key=\"%s\" "
						 "is neither offset nor ino",
					val);
		return 0;
	}
	if (!strcmp(key, "ino_range")) {
		if (a->ino_range)
			goto dup;
		if (pwb__parse_size(val, &a->ino_range) || !a->ino_range ||
		    strpbrk(val, "kKmMgGtT"))
			return pwb__err(-EINVAL, "policy xarray: ino_range="
						 "\"%s\" is not a positive "
						 "number",
					val);
		return 0;
	}
	return pwb__err(-EINVAL, "policy xarray: unknown argument \"%s\" "
				 "(known: key, ino_range)",
			key);
dup:
	return pwb__err(-EINVAL, "policy xarray: %s given twice", key);
}

static int xarray_init(struct pwb_bdi *bdi, const char *args, void **state)
{
	struct xa_args a = { .by_ino = -1, .ino_range = 0 };
	struct xarray_policy *xp;
	int ret;

	ret = pwb__policy_args_each("xarray", args, xa_arg, &a);
	if (ret)
		return ret;
	if (a.ino_range && a.by_ino != 1)
		return pwb__err(-EINVAL, "policy xarray: ino_range needs "
					 "key=ino");
	xp = malloc(sizeof(*xp));
	if (!xp)
		return pwb__err(-ENOMEM, "out of memory");
	xp->by_ino = a.by_ino == 1;
	xp->page_shift = bdi->page_shift;
	xp->space = xp->by_ino ? (a.ino_range ? a.ino_range
					      : DEFAULT_INO_RANGE)
			       : bdi->capacity >> bdi->page_shift;
	*state = xp;
	return 0;
}

static void xarray_fini(void *state)
{
	free(state);
}

static int xarray_key(void *state, const struct pwb_policy_inode *info,
		      uint64_t *key)
{
	const struct xarray_policy *xp = state;
	uint64_t off;
	int ret;

	if (xp->by_ino) {
		*key = info->ino;
		return 0;
	}
	/* The application's map_page: no library lock is held here. */
	ret = pwb__policy_map_page(info->inode, info->index, &off);
	if (ret)
		return ret;
	*key = off >> xp->page_shift;
	return 0;
}

static int xarray_select(void *state, const struct pwb_policy_inode *info,
			 unsigned int nr_wb_ctx)
{
	const struct xarray_policy *xp = state;
	uint64_t key;

	if (xarray_key(state, info, &key))
		return (int)pwb__policy_hash(info->ino, nr_wb_ctx);
	if (key >= xp->space)
		return (int)nr_wb_ctx - 1;
	/* key * nr / space without overflow: nr <= PWB_MAX_WB_CTX. */
	return (int)((unsigned __int128)key * nr_wb_ctx / xp->space);
}

const struct pwb_policy_ops pwb__policy_xarray = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "xarray",
	.init = xarray_init,
	.fini = xarray_fini,
	.select = xarray_select,
	.flags = PWB_POLICY_F_ORDERED,
	.key = xarray_key,
};
