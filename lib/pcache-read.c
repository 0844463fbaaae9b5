// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-read.c - library-owned pages: pwb_read(), the read path. A page
 * not cached is filled from the device, with the pages after it that the
 * device holds right behind it (one read for a run of up to
 * PWB__FILL_RUN_MAX pages); a read that finds the cache full of dirty
 * pages reads around it. A miss first goes through readahead
 * (readahead.c), which reads the page with those a sequential reader will
 * want next; the fills here are what is left (a read that failed, a page
 * readahead found no room for). pwb_read2()'s PWB_RW_NOWAIT makes no
 * read on the calling thread: on a backend with read rings (io_uring) it
 * starts what readahead would read, as the kernel's RWF_NOWAIT does, and
 * returns without waiting for it; elsewhere it starts nothing.
 * PWB_RW_DONTCACHE reads no readahead, and what is not cached through a
 * bounce buffer.
 */
#include "pcache.h"
#include "io.h"
#include "space.h"

#include <limits.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fill @data (page_size bytes, aligned for O_DIRECT) with page @index as
 * the device holds it: zeros at and past @size and for pages the device
 * does not hold. 0 or -errno (message set). */
static int fill_buf(struct pwb_inode *inode, uint64_t index, void *data,
		    uint64_t size)
{
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int ps = pwb__page_size(bdi);
	uint64_t start = index << bdi->page_shift, dev_off, t0;
	size_t done = 0;
	int ret;

	if (start >= size) {
		memset(data, 0, ps);
		return 0;
	}
	ret = pwb__pcache_dev_lookup(inode, index, &dev_off);
	if (ret == -ENODATA) {
		memset(data, 0, ps);
		return 0;
	}
	if (ret)
		return pwb__err(ret < 0 ? ret : -EIO,
				"map_page of page %llu failed: %s",
				(unsigned long long)index,
				pwb__strerror(ret));
	if ((dev_off & (bdi->lbs - 1)) || dev_off > bdi->capacity ||
	    bdi->capacity - dev_off < ps)
		return pwb__err(-ERANGE, "map_page gave device offset %llu "
					 "for page %llu: unaligned or past "
					 "the device",
				(unsigned long long)dev_off,
				(unsigned long long)index);
	ret = pwb__fault_check_read(bdi, dev_off, ps);
	if (ret)
		return pwb__err(ret, "reading page %llu: %s",
				(unsigned long long)index, pwb__strerror(ret));
	t0 = pwb__now(bdi);
	while (done < ps) {
		ssize_t r = pread(bdi->fd, (char *)data + done, ps - done,
				  (off_t)(dev_off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			pwb__blocked_since(bdi, inode,
					   pwb__aread(&inode->tenant),
					   PWB_BLOCK_READ, t0);
			return pwb__err(ret, "reading page %llu: %s",
					(unsigned long long)index,
					pwb__strerror(ret));
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	pwb__blocked_since(bdi, inode, pwb__aread(&inode->tenant),
			   PWB_BLOCK_READ, t0);
	uatomic_inc(&bdi->pcache->read_ios);
	uatomic_inc(&bdi->pcache->read_pages);
	if (done < ps)
		memset((char *)data + done, 0, ps - done);
	/* Bytes past the end of the file read as zeros. */
	if (size - start < ps)
		memset((char *)data + (size - start), 0,
		       ps - (size - start));
	return 0;
}

/* Fill page @p (locked, not up to date) from the device: zeros at and
 * past @size and for pages the device does not hold. 0 or -errno. */
int pwb__pcache_fill_locked(struct pwb_inode *inode, struct pwb__page *p,
			    uint64_t size)
{
	int ret;

	pwb__page_assert_locked(p);
	ret = fill_buf(inode, p->index, p->data, size);

	if (!ret)
		uatomic_or(&p->flags, PWB__PG_UPTODATE);
	/* Clean (or, failed, empty): reclaimable. */
	pwb__pcache_lru_add(inode->bdi->pcache, p,
			    pwb__pcache_owner_ctx(inode));
	return ret;
}

/* The most pages a read fills with one device read, PWB__FILL_RUN_MAX
 * (128 KiB of 4 KiB pages): a large uncached pwb_read() costs a read per
 * run, not per page. */
#define FILL_RUN_MAX PWB__FILL_RUN_MAX

/* Take page @index into a run: cached or made, its lock free and its data
 * not up to date (so not dirty: a page is filled before it is dirtied).
 * NULL (nothing held) ends the run. */
static struct pwb__page *run_page(struct pwb_inode *inode, uint64_t index)
{
	struct pwb__page *q;

	if (pwb__pcache_page_find(inode, index, true, PWB__ROOM_RECLAIM, &q))
		return NULL;	/* no room: the run ends here */
	/* After the run's first page, in rising index (base.h). */
	if (pwb__page_trylock_nested(q)) {
		pwb__page_put(q);
		return NULL;
	}
	if (pwb__aread(&q->flags) & (PWB__PG_UPTODATE | PWB__PG_READING)) {
		pwb__page_unlock(q);
		pwb__page_put(q);
		return NULL;
	}
	return q;
}

/*
 * Fill page @p (locked, not up to date) and, with the same device read,
 * the pages after it up to @last that are not up to date, as long as the
 * device holds them right after @p's block. Pages another thread holds
 * end the run; so do holes, the end of the file and the cache's limit.
 * 0 or -errno about @p, as pwb__pcache_fill_locked(); the run's other pages are
 * filled with it or left as they were.
 */
static int page_fill_run_locked(struct pwb_inode *inode, struct pwb__page *p,
				uint64_t size, uint64_t last)
{
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int ps = pwb__page_size(bdi), n = 1, i;
	struct pwb__page *run[FILL_RUN_MAX];
	struct iovec iov[FILL_RUN_MAX];
	uint64_t first = p->index, dev0, dev, tail;
	ssize_t r;

	pwb__page_assert_locked(p);
	if (size == 0 || last <= first ||
	    first >= (size - 1) >> bdi->page_shift)
		return pwb__pcache_fill_locked(inode, p, size);
	if (last > (size - 1) >> bdi->page_shift)
		last = (size - 1) >> bdi->page_shift;
	if (last - first >= FILL_RUN_MAX)
		last = first + FILL_RUN_MAX - 1;
	/* A hole or a bad mapping: the one-page path says what it is. */
	if (pwb__pcache_dev_lookup(inode, first, &dev0) || (dev0 & (bdi->lbs - 1)))
		return pwb__pcache_fill_locked(inode, p, size);
	run[0] = p;
	while (first + n <= last) {
		struct pwb__page *q;
		uint64_t again;

		if (pwb__pcache_dev_lookup(inode, first + n, &dev) ||
		    dev != dev0 + (uint64_t)n * ps)
			break;
		q = run_page(inode, first + n);
		if (!q)
			break;
		/* Looked up again now that q is in the index: a truncate
		 * that cut the page off meanwhile (and marked it zeros, or
		 * freed its block) dropped the pages in the index after
		 * that, which would have missed one made from the first
		 * look-up (pwb__pcache_discarded()). */
		if (pwb__pcache_dev_lookup(inode, first + n, &again) ||
		    again != dev) {
			pwb__page_unlock(q);
			pwb__pcache_lru_add(bdi->pcache, q,
					    pwb__pcache_owner_ctx(inode));
			pwb__page_put(q);
			break;
		}
		run[n++] = q;
	}
	if (n > 1 && dev0 <= bdi->capacity &&
	    bdi->capacity - dev0 >= (uint64_t)n * ps &&
	    !pwb__fault_check_read(bdi, dev0, (uint64_t)n * ps)) {
		uint64_t t0 = pwb__now(bdi);

		for (i = 0; i < n; i++)
			iov[i] = (struct iovec){ run[i]->data, ps };
		do
			r = preadv(bdi->fd, iov, (int)n, (off_t)dev0);
		while (r < 0 && errno == EINTR);
		pwb__blocked_since(bdi, inode, pwb__aread(&inode->tenant),
				   PWB_BLOCK_READ, t0);
	} else {
		r = -1;
	}
	if (r != (ssize_t)n * ps) {
		/* An error, a short read or past the device: each page on
		 * its own, the first one now, which reports what failed. */
		for (i = 1; i < n; i++) {
			pwb__page_unlock(run[i]);
			pwb__pcache_lru_add(bdi->pcache, run[i],
					    pwb__pcache_owner_ctx(inode));
			pwb__page_put(run[i]);
		}
		return pwb__pcache_fill_locked(inode, p, size);
	}
	uatomic_inc(&bdi->pcache->read_ios);
	uatomic_add(&bdi->pcache->read_pages, n);
	/* Bytes past the end of the file read as zeros. */
	tail = size - ((first + n - 1) << bdi->page_shift);
	if (tail < ps)
		memset((char *)run[n - 1]->data + tail, 0, ps - tail);
	for (i = 0; i < n; i++) {
		uatomic_or(&run[i]->flags, PWB__PG_UPTODATE);
		if (i)	/* the caller unlocks and puts the first */
			pwb__page_unlock(run[i]);
		pwb__pcache_lru_add(bdi->pcache, run[i],
				    pwb__pcache_owner_ctx(inode));
		if (i)
			pwb__page_put(run[i]);
	}
	return 0;
}

/* Copy bytes [pgoff, pgoff + n) of page @index to @dst through a bounce
 * buffer, without caching the page. 0 or -errno. */
static int read_uncached(struct pwb_inode *inode, uint64_t index,
			 unsigned int pgoff, unsigned int n, void *dst,
			 uint64_t size)
{
	struct pwb_bdi *bdi = inode->bdi;
	void *bounce;
	int ret;

	if (posix_memalign(&bounce, PWB__MAX(bdi->lbs, 64u),
			   pwb__page_size(bdi)))
		return pwb__err(-ENOMEM, "pwb_read: out of memory");
	ret = fill_buf(inode, index, bounce, size);
	if (!ret)
		memcpy(dst, (char *)bounce + pgoff, n);
	free(bounce);
	return ret;
}

/*
 * pwb_read2()'s look-up of page @index with @flags (NOWAIT, DONTCACHE or
 * both), for a read of @want pages from there. 0: *@pp is locked and up
 * to date, a reference held. -EAGAIN (NOWAIT): the page is not cached or
 * not up to date, its lock is taken or a read of it is in flight.
 * -ENOENT (DONTCACHE): not cached, or not up to date and so not dirty (a
 * page is filled before it is dirtied): the device has it, read it
 * around the cache.
 *
 * It makes no read on this thread. NOWAIT alone, on a backend with read
 * rings, starts readahead as pwb_read() would, without waiting (the
 * kernel's filemap_get_pages() with IOCB_NOWAIT): a miss starts what
 * pwb__ra_miss() reads for this reader, the marker the next window; and
 * a page under read on a ring whose lock is free has that ring reaped
 * and is looked at again. Any other flags start nothing.
 */
static int rw_page_get_locked(struct pwb_inode *inode, uint64_t index,
			      uint64_t want, unsigned int flags,
			      struct pwb__page **pp)
{
	bool ra = flags == PWB_RW_NOWAIT && inode->bdi->pcache->ra.ops;
	struct pwb__page *p;
	int ret;

	ret = pwb__pcache_page_find(inode, index, false, PWB__ROOM_RECLAIM,
				    &p);
	if (ret == -ENOENT && ra) {
		pwb__ra_miss(inode, index, want, true);
		/* Made and under read, read already, or left out. */
		ret = pwb__pcache_page_find(inode, index, false,
					    PWB__ROOM_RECLAIM, &p);
	} else if (!ret && ra &&
		   (pwb__aread(&p->flags) & PWB__PG_READAHEAD)) {
		pwb__ra_marker(inode, p, want, true);
	}
	if (ret)
		return ret == -ENOENT && (flags & PWB_RW_NOWAIT) ? -EAGAIN
								 : ret;
	if (!(flags & PWB_RW_NOWAIT)) {
		pwb__page_lock_settled(inode, p);
	} else if (!pwb__page_trylock_settled(p) &&
		   !(ra && pwb__page_read_poll(inode->bdi, p) &&
		     pwb__page_trylock_settled(p))) {
		pwb__page_put(p);
		return -EAGAIN;
	}
	if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE)) {
		pwb__page_unlock(p);
		pwb__page_put(p);
		return (flags & PWB_RW_NOWAIT) ? -EAGAIN : -ENOENT;
	}
	*pp = p;
	return 0;
}

/*
 * The hit path of pwb_read(): a range inside one cached, up-to-date page
 * that no thread holds locked. No inode lock and no reference on the
 * inode: the read-side section keeps the inode and its index (a close
 * unpublishes pc->pages and waits for a grace period before destroying
 * it), and the page reference keeps the page and its buffer once the
 * section ends. Nor the page lock: the copy is checked against the
 * page's sequence count (pcache.h), so that a hit writes to nothing
 * other threads' hits on that page write but the reference count (and
 * the referenced bit, once). Return the bytes copied, or -EAGAIN to take
 * the slow path (which does the checks, and copies again over what a
 * copy that overlapped a writer left in @buf: bytes of this page, old or
 * new, never another's, since the reference keeps the buffer ours).
 */
static inline __attribute__((always_inline)) ssize_t
read_fast(struct pwb_inode *inode, void *buf, size_t len, uint64_t off)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb__page *p;
	unsigned int pgoff, seq;
	uint64_t size;

	if (!pc || !buf || pwb__in_flusher())
		return -EAGAIN;	/* the slow path says why */
	size = pwb__aread(&pc->size);
	if (off >= size)
		return -EAGAIN;	/* end of file: the slow path says 0 */
	if (len > size - off)
		len = (size_t)(size - off);
#ifdef PWB__TSAN
	/* TSan cannot tell a copy the count voids from a race: take the
	 * lock, as the slow path does. */
	p = pwb__fast_lock_page(inode, len, off, &pgoff);
	seq = 0;
#else
	p = pwb__fast_get_page(inode, len, off, &pgoff);
	seq = p ? pwb__page_seq_begin(p) : 1;
#endif
	if (!p)
		return -EAGAIN;
	/* Locked (a writer, a fill, a slow reader), not up to date, or the
	 * readahead marker (the slow path starts the next window). Acquire:
	 * a page a read in flight filled is seen with its data. */
	if ((seq & 1) ||
	    (pwb__page_flags(p) & (PWB__PG_UPTODATE | PWB__PG_READAHEAD)) !=
		    PWB__PG_UPTODATE)
		goto slow;
	memcpy(buf, (char *)p->data + pgoff, len);
#ifdef PWB__TSAN
	pwb__page_unlock(p);
#else
	/* A lock holder changed the data meanwhile: copy it again there. */
	if (caa_unlikely(!pwb__page_seq_valid(p, seq))) {
		pwb__page_put(p);
		return -EAGAIN;
	}
#endif
	pwb__page_read_touch(p);
	pwb__page_put(p);
	return (ssize_t)len;
slow:
#ifdef PWB__TSAN
	pwb__page_unlock(p);
#endif
	pwb__page_put(p);
	return -EAGAIN;
}

/* The slow path of pwb_read() and pwb_read2(): out of line, so that the
 * hit path saves no registers for it. With @flags (rw_page_get_locked()):
 * NOWAIT stops (-EAGAIN) where a page is not cached and up to date, its
 * lock is taken or a read of it is in flight, having started readahead
 * there on a backend with read rings; DONTCACHE reads pages not cached
 * around the cache, and no readahead. */
static __attribute__((noinline)) ssize_t
read_slow(struct pwb_inode *inode, void *buf, size_t len, uint64_t off,
	  unsigned int flags, const char *who)
{
	struct pwb__pcache_inode *pc;
	size_t done = 0;
	unsigned int shift, ps;
	uint64_t size, last;
	int ret;

	if (!buf && len)
		return pwb__err(-EINVAL, "%s: NULL buf", who);
	ret = pwb__pcache_enter(inode, who);
	if (ret)
		return ret;
	pc = inode->pcache;
	shift = inode->bdi->page_shift;
	ps = 1u << shift;
	size = pwb__aread(&pc->size);
	if (off >= size)
		len = 0;
	else if (len > size - off)
		len = (size_t)(size - off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	last = len ? (off + len - 1) >> shift : 0;
	while (done < len) {
		uint64_t pos = off + done;
		unsigned int pgoff = (unsigned int)(pos & (ps - 1));
		unsigned int n = (unsigned int)PWB__MIN((size_t)(ps - pgoff),
							len - done);
		uint64_t index = pos >> shift, want = last - index + 1;
		struct pwb__page *p;

		if (caa_unlikely(flags)) {
			/* pwb_read2(): no read on this thread. */
			ret = rw_page_get_locked(inode, index, want, flags,
						 &p);
		} else {
			/* Not cached: read it with what readahead adds
			 * (readahead.c); the marker: start the next
			 * window. */
			ret = pwb__pcache_page_find(inode, index, false,
						    PWB__ROOM_RECLAIM, &p);
			if (ret == -ENOENT) {
				pwb__ra_miss(inode, index, want, false);
				ret = pwb__pcache_page_find(inode, index, true,
							    PWB__ROOM_RECLAIM,
							    &p);
			} else if (!ret && (pwb__aread(&p->flags) &
					    PWB__PG_READAHEAD)) {
				pwb__ra_marker(inode, p, want, false);
			}
		}
		if (ret == -ENOBUFS || ret == -ENOENT) {
			/* The cache is full of dirty pages, or
			 * PWB_RW_DONTCACHE: read around it (the page is
			 * not cached, so the device has it). */
			ret = read_uncached(inode, pos >> shift, pgoff, n,
					    (char *)buf + done,
					    pwb__aread(&pc->size));
			if (ret)
				break;
			done += n;
			continue;
		}
		if (ret)
			break;
		/* Waits for a read in flight; a failed one left the page
		 * not up to date, and the fill below reports the error.
		 * pwb_read2() has its page locked and up to date. */
		if (!flags)
			pwb__page_lock_settled(inode, p);
		if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE))
			ret = page_fill_run_locked(inode, p,
						   pwb__aread(&pc->size), last);
		if (!ret) {
			memcpy((char *)buf + done,
			       (char *)pwb__page_addr(p, index, shift) + pgoff,
			       n);
			pwb__page_read_touch(p);
		}
		pwb__page_unlock(p);
		pwb__page_put(p);
		if (ret)
			break;
		done += n;
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	if (done || !ret)
		return (ssize_t)done;
	if (ret == -EAGAIN)
		return pwb__err(-EAGAIN, "%s: would wait (PWB_RW_NOWAIT)", who);
	return ret;
}

PWB_API ssize_t pwb_read(struct pwb_inode *inode, void *buf, size_t len,
			 uint64_t off)
{
	pwb__err_clear();
	if (caa_likely(inode && len)) {
		ssize_t r = read_fast(inode, buf, len, off);

		if (r != -EAGAIN)
			return r;
	}
	return read_slow(inode, buf, len, off, 0, "pwb_read");
}

PWB_API ssize_t pwb_read2(struct pwb_inode *inode, void *buf, size_t len,
			  uint64_t off, unsigned int flags)
{
	pwb__err_clear();
	if (flags & ~PWB__RW_FLAGS)
		return pwb__err(-EINVAL, "pwb_read2: unknown flags 0x%x",
				flags & ~PWB__RW_FLAGS);
	/* PWB_RW_SYNC means nothing to a read: alone, it is pwb_read(). */
	flags &= PWB_RW_NOWAIT | PWB_RW_DONTCACHE;
	/* The hit path never waits and brings nothing in: every flag takes
	 * it. */
	if (caa_likely(inode && len)) {
		ssize_t r = read_fast(inode, buf, len, off);

		if (r != -EAGAIN)
			return r;
	}
	return read_slow(inode, buf, len, off, flags, "pwb_read2");
}
