// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * domain-bench.c - pwb-bench's domain and multidev workloads
 *
 * domain: three bdis on three image files, one of them slowed to
 * about 5 MiB/s by the delay fault (psync, one context, a 30 ms sleep
 * before every write of up to 256 KiB: a USB stick). A throttled writer
 * runs on each bdi all along. Three set-ups take turns, run by run:
 *
 *   alone     one memory domain over the two fast bdis only
 *   domain    one memory domain over all three
 *   separate  no domain: each bdi its own third of the budget
 *
 * It prints the fast bdis' writer throughput in each, and what the slow
 * bdi holds dirty (dirty + writeback, mean and peak) against its share of
 * the domain's limit (or its own third).
 *
 * multidev: N bdis on N image files in /dev/shm (tmpfs takes O_DIRECT
 * since Linux 6.6; probed, skipped otherwise), a throttled writer each:
 * the aggregate throughput against one bdi's alone, with separate
 * budgets and with one domain over them.
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
#include "domain-bench.h"

#define PS 4096u
#define MIB (1024.0 * 1024.0)
#define CHUNK_PAGES 16u			/* a writer's call: 64 KiB */
#define SAMPLE_MS 50u
#define WARMUP_S 1.0
#define MAX_DEVS 16
#define MAX_RUNS 15

static uint8_t *zero_page;

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Every page reads as zeros: the data does not matter here. */
static int get_page(struct pwb_inode *inode, uint64_t index, const void **data)
{
	(void)inode;
	(void)index;
	*data = zero_page;
	return 0;
}

static int map_page(struct pwb_inode *inode, uint64_t index, uint64_t *off)
{
	(void)inode;
	*off = index * PS;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

/* Create @path of @bytes, written once with O_DIRECT (allocated blocks,
 * as the fast bdis overwrite them). -errno if O_DIRECT is refused. */
static int image_make(const char *path, uint64_t bytes)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	uint64_t off;
	void *buf;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes)) {
		close(fd);
		return -errno;
	}
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	if (fd < 0)
		return -errno;
	if (posix_memalign(&buf, 4096, 4 << 20)) {
		close(fd);
		return -ENOMEM;
	}
	memset(buf, 0, 4 << 20);
	for (off = 0; off < bytes; off += 4 << 20) {
		size_t n = bytes - off < (4u << 20) ? (size_t)(bytes - off)
						     : 4u << 20;

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
			int e = errno ? -errno : -EIO;

			close(fd);
			free(buf);
			return e;
		}
	}
	fdatasync(fd);
	close(fd);
	free(buf);
	return 0;
}

struct dev {
	char path[4096];
	uint64_t pages;
	bool slow;
	struct pwb_bdi *bdi;
	struct pwb_inode *inode;
	/* The writer thread. */
	pthread_t tid;
	bool *stop;
	uint64_t bytes;		/* atomic: dirtied by the writer */
	int err;
};

static int dev_open(struct dev *d, const struct pwb_bench_domain_opts *o,
		    struct pwb_domain *dom, uint64_t dirty, uint64_t bg)
{
	struct pwb_fault delay = {
		.kind = PWB_FAULT_DELAY, .every = 1, .delay_ms = 30,
	};
	struct pwb_bdi_config cfg;
	int rc;

	pwb_bdi_config_init(&cfg);
	cfg.flags = PWB_BDI_THROTTLE;
	cfg.domain = dom;
	cfg.dirty_bytes = dirty;
	cfg.dirty_background_bytes = bg;
	cfg.nr_wb_ctx = d->slow ? 1 : o->contexts;
	cfg.backend = d->slow ? "psync" : o->backend;
	if (d->slow)
		cfg.max_io_bytes = 256 << 10;	/* 30 ms each: ~5 MiB/s */
	cfg.throttle_timeout_ms = 0;
	rc = pwb_bdi_open(d->path, &cfg, &d->bdi);
	if (rc) {
		fprintf(stderr, "pwb-bench: pwb_bdi_open(%s): %s\n", d->path,
			pwb_errmsg());
		return rc;
	}
	rc = pwb_inode_open(d->bdi, 1, &ops, d, &d->inode);
	if (!rc && d->slow)
		rc = pwb_bdi_inject_fault(d->bdi, &delay);
	if (rc) {
		fprintf(stderr, "pwb-bench: %s: %s\n", d->path, pwb_errmsg());
		pwb_bdi_close(d->bdi);
	}
	return rc;
}

static int dev_close(struct dev *d)
{
	int rc;

	/* Written at full speed: the delay measured the run, not this. */
	pwb_bdi_inject_fault(d->bdi, NULL);
	rc = pwb_inode_close(d->inode);
	if (!rc)
		rc = pwb_bdi_close(d->bdi);
	else
		pwb_bdi_close(d->bdi);
	return rc;
}

static void *writer_fn(void *arg)
{
	struct dev *d = arg;
	uint64_t idx = 0;

	while (!__atomic_load_n(d->stop, __ATOMIC_RELAXED)) {
		int rc = pwb_mark_dirty(d->inode, idx * PS,
					(uint64_t)CHUNK_PAGES * PS);

		if (rc) {
			d->err = rc;
			break;
		}
		__atomic_add_fetch(&d->bytes, (uint64_t)CHUNK_PAGES * PS,
				   __ATOMIC_RELAXED);
		idx += CHUNK_PAGES;
		if (idx + CHUNK_PAGES > d->pages)
			idx = 0;
	}
	return NULL;
}

/* What one run measured. */
struct figures {
	double fast;		/* MiB/s, the fast bdis' writers, after warm-up */
	double fast_dev;	/* MiB/s, their devices (bytes_written) */
	double per_dev[MAX_DEVS];
	double slow_mean;	/* MiB held dirty + writeback by the slow bdi */
	double slow_max;
	double slow_last;	/* MiB held, mean of the last second */
	double slow_limit;	/* MiB, its dirty limit at the end */
	double slow_share;	/* its share, ppm */
	double slow_rate;	/* MiB/s its device wrote */
	double slow_chunk;	/* MiB, its writeback chunk at that rate */
};

/* The least writeback chunk of the library (lib/writeback.c). */
#define WB_CHUNK_MIB 4.0

/* A writeback chunk at @rate MiB/s, as lib/writeback.c's chunk_pages()
 * computes it: half a second of it, rounded up to the next multiple of
 * 4 MiB. */
static double chunk_mib(double rate)
{
	return ((double)(uint64_t)(rate / 2 / WB_CHUNK_MIB) + 1) * WB_CHUNK_MIB;
}

static uint64_t held(struct dev *d)
{
	struct pwb_stats st;

	if (pwb_bdi_stats(d->bdi, &st))
		return 0;
	return (st.dirty_pages + st.writeback_pages) * PS;
}

/*
 * Open @nr devices (in a domain of @dirty bytes if @domain, else each
 * with @dirty / @nr), run a writer on each for o->seconds, sample the slow
 * one. Return 0 or -errno.
 */
static int run_once(const struct pwb_bench_domain_opts *o, struct dev *devs,
		    unsigned int nr, bool domain, uint64_t dirty,
		    struct figures *f)
{
	struct pwb_domain *dom = NULL;
	uint64_t b0[MAX_DEVS] = { 0 }, d0[MAX_DEVS] = { 0 }, w0 = 0, w1 = 0;
	double t0, tw = 0, t1;
	uint64_t sum = 0, samples = 0, max = 0, lsum = 0, lsamples = 0;
	struct dev *slow = NULL;
	struct pwb_stats st;
	unsigned int i, opened = 0;
	bool stop = false;
	int rc = 0;

	memset(f, 0, sizeof(*f));
	if (domain) {
		struct pwb_domain_config dc;

		pwb_domain_config_init(&dc);
		dc.dirty_bytes = dirty;
		dc.dirty_background_bytes = dirty / 2;
		rc = pwb_domain_create(&dc, &dom);
		if (rc)
			return rc;
	}
	for (i = 0; i < nr; i++) {
		devs[i].stop = &stop;
		devs[i].bytes = 0;
		devs[i].err = 0;
		rc = dev_open(&devs[i], o, dom, domain ? dirty : dirty / nr,
			      domain ? dirty / 2 : dirty / 2 / nr);
		if (rc)
			goto out;
		opened++;
		if (devs[i].slow)
			slow = &devs[i];
	}
	for (i = 0; i < nr; i++)
		if (pthread_create(&devs[i].tid, NULL, writer_fn, &devs[i])) {
			rc = -EAGAIN;
			__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
			while (i--)
				pthread_join(devs[i].tid, NULL);
			goto out;
		}
	t0 = bench_now_s();
	for (;;) {
		double t = bench_now_s();

		if (!tw && t - t0 >= WARMUP_S) {
			tw = t;
			for (i = 0; i < nr; i++) {
				b0[i] = __atomic_load_n(&devs[i].bytes,
							__ATOMIC_RELAXED);
				if (!pwb_bdi_stats(devs[i].bdi, &st))
					d0[i] = st.bytes_written;
			}
			if (slow && !pwb_bdi_stats(slow->bdi, &st))
				w0 = st.bytes_written;
		}
		if (t - t0 >= o->seconds + WARMUP_S)
			break;
		if (tw && slow) {
			uint64_t h = held(slow);

			sum += h;
			samples++;
			max = h > max ? h : max;
			if (t - t0 >= o->seconds + WARMUP_S - 1) {
				lsum += h;
				lsamples++;
			}
		}
		nap_ms(SAMPLE_MS);
	}
	t1 = bench_now_s();
	for (i = 0; i < nr; i++) {
		f->per_dev[i] = (double)(__atomic_load_n(&devs[i].bytes,
							 __ATOMIC_RELAXED) -
					 b0[i]) / MIB / (t1 - tw);
		if (devs[i].slow)
			continue;
		f->fast += f->per_dev[i];
		if (!pwb_bdi_stats(devs[i].bdi, &st))
			f->fast_dev += (double)(st.bytes_written - d0[i]) /
				       MIB / (t1 - tw);
	}
	if (slow && !pwb_bdi_stats(slow->bdi, &st)) {
		w1 = st.bytes_written;
		f->slow_limit = (double)st.dirty_limit_bytes / MIB;
		f->slow_share = (double)st.domain_share_ppm;
		f->slow_rate = (double)(w1 - w0) / MIB / (t1 - tw);
		f->slow_chunk = chunk_mib(f->slow_rate);
	}
	f->slow_mean = samples ? (double)sum / (double)samples / MIB : 0;
	f->slow_max = (double)max / MIB;
	f->slow_last = lsamples ? (double)lsum / (double)lsamples / MIB : 0;
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (i = 0; i < nr; i++) {
		pthread_join(devs[i].tid, NULL);
		if (devs[i].err && !rc) {
			fprintf(stderr, "pwb-bench: pwb_mark_dirty on %s: %s\n",
				devs[i].path, pwb_strerror(devs[i].err));
			rc = devs[i].err;
		}
	}
out:
	for (i = 0; i < opened; i++) {
		int e = dev_close(&devs[i]);

		if (e && !rc)
			rc = e;
	}
	if (dom && pwb_domain_destroy(dom) && !rc)
		rc = -EBUSY;
	return rc;
}

static int setup(void)
{
	if (!zero_page && posix_memalign((void **)&zero_page, 4096, PS))
		return -ENOMEM;
	memset(zero_page, 0, PS);
	return 0;
}

int pwb_bench_domain(FILE *out, const struct pwb_bench_domain_opts *o)
{
	static const char *const name[3] = { "alone", "domain", "separate" };
	double fast[3][MAX_RUNS], mean[3][MAX_RUNS], max[3][MAX_RUNS];
	double lim[3][MAX_RUNS], share[3][MAX_RUNS], srate[3][MAX_RUNS];
	double last[3][MAX_RUNS], chunk[3][MAX_RUNS];
	struct dev devs[3];
	unsigned int i, k, runs = o->runs > MAX_RUNS ? MAX_RUNS : o->runs;
	int rc = setup();

	if (rc)
		return rc;
	memset(devs, 0, sizeof(devs));
	/* devs[0] is the slow one; "alone" runs devs[1..2]. */
	for (i = 0; i < 3; i++) {
		snprintf(devs[i].path, sizeof(devs[i].path),
			 "%s/pwb-bench-domain%u.img", o->dir, i);
		devs[i].pages = o->img_bytes / PS;
		devs[i].slow = i == 0;
		rc = image_make(devs[i].path, o->img_bytes);
		if (rc) {
			fprintf(stderr, "pwb-bench: %s: %s\n", devs[i].path,
				strerror(-rc));
			goto out;
		}
	}
	for (k = 0; k < runs; k++) {
		for (i = 0; i < 3; i++) {
			struct figures f;

			rc = i == 0 ? run_once(o, devs + 1, 2, true,
					       o->dirty_limit, &f)
				    : run_once(o, devs, 3, i == 1,
					       o->dirty_limit, &f);
			if (rc)
				goto out;
			fast[i][k] = f.fast;
			mean[i][k] = f.slow_mean;
			max[i][k] = f.slow_max;
			last[i][k] = f.slow_last;
			lim[i][k] = f.slow_limit;
			share[i][k] = f.slow_share;
			srate[i][k] = f.slow_rate;
			chunk[i][k] = f.slow_chunk;
			if (o->verbose)
				fprintf(stderr, "domain run %u %s: fast %.1f "
					"MiB/s; slow writes %.1f MiB/s, holds "
					"%.1f MiB (max %.1f, last second %.1f) "
					"of its limit %.1f MiB, share %.0f "
					"ppm\n", k, name[i], f.fast,
					f.slow_rate, f.slow_mean, f.slow_max,
					f.slow_last, f.slow_limit,
					f.slow_share);
		}
	}
	fprintf(out, "\ndomain: 2 fast bdis (%s) + 1 slow (psync, 30 ms per "
		"256 KiB), throttled writers, dirty budget %g MiB, %g s "
		"runs, medians of %u\n", o->backend,
		(double)o->dirty_limit / MIB, o->seconds, runs);
	fprintf(out, "%-9s %11s %11s %10s %10s %10s %10s %10s\n", "set-up",
		"fast MiB/s", "slow MiB/s", "slow held", "slow max",
		"held end", "slow limit", "share ppm");
	for (i = 0; i < 3; i++) {
		double m = bench_median(fast[i], runs);

		fprintf(out, "%-9s %11.1f ", name[i], m);
		if (i == 0)
			fprintf(out, "%11s %10s %10s %10s %10s %10s", "-", "-",
				"-", "-", "-", "-");
		else
			fprintf(out, "%11.1f %9.1fM %9.1fM %9.1fM %9.1fM "
				"%10.0f", bench_median(srate[i], runs),
				bench_median(mean[i], runs), bench_median(max[i], runs),
				bench_median(last[i], runs), bench_median(lim[i], runs),
				bench_median(share[i], runs));
		if (i && bench_median(fast[0], runs) > 0) {
			double r[MAX_RUNS];

			/* Each run's against the alone run next to it:
			 * the disk's pace drifts between runs. */
			for (k = 0; k < runs; k++)
				r[k] = fast[0][k] > 0 ? fast[i][k] / fast[0][k]
						      : 0;
			fprintf(out, "  fast x%.2f vs alone (medians); run "
				"by run median x%.2f (", m /
				bench_median(fast[0], runs), bench_median(r, runs));
			for (k = 0; k < runs; k++)
				fprintf(out, "%sx%.2f", k ? ", " : "",
					fast[i][k] / (fast[0][k] > 0 ?
						      fast[0][k] : 1));
			fprintf(out, "); goal >= 0.9");
		}
		fprintf(out, "\n");
	}
	/*
	 * "Within its share": what the slow bdi holds on average over the
	 * run against its share's dirty limit plus one writeback chunk
	 * (what one visit of its flusher writes, and what a bdi may borrow
	 * beyond its share at most), run by run; the worst run decides.
	 */
	for (i = 1; i < 3; i++) {
		double worst = -1e300, over;

		for (k = 0; k < runs; k++) {
			over = mean[i][k] - (lim[i][k] + chunk[i][k]);
			if (over > worst)
				worst = over;
		}
		fprintf(out, "%-9s the slow bdi holds %.1f MiB on average "
			"(median; runs ", name[i], bench_median(mean[i], runs));
		for (k = 0; k < runs; k++)
			fprintf(out, "%s%.1f", k ? ", " : "", mean[i][k]);
		fprintf(out, ") against its limit + one writeback chunk "
			"%.1f + %.0f MiB: %s (worst run %+.1f MiB)\n",
			bench_median(lim[i], runs), bench_median(chunk[i], runs),
			worst <= 0 ? "within" : "over", worst);
	}
out:
	for (i = 0; i < 3; i++)
		unlink(devs[i].path);
	return rc;
}

int pwb_bench_multidev(FILE *out, const struct pwb_bench_domain_opts *o)
{
	unsigned int n = o->devices, i, k, runs;
	double one[MAX_RUNS], sep[MAX_RUNS], dom[MAX_RUNS];
	double wone[MAX_RUNS], wsep[MAX_RUNS], wdom[MAX_RUNS];
	double ceil[MAX_RUNS], csep[MAX_RUNS], cdom[MAX_RUNS];
	struct dev devs[MAX_DEVS];
	struct figures f;
	int rc = setup();

	if (rc)
		return rc;
	if (n < 2 || n > MAX_DEVS) {
		fprintf(stderr, "pwb-bench: multidev: --devices 2..%d\n",
			MAX_DEVS);
		return -EINVAL;
	}
	runs = o->runs > MAX_RUNS ? MAX_RUNS : o->runs;
	memset(devs, 0, sizeof(devs));
	for (i = 0; i < n; i++) {
		snprintf(devs[i].path, sizeof(devs[i].path),
			 "%s/pwb-bench-multidev%u.img", o->shm_dir, i);
		devs[i].pages = o->img_bytes / PS;
		rc = image_make(devs[i].path, o->img_bytes);
		if (rc == -EINVAL && i == 0) {
			fprintf(out, "\nmultidev: skipped: %s refuses O_DIRECT "
				"(tmpfs before Linux 6.6)\n", o->shm_dir);
			unlink(devs[0].path);
			return 0;
		}
		if (rc) {
			fprintf(stderr, "pwb-bench: %s: %s\n", devs[i].path,
				strerror(-rc));
			goto out;
		}
	}
	/* Each bdi has the budget of a bdi alone in all three set-ups. */
	for (k = 0; k < runs; k++) {
		rc = run_once(o, devs, 1, false, o->dirty_limit, &f);
		if (rc)
			goto out;
		one[k] = f.fast_dev;
		wone[k] = f.fast;
		rc = run_once(o, devs, n, false, n * o->dirty_limit, &f);
		if (rc)
			goto out;
		sep[k] = f.fast_dev;
		wsep[k] = f.fast;
		rc = run_once(o, devs, n, true, n * o->dirty_limit, &f);
		if (rc)
			goto out;
		dom[k] = f.fast_dev;
		wdom[k] = f.fast;
		/* The machine's ceiling for n threads, in the same run:
		 * the aggregate's goal is 0.9 x it x one bdi's rate. */
		ceil[k] = o->cpu_scaling ? o->cpu_scaling(n) : 0;
		csep[k] = ceil[k] > 0 && one[k] > 0 ? sep[k] / (ceil[k] * one[k])
						    : 0;
		cdom[k] = ceil[k] > 0 && one[k] > 0 ? dom[k] / (ceil[k] * one[k])
						    : 0;
		if (o->verbose)
			fprintf(stderr, "multidev run %u: devices wrote: one "
				"%.1f, %u separate %.1f, %u in a domain %.1f "
				"MiB/s; machine x%.2f for %u threads: x%.2f, "
				"x%.2f of ceiling x one\n", k, one[k], n,
				sep[k], n, dom[k], ceil[k], n, csep[k],
				cdom[k]);
	}
	fprintf(out, "\nmultidev: %u bdis on %s (%s, %u context%s each), a "
		"throttled writer each, %g MiB dirty budget per bdi, %g s "
		"runs, medians of %u\n", n, o->shm_dir, o->backend, o->contexts,
		o->contexts == 1 ? "" : "s", (double)o->dirty_limit / MIB,
		o->seconds, runs);
	{
		double m1 = bench_median(one, runs), ms = bench_median(sep, runs);
		double md = bench_median(dom, runs);

		fprintf(out, "%-18s %14s %14s\n", "set-up",
			"device MiB/s", "writer MiB/s");
		fprintf(out, "%-18s %14.1f %14.1f\n", "one bdi", m1,
			bench_median(wone, runs));
		/* A run too short to write anything has no ratio. */
		fprintf(out, "%-18s %14.1f %14.1f  x%.2f vs one\n",
			"separate budgets", ms, bench_median(wsep, runs),
			m1 > 0 ? ms / m1 : 0);
		fprintf(out, "%-18s %14.1f %14.1f  x%.2f vs one, x%.2f vs "
			"separate\n", "one domain", md, bench_median(wdom, runs),
			m1 > 0 ? md / m1 : 0, ms > 0 ? md / ms : 0);
		if (o->cpu_scaling)
			fprintf(out, "machine: %u threads of a busy loop give "
				"x%.2f of one (median of the runs); aggregate "
				"against that ceiling x one bdi, run by run "
				"medians: separate x%.2f, domain x%.2f (goal "
				">= 0.9)\n", n, bench_median(ceil, runs),
				bench_median(csep, runs), bench_median(cdom, runs));
	}
out:
	for (i = 0; i < n; i++)
		unlink(devs[i].path);
	return rc;
}
