// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_domain.c - memory domains: one dirty budget for several bdis
 * (lib/domain.c)
 *
 * White-box: the shares are recomputed when the test says so
 * (pwb__domain_update(..., true)) and at completions only when the
 * injected clock has moved, which it does only when the test moves it;
 * completions can be added without I/O (pwb__domain_written()). The
 * throttle's decisions are read with pwb_balance_dirty_nowait(), which
 * never sleeps. Only the last three cases wait for real writeback: a
 * writer that must get its pages written to go on, the members a domain
 * over its background threshold starts, and a slow device (the delay
 * fault) beside a fast one.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pwb-internal.h"
#include "test-util.h"

#define MIB (1ull << 20)
#define PS 4096u
#define SEC (1000ull * PWB__NSEC_PER_MSEC)

static struct tu_clock clk;

/* One bdi of a test on an image of its own, one inode covering it. */
struct dev {
	char *img;
	struct pwb_bdi *bdi;
	struct tu_store st;
};

static struct pwb_domain *domain(uint64_t dirty, uint64_t bg)
{
	struct pwb_domain_config dc;
	struct pwb_domain *dom;

	pwb_domain_config_init(&dc);
	dc.dirty_bytes = dirty;
	dc.dirty_background_bytes = bg;
	dc.period_ms = 1000;
	dc.clock = tu_clock_read;
	dc.clock_arg = &clk;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), 0);
	return dom;
}

static void bdi_cfg(struct pwb_bdi_config *cfg, struct pwb_domain *dom,
		    const char *backend)
{
	pwb_bdi_config_init(cfg);
	cfg->nr_wb_ctx = 1;
	cfg->backend = backend;
	cfg->domain = dom;
	cfg->dirty_writeback_ms = 0;	/* no periodic writeback */
	cfg->clock = tu_clock_read;
	cfg->clock_arg = &clk;
}

static int dev_open_cfg(struct dev *d, uint64_t pages,
			const struct pwb_bdi_config *cfg, uint64_t ino)
{
	int ret;

	memset(d, 0, sizeof(*d));
	d->img = tu_image_create(pages * PS);
	ret = pwb_bdi_open(d->img, cfg, &d->bdi);
	if (ret) {
		tu_image_remove(d->img);
		d->img = NULL;
		return ret;
	}
	tu_store_init(&d->st, ino, PS, pages, 0);
	ck_assert_int_eq(tu_store_open(&d->st, d->bdi), 0);
	return 0;
}

static void dev_open(struct dev *d, uint64_t pages, struct pwb_domain *dom,
		     const char *backend, uint64_t ino)
{
	struct pwb_bdi_config cfg;

	bdi_cfg(&cfg, dom, backend);
	ck_assert_int_eq(dev_open_cfg(d, pages, &cfg, ino), 0);
}

static void dev_close(struct dev *d)
{
	ck_assert_int_eq(pwb_inode_close(d->st.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(d->bdi), 0);
	tu_store_destroy(&d->st);
	tu_image_remove(d->img);
}

/* Dirty pages [first, first + n) of @d's inode in one call. */
static int dev_dirty(struct dev *d, uint64_t first, uint64_t n)
{
	return pwb_mark_dirty(d->st.inode, first * PS, n * PS);
}

static struct pwb_stats stats(struct dev *d)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(d->bdi, &st), 0);
	return st;
}

static uint64_t share(struct dev *d)
{
	return stats(d).domain_share_ppm;
}

static void update(struct pwb_domain *dom)
{
	pwb__domain_update(dom, clk.now, true);
}

/* Would a writer of @d holding @dirty pages be paused by its share (and
 * what it may borrow)? The throttle's decision alone, from the bdi's
 * thresholds and the domain's real state, without a race with the
 * flusher that a bdi's small background threshold starts at once. */
static bool paused(struct dev *d, uint64_t dirty)
{
	struct pwb__throttle_state s = {
		.bg = pwb__aread(&d->bdi->bg_thresh_pages),
		.limit = pwb__aread(&d->bdi->dirty_limit_pages),
		.dirty = dirty,
		.bw = 100 << 20,
		.page_shift = d->bdi->page_shift,
	};

	return pwb__domain_throttle(d->bdi, &s) & PWB__DOMAIN_PAUSE;
}

START_TEST(share_follows_completed_writeback_and_decays)
{
	struct pwb_domain *dom;
	struct dev a, b;
	struct pwb_stats st;

	clk.now = 10 * SEC;
	dom = domain(64 * MIB, 16 * MIB);
	dev_open(&a, 4096, dom, "null", 1);
	dev_open(&b, 4096, dom, "null", 2);
	/* No writeback yet: each at its floor (0 here), and the thresholds
	 * with it; a share of 0 is one page, not "no limit". */
	ck_assert_uint_eq(share(&a), 0);
	ck_assert_uint_eq(share(&b), 0);
	st = stats(&a);
	ck_assert_uint_eq(st.dirty_limit_bytes, PS);
	ck_assert_uint_eq(st.dirty_background_limit_bytes, PS);

	/* Real completions count: only a wrote. */
	ck_assert_int_eq(dev_dirty(&a, 0, 1024), 0);
	ck_assert_int_eq(pwb_sync(a.bdi), 0);
	update(dom);
	ck_assert_uint_eq(share(&a), 1000000);
	ck_assert_uint_eq(share(&b), 0);
	ck_assert_uint_eq(stats(&a).dirty_limit_bytes, 64 * MIB);
	ck_assert_uint_eq(stats(&b).dirty_limit_bytes, PS);

	/* 1024 : 3072 pages written: a quarter and three quarters. */
	pwb__domain_written(b.bdi, 3072);
	update(dom);
	ck_assert_uint_eq(share(&a), 250000);
	ck_assert_uint_eq(share(&b), 750000);
	ck_assert_uint_eq(stats(&b).dirty_limit_bytes, 48 * MIB);
	ck_assert_uint_eq(stats(&b).dirty_background_limit_bytes, 12 * MIB);

	/* A period ends: every count halves (512 : 1536), the proportion
	 * stays; what is written now weighs twice what came before. */
	tu_clock_advance_ms(&clk, 1000);
	update(dom);
	ck_assert_uint_eq(share(&b), 750000);
	pwb__domain_written(a.bdi, 2048);
	update(dom);
	ck_assert_uint_eq(share(&a), 2560ull * 1000000 / 4096);
	/* Without that decay a would be at (1024 + 2048) / 6144. */
	ck_assert_uint_ne(share(&a), 500000);

	/* Twenty quiet periods: nothing is left of the past, both are back
	 * at their floors; the next writes alone decide. */
	tu_clock_advance_ms(&clk, 20 * 1000);
	update(dom);
	ck_assert_uint_eq(share(&a), 0);
	ck_assert_uint_eq(share(&b), 0);
	pwb__domain_written(b.bdi, 1);
	update(dom);
	ck_assert_uint_eq(share(&b), 1000000);

	/* Completions recompute by themselves once the clock has moved
	 * past the update interval (a sixteenth of the period). */
	tu_clock_advance_ms(&clk, 100);
	ck_assert_int_eq(dev_dirty(&a, 0, 256), 0);
	ck_assert_int_eq(pwb_sync(a.bdi), 0);
	ck_assert_uint_eq(share(&a), 256ull * 1000000 / 257);

	dev_close(&a);
	dev_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/*
 * A domain's bdis before any write completed: each at its floor, not an
 * even split. A bdi that is a USB stick would otherwise get a third of a
 * three-bdi domain (21 MiB of 64) to dirty at memory speed, and then take
 * many seconds to write it. It may borrow one writeback chunk (4 MiB, the
 * least, as it has written nothing; set point 2 MiB): 3 MiB dirty are
 * paused (with the even split, under its set point of 13 MiB, not even
 * 12 MiB would be). It earns its share by completing writes, and the
 * first completion of a bdi recomputes at once: the clock stands still
 * here, the periodic update is never due after the first.
 */
START_TEST(new_member_starts_at_its_floor)
{
	struct pwb_domain *dom;
	struct pwb_bdi_config cfg;
	struct dev a, b, c;

	clk.now = 10 * SEC;
	dom = domain(64 * MIB, 16 * MIB);
	dev_open(&a, 4096, dom, "null", 1);
	dev_open(&b, 4096, dom, "null", 2);
	bdi_cfg(&cfg, dom, "null");
	cfg.min_share_ppm = 100000;
	ck_assert_int_eq(dev_open_cfg(&c, 4096, &cfg, 3), 0);
	ck_assert_uint_eq(share(&a), 0);
	ck_assert_uint_eq(share(&b), 0);
	ck_assert_uint_eq(share(&c), 100000);
	ck_assert_uint_eq(stats(&b).dirty_limit_bytes, PS);
	ck_assert_uint_eq(stats(&c).dirty_limit_bytes,
			  (64 * MIB / 10) & ~(uint64_t)(PS - 1));

	/* b's writer: 1.5 MiB dirty runs, 3 MiB are over its loan's set
	 * point, and so are 12 MiB. */
	ck_assert(!paused(&b, 384));
	ck_assert(paused(&b, 768));
	ck_assert(paused(&b, 3072));

	/* b writes: b has all of the 90% above c's floor. */
	ck_assert_int_eq(dev_dirty(&b, 0, 768), 0);
	ck_assert_int_eq(pwb_sync(b.bdi), 0);
	ck_assert_uint_eq(share(&b), 900000);
	ck_assert_uint_eq(share(&a), 0);
	/* a writes, the clock still where it was: the update is not due,
	 * but a's first completion recomputes (by its first write, so some
	 * of the 1024 pages). */
	ck_assert_int_eq(dev_dirty(&a, 0, 1024), 0);
	ck_assert_int_eq(pwb_sync(a.bdi), 0);
	ck_assert_uint_gt(share(&a), 0);
	ck_assert_uint_lt(share(&b), 900000);
	ck_assert_uint_eq(share(&c), 100000);
	update(dom);
	ck_assert_uint_eq(share(&a), 1024ull * 1000000 / 1792 * 9 / 10);

	dev_close(&a);
	dev_close(&b);
	dev_close(&c);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/* A bdi whose page cache holds library-owned pages starts background
 * writeback at half the cache at most, in a domain as without one: a
 * share recomputed later must not raise it again. */
START_TEST(share_keeps_the_page_cache_cap)
{
	static const struct pwb_inode_ops alloc_ops;	/* allocator mode */
	struct pwb_domain *dom = domain(64 * MIB, 32 * MIB);
	struct pwb_bdi_config cfg;
	struct pwb_inode *lib;
	struct dev a, b;

	bdi_cfg(&cfg, dom, "null");
	cfg.cache_bytes = 4 * MIB;
	cfg.min_share_ppm = 500000;	/* 16 MiB of background threshold */
	ck_assert_int_eq(dev_open_cfg(&a, 4096, &cfg, 1), 0);
	ck_assert_int_eq(pwb_inode_open(a.bdi, 2, &alloc_ops, NULL, &lib), 0);
	ck_assert_uint_le(stats(&a).dirty_background_limit_bytes, 2 * MIB);
	/* A second member: every share is recomputed. */
	bdi_cfg(&cfg, dom, "null");
	cfg.min_share_ppm = 500000;
	ck_assert_int_eq(dev_open_cfg(&b, 4096, &cfg, 1), 0);
	ck_assert_uint_le(stats(&a).dirty_background_limit_bytes, 2 * MIB);
	ck_assert_uint_gt(stats(&b).dirty_background_limit_bytes, 2 * MIB);
	ck_assert_int_eq(pwb_inode_close(lib), 0);
	dev_close(&b);
	dev_close(&a);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

START_TEST(share_bounds)
{
	struct pwb_domain *dom;
	struct pwb_bdi_config cfg;
	struct dev a, b, c;

	clk.now = 10 * SEC;
	dom = domain(64 * MIB, 16 * MIB);
	bdi_cfg(&cfg, dom, "null");
	cfg.min_share_ppm = 200000;
	ck_assert_int_eq(dev_open_cfg(&a, 1024, &cfg, 1), 0);
	bdi_cfg(&cfg, dom, "null");
	cfg.max_share_ppm = 100000;
	ck_assert_int_eq(dev_open_cfg(&b, 1024, &cfg, 2), 0);

	/* All the writeback is b's: b at its bound, a at its floor. */
	pwb__domain_written(b.bdi, 1000);
	update(dom);
	ck_assert_uint_eq(share(&b), 100000);
	ck_assert_uint_eq(share(&a), 200000);
	ck_assert_uint_eq(stats(&b).dirty_limit_bytes,
			  (64 * MIB / 10) & ~(uint64_t)(PS - 1));
	/* Nearly all a's: a takes what b's share leaves above its floor. */
	pwb__domain_written(a.bdi, 999000);
	update(dom);
	ck_assert_uint_eq(share(&a), 200000 + 999000ull * 800000 / 1000000);
	ck_assert_uint_eq(share(&b), 1000ull * 800000 / 1000000);

	/* Floors above a whole together, or bounds out of order. */
	bdi_cfg(&cfg, dom, "null");
	cfg.min_share_ppm = 900000;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	cfg.min_share_ppm = 300000;
	cfg.max_share_ppm = 200000;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	cfg.min_share_ppm = 0;
	cfg.max_share_ppm = 1000001;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	/* Bounds and the strict flag mean nothing without a domain. */
	bdi_cfg(&cfg, NULL, "null");
	cfg.min_share_ppm = 1;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	bdi_cfg(&cfg, NULL, "null");
	cfg.max_share_ppm = 500000;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	bdi_cfg(&cfg, NULL, "null");
	cfg.flags |= PWB_BDI_STRICT_SHARE;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), -EINVAL);
	/* A refused open left the floors as they were. */
	bdi_cfg(&cfg, dom, "null");
	cfg.min_share_ppm = 800000;
	ck_assert_int_eq(dev_open_cfg(&c, 1024, &cfg, 3), 0);
	dev_close(&c);

	dev_close(&a);
	dev_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

START_TEST(domain_bad_inputs)
{
	struct pwb_domain_config dc;
	struct pwb_domain *dom;
	struct dev a;

	ck_assert_int_eq(pwb_domain_create(NULL, NULL), -EINVAL);
	pwb_domain_config_init(&dc);
	ck_assert_uint_eq(dc.dirty_bytes, 256 * MIB);
	ck_assert_uint_eq(dc.dirty_background_bytes, 64 * MIB);
	dc.dirty_bytes = MIB;
	dc.dirty_background_bytes = 2 * MIB;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), -EINVAL);
	pwb_domain_config_init(&dc);
	dc.period_ms = 5;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), -EINVAL);
	/* A cache budget is taken (check_domain_cache.c), a tiny one is
	 * refused. */
	pwb_domain_config_init(&dc);
	dc.cache_bytes = 64 * MIB;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), 0);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
	dc.cache_bytes = 4096;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), -EINVAL);
	ck_assert_ptr_ne(strstr(pwb_errmsg(), "below 1 MiB"), NULL);
	/* A size below the first layout. */
	pwb_domain_config_init(&dc);
	ck_assert_int_eq((pwb_domain_create)(&dc, 8, &dom), -EINVAL);
	ck_assert_int_eq(pwb_domain_destroy(NULL), 0);
	ck_assert_int_eq(pwb_domain_create(NULL, &dom), 0);

	/* Not freed while a bdi is in it. */
	dev_open(&a, 1024, dom, "null", 1);
	ck_assert_int_eq(pwb_domain_destroy(dom), -EBUSY);
	ck_assert_ptr_ne(strstr(pwb_errmsg(), "still"), NULL);
	dev_close(&a);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/*
 * Two bdis with a share of nearly nothing in a 64 MiB domain (a third one
 * did the writeback; no background threshold), 1.5 MiB dirty on each:
 * the one not held strictly borrows an eighth of the domain's free room
 * (61 MiB / 8), but no more than one writeback chunk of its own (4 MiB,
 * the least, for what it has written: set point 2 MiB), and runs; the strict
 * one is paused at its share. At 3 MiB the loan is used up: the lax one
 * is paused too (an eighth of the room alone would let it run to 3.8).
 */
START_TEST(strict_share_throttles_at_the_share)
{
	struct pwb_domain *dom;
	struct pwb_bdi_config cfg;
	struct dev lax, strict, big;

	clk.now = 10 * SEC;
	dom = domain(64 * MIB, 0);
	dev_open(&big, 1024, dom, "null", 3);
	bdi_cfg(&cfg, dom, "null");
	ck_assert_int_eq(dev_open_cfg(&lax, 4096, &cfg, 1), 0);
	cfg.flags |= PWB_BDI_STRICT_SHARE;
	ck_assert_int_eq(dev_open_cfg(&strict, 4096, &cfg, 2), 0);
	pwb__domain_written(big.bdi, 1000000);
	pwb__domain_written(lax.bdi, 10);
	pwb__domain_written(strict.bdi, 10);
	update(dom);
	ck_assert_uint_eq(share(&strict), 9);
	ck_assert_uint_eq(stats(&strict).dirty_limit_bytes, PS);

	/* Nothing dirty: both run. (The bdis are opened without
	 * PWB_BDI_THROTTLE, so that the test dirties without being paused;
	 * the pages the caller owes are set by hand.) */
	pwb__throttle_account(4096);
	ck_assert_int_eq(pwb_balance_dirty_nowait(strict.bdi), 0);
	ck_assert_int_eq(dev_dirty(&lax, 0, 384), 0);
	ck_assert_int_eq(dev_dirty(&strict, 0, 384), 0);
	pwb__throttle_account(4096);
	ck_assert_int_eq(pwb_balance_dirty_nowait(lax.bdi), 0);
	pwb__throttle_account(4096);
	ck_assert_int_eq(pwb_balance_dirty_nowait(strict.bdi), -EAGAIN);
	ck_assert(paused(&lax, 768));
	/* The pause started its writeback: it gets below its share. */
	ck_assert_int_eq(pwb_sync(strict.bdi), 0);
	ck_assert_int_eq(pwb_balance_dirty_nowait(strict.bdi), 0);

	dev_close(&lax);
	dev_close(&strict);
	dev_close(&big);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/*
 * A writer paused because of the domain (above its share's set point,
 * the domain near its limit because of another bdi) must have its own
 * flusher writing, or it waits for nothing: with no background
 * threshold nothing else starts that flusher. Here the other bdi's 24
 * MiB are never written (no threshold, no periodic writeback), the
 * writer's bdi, which has written nothing yet (its share is its floor,
 * 0, and it may borrow an eighth of the room left), dirties 4 MiB, then
 * 6 MiB more: pwb_balance_dirty() returns once its flusher wrote enough
 * of them, long before throttle_timeout_ms.
 */
START_TEST(throttled_writer_always_has_writeback)
{
	struct pwb_domain *dom;
	struct pwb_bdi_config cfg;
	struct dev w, other;
	struct pwb_stats st;

	clk.now = 10 * SEC;
	dom = domain(32 * MIB, 0);
	dev_open(&other, 8192, dom, "null", 2);
	bdi_cfg(&cfg, dom, "null");
	cfg.flags |= PWB_BDI_THROTTLE;
	cfg.throttle_timeout_ms = 3000;
	ck_assert_int_eq(dev_open_cfg(&w, 4096, &cfg, 1), 0);
	ck_assert_int_eq(dev_dirty(&other, 0, 6144), 0);
	/* Both calls go above what the bdi may hold: each is paused until
	 * its bdi's pages are written (whether it sleeps depends on how
	 * fast the flusher is; it must not wait for the time-out). */
	ck_assert_int_eq(dev_dirty(&w, 0, 1024), 0);
	ck_assert_int_eq(dev_dirty(&w, 1024, 1536), 0);
	/* Its flusher is writing its pages, though nothing else would start
	 * it (no background threshold, no periodic writeback, no sync).
	 * How far the pause went before it returned depends on how fast
	 * that flusher ran (slow under a sanitizer or a loaded machine):
	 * what must hold is that the writing goes on, so wait for it, up
	 * to 20 s of real time. */
	for (int i = 0; i < 20000; i++) {
		struct timespec ts = { 0, 1000000 };

		st = stats(&w);
		if (st.written_pages >= 512)
			break;
		nanosleep(&ts, NULL);
	}
	ck_assert_uint_ge(st.written_pages, 512);
	/* The other bdi was never made to write. */
	ck_assert_uint_eq(stats(&other).dirty_pages, 6144);

	dev_close(&w);
	dev_close(&other);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/*
 * A domain over its background threshold starts every member with dirty
 * pages, not only the one whose writer asked: here 20 MiB dirty on bdi a
 * (its flushers parked, so the pages stay) and 3 MiB on bdi b, below b's
 * own threshold (4 MiB: half of the domain's 8), with no periodic
 * writeback. Nothing of b's would be written; a's writer above its set
 * point finds the domain over 8 MiB, and b's flusher writes b's pages.
 */
START_TEST(domain_over_background_starts_every_member)
{
	struct pwb_domain *dom;
	struct dev a, b;
	struct pwb_stats st;

	clk.now = 10 * SEC;
	dom = domain(64 * MIB, 8 * MIB);
	dev_open(&a, 8192, dom, "null", 1);
	dev_open(&b, 8192, dom, "null", 2);
	pwb__domain_written(a.bdi, 1000);
	pwb__domain_written(b.bdi, 1000);
	update(dom);
	ck_assert_uint_eq(stats(&b).dirty_background_limit_bytes, 4 * MIB);
	ck_assert_uint_eq(stats(&a).dirty_limit_bytes, 32 * MIB);

	pthread_mutex_lock(&a.bdi->reshard_lock);
	pwb__flushers_park(a.bdi);
	ck_assert_int_eq(dev_dirty(&b, 0, 768), 0);
	ck_assert_int_eq(dev_dirty(&a, 0, 5120), 0);
	ck_assert_uint_eq(stats(&b).written_pages, 0);
	/* Above a's set point (18 MiB): the domain's state decides. */
	pwb__throttle_account(4096);
	ck_assert_int_eq(pwb_balance_dirty_nowait(a.bdi), -EAGAIN);
	/* b's flusher runs on its own: wait for it, up to 20 s of real
	 * time (a loaded machine). */
	for (int i = 0; i < 20000; i++) {
		struct timespec ts = { 0, 1000000 };

		st = stats(&b);
		if (st.written_pages >= 768)
			break;
		nanosleep(&ts, NULL);
	}
	ck_assert_uint_ge(st.written_pages, 768);
	pwb__flushers_resume(a.bdi);
	pthread_mutex_unlock(&a.bdi->reshard_lock);

	dev_close(&a);
	dev_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

struct slow_writer {
	struct dev *d;
	uint64_t pages;
	int err;
	bool stop;
};

/* Dirty the slow bdi's pages round and round, throttled, until stopped. */
static void *slow_writer_fn(void *arg)
{
	struct slow_writer *sw = arg;
	uint64_t i = 0;

	while (!__atomic_load_n(&sw->stop, __ATOMIC_RELAXED)) {
		int rc = dev_dirty(sw->d, i, 16);

		if (rc) {
			sw->err = rc;
			break;
		}
		i = (i + 16) % sw->pages;
	}
	return NULL;
}

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * The USB stick: a slow bdi (every write delayed) beside a fast one in a
 * 32 MiB domain without a background threshold. The fast one did nearly
 * all the writeback, so its share is nearly all of the domain (a set
 * point near 16 MiB of its own). A throttled writer keeps the slow bdi as
 * full as the domain lets it: its tiny share plus what it may borrow, an
 * eighth of the room left. 12 MiB dirtied on the fast bdi then are not
 * paused: 12 MiB is under the fast bdi's share. With even shares (8 MiB
 * set point each) they would be.
 */
START_TEST(slow_bdi_does_not_stall_a_fast_one)
{
	struct pwb_domain *dom;
	struct pwb_fault delay = {
		.kind = PWB_FAULT_DELAY, .every = 1, .delay_ms = 20,
	};
	struct slow_writer sw = { 0 };
	struct pwb_bdi_config cfg;
	struct dev fast, slow;
	struct pwb_stats st;
	pthread_t tid;
	uint64_t held, i, fast_pauses;

	clk.now = 10 * SEC;
	dom = domain(32 * MIB, 0);
	bdi_cfg(&cfg, dom, "null");
	cfg.flags |= PWB_BDI_THROTTLE;
	ck_assert_int_eq(dev_open_cfg(&fast, 8192, &cfg, 1), 0);
	bdi_cfg(&cfg, dom, "psync");
	cfg.flags |= PWB_BDI_THROTTLE;
	cfg.max_io_bytes = 64 << 10;
	cfg.throttle_timeout_ms = 0;
	ck_assert_int_eq(dev_open_cfg(&slow, 8192, &cfg, 2), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(slow.bdi, &delay), 0);

	/* What each has written lately sets the shares. */
	ck_assert_int_eq(dev_dirty(&fast, 0, 8192), 0);
	ck_assert_int_eq(pwb_sync(fast.bdi), 0);
	ck_assert_int_eq(dev_dirty(&slow, 0, 64), 0);
	ck_assert_int_eq(pwb_sync(slow.bdi), 0);
	update(dom);
	ck_assert_uint_lt(share(&slow), 10000);
	ck_assert_uint_gt(share(&fast), 990000);

	/* The slow bdi fills up as far as the domain lets it. */
	sw.d = &slow;
	sw.pages = 8192;
	ck_assert_int_eq(pthread_create(&tid, NULL, slow_writer_fn, &sw), 0);
	for (i = 0; i < 1000; i++) {
		st = stats(&slow);
		if (st.throttle_events)
			break;
		nap_ms(10);
	}
	st = stats(&slow);
	held = st.dirty_pages + st.writeback_pages;
	/* Its share (under 64 pages) plus an eighth of the domain, and the
	 * pages of one call. */
	ck_assert_msg(st.throttle_events && held <= 64 + 1024 + 16,
		      "the slow bdi holds %" PRIu64 " pages, %" PRIu64
		      " pauses", held, st.throttle_events);

	/* The fast bdi's writers go on: no pause. */
	fast_pauses = stats(&fast).throttle_events;
	ck_assert_int_eq(dev_dirty(&fast, 0, 3072), 0);
	ck_assert_uint_eq(stats(&fast).throttle_events, fast_pauses);
	ck_assert_uint_eq(stats(&fast).dirty_pages, 3072);

	/* Room again for the slow writer, which is paused meanwhile. */
	ck_assert_int_eq(pwb_sync(fast.bdi), 0);
	__atomic_store_n(&sw.stop, true, __ATOMIC_RELAXED);
	pthread_join(tid, NULL);
	ck_assert_int_eq(sw.err, 0);
	st = stats(&slow);
	ck_assert_uint_le(st.dirty_pages + st.writeback_pages, 64 + 1024 + 16);
	ck_assert_int_eq(pwb_bdi_inject_fault(slow.bdi, NULL), 0);
	dev_close(&fast);
	dev_close(&slow);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

static Suite *domain_suite(void)
{
	Suite *s = suite_create("domain");
	TCase *tc = tcase_create("shares");

	/* No case waits for time, but each clears and frees tens of MiB of
	 * page stores: under ThreadSanitizer on a loaded machine that alone
	 * took over Check's default 4 s. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, share_follows_completed_writeback_and_decays);
	tcase_add_test(tc, share_bounds);
	tcase_add_test(tc, new_member_starts_at_its_floor);
	tcase_add_test(tc, share_keeps_the_page_cache_cap);
	tcase_add_test(tc, domain_bad_inputs);
	tcase_add_test(tc, strict_share_throttles_at_the_share);
	suite_add_tcase(s, tc);

	tc = tcase_create("writeback");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, throttled_writer_always_has_writeback);
	tcase_add_test(tc, domain_over_background_starts_every_member);
	tcase_add_test(tc, slow_bdi_does_not_stall_a_fast_one);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(domain_suite(), true);
}
