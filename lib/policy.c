// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy.c - shard policies: which writeback context owns an inode
 *
 * A policy is asked once per inode, at its first dirtying; the inode then
 * stays affined to that context so its pages are written by one thread and
 * stay contiguous on the device. The spec string is "name[:args]".
 *
 * Built in: "inode-hash", the parallel-writeback series' rule (inode number
 * modulo the number of contexts).
 */
#include "pwb-internal.h"

#include <string.h>

static int inode_hash_select(void *state, struct pwb_inode *inode,
			     unsigned int nr_wb_ctx)
{
	return (int)(inode->ino % nr_wb_ctx);
}

static int inode_hash_init(struct pwb_bdi *bdi, const char *args,
			   void **state)
{
	if (args && *args)
		return pwb__err(-EINVAL, "policy inode-hash takes no "
					 "arguments, got \"%s\"", args);
	*state = NULL;
	return 0;
}

static const struct pwb__policy_ops inode_hash_policy = {
	.version = 1,
	.name = "inode-hash",
	.init = inode_hash_init,
	.select = inode_hash_select,
};

static const struct pwb__policy_ops *const builtin_policies[] = {
	&inode_hash_policy,
};

int pwb__policy_create(struct pwb_bdi *bdi, const char *spec,
		       struct pwb__policy *pol)
{
	const struct pwb__policy_ops *ops = NULL;
	const char *colon, *args = NULL;
	size_t len, i;
	int ret;

	if (!spec)
		spec = "inode-hash";
	if (strlen(spec) >= sizeof(pol->spec))
		return pwb__err(-EINVAL, "policy spec longer than %zu bytes",
				sizeof(pol->spec) - 1);
	colon = strchr(spec, ':');
	len = colon ? (size_t)(colon - spec) : strlen(spec);
	if (colon)
		args = colon + 1;
	for (i = 0; i < sizeof(builtin_policies) / sizeof(*builtin_policies);
	     i++) {
		if (strlen(builtin_policies[i]->name) == len &&
		    !memcmp(builtin_policies[i]->name, spec, len)) {
			ops = builtin_policies[i];
			break;
		}
	}
	if (!ops)
		return pwb__err(-ENOENT, "unknown shard policy \"%.*s\"",
				(int)len, spec);
	pol->state = NULL;
	if (ops->init) {
		ret = ops->init(bdi, args, &pol->state);
		if (ret)
			return ret;
	}
	pol->ops = ops;
	strcpy(pol->spec, spec);
	return 0;
}

void pwb__policy_destroy(struct pwb__policy *pol)
{
	if (pol->ops && pol->ops->fini)
		pol->ops->fini(pol->state);
	pol->ops = NULL;
	pol->state = NULL;
}

unsigned int pwb__policy_select(struct pwb__policy *pol,
				struct pwb_inode *inode, uint64_t index,
				unsigned int nr_wb_ctx)
{
	int idx = pol->ops->select(pol->state, inode, nr_wb_ctx);

	/* A policy can be wrong; writeback must still have a context. */
	if (idx < 0 || (unsigned int)idx >= nr_wb_ctx)
		idx = (int)(inode->ino % nr_wb_ctx);
	return (unsigned int)idx;
}
