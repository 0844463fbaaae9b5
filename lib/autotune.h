/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * autotune.h - automatic parallelism (autotune.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_AUTOTUNE_H
#define PWB_AUTOTUNE_H

#include "base.h"

struct pwb_bdi;

/* ---------------------------------------------------------------------- */
/* autotune.c: automatic parallelism (PWB_BDI_AUTO_WB_CTX)                */

/*
 * The decision: pure, with no clock, lock or thread of its own, so that
 * unit tests feed it synthetic bandwidth series. Hill climbing over the
 * counts [min, max]: each measured window gives the bandwidth of the count
 * in effect; the search keeps the fastest count of the current round
 * ("best": the fewest contexts within tol_pct of the fastest measured),
 * tries unmeasured counts on one side of it (doubling or halving while
 * nothing beyond is known, then bisecting towards the nearest slower
 * count), turns to the other side after a slower result, and settles on
 * best when both of its neighbours are measured. A settled search starts a
 * new round after reprobe_windows measured windows, probing the neighbours
 * of best one step at a time.
 */
struct pwb__auto_params {
	unsigned int min, max;		/* bounds on the count, 1 <= min <= max */
	unsigned int tol_pct;		/* "faster" means by more than this */
	unsigned int reprobe_windows;	/* held windows before a re-probe */
	uint64_t min_bytes;		/* a window writing less is idle */
};

/* One measurement window, as the driver saw it. */
struct pwb__auto_window {
	unsigned int nr;	/* contexts in effect during the window */
	uint64_t bytes;		/* bytes written in it */
	uint64_t ns;		/* its length */
	bool busy;		/* writeback had a backlog at both ends */
};

struct pwb__auto_state {
	unsigned int best;	/* fastest count of this round (0: none) */
	int dir;		/* +1 or -1: the side to search first */
	unsigned int round;	/* current round, from 1 */
	unsigned int held;	/* measured windows since settling */
	bool settled;
	bool local;		/* this round probes neighbours only */
	enum pwb_auto_reason reason;	/* of the last decision */
	uint64_t bw[PWB_MAX_WB_CTX + 1];	/* bytes/s measured per count */
	unsigned int mark[PWB_MAX_WB_CTX + 1];	/* round of bw[n]; 0 never */
};

void pwb__auto_init(struct pwb__auto_state *s,
		    const struct pwb__auto_params *p,
		    unsigned int nr) PWB__INTERNAL;
/* Record window @w and return the count for the next window; s->reason
 * says why. Never outside [p->min, p->max] (a count in effect outside
 * them is treated as unmeasured). */
unsigned int pwb__auto_decide(struct pwb__auto_state *s,
			      const struct pwb__auto_params *p,
			      const struct pwb__auto_window *w) PWB__INTERNAL;

/* The driver: one tuner thread per bdi with the flag. */
/* What the tuner looks at, at one instant. */
struct pwb__auto_sample {
	uint64_t t;		/* cfg.clock */
	uint64_t bytes;		/* bytes written since open */
	bool backlog;		/* dirty or in-flight pages */
	unsigned long gen;	/* reshard_gen */
};

struct pwb__autotune {
	struct pwb__auto_params params;	/* set at open, then read-only */
	struct pwb__auto_sample first;	/* taken at open, before the
					 * thread: where its first window
					 * starts (read-only) */
	uint64_t interval_ns;		/* window length, cfg.clock ns */
	pthread_t thread;		/* open/close only */
	bool started;			/* open/close only */
	pthread_mutex_t lock;		/* stop, with cond */
	pthread_cond_t cond;		/* with lock: stop was set */
	bool stop;			/* lock */
	/* bdi->reshard_lock: */
	struct pwb__auto_state st;
	bool user;			/* a user count holds: paused */
	bool reset;			/* restart the search (resumed) */
	/* uatomic, for pwb_bdi_stats: */
	uint64_t nr, reason, steps, windows, best_bw, best_nr;
	uint64_t ticks;			/* uatomic: windows ended, idle or not
					 * (tests wait on it) */
};

/* Validate the auto_* fields of @cfg (any flags); 0 or -EINVAL + message. */
int pwb__autotune_check(const struct pwb_bdi_config *cfg) PWB__INTERNAL;
/* The count a bdi with the flag starts from, and resumes from: nr_wb_ctx,
 * or if that is 0 the static pick moved into the bounds. */
unsigned int pwb__autotune_start_nr(const struct pwb_bdi *bdi) PWB__INTERNAL;
/* Start the tuner if cfg.flags asks for it (last step of open). */
int pwb__autotune_start(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Stop and join the tuner (first step of close); a no-op without one. */
void pwb__autotune_stop(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_bdi_set_nr_wb_ctx(@nr) by the user: pause (@nr != 0) or resume
 * tuning. Caller holds reshard_lock. */
void pwb__autotune_user_locked(struct pwb_bdi *bdi,
			       unsigned int nr) PWB__INTERNAL;
/* Fill the auto_* fields of @st. */
void pwb__autotune_stats(struct pwb_bdi *bdi,
			 struct pwb_stats *st) PWB__INTERNAL;

#endif /* PWB_AUTOTUNE_H */
