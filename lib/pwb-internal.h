/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-internal.h - libpwb's private structures and internal interfaces
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
#ifndef PWB_INTERNAL_H
#define PWB_INTERNAL_H

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
#define PWB__READ(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define PWB__WRITE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
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
 *
 * inode->lock and every rank after it take no other lock today (the
 * whole suite runs so under lockdep): keep them leaves if you can.
 * Condition waits release their mutex while they sleep and take it back
 * as an acquisition of its rank. No lock is held while an ops callback
 * runs, except: cfg.clock, called under list_lock and inode->lock (it must
 * not call into libpwb); and the shard policy's callbacks (and the
 * map_page that select may call) during a re-shard, under reshard_lock.
 */
enum pwb__lock_rank {
	PWB__LOCK_UNRANKED = 0,	/* not given a rank: lockdep refuses it */
	PWB__LOCK_BDI,		/* bdi->lock: inode registry, users, close */
	PWB__LOCK_RESHARD,	/* bdi->reshard_lock: re-shards, the tuner,
				 * close */
	PWB__LOCK_FLUSH,	/* bdi->flush_lock: device flushes, held
				 * across fdatasync */
	PWB__LOCK_PAGE,		/* page->lock (pcache.c): a library-owned
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
	PWB__LOCK_REGISTRY,	/* registry_lock (policy.c): policies */
	PWB__LOCK_PAGE_POOL,	/* pcache->pool_lock: free page buffers
				 * (pcache.c); a leaf */
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
 *    after saying in a comment what orders the two.
 * Without --enable-lockdep these are the plain pthread calls.
 */
#ifdef PWB_LOCKDEP
void pwb__lockdep_set_rank(pthread_mutex_t *m, enum pwb__lock_rank rank,
			   const char *file, int line) PWB__INTERNAL;
void pwb__lockdep_forget(pthread_mutex_t *m) PWB__INTERNAL;
void pwb__lockdep_acquire(pthread_mutex_t *m, bool nested, const char *file,
			  int line) PWB__INTERNAL;
void pwb__lockdep_release(pthread_mutex_t *m, const char *file,
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
#define pwb__mutex_lock_nested(m) pwb__mutex_lock_at(m, true, __FILE__, __LINE__)
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

#define PWB__MUTEX_RANK_STATIC(m, rank) _Static_assert(1, "")

#endif /* PWB_LOCKDEP */

/* ---------------------------------------------------------------------- */
/* error.c: per-thread messages                                          */

/* Record a message for pwb_errmsg() and return @err (a negative errno). */
int pwb__err(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) PWB__INTERNAL;
/* Clear the thread's message at the start of a public call. */
void pwb__err_clear(void) PWB__INTERNAL;

/* errseq: an error value with a change counter, after the kernel's errseq_t.
 * Bits 0-11: -errno; bit 12: some reader has seen it; bits 13-31: counter
 * bumped when a new error is recorded after the last one was seen. */
typedef uint32_t pwb__errseq_t;
void pwb__errseq_set(pwb__errseq_t *eseq, int err) PWB__INTERNAL;
/* Return the error recorded since @cursor (0 if none) and advance @cursor,
 * so that each error is returned once to each cursor. */
int pwb__errseq_check_and_advance(pwb__errseq_t *eseq,
				  pwb__errseq_t *cursor) PWB__INTERNAL;

/*
 * Write failures. A failed write leaves its pages dirty (pwb__io_end); the
 * inode is then retried with a bounded back-off: periodic and background
 * passes skip it until retry_after (PWB__WB_BACKOFF_MIN_NS, doubled per
 * failed visit up to PWB__WB_BACKOFF_MAX_NS), no SYNC_NONE pass retries it
 * in the pass where it failed, integrity sync always retries. After
 * max_write_failures consecutive failed visits the inode is marked failed:
 * pwb_fsync returns the error until pwb_inode_clear_error(). -ENOSPC also
 * pauses the context's periodic and background passes (the same back-off),
 * until a write succeeds there again.
 */
#define PWB__WB_BACKOFF_MIN_NS (100 * PWB__NSEC_PER_MSEC)
#define PWB__WB_BACKOFF_MAX_NS (10 * PWB__NSEC_PER_SEC)
struct pwb_inode;
struct pwb__wb_ctx;
/* A write of @inode by @wb ended with @err (non-zero) or succeeded (0).
 * Caller holds inode->lock; runs on @wb's flusher. */
void pwb__wb_write_result_locked(struct pwb_inode *inode,
				 struct pwb__wb_ctx *wb, int err) PWB__INTERNAL;
/* End of a writeback visit that handed @written pages to the backend:
 * return true if a write of this visit failed. Caller holds inode->lock. */
bool pwb__wb_visit_end_locked(struct pwb_inode *inode,
			      uint64_t written) PWB__INTERNAL;
/* Should a SYNC_NONE pass of @wb leave @inode alone now? @periodic: a
 * periodic or background pass (which honour the back-off). Caller holds
 * inode->lock. */
bool pwb__wb_backing_off_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb,
				bool periodic) PWB__INTERNAL;
/* Forget @inode's failures and its failed mark (pwb_inode_clear_error).
 * Caller holds inode->lock. */
void pwb__inode_clear_error_locked(struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pagemap.c: sparse per-inode page tags                                  */

/*
 * A radix tree over page indexes whose leaves are bitmaps of 512 pages, one
 * bitmap per tag. Interior nodes keep, per tag, a 64-bit mask of children
 * holding that tag, so searches skip clean space and range operations touch
 * a word per 64 pages. Not thread-safe: the owner's lock (inode->lock)
 * protects it.
 */
enum pwb__tag {
	PWB__TAG_DIRTY = 0,	/* changed since last written */
	PWB__TAG_TOWRITE = 1,	/* selected by an integrity sync */
	PWB__TAG_WRITEBACK = 2,	/* a write of the page is in flight */
	PWB__NR_TAGS = 3,
};

#define PWB__MAP_LEAF_SHIFT 9
#define PWB__MAP_LEAF_PAGES (1u << PWB__MAP_LEAF_SHIFT)
#define PWB__MAP_FANOUT_SHIFT 6
#define PWB__MAP_FANOUT (1u << PWB__MAP_FANOUT_SHIFT)

struct pwb__map {
	void *root;		/* a node, or a leaf when height == 0 */
	unsigned int height;	/* interior levels above the leaves */
	uint64_t count[PWB__NR_TAGS];	/* pages holding each tag */
	uint64_t nr_nodes;	/* allocated nodes + leaves (memory figure) */
	uint64_t nr_lsn;	/* leaves with an LSN array (0: no LSNs) */
};

void pwb__map_init(struct pwb__map *map) PWB__INTERNAL;
void pwb__map_destroy(struct pwb__map *map) PWB__INTERNAL;
/* Set @tag on [first, last]; return pages newly tagged or -ENOMEM (then
 * nothing changed). */
int64_t pwb__map_set(struct pwb__map *map, enum pwb__tag tag, uint64_t first,
		     uint64_t last) PWB__INTERNAL;
/* Clear @tag on [first, last]; return pages that had it. Never fails. */
uint64_t pwb__map_clear(struct pwb__map *map, enum pwb__tag tag,
			uint64_t first, uint64_t last) PWB__INTERNAL;
/* Set @to on every page of [first, last] holding @from; return how many
 * pages newly got @to, or -ENOMEM. */
int64_t pwb__map_copy_tag(struct pwb__map *map, enum pwb__tag from,
			  enum pwb__tag to, uint64_t first,
			  uint64_t last) PWB__INTERNAL;
bool pwb__map_test(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t index) PWB__INTERNAL;
/* Find the first page >= @start holding @tag; store it in *@found and
 * return true, or return false. */
bool pwb__map_find(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t start, uint64_t *found) PWB__INTERNAL;
/* Length of the run of pages holding @tag from @start on, at most @max. */
uint64_t pwb__map_run(const struct pwb__map *map, enum pwb__tag tag,
		      uint64_t start, uint64_t max) PWB__INTERNAL;
/* Set DIRTY on [first, last] and raise each page's LSN to at least @lsn
 * (pwb_mark_dirty_lsn; @lsn 0 is pwb__map_set). Return pages newly dirty,
 * or -ENOMEM with no page newly dirty. */
int64_t pwb__map_set_lsn(struct pwb__map *map, uint64_t first, uint64_t last,
			 uint64_t lsn) PWB__INTERNAL;
/* The LSN of page @index (0: none recorded). */
uint64_t pwb__map_lsn(const struct pwb__map *map, uint64_t index)
	PWB__INTERNAL;
/* The highest LSN of pages [first, first + n); *@prefix gets how many
 * pages from @first have an LSN at or below @above. */
uint64_t pwb__map_lsn_max(const struct pwb__map *map, uint64_t first,
			  uint64_t n, uint64_t above,
			  uint64_t *prefix) PWB__INTERNAL;
/* Forget the LSNs of [first, first + n): writeback took those pages. */
void pwb__map_lsn_reset(struct pwb__map *map, uint64_t first,
			uint64_t n) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* xarray.c: an ordered index by 64-bit key                               */

/* Embedded in the indexed object; several items may share a key. */
struct pwb__xa_item {
	struct pwb__xa_item *next;	/* same key, the tree's use */
	uint64_t key;			/* set before insert, kept while in */
};

/* A radix tree of 64-slot nodes. Not thread-safe: the owner's lock. */
struct pwb__xa {
	void *root;
	unsigned int height;	/* levels; 0 when empty */
	uint64_t count;		/* items */
	uint64_t nr_nodes;	/* allocated nodes (memory figure) */
};

void pwb__xa_init(struct pwb__xa *xa) PWB__INTERNAL;
/* Free the nodes; the items are the caller's. */
void pwb__xa_destroy(struct pwb__xa *xa) PWB__INTERNAL;
/* Index @item under item->key: 0, or -ENOMEM (then nothing changed). */
int pwb__xa_insert(struct pwb__xa *xa, struct pwb__xa_item *item)
	PWB__INTERNAL;
/* Remove @item (a no-op if it is not in @xa under item->key). */
void pwb__xa_erase(struct pwb__xa *xa, struct pwb__xa_item *item)
	PWB__INTERNAL;
/* An item with the smallest key, or NULL if empty. */
struct pwb__xa_item *pwb__xa_first(const struct pwb__xa *xa) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* clock                                                                  */

uint64_t pwb__clock_monotonic(void *unused) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* Completions and work items                                             */

struct pwb__completion {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* with lock: pending reached 0 */
	unsigned int pending;	/* lock: work items still running */
	int err;		/* lock: first error a work item reported */
};

void pwb__completion_init(struct pwb__completion *c,
			  unsigned int pending) PWB__INTERNAL;
void pwb__completion_destroy(struct pwb__completion *c) PWB__INTERNAL;
void pwb__completion_done(struct pwb__completion *c, int err) PWB__INTERNAL;
/* Wait until pending reaches 0; return the first error. */
int pwb__completion_wait(struct pwb__completion *c) PWB__INTERNAL;

enum pwb__sync_mode {
	PWB__SYNC_NONE = 0,	/* write what we can, don't wait (WB_SYNC_NONE) */
	PWB__SYNC_ALL = 1,	/* integrity: tagged pages, wait (WB_SYNC_ALL) */
};

/* One request to a flusher, the kernel's wb_writeback_work. Filled in by
 * the queuer before pwb__wb_queue_work(); from then on the flusher that
 * takes it off work_list owns it until it completes it. */
struct pwb__wb_work {
	struct cds_list_head list;	/* on wb->work_list, under work_lock */
	enum pwb__sync_mode sync_mode;
	enum pwb_wb_reason reason;	/* for SYNC_NONE work */
	struct pwb_inode *inode;	/* only this inode (fsync), or NULL */
	int64_t nr_pages;		/* pages to write at most */
	struct pwb__completion *done;	/* signalled when finished, or NULL */
	bool auto_free;			/* free() when finished */
	uint64_t queued_at;		/* clock ns, set when queued */
	bool yielded;			/* the flusher: cut short by the rate
					 * cap for queued work */
};

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
	struct cds_list_head list;	/* backend's own use */
	struct pwb__io *next_free;	/* in wb->io_cache */
};

/*
 * An I/O backend. Valid from version 1: name, ctx_init, ctx_fini, submit,
 * wait. A backend may complete a request inside submit (psync does) or
 * later; either way it calls pwb__io_end() exactly once per request, on the
 * context's flusher thread, from submit() or wait().
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
};

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
struct pwb__fault_state;
const struct pwb__io_backend *pwb__io_backend_find(const char *name)
	PWB__INTERNAL;
/* A request with room for @max_pages iovecs, zeroed but for iov and cap,
 * or NULL. Full-size requests (max_io_pages) come from the context's
 * cache, so a busy context does not go to malloc per write. The caller
 * owns @wb's I/O (see io_cache). */
struct pwb__io *pwb__io_get(struct pwb__wb_ctx *wb, uint64_t max_pages)
	PWB__INTERNAL;
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

/* ---------------------------------------------------------------------- */
/* policy.c: the shard policy interface                                   */

/*
 * A shard policy decides which context an inode joins at its first
 * dirtying. Its ops table is the public struct pwb_policy_ops
 * (pwb-policy.h): built-ins (policy-*.c), registered tables and loaded
 * plugins alike, found by name in a process-wide registry whose entries
 * live until the process exits. Each bdi holds one instance.
 */
struct pwb__policy {
	/* Set by pwb__policy_create(), then read-only: */
	const struct pwb_policy_ops *ops;
	void *state;			/* the instance's, from ops->init */
	char spec[PWB_POLICY_SPEC_MAX + 1];	/* normalised "name[:args]" */
	unsigned int flags;		/* PWB_POLICY_F_* (ABI 2 tables) */
	unsigned int batch;		/* F_SHARED_LIST: inodes per claim */
	uint64_t nr_fallbacks;		/* uatomic: select() failed or gave an
					 * index out of range */
};

#define PWB__POLICY_BATCH_DEFAULT 16u
#define PWB__POLICY_BATCH_MAX 1024u

/* Parse "name[:args]" (NULL or "": inode-hash), find the policy and
 * instantiate it in @pol. Return 0 or -errno (message recorded). */
int pwb__policy_create(struct pwb_bdi *bdi, const char *spec,
		       struct pwb__policy *pol) PWB__INTERNAL;
/* Call fini; @pol may be zeroed or already destroyed. */
void pwb__policy_destroy(struct pwb__policy *pol) PWB__INTERNAL;
/* Tell the instance the bdi now has @nr contexts (live re-sharding);
 * call it after publishing the new array, before re-placing inodes. */
void pwb__policy_nr_changed(struct pwb__policy *pol,
			    unsigned int nr) PWB__INTERNAL;
/* The fallback index for @ino: inode-hash. */
static inline unsigned int pwb__policy_hash(uint64_t ino, unsigned int nr)
{
	return (unsigned int)(ino % nr);
}

/* The inode's ordering key under an F_ORDERED policy (0 otherwise).
 * Same calling rules as pwb__policy_select(). */
uint64_t pwb__policy_key(struct pwb__policy *pol, struct pwb_inode *inode,
			 uint64_t index) PWB__INTERNAL;

/* The built-in policies (policy-*.c). */
extern const struct pwb_policy_ops pwb__policy_inode_hash PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_alloc_group PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_least_loaded PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_hint PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_xarray PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_shared_list PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_region PWB__INTERNAL;

/* Helpers for built-in init functions; each records a message naming
 * policy @name on failure. -EINVAL unless @args is NULL: */
int pwb__policy_no_args(const char *name, const char *args) PWB__INTERNAL;
/* Call @fn(@arg, key, value) for each "key=value" of @args (NULL: none),
 * with NUL-terminated copies; stop at and return its first non-zero. */
int pwb__policy_args_each(const char *name, const char *args,
			  int (*fn)(void *arg, const char *key,
				    const char *val),
			  void *arg) PWB__INTERNAL;
/* pwb_policy_map_page() without messages: 0, -ERANGE or map_page's error. */
int pwb__policy_map_page(struct pwb_inode *inode, uint64_t index,
			 uint64_t *dev_off) PWB__INTERNAL;
/* Parse a byte count: decimal digits, then optionally K, M, G or T
 * (powers of 1024, either case). 0 or -EINVAL (no message). */
int pwb__parse_size(const char *str, uint64_t *bytes) PWB__INTERNAL;
/* Context index for @inode, whose first dirtied page is @index; always
 * valid: a failing or out-of-range answer falls back to inode-hash. Called
 * with no lock held (a policy may call the inode's map_page). */
unsigned int pwb__policy_select(struct pwb__policy *pol,
				struct pwb_inode *inode, uint64_t index,
				unsigned int nr_wb_ctx) PWB__INTERNAL;
/* The same for one page under a PWB_POLICY_F_PER_PAGE policy: the
 * context page @index should be written by. */
unsigned int pwb__policy_select_page(struct pwb__policy *pol,
				     struct pwb_inode *inode, uint64_t index,
				     unsigned int nr_wb_ctx) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* wb_ctx.c: writeback contexts                                           */

/* Counters, every one atomic: written with uatomic by the flusher or
 * dirtiers, read lock-free by stats. */
struct pwb__wb_stats {
	uint64_t dirty_pages;
	uint64_t writeback_pages;
	uint64_t dirtied_pages;
	uint64_t written_pages;
	uint64_t io_submitted;
	uint64_t io_errors;
	uint64_t bytes_written;
	uint64_t nr_inodes;
	uint64_t nr_dirty_inodes;
	uint64_t nr_dirty_time_inodes;
	uint64_t wb_passes;
	uint64_t periodic_passes;
	uint64_t background_passes;
	uint64_t sync_passes;
	uint64_t inodes_written;
	uint64_t device_flushes;
	uint64_t flush_ns;
	uint64_t io_extents;	/* contiguous dirty extents written */
	uint64_t rate_limited_ns;	/* flusher slept for the rate cap */
	uint64_t log_forces;	/* log_force calls (write-ahead rule) */
	uint64_t lsn_held_pages;	/* pages passed over: LSN not durable */
	uint64_t latched_pages;	/* pages passed over: get_page -EAGAIN */
};
/* pwb__wb_counters_add() relies on this. */
_Static_assert(sizeof(struct pwb__wb_stats) % sizeof(uint64_t) == 0,
	       "struct pwb__wb_stats holds only uint64_t counters");

/*
 * The dirtying path's counters, split in cache-line slots so that threads
 * dirtying inodes of one context do not write a shared line on every call
 * (the kernel's percpu counters, by thread instead of CPU). A thread uses
 * slot (its number mod PWB__NR_DIRTY_SLOTS); every other writer of these
 * counts (flusher, re-shard, close) uses the base counters in struct
 * pwb__wb_stats. A context's value is the base plus every slot: exact,
 * not approximate (each slot alone may wrap below zero; the sum modulo
 * 2^64 is right), read lock-free like the other counters.
 */
#define PWB__NR_DIRTY_SLOTS 16
struct pwb__dirty_slot {
	uint64_t dirty_pages;		/* uatomic */
	uint64_t dirtied_pages;		/* uatomic */
} __attribute__((aligned(64)));

/*
 * A writeback context: the kernel's struct bdi_writeback, one of several per
 * bdi. Its flusher thread is the only thread that writes its inodes' pages.
 */
struct pwb__wb_ctx {
	struct pwb_bdi *bdi;		/* set at init, read-only */
	unsigned int idx;		/* set at init, read-only */

	pthread_mutex_t list_lock;
	struct cds_list_head b_dirty;	 /* list_lock: dirty, oldest first */
	struct cds_list_head b_io;	 /* list_lock: chosen for this pass */
	struct cds_list_head b_more_io;	 /* list_lock: pass left pages */
	struct cds_list_head b_dirty_time; /* list_lock: only times dirty */
	pthread_cond_t sync_cond;	/* with list_lock: I_SYNC cleared */

	pthread_mutex_t work_lock;
	struct cds_list_head work_list;	/* work_lock */
	bool bg_kick;			/* work_lock: check background soon */
	bool retired;			/* work_lock: removed by a re-shard */

	/* Only the serving flusher (or a re-shard, flushers parked). */
	uint64_t last_old_flush;	/* clock ns of last periodic pass */
	uint64_t bw_stamp;		/* clock ns of last bandwidth update */
	uint64_t bw_written;		/* written bytes at bw_stamp */
	uint64_t avg_write_bw;		/* bytes/s, also read by stats */
	void *io_state;			/* the backend's */
	/* Finished full-size requests kept for reuse (pwb__io_get/put),
	 * at most io_depth + 1. Owned like io_state: by the one thread at a
	 * time that runs the context's passes or completes its requests
	 * (its flusher, or a re-shard or close with the flushers parked). */
	struct pwb__io *io_cache;
	unsigned int nr_io_cache;
	unsigned int io_cache_max;	/* pwb__io_cache_max(), at init */
	uint64_t nospc_until;		/* clock ns: ENOSPC pauses periodic and
					 * background passes until then */
	uint64_t nospc_backoff_ns;	/* that pause, doubled per ENOSPC */

	/*
	 * How this context's passes use lists, from the shard policy's flags
	 * (pwb__ctxs_apply_policy): changed only with the flushers parked,
	 * or at open before any inode is dirty.
	 */
	struct pwb__wb_ctx *lists;	/* PWB__READ: whose lists the passes
					 * work: this context, or context 0
					 * under F_SHARED_LIST */
	unsigned int claim_batch;	/* PWB__READ: F_SHARED_LIST claims */
	bool shared;			/* PWB__READ: F_SHARED_LIST, so this
					 * context (context 0 too) claims */
	bool ordered;			/* list_lock: F_ORDERED, b_io is
					 * also indexed by io_tree */
	struct pwb__xa io_tree;		/* list_lock: b_io inodes by key */

	struct pwb__wb_stats stats;	/* atomic */
	struct pwb__dirty_slot dslot[PWB__NR_DIRTY_SLOTS]; /* atomic */
};

/* Count @n pages newly dirtied in @wb by the calling thread (its slot). */
void pwb__wb_account_dirtied(struct pwb__wb_ctx *wb,
			     uint64_t n) PWB__INTERNAL;
/* Dirty pages of @wb now: the base counter plus every slot. */
uint64_t pwb__wb_dirty_pages(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Move the slots' counts into wb->stats (before the stats are copied
 * away when @wb retires; nobody dirties @wb then). */
void pwb__wb_fold_slots(struct pwb__wb_ctx *wb) PWB__INTERNAL;

struct pwb__wb_ctx_array;
/* Give the contexts of @arr the list arrangement @pol asks for. Flushers
 * parked, or no inode dirty yet. Takes each list_lock. */
void pwb__ctxs_apply_policy(struct pwb__wb_ctx_array *arr,
			    const struct pwb__policy *pol) PWB__INTERNAL;

int pwb__wb_ctx_init(struct pwb__wb_ctx *wb, struct pwb_bdi *bdi,
		     unsigned int idx) PWB__INTERNAL;
void pwb__wb_ctx_destroy(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue @work and wake the serving flusher. Work queued on a retired
 * context completes at once with -EAGAIN (the caller retries). */
void pwb__wb_queue_work(struct pwb__wb_ctx *wb,
			struct pwb__wb_work *work) PWB__INTERNAL;
/*
 * Queued work is served by class: integrity (SYNC_ALL) first, then
 * background and "write everything", then periodic; in arrival order
 * within a class. Work queued longer than PWB__WORK_MAX_WAIT_NS goes
 * first whatever its class, and the flusher runs its background and
 * periodic checks after every PWB__WORK_BATCH items, so that nothing
 * starves.
 */
#define PWB__WORK_MAX_WAIT_NS (1 * PWB__NSEC_PER_SEC)
#define PWB__WORK_BATCH 16
/* The item the flusher should run next at clock time @now, or NULL;
 * not removed. Caller holds wb->work_lock. */
struct pwb__wb_work *pwb__wb_next_work_locked(struct pwb__wb_ctx *wb,
					      uint64_t now) PWB__INTERNAL;
/* Ask the serving flusher to check the background threshold. */
void pwb__wb_kick_background(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_stats_read(struct pwb__wb_ctx *wb,
			struct pwb_stats *st) PWB__INTERNAL;
/* Add the counters of @s to @st (lock-free reads). */
void pwb__wb_counters_read(const struct pwb__wb_stats *s,
			   struct pwb_stats *st) PWB__INTERNAL;
/* @dst += @src, every counter, with atomic adds. */
void pwb__wb_counters_add(struct pwb__wb_stats *dst,
			  const struct pwb__wb_stats *src) PWB__INTERNAL;
/* Retire @wb: complete its queued work with -EAGAIN. Flushers parked. */
void pwb__wb_ctx_retire(struct pwb__wb_ctx *wb) PWB__INTERNAL;

/*
 * A flusher thread: the kernel's writeback worker, apart from the lists.
 * Flusher f serves contexts c with c % bdi->nr_flushers == f. It sleeps on
 * cond until kicked (work queued, background) or the periodic interval.
 */
struct pwb__flusher {
	struct pwb_bdi *bdi;	/* set at allocation, read-only */
	unsigned int idx;	/* set at allocation, read-only */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* with lock: kicked or stop */
	bool kicked;		/* lock */
	bool stop;		/* lock */
	bool fresh;		/* the flusher thread's own (set under lock
				 * before it starts): started while others
				 * were parked, has nothing in flight to
				 * drain */
	/* The thread that starts and stops flushers: open, or a holder of
	 * bdi->reshard_lock (re-shard, close). */
	pthread_t thread;
	bool started;
};

int pwb__flusher_start(struct pwb_bdi *bdi, unsigned int idx) PWB__INTERNAL;
/* Stop and join flusher @idx (it must not be parked). */
void pwb__flusher_stop(struct pwb_bdi *bdi, unsigned int idx) PWB__INTERNAL;
void pwb__flusher_kick(struct pwb__flusher *fl) PWB__INTERNAL;
/* Park every running flusher between work items, with nothing in flight;
 * returns when all are parked. pwb__flushers_resume() lets them go. Caller
 * holds bdi->reshard_lock. */
void pwb__flushers_park(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__flushers_resume(struct pwb_bdi *bdi) PWB__INTERNAL;

/* The context array, published with RCU (bdi->ctxs); read-only once
 * published. */
struct pwb__wb_ctx_array {
	unsigned int nr;
	struct pwb__wb_ctx *ctx[];
};

/* pacing.c: The write-rate cap (pwb_bdi_config.rate_limit_bytes_per_sec). */
struct pwb__rate_bucket {
	pthread_mutex_t lock;
	uint64_t rate;		/* set at init, read-only: bytes/s; 0: no
				 * cap (lock never taken) */
	int64_t burst;		/* set at init, read-only: most tokens kept */
	int64_t tokens;		/* lock: bytes that may go now; < 0: owed */
	uint64_t stamp;		/* lock: clock ns of the last refill */
};

/* ---------------------------------------------------------------------- */
/* autotune.c: automatic parallelism (PWB_BDI_AUTO_WB_CTX)                */

/*
 * The decision: pure, with no clock, lock or thread of its own, so that
 * unit tests feed it synthetic bandwidth series. Hill climbing over the
 * counts [min, max]: each measured window gives the bandwidth of the count
 * in effect; the search keeps the fastest count of the current round
 * ("best": the fewest contexts within tol_pct of the fastest measured),
 * tries unmeasured counts on one side of it (doubling or halving while
 * nothing beyond is known, then bisecting towards the nearest slower
 * count), turns to the other side after a slower result, and settles on
 * best when both of its neighbours are measured. A settled search starts a
 * new round after reprobe_windows measured windows, probing the neighbours
 * of best one step at a time.
 */
struct pwb__auto_params {
	unsigned int min, max;		/* bounds on the count, 1 <= min <= max */
	unsigned int tol_pct;		/* "faster" means by more than this */
	unsigned int reprobe_windows;	/* held windows before a re-probe */
	uint64_t min_bytes;		/* a window writing less is idle */
};

/* One measurement window, as the driver saw it. */
struct pwb__auto_window {
	unsigned int nr;	/* contexts in effect during the window */
	uint64_t bytes;		/* bytes written in it */
	uint64_t ns;		/* its length */
	bool busy;		/* writeback had a backlog at both ends */
};

struct pwb__auto_state {
	unsigned int best;	/* fastest count of this round (0: none) */
	int dir;		/* +1 or -1: the side to search first */
	unsigned int round;	/* current round, from 1 */
	unsigned int held;	/* measured windows since settling */
	bool settled;
	bool local;		/* this round probes neighbours only */
	enum pwb_auto_reason reason;	/* of the last decision */
	uint64_t bw[PWB_MAX_WB_CTX + 1];	/* bytes/s measured per count */
	unsigned int mark[PWB_MAX_WB_CTX + 1];	/* round of bw[n]; 0 never */
};

void pwb__auto_init(struct pwb__auto_state *s,
		    const struct pwb__auto_params *p,
		    unsigned int nr) PWB__INTERNAL;
/* Record window @w and return the count for the next window; s->reason
 * says why. Never outside [p->min, p->max] (a count in effect outside
 * them is treated as unmeasured). */
unsigned int pwb__auto_decide(struct pwb__auto_state *s,
			      const struct pwb__auto_params *p,
			      const struct pwb__auto_window *w) PWB__INTERNAL;

/* The driver: one tuner thread per bdi with the flag. */
struct pwb__autotune {
	struct pwb__auto_params params;	/* set at open, then read-only */
	uint64_t interval_ns;		/* window length, cfg.clock ns */
	pthread_t thread;		/* open/close only */
	bool started;			/* open/close only */
	pthread_mutex_t lock;		/* stop, with cond */
	pthread_cond_t cond;		/* with lock: stop was set */
	bool stop;			/* lock */
	/* bdi->reshard_lock: */
	struct pwb__auto_state st;
	bool user;			/* a user count holds: paused */
	bool reset;			/* restart the search (resumed) */
	/* uatomic, for pwb_bdi_stats: */
	uint64_t nr, reason, steps, windows, best_bw, best_nr;
	uint64_t ticks;			/* uatomic: windows ended, idle or not
					 * (tests wait on it) */
};

/* Validate the auto_* fields of @cfg (any flags); 0 or -EINVAL + message. */
int pwb__autotune_check(const struct pwb_bdi_config *cfg) PWB__INTERNAL;
/* The count a bdi with the flag starts from, and resumes from: nr_wb_ctx,
 * or if that is 0 the static pick moved into the bounds. */
unsigned int pwb__autotune_start_nr(const struct pwb_bdi *bdi) PWB__INTERNAL;
/* Start the tuner if cfg.flags asks for it (last step of open). */
int pwb__autotune_start(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Stop and join the tuner (first step of close); a no-op without one. */
void pwb__autotune_stop(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_bdi_set_nr_wb_ctx(@nr) by the user: pause (@nr != 0) or resume
 * tuning. Caller holds reshard_lock. */
void pwb__autotune_user_locked(struct pwb_bdi *bdi,
			       unsigned int nr) PWB__INTERNAL;
/* Fill the auto_* fields of @st. */
void pwb__autotune_stats(struct pwb_bdi *bdi,
			 struct pwb_stats *st) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* reshard.c                                                              */

/* Re-shard to @nr contexts (no-op if already so). Caller holds
 * reshard_lock and is not a flusher. */
int pwb__reshard_locked(struct pwb_bdi *bdi, unsigned int nr) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* bdi.c                                                                  */

struct pwb_bdi {
	/* Set by pwb_bdi_open(), then read-only, up to ctxs: */
	int fd;
	char *path;
	uint64_t capacity;
	unsigned int lbs;		/* logical block size */
	unsigned int page_shift;
	int rotational;
	int is_blockdev;
	struct pwb_bdi_config cfg;	/* copy; cfg.policy/backend not used */
	uint64_t dirty_expire_ns;
	uint64_t dirtytime_expire_ns;
	uint64_t writeback_interval_ns;
	uint64_t bg_thresh_pages;	/* 0: no background writeback */
	/* statx(STATX_WRITE_ATOMIC) at open; 0 where nothing is reported. */
	unsigned int awu_min;		/* bytes */
	unsigned int awu_max;		/* bytes */
	unsigned int awu_segs;		/* iovecs per atomic write */
	bool atomic;			/* pages go out with RWF_ATOMIC */
	uint64_t max_io_pages;

	struct pwb__wb_ctx_array *ctxs;	/* RCU-published; replaced only
					 * with the flushers parked */
	/* Flushers. Slots are allocated once and live until close:
	 * RCU-published (PWB__RCU_ASSIGN by open or a re-shard, which hold
	 * reshard_lock or run alone), read without a lock by kickers. */
	struct pwb__flusher *flushers[PWB_MAX_WB_CTX];
	unsigned int nr_flushers;	/* uatomic: running, serving by idx */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;	/* park_req or nr_parked changed */
	bool park_req;			/* park_lock */
	unsigned int nr_parked;		/* park_lock */
	pthread_mutex_t reshard_lock;	/* serialises re-shards, close */
	unsigned long reshard_gen;	/* uatomic: bumped by each re-shard */
	unsigned long nr_syncs;		/* uatomic: pwb_sync calls waiting;
					 * shared-list passes hold back */
	struct pwb__wb_stats retired_stats; /* uatomic: retired contexts'
					     * counters (their "now" ones
					     * are 0: inodes moved away) */
	pthread_mutex_t inflight_lock;	/* max_inflight accounting */
	pthread_cond_t inflight_cond;	/* with inflight_lock: inflight fell */
	unsigned int inflight;		/* inflight_lock */
	struct pwb__policy *policy;	/* RCU-published: select() runs
					 * under rcu_read_lock; replaced by
					 * pwb_bdi_set_policy with the
					 * flushers parked */
	int policy_fallback_reported;	/* uatomic: the shard-policy
					 * fallback message was printed (once
					 * per bdi, whatever the policy) */
	const struct pwb__io_backend *io;	/* set at open, read-only */

	struct cds_lfht *inodes;	/* ino -> inode: RCU (cds_lfht);
					 * added under lock, removed
					 * lock-free by the inode's close */
	pthread_mutex_t lock;		/* registry changes, closing */
	bool closing;			/* lock (PWB__READ outside): close
					 * began; no new waiting call */
	bool dead;			/* PWB__WRITE by close, read under
					 * rcu_read_lock: tearing down */
	uint64_t nr_open_inodes;	/* lock */
	unsigned int users;		/* lock: calls between pwb__bdi_enter
					 * and pwb__bdi_exit (HOLD_REF) */
	pthread_cond_t idle_cond;	/* with lock: users or nr_open_inodes
					 * fell while closing */

	/*
	 * Which finished writes a device flush covers. A write that
	 * finishes is tagged with the current flush epoch (a load, so
	 * contexts finishing writes at once share the line read-only); a
	 * flush advances the epoch as it begins (under flush_lock), then
	 * runs fdatasync, so a write tagged with epoch E finished before
	 * every flush that advanced the epoch past E began, and a
	 * successful one of them covers it. written_epoch is the newest
	 * epoch any write finished in, raised with compare-and-swap (once
	 * per epoch in practice): a flush with nothing new since the last
	 * one is skipped. Epochs start at 1; 0 means "never written".
	 */
	pthread_mutex_t flush_lock;	/* serialises device flushes */
	uint64_t write_epoch;		/* uatomic; advanced under flush_lock */
	uint64_t written_epoch;		/* uatomic: newest epoch written in */
	uint64_t flushed_epoch;		/* flush_lock: epochs <= covered */

	uint64_t dirty_limit_pages;	/* set at open, read-only: 0: no
					 * hard limit (throttle.c) */
	unsigned long bg_active;	/* uatomic: background kick sent */
	uint64_t throttle_ns;		/* uatomic: time dirtiers slept */
	uint64_t throttle_events;	/* uatomic: sleeps */
	struct pwb__rate_bucket rate;	/* the write-rate cap, pacing.c;
					 * its own lock */
	uint64_t thr_window;		/* uatomic: current dirtier window */
	uint64_t thr_cur;		/* uatomic: dirtiers in it */
	uint64_t thr_prev;		/* uatomic: dirtiers in the one before */
	struct pwb__fault_state *fault;	/* RCU-published, io-fault.c */
	uint64_t fault_hits;		/* uatomic: writes hit, every rule */

	uint64_t nr_device_flushes;	/* uatomic, bumped under flush_lock */
	uint64_t log_durable;		/* uatomic: highest LSN the log is
					 * durable up to (monotonic max,
					 * pwb_bdi_log_durable, log_force) */

	pwb__errseq_t wb_err;		/* uatomic: errors on any inode */
	pthread_mutex_t cursor_lock;
	pwb__errseq_t sync_cursor;	/* cursor_lock: pwb_sync's cursor */

	struct pwb__autotune *autotune;	/* NULL without the flag; set at
					 * open, freed at close */

	/* Set at open, then read-only: why the backend and the context
	 * count are what they are (pwb_bdi_info). */
	char backend_reason[PWB_REASON_MAX];
	char nr_wb_ctx_reason[PWB_REASON_MAX];
	/* Library-owned page cache (pcache.c): set at open, freed at
	 * close; its own counters are atomic. */
	struct pwb__pcache_bdi *pcache;
};

static inline uint64_t pwb__now(const struct pwb_bdi *bdi)
{
	return bdi->cfg.clock(bdi->cfg.clock_arg);
}

static inline unsigned int pwb__page_size(const struct pwb_bdi *bdi)
{
	return 1u << bdi->page_shift;
}

/*
 * Lifetime of a bdi or an inode against calls that overlap its close (see
 * doc/design.md, "Closing while calls run"). Every public bdi function
 * begins with pwb__bdi_enter() and every public inode function with
 * pwb__inode_enter(), before its first read of the object, and ends with
 * the matching *_exit(). Both helpers open an RCU read-side section before
 * they touch the object; a close marks the object (closing, dead,
 * I_FREEING) and frees it only after a grace period (synchronize_rcu for
 * a bdi, call_rcu for an inode), so a call that has entered is never left
 * holding freed memory, however long it is preempted before its first
 * lock: it gets its result, or -ESHUTDOWN / -EBADF.
 *
 * How the call holds the object until *_exit():
 */
enum pwb__hold {
	/* Inside the RCU read-side section that enter opened: the call must
	 * not wait for anything that waits for a grace period (flushers, a
	 * re-shard, a close); a short wait for a lock is fine.
	 * bdi: -ESHUTDOWN once close tears it down (dead). inode: no state
	 * check (the call checks I_FREEING under inode->lock where it
	 * matters), never fails for a non-NULL inode. */
	PWB__HOLD_RCU,
	/* By reference (bdi->users, inode->users), which a close waits for;
	 * the section is over when enter returns: the call may sleep.
	 * -ESHUTDOWN once a bdi close began (closing), -EBADF once an inode
	 * close began (I_FREEING). */
	PWB__HOLD_REF,
	/* For the close itself: marks the object (bdi->closing, I_FREEING)
	 * and returns outside any section; the caller then owns the object
	 * and frees it. -EBADF if a close of it already began. No exit. */
	PWB__HOLD_CLOSE,
};

/*
 * pwb__bdi_enter() - begin a public call on @bdi
 * @bdi: the caller's handle (non-NULL: callers check their arguments
 *       first, without reading the bdi)
 * @hold: how the call holds @bdi, above
 * @who: the public function's name, for the error message
 *
 * Context: any thread; takes bdi->lock for HOLD_REF and HOLD_CLOSE.
 * Return: 0 (then call pwb__bdi_exit(@bdi, @hold) unless HOLD_CLOSE);
 *         -ESHUTDOWN or -EBADF (as above) with a message, holding nothing.
 */
int pwb__bdi_enter(struct pwb_bdi *bdi, enum pwb__hold hold,
		   const char *who) PWB__INTERNAL;
/* End what pwb__bdi_enter(@bdi, @hold) began. */
void pwb__bdi_exit(struct pwb_bdi *bdi, enum pwb__hold hold) PWB__INTERNAL;

/*
 * pwb__inode_enter() - begin a public call on @inode
 * @inode: the caller's handle, non-NULL
 * @hold: how the call holds @inode, above
 * @who: the public function's name, for the error message
 *
 * The inode pins its bdi: a bdi close closes every inode first, and waits
 * for a grace period before it frees the bdi.
 *
 * Context: any thread; takes inode->lock for HOLD_REF and HOLD_CLOSE.
 * Return: 0 (then call pwb__inode_exit(@inode, @hold) unless HOLD_CLOSE);
 *         -EBADF (HOLD_REF, HOLD_CLOSE) with a message, holding nothing.
 */
int pwb__inode_enter(struct pwb_inode *inode, enum pwb__hold hold,
		     const char *who) PWB__INTERNAL;
/* End what pwb__inode_enter(@inode, @hold) began. */
void pwb__inode_exit(struct pwb_inode *inode,
		     enum pwb__hold hold) PWB__INTERNAL;

/* Caller holds rcu_read_lock: true once close is tearing @bdi down. */
static inline bool pwb__bdi_dead_rcu(const struct pwb_bdi *bdi)
{
	return PWB__READ(bdi->dead);
}
/* -ESHUTDOWN with a message: @who was called on a bdi being torn down. */
int pwb__bdi_dead_err(const char *who) PWB__INTERNAL;

/* Flush the device cache unless every write tagged with flush epoch
 * @epoch or older is already covered by an earlier flush (0: nothing to
 * cover). Return 0 or -errno (also recorded). */
int pwb__bdi_flush_device(struct pwb_bdi *bdi, uint64_t epoch) PWB__INTERNAL;
/* Tag a write of @inode that just finished (caller holds inode->lock). */
void pwb__bdi_write_done_locked(struct pwb_bdi *bdi,
				struct pwb_inode *inode) PWB__INTERNAL;
/* The epoch a flush must reach to cover every write finished so far. */
static inline uint64_t pwb__bdi_written_epoch(struct pwb_bdi *bdi)
{
	return uatomic_read(&bdi->written_epoch);
}
/* Raise bdi->log_durable to @lsn if it is below (lock-free). */
void pwb__bdi_log_durable_raise(struct pwb_bdi *bdi,
				uint64_t lsn) PWB__INTERNAL;
/* Total dirty pages over all contexts (approximate, lock-free). */
uint64_t pwb__bdi_dirty_pages(struct pwb_bdi *bdi) PWB__INTERNAL;
/* True while the flusher of the calling thread is running. */
bool pwb__in_flusher(void) PWB__INTERNAL;
/* Index of the context whose flusher is the calling thread, or -1. */
int pwb__flusher_ctx_idx(void) PWB__INTERNAL;
void pwb__set_flusher_ctx(int idx) PWB__INTERNAL;

/* Flusher threads for @nr_ctx contexts under this bdi's config. */
unsigned int pwb__nr_flushers_for(const struct pwb_bdi *bdi,
				  unsigned int nr_ctx) PWB__INTERNAL;
/* A context array of @nr: the first ones taken from @old, the rest new
 * (initialised, not served yet). NULL on failure, with *@err set to the
 * negative errno (message set). */
struct pwb__wb_ctx_array *pwb__ctx_array_alloc(struct pwb_bdi *bdi,
					       struct pwb__wb_ctx_array *old,
					       unsigned int nr,
					       int *err) PWB__INTERNAL;
/* The count the automatic tuner starts from when nr_wb_ctx is 0, and the
 * count pwb_bdi_set_nr_wb_ctx(0) picks on a bdi without the tuner. */
unsigned int pwb__auto_nr_wb_ctx(const struct pwb_bdi *bdi) PWB__INTERNAL;
/* Every open inode (a snapshot, for walks that sleep); free() the array. */
struct pwb_inode **pwb__bdi_collect_inodes(struct pwb_bdi *bdi,
					   size_t *nr) PWB__INTERNAL;
/* Take and release a slot of max_inflight before a backend submit. */
void pwb__inflight_get(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__inflight_put(struct pwb_bdi *bdi, unsigned int nr) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* throttle.c                                                             */

/* Count pages the calling thread newly dirtied (thread-local). */
void pwb__throttle_account(uint64_t pages) PWB__INTERNAL;
/* Wake every flusher for background writeback, once per round. */
void pwb__kick_background(struct pwb_bdi *bdi) PWB__INTERNAL;
/* True if the bdi's dirty + writeback pages are above the throttle's set
 * point (half way from dirty_background_bytes to dirty_bytes), where
 * dirtiers are paused; false without a dirty_bytes limit. */
bool pwb__throttle_over_setpoint(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_balance_dirty() without argument checks; the caller holds a
 * pwb__bdi_enter() reference. -ESHUTDOWN if close began meanwhile. */
int pwb__balance_dirty(struct pwb_bdi *bdi) PWB__INTERNAL;
/* The same for pwb_mark_dirty(), whose caller holds rcu_read_lock (which
 * keeps @bdi alive): the common "no pause" answer needs no reference; a
 * pause takes one. Drops rcu_read_lock before it returns. */
int pwb__balance_dirty_rcu(struct pwb_bdi *bdi) PWB__INTERNAL;

#define PWB__THROTTLE_MAX_PAUSE_NS (200 * PWB__NSEC_PER_MSEC)
#define PWB__THROTTLE_MIN_PAUSE_NS (1 * PWB__NSEC_PER_MSEC)

/* What the pause of one dirtier is decided from. Pages, except bw. */
struct pwb__throttle_state {
	uint64_t bg;		/* background threshold (0: none) */
	uint64_t limit;		/* dirty_bytes (0: no throttling) */
	uint64_t dirty;		/* dirty + writeback, whole bdi */
	uint64_t bw;		/* bytes/s, sum over the contexts */
	uint64_t dirtied;	/* pages the dirtier owes */
	unsigned int nr_dirtiers; /* threads dirtying now (at least 1) */
	unsigned int page_shift;
};

/* The pause in ns for a dirtier in state @s: 0 at or below the set point;
 * between the set point and the limit the time to write s->dirtied pages
 * at the dirtier's share of the bandwidth scaled down towards the limit
 * (may be below PWB__THROTTLE_MIN_PAUSE_NS: then not slept, but owed); at
 * the limit (*@hard set) the time to write the excess, at least the
 * minimum. Never above PWB__THROTTLE_MAX_PAUSE_NS. */
uint64_t pwb__throttle_pause(const struct pwb__throttle_state *s,
			     bool *hard) PWB__INTERNAL;
/* Count the calling thread as a dirtier of @bdi at clock time @now and
 * return the number of threads that dirtied in this or the previous
 * 200 ms window (at least 1). */
unsigned int pwb__throttle_dirtiers(struct pwb_bdi *bdi,
				    uint64_t now) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* pacing.c                                                               */

/* struct pwb__rate_bucket: above struct pwb_bdi, which holds one. */
void pwb__rate_init(struct pwb__rate_bucket *b, uint64_t rate,
		    uint64_t min_burst, uint64_t now) PWB__INTERNAL;
void pwb__rate_destroy(struct pwb__rate_bucket *b) PWB__INTERNAL;
/* Charge @bytes just written at clock time @now; return how long the
 * writer should sleep before its next write (0: none). */
uint64_t pwb__rate_charge(struct pwb__rate_bucket *b, uint64_t bytes,
			  uint64_t now) PWB__INTERNAL;
/* How long until the bucket is out of debt at clock time @now. */
uint64_t pwb__rate_wait_ns(struct pwb__rate_bucket *b,
			   uint64_t now) PWB__INTERNAL;
/* Sleep up to @wait ns on @wb's flusher, in slices; return false early
 * (the debt stays owed) as soon as work is queued on @wb or a re-shard
 * asks the flushers to park (bdi->park_req). */
bool pwb__rate_sleep(struct pwb__wb_ctx *wb, uint64_t wait) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* inode.c                                                                */

/* The list an inode is on. */
enum pwb__list {
	PWB__LIST_NONE = 0,
	PWB__LIST_DIRTY,
	PWB__LIST_IO,
	PWB__LIST_MORE_IO,
	PWB__LIST_DIRTY_TIME,
};

/* inode->state bits. */
#define PWB__I_DIRTY_PAGES 0x01u	/* the page map holds dirty pages */
#define PWB__I_DIRTY_META 0x02u		/* write_inode needed */
#define PWB__I_DIRTY_TIME 0x04u		/* timestamps only */
#define PWB__I_SYNC 0x08u		/* a flusher is writing it */
#define PWB__I_FREEING 0x10u		/* being closed */
#define PWB__I_GONE 0x20u		/* closed: off every list, uncounted;
					 * a re-shard leaves it alone */
#define PWB__I_DIRTY_ANY                                                       \
	(PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META | PWB__I_DIRTY_TIME)

struct pwb_inode {
	/* Set by pwb_inode_open(), then read-only: */
	uint64_t ino;
	struct pwb_bdi *bdi;
	struct pwb_inode_ops ops;
	void *priv;

	/* Chosen by the shard policy at first dirtying, under inode->lock;
	 * a later move between contexts holds both list_locks and
	 * inode->lock. Readers hold inode->lock or use PWB__READ. */
	struct pwb__wb_ctx *wb;
	/* pwb_inode_set_wb_hint(): a context index or -1. CMM_STORE_SHARED
	 * by the application, PWB__READ by the shard policy. */
	int wb_hint;

	pthread_mutex_t lock;		/* the fields below, to the marker */
	unsigned int state;		/* PWB__I_* */
	uint64_t dirtied_when;		/* clock ns of the first dirtying */
	uint64_t dirtied_time_when;	/* same, for PWB__I_DIRTY_TIME */
	struct pwb__map map;		/* page tags */
	uint64_t writeback_index;	/* where the next cyclic pass starts */
	uint64_t last_write_epoch;	/* lock: flush epoch of its last
					 * finished write (0: none) */
	pwb__errseq_t wb_err;		/* write errors of this inode */
	pwb__errseq_t fsync_cursor;	/* pwb_fsync's cursor */
	unsigned int users;		/* lock: calls holding it by reference
					 * (pwb__inode_enter HOLD_REF): fsyncs,
					 * discards, writeback waits */
	pthread_cond_t users_cond;	/* with lock: users dropped to 0 */
	/* Stable pages and discard (discard.c). */
	pthread_cond_t wb_cond;		/* WRITEBACK tags cleared, an
					 * end_write returned, a discard
					 * ended */
	unsigned int wb_waiters;	/* lock (PWB__READ by completions):
					 * threads sleeping on wb_cond */
	bool discarding;		/* a pwb_inode_discard() runs over */
	uint64_t discard_first;		/* pages [discard_first, */
	uint64_t discard_last;		/*        discard_last] */
	/* Write failures (error.c): back-off and the failed mark. */
	unsigned int wb_visit;		/* bumped by each writeback visit */
	unsigned int fail_visit;	/* wb_visit of the last counted failure */
	unsigned int wb_failures;	/* consecutive visits with a failure */
	uint64_t fail_pass;		/* wb_passes of the ctx at that failure */
	uint64_t backoff_ns;		/* current back-off, doubled per failure */
	uint64_t retry_after;		/* clock ns: periodic/background skip
					 * the inode until then */
	int failed_err;			/* after max_write_failures failures:
					 * fsync returns it until cleared */
	/* ---- end of inode->lock ---- */

	unsigned long nr_ending;	/* uatomic: finished writes whose
					 * end_write has not returned yet
					 * (raised under inode->lock) */

	struct cds_list_head io_list;	/* wb->list_lock: on a b_* list */
	enum pwb__list on_list;		/* wb->list_lock: which one */
	/* F_ORDERED policies: the key (set at placement under inode->lock
	 * before the inode is on any list, later under both locks) and
	 * whether the inode is in wb->io_tree (list_lock). */
	struct pwb__xa_item xa;
	bool in_tree;
	struct cds_lfht_node hnode;	/* bdi->inodes: RCU (cds_lfht) */
	struct rcu_head rcu;		/* call_rcu, once, by close */

	/* Per-page policies (PWB_POLICY_F_PER_PAGE, region.c). An inode
	 * the application opened may own slices: one hidden pwb_inode per
	 * context slot, holding the dirty pages routed there and sitting on
	 * that context's lists in the inode's place. */
	struct pwb__region *region;	/* RCU-published once, freed with the
					 * inode; NULL for a whole inode */
	struct pwb_inode *parent;	/* read-only: a slice's inode (else
					 * NULL) */
	unsigned int slot;		/* read-only: a slice's slot (context
					 * index when it was made) */
	/* Library-owned pages (pcache.c): set at open, read-only; NULL
	 * when the application owns the pages. */
	struct pwb__pcache_inode *pcache;
};

/* The inode the application knows: @inode itself, or a slice's parent.
 * Callbacks (map_page, get_page, end_write) always get this one. */
static inline struct pwb_inode *pwb__inode_app(struct pwb_inode *inode)
{
	return inode->parent ? inode->parent : inode;
}

/* Look @ino up; caller holds rcu_read_lock. */
struct pwb_inode *pwb__inode_lookup_rcu(struct pwb_bdi *bdi,
					uint64_t ino) PWB__INTERNAL;
/* Put a clean inode that just became dirty on its context's lists: b_dirty
 * (or b_dirty_time) tail, unless a flusher has it (I_SYNC). Takes
 * list_lock and inode->lock. */
void pwb__inode_attach_dirty(struct pwb_inode *inode) PWB__INTERNAL;
/* Which list of its context @inode is on (takes list_lock; for tests). */
enum pwb__list pwb__inode_list(struct pwb_inode *inode) PWB__INTERNAL;
/* Move @inode to the tail of list @to of @wb (or off every list) and keep
 * the list counters right. Caller holds wb->list_lock. */
void pwb__inode_move_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			    enum pwb__list to) PWB__INTERNAL;
/* pwb_bdi_close: claim the close of @inode (set I_FREEING) unless another
 * close did; caller is in the read-side section that found @inode. */
bool pwb__inode_claim_close_rcu(struct pwb_inode *inode) PWB__INTERNAL;
/* Take @inode off its context's dirty lists if it has neither dirty pages
 * nor dirty metadata (to b_dirty_time if only its timestamps are dirty),
 * unless a flusher has it (I_SYNC): that flusher requeues it. Takes
 * list_lock and inode->lock. */
void pwb__inode_requeue_clean(struct pwb_inode *inode) PWB__INTERNAL;
/* Write back, unregister and free an inode whose close the caller claimed
 * (pwb__inode_enter(HOLD_CLOSE)); pwb_inode_close and pwb_bdi_close. */
int pwb__inode_close(struct pwb_inode *inode) PWB__INTERNAL;
/* Tag pages [first, last] of @inode DIRTY with LSN @lsn (0: none; see
 * pwb__map_set_lsn), affine it to @wb if it has no context yet (ordering
 * key @key) and count the pages on its context. Caller holds inode->lock
 * and checked I_FREEING. Return the pages newly dirtied (0: none) or
 * -ENOMEM; *@attach says to call pwb__inode_attach_dirty() once the lock
 * is dropped. */
int64_t pwb__inode_dirty_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb, uint64_t key,
				uint64_t first, uint64_t last, uint64_t lsn,
				bool *attach) PWB__INTERNAL;
/* pwb_mark_dirty()'s end: background kick and throttling for @n new
 * dirty pages of @inode (the application's). Caller is inside
 * pwb__inode_enter(@inode, PWB__HOLD_RCU), which this ends. */
int pwb__mark_dirty_tail(struct pwb_inode *inode, int64_t n) PWB__INTERNAL;
/* The flush epoch of @inode's last write (bdi.c): the highest over its
 * holders, the inode itself (metadata through write_inode, pages dirtied
 * before a per-page policy) and its region slices. Takes each holder's
 * lock in turn: caller holds no inode->lock, and @inode cannot be freed
 * under it (a reference, a close, or a read-side section). */
uint64_t pwb__inode_write_epoch(struct pwb_inode *inode) PWB__INTERNAL;
/* Take @inode off its context's lists and counters for good (close):
 * waits for a flusher holding it. A no-op if it was never affined. */
void pwb__inode_unlink(struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* region.c: one inode's pages on several contexts                        */

/*
 * Under a per-page policy each page is routed, when it becomes dirty, to
 * the slice of the context the policy names. A page is dirty or in flight
 * in at most one holder (the inode itself, for pages dirtied before a
 * switch to a per-page policy, or one slice): a page dirtied again while
 * a holder has it goes to that holder, so one page is never in flight
 * twice. route_lock serialises routing decisions; it is taken before any
 * list_lock or inode->lock and never by a flusher.
 */
struct pwb__region {
	pthread_mutex_t route_lock;	/* routing; slice creation */
	struct pwb_inode *slice[PWB_MAX_WB_CTX]; /* RCU-published under
						  * route_lock; freed with
						  * the inode */
	int first_slot;			/* route_lock: slot of the first
					 * page ever routed, or -1 */
};

/* Give @inode its region state if it has none: 0 or -ENOMEM. */
int pwb__region_attach(struct pwb_inode *inode) PWB__INTERNAL;
/* Free the region state and slices (RCU callback of the inode). */
void pwb__region_free(struct pwb_inode *inode) PWB__INTERNAL;
/* pwb_mark_dirty() (pwb_mark_dirty_lsn() with @lsn non-zero) of pages
 * [first, last] of an inode with region state: each page and its LSN go
 * to the page map of the holder that gets the page. Caller is inside
 * pwb__inode_enter(@inode, PWB__HOLD_RCU), which this ends. */
int pwb__region_mark_dirty(struct pwb_inode *inode, uint64_t first,
			   uint64_t last, uint64_t lsn) PWB__INTERNAL;
/* A region slice's write error (or -EBUSY / log_force error of an
 * integrity pass) is its inode's too: recorded on the inode's errseq,
 * where pwb_fsync() and close read it. A no-op for a whole inode or @err
 * 0. Caller holds no inode->lock. */
void pwb__region_report(struct pwb_inode *inode, int err) PWB__INTERNAL;
/* The holders of @inode that have a context (itself first, then its
 * slices), at most 1 + PWB_MAX_WB_CTX. Caller holds rcu_read_lock. */
unsigned int pwb__region_holders_rcu(struct pwb_inode *inode,
				     struct pwb_inode **out) PWB__INTERNAL;
/* Close: no page is routed to @inode's slices from now on. */
void pwb__region_freeze(struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* discard.c                                                              */

/* A write of pages [first, last] of @inode failed: make them dirty again,
 * except those a running pwb_inode_discard() covers. Return how many pages
 * newly became dirty, or -ENOMEM; *@counted says whether any page lies
 * outside the discard (only then is the error recorded and counted).
 * Caller holds inode->lock. */
int64_t pwb__redirty_failed_locked(struct pwb_inode *inode, uint64_t first,
				   uint64_t last, bool *counted) PWB__INTERNAL;
/* Wake threads waiting for @inode's writes (pwb__io_complete): with
 * @ending false the caller holds inode->lock and just cleared WRITEBACK
 * tags; with @ending true an end_write counted in nr_ending returned and
 * the caller holds no lock. */
void pwb__inode_writes_ended(struct pwb_inode *inode,
			     bool ending) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* writeback.c                                                            */

/* Run one work item on the calling flusher; return 0 or the first error
 * for its completion. */
int pwb__wb_do_work(struct pwb__wb_ctx *wb,
		    struct pwb__wb_work *work) PWB__INTERNAL;
/* Is work queued on @wb? Takes work_lock. */
bool pwb__wb_work_pending(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Periodic and background checks run after the queued work. */
void pwb__wb_check_old_data_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_check_background_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue an integrity-sync item on every context (or on @inode's only) and
 * wait for all of them. */
int pwb__sync_and_wait(struct pwb_bdi *bdi,
		       struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* The functions behind the sized entry points of abi.c: each takes the   */
/* library's own, full-size struct.                                       */

void pwb__bdi_config_defaults(struct pwb_bdi_config *cfg) PWB__INTERNAL;
int pwb__bdi_open(const char *path, const struct pwb_bdi_config *cfg,
		  struct pwb_bdi **bdip) PWB__INTERNAL;
int pwb__bdi_info(struct pwb_bdi *bdi,
		  struct pwb_bdi_info *info) PWB__INTERNAL;
int pwb__inode_open(struct pwb_bdi *bdi, uint64_t ino,
		    const struct pwb_inode_ops *ops, void *priv,
		    struct pwb_inode **inodep) PWB__INTERNAL;
int pwb__bdi_inject_fault(struct pwb_bdi *bdi,
			  const struct pwb_fault *fault) PWB__INTERNAL;
int pwb__fault_parse(const char *spec, struct pwb_fault *fault) PWB__INTERNAL;
int pwb__bdi_stats(struct pwb_bdi *bdi, struct pwb_stats *st) PWB__INTERNAL;
int pwb__wb_ctx_stats(struct pwb_bdi *bdi, unsigned int idx,
		      struct pwb_stats *st) PWB__INTERNAL;

#endif /* PWB_INTERNAL_H */
