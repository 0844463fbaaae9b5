// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * datapath-model.c - a model-based test of the data path (issue 25)
 *
 * Random pwb_write / pwb_read / pwb_inode_set_size / pwb_inode_discard /
 * pwb_fsync / close-and-reopen / delete-and-recreate on library-owned
 * inodes, from several threads, with re-shards, policy switches, bdi
 * restarts from a saved index, and fault epochs (EIO, ENOSPC, short and
 * delayed writes), checked byte for byte against a byte model. Public API
 * only (pwb.h, libpwb.la).
 *
 * The model. Each slot (a file) keeps, for every byte below MAXF, its
 * current value (what pwb_read must return below the size; 0 past the
 * size, so a size that grows again shows zeros) and its durable value (the
 * device's, as of the last successful pwb_fsync or pwb_inode_close). A
 * pwb_write that returns n < len (or an error) changed exactly its first n
 * bytes. Holes, truncated tails and discarded whole pages of allocator
 * inodes are zeros. The one place the contract allows a choice is a close
 * that failed and dropped its pages (see "After a failed close" below).
 *
 * Slots 0 .. NR_ALLOC-1 are allocator-mode inodes (no get_page, no
 * map_page) on the main bdi, over an image small enough that the files
 * fill it (ENOSPC), are deleted and their blocks reused. Slots NR_ALLOC ..
 * NR_SLOTS-1 are user-map inodes (get_page NULL, our own map_page: page i
 * at a fixed private area of the inode) on a second bdi. Both bdis have a
 * page cache of 64 pages.
 *
 * The run is a series of epochs. In each, NR_THREADS threads run, thread
 * t owning the slots s with (s + epoch) % NR_THREADS == t (ownership
 * rotates), each with its own PRNG. Between epochs, on one thread: the
 * fault rule of the next epoch is set (none, eio, enospc, short, delay),
 * and sometimes both bdis are restarted: every file is fsynced, the bdis
 * closed, opened again on the same images, and every file restored from
 * the saved index (pwb_inode_set_extents, pwb_inode_set_size).
 *
 * Checkpoints (the busy-extent rule of pwb.h, when the library has it):
 * before a slot's pwb_fsync its owner takes pwb_bdi_freed_cookie(); after
 * a successful one it reads the extents and the size, saves them in the
 * index, and releases (pwb_bdi_release_freed) up to the oldest cookie of
 * the slots that freed blocks since their last save. After every
 * successful pwb_fsync the slot is checked on the device: a FRESH bdi is
 * opened on the image, the inode restored from the index just saved, and
 * every byte below the size read and compared with the durable model.
 * Every seed ends with a restart and a read of every file, through the
 * restarted bdi and through a fresh one.
 *
 * User-map inodes are written, read, grown, fsynced, reopened (their size
 * restored with pwb_inode_set_size) and discarded (after an fsync, so that
 * the device holds what the model says), but not truncated: what a
 * truncate leaves on their device past the size is not in the contract.
 *
 * A mismatch prints the seed, the slot and inode, the offset, what was
 * read and expected, the last operations on that inode, and which write
 * of the run (of this file or of another) the bytes read came from. The
 * operations of each thread follow from the seed; their interleaving and
 * the flushers' timing do not, so a seed finds the same kind of failure
 * more reliably than the same one (--threads 1 narrows it).
 *
 * After a failed close. A page whose writes kept failing is dropped, and
 * what the device holds for it is whatever its last write that did reach
 * the device put there: background writeback may have written any version
 * of the page since the last durable point (write 'A', fsync; write 'B',
 * writeback writes it; EIO; write 'C'; the close fails: the page reads
 * 'B'). So each byte of the file may then read as any value it held at
 * some moment since its last durable point, as a file system's contract
 * says: its durable value, a value a pwb_write gave it since (only the
 * first n bytes of a write that returned n), or zero if a truncate, a
 * discard or a growth of the size over a hole zeroed it since (zs). Never
 * a value it never held: not an older version from before the durable
 * point, not another file's bytes, not garbage. The values a write gave
 * are gen(dseed, off), so the model keeps, per slot, the list of writes
 * since the last durable point (off, bytes written, dseed; 24 bytes each,
 * emptied by make_durable and by a delete) rather than the values
 * themselves: a 256-bit set per byte would be exact too but cost 6 MiB a
 * slot and a 6 MiB clear at every fsync, a bounded list of page snapshots
 * would need a rule for overflow, and the list costs nothing on the fast
 * path (a byte that reads as its current value) and O(writes since the
 * durable point) only for a byte that does not, which happens only in a
 * dropped page. The test reads the whole file (past the size too) right
 * after the reopen and settles each byte to what it read; that is then
 * the durable value, since the page came from the device, so every later
 * comparison (the fresh-bdi checks, the restarts, the crash variant's
 * index) stays strict.
 *
 * The SIGKILL variant (--crash N): a child runs the model with its index
 * saved durably, one file per slot (write, fdatasync, rename, before the
 * release), and logs every change it is about to make to a pipe; the
 * parent kills it at a random moment, restores every slot through a fresh
 * bdi from the index files and checks each byte: the durable value saved
 * with the index, or a value a change logged after that save could have
 * put there. That is the same rule as after a failed close, from the
 * index's save on: the durable value or any value a change logged since
 * gave the byte.
 *
 * Environment: PWB_MODEL_SECONDS (run each seed this long), PWB_MODEL_SEED
 * (one seed only), PWB_MODEL_CRASH_ROUNDS. Exit 0 pass, 1 mismatch or
 * unexpected error, 77 when the test directory refuses O_DIRECT.
 *
 *   datapath-model [--seed N] [--seconds S] [--threads N] [--crash ROUNDS]
 *                  [--verbose]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
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
#include "odirect-probe.h"

#define PS 4096u
#define CACHE_PAGES 64
#define MAXF_PAGES 48
#define MAXF ((uint64_t)MAXF_PAGES * PS)	/* largest file of the model */
#define NR_ALLOC 8				/* allocator-mode slots */
#define NR_USER 2				/* user-map slots */
#define NR_SLOTS (NR_ALLOC + NR_USER)
#ifndef ALLOC_IMAGE_PAGES
#define ALLOC_IMAGE_PAGES 256	/* 1 MiB: 8 files of up to 48 pages fill it */
#endif
#define USER_IMAGE_PAGES (NR_USER * MAXF_PAGES)
#define MAX_THREADS 4
#define RING 24
#define MAX_EXT (MAXF_PAGES + 1)

#define TU_MIN_(a, b) ((a) < (b) ? (a) : (b))
#define TU_MAX_(a, b) ((a) > (b) ? (a) : (b))

#ifdef PWB_BDI_REUSE_FREED
#define HAVE_BUSY_EXTENTS 1
#else
#define HAVE_BUSY_EXTENTS 0
#endif

static const char *policies[] = {
	"inode-hash", "alloc-group", "least-loaded", "hint", "xarray",
	"shared-list", "region",
};
#define NR_POLICIES (sizeof(policies) / sizeof(policies[0]))

enum op_kind {
	OP_WRITE, OP_READ, OP_GROW, OP_SHRINK, OP_DISCARD, OP_TRUNC,
	OP_FSYNC, OP_REOPEN, OP_DELETE, OP_RESHARD, OP_POLICY, OP_RESTART,
	OP_EPOCH, NR_OPS
};
static const char *op_names[NR_OPS] = {
	"write", "read", "set_size-up", "set_size-down", "discard",
	"truncate", "fsync", "close-reopen", "delete", "reshard", "policy",
	"restart", "fault-epoch",
};

/* A record of the crash variant's pipe: a change about to be made. */
enum { LOG_WRITE = 1, LOG_ZERO = 2 };
struct logrec {
	uint32_t slot;
	uint32_t kind;
	uint64_t seq;
	uint64_t off;
	uint64_t len;
	uint64_t dseed;
};

/* A write since the last durable point: it gave bytes [off, off + n) the
 * values gen(dseed, off ...). */
struct since_write {
	uint64_t off, n, dseed;
};

struct slot {
	unsigned int idx;
	bool user;
	uint64_t ino;
	struct pwb_inode *inode;
	uint64_t dev_base;		/* user-map: device offset of page 0 */
	uint64_t size;
	uint8_t *cur;			/* current value */
	uint8_t *dur;			/* durable value */
	uint8_t *zs;			/* zeroed by a truncate, a discard or
					 * a growth over a hole since the
					 * last durable point */
	struct since_write *since;	/* the writes since the last durable
					 * point (held_since_durable) */
	size_t nr_since, cap_since;
	bool settling;			/* reading after a failed close */
	bool err_possible;		/* a fault epoch may have left an error */
	uint64_t seq;			/* changes made (crash log) */
	char ring[RING][120];
	unsigned int ring_pos;
};

/* One slot's saved index: what a restart restores. */
struct ientry {
	uint64_t ino;
	uint64_t size;
	uint64_t seq;
	size_t nr_ext;
	struct pwb_extent ext[MAX_EXT];
	uint64_t cookie;	/* freed cookie taken before this save */
	bool pending;		/* freed blocks since this save */
};

static struct {
	uint64_t seed;
	double seconds;
	unsigned int nr_threads;
	bool verbose;
	bool crash_child;
	int log_fd;
	char dir[4096];
	char img[4096 + 64], uimg[4096 + 64];
	char idxdir[4096 + 64];
} cfg;

static struct pwb_bdi *bdi, *ubdi;
static struct slot slots[NR_SLOTS];
static struct ientry index_[NR_SLOTS];
static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int failed;
static atomic_int stop;
static unsigned int epoch;
static const char *fault_kind_name = "none";
static bool fault_errors;	/* the current epoch injects EIO or ENOSPC */
static uint64_t released_cookie;
static const char *prog;

static atomic_ullong op_count[NR_OPS];
static atomic_ullong errors_since_sync;	/* pwb_sync may report one */
static atomic_ullong pages_compared, fresh_checks, short_writes,
	write_errors, fsync_errors, close_errors, busy_releases,
	bytes_settled;

static const struct pwb_inode_ops alloc_ops;	/* allocator mode */
static int umap_page(struct pwb_inode *inode, uint64_t index,
		     uint64_t *dev_off);
static const struct pwb_inode_ops user_ops = { .map_page = umap_page };

/* ---------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s = mix64(*s);
	return *s;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/* The byte a write with data seed @dseed puts at file offset @pos: never
 * 0, so a zero where data belongs (or data where a hole belongs) shows. */
static uint8_t gen(uint64_t dseed, uint64_t pos)
{
	return (uint8_t)(mix64(dseed ^ (pos * 0x9e3779b97f4a7c15ull)) % 255 +
			 1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void slog(struct slot *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void slog(struct slot *s, const char *fmt, ...)
{
	va_list ap;
	char *p = s->ring[s->ring_pos++ % RING];
	int n;

	n = snprintf(p, sizeof(s->ring[0]), "e%u/%s ino %" PRIu64 ": ", epoch, fault_kind_name,
		     s->ino);
	va_start(ap, fmt);
	vsnprintf(p + n, sizeof(s->ring[0]) - n, fmt, ap);
	va_end(ap);
	if (cfg.verbose)
		fprintf(stderr, "slot %u %s\n", s->idx, p);
}

static void dump_ring(struct slot *s)
{
	unsigned int i, n = s->ring_pos < RING ? s->ring_pos : RING;

	fprintf(stderr, "  last %u operations on slot %u:\n", n, s->idx);
	for (i = s->ring_pos - n; i != s->ring_pos; i++)
		fprintf(stderr, "    %s\n", s->ring[i % RING]);
}

static void fail(struct slot *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(struct slot *s, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	if (!atomic_exchange(&failed, 1)) {
		fprintf(stderr, "FAIL seed %" PRIu64 " epoch %u (faults %s): ",
			cfg.seed, epoch, fault_kind_name);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, "\n");
		if (s) {
			fprintf(stderr, "  slot %u (%s inode %" PRIu64
				", model size %" PRIu64 ")\n", s->idx,
				s->user ? "user-map" : "allocator", s->ino,
				s->size);
			dump_ring(s);
		}
	}
	atomic_store(&stop, 1);
	pthread_mutex_unlock(&report_lock);
}

/*
 * Every write of the run (the last WLOG_SIZE), so that a mismatch can say
 * whose bytes a file shows: its own failed write's, an older write's, or
 * another (maybe deleted) file's.
 */
#define WLOG_SIZE 8192
static struct wlog {
	uint64_t nr;
	unsigned int slot;
	uint64_t ino, off, len, dseed;
	int64_t ret;
} wlog[WLOG_SIZE];
static uint64_t wlog_nr;
static pthread_mutex_t wlog_lock = PTHREAD_MUTEX_INITIALIZER;

static void wlog_add(struct slot *s, uint64_t off, uint64_t len,
		     uint64_t dseed, int64_t ret)
{
	pthread_mutex_lock(&wlog_lock);
	wlog[wlog_nr % WLOG_SIZE] = (struct wlog){ wlog_nr, s->idx, s->ino,
						   off, len, dseed, ret };
	wlog_nr++;
	pthread_mutex_unlock(&wlog_lock);
}

static uint8_t gen(uint64_t dseed, uint64_t pos);

/* @n bytes @got were read at file offset @off where the model says
 * otherwise: name the write that put them there, at the same offset in a
 * page (the device block may have moved between files). */
static void explain(const uint8_t *got, uint64_t n, uint64_t off)
{
	uint64_t i, k, p, found = 0;

	if (n > 32)
		n = 32;
	if (n < 4) {
		fprintf(stderr, "  (too few bytes to say whose they are)\n");
		return;
	}
	pthread_mutex_lock(&wlog_lock);
	for (i = wlog_nr; i-- > 0 && wlog_nr - i <= WLOG_SIZE && found < 4;) {
		struct wlog *w = &wlog[i % WLOG_SIZE];

		for (p = off % PS; p < MAXF; p += PS) {
			if (p < w->off || p + n > w->off + w->len)
				continue;
			for (k = 0; k < n; k++)
				if (got[k] != gen(w->dseed, p + k))
					break;
			if (k < n)
				continue;
			fprintf(stderr, "  the %" PRIu64 " bytes read there are "
				"bytes %" PRIu64 "..%" PRIu64 " of write #%"
				PRIu64 " (of %" PRIu64 ") to slot %u inode %"
				PRIu64 " (off %" PRIu64 " len %" PRIu64
				", returned %" PRId64 ")\n", n, p, p + n - 1,
				w->nr, wlog_nr, w->slot, w->ino, w->off,
				w->len, w->ret);
			found++;
		}
	}
	pthread_mutex_unlock(&wlog_lock);
	if (!found)
		fprintf(stderr, "  the bytes read there match no write of the "
			"last %d\n", WLOG_SIZE);
}

static void log_change(struct slot *s, uint32_t kind, uint64_t off,
		       uint64_t len, uint64_t dseed)
{
	struct logrec r = { s->idx, kind, ++s->seq, off, len, dseed };

	if (cfg.log_fd >= 0 &&
	    write(cfg.log_fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(5);
}

/* ---------------------------------------------------------------------- */
/* The model's operations                                                  */

static int umap_page(struct pwb_inode *inode, uint64_t index,
		     uint64_t *dev_off)
{
	struct slot *s = pwb_inode_priv(inode);

	if (index >= MAXF_PAGES)
		return -ERANGE;
	*dev_off = s->dev_base + index * PS;
	return 0;
}

/* Did byte @b of @s hold @got at some moment since its last durable
 * point? (Its durable value, a zero of zs, or a write's byte.) */
static bool held_since_durable(struct slot *s, uint64_t b, uint8_t got)
{
	size_t i;

	if (got == s->dur[b] || (got == 0 && s->zs[b]))
		return true;
	for (i = s->nr_since; i-- > 0;) {
		struct since_write *w = &s->since[i];

		if (b >= w->off && b - w->off < w->n && got == gen(w->dseed, b))
			return true;
	}
	return false;
}

/* Does byte @b of @s read as @got? After a failed close (s->settling) it
 * may read as any value it held since it was durable: settle it. */
static bool byte_ok(struct slot *s, uint64_t b, uint8_t got)
{
	if (got == s->cur[b])
		return true;
	if (!s->settling || !held_since_durable(s, b, got))
		return false;
	s->cur[b] = got;
	atomic_fetch_add(&bytes_settled, 1);
	return true;
}

/* A write gave bytes [off, off + n) new values. */
static void since_add(struct slot *s, uint64_t off, uint64_t n,
		      uint64_t dseed)
{
	if (s->nr_since == s->cap_since) {
		size_t cap = s->cap_since ? 2 * s->cap_since : 64;
		struct since_write *p = realloc(s->since, cap * sizeof(*p));

		if (!p) {
			fail(s, "out of memory");
			return;
		}
		s->since = p;
		s->cap_since = cap;
	}
	s->since[s->nr_since++] = (struct since_write){ off, n, dseed };
}

static void model_zero(struct slot *s, uint64_t from, uint64_t to)
{
	if (to > MAXF)
		to = MAXF;
	if (from >= to)
		return;
	memset(s->cur + from, 0, to - from);
	memset(s->zs + from, 1, to - from);
}

/* Everything the model holds is on the device now. */
static void make_durable(struct slot *s)
{
	memcpy(s->dur, s->cur, MAXF);
	memset(s->zs, 0, MAXF);
	s->nr_since = 0;
}

static int open_inode(struct slot *s)
{
	return pwb_inode_open(s->user ? ubdi : bdi, s->ino,
			      s->user ? &user_ops : &alloc_ops, s,
			      &s->inode);
}

static void do_write(struct slot *s, uint64_t *r)
{
	uint64_t off, len, dseed = rnd(r), i;
	unsigned int shape = rnd_below(r, 12);
	ssize_t n;
	uint8_t *buf;

	if (shape < 3) {		/* sub-page */
		len = 1 + rnd_below(r, PS);
		off = rnd_below(r, MAXF - len + 1);
	} else if (shape < 6) {		/* aligned pages */
		len = (1 + rnd_below(r, 8)) * PS;
		off = rnd_below(r, MAXF_PAGES - len / PS + 1) * PS;
	} else if (shape < 8) {		/* unaligned, multi-page */
		len = 1 + rnd_below(r, 12 * PS);
		off = rnd_below(r, MAXF - len + 1);
	} else if (shape >= 10) {	/* whole aligned runs of 16 or 32
					 * pages (the cache's folios), maybe
					 * with a partial page after */
		uint64_t pages = (uint64_t)16 << rnd_below(r, 2);

		off = rnd_below(r, (MAXF_PAGES - pages) / 16 + 1) * 16 * PS;
		len = pages * PS;
		if (off + len < MAXF && rnd_below(r, 2))
			len += 1 + rnd_below(r, PS - 1);
		/* A folio is made only where nothing of it is cached: drop
		 * the clean pages (advice: the contents do not change). */
		if (rnd_below(r, 4))
			pwb_fadvise(s->inode, off, pages * PS,
				    PWB_FADV_DONTNEED);
	} else {			/* append, maybe far past EOF */
		len = 1 + rnd_below(r, 3 * PS);
		off = s->size + rnd_below(r, 8 * PS);
		if (off + len > MAXF) {
			off = 0;
			len = TU_MIN_(len, MAXF);
		}
	}
	buf = malloc(len);
	for (i = 0; i < len; i++)
		buf[i] = gen(dseed, off + i);
	log_change(s, LOG_WRITE, off, len, dseed);
	n = pwb_write(s->inode, buf, len, off);
	free(buf);
	wlog_add(s, off, len, dseed, n);
	slog(s, "write off %" PRIu64 " len %" PRIu64 " -> %zd", off, len, n);
	if (n < 0) {
		if (n != -ENOSPC && n != -ETIMEDOUT) {
			fail(s, "pwb_write(off %" PRIu64 ", len %" PRIu64
			     ") = %zd (%s)", off, len, n, pwb_strerror(n));
			return;
		}
		atomic_fetch_add(&write_errors, 1);
		n = 0;
	} else if ((uint64_t)n > len) {
		fail(s, "pwb_write returned %zd > len %" PRIu64, n, len);
		return;
	}
	if ((uint64_t)n < len)
		atomic_fetch_add(&short_writes, 1);
	for (i = 0; i < (uint64_t)n; i++)
		s->cur[off + i] = gen(dseed, off + i);
	if (n > 0) {
		since_add(s, off, n, dseed);
		/* A hole the write grew the file over is zeros. */
		if (off > s->size)
			memset(s->zs + s->size, 1, off - s->size);
		if (off + n > s->size)
			s->size = off + n;
	}
}

static void check_size(struct slot *s, const char *when)
{
	uint64_t sz = UINT64_MAX;
	int rc = pwb_inode_size(s->inode, &sz);

	if (rc || sz != s->size)
		fail(s, "%s: pwb_inode_size = %d, size %" PRIu64
		     ", model %" PRIu64, when, rc, sz, s->size);
}

/* Read [off, off + len) and compare every byte. */
static void read_check(struct slot *s, uint64_t off, uint64_t len,
		       const char *why)
{
	uint64_t want = off >= s->size ? 0 : TU_MIN_(len, s->size - off), i;
	uint8_t *buf = malloc(len ? len : 1);
	ssize_t n;

	memset(buf, 0xa5, len);
	n = pwb_read(s->inode, buf, len, off);
	if (n < 0 || (uint64_t)n != want) {
		fail(s, "%s: pwb_read(off %" PRIu64 ", len %" PRIu64 ") = %zd"
		     " (%s), expected %" PRIu64, why, off, len, n,
		     n < 0 ? pwb_strerror(n) : "short", want);
		free(buf);
		return;
	}
	for (i = 0; i < want; i++) {
		if (!byte_ok(s, off + i, buf[i])) {
			fail(s, "%s: byte at offset %" PRIu64 " (page %" PRIu64
			     " +%" PRIu64 ") reads 0x%02x, expected 0x%02x%s"
			     " (durable 0x%02x)", why, off + i,
			     (off + i) / PS, (off + i) % PS, buf[i],
			     s->cur[off + i],
			     s->settling ? " or a value it held since it was "
					   "durable" : "",
			     s->dur[off + i]);
			explain(buf + i, want - i, off + i);
			break;
		}
	}
	atomic_fetch_add(&pages_compared, (want + PS - 1) / PS);
	free(buf);
}

static void do_read(struct slot *s, uint64_t *r)
{
	uint64_t off, len;

	if (rnd_below(r, 4) == 0) {	/* the whole file and past it */
		off = 0;
		len = s->size + rnd_below(r, 2 * PS);
	} else {
		len = 1 + rnd_below(r, 10 * PS);
		off = rnd_below(r, s->size + 2 * PS);
	}
	slog(s, "read off %" PRIu64 " len %" PRIu64, off, len);
	read_check(s, off, len, "read");
}

/* The new size is @size: what a truncate leaves past it. */
static void model_truncate(struct slot *s, uint64_t size)
{
	if (size >= s->size)
		return;
	model_zero(s, size, s->size);
	s->size = size;
}

/* Blocks are about to be freed: releases wait for this slot's next save. */
static void mark_freeing(struct slot *s)
{
	pthread_mutex_lock(&index_lock);
	index_[s->idx].pending = true;
	pthread_mutex_unlock(&index_lock);
}

/* A user-map inode's truncate or discard leaves the device as it is: make
 * it hold the current bytes first, so the model knows what it holds. */
static bool user_settle(struct slot *s)
{
	int rc;

	if (!s->user)
		return true;
	rc = pwb_fsync(s->inode);
	slog(s, "fsync before truncate/discard -> %d", rc);
	if (rc) {
		if ((fault_errors || s->err_possible) &&
		    (rc == -EIO || rc == -ENOSPC)) {
			s->err_possible = fault_errors;
			return false;
		}
		fail(s, "pwb_fsync = %d (%s)", rc, pwb_strerror(rc));
		return false;
	}
	/* In a fault epoch a later write of the inode may still fail. */
	s->err_possible = fault_errors;
	make_durable(s);
	return true;
}

static void do_set_size(struct slot *s, uint64_t *r, bool up)
{
	uint64_t size;
	int rc;

	if (up) {
		size = s->size + rnd_below(r, MAXF - s->size + 1);
	} else {
		if (!user_settle(s))
			return;
		size = rnd_below(r, s->size + 1);
		mark_freeing(s);
		log_change(s, LOG_ZERO, size, MAXF - size, 0);
	}
	rc = pwb_inode_set_size(s->inode, size);
	slog(s, "set_size %" PRIu64 " (from %" PRIu64 ") -> %d", size,
	     s->size, rc);
	if (rc) {
		fail(s, "pwb_inode_set_size(%" PRIu64 ") = %d (%s)", size, rc,
		     pwb_strerror(rc));
		return;
	}
	if (up) {
		/* The bytes the size grows over are zeros (of a hole). */
		memset(s->zs + s->size, 1, size - s->size);
		s->size = size;
	} else
		model_truncate(s, size);
	check_size(s, "after set_size");
}

static void do_discard(struct slot *s, uint64_t *r, bool trunc)
{
	uint64_t off, len, first, end;
	int rc;

	if (!user_settle(s))
		return;
	off = rnd_below(r, 4) ? rnd_below(r, s->size + PS)
			      : rnd_below(r, MAXF_PAGES) * PS;
	len = trunc ? UINT64_MAX : 1 + rnd_below(r, 12 * PS);
	if (!trunc && rnd_below(r, 2))
		len = (len + PS - 1) / PS * PS;
	mark_freeing(s);
	log_change(s, LOG_ZERO, off, trunc ? MAXF - TU_MIN_(off, MAXF) : len,
		   0);
	rc = pwb_inode_discard(s->inode, off, len);
	slog(s, "discard off %" PRIu64 " len %" PRIu64 " (size %" PRIu64
	     ") -> %d", off, trunc ? UINT64_MAX : len, s->size, rc);
	if (rc) {
		fail(s, "pwb_inode_discard = %d (%s)", rc, pwb_strerror(rc));
		return;
	}
	if (trunc) {
		/* The bytes from off to its page's end become zeros. */
		if (off < s->size)
			model_truncate(s, off);
		return;
	}
	first = (off + PS - 1) / PS * PS;
	end = (off + len) / PS * PS;
	if (end > MAXF)
		end = MAXF;
	if (first >= end)
		return;
	if (s->user) {
		/* The pages leave the cache; the device keeps them. */
		return;
	}
	/* Whole pages of an allocator inode read as zeros. */
	model_zero(s, first, end);
}

/* ---------------------------------------------------------------------- */
/* The index, checkpoints and the check through a fresh bdi               */

static int read_extents(struct slot *s, struct pwb_extent *ext, size_t *nr)
{
	size_t total = 0;
	int rc;

	*nr = 0;
	if (s->user)
		return 0;
	rc = pwb_inode_extents(s->inode, ext, MAX_EXT, &total);
	if (rc)
		return rc;
	if (total > MAX_EXT)
		return -E2BIG;
	*nr = total;
	return 0;
}

static uint64_t freed_cookie(struct pwb_bdi *b)
{
#if HAVE_BUSY_EXTENTS
	uint64_t c = 0;
	int rc = pwb_bdi_freed_cookie(b, &c);

	if (rc)
		fail(NULL, "pwb_bdi_freed_cookie = %d (%s)", rc,
		     pwb_strerror(rc));
	return c;
#else
	(void)b;
	return 0;
#endif
}

/* Write slot @i's index file (crash variant), durably, before any release
 * that relies on it. Called with index_lock held. */
static int save_index_file(struct slot *s, struct ientry *e)
{
	char path[8300], tmp[8310];
	int fd;
	ssize_t w = 0;

	if (!cfg.crash_child)
		return 0;
	snprintf(path, sizeof(path), "%s/slot%u", cfg.idxdir, s->idx);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	{
		uint64_t hdr[4] = { e->ino, e->size, e->seq, e->nr_ext };

		w += write(fd, hdr, sizeof(hdr));
		w += write(fd, e->ext, e->nr_ext * sizeof(e->ext[0]));
		w += write(fd, s->dur, e->size);
		if ((uint64_t)w != sizeof(hdr) + e->nr_ext * sizeof(e->ext[0]) +
			e->size || fdatasync(fd)) {
			close(fd);
			return -EIO;
		}
	}
	close(fd);
	if (rename(tmp, path))
		return -errno;
	return 0;
}

static void release_freed_locked(void)
{
#if HAVE_BUSY_EXTENTS
	uint64_t c = UINT64_MAX;
	unsigned int i;
	int rc;

	for (i = 0; i < NR_ALLOC; i++)
		if (index_[i].pending && index_[i].cookie < c)
			c = index_[i].cookie;
	if (c == UINT64_MAX)
		c = freed_cookie(bdi);	/* every free is covered by a save */
	if (c <= released_cookie)
		return;
	rc = pwb_bdi_release_freed(bdi, c);
	if (rc) {
		fail(NULL, "pwb_bdi_release_freed(%" PRIu64 ") = %d (%s)", c,
		     rc, pwb_strerror(rc));
		return;
	}
	released_cookie = c;
	atomic_fetch_add(&busy_releases, 1);
#endif
}

/* Save slot @s in the index: its extents (read now, after a successful
 * fsync) and its size, covering the frees before @cookie. */
static int save_slot(struct slot *s, uint64_t cookie)
{
	struct ientry e = { 0 };
	int rc;

	e.ino = s->ino;
	e.size = s->size;
	e.seq = s->seq;
	e.cookie = cookie;
	rc = read_extents(s, e.ext, &e.nr_ext);
	if (rc) {
		fail(s, "pwb_inode_extents = %d (%s)", rc, pwb_strerror(rc));
		return rc;
	}
	pthread_mutex_lock(&index_lock);
	rc = save_index_file(s, &e);
	if (rc) {
		pthread_mutex_unlock(&index_lock);
		fail(s, "saving the index file: %s", strerror(-rc));
		return rc;
	}
	index_[s->idx] = e;
	if (!s->user)
		release_freed_locked();
	pthread_mutex_unlock(&index_lock);
	return 0;
}

static int open_fresh(const char *img, struct pwb_bdi **b)
{
	struct pwb_bdi_config c;

	pwb_bdi_config_init(&c);
	c.nr_wb_ctx = 1;
	c.cache_bytes = CACHE_PAGES * PS;
	c.dirty_writeback_ms = 0;
	return pwb_bdi_open(img, &c, b);
}

/*
 * Restore @e into a fresh inode on @b and compare every byte below its
 * size with @dur. @ok, if not NULL, may accept a byte the durable model
 * does not (the crash variant's later changes).
 */
typedef bool (*accept_fn)(unsigned int slot, uint64_t off, uint8_t got,
			  void *arg);
static int check_on(struct pwb_bdi *b, unsigned int idx, bool user,
		    const struct ientry *e, const uint8_t *dur, accept_fn ok,
		    void *arg, struct slot *report)
{
	struct pwb_inode *in = NULL;
	struct slot tmp = { .idx = idx, .dev_base = slots[idx].dev_base };
	uint8_t *buf = NULL;
	ssize_t n;
	uint64_t i;
	int rc;

	rc = pwb_inode_open(b, e->ino, user ? &user_ops : &alloc_ops, &tmp,
			    &in);
	if (rc) {
		fail(report, "fresh bdi: pwb_inode_open = %d (%s)", rc,
		     pwb_strerror(rc));
		return rc;
	}
	if (!user && e->nr_ext) {
		rc = pwb_inode_set_extents(in, e->ext, e->nr_ext);
		if (rc) {
			fail(report, "fresh bdi: pwb_inode_set_extents(%zu "
			     "extents, first dev %" PRIu64 ") = %d (%s): %s",
			     e->nr_ext, e->ext[0].dev_off, rc,
			     pwb_strerror(rc), pwb_errmsg());
			goto out;
		}
	}
	rc = pwb_inode_set_size(in, e->size);
	if (rc) {
		fail(report, "fresh bdi: pwb_inode_set_size = %d", rc);
		goto out;
	}
	buf = malloc(e->size + 1);
	n = pwb_read(in, buf, e->size, 0);
	if (n < 0 || (uint64_t)n != e->size) {
		fail(report, "fresh bdi: pwb_read(0, %" PRIu64 ") = %zd",
		     e->size, n);
		rc = -EIO;
		goto out;
	}
	for (i = 0; i < e->size; i++) {
		if (buf[i] == dur[i])
			continue;
		if (ok && ok(idx, i, buf[i], arg))
			continue;
		fail(report, "fresh bdi: inode %" PRIu64 " byte at offset %"
		     PRIu64 " (page %" PRIu64 " +%" PRIu64 ") reads 0x%02x on "
		     "the device, durable model 0x%02x (%zu extents, size %"
		     PRIu64 ")", e->ino, i, i / PS, i % PS, buf[i], dur[i],
		     e->nr_ext, e->size);
		explain(buf + i, e->size - i, i);
		if (!report) {
			size_t k;

			for (k = 0; k < e->nr_ext; k++)
				fprintf(stderr, "  extent file %" PRIu64
					" dev %" PRIu64 " len %" PRIu64 "\n",
					e->ext[k].file_off, e->ext[k].dev_off,
					e->ext[k].len);
		}
		rc = -EIO;
		break;
	}
	atomic_fetch_add(&pages_compared, (e->size + PS - 1) / PS);
out:
	free(buf);
	if (pwb_inode_close(in) && !rc)
		fail(report, "fresh bdi: pwb_inode_close failed");
	return rc;
}

/* After a successful fsync and save of @s: the device, through a fresh
 * bdi, holds the durable model. */
static void fresh_check(struct slot *s)
{
	struct pwb_bdi *b = NULL;
	struct ientry e;
	int rc;

	pthread_mutex_lock(&index_lock);
	e = index_[s->idx];
	pthread_mutex_unlock(&index_lock);
	rc = open_fresh(s->user ? cfg.uimg : cfg.img, &b);
	if (rc) {
		fail(s, "fresh pwb_bdi_open = %d (%s)", rc, pwb_strerror(rc));
		return;
	}
	check_on(b, s->idx, s->user, &e, s->dur, NULL, NULL, s);
	rc = pwb_bdi_close(b);
	if (rc)
		fail(s, "fresh pwb_bdi_close = %d", rc);
	atomic_fetch_add(&fresh_checks, 1);
}

/* fsync, then on success: durable = current, save, check the device. */
static int do_fsync(struct slot *s, bool check)
{
	uint64_t cookie = s->user ? 0 : freed_cookie(bdi);
	int rc = pwb_fsync(s->inode);

	slog(s, "fsync -> %d", rc);
	if (rc) {
		if ((fault_errors || s->err_possible) &&
		    (rc == -EIO || rc == -ENOSPC)) {
			s->err_possible = fault_errors;
			atomic_fetch_add(&fsync_errors, 1);
			atomic_fetch_add(&errors_since_sync, 1);
			return rc;
		}
		fail(s, "pwb_fsync = %d (%s)", rc, pwb_strerror(rc));
		return rc;
	}
	/* In a fault epoch a later write of the inode may still fail. */
	s->err_possible = fault_errors;
	make_durable(s);
	check_size(s, "after fsync");
	if (save_slot(s, cookie))
		return -EIO;
	if (check)
		fresh_check(s);
	return 0;
}

/*
 * A close that failed dropped the pages that still failed: each of their
 * bytes reads as a value it held since its last durable point (its
 * durable value, a write's, or a zero of a truncate, discard or hole; see
 * "After a failed close" at the top). Read the whole file at once, past
 * the size too (which the size is grown for, and truncated back to
 * afterwards: a dropped page's tail past the size may hold its durable
 * bytes or a truncated write's), and settle every byte to what it read:
 * the device holds that now, so it is the durable value from here on.
 */
static void after_failed_close(struct slot *s)
{
	uint64_t size = s->size;
	int rc;

	if (!s->user && size < MAXF) {
		rc = pwb_inode_set_size(s->inode, MAXF);
		slog(s, "set_size %" PRIu64 " to read past the size -> %d",
		     MAXF, rc);
		if (rc) {
			fail(s, "pwb_inode_set_size(%" PRIu64 ") = %d (%s)",
			     MAXF, rc, pwb_strerror(rc));
			return;
		}
		memset(s->zs + size, 1, MAXF - size);
		s->size = MAXF;
	}
	s->settling = true;
	read_check(s, 0, s->size, "read after a failed close");
	s->settling = false;
	if (atomic_load(&failed))
		return;
	make_durable(s);
	if (s->size != size) {
		mark_freeing(s);
		log_change(s, LOG_ZERO, size, MAXF - size, 0);
		rc = pwb_inode_set_size(s->inode, size);
		slog(s, "set_size %" PRIu64 " back -> %d", size, rc);
		if (rc) {
			fail(s, "pwb_inode_set_size(%" PRIu64 ") = %d (%s)",
			     size, rc, pwb_strerror(rc));
			return;
		}
		model_truncate(s, size);
	}
}

static void do_reopen(struct slot *s)
{
	int rc = pwb_inode_close(s->inode);
	bool close_failed;

	s->inode = NULL;
	slog(s, "close -> %d", rc);
	if (rc && !((fault_errors || s->err_possible) &&
		    (rc == -EIO || rc == -ENOSPC))) {
		fail(s, "pwb_inode_close = %d (%s)", rc, pwb_strerror(rc));
		return;
	}
	s->err_possible = fault_errors;
	if (rc) {
		atomic_fetch_add(&close_errors, 1);
		atomic_fetch_add(&errors_since_sync, 1);
	} else {
		/* A close that succeeds made everything durable. */
		make_durable(s);
	}
	close_failed = rc != 0;
	rc = open_inode(s);
	slog(s, "reopen -> %d", rc);
	if (rc) {
		fail(s, "pwb_inode_open (reopen) = %d (%s)", rc,
		     pwb_strerror(rc));
		return;
	}
	if (s->user) {
		/* The application restores a user-map inode's size. */
		rc = pwb_inode_set_size(s->inode, s->size);
		if (rc)
			fail(s, "pwb_inode_set_size (reopen) = %d", rc);
	} else {
		check_size(s, "after close and reopen on the same bdi");
	}
	if (!atomic_load(&failed) && close_failed)
		after_failed_close(s);
}

static void do_delete(struct slot *s)
{
	uint64_t cookie;
	int rc;

	if (s->user)
		return;
	mark_freeing(s);
	log_change(s, LOG_ZERO, 0, MAXF, 0);
	rc = pwb_inode_discard(s->inode, 0, UINT64_MAX);
	slog(s, "delete: discard(0, UINT64_MAX) -> %d", rc);
	if (rc) {
		fail(s, "pwb_inode_discard(0, UINT64_MAX) = %d (%s)", rc,
		     pwb_strerror(rc));
		return;
	}
	rc = pwb_inode_close(s->inode);
	s->inode = NULL;
	slog(s, "delete: close -> %d", rc);
	if (rc) {
		fail(s, "pwb_inode_close after discarding everything = %d (%s)",
		     rc, pwb_strerror(rc));
		return;
	}
	s->err_possible = fault_errors;	/* for the new file */
	s->size = 0;
	/* The new file is empty and durable: it never held the old one's
	 * bytes, which a failed close of it must not show. */
	model_zero(s, 0, MAXF);
	make_durable(s);
	s->ino += NR_SLOTS;	/* a new file takes the slot */
	rc = open_inode(s);
	slog(s, "new inode -> %d", rc);
	if (rc) {
		fail(s, "pwb_inode_open (new file) = %d (%s)", rc,
		     pwb_strerror(rc));
		return;
	}
	/* The deleted file's index entry goes: save the empty new one. */
	cookie = freed_cookie(bdi);
	save_slot(s, cookie);
}

static void bdi_op(unsigned int kind, uint64_t *r)
{
	int rc;

	if (kind == OP_RESHARD) {
		unsigned int nr = 1 + rnd_below(r, 4);

		rc = pwb_bdi_set_nr_wb_ctx(rnd_below(r, 2) ? bdi : ubdi, nr);
		if (rc)
			fail(NULL, "pwb_bdi_set_nr_wb_ctx(%u) = %d (%s)", nr,
			     rc, pwb_strerror(rc));
	} else {
		const char *p = policies[rnd_below(r, NR_POLICIES)];

		rc = pwb_bdi_set_policy(rnd_below(r, 2) ? bdi : ubdi, p);
		if (rc)
			fail(NULL, "pwb_bdi_set_policy(%s) = %d (%s): %s", p,
			     rc, pwb_strerror(rc), pwb_errmsg());
	}
}

/* ---------------------------------------------------------------------- */
/* Threads and epochs                                                      */

struct worker {
	pthread_t thr;
	unsigned int id;
	uint64_t rng;
	unsigned int ops;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct slot *mine[NR_SLOTS];
	unsigned int n = 0, i;

	for (i = 0; i < NR_SLOTS; i++)
		if ((i + epoch) % cfg.nr_threads == w->id)
			mine[n++] = &slots[i];
	for (i = 0; i < w->ops && !atomic_load(&stop) && n; i++) {
		struct slot *s = mine[rnd_below(&w->rng, n)];
		unsigned int p = rnd_below(&w->rng, 1000), kind;

		if (p < 360)
			kind = OP_WRITE;
		else if (p < 560)
			kind = OP_READ;
		else if (p < 610)
			kind = OP_GROW;
		else if (p < 670)
			kind = OP_SHRINK;
		else if (p < 740)
			kind = OP_DISCARD;
		else if (p < 770)
			kind = OP_TRUNC;
		else if (p < 900)
			kind = OP_FSYNC;
		else if (p < 940)
			kind = OP_REOPEN;
		else if (p < 960)
			kind = OP_DELETE;
		else if (p < 980)
			kind = OP_RESHARD;
		else
			kind = OP_POLICY;
		/* What a truncate leaves of a user-map inode's pages past
		 * the size (the device's bytes or zeros) is not part of the
		 * contract: truncates are for allocator inodes only. */
		if (s->user && (kind == OP_SHRINK || kind == OP_TRUNC ||
				kind == OP_DELETE))
			kind = OP_READ;
		atomic_fetch_add(&op_count[kind], 1);
		switch (kind) {
		case OP_WRITE: do_write(s, &w->rng); break;
		case OP_READ: do_read(s, &w->rng); break;
		case OP_GROW: do_set_size(s, &w->rng, true); break;
		case OP_SHRINK: do_set_size(s, &w->rng, false); break;
		case OP_DISCARD: do_discard(s, &w->rng, false); break;
		case OP_TRUNC: do_discard(s, &w->rng, true); break;
		case OP_FSYNC: do_fsync(s, true); break;
		case OP_REOPEN: do_reopen(s); break;
		case OP_DELETE: do_delete(s); break;
		default: bdi_op(kind, &w->rng); break;
		}
	}
	return NULL;
}

static void set_faults(uint64_t *r)
{
	static const char *kinds[] = { "none", "none", "eio", "enospc",
				       "short", "delay" };
	unsigned int k = rnd_below(r, 6);
	struct pwb_fault f = { 0 };
	int rc;

	fault_kind_name = kinds[k];
	fault_errors = k == 2 || k == 3;
	f.seed = rnd(r);
	switch (k) {
	case 2: f.kind = PWB_FAULT_EIO; f.ppm = 20000 + rnd_below(r, 80000);
		break;
	case 3: f.kind = PWB_FAULT_ENOSPC; f.ppm = 20000 + rnd_below(r, 80000);
		break;
	case 4: f.kind = PWB_FAULT_SHORT; f.ppm = 100000 + rnd_below(r, 300000);
		break;
	case 5: f.kind = PWB_FAULT_DELAY; f.ppm = 50000;
		f.delay_ms = 1 + rnd_below(r, 3);
		break;
	default: f.kind = PWB_FAULT_NONE; break;
	}
	if (fault_errors) {
		for (k = 0; k < NR_SLOTS; k++)
			slots[k].err_possible = true;
		atomic_fetch_add(&errors_since_sync, 1);
	}
	rc = pwb_bdi_inject_fault(bdi, f.kind ? &f : NULL);
	if (!rc)
		rc = pwb_bdi_inject_fault(ubdi, f.kind ? &f : NULL);
	if (rc)
		fail(NULL, "pwb_bdi_inject_fault = %d", rc);
	atomic_fetch_add(&op_count[OP_EPOCH], 1);
}

static int open_bdi(const char *img, struct pwb_bdi **b, uint64_t *r)
{
	struct pwb_bdi_config c;

	pwb_bdi_config_init(&c);
	c.nr_wb_ctx = 1 + rnd_below(r, 4);
	c.policy = policies[rnd_below(r, NR_POLICIES)];
	c.cache_bytes = CACHE_PAGES * PS;
	c.max_write_failures = 0;	/* errors are reported once each */
	c.throttle_timeout_ms = 5000;
	c.dirty_expire_ms = 50 + rnd_below(r, 500);
	c.dirty_writeback_ms = 20 + rnd_below(r, 100);
	c.nr_alloc_groups = 1 + rnd_below(r, 2);
#if defined(DATAPATH_MODEL_REUSE_FREED) && HAVE_BUSY_EXTENTS
	/* A negative control: freed blocks are reused at once, so a saved
	 * index may name another file's blocks; the test must say so. */
	c.flags |= PWB_BDI_REUSE_FREED;
#endif
	return pwb_bdi_open(img, &c, b);
}

/* Every slot durable and saved, with no fault in the way. */
static void sync_all(void)
{
	unsigned int i, tries;

	pwb_bdi_inject_fault(bdi, NULL);
	pwb_bdi_inject_fault(ubdi, NULL);
	fault_errors = false;
	fault_kind_name = "none";
	for (i = 0; i < NR_SLOTS && !atomic_load(&failed); i++)
		for (tries = 0; tries < 3; tries++)
			if (!do_fsync(&slots[i], false))
				break;
}

/* Close both bdis and open them again, every file restored from the
 * index (a restart of the application). */
static void restart(uint64_t *r)
{
	unsigned int i;
	int rc;

	sync_all();
	if (atomic_load(&failed))
		return;
	/* pwb_sync() and the bdi close have a cursor of their own: they
	 * report once an error that an fsync or close reported already. */
	for (i = 0; i < 2; i++) {
		struct pwb_bdi *b = i ? ubdi : bdi;

		rc = pwb_sync(b);
		if (rc && atomic_load(&errors_since_sync) &&
		    (rc == -EIO || rc == -ENOSPC))
			rc = pwb_sync(b);
		if (rc) {
			fail(NULL, "pwb_sync = %d (%s) with everything "
			     "fsynced", rc, pwb_strerror(rc));
			return;
		}
	}
	atomic_store(&errors_since_sync, 0);
	rc = pwb_bdi_close(bdi);
	if (!rc)
		rc = pwb_bdi_close(ubdi);
	bdi = ubdi = NULL;
	if (rc) {
		fail(NULL, "pwb_bdi_close = %d (%s)", rc, pwb_strerror(rc));
		return;
	}
	if ((rc = open_bdi(cfg.img, &bdi, r)) ||
	    (rc = open_bdi(cfg.uimg, &ubdi, r))) {
		fail(NULL, "pwb_bdi_open (restart) = %d (%s)", rc,
		     pwb_strerror(rc));
		return;
	}
	released_cookie = 0;
	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &slots[i];
		struct ientry *e = &index_[i];

		slog(s, "restart: restore %zu extents, size %" PRIu64,
		     e->nr_ext, e->size);
		if ((rc = open_inode(s))) {
			fail(s, "pwb_inode_open (restart) = %d", rc);
			return;
		}
		if (!s->user && e->nr_ext &&
		    (rc = pwb_inode_set_extents(s->inode, e->ext,
						e->nr_ext))) {
			fail(s, "pwb_inode_set_extents (restart) = %d (%s): %s",
			     rc, pwb_strerror(rc), pwb_errmsg());
			return;
		}
		if ((rc = pwb_inode_set_size(s->inode, e->size))) {
			fail(s, "pwb_inode_set_size (restart) = %d", rc);
			return;
		}
		e->pending = false;
		e->cookie = 0;
	}
	atomic_fetch_add(&op_count[OP_RESTART], 1);
}

static int create_image(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size)) {
		close(fd);
		return -errno;
	}
	close(fd);
	return 0;
}

/* Open both bdis on fresh images and every slot's first inode. */
static int setup(uint64_t *r)
{
	unsigned int i;
	int rc;

	if ((rc = create_image(cfg.img, (uint64_t)ALLOC_IMAGE_PAGES * PS)) ||
	    (rc = create_image(cfg.uimg, (uint64_t)USER_IMAGE_PAGES * PS))) {
		fprintf(stderr, "cannot create images in %s: %s\n", cfg.dir,
			strerror(-rc));
		return rc;
	}
	if ((rc = open_bdi(cfg.img, &bdi, r)) ||
	    (rc = open_bdi(cfg.uimg, &ubdi, r))) {
		fprintf(stderr, "pwb_bdi_open: %s: %s\n", pwb_strerror(rc),
			pwb_errmsg());
		return rc;
	}
	released_cookie = 0;
	for (i = 0; i < NR_SLOTS; i++) {
		struct slot *s = &slots[i];

		memset(s, 0, offsetof(struct slot, ring));
		s->ring_pos = 0;
		s->idx = i;
		s->user = i >= NR_ALLOC;
		s->ino = 1 + i;
		s->dev_base = s->user ? (uint64_t)(i - NR_ALLOC) * MAXF : 0;
		s->cur = calloc(3, MAXF);
		if (!s->cur)
			return -ENOMEM;
		s->dur = s->cur + MAXF;
		s->zs = s->cur + 2 * MAXF;
		memset(&index_[i], 0, sizeof(index_[i]));
		index_[i].ino = s->ino;
		if ((rc = open_inode(s))) {
			fprintf(stderr, "pwb_inode_open: %s\n",
				pwb_strerror(rc));
			return rc;
		}
	}
	return 0;
}

static void teardown(void)
{
	unsigned int i;

	pwb_bdi_close(bdi);
	pwb_bdi_close(ubdi);
	bdi = ubdi = NULL;
	for (i = 0; i < NR_SLOTS; i++) {
		free(slots[i].cur);
		slots[i].cur = NULL;
		free(slots[i].since);
		slots[i].since = NULL;
		slots[i].nr_since = slots[i].cap_since = 0;
	}
}

/* One seed: epochs until the time is up (or forever in a crash child). */
static int run_seed(void)
{
	uint64_t r = mix64(cfg.seed ^ 0x6d6f64656cull);
	struct worker w[MAX_THREADS];
	double t0 = now_s();
	unsigned int i;

	atomic_store(&failed, 0);
	atomic_store(&stop, 0);
	epoch = 0;
	if (setup(&r))
		return 99;
	while (!atomic_load(&failed) &&
	       (cfg.crash_child || now_s() - t0 < cfg.seconds)) {
		epoch++;
		set_faults(&r);
		for (i = 0; i < cfg.nr_threads; i++) {
			w[i].id = i;
			w[i].rng = mix64(mix64(cfg.seed) ^ ((uint64_t)epoch << 8) ^ i);
			w[i].ops = 30 + rnd_below(&r, 60);
			pthread_create(&w[i].thr, NULL, worker_main, &w[i]);
		}
		for (i = 0; i < cfg.nr_threads; i++)
			pthread_join(w[i].thr, NULL);
		if (!atomic_load(&failed) && rnd_below(&r, 5) == 0)
			restart(&r);
		else if (!atomic_load(&failed) && rnd_below(&r, 4) == 0)
			sync_all();	/* a checkpoint of every file: the
					 * blocks freed so far are released */
	}
	/* The end: a restart from the index, every file read back whole
	 * through the restarted bdi and checked on the device. */
	if (!atomic_load(&failed))
		restart(&r);
	for (i = 0; i < NR_SLOTS && !atomic_load(&failed); i++) {
		slog(&slots[i], "final read after the restart");
		read_check(&slots[i], 0, MAXF, "read after the restart");
		fresh_check(&slots[i]);
	}
	if (bdi) {
		struct pwb_stats st;

		if (!pwb_bdi_stats(bdi, &st))
			printf("seed %" PRIu64 ": the allocator ends with %"
			       PRIu64 " bytes free, %" PRIu64 " reserved"
#if HAVE_BUSY_EXTENTS
			       ", %" PRIu64 " busy"
#endif
			       "\n", cfg.seed, st.free_bytes,
			       st.reserved_bytes
#if HAVE_BUSY_EXTENTS
			       , st.busy_bytes
#endif
			       );
	}
	teardown();
	printf("seed %" PRIu64 ": %u epochs in %.1f s, %s\n", cfg.seed, epoch,
	       now_s() - t0, atomic_load(&failed) ? "FAILED" : "passed");
	return atomic_load(&failed) ? 1 : 0;
}

static void print_totals(double t)
{
	unsigned int i;
	uint64_t total = 0;

	printf("operations:");
	for (i = 0; i < NR_OPS; i++) {
		printf(" %s %llu", op_names[i],
		       (unsigned long long)atomic_load(&op_count[i]));
		total += atomic_load(&op_count[i]);
	}
	printf("\ntotal %" PRIu64 " operations; %llu pages compared; %llu "
	       "fresh-bdi checks; %llu short or failed writes (%llu errors); "
	       "%llu fsync errors; %llu close errors (%llu bytes read as an "
	       "older value than the current one); %llu busy-extent "
	       "releases%s; %.1f s\n", total,
	       (unsigned long long)atomic_load(&pages_compared),
	       (unsigned long long)atomic_load(&fresh_checks),
	       (unsigned long long)atomic_load(&short_writes),
	       (unsigned long long)atomic_load(&write_errors),
	       (unsigned long long)atomic_load(&fsync_errors),
	       (unsigned long long)atomic_load(&close_errors),
	       (unsigned long long)atomic_load(&bytes_settled),
	       (unsigned long long)atomic_load(&busy_releases),
	       HAVE_BUSY_EXTENTS ? "" : " (no busy-extent API in pwb.h)", t);
}

/* ---------------------------------------------------------------------- */
/* The SIGKILL variant                                                     */

struct crash_log {
	struct logrec *r;
	size_t n, cap;
};

static void drain(int fd, struct crash_log *l, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double until = now_s() + timeout_ms / 1000.0;

	for (;;) {
		int left = (int)((until - now_s()) * 1000);
		ssize_t n;

		if (timeout_ms >= 0 && left <= 0)
			return;
		if (poll(&p, 1, timeout_ms < 0 ? -1 : left) <= 0)
			continue;
		if (l->n + 256 > l->cap) {
			l->cap = l->cap ? 2 * l->cap : 65536;
			l->r = realloc(l->r, l->cap * sizeof(*l->r));
		}
		n = read(fd, l->r + l->n, 256 * sizeof(*l->r));
		if (n <= 0)
			return;
		/* Records are written whole (smaller than PIPE_BUF). */
		l->n += n / sizeof(*l->r);
	}
}

struct crash_ctx {
	struct crash_log *log;
	uint64_t seq[NR_SLOTS];
};

/* A byte the device may hold: one a change logged after the save put
 * there (a write's byte, or a zero of a truncate or discard). */
static bool crash_accept(unsigned int slot, uint64_t off, uint8_t got,
			 void *arg)
{
	struct crash_ctx *c = arg;
	size_t i;

	for (i = 0; i < c->log->n; i++) {
		struct logrec *r = &c->log->r[i];

		if (r->slot != slot || r->seq <= c->seq[slot] ||
		    off < r->off || off - r->off >= r->len)
			continue;
		if (r->kind == LOG_ZERO ? got == 0 : got == gen(r->dseed, off))
			return true;
	}
	return false;
}

static int load_index(unsigned int i, struct ientry *e, uint8_t **dur)
{
	char path[8300];
	uint64_t hdr[4];
	int fd, rc = 0;

	*dur = NULL;
	memset(e, 0, sizeof(*e));
	e->ino = 1 + i;
	snprintf(path, sizeof(path), "%s/slot%u", cfg.idxdir, i);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (read(fd, hdr, sizeof(hdr)) != sizeof(hdr) || hdr[3] > MAX_EXT ||
	    hdr[1] > MAXF) {
		close(fd);
		return -EINVAL;
	}
	e->ino = hdr[0];
	e->size = hdr[1];
	e->seq = hdr[2];
	e->nr_ext = hdr[3];
	*dur = calloc(1, e->size + 1);
	if (read(fd, e->ext, e->nr_ext * sizeof(e->ext[0])) !=
		    (ssize_t)(e->nr_ext * sizeof(e->ext[0])) ||
	    read(fd, *dur, e->size) != (ssize_t)e->size)
		rc = -EINVAL;
	close(fd);
	return rc;
}

static int crash_round(unsigned int round, uint64_t *r)
{
	struct crash_log log = { 0 };
	struct crash_ctx ctx = { .log = &log };
	struct pwb_bdi *b = NULL, *ub = NULL;
	int pfd[2], status, rc = 0;
	unsigned int i, kill_ms = 150 + rnd_below(r, 1200);
	uint64_t pages = 0;
	pid_t pid;
	char cmd[8400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cfg.idxdir);
	if (system(cmd) || mkdir(cfg.idxdir, 0755)) {
		perror(cfg.idxdir);
		return 99;
	}
	cfg.seed = rnd(r);
	if (pipe(pfd))
		return 99;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 99;
	if (pid == 0) {
		/* A fresh program: libpwb must not be used across fork(). */
		char seed[32], thr[16];

		close(pfd[0]);
		if (dup2(pfd[1], 3) < 0)
			_exit(98);
		snprintf(seed, sizeof(seed), "%" PRIu64, cfg.seed);
		snprintf(thr, sizeof(thr), "%u", cfg.nr_threads);
		execl("/proc/self/exe", prog, "--child", seed, thr, cfg.img,
		      cfg.uimg, cfg.idxdir, (char *)NULL);
		_exit(97);
	}
	close(pfd[1]);
	drain(pfd[0], &log, kill_ms);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	drain(pfd[0], &log, -1);
	close(pfd[0]);
	if (!WIFSIGNALED(status)) {
		fprintf(stderr, "crash round %u (seed %" PRIu64 "): the child "
			"exited with %d before the kill\n", round, cfg.seed,
			WEXITSTATUS(status));
		free(log.r);
		return 1;
	}
	/* Restore every slot from its index file through a fresh bdi. */
	if ((rc = open_fresh(cfg.img, &b)) || (rc = open_fresh(cfg.uimg, &ub))) {
		fprintf(stderr, "fresh pwb_bdi_open: %s\n", pwb_strerror(rc));
		pwb_bdi_close(b);
		free(log.r);
		return 1;
	}
	for (i = 0; i < NR_SLOTS; i++) {
		struct ientry e;
		uint8_t *dur;

		slots[i].dev_base = i >= NR_ALLOC ?
			(uint64_t)(i - NR_ALLOC) * MAXF : 0;
		if (load_index(i, &e, &dur)) {
			fprintf(stderr, "slot %u: bad index file\n", i);
			rc = 1;
			break;
		}
		ctx.seq[i] = e.seq;
		if (e.size && check_on(i >= NR_ALLOC ? ub : b, i,
				       i >= NR_ALLOC, &e, dur, crash_accept,
				       &ctx, NULL)) {
			fprintf(stderr, "  crash round %u, child seed %" PRIu64
				", killed after %u ms, slot %u\n", round,
				cfg.seed, kill_ms, i);
			rc = 1;
		}
		pages += (e.size + PS - 1) / PS;
		free(dur);
		if (rc)
			break;
	}
	pwb_bdi_close(b);
	pwb_bdi_close(ub);
	printf("crash round %u: child seed %" PRIu64 " killed after %u ms, "
	       "%zu changes logged, %" PRIu64 " pages compared: %s\n", round,
	       cfg.seed, kill_ms, log.n, pages, rc ? "FAILED" : "ok");
	free(log.r);
	return rc;
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *d = getenv("PWB_TEST_DIR"), *e;
	uint64_t seeds[8], r;
	unsigned int nr_seeds = 0, i, crash_rounds = 0;
	bool one_seed = false;
	double t0 = now_s();
	int rc = 0;

	cfg.seconds = 0.7;
	cfg.nr_threads = 3;
	cfg.log_fd = -1;
	snprintf(cfg.dir, sizeof(cfg.dir), "%s", d && *d ? d : "/var/tmp");
	if ((e = getenv("PWB_MODEL_SECONDS")))
		cfg.seconds = atof(e);
	if ((e = getenv("PWB_MODEL_SEED"))) {
		seeds[0] = strtoull(e, NULL, 0);
		one_seed = true;
	}
	if ((e = getenv("PWB_MODEL_CRASH_ROUNDS")))
		crash_rounds = atoi(e);
	for (i = 1; i < (unsigned int)argc && strcmp(argv[1], "--child"); i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < (unsigned)argc) {
			seeds[0] = strtoull(argv[++i], NULL, 0);
			one_seed = true;
		} else if (!strcmp(argv[i], "--seconds") && i + 1 < (unsigned)argc) {
			cfg.seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < (unsigned)argc) {
			cfg.nr_threads = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--crash") && i + 1 < (unsigned)argc) {
			crash_rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--verbose")) {
			cfg.verbose = true;
		} else {
			fprintf(stderr, "usage: %s [--seed N] [--seconds S] "
				"[--threads N] [--crash ROUNDS] [--verbose]\n",
				argv[0]);
			return 99;
		}
	}
	if (cfg.nr_threads < 1 || cfg.nr_threads > MAX_THREADS)
		cfg.nr_threads = 3;
	setvbuf(stdout, NULL, _IOLBF, 0);
	prog = argv[0];
	if (argc == 7 && !strcmp(argv[1], "--child")) {
		/* The crash variant's child: run until killed. */
		cfg.seed = strtoull(argv[2], NULL, 0);
		cfg.nr_threads = atoi(argv[3]);
		snprintf(cfg.img, sizeof(cfg.img), "%s", argv[4]);
		snprintf(cfg.uimg, sizeof(cfg.uimg), "%s", argv[5]);
		snprintf(cfg.idxdir, sizeof(cfg.idxdir), "%s", argv[6]);
		cfg.crash_child = true;
		cfg.log_fd = 3;
		signal(SIGPIPE, SIG_IGN);
		run_seed();
		return atomic_load(&failed) ? 1 : 3;
	}
	if (tu_odirect_refused(cfg.dir))
		return 77;
	snprintf(cfg.img, sizeof(cfg.img), "%s/pwb-model-%d.img", cfg.dir,
		 (int)getpid());
	snprintf(cfg.uimg, sizeof(cfg.uimg), "%s/pwb-model-%d-user.img",
		 cfg.dir, (int)getpid());
	snprintf(cfg.idxdir, sizeof(cfg.idxdir), "%s/pwb-model-%d.index",
		 cfg.dir, (int)getpid());
	printf("datapath-model: %u allocator + %u user-map files of up to %u "
	       "pages, %u threads, cache %u pages, images %u + %u pages, "
	       "busy-extent API %s\n", NR_ALLOC, NR_USER, MAXF_PAGES,
	       cfg.nr_threads, CACHE_PAGES, ALLOC_IMAGE_PAGES,
	       USER_IMAGE_PAGES, HAVE_BUSY_EXTENTS ? "used" : "absent");
	if (crash_rounds) {
		r = one_seed ? seeds[0] : (uint64_t)time(NULL) ^ getpid();
		printf("crash variant: %u rounds, seed %" PRIu64
		       " (PWB_MODEL_SEED=%" PRIu64 " to repeat)\n",
		       crash_rounds, r, r);
		for (i = 0; i < crash_rounds && !rc; i++)
			rc = crash_round(i, &r);
		goto out;
	}
	if (!one_seed) {
		seeds[nr_seeds++] = 1;
		seeds[nr_seeds++] = 2;
		seeds[nr_seeds++] = 3;
		seeds[nr_seeds++] = (uint64_t)time(NULL) ^ ((uint64_t)getpid()
							    << 32);
		printf("seeds 1 2 3 and a random one, %" PRIu64
		       " (PWB_MODEL_SEED=N to repeat one), %.1f s each\n",
		       seeds[3], cfg.seconds);
	} else {
		nr_seeds = 1;
	}
	for (i = 0; i < nr_seeds && !rc; i++) {
		cfg.seed = seeds[i];
		rc = run_seed();
	}
out:
	unlink(cfg.img);
	unlink(cfg.uimg);
	{
		char cmd[8400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cfg.idxdir);
		if (system(cmd))
			rc = rc ? rc : 99;
	}
	if (!crash_rounds)
		print_totals(now_s() - t0);
	else
		printf("crash variant: %.1f s\n", now_s() - t0);
	return rc;
}
