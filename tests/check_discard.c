// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_discard.c - durable metadata, discard, stable pages, page state
 *
 * White-box: reads struct pwb_inode under its lock and the context's
 * counters. The bdi runs on a fake clock with periodic and background
 * writeback off, so pages are written only when the test asks.
 */
#define _GNU_SOURCE
#include "pwb-internal.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024ull * 1024)
#define PS 4096u
#define STORE_PAGES 64
#define IMAGE_SIZE (16 * MiB)
#define T0 (1000ull * PWB__NSEC_PER_SEC)

static char *image;
static struct tu_clock clk;
static struct pwb_bdi *bdi;

static void cfg_quiet(struct pwb_bdi_config *cfg)
{
	pwb_bdi_config_init(cfg);
	cfg->nr_wb_ctx = 1;
	cfg->backend = "psync";
	cfg->clock = tu_clock_read;
	cfg->clock_arg = &clk;
	cfg->dirty_writeback_ms = 0;
	cfg->dirty_background_bytes = 0;
	cfg->dirty_bytes = 0;
}

static void setup(void)
{
	struct pwb_bdi_config cfg;

	tu_clock_set(&clk, T0);
	image = tu_image_create(IMAGE_SIZE);
	cfg_quiet(&cfg);
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
}

static void teardown(void)
{
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	bdi = NULL;
	tu_image_remove(image);
	image = NULL;
}

static uint64_t device_flushes(void)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	return st.device_flushes;
}

/* ------------------------------------------------------------------ */
/* Durable metadata                                                    */

static int wi_calls;

static int count_write_inode(struct pwb_inode *inode, int sync)
{
	(void)inode;
	(void)sync;
	__atomic_add_fetch(&wi_calls, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static void meta_store_open(struct tu_store *st, struct pwb_inode_ops *ops,
			    uint64_t ino)
{
	tu_store_init(st, ino, PS, STORE_PAGES, (ino - 1) * STORE_PAGES * PS);
	*ops = tu_ops;
	ops->write_inode = count_write_inode;
	ck_assert_int_eq(pwb_inode_open(bdi, ino, ops, st, &st->inode), 0);
}

/* An inode whose only dirty state is its metadata: fsync writes it and
 * then flushes the device, once; a second fsync has nothing to flush. */
START_TEST(fsync_of_metadata_only_flushes_the_device)
{
	struct pwb_inode_ops ops;
	struct tu_store st;
	uint64_t f0;

	wi_calls = 0;
	meta_store_open(&st, &ops, 1);
	f0 = device_flushes();
	ck_assert_int_eq(pwb_mark_inode_dirty(st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_int_eq(wi_calls, 1);
	ck_assert_uint_eq(device_flushes(), f0 + 1);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_uint_eq(device_flushes(), f0 + 1);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_store_destroy(&st);
}
END_TEST

/* The same through pwb_sync, and for metadata that a background-style
 * pass (pwb_bdi_writeback) wrote before the sync: the sync still owes a
 * flush for it. */
START_TEST(sync_flushes_after_metadata_written_by_any_pass)
{
	struct pwb_inode_ops ops;
	struct tu_store st;
	uint64_t f0;

	wi_calls = 0;
	meta_store_open(&st, &ops, 2);
	f0 = device_flushes();
	ck_assert_int_eq(pwb_mark_inode_dirty(st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(wi_calls, 1);
	ck_assert_uint_eq(device_flushes(), f0 + 1);

	ck_assert_int_eq(pwb_mark_inode_dirty(st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(wi_calls, 2);
	ck_assert_uint_eq(device_flushes(), f0 + 1);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_uint_eq(device_flushes(), f0 + 2);
	/* Nothing new since: no flush. */
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_uint_eq(device_flushes(), f0 + 2);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_store_destroy(&st);
}
END_TEST

static Suite *discard_suite(void)
{
	Suite *s = suite_create("discard");
	TCase *tc = tcase_create("durable-metadata");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, fsync_of_metadata_only_flushes_the_device);
	tcase_add_test(tc, sync_flushes_after_metadata_written_by_any_pass);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(discard_suite(), false);
}
