/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_example_util.c - examples/common/pwb-example-util.c, the helpers
 * the examples and the bench share: the size parser (sizes, suffixes,
 * overflow, garbage) and the extent copy on a real allocator-mode inode.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-example-util.h"
#include "test-util.h"

static int parse(const char *s, uint64_t *v)
{
	*v = 12345;	/* must stay untouched on failure */
	return pwbex_parse_size(s, v);
}

START_TEST(test_parse_valid)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "1", 1 },
		{ "4096", 4096 },
		{ "007", 7 },
		{ "1k", 1024 },
		{ "1K", 1024 },
		{ "512M", 512ull << 20 },
		{ "512m", 512ull << 20 },
		{ "4G", 4ull << 30 },
		{ "4g", 4ull << 30 },
		{ "0G", 0 },
		{ "18446744073709551615", UINT64_MAX },
		{ "17179869183G", 17179869183ull << 30 },
		{ "18014398509481983K", 18014398509481983ull << 10 },
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ck_assert_msg(parse(ok[i].s, &v) == 0, "\"%s\" refused",
			      ok[i].s);
		ck_assert_msg(v == ok[i].v, "\"%s\" gave %llu", ok[i].s,
			      (unsigned long long)v);
	}
}
END_TEST

START_TEST(test_parse_range)
{
	static const char *const big[] = {
		"18446744073709551616",		/* UINT64_MAX + 1 */
		"99999999999999999999999",
		"17179869184G",			/* 2^64 exactly: was 0 once */
		"18014398509481984K",
		"17592186044416M",
	};
	uint64_t v;
	size_t i;

	for (i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		ck_assert_msg(parse(big[i], &v) == -ERANGE,
			      "\"%s\" not -ERANGE", big[i]);
		ck_assert_uint_eq(v, 12345);
	}
}
END_TEST

START_TEST(test_parse_garbage)
{
	static const char *const bad[] = {
		"", "K", "G", "-1", "-0", "+1", " 1", "1 ", "\t4G", "1.5G",
		"1e3", "0x10", "1KB", "1KK", "1T", "4G\n", "12a", "abc",
		"1,5", "1_000",
	};
	uint64_t v;
	size_t i;

	ck_assert_int_eq(parse(NULL, &v), -EINVAL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(parse(bad[i], &v) == -EINVAL,
			      "\"%s\" not -EINVAL", bad[i]);
		ck_assert_uint_eq(v, 12345);
	}
}
END_TEST

static const struct pwb_inode_ops alloc_ops; /* all NULL: allocator mode */

START_TEST(test_inode_extents)
{
	struct pwb_extent *x = (void *)1, all[64];
	unsigned char buf[TU_PS];
	struct pwb_inode *a, *b;
	size_t nr = 99, total = 0;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 1024);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &alloc_ops, NULL, &a), 0);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 2, &alloc_ops, NULL, &b), 0);

	/* Nothing written: no extents, and no array. */
	ck_assert_int_eq(pwbex_inode_extents(a, &x, &nr), 0);
	ck_assert_ptr_null(x);
	ck_assert_uint_eq(nr, 0);

	/* Every other page of two inodes, in turns, one page per fsync:
	 * the holes alone give each inode several extents. */
	for (i = 0; i < 8; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		ck_assert_int_eq(pwb_write(a, buf, TU_PS, 2ull * i * TU_PS),
				 TU_PS);
		ck_assert_int_eq(pwb_fsync(a), 0);
		ck_assert_int_eq(pwb_write(b, buf, TU_PS, 2ull * i * TU_PS),
				 TU_PS);
		ck_assert_int_eq(pwb_fsync(b), 0);
	}
	ck_assert_int_eq(pwb_inode_extents(a, all, 64, &total), 0);
	ck_assert_uint_gt(total, 1);
	ck_assert_uint_le(total, 64);
	ck_assert_int_eq(pwbex_inode_extents(a, &x, &nr), 0);
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(nr, total);
	ck_assert_int_eq(memcmp(x, all, total * sizeof(*x)), 0);
	free(x);

	ck_assert_int_eq(pwb_inode_close(a), 0);
	ck_assert_int_eq(pwb_inode_close(b), 0);
	tu_env_close(&e);
}
END_TEST

static Suite *example_util_suite(void)
{
	Suite *s = suite_create("example_util");
	TCase *tc = tcase_create("parse_size");

	tcase_add_test(tc, test_parse_valid);
	tcase_add_test(tc, test_parse_range);
	tcase_add_test(tc, test_parse_garbage);
	suite_add_tcase(s, tc);
	tc = tcase_create("inode_extents");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_inode_extents);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(example_util_suite(), true);
}
