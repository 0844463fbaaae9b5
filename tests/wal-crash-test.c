// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wal-crash-test.c - the write-ahead rule survives SIGKILL
 *
 * For each kill point the parent forks a child that plays a small
 * database: two threads change data pages in place, each change getting
 * the next log sequence number (LSN), which the page carries in its first
 * 8 bytes, and dirty them with pwb_mark_dirty_lsn() while still holding
 * the page's latch (get_page answers -EAGAIN while a page is latched). The
 * log is a plain O_DIRECT file whose block 0 holds the highest LSN
 * committed: a group commit writes it and fdatasync()s, then reports it
 * with pwb_bdi_log_durable(). Every few dozen changes a thread commits;
 * now and then it calls pwb_fsync() and, when that returns 0, tells the
 * parent through a pipe the LSN each page held when the call began.
 * In busy rounds writeback runs all the time (tiny expiry, background
 * threshold and periodic interval), so pages whose log records are not
 * yet durable are often dirty when a flusher looks at them.
 *
 * Rounds alternate between a bdi with a log_force callback (it commits
 * the log itself, as a page cleaner does) and one without (held pages
 * wait for the next commit), and between busy writeback and none at all
 * but pwb_fsync (where a page an fsync acknowledged without writing it
 * would still be missing at the kill). The parent SIGKILLs the child at a random
 * moment, then reads the log and the device and checks:
 *   - no data page on the device has an LSN above the log's LSN (the
 *     write-ahead rule);
 *   - every page of an acknowledged pwb_fsync() holds the acknowledged
 *     LSN or a newer one (nothing acknowledged is lost);
 *   - every page is zero or a whole, valid page of this round.
 *
 * Exit 0 when all hold, 1 when not, 77 when the test directory refuses
 * O_DIRECT, 99 on a harness error.
 *
 *   wal-crash-test [--kills N] [--seed N] [--max-delay-us N] [--verbose]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pwb.h"
#include "crash-util.h"

#define PS 4096u
#define NR_PAGES 128u			/* 512 KiB data image, one inode */
#define NR_THREADS 2
#define COMMIT_EVERY 64			/* changes between group commits */
#define FSYNC_EVERY 24			/* changes between fsyncs: more often,
					 * so that an fsync meets LSNs not yet
					 * committed */
#define MAGIC 0x7077626cu		/* "pwbl" */

/* A data page: LSN first (the page LSN of a database), then what makes
 * it self-describing. */
struct page_hdr {
	uint64_t lsn;
	uint32_t magic;
	uint32_t round;
	uint32_t page;
	uint32_t pad;
	uint64_t sum;
};

/* Block 0 of the log file. */
struct log_hdr {
	uint64_t lsn;		/* committed (durable once fdatasync returned) */
	uint32_t magic;
	uint32_t round;
	uint64_t check;
};

/* What the child sends after an acknowledged fsync. */
struct ack {
	uint32_t page;
	uint32_t pad;
	uint64_t lsn;
};

static uint64_t page_sum(uint32_t round, uint32_t page, uint64_t lsn)
{
	return ct_mix64(ct_mix64(((uint64_t)round << 32) | page) ^ lsn);
}

static void fill_page(void *buf, uint32_t round, uint32_t page, uint64_t lsn)
{
	struct page_hdr *h = buf;
	uint64_t *w = (uint64_t *)(h + 1), x = page_sum(round, page, lsn);
	size_t i;

	for (i = 0; i < (PS - sizeof(*h)) / 8; i++)
		w[i] = x = ct_mix64(x);
	h->magic = MAGIC;
	h->round = round;
	h->page = page;
	h->pad = 0;
	h->sum = page_sum(round, page, lsn);
	h->lsn = lsn;
}

/* The LSN of a valid page of (@round, @page); 0 for a zero page; -1 for
 * anything else (torn, stale, garbage). */
static int64_t page_lsn(const void *buf, uint32_t round, uint32_t page)
{
	static uint64_t expect[PS / 8] __attribute__((aligned(64)));
	const struct page_hdr *h = buf;
	const uint64_t *w = buf;
	size_t i;

	if (h->magic != MAGIC) {
		for (i = 0; i < PS / 8; i++)
			if (w[i])
				return -1;
		return 0;
	}
	if (h->round != round || h->page != page || !h->lsn)
		return -1;
	fill_page(expect, round, page, h->lsn);
	return memcmp(expect, buf, PS) ? -1 : (int64_t)h->lsn;
}

/* ---------------------------------------------------------------------- */
/* The child                                                              */

struct cpage {
	pthread_mutex_t latch;
	bool busy;		/* latch: handed to get_page, not yet ended */
	uint64_t lsn;		/* latch: LSN of the memory's contents */
	void *mem;
};

static struct cpage pages[NR_PAGES];
static uint32_t c_round;
static int c_log_fd, c_pipe;
static struct pwb_bdi *c_bdi;
static struct pwb_inode *c_inode;
static atomic_uint_fast64_t c_next_lsn = 1;
static pthread_mutex_t c_log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t c_log_lsn;	/* c_log_lock: committed to the log */
static void *c_log_buf;

static void child_die(int code)
{
	_exit(code);
}

/* Group commit: the log holds every LSN handed out so far. */
static int log_commit(void)
{
	uint64_t lsn;
	struct log_hdr *h = c_log_buf;

	pthread_mutex_lock(&c_log_lock);
	lsn = atomic_load(&c_next_lsn) - 1;
	if (lsn > c_log_lsn) {
		memset(c_log_buf, 0, PS);
		h->lsn = lsn;
		h->magic = MAGIC;
		h->round = c_round;
		h->check = ct_mix64(lsn ^ c_round);
		if (pwrite(c_log_fd, c_log_buf, PS, 0) != PS ||
		    fdatasync(c_log_fd))
			child_die(4);
		c_log_lsn = lsn;
	}
	pthread_mutex_unlock(&c_log_lock);
	return pwb_bdi_log_durable(c_bdi, lsn);
}

static int c_log_force(uint64_t lsn, void *arg)
{
	(void)arg;
	(void)lsn;
	return log_commit();
}

static int c_get_page(struct pwb_inode *inode, uint64_t index,
		      const void **data)
{
	struct cpage *p = &pages[index];

	(void)inode;
	if (pthread_mutex_trylock(&p->latch))
		return -EAGAIN;		/* latched: not now */
	p->busy = true;
	*data = p->mem;
	pthread_mutex_unlock(&p->latch);
	return 0;
}

static int c_map_page(struct pwb_inode *inode, uint64_t index,
		      uint64_t *dev_off)
{
	(void)inode;
	*dev_off = index * PS;
	return 0;
}

static void c_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			int err)
{
	uint64_t i;

	(void)inode;
	(void)err;
	for (i = index; i < index + nr; i++) {
		pthread_mutex_lock(&pages[i].latch);
		pages[i].busy = false;
		pthread_mutex_unlock(&pages[i].latch);
	}
}

static void change_page(uint32_t pg)
{
	struct cpage *p = &pages[pg];
	uint64_t lsn;

	for (;;) {
		pthread_mutex_lock(&p->latch);
		if (!p->busy)
			break;
		/* Being written: a stable page may not change. */
		pthread_mutex_unlock(&p->latch);
		sched_yield();
	}
	/*
	 * A flusher may have taken the page (checking the LSN it had then)
	 * without having asked get_page for it yet: latched, the page makes
	 * get_page say "not now", which ends that write; only then may it
	 * change (pwb_mark_dirty_lsn(), "Call it ..."). Without this wait a
	 * change landing in that window went out with an LSN the log did not
	 * hold yet (1 page in 200 kills under TSan).
	 */
	if (pwb_wait_writeback(c_inode, (uint64_t)pg * PS, PS))
		child_die(4);
	lsn = atomic_fetch_add(&c_next_lsn, 1);
	fill_page(p->mem, c_round, pg, lsn);
	p->lsn = lsn;
	/* Before the latch goes: get_page cannot hand the new contents out
	 * before libpwb knows their LSN. */
	if (pwb_mark_dirty_lsn(c_inode, (uint64_t)pg * PS, PS, lsn))
		child_die(4);
	pthread_mutex_unlock(&p->latch);
}

static void fsync_and_ack(void)
{
	static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;
	struct ack acks[NR_PAGES];
	uint32_t i, n = 0;

	for (i = 0; i < NR_PAGES; i++) {
		pthread_mutex_lock(&pages[i].latch);
		if (pages[i].lsn)
			acks[n++] = (struct ack){ .page = i,
						  .lsn = pages[i].lsn };
		pthread_mutex_unlock(&pages[i].latch);
	}
	if (pwb_fsync(c_inode))
		return;		/* acknowledges nothing */
	pthread_mutex_lock(&send_lock);
	if (write(c_pipe, acks, n * sizeof(*acks)) !=
	    (ssize_t)(n * sizeof(*acks)))
		child_die(4);
	pthread_mutex_unlock(&send_lock);
}

static void *child_worker(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg, k;

	for (k = 1;; k++) {
		s = ct_mix64(s);
		change_page((uint32_t)(s % NR_PAGES));
		if (k % COMMIT_EVERY == 0 && log_commit())
			child_die(4);
		if (k % FSYNC_EVERY == 0)
			fsync_and_ack();
	}
	return NULL;
}

static void child_main(const char *dev, const char *log, uint32_t round,
		       uint64_t seed, bool with_force, bool quiet)
{
	struct pwb_inode_ops ops = {
		.get_page = c_get_page,
		.map_page = c_map_page,
		.end_write = c_end_write,
	};
	struct pwb_bdi_config cfg;
	pthread_t th[NR_THREADS];
	uint32_t i;

	c_round = round;
	for (i = 0; i < NR_PAGES; i++) {
		pthread_mutex_init(&pages[i].latch, NULL);
		if (posix_memalign(&pages[i].mem, PS, PS))
			child_die(3);
		memset(pages[i].mem, 0, PS);
	}
	if (posix_memalign(&c_log_buf, PS, PS))
		child_die(3);
	c_log_fd = open(log, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (c_log_fd < 0)
		child_die(3);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1 + (unsigned int)(seed % 2);
	cfg.backend = "psync";
	cfg.dirty_bytes = 0;
	if (quiet) {
		/* Only pwb_fsync writes: an acknowledged page missing at
		 * the kill is not hidden by a background write after it. */
		cfg.dirty_writeback_ms = 0;
		cfg.dirty_background_bytes = 0;
	} else {
		cfg.dirty_expire_ms = 1;
		cfg.dirty_writeback_ms = 2;
		cfg.dirty_background_bytes = 16 * PS;
	}
	if (with_force)
		cfg.log_force = c_log_force;
	if (pwb_bdi_open(dev, &cfg, &c_bdi) ||
	    pwb_inode_open(c_bdi, 1, &ops, NULL, &c_inode))
		child_die(3);
	/* Ready: the parent starts its timer. Said before the workers
	 * start, whose acknowledgements share the pipe: a worker's record
	 * written first would shift every record after it by one byte. */
	if (write(c_pipe, "R", 1) != 1)
		child_die(3);
	for (i = 0; i < NR_THREADS; i++)
		if (pthread_create(&th[i], NULL, child_worker,
				   (void *)(uintptr_t)ct_mix64(seed + i + 1)))
			child_die(3);
	for (;;)
		pause();
}

/* ---------------------------------------------------------------------- */
/* The parent                                                             */

struct totals {
	unsigned int kills, force_rounds;
	uint64_t acked, pages_seen, violations, lost, garbage;
	uint64_t max_log_lsn;
};

static int one_round(const char *dev, const char *log, uint32_t round,
		     uint64_t seed, unsigned int max_delay_us, bool verbose,
		     struct totals *t, void *buf)
{
	static uint64_t acked[NR_PAGES];
	bool with_force = round % 2, quiet = (round / 2) % 2;
	struct log_hdr *lh = buf;
	uint64_t log_lsn = 0;
	struct ack a;
	int pfd[2], status;
	pid_t pid;
	char c;
	uint32_t i;

	if (ct_zero_file(dev, (size_t)NR_PAGES * PS, buf) ||
	    ct_zero_file(log, PS, buf) || pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(pfd[0]);
		c_pipe = pfd[1];
		child_main(dev, log, round, seed, with_force, quiet);
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1) {
		fprintf(stderr, "round %u: the child died before it was "
			"ready\n", round);
		close(pfd[0]);
		waitpid(pid, &status, 0);
		return -1;
	}
	ct_sleep_us((unsigned int)(ct_mix64(seed) % max_delay_us) + 1);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	if (!WIFSIGNALED(status)) {
		fprintf(stderr, "round %u: the child exited with %d before "
			"the kill\n", round, WEXITSTATUS(status));
		close(pfd[0]);
		return -1;
	}
	/*
	 * A pipe hands out what has arrived, not whole records: a read may
	 * end inside one (the child writes more than PIPE_BUF at a time, and
	 * a kill may cut a write short). Read to the end first, then take
	 * the whole records; a cut-off last one acknowledges nothing.
	 */
	memset(acked, 0, sizeof(acked));
	for (;;) {
		size_t got = 0;
		ssize_t n;

		while (got < sizeof(a)) {
			n = read(pfd[0], (char *)&a + got, sizeof(a) - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (got < sizeof(a))
			break;
		if (a.page < NR_PAGES && a.lsn > acked[a.page])
			acked[a.page] = a.lsn;
	}
	close(pfd[0]);

	if (ct_read_file(log, PS, buf))
		return -1;
	if (lh->magic == MAGIC && lh->round == round &&
	    lh->check == ct_mix64(lh->lsn ^ round))
		log_lsn = lh->lsn;
	if (ct_read_file(dev, (size_t)NR_PAGES * PS, buf))
		return -1;
	for (i = 0; i < NR_PAGES; i++) {
		int64_t lsn = page_lsn((char *)buf + (size_t)i * PS, round, i);

		if (lsn < 0) {
			t->garbage++;
			if (verbose)
				printf("round %u: page %u is not a whole "
				       "page of this round\n", round, i);
			continue;
		}
		if (lsn)
			t->pages_seen++;
		if ((uint64_t)lsn > log_lsn) {
			t->violations++;
			if (verbose)
				printf("round %u: page %u has LSN %" PRId64
				       " above the log's %" PRIu64 "\n",
				       round, i, lsn, log_lsn);
		}
		if (acked[i]) {
			t->acked++;
			if ((uint64_t)lsn < acked[i]) {
				t->lost++;
				if (verbose)
					printf("round %u: page %u has LSN "
					       "%" PRId64 ", fsync acked %"
					       PRIu64 "\n",
					       round, i, lsn, acked[i]);
			}
		}
	}
	t->kills++;
	t->force_rounds += with_force;
	if (log_lsn > t->max_log_lsn)
		t->max_log_lsn = log_lsn;
	return 0;
}

static char *make_file(const char *dir, const char *what, size_t len)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/pwb-wal-%s-XXXXXX", dir, what) < 0)
		return NULL;
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)len)) {
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
	fprintf(stderr, "usage: wal-crash-test [--kills N] [--seed N] "
		"[--max-delay-us N] [--verbose]\n");
	exit(99);
}

int main(int argc, char **argv)
{
	unsigned int kills = 200, max_delay_us = 60000, k;
	uint64_t seed = 20261203;
	bool verbose = false;
	const char *dir = getenv("PWB_TEST_DIR");
	struct totals t = { 0 };
	char *dev, *log;
	void *buf;
	int fd, i, ret = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			kills = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--max-delay-us") && i + 1 < argc)
			max_delay_us = (unsigned int)strtoul(argv[++i], NULL,
							     0);
		else if (!strcmp(argv[i], "--verbose"))
			verbose = true;
		else
			usage();
	}
	if (!kills || !max_delay_us)
		usage();
	if (!dir || !*dir)
		dir = "/var/tmp";
	dev = make_file(dir, "data", (size_t)NR_PAGES * PS);
	log = make_file(dir, "log", PS);
	if (!dev || !log || posix_memalign(&buf, PS, (size_t)NR_PAGES * PS)) {
		fprintf(stderr, "wal-crash-test: cannot create files in %s\n",
			dir);
		return 99;
	}
	fd = open(dev, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {
		printf("wal-crash-test: %s refuses O_DIRECT: skipped\n", dir);
		unlink(dev);
		unlink(log);
		return 77;
	}
	if (fd >= 0)
		close(fd);
	for (k = 0; k < kills; k++) {
		if (one_round(dev, log, k + 1, ct_mix64(seed ^ k), max_delay_us,
			      verbose, &t, buf)) {
			fprintf(stderr, "wal-crash-test: harness error in "
				"round %u\n", k + 1);
			ret = 99;
			break;
		}
	}
	printf("wal-crash-test: %u kill points (%u with log_force), %" PRIu64
	       " data pages found on the device, highest log LSN %" PRIu64
	       "; %" PRIu64 " pages above the log's LSN, %" PRIu64
	       " acknowledged pages of which %" PRIu64 " lost, %" PRIu64
	       " invalid pages\n",
	       t.kills, t.force_rounds, t.pages_seen, t.max_log_lsn,
	       t.violations, t.acked, t.lost, t.garbage);
	if (!ret && (t.violations || t.lost || t.garbage))
		ret = 1;
	if (!ret && (!t.pages_seen || !t.acked)) {
		/* A run that never wrote or acknowledged tested nothing. */
		fprintf(stderr, "wal-crash-test: nothing was written or "
			"acknowledged: the test proved nothing\n");
		ret = 1;
	}
	unlink(dev);
	unlink(log);
	free(dev);
	free(log);
	free(buf);
	return ret;
}
