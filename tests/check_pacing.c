/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_pacing.c - the write-rate cap, the order of queued work and the
 * event callback (lib/pacing.c, lib/wb_ctx.c, pwb_bdi_config.event)
 *
 * White-box. The token bucket is driven by clock values the test passes
 * in; the work queue by the bdi's injected clock with the flushers parked,
 * so nothing runs the items while the test looks at their order.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS 4096u
#define MS PWB__NSEC_PER_MSEC
#define SEC PWB__NSEC_PER_SEC
#define MIB (1ull << 20)

START_TEST(bucket_refills_at_the_rate)
{
	struct pwb__rate_bucket b;

	/* 1 MiB/s: the burst is a tenth of a second, 104857 bytes. */
	pwb__rate_init(&b, MIB, 4096, 0);
	ck_assert_int_eq(b.burst, (int64_t)(MIB / 10));
	ck_assert_uint_eq(pwb__rate_charge(&b, MIB / 10, 0), 0);
	/* Empty: 1 MiB more is owed for one second. */
	ck_assert_uint_eq(pwb__rate_charge(&b, MIB, 0), SEC);
	ck_assert_uint_eq(pwb__rate_wait_ns(&b, SEC / 2), SEC / 2);
	ck_assert_uint_eq(pwb__rate_wait_ns(&b, SEC), 0);
	/* A long idle time fills it to the burst, no further. */
	ck_assert_uint_eq(pwb__rate_wait_ns(&b, 100 * SEC), 0);
	ck_assert_uint_eq(pwb__rate_charge(&b, MIB / 10, 100 * SEC), 0);
	ck_assert_uint_gt(pwb__rate_charge(&b, 1024, 100 * SEC), 0);
	/* The clock going nowhere earns nothing. */
	ck_assert_uint_eq(pwb__rate_charge(&b, 0, 100 * SEC),
			  pwb__rate_wait_ns(&b, 100 * SEC));
	pwb__rate_destroy(&b);
}
END_TEST

START_TEST(burst_is_at_least_one_request)
{
	struct pwb__rate_bucket b;

	pwb__rate_init(&b, 4096, MIB, 0);
	ck_assert_int_eq(b.burst, (int64_t)MIB);
	ck_assert_uint_eq(pwb__rate_charge(&b, MIB, 0), 0);
	/* 4 KiB at 4 KiB/s: a second. */
	ck_assert_uint_eq(pwb__rate_charge(&b, 4096, 0), SEC);
	pwb__rate_destroy(&b);
}
END_TEST

START_TEST(no_cap_never_waits)
{
	struct pwb__rate_bucket b;

	pwb__rate_init(&b, 0, MIB, 0);
	ck_assert_uint_eq(pwb__rate_charge(&b, UINT64_MAX, 0), 0);
	ck_assert_uint_eq(pwb__rate_wait_ns(&b, 0), 0);
	pwb__rate_destroy(&b);
}
END_TEST

/* A bdi on a fresh image with the fake clock @clk. */
static struct pwb_bdi *open_bdi(char **img, struct tu_clock *clk,
				struct pwb_bdi_config *cfg)
{
	struct pwb_bdi *bdi;

	*img = tu_image_create(64 * MIB);
	cfg->clock = tu_clock_read;
	cfg->clock_arg = clk;
	cfg->page_size = PS;
	ck_assert_int_eq(pwb_bdi_open(*img, cfg, &bdi), 0);
	return bdi;
}

/* Open inode 1 with @pages pages at device offset 0 and dirty them all. */
static void open_dirty_store(struct tu_store *s, struct pwb_bdi *bdi,
			     uint64_t pages)
{
	tu_store_init(s, 1, PS, pages, 0);
	ck_assert_int_eq(tu_store_open(s, bdi), 0);
	for (uint64_t i = 0; i < pages; i++)
		tu_fill_page(s, i, 1);
	ck_assert_int_eq(pwb_mark_dirty(s->inode, 0, pages * PS), 0);
}

START_TEST(queued_work_is_served_by_class)
{
	struct tu_clock clk = { .now = 10 * SEC };
	struct pwb_bdi_config cfg;
	struct pwb__wb_work w[6];
	const char *name[6] = { "P1", "B1", "S1", "P2", "S2", "B2" };
	const char *order[6] = { "S1", "S2", "B1", "B2", "P1", "P2" };
	struct pwb__wb_ctx *wb;
	struct pwb_bdi *bdi;
	char *img;
	unsigned int i;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	/* One write in flight, as these tests were written for. */
	cfg.backend = "psync";
	cfg.dirty_writeback_ms = 0;
	bdi = open_bdi(&img, &clk, &cfg);
	wb = bdi->ctxs->ctx[0];
	pthread_mutex_lock(&bdi->reshard_lock);
	pwb__flushers_park(bdi);

	memset(w, 0, sizeof(w));
	for (i = 0; i < 6; i++) {
		w[i].sync_mode = name[i][0] == 'S' ? PWB__SYNC_ALL
						    : PWB__SYNC_NONE;
		w[i].reason = name[i][0] == 'P' ? PWB_WB_PERIODIC
						 : PWB_WB_BACKGROUND;
		w[i].nr_pages = 1;
		pwb__wb_queue_work(wb, &w[i]);
		if (i == 0)	/* P1 is older than the rest by 600 ms */
			tu_clock_advance_ms(&clk, 600);
	}
	tu_lib_lock(&wb->work_lock);
	/* P1 has waited 600 ms: not long enough to jump the classes. */
	ck_assert_ptr_eq(pwb__wb_next_work_locked(wb, clk.now), &w[2]);
	/* After more than a second it goes first. */
	ck_assert_ptr_eq(pwb__wb_next_work_locked(wb, clk.now + 500 * MS),
			 &w[0]);
	/* Without aging, the queue is in class order. */
	for (i = 0; i < 6; i++) {
		struct pwb__wb_work *next =
			pwb__wb_next_work_locked(wb, clk.now);

		ck_assert_ptr_nonnull(next);
		ck_assert_str_eq(name[next - w], order[i]);
		cds_list_del(&next->list);
	}
	ck_assert_ptr_null(pwb__wb_next_work_locked(wb, clk.now));
	tu_lib_unlock(&wb->work_lock);

	pwb__flushers_resume(bdi);
	pthread_mutex_unlock(&bdi->reshard_lock);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/*
 * A cap of 4 KiB/s holds background writeback to the first request; an
 * integrity sync queued meanwhile is not capped and writes everything.
 */
START_TEST(sync_ignores_the_cap)
{
	const uint64_t pages = 2048;	/* 8 MiB */
	struct tu_clock clk = { .now = 10 * SEC };
	struct pwb_bdi_config cfg;
	struct pwb_stats st;
	struct tu_store s;
	struct pwb_bdi *bdi;
	char *img;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	/* One write in flight, as these tests were written for. */
	cfg.backend = "psync";
	cfg.dirty_writeback_ms = 0;
	cfg.dirty_background_bytes = MIB;
	cfg.dirty_bytes = 0;
	cfg.rate_limit_bytes_per_sec = 4096;
	bdi = open_bdi(&img, &clk, &cfg);
	open_dirty_store(&s, bdi, pages);
	/* Background writeback starts and meets the cap. */
	do {
		ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	} while (!st.rate_limited_ns);
	ck_assert_uint_le(st.written_pages + st.writeback_pages,
			  2 * (MIB / PS));
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_uint_eq(st.dirty_pages, 0);
	ck_assert_uint_eq(st.written_pages, pages);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_int_eq(tu_verify_device(img, &s, 1), 0);
	tu_store_destroy(&s);
	tu_image_remove(img);
}
END_TEST

/* Kick a capped pass of kind @kind (0 background, 1 periodic, 2
 * pwb_bdi_writeback) and wait until it sleeps for the bucket. */
static void start_capped_pass(struct pwb_bdi *bdi, struct tu_clock *clk,
			      int kind)
{
	struct pwb_stats st;
	uint64_t slept;

	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	slept = st.rate_limited_ns;
	if (kind == 1) {
		/* Past dirty_expire_ms: everything dirty has expired. */
		tu_clock_advance_ms(clk, 2000);
		ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_PERIODIC, 0),
				 0);
	} else {
		/* Over the threshold background passes start by themselves,
		 * but after a re-shard only at the next dirtier's kick. */
		ck_assert_int_eq(pwb_bdi_writeback(bdi, kind ? PWB_WB_ALL
							     : PWB_WB_BACKGROUND,
						   0),
				 0);
	}
	do {
		ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	} while (st.rate_limited_ns == slept);
}

/* Milliseconds of real time since @t0 (pwb__clock_monotonic). */
static uint64_t real_ms_since(uint64_t t0)
{
	return (pwb__clock_monotonic(NULL) - t0) / MS;
}

/*
 * A pass capped at 16 KiB/s with megabytes left sleeps for the bucket (the
 * injected clock stands still, so its debt never shrinks): a re-shard and
 * a policy switch must still get the flushers parked within a slice, not
 * after the pass. Real time bounds the calls (1 s); before the fix they
 * did not return at all.
 */
START_TEST(reshard_interrupts_a_capped_pass)
{
	const uint64_t pages = 2048;	/* 8 MiB */
	static const char *const kind_name[] = {
		"background", "periodic", "pwb_bdi_writeback",
	};
	struct tu_clock clk = { .now = 10 * SEC };
	struct pwb_bdi_config cfg;
	struct pwb_stats st;
	struct tu_store s;
	struct pwb_bdi *bdi;
	uint64_t t0, ms;
	char *img;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.dirty_writeback_ms = 0;	/* passes only when the test asks */
	cfg.dirty_expire_ms = 1000;
	cfg.dirty_background_bytes = _i == 0 ? MIB : 32 * MIB;
	cfg.dirty_bytes = 0;
	cfg.rate_limit_bytes_per_sec = 16 * 1024;
	bdi = open_bdi(&img, &clk, &cfg);
	open_dirty_store(&s, bdi, pages);

	start_capped_pass(bdi, &clk, _i);
	t0 = pwb__clock_monotonic(NULL);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, 2), 0);
	ms = real_ms_since(t0);
	ck_assert_msg(ms < 1000, "%s pass: re-shard took %llu ms",
		      kind_name[_i], (unsigned long long)ms);

	start_capped_pass(bdi, &clk, _i);
	t0 = pwb__clock_monotonic(NULL);
	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "xarray"), 0);
	ms = real_ms_since(t0);
	ck_assert_msg(ms < 1000, "%s pass: policy switch took %llu ms",
		      kind_name[_i], (unsigned long long)ms);

	/* The cap held: megabytes are still dirty. */
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_uint_ge(st.dirty_pages, 2 * MIB / PS);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_int_eq(tu_verify_device(img, &s, 1), 0);
	tu_store_destroy(&s);
	tu_image_remove(img);
}
END_TEST

#define MAX_EVENTS 4096

struct event_log {
	pthread_mutex_t lock;
	unsigned int nr;
	struct pwb_event ev[MAX_EVENTS];
	pthread_t thread[MAX_EVENTS];
};

static void log_event(const struct pwb_event *ev, void *arg)
{
	struct event_log *log = arg;

	pthread_mutex_lock(&log->lock);
	if (log->nr < MAX_EVENTS) {
		log->thread[log->nr] = pthread_self();
		log->ev[log->nr++] = *ev;
	}
	pthread_mutex_unlock(&log->lock);
}

/*
 * Passes of every kind report a start and an end that pair up per
 * context, the ends count every page written, and a dirtier held at the
 * limit (writes slowed by a delay fault) reports its sleeps.
 */
START_TEST(events_arrive_and_pair_up)
{
	const uint64_t pages = 256;	/* 1 MiB per inode */
	struct tu_clock clk = { .now = 10 * SEC };
	static struct event_log log;
	struct pwb_fault delay = {
		.kind = PWB_FAULT_DELAY, .every = 1, .delay_ms = 20,
	};
	struct pwb_bdi_config cfg;
	struct tu_store s[2];
	struct pwb_bdi *bdi;
	uint64_t sum = 0, throttles = 0, starts = 0;
	int open_reason[2] = { 0, 0 };
	char *img;
	unsigned int i, k;

	memset(&log, 0, sizeof(log));
	pthread_mutex_init(&log.lock, NULL);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 2;
	/* One write in flight, as these tests were written for. */
	cfg.backend = "psync";
	cfg.dirty_writeback_ms = 0;
	cfg.dirty_background_bytes = 128 * 1024;
	cfg.dirty_bytes = 256 * 1024;
	cfg.flags = PWB_BDI_THROTTLE;
	cfg.event = log_event;
	cfg.event_arg = &log;
	bdi = open_bdi(&img, &clk, &cfg);
	for (k = 0; k < 2; k++) {
		tu_store_init(&s[k], k, PS, pages, k * pages * PS);
		ck_assert_int_eq(tu_store_open(&s[k], bdi), 0);
		for (i = 0; i < pages; i++)
			tu_fill_page(&s[k], i, 1);
	}
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &delay), 0);
	/* Far above dirty_bytes: the dirtier must wait for the device. */
	ck_assert_int_eq(pwb_mark_dirty(s[0].inode, 0, pages * PS), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, NULL), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(pwb_mark_dirty(s[1].inode, 0, pages * PS), 0);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	ck_assert_uint_lt(log.nr, MAX_EVENTS);
	for (i = 0; i < log.nr; i++) {
		const struct pwb_event *ev = &log.ev[i];

		if (ev->type == PWB_EV_THROTTLE) {
			ck_assert_uint_gt(ev->duration_ns, 0);
			throttles++;
			continue;
		}
		ck_assert_uint_lt(ev->ctx, 2);
		if (ev->type == PWB_EV_WB_START) {
			ck_assert_msg(!open_reason[ev->ctx],
				      "event %u: ctx %u started twice", i,
				      ev->ctx);
			open_reason[ev->ctx] = ev->reason;
			starts++;
			/* Its end comes on the same thread. */
			for (k = i + 1; k < log.nr; k++)
				if (log.ev[k].type == PWB_EV_WB_END &&
				    log.ev[k].ctx == ev->ctx)
					break;
			ck_assert_uint_lt(k, log.nr);
			ck_assert(pthread_equal(log.thread[k], log.thread[i]));
			continue;
		}
		ck_assert_int_eq(ev->type, PWB_EV_WB_END);
		ck_assert_int_eq((int)ev->reason, open_reason[ev->ctx]);
		open_reason[ev->ctx] = 0;
		sum += ev->pages;
	}
	ck_assert_int_eq(open_reason[0], 0);
	ck_assert_int_eq(open_reason[1], 0);
	/* pwb_sync and two pwb_bdi_writeback on 2 contexts, and close. */
	ck_assert_uint_ge(starts, 6);
	ck_assert_uint_gt(throttles, 0);
	ck_assert_uint_eq(sum, 2 * pages);
	ck_assert_int_eq(tu_verify_device(img, s, 2), 0);
	for (k = 0; k < 2; k++)
		tu_store_destroy(&s[k]);
	tu_image_remove(img);
	pthread_mutex_destroy(&log.lock);
}
END_TEST

static Suite *pacing_suite(void)
{
	Suite *s = suite_create("pacing");
	TCase *tc = tcase_create("bucket");
	TCase *tq = tcase_create("queue");

	tcase_add_test(tc, bucket_refills_at_the_rate);
	tcase_add_test(tc, burst_is_at_least_one_request);
	tcase_add_test(tc, no_cap_never_waits);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tq, 30);
	tcase_add_test(tq, queued_work_is_served_by_class);
	tcase_add_test(tq, sync_ignores_the_cap);
	tcase_add_loop_test(tq, reshard_interrupts_a_capped_pass, 0, 3);
	tcase_add_test(tq, events_arrive_and_pair_up);
	suite_add_tcase(s, tq);
	return s;
}

int main(void)
{
	return tu_run_suite(pacing_suite(), true);
}
