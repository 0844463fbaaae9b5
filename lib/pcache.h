/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pcache.h - library-owned pages: the page cache behind pwb_write() and
 * pwb_read() (issue 12)
 *
 * An inode opened with get_page == NULL has its pages owned by libpwb. Its
 * struct pwb__pcache_inode indexes them by page number in a cds_lfht (RCU:
 * lookups take no lock). A page lives while its reference count is >= 0;
 * removal (truncate, reclaim, close) moves the count from 0 to
 * PWB__PAGE_DEAD with one compare-and-swap, so a lookup that finds a dead
 * page never uses it, unlinks it and frees it after a grace period.
 *
 * Page data: page->lock is held while the data changes (pwb_write) or is
 * read by pwb_read or filled from the device. Stable pages: a writer sets
 * PWB__PG_WLATCH, then waits until no write of the page is in flight, then
 * copies; the internal get_page answers -EAGAIN ("not now") for a latched
 * page. The flusher tags a page WRITEBACK (under inode->lock) before it
 * calls get_page, and both sides fence between their store and their
 * load, so either the writer waits for that write or the flusher leaves
 * the page for a later pass: a page is never changed while it is written.
 */
#ifndef PWB_PCACHE_H
#define PWB_PCACHE_H

#include "pwb-internal.h"

#define PWB__PAGE_DEAD (-(1 << 30))

#define PWB__PG_UPTODATE 0x1u	/* data valid (page->lock) */
#define PWB__PG_WLATCH 0x2u	/* a writer changes the data (uatomic) */
#define PWB__PG_REF 0x4u	/* referenced since the last CLOCK sweep */

struct pwb__page {
	struct cds_lfht_node node;	/* pcache->pages: RCU */
	struct pwb__pcache_bdi *pb;	/* read-only: for the buffer pool */
	uint64_t index;			/* read-only */
	void *data;			/* read-only pointer, page_size bytes
					 * aligned to the logical block size */
	pthread_mutex_t lock;		/* the data, PWB__PG_UPTODATE */
	int ref;			/* uatomic; PWB__PAGE_DEAD: removed */
	unsigned int flags;		/* uatomic: PWB__PG_* */
	struct rcu_head rcu;
};

struct pwb__pcache_inode {
	struct cds_lfht *pages;		/* index -> page: RCU */
	uint64_t size;			/* uatomic: bytes (file size) */
};

struct pwb__pcache_bdi {
	uint64_t limit_pages;		/* read-only: cache_bytes in pages */
	uint64_t nr_pages;		/* uatomic: pages allocated */
	uint64_t reclaimed[PWB_MAX_WB_CTX];	/* uatomic: per context */
	uint64_t reclaim_passes[PWB_MAX_WB_CTX];	/* uatomic */
	uint64_t reclaim_ns[PWB_MAX_WB_CTX];	/* uatomic: time reclaiming */
	uint64_t direct_reclaims;	/* uatomic: pages freed by writers */
	int reclaiming;			/* uatomic: above the high watermark,
					 * not yet down to the low one */
	/* Page buffers come from chunks of PWB__PCACHE_CHUNK_BYTES mapped
	 * and faulted in at once (an aligned malloc and a page fault per
	 * page were most of the cost of a cold write); free buffers wait in
	 * the pool for reuse and the chunks are unmapped at close. Buffers
	 * in use never exceed the cache's limit, so the memory held is at
	 * most cache_bytes plus the chunk being carved. */
	pthread_mutex_t pool_lock;
	void *pool;			/* pool_lock: a stack linked through
					 * each buffer's first word */
	uint64_t pool_len;		/* pool_lock */
	void **chunks;			/* pool_lock: the mapped chunks */
	size_t nr_chunks, cap_chunks;	/* pool_lock */
	size_t chunk_bytes;		/* read-only */
};

/* Bytes mapped at once for page buffers (at least one page). */
#define PWB__PCACHE_CHUNK_BYTES (1u << 20)

/* bdi open and close. */
int pwb__pcache_bdi_init(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__pcache_bdi_fini(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_inode_open of a library-owned inode: 0 or -ENOMEM (message set). */
int pwb__pcache_inode_init(struct pwb_inode *inode) PWB__INTERNAL;
/* pwb__inode_close, after the last write and unlink: drop every page and
 * the index (not from a call_rcu callback). */
void pwb__pcache_inode_close(struct pwb_inode *inode) PWB__INTERNAL;
/* The inode's RCU callback: free what is left. */
void pwb__pcache_inode_free(struct pwb_inode *inode) PWB__INTERNAL;
/* The get_page op of library-owned inodes. */
int pwb__pcache_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data) PWB__INTERNAL;
/* pwb_inode_discard() ended on a library-owned inode: drop the cached
 * pages [first, last] (the pages wholly inside [off, off + len)); with
 * @len UINT64_MAX also truncate the size to @off. Caller holds a
 * reference (HOLD_REF). */
void pwb__pcache_discarded(struct pwb_inode *inode, uint64_t off,
			   uint64_t len, uint64_t first,
			   uint64_t last) PWB__INTERNAL;
/* Reclaim clean pages of context @idx's inodes down to the low watermark
 * (called by its flusher after its passes). */
void pwb__pcache_reclaim_ctx(struct pwb_bdi *bdi,
			     unsigned int idx) PWB__INTERNAL;

/* Fill the page-cache fields of @st: context @idx's, or the bdi's (-1). */
void pwb__pcache_stats(struct pwb_bdi *bdi, int idx,
		       struct pwb_stats *st) PWB__INTERNAL;

/* The inode's size (0 for application-owned pages). Any thread. */
uint64_t pwb__pcache_size(struct pwb_inode *inode) PWB__INTERNAL;
/* Set the size of a just-opened inode (the space layer's closed-inode
 * record), before the application can see it. */
void pwb__pcache_size_load(struct pwb_inode *inode, uint64_t size)
	PWB__INTERNAL;

#endif /* PWB_PCACHE_H */
