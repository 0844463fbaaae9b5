// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_close_race.c - a close overlapping a call that has just entered
 *
 * pwb.h promises that a close waits for the calls on its object that are
 * already running. The narrowest overlap is a call preempted right after
 * it entered the library, before its first lock, while another thread
 * closes the object. This program makes that overlap certain: it
 * interposes pthread_mutex_lock() (the library calls it through its PLT),
 * and a thread that armed the interposer is held at its next lock until
 * the test releases it (or 300 ms pass) while the main thread closes the
 * inode or the bdi. The held call must return its result or -EBADF /
 * -ESHUTDOWN; run under ASan it must not touch freed memory (before the
 * entry helpers, pwb_fsync, pwb_inode_dirty_pages, pwb_inode_error and
 * pwb_sync did).
 *
 * Public API only; the interposer forwards to the next definition
 * (libc's, or a sanitizer's interceptor), found with dlsym(RTLD_NEXT),
 * except for liburcu's own calls, which go straight to libc's: TSan is
 * told to ignore liburcu's mutex calls (tests/tsan.supp, called_from_lib),
 * and would otherwise see its locks (made from here) but not its unlocks.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "pwb-policy.h"
#include "test-util.h"

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 4096u
#define NR_PAGES 64u
#define MiB (1024ull * 1024)
#define HOLD_MAX_MS 300

/* ------------------------------------------------------------------ */
/* The interposer                                                     */

typedef int (*lock_fn)(pthread_mutex_t *);

static lock_fn real_lock;	/* atomic */
static lock_fn libc_lock;	/* atomic */
static __thread int hold_next;	/* this thread's next lock is held */
static int held;		/* atomic: a lock is being held */
static int release;		/* atomic: let it go */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static lock_fn next_lock(void)
{
	lock_fn fn = __atomic_load_n(&real_lock, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = (lock_fn)dlsym(RTLD_NEXT, "pthread_mutex_lock");
		__atomic_store_n(&real_lock, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

static lock_fn plain_lock(void)
{
	lock_fn fn = __atomic_load_n(&libc_lock, __ATOMIC_ACQUIRE);

	if (!fn) {
		void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

		fn = libc ? (lock_fn)dlsym(libc, "pthread_mutex_lock") : NULL;
		if (!fn)
			fn = next_lock();
		__atomic_store_n(&libc_lock, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

__attribute__((constructor)) static void resolve_lock(void)
{
	next_lock();
	plain_lock();
}

/* True if @pc is in liburcu (see the top of the file). */
static bool from_liburcu(void *pc)
{
	Dl_info info;

	return dladdr(pc, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "liburcu");
}

int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (hold_next) {
		uint64_t until = mono_ms() + HOLD_MAX_MS;

		hold_next = 0;
		__atomic_store_n(&held, 1, __ATOMIC_SEQ_CST);
		/* A bdi close waits for this call (a grace period): the
		 * time limit lets it go on in that case. */
		while (!__atomic_load_n(&release, __ATOMIC_SEQ_CST) &&
		       mono_ms() < until)
			pause_ms(1);
	}
	if (from_liburcu(__builtin_return_address(0)))
		return plain_lock()(m);
	return next_lock()(m);
}

/* ------------------------------------------------------------------ */
/* The calls                                                          */

struct race {
	struct pwb_bdi *bdi;
	struct tu_store st;
	int call;		/* index into calls[] */
	int ret;		/* what the held call returned */
	uint64_t nr;		/* pwb_inode_dirty_pages' answer */
};

struct call {
	const char *name;
	bool on_bdi;		/* a bdi call: only the bdi is closed */
	int (*fn)(struct race *r);
	int closed_err;		/* its error once the object is closed */
	bool may_succeed;	/* 0 is a valid answer too */
};

static int do_fsync(struct race *r)
{
	return pwb_fsync(r->st.inode);
}

static int do_dirty_pages(struct race *r)
{
	return pwb_inode_dirty_pages(r->st.inode, &r->nr);
}

static int do_inode_error(struct race *r)
{
	return pwb_inode_error(r->st.inode);
}

static int do_clear_error(struct race *r)
{
	return pwb_inode_clear_error(r->st.inode);
}

static int do_mark_dirty(struct race *r)
{
	return pwb_mark_dirty(r->st.inode, 0, PAGE);
}

static int do_inode_close(struct race *r)
{
	return pwb_inode_close(r->st.inode);
}

static int do_sync(struct race *r)
{
	return pwb_sync(r->bdi);
}

static int do_writeback(struct race *r)
{
	return pwb_bdi_writeback(r->bdi, PWB_WB_ALL, PWB_WB_WAIT);
}

static int do_set_nr(struct race *r)
{
	return pwb_bdi_set_nr_wb_ctx(r->bdi, 2);
}

static int do_set_policy(struct race *r)
{
	return pwb_bdi_set_policy(r->bdi, "xarray");
}

static int do_policy(struct race *r)
{
	char buf[64];

	return pwb_bdi_policy(r->bdi, buf, sizeof(buf));
}

static int do_inode_open(struct race *r)
{
	struct pwb_inode *inode;
	int ret = pwb_inode_open(r->bdi, 99, &tu_ops, &r->st, &inode);

	/* Opened before the close reached the table: the close closed it. */
	return ret;
}

static const struct call calls[] = {
	{ "pwb_fsync", false, do_fsync, -EBADF, true },
	{ "pwb_inode_dirty_pages", false, do_dirty_pages, 0, true },
	{ "pwb_inode_error", false, do_inode_error, 0, true },
	{ "pwb_inode_clear_error", false, do_clear_error, -EBADF, true },
	{ "pwb_mark_dirty", false, do_mark_dirty, -EBADF, true },
	{ "pwb_inode_close", false, do_inode_close, -EBADF, true },
	{ "pwb_sync", true, do_sync, -ESHUTDOWN, true },
	{ "pwb_bdi_writeback", true, do_writeback, -ESHUTDOWN, true },
	{ "pwb_bdi_set_nr_wb_ctx", true, do_set_nr, -ESHUTDOWN, true },
	{ "pwb_bdi_set_policy", true, do_set_policy, -ESHUTDOWN, true },
	{ "pwb_bdi_policy", true, do_policy, -ESHUTDOWN, true },
	{ "pwb_inode_open", true, do_inode_open, -ESHUTDOWN, true },
};
#define NR_CALLS (int)(sizeof(calls) / sizeof(calls[0]))

static void *racer_main(void *arg)
{
	struct race *r = arg;
	uint64_t nr;

	/* The first call of a thread registers it with liburcu (which takes
	 * a lock): not the overlap under test. */
	pwb_inode_dirty_pages(r->st.inode, &nr);
	hold_next = 1;
	r->ret = calls[r->call].fn(r);
	hold_next = 0;
	return NULL;
}

/*
 * Loop index: calls[_i / 2], closing the inode (even) or the bdi (odd);
 * bdi calls only close the bdi.
 */
START_TEST(close_overlaps_a_held_call)
{
	const struct call *c = &calls[_i / 2];
	bool close_bdi = _i % 2 || c->on_bdi;
	char *img = tu_image_create(16 * MiB);
	struct pwb_bdi_config cfg;
	struct race r;
	pthread_t t;
	uint64_t t0;
	int ret;

	if (_i % 2 && c->on_bdi) {
		tu_image_remove(img);
		return;		/* the even case covered it */
	}
	memset(&r, 0, sizeof(r));
	r.call = _i / 2;
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.page_size = PAGE;
	cfg.dirty_writeback_ms = 0;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &r.bdi), 0);
	tu_store_init(&r.st, 1, PAGE, NR_PAGES, 0);
	ck_assert_int_eq(tu_store_open(&r.st, r.bdi), 0);
	for (unsigned int i = 0; i < NR_PAGES; i++)
		tu_fill_page(&r.st, i, 1);
	ck_assert_int_eq(pwb_mark_dirty(r.st.inode, 0, NR_PAGES * PAGE), 0);

	__atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&release, 0, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(pthread_create(&t, NULL, racer_main, &r), 0);
	t0 = mono_ms();
	while (!__atomic_load_n(&held, __ATOMIC_SEQ_CST)) {
		ck_assert_msg(mono_ms() - t0 < 10000,
			      "%s took no lock in 10 s", c->name);
		pause_ms(1);
	}

	/* The call has entered and is held before its first lock. */
	if (close_bdi)
		ret = pwb_bdi_close(r.bdi);
	else
		ret = pwb_inode_close(r.st.inode);
	/* Let liburcu run the frees of what nothing holds any more, so
	 * that a call left uncovered would meet freed memory. */
	pause_ms(50);
	__atomic_store_n(&release, 1, __ATOMIC_SEQ_CST);
	pthread_join(t, NULL);

	ck_assert_msg(ret == 0 || (!close_bdi && ret == -EBADF),
		      "closing the %s: %d", close_bdi ? "bdi" : "inode", ret);
	ck_assert_msg(r.ret == c->closed_err ||
			      (c->may_succeed && r.ret == 0) ||
			      (close_bdi && !c->on_bdi && r.ret == -ESHUTDOWN),
		      "%s held against a close of the %s returned %d (%s)",
		      c->name, close_bdi ? "bdi" : "inode", r.ret,
		      pwb_strerror(r.ret));
	if (!close_bdi)
		ck_assert_int_eq(pwb_bdi_close(r.bdi), 0);
	/* Whoever won, the device holds every page (the close wrote it). */
	ck_assert_int_eq(tu_verify_device(img, &r.st, 1), 0);
	tu_store_destroy(&r.st);
	tu_image_remove(img);
}
END_TEST

static Suite *close_race_suite(void)
{
	Suite *s = suite_create("close_race");
	TCase *tc = tcase_create("held_call");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, close_overlaps_a_held_call, 0, 2 * NR_CALLS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(close_race_suite(), true);
}
