// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * stress-test.c - many threads, random calls, re-sharding, and a watchdog
 *
 *   stress-test [--seconds N] [--long] [--hang-after-ms N]
 *
 * Worker threads pick random operations on random inodes for a bounded time:
 * rewrite a page and pwb_mark_dirty() it, pwb_fsync(), pwb_sync(), or close
 * and reopen the inode. A re-shard thread meanwhile switches the number of
 * writeback contexts among 1, 2 and 8 and the shard policy among the
 * built-ins. Every page holds a pattern of (inode, page, version), so after
 * the run a pwb_sync() and a byte-for-byte comparison of the device with
 * the application's memory finds any lost or stale page.
 *
 * A watchdog thread watches each thread's progress counter. A thread that
 * makes no progress for HANG_SECONDS is a hang: the watchdog prints every
 * thread's state (operation, inode, for how long) and the bdi's counters,
 * then exits with status 3. Wall time decides only this and the run's
 * length; nothing here measures speed.
 *
 * --hang-after-ms makes get_page block for ever after that long, to show
 * that the watchdog catches a hang (tests/stress-watchdog.sh).
 *
 * Exit status: 0 pass, 1 failure, 3 hang, 77 skipped (no O_DIRECT here).
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u
#define NR_SLOTS 24u
#define SLOT_PAGES 32u
#define NR_WORKERS 4u
#define NR_THREADS (NR_WORKERS + 2)	/* + re-shard thread + main */
#define MAIN_THREAD (NR_WORKERS + 1)
#define EXIT_HANG 3

static unsigned int hang_seconds = 20;

/* One inode of the application, open or closed. */
struct slot {
	pthread_mutex_t lock;	/* the fields below, and page rewrites */
	struct tu_store st;
	bool open;
	uint32_t version;	/* last version written to any page */
};

/* What a thread is doing, for the watchdog. All fields __atomic. */
struct tstate {
	pthread_t thread;
	const char *name;
	const char *op;		/* static string */
	uint64_t ino;
	uint64_t since_ns;	/* CLOCK_MONOTONIC when op began */
	uint64_t progress;	/* operations finished */
	bool exited;		/* no longer watched */
	int err;		/* first unexpected result */
	const char *err_op;
	unsigned long counts[5];
};

static struct {
	struct pwb_bdi *bdi;
	struct slot slots[NR_SLOTS];
	struct tstate threads[NR_THREADS];
	bool stop;		/* __atomic: workers finish */
	bool done;		/* __atomic: the watchdog finishes */
	uint64_t hang_at_ns;	/* get_page blocks from then on (0: never) */
} S;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static bool stopping(void)
{
	return __atomic_load_n(&S.stop, __ATOMIC_ACQUIRE);
}

static void op_begin(struct tstate *t, const char *op, uint64_t ino)
{
	__atomic_store_n(&t->ino, ino, __ATOMIC_RELAXED);
	__atomic_store_n(&t->since_ns, now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&t->op, op, __ATOMIC_RELEASE);
}

static void op_end(struct tstate *t, int ret, unsigned int kind)
{
	if (ret && !t->err) {
		t->err = ret;
		t->err_op = __atomic_load_n(&t->op, __ATOMIC_RELAXED);
	}
	t->counts[kind]++;
	__atomic_store_n(&t->op, "idle", __ATOMIC_RELEASE);
	__atomic_add_fetch(&t->progress, 1, __ATOMIC_RELEASE);
}

/* tu_ops' get_page, which blocks for ever once S.hang_at_ns has passed. */
static int stress_get_page(struct pwb_inode *inode, uint64_t index,
			   const void **data)
{
	uint64_t at = __atomic_load_n(&S.hang_at_ns, __ATOMIC_RELAXED);

	while (at && now_ns() >= at)
		sleep_ms(1000);
	return tu_ops.get_page(inode, index, data);
}

static struct pwb_inode_ops stress_ops;

static int slot_open(struct slot *sl)
{
	int ret = pwb_inode_open(S.bdi, sl->st.ino, &stress_ops, &sl->st,
				 &sl->st.inode);

	sl->open = !ret;
	return ret;
}

enum { K_MARK, K_FSYNC, K_SYNC, K_REOPEN, K_RESHARD };

static void *worker(void *arg)
{
	struct tstate *t = arg;
	uint64_t seed = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull + 1;

	while (!stopping()) {
		unsigned int r = (unsigned int)(tu_rand(&seed) % 100);
		struct slot *sl = &S.slots[tu_rand(&seed) % NR_SLOTS];
		uint64_t page = tu_rand(&seed) % SLOT_PAGES;
		int ret = 0;

		if (r < 3) {
			op_begin(t, "pwb_sync", 0);
			op_end(t, pwb_sync(S.bdi), K_SYNC);
			continue;
		}
		op_begin(t, "waiting for the inode", sl->st.ino);
		pthread_mutex_lock(&sl->lock);
		if (r < 8) {
			op_begin(t, sl->open ? "pwb_inode_close" :
					       "pwb_inode_open",
				 sl->st.ino);
			if (sl->open) {
				ret = pwb_inode_close(sl->st.inode);
				sl->open = false;
			} else {
				ret = slot_open(sl);
			}
			op_end(t, ret, K_REOPEN);
		} else if (sl->open && r < 20) {
			op_begin(t, "pwb_fsync", sl->st.ino);
			op_end(t, pwb_fsync(sl->st.inode), K_FSYNC);
		} else if (sl->open) {
			op_begin(t, "pwb_mark_dirty", sl->st.ino);
			tu_fill_page(&sl->st, page, ++sl->version);
			ret = pwb_mark_dirty(sl->st.inode, page * PAGE, PAGE);
			op_end(t, ret, K_MARK);
		} else {	/* a closed inode: nothing to do */
			op_end(t, 0, K_MARK);
			t->counts[K_MARK]--;
		}
		pthread_mutex_unlock(&sl->lock);
	}
	__atomic_store_n(&t->exited, true, __ATOMIC_RELEASE);
	return NULL;
}

static void *resharder(void *arg)
{
	static const unsigned int nrs[] = { 1, 2, 8 };
	static const char *const policies[] = {
		"inode-hash", "least-loaded", "alloc-group:groups=4", "hint",
		"xarray", "shared-list:batch=2", "region",
	};
	const unsigned int nr_pol = sizeof(policies) / sizeof(policies[0]);
	struct tstate *t = arg;
	unsigned int i = 0;

	while (!stopping()) {
		op_begin(t, "pwb_bdi_set_nr_wb_ctx", nrs[i % 3]);
		op_end(t, pwb_bdi_set_nr_wb_ctx(S.bdi, nrs[i % 3]), K_RESHARD);
		op_begin(t, "pwb_bdi_set_policy", i % nr_pol);
		op_end(t, pwb_bdi_set_policy(S.bdi, policies[i % nr_pol]),
		       K_RESHARD);
		i++;
		sleep_ms(20);
	}
	__atomic_store_n(&t->exited, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Print every thread's state and the bdi's counters. */
static void report_hang(const struct tstate *stuck, uint64_t now)
{
	struct pwb_stats st;
	unsigned int i;

	fprintf(stderr, "stress-test: watchdog: %s made no progress for %u "
			"s\n",
		stuck->name, hang_seconds);
	for (i = 0; i < NR_THREADS; i++) {
		const struct tstate *t = &S.threads[i];
		const char *op = __atomic_load_n(&t->op, __ATOMIC_ACQUIRE);

		fprintf(stderr, "  %-10s %-22s inode %-4llu for %6llu ms, "
				"%llu ops done\n",
			t->name, op,
			(unsigned long long)__atomic_load_n(&t->ino,
							    __ATOMIC_RELAXED),
			(unsigned long long)(now - __atomic_load_n(
							   &t->since_ns,
							   __ATOMIC_RELAXED)) /
				1000000ull,
			(unsigned long long)__atomic_load_n(&t->progress,
							    __ATOMIC_RELAXED));
	}
	if (!pwb_bdi_stats(S.bdi, &st))
		fprintf(stderr, "  bdi: %u contexts, dirty %llu, writeback "
				"%llu pages, %llu dirty inodes, %llu passes, "
				"%llu writes, %llu errors\n",
			pwb_bdi_nr_wb_ctx(S.bdi),
			(unsigned long long)st.dirty_pages,
			(unsigned long long)st.writeback_pages,
			(unsigned long long)st.nr_dirty_inodes,
			(unsigned long long)st.wb_passes,
			(unsigned long long)st.io_submitted,
			(unsigned long long)st.io_errors);
	fflush(stderr);
}

static void *watchdog(void *arg)
{
	uint64_t last[NR_THREADS], seen_at[NR_THREADS];
	unsigned int i;

	(void)arg;
	for (i = 0; i < NR_THREADS; i++) {
		last[i] = 0;
		seen_at[i] = now_ns();
	}
	while (!__atomic_load_n(&S.done, __ATOMIC_ACQUIRE)) {
		uint64_t now = now_ns();

		for (i = 0; i < NR_THREADS; i++) {
			uint64_t p = __atomic_load_n(&S.threads[i].progress,
						     __ATOMIC_ACQUIRE);

			if (__atomic_load_n(&S.threads[i].exited,
					    __ATOMIC_ACQUIRE)) {
				continue;
			} else if (p != last[i]) {
				last[i] = p;
				seen_at[i] = now;
			} else if (now - seen_at[i] >=
				   hang_seconds * 1000000000ull) {
				report_hang(&S.threads[i], now);
				/* The hung threads cannot be joined. */
				_exit(EXIT_HANG);
			}
		}
		sleep_ms(100);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: stress-test [--seconds N] [--long] "
			"[--hang-after-ms N]\n");
	exit(2);
}

static unsigned int run_seconds, hang_after_ms;

/* One run; 0 if nothing was lost and every call succeeded. */
static int run_stress(void)
{
	unsigned int seconds = run_seconds, i;
	struct pwb_bdi_config cfg;
	pthread_t wd;
	unsigned long totals[5] = { 0 };
	char *image;
	long bad;
	int ret, failed = 0;

	image = tu_image_create((uint64_t)NR_SLOTS * SLOT_PAGES * PAGE +
				(1u << 20));
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 2;
	cfg.dirty_writeback_ms = 50;	/* periodic passes join in */
	cfg.dirty_expire_ms = 100;
	cfg.dirty_background_bytes = 64 * PAGE;
	ret = pwb_bdi_open(image, &cfg, &S.bdi);
	if (ret) {
		fprintf(stderr, "pwb_bdi_open: %s\n", pwb_errmsg());
		tu_image_remove(image);
		return 1;
	}
	stress_ops = tu_ops;
	stress_ops.get_page = stress_get_page;
	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *sl = &S.slots[i];

		pthread_mutex_init(&sl->lock, NULL);
		tu_store_init(&sl->st, 500 + i, PAGE, SLOT_PAGES,
			      (uint64_t)i * SLOT_PAGES * PAGE);
		if (slot_open(sl)) {
			fprintf(stderr, "pwb_inode_open: %s\n", pwb_errmsg());
			return 1;
		}
	}
	if (hang_after_ms)
		S.hang_at_ns = now_ns() + hang_after_ms * 1000000ull;

	for (i = 0; i < NR_THREADS; i++) {
		struct tstate *t = &S.threads[i];
		static char names[NR_THREADS][16];

		if (i < NR_WORKERS)
			snprintf(names[i], sizeof(names[i]), "worker%u", i);
		else
			snprintf(names[i], sizeof(names[i]), "%s",
				 i == MAIN_THREAD ? "main" : "resharder");
		t->name = names[i];
		t->op = "idle";
		t->since_ns = now_ns();
		if (i == MAIN_THREAD)
			continue;
		if (pthread_create(&t->thread, NULL,
				   i < NR_WORKERS ? worker : resharder, t)) {
			perror("pthread_create");
			return 1;
		}
	}
	if (pthread_create(&wd, NULL, watchdog, NULL)) {
		perror("pthread_create");
		return 1;
	}
	/* main is watched too: it runs the clock, then the final checks. */
	for (i = 0; i < seconds * 10; i++) {
		op_begin(&S.threads[MAIN_THREAD], "running", 0);
		sleep_ms(100);
		op_end(&S.threads[MAIN_THREAD], 0, K_SYNC);
	}
	op_begin(&S.threads[MAIN_THREAD], "joining", 0);
	__atomic_store_n(&S.stop, true, __ATOMIC_RELEASE);
	for (i = 0; i < MAIN_THREAD; i++) {
		struct tstate *t = &S.threads[i];
		unsigned int k;

		pthread_join(t->thread, NULL);
		for (k = 0; k < 5; k++)
			totals[k] += t->counts[k];
		if (t->err) {
			fprintf(stderr, "%s: %s returned %s\n", t->name,
				t->err_op, pwb_strerror(t->err));
			failed = 1;
		}
	}
	/* Everything durable, then every page as the application last
	 * wrote it: a lost write or a stale version differs. */
	op_begin(&S.threads[MAIN_THREAD], "final pwb_sync", 0);
	ret = pwb_sync(S.bdi);
	if (ret) {
		fprintf(stderr, "final pwb_sync: %s\n", pwb_strerror(ret));
		failed = 1;
	}
	for (i = 0; i < NR_SLOTS; i++)
		if (S.slots[i].open &&
		    (ret = pwb_inode_close(S.slots[i].st.inode))) {
			fprintf(stderr, "pwb_inode_close: %s\n",
				pwb_strerror(ret));
			failed = 1;
		}
	op_begin(&S.threads[MAIN_THREAD], "pwb_bdi_close", 0);
	ret = pwb_bdi_close(S.bdi);
	__atomic_store_n(&S.done, true, __ATOMIC_RELEASE);
	pthread_join(wd, NULL);
	if (ret) {
		fprintf(stderr, "pwb_bdi_close: %s\n", pwb_strerror(ret));
		failed = 1;
	}
	{
		struct tu_store stores[NR_SLOTS];

		for (i = 0; i < NR_SLOTS; i++)
			stores[i] = S.slots[i].st;
		bad = tu_verify_device(image, stores, NR_SLOTS);
	}
	if (bad) {
		fprintf(stderr, "%ld pages differ from the application's "
				"last version\n",
			bad);
		failed = 1;
	}
	printf("stress-test: %u s, %u workers: %lu mark_dirty, %lu fsync, "
	       "%lu sync, %lu inode close/open, %lu re-shards/policy "
	       "switches; %ld bad pages\n",
	       seconds, NR_WORKERS, totals[K_MARK], totals[K_FSYNC],
	       totals[K_SYNC], totals[K_REOPEN], totals[K_RESHARD], bad);
	for (i = 0; i < NR_SLOTS; i++) {
		tu_store_destroy(&S.slots[i].st);
		pthread_mutex_destroy(&S.slots[i].lock);
	}
	tu_image_remove(image);
	return failed;
}

START_TEST(stress_random_calls_with_resharding_lose_nothing)
{
	ck_assert_msg(run_stress() == 0, "see the messages above");
}
END_TEST

int main(int argc, char **argv)
{
	const char *san = getenv("PWB_SANITIZERS");
	SRunner *sr;
	Suite *s;
	TCase *tc;
	int i, failed;

	run_seconds = san && *san ? 2 : 3;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--long"))
			run_seconds = 120;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			run_seconds = (unsigned int)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--hang-after-ms") && i + 1 < argc)
			hang_after_ms = (unsigned int)atoi(argv[++i]);
		else
			usage();
	}
	if (hang_after_ms) {
		hang_seconds = 2;
		/* Run past the hang, so the watchdog, not the clock, ends it. */
		run_seconds = hang_after_ms / 1000 + 3 * hang_seconds + 2;
	}
	if (tu_odirect_unsupported())
		return 77;
	s = suite_create("stress");
	tc = tcase_create("stress");
	tcase_add_test(tc, stress_random_calls_with_resharding_lose_nothing);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	/* In this process: the watchdog's exit status (3) is ours, and the
	 * watchdog, not Check's timer, ends a hang. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
