/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * wb_ctx.h - writeback contexts, work items and flusher threads
 * (wb_ctx.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_WB_CTX_H
#define PWB_WB_CTX_H

#include "base.h"
#include "completion.h"
#include "xarray.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb__io;
struct pwb__policy;

/* ---------------------------------------------------------------------- */
/* Work items (wb_ctx.c queues them, writeback.c runs them)               */

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
	uint64_t log_force_ns;		/* the flusher: time it spent in
					 * log_force for this item */
};

/* ---------------------------------------------------------------------- */
/* wb_ctx.c: writeback contexts                                           */

/* Time callers slept, by enum pwb_block_cause, and the log2 latency
 * histograms (enum pwb_hist): all uatomic, added by blocked.c, read by
 * stats. One of these in each context's counters, one on the bdi for
 * waits of the bdi as a whole. */
struct pwb__blocked {
	uint64_t ns[PWB_BLOCK_SLOTS];
	uint64_t events[PWB_BLOCK_SLOTS];
	uint64_t hist[PWB_HIST_NR][PWB_HIST_BUCKETS];
	uint64_t hist_sum[PWB_HIST_NR];
};

/* Record @ns in histogram @which (enum pwb_hist) of @blk: bucket
 * floor(log2(ns)), 0 for 0. Lock-free. */
static inline void pwb__hist_add(struct pwb__blocked *blk, unsigned int which,
				 uint64_t ns)
{
	unsigned int b = ns ? 63u - (unsigned int)__builtin_clzll(ns) : 0;

	uatomic_inc(&blk->hist[which][b]);
	uatomic_add(&blk->hist_sum[which], ns);
}

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
	uint64_t busy_waits;	/* integrity pass slept on a busy inode */
	/* Time blocked and latency histograms (blocked.c): callers add on
	 * their slow path only, the flusher its write completions. */
	struct pwb__blocked blk;
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
	/* Small requests (PWB__IO_SMALL_PAGES), kept the same way, at most
	 * io_depth + 1: one page per I/O must not mean a malloc per I/O. */
	struct pwb__io *io_small;
	unsigned int nr_io_small;
	uint64_t nospc_until;		/* clock ns: ENOSPC pauses periodic and
					 * background passes until then */
	uint64_t nospc_backoff_ns;	/* that pause, doubled per ENOSPC */

	/*
	 * How this context's passes use lists, from the shard policy's flags
	 * (pwb__ctxs_apply_policy): changed only with the flushers parked,
	 * or at open before any inode is dirty.
	 */
	struct pwb__wb_ctx *lists;	/* pwb__aread: whose lists the passes
					 * work: this context, or context 0
					 * under F_SHARED_LIST */
	unsigned int claim_batch;	/* pwb__aread: F_SHARED_LIST claims */
	bool shared;			/* pwb__aread: F_SHARED_LIST, so this
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
/* A context array of @nr: the first ones taken from @old, the rest new
 * (initialised, not served yet). NULL on failure, with *@err set to the
 * negative errno (message set). */
struct pwb__wb_ctx_array *pwb__ctx_array_alloc(struct pwb_bdi *bdi,
					       struct pwb__wb_ctx_array *old,
					       unsigned int nr,
					       int *err) PWB__INTERNAL;

/* Is work queued on @wb? Takes work_lock. */
bool pwb__wb_work_pending(struct pwb__wb_ctx *wb) PWB__INTERNAL;

#endif /* PWB_WB_CTX_H */
