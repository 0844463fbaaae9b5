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

/* The least writeback chunk of a SYNC_NONE visit: half a second of the
 * context's measured bandwidth, rounded up to the next multiple of this
 * (the kernel's writeback_chunk_size()). */
#define PWB__MIN_WRITEBACK_BYTES (4ull << 20)

/* ---------------------------------------------------------------------- */
/* writeback.c                                                            */

/* Run one work item on the calling flusher; return 0 or the first error
 * for its completion. */
int pwb__wb_do_work(struct pwb__wb_ctx *wb,
		    struct pwb__wb_work *work) PWB__INTERNAL;
/* Periodic and background checks run after the queued work. */
void pwb__wb_check_old_data_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_check_background_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue an integrity-sync item on every context (or on @inode's only) and
 * wait for all of them. */
int pwb__sync_and_wait(struct pwb_bdi *bdi,
		       struct pwb_inode *inode) PWB__INTERNAL;
/* Flush the device cache unless every write tagged with flush epoch
 * @epoch or older is already covered by an earlier flush (0: nothing to
 * cover). Return 0 or -errno (also recorded). The wait is counted as
 * PWB_BLOCK_DEVICE_FLUSH of the bdi (a pwb_sync() or a close). */
int pwb__bdi_flush_device(struct pwb_bdi *bdi, uint64_t epoch) PWB__INTERNAL;
/* The same for the flush a pwb_fsync() or inode close of @caller owes:
 * the wait is counted in @caller's context and tenant. */
int pwb__bdi_flush_device_for(struct pwb_bdi *bdi, struct pwb_inode *caller,
			      uint64_t epoch) PWB__INTERNAL;

/* Take and release a slot of max_inflight before a backend submit. */
void pwb__inflight_get(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__inflight_put(struct pwb_bdi *bdi, unsigned int nr) PWB__INTERNAL;
/* Sleep up to @wait ns on @wb's flusher, in slices; return false early
 * (the debt stays owed) as soon as work is queued on @wb or a re-shard
 * asks the flushers to park (bdi->park_req). */
bool pwb__rate_sleep(struct pwb__wb_ctx *wb, uint64_t wait) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* writeback.c: write failures of an inode                                */

/*
 * Write failures. A failed write leaves its pages dirty (pwb__io_end); the
 * inode is then retried with a bounded back-off: periodic and background
 * passes skip it until retry_after (PWB__WB_BACKOFF_MIN_NS, doubled per
 * failed visit up to PWB__WB_BACKOFF_MAX_NS), no SYNC_NONE pass retries it
 * in the pass where it failed, integrity sync always retries. After
 * max_write_failures consecutive failed visits the inode is marked failed:
 * pwb_fsync returns the error until pwb_inode_clear_error(). -ENOSPC also
 * pauses the context's periodic and background passes (the same back-off),
 * until a write succeeds there again.
 */
#define PWB__WB_BACKOFF_MIN_NS (100 * PWB__NSEC_PER_MSEC)
#define PWB__WB_BACKOFF_MAX_NS (10 * PWB__NSEC_PER_SEC)
/* A write of @inode by @wb ended with @err (non-zero) or succeeded (0).
 * Caller holds inode->lock; runs on @wb's flusher. */
void pwb__wb_write_result_locked(struct pwb_inode *inode,
				 struct pwb__wb_ctx *wb, int err) PWB__INTERNAL;
/* End of a writeback visit that handed @written pages to the backend:
 * return true if a write of this visit failed. Caller holds inode->lock. */
bool pwb__wb_visit_end_locked(struct pwb_inode *inode,
			      uint64_t written) PWB__INTERNAL;
/* Should a SYNC_NONE pass of @wb leave @inode alone now? @periodic: a
 * periodic or background pass (which honour the back-off). Caller holds
 * inode->lock. */
bool pwb__wb_backing_off_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb,
				bool periodic) PWB__INTERNAL;

#endif /* PWB_WRITEBACK_H */
