// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_inode.c - inode states and the dirty lists of a writeback context
 *
 * White-box: reads struct pwb_inode and struct pwb__wb_ctx under their
 * locks, and uses pwb__inode_list() / pwb__inode_lookup_rcu().
 *
 * Determinism: the bdi runs on a fake clock that only the test moves,
 * periodic writeback is off (dirty_writeback_ms = 0) and so is background
 * writeback (dirty_background_bytes = 0), so an inode leaves b_dirty only
 * when the test syncs it.
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
#define NR_CTX 4
#define STORE_PAGES 16		  /* pages of every test inode */
#define REGION (STORE_PAGES * PS) /* device bytes per inode */
#define IMAGE_SIZE (64 * MiB)
#define T0 (1000ull * PWB__NSEC_PER_SEC)

static char *image;
static struct tu_clock clk;
static struct pwb_bdi *bdi;

static void inode_setup(void)
{
	struct pwb_bdi_config cfg;

	tu_clock_set(&clk, T0);
	image = tu_image_create(IMAGE_SIZE);
	/* One write in flight, as these tests were written for. */
	tu_config_quiet(&cfg, NR_CTX, "psync", &clk);
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), NR_CTX);
}

static void inode_teardown(void)
{
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	bdi = NULL;
	tu_image_remove(image);
	image = NULL;
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

/*
 * An inode with write_inode. The tu_store comes first: tu_ops' callbacks
 * cast the priv pointer to a struct tu_store.
 */
struct mstore {
	struct tu_store st;
	int wi_calls; /* write_inode calls */
	int wi_sync0; /* of which with sync == 0 */
};

static int m_write_inode(struct pwb_inode *inode, int sync)
{
	struct mstore *m = pwb_inode_priv(inode);

	__atomic_add_fetch(&m->wi_calls, 1, __ATOMIC_SEQ_CST);
	if (!sync)
		__atomic_add_fetch(&m->wi_sync0, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static struct pwb_inode_ops m_ops;

/* Open inode @ino on @b, placed in device region @slot. */
static void store_open(struct pwb_bdi *b, struct tu_store *st, uint64_t ino,
		       unsigned int slot)
{
	tu_store_init(st, ino, PS, STORE_PAGES, (uint64_t)slot * REGION);
	ck_assert_int_eq(tu_store_open(st, b), 0);
}

static void mstore_open(struct mstore *m, uint64_t ino, unsigned int slot)
{
	memset(m, 0, sizeof(*m));
	tu_store_init(&m->st, ino, PS, STORE_PAGES, (uint64_t)slot * REGION);
	m_ops = tu_ops;
	m_ops.write_inode = m_write_inode;
	ck_assert_int_eq(pwb_inode_open(bdi, ino, &m_ops, m, &m->st.inode), 0);
}

static void store_close(struct tu_store *st)
{
	ck_assert_int_eq(pwb_inode_close(st->inode), 0);
	tu_store_destroy(st);
}

static unsigned int state_of(struct pwb_inode *inode)
{
	unsigned int s;

	pthread_mutex_lock(&inode->lock);
	s = inode->state;
	pthread_mutex_unlock(&inode->lock);
	return s;
}

static uint64_t dirtied_when_of(struct pwb_inode *inode)
{
	uint64_t t;

	pthread_mutex_lock(&inode->lock);
	t = inode->dirtied_when;
	pthread_mutex_unlock(&inode->lock);
	return t;
}

static uint64_t map_count(struct pwb_inode *inode, enum pwb__tag tag)
{
	uint64_t n;

	pthread_mutex_lock(&inode->lock);
	n = inode->map.count[tag];
	pthread_mutex_unlock(&inode->lock);
	return n;
}

static uint64_t dirty_pages(struct pwb_inode *inode)
{
	uint64_t nr = ~0ull;

	ck_assert_int_eq(pwb_inode_dirty_pages(inode, &nr), 0);
	return nr;
}

static struct pwb__wb_ctx *ctx_of(struct pwb_bdi *b, unsigned int idx)
{
	struct pwb__wb_ctx_array *arr;
	struct pwb__wb_ctx *wb;

	rcu_read_lock();
	arr = rcu_dereference(b->ctxs);
	ck_assert_uint_lt(idx, arr->nr);
	wb = arr->ctx[idx];
	rcu_read_unlock();
	return wb;
}

/* The inode numbers on @head of @wb, head first; returns how many. */
static int list_inos(struct pwb__wb_ctx *wb, struct cds_list_head *head,
		     uint64_t *inos, uint64_t *when, int max)
{
	struct pwb_inode *inode;
	int n = 0;

	pthread_mutex_lock(&wb->list_lock);
	cds_list_for_each_entry (inode, head, io_list) {
		if (n < max) {
			inos[n] = inode->ino;
			if (when) {
				pthread_mutex_lock(&inode->lock);
				when[n] = inode->dirtied_when;
				pthread_mutex_unlock(&inode->lock);
			}
		}
		n++;
	}
	pthread_mutex_unlock(&wb->list_lock);
	return n;
}

/* 1 if @inode is on @head (walked under list_lock). */
static int on_list(struct pwb__wb_ctx *wb, struct cds_list_head *head,
		   struct pwb_inode *inode)
{
	struct pwb_inode *pos;
	int found = 0;

	pthread_mutex_lock(&wb->list_lock);
	cds_list_for_each_entry (pos, head, io_list)
		if (pos == inode)
			found = 1;
	pthread_mutex_unlock(&wb->list_lock);
	return found;
}

static void assert_clean_and_off_lists(struct pwb_inode *inode)
{
	unsigned int s = state_of(inode);

	ck_assert_int_eq(pwb__inode_list(inode), PWB__LIST_NONE);
	ck_assert_msg(!(s & (PWB__I_DIRTY_ANY | PWB__I_SYNC)),
		      "ino %llu: state 0x%x after sync",
		      (unsigned long long)inode->ino, s);
	ck_assert_uint_eq(dirty_pages(inode), 0);
	ck_assert_uint_eq(map_count(inode, PWB__TAG_DIRTY), 0);
	ck_assert_uint_eq(map_count(inode, PWB__TAG_TOWRITE), 0);
	ck_assert_uint_eq(map_count(inode, PWB__TAG_WRITEBACK), 0);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */

START_TEST(new_inode_is_on_no_list_and_has_no_context)
{
	struct tu_store st;

	store_open(bdi, &st, 5, 0);
	ck_assert_int_eq(pwb__inode_list(st.inode), PWB__LIST_NONE);
	ck_assert_int_eq(pwb_inode_wb_ctx(st.inode), -ENODATA);
	ck_assert_ptr_null(CMM_LOAD_SHARED(st.inode->wb));
	ck_assert_uint_eq(state_of(st.inode), 0);
	ck_assert_uint_eq(dirty_pages(st.inode), 0);
	store_close(&st);
}
END_TEST

START_TEST(first_mark_dirty_queues_on_b_dirty_stamped_now)
{
	struct tu_store st;
	struct pwb__wb_ctx *wb;
	struct pwb_stats s;
	uint64_t now = T0 + 1234567;

	store_open(bdi, &st, 6, 0);
	tu_clock_set(&clk, now);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, PS), 0);

	ck_assert_int_eq(pwb__inode_list(st.inode), PWB__LIST_DIRTY);
	ck_assert_uint_eq(dirtied_when_of(st.inode), now);
	ck_assert_msg(state_of(st.inode) & PWB__I_DIRTY_PAGES, "state 0x%x",
		      state_of(st.inode));
	ck_assert_int_eq(pwb_inode_wb_ctx(st.inode), 6 % NR_CTX);
	wb = ctx_of(bdi, 6 % NR_CTX);
	ck_assert_ptr_eq(CMM_LOAD_SHARED(st.inode->wb), wb);
	ck_assert_uint_eq(wb->idx, 6 % NR_CTX);
	ck_assert(on_list(wb, &wb->b_dirty, st.inode));
	ck_assert_uint_eq(dirty_pages(st.inode), 1);

	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 6 % NR_CTX, &s), 0);
	ck_assert_uint_eq(s.nr_dirty_inodes, 1);
	ck_assert_uint_eq(s.dirty_pages, 1);
	ck_assert_uint_eq(s.nr_inodes, 1);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.nr_dirty_inodes, 1);

	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	store_close(&st);
}
END_TEST

/* Inodes 0, 4, 8, 12 all belong to context 0 (inode-hash, 4 contexts). */
static const uint64_t ctx0_order[] = {8, 0, 12, 4};
#define NR_ORDER 4

static void dirty_in_order(struct tu_store *st)
{
	unsigned int i;

	for (i = 0; i < NR_ORDER; i++) {
		store_open(bdi, &st[i], ctx0_order[i], i);
		tu_clock_advance_ms(&clk, 1);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, PS, 10), 0);
	}
}

static void assert_ctx0_b_dirty_order(void)
{
	struct pwb__wb_ctx *wb = ctx_of(bdi, 0);
	uint64_t inos[8], when[8];
	int i, n;

	n = list_inos(wb, &wb->b_dirty, inos, when, 8);
	ck_assert_int_eq(n, NR_ORDER);
	for (i = 0; i < n; i++) {
		ck_assert_msg(inos[i] == ctx0_order[i],
			      "b_dirty[%d] is ino %llu, want %llu", i,
			      (unsigned long long)inos[i],
			      (unsigned long long)ctx0_order[i]);
		ck_assert_uint_eq(when[i], T0 + (i + 1) * PWB__NSEC_PER_MSEC);
	}
}

START_TEST(b_dirty_is_ordered_first_dirtied_first)
{
	struct tu_store st[NR_ORDER];
	unsigned int i;

	dirty_in_order(st);
	assert_ctx0_b_dirty_order();
	ck_assert_int_eq(pwb_sync(bdi), 0);
	for (i = 0; i < NR_ORDER; i++)
		store_close(&st[i]);
}
END_TEST

START_TEST(redirty_keeps_dirtied_when_and_position)
{
	struct tu_store st[NR_ORDER];
	uint64_t first_when;
	unsigned int i;

	dirty_in_order(st);
	first_when = dirtied_when_of(st[0].inode);
	/* Much later, re-dirty every inode, head first, with new pages and
	 * with pages already dirty. */
	tu_clock_advance_ms(&clk, 60000);
	for (i = 0; i < NR_ORDER; i++) {
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, PS, 10), 0);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 5 * PS, 3 * PS),
				 0);
	}
	ck_assert_uint_eq(dirtied_when_of(st[0].inode), first_when);
	assert_ctx0_b_dirty_order();
	ck_assert_uint_eq(dirty_pages(st[0].inode), 4);

	ck_assert_int_eq(pwb_sync(bdi), 0);
	for (i = 0; i < NR_ORDER; i++)
		store_close(&st[i]);
}
END_TEST

START_TEST(fsync_leaves_inode_clean_and_on_no_list)
{
	struct tu_store st;
	struct pwb_stats s;
	uint64_t i;

	store_open(bdi, &st, 9, 0);
	for (i = 0; i < 3; i++)
		tu_fill_page(&st, i, 1);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, 3 * PS), 0);
	ck_assert_int_eq(pwb__inode_list(st.inode), PWB__LIST_DIRTY);

	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	assert_clean_and_off_lists(st.inode);
	ck_assert_int_eq(pwb_inode_wb_ctx(st.inode), 9 % NR_CTX);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.nr_dirty_inodes, 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.written_pages, 3);
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);
	store_close(&st);
}
END_TEST

START_TEST(fsync_leaves_other_inodes_of_the_context_on_b_dirty)
{
	struct tu_store a, b;
	struct pwb__wb_ctx *wb = ctx_of(bdi, 0);
	uint64_t inos[4], when_b;

	store_open(bdi, &a, 0, 0);
	store_open(bdi, &b, 4, 1);
	ck_assert_int_eq(pwb_mark_dirty(a.inode, 0, PS), 0);
	tu_clock_advance_ms(&clk, 5);
	ck_assert_int_eq(pwb_mark_dirty(b.inode, 0, PS), 0);
	when_b = dirtied_when_of(b.inode);

	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	assert_clean_and_off_lists(a.inode);
	ck_assert_int_eq(pwb__inode_list(b.inode), PWB__LIST_DIRTY);
	ck_assert_uint_eq(dirtied_when_of(b.inode), when_b);
	ck_assert_uint_eq(dirty_pages(b.inode), 1);
	ck_assert_int_eq(list_inos(wb, &wb->b_dirty, inos, NULL, 4), 1);
	ck_assert_uint_eq(inos[0], 4);

	ck_assert_int_eq(pwb_fsync(b.inode), 0);
	store_close(&a);
	store_close(&b);
}
END_TEST

START_TEST(dirty_time_on_clean_inode_goes_to_b_dirty_time)
{
	struct mstore m;
	struct pwb__wb_ctx *wb;
	struct pwb_stats s;
	unsigned int state;

	mstore_open(&m, 13, 0);
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_TIME), 0);
	ck_assert_int_eq(pwb__inode_list(m.st.inode), PWB__LIST_DIRTY_TIME);
	state = state_of(m.st.inode);
	ck_assert_msg(state & PWB__I_DIRTY_TIME, "state 0x%x", state);
	ck_assert_msg(!(state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META)),
		      "state 0x%x", state);
	ck_assert_int_eq(pwb_inode_wb_ctx(m.st.inode), 13 % NR_CTX);
	wb = ctx_of(bdi, 13 % NR_CTX);
	ck_assert(on_list(wb, &wb->b_dirty_time, m.st.inode));
	ck_assert(!on_list(wb, &wb->b_dirty, m.st.inode));
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.nr_dirty_time_inodes, 1);
	ck_assert_uint_eq(s.nr_dirty_inodes, 0);

	/* pwb_sync writes lazily-dirty inodes too, as an integrity sync. */
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(m.wi_calls, 1);
	ck_assert_int_eq(m.wi_sync0, 0);
	assert_clean_and_off_lists(m.st.inode);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.nr_dirty_time_inodes, 0);
	store_close(&m.st);
}
END_TEST

START_TEST(dirty_time_inode_moves_to_b_dirty_when_pages_are_dirtied)
{
	struct mstore m;
	uint64_t t1;

	mstore_open(&m, 14, 0);
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_TIME), 0);
	ck_assert_int_eq(pwb__inode_list(m.st.inode), PWB__LIST_DIRTY_TIME);
	tu_clock_advance_ms(&clk, 10);
	t1 = tu_clock_read(&clk);
	ck_assert_int_eq(pwb_mark_dirty(m.st.inode, 0, PS), 0);
	/* Dirty pages must be found by periodic writeback: b_dirty, stamped
	 * at their first dirtying. */
	ck_assert_int_eq(pwb__inode_list(m.st.inode), PWB__LIST_DIRTY);
	ck_assert_uint_eq(dirtied_when_of(m.st.inode), t1);
	ck_assert(state_of(m.st.inode) & PWB__I_DIRTY_PAGES);

	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	assert_clean_and_off_lists(m.st.inode);
	store_close(&m.st);
}
END_TEST

START_TEST(dirty_time_on_page_dirty_inode_stays_on_b_dirty)
{
	struct mstore m;
	uint64_t t0;

	mstore_open(&m, 15, 0);
	t0 = tu_clock_read(&clk);
	ck_assert_int_eq(pwb_mark_dirty(m.st.inode, 0, PS), 0);
	tu_clock_advance_ms(&clk, 10);
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_TIME), 0);
	ck_assert_int_eq(pwb__inode_list(m.st.inode), PWB__LIST_DIRTY);
	ck_assert_uint_eq(dirtied_when_of(m.st.inode), t0);

	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	assert_clean_and_off_lists(m.st.inode);
	store_close(&m.st);
}
END_TEST

START_TEST(dirty_meta_on_clean_inode_goes_to_b_dirty)
{
	struct mstore m;
	struct pwb__wb_ctx *wb;
	uint64_t now;
	unsigned int state;

	mstore_open(&m, 17, 0);
	tu_clock_advance_ms(&clk, 3);
	now = tu_clock_read(&clk);
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb__inode_list(m.st.inode), PWB__LIST_DIRTY);
	state = state_of(m.st.inode);
	ck_assert_msg(state & PWB__I_DIRTY_META, "state 0x%x", state);
	ck_assert_msg(!(state & PWB__I_DIRTY_PAGES), "state 0x%x", state);
	ck_assert_uint_eq(dirtied_when_of(m.st.inode), now);
	ck_assert_int_eq(pwb_inode_wb_ctx(m.st.inode), 17 % NR_CTX);
	wb = ctx_of(bdi, 17 % NR_CTX);
	ck_assert(on_list(wb, &wb->b_dirty, m.st.inode));
	ck_assert_uint_eq(dirty_pages(m.st.inode), 0);

	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	assert_clean_and_off_lists(m.st.inode);
	store_close(&m.st);
}
END_TEST

START_TEST(fsync_calls_write_inode_with_sync_1)
{
	struct mstore m;

	mstore_open(&m, 18, 0);
	/* Metadata alone. */
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	ck_assert_int_eq(m.wi_calls, 1);
	ck_assert_int_eq(m.wi_sync0, 0);
	assert_clean_and_off_lists(m.st.inode);

	/* Metadata with pages. */
	tu_fill_page(&m.st, 2, 5);
	ck_assert_int_eq(pwb_mark_dirty(m.st.inode, 2 * PS, PS), 0);
	ck_assert_int_eq(pwb_mark_inode_dirty(m.st.inode, PWB_I_DIRTY_META), 0);
	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	ck_assert_int_eq(m.wi_calls, 2);
	ck_assert_int_eq(m.wi_sync0, 0);
	assert_clean_and_off_lists(m.st.inode);
	ck_assert_int_eq(tu_verify_device(image, &m.st, 1), 0);

	/* Clean: fsync does not write the inode again. */
	ck_assert_int_eq(pwb_fsync(m.st.inode), 0);
	ck_assert_int_eq(m.wi_calls, 2);
	store_close(&m.st);
}
END_TEST

/* Context counts, including ones that are not powers of two. */
static const unsigned int hash_nr[] = {1, 3, 4, 7};

START_TEST(wb_ctx_is_ino_mod_nr_and_sticks_across_clean)
{
	unsigned int nr = hash_nr[_i];
	struct pwb_bdi_config cfg;
	struct pwb_bdi *b;
	char *img = tu_image_create(IMAGE_SIZE);
	uint64_t inos[20];
	struct tu_store st[20];
	unsigned int n = 0, i;

	for (i = 0; i < 2 * nr + 2; i++)
		inos[n++] = i;
	inos[n++] = UINT64_MAX;
	inos[n++] = (1ull << 63) + 5;
	inos[n++] = 0x100000001ull; /* 2^32 + 1: no 32-bit truncation */

	tu_config_quiet(&cfg, nr, "psync", &clk);
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &b), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(b), nr);
	for (i = 0; i < n; i++) {
		unsigned int want = (unsigned int)(inos[i] % nr);
		struct pwb__wb_ctx *wb = ctx_of(b, want);

		store_open(b, &st[i], inos[i], i);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 0, PS), 0);
		ck_assert_msg(pwb_inode_wb_ctx(st[i].inode) == (int)want,
			      "nr %u ino %llu: context %d, want %u", nr,
			      (unsigned long long)inos[i],
			      pwb_inode_wb_ctx(st[i].inode), want);
		ck_assert_ptr_eq(CMM_LOAD_SHARED(st[i].inode->wb), wb);
		ck_assert(on_list(wb, &wb->b_dirty, st[i].inode));

		/* Clean, then dirty again: same context. */
		ck_assert_int_eq(pwb_fsync(st[i].inode), 0);
		ck_assert_int_eq(pwb__inode_list(st[i].inode), PWB__LIST_NONE);
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), (int)want);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 3 * PS, PS), 0);
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), (int)want);
		ck_assert(on_list(wb, &wb->b_dirty, st[i].inode));
	}
	ck_assert_int_eq(pwb_sync(b), 0);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(pwb_inode_close(st[i].inode), 0);
	ck_assert_int_eq(pwb_bdi_close(b), 0);
	for (i = 0; i < n; i++)
		tu_store_destroy(&st[i]);
	tu_image_remove(img);
}
END_TEST

START_TEST(lookup_rcu_finds_open_inodes_and_not_closed_ones)
{
	struct tu_store a, b;
	struct pwb_inode *fa, *fb, *fc;

	store_open(bdi, &a, 21, 0);
	store_open(bdi, &b, 22, 1);
	rcu_read_lock();
	fa = pwb__inode_lookup_rcu(bdi, 21);
	fb = pwb__inode_lookup_rcu(bdi, 22);
	fc = pwb__inode_lookup_rcu(bdi, 23);
	rcu_read_unlock();
	ck_assert_ptr_eq(fa, a.inode);
	ck_assert_ptr_eq(fb, b.inode);
	ck_assert_ptr_null(fc);

	store_close(&a);
	rcu_read_lock();
	fa = pwb__inode_lookup_rcu(bdi, 21);
	fb = pwb__inode_lookup_rcu(bdi, 22);
	rcu_read_unlock();
	ck_assert_ptr_null(fa);
	ck_assert_ptr_eq(fb, b.inode);
	store_close(&b);
}
END_TEST

START_TEST(dirty_pages_counts_the_union_of_ranges_rounded_out)
{
	struct tu_store a, b;
	struct pwb_stats s;

	store_open(bdi, &a, 31, 0);
	store_open(bdi, &b, 35, 1); /* same context as 31 */

	/* [0, 10000) is pages 0-2; [5000, 20000) pages 1-4: 5 in all. */
	ck_assert_int_eq(pwb_mark_dirty(a.inode, 0, 10000), 0);
	ck_assert_uint_eq(dirty_pages(a.inode), 3);
	ck_assert_int_eq(pwb_mark_dirty(a.inode, 5000, 15000), 0);
	ck_assert_uint_eq(dirty_pages(a.inode), 5);
	pthread_mutex_lock(&a.inode->lock);
	ck_assert(pwb__map_test(&a.inode->map, PWB__TAG_DIRTY, 4));
	ck_assert(!pwb__map_test(&a.inode->map, PWB__TAG_DIRTY, 5));
	pthread_mutex_unlock(&a.inode->lock);

	/* Two bytes straddling a page boundary: two pages. One byte at the
	 * end of a page: one page. */
	ck_assert_int_eq(pwb_mark_dirty(b.inode, PS - 1, 2), 0);
	ck_assert_uint_eq(dirty_pages(b.inode), 2);
	ck_assert_int_eq(pwb_mark_dirty(b.inode, 3 * PS - 1, 1), 0);
	ck_assert_uint_eq(dirty_pages(b.inode), 3);

	/* Counters count each page once, however often it was dirtied. */
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 31 % NR_CTX, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 8);
	ck_assert_uint_eq(s.dirtied_pages, 8);
	ck_assert_uint_eq(s.nr_dirty_inodes, 2);

	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_uint_eq(a.pages_written, 5);
	ck_assert_uint_eq(b.pages_written, 3);
	store_close(&a);
	store_close(&b);
}
END_TEST

START_TEST(close_returns_0_and_the_ino_can_be_opened_again)
{
	struct tu_store st, again;
	struct pwb_inode *found;
	uint64_t i;

	/* Never dirtied. */
	store_open(bdi, &st, 40, 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_store_destroy(&st);

	/* Dirty: close writes it. */
	store_open(bdi, &st, 40, 0);
	for (i = 0; i < 4; i++)
		tu_fill_page(&st, i, 9);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, 4 * PS), 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	ck_assert_uint_eq(st.pages_written, 4);
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);

	/* The number is free again; the new inode starts clean. */
	store_open(bdi, &again, 40, 1);
	ck_assert_int_eq(pwb__inode_list(again.inode), PWB__LIST_NONE);
	ck_assert_int_eq(pwb_inode_wb_ctx(again.inode), -ENODATA);
	ck_assert_uint_eq(dirty_pages(again.inode), 0);
	rcu_read_lock();
	found = pwb__inode_lookup_rcu(bdi, 40);
	rcu_read_unlock();
	ck_assert_ptr_eq(found, again.inode);
	store_close(&again);
	tu_store_destroy(&st);
}
END_TEST

static Suite *inode_suite(void)
{
	Suite *s = suite_create("inode");
	TCase *tc;

	tc = tcase_create("lists");
	tcase_add_checked_fixture(tc, inode_setup, inode_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, new_inode_is_on_no_list_and_has_no_context);
	tcase_add_test(tc, first_mark_dirty_queues_on_b_dirty_stamped_now);
	tcase_add_test(tc, b_dirty_is_ordered_first_dirtied_first);
	tcase_add_test(tc, redirty_keeps_dirtied_when_and_position);
	tcase_add_test(tc, fsync_leaves_inode_clean_and_on_no_list);
	tcase_add_test(tc, fsync_leaves_other_inodes_of_the_context_on_b_dirty);
	suite_add_tcase(s, tc);

	tc = tcase_create("metadata");
	tcase_add_checked_fixture(tc, inode_setup, inode_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, dirty_time_on_clean_inode_goes_to_b_dirty_time);
	tcase_add_test(
		tc, dirty_time_inode_moves_to_b_dirty_when_pages_are_dirtied);
	tcase_add_test(tc, dirty_time_on_page_dirty_inode_stays_on_b_dirty);
	tcase_add_test(tc, dirty_meta_on_clean_inode_goes_to_b_dirty);
	tcase_add_test(tc, fsync_calls_write_inode_with_sync_1);
	suite_add_tcase(s, tc);

	tc = tcase_create("affinity_and_registry");
	tcase_add_checked_fixture(tc, inode_setup, inode_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, wb_ctx_is_ino_mod_nr_and_sticks_across_clean, 0,
			    (int)(sizeof(hash_nr) / sizeof(hash_nr[0])));
	tcase_add_test(tc, lookup_rcu_finds_open_inodes_and_not_closed_ones);
	tcase_add_test(tc, dirty_pages_counts_the_union_of_ranges_rounded_out);
	tcase_add_test(tc, close_returns_0_and_the_ino_can_be_opened_again);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(inode_suite(), false);
}
