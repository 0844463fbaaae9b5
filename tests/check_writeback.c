/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_writeback.c - the writeback algorithm, white-box
 *
 * Expiry and periodic ("kupdate") writeback on an injected clock, the
 * background threshold, chunking, re-dirtying during writeback, integrity
 * sync under constant re-dirtying, I/O coalescing, close with dirty data,
 * and write errors.
 *
 * Time never passes by sleeping: every bdi here reads a tu_clock that the
 * test advances, the flusher's own periodic timer is off
 * (dirty_writeback_ms = 0) unless a test is about that timer, and passes are
 * driven with pwb_bdi_writeback(..., PWB_WB_WAIT). Threads are created
 * inside the test (the forked child) and never call ck_assert: they record
 * what they saw, the test joins them, then asserts.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS 4096u			/* page size of every bdi here */
#define T0 (1000ull * PWB__NSEC_PER_SEC) /* fake clock at open: 1000 s */
#define EXPIRE_MS 30000u		/* dirty_expire_ms of these tests */

/* ---------------------------------------------------------------------- */
/* Environment: one image, one fake clock, one bdi                        */

static struct pwb_stats bdi_stats(struct pwb_bdi *bdi)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	return st;
}

static uint64_t pages_written(struct tu_store *st)
{
	uint64_t n;

	pthread_mutex_lock(&st->lock);
	n = st->pages_written;
	pthread_mutex_unlock(&st->lock);
	return n;
}

/* The version word of the device copy of page @index of @st. */
static uint64_t device_version(struct tu_env *e, struct tu_store *st,
			       uint64_t index)
{
	void *buf;
	uint64_t v;
	int rc;

	ck_assert(posix_memalign(&buf, 4096, PS) == 0);
	rc = tu_read_device(e->img, st->base_off + index * PS, buf, PS);
	ck_assert_msg(rc == 0, "tu_read_device: %s", strerror(-rc));
	v = *(uint64_t *)buf;
	free(buf);
	return v;
}

static void close_store(struct tu_store *st)
{
	int rc = pwb_inode_close(st->inode);

	ck_assert_msg(rc == 0, "pwb_inode_close(%" PRIu64 "): %s", st->ino,
		      pwb_strerror(rc));
	st->inode = NULL;
}

static uint64_t inode_dirtied_when(struct pwb_inode *inode)
{
	uint64_t t;

	pthread_mutex_lock(&inode->lock);
	t = inode->dirtied_when;
	pthread_mutex_unlock(&inode->lock);
	return t;
}

/* Position of @inode on its context's b_dirty (0 = head), or -1. */
static int b_dirty_position(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb = CMM_LOAD_SHARED(inode->wb);
	struct pwb_inode *pos;
	int i = 0, found = -1;

	ck_assert_ptr_nonnull(wb);
	pthread_mutex_lock(&wb->list_lock);
	cds_list_for_each_entry(pos, &wb->b_dirty, io_list) {
		if (pos == inode) {
			found = i;
			break;
		}
		i++;
	}
	pthread_mutex_unlock(&wb->list_lock);
	return found;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------------- */
/* Expiry and periodic writeback                                          */

/*
 * Two inodes dirtied 10 s apart: a periodic pass writes exactly those whose
 * dirtied_when is more than dirty_expire_ms in the past.
 */
START_TEST(test_expired_inode_written_by_periodic_pass)
{
	struct tu_env e;
	struct tu_store a, b;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	tu_open_store(&e, &b, 2, 8, 8, NULL);

	tu_dirty_range(&a, 0, 8, 1);		/* a: dirtied at T0 */
	tu_clock_advance_ms(&e.clock, 10000);
	tu_dirty_range(&b, 0, 8, 1);		/* b: dirtied at T0 + 10 s */

	/* T0 + 29 s: nothing has expired yet. */
	tu_clock_advance_ms(&e.clock, 19000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);
	ck_assert_uint_eq(tu_dirty_pages(&b), 8);
	ck_assert_uint_eq(bdi_stats(e.bdi).written_pages, 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 8);

	/* T0 + 31 s: a (31 s old) expired, b (21 s old) not. */
	tu_clock_advance_ms(&e.clock, 2000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_uint_eq(pages_written(&a), 8);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_uint_eq(tu_dirty_pages(&b), 8);
	ck_assert_uint_eq(pages_written(&b), 0);
	ck_assert_int_eq(tu_verify(&e, &b, 1), 8);

	/* T0 + 41 s: b (31 s old) expired too. */
	tu_clock_advance_ms(&e.clock, 10000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&b), 0);
	ck_assert_uint_eq(pages_written(&b), 8);
	ck_assert_uint_eq(pages_written(&a), 8);	/* not again */
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(tu_verify(&e, &b, 1), 0);
	ck_assert_uint_eq(bdi_stats(e.bdi).written_pages, 16);

	close_store(&a);
	close_store(&b);
	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&b);
}
END_TEST

/*
 * Dirtying an already dirty inode neither restamps dirtied_when nor moves it
 * behind younger inodes: it expires 30 s after its FIRST dirtying even if it
 * was dirtied again 11 s ago.
 */
START_TEST(test_redirty_does_not_reset_expiry)
{
	struct tu_env e;
	struct tu_store a, b;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	tu_open_store(&e, &b, 2, 8, 8, NULL);

	tu_dirty_range(&a, 0, 1, 1);			/* T0 */
	ck_assert_uint_eq(inode_dirtied_when(a.inode), T0);
	ck_assert_int_eq(pwb__inode_list(a.inode), PWB__LIST_DIRTY);

	tu_clock_advance_ms(&e.clock, 5000);
	tu_dirty_range(&b, 0, 1, 1);			/* T0 + 5 s */
	ck_assert_int_eq(b_dirty_position(a.inode), 0);
	ck_assert_int_eq(b_dirty_position(b.inode), 1);

	tu_clock_advance_ms(&e.clock, 15000);		/* T0 + 20 s */
	tu_dirty_range(&a, 0, 2, 2);	/* same page again, and a new one */
	ck_assert_uint_eq(inode_dirtied_when(a.inode), T0);
	ck_assert_int_eq(b_dirty_position(a.inode), 0);
	ck_assert_int_eq(b_dirty_position(b.inode), 1);
	ck_assert_uint_eq(tu_dirty_pages(&a), 2);

	/* T0 + 31 s: a is 31 s old by its first dirtying, b 26 s. */
	tu_clock_advance_ms(&e.clock, 11000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_uint_eq(pages_written(&a), 2);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_uint_eq(device_version(&e, &a, 0), 2);
	ck_assert_uint_eq(tu_dirty_pages(&b), 1);
	ck_assert_uint_eq(pages_written(&b), 0);

	close_store(&a);
	close_store(&b);
	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&b);
}
END_TEST

/*
 * The flusher's own timer (dirty_writeback_ms > 0) runs periodic passes:
 * an inode is left alone while it is young and written, without any kick,
 * once the injected clock says it expired.
 */
START_TEST(test_flusher_timer_writes_expired_inode_without_kick)
{
	struct tu_env e;
	struct tu_store a;
	int i;

	tu_env_config(&e, 1, "psync");
	e.cfg.dirty_writeback_ms = 10;	/* real-time wakeups, fake expiry */
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);

	tu_dirty_range(&a, 0, 8, 1);
	/* Many timer periods pass, but the fake clock does not move. */
	sleep_ms(200);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);
	ck_assert_uint_eq(pages_written(&a), 0);

	tu_clock_advance_ms(&e.clock, EXPIRE_MS + 1000);
	for (i = 0; i < 3000 && pages_written(&a) < 8; i++)
		sleep_ms(10);
	ck_assert_uint_eq(pages_written(&a), 8);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_uint_ge(bdi_stats(e.bdi).periodic_passes, 1);

	close_store(&a);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Dirty timestamps                                                       */

struct time_store {
	struct tu_store st;	/* first: priv is the tu_store too */
	unsigned int write_inode_calls;	/* flusher writes, test reads after */
	int last_sync;
};

static int time_write_inode(struct pwb_inode *inode, int sync)
{
	struct time_store *ts = pwb_inode_priv(inode);

	__atomic_add_fetch(&ts->write_inode_calls, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ts->last_sync, sync, __ATOMIC_SEQ_CST);
	return 0;
}

static unsigned int write_inode_calls(struct time_store *ts)
{
	return __atomic_load_n(&ts->write_inode_calls, __ATOMIC_SEQ_CST);
}

/*
 * An inode dirty only in its timestamps (PWB_I_DIRTY_TIME) sits on
 * b_dirty_time: periodic writeback ignores it at dirty_expire_ms and writes
 * it (write_inode) only once dirtytime_expire_ms passed; pwb_sync writes it
 * at once.
 */
START_TEST(test_dirty_time_inode_written_only_after_dirtytime_expiry_or_sync)
{
	struct tu_env e;
	struct time_store a, b;
	struct pwb_inode_ops ops = tu_ops;

	ops.write_inode = time_write_inode;
	tu_env_config(&e, 1, "psync");
	e.cfg.dirtytime_expire_ms = 60000;
	tu_env_open(&e, 64);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	tu_open_store(&e, &a.st, 1, 8, 0, &ops);
	tu_open_store(&e, &b.st, 2, 8, 8, &ops);

	ck_assert_int_eq(pwb_mark_inode_dirty(a.st.inode, PWB_I_DIRTY_TIME), 0);
	ck_assert_int_eq(pwb__inode_list(a.st.inode), PWB__LIST_DIRTY_TIME);
	ck_assert_uint_eq(bdi_stats(e.bdi).nr_dirty_time_inodes, 1);

	/* Past dirty_expire_ms, not past dirtytime_expire_ms. */
	tu_clock_advance_ms(&e.clock, EXPIRE_MS + 1000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(write_inode_calls(&a), 0);
	ck_assert_int_eq(pwb__inode_list(a.st.inode), PWB__LIST_DIRTY_TIME);

	/* Past dirtytime_expire_ms (T0 + 61 s). */
	tu_clock_advance_ms(&e.clock, 30000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(write_inode_calls(&a), 1);
	ck_assert_int_eq(pwb__inode_list(a.st.inode), PWB__LIST_NONE);
	ck_assert_uint_eq(bdi_stats(e.bdi).nr_dirty_time_inodes, 0);

	/* A fresh timestamp-only inode is written by sync right away. */
	ck_assert_int_eq(pwb_mark_inode_dirty(b.st.inode, PWB_I_DIRTY_TIME), 0);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(write_inode_calls(&b), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(write_inode_calls(&b), 1);
	ck_assert_int_eq(__atomic_load_n(&b.last_sync, __ATOMIC_SEQ_CST), 1);
	ck_assert_int_eq(pwb__inode_list(b.st.inode), PWB__LIST_NONE);
	ck_assert_uint_eq(write_inode_calls(&a), 1);

	close_store(&a.st);
	close_store(&b.st);
	tu_env_close(&e);
	tu_store_destroy(&a.st);
	tu_store_destroy(&b.st);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Background writeback                                                   */

#define BG_INODES 16
#define BG_PAGES 16
#define BG_THRESH_PAGES 128

/*
 * Above dirty_background_bytes a background pass writes the oldest inodes
 * until the bdi is at or below the threshold, then stops: here 256 dirty
 * pages in 16 inodes and a threshold of 128 pages leave exactly the 8
 * youngest inodes dirty. At the threshold a background pass does nothing.
 */
START_TEST(test_background_pass_stops_at_threshold)
{
	struct tu_env e;
	struct tu_store st[BG_INODES];
	struct pwb_stats s;
	uint64_t written;
	int i;

	tu_env_config(&e, 1, "psync");
	e.cfg.dirty_background_bytes = BG_THRESH_PAGES * PS;
	tu_env_open(&e, BG_INODES * BG_PAGES);
	for (i = 0; i < BG_INODES; i++)
		tu_open_store(&e, &st[i], 100 + i, BG_PAGES, i * BG_PAGES, NULL);

	/* Oldest first: inode i dirtied at T0 + i ms. */
	for (i = 0; i < BG_INODES; i++) {
		tu_dirty_range(&st[i], 0, BG_PAGES, 1);
		tu_clock_advance_ms(&e.clock, 1);
	}
	tu_clock_advance_ms(&e.clock, 1000);

	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	s = bdi_stats(e.bdi);
	ck_assert_uint_eq(s.dirty_pages, BG_THRESH_PAGES);
	ck_assert_uint_eq(s.written_pages, BG_INODES * BG_PAGES -
					   BG_THRESH_PAGES);
	for (i = 0; i < BG_INODES; i++) {
		bool old = i < BG_INODES - BG_THRESH_PAGES / BG_PAGES;

		ck_assert_msg(tu_dirty_pages(&st[i]) == (old ? 0 : BG_PAGES),
			      "inode %d: %" PRIu64 " dirty pages", i,
			      tu_dirty_pages(&st[i]));
		ck_assert_uint_eq(pages_written(&st[i]), old ? BG_PAGES : 0);
	}
	ck_assert_uint_ge(s.background_passes, 1);

	/* At (not above) the threshold: a background pass writes nothing. */
	written = s.written_pages;
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	s = bdi_stats(e.bdi);
	ck_assert_uint_eq(s.written_pages, written);
	ck_assert_uint_eq(s.dirty_pages, BG_THRESH_PAGES);

	/* PWB_WB_ALL writes the rest. */
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(bdi_stats(e.bdi).dirty_pages, 0);
	ck_assert_int_eq(tu_verify(&e, st, BG_INODES), 0);

	tu_env_close(&e);
	for (i = 0; i < BG_INODES; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Chunking                                                               */

/* end_write order across inodes of one pass. */
struct order_store {
	struct tu_store st;
	uint64_t first_seq;	/* seq of the first end_write, 0 = none */
	uint64_t last_seq;	/* seq of the last end_write */
};

static uint64_t g_end_seq;

static void order_end_write(struct pwb_inode *inode, uint64_t index,
			    uint64_t nr, int err)
{
	struct order_store *os = pwb_inode_priv(inode);
	uint64_t seq = __atomic_add_fetch(&g_end_seq, 1, __ATOMIC_SEQ_CST);

	tu_ops.end_write(inode, index, nr, err);
	pthread_mutex_lock(&os->st.lock);
	if (!os->first_seq)
		os->first_seq = seq;
	os->last_seq = seq;
	pthread_mutex_unlock(&os->st.lock);
}

#define HUGE_PAGES 6000
#define SMALL_PAGES 8
#define MIN_CHUNK_PAGES ((4u << 20) / PS)

/*
 * A non-integrity pass writes at most a chunk (max(4 MiB, half a second of
 * bandwidth)) of one inode per visit and then moves on: a small inode
 * dirtied after a huge one is written before the huge one is finished, in
 * the same pass, and the pass still writes everything.
 */
START_TEST(test_chunking_lets_small_inode_be_written_during_huge_one)
{
	struct tu_env e;
	struct order_store huge, small;
	struct pwb_inode_ops ops = tu_ops;
	struct pwb__wb_ctx *wb;
	struct pwb_stats s;
	uint64_t chunk_pages;

	ops.end_write = order_end_write;
	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, HUGE_PAGES + SMALL_PAGES);
	memset(&huge, 0, sizeof(huge));
	memset(&small, 0, sizeof(small));
	tu_open_store(&e, &huge.st, 1, HUGE_PAGES, 0, &ops);
	tu_open_store(&e, &small.st, 2, SMALL_PAGES, HUGE_PAGES, &ops);

	/*
	 * The chunk follows the context's measured bandwidth (100 MiB/s at
	 * first: 50 MiB, more than the huge inode). Bring the estimate down
	 * so that the 4 MiB minimum applies; the flusher is idle and the
	 * work queue's lock orders this store before its next pass, and the
	 * frozen clock keeps the estimate where it is.
	 */
	wb = e.bdi->ctxs->ctx[0];
	CMM_STORE_SHARED(wb->avg_write_bw, 1u << 20);
	ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi, 0, &s), 0);
	chunk_pages = PWB__MAX((uint64_t)MIN_CHUNK_PAGES,
			       s.write_bandwidth / 2 / PS);
	ck_assert_msg(chunk_pages * 2 <= HUGE_PAGES,
		      "chunk of %" PRIu64 " pages: bandwidth estimate %" PRIu64
		      " did not take", chunk_pages, s.write_bandwidth);

	tu_dirty_range(&huge.st, 0, HUGE_PAGES, 1);
	tu_clock_advance_ms(&e.clock, 1);
	tu_dirty_range(&small.st, 0, SMALL_PAGES, 1);
	tu_clock_advance_ms(&e.clock, 1);

	tu_writeback_wait(&e, PWB_WB_ALL);

	ck_assert_uint_eq(tu_dirty_pages(&huge.st), 0);
	ck_assert_uint_eq(tu_dirty_pages(&small.st), 0);
	ck_assert_uint_eq(pages_written(&huge.st), HUGE_PAGES);
	ck_assert_uint_eq(pages_written(&small.st), SMALL_PAGES);
	ck_assert_uint_ne(small.first_seq, 0);
	ck_assert_msg(small.last_seq < huge.last_seq,
		      "small inode finished at write #%" PRIu64
		      ", after the huge one finished at #%" PRIu64,
		      small.last_seq, huge.last_seq);
	ck_assert_msg(huge.first_seq < small.first_seq,
		      "huge inode (dirtied first) was not started first");
	ck_assert_int_eq(tu_verify(&e, &huge.st, 1), 0);
	ck_assert_int_eq(tu_verify(&e, &small.st, 1), 0);

	close_store(&huge.st);
	close_store(&small.st);
	tu_env_close(&e);
	tu_store_destroy(&huge.st);
	tu_store_destroy(&small.st);
}
END_TEST

/*
 * Integrity sync is not chunked: pwb_fsync of the huge inode writes it
 * completely in one visit, and leaves the other inode alone.
 */
START_TEST(test_fsync_writes_huge_inode_completely)
{
	struct tu_env e;
	struct order_store huge, small;
	struct pwb_inode_ops ops = tu_ops;

	ops.end_write = order_end_write;
	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, HUGE_PAGES + SMALL_PAGES);
	memset(&huge, 0, sizeof(huge));
	memset(&small, 0, sizeof(small));
	tu_open_store(&e, &huge.st, 1, HUGE_PAGES, 0, &ops);
	tu_open_store(&e, &small.st, 2, SMALL_PAGES, HUGE_PAGES, &ops);
	CMM_STORE_SHARED(e.bdi->ctxs->ctx[0]->avg_write_bw, 1u << 20);

	tu_dirty_range(&huge.st, 0, HUGE_PAGES, 1);
	tu_dirty_range(&small.st, 0, SMALL_PAGES, 1);
	ck_assert_int_eq(pwb_fsync(huge.st.inode), 0);
	ck_assert_uint_eq(tu_dirty_pages(&huge.st), 0);
	ck_assert_uint_eq(pages_written(&huge.st), HUGE_PAGES);
	ck_assert_int_eq(tu_verify(&e, &huge.st, 1), 0);
	ck_assert_uint_eq(tu_dirty_pages(&small.st), SMALL_PAGES);
	ck_assert_uint_eq(pages_written(&small.st), 0);

	close_store(&huge.st);
	close_store(&small.st);
	tu_env_close(&e);
	tu_store_destroy(&huge.st);
	tu_store_destroy(&small.st);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Re-dirtying during writeback                                           */

/*
 * The application changes a page right after libpwb read it for I/O: on the
 * first get_page of each page, hand out a snapshot of the current (old)
 * contents, then write version 2 into the page memory and mark it dirty.
 * A library that cleared the dirty bit after reading the data would lose
 * that mark_dirty and leave version 1 on the device for good.
 */
struct redirty_store {
	struct tu_store st;	/* first */
	uint8_t *shadow;	/* snapshots handed to the I/O */
	uint8_t *seen;		/* per page: first get_page happened */
	unsigned int get_calls;
	int mark_err;
};

static int redirty_get_page(struct pwb_inode *inode, uint64_t index,
			    const void **data)
{
	struct redirty_store *rs = pwb_inode_priv(inode);
	int rc;

	if (index >= rs->st.nr_pages)
		return -ERANGE;
	rs->get_calls++;
	if (rs->seen[index]) {
		*data = rs->st.mem + index * PS;
		return 0;
	}
	rs->seen[index] = 1;
	memcpy(rs->shadow + index * PS, rs->st.mem + index * PS, PS);
	*data = rs->shadow + index * PS;
	tu_fill_page(&rs->st, index, 2);
	rc = pwb_mark_dirty(inode, index * PS, PS);
	if (rc && !rs->mark_err)
		rs->mark_err = rc;
	return 0;
}

#define REDIRTY_PAGES 16

static void redirty_store_open(struct tu_env *e, struct redirty_store *rs,
			       const struct pwb_inode_ops *ops)
{
	memset(rs, 0, sizeof(*rs));
	tu_open_store(e, &rs->st, 7, REDIRTY_PAGES, 0, ops);
	ck_assert(posix_memalign((void **)&rs->shadow, 4096,
				 REDIRTY_PAGES * PS) == 0);
	rs->seen = calloc(REDIRTY_PAGES, 1);
	ck_assert_ptr_nonnull(rs->seen);
}

static void redirty_store_destroy(struct redirty_store *rs)
{
	free(rs->shadow);
	free(rs->seen);
	tu_store_destroy(&rs->st);
}

/*
 * Integrity path: the first pwb_sync writes the snapshots (version 1) and
 * exactly the pages tagged at its start; the pages re-dirtied during it
 * stay dirty, with the inode back on b_dirty; the next pwb_sync puts
 * version 2, the last contents, on the device.
 */
START_TEST(test_redirty_during_sync_ends_with_last_contents)
{
	struct tu_env e;
	struct redirty_store rs;
	struct pwb_inode_ops ops = tu_ops;
	uint64_t i;

	ops.get_page = redirty_get_page;
	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, REDIRTY_PAGES);
	redirty_store_open(&e, &rs, &ops);

	tu_dirty_range(&rs.st, 0, REDIRTY_PAGES, 1);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_int_eq(rs.mark_err, 0);
	for (i = 0; i < REDIRTY_PAGES; i++) {
		ck_assert(rs.seen[i]);
		/* The snapshot was written: the I/O read after get_page. */
		ck_assert_uint_eq(device_version(&e, &rs.st, i), 1);
	}
	ck_assert_uint_eq(tu_dirty_pages(&rs.st), REDIRTY_PAGES);
	ck_assert_int_eq(pwb__inode_list(rs.st.inode), PWB__LIST_DIRTY);

	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(tu_dirty_pages(&rs.st), 0);
	ck_assert_int_eq(tu_verify(&e, &rs.st, 1), 0);
	for (i = 0; i < REDIRTY_PAGES; i++)
		ck_assert_uint_eq(device_version(&e, &rs.st, i), 2);
	ck_assert_uint_eq(rs.get_calls, 2 * REDIRTY_PAGES);

	close_store(&rs.st);
	tu_env_close(&e);
	redirty_store_destroy(&rs);
}
END_TEST

/*
 * Non-integrity path: after a PWB_WB_ALL pass the re-dirtied pages are
 * either written again already or still dirty with the inode on b_dirty;
 * either way a later PWB_WB_ALL pass (no sync) leaves version 2 on the
 * device and nothing dirty.
 */
START_TEST(test_redirty_during_writeback_pass_written_by_later_pass)
{
	struct tu_env e;
	struct redirty_store rs;
	struct pwb_inode_ops ops = tu_ops;
	uint64_t i, left;

	ops.get_page = redirty_get_page;
	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, REDIRTY_PAGES);
	redirty_store_open(&e, &rs, &ops);

	tu_dirty_range(&rs.st, 0, REDIRTY_PAGES, 1);
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_int_eq(rs.mark_err, 0);
	for (i = 0; i < REDIRTY_PAGES; i++)
		ck_assert(rs.seen[i]);
	left = tu_dirty_pages(&rs.st);
	if (left)
		ck_assert_int_eq(pwb__inode_list(rs.st.inode),
				 PWB__LIST_DIRTY);
	else
		ck_assert_int_eq(tu_verify(&e, &rs.st, 1), 0);

	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&rs.st), 0);
	ck_assert_int_eq(tu_verify(&e, &rs.st, 1), 0);
	for (i = 0; i < REDIRTY_PAGES; i++)
		ck_assert_uint_eq(device_version(&e, &rs.st, i), 2);
	ck_assert_int_eq(pwb__inode_list(rs.st.inode), PWB__LIST_NONE);

	close_store(&rs.st);
	tu_env_close(&e);
	redirty_store_destroy(&rs);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Sync under constant re-dirtying                                        */

#define LL_INODES 6
#define LL_PAGES 32
#define LL_WRITERS 3
#define LL_SYNCS 5

struct ll_shared {
	struct tu_store *st;	/* LL_INODES */
	int stop;		/* atomic */
};

struct ll_writer {
	struct ll_shared *sh;
	pthread_t tid;
	unsigned int id;
	uint64_t seed;
	uint64_t marks;		/* atomic: mark_dirty calls done */
	int err;		/* first mark_dirty error */
	uint32_t version[LL_INODES][LL_PAGES];
};

/* Writer @id owns inodes id, id + LL_WRITERS, ...: no two threads write
 * the same page memory. */
static void *ll_writer_fn(void *arg)
{
	struct ll_writer *w = arg;

	while (!__atomic_load_n(&w->sh->stop, __ATOMIC_ACQUIRE)) {
		unsigned int n = LL_INODES / LL_WRITERS;
		unsigned int i = w->id + LL_WRITERS *
				 (unsigned int)(tu_rand(&w->seed) % n);
		struct tu_store *st = &w->sh->st[i];
		uint64_t first = tu_rand(&w->seed) % LL_PAGES;
		uint64_t nr = 1 + tu_rand(&w->seed) % (LL_PAGES - first);
		uint64_t p;
		int rc;

		if (nr > 4)
			nr = 4;
		for (p = first; p < first + nr; p++)
			tu_fill_page(st, p, ++w->version[i][p]);
		rc = pwb_mark_dirty(st->inode, first * PS, nr * PS);
		if (rc && !w->err)
			w->err = rc;
		__atomic_add_fetch(&w->marks, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static uint64_t ll_total_marks(struct ll_writer *w)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < LL_WRITERS; i++)
		n += __atomic_load_n(&w[i].marks, __ATOMIC_ACQUIRE);
	return n;
}

/*
 * Three threads re-dirty pages as fast as they can while pwb_sync runs
 * again and again: each sync returns 0 (a sync that chased the re-dirtied
 * pages would never return: the tcase timeout catches that). Once the
 * writers stop, a last sync leaves the device equal to memory.
 */
START_TEST(test_sync_completes_while_other_threads_redirty)
{
	struct tu_env e;
	struct tu_store st[LL_INODES];
	struct ll_shared sh;
	struct ll_writer *w;
	int rc[LL_SYNCS], i, k, created = 0;
	uint64_t before;

	tu_env_config(&e, 2, "psync");
	tu_env_open(&e, LL_INODES * LL_PAGES);
	for (i = 0; i < LL_INODES; i++) {
		tu_open_store(&e, &st[i], 10 + i, LL_PAGES, i * LL_PAGES, NULL);
		tu_dirty_range(&st[i], 0, LL_PAGES, 0);
	}
	sh.st = st;
	sh.stop = 0;
	w = calloc(LL_WRITERS, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	for (i = 0; i < LL_WRITERS; i++) {
		w[i].sh = &sh;
		w[i].id = i;
		w[i].seed = 0x9e3779b97f4a7c15ull * (i + 1);
		if (pthread_create(&w[i].tid, NULL, ll_writer_fn, &w[i]))
			break;
		created++;
	}

	for (k = 0; k < LL_SYNCS && created == LL_WRITERS; k++) {
		/* Let the writers get going before each sync. */
		before = ll_total_marks(w);
		for (i = 0; i < 10000 && ll_total_marks(w) < before + 1000;
		     i++)
			sched_yield();
		rc[k] = pwb_sync(e.bdi);
	}
	__atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < created; i++)
		pthread_join(w[i].tid, NULL);

	ck_assert_int_eq(created, LL_WRITERS);
	for (k = 0; k < LL_SYNCS; k++)
		ck_assert_msg(rc[k] == 0, "sync %d: %s", k,
			      pwb_strerror(rc[k]));
	for (i = 0; i < LL_WRITERS; i++) {
		ck_assert_msg(w[i].err == 0, "writer %d: %s", i,
			      pwb_strerror(w[i].err));
		ck_assert_uint_gt(w[i].marks, 0);
	}
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(bdi_stats(e.bdi).dirty_pages, 0);
	ck_assert_int_eq(tu_verify(&e, st, LL_INODES), 0);

	tu_env_close(&e);
	for (i = 0; i < LL_INODES; i++)
		tu_store_destroy(&st[i]);
	free(w);
}
END_TEST

/*
 * The deterministic form of the livelock: every get_page re-dirties its
 * page (new version, pwb_mark_dirty), as another thread could at that very
 * moment. An integrity sync writes the pages tagged at its start once each
 * and returns; one that chased dirty pages would go on until CHASE_CAP
 * get_page calls switch the re-dirtying off, and the call count shows it.
 */
#define CHASE_PAGES 16
#define CHASE_CAP 10000

struct chase_store {
	struct tu_store st;	/* first */
	int redirty;		/* atomic: re-dirty in get_page */
	unsigned int get_calls;	/* atomic */
	int mark_err;
	uint32_t version[CHASE_PAGES];	/* the flusher's, then the test's */
};

static int chase_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	struct chase_store *cs = pwb_inode_priv(inode);
	unsigned int calls;
	int rc;

	if (index >= CHASE_PAGES)
		return -ERANGE;
	calls = __atomic_add_fetch(&cs->get_calls, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&cs->redirty, __ATOMIC_SEQ_CST) &&
	    calls < CHASE_CAP) {
		tu_fill_page(&cs->st, index, ++cs->version[index]);
		rc = pwb_mark_dirty(inode, index * PS, PS);
		if (rc && !cs->mark_err)
			cs->mark_err = rc;
	}
	*data = cs->st.mem + index * PS;
	return 0;
}

START_TEST(test_sync_writes_only_pages_dirty_at_its_start)
{
	struct tu_env e;
	struct chase_store cs;
	struct pwb_inode_ops ops = tu_ops;

	ops.get_page = chase_get_page;
	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, CHASE_PAGES);
	memset(&cs, 0, sizeof(cs));
	tu_open_store(&e, &cs.st, 3, CHASE_PAGES, 0, &ops);
	tu_dirty_range(&cs.st, 0, CHASE_PAGES, 1);
	__atomic_store_n(&cs.redirty, 1, __ATOMIC_SEQ_CST);

	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(__atomic_load_n(&cs.get_calls, __ATOMIC_SEQ_CST),
			  CHASE_PAGES);
	ck_assert_int_eq(cs.mark_err, 0);
	ck_assert_uint_eq(tu_dirty_pages(&cs.st), CHASE_PAGES);

	/* pwb_fsync: the same rule. */
	__atomic_store_n(&cs.get_calls, 0, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(pwb_fsync(cs.st.inode), 0);
	ck_assert_uint_eq(__atomic_load_n(&cs.get_calls, __ATOMIC_SEQ_CST),
			  CHASE_PAGES);
	ck_assert_uint_eq(tu_dirty_pages(&cs.st), CHASE_PAGES);

	/* Quiet again: one more sync and the device has the last versions. */
	__atomic_store_n(&cs.redirty, 0, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_uint_eq(tu_dirty_pages(&cs.st), 0);
	ck_assert_int_eq(tu_verify(&e, &cs.st, 1), 0);

	close_store(&cs.st);
	tu_env_close(&e);
	tu_store_destroy(&cs.st);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Coalescing                                                             */

/* Like tu_ops' map_page, with a one-page hole in the device after page 7. */
static int gap_map_page(struct pwb_inode *inode, uint64_t index,
			uint64_t *dev_off)
{
	struct tu_store *st = pwb_inode_priv(inode);

	if (index >= st->nr_pages)
		return -ERANGE;
	*dev_off = st->base_off + (index < 8 ? index : index + 1) * PS;
	return 0;
}

static uint64_t store_writes(struct tu_store *st)
{
	uint64_t n;

	pthread_mutex_lock(&st->lock);
	n = st->writes;
	pthread_mutex_unlock(&st->lock);
	return n;
}

/*
 * Contiguous dirty pages with contiguous device offsets become one write of
 * up to max_io_bytes (1 MiB = 256 pages): 256 pages -> 1 I/O, two separate
 * ranges -> 2, 512 pages -> 2, and 16 pages with a hole in their device
 * mapping -> 2.
 */
START_TEST(test_contiguous_pages_coalesce_into_one_io)
{
	struct tu_env e;
	struct tu_store a, g;
	struct pwb_inode_ops gap_ops = tu_ops;
	struct pwb_stats s0, s1;

	gap_ops.map_page = gap_map_page;
	tu_env_config(&e, 1, "psync");
	ck_assert_uint_eq(e.cfg.max_io_bytes, 1u << 20);
	tu_env_open(&e, 512 + 32);
	tu_open_store(&e, &a, 1, 512, 0, NULL);
	tu_open_store(&e, &g, 2, 16, 512, &gap_ops);

	/* 256 contiguous pages: one write. */
	tu_dirty_range(&a, 0, 256, 1);
	s0 = bdi_stats(e.bdi);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	s1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(s1.io_submitted - s0.io_submitted, 1);
	ck_assert_uint_eq(s1.written_pages - s0.written_pages, 256);
	ck_assert_uint_eq(s1.bytes_written - s0.bytes_written, 256 * PS);
	ck_assert_uint_eq(store_writes(&a), 1);

	/* Two separate ranges: two writes. */
	tu_dirty_range(&a, 10, 10, 2);
	tu_dirty_range(&a, 100, 10, 2);
	s0 = s1;
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	s1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(s1.io_submitted - s0.io_submitted, 2);
	ck_assert_uint_eq(s1.written_pages - s0.written_pages, 20);
	ck_assert_uint_eq(store_writes(&a), 3);

	/* 512 contiguous pages: split at max_io_bytes. */
	tu_dirty_range(&a, 0, 512, 3);
	s0 = s1;
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	s1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(s1.io_submitted - s0.io_submitted, 2);
	ck_assert_uint_eq(s1.written_pages - s0.written_pages, 512);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);

	/* Contiguous pages, discontiguous device offsets: two writes. */
	tu_dirty_range(&g, 0, 16, 1);
	s0 = s1;
	ck_assert_int_eq(pwb_fsync(g.inode), 0);
	s1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(s1.io_submitted - s0.io_submitted, 2);
	ck_assert_uint_eq(s1.written_pages - s0.written_pages, 16);
	ck_assert_uint_eq(device_version(&e, &g, 7), 1);
	ck_assert_uint_eq(device_version(&e, &g, 9), 1);  /* holds page 8 */

	close_store(&a);
	close_store(&g);
	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&g);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Close with dirty data                                                  */

START_TEST(test_inode_close_writes_dirty_data)
{
	struct tu_env e;
	struct tu_store a, b;

	tu_env_config(&e, 2, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 16, 0, NULL);
	tu_open_store(&e, &b, 2, 16, 16, NULL);
	tu_dirty_range(&a, 0, 16, 1);
	tu_dirty_range(&b, 3, 5, 1);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 16);	/* nothing written yet */
	ck_assert_int_eq(tu_verify(&e, &b, 1), 5);

	close_store(&a);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_uint_eq(pages_written(&a), 16);
	ck_assert_uint_eq(pages_written(&b), 0);	/* only that inode */
	close_store(&b);
	ck_assert_int_eq(tu_verify(&e, &b, 1), 0);
	ck_assert_uint_eq(bdi_stats(e.bdi).dirty_pages, 0);

	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&b);
}
END_TEST

/*
 * pwb_bdi_close writes the dirty data of inodes that are still open (their
 * handles die with the bdi): every byte is on the device afterwards.
 */
START_TEST(test_bdi_close_writes_dirty_data_of_open_inodes)
{
	struct tu_env e;
	struct tu_store st[4];
	int i, rc;

	tu_env_config(&e, 2, "psync");
	tu_env_open(&e, 4 * 32);
	for (i = 0; i < 4; i++) {
		tu_open_store(&e, &st[i], 20 + i, 32, i * 32, NULL);
		tu_dirty_range(&st[i], i, 32 - 2 * i, 1 + i);
	}
	ck_assert_int_eq(tu_verify(&e, st, 4), 32 + 30 + 28 + 26);

	rc = pwb_bdi_close(e.bdi);
	e.bdi = NULL;
	ck_assert_msg(rc == 0, "pwb_bdi_close: %s", pwb_strerror(rc));
	ck_assert_int_eq(tu_verify(&e, st, 4), 0);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(pages_written(&st[i]), 32 - 2 * i);

	tu_env_close(&e);
	for (i = 0; i < 4; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Write errors                                                           */

/*
 * map_page fails with -EIO for pages 4..7: pwb_fsync reports -EIO once, the
 * failed pages stay dirty, the good ones are on the device. Once the fault
 * is gone the next fsync writes them and returns 0 (the old error is not
 * reported again); pwb_sync, which has its own cursor, reports the error
 * once too.
 */
START_TEST(test_write_error_reported_once_by_fsync_then_data_lands)
{
	struct tu_env e;
	struct tu_store a;
	struct pwb_stats s;
	uint64_t i;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	a.map_err = EIO;
	a.fail_from = 4;

	tu_dirty_range(&a, 0, 8, 1);
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	ck_assert_uint_eq(tu_dirty_pages(&a), 4);
	for (i = 0; i < 4; i++)
		ck_assert_uint_eq(device_version(&e, &a, i), 1);
	for (i = 4; i < 8; i++)
		ck_assert_uint_eq(device_version(&e, &a, i), 0);
	s = bdi_stats(e.bdi);
	ck_assert_uint_eq(s.written_pages, 4);
	ck_assert_uint_eq(s.dirty_pages, 4);

	/* Fault gone: the data lands, the old error is not reported again. */
	a.map_err = 0;
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);

	/* pwb_sync has not seen it yet: once, then never again. */
	ck_assert_int_eq(pwb_sync(e.bdi), -EIO);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);

	close_store(&a);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/*
 * A failed write is retried by a later pass once the fault is gone: the
 * pages stayed dirty and the inode on a list. The error is reported once to
 * pwb_fsync, and pwb_bdi_close reports it because no pwb_sync did.
 */
START_TEST(test_failed_pages_rewritten_by_later_pass)
{
	struct tu_env e;
	struct tu_store a;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	a.map_err = EIO;
	a.fail_from = 0;

	tu_dirty_range(&a, 0, 8, 1);
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);
	ck_assert_int_ne(pwb__inode_list(a.inode), PWB__LIST_NONE);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 8);

	a.map_err = 0;
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	/* The error of the first pass is still reported, once. */
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	close_store(&a);	/* reported already: 0 */

	/* No pwb_sync ever saw it: closing the bdi reports it. */
	ck_assert_int_eq(pwb_bdi_close(e.bdi), -EIO);
	e.bdi = NULL;
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/*
 * An error that no pwb_fsync reported is returned by pwb_inode_close, even
 * though a later pass wrote the pages fine; pwb_bdi_close returns it too,
 * since no pwb_sync reported it either.
 */
START_TEST(test_unreported_write_error_returned_by_close)
{
	struct tu_env e;
	struct tu_store a;
	int rc;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	a.map_err = EIO;
	a.fail_from = 2;

	tu_dirty_range(&a, 0, 8, 1);
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&a), 6);

	a.map_err = 0;
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);

	rc = pwb_inode_close(a.inode);
	a.inode = NULL;
	ck_assert_int_eq(rc, -EIO);
	rc = pwb_bdi_close(e.bdi);
	e.bdi = NULL;
	ck_assert_int_eq(rc, -EIO);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/* ---------------------------------------------------------------------- */

/* ---------------------------------------------------------------------- */
/* Ordered passes (xarray) and shared lists (shared-list)                 */

#define ORD_N 8
#define ORD_PAGES 2

/* Inode i of the order tests sits at device slot perm[i]: dirtying order
 * and device order differ. */
static const unsigned int ord_perm[ORD_N] = { 5, 2, 7, 0, 3, 6, 1, 4 };

/* Dirty ORD_N inodes in index order (1 ms apart) under @policy, run one
 * WB_ALL pass, and return in @slot_seq the first end_write sequence of the
 * inode at each device slot. */
static void run_order_pass(const char *policy, uint64_t *slot_seq)
{
	struct order_store os[ORD_N];
	struct pwb_inode_ops ops = tu_ops;
	struct tu_env e;
	unsigned int i;

	ops.end_write = order_end_write;
	tu_env_config(&e, 1, "psync");
	e.cfg.policy = policy;
	tu_env_open(&e, ORD_N * ORD_PAGES);
	memset(os, 0, sizeof(os));
	for (i = 0; i < ORD_N; i++) {
		tu_open_store(&e, &os[i].st, 10 + i, ORD_PAGES,
			   ord_perm[i] * ORD_PAGES, &ops);
		tu_dirty_range(&os[i].st, 0, ORD_PAGES, 1);
		tu_clock_advance_ms(&e.clock, 1);
	}
	tu_writeback_wait(&e, PWB_WB_ALL);
	for (i = 0; i < ORD_N; i++) {
		ck_assert_uint_eq(pages_written(&os[i].st), ORD_PAGES);
		slot_seq[ord_perm[i]] = os[i].first_seq;
	}
	for (i = 0; i < ORD_N; i++)
		ck_assert_int_eq(tu_verify(&e, &os[i].st, 1), 0);
	for (i = 0; i < ORD_N; i++)
		close_store(&os[i].st);
	tu_env_close(&e);
	for (i = 0; i < ORD_N; i++)
		tu_store_destroy(&os[i].st);
}

/*
 * Under xarray a pass writes its inodes in key (device) order, whatever
 * order they were dirtied in; the default FIFO writes them oldest first.
 */
START_TEST(test_xarray_pass_writes_inodes_in_device_order)
{
	uint64_t seq[ORD_N];
	unsigned int i;

	run_order_pass("xarray", seq);
	for (i = 1; i < ORD_N; i++)
		ck_assert_msg(seq[i - 1] < seq[i],
			      "xarray: device slot %u written (#%" PRIu64
			      ") after slot %u (#%" PRIu64 ")",
			      i - 1, seq[i - 1], i, seq[i]);

	run_order_pass("inode-hash", seq);
	for (i = 1; i < ORD_N; i++) {
		/* FIFO: slot ord_perm[k] was dirtied k-th. */
		ck_assert_uint_lt(seq[ord_perm[i - 1]], seq[ord_perm[i]]);
	}
}
END_TEST

/*
 * Ordering does not change which inodes a periodic pass picks: an inode
 * at the end of the device that expired is written, a younger one at the
 * start is not, until it expires too.
 */
START_TEST(test_xarray_expired_inode_written_by_periodic_pass)
{
	struct tu_store high, low;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	e.cfg.policy = "xarray";
	tu_env_open(&e, 64);
	tu_open_store(&e, &high, 1, 4, 60, NULL);
	tu_open_store(&e, &low, 2, 4, 0, NULL);
	tu_dirty_range(&high, 0, 4, 1);
	tu_clock_advance_ms(&e.clock, EXPIRE_MS / 2);
	tu_dirty_range(&low, 0, 4, 1);
	tu_clock_advance_ms(&e.clock, EXPIRE_MS / 2 + 1000);

	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&high), 0);
	ck_assert_uint_eq(pages_written(&high), 4);
	ck_assert_uint_eq(tu_dirty_pages(&low), 4);
	ck_assert_uint_eq(pages_written(&low), 0);

	tu_clock_advance_ms(&e.clock, EXPIRE_MS / 2);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&low), 0);
	ck_assert_int_eq(tu_verify(&e, &high, 1), 0);
	ck_assert_int_eq(tu_verify(&e, &low, 1), 0);
	close_store(&high);
	close_store(&low);
	tu_env_close(&e);
	tu_store_destroy(&high);
	tu_store_destroy(&low);
}
END_TEST

/*
 * shared-list: every inode lives on context 0, and a pass of any context
 * takes them from there and writes them on its own queue. The test runs
 * a pass of context 2 itself (its flusher is idle: no timer, no
 * background), so who wrote what is certain.
 */
START_TEST(test_shared_list_pass_of_any_context_writes_shared_inodes)
{
	enum { N = 10, PAGES = 8, HUGE = 3000 };
	struct pwb__wb_work work = {
		.sync_mode = PWB__SYNC_NONE,
		.reason = PWB_WB_ALL,
		.nr_pages = INT64_MAX,
	};
	struct tu_store st[N + 1];
	struct pwb_stats cs;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 4, "psync");
	e.cfg.policy = "shared-list:batch=3";
	tu_env_open(&e, N * PAGES + HUGE);
	for (i = 0; i < N; i++) {
		tu_open_store(&e, &st[i], 100 + i, PAGES, i * PAGES, NULL);
		tu_dirty_range(&st[i], 0, PAGES, 1);
		ck_assert_int_eq(pwb_inode_wb_ctx(st[i].inode), 0);
	}
	/* More than a chunk (4 MiB at least): still written whole. */
	tu_open_store(&e, &st[N], 999, HUGE, N * PAGES, NULL);
	tu_dirty_range(&st[N], 0, HUGE, 1);
	ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi, 0, &cs), 0);
	ck_assert_uint_eq(cs.nr_dirty_inodes, N + 1);

	ck_assert_int_eq(pwb__wb_do_work(e.bdi->ctxs->ctx[2], &work), 0);

	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi, i, &cs), 0);
		ck_assert_uint_eq(cs.written_pages,
				  i == 2 ? N * PAGES + HUGE : 0);
		ck_assert_uint_eq(cs.dirty_pages, 0);
		ck_assert_uint_eq(cs.writeback_pages, 0);
		ck_assert_uint_eq(cs.nr_inodes, i == 0 ? N + 1 : 0);
	}
	ck_assert_uint_eq(bdi_stats(e.bdi).inodes_written, N + 1);
	ck_assert_int_eq(tu_verify(&e, st, N + 1), 0);
	for (i = 0; i <= N; i++)
		close_store(&st[i]);
	tu_env_close(&e);
	for (i = 0; i <= N; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

/* A store that notices two threads writing it at once. */
struct excl_store {
	struct tu_store st;
	uint64_t inflight;	/* st.lock: pages handed out, not ended */
	pthread_t owner;	/* st.lock: thread that handed them out */
	unsigned int overlaps;	/* st.lock */
};

static int excl_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data)
{
	struct excl_store *x = pwb_inode_priv(inode);

	pthread_mutex_lock(&x->st.lock);
	if (x->inflight && !pthread_equal(x->owner, pthread_self()))
		x->overlaps++;
	x->owner = pthread_self();
	x->inflight++;
	pthread_mutex_unlock(&x->st.lock);
	return tu_ops.get_page(inode, index, data);
}

static void excl_end_write(struct pwb_inode *inode, uint64_t index,
			   uint64_t nr, int err)
{
	struct excl_store *x = pwb_inode_priv(inode);

	pthread_mutex_lock(&x->st.lock);
	x->inflight -= nr;
	pthread_mutex_unlock(&x->st.lock);
	tu_ops.end_write(inode, index, nr, err);
}

struct excl_dirtier {
	struct excl_store *x;
	unsigned int n;
	uint64_t seed;
	volatile int stop;
	int err;
};

static void *excl_dirtier_main(void *arg)
{
	struct excl_dirtier *d = arg;

	while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE) && !d->err) {
		struct tu_store *st = &d->x[tu_rand(&d->seed) % d->n].st;
		uint64_t p = tu_rand(&d->seed) % st->nr_pages;

		/* A page being written meanwhile is dirty again: a later
		 * pass or the final sync writes this version. */
		tu_fill_page(st, p, tu_page_version(st, p) + 1);
		d->err = pwb_mark_dirty(st->inode, p * PS, PS);
	}
	return NULL;
}

/*
 * shared-list with four flushers claiming one inode at a time while a
 * thread keeps dirtying: no inode is ever written by two threads at once,
 * and a final sync leaves the device equal to memory.
 */
START_TEST(test_shared_list_inode_written_by_one_thread_at_a_time)
{
	enum { N = 12, PAGES = 64, ROUNDS = 20 };
	struct excl_store x[N];
	struct pwb_inode_ops ops = tu_ops;
	struct excl_dirtier d = { .x = x, .n = N, .seed = 42 };
	unsigned int i, overlaps = 0, r;
	pthread_t t;
	struct tu_env e;

	ops.get_page = excl_get_page;
	ops.end_write = excl_end_write;
	tu_env_config(&e, 4, "psync");
	e.cfg.policy = "shared-list:batch=1";
	tu_env_open(&e, N * PAGES);
	memset(x, 0, sizeof(x));
	for (i = 0; i < N; i++) {
		tu_open_store(&e, &x[i].st, 300 + i, PAGES, i * PAGES, &ops);
		tu_dirty_range(&x[i].st, 0, PAGES, 1);
	}
	ck_assert_int_eq(pthread_create(&t, NULL, excl_dirtier_main, &d), 0);
	for (r = 0; r < ROUNDS; r++) {
		tu_clock_advance_ms(&e.clock, 1);
		tu_writeback_wait(&e, PWB_WB_ALL);
	}
	__atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_int_eq(d.err, 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	for (i = 0; i < N; i++) {
		pthread_mutex_lock(&x[i].st.lock);
		overlaps += x[i].overlaps;
		ck_assert_uint_eq(x[i].inflight, 0);
		pthread_mutex_unlock(&x[i].st.lock);
	}
	ck_assert_uint_eq(overlaps, 0);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(tu_verify(&e, &x[i].st, 1), 0);
	for (i = 0; i < N; i++)
		close_store(&x[i].st);
	tu_env_close(&e);
	for (i = 0; i < N; i++)
		tu_store_destroy(&x[i].st);
}
END_TEST

/*
 * The busy-inode wait of an integrity pass (pass_over_busy_locked(), the
 * path of the use after free fixed in 444f0cb). Under shared-list two
 * flushers work on context 0's lists: context 0's flusher runs a
 * pwb_fsync of the inode and is held inside get_page (a gate the test
 * opens), so the inode is I_SYNC and still on the lists; then pwb_sync
 * queues an integrity pass on context 1, which meets the inode on b_io
 * and must wait for that visit to end before it may finish.
 *
 * Observed without sleeps: busy_waits counts the wait, and the events say
 * whether context 1's integrity pass ended. The test waits until one of
 * the two happens; with the wait the pass cannot end while the gate is
 * closed. Remove the wait (treat the sync pass like SYNC_NONE, which
 * skips the inode to b_more_io) and the pass ends with busy_waits 0.
 */
struct busy_gate {
	struct tu_store st;		/* first: priv is the tu_store too */
	pthread_mutex_t lock;		/* the fields below */
	pthread_cond_t cond;
	bool entered;			/* a get_page is held at the gate */
	bool open;
	bool ctx1_sync_ended;		/* context 1's integrity pass ended */
	int fsync_ret, sync_ret;
	struct pwb_bdi *bdi;
};

static struct busy_gate *busy_gate_of(struct pwb_inode *inode)
{
	return pwb_inode_priv(inode);
}

static int gate_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data)
{
	struct busy_gate *g = busy_gate_of(inode);

	pthread_mutex_lock(&g->lock);
	if (!g->open) {
		g->entered = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->open)
			pthread_cond_wait(&g->cond, &g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return tu_ops.get_page(inode, index, data);
}

static void gate_event(const struct pwb_event *ev, void *arg)
{
	struct busy_gate *g = arg;

	if (ev->type != PWB_EV_WB_END || ev->ctx != 1 ||
	    ev->reason != PWB_WB_SYNC)
		return;
	pthread_mutex_lock(&g->lock);
	g->ctx1_sync_ended = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static void *gate_fsync_main(void *arg)
{
	struct busy_gate *g = arg;
	int ret = pwb_fsync(g->st.inode);

	pthread_mutex_lock(&g->lock);
	g->fsync_ret = ret;
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

static void *gate_sync_main(void *arg)
{
	struct busy_gate *g = arg;
	int ret = pwb_sync(g->bdi);

	pthread_mutex_lock(&g->lock);
	g->sync_ret = ret;
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

START_TEST(test_integrity_pass_waits_for_inode_another_flusher_writes)
{
	enum { PAGES = 8 };
	struct pwb_inode_ops ops = tu_ops;
	struct busy_gate g;
	pthread_t tf, ts;
	struct tu_env e;
	bool ended;

	memset(&g, 0, sizeof(g));
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	g.fsync_ret = g.sync_ret = 1;
	ops.get_page = gate_get_page;
	tu_env_config(&e, 2, "psync");
	e.cfg.policy = "shared-list:batch=1";
	e.cfg.nr_flushers = 0;		/* one flusher per context */
	e.cfg.event = gate_event;
	e.cfg.event_arg = &g;
	tu_env_open(&e, PAGES);
	g.bdi = e.bdi;
	tu_open_store(&e, &g.st, 77, PAGES, 0, &ops);
	tu_dirty_range(&g.st, 0, PAGES, 1);
	ck_assert_int_eq(pwb_inode_wb_ctx(g.st.inode), 0);

	/* Context 0's flusher holds the inode (I_SYNC) inside get_page. */
	ck_assert_int_eq(pthread_create(&tf, NULL, gate_fsync_main, &g), 0);
	pthread_mutex_lock(&g.lock);
	while (!g.entered)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);

	/* Context 1's integrity pass meets it: it waits (busy_waits) or,
	 * without the wait, ends. Whichever comes first. */
	ck_assert_int_eq(pthread_create(&ts, NULL, gate_sync_main, &g), 0);
	for (;;) {
		pthread_mutex_lock(&g.lock);
		ended = g.ctx1_sync_ended;
		pthread_mutex_unlock(&g.lock);
		if (ended || bdi_stats(e.bdi).busy_waits)
			break;
		sched_yield();
	}
	ck_assert_msg(!ended, "context 1's integrity pass ended while the "
		      "inode it had to write was held by another flusher");
	ck_assert_uint_eq(bdi_stats(e.bdi).busy_waits, 1);

	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(tf, NULL);
	pthread_join(ts, NULL);
	ck_assert_int_eq(g.fsync_ret, 0);
	ck_assert_int_eq(g.sync_ret, 0);
	ck_assert(g.ctx1_sync_ended);
	ck_assert_uint_eq(bdi_stats(e.bdi).busy_waits, 1);
	ck_assert_uint_eq(tu_dirty_pages(&g.st), 0);
	ck_assert_int_eq(tu_verify(&e, &g.st, 1), 0);
	close_store(&g.st);
	tu_env_close(&e);
	tu_store_destroy(&g.st);
	pthread_cond_destroy(&g.cond);
	pthread_mutex_destroy(&g.lock);
}
END_TEST

static Suite *writeback_suite(void)
{
	Suite *s = suite_create("writeback");
	TCase *tc;

	tc = tcase_create("expiry");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_expired_inode_written_by_periodic_pass);
	tcase_add_test(tc, test_redirty_does_not_reset_expiry);
	tcase_add_test(tc, test_flusher_timer_writes_expired_inode_without_kick);
	tcase_add_test(tc,
		test_dirty_time_inode_written_only_after_dirtytime_expiry_or_sync);
	suite_add_tcase(s, tc);

	tc = tcase_create("background");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_background_pass_stops_at_threshold);
	suite_add_tcase(s, tc);

	tc = tcase_create("chunking");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_chunking_lets_small_inode_be_written_during_huge_one);
	tcase_add_test(tc, test_fsync_writes_huge_inode_completely);
	suite_add_tcase(s, tc);

	tc = tcase_create("layouts");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_xarray_pass_writes_inodes_in_device_order);
	tcase_add_test(tc, test_xarray_expired_inode_written_by_periodic_pass);
	tcase_add_test(tc,
		test_shared_list_pass_of_any_context_writes_shared_inodes);
	tcase_add_test(tc,
		test_shared_list_inode_written_by_one_thread_at_a_time);
	tcase_add_test(tc,
		test_integrity_pass_waits_for_inode_another_flusher_writes);
	suite_add_tcase(s, tc);

	tc = tcase_create("redirty");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_redirty_during_sync_ends_with_last_contents);
	tcase_add_test(tc, test_redirty_during_writeback_pass_written_by_later_pass);
	tcase_add_test(tc, test_sync_completes_while_other_threads_redirty);
	tcase_add_test(tc, test_sync_writes_only_pages_dirty_at_its_start);
	suite_add_tcase(s, tc);

	tc = tcase_create("io");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_contiguous_pages_coalesce_into_one_io);
	suite_add_tcase(s, tc);

	tc = tcase_create("close");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_inode_close_writes_dirty_data);
	tcase_add_test(tc, test_bdi_close_writes_dirty_data_of_open_inodes);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_write_error_reported_once_by_fsync_then_data_lands);
	tcase_add_test(tc, test_failed_pages_rewritten_by_later_pass);
	tcase_add_test(tc, test_unreported_write_error_returned_by_close);
	suite_add_tcase(s, tc);

	return s;
}

/* O_DIRECT needs a real file system: skip (77) if the test directory is on
 * one that refuses it, saying so. */
int main(void)
{
	if (tu_odirect_unsupported())
		return 77;
	return tu_run_suite(writeback_suite(), false);
}
