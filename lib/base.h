/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * base.h - what every layer of libpwb uses: compiler and RCU helpers,
 * the lock order and the lock-order checker, error messages, errseq,
 * the clock. pwb-internal.h includes every private header; this one
 * holds the project-wide rules below.
 *
 *
 * Not installed. White-box tests include it and link libpwb-internal.la.
 *
 * Locking: the order is the enum pwb__lock_rank below (one rank per lock,
 * outermost first), and nowhere else; doc/design.md points here. A thread
 * may take a lock only if every lock it holds has a lower rank. Built with
 * --enable-lockdep, lib/lockdep.c checks this on every acquisition.
 *
 * RCU (urcu-bp): bdi->ctxs (the context array) is published with
 * rcu_assign_pointer and read under rcu_read_lock; bdi->inodes is a cds_lfht
 * read under rcu_read_lock. Inodes and context arrays are freed after a grace
 * period (call_rcu). Flusher threads never hold rcu_read_lock across I/O.
 *
 * How an inode moves between the lists of its context (the kernel's picture,
 * oldest inode at the head of each list):
 *
 *   first dirtying          queue_io: expired        writeback pass
 *   mark_dirty ----> b_dirty ------------------> b_io ----------------+
 *                    ^  ^     b_more_io ------->  ^                  |
 *                    |  |     (whole list)        |                  |
 *                    |  +-- redirty_tail: dirtied again during the   |
 *                    |      pass, or a write failed <----------------+
 *                    |   b_more_io <-- chunk used up, pages remain --+
 *                    |   (off every list) <-- clean -----------------+
 *   mark_inode_dirty(TIME) --> b_dirty_time --(dirtytime expiry, sync)--> b_io
 */
#ifndef PWB_BASE_H
#define PWB_BASE_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#define _LGPL_SOURCE 1
#include <urcu-bp.h>
#include <urcu/list.h>
#include <urcu/rculfhash.h>
#include <urcu/uatomic.h>

#include "pwb.h"
#include "pwb-policy.h"

#define PWB__INTERNAL __attribute__((visibility("hidden")))

/*
 * Shared-memory accessors. liburcu 0.13's uatomic_read/uatomic_set and
 * CMM_LOAD_SHARED/CMM_STORE_SHARED are volatile accesses, and its
 * rcu_dereference/rcu_assign_pointer order with barriers; ThreadSanitizer
 * models neither. These are the same operations as C11 atomics (relaxed;
 * acquire/release for RCU publication), the same instructions on x86, and
 * visible to TSan. Read-modify-write stays with uatomic_add/cmpxchg, which
 * are __sync builtins TSan understands.
 */
/*
 * Thread-local variables of the hot paths (dirtying, errors). In a shared
 * library the default model reaches each through a call to
 * __tls_get_addr(); initial-exec is one load from %fs. It takes static TLS
 * room at load time for the library's whole TLS block, initial-exec or
 * not, which a dlopen()ed library (the SQLite extension pulls libpwb in
 * that way) gets from glibc's small surplus. Keep the block small (344
 * bytes, mostly the error message; tests/abi-check.sh fails above 512):
 * anything large goes on the heap behind a thread-local pointer.
 */
#define PWB__TLS_FAST __thread __attribute__((tls_model("initial-exec")))

/* The one spelling of a relaxed load in lib/: pwb__aread(&x), not
 * uatomic_read(&x) (a volatile access TSan does not model); of a relaxed
 * store, pwb__aset(&x, v). */
#define pwb__aread(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define pwb__aset(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define PWB__RCU_DEREF(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define PWB__RCU_ASSIGN(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)

/*
 * The grace period between call_rcu() and its callback orders the
 * callback after every earlier access; liburcu 0.13 does not tell TSan, so
 * we do, at the two ends of that edge.
 */
/* gcc says __SANITIZE_THREAD__, clang __has_feature(thread_sanitizer). */
#if defined(__SANITIZE_THREAD__)
#define PWB__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PWB__TSAN 1
#endif
#endif

#if defined(PWB__TSAN)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PWB__TSAN_RELEASE(a) __tsan_release(a)
#define PWB__TSAN_ACQUIRE(a) __tsan_acquire(a)
#else
#define PWB__TSAN_RELEASE(a) ((void)(a))
#define PWB__TSAN_ACQUIRE(a) ((void)(a))
#endif

/*
 * Likewise for synchronize_rcu(): every read-side critical section that
 * began before it ends before it returns. Readers release a token at
 * rcu_read_unlock, the updater acquires it after the grace period.
 */
extern char pwb__rcu_tsan_token PWB__INTERNAL;

static inline void pwb__rcu_read_unlock(void)
{
	PWB__TSAN_RELEASE(&pwb__rcu_tsan_token);
	rcu_read_unlock();
}

/* call_rcu(), with the first call of the process made with every signal
 * blocked, so that liburcu's worker thread inherits that mask (wb_ctx.c). */
void pwb__call_rcu(struct rcu_head *head,
		   void (*fn)(struct rcu_head *)) PWB__INTERNAL;

static inline void pwb__synchronize_rcu(void)
{
	synchronize_rcu();
	PWB__TSAN_ACQUIRE(&pwb__rcu_tsan_token);
}

/* The same edge at the start of a call_rcu() callback: every read-side
 * section that could still see the object ended before it runs. */
static inline void pwb__rcu_callback_begin(void *obj)
{
	PWB__TSAN_ACQUIRE(obj);
	PWB__TSAN_ACQUIRE(&pwb__rcu_tsan_token);
}

#define PWB__MIN(a, b) ((a) < (b) ? (a) : (b))
#define PWB__MAX(a, b) ((a) > (b) ? (a) : (b))
#define PWB__NSEC_PER_MSEC 1000000ull
#define PWB__NSEC_PER_SEC 1000000000ull

/* ---------------------------------------------------------------------- */
/* Locking: the lock order, and the lock-order checker (lockdep.c)        */

/*
 * Every mutex of lib/, in the order a thread may take them: a thread
 * holding a lock of rank r may only take locks of rank > r. Two locks of
 * one rank nest only where pwb__mutex_lock_nested() says so. What each
 * lock protects is on the fields it guards ("list_lock:", "lock:", ...).
 *
 * The nestings that exist (everything else is taken alone):
 *
 *   reshard_lock -> list_lock, inode->lock, work_lock, flusher->lock,
 *                   park_lock, completion->lock  (a re-shard parks the
 *                   flushers, moves inodes, retires contexts; the tuner
 *                   decides under it; a sync's last try runs under it)
 *   flush_lock   -> inode->lock    (a failed fdatasync marks the inodes
 *                                   it was to cover)
 *   route_lock   -> list_lock, inode->lock  (routing a page of a region
 *                                   inode: the holders' maps one at a
 *                                   time, then queueing a slice; close
 *                                   freezing the slices; region.c)
 *   list_lock    -> list_lock      (a re-shard moving an inode between
 *                                   two contexts: lower index first,
 *                                   the second with _nested)
 *   list_lock    -> inode->lock    (queueing, claiming, requeueing)
 *   list_lock    -> work_lock      (a pass under list_lock asks whether
 *                                   work is queued: none_pass_done,
 *                                   wb_writeback_shared)
 *   space_inode->lock -> alloc_group->lock  (allocating, freeing or
 *                                   marking the blocks of one inode's
 *                                   extents; one group at a time; space.c)
 *   space_inode->lock -> busy_lock  (a truncate's freed blocks become
 *                                   busy; space.c)
 *   busy_lock    -> alloc_group->lock  (released busy blocks are freed)
 *   pool->lock   -> retain_lock    (a closing bdi, or a domain's last
 *                                   one, handing its page-buffer chunks
 *                                   to the process; pcache-pool.c)
 *   page->lock   -> page->lock     (a read filling a run of pages with
 *                                   one device read: the first page
 *                                   locked, the later ones, in rising
 *                                   index, only tried with
 *                                   pwb__mutex_trylock_nested; pcache-read.c)
 *   page->lock   -> the ranks after it  (a fill looks its pages' blocks
 *                                   up; a run's later pages are charged
 *                                   to the cache, which may reclaim and
 *                                   kick the flushers)
 *
 * inode->lock and every rank after it take no other lock today (the
 * whole suite runs so under lockdep): keep them leaves if you can.
 * Condition waits release their mutex while they sleep and take it back
 * as an acquisition of its rank. No lock is held while an ops callback
 * runs, except: cfg.clock, called under list_lock and inode->lock (it must
 * not call into libpwb); and the shard policy's callbacks (and the
 * map_page that select may call) during a re-shard, under reshard_lock.
 */
/*
 *   read ring->lock -> lru lock, page wait lock  (a read that ends, on the
 *                                   thread that reaps it; io-uring.c,
 *                                   readahead.c)
 */
/* The most pages a read fills with one device read (pcache-read.c), so the
 * most page->locks one thread holds at once (with the few under them,
 * within the 64 locks ThreadSanitizer follows per thread). */
#define PWB__FILL_RUN_MAX 32

enum pwb__lock_rank {
	PWB__LOCK_UNRANKED = 0,	/* not given a rank: lockdep refuses it */
	PWB__LOCK_BDI,		/* bdi->lock: inode registry, users, close */
	PWB__LOCK_RESHARD,	/* bdi->reshard_lock: re-shards, the tuner,
				 * close */
	PWB__LOCK_FLUSH,	/* bdi->flush_lock: device flushes, held
				 * across fdatasync */
	PWB__LOCK_PAGE,		/* page->lock (pcache.h): a library-owned
				 * page's data; held across device reads
				 * and stable-page waits, never by a
				 * flusher (get_page only tries it) */
	PWB__LOCK_ROUTE,	/* region->route_lock: per-page routing of
				 * one inode (region.c); never in a flusher */
	PWB__LOCK_LIST,		/* wb->list_lock: one context's lists */
	PWB__LOCK_INODE,	/* inode->lock: page map, state, errors */
	PWB__LOCK_WORK,		/* wb->work_lock: one context's work queue */
	PWB__LOCK_FLUSHER,	/* flusher->lock: kicked, stop */
	PWB__LOCK_PARK,		/* bdi->park_lock: parking the flushers */
	PWB__LOCK_INFLIGHT,	/* bdi->inflight_lock: max_inflight */
	PWB__LOCK_RATE,		/* bdi->rate.lock: the write-rate cap */
	PWB__LOCK_CURSOR,	/* bdi->cursor_lock: pwb_sync's error cursor */
	PWB__LOCK_COMPLETION,	/* completion->lock: a waiter's counter */
	PWB__LOCK_AUTOTUNE,	/* autotune->lock: the tuner's stop flag */
	PWB__LOCK_SPACE_RECORDS, /* space->records_lock: closed allocator-
				 * mode inodes' extents (space.c) */
	PWB__LOCK_SPACE,	/* space_inode->lock: one inode's extent map
				 * and delalloc runs (space.c) */
	PWB__LOCK_SPACE_BUSY,	/* space->busy_lock: freed blocks not yet
				 * released (busy extents, space.c) */
	PWB__LOCK_ALLOC_GROUP,	/* group->lock: one allocation group's free
				 * space (alloc.c); taken alone or under
				 * the inode's space lock */
	PWB__LOCK_REGISTRY,	/* registry_lock (policy.c): policies */
	PWB__LOCK_READAHEAD,	/* ra->lock (readahead.c): one inode's
				 * readahead streams; a leaf */
	PWB__LOCK_READ_RING,	/* ring->lock (io-uring.c): one read
				 * ring; held while reads end (their pages
				 * join reclaim lists, waiters are woken) */
	PWB__LOCK_PAGE_POOL,	/* pool->lock: free page buffers of a bdi,
				 * or of a domain's bdis of one page size
				 * (pcache-pool.c) */
	PWB__LOCK_PAGE_LRU,	/* pcache->lru[i].lock: one context's
				 * reclaim list (pcache-reclaim.c); a leaf */
	PWB__LOCK_PAGE_ROOM,	/* room->lock: writers waiting for room in
				 * a bdi's cache or a domain's budget
				 * (pcache.h); a leaf */
	PWB__LOCK_PAGE_KSWAPD,	/* pcache->kswapd_lock: the background
				 * reclaimer's sleep (pcache-reclaim.c); a
				 * leaf */
	PWB__LOCK_CHUNK_RETAIN,	/* retain_lock (pcache-pool.c): chunks of
				 * closed bdis kept for reuse; a leaf */
	PWB__LOCK_DOMAIN,	/* domain->lock (domain.c): members and
				 * their shares; a leaf, tried (never
				 * waited for) on the completion path */
	PWB__LOCK_PAGE_WAIT,	/* pb->ra.wait[i].lock (pcache-wait.c):
				 * threads waiting for a page under read;
				 * a leaf */
	PWB__LOCK_TENANT,	/* tenant_lock (tenant.c): the tenant lists
				 * of bdis and domains; a leaf */
	PWB__NR_LOCK_RANKS
};

/*
 * Using a mutex in lib/:
 *  - initialise it with pwb__mutex_init(&m, PWB__LOCK_...), a rank of its
 *    own added above in its place in the order (a static mutex:
 *    PTHREAD_MUTEX_INITIALIZER plus PWB__MUTEX_RANK_STATIC(m, rank));
 *  - lock, unlock, wait and destroy with the plain pthread calls: under
 *    --enable-lockdep lib/'s sources (PWB_LIB_SOURCE) see them as macros
 *    that check the order (pthread_mutex_init without a rank makes the
 *    mutex one lockdep refuses to lock);
 *  - take a second lock of the same rank with pwb__mutex_lock_nested(),
 *    after saying in a comment what orders the two;
 *  - begin a function that expects its caller to hold a mutex (a
 *    *_locked helper) with pwb__lockdep_assert_held(&m).
 * Without --enable-lockdep these are the plain pthread calls, and the
 * assertion is nothing.
 */
#ifdef PWB_LOCKDEP
void pwb__lockdep_set_rank(pthread_mutex_t *m, enum pwb__lock_rank rank,
			   const char *file, int line) PWB__INTERNAL;
void pwb__lockdep_forget(pthread_mutex_t *m) PWB__INTERNAL;
void pwb__lockdep_acquire(pthread_mutex_t *m, bool nested, const char *file,
			  int line) PWB__INTERNAL;
void pwb__lockdep_release(pthread_mutex_t *m, const char *file,
			  int line) PWB__INTERNAL;
void pwb__lockdep_assert_held_at(const pthread_mutex_t *m, const char *file,
				 int line) PWB__INTERNAL;

/* The parenthesised names below are the real pthread functions, whatever
 * macros lib/'s sources see. */
static inline int pwb__mutex_init_at(pthread_mutex_t *m,
				     enum pwb__lock_rank rank,
				     const char *file, int line)
{
	int ret = (pthread_mutex_init)(m, NULL);

	if (!ret)
		pwb__lockdep_set_rank(m, rank, file, line);
	return ret;
}

static inline int pwb__mutex_destroy_at(pthread_mutex_t *m)
{
	pwb__lockdep_forget(m);
	return (pthread_mutex_destroy)(m);
}

static inline int pwb__mutex_lock_at(pthread_mutex_t *m, bool nested,
				     const char *file, int line)
{
	/* Checked before blocking: an inversion is reported even when this
	 * run would not have deadlocked. */
	pwb__lockdep_acquire(m, nested, file, line);
	return (pthread_mutex_lock)(m);
}

/* A trylock cannot deadlock; one that succeeds is a held lock. */
static inline int pwb__mutex_trylock_at(pthread_mutex_t *m, const char *file,
					int line)
{
	int ret = (pthread_mutex_trylock)(m);

	if (!ret)
		pwb__lockdep_acquire(m, false, file, line);
	return ret;
}

/* A trylock of a second lock of a rank held already (see
 * pwb__mutex_lock_nested()); one that succeeds is a held lock. */
static inline int pwb__mutex_trylock_nested_at(pthread_mutex_t *m,
					       const char *file, int line)
{
	int ret = (pthread_mutex_trylock)(m);

	if (!ret)
		pwb__lockdep_acquire(m, true, file, line);
	return ret;
}

static inline int pwb__mutex_unlock_at(pthread_mutex_t *m, const char *file,
				       int line)
{
	pwb__lockdep_release(m, file, line);
	return (pthread_mutex_unlock)(m);
}

static inline int pwb__cond_wait_at(pthread_cond_t *c, pthread_mutex_t *m,
				    const struct timespec *abstime,
				    const char *file, int line)
{
	int ret;

	pwb__lockdep_release(m, file, line);
	ret = abstime ? (pthread_cond_timedwait)(c, m, abstime)
		      : (pthread_cond_wait)(c, m);
	/* Woken holding @m again: checked against the other locks held,
	 * which the wait did not release. */
	pwb__lockdep_acquire(m, false, file, line);
	return ret;
}

#define pwb__mutex_init(m, rank) pwb__mutex_init_at(m, rank, __FILE__, __LINE__)
/* Abort with a report unless the calling thread holds @m (taken through
 * lib/'s checked calls). */
#define pwb__lockdep_assert_held(m)                                            \
	pwb__lockdep_assert_held_at(m, __FILE__, __LINE__)
#define pwb__mutex_lock_nested(m) pwb__mutex_lock_at(m, true, __FILE__, __LINE__)
#define pwb__mutex_trylock_nested(m)                                           \
	pwb__mutex_trylock_nested_at(m, __FILE__, __LINE__)
#define PWB__MUTEX_RANK_STATIC(m, rank)                                        \
	__attribute__((constructor)) static void m##_rank(void)                \
	{                                                                      \
		pwb__lockdep_set_rank(&(m), rank, __FILE__, __LINE__);         \
	}                                                                      \
	_Static_assert(1, "")

#ifdef PWB_LIB_SOURCE
#define pthread_mutex_init(m, attr)                                            \
	pwb__mutex_init_at(m, PWB__LOCK_UNRANKED, __FILE__, __LINE__)
#define pthread_mutex_destroy(m) pwb__mutex_destroy_at(m)
#define pthread_mutex_lock(m) pwb__mutex_lock_at(m, false, __FILE__, __LINE__)
#define pthread_mutex_unlock(m) pwb__mutex_unlock_at(m, __FILE__, __LINE__)
#define pthread_mutex_trylock(m) pwb__mutex_trylock_at(m, __FILE__, __LINE__)
#define pthread_cond_wait(c, m) pwb__cond_wait_at(c, m, NULL, __FILE__, __LINE__)
#define pthread_cond_timedwait(c, m, t)                                        \
	pwb__cond_wait_at(c, m, t, __FILE__, __LINE__)
#endif /* PWB_LIB_SOURCE */

#else /* !PWB_LOCKDEP */

static inline int pwb__mutex_init(pthread_mutex_t *m, enum pwb__lock_rank rank)
{
	(void)rank;
	return pthread_mutex_init(m, NULL);
}

static inline int pwb__mutex_lock_nested(pthread_mutex_t *m)
{
	return pthread_mutex_lock(m);
}

static inline int pwb__mutex_trylock_nested(pthread_mutex_t *m)
{
	return pthread_mutex_trylock(m);
}

static inline void pwb__lockdep_assert_held(const pthread_mutex_t *m)
{
	(void)m;
}

#define PWB__MUTEX_RANK_STATIC(m, rank) _Static_assert(1, "")

#endif /* PWB_LOCKDEP */

/* ---------------------------------------------------------------------- */
/* error.c: per-thread messages                                          */

/* Record a message for pwb_errmsg() and return @err (a negative errno). */
int pwb__err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) PWB__INTERNAL;
/* pwb_errmsg() for lib/'s own callers: the thread's message, "" if none. */
const char *pwb__errmsg(void) PWB__INTERNAL;
/* The thread's message (error.c): written by pwb__err(), cleared at the
 * start of each public call. Only the thread itself reads or writes it. */
#define PWB__MSG_MAX 256
extern PWB__TLS_FAST char pwb__msg[PWB__MSG_MAX] PWB__INTERNAL;

/* Clear the thread's message at the start of a public call (inline: one
 * store, on every hit path). */
static inline void pwb__err_clear(void)
{
	pwb__msg[0] = '\0';
}
/* pwb_strerror() for lib/'s own messages. */
const char *pwb__strerror(int err) PWB__INTERNAL;

/* errseq: an error value with a change counter, after the kernel's errseq_t.
 * Bits 0-11: -errno; bit 12: some reader has seen it; bits 13-31: counter
 * bumped when a new error is recorded after the last one was seen. */
typedef uint32_t pwb__errseq_t;
void pwb__errseq_set(pwb__errseq_t *eseq, int err) PWB__INTERNAL;
/* Return the error recorded since @cursor (0 if none) and advance @cursor,
 * so that each error is returned once to each cursor. */
int pwb__errseq_check_and_advance(pwb__errseq_t *eseq,
				  pwb__errseq_t *cursor) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* clock                                                                  */

uint64_t pwb__clock_monotonic(void *unused) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* flusher threads: which thread is one (base.c)                          */

/* The index of the context whose flusher the calling thread is, or -1
 * (base.c; set by pwb__set_flusher_ctx() on the flusher itself, read only
 * by the thread it belongs to). Initial-exec like the message: the hit
 * paths read it on every call. */
extern PWB__TLS_FAST int pwb__flusher_idx PWB__INTERNAL;

/* True while the flusher of the calling thread is running. */
static inline bool pwb__in_flusher(void)
{
	return pwb__flusher_idx >= 0;
}
/* 0, or -EDEADLK with a message naming @who when called on a flusher
 * (from an ops callback): for the calls that wait for writeback
 * (error.c). */
int pwb__no_flusher(const char *who) PWB__INTERNAL;
/* Index of the context whose flusher is the calling thread, or -1. */
int pwb__flusher_ctx_idx(void) PWB__INTERNAL;
void pwb__set_flusher_ctx(int idx) PWB__INTERNAL;

#endif /* PWB_BASE_H */
