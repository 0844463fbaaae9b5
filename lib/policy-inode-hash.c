// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-inode-hash.c - "inode-hash": inode number modulo the contexts
 *
 * The parallel-writeback series' rule, and libpwb's default: no state, no
 * callbacks into the application, spreads sequential inode numbers evenly.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"

static int inode_hash_init(struct pwb_bdi *bdi, const char *args,
			   void **state)
{
	*state = NULL;
	return pwb__policy_no_args("inode-hash", args);
}

static int inode_hash_select(void *state, const struct pwb_policy_inode *info,
			     unsigned int nr_wb_ctx)
{
	return (int)pwb__policy_hash(info->ino, nr_wb_ctx);
}

const struct pwb_policy_ops pwb__policy_inode_hash = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "inode-hash",
	.init = inode_hash_init,
	.select = inode_hash_select,
};
