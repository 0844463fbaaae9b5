// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-alloc-group.c - "alloc-group": one region of the device, one thread
 *
 * What XFS developers asked of the parallel-writeback series (and what its
 * v2 did for XFS): cut the device into allocation groups and give each
 * group to one context, so that the writes of a region come from one
 * thread, in order, instead of interleaving with other threads' writes to
 * the same region.
 *
 *	device:  | group 0 | group 1 | group 2 | group 3 | group 4 | ...
 *	context:     0         1         2         0         1       (nr = 3)
 *
 * Arguments: groups=N (N groups of equal size, rounded up to whole pages)
 * or ag_size=SIZE (bytes, suffix K/M/G/T; the last group may be short);
 * not both. Default: groups=64, or one group per page on a device of fewer
 * than 64 pages. An inode belongs to the group holding the device offset of
 * its first dirtied page, found through the application's map_page; a hint
 * (pwb_inode_set_wb_hint) names the context directly and wins; an inode
 * whose first page cannot be mapped is placed by inode-hash.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"
#include "inode.h"
#include "space.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_GROUPS 64

struct alloc_group {
	uint64_t ag_size;	/* bytes per group, a page multiple */
	uint64_t groups;	/* number of groups */
};

struct ag_args {
	uint64_t groups;	/* 0: not given */
	uint64_t ag_size;	/* 0: not given */
};

static int ag_arg(void *arg, const char *key, const char *val)
{
	struct ag_args *a = arg;
	uint64_t v;

	if (!strcmp(key, "groups")) {
		if (a->groups)
			goto dup;
		if (pwb__parse_size(val, &v) || !v || strpbrk(val, "kKmMgGtT"))
			return pwb__err(-EINVAL, "policy alloc-group: groups="
						 "\"%s\" is not a positive "
						 "number",
					val);
		a->groups = v;
		return 0;
	}
	if (!strcmp(key, "ag_size")) {
		if (a->ag_size)
			goto dup;
		if (pwb__parse_size(val, &v) || !v)
			return pwb__err(-EINVAL, "policy alloc-group: ag_size="
						 "\"%s\" is not a positive "
						 "size (bytes, or with suffix "
						 "K, M, G or T)",
					val);
		a->ag_size = v;
		return 0;
	}
	return pwb__err(-EINVAL, "policy alloc-group: unknown argument "
				 "\"%s\" (known: groups, ag_size)",
			key);
dup:
	return pwb__err(-EINVAL, "policy alloc-group: %s given twice", key);
}

static int alloc_group_init(struct pwb_bdi *bdi, const char *args,
			    void **state)
{
	uint64_t page = pwb__page_size(bdi), pages = bdi->capacity / page;
	struct ag_args a = { 0, 0 };
	struct alloc_group *ag;
	int ret;

	ret = pwb__policy_args_each("alloc-group", args, ag_arg, &a);
	if (ret)
		return ret;
	if (a.groups && a.ag_size)
		return pwb__err(-EINVAL, "policy alloc-group: give groups or "
					 "ag_size, not both");
	if (a.ag_size && a.ag_size % page)
		return pwb__err(-EINVAL, "policy alloc-group: ag_size %llu is "
					 "not a multiple of the page size %llu",
				(unsigned long long)a.ag_size,
				(unsigned long long)page);
	if (a.groups > pages)
		return pwb__err(-EINVAL, "policy alloc-group: %llu groups on "
					 "a device of %llu pages",
				(unsigned long long)a.groups,
				(unsigned long long)pages);
	ag = malloc(sizeof(*ag));
	if (!ag)
		return pwb__err(-ENOMEM, "out of memory");
	if (a.ag_size) {
		ag->ag_size = a.ag_size;
	} else {
		uint64_t groups = a.groups ? a.groups
					   : PWB__MIN(DEFAULT_GROUPS, pages);
		uint64_t per = (pages + groups - 1) / groups;

		ag->ag_size = per * page;
	}
	ag->groups = (bdi->capacity + ag->ag_size - 1) / ag->ag_size;
	*state = ag;
	return 0;
}

static void alloc_group_fini(void *state)
{
	free(state);
}

static int alloc_group_select(void *state, const struct pwb_policy_inode *info,
			      unsigned int nr_wb_ctx)
{
	const struct alloc_group *ag = state;
	uint64_t off, group;

	if (info->hint >= 0)
		return (int)((unsigned int)info->hint % nr_wb_ctx);
	/* Allocator mode: the allocator's own group of the page (or the
	 * inode's home group); the context owning it is group % contexts. */
	if (pwb__inode_app(info->inode)->space)
		return (int)(pwb__space_inode_group(pwb__inode_app(info->inode),
						    info->index) %
			     nr_wb_ctx);
	/* The application's map_page: we hold no lock (see inode.c). */
	if (pwb__policy_map_page(info->inode, info->index, &off))
		return (int)pwb__policy_hash(info->ino, nr_wb_ctx);
	group = PWB__MIN(off / ag->ag_size, ag->groups - 1);
	return (int)(group % nr_wb_ctx);
}

const struct pwb_policy_ops pwb__policy_alloc_group = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "alloc-group",
	.init = alloc_group_init,
	.fini = alloc_group_fini,
	.select = alloc_group_select,
};
