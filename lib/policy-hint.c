// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-hint.c - "hint": the application names each inode's context
 *
 * In the spirit of a file system that knows its own geometry and tells
 * writeback which thread should take an inode (Amir Goldstein's request in
 * the parallel-writeback discussion). The application calls
 * pwb_inode_set_wb_hint() before the first dirtying; inodes without a hint
 * fall back to inode-hash. A hint set for a larger context count than the
 * bdi now has (after live re-sharding) is taken modulo the count.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"

static int hint_init(struct pwb_bdi *bdi, const char *args, void **state)
{
	*state = NULL;
	return pwb__policy_no_args("hint", args);
}

static int hint_select(void *state, const struct pwb_policy_inode *info,
		       unsigned int nr_wb_ctx)
{
	if (info->hint >= 0)
		return (int)((unsigned int)info->hint % nr_wb_ctx);
	return (int)pwb__policy_hash(info->ino, nr_wb_ctx);
}

const struct pwb_policy_ops pwb__policy_hint = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "hint",
	.init = hint_init,
	.select = hint_select,
};
