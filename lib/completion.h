/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * completion.h - a counter a waiter sleeps on until work items
 * finish (completion.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_COMPLETION_H
#define PWB_COMPLETION_H

#include "base.h"

/* ---------------------------------------------------------------------- */
/* completion.c                                                           */

struct pwb__completion {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* with lock: pending reached 0 */
	unsigned int pending;	/* lock: work items still running */
	int err;		/* lock: first error a work item reported */
	uint64_t log_force_ns;	/* lock: the most time one work item's
				 * flusher spent in log_force (the items
				 * run side by side) */
};

void pwb__completion_init(struct pwb__completion *c,
			  unsigned int pending) PWB__INTERNAL;
void pwb__completion_destroy(struct pwb__completion *c) PWB__INTERNAL;
void pwb__completion_done(struct pwb__completion *c, int err) PWB__INTERNAL;
/* The same, for an item whose flusher spent @log_force_ns in log_force. */
void pwb__completion_done_ns(struct pwb__completion *c, int err,
			     uint64_t log_force_ns) PWB__INTERNAL;
/* Wait until pending reaches 0; return the first error. */
int pwb__completion_wait(struct pwb__completion *c) PWB__INTERNAL;

#endif /* PWB_COMPLETION_H */
