/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_wal.c - the write-ahead rule and "not now" pages, white-box
 *
 * Per-page LSNs in the page map (cost, maximum, reset, -ENOMEM), pages held
 * back while their LSN is above the durable LSN, log_force once per batch
 * with the batch's highest LSN, integrity sync forcing the log first and
 * reporting a log_force error, get_page returning -EAGAIN in background
 * and integrity passes.
 *
 * Every bdi reads a fake clock, has no periodic timer and no background
 * threshold: passes run only when a test asks (pwb_bdi_writeback with
 * PWB_WB_WAIT, pwb_fsync). Callbacks record what they saw; tests assert
 * after the call returns.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

extern long pwb__map_fail_alloc_after PWB__INTERNAL;
size_t pwb__map_memory(const struct pwb__map *map) PWB__INTERNAL;
const char *pwb__map_check(const struct pwb__map *map) PWB__INTERNAL;

#define PS 4096u
#define T0 (1000ull * PWB__NSEC_PER_SEC)
#define NPAGES 16u

/* ---------------------------------------------------------------------- */
/* The page map's LSNs                                                    */

START_TEST(test_map_lsn_keeps_highest_until_reset)
{
	struct pwb__map map;
	uint64_t ok;

	pwb__map_init(&map);
	ck_assert_int_eq(pwb__map_set_lsn(&map, 10, 13, 7), 4);
	/* Already dirty: no page newly dirty, but the LSN still rises. */
	ck_assert_int_eq(pwb__map_set_lsn(&map, 11, 11, 9), 0);
	/* A lower LSN does not lower it. */
	ck_assert_int_eq(pwb__map_set_lsn(&map, 12, 12, 3), 0);
	ck_assert_uint_eq(pwb__map_lsn(&map, 10), 7);
	ck_assert_uint_eq(pwb__map_lsn(&map, 11), 9);
	ck_assert_uint_eq(pwb__map_lsn(&map, 12), 7);
	ck_assert_uint_eq(pwb__map_lsn(&map, 14), 0);
	ck_assert_uint_eq(pwb__map_lsn_max(&map, 10, 4, 7, &ok), 9);
	ck_assert_uint_eq(ok, 1);	/* page 11 is the first above 7 */
	ck_assert_uint_eq(pwb__map_lsn_max(&map, 10, 4, 9, &ok), 9);
	ck_assert_uint_eq(ok, 4);
	pwb__map_lsn_reset(&map, 10, 2);
	ck_assert_uint_eq(pwb__map_lsn(&map, 11), 0);
	ck_assert_uint_eq(pwb__map_lsn(&map, 12), 7);
	/* Across leaves (512 pages each) and heights. */
	ck_assert_int_eq(pwb__map_set_lsn(&map, 500, 2000, 40), 1501);
	ck_assert_uint_eq(pwb__map_lsn_max(&map, 0, 4096, UINT64_MAX, &ok), 40);
	ck_assert_uint_eq(pwb__map_lsn(&map, 1999), 40);
	ck_assert_ptr_null(pwb__map_check(&map));
	/* Clearing every tag frees the leaves and their arrays. */
	pwb__map_clear(&map, PWB__TAG_DIRTY, 0, UINT64_MAX);
	ck_assert_uint_eq(map.nr_lsn, 0);
	ck_assert_uint_eq(map.nr_nodes, 0);
	pwb__map_destroy(&map);
}
END_TEST

START_TEST(test_map_lsn_cost_only_where_used)
{
	struct pwb__map plain, lsn;
	uint64_t pages = 1u << 16;

	pwb__map_init(&plain);
	pwb__map_init(&lsn);
	ck_assert_int_eq(pwb__map_set_lsn(&plain, 0, pages - 1, 0),
			 (int64_t)pages);
	ck_assert_int_eq(pwb__map_set_lsn(&lsn, 0, pages - 1, 5),
			 (int64_t)pages);
	ck_assert_uint_eq(plain.nr_lsn, 0);
	/* Issue 5's bound for plain pages, far below 16 B a page. */
	ck_assert_uint_le(pwb__map_memory(&plain), pages * 1);
	/* With LSNs: 8 B a page more, still within 16. */
	ck_assert_uint_le(pwb__map_memory(&lsn), pages * 9);
	ck_assert_uint_ge(pwb__map_memory(&lsn), pages * 8);
	pwb__map_destroy(&plain);
	pwb__map_destroy(&lsn);
}
END_TEST

START_TEST(test_map_lsn_enomem_leaves_nothing_dirty)
{
	struct pwb__map map;

	pwb__map_init(&map);
	/* The leaf may be allocated, its LSN array not. */
	pwb__map_fail_alloc_after = 1;
	ck_assert_int_eq(pwb__map_set_lsn(&map, 3, 3, 8), -ENOMEM);
	pwb__map_fail_alloc_after = -1;
	ck_assert_uint_eq(map.count[PWB__TAG_DIRTY], 0);
	ck_assert_ptr_null(pwb__map_check(&map));
	ck_assert_uint_eq(map.nr_nodes, 0);
	pwb__map_destroy(&map);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A bdi with one store and recording callbacks                           */

struct env {
	char *img;
	struct tu_clock clock;
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct tu_store st;
	/* log_force */
	int force_err;			/* returned by log_force */
	atomic_uint forces;
	atomic_ullong last_forced;
	atomic_ullong written_before_force; /* pages written at 1st force */
	atomic_int force_off_flusher;	/* a force ran on another thread */
	/* get_page */
	atomic_int latch_left;		/* -EAGAIN for latch_index this often */
	uint64_t latch_index;
	atomic_int report_durable;	/* get_page of another page reports */
	uint64_t durable_to_report;
	atomic_uint end_writes_latched;	/* end_write named latch_index */
	atomic_uint get_pages_latched;	/* get_page calls for latch_index */
	/* A discard of latch_index started from inside its get_page. */
	atomic_int discard_at_latch;	/* arm: the next latched get_page */
	pthread_t discarder;
	atomic_int discard_rc;
};

static struct env *g_env;
static char *g_img;

static void remove_stale_image(void)
{
	if (g_img)
		unlink(g_img);
}

static int rec_log_force(uint64_t lsn, void *arg)
{
	struct env *e = arg;

	if (atomic_fetch_add(&e->forces, 1) == 0) {
		pthread_mutex_lock(&e->st.lock);
		atomic_store(&e->written_before_force, e->st.pages_written);
		pthread_mutex_unlock(&e->st.lock);
	}
	if (!pwb__in_flusher())
		atomic_store(&e->force_off_flusher, 1);
	atomic_store(&e->last_forced, lsn);
	return e->force_err;
}

static void *discard_main(void *arg)
{
	struct env *e = arg;

	atomic_store(&e->discard_rc,
		     pwb_inode_discard(e->st.inode, e->latch_index * PS, PS));
	return NULL;
}

/* On the flusher, inside get_page of the latched page: start a discard of
 * that page on another thread and return once it waits for this write
 * (up to 5 s), so the page is latched while the discard runs. */
static void latch_under_discard(struct env *e)
{
	unsigned int i;

	if (pthread_create(&e->discarder, NULL, discard_main, e))
		abort();
	for (i = 0; i < 5000 && !PWB__READ(e->st.inode->discarding); i++)
		usleep(1000);
}

static int rec_get_page(struct pwb_inode *inode, uint64_t index,
			const void **data)
{
	struct env *e = g_env;

	if (index == e->latch_index)
		atomic_fetch_add(&e->get_pages_latched, 1);
	if (index == e->latch_index && atomic_load(&e->latch_left) > 0) {
		atomic_fetch_sub(&e->latch_left, 1);
		if (atomic_exchange(&e->discard_at_latch, 0))
			latch_under_discard(e);
		return -EAGAIN;
	}
	if (index != e->latch_index && atomic_exchange(&e->report_durable, 0))
		pwb_bdi_log_durable(e->bdi, e->durable_to_report);
	return tu_ops.get_page(inode, index, data);
}

static void rec_end_write(struct pwb_inode *inode, uint64_t index,
			  uint64_t nr, int err)
{
	struct env *e = g_env;

	if (e->latch_index >= index && e->latch_index < index + nr)
		atomic_fetch_add(&e->end_writes_latched, 1);
	tu_ops.end_write(inode, index, nr, err);
}

static const struct pwb_inode_ops rec_ops = {
	.get_page = rec_get_page,
	.map_page = NULL,	/* set from tu_ops at open */
	.end_write = rec_end_write,
};

static void env_open(struct env *e, bool with_force)
{
	struct pwb_inode_ops ops = rec_ops;
	unsigned int i;
	int rc;

	memset(e, 0, sizeof(*e));
	g_env = e;
	e->latch_index = UINT64_MAX;
	tu_clock_set(&e->clock, T0);
	pwb_bdi_config_init(&e->cfg);
	e->cfg.nr_wb_ctx = 1;
	e->cfg.page_size = PS;
	e->cfg.backend = "psync";
	e->cfg.dirty_writeback_ms = 0;
	e->cfg.dirty_background_bytes = 0;
	e->cfg.dirty_bytes = 0;
	e->cfg.clock = tu_clock_read;
	e->cfg.clock_arg = &e->clock;
	if (with_force) {
		e->cfg.log_force = rec_log_force;
		e->cfg.log_force_arg = e;
	}
	e->img = tu_image_create((uint64_t)NPAGES * PS);
	g_img = e->img;
	rc = pwb_bdi_open(e->img, &e->cfg, &e->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open: %s (%s)", pwb_strerror(rc),
		      pwb_errmsg());
	tu_store_init(&e->st, 1, PS, NPAGES, 0);
	ops.map_page = tu_ops.map_page;
	rc = pwb_inode_open(e->bdi, 1, &ops, &e->st, &e->st.inode);
	ck_assert_int_eq(rc, 0);
	for (i = 0; i < NPAGES; i++)
		tu_fill_page(&e->st, i, 1);
}

static void env_close(struct env *e)
{
	ck_assert_int_eq(pwb_bdi_close(e->bdi), 0);
	tu_store_destroy(&e->st);
	tu_image_remove(e->img);
	g_img = NULL;
	g_env = NULL;
}

/* The version page @index holds on the device (0: never written). */
static uint32_t device_version(struct env *e, uint64_t index)
{
	static uint64_t buf[PS / 8] __attribute__((aligned(4096)));

	ck_assert_int_eq(tu_read_device(e->img, index * PS, buf, PS), 0);
	return (uint32_t)buf[0];
}

static void dirty_lsn(struct env *e, uint64_t index, uint64_t n, uint64_t lsn)
{
	int rc = pwb_mark_dirty_lsn(e->st.inode, index * PS, n * PS, lsn);

	ck_assert_msg(rc == 0, "pwb_mark_dirty_lsn: %s", pwb_strerror(rc));
}

static void write_all(struct env *e)
{
	ck_assert_int_eq(pwb_bdi_writeback(e->bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
}

static struct pwb_stats stats(struct env *e)
{
	struct pwb_stats s;

	ck_assert_int_eq(pwb_bdi_stats(e->bdi, &s), 0);
	return s;
}

static uint64_t dirty_pages(struct env *e)
{
	uint64_t nr;

	ck_assert_int_eq(pwb_inode_dirty_pages(e->st.inode, &nr), 0);
	return nr;
}

/* ---------------------------------------------------------------------- */
/* Holding back, forcing                                                  */

START_TEST(test_pages_above_durable_lsn_held_without_log_force)
{
	struct env e;

	env_open(&e, false);
	dirty_lsn(&e, 0, 2, 10);	/* above the durable LSN */
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 2 * PS, PS), 0);
	dirty_lsn(&e, 3, 1, 5);		/* at the durable LSN */
	ck_assert_int_eq(pwb_bdi_log_durable(e.bdi, 5), 0);
	ck_assert_int_eq(pwb_bdi_log_durable(e.bdi, 2), 0);	/* ignored */
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 0), 0);
	ck_assert_uint_eq(device_version(&e, 1), 0);
	ck_assert_uint_eq(device_version(&e, 2), 1);	/* plain: never held */
	ck_assert_uint_eq(device_version(&e, 3), 1);
	ck_assert_uint_eq(dirty_pages(&e), 2);
	ck_assert_uint_ge(stats(&e).lsn_held_pages, 2);
	ck_assert_uint_eq(stats(&e).io_errors, 0);
	/* The log catches up: a later pass writes them, and no error was
	 * recorded for having held them. */
	ck_assert_int_eq(pwb_bdi_log_durable(e.bdi, 10), 0);
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(device_version(&e, 1), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_log_force_once_per_batch_with_highest_lsn_before_write)
{
	struct env e;
	unsigned int i;

	env_open(&e, true);
	for (i = 0; i < 8; i++)
		dirty_lsn(&e, i, 1, 100 + i);	/* one contiguous batch */
	/* A latched plain page keeps the page map's leaf alive. */
	e.latch_index = 15;
	atomic_store(&e.latch_left, 1 << 30);
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 15 * PS, PS), 0);
	write_all(&e);
	ck_assert_uint_eq(atomic_load(&e.forces), 1);
	ck_assert_uint_eq(atomic_load(&e.last_forced), 107);
	ck_assert_uint_eq(atomic_load(&e.written_before_force), 0);
	ck_assert_int_eq(atomic_load(&e.force_off_flusher), 0);
	ck_assert_uint_eq(stats(&e).log_forces, 1);
	for (i = 0; i < 8; i++)
		ck_assert_uint_eq(device_version(&e, i), 1);
	/* Written pages forget their LSN ("since it was last written"). */
	pthread_mutex_lock(&e.st.inode->lock);
	ck_assert_uint_eq(pwb__map_lsn(&e.st.inode->map, 7), 0);
	pthread_mutex_unlock(&e.st.inode->lock);
	/* Dirtying one again with an LSN already durable needs no force. */
	dirty_lsn(&e, 2, 1, 50);
	atomic_store(&e.latch_left, 0);
	write_all(&e);
	ck_assert_uint_eq(atomic_load(&e.forces), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_fsync_forces_log_first_up_to_highest_lsn)
{
	struct env e;

	env_open(&e, true);
	dirty_lsn(&e, 0, 1, 3);
	dirty_lsn(&e, 5, 1, 70);	/* another batch */
	dirty_lsn(&e, 9, 1, 20);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	/* One force for the whole sync, not one per batch. */
	ck_assert_uint_eq(atomic_load(&e.forces), 1);
	ck_assert_uint_eq(atomic_load(&e.last_forced), 70);
	ck_assert_uint_eq(device_version(&e, 5), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_log_force_error_keeps_pages_dirty_reported_by_sync_only)
{
	struct env e;

	env_open(&e, true);
	e.force_err = -EIO;
	dirty_lsn(&e, 0, 2, 9);
	/* A background-style pass: pages stay dirty, nothing recorded. */
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 0), 0);
	ck_assert_uint_eq(dirty_pages(&e), 2);
	/* Integrity sync reports the error, pages still dirty. */
	ck_assert_int_eq(pwb_fsync(e.st.inode), -EIO);
	ck_assert_uint_eq(dirty_pages(&e), 2);
	ck_assert_uint_eq(device_version(&e, 1), 0);
	/* The log works again: the next fsync writes them, and the error
	 * was reported once to fsync, once to pwb_sync (its own cursor). */
	e.force_err = 0;
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(device_version(&e, 1), 1);
	ck_assert_int_eq(pwb_sync(e.bdi), -EIO);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(stats(&e).io_errors, 0);
	ck_assert_int_eq(pwb_inode_error(e.st.inode), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_fsync_without_log_force_waits_for_durable_report)
{
	struct env e;

	env_open(&e, false);
	dirty_lsn(&e, 0, 1, 30);
	/* The report comes while the sync runs (from get_page of page 1,
	 * after page 0 was passed over). */
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, PS, PS), 0);
	e.durable_to_report = 30;
	atomic_store(&e.report_durable, 1);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_fsync_without_log_force_fails_busy_when_log_never_durable)
{
	struct env e;

	env_open(&e, false);
	dirty_lsn(&e, 4, 1, 30);
	ck_assert_int_eq(pwb_fsync(e.st.inode), -EBUSY);
	ck_assert_uint_eq(device_version(&e, 4), 0);
	ck_assert_uint_eq(dirty_pages(&e), 1);
	ck_assert_int_eq(pwb_bdi_log_durable(e.bdi, 30), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 4), 1);
	ck_assert_int_eq(pwb_sync(e.bdi), -EBUSY);
	env_close(&e);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* get_page -EAGAIN                                                       */

START_TEST(test_latched_page_stays_dirty_without_error)
{
	struct env e;

	env_open(&e, false);
	e.latch_index = 1;
	atomic_store(&e.latch_left, 1000);
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 0, 3 * PS), 0);
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(device_version(&e, 1), 0);
	ck_assert_uint_eq(device_version(&e, 2), 1);
	ck_assert_uint_eq(dirty_pages(&e), 1);
	ck_assert_uint_ge(stats(&e).latched_pages, 1);
	ck_assert_uint_eq(stats(&e).io_errors, 0);
	ck_assert_uint_eq(atomic_load(&e.end_writes_latched), 0);
	/* Unlatched: a later pass writes it; no error was ever recorded. */
	atomic_store(&e.latch_left, 0);
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 1), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_fsync_retries_latched_page_until_written)
{
	struct env e;

	env_open(&e, false);
	e.latch_index = 2;
	atomic_store(&e.latch_left, 3);
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 0, 4 * PS), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 2), 1);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	ck_assert_uint_eq(stats(&e).latched_pages, 3);
	env_close(&e);
}
END_TEST

START_TEST(test_fsync_of_page_latched_for_good_fails_busy)
{
	struct env e;

	env_open(&e, false);
	e.latch_index = 0;
	atomic_store(&e.latch_left, 1 << 30);
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 0, 2 * PS), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), -EBUSY);
	ck_assert_uint_eq(device_version(&e, 0), 0);
	ck_assert_uint_eq(device_version(&e, 1), 1);
	ck_assert_uint_eq(dirty_pages(&e), 1);
	atomic_store(&e.latch_left, 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_int_eq(pwb_sync(e.bdi), -EBUSY);
	env_close(&e);
}
END_TEST

START_TEST(test_page_latched_while_discarded_stays_discarded)
{
	struct env e;

	env_open(&e, false);
	e.latch_index = 1;
	atomic_store(&e.latch_left, 1);
	atomic_store(&e.discard_at_latch, 1);
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 0, 3 * PS), 0);
	write_all(&e);
	pthread_join(e.discarder, NULL);
	ck_assert_int_eq(atomic_load(&e.discard_rc), 0);
	/* The latched page is gone, not postponed: not dirty, never
	 * asked for again. */
	ck_assert_int_eq(pwb_page_state(e.st.inode, 1), 0);
	ck_assert_uint_eq(dirty_pages(&e), 0);
	write_all(&e);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(atomic_load(&e.get_pages_latched), 1);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(device_version(&e, 1), 0);
	ck_assert_uint_eq(device_version(&e, 2), 1);
	env_close(&e);
}
END_TEST

START_TEST(test_discard_forgets_lsn_of_dropped_pages)
{
	struct env e;

	env_open(&e, false);
	dirty_lsn(&e, 0, 2, 10);	/* held: the log is durable to 0 */
	write_all(&e);
	ck_assert_uint_eq(dirty_pages(&e), 2);
	ck_assert_int_eq(pwb_inode_discard(e.st.inode, 0, PS), 0);
	/* Dirtied again plainly: LSN 0, written at once, while page 1
	 * keeps its LSN and stays held. */
	ck_assert_int_eq(pwb_mark_dirty(e.st.inode, 0, PS), 0);
	write_all(&e);
	ck_assert_uint_eq(device_version(&e, 0), 1);
	ck_assert_uint_eq(device_version(&e, 1), 0);
	ck_assert_int_eq(pwb_bdi_log_durable(e.bdi, 10), 0);
	ck_assert_int_eq(pwb_fsync(e.st.inode), 0);
	ck_assert_uint_eq(device_version(&e, 1), 1);
	env_close(&e);
}
END_TEST

static Suite *wal_suite(void)
{
	Suite *s = suite_create("wal");
	TCase *tc;

	tc = tcase_create("pagemap");
	tcase_add_test(tc, test_map_lsn_keeps_highest_until_reset);
	tcase_add_test(tc, test_map_lsn_cost_only_where_used);
	tcase_add_test(tc, test_map_lsn_enomem_leaves_nothing_dirty);
	suite_add_tcase(s, tc);

	tc = tcase_create("rule");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pages_above_durable_lsn_held_without_log_force);
	tcase_add_test(tc,
		       test_log_force_once_per_batch_with_highest_lsn_before_write);
	tcase_add_test(tc, test_fsync_forces_log_first_up_to_highest_lsn);
	tcase_add_test(tc,
		       test_log_force_error_keeps_pages_dirty_reported_by_sync_only);
	tcase_add_test(tc, test_fsync_without_log_force_waits_for_durable_report);
	tcase_add_test(tc,
		       test_fsync_without_log_force_fails_busy_when_log_never_durable);
	suite_add_tcase(s, tc);

	tc = tcase_create("not-now");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_latched_page_stays_dirty_without_error);
	tcase_add_test(tc, test_fsync_retries_latched_page_until_written);
	tcase_add_test(tc, test_fsync_of_page_latched_for_good_fails_busy);
	tcase_add_test(tc, test_page_latched_while_discarded_stays_discarded);
	tcase_add_test(tc, test_discard_forgets_lsn_of_dropped_pages);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (tu_odirect_unsupported())
		return 77;
	atexit(remove_stale_image);
	return tu_run_suite(wal_suite(), false);
}
