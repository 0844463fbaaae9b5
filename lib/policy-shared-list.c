// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy-shared-list.c - "shared-list": one list, flushers farm out batches
 *
 * Chris Mason's suggestion in the parallel-writeback discussion: keep one
 * dirty list and let several threads each take ("farm out") a few inodes at
 * a time. With PWB_POLICY_F_SHARED_LIST every inode lives on context 0's
 * lists; the flusher of every context claims "batch=N" of them per turn
 * (writeback.c, wb_writeback_shared), writes each whole through its own
 * I/O queue and releases them once those writes have landed. Nothing is
 * affined: a hot inode may be written by a different thread each pass, but
 * never by two at once.
 *
 * Arguments: batch=N, 1 to 1024 (default 16).
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"

#include <stdlib.h>
#include <string.h>

struct shared_list {
	unsigned int batch;
};

static int sl_arg(void *arg, const char *key, const char *val)
{
	struct shared_list *sl = arg;
	uint64_t v;

	if (strcmp(key, "batch"))
		return pwb__err(-EINVAL, "policy shared-list: unknown "
					 "argument \"%s\" (known: batch)",
				key);
	if (sl->batch)
		return pwb__err(-EINVAL, "policy shared-list: batch given "
					 "twice");
	if (pwb__parse_size(val, &v) || strpbrk(val, "kKmMgGtT") || !v ||
	    v > PWB__POLICY_BATCH_MAX)
		return pwb__err(-EINVAL, "policy shared-list: batch=\"%s\" is "
					 "not a number from 1 to %u",
				val, PWB__POLICY_BATCH_MAX);
	sl->batch = (unsigned int)v;
	return 0;
}

static int shared_list_init(struct pwb_bdi *bdi, const char *args,
			    void **state)
{
	struct shared_list a = { 0 }, *sl;
	int ret;

	(void)bdi;
	ret = pwb__policy_args_each("shared-list", args, sl_arg, &a);
	if (ret)
		return ret;
	sl = malloc(sizeof(*sl));
	if (!sl)
		return pwb__err(-ENOMEM, "out of memory");
	sl->batch = a.batch ? a.batch : PWB__POLICY_BATCH_DEFAULT;
	*state = sl;
	return 0;
}

static void shared_list_fini(void *state)
{
	free(state);
}

static int shared_list_select(void *state, const struct pwb_policy_inode *info,
			      unsigned int nr_wb_ctx)
{
	(void)state;
	(void)info;
	(void)nr_wb_ctx;
	return 0;	/* not asked: F_SHARED_LIST places on context 0 */
}

static unsigned int shared_list_batch(void *state)
{
	return ((const struct shared_list *)state)->batch;
}

const struct pwb_policy_ops pwb__policy_shared_list = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "shared-list",
	.init = shared_list_init,
	.fini = shared_list_fini,
	.select = shared_list_select,
	.flags = PWB_POLICY_F_SHARED_LIST,
	.batch = shared_list_batch,
};
