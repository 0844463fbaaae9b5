// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_datasafety.c - no library-owned file reads bytes it never held
 * (issue 25, items 1 to 7): holes, failed writes, truncates, wrapping
 * lengths, messages, calls from callbacks and busy extents.
 *
 * The images start full of STALE bytes, standing for a deleted file's
 * data: a file that shows one of them shows bytes it never held.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "space.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PS TU_PS
#define STALE 0xee

static const struct pwb_inode_ops alloc_ops = { 0 };

/* Fill the image of @e with STALE bytes (before any I/O of its bdi). */
static void stale_image(struct tu_env *e, uint64_t pages)
{
	static unsigned char b[64 * PS];
	int fd = open(e->img, O_WRONLY);
	uint64_t off;

	ck_assert_int_ge(fd, 0);
	memset(b, STALE, sizeof(b));
	for (off = 0; off < pages * PS; off += sizeof(b))
		ck_assert_int_eq(pwrite(fd, b, TU_MIN(sizeof(b),
						      pages * PS - off),
					(off_t)off),
				 (ssize_t)TU_MIN(sizeof(b), pages * PS - off));
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
}

/* A bdi over @pages stale pages with a cache of @cache_pages. */
static void env_open(struct tu_env *e, uint64_t pages, uint64_t cache_pages,
		     unsigned int flags)
{
	tu_env_config(e, 1, "psync");
	e->cfg.cache_bytes = cache_pages * PS;
	e->cfg.flags |= flags;
	tu_env_open(e, pages);
	stale_image(e, pages);
}

static struct pwb_inode *open_alloc(struct tu_env *e, uint64_t ino)
{
	struct pwb_inode *inode = NULL;

	ck_assert_int_eq(pwb_inode_open(e->bdi, ino, &alloc_ops, NULL, &inode),
			 0);
	return inode;
}

/* Read bytes [@off, @off + @len) of @inode: the offset of the first that
 * is not @want, or -1 if all are. */
static int64_t first_not(struct pwb_inode *inode, uint64_t off, uint64_t len,
			 unsigned char want)
{
	static unsigned char b[16 * PS];
	uint64_t done = 0;

	while (done < len) {
		size_t n = (size_t)TU_MIN(sizeof(b), len - done);

		ck_assert_int_eq(pwb_read(inode, b, n, off + done),
				 (ssize_t)n);
		for (size_t i = 0; i < n; i++)
			if (b[i] != want)
				return (int64_t)(off + done + i);
		done += n;
	}
	return -1;
}

/*
 * Item 1, the exact interleaving: a writer reserves a page of a hole below
 * the size, a flusher then allocates the delalloc run holding it (as it
 * does for the run's first dirty page), and only then does the writer fill
 * the page for its partial write. The fill must read zeros, not the old
 * bytes of the block just allocated.
 */
START_TEST(test_partial_write_into_a_hole_reads_zeros_around_it)
{
	struct tu_env e;
	struct pwb_inode *inode;
	uint64_t dev;
	unsigned char b[PS];

	env_open(&e, 256, 64, 0);
	inode = open_alloc(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, 16 * PS), 0);
	/* The writer's reservation, then the flusher's allocation. */
	ck_assert_int_eq(pwb__space_reserve(inode, 0, 8), 0);
	ck_assert_int_eq(inode->ops.map_page(inode, 0, &dev), 0);
	ck_assert_int_eq(pwb__space_lookup(inode, 3, &dev), 0);
	/* The partial write of page 3 fills the rest of its page. */
	memset(b, 0x11, 100);
	ck_assert_int_eq(pwb_write(inode, b, 100, 3 * PS + 50), 100);
	ck_assert_int_eq(first_not(inode, 3 * PS, 50, 0), -1);
	ck_assert_int_eq(first_not(inode, 3 * PS + 150, PS - 150, 0), -1);
	/* The other pages of the run, never written, read as zeros from
	 * the device too (not cached). */
	ck_assert_int_eq(first_not(inode, 0, 3 * PS, 0), -1);
	ck_assert_int_eq(first_not(inode, 4 * PS, 12 * PS, 0), -1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* Reopened: every page from the device. */
	inode = open_alloc(&e, 1);
	ck_assert_int_eq(first_not(inode, 0, 3 * PS + 50, 0), -1);
	ck_assert_int_eq(first_not(inode, 3 * PS + 50, 100, 0x11), -1);
	ck_assert_int_eq(first_not(inode, 3 * PS + 150, 13 * PS - 150, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Item 1 as the outside test saw it: a file full of STALE bytes is written,
 * made durable and deleted; a new file is grown to many pages and written
 * 100 bytes at a time into its holes, with the flushers writing behind the
 * writer. Every byte it did not write reads as zero, in the cache and from
 * the device.
 */
START_TEST(test_holes_below_the_size_never_show_a_deleted_files_bytes)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char b[PS];
	const uint64_t pages = 512;
	uint64_t cookie, i;

	tu_env_config(&e, 2, "psync");
	e.cfg.cache_bytes = 64 * PS;
	e.cfg.clock = NULL;		/* the flushers run on their own */
	e.cfg.dirty_background_bytes = 8 * PS;
	tu_env_open(&e, 1024);
	inode = open_alloc(&e, 1);
	memset(b, STALE, sizeof(b));
	for (i = 0; i < pages; i++)
		ck_assert_int_eq(pwb_write(inode, b, PS, i * PS), PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_discard(inode, 0, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* Nothing names the deleted file's blocks any more. */
	ck_assert_int_eq(pwb_bdi_freed_cookie(e.bdi, &cookie), 0);
	ck_assert_int_eq(pwb_bdi_release_freed(e.bdi, cookie), 0);

	inode = open_alloc(&e, 2);
	ck_assert_int_eq(pwb_inode_set_size(inode, pages * PS), 0);
	memset(b, 0x22, 100);
	for (i = 0; i < pages; i++)
		ck_assert_int_eq(pwb_write(inode, b, 100, i * PS + 1000), 100);
	for (i = 0; i < pages; i++) {
		ck_assert_int_eq(first_not(inode, i * PS, 1000, 0), -1);
		ck_assert_int_eq(first_not(inode, i * PS + 1100, PS - 1100, 0),
				 -1);
	}
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_alloc(&e, 2);
	for (i = 0; i < pages; i++) {
		ck_assert_int_eq(first_not(inode, i * PS, 1000, 0), -1);
		ck_assert_int_eq(first_not(inode, i * PS + 1000, 100, 0x22), -1);
		ck_assert_int_eq(first_not(inode, i * PS + 1100, PS - 1100, 0),
				 -1);
	}
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* A pwb_write() that the full cache stops, run on its own thread while
 * the test moves the clock. */
struct stopped_write {
	struct pwb_inode *inode;
	const void *buf;
	size_t len;
	uint64_t off;
	ssize_t ret;
	int done;
};

static void *stopped_write_main(void *arg)
{
	struct stopped_write *w = arg;

	w->ret = pwb_write(w->inode, w->buf, w->len, w->off);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Item 2: the cache stays full of pages whose writes fail, so pwb_write()
 * stops early. The page it stopped at keeps no reservation, gets no block
 * without data, and reads as zeros once the size covers it.
 */
START_TEST(test_a_write_stopped_by_a_full_cache_keeps_no_reservation)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	struct pwb_stats st;
	struct stopped_write w;
	static unsigned char b[32 * PS];
	pthread_t t;
	uint64_t written;

	tu_env_config(&e, 1, "psync");
	e.cfg.cache_bytes = 16 * PS;
	e.cfg.throttle_timeout_ms = 100;
	tu_env_open(&e, 256);
	stale_image(&e, 256);
	inode = open_alloc(&e, 1);
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_EIO;		/* nothing ever becomes clean */
	f.every = 1;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	memset(b, 0x33, sizeof(b));
	w = (struct stopped_write){ .inode = inode, .buf = b,
				    .len = sizeof(b), .off = 0 };
	ck_assert_int_eq(pthread_create(&t, NULL, stopped_write_main, &w), 0);
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 1000000 };

		tu_clock_advance_ms(&e.clock, 20);
		nanosleep(&ts, NULL);
	}
	pthread_join(t, NULL);
	ck_assert_int_eq(w.ret, 16 * PS);	/* the cache's worth */
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	/* Reserved: the 16 dirty pages at most, never the 17th. */
	ck_assert_uint_le(st.reserved_bytes, 16 * PS);
	/* The writer may have given up (its timeout is on the test's clock)
	 * before a flusher tried a write: the -EIO asserted below needs one
	 * write to have failed first, however slowly the flusher runs. */
	for (int i = 0; !st.io_errors && i < 20000; i++) {
		struct timespec ts = { 0, 1000000 };

		tu_clock_advance_ms(&e.clock, 20);
		nanosleep(&ts, NULL);
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	}
	ck_assert_uint_gt(st.io_errors, 0);
	/* The device works again: everything dirty is written. */
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_fsync(inode), -EIO);	/* reported once */
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(inode, &written), 0);
	ck_assert_uint_eq(written, 0);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_eq(st.reserved_bytes, 0);
	/* Grown over the page it stopped at: zeros, in the cache and on the
	 * device (closed and reopened). */
	ck_assert_int_eq(pwb_inode_set_size(inode, 32 * PS), 0);
	ck_assert_int_eq(first_not(inode, 16 * PS, 16 * PS, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_alloc(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, 32 * PS), 0);
	ck_assert_int_eq(first_not(inode, 0, 16 * PS, 0x33), -1);
	ck_assert_int_eq(first_not(inode, 16 * PS, 16 * PS, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close_expect(&e, -EIO);
}
END_TEST

/* User-map inodes of item 3: page i at device page 64 + i. */
static int user_map(struct pwb_inode *inode, uint64_t index, uint64_t *dev_off)
{
	(void)inode;
	if (index >= 64)
		return -ERANGE;
	*dev_off = (64 + index) * PS;
	return 0;
}

static const struct pwb_inode_ops user_ops = { .map_page = user_map };

/* Open ino 1 in @mode: 0 allocator, 1 user map. */
static struct pwb_inode *open_mode(struct tu_env *e, int mode)
{
	struct pwb_inode *inode = NULL;

	ck_assert_int_eq(pwb_inode_open(e->bdi, 1, mode ? &user_ops
							: &alloc_ops,
					NULL, &inode),
			 0);
	return inode;
}

/*
 * Item 3: a truncate into a page that is not cached (the file closed and
 * reopened) zeroes the rest of that page on the device, so growing the
 * file again shows zeros there, for set_size and for a truncating
 * discard, in both modes.
 */
START_TEST(test_truncate_into_an_uncached_page_zeroes_its_tail)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char b[2 * PS];
	int mode = _i / 2, by_discard = _i % 2;
	uint64_t size;

	env_open(&e, 256, 64, 0);
	inode = open_mode(&e, mode);
	memset(b, 0x44, sizeof(b));
	ck_assert_int_eq(pwb_write(inode, b, sizeof(b), 0), (ssize_t)sizeof(b));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_mode(&e, mode);
	if (mode)	/* the application restores the size */
		ck_assert_int_eq(pwb_inode_set_size(inode, 2 * PS), 0);
	ck_assert_int_eq(pwb_inode_size(inode, &size), 0);
	ck_assert_uint_eq(size, 2 * PS);
	if (by_discard)
		ck_assert_int_eq(pwb_inode_discard(inode, 100, UINT64_MAX), 0);
	else
		ck_assert_int_eq(pwb_inode_set_size(inode, 100), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_mode(&e, mode);
	if (mode)
		ck_assert_int_eq(pwb_inode_set_size(inode, 100), 0);
	ck_assert_int_eq(pwb_inode_size(inode, &size), 0);
	ck_assert_uint_eq(size, 100);
	ck_assert_int_eq(pwb_inode_set_size(inode, PS), 0);
	ck_assert_int_eq(first_not(inode, 0, 100, 0x44), -1);
	ck_assert_int_eq(first_not(inode, 100, PS - 100, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Item 3, the whole pages: pages a truncate cut off read as zeros when the
 * file grows over them again, not as the data they held (in allocator
 * mode their blocks were freed; with a map_page the device still holds the
 * old bytes). A page written again reads its new data.
 */
START_TEST(test_pages_cut_by_a_truncate_read_zeros_when_the_file_grows)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char b[4 * PS];
	int mode = _i;

	env_open(&e, 256, 64, 0);
	inode = open_mode(&e, mode);
	memset(b, 0x48, sizeof(b));
	ck_assert_int_eq(pwb_write(inode, b, sizeof(b), 0), (ssize_t)sizeof(b));
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, PS), 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, 4 * PS), 0);
	ck_assert_int_eq(first_not(inode, 0, PS, 0x48), -1);
	ck_assert_int_eq(first_not(inode, PS, 3 * PS, 0), -1);
	/* Page 2 written again, in part: its other bytes are zeros. */
	ck_assert_int_eq(pwb_write(inode, b, 10, 2 * PS + 5), 10);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, 3 * PS), 0);	/* page 3 */
	ck_assert_int_eq(pwb_inode_set_size(inode, 4 * PS), 0);
	ck_assert_int_eq(first_not(inode, PS, PS + 5, 0), -1);
	ck_assert_int_eq(first_not(inode, 2 * PS + 5, 10, 0x48), -1);
	ck_assert_int_eq(first_not(inode, 2 * PS + 15, 2 * PS - 15, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Item 3 with readers running: a truncate drops the cached pages before
 * it marks them zeros and lowers the size, and a reader that took the old
 * size in between fills them again from the device, with the bytes from
 * before the truncate. The truncate must drop those too: once it has
 * returned and the file grows again, every page reads as zeros, in both
 * modes.
 */
#define TR_PAGES 8
#define TR_ROUNDS 300

struct tr_reader {
	struct pwb_inode *inode;
	uint64_t seed;
	int stop;		/* atomic */
};

/* Reads of 1 to 4 pages: a miss of several fills them with one device
 * read (a run, pcache-read.c), which looks the later pages up before it
 * makes them. */
static void *tr_reader_main(void *arg)
{
	struct tr_reader *r = arg;
	unsigned char *b = malloc(4 * PS);

	while (b && !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint64_t idx = tu_rand(&r->seed) % TR_PAGES;
		uint64_t n = 1 + tu_rand(&r->seed) % 4;

		(void)pwb_read(r->inode, b, n * PS, idx * PS);
	}
	free(b);
	return NULL;
}

START_TEST(test_pages_cut_by_a_truncate_stay_zeros_with_readers_racing)
{
	struct tr_reader r[2];
	pthread_t t[2];
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char b[TR_PAGES * PS];
	int mode = _i, round, i;
	long bad = 0, first_bad = -1;

	env_open(&e, 256, 64, 0);
	inode = open_mode(&e, mode);
	for (i = 0; i < 2; i++) {
		r[i] = (struct tr_reader){ .inode = inode,
					   .seed = 5 + (uint64_t)i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, tr_reader_main,
						&r[i]), 0);
	}
	for (round = 0; round < TR_ROUNDS; round++) {
		memset(b, 0x48, sizeof(b));
		ck_assert_int_eq(pwb_write(inode, b, sizeof(b), 0),
				 (ssize_t)sizeof(b));
		/* On the device: a fill from it shows 0x48. */
		ck_assert_int_eq(pwb_fsync(inode), 0);
		ck_assert_int_eq(pwb_inode_set_size(inode, 0), 0);
		if (!mode) {
			/* The blocks the truncate freed, for the next
			 * round's writes. */
			uint64_t cookie;

			ck_assert_int_eq(pwb_bdi_freed_cookie(e.bdi, &cookie),
					 0);
			ck_assert_int_eq(pwb_bdi_release_freed(e.bdi, cookie),
					 0);
		}
		ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(b)), 0);
		ck_assert_int_eq(pwb_read(inode, b, sizeof(b), 0),
				 (ssize_t)sizeof(b));
		for (i = 0; i < (int)sizeof(b); i++)
			if (b[i]) {
				if (first_bad < 0)
					first_bad = round;
				bad++;
				break;
			}
	}
	for (i = 0; i < 2; i++) {
		__atomic_store_n(&r[i].stop, 1, __ATOMIC_RELEASE);
		pthread_join(t[i], NULL);
	}
	ck_assert_msg(bad == 0, "mode %d: %ld of %d rounds read bytes from "
		      "before the truncate after the file grew (first in "
		      "round %ld)", mode, bad, TR_ROUNDS, first_bad);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

static void *kick_main(void *arg)
{
	struct pwb_bdi *bdi = arg;

	pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT);
	return NULL;
}

/*
 * Item 3, a page in flight: a truncate into a page whose first write is
 * still going to the device (its new block not yet written, the page not
 * dirty) zeroes the page's tail all the same; that write carries the old
 * tail (found by the model test, seed 1039).
 */
START_TEST(test_truncate_into_a_page_in_flight_zeroes_its_tail)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	pthread_t t;
	static unsigned char b[2 * PS];
	uint64_t hits = 0;
	int st = 0, tries = 0;

	env_open(&e, 256, 64, 0);
	inode = open_alloc(&e, 1);
	memset(b, 0x41, sizeof(b));
	ck_assert_int_eq(pwb_write(inode, b, sizeof(b), 0), (ssize_t)sizeof(b));
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_DELAY;
	f.every = 1;
	f.delay_ms = 200;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, kick_main, e.bdi), 0);
	do {	/* until the write has reached the device (the fault) */
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
		ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
		st = pwb_page_state(inode, 1);
	} while (!(hits && st == PWB_PAGE_WRITEBACK) && ++tries < 5000);
	ck_assert_int_eq(st, PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pwb_inode_set_size(inode, PS + 100), 0);
	pthread_join(t, NULL);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, 2 * PS), 0);
	ck_assert_int_eq(first_not(inode, PS + 100, PS - 100, 0), -1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_alloc(&e, 1);
	ck_assert_int_eq(first_not(inode, 0, PS + 100, 0x41), -1);
	ck_assert_int_eq(first_not(inode, PS + 100, PS - 100, 0), -1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Item 3, a page dropped while its write is in flight. A truncate waits
 * for the writes of its range (discard_end()), then drops the cached
 * pages (pwb__pcache_discarded()). In between, a pwb_write() can dirty a
 * page of the range again and a flusher start writing it:
 *
 *   truncate                 writer           flusher
 *   discard_end(): no page
 *     in flight
 *                            dirty page 0
 *                                             tag WRITEBACK, get_page:
 *                                             page 0's buffer, submit...
 *   drop_range(): page 0
 *     killed, in flight
 *   (buffer freed after a
 *   grace period, which
 *   the flusher does not
 *   hold)
 *                            pwb_write() of another file: a new page
 *                            gets that buffer, fills it with its bytes
 *                                             ...the device reads the
 *                                             buffer: the other file's
 *                                             bytes at page 0's place
 *
 * The test stands in the page cache's half of the truncate at the point
 * where the race leaves it (page 0 in flight) and holds the write inside
 * the device call (the psync backend's RWF_ATOMIC hook, as check_atomic
 * does), so the steps run in this order every time. The device must get
 * the bytes the file held when the write started, never another file's.
 */
#define WB_GATE_OFF (64ull * PS)	/* page 0 of user_map */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed, entered, open;
} wb_gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
	      false, false, false };

/* The device write, on the flusher: the one at WB_GATE_OFF waits at the
 * gate (after get_page, with the page's buffer in @iov), then every
 * write goes out without RWF_ATOMIC, which no device here has. */
static ssize_t gated_pwritev2(int fd, const struct iovec *iov, int cnt,
			      off_t off, int flags)
{
	(void)flags;
	pthread_mutex_lock(&wb_gate.lock);
	if (wb_gate.armed && (uint64_t)off == WB_GATE_OFF) {
		wb_gate.armed = false;
		wb_gate.entered = true;
		pthread_cond_broadcast(&wb_gate.cond);
		while (!wb_gate.open)
			pthread_cond_wait(&wb_gate.cond, &wb_gate.lock);
	}
	pthread_mutex_unlock(&wb_gate.lock);
	return pwritev(fd, iov, cnt, off);
}

/* Page i of the other file at device page 128 + i. */
static int other_map(struct pwb_inode *inode, uint64_t index,
		     uint64_t *dev_off)
{
	(void)inode;
	if (index >= 64)
		return -ERANGE;
	*dev_off = (128 + index) * PS;
	return 0;
}

static const struct pwb_inode_ops other_ops = { .map_page = other_map };

struct trunc_half {
	struct pwb_inode *inode;
	int ret;
	int done;	/* atomic */
};

/* The page cache's half of pwb_inode_set_size(inode, 0), after the
 * engine's half waited for the writes of the range. */
static void *trunc_half_main(void *arg)
{
	struct trunc_half *t = arg;
	struct pwb_inode *inode = t->inode;

	t->ret = pwb__inode_enter(inode, PWB__HOLD_REF, "test");
	if (!t->ret) {
		t->ret = pwb__pcache_discarded(
			inode, 0, UINT64_MAX, 0,
			UINT64_MAX >> inode->bdi->page_shift);
		pwb__inode_exit(inode, PWB__HOLD_REF);
	}
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded, 10 s) for another thread to reach a point, never for
 * time to pass: the flusher at the gate. */
static bool gate_wait_entered(void)
{
	uint64_t end = mono_ns() + 10000000000ull;
	bool in;

	for (;;) {
		pthread_mutex_lock(&wb_gate.lock);
		in = wb_gate.entered;
		pthread_mutex_unlock(&wb_gate.lock);
		if (in || mono_ns() > end)
			return in;
		sched_yield();
	}
}

/* The same for the truncate: returned, or asleep waiting for the write
 * (a waiter on the inode's wb_cond). */
static bool trunc_half_settled(struct trunc_half *t)
{
	uint64_t end = mono_ns() + 10000000000ull;

	for (;;) {
		if (__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) ||
		    pwb__aread(&t->inode->wb_waiters))
			return true;
		if (mono_ns() > end)
			return false;
		sched_yield();
	}
}

START_TEST(test_a_page_dropped_in_flight_keeps_its_buffer_until_written)
{
	struct tu_env e;
	struct pwb_inode *a, *b;
	struct trunc_half th;
	pthread_t kick, tr;
	/* Aligned for tu_read_device()'s O_DIRECT read. */
	static unsigned char buf[PS] __attribute__((aligned(PS)));
	uint64_t size;
	size_t i, foreign = 0, other = 0;

	env_open(&e, 256, 64, 0);
	/* Every write of a page goes through the hook (check_atomic.c). */
	e.bdi->atomic = true;
	e.bdi->awu_min = PS;
	e.bdi->awu_max = PS;
	e.bdi->awu_segs = 0;
	pwb__psync_pwritev2 = gated_pwritev2;
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &user_ops, NULL, &a), 0);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 2, &other_ops, NULL, &b), 0);

	memset(buf, 0xa1, sizeof(buf));
	ck_assert_int_eq(pwb_write(a, buf, PS, 0), (ssize_t)PS);
	pthread_mutex_lock(&wb_gate.lock);
	wb_gate.armed = true;
	pthread_mutex_unlock(&wb_gate.lock);
	ck_assert_int_eq(pthread_create(&kick, NULL, kick_main, e.bdi), 0);
	ck_assert_msg(gate_wait_entered(), "the write never reached the "
		      "device");
	ck_assert_int_eq(pwb_page_state(a, 0), PWB_PAGE_WRITEBACK);

	/* The truncate drops page 0 with its write in flight. */
	th = (struct trunc_half){ .inode = a };
	ck_assert_int_eq(pthread_create(&tr, NULL, trunc_half_main, &th), 0);
	ck_assert_msg(trunc_half_settled(&th), "the truncate neither "
		      "returned nor waited");
	/* Whatever the truncate handed to call_rcu has run: a buffer freed
	 * that way is back in the pool, on top. */
	rcu_barrier();
	/* Another file's new page takes the pool's top buffer. */
	memset(buf, 0xb2, sizeof(buf));
	ck_assert_int_eq(pwb_write(b, buf, PS, 0), (ssize_t)PS);

	pthread_mutex_lock(&wb_gate.lock);
	wb_gate.open = true;
	pthread_cond_broadcast(&wb_gate.cond);
	pthread_mutex_unlock(&wb_gate.lock);
	pthread_join(kick, NULL);
	pthread_join(tr, NULL);
	ck_assert_int_eq(th.ret, 0);
	ck_assert_int_eq(pwb_inode_size(a, &size), 0);
	ck_assert_uint_eq(size, 0);
	ck_assert_int_eq(pwb_fsync(b), 0);

	/* The device at file a's page 0: the bytes a held, not b's. */
	ck_assert_int_eq(tu_read_device(e.img, WB_GATE_OFF, buf, PS), 0);
	for (i = 0; i < PS; i++) {
		if (buf[i] == 0xb2)
			foreign++;
		else if (buf[i] != 0xa1)
			other++;
	}
	ck_assert_msg(!foreign && !other, "page 0 of file a on the device: "
		      "%zu bytes of file b, %zu neither a's nor b's", foreign,
		      other);
	ck_assert_int_eq(first_not(b, 0, PS, 0xb2), -1);
	ck_assert_int_eq(pwb_inode_close(b), 0);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * The other half of that race: a write dirties a page of the range after
 * the engine's half of the truncate dropped the range's dirty tags, and the
 * page cache's half then drops the page. The page's DIRTY tag must go with
 * it: left behind, every flusher pass asks for a page that is gone (-EIO),
 * and pwb_fsync() and the close fail for ever on an inode that has
 * nothing left to write. Loop: 0 allocator, 1 user map.
 */
START_TEST(test_a_page_dirtied_during_a_truncate_leaves_nothing_dirty)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_stats before, after;
	static unsigned char buf[PS];
	int ret;

	env_open(&e, 256, 64, 0);
	inode = open_mode(&e, _i);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &before), 0);

	/* The write that lands between the two halves of the truncate. */
	memset(buf, 0xc3, sizeof(buf));
	ck_assert_int_eq(pwb_write(inode, buf, PS, 0), (ssize_t)PS);
	ck_assert_int_eq(pwb_page_state(inode, 0), PWB_PAGE_DIRTY);

	/* The page cache's half of pwb_inode_set_size(inode, 0). */
	ck_assert_int_eq(pwb__inode_enter(inode, PWB__HOLD_REF, "test"), 0);
	ret = pwb__pcache_discarded(inode, 0, UINT64_MAX, 0,
				    UINT64_MAX >> e.bdi->page_shift);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	ck_assert_int_eq(ret, 0);

	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_page_state(inode, 0), 0);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &after), 0);
	ck_assert_uint_eq(after.dirty_pages, before.dirty_pages);
	ck_assert_uint_eq(after.nr_dirty_inodes, before.nr_dirty_inodes);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Writes that the flushers start on their own end while the inode closes:
 * the completion must not touch the inode once its writes are ended (a
 * close waiting for them may free it). Under TSan the old completion's
 * read of the freed inode showed within a few hundred rounds (the model
 * test, seeds 10, 17, 20); elsewhere this checks that every round's data
 * is intact.
 */
START_TEST(test_writes_ending_during_a_close_leave_the_inode_alone)
{
	struct tu_env e;
	static unsigned char b[16 * PS];
	int i;

	tu_env_config(&e, 1, NULL);
	e.cfg.cache_bytes = 64 * PS;
	e.cfg.clock = NULL;		/* the flushers write at once */
	e.cfg.dirty_expire_ms = 1;
	e.cfg.dirty_writeback_ms = 1;
	tu_env_open(&e, 256);
	memset(b, 0x5a, sizeof(b));
	for (i = 0; i < 2000; i++) {
		struct pwb_inode *inode = open_alloc(&e, 1 + i % 8);

		ck_assert_int_eq(pwb_write(inode, b, sizeof(b), 0),
				 (ssize_t)sizeof(b));
		if (i % 3) {	/* let some writes start on their own */
			struct timespec ts = { 0, (i % 3) * 500000 };

			nanosleep(&ts, NULL);
		}
		ck_assert_int_eq(pwb_inode_close(inode), 0);
	}
	for (i = 0; i < 8; i++) {
		struct pwb_inode *inode = open_alloc(&e, 1 + i);

		ck_assert_int_eq(first_not(inode, 0, sizeof(b), 0x5a), -1);
		ck_assert_int_eq(pwb_inode_close(inode), 0);
	}
	tu_env_close(&e);
}
END_TEST

/* Item 4: lengths that wrap past 2^64 are refused before anything is
 * cut or copied. */
START_TEST(test_a_wrapping_length_is_efbig_not_a_crash)
{
	struct tu_env e;
	struct pwb_inode *inode;
	char b[16] = { 0 };

	env_open(&e, 64, 16, 0);
	inode = open_alloc(&e, 1);
	ck_assert_int_eq(pwb_write(inode, b, SIZE_MAX, 1), -EFBIG);
	ck_assert(strstr(pwb_errmsg(), "wraps"));
	ck_assert_int_eq(pwb_write(inode, b, (size_t)SSIZE_MAX + 1,
				   1ull << 63),
			 -EFBIG);
	ck_assert_int_eq(pwb_write(inode, b, 16, UINT64_MAX - 4), -EFBIG);
	ck_assert_int_eq(pwb_inode_discard(inode, 5, UINT64_MAX - 1),
			 -EOVERFLOW);
	ck_assert_int_eq(pwb_wait_writeback(inode, 5, UINT64_MAX - 1),
			 -EOVERFLOW);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* Item 5: a full device is -ENOSPC with a message that says so. */
START_TEST(test_enospc_from_pwb_write_says_why)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char b[32 * PS];
	ssize_t r;

	env_open(&e, 16, 64, 0);
	inode = open_alloc(&e, 1);
	r = pwb_write(inode, b, sizeof(b), 0);
	ck_assert_int_eq(r, 16 * PS);	/* the device's worth */
	ck_assert_int_eq(pwb_write(inode, b, PS, 16 * PS), -ENOSPC);
	ck_assert_msg(strstr(pwb_errmsg(), "no free space"),
		      "message: '%s'", pwb_errmsg());
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* Item 6: from an ops callback (a flusher thread) pwb_write() and
 * pwb_read() are -EDEADLK, for a cached page as for any other. */
static struct pwb_inode *cb_target;
static ssize_t cb_wret = 1, cb_rret = 1;
static int cb_armed;

static void cb_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			 int err)
{
	char b[10];

	(void)inode;
	(void)index;
	(void)nr;
	(void)err;
	if (!__atomic_exchange_n(&cb_armed, 0, __ATOMIC_ACQ_REL))
		return;
	cb_wret = pwb_write(cb_target, "0123456789", 10, 0);
	cb_rret = pwb_read(cb_target, b, 10, 0);
}

static const struct pwb_inode_ops cb_ops = { .map_page = user_map,
					     .end_write = cb_end_write };

START_TEST(test_cached_pages_from_a_callback_are_edeadlk)
{
	struct tu_env e;
	struct pwb_inode *a, *t;
	char b[PS];

	env_open(&e, 256, 64, 0);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &cb_ops, NULL, &a), 0);
	t = open_alloc(&e, 2);
	memset(b, 0x55, sizeof(b));
	/* t's page 0: cached, up to date, dirty and not being written,
	 * which is what both hit paths take. */
	ck_assert_int_eq(pwb_write(t, b, PS, 0), PS);
	cb_target = t;
	__atomic_store_n(&cb_armed, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pwb_write(a, b, PS, 0), PS);
	ck_assert_int_eq(pwb_fsync(a), 0);	/* runs cb_end_write */
	ck_assert_int_eq(cb_wret, -EDEADLK);
	ck_assert_int_eq(cb_rret, -EDEADLK);
	ck_assert_int_eq(first_not(t, 0, PS, 0x55), -1);
	ck_assert_int_eq(pwb_inode_close(t), 0);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Item 7: busy extents. Blocks freed by a truncate are not given to another
 * file until the application releases them (its index no longer names
 * them); with PWB_BDI_REUSE_FREED they are at once.
 */
START_TEST(test_freed_blocks_stay_busy_until_released)
{
	struct tu_env e;
	struct pwb_inode *x, *y;
	struct pwb_extent xe[4], ye[4];
	struct pwb_stats st;
	static unsigned char b[8 * PS];
	uint64_t cookie, c2;
	size_t nx, ny, i, j;
	bool reuse = _i;

	env_open(&e, 16, 64, reuse ? PWB_BDI_REUSE_FREED : 0);
	x = open_alloc(&e, 1);
	y = open_alloc(&e, 2);
	memset(b, 0x66, sizeof(b));
	ck_assert_int_eq(pwb_write(x, b, sizeof(b), 0), (ssize_t)sizeof(b));
	ck_assert_int_eq(pwb_fsync(x), 0);
	/* The application's index: x's extents. */
	ck_assert_int_eq(pwb_inode_extents(x, xe, 4, &nx), 0);
	ck_assert_uint_ge(nx, 1);
	ck_assert_int_eq(pwb_write(y, b, sizeof(b), 0), (ssize_t)sizeof(b));
	ck_assert_int_eq(pwb_fsync(y), 0);
	/* The device is full; x is deleted, its index not yet saved. */
	ck_assert_int_eq(pwb_inode_set_size(x, 0), 0);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_eq(st.busy_bytes, reuse ? 0 : 8 * PS);
	ck_assert_int_eq(pwb_bdi_freed_cookie(e.bdi, &cookie), 0);
	/* y grows: without the release, no block of x's is reused. */
	memset(b, 0x77, sizeof(b));
	if (!reuse) {
		ck_assert_int_eq(pwb_write(y, b, PS, 8 * PS), -ENOSPC);
		ck_assert_msg(strstr(pwb_errmsg(), "busy"), "message: '%s'",
			      pwb_errmsg());
		/* The index without x is saved: release. */
		ck_assert_int_eq(pwb_bdi_release_freed(e.bdi, cookie), 0);
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
		ck_assert_uint_eq(st.busy_bytes, 0);
	}
	ck_assert_int_eq(pwb_write(y, b, sizeof(b), 8 * PS),
			 (ssize_t)sizeof(b));
	ck_assert_int_eq(pwb_fsync(y), 0);
	/* y now holds x's old blocks (the device has no others): the
	 * release, or the flag, allowed it. */
	ck_assert_int_eq(pwb_inode_extents(y, ye, 4, &ny), 0);
	for (i = 0, j = 0; i < ny; i++)
		j += ye[i].len;
	ck_assert_uint_eq(j, 16 * PS);
	/* Cookies: only ones given; releasing again does nothing. */
	ck_assert_int_eq(pwb_bdi_freed_cookie(e.bdi, &c2), 0);
	ck_assert_uint_gt(c2, cookie);
	ck_assert_int_eq(pwb_bdi_release_freed(e.bdi, c2 + 1), -EINVAL);
	ck_assert(strstr(pwb_errmsg(), "cookie"));
	ck_assert_int_eq(pwb_bdi_release_freed(e.bdi, cookie), 0);
	ck_assert_int_eq(pwb_bdi_freed_cookie(NULL, &c2), -EINVAL);
	ck_assert_int_eq(pwb_bdi_freed_cookie(e.bdi, NULL), -EINVAL);
	ck_assert_int_eq(pwb_bdi_release_freed(NULL, 0), -EINVAL);
	ck_assert_int_eq(pwb_inode_close(x), 0);
	ck_assert_int_eq(pwb_inode_close(y), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Bad arguments to the data-path calls: each gets its documented errno
 * and a message, none crashes.
 */
START_TEST(test_bad_arguments_get_their_errno_and_a_message)
{
	struct tu_env e;
	struct pwb_inode *a, *u, *app;
	struct tu_store st;
	struct pwb_extent ext[2];
	char b[16];
	uint64_t size;
	size_t total;

#define BAD(call, err)                                                         \
	do {                                                                   \
		ck_assert_int_eq((call), (err));                               \
		ck_assert_msg(pwb_errmsg()[0], "no message from %s", #call);   \
	} while (0)

	env_open(&e, 256, 64, 0);
	a = open_alloc(&e, 1);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 2, &user_ops, NULL, &u), 0);
	tu_open_store(&e, &st, 3, 8, 128, NULL);
	app = st.inode;
	BAD(pwb_write(NULL, b, 1, 0), -EINVAL);
	BAD(pwb_write(a, NULL, 1, 0), -EINVAL);
	BAD(pwb_write(app, b, 1, 0), -EINVAL);
	BAD(pwb_write(a, b, SIZE_MAX, 1), -EFBIG);
	BAD(pwb_read(NULL, b, 1, 0), -EINVAL);
	BAD(pwb_read(a, NULL, 1, 0), -EINVAL);
	BAD(pwb_read(app, b, 1, 0), -EINVAL);
	BAD(pwb_inode_size(NULL, &size), -EINVAL);
	BAD(pwb_inode_size(a, NULL), -EINVAL);
	BAD(pwb_inode_size(app, &size), -EINVAL);
	BAD(pwb_inode_set_size(NULL, 0), -EINVAL);
	BAD(pwb_inode_set_size(app, 0), -EINVAL);
	BAD(pwb_inode_discard(NULL, 0, 1), -EINVAL);
	BAD(pwb_inode_discard(a, 5, UINT64_MAX - 1), -EOVERFLOW);
	BAD(pwb_wait_writeback(NULL, 0, 1), -EINVAL);
	BAD(pwb_inode_extents(NULL, ext, 1, &total), -EINVAL);
	BAD(pwb_inode_extents(a, NULL, 1, &total), -EINVAL);
	BAD(pwb_inode_extents(u, ext, 1, &total), -EINVAL);
	BAD(pwb_inode_extents(app, ext, 1, &total), -EINVAL);
	BAD(pwb_inode_set_extents(NULL, ext, 1), -EINVAL);
	BAD(pwb_inode_set_extents(u, ext, 1), -EINVAL);
	/* Zero length, unaligned, past the device, wrapping, overlapping. */
	ext[0] = (struct pwb_extent){ 0, 0, 0 };
	BAD(pwb_inode_set_extents(a, ext, 1), -EINVAL);
	ext[0] = (struct pwb_extent){ 0, 100, PS };
	BAD(pwb_inode_set_extents(a, ext, 1), -EINVAL);
	ext[0] = (struct pwb_extent){ 0, 255 * PS, 2 * PS };
	BAD(pwb_inode_set_extents(a, ext, 1), -EINVAL);
	ext[0] = (struct pwb_extent){ UINT64_MAX - PS + 1, 0, 2 * PS };
	BAD(pwb_inode_set_extents(a, ext, 1), -EINVAL);
	ext[0] = (struct pwb_extent){ 0, 0, 2 * PS };
	ext[1] = (struct pwb_extent){ PS, 8 * PS, 2 * PS };
	BAD(pwb_inode_set_extents(a, ext, 2), -EINVAL);
	/* Two extents on one block. */
	ext[1] = (struct pwb_extent){ 4 * PS, PS, PS };
	BAD(pwb_inode_set_extents(a, ext, 2), -EEXIST);
	BAD(pwb_page_state(NULL, 0), -EINVAL);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	ck_assert_int_eq(pwb_inode_close(u), 0);
	ck_assert_int_eq(pwb_inode_close(app), 0);
	tu_store_destroy(&st);
	tu_env_close(&e);
#undef BAD
}
END_TEST

static Suite *datasafety_suite(void)
{
	Suite *s = suite_create("datasafety");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
		       test_partial_write_into_a_hole_reads_zeros_around_it);
	tcase_add_test(tc,
		       test_holes_below_the_size_never_show_a_deleted_files_bytes);
	tcase_add_test(tc,
		       test_a_write_stopped_by_a_full_cache_keeps_no_reservation);
	tcase_add_loop_test(tc,
			    test_truncate_into_an_uncached_page_zeroes_its_tail,
			    0, 4);
	tcase_add_loop_test(tc,
		test_pages_cut_by_a_truncate_read_zeros_when_the_file_grows,
		0, 2);
	tcase_add_loop_test(tc,
		test_pages_cut_by_a_truncate_stay_zeros_with_readers_racing,
		0, 2);
	tcase_add_test(tc, test_truncate_into_a_page_in_flight_zeroes_its_tail);
	tcase_add_test(tc,
		test_a_page_dropped_in_flight_keeps_its_buffer_until_written);
	tcase_add_loop_test(tc,
		test_a_page_dirtied_during_a_truncate_leaves_nothing_dirty,
		0, 2);
	tcase_add_test(tc,
		       test_writes_ending_during_a_close_leave_the_inode_alone);
	tcase_add_test(tc, test_a_wrapping_length_is_efbig_not_a_crash);
	tcase_add_test(tc, test_enospc_from_pwb_write_says_why);
	tcase_add_test(tc, test_cached_pages_from_a_callback_are_edeadlk);
	tcase_add_loop_test(tc, test_freed_blocks_stay_busy_until_released, 0,
			    2);
	tcase_add_test(tc, test_bad_arguments_get_their_errno_and_a_message);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(datasafety_suite(), true);
}
