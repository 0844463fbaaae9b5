// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_pcache_mem.c - the memory the page cache maps stays near
 * cache_bytes
 *
 * The page buffers of library-owned inodes come from a pool of 2 MiB
 * chunks (pcache-pool.c). Buffers in use never exceed cache_bytes (each
 * page is charged before it gets one), but a freed page's buffer must be
 * back in the pool before the writer that takes its room asks for one, or
 * the pool maps a new chunk. These tests churn a small cache the ways
 * pages leave it (reclaim of a full cache, close, truncate, a streaming
 * writer beside them, reads that fill pages from the device) and check
 * the pool's chunks against cache_bytes plus one chunk per thread that
 * allocates pages: the slack the pool can honestly promise, since two
 * threads may each find the free lists empty and map a chunk at once,
 * and a folio that finds the free pages scattered maps one too.
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

#define PS TU_PS
#define CACHE (16ull << 20)		/* 8 chunks */
#define IMG_PAGES 8192u			/* 32 MiB of device */
#define FILE_BYTES (4ull << 20)		/* each churned inode */
#define NR_FILES 8u			/* 32 MiB written per round */
#define STREAM_BYTES (24ull << 20)	/* the streamer's file, rewritten */
#define ROUNDS 4u
/* Threads that allocate pages: the churning test thread and the
 * streamer. */
#define WRITERS 2u

/* Inodes share the device: page i of inode ino lands at a page of the
 * image chosen by both (the tests read nothing back from it but to fill
 * pages). */
static int wrap_map(struct pwb_inode *inode, uint64_t index,
		    uint64_t *dev_off)
{
	uint64_t ino = pwb_inode_ino(inode);

	*dev_off = ((ino * 613 + index) % IMG_PAGES) * PS;
	return 0;
}

static const struct pwb_inode_ops wrap_ops = { .map_page = wrap_map };

static struct pwb_inode *open_ino(struct pwb_bdi *bdi, uint64_t ino)
{
	struct pwb_inode *inode = NULL;

	ck_assert_int_eq(pwb_inode_open(bdi, ino, &wrap_ops, NULL, &inode),
			 0);
	return inode;
}

struct streamer {
	struct pwb_bdi *bdi;
	const unsigned char *src;
	int stop;		/* __atomic: set by the test thread */
	int err;		/* first failure, 0: none */
	uint64_t bytes;
};

/* A sequential writer of 64 KiB at a time that truncates its file to 0
 * each time it reaches STREAM_BYTES (so its pages leave the cache by
 * truncate as well as by reclaim). Records its first error. */
static void *stream_main(void *arg)
{
	struct streamer *s = arg;
	struct pwb_inode *inode = NULL;
	uint64_t off = 0;
	int ret;

	ret = pwb_inode_open(s->bdi, 1000, &wrap_ops, NULL, &inode);
	if (ret) {
		s->err = ret;
		return NULL;
	}
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		ssize_t n = pwb_write(inode, s->src, 64 << 10, off);

		if (n != 64 << 10) {
			s->err = n < 0 ? (int)n : -EIO;
			break;
		}
		s->bytes += (uint64_t)n;
		off += (uint64_t)n;
		if (off >= STREAM_BYTES) {
			ret = pwb_inode_set_size(inode, 0);
			if (ret) {
				s->err = ret;
				break;
			}
			off = 0;
		}
	}
	ret = pwb_inode_close(inode);
	if (ret && !s->err)
		s->err = ret;
	return NULL;
}

/* Write FILE_BYTES to @inode from 0: 64 KiB writes (folios) in the first
 * half, 4 KiB ones (single pages) in the second. */
static void write_file(struct pwb_inode *inode, const unsigned char *src)
{
	uint64_t off;

	for (off = 0; off < FILE_BYTES / 2; off += 64 << 10)
		ck_assert_int_eq(pwb_write(inode, src, 64 << 10, off),
				 64 << 10);
	for (; off < FILE_BYTES; off += PS)
		ck_assert_int_eq(pwb_write(inode, src, PS, off), PS);
}

/*
 * Churn a cache of CACHE bytes on @backend and return the most chunks its
 * pool mapped, checked after every step.
 */
static uint64_t churn(const char *backend)
{
	unsigned char *src = malloc(64 << 10), *buf = malloc(1 << 20);
	struct streamer s;
	struct tu_env e;
	pthread_t t;
	uint64_t max = 0, seed = 5, n;
	unsigned int r, i;

	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < 64 << 10; i++)
		src[i] = (unsigned char)tu_rand(&seed);
	tu_env_config(&e, 2, backend);
	e.cfg.cache_bytes = CACHE;
	tu_env_open(&e, IMG_PAGES);
	memset(&s, 0, sizeof(s));
	s.bdi = e.bdi;
	s.src = src;
	ck_assert_int_eq(pthread_create(&t, NULL, stream_main, &s), 0);

#define SAMPLE()                                                               \
	do {                                                                   \
		n = tu_pool_chunks(e.bdi);                                     \
		if (n > max)                                                   \
			max = n;                                               \
	} while (0)

	for (r = 0; r < ROUNDS; r++) {
		/* Fill the cache past its size, closing each file: its pages
		 * go at the close. */
		for (i = 0; i < NR_FILES; i++) {
			struct pwb_inode *inode = open_ino(e.bdi, i);

			write_file(inode, src);
			SAMPLE();
			ck_assert_int_eq(pwb_inode_close(inode), 0);
			SAMPLE();
		}
		/* Reopen: read a MiB back (pages filled from the device),
		 * truncate, write again, close. */
		for (i = 0; i < NR_FILES; i++) {
			struct pwb_inode *inode = open_ino(e.bdi, i);

			ck_assert_int_eq(pwb_inode_set_size(inode, FILE_BYTES),
					 0);
			ck_assert_int_eq(pwb_read(inode, buf, 1 << 20, 0),
					 1 << 20);
			SAMPLE();
			ck_assert_int_eq(pwb_inode_set_size(inode, 1 << 20),
					 0);
			SAMPLE();
			write_file(inode, src);
			SAMPLE();
			ck_assert_int_eq(pwb_inode_set_size(inode, 0), 0);
			SAMPLE();
			ck_assert_int_eq(pwb_inode_close(inode), 0);
			SAMPLE();
		}
	}
#undef SAMPLE
	__atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(s.err == 0, "streamer: %s", pwb_strerror(s.err));
	ck_assert_uint_gt(s.bytes, 0);
	n = tu_pool_chunks(e.bdi);
	if (n > max)
		max = n;
	printf("%s: cache %llu MiB, pool mapped %llu chunks of 2 MiB at most "
	       "(bound %llu + %u), streamer wrote %llu MiB\n",
	       backend, (unsigned long long)(CACHE >> 20),
	       (unsigned long long)max,
	       (unsigned long long)(CACHE / PWB__PCACHE_CHUNK_BYTES), WRITERS,
	       (unsigned long long)(s.bytes >> 20));
	fflush(stdout);
	tu_env_close(&e);
	free(src);
	free(buf);
	return max;
}

static void check_bound(uint64_t chunks)
{
	ck_assert_msg(chunks * PWB__PCACHE_CHUNK_BYTES <=
			      CACHE + WRITERS * PWB__PCACHE_CHUNK_BYTES,
		      "the pool mapped %llu chunks of 2 MiB for a cache of "
		      "%llu MiB (at most %llu + %u allowed)",
		      (unsigned long long)chunks,
		      (unsigned long long)(CACHE >> 20),
		      (unsigned long long)(CACHE / PWB__PCACHE_CHUNK_BYTES),
		      WRITERS);
}

/* On the null backend writes end at once: pages leave the cache as fast
 * as they can, the grace periods are the slowest part. */
START_TEST(test_churn_null_stays_within_cache_bytes)
{
	check_bound(churn("null"));
}
END_TEST

/* On a real file, with writes that take time. */
START_TEST(test_churn_file_stays_within_cache_bytes)
{
	check_bound(churn("psync"));
}
END_TEST

static Suite *pcache_mem_suite(void)
{
	Suite *s = suite_create("pcache_mem");
	TCase *tc = tcase_create("bound");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_churn_null_stays_within_cache_bytes);
	tcase_add_test(tc, test_churn_file_stays_within_cache_bytes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(pcache_mem_suite(), true);
}
