/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * region.h - one inode's pages on several contexts (region.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_REGION_H
#define PWB_REGION_H

#include "base.h"

struct pwb_inode;

/* ---------------------------------------------------------------------- */
/* region.c: one inode's pages on several contexts                        */

/*
 * Under a per-page policy each page is routed, when it becomes dirty, to
 * the slice of the context the policy names. A page is dirty or in flight
 * in at most one holder (the inode itself, for pages dirtied before a
 * switch to a per-page policy, or one slice): a page dirtied again while
 * a holder has it goes to that holder, so one page is never in flight
 * twice. route_lock serialises routing decisions; it is taken before any
 * list_lock or inode->lock and never by a flusher.
 */
struct pwb__region {
	pthread_mutex_t route_lock;	/* routing; slice creation */
	struct pwb_inode *slice[PWB_MAX_WB_CTX]; /* RCU-published under
						  * route_lock; freed with
						  * the inode */
	int first_slot;			/* route_lock: slot of the first
					 * page ever routed, or -1 */
};

/* Give @inode its region state if it has none: 0 or -ENOMEM. */
int pwb__region_attach(struct pwb_inode *inode) PWB__INTERNAL;
/* Free the region state and slices (RCU callback of the inode). */
void pwb__region_free(struct pwb_inode *inode) PWB__INTERNAL;
/* pwb_mark_dirty() (pwb_mark_dirty_lsn() with @lsn non-zero) of pages
 * [first, last] of an inode with region state: each page and its LSN go
 * to the page map of the holder that gets the page. Caller is inside
 * pwb__inode_enter(@inode, PWB__HOLD_RCU), which this ends. */
int pwb__region_mark_dirty(struct pwb_inode *inode, uint64_t first,
			   uint64_t last, uint64_t lsn) PWB__INTERNAL;
/* A region slice's write error (or -EBUSY / log_force error of an
 * integrity pass) is its inode's too: recorded on the inode's errseq,
 * where pwb_fsync() and close read it. A no-op for a whole inode or @err
 * 0. Caller holds no inode->lock. */
void pwb__region_report(struct pwb_inode *inode, int err) PWB__INTERNAL;
/* The holders of @inode that have a context (itself first, then its
 * slices), at most 1 + PWB_MAX_WB_CTX. Caller holds rcu_read_lock. */
unsigned int pwb__region_holders_rcu(struct pwb_inode *inode,
				     struct pwb_inode **out) PWB__INTERNAL;
/* Close: no page is routed to @inode's slices from now on. */
void pwb__region_freeze(struct pwb_inode *inode) PWB__INTERNAL;

#endif /* PWB_REGION_H */
