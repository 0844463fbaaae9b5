/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_fault.c - fault injection and write-error semantics, white-box
 *
 * The rule engine first, without I/O: pwb_fault_parse() on good and bad
 * specs, pwb_bdi_inject_fault()'s checks, and pwb__fault_check() itself
 * (nth, every, ppm with a seed, max_hits, device ranges, short-write
 * lengths, delays).
 *
 * Then the engine under injected faults, on a real image through the psync
 * backend (and io_uring where the machine has it, the same hook): the exact
 * errors pwb_fsync and pwb_sync callers see (each error once per cursor;
 * every call that started before the error was reported gets it), pages
 * that stay dirty, data that lands whole once the fault stops, short writes
 * that are continued, delays that lose nothing, the retry back-off of
 * periodic and background passes, the failed mark after
 * FAIL_LIMIT consecutive failures, and the ENOSPC pause.
 *
 * Time never passes by sleeping: the bdi reads a tu_clock that the test
 * advances, the flusher's own timer is off (dirty_writeback_ms = 0) and
 * passes are driven with pwb_bdi_writeback(..., PWB_WB_WAIT). The delay
 * tests do sleep, inside the library: that is the fault under test. Threads
 * never call ck_assert: they record, the test joins, then asserts.
 */
#define _GNU_SOURCE
/* pwb_bdi_config.max_write_failures, at its default in these tests. */
#define FAIL_LIMIT 8u

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS 4096u			/* page size of every bdi here */
#define T0 (1000ull * PWB__NSEC_PER_SEC) /* fake clock at open: 1000 s */
#define EXPIRE_MS 30000u
#define BACKOFF_MIN_MS (PWB__WB_BACKOFF_MIN_NS / PWB__NSEC_PER_MSEC)

/*
 * tests/check_fault runs the loops over backends on psync; its twin
 * tests/check_fault_uring (TU_URING_VARIANT=1) runs them on io_uring alone
 * and exits 77 where the machine has no io_uring. io_uring is last, so the
 * loops with the backend as the major index split into two ranges.
 */
static const char *const backends[] = { "psync", "io_uring" };
#define NR_BACKENDS (sizeof(backends) / sizeof(backends[0]))
#define B_LO (TU_URING_VARIANT ? NR_BACKENDS - 1 : 0)
#define B_HI (TU_URING_VARIANT ? NR_BACKENDS : NR_BACKENDS - 1)

/* ---------------------------------------------------------------------- */
/* Environment                                                            */

static void close_store_expect(struct tu_store *st, int want)
{
	int rc = pwb_inode_close(st->inode);

	ck_assert_msg(rc == want, "pwb_inode_close(%" PRIu64 "): %s, "
		      "expected %s", st->ino, pwb_strerror(rc),
		      pwb_strerror(want));
	st->inode = NULL;
}

static uint64_t hits(struct tu_env *e)
{
	uint64_t h = ~0ull;

	ck_assert_int_eq(pwb_fault_hits(e->bdi, &h), 0);
	return h;
}

static void inject(struct tu_env *e, const char *spec)
{
	struct pwb_fault f;
	int rc = pwb_fault_parse(spec, &f);

	ck_assert_msg(rc == 0, "pwb_fault_parse(\"%s\"): %s", spec,
		      pwb_errmsg());
	rc = pwb_bdi_inject_fault(e->bdi, &f);
	ck_assert_msg(rc == 0, "pwb_bdi_inject_fault(\"%s\"): %s", spec,
		      pwb_errmsg());
}

static int last_end_write_err(struct tu_store *st)
{
	int err;

	pthread_mutex_lock(&st->lock);
	err = st->last_err;
	pthread_mutex_unlock(&st->lock);
	return err;
}

static uint64_t pages_written(struct tu_store *st)
{
	uint64_t n;

	pthread_mutex_lock(&st->lock);
	n = st->pages_written;
	pthread_mutex_unlock(&st->lock);
	return n;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * PWB__NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded) until @cond(@arg) holds: for another thread to reach a
 * point, never for time to pass. */
static bool wait_until(bool (*cond)(void *), void *arg)
{
	uint64_t end = now_ns() + 10 * PWB__NSEC_PER_SEC;

	while (!cond(arg)) {
		if (now_ns() > end)
			return false;
		sched_yield();
	}
	return true;
}

/* ---------------------------------------------------------------------- */
/* The spec parser                                                        */

START_TEST(test_parse_accepts_every_kind_and_key)
{
	struct pwb_fault f;

	ck_assert_int_eq(pwb_fault_parse("eio:nth=3", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_EIO);
	ck_assert_uint_eq(f.nth, 3);
	ck_assert_uint_eq(f.every, 0);
	ck_assert_uint_eq(f.dev_end, 0);

	ck_assert_int_eq(pwb_fault_parse("enospc:every=2,max_hits=5", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_ENOSPC);
	ck_assert_uint_eq(f.every, 2);
	ck_assert_uint_eq(f.max_hits, 5);

	ck_assert_int_eq(pwb_fault_parse("short:ppm=500000,seed=42", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_SHORT);
	ck_assert_uint_eq(f.ppm, 500000);
	ck_assert_uint_eq(f.seed, 42);

	ck_assert_int_eq(pwb_fault_parse("delay:every=1,delay_ms=20", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_DELAY);
	ck_assert_uint_eq(f.delay_ms, 20);

	ck_assert_int_eq(pwb_fault_parse("eio:every=1,start=4K,end=1M", &f),
			 0);
	ck_assert_uint_eq(f.dev_start, 4096);
	ck_assert_uint_eq(f.dev_end, 1u << 20);

	ck_assert_int_eq(pwb_fault_parse("eio:nth=1,start=0x1000,end=2G", &f),
			 0);
	ck_assert_uint_eq(f.dev_start, 0x1000);
	ck_assert_uint_eq(f.dev_end, 2ull << 30);

	ck_assert_int_eq(pwb_fault_parse("EIO:Every=7", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_EIO);
	ck_assert_uint_eq(f.every, 7);

	ck_assert_int_eq(pwb_fault_parse("eio:ppm=1000000", &f), 0);
	ck_assert_uint_eq(f.ppm, 1000000);

	ck_assert_int_eq(pwb_fault_parse("none", &f), 0);
	ck_assert_int_eq(f.kind, PWB_FAULT_NONE);
	ck_assert_str_eq(pwb_errmsg(), "");
}
END_TEST

static const char *const bad_specs[] = {
	"",				/* no kind */
	"bogus",			/* unknown kind */
	"eio",				/* can never hit */
	"delay:delay_ms=5",		/* can never hit */
	"eio:",				/* empty list */
	"eio:nth",			/* no '=' */
	"eio:nth=",			/* empty value */
	"eio:nth=abc",
	"eio:nth=-1",			/* no signs */
	"eio:nth=+1",
	"eio:nth= 1",			/* no spaces */
	"eio:nth=1 ",
	" eio:nth=1",
	"eio:nth=1,",			/* trailing comma */
	"eio:,nth=1",
	"eio:nth=1,,every=2",
	"eio:foo=1",			/* unknown key */
	"eio:nth=1,nth=2",		/* key twice */
	"eio:ppm=1000001",		/* above one million */
	"eio:every=1,start=8K,end=4K",	/* empty range */
	"eio:every=1,start=4K,end=4K",
	"eio:nth=18446744073709551616",	/* 2^64 */
	"eio:every=1,end=17179869184G",	/* 2^64 with the suffix */
	"eio:nth=5K",			/* suffix on a count */
	"eio:every=1,start=4KB",
	"eio:every=1,start=0x",
	"eio:every=1,delay_ms=4294967296",
	"eio;nth=1",
	"eio:nth=0x1g",			/* hex digits only */
};

START_TEST(test_parse_rejects_malformed_spec_with_message)
{
	const char *spec = bad_specs[_i];
	struct pwb_fault f, sentinel;
	int rc;

	memset(&f, 0xa5, sizeof(f));
	sentinel = f;
	rc = pwb_fault_parse(spec, &f);
	ck_assert_msg(rc == -EINVAL, "\"%s\" gave %d", spec, rc);
	ck_assert_msg(*pwb_errmsg(), "\"%s\": no message", spec);
	ck_assert_msg(!memcmp(&f, &sentinel, sizeof(f)),
		      "\"%s\": *fault changed on failure", spec);
}
END_TEST

START_TEST(test_parse_message_names_the_bad_part)
{
	struct pwb_fault f;

	ck_assert_int_eq(pwb_fault_parse("bogus:nth=1", &f), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "bogus"));
	/* The message lists every kind, the read rules too. */
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "read_delay"));
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "read_eio"));
	ck_assert_int_eq(pwb_fault_parse("eio:frequency=3", &f), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "frequency"));
	ck_assert_int_eq(pwb_fault_parse("eio:nth=12x", &f), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "12x"));
	ck_assert_int_eq(pwb_fault_parse(NULL, &f), -EINVAL);
	ck_assert_int_eq(pwb_fault_parse("eio:nth=1", NULL), -EINVAL);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Injection and the rule engine (no writes)                              */

START_TEST(test_inject_rejects_rules_that_cannot_work)
{
	struct pwb_fault f = { .kind = PWB_FAULT_EIO, .nth = 1 };
	struct tu_env e;
	uint64_t h;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 16);
	ck_assert_int_eq(pwb_bdi_inject_fault(NULL, &f), -EINVAL);
	ck_assert(*pwb_errmsg());
	f.kind = (enum pwb_fault_kind)99;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), -EINVAL);
	f.kind = PWB_FAULT_EIO;
	f.nth = 0;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "never hit"));
	f.every = 1;
	f.dev_start = 8192;
	f.dev_end = 8192;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), -EINVAL);
	f.dev_end = 4096;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), -EINVAL);
	f.dev_end = 0;
	f.ppm = 1000001;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), -EINVAL);
	/* Stopping needs no counts; stopping twice is fine. */
	f.kind = PWB_FAULT_NONE;
	f.every = 0;
	f.ppm = 0;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_str_eq(pwb_errmsg(), "");
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, NULL), 0);
	ck_assert_int_eq(pwb_fault_hits(NULL, &h), -EINVAL);
	ck_assert_int_eq(pwb_fault_hits(e.bdi, NULL), -EINVAL);
	ck_assert_uint_eq(hits(&e), 0);
	tu_env_close(&e);
}
END_TEST

static enum pwb__fault_action check_at(struct tu_env *e, uint64_t off,
				       uint64_t len, int *err,
				       uint64_t *short_len)
{
	*err = 0;
	*short_len = 0;
	return pwb__fault_check(e->bdi, off, len, err, short_len);
}

START_TEST(test_nth_hits_exactly_the_nth_matching_write)
{
	struct tu_env e;
	uint64_t sl;
	int i, err;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 16);
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	inject(&e, "eio:nth=3");
	for (i = 1; i <= 6; i++) {
		enum pwb__fault_action a = check_at(&e, 0, PS, &err, &sl);

		ck_assert_int_eq(a, i == 3 ? PWB__FAULT_FAIL : PWB__FAULT_PASS);
		ck_assert_int_eq(err, i == 3 ? -EIO : 0);
	}
	ck_assert_uint_eq(hits(&e), 1);
	/* A new rule counts from its own injection. */
	inject(&e, "enospc:nth=2");
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_FAIL);
	ck_assert_int_eq(err, -ENOSPC);
	ck_assert_uint_eq(hits(&e), 2);
	/* Stopping keeps the count of hits since the bdi opened. */
	inject(&e, "none");
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	ck_assert_uint_eq(hits(&e), 2);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_every_hits_multiples_up_to_max_hits)
{
	struct tu_env e;
	uint64_t sl;
	int i, err, failed = 0;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 16);
	inject(&e, "eio:every=3,max_hits=2");
	for (i = 1; i <= 12; i++) {
		enum pwb__fault_action a = check_at(&e, 0, PS, &err, &sl);

		if (a == PWB__FAULT_FAIL) {
			ck_assert_msg(i == 3 || i == 6, "write %d was hit", i);
			failed++;
		}
	}
	ck_assert_int_eq(failed, 2);
	ck_assert_uint_eq(hits(&e), 2);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_only_writes_overlapping_the_range_match)
{
	struct tu_env e;
	uint64_t sl;
	int err;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 1024);
	inject(&e, "eio:nth=2,start=1M,end=2M");
	/* Outside: not counted at all. */
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	ck_assert_int_eq(check_at(&e, (1 << 20) - PS, PS, &err, &sl),
			 PWB__FAULT_PASS);
	ck_assert_int_eq(check_at(&e, 2 << 20, PS, &err, &sl),
			 PWB__FAULT_PASS);
	/* Straddling the start: match 1; inside: match 2, hit. */
	ck_assert_int_eq(check_at(&e, (1 << 20) - PS, 2 * PS, &err, &sl),
			 PWB__FAULT_PASS);
	ck_assert_int_eq(check_at(&e, (2 << 20) - PS, PS, &err, &sl),
			 PWB__FAULT_FAIL);
	ck_assert_uint_eq(hits(&e), 1);
	tu_env_close(&e);
}
END_TEST

/* Hits of 20000 draws, as a bitmap, under "eio:ppm=250000,seed=@seed". */
static unsigned int draw_pattern(struct tu_env *e, uint64_t seed, uint8_t *bits)
{
	char spec[64];
	unsigned int i, n = 0;
	uint64_t sl;
	int err;

	snprintf(spec, sizeof(spec), "eio:ppm=250000,seed=%" PRIu64, seed);
	inject(e, spec);
	memset(bits, 0, 20000 / 8);
	for (i = 0; i < 20000; i++) {
		if (check_at(e, 0, PS, &err, &sl) == PWB__FAULT_FAIL) {
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
			n++;
		}
	}
	return n;
}

START_TEST(test_ppm_draw_is_seeded_and_near_its_rate)
{
	static uint8_t a[20000 / 8], b[20000 / 8], c[20000 / 8];
	unsigned int na, nb, nc;
	struct tu_env e;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 16);
	na = draw_pattern(&e, 7, a);
	nb = draw_pattern(&e, 7, b);
	nc = draw_pattern(&e, 8, c);
	/* 25% of 20000 = 5000; 4 sigma is about 245. */
	ck_assert_msg(na > 4700 && na < 5300, "%u hits for 250000 ppm", na);
	ck_assert_uint_eq(na, nb);
	ck_assert_msg(!memcmp(a, b, sizeof(a)), "same seed, other hits");
	ck_assert_msg(memcmp(a, c, sizeof(a)), "other seed, same hits");
	ck_assert_uint_eq(hits(&e), na + nb + nc);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_short_cut_is_half_in_whole_blocks_and_skips_one_block_writes)
{
	struct tu_env e;
	unsigned int lbs;
	uint64_t sl;
	int err;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 1024);
	lbs = e.bdi->lbs;
	inject(&e, "short:nth=1");
	/* One block cannot be split: not a candidate, not counted. */
	ck_assert_int_eq(check_at(&e, 0, lbs, &err, &sl), PWB__FAULT_PASS);
	ck_assert_uint_eq(hits(&e), 0);
	/* The first splittable write is the first match. */
	ck_assert_int_eq(check_at(&e, 0, 16 * PS, &err, &sl),
			 PWB__FAULT_SHORT);
	ck_assert_uint_eq(sl, 8 * PS);
	ck_assert_uint_eq(hits(&e), 1);

	inject(&e, "short:every=1");
	ck_assert_int_eq(check_at(&e, 0, 3ull * lbs, &err, &sl),
			 PWB__FAULT_SHORT);
	ck_assert_uint_eq(sl, lbs);	/* 1.5 blocks rounds down to 1 */
	ck_assert_int_eq(check_at(&e, 0, 2ull * lbs, &err, &sl),
			 PWB__FAULT_SHORT);
	ck_assert_uint_eq(sl, lbs);
	ck_assert_int_eq(check_at(&e, 0, 5ull * lbs, &err, &sl),
			 PWB__FAULT_SHORT);
	ck_assert_uint_eq(sl, 2ull * lbs);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_delay_sleeps_then_passes)
{
	struct tu_env e;
	uint64_t sl, t;
	int err;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 16);
	inject(&e, "delay:every=2,delay_ms=40");
	t = now_ns();
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	ck_assert_uint_lt(now_ns() - t, 40 * PWB__NSEC_PER_MSEC);
	t = now_ns();
	ck_assert_int_eq(check_at(&e, 0, PS, &err, &sl), PWB__FAULT_PASS);
	ck_assert_uint_ge(now_ns() - t, 40 * PWB__NSEC_PER_MSEC);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(hits(&e), 1);
	tu_env_close(&e);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Errors seen by fsync and sync callers                                  */

static const struct {
	const char *spec;
	int err;
} fail_kinds[] = {
	{ "eio:every=1", -EIO },
	{ "enospc:every=1", -ENOSPC },
};
#define NR_FAIL_KINDS (sizeof(fail_kinds) / sizeof(fail_kinds[0]))

/*
 * Every write fails: pwb_fsync returns the error, every page stays dirty
 * and nothing reaches the device; end_write was told. Once the fault stops
 * the next fsync writes everything and returns 0 (the error was reported),
 * and so does the one after. pwb_sync has its own cursor: it reports the
 * error once, then 0. The device then holds every byte.
 * Loop index: backend * NR_FAIL_KINDS + kind.
 */
START_TEST(test_failed_write_reported_once_to_fsync_and_to_sync)
{
	unsigned int b = (unsigned int)_i / NR_FAIL_KINDS;
	unsigned int k = (unsigned int)_i % NR_FAIL_KINDS;
	int want = fail_kinds[k].err;
	struct tu_store a;
	struct pwb_stats s;
	struct tu_env e;

	tu_env_config(&e, 1, backends[b]);
	tu_env_open(&e, 256);
	tu_open_store(&e, &a, 1, 32, 0, NULL);
	inject(&e, fail_kinds[k].spec);

	tu_dirty_range(&a, 0, 32, 1);
	ck_assert_int_eq(pwb_fsync(a.inode), want);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "pwb_fsync"));
	ck_assert_uint_eq(tu_dirty_pages(&a), 32);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 32);
	ck_assert_int_eq(last_end_write_err(&a), want);
	ck_assert_uint_ge(hits(&e), 1);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &s), 0);
	ck_assert_uint_ge(s.io_errors, 1);
	ck_assert_uint_eq(s.written_pages, 0);
	ck_assert_uint_eq(s.dirty_pages, 32);

	inject(&e, "none");
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);

	ck_assert_int_eq(pwb_sync(e.bdi), want);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	close_store_expect(&a, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/*
 * The same error seen from the other side first: pwb_sync reports it while
 * the fault lasts (again for a second failing sync: a new failure), then
 * once the fault stops pwb_sync succeeds; pwb_fsync, which never reported
 * it, reports it once. Data of two inodes lands whole.
 */
START_TEST(test_sync_reports_each_new_failure_then_fsync_reports_once)
{
	unsigned int b = (unsigned int)_i / NR_FAIL_KINDS;
	unsigned int k = (unsigned int)_i % NR_FAIL_KINDS;
	int want = fail_kinds[k].err;
	struct tu_store st[2];
	struct tu_env e;

	tu_env_config(&e, 1, backends[b]);
	tu_env_open(&e, 256);
	tu_open_store(&e, &st[0], 1, 16, 0, NULL);
	tu_open_store(&e, &st[1], 2, 16, 64, NULL);
	inject(&e, fail_kinds[k].spec);
	tu_dirty_range(&st[0], 0, 16, 1);
	tu_dirty_range(&st[1], 0, 16, 1);

	ck_assert_int_eq(pwb_sync(e.bdi), want);
	ck_assert_int_eq(pwb_sync(e.bdi), want);	/* failed again */
	ck_assert_uint_eq(tu_dirty_pages(&st[0]), 16);
	ck_assert_uint_eq(tu_dirty_pages(&st[1]), 16);
	ck_assert_int_eq(tu_verify(&e, st, 2), 32);

	inject(&e, "none");
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_int_eq(tu_verify(&e, st, 2), 0);
	ck_assert_int_eq(pwb_fsync(st[0].inode), want);
	ck_assert_int_eq(pwb_fsync(st[0].inode), 0);
	ck_assert_int_eq(pwb_fsync(st[1].inode), want);
	ck_assert_int_eq(pwb_fsync(st[1].inode), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	close_store_expect(&st[0], 0);
	close_store_expect(&st[1], 0);
	tu_env_close(&e);
	tu_store_destroy(&st[0]);
	tu_store_destroy(&st[1]);
}
END_TEST

/* get_page that can hold the flusher at a gate, to line callers up. */
static struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed;	/* the next get_page waits */
	bool entered;	/* a get_page is waiting */
	bool open;
} gate = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static int gated_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	pthread_mutex_lock(&gate.lock);
	if (gate.armed) {
		gate.armed = false;
		gate.entered = true;
		pthread_cond_broadcast(&gate.cond);
		while (!gate.open)
			pthread_cond_wait(&gate.cond, &gate.lock);
	}
	pthread_mutex_unlock(&gate.lock);
	return tu_ops.get_page(inode, index, data);
}

/* tu_ops with the gated get_page (tu_ops is not a constant expression). */
static struct pwb_inode_ops make_gated_ops(void)
{
	struct pwb_inode_ops ops = tu_ops;

	ops.get_page = gated_get_page;
	return ops;
}

static void gate_arm(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.armed = true;
	gate.entered = false;
	gate.open = false;
	pthread_mutex_unlock(&gate.lock);
}

static bool gate_entered(void *unused)
{
	bool v;

	pthread_mutex_lock(&gate.lock);
	v = gate.entered;
	pthread_mutex_unlock(&gate.lock);
	return v;
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

struct caller {
	pthread_t thread;
	struct tu_store *st;	/* fsync this, or */
	struct pwb_bdi *bdi;	/* sync this */
	int rc;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;

	c->rc = c->st ? pwb_fsync(c->st->inode) : pwb_sync(c->bdi);
	return NULL;
}

static bool two_fsync_users(void *arg)
{
	struct pwb_inode *inode = arg;
	unsigned int users;

	pthread_mutex_lock(&inode->lock);
	users = inode->users;
	pthread_mutex_unlock(&inode->lock);
	return users == 2;
}

static bool work_queued(void *arg)
{
	struct pwb__wb_ctx *wb = arg;
	bool queued;

	pthread_mutex_lock(&wb->work_lock);
	queued = !cds_list_empty(&wb->work_list);
	pthread_mutex_unlock(&wb->work_lock);
	return queued;
}

/*
 * Two pwb_fsync calls (then two pwb_sync calls) start before the error is
 * reported: the first one's write fails while the flusher is held at a
 * gate until the second call has begun. Both get the error, though only
 * the first write failed (the second call's own write succeeds); a call
 * that starts after them gets 0. With one cursor shared by every caller
 * the second call would miss the error.
 */
START_TEST(test_concurrent_callers_started_before_the_error_all_get_it)
{
	struct pwb_inode_ops ops = make_gated_ops();
	struct caller c1 = { 0 }, c2 = { 0 };
	struct tu_store a;
	struct tu_env e;
	bool ok;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 256);
	tu_open_store(&e, &a, 1, 8, 0, &ops);

	/* fsync */
	inject(&e, "eio:nth=1");
	tu_dirty_range(&a, 0, 8, 1);
	gate_arm();
	c1.st = &a;
	ck_assert_int_eq(pthread_create(&c1.thread, NULL, caller_main, &c1),
			 0);
	ok = wait_until(gate_entered, NULL);
	c2.st = &a;
	ck_assert_int_eq(pthread_create(&c2.thread, NULL, caller_main, &c2),
			 0);
	ok = ok && wait_until(two_fsync_users, a.inode);
	gate_open();
	pthread_join(c1.thread, NULL);
	pthread_join(c2.thread, NULL);
	ck_assert_msg(ok, "the callers never lined up");
	ck_assert_int_eq(c1.rc, -EIO);
	ck_assert_int_eq(c2.rc, -EIO);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), -EIO);	/* its own cursor */

	/* sync */
	inject(&e, "eio:nth=1");
	tu_dirty_range(&a, 0, 8, 2);
	gate_arm();
	memset(&c1, 0, sizeof(c1));
	memset(&c2, 0, sizeof(c2));
	c1.bdi = c2.bdi = e.bdi;
	ck_assert_int_eq(pthread_create(&c1.thread, NULL, caller_main, &c1),
			 0);
	ok = wait_until(gate_entered, NULL);
	ck_assert_int_eq(pthread_create(&c2.thread, NULL, caller_main, &c2),
			 0);
	/* c2 sampled its cursor before queueing its work. */
	ok = ok && wait_until(work_queued, a.inode->wb);
	gate_open();
	pthread_join(c1.thread, NULL);
	pthread_join(c2.thread, NULL);
	ck_assert_msg(ok, "the callers never lined up");
	ck_assert_int_eq(c1.rc, -EIO);
	ck_assert_int_eq(c2.rc, -EIO);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);	/* its own cursor */
	ck_assert_int_eq(pwb_fsync(a.inode), 0);

	close_store_expect(&a, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/*
 * Only pages inside the faulty device range fail: they stay dirty, the
 * rest land; fsync reports the error once.
 */
START_TEST(test_range_fault_fails_only_pages_in_the_range)
{
	struct tu_store a;
	struct tu_env e;
	uint64_t i;
	void *buf;

	tu_env_config(&e, 1, NULL);
	e.cfg.max_io_bytes = PS;	/* one request per page */
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 16, 0, NULL);
	inject(&e, "eio:every=1,start=16K,end=32K");	/* pages 4..7 */
	tu_dirty_range(&a, 0, 16, 1);
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	ck_assert_uint_eq(tu_dirty_pages(&a), 4);
	ck_assert_uint_eq(hits(&e), 4);
	ck_assert(posix_memalign(&buf, 4096, PS) == 0);
	for (i = 0; i < 16; i++) {
		ck_assert_int_eq(tu_read_device(e.img, i * PS, buf, PS), 0);
		ck_assert_uint_eq(*(uint64_t *)buf, (i >= 4 && i < 8) ? 0 : 1);
	}
	free(buf);
	inject(&e, "none");
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	close_store_expect(&a, 0);
	tu_env_close_expect(&e, -EIO);	/* no pwb_sync ever saw it */
	tu_store_destroy(&a);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Short writes and delays                                                */

/*
 * Every multi-block write is cut in half once: the backend continues it,
 * nobody sees an error, and the device holds every byte. Requests of 64,
 * 36, 3 and 1 pages: the last two are cut inside a page where the logical
 * block is smaller than a page. Loop: backend.
 */
START_TEST(test_short_writes_are_continued_and_data_lands_whole)
{
	unsigned int b = (unsigned int)_i;
	struct tu_store st[4];
	struct pwb_stats s;
	struct tu_env e;
	unsigned int i;
	uint64_t p;

	tu_env_config(&e, 1, backends[b]);
	e.cfg.max_io_bytes = 64 * PS;
	tu_env_open(&e, 1024);
	for (i = 0; i < 4; i++)
		tu_open_store(&e, &st[i], i + 1, 100, 128 * i, NULL);
	inject(&e, "short:every=1");
	for (i = 0; i < 3; i++) {
		tu_dirty_range(&st[i], 0, 100, 1);		/* 64 + 36 pages */
		tu_dirty_range(&st[i], 7, 1, 2);
	}
	/* Runs of 3 pages, and single pages, with gaps between. */
	for (p = 0; p < 40; p += 4)
		tu_dirty_range(&st[3], p, 3, 1);
	for (p = 50; p < 100; p += 2)
		tu_dirty_range(&st[3], p, 1, 1);
	ck_assert_int_eq(pwb_fsync(st[0].inode), 0);
	ck_assert_int_eq(pwb_fsync(st[3].inode), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_int_eq(tu_verify(&e, st, 4), 0);
	ck_assert_uint_ge(hits(&e), 16);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &s), 0);
	ck_assert_uint_eq(s.io_errors, 0);
	ck_assert_uint_eq(s.written_pages, 300 + 30 + 25);
	for (i = 0; i < 4; i++) {
		ck_assert_uint_eq(tu_dirty_pages(&st[i]), 0);
		ck_assert_int_eq(last_end_write_err(&st[i]), 0);
	}
	for (i = 0; i < 4; i++)
		close_store_expect(&st[i], 0);
	tu_env_close(&e);
	for (i = 0; i < 4; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

struct redirtier {
	pthread_t thread;
	struct tu_store *st;
	unsigned int nr;
	uint64_t seed;
	int err;		/* first failure */
};

static void *redirtier_main(void *arg)
{
	struct redirtier *r = arg;
	unsigned int round;

	for (round = 0; round < 200 && !r->err; round++) {
		struct tu_store *st = &r->st[tu_rand(&r->seed) % r->nr];
		uint64_t first = tu_rand(&r->seed) % st->nr_pages;
		uint64_t n = 1 + tu_rand(&r->seed) %
				     TU_MIN(8, st->nr_pages - first);
		uint64_t i;
		int rc;

		/* Only this thread writes page memory. A flusher's write
		 * may read a page while it changes; the mark below makes
		 * the page dirty again, so its last contents land later. */
		for (i = first; i < first + n; i++)
			tu_fill_page(st, i, tu_page_version(st, i) + 1);
		rc = pwb_mark_dirty(st->inode, first * PS, n * PS);
		if (!rc && round % 16 == 0)
			rc = pwb_fsync(st->inode);
		if (rc)
			r->err = rc;
	}
	return NULL;
}

/*
 * Writes delayed by 5 ms while a thread keeps dirtying and fsyncing and
 * the test syncs alongside: the delay reorders nothing and loses nothing;
 * every call succeeds and the device ends equal to memory.
 */
START_TEST(test_delayed_writes_lose_no_data)
{
	struct redirtier r = { 0 };
	struct tu_store st[4];
	struct tu_env e;
	unsigned int i;
	int rc = 0, k;

	tu_env_config(&e, 1, NULL);
	e.cfg.nr_wb_ctx = 2;
	tu_env_open(&e, 1024);
	for (i = 0; i < 4; i++) {
		tu_open_store(&e, &st[i], i + 1, 32, 64 * i, NULL);
		tu_dirty_range(&st[i], 0, 32, 1);
	}
	inject(&e, "delay:every=3,delay_ms=5");
	r.st = st;
	r.nr = 4;
	r.seed = 12345;
	ck_assert_int_eq(pthread_create(&r.thread, NULL, redirtier_main, &r),
			 0);
	for (k = 0; k < 10 && !rc; k++)
		rc = pwb_sync(e.bdi);
	pthread_join(r.thread, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(r.err, 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);
	ck_assert_int_eq(tu_verify(&e, st, 4), 0);
	ck_assert_uint_ge(hits(&e), 1);
	for (i = 0; i < 4; i++)
		close_store_expect(&st[i], 0);
	tu_env_close(&e);
	for (i = 0; i < 4; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Retry back-off, the failed mark, ENOSPC                                */

/*
 * A failing inode is written once per periodic pass at most, and then not
 * before its back-off ends: 100 ms of (injected) clock after the first
 * failure, 200 ms after the second. Integrity sync retries at once. A
 * pass that retried the inode as long as it stayed dirty would hit the
 * fault dozens of times per pass. dirty_expire_ms is 0 here: a failed
 * inode is re-stamped dirtied_when = now (the kernel's redirty), so with a
 * longer expiry the expiry, not the back-off, would space the retries.
 */
START_TEST(test_periodic_passes_retry_a_failing_inode_after_a_doubling_backoff)
{
	struct tu_store a;
	struct tu_env e;

	tu_env_config(&e, 1, NULL);
	e.cfg.dirty_expire_ms = 0;
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	inject(&e, "eio:every=1");
	tu_dirty_range(&a, 0, 8, 1);

	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 1);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 1);		/* backing off */
	tu_clock_advance_ms(&e.clock, BACKOFF_MIN_MS - 1);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 1);
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 2);		/* retried after 100 ms */

	tu_clock_advance_ms(&e.clock, 2 * BACKOFF_MIN_MS - 1);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 2);		/* now 200 ms */
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(hits(&e), 3);

	/* Integrity sync ignores the back-off. */
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	ck_assert_uint_eq(hits(&e), 4);

	/* An explicit kick retries too, but once per pass. */
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(hits(&e), 5);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);

	inject(&e, "none");
	tu_clock_advance_ms(&e.clock, 10000);
	tu_writeback_wait(&e, PWB_WB_PERIODIC);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);	/* not yet reported */
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	close_store_expect(&a, 0);
	tu_env_close_expect(&e, -EIO);
	tu_store_destroy(&a);
}
END_TEST

/*
 * Background writeback over a device that fails every write: the pass
 * ends (the test's timeout catches a pass that spins on the failing inode
 * while dirty memory stays above the threshold) and wrote each failing
 * inode once.
 */
START_TEST(test_background_pass_over_failing_device_ends)
{
	struct tu_store a;
	struct tu_env e;

	tu_env_config(&e, 1, NULL);
	e.cfg.dirty_background_bytes = PS;
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 16, 0, NULL);
	inject(&e, "eio:every=1");
	tu_dirty_range(&a, 0, 16, 1);	/* may kick a background pass too */
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(hits(&e), 1);
	ck_assert_uint_eq(tu_dirty_pages(&a), 16);

	inject(&e, "none");
	tu_clock_advance_ms(&e.clock, BACKOFF_MIN_MS);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), -EIO);
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	close_store_expect(&a, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/*
 * FAIL_LIMIT - 1 failed fsyncs, then a good one: the run of
 * failures is broken, nothing sticks. FAIL_LIMIT failures in a row
 * mark the inode failed: even after its data lands, every fsync returns
 * the error until the mark is cleared; then fsync returns 0.
 */
START_TEST(test_inode_failed_after_limit_until_cleared)
{
	struct tu_store a;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);

	inject(&e, "eio:every=1");
	tu_dirty_range(&a, 0, 8, 1);
	for (i = 0; i < FAIL_LIMIT - 1; i++)
		ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	inject(&e, "none");
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);

	inject(&e, "eio:every=1");
	tu_dirty_range(&a, 0, 8, 2);
	for (i = 0; i < FAIL_LIMIT - 1; i++)
		ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	inject(&e, "none");
	ck_assert_int_eq(pwb_fsync(a.inode), 0);	/* counter was reset */

	inject(&e, "eio:every=1");
	tu_dirty_range(&a, 0, 8, 3);
	for (i = 0; i < FAIL_LIMIT; i++)
		ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	inject(&e, "none");
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);	/* failed: sticks */
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);	/* yet the data landed */
	ck_assert_int_eq(pwb_fsync(a.inode), -EIO);
	ck_assert_int_eq(pwb_inode_error(a.inode), -EIO);	/* not consumed */
	ck_assert_int_eq(pwb_inode_error(a.inode), -EIO);
	ck_assert_int_eq(pwb_inode_clear_error(a.inode), 0);
	ck_assert_int_eq(pwb_inode_error(a.inode), 0);
	ck_assert_int_eq(pwb_fsync(a.inode), 0);
	close_store_expect(&a, 0);
	tu_env_close_expect(&e, -EIO);
	tu_store_destroy(&a);
}
END_TEST

/* Closing an inode that stayed failed reports the mark. */
START_TEST(test_close_of_failed_inode_reports_the_error)
{
	struct tu_store a;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	inject(&e, "enospc:every=1");
	tu_dirty_range(&a, 0, 8, 1);
	for (i = 0; i < FAIL_LIMIT; i++)
		ck_assert_int_eq(pwb_fsync(a.inode), -ENOSPC);
	inject(&e, "none");
	close_store_expect(&a, -ENOSPC);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	tu_env_close_expect(&e, -ENOSPC);
	tu_store_destroy(&a);
}
END_TEST

/*
 * The file system is full (ENOSPC on inode A's blocks): the context
 * pauses its background writeback, so inode C, dirtied afterwards on
 * healthy blocks, is not written until the pause ends; A's pages stay
 * dirty. When space returns and the pause ends, writeback resumes by
 * itself and both land. An explicit kick is not paused.
 */
START_TEST(test_enospc_pauses_the_context_and_writeback_resumes)
{
	struct tu_store a, c;
	struct tu_env e;

	tu_env_config(&e, 1, NULL);
	e.cfg.dirty_background_bytes = PS;
	tu_env_open(&e, 256);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	tu_open_store(&e, &c, 2, 8, 64, NULL);
	inject(&e, "enospc:every=1,end=32K");	/* A's pages only */
	tu_dirty_range(&a, 0, 8, 1);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(hits(&e), 1);
	ck_assert_uint_eq(tu_dirty_pages(&a), 8);

	tu_dirty_range(&c, 0, 8, 1);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	tu_clock_advance_ms(&e.clock, BACKOFF_MIN_MS - 1);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(tu_dirty_pages(&c), 8);		/* paused */
	ck_assert_uint_eq(pages_written(&c), 0);
	ck_assert_uint_eq(hits(&e), 1);

	inject(&e, "none");				/* space returns */
	tu_clock_advance_ms(&e.clock, 1);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_uint_eq(tu_dirty_pages(&c), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(tu_verify(&e, &c, 1), 0);

	/* A new pause does not hold back an explicit kick. */
	inject(&e, "enospc:nth=1,end=32K");
	tu_dirty_range(&a, 0, 8, 2);
	tu_writeback_wait(&e, PWB_WB_BACKGROUND);
	ck_assert_uint_eq(hits(&e), 2);
	tu_dirty_range(&c, 0, 8, 2);
	tu_writeback_wait(&e, PWB_WB_ALL);
	ck_assert_uint_eq(tu_dirty_pages(&c), 0);
	ck_assert_uint_eq(tu_dirty_pages(&a), 0);
	ck_assert_int_eq(tu_verify(&e, &a, 1), 0);
	ck_assert_int_eq(tu_verify(&e, &c, 1), 0);

	ck_assert_int_eq(pwb_sync(e.bdi), -ENOSPC);
	ck_assert_int_eq(pwb_fsync(a.inode), -ENOSPC);
	ck_assert_int_eq(pwb_fsync(c.inode), 0);
	close_store_expect(&a, 0);
	close_store_expect(&c, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&c);
}
END_TEST

/*
 * Closing a bdi whose device keeps failing: the close returns the error,
 * does not hang, and frees everything (valgrind checks the last part).
 */
START_TEST(test_bdi_close_with_failing_device_returns_error)
{
	struct tu_store st[3];
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, NULL);
	e.cfg.nr_wb_ctx = 2;
	tu_env_open(&e, 256);
	for (i = 0; i < 3; i++) {
		tu_open_store(&e, &st[i], i + 1, 8, 16 * i, NULL);
		tu_dirty_range(&st[i], 0, 8, 1);
	}
	inject(&e, "eio:every=1");
	tu_env_close_expect(&e, -EIO);
	for (i = 0; i < 3; i++)
		tu_store_destroy(&st[i]);
}
END_TEST

/*
 * A device flush holds bdi->flush_lock for its whole fdatasync: hundreds of
 * milliseconds on a virtual disk, forever on a device that stopped. The
 * test holds the lock itself, standing in for such a flush. A monitoring
 * thread must still read the statistics, and a pwb_sync() that starts
 * meanwhile must get its writes out; only its own flush waits.
 */
START_TEST(test_stats_and_sync_writes_do_not_wait_for_a_device_flush)
{
	struct caller call;
	struct pwb_stats st;
	struct tu_store a;
	struct tu_env e;
	uint64_t flushes;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 256);
	tu_open_store(&e, &a, 1, 64, 0, NULL);
	tu_dirty_range(&a, 0, 64, 1);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);	/* something was written */
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	flushes = st.device_flushes;
	tu_dirty_range(&a, 0, 64, 2);

	pthread_mutex_lock(&e.bdi->flush_lock);	/* "a flush is running" */
	/* Blocked here (until the tcase timeout) if stats took the lock. */
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_eq(st.dirty_pages, 64);
	call = (struct caller){ .bdi = e.bdi, .rc = 1 };
	ck_assert_int_eq(pthread_create(&call.thread, NULL, caller_main, &call),
			 0);
	/* The sync's writes complete while the flush still runs. */
	do {
		sched_yield();
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	} while (st.written_pages < 128);
	ck_assert_uint_eq(st.dirty_pages + st.writeback_pages, 0);
	ck_assert_uint_eq(st.device_flushes, flushes);
	ck_assert_int_eq(__atomic_load_n(&call.rc, __ATOMIC_RELAXED), 1);
	pthread_mutex_unlock(&e.bdi->flush_lock);

	pthread_join(call.thread, NULL);
	ck_assert_int_eq(call.rc, 0);
	ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
	ck_assert_uint_eq(st.device_flushes, flushes + 1);
	ck_assert_int_eq(tu_verify_device(e.img, &a, 1), 0);
	close_store_expect(&a, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
}
END_TEST

/* A write of @st's inode finished now, as pwb__io_complete() records it. */
static uint64_t write_done(struct tu_env *e, struct tu_store *st)
{
	uint64_t epoch;

	tu_lib_lock(&st->inode->lock);
	pwb__bdi_write_done_locked(e->bdi, st->inode);
	epoch = st->inode->last_write_epoch;
	tu_lib_unlock(&st->inode->lock);
	return epoch;
}

static uint64_t nr_flushes(struct tu_env *e)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(e->bdi, &st), 0);
	return st.device_flushes;
}

/*
 * The flush epochs: a flush covers exactly the writes that finished
 * before it began. Driven through the internal calls so the interleaving
 * is exact: "a write finished while a flush ran" is a write tagged after
 * the flush advanced the epoch.
 */
START_TEST(test_flush_covers_writes_finished_before_it_began_and_no_others)
{
	struct tu_store a, b;
	struct tu_env e;
	uint64_t ea, eb, n;

	tu_env_config(&e, 1, NULL);
	tu_env_open(&e, 64);
	tu_open_store(&e, &a, 1, 8, 0, NULL);
	tu_open_store(&e, &b, 2, 8, 8, NULL);
	n = nr_flushes(&e);

	/* Nothing written yet: nothing to flush. */
	ck_assert_uint_eq(pwb__bdi_written_epoch(e.bdi), 0);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, 0), 0);
	ck_assert_uint_eq(nr_flushes(&e), n);

	ea = write_done(&e, &a);
	ck_assert_uint_ge(ea, 1);
	ck_assert_uint_eq(pwb__bdi_written_epoch(e.bdi), ea);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, ea), 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 1);
	/* Covered: neither A's fsync nor a sync with nothing new flushes. */
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, ea), 0);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi,
					       pwb__bdi_written_epoch(e.bdi)),
			 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 1);

	/* B finishes after that flush began: a later epoch, not covered. */
	eb = write_done(&e, &b);
	ck_assert_uint_gt(eb, ea);
	ck_assert_uint_eq(pwb__bdi_written_epoch(e.bdi), eb);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, ea), 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 1);	/* A still covered */
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, eb), 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 2);

	/* A write tagged while another caller holds flush_lock (a flush
	 * about to begin) is covered by that flush once it runs; nothing
	 * is left for the next sync. */
	pthread_mutex_lock(&e.bdi->flush_lock);
	ea = write_done(&e, &a);
	pthread_mutex_unlock(&e.bdi->flush_lock);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi, ea), 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 3);
	ck_assert_int_eq(pwb__bdi_flush_device(e.bdi,
					       pwb__bdi_written_epoch(e.bdi)),
			 0);
	ck_assert_uint_eq(nr_flushes(&e), n + 3);

	close_store_expect(&a, 0);
	close_store_expect(&b, 0);
	tu_env_close(&e);
	tu_store_destroy(&a);
	tu_store_destroy(&b);
}
END_TEST

/* ---------------------------------------------------------------------- */

static Suite *fault_suite(void)
{
	Suite *s = suite_create("fault");
	TCase *tc;

	tc = tcase_create("errors");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc,
		test_failed_write_reported_once_to_fsync_and_to_sync,
		(int)(B_LO * NR_FAIL_KINDS), (int)(B_HI * NR_FAIL_KINDS));
	tcase_add_loop_test(tc,
		test_sync_reports_each_new_failure_then_fsync_reports_once,
		(int)(B_LO * NR_FAIL_KINDS), (int)(B_HI * NR_FAIL_KINDS));
	if (!TU_URING_VARIANT) {
		tcase_add_test(tc,
			test_concurrent_callers_started_before_the_error_all_get_it);
		tcase_add_test(tc,
			       test_range_fault_fails_only_pages_in_the_range);
	}
	suite_add_tcase(s, tc);

	tc = tcase_create("short-delay");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc,
		test_short_writes_are_continued_and_data_lands_whole,
		(int)B_LO, (int)B_HI);
	if (!TU_URING_VARIANT)
		tcase_add_test(tc, test_delayed_writes_lose_no_data);
	suite_add_tcase(s, tc);
	if (TU_URING_VARIANT)
		return s;

	tc = tcase_create("parse");
	tcase_add_test(tc, test_parse_accepts_every_kind_and_key);
	tcase_add_loop_test(tc, test_parse_rejects_malformed_spec_with_message,
			    0, (int)(sizeof(bad_specs) / sizeof(bad_specs[0])));
	tcase_add_test(tc, test_parse_message_names_the_bad_part);
	suite_add_tcase(s, tc);

	tc = tcase_create("rules");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_inject_rejects_rules_that_cannot_work);
	tcase_add_test(tc, test_nth_hits_exactly_the_nth_matching_write);
	tcase_add_test(tc, test_every_hits_multiples_up_to_max_hits);
	tcase_add_test(tc, test_only_writes_overlapping_the_range_match);
	tcase_add_test(tc, test_ppm_draw_is_seeded_and_near_its_rate);
	tcase_add_test(tc,
		test_short_cut_is_half_in_whole_blocks_and_skips_one_block_writes);
	tcase_add_test(tc, test_delay_sleeps_then_passes);
	suite_add_tcase(s, tc);

	tc = tcase_create("retry");
	/* A pass spinning on a failing inode never ends: fail soon. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc,
		test_periodic_passes_retry_a_failing_inode_after_a_doubling_backoff);
	tcase_add_test(tc, test_background_pass_over_failing_device_ends);
	tcase_add_test(tc, test_inode_failed_after_limit_until_cleared);
	tcase_add_test(tc, test_close_of_failed_inode_reports_the_error);
	tcase_add_test(tc, test_enospc_pauses_the_context_and_writeback_resumes);
	tcase_add_test(tc, test_bdi_close_with_failing_device_returns_error);
	tcase_add_test(tc,
		test_stats_and_sync_writes_do_not_wait_for_a_device_flush);
	tcase_add_test(tc,
		test_flush_covers_writes_finished_before_it_began_and_no_others);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (tu_odirect_unsupported())
		return 77;
	if (TU_URING_VARIANT && tu_uring_unsupported())
		return 77;
	return tu_run_suite(fault_suite(), false);
}
