// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * region.c - one inode's pages on several contexts (per-page policies)
 *
 * Under a policy with PWB_POLICY_F_PER_PAGE ("region") the pages of one
 * inode are written by several flushers. Each context that receives pages
 * of the inode gets a *slice*: a hidden struct pwb_inode with its own page
 * map (the dirty pages routed there), state, dirtied_when, write errors
 * and place on that context's lists. To the writeback engine a slice is an
 * inode like any other, so everything it promises (integrity sync, b_io
 * order, chunks, back-off, close, re-sharding) holds per slice; callbacks
 * see the application's inode (pwb__inode_app), and write errors are also
 * recorded on it, where pwb_fsync() reads them.
 *
 *   application's inode 7 (pages 0..N)
 *      |  pwb_mark_dirty: map_page(page) -> region -> context
 *      +-- slice 0 --> ctx 0: b_dirty ... [7/0] ...   flusher 0
 *      +-- slice 1 --> ctx 1: b_dirty ... [7/1] ...   flusher 1
 *      +-- slice 2 --> ctx 2: b_io    ... [7/2] ...   flusher 2
 *   pwb_fsync(7): integrity work on every slice's context, all queued,
 *   then waited for, then one device flush.
 *
 * The rule that keeps data right: a page is dirty or in flight in at most
 * one holder (the inode itself, for pages dirtied before a switch to a
 * per-page policy, or one slice). A page dirtied while a holder has it
 * DIRTY or WRITEBACK goes to that holder, so a page is never in flight
 * from two contexts (whose writes could land in either order). Routing
 * decisions are serialised by the inode's route_lock; they read each
 * holder's map under that holder's lock, one at a time, and flushers set
 * WRITEBACK and clear DIRTY together under the same lock.
 *
 * Lock order: route_lock, then wb->list_lock, then inode->lock (a slice's
 * or its inode's, never both). Slices live until their inode is freed.
 */
#include "base.h"
#include "pagemap.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "inode.h"
#include "region.h"

#include <stdlib.h>
#include <string.h>

int pwb__region_attach(struct pwb_inode *inode)
{
	struct pwb__region *r;

	if (PWB__RCU_DEREF(inode->region))
		return 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pwb__mutex_init(&r->route_lock, PWB__LOCK_ROUTE);
	r->first_slot = -1;
	/* Under inode->lock: pwb_mark_dirty()'s whole-inode path checks
	 * for it there before it tags pages on the inode itself. */
	pthread_mutex_lock(&inode->lock);
	if (!inode->region) {
		PWB__RCU_ASSIGN(inode->region, r);
		r = NULL;
	}
	pthread_mutex_unlock(&inode->lock);
	if (r) {
		pthread_mutex_destroy(&r->route_lock);
		free(r);
	}
	return 0;
}

static void slice_free(struct pwb_inode *s)
{
	pwb__map_destroy(&s->map);
	pthread_cond_destroy(&s->users_cond);
	pthread_cond_destroy(&s->wb_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void pwb__region_free(struct pwb_inode *inode)
{
	struct pwb__region *r = inode->region;
	unsigned int i;

	if (!r)
		return;
	for (i = 0; i < PWB_MAX_WB_CTX; i++)
		if (r->slice[i])
			slice_free(r->slice[i]);
	pthread_mutex_destroy(&r->route_lock);
	free(r);
}

/* The slice of @slot, made if missing. Caller holds route_lock. */
static struct pwb_inode *slice_get_locked(struct pwb_inode *inode,
					  unsigned int slot)
{
	struct pwb__region *r = inode->region;
	struct pwb_inode *s = r->slice[slot];

	pwb__lockdep_assert_held(&r->route_lock);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->ino = inode->ino;
	s->bdi = inode->bdi;
	s->ops = inode->ops;
	s->priv = inode->priv;
	s->wb_hint = -1;
	s->parent = inode;
	s->slot = slot;
	s->tenant = inode->tenant;	/* fixed once a region routes */
	pwb__mutex_init(&s->lock, PWB__LOCK_INODE);
	pthread_cond_init(&s->users_cond, NULL);
	pthread_cond_init(&s->wb_cond, NULL);
	pwb__map_init(&s->map);
	CDS_INIT_LIST_HEAD(&s->io_list);
	PWB__RCU_ASSIGN(r->slice[slot], s);
	return s;
}

unsigned int pwb__region_holders_rcu(struct pwb_inode *inode,
				     struct pwb_inode **out)
{
	struct pwb__region *r = PWB__RCU_DEREF(inode->region);
	unsigned int i, nr = 0;

	out[nr++] = inode;
	if (!r)
		return nr;
	for (i = 0; i < PWB_MAX_WB_CTX; i++) {
		struct pwb_inode *s = PWB__RCU_DEREF(r->slice[i]);

		if (s && PWB__RCU_DEREF(s->wb))
			out[nr++] = s;
	}
	return nr;
}

void pwb__region_freeze(struct pwb_inode *inode)
{
	struct pwb__region *r = inode->region;
	unsigned int i;

	pthread_mutex_lock(&r->route_lock);
	for (i = 0; i < PWB_MAX_WB_CTX; i++) {
		struct pwb_inode *s = r->slice[i];

		if (!s)
			continue;
		/* A closing inode's writes are waited for before a visit
		 * releases it (writeback.c): so are its slices'. */
		pthread_mutex_lock(&s->lock);
		s->state |= PWB__I_FREEING;
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&r->route_lock);
}

/* Does @h hold (dirty or in flight) a page of [first, last]? */
static bool holds_any(struct pwb_inode *h, uint64_t first, uint64_t last)
{
	uint64_t f;
	bool ret;

	pthread_mutex_lock(&h->lock);
	ret = (pwb__map_find(&h->map, PWB__TAG_DIRTY, first, &f) &&
	       f <= last) ||
	      (pwb__map_find(&h->map, PWB__TAG_WRITEBACK, first, &f) &&
	       f <= last);
	pthread_mutex_unlock(&h->lock);
	return ret;
}

/* Where a routing decision goes. */
struct route {
	unsigned long gen;		/* reshard_gen it was made under */
	struct pwb_inode *h;		/* holder: the inode or a slice */
	struct pwb__wb_ctx *wb;		/* its context if it has none yet */
	uint64_t key;			/* its ordering key then */
	uint64_t lsn;			/* pwb_mark_dirty_lsn's (0: none) */
};

/*
 * Tag [first, last] DIRTY in holder @h, with the LSN of @rt in @h's own
 * page map (writeback of @h holds them back). -EAGAIN if @h has no context
 * yet and a re-shard ran since the decision (decide again). Caller holds
 * route_lock.
 */
static int64_t dirty_in(struct pwb_inode *h, const struct route *rt,
			uint64_t first, uint64_t last)
{
	struct pwb_bdi *bdi = h->bdi;
	bool attach;
	int64_t n;

	pthread_mutex_lock(&h->lock);
	if (!h->wb && pwb__aread(&bdi->reshard_gen) != rt->gen) {
		pthread_mutex_unlock(&h->lock);
		return -EAGAIN;
	}
	/* A holder that has pages has a context; only rt->h may not. */
	n = pwb__inode_dirty_locked(h, rt->wb, rt->key, first, last, rt->lsn,
				    &attach);
	pthread_mutex_unlock(&h->lock);
	if (n < 0)
		return pwb__err(-ENOMEM, "pwb_mark_dirty: out of memory");
	if (attach)
		pwb__inode_attach_dirty(h);
	return n;
}

/* A holder other than @not that has a page of [first, last], or NULL.
 * Caller holds route_lock. */
static struct pwb_inode *owner_in(struct pwb_inode *inode,
				  struct pwb_inode *not, uint64_t first,
				  uint64_t last)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr = pwb__region_holders_rcu(inode, h);

	for (i = 0; i < nr; i++)
		if (h[i] != not && holds_any(h[i], first, last))
			return h[i];
	return NULL;
}

/*
 * Dirty [first, last] in the holder @rt names, except pages another holder
 * has, which stay there. Caller holds route_lock. Pages dirtied or -errno.
 */
static int64_t dirty_routed(struct pwb_inode *inode, const struct route *rt,
			    uint64_t first, uint64_t last)
{
	uint64_t q = first;
	int64_t n, total = 0;

	if (!owner_in(inode, rt->h, first, last))
		return dirty_in(rt->h, rt, first, last);
	/* Rare: a page dirtied again while another context has it. */
	for (;;) {
		struct pwb_inode *o = owner_in(inode, rt->h, q, q);
		struct route ort = *rt;

		if (o)
			ort.h = o;
		n = dirty_in(ort.h, &ort, q, q);
		if (n < 0)
			return n;
		total += n;
		if (q == last)
			return total;
		q++;
	}
}

/*
 * Decide where pages from @first on go, for a run [first, *@end] of pages
 * (at most @last) the policy sends to one context: a slice under a
 * per-page policy, the inode itself under any other. Calls the policy,
 * hence the application's map_page: no lock held. Caller holds
 * rcu_read_lock.
 */
static int decide(struct pwb_inode *inode, uint64_t first, uint64_t last,
		  uint64_t *end, struct route *rt)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__wb_ctx_array *arr;
	struct pwb__policy *pol;
	unsigned int c;

	rt->gen = pwb__aread(&bdi->reshard_gen);
	arr = PWB__RCU_DEREF(bdi->ctxs);
	pol = PWB__RCU_DEREF(bdi->policy);
	rt->key = 0;
	if (!(pol->flags & PWB_POLICY_F_PER_PAGE)) {
		/* Switched away: whole-inode placement, as at first
		 * dirtying; slices keep what they hold. */
		*end = last;
		rt->h = inode;
		rt->wb = arr->ctx[pwb__policy_select(pol, inode, first,
						     arr->nr)];
		rt->key = pwb__policy_key(pol, inode, first);
		return -1;
	}
	c = pwb__policy_select_page(pol, inode, first, arr->nr);
	*end = first;
	while (*end < last &&
	       pwb__policy_select_page(pol, inode, *end + 1, arr->nr) == c)
		(*end)++;
	rt->wb = arr->ctx[c];
	rt->h = NULL;
	return (int)c;
}

/* Route and dirty [first, *@end] with @lsn; pages dirtied or -errno. */
static int64_t route_run(struct pwb_inode *inode, uint64_t first,
			 uint64_t last, uint64_t lsn, uint64_t *end)
{
	struct pwb__region *r = inode->region;
	struct route rt;
	bool freeing;
	int64_t n;
	int slot;

	for (;;) {
		slot = decide(inode, first, last, end, &rt);
		rt.lsn = lsn;
		pthread_mutex_lock(&r->route_lock);
		pthread_mutex_lock(&inode->lock);
		freeing = inode->state & PWB__I_FREEING;
		pthread_mutex_unlock(&inode->lock);
		if (freeing) {
			pthread_mutex_unlock(&r->route_lock);
			return pwb__err(-EBADF, "pwb_mark_dirty: inode %llu is "
						"being closed",
					(unsigned long long)inode->ino);
		}
		if (slot >= 0) {
			rt.h = slice_get_locked(inode, (unsigned int)slot);
			if (!rt.h) {
				pthread_mutex_unlock(&r->route_lock);
				return pwb__err(-ENOMEM, "pwb_mark_dirty: out "
							 "of memory");
			}
			if (r->first_slot < 0)
				pwb__aset(&r->first_slot, slot);
		}
		n = dirty_routed(inode, &rt, first, *end);
		pthread_mutex_unlock(&r->route_lock);
		if (n != -EAGAIN)
			return n;
		/* A re-shard retired the context we chose: choose again. */
	}
}

int pwb__region_mark_dirty(struct pwb_inode *inode, uint64_t first,
			   uint64_t last, uint64_t lsn)
{
	int64_t n, total = 0;
	uint64_t end;

	for (;;) {
		n = route_run(inode, first, last, lsn, &end);
		if (n < 0) {
			pwb__inode_exit(inode, PWB__HOLD_RCU);
			return (int)n;
		}
		total += n;
		if (end == last)
			break;
		first = end + 1;
	}
	return pwb__mark_dirty_tail(inode, total);
}

void pwb__region_report(struct pwb_inode *inode, int err)
{
	struct pwb_inode *app = inode->parent;

	if (!err || !app)
		return;
	/* The slice lives as long as its inode: @app is not freed before
	 * the flusher or completion calling us is done with the slice. */
	pthread_mutex_lock(&app->lock);
	pwb__errseq_set(&app->wb_err, err);
	pthread_mutex_unlock(&app->lock);
}
