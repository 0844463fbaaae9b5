// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_blocked.c - time callers slept inside libpwb, per cause, and the
 * latency histograms (lib/blocked.c)
 *
 * The "clock" cases run on the injected clock: a caller is put to sleep
 * for a real reason (a write held back by the delay fault, the flush
 * lock held by the test, a log_force that takes its time), the test
 * waits until the caller is inside that sleep, moves the clock by a known
 * amount and lets the caller go. The cause must then show exactly that
 * time, and the other causes none of it. The throttle, rate-cap and
 * cache-full cases run on the real clock against a slowed device and
 * check that the waits are counted, under the right cause, and nowhere
 * else.
 *
 * The accounting case is the "every sleep is accounted for",
 * checked as honestly as a busy machine allows. Writer threads (dirtying
 * under the throttle, writing into a full page cache, fsyncing) measure,
 * around every libpwb call they make: the wall time W spent inside, the
 * thread's CPU time C inside (CLOCK_THREAD_CPUTIME_ID), and the time R
 * it sat runnable on a run queue inside (/proc/thread-self/schedstat).
 * W - C is the time the calls were off the CPU. What libpwb counted as
 * blocked, B, must lie between:
 *  - B >= 0.95 (W - C - R): a thread off the CPU and not runnable is
 *    asleep; 95% of that sleep at least was counted under some cause.
 *    A sleep not counted (break one cause's accounting) fails this;
 *  - B <= 1.05 (W - C) and B <= W: nothing is counted that the calls did
 *    not spend off the CPU (a wake-up's run-queue wait falls inside the
 *    timed sleep, so R is not taken off here).
 * On an idle machine R is near 0 and the two bounds say "B is W - C
 * within 5%". Lock waits (a mutex another thread holds for microseconds)
 * are not counted as blocked: they are in the 5%.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS TU_PS
#define SEC 1000000000ull
#define MIB (1ull << 20)

static void stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	ck_assert_int_eq(pwb_bdi_stats(bdi, st), 0);
}

static uint64_t sum_blocked(const struct pwb_stats *st)
{
	uint64_t s = 0;

	for (unsigned int i = 0; i < PWB_BLOCK_SLOTS; i++)
		s += st->blocked_ns[i];
	return s;
}

/* Every cause other than those in @mask has no event. */
static void assert_only(const struct pwb_stats *st, unsigned int mask)
{
	for (unsigned int i = 0; i < PWB_BLOCK_SLOTS; i++)
		if (!(mask & (1u << i)))
			ck_assert_msg(!st->blocked_events[i] &&
					      !st->blocked_ns[i],
				      "cause %s: %" PRIu64 " waits, %" PRIu64
				      " ns",
				      pwb_block_cause_str(i),
				      st->blocked_events[i], st->blocked_ns[i]);
}

static void poll_ms(void)
{
	struct timespec ts = { 0, 1000000 };

	nanosleep(&ts, NULL);
}

/* Poll @cond(@arg) every ms for up to 20 s of real time. */
static void wait_until(bool (*cond)(void *), void *arg, const char *what)
{
	for (int i = 0; i < 20000; i++) {
		if (cond(arg))
			return;
		poll_ms();
	}
	ck_abort_msg("timed out waiting for %s", what);
}

static struct pwb_fault delay_fault(unsigned int ms)
{
	struct pwb_fault f = {
		.kind = PWB_FAULT_DELAY, .every = 1, .delay_ms = ms,
	};

	return f;
}

/* ---------------------------------------------------------------------- */
/* Names and buckets                                                      */

START_TEST(cause_names)
{
	ck_assert_str_eq(pwb_block_cause_str(PWB_BLOCK_THROTTLE), "throttle");
	ck_assert_str_eq(pwb_block_cause_str(PWB_BLOCK_BUSY), "busy");
	ck_assert_str_eq(pwb_block_cause_str(PWB_BLOCK_NR_CAUSES), "unknown");
	ck_assert_str_eq(pwb_block_cause_str(~0u), "unknown");
	for (unsigned int i = 0; i < PWB_BLOCK_NR_CAUSES; i++)
		ck_assert_str_ne(pwb_block_cause_str(i), "unknown");
}
END_TEST

START_TEST(histogram_buckets_are_log2)
{
	static const struct {
		uint64_t ns;
		unsigned int bucket;
	} v[] = {
		{ 0, 0 }, { 1, 0 }, { 2, 1 }, { 3, 1 }, { 4, 2 },
		{ 1023, 9 }, { 1024, 10 }, { 1025, 10 },
		{ 1000000, 19 }, { 5 * SEC, 32 }, { UINT64_MAX, 63 },
	};
	struct pwb__blocked *blk = calloc(1, sizeof(*blk));
	uint64_t sum = 0;

	ck_assert_ptr_nonnull(blk);
	for (unsigned int i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint64_t before = blk->hist[PWB_HIST_FSYNC][v[i].bucket];

		pwb__hist_add(blk, PWB_HIST_FSYNC, v[i].ns);
		ck_assert_msg(blk->hist[PWB_HIST_FSYNC][v[i].bucket] ==
				      before + 1,
			      "%" PRIu64 " ns not in bucket %u", v[i].ns,
			      v[i].bucket);
		sum += v[i].ns;
	}
	ck_assert_uint_eq(blk->hist_sum[PWB_HIST_FSYNC], sum);
	for (unsigned int b = 0; b < PWB_HIST_BUCKETS; b++)
		ck_assert_uint_eq(blk->hist[PWB_HIST_WRITE_IO][b], 0);
	free(blk);
}
END_TEST

START_TEST(histogram_bad_arguments)
{
	struct tu_env e;
	struct pwb_histogram h;

	tu_env_config(&e, 1, "null");
	tu_env_open(&e, 64);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_NR, &h), -EINVAL);
	ck_assert_int_eq(pwb_bdi_histogram(NULL, PWB_HIST_FSYNC, &h),
			 -EINVAL);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_FSYNC, NULL),
			 -EINVAL);
	ck_assert_int_eq((pwb_bdi_histogram)(e.bdi, PWB_HIST_FSYNC, &h, 8),
			 -EINVAL);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_FSYNC, &h), 0);
	ck_assert_uint_eq(h.count, 0);
	tu_env_close(&e);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Causes on the injected clock                                           */

struct caller {
	struct tu_env *e;
	struct pwb_inode *inode;
	int rc;
};

static void *fsync_fn(void *arg)
{
	struct caller *c = arg;

	c->rc = pwb_fsync(c->inode);
	return NULL;
}

static bool writing(void *arg)
{
	struct tu_env *e = arg;
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e->bdi, &st), 0);
	return st.writeback_pages > 0;
}

/*
 * pwb_fsync() waits for its write, which the delay fault holds 300 ms; the
 * clock moves 5 s meanwhile: 5 s of sync-wait, in the inode's context,
 * one wait; a device flush (no clock time); the fsync in bucket 32 of its
 * histogram. A second fsync with nothing dirty sleeps nowhere.
 */
START_TEST(sync_wait_is_the_time_the_clock_moved)
{
	struct pwb_fault f = delay_fault(300);
	struct caller c = { 0 };
	struct pwb_histogram h, io;
	struct pwb_stats st, ctx;
	struct tu_store s;
	struct tu_env e;
	pthread_t tid;

	tu_env_config(&e, 2, "psync");
	tu_env_open(&e, 256);
	tu_open_store(&e, &s, 1, 64, 0, NULL);
	tu_dirty_range(&s, 0, 8, 1);
	stats(e.bdi, &st);
	assert_only(&st, 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);

	c.inode = s.inode;
	ck_assert_int_eq(pthread_create(&tid, NULL, fsync_fn, &c), 0);
	wait_until(writing, &e, "the fsync's write");
	tu_clock_advance_ms(&e.clock, 5000);
	ck_assert_int_eq(pthread_join(tid, NULL), 0);
	ck_assert_int_eq(c.rc, 0);

	stats(e.bdi, &st);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_SYNC_WAIT], 5 * SEC);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_SYNC_WAIT], 1);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_DEVICE_FLUSH], 1);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_DEVICE_FLUSH], 0);
	assert_only(&st, 1u << PWB_BLOCK_SYNC_WAIT |
				 1u << PWB_BLOCK_DEVICE_FLUSH);
	/* The inode's context has it too. */
	ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi, pwb_inode_wb_ctx(s.inode),
					  &ctx),
			 0);
	ck_assert_uint_eq(ctx.blocked_ns[PWB_BLOCK_SYNC_WAIT], 5 * SEC);
	ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi,
					  1 - pwb_inode_wb_ctx(s.inode), &ctx),
			 0);
	ck_assert_uint_eq(ctx.blocked_events[PWB_BLOCK_SYNC_WAIT], 0);

	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_FSYNC, &h), 0);
	ck_assert_uint_eq(h.count, 1);
	ck_assert_uint_eq(h.bucket[32], 1);	/* 2^32 <= 5e9 < 2^33 */
	ck_assert_uint_eq(h.sum_ns, 5 * SEC);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_WRITE_IO, &io), 0);
	ck_assert_uint_eq(io.count, st.io_submitted);
	ck_assert_uint_ge(io.count, 1);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_THROTTLE, &h), 0);
	ck_assert_uint_eq(h.count, 0);

	/* Nothing dirty, the flush done: no sleep, nothing counted. */
	ck_assert_int_eq(pwb_fsync(s.inode), 0);
	{
		struct pwb_stats again;

		stats(e.bdi, &again);
		for (unsigned int i = 0; i < PWB_BLOCK_SLOTS; i++)
			ck_assert_uint_eq(again.blocked_events[i],
					  st.blocked_events[i]);
	}
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

static struct tu_clock *force_clock;

/* The application's log takes 3 s of the clock to force. */
static int slow_log_force(uint64_t lsn, void *arg)
{
	(void)lsn;
	(void)arg;
	tu_clock_advance_ms(force_clock, 3000);
	return 0;
}

/* The part of pwb_fsync()'s wait a flusher spent in log_force is the
 * log force's; the rest (none: the clock moved only there) sync-wait. */
START_TEST(log_force_is_split_from_the_sync_wait)
{
	struct pwb_stats st;
	struct tu_store s;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	e.cfg.log_force = slow_log_force;
	force_clock = &e.clock;
	tu_env_open(&e, 256);
	tu_open_store(&e, &s, 1, 64, 0, NULL);
	for (uint64_t i = 0; i < 4; i++) {
		tu_fill_page(&s, i, 1);
		ck_assert_int_eq(pwb_mark_dirty_lsn(s.inode, i * PS, PS,
						    100 + i),
				 0);
	}
	ck_assert_int_eq(pwb_fsync(s.inode), 0);
	stats(e.bdi, &st);
	ck_assert_uint_ge(st.log_forces, 1);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_LOG_FORCE],
			  3 * SEC * st.log_forces);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_LOG_FORCE], 1);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_SYNC_WAIT], 0);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_SYNC_WAIT], 1);
	assert_only(&st, 1u << PWB_BLOCK_SYNC_WAIT |
				 1u << PWB_BLOCK_LOG_FORCE |
				 1u << PWB_BLOCK_DEVICE_FLUSH);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

static bool flush_lock_contended(void *arg)
{
	struct pwb_bdi *bdi = arg;

	/* glibc: 2 while the holder has waiters. */
	return __atomic_load_n(&bdi->flush_lock.__data.__lock,
			       __ATOMIC_ACQUIRE) > 1;
}

static bool synced(void *arg)
{
	struct tu_env *e = arg;
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e->bdi, &st), 0);
	return st.blocked_events[PWB_BLOCK_SYNC_WAIT] > 0;
}

/* A pwb_fsync() that waits 2 s of the clock for another caller's device
 * flush (the test holds the flush lock) counts them as device flush. */
START_TEST(device_flush_waits_are_counted)
{
	struct caller c = { 0 };
	struct pwb_stats st;
	struct tu_store s;
	struct tu_env e;
	pthread_t tid;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 256);
	tu_open_store(&e, &s, 1, 64, 0, NULL);
	tu_dirty_range(&s, 0, 4, 1);
	tu_lib_lock(&e.bdi->flush_lock);
	c.inode = s.inode;
	ck_assert_int_eq(pthread_create(&tid, NULL, fsync_fn, &c), 0);
	wait_until(synced, &e, "the fsync's writes");
	wait_until(flush_lock_contended, e.bdi, "the fsync at the flush lock");
	tu_clock_advance_ms(&e.clock, 2000);
	tu_lib_unlock(&e.bdi->flush_lock);
	ck_assert_int_eq(pthread_join(tid, NULL), 0);
	ck_assert_int_eq(c.rc, 0);
	stats(e.bdi, &st);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_DEVICE_FLUSH], 2 * SEC);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_DEVICE_FLUSH], 1);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_SYNC_WAIT], 0);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

static void *wait_writeback_fn(void *arg)
{
	struct caller *c = arg;

	c->rc = pwb_wait_writeback(c->inode, 0, PS);
	return NULL;
}

static bool waiting_on_page(void *arg)
{
	struct pwb_inode *inode = arg;

	return pwb__aread(&inode->wb_waiters) > 0;
}

/* pwb_wait_writeback() of a page the delayed write holds: stable-page. */
START_TEST(stable_page_waits_are_counted)
{
	struct pwb_fault f = delay_fault(300);
	struct caller c = { 0 };
	struct pwb_stats st;
	struct tu_store s;
	struct tu_env e;
	pthread_t tid;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 256);
	tu_open_store(&e, &s, 1, 64, 0, NULL);
	tu_dirty_range(&s, 0, 1, 1);
	/* Not under writeback: no wait, nothing counted. */
	ck_assert_int_eq(pwb_wait_writeback(s.inode, PS, PS), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_bdi_writeback(e.bdi, PWB_WB_ALL, 0), 0);
	wait_until(writing, &e, "the write");
	c.inode = s.inode;
	ck_assert_int_eq(pthread_create(&tid, NULL, wait_writeback_fn, &c),
			 0);
	wait_until(waiting_on_page, s.inode, "the waiter");
	tu_clock_advance_ms(&e.clock, 1000);
	ck_assert_int_eq(pthread_join(tid, NULL), 0);
	ck_assert_int_eq(c.rc, 0);
	stats(e.bdi, &st);
	ck_assert_uint_eq(st.blocked_ns[PWB_BLOCK_STABLE_PAGE], SEC);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_STABLE_PAGE], 1);
	assert_only(&st, 1u << PWB_BLOCK_STABLE_PAGE);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

static int ident_map(struct pwb_inode *inode, uint64_t index,
		     uint64_t *dev_off)
{
	(void)inode;
	*dev_off = index * PS;
	return 0;
}

static const struct pwb_inode_ops lib_ops = { .map_page = ident_map };

/* A page read from the device is a read wait; a cached one is none. */
START_TEST(reads_from_the_device_are_counted)
{
	static char buf[4 * PS] __attribute__((aligned(4096)));
	struct pwb_inode *inode;
	struct pwb_stats st, st2;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 256);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &lib_ops, NULL, &inode), 0);
	memset(buf, 7, sizeof(buf));
	ck_assert_int_eq(pwb_write(inode, buf, sizeof(buf), 0),
			 (ssize_t)sizeof(buf));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	stats(e.bdi, &st);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_READ], 0);

	/* Reopened: nothing cached. */
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &lib_ops, NULL, &inode), 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(buf)), 0);
	ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
	stats(e.bdi, &st);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_READ], 1);
	ck_assert_uint_le(st.blocked_events[PWB_BLOCK_READ], st.read_ios);
	ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
	stats(e.bdi, &st2);
	ck_assert_uint_eq(st2.blocked_events[PWB_BLOCK_READ],
			  st.blocked_events[PWB_BLOCK_READ]);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Causes on the real clock                                               */

/*
 * A writer dirtying 4 MiB through a 1 MiB limit on a device that takes
 * 5 ms a write sleeps in the throttle: each sleep is counted as throttle
 * (no rate cap: none as rate-cap), at least the 1 ms the throttle sleeps
 * at least, once in the throttle histogram, and also in the old counters.
 */
START_TEST(throttle_sleeps_are_counted)
{
	enum { PAGES = 1024 };
	struct pwb_fault f = delay_fault(5);
	struct pwb_histogram h;
	struct pwb_stats st;
	struct tu_store s;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	e.cfg.clock = NULL;	/* the real clock: the sleeps are real */
	e.cfg.flags |= PWB_BDI_THROTTLE;
	e.cfg.dirty_bytes = MIB;
	e.cfg.throttle_timeout_ms = 20000;
	tu_env_open(&e, 2 * PAGES);
	tu_open_store(&e, &s, 1, PAGES, 0, NULL);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (uint64_t i = 0; i < PAGES; i++) {
		tu_fill_page(&s, i, 1);
		ck_assert_int_eq(pwb_mark_dirty(s.inode, i * PS, PS), 0);
	}
	stats(e.bdi, &st);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_THROTTLE], 1);
	ck_assert_uint_ge(st.blocked_ns[PWB_BLOCK_THROTTLE],
			  st.blocked_events[PWB_BLOCK_THROTTLE] *
				  PWB__THROTTLE_MIN_PAUSE_NS);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_THROTTLE],
			  st.throttle_events);
	assert_only(&st, 1u << PWB_BLOCK_THROTTLE |
				 1u << PWB_BLOCK_SYNC_WAIT);
	ck_assert_int_eq(pwb_bdi_histogram(e.bdi, PWB_HIST_THROTTLE, &h), 0);
	ck_assert_uint_eq(h.count, st.blocked_events[PWB_BLOCK_THROTTLE]);
	ck_assert_uint_eq(h.sum_ns, st.blocked_ns[PWB_BLOCK_THROTTLE]);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

/* A tenant capped at 1 MiB/s with 64 KiB of its own dirty memory, on a
 * device taking 5 ms a write but measured faster than the cap: its
 * writer's pauses have the cap's pace, counted as rate-cap, for the bdi
 * and for the tenant. */
START_TEST(rate_capped_tenant_pauses_are_rate_cap)
{
	enum { PAGES = 256 };
	struct pwb_fault f = delay_fault(5);
	struct pwb_tenant_config tc;
	struct pwb_tenant_stats ts;
	struct pwb_tenant *t;
	struct pwb_stats st;
	struct tu_store s;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	e.cfg.clock = NULL;
	e.cfg.flags |= PWB_BDI_THROTTLE;
	e.cfg.dirty_bytes = 64 * MIB;
	e.cfg.dirty_background_bytes = 32 * MIB;
	e.cfg.throttle_timeout_ms = 20000;
	tu_env_open(&e, 2 * PAGES);
	pwb_tenant_config_init(&tc);
	tc.dirty_bytes = 64 << 10;
	tc.rate_limit_bytes_per_sec = MIB;
	ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, &tc, &t), 0);
	tu_open_store(&e, &s, 1, PAGES, 0, NULL);
	ck_assert_int_eq(pwb_inode_set_tenant(s.inode, t), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (uint64_t i = 0; i < PAGES; i++) {
		tu_fill_page(&s, i, 1);
		ck_assert_int_eq(pwb_mark_dirty(s.inode, i * PS, PS), 0);
	}
	stats(e.bdi, &st);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_RATE_CAP], 1);
	ck_assert_uint_eq(st.blocked_events[PWB_BLOCK_THROTTLE], 0);
	ck_assert_int_eq(pwb_tenant_stats(t, &ts), 0);
	ck_assert_uint_eq(ts.blocked_events[PWB_BLOCK_RATE_CAP],
			  st.blocked_events[PWB_BLOCK_RATE_CAP]);
	ck_assert_uint_eq(ts.blocked_ns[PWB_BLOCK_RATE_CAP],
			  st.blocked_ns[PWB_BLOCK_RATE_CAP]);
	ck_assert_uint_eq(ts.blocked_events[PWB_BLOCK_THROTTLE], 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_inode_set_tenant(s.inode, NULL), 0);
	ck_assert_int_eq(pwb_tenant_destroy(t), 0);
	ck_assert_int_eq(pwb_inode_close(s.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s);
}
END_TEST

/* pwb_write() into a cache of 64 pages on a device taking 5 ms a write:
 * the writer waits for room, counted as cache-full. */
START_TEST(cache_full_waits_are_counted)
{
	enum { PAGES = 512 };
	static char buf[PS] __attribute__((aligned(4096)));
	struct pwb_fault f = delay_fault(5);
	struct pwb_inode *inode;
	struct pwb_stats st;
	struct tu_env e;

	tu_env_config(&e, 1, "psync");
	e.cfg.clock = NULL;
	e.cfg.cache_bytes = 64 * PS;
	e.cfg.throttle_timeout_ms = 20000;
	tu_env_open(&e, 2 * PAGES);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &lib_ops, NULL, &inode), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (uint64_t i = 0; i < PAGES; i++) {
		memset(buf, (int)i, PS);
		ck_assert_int_eq(pwb_write(inode, buf, PS, i * PS), PS);
	}
	stats(e.bdi, &st);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_CACHE_FULL], 1);
	ck_assert_uint_gt(st.blocked_ns[PWB_BLOCK_CACHE_FULL], 0);
	assert_only(&st, 1u << PWB_BLOCK_CACHE_FULL);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Every sleep accounted for                                              */

struct meter {
	struct pwb_tenant *t;		/* this thread's inode's tenant */
	int sched_fd;			/* /proc/thread-self/schedstat */
	uint64_t w0, c0, r0, b0;
	/* Sums over the thread's calls, ns. */
	uint64_t wall, cpu;		/* inside; on the cpu inside */
	uint64_t blocked;		/* what libpwb counted (tenant) */
	uint64_t unaccounted;		/* off cpu beyond what was counted */
	uint64_t overcounted;		/* counted beyond the time off cpu */
	uint64_t runq_quiet;		/* runnable in calls counting none */
	uint64_t calls;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* The thread's time waiting on a run queue, ns; 0 without schedstat. */
static uint64_t runq_ns(struct meter *m)
{
	char b[128];
	unsigned long long run, wait;
	ssize_t n;

	if (m->sched_fd < 0)
		return 0;
	n = pread(m->sched_fd, b, sizeof(b) - 1, 0);
	if (n <= 0)
		return 0;
	b[n] = 0;
	if (sscanf(b, "%llu %llu", &run, &wait) != 2)
		return 0;
	return wait;
}

static uint64_t tenant_blocked(struct meter *m)
{
	struct pwb_tenant_stats ts;
	uint64_t s = 0;

	if (pwb_tenant_stats(m->t, &ts))
		return 0;
	for (unsigned int i = 0; i < PWB_BLOCK_SLOTS; i++)
		s += ts.blocked_ns[i];
	return s;
}

static void meter_in(struct meter *m)
{
	m->b0 = tenant_blocked(m);
	m->r0 = runq_ns(m);
	m->c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	m->w0 = clock_ns(CLOCK_MONOTONIC);
}

static void meter_out(struct meter *m)
{
	uint64_t w = clock_ns(CLOCK_MONOTONIC) - m->w0;
	uint64_t c = clock_ns(CLOCK_THREAD_CPUTIME_ID) - m->c0;
	uint64_t r = runq_ns(m) - m->r0;
	uint64_t b = tenant_blocked(m) - m->b0;
	uint64_t off = w > c ? w - c : 0;

	m->wall += w;
	m->cpu += c;
	m->blocked += b;
	if (off > b)
		m->unaccounted += off - b;
	else
		m->overcounted += b - off;
	if (!b)
		m->runq_quiet += r;
	m->calls++;
}

#define METERED(m, call)                                                       \
	({                                                                     \
		__typeof__(call) r_;                                           \
		meter_in(m);                                                   \
		r_ = (call);                                                   \
		meter_out(m);                                                  \
		r_;                                                            \
	})

enum { ACC_PAGES = 768, ACC_FSYNC_EVERY = 96 };

struct acc_writer {
	struct tu_store *st;		/* mark_dirty writers */
	struct pwb_inode *lib;		/* pwb_write writer */
	struct meter m;
	int err;
};

static void *acc_writer_fn(void *arg)
{
	struct acc_writer *w = arg;
	static char buf[PS] __attribute__((aligned(4096)));

	w->m.sched_fd = open("/proc/thread-self/schedstat", O_RDONLY);
	for (uint64_t i = 0; i < ACC_PAGES && !w->err; i++) {
		int rc;

		if (w->st) {
			tu_fill_page(w->st, i, 1);
			rc = METERED(&w->m, pwb_mark_dirty(w->st->inode,
							   i * PS, PS));
		} else {
			ssize_t n = METERED(&w->m, pwb_write(w->lib, buf, PS,
							     i * PS));

			rc = n == PS ? 0 : (int)n;
		}
		if (!rc && (i + 1) % ACC_FSYNC_EVERY == 0)
			rc = METERED(&w->m, pwb_fsync(w->st ? w->st->inode
							    : w->lib));
		w->err = rc;
	}
	if (w->m.sched_fd >= 0)
		close(w->m.sched_fd);
	return NULL;
}

/*
 * Three writers on a device taking 3 ms a write: two dirty their own
 * inodes under a 1 MiB throttle limit, one writes through a 48-page page
 * cache; every 96 pages each fsyncs. Each writer's inode is in a tenant
 * of its own (default weight, no limits of its own), so that what libpwb
 * counted for a thread's call is the change of its tenant's blocked_ns
 * across the call. Per call, off cpu = wall - cpu inside; then:
 *  - unaccounted (off cpu beyond what was counted, summed over calls),
 *    less the run-queue time of calls that counted nothing (a dirtying
 *    call preempted on a busy machine; sleeping calls' waits for a CPU
 *    after waking are inside the timed sleep), is at most 5% of the
 *    time off cpu: every sleep was accounted for;
 *  - overcounted (counted beyond the call's time off cpu) is at most 5%.
 * So the sum of per-cause blocked time equals the calls' time off the
 * CPU within 5%. The bdi's per-cause sums equal the tenants'.
 */
START_TEST(every_sleep_is_accounted_for)
{
	enum { NW = 3 };
	struct pwb_fault f = delay_fault(3);
	struct acc_writer w[NW];
	struct tu_store s[2];
	struct pwb_inode *lib;
	pthread_t tid[NW];
	struct pwb_stats st;
	struct tu_env e;
	uint64_t wall = 0, cpu = 0, un = 0, over = 0, rq = 0, bt = 0;
	uint64_t calls = 0, b, off;

	tu_env_config(&e, 2, "psync");
	e.cfg.clock = NULL;
	e.cfg.flags |= PWB_BDI_THROTTLE;
	e.cfg.dirty_bytes = MIB;
	e.cfg.dirty_background_bytes = MIB / 4;
	e.cfg.cache_bytes = 48 * PS;
	e.cfg.throttle_timeout_ms = 60000;
	tu_env_open(&e, 4 * ACC_PAGES);
	tu_open_store(&e, &s[0], 1, ACC_PAGES, 0, NULL);
	tu_open_store(&e, &s[1], 2, ACC_PAGES, ACC_PAGES, NULL);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 3, &lib_ops, NULL, &lib), 0);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < NW; i++) {
		w[i].st = i < 2 ? &s[i] : NULL;
		w[i].lib = lib;
		ck_assert_int_eq(pwb_tenant_create(NULL, e.bdi, NULL,
						   &w[i].m.t),
				 0);
		ck_assert_int_eq(pwb_inode_set_tenant(i < 2 ? s[i].inode : lib,
						      w[i].m.t),
				 0);
	}
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (int i = 0; i < NW; i++)
		ck_assert_int_eq(pthread_create(&tid[i], NULL, acc_writer_fn,
						&w[i]),
				 0);
	for (int i = 0; i < NW; i++) {
		ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
		ck_assert_msg(!w[i].err, "writer %d: %s", i,
			      pwb_strerror(w[i].err));
		wall += w[i].m.wall;
		cpu += w[i].m.cpu;
		un += w[i].m.unaccounted;
		over += w[i].m.overcounted;
		rq += w[i].m.runq_quiet;
		bt += w[i].m.blocked;
		calls += w[i].m.calls;
	}
	stats(e.bdi, &st);
	b = sum_blocked(&st);
	off = wall - cpu;
	printf("accounting: %" PRIu64 " calls, inside %.3f s, on cpu %.3f s; "
	       "blocked %.3f s = %.4f of off-cpu; unaccounted %.3f s, of it "
	       "runnable in calls counting none %.3f s; overcounted %.3f s\n",
	       calls, wall / 1e9, cpu / 1e9, b / 1e9, (double)b / (double)off,
	       un / 1e9, rq / 1e9, over / 1e9);
	for (unsigned int i = 0; i < PWB_BLOCK_NR_CAUSES; i++)
		if (st.blocked_events[i])
			printf("  %-12s %8" PRIu64 " waits %10.3f s\n",
			       pwb_block_cause_str(i), st.blocked_events[i],
			       st.blocked_ns[i] / 1e9);
	/* The workload did sleep for each of these. */
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_THROTTLE], 1);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_CACHE_FULL], 1);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_SYNC_WAIT], 1);
	ck_assert_uint_ge(st.blocked_events[PWB_BLOCK_DEVICE_FLUSH], 1);
	/* Only the writers' calls slept, each for its tenant. */
	ck_assert_uint_eq(bt, b);
	ck_assert_msg((un > rq ? un - rq : 0) * 100 <= off * 5,
		      "sleeps not accounted: %" PRIu64 " ns off cpu beyond "
		      "what was counted (%" PRIu64 " ns of it runnable), of "
		      "%" PRIu64 " ns off cpu",
		      un, rq, off);
	ck_assert_msg(over * 100 <= off * 5,
		      "%" PRIu64 " ns counted beyond the %" PRIu64
		      " ns the calls were off the cpu",
		      over, off);
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	for (int i = 0; i < NW; i++)
		ck_assert_int_eq(pwb_inode_set_tenant(i < 2 ? s[i].inode : lib,
						      NULL),
				 0);
	for (int i = 0; i < NW; i++)
		ck_assert_int_eq(pwb_tenant_destroy(w[i].m.t), 0);
	ck_assert_int_eq(pwb_inode_close(lib), 0);
	ck_assert_int_eq(pwb_inode_close(s[0].inode), 0);
	ck_assert_int_eq(pwb_inode_close(s[1].inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&s[0]);
	tu_store_destroy(&s[1]);
}
END_TEST

static Suite *blocked_suite(void)
{
	Suite *s = suite_create("blocked");
	TCase *tc = tcase_create("api");

	tcase_add_test(tc, cause_names);
	tcase_add_test(tc, histogram_buckets_are_log2);
	tcase_add_test(tc, histogram_bad_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("clock");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sync_wait_is_the_time_the_clock_moved);
	tcase_add_test(tc, log_force_is_split_from_the_sync_wait);
	tcase_add_test(tc, device_flush_waits_are_counted);
	tcase_add_test(tc, stable_page_waits_are_counted);
	tcase_add_test(tc, reads_from_the_device_are_counted);
	suite_add_tcase(s, tc);

	tc = tcase_create("real");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, throttle_sleeps_are_counted);
	tcase_add_test(tc, rate_capped_tenant_pauses_are_rate_cap);
	tcase_add_test(tc, cache_full_waits_are_counted);
	tcase_add_test(tc, every_sleep_is_accounted_for);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(blocked_suite(), true);
}
