// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * missing-entry.c - a shared object that is not a policy plugin: a valid
 * ops table, but no pwb_policy_entry symbol (a misspelt one instead)
 *
 * pwb_policy_load() must refuse it with -ENOSYS and unload it.
 */
#include "pwb-policy.h"

const struct pwb_policy_ops *pwb_policy_entry_v1(unsigned int abi_version);

static int missing_entry_select(void *state,
				const struct pwb_policy_inode *info,
				unsigned int nr_wb_ctx)
{
	return 0;
}

static const struct pwb_policy_ops missing_entry_ops = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "missing-entry",
	.select = missing_entry_select,
};

const struct pwb_policy_ops *pwb_policy_entry_v1(unsigned int abi_version)
{
	return &missing_entry_ops;
}
