// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_pcache.c - library-owned pages: pwb_write(), pwb_read(), the size,
 * truncate, stable pages, the cache_bytes bound and reclaim (issue 12)
 *
 * The inodes map page i to device byte i * page_size + base (a real image
 * file opened O_DIRECT by the bdi), so the device can be checked with
 * plain reads.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PS 4096u
#define IMG_PAGES 2048u

/* Page @index at block @block of the inode's quarter of the image. */
static int quarter_map(struct pwb_inode *inode, uint64_t index,
		       uint64_t block, uint64_t *dev_off)
{
	uint64_t base = (uint64_t)(uintptr_t)pwb_inode_priv(inode);

	if (index >= IMG_PAGES / 4)
		return -ERANGE;
	*dev_off = base + block * PS;
	return 0;
}

static int ident_map(struct pwb_inode *inode, uint64_t index,
		     uint64_t *dev_off)
{
	return quarter_map(inode, index, index, dev_off);
}

static const struct pwb_inode_ops lib_ops = { .map_page = ident_map };

/* Inode @ino, library-owned, at device quarter @q of the image. */
static struct pwb_inode *open_lib(struct tu_env *e, uint64_t ino,
				  unsigned int q)
{
	struct pwb_inode *inode = NULL;

	ck_assert_int_eq(pwb_inode_open(e->bdi, ino, &lib_ops,
					(void *)(uintptr_t)((uint64_t)q *
							    (IMG_PAGES / 4) *
							    PS),
					&inode),
			 0);
	return inode;
}

static void env_open(struct tu_env *e, unsigned int nr_ctx,
		     uint64_t cache_bytes)
{
	tu_env_config(e, nr_ctx, "psync");
	e->cfg.cache_bytes = cache_bytes;
	tu_env_open(e, IMG_PAGES);
}

static void fill_rand(uint64_t *seed, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)tu_rand(seed);
}

/* Write @pages pages of @ref at offset 0 of @inode, then close it. */
static void write_and_close(struct pwb_inode *inode, const unsigned char *ref,
			    size_t pages)
{
	ck_assert_int_eq(pwb_write(inode, ref, pages * PS, 0),
			 (ssize_t)(pages * PS));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
}

#define FILE_MAX (256u * PS)

START_TEST(test_unaligned_rw)
{
	struct tu_env e;
	struct pwb_inode *inode;
	unsigned char *ref = calloc(1, FILE_MAX), *buf = malloc(FILE_MAX);
	uint64_t seed = 42, size = 0, got;
	int i;

	env_open(&e, 2, 0);
	inode = open_lib(&e, 1, 0);
	for (i = 0; i < 400; i++) {
		uint64_t off = tu_rand(&seed) % (FILE_MAX - 20000);
		size_t len = 1 + tu_rand(&seed) % 20000;

		if (tu_rand(&seed) % 3) {
			fill_rand(&seed, ref + off, len);
			ck_assert_int_eq(pwb_write(inode, ref + off, len, off),
					 (ssize_t)len);
			if (off + len > size)
				size = off + len;
		} else {
			ssize_t want = off >= size ? 0
				     : (ssize_t)PWB__MIN(len, size - off);

			ck_assert_int_eq(pwb_read(inode, buf, len, off), want);
			ck_assert(!memcmp(buf, ref + off, (size_t)want));
		}
		if (i == 200)	/* half of it from the device */
			ck_assert_int_eq(pwb_fsync(inode), 0);
	}
	ck_assert_int_eq(pwb_inode_size(inode, &got), 0);
	ck_assert_uint_eq(got, size);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);

	/* Reopened: nothing cached, every byte from the device. */
	inode = open_lib(&e, 1, 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, size), 0);
	ck_assert_int_eq(pwb_read(inode, buf, FILE_MAX, 0), (ssize_t)size);
	ck_assert(!memcmp(buf, ref, size));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
	free(ref);
	free(buf);
}
END_TEST

START_TEST(test_read_past_size)
{
	struct tu_env e;
	struct pwb_inode *inode;
	char b[8192], w[5000];

	env_open(&e, 1, 0);
	inode = open_lib(&e, 1, 0);
	ck_assert_int_eq(pwb_read(inode, b, 10, 0), 0);
	memset(w, 'x', sizeof(w));
	ck_assert_int_eq(pwb_write(inode, w, sizeof(w), 0), 5000);
	ck_assert_int_eq(pwb_read(inode, b, 100, 4990), 10);
	ck_assert_int_eq(pwb_read(inode, b, 100, 5000), 0);
	ck_assert_int_eq(pwb_read(inode, b, 100, 1ull << 40), 0);
	ck_assert_int_eq(pwb_read(inode, b, sizeof(b), 0), 5000);
	ck_assert_int_eq(pwb_read(inode, b, 0, 0), 0);
	/* A write past the end leaves a hole of zeros in its page. */
	ck_assert_int_eq(pwb_write(inode, "y", 1, 6000), 1);
	ck_assert_int_eq(pwb_read(inode, b, 1001, 5000), 1001);
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(b[i], 0);
	ck_assert_int_eq(b[1000], 'y');
	/* Left open: the bdi's close writes and frees it, pages too. */
	tu_env_close(&e);
}
END_TEST

START_TEST(test_partial_page_read_first)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[3 * PS], buf[3 * PS];
	static unsigned char dev[PS] __attribute__((aligned(PS)));
	uint64_t seed = 7;

	env_open(&e, 1, 0);
	inode = open_lib(&e, 5, 1);
	fill_rand(&seed, ref, sizeof(ref));
	ck_assert_int_eq(pwb_write(inode, ref, sizeof(ref), 0),
			 (ssize_t)sizeof(ref));
	ck_assert_int_eq(pwb_inode_close(inode), 0);

	inode = open_lib(&e, 5, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(ref)), 0);
	/* Ten bytes in the middle of page 1, which is not cached. */
	memset(ref + PS + 100, 0x5a, 10);
	ck_assert_int_eq(pwb_write(inode, ref + PS + 100, 10, PS + 100), 10);
	ck_assert_int_eq(pwb_read(inode, buf, sizeof(buf), 0),
			 (ssize_t)sizeof(buf));
	ck_assert(!memcmp(buf, ref, sizeof(ref)));
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(tu_read_device(e.img, (IMG_PAGES / 4) * PS + PS,
					dev, PS),
			 0);
	ck_assert(!memcmp(dev, ref + PS, PS));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_truncate)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char w[3 * PS];
	static unsigned char b[3 * PS] __attribute__((aligned(PS)));
	uint64_t size;

	env_open(&e, 1, 0);
	inode = open_lib(&e, 1, 0);
	memset(w, 0xaa, sizeof(w));
	ck_assert_int_eq(pwb_write(inode, w, sizeof(w), 0),
			 (ssize_t)sizeof(w));
	ck_assert_int_eq(pwb_inode_set_size(inode, 5000), 0);
	ck_assert_int_eq(pwb_inode_size(inode, &size), 0);
	ck_assert_uint_eq(size, 5000);
	ck_assert_int_eq(pwb_read(inode, b, sizeof(b), 0), 5000);
	/* Page 2 was dropped with its dirty state. */
	ck_assert_int_eq(pwb_page_state(inode, 2), 0);
	/* Growing again: the tail of the old last page reads as zeros. */
	ck_assert_int_eq(pwb_inode_set_size(inode, 2 * PS), 0);
	ck_assert_int_eq(pwb_read(inode, b, sizeof(b), 0), 2 * PS);
	for (unsigned int i = 0; i < 2 * PS; i++)
		ck_assert_int_eq(b[i], i < 5000 ? 0xaa : 0);
	/* Truncate through the discard path. */
	ck_assert_int_eq(pwb_inode_discard(inode, 100, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_size(inode, &size), 0);
	ck_assert_uint_eq(size, 100);
	ck_assert_int_eq(pwb_read(inode, b, sizeof(b), 0), 100);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	/* The zeros after the size reached the device too. */
	ck_assert_int_eq(tu_read_device(e.img, 0, b, PS), 0);
	for (unsigned int i = 0; i < PS; i++)
		ck_assert_int_eq(b[i], i < 100 ? 0xaa : 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* A write of page 0 is held in flight (delay fault); pwb_write into it
 * must wait, so the device gets the old content from that write. The
 * write is in flight once it has reached the fault (a hit): a page only
 * tagged WRITEBACK may still be refused by get_page (-EAGAIN, its lock
 * taken by pwb_write's fast path) and left for a later pass, which is
 * what CI's TSan run once saw. */
struct bg_writer {
	struct pwb_bdi *bdi;
	int ret;
};

static void *kick_main(void *arg)
{
	struct bg_writer *k = arg;

	k->ret = pwb_bdi_writeback(k->bdi, PWB_WB_ALL, PWB_WB_WAIT);
	return NULL;
}

START_TEST(test_stable_pages)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	struct bg_writer k;
	pthread_t t;
	static unsigned char a[PS], b[PS];
	static unsigned char dev[PS] __attribute__((aligned(PS)));
	uint64_t hits = 0;
	int st, tries = 0;

	env_open(&e, 1, 0);
	inode = open_lib(&e, 1, 0);
	memset(a, 'A', PS);
	memset(b, 'B', PS);
	ck_assert_int_eq(pwb_write(inode, a, PS, 0), PS);
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_DELAY;
	f.every = 1;
	f.delay_ms = 300;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	k.bdi = e.bdi;
	ck_assert_int_eq(pthread_create(&t, NULL, kick_main, &k), 0);
	do {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
		ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
		st = pwb_page_state(inode, 0);
	} while (!(hits && (st & PWB_PAGE_WRITEBACK)) && ++tries < 5000);
	ck_assert_uint_eq(hits, 1);
	ck_assert(st & PWB_PAGE_WRITEBACK);
	/* Dirty again while in flight (as a write that raced it would
	 * leave it): pwb_write's hit path must see the write in flight. */
	ck_assert_int_eq(pwb_mark_dirty(inode, 0, PS), 0);
	ck_assert_int_eq(pwb_page_state(inode, 0),
			 PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pwb_write(inode, b, 10, 0), 10);
	/* The write in flight ended before pwb_write changed the page. A
	 * next write (of the new content) lands only 300 ms after its own
	 * hit: with no second hit yet, the device holds the first write. */
	ck_assert_int_eq(tu_read_device(e.img, 0, dev, PS), 0);
	ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
	if (hits == 1)
		ck_assert_msg(!memcmp(dev, a, PS),
			      "the write in flight carried pwb_write's bytes");
	pthread_join(t, NULL);
	ck_assert_int_eq(k.ret, 0);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(tu_read_device(e.img, 0, dev, PS), 0);
	ck_assert(!memcmp(dev, b, 10));
	ck_assert(!memcmp(dev + 10, a + 10, PS - 10));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

static int cb_get(struct pwb_inode *inode, uint64_t index, const void **d)
{
	(void)inode;
	(void)index;
	(void)d;
	return -EIO;
}

START_TEST(test_errors)
{
	struct tu_env e;
	struct pwb_inode *inode, *cb = NULL;
	struct pwb_inode_ops none = { 0 }, nomap = { .get_page = cb_get };
	struct pwb_inode_ops both = { .get_page = cb_get,
				      .map_page = ident_map };
	char b[16];
	uint64_t size;

	env_open(&e, 1, 0);
	/* Neither callback: allocator mode (check_space, check_datapath). */
	ck_assert_int_eq(pwb_inode_open(e.bdi, 9, &none, NULL, &cb), 0);
	ck_assert_int_eq(pwb_inode_close(cb), 0);
	cb = NULL;
	ck_assert_int_eq(pwb_inode_open(e.bdi, 9, &nomap, NULL, &cb), -EINVAL);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 9, &both, NULL, &cb), 0);
	ck_assert_int_eq(pwb_write(cb, "x", 1, 0), -EINVAL);
	ck_assert(strstr(pwb_errmsg(), "application-owned"));
	ck_assert_int_eq(pwb_read(cb, b, 1, 0), -EINVAL);
	ck_assert_int_eq(pwb_inode_size(cb, &size), -EINVAL);
	ck_assert_int_eq(pwb_inode_set_size(cb, 0), -EINVAL);
	inode = open_lib(&e, 1, 0);
	ck_assert_int_eq(pwb_write(NULL, "x", 1, 0), -EINVAL);
	ck_assert_int_eq(pwb_read(NULL, b, 1, 0), -EINVAL);
	ck_assert_int_eq(pwb_write(inode, NULL, 1, 0), -EINVAL);
	ck_assert_int_eq(pwb_read(inode, NULL, 1, 0), -EINVAL);
	ck_assert_int_eq(pwb_inode_size(inode, NULL), -EINVAL);
	ck_assert_int_eq(pwb_inode_size(NULL, &size), -EINVAL);
	ck_assert_int_eq(pwb_inode_set_size(NULL, 0), -EINVAL);
	ck_assert_int_eq(pwb_write(inode, b, 16, UINT64_MAX - 4), -EFBIG);
	ck_assert_int_eq(pwb_write(inode, NULL, 0, 0), 0);
	/* map_page refuses the page: its error, nothing written. */
	ck_assert_int_eq(pwb_write(inode, b, 16, (uint64_t)IMG_PAGES * PS),
			 16);	/* a whole-page-less write needs no read */
	ck_assert_int_eq(pwb_fsync(inode), -ERANGE);
	ck_assert_int_eq(pwb_inode_discard(inode, 0, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	ck_assert_int_eq(pwb_inode_close(cb), 0);
	/* pwb_sync's own cursor still has the error (pwb_inode_discard). */
	tu_env_close_expect(&e, -ERANGE);
}
END_TEST

/* Write 4x cache_bytes, then read it all back: reclaim makes room, the
 * cache never holds more than its bound. */
START_TEST(test_small_cache)
{
	struct tu_env e;
	struct pwb_inode *inode[2];
	const uint64_t cache_pages = 64, total = 4 * cache_pages;
	unsigned char *ref = malloc(total * PS), *buf = malloc(total * PS);
	uint64_t seed = 3, max_seen = 0, reclaimed = 0;
	unsigned int i;

	env_open(&e, 2, cache_pages * PS);
	inode[0] = open_lib(&e, 0, 0);
	inode[1] = open_lib(&e, 1, 1);
	fill_rand(&seed, ref, total * PS);
	for (i = 0; i < total; i++) {
		uint64_t n;

		ck_assert_int_eq(pwb_write(inode[i & 1], ref + i * PS, PS,
					   (uint64_t)(i / 2) * PS),
				 PS);
		n = pwb__aread(&e.bdi->pcache->nr_pages);
		if (n > max_seen)
			max_seen = n;
	}
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	for (i = 0; i < total; i++) {
		ck_assert_int_eq(pwb_read(inode[i & 1], buf + i * PS, PS,
					  (uint64_t)(i / 2) * PS),
				 PS);
		if (pwb__aread(&e.bdi->pcache->nr_pages) > max_seen)
			max_seen = pwb__aread(&e.bdi->pcache->nr_pages);
	}
	ck_assert(!memcmp(buf, ref, total * PS));
	ck_assert_uint_le(max_seen, cache_pages);
	ck_assert_uint_ge(max_seen, cache_pages - 8);
	for (i = 0; i < PWB_MAX_WB_CTX; i++)
		reclaimed += e.bdi->pcache->reclaimed[i];
	reclaimed += e.bdi->pcache->direct_reclaims;
	ck_assert_uint_ge(reclaimed, total - cache_pages);
	ck_assert_int_eq(pwb_inode_close(inode[0]), 0);
	ck_assert_int_eq(pwb_inode_close(inode[1]), 0);
	tu_env_close(&e);
	free(ref);
	free(buf);
}
END_TEST

/* Resident memory of this process, from /proc/self/statm, in bytes. */
static uint64_t resident_bytes(void)
{
	unsigned long size, res;
	FILE *f = fopen("/proc/self/statm", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &res), 2);
	fclose(f);
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * PWB_BDI_CACHE_PREFAULT maps and faults in the whole cache at open: the
 * memory is resident before any page is used, and a cache so made serves
 * twice its size written and read back. Without the flag nothing is
 * mapped until a page is needed.
 */
START_TEST(test_cache_prefault_maps_the_whole_cache_at_open)
{
	/* Four inodes of a quarter of the image each: twice the cache. */
	const uint64_t cache = 4ull << 20, per = IMG_PAGES / 4;
	unsigned char *ref = malloc(per * PS), *buf = malloc(per * PS);
	struct pwb_inode *inode[4];
	struct tu_env e;
	uint64_t seed = 11, chunks, rss0;
	unsigned int q;

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_ge(IMG_PAGES * PS, 2 * cache);
	env_open(&e, 1, cache);
	ck_assert_uint_eq(tu_pool_chunks(e.bdi), 0);
	tu_env_close(&e);

	tu_env_config(&e, 1, "psync");
	e.cfg.cache_bytes = cache;
	e.cfg.flags |= PWB_BDI_CACHE_PREFAULT;
	rss0 = resident_bytes();
	tu_env_open(&e, IMG_PAGES);
	chunks = tu_pool_chunks(e.bdi);
	ck_assert_uint_ge(chunks * e.bdi->pcache->pool->chunk_bytes, cache);
	ck_assert_uint_lt((chunks - 1) * e.bdi->pcache->pool->chunk_bytes,
			  cache);
	ck_assert_uint_ge(resident_bytes() - rss0, cache);

	fill_rand(&seed, ref, per * PS);
	for (q = 0; q < 4; q++) {
		inode[q] = open_lib(&e, q, q);
		ck_assert_int_eq(pwb_write(inode[q], ref, per * PS, 0),
				 (ssize_t)(per * PS));
	}
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	for (q = 0; q < 4; q++) {
		ck_assert_int_eq(pwb_read(inode[q], buf, per * PS, 0),
				 (ssize_t)(per * PS));
		ck_assert(!memcmp(buf, ref, per * PS));
		ck_assert_int_eq(pwb_inode_close(inode[q]), 0);
	}
	tu_env_close(&e);
	free(ref);
	free(buf);
}
END_TEST

static uint64_t cached_pages_of(struct pwb_inode *inode)
{
	long before, after;
	unsigned long count;

	rcu_read_lock();
	cds_lfht_count_nodes(inode->pcache->pages, &before, &count, &after);
	rcu_read_unlock();
	return count;
}

/* Each context's flusher reclaims clean pages of its own inodes only,
 * after its passes, and counts them in its own statistics. Which flusher
 * gets there first varies: the case runs a few times. */
static void reclaim_per_context_once(void)
{
	struct tu_env e;
	struct pwb_inode *inode[2];
	struct pwb_stats st[2], all;
	static unsigned char w[PS];
	/* Inode 1 has too few pages for its context to reach the low
	 * watermark alone: a context that took other contexts' pages
	 * would take inode 0's. */
	const uint64_t cache_pages = 64, nr[2] = { 60, 2 };
	uint64_t i, freed[2];
	int c, tries = 0;

	/* One flusher thread serves both contexts, in order. */
	tu_env_config(&e, 2, "psync");
	e.cfg.cache_bytes = cache_pages * PS;
	e.cfg.nr_flushers = 1;
	tu_env_open(&e, IMG_PAGES);
	inode[0] = open_lib(&e, 0, 0);
	inode[1] = open_lib(&e, 1, 1);
	for (c = 0; c < 2; c++)
		for (i = 0; i < nr[c]; i++)
			ck_assert_int_eq(pwb_write(inode[c], w, PS, i * PS),
					 PS);
	ck_assert_int_eq(pwb_inode_wb_ctx(inode[0]), 0);
	ck_assert_int_eq(pwb_inode_wb_ctx(inode[1]), 1);
	/* Written and clean: the flushers reclaim after the pass. */
	tu_writeback_wait(&e, PWB_WB_ALL);
	do {
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &all), 0);
	} while (all.cache_pages > cache_pages - cache_pages / 8 &&
		 ++tries < 2500);
	ck_assert_uint_le(all.cache_pages, cache_pages - cache_pages / 8);
	ck_assert_uint_eq(all.direct_reclaimed_pages, 0);
	/* Reclaim may go on a little below the threshold the loop waited
	 * for: compare figures taken while nothing moved (the bdi's before
	 * and after the contexts' the same). */
	for (tries = 0;; tries++) {
		struct pwb_stats again;

		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &all), 0);
		for (c = 0; c < 2; c++) {
			ck_assert_int_eq(pwb_wb_ctx_stats(e.bdi, c, &st[c]),
					 0);
			freed[c] = nr[c] - cached_pages_of(inode[c]);
		}
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &again), 0);
		if ((again.cache_pages == all.cache_pages &&
		     again.reclaimed_pages == all.reclaimed_pages) ||
		    tries == 2500)
			break;
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	}
	for (c = 0; c < 2; c++) {
		ck_assert_uint_eq(st[c].reclaimed_pages, freed[c]);
		ck_assert_uint_eq(st[c].cache_pages, all.cache_pages);
	}
	ck_assert_uint_eq(all.reclaimed_pages, freed[0] + freed[1]);
	ck_assert_uint_ge(all.reclaimed_pages, nr[0] + nr[1] -
						       (cache_pages -
							cache_pages / 8));
	ck_assert_uint_ge(all.reclaim_passes, 1);
	ck_assert_int_eq(pwb_inode_close(inode[0]), 0);
	ck_assert_int_eq(pwb_inode_close(inode[1]), 0);
	tu_env_close(&e);
}

START_TEST(test_reclaim_per_context)
{
	for (int i = 0; i < 6; i++)
		reclaim_per_context_once();
}
END_TEST

/*
 * Background writeback starts at half the cache when dirty_background_bytes
 * is more than that: with the 64 MiB default above a 64-page cache, 40
 * dirty pages (over half) get written with the clock stopped (no expiry),
 * without anyone asking; before, nothing was written until the cache was
 * full and a writer waited.
 */
START_TEST(test_background_writeback_starts_at_half_the_cache)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_stats st;
	static unsigned char w[PS];
	const uint64_t cache_pages = 64;
	int tries = 0;

	tu_env_config(&e, 1, "psync");
	e.cfg.cache_bytes = cache_pages * PS;
	e.cfg.dirty_background_bytes = 64ull << 20;
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 0, 0);
	for (uint64_t i = 0; i < 40; i++)
		ck_assert_int_eq(pwb_write(inode, w, PS, i * PS), PS);
	do {
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	} while (st.written_pages == 0 && ++tries < 2500);

	ck_assert_uint_gt(st.written_pages, 0);
	/* Down to (at most) the threshold, not necessarily to 0. */
	ck_assert_uint_le(st.dirty_pages, cache_pages / 2);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * Pages read from the device join their context's reclaim list: reading a
 * file four times the cache's size through a cold cache frees the pages
 * read earlier and caches the later ones (a page no list holds could
 * never be reclaimed, and the reads would go around the cache).
 */
START_TEST(test_pages_read_from_device_are_reclaimed)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_stats st;
	const uint64_t cache_pages = 64, total = 4 * cache_pages;
	unsigned char *ref = malloc(total * PS), *buf = malloc(PS), *big;
	uint64_t seed = 9, i, before;

	env_open(&e, 2, cache_pages * PS);
	inode = open_lib(&e, 0, 0);
	fill_rand(&seed, ref, total * PS);
	ck_assert_int_eq(pwb_write(inode, ref, total * PS, 0),
			 (ssize_t)(total * PS));
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* A cold cache: the same file opened again. */
	inode = open_lib(&e, 0, 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, total * PS), 0);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_eq(st.cache_pages, 0);
	before = st.reclaimed_pages;	/* the writes needed reclaim too */
	for (i = 0; i < total; i++) {
		ck_assert_int_eq(pwb_read(inode, buf, PS, i * PS), PS);
		ck_assert(!memcmp(buf, ref + i * PS, PS));
	}
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_le(st.cache_pages, cache_pages);
	/* Every page read went through the cache, the earlier ones
	 * reclaimed to make room (closing the first inode dropped its
	 * pages without counting them). */
	ck_assert_uint_ge(st.reclaimed_pages - before, total - cache_pages);
	ck_assert_uint_ge(cached_pages_of(inode), cache_pages / 2);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* Cold again, read in one call four times the cache's size: its
	 * runs make room by reclaiming the pages read before them. */
	inode = open_lib(&e, 0, 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, total * PS), 0);
	big = malloc(total * PS);
	ck_assert_int_eq(pwb_read(inode, big, total * PS, 0),
			 (ssize_t)(total * PS));
	ck_assert(!memcmp(big, ref, total * PS));
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_le(st.cache_pages, cache_pages);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
	free(big);
	free(ref);
	free(buf);
}
END_TEST


/*
 * A close does not wait for an RCU grace period: a thread stays inside a
 * read-side section until the close has returned. The page index of the
 * closed inode is destroyed later (by the next close or the bdi's end),
 * once no reader can be in it. The close used to call synchronize_rcu(),
 * which cost every pwb-objd PUT 5 ms, and would deadlock here (the reader
 * gives up after 5 s, and the case fails).
 */
struct rcu_holder {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool inside, closed, timed_out;
};

static void *hold_read_section(void *arg)
{
	struct rcu_holder *h = arg;
	struct timespec until;

	rcu_register_thread();
	rcu_read_lock();
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 5;	/* a watchdog, not a measurement */
	pthread_mutex_lock(&h->lock);
	h->inside = true;
	pthread_cond_broadcast(&h->cond);
	while (!h->closed && !h->timed_out)
		h->timed_out = pthread_cond_timedwait(&h->cond, &h->lock,
						      &until) == ETIMEDOUT;
	pthread_mutex_unlock(&h->lock);
	rcu_read_unlock();
	rcu_unregister_thread();
	return NULL;
}

START_TEST(test_close_does_not_wait_for_a_grace_period)
{
	struct rcu_holder h = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	static unsigned char w[4 * PS];
	struct pwb_inode *inode;
	struct tu_env e;
	pthread_t t;

	env_open(&e, 1, 0);
	inode = open_lib(&e, 0, 0);
	ck_assert_int_eq(pwb_write(inode, w, sizeof(w), 0), (ssize_t)sizeof(w));
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, hold_read_section, &h), 0);
	pthread_mutex_lock(&h.lock);
	while (!h.inside)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);

	ck_assert_int_eq(pwb_inode_close(inode), 0);
	pthread_mutex_lock(&h.lock);
	h.closed = true;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(t, NULL);
	ck_assert_msg(!h.timed_out,
		      "pwb_inode_close() waited for a reader to leave");

	/* The next close reaps the queued index; so does the bdi's end. */
	inode = open_lib(&e, 1, 1);
	ck_assert_int_eq(pwb_write(inode, w, PS, 0), PS);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* Every page dirty and writeback stalled: a writer that needs a page
 * waits, and fails with -ETIMEDOUT once throttle_timeout_ms passed on
 * the bdi's clock. */
struct stall {
	struct pwb_inode *inode;
	ssize_t ret;
	int done;
};

static void *stall_main(void *arg)
{
	struct stall *s = arg;
	static unsigned char w[PS];

	s->ret = pwb_write(s->inode, w, PS, 40 * PS);
	pwb__aset(&s->done, 1);
	return NULL;
}

START_TEST(test_full_cache_timeout)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	struct stall s;
	pthread_t t;
	static unsigned char w[PS];
	int i;

	tu_env_config(&e, 1, "psync");
	e.cfg.cache_bytes = 16 * PS;
	e.cfg.throttle_timeout_ms = 1000;
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1, 0);
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_EIO;	/* nothing ever becomes clean */
	f.every = 1;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (i = 0; i < 16; i++)
		ck_assert_int_eq(pwb_write(inode, w, PS, (uint64_t)i * PS), PS);
	s.inode = inode;
	s.done = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, stall_main, &s), 0);
	for (i = 0; i < 50; i++) {	/* it waits, the clock standing */
		struct timespec ts = { 0, 2000000 };

		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(pwb__aread(&s.done), 0);
	/* A reader does not wait: an uncached page is read around the
	 * cache (the clock stands still, so a wait would never end). */
	ck_assert_int_eq(pwb_inode_set_size(inode, 64 * PS), 0);
	memset(w, 0xee, PS);
	ck_assert_int_eq(pwb_read(inode, w, PS, 50 * PS), PS);
	for (i = 0; i < (int)PS; i++)
		ck_assert_int_eq(w[i], 0);
	ck_assert_uint_le(e.bdi->pcache->nr_pages, 16);
	tu_clock_advance_ms(&e.clock, 1001);
	pthread_join(t, NULL);
	ck_assert_int_eq(s.ret, -ETIMEDOUT);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_inode_discard(inode, 0, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close_expect(&e, -EIO);
}
END_TEST

/* Several threads, one inode, random unaligned reads and writes; each
 * operation holds the test's locks of the pages it touches, so the model
 * (ref) and the inode change together. */
#define MT_PAGES 64u
#define MT_THREADS 4
#define MT_OPS 3000

struct mt {
	struct pwb_bdi *bdi;
	struct pwb_inode *inode;
	unsigned char ref[MT_PAGES * PS];
	pthread_mutex_t lock[MT_PAGES];
};

struct mt_arg {
	struct mt *m;
	uint64_t seed;
	long bad;
};

static void *mt_main(void *arg)
{
	struct mt_arg *a = arg;
	struct mt *m = a->m;
	unsigned char buf[3 * PS], mine[3 * PS];

	for (int i = 0; i < MT_OPS; i++) {
		uint64_t off = tu_rand(&a->seed) % (MT_PAGES * PS - 3 * PS);
		size_t len = 1 + tu_rand(&a->seed) % (2 * PS);
		uint64_t p0 = off / PS, p1 = (off + len - 1) / PS, p;

		for (p = p0; p <= p1; p++)
			pthread_mutex_lock(&m->lock[p]);
		if (tu_rand(&a->seed) & 1) {
			for (size_t j = 0; j < len; j++)
				mine[j] = (unsigned char)tu_rand(&a->seed);
			if (pwb_write(m->inode, mine, len, off) != (ssize_t)len)
				a->bad++;
			memcpy(m->ref + off, mine, len);
		} else {
			/* Written size only grows: all of it is there. */
			if (pwb_read(m->inode, buf, len, off) != (ssize_t)len ||
			    memcmp(buf, m->ref + off, len))
				a->bad++;
		}
		for (p = p0; p <= p1; p++)
			pthread_mutex_unlock(&m->lock[p]);
		if (i % 500 == 0)
			pwb_bdi_writeback(m->bdi, PWB_WB_ALL, 0);
	}
	return NULL;
}

START_TEST(test_mt_stress)
{
	struct tu_env e;
	struct mt *m = calloc(1, sizeof(*m));
	struct mt_arg a[MT_THREADS];
	pthread_t t[MT_THREADS];
	unsigned int i;
	unsigned char *buf = malloc(MT_PAGES * PS);

	/* A small cache: reclaim runs under the threads too. */
	env_open(&e, 2, 32 * PS);
	m->bdi = e.bdi;
	m->inode = open_lib(&e, 1, 0);
	for (i = 0; i < MT_PAGES; i++)
		pthread_mutex_init(&m->lock[i], NULL);
	ck_assert_int_eq(pwb_write(m->inode, m->ref, sizeof(m->ref), 0),
			 (ssize_t)sizeof(m->ref));
	for (i = 0; i < MT_THREADS; i++) {
		a[i].m = m;
		a[i].seed = 100 + i;
		a[i].bad = 0;
		ck_assert_int_eq(pthread_create(&t[i], NULL, mt_main, &a[i]),
				 0);
	}
	for (i = 0; i < MT_THREADS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < MT_THREADS; i++)
		ck_assert_int_eq(a[i].bad, 0);
	ck_assert_int_eq(pwb_fsync(m->inode), 0);
	ck_assert_int_eq(pwb_inode_close(m->inode), 0);
	m->inode = open_lib(&e, 1, 0);
	ck_assert_int_eq(pwb_inode_set_size(m->inode, sizeof(m->ref)), 0);
	ck_assert_int_eq(pwb_read(m->inode, buf, MT_PAGES * PS, 0),
			 (ssize_t)(MT_PAGES * PS));
	ck_assert(!memcmp(buf, m->ref, MT_PAGES * PS));
	ck_assert_int_eq(pwb_inode_close(m->inode), 0);
	tu_env_close(&e);
	free(buf);
	free(m);
}
END_TEST

/*
 * pwb_read()'s hit path copies a page without its lock (checked by the
 * page's sequence count) and with a reference (which keeps its buffer
 * from going to another page). Readers hammer a few cached pages of one
 * inode while a writer rewrites them whole, truncates the file to 0 and
 * writes it again, and drops them (fsync, then DONTNEED), and a streamer
 * fills the small cache with another inode's pages, so that reclaim frees
 * buffers all the time and hands them to that inode. Every word of a page
 * holds its stamp (inode, index, version): a copy that mixed two writes
 * shows two stamps, one of a buffer freed under it shows another page's
 * (or another page's zeros). A read that overlaps a truncate may show
 * zeros or the device's older data (a truncate drops the pages before it
 * lowers the size, and readers in between fill them again); any other
 * read shows the page's stamp, at a version no older than the last one
 * this reader saw.
 */
#define HR_PAGES 8u
#define HR_READERS 2
#define HR_ROUNDS 2000
#define HR_STREAM_PAGES 192u

struct hr {
	struct pwb_inode *hot, *cold;
	unsigned int truncating;	/* atomic: odd during a truncate */
	int stop;			/* atomic: the writer is done */
};

struct hr_arg {
	struct hr *h;
	uint64_t seed;
	long reads, torn, foreign, older;	/* bad copies, by kind */
	uint64_t word;				/* a bad copy's word */
};

static uint64_t hr_stamp(uint64_t ino, uint64_t index, uint64_t version)
{
	return ino << 56 | index << 40 | version;
}

static void hr_fill(uint64_t *b, uint64_t stamp)
{
	for (unsigned int i = 0; i < PS / 8; i++)
		b[i] = stamp;
}

/* Check one copy of page @idx, counting the kind of fault it shows. */
static void hr_check(struct hr_arg *a, const uint64_t *b, uint64_t idx,
		     bool in_truncate, uint64_t *seen)
{
	uint64_t v = b[0] & ((1ull << 40) - 1);

	for (unsigned int i = 1; i < PS / 8; i++)
		if (b[i] != b[0]) {
			a->torn++;
			a->word = b[i];
			return;
		}
	if (in_truncate && (b[0] == 0 || (b[0] & ~((1ull << 40) - 1)) ==
						 hr_stamp(1, idx, 0)))
		return;	/* zeros, or the device's data of the page */
	if ((b[0] & ~((1ull << 40) - 1)) != hr_stamp(1, idx, 0)) {
		a->foreign++;
		a->word = b[0];
	} else if (v < seen[idx]) {
		a->older++;
		a->word = b[0];
	} else {
		seen[idx] = v;
	}
}

static void *hr_reader(void *arg)
{
	struct hr_arg *a = arg;
	uint64_t *b = malloc(PS), seen[HR_PAGES] = { 0 };

	while (b && !__atomic_load_n(&a->h->stop, __ATOMIC_ACQUIRE)) {
		uint64_t idx = tu_rand(&a->seed) % HR_PAGES;
		unsigned int t0 = __atomic_load_n(&a->h->truncating,
						  __ATOMIC_ACQUIRE);
		ssize_t r = pwb_read(a->h->hot, b, PS, idx * PS);
		unsigned int t1 = __atomic_load_n(&a->h->truncating,
						  __ATOMIC_ACQUIRE);

		a->reads++;
		if (r == 0)
			continue;	/* truncated meanwhile: past the end */
		if (r != (ssize_t)PS) {
			a->foreign++;
			continue;
		}
		hr_check(a, b, idx, (t0 & 1) || t1 != t0, seen);
	}
	if (!b)
		a->foreign++;
	free(b);
	return NULL;
}

/* Another inode's pages through the whole cache, again and again. */
static void *hr_streamer(void *arg)
{
	struct hr_arg *a = arg;
	uint64_t *b = malloc(PS), v = 1;

	while (b && !__atomic_load_n(&a->h->stop, __ATOMIC_ACQUIRE)) {
		for (uint64_t i = 0; i < HR_STREAM_PAGES; i++) {
			hr_fill(b, hr_stamp(2, i, v));
			if (pwb_write(a->h->cold, b, PS, i * PS) != (ssize_t)PS)
				a->foreign++;
		}
		v++;
	}
	free(b);
	return NULL;
}

START_TEST(test_hit_copies_race_writes_truncates_and_reclaim)
{
	struct hr_arg r[HR_READERS], sa = { 0 };
	pthread_t rt[HR_READERS], st;
	struct hr h = { 0 };
	uint64_t *b = malloc(PS), version = 1, idx;
	long reads = 0;
	struct tu_env e;
	int i, round;

	/* 24 pages: the streamer's writes reclaim all the time. */
	env_open(&e, 2, 24 * PS);
	h.hot = open_lib(&e, 1, 0);
	h.cold = open_lib(&e, 2, 1);
	for (idx = 0; idx < HR_PAGES; idx++) {
		hr_fill(b, hr_stamp(1, idx, version++));
		ck_assert_int_eq(pwb_write(h.hot, b, PS, idx * PS), PS);
	}
	for (i = 0; i < HR_READERS; i++) {
		r[i] = (struct hr_arg){ .h = &h, .seed = 11 + (uint64_t)i };
		ck_assert_int_eq(pthread_create(&rt[i], NULL, hr_reader, &r[i]),
				 0);
	}
	sa.h = &h;
	ck_assert_int_eq(pthread_create(&st, NULL, hr_streamer, &sa), 0);
	for (round = 0; round < HR_ROUNDS; round++) {
		if (round % 8 == 7) {
			/* Cut every page off, then write them again from the
			 * start (the size grows with each, so no page below
			 * it reads as anything but its stamp). */
			__atomic_fetch_add(&h.truncating, 1, __ATOMIC_SEQ_CST);
			ck_assert_int_eq(pwb_inode_set_size(h.hot, 0), 0);
			__atomic_fetch_add(&h.truncating, 1, __ATOMIC_SEQ_CST);
		} else if (round % 8 == 3) {
			/* Clean, then dropped: their buffers go back. */
			ck_assert_int_eq(pwb_fsync(h.hot), 0);
			ck_assert_int_eq(pwb_fadvise(h.hot, 0, HR_PAGES * PS,
						     PWB_FADV_DONTNEED),
					 0);
			continue;
		}
		for (idx = 0; idx < HR_PAGES; idx++) {
			hr_fill(b, hr_stamp(1, idx, version++));
			ck_assert_int_eq(pwb_write(h.hot, b, PS, idx * PS),
					 PS);
		}
	}
	__atomic_store_n(&h.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < HR_READERS; i++)
		pthread_join(rt[i], NULL);
	pthread_join(st, NULL);
	for (i = 0; i < HR_READERS; i++) {
		ck_assert_msg(!r[i].torn && !r[i].foreign && !r[i].older,
			      "reader %d, %ld reads: %ld torn copies, %ld of "
			      "another page, %ld older than one seen before "
			      "(a word 0x%llx)",
			      i, r[i].reads, r[i].torn, r[i].foreign,
			      r[i].older, (unsigned long long)r[i].word);
		reads += r[i].reads;
	}
	ck_assert_int_eq(sa.foreign, 0);
	ck_assert_int_gt(reads, HR_ROUNDS);
	ck_assert_int_eq(pwb_inode_close(h.cold), 0);
	ck_assert_int_eq(pwb_inode_close(h.hot), 0);
	tu_env_close(&e);
	free(b);
}
END_TEST

/* Threads reading the same cold pages at once: each may find a page
 * another one just inserted into the inode's page table. (Under TSan the
 * table's match function reads the new page's index: it needs the acquire
 * that pairs with the release before cds_lfht_add_unique().) */
#define CR_PAGES 64u
#define CR_THREADS 4

struct cr_arg {
	struct pwb_inode *inode;
	const unsigned char *ref;
	pthread_barrier_t *start;
	long bad;
};

static void *cr_main(void *arg)
{
	struct cr_arg *a = arg;
	unsigned char *buf = malloc(CR_PAGES * PS);

	pthread_barrier_wait(a->start);
	if (!buf || pwb_read(a->inode, buf, CR_PAGES * PS, 0) !=
			    (ssize_t)(CR_PAGES * PS) ||
	    memcmp(buf, a->ref, CR_PAGES * PS))
		a->bad++;
	free(buf);
	return NULL;
}

START_TEST(test_concurrent_cold_reads)
{
	unsigned char *ref = malloc(CR_PAGES * PS);
	struct cr_arg a[CR_THREADS];
	pthread_t t[CR_THREADS];
	pthread_barrier_t start;
	struct pwb_inode *inode;
	uint64_t seed = 7;
	struct tu_env e;
	int round, i;

	env_open(&e, 2, 0);
	fill_rand(&seed, ref, CR_PAGES * PS);
	write_and_close(open_lib(&e, 1, 0), ref, CR_PAGES);
	for (round = 0; round < 20; round++) {
		/* Reopened: nothing cached. */
		inode = open_lib(&e, 1, 0);
		ck_assert_int_eq(pwb_inode_set_size(inode, CR_PAGES * PS), 0);
		pthread_barrier_init(&start, NULL, CR_THREADS);
		for (i = 0; i < CR_THREADS; i++) {
			a[i] = (struct cr_arg){ .inode = inode, .ref = ref,
						.start = &start };
			ck_assert_int_eq(pthread_create(&t[i], NULL, cr_main,
							&a[i]), 0);
		}
		for (i = 0; i < CR_THREADS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		for (i = 0; i < CR_THREADS; i++)
			ck_assert_int_eq(a[i].bad, 0);
		ck_assert_int_eq(pwb_inode_close(inode), 0);
	}
	tu_env_close(&e);
	free(ref);
}
END_TEST

/*
 * A large read of pages not cached fills them in runs, one device read
 * per run of up to 64 pages the device holds one after another: a cached
 * page ends a run (and keeps its data), the end of the file ends the last
 * one (the rest of its page reads as zeros), and pages the map scatters
 * are read one by one, each from its own block.
 */
#define RUN_PAGES 200u

/* Page i at block i ^ 7 of the quarter: no two neighbours adjacent. */
static int scatter_map(struct pwb_inode *inode, uint64_t index,
		       uint64_t *dev_off)
{
	return quarter_map(inode, index, index ^ 7, dev_off);
}

static const struct pwb_inode_ops scatter_ops = { .map_page = scatter_map };

static void read_stats(struct tu_env *e, uint64_t *ios, uint64_t *pages)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e->bdi, &st), 0);
	*ios = st.read_ios;
	*pages = st.read_pages;
}

START_TEST(test_large_read_fills_runs_with_one_device_read)
{
	const uint64_t size = RUN_PAGES * PS - 100;
	unsigned char *ref = malloc(RUN_PAGES * PS);
	unsigned char *buf = malloc(RUN_PAGES * PS);
	uint64_t seed = 11, ios0, pages0, ios, pages;
	struct pwb_inode *inode;
	void *base2 = (void *)(uintptr_t)(2ull * (IMG_PAGES / 4) * PS);
	struct tu_env e;

	env_open(&e, 2, 0);
	fill_rand(&seed, ref, RUN_PAGES * PS);
	write_and_close(open_lib(&e, 1, 1), ref, RUN_PAGES);

	/* Reopened, nothing cached, the file 100 bytes short of the data
	 * on the device; page 100 cached and dirtied by a small write
	 * (which fills it first: one read of one page). */
	inode = open_lib(&e, 1, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, size), 0);
	ck_assert_int_eq(pwb_write(inode, "0123456789", 10, 100 * PS + 5), 10);
	memcpy(ref + 100 * PS + 5, "0123456789", 10);
	read_stats(&e, &ios0, &pages0);
	ck_assert_int_eq(pwb_read(inode, buf, RUN_PAGES * PS, 0),
			 (ssize_t)size);
	ck_assert(!memcmp(buf, ref, size));
	read_stats(&e, &ios, &pages);
	/* Pages 0-99, then 101-199, in runs of PWB__READ_IO_MAX pages and
	 * a shorter last one (64: 2 + 2 reads). */
	ck_assert_uint_eq(pages - pages0, RUN_PAGES - 1);
	ck_assert_uint_eq(ios - ios0,
			  (100 + PWB__READ_IO_MAX - 1) / PWB__READ_IO_MAX +
			  (99 + PWB__READ_IO_MAX - 1) / PWB__READ_IO_MAX);
	/* The last page's bytes past the old end read as zeros. */
	ck_assert_int_eq(pwb_inode_set_size(inode, RUN_PAGES * PS), 0);
	ck_assert_int_eq(pwb_read(inode, buf, 100, size), 100);
	for (unsigned int i = 0; i < 100; i++)
		ck_assert_uint_eq(buf[i], 0);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);

	/* Scattered blocks: one read per page, each page its own data. */
	ck_assert_int_eq(pwb_inode_open(e.bdi, 2, &scatter_ops, base2, &inode),
			 0);
	write_and_close(inode, ref, RUN_PAGES);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 2, &scatter_ops, base2, &inode),
			 0);
	ck_assert_int_eq(pwb_inode_set_size(inode, RUN_PAGES * PS), 0);
	read_stats(&e, &ios0, &pages0);
	ck_assert_int_eq(pwb_read(inode, buf, RUN_PAGES * PS, 0),
			 (ssize_t)(RUN_PAGES * PS));
	ck_assert(!memcmp(buf, ref, RUN_PAGES * PS));
	read_stats(&e, &ios, &pages);
	ck_assert_uint_eq(ios - ios0, RUN_PAGES);
	ck_assert_uint_eq(pages - pages0, RUN_PAGES);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
	free(ref);
	free(buf);
}
END_TEST

/*
 * The page index's hash: a run of consecutive pages (what a sequential
 * reader streams through and the cache holds) takes one bucket each (an
 * aligned block of 4096) or at most two, so a look-up walks a chain of
 * one or two; pages at a stride of a power of two still spread over the
 * buckets.
 */
START_TEST(test_page_hash_spreads_runs)
{
	enum { BUCKETS = 4096 };
	static unsigned int chain[BUCKETS];
	const uint64_t starts[] = { 0, 1, 4095, 4096, 12345, 1ull << 20,
				    (1ull << 40) + 777 };
	unsigned int most;

	for (unsigned int s = 0; s < sizeof(starts) / sizeof(starts[0]);
	     s++) {
		bool aligned = !(starts[s] % BUCKETS);

		memset(chain, 0, sizeof(chain));
		for (uint64_t i = 0; i < BUCKETS; i++) {
			unsigned long h = pwb__page_hash(starts[s] + i);

			/* One block of 4096: one a bucket; across two: the
			 * pages of each block one a bucket. */
			ck_assert_uint_le(++chain[h & (BUCKETS - 1)],
					  aligned ? 1 : 2);
		}
	}
	/* Strides of 2^12 .. 2^20 pages, 4096 pages each, over 512
	 * buckets (8 a bucket on average): no chain of more than 32. */
	for (unsigned int k = 12; k <= 20; k += 4) {
		memset(chain, 0, sizeof(chain));
		most = 0;
		for (uint64_t i = 0; i < BUCKETS; i++) {
			unsigned long h = pwb__page_hash(i << k);
			unsigned int c = ++chain[h & 511];

			most = c > most ? c : most;
		}
		ck_assert_uint_le(most, 32);
	}
}
END_TEST

static Suite *pcache_suite(void)
{
	Suite *s = suite_create("pcache");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_unaligned_rw);
	tcase_add_test(tc, test_read_past_size);
	tcase_add_test(tc, test_partial_page_read_first);
	tcase_add_test(tc, test_truncate);
	tcase_add_test(tc, test_stable_pages);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_small_cache);
	tcase_add_test(tc, test_cache_prefault_maps_the_whole_cache_at_open);
	tcase_add_test(tc, test_reclaim_per_context);
	tcase_add_test(tc, test_full_cache_timeout);
	tcase_add_test(tc, test_background_writeback_starts_at_half_the_cache);
	tcase_add_test(tc, test_pages_read_from_device_are_reclaimed);
	tcase_add_test(tc, test_mt_stress);
	tcase_add_test(tc, test_concurrent_cold_reads);
	tcase_add_test(tc, test_hit_copies_race_writes_truncates_and_reclaim);
	tcase_add_test(tc, test_large_read_fills_runs_with_one_device_read);
	tcase_add_test(tc, test_close_does_not_wait_for_a_grace_period);
	tcase_add_test(tc, test_page_hash_spreads_runs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(pcache_suite(), true);
}
