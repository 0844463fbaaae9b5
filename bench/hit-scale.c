/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hit-scale - what one cached pwb_read() costs when nothing misses, and
 * whether that cost holds with more threads
 *
 * Each of THREADS threads reads its own page, of its own inode, over and
 * over: 4 KiB copied from a page that stays in the CPU's L1 cache, so the
 * figure is libpwb's hit path (look-up, reference, sequence check) plus
 * the copy, with no cache or TLB miss. Then the same threads memcpy() 4
 * KiB from a buffer of their own, the copy alone. Each line is the mean
 * nanoseconds per call over the threads, so 1 and 2 threads compare
 * directly: a hit path that wrote a line another thread's hits write too
 * (a shared counter, a lock) would cost more per call with 2 threads than
 * with 1, as the copy does not. pcache-read (pwb-bench) measures hits on
 * pages that are not in the CPU's caches; this tool separates libpwb's
 * own cost from the memory system's.
 *
 * The bdi is opened on the null backend (nothing is written) over FILE,
 * which must exist (its size bounds the inodes' space).
 *
 * Usage: bench/hit-scale FILE [THREADS [CALLS]]
 * Defaults: 1 thread, 10,000,000 calls per thread. Not installed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pwb.h>

#define PS 4096
#define MAX_THREADS 64

struct hit_thread {
	pthread_t tid;
	struct pwb_inode *inode;	/* NULL: memcpy() from src */
	char *src;
	long calls;
	pthread_barrier_t *bar;
	double ns;			/* out: per call */
	int err;			/* out: a failed call's -errno */
};

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *hit_main(void *arg)
{
	struct hit_thread *t = arg;
	char buf[PS];
	double t0;
	long i;

	pthread_barrier_wait(t->bar);
	t0 = now_ns();
	for (i = 0; i < t->calls; i++) {
		if (t->inode) {
			ssize_t r = pwb_read(t->inode, buf, PS, 0);

			if (r != PS) {
				t->err = r < 0 ? (int)r : -EIO;
				break;
			}
		} else {
			memcpy(buf, t->src, PS);
			/* The copy is the measurement: keep it. */
			__asm__ volatile("" : : "r"(buf) : "memory");
		}
	}
	t->ns = (now_ns() - t0) / (double)t->calls;
	return NULL;
}

/* Run @n threads of @t together; the mean ns per call, or -1. */
static double hit_run(struct hit_thread *t, int n)
{
	pthread_barrier_t bar;
	double sum = 0;
	int i, bad = 0;

	pthread_barrier_init(&bar, NULL, (unsigned int)n);
	for (i = 0; i < n; i++) {
		t[i].bar = &bar;
		if (pthread_create(&t[i].tid, NULL, hit_main, &t[i])) {
			fprintf(stderr, "hit-scale: pthread_create failed\n");
			exit(1);
		}
	}
	for (i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		if (t[i].err) {
			fprintf(stderr, "hit-scale: pwb_read: %s\n",
				strerror(-t[i].err));
			bad = 1;
		}
		sum += t[i].ns;
	}
	pthread_barrier_destroy(&bar);
	return bad ? -1 : sum / n;
}

int main(int argc, char **argv)
{
	static const struct pwb_inode_ops ops;	/* library-owned pages */
	static struct hit_thread t[MAX_THREADS];
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	char page[PS];
	long calls = 10000000;
	double pwb, copy;
	int n = 1, i;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: hit-scale FILE [THREADS [CALLS]]\n");
		return 2;
	}
	if (argc > 2)
		n = atoi(argv[2]);
	if (argc > 3)
		calls = atol(argv[3]);
	if (n < 1 || n > MAX_THREADS || calls < 1) {
		fprintf(stderr, "hit-scale: THREADS 1..%d, CALLS >= 1\n",
			MAX_THREADS);
		return 2;
	}
	pwb_bdi_config_init(&cfg);
	cfg.backend = "null";
	if (pwb_bdi_open(argv[1], &cfg, &bdi)) {
		fprintf(stderr, "hit-scale: %s\n", pwb_errmsg());
		return 1;
	}
	memset(page, 0x5a, sizeof(page));
	for (i = 0; i < n; i++) {
		if (pwb_inode_open(bdi, (uint64_t)i + 1, &ops, NULL,
				   &t[i].inode) ||
		    pwb_write(t[i].inode, page, PS, 0) != PS) {
			fprintf(stderr, "hit-scale: %s\n", pwb_errmsg());
			return 1;
		}
		t[i].calls = calls;
		t[i].src = aligned_alloc(PS, PS);
		if (!t[i].src) {
			fprintf(stderr, "hit-scale: out of memory\n");
			return 1;
		}
		memcpy(t[i].src, page, PS);
	}
	if (pwb_sync(bdi)) {
		fprintf(stderr, "hit-scale: pwb_sync: %s\n", pwb_errmsg());
		return 1;
	}
	pwb = hit_run(t, n);
	for (i = 0; i < n; i++) {
		pwb_inode_close(t[i].inode);
		t[i].inode = NULL;
	}
	copy = hit_run(t, n);
	pwb_bdi_close(bdi);
	for (i = 0; i < n; i++)
		free(t[i].src);
	if (pwb < 0)
		return 1;
	printf("hit-scale: %d thread%s, %ld calls each: pwb_read of a page "
	       "in L1 %.1f ns/call, memcpy of 4 KiB %.1f ns/call, "
	       "libpwb's own %.1f ns\n", n, n == 1 ? "" : "s", calls, pwb,
	       copy, pwb - copy);
	return 0;
}
