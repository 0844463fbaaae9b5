/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tenant.h - tenants: the kernel's cgroup writeback in user space
 * (tenant.c)
 *
 * tenant.c sits below the writeback engine: inode.c, discard.c, io.c,
 * writeback.c and throttle.c count pages on a tenant, ask for its share
 * and its place in the flushers' order of service, and act on the
 * answers; tenant.c calls none of them back (it reads their structs). It
 * tells the throttle to kick writeback or to pause a dirtier, and the
 * flusher how long a rate cap holds a round, and leaves the kicking and
 * sleeping to them.
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_TENANT_H
#define PWB_TENANT_H

#include "base.h"
#include "pacing.h"

struct pwb_bdi;
struct pwb_domain;
struct pwb_inode;
struct pwb__wb_ctx;
struct pwb__throttle_state;

/*
 * Where tenants live: embedded in struct pwb_bdi (bdi->tn) and struct
 * pwb_domain (dom->tn), zeroed with them. Every field is valid at zero,
 * so neither open nor create has anything to set up.
 */
struct pwb__tenant_scope {
	struct pwb_tenant *first;	/* the tenants created on the scope:
					 * tenant_lock (tenant.c) to change,
					 * RCU to walk (->next) */
	int64_t active_weight;		/* uatomic: sum of the weights of the
					 * tenants holding dirty or writeback
					 * pages (may dip below 0 for a moment:
					 * readers clamp) */
	/* bdi->tn only: */
	uint64_t nr_inodes;		/* uatomic: open inodes of the bdi
					 * with a tenant (0: writeback and
					 * throttling as without tenants) */
	uint64_t default_vt;		/* uatomic: virtual time of the bdi's
					 * untenanted inodes (weight 100) */
	uint64_t vclock;		/* uatomic: the bdi's virtual clock,
					 * the highest round minimum */
};

struct pwb_tenant {
	struct pwb_tenant_config cfg;	/* copy; read-only */
	struct pwb_domain *domain;	/* read-only: the scope, one of */
	struct pwb_bdi *bdi;		/*   these two non-NULL */
	struct pwb__tenant_scope *scope; /* tenant_lock: &domain->tn or
					 * &bdi->tn; NULL once the bdi was
					 * closed or the domain destroyed */
	struct pwb_tenant *next;	/* tenant_lock; RCU readers */
	uint64_t vt_scale;		/* read-only: PWB__TENANT_VT / weight */

	/* Pages of the tenant's inodes: counted under the inode's lock,
	 * with uatomic, read lock-free. Bytes: a tenant of a domain has
	 * inodes on bdis of several page sizes. */
	uint64_t held;			/* uatomic: dirty + writeback bytes */
	uint64_t writeback;		/* uatomic: of which being written */
	uint64_t max_held;		/* uatomic: the most held so far */
	uint64_t dirtied;		/* uatomic: bytes newly dirtied */
	uint64_t written;		/* uatomic: bytes written (no error) */
	uint64_t nr_inodes;		/* uatomic: inodes attached */
	uint64_t vt;			/* uatomic: 512-byte units sent to
					 * the device, scaled by vt_scale
					 * (its virtual time: the flushers
					 * serve the lowest first; wraps
					 * after 900 PiB at weight 1) */
	uint64_t throttle_ns;		/* uatomic: time its dirtiers slept */
	uint64_t throttle_events;	/* uatomic */
	uint64_t rate_limited_ns;	/* uatomic: debt its rate cap ran up */
	uint64_t rate_until;		/* uatomic: clock ns its rate cap's
					 * debt lasts until */
	uint64_t limit_bytes;		/* uatomic: its last computed limit */
	uint64_t blocked_ns[PWB_BLOCK_SLOTS];	/* uatomic: its callers'
						 * waits (blocked.c) */
	uint64_t blocked_events[PWB_BLOCK_SLOTS]; /* uatomic */
	/* The throttle's last decision (tenant.c), all uatomic: the scope's
	 * limits and active weight it was made from, and the held bytes
	 * below which nothing is to be done while those stay. */
	uint64_t c_slim;
	uint64_t c_sbg;
	int64_t c_aw;
	uint64_t c_free;
	unsigned long fresh;		/* uatomic: held pages again after
					 * holding none (raised to the
					 * virtual clock at the next round) */
	struct pwb__rate_bucket rate;	/* the tenant's rate cap; own lock */
	/* Its dirtiers, counted like a bdi's (throttle.c). */
	uint64_t thr_window;		/* uatomic */
	uint64_t thr_cur;		/* uatomic */
	uint64_t thr_prev;		/* uatomic */
};

/* Virtual time of 512 bytes at weight 1: at weight w they add
 * PWB__TENANT_VT / w. */
#define PWB__TENANT_VT 10000ull
/* The default weight, also that of a bdi's untenanted inodes. */
#define PWB__TENANT_DEFAULT_WEIGHT 100u
/* What a tenant's rate cap lets through at once (its bucket's burst). */
#define PWB__TENANT_CHUNK_BYTES (4ull << 20)
/* A flusher's visit of an inode while tenants share the bdi writes at
 * most this much: the grain of the order of service by weight, finer
 * than the half-second chunk of a bdi without tenants. A tenant gets its
 * share within a visit of each owner, so over a few seconds of a slow
 * device (50 MiB/s, a share of 1/7: a visit of 4 MiB would be a sixth
 * of 5 s of it) the grain is what the proportion is off by. */
#define PWB__TENANT_VISIT_BYTES (1ull << 20)

/* ---------------------------------------------------------------------- */
/* Page accounting: the callers hold the inode's lock (inode->tenant and  */
/* the counts change together under it) and pass inode->tenant, non-NULL. */

/* @bytes newly dirtied. */
void pwb__tenant_dirtied(struct pwb_tenant *t, uint64_t bytes) PWB__INTERNAL;
/* @bytes went from dirty to writeback (submitted by a flusher). */
void pwb__tenant_start_write(struct pwb_tenant *t,
			     uint64_t bytes) PWB__INTERNAL;
/* @bytes of writeback ended; @redirtied of them are dirty again (failure,
 * "not now"); @ok: written without error. */
void pwb__tenant_end_write(struct pwb_tenant *t, uint64_t bytes,
			   uint64_t redirtied, bool ok) PWB__INTERNAL;
/* @bytes of dirty pages dropped (discard, close). */
void pwb__tenant_dropped(struct pwb_tenant *t, uint64_t bytes) PWB__INTERNAL;

/* A closing inode leaves its tenant, after pwb__inode_unlink() took its
 * pages (and its slices') off the tenant's count. */
void pwb__tenant_inode_closed(struct pwb_inode *inode) PWB__INTERNAL;
/* The scope is going away (bdi close, domain destroy): its tenants are
 * orphaned; pwb_tenant_destroy() still frees them. */
void pwb__tenant_scope_release(struct pwb__tenant_scope *sc) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* Throttling (throttle.c asks for an inode with a tenant)                */

/* What pwb__tenant_throttle_state() asks of the throttle, OR-ed: */
#define PWB__TENANT_KICK	1u	/* start background writeback */
#define PWB__TENANT_PAUSE	2u	/* pause the dirtier by the state */
/*
 * The throttle's state for a dirtier of tenant @t on @bdi: @s comes with
 * bw (the bdi's), dirtied and page_shift filled in. With PWB__TENANT_PAUSE
 * in the answer, the tenant's own state has replaced the rest (its limits,
 * held pages, dirtiers and its share of bw, at most its rate cap) and the
 * dirtier is above its set point; PWB__TENANT_KICK: the tenant is over its
 * background threshold (or has none and is to be paused). 0: go on.
 * Counts the calling thread among @t's dirtiers when it is to pause.
 * Lock-free; tenant.c neither kicks nor sleeps itself.
 */
unsigned int pwb__tenant_throttle_state(struct pwb_tenant *t,
					struct pwb_bdi *bdi,
					struct pwb__throttle_state *s)
	PWB__INTERNAL;
/* Add a finished balance (slept @ns in @events sleeps) to @t. */
void pwb__tenant_throttled(struct pwb_tenant *t, uint64_t ns,
			   uint64_t events) PWB__INTERNAL;
/* True if a tenant of @bdi (or of its domain) is over its background
 * threshold: background writeback goes on. Lock-free. */
bool pwb__tenant_over_bg(struct pwb_bdi *bdi) PWB__INTERNAL;

/* ---------------------------------------------------------------------- */
/* The flushers' order of service (writeback.c)                           */

/* One pass's round over b_io under tenants. */
struct pwb__tenant_round {
	uint64_t min_vt;	/* lowest virtual time among b_io's owners */
	uint64_t rate_wait;	/* least wait of an inode passed over for
				 * its tenant's rate cap (0: none) */
};

/* True if tenants share @wb's bdi: the pass then serves by weight. */
static inline bool pwb__tenant_active(const struct pwb_bdi *bdi,
				      const struct pwb__tenant_scope *tn)
{
	(void)bdi;
	return pwb__aread(&tn->nr_inodes) != 0;
}
/* Start a round: the lowest virtual time of the owners of b_io's inodes
 * (raising those left behind while idle to the bdi's clock). Caller holds
 * wb->list_lock. */
void pwb__tenant_round_start_locked(struct pwb__wb_ctx *wb,
				    struct pwb__tenant_round *r) PWB__INTERNAL;
/* Should the round pass over @inode (its owner is ahead in virtual time,
 * or its tenant's rate cap is in debt)? Caller holds wb->list_lock. */
bool pwb__tenant_skip_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			     struct pwb__tenant_round *r) PWB__INTERNAL;
/* @bytes of @inode go to the device: its owner's virtual time advances
 * (an untenanted inode's: the bdi's default). Returns true if the
 * tenant's rate cap is now in debt: end the visit. */
bool pwb__tenant_charge(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			uint64_t bytes) PWB__INTERNAL;

/* Behind the sized entry points of abi.c. */
void pwb__tenant_config_defaults(struct pwb_tenant_config *cfg) PWB__INTERNAL;
int pwb__tenant_create(struct pwb_domain *domain, struct pwb_bdi *bdi,
		       const struct pwb_tenant_config *cfg,
		       struct pwb_tenant **out) PWB__INTERNAL;
int pwb__tenant_stats(struct pwb_tenant *t,
		      struct pwb_tenant_stats *st) PWB__INTERNAL;

#endif /* PWB_TENANT_H */
