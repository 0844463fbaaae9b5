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
#include "probes.h"
#include "pcache.h"
#include "space.h"

#include <limits.h>
#include <sys/mman.h>
#include <sys/uio.h>
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

/* The device offset of page @index before it is read. User-map mode:
 * every page below the size exists, at map_page's offset. Allocator mode:
 * only pages whose blocks hold written data (-ENODATA: a hole, never
 * written, or a block allocated whose write has not ended: zeros); the
 * allocator's map_page would allocate. */
static int pcache_dev_lookup(struct pwb_inode *inode, uint64_t index,
			     uint64_t *dev_off)
{
	bool zeroed;

	if (inode->space)
		return pwb__space_read_lookup(inode, index, dev_off);
	/* Cut off by a truncate and not written since: zeros. */
	pthread_mutex_lock(&inode->lock);
	zeroed = pwb__extmap_count(&inode->pcache->zeroed) &&
		 pwb__extmap_find(&inode->pcache->zeroed, index);
	pthread_mutex_unlock(&inode->lock);
	if (zeroed)
		return -ENODATA;
	return inode->ops.map_page(inode, index, dev_off);
}

/* Page @index is about to get data of its own: it no longer reads as
 * zeros (pcache_dev_lookup). 0, or -ENOMEM (message set). */
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
/* Pages                                                                  */

/*
 * Map @len bytes (a multiple of 2 MiB) aligned to 2 MiB, asking for
 * transparent huge pages, and fault them in. One fault per 2 MiB instead
 * of one per 4 KiB page: in a paravirtualised guest each fault is an exit,
 * and they were most of a cold pwb_write(). Where THP is off (or the
 * madvise calls are unknown) the mapping is faulted in page by page, as
 * before. NULL: out of memory.
 */
static char *chunk_map(size_t len)
{
	size_t align = PWB__PCACHE_CHUNK_BYTES, head;
	char *raw, *c;

	raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	head = (align - ((uintptr_t)raw & (align - 1))) & (align - 1);
	c = raw + head;
	if (head)
		munmap(raw, head);
	munmap(c + len, align - head);
#ifdef MADV_HUGEPAGE
	madvise(c, len, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
	if (madvise(c, len, MADV_POPULATE_WRITE) == 0)
		return c;
	if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON) {
		munmap(c, len);
		return NULL;
	}
#endif
	/* Older kernels: touch each page (a huge page takes one fault). */
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)c)[off] = 0;
	return c;
}

/*
 * Chunks a closed bdi gave back, kept for the next bdi of the process
 * instead of being unmapped: memory the process already touched is cheap
 * to reuse, while a fresh mapping is zeroed by the kernel (and, in a
 * virtual machine whose host takes back free memory, backed again by the
 * host: about 600 MB/s here, most of the cost of filling a new cache).
 * They are marked MADV_FREE, so the kernel may still take them under
 * memory pressure. At most retain_cap bytes are kept: an eighth of RAM,
 * up to 1 GiB.
 */
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
PWB__MUTEX_RANK_STATIC(retain_lock, PWB__LOCK_CHUNK_RETAIN);
static struct {
	void **v;			/* retain_lock: retained chunks */
	size_t nr, cap;			/* retain_lock */
} retained;

static size_t retain_cap(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
					    : 0;

	return (size_t)PWB__MIN(ram / 8, 1ull << 30) / PWB__PCACHE_CHUNK_BYTES;
}

/* A retained chunk of the standard size, or NULL. */
static char *chunk_reuse(size_t len)
{
	char *c = NULL;

	if (len != PWB__PCACHE_CHUNK_BYTES)
		return NULL;
	pthread_mutex_lock(&retain_lock);
	if (retained.nr)
		c = retained.v[--retained.nr];
	pthread_mutex_unlock(&retain_lock);
	return c;
}

/* Give back a chunk of a closing bdi: keep it or unmap it. */
static void chunk_release(char *c, size_t len)
{
	bool kept = false;

	if (len == PWB__PCACHE_CHUNK_BYTES) {
		pthread_mutex_lock(&retain_lock);
		if (retained.nr == retained.cap &&
		    retained.cap < retain_cap()) {
			size_t cap = PWB__MIN(retained.cap ? 2 * retained.cap
							   : 64,
					      retain_cap());
			void **v = realloc(retained.v, cap * sizeof(*v));

			if (v) {
				retained.v = v;
				retained.cap = cap;
			}
		}
		if (retained.nr < retained.cap) {
			retained.v[retained.nr++] = c;
			kept = true;
		}
		pthread_mutex_unlock(&retain_lock);
	}
	if (!kept) {
		munmap(c, len);
		return;
	}
#ifdef MADV_FREE
	madvise(c, len, MADV_FREE);
#endif
}

/* Map one chunk, keep one buffer of it for the caller and pool the rest.
 * NULL: out of memory. */
static void *chunk_carve(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	size_t ps = pwb__page_size(bdi), off;
	char *c = chunk_reuse(pb->chunk_bytes);

	if (!c)
		c = chunk_map(pb->chunk_bytes);
	if (!c)
		return NULL;
	pthread_mutex_lock(&pb->pool_lock);
	if (pb->nr_chunks == pb->cap_chunks) {
		size_t cap = pb->cap_chunks ? 2 * pb->cap_chunks : 16;
		void **v = realloc(pb->chunks, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&pb->pool_lock);
			chunk_release(c, pb->chunk_bytes);
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

/* A reclaim batch: the first page's rcu_head, the others linked through
 * their lru heads (off every list once dead). One callback, one pool
 * lock for all the buffers. */
static void batch_free_rcu(struct rcu_head *head)
{
	struct pwb__page *first = caa_container_of(head, struct pwb__page, rcu);
	struct pwb__pcache_bdi *pb;
	struct pwb__page *p, *tmp;
	struct cds_list_head all;

	/* Pairs with the release after the batch was linked. */
	pwb__rcu_callback_begin(first);
	pb = first->pb;
	/* The list of the others, headed by the first page's lru. */
	cds_list_add(&all, &first->lru);
	pthread_mutex_lock(&pb->pool_lock);
	cds_list_for_each_entry_safe(p, tmp, &all, lru) {
		*(void **)p->data = pb->pool;
		pb->pool = p->data;
		pb->pool_len++;
	}
	pthread_mutex_unlock(&pb->pool_lock);
	cds_list_for_each_entry_safe(p, tmp, &all, lru) {
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
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

/*
 * Reclaim-list membership. lru_idx is claimed (-1 -> idx, seq_cst) before
 * the page is linked under that list's lock; a kill sets the reference
 * count dead (seq_cst) before it reads lru_idx. So either the kill sees
 * the claim and takes the list's lock to undo it, or the adder, which
 * looks for death under that lock, sees the kill and links nothing: a
 * dead page is never left on a list (its memory is freed after a grace
 * period and the list would point into it). The stores of -1 are
 * releases: the next claimer (acquire) may write the list head at once.
 */

/* Put @p at the tail of list @idx unless it is on one (or joining one),
 * or dead. */
static void lru_add(struct pwb__pcache_bdi *pb, struct pwb__page *p,
		    unsigned int idx)
{
	int i = (int)(idx % PWB_MAX_WB_CTX);
	struct pwb__pcache_lru *l = &pb->lru[i];
	int none = -1;

	if (pwb__aread(&p->lru_idx) >= 0 ||
	    !__atomic_compare_exchange_n(&p->lru_idx, &none, i, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&l->lock);
	if (pwb__aread(&p->lru_idx) != i) {
		/* A kill undid the claim. */
	} else if (__atomic_load_n(&p->ref, __ATOMIC_SEQ_CST) < 0) {
		/* Dying: stays off. */
		__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
	} else {
		cds_list_add_tail(&p->lru, &l->head);
		p->lru_linked = true;
		pwb__aset(&l->len, pwb__aread(&l->len) + 1);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Take dead page @p off its list, or undo a claim on one. */
static void lru_del(struct pwb__pcache_bdi *pb, struct pwb__page *p)
{
	for (;;) {
		int i = __atomic_load_n(&p->lru_idx, __ATOMIC_SEQ_CST);
		struct pwb__pcache_lru *l;

		if (i < 0)
			return;
		l = &pb->lru[i];
		pthread_mutex_lock(&l->lock);
		if (pwb__aread(&p->lru_idx) == i) {
			if (p->lru_linked) {
				cds_list_del(&p->lru);
				p->lru_linked = false;
				pwb__aset(&l->len, pwb__aread(&l->len) - 1);
			}
			__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&l->lock);
			return;
		}
		pthread_mutex_unlock(&l->lock);	/* moved meanwhile */
	}
}

/* Remove @p (reference count 0 -> dead): unlink it, free it after a grace
 * period, uncharge it. Return false if someone holds a reference. */
static bool page_kill(struct pwb_inode *inode, struct pwb__page *p)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;

	if (ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return false;
	lru_del(pb, p);
	rcu_read_lock();
	cds_lfht_del(inode->pcache->pages, &p->node);
	pwb__rcu_read_unlock();
	PWB__TSAN_RELEASE(p);
	pwb__call_rcu(&p->rcu, page_free_rcu);
	uatomic_dec(&pb->nr_pages);
	return true;
}

/* ---------------------------------------------------------------------- */
/* Reclaim lists (pcache.h)                                               */

/* The context whose list @inode's pages read from the device join. */
static unsigned int inode_owner_ctx(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb;
	unsigned int idx;

	rcu_read_lock();	/* a re-shard frees contexts after a grace */
	wb = PWB__RCU_DEREF(inode->wb);
	idx = wb ? wb->idx : (unsigned int)(inode->ino % PWB_MAX_WB_CTX);
	pwb__rcu_read_unlock();
	return idx;
}

enum visit { V_FREED, V_KEEP, V_DROP };

/* One reclaim batch's state: the inode lock held over the pages of one
 * inode, at most 64 of them. */
struct sweep {
	struct pwb_inode *locked;
	unsigned int held;
};

static void sweep_unlock(struct sweep *sw)
{
	if (sw->locked)
		pthread_mutex_unlock(&sw->locked->lock);
	sw->locked = NULL;
}

/*
 * Visit page @p, taken off its list, in a read-side section (which keeps
 * its inode and index): free it if clean, idle and not referenced since
 * the last visit (V_FREED); V_KEEP to put it back at the tail (in use,
 * referenced, or being written); V_DROP to leave it off (dirty: it joins
 * again when written; or dead).
 */
static enum visit sweep_page(struct sweep *sw, struct pwb__page *p)
{
	struct pwb_inode *inode = p->inode;
	struct cds_lfht *pages = PWB__RCU_DEREF(inode->pcache->pages);
	bool dirty, wb;
	int r = pwb__aread(&p->ref);

	if (r < 0 || !pages)
		return V_DROP;		/* dead, or its inode closing */
	if (r > 0)
		return V_KEEP;
	if (pwb__aread(&p->flags) & PWB__PG_REF) {
		uatomic_and(&p->flags, ~PWB__PG_REF);
		return V_KEEP;
	}
	/* Dead first, then checked: a writer needs a reference to dirty
	 * it, which it cannot take now. */
	if (ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return V_KEEP;
	if (PWB__RCU_DEREF(inode->region)) {
		/* Region slices hold the tags: ask for them. */
		int st;

		sweep_unlock(sw);
		st = pwb__page_state(inode, p->index);
		if (st < 0)	/* closing: its close frees the page */
			st = PWB_PAGE_DIRTY;
		dirty = st & PWB_PAGE_DIRTY;
		wb = st & PWB_PAGE_WRITEBACK;
	} else {
		if (sw->locked != inode || sw->held >= 64) {
			sweep_unlock(sw);
			pthread_mutex_lock(&inode->lock);
			sw->locked = inode;
			sw->held = 0;
		}
		sw->held++;
		dirty = pwb__map_test(&inode->map, PWB__TAG_DIRTY, p->index);
		wb = pwb__map_test(&inode->map, PWB__TAG_WRITEBACK, p->index);
	}
	if (dirty || wb) {
		__atomic_store_n(&p->ref, 0, __ATOMIC_RELEASE);
		return dirty ? V_DROP : V_KEEP;
	}
	/* Off the list an adder may have put it on since it was taken
	 * (a reader filling it, say, before dropping its reference). */
	lru_del(p->pb, p);
	cds_lfht_del(pages, &p->node);
	uatomic_dec(&p->pb->nr_pages);
	return V_FREED;		/* the caller frees it (batch_free_rcu) */
}

#define SWEEP_BATCH 32

/*
 * Free up to @want pages from list @idx, visiting each page on it at most
 * twice (a referenced page gets its second chance). Return pages freed.
 */
static uint64_t lru_reclaim(struct pwb_bdi *bdi, unsigned int idx,
			    uint64_t want)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb__pcache_lru *l = &pb->lru[idx];
	struct pwb__page *batch[SWEEP_BATCH], *dead = NULL;
	uint64_t freed = 0, budget = 2 * pwb__aread(&l->len);
	unsigned int n, i, kept;

	while (freed < want && budget) {
		struct sweep sw = { 0 };

		pthread_mutex_lock(&l->lock);
		for (n = 0; n < SWEEP_BATCH && n < budget &&
			    !cds_list_empty(&l->head);
		     n++) {
			struct pwb__page *p = cds_list_first_entry(
				&l->head, struct pwb__page, lru);

			cds_list_del(&p->lru);
			p->lru_linked = false;
			__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
			batch[n] = p;
		}
		pwb__aset(&l->len, pwb__aread(&l->len) - n);
		/* The read-side section starts before the lock ends: no page
		 * taken off can be freed by a kill before it. */
		rcu_read_lock();
		pthread_mutex_unlock(&l->lock);
		if (!n) {
			pwb__rcu_read_unlock();
			break;
		}
		budget -= n;
		for (i = kept = 0; i < n; i++) {
			enum visit v = freed < want ? sweep_page(&sw, batch[i])
						    : V_KEEP;

			if (v == V_FREED) {
				/* Linked behind the batch's first page. */
				if (!dead)
					CDS_INIT_LIST_HEAD(&batch[i]->lru);
				else
					cds_list_add_tail(&batch[i]->lru,
							  &dead->lru);
				if (!dead)
					dead = batch[i];
				freed++;
			} else if (v == V_KEEP) {
				batch[kept++] = batch[i];
			}
		}
		sweep_unlock(&sw);
		if (dead) {
			/* After the links: the callback acquires it. */
			PWB__TSAN_RELEASE(dead);
			pwb__call_rcu(&dead->rcu, batch_free_rcu);
			dead = NULL;
		}
		/* Back at the tail, unless killed meanwhile (lru_add checks
		 * under the lock; the section still keeps their memory). */
		for (i = 0; i < kept; i++)
			lru_add(pb, batch[i], idx);
		pwb__rcu_read_unlock();
	}
	PWB_PROBE3(reclaim, idx, want, freed);
	return freed;
}

/*
 * Free up to @want clean pages from the reclaim list of context @idx
 * (and from the lists of contexts a re-shard retired, idx + k * nr), or
 * with @idx -1 from every list, starting at a different one each call.
 * Return the pages freed.
 */
static uint64_t reclaim(struct pwb_bdi *bdi, int idx, uint64_t want)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	unsigned int nctx = pwb__bdi_nr_wb_ctx(bdi), i, start;
	uint64_t freed = 0;

	if (!nctx)
		return 0;
	if (idx >= 0) {
		for (i = (unsigned int)idx; i < PWB_MAX_WB_CTX && freed < want;
		     i += nctx)
			if (pwb__aread(&pb->lru[i].len))
				freed += lru_reclaim(bdi, i, want - freed);
		return freed;
	}
	start = (unsigned int)uatomic_add_return(&pb->sweep_start, 1);
	for (i = 0; i < PWB_MAX_WB_CTX && freed < want; i++) {
		unsigned int k = (start + i) % PWB_MAX_WB_CTX;

		if (pwb__aread(&pb->lru[k].len))
			freed += lru_reclaim(bdi, k, want - freed);
	}
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
	if (freed) {
		uatomic_add(&pb->reclaimed[idx], freed);
		pwb__pcache_room(bdi);
	}
	if (pwb__aread(&pb->nr_pages) <= low)
		pwb__aset(&pb->reclaiming, 0);
	else if (freed)	/* the others' inodes hold the rest */
		kick_flushers(bdi, (int)idx);
}



/*
 * Sleep until pages were freed or a write ended since @seq was read (see
 * pwb__pcache_room), or @deadline (cfg.clock; 0: none) passed, at most
 * 10 ms of real time: the clock may be a test's, which does not move by
 * itself, and a sweep can miss what a concurrent CLOCK pass skipped.
 */
static void room_wait(struct pwb_bdi *bdi, uint64_t seq)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct timespec ts;

	uatomic_inc(&pb->room_waiters);	/* a full barrier: see room() */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 10 * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&pb->room_lock);
	while (pwb__aread(&pb->room_seq) == seq &&
	       pthread_cond_timedwait(&pb->room_cond, &pb->room_lock, &ts) !=
		       ETIMEDOUT)
		;
	pthread_mutex_unlock(&pb->room_lock);
	uatomic_dec(&pb->room_waiters);
}

/* Charge one page against cache_bytes: reclaim, or start writeback and
 * wait for it, when the cache is full. 0, or -ETIMEDOUT; without @wait,
 * -ENOBUFS at once. */
static int charge_page(struct pwb_inode *inode, bool wait)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t deadline = 0, timeout;
	bool asked = false;

	timeout = bdi->cfg.throttle_timeout_ms * PWB__NSEC_PER_MSEC;
	for (;;) {
		uint64_t n = pwb__aread(&pb->nr_pages);
		uint64_t freed, seq;

		if (n < pb->limit_pages) {
			if (uatomic_cmpxchg(&pb->nr_pages, n, n + 1) != n)
				continue;
			if (n + 1 > pb->limit_pages - pb->limit_pages / 16)
				kick_reclaim(bdi);
			return 0;
		}
		/* Read before looking: what ends after this wakes us. */
		seq = pwb__aread(&pb->room_seq);
		freed = reclaim(bdi, -1, 32);
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
		/* Everything cached is dirty or in flight: have it written
		 * and wait for a write to end. Background writeback starts
		 * at half the cache (pwb__pcache_inode_init); below that, a
		 * pass over everything, asked again after 10 idle ms. */
		if (!asked) {
			pwb__bdi_writeback(bdi, PWB_WB_ALL, 0);
			asked = true;
		}
		room_wait(bdi, seq);
		/* Nothing happened for 10 ms: ask again. */
		if (pwb__aread(&pb->room_seq) == seq)
			asked = false;
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
		np->inode = inode;
		np->lru_idx = -1;
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
	/* Clean (or, failed, empty): reclaimable. */
	lru_add(inode->bdi->pcache, p, inode_owner_ctx(inode));
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
				pwb__strerror(ret));
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
					pwb__strerror(-errno));
		if (r == 0)
			break;
		done += (size_t)r;
	}
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

	if (page_find(inode, index, true, false, &q))
		return NULL;	/* no room: the run ends here */
	/* After the run's first page, in rising index (base.h). */
	if (pwb__mutex_trylock_nested(&q->lock)) {
		page_put(q);
		return NULL;
	}
	if (pwb__aread(&q->flags) & PWB__PG_UPTODATE) {
		pthread_mutex_unlock(&q->lock);
		page_put(q);
		return NULL;
	}
	return q;
}

/*
 * Fill page @p (locked, not up to date) and, with the same device read,
 * the pages after it up to @last that are not up to date, as long as the
 * device holds them right after @p's block. Pages another thread holds
 * end the run; so do holes, the end of the file and the cache's limit.
 * 0 or -errno about @p, as page_fill_locked(); the run's other pages are
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

	if (size == 0 || last <= first ||
	    first >= (size - 1) >> bdi->page_shift)
		return page_fill_locked(inode, p, size);
	if (last > (size - 1) >> bdi->page_shift)
		last = (size - 1) >> bdi->page_shift;
	if (last - first >= FILL_RUN_MAX)
		last = first + FILL_RUN_MAX - 1;
	/* A hole or a bad mapping: the one-page path says what it is. */
	if (pcache_dev_lookup(inode, first, &dev0) || (dev0 & (bdi->lbs - 1)))
		return page_fill_locked(inode, p, size);
	run[0] = p;
	while (first + n <= last) {
		struct pwb__page *q;

		if (pcache_dev_lookup(inode, first + n, &dev) ||
		    dev != dev0 + (uint64_t)n * ps)
			break;
		q = run_page(inode, first + n);
		if (!q)
			break;
		run[n++] = q;
	}
	if (n > 1 && dev0 <= bdi->capacity &&
	    bdi->capacity - dev0 >= (uint64_t)n * ps) {
		for (i = 0; i < n; i++)
			iov[i] = (struct iovec){ run[i]->data, ps };
		do
			r = preadv(bdi->fd, iov, (int)n, (off_t)dev0);
		while (r < 0 && errno == EINTR);
	} else {
		r = -1;
	}
	if (r != (ssize_t)n * ps) {
		/* An error, a short read or past the device: each page on
		 * its own, the first one now, which reports what failed. */
		for (i = 1; i < n; i++) {
			pthread_mutex_unlock(&run[i]->lock);
			lru_add(bdi->pcache, run[i], inode_owner_ctx(inode));
			page_put(run[i]);
		}
		return page_fill_locked(inode, p, size);
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
			pthread_mutex_unlock(&run[i]->lock);
		lru_add(bdi->pcache, run[i], inode_owner_ctx(inode));
		if (i)
			page_put(run[i]);
	}
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
			int idx = pwb__flusher_ctx_idx();

			pthread_mutex_unlock(&p->lock);
			*data = p->data;	/* tagged WRITEBACK: kept */
			/* Clean once written: reclaimable by this context. */
			lru_add(inode->bdi->pcache, p,
				idx >= 0 ? (unsigned int)idx
					 : inode_owner_ctx(inode));
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
	int ret;

	if (!inode)
		return pwb__err(-EINVAL, "%s: NULL inode", who);
	ret = pwb__no_flusher(who);
	if (ret)
		return ret;
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
	bool reserved = false, whole = false;
	int ret;

	*dirtied = false;
	ret = page_find(inode, index, true, true, &p);
	if (ret)
		return ret;
	pthread_mutex_lock(&p->lock);
	/* Filled before its space is reserved: a page without a block gets
	 * none until it is reserved, so the fill reads zeros for it, and a
	 * block allocated meanwhile reads as zeros until written (space.c,
	 * unwritten extents). */
	if (!(pwb__aread(&p->flags) & PWB__PG_UPTODATE)) {
		if (n == ps) {
			/* Up to date once copied: a write that stops before
			 * leaves the buffer's old bytes unreadable. */
			whole = true;
		} else {
			ret = page_fill_locked(inode, p,
					       pwb__aread(&inode->pcache->size));
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
	ret = pwb__wait_writeback(inode, start, ps);
	if (!ret)
		ret = pcache_unzero(inode, index);
	if (ret) {
		uatomic_and(&p->flags, ~PWB__PG_WLATCH);
		goto out;
	}
	if (src)
		memcpy((char *)p->data + pgoff, src, n);
	else
		memset((char *)p->data + pgoff, 0, n);
	if (whole)
		uatomic_or(&p->flags, PWB__PG_UPTODATE);
	uatomic_and(&p->flags, ~PWB__PG_WLATCH);
	uatomic_or(&p->flags, PWB__PG_REF);
	pthread_mutex_unlock(&p->lock);
	if (grow)
		size_raise(inode->pcache, start + pgoff + n);
	/* Dirtied while we hold the reference: reclaim cannot drop the
	 * page in between (it needs the count at 0). */
	ret = pwb__mark_dirty(inode, start, ps);
	*dirtied = !ret || ret == -ETIMEDOUT || ret == -ESHUTDOWN;
	if (!*dirtied && reserved &&
	    !(pwb__page_state(inode, index) & PWB_PAGE_DIRTY))
		pcache_unreserve(inode, index);
	page_put(p);
	return ret;
out:
	/* Not dirtied: give back the reservation this call took, so no
	 * block is given to a page without data (and reserved_bytes does
	 * not stay up until the close). */
	if (reserved)
		pcache_unreserve(inode, index);
	pthread_mutex_unlock(&p->lock);
	/* Not dirtied: reclaimable, even if never filled. */
	lru_add(inode->bdi->pcache, p, inode_owner_ctx(inode));
	page_put(p);
	return ret;
}

/*
 * The lookup shared by the hit paths below: the cached page holding
 * [off, off + len) if that range lies in one page, with a reference and
 * its lock taken (trylock: a busy page sends the caller to its slow
 * path); *@pgoff is the range's offset in it. NULL: not cached, dying,
 * locked, spanning pages, or the inode is closing.
 */
static struct pwb__page *fast_lock_page(struct pwb_inode *inode, size_t len,
					uint64_t off, unsigned int *pgoff)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht_iter iter;
	struct cds_lfht *pages;
	struct pwb__page *p;
	unsigned int shift;
	uint64_t index;

	if (!pc)
		return NULL;
	shift = inode->bdi->page_shift;
	*pgoff = (unsigned int)(off & ((1u << shift) - 1));
	if (len > (1u << shift) - *pgoff)
		return NULL;
	index = off >> shift;
	rcu_read_lock();
	pages = PWB__RCU_DEREF(pc->pages);
	if (caa_unlikely(!pages)) {
		pwb__rcu_read_unlock();
		return NULL;
	}
	cds_lfht_lookup(pages, index_hash(index), index_match, &index, &iter);
	p = page_of(cds_lfht_iter_get_node(&iter));
	if (!p || !page_get(p)) {
		pwb__rcu_read_unlock();
		return NULL;
	}
	pwb__rcu_read_unlock();
	if (pthread_mutex_trylock(&p->lock)) {
		page_put(p);
		return NULL;
	}
	return p;
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
	struct pwb__page *p;
	unsigned int pgoff;
	uint64_t index;
	bool ok;

	/* A flusher (an ops callback) takes the slow path's -EDEADLK, as
	 * for a page not cached. */
	if (!buf || PWB__RCU_DEREF(inode->region) || pwb__in_flusher())
		return -EAGAIN;
	p = fast_lock_page(inode, len, off, &pgoff);
	if (!p)
		return -EAGAIN;
	index = p->index;
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
	size_raise(inode->pcache, off + len);
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
	/* The whole range asked for, before it is cut to SSIZE_MAX. */
	if (len && off > UINT64_MAX - len)
		return pwb__err(-EFBIG, "pwb_write: range %llu+%zu wraps past "
					"2^64",
				(unsigned long long)off, len);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
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
	struct pwb__page *p;
	unsigned int pgoff;
	uint64_t size;

	if (!pc || !buf || pwb__in_flusher())
		return -EAGAIN;	/* the slow path says why */
	size = pwb__aread(&pc->size);
	if (off >= size)
		return -EAGAIN;	/* end of file: the slow path says 0 */
	if (len > size - off)
		len = (size_t)(size - off);
	p = fast_lock_page(inode, len, off, &pgoff);
	if (!p)
		return -EAGAIN;
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
			ret = page_fill_run_locked(inode, p,
						   pwb__aread(&pc->size),
						   (off + len - 1) >> shift);
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
	return pwb__inode_discard(inode, size, UINT64_MAX);
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
	pwb__pcache_room(inode->bdi);
}

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
	ret = write_page(inode, index, pgoff, ps - pgoff, NULL, false,
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
		drop_range(inode, first, last);
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
	if (s > off) {
		ret = pcache_zero_range(inode, (off + ps - 1) / ps,
					(s - 1) / ps);
		if (ret)
			return ret;
	}
	while (s > off) {
		uint64_t old = uatomic_cmpxchg(&pc->size, s, off);

		if (old == s)
			break;
		s = old;
	}
	return 0;
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
	st->read_ios = pwb__aread(&pb->read_ios);
	st->read_pages = pwb__aread(&pb->read_pages);
}

/* ---------------------------------------------------------------------- */
/* Set-up and tear-down                                                   */

/* How the engine reaches the pages of this cache (page-owner.h). */
static const struct pwb__page_owner_ops pcache_owner_ops = {
	.inode_init = pwb__pcache_inode_init,
	.get_page = pwb__pcache_get_page,
	.inode_close = pwb__pcache_inode_close,
	.inode_free = pwb__pcache_inode_free,
	.size = pwb__pcache_size,
	.size_load = pwb__pcache_size_load,
	.discarded = pwb__pcache_discarded,
	.writes_ended = pwb__pcache_room,
	.reclaim = pwb__pcache_reclaim_ctx,
	.stats = pwb__pcache_stats,
};

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
	pwb__mutex_init(&pb->room_lock, PWB__LOCK_PAGE_ROOM);
	for (unsigned int i = 0; i < PWB_MAX_WB_CTX; i++) {
		pwb__mutex_init(&pb->lru[i].lock, PWB__LOCK_PAGE_LRU);
		CDS_INIT_LIST_HEAD(&pb->lru[i].head);
	}
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&pb->room_cond, &attr);
		pthread_condattr_destroy(&attr);
	}
	bdi->pcache = pb;
	bdi->page_owner = &pcache_owner_ops;
	return 0;
}

/*
 * Closed inodes' page indexes, waiting to be destroyed. A read_fast() may
 * still be walking an index when its inode closes, so the index outlives
 * a grace period; liburcu forbids cds_lfht_destroy() in an RCU callback,
 * so the inode's callback queues it here and the next close (or the
 * bdi's end) destroys it. A close used to wait for a grace period
 * itself: 5.4 ms of every pwb-objd PUT (bench/objd-bench).
 *
 * A stack with only pushes and whole-stack pops needs no lock and has no
 * ABA problem. Not liburcu's cds_lfs stack: its push forms the address
 * of a member of a NULL head, which UBSan reports (CI's sanitizer run).
 */
static struct pwb__pcache_inode *dead_indexes;	/* atomic: stack top */

static void dead_index_push(struct pwb__pcache_inode *pc)
{
	struct pwb__pcache_inode *top = __atomic_load_n(&dead_indexes,
							 __ATOMIC_RELAXED);

	do
		pc->dead_next = top;
	while (!__atomic_compare_exchange_n(&dead_indexes, &top, pc, 1,
					    __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/* Destroy the queued indexes. Any thread outside a read-side section. */
static void reap_dead_indexes(void)
{
	struct pwb__pcache_inode *pc, *next;

	if (!__atomic_load_n(&dead_indexes, __ATOMIC_RELAXED))
		return;
	pc = __atomic_exchange_n(&dead_indexes, NULL, __ATOMIC_ACQUIRE);
	for (; pc; pc = next) {
		next = pc->dead_next;
		cds_lfht_destroy(pc->dead_pages, NULL);
		free(pc);
	}
}

/* After the last page was freed (close runs rcu_barrier() first). */
void pwb__pcache_bdi_fini(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;

	/* Every inode's callback has run: its index is queued. */
	reap_dead_indexes();
	if (!pb)
		return;
	/* The lock only for TSan, which does not see rcu_barrier(). */
	pthread_mutex_lock(&pb->pool_lock);
	while (pb->nr_chunks)
		chunk_release(pb->chunks[--pb->nr_chunks], pb->chunk_bytes);
	free(pb->chunks);
	pb->pool = NULL;
	pthread_mutex_unlock(&pb->pool_lock);
	pthread_mutex_destroy(&pb->pool_lock);
	pthread_mutex_destroy(&pb->room_lock);
	for (unsigned int i = 0; i < PWB_MAX_WB_CTX; i++)
		pthread_mutex_destroy(&pb->lru[i].lock);
	pthread_cond_destroy(&pb->room_cond);
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
	pwb__extmap_init(&pc->zeroed, false);
	pc->pages = cds_lfht_new(512, 512, 0, CDS_LFHT_AUTO_RESIZE, NULL);
	if (!pc->pages) {
		free(pc);
		return pwb__err(-ENOMEM, "pwb_inode_open: out of memory");
	}
	inode->pcache = pc;
	/*
	 * The kernel starts background writeback at a share of the memory
	 * that can hold dirty pages; here that memory is the cache. With
	 * dirty_background_bytes above half of it, writers would fill the
	 * cache with dirty pages before any writeback began and then wait
	 * for all of it: lower the threshold to half the cache (once; it
	 * only goes down, and 0, no background writeback, stays).
	 */
	for (;;) {
		uint64_t bg = pwb__aread(&inode->bdi->bg_thresh_pages);
		uint64_t half = PWB__MAX(inode->bdi->pcache->limit_pages / 2, 1u);

		if (!bg || bg <= half ||
		    uatomic_cmpxchg(&inode->bdi->bg_thresh_pages, bg, half) == bg)
			break;
	}
	return 0;
}

void pwb__pcache_inode_close(struct pwb_inode *inode)
{
	struct pwb__pcache_inode *pc = inode->pcache;

	reap_dead_indexes();
	if (!pc || !pc->pages)
		return;
	drop_range(inode, 0, UINT64_MAX);
	pthread_mutex_lock(&inode->lock);
	pwb__extmap_destroy(&pc->zeroed);
	pthread_mutex_unlock(&inode->lock);
	/* read_fast() may still be looking in the index: it goes with the
	 * inode's grace period. */
	pc->dead_pages = pc->pages;
	PWB__RCU_ASSIGN(pc->pages, NULL);
}

/* After a grace period (the inode's RCU callback, or an open that failed
 * before the inode was published). */
void pwb__pcache_inode_free(struct pwb_inode *inode)
{
	struct pwb__pcache_inode *pc = inode->pcache;

	inode->pcache = NULL;
	if (pc && pc->dead_pages) {
		dead_index_push(pc);
		return;
	}
	free(pc);
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
