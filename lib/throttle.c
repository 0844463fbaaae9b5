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
 * and limit the sleep is the time the device needs to write what this
 * thread dirtied since it last paid, at its share of the bandwidth: the
 * sum of the contexts' measured bandwidths (moving averages) divided by the
 * number of threads dirtying now, scaled down linearly from 1 at the set
 * point to 0 at the limit. So N writers together go at the device's pace
 * near the set point instead of stalling and bursting. Sleeps shorter than
 * 1 ms are not taken but owed (the debt carries to the next call); sleeps
 * are at most 200 ms each. At the limit a dirtier waits, in sleeps of
 * about the time the device needs for the excess, until dirty memory is
 * below it. dirty_exceeded is judged over all contexts together.
 *
 * pwb__throttle_pause() is the decision alone, a pure function, so that
 * tests can check it without sleeping.
 */
#include "probes.h"
#include "base.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "throttle.h"
#include "domain.h"
#include "blocked.h"

#include <time.h>
#include <urcu/rculist.h>

#define MAX_PAUSE_NS PWB__THROTTLE_MAX_PAUSE_NS
#define MIN_PAUSE_NS PWB__THROTTLE_MIN_PAUSE_NS
/* Dirtiers are counted over windows of this length. */
#define DIRTIER_WINDOW_NS (200 * PWB__NSEC_PER_MSEC)

/*
 * What this thread owes: pages it dirtied since it last paid, and the
 * bdi and window in which it was last counted as a dirtier. A pause too
 * short to sleep (below MIN_PAUSE_NS: a page at device speed takes
 * microseconds) is not rounded up, which would hold every writer to one
 * call per millisecond; the debt is carried until it is worth a sleep.
 */
static __thread uint64_t dirtied_since_balance;
static __thread const struct pwb_bdi *counted_bdi;
static __thread uint64_t counted_window;
/* pwb__throttle_set_nowait(): pay no debt by sleeping. */
static PWB__TLS_FAST bool balance_nowait;

void pwb__throttle_set_nowait(bool nowait)
{
	balance_nowait = nowait;
}

void pwb__throttle_account(uint64_t pages)
{
	dirtied_since_balance += pages;
}

/* Dirty and writeback pages of the whole bdi, and its write bandwidth:
 * the sums over every context, so that dirty_exceeded is one decision
 * for the bdi, not one per context. */
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

		sum += pwb__wb_dirty_pages(wb) +
		       pwb__aread(&wb->stats.writeback_pages);
		*bw += pwb__aread(&wb->avg_write_bw);
	}
	pwb__rcu_read_unlock();
	return sum;
}

bool pwb__throttle_over_setpoint(struct pwb_bdi *bdi)
{
	uint64_t bg = pwb__aread(&bdi->bg_thresh_pages);
	uint64_t limit = pwb__aread(&bdi->dirty_limit_pages);
	uint64_t bw;

	return limit &&
	       bdi_dirty_state(bdi, &bw) > pwb__throttle_setpoint(bg, limit);
}

unsigned int pwb__throttle_dirtiers(struct pwb_bdi *bdi, uint64_t now)
{
	uint64_t window = now / DIRTIER_WINDOW_NS + 1;	/* never 0 */
	uint64_t seen = pwb__aread(&bdi->thr_window);
	uint64_t cur, prev;

	/* The first dirtier of a new window rolls the counts over. */
	if (seen != window &&
	    uatomic_cmpxchg(&bdi->thr_window, seen, window) == seen) {
		/* A window skipped entirely had no dirtiers. */
		prev = seen + 1 == window ? pwb__aread(&bdi->thr_cur) : 0;
		pwb__aset(&bdi->thr_prev, prev);
		pwb__aset(&bdi->thr_cur, 0);
	}
	if (counted_bdi != bdi || counted_window != window) {
		counted_bdi = bdi;
		counted_window = window;
		uatomic_inc(&bdi->thr_cur);
	}
	cur = pwb__aread(&bdi->thr_cur);
	prev = pwb__aread(&bdi->thr_prev);
	return (unsigned int)PWB__MAX(PWB__MAX(cur, prev), 1ull);
}

uint64_t pwb__throttle_pause(const struct pwb__throttle_state *s, bool *hard)
{
	uint64_t setpoint, room, rate, pause;

	*hard = false;
	if (!s->limit)
		return 0;
	setpoint = pwb__throttle_setpoint(s->bg, s->limit);
	if (s->dirty <= setpoint)
		return 0;
	/* Each of the nr dirtiers may go at its share of the bandwidth at
	 * the set point, less the closer dirty memory is to the limit. */
	rate = PWB__MAX(s->bw, 1ull << 20) / PWB__MAX(s->nr_dirtiers, 1u);
	if (s->dirty >= s->limit) {
		/* At the limit: wait about as long as the device needs to
		 * write what is over it, then look again. */
		*hard = true;
		room = (s->dirty - s->limit + 1) << s->page_shift;
		pause = room * PWB__NSEC_PER_SEC /
			PWB__MAX(s->bw, 1ull << 20);
		return PWB__MIN(PWB__MAX(pause, MIN_PAUSE_NS), MAX_PAUSE_NS);
	}
	room = s->limit - s->dirty;
	rate = rate * room / (s->limit - setpoint);
	rate = PWB__MAX(rate, 4096ull);
	pause = (s->dirtied << s->page_shift) * PWB__NSEC_PER_SEC / rate;
	return PWB__MIN(pause, MAX_PAUSE_NS);
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

/* Start background writeback on every member of @dom with pages to write
 * (pwb__domain_throttle(): the domain is over its background threshold). */
static void kick_members(struct pwb_domain *dom)
{
	struct pwb__dom_member *m;

	rcu_read_lock();
	cds_list_for_each_entry_rcu(m, &dom->members, node)
		if (pwb__bdi_dirty_pages_rcu(m->bdi))
			pwb__kick_background(m->bdi);
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
 * The cause a pause of a dirtier is counted under: PWB_BLOCK_RATE_CAP when
 * the bandwidth its length came from was a rate cap's, the tenant's (its
 * share of the device, which pwb__tenant_throttle_state() capped at its
 * rate, at least 7/8 of the cap) or the bdi's (writeback measured at no
 * more than an eighth over the bdi's cap: the cap, not the device, sets
 * the pace);
 * otherwise PWB_BLOCK_THROTTLE. The eighths: the measured bandwidth is a
 * moving average and hovers around a cap that binds.
 */
static unsigned int pause_cause(const struct pwb_bdi *bdi,
				const struct pwb_tenant *t,
				const struct pwb__throttle_state *s)
{
	uint64_t cap = t ? t->rate.rate : bdi->rate.rate;

	if (!cap)
		return PWB_BLOCK_THROTTLE;
	if (t ? s->bw >= cap - cap / 8 : s->bw <= cap + cap / 8)
		return PWB_BLOCK_RATE_CAP;
	return PWB_BLOCK_THROTTLE;
}

/*
 * next_pause() for a writer whose tenant asks for something (@what:
 * pwb__tenant_throttle_state()'s answer, not 0; @s: a copy of the state
 * it filled in). Out of line, and @s by value, so that next_pause() keeps
 * the registers of the common writer, whose tenant asks for nothing or
 * who has none: with &s passed to two calls, GCC held it in one more
 * callee-saved register for every writer.
 */
static __attribute__((noinline)) uint64_t
tenant_pause(struct pwb_bdi *bdi, unsigned int what,
	     struct pwb__throttle_state s, bool *hard)
{
	if (what & PWB__TENANT_KICK)
		pwb__kick_background(bdi);
	if (!(what & PWB__TENANT_PAUSE))
		return 0;
	return pwb__throttle_pause(&s, hard);
}

/* next_pause() for a writer of a bdi in a domain, above its share's set
 * point: the domain's state decides (domain.c). Out of line, as
 * tenant_pause(). */
static __attribute__((noinline)) uint64_t
domain_pause(struct pwb_bdi *bdi, struct pwb__throttle_state *s, bool *hard)
{
	unsigned int what = pwb__domain_throttle(bdi, s);

	if (what & PWB__DOMAIN_KICK)
		kick_members(bdi->dom->dom);
	if (!(what & PWB__DOMAIN_PAUSE))
		return 0;
	/* A throttled writer always has its flusher at work: the pause may
	 * come from the domain's state, not the bdi's own background
	 * threshold, which alone kicks in next_pause(). */
	pwb__kick_background(bdi);
	s->nr_dirtiers = pwb__throttle_dirtiers(bdi, pwb__now(bdi));
	return pwb__throttle_pause(s, hard);
}

/*
 * Decide the next pause for a dirtier that owes @dirtied pages. Returns 0
 * to go on, else the pause in ns (below MIN_PAUSE_NS: too short to sleep,
 * keep the debt); *hard says dirty memory is at the limit. With @cause,
 * *@cause gets the enum pwb_block_cause a sleep of that pause counts as.
 */
static uint64_t next_pause(struct pwb_bdi *bdi, struct pwb_tenant *t,
			   uint64_t dirtied, bool *hard, unsigned int *cause)
{
	uint64_t pause;
	struct pwb__throttle_state s = {
		.bg = pwb__aread(&bdi->bg_thresh_pages),
		.limit = pwb__aread(&bdi->dirty_limit_pages),
		.dirtied = dirtied,
		.page_shift = bdi->page_shift,
	};

	s.dirty = bdi_dirty_state(bdi, &s.bw);
	*hard = false;
	if (s.bg && s.dirty > s.bg)
		pwb__kick_background(bdi);
	/* A tenant's writers go by the tenant's own state (tenant.c). */
	if (caa_unlikely(t)) {
		unsigned int what = pwb__tenant_throttle_state(t, bdi, &s);

		if (!what)
			return 0;
		pause = tenant_pause(bdi, what, s, hard);
		goto out;
	}
	/* In a domain too: under its share's set point a writer runs. */
	if (!s.limit || s.dirty <= pwb__throttle_setpoint(s.bg, s.limit))
		return 0;
	if (caa_unlikely(bdi->dom)) {
		pause = domain_pause(bdi, &s, hard);
		goto out;
	}
	if (!s.bg)
		pwb__kick_background(bdi);	/* no bg set: start it here */
	s.nr_dirtiers = pwb__throttle_dirtiers(bdi, pwb__now(bdi));
	pause = pwb__throttle_pause(&s, hard);
out:
	if (pause && cause)
		*cause = pause_cause(bdi, t, &s);
	return pause;
}

/* Whether a dirtier would sleep now (-EAGAIN; background writeback is
 * started) or may go on (0). Caller is in a read-side section. */
static int balance_nowait_rcu(struct pwb_bdi *bdi)
{
	uint64_t pause;
	bool hard;

	pause = next_pause(bdi, NULL, dirtied_since_balance, &hard, NULL);
	if (!pause) {
		dirtied_since_balance = 0;
		return 0;
	}
	if (!hard && pause < MIN_PAUSE_NS)
		return 0;	/* the debt is kept for the next check */
	return -EAGAIN;
}

int pwb__balance_dirty_nowait(struct pwb_bdi *bdi)
{
	int ret;

	rcu_read_lock();
	ret = balance_nowait_rcu(bdi);
	pwb__rcu_read_unlock();
	return ret;
}

PWB_API int pwb_balance_dirty_nowait(struct pwb_bdi *bdi)
{
	int ret;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_balance_dirty_nowait: NULL bdi");
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_balance_dirty_nowait"))
		return -ESHUTDOWN;
	ret = balance_nowait_rcu(bdi);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	if (ret)
		return pwb__err(ret, "dirty memory is above the set point: "
				     "writeback started, try again later");
	return 0;
}

int pwb__balance_dirty(struct pwb_bdi *bdi, struct pwb_tenant *t)
{
	uint64_t start = pwb__clock_monotonic(NULL), slept = 0;
	uint64_t timeout = bdi->cfg.throttle_timeout_ms * PWB__NSEC_PER_MSEC;
	unsigned int events = 0;
	int ret = 0;

	for (;;) {
		bool hard;
		unsigned int cause = PWB_BLOCK_THROTTLE;
		uint64_t pause = next_pause(bdi, t, dirtied_since_balance,
					    &hard, &cause);
		uint64_t t_sleep;

		if (!pause)
			break;
		/* Close writes everything back itself and waits for us. */
		if (pwb__aread(&bdi->closing)) {
			ret = pwb__err(-ESHUTDOWN, "the bdi is being closed");
			break;
		}
		/* Not worth a sleep yet: keep the debt for a later call. */
		if (!hard && pause < MIN_PAUSE_NS && !events)
			return 0;
		if (timeout && hard && slept >= timeout) {
			ret = pwb__err(-ETIMEDOUT, "the device made no room "
						   "for dirty data in %u ms",
				       bdi->cfg.throttle_timeout_ms);
			break;
		}
		if (!hard && events)
			break;		/* paid at the limit already */
		t_sleep = pwb__now(bdi);
		sleep_ns(pause);
		/* The bdi's as a whole: the throttle judged every context. */
		pwb__hist_add(&bdi->blk, PWB_HIST_THROTTLE,
			      pwb__blocked_since(bdi, NULL, t, cause, t_sleep));
		{
			uint64_t now = pwb__clock_monotonic(NULL);
			struct pwb_event ev = {
				.type = PWB_EV_THROTTLE,
				.duration_ns = now - start - slept,
			};

			if (bdi->cfg.event)
				bdi->cfg.event(&ev, bdi->cfg.event_arg);
			PWB_PROBE2(throttle_sleep, ev.duration_ns, hard);
			slept = now - start;
		}
		events++;
		/* Below the limit one proportional pause is the payment. */
		if (!hard)
			break;
	}
	dirtied_since_balance = 0;
	if (events) {
		uatomic_add(&bdi->throttle_ns, slept);
		uatomic_add(&bdi->throttle_events, events);
		if (t)
			pwb__tenant_throttled(t, slept, events);
	}
	return ret;
}

int pwb__balance_dirty_rcu(struct pwb_bdi *bdi, struct pwb_tenant *t)
{
	bool hard;
	int ret;

	if (!next_pause(bdi, t, dirtied_since_balance, &hard, NULL)) {
		pwb__rcu_read_unlock();
		dirtied_since_balance = 0;
		return 0;
	}
	if (balance_nowait) {
		/* PWB_RW_NOWAIT: the debt waits for a call that may sleep. */
		pwb__rcu_read_unlock();
		return 0;
	}
	/* About to sleep: hold the bdi by reference instead of RCU. */
	ret = pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_mark_dirty");
	pwb__rcu_read_unlock();
	if (ret) {
		dirtied_since_balance = 0;
		return ret;
	}
	ret = pwb__balance_dirty(bdi, t);
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return ret;
}

PWB_API int pwb_balance_dirty(struct pwb_bdi *bdi)
{
	int ret;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_balance_dirty: NULL bdi");
	ret = pwb__no_flusher("pwb_balance_dirty");
	if (ret)
		return ret;
	ret = pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_balance_dirty");
	if (ret)
		return ret;
	ret = pwb__balance_dirty(bdi, NULL);
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return ret;
}
