// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_tenant.c - tenants: per-tenant throttling, writeback shared by
 * weight, rate caps (lib/tenant.c)
 *
 * White-box: the writeback cases queue one bounded pass on the bdi's only
 * context and wait for it, with the injected clock standing still, so
 * the order the flusher serves the tenants in is the only thing that
 * decides who writes what. The inodes' pages are one shared buffer at
 * their own offsets and the backend is "null": hundreds of MiB are
 * "written" in no time and no memory. The throttling cases run real
 * writer threads on a device slowed by the delay fault and compare what
 * each tenant's writers slept.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pwb-internal.h"
#include "test-util.h"

#define MIB (1ull << 20)
#define PS 4096u
#define SEC (1000ull * PWB__NSEC_PER_MSEC)
/* Device size: pages of every inode of a test fit at their offsets. */
#define DEV_PAGES (1ull << 20)
/* Each inode of a test owns this many pages of the device. */
#define INODE_PAGES (1ull << 17)
#define CHUNK_PAGES (PWB__TENANT_CHUNK_BYTES / PS)

static struct tu_clock clk;
static char page_buf[PS] __attribute__((aligned(4096)));

static int get_page(struct pwb_inode *inode, uint64_t index,
		    const void **data)
{
	(void)inode;
	(void)index;
	*data = page_buf;
	return 0;
}

static int map_page(struct pwb_inode *inode, uint64_t index, uint64_t *off)
{
	*off = (pwb_inode_ino(inode) * INODE_PAGES + index) * PS;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

struct env {
	char *img;
	struct pwb_bdi *bdi;
};

static void env_cfg(struct pwb_bdi_config *cfg)
{
	pwb_bdi_config_init(cfg);
	cfg->nr_wb_ctx = 1;
	cfg->backend = "null";
	cfg->dirty_writeback_ms = 0;	/* no periodic writeback */
	cfg->dirty_background_bytes = 0;	/* no background writeback */
	cfg->dirty_bytes = 0;
	cfg->clock = tu_clock_read;
	cfg->clock_arg = &clk;
}

static void env_open(struct env *e, const struct pwb_bdi_config *cfg)
{
	int rc;

	e->img = tu_image_create(DEV_PAGES * PS);
	rc = pwb_bdi_open(e->img, cfg, &e->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open: %s", pwb_errmsg());
}

static void env_close(struct env *e)
{
	ck_assert_int_eq(pwb_bdi_close(e->bdi), 0);
	tu_image_remove(e->img);
}

static struct pwb_inode *iopen(struct env *e, uint64_t ino,
			       struct pwb_tenant *t)
{
	struct pwb_inode *inode;

	ck_assert_int_eq(pwb_inode_open(e->bdi, ino, &ops, NULL, &inode), 0);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, t), 0);
	return inode;
}

static struct pwb_tenant *tenant(struct pwb_domain *dom, struct pwb_bdi *bdi,
				 unsigned int weight, uint64_t dirty_bytes,
				 uint64_t rate)
{
	struct pwb_tenant_config tc;
	struct pwb_tenant *t;

	pwb_tenant_config_init(&tc);
	tc.weight = weight;
	tc.dirty_bytes = dirty_bytes;
	tc.rate_limit_bytes_per_sec = rate;
	ck_assert_int_eq(pwb_tenant_create(dom, bdi, &tc, &t), 0);
	return t;
}

/* The end of a test of two tenants @a and @b, an inode in each: close
 * the inodes, destroy the tenants (each call must succeed), close @e. */
static void pair_close(struct env *e, struct pwb_tenant *a,
		       struct pwb_tenant *b, struct pwb_inode *ia,
		       struct pwb_inode *ib)
{
	ck_assert_int_eq(pwb_inode_close(ia), 0);
	ck_assert_int_eq(pwb_inode_close(ib), 0);
	ck_assert_int_eq(pwb_tenant_destroy(a), 0);
	ck_assert_int_eq(pwb_tenant_destroy(b), 0);
	env_close(e);
}

static struct pwb_tenant_stats tstats(struct pwb_tenant *t)
{
	struct pwb_tenant_stats st;

	ck_assert_int_eq(pwb_tenant_stats(t, &st), 0);
	return st;
}

static void dirty(struct pwb_inode *inode, uint64_t first, uint64_t n)
{
	ck_assert_int_eq(pwb_mark_dirty(inode, first * PS, n * PS), 0);
}

/* One SYNC_NONE pass of at most @pages on the bdi's context; waits. */
static void run_pass(struct env *e, int64_t pages)
{
	struct pwb__completion done;
	struct pwb__wb_work w = {
		.sync_mode = PWB__SYNC_NONE,
		.reason = PWB_WB_ALL,
		.nr_pages = pages,
		.done = &done,
	};
	struct pwb__wb_ctx *wb;

	pwb__completion_init(&done, 1);
	rcu_read_lock();
	wb = PWB__RCU_DEREF(e->bdi->ctxs)->ctx[0];
	pwb__wb_queue_work(wb, &w);
	pwb__rcu_read_unlock();
	pwb__completion_wait(&done);
	pwb__completion_destroy(&done);
}

static void assert_ratio(uint64_t a, uint64_t b, double want)
{
	double r = b ? (double)a / (double)b : 1e9;

	ck_assert_msg(r >= want * 0.9 && r <= want * 1.1,
		      "ratio %" PRIu64 " : %" PRIu64 " = %.3f, want %.1f "
		      "+-10%%", a, b, r, want);
}

START_TEST(bad_inputs)
{
	struct pwb_tenant_config tc;
	struct pwb_tenant_stats st;
	struct pwb_bdi_config cfg;
	struct pwb_domain *dom;
	struct pwb_tenant *t, *u;
	struct pwb_inode *inode;
	struct env e, f;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	env_open(&f, &cfg);
	ck_assert_int_eq(pwb_domain_create(NULL, &dom), 0);

	pwb_tenant_config_init(&tc);
	ck_assert_uint_eq(tc.weight, 100);
	ck_assert_uint_eq(tc.dirty_bytes, 0);
	ck_assert_uint_eq(tc.rate_limit_bytes_per_sec, 0);
	/* Weights 1 .. 10000. */
	tc.weight = 0;
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, &tc, &t), -EINVAL);
	tc.weight = 10001;
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, &tc, &t), -EINVAL);
	tc.weight = 10000;
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, &tc, &t), 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
	tc.weight = 1;
	/* Exactly one of domain and bdi. */
	ck_assert_int_eq(pwb_tenant_create(dom, e.bdi, &tc, &t), -EINVAL);
	ck_assert_int_eq(pwb_tenant_create(NULL, NULL, &tc, &t), -EINVAL);
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, &tc, NULL), -EINVAL);
	/* A size below the first layout. */
	ck_assert_int_eq((pwb_tenant_create)(NULL, e.bdi, &tc, 2, &t),
			 -EINVAL);
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, NULL, &t), 0);
	ck_assert_uint_eq(tstats(t).weight, 100);
	ck_assert_int_eq(pwb_tenant_stats(t, NULL), -EINVAL);
	ck_assert_int_eq(pwb_tenant_stats(NULL, &st), -EINVAL);

	/* An inode of another bdi, or of a bdi outside the domain. */
	ck_assert_int_eq(pwb_inode_open(f.bdi, 1, &ops, NULL, &inode), 0);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, t), -EINVAL);
	ck_assert_int_eq(pwb_tenant_create(dom, NULL, &tc, &u), 0);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, u), -EINVAL);
	ck_assert_int_eq(pwb_inode_set_tenant(NULL, u), -EINVAL);
	ck_assert_int_eq(pwb_inode_close(inode), 0);

	/* Not freed while an inode is attached; moving it away frees. */
	inode = iopen(&e, 1, t);
	ck_assert_uint_eq(tstats(t).nr_inodes, 1);
	ck_assert_int_eq(pwb_tenant_destroy(t), -EBUSY);
	ck_assert_ptr_ne(strstr(pwb_errmsg(), "attached"), NULL);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, NULL), 0);
	ck_assert_uint_eq(tstats(t).nr_inodes, 0);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, t), 0);
	/* ... and closing the inode too. */
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
	ck_assert_int_eq(pwb_tenant_destroy(u), 0);
	ck_assert_int_eq(pwb_tenant_destroy(NULL), 0);

	/* A tenant outlives its bdi, detached. */
	t = tenant(NULL, f.bdi, 100, 0, 0);
	env_close(&f);
	ck_assert_int_eq(tstats(t).nr_inodes, 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
	env_close(&e);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/* Pages move with the inode between tenants, and leave with a close. */
START_TEST(pages_follow_the_inode)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *a, *b;
	struct pwb_inode *inode;
	struct env e;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	a = tenant(NULL, e.bdi, 100, 0, 0);
	b = tenant(NULL, e.bdi, 100, 0, 0);
	inode = iopen(&e, 1, a);
	dirty(inode, 0, 100);
	dirty(inode, 50, 100);
	ck_assert_uint_eq(tstats(a).dirty_bytes, 150 * PS);
	ck_assert_uint_eq(tstats(a).dirtied_bytes, 150 * PS);
	ck_assert_uint_eq(pwb__aread(&e.bdi->tn.active_weight), 100);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, b), 0);
	ck_assert_uint_eq(tstats(a).dirty_bytes, 0);
	ck_assert_uint_eq(tstats(b).dirty_bytes, 150 * PS);
	ck_assert_uint_eq(pwb__aread(&e.bdi->tn.active_weight), 100);
	run_pass(&e, 1 << 20);
	ck_assert_uint_eq(tstats(b).dirty_bytes, 0);
	ck_assert_uint_eq(tstats(b).writeback_bytes, 0);
	ck_assert_uint_eq(tstats(b).written_bytes, 150 * PS);
	ck_assert_uint_eq(tstats(b).max_held_bytes, 150 * PS);
	ck_assert_uint_eq(pwb__aread(&e.bdi->tn.active_weight), 0);
	/* Dirty at close: written by the close, off the count. */
	dirty(inode, 0, 10);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	ck_assert_uint_eq(tstats(b).dirty_bytes, 0);
	ck_assert_uint_eq(pwb__aread(&e.bdi->tn.nr_inodes), 0);
	ck_assert_int_eq(pwb_tenant_destroy(a), 0);
	ck_assert_int_eq(pwb_tenant_destroy(b), 0);
	env_close(&e);
}
END_TEST

/*
 * Two tenants of weights 5 and 1 both with far more dirty data than the
 * pass writes: the pass (60 visits of one chunk) writes 5 : 1.
 */
START_TEST(weights_share_writeback)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *a, *b;
	struct pwb_inode *ia, *ib;
	struct env e;
	uint64_t wa, wb;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	a = tenant(NULL, e.bdi, 5, 0, 0);
	b = tenant(NULL, e.bdi, 1, 0, 0);
	ia = iopen(&e, 1, a);
	ib = iopen(&e, 2, b);
	dirty(ia, 0, INODE_PAGES);
	dirty(ib, 0, INODE_PAGES);
	run_pass(&e, 60 * CHUNK_PAGES);
	wa = tstats(a).written_bytes;
	wb = tstats(b).written_bytes;
	ck_assert_uint_eq(wa + wb, 60 * CHUNK_PAGES * PS);
	assert_ratio(wa, wb, 5.0);
	ck_assert_uint_eq(tstats(a).dirty_bytes, INODE_PAGES * PS - wa);

	pair_close(&e, a, b, ia, ib);
}
END_TEST

/*
 * The same 5 : 1, but in passes of one visit each: every pass ends with
 * inodes still on b_io, as a pass cut short by its time slice or by the
 * background threshold does (under CPU load, or on a slow device, a pass
 * often ends after one visit). The next pass must compare every owner,
 * also those waiting on b_more_io: served from what was left on b_io, the
 * tenants would take turns, 1 : 1.
 */
START_TEST(weights_hold_across_short_passes)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *a, *b;
	struct pwb_inode *ia, *ib;
	struct env e;
	uint64_t wa, wb, visit = PWB__TENANT_VISIT_BYTES / PS;
	int i;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	a = tenant(NULL, e.bdi, 500, 0, 0);
	b = tenant(NULL, e.bdi, 100, 0, 0);
	ia = iopen(&e, 1, a);
	ib = iopen(&e, 2, b);
	dirty(ia, 0, INODE_PAGES);
	dirty(ib, 0, INODE_PAGES);
	for (i = 0; i < 120; i++)
		run_pass(&e, (int64_t)visit);
	wa = tstats(a).written_bytes;
	wb = tstats(b).written_bytes;
	ck_assert_uint_eq(wa + wb, 120 * visit * PS);
	assert_ratio(wa, wb, 5.0);

	pair_close(&e, a, b, ia, ib);
}
END_TEST

/*
 * Work-conserving: the heavy tenant (weight 5) runs out of dirty data
 * early and the light one (weight 1) gets the rest of the pass. Then the
 * heavy one comes back after having been idle: it gets its 5 : 1 again,
 * not the whole device until its virtual time caught up with what it did
 * not use.
 */
START_TEST(idle_share_goes_to_the_busy)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *a, *b;
	struct pwb_inode *ia, *ib;
	struct env e;
	uint64_t wa, wb;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	a = tenant(NULL, e.bdi, 5, 0, 0);
	b = tenant(NULL, e.bdi, 1, 0, 0);
	ia = iopen(&e, 1, a);
	ib = iopen(&e, 2, b);
	dirty(ia, 0, 2 * CHUNK_PAGES);
	dirty(ib, 0, INODE_PAGES);
	run_pass(&e, 40 * CHUNK_PAGES);
	ck_assert_uint_eq(tstats(a).written_bytes, 2 * CHUNK_PAGES * PS);
	ck_assert_uint_eq(tstats(b).written_bytes, 38 * CHUNK_PAGES * PS);

	/* A idle while b wrote 38 chunks; now both dirty again. */
	dirty(ia, 0, INODE_PAGES);
	run_pass(&e, 60 * CHUNK_PAGES);
	wa = tstats(a).written_bytes - 2 * CHUNK_PAGES * PS;
	wb = tstats(b).written_bytes - 38 * CHUNK_PAGES * PS;
	assert_ratio(wa, wb, 5.0);

	pair_close(&e, a, b, ia, ib);
}
END_TEST

/*
 * A tenant capped at 4 MiB/s beside an uncapped one, the clock standing
 * still: the capped one writes its burst and one chunk more, then is
 * passed over while the other writes all of its pages; once the clock
 * moved on, it writes again.
 */
START_TEST(rate_cap_passes_over_the_tenant)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *r, *f;
	struct pwb_inode *ir, *iff;
	struct env e;
	uint64_t first;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	env_open(&e, &cfg);
	r = tenant(NULL, e.bdi, 100, 0, 4 * MIB);
	f = tenant(NULL, e.bdi, 100, 0, 0);
	ir = iopen(&e, 1, r);
	iff = iopen(&e, 2, f);
	dirty(ir, 0, 4 * CHUNK_PAGES);
	dirty(iff, 0, 4 * CHUNK_PAGES);
	run_pass(&e, 1 << 20);
	/* Its burst (4 MiB, a chunk), then up to the first write that
	 * runs the bucket into debt. */
	ck_assert_uint_eq(tstats(f).written_bytes, 4 * CHUNK_PAGES * PS);
	first = tstats(r).written_bytes;
	ck_assert_uint_gt(first, CHUNK_PAGES * PS);
	ck_assert_uint_le(first, 2 * CHUNK_PAGES * PS);
	ck_assert_uint_gt(tstats(r).rate_limited_ns, 0);

	/* A second later: 4 MiB more, and again up to the debt. */
	tu_clock_advance_ms(&clk, 1000);
	run_pass(&e, 1 << 20);
	ck_assert_uint_gt(tstats(r).written_bytes, first + 3 * MIB);
	ck_assert_uint_le(tstats(r).written_bytes,
			  first + 2 * CHUNK_PAGES * PS);

	ck_assert_int_eq(pwb_inode_close(ir), 0);
	ck_assert_int_eq(pwb_inode_close(iff), 0);
	ck_assert_int_eq(pwb_tenant_destroy(r), 0);
	ck_assert_int_eq(pwb_tenant_destroy(f), 0);
	env_close(&e);
}
END_TEST

/* The throttle's decision for a writer of @t (throttle.c's next_pause()
 * for an inode with a tenant): the tenant's state, then the pause. */
static uint64_t tenant_pause(struct pwb_tenant *t, struct pwb_bdi *bdi,
			     struct pwb__throttle_state *s, bool *hard)
{
	unsigned int what = pwb__tenant_throttle_state(t, bdi, s);

	*hard = false;
	if (what & PWB__TENANT_KICK)
		pwb__kick_background(bdi);
	if (!(what & PWB__TENANT_PAUSE))
		return 0;
	return pwb__throttle_pause(s, hard);
}

/*
 * The throttle's decision, without sleeping: a flooding tenant with 48
 * MiB dirty in a 64 MiB bdi is paused; a light one beside it with 1 MiB
 * is not, though an untenanted writer of the same bdi is (the bdi as a
 * whole is above its set point). Each tenant's limit is its half of the
 * bdi's while both hold pages, and the whole of it for the one left.
 */
START_TEST(throttle_decides_by_the_tenant)
{
	struct pwb_bdi_config cfg;
	struct pwb_tenant *a, *b;
	struct pwb_inode *ia, *ib;
	struct pwb__throttle_state s;
	struct env e;
	bool hard;

	clk.now = 10 * SEC;
	env_cfg(&cfg);
	cfg.dirty_bytes = 64 * MIB;
	cfg.dirty_background_bytes = 16 * MIB;
	env_open(&e, &cfg);
	a = tenant(NULL, e.bdi, 100, 0, 0);
	b = tenant(NULL, e.bdi, 100, 0, 0);
	ia = iopen(&e, 1, a);
	ib = iopen(&e, 2, b);
	/* Nothing is written while the flushers are parked; without
	 * PWB_BDI_THROTTLE these calls are not paused. */
	pthread_mutex_lock(&e.bdi->reshard_lock);
	pwb__flushers_park(e.bdi);
	dirty(ia, 0, 48 * MIB / PS);
	dirty(ib, 0, MIB / PS);

	memset(&s, 0, sizeof(s));
	s.page_shift = 12;
	s.dirtied = 16;
	s.bw = 100 * MIB;
	ck_assert_uint_eq(tenant_pause(b, e.bdi, &s, &hard), 0);
	ck_assert_uint_eq(tstats(b).limit_bytes, 32 * MIB);
	memset(&s, 0, sizeof(s));
	s.page_shift = 12;
	s.dirtied = 16;
	s.bw = 100 * MIB;
	ck_assert_uint_gt(tenant_pause(a, e.bdi, &s, &hard), 0);
	ck_assert(hard);	/* 48 MiB held, its half is 32 */
	pwb__throttle_account(16);
	ck_assert_int_eq(pwb_balance_dirty_nowait(e.bdi), -EAGAIN);
	pwb__flushers_resume(e.bdi);
	pthread_mutex_unlock(&e.bdi->reshard_lock);

	/* b's pages gone: a's limit is the whole bdi's again. */
	ck_assert_int_eq(pwb_fsync(ib), 0);
	memset(&s, 0, sizeof(s));
	s.page_shift = 12;
	s.dirtied = 16;
	s.bw = 100 * MIB;
	tenant_pause(a, e.bdi, &s, &hard);
	ck_assert_uint_eq(tstats(a).limit_bytes, 64 * MIB);
	ck_assert(!hard);

	pair_close(&e, a, b, ia, ib);
}
END_TEST

struct writer {
	struct pwb_inode *inode;
	uint64_t first;
	uint64_t pages;		/* to dirty in all */
	uint64_t per_call;
	int err;
};

static void *writer_fn(void *arg)
{
	struct writer *w = arg;
	uint64_t i;

	for (i = 0; i < w->pages; i += w->per_call) {
		int rc = pwb_mark_dirty(w->inode, (w->first + i) * PS,
					w->per_call * PS);

		if (rc) {
			w->err = rc;
			break;
		}
	}
	return NULL;
}

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* A throttled bdi on a device whose every write takes @delay_ms. */
static void slow_env(struct env *e, uint64_t dirty_bytes, unsigned int delay)
{
	struct pwb_bdi_config cfg;
	struct pwb_fault fault;
	char spec[64];

	env_cfg(&cfg);
	cfg.clock = NULL;	/* real time: the writers really sleep */
	cfg.clock_arg = NULL;
	cfg.flags |= PWB_BDI_THROTTLE;
	cfg.dirty_bytes = dirty_bytes;
	cfg.dirty_background_bytes = dirty_bytes / 4;
	cfg.max_io_bytes = 256 * 1024;
	cfg.throttle_timeout_ms = 30000;
	cfg.backend = "psync";	/* the null backend skips the faults */
	env_open(e, &cfg);
	snprintf(spec, sizeof(spec), "delay:every=1,delay_ms=%u", delay);
	ck_assert_int_eq(pwb_fault_parse(spec, &fault), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e->bdi, &fault), 0);
}

/*
 * Real writers: tenant a floods a slow device (32 MiB limit, 8 MiB
 * background, set point 20 MiB) with 64 MiB; tenant b, beside it, dirties
 * 8 MiB in 64 KiB calls once a holds 16 MiB: a writer judged by the bdi's
 * dirty memory would be paused there. b's own set point (of its half of
 * the bdi) is 10 MiB: its writer never sleeps. a's do (at their half of
 * the bdi while b holds pages).
 */
START_TEST(light_tenant_not_throttled_by_a_flood)
{
	struct pwb_tenant *a, *b;
	struct pwb_inode *ia, *ib;
	struct writer wa = { 0 };
	pthread_t th;
	struct env e;
	uint64_t i;

	slow_env(&e, 32 * MIB, 10);
	a = tenant(NULL, e.bdi, 100, 0, 0);
	b = tenant(NULL, e.bdi, 100, 0, 0);
	ia = iopen(&e, 1, a);
	ib = iopen(&e, 2, b);
	wa.inode = ia;
	wa.pages = 64 * MIB / PS;
	wa.per_call = 64;
	ck_assert_int_eq(pthread_create(&th, NULL, writer_fn, &wa), 0);
	for (i = 0; i < 10000 && tstats(a).dirty_bytes +
					 tstats(a).writeback_bytes <
				 16 * MIB;
	     i++)
		nap_ms(1);
	ck_assert_uint_ge(tstats(a).dirty_bytes + tstats(a).writeback_bytes,
			  16 * MIB);
	for (i = 0; i < 8 * MIB / PS; i += 16)
		dirty(ib, i, 16);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(wa.err, 0);
	ck_assert_uint_gt(tstats(a).throttle_events, 0);
	ck_assert_uint_eq(tstats(b).throttle_events, 0);
	ck_assert_uint_eq(tstats(b).throttled_ns, 0);

	pair_close(&e, a, b, ia, ib);
}
END_TEST

/*
 * A tenant's own dirty_bytes (2 MiB, in a 64 MiB bdi): two writers of it
 * dirtying 16 MiB each in 64 KiB calls never hold more than the limit and
 * one writeback chunk.
 */
START_TEST(own_limit_holds)
{
	struct writer w[2] = { { 0 } };
	struct pwb_tenant *t;
	struct pwb_inode *inode;
	pthread_t th[2];
	struct env e;
	int i;

	slow_env(&e, 64 * MIB, 2);
	t = tenant(NULL, e.bdi, 100, 2 * MIB, 0);
	inode = iopen(&e, 1, t);
	for (i = 0; i < 2; i++) {
		w[i].inode = inode;
		w[i].first = (uint64_t)i * (16 * MIB / PS);
		w[i].pages = 16 * MIB / PS;
		w[i].per_call = 16;
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer_fn, &w[i]),
				 0);
	}
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_int_eq(w[i].err, 0);
	}
	ck_assert_uint_le(tstats(t).max_held_bytes,
			  2 * MIB + PWB__TENANT_CHUNK_BYTES);
	ck_assert_uint_ge(tstats(t).max_held_bytes, MIB);
	ck_assert_uint_eq(tstats(t).limit_bytes, 2 * MIB);
	ck_assert_uint_gt(tstats(t).throttle_events, 0);

	ck_assert_int_eq(pwb_inode_close(inode), 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
	env_close(&e);
}
END_TEST

/* A tenant of a domain: inodes of its bdis join, others do not. */
START_TEST(domain_tenant)
{
	struct pwb_bdi_config cfg;
	struct pwb_domain *dom;
	struct pwb_tenant *t;
	struct pwb_inode *inode;
	struct env e, f;

	clk.now = 10 * SEC;
	ck_assert_int_eq(pwb_domain_create(NULL, &dom), 0);
	env_cfg(&cfg);
	cfg.domain = dom;
	/* A floor of its own: a bdi at a floor of 0 (nothing written yet)
	 * has a background threshold of one page, and its flusher would
	 * write the pages before the weight below is looked at. */
	cfg.min_share_ppm = 500000;
	env_open(&e, &cfg);
	env_cfg(&cfg);
	env_open(&f, &cfg);
	t = tenant(dom, NULL, 300, 0, 0);
	inode = iopen(&e, 1, t);
	dirty(inode, 0, 64);
	ck_assert_uint_eq(pwb__aread(&dom->tn.active_weight), 300);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_uint_eq(pwb__aread(&dom->tn.active_weight), 0);
	ck_assert_uint_eq(tstats(t).written_bytes, 64 * PS);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	ck_assert_int_eq(pwb_inode_open(f.bdi, 1, &ops, NULL, &inode), 0);
	ck_assert_int_eq(pwb_inode_set_tenant(inode, t), -EINVAL);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	env_close(&e);
	env_close(&f);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
}
END_TEST

static Suite *tenant_suite(void)
{
	Suite *s = suite_create("tenant");
	TCase *tc = tcase_create("tenant");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, bad_inputs);
	tcase_add_test(tc, pages_follow_the_inode);
	tcase_add_test(tc, weights_share_writeback);
	tcase_add_test(tc, weights_hold_across_short_passes);
	tcase_add_test(tc, idle_share_goes_to_the_busy);
	tcase_add_test(tc, rate_cap_passes_over_the_tenant);
	tcase_add_test(tc, throttle_decides_by_the_tenant);
	tcase_add_test(tc, light_tenant_not_throttled_by_a_flood);
	tcase_add_test(tc, own_limit_holds);
	tcase_add_test(tc, domain_tenant);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(tenant_suite(), true);
}
