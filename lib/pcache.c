// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache.c - library-owned pages: pwb_write(), pwb_read(), the file size,
 * truncate, and reclaim of clean pages (issue 12). pcache.h describes the
 * index, the page lifetime and the stable-page protocol.
 *
 * Memory bound: a page is charged to bdi->pcache->nr_pages before it is
 * allocated; a writer or reader that would go above cache_bytes first
 * frees clean pages itself (direct reclaim), else kicks background
 * writeback and waits, up to throttle_timeout_ms of cfg.clock, then fails
 * with -ETIMEDOUT. So the cache never holds more than cache_bytes.
 */
#include "pcache.h"
#include "space.h"

#include <limits.h>
#include <sys/mman.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long index_hash(uint64_t index)
{
	uint64_t h = index * 0x9e3779b97f4a7c15ull;

	return (unsigned long)(h ^ (h >> 29));
}

static int index_match(struct cds_lfht_node *node, const void *key)
{
	const struct pwb__page *p =
		caa_container_of(node, struct pwb__page, node);

	/* A page another thread just added: pairs with the release before
	 * cds_lfht_add_unique(), as in page_of(). */
	PWB__TSAN_ACQUIRE(node);
	return p->index == *(const uint64_t *)key;
}

/* The page of a table node; NULL for NULL (no arithmetic on NULL). */
static struct pwb__page *page_of(struct cds_lfht_node *node)
{
	if (!node)
		return NULL;
	/* Pairs with the release before cds_lfht_add_unique(): liburcu's
	 * own barriers are invisible to TSan. */
	PWB__TSAN_ACQUIRE(node);
	return caa_container_of(node, struct pwb__page, node);
}

/* ---------------------------------------------------------------------- */
/* Integration points (the lead wires the space layer in here)           */

/*
 * The space layer (space.c), for inodes opened without map_page
 * (allocator mode, inode->space set); user-map inodes have none.
 */

/* Before pages [first, first + nr) are dirtied: reserve device space for
 * those not yet allocated, so -ENOSPC reaches pwb_write(). */
static int pcache_reserve(struct pwb_inode *inode, uint64_t first,
			  uint64_t nr)
{
	if (!inode->space)
		return 0;
	return pwb__space_reserve(inode, first, nr);
}

/* The device offset of page @index before it is read. User-map mode:
 * every page below the size exists, at map_page's offset. Allocator mode:
 * only allocated pages (-ENODATA: a hole or never written, zeros); the
 * allocator's map_page would allocate. */
static int pcache_dev_lookup(struct pwb_inode *inode, uint64_t index,
			     uint64_t *dev_off)
{
	if (inode->space)
		return pwb__space_lookup(inode, index, dev_off);
	return inode->ops.map_page(inode, index, dev_off);
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
/* Pages                                                                  */

/* Map one chunk, keep one buffer of it for the caller and pool the rest.
 * NULL: out of memory. */
static void *chunk_carve(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	size_t ps = pwb__page_size(bdi), off;
	char *c = mmap(NULL, pb->chunk_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (c == MAP_FAILED)
		return NULL;
	pthread_mutex_lock(&pb->pool_lock);
	if (pb->nr_chunks == pb->cap_chunks) {
		size_t cap = pb->cap_chunks ? 2 * pb->cap_chunks : 16;
		void **v = realloc(pb->chunks, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&pb->pool_lock);
			munmap(c, pb->chunk_bytes);
			return NULL;
		}
		pb->chunks = v;
		pb->cap_chunks = cap;
	}
	pb->chunks[pb->nr_chunks++] = c;
	for (off = ps; off + ps <= pb->chunk_bytes; off += ps) {
		*(void **)(c + off) = pb->pool;
		pb->pool = c + off;
		pb->pool_len++;
	}
	pthread_mutex_unlock(&pb->pool_lock);
	return c;
}

/* A page buffer: from the pool, else a new chunk. NULL: out of memory. */
static void *buf_alloc(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	void *b;

	pthread_mutex_lock(&pb->pool_lock);
	b = pb->pool;
	if (b) {
		pb->pool = *(void **)b;
		pb->pool_len--;
	}
	pthread_mutex_unlock(&pb->pool_lock);
	return b ? b : chunk_carve(bdi);
}

static void buf_free(struct pwb__pcache_bdi *pb, void *b)
{
	pthread_mutex_lock(&pb->pool_lock);
	*(void **)b = pb->pool;
	pb->pool = b;
	pb->pool_len++;
	pthread_mutex_unlock(&pb->pool_lock);
}

static void page_free_rcu(struct rcu_head *head)
{
	struct pwb__page *p = caa_container_of(head, struct pwb__page, rcu);

	pwb__rcu_callback_begin(p);
	pthread_mutex_destroy(&p->lock);
	buf_free(p->pb, p->data);
	free(p);
}

/* The reference count's read-modify-writes, as compiler atomics: every
 * put happens before the kill that frees the page, for TSan too. Return
 * the value found (@old on success). */
static int ref_cmpxchg(struct pwb__page *p, int old, int new)
{
	__atomic_compare_exchange_n(&p->ref, &old, new, false,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return old;
}

/* Take a reference unless the page is dead. */
static bool page_get(struct pwb__page *p)
{
	int r = __atomic_load_n(&p->ref, __ATOMIC_RELAXED);

	while (r >= 0) {
		int old = ref_cmpxchg(p, r, r + 1);

		if (old == r)
			return true;
		r = old;
	}
	return false;
}

static void page_put(struct pwb__page *p)
{
	__atomic_fetch_sub(&p->ref, 1, __ATOMIC_SEQ_CST);
}

/* Remove @p (reference count 0 -> dead): unlink it, free it after a grace
 * period, uncharge it. Return false if someone holds a reference. */
static bool page_kill(struct pwb_inode *inode, struct pwb__page *p)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;

	if (ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return false;
	rcu_read_lock();
	cds_lfht_del(inode->pcache->pages, &p->node);
	pwb__rcu_read_unlock();
	PWB__TSAN_RELEASE(p);
	pwb__call_rcu(&p->rcu, page_free_rcu);
	uatomic_dec(&pb->nr_pages);
	return true;
}

/* Is page @index of @inode dirty or being written? */
static bool page_busy(struct pwb_inode *inode, uint64_t index)
{
	int st = pwb_page_state(inode, index);

	return st != 0;
}

/*
 * CLOCK sweep over @inode's pages: a referenced page loses its bit, an
 * unreferenced clean idle page is freed. Stop after @want pages freed.
 * Return the pages freed.
 */
static uint64_t sweep_inode(struct pwb_inode *inode, uint64_t want)
{
	struct cds_lfht_iter iter;
	struct pwb__page *p;
	uint64_t freed = 0;
	unsigned int held = 0;	/* pages visited under inode->lock */
	bool locked = false;

	rcu_read_lock();
	for (cds_lfht_first(inode->pcache->pages, &iter);
	     (p = page_of(cds_lfht_iter_get_node(&iter))) != NULL;
	     cds_lfht_next(inode->pcache->pages, &iter)) {
		bool busy;

		if (freed >= want)
			break;
		if (pwb__aread(&p->ref) != 0)
			continue;
		if (pwb__aread(&p->flags) & PWB__PG_REF) {
			uatomic_and(&p->flags, ~PWB__PG_REF);
			continue;
		}
		/*
		 * Whole inodes (no region slices): the tags are read under
		 * inode->lock, held over up to 64 pages at a time, instead
		 * of pwb_page_state()'s two lock rounds per page.
		 */
		if (!locked && !PWB__RCU_DEREF(inode->region)) {
			pthread_mutex_lock(&inode->lock);
			locked = !inode->region;
			if (!locked)
				pthread_mutex_unlock(&inode->lock);
			held = 0;
		}
		/* Dead first, then checked: a writer needs a reference to
		 * dirty it, which it cannot take now. */
		if (ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
			goto next;
		if (locked)
			busy = pwb__map_test(&inode->map, PWB__TAG_DIRTY,
					     p->index) ||
			       pwb__map_test(&inode->map, PWB__TAG_WRITEBACK,
					     p->index);
		else
			busy = page_busy(inode, p->index);
		if (busy) {
			__atomic_store_n(&p->ref, 0, __ATOMIC_RELEASE);
			goto next;
		}
		cds_lfht_del(inode->pcache->pages, &p->node);
		PWB__TSAN_RELEASE(p);
		pwb__call_rcu(&p->rcu, page_free_rcu);
		uatomic_dec(&inode->bdi->pcache->nr_pages);
		freed++;
next:
		if (locked && ++held >= 64) {
			pthread_mutex_unlock(&inode->lock);
			locked = false;
		}
	}
	if (locked)
		pthread_mutex_unlock(&inode->lock);
	pwb__rcu_read_unlock();
	return freed;
}

/* The context whose flusher reclaims @inode's pages. */
static int inode_owner_ctx(struct pwb_inode *inode, unsigned int nr)
{
	struct pwb__wb_ctx *wb = PWB__RCU_DEREF(inode->wb);

	if (wb)
		return (int)(wb->idx % nr);
	return (int)(inode->ino % nr);
}

/* Free up to @want clean pages of the inodes of context @idx (-1: every
 * inode). Return the pages freed. */
static uint64_t reclaim(struct pwb_bdi *bdi, int idx, uint64_t want)
{
	struct pwb_inode **v;
	size_t nr, i;
	uint64_t freed = 0;
	unsigned int nctx = pwb_bdi_nr_wb_ctx(bdi);

	if (!nctx)
		return 0;
	/* A read-side section around the walk keeps the inodes. */
	rcu_read_lock();
	v = pwb__bdi_collect_inodes(bdi, &nr);
	/* Two rounds: the first may only clear CLOCK bits. */
	for (int round = 0; round < 2 && freed < want; round++) {
		for (i = 0; i < nr && freed < want; i++) {
			if (!v[i]->pcache)
				continue;
			if (idx >= 0 && inode_owner_ctx(v[i], nctx) != idx)
				continue;
			if (pwb__inode_enter(v[i], PWB__HOLD_REF,
					     "reclaim"))
				continue;
			freed += sweep_inode(v[i], want - freed);
			pwb__inode_exit(v[i], PWB__HOLD_REF);
		}
	}
	pwb__rcu_read_unlock();
	pwb__err_clear();
	free(v);
	return freed;
}

/* Wake the flusher of every context but @except, to reclaim. */
static void kick_flushers(struct pwb_bdi *bdi, int except)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i;

	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; arr && i < arr->nr; i++)
		if ((int)i != except)
			pwb__wb_kick_background(arr->ctx[i]);
	pwb__rcu_read_unlock();
}

/* The cache crossed its high watermark: wake every flusher to reclaim. */
static void kick_reclaim(struct pwb_bdi *bdi)
{
	if (uatomic_cmpxchg(&bdi->pcache->reclaiming, 0, 1) == 0)
		kick_flushers(bdi, -1);
}

void pwb__pcache_reclaim_ctx(struct pwb_bdi *bdi, unsigned int idx)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t n, low, freed, t0;

	if (!pb || idx >= PWB_MAX_WB_CTX)
		return;
	n = pwb__aread(&pb->nr_pages);
	low = pb->limit_pages - pb->limit_pages / 8;
	/* Hysteresis: reclaim starts above 15/16 of the limit and every
	 * context takes part (each from its own inodes) until the cache is
	 * down to 7/8. */
	if (n > pb->limit_pages - pb->limit_pages / 16)
		pwb__aset(&pb->reclaiming, 1);
	if (!pwb__aread(&pb->reclaiming))
		return;
	if (n <= low) {
		pwb__aset(&pb->reclaiming, 0);
		return;
	}
	uatomic_inc(&pb->reclaim_passes[idx]);
	t0 = pwb__clock_monotonic(NULL);
	freed = reclaim(bdi, (int)idx, n - low);
	uatomic_add(&pb->reclaim_ns[idx], pwb__clock_monotonic(NULL) - t0);
	if (freed)
		uatomic_add(&pb->reclaimed[idx], freed);
	if (pwb__aread(&pb->nr_pages) <= low)
		pwb__aset(&pb->reclaiming, 0);
	else if (freed)	/* the others' inodes hold the rest */
		kick_flushers(bdi, (int)idx);
}



/* Charge one page against cache_bytes: reclaim or wait for writeback
 * when the cache is full. 0, or -ETIMEDOUT. */
static int charge_page(struct pwb_inode *inode, bool wait)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t deadline = 0, timeout;

	timeout = bdi->cfg.throttle_timeout_ms * PWB__NSEC_PER_MSEC;
	for (;;) {
		uint64_t n = pwb__aread(&pb->nr_pages);
		uint64_t freed;

		if (n < pb->limit_pages) {
			if (uatomic_cmpxchg(&pb->nr_pages, n, n + 1) != n)
				continue;
			if (n + 1 > pb->limit_pages - pb->limit_pages / 16)
				kick_reclaim(bdi);
			return 0;
		}
		freed = reclaim(bdi, -1, 8);
		if (freed) {
			uatomic_add(&pb->direct_reclaims, freed);
			continue;
		}
		if (!wait)
			return -ENOBUFS;	/* no message: not an error */
		if (!deadline)
			deadline = pwb__now(bdi) + timeout;
		else if (timeout && pwb__now(bdi) >= deadline)
			return pwb__err(-ETIMEDOUT,
					"page cache full (cache_bytes %llu) "
					"and nothing written back within "
					"throttle_timeout_ms",
					(unsigned long long)
						bdi->cfg.cache_bytes);
		pwb_bdi_writeback(bdi, PWB_WB_ALL, 0);
		{
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
}

/*
 * Find page @index of @inode with a reference, creating it (not up to
 * date) if absent and @create. 0 and *@pp, -ENOENT (not @create), or
 * -ENOMEM / -ETIMEDOUT (message set); without @wait, -ENOBUFS at once
 * when the cache is full and nothing clean can be reclaimed.
 */
static int page_find(struct pwb_inode *inode, uint64_t index, bool create,
		     bool wait, struct pwb__page **pp)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb_bdi *bdi = inode->bdi;
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct pwb__page *p, *np;
	int ret;

	for (;;) {
		rcu_read_lock();
		cds_lfht_lookup(pc->pages, index_hash(index), index_match,
				&index, &iter);
		node = cds_lfht_iter_get_node(&iter);
		p = page_of(node);
		if (p && page_get(p)) {
			pwb__rcu_read_unlock();
			*pp = p;
			return 0;
		}
		pwb__rcu_read_unlock();
		if (p) {	/* dying: gone after its remover's del */
			sched_yield();
			continue;
		}
		if (!create)
			return -ENOENT;
		ret = charge_page(inode, wait);
		if (ret)
			return ret;
		np = calloc(1, sizeof(*np));
		if (np && !(np->data = buf_alloc(bdi))) {
			free(np);
			np = NULL;
		}
		if (!np) {
			uatomic_dec(&bdi->pcache->nr_pages);
			return pwb__err(-ENOMEM, "page cache: out of memory");
		}
		np->index = index;
		np->pb = bdi->pcache;
		np->ref = 1;
		pwb__mutex_init(&np->lock, PWB__LOCK_PAGE);
		cds_lfht_node_init(&np->node);
		PWB__TSAN_RELEASE(&np->node);
		rcu_read_lock();
		node = cds_lfht_add_unique(pc->pages, index_hash(index),
					   index_match, &np->index,
					   &np->node);
		pwb__rcu_read_unlock();
		if (node == &np->node) {
			*pp = np;
			return 0;
		}
		/* Someone else inserted it first: use theirs. */
		pthread_mutex_destroy(&np->lock);
		buf_free(bdi->pcache, np->data);
		free(np);
		uatomic_dec(&bdi->pcache->nr_pages);
	}
}

/* Fill page @p (locked, not up to date) from the device: zeros at and
 * past @size and for pages the device does not hold. 0 or -errno. */
static int fill_buf(struct pwb_inode *inode, uint64_t index, void *data,
		    uint64_t size);

static int page_fill_locked(struct pwb_inode *inode, struct pwb__page *p,
			    uint64_t size)
{
	int ret = fill_buf(inode, p->index, p->data, size);

	if (!ret)
		uatomic_or(&p->flags, PWB__PG_UPTODATE);
	return ret;
}

/* Fill @data (page_size bytes, aligned for O_DIRECT) with page @index as
 * the device holds it: zeros at and past @size and for pages the device
 * does not hold. 0 or -errno (message set). */
static int fill_buf(struct pwb_inode *inode, uint64_t index, void *data,
		    uint64_t size)
{
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int ps = pwb__page_size(bdi);
	uint64_t start = index << bdi->page_shift, dev_off;
	size_t done = 0;
	int ret;

	if (start >= size) {
		memset(data, 0, ps);
		return 0;
	}
	ret = pcache_dev_lookup(inode, index, &dev_off);
	if (ret == -ENODATA) {
		memset(data, 0, ps);
		return 0;
	}
	if (ret)
		return pwb__err(ret < 0 ? ret : -EIO,
				"map_page of page %llu failed: %s",
				(unsigned long long)index,
				pwb_strerror(ret));
	if ((dev_off & (bdi->lbs - 1)) || dev_off > bdi->capacity ||
	    bdi->capacity - dev_off < ps)
		return pwb__err(-ERANGE, "map_page gave device offset %llu "
					 "for page %llu: unaligned or past "
					 "the device",
				(unsigned long long)dev_off,
				(unsigned long long)index);
	while (done < ps) {
		ssize_t r = pread(bdi->fd, (char *)data + done, ps - done,
				  (off_t)(dev_off + done));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return pwb__err(-errno, "reading page %llu: %s",
					(unsigned long long)index,
					pwb_strerror(-errno));
		if (r == 0)
			break;
		done += (size_t)r;
	}
	if (done < ps)
		memset((char *)data + done, 0, ps - done);
	/* Bytes past the end of the file read as zeros. */
	if (size - start < ps)
		memset((char *)data + (size - start), 0,
		       ps - (size - start));
	return 0;
}

int pwb__pcache_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct pwb__page *p;
	int ret = 0;

	rcu_read_lock();
	cds_lfht_lookup(inode->pcache->pages, index_hash(index), index_match,
			&index, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (!node) {
		ret = -EIO;	/* dropped by a truncate racing a write */
	} else {
		p = page_of(node);
		/* Pairs with the full barrier of the writer's latch: the
		 * WRITEBACK tag was set before this call. */
		cmm_smp_mb();
		/* Acquire: a writer that just cleared its latch copied
		 * before (the data the device reads). */
		if (__atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) &
		    PWB__PG_WLATCH) {
			ret = -EAGAIN;
		} else if (pthread_mutex_trylock(&p->lock)) {
			/* A writer between its latch and its copy, or a
			 * reader copying out: not now. The lock also orders
			 * the last copy before the device reads the data. */
			ret = -EAGAIN;
		} else {
			pthread_mutex_unlock(&p->lock);
			*data = p->data;	/* tagged WRITEBACK: kept */
		}
	}
	pwb__rcu_read_unlock();
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Public calls                                                           */

/* Argument checks and the reference shared by the calls below. */
static int pc_enter(struct pwb_inode *inode, const char *who)
{
	if (!inode)
		return pwb__err(-EINVAL, "%s: NULL inode", who);
	if (pwb__in_flusher())
		return pwb__err(-EDEADLK, "%s called from an ops callback (a "
					  "flusher thread)",
				who);
	if (!inode->pcache)
		return pwb__err(-EINVAL, "%s: inode %llu has application-owned "
					 "pages (opened with get_page)",
				who, (unsigned long long)inode->ino);
	return pwb__inode_enter(inode, PWB__HOLD_REF, who);
}

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
 * and dirty it. @grow: raise the size to the end of the change. 0 or a
 * negative errno; *@dirtied tells whether the page was changed and
 * dirtied (also when pwb_mark_dirty then failed with -ETIMEDOUT).
 */
static int write_page(struct pwb_inode *inode, uint64_t index,
		      unsigned int pgoff, unsigned int n, const void *src,
		      bool grow, bool *dirtied)
{
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int ps = pwb__page_size(bdi);
	uint64_t start = index << bdi->page_shift;
	struct pwb__page *p;
	int ret;

	*dirtied = false;
	ret = pcache_reserve(inode, index, 1);
	if (ret)
		return ret;
	ret = page_find(inode, index, true, true, &p);
	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE)) {
		if (n == ps) {
			uatomic_or(&p->flags, PWB__PG_UPTODATE);
		} else {
			ret = page_fill_locked(inode, p,
					       pwb__aread(&inode->pcache->size));
			if (ret)
				goto out;
		}
	}
	/* Stable pages: latch (a full barrier), then wait for a write in
	 * flight; a flusher that tags the page from now on sees the latch
	 * in get_page and leaves the page for later. */
	uatomic_or(&p->flags, PWB__PG_WLATCH);
	ret = pwb_wait_writeback(inode, start, ps);
	if (ret) {
		uatomic_and(&p->flags, ~PWB__PG_WLATCH);
		goto out;
	}
	if (src)
		memcpy((char *)p->data + pgoff, src, n);
	else
		memset((char *)p->data + pgoff, 0, n);
	uatomic_and(&p->flags, ~PWB__PG_WLATCH);
	uatomic_or(&p->flags, PWB__PG_REF);
	pthread_mutex_unlock(&p->lock);
	if (grow)
		size_raise(inode->pcache, start + pgoff + n);
	/* Dirtied while we hold the reference: reclaim cannot drop the
	 * page in between (it needs the count at 0). */
	ret = pwb_mark_dirty(inode, start, ps);
	*dirtied = !ret || ret == -ETIMEDOUT || ret == -ESHUTDOWN;
	page_put(p);
	return ret;
out:
	pthread_mutex_unlock(&p->lock);
	page_put(p);
	return ret;
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
static ssize_t write_fast(struct pwb_inode *inode, const void *buf,
			  size_t len, uint64_t off)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht_iter iter;
	struct cds_lfht *pages;
	struct pwb__page *p;
	unsigned int shift, pgoff;
	uint64_t index;
	bool ok;

	if (!pc || !buf || PWB__RCU_DEREF(inode->region))
		return -EAGAIN;
	shift = inode->bdi->page_shift;
	pgoff = (unsigned int)(off & ((1u << shift) - 1));
	if (len > (1u << shift) - pgoff)
		return -EAGAIN;
	index = off >> shift;
	rcu_read_lock();
	pages = PWB__RCU_DEREF(pc->pages);
	if (caa_unlikely(!pages)) {
		pwb__rcu_read_unlock();
		return -EAGAIN;
	}
	cds_lfht_lookup(pages, index_hash(index), index_match, &index, &iter);
	p = page_of(cds_lfht_iter_get_node(&iter));
	if (!p || !page_get(p)) {
		pwb__rcu_read_unlock();
		return -EAGAIN;
	}
	pwb__rcu_read_unlock();
	if (pthread_mutex_trylock(&p->lock)) {
		page_put(p);
		return -EAGAIN;
	}
	pthread_mutex_lock(&inode->lock);
	ok = !(inode->state & PWB__I_FREEING) && !PWB__READ(inode->region) &&
	     pwb__map_test(&inode->map, PWB__TAG_DIRTY, index) &&
	     !pwb__map_test(&inode->map, PWB__TAG_WRITEBACK, index);
	pthread_mutex_unlock(&inode->lock);
	if (!ok) {
		pthread_mutex_unlock(&p->lock);
		page_put(p);
		return -EAGAIN;
	}
	memcpy((char *)p->data + pgoff, buf, len);
	if (!(pwb__aread(&p->flags) & PWB__PG_REF))
		uatomic_or(&p->flags, PWB__PG_REF);
	pthread_mutex_unlock(&p->lock);
	size_raise(pc, off + len);
	page_put(p);
	return (ssize_t)len;
}

PWB_API ssize_t pwb_write(struct pwb_inode *inode, const void *buf,
			  size_t len, uint64_t off)
{
	size_t done = 0;
	unsigned int shift, ps;
	int ret;

	pwb__err_clear();
	if (caa_likely(inode && len)) {
		ssize_t r = write_fast(inode, buf, len, off);

		if (r != -EAGAIN)
			return r;
	}
	if (!buf && len)
		return pwb__err(-EINVAL, "pwb_write: NULL buf");
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	if (len && off > UINT64_MAX - len)
		return pwb__err(-EFBIG, "pwb_write: range %llu+%zu wraps past "
					"2^64",
				(unsigned long long)off, len);
	ret = pc_enter(inode, "pwb_write");
	if (ret)
		return ret;
	shift = inode->bdi->page_shift;
	ps = 1u << shift;
	while (done < len) {
		uint64_t pos = off + done;
		unsigned int pgoff = (unsigned int)(pos & (ps - 1));
		unsigned int n = (unsigned int)PWB__MIN((size_t)(ps - pgoff),
							len - done);
		bool dirtied;

		ret = write_page(inode, pos >> shift, pgoff, n,
				 (const char *)buf + done, true, &dirtied);
		if (dirtied)
			done += n;
		if (ret)
			break;
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	if (done)
		return (ssize_t)done;
	return ret;
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
 * The hit path of pwb_read(): a range inside one cached, up-to-date page
 * whose lock is free. No inode lock and no reference on the inode: the
 * read-side section keeps the inode and its index (a close unpublishes
 * pc->pages and waits for a grace period before destroying it), and the
 * page reference keeps the page once the section ends. Return the bytes
 * copied, or -EAGAIN to take the slow path (which does the checks).
 */
static ssize_t read_fast(struct pwb_inode *inode, void *buf, size_t len,
			 uint64_t off)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	struct cds_lfht *pages;
	struct pwb__page *p;
	unsigned int shift, pgoff;
	uint64_t size, index;

	if (!pc || !buf)
		return -EAGAIN;
	shift = inode->bdi->page_shift;
	pgoff = (unsigned int)(off & ((1u << shift) - 1));
	if (len > (1u << shift) - pgoff)
		return -EAGAIN;
	index = off >> shift;
	rcu_read_lock();
	pages = PWB__RCU_DEREF(pc->pages);
	if (caa_unlikely(!pages)) {
		pwb__rcu_read_unlock();
		return -EAGAIN;
	}
	size = pwb__aread(&pc->size);
	if (off >= size) {
		pwb__rcu_read_unlock();
		return 0;
	}
	if (len > size - off)
		len = (size_t)(size - off);
	cds_lfht_lookup(pages, index_hash(index), index_match, &index, &iter);
	node = cds_lfht_iter_get_node(&iter);
	p = page_of(node);
	if (!p || !page_get(p)) {
		pwb__rcu_read_unlock();
		return -EAGAIN;
	}
	pwb__rcu_read_unlock();
	if (pthread_mutex_trylock(&p->lock)) {
		page_put(p);
		return -EAGAIN;
	}
	if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE)) {
		pthread_mutex_unlock(&p->lock);
		page_put(p);
		return -EAGAIN;
	}
	memcpy(buf, (char *)p->data + pgoff, len);
	if (!(pwb__aread(&p->flags) & PWB__PG_REF))
		uatomic_or(&p->flags, PWB__PG_REF);
	pthread_mutex_unlock(&p->lock);
	page_put(p);
	return (ssize_t)len;
}

PWB_API ssize_t pwb_read(struct pwb_inode *inode, void *buf, size_t len,
			 uint64_t off)
{
	struct pwb__pcache_inode *pc;
	size_t done = 0;
	unsigned int shift, ps;
	uint64_t size;
	int ret;

	pwb__err_clear();
	if (caa_likely(inode && len)) {
		ssize_t r = read_fast(inode, buf, len, off);

		if (r != -EAGAIN)
			return r;
	}
	if (!buf && len)
		return pwb__err(-EINVAL, "pwb_read: NULL buf");
	ret = pc_enter(inode, "pwb_read");
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
	while (done < len) {
		uint64_t pos = off + done;
		unsigned int pgoff = (unsigned int)(pos & (ps - 1));
		unsigned int n = (unsigned int)PWB__MIN((size_t)(ps - pgoff),
							len - done);
		struct pwb__page *p;

		ret = page_find(inode, pos >> shift, true, false, &p);
		if (ret == -ENOBUFS) {
			/* The cache is full of dirty pages: read around it
			 * (the page is not cached, so the device has it). */
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
		pthread_mutex_lock(&p->lock);
		if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE))
			ret = page_fill_locked(inode, p,
					       pwb__aread(&pc->size));
		if (!ret) {
			memcpy((char *)buf + done, (char *)p->data + pgoff, n);
			if (!(pwb__aread(&p->flags) & PWB__PG_REF))
				uatomic_or(&p->flags, PWB__PG_REF);
		}
		pthread_mutex_unlock(&p->lock);
		page_put(p);
		if (ret)
			break;
		done += n;
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	if (done || !ret)
		return (ssize_t)done;
	return ret;
}

PWB_API int pwb_inode_size(struct pwb_inode *inode, uint64_t *size)
{
	int ret;

	pwb__err_clear();
	if (!size)
		return pwb__err(-EINVAL, "pwb_inode_size: NULL size");
	ret = pc_enter(inode, "pwb_inode_size");
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
	ret = pc_enter(inode, "pwb_inode_set_size");
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
	return pwb_inode_discard(inode, size, UINT64_MAX);
}

/* Drop the cached pages [first, last] of @inode, waiting out short-lived
 * references (a reader's copy). */
static void drop_range(struct pwb_inode *inode, uint64_t first,
		       uint64_t last)
{
	struct cds_lfht_iter iter;
	struct pwb__page *p;
	bool again;

	do {
		again = false;
		rcu_read_lock();
		for (cds_lfht_first(inode->pcache->pages, &iter);
		     (p = page_of(cds_lfht_iter_get_node(&iter))) != NULL;
		     cds_lfht_next(inode->pcache->pages, &iter)) {
			if (p->index < first || p->index > last)
				continue;
			if (pwb__aread(&p->ref) < 0)
				continue;
			if (!page_kill(inode, p))
				again = true;
		}
		pwb__rcu_read_unlock();
		if (again)
			sched_yield();
	} while (again);
}

void pwb__pcache_discarded(struct pwb_inode *inode, uint64_t off,
			   uint64_t len, uint64_t first, uint64_t last)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	unsigned int shift = inode->bdi->page_shift, ps = 1u << shift;

	if (first <= last) {
		drop_range(inode, first, last);
		pcache_punch(inode, first, last);
	}
	if (len != UINT64_MAX)
		return;
	/* Truncate: the size, and zeros after it in its last page. */
	{
		uint64_t s = pwb__aread(&pc->size);

		while (s > off) {
			uint64_t old = uatomic_cmpxchg(&pc->size, s, off);

			if (old == s)
				break;
			s = old;
		}
	}
	if (off & (ps - 1)) {
		struct pwb__page *p;
		bool dirtied;

		if (!page_find(inode, off >> shift, false, true, &p)) {
			page_put(p);
			write_page(inode, off >> shift,
				   (unsigned int)(off & (ps - 1)),
				   ps - (unsigned int)(off & (ps - 1)), NULL,
				   false, &dirtied);
		}
	}
}

void pwb__pcache_stats(struct pwb_bdi *bdi, int idx, struct pwb_stats *st)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	unsigned int i;

	if (!pb)
		return;
	st->cache_pages = pwb__aread(&pb->nr_pages);
	if (idx >= 0 && idx < PWB_MAX_WB_CTX) {
		st->reclaimed_pages = pwb__aread(&pb->reclaimed[idx]);
		st->reclaim_passes = pwb__aread(&pb->reclaim_passes[idx]);
		st->reclaim_ns = pwb__aread(&pb->reclaim_ns[idx]);
		return;
	}
	for (i = 0; i < PWB_MAX_WB_CTX; i++) {
		st->reclaimed_pages += pwb__aread(&pb->reclaimed[i]);
		st->reclaim_passes += pwb__aread(&pb->reclaim_passes[i]);
		st->reclaim_ns += pwb__aread(&pb->reclaim_ns[i]);
	}
	st->direct_reclaimed_pages = pwb__aread(&pb->direct_reclaims);
	st->reclaimed_pages += st->direct_reclaimed_pages;
}

/* ---------------------------------------------------------------------- */
/* Set-up and tear-down                                                   */

int pwb__pcache_bdi_init(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = calloc(1, sizeof(*pb));
	uint64_t bytes = bdi->cfg.cache_bytes;

	if (!pb)
		return pwb__err(-ENOMEM, "out of memory");
	if (!bytes)
		bytes = PWB__MAX(256ull << 20, 2 * bdi->cfg.dirty_bytes);
	pb->limit_pages = PWB__MAX(bytes >> bdi->page_shift, 16u);
	pb->chunk_bytes = PWB__MAX(PWB__PCACHE_CHUNK_BYTES,
				   pwb__page_size(bdi));
	pwb__mutex_init(&pb->pool_lock, PWB__LOCK_PAGE_POOL);
	bdi->pcache = pb;
	return 0;
}

/* After the last page was freed (close runs rcu_barrier() first). */
void pwb__pcache_bdi_fini(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;

	if (!pb)
		return;
	/* The lock only for TSan, which does not see rcu_barrier(). */
	pthread_mutex_lock(&pb->pool_lock);
	while (pb->nr_chunks)
		munmap(pb->chunks[--pb->nr_chunks], pb->chunk_bytes);
	free(pb->chunks);
	pb->pool = NULL;
	pthread_mutex_unlock(&pb->pool_lock);
	pthread_mutex_destroy(&pb->pool_lock);
	free(pb);
	bdi->pcache = NULL;
}

int pwb__pcache_inode_init(struct pwb_inode *inode)
{
	struct pwb__pcache_inode *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return pwb__err(-ENOMEM, "pwb_inode_open: out of memory");
	/* 512 buckets (8 KiB) from the start: growing by chain length
	 * lags behind a cache that fills fast, and long chains made
	 * lookups most of a miss's cost (measured). No accounting: with it
	 * the table also shrinks while reclaim empties it. */
	pc->pages = cds_lfht_new(512, 512, 0, CDS_LFHT_AUTO_RESIZE, NULL);
	if (!pc->pages) {
		free(pc);
		return pwb__err(-ENOMEM, "pwb_inode_open: out of memory");
	}
	inode->pcache = pc;
	return 0;
}

void pwb__pcache_inode_close(struct pwb_inode *inode)
{
	struct pwb__pcache_inode *pc = inode->pcache;

	struct cds_lfht *pages;

	if (!pc || !pc->pages)
		return;
	drop_range(inode, 0, UINT64_MAX);
	/* read_fast() may still be looking in the index. */
	pages = pc->pages;
	PWB__RCU_ASSIGN(pc->pages, NULL);
	pwb__synchronize_rcu();
	cds_lfht_destroy(pages, NULL);
}

void pwb__pcache_inode_free(struct pwb_inode *inode)
{
	free(inode->pcache);
	inode->pcache = NULL;
}

uint64_t pwb__pcache_size(struct pwb_inode *inode)
{
	return inode->pcache ? pwb__aread(&inode->pcache->size) : 0;
}

void pwb__pcache_size_load(struct pwb_inode *inode, uint64_t size)
{
	if (inode->pcache)
		pwb__aset(&inode->pcache->size, size);
}
