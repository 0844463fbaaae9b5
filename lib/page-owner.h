/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * page-owner.h - how the writeback engine reaches pages the library owns
 *
 * The page cache (pcache-*.c) sits on a floor above the writeback engine
 * (inode.c, discard.c, io.c, wb_ctx.c, stats.c): it calls the engine to
 * dirty, wait for and drop its pages, and the engine never calls it by
 * name. Where the engine must reach library-owned pages (to write one, to
 * tell that a write ended, to reclaim, to close an inode) it calls
 * through the table below, which the page cache fills in and hands to the
 * bdi at open (bdi->page_owner): the kernel's address_space_operations,
 * through which fs/fs-writeback.c and mm/page-writeback.c reach the pages
 * of mm/filemap.c.
 *
 * Only inodes whose pages the library owns reach the table: the engine
 * tests inode->pcache (set at open, read-only, NULL when the application
 * owns the pages) before any call that concerns one inode, so
 * application-owned pages cost that test and nothing more. The writeback
 * of a page goes through inode->ops.get_page, which an inode with
 * library-owned pages has from the table: one indirect call, as for an
 * application's get_page.
 *
 * Not installed; included by the engine files that call through the table
 * and by the page cache.
 */
#ifndef PWB_PAGE_OWNER_H
#define PWB_PAGE_OWNER_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb_stats;

struct pwb__page_owner_ops {
	/* pwb_inode_open of an inode opened with get_page NULL, before it
	 * is registered: set up inode->pcache. 0 or -ENOMEM (message
	 * set). */
	int (*inode_init)(struct pwb_inode *inode);
	/* The get_page op of such inodes (struct pwb_inode_ops): the page's
	 * data for a write the flusher is about to send, or -EAGAIN while
	 * a writer changes it. Copied to inode->ops.get_page at open. */
	int (*get_page)(struct pwb_inode *inode, uint64_t index,
			const void **data);
	/* Close of any inode, after its last write and unlink, and an open
	 * that failed after inode_init: drop every page and the index.
	 * Called for every inode (not only library-owned ones): the owner
	 * also frees here what earlier closes left for later. */
	void (*inode_close)(struct pwb_inode *inode);
	/* The inode's RCU callback, or a failed open: free what is left.
	 * Only for library-owned inodes. */
	void (*inode_free)(struct pwb_inode *inode);
	/* The file size of a library-owned inode; any thread. */
	uint64_t (*size)(struct pwb_inode *inode);
	/* Set the size of a just-opened library-owned inode (the space
	 * layer's closed-inode record), before the application sees it. */
	void (*size_load)(struct pwb_inode *inode, uint64_t size);
	/* pwb_inode_discard() ended on a library-owned inode: drop the
	 * cached pages [first, last] (those wholly inside [off, off + len));
	 * with @len UINT64_MAX also truncate the size to @off. 0 or -errno
	 * (message set). Caller holds a reference (HOLD_REF). */
	int (*discarded)(struct pwb_inode *inode, uint64_t off, uint64_t len,
			 uint64_t first, uint64_t last);
	/* Writes of pages [first, last] of a library-owned inode ended
	 * (@inode is the application's, not a region slice): pages may have
	 * become reclaimable, wake writers waiting for room, free the pages
	 * a PWB_RW_DONTCACHE write left to drop. Any thread, no lock held;
	 * in a read-side section that keeps @inode (its close may have
	 * begun). */
	void (*writes_ended)(struct pwb_inode *inode, uint64_t first,
			     uint64_t last);
	/* Reclaim clean pages of context @idx's inodes down to the low
	 * watermark (its flusher, after its passes). */
	void (*reclaim)(struct pwb_bdi *bdi, unsigned int idx);
	/* Fill the page-cache fields of @st: context @idx's, or the bdi's
	 * (-1). */
	void (*stats)(struct pwb_bdi *bdi, int idx, struct pwb_stats *st);
};

/*
 * Set-up and tear-down of the page cache of a bdi, for bdi open and close
 * (the floor above the page cache): init sets bdi->pcache and
 * bdi->page_owner; 0 or -ENOMEM (message set). fini runs after the last
 * page was freed (close runs rcu_barrier() first), also after a failed
 * or skipped init.
 */
int pwb__pcache_bdi_init(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__pcache_bdi_fini(struct pwb_bdi *bdi) PWB__INTERNAL;

#endif /* PWB_PAGE_OWNER_H */
