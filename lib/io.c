// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io.c - the engine's side of the I/O backends and the end of every write
 *
 * The backends (io-*.c) sit above this file: they call its helpers and
 * pwb__io_end(), and the engine reaches them only through the ops table
 * (struct pwb__io_backend) the bdi was opened with; the names they are
 * chosen by are bdi.c's.
 *
 * pwb__io_end() is the one place where a finished write changes page state:
 * the writeback tag goes, a failed page becomes dirty again (and its error
 * is recorded for fsync/sync callers), counters move, end_write is told.
 */
#include "probes.h"
#include "base.h"
#include "pagemap.h"
#include "io.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "inode.h"
#include "region.h"
#include "writeback.h"
#include "page-owner.h"
#include "space.h"
#include "domain.h"

#include <stdlib.h>
#include <string.h>

enum pwb__fault_action pwb__io_fault_check(struct pwb__io *io, int *err,
					   uint64_t *short_len)
{
	struct pwb_bdi *bdi = io->inode->bdi;
	uint64_t len = io->nr << bdi->page_shift;
	enum pwb__fault_action act;

	*err = 0;
	*short_len = 0;
	act = pwb__fault_check(bdi, io->dev_off, len, err, short_len);
	if (act == PWB__FAULT_FAIL) {
		if (!*err)
			*err = -EIO;
		return act;
	}
	if (act == PWB__FAULT_SHORT) {
		/* O_DIRECT takes whole blocks: a cut inside one moves down. */
		*short_len -= *short_len % bdi->lbs;
		if (*short_len && *short_len < len)
			return act;
		*short_len = 0;
	}
	return PWB__FAULT_PASS;
}

/* Advance @iov past @done bytes (a short write's progress), shrinking
 * *@cnt; return the new first entry. Shared by the backends. */
struct iovec *pwb__iov_advance(struct iovec *iov, unsigned int *cnt,
			       size_t done)
{
	while (*cnt && done >= iov->iov_len) {
		done -= iov->iov_len;
		iov++;
		(*cnt)--;
	}
	if (*cnt) {
		iov->iov_base = (char *)iov->iov_base + done;
		iov->iov_len -= done;
	}
	return iov;
}

unsigned int pwb__iov_cut(struct iovec *iov, unsigned int cnt, uint64_t max,
			  size_t *cut)
{
	uint64_t bytes = 0;
	unsigned int i;

	*cut = 0;
	for (i = 0; i < cnt && bytes + iov[i].iov_len <= max; i++)
		bytes += iov[i].iov_len;
	if (i < cnt && bytes < max) {
		*cut = iov[i].iov_len - (size_t)(max - bytes);
		iov[i].iov_len -= *cut;
		i++;
	}
	return i;
}

uint64_t pwb__atomic_len(uint64_t off, uint64_t len, unsigned int page,
			 unsigned int unit_min, unsigned int unit_max,
			 unsigned int segs)
{
	uint64_t max = PWB__MIN(len, (uint64_t)unit_max), p;

	if (segs)
		max = PWB__MIN(max, (uint64_t)segs * page);
	if (max < page || max < unit_min)
		return 0;
	p = 1ull << (63 - __builtin_clzll(max));
	/* An atomic write must be naturally aligned on the device. */
	while (p >= page && (off & (p - 1)))
		p >>= 1;
	return p >= page && p >= unit_min ? p : 0;
}

int pwb__io_next_write(const struct pwb_bdi *bdi, uint64_t off, uint64_t len,
		       uint64_t *wlen, int *rw_flags)
{
	uint64_t a;

	*wlen = len;
	*rw_flags = 0;
	if (!bdi->atomic)
		return 0;
	a = pwb__atomic_len(off, len, 1u << bdi->page_shift, bdi->awu_min,
			    bdi->awu_max, bdi->awu_segs);
	if (a) {
		*wlen = a;
		*rw_flags = RWF_ATOMIC;
		return 0;
	}
	/* Only an unaligned offset gets here (a page always fits). */
	return bdi->cfg.flags & PWB_BDI_ATOMIC_WRITES ? -EINVAL : 0;
}

void pwb__io_complete(struct pwb__io *io, int err)
{
	struct pwb_inode *inode = io->inode;
	struct pwb__wb_ctx *wb = io->wb;
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t last = io->index + io->nr - 1;
	bool attach = false, counted = true;
	bool ending = inode->ops.end_write != NULL;
	/* Read now: once the writes are ended below, a close may free the
	 * inode's page cache (and, after its grace period, the inode). */
	bool lib_pages = inode->pcache != NULL;

	PWB_PROBE4(io_complete, wb->idx, inode->ino, io->nr << bdi->page_shift,
		   err);

	/* Allocator mode: the blocks hold the pages' data from now on, so
	 * a read after the pages leave the cache finds it. Before the
	 * WRITEBACK tags go: the pages stay cached until then. Without
	 * memory for that, the write counts as failed and is done again. */
	if (!err && pwb__inode_app(inode)->space)
		err = pwb__space_written(pwb__inode_app(inode), io->index,
					 io->nr);
	pthread_mutex_lock(&inode->lock);
	pwb__map_clear(&inode->map, PWB__TAG_WRITEBACK, io->index, last);
	if (err) {
		/* Pages a discard running now covers stay clean. */
		int64_t redirtied = pwb__redirty_failed_locked(
			inode, io->index, last, &counted);

		/*
		 * The pages were set DIRTY before (the leaf exists), so this
		 * cannot fail for lack of memory; if it ever did, the error
		 * below still reaches fsync callers.
		 */
		if (inode->tenant)
			pwb__tenant_end_write(inode->tenant,
					      io->nr << bdi->page_shift,
					      redirtied > 0 ? (uint64_t)redirtied
							      << bdi->page_shift
							    : 0, false);
		if (redirtied > 0) {
			/* Counted where the inode lives (writepages). */
			uatomic_add(&inode->wb->stats.dirty_pages, redirtied);
			if (!(inode->state &
			      (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META))) {
				pwb__aset(&inode->dirtied_when,
					  pwb__now(bdi));
				attach = !(inode->state & PWB__I_SYNC);
			}
			inode->state |= PWB__I_DIRTY_PAGES;
		}
		if (counted) {
			pwb__errseq_set(&inode->wb_err, err);
			pwb__errseq_set(&bdi->wb_err, err);
		}
	} else {
		pwb__bdi_write_done_locked(bdi, inode);
		if (inode->tenant)
			pwb__tenant_end_write(inode->tenant,
					      io->nr << bdi->page_shift, 0,
					      true);
	}
	/* Back-off, the failed mark and the ENOSPC pause (error.c); a write
	 * of discarded pages only is no failure of the inode. */
	if (counted)
		pwb__wb_write_result_locked(inode, wb, err);
	/*
	 * Stable-page, discard and close waiters (discard.c). Once the
	 * writes are ended a close may free the inode, so a completion that
	 * still has work on it below (end_write; after an error, the
	 * requeue and the region slice's report) ends them only after that
	 * work, as nr_ending tells the waiters.
	 */
	/* The section keeps the inode for the page owner below: once its
	 * writes are ended a close may begin and free it after a grace
	 * period. */
	if (lib_pages)
		rcu_read_lock();
	if (ending || err)
		uatomic_inc(&inode->nr_ending);
	else
		pwb__inode_writes_ended(inode, false);
	pthread_mutex_unlock(&inode->lock);

	uatomic_sub(&wb->stats.writeback_pages, io->nr);
	/* Clean pages a writer waiting for cache room may take. */
	if (lib_pages) {
		bdi->page_owner->writes_ended(pwb__inode_app(inode), io->index,
					      last);
		pwb__rcu_read_unlock();
	}
	if (err) {
		uatomic_inc(&wb->stats.io_errors);
	} else {
		uatomic_add(&wb->stats.written_pages, io->nr);
		uatomic_add(&wb->stats.bytes_written,
			    io->nr << bdi->page_shift);
		/* The bdi's share of its memory domain follows these. */
		if (bdi->dom)
			pwb__domain_written(bdi, io->nr);
	}
	if (attach)
		pwb__inode_attach_dirty(inode);
	/* A region slice: pwb_fsync() reads its inode's errors. */
	if (counted && err)
		pwb__region_report(inode, err);
	/* A region slice's callbacks are its inode's; its waiters
	 * (discard.c) wait on the slice. */
	if (ending)
		inode->ops.end_write(pwb__inode_app(inode), io->index, io->nr,
				     err);
	if (ending || err)
		pwb__inode_writes_ended(inode, true);
}

/* Bytes of cached requests a context may keep: at least one request. */
#define IO_CACHE_BYTES (1u << 20)

static size_t io_size(uint64_t pages)
{
	return sizeof(struct pwb__io) + pages * sizeof(struct iovec);
}

unsigned int pwb__io_cache_max(const struct pwb_bdi *bdi)
{
	size_t keep = IO_CACHE_BYTES / io_size(bdi->max_io_pages);

	/* Never more than can be in flight at once, plus one. */
	if (keep > bdi->cfg.io_depth + 1)
		keep = bdi->cfg.io_depth + 1;
	return keep ? (unsigned int)keep : 1;
}

struct pwb__io *pwb__io_get(struct pwb__wb_ctx *wb, uint64_t max_pages)
{
	uint64_t full = wb->bdi->max_io_pages;
	struct pwb__io *io = wb->io_cache;
	unsigned int cap;

	if (max_pages <= PWB__IO_SMALL_PAGES && PWB__IO_SMALL_PAGES < full) {
		/* Random writes: one page per request. malloc and free per
		 * I/O were ~150 instructions of ~1,700 per I/O on the null
		 * backend (issue 29). */
		cap = PWB__IO_SMALL_PAGES;
		io = wb->io_small;
		if (io) {
			wb->io_small = io->next_free;
			wb->nr_io_small--;
		} else {
			io = malloc(io_size(cap));
			if (!io)
				return NULL;
		}
	} else if (io && max_pages <= io->cap) {
		wb->io_cache = io->next_free;
		wb->nr_io_cache--;
		cap = io->cap;
	} else {
		/* A request of a quarter of the full size or more is made
		 * full size, to be kept; one between the small and that is
		 * rare enough to go to malloc. */
		cap = (unsigned int)(max_pages * 4 >= full ? full : max_pages);
		io = malloc(io_size(cap));
		if (!io)
			return NULL;
	}
	memset(io, 0, sizeof(*io));
	io->cap = cap;
	io->iov = (struct iovec *)(io + 1);
	return io;
}

void pwb__io_put(struct pwb__wb_ctx *wb, struct pwb__io *io)
{
	if (io->cap == wb->bdi->max_io_pages &&
	    wb->nr_io_cache < wb->io_cache_max) {
		io->next_free = wb->io_cache;
		wb->io_cache = io;
		wb->nr_io_cache++;
		return;
	}
	if (io->cap == PWB__IO_SMALL_PAGES &&
	    PWB__IO_SMALL_PAGES < wb->bdi->max_io_pages &&
	    wb->nr_io_small <= wb->bdi->cfg.io_depth) {
		io->next_free = wb->io_small;
		wb->io_small = io;
		wb->nr_io_small++;
		return;
	}
	free(io);
}

void pwb__io_cache_drain(struct pwb__wb_ctx *wb)
{
	struct pwb__io *io;

	while ((io = wb->io_cache)) {
		wb->io_cache = io->next_free;
		free(io);
	}
	wb->nr_io_cache = 0;
	while ((io = wb->io_small)) {
		wb->io_small = io->next_free;
		free(io);
	}
	wb->nr_io_small = 0;
}

void pwb__io_end(struct pwb__io *io, int err)
{
	pwb__io_end_at(io, err, pwb__now(io->inode->bdi));
}

void pwb__io_end_at(struct pwb__io *io, int err, uint64_t now)
{
	struct pwb_bdi *bdi = io->inode->bdi;

	/* On the context's flusher: its own buckets. */
	pwb__hist_add(&io->wb->stats.blk, PWB_HIST_WRITE_IO,
		      now > io->submitted_at ? now - io->submitted_at : 0);
	pwb__io_complete(io, err);
	pwb__io_put(io->wb, io);
	pwb__inflight_put(bdi, 1);
}
