// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_autotune.c - automatic parallelism (PWB_BDI_AUTO_WB_CTX)
 *
 * The decision function is fed synthetic bandwidth curves: one that peaks
 * at 6 contexts (the kernel series' SSD), a flat one with noise, a falling
 * one (a hard disk), idle windows, a curve that changes under a settled
 * tuner. Then the real tuner thread runs on a real bdi with an injected
 * clock: the test advances the clock by a time that depends on the
 * current count, so the tuner sees a curve peaking at 3 while real pages
 * are written and re-sharded; every byte must reach the device.
 */
#include "pwb-internal.h"
#include "test-util.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PS 4096u

/* ---------------------------------------------------------------------- */
/* The decision function                                                  */

typedef double (*curve_fn)(unsigned int n);

/* The series' sweep: a rise to 6 contexts, a fall beyond. */
static double peak6(unsigned int n)
{
	static const double v[] = { 0, 100, 190, 270, 340, 400, 450, 380, 300 };

	return n <= 8 ? v[n] : 100;
}

/* A smooth peak at 6 whose neighbours are within 5% of it. */
static double smooth6(unsigned int n)
{
	double d = (double)n - 6;

	return 1000 - 30 * d * d;
}

static double flat(unsigned int n)
{
	(void)n;
	return 500;
}

/* A hard disk: each context more costs 15%. */
static double falling(unsigned int n)
{
	double v = 1000;

	while (n-- > 1)
		v *= 0.85;
	return v;
}

static double peak4(unsigned int n)
{
	static const double v[] = { 0, 100, 170, 230, 280, 250, 220, 200, 180 };

	return n <= 8 ? v[n] : 100;
}

struct sim {
	struct pwb__auto_params p;
	struct pwb__auto_state s;
	unsigned int nr;		/* count in effect */
	uint64_t seed;
	unsigned int noise_pct;		/* +- this much, uniformly */
	unsigned int moves;
	unsigned int hist[PWB_MAX_WB_CTX + 1];	/* windows spent per count */
};

static void sim_init(struct sim *m, unsigned int min, unsigned int max,
		     unsigned int start, unsigned int noise_pct)
{
	memset(m, 0, sizeof(*m));
	m->p.min = min;
	m->p.max = max;
	m->p.tol_pct = 5;
	m->p.reprobe_windows = 30;
	m->p.min_bytes = 64 * PS;
	m->nr = start;
	m->seed = 0x5eed;
	m->noise_pct = noise_pct;
	pwb__auto_init(&m->s, &m->p, start);
	ck_assert_int_eq(m->s.reason, PWB_AUTO_START);
}

/* One busy 100 ms window at the curve's bandwidth (MB/s), with noise. */
static void sim_step(struct sim *m, curve_fn f)
{
	double bw = f(m->nr) * 1e6, noise = 0;
	struct pwb__auto_window w;
	unsigned int next;

	if (m->noise_pct)
		noise = ((double)(tu_rand(&m->seed) % 2001) / 1000.0 - 1.0) *
			m->noise_pct / 100.0;
	w.nr = m->nr;
	w.ns = 100 * PWB__NSEC_PER_MSEC;
	w.bytes = (uint64_t)(bw * (1 + noise) / 10);
	w.busy = true;
	m->hist[m->nr]++;
	next = pwb__auto_decide(&m->s, &m->p, &w);
	ck_assert_uint_ge(next, m->p.min);
	ck_assert_uint_le(next, m->p.max);
	if (next != m->nr)
		m->moves++;
	m->nr = next;
}

static void sim_run(struct sim *m, curve_fn f, unsigned int windows)
{
	while (windows--)
		sim_step(m, f);
}

/* Windows until settled, at most @max. */
static unsigned int sim_settle(struct sim *m, curve_fn f, unsigned int max)
{
	unsigned int k;

	for (k = 1; k <= max; k++) {
		sim_step(m, f);
		if (m->s.reason == PWB_AUTO_SETTLED)
			return k;
	}
	return 0;
}

START_TEST(test_peak_at_6_is_found_from_every_start)
{
	unsigned int start;

	for (start = 1; start <= 8; start++) {
		struct sim m;
		unsigned int k;

		sim_init(&m, 1, 8, start, 0);
		k = sim_settle(&m, peak6, 20);
		ck_assert_msg(k > 0, "start %u: not settled in 20 windows",
			      start);
		ck_assert_msg(m.nr == 6, "start %u: settled on %u, not 6",
			      start, m.nr);
		/* It stays there until the re-probe. */
		sim_run(&m, peak6, 10);
		ck_assert_uint_eq(m.nr, 6);
		ck_assert_int_eq(m.s.reason, PWB_AUTO_SETTLED);
	}
}
END_TEST

START_TEST(test_smooth_or_noisy_peak_settles_near_6)
{
	unsigned int start, noise;

	for (noise = 0; noise <= 3; noise += 3) {
		for (start = 1; start <= 8; start++) {
			struct sim m;

			sim_init(&m, 1, 8, start, noise);
			ck_assert_uint_gt(sim_settle(&m, smooth6, 20), 0);
			/* Within the 5% tolerance of the top: 5, 6 or 7. */
			ck_assert_msg(m.nr >= 5 && m.nr <= 7,
				      "start %u noise %u: settled on %u",
				      start, noise, m.nr);
			ck_assert(smooth6(m.nr) >= 0.9 * smooth6(6));
		}
	}
	/* Sharp peak with 3% noise: still 6, nothing else is close. */
	for (start = 1; start <= 8; start++) {
		struct sim m;

		sim_init(&m, 1, 8, start, 3);
		ck_assert_uint_gt(sim_settle(&m, peak6, 20), 0);
		ck_assert_uint_eq(m.nr, 6);
	}
}
END_TEST

START_TEST(test_flat_curve_does_not_oscillate)
{
	unsigned int start;

	for (start = 1; start <= 8; start += 7) {
		struct sim m;
		unsigned int settled_on;

		sim_init(&m, 1, 8, start, 2);
		ck_assert_uint_gt(sim_settle(&m, flat, 20), 0);
		/* Nothing is 5% better than fewer contexts: the fewest. */
		settled_on = m.nr;
		ck_assert_uint_eq(settled_on, 1);
		m.moves = 0;
		memset(m.hist, 0, sizeof(m.hist));
		sim_run(&m, flat, 310);
		/* Ten re-probes in 310 windows, each out and back. */
		ck_assert_uint_le(m.moves, 20);
		ck_assert_uint_ge(m.hist[settled_on], 300);
		ck_assert_uint_eq(m.nr, settled_on);
	}
}
END_TEST

START_TEST(test_falling_curve_goes_down_to_1)
{
	struct sim m;

	sim_init(&m, 1, 8, 8, 2);
	ck_assert_uint_gt(sim_settle(&m, falling, 20), 0);
	ck_assert_uint_eq(m.nr, 1);

	/* From 1, one look at 2 and back. */
	sim_init(&m, 1, 8, 1, 2);
	ck_assert_uint_eq(sim_settle(&m, falling, 20), 2);
	ck_assert_uint_eq(m.nr, 1);
	ck_assert_uint_eq(m.moves, 2);
}
END_TEST

START_TEST(test_idle_windows_are_not_measured)
{
	struct pwb__auto_window w = { .nr = 4, .ns = 100000000,
				      .bytes = 1 << 30, .busy = false };
	struct pwb__auto_state before;
	struct sim m;

	sim_init(&m, 1, 8, 4, 0);
	before = m.s;
	/* No backlog at one end of the window. */
	ck_assert_uint_eq(pwb__auto_decide(&m.s, &m.p, &w), 4);
	ck_assert_int_eq(m.s.reason, PWB_AUTO_IDLE);
	/* Too few bytes. */
	w.busy = true;
	w.bytes = m.p.min_bytes - 1;
	ck_assert_uint_eq(pwb__auto_decide(&m.s, &m.p, &w), 4);
	ck_assert_int_eq(m.s.reason, PWB_AUTO_IDLE);
	/* A zero-length window. */
	w.bytes = 1 << 30;
	w.ns = 0;
	ck_assert_uint_eq(pwb__auto_decide(&m.s, &m.p, &w), 4);
	/* Nothing was recorded. */
	ck_assert_int_eq(memcmp(before.bw, m.s.bw, sizeof(before.bw)), 0);
	ck_assert_int_eq(memcmp(before.mark, m.s.mark, sizeof(before.mark)),
			 0);
	/* A busy one is, and the search moves. */
	w.ns = 100000000;
	ck_assert_uint_ne(pwb__auto_decide(&m.s, &m.p, &w), 4);
	ck_assert_int_eq(m.s.reason, PWB_AUTO_PROBE_UP);
	ck_assert_uint_gt(m.s.bw[4], 0);
}
END_TEST

/* The device changes under a settled tuner: the re-probe finds it. */
static bool switched;

static double changing(unsigned int n)
{
	return switched ? peak4(n) : falling(n);
}

START_TEST(test_reprobe_follows_a_changed_device)
{
	unsigned int k, reprobes = 0;
	struct sim m;

	switched = false;
	sim_init(&m, 1, 8, 1, 0);
	ck_assert_uint_gt(sim_settle(&m, changing, 20), 0);
	ck_assert_uint_eq(m.nr, 1);
	switched = true;
	/* Held for the re-probe interval: no move on old figures. */
	for (k = 0; k < m.p.reprobe_windows - 1; k++) {
		sim_step(&m, changing);
		ck_assert_uint_eq(m.nr, 1);
	}
	sim_step(&m, changing);
	ck_assert_int_eq(m.s.reason, PWB_AUTO_REPROBE);
	ck_assert_uint_eq(m.nr, 2);
	/* Then a step at a time up to the new peak. */
	for (k = 0; k < 12 && m.s.reason != PWB_AUTO_SETTLED; k++) {
		sim_step(&m, changing);
		reprobes += m.s.reason == PWB_AUTO_REPROBE;
	}
	ck_assert_int_eq(m.s.reason, PWB_AUTO_SETTLED);
	ck_assert_uint_eq(m.nr, 4);
	ck_assert_uint_eq(reprobes, 0);
	switched = false;
}
END_TEST

START_TEST(test_bounds_hold_for_any_curve)
{
	static const curve_fn curves[] = { peak6, smooth6, flat, falling,
					   peak4 };
	unsigned int c, lo, hi;

	for (c = 0; c < sizeof(curves) / sizeof(curves[0]); c++) {
		for (lo = 1; lo <= 4; lo++) {
			for (hi = lo; hi <= 8; hi += 2) {
				struct sim m;

				sim_init(&m, lo, hi, lo, 4);
				/* sim_step asserts the bounds. */
				sim_run(&m, curves[c], 100);
				if (lo == hi)
					ck_assert_uint_eq(m.moves, 0);
			}
		}
	}
}
END_TEST

START_TEST(test_reason_names)
{
	ck_assert_str_eq(pwb_auto_reason_str(PWB_AUTO_OFF), "off");
	ck_assert_str_eq(pwb_auto_reason_str(PWB_AUTO_SETTLED), "settled");
	ck_assert_str_eq(pwb_auto_reason_str(PWB_AUTO_PROBE_UP), "probe-up");
	ck_assert_str_eq(pwb_auto_reason_str(PWB_AUTO_FAILED), "failed");
	ck_assert_str_eq(pwb_auto_reason_str(PWB_AUTO_FAILED + 1), "unknown");
	ck_assert_str_eq(pwb_auto_reason_str(~0u), "unknown");
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Configuration                                                          */

static char *image;

static void setup(void)
{
	image = tu_image_create(64ull << 20);
}

static void teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

static int try_open(unsigned int nr, unsigned int flags, unsigned int lo,
		    unsigned int hi, unsigned int ms)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	int ret;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr;
	cfg.flags = flags;
	cfg.auto_min_wb_ctx = lo;
	cfg.auto_max_wb_ctx = hi;
	cfg.auto_interval_ms = ms;
	ret = pwb_bdi_open(image, &cfg, &bdi);
	if (!ret) {
		struct pwb_stats st;

		ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
		/* nr_wb_ctx = 0 turns the tuner on without the flag. */
		if ((flags & PWB_BDI_AUTO_WB_CTX) || !nr) {
			ck_assert_uint_eq(st.auto_nr_wb_ctx,
					  pwb_bdi_nr_wb_ctx(bdi));
			ck_assert_uint_ne(st.auto_reason, PWB_AUTO_OFF);
		} else {
			ck_assert_uint_eq(st.auto_reason, PWB_AUTO_OFF);
			ck_assert_uint_eq(st.auto_nr_wb_ctx, 0);
		}
		ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	} else {
		ck_assert_msg(strlen(pwb_errmsg()) > 0, "no message");
	}
	return ret;
}

START_TEST(test_bad_auto_config_is_rejected)
{
	const unsigned int A = PWB_BDI_AUTO_WB_CTX;

	ck_assert_int_eq(try_open(0, A, 0, 0, 0), 0);
	ck_assert_int_eq(try_open(0, 0, 0, 0, 0), 0);
	ck_assert_int_eq(try_open(3, A, 2, 4, 50), 0);
	ck_assert_int_eq(try_open(0, A, 12, 0, 0), 0);	/* max follows min */
	ck_assert_int_eq(try_open(0, A, 0, PWB_MAX_WB_CTX + 1, 0), -EINVAL);
	ck_assert_int_eq(try_open(0, A, PWB_MAX_WB_CTX + 1, 0, 0), -EINVAL);
	ck_assert_int_eq(try_open(0, A, 5, 4, 0), -EINVAL);
	ck_assert_int_eq(try_open(0, A, 0, 0, 9), -EINVAL);
	ck_assert_int_eq(try_open(0, A, 0, 0, 600001), -EINVAL);
	ck_assert_int_eq(try_open(6, A, 1, 4, 0), -EINVAL);
	ck_assert_int_eq(try_open(1, A, 2, 4, 0), -EINVAL);
	/* Checked without the flag too; nr_wb_ctx is free then. */
	ck_assert_int_eq(try_open(0, 0, 5, 4, 0), -EINVAL);
	ck_assert_int_eq(try_open(6, 0, 1, 4, 0), 0);
	ck_assert_int_eq(try_open(0, 0x80, 0, 0, 0), -EINVAL);
}
END_TEST

START_TEST(test_start_count_lies_within_bounds)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	unsigned int n;

	pwb_bdi_config_init(&cfg);
	cfg.flags = PWB_BDI_AUTO_WB_CTX;
	cfg.auto_min_wb_ctx = 3;
	cfg.auto_max_wb_ctx = 5;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	n = pwb_bdi_nr_wb_ctx(bdi);
	ck_assert_uint_ge(n, 3);
	ck_assert_uint_le(n, 5);
	/* 0 resumes from the same start. */
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, 0), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), n);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* The tuner on a real bdi, with an injected clock                        */

enum { NI = 8, PAGES = 256, D = 256 };

struct rig {
	struct tu_clock clk;
	struct pwb_bdi *bdi;
	struct tu_store st[NI];
	uint64_t cursor;
	uint32_t version;
};

/* Window length per count, in ms: the bandwidth (fixed bytes per window)
 * peaks at 3 contexts. */
static uint64_t window_ms(unsigned int n)
{
	static const uint64_t ms[] = { 0, 400, 250, 160, 220 };

	return ms[n];
}

static void rig_open(struct rig *r)
{
	struct pwb_bdi_config cfg;
	unsigned int i;

	memset(r, 0, sizeof(*r));
	tu_clock_set(&r->clk, 1000 * PWB__NSEC_PER_SEC);
	pwb_bdi_config_init(&cfg);
	cfg.flags = PWB_BDI_AUTO_WB_CTX;
	cfg.nr_wb_ctx = 1;
	/* One write in flight, as these tests were written for. */
	cfg.backend = "psync";
	cfg.auto_min_wb_ctx = 1;
	cfg.auto_max_wb_ctx = 4;
	cfg.auto_interval_ms = 100;
	cfg.clock = tu_clock_read;
	cfg.clock_arg = &r->clk;
	/* Only the test's explicit passes write. */
	cfg.dirty_background_bytes = 0;
	cfg.dirty_bytes = 0;
	cfg.dirty_writeback_ms = 0;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &r->bdi), 0);
	for (i = 0; i < NI; i++) {
		tu_store_init(&r->st[i], i, PS, PAGES,
			      (uint64_t)i * PAGES * PS);
		ck_assert_int_eq(tu_store_open(&r->st[i], r->bdi), 0);
	}
}

static void rig_close(struct rig *r)
{
	unsigned int i;

	ck_assert_int_eq(pwb_bdi_close(r->bdi), 0);
	for (i = 0; i < NI; i++)
		tu_store_destroy(&r->st[i]);
}

/* Dirty @n (at most NI * PAGES) distinct pages, scattered, with new
 * contents: a window's writeback then writes exactly @n pages. */
static void rig_dirty(struct rig *r, unsigned int n)
{
	r->version++;
	while (n--) {
		uint64_t c = r->cursor++ % (NI * PAGES);
		struct tu_store *s = &r->st[c % NI];
		uint64_t pg = (c / NI) * 7 % PAGES;

		tu_fill_page(s, pg, r->version);
		ck_assert_int_eq(pwb_mark_dirty(s->inode, pg * PS, PS), 0);
	}
}

/* Wait (real time, generously) until the tuner has ended one more
 * window than @ticks. Waiting for an event, not timing it. */
static void wait_tick(struct rig *r, uint64_t ticks)
{
	int i;

	for (i = 0; i < 20000; i++) {
		if (uatomic_read(&r->bdi->autotune->ticks) > ticks)
			return;
		usleep(1000);
	}
	ck_abort_msg("the tuner ended no window in 20 s");
}

/*
 * One window as the tuner will see it: the backlog dirtied last time is
 * written at the current count, new pages are dirtied (a backlog at the
 * window's end), and the clock moves by the count's window length.
 */
static void rig_window(struct rig *r)
{
	uint64_t ticks = uatomic_read(&r->bdi->autotune->ticks);
	unsigned int n = pwb_bdi_nr_wb_ctx(r->bdi);

	ck_assert_int_eq(pwb_bdi_writeback(r->bdi, PWB_WB_ALL, PWB_WB_WAIT),
			 0);
	rig_dirty(r, D);
	tu_clock_advance_ms(&r->clk, window_ms(n));
	wait_tick(r, ticks);
}

static void rig_settle(struct rig *r, struct pwb_stats *st)
{
	int k;

	for (k = 0; k < 40; k++) {
		rig_window(r);
		ck_assert_int_eq(pwb_bdi_stats(r->bdi, st), 0);
		ck_assert_uint_ge(st->auto_nr_wb_ctx, 1);
		ck_assert_uint_le(st->auto_nr_wb_ctx, 4);
		if (st->auto_reason == PWB_AUTO_SETTLED)
			return;
	}
	ck_abort_msg("not settled in 40 windows (reason %s)",
		     pwb_auto_reason_str((unsigned int)st->auto_reason));
}

START_TEST(test_tuner_finds_the_peak_and_loses_nothing)
{
	struct pwb_stats st;
	struct rig r;
	int k;

	rig_open(&r);
	rig_dirty(&r, D);
	rig_settle(&r, &st);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r.bdi), 3);
	ck_assert_uint_eq(st.auto_nr_wb_ctx, 3);
	ck_assert_uint_eq(st.auto_best_nr_wb_ctx, 3);
	/* 256 pages in 160 ms. */
	ck_assert_uint_eq(st.auto_best_bw, (uint64_t)D * PS * 1000 / 160);
	/* 1 -> 2 -> 4 -> 3 */
	ck_assert_uint_ge(st.auto_steps, 3);
	ck_assert_uint_ge(st.auto_windows, 4);

	/* Every page dirtied across those re-shards reaches the device. */
	ck_assert_int_eq(pwb_sync(r.bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, r.st, NI), 0);

	/* The user's count wins and holds. */
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(r.bdi, 2), 0);
	for (k = 0; k < 5; k++)
		rig_window(&r);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &st), 0);
	ck_assert_uint_eq(st.auto_reason, PWB_AUTO_USER);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r.bdi), 2);

	/* 0 resumes: a fresh search finds 3 again. */
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(r.bdi, 0), 0);
	rig_settle(&r, &st);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r.bdi), 3);

	ck_assert_int_eq(pwb_sync(r.bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, r.st, NI), 0);
	rig_close(&r);
}
END_TEST

/* A policy switch re-shards behind the tuner's back: it starts over. */
START_TEST(test_policy_switch_resets_the_search)
{
	struct pwb_stats st;
	struct rig r;
	uint64_t steps;

	rig_open(&r);
	rig_dirty(&r, D);
	rig_settle(&r, &st);
	steps = st.auto_steps;
	ck_assert_int_eq(pwb_bdi_set_policy(r.bdi, "least-loaded"), 0);
	rig_window(&r);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &st), 0);
	ck_assert_uint_eq(st.auto_reason, PWB_AUTO_RESET);
	ck_assert_uint_eq(st.auto_best_nr_wb_ctx, 0);
	rig_settle(&r, &st);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r.bdi), 3);
	ck_assert_uint_gt(st.auto_steps, steps);
	ck_assert_int_eq(pwb_sync(r.bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, r.st, NI), 0);
	rig_close(&r);
}
END_TEST

/* An idle bdi is not tuned, however much time passes. */
START_TEST(test_idle_bdi_is_not_tuned)
{
	struct pwb_stats st;
	struct rig r;
	int k;

	rig_open(&r);
	for (k = 0; k < 10; k++) {
		uint64_t ticks = uatomic_read(&r.bdi->autotune->ticks);

		tu_clock_advance_ms(&r.clk, 1000);
		wait_tick(&r, ticks);
	}
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &st), 0);
	ck_assert_uint_eq(st.auto_reason, PWB_AUTO_IDLE);
	ck_assert_uint_eq(st.auto_steps, 0);
	ck_assert_uint_eq(st.auto_windows, 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r.bdi), 1);
	rig_close(&r);
}
END_TEST

/* Users re-shard while the tuner does: serialised, nothing lost. */
struct racer {
	struct pwb_bdi *bdi;
	volatile int stop;
	int err;
};

static void *user_resharder(void *arg)
{
	struct racer *x = arg;
	unsigned int k = 0;

	while (!__atomic_load_n(&x->stop, __ATOMIC_RELAXED)) {
		int ret = pwb_bdi_set_nr_wb_ctx(x->bdi, k++ % 2 ? 0 : 4);

		if (ret && !x->err)
			x->err = ret;
		usleep(2000);
	}
	return NULL;
}

START_TEST(test_user_and_tuner_reshard_concurrently)
{
	struct racer x = { 0 };
	struct pwb_stats st;
	pthread_t t;
	struct rig r;
	int k;

	rig_open(&r);
	x.bdi = r.bdi;
	ck_assert_int_eq(pthread_create(&t, NULL, user_resharder, &x), 0);
	rig_dirty(&r, D);
	for (k = 0; k < 30; k++)
		rig_window(&r);
	__atomic_store_n(&x.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	ck_assert_int_eq(x.err, 0);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &st), 0);
	ck_assert_uint_ge(pwb_bdi_nr_wb_ctx(r.bdi), 1);
	ck_assert_uint_le(pwb_bdi_nr_wb_ctx(r.bdi), 4);
	ck_assert_int_eq(pwb_sync(r.bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, r.st, NI), 0);
	rig_close(&r);
}
END_TEST

static Suite *autotune_suite(void)
{
	Suite *s = suite_create("autotune");
	TCase *tc = tcase_create("decide");
	TCase *tr = tcase_create("tuner");

	tcase_add_test(tc, test_peak_at_6_is_found_from_every_start);
	tcase_add_test(tc, test_smooth_or_noisy_peak_settles_near_6);
	tcase_add_test(tc, test_flat_curve_does_not_oscillate);
	tcase_add_test(tc, test_falling_curve_goes_down_to_1);
	tcase_add_test(tc, test_idle_windows_are_not_measured);
	tcase_add_test(tc, test_reprobe_follows_a_changed_device);
	tcase_add_test(tc, test_bounds_hold_for_any_curve);
	tcase_add_test(tc, test_reason_names);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tr, setup, teardown);
	tcase_set_timeout(tr, 300);
	tcase_add_test(tr, test_bad_auto_config_is_rejected);
	tcase_add_test(tr, test_start_count_lies_within_bounds);
	tcase_add_test(tr, test_tuner_finds_the_peak_and_loses_nothing);
	tcase_add_test(tr, test_policy_switch_resets_the_search);
	tcase_add_test(tr, test_idle_bdi_is_not_tuned);
	tcase_add_test(tr, test_user_and_tuner_reshard_concurrently);
	suite_add_tcase(s, tr);
	return s;
}

int main(void)
{
	return tu_run_suite(autotune_suite(), true);
}
