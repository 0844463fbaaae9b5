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
#include <sched.h>
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

static void setup(void)
{
	struct pwb_bdi_config cfg;

	tu_clock_set(&clk, T0);
	image = tu_image_create(IMAGE_SIZE);
	tu_config_quiet(&cfg, 1, "psync", &clk);
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


/* ------------------------------------------------------------------ */
/* Discard, stable pages, page state                                   */

/*
 * An inode whose get_page can hold the flusher at one page (the gate)
 * and fail it, and which counts get_page and end_write calls per page.
 * The tu_store comes first: tu_ops' callbacks cast priv to it.
 */
struct gstore {
	struct tu_store st;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int64_t gate;		/* page that waits for the gate, or -1 */
	bool open;		/* lock: the gate is open */
	bool entered;		/* lock: the flusher waits at the gate */
	int gate_err;		/* get_page's result after the gate */
	bool gate_in_end;	/* the gate is in end_write, not get_page */
	int fail_all;		/* every get_page fails with this (0: no) */
	int gets[STORE_PAGES];	/* atomic: get_page calls per page */
	int ends[STORE_PAGES];	/* atomic: end_write calls per page */
	int in_cb_ret;		/* in_cb's answer from the flusher */
	int (*in_cb)(struct pwb_inode *inode); /* called from get_page */
};

static int g_get_page(struct pwb_inode *inode, uint64_t index,
		      const void **data)
{
	struct gstore *g = pwb_inode_priv(inode);
	int err = 0;

	if (index < STORE_PAGES)
		__atomic_add_fetch(&g->gets[index], 1, __ATOMIC_SEQ_CST);
	if (g->in_cb) {
		g->in_cb_ret = g->in_cb(inode);
		g->in_cb = NULL;
	}
	if ((int64_t)index == g->gate && !g->gate_in_end) {
		pthread_mutex_lock(&g->lock);
		g->entered = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->lock);
		err = g->gate_err;
		pthread_mutex_unlock(&g->lock);
	}
	if (g->fail_all)
		return g->fail_all;
	return err ? err : tu_ops.get_page(inode, index, data);
}

static void g_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			int err)
{
	struct gstore *g = pwb_inode_priv(inode);
	uint64_t i;

	if (g->gate_in_end && g->gate >= (int64_t)index &&
	    g->gate < (int64_t)(index + nr)) {
		pthread_mutex_lock(&g->lock);
		g->entered = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->lock);
		pthread_mutex_unlock(&g->lock);
	}
	for (i = index; i < index + nr && i < STORE_PAGES; i++)
		__atomic_add_fetch(&g->ends[i], 1, __ATOMIC_SEQ_CST);
	tu_ops.end_write(inode, index, nr, err);
}

static struct pwb_inode_ops g_ops;

static void gstore_open(struct gstore *g, uint64_t ino)
{
	uint64_t i;

	memset(g, 0, sizeof(*g));
	tu_store_init(&g->st, ino, PS, STORE_PAGES,
		      (ino - 1) * STORE_PAGES * PS);
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->gate = -1;
	g_ops = tu_ops;
	g_ops.get_page = g_get_page;
	g_ops.end_write = g_end_write;
	ck_assert_int_eq(pwb_inode_open(bdi, ino, &g_ops, g, &g->st.inode), 0);
	for (i = 0; i < STORE_PAGES; i++)
		tu_fill_page(&g->st, i, 1);
}

static void gstore_close(struct gstore *g)
{
	ck_assert_int_eq(pwb_inode_close(g->st.inode), 0);
	tu_store_destroy(&g->st);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

static int gets_of(struct gstore *g, uint64_t i)
{
	return __atomic_load_n(&g->gets[i], __ATOMIC_SEQ_CST);
}

static int ends_of(struct gstore *g, uint64_t i)
{
	return __atomic_load_n(&g->ends[i], __ATOMIC_SEQ_CST);
}

/* Close the gate at page @index and start a writeback pass that reaches
 * it; return once the flusher waits there. */
static void hold_flusher_at(struct gstore *g, uint64_t index)
{
	pthread_mutex_lock(&g->lock);
	g->gate = (int64_t)index;
	g->open = false;
	g->entered = false;
	pthread_mutex_unlock(&g->lock);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, 0), 0);
	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void open_gate(struct gstore *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static uint64_t ctx_dirty_pages(void)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 0, &st), 0);
	return st.dirty_pages;
}

static uint64_t inode_dirty(struct pwb_inode *inode)
{
	uint64_t n;

	ck_assert_int_eq(pwb_inode_dirty_pages(inode, &n), 0);
	return n;
}

static enum pwb__list list_of(struct pwb_inode *inode)
{
	return pwb__inode_list(inode);
}

/* A range call run on its own thread, with what it saw when it returned. */
struct caller {
	pthread_t thread;
	struct gstore *g;
	bool discard;		/* else pwb_wait_writeback */
	uint64_t off, len, watch;	/* @watch: page to look at on return */
	int ret;
	int ends_at_return;	/* end_write calls of @watch by then */
	int state_at_return;	/* pwb_page_state(@watch) by then */
	int done;		/* atomic */
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	struct pwb_inode *inode = c->g->st.inode;

	c->ret = c->discard ? pwb_inode_discard(inode, c->off, c->len)
			    : pwb_wait_writeback(inode, c->off, c->len);
	c->ends_at_return = ends_of(c->g, c->watch);
	c->state_at_return = pwb_page_state(inode, c->watch);
	__atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Start @c and return once it sleeps in libpwb (or already returned). */
static void caller_start(struct caller *c)
{
	struct pwb_inode *inode = c->g->st.inode;

	ck_assert_int_eq(pthread_create(&c->thread, NULL, caller_main, c), 0);
	for (;;) {
		unsigned int waiters;

		pthread_mutex_lock(&inode->lock);
		waiters = inode->wb_waiters;
		pthread_mutex_unlock(&inode->lock);
		if (waiters || __atomic_load_n(&c->done, __ATOMIC_SEQ_CST))
			return;
		sched_yield();
	}
}

START_TEST(discard_drops_dirty_pages_and_keeps_counters_exact)
{
	struct gstore g;
	uint64_t i;

	gstore_open(&g, 1);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, 16 * PS), 0);
	ck_assert_uint_eq(ctx_dirty_pages(), 16);
	/* Pages 4..7. */
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 4 * PS, 4 * PS), 0);
	ck_assert_uint_eq(inode_dirty(g.st.inode), 12);
	ck_assert_uint_eq(ctx_dirty_pages(), 12);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 3), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 4), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 7), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 8), PWB_PAGE_DIRTY);
	/* Only whole pages: bytes 9*PS+1 .. 12*PS cover pages 10 and 11. */
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 9 * PS + 1, 3 * PS), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 9), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 10), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 11), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 12), PWB_PAGE_DIRTY);
	ck_assert_uint_eq(ctx_dirty_pages(), 10);
	/* Inside one page: nothing. */
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, PS + 1, PS - 2), 0);
	ck_assert_uint_eq(inode_dirty(g.st.inode), 10);
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 0, 0), 0);
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, UINT64_MAX - 10, 100),
			 -EOVERFLOW);
	ck_assert_int_eq(pwb_inode_discard(NULL, 0, PS), -EINVAL);

	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	for (i = 0; i < 16; i++) {
		bool dropped = (i >= 4 && i <= 7) || i == 10 || i == 11;

		ck_assert_int_eq(gets_of(&g, i), dropped ? 0 : 1);
		ck_assert_int_eq(ends_of(&g, i), dropped ? 0 : 1);
	}
	/* Their device space was never written: still zero. */
	{
		uint8_t *buf = aligned_alloc(PS, PS), zero[PS];

		memset(zero, 0, sizeof(zero));
		ck_assert_int_eq(tu_read_device(image, g.st.base_off + 5 * PS,
						buf, PS),
				 0);
		ck_assert_int_eq(memcmp(buf, zero, PS), 0);
		free(buf);
	}
	ck_assert_uint_eq(ctx_dirty_pages(), 0);
	gstore_close(&g);
}
END_TEST

/* Truncate (UINT64_MAX: to the end) of a dirty inode leaves it clean and
 * off every list; with dirty timestamps it goes to b_dirty_time, with
 * dirty metadata it stays on b_dirty. */
START_TEST(discard_to_the_end_takes_a_clean_inode_off_the_lists)
{
	struct gstore g;

	gstore_open(&g, 2);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 8 * PS, 8 * PS), 0);
	ck_assert_int_eq(list_of(g.st.inode), PWB__LIST_DIRTY);
	/* From page 6 on, a partial first byte: pages 7.. go. */
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 6 * PS + 100,
					   UINT64_MAX),
			 0);
	ck_assert_uint_eq(inode_dirty(g.st.inode), 0);
	ck_assert_int_eq(list_of(g.st.inode), PWB__LIST_NONE);
	{
		struct pwb_stats st;

		ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
		ck_assert_uint_eq(st.nr_dirty_inodes, 0);
		ck_assert_uint_eq(st.dirty_pages, 0);
	}
	/* Dirty again: back on b_dirty, written as usual. */
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 9 * PS, PS), 0);
	ck_assert_int_eq(list_of(g.st.inode), PWB__LIST_DIRTY);
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	ck_assert_int_eq(gets_of(&g, 9), 1);
	ck_assert_int_eq(gets_of(&g, 8), 0);
	gstore_close(&g);
}
END_TEST

/* A discard waits for the write of a discarded page already in flight,
 * and for its end_write; a failure of that write is not reported and does
 * not make the page dirty again. */
START_TEST(discard_waits_for_writes_in_flight_and_drops_their_errors)
{
	struct gstore g;
	struct caller c;
	struct pwb_stats st;
	int g3, e3;

	gstore_open(&g, 3);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, 4 * PS), 0);
	g.gate_err = -EIO;
	hold_flusher_at(&g, 2);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 2), PWB_PAGE_WRITEBACK);
	memset(&c, 0, sizeof(c));
	c.g = &g;
	c.discard = true;
	c.off = 2 * PS;
	c.len = 2 * PS;
	c.watch = 2;
	caller_start(&c);
	open_gate(&g);
	pthread_join(c.thread, NULL);
	ck_assert_int_eq(c.ret, 0);
	/* It returned after the write of page 2 had ended. */
	ck_assert_int_eq(c.ends_at_return, 1);
	ck_assert_int_eq(c.state_at_return, 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 2), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 3), 0);
	/* Page 3 went out with page 2 (one run): its get_page may come
	 * during the wait, none after. */
	g3 = gets_of(&g, 3);
	e3 = ends_of(&g, 3);
	ck_assert_int_eq(e3, g3);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	/* The failure is nobody's: no fsync, sync or failed mark sees it. */
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_inode_error(g.st.inode), 0);
	ck_assert_int_eq(gets_of(&g, 2), 1);
	ck_assert_int_eq(gets_of(&g, 3), g3);
	ck_assert_int_eq(ends_of(&g, 3), e3);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_uint_eq(st.dirty_pages, 0);
	gstore_close(&g);
}
END_TEST

/* A discard also waits for an end_write already running for the inode:
 * after it returns, no callback runs for the discarded pages. */
START_TEST(discard_waits_for_a_running_end_write)
{
	struct gstore g;
	struct caller c;

	gstore_open(&g, 7);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, PS), 0);
	g.gate_in_end = true;
	hold_flusher_at(&g, 0);
	/* The write ended; its end_write has not returned. */
	ck_assert_int_eq(pwb_page_state(g.st.inode, 0), 0);
	memset(&c, 0, sizeof(c));
	c.g = &g;
	c.discard = true;
	c.len = UINT64_MAX;
	caller_start(&c);
	open_gate(&g);
	pthread_join(c.thread, NULL);
	ck_assert_int_eq(c.ret, 0);
	ck_assert_int_eq(c.ends_at_return, 1);
	gstore_close(&g);
}
END_TEST

/* An error recorded before a partial discard is still reported once; a
 * discard of every page drops it (and the close reports nothing). */
START_TEST(whole_discard_drops_earlier_errors_partial_does_not)
{
	struct gstore g;

	gstore_open(&g, 4);
	g.fail_all = -EIO;
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, 2 * PS), 0);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 0), PWB_PAGE_DIRTY);
	g.fail_all = 0;
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 0, PS), 0);
	ck_assert_int_eq(pwb_fsync(g.st.inode), -EIO);
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);

	g.fail_all = -EIO;
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, 2 * PS), 0);
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(pwb_inode_discard(g.st.inode, 0, UINT64_MAX), 0);
	g.fail_all = 0;
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	ck_assert_uint_eq(inode_dirty(g.st.inode), 0);
	/* pwb_sync's own cursor still gets it, once. */
	ck_assert_int_eq(pwb_sync(bdi), -EIO);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	gstore_close(&g);
}
END_TEST

/* pwb_wait_writeback waits for a write in flight of a page in its range,
 * not for one outside it; pwb_page_state shows each stage. */
START_TEST(wait_writeback_waits_for_the_range_only)
{
	struct gstore g;
	struct caller c;

	gstore_open(&g, 5);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 1), 0);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, PS, PS), 0);
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 5 * PS, PS), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 1), PWB_PAGE_DIRTY);
	hold_flusher_at(&g, 1);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 1), PWB_PAGE_WRITEBACK);
	/* Dirtied again while written: both. */
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, PS, PS), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 1),
			 PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK);
	/* Page 5 is dirty, not in flight: no wait (a hang fails). */
	ck_assert_int_eq(pwb_wait_writeback(g.st.inode, 2 * PS, 4 * PS), 0);
	ck_assert_int_eq(pwb_wait_writeback(g.st.inode, 0, 0), 0);
	ck_assert_int_eq(pwb_wait_writeback(NULL, 0, PS), -EINVAL);
	ck_assert_int_eq(pwb_wait_writeback(g.st.inode, UINT64_MAX, 2),
			 -EOVERFLOW);

	memset(&c, 0, sizeof(c));
	c.g = &g;
	c.off = PS + 10;	/* touches page 1 only */
	c.len = 10;
	c.watch = 1;
	caller_start(&c);
	open_gate(&g);
	pthread_join(c.thread, NULL);
	ck_assert_int_eq(c.ret, 0);
	ck_assert_int_eq(c.state_at_return & PWB_PAGE_WRITEBACK, 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, -1), 0);
	ck_assert_int_eq(pwb_page_state(NULL, 0), -EINVAL);
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 1), 0);
	ck_assert_int_eq(pwb_page_state(g.st.inode, 5), 0);
	gstore_close(&g);
}
END_TEST

static int call_wait(struct pwb_inode *inode)
{
	return pwb_wait_writeback(inode, 0, UINT64_MAX);
}

static int call_discard(struct pwb_inode *inode)
{
	return pwb_inode_discard(inode, 0, UINT64_MAX);
}

/* From an ops callback both would wait for the calling flusher. */
START_TEST(wait_and_discard_from_a_callback_fail_with_edeadlk)
{
	int (*const cb[])(struct pwb_inode *) = {call_wait, call_discard};
	struct gstore g;

	gstore_open(&g, 6);
	g.in_cb = cb[_i];
	ck_assert_int_eq(pwb_mark_dirty(g.st.inode, 0, PS), 0);
	ck_assert_int_eq(pwb_fsync(g.st.inode), 0);
	ck_assert_int_eq(g.in_cb_ret, -EDEADLK);
	gstore_close(&g);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Discard under load                                                  */

struct load {
	struct pwb_bdi *b;
	struct gstore *g[2];
	int stop;	/* atomic */
	int err;	/* first failure of the dirtier */
};

/* Dirties pages [0, STORE_PAGES / 2) of both inodes and kicks passes,
 * until stopped. */
static void *dirtier_main(void *arg)
{
	struct load *l = arg;
	uint64_t seed = 42;

	while (!__atomic_load_n(&l->stop, __ATOMIC_SEQ_CST)) {
		struct gstore *g = l->g[tu_rand(&seed) & 1];
		uint64_t first = tu_rand(&seed) % (STORE_PAGES / 2);
		uint64_t n = 1 + tu_rand(&seed) % 4;
		int ret;

		if (first + n > STORE_PAGES / 2)
			n = STORE_PAGES / 2 - first;
		ret = pwb_mark_dirty(g->st.inode, first * PS, n * PS);
		if (!ret)
			ret = pwb_bdi_writeback(l->b, PWB_WB_ALL, 0);
		if (ret && !l->err)
			l->err = ret;
	}
	return NULL;
}

/*
 * While a dirtier keeps writeback busy on the low half of two inodes (two
 * contexts, the default backend: io_uring where the kernel allows it), the
 * high half is discarded a few pages at a time. After each discard returns
 * no get_page or end_write comes for its pages, and at the end the
 * counters add up: nothing dirty anywhere, no inode on a dirty list.
 */
START_TEST(discard_under_writeback_load_keeps_pages_and_counters)
{
	struct pwb_bdi_config cfg;
	struct gstore g[2];
	struct load l = {0};
	int gets[2][STORE_PAGES], ends[2][STORE_PAGES];
	struct pwb_stats st;
	pthread_t t;
	unsigned int i, k;
	uint64_t p;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 2;
	cfg.dirty_writeback_ms = 0;
	cfg.dirty_background_bytes = 0;
	cfg.dirty_bytes = 0;
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	l.b = bdi;
	for (i = 0; i < 2; i++) {
		gstore_open(&g[i], 10 + i);
		l.g[i] = &g[i];
		ck_assert_int_eq(pwb_mark_dirty(g[i].st.inode, 0,
						STORE_PAGES * PS),
				 0);
	}
	ck_assert_int_eq(pthread_create(&t, NULL, dirtier_main, &l), 0);
	for (k = STORE_PAGES / 2; k < STORE_PAGES; k += 4) {
		for (i = 0; i < 2; i++) {
			ck_assert_int_eq(pwb_inode_discard(g[i].st.inode,
							   k * PS, 4 * PS),
					 0);
			for (p = k; p < k + 4; p++) {
				gets[i][p] = gets_of(&g[i], p);
				ends[i][p] = ends_of(&g[i], p);
				ck_assert_int_eq(
					pwb_page_state(g[i].st.inode, p), 0);
			}
		}
	}
	__atomic_store_n(&l.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);
	ck_assert_int_eq(l.err, 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	for (i = 0; i < 2; i++) {
		for (p = STORE_PAGES / 2; p < STORE_PAGES; p++) {
			ck_assert_int_eq(gets_of(&g[i], p), gets[i][p]);
			ck_assert_int_eq(ends_of(&g[i], p), ends[i][p]);
		}
		ck_assert_uint_eq(inode_dirty(g[i].st.inode), 0);
	}
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_uint_eq(st.dirty_pages, 0);
	ck_assert_uint_eq(st.writeback_pages, 0);
	ck_assert_uint_eq(st.nr_dirty_inodes, 0);
	for (i = 0; i < 2; i++)
		gstore_close(&g[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Fast defaults                                                       */

/* backend = NULL: io_uring exactly where a ring can be set up here;
 * nr_wb_ctx = 0: 2 contexts and the tuner, whatever the rotational flag.
 * pwb_bdi_info says so and why. */
START_TEST(defaults_pick_io_uring_and_two_tuned_contexts)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	struct pwb_stats st;
	struct pwb_bdi *b;
	bool uring = pwb__io_uring_probe(32) == 0;

	pwb_bdi_config_init(&cfg);
	ck_assert_ptr_null(cfg.backend);
	ck_assert_uint_eq(cfg.nr_wb_ctx, 0);
	cfg.auto_interval_ms = 600000;	/* no tuning step during the test */
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &b), 0);
	ck_assert_int_eq(pwb_bdi_info(b, &info), 0);
	ck_assert_str_eq(info.backend, uring ? "io_uring" : "psync");
	ck_assert_ptr_nonnull(strstr(info.backend_reason, "default"));
	if (uring)
		ck_assert_ptr_nonnull(strstr(info.backend_reason,
					     "io_uring_queue_init works"));
	ck_assert_uint_eq(info.nr_wb_ctx, 2);
	ck_assert_int_eq(info.auto_wb_ctx, 1);
	ck_assert_ptr_nonnull(strstr(info.nr_wb_ctx_reason, "the tuner"));
	ck_assert_int_eq(pwb_bdi_stats(b, &st), 0);
	ck_assert_uint_ne(st.auto_reason, PWB_AUTO_OFF);
	ck_assert_int_eq(pwb_bdi_close(b), 0);

	/* Asked for: used as given, no tuner, and said so. */
	cfg.backend = "psync";
	cfg.nr_wb_ctx = 3;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &b), 0);
	ck_assert_int_eq(pwb_bdi_info(b, &info), 0);
	ck_assert_str_eq(info.backend, "psync");
	ck_assert_str_eq(info.backend_reason, "asked for (backend = \"psync\")");
	ck_assert_uint_eq(info.nr_wb_ctx, 3);
	ck_assert_int_eq(info.auto_wb_ctx, 0);
	ck_assert_str_eq(info.nr_wb_ctx_reason, "asked for (nr_wb_ctx = 3)");
	ck_assert_int_eq(pwb_bdi_stats(b, &st), 0);
	ck_assert_uint_eq(st.auto_reason, PWB_AUTO_OFF);
	ck_assert_int_eq(pwb_bdi_close(b), 0);
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

	tc = tcase_create("discard");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, discard_drops_dirty_pages_and_keeps_counters_exact);
	tcase_add_test(tc, discard_to_the_end_takes_a_clean_inode_off_the_lists);
	tcase_add_test(tc,
		       discard_waits_for_writes_in_flight_and_drops_their_errors);
	tcase_add_test(tc, discard_waits_for_a_running_end_write);
	tcase_add_test(tc, whole_discard_drops_earlier_errors_partial_does_not);
	tcase_add_test(tc, discard_under_writeback_load_keeps_pages_and_counters);
	suite_add_tcase(s, tc);

	tc = tcase_create("stable-pages");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, wait_writeback_waits_for_the_range_only);
	tcase_add_loop_test(tc, wait_and_discard_from_a_callback_fail_with_edeadlk,
			    0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("defaults");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, defaults_pick_io_uring_and_two_tuned_contexts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(discard_suite(), false);
}
