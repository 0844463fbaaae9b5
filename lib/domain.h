/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * domain.h - memory domains: one dirty budget for several bdis (domain.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_DOMAIN_H
#define PWB_DOMAIN_H

#include "base.h"
#include "tenant.h"

struct pwb_bdi;
struct pwb__throttle_state;
struct pwb__pcache_dom;

/* Parts per million: a whole share. */
#define PWB__PPM 1000000u

struct pwb_domain {
	struct pwb_domain_config cfg;	/* copy; read-only */
	uint64_t period_ns;		/* read-only: cfg.period_ms */
	uint64_t update_ns;		/* read-only: shares recomputed this
					 * often at most */
	pthread_mutex_t lock;		/* the fields below up to members'
					 * shares; a leaf */
	struct cds_list_head members;	/* lock to change; RCU to walk
					 * (cds_list_*_rcu) */
	unsigned int nr_joined;		/* lock: bdis attached (published or
					 * not): destroy refuses while > 0 */
	unsigned int nr_members;	/* lock: bdis on members */
	unsigned int sum_min_ppm;	/* lock: floors of the joined bdis */
	uint64_t period_start;		/* lock: start of the current period */
	uint64_t periods;		/* lock: periods aged so far */
	uint64_t next_update;		/* uatomic: clock time of the next
					 * recomputation */
	struct pwb__tenant_scope tn;	/* tenants of the domain (tenant.h) */
	/* The members' page caches' budget (cfg.cache_bytes, not 0):
	 * created by the first member's cache, freed by the last one's
	 * (pcache-domain.c). lock to set; members read it while they are
	 * members. */
	struct pwb__pcache_dom *pcache;
};

/* One bdi's place in its domain: bdi->dom. Allocated at open, freed at
 * close after the grace period that follows its removal from the list. */
struct pwb__dom_member {
	struct pwb_domain *dom;		/* read-only */
	struct pwb_bdi *bdi;		/* read-only */
	struct cds_list_head node;	/* dom->lock; RCU readers */
	bool published;			/* dom->lock: on dom->members */
	bool strict;			/* read-only: PWB_BDI_STRICT_SHARE */
	unsigned int min_ppm;		/* read-only */
	unsigned int max_ppm;		/* read-only: 0 became PWB__PPM */
	uint64_t max_limit_pages;	/* read-only: the domain's dirty
					 * limit at max_ppm, in pages */
	/*
	 * Pages of this bdi whose writes completed, halved at the end of
	 * every period of the domain (a decaying count: the kernel's
	 * flexible proportions in spirit). Added to lock-free by the
	 * completions (uatomic), halved under dom->lock by compare and
	 * swap, so that no completion is lost.
	 */
	uint64_t events;
	uint64_t share_ppm;		/* uatomic: written under dom->lock */
	uint64_t cache_stamp;		/* uatomic: the domain's clock, in
					 * ms, at the bdi's last page
					 * charged (pcache-domain.c) */
};

/* Behind the sized entry points of abi.c: the library's full struct. */
void pwb__domain_config_defaults(struct pwb_domain_config *cfg) PWB__INTERNAL;
int pwb__domain_create(const struct pwb_domain_config *cfg,
		       struct pwb_domain **domp) PWB__INTERNAL;

/* Check the domain fields of @cfg and join its domain (if any): the
 * floor is reserved and bdi->dom set, but the bdi is not yet among the
 * members the others' throttles walk. 0 or -errno (message set). */
int pwb__domain_attach(struct pwb_bdi *bdi,
		       const struct pwb_bdi_config *cfg) PWB__INTERNAL;
/* Put an attached bdi, now whole (contexts published), among the
 * members, and recompute every member's share. */
void pwb__domain_publish(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Leave the domain: off the members, floor returned, shares recomputed.
 * The member is still read by walks in progress: free it with
 * pwb__domain_member_free() only after a grace period. No-op without a
 * domain. */
void pwb__domain_leave(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__domain_member_free(struct pwb_bdi *bdi) PWB__INTERNAL;

/* @pages of @bdi were written (a completion without error). */
void pwb__domain_written(struct pwb_bdi *bdi, uint64_t pages) PWB__INTERNAL;
/* Age the counts if a period ended by clock time @now and recompute every
 * member's share and thresholds; only if due unless @force. */
void pwb__domain_update(struct pwb_domain *dom, uint64_t now,
			bool force) PWB__INTERNAL;
/* The domain's clock (cfg.clock: pwb__clock_monotonic unless a test's).
 * Inline, so that the files below the domain (tenant.c) read it too. */
static inline uint64_t pwb__domain_now(const struct pwb_domain *dom)
{
	return dom->cfg.clock(dom->cfg.clock_arg);
}

/* What pwb__domain_throttle() asks of the throttle, OR-ed: */
#define PWB__DOMAIN_PAUSE	1u	/* pause the writer by the state */
#define PWB__DOMAIN_KICK	2u	/* start background writeback on
					 * every member with dirty pages */
/*
 * The throttle's view of a bdi in a domain. @s holds the bdi's own state
 * (its share's thresholds, its dirty + writeback pages); this adds the
 * domain's: no PWB__DOMAIN_PAUSE if the writer may run (the bdi under its
 * share's set point, or, not held strictly, under the set point of what
 * it may borrow: an eighth of the domain's free room, one writeback chunk
 * of its own at most); PWB__DOMAIN_PAUSE
 * if it is to be paused, with @s adjusted for pwb__throttle_pause(): the
 * limit raised to what it may borrow, the dirty count raised to the limit
 * when the domain as a whole is at its limit. PWB__DOMAIN_KICK while the
 * domain is over its background threshold (looked at only above the
 * bdi's set point). Lock-free; domain.c neither kicks nor sleeps itself.
 */
unsigned int pwb__domain_throttle(struct pwb_bdi *bdi,
				  struct pwb__throttle_state *s) PWB__INTERNAL;
/* True if @bdi's domain as a whole is over its background threshold. */
bool pwb__domain_over_bg(struct pwb_bdi *bdi) PWB__INTERNAL;

#endif /* PWB_DOMAIN_H */
