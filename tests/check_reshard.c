// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_reshard.c - live re-sharding and threads apart from lists
 *
 * pwb_bdi_set_nr_wb_ctx() moves inodes between contexts while writers dirty
 * pages and other threads sync; afterwards every byte must be on the device,
 * every inode must sit on exactly one list of the context it is affined to,
 * and the per-context counters must add up.
 */
#include "pwb-internal.h"
#include "test-util.h"
#include "pwb-policy.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define PS 4096u

static char *image;

static void setup(void)
{
	image = tu_image_create(64ull << 20);
}

static void teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

/* @busy: flushers write on their own (periodic every 10 ms, nothing
 * kept back); otherwise only explicit work writes. */
static struct pwb_bdi *open_bdi(unsigned int nr_wb_ctx,
				unsigned int nr_flushers, bool busy)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	int ret;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr_wb_ctx;
	/* One write in flight, as these tests were written for. */
	cfg.backend = "psync";
	cfg.nr_flushers = nr_flushers;
	cfg.dirty_writeback_ms = busy ? 10 : 0;
	cfg.dirty_expire_ms = 0;
	cfg.dirty_background_bytes = busy ? 1 << 20 : 0;
	cfg.dirty_bytes = 0;
	ret = pwb_bdi_open(image, &cfg, &bdi);
	ck_assert_msg(ret == 0, "pwb_bdi_open: %s", pwb_errmsg());
	return bdi;
}

/*
 * Every inode is on the list it claims, of the context it is affined to,
 * and each context's dirty page counter equals its inodes' dirty pages.
 * Call with no writer or flusher activity that could change the answer
 * (after pwb_sync with writers stopped).
 */
static void check_lists_consistent(struct pwb_bdi *bdi,
				   struct tu_store *st, unsigned int n)
{
	struct pwb__wb_ctx_array *arr = bdi->ctxs;
	uint64_t per_ctx[PWB_MAX_WB_CTX] = { 0 };
	unsigned int i, c, h;

	/* All list locks, in index order (the library's order). */
	for (c = 0; c < arr->nr; c++)
		pthread_mutex_lock(&arr->ctx[c]->list_lock);
	for (i = 0; i < n; i++) {
		struct pwb_inode *inode = st[i].inode;
		struct pwb__wb_ctx *wb = inode->wb;
		unsigned int seen = 0;

		if (!wb)
			continue;
		for (c = 0; c < arr->nr; c++)
			if (arr->ctx[c] == wb)
				break;
		ck_assert_msg(c < arr->nr, "inode %u affined to a context "
					   "that is not in the array", i);
		for (c = 0; c < arr->nr; c++) {
			struct pwb__wb_ctx *o = arr->ctx[c];
			struct cds_list_head *heads[] = { &o->b_dirty, &o->b_io,
							  &o->b_more_io,
							  &o->b_dirty_time };

			for (h = 0; h < 4; h++) {
				struct pwb_inode *x;

				cds_list_for_each_entry(x, heads[h], io_list) {
					if (x != inode)
						continue;
					ck_assert_msg(o == wb, "inode %u on a "
						      "list of context %u, "
						      "affined to %u",
						      i, o->idx, wb->idx);
					seen++;
				}
			}
		}
		ck_assert_msg(seen <= 1, "inode %u on %u lists", i, seen);
		ck_assert_msg((seen == 1) ==
				      (inode->on_list != PWB__LIST_NONE),
			      "inode %u: on_list %d but found on %u lists", i,
			      inode->on_list, seen);
		pthread_mutex_lock(&inode->lock);
		per_ctx[wb->idx] += inode->map.count[PWB__TAG_DIRTY];
		pthread_mutex_unlock(&inode->lock);
	}
	for (c = 0; c < arr->nr; c++)
		ck_assert_uint_eq(pwb__wb_dirty_pages(arr->ctx[c]),
				  per_ctx[c]);
	for (c = arr->nr; c-- > 0;)
		pthread_mutex_unlock(&arr->ctx[c]->list_lock);
}

START_TEST(test_reshard_moves_inodes_and_keeps_dirty_pages)
{
	enum { N = 32, PAGES = 16 };
	struct tu_store st[N];
	struct pwb_bdi *bdi = open_bdi(1, 0, false);
	uint64_t dirty_before, dirty_after, written;
	struct pwb_stats s;
	unsigned int i;

	for (i = 0; i < N; i++) {
		tu_store_init(&st[i], i, PS, PAGES, (uint64_t)i * PAGES * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
	}
	for (i = 0; i < N; i++) {
		tu_fill_page(&st[i], 3, 1);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 3 * PS, PS), 0);
	}
	pwb_bdi_stats(bdi, &s);
	dirty_before = s.dirty_pages;
	ck_assert_uint_eq(dirty_before, N);

	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, 8), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), 8);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), (int)(i % 8));
	pwb_bdi_stats(bdi, &s);
	dirty_after = s.dirty_pages;
	ck_assert_uint_eq(dirty_before, dirty_after);
	check_lists_consistent(bdi, st, N);

	ck_assert_int_eq(pwb_sync(bdi), 0);
	check_lists_consistent(bdi, st, N);
	ck_assert_int_eq(tu_verify_device(image, st, N), 0);

	pwb_bdi_stats(bdi, &s);
	written = s.written_pages;
	ck_assert_uint_eq(written, N);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, 3), 0);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), (int)(i % 3));
	/* Five contexts retired: what they wrote still counts. */
	pwb_bdi_stats(bdi, &s);
	ck_assert_uint_eq(s.written_pages, written);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	for (i = 0; i < N; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

struct stress {
	struct pwb_bdi *bdi;
	struct tu_store *st;
	unsigned int n, first, step;
	volatile int stop;
	int err;		/* first error seen by a worker */
	unsigned long ops;
};

static void record(struct stress *s, int err)
{
	if (err)
		__atomic_compare_exchange_n(&s->err, &(int){ 0 }, err, false,
					    __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
}

struct writer_arg {
	struct stress *s;
	unsigned int idx, nr;
};

/* Each writer owns inodes idx, idx + nr, ...: no two write one page. */
static void *writer(void *arg)
{
	struct writer_arg *a = arg;
	struct stress *s = a->s;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (a->idx + 1);
	uint32_t version = 1;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		unsigned int k = a->idx + a->nr * (unsigned int)(tu_rand(&seed) %
						       (s->n / a->nr));
		struct tu_store *t = &s->st[k];
		uint64_t first = tu_rand(&seed) % t->nr_pages;
		uint64_t cnt = 1 + tu_rand(&seed) % 4, p;

		if (first + cnt > t->nr_pages)
			cnt = t->nr_pages - first;
		for (p = first; p < first + cnt; p++)
			tu_fill_page(t, p, version++);
		record(s, pwb_mark_dirty(t->inode, first * PS, cnt * PS));
		if ((version & 63) == 0)
			record(s, pwb_fsync(t->inode));
	}
	return NULL;
}

static void *syncer(void *p)
{
	struct stress *s = p;

	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
		record(s, pwb_sync(s->bdi));
	return NULL;
}

static void run_stress(unsigned int nr_flushers)
{
	enum { N = 48, PAGES = 32, WRITERS = 3 };
	static const unsigned int plan[] = { 1, 8, 2, 1, 4, 8, 1, 2 };
	static const char *const policies[] = {
		"least-loaded", "alloc-group:groups=4", "inode-hash", "hint",
		"xarray", "shared-list:batch=2", "xarray:key=ino,ino_range=64",
		"region", "region:bytes=64K",
	};
	struct tu_store st[N];
	struct stress s = { .st = st, .n = N };
	struct writer_arg wa[WRITERS];
	pthread_t w[WRITERS], sy;
	unsigned int i, round;

	s.bdi = open_bdi(1, nr_flushers, true);
	for (i = 0; i < N; i++) {
		tu_store_init(&st[i], 1000 + i, PS, PAGES,
			      (uint64_t)i * PAGES * PS);
		ck_assert_int_eq(tu_store_open(&st[i], s.bdi), 0);
	}
	for (i = 0; i < WRITERS; i++) {
		wa[i] = (struct writer_arg){ .s = &s, .idx = i, .nr = WRITERS };
		ck_assert_int_eq(pthread_create(&w[i], NULL, writer, &wa[i]), 0);
	}
	ck_assert_int_eq(pthread_create(&sy, NULL, syncer, &s), 0);
	for (round = 0; round < 3; round++)
		for (i = 0; i < sizeof(plan) / sizeof(*plan); i++) {
			ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(s.bdi, plan[i]),
					 0);
			ck_assert_int_eq(
				pwb_bdi_set_policy(s.bdi,
						   policies[(round + i) %
							    (sizeof(policies) /
							     sizeof(*policies))]),
				0);
		}
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(sy, NULL);
	ck_assert_msg(s.err == 0, "a worker saw %d (%s)", s.err,
		      pwb_strerror(s.err));

	ck_assert_int_eq(pwb_sync(s.bdi), 0);
	check_lists_consistent(s.bdi, st, N);
	ck_assert_int_eq(tu_verify_device(image, st, N), 0);
	ck_assert_int_eq(pwb_bdi_close(s.bdi), 0);
	for (i = 0; i < N; i++)
		tu_store_destroy(&st[i]);
}

START_TEST(test_reshard_under_writers_and_syncs_loses_nothing)
{
	run_stress(0);
}
END_TEST

START_TEST(test_reshard_with_two_fixed_flushers_loses_nothing)
{
	run_stress(2);
}
END_TEST

START_TEST(test_one_flusher_serves_many_contexts)
{
	enum { N = 16, PAGES = 8 };
	struct tu_store st[N];
	struct pwb_bdi *bdi = open_bdi(8, 1, false);
	struct pwb_bdi_info info;
	unsigned int i, c;

	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(info.nr_wb_ctx, 8);
	ck_assert_uint_eq(info.nr_flushers, 1);
	for (i = 0; i < N; i++) {
		tu_store_init(&st[i], i, PS, PAGES, (uint64_t)i * PAGES * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
		tu_fill_page(&st[i], 0, 7);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 0, PS), 0);
	}
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, st, N), 0);
	/* One thread did all of it: every store saw the same writer. */
	for (i = 0; i < N; i++) {
		ck_assert_uint_eq(st[i].nr_writers, 1);
		ck_assert(pthread_equal(st[i].writers[0], st[0].writers[0]));
	}
	for (c = 0; c < 8; c++) {
		struct pwb_stats s;

		ck_assert_int_eq(pwb_wb_ctx_stats(bdi, c, &s), 0);
		ck_assert_uint_eq(s.written_pages, 2);
	}
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	for (i = 0; i < N; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

START_TEST(test_policy_switch_moves_inodes_and_bad_spec_changes_nothing)
{
	enum { N = 16, PAGES = 4 };
	struct tu_store st[N];
	struct pwb_bdi *bdi = open_bdi(4, 0, false);
	char spec[128];
	unsigned int i;

	for (i = 0; i < N; i++) {
		tu_store_init(&st[i], i, PS, PAGES, (uint64_t)i * PAGES * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
		tu_fill_page(&st[i], 1, 3);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, PS, PS), 0);
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), (int)(i % 4));
	}
	/* Every inode hinted to context 3: the hint policy moves them all. */
	for (i = 0; i < N; i++)
		ck_assert_int_eq(pwb_inode_set_wb_hint(st[i].inode, 3), 0);
	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "hint"), 0);
	ck_assert_int_eq(pwb_bdi_policy(bdi, spec, sizeof(spec)), 0);
	ck_assert_str_eq(spec, "hint");
	for (i = 0; i < N; i++)
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), 3);
	check_lists_consistent(bdi, st, N);

	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "no-such-policy"), -ENOENT);
	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "inode-hash:bogus=1"),
			 -EINVAL);
	ck_assert_int_eq(pwb_bdi_policy(bdi, spec, sizeof(spec)), 0);
	ck_assert_str_eq(spec, "hint");
	for (i = 0; i < N; i++)
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), 3);

	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, st, N), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	for (i = 0; i < N; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

START_TEST(test_bad_reshard_counts_are_rejected)
{
	struct pwb_bdi *bdi = open_bdi(2, 0, false);

	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(NULL, 2), -EINVAL);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, PWB_MAX_WB_CTX + 1),
			 -EINVAL);
	ck_assert_str_ne(pwb_errmsg(), "");
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), 2);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

/*
 * A re-shard holds reshard_lock while it parks the flushers, and they
 * finish their passes first: an integrity sync's can take seconds. The
 * queries answer meanwhile (the test holds the lock itself, standing in
 * for such a re-shard; a query that took it would hang until the
 * tcase's timeout).
 */
START_TEST(test_queries_answer_while_a_reshard_runs)
{
	struct pwb_bdi *bdi = open_bdi(2, 0, false);
	struct pwb_bdi_info info;
	struct pwb_stats st;
	char spec[128];

	pthread_mutex_lock(&bdi->reshard_lock);
	ck_assert_int_eq(pwb_bdi_policy(bdi, spec, sizeof(spec)), 0);
	ck_assert_str_eq(spec, "inode-hash");
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 1, &st), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), 2);
	pthread_mutex_unlock(&bdi->reshard_lock);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

/*
 * pwb_sync and pwb_fsync go round again when a re-shard ran during a try,
 * and the automatic tuner re-shards every few windows: the loop must end
 * however often that happens. The event callback stands in for a re-shard
 * during every try (it bumps reshard_gen as each integrity pass starts);
 * the third try holds reshard_lock and is the last, so each call makes
 * exactly three tries. Without that bound these calls never return and
 * the tcase times out.
 */
struct spoiler {
	struct pwb_bdi *bdi;	/* set before the first sync */
	unsigned long sync_passes;	/* uatomic */
};

static void spoil_every_try(const struct pwb_event *ev, void *arg)
{
	struct spoiler *sp = arg;

	if (ev->type != PWB_EV_WB_START || ev->reason != PWB_WB_SYNC)
		return;
	uatomic_inc(&sp->sync_passes);
	uatomic_inc(&sp->bdi->reshard_gen);
}

START_TEST(test_sync_ends_however_often_reshards_interfere)
{
	enum { NR_CTX = 2, TRIES = 3 };
	struct spoiler sp = { 0 };
	struct pwb_bdi_config cfg;
	struct tu_store st;
	struct pwb_bdi *bdi;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = NR_CTX;
	cfg.dirty_writeback_ms = 0;	/* only explicit work writes */
	cfg.dirty_background_bytes = 0;
	cfg.event = spoil_every_try;
	cfg.event_arg = &sp;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	sp.bdi = bdi;
	tu_store_init(&st, 1, PS, 4, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	tu_fill_page(&st, 0, 1);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, PS), 0);

	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_uint_eq(uatomic_read(&sp.sync_passes), TRIES * NR_CTX);
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);

	uatomic_set(&sp.sync_passes, 0);
	tu_fill_page(&st, 1, 1);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, PS, PS), 0);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_uint_eq(uatomic_read(&sp.sync_passes), TRIES);
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);

	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_store_destroy(&st);
}
END_TEST

static Suite *reshard_suite(void)
{
	Suite *s = suite_create("reshard");
	TCase *tc = tcase_create("reshard");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_reshard_moves_inodes_and_keeps_dirty_pages);
	tcase_add_test(tc, test_reshard_under_writers_and_syncs_loses_nothing);
	tcase_add_test(tc, test_reshard_with_two_fixed_flushers_loses_nothing);
	tcase_add_test(tc, test_one_flusher_serves_many_contexts);
	tcase_add_test(tc,
		       test_policy_switch_moves_inodes_and_bad_spec_changes_nothing);
	tcase_add_test(tc, test_bad_reshard_counts_are_rejected);
	suite_add_tcase(s, tc);

	tc = tcase_create("queries");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_queries_answer_while_a_reshard_runs);
	suite_add_tcase(s, tc);

	tc = tcase_create("sync");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sync_ends_however_often_reshards_interfere);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(reshard_suite(), false);
}
