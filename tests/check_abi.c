// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_abi.c - the sized entry points and the small API rules
 *
 * The functions that take a struct of pwb.h take its size too (pwb.h's
 * macros pass sizeof). Here the size is passed by hand, as a program
 * built against an older or a newer header passes it: the library must
 * read and write only that many bytes, give the fields it does not know
 * back as zero, refuse a newer struct that sets fields it does not know
 * (-E2BIG) and a size below the first layout (-EINVAL). Also the error
 * conventions changed for the first release (pwb_inode_error(NULL),
 * pwb_bdi_nr_wb_ctx(NULL), pwb_bdi_fault_hits). Public API only, plus the
 * first-layout sizes of lib/abi.h.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "abi.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#define MiB (1024ull * 1024)
#define EXTRA 32	/* bytes a "newer header" adds */
#define CANARY 0xa5

static char *image;

static void image_setup(void)
{
	image = tu_image_create(4 * MiB);
}

static void image_teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

static struct pwb_bdi *open_bdi(void)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	int ret;

	pwb_bdi_config_init(&cfg);
	cfg.dirty_writeback_ms = 0;
	cfg.backend = "psync";
	cfg.nr_wb_ctx = 2;
	ret = pwb_bdi_open(image, &cfg, &bdi);
	ck_assert_msg(ret == 0, "pwb_bdi_open: %s", pwb_errmsg());
	return bdi;
}

static void assert_bytes(const unsigned char *p, size_t n, unsigned char v,
			 const char *what)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(p[i] == v, "%s: byte %zu is 0x%02x, want 0x%02x",
			      what, i, p[i], v);
}

/* ------------------------------------------------------------------ */

START_TEST(config_init_fills_only_the_callers_size)
{
	union {
		struct pwb_bdi_config cfg;
		unsigned char b[sizeof(struct pwb_bdi_config) + EXTRA];
	} u;

	/* An older header: nothing past its struct is touched. */
	memset(&u, CANARY, sizeof(u));
	(pwb_bdi_config_init)(&u.cfg, PWB__CONFIG_SZ_0_1);
	ck_assert_uint_eq(u.cfg.page_size, 4096);
	assert_bytes(u.b + PWB__CONFIG_SZ_0_1,
		     sizeof(u) - PWB__CONFIG_SZ_0_1, CANARY, "older config");
	/* A newer header: the fields this library does not know are 0. */
	memset(&u, CANARY, sizeof(u));
	(pwb_bdi_config_init)(&u.cfg, sizeof(u));
	ck_assert_uint_eq(u.cfg.page_size, 4096);
	assert_bytes(u.b + sizeof(u.cfg), EXTRA, 0, "newer config");
}
END_TEST

START_TEST(open_takes_a_newer_config_with_unknown_fields_zero)
{
	union {
		struct pwb_bdi_config cfg;
		unsigned char b[sizeof(struct pwb_bdi_config) + EXTRA];
	} u;
	struct pwb_bdi *bdi;
	int ret;

	(pwb_bdi_config_init)(&u.cfg, sizeof(u));
	u.cfg.dirty_writeback_ms = 0;
	ret = (pwb_bdi_open)(image, &u.cfg, sizeof(u), &bdi);
	ck_assert_msg(ret == 0, "%s", pwb_errmsg());
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	u.b[sizeof(u.cfg) + 3] = 1;	/* a field this library lacks */
	ret = (pwb_bdi_open)(image, &u.cfg, sizeof(u), &bdi);
	ck_assert_int_eq(ret, -E2BIG);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "pwb_bdi_config"));

	ret = (pwb_bdi_open)(image, &u.cfg, PWB__CONFIG_SZ_0_1 - 1, &bdi);
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "first layout"));
}
END_TEST

START_TEST(stats_and_info_write_only_the_callers_size)
{
	union {
		struct pwb_stats st;
		unsigned char b[sizeof(struct pwb_stats) + EXTRA];
	} s;
	union {
		struct pwb_bdi_info info;
		unsigned char b[sizeof(struct pwb_bdi_info) + EXTRA];
	} in;
	struct pwb_bdi *bdi = open_bdi();

	memset(&s, CANARY, sizeof(s));
	ck_assert_int_eq((pwb_bdi_stats)(bdi, &s.st, PWB__STATS_SZ_0_1), 0);
	ck_assert_uint_eq(s.st.dirty_pages, 0);
	assert_bytes(s.b + PWB__STATS_SZ_0_1, sizeof(s) - PWB__STATS_SZ_0_1,
		     CANARY, "older stats");
	memset(&s, CANARY, sizeof(s));
	ck_assert_int_eq((pwb_bdi_stats)(bdi, &s.st, sizeof(s)), 0);
	assert_bytes(s.b + sizeof(s.st), EXTRA, 0, "newer stats");
	memset(&s, CANARY, sizeof(s));
	ck_assert_int_eq((pwb_wb_ctx_stats)(bdi, 1, &s.st, sizeof(s)), 0);
	assert_bytes(s.b + sizeof(s.st), EXTRA, 0, "newer ctx stats");
	ck_assert_int_eq((pwb_bdi_stats)(bdi, &s.st, 8), -EINVAL);
	ck_assert_int_eq((pwb_wb_ctx_stats)(bdi, 0, &s.st, 8), -EINVAL);

	memset(&in, CANARY, sizeof(in));
	ck_assert_int_eq((pwb_bdi_info)(bdi, &in.info, PWB__INFO_SZ_0_1), 0);
	ck_assert_uint_eq(in.info.nr_wb_ctx, 2);
	assert_bytes(in.b + PWB__INFO_SZ_0_1, sizeof(in) - PWB__INFO_SZ_0_1,
		     CANARY, "older info");
	memset(&in, CANARY, sizeof(in));
	ck_assert_int_eq((pwb_bdi_info)(bdi, &in.info, sizeof(in)), 0);
	assert_bytes(in.b + sizeof(in.info), EXTRA, 0, "newer info");
	ck_assert_int_eq((pwb_bdi_info)(bdi, &in.info, 8), -EINVAL);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

START_TEST(inode_open_refuses_unknown_ops)
{
	union {
		struct pwb_inode_ops ops;
		unsigned char b[sizeof(struct pwb_inode_ops) + EXTRA];
	} u;
	struct pwb_bdi *bdi = open_bdi();
	struct pwb_inode *inode;
	struct tu_store st;

	tu_store_init(&st, 1, 4096, 4, 0);
	memset(&u, 0, sizeof(u));
	u.ops = tu_ops;
	ck_assert_int_eq((pwb_inode_open)(bdi, 1, &u.ops, sizeof(u), &st,
					  &inode),
			 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	u.b[sizeof(u.ops)] = 1;		/* an op this library lacks */
	ck_assert_int_eq((pwb_inode_open)(bdi, 1, &u.ops, sizeof(u), &st,
					  &inode),
			 -E2BIG);
	ck_assert_int_eq((pwb_inode_open)(bdi, 1, &u.ops, 8, &st, &inode),
			 -EINVAL);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_store_destroy(&st);
}
END_TEST

START_TEST(fault_structs_are_sized)
{
	union {
		struct pwb_fault f;
		unsigned char b[sizeof(struct pwb_fault) + EXTRA];
	} u;
	struct pwb_bdi *bdi = open_bdi();
	uint64_t a = 1, b = 2;

	memset(&u, CANARY, sizeof(u));
	ck_assert_int_eq((pwb_fault_parse)("eio:nth=3", &u.f, sizeof(u)), 0);
	ck_assert_uint_eq(u.f.nth, 3);
	assert_bytes(u.b + sizeof(u.f), EXTRA, 0, "newer fault");
	ck_assert_int_eq((pwb_bdi_inject_fault)(bdi, &u.f, sizeof(u)), 0);
	u.b[sizeof(u.f) + 1] = 1;
	ck_assert_int_eq((pwb_bdi_inject_fault)(bdi, &u.f, sizeof(u)), -E2BIG);
	ck_assert_int_eq((pwb_fault_parse)("eio:nth=3", &u.f, 8), -EINVAL);

	/* The new name and the old one count the same hits. */
	ck_assert_int_eq(pwb_bdi_fault_hits(bdi, &a), 0);
	ck_assert_int_eq(pwb_fault_hits(bdi, &b), 0);
	ck_assert_uint_eq(a, b);
	ck_assert_int_eq(pwb_bdi_fault_hits(NULL, &a), -EINVAL);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

START_TEST(inode_error_of_null_is_ebadf)
{
	/* -EINVAL is a possible failed mark (a misaligned page). */
	ck_assert_int_eq(pwb_inode_error(NULL), -EBADF);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "NULL inode"));
}
END_TEST

START_TEST(nr_wb_ctx_failure_says_why)
{
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(NULL), 0);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "NULL bdi"));
}
END_TEST

static Suite *abi_suite(void)
{
	Suite *s = suite_create("abi");
	TCase *tc = tcase_create("sized");

	tcase_add_checked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, config_init_fills_only_the_callers_size);
	tcase_add_test(tc, open_takes_a_newer_config_with_unknown_fields_zero);
	tcase_add_test(tc, stats_and_info_write_only_the_callers_size);
	tcase_add_test(tc, inode_open_refuses_unknown_ops);
	tcase_add_test(tc, fault_structs_are_sized);
	suite_add_tcase(s, tc);

	tc = tcase_create("warts");
	tcase_add_test(tc, inode_error_of_null_is_ebadf);
	tcase_add_test(tc, nr_wb_ctx_failure_says_why);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(abi_suite(), true);
}
