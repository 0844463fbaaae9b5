// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-owner.c - library-owned pages: the page cache as the owner of a
 * bdi's pages. The set-up and tear-down of the cache, of each inode's
 * index and of its size, the statistics, and the ops table through which
 * the writeback engine reaches these pages (page-owner.h), handed to the
 * bdi at open. The top of the page cache's files (pcache-lookup.c lists
 * them).
 */
#include "pcache.h"

#include <stdlib.h>
#include <time.h>

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
	pwb__ra_stats(bdi, st);
}

/* Writes of pages [first, last] of @inode ended: wake the writers
 * waiting for room, and free the pages a PWB_RW_DONTCACHE write left to
 * drop once written. */
void pwb__pcache_writes_ended(struct pwb_inode *inode, uint64_t first,
			      uint64_t last)
{
	pwb__pcache_room(inode->bdi);
	if (caa_unlikely(inode->pcache && pwb__aread(&inode->pcache->dontcache)))
		pwb__pcache_drop_written_rcu(inode, first, last);
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
	.writes_ended = pwb__pcache_writes_ended,
	.reclaim = pwb__pcache_reclaim_ctx,
	.stats = pwb__pcache_stats,
};

int pwb__pcache_bdi_init(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = calloc(1, sizeof(*pb));
	uint64_t bytes = bdi->cfg.cache_bytes;

	if (!pb)
		return pwb__err(-ENOMEM, "out of memory");
	/* In a domain with a cache budget, the bdi may use all of it
	 * unless its own cache_bytes is less (pwb__domain_attach checked
	 * it is not more). */
	if (!bytes && bdi->dom && bdi->dom->dom->cfg.cache_bytes)
		bytes = bdi->dom->dom->cfg.cache_bytes;
	if (!bytes)
		bytes = PWB__MAX(256ull << 20, 2 * bdi->cfg.dirty_bytes);
	pb->limit_pages = PWB__MAX(bytes >> bdi->page_shift, 16u);
	pb->page_shift = bdi->page_shift;
	pwb__page_pool_init(&pb->own_pool, pwb__page_size(bdi));
	pb->pool = &pb->own_pool;
	pwb__pcache_room_init(&pb->own_room);
	pb->room = &pb->own_room;
	pwb__mutex_init(&pb->kswapd_lock, PWB__LOCK_PAGE_KSWAPD);
	pthread_cond_init(&pb->kswapd_cond, NULL);
	for (unsigned int i = 0; i < PWB_MAX_WB_CTX; i++) {
		pwb__mutex_init(&pb->lru[i].lock, PWB__LOCK_PAGE_LRU);
		CDS_INIT_LIST_HEAD(&pb->lru[i].head);
	}
	bdi->pcache = pb;
	bdi->page_owner = &pcache_owner_ops;
	/* Reads through the bdi's backend, readahead (readahead.c). */
	if (pwb__ra_bdi_init(bdi)) {
		pwb__pcache_bdi_fini(bdi);
		return -ENOMEM;
	}
	if (bdi->dom && bdi->dom->dom->cfg.cache_bytes &&
	    pwb__pcache_dom_join(bdi)) {
		pwb__pcache_bdi_fini(bdi);
		return -ENOMEM;
	}
	/* A domain's pool is filled to this member's limit; the next
	 * member adds only what its own limit needs beyond that. */
	if ((bdi->cfg.flags & PWB_BDI_CACHE_PREFAULT) &&
	    pwb__page_pool_prefault(pb->pool, pwb__page_size(bdi),
				    pb->limit_pages << bdi->page_shift)) {
		pwb__pcache_bdi_fini(bdi);
		return -ENOMEM;
	}
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
	struct pwb__pcache_inode *top = pwb__aread(&dead_indexes);

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

	if (!pwb__aread(&dead_indexes))
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
	pwb__pcache_kswapd_stop(pb);
	pwb__ra_bdi_fini(bdi);
	if (pb->dom)
		pwb__pcache_dom_leave(bdi);
	pwb__page_pool_fini(&pb->own_pool);
	pwb__pcache_room_fini(&pb->own_room);
	pthread_mutex_destroy(&pb->kswapd_lock);
	pthread_cond_destroy(&pb->kswapd_cond);
	for (unsigned int i = 0; i < PWB_MAX_WB_CTX; i++)
		pthread_mutex_destroy(&pb->lru[i].lock);
	free(pb);
	bdi->pcache = NULL;
}

/*
 * The most buckets an inode's index may grow to: half the cache's pages,
 * rounded up to a power of two (at least the 512 it starts with). Growth
 * is driven by the length of the chain an insert lands on, and with
 * random hashes some chain reaches that length long after the table is
 * as large as its nodes: unbounded, the index of a 1 GiB file grew to
 * 4 M buckets (64 MiB, 256 bytes per cached page). A bound of half the
 * pages keeps chains at one or two nodes when the inode fills the whole
 * cache. The order allocator (calloc per size order), not liburcu's
 * default for bounded tables, which reserves the whole bound as a
 * mapping per inode: thousands of inodes would reach the process's
 * limit on mappings.
 */
static unsigned long index_max_buckets(struct pwb_bdi *bdi)
{
	uint64_t half = bdi->pcache->limit_pages / 2;
	unsigned long max = 512;

	while (max < half && max < (1ul << 40))
		max <<= 1;
	return max;
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
	pwb__ra_inode_init(&pc->ra);
	pc->pages = _cds_lfht_new(512, 512, index_max_buckets(inode->bdi),
				  CDS_LFHT_AUTO_RESIZE, &cds_lfht_mm_order,
				  &rcu_flavor, NULL);
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
	uatomic_cmpxchg(&inode->bdi->bg_cap_pages, 0,
			PWB__MAX(inode->bdi->pcache->limit_pages / 2, 1u));
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
	pwb__pcache_drop_range(inode, 0, UINT64_MAX, true);
	pwb__ra_inode_fini(inode->bdi, &pc->ra);
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
