/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_xarray.c - the ordered key index behind F_ORDERED policies,
 * white-box
 *
 * Each test drives pwb__xa_* and compares with what a sorted array of the
 * same keys says: the smallest key comes out first, equal keys all come
 * out, erasing frees the nodes it empties (nr_nodes returns to 0), and
 * destroy frees what is left.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "test-util.h"

struct obj {
	struct pwb__xa_item xa;
	bool in;
};

/* Pop every item in order; check keys never go down; return the count. */
static uint64_t drain_in_order(struct pwb__xa *xa)
{
	struct pwb__xa_item *it;
	uint64_t n = 0, last = 0;

	while ((it = pwb__xa_first(xa))) {
		ck_assert_uint_ge(it->key, last);
		last = it->key;
		pwb__xa_erase(xa, it);
		((struct obj *)it)->in = false;
		n++;
	}
	ck_assert_uint_eq(xa->count, 0);
	ck_assert_uint_eq(xa->nr_nodes, 0);
	ck_assert_ptr_null(xa->root);
	return n;
}

START_TEST(test_first_is_smallest_key_over_whole_key_space)
{
	static const uint64_t keys[] = {
		UINT64_MAX, 0, 1, 63, 64, 4095, 4096, 1ull << 40,
		(1ull << 63) + 5, 262143, 7, UINT64_MAX - 1,
	};
	enum { N = sizeof(keys) / sizeof(keys[0]) };
	struct obj o[N];
	struct pwb__xa xa;
	unsigned int i;

	pwb__xa_init(&xa);
	ck_assert_ptr_null(pwb__xa_first(&xa));
	for (i = 0; i < N; i++) {
		o[i].xa.key = keys[i];
		ck_assert_int_eq(pwb__xa_insert(&xa, &o[i].xa), 0);
	}
	ck_assert_uint_eq(xa.count, N);
	ck_assert_uint_eq(xa.height, 11);	/* 2^64 - 1 needs 11 levels */
	ck_assert_uint_eq(pwb__xa_first(&xa)->key, 0);
	ck_assert_uint_eq(drain_in_order(&xa), N);
	pwb__xa_destroy(&xa);
}
END_TEST

START_TEST(test_equal_keys_all_come_out)
{
	struct obj o[5];
	struct pwb__xa xa;
	unsigned int i;

	pwb__xa_init(&xa);
	for (i = 0; i < 5; i++) {
		o[i].xa.key = i == 4 ? 3 : 9;
		ck_assert_int_eq(pwb__xa_insert(&xa, &o[i].xa), 0);
	}
	ck_assert_ptr_eq(pwb__xa_first(&xa), &o[4].xa);
	/* Erase one from the middle of the key-9 chain. */
	pwb__xa_erase(&xa, &o[1].xa);
	ck_assert_uint_eq(xa.count, 4);
	ck_assert_uint_eq(drain_in_order(&xa), 4);
	pwb__xa_destroy(&xa);
}
END_TEST

/* Random inserts and erases against a reference: at every step the
 * smallest key present is the one pwb__xa_first() returns. */
START_TEST(test_random_ops_match_reference)
{
	enum { N = 2000, STEPS = 20000 };
	struct obj *o = calloc(N, sizeof(*o));
	uint64_t seed = 7, present = 0;
	struct pwb__xa xa;
	unsigned int s, i;

	ck_assert_ptr_nonnull(o);
	pwb__xa_init(&xa);
	for (i = 0; i < N; i++)
		/* Clustered keys (device pages) with some far outliers. */
		o[i].xa.key = i % 10 ? tu_rand(&seed) % 100000
				     : tu_rand(&seed);
	for (s = 0; s < STEPS; s++) {
		struct obj *x = &o[tu_rand(&seed) % N];
		uint64_t min = UINT64_MAX;
		struct pwb__xa_item *first;

		if (x->in) {
			pwb__xa_erase(&xa, &x->xa);
			x->in = false;
			present--;
		} else {
			ck_assert_int_eq(pwb__xa_insert(&xa, &x->xa), 0);
			x->in = true;
			present++;
		}
		ck_assert_uint_eq(xa.count, present);
		if (s % 97)
			continue;
		for (i = 0; i < N; i++)
			if (o[i].in && o[i].xa.key < min)
				min = o[i].xa.key;
		first = pwb__xa_first(&xa);
		if (!present)
			ck_assert_ptr_null(first);
		else
			ck_assert_uint_eq(first->key, min);
	}
	ck_assert_uint_eq(drain_in_order(&xa), present);
	pwb__xa_destroy(&xa);
	free(o);
}
END_TEST

/* Erasing an item that is not in the tree changes nothing. */
START_TEST(test_erase_absent_is_noop)
{
	struct obj a = { .xa.key = 100 }, b = { .xa.key = 100 },
		   c = { .xa.key = 1ull << 50 };
	struct pwb__xa xa;

	pwb__xa_init(&xa);
	pwb__xa_erase(&xa, &a.xa);
	ck_assert_int_eq(pwb__xa_insert(&xa, &a.xa), 0);
	pwb__xa_erase(&xa, &b.xa);	/* same key, other item */
	pwb__xa_erase(&xa, &c.xa);	/* beyond the tree's height */
	ck_assert_uint_eq(xa.count, 1);
	ck_assert_ptr_eq(pwb__xa_first(&xa), &a.xa);
	pwb__xa_erase(&xa, &a.xa);
	ck_assert_uint_eq(xa.nr_nodes, 0);
	pwb__xa_destroy(&xa);
}
END_TEST

/* destroy() frees what is left (valgrind and ASan see the leaks). */
START_TEST(test_destroy_frees_nonempty_tree)
{
	struct obj o[100];
	struct pwb__xa xa;
	unsigned int i;

	pwb__xa_init(&xa);
	for (i = 0; i < 100; i++) {
		o[i].xa.key = (uint64_t)i * 100003;
		ck_assert_int_eq(pwb__xa_insert(&xa, &o[i].xa), 0);
	}
	ck_assert_uint_gt(xa.nr_nodes, 1);
	pwb__xa_destroy(&xa);
	ck_assert_uint_eq(xa.nr_nodes, 0);
	ck_assert_ptr_null(pwb__xa_first(&xa));
}
END_TEST

static Suite *xarray_suite(void)
{
	Suite *s = suite_create("xarray");
	TCase *tc = tcase_create("index");

	tcase_add_test(tc, test_first_is_smallest_key_over_whole_key_space);
	tcase_add_test(tc, test_equal_keys_all_come_out);
	tcase_add_test(tc, test_random_ops_match_reference);
	tcase_add_test(tc, test_erase_absent_is_noop);
	tcase_add_test(tc, test_destroy_frees_nonempty_tree);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(xarray_suite(), false);
}
