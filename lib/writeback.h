/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * writeback.h - the writeback passes (writeback.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_WRITEBACK_H
#define PWB_WRITEBACK_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb__wb_ctx;
struct pwb__wb_work;

/* ---------------------------------------------------------------------- */
/* writeback.c                                                            */

/* Run one work item on the calling flusher; return 0 or the first error
 * for its completion. */
int pwb__wb_do_work(struct pwb__wb_ctx *wb,
		    struct pwb__wb_work *work) PWB__INTERNAL;
/* Is work queued on @wb? Takes work_lock. */
bool pwb__wb_work_pending(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Periodic and background checks run after the queued work. */
void pwb__wb_check_old_data_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_check_background_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue an integrity-sync item on every context (or on @inode's only) and
 * wait for all of them. */
int pwb__sync_and_wait(struct pwb_bdi *bdi,
		       struct pwb_inode *inode) PWB__INTERNAL;

#endif /* PWB_WRITEBACK_H */
