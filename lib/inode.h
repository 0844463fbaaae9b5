/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * inode.h - struct pwb_inode and its lists, write failures, discard
 * (inode.c, error.c, discard.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_INODE_H
#define PWB_INODE_H

#include "base.h"
#include "pagemap.h"
#include "xarray.h"

struct pwb_bdi;
struct pwb__region;
struct pwb__wb_ctx;

/* ---------------------------------------------------------------------- */
/* inode.c                                                                */

/* The list an inode is on. */
enum pwb__list {
	PWB__LIST_NONE = 0,
	PWB__LIST_DIRTY,
	PWB__LIST_IO,
	PWB__LIST_MORE_IO,
	PWB__LIST_DIRTY_TIME,
};

/* inode->state bits. */
#define PWB__I_DIRTY_PAGES 0x01u	/* the page map holds dirty pages */
#define PWB__I_DIRTY_META 0x02u		/* write_inode needed */
#define PWB__I_DIRTY_TIME 0x04u		/* timestamps only */
#define PWB__I_SYNC 0x08u		/* a flusher is writing it */
#define PWB__I_FREEING 0x10u		/* being closed */
#define PWB__I_GONE 0x20u		/* closed: off every list, uncounted;
					 * a re-shard leaves it alone */
#define PWB__I_DIRTY_ANY                                                       \
	(PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META | PWB__I_DIRTY_TIME)

struct pwb_inode {
	/* Set by pwb_inode_open(), then read-only: */
	uint64_t ino;
	struct pwb_bdi *bdi;
	struct pwb_inode_ops ops;
	void *priv;

	/* Chosen by the shard policy at first dirtying, under inode->lock;
	 * a later move between contexts holds both list_locks and
	 * inode->lock. Readers hold inode->lock or use pwb__aread. */
	struct pwb__wb_ctx *wb;
	/* pwb_inode_set_wb_hint(): a context index or -1. CMM_STORE_SHARED
	 * by the application, pwb__aread by the shard policy. */
	int wb_hint;

	pthread_mutex_t lock;		/* the fields below, to the marker */
	unsigned int state;		/* PWB__I_* */
	/* clock ns of the first dirtying; atomic (pwb__aread, pwb__aset):
	 * sorting b_dirty reads other inodes' under the list lock only */
	uint64_t dirtied_when;
	uint64_t dirtied_time_when;	/* same, for PWB__I_DIRTY_TIME */
	struct pwb__map map;		/* page tags */
	uint64_t writeback_index;	/* where the next cyclic pass starts */
	uint64_t last_write_epoch;	/* lock: flush epoch of its last
					 * finished write (0: none) */
	pwb__errseq_t wb_err;		/* write errors of this inode */
	pwb__errseq_t fsync_cursor;	/* pwb_fsync's cursor */
	unsigned int users;		/* lock: calls holding it by reference
					 * (pwb__inode_enter HOLD_REF): fsyncs,
					 * discards, writeback waits */
	pthread_cond_t users_cond;	/* with lock: users dropped to 0 */
	/* Stable pages and discard (discard.c). */
	pthread_cond_t wb_cond;		/* WRITEBACK tags cleared, an
					 * end_write returned, a discard
					 * ended */
	unsigned int wb_waiters;	/* lock (pwb__aread by completions):
					 * threads sleeping on wb_cond */
	bool discarding;		/* a pwb_inode_discard() runs over */
	uint64_t discard_first;		/* pages [discard_first, */
	uint64_t discard_last;		/*        discard_last] */
	/* Write failures (error.c): back-off and the failed mark. */
	unsigned int wb_visit;		/* bumped by each writeback visit */
	unsigned int fail_visit;	/* wb_visit of the last counted failure */
	unsigned int wb_failures;	/* consecutive visits with a failure */
	uint64_t fail_pass;		/* wb_passes of the ctx at that failure */
	uint64_t backoff_ns;		/* current back-off, doubled per failure */
	uint64_t retry_after;		/* clock ns: periodic/background skip
					 * the inode until then */
	int failed_err;			/* after max_write_failures failures:
					 * fsync returns it until cleared */
	/* ---- end of inode->lock ---- */

	unsigned long nr_ending;	/* uatomic: finished writes whose
					 * end_write has not returned yet
					 * (raised under inode->lock) */

	struct cds_list_head io_list;	/* wb->list_lock: on a b_* list */
	enum pwb__list on_list;		/* wb->list_lock: which one */
	/* F_ORDERED policies: the key (set at placement under inode->lock
	 * before the inode is on any list, later under both locks) and
	 * whether the inode is in wb->io_tree (list_lock). */
	struct pwb__xa_item xa;
	bool in_tree;
	struct cds_lfht_node hnode;	/* bdi->inodes: RCU (cds_lfht) */
	struct rcu_head rcu;		/* call_rcu, once, by close */

	/* Per-page policies (PWB_POLICY_F_PER_PAGE, region.c). An inode
	 * the application opened may own slices: one hidden pwb_inode per
	 * context slot, holding the dirty pages routed there and sitting on
	 * that context's lists in the inode's place. */
	struct pwb__region *region;	/* RCU-published once, freed with the
					 * inode; NULL for a whole inode */
	struct pwb_inode *parent;	/* read-only: a slice's inode (else
					 * NULL) */
	unsigned int slot;		/* read-only: a slice's slot (context
					 * index when it was made) */
	/* Library-owned pages (pcache-*.c): set at open, read-only; NULL
	 * when the application owns the pages. */
	struct pwb__pcache_inode *pcache;
	struct pwb__space_inode *space;	/* read-only after open: allocator
					 * mode (space.h; own lock), else
					 * NULL */
	/* pwb_inode_set_tenant(): inode->lock to change (with the page
	 * counts, tenant.c); read under it where pages are counted, with
	 * pwb__aread by the flushers' order. A slice copies its inode's. */
	struct pwb_tenant *tenant;
};

/* The inode the application knows: @inode itself, or a slice's parent.
 * Callbacks (map_page, get_page, end_write) always get this one. */
static inline struct pwb_inode *pwb__inode_app(struct pwb_inode *inode)
{
	return inode->parent ? inode->parent : inode;
}

/* Look @ino up; caller holds rcu_read_lock. */
struct pwb_inode *pwb__inode_lookup_rcu(struct pwb_bdi *bdi,
					uint64_t ino) PWB__INTERNAL;
/* Put a clean inode that just became dirty on its context's lists: b_dirty
 * (or b_dirty_time) tail, unless a flusher has it (I_SYNC). Takes
 * list_lock and inode->lock. */
void pwb__inode_attach_dirty(struct pwb_inode *inode) PWB__INTERNAL;
/* Which list of its context @inode is on (takes list_lock; for tests). */
enum pwb__list pwb__inode_list(struct pwb_inode *inode) PWB__INTERNAL;
/* Move @inode to the tail of list @to of @wb (or off every list) and keep
 * the list counters right. Caller holds wb->list_lock. */
void pwb__inode_move_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			    enum pwb__list to) PWB__INTERNAL;
/* pwb_bdi_close: claim the close of @inode (set I_FREEING) unless another
 * close did; caller is in the read-side section that found @inode. */
bool pwb__inode_claim_close_rcu(struct pwb_inode *inode) PWB__INTERNAL;
/* Take @inode off its context's dirty lists if it has neither dirty pages
 * nor dirty metadata (to b_dirty_time if only its timestamps are dirty),
 * unless a flusher has it (I_SYNC): that flusher requeues it. Takes
 * list_lock and inode->lock. */
void pwb__inode_requeue_clean(struct pwb_inode *inode) PWB__INTERNAL;
/* Write back, unregister and free an inode whose close the caller claimed
 * (pwb__inode_enter(HOLD_CLOSE)); pwb_inode_close and pwb_bdi_close. */
int pwb__inode_close(struct pwb_inode *inode) PWB__INTERNAL;
/* Tag pages [first, last] of @inode DIRTY with LSN @lsn (0: none; see
 * pwb__map_set_lsn), affine it to @wb if it has no context yet (ordering
 * key @key) and count the pages on its context. Caller holds inode->lock
 * and checked I_FREEING. Return the pages newly dirtied (0: none) or
 * -ENOMEM; *@attach says to call pwb__inode_attach_dirty() once the lock
 * is dropped. */
int64_t pwb__inode_dirty_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb, uint64_t key,
				uint64_t first, uint64_t last, uint64_t lsn,
				bool *attach) PWB__INTERNAL;
/* pwb_mark_dirty() for lib/'s own callers: @inode is open, @len is not 0
 * and [@off, @off + @len) does not wrap; the thread's error message is
 * left alone unless the call fails. */
int pwb__mark_dirty(struct pwb_inode *inode, uint64_t off,
		    uint64_t len) PWB__INTERNAL;
/* pwb_mark_dirty()'s end: background kick and throttling for @n new
 * dirty pages of @inode (the application's). Caller is inside
 * pwb__inode_enter(@inode, PWB__HOLD_RCU), which this ends. */
int pwb__mark_dirty_tail(struct pwb_inode *inode, int64_t n) PWB__INTERNAL;
/* The flush epoch of @inode's last write (writeback.c): the highest over its
 * holders, the inode itself (metadata through write_inode, pages dirtied
 * before a per-page policy) and its region slices. Takes each holder's
 * lock in turn: caller holds no inode->lock, and @inode cannot be freed
 * under it (a reference, a close, or a read-side section). */
uint64_t pwb__inode_write_epoch(struct pwb_inode *inode) PWB__INTERNAL;
/* pwb_fsync() for lib/'s own callers, who pass an inode and are not
 * flushers (PWB_RW_SYNC writes). */
int pwb__fsync(struct pwb_inode *inode) PWB__INTERNAL;
/* Take @inode off its context's lists and counters for good (close):
 * waits for a flusher holding it. A no-op if it was never affined. */
void pwb__inode_unlink(struct pwb_inode *inode) PWB__INTERNAL;

/* Forget @inode's failures and its failed mark (pwb_inode_clear_error).
 * Caller holds inode->lock. */
void pwb__inode_clear_error_locked(struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* discard.c                                                              */

/* A write of pages [first, last] of @inode failed: make them dirty again,
 * except those a running pwb_inode_discard() covers. Return how many pages
 * newly became dirty, or -ENOMEM; *@counted says whether any page lies
 * outside the discard (only then is the error recorded and counted).
 * Caller holds inode->lock. */
int64_t pwb__redirty_failed_locked(struct pwb_inode *inode, uint64_t first,
				   uint64_t last, bool *counted) PWB__INTERNAL;
/* Wake threads waiting for @inode's writes (pwb__io_complete): with
 * @ending false the caller holds inode->lock and just cleared WRITEBACK
 * tags; with @ending true an end_write counted in nr_ending returned and
 * the caller holds no lock. */
void pwb__inode_writes_ended(struct pwb_inode *inode,
			     bool ending) PWB__INTERNAL;
/* pwb_inode_discard(), pwb_wait_writeback() and pwb_page_state() for
 * lib/'s own callers, who pass an inode and are not flushers; the
 * thread's error message is left alone unless the call fails. */
int pwb__inode_discard(struct pwb_inode *inode, uint64_t off,
		       uint64_t len) PWB__INTERNAL;
int pwb__wait_writeback(struct pwb_inode *inode, uint64_t off,
			uint64_t len) PWB__INTERNAL;
int pwb__page_state(struct pwb_inode *inode, uint64_t index) PWB__INTERNAL;
/* Drop the DIRTY and TOWRITE tags of pages [first, last] of @inode in
 * every holder of its pages, as a discard does (the contexts' dirty-page
 * counters, the tenant's dirty bytes, LSNs), waiting for their writes in
 * flight until neither tag is left, and take a holder left clean off the
 * dirty lists. For the page cache's truncate, whose pages a write dirtied
 * after the discard dropped the range's tags: the caller holds @inode
 * (HOLD_REF) and no lock, and keeps the pages from being dirtied again
 * meanwhile (they are dead in its index). */
void pwb__inode_drop_dirty_held(struct pwb_inode *inode, uint64_t first,
				uint64_t last) PWB__INTERNAL;

#endif /* PWB_INODE_H */
