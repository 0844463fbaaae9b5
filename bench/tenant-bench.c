// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * tenant-bench.c - pwb-bench's tenants workload
 *
 * One bdi on an image in --dir, made a device of known speed by the delay
 * fault (psync, one context, 5 ms before every write of up to 256 KiB:
 * about 50 MiB/s). Three tenants write to it, each through a throttled
 * writer on an inode of its own:
 *
 *   heavy   weight 500, own dirty_bytes a quarter of --dirty-limit,
 *           dirtying 64 KiB per call as fast as it is let
 *   medium  weight 100, the same
 *   light   weight 100, dirtying 64 KiB every 12.5 ms (5 MiB/s, a tenth
 *           of the device)
 *
 * Each run measures the light writer alone first, then beside the two
 * flooding ones, for --duration s each after 1 s of warm-up. It prints
 * heavy's written bytes against medium's (the weights say 5 : 1), the
 * light writer's 99th percentile pwb_mark_dirty() latency beside the
 * flood against alone, and each tenant's most dirty + writeback bytes
 * against its limit. Figures are medians over --runs runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "pwb.h"
#include "tenant-bench.h"

#define PS 4096u
#define MIB (1024.0 * 1024.0)
#define CALL_PAGES 16u			/* a writer's call: 64 KiB */
#define LIGHT_GAP_NS 12500000ull	/* 64 KiB per 12.5 ms: 5 MiB/s */
#define DELAY_MS 5u
#define WARMUP_S 1.0
#define MAX_RUNS 15
#define MAX_SAMPLES 100000
#define NR_T 3
/* The least writeback chunk of the library (lib/writeback.c), the bound
 * on what a tenant may hold above its dirty_bytes. */
#define WB_CHUNK_BYTES (4ull << 20)

static uint8_t *zero_page;

static int get_page(struct pwb_inode *inode, uint64_t index, const void **data)
{
	(void)inode;
	(void)index;
	*data = zero_page;
	return 0;
}

/* Each inode writes its own stretch of the device. */
static int map_page(struct pwb_inode *inode, uint64_t index, uint64_t *off)
{
	uint64_t *span = pwb_inode_priv(inode);

	*off = (pwb_inode_ino(inode) * *span + index % *span) * PS;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

struct writer {
	struct pwb_inode *inode;
	uint64_t span;		/* pages of its stretch */
	bool light;		/* paced, latencies kept */
	bool *stop;
	double *lat;		/* light: seconds per call, after warm-up */
	unsigned int nr_lat;
	double t0;		/* warm-up ends */
	pthread_t tid;
	int err;
};

static void sleep_until(double t)
{
	double d = t - bench_now_s();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *writer_fn(void *arg)
{
	struct writer *w = arg;
	double next = bench_now_s();
	uint64_t i = 0;

	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
		double t = bench_now_s();
		int rc = pwb_mark_dirty(w->inode, (i % w->span) * PS,
					CALL_PAGES * PS);

		if (rc) {
			w->err = rc;
			break;
		}
		i += CALL_PAGES;
		if (!w->light)
			continue;
		if (t >= w->t0 && w->nr_lat < MAX_SAMPLES)
			w->lat[w->nr_lat++] = bench_now_s() - t;
		next += (double)LIGHT_GAP_NS * 1e-9;
		sleep_until(next);
	}
	return NULL;
}

static int image_make(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes)) {
		close(fd);
		return -errno;
	}
	close(fd);
	return 0;
}

struct run {
	double ratio;		/* heavy : medium written */
	double wrote[NR_T];	/* MiB/s each tenant's writes completed */
	double p99_alone;	/* light, s */
	double p99_flood;
	uint64_t max_held[NR_T];
	uint64_t limit[NR_T];
	uint64_t throttled[NR_T];
};

static double p99(double *v, unsigned int n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	return v[(unsigned int)((n - 1) * 0.99)];
}

/* One phase: the light writer alone (@flood false) or beside the two
 * flooding ones. */
static int phase(const char *path, const struct pwb_bench_tenant_opts *o,
		 bool flood, struct run *r)
{
	static const unsigned int weight[NR_T] = { 500, 100, 100 };
	struct pwb_tenant *t[NR_T] = { NULL };
	struct pwb_inode *inode[NR_T] = { NULL };
	struct writer w[NR_T];
	struct pwb_tenant_stats st0[NR_T], st[NR_T];
	struct pwb_bdi_config cfg;
	struct pwb_fault delay = {
		.kind = PWB_FAULT_DELAY, .every = 1, .delay_ms = DELAY_MS,
		.dev_end = UINT64_MAX,
	};
	struct pwb_bdi *bdi;
	uint64_t span = o->img_bytes / PS / NR_T;
	bool stop = false;
	int rc, i, first = flood ? 0 : 2;

	pwb_bdi_config_init(&cfg);
	cfg.flags = PWB_BDI_THROTTLE;
	cfg.dirty_bytes = o->dirty_limit;
	cfg.dirty_background_bytes = o->dirty_limit / 4;
	cfg.nr_wb_ctx = 1;
	cfg.backend = "psync";
	cfg.max_io_bytes = 256 << 10;
	cfg.throttle_timeout_ms = 0;
	rc = pwb_bdi_open(path, &cfg, &bdi);
	if (rc) {
		fprintf(stderr, "pwb-bench: pwb_bdi_open(%s): %s\n", path,
			pwb_errmsg());
		return rc;
	}
	rc = pwb_bdi_inject_fault(bdi, &delay);
	memset(w, 0, sizeof(w));
	for (i = first; !rc && i < NR_T; i++) {
		struct pwb_tenant_config tc;

		pwb_tenant_config_init(&tc);
		tc.weight = weight[i];
		if (i < 2)
			tc.dirty_bytes = o->dirty_limit / 4;
		rc = pwb_tenant_create(NULL, bdi, &tc, &t[i]);
		if (!rc)
			rc = pwb_inode_open(bdi, (uint64_t)i, &ops, &w[i].span,
					    &inode[i]);
		if (!rc)
			rc = pwb_inode_set_tenant(inode[i], t[i]);
	}
	if (rc) {
		fprintf(stderr, "pwb-bench: tenants: %s\n", pwb_errmsg());
		goto out;
	}
	for (i = first; i < NR_T; i++) {
		w[i].inode = inode[i];
		w[i].span = span;
		w[i].light = i == 2;
		w[i].stop = &stop;
		w[i].t0 = bench_now_s() + WARMUP_S;
		if (w[i].light)
			w[i].lat = calloc(MAX_SAMPLES, sizeof(double));
		pthread_create(&w[i].tid, NULL, writer_fn, &w[i]);
	}
	sleep_until(bench_now_s() + WARMUP_S);
	for (i = first; i < NR_T; i++)
		pwb_tenant_stats(t[i], &st0[i]);
	sleep_until(bench_now_s() + o->seconds);
	for (i = first; i < NR_T; i++)
		pwb_tenant_stats(t[i], &st[i]);
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (i = first; i < NR_T; i++) {
		pthread_join(w[i].tid, NULL);
		if (w[i].err && !rc)
			rc = w[i].err;
	}
	if (flood) {
		uint64_t a = st[0].written_bytes - st0[0].written_bytes;
		uint64_t b = st[1].written_bytes - st0[1].written_bytes;

		r->ratio = b ? (double)a / (double)b : 0;
		for (i = 0; i < NR_T; i++)
			r->wrote[i] = (double)(st[i].written_bytes -
					       st0[i].written_bytes) /
				      MIB / o->seconds;
		r->p99_flood = p99(w[2].lat, w[2].nr_lat);
		for (i = 0; i < NR_T; i++) {
			r->max_held[i] = st[i].max_held_bytes;
			/* The flooding ones' own limit; the light one's
			 * share, as last computed. */
			r->limit[i] = i < 2 ? o->dirty_limit / 4
					    : st[i].limit_bytes;
			r->throttled[i] = st[i].throttled_ns;
		}
	} else {
		r->p99_alone = p99(w[2].lat, w[2].nr_lat);
	}
	free(w[2].lat);
out:
	pwb_bdi_inject_fault(bdi, NULL);
	for (i = first; i < NR_T; i++) {
		if (inode[i])
			pwb_inode_close(inode[i]);
	}
	pwb_bdi_close(bdi);
	for (i = first; i < NR_T; i++)
		pwb_tenant_destroy(t[i]);
	return rc;
}

int pwb_bench_tenants(FILE *out, const struct pwb_bench_tenant_opts *o)
{
	double ratio[MAX_RUNS], alone[MAX_RUNS], flood[MAX_RUNS];
	double held[NR_T][MAX_RUNS], lim[NR_T][MAX_RUNS];
	unsigned int runs = o->runs ? o->runs : 3, k, i;
	char path[4096];
	int rc;

	if (runs > MAX_RUNS)
		runs = MAX_RUNS;
	if (posix_memalign((void **)&zero_page, 4096, PS))
		return -ENOMEM;
	memset(zero_page, 0, PS);
	snprintf(path, sizeof(path), "%s/pwb-bench-tenants.img", o->dir);
	rc = image_make(path, o->img_bytes);
	if (rc) {
		fprintf(stderr, "pwb-bench: %s: %s\n", path, strerror(-rc));
		free(zero_page);
		return rc;
	}
	for (k = 0; k < runs; k++) {
		struct run r = { 0 };

		rc = phase(path, o, false, &r);
		if (!rc)
			rc = phase(path, o, true, &r);
		if (rc)
			break;
		ratio[k] = r.ratio;
		alone[k] = r.p99_alone;
		flood[k] = r.p99_flood;
		for (i = 0; i < NR_T; i++) {
			held[i][k] = (double)r.max_held[i];
			lim[i][k] = (double)r.limit[i];
		}
		if (o->verbose)
			fprintf(stderr, "tenants run %u: written %.2f : 1 "
				"(%.1f/%.1f/%.1f MiB/s), light p99 %.2f ms "
				"alone, %.2f ms beside the flood, max held "
				"%.1f/%.1f/%.1f MiB\n",
				k + 1, r.ratio, r.wrote[0], r.wrote[1],
				r.wrote[2], r.p99_alone * 1e3,
				r.p99_flood * 1e3, r.max_held[0] / MIB,
				r.max_held[1] / MIB, r.max_held[2] / MIB);
	}
	unlink(path);
	free(zero_page);
	if (rc)
		return rc;
	fprintf(out, "tenants: one bdi at ~%u MiB/s (delay fault), "
		"dirty_bytes %.0f MiB; heavy w500 and medium w100 flood "
		"(own dirty_bytes %.0f MiB each), light w100 at 5 MiB/s; "
		"medians of %u runs of %.0f s\n",
		256u * 1000u / 1024u / DELAY_MS, o->dirty_limit / MIB,
		o->dirty_limit / 4 / MIB, runs, o->seconds);
	fprintf(out, "  written heavy : medium      %6.2f : 1   (weights 5 : "
		"1)\n", bench_median(ratio, runs));
	{
		double a = bench_median(alone, runs), f = bench_median(flood, runs);
		double r[MAX_RUNS];

		/* Each run's flood against its own alone phase. */
		for (k = 0; k < runs; k++)
			r[k] = alone[k] > 0 ? flood[k] / alone[k] : 0;
		fprintf(out, "  light p99 mark_dirty       %6.3f ms beside the "
			"flood, %6.3f ms alone (%.2fx; run by run median "
			"%.2fx; goal <= 2x)\n",
			f * 1e3, a * 1e3, a > 0 ? f / a : 0, bench_median(r, runs));
	}
	for (i = 0; i < NR_T; i++) {
		static const char *const name[NR_T] = { "heavy", "medium",
							"light" };
		double h = bench_median(held[i], runs), l = bench_median(lim[i], runs);

		double worst = -1e300;

		/* "Never above": the worst run, not the median. */
		for (k = 0; k < runs; k++)
			if (held[i][k] - lim[i][k] > worst)
				worst = held[i][k] - lim[i][k];
		fprintf(out, "  %-6s max dirty+writeback %7.2f MiB, %s "
			"%7.2f MiB (%+.2f MiB; worst run %+.2f MiB, goal <= "
			"one writeback chunk, %u MiB)\n",
			name[i], h / MIB, i < 2 ? "own dirty_bytes" : "share",
			l / MIB, (h - l) / MIB, worst / MIB,
			(unsigned int)(WB_CHUNK_BYTES >> 20));
	}
	return 0;
}
