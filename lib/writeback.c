// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * writeback.c - the writeback algorithm, run by each context's flusher;
 * the calls that start it on every context (pwb_bdi_writeback, pwb_sync)
 * and device flushes (flush epochs)
 *
 * This follows the kernel's fs/fs-writeback.c in its rules, in our own code:
 *
 *  - queue_io() picks the inodes of a pass: everything on b_more_io, then
 *    the inodes of b_dirty dirtied at or before a cut-off time (oldest first,
 *    so the walk stops at the first younger one), and b_dirty_time inodes
 *    whose timestamps expired (all of them for integrity sync).
 *  - writeback_inodes() visits b_io inodes in order. Each visit marks the
 *    inode I_SYNC (so nobody else writes it), writes at most one chunk of
 *    pages (about half a second of the context's bandwidth, at least 4 MiB;
 *    unlimited for integrity sync), then requeue_inode() decides where it
 *    goes: b_more_io if the chunk ran out with pages left, b_dirty's tail if
 *    it was dirtied again meanwhile (or a write failed), b_dirty_time if only
 *    timestamps are dirty, no list if clean.
 *  - writepages() clears a page's DIRTY tag, and sets WRITEBACK, before it
 *    asks the application for the page's memory: a pwb_mark_dirty() racing
 *    with the write sets DIRTY again and the page is written again later.
 *  - Integrity sync first copies DIRTY to TOWRITE over the whole inode and
 *    then writes only TOWRITE pages: pages dirtied after that moment wait
 *    for a later pass, so constant re-dirtying cannot livelock a sync.
 *  - Background and periodic passes yield to queued work between inodes;
 *    background stops as soon as dirty bytes are at or below the threshold.
 */
#include "base.h"
#include "probes.h"
#include "pagemap.h"
#include "xarray.h"
#include "completion.h"
#include "io.h"
#include "wb_ctx.h"
#include "pacing.h"
#include "bdi.h"
#include "throttle.h"
#include "domain.h"
#include "inode.h"
#include "region.h"
#include "writeback.h"
#include "blocked.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kernel's MIN_WRITEBACK_PAGES: 4 MiB. */
#define MIN_WRITEBACK_BYTES PWB__MIN_WRITEBACK_BYTES
/* A non-integrity pass checks for other work after this long. */
#define PASS_SLICE_NS (100 * PWB__NSEC_PER_MSEC)
/* Bandwidth is sampled over at least this long (the kernel's 200 ms). */
#define BW_INTERVAL_NS (200 * PWB__NSEC_PER_MSEC)

/* The kernel's struct writeback_control, for one inode visit. */
struct wb_control {
	enum pwb__sync_mode sync_mode;
	int64_t nr_to_write;	/* pages left in this visit's chunk */
	uint64_t written;	/* pages handed to the backend */
	int err;		/* first error of the visit */
	bool yielded;		/* stopped for queued work (rate cap) */
	uint64_t deferred;	/* pages passed over in this scan: LSN not
				 * durable, or get_page said -EAGAIN */
	uint64_t latched;	/* of which get_page said -EAGAIN */
	int log_err;		/* log_force failed in this visit */
};

/*
 * Background writeback runs while the pages not yet sent to the device
 * exceed dirty_background_bytes (the kernel's rule: dirty pages, not those
 * being written), and also, down to the last dirty page, while dirty +
 * writeback memory is above the throttle's set point. There dirtiers are
 * being paused, and each page left waiting is memory they sleep for while
 * the device could be writing it: with dirty_bytes near the device's
 * bandwidth-delay product (64 MiB on a disk taking 3 GB/s is 20 ms of it),
 * pages held back under the background threshold are queue depth lost,
 * and writers went at the pace of half a queue. In a memory domain the
 * thresholds are the bdi's share of the domain's, and every bdi with
 * dirty pages also writes while the domain as a whole is above its
 * background threshold (domain.c).
 */
static bool over_bg_thresh(struct pwb_bdi *bdi)
{
	uint64_t dirty = pwb__bdi_dirty_pages(bdi);
	uint64_t bg = pwb__aread(&bdi->bg_thresh_pages);

	if (bg && dirty > bg)
		return true;
	if (dirty && bdi->dom && pwb__domain_over_bg(bdi))
		return true;
	/* A tenant over its own threshold is written for too (tenant.c). */
	if (caa_unlikely(pwb__tenant_active(bdi, &bdi->tn)) && dirty &&
	    pwb__tenant_over_bg(bdi))
		return true;
	return dirty && pwb__throttle_over_setpoint(bdi);
}

/* ---------------------------------------------------------------------- */
/* Lists                                                                  */

/* The inode a pass visits next: the smallest key under an F_ORDERED
 * policy, else b_io's head. Caller holds list_lock; b_io is not empty. */
static struct pwb_inode *first_io_inode(struct pwb__wb_ctx *wb)
{
	struct pwb__xa_item *it = wb->ordered ? pwb__xa_first(&wb->io_tree)
					      : NULL;

	if (it)
		return caa_container_of(it, struct pwb_inode, xa);
	return cds_list_first_entry(&wb->b_io, struct pwb_inode, io_list);
}

/*
 * Put @inode at b_dirty's tail. b_dirty stays sorted by dirtied_when, which
 * move_expired() relies on: an inode older than the current tail is
 * re-stamped with the current time (the kernel's redirty_tail_locked).
 * Caller holds list_lock and inode->lock.
 */
static void redirty_tail_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode)
{
	pwb__lockdep_assert_held(&wb->list_lock);
	pwb__lockdep_assert_held(&inode->lock);

	if (!cds_list_empty(&wb->b_dirty)) {
		struct pwb_inode *tail = cds_list_entry(
			wb->b_dirty.prev, struct pwb_inode, io_list);

		if (tail != inode && pwb__aread(&inode->dirtied_when) <
					     pwb__aread(&tail->dirtied_when))
			pwb__aset(&inode->dirtied_when, pwb__now(wb->bdi));
	}
	pwb__inode_move_locked(wb, inode, PWB__LIST_DIRTY);
}

/* Move b_dirty inodes dirtied at or before @older_than to b_io. A
 * SYNC_NONE pass (!@sync) leaves inodes whose writes failed where they are
 * while they back off (error.c): retrying a failing device at once would
 * spin. @periodic: a periodic or background pass. @self: the context
 * running the pass (@wb itself, or a claimer of shared lists). */
static uint64_t move_expired(struct pwb__wb_ctx *wb, struct pwb__wb_ctx *self,
			     uint64_t older_than, bool sync, bool periodic)
{
	struct pwb_inode *inode, *tmp;
	uint64_t moved = 0;

	cds_list_for_each_entry_safe(inode, tmp, &wb->b_dirty, io_list) {
		bool skip = false;

		if (pwb__aread(&inode->dirtied_when) > older_than)
			break;
		if (!sync) {
			pthread_mutex_lock(&inode->lock);
			skip = pwb__wb_backing_off_locked(inode, self,
							  periodic);
			pthread_mutex_unlock(&inode->lock);
		}
		if (skip)
			continue;
		pwb__inode_move_locked(wb, inode, PWB__LIST_IO);
		moved++;
	}
	return moved;
}

/* Move b_dirty_time inodes whose timestamps expired (or all) to b_io. */
static void move_expired_time(struct pwb__wb_ctx *wb, bool all)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t now = pwb__now(bdi);
	struct pwb_inode *inode, *tmp;

	cds_list_for_each_entry_safe(inode, tmp, &wb->b_dirty_time, io_list) {
		if (!all && inode->dirtied_time_when + bdi->dirtytime_expire_ns >
				    now)
			break;
		pwb__inode_move_locked(wb, inode, PWB__LIST_IO);
	}
}

/*
 * Fill b_io for a pass: b_more_io, then b_dirty inodes dirtied at or before
 * *@older_than (none if @older_than is NULL). Caller holds list_lock.
 */
static void queue_io(struct pwb__wb_ctx *wb, struct pwb__wb_ctx *self,
		     const uint64_t *older_than, bool sync, bool periodic)
{
	struct pwb_inode *inode, *tmp;

	cds_list_for_each_entry_safe(inode, tmp, &wb->b_more_io, io_list)
		pwb__inode_move_locked(wb, inode, PWB__LIST_IO);
	if (older_than)
		move_expired(wb, self, *older_than, sync, periodic);
	move_expired_time(wb, sync);
}

/*
 * Decide where @inode goes after a visit. Caller holds list_lock and
 * inode->lock.
 */
static void requeue_inode_locked(struct pwb__wb_ctx *wb,
				 struct pwb_inode *inode,
				 const struct wb_control *wbc)
{
	bool failed;

	pwb__lockdep_assert_held(&wb->list_lock);
	pwb__lockdep_assert_held(&inode->lock);

	/* A write of this visit failed (even one an asynchronous backend
	 * reported after wbc->err was final): b_more_io would retry it in
	 * this same pass, so it goes to b_dirty to back off. */
	failed = pwb__wb_visit_end_locked(inode, wbc->written);

	if (inode->state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META)) {
		if (wbc->nr_to_write <= 0 && !wbc->err && !failed &&
		    inode->map.count[PWB__TAG_DIRTY])
			/* Chunk used up: more next round, after others. */
			pwb__inode_move_locked(wb, inode, PWB__LIST_MORE_IO);
		else
			/* Dirtied again while written, or a write failed. */
			redirty_tail_locked(wb, inode);
	} else if (inode->state & PWB__I_DIRTY_TIME) {
		pwb__inode_move_locked(wb, inode, PWB__LIST_DIRTY_TIME);
	} else {
		pwb__inode_move_locked(wb, inode, PWB__LIST_NONE);
	}
}

/* ---------------------------------------------------------------------- */
/* Writing one inode                                                      */

/* Pages [index, index + nr) could not be submitted: end them with @err. */
static void fail_pages(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
		       uint64_t index, uint64_t nr, int err)
{
	struct pwb__io io = {
		.inode = inode, .wb = wb, .index = index, .nr = nr,
	};

	pwb__io_complete(&io, err);
}

static struct pwb__io *io_alloc(struct pwb__wb_ctx *wb,
				struct pwb_inode *inode, uint64_t max_pages)
{
	struct pwb__io *io = pwb__io_get(wb, max_pages);

	if (!io)
		return NULL;
	io->inode = inode;
	io->wb = wb;
	io->iov = (struct iovec *)(io + 1);
	return io;
}

static int submit_io(struct pwb__wb_ctx *wb, struct pwb__io *io)
{
	int ret;

	pwb__inflight_get(wb);
	/* The backend stamps io->submitted_at (see struct pwb__io_backend). */
	PWB_PROBE4(io_submit, wb->idx, io->inode->ino, io->dev_off,
		   io->nr << wb->bdi->page_shift);
	ret = wb->bdi->io->submit(wb->io_state, io);
	if (ret) {
		/* Nothing started: the backend did not end it. */
		uint64_t index = io->index, nr = io->nr;
		struct pwb_inode *inode = io->inode;

		pwb__inflight_put(wb->bdi, 1);
		pwb__io_put(wb, io);
		fail_pages(wb, inode, index, nr, ret);
	}
	return ret;
}

/*
 * get_page() said -EAGAIN ("not now": latched or pinned) for page @index,
 * which writepages() had moved from DIRTY to WRITEBACK: put it back dirty
 * (and TOWRITE, so that an integrity sync retries it), with no error and
 * no end_write. Its LSN was reset when it was taken, which is safe: it was
 * at or below the durable LSN then, and a later change brings its own.
 */
static void page_not_now(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			 uint64_t index, struct wb_control *wbc, bool towrite)
{
	int64_t redirtied;

	pthread_mutex_lock(&inode->lock);
	if (inode->discarding && index >= inode->discard_first &&
	    index <= inode->discard_last) {
		/* A pwb_inode_discard() waits for this page: it is gone, not
		 * postponed (it must not come back dirty). */
		pwb__map_clear(&inode->map, PWB__TAG_WRITEBACK, index, index);
		if (inode->tenant)
			pwb__tenant_end_write(inode->tenant, pwb__page_size(
						wb->bdi), 0, false);
		pwb__inode_writes_ended(inode, false);
		pthread_mutex_unlock(&inode->lock);
		uatomic_sub(&wb->stats.writeback_pages, 1);
		return;
	}
	/* Set before the clear: the leaf (holding WRITEBACK) exists, so
	 * neither set allocates or fails. */
	redirtied = pwb__map_set(&inode->map, PWB__TAG_DIRTY, index, index);
	/* An integrity sync that selected the page (in this pass or, when a
	 * background pass took it from under the sync, in another) still
	 * owes it: the sync waited for a write that did not happen. */
	if (towrite)
		pwb__map_set(&inode->map, PWB__TAG_TOWRITE, index, index);
	pwb__map_clear(&inode->map, PWB__TAG_WRITEBACK, index, index);
	inode->state |= PWB__I_DIRTY_PAGES;
	if (redirtied > 0)	/* not dirtied again meanwhile */
		uatomic_add(&inode->wb->stats.dirty_pages, redirtied);
	if (inode->tenant)
		pwb__tenant_end_write(inode->tenant, pwb__page_size(wb->bdi),
				      redirtied > 0 ? pwb__page_size(wb->bdi)
						    : 0, false);
	/* A pwb_wait_writeback() of this page may be waiting. */
	pwb__inode_writes_ended(inode, false);
	pthread_mutex_unlock(&inode->lock);
	uatomic_sub(&wb->stats.writeback_pages, 1);
	uatomic_inc(&wb->stats.latched_pages);
	wbc->deferred++;
	wbc->latched++;
}

/*
 * Where the contiguous dirty extent being written would go on: the next
 * page index and its device offset. Kept across the write_run() calls of
 * one writepages(), so that the io_extents statistic counts an extent once
 * however max_io_pages splits it.
 */
struct extent_cursor {
	uint64_t index;
	uint64_t off;
	bool valid;
};

/*
 * Write pages [first, first + n) that writepages() just moved from DIRTY to
 * WRITEBACK: ask the application for each page and its device offset,
 * merge pages with contiguous offsets into one request of at most
 * max_io_pages, and submit. Returns the first error.
 */
static int write_run(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
		     uint64_t first, uint64_t n, struct extent_cursor *ext,
		     struct wb_control *wbc, bool towrite)
{
	struct pwb_bdi *bdi = wb->bdi;
	struct pwb_inode *app = pwb__inode_app(inode);
	unsigned int ps = pwb__page_size(bdi);
	struct pwb__io *io = NULL;
	uint64_t i, next_off = 0, extents = 0;
	/* lbs is a power of two (bdi.c checks): a mask, not a division,
	 * which profiling showed as the cost of this loop. */
	uint64_t lbs_mask = bdi->lbs - 1;
	int err = 0;

	for (i = 0; i < n; i++) {
		uint64_t index = first + i, off;
		const void *data = NULL;
		int ret;

		/* A region slice's callbacks are its inode's. */
		ret = inode->ops.map_page(app, index, &off);
		if (!ret) {
			ret = inode->ops.get_page(app, index, &data);
			if (ret == -EAGAIN) {
				/* "Not now": the page is latched. */
				if (io) {
					submit_io(wb, io);
					io = NULL;
				}
				ext->valid = false;
				page_not_now(wb, inode, index, wbc, towrite);
				continue;
			}
		}
		if (!ret && (off & lbs_mask))
			ret = -EINVAL;
		if (!ret && (off > bdi->capacity || bdi->capacity - off < ps))
			ret = -ERANGE;
		if (!ret && (!data || ((uintptr_t)data & lbs_mask)))
			ret = -EINVAL;
		if (ret) {
			if (ret > 0 || ret < -4095)
				ret = -EIO;
			if (io) {
				submit_io(wb, io);
				io = NULL;
			}
			fail_pages(wb, inode, index, 1, ret);
			if (!err)
				err = ret;
			ext->valid = false;
			continue;
		}
		if (!ext->valid || ext->index != index || ext->off != off)
			extents++;
		ext->valid = true;
		ext->index = index + 1;
		ext->off = off + ps;
		if (io && (off != next_off || io->nr == bdi->max_io_pages)) {
			submit_io(wb, io);
			io = NULL;
		}
		if (!io) {
			io = io_alloc(wb, inode,
				      PWB__MIN(bdi->max_io_pages, n - i));
			if (!io) {
				fail_pages(wb, inode, index, n - i, -ENOMEM);
				ext->valid = false;
				err = err ? err : -ENOMEM;
				break;
			}
			io->index = index;
			io->dev_off = off;
		}
		io->iov[io->iovcnt].iov_base = (void *)data;
		io->iov[io->iovcnt].iov_len = ps;
		io->iovcnt++;
		io->nr++;
		next_off = off + ps;
	}
	if (io)
		submit_io(wb, io);
	if (extents)
		uatomic_add(&wb->stats.io_extents, extents);
	return err;
}

/* ---------------------------------------------------------------------- */
/* The write-ahead rule and "not now" pages                               */

/*
 * Integrity sync does not give up on a page passed over (LSN not yet
 * durable without log_force, or get_page -EAGAIN) at once: it scans its
 * TOWRITE pages again after 1 ms, 2 ms, ... up to 64 ms, for about a
 * second in all, then fails with -EBUSY and leaves them dirty. A count of
 * real sleeps, not cfg.clock: a fake clock that stands still must not turn
 * the bound into a livelock.
 */
#define DEFER_BACKOFF_MIN_NS (1 * PWB__NSEC_PER_MSEC)
#define DEFER_BACKOFF_MAX_NS (64 * PWB__NSEC_PER_MSEC)
#define DEFER_BUDGET_NS (1 * PWB__NSEC_PER_SEC)

/*
 * Call log_force(@lsn) with inode->lock dropped (the caller holds it and
 * gets it back): the application may sleep there for its log. On success
 * the durable LSN covers @lsn; an error is kept in wbc->log_err, and the
 * visit forces no more.
 */
/* Time this flusher spent in log_force, in cfg.clock ns: pwb__wb_do_work()
 * gives a work item's share to the call waiting for it (blocked.c). */
static __thread uint64_t log_forced_ns;

static void force_log_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			     struct wb_control *wbc, uint64_t lsn)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t t0;
	int ret;

	pwb__lockdep_assert_held(&inode->lock);

	pthread_mutex_unlock(&inode->lock);
	t0 = pwb__now(bdi);
	ret = bdi->cfg.log_force(lsn, bdi->cfg.log_force_arg);
	log_forced_ns += pwb__now(bdi) - t0;
	uatomic_inc(&wb->stats.log_forces);
	if (!ret) {
		pwb__bdi_log_durable_raise(bdi, lsn);
	} else {
		/* -EAGAIN means "try again" to pwb__sync_and_wait(). */
		if (ret > 0 || ret < -4095)
			ret = -EIO;
		else if (ret == -EAGAIN)
			ret = -EBUSY;
		wbc->log_err = ret;
	}
	pthread_mutex_lock(&inode->lock);
}

/* The highest LSN among @inode's TOWRITE pages. Caller holds inode->lock. */
static uint64_t towrite_lsn_max_locked(struct pwb_inode *inode)
{
	uint64_t idx = 0, first, max = 0, ok;

	pwb__lockdep_assert_held(&inode->lock);

	while (pwb__map_find(&inode->map, PWB__TAG_TOWRITE, idx, &first)) {
		uint64_t n = pwb__map_run(&inode->map, PWB__TAG_TOWRITE, first,
					  UINT64_MAX - first);

		max = PWB__MAX(max, pwb__map_lsn_max(&inode->map, first, n,
						     UINT64_MAX, &ok));
		idx = first + n;
		if (idx <= first)	/* ran to the last index */
			break;
	}
	return max;
}

/* Value of lsn_allowed_locked(): inode->lock was dropped, look again. */
#define LSN_RELOCKED UINT64_MAX

/*
 * How many of the @n dirty pages from @first may be submitted now: all
 * when their LSNs are durable; after a log_force of their highest LSN
 * (LSN_RELOCKED: the caller looks again, the map may have changed); else
 * the leading pages whose LSN is durable (0: @first is held back). Caller
 * holds inode->lock and knows the map holds LSNs.
 */
static uint64_t lsn_allowed_locked(struct pwb__wb_ctx *wb,
				   struct pwb_inode *inode,
				   struct wb_control *wbc, uint64_t first,
				   uint64_t n)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t durable = pwb__aread(&bdi->log_durable), ok, max;

	pwb__lockdep_assert_held(&inode->lock);

	max = pwb__map_lsn_max(&inode->map, first, n, durable, &ok);
	if (max <= durable)
		return n;
	if (bdi->cfg.log_force && !wbc->log_err) {
		force_log_locked(wb, inode, wbc, max);
		return LSN_RELOCKED;
	}
	return ok;
}

/*
 * After a scan of an integrity sync that passed pages over: wait a little
 * and return true to scan again, or give up (false). Caller holds
 * inode->lock, dropped while sleeping.
 */
static bool sync_retry_locked(struct pwb_inode *inode, struct wb_control *wbc,
			      uint64_t *slept)
{
	uint64_t ns;
	struct timespec ts;

	pwb__lockdep_assert_held(&inode->lock);

	if (!wbc->deferred || wbc->log_err || *slept >= DEFER_BUDGET_NS)
		return false;
	ns = DEFER_BACKOFF_MIN_NS;
	while (ns < *slept && ns < DEFER_BACKOFF_MAX_NS)
		ns *= 2;
	ns = PWB__MIN(ns, DEFER_BACKOFF_MAX_NS);
	*slept += ns;
	wbc->deferred = 0;
	wbc->latched = 0;
	ts.tv_sec = 0;
	ts.tv_nsec = (long)ns;
	pthread_mutex_unlock(&inode->lock);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	pthread_mutex_lock(&inode->lock);
	return true;
}

/*
 * End of an integrity scan that left pages unwritten on purpose: a
 * log_force error, or pages still held or latched after the back-off
 * (-EBUSY). Reported like a write error (errseq of the inode and the bdi:
 * pwb_fsync, pwb_sync and close return it once each); the pages stay
 * dirty. Not a write failure: no back-off, no failed mark. A SYNC_NONE
 * pass records nothing: its pages simply wait for a later pass. Caller
 * holds inode->lock. Return the error recorded, 0 if none.
 */
static int sync_deferred_error_locked(struct pwb_inode *inode,
				      struct wb_control *wbc)
{
	int err = wbc->log_err ? wbc->log_err : wbc->deferred ? -EBUSY : 0;

	pwb__lockdep_assert_held(&inode->lock);

	if (!err)
		return 0;
	pwb__errseq_set(&inode->wb_err, err);
	pwb__errseq_set(&inode->bdi->wb_err, err);
	if (!wbc->err)
		wbc->err = err;
	return err;
}

/*
 * Write the pages of @inode selected by @wbc: for integrity sync all pages
 * tagged TOWRITE (set here from DIRTY), otherwise DIRTY pages starting
 * where the last pass stopped (cyclic), at most wbc->nr_to_write.
 */
static void writepages(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
		       struct wb_control *wbc)
{
	struct pwb_bdi *bdi = wb->bdi;
	bool sync = wbc->sync_mode == PWB__SYNC_ALL;
	enum pwb__tag tag = sync ? PWB__TAG_TOWRITE : PWB__TAG_DIRTY;
	struct extent_cursor ext = { .valid = false };
	uint64_t start, idx, slept = 0;
	bool wrapped = false;
	int deferred = 0;

	pthread_mutex_lock(&inode->lock);
	if (sync) {
		int64_t r = pwb__map_copy_tag(&inode->map, PWB__TAG_DIRTY,
					      PWB__TAG_TOWRITE, 0, UINT64_MAX);

		if (r < 0) {
			pthread_mutex_unlock(&inode->lock);
			wbc->err = (int)r;
			return;
		}
		/* Force the log once, first, for everything we will write. */
		if (inode->map.nr_lsn && bdi->cfg.log_force) {
			uint64_t max = towrite_lsn_max_locked(inode);

			if (max > pwb__aread(&bdi->log_durable))
				force_log_locked(wb, inode, wbc, max);
		}
		start = 0;
	} else {
		start = inode->writeback_index;
	}
again:
	idx = start;

	while (wbc->nr_to_write > 0) {
		uint64_t first, n, wb_first, max, latched;
		bool towrite;
		int ret;

		if (!pwb__map_find(&inode->map, tag, idx, &first) ||
		    (wrapped && first >= start)) {
			if (!wrapped && start > 0) {
				wrapped = true;
				idx = 0;
				continue;
			}
			break;
		}
		max = PWB__MIN((uint64_t)wbc->nr_to_write, bdi->max_io_pages);
		n = pwb__map_run(&inode->map, tag, first, max);
		if (inode->map.nr_lsn) {
			uint64_t ok = lsn_allowed_locked(wb, inode, wbc,
							 first, n);

			if (ok == LSN_RELOCKED)
				continue;
			if (!ok) {
				/* Held back: dirty for a later pass. */
				uatomic_inc(&wb->stats.lsn_held_pages);
				wbc->deferred++;
				idx = first + 1;
				if (!idx)
					break;
				continue;
			}
			n = ok;
		}
		/*
		 * While an integrity sync has selected pages of this inode
		 * (TOWRITE), a SYNC_NONE run holds only selected or only
		 * unselected pages, so a page that comes back "not now" gets
		 * its selection back (page_not_now).
		 */
		towrite = sync;
		if (!sync && inode->map.count[PWB__TAG_TOWRITE]) {
			uint64_t t;

			if (pwb__map_test(&inode->map, PWB__TAG_TOWRITE,
					  first)) {
				n = pwb__map_run(&inode->map, PWB__TAG_TOWRITE,
						 first, n);
				towrite = true;
			} else if (pwb__map_find(&inode->map,
						 PWB__TAG_TOWRITE, first, &t) &&
				   t < first + n) {
				n = t - first;
			}
		}
		/*
		 * A page still being written from an earlier pass must not be
		 * in flight twice: let the backend finish what it has.
		 */
		if (pwb__map_find(&inode->map, PWB__TAG_WRITEBACK, first,
				  &wb_first) &&
		    wb_first < first + n) {
			pthread_mutex_unlock(&inode->lock);
			bdi->io->wait(wb->io_state);
			pthread_mutex_lock(&inode->lock);
			continue;
		}
		/* The leaf exists (the pages are DIRTY): cannot fail. Set
		 * before the clears, which would otherwise free a leaf that
		 * held only these pages (and its LSNs) to allocate it anew. */
		pwb__map_set(&inode->map, PWB__TAG_WRITEBACK, first,
			     first + n - 1);
		/* Clear before the data is read: see the top of the file. */
		pwb__map_clear(&inode->map, PWB__TAG_DIRTY, first,
			       first + n - 1);
		pwb__map_clear(&inode->map, PWB__TAG_TOWRITE, first,
			       first + n - 1);
		/* Their LSNs are durable; a new change brings its own. */
		pwb__map_lsn_reset(&inode->map, first, n);
		if (!inode->map.count[PWB__TAG_DIRTY])
			inode->state &= ~PWB__I_DIRTY_PAGES;
		idx = first + n;
		inode->writeback_index = idx;
		if (inode->tenant)
			pwb__tenant_start_write(inode->tenant,
						n << bdi->page_shift);
		pthread_mutex_unlock(&inode->lock);

		/* Dirty pages are counted where the inode lives, pages in
		 * flight by the context writing them (they differ under
		 * F_SHARED_LIST); I_SYNC keeps inode->wb from changing. */
		uatomic_sub(&pwb__aread(&inode->wb)->stats.dirty_pages, n);
		uatomic_add(&wb->stats.writeback_pages, n);
		latched = wbc->latched;
		ret = write_run(wb, inode, first, n, &ext, wbc, towrite);
		if (ret && !wbc->err)
			wbc->err = ret;
		wbc->nr_to_write -= (int64_t)n;
		/* Latched pages are no progress: a pass that counted them
		 * would go round again at once. */
		wbc->written += n - (wbc->latched - latched);
		/* The rate cap paces SYNC_NONE passes only (pacing.c). */
		if (!sync && bdi->rate.rate &&
		    !pwb__rate_sleep(wb, pwb__rate_charge(
					     &bdi->rate, n << bdi->page_shift,
					     pwb__now(bdi)))) {
			wbc->yielded = true;
			wbc->nr_to_write = 0;
		}
		/* Tenants: service by weight, and a tenant's own cap ends
		 * the visit (tenant.c). */
		if (caa_unlikely(!sync && pwb__tenant_active(bdi, &bdi->tn)) &&
		    pwb__tenant_charge(wb, inode, n << bdi->page_shift))
			wbc->nr_to_write = 0;

		pthread_mutex_lock(&inode->lock);
		if (idx == 0)	/* wrapped past UINT64_MAX */
			break;
	}
	if (sync) {
		if (sync_retry_locked(inode, wbc, &slept))
			goto again;
		deferred = sync_deferred_error_locked(inode, wbc);
	}
	pthread_mutex_unlock(&inode->lock);
	/* A region slice's is its inode's, where pwb_fsync() looks. */
	pwb__region_report(inode, deferred);
}

/*
 * Write one inode: its pages, then (after the data, for integrity) its
 * metadata through write_inode. Caller set I_SYNC.
 */
static void writeback_single_inode(struct pwb__wb_ctx *wb,
				   struct pwb_inode *inode,
				   struct wb_control *wbc)
{
	struct pwb_bdi *bdi = wb->bdi;
	bool sync = wbc->sync_mode == PWB__SYNC_ALL, freeing, meta_due;
	unsigned int meta;

	writepages(wb, inode, wbc);
	pthread_mutex_lock(&inode->lock);
	freeing = inode->state & PWB__I_FREEING;
	meta_due = (inode->state & (PWB__I_DIRTY_META | PWB__I_DIRTY_TIME)) &&
		   inode->ops.write_inode;
	pthread_mutex_unlock(&inode->lock);
	if ((sync && meta_due) || freeing || pwb__aread(&wb->shared)) {
		/*
		 * An integrity sync writes metadata only after its data has
		 * landed; a closing inode's I_SYNC must not clear while its
		 * writes are in flight, because its close frees it then (an
		 * asynchronous backend would end a write on a freed inode).
		 * Otherwise there is no wait per inode: with io_uring it
		 * would drain the queue between inodes, which halved pwb_sync
		 * throughput over many small inodes. Under a shared list
		 * (fsync visits on context 0) an inode must not be released
		 * with writes in flight: another flusher may claim it next. pwb__wb_do_work() waits
		 * once at the end of the pass, before the device flush.
		 */
		int ret = bdi->io->wait(wb->io_state);

		if (ret && !wbc->err)
			wbc->err = ret;
	}

	pthread_mutex_lock(&inode->lock);
	meta = inode->state & PWB__I_DIRTY_META;
	if ((inode->state & PWB__I_DIRTY_TIME) &&
	    (sync || inode->dirtied_time_when + bdi->dirtytime_expire_ns <=
			     pwb__now(bdi)))
		meta |= PWB__I_DIRTY_TIME;
	inode->state &= ~meta;
	pthread_mutex_unlock(&inode->lock);

	if (meta && inode->ops.write_inode) {
		int ret = inode->ops.write_inode(inode, sync);

		pthread_mutex_lock(&inode->lock);
		if (ret) {
			if (ret > 0 || ret < -4095)
				ret = -EIO;
			inode->state |= meta;
			pwb__errseq_set(&inode->wb_err, ret);
			pwb__errseq_set(&bdi->wb_err, ret);
			if (!wbc->err)
				wbc->err = ret;
		} else {
			/* The metadata is a write like the pages: the next
			 * pwb_fsync or pwb_sync owes a device flush for it,
			 * even when no page was written. */
			pwb__bdi_write_done_locked(bdi, inode);
		}
		pthread_mutex_unlock(&inode->lock);
	}
	if (wbc->written)
		uatomic_inc(&wb->stats.inodes_written);
}

/* Wait until no flusher has @inode. Caller holds list_lock. */
static void wait_inode_sync_locked(struct pwb__wb_ctx *wb,
				   struct pwb_inode *inode)
{
	pwb__lockdep_assert_held(&wb->list_lock);

	for (;;) {
		bool busy;

		pthread_mutex_lock(&inode->lock);
		busy = inode->state & PWB__I_SYNC;
		pthread_mutex_unlock(&inode->lock);
		if (!busy)
			return;
		pthread_cond_wait(&wb->sync_cond, &wb->list_lock);
	}
}

/*
 * Claim @inode for a visit: I_SYNC (nobody else writes it) and a new visit
 * number for the failure count; false if another thread holds it. I_SYNC
 * is only set under list_lock, so a caller that saw it clear there may
 * rely on this succeeding. Caller holds list_lock.
 */
static bool claim_inode_locked(struct pwb_inode *inode)
{
	bool busy;

	pwb__lockdep_assert_held(&inode->wb->list_lock);

	pthread_mutex_lock(&inode->lock);
	busy = inode->state & PWB__I_SYNC;
	if (!busy) {
		inode->state |= PWB__I_SYNC;
		inode->wb_visit++;	/* failures are counted per visit */
	}
	pthread_mutex_unlock(&inode->lock);
	return !busy;
}

/*
 * A pass met @inode on b_io while another thread holds it: a SYNC_NONE
 * pass leaves it for later (b_more_io); integrity waits for its writer,
 * who requeued it, and puts it back on b_io to look again. Caller holds
 * list_lock.
 */
static void pass_over_busy_locked(struct pwb__wb_ctx *wb,
				  struct pwb_inode *inode, bool sync)
{
	bool gone;

	pwb__lockdep_assert_held(&wb->list_lock);

	if (!sync) {
		pwb__inode_move_locked(wb, inode, PWB__LIST_MORE_IO);
		return;
	}
	/*
	 * While we sleep its holder may release it and its owner close it
	 * (off every list, GONE, freed after a grace period): the read-side
	 * section keeps the memory, GONE says to leave it alone.
	 */
	uatomic_inc(&wb->stats.busy_waits);
	rcu_read_lock();
	wait_inode_sync_locked(wb, inode);
	pthread_mutex_lock(&inode->lock);
	gone = inode->state & PWB__I_GONE;
	pthread_mutex_unlock(&inode->lock);
	if (!gone)
		pwb__inode_move_locked(wb, inode, PWB__LIST_IO);
	pwb__rcu_read_unlock();
}

/* End a visit: requeue @inode and drop I_SYNC. Caller holds list_lock and
 * broadcasts sync_cond afterwards. */
static void release_inode_locked(struct pwb__wb_ctx *wb,
				 struct pwb_inode *inode,
				 const struct wb_control *wbc)
{
	pwb__lockdep_assert_held(&wb->list_lock);

	pthread_mutex_lock(&inode->lock);
	requeue_inode_locked(wb, inode, wbc);
	inode->state &= ~PWB__I_SYNC;
	pthread_mutex_unlock(&inode->lock);
}

/*
 * One visit of an inode the caller claimed: write a chunk, requeue,
 * release. Caller holds list_lock; it is dropped during the I/O.
 */
static void visit_inode_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			       struct wb_control *wbc)
{
	pwb__lockdep_assert_held(&wb->list_lock);

	pthread_mutex_unlock(&wb->list_lock);
	writeback_single_inode(wb, inode, wbc);
	pthread_mutex_lock(&wb->list_lock);
	release_inode_locked(wb, inode, wbc);
	pthread_cond_broadcast(&wb->sync_cond);
}

/* The kernel's writeback_chunk_size(). */
static int64_t chunk_pages(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t min = MIN_WRITEBACK_BYTES >> bdi->page_shift;
	uint64_t pages;

	if (work->sync_mode == PWB__SYNC_ALL)
		return INT64_MAX;
	pages = (pwb__aread(&wb->avg_write_bw) / 2) >> bdi->page_shift;
	if (work->nr_pages > 0)
		pages = PWB__MIN(pages, (uint64_t)work->nr_pages);
	pages = (pages + min) / min * min;
	return (int64_t)PWB__MIN(pages, (uint64_t)INT64_MAX);
}

/* A flusher sleeping for a rate cap looks for queued work this often. */
#define RATE_SLICE_NS (10 * PWB__NSEC_PER_MSEC)

/*
 * A round under tenants wrote nothing and passed over inodes for their
 * tenants' rate caps, the first of which allows in @wait ns: sleep that
 * long, 10 ms at most, unless work is queued. Returns true if it slept
 * and the bdi's clock moved meanwhile. Caller holds no lock.
 */
static bool tenant_rate_sleep(struct pwb__wb_ctx *wb, uint64_t wait)
{
	uint64_t ns = PWB__MIN(wait, RATE_SLICE_NS);
	struct timespec ts = {
		.tv_sec = (time_t)(ns / PWB__NSEC_PER_SEC),
		.tv_nsec = (long)(ns % PWB__NSEC_PER_SEC),
	};
	uint64_t before = pwb__now(wb->bdi);

	if (!ns || pwb__wb_work_pending(wb) || pwb__aread(&wb->bdi->park_req))
		return false;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	/* The caps run on the bdi's clock: one that stands still (a test's)
	 * would never pay the debt, and the pass must end instead. */
	return pwb__now(wb->bdi) != before;
}

/*
 * Visit the inodes on b_io. Returns pages written; *err gets the first
 * error. Caller holds list_lock.
 */
static uint64_t writeback_inodes(struct pwb__wb_ctx *wb,
				 struct pwb__wb_work *work, int *err)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t start = pwb__now(bdi), total = 0;
	/* Tenants share the bdi: serve by weight (tenant.c). */
	bool tn = caa_unlikely(work->sync_mode == PWB__SYNC_NONE &&
			       pwb__tenant_active(bdi, &bdi->tn));
	struct pwb__tenant_round round;

	if (tn) {
		struct pwb_inode *inode, *tmp;

		/*
		 * A round cut short (its time slice, the background
		 * threshold met, the work's pages done) left on b_more_io
		 * the inodes it served or passed over. This round compares
		 * their owners too: from what was left on b_io alone, the
		 * rest of b_io would be served whatever its owners' virtual
		 * time, and with visits longer than the slice (a slow device
		 * or a loaded machine) every inode would get its turn, 1 : 1
		 * whatever the weights.
		 */
		cds_list_for_each_entry_safe(inode, tmp, &wb->b_more_io,
					     io_list)
			pwb__inode_move_locked(wb, inode, PWB__LIST_IO);
		pwb__tenant_round_start_locked(wb, &round);
	}
	while (!cds_list_empty(&wb->b_io)) {
		struct pwb_inode *inode = first_io_inode(wb);
		struct wb_control wbc = {
			.sync_mode = work->sync_mode,
			.nr_to_write = chunk_pages(wb, work),
		};

		if (tn) {
			if (pwb__tenant_skip_locked(wb, inode, &round)) {
				pwb__inode_move_locked(wb, inode,
						       PWB__LIST_MORE_IO);
				continue;
			}
			wbc.nr_to_write = PWB__MIN(wbc.nr_to_write,
				(int64_t)(PWB__TENANT_VISIT_BYTES >>
					  bdi->page_shift));
		}
		if (!claim_inode_locked(inode)) {
			pass_over_busy_locked(wb, inode,
					      work->sync_mode == PWB__SYNC_ALL);
			continue;
		}
		visit_inode_locked(wb, inode, &wbc);
		total += wbc.written;
		if (wbc.err && !*err)
			*err = wbc.err;
		if (work->sync_mode == PWB__SYNC_ALL)
			continue;
		if (wbc.yielded) {
			work->yielded = true;
			break;
		}
		work->nr_pages -= (int64_t)wbc.written;
		if (work->nr_pages <= 0)
			break;
		if (work->reason == PWB_WB_BACKGROUND && !over_bg_thresh(bdi))
			break;
		if (pwb__now(bdi) - start > PASS_SLICE_NS)
			break;
	}
	/* Only tenants in debt to their rate caps had pages: wait for the
	 * first to pay, and count the wait as progress, so the pass goes
	 * on as the bdi's own cap's does (pwb__rate_sleep). */
	if (tn && !total && round.rate_wait) {
		bool slept;

		pthread_mutex_unlock(&wb->list_lock);
		slept = tenant_rate_sleep(wb, round.rate_wait);
		pthread_mutex_lock(&wb->list_lock);
		return slept;
	}
	return total;
}

/* Update the context's bandwidth estimate (the kernel's
 * wb_update_bandwidth, simplified to an exponential moving average). */
static void update_bandwidth(struct pwb__wb_ctx *wb, bool starting)
{
	uint64_t now = pwb__now(wb->bdi);
	uint64_t written = pwb__aread(&wb->stats.bytes_written);
	uint64_t elapsed = now - wb->bw_stamp;

	if (starting) {
		/* An idle gap says nothing about the device: restart. */
		if (elapsed > PWB__NSEC_PER_SEC) {
			wb->bw_stamp = now;
			wb->bw_written = written;
		}
		return;
	}
	if (elapsed < BW_INTERVAL_NS)
		return;
	if (written > wb->bw_written) {
		uint64_t bw = (written - wb->bw_written) * PWB__NSEC_PER_SEC /
			      elapsed;
		uint64_t avg = pwb__aread(&wb->avg_write_bw);

		pwb__aset(&wb->avg_write_bw, (avg * 7 + bw) / 8);
	}
	wb->bw_stamp = now;
	wb->bw_written = written;
}

/*
 * Checks a SYNC_NONE pass makes before each round: should it stop? Also
 * fills *@older_than (the expiry cut-off) and returns it in *@cutoff, or
 * NULL when nothing can have expired yet.
 */
static bool none_pass_done(struct pwb__wb_ctx *wb, struct pwb__wb_work *work,
			   uint64_t work_start, uint64_t *older_than,
			   const uint64_t **cutoff)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t now = pwb__now(bdi);

	if (work->nr_pages <= 0)
		return true;
	/* Explicit work is waiting: let it run first. */
	if (work->reason != PWB_WB_ALL && pwb__wb_work_pending(wb))
		return true;
	/* So is a re-shard (the automatic tuner's, every few windows):
	 * periodic and background passes end at a slice boundary and start
	 * again after it, when the flushers rescan and dirtiers kick. */
	if (work->reason != PWB_WB_ALL && pwb__aread(&bdi->park_req))
		return true;
	if (work->reason == PWB_WB_BACKGROUND && !over_bg_thresh(bdi))
		return true;
	/* The file system was full: periodic and background passes wait
	 * for the pause to end (error.c). */
	if (work->reason != PWB_WB_ALL && now < wb->nospc_until)
		return true;
	*cutoff = older_than;
	if (work->reason == PWB_WB_PERIODIC) {
		/* Before the clock reaches one expiry period nothing can
		 * have expired. */
		if (now < bdi->dirty_expire_ns)
			*cutoff = NULL;
		else
			*older_than = now - bdi->dirty_expire_ns;
	} else if (work->reason == PWB_WB_BACKGROUND) {
		*older_than = now;
	} else {
		*older_than = work_start;
	}
	return false;
}

/* The kernel's wb_writeback(): a whole work item over the lists. */
static int wb_writeback_own(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	uint64_t work_start = pwb__now(wb->bdi);
	bool queued = false;
	int err = 0;

	pthread_mutex_lock(&wb->list_lock);
	for (;;) {
		uint64_t progress;

		if (work->sync_mode == PWB__SYNC_ALL) {
			/* One queue_io: later dirtying is not ours to wait for. */
			if (queued)
				break;
			uint64_t all = UINT64_MAX;

			queue_io(wb, wb, &all, true, false);
			queued = true;
		} else {
			const uint64_t *cutoff;
			uint64_t older_than;

			if (none_pass_done(wb, work, work_start, &older_than,
					   &cutoff))
				break;
			if (cds_list_empty(&wb->b_io))
				queue_io(wb, wb, cutoff, false,
					 work->reason != PWB_WB_ALL);
		}
		if (cds_list_empty(&wb->b_io))
			break;
		progress = writeback_inodes(wb, work, &err);
		/* Queued work goes first (rate cap): the pass ends here. */
		if (work->yielded)
			break;
		/* A background pass may last as long as dirtiers keep up:
		 * the throttle needs the estimate fresh, not at its end. */
		update_bandwidth(wb, false);
		if (work->sync_mode == PWB__SYNC_ALL || progress)
			continue;
		/* No progress: only failures or busy inodes are left. */
		break;
	}
	pthread_mutex_unlock(&wb->list_lock);
	return err;
}

/* ---------------------------------------------------------------------- */
/* Shared lists (PWB_POLICY_F_SHARED_LIST)                                */

/*
 * Under F_SHARED_LIST every inode lives on context 0's lists (@lw below)
 * and the flusher of every context @wb runs its passes there: it claims a
 * batch of b_io inodes (I_SYNC, off the lists), writes each whole through
 * its own I/O queue, waits for those writes, and only then requeues the
 * batch and clears I_SYNC. So an inode's writes are never in flight
 * while it is not I_SYNC, which is what pwb_fsync (wait for I_SYNC, then
 * write on the inode's own context) and close rely on.
 *
 * pwb_sync queues an integrity pass on every context. Each runs after the
 * earlier work of its own flusher, so the inodes that flusher had claimed
 * are back on the lists, and their writes landed, before its queue_io.
 * What could escape is an inode claimed by a *background* pass of a
 * flusher whose integrity pass is already over, while another context's
 * integrity pass still runs: bdi->nr_syncs makes SYNC_NONE passes stop
 * claiming while any pwb_sync waits.
 */
struct claim {
	struct pwb_inode *inode;
	struct wb_control wbc;
};

/*
 * Claim up to @max inodes from @lw's b_io for a pass of @work. An inode
 * someone else holds is skipped to b_more_io, or, for an integrity pass
 * holding no claim yet, waited for and taken. Caller holds lw->list_lock.
 */
static unsigned int claim_batch_locked(struct pwb__wb_ctx *lw,
				       struct pwb__wb_work *work,
				       struct claim *c, unsigned int max)
{
	bool sync = work->sync_mode == PWB__SYNC_ALL;
	unsigned int n = 0;

	pwb__lockdep_assert_held(&lw->list_lock);

	while (n < max && !cds_list_empty(&lw->b_io)) {
		struct pwb_inode *inode = first_io_inode(lw);

		if (!claim_inode_locked(inode)) {
			if (sync && n)
				break;	/* write what we hold before waiting */
			pass_over_busy_locked(lw, inode, sync);
			continue;
		}
		pwb__inode_move_locked(lw, inode, PWB__LIST_NONE);
		c[n].inode = inode;
		c[n].wbc = (struct wb_control){
			.sync_mode = work->sync_mode,
			.nr_to_write = INT64_MAX,	/* whole */
		};
		n++;
	}
	return n;
}

/*
 * Write the @n claimed inodes on @wb's queue, wait for the writes, then
 * requeue and release them. Caller holds lw->list_lock (dropped while
 * writing). Returns pages written; *@err gets the first error, *@yielded
 * is set if the rate cap stopped a visit for queued work.
 */
static uint64_t write_claimed_locked(struct pwb__wb_ctx *wb,
				     struct pwb__wb_ctx *lw, struct claim *c,
				     unsigned int n, int *err, bool *yielded)
{
	uint64_t total = 0;
	unsigned int i;
	int ret;

	pwb__lockdep_assert_held(&lw->list_lock);

	pthread_mutex_unlock(&lw->list_lock);
	for (i = 0; i < n; i++)
		writeback_single_inode(wb, c[i].inode, &c[i].wbc);
	ret = wb->bdi->io->wait(wb->io_state);
	if (ret && !*err)
		*err = ret;
	pthread_mutex_lock(&lw->list_lock);
	for (i = 0; i < n; i++) {
		release_inode_locked(lw, c[i].inode, &c[i].wbc);
		total += c[i].wbc.written;
		if (c[i].wbc.err && !*err)
			*err = c[i].wbc.err;
		if (c[i].wbc.yielded)
			*yielded = true;
	}
	pthread_cond_broadcast(&lw->sync_cond);
	return total;
}

static int wb_writeback_shared(struct pwb__wb_ctx *wb, struct pwb__wb_ctx *lw,
			       struct pwb__wb_work *work)
{
	struct pwb_bdi *bdi = wb->bdi;
	bool sync = work->sync_mode == PWB__SYNC_ALL, queued = false;
	unsigned int max = pwb__aread(&wb->claim_batch), n;
	uint64_t work_start = pwb__now(bdi), slice = work_start;
	struct claim one, *c = malloc(max * sizeof(*c));
	int err = 0;

	if (!c) {
		c = &one;	/* no memory for a batch: one at a time */
		max = 1;
	}
	pthread_mutex_lock(&lw->list_lock);
	for (;;) {
		uint64_t written;

		if (sync) {
			if (!queued) {
				uint64_t all = UINT64_MAX;

				queue_io(lw, wb, &all, true, false);
				queued = true;
			}
		} else {
			const uint64_t *cutoff;
			uint64_t older_than;

			if (none_pass_done(wb, work, work_start, &older_than,
					   &cutoff) ||
			    pwb__aread(&bdi->nr_syncs))
				break;
			if (cds_list_empty(&lw->b_io))
				queue_io(lw, wb, cutoff, false,
					 work->reason != PWB_WB_ALL);
		}
		n = claim_batch_locked(lw, work, c, max);
		if (!n)
			break;
		written = write_claimed_locked(wb, lw, c, n, &err,
					       &work->yielded);
		if (sync)
			continue;
		if (work->yielded)
			break;
		update_bandwidth(wb, false);
		work->nr_pages -= (int64_t)written;
		/* Yield to queued work now and then, as writeback_inodes(). */
		if (pwb__now(bdi) - slice > PASS_SLICE_NS) {
			slice = pwb__now(bdi);
			if (pwb__wb_work_pending(wb) && work->reason != PWB_WB_ALL)
				break;
		}
	}
	pthread_mutex_unlock(&lw->list_lock);
	if (c != &one)
		free(c);
	return err;
}

static int wb_writeback(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	struct pwb__wb_ctx *lw = pwb__aread(&wb->lists);
	int err;

	update_bandwidth(wb, true);
	/* Context 0 owns the shared lists and claims from them like the
	 * others: a visit must not release an inode with writes in flight. */
	err = pwb__aread(&wb->shared) ? wb_writeback_shared(wb, lw, work)
				    : wb_writeback_own(wb, work);
	update_bandwidth(wb, false);
	return err;
}

/* Integrity sync of a single inode (pwb_fsync, close). -EAGAIN if a
 * re-shard moved the inode to another context after the work was queued. */
static int writeback_one_inode(struct pwb__wb_ctx *wb, struct pwb_inode *inode)
{
	struct wb_control wbc = {
		.sync_mode = PWB__SYNC_ALL,
		.nr_to_write = INT64_MAX,
	};

	pthread_mutex_lock(&wb->list_lock);
	if (PWB__RCU_DEREF(inode->wb) != wb) {
		pthread_mutex_unlock(&wb->list_lock);
		return -EAGAIN;
	}
	/* Succeeds at the first try: we hold list_lock after the wait. */
	do
		wait_inode_sync_locked(wb, inode);
	while (!claim_inode_locked(inode));
	visit_inode_locked(wb, inode, &wbc);
	pthread_mutex_unlock(&wb->list_lock);
	return wbc.err;
}

int pwb__wb_do_work(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	uint64_t t0 = pwb__clock_monotonic(NULL), written0 = 0;
	uint64_t forced0 = log_forced_ns;
	struct pwb_event ev = {
		.type = PWB_EV_WB_START,
		.ctx = wb->idx,
		.reason = work->sync_mode == PWB__SYNC_ALL ? PWB_WB_SYNC
							   : work->reason,
	};
	void (*event)(const struct pwb_event *, void *) = wb->bdi->cfg.event;
	int err;

	/* Only this flusher writes this context: the difference is this
	 * pass's, once its completions are reaped below. */
	written0 = pwb__aread(&wb->stats.written_pages);
	if (event)
		event(&ev, wb->bdi->cfg.event_arg);
	PWB_PROBE2(wb_pass_start, ev.ctx, ev.reason);

	uatomic_inc(&wb->stats.wb_passes);
	if (work->sync_mode == PWB__SYNC_ALL)
		uatomic_inc(&wb->stats.sync_passes);
	else if (work->reason == PWB_WB_PERIODIC)
		uatomic_inc(&wb->stats.periodic_passes);
	else if (work->reason == PWB_WB_BACKGROUND)
		uatomic_inc(&wb->stats.background_passes);

	if (work->inode)
		err = writeback_one_inode(wb, work->inode);
	else
		err = wb_writeback(wb, work);
	/*
	 * Only the flusher reaps an asynchronous backend's completions: let
	 * what this pass started land before the flusher may go idle, so
	 * pages never sit "under writeback" while nobody reaps them.
	 */
	wb->bdi->io->wait(wb->io_state);
	ev.duration_ns = pwb__clock_monotonic(NULL) - t0;
	uatomic_add(&wb->stats.flush_ns, ev.duration_ns);
	ev.type = PWB_EV_WB_END;
	ev.pages = pwb__aread(&wb->stats.written_pages) - written0;
	if (event)
		event(&ev, wb->bdi->cfg.event_arg);
	PWB_PROBE4(wb_pass_end, ev.ctx, ev.reason, ev.pages, ev.duration_ns);
	work->log_force_ns = log_forced_ns - forced0;
	return err;
}

/* Periodic ("kupdate") writeback, due every dirty_writeback_ms. */
void pwb__wb_check_old_data_flush(struct pwb__wb_ctx *wb)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t now = pwb__now(bdi);
	struct pwb__wb_work work = {
		.sync_mode = PWB__SYNC_NONE,
		.reason = PWB_WB_PERIODIC,
	};

	if (!bdi->writeback_interval_ns ||
	    now - wb->last_old_flush < bdi->writeback_interval_ns)
		return;
	wb->last_old_flush = now;
	/* Bounded like the kernel's: what is dirty now, plus some slack. */
	work.nr_pages =
		(int64_t)pwb__wb_dirty_pages(pwb__aread(&wb->lists)) + 1024;
	pwb__wb_do_work(wb, &work);
}

/* Background writeback while the bdi is over dirty_background_bytes. */
void pwb__wb_check_background_flush(struct pwb__wb_ctx *wb)
{
	struct pwb_bdi *bdi = wb->bdi;
	struct pwb__wb_work work = {
		.sync_mode = PWB__SYNC_NONE,
		.reason = PWB_WB_BACKGROUND,
		.nr_pages = INT64_MAX,
	};

	/* Let dirtiers kick again once this round has started. */
	pwb__aset(&bdi->bg_active, 0);
	if (over_bg_thresh(bdi))
		pwb__wb_do_work(wb, &work);
}

/*
 * Queue integrity work for @inode on its context and wait: one try. Under
 * a per-page policy the inode's pages sit on several contexts (its region
 * slices): one item per holder, all queued before any is waited for, so
 * the contexts write in parallel.
 */
static int sync_inode_once(struct pwb_inode *inode)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	struct pwb__wb_work one, *works = &one;
	struct pwb__completion done;
	unsigned int i, nr = 1, queued = 0;
	uint64_t t0 = pwb__now(inode->bdi);
	int err;

	/* RCU: a context retired meanwhile is not freed under us; work
	 * queued on it completes with -EAGAIN. */
	rcu_read_lock();
	if (caa_unlikely(PWB__RCU_DEREF(inode->region))) {
		nr = pwb__region_holders_rcu(inode, h);
		works = calloc(nr, sizeof(*works));
		if (!works) {
			pwb__rcu_read_unlock();
			return pwb__err(-ENOMEM, "cannot allocate sync work");
		}
	} else {
		h[0] = inode;
	}
	pwb__completion_init(&done, nr);
	for (i = 0; i < nr; i++) {
		struct pwb__wb_ctx *wb = PWB__RCU_DEREF(h[i]->wb);

		works[i] = (struct pwb__wb_work){
			.sync_mode = PWB__SYNC_ALL,
			.inode = h[i],
			.nr_pages = INT64_MAX,
			.done = &done,
		};
		if (wb) {
			pwb__wb_queue_work(wb, &works[i]);
			queued++;
		} else {
			/* never dirtied: nothing to write */
			pwb__completion_done(&done, 0);
		}
	}
	pwb__rcu_read_unlock();
	err = queued ? pwb__blocked_completion_wait(inode->bdi, inode, &done,
						    t0)
		     : 0;
	pwb__completion_destroy(&done);
	if (works != &one)
		free(works);
	return err;
}

/* Queue integrity work on every context at once and wait for all: one
 * try. The array is read under RCU; its contexts outlive the try (a
 * re-shard retires a context only with the flushers parked, completing
 * queued work with -EAGAIN, and frees it after a grace period). */
static int sync_all_once(struct pwb_bdi *bdi)
{
	struct pwb__wb_ctx_array *arr;
	struct pwb__completion done;
	struct pwb__wb_work *works;
	unsigned int i, nr;
	uint64_t t0 = pwb__now(bdi);
	int err;

	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	nr = arr->nr;
	works = calloc(nr, sizeof(*works));
	if (!works) {
		pwb__rcu_read_unlock();
		return pwb__err(-ENOMEM, "cannot allocate sync work");
	}
	pwb__completion_init(&done, nr);
	for (i = 0; i < nr; i++) {
		works[i].sync_mode = PWB__SYNC_ALL;
		works[i].nr_pages = INT64_MAX;
		works[i].done = &done;
		pwb__wb_queue_work(arr->ctx[i], &works[i]);
	}
	pwb__rcu_read_unlock();
	err = pwb__blocked_completion_wait(bdi, NULL, &done, t0);
	pwb__completion_destroy(&done);
	free(works);
	return err;
}

/*
 * Tries pwb__sync_and_wait() makes while re-shards run freely. A re-shard
 * that ran during a try may have moved an inode from a context the try had
 * not reached to one it had already done, so the try does not count; the
 * automatic tuner re-shards every few windows, so "re-shards are rare" is
 * no argument that the loop ends. The try after these holds reshard_lock:
 * no re-shard can spoil it, and it is the last.
 */
#define SYNC_FREE_TRIES 2

int pwb__sync_and_wait(struct pwb_bdi *bdi, struct pwb_inode *inode)
{
	unsigned int tries;

	for (tries = 1;; tries++) {
		bool last = tries > SYNC_FREE_TRIES;
		unsigned long gen;
		int err;

		/* Callers hold no lock (pwb_sync, pwb_fsync, closes): the
		 * lock order puts reshard_lock above what a try takes. */
		if (last)
			pthread_mutex_lock(&bdi->reshard_lock);
		gen = pwb__aread(&bdi->reshard_gen);
		if (inode) {
			err = sync_inode_once(inode);
		} else {
			/* Shared-list passes stop claiming meanwhile. */
			uatomic_inc(&bdi->nr_syncs);
			err = sync_all_once(bdi);
			uatomic_dec(&bdi->nr_syncs);
		}
		if (last) {
			pthread_mutex_unlock(&bdi->reshard_lock);
			/* No re-shard ran: nothing retired a context or
			 * moved the inode (-EAGAIN). */
			return err;
		}
		if (err != -EAGAIN && pwb__aread(&bdi->reshard_gen) == gen)
			return err;
	}
}

int pwb__bdi_flush_device(struct pwb_bdi *bdi, uint64_t epoch)
{
	return pwb__bdi_flush_device_for(bdi, NULL, epoch);
}

int pwb__bdi_flush_device_for(struct pwb_bdi *bdi, struct pwb_inode *caller,
			      uint64_t epoch)
{
	uint64_t target, t0;
	int err = 0;

	if (!epoch)
		return 0;	/* nothing was ever written */
	/* A flush that began after those writes finished covers them.
	 * Looked at first without the lock: a caller whose writes are
	 * covered already (a close after an fsync) must not queue behind
	 * another caller's fdatasync. The acquire pairs with the release
	 * below, after the fdatasync that covered them returned. */
	if (__atomic_load_n(&bdi->flushed_epoch, __ATOMIC_ACQUIRE) >= epoch)
		return 0;
	/* From here the caller waits for a flush: its own, or the one
	 * another caller runs under flush_lock. */
	t0 = pwb__now(bdi);
	pthread_mutex_lock(&bdi->flush_lock);
	if (bdi->flushed_epoch >= epoch)
		goto out;
	/* Writes finishing from here on are tagged target + 1: this flush
	 * may not cover them. The add is a full barrier before fdatasync. */
	target = uatomic_add_return(&bdi->write_epoch, 1) - 1;
	uatomic_inc(&bdi->nr_device_flushes);
	/* Signals do not interrupt it on local file systems; on others
	 * EINTR means "not done", so ask again. */
	while ((err = fdatasync(bdi->fd) ? -errno : 0) == -EINTR)
		;
	if (err) {
		struct pwb_inode *inode;
		struct cds_lfht_iter iter;

		pwb__errseq_set(&bdi->wb_err, err);
		/*
		 * "fsyncgate": Linux may report a failed flush once and then
		 * drop the cached data, so a second fdatasync can succeed
		 * with the data gone. Every inode whose writes this flush
		 * was to cover gets the error too.
		 */
		rcu_read_lock();
		cds_lfht_first(bdi->inodes, &iter);
		while (cds_lfht_iter_get_node(&iter)) {
			inode = caa_container_of(cds_lfht_iter_get_node(&iter),
						 struct pwb_inode, hnode);
			PWB__TSAN_ACQUIRE(&inode->hnode);
			/* Its region slices' writes count as its own. */
			if (pwb__inode_write_epoch(inode) >
			    bdi->flushed_epoch) {
				pthread_mutex_lock(&inode->lock);
				pwb__errseq_set(&inode->wb_err, err);
				pthread_mutex_unlock(&inode->lock);
			}
			cds_lfht_next(bdi->inodes, &iter);
		}
		pwb__rcu_read_unlock();
		pwb__err(err, "fdatasync of %s: %s", bdi->path,
			 strerror(-err));
	} else {
		__atomic_store_n(&bdi->flushed_epoch, target,
				 __ATOMIC_RELEASE);
	}
out:
	pthread_mutex_unlock(&bdi->flush_lock);
	pwb__blocked_since(bdi, caller,
			   caller ? pwb__aread(&caller->tenant) : NULL,
			   PWB_BLOCK_DEVICE_FLUSH, t0);
	return err;
}

int pwb__bdi_writeback(struct pwb_bdi *bdi, enum pwb_wb_reason reason,
		       unsigned int flags)
{
	struct pwb__wb_ctx_array *arr;
	struct pwb__completion done;
	struct pwb__wb_work *works = NULL, **items;
	bool wait = flags & PWB_WB_WAIT;
	unsigned int i, nr;
	uint64_t t0 = 0;

	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_bdi_writeback"))
		return -ESHUTDOWN;

	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	nr = arr->nr;
	/*
	 * Every item exists before the first is queued, so the call starts
	 * a pass on every context or on none. Waiting, the items live on
	 * this stack frame's array; not waiting, each is the flusher's, freed
	 * when it finishes.
	 */
	items = calloc(nr, sizeof(*items));
	if (wait && items)
		works = calloc(nr, sizeof(*works));
	for (i = 0; items && i < nr; i++) {
		items[i] = wait ? (works ? &works[i] : NULL)
				: calloc(1, sizeof(**items));
		if (!items[i])
			break;
	}
	if (!items || i < nr) {
		while (!wait && items && i--)
			free(items[i]);
		free(items);
		free(works);
		pwb__rcu_read_unlock();
		pwb__bdi_exit(bdi, PWB__HOLD_REF);
		return pwb__err(-ENOMEM, "pwb_bdi_writeback: out of memory "
					 "for %u work items",
				nr);
	}
	if (wait) {
		pwb__completion_init(&done, nr);
		t0 = pwb__now(bdi);
	}
	for (i = 0; i < nr; i++) {
		struct pwb__wb_work *w = items[i];

		w->auto_free = !wait;
		w->sync_mode = PWB__SYNC_NONE;
		w->reason = reason;
		w->done = wait ? &done : NULL;
		if (reason == PWB_WB_BACKGROUND)
			w->nr_pages = INT64_MAX;
		else	/* bounded by what is dirty now, like the kernel */
			w->nr_pages = (int64_t)pwb__wb_dirty_pages(
					      arr->ctx[i]) +
				      1024;
		pwb__wb_queue_work(arr->ctx[i], w);
	}
	pwb__rcu_read_unlock();
	free(items);
	if (wait) {
		pwb__blocked_completion_wait(bdi, NULL, &done, t0);
		pwb__completion_destroy(&done);
	}
	free(works);
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return 0;
}

PWB_API int pwb_bdi_writeback(struct pwb_bdi *bdi, enum pwb_wb_reason reason,
			      unsigned int flags)
{
	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_writeback: NULL bdi");
	if (reason != PWB_WB_PERIODIC && reason != PWB_WB_BACKGROUND &&
	    reason != PWB_WB_ALL)
		return pwb__err(-EINVAL, "pwb_bdi_writeback: unknown reason "
					 "%d",
				(int)reason);
	if (flags & ~PWB_WB_WAIT)
		return pwb__err(-EINVAL, "pwb_bdi_writeback: unknown flags "
					 "0x%x",
				flags);
	if ((flags & PWB_WB_WAIT) && pwb__in_flusher())
		return pwb__err(-EDEADLK, "pwb_bdi_writeback: cannot wait "
					  "from an ops callback");
	return pwb__bdi_writeback(bdi, reason, flags);
}

PWB_API int pwb_sync(struct pwb_bdi *bdi)
{
	pwb__errseq_t since;
	int err, ferr, werr;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_sync: NULL bdi");
	err = pwb__no_flusher("pwb_sync");
	if (err)
		return err;
	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_sync"))
		return -ESHUTDOWN;
	/* Our own cursor, as in pwb_fsync(): concurrent syncs that started
	 * before an error was reported each get it, later ones do not. */
	pthread_mutex_lock(&bdi->cursor_lock);
	since = bdi->sync_cursor;
	pthread_mutex_unlock(&bdi->cursor_lock);
	werr = pwb__sync_and_wait(bdi, NULL);
	ferr = pwb__bdi_flush_device(bdi, pwb__bdi_written_epoch(bdi));
	pthread_mutex_lock(&bdi->cursor_lock);
	err = pwb__errseq_check_and_advance(&bdi->wb_err, &since);
	bdi->sync_cursor = since;
	pthread_mutex_unlock(&bdi->cursor_lock);
	if (!err)
		err = ferr;
	if (!err && werr == -ENOMEM)
		err = werr;
	if (err)
		pwb__err(err, "pwb_sync of %s: %s", bdi->path,
			 pwb__strerror(err));
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return err;
}

/* ---------------------------------------------------------------------- */
/* max_inflight: a slot per request in flight                             */

/*
 * max_inflight: a cap on writes in flight over the whole bdi (network
 * storage that takes only so many). A flusher that finds the cap reached
 * first completes its own writes, then sleeps until another finishes.
 */
void pwb__inflight_get(struct pwb__wb_ctx *wb)
{
	struct pwb_bdi *bdi = wb->bdi;
	unsigned int max = bdi->cfg.max_inflight;

	if (!max)
		return;
	pthread_mutex_lock(&bdi->inflight_lock);
	while (bdi->inflight >= max) {
		pthread_mutex_unlock(&bdi->inflight_lock);
		bdi->io->wait(wb->io_state);
		pthread_mutex_lock(&bdi->inflight_lock);
		if (bdi->inflight >= max)
			pthread_cond_wait(&bdi->inflight_cond,
					  &bdi->inflight_lock);
	}
	bdi->inflight++;
	pthread_mutex_unlock(&bdi->inflight_lock);
}

void pwb__inflight_put(struct pwb_bdi *bdi, unsigned int nr)
{
	if (!bdi->cfg.max_inflight)
		return;
	pthread_mutex_lock(&bdi->inflight_lock);
	bdi->inflight -= nr;
	pthread_cond_broadcast(&bdi->inflight_cond);
	pthread_mutex_unlock(&bdi->inflight_lock);
}

/* ---------------------------------------------------------------------- */
/* the rate cap's sleep on a flusher                                      */

bool pwb__rate_sleep(struct pwb__wb_ctx *wb, uint64_t wait)
{
	struct pwb_bdi *bdi = wb->bdi;

	while (wait) {
		uint64_t ns = PWB__MIN(wait, RATE_SLICE_NS);
		struct timespec ts = {
			.tv_sec = (time_t)(ns / PWB__NSEC_PER_SEC),
			.tv_nsec = (long)(ns % PWB__NSEC_PER_SEC),
		};

		if (pwb__wb_work_pending(wb) || pwb__aread(&bdi->park_req))
			return false;
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		uatomic_add(&wb->stats.rate_limited_ns, ns);
		/* The bdi's clock decides (tests inject it). */
		wait = PWB__MIN(wait - ns, pwb__rate_wait_ns(&bdi->rate,
							     pwb__now(bdi)));
	}
	return true;
}

/* ---------------------------------------------------------------------- */
/* Write failures: bounded retry back-off and failed inodes               */

static uint64_t next_backoff(uint64_t cur)
{
	return cur ? PWB__MIN(cur * 2, PWB__WB_BACKOFF_MAX_NS)
		   : PWB__WB_BACKOFF_MIN_NS;
}

void pwb__wb_write_result_locked(struct pwb_inode *inode,
				 struct pwb__wb_ctx *wb, int err)
{
	uint64_t now;

	pwb__lockdep_assert_held(&inode->lock);

	if (!err) {
		/* The device takes writes again: end an ENOSPC pause. */
		wb->nospc_backoff_ns = 0;
		wb->nospc_until = 0;
		/* All data landed: the failure run is over. */
		if (!inode->map.count[PWB__TAG_DIRTY] &&
		    !inode->map.count[PWB__TAG_WRITEBACK]) {
			inode->wb_failures = 0;
			inode->backoff_ns = 0;
			inode->retry_after = 0;
		}
		return;
	}
	now = pwb__now(inode->bdi);
	inode->fail_pass = pwb__aread(&wb->stats.wb_passes);
	if (err == -ENOSPC) {
		/* A full file system fails every inode alike: pause the
		 * whole context, not each inode after its own failure. */
		wb->nospc_backoff_ns = next_backoff(wb->nospc_backoff_ns);
		wb->nospc_until = now + wb->nospc_backoff_ns;
	}
	/* A visit that writes many requests fails once, not per request. */
	if (inode->wb_failures && inode->fail_visit == inode->wb_visit)
		return;
	inode->fail_visit = inode->wb_visit;
	inode->wb_failures++;
	inode->backoff_ns = next_backoff(inode->backoff_ns);
	inode->retry_after = now + inode->backoff_ns;
	if (inode->bdi->cfg.max_write_failures &&
	    inode->wb_failures >= inode->bdi->cfg.max_write_failures &&
	    !inode->failed_err)
		inode->failed_err = err;
}

bool pwb__wb_visit_end_locked(struct pwb_inode *inode, uint64_t written)
{
	bool failed = inode->wb_failures &&
		      inode->fail_visit == inode->wb_visit;

	pwb__lockdep_assert_held(&inode->lock);

	/*
	 * A visit that wrote and saw no failure breaks the run of
	 * consecutive failures, unless writes are still in flight (an
	 * asynchronous backend): their failure would belong to this visit.
	 */
	if (!failed && written && !inode->map.count[PWB__TAG_WRITEBACK]) {
		inode->wb_failures = 0;
		inode->backoff_ns = 0;
		inode->retry_after = 0;
	}
	return failed;
}

bool pwb__wb_backing_off_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb, bool periodic)
{
	pwb__lockdep_assert_held(&inode->lock);

	if (!inode->wb_failures)
		return false;
	/* Failed in this very pass: retrying at once would spin. */
	if (inode->fail_pass == pwb__aread(&wb->stats.wb_passes))
		return true;
	return periodic && pwb__now(inode->bdi) < inode->retry_after;
}
