// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * readahead.c - reads of library-owned pages: on-demand readahead, reads
 * in flight through the bdi's backend, waiting for a page under read, and
 * pwb_fadvise(). readahead.h has the page protocol; doc/design.md,
 * "Readahead", the why.
 *
 * Readahead is the kernel's on-demand kind. A pwb_read() that misses the
 * cache calls pwb__ra_miss(): a miss where one of the inode's streams
 * expected its reader next (or at page 0) starts or grows that stream's
 * window; any other miss reads only what was asked and remembers where
 * that reader would go next, so a second miss there is sequential. The
 * first page read ahead of the reader carries the marker
 * (PWB__PG_READAHEAD); the reader that reaches it starts the next window,
 * twice as large up to the maximum (readahead_bytes), without waiting for
 * it (pwb__ra_marker). Cache hits never come here: the marker is what
 * keeps a reader that hits going.
 *
 * Reads go out in requests of up to RA_IO_MAX pages that the device holds
 * one after another. With a backend that has read rings (io_uring) a
 * batch of requests is queued on one ring and entered at once, so they
 * are in flight together; a reader then waits for the pages it needs
 * only, one at a time, reaping the ring their reads are on. Otherwise
 * (psync, null, or io_uring refused) each request is a preadv() on the
 * calling thread.
 *
 * A PWB_RW_NOWAIT reader (pwb_read2()) starts the same reads on a
 * backend with read rings, without sleeping (@nowait below, and
 * doc/design.md "NOWAIT readers"); elsewhere it starts nothing.
 */
#include "pcache.h"
#include "readahead.h"
#include "io.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#define RA_IO_MAX PWB__READ_IO_MAX
/* Requests queued before they are handed to the ring. */
#define RA_BATCH 16u
#define NO_MARKER UINT64_MAX

struct ra_req {
	struct pwb__rd rd;
	struct pwb_bdi *bdi;
	uint64_t size;		/* file size when queued: bytes past it
				 * read as zeros */
	uint64_t need_end;	/* pages from here on are read ahead */
	unsigned int lru;	/* the reclaim list the pages join */
	unsigned int n;
	struct pwb__page *pages[RA_IO_MAX];
	struct iovec iov[RA_IO_MAX];
};

/* ---------------------------------------------------------------------- */
/* Reads in flight                                                        */

/* A request ended (any thread; with its ring's lock held if it was on
 * one): its pages are up to date or, failed, left for their readers to
 * read again; they give back the reference the read held. */
static void req_end(struct pwb__rd *rd, int err)
{
	struct ra_req *q = caa_container_of(rd, struct ra_req, rd);
	struct pwb_bdi *bdi = q->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	unsigned int ps = pwb__page_size(bdi), i, ahead = 0;

	if (!err) {
		struct pwb__page *l = q->pages[q->n - 1];
		uint64_t start = l->index << bdi->page_shift;

		/* Bytes past the end of the file read as zeros. */
		if (q->size - start < ps)
			memset((char *)l->data + (q->size - start), 0,
			       ps - (q->size - start));
		for (i = 0; i < q->n; i++)
			ahead += q->pages[i]->index >= q->need_end;
		uatomic_inc(&pb->read_ios);
		uatomic_add(&pb->read_pages, q->n);
		if (ahead)
			uatomic_add(&pb->ra.ra_pages, ahead);
	}
	for (i = 0; i < q->n; i++) {
		struct pwb__page *p = q->pages[i];

		/* Referenced now, and not again by its first copy
		 * (pwb__page_read_touch): else reclaim would take pages read
		 * ahead and not yet read before the pages their reader is
		 * done with, which the copy marked. */
		if (!err)
			__atomic_fetch_or(&p->flags,
					  PWB__PG_UPTODATE | PWB__PG_REF |
					  PWB__PG_FRESH,
					  __ATOMIC_RELEASE);
		__atomic_store_n(&p->rd_ring, NULL, __ATOMIC_RELEASE);
		__atomic_fetch_and(&p->flags, ~PWB__PG_READING,
				   __ATOMIC_SEQ_CST);
		pwb__pcache_lru_add(pb, p, q->lru);
	}
	pwb__page_wake_waiters(pb);
	/* Last: a page may be freed once its reference is gone. */
	for (i = 0; i < q->n; i++)
		pwb__page_put(q->pages[i]);
	free(q);
}

/*
 * Start the @n requests of @reqs: on one ring, entered together, or on
 * this thread. @sync: the caller waits for all of it at once, so a lone
 * request is read here (one syscall, no ring). @nowait: never sleep (see
 * pwb__ra_miss()): on a ring taken with a trylock, and the requests that
 * could be queued only by waiting are ended unread, as a failed read
 * (req_end() counts and records nothing for it), for a later reader.
 * False if one was.
 */
static bool submit(struct pwb_bdi *bdi, struct ra_req **reqs, unsigned int n,
		   bool sync, bool nowait)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	const struct pwb__io_read_ops *ops = pb->ra.ops;
	struct pwb__rd_ring *ring = NULL;
	bool refused = false;
	unsigned int i, j;
	uint64_t t0;

	if (!n)
		return true;
	if (ops && (nowait || !(sync && n == 1)))
		ring = ops->read_ring_get(pb->ra.state, nowait);
	for (i = 0; i < n; i++) {
		struct ra_req *q = reqs[i];

		if (ring && !refused) {
			for (j = 0; j < q->n; j++)
				__atomic_store_n(&q->pages[j]->rd_ring, ring,
						 __ATOMIC_RELEASE);
			if (!ops->read_submit(ring, &q->rd, nowait))
				continue;
			for (j = 0; j < q->n; j++)
				__atomic_store_n(&q->pages[j]->rd_ring, NULL,
						 __ATOMIC_RELEASE);
		}
		if (nowait) {
			/* The ring is full (or every ring taken, or a
			 * read-delay rule holds the device): the rest too. */
			refused = true;
			q->rd.end(&q->rd, -EAGAIN);
			continue;
		}
		/* Read on this thread: the bdi's wait (no one inode's). */
		t0 = pwb__now(bdi);
		pwb__rd_sync(bdi, &q->rd);
		pwb__blocked_since(bdi, NULL, NULL, PWB_BLOCK_READ, t0);
	}
	if (ring) {
		ops->read_ring_put(ring);
		/* Waiters that saw no ring yet now find one. */
		pwb__page_wake_waiters(pb);
	}
	return !refused;
}

/* A page not under read, without data the device could give: a hole, or
 * past the end of the file. Zeros, up to date. Its lock held. */
static void page_zero_locked(struct pwb_bdi *bdi, struct pwb__page *p)
{
	memset(p->data, 0, pwb__page_size(bdi));
	__atomic_fetch_or(&p->flags, PWB__PG_UPTODATE, __ATOMIC_RELEASE);
}

/*
 * Read pages [first, first + nr) that are not cached or not up to date,
 * as far as the file goes and the cache has room; put the marker on page
 * @marker. Pages another thread holds or reads are left alone. Pages from
 * @need_end on count as read ahead. @sync, @nowait: see submit(); with
 * @nowait a page is made only if the cache has room now, and a request
 * ended unread stops the range there.
 */
static void read_range(struct pwb_inode *inode, uint64_t first, uint64_t nr,
		       uint64_t marker, uint64_t need_end, bool sync,
		       bool nowait)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	unsigned int ps = pwb__page_size(bdi), nreq = 0, lru;
	unsigned int io_max = (unsigned int)PWB__MIN(
		PWB__MAX(bdi->max_io_pages, 1u), (uint64_t)RA_IO_MAX);
	uint64_t size = pwb__aread(&inode->pcache->size), eof, end, idx;
	uint64_t dev, run_dev = 0;
	struct ra_req *reqs[RA_BATCH], *q = NULL;
	bool refused = false;

	if (!size || !nr)
		return;
	eof = (size - 1) >> bdi->page_shift;
	if (first > eof)
		return;
	end = first + PWB__MIN(nr, eof - first + 1);
	lru = pwb__pcache_owner_ctx(inode);
	for (idx = first; idx < end && !refused; idx++) {
		struct pwb__page *p;
		unsigned int fl;
		int r;

		r = pwb__pcache_page_find(inode, idx, true,
					  nowait ? PWB__ROOM_NOW
						 : PWB__ROOM_RECLAIM,
					  &p);
		if (r)
			break;	/* no room (or no memory): stop here */
		if (pwb__page_trylock(p)) {
			pwb__page_put(p);	/* a writer has it */
			goto close_run;
		}
		fl = pwb__page_flags(p);
		if (fl & (PWB__PG_UPTODATE | PWB__PG_READING)) {
			if (idx == marker && (fl & PWB__PG_UPTODATE))
				uatomic_or(&p->flags, PWB__PG_READAHEAD);
			pwb__page_unlock(p);
			pwb__page_put(p);
			goto close_run;
		}
		r = pwb__pcache_dev_lookup(inode, idx, &dev);
		if (r == -ENODATA) {
			page_zero_locked(bdi, p);
		} else if (r || (dev & (bdi->lbs - 1)) ||
			   dev > bdi->capacity || bdi->capacity - dev < ps) {
			/* Left to the reader, whose own read says why. */
		} else {
			if (q && (dev != run_dev || q->n == io_max)) {
				reqs[nreq++] = q;
				q = NULL;
				if (nreq == RA_BATCH) {
					refused = !submit(bdi, reqs, nreq,
							  false, nowait);
					nreq = 0;
				}
			}
			if (!q && !refused && (q = malloc(sizeof(*q)))) {
				q->rd.dev_off = dev;
				q->rd.iov = q->iov;
				q->rd.iovcnt = 0;
				q->rd.end = req_end;
				q->bdi = bdi;
				q->size = size;
				q->need_end = need_end;
				q->lru = lru;
				q->n = 0;
				run_dev = dev;
			}
			if (q) {
				__atomic_fetch_or(&p->flags,
						  PWB__PG_READING |
						  (idx == marker ?
						   PWB__PG_READAHEAD : 0),
						  __ATOMIC_SEQ_CST);
				pwb__page_unlock(p);
				q->pages[q->n] = p;
				q->iov[q->n] = (struct iovec){ p->data, ps };
				q->n++;
				q->rd.iovcnt = q->n;
				run_dev += ps;
				continue;	/* its reference is the read's */
			}
		}
		pwb__page_unlock(p);
		pwb__pcache_lru_add(pb, p, lru);
		pwb__page_put(p);
close_run:
		if (q) {
			reqs[nreq++] = q;
			q = NULL;
			if (nreq == RA_BATCH) {
				refused = !submit(bdi, reqs, nreq, false,
						  nowait);
				nreq = 0;
			}
		}
	}
	if (q)
		reqs[nreq++] = q;
	submit(bdi, reqs, nreq, sync, nowait);
}

/* ---------------------------------------------------------------------- */
/* Windows                                                                */

/* The smallest window the readers' share of the cache cuts a window to,
 * in pages. */
#define RA_SHARE_MIN 16u

/*
 * The most pages a window of @inode may have; 0: no readahead. A
 * sequential reader holds up to two windows in the cache (the one it
 * reads, the next one read ahead), and the readers of a bdi share its
 * cache: with more of them than two, each window is cut to a quarter of
 * the cache over the readers (nr_streams), so that their windows fill at
 * most half of it. Else pages read ahead for one reader are reclaimed
 * before it copies them, to make room for another's (four readers of
 * 2 MiB windows in a 16 MiB cache read a third of their pages twice).
 */
static uint32_t ra_max(struct pwb_inode *inode)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;
	uint64_t max = pb->ra.max_pages, share;
	unsigned int readers = pwb__aread(&pb->ra.nr_streams);

	switch (pwb__aread(&inode->pcache->ra.advice)) {
	case PWB_FADV_RANDOM:
		return 0;
	case PWB_FADV_SEQUENTIAL:
		max *= 2;
		break;
	default:
		break;
	}
	if (max && readers > 2) {
		share = PWB__MAX(pb->limit_pages / (4 * (uint64_t)readers),
				 (uint64_t)RA_SHARE_MIN);
		max = PWB__MIN(max, share);
	}
	return (uint32_t)max;
}

/*
 * Count stream @s among the bdi's readers (pwb__ra_bdi.nr_streams) while
 * its window stops short of the end of the file (@size bytes): a reader
 * whose window reaches the end reads nothing ahead any more. @size 0 (a
 * stream forgotten or reset): not counted. ra->lock held.
 */
static void stream_account(struct pwb_inode *inode, struct pwb__ra_stream *s,
			   uint64_t size)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;
	uint64_t pages = (size + pwb__page_size(inode->bdi) - 1) >>
			 inode->bdi->page_shift;
	bool on = s->size && s->start + s->size < pages;

	pwb__lockdep_assert_held(&inode->pcache->ra.lock);
	if (on == s->counted)
		return;
	s->counted = on;
	if (on)
		uatomic_inc(&pb->ra.nr_streams);
	else
		uatomic_dec(&pb->ra.nr_streams);
}

/* The first window of a reader asking for @nr pages: four times the
 * request (rounded up to a power of two), at most @max, at least @nr. */
static uint32_t init_size(uint64_t nr, uint32_t max)
{
	uint64_t s = 1;

	while (s < nr)
		s <<= 1;
	s = PWB__MIN(s * 4, (uint64_t)max);
	return (uint32_t)PWB__MIN(PWB__MAX(s, nr), (uint64_t)UINT32_MAX);
}

/* The window after one of @cur pages: twice as large, at most @max. */
static uint32_t next_size(uint32_t cur, uint32_t max)
{
	return (uint32_t)PWB__MIN(PWB__MAX((uint64_t)cur * 2, 1u),
				  (uint64_t)max);
}

/* The stream a reader at @index belongs to: the one expecting it next,
 * else one whose window holds it; NULL: none. */
static struct pwb__ra_stream *stream_find(struct pwb__ra_inode *ra,
					  uint64_t index)
{
	struct pwb__ra_stream *in = NULL;

	pwb__lockdep_assert_held(&ra->lock);
	for (unsigned int i = 0; i < PWB__RA_STREAMS; i++) {
		struct pwb__ra_stream *s = &ra->s[i];

		if (!s->used)
			continue;
		if (s->next == index)
			return s;
		if (s->size && index >= s->start && index - s->start < s->size)
			in = s;
	}
	return in;
}

/* A slot for a new stream of @inode, cleared: a free one, else the least
 * recently used, which leaves the bdi's readers (nr_streams). */
static struct pwb__ra_stream *stream_new(struct pwb_inode *inode)
{
	struct pwb__ra_inode *ra = &inode->pcache->ra;
	struct pwb__ra_stream *s = &ra->s[0];

	pwb__lockdep_assert_held(&ra->lock);
	for (unsigned int i = 0; i < PWB__RA_STREAMS; i++) {
		if (!ra->s[i].used) {
			s = &ra->s[i];
			break;
		}
		if (ra->s[i].used < s->used)
			s = &ra->s[i];
	}
	stream_account(inode, s, 0);
	memset(s, 0, sizeof(*s));
	return s;
}

void pwb__ra_miss(struct pwb_inode *inode, uint64_t index, uint64_t nr,
		  bool nowait)
{
	struct pwb__ra_inode *ra = &inode->pcache->ra;
	uint32_t max, size;
	struct pwb__ra_stream *s;
	uint64_t async;

	if (nowait && !inode->bdi->pcache->ra.ops)
		return;		/* reads would be made on this thread */
	max = ra_max(inode);
	if (!max) {
		read_range(inode, index, nr, NO_MARKER, index + nr, true,
			   nowait);
		return;
	}
	pthread_mutex_lock(&ra->lock);
	s = stream_find(ra, index);
	if (!s) {
		s = stream_new(inode);
		s->next = index + nr;
		s->start = index;
		s->used = ++ra->clock;
		if (index) {
			/* Random until a read continues it. */
			pthread_mutex_unlock(&ra->lock);
			read_range(inode, index, nr, NO_MARKER, index + nr,
				   true, nowait);
			return;
		}
		size = init_size(nr, max);
	} else if (!s->size) {
		size = init_size(nr, max);	/* the second read in order */
	} else {
		size = next_size(s->size, max);	/* a miss in a window, or
						 * right after it */
	}
	size = (uint32_t)PWB__MAX((uint64_t)size, PWB__MIN(nr, UINT32_MAX));
	async = size > nr ? size - nr : 0;
	s->start = index;
	s->size = size;
	s->async_size = (uint32_t)async;
	s->next = index + nr;
	s->used = ++ra->clock;
	stream_account(inode, s, pwb__aread(&inode->pcache->size));
	pthread_mutex_unlock(&ra->lock);
	read_range(inode, index, size, async ? index + nr : NO_MARKER,
		   index + nr, !async, nowait);
}

void pwb__ra_marker(struct pwb_inode *inode, struct pwb__page *p, uint64_t nr,
		    bool nowait)
{
	struct pwb__ra_inode *ra = &inode->pcache->ra;
	uint64_t index = p->index, start;
	uint32_t max, size;
	struct pwb__ra_stream *s = NULL;

	if (nowait && !inode->bdi->pcache->ra.ops)
		return;	/* the marker stays, for a reader that reads */
	/* One reader takes the marker. */
	if (!(__atomic_fetch_and(&p->flags, ~PWB__PG_READAHEAD,
				 __ATOMIC_ACQ_REL) & PWB__PG_READAHEAD))
		return;
	max = ra_max(inode);
	if (!max)
		return;
	pthread_mutex_lock(&ra->lock);
	for (unsigned int i = 0; i < PWB__RA_STREAMS; i++) {
		struct pwb__ra_stream *t = &ra->s[i];

		if (t->used && t->size && index >= t->start &&
		    index - t->start < t->size)
			s = t;
	}
	if (s) {
		start = s->start + s->size;
		size = next_size(s->size, max);
	} else {
		/* Its stream was forgotten: start another from here. */
		s = stream_new(inode);
		start = index + nr;
		size = init_size(nr, max);
	}
	s->start = start;
	s->size = size;
	s->async_size = size;
	s->next = index + nr;
	s->used = ++ra->clock;
	stream_account(inode, s, pwb__aread(&inode->pcache->size));
	pthread_mutex_unlock(&ra->lock);
	read_range(inode, start, size, start, 0, false, nowait);
}

/* ---------------------------------------------------------------------- */
/* Set-up, statistics                                                     */

int pwb__ra_bdi_init(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	const struct pwb__io_backend *io = bdi->io;
	pthread_condattr_t attr;
	uint64_t max;
	int ret;

	max = bdi->cfg.readahead_bytes >> bdi->page_shift;
	/* Two windows of a reader (the one it reads, the next) for a few
	 * readers: more, and pages read ahead are reclaimed before use. */
	max = PWB__MIN(max, pb->limit_pages / 8);
	pb->ra.max_pages = (uint32_t)PWB__MIN(max, (uint64_t)(1u << 30));
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	for (unsigned int i = 0; i < PWB__PAGE_WAIT_SLOTS; i++) {
		pwb__mutex_init(&pb->ra.wait[i].lock, PWB__LOCK_PAGE_WAIT);
		pthread_cond_init(&pb->ra.wait[i].cond, &attr);
	}
	pthread_condattr_destroy(&attr);
	if (io && io->version >= 2 && io->read && io->read->read_init) {
		ret = io->read->read_init(bdi, &pb->ra.state);
		if (ret)
			return ret;
		pb->ra.ops = io->read;
	}
	return 0;
}

void pwb__ra_bdi_fini(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;

	if (pb->ra.ops)
		pb->ra.ops->read_fini(pb->ra.state);
	pb->ra.ops = NULL;
	for (unsigned int i = 0; i < PWB__PAGE_WAIT_SLOTS; i++) {
		pthread_mutex_destroy(&pb->ra.wait[i].lock);
		pthread_cond_destroy(&pb->ra.wait[i].cond);
	}
}

void pwb__ra_inode_init(struct pwb__ra_inode *ra)
{
	memset(ra, 0, sizeof(*ra));
	pwb__mutex_init(&ra->lock, PWB__LOCK_READAHEAD);
}

void pwb__ra_inode_fini(struct pwb_bdi *bdi, struct pwb__ra_inode *ra)
{
	/* No reader left: the inode is closing. */
	for (unsigned int i = 0; i < PWB__RA_STREAMS; i++)
		if (ra->s[i].counted)
			uatomic_dec(&bdi->pcache->ra.nr_streams);
	pthread_mutex_destroy(&ra->lock);
}

void pwb__ra_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	if (bdi->pcache)
		st->readahead_pages = pwb__aread(&bdi->pcache->ra.ra_pages);
}

/* ---------------------------------------------------------------------- */
/* pwb_fadvise()                                                          */

PWB_API int pwb_fadvise(struct pwb_inode *inode, uint64_t off, uint64_t len,
			int advice)
{
	unsigned int shift;
	uint64_t end, first, last, size;
	int ret;

	pwb__err_clear();
	if (advice < PWB_FADV_NORMAL || advice > PWB_FADV_DONTNEED)
		return pwb__err(-EINVAL, "pwb_fadvise: unknown advice %d",
				advice);
	ret = pwb__pcache_enter(inode, "pwb_fadvise");
	if (ret)
		return ret;
	shift = inode->bdi->page_shift;
	/* len 0: to the end of the file (and past it). */
	end = !len || off > UINT64_MAX - len ? UINT64_MAX : off + len;
	switch (advice) {
	case PWB_FADV_NORMAL:
	case PWB_FADV_SEQUENTIAL:
	case PWB_FADV_RANDOM:
		/* For the whole file, as Linux does. */
		uatomic_set(&inode->pcache->ra.advice, (unsigned int)advice);
		break;
	case PWB_FADV_WILLNEED:
		size = pwb__aread(&inode->pcache->size);
		end = PWB__MIN(end, size);
		if (off >= end)
			break;
		first = off >> shift;
		last = (end - 1) >> shift;
		/* Queued, not waited for (psync reads it here). */
		read_range(inode, first, last - first + 1, NO_MARKER, first,
			   false, false);
		break;
	case PWB_FADV_DONTNEED:
		/* Whole pages only: a page the range covers in part keeps. */
		first = (off >> shift) + !!(off & ((1ull << shift) - 1));
		last = end == UINT64_MAX ? UINT64_MAX
					 : (end >> shift) ? (end >> shift) - 1
							  : 0;
		if (end != UINT64_MAX && !(end >> shift))
			break;
		if (first <= last)
			pwb__pcache_drop_clean(inode, first, last);
		break;
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return 0;
}
