// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * bad-abi.c - a plugin built for a policy ABI newer than the library's
 *
 * pwb_policy_load() must refuse it with -EPROTONOSUPPORT, leave nothing
 * registered, and never call its functions.
 */
#include <stdlib.h>

#include "pwb-policy.h"

static int bad_abi_select(void *state, const struct pwb_policy_inode *info,
			  unsigned int nr_wb_ctx)
{
	abort();	/* must never be called */
}

static const struct pwb_policy_ops bad_abi_ops = {
	.abi_version = PWB_POLICY_ABI_VERSION + 1,
	.name = "bad-abi",
	.select = bad_abi_select,
};

const struct pwb_policy_ops *pwb_policy_entry(unsigned int abi_version)
{
	return &bad_abi_ops;
}
