// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_datapath.c - the data path (issue 12) against a reference model
 *
 * Many inodes with library-owned pages, written through pwb_write() by
 * DP_THREADS threads at random offsets and lengths (unaligned, across page
 * boundaries, small and large), each thread owning a disjoint set of
 * inodes so that a plain byte array per inode is an exact model.
 * pwb_read() checks ranges during the run (read-your-writes); then
 * pwb_sync(), every inode is closed and opened again (the cache is gone),
 * and everything is read back and compared with the model; then the bdi
 * itself is closed and opened again, the inodes restored from what the
 * application saved (sizes, and in allocator mode the extent lists of
 * pwb_inode_extents() loaded with pwb_inode_set_extents()), and read back
 * once more. The device itself is checked too: at the identity offsets in
 * user-map mode, through the extent lists in allocator mode.
 *
 * Variants: 1, 2 and 8 contexts; a cache_bytes far below the data; and a
 * thread that keeps re-sharding (1, 2, 8 contexts) and switching policy
 * (alloc-group, region, inode-hash) during the writes.
 *
 * Built twice: tests/check_datapath (user-map mode: get_page NULL, an
 * identity map_page into a fixed region per inode) and
 * tests/check_datapath_alloc (-DDP_ALLOC=1: get_page and map_page NULL,
 * the built-in allocator, plus a device filled to ENOSPC). Each exits 77 when the library lacks the data
 * path. The seed is printed; PWB_DP_SEED=N reproduces a run.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DP_ALLOC
#define DP_ALLOC 0
#endif

#define PS 4096u
#define DP_THREADS 4u
#define DP_INODES 16u
#define DP_FILE_MAX (1024u * 1024u)	/* bytes an inode may reach */
#define DP_OPS 1500u			/* per thread */
#define MiB (1024ull * 1024)
#define DP_SMALL_CACHE_BYTES (1 * MiB)

struct dp_file {
	uint64_t ino;
	uint64_t base;		/* user-map mode: device offset of page 0 */
	uint8_t *model;		/* DP_FILE_MAX bytes, zero past size */
	uint64_t size;		/* the model's size */
	struct pwb_inode *inode;
	struct pwb_extent *ext;	/* allocator mode: saved at bdi close */
	size_t nr_ext;
};

struct dp_run {
	struct pwb_bdi_config cfg;
	char *img;
	struct pwb_bdi *bdi;
	struct dp_file f[DP_INODES];
	uint64_t seed;
	int stop;		/* atomic: the re-shard thread stops */
	unsigned int reshards;	/* re-shards and policy switches made */
	uint64_t peak_cache;	/* the sampler's: most cache_pages seen */
	unsigned int samples;
	int reshard_err;	/* first unexpected error of the re-sharder */
};

/* A worker's first failure, reported by the main thread after the join
 * (no ck_assert from a worker). */
struct dp_worker {
	struct dp_run *r;
	unsigned int idx;
	uint64_t seed;
	pthread_t tid;
	char fail[256];
	uint64_t writes, reads, bytes;
};

static int dp_map_page(struct pwb_inode *inode, uint64_t index,
		       uint64_t *dev_off)
{
	const struct dp_file *f = pwb_inode_priv(inode);

	*dev_off = f->base + index * PS;
	return 0;
}

static const struct pwb_inode_ops dp_ops = {
	.map_page = DP_ALLOC ? NULL : dp_map_page,
};

static uint64_t dp_seed(void)
{
	const char *s = getenv("PWB_DP_SEED");
	struct timespec ts;

	if (s && *s)
		return strtoull(s, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec ^
	       ((uint64_t)getpid() << 32);
}

/* A random length: mostly small and unaligned, some crossing one page
 * boundary, some of several pages, a few large. */
static void dp_pick(uint64_t *s, uint64_t *off, uint64_t *len)
{
	uint64_t r = tu_rand(s) % 100, o, l;

	if (r < 40) {			/* small, anywhere */
		l = 1 + tu_rand(s) % 300;
		o = tu_rand(s) % DP_FILE_MAX;
	} else if (r < 65) {		/* across a page boundary */
		l = 2 + tu_rand(s) % (2 * PS);
		o = (tu_rand(s) % (DP_FILE_MAX / PS)) * PS;
		o = o > l / 2 ? o - l / 2 : 0;
	} else if (r < 80) {		/* whole aligned pages */
		l = (1 + tu_rand(s) % 8) * PS;
		o = (tu_rand(s) % (DP_FILE_MAX / PS)) * PS;
	} else if (r < 97) {		/* several pages, unaligned */
		l = 1 + tu_rand(s) % (6 * PS);
		o = tu_rand(s) % DP_FILE_MAX;
	} else {			/* large */
		l = 64 * 1024 + tu_rand(s) % (256 * 1024);
		o = tu_rand(s) % DP_FILE_MAX;
	}
	if (o >= DP_FILE_MAX)
		o = DP_FILE_MAX - 1;
	if (o + l > DP_FILE_MAX)
		l = DP_FILE_MAX - o;
	*off = o;
	*len = l;
}

/* pwb_read of [off, off + len) against the model; 0 or a message in
 * @fail. Past the size: a short count, 0 at or after it. */
static int dp_check_read(struct dp_file *f, uint64_t off, uint64_t len,
			 uint8_t *buf, char *fail, size_t n)
{
	uint64_t want = off >= f->size ? 0
				       : TU_MIN(len, f->size - off);
	ssize_t got = pwb_read(f->inode, buf, len, off);
	uint64_t i;

	if (got < 0) {
		snprintf(fail, n, "pwb_read(ino %" PRIu64 ", off %" PRIu64
			 ", len %" PRIu64 "): %s", f->ino, off, len,
			 strerror((int)-got));
		return -1;
	}
	if ((uint64_t)got != want) {
		snprintf(fail, n, "pwb_read(ino %" PRIu64 ", off %" PRIu64
			 ", len %" PRIu64 ") = %zd, model says %" PRIu64
			 " (size %" PRIu64 ")", f->ino, off, len, got, want,
			 f->size);
		return -1;
	}
	if (memcmp(buf, f->model + off, want)) {
		for (i = 0; i < want && buf[i] == f->model[off + i]; i++)
			;
		snprintf(fail, n, "ino %" PRIu64 " byte %" PRIu64
			 ": read %#x, model %#x (read at %" PRIu64 " len %"
			 PRIu64 ", size %" PRIu64 ")", f->ino, off + i,
			 buf[i], f->model[off + i], off, len, f->size);
		return -1;
	}
	return 0;
}

static void *dp_worker_fn(void *arg)
{
	struct dp_worker *w = arg;
	struct dp_run *r = w->r;
	uint8_t *buf = malloc(DP_FILE_MAX);
	uint64_t s = w->seed, off, len, i, k;
	unsigned int op;

	if (!buf) {
		snprintf(w->fail, sizeof(w->fail), "out of memory");
		return NULL;
	}
	for (op = 0; op < DP_OPS; op++) {
		/* Inodes idx, idx + DP_THREADS, ... are this thread's. */
		unsigned int fi = w->idx + DP_THREADS *
			(unsigned int)(tu_rand(&s) % (DP_INODES / DP_THREADS));
		struct dp_file *f = &r->f[fi];
		ssize_t got;

		dp_pick(&s, &off, &len);
		if (tu_rand(&s) % 4 == 0) {
			w->reads++;
			if (dp_check_read(f, off, len, buf, w->fail,
					  sizeof(w->fail)))
				break;
			continue;
		}
		for (i = 0; i < len; i += 8) {
			uint64_t v = tu_rand(&s);

			for (k = 0; k < 8 && i + k < len; k++)
				buf[i + k] = (uint8_t)(v >> (8 * k));
		}
		got = pwb_write(f->inode, buf, len, off);
		if (got != (ssize_t)len) {
			snprintf(w->fail, sizeof(w->fail),
				 "pwb_write(ino %" PRIu64 ", off %" PRIu64
				 ", len %" PRIu64 ") = %zd (%s)", f->ino, off,
				 len, got, got < 0 ? strerror((int)-got) : "");
			break;
		}
		memcpy(f->model + off, buf, len);
		if (off + len > f->size)
			f->size = off + len;
		w->writes++;
		w->bytes += len;
		/* Read-your-writes, right away, around what was written. */
		if (tu_rand(&s) % 3 == 0) {
			uint64_t a = off > PS ? off - PS : 0;

			if (dp_check_read(f, a, len + 2 * PS, buf, w->fail,
					  sizeof(w->fail)))
				break;
		}
	}
	free(buf);
	return NULL;
}

static const char *const dp_policies[] = { "alloc-group", "region",
					   "inode-hash" };

static void *dp_reshard_fn(void *arg)
{
	struct dp_run *r = arg;
	static const unsigned int counts[] = { 1, 2, 8 };
	unsigned int i = 0;
	int rc;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		rc = pwb_bdi_set_nr_wb_ctx(r->bdi, counts[i % 3]);
		if (!rc)
			rc = pwb_bdi_set_policy(r->bdi, dp_policies[i % 3]);
		if (rc && !r->reshard_err)
			r->reshard_err = rc;
		i++;
		usleep(2000);
	}
	r->reshards = i;
	return NULL;
}

/* The cache's size, sampled while the writers run (small-cache runs). */
static void *dp_sampler_fn(void *arg)
{
	struct dp_run *r = arg;
	struct pwb_stats st;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		if (!pwb_bdi_stats(r->bdi, &st)) {
			if (st.cache_pages > r->peak_cache)
				r->peak_cache = st.cache_pages;
			r->samples++;
		}
		usleep(200);
	}
	return NULL;
}

static void dp_open_bdi(struct dp_run *r)
{
	int rc = pwb_bdi_open(r->img, &r->cfg, &r->bdi);

	ck_assert_msg(rc == 0, "pwb_bdi_open: %s: %s", pwb_strerror(rc),
		      pwb_errmsg());
}

static void dp_open_inode(struct dp_run *r, struct dp_file *f)
{
	int rc = pwb_inode_open(r->bdi, f->ino, &dp_ops, f, &f->inode);

	ck_assert_msg(rc == 0, "pwb_inode_open(%" PRIu64 "): %s: %s", f->ino,
		      pwb_strerror(rc), pwb_errmsg());
}

/* Every byte of every inode through pwb_read, in pieces of varied size,
 * and the size. */
static void dp_verify_all(struct dp_run *r, const char *when)
{
	uint8_t *buf = malloc(DP_FILE_MAX + PS);
	char fail[256];
	uint64_t s = r->seed ^ 0x5eed, off, len, size;
	unsigned int i;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < DP_INODES; i++) {
		struct dp_file *f = &r->f[i];

		ck_assert_int_eq(pwb_inode_size(f->inode, &size), 0);
		ck_assert_msg(size == f->size, "%s: ino %" PRIu64 " size %"
			      PRIu64 ", model %" PRIu64, when, f->ino, size,
			      f->size);
		for (off = 0; off <= f->size; off += len) {
			len = 1 + tu_rand(&s) % (3 * PS);
			if (tu_rand(&s) % 8 == 0)
				len = DP_FILE_MAX;	/* to the end */
			ck_assert_msg(!dp_check_read(f, off, len, buf, fail,
						     sizeof(fail)),
				      "%s: %s", when, fail);
		}
	}
	free(buf);
}

/* The device holds the model: at the identity offsets (user-map mode),
 * or where the extent lists say (allocator mode; a page in no extent was
 * never written and must be zero in the model). Call with the bdi closed,
 * after the extents were saved. */
static void dp_verify_device(struct dp_run *r)
{
	int fd = open(r->img, O_RDONLY);
	uint8_t *dev = malloc(DP_FILE_MAX), *covered = malloc(DP_FILE_MAX / PS);
	unsigned int i;
	uint64_t b, p;
	size_t e;

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(dev);
	ck_assert_ptr_nonnull(covered);
	for (i = 0; i < DP_INODES; i++) {
		struct dp_file *f = &r->f[i];

		memset(dev, 0, DP_FILE_MAX);
		memset(covered, 0, DP_FILE_MAX / PS);
		if (!DP_ALLOC) {
			ck_assert_int_eq(pread(fd, dev, DP_FILE_MAX,
					       (off_t)f->base),
					 DP_FILE_MAX);
			memset(covered, 1, DP_FILE_MAX / PS);
		}
		for (e = 0; DP_ALLOC && e < f->nr_ext; e++) {
			const struct pwb_extent *x = &f->ext[e];

			ck_assert_msg(x->file_off % PS == 0 &&
				      x->len % PS == 0 && x->len &&
				      x->file_off + x->len <= DP_FILE_MAX,
				      "ino %" PRIu64 " extent %zu: %" PRIu64
				      "+%" PRIu64, f->ino, e, x->file_off,
				      x->len);
			ck_assert_int_eq(pread(fd, dev + x->file_off, x->len,
					       (off_t)x->dev_off),
					 (ssize_t)x->len);
			memset(covered + x->file_off / PS, 1, x->len / PS);
		}
		for (p = 0; p * PS < f->size; p++) {
			for (b = p * PS; b < (p + 1) * PS && b < f->size; b++)
				if (covered[p] ? dev[b] != f->model[b]
					       : f->model[b] != 0)
					break;
			ck_assert_msg(b >= (p + 1) * PS || b >= f->size,
				      "device: ino %" PRIu64 " byte %" PRIu64
				      " (%s) %#x, model %#x", f->ino, b,
				      covered[p] ? "in an extent" : "no extent",
				      dev[b], f->model[b]);
		}
	}
	free(dev);
	free(covered);
	close(fd);
}

/* Allocator mode: no two extents of any inodes share a device byte. */
static void dp_check_overlap(struct dp_run *r)
{
	unsigned int i, j;
	size_t a, b;

	for (i = 0; i < DP_INODES; i++)
		for (a = 0; a < r->f[i].nr_ext; a++)
			for (j = i; j < DP_INODES; j++)
				for (b = i == j ? a + 1 : 0;
				     b < r->f[j].nr_ext; b++) {
					const struct pwb_extent *x =
						&r->f[i].ext[a];
					const struct pwb_extent *y =
						&r->f[j].ext[b];

					ck_assert_msg(x->dev_off + x->len <=
							      y->dev_off ||
						      y->dev_off + y->len <=
							      x->dev_off,
						      "extents overlap on the "
						      "device: ino %u and %u",
						      i + 1, j + 1);
				}
}

static void dp_save_extents(struct dp_file *f)
{
	size_t total = 0, got = 0;
	int rc = pwb_inode_extents(f->inode, NULL, 0, &total);

	ck_assert_msg(rc == 0, "pwb_inode_extents: %s", pwb_strerror(rc));
	free(f->ext);
	f->ext = calloc(total + 1, sizeof(*f->ext));
	ck_assert_ptr_nonnull(f->ext);
	ck_assert_int_eq(pwb_inode_extents(f->inode, f->ext, total, &got), 0);
	ck_assert_uint_eq(got, total);
	f->nr_ext = total;
}

enum { DP_PLAIN = 0, DP_SMALL_CACHE = 1, DP_RESHARD = 2 };

static void dp_run(unsigned int nr_ctx, unsigned int flags)
{
	struct dp_run *r = calloc(1, sizeof(*r));
	struct dp_worker w[DP_THREADS];
	pthread_t resharder, sampler;
	uint64_t img_bytes, total = 0, dirty;
	struct pwb_stats st;
	unsigned int i;
	int rc;

	ck_assert_ptr_nonnull(r);
	r->seed = dp_seed();
	printf("check_datapath%s: %u contexts%s%s: PWB_DP_SEED=%#" PRIx64
	       "\n", DP_ALLOC ? "_alloc" : "", nr_ctx,
	       flags & DP_SMALL_CACHE ? ", small cache" : "",
	       flags & DP_RESHARD ? ", re-sharding" : "", r->seed);
	fflush(stdout);

	/* User-map mode: inode i at [i * FILE_MAX, (i + 1) * FILE_MAX).
	 * Allocator mode: room for all data twice over (freed and
	 * re-allocated space, groups). */
	img_bytes = (uint64_t)DP_INODES * DP_FILE_MAX * 2;
	r->img = tu_image_create(img_bytes);
	pwb_bdi_config_init(&r->cfg);
	r->cfg.nr_wb_ctx = nr_ctx;
	r->cfg.dirty_background_bytes = 2 * MiB;
	r->cfg.dirty_bytes = 8 * MiB;
	r->cfg.dirty_writeback_ms = 100;
	r->cfg.dirty_expire_ms = 200;
	r->cfg.throttle_timeout_ms = 60000;
	/* The data: up to 16 MiB; the small cache holds a sixteenth. */
	if (flags & DP_SMALL_CACHE)
		r->cfg.cache_bytes = DP_SMALL_CACHE_BYTES;
	r->cfg.nr_alloc_groups = 4;
	dp_open_bdi(r);
	for (i = 0; i < DP_INODES; i++) {
		r->f[i].ino = i + 1;
		r->f[i].base = (uint64_t)i * DP_FILE_MAX;
		r->f[i].model = calloc(1, DP_FILE_MAX);
		ck_assert_ptr_nonnull(r->f[i].model);
		dp_open_inode(r, &r->f[i]);
	}

	if (flags & DP_RESHARD)
		ck_assert_int_eq(pthread_create(&resharder, NULL,
						dp_reshard_fn, r), 0);
	if (flags & DP_SMALL_CACHE)
		ck_assert_int_eq(pthread_create(&sampler, NULL, dp_sampler_fn,
						r), 0);
	for (i = 0; i < DP_THREADS; i++) {
		w[i] = (struct dp_worker){ .r = r, .idx = i,
					   .seed = r->seed + 977 * (i + 1) };
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL, dp_worker_fn,
						&w[i]), 0);
	}
	for (i = 0; i < DP_THREADS; i++)
		pthread_join(w[i].tid, NULL);
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	if (flags & DP_RESHARD)
		pthread_join(resharder, NULL);
	if (flags & DP_SMALL_CACHE) {
		pthread_join(sampler, NULL);
		/* cache_bytes plus one chunk (max_io_bytes, 1 MiB) per
		 * context, of the most contexts the run had. */
		printf("  cache peak %" PRIu64 " KiB of %llu KiB (%u samples)\n",
		       r->peak_cache * PS / 1024, DP_SMALL_CACHE_BYTES / 1024,
		       r->samples);
		ck_assert_uint_gt(r->samples, 0);
		ck_assert_msg(r->peak_cache * PS <= DP_SMALL_CACHE_BYTES +
			      (flags & DP_RESHARD ? 8 : nr_ctx) * MiB,
			      "the cache held %" PRIu64 " pages, more than "
			      "cache_bytes and a chunk per context",
			      r->peak_cache);
	}
	for (i = 0; i < DP_THREADS; i++) {
		ck_assert_msg(!w[i].fail[0], "seed %#" PRIx64 ", thread %u: %s",
			      r->seed, i, w[i].fail);
		ck_assert_uint_gt(w[i].writes, 0);
		ck_assert_uint_gt(w[i].reads, 0);
		total += w[i].bytes;
	}
	if (flags & DP_RESHARD) {
		ck_assert_msg(r->reshard_err == 0, "re-shard: %s",
			      pwb_strerror(r->reshard_err));
		ck_assert_uint_gt(r->reshards, 3);
		ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(r->bdi, nr_ctx), 0);
	}
	printf("  %" PRIu64 " bytes written by %u threads%s\n", total,
	       DP_THREADS, flags & DP_RESHARD ? " while re-sharding" : "");

	/* Everything durable, then the cache dropped: close and reopen. */
	rc = pwb_sync(r->bdi);
	ck_assert_msg(rc == 0, "pwb_sync: %s", pwb_strerror(rc));
	for (i = 0; i < DP_INODES; i++) {
		ck_assert_int_eq(pwb_inode_dirty_pages(r->f[i].inode, &dirty),
				 0);
		ck_assert_uint_eq(dirty, 0);
	}
	ck_assert_int_eq(pwb_bdi_stats(r->bdi, &st), 0);
	ck_assert_uint_eq(st.dirty_pages, 0);
	ck_assert_uint_eq(st.writeback_pages, 0);
	ck_assert_uint_gt(st.written_pages, 0);
	for (i = 0; i < DP_INODES; i++) {
		ck_assert_int_eq(pwb_inode_close(r->f[i].inode), 0);
		dp_open_inode(r, &r->f[i]);
		/* User-map mode: the application knows its file sizes (the
		 * library keeps those of allocator-mode inodes). */
		if (!DP_ALLOC)
			ck_assert_int_eq(pwb_inode_set_size(r->f[i].inode,
							    r->f[i].size), 0);
	}
	dp_verify_all(r, "after close and reopen of the inodes");

	/* The bdi closed and reopened; the application's saved state
	 * loaded into fresh inodes. */
	for (i = 0; i < DP_INODES; i++) {
		if (DP_ALLOC)
			dp_save_extents(&r->f[i]);
		ck_assert_int_eq(pwb_inode_close(r->f[i].inode), 0);
	}
	rc = pwb_bdi_close(r->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_close: %s", pwb_strerror(rc));
	if (DP_ALLOC)
		dp_check_overlap(r);
	dp_verify_device(r);
	dp_open_bdi(r);
	for (i = 0; i < DP_INODES; i++) {
		struct dp_file *f = &r->f[i];

		dp_open_inode(r, f);
		if (DP_ALLOC) {
			rc = pwb_inode_set_extents(f->inode, f->ext,
						   f->nr_ext);
			ck_assert_msg(rc == 0, "pwb_inode_set_extents(%"
				      PRIu64 ", %zu extents): %s", f->ino,
				      f->nr_ext, pwb_strerror(rc));
		}
		ck_assert_int_eq(pwb_inode_set_size(f->inode, f->size), 0);
	}
	dp_verify_all(r, "after the bdi was reopened and restored");
	for (i = 0; i < DP_INODES; i++) {
		ck_assert_int_eq(pwb_inode_close(r->f[i].inode), 0);
		free(r->f[i].model);
		free(r->f[i].ext);
	}
	ck_assert_int_eq(pwb_bdi_close(r->bdi), 0);
	tu_image_remove(r->img);
	free(r);
}

START_TEST(test_model_1ctx)
{
	dp_run(1, DP_PLAIN);
}
END_TEST

START_TEST(test_model_2ctx)
{
	dp_run(2, DP_PLAIN);
}
END_TEST

START_TEST(test_model_8ctx)
{
	dp_run(8, DP_PLAIN);
}
END_TEST

START_TEST(test_model_small_cache)
{
	dp_run(2, DP_SMALL_CACHE);
}
END_TEST

START_TEST(test_model_reshard)
{
	dp_run(2, DP_SMALL_CACHE | DP_RESHARD);
}
END_TEST

#if DP_ALLOC
/*
 * ENOSPC reaches the writer at pwb_write() time: one inode fills a small
 * image in 64 KiB writes until the allocator refuses (a short count, then
 * -ENOSPC; or -ENOSPC at once). Everything acknowledged is synced (no
 * dirty data stranded) and reads back after the inode is reopened.
 */
START_TEST(test_enospc)
{
	const uint64_t img_bytes = 4 * MiB, chunk = 64 * 1024;
	struct dp_run *r = calloc(1, sizeof(*r));
	struct dp_file *f;
	uint8_t *buf = malloc(chunk), *back;
	uint64_t acked = 0, s, i, dirty, size;
	ssize_t got = 0;
	char fail[256];

	ck_assert_ptr_nonnull(r);
	ck_assert_ptr_nonnull(buf);
	f = &r->f[0];
	r->seed = s = dp_seed();
	printf("check_datapath_alloc: ENOSPC: PWB_DP_SEED=%#" PRIx64 "\n", s);
	r->img = tu_image_create(img_bytes);
	pwb_bdi_config_init(&r->cfg);
	r->cfg.nr_wb_ctx = 2;
	dp_open_bdi(r);
	f->ino = 1;
	f->model = calloc(1, 2 * img_bytes);
	ck_assert_ptr_nonnull(f->model);
	dp_open_inode(r, f);
	while (acked < 2 * img_bytes) {
		for (i = 0; i < chunk; i++)
			buf[i] = (uint8_t)tu_rand(&s);
		got = pwb_write(f->inode, buf, chunk, acked);
		if (got <= 0)
			break;
		ck_assert_uint_le((uint64_t)got, chunk);
		memcpy(f->model + acked, buf, (size_t)got);
		acked += (uint64_t)got;
		f->size = acked;
	}
	ck_assert_msg(got == -ENOSPC, "pwb_write at %" PRIu64 " of a %" PRIu64
		      "-byte device: %zd, expected -ENOSPC", acked, img_bytes,
		      got);
	ck_assert_uint_gt(acked, img_bytes / 2);
	ck_assert_uint_le(acked, img_bytes);
	ck_assert_int_eq(pwb_sync(r->bdi), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(f->inode, &dirty), 0);
	ck_assert_uint_eq(dirty, 0);
	ck_assert_int_eq(pwb_inode_close(f->inode), 0);
	dp_open_inode(r, f);
	ck_assert_int_eq(pwb_inode_size(f->inode, &size), 0);
	ck_assert_uint_eq(size, acked);
	back = malloc(acked + PS);
	ck_assert_ptr_nonnull(back);
	ck_assert_msg(!dp_check_read(f, 0, acked + PS, back, fail,
				     sizeof(fail)), "%s", fail);
	free(back);
	ck_assert_int_eq(pwb_inode_close(f->inode), 0);
	ck_assert_int_eq(pwb_bdi_close(r->bdi), 0);
	tu_image_remove(r->img);
	free(f->model);
	free(buf);
	free(r);
}
END_TEST
#endif

static Suite *datapath_suite(void)
{
	Suite *s = suite_create(DP_ALLOC ? "datapath_alloc" : "datapath");
	TCase *tc = tcase_create("model");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_model_1ctx);
	tcase_add_test(tc, test_model_2ctx);
	tcase_add_test(tc, test_model_8ctx);
	tcase_add_test(tc, test_model_small_cache);
	tcase_add_test(tc, test_model_reshard);
#if DP_ALLOC
	tcase_add_test(tc, test_enospc);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(datapath_suite(), true);
}
