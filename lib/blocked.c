// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * blocked.c - time callers slept inside libpwb, by cause, and the log2
 * latency histograms
 *
 * Each place a public call may sleep (blocked.h) times the sleep with the
 * bdi's clock and adds it here, for its enum pwb_block_cause:
 *
 *	cause		where the caller sleeps
 *	throttle	throttle.c, the pause of pwb__balance_dirty()
 *	rate-cap	the same pause, when a rate cap set its pace
 *	cache-full	pcache-reclaim.c, room_wait() of a full cache
 *	sync-wait	writeback.c, waiting for queued integrity work
 *	log-force	the part of that wait spent in cfg.log_force
 *	device-flush	writeback.c, pwb__bdi_flush_device()
 *	stable-page	discard.c, waiting for writes of pages to end
 *	read		pcache-read.c, pcache-wait.c: device reads
 *	busy		closes waiting for calls or a flusher's visit
 *
 * Where the counts go: a wait about an inode to the inode's context
 * (struct pwb__wb_stats, so each context's line takes its own callers'
 * adds), a wait of the bdi as a whole (the throttle, the cache's room) or
 * of a call without an inode to the bdi's own struct pwb__blocked; and
 * to the caller's tenant. pwb_bdi_stats() sums them all; a re-shard
 * folds a retired context's counts into retired_stats like its others.
 *
 * The histograms: the write I/O latency is recorded by the flusher that
 * reaps the completion, in its own context's buckets; fsync latency and
 * throttle sleeps by the calling thread, only on their slow paths.
 */
#include "base.h"
#include "completion.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "tenant.h"
#include "inode.h"
#include "blocked.h"

#include <string.h>

PWB_API const char *pwb_block_cause_str(unsigned int cause)
{
	static const char *const names[] = {
		[PWB_BLOCK_THROTTLE] = "throttle",
		[PWB_BLOCK_CACHE_FULL] = "cache-full",
		[PWB_BLOCK_LOG_FORCE] = "log-force",
		[PWB_BLOCK_STABLE_PAGE] = "stable-page",
		[PWB_BLOCK_SYNC_WAIT] = "sync-wait",
		[PWB_BLOCK_DEVICE_FLUSH] = "device-flush",
		[PWB_BLOCK_RATE_CAP] = "rate-cap",
		[PWB_BLOCK_READ] = "read",
		[PWB_BLOCK_BUSY] = "busy",
	};

	if (cause >= sizeof(names) / sizeof(names[0]) || !names[cause])
		return "unknown";
	return names[cause];
}

/* The counters of @inode's context, or the bdi's own; under RCU, which
 * keeps a context retired meanwhile from being freed. */
static struct pwb__blocked *inode_blk_rcu(struct pwb_bdi *bdi,
					  struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb = inode ? PWB__RCU_DEREF(inode->wb) : NULL;

	return wb ? &wb->stats.blk : &bdi->blk;
}

void pwb__hist_add_inode(struct pwb_bdi *bdi, struct pwb_inode *inode,
			 unsigned int which, uint64_t ns)
{
	rcu_read_lock();
	pwb__hist_add(inode_blk_rcu(bdi, inode), which, ns);
	pwb__rcu_read_unlock();
}

void pwb__blocked_add(struct pwb_bdi *bdi, struct pwb_inode *inode,
		      struct pwb_tenant *t, unsigned int cause, uint64_t ns,
		      uint64_t events)
{
	struct pwb__blocked *blk;

	rcu_read_lock();
	blk = inode_blk_rcu(bdi, inode);
	uatomic_add(&blk->ns[cause], ns);
	uatomic_add(&blk->events[cause], events);
	pwb__rcu_read_unlock();
	if (t) {
		uatomic_add(&t->blocked_ns[cause], ns);
		uatomic_add(&t->blocked_events[cause], events);
	}
}

uint64_t pwb__blocked_since(struct pwb_bdi *bdi, struct pwb_inode *inode,
			    struct pwb_tenant *t, unsigned int cause,
			    uint64_t t0)
{
	uint64_t now = pwb__now(bdi);
	/* An injected clock may be set back: count nothing then. */
	uint64_t ns = now > t0 ? now - t0 : 0;

	pwb__blocked_add(bdi, inode, t, cause, ns, 1);
	return ns;
}

int pwb__blocked_completion_wait(struct pwb_bdi *bdi, struct pwb_inode *inode,
				 struct pwb__completion *c, uint64_t t0)
{
	uint64_t now, ns, log;
	struct pwb_tenant *t = inode ? pwb__aread(&inode->tenant) : NULL;
	int err;

	err = pwb__completion_wait(c);
	now = pwb__now(bdi);
	ns = now > t0 ? now - t0 : 0;
	/* Written under c->lock, which the wait took last. */
	log = PWB__MIN(c->log_force_ns, ns);
	if (log)
		pwb__blocked_add(bdi, inode, t, PWB_BLOCK_LOG_FORCE, log, 1);
	pwb__blocked_add(bdi, inode, t, PWB_BLOCK_SYNC_WAIT, ns - log, 1);
	return err;
}

void pwb__blocked_read(const struct pwb__blocked *src, struct pwb_stats *st)
{
	unsigned int i;

	for (i = 0; i < PWB_BLOCK_SLOTS; i++) {
		st->blocked_ns[i] += pwb__aread(&src->ns[i]);
		st->blocked_events[i] += pwb__aread(&src->events[i]);
	}
}

static void hist_read(const struct pwb__blocked *src, unsigned int which,
		      struct pwb_histogram *h)
{
	unsigned int i;

	for (i = 0; i < PWB_HIST_BUCKETS; i++) {
		uint64_t n = pwb__aread(&src->hist[which][i]);

		h->bucket[i] += n;
		h->count += n;
	}
	h->sum_ns += pwb__aread(&src->hist_sum[which]);
}

int pwb__bdi_histogram(struct pwb_bdi *bdi, unsigned int which,
		       struct pwb_histogram *h)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i;

	pwb__err_clear();
	if (!bdi || !h)
		return pwb__err(-EINVAL, "pwb_bdi_histogram: NULL %s",
				!bdi ? "bdi" : "h");
	if (which >= PWB_HIST_NR)
		return pwb__err(-EINVAL, "pwb_bdi_histogram: unknown "
					 "histogram %u",
				which);
	memset(h, 0, sizeof(*h));
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_histogram"))
		return -ESHUTDOWN;
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; i < arr->nr; i++)
		hist_read(&arr->ctx[i]->stats.blk, which, h);
	hist_read(&bdi->retired_stats.blk, which, h);
	hist_read(&bdi->blk, which, h);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}
