// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io-uring.c - the asynchronous backend: one io_uring per writeback context
 *
 * Each context owns a ring of io_depth entries, created in ctx_init and used
 * only by the context's flusher thread afterwards, so the ring needs no lock.
 * submit() queues one IORING_OP_WRITEV for a request and returns; while
 * io_depth requests are in flight it first reaps at least one completion.
 * wait() reaps until nothing is in flight. Completions are therefore always
 * handled on the flusher, which calls pwb__io_end() for each request.
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
#include <time.h>

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

static void finish(struct uring_state *s, unsigned int slot, int err);

/*
 * Prepare the next SQE of @r: at most UIO_MAXIOV entries, under atomic
 * writes the next naturally aligned RWF_ATOMIC piece, and for an injected
 * short write at most r->limit bytes (the last entry is cut in place and
 * restored when the completion arrives). There is always an SQE: the ring
 * has depth entries and at most depth requests are in flight.
 */
static void prep_sqe(struct uring_state *s, unsigned int slot)
{
	struct uring_req *r = &s->reqs[slot];
	unsigned int n = PWB__MIN(r->cnt, (unsigned int)IOV_MAX);
	struct io_uring_sqe *sqe;
	uint64_t wlen;
	int flags, err;

	err = pwb__io_next_write(s->wb->bdi, r->off, r->rem, &wlen, &flags);
	if (err) {
		finish(s, slot, err);
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

static void finish(struct uring_state *s, unsigned int slot, int err)
{
	struct uring_req *r = &s->reqs[slot];
	struct pwb__io *io = r->io;

	r->io = NULL;
	r->next_free = s->free_head;
	s->free_head = slot;
	s->inflight--;
	pwb__io_end(io, err);
}

/* Handle the completion of one SQE of request @slot with result @res. */
static void complete_one(struct uring_state *s, unsigned int slot, int res)
{
	struct uring_req *r = &s->reqs[slot];

	if (r->cut) {
		r->iov[r->sub_cnt - 1].iov_len += r->cut;
		r->cut = 0;
	}
	if (res == -EINTR || res == -EAGAIN) {
		prep_sqe(s, slot);
		return;
	}
	if (res < 0) {
		finish(s, slot, res);
		return;
	}
	if (res == 0) {
		/* No progress and no error: out of space, as psync says. */
		finish(s, slot, -ENOSPC);
		return;
	}
	r->off += (uint64_t)res;
	r->rem -= (uint64_t)res;
	r->iov = pwb__iov_advance(r->iov, &r->cnt, (size_t)res);
	if (r->cnt)
		prep_sqe(s, slot);	/* short: continue with the rest */
	else
		finish(s, slot, 0);
}

/* Handle every completion that has arrived; return how many. */
static unsigned int reap(struct uring_state *s)
{
	struct io_uring_cqe *cqe;
	unsigned int head, seen = 0;

	io_uring_for_each_cqe(&s->ring, head, cqe) {
		complete_one(s, (unsigned int)io_uring_cqe_get_data64(cqe),
			     cqe->res);
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
	prep_sqe(s, slot);
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
	io_uring_queue_exit(&s->ring);
	free(s);
}

const struct pwb__io_backend pwb__io_uring = {
	.version = 1,
	.name = "io_uring",
	.ctx_init = uring_ctx_init,
	.ctx_fini = uring_ctx_fini,
	.submit = uring_submit,
	.wait = uring_wait,
};

int pwb__io_uring_probe(unsigned int depth)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(depth, &ring, 0);

	if (!ret)
		io_uring_queue_exit(&ring);
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
