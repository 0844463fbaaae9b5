// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-write.c - library-owned pages: pwb_write(), the write path, with
 * the stable-page protocol of pcache.h; the file size and truncate
 * (pwb_inode_set_size(), and pwb_inode_discard()'s end on such an inode);
 * and the space layer's reservations for pages about to be dirtied.
 */
#include "pcache.h"
#include "space.h"

#include <limits.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* The space layer                                                        */

/*
 * The space layer (space.c), for inodes opened without map_page
 * (allocator mode, inode->space set); user-map inodes have none.
 */

/* Before page @index is dirtied: reserve device space for it if it has
 * none, so -ENOSPC reaches pwb_write(); *@newly: this call reserved it. */
static int pcache_reserve(struct pwb_inode *inode, uint64_t index,
			  bool *newly)
{
	*newly = false;
	if (!inode->space)
		return 0;
	return pwb__space_reserve_page(inode, index, newly);
}

/* Page @index is about to get data of its own: it no longer reads as
 * zeros (pcache_dev_lookup(), pcache-read.c). 0, or -ENOMEM (message
 * set). */
static int pcache_unzero(struct pwb_inode *inode, uint64_t index)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	int64_t r = 0;

	if (inode->space)
		return 0;
	pthread_mutex_lock(&inode->lock);
	if (pwb__extmap_count(&pc->zeroed))
		r = pwb__extmap_remove(&pc->zeroed, index, 1, NULL, NULL);
	pthread_mutex_unlock(&inode->lock);
	return r < 0 ? pwb__err((int)r, "pwb_write: out of memory") : 0;
}

/* A truncate cut pages [first, last] off a user-map inode: they read as
 * zeros until written again. 0, or -ENOMEM (message set). */
static int pcache_zero_range(struct pwb_inode *inode, uint64_t first,
			     uint64_t last)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	int ret;

	if (inode->space || first > last)
		return 0;
	pthread_mutex_lock(&inode->lock);
	ret = (int)PWB__MIN(pwb__extmap_remove(&pc->zeroed, first,
					       last - first + 1, NULL, NULL),
			    0);
	if (!ret)
		ret = pwb__extmap_insert(&pc->zeroed, first, last - first + 1,
					 0, false);
	pthread_mutex_unlock(&inode->lock);
	return ret ? pwb__err(ret, "truncate: out of memory") : 0;
}

/* Give back a reservation pcache_reserve() took for page @index. */
static void pcache_unreserve(struct pwb_inode *inode, uint64_t index)
{
	if (inode->space)
		pwb__space_unreserve(inode, index);
}

/* Pages [first, last] were discarded or truncated away: free their
 * blocks and reservations. */
static void pcache_punch(struct pwb_inode *inode, uint64_t first,
			 uint64_t last)
{
	if (!inode->space)
		return;
	pwb__space_punch(inode, first,
			 last == UINT64_MAX ? UINT64_MAX - first
					    : last - first + 1);
}

/* ---------------------------------------------------------------------- */
/* Writes and the size                                                    */

static void size_raise(struct pwb__pcache_inode *pc, uint64_t end)
{
	uint64_t s = pwb__aread(&pc->size);

	while (s < end) {
		uint64_t old = uatomic_cmpxchg(&pc->size, s, end);

		if (old == s)
			break;
		s = old;
	}
}

/*
 * Change bytes [pgoff, pgoff + n) of page @index to @src (NULL: zeros)
 * and dirty it. @grow: raise the size to the end of the change. @flags:
 * PWB_RW_* (pwb_write2()): with NOWAIT, -EAGAIN and nothing changed
 * where it would wait (the page's lock, a read of the page, its write in
 * flight, room in the cache); with DONTCACHE the page is marked to be
 * freed once written. 0 or a negative errno; *@dirtied tells whether the
 * page was changed and dirtied (also when pwb_mark_dirty then failed
 * with -ETIMEDOUT).
 */
static inline __attribute__((always_inline)) int
write_page(struct pwb_inode *inode, uint64_t index, unsigned int pgoff,
	   unsigned int n, const void *src, bool grow, unsigned int flags,
	   bool *dirtied)
{
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int ps = pwb__page_size(bdi);
	uint64_t start = index << bdi->page_shift;
	struct pwb__page *p;
	bool reserved = false, whole = false;
	char *data;
	int ret;

	*dirtied = false;
	ret = pwb__pcache_page_find(inode, index, true,
				    (flags & PWB_RW_NOWAIT) ? PWB__ROOM_RECLAIM
							    : PWB__ROOM_WAIT,
				    &p);
	if (ret)
		return ret == -ENOBUFS ? -EAGAIN : ret;
	/* Not while a read fills it (it would land on the new data). */
	if (!(flags & PWB_RW_NOWAIT)) {
		pwb__page_lock_settled(inode, p);
	} else if (!pwb__page_trylock_settled(p)) {
		pwb__pcache_lru_add(inode->bdi->pcache, p,
				    pwb__pcache_owner_ctx(inode));
		pwb__page_put(p);
		return -EAGAIN;
	}
	/* Filled before its space is reserved: a page without a block gets
	 * none until it is reserved, so the fill reads zeros for it, and a
	 * block allocated meanwhile reads as zeros until written (space.c,
	 * unwritten extents). */
	if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE)) {
		if (n == ps) {
			/* Up to date once copied: a write that stops before
			 * leaves the buffer's old bytes unreadable. */
			whole = true;
		} else if ((flags & PWB_RW_NOWAIT) &&
			   start < pwb__aread(&inode->pcache->size)) {
			/* The device may hold it: a read (conservative for
			 * holes, which read as zeros). */
			ret = -EAGAIN;
			goto out;
		} else {
			ret = pwb__pcache_fill_locked(
				inode, p, pwb__aread(&inode->pcache->size));
			if (ret)
				goto out;
		}
	}
	ret = pcache_reserve(inode, index, &reserved);
	if (ret)
		goto out;
	/* Stable pages: latch (a full barrier), then wait for a write in
	 * flight; a flusher that tags the page from now on sees the latch
	 * in get_page and leaves the page for later. */
	uatomic_or(&p->flags, PWB__PG_WLATCH);
	if (!(flags & PWB_RW_NOWAIT))
		ret = pwb__wait_writeback(inode, start, ps);
	else if (pwb__page_state(inode, index) & PWB_PAGE_WRITEBACK)
		ret = -EAGAIN;
	if (!ret)
		ret = pcache_unzero(inode, index);
	if (ret) {
		uatomic_and(&p->flags, ~PWB__PG_WLATCH);
		goto out;
	}
	data = (char *)pwb__page_addr(p, index, bdi->page_shift) + pgoff;
	if (src)
		memcpy(data, src, n);
	else
		memset(data, 0, n);
	if (whole)
		uatomic_or(&p->flags, PWB__PG_UPTODATE);
	if (flags & PWB_RW_DONTCACHE) {
		/* Before it is dirtied: the end of its write sees the mark. */
		uatomic_or(&p->flags, PWB__PG_DROP);
		if (!pwb__aread(&inode->pcache->dontcache))
			uatomic_set(&inode->pcache->dontcache, 1);
	}
	uatomic_and(&p->flags, ~PWB__PG_WLATCH);
	uatomic_or(&p->flags, PWB__PG_REF);
	pwb__page_unlock(p);
	if (grow)
		size_raise(inode->pcache, start + pgoff + n);
	/* Dirtied while we hold the reference: reclaim cannot drop the
	 * page in between (it needs the count at 0). */
	if (flags & PWB_RW_NOWAIT) {
		/* Checked before the page (write_range()): the debt of this
		 * one waits for a call that may sleep. */
		pwb__throttle_set_nowait(true);
		ret = pwb__mark_dirty(inode, start, ps);
		pwb__throttle_set_nowait(false);
	} else {
		ret = pwb__mark_dirty(inode, start, ps);
	}
	*dirtied = !ret || ret == -ETIMEDOUT || ret == -ESHUTDOWN;
	if (!*dirtied && reserved &&
	    !(pwb__page_state(inode, index) & PWB_PAGE_DIRTY))
		pcache_unreserve(inode, index);
	pwb__page_put(p);
	return ret;
out:
	/* Not dirtied: give back the reservation this call took, so no
	 * block is given to a page without data (and reserved_bytes does
	 * not stay up until the close). */
	if (reserved)
		pcache_unreserve(inode, index);
	pwb__page_unlock(p);
	/* Not dirtied: reclaimable, even if never filled. */
	pwb__pcache_lru_add(inode->bdi->pcache, p,
			    pwb__pcache_owner_ctx(inode));
	pwb__page_put(p);
	return ret;
}

/*
 * Write @src to the 1 << @order pages from @index (aligned) as one new
 * folio, when none of them is cached: one lookup, one buffer, one
 * dirtying for all of them. Its room in the cache is charged first, and
 * waited for as a single page's is (a stream into a full cache keeps
 * writing folios: as single pages it cost more in every layer, and each
 * page's wait asked the flushers for a pass of its own). The space for
 * each page is reserved after that wait and before the folio is seen, so
 * that nothing can fail once it is: it stays locked, latched and not up
 * to date until the copy is whole (no reader fills it, no flusher writes
 * it; nothing was in flight from its new buffer, so no write needs
 * waiting for). Return as write_page() does (*@dirtied for all the
 * pages; -ETIMEDOUT if no room came), or 1: not made (a folio too large
 * for the cache and no room now, scattered free memory, a page of the
 * range cached, no space; nothing changed): write the pages one by one.
 */
static int write_folio(struct pwb_inode *inode, uint64_t index,
		       unsigned int order, const void *src, bool *dirtied)
{
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t nr = 1ull << order, i;
	uint64_t start = index << bdi->page_shift;
	size_t bytes = (size_t)nr << bdi->page_shift;
	uint64_t newly[(1u << (PWB__FOLIO_ORDERS - 1)) / 64] = { 0 };
	struct pwb__page *f;
	int ret;

	*dirtied = false;
	/* Most misses before any charge or reservation (the add checks
	 * again). */
	if (!pwb__pcache_range_free(inode, index, nr))
		return 1;
	ret = pwb__pcache_charge_folio(inode, (unsigned int)nr);
	if (ret == -ENOBUFS)
		return 1;
	if (ret)
		return ret;
	/* The folio's space in one call (one lock, one walk of the inode's
	 * extents and reservations; page by page it was about a fifth of a
	 * 1 MiB pwb_write()); @newly says which pages it reserved, to give
	 * back if the folio is not dirtied. */
	i = nr;
	if (inode->space &&
	    pwb__space_reserve_mask(inode, index, nr, newly)) {
		pwb__err_clear();
		goto unreserve;
	}
	if (pwb__pcache_folio_add(inode, index, order, &f))
		goto unreserve_uncharged;
	memcpy(f->data, src, bytes);
	uatomic_or(&f->flags, PWB__PG_UPTODATE | PWB__PG_REF);
	uatomic_and(&f->flags, ~PWB__PG_WLATCH);
	pwb__page_unlock(f);
	size_raise(inode->pcache, start + bytes);
	ret = pwb__mark_dirty(inode, start, bytes);
	*dirtied = !ret || ret == -ETIMEDOUT || ret == -ESHUTDOWN;
	if (!*dirtied) {
		for (i = 0; i < nr; i++)
			if ((newly[i / 64] & (1ull << (i % 64))) &&
			    !(pwb__page_state(inode, index + i) &
			      PWB_PAGE_DIRTY))
				pcache_unreserve(inode, index + i);
		/* Not dirtied: reclaimable. */
		pwb__pcache_lru_add(bdi->pcache, f,
				    pwb__pcache_owner_ctx(inode));
	}
	pwb__page_put(f);
	return ret;
unreserve:
	pwb__pcache_uncharge(bdi->pcache, nr);
unreserve_uncharged:
	/* As write_page() does: not a page another writer dirtied since
	 * (it found the reservation made). */
	while (i--)
		if ((newly[i / 64] & (1ull << (i % 64))) &&
		    !(pwb__page_state(inode, index + i) & PWB_PAGE_DIRTY))
			pcache_unreserve(inode, index + i);
	return 1;
}

/*
 * The hit path of pwb_write(): a range inside one cached page that is
 * already dirty and not being written. It needs no new dirtying, no
 * reservation and no wait, so it holds neither a reference on the inode nor
 * any lock but the page's and, for the tag check, inode->lock once. Holding
 * the page lock across check and copy keeps the data stable: a flusher
 * that takes the page after the check finds the lock taken in get_page and
 * leaves the page for a later pass; one that took it before is seen by the
 * check (WRITEBACK), and the slow path waits for its write. -EAGAIN: take
 * the slow path.
 */
static inline __attribute__((always_inline)) ssize_t
write_fast(struct pwb_inode *inode, const void *buf, size_t len,
	   uint64_t off)
{
	struct pwb__page *p;
	unsigned int pgoff;
	uint64_t index;
	bool ok;

	/* A flusher (an ops callback) takes the slow path's -EDEADLK, as
	 * for a page not cached. */
	if (!buf || PWB__RCU_DEREF(inode->region) || pwb__in_flusher())
		return -EAGAIN;
	p = pwb__fast_lock_page(inode, len, off, &pgoff);
	if (!p)
		return -EAGAIN;
	index = off >> inode->bdi->page_shift;
	pthread_mutex_lock(&inode->lock);
	ok = !(inode->state & PWB__I_FREEING) && !pwb__aread(&inode->region) &&
	     pwb__map_test(&inode->map, PWB__TAG_DIRTY, index) &&
	     !pwb__map_test(&inode->map, PWB__TAG_WRITEBACK, index);
	pthread_mutex_unlock(&inode->lock);
	if (!ok) {
		pwb__page_unlock(p);
		pwb__page_put(p);
		return -EAGAIN;
	}
	memcpy((char *)p->data + pgoff, buf, len);
	if (!(pwb__aread(&p->flags) & PWB__PG_REF))
		uatomic_or(&p->flags, PWB__PG_REF);
	pwb__page_unlock(p);
	size_raise(inode->pcache, off + len);
	pwb__page_put(p);
	return (ssize_t)len;
}

/*
 * The slow path of pwb_write() and pwb_write2(), in two out-of-line
 * copies (write_slow_plain(), write_slow()): the hit path saves no
 * registers for it, and pwb_write()'s copy folds @flags (0) away.
 */
static inline __attribute__((always_inline)) ssize_t
write_slow_body(struct pwb_inode *inode, const void *buf, size_t len,
		uint64_t off, unsigned int flags, const char *who)
{
	size_t done = 0;
	unsigned int shift, ps;
	bool throttle;
	int ret;

	if (!buf && len)
		return pwb__err(-EINVAL, "%s: NULL buf", who);
	/* The whole range asked for, before it is cut to SSIZE_MAX. */
	if (len && off > UINT64_MAX - len)
		return pwb__err(-EFBIG, "%s: range %llu+%zu wraps past 2^64",
				who, (unsigned long long)off, len);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	ret = pwb__pcache_enter(inode, who);
	if (ret)
		return ret;
	shift = inode->bdi->page_shift;
	ps = 1u << shift;
	throttle = (flags & PWB_RW_NOWAIT) &&
		   (inode->bdi->cfg.flags & PWB_BDI_THROTTLE);
	while (done < len) {
		uint64_t pos = off + done;
		unsigned int pgoff = (unsigned int)(pos & (ps - 1));
		unsigned int n = (unsigned int)PWB__MIN((size_t)(ps - pgoff),
							len - done);
		bool dirtied;

		/* The kernel's BDP_ASYNC: stop where the throttle would
		 * make a dirtier sleep. */
		if (throttle && pwb__balance_dirty_nowait(inode->bdi)) {
			ret = -EAGAIN;
			break;
		}
		/* A run of whole pages, none cached: one folio. Not for
		 * the flags (NOWAIT waits nowhere, DONTCACHE drops what it
		 * wrote) nor a region's inode (its slices hold the tags). */
		if (!pgoff && !flags && !PWB__RCU_DEREF(inode->region)) {
			unsigned int order = pwb__pcache_folio_order(
				inode, pos >> shift, (len - done) >> shift);

			if (order) {
				ret = write_folio(inode, pos >> shift, order,
						  (const char *)buf + done,
						  &dirtied);
				if (ret <= 0) {
					if (dirtied)
						done += (size_t)ps << order;
					if (ret)
						break;
					continue;
				}
			}
		}
		ret = write_page(inode, pos >> shift, pgoff, n,
				 (const char *)buf + done, true, flags,
				 &dirtied);
		if (dirtied)
			done += n;
		if (ret)
			break;
	}
	/* Written back by the flushers, not by this thread: the pages
	 * leave the cache as their writes end. */
	if ((flags & PWB_RW_DONTCACHE) && done)
		pwb__bdi_writeback(inode->bdi, PWB_WB_ALL, 0);
	if ((flags & PWB_RW_SYNC) && done) {
		int err = pwb__fsync(inode);

		if (err) {
			pwb__inode_exit(inode, PWB__HOLD_REF);
			return err;
		}
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	if (done)
		return (ssize_t)done;
	if (ret == -EAGAIN)
		return pwb__err(-EAGAIN, "%s: would wait (PWB_RW_NOWAIT)", who);
	return ret;
}

static __attribute__((noinline)) ssize_t
write_slow_plain(struct pwb_inode *inode, const void *buf, size_t len,
		 uint64_t off)
{
	return write_slow_body(inode, buf, len, off, 0, "pwb_write");
}

static __attribute__((noinline)) ssize_t
write_slow(struct pwb_inode *inode, const void *buf, size_t len,
	   uint64_t off, unsigned int flags)
{
	return write_slow_body(inode, buf, len, off, flags, "pwb_write2");
}

PWB_API ssize_t pwb_write(struct pwb_inode *inode, const void *buf,
			  size_t len, uint64_t off)
{
	pwb__err_clear();
	if (caa_likely(inode && len)) {
		ssize_t r = write_fast(inode, buf, len, off);

		if (r != -EAGAIN)
			return r;
	}
	return write_slow_plain(inode, buf, len, off);
}

PWB_API ssize_t pwb_write2(struct pwb_inode *inode, const void *buf,
			   size_t len, uint64_t off, unsigned int flags)
{
	pwb__err_clear();
	if (flags & ~PWB__RW_FLAGS)
		return pwb__err(-EINVAL, "pwb_write2: unknown flags 0x%x",
				flags & ~PWB__RW_FLAGS);
	/* The hit path never waits; DONTCACHE marks every page it dirties,
	 * which the slow path does. */
	if (caa_likely(inode && len && !(flags & PWB_RW_DONTCACHE))) {
		ssize_t r = write_fast(inode, buf, len, off);

		if (r >= 0 && (flags & PWB_RW_SYNC)) {
			int err = pwb__fsync(inode);

			return err ? err : r;
		}
		if (r != -EAGAIN)
			return r;
	}
	return write_slow(inode, buf, len, off, flags);
}

PWB_API int pwb_inode_size(struct pwb_inode *inode, uint64_t *size)
{
	int ret;

	pwb__err_clear();
	if (!size)
		return pwb__err(-EINVAL, "pwb_inode_size: NULL size");
	ret = pwb__pcache_enter(inode, "pwb_inode_size");
	if (ret)
		return ret;
	*size = pwb__aread(&inode->pcache->size);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return 0;
}

PWB_API int pwb_inode_set_size(struct pwb_inode *inode, uint64_t size)
{
	uint64_t cur;
	int ret;

	pwb__err_clear();
	ret = pwb__pcache_enter(inode, "pwb_inode_set_size");
	if (ret)
		return ret;
	cur = pwb__aread(&inode->pcache->size);
	if (size >= cur) {
		size_raise(inode->pcache, size);
		pwb__inode_exit(inode, PWB__HOLD_REF);
		return 0;
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	/* Shrinking is a truncate: the discard path does it. */
	return pwb__inode_discard(inode, size, UINT64_MAX);
}

/* ---------------------------------------------------------------------- */
/* Truncate                                                               */

/*
 * A truncate to @off inside a page: the bytes from @off to the end of the
 * page become zeros, in the cache and (dirtied) on the device, whether or
 * not the page is cached now, so that a later growth of the file shows
 * zeros there and not the old tail. A page that reads as zeros already
 * (allocator mode: not cached and no written block) is left alone.
 */
static int zero_tail(struct pwb_inode *inode, uint64_t off)
{
	unsigned int shift = inode->bdi->page_shift, ps = 1u << shift;
	unsigned int pgoff = (unsigned int)(off & (ps - 1));
	uint64_t index = off >> shift, dev;
	bool dirtied;
	int ret;

	/* Allocator mode: a page without written data that is neither
	 * dirty nor being written reads as zeros, cached or not: nothing to
	 * zero (and no space to reserve for it, which could fail on a full
	 * device). A page in flight has no written block until its write
	 * ends, and that write carries the old tail: it is zeroed below. */
	if (inode->space &&
	    pwb__space_read_lookup(inode, index, &dev) == -ENODATA &&
	    !(pwb__page_state(inode, index) &
	      (PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK)))
		return 0;
	ret = write_page(inode, index, pgoff, ps - pgoff, NULL, false, 0,
			 &dirtied);
	return dirtied ? 0 : ret;
}

int pwb__pcache_discarded(struct pwb_inode *inode, uint64_t off,
			  uint64_t len, uint64_t first, uint64_t last)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	unsigned int ps = pwb__page_size(inode->bdi);
	uint64_t s;
	int ret;

	if (first <= last) {
		pwb__pcache_drop_range(inode, first, last, false);
		pcache_punch(inode, first, last);
	}
	if (len != UINT64_MAX)
		return 0;
	/* Truncate: zeros after @off in its page, then the size (a failed
	 * zeroing leaves the size as it was: the tail is still the
	 * file's). */
	s = pwb__aread(&pc->size);
	if ((off & (ps - 1)) && s > off) {
		ret = zero_tail(inode, off);
		if (ret)
			return ret;
		s = pwb__aread(&pc->size);
	}
	if (s <= off)
		return 0;
	ret = pcache_zero_range(inode, (off + ps - 1) / ps, (s - 1) / ps);
	if (ret)
		return ret;
	while (s > off) {
		uint64_t old = uatomic_cmpxchg(&pc->size, s, off);

		if (old == s)
			break;
		s = old;
	}
	/*
	 * A reader that took the old size may have filled pages of the range
	 * again since the drop above, from the device (the bytes before the
	 * truncate), before pcache_zero_range() said zeros (allocator mode:
	 * before pcache_punch() freed the blocks): a growth of the file
	 * would show them. Drop them. A page such a fill made was in the
	 * index before its fill looked the block up, so before this walk
	 * starts, and the walk waits for the filler's reference; a fill that
	 * looks up after the zeroed map or the punch reads zeros. Only clean
	 * pages: a dirty one is a write's that came after the size went down.
	 */
	if (first <= last)
		pwb__pcache_drop_refilled(inode, first, last);
	return 0;
}
