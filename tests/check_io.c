/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_io.c - the I/O backends (io_uring, null) and the coalescing
 *              statistic, white-box
 *
 * io_uring integrity: writer threads dirty random ranges of many inodes with
 * new page versions while the flushers write on their own with up to
 * io_depth writes in flight (real clock, 10 ms periodic passes, expiry 0,
 * a small background threshold) and writers call pwb_fsync now and then;
 * then pwb_sync, and the device must equal the page memory byte for byte.
 * A write still in flight when its page is dirtied again must land before
 * the page's next write is issued, or a stale version could land last:
 * this is what the test catches. Every end_write must run on the flusher
 * of the inode's context (completions are reaped by the context itself).
 * Runs for nr_wb_ctx 1, 2, 8 times io_depth 1, 4, 32 (a loop test).
 *
 * A request larger than the kernel's UIO_MAXIOV (1024 iovecs) leaves as
 * several SQEs, through the same path as a short completion; a test with
 * 8 MiB requests of 4 KiB pages exercises it on every kernel.
 *
 * Injected faults (io-fault.c) reach both device backends: a short write
 * is continued until every byte lands, an EIO fails its request, which
 * pwb_sync reports, and leaves its pages dirty for the next sync.
 *
 * null backend: nothing reaches the device, yet every page counts as
 * written, and each write is timed as 0 ns without reading the clock; the
 * device backends time each write from its start to its end. io_extents: one per maximal run of contiguous dirty pages with
 * contiguous device offsets, counted before max_io_bytes splits it.
 *
 * The io_uring tests are left out, with a message, only when this machine
 * refuses io_uring (io_uring_queue_init fails: old kernel, seccomp,
 * kernel.io_uring_disabled) or libpwb was built without liburing.
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
#define NR_INODES 64
#define MIN_PAGES 16
#define MAX_PAGES 64
#define NR_WRITERS 4
#define MAX_RANGE 8		/* pages per mark_dirty, at most */
#define FSYNC_EVERY 256		/* a writer fsyncs every this many marks */
#define MIN_MARKS 1500		/* per writer, before stopping */
#define MIN_FLUSHER_PAGES 1500	/* written before the final sync */
#define RUN_LIMIT_MS 30000	/* stop the writers after this at the latest */

static const struct {
	unsigned int nr_ctx;
	unsigned int depth;
} combos[] = {
	{ 1, 1 }, { 1, 4 }, { 1, 32 },
	{ 2, 1 }, { 2, 4 }, { 2, 32 },
	{ 8, 1 }, { 8, 4 }, { 8, 32 },
};

static char *g_img;

static void remove_stale_image(void)
{
	if (g_img)
		unlink(g_img);
}

static void track_image(const char *img)
{
	if (g_img) {
		unlink(g_img);
		free(g_img);
	}
	g_img = img ? strdup(img) : NULL;
}

/* ---------------------------------------------------------------------- */
/* Callbacks: end_write must come from the context's own flusher           */

struct istore {
	struct tu_store st;	/* first: priv is the tu_store too */
	unsigned long wrong_thread;	/* atomic: end_write off its flusher */
};

static void i_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			int err)
{
	struct istore *is = pwb_inode_priv(inode);

	if (pwb__flusher_ctx_idx() != pwb_inode_wb_ctx(inode))
		__atomic_add_fetch(&is->wrong_thread, 1, __ATOMIC_RELAXED);
	tu_ops.end_write(inode, index, nr, err);
}

static struct pwb_inode_ops i_ops;

/* ---------------------------------------------------------------------- */
/* The integrity workload (test-util's tu_workload)                       */

/*
 * After concurrent dirtying with the io_uring flushers running at
 * io_depth, pwb_sync leaves the device equal to the page memory, nothing
 * dirty or in flight, and every completion ran on its context's flusher.
 */
START_TEST(test_uring_device_matches_memory_after_concurrent_dirtying)
{
	unsigned int nr_ctx = combos[_i].nr_ctx, depth = combos[_i].depth;
	struct istore *is = calloc(NR_INODES, sizeof(*is));
	struct tu_store *st[NR_INODES];
	struct tu_workload wl = {
		.nr_stores = NR_INODES,
		.stores = st,
		.nr_writers = NR_WRITERS,
		.max_range = MAX_RANGE,
		.fsync_every = FSYNC_EVERY,
		.min_marks = MIN_MARKS,
		.min_flusher_pages = MIN_FLUSHER_PAGES,
		.run_limit_ms = RUN_LIMIT_MS,
		.seed = (uint64_t)_i,
	};
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct pwb_stats s;
	unsigned int i;
	char *img;
	long bad;
	int rc;

	ck_assert_ptr_nonnull(is);
	for (i = 0; i < NR_INODES; i++)
		st[i] = &is[i].st;
	img = tu_image_create(tu_stores_layout(st, NR_INODES, PS, MIN_PAGES,
					       MAX_PAGES, 0x10a0 + _i) *
			      PS);
	track_image(img);

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr_ctx;
	cfg.page_size = PS;
	cfg.backend = "io_uring";
	cfg.io_depth = depth;
	cfg.dirty_writeback_ms = 10;	/* flushers write all the time */
	cfg.dirty_expire_ms = 0;
	cfg.dirty_background_bytes = 64 * PS;
	cfg.dirty_bytes = 0;
	/* Small requests, so that depth 32 really has 32 in flight. */
	cfg.max_io_bytes = 4 * PS;
	rc = pwb_bdi_open(img, &cfg, &bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open: %s (%s)", pwb_strerror(rc),
		      pwb_errmsg());
	tu_stores_open_dirty(bdi, st, NR_INODES, &i_ops);
	wl.bdi = bdi;
	tu_workload_run(&wl);

	rc = pwb_sync(bdi);
	ck_assert_msg(rc == 0, "pwb_sync: %s", pwb_strerror(rc));
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.writeback_pages, 0);
	ck_assert_uint_eq(s.io_errors, 0);
	ck_assert_uint_gt(s.periodic_passes + s.background_passes, 0);
	bad = tu_verify_stores(img, st, NR_INODES);
	ck_assert_msg(bad == 0, "nr_wb_ctx %u, io_depth %u: %ld pages differ "
		      "from memory", nr_ctx, depth, bad);
	for (i = 0; i < NR_INODES; i++)
		ck_assert_msg(is[i].wrong_thread == 0,
			      "inode %u: %lu completions off its flusher", i,
			      is[i].wrong_thread);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
	track_image(NULL);
	for (i = 0; i < NR_INODES; i++)
		tu_store_destroy(&is[i].st);
	free(is);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Single-inode helpers                                                   */

/* Open a bdi with @backend on a fresh image of @pages pages, with the
 * flushers idle (no periodic or background passes): only syncs write. */
/* open_quiet() with time from @clock(@clock_arg) (NULL: the real clock). */
static struct pwb_bdi *open_clocked(const char *backend, uint64_t pages,
				    unsigned int max_io_bytes, char **img,
				    uint64_t (*clock)(void *), void *clock_arg)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	int rc;

	*img = tu_image_create(pages * PS);
	track_image(*img);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.page_size = PS;
	cfg.backend = backend;
	cfg.dirty_writeback_ms = 0;
	cfg.dirty_background_bytes = 0;
	cfg.dirty_bytes = 0;
	cfg.max_io_bytes = max_io_bytes;
	if (clock) {
		cfg.clock = clock;
		cfg.clock_arg = clock_arg;
	}
	rc = pwb_bdi_open(*img, &cfg, &bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open(%s): %s (%s)", backend,
		      pwb_strerror(rc), pwb_errmsg());
	return bdi;
}

static struct pwb_bdi *open_quiet(const char *backend, uint64_t pages,
				  unsigned int max_io_bytes, char **img)
{
	return open_clocked(backend, pages, max_io_bytes, img, NULL, NULL);
}

static void close_quiet(struct pwb_bdi *bdi, char *img)
{
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
	track_image(NULL);
}

/*
 * Requests of 2048 pages (8 MiB) exceed the kernel's 1024 iovecs per
 * writev: io_uring must continue them with further SQEs, as it does a
 * short completion, and every byte must land.
 */
START_TEST(test_uring_request_above_iov_max_is_continued)
{
	const uint64_t pages = 4096;	/* 16 MiB: two 8 MiB requests */
	struct tu_store st;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint64_t p;
	char *img;

	bdi = open_quiet("io_uring", pages, 8u << 20, &img);
	tu_store_init(&st, 7, PS, pages, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	for (p = 0; p < pages; p++)
		tu_fill_page(&st, p, 1);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, pages * PS), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_submitted, 2);
	ck_assert_uint_eq(s.written_pages, pages);
	ck_assert_uint_eq(s.bytes_written, pages * PS);
	ck_assert_uint_eq(s.io_errors, 0);
	ck_assert_int_eq(tu_verify_device(img, &st, 1), 0);
	close_quiet(bdi, img);
	tu_store_destroy(&st);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Injected faults reach both device backends                             */

/*
 * tests/check_io runs these loops on every backend but io_uring;
 * tests/check_io_uring (this file built with TU_URING_VARIANT=1) runs the
 * io_uring cases alone and exits 77 where the machine has no io_uring.
 * io_uring is last in each table so that each program runs a range.
 */
static const char *const fault_backends[] = { "psync", "io_uring" };

/* 32 extents of 1..16 pages with holes between them, all dirty. */
static void dirty_extents(struct tu_store *st, uint32_t version)
{
	uint64_t p = 0, seed = 0xfa17 + version;
	unsigned int e;

	for (e = 0; e < 32; e++) {
		uint64_t n = 1 + tu_rand(&seed) % 16, q;

		for (q = p; q < p + n; q++)
			tu_fill_page(st, q, version);
		ck_assert_int_eq(pwb_mark_dirty(st->inode, p * PS, n * PS), 0);
		p += n + 1;
	}
}

/*
 * Every write is cut short once (the device takes about half): the
 * backend must continue each from where it stopped, so every byte lands
 * and no error is reported.
 */
START_TEST(test_short_writes_are_continued)
{
	const char *backend = fault_backends[_i];
	struct pwb_fault f = { .kind = PWB_FAULT_SHORT, .every = 1 };
	struct tu_store st;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint64_t hits = 0;
	char *img;

	bdi = open_quiet(backend, 32 * 17, 64 * 1024, &img);
	tu_store_init(&st, 3, PS, 32 * 17, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &f), 0);
	dirty_extents(&st, 1);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_fault_hits(bdi, &hits), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(hits, s.io_submitted);
	ck_assert_uint_gt(hits, 0);
	ck_assert_uint_eq(s.io_errors, 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_int_eq(tu_verify_device(img, &st, 1), 0);
	close_quiet(bdi, img);
	tu_store_destroy(&st);
}
END_TEST

/*
 * One write fails with EIO before reaching the device: pwb_sync reports
 * it, its pages stay dirty, and once the fault is gone the next sync
 * writes them and succeeds.
 */
START_TEST(test_injected_eio_is_reported_and_pages_stay_dirty)
{
	const char *backend = fault_backends[_i];
	struct pwb_fault f = { .kind = PWB_FAULT_EIO, .nth = 3 };
	struct tu_store st;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint64_t dirty;
	char *img;

	bdi = open_quiet(backend, 32 * 17, 64 * 1024, &img);
	tu_store_init(&st, 4, PS, 32 * 17, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &f), 0);
	dirty_extents(&st, 1);
	ck_assert_int_eq(pwb_sync(bdi), -EIO);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_errors, 1);
	ck_assert_int_eq(pwb_inode_dirty_pages(st.inode, &dirty), 0);
	ck_assert_uint_gt(dirty, 0);
	ck_assert_int_eq(st.last_err, -EIO);
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, NULL), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(st.inode, &dirty), 0);
	ck_assert_uint_eq(dirty, 0);
	ck_assert_int_eq(tu_verify_device(img, &st, 1), 0);
	close_quiet(bdi, img);
	tu_store_destroy(&st);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Write latencies (PWB_HIST_WRITE_IO), timed by the backend              */

/* A clock that moves TICK_NS each time it is read, and counts the reads. */
#define TICK_NS 1000000ull	/* 1 ms: bucket 19 */
#define TIMED_WRITES 64

struct tick_clock {
	uint64_t now;
	uint64_t reads;
};

static uint64_t tick_read(void *arg)
{
	struct tick_clock *c = arg;

	__atomic_add_fetch(&c->reads, 1, __ATOMIC_RELAXED);
	return __atomic_add_fetch(&c->now, TICK_NS, __ATOMIC_RELAXED);
}

/* io_uring last: tests/check_io runs the others, check_io_uring it. */
static const char *const timed_backends[] = { "null", "psync", "io_uring" };

/*
 * The write I/O histogram times each write from when the backend starts
 * it to when it ends, on a clock that moves 1 ms at every read. The null
 * backend's writes take no time: every one is 0 ns, and a sync of 64
 * single-page writes reads the clock fewer times than there are writes
 * (two reads a write made a one-page write cost the engine about 40%
 * more). A device backend's write spans at least one
 * tick (read when it starts, and when it ends or is reaped) and fewer
 * than 2^30 ns (about 1000 reads): the stamp is the write's own, not one
 * left in a reused request or none.
 */
START_TEST(test_write_latency_is_timed_by_the_backend)
{
	const char *backend = timed_backends[_i];
	const bool null = !strcmp(backend, "null");
	struct tick_clock clk = { .now = TU_T0 };
	struct pwb_histogram h;
	struct tu_store st;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint64_t p, reads;
	unsigned int b;
	char *img;

	bdi = open_clocked(backend, 2 * TIMED_WRITES, 1u << 20, &img,
			   tick_read, &clk);
	tu_store_init(&st, 11, PS, 2 * TIMED_WRITES, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	/* Every other page: one write each. */
	for (p = 0; p < TIMED_WRITES; p++) {
		tu_fill_page(&st, 2 * p, 1);
		ck_assert_int_eq(pwb_mark_dirty(st.inode, 2 * p * PS, PS), 0);
	}
	reads = __atomic_load_n(&clk.reads, __ATOMIC_RELAXED);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	reads = __atomic_load_n(&clk.reads, __ATOMIC_RELAXED) - reads;

	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_submitted, TIMED_WRITES);
	ck_assert_int_eq(pwb_bdi_histogram(bdi, PWB_HIST_WRITE_IO, &h), 0);
	ck_assert_uint_eq(h.count, TIMED_WRITES);
	if (null) {
		ck_assert_uint_eq(h.bucket[0], TIMED_WRITES);
		ck_assert_uint_eq(h.sum_ns, 0);
		ck_assert_msg(reads < TIMED_WRITES,
			      "%" PRIu64 " clock reads for %u null writes",
			      reads, TIMED_WRITES);
	} else {
		for (b = 0; b < PWB_HIST_BUCKETS; b++)
			if (b < 19 || b >= 30)
				ck_assert_msg(!h.bucket[b],
					      "%s: %" PRIu64 " writes in "
					      "bucket %u",
					      backend, h.bucket[b], b);
		ck_assert_uint_ge(h.sum_ns, TIMED_WRITES * TICK_NS);
		ck_assert_int_eq(tu_verify_device(img, &st, 1), 0);
	}
	close_quiet(bdi, img);
	tu_store_destroy(&st);
}
END_TEST

/* The null backend: every page counts as written, the device stays
 * untouched (all zero). */
START_TEST(test_null_backend_writes_nothing_but_counts_pages)
{
	const uint64_t pages = 1024;
	struct tu_store st;
	struct pwb_bdi_info info;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint8_t *buf;
	uint64_t p, off;
	char *img;

	bdi = open_quiet("null", pages, 1u << 20, &img);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_str_eq(info.backend, "null");
	tu_store_init(&st, 9, PS, pages, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	for (p = 0; p < pages; p++)
		tu_fill_page(&st, p, 1 + (uint32_t)p);
	/* Two ranges with a hole: two extents, several requests. */
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, 600 * PS), 0);
	ck_assert_int_eq(pwb_mark_dirty(st.inode, 700 * PS, 324 * PS), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);

	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.written_pages, 924);
	ck_assert_uint_eq(s.bytes_written, 924 * PS);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.writeback_pages, 0);
	ck_assert_uint_eq(s.io_errors, 0);
	ck_assert_uint_eq(s.io_extents, 2);
	ck_assert_uint_eq(s.io_submitted, 5);	/* 256+256+88, 256+68 */
	ck_assert_uint_eq(st.pages_written, 924);

	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, 1 << 20), 0);
	for (off = 0; off < pages * PS; off += 1 << 20) {
		ck_assert_int_eq(tu_read_device(img, off, buf, 1 << 20), 0);
		for (p = 0; p < (1 << 20); p++)
			if (buf[p])
				break;
		ck_assert_msg(p == (1 << 20), "device byte %" PRIu64
			      " was written by the null backend", off + p);
	}
	free(buf);
	close_quiet(bdi, img);
	tu_store_destroy(&st);
}
END_TEST

/*
 * Requests of a few pages (every random write) come from the context's
 * small cache, not from malloc per I/O (issue 29): one given back is the
 * one handed out next, zeroed, and the cache keeps at most io_depth + 1.
 * A full-size request is never served from it.
 */
START_TEST(test_small_requests_are_reused_up_to_io_depth_plus_one)
{
	struct pwb__io *io[64], *again;
	struct pwb__wb_ctx *wb;
	struct pwb_bdi *bdi;
	unsigned int i, depth;
	char *img;

	bdi = open_quiet("null", 1024, 1u << 20, &img);
	/* No dirty page and no timer: the flusher leaves the cache alone. */
	wb = bdi->ctxs->ctx[0];
	depth = bdi->cfg.io_depth;
	ck_assert_uint_lt(depth + 3, sizeof(io) / sizeof(io[0]));

	io[0] = pwb__io_get(wb, 1);
	ck_assert_ptr_nonnull(io[0]);
	ck_assert_uint_eq(io[0]->cap, PWB__IO_SMALL_PAGES);
	io[0]->nr = 1;
	io[0]->iovcnt = 1;
	pwb__io_put(wb, io[0]);
	again = pwb__io_get(wb, PWB__IO_SMALL_PAGES);
	ck_assert_ptr_eq(again, io[0]);
	ck_assert_uint_eq(again->nr, 0);
	ck_assert_uint_eq(again->iovcnt, 0);
	ck_assert_ptr_eq(again->iov, (struct iovec *)(again + 1));
	pwb__io_put(wb, again);

	for (i = 0; i < depth + 3; i++) {
		io[i] = pwb__io_get(wb, 1);
		ck_assert_ptr_nonnull(io[i]);
	}
	ck_assert_uint_eq(wb->nr_io_small, 0);
	for (i = 0; i < depth + 3; i++)
		pwb__io_put(wb, io[i]);
	ck_assert_uint_eq(wb->nr_io_small, depth + 1);

	again = pwb__io_get(wb, bdi->max_io_pages);
	ck_assert_uint_eq(again->cap, bdi->max_io_pages);
	ck_assert_uint_eq(wb->nr_io_small, depth + 1);
	pwb__io_put(wb, again);
	/* The close drains both caches (ASan and valgrind see a leak). */
	close_quiet(bdi, img);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* io_extents                                                             */

static const char *const extent_backends[] = { "psync", "null", "io_uring" };

/*
 * 16 inodes of exactly 1 MiB each, dirtied whole, with max_io_bytes 1 MiB:
 * each extent leaves as exactly one I/O, so io_extents == io_submitted.
 * Then one 4 MiB extent: io_extents counts it once, before max_io_bytes
 * splits it into four I/Os. Then every other page: one extent, one I/O,
 * per page.
 */
START_TEST(test_io_extents_one_per_contiguous_extent)
{
	const char *backend = extent_backends[_i];
	const uint64_t per = (1u << 20) / PS, nr = 16;
	struct tu_store st[16], big;
	struct pwb_stats s;
	struct pwb_bdi *bdi;
	uint64_t i, p;
	char *img;

	bdi = open_quiet(backend, (nr + 4) * per, 1u << 20, &img);
	for (i = 0; i < nr; i++) {
		tu_store_init(&st[i], 100 + i, PS, per, i * per * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
		for (p = 0; p < per; p++)
			tu_fill_page(&st[i], p, 1);
		ck_assert_int_eq(pwb_mark_dirty(st[i].inode, 0, per * PS), 0);
	}
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_extents, nr);
	ck_assert_uint_eq(s.io_submitted, nr);
	ck_assert_uint_eq(s.written_pages, nr * per);

	tu_store_init(&big, 200, PS, 4 * per, nr * per * PS);
	ck_assert_int_eq(tu_store_open(&big, bdi), 0);
	for (p = 0; p < 4 * per; p++)
		tu_fill_page(&big, p, 1);
	ck_assert_int_eq(pwb_mark_dirty(big.inode, 0, 4 * per * PS), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_extents, nr + 1);
	ck_assert_uint_eq(s.io_submitted, nr + 4);

	for (p = 0; p < per; p += 2) {
		tu_fill_page(&big, p, 2);
		ck_assert_int_eq(pwb_mark_dirty(big.inode, p * PS, PS), 0);
	}
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_uint_eq(s.io_extents, nr + 1 + per / 2);
	ck_assert_uint_eq(s.io_submitted, nr + 4 + per / 2);

	if (strcmp(backend, "null")) {
		ck_assert_int_eq(tu_verify_device(img, st, (unsigned)nr), 0);
		ck_assert_int_eq(tu_verify_device(img, &big, 1), 0);
	}
	close_quiet(bdi, img);
	for (i = 0; i < nr; i++)
		tu_store_destroy(&st[i]);
	tu_store_destroy(&big);
}
END_TEST

#ifndef HAVE_LIBURING
/* Built without liburing: the name is known, and refused clearly. */
START_TEST(test_uring_absent_gives_eopnotsupp)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	char *img = tu_image_create(64 * PS);

	track_image(img);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.backend = "io_uring";
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), -EOPNOTSUPP);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "liburing"));
	tu_image_remove(img);
	track_image(NULL);
}
END_TEST
#endif

/* ---------------------------------------------------------------------- */

/* ---------------------------------------------------------------------- */
/* Atomic writes: how a request is cut into RWF_ATOMIC pieces              */

/*
 * pwb__atomic_len() gives the largest naturally aligned power of two the
 * device writes untorn at an offset: the checks a device applies to an
 * RWF_ATOMIC write (length a power of two within the unit range, offset a
 * multiple of the length, at most the segment limit of one-page iovecs).
 * This VM's devices offer no atomic writes, so the backends' RWF_ATOMIC
 * path itself runs only where one does (check_bdi says which).
 */
START_TEST(test_atomic_pieces_are_aligned_powers_of_two_within_the_unit)
{
	static const struct {
		uint64_t off, len;
		unsigned int min, max, segs;
		uint64_t want;
	} t[] = {
		{ 0, 64 * 1024, 4096, 16384, 0, 16384 },  /* capped by max */
		{ 4096, 64 * 1024, 4096, 16384, 0, 4096 }, /* 4K aligned */
		{ 8192, 64 * 1024, 4096, 16384, 0, 8192 }, /* 8K aligned */
		{ 0, 12288, 4096, 16384, 0, 8192 },	  /* pow2 <= len */
		{ 0, 64 * 1024, 4096, 65536, 1, 4096 },	  /* one segment */
		{ 0, 64 * 1024, 4096, 65536, 2, 8192 },	  /* two segments */
		{ 4096, 64 * 1024, 8192, 65536, 0, 0 },	  /* below min */
		{ 2048, 64 * 1024, 512, 65536, 0, 0 },	  /* page unaligned */
		{ 0, 64 * 1024, 512, 2048, 0, 0 },	  /* max < page */
		{ 1ull << 40, 1ull << 30, 4096, 1u << 20, 0, 1u << 20 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(pwb__atomic_len(t[i].off, t[i].len, 4096,
					      t[i].min, t[i].max,
					      t[i].segs) == t[i].want,
			      "row %u: %" PRIu64 " (want %" PRIu64 ")", i,
			      pwb__atomic_len(t[i].off, t[i].len, 4096,
					      t[i].min, t[i].max, t[i].segs),
			      t[i].want);
}
END_TEST

#define NR_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The io_uring cases: the last entry of each backend table, and more. */
static Suite *io_uring_suite(void)
{
	Suite *s = suite_create("io_uring");
	TCase *tc;

	tc = tcase_create("uring");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc,
		test_uring_device_matches_memory_after_concurrent_dirtying,
		0, NR_OF(combos));
	tcase_add_test(tc, test_uring_request_above_iov_max_is_continued);
	suite_add_tcase(s, tc);

	tc = tcase_create("faults");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_short_writes_are_continued,
			    NR_OF(fault_backends) - 1, NR_OF(fault_backends));
	tcase_add_loop_test(tc,
			    test_injected_eio_is_reported_and_pages_stay_dirty,
			    NR_OF(fault_backends) - 1, NR_OF(fault_backends));
	suite_add_tcase(s, tc);

	tc = tcase_create("extents");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_io_extents_one_per_contiguous_extent,
			    NR_OF(extent_backends) - 1, NR_OF(extent_backends));
	suite_add_tcase(s, tc);

	tc = tcase_create("timing");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_write_latency_is_timed_by_the_backend,
			    NR_OF(timed_backends) - 1, NR_OF(timed_backends));
	suite_add_tcase(s, tc);
	return s;
}

static Suite *io_suite(void)
{
	Suite *s = suite_create("io");
	TCase *tc;

#ifndef HAVE_LIBURING
	tc = tcase_create("uring-absent");
	tcase_add_test(tc, test_uring_absent_gives_eopnotsupp);
	suite_add_tcase(s, tc);
#endif

	tc = tcase_create("faults");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_short_writes_are_continued, 0,
			    NR_OF(fault_backends) - 1);
	tcase_add_loop_test(tc,
			    test_injected_eio_is_reported_and_pages_stay_dirty,
			    0, NR_OF(fault_backends) - 1);
	suite_add_tcase(s, tc);

	tc = tcase_create("null");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_null_backend_writes_nothing_but_counts_pages);
	tcase_add_test(tc, test_small_requests_are_reused_up_to_io_depth_plus_one);
	suite_add_tcase(s, tc);

	tc = tcase_create("extents");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_io_extents_one_per_contiguous_extent, 0,
			    NR_OF(extent_backends) - 1);
	suite_add_tcase(s, tc);

	tc = tcase_create("timing");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_write_latency_is_timed_by_the_backend, 0,
			    NR_OF(timed_backends) - 1);
	suite_add_tcase(s, tc);

	tc = tcase_create("atomic");
	tcase_add_test(tc,
		test_atomic_pieces_are_aligned_powers_of_two_within_the_unit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	int ret;

	if (tu_odirect_unsupported())
		return 77;
	i_ops = tu_ops;
	i_ops.end_write = i_end_write;
	if (TU_URING_VARIANT && tu_uring_unsupported())
		return 77;
	atexit(remove_stale_image);
	ret = tu_run_suite(TU_URING_VARIANT ? io_uring_suite() : io_suite(),
			   false);
	track_image(NULL);
	return ret;
}
