// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_readahead.c - readahead of library-owned pages, reads in flight,
 * pwb_fadvise() and read errors
 *
 * Device reads are counted with pwb_bdi_stats() (read_ios, read_pages,
 * readahead_pages), never timed. The psync backend reads on the calling
 * thread, so the window each read starts is known when pwb_read()
 * returns: the cases that look at window sizes run there. The io_uring
 * twin (tests/check_readahead_uring, TU_URING_VARIANT=1) runs the cases
 * that hold on any backend, plus concurrent readers of the same pages,
 * on io_uring alone, and exits 77 where the machine has no io_uring.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PS 4096u
#define IMG_PAGES 4096u
#define FILE_PAGES 1024u
#define RA_PAGES 64u

static const char *backend(void)
{
	return TU_URING_VARIANT ? "io_uring" : "psync";
}

/* Byte @i of page @page of the file: a pattern no other page has. */
static unsigned char pat(uint64_t page, unsigned int i)
{
	return (unsigned char)(page * 131 + i * 7 + 1);
}

static void check_page(const unsigned char *b, uint64_t page)
{
	for (unsigned int i = 0; i < PS; i += 511)
		ck_assert_uint_eq(b[i], pat(page, i));
}

struct ra_env {
	struct tu_env e;
	struct pwb_inode *inode;
};

/* A bdi with readahead_bytes @ra, FILE_PAGES pages written and synced,
 * the inode reopened with nothing cached. */
static void ra_open(struct ra_env *r, uint64_t ra)
{
	unsigned char *buf = malloc(FILE_PAGES * PS);

	tu_env_config(&r->e, 1, backend());
	r->e.cfg.readahead_bytes = ra;
	tu_env_open(&r->e, IMG_PAGES);
	for (uint64_t p = 0; p < FILE_PAGES; p++)
		for (unsigned int i = 0; i < PS; i++)
			buf[p * PS + i] = pat(p, i);
	ck_assert_int_eq(pwb_inode_open(r->e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r->inode),
			 0);
	ck_assert_int_eq(pwb_write(r->inode, buf, FILE_PAGES * PS, 0),
			 (ssize_t)(FILE_PAGES * PS));
	ck_assert_int_eq(pwb_fsync(r->inode), 0);
	ck_assert_int_eq(pwb_inode_close(r->inode), 0);
	ck_assert_int_eq(pwb_inode_open(r->e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r->inode),
			 0);
	ck_assert_int_eq(pwb_inode_set_size(r->inode, FILE_PAGES * PS), 0);
	free(buf);
}

static void ra_close(struct ra_env *r)
{
	ck_assert_int_eq(pwb_inode_close(r->inode), 0);
	tu_env_close(&r->e);
}

static struct pwb_stats stats(struct ra_env *r)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(r->e.bdi, &st), 0);
	return st;
}

/* pwb_read() of page @page, checked. */
static void read_page(struct ra_env *r, uint64_t page)
{
	unsigned char b[PS];

	ck_assert_int_eq(pwb_read(r->inode, b, PS, page * PS), (ssize_t)PS);
	check_page(b, page);
}

/*
 * Read pages [0, n) one by one in order (psync: each window is read by
 * the pwb_read() that starts it); store the pages each device-reading
 * call read in @win (at most @max entries). Return how many.
 */
static unsigned int seq_windows(struct ra_env *r, uint64_t n, uint64_t *win,
				unsigned int max)
{
	uint64_t before = stats(r).read_pages;
	unsigned int k = 0;

	for (uint64_t p = 0; p < n; p++) {
		uint64_t now;

		read_page(r, p);
		now = stats(r).read_pages;
		if (now != before && k < max)
			win[k++] = now - before;
		before = now;
	}
	return k;
}

/* A sequential 4 KiB reader: windows of 4, 8, 16, 32, then 64 pages
 * (readahead_bytes), each started by the marker before the reader needs
 * it; 256 pages in 8 reads instead of 256. */
START_TEST(test_sequential_windows_grow)
{
	static const uint64_t want[] = { 4, 8, 16, 32, 64, 64, 64 };
	struct ra_env r;
	uint64_t win[64];
	struct pwb_stats st;
	unsigned int k;

	ra_open(&r, RA_PAGES * PS);
	k = seq_windows(&r, 256, win, 64);
	ck_assert_uint_ge(k, 7);
	for (unsigned int i = 0; i < 7; i++)
		ck_assert_uint_eq(win[i], want[i]);
	st = stats(&r);
	ck_assert_uint_le(st.read_ios, 10);
	ck_assert_uint_ge(st.readahead_pages, 200);
	ra_close(&r);
}
END_TEST

/* Two readers going through one file in order, their reads interleaved:
 * both are told apart and read ahead. */
START_TEST(test_two_interleaved_streams)
{
	struct ra_env r;
	struct pwb_stats st;

	ra_open(&r, RA_PAGES * PS);
	for (uint64_t i = 0; i < 256; i++) {
		read_page(&r, i);
		read_page(&r, 512 + i);
	}
	st = stats(&r);
	/* Each stream: 4+8+16+32 then windows of 64, about 8 reads and up
	 * to a window past its last page. One stream taken for random
	 * would read 256 times. */
	ck_assert_uint_le(st.read_ios, 24);
	ck_assert_uint_ge(st.readahead_pages, 2 * 200);
	ck_assert_uint_le(st.read_pages, 2 * (256 + 2 * RA_PAGES));
	ra_close(&r);
}
END_TEST

/* Pages in an order where no read follows the page before it: no
 * readahead, one page per read. */
START_TEST(test_random_reader_no_readahead)
{
	struct ra_env r;
	struct pwb_stats st;
	uint64_t p = 0;

	ra_open(&r, RA_PAGES * PS);
	for (unsigned int i = 0; i < 300; i++) {
		p = (p + 389) % FILE_PAGES;	/* 389: odd, far from 1 */
		read_page(&r, p + 0);
	}
	st = stats(&r);
	ck_assert_uint_eq(st.readahead_pages, 0);
	ck_assert_uint_eq(st.read_pages, 300);
	ck_assert_uint_eq(st.read_ios, 300);
	ra_close(&r);
}
END_TEST

/* readahead_bytes 0: a sequential reader reads what it asks for. */
START_TEST(test_readahead_off)
{
	struct ra_env r;
	struct pwb_stats st;

	ra_open(&r, 0);
	for (uint64_t p = 0; p < 200; p++)
		read_page(&r, p);
	st = stats(&r);
	ck_assert_uint_eq(st.readahead_pages, 0);
	ck_assert_uint_eq(st.read_pages, 200);
	ck_assert_uint_eq(st.read_ios, 200);
	ra_close(&r);
}
END_TEST

START_TEST(test_fadvise_random_sequential)
{
	struct ra_env r;
	uint64_t win[64], big = 0;
	unsigned int k;

	ra_open(&r, RA_PAGES * PS);
	/* RANDOM: none, in order or not. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_RANDOM), 0);
	for (uint64_t p = 0; p < 100; p++)
		read_page(&r, p);
	ck_assert_uint_eq(stats(&r).read_pages, 100);
	ck_assert_uint_eq(stats(&r).readahead_pages, 0);
	/* SEQUENTIAL: windows up to twice readahead_bytes. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_SEQUENTIAL), 0);
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_DONTNEED), 0);
	k = seq_windows(&r, 600, win, 64);
	for (unsigned int i = 0; i < k; i++)
		big = win[i] > big ? win[i] : big;
	ck_assert_uint_eq(big, 2 * RA_PAGES);
	/* NORMAL: back to readahead_bytes. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_NORMAL), 0);
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_DONTNEED), 0);
	k = seq_windows(&r, 600, win, 64);
	big = 0;
	for (unsigned int i = 0; i < k; i++)
		big = win[i] > big ? win[i] : big;
	ck_assert_uint_eq(big, RA_PAGES);
	ra_close(&r);
}
END_TEST

START_TEST(test_fadvise_willneed_dontneed)
{
	struct ra_env r;
	struct pwb_stats st;
	unsigned char b[PS];
	uint64_t cached, pages;

	ra_open(&r, RA_PAGES * PS);
	/* WILLNEED: read [100, 300) now (psync: before it returns; io_uring:
	 * queued, and the reads below wait for it); reading it then costs
	 * no device read of its own. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 100 * PS, 200 * PS,
				     PWB_FADV_WILLNEED),
			 0);
	st = stats(&r);
	if (!TU_URING_VARIANT)
		ck_assert_uint_eq(st.read_pages, 200);
	for (uint64_t p = 100; p < 300; p++)
		read_page(&r, p);
	st = stats(&r);
	ck_assert_uint_eq(st.read_pages, 200);
	ck_assert_uint_eq(st.readahead_pages, 200);

	/* DONTNEED of [150.5, 250.5): pages 151-249 go; page 200, dirty,
	 * stays with its new data; pages 150 and 250 (in part) stay. */
	memset(b, 0xab, PS);
	ck_assert_int_eq(pwb_write(r.inode, b, PS, 200 * PS), (ssize_t)PS);
	cached = stats(&r).cache_pages;
	ck_assert_int_eq(pwb_fadvise(r.inode, 150 * PS + 100, 100 * PS,
				     PWB_FADV_DONTNEED),
			 0);
	ck_assert_uint_eq(stats(&r).cache_pages, cached - 98);
	pages = stats(&r).read_pages;
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, PWB_FADV_RANDOM), 0);
	read_page(&r, 150);
	read_page(&r, 250);
	ck_assert_uint_eq(stats(&r).read_pages, pages);
	ck_assert_int_eq(pwb_read(r.inode, b, PS, 200 * PS), (ssize_t)PS);
	for (unsigned int i = 0; i < PS; i++)
		ck_assert_uint_eq(b[i], 0xab);
	ck_assert_uint_eq(stats(&r).read_pages, pages);
	read_page(&r, 151);
	ck_assert_uint_eq(stats(&r).read_pages, pages + 1);

	/* Errors. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, 5), -EINVAL);
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 0, -1), -EINVAL);
	ck_assert_int_eq(pwb_fadvise(NULL, 0, 0, PWB_FADV_NORMAL), -EINVAL);
	ra_close(&r);
}
END_TEST

/* Application-owned pages: pwb_fadvise() refuses them. */
static int app_get_page(struct pwb_inode *inode, uint64_t index,
			const void **data)
{
	static char page[PS];

	(void)inode;
	(void)index;
	*data = page;
	return 0;
}

START_TEST(test_fadvise_app_owned)
{
	static const struct pwb_inode_ops ops = { .get_page = app_get_page,
						  .map_page = tu_ident_map };
	struct tu_env e;
	struct pwb_inode *inode;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &ops,
					tu_ident_pages(IMG_PAGES), &inode),
			 0);
	ck_assert_int_eq(pwb_fadvise(inode, 0, 0, PWB_FADV_WILLNEED), -EINVAL);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * A device read of a window fails on page 40 (every read touching it):
 * the sequential reader gets every page before and after it, with the
 * right data, and -EIO for page 40 alone; once the fault is gone page 40
 * reads right (the failed read marked nothing up to date).
 */
START_TEST(test_read_error_only_for_its_page)
{
	struct pwb_fault f = { .kind = PWB_FAULT_READ_EIO, .every = 1,
			       .dev_start = 40 * PS, .dev_end = 41 * PS };
	struct ra_env r;
	unsigned char b[PS];
	uint64_t hits = 0;

	ra_open(&r, RA_PAGES * PS);
	ck_assert_int_eq(pwb_bdi_inject_fault(r.e.bdi, &f), 0);
	for (uint64_t p = 0; p < 128; p++) {
		if (p == 40) {
			ck_assert_int_eq(pwb_read(r.inode, b, PS, p * PS),
					 -EIO);
			continue;
		}
		read_page(&r, p);
	}
	/* Again, from another reader's side: still -EIO, not stale. */
	ck_assert_int_eq(pwb_read(r.inode, b, PS, 40 * PS), -EIO);
	ck_assert_int_eq(pwb_read(r.inode, b, 2 * PS, 39 * PS), (ssize_t)PS);
	check_page(b, 39);
	ck_assert_int_eq(pwb_bdi_fault_hits(r.e.bdi, &hits), 0);
	ck_assert_uint_ge(hits, 2);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(r.e.bdi, &f), 0);
	read_page(&r, 40);
	ra_close(&r);
}
END_TEST

/* The first read touching page 40 fails (the readahead that reads it):
 * the reader of page 40 reads it again and gets it right. */
START_TEST(test_readahead_error_retried)
{
	struct pwb_fault f = { .kind = PWB_FAULT_READ_EIO, .nth = 1,
			       .dev_start = 40 * PS, .dev_end = 41 * PS };
	struct ra_env r;
	uint64_t hits = 0;

	ra_open(&r, RA_PAGES * PS);
	ck_assert_int_eq(pwb_bdi_inject_fault(r.e.bdi, &f), 0);
	for (uint64_t p = 0; p < 128; p++)
		read_page(&r, p);
	ck_assert_int_eq(pwb_bdi_fault_hits(r.e.bdi, &hits), 0);
	ck_assert_uint_eq(hits, 1);
	ra_close(&r);
}
END_TEST

/* Writes never match a read rule. */
START_TEST(test_read_rule_spares_writes)
{
	struct pwb_fault f = { .kind = PWB_FAULT_READ_EIO, .every = 1 };
	struct ra_env r;
	unsigned char b[PS];
	uint64_t hits = 0;

	ra_open(&r, RA_PAGES * PS);
	ck_assert_int_eq(pwb_bdi_inject_fault(r.e.bdi, &f), 0);
	memset(b, 1, PS);
	ck_assert_int_eq(pwb_write(r.inode, b, PS, 3 * PS), (ssize_t)PS);
	ck_assert_int_eq(pwb_fsync(r.inode), 0);
	ck_assert_int_eq(pwb_bdi_fault_hits(r.e.bdi, &hits), 0);
	ck_assert_uint_eq(hits, 0);
	ra_close(&r);
}
END_TEST

/* Several threads read the same pages at once, in order and at random,
 * while readahead runs: every byte right. */
#define NR_READERS 4

struct reader {
	struct ra_env *r;
	unsigned int id;
	int bad;
};

static void *reader_fn(void *arg)
{
	struct reader *rd = arg;
	unsigned char *b = malloc(16 * PS);
	uint64_t seed = rd->id + 1;

	for (unsigned int round = 0; round < 2 && !rd->bad; round++) {
		for (uint64_t p = 0; p < FILE_PAGES && !rd->bad; p += 16) {
			uint64_t q = rd->id & 1 ? tu_rand(&seed) %
							  (FILE_PAGES - 16)
						: p;
			ssize_t n = pwb_read(rd->r->inode, b, 16 * PS, q * PS);

			if (n != 16 * PS) {
				rd->bad = 1;
				break;
			}
			for (unsigned int k = 0; k < 16; k++)
				for (unsigned int i = 0; i < PS; i += 1023)
					if (b[k * PS + i] != pat(q + k, i))
						rd->bad = 2;
		}
		if (!rd->id)	/* drop clean pages under the others */
			pwb_fadvise(rd->r->inode, 0, 0, PWB_FADV_DONTNEED);
	}
	free(b);
	return NULL;
}

START_TEST(test_concurrent_readers)
{
	struct ra_env r;
	pthread_t t[NR_READERS];
	struct reader rd[NR_READERS];

	ra_open(&r, RA_PAGES * PS);
	for (unsigned int i = 0; i < NR_READERS; i++) {
		rd[i] = (struct reader){ .r = &r, .id = i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, reader_fn, &rd[i]),
				 0);
	}
	for (unsigned int i = 0; i < NR_READERS; i++)
		pthread_join(t[i], NULL);
	for (unsigned int i = 0; i < NR_READERS; i++)
		ck_assert_int_eq(rd[i].bad, 0);
	ra_close(&r);
}
END_TEST

/*
 * ra_open() with a cache of @cache_pages pages: the file is written and
 * synced a slice at a time, so that its dirty pages always fit.
 */
static void ra_open_small(struct ra_env *r, uint64_t ra, uint64_t cache_pages,
			  uint64_t file_pages)
{
	unsigned char *buf = malloc(32 * PS);

	tu_env_config(&r->e, 1, backend());
	r->e.cfg.readahead_bytes = ra;
	r->e.cfg.cache_bytes = cache_pages * PS;
	tu_env_open(&r->e, IMG_PAGES);
	ck_assert_int_eq(pwb_inode_open(r->e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r->inode),
			 0);
	for (uint64_t p0 = 0; p0 < file_pages; p0 += 32) {
		for (uint64_t p = 0; p < 32; p++)
			for (unsigned int i = 0; i < PS; i++)
				buf[p * PS + i] = pat(p0 + p, i);
		ck_assert_int_eq(pwb_write(r->inode, buf, 32 * PS, p0 * PS),
				 (ssize_t)(32 * PS));
		ck_assert_int_eq(pwb_fsync(r->inode), 0);
	}
	ck_assert_int_eq(pwb_inode_close(r->inode), 0);
	ck_assert_int_eq(pwb_inode_open(r->e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r->inode),
			 0);
	ck_assert_int_eq(pwb_inode_set_size(r->inode, file_pages * PS), 0);
	ck_assert_uint_eq(stats(r).cache_pages, 0);
	free(buf);
}

/*
 * Reclaim takes the pages their reader is done with before the pages read
 * ahead and not yet copied, wherever they are in reclaim's order: pages
 * [0, 64) read ahead first and not copied, [64, 128) read after them and
 * copied once; filling the cache (128 pages) with 64 more pages frees
 * the copied ones, and reading [0, 64) then costs no device read. Pages
 * read ahead that nobody copies are not kept for ever: a later reader
 * still finds room.
 */
START_TEST(test_reclaim_spares_pages_read_ahead)
{
	struct ra_env r;
	uint64_t pages;

	ra_open_small(&r, RA_PAGES * PS, 128, 1024);
	ck_assert_int_eq(pwb_fadvise(r.inode, 0, 64 * PS, PWB_FADV_WILLNEED),
			 0);
	ck_assert_int_eq(pwb_fadvise(r.inode, 64 * PS, 64 * PS,
				     PWB_FADV_WILLNEED),
			 0);
	ck_assert_uint_eq(stats(&r).read_pages, 128);
	for (uint64_t p = 64; p < 128; p++)
		read_page(&r, p);
	ck_assert_uint_eq(stats(&r).read_pages, 128);
	/* 64 more: the cache is full, room is made. */
	ck_assert_int_eq(pwb_fadvise(r.inode, 128 * PS, 64 * PS,
				     PWB_FADV_WILLNEED),
			 0);
	ck_assert_uint_eq(stats(&r).read_pages, 192);
	for (uint64_t p = 0; p < 64; p++)
		read_page(&r, p);
	ck_assert_uint_eq(stats(&r).read_pages, 192);

	/* A cache's worth read ahead of nobody, [512, 640), is not kept for
	 * ever: a sequential reader of [640, 1024) after it still gets its
	 * pages into the cache, each read once, and finds its last page
	 * cached (else it was read around a cache full of the others). */
	ck_assert_int_eq(pwb_fadvise(r.inode, 512 * PS, 128 * PS,
				     PWB_FADV_WILLNEED),
			 0);
	pages = stats(&r).read_pages;
	for (uint64_t p = 640; p < 1024; p++)
		read_page(&r, p);
	ck_assert_uint_eq(stats(&r).read_pages, pages + 384);
	ck_assert_uint_le(stats(&r).cache_pages, 128);
	read_page(&r, 1023);
	ck_assert_uint_eq(stats(&r).read_pages, pages + 384);
	ra_close(&r);
}
END_TEST

/*
 * Interleave @nr sequential 4 KiB readers of one file (reader k from page
 * k * 256, 192 pages each) in a cache of 512 pages with windows of up to
 * 64 (psync: a call reads the window it starts). Return the largest
 * number of pages one call read once every reader has had 96 pages.
 */
static uint64_t readers_window(struct ra_env *r, unsigned int nr)
{
	uint64_t before = stats(r).read_pages, most = 0;

	for (uint64_t i = 0; i < 192; i++)
		for (unsigned int k = 0; k < nr; k++) {
			uint64_t now;

			read_page(r, k * 256 + i);
			now = stats(r).read_pages;
			if (i >= 96 && now - before > most)
				most = now - before;
			before = now;
		}
	return most;
}

/*
 * The readers of a bdi share its cache: with more than two sequential
 * readers a window is cut to a quarter of the cache over the readers (4
 * readers of a 512-page cache: 32 pages, not readahead_bytes' 64), so
 * that pages read ahead are not reclaimed before their reader copies
 * them. Two readers keep their 64. A reader counts while its window
 * stops short of the end of its file, and no longer once the inode is
 * closed.
 */
START_TEST(test_readers_share_the_cache)
{
	struct ra_env r;
	uint64_t before;

	ra_open_small(&r, RA_PAGES * PS, 512, 1024);
	ck_assert_uint_eq(readers_window(&r, 2), RA_PAGES);
	/* Each page once, and up to two windows past the last. */
	ck_assert_uint_le(stats(&r).read_pages, 2 * (192 + 2 * 64));
	ck_assert_int_eq(pwb_inode_close(r.inode), 0);
	ck_assert_uint_eq(pwb__aread(&r.e.bdi->pcache->ra.nr_streams), 0);
	ck_assert_int_eq(pwb_inode_open(r.e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r.inode),
			 0);
	ck_assert_int_eq(pwb_inode_set_size(r.inode, 1024 * PS), 0);
	before = stats(&r).read_pages;
	ck_assert_uint_eq(readers_window(&r, 4), 512 / (4 * 4));
	ck_assert_uint_eq(pwb__aread(&r.e.bdi->pcache->ra.nr_streams), 4);
	ck_assert_uint_le(stats(&r).read_pages - before, 4 * (192 + 2 * 32));
	ck_assert_int_eq(pwb_inode_close(r.inode), 0);
	ck_assert_uint_eq(pwb__aread(&r.e.bdi->pcache->ra.nr_streams), 0);
	ck_assert_int_eq(pwb_inode_open(r.e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &r.inode),
			 0);
	ra_close(&r);
}
END_TEST

struct ring_arg {
	struct pwb__pcache_bdi *pb;
	struct pwb__rd_ring *ring;
};

static void *ring_fn(void *arg)
{
	struct ring_arg *a = arg;

	a->ring = a->pb->ra.ops->read_ring_get(a->pb->ra.state, false);
	if (a->ring)
		a->pb->ra.ops->read_ring_put(a->ring);
	return NULL;
}

/*
 * io_uring: a reading thread has a ring of its own (it sleeps on it,
 * holding its lock, while it waits for its reads), whatever the number of
 * CPUs: nine threads, one after the other, each get a different ring.
 * With one ring per CPU (at most 8), two of them shared one, and readers
 * outnumbering the CPUs waited for each other's reads.
 */
START_TEST(test_readers_own_rings)
{
	struct ra_env r;
	struct ring_arg a[9];
	pthread_t t;

	ra_open(&r, RA_PAGES * PS);
	ck_assert_ptr_nonnull(r.e.bdi->pcache->ra.ops);
	for (unsigned int i = 0; i < 9; i++) {
		a[i].pb = r.e.bdi->pcache;
		ck_assert_int_eq(pthread_create(&t, NULL, ring_fn, &a[i]), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert_ptr_nonnull(a[i].ring);
		for (unsigned int j = 0; j < i; j++)
			ck_assert_ptr_ne(a[i].ring, a[j].ring);
	}
	ra_close(&r);
}
END_TEST

static Suite *ra_suite(void)
{
	Suite *s = suite_create("readahead");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	if (!TU_URING_VARIANT) {
		/* Window sizes: known when a psync pwb_read() returns. */
		tcase_add_test(tc, test_sequential_windows_grow);
		tcase_add_test(tc, test_two_interleaved_streams);
		tcase_add_test(tc, test_random_reader_no_readahead);
		tcase_add_test(tc, test_readahead_off);
		tcase_add_test(tc, test_fadvise_random_sequential);
		tcase_add_test(tc, test_fadvise_app_owned);
		tcase_add_test(tc, test_reclaim_spares_pages_read_ahead);
		tcase_add_test(tc, test_readers_share_the_cache);
	}
	tcase_add_test(tc, test_fadvise_willneed_dontneed);
	tcase_add_test(tc, test_read_error_only_for_its_page);
	tcase_add_test(tc, test_readahead_error_retried);
	tcase_add_test(tc, test_read_rule_spares_writes);
	tcase_add_test(tc, test_concurrent_readers);
	if (TU_URING_VARIANT)
		tcase_add_test(tc, test_readers_own_rings);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (tu_odirect_unsupported())
		return 77;
	if (TU_URING_VARIANT && tu_uring_unsupported())
		return 77;
	return tu_run_suite(ra_suite(), false);
}
