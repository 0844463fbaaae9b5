// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_folio.c - large folios of library-owned pages (issue 26): a write
 * of whole aligned runs makes one folio; everything that cuts one (a
 * truncate, a discard), drops one (reclaim, advice, PWB_RW_DONTCACHE) or
 * writes part of one keeps every page's data and state exact.
 *
 * The inodes map page i to device byte i * page_size (a real image file
 * opened O_DIRECT), so the device can be checked with plain reads.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PS 4096u
#define IMG_PAGES 1024u
#define RUN 64u			/* pages of the folios written here */

static struct tu_env e;
static struct pwb_inode *inode;
static unsigned char ref[IMG_PAGES * PS];	/* what the file holds */
static unsigned char buf[IMG_PAGES * PS] __attribute__((aligned(PS)));

static uint64_t cache_bytes;		/* 0: the default */

static void setup(void)
{
	tu_env_config(&e, 1, "psync");
	e.cfg.cache_bytes = cache_bytes;
	/* Pages are written when a test says (reclaim's test keeps a page
	 * dirty). */
	e.cfg.dirty_background_bytes = 0;
	tu_env_open(&e, IMG_PAGES);
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &inode),
			 0);
}

static void teardown(void)
{
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}

/* Write @len bytes at @off, in the model too: @v mixed with each byte's
 * offset, so that a page's data in another page's place shows. */
static void put(uint64_t off, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		ref[off + i] = (unsigned char)(v ^ ((off + i) / PS * 13) ^
					       ((off + i) % 251));
	ck_assert_int_eq(pwb_write(inode, ref + off, len, off), (ssize_t)len);
}

/* The entry of the index holding page @index (a page or a folio). */
static const struct pwb__page *entry(uint64_t index)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	const struct pwb__page *p;

	rcu_read_lock();
	p = pwb__pcache_lookup_rcu(pc->pages, pwb__aread(&pc->orders), index);
	rcu_read_unlock();
	return p;
}

static unsigned int order_of(uint64_t index)
{
	const struct pwb__page *p = entry(index);

	ck_assert_ptr_nonnull(p);
	return p->order;
}

static uint64_t cache_pages(void)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	return st.cache_pages;
}

static uint64_t splits(void)
{
	return pwb__aread(&e.bdi->pcache->folio_splits);
}

/* The file reads as the model says, [0, @size). */
static void check_reads(uint64_t size)
{
	memset(buf, 0x11, size);
	ck_assert_int_eq(pwb_read(inode, buf, size, 0), (ssize_t)size);
	ck_assert(!memcmp(buf, ref, size));
}

/* The device holds the model's bytes [off, off + len). */
static void check_device(uint64_t off, size_t len)
{
	ck_assert_int_eq(tu_read_device(e.img, off, buf, (unsigned int)len),
			 0);
	ck_assert(!memcmp(buf, ref + off, len));
}

/* A whole aligned run is one folio: one entry, one charge, read and
 * written back right; a 4 KiB write and a misaligned run stay single
 * pages. */
START_TEST(whole_run_is_one_folio)
{
	put(0, RUN * PS, 0xa1);
	ck_assert_uint_eq(order_of(0), 6);
	ck_assert_ptr_eq(entry(0), entry(RUN - 1));
	ck_assert_uint_eq(cache_pages(), RUN);
	ck_assert_uint_eq(pwb__aread(&inode->pcache->nr_small), 0);
	for (unsigned int i = 0; i < RUN; i++)
		ck_assert_int_eq(pwb_page_state(inode, i), PWB_PAGE_DIRTY);
	put(RUN * PS, PS, 0xa2);
	ck_assert_uint_eq(order_of(RUN), 0);
	/* Misaligned: no folio starts at an odd page. */
	put((2 * RUN + 1) * PS, 20 * PS, 0xa3);
	ck_assert_uint_eq(order_of(2 * RUN + 1), 0);
	check_reads((2 * RUN + 21) * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, (2 * RUN + 21) * PS);
	ck_assert_uint_eq(splits(), 0);
}
END_TEST

/* A write into part of a folio changes those pages only, dirties them
 * only, and does not split it. */
START_TEST(partial_overwrite_keeps_pages_exact)
{
	put(0, RUN * PS, 0xb1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	put(7 * PS + 10, 100, 0xb2);
	put(40 * PS, 2 * PS, 0xb3);
	for (unsigned int i = 0; i < RUN; i++)
		ck_assert_int_eq(pwb_page_state(inode, i),
				 i == 7 || i == 40 || i == 41 ? PWB_PAGE_DIRTY
							       : 0);
	ck_assert_uint_eq(order_of(7), 6);
	check_reads(RUN * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, RUN * PS);
	ck_assert_uint_eq(splits(), 0);
}
END_TEST

/* A truncate in the middle of a dirty folio: its pages below the size
 * stay cached and dirty with their data, those above leave; the device
 * gets the kept ones. */
START_TEST(truncate_in_the_middle_splits)
{
	uint64_t size = 20 * PS + 100;

	put(0, RUN * PS, 0xc1);
	ck_assert_int_eq(pwb_inode_set_size(inode, size), 0);
	ck_assert_uint_eq(splits(), 1);
	ck_assert_uint_eq(order_of(0), 0);
	ck_assert_uint_eq(order_of(20), 0);
	ck_assert_ptr_null(entry(21));
	ck_assert_ptr_null(entry(RUN - 1));
	ck_assert_uint_eq(cache_pages(), 21);
	ck_assert_int_eq(pwb_page_state(inode, 19), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_page_state(inode, 30), 0);
	memset(ref + size, 0, RUN * PS - size);
	check_reads(size);
	/* Grown again: zeros past the old size. */
	ck_assert_int_eq(pwb_inode_set_size(inode, RUN * PS), 0);
	check_reads(RUN * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, 21 * PS);
}
END_TEST

/* A discard of pages in the middle of a folio drops those pages only:
 * the others keep their newer, dirty data. */
START_TEST(discard_in_the_middle_splits)
{
	put(0, RUN * PS, 0xd1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	put(0, RUN * PS, 0xd2);		/* into the folio: all dirty */
	ck_assert_uint_eq(order_of(0), 6);
	ck_assert_int_eq(pwb_inode_discard(inode, 16 * PS, 16 * PS), 0);
	ck_assert_uint_eq(splits(), 1);
	for (unsigned int i = 0; i < RUN; i++) {
		if (i >= 16 && i < 32) {
			ck_assert_ptr_null(entry(i));
			continue;
		}
		ck_assert_uint_eq(order_of(i), 0);
		ck_assert_int_eq(pwb_page_state(inode, i), PWB_PAGE_DIRTY);
	}
	ck_assert_uint_eq(cache_pages(), RUN - 16);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, 16 * PS);
	check_device(32 * PS, 32 * PS);
	memcpy(buf, ref, 16 * PS);
	ck_assert_int_eq(pwb_read(inode, buf, 16 * PS, 0), 16 * PS);
	ck_assert(!memcmp(buf, ref, 16 * PS));
}
END_TEST

/* Advice to drop a folio with one dirty page leaves it whole; once all
 * of it is clean it goes whole. Advice over part of it leaves it. */
START_TEST(drop_only_when_all_clean)
{
	put(0, RUN * PS, 0xe1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	put(63 * PS, PS, 0xe2);
	ck_assert_int_eq(pwb_fadvise(inode, 0, RUN * PS, PWB_FADV_DONTNEED),
			 0);
	ck_assert_uint_eq(cache_pages(), RUN);
	check_reads(RUN * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_fadvise(inode, 0, 32 * PS, PWB_FADV_DONTNEED),
			 0);
	ck_assert_uint_eq(cache_pages(), RUN);
	ck_assert_int_eq(pwb_fadvise(inode, 0, RUN * PS, PWB_FADV_DONTNEED),
			 0);
	ck_assert_uint_eq(cache_pages(), 0);
	ck_assert_uint_eq(splits(), 0);
	check_reads(RUN * PS);		/* from the device */
}
END_TEST

/* A PWB_RW_DONTCACHE write into a cached folio: once written, the folio
 * leaves whole (no page of it is left behind, none split off). */
START_TEST(dontcache_write_drops_the_folio)
{
	struct timespec t0, t;

	put(0, RUN * PS, 0xf1);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ref[10 * PS] ^= 0xff;
	ck_assert_int_eq(pwb_write2(inode, ref + 10 * PS, PS, 10 * PS,
				    PWB_RW_DONTCACHE),
			 PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (cache_pages()) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(cache_pages(), 0);
	ck_assert_uint_eq(splits(), 0);
	check_device(0, RUN * PS);
	check_reads(RUN * PS);
}
END_TEST

static void setup_two_folios(void)
{
	cache_bytes = 2 * RUN * PS;
	setup();
}

/* Reclaim frees a folio whole, and only once no page of it is dirty: in
 * a cache of two folios, both written back, then one page of the second
 * dirtied, reclaim (the flusher's, or the one asked here) frees the
 * first and keeps the second. */
START_TEST(reclaim_takes_whole_clean_folios)
{
	put(0, RUN * PS, 0x71);
	put(RUN * PS, RUN * PS, 0x72);
	ck_assert_uint_eq(order_of(RUN), 6);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	put(RUN * PS + 5 * PS, PS, 0x73);	/* the second one dirty */
	pwb__pcache_reclaim_ctx(e.bdi, 0);
	pwb__pcache_reclaim_ctx(e.bdi, 0);
	ck_assert_ptr_null(entry(0));
	ck_assert_uint_eq(order_of(RUN), 6);
	ck_assert_uint_eq(cache_pages(), RUN);
	check_reads(2 * RUN * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, 2 * RUN * PS);
}
END_TEST

/*
 * A cache of four folios of 16 pages, all dirty and then in one write the
 * device holds (a fault rule); a writer of a fifth folio finds no room and
 * nothing clean. It waits for the write to end, as a single page's writer
 * does, and then makes the folio: before, it wrote the 16 pages one by one
 * (a stream into a full cache left single pages behind it).
 */
#define SMALL 16u			/* pages of the folios here */
#define HOLD_MS 3000u			/* the held write: real time */

static void setup_four_small(void)
{
	cache_bytes = 4 * SMALL * PS;
	setup();
}

static uint64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_1ms(void)
{
	struct timespec ts = { 0, 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t cache_full_waits(void)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	return st.blocked_events[PWB_BLOCK_CACHE_FULL];
}

static ssize_t fifth_ret;

static void *write_fifth(void *arg)
{
	(void)arg;
	fifth_ret = pwb_write(inode, ref + 4 * SMALL * PS, SMALL * PS,
			      4 * SMALL * PS);
	return NULL;
}

START_TEST(full_cache_writer_waits_for_a_folio)
{
	struct pwb_fault f;
	pthread_t t;
	uint64_t t0, hits = 0, waits0;
	unsigned int i;

	for (i = 0; i < 4; i++)
		put((uint64_t)i * SMALL * PS, SMALL * PS, (unsigned char)i);
	ck_assert_uint_eq(order_of(0), 4);
	ck_assert_uint_eq(cache_pages(), 4 * SMALL);
	/* Hold the first write (all four folios: one extent). */
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_DELAY;
	f.every = 1;
	f.delay_ms = HOLD_MS;
	f.max_hits = 1;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_bdi_writeback(e.bdi, PWB_WB_ALL, 0), 0);
	t0 = real_ms();
	while (!hits && real_ms() - t0 < 10000) {
		ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
		sleep_1ms();
	}
	ck_assert_uint_eq(hits, 1);
	ck_assert(pwb_page_state(inode, 0) & PWB_PAGE_WRITEBACK);
	/* The fifth folio's writer waits for room... */
	for (i = 0; i < SMALL * PS; i++)
		ref[4 * SMALL * PS + i] = (unsigned char)(0x55 ^ (i % 253));
	waits0 = cache_full_waits();
	ck_assert_int_eq(pthread_create(&t, NULL, write_fifth, NULL), 0);
	t0 = real_ms();
	while (cache_full_waits() == waits0 && real_ms() - t0 < 10000)
		sleep_1ms();
	ck_assert_uint_gt(cache_full_waits(), waits0);
	/* ...while the write is still held (else this says nothing). */
	ck_assert(pwb_page_state(inode, 0) & PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(fifth_ret, (ssize_t)(SMALL * PS));
	/* ...and then writes one folio, not sixteen pages. */
	ck_assert_uint_eq(order_of(4 * SMALL), 4);
	ck_assert_uint_eq(pwb__aread(&inode->pcache->nr_small), 0);
	ck_assert_uint_le(cache_pages(), 4 * SMALL);
	check_reads(5 * SMALL * PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	check_device(0, 5 * SMALL * PS);
}
END_TEST

static Suite *folio_suite(void)
{
	Suite *s = suite_create("folio");
	TCase *tc = tcase_create("folio");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, whole_run_is_one_folio);
	tcase_add_test(tc, partial_overwrite_keeps_pages_exact);
	tcase_add_test(tc, truncate_in_the_middle_splits);
	tcase_add_test(tc, discard_in_the_middle_splits);
	tcase_add_test(tc, drop_only_when_all_clean);
	tcase_add_test(tc, dontcache_write_drops_the_folio);
	suite_add_tcase(s, tc);
	tc = tcase_create("reclaim");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup_two_folios, teardown);
	tcase_add_test(tc, reclaim_takes_whole_clean_folios);
	suite_add_tcase(s, tc);
	tc = tcase_create("full cache");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup_four_small, teardown);
	tcase_add_test(tc, full_cache_writer_waits_for_a_folio);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(folio_suite(), true);
}
