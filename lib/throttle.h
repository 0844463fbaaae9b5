/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * throttle.h - dirty throttling of the applications (throttle.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_THROTTLE_H
#define PWB_THROTTLE_H

#include "base.h"

struct pwb_bdi;
struct pwb_tenant;

/* ---------------------------------------------------------------------- */
/* throttle.c                                                             */

/* Count pages the calling thread newly dirtied (thread-local). */
void pwb__throttle_account(uint64_t pages) PWB__INTERNAL;
/* Wake every flusher for background writeback, once per round. */
void pwb__kick_background(struct pwb_bdi *bdi) PWB__INTERNAL;
/* True if the bdi's dirty + writeback pages are above the throttle's set
 * point (half way from dirty_background_bytes to dirty_bytes), where
 * dirtiers are paused; false without a dirty_bytes limit. */
bool pwb__throttle_over_setpoint(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Where dirtiers start to be paused: half way from @bg to @limit. */
static inline uint64_t pwb__throttle_setpoint(uint64_t bg, uint64_t limit)
{
	return bg + (limit - bg) / 2;
}
/* pwb_balance_dirty() without argument checks; the caller holds a
 * pwb__bdi_enter() reference. @t: the dirtied inode's tenant, whose own
 * state decides (NULL: the bdi's). -ESHUTDOWN if close began meanwhile. */
int pwb__balance_dirty(struct pwb_bdi *bdi,
		       struct pwb_tenant *t) PWB__INTERNAL;
/* The same for pwb_mark_dirty(), whose caller holds rcu_read_lock (which
 * keeps @bdi alive): the common "no pause" answer needs no reference; a
 * pause takes one. Drops rcu_read_lock before it returns. */
int pwb__balance_dirty_rcu(struct pwb_bdi *bdi,
			   struct pwb_tenant *t) PWB__INTERNAL;
/* pwb_balance_dirty_nowait() for lib/'s own callers, who hold the bdi
 * (a reference on one of its inodes): 0 or -EAGAIN, no message. */
int pwb__balance_dirty_nowait(struct pwb_bdi *bdi) PWB__INTERNAL;
/* While set on this thread, dirtying never sleeps in the throttle: the
 * debt is kept for the next call that may (PWB_RW_NOWAIT writes). */
void pwb__throttle_set_nowait(bool nowait) PWB__INTERNAL;

#define PWB__THROTTLE_MAX_PAUSE_NS (200 * PWB__NSEC_PER_MSEC)
#define PWB__THROTTLE_MIN_PAUSE_NS (1 * PWB__NSEC_PER_MSEC)

/* What the pause of one dirtier is decided from. Pages, except bw. */
struct pwb__throttle_state {
	uint64_t bg;		/* background threshold (0: none) */
	uint64_t limit;		/* dirty_bytes (0: no throttling) */
	uint64_t dirty;		/* dirty + writeback, whole bdi */
	uint64_t bw;		/* bytes/s, sum over the contexts */
	uint64_t dirtied;	/* pages the dirtier owes */
	unsigned int nr_dirtiers; /* threads dirtying now (at least 1) */
	unsigned int page_shift;
};

/* The pause in ns for a dirtier in state @s: 0 at or below the set point;
 * between the set point and the limit the time to write s->dirtied pages
 * at the dirtier's share of the bandwidth scaled down towards the limit
 * (may be below PWB__THROTTLE_MIN_PAUSE_NS: then not slept, but owed); at
 * the limit (*@hard set) the time to write the excess, at least the
 * minimum. Never above PWB__THROTTLE_MAX_PAUSE_NS. */
uint64_t pwb__throttle_pause(const struct pwb__throttle_state *s,
			     bool *hard) PWB__INTERNAL;
/* Count the calling thread as a dirtier of @bdi at clock time @now and
 * return the number of threads that dirtied in this or the previous
 * 200 ms window (at least 1). */
unsigned int pwb__throttle_dirtiers(struct pwb_bdi *bdi,
				    uint64_t now) PWB__INTERNAL;

#endif /* PWB_THROTTLE_H */
