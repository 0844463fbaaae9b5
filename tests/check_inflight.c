// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_inflight.c - the max_inflight cap on writes in flight per bdi.
 *
 * A stand-in backend keeps every request in flight until the flusher calls
 * its wait(), the way an asynchronous device queue does, and counts how
 * many it holds: with the cap, a flusher that has max_inflight requests
 * out completes them before it submits another.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "pwb-internal.h"
#include "test-util.h"

#define NR_EXTENTS 8u

/* Touched only by the context's flusher thread (submit and wait run
 * there); read by the test after pwb_fsync() returned. */
static struct pwb__io *held[NR_EXTENTS + 1];
static unsigned int nr_held, peak_held, nr_submitted, nr_over;

static int held_submit(void *state, struct pwb__io *io)
{
	if (nr_held == NR_EXTENTS + 1) {
		nr_over++;
		return -EIO;
	}
	held[nr_held++] = io;
	nr_submitted++;
	if (nr_held > peak_held)
		peak_held = nr_held;
	return 0;
}

static int held_wait(void *state)
{
	while (nr_held)
		pwb__io_end(held[--nr_held], 0);
	return 0;
}

static const struct pwb__io_backend held_backend = {
	.version = 1,
	.name = "held",
	.submit = held_submit,
	.wait = held_wait,
};

static void run_extents(unsigned int max_inflight)
{
	struct tu_store st;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, "null");	/* no per-context state to stand in for */
	e.cfg.max_inflight = max_inflight;
	tu_env_open(&e, 1024);
	/* No page is dirty yet: the flusher is idle and reads bdi->io only
	 * after pwb_mark_dirty() below wakes it. */
	e.bdi->io = &held_backend;

	tu_open_store(&e, &st, 1, 2 * NR_EXTENTS, 0, NULL);
	/* Every other page: NR_EXTENTS one-page extents, one request each. */
	for (i = 0; i < NR_EXTENTS; i++)
		tu_dirty_range(&st, 2 * i, 1, 1);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&st);

	ck_assert_uint_eq(nr_over, 0);
	ck_assert_uint_eq(nr_submitted, NR_EXTENTS);
	ck_assert_uint_eq(nr_held, 0);
}

START_TEST(requests_in_flight_never_exceed_max_inflight)
{
	run_extents(2);
	ck_assert_msg(peak_held == 2, "%u requests in flight at once, cap 2",
		      peak_held);
}
END_TEST

/* The control: without a cap the same writes are all out at once, so the
 * test above can tell a cap from a flusher that waits anyway. */
START_TEST(without_a_cap_every_request_is_in_flight_at_once)
{
	run_extents(0);
	ck_assert_uint_eq(peak_held, NR_EXTENTS);
}
END_TEST

static Suite *inflight_suite(void)
{
	Suite *s = suite_create("inflight");
	TCase *tc = tcase_create("cap");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, requests_in_flight_never_exceed_max_inflight);
	tcase_add_test(tc, without_a_cap_every_request_is_in_flight_at_once);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(inflight_suite(), true);
}
