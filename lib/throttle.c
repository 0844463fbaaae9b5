// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * throttle.c - dirty throttling, the kernel's balance_dirty_pages() in spirit
 *
 * Three regions of the bdi's dirty + writeback pages:
 *
 *	0 ........ bg ........ setpoint ........ limit .........
 *	  free run  | background  | paused in      | waits until
 *	            | writeback   | proportion     | below limit
 *
 * bg is dirty_background_bytes, limit dirty_bytes, setpoint half way. A
 * dirtier is never asked to write pages itself (the kernel stopped doing that
 * in 2010: it seeks the disk to death); it sleeps instead. Between setpoint
 * and limit the sleep is the time the device needs, at the contexts'
 * measured bandwidth scaled down by how close dirty memory is to the limit,
 * to write what this thread dirtied since its last check; so writers settle
 * at the device's pace instead of stalling and bursting. Sleeps are at most
 * 200 ms each. dirty_exceeded is judged over all contexts together.
 */
#include "pwb-internal.h"

#include <time.h>

#define MAX_PAUSE_NS (200 * PWB__NSEC_PER_MSEC)
#define MIN_PAUSE_NS (1 * PWB__NSEC_PER_MSEC)

/* Pages this thread dirtied since its last balance check. */
static __thread uint64_t dirtied_since_balance;

void pwb__throttle_account(uint64_t pages)
{
	dirtied_since_balance += pages;
}

/* Dirty and writeback pages of the whole bdi, and its write bandwidth. */
static uint64_t bdi_dirty_state(struct pwb_bdi *bdi, uint64_t *bw)
{
	struct pwb__wb_ctx_array *arr;
	uint64_t sum = 0;
	unsigned int i;

	*bw = 0;
	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; i < arr->nr; i++) {
		struct pwb__wb_ctx *wb = arr->ctx[i];

		sum += pwb__aread(&wb->stats.dirty_pages) +
		       pwb__aread(&wb->stats.writeback_pages);
		*bw += pwb__aread(&wb->avg_write_bw);
	}
	pwb__rcu_read_unlock();
	return sum;
}

void pwb__kick_background(struct pwb_bdi *bdi)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i;

	if (pwb__aread(&bdi->bg_active) ||
	    uatomic_cmpxchg(&bdi->bg_active, 0, 1) != 0)
		return;
	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; i < arr->nr; i++)
		pwb__wb_kick_background(arr->ctx[i]);
	pwb__rcu_read_unlock();
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / PWB__NSEC_PER_SEC),
		.tv_nsec = (long)(ns % PWB__NSEC_PER_SEC),
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Decide the next pause for a dirtier. Returns 0 to go on, else the pause
 * in ns; *hard says dirty memory is at the limit.
 */
static uint64_t next_pause(struct pwb_bdi *bdi, uint64_t dirtied, bool *hard)
{
	uint64_t bg = bdi->bg_thresh_pages, limit = bdi->dirty_limit_pages;
	uint64_t bw, dirty = bdi_dirty_state(bdi, &bw), setpoint, rate, pause;

	*hard = false;
	if (bg && dirty > bg)
		pwb__kick_background(bdi);
	if (!limit)
		return 0;
	setpoint = bg + (limit - bg) / 2;
	if (dirty <= setpoint)
		return 0;
	if (!bg)
		pwb__kick_background(bdi);	/* no bg set: start it here */
	if (dirty >= limit) {
		*hard = true;
		return MAX_PAUSE_NS / 4;
	}
	/* Allowed rate: the bandwidth, scaled by the room left (1 at the
	 * set point, 0 at the limit). */
	bw = PWB__MAX(bw, 1ull << 20);
	rate = bw * (limit - dirty) / (limit - setpoint);
	rate = PWB__MAX(rate, 4096ull);
	pause = (PWB__MAX(dirtied, 1ull) << bdi->page_shift) *
		PWB__NSEC_PER_SEC / rate;
	return PWB__MIN(PWB__MAX(pause, MIN_PAUSE_NS), MAX_PAUSE_NS);
}

PWB_API int pwb_balance_dirty_nowait(struct pwb_bdi *bdi)
{
	bool hard;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_balance_dirty_nowait: NULL bdi");
	rcu_read_lock();
	if (pwb__bdi_dead_rcu(bdi)) {
		pwb__rcu_read_unlock();
		return pwb__bdi_dead_err("pwb_balance_dirty_nowait");
	}
	if (!next_pause(bdi, dirtied_since_balance, &hard)) {
		pwb__rcu_read_unlock();
		dirtied_since_balance = 0;
		return 0;
	}
	pwb__rcu_read_unlock();
	return pwb__err(-EAGAIN, "dirty memory is above the set point: "
				 "writeback started, try again later");
}

int pwb__balance_dirty(struct pwb_bdi *bdi)
{
	uint64_t start = pwb__clock_monotonic(NULL), slept = 0;
	uint64_t timeout = bdi->cfg.throttle_timeout_ms * PWB__NSEC_PER_MSEC;
	uint64_t dirtied = dirtied_since_balance;
	unsigned int events = 0;
	int ret = 0;

	for (;;) {
		bool hard;
		uint64_t pause = next_pause(bdi, dirtied, &hard);

		if (!pause)
			break;
		/* Close writes everything back itself and waits for us. */
		if (PWB__READ(bdi->closing)) {
			ret = pwb__err(-ESHUTDOWN, "the bdi is being closed");
			break;
		}
		if (timeout && hard && slept >= timeout) {
			ret = pwb__err(-ETIMEDOUT, "the device made no room "
						   "for dirty data in %u ms",
				       bdi->cfg.throttle_timeout_ms);
			break;
		}
		sleep_ns(pause);
		slept = pwb__clock_monotonic(NULL) - start;
		events++;
		/* Below the limit one proportional pause is the payment. */
		if (!hard)
			break;
	}
	dirtied_since_balance = 0;
	if (events) {
		uatomic_add(&bdi->throttle_ns, slept);
		uatomic_add(&bdi->throttle_events, events);
	}
	return ret;
}

int pwb__balance_dirty_rcu(struct pwb_bdi *bdi)
{
	bool hard;
	int ret;

	if (!next_pause(bdi, dirtied_since_balance, &hard)) {
		pwb__rcu_read_unlock();
		dirtied_since_balance = 0;
		return 0;
	}
	/* About to sleep: hold the bdi by reference instead of RCU. */
	ret = pwb__bdi_get(bdi, "pwb_mark_dirty");
	pwb__rcu_read_unlock();
	if (ret) {
		dirtied_since_balance = 0;
		return ret;
	}
	ret = pwb__balance_dirty(bdi);
	pwb__bdi_put(bdi);
	return ret;
}

PWB_API int pwb_balance_dirty(struct pwb_bdi *bdi)
{
	int ret;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_balance_dirty: NULL bdi");
	if (pwb__in_flusher())
		return pwb__err(-EDEADLK, "pwb_balance_dirty called from an "
					  "ops callback (a flusher thread)");
	ret = pwb__bdi_get(bdi, "pwb_balance_dirty");
	if (ret)
		return ret;
	ret = pwb__balance_dirty(bdi);
	pwb__bdi_put(bdi);
	return ret;
}
