/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bdi.h - struct pwb_bdi, the entry helpers of public calls, device
 * flushes, the running bdi's state, re-sharding (bdi.c, bdi-state.c,
 * reshard.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_BDI_H
#define PWB_BDI_H

#include "base.h"
#include "pacing.h"
#include "wb_ctx.h"
#include "tenant.h"

struct pwb_inode;
struct pwb__autotune;
struct pwb__dom_member;
struct pwb__fault_state;
struct pwb__io_backend;
struct pwb__page_owner_ops;
struct pwb__policy;

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
	uint64_t bg_thresh_pages;	/* pwb__aread: 0 for no background
					 * writeback; lowered once by the
					 * page cache (pcache-owner.c); in a
					 * domain its share, set by domain.c,
					 * never above bg_cap_pages */
	uint64_t bg_cap_pages;		/* pwb__aread: 0, or the most
					 * bg_thresh_pages may be (half the
					 * cache, set once by the page cache
					 * when a library-owned inode opens) */
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
	bool closing;			/* lock (pwb__aread outside): close
					 * began; no new waiting call */
	bool dead;			/* pwb__aset by close, read under
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
	uint64_t flushed_epoch;		/* flush_lock; read without it
					 * (acquire): epochs <= covered */

	uint64_t dirty_limit_pages;	/* pwb__aread: 0: no hard limit
					 * (throttle.c); set at open, and in
					 * a domain by domain.c */
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
	/* Library-owned page cache (pcache-*.c): set at open, freed at
	 * close; its own counters are atomic. */
	struct pwb__pcache_bdi *pcache;
	/* Set with it, then read-only: how the engine reaches the pages
	 * the library owns (page-owner.h). */
	const struct pwb__page_owner_ops *page_owner;
	struct pwb__space *space;	/* set at open, freed at close: the
					 * allocator (space.h, own locks) */
	struct pwb__dom_member *dom;	/* set at open, freed at close: the
					 * bdi's place in its memory domain
					 * (domain.h); NULL: none */
	struct pwb__tenant_scope tn;	/* tenants of the bdi, counts of its
					 * tenanted inodes (tenant.h) */
	struct pwb__blocked blk;	/* uatomic: waits of the bdi as a
					 * whole or of no context, and their
					 * histograms (blocked.c) */
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
int pwb__inode_enter_slow(struct pwb_inode *inode, enum pwb__hold hold,
			  const char *who) PWB__INTERNAL;
void pwb__inode_exit_slow(struct pwb_inode *inode,
			  enum pwb__hold hold) PWB__INTERNAL;

/*
 * HOLD_RCU is only the read-side section, and pwb_mark_dirty() takes it on
 * every call: inline, so that the dirtying path pays for rcu_read_lock and
 * nothing else (a call and a switch on @hold were ~25 instructions of a
 * ~450-instruction pwb_mark_dirty, issue 29). @hold is a constant at
 * every call site, so the test folds away.
 */
static inline int pwb__inode_enter(struct pwb_inode *inode,
				   enum pwb__hold hold, const char *who)
{
	if (hold == PWB__HOLD_RCU) {
		rcu_read_lock();
		return 0;
	}
	return pwb__inode_enter_slow(inode, hold, who);
}

/* End what pwb__inode_enter(@inode, @hold) began. */
static inline void pwb__inode_exit(struct pwb_inode *inode,
				   enum pwb__hold hold)
{
	if (hold == PWB__HOLD_RCU) {
		pwb__rcu_read_unlock();
		return;
	}
	pwb__inode_exit_slow(inode, hold);
}

/* Caller holds rcu_read_lock: true once close is tearing @bdi down. */
static inline bool pwb__bdi_dead_rcu(const struct pwb_bdi *bdi)
{
	return pwb__aread(&bdi->dead);
}
/* -ESHUTDOWN with a message: @who was called on a bdi being torn down. */
int pwb__bdi_dead_err(const char *who) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* bdi-state.c: what the engine asks of the running bdi                   */

/* Tag a write of @inode that just finished (caller holds inode->lock). */
void pwb__bdi_write_done_locked(struct pwb_bdi *bdi,
				struct pwb_inode *inode) PWB__INTERNAL;
/* The epoch a flush must reach to cover every write finished so far. */
static inline uint64_t pwb__bdi_written_epoch(struct pwb_bdi *bdi)
{
	return pwb__aread(&bdi->written_epoch);
}
/* Raise bdi->log_durable to @lsn if it is below (lock-free). */
void pwb__bdi_log_durable_raise(struct pwb_bdi *bdi,
				uint64_t lsn) PWB__INTERNAL;
/* Total dirty pages over all contexts (approximate, lock-free). */
uint64_t pwb__bdi_dirty_pages(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_bdi_nr_wb_ctx() and pwb_bdi_writeback() for lib/'s own callers,
 * who pass a bdi, a known reason and known flags (no waiting from a
 * flusher); the thread's error message is left alone. */
unsigned int pwb__bdi_nr_wb_ctx(const struct pwb_bdi *bdi) PWB__INTERNAL;
int pwb__bdi_writeback(struct pwb_bdi *bdi, enum pwb_wb_reason reason,
		       unsigned int flags) PWB__INTERNAL;
/* The same, for a caller already inside a read-side section (the
 * dirtying path: a nested section is two more TLS look-ups per call). */
uint64_t pwb__bdi_dirty_pages_rcu(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Dirty + writeback pages over all contexts (lock-free); the caller is in
 * a read-side section. */
uint64_t pwb__bdi_held_pages_rcu(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Pages being written over all contexts (lock-free); the caller is in a
 * read-side section. */
uint64_t pwb__bdi_writeback_pages_rcu(struct pwb_bdi *bdi) PWB__INTERNAL;

/* Flusher threads for @nr_ctx contexts under this bdi's config. */
unsigned int pwb__nr_flushers_for(const struct pwb_bdi *bdi,
				  unsigned int nr_ctx) PWB__INTERNAL;
/* The count the automatic tuner starts from when nr_wb_ctx is 0, and the
 * count pwb_bdi_set_nr_wb_ctx(0) picks on a bdi without the tuner. */
unsigned int pwb__auto_nr_wb_ctx(const struct pwb_bdi *bdi) PWB__INTERNAL;
/* Every open inode (a snapshot, for walks that sleep); free() the array. */
struct pwb_inode **pwb__bdi_collect_inodes(struct pwb_bdi *bdi,
					   size_t *nr) PWB__INTERNAL;
/* The writeback counters of pwb_bdi_stats() alone, summed over every
 * context and the retired ones, into *@st (zeroed first): what the tuner
 * samples, without the query's entry, page-cache or allocator parts.
 * Lock-free; caller keeps @bdi open (before close tears it down). */
void pwb__bdi_wb_counters(struct pwb_bdi *bdi,
			  struct pwb_stats *st) PWB__INTERNAL;

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

#endif /* PWB_BDI_H */
