// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_rwflags.c - pwb_write2() and pwb_read2(): PWB_RW_NOWAIT,
 * PWB_RW_DONTCACHE and PWB_RW_SYNC on library-owned pages (issue 26)
 *
 * The inodes map page i to device byte i * page_size of a real image file
 * opened O_DIRECT by the bdi, so the device can be checked with plain
 * reads. The bdi's clock is the test's and stands still: a call that
 * waited for cache room or a timeout would never return, so a call that
 * must not wait runs in a thread under a watchdog.
 *
 * A frozen device is a fault rule that holds every write
 * (PWB_FAULT_DELAY) or read (PWB_FAULT_READ_DELAY) for FREEZE_MS. A
 * PWB_RW_NOWAIT call made meanwhile must return well inside that, and its
 * thread must not have slept at all: getrusage(RUSAGE_THREAD) counts the
 * thread's voluntary context switches, which every wait (a mutex taken
 * by the frozen thread, a condition variable, a device read) adds to.
 * Background work that only contends for the library's short internal
 * locks is run out before such a call (nowait_again()).
 * What a thread wrote to the device itself is /proc/thread-self/io.
 *
 * The cases that hold on any backend run on psync here and on io_uring in
 * the twin (tests/check_rwflags_uring, TU_URING_VARIANT=1), which exits
 * 77 where the machine has no io_uring.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define PS 4096u
#define IMG_PAGES 1024u
/* How long a frozen device holds a request, and the most a call that
 * must not wait may take (real time: far below the freeze, far above a
 * call that does not wait, even on a loaded machine). */
#define FREEZE_MS 4000u
#define NOWAIT_BOUND_MS 1500u

static const char *backend(void)
{
	return TU_URING_VARIANT ? "io_uring" : "psync";
}

static struct pwb_inode *open_lib(struct tu_env *e, uint64_t ino)
{
	struct pwb_inode *inode = NULL;

	ck_assert_int_eq(pwb_inode_open(e->bdi, ino, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &inode),
			 0);
	return inode;
}

static uint64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static struct pwb_stats bdi_stats(struct pwb_bdi *bdi)
{
	struct pwb_stats st;

	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	return st;
}

/* The calling thread's voluntary context switches: each time it slept.
 * -1 if unknown (asserted by the caller's caller: not on a worker). */
static long thread_nvcsw(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return -1;
	return ru.ru_nvcsw;
}

/* What the calling thread passed to write system calls and what it sent
 * to storage, from /proc/thread-self/io. False if the kernel does not
 * say (no task I/O accounting). */
struct thread_io {
	uint64_t wchar, syscw, write_bytes;
};

static bool thread_io(struct thread_io *io)
{
	FILE *f = fopen("/proc/thread-self/io", "r");
	char key[32];
	uint64_t v;
	int seen = 0;

	if (!f)
		return false;
	while (fscanf(f, "%31[^:]: %" SCNu64 " ", key, &v) == 2) {
		if (!strcmp(key, "wchar"))
			io->wchar = v, seen++;
		else if (!strcmp(key, "syscw"))
			io->syscw = v, seen++;
		else if (!strcmp(key, "write_bytes"))
			io->write_bytes = v, seen++;
	}
	fclose(f);
	return seen == 3;
}

/* One pwb_write2() or pwb_read2() on a thread of its own. */
struct call {
	struct pwb_inode *inode;
	bool write;
	void *buf;
	size_t len;
	uint64_t off;
	unsigned int flags;
	ssize_t ret;
	int done;		/* uatomic */
	uint64_t ms;		/* how long it took */
	long slept;		/* voluntary context switches in the call */
	bool io_known;		/* io holds what the call wrote itself */
	struct thread_io io;
};

static void *call_main(void *arg)
{
	struct call *c = arg;
	struct thread_io io0 = { 0 }, io1 = { 0 };
	bool io_known = thread_io(&io0);
	uint64_t t0 = real_ms();
	long cs0 = thread_nvcsw();

	if (c->write)
		c->ret = pwb_write2(c->inode, c->buf, c->len, c->off,
				    c->flags);
	else
		c->ret = pwb_read2(c->inode, c->buf, c->len, c->off, c->flags);
	c->slept = cs0 < 0 ? -1 : thread_nvcsw() - cs0;
	c->ms = real_ms() - t0;
	if (io_known && thread_io(&io1)) {
		c->io_known = true;
		c->io.wchar = io1.wchar - io0.wchar;
		c->io.syscw = io1.syscw - io0.syscw;
		c->io.write_bytes = io1.write_bytes - io0.write_bytes;
	}
	pwb__aset(&c->done, 1);
	return NULL;
}

/*
 * Run the call under a watchdog of @bound_ms (real time) and return it,
 * done. A call still running at the bound fails the test (the forked test
 * process takes the stuck thread with it).
 */
static struct call run_call(struct pwb_inode *inode, bool write, void *buf,
			    size_t len, uint64_t off, unsigned int flags,
			    unsigned int bound_ms)
{
	struct call c = { .inode = inode, .write = write, .buf = buf,
			  .len = len, .off = off, .flags = flags };
	uint64_t t0 = real_ms();
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, call_main, &c), 0);
	while (!pwb__aread(&c.done) && real_ms() - t0 < bound_ms)
		sleep_ms(1);
	ck_assert_msg(pwb__aread(&c.done),
		      "%s of %zu bytes at %llu (flags 0x%x) still waits after "
		      "%u ms",
		      write ? "pwb_write2" : "pwb_read2", len,
		      (unsigned long long)off, flags, bound_ms);
	pthread_join(t, NULL);
	return c;
}

static ssize_t run_bounded(struct pwb_inode *inode, bool write, void *buf,
			   size_t len, uint64_t off, unsigned int flags,
			   unsigned int bound_ms)
{
	return run_call(inode, write, buf, len, off, flags, bound_ms).ret;
}

/*
 * A PWB_RW_NOWAIT call that must stop with -EAGAIN: at once, and without
 * its thread sleeping even once.
 *
 * The frees an earlier close or drop deferred to liburcu's call_rcu
 * thread take the page-buffer pool's lock, which the call takes too to
 * give its page a buffer: bookkeeping that NOWAIT does not promise to
 * avoid (pwb.h), and a voluntary switch here when they overlap (seen in
 * CI under ASan, where the frees run slower). They are run out first, so
 * that any sleep left is one the call itself chose.
 */
static void nowait_again(struct pwb_inode *inode, bool write, void *buf,
			 size_t len, uint64_t off, unsigned int flags)
{
	struct call c;

	rcu_barrier();
	c = run_call(inode, write, buf, len, off, flags | PWB_RW_NOWAIT,
		     NOWAIT_BOUND_MS);

	ck_assert_msg(c.ret == -EAGAIN, "%s at %llu: %zd, not -EAGAIN",
		      write ? "pwb_write2" : "pwb_read2",
		      (unsigned long long)off, c.ret);
	ck_assert_msg(c.slept == 0,
		      "%s at %llu (PWB_RW_NOWAIT) slept %ld times in %llu ms",
		      write ? "pwb_write2" : "pwb_read2",
		      (unsigned long long)off, c.slept,
		      (unsigned long long)c.ms);
}

/* Hold the device: every write of the bdi sleeps @ms first (at most
 * @max_hits writes; 0: all). */
static void delay_writes(struct pwb_bdi *bdi, unsigned int ms,
			 uint64_t max_hits)
{
	struct pwb_fault f;

	memset(&f, 0, sizeof(f));
	f.kind = ms ? PWB_FAULT_DELAY : PWB_FAULT_NONE;
	f.every = 1;
	f.delay_ms = ms;
	f.max_hits = max_hits;
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &f), 0);
}

/* Freeze the device for reads of library-owned pages: every read sleeps
 * @ms before it is made (at most @max_hits reads; 0: all). */
static void delay_reads(struct pwb_bdi *bdi, unsigned int ms,
			uint64_t max_hits)
{
	struct pwb_fault f;

	memset(&f, 0, sizeof(f));
	f.kind = ms ? PWB_FAULT_READ_DELAY : PWB_FAULT_NONE;
	f.every = 1;
	f.delay_ms = ms;
	f.max_hits = max_hits;
	ck_assert_int_eq(pwb_bdi_inject_fault(bdi, &f), 0);
}

/* Wait (real time, bounded) until the fault rules hit @n requests: a
 * frozen request is then held. */
static void wait_hits(struct pwb_bdi *bdi, uint64_t n)
{
	uint64_t t0 = real_ms(), hits = 0;

	do {
		ck_assert_int_eq(pwb_bdi_fault_hits(bdi, &hits), 0);
		if (hits >= n)
			return;
		sleep_ms(1);
	} while (real_ms() - t0 < 10000);
	ck_assert_msg(0, "%" PRIu64 " fault hits, waited for %" PRIu64, hits,
		      n);
}

/* Wait (real time, bounded) until page @index of @inode is in flight. */
static void wait_in_flight(struct pwb_inode *inode, uint64_t index)
{
	uint64_t t0 = real_ms();

	while (!(pwb_page_state(inode, index) & PWB_PAGE_WRITEBACK) &&
	       real_ms() - t0 < 10000)
		sleep_ms(1);
	ck_assert(pwb_page_state(inode, index) & PWB_PAGE_WRITEBACK);
}

/* The read state of page @index of @inode: PWB__PG_UPTODATE,
 * PWB__PG_READING and PWB__PG_READAHEAD (the marker) of its flags; -1 if
 * the page is not cached. */
static int page_rd(struct pwb_inode *inode, uint64_t index)
{
	struct pwb__page *p;
	int fl;

	if (pwb__pcache_page_find(inode, index, false, PWB__ROOM_RECLAIM, &p))
		return -1;
	fl = (int)(pwb__page_flags(p) &
		   (PWB__PG_UPTODATE | PWB__PG_READING | PWB__PG_READAHEAD));
	pwb__page_put(p);
	return fl;
}

/* Page @index is cached and up to date or under read (a NOWAIT reader
 * started its read). */
static void assert_started(struct pwb_inode *inode, uint64_t index)
{
	int fl = page_rd(inode, index);

	ck_assert_msg(fl >= 0 && (fl & (PWB__PG_UPTODATE | PWB__PG_READING)),
		      "page %llu: %s", (unsigned long long)index,
		      fl < 0 ? "not cached" : "cached, no read started");
}

START_TEST(test_unknown_flags)
{
	struct tu_env e;
	struct pwb_inode *inode;
	char b[16] = "0123456789abcdef";

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_write2(inode, b, 16, 0, 0x80), -EINVAL);
	ck_assert_msg(strstr(pwb_errmsg(), "pwb_write2") &&
			      strstr(pwb_errmsg(), "flags 0x80"),
		      "message: %s", pwb_errmsg());
	ck_assert_int_eq(pwb_read2(inode, b, 16, 0,
				   PWB_RW_NOWAIT | 0x100u),
			 -EINVAL);
	ck_assert_msg(strstr(pwb_errmsg(), "pwb_read2") &&
			      strstr(pwb_errmsg(), "flags 0x100"),
		      "message: %s", pwb_errmsg());
	/* Nothing was written or read. */
	ck_assert_int_eq(pwb_read(inode, b, 16, 0), 0);
	/* Flags 0 is the plain call. */
	ck_assert_int_eq(pwb_write2(inode, b, 16, 0, 0), 16);
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(pwb_read2(inode, b, 16, 0, 0), 16);
	ck_assert(!memcmp(b, "0123456789abcdef", 16));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * NOWAIT reads serve only what is cached: a page that must come from
 * the device gives -EAGAIN at once, a read that reaches one after cached
 * pages returns what it copied. On psync nothing is read (no device
 * read, no new page); on io_uring the miss starts the page's read, which
 * a later call finds in flight or done.
 */
START_TEST(test_nowait_read_uncached)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[4 * PS], buf[4 * PS];
	struct pwb_stats st0, st1;
	uint64_t seed = 26;
	size_t i;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	for (i = 0; i < sizeof(ref); i++)
		ref[i] = (unsigned char)tu_rand(&seed);
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_write(inode, ref, sizeof(ref), 0),
			 (ssize_t)sizeof(ref));
	ck_assert_int_eq(pwb_inode_close(inode), 0);	/* written, dropped */
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(ref)), 0);
	st0 = bdi_stats(e.bdi);
	if (!TU_URING_VARIANT) {
		nowait_again(inode, false, buf, PS, PS, 0);
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios, st0.read_ios);
		ck_assert_uint_eq(st1.cache_pages, st0.cache_pages);
		ck_assert_int_eq(page_rd(inode, 1), -1);
	} else {
		/* -EAGAIN, or the page if its read ended at once (and the
		 * call reaped it). */
		ssize_t r = run_bounded(inode, false, buf, PS, PS,
					PWB_RW_NOWAIT, 5000);

		ck_assert_msg(r == -EAGAIN || r == PS, "%zd", r);
		assert_started(inode, 1);
	}
	/* Cached by a plain read: served. */
	ck_assert_int_eq(pwb_read(inode, buf, 10, PS), 10);
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(run_bounded(inode, false, buf, PS, PS,
				     PWB_RW_NOWAIT, 5000),
			 PS);
	ck_assert(!memcmp(buf, ref + PS, PS));
	/* Cached page 1 and part of page 2 (not cached): a short count
	 * (io_uring: or all of it, if page 2's read, started by the call,
	 * ended at once). */
	st0 = bdi_stats(e.bdi);
	if (st0.cache_pages == 1) {	/* no run filled page 2 with 1 */
		ssize_t r = run_bounded(inode, false, buf, PS + 100, PS + 10,
					PWB_RW_NOWAIT, 5000);

		ck_assert_msg(r == PS - 10 ||
				      (TU_URING_VARIANT && r == PS + 100),
			      "%zd", r);
		ck_assert(!memcmp(buf, ref + PS + 10, (size_t)r));
		if (TU_URING_VARIANT)
			assert_started(inode, 2);
		else
			ck_assert_int_eq(page_rd(inode, 2), -1);
	}
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * NOWAIT reads with the device frozen for reads: a page not cached and a
 * page whose read is held in flight both give -EAGAIN at once, without
 * the thread sleeping, and leave no device read or readahead behind, nor
 * a fault hit (a read made). On psync no page either; on io_uring the
 * miss made the readahead's pages, and ended their reads unread rather
 * than sleep in the delay: not up to date, not under read, left to a
 * reader that may sleep. Once the held read ends, the page is served.
 */
START_TEST(test_nowait_read_frozen)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[16 * PS], buf[16 * PS], w[PS];
	struct pwb_stats st0, st1;
	struct call plain;
	uint64_t seed = 11, hits;
	pthread_t t;
	size_t i;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	for (i = 0; i < sizeof(ref); i++)
		ref[i] = (unsigned char)tu_rand(&seed);
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_write(inode, ref, sizeof(ref), 0),
			 (ssize_t)sizeof(ref));
	ck_assert_int_eq(pwb_inode_close(inode), 0);	/* written, dropped */
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(ref)), 0);
	delay_reads(e.bdi, FREEZE_MS, 0);
	st0 = bdi_stats(e.bdi);
	/* Page 0 (where a plain read would start readahead) and a range. */
	nowait_again(inode, false, buf, PS, 0, 0);
	nowait_again(inode, false, buf, 8 * PS, 0, PWB_RW_DONTCACHE);
	nowait_again(inode, false, buf, 100, 3 * PS + 7, PWB_RW_SYNC);
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(st1.read_ios, st0.read_ios);
	if (!TU_URING_VARIANT) {
		ck_assert_uint_eq(st1.cache_pages, st0.cache_pages);
		ck_assert_int_eq(page_rd(inode, 0), -1);
	} else {
		ck_assert_uint_gt(st1.cache_pages, st0.cache_pages);
		ck_assert_int_eq(page_rd(inode, 0) &
					 (PWB__PG_UPTODATE | PWB__PG_READING),
				 0);
	}
	ck_assert_uint_eq(st1.readahead_pages, st0.readahead_pages);
	ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
	ck_assert_uint_eq(hits, 0);	/* no read was even begun */

	/* A plain reader of page 8 is held by the frozen device... */
	memset(&plain, 0, sizeof(plain));
	plain.inode = inode;
	plain.buf = buf + 8 * PS;
	plain.len = PS;
	plain.off = 8 * PS;
	ck_assert_int_eq(pthread_create(&t, NULL, call_main, &plain), 0);
	wait_hits(e.bdi, 1);
	/* ...and neither a NOWAIT read nor a NOWAIT write of the page waits
	 * for that read. */
	nowait_again(inode, false, buf, PS, 8 * PS, 0);
	nowait_again(inode, false, buf, 2 * PS, 8 * PS - 10,
		     PWB_RW_DONTCACHE);
	memset(w, 'W', sizeof(w));
	nowait_again(inode, true, w, PS, 8 * PS, 0);
	ck_assert_msg(!pwb__aread(&plain.done),
		      "the frozen read ended before the NOWAIT calls did");
	pthread_join(t, NULL);
	ck_assert_int_eq(plain.ret, PS);
	ck_assert(!memcmp(buf + 8 * PS, ref + 8 * PS, PS));
	delay_reads(e.bdi, 0, 0);
	/* Up to date now, and unchanged by the refused write: served. */
	memset(buf, 0, PS);
	ck_assert_int_eq(run_bounded(inode, false, buf, PS, 8 * PS,
				     PWB_RW_NOWAIT, 5000),
			 PS);
	ck_assert(!memcmp(buf, ref + 8 * PS, PS));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* Readahead windows for the NOWAIT readahead cases: at most 64 pages. */
#define RA_PAGES 64u
#define RA_FILE_PAGES 64u

/* A bdi reading ahead RA_PAGES, a file of RA_FILE_PAGES pages of @ref
 * written and dropped, reopened with nothing cached. */
static struct pwb_inode *ra_file(struct tu_env *e, unsigned char *ref,
				 uint64_t seed)
{
	struct pwb_inode *inode;
	size_t i;

	tu_env_config(e, 1, backend());
	e->cfg.readahead_bytes = RA_PAGES * PS;
	tu_env_open(e, IMG_PAGES);
	for (i = 0; i < RA_FILE_PAGES * PS; i++)
		ref[i] = (unsigned char)tu_rand(&seed);
	inode = open_lib(e, 1);
	ck_assert_int_eq(pwb_write(inode, ref, RA_FILE_PAGES * PS, 0),
			 (ssize_t)(RA_FILE_PAGES * PS));
	ck_assert_int_eq(pwb_inode_close(inode), 0);	/* written, dropped */
	inode = open_lib(e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, RA_FILE_PAGES * PS), 0);
	return inode;
}

/*
 * NOWAIT reads start readahead on io_uring, as the kernel's RWF_NOWAIT
 * does, and never read on the calling thread. A miss on a cold file
 * starts the reader's first window (pages 0-3 in one device read): the
 * plain pwb_read() that follows waits for it and reads nothing itself.
 * The window's marker (page 1), met by a NOWAIT read, starts the next
 * window (pages 4-11), read ahead. On psync both start nothing: no page,
 * no device read, and the marker stays for a reader that reads.
 */
START_TEST(test_nowait_read_readahead)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[RA_FILE_PAGES * PS], buf[RA_FILE_PAGES * PS];
	struct pwb_stats st0, st1;
	ssize_t r;

	inode = ra_file(&e, ref, 7);

	/* A miss at page 0. */
	st0 = bdi_stats(e.bdi);
	r = run_bounded(inode, false, buf, PS, 0, PWB_RW_NOWAIT, 5000);
	if (!TU_URING_VARIANT) {
		ck_assert_int_eq(r, -EAGAIN);
		ck_assert_int_eq(page_rd(inode, 0), -1);
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios, st0.read_ios);
		ck_assert_uint_eq(st1.cache_pages, st0.cache_pages);
		/* The plain read starts the window itself. */
		ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
	} else {
		/* -EAGAIN, or page 0 if its read ended at once. */
		ck_assert_msg(r == -EAGAIN || r == PS, "%zd", r);
		for (uint64_t i = 0; i < 4; i++)
			assert_started(inode, i);
		ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
		/* Page 0's read was the window's one device read: the plain
		 * read waited for it, and made none. */
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios - st0.read_ios, 1);
		ck_assert_uint_eq(st1.read_pages - st0.read_pages, 4);
		ck_assert_uint_eq(st1.readahead_pages - st0.readahead_pages,
				  3);
	}
	ck_assert(!memcmp(buf, ref, PS));
	/* The window is pages 0-3; page 1 carries the marker. */
	ck_assert_int_eq(page_rd(inode, 1),
			 PWB__PG_UPTODATE | PWB__PG_READAHEAD);

	/* A NOWAIT read across the marker: the page is up to date, and is
	 * served; on io_uring the next window starts. */
	st0 = bdi_stats(e.bdi);
	memset(buf, 0, PS);
	ck_assert_int_eq(run_bounded(inode, false, buf, PS, PS, PWB_RW_NOWAIT,
				     5000),
			 PS);
	ck_assert(!memcmp(buf, ref + PS, PS));
	if (!TU_URING_VARIANT) {
		ck_assert_int_eq(page_rd(inode, 1),
				 PWB__PG_UPTODATE | PWB__PG_READAHEAD);
		ck_assert_int_eq(page_rd(inode, 4), -1);
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios, st0.read_ios);
		ck_assert_uint_eq(st1.cache_pages, st0.cache_pages);
	} else {
		ck_assert_int_eq(page_rd(inode, 1), PWB__PG_UPTODATE);
		for (uint64_t i = 4; i < 12; i++)
			assert_started(inode, i);
		ck_assert_int_eq(page_rd(inode, 12), -1);
		/* Waited for by a plain read, which reads nothing itself:
		 * one device read, all of it read ahead. Pages 5-11 (page
		 * 4 carries the new marker, whose reader would start the
		 * window after, counted when it ends). */
		ck_assert_int_eq(pwb_read(inode, buf, 7 * PS, 5 * PS),
				 7 * PS);
		ck_assert(!memcmp(buf, ref + 5 * PS, 7 * PS));
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios - st0.read_ios, 1);
		ck_assert_uint_eq(st1.readahead_pages - st0.readahead_pages,
				  8);
		ck_assert_int_eq(pwb_read(inode, buf, PS, 4 * PS), PS);
		ck_assert(!memcmp(buf, ref + 4 * PS, PS));
	}
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * A NOWAIT read across the readahead marker with the device frozen for
 * reads: the page is served at once, without the thread sleeping, and no
 * read is made or even begun (no fault hit). On io_uring the marker is
 * taken and the next window's pages made, their reads ended unread
 * rather than sleep in the delay (not up to date, not under read); a
 * plain reader reads them once the device thaws. On psync nothing
 * starts and the marker stays.
 */
START_TEST(test_nowait_marker_frozen)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[RA_FILE_PAGES * PS], buf[RA_FILE_PAGES * PS];
	struct pwb_stats st0, st1;
	struct call c;
	uint64_t hits;

	inode = ra_file(&e, ref, 8);
	/* The first window, pages 0-3 in one read, marker on page 1. */
	ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
	ck_assert_int_eq(page_rd(inode, 1),
			 PWB__PG_UPTODATE | PWB__PG_READAHEAD);
	delay_reads(e.bdi, FREEZE_MS, 0);
	st0 = bdi_stats(e.bdi);
	rcu_barrier();
	memset(buf, 0, PS);
	c = run_call(inode, false, buf, PS, PS, PWB_RW_NOWAIT,
		     NOWAIT_BOUND_MS);
	ck_assert_int_eq(c.ret, PS);
	ck_assert(!memcmp(buf, ref + PS, PS));
	ck_assert_msg(c.slept == 0,
		      "pwb_read2 across the marker (PWB_RW_NOWAIT) slept %ld "
		      "times in %llu ms",
		      c.slept, (unsigned long long)c.ms);
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_eq(st1.read_ios, st0.read_ios);
	ck_assert_uint_eq(st1.readahead_pages, st0.readahead_pages);
	ck_assert_int_eq(pwb_bdi_fault_hits(e.bdi, &hits), 0);
	ck_assert_uint_eq(hits, 0);
	if (!TU_URING_VARIANT) {
		ck_assert_int_eq(page_rd(inode, 1),
				 PWB__PG_UPTODATE | PWB__PG_READAHEAD);
		ck_assert_int_eq(page_rd(inode, 4), -1);
	} else {
		ck_assert_int_eq(page_rd(inode, 1), PWB__PG_UPTODATE);
		ck_assert_int_eq(page_rd(inode, 4) &
					 (PWB__PG_UPTODATE | PWB__PG_READING),
				 0);
	}
	delay_reads(e.bdi, 0, 0);
	ck_assert_int_eq(pwb_read(inode, buf, 8 * PS, 4 * PS), 8 * PS);
	ck_assert(!memcmp(buf, ref + 4 * PS, 8 * PS));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * io_uring: a thread that only ever reads with NOWAIT sees its pages
 * arrive. Its miss starts the read; no thread waits on the ring the read
 * is on, and its later NOWAIT calls reap that ring (its lock free) and
 * find the page done. The calls are retried until the page is served,
 * for at most 10 s of real time.
 */
START_TEST(test_nowait_poller_sees_pages)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[RA_FILE_PAGES * PS], buf[RA_FILE_PAGES * PS];
	struct pwb_stats st0, st1;
	uint64_t t0 = real_ms(), calls = 0;
	ssize_t r;

	inode = ra_file(&e, ref, 9);
	st0 = bdi_stats(e.bdi);
	do {
		r = pwb_read2(inode, buf, 2 * PS, 0, PWB_RW_NOWAIT);
		calls++;
		if (r == -EAGAIN)
			sched_yield();
	} while (r == -EAGAIN && real_ms() - t0 < 10000);
	ck_assert_msg(r > 0, "pwb_read2 (PWB_RW_NOWAIT): %zd after %llu calls",
		      r, (unsigned long long)calls);
	ck_assert(!memcmp(buf, ref, (size_t)r));
	st1 = bdi_stats(e.bdi);
	/* The window's one read, none on the calling thread. */
	ck_assert_uint_eq(st1.read_ios - st0.read_ios, 1);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * NOWAIT writes with the device frozen for writes and the cache full of
 * dirty pages, some held in flight: a write that needs room, and one of a
 * page in flight, give -EAGAIN at once without the thread sleeping, where
 * a plain write would wait for the device.
 */
START_TEST(test_nowait_write_frozen)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char w[PS], out[PS];
	int64_t busy = -1;
	int i;

	tu_env_config(&e, 1, backend());
	e.cfg.cache_bytes = 16 * PS;
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	memset(w, 'w', sizeof(w));
	delay_writes(e.bdi, FREEZE_MS, 0);
	for (i = 0; i < 16; i++)
		ck_assert_int_eq(pwb_write(inode, w, PS, (uint64_t)i * PS), PS);
	ck_assert_int_eq(pwb_bdi_writeback(e.bdi, PWB_WB_ALL, 0), 0);
	wait_hits(e.bdi, 1);	/* a write of some of them is held */
	for (i = 0; i < 16 && busy < 0; i++)
		if (pwb_page_state(inode, (uint64_t)i) & PWB_PAGE_WRITEBACK)
			busy = i;
	ck_assert_int_ge(busy, 0);
	ck_assert_uint_eq(bdi_stats(e.bdi).cache_pages, 16);
	/* No room for a page 40 until a write ends. */
	memset(w, 'x', sizeof(w));
	nowait_again(inode, true, w, PS, 40 * PS, 0);
	nowait_again(inode, true, w, 100, 40 * PS + 5, PWB_RW_DONTCACHE);
	nowait_again(inode, true, w, PS, 40 * PS, PWB_RW_SYNC);
	/* A page in flight, in part and whole. */
	nowait_again(inode, true, w, 10, (uint64_t)busy * PS + 5, 0);
	nowait_again(inode, true, w, PS, (uint64_t)busy * PS, 0);
	ck_assert(pwb_page_state(inode, (uint64_t)busy) & PWB_PAGE_WRITEBACK);
	delay_writes(e.bdi, 0, 0);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	/* Nothing of the refused writes landed. */
	memset(w, 'w', sizeof(w));
	ck_assert_int_eq(pwb_read(inode, out, PS, (uint64_t)busy * PS), PS);
	ck_assert(!memcmp(out, w, PS));
	ck_assert_int_eq(pwb_read(inode, out, PS, 40 * PS), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * NOWAIT writes: a page under writeback (the device held) and a partial
 * write of a page that must be read first give -EAGAIN quickly; a range
 * whose first page can be written returns that page (a short count); the
 * bytes of a refused page are left as they were.
 */
START_TEST(test_nowait_write_in_flight)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char a[3 * PS], b[3 * PS], out[PS];
	static unsigned char dev[PS] __attribute__((aligned(PS)));

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	memset(a, 'A', sizeof(a));
	memset(b, 'B', sizeof(b));
	ck_assert_int_eq(pwb_write(inode, a, PS, 2 * PS), PS);
	delay_writes(e.bdi, 3000, 1);
	ck_assert_int_eq(pwb_bdi_writeback(e.bdi, PWB_WB_ALL, 0), 0);
	wait_in_flight(inode, 2);
	/* Page 2 is being written for 3 s: a NOWAIT write does not wait. */
	nowait_again(inode, true, b, 10, 2 * PS + 5, 0);
	/* Page 1, dirty and idle, then page 2: only page 1 is written. */
	ck_assert_int_eq(pwb_write(inode, a, PS, PS), PS);
	ck_assert_int_eq(run_bounded(inode, true, b, 2 * PS, PS,
				     PWB_RW_NOWAIT, 1500),
			 PS);
	ck_assert(pwb_page_state(inode, 2) & PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pwb_read(inode, out, PS, 2 * PS), PS);
	ck_assert(!memcmp(out, a, PS));
	ck_assert_int_eq(pwb_read(inode, out, PS, PS), PS);
	ck_assert(!memcmp(out, b, PS));
	/* The plain call waits for the write in flight, and then NOWAIT
	 * goes through too. */
	ck_assert_int_eq(pwb_wait_writeback(inode, 0, 3 * PS), 0);
	ck_assert_int_eq(run_bounded(inode, true, b, 10, 2 * PS + 5,
				     PWB_RW_NOWAIT, 5000),
			 10);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(tu_read_device(e.img, 2 * PS, dev, PS), 0);
	ck_assert(!memcmp(dev, a, 5));
	ck_assert(!memcmp(dev + 5, b, 10));
	ck_assert(!memcmp(dev + 15, a, PS - 15));
	ck_assert_int_eq(pwb_inode_close(inode), 0);

	/* A partial write of a page below the size and not cached needs a
	 * device read first: -EAGAIN, no read made. */
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, 3 * PS), 0);
	{
		struct pwb_stats st0 = bdi_stats(e.bdi), st1;

		nowait_again(inode, true, b, 10, 5, 0);
		st1 = bdi_stats(e.bdi);
		ck_assert_uint_eq(st1.read_ios, st0.read_ios);
	}
	/* A whole page needs no read. */
	ck_assert_int_eq(run_bounded(inode, true, b, PS, 0, PWB_RW_NOWAIT,
				     5000),
			 PS);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * NOWAIT into a full cache: -EAGAIN at once, where the plain call waits
 * for room (with this clock standing, for ever). Nothing becomes clean:
 * every write fails.
 */
START_TEST(test_nowait_full_cache)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	static unsigned char w[PS];
	int i;

	tu_env_config(&e, 1, backend());
	e.cfg.cache_bytes = 16 * PS;
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_EIO;
	f.every = 1;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (i = 0; i < 16; i++)
		ck_assert_int_eq(pwb_write(inode, w, PS, (uint64_t)i * PS), PS);
	ck_assert_int_eq(run_bounded(inode, true, w, PS, 40 * PS,
				     PWB_RW_NOWAIT, 5000),
			 -EAGAIN);
	ck_assert_uint_le(pwb__aread(&e.bdi->pcache->nr_pages), 16);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_inode_discard(inode, 0, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* Whether a flusher tried (and failed) a write meanwhile. */
	tu_env_close_expect(&e, bdi_stats(e.bdi).io_errors ? -EIO : 0);
}
END_TEST

/*
 * NOWAIT and the dirty throttle (the kernel's BDP_ASYNC): writes stop
 * with -EAGAIN once a dirtier would sleep, and no dirtier slept.
 */
START_TEST(test_nowait_dirty_throttle)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct pwb_fault f;
	struct pwb_stats st;
	static unsigned char w[PS];
	ssize_t r = 0;
	int i;

	tu_env_config(&e, 1, backend());
	e.cfg.flags |= PWB_BDI_THROTTLE;
	e.cfg.dirty_background_bytes = 16 * PS;
	e.cfg.dirty_bytes = 32 * PS;
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	memset(&f, 0, sizeof(f));
	f.kind = PWB_FAULT_EIO;	/* dirty pages stay dirty */
	f.every = 1;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	for (i = 0; i < 256; i++) {
		r = run_bounded(inode, true, w, PS, (uint64_t)i * PS,
				PWB_RW_NOWAIT, 5000);
		if (r != PS)
			break;
	}
	ck_assert_int_eq(r, -EAGAIN);
	ck_assert_int_le(i, 64);
	ck_assert_int_eq(pwb_balance_dirty_nowait(e.bdi), -EAGAIN);
	st = bdi_stats(e.bdi);
	ck_assert_uint_eq(st.throttle_events, 0);
	ck_assert_uint_eq(st.throttle_ns, 0);
	f.kind = PWB_FAULT_NONE;
	ck_assert_int_eq(pwb_bdi_inject_fault(e.bdi, &f), 0);
	ck_assert_int_eq(pwb_inode_discard(inode, 0, UINT64_MAX), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close_expect(&e, bdi_stats(e.bdi).io_errors ? -EIO : 0);
}
END_TEST

/* Wait (real time, bounded) until nothing is dirty or in flight and
 * @want pages are cached; return the stats seen last. */
static struct pwb_stats wait_cache_pages(struct pwb_bdi *bdi, uint64_t want)
{
	uint64_t t0 = real_ms();
	struct pwb_stats st;

	for (;;) {
		st = bdi_stats(bdi);
		if ((!st.dirty_pages && !st.writeback_pages &&
		     st.cache_pages == want) ||
		    real_ms() - t0 > 20000)
			return st;
		sleep_ms(2);
	}
}

/*
 * DONTCACHE writes: the call returns without writing and without waiting
 * for a write (the device is frozen for writes: a writer that wrote or
 * waited would take FREEZE_MS), its thread sends nothing to the device;
 * the flushers write the pages without the test asking, and once written
 * the pages leave: the cache holds what it held before, the bytes are on
 * the device.
 */
START_TEST(test_dontcache_write)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[8 * PS], buf[8 * PS], other[PS];
	static unsigned char dev[8 * PS] __attribute__((aligned(PS)));
	struct pwb_stats st;
	struct call c;
	uint64_t seed = 7, before;
	size_t i;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	for (i = 0; i < sizeof(ref); i++)
		ref[i] = (unsigned char)tu_rand(&seed);
	inode = open_lib(&e, 1);
	/* Cached before: four clean pages and a dirty one, which stay. */
	memset(other, 'o', sizeof(other));
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pwb_write(inode, other, PS, (100 + i) * PS),
				 PS);
	ck_assert_int_eq(pwb_fsync(inode), 0);
	ck_assert_int_eq(pwb_write(inode, other, PS, 200 * PS), PS);
	before = bdi_stats(e.bdi).cache_pages;
	ck_assert_uint_eq(before, 5);

	delay_writes(e.bdi, FREEZE_MS, 0);
	c = run_call(inode, true, ref, sizeof(ref), 0, PWB_RW_DONTCACHE,
		     NOWAIT_BOUND_MS);
	ck_assert_int_eq(c.ret, (ssize_t)sizeof(ref));
	if (c.io_known) {
		ck_assert_msg(!c.io.syscw && !c.io.wchar && !c.io.write_bytes,
			      "the DONTCACHE writer wrote itself: %" PRIu64
			      " write calls, %" PRIu64 " bytes, %" PRIu64
			      " bytes to storage",
			      c.io.syscw, c.io.wchar, c.io.write_bytes);
	} else {
		printf("test_dontcache_write: no /proc/thread-self/io, the "
		       "writer's own I/O is not counted\n");
	}
	/* Kicked by the call: a flusher's write reaches the frozen device
	 * (the bdi has no timer and no background threshold here). */
	wait_hits(e.bdi, 1);
	/* Until their write ends the pages stay cached and readable (the
	 * one flusher is held on its first write). */
	ck_assert_int_eq(pwb_read(inode, buf, PS, 0), PS);
	ck_assert(!memcmp(buf, ref, PS));
	delay_writes(e.bdi, 0, 0);
	/* Then they leave (the test never asks for writeback). */
	st = wait_cache_pages(e.bdi, before);
	ck_assert_uint_eq(st.dirty_pages, 0);
	ck_assert_uint_eq(st.writeback_pages, 0);
	ck_assert_uint_eq(st.cache_pages, before);
	ck_assert_int_eq(tu_read_device(e.img, 0, dev, sizeof(dev)), 0);
	ck_assert(!memcmp(dev, ref, sizeof(ref)));
	/* Read back from the device, right. */
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(pwb_read2(inode, buf, sizeof(buf), 0,
				   PWB_RW_DONTCACHE),
			 (ssize_t)sizeof(buf));
	ck_assert(!memcmp(buf, ref, sizeof(ref)));
	ck_assert_uint_eq(bdi_stats(e.bdi).cache_pages, before);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * DONTCACHE reads cache nothing, readahead included, though the reader is
 * sequential and readahead is on (the same reader without the flag is
 * read ahead); pages cached already stay, and serve the read.
 */
START_TEST(test_dontcache_read)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char ref[64 * PS], buf[64 * PS];
	struct pwb_stats st0, st1, st2;
	uint64_t seed = 3;
	size_t i;

	tu_env_config(&e, 1, backend());
	e.cfg.readahead_bytes = 32 * PS;
	tu_env_open(&e, IMG_PAGES);
	for (i = 0; i < sizeof(ref); i++)
		ref[i] = (unsigned char)tu_rand(&seed);
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_write(inode, ref, sizeof(ref), 0),
			 (ssize_t)sizeof(ref));
	ck_assert_int_eq(pwb_inode_close(inode), 0);	/* written, dropped */
	inode = open_lib(&e, 1);
	ck_assert_int_eq(pwb_inode_set_size(inode, sizeof(ref)), 0);
	st0 = bdi_stats(e.bdi);
	for (i = 0; i < 32; i++)
		ck_assert_int_eq(pwb_read2(inode, buf + i * PS, PS, i * PS,
					   PWB_RW_DONTCACHE),
				 PS);
	ck_assert_int_eq(pwb_read2(inode, buf + 32 * PS, 32 * PS, 32 * PS,
				   PWB_RW_DONTCACHE),
			 32 * PS);
	ck_assert(!memcmp(buf, ref, sizeof(ref)));
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_gt(st1.read_ios, st0.read_ios);
	ck_assert_uint_eq(st1.cache_pages, st0.cache_pages);
	ck_assert_uint_eq(st1.readahead_pages, st0.readahead_pages);
	/* The same reader without the flag. */
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(pwb_read(inode, buf, PS, i * PS), PS);
	st2 = bdi_stats(e.bdi);
	ck_assert_uint_gt(st2.readahead_pages, st1.readahead_pages);
	ck_assert_uint_gt(st2.cache_pages, st1.cache_pages + 4);
	/* Pages cached stay, and serve. */
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(pwb_read2(inode, buf, 8 * PS, 0, PWB_RW_DONTCACHE),
			 8 * PS);
	ck_assert(!memcmp(buf, ref, 8 * PS));
	ck_assert_uint_eq(bdi_stats(e.bdi).cache_pages, st2.cache_pages);
	/* PWB_RW_SYNC alone is a plain read: it caches. */
	ck_assert_int_eq(pwb_read2(inode, buf, PS, 60 * PS, PWB_RW_SYNC), PS);
	ck_assert(!memcmp(buf, ref + 60 * PS, PS));
	ck_assert_uint_gt(bdi_stats(e.bdi).cache_pages, st2.cache_pages);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * A SYNC write is on the device when it returns, with a device flush,
 * both when it dirties a page (the slow path) and when it changes a page
 * dirty already (the hit path).
 */
START_TEST(test_sync_durable)
{
	struct tu_env e;
	struct pwb_inode *inode;
	static unsigned char a[2 * PS], b[PS];
	static unsigned char dev[2 * PS] __attribute__((aligned(PS)));
	struct pwb_stats st0, st1;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	st0 = bdi_stats(e.bdi);
	ck_assert_int_eq(pwb_write2(inode, a, 2 * PS, 0, PWB_RW_SYNC), 2 * PS);
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_gt(st1.device_flushes, st0.device_flushes);
	ck_assert_int_eq(tu_read_device(e.img, 0, dev, sizeof(dev)), 0);
	ck_assert(!memcmp(dev, a, sizeof(a)));
	/* Page 1 dirty again, then 10 bytes of it with SYNC. */
	ck_assert_int_eq(pwb_write(inode, b, 5, PS), 5);
	ck_assert(pwb_page_state(inode, 1) & PWB_PAGE_DIRTY);
	st0 = bdi_stats(e.bdi);
	ck_assert_int_eq(pwb_write2(inode, b, 10, PS + 100, PWB_RW_SYNC), 10);
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_gt(st1.device_flushes, st0.device_flushes);
	ck_assert(!(pwb_page_state(inode, 1) & PWB_PAGE_DIRTY));
	ck_assert_int_eq(tu_read_device(e.img, PS, dev, PS), 0);
	ck_assert(!memcmp(dev, b, 5));
	ck_assert(!memcmp(dev + 5, a, 95));
	ck_assert(!memcmp(dev + 100, b, 10));
	ck_assert(!memcmp(dev + 110, a, PS - 110));
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/*
 * SYNC writes: each returns with its bytes on the device, and writers on
 * several threads share device flushes (fewer flushes than calls).
 */
#define SYNC_THREADS 4
#define SYNC_ROUNDS 8

struct sync_arg {
	struct tu_env *e;
	struct pwb_inode *inode;
	pthread_barrier_t *bar;
	unsigned int id;
	long bad;
};

static void *sync_main(void *arg)
{
	struct sync_arg *a = arg;
	unsigned char w[PS], *dev;
	unsigned int r;

	if (posix_memalign((void **)&dev, PS, PS)) {
		a->bad = -1;
		return NULL;
	}

	for (r = 0; r < SYNC_ROUNDS; r++) {
		uint64_t off = ((uint64_t)a->id * SYNC_ROUNDS + r) * PS;

		memset(w, (int)(a->id * 16 + r + 1), PS);
		pthread_barrier_wait(a->bar);
		if (pwb_write2(a->inode, w, PS, off, PWB_RW_SYNC) != PS) {
			a->bad++;
			continue;
		}
		if (tu_read_device(a->e->img, off, dev, PS) ||
		    memcmp(dev, w, PS))
			a->bad++;
	}
	free(dev);
	return NULL;
}

START_TEST(test_sync_writers_share_flushes)
{
	struct tu_env e;
	struct pwb_inode *inode;
	struct sync_arg a[SYNC_THREADS];
	pthread_t t[SYNC_THREADS];
	pthread_barrier_t bar;
	struct pwb_stats st0, st1;
	unsigned int i;

	tu_env_config(&e, 1, backend());
	tu_env_open(&e, IMG_PAGES);
	inode = open_lib(&e, 1);
	/* Slow writes, so the callers of a round overlap. */
	delay_writes(e.bdi, 20, 0);
	ck_assert_int_eq(pthread_barrier_init(&bar, NULL, SYNC_THREADS), 0);
	st0 = bdi_stats(e.bdi);
	for (i = 0; i < SYNC_THREADS; i++) {
		a[i] = (struct sync_arg){ .e = &e, .inode = inode,
					  .bar = &bar, .id = i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, sync_main, &a[i]),
				 0);
	}
	for (i = 0; i < SYNC_THREADS; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(a[i].bad, 0);
	}
	st1 = bdi_stats(e.bdi);
	ck_assert_uint_gt(st1.device_flushes, st0.device_flushes);
	ck_assert_uint_lt(st1.device_flushes - st0.device_flushes,
			  SYNC_THREADS * SYNC_ROUNDS);
	pthread_barrier_destroy(&bar);
	delay_writes(e.bdi, 0, 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

static Suite *rwflags_suite(void)
{
	Suite *s = suite_create("rwflags");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_unknown_flags);
	tcase_add_test(tc, test_nowait_read_uncached);
	tcase_add_test(tc, test_nowait_read_frozen);
	tcase_add_test(tc, test_nowait_read_readahead);
	tcase_add_test(tc, test_nowait_marker_frozen);
	if (TU_URING_VARIANT)
		tcase_add_test(tc, test_nowait_poller_sees_pages);
	tcase_add_test(tc, test_nowait_write_frozen);
	tcase_add_test(tc, test_nowait_write_in_flight);
	tcase_add_test(tc, test_nowait_full_cache);
	tcase_add_test(tc, test_nowait_dirty_throttle);
	tcase_add_test(tc, test_dontcache_write);
	tcase_add_test(tc, test_dontcache_read);
	tcase_add_test(tc, test_sync_durable);
	tcase_add_test(tc, test_sync_writers_share_flushes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (TU_URING_VARIANT && tu_uring_unsupported())
		return 77;
	return tu_run_suite(rwflags_suite(), true);
}
