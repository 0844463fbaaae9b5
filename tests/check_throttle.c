/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_throttle.c - the dirty throttle (lib/throttle.c)
 *
 * White-box: pwb__throttle_pause() is a pure function of the bdi's dirty
 * state, and pwb__throttle_dirtiers() counts threads by clock windows that
 * the test passes in: nothing in the "pause" case sleeps or reads a real
 * clock. The "bdi" case runs a throttled writer against a real bdi and
 * checks only what it got back and what reached the device.
 */
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "pwb-internal.h"
#include "test-util.h"

#define MS PWB__NSEC_PER_MSEC

/* bg 1000 pages, limit 2000: set point 1500. 4 KiB pages, 100 MiB/s. */
static struct pwb__throttle_state state(uint64_t dirty, uint64_t dirtied)
{
	struct pwb__throttle_state s = {
		.bg = 1000, .limit = 2000, .dirty = dirty,
		.bw = 100ull << 20, .dirtied = dirtied, .nr_dirtiers = 1,
		.page_shift = 12,
	};

	return s;
}

static uint64_t pause_of(struct pwb__throttle_state s, bool *hard)
{
	return pwb__throttle_pause(&s, hard);
}

START_TEST(free_run_up_to_the_set_point)
{
	struct pwb__throttle_state s = state(1500, 256);
	bool hard = true;

	ck_assert_uint_eq(pause_of(s, &hard), 0);
	ck_assert(!hard);
	s.dirty = 10;
	ck_assert_uint_eq(pause_of(s, &hard), 0);
	s.dirty = 1000000;
	s.limit = 0;		/* no limit: never throttled */
	ck_assert_uint_eq(pause_of(s, &hard), 0);
	ck_assert(!hard);
}
END_TEST

START_TEST(pause_grows_towards_the_limit)
{
	bool hard;
	/* 1 MiB owed at 100 MiB/s is 10 ms just above the set point. */
	uint64_t near = pause_of(state(1501, 256), &hard);
	uint64_t half = pause_of(state(1750, 256), &hard);
	uint64_t close = pause_of(state(1950, 256), &hard);

	ck_assert(!hard);
	ck_assert_uint_ge(near, 10 * MS);
	ck_assert_uint_le(near, 10 * MS + MS / 10);
	/* Half the room left: twice the pause; a tenth: ten times. */
	ck_assert_uint_ge(half, 2 * near - MS / 5);
	ck_assert_uint_le(half, 2 * near + MS / 5);
	ck_assert_uint_ge(close, 10 * near - MS);
	ck_assert_uint_le(close, 10 * near + MS);
}
END_TEST

START_TEST(pause_follows_bandwidth_and_dirtiers)
{
	struct pwb__throttle_state s = state(1750, 256);
	uint64_t base, faster, shared;
	bool hard;

	base = pause_of(s, &hard);
	s.bw *= 2;		/* a device twice as fast: half the pause */
	faster = pause_of(s, &hard);
	ck_assert_uint_ge(faster, base / 2 - 1);
	ck_assert_uint_le(faster, base / 2 + 1);
	s.bw /= 2;
	s.nr_dirtiers = 4;	/* a quarter of the bandwidth each */
	shared = pause_of(s, &hard);
	ck_assert_uint_ge(shared, 4 * base - 4);
	ck_assert_uint_le(shared, 4 * base + 4);
	/* The debt is paid in proportion. */
	s = state(1750, 512);
	ck_assert_uint_ge(pause_of(s, &hard), 2 * base - 2);
	ck_assert_uint_le(pause_of(s, &hard), 2 * base + 2);
}
END_TEST

START_TEST(small_debts_are_below_a_sleep)
{
	bool hard;
	/* One page at 100 MiB/s: ~40 us, owed rather than slept. */
	uint64_t p = pause_of(state(1501, 1), &hard);

	ck_assert(!hard);
	ck_assert_uint_gt(p, 0);
	ck_assert_uint_lt(p, PWB__THROTTLE_MIN_PAUSE_NS);
}
END_TEST

START_TEST(pauses_are_capped_at_200ms)
{
	bool hard;

	ck_assert_uint_eq(pause_of(state(1999, 1u << 20), &hard),
			  PWB__THROTTLE_MAX_PAUSE_NS);
	ck_assert(!hard);
	ck_assert_uint_eq(pause_of(state(1000000, 1), &hard),
			  PWB__THROTTLE_MAX_PAUSE_NS);
	ck_assert(hard);
}
END_TEST

START_TEST(at_the_limit_the_wait_is_hard)
{
	struct pwb__throttle_state s = state(2000, 0);
	bool hard = false;
	uint64_t p = pause_of(s, &hard);

	ck_assert(hard);
	ck_assert_uint_ge(p, PWB__THROTTLE_MIN_PAUSE_NS);
	ck_assert_uint_le(p, PWB__THROTTLE_MAX_PAUSE_NS);
	/* 256 pages over the limit at 100 MiB/s: ~10 ms. */
	s.dirty = 2000 + 255;
	p = pause_of(s, &hard);
	ck_assert(hard);
	ck_assert_uint_ge(p, 10 * MS - MS / 10);
	ck_assert_uint_le(p, 10 * MS + MS / 10);
}
END_TEST

struct other_dirtier {
	struct pwb_bdi *bdi;
	uint64_t now;
	unsigned int seen;
};

static void *other_dirtier_fn(void *arg)
{
	struct other_dirtier *o = arg;

	o->seen = pwb__throttle_dirtiers(o->bdi, o->now);
	return NULL;
}

START_TEST(dirtiers_are_counted_per_window)
{
	struct pwb_bdi *bdi = calloc(1, sizeof(*bdi));
	struct other_dirtier o = { .bdi = bdi, .now = 1 * MS };
	pthread_t tid;

	ck_assert_ptr_nonnull(bdi);
	ck_assert_uint_eq(pwb__throttle_dirtiers(bdi, 0), 1);
	/* Counted once per window however often it asks. */
	ck_assert_uint_eq(pwb__throttle_dirtiers(bdi, 5 * MS), 1);
	ck_assert_int_eq(pthread_create(&tid, NULL, other_dirtier_fn, &o), 0);
	pthread_join(tid, NULL);
	ck_assert_uint_eq(o.seen, 2);
	ck_assert_uint_eq(pwb__throttle_dirtiers(bdi, 10 * MS), 2);
	/* Next window: the other thread is remembered from the last one. */
	ck_assert_uint_eq(pwb__throttle_dirtiers(bdi, 250 * MS), 2);
	/* And forgotten in the one after. */
	ck_assert_uint_eq(pwb__throttle_dirtiers(bdi, 450 * MS), 1);
	/* A silent window in between counts as none. */
	o.now = 1000 * MS;
	ck_assert_int_eq(pthread_create(&tid, NULL, other_dirtier_fn, &o), 0);
	pthread_join(tid, NULL);
	ck_assert_uint_eq(o.seen, 1);
	free(bdi);
}
END_TEST

/*
 * dirty_background_bytes 0 turns background writeback off below the
 * throttle's set point, not above it: there the throttle starts it, and
 * it must write, or a writer at dirty_bytes waits for nothing until
 * throttle_timeout_ms gives it -ETIMEDOUT (which it did: the background
 * pass ended at once, finding dirty memory "under" a threshold of 0).
 */
START_TEST(throttled_writer_without_background_threshold_is_not_stalled)
{
	enum { PAGES = 2048 };	/* 8 MiB through a 1 MiB limit */
	char *img = tu_image_create((uint64_t)PAGES * 4096);
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct tu_store st;
	uint64_t i;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.backend = "psync";
	cfg.flags |= PWB_BDI_THROTTLE;
	cfg.dirty_bytes = 1 << 20;
	cfg.dirty_background_bytes = 0;
	cfg.throttle_timeout_ms = 5000;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), 0);
	tu_store_init(&st, 1, 4096, PAGES, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	for (i = 0; i < PAGES; i++) {
		int rc;

		tu_fill_page(&st, i, 1);
		rc = pwb_mark_dirty(st.inode, i * 4096, 4096);
		ck_assert_msg(rc == 0, "page %" PRIu64 ": %s", i,
			      pwb_strerror(rc));
	}
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(tu_verify_device(img, &st, 1), 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_store_destroy(&st);
	tu_image_remove(img);
}
END_TEST

static Suite *throttle_suite(void)
{
	Suite *s = suite_create("throttle");
	TCase *tc = tcase_create("pause");

	tcase_add_test(tc, free_run_up_to_the_set_point);
	tcase_add_test(tc, pause_grows_towards_the_limit);
	tcase_add_test(tc, pause_follows_bandwidth_and_dirtiers);
	tcase_add_test(tc, small_debts_are_below_a_sleep);
	tcase_add_test(tc, pauses_are_capped_at_200ms);
	tcase_add_test(tc, at_the_limit_the_wait_is_hard);
	tcase_add_test(tc, dirtiers_are_counted_per_window);
	suite_add_tcase(s, tc);

	tc = tcase_create("bdi");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc,
		throttled_writer_without_background_threshold_is_not_stalled);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(throttle_suite(), false);
}
