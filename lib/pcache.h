/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pcache.h - library-owned pages: the page cache behind pwb_write() and
 * pwb_read() (issue 12)
 *
 * An inode opened with get_page == NULL has its pages owned by libpwb. Its
 * struct pwb__pcache_inode indexes them by page number in a cds_lfht (RCU:
 * lookups take no lock). An entry is a page or a folio, a naturally
 * aligned run of pages kept as one (pcache-folio.c); what is said of a
 * page below holds for a folio as a whole. A page lives while its reference count is >= 0;
 * removal (truncate, reclaim, close) moves the count from 0 to
 * PWB__PAGE_DEAD with one compare-and-swap, so a lookup that finds a dead
 * page never uses it, unlinks it and frees it: its buffer once no write
 * of it is in flight (a truncate waits for that write), its descriptor
 * after a grace period.
 *
 * Page data: page->lock is held while the data changes (pwb_write) or is
 * filled from the device, and by pwb_read's slow path while it copies;
 * pwb_read's hit path copies without it, checked by the page's sequence
 * count (below). Stable pages: a writer sets
 * PWB__PG_WLATCH, then waits until no write of the page is in flight, then
 * copies; the internal get_page answers -EAGAIN ("not now") for a latched
 * page. The flusher tags a page WRITEBACK (under inode->lock) before it
 * calls get_page, and both sides fence between their store and their
 * load, so either the writer waits for that write or the flusher leaves
 * the page for a later pass: a page is never changed while it is written.
 *
 * The cache is in pieces, each calling only the ones after it:
 * pcache-owner.c (set-up, statistics and the page-owner ops),
 * pcache-write.c, pcache-read.c, readahead.c, pcache-lookup.c (the
 * index: lookup and insert, get_page, dropping pages), pcache-folio.c
 * (folios: made, split, their state), pcache-wait.c
 * (waiting for a page under read), pcache-reclaim.c and pcache-pool.c
 * (page buffers). This header is theirs alone; the engine reaches the
 * cache through page-owner.h.
 */
#ifndef PWB_PCACHE_H
#define PWB_PCACHE_H

#include "pwb-internal.h"
#include "page-owner.h"
#include "readahead.h"
#include "space.h"

#define PWB__PAGE_DEAD (-(1 << 30))

/* The flags pwb_write2() and pwb_read2() know. */
#define PWB__RW_FLAGS (PWB_RW_NOWAIT | PWB_RW_DONTCACHE | PWB_RW_SYNC)

#define PWB__PG_UPTODATE 0x1u	/* data valid (page->lock) */
#define PWB__PG_WLATCH 0x2u	/* a writer changes the data (uatomic) */
#define PWB__PG_REF 0x4u	/* referenced since the last CLOCK sweep */
#define PWB__PG_READING 0x8u	/* a device read fills the data; it holds a
				 * reference (uatomic; readahead.h) */
#define PWB__PG_READAHEAD 0x10u	/* the readahead marker: the reader that
				 * reaches it starts the next window
				 * (uatomic; readahead.c) */
#define PWB__PG_FRESH 0x20u	/* read from the device, not yet copied
				 * out (uatomic; readahead.c) */
#define PWB__PG_DROP 0x40u	/* a PWB_RW_DONTCACHE write dirtied it: freed
				 * once a write of it ends clean (uatomic) */

/*
 * The page lock: one 32-bit word (0 free, 1 held, 2 held and maybe
 * waited for, sleeping on a futex), not a 40-byte pthread mutex, since
 * there is one in every cached page. Under --enable-lockdep it is a ranked
 * mutex (PWB__LOCK_PAGE) so that lockdep still checks its order.
 * pwb__page_trylock() answers as pthread_mutex_trylock() does: 0 when
 * taken.
 */
#ifdef PWB_LOCKDEP
typedef pthread_mutex_t pwb__page_lock_t;
#define pwb__page_lock_init(p) pwb__mutex_init(&(p)->lock, PWB__LOCK_PAGE)
#define pwb__page_lock_destroy(p) pthread_mutex_destroy(&(p)->lock)
#define pwb__page_assert_locked(p) pwb__lockdep_assert_held(&(p)->lock)
#else
typedef uint32_t pwb__page_lock_t;
/* pcache-wait.c: the contended halves. */
void pwb__page_lock_wait(uint32_t *l) PWB__INTERNAL;
void pwb__page_unlock_wake(uint32_t *l) PWB__INTERNAL;
#define pwb__page_lock_init(p) ((void)((p)->lock = 0))
#define pwb__page_lock_destroy(p) ((void)(p))
#define pwb__page_assert_locked(p) ((void)(p))
#endif

struct pwb__page {
	struct cds_lfht_node node;	/* pcache->pages: RCU */
	struct pwb_inode *inode;	/* read-only: the owner */
	uint64_t index;			/* read-only */
	struct cds_list_head lru;	/* lru[lru_idx].lock */
	void *data;			/* read-only pointer, page_size bytes
					 * aligned to the logical block size */
	struct pwb__rd_ring *rd_ring;	/* atomic: the ring of the read in
					 * flight, NULL: none, or read on
					 * its submitter's thread */
	int ref;			/* uatomic; PWB__PAGE_DEAD: removed */
	unsigned int flags;		/* uatomic: PWB__PG_* */
	int lru_idx;			/* uatomic: the reclaim list the
					 * page is on or about to join, -1:
					 * none (pcache-reclaim.c) */
	bool lru_linked;		/* lru[lru_idx].lock: on it */
	/* read-only: a folio of 1 << order pages from index (naturally
	 * aligned), data one buffer of them all (pcache-folio.c); 0: one
	 * page */
	uint8_t order;
	/* The data's sequence count (see "The page's sequence count"
	 * below): odd while the page lock is held. Written only by the
	 * lock's holder (stores with release ordering), read by anyone
	 * (loads with acquire ordering). */
	unsigned int seq;
#ifndef PWB_LOCKDEP
	pwb__page_lock_t lock;		/* the data, PWB__PG_UPTODATE */
#endif
	struct rcu_head rcu;
#ifdef PWB_LOCKDEP
	pwb__page_lock_t lock;		/* the data, PWB__PG_UPTODATE */
#endif
};

/*
 * The page's sequence count: every holder of the page lock makes p->seq
 * odd as it takes the lock and even again as it lets it go, so the data
 * of a page (and PWB__PG_UPTODATE, which changes only under the lock or,
 * for a read in flight, on a page nobody copies yet) is stable between
 * two reads of an even count that agree. pwb_read()'s hit path copies
 * under that check instead of taking the lock (pcache-read.c), so a hit
 * writes neither the lock word nor the count: readers of one page on
 * several threads do not bounce its line between them for the lock. It
 * still holds a reference, which keeps the buffer from being freed and
 * given to another page while it copies (removal needs a count of 0).
 *
 * Ordering, as a seqlock's: the holder's store of the odd count comes
 * before a release fence, then the data's stores; the even count is a
 * release store after them. The reader loads the count with acquire,
 * copies, issues an acquire fence, and loads the count again: if its
 * copy saw any store of a holder's section, the second load sees that
 * section's odd count or a later one. The copy itself is a racy read
 * that the second load voids, as in the kernel's seqcounts; under TSan
 * the hit path takes the lock instead (pcache-read.c).
 */
static inline void pwb__page_seq_lock_taken(struct pwb__page *p)
{
	/* Only the lock's holder writes the count: a relaxed load of it is
	 * its last value. */
	__atomic_store_n(&p->seq, pwb__aread(&p->seq) + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static inline void pwb__page_seq_lock_dropping(struct pwb__page *p)
{
	__atomic_store_n(&p->seq, pwb__aread(&p->seq) + 1, __ATOMIC_RELEASE);
}

/* The count a lockless copy starts from: odd (lock held) means no copy
 * now. Any thread holding a reference on @p. */
static inline unsigned int pwb__page_seq_begin(const struct pwb__page *p)
{
	return __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
}

/* Whether nothing held the lock of @p since pwb__page_seq_begin() gave
 * @seq (even): true, what was copied since is the data of one moment. */
static inline bool pwb__page_seq_valid(const struct pwb__page *p,
				       unsigned int seq)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&p->seq, __ATOMIC_RELAXED) == seq;
}

#ifdef PWB_LOCKDEP
/* Macros, so that lockdep's reports name the caller's line. */
#define pwb__page_lock(p)                                                      \
	do {                                                                   \
		struct pwb__page *pl_ = (p);                                   \
		pthread_mutex_lock(&pl_->lock);                                \
		pwb__page_seq_lock_taken(pl_);                                 \
	} while (0)
#define pwb__page_trylock(p)                                                   \
	({                                                                     \
		struct pwb__page *pl_ = (p);                                   \
		int rl_ = pthread_mutex_trylock(&pl_->lock);                   \
		if (!rl_)                                                      \
			pwb__page_seq_lock_taken(pl_);                         \
		rl_;                                                           \
	})
/* A second page lock while one is held, in rising index (base.h). */
#define pwb__page_trylock_nested(p)                                            \
	({                                                                     \
		struct pwb__page *pl_ = (p);                                   \
		int rl_ = pwb__mutex_trylock_nested(&pl_->lock);               \
		if (!rl_)                                                      \
			pwb__page_seq_lock_taken(pl_);                         \
		rl_;                                                           \
	})
#define pwb__page_unlock(p)                                                    \
	do {                                                                   \
		struct pwb__page *pl_ = (p);                                   \
		pwb__page_seq_lock_dropping(pl_);                              \
		pthread_mutex_unlock(&pl_->lock);                              \
	} while (0)
#else
/* Acquire the page lock; the word is 0, 1 or 2 as said above. */
static inline void pwb__page_lock(struct pwb__page *p)
{
	uint32_t c = 0;

	if (!__atomic_compare_exchange_n(&p->lock, &c, 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		pwb__page_lock_wait(&p->lock);
	PWB__TSAN_ACQUIRE(&p->lock);
	pwb__page_seq_lock_taken(p);
}

static inline int pwb__page_trylock(struct pwb__page *p)
{
	uint32_t c = 0;

	if (!__atomic_compare_exchange_n(&p->lock, &c, 1, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return EBUSY;
	PWB__TSAN_ACQUIRE(&p->lock);
	pwb__page_seq_lock_taken(p);
	return 0;
}

#define pwb__page_trylock_nested(p) pwb__page_trylock(p)

static inline void pwb__page_unlock(struct pwb__page *p)
{
	pwb__page_seq_lock_dropping(p);
	PWB__TSAN_RELEASE(&p->lock);
	if (__atomic_exchange_n(&p->lock, 0, __ATOMIC_RELEASE) == 2)
		pwb__page_unlock_wake(&p->lock);
}
#endif

struct pwb__pcache_inode {
	struct cds_lfht *pages;		/* index -> page: RCU */
	uint64_t size;			/* uatomic: bytes (file size) */
	/* With an application's map_page: the pages a truncate cut off and
	 * nothing wrote since, which read as zeros (not the device's old
	 * bytes) if the file grows over them, until the close. Allocator
	 * mode frees their blocks instead. inode->lock. */
	struct pwb__extmap zeroed;
	/* After the close: the emptied index, destroyed once no reader can
	 * be in it (see pwb__pcache_inode_free), and the node that queues
	 * it for that. Owned by the closing thread, then by the queue. */
	struct cds_lfht *dead_pages;
	struct pwb__pcache_inode *dead_next;
	struct pwb__ra_inode ra;	/* readahead streams (readahead.c) */
	/* uatomic: set once a PWB_RW_DONTCACHE write dirtied a page here,
	 * so the end of a write looks for PWB__PG_DROP pages only then. */
	int dontcache;
	/* uatomic, only grows (until the close): bit k set once a folio of
	 * order k >= 1 was put in the index, so a lookup probes only the
	 * orders there may be (pwb__pcache_lookup_rcu). Set under
	 * inode->lock, before the folio is added. */
	unsigned int orders;
	/* uatomic: single pages in the index (dead ones until their
	 * removal), so a folio's insert skips probing for them when there
	 * are none. */
	uint64_t nr_small;
};

/*
 * One context's reclaim list: the pages that may be clean, oldest first.
 * A page joins the list of the context that writes it (in get_page, so
 * it is there when its write ends) or, read from the device, of its
 * inode's context. Reclaim takes pages from the head: a clean idle page
 * not referenced since its last visit is freed; a referenced or
 * in-flight one goes to the tail (CLOCK's second chance); a dirty one
 * leaves the list until its next write. So a pass never walks the dirty
 * pages over and over, and each context frees its own pages.
 */
struct pwb__pcache_lru {
	pthread_mutex_t lock;
	struct cds_list_head head;	/* lock */
	uint64_t len;			/* uatomic, changed under lock */
	uint64_t sweeping;		/* uatomic: entries a sweep took off
					 * and has not put back or freed */
} __attribute__((aligned(64)));

/*
 * Writers waiting for room in a cache: a count of the events (pages
 * freed, writes ended) they sleep until the next of.
 */
struct pwb__pcache_room {
	uint64_t seq;			/* uatomic: bumped at each event */
	unsigned int waiters;		/* uatomic */
	pthread_mutex_t lock;		/* cond */
	pthread_cond_t cond;		/* CLOCK_MONOTONIC */
};

/*
 * Folios: orders 1 .. PWB__FOLIO_ORDERS - 1, at most the bytes of a chunk
 * (2 MiB) and the bdi's max_io_bytes (pcache-folio.c).
 */
#define PWB__FOLIO_ORDERS 10

/*
 * Page buffers come from chunks of chunk_bytes mapped and faulted in at
 * once (an aligned malloc and a page fault per page were most of the
 * cost of a cold write); free buffers wait in the pool for reuse and the
 * chunks are given back when the pool ends. A chunk enters the free
 * lists as one folio buffer, halved as pages and smaller folios need;
 * folio buffers come from a new chunk only when the free pages are fewer
 * than the folio's. Buffers in use never exceed the cache's limit, and a
 * removed page's buffer comes back to the pool before its room (its
 * descriptor waits for a grace period, the buffer does not: pcache-pool.c,
 * page_free_dead() in pcache-lookup.c), so a chunk is mapped only when
 * the buffers are all in use: the memory held is at most cache_bytes
 * plus about a chunk per thread allocating at once (check_pcache_mem).
 */
struct pwb__page_pool {
	pthread_mutex_t lock;
	void *free;			/* lock: a stack linked through each
					 * buffer's first word */
	uint64_t len;			/* lock */
	/* lock: free folio buffers, a stack per order (index 0 unused),
	 * linked likewise; each is 1 << order contiguous page buffers of
	 * one chunk (pcache-folio.c) */
	void *ffree[PWB__FOLIO_ORDERS];
	void **chunks;			/* lock: the mapped chunks */
	size_t nr_chunks, cap_chunks;	/* lock */
	size_t chunk_bytes;		/* read-only */
};

/* Page sizes are powers of two up to 1 MiB: a pool per shift. */
#define PWB__PAGE_POOLS 21

struct pwb__pcache_bdi {
	struct pwb__pcache_lru lru[PWB_MAX_WB_CTX];
	uint64_t limit_pages;		/* read-only: cache_bytes in pages */
	uint64_t nr_pages;		/* uatomic: pages allocated */
	uint64_t reclaimed[PWB_MAX_WB_CTX];	/* uatomic: per context */
	uint64_t reclaim_passes[PWB_MAX_WB_CTX];	/* uatomic */
	uint64_t reclaim_ns[PWB_MAX_WB_CTX];	/* uatomic: time reclaiming */
	uint64_t direct_reclaims;	/* uatomic: pages freed by writers */
	uint64_t folio_splits;		/* uatomic: folios split in pages */
	uint64_t read_ios;		/* uatomic: device reads that filled
					 * pages (pwb_stats.read_ios) */
	uint64_t read_pages;		/* uatomic: pages they filled */
	int reclaiming;			/* uatomic: above the high watermark,
					 * not yet down to the low one */
	uint64_t sweep_start;		/* uatomic: rotates the list a
					 * writer's direct reclaim starts at */
	/* Writers waiting for room (charge_page): woken when pages are
	 * freed or a write of a page ends, instead of polling. The bdi's
	 * own, or in a domain with a cache budget the domain's, which every
	 * member wakes (read-only pointer). */
	struct pwb__pcache_room own_room, *room;
	/* Page buffers: the bdi's own pool, or in a domain with a cache
	 * budget the domain's pool of this page size (read-only pointer). */
	struct pwb__page_pool own_pool, *pool;
	/* The background reclaimer (pcache-reclaim.c): a thread started
	 * the first time the free room falls below the low watermark (of
	 * the cache, or in a domain of the cache or of the budget), which
	 * frees clean pages up to the high one, ahead of the writers. */
	pthread_mutex_t kswapd_lock;	/* kswapd_cond, kswapd_kick,
					 * kswapd_stop */
	pthread_cond_t kswapd_cond;
	pthread_t kswapd;		/* valid once kswapd_state is 2 */
	int kswapd_state;		/* uatomic: 0 none, 1 starting,
					 * 2 running, -1 none possible */
	int kswapd_kick;		/* set under kswapd_lock (uatomic:
					 * read without it as a hint) */
	bool kswapd_stop;		/* kswapd_lock */
	int kswapd_busy;		/* uatomic: reclaiming now */
	uint64_t kswapd_idle_seq;	/* uatomic: room->seq + 1 when a
					 * round found nothing to free */
	uint64_t kswapd_reclaims;	/* uatomic: pages it freed */
	struct pwb__ra_bdi ra;		/* reads and readahead (readahead.c) */
	/* In a domain with a cache budget (pcache-domain.c), else NULL:
	 * every page charged to nr_pages is also charged, in bytes, to
	 * the domain's budget. Read-only. */
	struct pwb__pcache_dom *dom;
	unsigned int page_shift;	/* read-only: the bdi's */
};

/*
 * A domain's page-cache budget (struct pwb_domain_config.cache_bytes),
 * shared by its members' caches (pcache-domain.c). Created when the first
 * member with a page cache opens, freed when the last one closes
 * (pwb_domain.pcache, under dom->lock).
 */
struct pwb__pcache_dom {
	struct pwb_domain *domain;	/* read-only */
	uint64_t limit;			/* read-only: cache_bytes */
	uint64_t used;			/* uatomic: bytes charged by members */
	int reclaiming;			/* uatomic: above the high watermark,
					 * not yet down to the low one */
	unsigned int users;		/* dom->lock: member caches */
	struct pwb__pcache_room room;	/* every member's waiters */
	/* Free buffers for the members, one pool per page size (by its
	 * shift), so memory freed by one member serves the others. */
	struct pwb__page_pool pools[PWB__PAGE_POOLS];
};

/* Bytes mapped at once for page buffers (at least one page): one
 * transparent huge page. */
#define PWB__PCACHE_CHUNK_BYTES (2u << 20)

/*
 * Pages may have become reclaimable (a write ended) or were freed: wake
 * the writers waiting for room in @bdi's cache. One atomic increment when
 * nobody waits. Any thread, no lock held but inode->lock or less (a leaf).
 */
static inline void pwb__pcache_room(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb__pcache_room *r;

	if (!pb)
		return;
	r = pb->room;
	uatomic_inc(&r->seq);		/* a full barrier: pairs with the
					 * waiter's increment of waiters */
	if (pwb__aread(&r->waiters)) {
		pthread_mutex_lock(&r->lock);
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	}
}

/* @n pages of @pb's cache were freed: uncharge them, from the domain's
 * budget too. */
static inline void pwb__pcache_uncharge(struct pwb__pcache_bdi *pb,
					uint64_t n)
{
	uatomic_sub(&pb->nr_pages, n);
	if (caa_unlikely(pb->dom))
		uatomic_sub(&pb->dom->used, n << pb->page_shift);
}

/*
 * pwb_read() copied from @p: referenced (CLOCK's second chance), unless
 * this is the first copy since the device read. The read marked the page
 * referenced (readahead.c), which protects pages read ahead and not yet
 * copied from reclaim; the first copy takes that mark off again (use
 * once): a page its sequential reader is done with is the first reclaim
 * takes, before the pages read ahead of that reader. A second copy marks
 * it, as for any page read again.
 */
static inline void pwb__page_read_touch(struct pwb__page *p)
{
	unsigned int fl = pwb__aread(&p->flags);

	if (caa_likely((fl & (PWB__PG_REF | PWB__PG_FRESH)) == PWB__PG_REF))
		return;
	if (fl & PWB__PG_FRESH)
		uatomic_and(&p->flags, ~(PWB__PG_FRESH | PWB__PG_REF));
	else
		uatomic_or(&p->flags, PWB__PG_REF);
}

/* ---------------------------------------------------------------------- */
/* pcache-lookup.c: the index                                             */

/* The device offset of page @index, to read it: 0, -ENODATA (reads as
 * zeros: a hole, or cut off by a truncate), or the error of map_page. */
int pwb__pcache_dev_lookup(struct pwb_inode *inode, uint64_t index,
			   uint64_t *dev_off) PWB__INTERNAL;

/* @p's flags, read with acquire: a reader that sees PWB__PG_READING clear
 * sees the data the read filled in. */
static inline unsigned int pwb__page_flags(const struct pwb__page *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
}

/*
 * Where page @index goes in its inode's index. The table's bucket is the
 * hash's low bits. Within each aligned block of 4096 pages the hash is
 * the index plus an offset mixed from the block number: the pages of an
 * aligned block fall into distinct buckets (of a table of up to 4096),
 * and those of any run of up to 4096 (what a reader streams through, and
 * what the cache holds of it) at most two a bucket, so a look-up walks
 * to its page and hardly farther. A hash mixing every index put several
 * on a chain, and the walk's cache misses were a fifth of a sequential
 * reader's CPU. The offset spreads the pages of different blocks, so
 * strides of a power of two do not share one chain.
 */
static inline unsigned long pwb__page_hash(uint64_t index)
{
	uint64_t blk = (index >> 12) * 0x9e3779b97f4a7c15ull;

	return (unsigned long)(index + (blk ^ (blk >> 29)));
}

/* Whether the page of @node is page *@key (cds_lfht_lookup's match): a
 * page's or folio's first index. During a split a folio and its first
 * page share it (see pwb__pcache_lookup_rcu()). */
static inline int pwb__page_match(struct cds_lfht_node *node, const void *key)
{
	const struct pwb__page *p =
		caa_container_of(node, struct pwb__page, node);

	/* A page another thread just added: pairs with the release before
	 * cds_lfht_add_unique(), as in pwb__page_of(). */
	PWB__TSAN_ACQUIRE(node);
	return p->index == *(const uint64_t *)key;
}

/* The page of a table node; NULL for NULL (no arithmetic on NULL). */
static inline struct pwb__page *pwb__page_of(struct cds_lfht_node *node)
{
	if (!node)
		return NULL;
	/* Pairs with the release before cds_lfht_add_unique(): liburcu's
	 * own barriers are invisible to TSan. */
	PWB__TSAN_ACQUIRE(node);
	return caa_container_of(node, struct pwb__page, node);
}

/* pcache-folio.c: pwb__pcache_lookup_rcu() of an inode with folios. */
struct pwb__page *pwb__pcache_lookup_folios_rcu(struct cds_lfht *pages,
						unsigned int orders,
						uint64_t index) PWB__INTERNAL;

/*
 * The page or folio of @pages holding page @index, dead or alive, or NULL.
 * @orders: the inode's pc->orders, read by the caller; 0 (no folio was
 * ever made) costs one branch over a single probe. Caller in a read-side
 * section.
 */
static inline struct pwb__page *
pwb__pcache_lookup_rcu(struct cds_lfht *pages, unsigned int orders,
		       uint64_t index)
{
	struct cds_lfht_iter iter;

	if (caa_unlikely(orders))
		return pwb__pcache_lookup_folios_rcu(pages, orders, index);
	cds_lfht_lookup(pages, pwb__page_hash(index), pwb__page_match, &index,
			&iter);
	return pwb__page_of(cds_lfht_iter_get_node(&iter));
}

/* The data of page @index of @p (a page, or the folio holding it). */
static inline void *pwb__page_addr(const struct pwb__page *p, uint64_t index,
				   unsigned int shift)
{
	return (char *)p->data + ((index - p->index) << shift);
}

/* Pages in @p (1 for a page, 1 << order for a folio). */
static inline unsigned int pwb__page_nr(const struct pwb__page *p)
{
	return 1u << p->order;
}

/* The reference count's read-modify-writes, as compiler atomics: every
 * put happens before the kill that frees the page, for TSan too. Return
 * the value found (@old on success). */
static inline int pwb__page_ref_cmpxchg(struct pwb__page *p, int old, int new)
{
	__atomic_compare_exchange_n(&p->ref, &old, new, false,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	return old;
}

/* Take a reference unless the page is dead. */
static inline bool pwb__page_get(struct pwb__page *p)
{
	int r = pwb__aread(&p->ref);

	while (r >= 0) {
		int old = pwb__page_ref_cmpxchg(p, r, r + 1);

		if (old == r)
			return true;
		r = old;
	}
	return false;
}

static inline void pwb__page_put(struct pwb__page *p)
{
	__atomic_fetch_sub(&p->ref, 1, __ATOMIC_SEQ_CST);
}

/*
 * The lookup shared by the hit paths of pwb_write() and pwb_read()
 * (pcache-write.c, pcache-read.c): the cached page holding
 * [off, off + len) if that range lies in one page, with a reference;
 * *@pgoff is the range's offset in its data (in a folio, from the
 * folio's start). NULL: not cached, dying, spanning pages, or the inode
 * is closing. A reference taken on a page the index gave is a reference
 * on the page of that index: descriptors are freed only after a grace
 * period (never reused while the lookup's section lasts), a live count
 * keeps a page in the index, and its inode and index are read-only, so
 * unlike the kernel's filemap_get_folio() there is nothing to check
 * again after the get. Any thread; takes and leaves its own read-side
 * section.
 */
static inline __attribute__((always_inline)) struct pwb__page *
pwb__fast_get_page(struct pwb_inode *inode, size_t len, uint64_t off,
		   unsigned int *pgoff)
{
	struct pwb__pcache_inode *pc = inode->pcache;
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
	p = pwb__pcache_lookup_rcu(pages, pwb__aread(&pc->orders), index);
	if (!p || !pwb__page_get(p)) {
		pwb__rcu_read_unlock();
		return NULL;
	}
	pwb__rcu_read_unlock();
	/* In a folio: the offset in its buffer. */
	if (caa_unlikely(p->order))
		*pgoff += (unsigned int)((index - p->index) << shift);
	return p;
}

/* pwb__fast_get_page() with the page's lock taken too (trylock: a busy
 * page sends the caller to its slow path, NULL). */
static inline __attribute__((always_inline)) struct pwb__page *
pwb__fast_lock_page(struct pwb_inode *inode, size_t len, uint64_t off,
		    unsigned int *pgoff)
{
	struct pwb__page *p = pwb__fast_get_page(inode, len, off, pgoff);

	if (p && pwb__page_trylock(p)) {
		pwb__page_put(p);
		return NULL;
	}
	return p;
}

/* What making a page does when the cache is full (pwb__pcache_page_find,
 * pwb__pcache_charge). */
enum pwb__room {
	/* Free clean pages on this thread (direct reclaim); -ENOBUFS if
	 * none can be, without waiting. */
	PWB__ROOM_RECLAIM = 0,
	/* The same, else start writeback and wait for room. */
	PWB__ROOM_WAIT,
	/* Only room there is now: -ENOBUFS at once, no reclaim (which takes
	 * inode and list locks), no yield (readahead of a PWB_RW_NOWAIT
	 * reader, speculative: the background reclaimer is woken). */
	PWB__ROOM_NOW,
};

/*
 * Find page @index of @inode with a reference, creating it (not up to
 * date) if absent and @create, making room for it as @room says. 0 and
 * *@pp, -ENOENT (not @create), -ENOBUFS (the cache full, see enum
 * pwb__room), or -ENOMEM / -ETIMEDOUT (message set).
 */
int pwb__pcache_page_find(struct pwb_inode *inode, uint64_t index, bool create,
			  enum pwb__room room,
			  struct pwb__page **pp) PWB__INTERNAL;
/* Drop the clean cached pages [first, last] of @inode that nobody holds
 * or reads (PWB_FADV_DONTNEED); dirty pages and pages being written
 * stay. */
void pwb__pcache_drop_clean(struct pwb_inode *inode, uint64_t first,
			    uint64_t last) PWB__INTERNAL;
/* Free the clean, idle pages of [first, last] of @inode marked
 * PWB__PG_DROP (PWB_RW_DONTCACHE): the end of their write. Any thread; in
 * a read-side section that keeps @inode; no lock held. */
void pwb__pcache_drop_written_rcu(struct pwb_inode *inode, uint64_t first,
				  uint64_t last) PWB__INTERNAL;
/* After a truncate lowered the size over [first, last]: drop the clean
 * pages there (wholly inside), waiting out short-lived references (a
 * reader's fill, a read in flight), so that none a reader filled from the
 * device with the old size stays. Dirty pages and pages being written
 * stay (a write after the truncate made them). Caller holds a reference
 * on @inode (HOLD_REF); no lock held. */
void pwb__pcache_drop_refilled(struct pwb_inode *inode, uint64_t first,
			       uint64_t last) PWB__INTERNAL;
/* Drop the cached pages [first, last] of @inode, waiting out short-lived
 * references (a reader's copy, a read in flight) and the writes in flight
 * of the pages it removes (a write dirtied again after a discard's wait):
 * every buffer goes back to the pool at once, never while the device may
 * read it. @closing: the inode's close, after its last write (nothing in
 * flight). Otherwise the caller holds a reference (HOLD_REF) and no
 * lock; it may sleep. */
void pwb__pcache_drop_range(struct pwb_inode *inode, uint64_t first,
			    uint64_t last, bool closing) PWB__INTERNAL;
/* The argument checks of pwb_read(), pwb_write() and the size calls
 * (@who), and the reference they hold (pwb__inode_enter(HOLD_REF)). 0 or
 * a negative errno (message set; no reference held). */
int pwb__pcache_enter(struct pwb_inode *inode, const char *who) PWB__INTERNAL;

/*
 * The page owner's ops (page-owner.h), through which the engine reaches
 * these pages; bdi open and close (page-owner.h) call the set-up. In
 * pcache-owner.c unless said otherwise.
 */
/* pwb_inode_open of a library-owned inode: 0 or -ENOMEM (message set). */
int pwb__pcache_inode_init(struct pwb_inode *inode) PWB__INTERNAL;
/* pwb__inode_close, after the last write and unlink: drop every page and
 * the index (not from a call_rcu callback). */
void pwb__pcache_inode_close(struct pwb_inode *inode) PWB__INTERNAL;
/* The inode's RCU callback: free what is left. */
void pwb__pcache_inode_free(struct pwb_inode *inode) PWB__INTERNAL;
/* pcache-lookup.c: the get_page op of library-owned inodes. */
int pwb__pcache_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data) PWB__INTERNAL;
/* pcache-write.c: pwb_inode_discard() ended on a library-owned inode:
 * drop the cached pages [first, last] (the pages wholly inside [off, off +
 * len)); with @len UINT64_MAX also truncate the size to @off, zeroing the
 * rest of its page. 0, or the error of that zeroing (message set; the
 * size is left as it was). Caller holds a reference (HOLD_REF). */
int pwb__pcache_discarded(struct pwb_inode *inode, uint64_t off,
			  uint64_t len, uint64_t first,
			  uint64_t last) PWB__INTERNAL;

/* pcache-owner.c: writes of pages [first, last] of @inode ended (the
 * page owner's writes_ended op). */
void pwb__pcache_writes_ended(struct pwb_inode *inode, uint64_t first,
			      uint64_t last) PWB__INTERNAL;

/* Fill the page-cache fields of @st: context @idx's, or the bdi's (-1). */
void pwb__pcache_stats(struct pwb_bdi *bdi, int idx,
		       struct pwb_stats *st) PWB__INTERNAL;

/* The inode's size (0 for application-owned pages). Any thread. */
uint64_t pwb__pcache_size(struct pwb_inode *inode) PWB__INTERNAL;
/* Set the size of a just-opened inode (the space layer's closed-inode
 * record), before the application can see it. */
void pwb__pcache_size_load(struct pwb_inode *inode, uint64_t size)
	PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pcache-folio.c: folios                                                 */

/* The order of the folio a write of @pages pages from @index could make
 * (the largest naturally aligned one it covers whole), or 0: none. */
unsigned int pwb__pcache_folio_order(struct pwb_inode *inode, uint64_t index,
				     uint64_t pages) PWB__INTERNAL;
/* Put a folio of @order at @index (aligned) in @inode's index, with a
 * reference, locked and latched (PWB__PG_WLATCH), not up to date: the
 * caller copies all of it, then sets PWB__PG_UPTODATE, then unlatches and
 * unlocks it. The caller charged its pages (pwb__pcache_charge_folio()).
 * 0 and *@pp, or -EBUSY, the pages uncharged: no buffer, or a page of
 * the range is cached (write single pages instead). */
int pwb__pcache_folio_add(struct pwb_inode *inode, uint64_t index,
			  unsigned int order, struct pwb__page **pp)
	PWB__INTERNAL;
/* Whether no page of the @nr from @first is cached now (a hint: the
 * answer may change at once). */
bool pwb__pcache_range_free(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr) PWB__INTERNAL;
/* Put single page @np in @inode's index unless a page or folio holds its
 * index already (-EEXIST). */
int pwb__pcache_index_add_page(struct pwb_inode *inode,
			       struct pwb__page *np) PWB__INTERNAL;
/* Replace folio @f, whose count its caller made dead, by single pages
 * (unreferenced, on a reclaim list, with its flags) holding its data. 0,
 * or -ENOMEM (the folio is left as it was, dead). */
int pwb__pcache_folio_split_dead(struct pwb_inode *inode,
				 struct pwb__page *f) PWB__INTERNAL;

/* Entry @p (a page or folio) left the index: count it. */
static inline void pwb__pcache_index_gone(struct pwb__pcache_inode *pc,
					  const struct pwb__page *p)
{
	if (!p->order)
		uatomic_dec(&pc->nr_small);
}

/* ---------------------------------------------------------------------- */
/* pcache-read.c                                                          */

/* Fill page @p (its lock held, not up to date) from the device: zeros at
 * and past @size and for pages the device does not hold; it joins a
 * reclaim list. 0 or -errno (message set). */
int pwb__pcache_fill_locked(struct pwb_inode *inode, struct pwb__page *p,
			    uint64_t size) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pcache-reclaim.c                                                       */

/* Put @p at the tail of reclaim list @idx (modulo PWB_MAX_WB_CTX) unless
 * it is on one (or joining one), or dead. */
void pwb__pcache_lru_join(struct pwb__pcache_bdi *pb, struct pwb__page *p,
			  unsigned int idx) PWB__INTERNAL;
/* The same, with the common case inline: a page on a list already (one a
 * flusher writes again, one read twice) costs no call. */
static inline void pwb__pcache_lru_add(struct pwb__pcache_bdi *pb,
				       struct pwb__page *p, unsigned int idx)
{
	if (pwb__aread(&p->lru_idx) >= 0)
		return;
	pwb__pcache_lru_join(pb, p, idx);
}
/* Take dead page @p off its list, or undo a claim on one. */
void pwb__pcache_lru_del(struct pwb__pcache_bdi *pb,
			 struct pwb__page *p) PWB__INTERNAL;
/* The context whose list @inode's pages read from the device join. */
unsigned int pwb__pcache_owner_ctx(struct pwb_inode *inode) PWB__INTERNAL;
/* Charge one page against cache_bytes, making room as @room says (enum
 * pwb__room). 0, -ENOBUFS, or -ETIMEDOUT (PWB__ROOM_WAIT; message set). */
int pwb__pcache_charge(struct pwb_inode *inode,
		       enum pwb__room room) PWB__INTERNAL;
/* PWB_PAGE_DIRTY and PWB_PAGE_WRITEBACK: whether a page of the @nr from
 * @first is dirty, in flight (a folio is busy while any of its pages
 * is). The _locked one under inode->lock (no region); the other asks
 * region slices too, and may answer -errno (closing). */
int pwb__pcache_range_busy_locked(struct pwb_inode *inode, uint64_t first,
				  uint64_t nr) PWB__INTERNAL;
int pwb__pcache_range_state(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr) PWB__INTERNAL;
/* Charge the @nr pages of a new folio: as pwb__pcache_charge() with @wait
 * (reclaim, else wait for writes to end), so that a writer streaming into
 * a full cache keeps making folios; a folio of more than a quarter of the
 * cache only if there is room now (-ENOBUFS: write single pages). 0,
 * -ENOBUFS or -ETIMEDOUT (message set). */
int pwb__pcache_charge_folio(struct pwb_inode *inode,
			     unsigned int nr) PWB__INTERNAL;
/* Charge @n pages at once if there is room now (no reclaim, no wait): 0,
 * or -ENOBUFS. */
int pwb__pcache_charge_nowait(struct pwb_inode *inode,
			      unsigned int n) PWB__INTERNAL;
/* Reclaim clean pages of context @idx's inodes down to the low watermark
 * (called by its flusher after its passes). */
void pwb__pcache_reclaim_ctx(struct pwb_bdi *bdi,
			     unsigned int idx) PWB__INTERNAL;
/* bdi close, from pwb__pcache_bdi_fini(): stop the background reclaimer
 * and run the frees it queued. */
void pwb__pcache_kswapd_stop(struct pwb__pcache_bdi *pb) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pcache-domain.c: a domain's budget                                     */

void pwb__pcache_room_init(struct pwb__pcache_room *r) PWB__INTERNAL;
void pwb__pcache_room_fini(struct pwb__pcache_room *r) PWB__INTERNAL;
/* Set-up of a bdi in a domain with a cache budget: its cache draws from
 * the budget, waits on the domain's room and takes buffers from the
 * domain's pool. 0 or -ENOMEM (message set). */
int pwb__pcache_dom_join(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Tear-down, after the bdi's last page was freed. */
void pwb__pcache_dom_leave(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Charge @n pages of @bdi to its domain's budget: 0; 1 if this charge
 * crossed the high watermark (wake reclaim); -ENOBUFS: the budget is
 * full, nothing charged. */
int pwb__pcache_dom_charge(struct pwb_bdi *bdi, unsigned int n) PWB__INTERNAL;
/* The members of @bdi's domain that have pages cached, in the order they
 * give pages back (at most @max, into @out).
 * The caller stays in its read-side section while it uses them. */
unsigned int pwb__pcache_dom_order_rcu(struct pwb_bdi *bdi,
				       struct pwb_bdi **out,
				       unsigned int max) PWB__INTERNAL;
/* Start background writeback on the other members with dirty pages.
 * Caller in a read-side section. */
void pwb__pcache_dom_kick_rcu(struct pwb_bdi *bdi) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pcache-pool.c: page buffers                                            */

/* A page buffer: from the pool, else a new chunk. NULL: out of memory. */
void *pwb__pcache_buf_alloc(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__pcache_buf_free(struct pwb__pcache_bdi *pb, void *b) PWB__INTERNAL;
/* A folio buffer of 1 << @order pages from one chunk: a free one, or a
 * new chunk's when the pool has fewer free pages than that. NULL: the
 * pool's free pages are scattered (use them as single pages), or out of
 * memory. */
void *pwb__pcache_folio_buf_alloc(struct pwb_bdi *bdi,
				  unsigned int order) PWB__INTERNAL;
/* Give back the buffer of a page (@order 0) or folio. */
void pwb__pcache_buf_free_order(struct pwb__pcache_bdi *pb, void *b,
				unsigned int order) PWB__INTERNAL;
/* Give back the buffers of a reclaim batch at once, one pool lock for
 * all: @first and the pages linked behind it through their lru heads. */
void pwb__pcache_batch_bufs_free(struct pwb__pcache_bdi *pb,
				 struct pwb__page *first) PWB__INTERNAL;
/* call_rcu callbacks: free the descriptor of one removed page; free a
 * reclaim batch's descriptors (the first page's rcu_head, the others
 * linked through their lru heads). Their buffers went back at once. */
void pwb__pcache_page_desc_free_rcu(struct rcu_head *head) PWB__INTERNAL;
void pwb__pcache_batch_free_rcu(struct rcu_head *head) PWB__INTERNAL;
/* A pool, empty, of buffers of @page_size bytes. */
void pwb__page_pool_init(struct pwb__page_pool *pool,
			 size_t page_size) PWB__INTERNAL;
/* After the last buffer of @pool went back to it (its bdi's close, after
 * rcu_barrier; a domain's last member's): give back every chunk. */
void pwb__page_pool_fini(struct pwb__page_pool *pool) PWB__INTERNAL;
/* Map and fault in chunks until @pool holds at least @bytes of page
 * buffers of @ps bytes (PWB_BDI_CACHE_PREFAULT). 0 or -ENOMEM (message
 * set); the chunks mapped stay in the pool either way. Any thread. */
int pwb__page_pool_prefault(struct pwb__page_pool *pool, size_t ps,
			    uint64_t bytes) PWB__INTERNAL;

#endif /* PWB_PCACHE_H */
