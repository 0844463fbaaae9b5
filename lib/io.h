/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * io.h - the I/O backend interface, requests, fault injection
 * (io.c, io-*.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_IO_H
#define PWB_IO_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb__wb_ctx;

/* ---------------------------------------------------------------------- */
/* io.c: the I/O backend interface                                        */

/* One write: up to max_io_bytes of contiguous device space. */
struct pwb__io {
	struct pwb_inode *inode;
	struct pwb__wb_ctx *wb;
	uint64_t index;		/* first page */
	uint64_t nr;		/* pages */
	uint64_t dev_off;	/* byte offset on the device */
	unsigned int iovcnt;
	unsigned int cap;	/* room for this many iovecs */
	struct iovec *iov;	/* iovcnt entries, one per page */
	int err;		/* result, set by the backend */
	uint64_t submitted_at;	/* cfg.clock ns the backend started the
				 * write; the backend sets it */
	struct cds_list_head list;	/* backend's own use */
	struct pwb__io *next_free;	/* in wb->io_cache */
};

/*
 * An I/O backend. Valid from version 1: name, ctx_init, ctx_fini, submit,
 * wait; from version 2: read. A backend may complete a request inside submit (psync does) or
 * later; either way it calls pwb__io_end() or pwb__io_end_at() exactly once
 * per request, on the context's flusher thread, from submit() or wait().
 *
 * The backend also times its writes, for PWB_HIST_WRITE_IO: it sets
 * io->submitted_at (cfg.clock) when the write goes to the device, and the
 * completion time is what pwb__io_end() reads or pwb__io_end_at() is given.
 * The clock costs 30-50 ns a read on some machines, a third of what the
 * engine spends on a whole one-page write: a backend that reaps many
 * completions at once reads it once for all of them, as the kernel's
 * block layer caches the time in its plug, and the null backend, whose
 * writes take no time, reads it not at all.
 */
struct pwb__io_backend {
	unsigned int version;
	const char *name;
	/* Prepare per-context state; return 0 or -errno. */
	int (*ctx_init)(struct pwb__wb_ctx *wb, void **state);
	void (*ctx_fini)(void *state);
	/* Start @io; return 0 (it will complete) or -errno (nothing
	 * started, pwb__io_end not called). */
	int (*submit)(void *state, struct pwb__io *io);
	/* Complete every request in flight; return 0 or -errno. */
	int (*wait)(void *state);
	/* Version 2: reads of library-owned pages; NULL: synchronous. */
	const struct pwb__io_read_ops *read;
};

/* ---------------------------------------------------------------------- */
/* Reads of library-owned pages (readahead.c, pcache-read.c)              */

/*
 * One device read: a contiguous device range into page buffers. The
 * caller fills dev_off, iov, iovcnt and end; the backend may change them
 * as the read progresses. end() is called exactly once, with 0 or a
 * negative errno, by the thread that completes the read: the submitter
 * itself (a synchronous backend, or a read that failed to start), or any
 * thread that reaps the ring the read is on, with that ring's lock held.
 * Bytes past the end of the device file read as zeros.
 */
struct pwb__rd {
	uint64_t dev_off;	/* device offset of iov[0] */
	struct iovec *iov;	/* entries not yet read */
	unsigned int iovcnt;
	void (*end)(struct pwb__rd *rd, int err);
};

/* A ring reads are queued on (io_uring), opaque; the backend's. */
struct pwb__rd_ring;

/*
 * The read side of a backend (struct pwb__io_backend, valid from version
 * 2; a NULL read_init means reads are synchronous preadv()s, see
 * pwb__rd_submit()). State is per bdi; read_init runs at bdi open,
 * read_fini at close after the last page was freed (nothing in flight).
 *
 * A submitter takes a ring with read_ring_get (locked for it; NULL: read
 * synchronously), queues reads on it with read_submit, and gives it back
 * with read_ring_put, which hands the reads to the kernel. A thread that
 * waits for a read calls read_wait with the read's ring: it takes the
 * ring's lock and reaps completions (calling their end()) until @done
 * says its read ended, so a completion never waits for a thread that is
 * not there. read_reap reaps every ring without waiting.
 *
 * @nowait (a PWB_RW_NOWAIT reader's readahead): the submitter must not
 * sleep. read_ring_get only tries the rings' locks (a ring's lock may be
 * held by a thread asleep for its completions) and gives NULL when every
 * one is taken; read_submit refuses (-EAGAIN) a read it could queue only
 * by waiting (for room on the ring, or in a read-delay fault rule). The
 * caller then ends the read unread (end() with -EAGAIN), never reads it
 * on its own thread. read_poll reaps @ring if its lock is free, without
 * waiting: a NOWAIT reader's pages under read arrive without any thread
 * asleep on the ring.
 */
struct pwb__io_read_ops {
	int (*read_init)(struct pwb_bdi *bdi, void **state);
	void (*read_fini)(void *state);
	struct pwb__rd_ring *(*read_ring_get)(void *state, bool nowait);
	/* Queue @rd on @ring (held). 0, or -errno (not queued: the caller
	 * reads it synchronously or, -EAGAIN with @nowait, ends it). */
	int (*read_submit)(struct pwb__rd_ring *ring, struct pwb__rd *rd,
			   bool nowait);
	void (*read_ring_put)(struct pwb__rd_ring *ring);
	void (*read_wait)(struct pwb__rd_ring *ring, bool (*done)(void *arg),
			  void *arg);
	void (*read_reap)(void *state);
	/* Reap @ring without waiting, if its lock is free: true if it was
	 * reaped, false if another thread holds it (and so reaps it).
	 * Optional (NULL: a NOWAIT reader waits for another's reap). */
	bool (*read_poll)(struct pwb__rd_ring *ring);
};

/* Read @rd now, on the calling thread (preadv, consulting the fault
 * rules), and call its end(). */
void pwb__rd_sync(struct pwb_bdi *bdi, struct pwb__rd *rd) PWB__INTERNAL;

extern const struct pwb__io_backend pwb__io_psync PWB__INTERNAL;
extern const struct pwb__io_backend pwb__io_null PWB__INTERNAL;
extern const struct pwb__io_backend pwb__io_uring PWB__INTERNAL;
/* 0 if this process may set up an io_uring of @depth entries (the kernel
 * allows io_uring and libpwb has liburing), else the -errno of
 * io_uring_queue_init (-EOPNOTSUPP when built without liburing). Sets no
 * message. */
int pwb__io_uring_probe(unsigned int depth) PWB__INTERNAL;
/* The psync backend's pwritev2() for RWF_ATOMIC pieces: a white-box test
 * points it elsewhere to stand in for a device that offers atomic writes
 * (check_atomic). Set before any writeback starts; never changed by the
 * library. */
extern ssize_t (*pwb__psync_pwritev2)(int fd, const struct iovec *iov,
				      int cnt, off_t off,
				      int flags) PWB__INTERNAL;

/* io-fault.c: the fault-injection layer that every backend consults before
 * a write reaches the device ("wraps the real backend"). */
enum pwb__fault_action {
	PWB__FAULT_PASS = 0,	/* write normally */
	PWB__FAULT_FAIL,	/* don't write; complete with *err */
	PWB__FAULT_SHORT,	/* first attempt writes only *short_len bytes */
};
/* Decide the fate of a write of @len bytes at @dev_off. A delay fault
 * sleeps here and returns PASS. With no rule set this is one RCU load. */
enum pwb__fault_action pwb__fault_check(struct pwb_bdi *bdi, uint64_t dev_off,
					uint64_t len, int *err,
					uint64_t *short_len) PWB__INTERNAL;
/* Free the bdi's fault state (at close). */
void pwb__fault_destroy(struct pwb_bdi *bdi) PWB__INTERNAL;
/* The same for a device read of @len bytes at @dev_off: 0, or the
 * negative errno it is to fail with (a read rule, PWB_FAULT_READ_EIO). */
int pwb__fault_check_read(struct pwb_bdi *bdi, uint64_t dev_off,
			  uint64_t len) PWB__INTERNAL;
/* pwb__fault_check_read() for a submitter that must not sleep (a
 * PWB_RW_NOWAIT reader's readahead): -EAGAIN, with nothing counted (no
 * match, no hit), when a read-delay rule covers the range, which would
 * sleep; else as pwb__fault_check_read(). */
int pwb__fault_check_read_nowait(struct pwb_bdi *bdi, uint64_t dev_off,
				 uint64_t len) PWB__INTERNAL;
struct pwb__fault_state;
/* A request with room for @max_pages iovecs, zeroed but for iov and cap,
 * or NULL. Full-size requests (max_io_pages) and small ones (up to
 * PWB__IO_SMALL_PAGES) come from the context's caches, so a busy context
 * does not go to malloc per write. The caller
 * owns @wb's I/O (see io_cache). */
struct pwb__io *pwb__io_get(struct pwb__wb_ctx *wb, uint64_t max_pages)
	PWB__INTERNAL;
/* A request for at most this many pages (and fewer than max_io_pages) is
 * made this size and kept in the context's small cache. */
#define PWB__IO_SMALL_PAGES 8u
/* Give back a request from pwb__io_get (cached or freed). */
void pwb__io_put(struct pwb__wb_ctx *wb, struct pwb__io *io) PWB__INTERNAL;
/* Free @wb's cached requests (the context is being destroyed). */
void pwb__io_cache_drain(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* How many requests a context of @bdi keeps cached: io_depth + 1 at
 * most, and at most 1 MiB of them (at least one). */
unsigned int pwb__io_cache_max(const struct pwb_bdi *bdi) PWB__INTERNAL;
/* Called by a backend when @io finished with @err (0 or -errno). Clears
 * the writeback tag, re-dirties the pages on error, records the error,
 * updates statistics, calls end_write and gives @io back (pwb__io_put). */
void pwb__io_end(struct pwb__io *io, int err) PWB__INTERNAL;
/* pwb__io_end() for a write that finished at @now (cfg.clock ns, not
 * before io->submitted_at), read by the backend once for a batch of
 * completions; the write I/O histogram records now - submitted_at. */
void pwb__io_end_at(struct pwb__io *io, int err, uint64_t now) PWB__INTERNAL;
/* The same without freeing @io (for requests that never reached a
 * backend, kept on the stack). */
void pwb__io_complete(struct pwb__io *io, int err) PWB__INTERNAL;
/* pwb__fault_check() for @io, asked once per request before its first
 * write, with the answer made usable for O_DIRECT: FAIL gives a non-zero
 * *err; SHORT gives a *short_len that is a positive multiple of the
 * logical block size below the request's length (else it becomes PASS). */
enum pwb__fault_action pwb__io_fault_check(struct pwb__io *io, int *err,
					   uint64_t *short_len) PWB__INTERNAL;
/* Limit the first @cnt entries of @iov to @max bytes for one write: return
 * how many entries to pass; if @max ends inside the last of them, that
 * entry is shortened in place by *@cut bytes, which the caller adds back
 * after the write (0 if nothing was cut). */
/* Advance @iov past @done bytes, shrinking *@cnt; the new first entry. */
struct iovec *pwb__iov_advance(struct iovec *iov, unsigned int *cnt,
			       size_t done) PWB__INTERNAL;
unsigned int pwb__iov_cut(struct iovec *iov, unsigned int cnt, uint64_t max,
			  size_t *cut) PWB__INTERNAL;

#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040	/* Linux 6.11 uapi, absent from older headers */
#endif
/*
 * Atomic writes (PWB_BDI_ATOMIC_WRITES): the bytes the next RWF_ATOMIC
 * write at device offset @off may carry, at most @len: the largest power
 * of two that @off is aligned to, within [@unit_min, @unit_max], and of at
 * most @segs pages (one iovec each; 0: no limit). 0 if not even one page
 * qualifies (@off is not aligned to @page). Pure, for the backends.
 */
uint64_t pwb__atomic_len(uint64_t off, uint64_t len, unsigned int page,
			 unsigned int unit_min, unsigned int unit_max,
			 unsigned int segs) PWB__INTERNAL;
/* The flags and length of the next write of a request: RWF_ATOMIC and
 * pwb__atomic_len() under atomic writes, else 0 and @len. -EINVAL when
 * atomic writes are required and the offset cannot have one. */
int pwb__io_next_write(const struct pwb_bdi *bdi, uint64_t off, uint64_t len,
		       uint64_t *wlen, int *rw_flags) PWB__INTERNAL;

#endif /* PWB_IO_H */
