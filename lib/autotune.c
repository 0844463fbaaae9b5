// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * autotune.c - automatic parallelism: choose nr_wb_ctx by measurement
 *
 * The kernel series found that the right number of writeback contexts
 * depends on the device: throughput peaked at 6 contexts on its SSD and
 * fell beyond, and a hard disk lost 15% with any parallelism. A bdi opened
 * with PWB_BDI_AUTO_WB_CTX finds the count by hill climbing over live
 * re-sharding:
 *
 *   tuner thread            decision (pure)              reshard.c
 *   every window: bytes --> pwb__auto_decide(): record -> reshard_locked(n)
 *   written, backlog        bw[nr], pick the next count    if n changed
 *
 * The decision is a function of its inputs and its state alone (no clock,
 * lock or thread), so tests drive it with synthetic bandwidth curves. The
 * driver owns the clock (cfg.clock) and the locking: it decides and
 * re-shards under reshard_lock, which also serialises it with the user's
 * pwb_bdi_set_nr_wb_ctx() (here: a count set by hand pauses the tuner)
 * and pwb_bdi_set_policy().
 */
#include "base.h"
#include "autotune.h"
#include "bdi.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AUTO_TOL_PCT 5
#define AUTO_REPROBE_WINDOWS 30
#define AUTO_MIN_PAGES 64
#define AUTO_DEFAULT_INTERVAL_MS 200
#define AUTO_MIN_INTERVAL_MS 10
#define AUTO_MAX_INTERVAL_MS 600000
/* How often the tuner looks at an injected clock (real time). */
#define AUTO_POLL_NS (5 * PWB__NSEC_PER_MSEC)

PWB_API const char *pwb_auto_reason_str(unsigned int reason)
{
	static const char *const names[] = {
		[PWB_AUTO_OFF] = "off",
		[PWB_AUTO_START] = "start",
		[PWB_AUTO_IDLE] = "idle",
		[PWB_AUTO_PROBE_UP] = "probe-up",
		[PWB_AUTO_PROBE_DOWN] = "probe-down",
		[PWB_AUTO_SETTLED] = "settled",
		[PWB_AUTO_REPROBE] = "reprobe",
		[PWB_AUTO_USER] = "user",
		[PWB_AUTO_RESET] = "reset",
		[PWB_AUTO_FAILED] = "failed",
	};

	if (reason >= sizeof(names) / sizeof(names[0]) || !names[reason])
		return "unknown";
	return names[reason];
}

/* ---------------------------------------------------------------------- */
/* The decision                                                           */

static bool measured(const struct pwb__auto_state *s, unsigned int n)
{
	return s->mark[n] == s->round;
}

/*
 * The fastest count of this round, where a count with more contexts must
 * be more than tol_pct faster than every count with fewer to win: the
 * fewest contexts whose bandwidth is within tol_pct of the maximum. Fewer
 * contexts cost fewer threads, and noise must not make the choice.
 */
static unsigned int pick_best(const struct pwb__auto_state *s,
			      const struct pwb__auto_params *p)
{
	uint64_t top = 0;
	unsigned int n;

	for (n = p->min; n <= p->max; n++)
		if (measured(s, n) && s->bw[n] > top)
			top = s->bw[n];
	for (n = p->min; n <= p->max; n++)
		if (measured(s, n) &&
		    s->bw[n] * (100 + p->tol_pct) >= top * 100)
			return n;
	return 0;
}

/* The next unmeasured count on side @dir of s->best, or 0 if that side is
 * done (best's neighbour there is measured, or best is at the bound). */
static unsigned int candidate(const struct pwb__auto_state *s,
			      const struct pwb__auto_params *p, int dir)
{
	unsigned int b = s->best, n;

	if (dir > 0) {
		if (b >= p->max)
			return 0;
		for (n = b + 1; n <= p->max && !measured(s, n); n++)
			;
		if (n > p->max)	/* nothing known beyond: double */
			return s->local ? b + 1 : PWB__MIN(p->max, 2 * b);
		return n > b + 1 ? b + (n - b) / 2 : 0;
	}
	if (b <= p->min)
		return 0;
	for (n = b - 1; n >= p->min && !measured(s, n); n--)
		;
	if (n < p->min)	/* nothing known below: halve */
		return s->local ? b - 1 : PWB__MAX(p->min, b / 2);
	return n < b - 1 ? b - (b - n) / 2 : 0;
}

static void new_round(struct pwb__auto_state *s, bool local)
{
	s->round++;
	s->settled = false;
	s->held = 0;
	s->local = local;
}

void pwb__auto_init(struct pwb__auto_state *s,
		    const struct pwb__auto_params *p, unsigned int nr)
{
	memset(s, 0, sizeof(*s));
	new_round(s, false);
	s->best = PWB__MIN(PWB__MAX(nr, p->min), p->max);
	s->dir = s->best < p->max ? 1 : -1;
	s->reason = PWB_AUTO_START;
}

/* Seek from s->best: the preferred side first, then the other; settle on
 * best if both are done. */
static unsigned int search(struct pwb__auto_state *s,
			   const struct pwb__auto_params *p,
			   enum pwb_auto_reason probe_reason)
{
	unsigned int next = candidate(s, p, s->dir);

	if (!next) {
		s->dir = -s->dir;
		next = candidate(s, p, s->dir);
	}
	if (!next) {
		s->settled = true;
		s->held = 0;
		s->reason = PWB_AUTO_SETTLED;
		return s->best;
	}
	if (probe_reason == PWB_AUTO_REPROBE)
		s->reason = PWB_AUTO_REPROBE;
	else
		s->reason = next > s->best ? PWB_AUTO_PROBE_UP
					   : PWB_AUTO_PROBE_DOWN;
	return next;
}

unsigned int pwb__auto_decide(struct pwb__auto_state *s,
			      const struct pwb__auto_params *p,
			      const struct pwb__auto_window *w)
{
	unsigned int n = w->nr, prev = s->best;
	uint64_t bw;

	if (!w->busy || !w->ns || w->bytes < p->min_bytes || n < p->min ||
	    n > p->max) {
		s->reason = PWB_AUTO_IDLE;
		return PWB__MIN(PWB__MAX(n, p->min), p->max);
	}
	bw = (uint64_t)((unsigned __int128)w->bytes * PWB__NSEC_PER_SEC /
			w->ns);
	/* A count measured again in the same round: average, against noise. */
	s->bw[n] = measured(s, n) ? s->bw[n] / 2 + bw / 2 : bw;
	s->mark[n] = s->round;

	if (s->settled) {
		/* Held: no move on old figures of other counts, however the
		 * held one drifts, until the re-probe measures them anew. */
		if (++s->held < p->reprobe_windows) {
			s->reason = PWB_AUTO_SETTLED;
			return s->best;
		}
		/* Re-check the neighbours of the held count, one step. */
		new_round(s, true);
		s->mark[s->best] = s->round;
		return search(s, p, PWB_AUTO_REPROBE);
	}
	s->best = pick_best(s, p);
	/* Go on the way that helped; turn away from one that did not. */
	if (s->best != prev && s->best == n)
		s->dir = n > prev ? 1 : -1;
	else if (n != s->best)
		s->dir = n > s->best ? -1 : 1;
	return search(s, p, PWB_AUTO_PROBE_UP);
}

/* ---------------------------------------------------------------------- */
/* The driver                                                             */

int pwb__autotune_check(const struct pwb_bdi_config *cfg)
{
	unsigned int lo = cfg->auto_min_wb_ctx ? cfg->auto_min_wb_ctx : 1;
	unsigned int hi = cfg->auto_max_wb_ctx;

	if (cfg->auto_min_wb_ctx > PWB_MAX_WB_CTX ||
	    cfg->auto_max_wb_ctx > PWB_MAX_WB_CTX)
		return pwb__err(-EINVAL, "auto_%s_wb_ctx %u is above the limit "
					 "%u",
				cfg->auto_min_wb_ctx > PWB_MAX_WB_CTX ? "min"
								      : "max",
				PWB__MAX(cfg->auto_min_wb_ctx,
					 cfg->auto_max_wb_ctx),
				PWB_MAX_WB_CTX);
	if (hi && hi < lo)
		return pwb__err(-EINVAL, "auto_max_wb_ctx %u is below "
					 "auto_min_wb_ctx %u",
				hi, lo);
	if (cfg->auto_interval_ms &&
	    (cfg->auto_interval_ms < AUTO_MIN_INTERVAL_MS ||
	     cfg->auto_interval_ms > AUTO_MAX_INTERVAL_MS))
		return pwb__err(-EINVAL, "auto_interval_ms %u is outside "
					 "%u..%u",
				cfg->auto_interval_ms, AUTO_MIN_INTERVAL_MS,
				AUTO_MAX_INTERVAL_MS);
	if (!hi)
		hi = PWB__MAX(lo, (unsigned int)PWB_AUTO_MAX_WB_CTX);
	if ((cfg->flags & PWB_BDI_AUTO_WB_CTX) && cfg->nr_wb_ctx &&
	    (cfg->nr_wb_ctx < lo || cfg->nr_wb_ctx > hi))
		return pwb__err(-EINVAL, "nr_wb_ctx %u is outside the tuner's "
					 "bounds %u..%u",
				cfg->nr_wb_ctx, lo, hi);
	return 0;
}

static void auto_params(const struct pwb_bdi_config *cfg,
			struct pwb__auto_params *p, unsigned int page_size)
{
	p->min = cfg->auto_min_wb_ctx ? cfg->auto_min_wb_ctx : 1;
	p->max = cfg->auto_max_wb_ctx
			 ? cfg->auto_max_wb_ctx
			 : PWB__MAX(p->min, (unsigned int)PWB_AUTO_MAX_WB_CTX);
	p->tol_pct = AUTO_TOL_PCT;
	p->reprobe_windows = AUTO_REPROBE_WINDOWS;
	p->min_bytes = (uint64_t)AUTO_MIN_PAGES * page_size;
}

unsigned int pwb__autotune_start_nr(const struct pwb_bdi *bdi)
{
	struct pwb__auto_params p;

	if (bdi->cfg.nr_wb_ctx)	/* within the bounds: checked at open */
		return bdi->cfg.nr_wb_ctx;
	auto_params(&bdi->cfg, &p, pwb__page_size(bdi));
	return PWB__MIN(PWB__MAX(pwb__auto_nr_wb_ctx(bdi), p.min), p.max);
}

static void take_sample(struct pwb_bdi *bdi, struct pwb__auto_sample *s)
{
	struct pwb_stats st;

	s->gen = pwb__aread(&bdi->reshard_gen);
	pwb__bdi_wb_counters(bdi, &st);
	s->t = pwb__now(bdi);
	s->bytes = st.bytes_written;
	s->backlog = st.dirty_pages || st.writeback_pages;
}

static void publish(struct pwb__autotune *at, unsigned int nr)
{
	const struct pwb__auto_state *s = &at->st;
	bool known = s->best && s->mark[s->best] == s->round;

	pwb__aset(&at->nr, nr);
	pwb__aset(&at->reason, (uint64_t)s->reason);
	pwb__aset(&at->best_nr, known ? s->best : 0);
	pwb__aset(&at->best_bw, known ? s->bw[s->best] : 0);
}

/* One finished window from @s0 to @s1. Caller holds reshard_lock. */
static void window_locked(struct pwb_bdi *bdi,
			  const struct pwb__auto_sample *s0,
			  const struct pwb__auto_sample *s1)
{
	struct pwb__autotune *at = bdi->autotune;
	unsigned int nr = bdi->ctxs->nr, next;
	struct pwb__auto_window w;
	int ret;

	pwb__lockdep_assert_held(&bdi->reshard_lock);

	if (at->user) {
		at->st.reason = PWB_AUTO_USER;
		publish(at, nr);
		return;
	}
	/* Someone else re-sharded (a policy switch), or tuning resumed: what
	 * was measured no longer describes this bdi. */
	if (at->reset || pwb__aread(&bdi->reshard_gen) != s0->gen) {
		at->reset = false;
		pwb__auto_init(&at->st, &at->params, nr);
		at->st.reason = PWB_AUTO_RESET;
		publish(at, nr);
		return;
	}
	w.nr = nr;
	w.bytes = s1->bytes - s0->bytes;
	w.ns = s1->t - s0->t;
	w.busy = s0->backlog && s1->backlog;
	next = pwb__auto_decide(&at->st, &at->params, &w);
	if (at->st.reason != PWB_AUTO_IDLE)
		uatomic_inc(&at->windows);
	if (next != nr) {
		ret = pwb__reshard_locked(bdi, next);
		if (ret) {
			at->st.reason = PWB_AUTO_FAILED;
			next = nr;
		} else {
			uatomic_inc(&at->steps);
		}
	}
	publish(at, next);
}

/* Sleep until stopped or for about @ns of real time; true if stopped. */
static bool tuner_wait(struct pwb__autotune *at, uint64_t ns)
{
	struct timespec ts;
	uint64_t t = pwb__clock_monotonic(NULL) + ns;
	bool stop;

	ts.tv_sec = (time_t)(t / PWB__NSEC_PER_SEC);
	ts.tv_nsec = (long)(t % PWB__NSEC_PER_SEC);
	pthread_mutex_lock(&at->lock);
	if (!at->stop)
		pthread_cond_timedwait(&at->cond, &at->lock, &ts);
	stop = at->stop;
	pthread_mutex_unlock(&at->lock);
	return stop;
}

static void *tuner_main(void *arg)
{
	struct pwb_bdi *bdi = arg;
	struct pwb__autotune *at = bdi->autotune;
	bool real = bdi->cfg.clock == pwb__clock_monotonic;
	struct pwb__auto_sample s0 = at->first, s1;

	for (;;) {
		uint64_t now = pwb__now(bdi), left;

		left = now - s0.t < at->interval_ns
			       ? at->interval_ns - (now - s0.t)
			       : 0;
		/* An injected clock has no relation to real time: look at
		 * it often, and act only when it has moved a window on. */
		if (left && tuner_wait(at, real ? left : AUTO_POLL_NS))
			break;
		if (left)
			continue;
		take_sample(bdi, &s1);
		pthread_mutex_lock(&bdi->reshard_lock);
		window_locked(bdi, &s0, &s1);
		pthread_mutex_unlock(&bdi->reshard_lock);
		/* The re-shard's own time belongs to no window. The next one
		 * starts before ticks says this one ended. */
		take_sample(bdi, &s0);
		uatomic_inc(&at->ticks);
		if (tuner_wait(at, 0))	/* only looks at stop */
			break;
	}
	return NULL;
}

int pwb__autotune_start(struct pwb_bdi *bdi)
{
	struct pwb__autotune *at;
	pthread_condattr_t attr;
	int ret;

	if (!(bdi->cfg.flags & PWB_BDI_AUTO_WB_CTX))
		return 0;
	at = calloc(1, sizeof(*at));
	if (!at)
		return pwb__err(-ENOMEM, "out of memory");
	auto_params(&bdi->cfg, &at->params, pwb__page_size(bdi));
	at->interval_ns = (uint64_t)(bdi->cfg.auto_interval_ms
					     ? bdi->cfg.auto_interval_ms
					     : AUTO_DEFAULT_INTERVAL_MS) *
			  PWB__NSEC_PER_MSEC;
	pwb__auto_init(&at->st, &at->params, bdi->ctxs->nr);
	publish(at, bdi->ctxs->nr);
	pwb__mutex_init(&at->lock, PWB__LOCK_AUTOTUNE);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&at->cond, &attr);
	pthread_condattr_destroy(&attr);
	/* The first window starts at open, not when the thread first
	 * runs: a caller that moves the clock on right after open (a test's
	 * injected clock) has moved it within that window. */
	take_sample(bdi, &at->first);
	bdi->autotune = at;
	ret = pthread_create(&at->thread, NULL, tuner_main, bdi);
	if (ret) {
		bdi->autotune = NULL;
		pthread_cond_destroy(&at->cond);
		pthread_mutex_destroy(&at->lock);
		free(at);
		return pwb__err(-ret, "cannot start the tuner thread: %s",
				strerror(ret));
	}
	at->started = true;
	return 0;
}

void pwb__autotune_stop(struct pwb_bdi *bdi)
{
	struct pwb__autotune *at = bdi->autotune;

	if (!at)
		return;
	pthread_mutex_lock(&at->lock);
	at->stop = true;
	pthread_cond_signal(&at->cond);
	pthread_mutex_unlock(&at->lock);
	pthread_join(at->thread, NULL);
	bdi->autotune = NULL;
	pthread_cond_destroy(&at->cond);
	pthread_mutex_destroy(&at->lock);
	free(at);
}

void pwb__autotune_user_locked(struct pwb_bdi *bdi, unsigned int nr)
{
	struct pwb__autotune *at = bdi->autotune;

	pwb__lockdep_assert_held(&bdi->reshard_lock);

	if (!at)
		return;
	at->user = nr != 0;
	at->reset = !nr;
	pwb__aset(&at->reason, nr ? (uint64_t)PWB_AUTO_USER
				  : (uint64_t)PWB_AUTO_RESET);
}

PWB_API int pwb_bdi_set_nr_wb_ctx(struct pwb_bdi *bdi, unsigned int nr)
{
	unsigned int want = nr;
	int ret = 0;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_set_nr_wb_ctx: NULL bdi");
	if (nr > PWB_MAX_WB_CTX)
		return pwb__err(-EINVAL, "nr_wb_ctx %u is above the limit %u",
				nr, PWB_MAX_WB_CTX);
	ret = pwb__no_flusher("pwb_bdi_set_nr_wb_ctx");
	if (ret)
		return ret;
	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_bdi_set_nr_wb_ctx"))
		return -ESHUTDOWN;
	if (!nr)
		nr = bdi->autotune ? pwb__autotune_start_nr(bdi)
				   : pwb__auto_nr_wb_ctx(bdi);

	pthread_mutex_lock(&bdi->reshard_lock);
	/* Under the lock the tuner decides under: the caller's count wins
	 * over any decision the tuner makes after this. */
	pwb__autotune_user_locked(bdi, want);
	ret = pwb__reshard_locked(bdi, nr);
	pthread_mutex_unlock(&bdi->reshard_lock);
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return ret;
}

void pwb__autotune_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	struct pwb__autotune *at = bdi->autotune;

	if (!at)
		return;
	st->auto_nr_wb_ctx = pwb__aread(&at->nr);
	st->auto_reason = pwb__aread(&at->reason);
	st->auto_steps = pwb__aread(&at->steps);
	st->auto_windows = pwb__aread(&at->windows);
	st->auto_best_bw = pwb__aread(&at->best_bw);
	st->auto_best_nr_wb_ctx = pwb__aread(&at->best_nr);
}
