// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_lifecycle.c - closing while calls run, inodes closed with writes in
 * flight, signals during flushes, fork() with flushers running
 *
 * Public API only. The overlaps are made deterministic with a gate in the
 * application's get_page callback: a flusher that reaches a gated page
 * stops there until the test opens the gate, so "a pwb_sync() is in
 * progress" is a fact the test waits for, not a guess made by sleeping.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "pwb-policy.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024ull * 1024)
#define PAGE 4096u
#define NR_PAGES 64u

static char *image;

static void image_setup(void)
{
	image = tu_image_create(16 * MiB);
}

static void image_teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

/* ------------------------------------------------------------------ */
/* The gate                                                           */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed;		/* get_page stops while set */
	unsigned int waiting;	/* flushers stopped at the gate */
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };

static int gated_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	pthread_mutex_lock(&gate.lock);
	if (gate.armed) {
		gate.waiting++;
		pthread_cond_broadcast(&gate.cond);
		while (gate.armed)
			pthread_cond_wait(&gate.cond, &gate.lock);
		gate.waiting--;
	}
	pthread_mutex_unlock(&gate.lock);
	return tu_ops.get_page(inode, index, data);
}

static struct pwb_inode_ops gated_ops;

static void gate_arm(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.armed = true;
	pthread_mutex_unlock(&gate.lock);
}

/* Wait until a flusher is stopped at the gate. */
static void gate_wait_held(void)
{
	pthread_mutex_lock(&gate.lock);
	while (!gate.waiting)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.armed = false;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

/* ------------------------------------------------------------------ */

static struct pwb_bdi *open_bdi(unsigned int nr_ctx, unsigned int flags,
				const char *backend)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	int ret;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr_ctx;
	cfg.dirty_writeback_ms = 0;	/* only what the test asks for */
	cfg.dirty_background_bytes = 0;
	cfg.flags = flags;
	cfg.backend = backend;
	ret = pwb_bdi_open(image, &cfg, &bdi);
	if (ret == -EOPNOTSUPP && backend) {
		printf("skipping the %s variant: %s\n", backend, pwb_errmsg());
		return NULL;
	}
	ck_assert_msg(ret == 0, "pwb_bdi_open: %s", pwb_errmsg());
	return bdi;
}

/* Store @i at device region i * 1 MiB, opened with the gated ops. */
static void store_open(struct tu_store *st, unsigned int i,
		       struct pwb_bdi *bdi)
{
	gated_ops = tu_ops;
	gated_ops.get_page = gated_get_page;
	tu_store_init(st, 100 + i, PAGE, NR_PAGES, i * MiB);
	ck_assert_int_eq(pwb_inode_open(bdi, st->ino, &gated_ops, st,
					&st->inode),
			 0);
}

/* Give every page of @st version @v and mark it dirty. */
static void dirty_all(struct tu_store *st, uint32_t v)
{
	uint64_t i;

	for (i = 0; i < st->nr_pages; i++)
		tu_fill_page(st, i, v);
	ck_assert_int_eq(pwb_mark_dirty(st->inode, 0, NR_PAGES * PAGE), 0);
}

struct call {
	pthread_t thread;
	struct pwb_bdi *bdi;
	struct tu_store *st;
	int ret;
};

static void *sync_thread(void *arg)
{
	struct call *c = arg;

	c->ret = pwb_sync(c->bdi);
	return NULL;
}

static void *fsync_thread(void *arg)
{
	struct call *c = arg;

	c->ret = pwb_fsync(c->st->inode);
	return NULL;
}

static void *close_thread(void *arg)
{
	struct call *c = arg;

	c->ret = pwb_bdi_close(c->bdi);
	return NULL;
}

static void *inode_close_thread(void *arg)
{
	struct call *c = arg;

	c->ret = pwb_inode_close(c->st->inode);
	return NULL;
}

static void start(struct call *c, void *(*fn)(void *))
{
	ck_assert_int_eq(pthread_create(&c->thread, NULL, fn, c), 0);
}

static void join(struct call *c)
{
	ck_assert_int_eq(pthread_join(c->thread, NULL), 0);
}

/*
 * Wait until a call that waits (pwb_bdi_policy is the cheapest) says the
 * bdi is closing. The bdi stays alive meanwhile: the gate holds a call
 * that close waits for.
 */
static void wait_closing(struct pwb_bdi *bdi)
{
	char buf[64];
	int ret;

	while ((ret = pwb_bdi_policy(bdi, buf, sizeof(buf))) == 0)
		sched_yield();
	ck_assert_int_eq(ret, -ESHUTDOWN);
}

/* ------------------------------------------------------------------ */

START_TEST(close_waits_for_sync_in_progress)
{
	struct tu_store st[2];
	struct call s = { 0 }, c = { 0 };
	struct pwb_stats stats;
	struct pwb_inode *late;
	unsigned int i;

	s.bdi = c.bdi = open_bdi(2, 0, NULL);
	for (i = 0; i < 2; i++) {
		store_open(&st[i], i, s.bdi);
		dirty_all(&st[i], 1);
	}
	gate_arm();
	start(&s, sync_thread);
	gate_wait_held();		/* the sync is writing */
	start(&c, close_thread);
	wait_closing(s.bdi);

	/* Calls that wait and begin now are refused... */
	ck_assert_int_eq(pwb_sync(s.bdi), -ESHUTDOWN);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(s.bdi, 1), -ESHUTDOWN);
	ck_assert_int_eq(pwb_bdi_set_policy(s.bdi, NULL), -ESHUTDOWN);
	ck_assert_int_eq(pwb_bdi_writeback(s.bdi, PWB_WB_ALL, 0),
			 -ESHUTDOWN);
	ck_assert_int_eq(pwb_balance_dirty(s.bdi), -ESHUTDOWN);
	ck_assert_int_eq(pwb_inode_open(s.bdi, 999, &tu_ops, NULL, &late),
			 -ESHUTDOWN);
	/* ...queries still answer while close has not begun tearing down. */
	ck_assert_int_eq(pwb_bdi_stats(s.bdi, &stats), 0);

	gate_open();
	join(&s);
	join(&c);
	ck_assert_msg(s.ret == 0, "sync: %s", pwb_strerror(s.ret));
	ck_assert_msg(c.ret == 0, "close: %s", pwb_strerror(c.ret));
	ck_assert_int_eq(tu_verify_device(image, st, 2), 0);
	for (i = 0; i < 2; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

START_TEST(close_waits_for_fsync_in_progress)
{
	struct tu_store st[2];
	struct call f = { 0 }, c = { 0 };
	unsigned int i;

	c.bdi = open_bdi(2, 0, NULL);
	for (i = 0; i < 2; i++) {
		store_open(&st[i], i, c.bdi);
		dirty_all(&st[i], 1);
	}
	f.st = &st[0];
	gate_arm();
	start(&f, fsync_thread);
	gate_wait_held();
	start(&c, close_thread);
	wait_closing(c.bdi);
	/* The other inode takes more data until close reaches it. */
	dirty_all(&st[1], 2);
	gate_open();
	join(&f);
	join(&c);
	ck_assert_msg(f.ret == 0, "fsync: %s", pwb_strerror(f.ret));
	ck_assert_msg(c.ret == 0, "close: %s", pwb_strerror(c.ret));
	ck_assert_int_eq(tu_verify_device(image, st, 2), 0);
	for (i = 0; i < 2; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

START_TEST(close_waits_for_inode_close_of_another_thread)
{
	struct tu_store st[3];
	struct call ic = { 0 }, c = { 0 };
	unsigned int i;

	c.bdi = open_bdi(1, 0, NULL);
	for (i = 0; i < 3; i++) {
		store_open(&st[i], i, c.bdi);
		dirty_all(&st[i], 1);
	}
	ic.st = &st[0];
	gate_arm();
	start(&ic, inode_close_thread);	/* held writing inode 0 */
	gate_wait_held();
	start(&c, close_thread);
	wait_closing(c.bdi);
	gate_open();
	join(&ic);
	join(&c);
	ck_assert_msg(ic.ret == 0, "inode close: %s", pwb_strerror(ic.ret));
	ck_assert_msg(c.ret == 0, "close: %s", pwb_strerror(c.ret));
	ck_assert_int_eq(tu_verify_device(image, st, 3), 0);
	for (i = 0; i < 3; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

struct dirtier {
	pthread_t thread;
	struct tu_store *st;
	int ret;
};

static void *throttled_dirtier(void *arg)
{
	struct dirtier *d = arg;

	/* Far above dirty_bytes: sleeps in pwb_balance_dirty(). */
	d->ret = pwb_mark_dirty(d->st->inode, 0, NR_PAGES * PAGE);
	return NULL;
}

START_TEST(close_cuts_short_a_throttled_dirtier)
{
	struct pwb_bdi_config cfg;
	struct dirtier d = { 0 };
	struct call c = { 0 };
	struct tu_store st;
	uint64_t i;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.dirty_writeback_ms = 0;
	cfg.dirty_background_bytes = 4 * PAGE;
	cfg.dirty_bytes = 8 * PAGE;
	cfg.throttle_timeout_ms = 0;	/* would wait for ever */
	cfg.flags = PWB_BDI_THROTTLE;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &c.bdi), 0);
	store_open(&st, 0, c.bdi);
	for (i = 0; i < NR_PAGES; i++)
		tu_fill_page(&st, i, 1);
	d.st = &st;
	gate_arm();			/* the device makes no room */
	ck_assert_int_eq(pthread_create(&d.thread, NULL, throttled_dirtier,
					&d),
			 0);
	/* Background writeback is stuck at the gate and 64 pages are far
	 * above the 8-page limit: the dirtier sleeps in the throttle (or is
	 * about to) and cannot return before close begins. */
	gate_wait_held();
	start(&c, close_thread);
	/* The dirtier returns although the gate is still shut. */
	ck_assert_int_eq(pthread_join(d.thread, NULL), 0);
	ck_assert_int_eq(d.ret, -ESHUTDOWN);
	gate_open();
	join(&c);
	ck_assert_msg(c.ret == 0, "close: %s", pwb_strerror(c.ret));
	/* The range was dirty all the same: close wrote it. */
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);
	tu_store_destroy(&st);
}
END_TEST

/* ------------------------------------------------------------------ */

static void inode_close_with_writes_in_flight(const char *backend)
{
	struct pwb_fault f = { 0 };
	struct tu_store st;
	struct pwb_bdi *bdi;
	uint64_t hits = 0;
	uint8_t *copy;

	bdi = open_bdi(1, 0, backend);
	if (!bdi)
		return;
	store_open(&st, 0, bdi);
	dirty_all(&st, 7);
	f.kind = PWB_FAULT_DELAY;
	f.every = 1;
	f.delay_ms = 50;
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &f), 0);
	/* Start writing without waiting, until a write is in flight. */
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, 0), 0);
	while (!hits) {
		sched_yield();
		ck_assert_int_eq(pwb_fault_hits(bdi, &hits), 0);
	}
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	/* Nothing may touch the pages once close returned: free them (ASan
	 * reports any later read) and compare against a copy. */
	copy = malloc(NR_PAGES * PAGE);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, st.mem, NR_PAGES * PAGE);
	ck_assert_uint_eq(st.pages_written, NR_PAGES);
	tu_store_destroy(&st);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	st.mem = copy;
	st.nr_pages = NR_PAGES;
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);
	free(copy);
}

START_TEST(inode_close_waits_for_writes_in_flight_psync)
{
	inode_close_with_writes_in_flight("psync");
}
END_TEST

START_TEST(inode_close_waits_for_writes_in_flight_io_uring)
{
	inode_close_with_writes_in_flight("io_uring");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Signals                                                            */

static volatile sig_atomic_t sig_on_app, sig_elsewhere;
static __thread int app_thread;

static void count_signal(int sig)
{
	(void)sig;
	if (app_thread)
		sig_on_app = sig_on_app + 1;
	else
		sig_elsewhere = sig_elsewhere + 1;
}

static void install_handler(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = count_signal;
	sa.sa_flags = 0;	/* no SA_RESTART: interrupted calls fail */
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(sig, &sa, NULL), 0);
}

struct bomber {
	pthread_t thread;
	pthread_t target;
	bool stop;		/* __atomic */
	unsigned long sent;
};

static void *bomb(void *arg)
{
	struct bomber *b = arg;

	while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
		if (pthread_kill(b->target, SIGUSR1))
			break;
		b->sent++;
		sched_yield();
	}
	return NULL;
}

START_TEST(sync_and_fsync_survive_signal_storm)
{
	struct bomber b = { 0 };
	struct tu_store st[2];
	struct pwb_bdi *bdi;
	int bad = 0, first_err = 0;
	unsigned int i, round;

	app_thread = 1;
	install_handler(SIGUSR1);
	bdi = open_bdi(2, 0, NULL);
	for (i = 0; i < 2; i++)
		store_open(&st[i], i, bdi);
	sig_on_app = 0;		/* CK_FORK=no runs every test in one process */
	sig_elsewhere = 0;
	b.target = pthread_self();
	ck_assert_int_eq(pthread_create(&b.thread, NULL, bomb, &b), 0);
	for (round = 1; round <= 200; round++) {
		int ret;

		for (i = 0; i < 2; i++) {
			tu_fill_page(&st[i], round % NR_PAGES, round);
			ret = pwb_mark_dirty(st[i].inode,
					     (round % NR_PAGES) * PAGE, PAGE);
			if (ret && !first_err)
				first_err = ret;
			bad += ret != 0;
		}
		ret = round % 2 ? pwb_fsync(st[round % 4 / 2].inode)
				: pwb_sync(bdi);
		if (ret && !first_err)
			first_err = ret;
		bad += ret != 0;
	}
	__atomic_store_n(&b.stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(b.thread, NULL), 0);
	ck_assert_msg(bad == 0, "%d calls failed, first: %s", bad,
		      pwb_strerror(first_err));
	ck_assert_msg(sig_on_app > 0, "no signal reached the thread "
				      "(%lu sent)", b.sent);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, st, 2), 0);
	for (i = 0; i < 2; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

START_TEST(flushers_block_async_signals)
{
	struct tu_store st;
	struct pwb_bdi *bdi;
	sigset_t set, pending;

	app_thread = 1;
	sig_on_app = 0;		/* CK_FORK=no runs every test in one process */
	sig_elsewhere = 0;
	install_handler(SIGUSR2);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	/* Flushers are created while this thread takes SIGUSR2. */
	ck_assert_int_eq(pthread_sigmask(SIG_UNBLOCK, &set, NULL), 0);
	bdi = open_bdi(2, 0, NULL);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(bdi, 4), 0);
	store_open(&st, 0, bdi);
	dirty_all(&st, 1);
	ck_assert_int_eq(pwb_sync(bdi), 0);

	/* Now only library threads could take a process-wide signal. */
	ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
	ck_assert_int_eq(kill(getpid(), SIGUSR2), 0);
	/* Every flusher wakes and runs: one that took SIGUSR2 would run
	 * the handler now. */
	dirty_all(&st, 2);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(sigpending(&pending), 0);
	ck_assert_msg(sigismember(&pending, SIGUSR2),
		      "SIGUSR2 was taken by a library thread");
	ck_assert_int_eq(sig_elsewhere, 0);
	ck_assert_int_eq(pthread_sigmask(SIG_UNBLOCK, &set, NULL), 0);
	ck_assert_int_eq(sig_on_app, 1);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_store_destroy(&st);
}
END_TEST

/* ------------------------------------------------------------------ */
/* fork()                                                             */

struct writer {
	pthread_t thread;
	struct pwb_bdi *bdi;
	struct tu_store *st;
	bool stop;		/* __atomic */
	int err;
	unsigned long rounds;
};

static void *keep_writing(void *arg)
{
	struct writer *w = arg;
	uint32_t v = 1;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		uint64_t p = v % NR_PAGES;
		int ret;

		tu_fill_page(w->st, p, v);
		ret = pwb_mark_dirty(w->st->inode, p * PAGE, PAGE);
		if (!ret && v % 8 == 0)
			ret = pwb_fsync(w->st->inode);
		if (ret && !w->err)
			w->err = ret;
		v++;
		w->rounds++;
	}
	return NULL;
}

START_TEST(fork_child_exits_parent_data_intact)
{
	bool exec_only = getenv("PWB_TEST_UNDER_VALGRIND") != NULL;
	struct writer w = { 0 };
	struct tu_store st;
	unsigned int round;

	w.bdi = open_bdi(2, 0, NULL);
	store_open(&st, 0, w.bdi);
	w.st = &st;
	ck_assert_int_eq(pthread_create(&w.thread, NULL, keep_writing, &w),
			 0);
	for (round = 0; round < 20; round++) {
		int status;
		pid_t pid;

		/* Flushers and the writer run while we fork. */
		ck_assert_int_eq(pwb_bdi_writeback(w.bdi, PWB_WB_ALL, 0), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			/*
			 * What pwb.h allows a child: no inherited handle, only
			 * async-signal-safe calls, then exec or _exit. The
			 * pure functions (pwb_version, pwb_strerror) take no
			 * lock and are safe too.
			 */
			if (pwb_version() != PWB_VERSION_NUMBER ||
			    !pwb_strerror(-EIO)[0])
				_exit(1);
			/* Both ways out; under valgrind only exec, whose
			 * leak check of an _exit()ing child would call the
			 * parent's in-flight writes lost (their flusher
			 * threads do not exist in the child). */
			if (exec_only || round % 2)
				execl("/bin/true", "true", (char *)NULL);
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status));
		ck_assert_int_eq(WEXITSTATUS(status), 0);
	}
	__atomic_store_n(&w.stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(w.thread, NULL), 0);
	ck_assert_msg(w.err == 0, "writer: %s", pwb_strerror(w.err));
	ck_assert_int_eq(pwb_sync(w.bdi), 0);
	ck_assert_int_eq(tu_verify_device(image, &st, 1), 0);
	ck_assert_int_eq(pwb_bdi_close(w.bdi), 0);
	tu_store_destroy(&st);
}
END_TEST

static Suite *lifecycle_suite(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("close");

	tcase_add_checked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, close_waits_for_sync_in_progress);
	tcase_add_test(tc, close_waits_for_fsync_in_progress);
	tcase_add_test(tc, close_waits_for_inode_close_of_another_thread);
	tcase_add_test(tc, close_cuts_short_a_throttled_dirtier);
	tcase_add_test(tc, inode_close_waits_for_writes_in_flight_psync);
	tcase_add_test(tc, inode_close_waits_for_writes_in_flight_io_uring);
	suite_add_tcase(s, tc);

	tc = tcase_create("signals");
	tcase_add_checked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sync_and_fsync_survive_signal_storm);
	tcase_add_test(tc, flushers_block_async_signals);
	suite_add_tcase(s, tc);

	tc = tcase_create("fork");
	tcase_add_checked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, fork_child_exits_parent_data_intact);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(lifecycle_suite(), true);
}
