/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-internal.h - libpwb's private structures and internal interfaces
 *
 * Not installed. White-box tests include it and link libpwb-internal.la.
 *
 * Locking, outermost first:
 *
 *	bdi->lock			(inode registry changes, close)
 *	  wb->list_lock			(the four dirty lists of one context)
 *	    inode->lock			(page map, state, dirtied_when, errors)
 *	  wb->work_lock			(work queue, flusher wakeups; never held
 *					 together with list_lock or inode->lock)
 *	completion->lock		(leaf)
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

#define PWB__INTERNAL __attribute__((visibility("hidden")))

#define PWB__MIN(a, b) ((a) < (b) ? (a) : (b))
#define PWB__MAX(a, b) ((a) > (b) ? (a) : (b))
#define PWB__NSEC_PER_MSEC 1000000ull
#define PWB__NSEC_PER_SEC 1000000000ull

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

/* ---------------------------------------------------------------------- */
/* clock                                                                  */

uint64_t pwb__clock_monotonic(void *unused) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* Completions and work items                                             */

struct pwb__completion {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int pending;	/* work items still running */
	int err;		/* first error a work item reported */
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

/* One request to a flusher, the kernel's wb_writeback_work. */
struct pwb__wb_work {
	struct cds_list_head list;	/* on wb->work_list, under work_lock */
	enum pwb__sync_mode sync_mode;
	enum pwb_wb_reason reason;	/* for SYNC_NONE work */
	struct pwb_inode *inode;	/* only this inode (fsync), or NULL */
	int64_t nr_pages;		/* pages to write at most */
	struct pwb__completion *done;	/* signalled when finished, or NULL */
	bool auto_free;			/* free() when finished */
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
	struct iovec *iov;	/* iovcnt entries, one per page */
	int err;		/* result, set by the backend */
	struct cds_list_head list;	/* backend's own use */
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
/* Called by a backend when @io finished with @err (0 or -errno). Clears
 * the writeback tag, re-dirties the pages on error, records the error,
 * updates statistics, calls end_write and frees @io. */
void pwb__io_end(struct pwb__io *io, int err) PWB__INTERNAL;
/* The same without freeing @io (for requests that never reached a
 * backend, kept on the stack). */
void pwb__io_complete(struct pwb__io *io, int err) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* policy.c: the shard policy interface                                   */

/*
 * A shard policy decides which context an inode joins at its first
 * dirtying. Valid from version 1: name, init, fini, select.
 */
struct pwb__policy_ops {
	unsigned int version;
	const char *name;
	int (*init)(struct pwb_bdi *bdi, const char *args, void **state);
	void (*fini)(void *state);
	/* Return a context index below @nr_wb_ctx, or -errno. */
	int (*select)(void *state, struct pwb_inode *inode,
		      unsigned int nr_wb_ctx);
};

struct pwb__policy {
	const struct pwb__policy_ops *ops;
	void *state;
	char spec[64];
};

/* Parse "name[:args]" and instantiate the policy in @pol. */
int pwb__policy_create(struct pwb_bdi *bdi, const char *spec,
		       struct pwb__policy *pol) PWB__INTERNAL;
void pwb__policy_destroy(struct pwb__policy *pol) PWB__INTERNAL;
/* Context index for @inode, whose first dirtied page is @index; always
 * valid: a failing or out-of-range answer falls back to inode-hash. Called
 * with no lock held (a policy may call the inode's map_page). */
unsigned int pwb__policy_select(struct pwb__policy *pol,
				struct pwb_inode *inode, uint64_t index,
				unsigned int nr_wb_ctx) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* wb_ctx.c: writeback contexts                                           */

/* Counters: written with uatomic by the flusher or dirtiers, read by stats. */
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
};

/*
 * A writeback context: the kernel's struct bdi_writeback, one of several per
 * bdi. Its flusher thread is the only thread that writes its inodes' pages.
 */
struct pwb__wb_ctx {
	struct pwb_bdi *bdi;
	unsigned int idx;

	pthread_mutex_t list_lock;
	struct cds_list_head b_dirty;	 /* list_lock: dirty, oldest first */
	struct cds_list_head b_io;	 /* list_lock: chosen for this pass */
	struct cds_list_head b_more_io;	 /* list_lock: pass left pages */
	struct cds_list_head b_dirty_time; /* list_lock: only times dirty */
	pthread_cond_t sync_cond;	/* with list_lock: I_SYNC cleared */

	pthread_mutex_t work_lock;
	pthread_cond_t work_cond;	/* work queued, or stop */
	struct cds_list_head work_list;	/* work_lock */
	bool stop;			/* work_lock */
	bool bg_kick;			/* work_lock: check background soon */
	pthread_t thread;
	bool thread_started;

	/* Flusher-thread only. */
	uint64_t last_old_flush;	/* clock ns of last periodic pass */
	uint64_t bw_stamp;		/* clock ns of last bandwidth update */
	uint64_t bw_written;		/* written bytes at bw_stamp */
	uint64_t avg_write_bw;		/* bytes/s, also read by stats */
	void *io_state;			/* the backend's */

	struct pwb__wb_stats stats;
};

int pwb__wb_ctx_init(struct pwb__wb_ctx *wb, struct pwb_bdi *bdi,
		     unsigned int idx) PWB__INTERNAL;
int pwb__wb_ctx_start(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_ctx_stop(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_ctx_destroy(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue @work and wake the flusher. */
void pwb__wb_queue_work(struct pwb__wb_ctx *wb,
			struct pwb__wb_work *work) PWB__INTERNAL;
/* Ask the flusher to check the background threshold. */
void pwb__wb_kick_background(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_stats_read(struct pwb__wb_ctx *wb,
			struct pwb_stats *st) PWB__INTERNAL;

/* The context array, published with RCU. */
struct pwb__wb_ctx_array {
	unsigned int nr;
	struct rcu_head rcu;
	struct pwb__wb_ctx *ctx[];
};

/* ---------------------------------------------------------------------- */
/* bdi.c                                                                  */

struct pwb_bdi {
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
	uint64_t max_io_pages;

	struct pwb__wb_ctx_array *ctxs;	/* RCU-published */
	struct pwb__policy policy;
	const struct pwb__io_backend *io;

	struct cds_lfht *inodes;	/* ino -> inode, RCU */
	pthread_mutex_t lock;		/* registry changes, closing */
	bool closing;			/* lock */
	uint64_t nr_open_inodes;	/* lock */

	pthread_mutex_t flush_lock;	/* serialises device flushes */
	uint64_t write_seq;		/* uatomic: bumped per finished write */
	uint64_t flushed_seq;		/* flush_lock: write_seq covered */

	uint64_t dirty_limit_pages;	/* 0: no hard limit (throttle.c) */
	unsigned long bg_active;	/* uatomic: background kick sent */
	uint64_t throttle_ns;		/* uatomic: time dirtiers slept */
	uint64_t throttle_events;	/* uatomic: sleeps */
	struct pwb__fault_state *fault;	/* RCU-published, io-fault.c */

	uint64_t nr_device_flushes;	/* flush_lock */

	pwb__errseq_t wb_err;		/* uatomic: errors on any inode */
	pwb__errseq_t sync_cursor;	/* flush_lock: pwb_sync's cursor */
};

static inline uint64_t pwb__now(const struct pwb_bdi *bdi)
{
	return bdi->cfg.clock(bdi->cfg.clock_arg);
}

static inline unsigned int pwb__page_size(const struct pwb_bdi *bdi)
{
	return 1u << bdi->page_shift;
}

/* Flush the device cache unless every write finished before @seq is already
 * covered by an earlier flush. Return 0 or -errno (also recorded). */
int pwb__bdi_flush_device(struct pwb_bdi *bdi, uint64_t seq) PWB__INTERNAL;
/* Total dirty pages over all contexts (approximate, lock-free). */
uint64_t pwb__bdi_dirty_pages(struct pwb_bdi *bdi) PWB__INTERNAL;
/* True while the flusher of the calling thread is running. */
bool pwb__in_flusher(void) PWB__INTERNAL;
/* Index of the context whose flusher is the calling thread, or -1. */
int pwb__flusher_ctx_idx(void) PWB__INTERNAL;
void pwb__set_flusher_ctx(int idx) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* throttle.c                                                             */

/* Count pages the calling thread newly dirtied (thread-local). */
void pwb__throttle_account(uint64_t pages) PWB__INTERNAL;
/* Wake every flusher for background writeback, once per round. */
void pwb__kick_background(struct pwb_bdi *bdi) PWB__INTERNAL;
/* pwb_balance_dirty() without argument checks. */
int pwb__balance_dirty(struct pwb_bdi *bdi) PWB__INTERNAL;

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
#define PWB__I_DIRTY_ANY                                                       \
	(PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META | PWB__I_DIRTY_TIME)

struct pwb_inode {
	uint64_t ino;
	struct pwb_bdi *bdi;
	struct pwb_inode_ops ops;
	void *priv;

	/* Chosen by the shard policy at first dirtying, under inode->lock;
	 * a later move between contexts holds both list_locks and
	 * inode->lock. Readers hold inode->lock or use CMM_LOAD_SHARED. */
	struct pwb__wb_ctx *wb;

	pthread_mutex_t lock;		/* the fields below, to the marker */
	unsigned int state;		/* PWB__I_* */
	uint64_t dirtied_when;		/* clock ns of the first dirtying */
	uint64_t dirtied_time_when;	/* same, for PWB__I_DIRTY_TIME */
	struct pwb__map map;		/* page tags */
	uint64_t writeback_index;	/* where the next cyclic pass starts */
	uint64_t last_write_seq;	/* bdi->write_seq after its last write */
	pwb__errseq_t wb_err;		/* write errors of this inode */
	pwb__errseq_t fsync_cursor;	/* pwb_fsync's cursor */
	unsigned int users;		/* fsyncs in progress */
	pthread_cond_t users_cond;	/* users dropped to 0 */
	/* ---- end of inode->lock ---- */

	struct cds_list_head io_list;	/* wb->list_lock: on a b_* list */
	enum pwb__list on_list;		/* wb->list_lock: which one */
	struct cds_lfht_node hnode;	/* bdi->inodes */
	struct rcu_head rcu;
};

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
/* Write back, unregister and free; pwb_inode_close and pwb_bdi_close. */
int pwb__inode_close(struct pwb_inode *inode) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* writeback.c                                                            */

/* Run one work item on the calling flusher; return 0 or the first error
 * for its completion. */
int pwb__wb_do_work(struct pwb__wb_ctx *wb,
		    struct pwb__wb_work *work) PWB__INTERNAL;
/* Periodic and background checks run after the queued work. */
void pwb__wb_check_old_data_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
void pwb__wb_check_background_flush(struct pwb__wb_ctx *wb) PWB__INTERNAL;
/* Queue an integrity-sync item on every context (or on @inode's only) and
 * wait for all of them. */
int pwb__sync_and_wait(struct pwb_bdi *bdi,
		       struct pwb_inode *inode) PWB__INTERNAL;

#endif /* PWB_INTERNAL_H */
