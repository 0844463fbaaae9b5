/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * blocked.h - time callers slept inside libpwb, by cause, and the log2
 * latency histograms (blocked.c)
 *
 * Not installed. Every place a public call may sleep takes a clock
 * reading (pwb__now: cfg.clock, which tests inject) only once it knows it
 * will sleep, and adds the time it slept when it wakes: the calls that do
 * not sleep pay nothing.
 */
#ifndef PWB_BLOCKED_H
#define PWB_BLOCKED_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb_tenant;
struct pwb__completion;
struct pwb__blocked;

/*
 * Add a wait of @ns (cfg.clock) for @cause: to the context of @inode (its
 * inode->wb; the bdi's own counters if @inode is NULL or never dirtied)
 * and to @t, the tenant whose call it was (NULL: none). @events waits.
 * Lock-free (takes rcu_read_lock for inode->wb); any lock may be held.
 */
void pwb__blocked_add(struct pwb_bdi *bdi, struct pwb_inode *inode,
		      struct pwb_tenant *t, unsigned int cause, uint64_t ns,
		      uint64_t events) PWB__INTERNAL;
/* The same for a wait that began at clock time @t0: adds now - @t0, and
 * returns it. */
uint64_t pwb__blocked_since(struct pwb_bdi *bdi, struct pwb_inode *inode,
			    struct pwb_tenant *t, unsigned int cause,
			    uint64_t t0) PWB__INTERNAL;
/* Record @ns in histogram @which of @inode's context (NULL or never
 * dirtied: the bdi's own). */
void pwb__hist_add_inode(struct pwb_bdi *bdi, struct pwb_inode *inode,
			 unsigned int which, uint64_t ns) PWB__INTERNAL;
/* pwb__completion_wait() of sync work queued for @inode (NULL: the whole
 * bdi) at clock time @t0 (read before the work was queued), timed: the
 * wait is PWB_BLOCK_SYNC_WAIT, except for the part the flushers spent in
 * log_force for it (PWB_BLOCK_LOG_FORCE). */
int pwb__blocked_completion_wait(struct pwb_bdi *bdi, struct pwb_inode *inode,
				 struct pwb__completion *c,
				 uint64_t t0) PWB__INTERNAL;
/* Add @src's counts to @st's blocked_ns and blocked_events. */
void pwb__blocked_read(const struct pwb__blocked *src,
		       struct pwb_stats *st) PWB__INTERNAL;
/* pwb_bdi_histogram() without the size handling. */
int pwb__bdi_histogram(struct pwb_bdi *bdi, unsigned int which,
		       struct pwb_histogram *h) PWB__INTERNAL;

#endif /* PWB_BLOCKED_H */
