/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_alloc.c - the AVL tree and the extent allocator, white-box
 *
 * The allocator is checked against a model with one byte per unit: random
 * sequences of reserve / allocate / free / unreserve must hand out only
 * units the model has free, account avail exactly, refuse a reservation
 * exactly when the model has too few units, and merge freed neighbours
 * (everything freed leaves one free extent per group). Four threads then do
 * the same at once, each unit claimed in a shared array with an atomic
 * exchange so that a unit handed to two threads is caught.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "alloc.h"
#include "avl.h"
#include "test-util.h"

/* ------------------------------------------------------------- AVL */

struct knode {
	struct pwb__avl_node node;
	uint64_t key;
	bool in;
};

static int kcmp(const struct pwb__avl_node *a, const struct pwb__avl_node *b)
{
	const struct knode *x = caa_container_of(a, struct knode, node);
	const struct knode *y = caa_container_of(b, struct knode, node);

	return x->key < y->key ? -1 : x->key > y->key;
}

START_TEST(test_avl_random_against_array)
{
	enum { N = 2000 };
	static struct knode k[N];
	struct pwb__avl_tree t;
	uint64_t seed = 42;
	unsigned int i, step, in = 0;

	pwb__avl_init(&t);
	for (i = 0; i < N; i++) {
		k[i].key = i * 3;	/* distinct; searches use key +- 1 */
		k[i].in = false;
	}
	for (step = 0; step < 20000; step++) {
		struct knode *x = &k[tu_rand(&seed) % N];

		if (x->in) {
			pwb__avl_remove(&t, &x->node);
			x->in = false;
			in--;
		} else {
			ck_assert(pwb__avl_insert(&t, &x->node, kcmp));
			x->in = true;
			in++;
		}
		if (step % 997 == 0) {
			struct knode key = {.key = tu_rand(&seed) % (3 * N)};
			struct pwb__avl_node *lb, *fl;
			uint64_t want_lb = UINT64_MAX, want_fl = UINT64_MAX;
			unsigned int j;

			ck_assert_int_eq(pwb__avl_check(&t, kcmp), in);
			for (j = 0; j < N; j++) {
				if (!k[j].in)
					continue;
				if (k[j].key >= key.key && want_lb == UINT64_MAX)
					want_lb = k[j].key;
				if (k[j].key <= key.key)
					want_fl = k[j].key;
			}
			lb = pwb__avl_lower_bound(&t, &key.node, kcmp);
			fl = pwb__avl_floor(&t, &key.node, kcmp);
			ck_assert_uint_eq(lb ? caa_container_of(lb, struct knode,
								node)->key
					     : UINT64_MAX,
					  want_lb);
			ck_assert_uint_eq(fl ? caa_container_of(fl, struct knode,
								node)->key
					     : UINT64_MAX,
					  want_fl);
		}
	}
	/* A duplicate is refused. */
	for (i = 0; i < N && !k[i].in; i++)
		;
	if (i < N) {
		struct knode dup = {.key = k[i].key};

		ck_assert(!pwb__avl_insert(&t, &dup.node, kcmp));
	}
	ck_assert_int_eq(pwb__avl_check(&t, kcmp), in);
}
END_TEST

/* ------------------------------------------------------- allocator */

struct ext {
	uint64_t start, len;
};

struct model {
	struct pwb__alloc a;
	unsigned char *used;	/* per unit */
	uint64_t units, nr_used, reserved;
	struct ext *ext;
	size_t nr_ext, cap;
};

static void model_init(struct model *m, uint64_t units, unsigned int groups)
{
	memset(m, 0, sizeof(*m));
	ck_assert_int_eq(pwb__alloc_init(&m->a, units, 4096, groups), 0);
	m->units = units;
	m->used = calloc(units, 1);
	m->cap = units + 1;
	m->ext = calloc(m->cap, sizeof(*m->ext));
	ck_assert(m->used && m->ext);
}

static void model_check(struct model *m)
{
	uint64_t ext, free_units;

	ck_assert_int_eq(pwb__alloc_check(&m->a), 0);
	free_units = pwb__alloc_free_units(&m->a, &ext);
	ck_assert_uint_eq(free_units, m->units - m->nr_used);
	ck_assert_int_eq(uatomic_read(&m->a.avail),
			 (int64_t)(m->units - m->nr_used - m->reserved));
}

static void model_take(struct model *m, uint64_t start, uint64_t len)
{
	uint64_t u;

	ck_assert_uint_le(start + len, m->units);
	for (u = start; u < start + len; u++) {
		ck_assert_msg(!m->used[u], "unit %llu handed out twice",
			      (unsigned long long)u);
		m->used[u] = 1;
	}
	m->nr_used += len;
	ck_assert_uint_lt(m->nr_ext, m->cap);
	m->ext[m->nr_ext++] = (struct ext){start, len};
}

/* Reserve @n, allocate them as extents (random goal), like map_page. */
static int model_alloc(struct model *m, uint64_t n, uint64_t *seed)
{
	uint64_t left = n;
	int ret;

	ret = pwb__alloc_reserve(&m->a, n);
	if (ret)
		return ret;
	m->reserved += n;
	while (left) {
		uint64_t goal = tu_rand(seed) % 3 ? tu_rand(seed) % m->units
						  : UINT64_MAX;
		uint64_t start, got;

		ret = pwb__alloc_extent(&m->a, goal,
					(unsigned int)(tu_rand(seed) % 8), left,
					&start, &got);
		ck_assert_int_eq(ret, 0);
		ck_assert_uint_ge(got, 1);
		ck_assert_uint_le(got, left);
		if (goal != UINT64_MAX && !m->used[goal])
			ck_assert_uint_eq(start, goal); /* a free goal is used */
		model_take(m, start, got);
		m->reserved -= got;
		left -= got;
	}
	return 0;
}

/* Free a random part of a random extent. */
static void model_free_some(struct model *m, uint64_t *seed)
{
	struct ext *e;
	uint64_t off, len, u;

	if (!m->nr_ext)
		return;
	e = &m->ext[tu_rand(seed) % m->nr_ext];
	off = tu_rand(seed) % e->len;
	len = 1 + tu_rand(seed) % (e->len - off);
	pwb__alloc_free(&m->a, e->start + off, len);
	for (u = e->start + off; u < e->start + off + len; u++)
		m->used[u] = 0;
	m->nr_used -= len;
	/* Keep the remaining pieces: the head in place, the tail appended. */
	if (off + len < e->len) {
		ck_assert_uint_lt(m->nr_ext, m->cap);
		m->ext[m->nr_ext++] =
			(struct ext){e->start + off + len, e->len - off - len};
	}
	if (off) {
		e->len = off;
	} else {
		*e = m->ext[--m->nr_ext];
	}
}

static void model_free_all(struct model *m, uint64_t *seed)
{
	while (m->nr_ext) {
		size_t i = tu_rand(seed) % m->nr_ext;
		uint64_t u;

		pwb__alloc_free(&m->a, m->ext[i].start, m->ext[i].len);
		for (u = 0; u < m->ext[i].len; u++)
			m->used[m->ext[i].start + u] = 0;
		m->nr_used -= m->ext[i].len;
		m->ext[i] = m->ext[--m->nr_ext];
	}
}

static void model_destroy(struct model *m)
{
	pwb__alloc_destroy(&m->a);
	free(m->used);
	free(m->ext);
}

static void random_sequence(unsigned int groups)
{
	struct model m;
	uint64_t seed = 7 + groups, ext;
	unsigned int step;

	model_init(&m, 1000, groups);
	for (step = 0; step < 4000; step++) {
		unsigned int op = tu_rand(&seed) % 10;

		if (op < 5) {
			uint64_t n = 1 + tu_rand(&seed) % 40;
			uint64_t can = m.units - m.nr_used - m.reserved;
			int ret = model_alloc(&m, n, &seed);

			/* ENOSPC exactly when the model lacks the units. */
			ck_assert_int_eq(ret, n <= can ? 0 : -ENOSPC);
		} else if (op < 9) {
			model_free_some(&m, &seed);
		} else {
			/* A reservation that is dropped unused. */
			uint64_t n = 1 + tu_rand(&seed) % 10;

			if (!pwb__alloc_reserve(&m.a, n))
				pwb__alloc_unreserve(&m.a, n);
		}
		if (step % 50 == 0)
			model_check(&m);
	}
	model_check(&m);
	model_free_all(&m, &seed);
	model_check(&m);
	pwb__alloc_free_units(&m.a, &ext);
	/* Everything merged back: one free extent per group. */
	ck_assert_uint_eq(ext, m.a.nr_groups);
	model_destroy(&m);
}

START_TEST(test_random_one_group)
{
	random_sequence(1);
}
END_TEST

START_TEST(test_random_five_groups)
{
	random_sequence(5);
}
END_TEST

START_TEST(test_enospc_when_full)
{
	struct model m;
	uint64_t seed = 3, start, got, ext;

	model_init(&m, 256, 4);
	ck_assert_int_eq(model_alloc(&m, 200, &seed), 0);
	ck_assert_int_eq(pwb__alloc_reserve(&m.a, 57), -ENOSPC);
	ck_assert_int_eq(model_alloc(&m, 56, &seed), 0);
	ck_assert_uint_eq(m.nr_used, 256);
	ck_assert_int_eq(pwb__alloc_reserve(&m.a, 1), -ENOSPC);
	/* Without a reservation there is nothing left to find either. */
	ck_assert_int_eq(pwb__alloc_extent(&m.a, UINT64_MAX, 0, 1, &start,
					   &got),
			 -ENOSPC);
	model_check(&m);
	model_free_all(&m, &seed);
	model_check(&m);
	pwb__alloc_free_units(&m.a, &ext);
	ck_assert_uint_eq(ext, 4);
	model_destroy(&m);
}
END_TEST

START_TEST(test_goal_best_fit_largest)
{
	struct pwb__alloc a;
	struct pwb__alloc_group_info gi;
	uint64_t start, got;

	/* One group of 100 units; free holes of 10 at 0, 5 at 20, 30 at 50. */
	ck_assert_int_eq(pwb__alloc_init(&a, 100, 4096, 1), 0);
	ck_assert_int_eq(pwb__alloc_mark_used(&a, 10, 10), 0);
	ck_assert_int_eq(pwb__alloc_mark_used(&a, 25, 25), 0);
	ck_assert_int_eq(pwb__alloc_mark_used(&a, 80, 20), 0);
	ck_assert_int_eq(pwb__alloc_check(&a), 0);
	pwb__alloc_group_info(&a, 0, &gi);
	ck_assert_uint_eq(gi.free_units, 45);
	ck_assert_uint_eq(gi.free_extents, 3);
	ck_assert_uint_eq(gi.largest, 30);
	ck_assert_int_eq(uatomic_read(&a.avail), 45);
	/* Overlapping used units are refused, nothing changed. */
	ck_assert_int_eq(pwb__alloc_mark_used(&a, 5, 10), -EEXIST);
	ck_assert_int_eq(pwb__alloc_mark_used(&a, 100, 1), -EINVAL);
	ck_assert_int_eq(uatomic_read(&a.avail), 45);
	ck_assert_int_eq(pwb__alloc_check(&a), 0);

	ck_assert_int_eq(pwb__alloc_reserve(&a, 45), 0);
	/* Best fit: 4 units go to the 5-unit hole. */
	ck_assert_int_eq(pwb__alloc_extent(&a, UINT64_MAX, 0, 4, &start, &got),
			 0);
	ck_assert_uint_eq(start, 20);
	ck_assert_uint_eq(got, 4);
	/* A goal in the middle of a hole: from there, up to its end. */
	ck_assert_int_eq(pwb__alloc_extent(&a, 60, 0, 50, &start, &got), 0);
	ck_assert_uint_eq(start, 60);
	ck_assert_uint_eq(got, 20);
	/* Nothing holds 12: the largest piece (10 at 0, vs 10 at 50). */
	ck_assert_int_eq(pwb__alloc_extent(&a, UINT64_MAX, 0, 12, &start,
					   &got),
			 0);
	ck_assert_uint_eq(got, 10);
	ck_assert(start == 0 || start == 50);
	ck_assert_int_eq(pwb__alloc_check(&a), 0);
	pwb__alloc_destroy(&a);
}
END_TEST

START_TEST(test_default_group_count)
{
	struct pwb__alloc a;

	/* 4 GiB of 4 KiB units: 4 groups; 200 GiB: 64. */
	ck_assert_int_eq(pwb__alloc_init(&a, 1ull << 20, 4096, 0), 0);
	ck_assert_uint_eq(a.nr_groups, 4);
	pwb__alloc_destroy(&a);
	ck_assert_int_eq(pwb__alloc_init(&a, 200ull << 18, 4096, 0), 0);
	ck_assert_uint_eq(a.nr_groups, 64);
	pwb__alloc_destroy(&a);
	/* 512 MiB: still 4; 40 MiB: 2 of 16 MiB or more; under 16 MiB:
	 * one. Never more groups than units. */
	ck_assert_int_eq(pwb__alloc_init(&a, 1ull << 17, 4096, 0), 0);
	ck_assert_uint_eq(a.nr_groups, 4);
	pwb__alloc_destroy(&a);
	ck_assert_int_eq(pwb__alloc_init(&a, 10240, 4096, 0), 0);
	ck_assert_uint_eq(a.nr_groups, 2);
	pwb__alloc_destroy(&a);
	ck_assert_int_eq(pwb__alloc_init(&a, 1000, 4096, 0), 0);
	ck_assert_uint_eq(a.nr_groups, 1);
	pwb__alloc_destroy(&a);
	ck_assert_int_eq(pwb__alloc_init(&a, 3, 4096, 8), 0);
	ck_assert_uint_eq(a.nr_groups, 3);
	ck_assert_uint_eq(pwb__alloc_group_of(&a, 2), 2);
	pwb__alloc_destroy(&a);
}
END_TEST

/* ------------------------------------------------------ 4 threads */

#define CONC_UNITS 4096u
#define CONC_THREADS 4

struct conc {
	struct pwb__alloc a;
	unsigned char owner[CONC_UNITS];	/* 0 free, else thread + 1 */
};

struct worker {
	struct conc *c;
	unsigned int id;
	uint64_t seed;
	unsigned long errors, enospc, allocs;
};

static void *conc_worker(void *arg)
{
	struct worker *w = arg;
	struct ext ext[CONC_UNITS];
	size_t nr = 0;
	unsigned int step;

	for (step = 0; step < 20000; step++) {
		if (tu_rand(&w->seed) % 2 || !nr) {
			uint64_t n = 1 + tu_rand(&w->seed) % 16, left = n;

			if (pwb__alloc_reserve(&w->c->a, n)) {
				w->enospc++;
				continue;
			}
			while (left) {
				uint64_t start, got, u;

				if (pwb__alloc_extent(&w->c->a,
						      tu_rand(&w->seed) %
							      CONC_UNITS,
						      w->id, left, &start,
						      &got)) {
					w->errors++; /* reserved: must not */
					pwb__alloc_unreserve(&w->c->a, left);
					break;
				}
				for (u = start; u < start + got; u++)
					if (__atomic_exchange_n(
						    &w->c->owner[u],
						    (unsigned char)(w->id + 1),
						    __ATOMIC_SEQ_CST))
						w->errors++;
				ext[nr++] = (struct ext){start, got};
				left -= got;
				w->allocs++;
			}
		} else {
			size_t i = tu_rand(&w->seed) % nr;
			uint64_t u;

			for (u = ext[i].start; u < ext[i].start + ext[i].len;
			     u++)
				if (__atomic_exchange_n(&w->c->owner[u], 0,
							__ATOMIC_SEQ_CST) !=
				    w->id + 1)
					w->errors++;
			pwb__alloc_free(&w->c->a, ext[i].start, ext[i].len);
			ext[i] = ext[--nr];
		}
	}
	while (nr--) {
		uint64_t u;

		for (u = ext[nr].start; u < ext[nr].start + ext[nr].len; u++)
			if (__atomic_exchange_n(&w->c->owner[u], 0,
						__ATOMIC_SEQ_CST) != w->id + 1)
				w->errors++;
		pwb__alloc_free(&w->c->a, ext[nr].start, ext[nr].len);
	}
	return NULL;
}

START_TEST(test_four_threads)
{
	static struct conc c;
	struct worker w[CONC_THREADS];
	pthread_t th[CONC_THREADS];
	unsigned long enospc = 0, allocs = 0;
	uint64_t ext;
	unsigned int i;

	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(pwb__alloc_init(&c.a, CONC_UNITS, 4096, 4), 0);
	for (i = 0; i < CONC_THREADS; i++) {
		w[i] = (struct worker){.c = &c, .id = i, .seed = 100 + i};
		ck_assert_int_eq(pthread_create(&th[i], NULL, conc_worker,
						&w[i]),
				 0);
	}
	for (i = 0; i < CONC_THREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < CONC_THREADS; i++) {
		ck_assert_uint_eq(w[i].errors, 0);
		allocs += w[i].allocs;
		enospc += w[i].enospc;
	}
	/* The threads fill the device (about 4 x 10000 x 8.5 units asked
	 * for, at most 4096 held): reservations were refused. */
	ck_assert_uint_gt(enospc, 0);
	/* Not per thread: one scheduled late can find the device full for
	 * all its steps while the others churn. */
	ck_assert_uint_gt(allocs, 0);
	ck_assert_int_eq(pwb__alloc_check(&c.a), 0);
	ck_assert_uint_eq(pwb__alloc_free_units(&c.a, &ext), CONC_UNITS);
	ck_assert_uint_eq(ext, 4);
	ck_assert_int_eq(uatomic_read(&c.a.avail), CONC_UNITS);
	pwb__alloc_destroy(&c.a);
}
END_TEST

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("alloc");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_avl_random_against_array);
	tcase_add_test(tc, test_random_one_group);
	tcase_add_test(tc, test_random_five_groups);
	tcase_add_test(tc, test_enospc_when_full);
	tcase_add_test(tc, test_goal_best_fit_largest);
	tcase_add_test(tc, test_default_group_count);
	tcase_add_test(tc, test_four_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(alloc_suite(), false);
}
