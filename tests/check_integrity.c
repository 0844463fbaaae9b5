/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_integrity.c - data integrity and context affinity, white-box
 *
 * Several threads dirty random ranges of many inodes with new page versions
 * while the flushers write on their own (real clock, 10 ms periodic passes,
 * dirty_expire_ms 0, a small background threshold) and writer threads call
 * pwb_fsync now and then. Then pwb_sync, and the device must equal the page
 * memory byte for byte. Every ops callback checks that it runs on the
 * flusher thread of the inode's own context. Each test runs for nr_wb_ctx
 * 1, 2 and 8 (a loop test: _i indexes nr_ctx_of[]).
 *
 * The writers are test-util's tu_workload: writer w owns the inodes i with
 * i % NR_WRITERS == w, so no two threads write the same page memory. A
 * flusher may read a page while its owner rewrites it; the owner marks the
 * page dirty afterwards, so the final sync writes it again (that is the
 * behaviour under test, not a race in it).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS 4096u
#define NR_INODES 128
#define MIN_PAGES 16
#define MAX_PAGES 64
#define NR_WRITERS 4
#define MAX_RANGE 8		/* pages per mark_dirty, at most */
#define FSYNC_EVERY 512		/* a writer fsyncs every this many marks */
#define MIN_MARKS 4000		/* per writer, before stopping */
#define MIN_FLUSHER_PAGES 2000	/* written before the final sync */
#define RUN_LIMIT_MS 60000	/* stop the writers after this at the latest */

static const unsigned int nr_ctx_of[] = { 1, 2, 8 };

/* One inode: the application side plus what its callbacks observed. */
struct istore {
	struct tu_store st;	/* first: priv is the tu_store too */
	unsigned long wrong_thread;	/* atomic: callbacks off its flusher */
	unsigned long callbacks;	/* atomic */
	int seen_ctx;		/* atomic: pwb__flusher_ctx_idx() seen, -2 */
};

struct run {
	char *img;
	struct pwb_bdi *bdi;
	unsigned int nr_ctx;
	struct istore *is;	/* NR_INODES */
	struct tu_store *st[NR_INODES];	/* &is[i].st, for test-util */
};

static char *g_img;

static void remove_stale_image(void)
{
	if (g_img)
		unlink(g_img);
}

/* ---------------------------------------------------------------------- */
/* Callbacks that check which thread runs them                            */

/* The thread of the flusher serving context @idx: flusher f serves the
 * contexts whose index modulo nr_flushers is f (one per context here). */
static pthread_t ctx_thread(struct pwb_bdi *bdi, unsigned int idx)
{
	unsigned int nr = uatomic_read(&bdi->nr_flushers);

	return bdi->flushers[nr ? idx % nr : 0]->thread;
}

static void check_thread(struct pwb_inode *inode)
{
	struct istore *is = pwb_inode_priv(inode);
	int ctx = pwb_inode_wb_ctx(inode);
	int me = pwb__flusher_ctx_idx();
	int expect = -2;

	__atomic_add_fetch(&is->callbacks, 1, __ATOMIC_RELAXED);
	if (ctx < 0 || me != ctx ||
	    !pthread_equal(pthread_self(), ctx_thread(inode->bdi, ctx)))
		__atomic_add_fetch(&is->wrong_thread, 1, __ATOMIC_RELAXED);
	/* Remember the first flusher index seen; flag a second one. */
	if (!__atomic_compare_exchange_n(&is->seen_ctx, &expect, me, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED) &&
	    expect != me)
		__atomic_add_fetch(&is->wrong_thread, 1, __ATOMIC_RELAXED);
}

static int i_get_page(struct pwb_inode *inode, uint64_t index,
		      const void **data)
{
	check_thread(inode);
	return tu_ops.get_page(inode, index, data);
}

static int i_map_page(struct pwb_inode *inode, uint64_t index,
		      uint64_t *dev_off)
{
	check_thread(inode);
	return tu_ops.map_page(inode, index, dev_off);
}

static void i_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			int err)
{
	check_thread(inode);
	tu_ops.end_write(inode, index, nr, err);
}

static const struct pwb_inode_ops i_ops = {
	.get_page = i_get_page,
	.map_page = i_map_page,
	.end_write = i_end_write,
};

/* ---------------------------------------------------------------------- */
/* The workload                                                           */

/*
 * Open a bdi with @nr_ctx contexts on a fresh image, register NR_INODES
 * inodes of MIN_PAGES..MAX_PAGES pages (contiguous regions), dirty all of
 * them once, run the writers (tu_workload_run) until each did MIN_MARKS
 * marks and the flushers wrote MIN_FLUSHER_PAGES pages, and pwb_sync.
 * Leaves the bdi open.
 */
static void run_workload_policy(struct run *r, unsigned int nr_ctx,
				const char *policy,
				const struct pwb_inode_ops *ops)
{
	struct tu_workload wl = {
		.nr_stores = NR_INODES,
		.nr_writers = NR_WRITERS,
		.max_range = MAX_RANGE,
		.fsync_every = FSYNC_EVERY,
		.min_marks = MIN_MARKS,
		.min_flusher_pages = MIN_FLUSHER_PAGES,
		.run_limit_ms = RUN_LIMIT_MS,
		.seed = nr_ctx,
	};
	struct pwb_bdi_config cfg;
	struct pwb_stats s;
	uint64_t total;
	unsigned int i;
	int rc;

	memset(r, 0, sizeof(*r));
	r->nr_ctx = nr_ctx;
	r->is = calloc(NR_INODES, sizeof(*r->is));
	ck_assert_ptr_nonnull(r->is);
	for (i = 0; i < NR_INODES; i++) {
		r->st[i] = &r->is[i].st;
		r->is[i].seen_ctx = -2;
	}
	total = tu_stores_layout(r->st, NR_INODES, PS, MIN_PAGES, MAX_PAGES,
				 0x5eed0000ull + nr_ctx);
	if (g_img) {
		unlink(g_img);
		free(g_img);
	}
	r->img = tu_image_create(total * PS);
	g_img = strdup(r->img);

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr_ctx;
	cfg.page_size = PS;
	cfg.dirty_writeback_ms = 10;	/* flushers write all the time */
	cfg.dirty_expire_ms = 0;
	cfg.dirty_background_bytes = 64 * PS;
	cfg.dirty_bytes = 0;
	cfg.policy = policy;
	rc = pwb_bdi_open(r->img, &cfg, &r->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open: %s (%s)", pwb_strerror(rc),
		      pwb_errmsg());
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(r->bdi), nr_ctx);

	tu_stores_open_dirty(r->bdi, r->st, NR_INODES, ops);
	wl.bdi = r->bdi;
	wl.stores = r->st;
	tu_workload_run(&wl);
	ck_assert_int_eq(pwb_bdi_stats(r->bdi, &s), 0);
	/* The flushers ran passes of their own while the writers worked. */
	ck_assert_uint_gt(s.periodic_passes + s.background_passes, 0);

	rc = pwb_sync(r->bdi);
	ck_assert_msg(rc == 0, "pwb_sync: %s", pwb_strerror(rc));
}

static void run_workload(struct run *r, unsigned int nr_ctx)
{
	run_workload_policy(r, nr_ctx, NULL, &i_ops);
}

static void run_finish(struct run *r)
{
	unsigned int i;
	int rc;

	rc = pwb_bdi_close(r->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_close: %s", pwb_strerror(rc));
	tu_image_remove(r->img);
	free(g_img);
	g_img = NULL;
	for (i = 0; i < NR_INODES; i++)
		tu_store_destroy(&r->is[i].st);
	free(r->is);
}

static long verify_all(struct run *r)
{
	return tu_verify_stores(r->img, r->st, NR_INODES);
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                  */

/*
 * After concurrent dirtying with the flushers running, pwb_sync leaves the
 * device equal to the page memory, byte for byte, and nothing dirty.
 */
START_TEST(test_device_matches_memory_after_concurrent_dirtying_and_sync)
{
	struct run r;
	struct pwb_stats s;
	long bad;

	run_workload(&r, nr_ctx_of[_i]);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.writeback_pages, 0);
	bad = verify_all(&r);
	ck_assert_msg(bad == 0, "nr_wb_ctx %u: %ld pages differ from memory",
		      r.nr_ctx, bad);
	run_finish(&r);
}
END_TEST

/*
 * Affinity: every callback of an inode (get_page, map_page, end_write) ran
 * on the flusher thread of its own context, and its end_write calls all
 * came from exactly that one thread; with the default policy the context
 * is ino % nr_wb_ctx; and the contexts were written by nr_wb_ctx distinct
 * threads.
 */
START_TEST(test_inode_written_only_by_its_context_flusher)
{
	struct run r;
	pthread_t seen[PWB_MAX_WB_CTX];
	unsigned int i, j, nr_seen = 0;

	run_workload(&r, nr_ctx_of[_i]);
	for (i = 0; i < NR_INODES; i++) {
		struct istore *is = &r.is[i];
		int ctx = pwb_inode_wb_ctx(is->st.inode);
		pthread_t flusher;

		ck_assert_msg(ctx >= 0 && (unsigned int)ctx < r.nr_ctx,
			      "inode %" PRIu64 ": context %d", is->st.ino, ctx);
		ck_assert_int_eq(ctx, (int)(is->st.ino % r.nr_ctx));
		ck_assert_uint_gt(is->callbacks, 0);
		ck_assert_msg(is->wrong_thread == 0,
			      "inode %" PRIu64 " (ctx %d): %lu of %lu callbacks"
			      " off its flusher", is->st.ino, ctx,
			      is->wrong_thread, is->callbacks);
		ck_assert_int_eq(is->seen_ctx, ctx);
		flusher = ctx_thread(r.bdi, (unsigned int)ctx);
		ck_assert_msg(is->st.nr_writers == 1,
			      "inode %" PRIu64 ": end_write from %u threads",
			      is->st.ino, is->st.nr_writers);
		ck_assert(pthread_equal(is->st.writers[0], flusher));
		for (j = 0; j < nr_seen; j++)
			if (pthread_equal(seen[j], flusher))
				break;
		if (j == nr_seen && nr_seen < PWB_MAX_WB_CTX)
			seen[nr_seen++] = flusher;
	}
	/* One flusher per context (nr_flushers 0): as many writing threads
	 * as contexts. */
	ck_assert_uint_eq(nr_seen, r.nr_ctx);
	run_finish(&r);
}
END_TEST

/*
 * With inodes in every context, every context's flusher wrote pages, and
 * each context's written_pages equals the pages its own inodes saw
 * written (end_write), so no context wrote another's inode.
 */
START_TEST(test_every_context_writes_its_own_inodes)
{
	struct run r;
	struct pwb_stats s, sum;
	uint64_t per_ctx[PWB_MAX_WB_CTX] = { 0 };
	unsigned int i;

	run_workload(&r, nr_ctx_of[_i]);
	for (i = 0; i < NR_INODES; i++) {
		int ctx = pwb_inode_wb_ctx(r.is[i].st.inode);

		ck_assert_int_ge(ctx, 0);
		per_ctx[ctx] += r.is[i].st.pages_written;
	}
	memset(&sum, 0, sizeof(sum));
	for (i = 0; i < r.nr_ctx; i++) {
		ck_assert_int_eq(pwb_wb_ctx_stats(r.bdi, i, &s), 0);
		ck_assert_msg(s.written_pages > 0,
			      "context %u of %u wrote nothing", i, r.nr_ctx);
		ck_assert_msg(s.written_pages == per_ctx[i],
			      "context %u: written_pages %" PRIu64 ", its "
			      "inodes saw %" PRIu64, i, s.written_pages,
			      per_ctx[i]);
		ck_assert_uint_eq(s.nr_inodes, NR_INODES / r.nr_ctx);
		sum.written_pages += s.written_pages;
	}
	ck_assert_int_eq(pwb_wb_ctx_stats(r.bdi, r.nr_ctx, &s), -ERANGE);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &s), 0);
	ck_assert_uint_eq(s.written_pages, sum.written_pages);
	run_finish(&r);
}
END_TEST

/*
 * The same workload under "region" (one inode's pages on several
 * contexts): the device equals memory after pwb_sync, nothing is dirty or
 * in flight, the contexts' written_pages add up to what the inodes saw
 * written, and with several contexts some inode straddling a region
 * boundary was written by more than one flusher thread.
 */
START_TEST(test_region_device_matches_memory)
{
	struct run r;
	struct pwb_stats s;
	uint64_t seen = 0, ctx_sum = 0;
	unsigned int i, split = 0;
	long bad;

	run_workload_policy(&r, nr_ctx_of[_i], "region", NULL);
	ck_assert_int_eq(pwb_bdi_stats(r.bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.writeback_pages, 0);
	for (i = 0; i < NR_INODES; i++) {
		seen += r.is[i].st.pages_written;
		split += r.is[i].st.nr_writers > 1;
	}
	for (i = 0; i < r.nr_ctx; i++) {
		struct pwb_stats c;

		ck_assert_int_eq(pwb_wb_ctx_stats(r.bdi, i, &c), 0);
		ck_assert_msg(c.written_pages > 0,
			      "context %u of %u wrote nothing", i, r.nr_ctx);
		ctx_sum += c.written_pages;
	}
	ck_assert_uint_eq(ctx_sum, seen);
	if (r.nr_ctx > 1)
		ck_assert_msg(split > 0, "no inode was written by more than "
					 "one flusher");
	bad = verify_all(&r);
	ck_assert_msg(bad == 0, "region, nr_wb_ctx %u: %ld pages differ",
		      r.nr_ctx, bad);
	run_finish(&r);
}
END_TEST

static Suite *integrity_suite(void)
{
	Suite *s = suite_create("integrity");
	TCase *tc;
	int n = (int)(sizeof(nr_ctx_of) / sizeof(nr_ctx_of[0]));

	tc = tcase_create("integrity");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc,
		test_device_matches_memory_after_concurrent_dirtying_and_sync,
		0, n);
	tcase_add_loop_test(tc, test_region_device_matches_memory, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("affinity");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, test_inode_written_only_by_its_context_flusher,
			    0, n);
	tcase_add_loop_test(tc, test_every_context_writes_its_own_inodes, 0, n);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (tu_odirect_unsupported())
		return 77;
	atexit(remove_stale_image);
	return tu_run_suite(integrity_suite(), false);
}
