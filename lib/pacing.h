/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pacing.h - the write-rate cap (pacing.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_PACING_H
#define PWB_PACING_H

#include "base.h"

struct pwb__wb_ctx;

/* pacing.c: The write-rate cap (pwb_bdi_config.rate_limit_bytes_per_sec). */
struct pwb__rate_bucket {
	pthread_mutex_t lock;
	uint64_t rate;		/* set at init, read-only: bytes/s; 0: no
				 * cap (lock never taken) */
	int64_t burst;		/* set at init, read-only: most tokens kept */
	int64_t tokens;		/* lock: bytes that may go now; < 0: owed */
	uint64_t stamp;		/* lock: clock ns of the last refill */
};

/* ---------------------------------------------------------------------- */
/* pacing.c                                                               */

/* struct pwb__rate_bucket: above struct pwb_bdi, which holds one. */
void pwb__rate_init(struct pwb__rate_bucket *b, uint64_t rate,
		    uint64_t min_burst, uint64_t now) PWB__INTERNAL;
void pwb__rate_destroy(struct pwb__rate_bucket *b) PWB__INTERNAL;
/* Charge @bytes just written at clock time @now; return how long the
 * writer should sleep before its next write (0: none). */
uint64_t pwb__rate_charge(struct pwb__rate_bucket *b, uint64_t bytes,
			  uint64_t now) PWB__INTERNAL;
/* How long until the bucket is out of debt at clock time @now. */
uint64_t pwb__rate_wait_ns(struct pwb__rate_bucket *b,
			   uint64_t now) PWB__INTERNAL;

#endif /* PWB_PACING_H */
