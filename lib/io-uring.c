// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io-uring.c - the asynchronous backend: one io_uring per writeback context,
 * and a pool of read rings per bdi for the page cache (see "Reads" below)
 *
 * Each context owns a ring of io_depth entries, created in ctx_init and used
 * only by the context's flusher thread afterwards, so the ring needs no lock.
 * submit() queues one IORING_OP_WRITEV for a request and returns; while
 * io_depth requests are in flight it first reaps at least one completion.
 * wait() reaps until nothing is in flight. Completions are therefore always
 * handled on the flusher, which ends each request (pwb__io_end_at(), with
 * one clock read for all the completions it reaps at once).
 *
 * A short completion is continued from where the device stopped (a new SQE
 * for the rest), -EINTR and -EAGAIN are retried, any other error ends the
 * request with it. A request is larger than the kernel's UIO_MAXIOV only
 * when page_size is small and max_io_bytes large; it then leaves as several
 * SQEs one after another, exactly like a short write.
 *
 * Syscalls: SQEs are handed to the kernel in batches of about a quarter of
 * io_depth (at most 16), in one io_uring_enter that also waits for and
 * reaps completions when the queue is full. Each enter is one doorbell for
 * the device (a VM exit on virtio), so batching is worth having; but the
 * first SQE of an idle queue is entered at once, so the device never waits
 * for a batch to fill, and every path that waits for I/O (wait(), a full
 * queue, the end of a pass) enters whatever is prepared.
 *
 * The device file is registered with the ring (a "fixed file"): the kernel
 * then skips taking and dropping a file reference per request, which is an
 * atomic operation on a shared cache line in a multi-threaded process.
 * Registered buffers do not fit: the application owns the page memory and
 * hands out arbitrary pages, which would have to be registered per request.
 *
 * Built without liburing (configure --without-liburing, or liburing not
 * found), the backend keeps its name so that a configuration naming it gets
 * a clear -EOPNOTSUPP from pwb_bdi_open() instead of "unknown backend".
 */
#include "base.h"
#include "io.h"
#include "wb_ctx.h"
#include "bdi.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBURING
#include <liburing.h>

/* One request in flight: where it stands. Indexed by the SQE's user_data. */
struct uring_req {
	struct pwb__io *io;	/* NULL when the slot is free */
	struct iovec *iov;	/* first entry not yet written */
	unsigned int cnt;	/* entries not yet written */
	unsigned int sub_cnt;	/* entries in the SQE in flight */
	size_t cut;		/* bytes cut off iov[sub_cnt - 1] for it */
	uint64_t off;		/* device offset of iov[0] */
	uint64_t rem;		/* bytes not yet written */
	uint64_t limit;		/* bytes the next SQE may carry, 0 = all */
	unsigned int next_free;	/* free-list link */
};

struct uring_state {
	struct io_uring ring;
	struct pwb__wb_ctx *wb;
	int fd;			/* SQE fd: 0 (fixed) or the device fd */
	unsigned int sqe_flags;	/* IOSQE_FIXED_FILE when registered */
	unsigned int depth;
	unsigned int inflight;	/* slots in use */
	unsigned int queued;	/* SQEs prepared since the last enter */
	unsigned int batch;	/* enter when this many are queued */
	unsigned int free_head;	/* first free slot, depth = none */
	struct uring_req reqs[];	/* depth slots */
};

/*
 * liburing maps a ring's memory with its own system calls, which
 * ThreadSanitizer does not see: a ring set up where an exited one was
 * mapped looks to it like the old ring's memory, and the first writes of
 * its SQEs race with the last ones of the old ring, made under a lock
 * that no longer exists. The kernel orders them (unmap before map): say
 * so, with a release after each exit and an acquire after each set-up.
 */
static char ring_memory_token;

static void ring_exit(struct io_uring *ring)
{
	io_uring_queue_exit(ring);
	PWB__TSAN_RELEASE(&ring_memory_token);
}

static void ring_mapped(void)
{
	PWB__TSAN_ACQUIRE(&ring_memory_token);
}

static void finish(struct uring_state *s, unsigned int slot, int err,
		   uint64_t now);

/*
 * Prepare the next SQE of @r: at most UIO_MAXIOV entries, under atomic
 * writes the next naturally aligned RWF_ATOMIC piece, and for an injected
 * short write at most r->limit bytes (the last entry is cut in place and
 * restored when the completion arrives). There is always an SQE: the ring
 * has depth entries and at most depth requests are in flight. A request
 * that fails here ends at @now (cfg.clock).
 */
static void prep_sqe(struct uring_state *s, unsigned int slot, uint64_t now)
{
	struct uring_req *r = &s->reqs[slot];
	unsigned int n = PWB__MIN(r->cnt, (unsigned int)IOV_MAX);
	struct io_uring_sqe *sqe;
	uint64_t wlen;
	int flags, err;

	err = pwb__io_next_write(s->wb->bdi, r->off, r->rem, &wlen, &flags);
	if (err) {
		finish(s, slot, err, now);
		return;
	}
	sqe = io_uring_get_sqe(&s->ring);

	/* Cannot happen (see above); if it did, make room and go on. */
	while (caa_unlikely(!sqe)) {
		io_uring_submit(&s->ring);
		sqe = io_uring_get_sqe(&s->ring);
	}

	r->cut = 0;
	if (r->limit) {
		wlen = r->limit;
		flags = 0;	/* torn on purpose: not atomic */
		r->limit = 0;	/* only the first attempt is short */
	}
	if (wlen < r->rem)
		n = pwb__iov_cut(r->iov, n, wlen, &r->cut);
	r->sub_cnt = n;
	io_uring_prep_writev(sqe, s->fd, r->iov, n, r->off);
	sqe->rw_flags = flags;
	io_uring_sqe_set_flags(sqe, s->sqe_flags);
	io_uring_sqe_set_data64(sqe, slot);
	s->queued++;
}

static void finish(struct uring_state *s, unsigned int slot, int err,
		   uint64_t now)
{
	struct uring_req *r = &s->reqs[slot];
	struct pwb__io *io = r->io;

	r->io = NULL;
	r->next_free = s->free_head;
	s->free_head = slot;
	s->inflight--;
	pwb__io_end_at(io, err, now);
}

/* Handle the completion of one SQE of request @slot with result @res,
 * reaped at @now (cfg.clock). */
static void complete_one(struct uring_state *s, unsigned int slot, int res,
			 uint64_t now)
{
	struct uring_req *r = &s->reqs[slot];

	if (r->cut) {
		r->iov[r->sub_cnt - 1].iov_len += r->cut;
		r->cut = 0;
	}
	if (res == -EINTR || res == -EAGAIN) {
		prep_sqe(s, slot, now);
		return;
	}
	if (res < 0) {
		finish(s, slot, res, now);
		return;
	}
	if (res == 0) {
		/* No progress and no error: out of space, as psync says. */
		finish(s, slot, -ENOSPC, now);
		return;
	}
	r->off += (uint64_t)res;
	r->rem -= (uint64_t)res;
	r->iov = pwb__iov_advance(r->iov, &r->cnt, (size_t)res);
	if (r->cnt)
		prep_sqe(s, slot, now);	/* short: continue with the rest */
	else
		finish(s, slot, 0, now);
}

/*
 * Handle every completion that has arrived; return how many. One clock
 * read for them all: each was done by the time the first is looked at, and
 * the time spent ending the first ones is the engine's, not the device's.
 */
static unsigned int reap(struct uring_state *s)
{
	struct io_uring_cqe *cqe;
	unsigned int head, seen = 0;
	uint64_t now = 0;

	io_uring_for_each_cqe(&s->ring, head, cqe) {
		if (!seen)
			now = pwb__now(s->wb->bdi);
		complete_one(s, (unsigned int)io_uring_cqe_get_data64(cqe),
			     cqe->res, now);
		seen++;
	}
	io_uring_cq_advance(&s->ring, seen);
	return seen;
}

/*
 * Give the kernel the prepared SQEs and, with @wait_nr, wait for that many
 * completions; then reap. io_uring_enter only fails here for transient
 * reasons (a signal, a full completion queue, a failed allocation): those
 * are retried, after reaping, which is what frees the completion queue.
 */
static void enter(struct uring_state *s, unsigned int wait_nr)
{
	for (;;) {
		int ret = io_uring_submit_and_wait(&s->ring, wait_nr);

		/* On a partial submission liburing resubmits the rest
		 * next time: the kernel's SQ head tells it what is left. */
		if (ret >= 0) {
			s->queued = 0;
			break;
		}
		if (!reap(s) && ret != -EINTR) {
			struct timespec ts = { 0, 1000000 };	/* 1 ms */

			nanosleep(&ts, NULL);
		}
	}
	reap(s);
}

static int uring_submit(void *state, struct pwb__io *io)
{
	struct uring_state *s = state;
	uint64_t short_len;
	struct uring_req *r;
	unsigned int slot;
	int err = 0;

	while (s->inflight >= s->depth)
		enter(s, 1);

	/* Before the fault check: an injected delay is the device's. */
	io->submitted_at = pwb__now(s->wb->bdi);
	uatomic_inc(&io->wb->stats.io_submitted);
	if (pwb__io_fault_check(io, &err, &short_len) == PWB__FAULT_FAIL) {
		pwb__io_end(io, err);
		return 0;
	}

	slot = s->free_head;
	r = &s->reqs[slot];
	s->free_head = r->next_free;
	s->inflight++;
	r->io = io;
	r->iov = io->iov;
	r->cnt = io->iovcnt;
	r->off = io->dev_off;
	r->rem = io->nr << s->wb->bdi->page_shift;
	r->limit = short_len;
	prep_sqe(s, slot, io->submitted_at);
	/*
	 * Enter now if the kernel has nothing of ours (the device would sit
	 * idle) or a batch is ready. A full queue enters on the next submit
	 * or wait, which submits and waits in one syscall.
	 */
	if (s->inflight < s->depth &&
	    (s->queued == s->inflight || s->queued >= s->batch))
		enter(s, 0);
	return 0;
}

static int uring_wait(void *state)
{
	struct uring_state *s = state;

	while (s->inflight)
		enter(s, 1);
	return 0;
}

static int uring_ctx_init(struct pwb__wb_ctx *wb, void **state)
{
	struct pwb_bdi *bdi = wb->bdi;
	unsigned int depth = bdi->cfg.io_depth, i;
	struct io_uring_params p;
	struct uring_state *s;
	int ret;

	s = calloc(1, sizeof(*s) + depth * sizeof(s->reqs[0]));
	if (!s)
		return pwb__err(-ENOMEM, "out of memory");
	s->wb = wb;
	s->depth = depth;
	s->batch = PWB__MAX(1u, PWB__MIN(depth / 4, 16u));
	for (i = 0; i < depth; i++)
		s->reqs[i].next_free = i + 1;
	s->free_head = 0;

	/* The flusher runs completions itself; cooperative task running
	 * avoids interrupting it with inter-processor signals (5.19+). */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_COOP_TASKRUN;
	ret = io_uring_queue_init_params(depth, &s->ring, &p);
	if (ret == -EINVAL) {
		memset(&p, 0, sizeof(p));
		ret = io_uring_queue_init_params(depth, &s->ring, &p);
	}
	if (ret) {
		free(s);
		return pwb__err(ret, "io_uring backend: io_uring_queue_init "
				     "(depth %u) failed: %s; io_uring is "
				     "missing or refused here (old kernel, "
				     "kernel.io_uring_disabled, seccomp or "
				     "RLIMIT_MEMLOCK); use the \"psync\" "
				     "backend",
				depth, strerror(-ret));
	}
	ring_mapped();
	if (!io_uring_register_files(&s->ring, &bdi->fd, 1)) {
		s->fd = 0;
		s->sqe_flags = IOSQE_FIXED_FILE;
	} else {
		s->fd = bdi->fd;	/* works the same, a little slower */
	}
	*state = s;
	return 0;
}

static void uring_ctx_fini(void *state)
{
	struct uring_state *s = state;

	if (!s)
		return;
	/*
	 * The flusher drains before it goes idle, so nothing should be in
	 * flight; if something is, let it land before the memory goes.
	 */
	uring_wait(s);
	ring_exit(&s->ring);
	free(s);
}

/* ---------------------------------------------------------------------- */
/* Reads of library-owned pages: a pool of rings per bdi                  */

/*
 * Reads are issued by application threads (pwb_read(), readahead,
 * pwb_fadvise()), not by the flushers, so they have rings of their own: a
 * pool per bdi (RD_RINGS, each set up on first use), each ring with its
 * own lock. A submitter takes a ring (trylock, its thread's own ring
 * first, then the others; only when every ring is busy does it wait for
 * one), queues its reads, enters them and gives the ring back. A
 * thread that needs a page under read takes the lock of the ring the
 * page's read is on and reaps it until that read has ended (read_wait):
 * whoever waits reaps, so a completion is never left for a thread that is
 * not coming, and readahead that nobody waits for is reaped by the next
 * user of its ring (or by the close that drops its pages). Hits in the
 * cache never come here.
 *
 * A PWB_RW_NOWAIT reader's readahead must not sleep (the nowait forms in
 * io.h): it takes a ring only with a trylock, and a read it could queue
 * only by waiting for room on the ring or in a read-delay fault rule is
 * refused, for its submitter to end unread. read_poll is that reader's
 * reap: only if the ring's lock is free.
 *
 * Rings are set up on first use. No IORING_SETUP_COOP_TASKRUN: the
 * kernel posts a read's completion from its submitter's task work, and a
 * waiter on another thread must not wait until the submitter happens to
 * enter the kernel.
 */
#define RD_DEPTH 64u		/* reads in flight per ring */
#define RD_RINGS 32u		/* rings per bdi, each set up when used */

struct pwb__rd_ring {
	pthread_mutex_t lock;		/* everything below */
	struct io_uring ring;
	struct pwb_bdi *bdi;		/* read-only */
	bool ready;			/* lock: ring set up */
	int setup_err;			/* lock: set-up failed: psync */
	unsigned int inflight;		/* lock: reads queued or running */
	unsigned int queued;		/* lock: SQEs not yet entered */
	int fd;				/* lock: SQE fd (0: fixed file) */
	unsigned int sqe_flags;		/* lock */
} __attribute__((aligned(64)));

struct rd_pool {
	unsigned int nr;		/* read-only */
	struct pwb__rd_ring rings[];
};

static int rd_setup(struct pwb__rd_ring *r)
{
	int ret;

	if (r->setup_err)
		return r->setup_err;
	ret = io_uring_queue_init(RD_DEPTH, &r->ring, 0);
	if (ret) {
		r->setup_err = ret;
		return ret;
	}
	ring_mapped();
	if (!io_uring_register_files(&r->ring, &r->bdi->fd, 1)) {
		r->fd = 0;
		r->sqe_flags = IOSQE_FIXED_FILE;
	} else {
		r->fd = r->bdi->fd;
	}
	r->ready = true;
	return 0;
}

static void rd_prep(struct pwb__rd_ring *r, struct pwb__rd *rd)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	/* inflight <= RD_DEPTH, the ring's size: there is always one. */
	while (caa_unlikely(!sqe)) {
		io_uring_submit(&r->ring);
		sqe = io_uring_get_sqe(&r->ring);
	}
	io_uring_prep_readv(sqe, r->fd, rd->iov,
			    PWB__MIN(rd->iovcnt, (unsigned int)IOV_MAX),
			    rd->dev_off);
	io_uring_sqe_set_flags(sqe, r->sqe_flags);
	io_uring_sqe_set_data(sqe, rd);
	r->queued++;
}

/* One completion of @rd: continue a short read, end a finished one. */
static void rd_complete(struct pwb__rd_ring *r, struct pwb__rd *rd, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		rd_prep(r, rd);
		return;
	}
	if (res > 0) {
		rd->dev_off += (uint64_t)res;
		rd->iov = pwb__iov_advance(rd->iov, &rd->iovcnt, (size_t)res);
		if (rd->iovcnt) {
			rd_prep(r, rd);
			return;
		}
	} else if (res == 0) {
		/* Past the end of the device file: zeros. */
		for (unsigned int i = 0; i < rd->iovcnt; i++)
			memset(rd->iov[i].iov_base, 0, rd->iov[i].iov_len);
	}
	r->inflight--;
	rd->end(rd, PWB__MIN(res, 0));
}

/* Enter what is queued, then handle every completion that arrived. */
static void rd_reap_locked(struct pwb__rd_ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned int head, seen;

	pwb__lockdep_assert_held(&r->lock);
	do {
		if (r->queued) {
			int ret = io_uring_submit(&r->ring);

			if (ret >= 0)
				r->queued = 0;
		}
		seen = 0;
		io_uring_for_each_cqe(&r->ring, head, cqe) {
			rd_complete(r, io_uring_cqe_get_data(cqe), cqe->res);
			seen++;
		}
		io_uring_cq_advance(&r->ring, seen);
	} while (seen && r->queued);
}

/* Wait for at least one completion of @r, then reap. */
static void rd_wait_one_locked(struct pwb__rd_ring *r)
{
	struct io_uring_cqe *cqe;
	int ret = io_uring_submit_and_wait(&r->ring, 1);

	if (ret >= 0)
		r->queued = 0;
	else if (ret != -EINTR && io_uring_peek_cqe(&r->ring, &cqe) != 0) {
		struct timespec ts = { 0, 1000000 };	/* 1 ms: transient */

		nanosleep(&ts, NULL);
	}
	rd_reap_locked(r);
}

/*
 * The ring a thread tries first: its own while there are no more reading
 * threads than rings, so that a reader finds its reads, and only its
 * reads, on the ring it waits on. A waiter holds the ring's lock while it
 * sleeps for a completion, and the kernel posts a read's completion from
 * its submitter's task work: readers sharing a ring wait for each other's
 * reads, and a reader that wants to queue its next window waits behind a
 * reader asleep on the ring. Handed out once per thread, in turn, from one
 * count for the process (a thread reading two bdis has the same number in
 * both, and numbers of different threads differ).
 */
static __thread unsigned int rd_pref_plus1;
static unsigned int rd_pref_next;	/* uatomic */

/* @nowait: the locks are only tried (a PWB_RW_NOWAIT reader's readahead,
 * which must not sleep, and a ring's lock may be held by a thread asleep
 * for its completions): NULL when every ring is taken. */
static struct pwb__rd_ring *uring_read_ring_get(void *state, bool nowait)
{
	struct rd_pool *pl = state;
	unsigned int start, i;
	struct pwb__rd_ring *r = NULL;

	if (!rd_pref_plus1)
		rd_pref_plus1 = uatomic_add_return(&rd_pref_next, 1);
	start = rd_pref_plus1 - 1;

	for (i = 0; i < pl->nr && !r; i++) {
		r = &pl->rings[(start + i) % pl->nr];
		if (pthread_mutex_trylock(&r->lock))
			r = NULL;
	}
	if (!r) {
		if (nowait)
			return NULL;
		r = &pl->rings[start % pl->nr];
		pthread_mutex_lock(&r->lock);
	}
	if (!r->ready && rd_setup(r)) {
		pthread_mutex_unlock(&r->lock);
		return NULL;	/* io_uring refused: read synchronously */
	}
	return r;
}

/* @nowait: -EAGAIN (not queued) rather than wait for room on the ring or
 * sleep in a read-delay fault rule. */
static int uring_read_submit(struct pwb__rd_ring *r, struct pwb__rd *rd,
			     bool nowait)
{
	uint64_t len = 0;
	int err;

	pwb__lockdep_assert_held(&r->lock);
	if (nowait && r->inflight >= RD_DEPTH)
		return -EAGAIN;
	for (unsigned int i = 0; i < rd->iovcnt; i++)
		len += rd->iov[i].iov_len;
	if (nowait) {
		err = pwb__fault_check_read_nowait(r->bdi, rd->dev_off, len);
		if (err == -EAGAIN)
			return err;
	} else {
		err = pwb__fault_check_read(r->bdi, rd->dev_off, len);
	}
	if (err) {
		rd->end(rd, err);
		return 0;
	}
	while (r->inflight >= RD_DEPTH)
		rd_wait_one_locked(r);
	r->inflight++;
	rd_prep(r, rd);
	return 0;
}

static void uring_read_ring_put(struct pwb__rd_ring *r)
{
	rd_reap_locked(r);
	pthread_mutex_unlock(&r->lock);
}

static void uring_read_wait(struct pwb__rd_ring *r, bool (*done)(void *arg),
			    void *arg)
{
	pthread_mutex_lock(&r->lock);
	rd_reap_locked(r);
	/* done() turns true in an end() called under this lock: checked
	 * under it, a read not yet ended is still on the ring. */
	while (!done(arg) && r->inflight)
		rd_wait_one_locked(r);
	pthread_mutex_unlock(&r->lock);
}

static bool uring_read_poll(struct pwb__rd_ring *r)
{
	if (pthread_mutex_trylock(&r->lock))
		return false;
	/* The reads of a page under read on @r were entered: set up. */
	if (r->ready)
		rd_reap_locked(r);
	pthread_mutex_unlock(&r->lock);
	return true;
}

static void uring_read_reap(void *state)
{
	struct rd_pool *pl = state;

	for (unsigned int i = 0; i < pl->nr; i++) {
		struct pwb__rd_ring *r = &pl->rings[i];

		if (pthread_mutex_trylock(&r->lock))
			continue;
		if (r->ready)
			rd_reap_locked(r);
		pthread_mutex_unlock(&r->lock);
	}
}

static int uring_read_init(struct pwb_bdi *bdi, void **state)
{
	/* As many as reading threads, not CPUs: readers outnumbering the
	 * CPUs still each wait for their own reads (the ring get above).
	 * A ring not used costs its lock only. */
	unsigned int nr = RD_RINGS;
	struct rd_pool *pl = calloc(1, sizeof(*pl) + nr * sizeof(pl->rings[0]));

	if (!pl)
		return pwb__err(-ENOMEM, "out of memory");
	pl->nr = nr;
	for (unsigned int i = 0; i < nr; i++) {
		pwb__mutex_init(&pl->rings[i].lock, PWB__LOCK_READ_RING);
		pl->rings[i].bdi = bdi;
	}
	*state = pl;
	return 0;
}

static void uring_read_fini(void *state)
{
	struct rd_pool *pl = state;

	if (!pl)
		return;
	for (unsigned int i = 0; i < pl->nr; i++) {
		struct pwb__rd_ring *r = &pl->rings[i];

		pthread_mutex_lock(&r->lock);
		while (r->ready && r->inflight)
			rd_wait_one_locked(r);
		if (r->ready)
			ring_exit(&r->ring);
		pthread_mutex_unlock(&r->lock);
		pthread_mutex_destroy(&r->lock);
	}
	free(pl);
}

static const struct pwb__io_read_ops uring_read_ops = {
	.read_init = uring_read_init,
	.read_fini = uring_read_fini,
	.read_ring_get = uring_read_ring_get,
	.read_submit = uring_read_submit,
	.read_ring_put = uring_read_ring_put,
	.read_wait = uring_read_wait,
	.read_reap = uring_read_reap,
	.read_poll = uring_read_poll,
};

const struct pwb__io_backend pwb__io_uring = {
	.version = 2,
	.name = "io_uring",
	.ctx_init = uring_ctx_init,
	.ctx_fini = uring_ctx_fini,
	.submit = uring_submit,
	.wait = uring_wait,
	.read = &uring_read_ops,
};

int pwb__io_uring_probe(unsigned int depth)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(depth, &ring, 0);

	if (!ret) {
		ring_mapped();
		ring_exit(&ring);
	}
	return ret;
}

#else /* !HAVE_LIBURING */

int pwb__io_uring_probe(unsigned int depth)
{
	(void)depth;
	return -EOPNOTSUPP;
}

static int uring_ctx_init(struct pwb__wb_ctx *wb, void **state)
{
	return pwb__err(-EOPNOTSUPP, "the io_uring backend is not built in "
				     "(libpwb was configured without "
				     "liburing); use the \"psync\" backend");
}

static int uring_submit(void *state, struct pwb__io *io)
{
	return -EOPNOTSUPP;
}

static int uring_wait(void *state)
{
	return 0;
}

const struct pwb__io_backend pwb__io_uring = {
	.version = 1,
	.name = "io_uring",
	.ctx_init = uring_ctx_init,
	.submit = uring_submit,
	.wait = uring_wait,
};

#endif /* HAVE_LIBURING */
