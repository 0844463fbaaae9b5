// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pwb-bench - libpwb measured against fio and the kernel page cache
 *
 * Each workload runs three ways in one invocation, on the same device and
 * with the same write pattern, so that the ratios mean something even on a
 * shared machine where absolute figures are noise:
 *
 *   libpwb   application threads copy into their own page memory and call
 *            pwb_mark_dirty(); the flushers write with O_DIRECT; the run
 *            ends when pwb_sync() returns.
 *   fio      the same pattern with O_DIRECT, block size and parallelism
 *            (numjobs = contexts, iodepth = io_depth; the io_uring or psync
 *            engine to match the backend), ending with an fsync.
 *   kernel   the same threads write() into the device file through the page
 *            cache, then fsync.
 *
 * Workloads (see bench/README.md):
 *   seed      T threads, each writing its own inode sequentially in 1 MiB
 *             application writes, then pwb_sync (the kernel series' test)
 *   rand4k    random 4 KiB pages over many inodes, never two adjacent
 *   skew      random 4 KiB writes, 90% of them to 10% of the inodes
 *   fsync     random 4 KiB writes, pwb_fsync every K writes per thread
 *   markdirty pwb_mark_dirty() calls/s on first dirtying and on already
 *             dirty pages, 1 and T threads (no I/O: the null backend)
 *   null      pages/s through the null backend for dense dirty ranges,
 *             1 and 2 contexts (the engine's CPU cost per page)
 *   throttle  writers faster than the device under PWB_BDI_THROTTLE:
 *             peak dirty memory against its bound, writer throughput
 *             against the device's, and its steadiness second by second
 *   memory    bytes of tracking per dirty page and per registered inode
 *   one-file  one inode (a database in one file) under the "region"
 *             policy, 1, 2, 4 contexts: sequential 4 KiB writes
 *             (one-file-seq) and random 4 KiB pages never adjacent
 *             (one-file-rand), against fio numjobs 1, 2, 4 on the file
 *   wal       transactions under the write-ahead rule: T threads append
 *             log records to a log inode (on a bdi of its own, group
 *             commit by a log writer thread) and dirty data pages with
 *             pwb_mark_dirty_lsn(); transactions/s and log forces/s, next
 *             to the same run with plain pwb_mark_dirty()
 *   domain    a memory domain over three bdis, one slowed to 5 MiB/s:
 *             the fast ones' throughput with and without it, the slow
 *             one's dirty memory against its share, and the same with
 *             separate budgets (bench/domain-bench.c)
 *   multidev  N bdis on N images in /dev/shm: aggregate throughput
 *             against one bdi's, separate budgets and one domain
 *   tenants   tenants of weights 5 : 1 flooding one slowed bdi beside a
 *             light one: written bytes ratio, the light writer's p99
 *             latency against alone, dirty memory against the limits
 *             (bench/tenant-bench.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "pwb.h"
#ifdef PWB_BENCH_SQLITE
#include "sqlite-bench.h"
#endif
#include "pwb-policy.h"
#include "pwb-example-util.h"
#include "domain-bench.h"
#include "tenant-bench.h"

#define PS 4096u
#define MIB (1024.0 * 1024.0)
#define MAX_SWEEP 16
#define MAX_THREADS 64
#define MAX_RESULTS 256
#define MAX_RUNS 15
#define BENCH_MAX(a, b) ((a) > (b) ? (a) : (b))
#define BENCH_MIN(a, b) ((a) < (b) ? (a) : (b))
/* In --contexts lists: "auto", the bdi tunes itself (PWB_BDI_AUTO_WB_CTX). */
#define CTX_AUTO 0u

enum workload { WL_SEED, WL_RAND4K, WL_SKEW, WL_FSYNC, WL_MARKDIRTY, WL_NULL,
		WL_THROTTLE, WL_MEMORY, WL_ONEFILE_SEQ, WL_ONEFILE_RAND,
		WL_WAL, WL_PCWRITE, WL_PCREAD, WL_RECLAIM,
		WL_PCUNCACHED, WL_FRAG, WL_SQLITE, WL_PCSEQREAD, WL_DOMAIN,
		WL_MULTIDEV, WL_SQLITE_BULK, WL_TENANTS, WL_PCSTREAM, NR_WL };

static const char *const wl_name[NR_WL] = {
	"seed", "rand4k", "skew", "fsync", "markdirty", "null", "throttle",
	"memory", "one-file-seq", "one-file-rand", "wal", "pcache-write",
	"pcache-read", "reclaim", "pcache-uncached", "frag", "sqlite",
	"pcache-seqread", "domain", "multidev", "sqlite-bulk", "tenants",
	"pcache-stream",
};

/* The one-file workloads: one inode, written by every context under the
 * "region" policy (unless --policy says otherwise). */
static bool one_file(enum workload wl)
{
	return wl == WL_ONEFILE_SEQ || wl == WL_ONEFILE_RAND;
}

struct opts {
	bool wl[NR_WL];
	unsigned int sweep[MAX_SWEEP];	/* context counts */
	unsigned int nr_sweep;
	unsigned int flushers;		/* 0: one per context */
	const char *policy;
	const char *backend;
	unsigned int depth;
	uint64_t size;			/* bytes written per run */
	unsigned int threads;
	double duration;		/* seconds, cap per run; 0 = none */
	const char *device;
	const char *dir;
	unsigned int inodes;
	unsigned int fsync_every;
	unsigned int repeat;		/* markdirty, null: best of */
	unsigned int runs;		/* I/O workloads: median of */
	uint64_t null_pages;		/* null: dirty pages per run */
	uint64_t md_pages;		/* markdirty: pages per thread */
	uint64_t dirty_bg;		/* dirty_background_bytes, 0 = default */
	unsigned int auto_min, auto_max;	/* tuner bounds, 0 = default */
	unsigned int auto_ms;		/* tuner window, 0 = default */
	uint64_t dirty_limit;		/* throttle: dirty_bytes */
	uint64_t mem_inodes;		/* memory: inodes opened */
	int64_t readahead;		/* readahead_bytes; -1: default */
	bool json, csv, no_fio, no_kernel, keep, throttle, verbose;
	bool domain;			/* every bdi in one memory domain */
	unsigned int devices;		/* multidev: bdis (4) */
	unsigned int tenants;		/* markdirty: tenants of the inodes */
};

struct result {
	enum workload wl;
	const char *backend;
	unsigned int ctx, depth, threads;
	uint64_t bytes;
	double pwb, fio, kern;		/* in unit; < 0 = not measured */
	const char *unit;
	double secs;
	uint64_t io_submitted, io_extents, written_pages;
	unsigned int auto_nr;		/* auto: the count chosen at the end */
	unsigned int auto_reason;	/* auto: enum pwb_auto_reason */
	uint64_t auto_steps;		/* auto: re-shards made */
	char note[320];
};

static struct opts o;
static double median(double *v, unsigned int n);
static struct result results[MAX_RESULTS];
static unsigned int nr_results;
static FILE *tbl;			/* where the table goes */
static char g_summary[NR_WL][256];	/* under the table: auto vs sweep */
static char g_kernel_note[NR_WL][256];	/* under the table: kernel caveat */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));

static char *g_img, *g_sparse;
static char *g_wal_img;			/* wal: the log's own image */
static bool g_img_created;

static void cleanup(void)
{
	if (g_img && g_img_created && !o.keep)
		unlink(g_img);
	if (g_sparse)
		unlink(g_sparse);
	if (g_wal_img)
		unlink(g_wal_img);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "pwb-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	cleanup();
	exit(1);
}

static uint64_t xrand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

/* ---------------------------------------------------------------------- */
/* Devices                                                                */

/* Create @path of @size bytes and write it once with O_DIRECT, so that
 * every run overwrites allocated, written blocks (no extent conversion
 * inside the measurement, for any of the three contenders). */
static void image_create(const char *path, uint64_t size, bool prefill)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	uint64_t off;
	void *buf;

	if (fd < 0)
		die("cannot create %s: %s", path, strerror(errno));
	if (ftruncate(fd, (off_t)size))
		die("ftruncate %s: %s", path, strerror(errno));
	close(fd);
	if (!prefill)
		return;
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0)
		die("%s: O_DIRECT open: %s (use --dir on a real file system)",
		    path, strerror(errno));
	if (posix_memalign(&buf, 4096, 4 << 20))
		die("out of memory");
	memset(buf, 0, 4 << 20);
	for (off = 0; off < size; off += 4 << 20) {
		size_t n = (size_t)(size - off < (4u << 20) ? size - off
							     : 4u << 20);

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			die("prefill %s: %s", path, strerror(errno));
	}
	fdatasync(fd);
	close(fd);
	free(buf);
}

static uint64_t device_size(const char *path)
{
	struct stat st;
	uint64_t sz = 0;
	int fd;

	if (stat(path, &st))
		return 0;
	if (S_ISREG(st.st_mode))
		return (uint64_t)st.st_size;
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		off_t e = lseek(fd, 0, SEEK_END);

		sz = e > 0 ? (uint64_t)e : 0;
		close(fd);
	}
	return sz;
}

/* Drop the device file's pages from the page cache, so that the kernel
 * contender starts cold like the others. */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDWR);

	if (fd < 0)
		return;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* ---------------------------------------------------------------------- */
/* The application side of libpwb: page memory and the inode ops          */

struct app_inode {
	uint8_t *mem;		/* page memory (NULL: one shared dummy page) */
	uint64_t base;		/* device offset of page 0 */
	uint64_t pages;
	struct pwb_inode *inode;
	uint8_t *latch;		/* null workload's latch row: one per page */
};

static uint8_t *dummy_page;

static int app_get_page(struct pwb_inode *inode, uint64_t index,
			const void **data)
{
	struct app_inode *ai = pwb_inode_priv(inode);

	*data = ai->mem ? ai->mem + index * PS : dummy_page;
	return 0;
}

static int app_map_page(struct pwb_inode *inode, uint64_t index,
			uint64_t *dev_off)
{
	struct app_inode *ai = pwb_inode_priv(inode);

	*dev_off = ai->base + index * PS;
	return 0;
}

static const struct pwb_inode_ops app_ops = {
	.get_page = app_get_page,
	.map_page = app_map_page,
};

/*
 * get_page of an application that latches its pages (a database's buffer
 * pool): it takes the page's latch to hand the page out and says -EAGAIN
 * while someone else holds it. Nobody else does here, so the row that uses
 * it prices the check on the path every page takes.
 */
static int app_get_page_latched(struct pwb_inode *inode, uint64_t index,
				const void **data)
{
	struct app_inode *ai = pwb_inode_priv(inode);
	uint8_t *l = &ai->latch[index];

	if (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	*data = ai->mem ? ai->mem + index * PS : dummy_page;
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
	return 0;
}

static const struct pwb_inode_ops app_latch_ops = {
	.get_page = app_get_page_latched,
	.map_page = app_map_page,
};

/* A policy for the next bdi_open() in place of --policy, or NULL. */
static const char *g_policy;
/* cache_bytes for the next bdi_open() (the data-path workloads). */
static uint64_t g_cache_bytes;

/*
 * --domain: every bdi the bench opens joins one memory domain, whose limits
 * are the first bdi's (no limit becomes 1 TiB, so that the domain's path
 * is taken and its cost measured).
 */
static struct pwb_domain *g_domain;

static struct pwb_domain *bench_domain(const struct pwb_bdi_config *cfg)
{
	struct pwb_domain_config dc;
	int rc;

	if (g_domain)
		return g_domain;
	pwb_domain_config_init(&dc);
	dc.dirty_bytes = cfg->dirty_bytes ? cfg->dirty_bytes : 1ull << 40;
	dc.dirty_background_bytes = cfg->dirty_background_bytes;
	rc = pwb_domain_create(&dc, &g_domain);
	if (rc)
		die("pwb_domain_create: %s", pwb_errmsg());
	return g_domain;
}

static struct pwb_bdi *bdi_open(const char *path, const char *backend,
				unsigned int ctx, bool writeback)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	int rc;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = ctx;
	if (ctx == CTX_AUTO) {
		cfg.flags |= PWB_BDI_AUTO_WB_CTX;
		cfg.auto_min_wb_ctx = o.auto_min;
		cfg.auto_max_wb_ctx = o.auto_max;
		cfg.auto_interval_ms = o.auto_ms;
	}
	cfg.nr_flushers = o.flushers;
	cfg.policy = g_policy ? g_policy : o.policy;
	cfg.backend = backend;
	cfg.io_depth = o.depth;
	cfg.cache_bytes = g_cache_bytes;
	if (o.readahead >= 0)
		cfg.readahead_bytes = (uint64_t)o.readahead;
	if (o.throttle)
		cfg.flags |= PWB_BDI_THROTTLE;
	if (o.dirty_bg) {
		cfg.dirty_background_bytes = o.dirty_bg;
		if (cfg.dirty_bytes && cfg.dirty_bytes < o.dirty_bg)
			cfg.dirty_bytes = o.dirty_bg;
	}
	if (!writeback) {
		/* Only explicit syncs write: the engine alone is measured. */
		cfg.dirty_background_bytes = 0;
		cfg.dirty_bytes = 0;
		cfg.dirty_writeback_ms = 0;
	}
	if (o.domain)
		cfg.domain = bench_domain(&cfg);
	rc = pwb_bdi_open(path, &cfg, &bdi);
	if (rc)
		die("pwb_bdi_open(%s, backend %s, %u contexts): %s: %s", path,
		    backend, ctx, pwb_strerror(rc), pwb_errmsg());
	return bdi;
}

/* ---------------------------------------------------------------------- */
/* Write patterns, shared by the libpwb and kernel contenders             */

/* One application write: @len bytes at byte @off of inode @ino. */
struct wr {
	uint32_t ino;
	uint32_t len;
	uint64_t off;
};

struct plan {
	unsigned int nr_inodes;
	uint64_t inode_bytes;		/* each inode's region */
	struct wr *w[MAX_THREADS];	/* per thread */
	uint64_t nr[MAX_THREADS];
	unsigned int fsync_every;	/* 0: none */
	uint64_t bytes;			/* sum of all writes */
};

static void plan_free(struct plan *p)
{
	unsigned int t;

	for (t = 0; t < MAX_THREADS; t++)
		free(p->w[t]);
	memset(p, 0, sizeof(*p));
}

static struct wr *plan_alloc(uint64_t n)
{
	struct wr *w = calloc(n ? n : 1, sizeof(*w));

	if (!w)
		die("out of memory for a write plan of %" PRIu64, n);
	return w;
}

/* Put the @n writes of @w in random order (Fisher-Yates, from *@seed). */
static void shuffle(struct wr *w, uint64_t n, uint64_t *seed)
{
	uint64_t k;

	for (k = n; k > 1; k--) {
		uint64_t j = xrand(seed) % k;
		struct wr tmp = w[k - 1];

		w[k - 1] = w[j];
		w[j] = tmp;
	}
}

/*
 * Build the write stream of each thread for @wl over an image of @img
 * bytes. Every contender replays exactly this stream.
 */
static void plan_build(struct plan *p, enum workload wl, uint64_t img,
		       unsigned int threads)
{
	unsigned int t, i;

	memset(p, 0, sizeof(*p));
	switch (wl) {
	case WL_SEED: {
		/* Thread t owns inode t: sequential 1 MiB writes. */
		uint64_t per = o.size / threads / (1u << 20) * (1u << 20);

		p->nr_inodes = threads;
		p->inode_bytes = per;
		for (t = 0; t < threads; t++) {
			uint64_t n = per >> 20, k;

			p->w[t] = plan_alloc(n);
			for (k = 0; k < n; k++)
				p->w[t][k] = (struct wr){ t, 1u << 20,
							  k << 20 };
			p->nr[t] = n;
		}
		break;
	}
	case WL_RAND4K: {
		/*
		 * Every even page of each inode once, in random order; thread
		 * t owns the inodes i with i % threads == t. Odd pages are
		 * never written, so no two dirty pages are ever adjacent and
		 * every page is its own I/O, for everyone.
		 */
		p->nr_inodes = o.inodes;
		p->inode_bytes = img / o.inodes / (2 * PS) * (2 * PS);
		for (t = 0; t < threads; t++) {
			uint64_t n = 0, k, half = p->inode_bytes / (2 * PS);
			uint64_t seed = 0x5eedull + t;

			for (i = t; i < o.inodes; i += threads)
				n += half;
			p->w[t] = plan_alloc(n);
			n = 0;
			for (i = t; i < o.inodes; i += threads)
				for (k = 0; k < half; k++)
					p->w[t][n++] = (struct wr){
						i, PS, 2 * k * PS };
			shuffle(p->w[t], n, &seed);
			p->nr[t] = n;
		}
		break;
	}
	case WL_SKEW: {
		/* 90% of the writes go to the first 10% of the inodes. */
		unsigned int hot = (o.inodes + 9) / 10;
		uint64_t per = o.size / threads / PS;

		p->nr_inodes = o.inodes;
		p->inode_bytes = img / o.inodes / PS * PS;
		for (t = 0; t < threads; t++) {
			uint64_t seed = 0x5ce3ull + t, k;

			p->w[t] = plan_alloc(per);
			for (k = 0; k < per; k++) {
				bool h = xrand(&seed) % 100 < 90 ||
					 hot == o.inodes;
				unsigned int ino =
					h ? (unsigned int)(xrand(&seed) % hot)
					  : hot + (unsigned int)(xrand(&seed) %
							(o.inodes - hot));

				p->w[t][k] = (struct wr){
					ino, PS,
					xrand(&seed) % (p->inode_bytes / PS) *
						PS };
			}
			p->nr[t] = per;
		}
		break;
	}
	case WL_FSYNC: {
		/* Thread t owns inode t: random 4 KiB pages, an fsync every
		 * fsync_every writes, like a database's table file. */
		uint64_t per = o.size / threads / PS;

		p->nr_inodes = threads;
		p->inode_bytes = img / threads / PS * PS;
		p->fsync_every = o.fsync_every;
		for (t = 0; t < threads; t++) {
			uint64_t seed = 0xf5ull + t, k;

			p->w[t] = plan_alloc(per);
			for (k = 0; k < per; k++)
				p->w[t][k] = (struct wr){
					t, PS,
					xrand(&seed) % (p->inode_bytes / PS) *
						PS };
			p->nr[t] = per;
		}
		break;
	}
	case WL_ONEFILE_SEQ:
	case WL_ONEFILE_RAND: {
		/*
		 * One inode; thread t owns the t-th contiguous part of it.
		 * Sequential: every page of a file of --size, in order.
		 * Random: every even page of a file of 2 x --size once, in
		 * random order (never adjacent: each page its own write).
		 */
		bool seq = wl == WL_ONEFILE_SEQ;
		uint64_t step = seq ? PS : 2 * PS;
		uint64_t part;

		p->nr_inodes = 1;
		p->inode_bytes = (seq ? img / 2 : img) / (2 * PS) * (2 * PS);
		part = p->inode_bytes / threads / step * step;
		for (t = 0; t < threads; t++) {
			uint64_t n = part / step, k, seed = 0x0f11eull + t;

			p->w[t] = plan_alloc(n);
			for (k = 0; k < n; k++)
				p->w[t][k] = (struct wr){ 0, PS,
							  t * part + k * step };
			if (!seq)
				shuffle(p->w[t], n, &seed);
			p->nr[t] = n;
		}
		break;
	}
	default:
		break;
	}
	for (t = 0; t < threads; t++)
		for (i = 0; i < p->nr[t]; i++)
			p->bytes += p->w[t][i].len;
}

/* ---------------------------------------------------------------------- */
/* Running a plan: libpwb or the kernel page cache                        */

struct runner {
	const struct plan *p;
	unsigned int threads;
	/* libpwb */
	struct app_inode *ai;
	/* kernel */
	int fd;
	/* both */
	const uint8_t *src;		/* 1 MiB of data to copy from */
	pthread_barrier_t start;
	double deadline;		/* 0: none */
	int err;			/* first error, atomic */
};

struct worker {
	struct runner *r;
	unsigned int t;
	pthread_t tid;
	uint64_t bytes;
	uint64_t fsyncs;
};

static void set_err(struct runner *r, int err)
{
	int zero = 0;

	__atomic_compare_exchange_n(&r->err, &zero, err, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void *pwb_worker(void *arg)
{
	struct worker *w = arg;
	struct runner *r = w->r;
	const struct plan *p = r->p;
	uint64_t k;

	pthread_barrier_wait(&r->start);
	for (k = 0; k < p->nr[w->t]; k++) {
		const struct wr *x = &p->w[w->t][k];
		struct app_inode *ai = &r->ai[x->ino];
		int rc;

		/* The application's write: new bytes into its own page. */
		memcpy(ai->mem + x->off, r->src, x->len);
		rc = pwb_mark_dirty(ai->inode, x->off, x->len);
		if (rc)
			set_err(r, rc);
		w->bytes += x->len;
		if (p->fsync_every && (k + 1) % p->fsync_every == 0) {
			rc = pwb_fsync(ai->inode);
			if (rc)
				set_err(r, rc);
			w->fsyncs++;
		}
		if (r->deadline && (k & 63) == 63 && bench_now_s() > r->deadline)
			break;
	}
	return NULL;
}

static void *kern_worker(void *arg)
{
	struct worker *w = arg;
	struct runner *r = w->r;
	const struct plan *p = r->p;
	uint64_t k;

	pthread_barrier_wait(&r->start);
	for (k = 0; k < p->nr[w->t]; k++) {
		const struct wr *x = &p->w[w->t][k];
		uint64_t off = x->ino * p->inode_bytes + x->off;

		if (pwrite(r->fd, r->src, x->len, (off_t)off) !=
		    (ssize_t)x->len)
			set_err(r, -errno);
		w->bytes += x->len;
		if (p->fsync_every && (k + 1) % p->fsync_every == 0) {
			if (fdatasync(r->fd))
				set_err(r, -errno);
			w->fsyncs++;
		}
		if (r->deadline && (k & 63) == 63 && bench_now_s() > r->deadline)
			break;
	}
	return NULL;
}

/* Run @fn on r->threads threads; return the bytes they wrote. The clock
 * starts when all threads are ready (*t0 is set then). */
static uint64_t run_threads(struct runner *r, void *(*fn)(void *), double *t0)
{
	struct worker w[MAX_THREADS];
	uint64_t bytes = 0;
	unsigned int t;

	memset(w, 0, sizeof(w));
	pthread_barrier_init(&r->start, NULL, r->threads + 1);
	for (t = 0; t < r->threads; t++) {
		w[t].r = r;
		w[t].t = t;
		if (pthread_create(&w[t].tid, NULL, fn, &w[t]))
			die("pthread_create failed");
	}
	*t0 = bench_now_s();
	if (o.duration > 0)
		r->deadline = *t0 + o.duration;
	pthread_barrier_wait(&r->start);
	for (t = 0; t < r->threads; t++) {
		pthread_join(w[t].tid, NULL);
		bytes += w[t].bytes;
	}
	pthread_barrier_destroy(&r->start);
	return bytes;
}

static uint8_t *g_mem;		/* page memory for the whole image */
static uint8_t *g_wal_mem;		/* wal: the log's page memory */
static uint8_t *g_src;		/* 1 MiB the application copies from */

/* libpwb on @ctx contexts: returns MiB/s; fills @res's counters. */
/*
 * Pages each context wrote, and their imbalance (max over mean): the
 * figure a skewed workload judges shard policies by (issue: 10% of the
 * inodes get 90% of the writes).
 */
static void print_ctx_balance(struct pwb_bdi *bdi)
{
	unsigned int c, n = pwb_bdi_nr_wb_ctx(bdi);
	uint64_t max = 0, sum = 0;
	char spec[128] = "";

	pwb_bdi_policy(bdi, spec, sizeof(spec));
	fprintf(tbl, "  %-22s written pages per context:", spec);
	for (c = 0; c < n; c++) {
		struct pwb_stats st;

		if (pwb_wb_ctx_stats(bdi, c, &st))
			continue;
		fprintf(tbl, " %llu", (unsigned long long)st.written_pages);
		max = st.written_pages > max ? st.written_pages : max;
		sum += st.written_pages;
	}
	fprintf(tbl, "  imbalance (max/mean) %.2f\n",
		sum ? (double)max * n / (double)sum : 0.0);
}

static double run_pwb(const struct plan *p, unsigned int ctx,
		      struct result *res)
{
	struct app_inode *ai = calloc(p->nr_inodes, sizeof(*ai));
	struct runner r = { .p = p, .threads = o.threads, .src = g_src };
	struct pwb_stats st;
	struct pwb_bdi *bdi;
	uint64_t bytes;
	double t0, tw, t1;
	unsigned int i;
	int rc;

	char spec[64];

	if (!ai)
		die("out of memory");
	if (one_file(res->wl) && !o.policy) {
		/* One region of the file per context, whatever the size of
		 * the device beyond it. */
		uint64_t per = p->inode_bytes / (ctx ? ctx : 2);

		per = (per + (1u << 20) - 1) >> 20;
		snprintf(spec, sizeof(spec), "region:bytes=%" PRIu64 "M",
			 per ? per : 1);
		g_policy = spec;
	}
	bdi = bdi_open(g_img, o.backend, ctx, true);
	g_policy = NULL;
	for (i = 0; i < p->nr_inodes; i++) {
		ai[i].base = (uint64_t)i * p->inode_bytes;
		ai[i].mem = g_mem + ai[i].base;
		ai[i].pages = p->inode_bytes / PS;
		rc = pwb_inode_open(bdi, i, &app_ops, &ai[i], &ai[i].inode);
		if (rc)
			die("pwb_inode_open: %s", pwb_strerror(rc));
	}
	r.ai = ai;
	bytes = run_threads(&r, pwb_worker, &t0);
	tw = bench_now_s();
	rc = pwb_sync(bdi);
	t1 = bench_now_s();
	if (o.verbose)
		fprintf(stderr, "  libpwb: writers done after %.3f s, then "
			"pwb_sync %.3f s\n", tw - t0, t1 - tw);
	if (rc || r.err)
		die("libpwb run failed: %s", pwb_strerror(rc ? rc : r.err));
	pwb_bdi_stats(bdi, &st);
	res->io_submitted = st.io_submitted;
	res->io_extents = st.io_extents;
	res->written_pages = st.written_pages;
	res->secs = t1 - t0;
	res->auto_nr = (unsigned int)st.auto_nr_wb_ctx;
	res->auto_reason = (unsigned int)st.auto_reason;
	res->auto_steps = st.auto_steps;
	if (o.verbose && ctx == CTX_AUTO)
		fprintf(stderr, "  auto: chose %u (%s), %" PRIu64 " steps, %"
			PRIu64 " windows, best %u at %.1f MiB/s\n",
			res->auto_nr, pwb_auto_reason_str(res->auto_reason),
			st.auto_steps, st.auto_windows,
			(unsigned int)st.auto_best_nr_wb_ctx,
			(double)st.auto_best_bw / MIB);
	if (res->wl == WL_SKEW || (one_file(res->wl) && o.verbose))
		print_ctx_balance(bdi);
	res->bytes = bytes;
	rc = pwb_bdi_close(bdi);
	if (rc)
		die("pwb_bdi_close: %s", pwb_strerror(rc));
	free(ai);
	return (double)bytes / MIB / (t1 - t0);
}

/* One number from /proc (a sysctl file, or the "Key:" line of
 * /proc/meminfo in kB); 0 if it cannot be read. */
static uint64_t proc_num(const char *path, const char *key)
{
	char line[256];
	uint64_t v = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		size_t n = key ? strlen(key) : 0;

		if (key && strncmp(line, key, n))
			continue;
		v = strtoull(line + n, NULL, 10) * (key ? 1024 : 1);
		break;
	}
	fclose(f);
	return v;
}

/*
 * The dirty memory above which the kernel's flusher thread starts writing
 * in the background: vm.dirty_background_bytes, else
 * vm.dirty_background_ratio of the memory that may hold dirty pages, which
 * mm/page-writeback.c takes as free pages plus file pages. Read while the
 * bench's page memory is allocated and the device file's cache dropped, so
 * it is what the kernel contender meets. 0 if unknown.
 */
static uint64_t kernel_dirty_background(void)
{
	uint64_t b = proc_num("/proc/sys/vm/dirty_background_bytes", NULL);
	uint64_t ratio = proc_num("/proc/sys/vm/dirty_background_ratio", NULL);

	if (b)
		return b;
	return (proc_num("/proc/meminfo", "MemFree:") +
		proc_num("/proc/meminfo", "Active(file):") +
		proc_num("/proc/meminfo", "Inactive(file):")) / 100 * ratio;
}

/* The kernel page cache: buffered pwrite() of the same stream, then
 * fdatasync. Returns MiB/s. */
static double run_kernel(const struct plan *p)
{
	struct runner r = { .p = p, .threads = o.threads, .src = g_src };
	uint64_t bytes;
	double t0, t1;

	drop_cache(g_img);
	r.fd = open(g_img, O_RDWR);
	if (r.fd < 0)
		die("open %s: %s", g_img, strerror(errno));
	bytes = run_threads(&r, kern_worker, &t0);
	if (fdatasync(r.fd))
		set_err(&r, -errno);
	t1 = bench_now_s();
	close(r.fd);
	if (r.err)
		die("kernel run failed: %s", strerror(-r.err));
	drop_cache(g_img);
	return (double)bytes / MIB / (t1 - t0);
}

/* ---------------------------------------------------------------------- */
/* fio                                                                    */

static bool have_fio(void)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		return false;
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/fio", (int)n, path);
		if (n && !access(buf, X_OK))
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Run fio with the job options @job, ending with an fsync if @end_fsync;
 * return the write bandwidth in MiB/s or -1. */
/* The JSON section fio_run() takes its bandwidth from. */
static const char *g_fio_dir = "\"write\"";

static double fio_run(const char *job, bool end_fsync)
{
	char cmd[2048];
	size_t cap = 1 << 20, len = 0;
	char *out = malloc(cap + 1), *p;
	double bw = -1;
	FILE *f;

	if (!out)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "fio --name=pwb-bench --filename='%s' --direct=1 "
		 "--group_reporting --output-format=json --end_fsync=%d %s "
		 "2>&1",
		 g_img, end_fsync, job);
	if (o.verbose)
		fprintf(stderr, "+ %s\n", cmd);
	f = popen(cmd, "r");
	if (!f) {
		free(out);
		return -1;
	}
	while (len < cap) {
		size_t n = fread(out + len, 1, cap - len, f);

		if (!n)
			break;
		len += n;
	}
	out[len] = 0;
	pclose(f);
	/* With group_reporting, jobs[0] holds the sum over all jobs: find
	 * its "write" : { section ("rw" : "write" comes earlier). */
	for (p = strstr(out, g_fio_dir); p; p = strstr(p + 1, g_fio_dir)) {
		const char *q = p + strlen(g_fio_dir);

		q += strspn(q, " \t");
		if (*q != ':')
			continue;
		q++;
		q += strspn(q, " \t");
		if (*q == '{')
			break;
	}
	if (p)
		p = strstr(p, "\"bw_bytes\"");
	if (p && (p = strchr(p, ':')))
		bw = strtod(p + 1, NULL) / MIB;
	else
		fprintf(stderr, "pwb-bench: no fio result; fio said:\n%.2000s\n",
			out);
	free(out);
	return bw;
}

static double run_fio(enum workload wl, const struct plan *p,
		      unsigned int ctx)
{
	const char *engine = !strcmp(o.backend, "io_uring") ? "io_uring"
							     : "psync";
	unsigned int jobs = ctx, depth = strcmp(engine, "psync") ? o.depth : 1;
	uint64_t region = p->nr_inodes * p->inode_bytes / (jobs ? jobs : 1);
	uint64_t per_job = p->bytes / (jobs ? jobs : 1);
	char job[1024], rt[64] = "";

	region = region / (2 * PS) * (2 * PS);
	per_job = per_job / PS * PS;
	if (o.duration > 0)
		snprintf(rt, sizeof(rt), "--runtime=%g", o.duration);
	switch (wl) {
	case WL_SEED:
	case WL_ONEFILE_SEQ:
		/* one-file: libpwb merges the 4 KiB pages into max_io_bytes
		 * (1 MiB) requests; fio sends the device the same ones, each
		 * job its own part of the one file. */
		snprintf(job, sizeof(job),
			 "--ioengine=%s --iodepth=%u --numjobs=%u --rw=write "
			 "--bs=1M --size=%" PRIu64 " --offset_increment=%"
			 PRIu64 " %s",
			 engine, depth, jobs, region, region, rt);
		break;
	case WL_RAND4K:
	case WL_ONEFILE_RAND:
		/* 8 KiB alignment: 4 KiB writes never adjacent, as ours. */
		snprintf(job, sizeof(job),
			 "--ioengine=%s --iodepth=%u --numjobs=%u "
			 "--rw=randwrite --bs=4k --blockalign=8k --size=%"
			 PRIu64 " --offset_increment=%" PRIu64
			 " --io_size=%" PRIu64 " %s",
			 engine, depth, jobs, region, region, per_job, rt);
		break;
	case WL_SKEW:
		snprintf(job, sizeof(job),
			 "--ioengine=%s --iodepth=%u --numjobs=%u "
			 "--rw=randwrite --bs=4k --norandommap "
			 "--random_distribution=zoned:90/10:10/90 --size=%"
			 PRIu64 " --offset_increment=%" PRIu64
			 " --io_size=%" PRIu64 " %s",
			 engine, depth, jobs, region, region, per_job, rt);
		break;
	case WL_FSYNC:
		/* Each application thread fsyncs: one job per thread. */
		jobs = o.threads;
		region = p->nr_inodes * p->inode_bytes / jobs / PS * PS;
		per_job = p->bytes / jobs / PS * PS;
		snprintf(job, sizeof(job),
			 "--ioengine=%s --iodepth=%u --numjobs=%u "
			 "--rw=randwrite --bs=4k --fsync=%u --size=%" PRIu64
			 " --offset_increment=%" PRIu64 " --io_size=%" PRIu64
			 " %s",
			 engine, depth, jobs, o.fsync_every, region, region,
			 per_job, rt);
		break;
	default:
		return -1;
	}
	return fio_run(job, true);
}

/* ---------------------------------------------------------------------- */
/* Microbenchmarks: mark_dirty and the null backend                       */

struct md_thread {
	struct pwb_inode *inode;
	uint64_t pages;
	pthread_barrier_t *bar;
	double first_rate, again_rate;	/* calls/s */
	pthread_t tid;
	int err;
};

static void *md_fn(void *arg)
{
	struct md_thread *m = arg;
	uint64_t i;
	double t0, t1;
	int rc = 0;

	pthread_barrier_wait(m->bar);
	t0 = bench_now_s();
	for (i = 0; i < m->pages; i++)
		rc |= pwb_mark_dirty(m->inode, i * PS, PS);
	t1 = bench_now_s();
	m->first_rate = (double)m->pages / (t1 - t0);
	pthread_barrier_wait(m->bar);
	t0 = bench_now_s();
	for (i = 0; i < m->pages; i++)
		rc |= pwb_mark_dirty(m->inode, i * PS, PS);
	t1 = bench_now_s();
	m->again_rate = (double)m->pages / (t1 - t0);
	m->err = rc;
	return NULL;
}

/*
 * Aggregate calls/s of @threads threads, each on its own inode (inode t,
 * so the default policy puts thread t's inode on context t % contexts):
 * first dirtying (*first) and already dirty (*again); one run.
 */
static void markdirty_once(unsigned int threads, double *first, double *again)
{
	struct md_thread m[MAX_THREADS];
	struct app_inode ai[MAX_THREADS];
	struct pwb_bdi *bdi = bdi_open(g_sparse, "null", o.sweep[0], false);
	struct pwb_tenant *tn[MAX_THREADS] = { NULL };
	pthread_barrier_t bar;
	unsigned int t;

	*first = *again = 0;
	/* --tenants N: the inodes go to N tenants (of the domain with
	 * --domain, else of the bdi), weights 100, 200, ...: their cost. */
	for (t = 0; t < o.tenants && t < MAX_THREADS; t++) {
		struct pwb_tenant_config tc;

		pwb_tenant_config_init(&tc);
		tc.weight = 100 * (t + 1);
		if (pwb_tenant_create(g_domain, g_domain ? NULL : bdi, &tc,
				      &tn[t]))
			die("pwb_tenant_create: %s", pwb_errmsg());
	}
	pthread_barrier_init(&bar, NULL, threads);
	memset(m, 0, sizeof(m));
	for (t = 0; t < threads; t++) {
		ai[t] = (struct app_inode){ .base = (uint64_t)t * o.md_pages * PS,
					    .pages = o.md_pages };
		if (pwb_inode_open(bdi, t, &app_ops, &ai[t], &ai[t].inode))
			die("pwb_inode_open failed");
		if (o.tenants &&
		    pwb_inode_set_tenant(ai[t].inode,
					 tn[t % BENCH_MIN(o.tenants,
							  MAX_THREADS)]))
			die("pwb_inode_set_tenant: %s", pwb_errmsg());
		m[t] = (struct md_thread){ .inode = ai[t].inode,
					   .pages = o.md_pages, .bar = &bar };
		if (pthread_create(&m[t].tid, NULL, md_fn, &m[t]))
			die("pthread_create failed");
	}
	for (t = 0; t < threads; t++) {
		pthread_join(m[t].tid, NULL);
		if (m[t].err)
			die("pwb_mark_dirty failed");
		*first += m[t].first_rate;
		*again += m[t].again_rate;
	}
	pthread_barrier_destroy(&bar);
	pwb_bdi_close(bdi);
	for (t = 0; t < MAX_THREADS; t++)
		pwb_tenant_destroy(tn[t]);
}

/*
 * What @threads threads achieve on this machine against one, on a busy
 * loop that shares nothing: the ceiling for the engine's own scaling
 * ratios (a VM's vCPUs may share a core, or the host may be busy).
 */
static double g_cpu_scale = -1;

static void *spin_fn(void *arg)
{
	volatile uint64_t x = 0;
	uint64_t i, n = *(const uint64_t *)arg;

	for (i = 0; i < n; i++)
		x += i;
	return NULL;
}

static double cpu_scaling(unsigned int threads)
{
	uint64_t n = 100000000ull;
	pthread_t tid[MAX_THREADS];
	double t0, t1, tn, best = 0;
	unsigned int t, rep;

	/* Best of three: other load on the machine only lowers it. */
	for (rep = 0; rep < 3; rep++) {
		t0 = bench_now_s();
		spin_fn(&n);
		t1 = bench_now_s() - t0;
		t0 = bench_now_s();
		for (t = 0; t < threads; t++)
			if (pthread_create(&tid[t], NULL, spin_fn, &n))
				die("pthread_create failed");
		for (t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);
		tn = bench_now_s() - t0;
		if (threads * t1 / tn > best)
			best = threads * t1 / tn;
	}
	return best;
}

static void add_result(const struct result *r)
{
	if (nr_results < MAX_RESULTS)
		results[nr_results++] = *r;
}

/* 1 and T threads, best of o.repeat runs taken in turns, so that a busy
 * spell of the machine does not fall on one configuration only. */
static void bench_markdirty(void)
{
	unsigned int tcounts[2] = { 1, o.threads }, n = o.threads > 1 ? 2 : 1;
	double first[2] = { 0, 0 }, again[2] = { 0, 0 };
	unsigned int i, rep;

	for (rep = 0; rep < o.repeat; rep++) {
		for (i = 0; i < n; i++) {
			double f, a;

			markdirty_once(tcounts[i], &f, &a);
			if (f > first[i])
				first[i] = f;
			if (a > again[i])
				again[i] = a;
		}
	}
	for (i = 0; i < n; i++) {
		struct result r = { .wl = WL_MARKDIRTY, .backend = "null",
				    .ctx = o.sweep[0], .threads = tcounts[i],
				    .fio = -1, .kern = -1, .unit = "Mcalls/s" };

		r.pwb = again[i] / 1e6;
		snprintf(r.note, sizeof(r.note),
			 "already dirty; per thread %.2f M/s",
			 again[i] / 1e6 / tcounts[i]);
		if (i)
			snprintf(r.note + strlen(r.note),
				 sizeof(r.note) - strlen(r.note),
				 "; x%.2f vs 1 thread", again[i] / again[0]);
		add_result(&r);
		r.pwb = first[i] / 1e6;
		snprintf(r.note, sizeof(r.note),
			 "first dirtying; per thread %.2f M/s",
			 first[i] / 1e6 / tcounts[i]);
		if (i)
			snprintf(r.note + strlen(r.note),
				 sizeof(r.note) - strlen(r.note),
				 "; x%.2f vs 1 thread", first[i] / first[0]);
		add_result(&r);
	}
}

/*
 * The null workload's rows: plain pages, then the same dense ranges with
 * one feature in use each, so that its price per page is written down
 * next to the plain figure (issue 29). Features run on one context.
 */
enum null_feature { NF_PLAIN, NF_LSN, NF_LATCH, NF_REGION, NR_NF };

static const char *const nf_name[NR_NF] = {
	[NF_PLAIN] = "plain",
	[NF_LSN] = "LSNs (pwb_mark_dirty_lsn, log durable)",
	[NF_LATCH] = "a page latch taken in get_page",
	[NF_REGION] = "policy region, two regions per inode",
};

/* Pages/s that pwb_sync pushes through the null backend on @ctx contexts
 * for dense dirty ranges (8 inodes, o.null_pages in all), with @nf in
 * use; one run. */
static double null_once(unsigned int ctx, enum null_feature nf,
			struct result *res)
{
	const unsigned int nr_inodes = 8;
	uint64_t per = o.null_pages / nr_inodes;
	struct pwb_bdi *bdi;
	struct app_inode ai[8];
	uint8_t *latch = NULL;
	struct pwb_stats st;
	char spec[64];
	double t0, t1;
	unsigned int i;

	if (nf == NF_REGION) {
		/* Two regions per inode (in MiB, as the policy takes it):
		 * each run of pages is cut at a region's end once. */
		uint64_t mib = per * PS / 2 >> 20;

		snprintf(spec, sizeof(spec), "region:bytes=%" PRIu64 "M",
			 mib ? mib : 1);
		g_policy = spec;
	}
	bdi = bdi_open(g_sparse, "null", ctx, false);
	g_policy = NULL;
	if (nf == NF_LATCH) {
		latch = calloc(per * nr_inodes, 1);
		if (!latch)
			die("out of memory");
	}
	for (i = 0; i < nr_inodes; i++) {
		ai[i] = (struct app_inode){ .base = i * per * PS, .pages = per };
		if (latch)
			ai[i].latch = latch + i * per;
		if (pwb_inode_open(bdi, i, nf == NF_LATCH ? &app_latch_ops
							  : &app_ops,
				   &ai[i], &ai[i].inode))
			die("pwb_inode_open failed");
		/* LSNs 1..8, all durable before the sync: priced is the
		 * tracking and the checks, not a wait for a log. */
		if (nf == NF_LSN ? pwb_mark_dirty_lsn(ai[i].inode, 0, per * PS,
						      i + 1)
				 : pwb_mark_dirty(ai[i].inode, 0, per * PS))
			die("pwb_mark_dirty failed");
	}
	if (nf == NF_LSN && pwb_bdi_log_durable(bdi, nr_inodes))
		die("pwb_bdi_log_durable failed");
	t0 = bench_now_s();
	if (pwb_sync(bdi))
		die("pwb_sync failed");
	t1 = bench_now_s();
	pwb_bdi_stats(bdi, &st);
	if (st.written_pages != per * nr_inodes)
		die("null: %" PRIu64 " pages written, expected %" PRIu64,
		    st.written_pages, per * nr_inodes);
	res->io_submitted = st.io_submitted;
	res->io_extents = st.io_extents;
	res->written_pages = st.written_pages;
	res->secs = t1 - t0;
	pwb_bdi_close(bdi);
	free(latch);
	return (double)st.written_pages / (t1 - t0);
}

/* The fields every row of the null workload shares: @ctx contexts,
 * @pps pages a second (the best run's, whose counters @r holds). */
static void null_row(struct result *r, unsigned int ctx, double pps)
{
	r->wl = WL_NULL;
	r->backend = "null";
	r->ctx = ctx;
	r->fio = r->kern = -1;
	r->unit = "Mpages/s";
	r->pwb = pps / 1e6;
	r->bytes = r->written_pages * PS;
}

/* Context counts 1 and 2 (or the sweep), then each feature on one
 * context; best of o.repeat runs taken in turns. */
static void bench_null(void)
{
	unsigned int counts[MAX_SWEEP], n = 0, i, rep;
	struct result r[MAX_SWEEP], fr[NR_NF];
	double best[MAX_SWEEP] = { 0 }, fbest[NR_NF] = { 0 };

	if (o.nr_sweep > 1) {
		memcpy(counts, o.sweep, o.nr_sweep * sizeof(counts[0]));
		n = o.nr_sweep;
	} else {
		counts[n++] = 1;
		counts[n++] = o.sweep[0] > 1 ? o.sweep[0] : 2;
	}
	for (rep = 0; rep < o.repeat; rep++) {
		for (i = 0; i < n; i++) {
			struct result t = { 0 };
			double pps = null_once(counts[i], NF_PLAIN, &t);

			if (pps > best[i]) {
				best[i] = pps;
				r[i] = t;
			}
		}
		/* The plain figure the features are set against is the
		 * one-context one, run in the same turn. */
		fbest[NF_PLAIN] = best[0];
		for (i = NF_PLAIN + 1; counts[0] == 1 && i < NR_NF; i++) {
			struct result t = { 0 };
			double pps = null_once(1, (enum null_feature)i, &t);

			if (pps > fbest[i]) {
				fbest[i] = pps;
				fr[i] = t;
			}
		}
	}
	for (i = 0; i < n; i++) {
		null_row(&r[i], counts[i], best[i]);
		snprintf(r[i].note, sizeof(r[i].note),
			 "dense ranges; %.2f ns/page; x%.2f vs %u ctx",
			 1e9 / best[i], best[i] / best[0], counts[0]);
		add_result(&r[i]);
	}
	if (counts[0] != 1)
		return;	/* the features are priced against one context */
	for (i = NF_PLAIN + 1; i < NR_NF; i++) {
		null_row(&fr[i], 1, fbest[i]);
		snprintf(fr[i].note, sizeof(fr[i].note),
			 "with %s: %.2f ns/page, %+.2f ns vs plain (x%.2f)",
			 nf_name[i], 1e9 / fbest[i],
			 1e9 / fbest[i] - 1e9 / fbest[NF_PLAIN],
			 fbest[i] / fbest[NF_PLAIN]);
		add_result(&fr[i]);
	}
}

/* ---------------------------------------------------------------------- */
/* Throttling: writers faster than the device                             */

/*
 * Dirty memory here is what the throttle itself bounds (lib/throttle.c)
 * and what the kernel's balance_dirty_pages() counts: pages dirty plus
 * pages being written (NR_FILE_DIRTY + NR_WRITEBACK). Both are memory the
 * application must keep and cannot reuse yet.
 */
#define THR_SAMPLE_NS 10000000ull	/* dirty memory sampled every 10 ms */
#define THR_SKIP_S 5			/* seconds left out as warm-up */
#define THR_MAX_SECS 3600

struct thr_writer {
	struct app_inode *ai;
	uint64_t bytes;			/* atomic; own cache line */
	uint64_t inside_ns;		/* time inside pwb_mark_dirty */
	int err;
	pthread_t tid;
	bool *stop;
} __attribute__((aligned(64)));

struct thr_run {
	struct pwb_bdi *bdi;
	struct thr_writer *w;
	unsigned int nw;
	bool stop;
	double secs;			/* writing phase */
	uint64_t max_dirty;		/* bytes, peak of dirty + writeback */
	uint64_t max_chunks;		/* bytes, peak of the chunk sum */
	uint64_t sum_dirty, sum_wb, nr_samples; /* pages, for the means */
	uint64_t per_sec[THR_MAX_SECS];	/* writer bytes in each second */
	uint64_t dev_sec[THR_MAX_SECS];	/* bytes written to the device */
	unsigned int nr_secs;
};

/* The writeback chunk of a context writing at @bw bytes/s: mirrors
 * chunk_pages() in lib/writeback.c (half a second of bandwidth, rounded
 * up to the next multiple of 4 MiB). */
static uint64_t wb_chunk_bytes(uint64_t bw)
{
	const uint64_t min = 4ull << 20;

	return (bw / 2 / PS * PS + min) / min * min;
}

static void *thr_writer_fn(void *arg)
{
	struct thr_writer *w = arg;
	uint64_t idx = 0;

	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
		int rc;

		double t0;

		/* The application fills its page, then marks it dirty. */
		memcpy(w->ai->mem + idx * PS, g_src + (idx & 255) * PS, PS);
		t0 = bench_now_s();
		rc = pwb_mark_dirty(w->ai->inode, idx * PS, PS);
		w->inside_ns += (uint64_t)((bench_now_s() - t0) * 1e9);
		if (rc && !w->err)
			w->err = rc;
		__atomic_add_fetch(&w->bytes, PS, __ATOMIC_RELAXED);
		if (++idx == w->ai->pages)
			idx = 0;
	}
	return NULL;
}

static uint64_t thr_written(const struct thr_run *t)
{
	uint64_t sum = 0;
	unsigned int i;

	for (i = 0; i < t->nw; i++)
		sum += __atomic_load_n(&t->w[i].bytes, __ATOMIC_RELAXED);
	return sum;
}

/* Runs on the main thread for the writing phase: samples dirty memory
 * every 10 ms, the writers' bytes every second. */
static void thr_sample(struct thr_run *t, double duration)
{
	unsigned int nctx = pwb_bdi_nr_wb_ctx(t->bdi), c;
	uint64_t last = 0, last_dev = 0, ticks = 0, per_sec_ticks = 1000000000ull /
						    THR_SAMPLE_NS;
	struct timespec ts;
	double t0 = bench_now_s();

	clock_gettime(CLOCK_MONOTONIC, &ts);
	for (;;) {
		struct pwb_stats st;
		uint64_t d, dev, chunks = 0;

		ts.tv_nsec += THR_SAMPLE_NS;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_nsec -= 1000000000;
			ts.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		pwb_bdi_stats(t->bdi, &st);
		d = (st.dirty_pages + st.writeback_pages) * PS;
		dev = st.bytes_written;
		t->sum_dirty += st.dirty_pages;
		t->sum_wb += st.writeback_pages;
		t->nr_samples++;
		t->max_dirty = BENCH_MAX(t->max_dirty, d);
		for (c = 0; c < nctx; c++)
			if (!pwb_wb_ctx_stats(t->bdi, c, &st))
				chunks += wb_chunk_bytes(st.write_bandwidth);
		t->max_chunks = BENCH_MAX(t->max_chunks, chunks);
		if (++ticks % per_sec_ticks == 0 && t->nr_secs < THR_MAX_SECS) {
			uint64_t now = thr_written(t);

			t->dev_sec[t->nr_secs] = dev - last_dev;
			t->per_sec[t->nr_secs++] = now - last;
			last = now;
			last_dev = dev;
		}
		if (bench_now_s() - t0 >= duration)
			break;
	}
	t->secs = bench_now_s() - t0;
}

static struct pwb_bdi *thr_bdi_open(unsigned int ctx, bool throttle)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	int rc;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = ctx;
	cfg.nr_flushers = o.flushers;
	cfg.policy = o.policy;
	cfg.backend = o.backend;
	cfg.io_depth = o.depth;
	if (throttle) {
		cfg.flags |= PWB_BDI_THROTTLE;
		cfg.dirty_bytes = o.dirty_limit;
		cfg.dirty_background_bytes =
			o.dirty_bg && o.dirty_bg <= o.dirty_limit
				? o.dirty_bg : o.dirty_limit / 2;
	} else {
		cfg.dirty_bytes = 0;
		cfg.dirty_background_bytes = 0;
		cfg.dirty_writeback_ms = 0;
	}
	rc = pwb_bdi_open(g_img, &cfg, &bdi);
	if (rc)
		die("pwb_bdi_open(%s): %s: %s", g_img, pwb_strerror(rc),
		    pwb_errmsg());
	return bdi;
}

/* One inode per writer over @img bytes, each its own region. */
static struct app_inode *thr_inodes(struct pwb_bdi *bdi, unsigned int n,
				    uint64_t img)
{
	struct app_inode *ai = calloc(n, sizeof(*ai));
	uint64_t per = img / n / PS * PS;
	unsigned int i;

	if (!ai)
		die("out of memory");
	for (i = 0; i < n; i++) {
		ai[i].base = (uint64_t)i * per;
		ai[i].mem = g_mem + ai[i].base;
		ai[i].pages = per / PS;
		if (pwb_inode_open(bdi, i, &app_ops, &ai[i], &ai[i].inode))
			die("pwb_inode_open: %s", pwb_errmsg());
	}
	return ai;
}

static void thr_inodes_close(struct pwb_bdi *bdi, struct app_inode *ai)
{
	int rc = pwb_bdi_close(bdi);

	if (rc)
		die("pwb_bdi_close: %s", pwb_strerror(rc));
	free(ai);
}

/* The device's write throughput for the I/O libpwb sends it: fio,
 * sequential max_io_bytes (1 MiB) writes, numjobs = contexts, iodepth =
 * io_depth, 5 s. No fsync at the end: the throttled writers' seconds hold
 * none either, and on a virtual disk one costs the host's whole cache. */
static double thr_fio(unsigned int ctx, uint64_t img)
{
	const char *engine = !strcmp(o.backend, "io_uring") ? "io_uring"
							     : "psync";
	uint64_t region = img / ctx / (1u << 20) * (1u << 20);
	char job[512];

	snprintf(job, sizeof(job),
		 "--ioengine=%s --iodepth=%u --numjobs=%u --rw=write --bs=1M "
		 "--size=%" PRIu64 " --offset_increment=%" PRIu64
		 " --runtime=5 --time_based",
		 engine, strcmp(engine, "psync") ? o.depth : 1, ctx, region,
		 region);
	return fio_run(job, false);
}

struct thr_sync {
	struct pwb_bdi *bdi;
	int rc;
	bool done;			/* atomic */
};

static void *thr_sync_fn(void *arg)
{
	struct thr_sync *s = arg;

	s->rc = pwb_sync(s->bdi);
	__atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* libpwb's own write rate without throttling: the writers' regions all
 * dirty at once, then pwb_sync. MiB/s of the writing, up to the last
 * write's completion; the device-cache flush that ends the sync is left
 * out (on a virtual disk it waits for the host's cache, and the throttled
 * seconds hold none). */
static double thr_flush_rate(unsigned int ctx, uint64_t img)
{
	struct pwb_bdi *bdi = thr_bdi_open(ctx, false);
	struct app_inode *ai = thr_inodes(bdi, o.threads, img);
	struct thr_sync sync = { .bdi = bdi };
	uint64_t bytes = 0, base;
	struct pwb_stats st;
	unsigned int i;
	double t0, t1;
	pthread_t tid;

	for (i = 0; i < o.threads; i++) {
		if (pwb_mark_dirty(ai[i].inode, 0, ai[i].pages * PS))
			die("pwb_mark_dirty: %s", pwb_errmsg());
		bytes += ai[i].pages * PS;
	}
	pwb_bdi_stats(bdi, &st);
	base = st.bytes_written;
	t0 = bench_now_s();
	if (pthread_create(&tid, NULL, thr_sync_fn, &sync))
		die("pthread_create failed");
	do {
		struct timespec ts = { 0, 200000 };

		nanosleep(&ts, NULL);
		pwb_bdi_stats(bdi, &st);
	} while (st.bytes_written - base < bytes &&
		 !__atomic_load_n(&sync.done, __ATOMIC_ACQUIRE));
	t1 = bench_now_s();
	pthread_join(tid, NULL);
	if (sync.rc)
		die("pwb_sync: %s", pwb_strerror(sync.rc));
	if (o.verbose)
		fprintf(stderr, "  libpwb unthrottled: %.3f s writing, %.3f s "
			"with the final flush\n", t1 - t0, bench_now_s() - t0);
	thr_inodes_close(bdi, ai);
	return (double)bytes / MIB / (t1 - t0);
}

struct thr_figures {
	double writer;		/* MiB/s after the warm-up */
	double best_worst;	/* best over worst second after warm-up */
	double dev_best_worst;	/* the same for the device's writes */
	uint64_t max_dirty, bound;
	double throttle_s;
	uint64_t events;
	double inside_s;	/* the writers' time inside pwb_mark_dirty */
	uint64_t calls;		/* their calls */
	double blocked_s[PWB_BLOCK_NR_CAUSES];	/* libpwb's, by cause */
};

/* Where the writers' time inside libpwb went: blocked per cause, the
 * share of that time the causes account for, and the rest per call (the
 * calls' own running, and run-queue waits on a busy machine). */
static void thr_print_blocked(const struct thr_figures *f)
{
	double sum = 0;
	unsigned int i;

	for (i = 0; i < PWB_BLOCK_NR_CAUSES; i++)
		sum += f->blocked_s[i];
	fprintf(tbl, "  blocked %.2f s of the writers' %.2f s inside "
		"pwb_mark_dirty (accounted %.3f; the rest %.0f ns a call of "
		"%" PRIu64 "):",
		sum, f->inside_s, f->inside_s > 0 ? sum / f->inside_s : 0.0,
		f->calls ? (f->inside_s - sum) * 1e9 / (double)f->calls : 0.0,
		f->calls);
	for (i = 0; i < PWB_BLOCK_NR_CAUSES; i++)
		if (f->blocked_s[i] > 0)
			fprintf(tbl, " %s %.2f", pwb_block_cause_str(i),
				f->blocked_s[i]);
	fprintf(tbl, "\n");
}

static void thr_once(unsigned int ctx, uint64_t img, double duration,
		     struct thr_figures *f)
{
	struct thr_run *t = calloc(1, sizeof(*t));
	struct app_inode *ai;
	struct pwb_stats st;
	uint64_t best = 0, worst = UINT64_MAX, steady = 0;
	uint64_t dbest = 0, dworst = UINT64_MAX;
	unsigned int i;

	if (!t)
		die("out of memory");
	t->bdi = thr_bdi_open(ctx, true);
	t->nw = o.threads;
	ai = thr_inodes(t->bdi, t->nw, img);
	if (posix_memalign((void **)&t->w, 64, t->nw * sizeof(*t->w)))
		die("out of memory");
	memset(t->w, 0, t->nw * sizeof(*t->w));
	for (i = 0; i < t->nw; i++) {
		t->w[i].ai = &ai[i];
		t->w[i].stop = &t->stop;
		if (pthread_create(&t->w[i].tid, NULL, thr_writer_fn, &t->w[i]))
			die("pthread_create failed");
	}
	thr_sample(t, duration);
	__atomic_store_n(&t->stop, true, __ATOMIC_RELAXED);
	for (i = 0; i < t->nw; i++) {
		pthread_join(t->w[i].tid, NULL);
		if (t->w[i].err)
			die("pwb_mark_dirty under throttling: %s",
			    pwb_strerror(t->w[i].err));
	}
	pwb_bdi_stats(t->bdi, &st);
	if (pwb_sync(t->bdi))
		die("pwb_sync: %s", pwb_errmsg());
	for (i = THR_SKIP_S; i < t->nr_secs; i++) {
		best = BENCH_MAX(best, t->per_sec[i]);
		worst = t->per_sec[i] < worst ? t->per_sec[i] : worst;
		steady += t->per_sec[i];
		dbest = BENCH_MAX(dbest, t->dev_sec[i]);
		dworst = t->dev_sec[i] < dworst ? t->dev_sec[i] : dworst;
	}
	if (t->nr_secs <= THR_SKIP_S)
		die("throttle: --duration must exceed %d s", THR_SKIP_S);
	f->writer = (double)steady / MIB / (t->nr_secs - THR_SKIP_S);
	f->best_worst = worst ? (double)best / (double)worst : 1e9;
	f->dev_best_worst = dworst ? (double)dbest / (double)dworst : 1e9;
	f->max_dirty = t->max_dirty;
	f->bound = o.dirty_limit + t->max_chunks;
	f->throttle_s = (double)st.throttle_ns / 1e9;
	f->events = st.throttle_events;
	f->inside_s = 0;
	f->calls = thr_written(t) / PS;
	for (i = 0; i < t->nw; i++)
		f->inside_s += (double)t->w[i].inside_ns / 1e9;
	for (i = 0; i < PWB_BLOCK_NR_CAUSES; i++)
		f->blocked_s[i] = (double)st.blocked_ns[i] / 1e9;
	if (o.verbose) {
		fprintf(stderr, "  writer MiB per second:");
		for (i = 0; i < t->nr_secs; i++)
			fprintf(stderr, " %.0f", (double)t->per_sec[i] / MIB);
		fprintf(stderr, "\n  device MiB per second:");
		for (i = 0; i < t->nr_secs; i++)
			fprintf(stderr, " %.0f", (double)t->dev_sec[i] / MIB);
		fprintf(stderr, "\n  mean dirty %.1f MiB waiting, %.1f MiB being "
			"written; %" PRIu64 " background passes, flushers in "
			"passes %.0f%% of the time; requests of %.0f KiB on "
			"average\n",
			(double)t->sum_dirty * PS / MIB / (double)t->nr_samples,
			(double)t->sum_wb * PS / MIB / (double)t->nr_samples,
			st.background_passes,
			(double)st.flush_ns / 1e7 / t->secs /
				pwb_bdi_nr_wb_ctx(t->bdi),
			st.io_submitted ? (double)st.bytes_written / 1024 /
						  (double)st.io_submitted
					: 0.0);
	}
	thr_inodes_close(t->bdi, ai);
	free(t->w);
	free(t);
}

/*
 * o.runs runs, each: the device's throughput (fio, and libpwb's own
 * unthrottled write rate), the throttled writers for --duration seconds
 * (20 by default), then fio again. A virtual disk's pace drifts by tens of
 * percent within a minute, so the device's figure for a run is the mean
 * of the two fio runs around it, its pace in the middle of the run if the
 * drift is steady. Medians of the ratios; the peak of dirty memory is the
 * worst run's.
 */
static void bench_throttle(void)
{
	unsigned int ctx = o.sweep[0], k;
	uint64_t img = device_size(g_img);
	double duration = o.duration > 0 ? o.duration : 20;
	bool fio = !o.no_fio && strcmp(o.backend, "null") && have_fio();
	double wr[MAX_RUNS], dev[MAX_RUNS], own[MAX_RUNS], ratio[MAX_RUNS];
	double before, after;
	double bw[MAX_RUNS];
	uint64_t max_dirty = 0, bound = 0;
	struct result r = { .wl = WL_THROTTLE, .backend = o.backend,
			    .ctx = ctx, .depth = o.depth,
			    .threads = o.threads, .kern = -1,
			    .unit = "MiB/s" };

	img = img < 2 * o.size ? img : 2 * o.size;
	for (k = 0; k < o.runs; k++) {
		struct thr_figures f;

		before = fio ? thr_fio(ctx, img) : -1;
		own[k] = thr_flush_rate(ctx, img);
		thr_once(ctx, img, duration, &f);
		after = fio ? thr_fio(ctx, img) : -1;
		dev[k] = before > 0 && after > 0 ? (before + after) / 2
						 : BENCH_MAX(before, after);
		wr[k] = f.writer;
		ratio[k] = f.writer / (dev[k] > 0 ? dev[k] : own[k]);
		bw[k] = f.best_worst;
		max_dirty = BENCH_MAX(max_dirty, f.max_dirty);
		bound = BENCH_MAX(bound, f.bound);
		fprintf(tbl, "throttle run %u: writers %.1f MiB/s (after %d s), "
			"device: fio %.1f (before %.1f, after %.1f), libpwb "
			"unthrottled %.1f MiB/s; "
			"writer/device %.2f; best/worst second %.2f (device's "
			"own %.2f); peak "
			"dirty %.1f MiB (bound %.1f MiB); throttled %.1f s in "
			"%" PRIu64 " sleeps\n",
			k, f.writer, THR_SKIP_S, dev[k], before, after, own[k],
			ratio[k],
			f.best_worst, f.dev_best_worst,
			(double)f.max_dirty / MIB,
			(double)f.bound / MIB, f.throttle_s, f.events);
		thr_print_blocked(&f);
	}
	r.pwb = median(wr, o.runs);
	r.fio = fio ? median(dev, o.runs) : median(own, o.runs);
	r.secs = duration;
	snprintf(r.note, sizeof(r.note),
		 "vs %s; w/d %.2f (>=0.9); best/worst %.2f (<=1.5); "
		 "dirty max %.1f<=%.1f MiB",
		 fio ? "fio" : "own write rate", median(ratio, o.runs),
		 median(bw, o.runs), (double)max_dirty / MIB,
		 (double)bound / MIB);
	add_result(&r);
}

/* ---------------------------------------------------------------------- */
/* Memory: tracking cost per dirty page and per inode                     */

/* Bytes the C library's allocator has handed out now: in-use heap chunks
 * plus mmap'd blocks, summed over every arena (mallinfo2). */
static uint64_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/*
 * One bdi on the sparse image, null backend, no writeback (nothing is
 * written during the measurement): the heap growth while one thread
 * dirties o.md_pages dense pages one pwb_mark_dirty() per page, divided
 * by the pages; then while it opens --mem-inodes inodes, divided by the
 * inodes; then while it dirties the first page of each of them (sparse
 * dirtying: the worst case per page).
 */
#define MEM_CACHED_BYTES (1ull << 30)
static double memory_cached_page(void);

static void bench_memory(void)
{
	uint64_t pages = o.md_pages, n = o.mem_inodes, i, before, after;
	struct pwb_bdi *bdi = bdi_open(g_sparse, "null", o.sweep[0], false);
	struct app_inode one = { .pages = pages }, *ai;
	struct result r = { .wl = WL_MEMORY, .backend = "null",
			    .ctx = o.sweep[0], .threads = 1, .fio = -1,
			    .kern = -1, .unit = "B/page" };
	double per_page, per_inode, per_sparse, per_cached;

	ai = calloc(n, sizeof(*ai));
	if (!ai)
		die("out of memory");
	if (pwb_inode_open(bdi, 0, &app_ops, &one, &one.inode))
		die("pwb_inode_open: %s", pwb_errmsg());
	before = heap_in_use();
	for (i = 0; i < pages; i++)
		if (pwb_mark_dirty(one.inode, i * PS, PS))
			die("pwb_mark_dirty: %s", pwb_errmsg());
	after = heap_in_use();
	per_page = (double)(after - before) / (double)pages;

	before = heap_in_use();
	for (i = 0; i < n; i++) {
		ai[i] = (struct app_inode){ .pages = 1 };
		if (pwb_inode_open(bdi, i + 1, &app_ops, &ai[i], &ai[i].inode))
			die("pwb_inode_open: %s", pwb_errmsg());
	}
	after = heap_in_use();
	per_inode = (double)(after - before) / (double)n;
	/* A sparse page: the first dirty page of each of those inodes. */
	before = after;
	for (i = 0; i < n; i++)
		if (pwb_mark_dirty(ai[i].inode, 0, PS))
			die("pwb_mark_dirty: %s", pwb_errmsg());
	after = heap_in_use();
	per_sparse = (double)(after - before) / (double)n;
	pwb_bdi_close(bdi);
	free(ai);
	per_cached = memory_cached_page();

	r.pwb = per_page;
	r.bytes = pages * PS;
	snprintf(r.note, sizeof(r.note),
		 "%" PRIu64 " dense pages (limit 16 B/page); mallinfo2 deltas",
		 pages);
	add_result(&r);
	r.unit = "B/inode";
	r.pwb = per_inode;
	snprintf(r.note, sizeof(r.note),
		 "%" PRIu64 " inodes registered (limit 512 B/inode)", n);
	add_result(&r);
	r.unit = "B/page";
	r.pwb = per_sparse;
	snprintf(r.note, sizeof(r.note),
		 "first dirty page of each of those inodes (sparse: one "
		 "512-page leaf)");
	add_result(&r);
	r.pwb = per_cached;
	r.bytes = MEM_CACHED_BYTES;
	snprintf(r.note, sizeof(r.note),
		 "cached page of a 1 GiB sequential file (pwb_write, 1 MiB "
		 "calls): descriptor, index, tags; not the 4 KiB of data");
	add_result(&r);
}

/* ---------------------------------------------------------------------- */
/* WAL: transactions under the write-ahead rule                           */

#define WAL_REC 256u			/* bytes per log record */
#define WAL_LOG_BYTES (64ull << 20)	/* the log wraps around in this */
#define WAL_COMMIT_EVERY 8u		/* transactions per commit, per thread */

/*
 * The log: records appended under lock, made durable by one log writer
 * thread (group commit: one pwb_fsync of the log inode covers every
 * record appended before it), which then reports the durable LSN to the
 * data bdi. Threads that commit, and the data bdi's log_force, ask the log
 * writer and wait. The log lives on a bdi of its own: log_force runs on a
 * data flusher, which must not wait for writeback of its own bdi.
 */
struct wal_log {
	pthread_mutex_t lock;
	pthread_cond_t want_cond;	/* a commit is wanted, or stop */
	pthread_cond_t done_cond;	/* durable moved */
	uint64_t next_lsn;		/* lock: last LSN handed out */
	uint64_t durable;		/* lock: committed up to */
	bool want, stop;		/* lock */
	uint64_t commits;		/* lock */
	struct pwb_inode *inode;	/* the log inode */
	struct pwb_bdi *data_bdi;
	uint8_t *mem;			/* WAL_LOG_BYTES of log pages */
	int err;			/* first failure, lock */
};

static struct wal_log g_wal;

static void wal_wait_durable(struct wal_log *l, uint64_t lsn)
{
	pthread_mutex_lock(&l->lock);
	while (l->durable < lsn && !l->err) {
		l->want = true;
		pthread_cond_signal(&l->want_cond);
		pthread_cond_wait(&l->done_cond, &l->lock);
	}
	pthread_mutex_unlock(&l->lock);
}

static void *wal_writer_fn(void *arg)
{
	struct wal_log *l = arg;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		uint64_t target;
		int rc;

		while (!l->want && !l->stop)
			pthread_cond_wait(&l->want_cond, &l->lock);
		if (l->stop)
			break;
		l->want = false;
		target = l->next_lsn;	/* every record appended so far */
		pthread_mutex_unlock(&l->lock);
		rc = pwb_fsync(l->inode);
		if (!rc)
			rc = pwb_bdi_log_durable(l->data_bdi, target);
		pthread_mutex_lock(&l->lock);
		if (rc && !l->err)
			l->err = rc;
		if (!rc && target > l->durable)
			l->durable = target;
		l->commits++;
		pthread_cond_broadcast(&l->done_cond);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

/*
 * The data bdi's log_force: the log writer commits all the time for the
 * transactions, so wait for its next group commit rather than start one
 * of our own (a commit started for a flusher holds fewer records, and a
 * transaction whose record just missed it waits for one more); ask for
 * one only if none came within 5 ms (the end of a run, when nobody
 * commits).
 */
static int wal_log_force(uint64_t lsn, void *arg)
{
	struct wal_log *l = arg;
	struct timespec ts;
	int err;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 5000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&l->lock);
	while (l->durable < lsn && !l->err &&
	       !pthread_cond_timedwait(&l->done_cond, &l->lock, &ts))
		;
	err = l->err;
	pthread_mutex_unlock(&l->lock);
	if (!err)
		wal_wait_durable(l, lsn);
	return l->err;
}

struct wal_worker {
	pthread_t tid;
	unsigned int t;
	bool lsn;			/* pwb_mark_dirty_lsn, else plain */
	struct app_inode *data;
	double deadline;
	uint64_t txns;
	int err;
};

static void *wal_worker_fn(void *arg)
{
	struct wal_worker *w = arg;
	struct wal_log *l = &g_wal;
	uint64_t s = 0x9e3779b97f4a7c15ull * (w->t + 1), lsn = 0;

	while (bench_now_s() < w->deadline) {
		uint64_t pg = xrand(&s) % w->data->pages, off;
		int rc;

		/* Append the log record of the change. */
		pthread_mutex_lock(&l->lock);
		lsn = ++l->next_lsn;
		off = lsn * WAL_REC % WAL_LOG_BYTES;
		memcpy(l->mem + off, &lsn, sizeof(lsn));
		rc = pwb_mark_dirty(l->inode, off, WAL_REC);
		pthread_mutex_unlock(&l->lock);
		if (rc)
			goto fail;
		/* Change the data page: its LSN in its first 8 bytes. */
		memcpy(w->data->mem + pg * PS, &lsn, sizeof(lsn));
		off = pg * PS;
		rc = w->lsn ? pwb_mark_dirty_lsn(w->data->inode, off, PS, lsn)
			    : pwb_mark_dirty(w->data->inode, off, PS);
		if (rc)
			goto fail;
		if (++w->txns % WAL_COMMIT_EVERY == 0)
			wal_wait_durable(l, lsn);
	}
	wal_wait_durable(l, lsn);
	return NULL;
fail:
	w->err = -1;
	return NULL;
}

struct wal_figures {
	double txns, forces, commits, held;	/* per second */
};

/* One run of @duration s: enforced (@lsn) or plain. */
static void wal_once(bool lsn, double duration, uint64_t data_bytes,
		     struct wal_figures *f)
{
	struct wal_log *l = &g_wal;
	struct pwb_bdi_config cfg;
	struct pwb_bdi *log_bdi, *data_bdi;
	struct app_inode data = { .mem = g_mem, .pages = data_bytes / PS };
	struct app_inode logi = { .mem = NULL, .pages = WAL_LOG_BYTES / PS };
	struct wal_worker w[MAX_THREADS];
	struct pwb_stats st;
	pthread_t writer;
	uint64_t txns = 0;
	double t0, secs;
	unsigned int i;
	int rc;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->want_cond, NULL);
	pthread_cond_init(&l->done_cond, NULL);
	l->mem = g_wal_mem;
	logi.mem = g_wal_mem;
	logi.base = 0;
	/* The data bdi: writeback all the time (short expiry, a low
	 * background threshold), so that flushers meet pages whose log
	 * records are not yet durable. */
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = o.sweep[0] == CTX_AUTO ? 2 : o.sweep[0];
	cfg.backend = o.backend;
	cfg.io_depth = o.depth;
	cfg.dirty_expire_ms = 50;
	cfg.dirty_writeback_ms = 50;
	cfg.dirty_background_bytes = 4ull << 20;
	cfg.dirty_bytes = 0;
	cfg.log_force = wal_log_force;
	cfg.log_force_arg = l;
	rc = pwb_bdi_open(g_img, &cfg, &data_bdi);
	if (rc)
		die("pwb_bdi_open(%s): %s: %s", g_img, pwb_strerror(rc),
		    pwb_errmsg());
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.backend = o.backend;
	cfg.io_depth = o.depth;
	rc = pwb_bdi_open(g_wal_img, &cfg, &log_bdi);
	if (rc)
		die("pwb_bdi_open(%s): %s: %s", g_wal_img, pwb_strerror(rc),
		    pwb_errmsg());
	if (pwb_inode_open(data_bdi, 1, &app_ops, &data, &data.inode) ||
	    pwb_inode_open(log_bdi, 1, &app_ops, &logi, &logi.inode))
		die("pwb_inode_open: %s", pwb_errmsg());
	l->inode = logi.inode;
	l->data_bdi = data_bdi;
	if (pthread_create(&writer, NULL, wal_writer_fn, l))
		die("pthread_create failed");
	t0 = bench_now_s();
	for (i = 0; i < o.threads; i++) {
		w[i] = (struct wal_worker){ .t = i, .lsn = lsn, .data = &data,
					    .deadline = t0 + duration };
		if (pthread_create(&w[i].tid, NULL, wal_worker_fn, &w[i]))
			die("pthread_create failed");
	}
	for (i = 0; i < o.threads; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err)
			die("wal: a transaction failed: %s", pwb_errmsg());
		txns += w[i].txns;
	}
	secs = bench_now_s() - t0;
	if (pwb_bdi_stats(data_bdi, &st))
		die("pwb_bdi_stats: %s", pwb_errmsg());
	/* Data last: its integrity sync may still force the log. */
	if (pwb_sync(data_bdi))
		die("pwb_sync: %s", pwb_errmsg());
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->want_cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(writer, NULL);
	if (l->err)
		die("wal: group commit failed: %s", pwb_strerror(l->err));
	f->txns = (double)txns / secs;
	f->forces = (double)st.log_forces / secs;
	f->commits = (double)l->commits / secs;
	f->held = (double)st.lsn_held_pages / secs;
	if (pwb_bdi_close(data_bdi) || pwb_bdi_close(log_bdi))
		die("pwb_bdi_close: %s", pwb_errmsg());
	pthread_cond_destroy(&l->done_cond);
	pthread_cond_destroy(&l->want_cond);
	pthread_mutex_destroy(&l->lock);
}

/*
 * The rule's cost: the same transactions with pwb_mark_dirty_lsn() (and
 * log_force) and with plain pwb_mark_dirty(), the two taking turns, the
 * median of --runs each.
 */
static void bench_wal(void)
{
	double duration = o.duration > 0 ? o.duration : 3;
	uint64_t data_bytes = o.size < device_size(g_img) ? o.size
							  : device_size(g_img);
	double on[MAX_RUNS], off[MAX_RUNS], fo[MAX_RUNS], cm[MAX_RUNS];
	double ratio[MAX_RUNS];
	struct result r = { .wl = WL_WAL, .backend = o.backend,
			    .ctx = o.sweep[0] == CTX_AUTO ? 2 : o.sweep[0],
			    .depth = o.depth, .threads = o.threads,
			    .fio = -1, .kern = -1, .unit = "txn/s" };
	unsigned int k;

	for (k = 0; k < o.runs; k++) {
		struct wal_figures a, b;

		/* Taking turns at going first cancels slow drifts of a
		 * shared machine. */
		if (k % 2) {
			wal_once(false, duration, data_bytes, &b);
			wal_once(true, duration, data_bytes, &a);
		} else {
			wal_once(true, duration, data_bytes, &a);
			wal_once(false, duration, data_bytes, &b);
		}
		ratio[k] = a.txns / b.txns;
		on[k] = a.txns;
		off[k] = b.txns;
		fo[k] = a.forces;
		cm[k] = a.commits;
		fprintf(tbl, "wal run %u: enforced %.0f txn/s (log forces "
			"%.1f/s, group commits %.0f/s, held pages %.1f/s), "
			"plain %.0f txn/s (group commits %.0f/s); "
			"enforced/plain %.2f\n",
			k, a.txns, a.forces, a.commits, a.held, b.txns,
			b.commits, a.txns / b.txns);
	}
	r.pwb = median(on, o.runs);
	r.secs = duration;
	/* The verdict is the median of the runs' own ratios: each pair ran
	 * back to back, under the same neighbours. */
	snprintf(r.note, sizeof(r.note),
		 "plain %.0f txn/s; enforced/plain %.2f (>=0.8, median of "
		 "pairs); log forces %.1f/s; group commits %.0f/s",
		 median(off, o.runs), median(ratio, o.runs),
		 median(fo, o.runs), median(cm, o.runs));
	add_result(&r);
}

/* ---------------------------------------------------------------------- */
/* The data path (issue 12): library-owned pages and the allocator        */

/* Inodes with library-owned pages: user-map mode (an identity map_page
 * into a region per inode) or, with @ops NULL, allocator mode. */
struct dp_inode {
	uint64_t base;		/* user-map mode: device offset of page 0 */
	struct pwb_inode *inode;
};

static int dp_map_page(struct pwb_inode *inode, uint64_t index,
		       uint64_t *dev_off)
{
	const struct dp_inode *d = pwb_inode_priv(inode);

	*dev_off = d->base + index * PS;
	return 0;
}

static const struct pwb_inode_ops dp_usermap_ops = { .map_page = dp_map_page };

/*
 * Heap bytes per cached page of library-owned pages: one inode written
 * from start to end in 1 MiB pwb_write() calls, MEM_CACHED_BYTES in all,
 * into a cache that holds all of it (null backend, no writeback: every
 * page stays cached and dirty). The page buffers come from mapped chunks
 * and are not counted: what is left is the page cache's own bookkeeping
 * (page descriptors, the index) and the engine's dirty tags.
 */
static double memory_cached_page(void)
{
	uint64_t pages = MEM_CACHED_BYTES / PS, before, after, i;
	struct dp_inode d = { .base = 0 };
	struct pwb_bdi *bdi;
	uint8_t *buf;

	if (posix_memalign((void **)&buf, 4096, 1u << 20))
		die("out of memory");
	memset(buf, 0x5a, 1u << 20);
	g_cache_bytes = MEM_CACHED_BYTES + (64ull << 20);
	bdi = bdi_open(g_sparse, "null", 1, false);
	g_cache_bytes = 0;
	if (pwb_inode_open(bdi, 1, &dp_usermap_ops, &d, &d.inode))
		die("pwb_inode_open: %s", pwb_errmsg());
	before = heap_in_use();
	for (i = 0; i < MEM_CACHED_BYTES >> 20; i++)
		if (pwb_write(d.inode, buf, 1u << 20, i << 20) != 1 << 20)
			die("pwb_write: %s", pwb_errmsg());
	after = heap_in_use();
	pwb_inode_close(d.inode);
	pwb_bdi_close(bdi);
	free(buf);
	return (double)(after - before) / (double)pages;
}

/* A bdi for the data path: @cache bytes of cache, writeback only when
 * asked unless @writeback. */
static struct pwb_bdi *dp_bdi_open(const char *path, const char *backend,
				   unsigned int ctx, uint64_t cache,
				   bool writeback)
{
	struct pwb_bdi *bdi;

	g_cache_bytes = cache;
	bdi = bdi_open(path, backend, ctx, writeback);
	g_cache_bytes = 0;
	return bdi;
}

struct dp_thread {
	pthread_t tid;
	struct pwb_inode *inode;	/* libpwb contender */
	int fd;				/* kernel contender */
	const uint8_t *src;		/* copy ceiling: memory to copy from */
	uint64_t base;			/* kernel: the file region */
	uint64_t *order;		/* page indexes, in order of access */
	uint64_t n;
	size_t chunk;			/* bytes per call (0: one page) */
	bool read;
	double *stamps;			/* if set: when each call ended */
	pthread_barrier_t *bar;
	double t0, t1;
	double cpu;			/* the thread's CPU seconds over its
					 * calls */
	int err;
};

/*
 * pcache-stream's writes, through one of two functions by whether the
 * threads together have written cache_bytes yet (g_stream_cache; bytes
 * written so far in g_stream_done), so that a profiler can tell the two
 * phases apart: valgrind --tool=callgrind
 * --toggle-collect=stream_write_after_full ...
 */
static uint64_t g_stream_cache, g_stream_done;
static uint64_t g_stream_calls[2];	/* calls before, after full */
/* -v (stream_verbose()): the bdi's stats when the cache became full (the
 * writer takes them once, in the timed loop), the writer's CPU seconds
 * then and in all, its calls' wall time, the final pwb_sync()'s. */
static struct pwb_bdi *g_stream_bdi;
static struct pwb_stats g_stream_split;
static bool g_stream_split_taken;
static double g_stream_split_cpu;
static double g_stream_cpu, g_stream_wall;
static double g_stream_sync_s;
static double g_stream_pcpu[3];		/* -v: the process's CPU s at the
					 * writer's start, split and end */
static long g_stream_csw[3][2];		/* -v: the writer's context
					 * switches (voluntary, not) at its
					 * start, the split and its end */
static double thread_cpu_s(void);

/* The calling thread's context switches: voluntary, involuntary. */
static void stream_csw(long v[2])
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		v[0] = v[1] = 0;
	else {
		v[0] = ru.ru_nvcsw;
		v[1] = ru.ru_nivcsw;
	}
}

/* The process's CPU time, in seconds. */
static double process_cpu_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each counts its calls: two identical bodies would be folded into one. */
static ssize_t __attribute__((noinline))
stream_write_filling(struct pwb_inode *inode, const void *buf, size_t len,
		     uint64_t off)
{
	__atomic_fetch_add(&g_stream_calls[0], 1, __ATOMIC_RELAXED);
	return pwb_write(inode, buf, len, off);
}

static ssize_t __attribute__((noinline))
stream_write_after_full(struct pwb_inode *inode, const void *buf, size_t len,
			uint64_t off)
{
	__atomic_fetch_add(&g_stream_calls[1], 1, __ATOMIC_RELAXED);
	return pwb_write(inode, buf, len, off);
}

static ssize_t dp_stream_call(struct dp_thread *t, const void *buf,
			      size_t len, uint64_t off)
{
	bool full = __atomic_load_n(&g_stream_done, __ATOMIC_RELAXED) >=
		    g_stream_cache;
	ssize_t r;

	if (!t->inode)
		r = pwrite(t->fd, buf, len, (off_t)(t->base + off));
	else if (full)
		r = stream_write_after_full(t->inode, buf, len, off);
	else
		r = stream_write_filling(t->inode, buf, len, off);
	/* -v: the figures when the cache became full (what the device had
	 * not yet written then is written in the after phase). */
	if (__atomic_add_fetch(&g_stream_done, len, __ATOMIC_RELAXED) >=
		    g_stream_cache && !full && o.verbose && g_stream_bdi &&
	    !__atomic_exchange_n(&g_stream_split_taken, true,
				 __ATOMIC_RELAXED)) {
		g_stream_split_cpu = thread_cpu_s() - t->cpu;
		stream_csw(g_stream_csw[1]);
		g_stream_pcpu[1] = process_cpu_s();
		if (pwb_bdi_stats(g_stream_bdi, &g_stream_split))
			die("pwb_bdi_stats: %s", pwb_errmsg());
	}
	return r;
}

/* The calling thread's CPU time, in seconds. */
static double thread_cpu_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *dp_thread_fn(void *arg)
{
	struct dp_thread *t = arg;
	size_t len = t->chunk ? t->chunk : PS;
	uint8_t *buf;
	uint64_t i;

	if (posix_memalign((void **)&buf, 4096, len))
		die("out of memory");
	memset(buf, 0x5a, len);	/* g_src exists only with an image */
	pthread_barrier_wait(t->bar);
	t->t0 = bench_now_s();
	t->cpu = thread_cpu_s();
	if (t->stamps) {
		stream_csw(g_stream_csw[0]);
		g_stream_pcpu[0] = process_cpu_s();
	}
	for (i = 0; i < t->n && !t->err; i++) {
		uint64_t off = t->order[i] * len;
		ssize_t r;

		if (t->stamps) {
			r = dp_stream_call(t, buf, len, off);
		} else if (t->src) {
			memcpy(buf, t->src + t->base + off, len);
			/* The copy is the measurement: keep it. */
			__asm__ volatile("" : : "r"(buf) : "memory");
			r = (ssize_t)len;
		} else if (t->inode) {
			r = t->read ? pwb_read(t->inode, buf, len, off)
				    : pwb_write(t->inode, buf, len, off);
		} else {
			r = t->read ? pread(t->fd, buf, len,
					    (off_t)(t->base + off))
				    : pwrite(t->fd, buf, len,
					     (off_t)(t->base + off));
		}
		if (r != (ssize_t)len)
			t->err = r < 0 ? (t->inode ? (int)-r : errno) : EIO;
		if (t->stamps)
			t->stamps[i] = bench_now_s();
	}
	t->t1 = bench_now_s();
	t->cpu = thread_cpu_s() - t->cpu;
	if (t->stamps) {
		stream_csw(g_stream_csw[2]);
		g_stream_pcpu[2] = process_cpu_s();
	}
	free(buf);
	return NULL;
}

/* Start the threads together; calls (of 4 KiB, or of their chunk) per
 * second over all of them (from the first start to the last end). */
static double dp_run_threads(struct dp_thread *t, unsigned int n)
{
	pthread_barrier_t bar;
	double t0 = 1e300, t1 = 0;
	uint64_t calls = 0;
	unsigned int i;

	pthread_barrier_init(&bar, NULL, n);
	for (i = 0; i < n; i++) {
		t[i].bar = &bar;
		if (pthread_create(&t[i].tid, NULL, dp_thread_fn, &t[i]))
			die("pthread_create failed");
	}
	for (i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		if (t[i].err)
			die("data path: a %s failed: %s",
			    t[i].read ? "read" : "write", strerror(t[i].err));
		t0 = t[i].t0 < t0 ? t[i].t0 : t0;
		t1 = t[i].t1 > t1 ? t[i].t1 : t1;
		calls += t[i].n;
	}
	pthread_barrier_destroy(&bar);
	return (double)calls / (t1 - t0);
}

/* Thread i's pages of its own file: 0 .. per - 1, shuffled. */
static uint64_t *dp_order(uint64_t per, uint64_t *seed)
{
	uint64_t *v = malloc(per * sizeof(*v)), i;

	if (!v)
		die("out of memory");
	for (i = 0; i < per; i++)
		v[i] = i;
	for (i = per; i > 1; i--) {
		uint64_t j = xrand(seed) % i, x = v[i - 1];

		v[i - 1] = v[j];
		v[j] = x;
	}
	return v;
}

/*
 * pcache-write: T threads, each pwb_write()s every 4 KiB page of its own
 * inode once in random order into a cold cache big enough for all of it
 * (no writeback meanwhile), and again into the warm cache (every page
 * cached and clean); against the same pwrite() calls through the kernel's
 * page cache of the image (its cache dropped first), no fsync in either
 * timing. pcache-read: the same pages read back from a warm cache
 * with pwb_read() and with pread().
 */
/* Sum of the threads' CPU seconds over their calls, per call, in ns. */
static double dp_cpu_ns(const struct dp_thread *t, unsigned int T)
{
	double cpu = 0;
	uint64_t calls = 0;
	unsigned int i;

	for (i = 0; i < T; i++) {
		cpu += t[i].cpu;
		calls += t[i].n;
	}
	return calls ? cpu * 1e9 / (double)calls : 0;
}

/*
 * pcache-read's copy ceiling: the same threads copy 4 KiB from the same
 * offsets of plain memory (as much as the cache holds, on huge pages as
 * the cache's pool is, written once so that it is mapped): the most a
 * cache in the caller's address space can do per call, whatever its
 * index costs. Calls per second; *@cpu_ns the CPU ns per call.
 */
static double dp_copy_ceiling(struct dp_thread *t, unsigned int T,
			      size_t bytes, double *cpu_ns)
{
	uint8_t *mem;
	double rate;
	unsigned int i;

	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap of %zu bytes: %s", bytes, strerror(errno));
#ifdef MADV_HUGEPAGE
	madvise(mem, bytes, MADV_HUGEPAGE);
#endif
	memset(mem, 0xa5, bytes);
	for (i = 0; i < T; i++) {
		t[i].inode = NULL;
		t[i].src = mem;
		t[i].read = true;
	}
	rate = dp_run_threads(t, T);
	*cpu_ns = dp_cpu_ns(t, T);
	for (i = 0; i < T; i++)
		t[i].src = NULL;
	munmap(mem, bytes);
	return rate;
}

/* One run of pcache-write or pcache-read: calls per second of libpwb
 * (*@pwb) and of the kernel (*@kern, -1 without it), and the CPU ns each
 * spent per call (*@pwb_cpu, *@kern_cpu): a figure other load on the
 * machine moves less than the wall clock. pcache-read also runs the copy
 * ceiling (*@copy, *@copy_cpu; -1 otherwise). */
static void dp_cached_once(bool read, bool warm, size_t chunk, double *pwb,
			   double *kern, double *pwb_cpu, double *kern_cpu,
			   double *copy, double *copy_cpu)
{
	unsigned int T = o.threads, i;
	uint64_t per = o.size / PS / T, seed = 42;
	struct dp_thread t[MAX_THREADS];
	struct dp_inode d[MAX_THREADS];
	struct pwb_bdi *bdi;
	int fd;

	bdi = dp_bdi_open(g_img, o.backend, o.sweep[0], 2 * o.size + (64 << 20),
			  false);
	for (i = 0; i < T; i++) {
		d[i].base = i * per * PS;
		if (pwb_inode_open(bdi, i + 1, &dp_usermap_ops, &d[i],
				   &d[i].inode))
			die("pwb_inode_open: %s", pwb_errmsg());
		t[i] = (struct dp_thread){ .inode = d[i].inode,
					   .order = dp_order(per, &seed),
					   .n = per, .read = false };
		if (chunk) {
			/* Whole chunks, from start to end. */
			t[i].chunk = chunk;
			t[i].n = per * PS / chunk;
			for (uint64_t j = 0; j < t[i].n; j++)
				t[i].order[j] = j;
		}
	}
	if (warm) {
		dp_run_threads(t, T);	/* the cache warm, all dirty */
		if (pwb_sync(bdi))
			die("pwb_sync failed");
		for (i = 0; i < T; i++)
			t[i].read = read;
	}
	*pwb = dp_run_threads(t, T);
	*pwb_cpu = dp_cpu_ns(t, T);
	for (i = 0; i < T; i++)
		pwb_inode_close(d[i].inode);
	pwb_bdi_close(bdi);
	*copy = -1;
	*copy_cpu = -1;
	if (read && warm)
		*copy = dp_copy_ceiling(t, T, (size_t)(T * per * PS),
					copy_cpu);

	*kern = -1;
	*kern_cpu = -1;
	if (!o.no_kernel) {
		drop_cache(g_img);
		fd = open(g_img, O_RDWR);
		if (fd < 0)
			die("%s: %s", g_img, strerror(errno));
		for (i = 0; i < T; i++) {
			t[i].inode = NULL;
			t[i].fd = fd;
			t[i].base = i * per * PS;
			t[i].read = false;
		}
		if (warm) {
			dp_run_threads(t, T);
			fdatasync(fd);
			for (i = 0; i < T; i++)
				t[i].read = read;
		}
		*kern = dp_run_threads(t, T);
		*kern_cpu = dp_cpu_ns(t, T);
		fdatasync(fd);
		close(fd);
	}
	for (i = 0; i < T; i++)
		free(t[i].order);
}

static void bench_dp_cached(enum workload wl)
{
	double p[MAX_RUNS], k[MAX_RUNS], pc[MAX_RUNS], kc[MAX_RUNS];
	double c[MAX_RUNS], cc[MAX_RUNS];
	unsigned int run, pass;
	bool read = wl == WL_PCREAD;

	/* pcache-write: a cold cache (every page new), then a warm one
	 * (every page cached and clean: the overwrite of a database page),
	 * then 1 MiB calls from start to end into a cold cache. */
	for (pass = read ? 1 : 0; pass < (read ? 2 : 3); pass++) {
		struct result r = { .wl = wl, .backend = o.backend,
				    .ctx = o.sweep[0], .depth = o.depth,
				    .threads = o.threads, .bytes = o.size,
				    .fio = -1, .unit = "kcalls/s" };

		double first;

		for (run = 0; run < o.runs; run++)
			dp_cached_once(read, pass == 1, pass == 2 ? (size_t)1 << 20 : 0,
				       &p[run], &k[run], &pc[run], &kc[run],
				       &c[run], &cc[run]);
		first = k[0] > 0 ? p[0] / k[0] : 0.0;	/* before the sort */
		r.pwb = median(p, o.runs) / 1e3;
		r.kern = o.no_kernel ? -1 : median(k, o.runs) / 1e3;
		if (pass == 2) {
			r.unit = "MiB/s";
			r.pwb *= 1e3;
			r.kern = o.no_kernel ? -1 : r.kern * 1e3;
			snprintf(r.note, sizeof(r.note), "1 MiB pwb_write vs "
				 "pwrite, start to end, cold cache; goal "
				 "pwb/kern >= 1.5; first run x%.2f", first);
			add_result(&r);
			continue;
		}
		/* The first run of the process maps fresh memory for the
		 * cache; later bdis reuse the chunks the earlier ones gave
		 * back (pcache.c). Both are shown. */
		snprintf(r.note, sizeof(r.note), "4 KiB %s, random order, %s "
			 "cache; goal pwb/kern >= %s; first run x%.2f; CPU "
			 "ns/call %.0f vs %.0f",
			 read ? "pwb_read vs pread" : "pwb_write vs pwrite",
			 pass ? "warm" : "cold", read ? "3" : "2", first,
			 median(pc, o.runs), median(kc, o.runs));
		if (read) {
			/* The copy alone: the most pwb/kern could be here. */
			double cr = median(c, o.runs) / 1e3;
			size_t at = strlen(r.note);

			snprintf(r.note + at, sizeof(r.note) - at,
				 "; a bare 4 KiB copy %.0f kcalls/s (%.0f "
				 "ns/call): copy/kern %.2f, pwb/copy %.2f",
				 cr, median(cc, o.runs),
				 r.kern > 0 ? cr / r.kern : 0.0, r.pwb / cr);
		}
		add_result(&r);
	}
}

/*
 * reclaim: T threads stream pwb_write() over 4 x cache_bytes of their own
 * inodes (null backend: a written page is clean at once), so the cache
 * stays full and the contexts' flushers reclaim after every pass. Pages
 * the contexts reclaimed per second of the run, per context, on 1 context
 * and on 2 (or the sweep). The writers' own direct reclaim is not
 * counted (pwb_stats.direct_reclaimed_pages).
 */
static double dp_reclaim_once(unsigned int ctx, struct result *res)
{
	unsigned int T = o.threads, i;
	uint64_t cache = o.size / 4, per = o.size / PS / T, seed = 7;
	struct dp_thread t[MAX_THREADS];
	struct dp_inode d[MAX_THREADS];
	struct pwb_bdi *bdi = dp_bdi_open(g_sparse, "null", ctx, cache, true);
	struct pwb_stats st;
	double t0, t1;

	for (i = 0; i < T; i++) {
		d[i].base = i * per * PS;
		if (pwb_inode_open(bdi, i + 1, &dp_usermap_ops, &d[i],
				   &d[i].inode))
			die("pwb_inode_open: %s", pwb_errmsg());
		t[i] = (struct dp_thread){ .inode = d[i].inode,
					   .order = dp_order(per, &seed),
					   .n = per };
		for (uint64_t j = 0; j < per; j++)
			t[i].order[j] = j;	/* sequential streams */
	}
	t0 = bench_now_s();
	dp_run_threads(t, T);
	t1 = bench_now_s();
	pwb_bdi_stats(bdi, &st);
	res->secs = t1 - t0;
	res->written_pages = st.written_pages;
	snprintf(res->note, sizeof(res->note), "%" PRIu64 " reclaimed by "
		 "contexts (%.2f M/s while reclaiming), %" PRIu64 " by writers",
		 st.reclaimed_pages - st.direct_reclaimed_pages,
		 st.reclaim_ns ? (double)(st.reclaimed_pages -
					  st.direct_reclaimed_pages) * 1e3 /
					 (double)st.reclaim_ns
			       : 0.0,
		 st.direct_reclaimed_pages);
	for (i = 0; i < T; i++) {
		pwb_inode_close(d[i].inode);
		free(t[i].order);
	}
	pwb_bdi_close(bdi);
	return (double)(st.reclaimed_pages - st.direct_reclaimed_pages) /
	       (t1 - t0);
}

static void bench_dp_reclaim(void)
{
	unsigned int counts[MAX_SWEEP], n = 0, i, rep;
	struct result r[MAX_SWEEP];
	double best[MAX_SWEEP] = { 0 };

	if (o.nr_sweep > 1) {
		memcpy(counts, o.sweep, o.nr_sweep * sizeof(counts[0]));
		n = o.nr_sweep;
	} else {
		counts[n++] = 1;
		counts[n++] = o.sweep[0] > 1 ? o.sweep[0] : 2;
	}
	for (rep = 0; rep < o.repeat; rep++)
		for (i = 0; i < n; i++) {
			struct result t = { 0 };
			double v = dp_reclaim_once(counts[i], &t);

			if (v >= best[i]) {
				best[i] = v;
				r[i] = t;
			}
		}
	for (i = 0; i < n; i++) {
		char note[160];

		r[i].wl = WL_RECLAIM;
		r[i].backend = "null";
		r[i].ctx = counts[i];
		r[i].threads = o.threads;
		r[i].bytes = o.size;
		r[i].fio = r[i].kern = -1;
		r[i].unit = "kpages/s";
		r[i].pwb = best[i] / 1e3;
		snprintf(note, sizeof(note), "%s; per ctx %.3f M/s; x%.2f vs %u"
			 " ctx", r[i].note, best[i] / 1e6 / counts[i],
			 best[i] / best[0], counts[0]);
		snprintf(r[i].note, sizeof(r[i].note), "%s", note);
		add_result(&r[i]);
	}
}

#define STREAM_CHUNK (1u << 20)

/*
 * pcache-stream: T threads each write their own inode from start to end
 * in 1 MiB pwb_write() calls, o.size in all, four times cache_bytes, with
 * background writeback on. The cache is full once the threads together
 * have written cache_bytes; the rate before that point and the rate after
 * it (up to the end of a final pwb_sync()) are given apart, from the time
 * each call returned. On the null backend the device costs nothing, so
 * what the writer pays once the cache is full is reclaim's cost: the goal
 * is after/before >= 0.9. On the device the goal is after >= 0.9 x fio
 * (rw=write bs=1M O_DIRECT, numjobs T, end_fsync) over the same bytes.
 * The kernel: the same pwrite() stream through its page cache of the
 * image, then fdatasync, counted; split at the same byte count.
 */
struct stream_fig {
	double before, after;	/* MiB/s */
};

/* Split the calls of @t (each thread's stamps) at the call that brought
 * the total to @cache bytes; @t0 the start, @t_end the end (after the
 * sync). */
static struct stream_fig stream_split(struct dp_thread *t, unsigned int T,
				      uint64_t cache, double t_end)
{
	uint64_t total = 0, k, n = 0, at;
	double t0 = 1e300, *all;
	struct stream_fig f;
	unsigned int i;

	for (i = 0; i < T; i++)
		total += t[i].n;
	all = malloc(total * sizeof(*all));
	if (!all)
		die("out of memory");
	for (i = 0; i < T; i++) {
		t0 = t[i].t0 < t0 ? t[i].t0 : t0;
		for (k = 0; k < t[i].n; k++)
			all[n++] = t[i].stamps[k];
	}
	qsort(all, n, sizeof(*all), bench_cmp_double);
	at = cache / STREAM_CHUNK;
	at = at ? (at > n ? n : at) : 1;
	f.before = (double)at * STREAM_CHUNK / MIB / (all[at - 1] - t0);
	f.after = n > at ? (double)(n - at) * STREAM_CHUNK / MIB /
				   (t_end - all[at - 1])
			 : -1;
	free(all);
	return f;
}

/* One stream run: libpwb on @path with @backend (@kernel: the kernel's
 * page cache of g_img instead). */
static struct stream_fig stream_once(const char *path, const char *backend,
				     bool kernel, struct pwb_stats *st)
{
	unsigned int T = o.threads, i;
	uint64_t per = o.size / T / STREAM_CHUNK, cache = o.size / 4;
	struct dp_thread t[MAX_THREADS];
	struct dp_inode d[MAX_THREADS];
	struct pwb_bdi *bdi = NULL;
	struct stream_fig f;
	int fd = -1;

	if (kernel) {
		drop_cache(g_img);
		fd = open(g_img, O_RDWR);
		if (fd < 0)
			die("%s: %s", g_img, strerror(errno));
	} else {
		bdi = dp_bdi_open(path, backend, o.sweep[0], cache, true);
	}
	for (i = 0; i < T; i++) {
		d[i].base = i * per * STREAM_CHUNK;
		d[i].inode = NULL;
		if (!kernel && pwb_inode_open(bdi, i + 1, &dp_usermap_ops,
					      &d[i], &d[i].inode))
			die("pwb_inode_open: %s", pwb_errmsg());
		t[i] = (struct dp_thread){ .inode = d[i].inode, .fd = fd,
					   .base = d[i].base,
					   .chunk = STREAM_CHUNK, .n = per };
		t[i].order = malloc(per * sizeof(*t[i].order));
		t[i].stamps = calloc(per, sizeof(*t[i].stamps));
		if (!t[i].order || !t[i].stamps)
			die("out of memory");
		for (uint64_t j = 0; j < per; j++)
			t[i].order[j] = j;
	}
	g_stream_cache = cache;
	g_stream_done = 0;
	g_stream_calls[0] = g_stream_calls[1] = 0;
	g_stream_bdi = bdi;
	g_stream_split_taken = false;
	memset(&g_stream_split, 0, sizeof(g_stream_split));
	dp_run_threads(t, T);
	g_stream_bdi = NULL;
	g_stream_cpu = t[0].cpu;
	g_stream_wall = t[0].t1 - t[0].t0;
	if (kernel) {
		if (fdatasync(fd))
			die("fdatasync: %s", strerror(errno));
		close(fd);
	} else {
		double s0 = bench_now_s();

		if (pwb_sync(bdi))
			die("pwb_sync: %s", pwb_errmsg());
		g_stream_sync_s = bench_now_s() - s0;
	}
	f = stream_split(t, T, cache, bench_now_s());
	if (bdi) {
		if (st && pwb_bdi_stats(bdi, st))
			die("pwb_bdi_stats: %s", pwb_errmsg());
		for (i = 0; i < T; i++)
			pwb_inode_close(d[i].inode);
		pwb_bdi_close(bdi);
	}
	for (i = 0; i < T; i++) {
		free(t[i].order);
		free(t[i].stamps);
	}
	return f;
}

/*
 * -v: where a run's time went. The device's figures at the split (what
 * the cache held then is written in the after phase: with W MiB not yet
 * written, the after phase's rate is at most 384 / (384 + W) of the
 * device's), the device's own rate after the split, the writer's CPU and
 * context switches (an involuntary one: another thread ran on its CPU),
 * the other threads' CPU, and the waits by cause. One writer only for
 * the per-thread figures.
 */
static void stream_verbose(const struct pwb_stats *st, struct stream_fig f)
{
	double after_mib = (double)g_stream_calls[1] * STREAM_CHUNK / MIB;
	double dev_mib = (double)(st->bytes_written -
				  g_stream_split.bytes_written) / MIB;
	unsigned int c;

	fprintf(stderr, "  written %" PRIu64 " pages in %" PRIu64
		" requests; reclaimed %" PRIu64 " (%" PRIu64 " flusher "
		"passes); %" PRIu64 " passes (%" PRIu64 " background)\n",
		st->written_pages, st->io_submitted, st->reclaimed_pages,
		st->reclaim_passes, st->wb_passes, st->background_passes);
	fprintf(stderr, "  at the split: %.1f MiB written, %.1f MiB in "
		"flight, %.1f MiB dirty; the device's rate after it "
		"%.1f MiB/s\n",
		(double)g_stream_split.bytes_written / MIB,
		(double)g_stream_split.writeback_pages * PS / MIB,
		(double)g_stream_split.dirty_pages * PS / MIB,
		f.after > 0 && after_mib > 0 ? dev_mib * f.after / after_mib
					     : -1.0);
	if (o.threads == 1) {
		double cpu_after = g_stream_cpu - g_stream_split_cpu;

		fprintf(stderr, "  writer: CPU %.1f ms before, %.1f ms "
			"after, in %.1f ms of calls; context switches "
			"before %ld+%ld, after %ld+%ld (voluntary+not); "
			"other threads' CPU %.1f ms before, %.1f ms "
			"after\n",
			g_stream_split_cpu * 1e3, cpu_after * 1e3,
			g_stream_wall * 1e3,
			g_stream_csw[1][0] - g_stream_csw[0][0],
			g_stream_csw[1][1] - g_stream_csw[0][1],
			g_stream_csw[2][0] - g_stream_csw[1][0],
			g_stream_csw[2][1] - g_stream_csw[1][1],
			(g_stream_pcpu[1] - g_stream_pcpu[0] -
			 g_stream_split_cpu) * 1e3,
			(g_stream_pcpu[2] - g_stream_pcpu[1] - cpu_after) *
				1e3);
	}
	fprintf(stderr, "  final pwb_sync %.1f ms\n", g_stream_sync_s * 1e3);
	for (c = 0; c < PWB_BLOCK_NR_CAUSES; c++)
		if (st->blocked_events[c])
			fprintf(stderr, "  blocked %s: %" PRIu64 " times, "
				"%.1f ms\n", pwb_block_cause_str(c),
				st->blocked_events[c],
				(double)st->blocked_ns[c] / 1e6);
}

static void bench_dp_stream(void)
{
	unsigned int T = o.threads, run, nb = 0, b;
	uint64_t per = o.size / T / STREAM_CHUNK;
	const char *backends[2];
	bool fio = !o.no_fio && have_fio(), kernel = !o.no_kernel;
	double pb[2][MAX_RUNS], pa[2][MAX_RUNS], ratio[2][MAX_RUNS];
	double vf[2][MAX_RUNS], fv[MAX_RUNS], kb[MAX_RUNS], ka[MAX_RUNS];
	double kv[MAX_RUNS], direct[2][MAX_RUNS];

	if (!per)
		die("pcache-stream: --size too small for %u threads of 1 MiB "
		    "writes", T);
	backends[nb++] = "null";
	if (strcmp(o.backend, "null"))
		backends[nb++] = o.backend;
	/* Not timed: the first bdi of the process maps the cache's memory
	 * fresh (faulted in by the host), the later ones reuse the chunks
	 * it gave back (pcache-pool.c); without this the first run's
	 * "before" would measure that. */
	stream_once(g_sparse, "null", false, NULL);
	for (run = 0; run < o.runs; run++) {
		for (b = 0; b < nb; b++) {
			bool null = !strcmp(backends[b], "null");
			struct pwb_stats st;
			struct stream_fig f = stream_once(null ? g_sparse
							       : g_img,
							  backends[b], false,
							  &st);

			pb[b][run] = f.before;
			pa[b][run] = f.after;
			ratio[b][run] = f.after / f.before;
			direct[b][run] = (double)st.direct_reclaimed_pages;
			if (o.verbose)
				fprintf(stderr, "pcache-stream %s run %u: "
					"before %.1f after %.1f MiB/s, "
					"direct reclaims %" PRIu64 ", calls "
					"%" PRIu64 " filling, %" PRIu64
					" full\n", backends[b], run,
					f.before, f.after,
					st.direct_reclaimed_pages,
					g_stream_calls[0], g_stream_calls[1]);
			if (o.verbose)
				stream_verbose(&st, f);
		}
		fv[run] = -1;
		if (fio && nb > 1) {
			const char *engine = !strcmp(o.backend, "io_uring")
						     ? "io_uring" : "psync";
			char job[512];

			snprintf(job, sizeof(job),
				 "--ioengine=%s --iodepth=%u --numjobs=%u "
				 "--rw=write --bs=1M --size=%" PRIu64
				 " --offset_increment=%" PRIu64, engine,
				 strcmp(engine, "psync") ? o.depth : 1, T,
				 per * STREAM_CHUNK, per * STREAM_CHUNK);
			fv[run] = fio_run(job, true);
			if (o.verbose)
				fprintf(stderr, "pcache-stream fio run %u: "
					"%.1f MiB/s\n", run, fv[run]);
		}
		for (b = 0; b < nb; b++)
			vf[b][run] = fv[run] > 0 ? pa[b][run] / fv[run] : -1;
		kb[run] = ka[run] = kv[run] = -1;
		if (kernel) {
			double t0 = bench_now_s();
			struct stream_fig f = stream_once(NULL, NULL, true,
							  NULL);

			kv[run] = (double)o.size / MIB / (bench_now_s() - t0);
			kb[run] = f.before;
			ka[run] = f.after;
		}
	}
	for (b = 0; b < nb; b++) {
		struct result r = { .wl = WL_PCSTREAM, .backend = backends[b],
				    .ctx = o.sweep[0], .depth = o.depth,
				    .threads = T, .bytes = o.size,
				    .unit = "MiB/s" };

		r.pwb = median(pa[b], o.runs);
		r.fio = b ? median(fv, o.runs) : -1;
		r.kern = kernel ? median(kv, o.runs) : -1;
		if (!b)
			snprintf(r.note, sizeof(r.note), "after full; before "
				 "%.0f, after/before %.2f (goal >= 0.9); "
				 "direct reclaims %.0f; kernel after/before "
				 "%.2f", median(pb[b], o.runs),
				 median(ratio[b], o.runs),
				 median(direct[b], o.runs),
				 kernel ? median(ka, o.runs) /
						  median(kb, o.runs) : -1.0);
		else
			snprintf(r.note, sizeof(r.note), "after full; before "
				 "%.0f, after/before %.2f, after/fio %.2f (goal"
				 " >= 0.9); kernel after/before %.2f",
				 median(pb[b], o.runs),
				 median(ratio[b], o.runs),
				 median(vf[b], o.runs),
				 kernel ? median(ka, o.runs) /
						  median(kb, o.runs) : -1.0);
		add_result(&r);
	}
}

/*
 * pcache-uncached: T threads, each pwb_read()s 4 KiB pages of its own
 * inode at random from a cold cache (bounded to a sixteenth of the data,
 * so that most reads go to the device), one read in flight per thread;
 * against fio O_DIRECT rw=randread bs=4k, numjobs = T, iodepth 1 (psync),
 * over the same bytes. MiB/s.
 *
 * pcache-seqread: the same set-up, each thread pwb_read()s its inode from
 * start to end in calls of 1 MiB; against fio rw=read bs=1M O_DIRECT,
 * psync, numjobs = T. MiB/s.
 */
#define SEQREAD_CHUNK (1u << 20)

static void bench_dp_uncached(bool seq)
{
	unsigned int T = o.threads, i, run;
	size_t chunk = seq ? SEQREAD_CHUNK : PS;
	uint64_t per = o.size / PS / T, seed = 11;
	double p[MAX_RUNS], f[MAX_RUNS], rd_pages[MAX_RUNS] = { 0 };
	double rd_size[MAX_RUNS] = { 0 }, ra_share[MAX_RUNS] = { 0 };
	double cpu[MAX_RUNS] = { 0 };
	struct pwb_stats st;
	struct result r = { .wl = seq ? WL_PCSEQREAD : WL_PCUNCACHED,
			    .backend = o.backend,
			    .ctx = o.sweep[0], .depth = 1, .threads = T,
			    .bytes = o.size, .kern = -1, .unit = "MiB/s" };

	per -= per % (chunk / PS);	/* whole chunks per thread */

	for (run = 0; run < o.runs; run++) {
		struct pwb_bdi *bdi = dp_bdi_open(g_img, o.backend, o.sweep[0],
						  o.size / 16, false);
		struct dp_thread t[MAX_THREADS];
		struct dp_inode d[MAX_THREADS];
		char job[512];

		for (i = 0; i < T; i++) {
			d[i].base = i * per * PS;
			if (pwb_inode_open(bdi, i + 1, &dp_usermap_ops, &d[i],
					   &d[i].inode))
				die("pwb_inode_open: %s", pwb_errmsg());
			/* The application knows the size of its files. */
			if (pwb_inode_set_size(d[i].inode, per * PS))
				die("pwb_inode_set_size: %s", pwb_errmsg());
			t[i] = (struct dp_thread){ .inode = d[i].inode,
						   .order = dp_order(per, &seed),
						   .n = per, .read = true };
			if (seq) {	/* in order, a chunk per call */
				t[i].chunk = chunk;
				t[i].n = per * PS / chunk;
				for (uint64_t j = 0; j < t[i].n; j++)
					t[i].order[j] = j;
			}
		}
		p[run] = dp_run_threads(t, T) * (double)chunk / MIB;
		/* The readers' CPU per MiB read (their own threads issue
		 * and reap the reads). */
		for (i = 0; i < T; i++)
			cpu[run] += t[i].cpu;
		cpu[run] *= 1e3 / ((double)(per * T * PS) / MIB);
		if (!pwb_bdi_stats(bdi, &st)) {
			rd_pages[run] = (double)st.read_pages /
					(double)(per * T);
			rd_size[run] = st.read_ios ? (double)st.read_pages /
						     (double)st.read_ios
						   : 0;
			ra_share[run] = st.read_pages ?
					(double)st.readahead_pages /
						(double)st.read_pages : 0;
		}
		for (i = 0; i < T; i++) {
			pwb_inode_close(d[i].inode);
			free(t[i].order);
		}
		pwb_bdi_close(bdi);
		f[run] = -1;
		if (!o.no_fio && have_fio()) {
			snprintf(job, sizeof(job),
				 "--ioengine=psync --iodepth=1 --numjobs=%u "
				 "--rw=%s --bs=%zu --size=%" PRIu64
				 " --offset_increment=%" PRIu64, T,
				 seq ? "read" : "randread", chunk, per * PS,
				 per * PS);
			g_fio_dir = "\"read\"";
			f[run] = fio_run(job, false);
			g_fio_dir = "\"write\"";
		}
	}
	r.pwb = median(p, o.runs);
	r.fio = median(f, o.runs);
	if (seq)
		snprintf(r.note, sizeof(r.note), "sequential 1 MiB pwb_read, "
			 "cache 1/16 of the data, vs fio read bs=1M; goal "
			 "0.95; reads/page %.2f, pages/read %.1f, %.0f%% ahead;"
			 " reader CPU %.3f ms/MiB",
			 median(rd_pages, o.runs), median(rd_size, o.runs),
			 100 * median(ra_share, o.runs), median(cpu, o.runs));
	else
		snprintf(r.note, sizeof(r.note), "random 4 KiB pwb_read, cache "
			 "1/16 of the data, vs fio randread O_DIRECT; goal "
			 "pwb/fio >= 0.9; reads/page %.2f, %.0f%% ahead; "
			 "reader CPU %.3f ms/MiB",
			 median(rd_pages, o.runs),
			 100 * median(ra_share, o.runs), median(cpu, o.runs));
	add_result(&r);
}

/* The allocation groups @inode's @nr extents touch (an inode's data
 * drifting across groups as the file grows shows here). */
static unsigned int dp_groups_of(struct pwb_bdi *bdi, struct pwb_inode *inode,
				 size_t nr)
{
	struct pwb_extent *e = calloc(nr ? nr : 1, sizeof(*e));
	struct pwb_alloc_group_stats g;
	unsigned int gi, n = 0;
	size_t i, got;

	if (!e || pwb_inode_extents(inode, e, nr, &got))
		die("pwb_inode_extents: %s", pwb_errmsg());
	for (gi = 0; !pwb_bdi_alloc_group_stats(bdi, gi, &g); gi++)
		for (i = 0; i < nr && i < got; i++)
			if (e[i].dev_off < g.start + g.len &&
			    e[i].dev_off + e[i].len > g.start) {
				n++;
				break;
			}
	free(e);
	return n;
}

/*
 * frag: the kernel series' fragmentation table. Allocator mode: T
 * threads, one inode each, write o.size / T bytes each through
 * pwb_write(), with background writeback running (so allocations of the
 * threads' inodes interleave); "seq" in 1 MiB sequential writes (the seed
 * pattern), "rand" in 4 KiB writes of every page in random order. Then
 * pwb_sync() and pwb_inode_extents(): total extents and per inode, on
 * 1 context and on N (--contexts, or each count of --sweep).
 */
static uint64_t dp_frag_once(unsigned int ctx, bool rnd, char *per_ino,
			     size_t n)
{
	unsigned int T = o.threads, i;
	uint64_t per = o.size / PS / T, seed = 5, total = 0, mn = UINT64_MAX,
		 mx = 0, groups = 0;
	struct pwb_bdi *bdi = dp_bdi_open(g_img, o.backend, ctx, 0, true);
	struct dp_thread t[MAX_THREADS];
	struct pwb_inode *ino[MAX_THREADS];
	static const struct pwb_inode_ops alloc_ops = { 0 };

	for (i = 0; i < T; i++) {
		if (pwb_inode_open(bdi, i + 1, &alloc_ops, NULL, &ino[i]))
			die("pwb_inode_open (allocator mode): %s",
			    pwb_errmsg());
		t[i] = (struct dp_thread){ .inode = ino[i],
					   .order = dp_order(per, &seed),
					   .n = per };
		if (!rnd)	/* sequential: pages in order */
			for (uint64_t j = 0; j < per; j++)
				t[i].order[j] = j;
	}
	dp_run_threads(t, T);
	if (pwb_sync(bdi))
		die("pwb_sync failed");
	for (i = 0; i < T; i++) {
		size_t cnt = 0;

		if (pwb_inode_extents(ino[i], NULL, 0, &cnt))
			die("pwb_inode_extents: %s", pwb_errmsg());
		total += cnt;
		groups += dp_groups_of(bdi, ino[i], cnt);
		mn = cnt < mn ? cnt : mn;
		mx = cnt > mx ? cnt : mx;
		pwb_inode_close(ino[i]);
		free(t[i].order);
	}
	pwb_bdi_close(bdi);
	snprintf(per_ino, n, "%s; extents per inode min %" PRIu64 " mean %.1f"
		 " max %" PRIu64 "; groups per inode %.2f (drift)",
		 rnd ? "rand 4 KiB" : "seq", mn, (double)total / T, mx,
		 (double)groups / T);
	return total;
}

/*
 * frag, mixed lifetimes: one long-lived inode grows by 1 MiB a round to
 * 5/8 of the device while each round also writes a 1 MiB short-lived
 * file, deleted a quarter of the rounds later (a log beside temporary
 * files, or an LSM tree's long and short levels); both are made durable
 * every round, so their allocations interleave in the order written. Once
 * the long file has filled its first group it grows among the short ones.
 * After the last short file is deleted (and its blocks released: no index
 * names them), the long file's extents and the free space's extents tell
 * how the two lifetimes mixed on the device. With @streams the long file
 * is stream 1 and the short ones stream 2 (pwb_inode_set_stream()).
 * Returns the long file's extents; *@free_ext the free extents of every
 * group.
 */
static uint64_t dp_frag_mixed(unsigned int ctx, bool streams,
			      uint64_t *free_ext)
{
	static const struct pwb_inode_ops alloc_ops = { 0 };
	struct pwb_bdi *bdi = dp_bdi_open(g_img, o.backend, ctx, 0, true);
	struct pwb_inode *lng, **shrt;
	uint64_t dev = 0, rounds, life, r, cookie;
	struct pwb_alloc_group_stats g;
	size_t cnt = 0;
	unsigned int gi;
	uint8_t *buf;

	for (gi = 0; !pwb_bdi_alloc_group_stats(bdi, gi, &g); gi++)
		dev += g.len;
	rounds = dev / 8 * 5 >> 20;
	life = rounds / 4 ? rounds / 4 : 1;
	shrt = calloc(life, sizeof(*shrt));
	if (!shrt || posix_memalign((void **)&buf, 4096, 1u << 20))
		die("out of memory");
	memset(buf, 0x6c, 1u << 20);
	if (pwb_inode_open(bdi, 1, &alloc_ops, NULL, &lng) ||
	    (streams && pwb_inode_set_stream(lng, 1)))
		die("frag mixed: long-lived inode: %s", pwb_errmsg());
	for (r = 0; r < rounds; r++) {
		struct pwb_inode **sp = &shrt[r % life];

		if (*sp && (pwb_inode_set_size(*sp, 0) ||
			    pwb_inode_close(*sp)))
			die("frag mixed: delete: %s", pwb_errmsg());
		if (pwb_inode_open(bdi, 2 + r, &alloc_ops, NULL, sp) ||
		    (streams && pwb_inode_set_stream(*sp, 2)))
			die("frag mixed: short-lived inode: %s",
			    pwb_errmsg());
		if (pwb_write(lng, buf, 1u << 20, r << 20) != 1 << 20 ||
		    pwb_write(*sp, buf, 1u << 20, 0) != 1 << 20 ||
		    pwb_fsync(lng) || pwb_fsync(*sp))
			die("frag mixed: write: %s", pwb_errmsg());
		/* The deletes need no index: their blocks are free again
		 * at once. */
		if (pwb_bdi_freed_cookie(bdi, &cookie) ||
		    pwb_bdi_release_freed(bdi, cookie))
			die("frag mixed: %s", pwb_errmsg());
	}
	for (r = 0; r < life; r++)
		if (shrt[r] && (pwb_inode_set_size(shrt[r], 0) ||
				pwb_inode_close(shrt[r])))
			die("frag mixed: delete: %s", pwb_errmsg());
	if (pwb_bdi_freed_cookie(bdi, &cookie) ||
	    pwb_bdi_release_freed(bdi, cookie) ||
	    pwb_inode_extents(lng, NULL, 0, &cnt))
		die("frag mixed: %s", pwb_errmsg());
	*free_ext = 0;
	for (gi = 0; !pwb_bdi_alloc_group_stats(bdi, gi, &g); gi++)
		*free_ext += g.free_extents;
	pwb_inode_close(lng);
	pwb_bdi_close(bdi);
	free(shrt);
	free(buf);
	return cnt;
}

static void bench_dp_frag(void)
{
	unsigned int counts[MAX_SWEEP], n = 0, i, pat;
	uint64_t ext[2][MAX_SWEEP], mixed[2], mixed_free[2];

	counts[n++] = 1;
	if (o.nr_sweep > 1) {
		for (i = 0; i < o.nr_sweep; i++)
			if (o.sweep[i] > 1)
				counts[n++] = o.sweep[i];
	} else {
		counts[n++] = o.sweep[0] > 1 ? o.sweep[0] : 2;
	}
	for (pat = 0; pat < 2; pat++)
		for (i = 0; i < n; i++) {
			struct result r = { .wl = WL_FRAG,
					    .backend = o.backend,
					    .ctx = counts[i], .depth = o.depth,
					    .threads = o.threads,
					    .bytes = o.size, .fio = -1,
					    .kern = -1, .unit = "extents" };

			ext[pat][i] = dp_frag_once(counts[i], pat, r.note,
						   sizeof(r.note));
			r.pwb = (double)ext[pat][i];
			if (i && ext[pat][i] > ext[pat][0])
				snprintf(r.note + strlen(r.note),
					 sizeof(r.note) - strlen(r.note),
					 "; MORE than 1 ctx (%" PRIu64 ")",
					 ext[pat][0]);
			add_result(&r);
		}
	for (i = 0; i < 2; i++) {
		struct result r = { .wl = WL_FRAG, .backend = o.backend,
				    .ctx = counts[n - 1], .depth = o.depth,
				    .threads = 1, .bytes = o.size, .fio = -1,
				    .kern = -1, .unit = "extents" };

		mixed[i] = dp_frag_mixed(counts[n - 1], i, &mixed_free[i]);
		r.pwb = (double)mixed[i];
		snprintf(r.note, sizeof(r.note),
			 "mixed lifetimes, %s: the long-lived file's extents;"
			 " free extents after the short-lived are deleted %"
			 PRIu64, i ? "streams 1 (long) and 2 (short)"
				   : "no streams", mixed_free[i]);
		add_result(&r);
	}
	snprintf(g_summary[WL_FRAG], sizeof(g_summary[WL_FRAG]),
		 "frag: total extents seq %" PRIu64 " (1 ctx) -> %" PRIu64
		 " (%u ctx), rand %" PRIu64 " -> %" PRIu64 "; N contexts "
		 "must not make more than 1; mixed lifetimes: long file %"
		 PRIu64 " extents, free space %" PRIu64 " without streams, %"
		 PRIu64 " and %" PRIu64 " with", ext[0][0], ext[0][n - 1],
		 counts[n - 1], ext[1][0], ext[1][n - 1], mixed[0],
		 mixed_free[0], mixed[1], mixed_free[1]);
}

/* ---------------------------------------------------------------------- */
/* Output                                                                 */

static void fmt_val(char *buf, size_t n, double v)
{
	if (v < 0)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1f", v);
}

static void fmt_ratio(char *buf, size_t n, double a, double b)
{
	if (a < 0 || b <= 0)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.2f", a / b);
}

/* The context count of a row: a number, or "auto". */
static const char *ctx_str(char *buf, size_t n, unsigned int ctx)
{
	if (ctx == CTX_AUTO)
		snprintf(buf, n, "auto");
	else
		snprintf(buf, n, "%u", ctx);
	return buf;
}

static void print_table(FILE *f)
{
	unsigned int i;

	if (g_cpu_scale > 0)
		fprintf(f, "machine: %u threads of a busy loop give x%.2f of "
			"one (the ceiling for the thread/context ratios below)"
			"\n", o.threads > 1 ? o.threads : 2, g_cpu_scale);
	fprintf(f, "%-9s %-8s %4s %5s %4s %9s %9s %9s %8s %8s %-9s %6s  %s\n",
		"workload", "backend", "ctx", "depth", "thr", "libpwb", "fio",
		"kernel", "pwb/fio", "pwb/kern", "unit", "io/ext", "notes");
	for (i = 0; i < nr_results; i++) {
		const struct result *r = &results[i];
		char a[16], b[16], c[16], d[16], e[16], x[16], n[16];

		fmt_val(a, sizeof(a), r->pwb);
		fmt_val(b, sizeof(b), r->fio);
		fmt_val(c, sizeof(c), r->kern);
		fmt_ratio(d, sizeof(d), r->pwb, r->fio);
		fmt_ratio(e, sizeof(e), r->pwb, r->kern);
		if (r->io_extents)
			snprintf(x, sizeof(x), "%.2f",
				 (double)r->io_submitted /
					 (double)r->io_extents);
		else
			snprintf(x, sizeof(x), "-");
		fprintf(f, "%-9s %-8s %4s %5u %4u %9s %9s %9s %8s %8s %-9s "
			"%6s  %s\n",
			wl_name[r->wl], r->backend,
			ctx_str(n, sizeof(n), r->ctx), r->depth,
			r->threads, a, b, c, d, e, r->unit, x, r->note);
	}
	for (i = 0; i < NR_WL; i++) {
		if (g_summary[i][0])
			fprintf(f, "%s\n", g_summary[i]);
		if (g_kernel_note[i][0])
			fprintf(f, "note: %s\n", g_kernel_note[i]);
	}
}

static void print_csv(FILE *f)
{
	unsigned int i;

	fprintf(f, "workload,backend,contexts,depth,threads,bytes,libpwb,fio,"
		"kernel,unit,io_submitted,io_extents,secs\n");
	for (i = 0; i < nr_results; i++) {
		const struct result *r = &results[i];
		char n[16];

		fprintf(f, "%s,%s,%s,%u,%u,%" PRIu64 ",%.3f,%.3f,%.3f,%s,%"
			PRIu64 ",%" PRIu64 ",%.4f\n",
			wl_name[r->wl], r->backend,
			ctx_str(n, sizeof(n), r->ctx), r->depth,
			r->threads, r->bytes, r->pwb, r->fio, r->kern,
			r->unit, r->io_submitted, r->io_extents, r->secs);
	}
}

static void json_num(FILE *f, const char *k, double v, bool last)
{
	if (v < 0)
		fprintf(f, "\"%s\": null%s", k, last ? "" : ", ");
	else
		fprintf(f, "\"%s\": %.4f%s", k, v, last ? "" : ", ");
}

static void print_json(FILE *f)
{
	unsigned int i;

	fprintf(f, "[\n");
	for (i = 0; i < nr_results; i++) {
		const struct result *r = &results[i];
		char n[16];

		/* "contexts": a number, or "auto" (then "auto_chose" too). */
		fprintf(f, "  {\"workload\": \"%s\", \"backend\": \"%s\", "
			"\"contexts\": %s%s%s, \"depth\": %u, \"threads\": %u, "
			"\"bytes\": %" PRIu64 ", \"unit\": \"%s\", ",
			wl_name[r->wl], r->backend,
			r->ctx == CTX_AUTO ? "\"" : "",
			ctx_str(n, sizeof(n), r->ctx),
			r->ctx == CTX_AUTO ? "\"" : "", r->depth,
			r->threads, r->bytes, r->unit);
		json_num(f, "libpwb", r->pwb, false);
		json_num(f, "fio", r->fio, false);
		json_num(f, "kernel", r->kern, false);
		json_num(f, "pwb_over_fio", r->fio > 0 ? r->pwb / r->fio : -1,
			 false);
		json_num(f, "pwb_over_kernel",
			 r->kern > 0 ? r->pwb / r->kern : -1, false);
		if (r->ctx == CTX_AUTO)
			fprintf(f, "\"auto_chose\": %u, ", r->auto_nr);
		fprintf(f, "\"io_submitted\": %" PRIu64 ", \"io_extents\": %"
			PRIu64 ", \"secs\": %.4f, \"note\": \"%s\"}%s\n",
			r->io_submitted, r->io_extents, r->secs, r->note,
			i + 1 < nr_results ? "," : "");
	}
	fprintf(f, "]\n");
}

/* ---------------------------------------------------------------------- */
/* Options                                                                */

/* A byte count, "N" or with a K, M or G suffix; 0 and anything else die. */
static uint64_t parse_size(const char *s)
{
	uint64_t v;

	if (pwbex_parse_size(s, &v) || !v)
		die("bad size \"%s\"", s);
	return v;
}

static void parse_sweep(const char *s)
{
	char *copy = strdup(s), *tok, *save = NULL;

	o.nr_sweep = 0;
	for (tok = strtok_r(copy, ",", &save); tok && o.nr_sweep < MAX_SWEEP;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned long v = strtoul(tok, NULL, 10);

		if (!strcmp(tok, "auto")) {
			o.sweep[o.nr_sweep++] = CTX_AUTO;
			continue;
		}
		if (!v || v > PWB_MAX_WB_CTX)
			die("bad context count \"%s\"", tok);
		o.sweep[o.nr_sweep++] = (unsigned int)v;
	}
	free(copy);
	if (!o.nr_sweep)
		die("empty --sweep");
}

static bool sweep_has_auto(void)
{
	unsigned int i;

	for (i = 0; i < o.nr_sweep; i++)
		if (o.sweep[i] == CTX_AUTO)
			return true;
	return false;
}

static void parse_workloads(const char *s)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int i;

	memset(o.wl, 0, sizeof(o.wl));
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			/* sqlite only by name: a minute of SQL; domain and
			 * multidev too: a minute each, 4 images in
			 * /dev/shm. */
			for (i = 0; i < NR_WL; i++)
				o.wl[i] = i != WL_SQLITE && i != WL_DOMAIN &&
					  i != WL_MULTIDEV &&
					  i != WL_SQLITE_BULK && i != WL_TENANTS;
			continue;
		}
		if (!strcmp(tok, "one-file")) {
			o.wl[WL_ONEFILE_SEQ] = o.wl[WL_ONEFILE_RAND] = true;
			continue;
		}
		for (i = 0; i < NR_WL; i++)
			if (!strcmp(tok, wl_name[i]))
				break;
		if (i == NR_WL)
			die("unknown workload \"%s\"", tok);
		o.wl[i] = true;
	}
	free(copy);
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: pwb-bench [options]\n"
"  --workload LIST   seed,rand4k,skew,fsync,markdirty,null,throttle,\n"
"                    memory, one-file (one-file-seq,one-file-rand),\n"
"                    wal, pcache-write, pcache-read, pcache-uncached,\n"
"                    pcache-seqread, pcache-stream, reclaim, frag, all\n"
"                    (seed); not in all: domain, multidev, tenants,\n"
"                    sqlite, sqlite-bulk (the last two built with\n"
"                    sqlite3)\n"
"  --contexts N      writeback contexts (2); --sweep 1,2,4,8 runs several;\n"
"                    \"auto\" in the list: the bdi tunes itself\n"
"                    (PWB_BDI_AUTO_WB_CTX), seed/rand4k/skew/fsync only\n"
"  --auto-sweep      --contexts 1,2,4,6,8,auto --throttle, and a line\n"
"                    comparing auto with the best fixed count\n"
"  --auto-min N, --auto-max N, --auto-interval MS  the tuner's bounds and\n"
"                    window (library defaults 1, 8, 200)\n"
"  --flushers N      flusher threads (0: one per context)\n"
"  --policy SPEC     shard policy (default inode-hash)\n"
"  --backend NAME    psync, io_uring or null (io_uring)\n"
"  --depth N         io_depth per context (32)\n"
"  --size BYTES      data written per run, k/M/G suffixes (512M)\n"
"  --threads N       application threads (online CPUs)\n"
"  --inodes N        inodes for rand4k and skew (16)\n"
"  --fsync-every K   fsync workload: writes between fsyncs (64)\n"
"  --duration SEC    cap on each run's writing phase (0: none;\n"
"                    throttle: its length, default 20; wal: 3;\n"
"                    domain, multidev, tenants: 5 per run)\n"
"  --device PATH     device or file to write (default: an image it\n"
"                    creates in --dir and removes)\n"
"  --dir DIR         where images go (current directory)\n"
"  --runs N          seed/rand4k/skew/fsync: median of N runs, the\n"
"                    contenders taking turns (3)\n"
"  --repeat N        markdirty/null: best of N (3)\n"
"  --null-pages N    null: dirty pages per run (16M)\n"
"  --md-pages N      markdirty: pages per thread (1M); memory: pages\n"
"  --mem-inodes N    memory: inodes opened (100000)\n"
"  --throttle        open with PWB_BDI_THROTTLE\n"
"  --domain          every bdi joins one memory domain (its cost; the\n"
"                    limits of the first bdi, no limit as 1 TiB)\n"
"  --devices N       multidev: bdis (4)\n"
"  --tenants N       markdirty: the inodes go to N tenants (of the\n"
"                    domain with --domain), to measure their cost\n"
"  --dirty-bg BYTES  dirty_background_bytes (libpwb default 64M;\n"
"                    throttle: half of --dirty-limit)\n"
"  --dirty-limit BYTES  throttle: dirty_bytes (64M)\n"
"  --readahead BYTES  readahead_bytes of the bdi (library default 2M; 0: off)\n"
"  --json, --csv     machine-readable output on stdout (table on stderr)\n"
"  --no-fio          skip fio; --no-kernel  skip the page-cache path\n"
"  --keep            keep the created image; -v  show fio commands\n");
}

static void parse_opts(int argc, char **argv)
{
	enum { O_WL = 256, O_CTX, O_FL, O_POL, O_BE, O_DEPTH, O_SIZE, O_THR,
	       O_DUR, O_DEV, O_DIR, O_JSON, O_CSV, O_SWEEP, O_NOFIO, O_NOK,
	       O_INO, O_FSE, O_REP, O_NP, O_MDP, O_KEEP, O_THROT, O_RUNS,
	       O_DBG, O_AMIN, O_AMAX, O_AMS, O_ASW, O_DLIM, O_MEMI, O_DOM,
	       O_NDEV, O_RA, O_TEN };
	static const struct option lo[] = {
		{ "workload", 1, NULL, O_WL }, { "contexts", 1, NULL, O_CTX },
		{ "flushers", 1, NULL, O_FL }, { "policy", 1, NULL, O_POL },
		{ "backend", 1, NULL, O_BE }, { "depth", 1, NULL, O_DEPTH },
		{ "size", 1, NULL, O_SIZE }, { "threads", 1, NULL, O_THR },
		{ "duration", 1, NULL, O_DUR }, { "device", 1, NULL, O_DEV },
		{ "dir", 1, NULL, O_DIR }, { "json", 0, NULL, O_JSON },
		{ "csv", 0, NULL, O_CSV }, { "sweep", 1, NULL, O_SWEEP },
		{ "no-fio", 0, NULL, O_NOFIO }, { "no-kernel", 0, NULL, O_NOK },
		{ "inodes", 1, NULL, O_INO }, { "fsync-every", 1, NULL, O_FSE },
		{ "repeat", 1, NULL, O_REP }, { "null-pages", 1, NULL, O_NP },
		{ "md-pages", 1, NULL, O_MDP }, { "keep", 0, NULL, O_KEEP },
		{ "throttle", 0, NULL, O_THROT }, { "runs", 1, NULL, O_RUNS },
		{ "dirty-bg", 1, NULL, O_DBG },
		{ "auto-min", 1, NULL, O_AMIN }, { "auto-max", 1, NULL, O_AMAX },
		{ "auto-interval", 1, NULL, O_AMS },
		{ "auto-sweep", 0, NULL, O_ASW },
		{ "dirty-limit", 1, NULL, O_DLIM },
		{ "mem-inodes", 1, NULL, O_MEMI },
		{ "domain", 0, NULL, O_DOM }, { "devices", 1, NULL, O_NDEV },
		{ "readahead", 1, NULL, O_RA }, { "tenants", 1, NULL, O_TEN },
		{ "help", 0, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	o.wl[WL_SEED] = true;
	o.sweep[0] = 2;
	o.nr_sweep = 1;
	o.backend = "io_uring";
	o.depth = 32;
	o.size = 512ull << 20;
	o.threads = cpus > 0 ? (unsigned int)cpus : 1;
	o.dir = ".";
	o.inodes = 16;
	o.fsync_every = 64;
	o.repeat = 3;
	o.runs = 3;
	/* Long enough (~0.2 s a run) that thread start-up does not
	 * blur the 1 vs 2 context ratio; the sparse image is 64 GiB. */
	o.null_pages = 16ull << 20;
	o.md_pages = 1ull << 20;
	o.dirty_limit = 64ull << 20;
	o.mem_inodes = 100000;
	o.readahead = -1;
	while ((c = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		switch (c) {
		case O_WL: parse_workloads(optarg); break;
		case O_CTX: parse_sweep(optarg); break;
		case O_SWEEP: parse_sweep(optarg); break;
		case O_FL: o.flushers = (unsigned int)atoi(optarg); break;
		case O_POL: o.policy = optarg; break;
		case O_BE: o.backend = optarg; break;
		case O_DEPTH: o.depth = (unsigned int)atoi(optarg); break;
		case O_SIZE: o.size = parse_size(optarg); break;
		case O_THR: o.threads = (unsigned int)atoi(optarg); break;
		case O_DUR: o.duration = atof(optarg); break;
		case O_DEV: o.device = optarg; break;
		case O_DIR: o.dir = optarg; break;
		case O_JSON: o.json = true; break;
		case O_CSV: o.csv = true; break;
		case O_NOFIO: o.no_fio = true; break;
		case O_NOK: o.no_kernel = true; break;
		case O_INO: o.inodes = (unsigned int)atoi(optarg); break;
		case O_FSE: o.fsync_every = (unsigned int)atoi(optarg); break;
		case O_REP: o.repeat = (unsigned int)atoi(optarg); break;
		case O_NP: o.null_pages = parse_size(optarg); break;
		case O_MDP: o.md_pages = parse_size(optarg); break;
		case O_KEEP: o.keep = true; break;
		case O_THROT: o.throttle = true; break;
		case O_RUNS: o.runs = (unsigned int)atoi(optarg); break;
		case O_DBG: o.dirty_bg = parse_size(optarg); break;
		case O_AMIN: o.auto_min = (unsigned int)atoi(optarg); break;
		case O_AMAX: o.auto_max = (unsigned int)atoi(optarg); break;
		case O_AMS: o.auto_ms = (unsigned int)atoi(optarg); break;
		case O_ASW:
			/* Steady writeback, writers at the device's pace: a
			 * re-shard waits for a running pwb_sync work item, so
			 * "dirty all, then sync" leaves a tuner nothing to
			 * tune. */
			parse_sweep("1,2,4,6,8,auto");
			o.throttle = true;
			break;
		case O_DLIM: o.dirty_limit = parse_size(optarg); break;
		case O_MEMI: o.mem_inodes = parse_size(optarg); break;
		case O_DOM: o.domain = true; break;
		case O_TEN: o.tenants = (unsigned int)atoi(optarg); break;
		case O_NDEV: o.devices = (unsigned int)atoi(optarg); break;
		case O_RA:
			o.readahead = strcmp(optarg, "0") ?
				(int64_t)parse_size(optarg) : 0;
			break;
		case 'v': o.verbose = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		usage(stderr);
		exit(2);
	}
	if (!o.threads || o.threads > MAX_THREADS)
		die("--threads must be 1..%d", MAX_THREADS);
	if (!o.depth || !o.inodes || !o.repeat)
		die("--depth, --inodes and --repeat must be positive");
	if (!o.runs || o.runs > MAX_RUNS)
		die("--runs must be 1..%d", MAX_RUNS);
	if (o.inodes < o.threads)
		o.inodes = o.threads;
	if (!o.fsync_every)
		o.fsync_every = 64;
	if (o.null_pages < 8 * 256)
		o.null_pages = 8 * 256;
	if (o.json && o.csv)
		die("--json and --csv exclude each other");
	if (sweep_has_auto() && (o.wl[WL_MARKDIRTY] || o.wl[WL_NULL]))
		die("\"auto\" contexts apply to seed, rand4k, skew and fsync");
}

/* ---------------------------------------------------------------------- */

/* Median of @n values (-1 if none was measured). */
static double median(double *v, unsigned int n)
{
	if (!n || v[0] < 0)
		return -1;
	return bench_median(v, n);
}

/* Counts auto chose in each run, "3,3,2", into @buf. */
static void fmt_chosen(char *buf, size_t n, const unsigned int *chosen,
		       unsigned int runs)
{
	size_t l = 0;
	unsigned int k;

	buf[0] = 0;
	for (k = 0; k < runs && l < n; k++)
		l += (size_t)snprintf(buf + l, n - l, "%s%u", k ? "," : "",
				      chosen[k]);
}

/*
 * One workload over the context sweep. Each figure is the median of
 * o.runs runs. Run by run, every count of the sweep takes its turn and the
 * contenders take turns within it (libpwb, fio, kernel, ...), so that a
 * slow spell of a shared host hits all of them alike. The kernel path does
 * not depend on the context count: it is measured with the first sweep
 * entry and repeated on every row. An "auto" entry has no fio figure; if
 * the sweep also has fixed counts, the auto row's note and a line under
 * the table compare it with the best of them.
 */
static void bench_io(enum workload wl)
{
	/* The region written: 2 x --size, even on a larger device. */
	uint64_t dev = device_size(g_img);
	uint64_t img = dev < 2 * o.size ? dev : 2 * o.size;
	double kern = -1, base_pwb = 0, base_fio = 0, best = -1;
	bool fio = !o.no_fio && strcmp(o.backend, "null") && have_fio();
	bool kernel = !o.no_kernel && strcmp(o.backend, "null");
	static double pv[MAX_SWEEP][MAX_RUNS], fv[MAX_SWEEP][MAX_RUNS];
	static unsigned int chosen[MAX_SWEEP][MAX_RUNS];
	static struct result rs[MAX_SWEEP];
	double kv[MAX_RUNS];
	unsigned int i, k, best_ctx = 0;
	struct plan p;

	plan_build(&p, wl, img, o.threads);
	if (!p.bytes)
		die("%s: --size too small for %u threads", wl_name[wl],
		    o.threads);
	for (i = 0; i < o.nr_sweep; i++) {
		rs[i] = (struct result){ .wl = wl, .backend = o.backend,
					 .ctx = o.sweep[i], .depth = o.depth,
					 .threads = o.threads,
					 .unit = "MiB/s" };
		if (!strcmp(o.backend, "psync"))
			rs[i].depth = 1;
	}
	for (k = 0; k < o.runs; k++) {
		for (i = 0; i < o.nr_sweep; i++) {
			bool a = o.sweep[i] == CTX_AUTO;

			pv[i][k] = run_pwb(&p, o.sweep[i], &rs[i]);
			chosen[i][k] = rs[i].auto_nr;
			fv[i][k] = fio && !a ? run_fio(wl, &p, o.sweep[i]) : -1;
			if (i == 0)
				kv[k] = kernel ? run_kernel(&p) : -1;
			if (o.verbose)
				fprintf(stderr, "%s ctx %s run %u: libpwb %.1f "
					"fio %.1f kernel %.1f MiB/s\n",
					wl_name[wl], a ? "auto" : "fixed", k,
					pv[i][k], fv[i][k], i ? -1 : kv[k]);
		}
	}
	kern = median(kv, o.runs);
	if (kernel) {
		uint64_t bg = kernel_dirty_background();

		/* Below this the kernel's flusher never runs: the kernel
		 * figure is a copy into memory plus one fdatasync, and says
		 * nothing of the writeback thread the series parallelised. */
		if (bg && p.bytes <= bg)
			snprintf(g_kernel_note[wl], sizeof(g_kernel_note[wl]),
				 "%s: the kernel's %" PRIu64 " MiB stayed under "
				 "its dirty_background threshold (%" PRIu64
				 " MiB), so its flusher thread never ran; use "
				 "--size above that to compare with kernel "
				 "writeback", wl_name[wl], p.bytes >> 20,
				 bg >> 20);
	}
	for (i = 0; i < o.nr_sweep; i++) {
		struct result *r = &rs[i];

		r->pwb = median(pv[i], o.runs);
		r->fio = median(fv[i], o.runs);
		r->kern = kern;
		if (o.sweep[i] != CTX_AUTO && r->pwb > best) {
			best = r->pwb;
			best_ctx = o.sweep[i];
		}
	}
	for (i = 0; i < o.nr_sweep; i++) {
		struct result *r = &rs[i];
		size_t l;

		if (i == 0) {
			base_pwb = r->pwb;
			base_fio = r->fio;
		}
		if (wl == WL_FSYNC)
			snprintf(r->note, sizeof(r->note), "fsync every %u",
				 o.fsync_every);
		l = strlen(r->note);
		if (o.sweep[i] == CTX_AUTO) {
			char c[64];

			fmt_chosen(c, sizeof(c), chosen[i], o.runs);
			snprintf(r->note + l, sizeof(r->note) - l,
				 "%sauto chose %s (%s)", l ? "; " : "", c,
				 pwb_auto_reason_str(r->auto_reason));
			l = strlen(r->note);
			if (best > 0) {
				snprintf(r->note + l, sizeof(r->note) - l,
					 "; auto/best fixed x%.2f",
					 r->pwb / best);
				snprintf(g_summary[wl], sizeof(g_summary[wl]),
					 "%s: best fixed %u contexts %.1f MiB/s; "
					 "auto %.1f MiB/s, chose %s; auto/best "
					 "%.2f (medians of %u runs)",
					 wl_name[wl], best_ctx, best, r->pwb, c,
					 r->pwb / best, o.runs);
			}
		} else if (i > 0 && o.sweep[0] != CTX_AUTO) {
			snprintf(r->note + l, sizeof(r->note) - l,
				 "%sscaling vs %u ctx: pwb x%.2f",
				 l ? "; " : "", o.sweep[0], r->pwb / base_pwb);
			l = strlen(r->note);
			if (r->fio > 0 && base_fio > 0)
				snprintf(r->note + l, sizeof(r->note) - l,
					 ", fio x%.2f (numjobs)",
					 r->fio / base_fio);
		}
		add_result(r);
	}
	plan_free(&p);
}

/* The domain and multidev workloads (bench/domain-bench.c). */
static void bench_dom_workload(enum workload wl)
{
	struct pwb_bench_domain_opts d = {
		.dir = o.dir,
		.shm_dir = "/dev/shm",
		.backend = o.backend,
		.contexts = o.sweep[0] == CTX_AUTO ? 2 : o.sweep[0],
		.seconds = o.duration > 0 ? o.duration : 5,
		.runs = o.runs,
		.dirty_limit = o.dirty_limit,
		.img_bytes = o.size,
		.devices = o.devices ? o.devices : 4,
		.verbose = o.verbose,
		.cpu_scaling = cpu_scaling,
	};
	int rc = wl == WL_DOMAIN ? pwb_bench_domain(tbl, &d)
				 : pwb_bench_multidev(tbl, &d);

	if (rc)
		die("the %s workload failed: %s", wl_name[wl],
		    pwb_strerror(rc));
}

/* The tenants workload (bench/tenant-bench.c). */
static void bench_tenants(void)
{
	struct pwb_bench_tenant_opts t = {
		.dir = o.dir,
		.seconds = o.duration > 0 ? o.duration : 5,
		.runs = o.runs,
		.dirty_limit = o.dirty_limit,
		.img_bytes = o.size,
		.verbose = o.verbose,
	};
	int rc = pwb_bench_tenants(tbl, &t);

	if (rc)
		die("the tenants workload failed: %s", pwb_strerror(rc));
}

/* The pwb VFS against SQLite's default VFS (bench/sqlite-bench.c). */
static void bench_sqlite(void)
{
#ifdef PWB_BENCH_SQLITE
	if (pwb_bench_sqlite(stdout, o.dir, o.duration > 0 ? o.duration : 2,
			     o.runs) < 0)
		die("the sqlite workload failed");
#else
	fprintf(stderr, "pwb-bench: built without sqlite3: no sqlite "
		"workload\n");
#endif
}

/* Large transactions on both VFSes (bench/sqlite-bench.c). */
static void bench_sqlite_bulk(void)
{
#ifdef PWB_BENCH_SQLITE
	if (pwb_bench_sqlite_bulk(stdout, o.dir, o.runs) < 0)
		die("the sqlite-bulk workload failed");
#else
	fprintf(stderr, "pwb-bench: built without sqlite3: no sqlite-bulk "
		"workload\n");
#endif
}

int main(int argc, char **argv)
{
	uint64_t img = 0, need;
	int i;

	parse_opts(argc, argv);
	tbl = (o.json || o.csv) ? stderr : stdout;
	atexit(cleanup);

	/* Images: the real device (prefilled), and a sparse one for the
	 * engine-only workloads, which never write to it. */
	need = 2 * o.size;
	if (o.wl[WL_SEED] || o.wl[WL_RAND4K] || o.wl[WL_SKEW] ||
	    o.wl[WL_FSYNC] || o.wl[WL_THROTTLE] || o.wl[WL_ONEFILE_SEQ] ||
	    o.wl[WL_ONEFILE_RAND] || o.wl[WL_WAL] || o.wl[WL_PCWRITE] ||
	    o.wl[WL_PCREAD] || o.wl[WL_PCUNCACHED] || o.wl[WL_FRAG] ||
	    o.wl[WL_PCSEQREAD] || o.wl[WL_PCSTREAM]) {
		if (o.device) {
			g_img = strdup(o.device);
			img = device_size(g_img);
			if (img < need)
				die("%s has %" PRIu64 " bytes; --size %" PRIu64
				    " needs %" PRIu64, g_img, img, o.size, need);
			img = need;	/* only the first 2 x --size is used */
		} else {
			if (asprintf(&g_img, "%s/pwb-bench.img", o.dir) < 0)
				die("out of memory");
			fprintf(stderr, "pwb-bench: preparing %s (%" PRIu64
				" MiB)\n", g_img, need >> 20);
			image_create(g_img, need, true);
			g_img_created = true;
			img = need;
		}
		if (posix_memalign((void **)&g_mem, 4096, img) ||
		    posix_memalign((void **)&g_src, 4096, 1 << 20))
			die("out of memory for %" PRIu64 " bytes of pages", img);
		/* The application's buffers exist before it writes. */
		memset(g_mem, 0, img);
		for (i = 0; i < (1 << 20); i++)
			g_src[i] = (uint8_t)(i * 131 + 7);
	}
	if (o.wl[WL_MARKDIRTY] || o.wl[WL_NULL] || o.wl[WL_MEMORY] ||
	    o.wl[WL_RECLAIM] || o.wl[WL_PCSTREAM]) {
		uint64_t sz = BENCH_MAX(BENCH_MAX(o.null_pages,
					     o.md_pages * o.threads) * PS,
					o.size) + (1u << 20);

		if (o.wl[WL_MEMORY])	/* its cached-page row */
			sz = BENCH_MAX(sz, MEM_CACHED_BYTES + (1u << 20));

		if (asprintf(&g_sparse, "%s/pwb-bench-sparse.img", o.dir) < 0)
			die("out of memory");
		image_create(g_sparse, sz, false);
		if (posix_memalign((void **)&dummy_page, 4096, PS))
			die("out of memory");
		memset(dummy_page, 0, PS);
	}

	if (o.wl[WL_WAL]) {
		if (asprintf(&g_wal_img, "%s/pwb-bench-log.img", o.dir) < 0)
			die("out of memory");
		image_create(g_wal_img, WAL_LOG_BYTES, false);
		if (posix_memalign((void **)&g_wal_mem, 4096, WAL_LOG_BYTES))
			die("out of memory");
		memset(g_wal_mem, 0, WAL_LOG_BYTES);
	}
	if (o.wl[WL_MARKDIRTY] || o.wl[WL_NULL])
		g_cpu_scale = cpu_scaling(o.threads > 1 ? o.threads : 2);
	for (i = 0; i < NR_WL; i++) {
		if (!o.wl[i])
			continue;
		fprintf(stderr, "pwb-bench: %s...\n", wl_name[i]);
		if (i == WL_MARKDIRTY)
			bench_markdirty();
		else if (i == WL_NULL)
			bench_null();
		else if (i == WL_THROTTLE)
			bench_throttle();
		else if (i == WL_MEMORY)
			bench_memory();
		else if (i == WL_WAL)
			bench_wal();
		else if (i == WL_PCWRITE || i == WL_PCREAD)
			bench_dp_cached((enum workload)i);
		else if (i == WL_RECLAIM)
			bench_dp_reclaim();
		else if (i == WL_PCSTREAM)
			bench_dp_stream();
		else if (i == WL_PCUNCACHED || i == WL_PCSEQREAD)
			bench_dp_uncached(i == WL_PCSEQREAD);
		else if (i == WL_FRAG)
			bench_dp_frag();
		else if (i == WL_SQLITE)
			bench_sqlite();
		else if (i == WL_DOMAIN || i == WL_MULTIDEV)
			bench_dom_workload((enum workload)i);
		else if (i == WL_SQLITE_BULK)
			bench_sqlite_bulk();
		else if (i == WL_TENANTS)
			bench_tenants();
		else
			bench_io((enum workload)i);
	}

	print_table(tbl);
	if (o.json)
		print_json(stdout);
	if (o.csv)
		print_csv(stdout);
	if (pwb_domain_destroy(g_domain))
		die("pwb_domain_destroy: %s", pwb_errmsg());
	free(g_mem);
	free(g_wal_mem);
	free(g_src);
	free(dummy_page);
	cleanup();
	free(g_img);
	free(g_sparse);
	free(g_wal_img);
	g_img = g_sparse = g_wal_img = NULL;
	return 0;
}
