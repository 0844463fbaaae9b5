// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pacing.c - the optional write-rate cap of background and periodic
 * writeback (a token bucket, like InnoDB's io_capacity or RocksDB's rate
 * limiter)
 *
 * One bucket per bdi, shared by its contexts. It fills at rate bytes/s up
 * to burst (a tenth of a second of the rate, at least one max_io_bytes
 * request). A SYNC_NONE pass charges each write after submitting it; a
 * charge may take the bucket below zero, and the flusher then sleeps until
 * it would be back at zero before its next write. Integrity sync (pwb_sync,
 * pwb_fsync, close) is never charged: durability is never paced. A flusher
 * sleeping here wakes early when work is queued on its context or when a
 * re-shard or policy switch asks the flushers to park, so neither waits
 * more than one sleep slice for it, whatever the rate (a 16 KiB/s cap in
 * debt by one 1 MiB request would otherwise hold a re-shard for a minute).
 */
#include "base.h"
#include "pacing.h"

#include <time.h>

void pwb__rate_init(struct pwb__rate_bucket *b, uint64_t rate,
		    uint64_t min_burst, uint64_t now)
{
	pwb__mutex_init(&b->lock, PWB__LOCK_RATE);
	b->rate = rate;
	b->burst = (int64_t)PWB__MIN(PWB__MAX(rate / 10, min_burst),
				     (uint64_t)INT64_MAX / 2);
	b->tokens = b->burst;
	b->stamp = now;
}

void pwb__rate_destroy(struct pwb__rate_bucket *b)
{
	pthread_mutex_destroy(&b->lock);
}

/* Add what @now - stamp earned, up to burst. Caller holds b->lock. */
static void refill_locked(struct pwb__rate_bucket *b, uint64_t now)
{
	unsigned __int128 earned;

	pwb__lockdep_assert_held(&b->lock);

	if (now <= b->stamp)
		return;
	earned = (unsigned __int128)b->rate * (now - b->stamp) /
		 PWB__NSEC_PER_SEC;
	b->stamp = now;
	if (earned >= (unsigned __int128)(b->burst - b->tokens))
		b->tokens = b->burst;
	else
		b->tokens += (int64_t)earned;
}

/* Time until the bucket is back at zero. Caller holds b->lock. */
static uint64_t debt_ns_locked(const struct pwb__rate_bucket *b)
{
	pwb__lockdep_assert_held(&b->lock);

	if (b->tokens >= 0)
		return 0;
	return (uint64_t)((unsigned __int128)(uint64_t)-b->tokens *
			  PWB__NSEC_PER_SEC / b->rate);
}

uint64_t pwb__rate_charge(struct pwb__rate_bucket *b, uint64_t bytes,
			  uint64_t now)
{
	uint64_t wait;

	if (!b->rate)
		return 0;
	pthread_mutex_lock(&b->lock);
	refill_locked(b, now);
	b->tokens -= (int64_t)PWB__MIN(bytes, (uint64_t)INT64_MAX / 4);
	/* A huge charge must not wrap: the debt is bounded. */
	if (b->tokens < INT64_MIN / 2)
		b->tokens = INT64_MIN / 2;
	wait = debt_ns_locked(b);
	pthread_mutex_unlock(&b->lock);
	return wait;
}

uint64_t pwb__rate_wait_ns(struct pwb__rate_bucket *b, uint64_t now)
{
	uint64_t wait;

	if (!b->rate)
		return 0;
	pthread_mutex_lock(&b->lock);
	refill_locked(b, now);
	wait = debt_ns_locked(b);
	pthread_mutex_unlock(&b->lock);
	return wait;
}
