// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * crash-test.c - no acknowledged page is lost when the writer dies
 *
 * For each kill point the parent forks a child that opens a bdi on a small
 * device image, and from two threads dirties pages of many inodes with
 * versioned contents and calls pwb_fsync() / pwb_sync(). After each call
 * that returns 0 the child writes to a pipe what the call covered: for
 * every page dirtied before the call, (page id, version). The parent
 * SIGKILLs the child at a random moment, reads the device and checks that
 * every acknowledged page holds the acknowledged version or a newer one
 * written by the same child. A page is self-describing (magic, round,
 * page id, version, checksum, and a payload derived from all four), so a
 * torn, stale or garbage page counts as lost.
 *
 * The child never changes page memory that libpwb may be writing: each
 * new version goes into a fresh buffer, published (with its version) only
 * after it is complete and marked dirty, so any write is of one whole
 * version and a version published before a call is covered by it.
 *
 * Each round also picks, from its seed, the contexts (1 or 2), the
 * backend (psync, or io_uring where the machine has it), the expiry (so
 * that flushers write on their own and writes are in flight when the kill
 * lands) and an injected fault: none, short writes, delayed writes, or
 * EIO on 2% of writes (a call that fails acknowledges nothing; a later
 * call that succeeds must have written everything before it).
 *
 * A short write splits a page write into two syscalls; a kill between them
 * leaves the page torn between a newer, unacknowledged version and the
 * acknowledged one. That is the torn-page hazard of any in-place write
 * (the cure is RWF_ATOMIC or the application's doublewrite), not a page
 * libpwb failed to write: such pages are recognised exactly (see
 * page_torn_after), reported apart, and accepted only in rounds with
 * injected short writes. Every other mismatch is a lost page.
 *
 * Variants: an image file in $PWB_TEST_DIR (or /var/tmp), and the same on
 * a loop device when `losetup -f --show` works (else a skip message).
 * Exit 0 when no acknowledged page is lost, 1 when some are, 77 when the
 * test directory refuses O_DIRECT (or, with --loop-only, no loop device can
 * be attached), 99 on a harness error. make check runs the two variants as
 * two tests (crash-test-file.sh, crash-test-loop.sh) so that a missing loop
 * device is counted as a SKIP.
 *
 *   crash-test [--long] [--kills N] [--seed N] [--max-delay-us N]
 *              [--no-loop | --loop-only] [--verbose]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pwb.h"
#include "crash-util.h"

#define PS 4096u
#define NR_INODES 32
#define PAGES_PER_INODE 8
#define NR_PAGES (NR_INODES * PAGES_PER_INODE)	/* 1 MiB image */
#define NR_THREADS 2			/* each owns half the inodes */
#define MAX_UPDATES 6000		/* page versions per child (memory) */
#define MAGIC 0x70776263u		/* "pwbc" */

/* Exit codes of a child that stopped on its own (it should be killed). */
#define CHILD_SETUP_FAILED 3
#define CHILD_API_FAILED 4

/* ---------------------------------------------------------------------- */
/* Page contents                                                          */

struct page_hdr {
	uint32_t magic;
	uint32_t round;
	uint32_t page;		/* global page id: ino * PAGES_PER_INODE + i */
	uint32_t version;	/* >= 1 */
	uint64_t sum;		/* checksum of everything after the header */
};

static uint64_t payload_sum(const uint64_t *w, size_t n)
{
	uint64_t s = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++)
		s = ct_mix64(s ^ w[i]);
	return s;
}

static void fill_page(void *buf, uint32_t round, uint32_t page,
		      uint32_t version)
{
	struct page_hdr *h = buf;
	uint64_t *w = (uint64_t *)(h + 1);
	size_t i, n = (PS - sizeof(*h)) / 8;
	uint64_t x = ((uint64_t)round << 40) ^ ((uint64_t)page << 20) ^
		     version;

	for (i = 0; i < n; i++)
		w[i] = x = ct_mix64(x);
	h->magic = MAGIC;
	h->round = round;
	h->page = page;
	h->version = version;
	h->sum = payload_sum(w, n);
}

/* The version a device page holds for (@round, @page), or 0 if it holds
 * nothing valid from that round: wrong magic, round or page id, a bad
 * checksum, or a payload that is not exactly the one of its header. */
static uint32_t page_version(const void *buf, uint32_t round, uint32_t page)
{
	static __thread uint64_t expect[PS / 8] __attribute__((aligned(64)));
	const struct page_hdr *h = buf;
	size_t n = (PS - sizeof(*h)) / 8;

	if (h->magic != MAGIC || h->round != round || h->page != page ||
	    !h->version)
		return 0;
	if (payload_sum((const uint64_t *)(h + 1), n) != h->sum)
		return 0;
	fill_page(expect, round, page, h->version);
	if (memcmp(expect, buf, PS))
		return 0;
	return h->version;
}

/*
 * Is the device page a version torn by the kill: a prefix (whole 512-byte
 * sectors) of a newer version w > @acked, then the rest of some version u
 * with @acked <= u < w? Then the acknowledged write did land, and a later,
 * unacknowledged write of the page was cut by the kill between the two
 * syscalls of a short write. No library can prevent that without atomic
 * writes (RWF_ATOMIC) or the application's doublewrite; the test reports
 * such pages apart, and accepts them only where short writes are injected.
 */
static bool page_torn_after(const void *buf, uint32_t round, uint32_t page,
			    uint32_t acked)
{
	static __thread uint8_t a[PS] __attribute__((aligned(64)));
	const struct page_hdr *h = buf;
	const uint8_t *b = buf;
	uint32_t w = h->version, u;
	size_t m;

	if (h->magic != MAGIC || h->round != round || h->page != page ||
	    w <= acked)
		return false;
	fill_page(a, round, page, w);
	for (m = 0; m < PS && a[m] == b[m]; m++)
		;
	m -= m % 512;
	if (m == 0 || m == PS)
		return false;
	for (u = acked; u < w; u++) {
		fill_page(a, round, page, u);
		if (!memcmp(a + m, b + m, PS - m))
			return true;
	}
	return false;
}

/* ---------------------------------------------------------------------- */
/* Child                                                                  */

/* What an acknowledged call covered, as written to the pipe. Records are
 * at most PIPE_BUF bytes, so one write() is atomic; a record cut by the
 * kill is incomplete and ignored. */
struct ack_rec {
	uint32_t nr;		/* entries that follow */
	uint32_t kind;		/* 1 fsync, 2 sync, 3 config */
};
struct ack_ent {
	uint32_t page;
	uint32_t version;
};

struct child_page {
	void *_Atomic buf;		/* current version's memory */
	_Atomic uint32_t version;	/* published after mark_dirty */
};

static struct child {
	uint32_t round;
	int pipe_fd;
	struct pwb_bdi *bdi;
	struct pwb_inode *inodes[NR_INODES];
	struct child_page pages[NR_PAGES];
	_Atomic unsigned int updates;
	pthread_mutex_t pipe_lock;
} C;

static int child_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	uint64_t ino = pwb_inode_ino(inode);

	if (index >= PAGES_PER_INODE)
		return -ERANGE;
	*data = atomic_load(&C.pages[ino * PAGES_PER_INODE + index].buf);
	return *data ? 0 : -EIO;
}

static int child_map_page(struct pwb_inode *inode, uint64_t index,
			  uint64_t *dev_off)
{
	uint64_t ino = pwb_inode_ino(inode);

	if (index >= PAGES_PER_INODE)
		return -ERANGE;
	*dev_off = (ino * PAGES_PER_INODE + index) * PS;
	return 0;
}

static const struct pwb_inode_ops child_ops = {
	.get_page = child_get_page,
	.map_page = child_map_page,
};

static void child_send(uint32_t kind, const struct ack_ent *ent, uint32_t nr)
{
	char buf[sizeof(struct ack_rec) + NR_PAGES * sizeof(struct ack_ent)];
	struct ack_rec *r = (struct ack_rec *)buf;
	size_t len = sizeof(*r) + nr * sizeof(*ent);

	_Static_assert(sizeof(buf) <= 4096, "a record must fit PIPE_BUF");
	r->nr = nr;
	r->kind = kind;
	memcpy(r + 1, ent, nr * sizeof(*ent));
	pthread_mutex_lock(&C.pipe_lock);
	if (write(C.pipe_fd, buf, len) != (ssize_t)len)
		_exit(CHILD_API_FAILED);
	pthread_mutex_unlock(&C.pipe_lock);
}

/* Versions published so far of pages [first, first + n). */
static uint32_t snapshot(uint32_t first, uint32_t n, struct ack_ent *ent)
{
	uint32_t i, k = 0;

	for (i = first; i < first + n; i++) {
		uint32_t v = atomic_load(&C.pages[i].version);

		if (v) {
			ent[k].page = i;
			ent[k].version = v;
			k++;
		}
	}
	return k;
}

/* Write version+1 of @page into a fresh buffer, mark it dirty, publish. */
static int child_update(uint32_t page)
{
	struct child_page *p = &C.pages[page];
	uint32_t v = atomic_load(&p->version) + 1;
	void *buf;
	int rc;

	if (posix_memalign(&buf, PS, PS))
		return -ENOMEM;
	fill_page(buf, C.round, page, v);
	/* The old buffer may still be under write: it is never freed (the
	 * child is short-lived and bounded by MAX_UPDATES). */
	atomic_store(&p->buf, buf);
	rc = pwb_mark_dirty(C.inodes[page / PAGES_PER_INODE],
			    (uint64_t)(page % PAGES_PER_INODE) * PS, PS);
	if (rc)
		return rc;
	atomic_store(&p->version, v);
	return 0;
}

struct worker {
	pthread_t thread;
	unsigned int idx;
	uint64_t seed;
};

static uint64_t rnd(uint64_t *s)
{
	*s = ct_mix64(*s);
	return *s;
}

static void *child_worker(void *arg)
{
	struct worker *w = arg;
	struct ack_ent ent[NR_PAGES];
	unsigned int per = NR_INODES / NR_THREADS, step = 0;

	for (;;) {
		uint32_t ino = w->idx * per + (uint32_t)(rnd(&w->seed) % per);
		unsigned int n = 1 + (unsigned int)(rnd(&w->seed) % 3), i;
		int rc;

		/* Budget used up: stop, rather than spin on calls that
		 * cover nothing new, and wait for the kill. */
		if (atomic_fetch_add(&C.updates, n) + n > MAX_UPDATES)
			for (;;)
				pause();
		for (i = 0; i < n; i++) {
			uint32_t pg = ino * PAGES_PER_INODE +
				      (uint32_t)(rnd(&w->seed) %
						 PAGES_PER_INODE);

			rc = child_update(pg);
			if (rc) {
				fprintf(stderr, "child: mark_dirty: %s\n",
					pwb_strerror(rc));
				_exit(CHILD_API_FAILED);
			}
		}
		step++;
		if (w->idx == 0 && step % 16 == 0) {
			uint32_t k = snapshot(0, NR_PAGES, ent);

			/* 0 or a write error: an error acknowledges nothing. */
			if (!pwb_sync(C.bdi))
				child_send(2, ent, k);
		} else if (step % 3 == 0) {
			uint32_t k = snapshot(ino * PAGES_PER_INODE,
					      PAGES_PER_INODE, ent);

			if (!pwb_fsync(C.inodes[ino]))
				child_send(1, ent, k);
		}
	}
	return NULL;
}

static const char *const fault_specs[] = {
	NULL, "short:every=3", "delay:every=4,delay_ms=1",
	"eio:ppm=20000,seed=",	/* the round number is appended */
};
#define NR_FAULTS (sizeof(fault_specs) / sizeof(fault_specs[0]))
#define SHORT_FAULT 1u		/* index of the short-write rule */

static void child_main(const char *dev, uint32_t round, uint64_t seed,
		       int fd)
{
	struct worker w[NR_THREADS];
	struct pwb_bdi_config cfg;
	struct ack_ent cfg_ent;
	const char *spec;
	unsigned int i;
	int rc;

	C.round = round;
	C.pipe_fd = fd;
	pthread_mutex_init(&C.pipe_lock, NULL);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1 + (unsigned int)(ct_mix64(seed) % 2);
	cfg.dirty_expire_ms = (unsigned int)(ct_mix64(seed + 1) % 3) * 10;
	cfg.dirty_writeback_ms = 5;
	cfg.dirty_background_bytes = (ct_mix64(seed + 2) % 2) ? 64 * PS : 0;
	cfg.max_io_bytes = 16 * PS;
	cfg.backend = (ct_mix64(seed + 3) % 2) ? "io_uring" : NULL;
	rc = pwb_bdi_open(dev, &cfg, &C.bdi);
	if (rc == -EOPNOTSUPP && cfg.backend) {
		cfg.backend = NULL;	/* no io_uring here: psync */
		rc = pwb_bdi_open(dev, &cfg, &C.bdi);
	}
	if (rc) {
		fprintf(stderr, "child: pwb_bdi_open(%s): %s\n", dev,
			pwb_errmsg());
		_exit(CHILD_SETUP_FAILED);
	}
	spec = fault_specs[ct_mix64(seed + 4) % NR_FAULTS];
	if (spec) {
		struct pwb_fault f;
		char s[64];

		if (spec[strlen(spec) - 1] == '=')
			snprintf(s, sizeof(s), "%s%u", spec, round);
		else
			snprintf(s, sizeof(s), "%s", spec);
		if (pwb_fault_parse(s, &f) ||
		    pwb_bdi_inject_fault(C.bdi, &f)) {
			fprintf(stderr, "child: fault %s: %s\n", s,
				pwb_errmsg());
			_exit(CHILD_SETUP_FAILED);
		}
	}
	/* Tell the parent what this round runs (kind 3, no pages). */
	cfg_ent.page = cfg.backend ? 1 : 0;
	cfg_ent.version = (uint32_t)(ct_mix64(seed + 4) % NR_FAULTS);
	child_send(3, &cfg_ent, 1);

	for (i = 0; i < NR_INODES; i++) {
		rc = pwb_inode_open(C.bdi, i, &child_ops, NULL, &C.inodes[i]);
		if (rc) {
			fprintf(stderr, "child: pwb_inode_open: %s\n",
				pwb_errmsg());
			_exit(CHILD_SETUP_FAILED);
		}
	}
	for (i = 0; i < NR_THREADS; i++) {
		w[i].idx = i;
		w[i].seed = ct_mix64(seed ^ (0x1000 + i));
		if (pthread_create(&w[i].thread, NULL, child_worker, &w[i]))
			_exit(CHILD_SETUP_FAILED);
	}
	/* Killed while the workers run; nothing returns. */
	for (;;)
		pause();
}

/* ---------------------------------------------------------------------- */
/* Parent                                                                 */

struct opts {
	unsigned int kills;
	uint64_t seed;
	unsigned int max_delay_us;
	bool loop;
	bool loop_only;
	bool verbose;
};

struct totals {
	unsigned int kill_points;
	uint64_t acked_calls;
	uint64_t acked_pages;	/* per kill point, pages with an ack */
	uint64_t lost_pages;
	uint64_t newer_pages;	/* held a version newer than acknowledged */
	uint64_t torn_pages;	/* see page_torn_after() */
	unsigned int uring_rounds;
	unsigned int fault_rounds[NR_FAULTS];
	unsigned int early_kills;	/* killed before anything was acked */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read all of @fd (until EOF) into a growing buffer. */
static char *slurp(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);

	for (;;) {
		ssize_t r;

		if (!buf)
			return NULL;
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

/* One kill point. Returns 0, or -1 on a harness error. */
static int one_round(const char *dev, uint32_t round, uint64_t seed,
		     const struct opts *o, struct totals *t, void *devbuf)
{
	static uint32_t acked[NR_PAGES];
	struct ack_ent conf = { 0, 0 };
	int pfd[2], status, fd;
	size_t len, off;
	unsigned int delay, i, with_ack = 0;
	char *rec;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return -1;
	/* Room for everything a child says before it is killed. */
	fcntl(pfd[1], F_SETPIPE_SZ, 1 << 20);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(pfd[0]);
		child_main(dev, round, seed, pfd[1]);
		_exit(CHILD_SETUP_FAILED);
	}
	close(pfd[1]);
	/* Not before the child can have started (about 2 ms): a kill
	 * before the first call covers nothing. */
	delay = o->max_delay_us / 16 +
		(unsigned int)(ct_mix64(seed ^ 0xdead) %
			       (o->max_delay_us - o->max_delay_us / 16 + 1));
	ct_sleep_us(delay);
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	rec = slurp(pfd[0], &len);
	close(pfd[0]);
	if (!rec)
		return -1;
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
		fprintf(stderr, "round %u: the child stopped by itself "
			"(status 0x%x) before the kill\n", round, status);
		free(rec);
		return -1;
	}

	memset(acked, 0, sizeof(acked));
	for (off = 0; off + sizeof(struct ack_rec) <= len;) {
		struct ack_rec r;
		struct ack_ent e;

		memcpy(&r, rec + off, sizeof(r));
		if (off + sizeof(r) + r.nr * sizeof(e) > len)
			break;	/* cut by the kill */
		off += sizeof(r);
		if (r.kind == 3) {
			memcpy(&e, rec + off, sizeof(e));
			conf = e;
			t->uring_rounds += e.page;
			if (e.version < NR_FAULTS)
				t->fault_rounds[e.version]++;
		} else {
			t->acked_calls++;
		}
		for (i = 0; r.kind != 3 && i < r.nr; i++) {
			memcpy(&e, rec + off + i * sizeof(e), sizeof(e));
			if (e.page < NR_PAGES && e.version > acked[e.page])
				acked[e.page] = e.version;
		}
		off += r.nr * sizeof(e);
	}
	free(rec);

	fd = open(dev, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 || pread(fd, devbuf, (size_t)NR_PAGES * PS, 0) !=
			      (ssize_t)NR_PAGES * PS) {
		fprintf(stderr, "cannot read %s back: %s\n", dev,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	for (i = 0; i < NR_PAGES; i++) {
		uint32_t v;

		if (!acked[i])
			continue;
		with_ack++;
		v = page_version((char *)devbuf + (size_t)i * PS, round, i);
		if (v < acked[i] && conf.version == SHORT_FAULT &&
		    page_torn_after((char *)devbuf + (size_t)i * PS, round, i,
				    acked[i])) {
			t->torn_pages++;
		} else if (v < acked[i]) {
			const struct page_hdr *h = (const struct page_hdr *)
				((char *)devbuf + (size_t)i * PS);

			if (t->lost_pages < 20)
				fprintf(stderr, "LOST: round %u (%s, fault "
					"%s, seed 0x%" PRIx64 ") page %u "
					"(inode %u page %u): acknowledged "
					"version %u, device holds %s %u "
					"(header: magic 0x%x round %u page %u "
					"version %u)\n",
					round, conf.page ? "io_uring" : "psync",
					fault_specs[conf.version % NR_FAULTS] ?
					fault_specs[conf.version % NR_FAULTS] :
					"none", seed, i, i / PAGES_PER_INODE,
					i % PAGES_PER_INODE, acked[i],
					v ? "version" : "no valid page", v,
					h->magic, h->round, h->page,
					h->version);
			t->lost_pages++;
		} else if (v > acked[i]) {
			t->newer_pages++;
		}
	}
	if (!with_ack)
		t->early_kills++;
	t->acked_pages += with_ack;
	t->kill_points++;
	if (o->verbose)
		printf("round %u: killed after %u us, %u pages acknowledged\n",
		       round, delay, with_ack);
	return 0;
}

/* Run @o->kills kill points on @dev; print the variant's line. */
static int run_variant(const char *name, const char *dev, const struct opts *o,
		       struct totals *all, void *devbuf)
{
	struct totals t = { 0 };
	double t0 = now_s();
	unsigned int k;

	if (ct_zero_file(dev, (size_t)NR_PAGES * PS, devbuf)) {
		fprintf(stderr, "%s: cannot initialise %s\n", name, dev);
		return -1;
	}
	for (k = 0; k < o->kills; k++) {
		uint64_t seed = ct_mix64(o->seed ^ ((uint64_t)k << 1) ^
				      (uint64_t)(uintptr_t)name[0]);

		if (one_round(dev, k + 1, seed, o, &t, devbuf))
			return -1;
	}
	printf("crash-test [%s]: %u kill points, %" PRIu64 " acknowledged "
	       "calls, %" PRIu64 " acknowledged pages (%" PRIu64 " newer on "
	       "the device, %" PRIu64 " torn by a newer write cut in two by "
	       "an injected short write and the kill), %" PRIu64 " lost "
	       "pages; %u io_uring rounds, faults none/short/delay/eio "
	       "%u/%u/%u/%u, %u kills before the first ack; %.1f s\n",
	       name, t.kill_points, t.acked_calls, t.acked_pages, t.newer_pages,
	       t.torn_pages, t.lost_pages, t.uring_rounds, t.fault_rounds[0],
	       t.fault_rounds[1], t.fault_rounds[2], t.fault_rounds[3],
	       t.early_kills, now_s() - t0);
	all->kill_points += t.kill_points;
	all->acked_calls += t.acked_calls;
	all->acked_pages += t.acked_pages;
	all->lost_pages += t.lost_pages;
	all->torn_pages += t.torn_pages;
	return 0;
}

/* Attach @img to a free loop device; return its path (malloc'd) or NULL
 * with *why set. */
static char *loop_attach(const char *img, char *why, size_t whylen)
{
	char cmd[4200], line[256];
	FILE *p;
	int st;

	if (geteuid() != 0) {
		snprintf(why, whylen, "not root");
		return NULL;
	}
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>&1", img);
	p = popen(cmd, "r");
	if (!p) {
		snprintf(why, whylen, "popen: %s", strerror(errno));
		return NULL;
	}
	if (!fgets(line, sizeof(line), p))
		line[0] = '\0';
	st = pclose(p);
	line[strcspn(line, "\n")] = '\0';
	if (st != 0 || strncmp(line, "/dev/", 5)) {
		snprintf(why, whylen, "losetup -f --show failed: %s",
			 line[0] ? line : "no output");
		return NULL;
	}
	return strdup(line);
}

static void loop_detach(const char *dev)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "losetup -d '%s'", dev);
	if (system(cmd))
		fprintf(stderr, "warning: %s failed\n", cmd);
}

static char *make_image(const char *dir)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/pwb-crash-XXXXXX.img", dir) < 0)
		return NULL;
	fd = mkstemps(path, 4);
	if (fd < 0 || ftruncate(fd, (off_t)NR_PAGES * PS)) {
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
		free(path);
		return NULL;
	}
	close(fd);
	return path;
}

static void usage(void)
{
	fprintf(stderr, "usage: crash-test [--long] [--kills N] [--seed N] "
		"[--max-delay-us N] [--no-loop | --loop-only] [--verbose]\n");
	exit(99);
}

int main(int argc, char **argv)
{
	struct opts o = {
		.kills = 200, .seed = 20250601, .max_delay_us = 30000,
		.loop = true,
	};
	struct totals all = { 0 };
	const char *dir = getenv("PWB_TEST_DIR");
	char *img, *loopdev, why[300];
	void *devbuf;
	int i, fd, ret = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--long")) {
			o.kills = 5000;
			o.max_delay_us = 200000;
		} else if (!strcmp(argv[i], "--kills") && i + 1 < argc) {
			o.kills = (unsigned int)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			o.seed = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--max-delay-us") && i + 1 < argc) {
			o.max_delay_us =
				(unsigned int)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--no-loop")) {
			o.loop = false;
		} else if (!strcmp(argv[i], "--loop-only")) {
			o.loop_only = true;
		} else if (!strcmp(argv[i], "--verbose")) {
			o.verbose = true;
		} else {
			usage();
		}
	}
	if (!dir || !*dir)
		dir = "/var/tmp";
	if (posix_memalign(&devbuf, PS, (size_t)NR_PAGES * PS))
		return 99;
	img = make_image(dir);
	if (!img) {
		fprintf(stderr, "cannot create an image in %s: %s\n", dir,
			strerror(errno));
		return 99;
	}
	fd = open(img, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		printf("SKIP: %s refuses O_DIRECT (tmpfs before Linux 6.6?); "
		       "set PWB_TEST_DIR "
		       "to a directory on a real file system\n", dir);
		unlink(img);
		return 77;
	}
	if (fd >= 0)
		close(fd);
	printf("crash-test: seed %" PRIu64 ", %u kill points per variant, "
	       "kill within %u us, %u inodes x %u pages\n",
	       o.seed, o.kills, o.max_delay_us, NR_INODES, PAGES_PER_INODE);

	if (o.loop_only && !o.loop)
		usage();
	if (!o.loop_only && run_variant("file", img, &o, &all, devbuf))
		ret = 99;

	loopdev = NULL;
	if (!ret && o.loop) {
		loopdev = loop_attach(img, why, sizeof(why));
		if (!loopdev && o.loop_only) {
			printf("crash-test [loop]: SKIP: %s\n", why);
			unlink(img);
			return 77;
		}
		if (!loopdev)
			printf("crash-test [loop]: not run: %s\n", why);
	}
	if (loopdev) {
		if (run_variant("loop", loopdev, &o, &all, devbuf))
			ret = 99;
		loop_detach(loopdev);
		free(loopdev);
	}
	unlink(img);
	free(img);
	free(devbuf);

	if (!ret && all.lost_pages)
		ret = 1;
	printf("crash-test: %u kill points, %" PRIu64 " acknowledged calls, "
	       "%" PRIu64 " acknowledged pages, %" PRIu64 " torn by a cut "
	       "short write, %" PRIu64 " lost pages: %s\n",
	       all.kill_points, all.acked_calls, all.acked_pages,
	       all.torn_pages, all.lost_pages,
	       ret == 0 ? "PASS" : ret == 1 ? "FAIL" : "ERROR");
	return ret;
}
