// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * discard.c - dropping dirty pages, stable pages and the page-state query
 *
 * pwb_inode_discard() is the kernel's truncate_inode_pages_range() for an
 * application's page cache: the pages of a range stop being dirty, writes
 * of them already in flight are waited for, and from then on libpwb leaves
 * their memory and device space alone until they are dirtied again.
 * pwb_wait_writeback() is folio_wait_stable(): it waits until no write of a
 * page in a range is in flight, so the application may change the page
 * (checksummed pages must not change while the device reads them).
 *
 * Both wait on inode->wb_cond, which pwb__io_complete() signals when it
 * clears WRITEBACK tags (pwb__inode_writes_ended()). A discard also waits
 * until every end_write call already started for the inode has returned
 * (inode->nr_ending), so that no callback for a discarded page runs after
 * it returns. Writes of discarded pages that fail while the discard runs
 * are not made dirty again and their errors are not recorded
 * (pwb__redirty_failed_locked()): see pwb.h for what that means to
 * pwb_fsync() and pwb_sync().
 *
 * Under a per-page policy ("region") an inode's pages are held by several
 * hidden inodes, its slices (region.c): the inode itself keeps the pages
 * dirtied before the policy and its metadata, each slice the pages routed
 * to its context. Every call here works on each holder in turn, under that
 * holder's own lock (never two at once), with the same rules per holder:
 * its own discard range, wb_cond, nr_ending and LSNs. A discard drops the
 * range in every holder before it waits for any, and claims the holders in
 * the order pwb__region_holders_rcu() lists them, so two discards of one
 * inode never wait for each other crosswise.
 */
#include "base.h"
#include "pagemap.h"
#include "bdi.h"
#include "inode.h"
#include "region.h"
#include "page-owner.h"
#include "blocked.h"

/* Pages of [@off, @off + @len) for a public range call: every page the
 * range touches (@whole false), or only the pages wholly inside it (@whole
 * true; a discard must not drop a partly covered page). len == UINT64_MAX
 * means "to the end". Return 0 and the pages in *@first..*@last, 1 if no
 * page qualifies, or -EOVERFLOW (message naming @who). */
static int page_range(const struct pwb_inode *inode, const char *who,
		      uint64_t off, uint64_t len, bool whole, uint64_t *first,
		      uint64_t *last)
{
	unsigned int shift = inode->bdi->page_shift;
	uint64_t mask = (1ull << shift) - 1, end;

	if (!len)
		return 1;
	if (len == UINT64_MAX) {
		end = UINT64_MAX;
	} else if (off > UINT64_MAX - (len - 1)) {
		return pwb__err(-EOVERFLOW, "%s: range %llu+%llu wraps past "
					    "2^64 (UINT64_MAX means \"to the "
					    "end\")",
				who, (unsigned long long)off,
				(unsigned long long)len);
	} else {
		end = off + (len - 1);	/* last byte */
	}
	if (!whole) {
		*first = off >> shift;
		*last = end >> shift;
		return 0;
	}
	/* Round in: the first page starting at or after @off, the last
	 * page ending at or before @end (to the end: the last page). */
	if (off & mask) {
		if (off > UINT64_MAX - mask)
			return 1;
		*first = (off >> shift) + 1;
	} else {
		*first = off >> shift;
	}
	if (end == UINT64_MAX || (end & mask) == mask)
		*last = end >> shift;
	else if (end >> shift)
		*last = (end >> shift) - 1;
	else
		return 1;
	return *first > *last;
}

/* The argument and thread checks of the public pwb_inode_discard() and
 * pwb_wait_writeback() (@who): 0 or a negative errno (message set). */
static int range_call_check(struct pwb_inode *inode, const char *who)
{
	if (!inode)
		return pwb__err(-EINVAL, "%s: NULL inode", who);
	return pwb__no_flusher(who);
}

/*
 * The entry of pwb__inode_discard() and pwb__wait_writeback() (@who),
 * after range_call_check(): a reference that holds a close off
 * (pwb__inode_enter(HOLD_REF): -EBADF once the inode is being closed),
 * the pages of the range (see page_range) and the holders of the inode's
 * pages in *@h (at most 1 + PWB_MAX_WB_CTX; the reference keeps them, as
 * slices are freed with their inode). Return their number with the
 * reference taken, 0 if there is nothing to do, or a negative errno
 * (message set); in both of those no reference is held.
 */
static int range_call_begin(struct pwb_inode *inode, const char *who,
			    uint64_t off, uint64_t len, bool whole,
			    uint64_t *first, uint64_t *last,
			    struct pwb_inode **h)
{
	unsigned int nr;
	int ret;

	ret = pwb__inode_enter(inode, PWB__HOLD_REF, who);
	if (ret)
		return ret;
	ret = page_range(inode, who, off, len, whole, first, last);
	if (ret) {
		pwb__inode_exit(inode, PWB__HOLD_REF);
		return ret < 0 ? ret : 0;
	}
	rcu_read_lock();
	nr = pwb__region_holders_rcu(inode, h);
	pwb__rcu_read_unlock();
	return (int)nr;
}

/* Sleep on wb_cond once; the waiter count tells completions to signal.
 * The sleep counts as @cause (enum pwb_block_cause). Caller holds
 * inode->lock. */
static void wait_wb_cond_locked(struct pwb_inode *inode, unsigned int cause)
{
	uint64_t t0 = pwb__now(inode->bdi);

	pwb__lockdep_assert_held(&inode->lock);

	pwb__aset(&inode->wb_waiters, inode->wb_waiters + 1);
	pthread_cond_wait(&inode->wb_cond, &inode->lock);
	pwb__aset(&inode->wb_waiters, inode->wb_waiters - 1);
	pwb__blocked_since(inode->bdi, inode, inode->tenant, cause, t0);
}

/*
 * Wait until no page of [first, last] is under writeback and, if
 * @endings, no end_write of @inode is still running. Caller holds
 * inode->lock.
 */
static void wait_stable_locked(struct pwb_inode *inode, uint64_t first,
			       uint64_t last, bool endings)
{
	pwb__lockdep_assert_held(&inode->lock);

	for (;;) {
		uint64_t found;
		bool busy;

		if (pwb__map_find(&inode->map, PWB__TAG_WRITEBACK, first,
				  &found) &&
		    found <= last) {
			wait_wb_cond_locked(inode, PWB_BLOCK_STABLE_PAGE);
			continue;
		}
		if (!endings)
			return;
		/*
		 * nr_ending falls outside the lock: announce this waiter
		 * first, then read it; the completion drops it, then reads
		 * wb_waiters (pwb__inode_writes_ended). Fenced on both
		 * sides, one of the two sees the other, and the waiter stays
		 * announced until it sleeps.
		 */
		pwb__aset(&inode->wb_waiters, inode->wb_waiters + 1);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		busy = pwb__aread(&inode->nr_ending) != 0;
		if (busy) {
			uint64_t t0 = pwb__now(inode->bdi);

			pthread_cond_wait(&inode->wb_cond, &inode->lock);
			pwb__blocked_since(inode->bdi, inode, inode->tenant,
					   PWB_BLOCK_STABLE_PAGE, t0);
		}
		pwb__aset(&inode->wb_waiters, inode->wb_waiters - 1);
		if (!busy)
			return;
	}
}

void pwb__inode_writes_ended(struct pwb_inode *inode, bool ending)
{
	if (!ending) {
		/* Caller holds inode->lock: the tags just cleared. */
		if (inode->wb_waiters)
			pthread_cond_broadcast(&inode->wb_cond);
		return;
	}
	/*
	 * After end_write, without the lock: a close that sees nr_ending at
	 * 0 may free the inode after a grace period, so the section keeps
	 * it for the two reads and the broadcast below.
	 */
	rcu_read_lock();
	uatomic_dec(&inode->nr_ending);
	/* Pairs with the fence of wait_stable_locked(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (pwb__aread(&inode->wb_waiters)) {
		pthread_mutex_lock(&inode->lock);
		pthread_cond_broadcast(&inode->wb_cond);
		pthread_mutex_unlock(&inode->lock);
	}
	pwb__rcu_read_unlock();
}

/* Set DIRTY on [first, last] (pages of a failed write); add what became
 * dirty to *@n, or return -ENOMEM. */
static int redirty(struct pwb_inode *inode, uint64_t first, uint64_t last,
		   int64_t *n)
{
	int64_t r;

	if (first > last)
		return 0;
	r = pwb__map_set(&inode->map, PWB__TAG_DIRTY, first, last);
	if (r < 0)
		return (int)r;
	*n += r;
	return 0;
}

int64_t pwb__redirty_failed_locked(struct pwb_inode *inode, uint64_t first,
				   uint64_t last, bool *counted)
{
	uint64_t df = inode->discard_first, dl = inode->discard_last;
	int64_t n = 0;
	int err;

	pwb__lockdep_assert_held(&inode->lock);

	if (!inode->discarding || last < df || first > dl) {
		*counted = true;
		return pwb__map_set(&inode->map, PWB__TAG_DIRTY, first, last);
	}
	/* The pages outside the discarded range, on either side of it. */
	*counted = first < df || last > dl;
	err = first < df ? redirty(inode, first, df - 1, &n) : 0;
	if (!err && last > dl)
		err = redirty(inode, dl + 1, last, &n);
	return err ? err : n;
}

/*
 * Drop the DIRTY and TOWRITE tags of [first, last] and keep the context's
 * dirty-page counter exact. Return true if the inode is left with neither
 * dirty pages nor dirty metadata (it should leave the dirty lists).
 * Caller holds inode->lock.
 */
static bool drop_dirty_locked(struct pwb_inode *inode, uint64_t first,
			      uint64_t last)
{
	uint64_t n;

	pwb__lockdep_assert_held(&inode->lock);

	/* A page dirtied again later starts from LSN 0, not from the LSN of
	 * the change that was discarded. The range may reach to 2^52 pages:
	 * the reset visits only the leaves that exist. */
	pwb__map_lsn_reset(&inode->map, first, last - first + 1);
	n = pwb__map_clear(&inode->map, PWB__TAG_DIRTY, first, last);
	pwb__map_clear(&inode->map, PWB__TAG_TOWRITE, first, last);
	/* Counted where the inode lives, as pwb_mark_dirty and writepages
	 * do; inode->wb changes only under inode->lock. A never-dirtied
	 * inode (no context) had nothing to drop. */
	if (n)
		uatomic_sub(&inode->wb->stats.dirty_pages, n);
	if (n && inode->tenant)
		pwb__tenant_dropped(inode->tenant, n << inode->bdi->page_shift);
	if (!inode->map.count[PWB__TAG_DIRTY])
		inode->state &= ~PWB__I_DIRTY_PAGES;
	return n && !(inode->state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META));
}

/* A discard of every page: errors recorded on the inode so far belong to
 * discarded pages (or to metadata written since), so they are dropped with
 * the failed mark. Caller holds inode->lock. */
static void forget_errors_locked(struct pwb_inode *inode)
{
	pwb__lockdep_assert_held(&inode->lock);

	pwb__errseq_check_and_advance(&inode->wb_err, &inode->fsync_cursor);
	pwb__inode_clear_error_locked(inode);
}

/* A discard of [first, last] begins in holder @h: claim it (one discard
 * at a time per holder: completions test one range) and drop the range's
 * dirty state; every error so far too if @all pages are discarded. Return
 * drop_dirty_locked()'s answer. Takes and drops h->lock. */
static bool discard_begin(struct pwb_inode *h, uint64_t first, uint64_t last,
			  bool all)
{
	bool detach;

	pthread_mutex_lock(&h->lock);
	while (h->discarding)
		wait_wb_cond_locked(h, PWB_BLOCK_BUSY);	/* another discard */
	h->discarding = true;
	h->discard_first = first;
	h->discard_last = last;
	detach = drop_dirty_locked(h, first, last);
	if (all)
		forget_errors_locked(h);
	pthread_mutex_unlock(&h->lock);
	return detach;
}

/* The discard of discard_begin() ends in @h: wait for the range's writes
 * and end_write calls, then let the next discard in. */
static void discard_end(struct pwb_inode *h, uint64_t first, uint64_t last,
			bool detach)
{
	pthread_mutex_lock(&h->lock);
	wait_stable_locked(h, first, last, true);
	h->discarding = false;
	if (h->wb_waiters)
		pthread_cond_broadcast(&h->wb_cond);
	pthread_mutex_unlock(&h->lock);
	/* Our reference keeps the inode (and its slices) open, so the
	 * context is set if there were dirty pages to drop. */
	if (detach)
		pwb__inode_requeue_clean(h);
}

int pwb__inode_discard(struct pwb_inode *inode, uint64_t off, uint64_t len)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	bool detach[1 + PWB_MAX_WB_CTX], all;
	uint64_t first, last;
	int i, nr, ret;

	nr = range_call_begin(inode, "pwb_inode_discard", off, len, true,
			      &first, &last, h);
	if (nr <= 0)
		return nr;
	all = first == 0 && last == UINT64_MAX >> inode->bdi->page_shift;
	for (i = 0; i < nr; i++)
		detach[i] = discard_begin(h[i], first, last, all);
	for (i = 0; i < nr; i++)
		discard_end(h[i], first, last, detach[i]);
	ret = 0;
	if (inode->pcache)	/* library-owned pages: drop the cached ones */
		ret = inode->bdi->page_owner->discarded(inode, off, len, first,
							last);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return ret;
}

PWB_API int pwb_inode_discard(struct pwb_inode *inode, uint64_t off,
			      uint64_t len)
{
	int ret;

	pwb__err_clear();
	ret = range_call_check(inode, "pwb_inode_discard");
	return ret ? ret : pwb__inode_discard(inode, off, len);
}

int pwb__wait_writeback(struct pwb_inode *inode, uint64_t off, uint64_t len)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	uint64_t first, last;
	int i, nr;

	nr = range_call_begin(inode, "pwb_wait_writeback", off, len, false,
			      &first, &last, h);
	if (nr <= 0)
		return nr;
	for (i = 0; i < nr; i++) {
		pthread_mutex_lock(&h[i]->lock);
		wait_stable_locked(h[i], first, last, false);
		pthread_mutex_unlock(&h[i]->lock);
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return 0;
}

PWB_API int pwb_wait_writeback(struct pwb_inode *inode, uint64_t off,
			       uint64_t len)
{
	int ret;

	pwb__err_clear();
	ret = range_call_check(inode, "pwb_wait_writeback");
	return ret ? ret : pwb__wait_writeback(inode, off, len);
}

void pwb__inode_drop_dirty_held(struct pwb_inode *inode, uint64_t first,
				uint64_t last)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr;

	/* The caller's reference keeps the holders (range_call_begin). */
	rcu_read_lock();
	nr = pwb__region_holders_rcu(inode, h);
	pwb__rcu_read_unlock();
	for (i = 0; i < nr; i++) {
		bool detach = false;

		pthread_mutex_lock(&h[i]->lock);
		/*
		 * Drop and wait in one hold until neither tag is left: a
		 * write in flight may end by tagging the pages DIRTY again
		 * (get_page said "not now", or the write failed), and a
		 * flusher may take a DIRTY page to WRITEBACK between a
		 * wait and a drop, then find it gone (-EIO). With no DIRTY
		 * tag and nothing in flight under the lock, nothing tags
		 * the pages again (the caller keeps them from being
		 * dirtied).
		 */
		for (;;) {
			uint64_t found;

			detach |= drop_dirty_locked(h[i], first, last);
			if (!pwb__map_find(&h[i]->map, PWB__TAG_WRITEBACK,
					   first, &found) ||
			    found > last)
				break;
			wait_wb_cond_locked(h[i], PWB_BLOCK_STABLE_PAGE);
		}
		pthread_mutex_unlock(&h[i]->lock);
		/* The reference keeps the inode open, so the context is
		 * set if there were dirty pages to drop (discard_end); a
		 * holder dirty again meanwhile stays on its lists. */
		if (detach)
			pwb__inode_requeue_clean(h[i]);
	}
}

int pwb__page_state(struct pwb_inode *inode, uint64_t index)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr;
	int state = 0;

	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_page_state");
	/* A page is dirty or in flight in at most one holder (region.c). */
	nr = pwb__region_holders_rcu(inode, h);
	for (i = 0; i < nr; i++) {
		pthread_mutex_lock(&h[i]->lock);
		if (pwb__map_test(&h[i]->map, PWB__TAG_DIRTY, index))
			state |= PWB_PAGE_DIRTY;
		if (pwb__map_test(&h[i]->map, PWB__TAG_WRITEBACK, index))
			state |= PWB_PAGE_WRITEBACK;
		pthread_mutex_unlock(&h[i]->lock);
	}
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return state;
}

PWB_API int pwb_page_state(struct pwb_inode *inode, uint64_t index)
{
	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_page_state: NULL inode");
	return pwb__page_state(inode, index);
}
