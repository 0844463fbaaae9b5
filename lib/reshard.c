// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * reshard.c - changing the number of writeback contexts while running
 *
 * The kernel moves an inode between writeback structures with
 * inode_switch_wbs(): wait until it is not under writeback, then move it
 * under both list locks. We do the same for every affined inode at once:
 *
 *  1. park the flushers between work items, each with nothing in flight;
 *  2. bump reshard_gen (syncs and first dirtyings running now retry) and
 *     publish the new context array with RCU (new contexts are ready);
 *  3. give the contexts the list arrangement of the (new) policy (own or
 *     shared lists, FIFO or key-ordered b_io), then move every inode
 *     whose context or key the shard policy now says differs, under the
 *     two list locks (lower index first) and the inode lock, onto the
 *     same kind of list, keeping b_dirty sorted by dirtied_when;
 *  4. retire the contexts beyond the new count (their queued work ends
 *     with -EAGAIN, which its submitter retries), fold their counters into
 *     retired_stats, stop surplus flushers, resume, start new flushers;
 *  5. free retired contexts after an RCU grace period.
 */
#include "probes.h"
#include "base.h"
#include "pagemap.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "inode.h"
#include "region.h"

#include <stdlib.h>

/* Insert @inode into @wb's b_dirty keeping it sorted by dirtied_when.
 * Caller holds wb->list_lock and inode->lock; @inode is on no list. */
static void insert_dirty_sorted(struct pwb__wb_ctx *wb,
				struct pwb_inode *inode)
{
	struct cds_list_head *pos = wb->b_dirty.prev;

	pwb__inode_move_locked(wb, inode, PWB__LIST_DIRTY);
	/* It is now at the tail; walk it back past younger inodes. */
	cds_list_del(&inode->io_list);
	while (pos != &wb->b_dirty &&
	       pwb__aread(&cds_list_entry(pos, struct pwb_inode, io_list)
				    ->dirtied_when) >
		       pwb__aread(&inode->dirtied_when))
		pos = pos->prev;
	cds_list_add(&inode->io_list, pos);
}

/* Move @inode from @from to @to (which may be the same context) with
 * ordering key @key. Flushers are parked: nothing is in flight and no
 * inode is I_SYNC. */
static void switch_inode(struct pwb_inode *inode, struct pwb__wb_ctx *from,
			 struct pwb__wb_ctx *to, uint64_t key)
{
	struct pwb__wb_ctx *first = from->idx < to->idx ? from : to;
	struct pwb__wb_ctx *second = first == from ? to : from;
	enum pwb__list l;
	uint64_t dirty;

	/* Lower index first: nothing else takes two list locks. */
	pthread_mutex_lock(&first->list_lock);
	if (second != first)
		pwb__mutex_lock_nested(&second->list_lock);
	pthread_mutex_lock(&inode->lock);
	if (inode->wb == from && !(inode->state & PWB__I_GONE)) {
		l = inode->on_list;
		pwb__inode_move_locked(from, inode, PWB__LIST_NONE);
		inode->xa.key = key;
		if (to != from) {
			dirty = inode->map.count[PWB__TAG_DIRTY];
			uatomic_sub(&from->stats.dirty_pages, dirty);
			uatomic_add(&to->stats.dirty_pages, dirty);
			uatomic_dec(&from->stats.nr_inodes);
			uatomic_inc(&to->stats.nr_inodes);
			PWB__RCU_ASSIGN(inode->wb, to);
		}
		if (l == PWB__LIST_DIRTY)
			insert_dirty_sorted(to, inode);
		else if (l != PWB__LIST_NONE)
			pwb__inode_move_locked(to, inode, l);
	}
	pthread_mutex_unlock(&inode->lock);
	if (second != first)
		pthread_mutex_unlock(&second->list_lock);
	pthread_mutex_unlock(&first->list_lock);
}

/* Where should @inode live among @arr's contexts, under which key? */
static struct pwb__wb_ctx *new_home(struct pwb_bdi *bdi,
				    struct pwb_inode *inode,
				    struct pwb__wb_ctx_array *arr,
				    uint64_t *key)
{
	uint64_t first = 0;

	pthread_mutex_lock(&inode->lock);
	pwb__map_find(&inode->map, PWB__TAG_DIRTY, 0, &first);
	pthread_mutex_unlock(&inode->lock);
	*key = pwb__policy_key(bdi->policy, inode, first);
	return arr->ctx[pwb__policy_select(bdi->policy, inode, first,
					   arr->nr)];
}

/*
 * Move the region slices of @inode (region.c) to their homes in @arr: slot
 * s to context s % nr, whatever the policy now (its pages were routed
 * there), or to context 0 under a shared list. Their pages stay theirs.
 */
static void move_slices(struct pwb_bdi *bdi, struct pwb_inode *inode,
			struct pwb__wb_ctx_array *arr)
{
	bool shared = bdi->policy->flags & PWB_POLICY_F_SHARED_LIST;
	unsigned int i;

	for (i = 0; i < PWB_MAX_WB_CTX; i++) {
		struct pwb_inode *s = PWB__RCU_DEREF(inode->region->slice[i]);
		struct pwb__wb_ctx *from, *to;
		uint64_t first = 0, key, old_key;

		if (!s)
			continue;
		pthread_mutex_lock(&s->lock);
		from = s->state & PWB__I_GONE ? NULL : s->wb;
		old_key = s->xa.key;
		pwb__map_find(&s->map, PWB__TAG_DIRTY, 0, &first);
		pthread_mutex_unlock(&s->lock);
		if (!from)
			continue;
		to = arr->ctx[shared ? 0 : i % arr->nr];
		key = pwb__policy_key(bdi->policy, inode, first);
		if (to != from || key != old_key)
			switch_inode(s, from, to, key);
	}
}

/*
 * Re-shard to @nr contexts and, if @pol is not NULL, to policy @pol (which
 * then belongs to the bdi; the old one is destroyed). Caller holds
 * reshard_lock.
 */
static int reshard_locked(struct pwb_bdi *bdi, unsigned int nr,
			  struct pwb__policy *pol)
{
	struct pwb__wb_ctx_array *old = bdi->ctxs, *arr;
	struct pwb__policy *old_pol = bdi->policy;
	unsigned int i, old_nf, new_nf;
	struct pwb_inode **inodes;
	size_t n_inodes, k;
	int ret = 0;

	pwb__lockdep_assert_held(&bdi->reshard_lock);

	arr = pwb__ctx_array_alloc(bdi, old, nr, &ret);
	if (!arr)
		return ret;
	pwb__flushers_park(bdi);
	uatomic_inc(&bdi->reshard_gen);
	PWB__RCU_ASSIGN(bdi->ctxs, arr);
	if (pol)
		PWB__RCU_ASSIGN(bdi->policy, pol);
	if (nr != old->nr)
		pwb__policy_nr_changed(bdi->policy, nr);
	/* Shared or own lists, FIFO or ordered b_io, before inodes move. */
	pwb__ctxs_apply_policy(arr, bdi->policy);

	/*
	 * Snapshot the inodes only now: an inode opened after a snapshot
	 * taken before the bump could be affined to a context from the old
	 * array (its first dirtying saw the old reshard_gen) and stay on it
	 * after that context is freed (found by tests/stress-test under
	 * TSan). The read-side section lasts until we are done with them:
	 * an inode that a pwb_inode_close() unregisters meanwhile is not
	 * freed under us.
	 */
	rcu_read_lock();
	inodes = pwb__bdi_collect_inodes(bdi, &n_inodes);

	/*
	 * Every inode, affined or not, takes its lock here: a first dirtying
	 * that chose from the old array (or with the old policy) either
	 * finished before, and is moved now, or sees the new reshard_gen and
	 * chooses again.
	 */
	for (k = 0; k < n_inodes; k++) {
		struct pwb_inode *inode = inodes[k];
		struct pwb__wb_ctx *from, *to;
		uint64_t key, old_key;

		/* Under a per-page policy every inode routes page by page
		 * from now on (without memory it stays whole). */
		if (bdi->policy->flags & PWB_POLICY_F_PER_PAGE)
			pwb__region_attach(inode);
		if (PWB__RCU_DEREF(inode->region))
			move_slices(bdi, inode, arr);
		pthread_mutex_lock(&inode->lock);
		from = inode->state & PWB__I_GONE ? NULL : inode->wb;
		old_key = inode->xa.key;
		pthread_mutex_unlock(&inode->lock);
		if (!from)
			continue;
		to = new_home(bdi, inode, arr, &key);
		if (to != from || key != old_key)
			switch_inode(inode, from, to, key);
	}
	pwb__rcu_read_unlock();
	free(inodes);

	for (i = nr; i < old->nr; i++) {
		pwb__wb_ctx_retire(old->ctx[i]);
		pwb__wb_fold_slots(old->ctx[i]);
		pwb__wb_counters_add(&bdi->retired_stats, &old->ctx[i]->stats);
	}

	/*
	 * Flusher threads to match, decided while parked so that no context
	 * is ever served by two threads: surplus ones are told to stop, new
	 * ones start and park at once, then everyone resumes.
	 */
	old_nf = pwb__aread(&bdi->nr_flushers);
	new_nf = pwb__nr_flushers_for(bdi, nr);
	for (i = new_nf; i < old_nf; i++) {
		struct pwb__flusher *fl = bdi->flushers[i];

		pthread_mutex_lock(&fl->lock);
		fl->stop = true;
		pthread_mutex_unlock(&fl->lock);
	}
	for (i = old_nf; i < new_nf; i++) {
		if (pwb__flusher_start(bdi, i)) {
			/* Contexts stay served by the flushers we have. */
			new_nf = i;
			break;
		}
	}
	pwb__aset(&bdi->nr_flushers, new_nf);
	pwb__flushers_resume(bdi);
	for (i = new_nf; i < old_nf; i++)
		pwb__flusher_stop(bdi, i);
	/* Contexts may have changed hands: let every flusher look. */
	for (i = 0; i < new_nf; i++)
		pwb__flusher_kick(bdi->flushers[i]);

	/* Readers of the old array and policy (stats, sync, wakeups, first
	 * dirtyings) are done after a grace period. */
	pwb__synchronize_rcu();
	PWB_PROBE2(reshard, old->nr, nr);
	for (i = nr; i < old->nr; i++) {
		pwb__wb_ctx_destroy(old->ctx[i]);
		free(old->ctx[i]);
	}
	free(old);
	if (pol) {
		pwb__policy_destroy(old_pol);
		free(old_pol);
	}
	return 0;
}

int pwb__reshard_locked(struct pwb_bdi *bdi, unsigned int nr)
{
	pwb__lockdep_assert_held(&bdi->reshard_lock);

	return nr == bdi->ctxs->nr ? 0 : reshard_locked(bdi, nr, NULL);
}

PWB_API int pwb_bdi_set_policy(struct pwb_bdi *bdi, const char *spec)
{
	struct pwb__policy *pol;
	unsigned int built_nr;
	int ret;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_set_policy: NULL bdi");
	ret = pwb__no_flusher("pwb_bdi_set_policy");
	if (ret)
		return ret;
	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_bdi_set_policy"))
		return -ESHUTDOWN;
	pol = calloc(1, sizeof(*pol));
	if (!pol) {
		pwb__bdi_exit(bdi, PWB__HOLD_REF);
		return pwb__err(-ENOMEM, "out of memory");
	}
	/* Built apart from the live one: a bad spec changes nothing. It is
	 * built for the count of contexts now; a re-shard before it is
	 * installed tells it the new count. */
	rcu_read_lock();
	built_nr = PWB__RCU_DEREF(bdi->ctxs)->nr;
	pwb__rcu_read_unlock();
	ret = pwb__policy_create(bdi, spec, pol);
	if (ret) {
		free(pol);
		pwb__bdi_exit(bdi, PWB__HOLD_REF);
		return ret;
	}
	pthread_mutex_lock(&bdi->reshard_lock);
	if (bdi->ctxs->nr != built_nr)
		pwb__policy_nr_changed(pol, bdi->ctxs->nr);
	ret = reshard_locked(bdi, bdi->ctxs->nr, pol);
	pthread_mutex_unlock(&bdi->reshard_lock);
	if (ret) {
		pwb__policy_destroy(pol);
		free(pol);
	}
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	return ret;
}
