// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * bad-select.c - a loadable plugin whose select() misbehaves on purpose
 *
 * Spec "bad-select:mode=range" (or no arguments) answers nr_wb_ctx + 3,
 * out of range; "bad-select:mode=error" answers -EIO; any other argument
 * fails init with -EINVAL. Each placement it botches must go to the
 * inode-hash context, be counted, and leave the bdi working.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-policy.h"

enum mode { MODE_RANGE = 1, MODE_ERROR = 2 };

static int bad_select_init(struct pwb_bdi *bdi, const char *args,
			   void **state)
{
	if (!args || !strcmp(args, "mode=range"))
		*state = (void *)(uintptr_t)MODE_RANGE;
	else if (!strcmp(args, "mode=error"))
		*state = (void *)(uintptr_t)MODE_ERROR;
	else
		return -EINVAL;
	return 0;
}

static int bad_select_select(void *state, const struct pwb_policy_inode *info,
			     unsigned int nr_wb_ctx)
{
	if ((uintptr_t)state == MODE_ERROR)
		return -EIO;
	return (int)nr_wb_ctx + 3;
}

static const struct pwb_policy_ops bad_select_ops = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "bad-select",
	.init = bad_select_init,
	.select = bad_select_select,
};

const struct pwb_policy_ops *pwb_policy_entry(unsigned int abi_version)
{
	return &bad_select_ops;
}
