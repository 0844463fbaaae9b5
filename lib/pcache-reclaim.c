// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-reclaim.c - library-owned pages: the memory bound and reclaim.
 *
 * A page is charged to bdi->pcache->nr_pages before it is allocated; a
 * writer or reader that would go above cache_bytes first frees clean
 * pages itself (direct reclaim), else kicks background writeback and
 * waits, up to throttle_timeout_ms of cfg.clock, then fails with
 * -ETIMEDOUT. So the cache never holds more than cache_bytes. Above a
 * high watermark every context's flusher frees clean pages of its own
 * reclaim list (pcache.h) down to a low one. In a domain with a cache
 * budget the same holds for the members together, and room is taken
 * from the clean pages of any member (pcache-domain.c gives the order).
 */
#include "probes.h"
#include "pcache.h"

#include <signal.h>
#include <time.h>

/* ---------------------------------------------------------------------- */
/* Reclaim lists (pcache.h)                                               */

/*
 * Reclaim-list membership. lru_idx is claimed (-1 -> idx, seq_cst) before
 * the page is linked under that list's lock; a kill sets the reference
 * count dead (seq_cst) before it reads lru_idx. So either the kill sees
 * the claim and takes the list's lock to undo it, or the adder, which
 * looks for death under that lock, sees the kill and links nothing: a
 * dead page is never left on a list (its memory is freed after a grace
 * period and the list would point into it). The stores of -1 are
 * releases: the next claimer (acquire) may write the list head at once.
 */

/* Put @p at the tail of list @idx unless it is on one (or joining one),
 * or dead (pwb__pcache_lru_add() tests the first inline). */
void pwb__pcache_lru_join(struct pwb__pcache_bdi *pb, struct pwb__page *p,
			  unsigned int idx)
{
	int i = (int)(idx % PWB_MAX_WB_CTX);
	struct pwb__pcache_lru *l = &pb->lru[i];
	int none = -1;

	if (pwb__aread(&p->lru_idx) >= 0 ||
	    !__atomic_compare_exchange_n(&p->lru_idx, &none, i, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&l->lock);
	if (pwb__aread(&p->lru_idx) != i) {
		/* A kill undid the claim. */
	} else if (__atomic_load_n(&p->ref, __ATOMIC_SEQ_CST) < 0) {
		/* Dying: stays off. */
		__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
	} else {
		cds_list_add_tail(&p->lru, &l->head);
		p->lru_linked = true;
		pwb__aset(&l->len, pwb__aread(&l->len) + 1);
	}
	pthread_mutex_unlock(&l->lock);
}

/* Take dead page @p off its list, or undo a claim on one. */
void pwb__pcache_lru_del(struct pwb__pcache_bdi *pb, struct pwb__page *p)
{
	for (;;) {
		int i = __atomic_load_n(&p->lru_idx, __ATOMIC_SEQ_CST);
		struct pwb__pcache_lru *l;

		if (i < 0)
			return;
		l = &pb->lru[i];
		pthread_mutex_lock(&l->lock);
		if (pwb__aread(&p->lru_idx) == i) {
			if (p->lru_linked) {
				cds_list_del(&p->lru);
				p->lru_linked = false;
				pwb__aset(&l->len, pwb__aread(&l->len) - 1);
			}
			__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&l->lock);
			return;
		}
		pthread_mutex_unlock(&l->lock);	/* moved meanwhile */
	}
}

/* The context whose list @inode's pages read from the device join. */
unsigned int pwb__pcache_owner_ctx(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb;
	unsigned int idx;

	rcu_read_lock();	/* a re-shard frees contexts after a grace */
	wb = PWB__RCU_DEREF(inode->wb);
	idx = wb ? wb->idx : (unsigned int)(inode->ino % PWB_MAX_WB_CTX);
	pwb__rcu_read_unlock();
	return idx;
}

int pwb__pcache_range_busy_locked(struct pwb_inode *inode, uint64_t first,
				  uint64_t nr)
{
	uint64_t found;
	int st = 0;

	pwb__lockdep_assert_held(&inode->lock);
	if (pwb__map_find(&inode->map, PWB__TAG_DIRTY, first, &found) &&
	    found < first + nr)
		st |= PWB_PAGE_DIRTY;
	if (pwb__map_find(&inode->map, PWB__TAG_WRITEBACK, first, &found) &&
	    found < first + nr)
		st |= PWB_PAGE_WRITEBACK;
	return st;
}

int pwb__pcache_range_state(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr)
{
	uint64_t i;
	int st = 0;

	if (!PWB__RCU_DEREF(inode->region)) {
		pthread_mutex_lock(&inode->lock);
		st = pwb__pcache_range_busy_locked(inode, first, nr);
		pthread_mutex_unlock(&inode->lock);
		return st;
	}
	/* Region slices hold the tags: ask for each page. */
	for (i = 0; i < nr; i++) {
		int s = pwb__page_state(inode, first + i);

		if (s < 0)
			return s;
		st |= s & (PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK);
	}
	return st;
}

enum visit { V_FREED, V_KEEP, V_DROP };

/* One reclaim batch's state: the inode lock held over the pages of one
 * inode, at most 64 of them. */
struct sweep {
	struct pwb_inode *locked;
	unsigned int held;
	bool direct;	/* for a caller that needs room now */
};

static void sweep_unlock(struct sweep *sw)
{
	if (sw->locked)
		pthread_mutex_unlock(&sw->locked->lock);
	sw->locked = NULL;
}

/*
 * Visit page @p, taken off its list, in a read-side section (which keeps
 * its inode and index): free it if clean, idle and not referenced since
 * the last visit (V_FREED); V_KEEP to put it back at the tail (in use,
 * referenced, read from the device and not yet copied out, or being
 * written); V_DROP to leave it off (dirty: it joins again when written;
 * or dead). @late: the sweep's second time round its list.
 */
static enum visit sweep_page(struct sweep *sw, struct pwb__page *p, bool late)
{
	struct pwb_inode *inode = p->inode;
	struct cds_lfht *pages = PWB__RCU_DEREF(inode->pcache->pages);
	bool dirty, wb;
	int r = pwb__aread(&p->ref);

	if (r < 0 || !pages)
		return V_DROP;		/* dead, or its inode closing */
	if (r > 0)
		return V_KEEP;
	/*
	 * Read from the device and not yet copied out: read ahead of its
	 * reader, who comes for it soon. Such pages are left alone while the
	 * sweep finds others the first time round; the second time round
	 * takes the mark off, and a later sweep may free them (so pages
	 * nobody reads do not stay). Before, a sweep that wanted more than
	 * the pages their readers were done with cleared the reference of
	 * a page read ahead and freed it on its second time round, in the
	 * same call: the reader then read it from the device again.
	 */
	if (pwb__aread(&p->flags) & PWB__PG_FRESH) {
		/* Only a caller that needs room now goes that far: the
		 * background reclaimers keep free room ahead of need, and
		 * that room is not worth a page its reader comes for. */
		if (late && sw->direct)
			uatomic_and(&p->flags, ~PWB__PG_FRESH);
		return V_KEEP;
	}
	if (pwb__aread(&p->flags) & PWB__PG_REF) {
		uatomic_and(&p->flags, ~PWB__PG_REF);
		return V_KEEP;
	}
	/* Dead first, then checked: a writer needs a reference to dirty
	 * it, which it cannot take now. */
	if (pwb__page_ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return V_KEEP;
	if (PWB__RCU_DEREF(inode->region)) {
		/* Region slices hold the tags: ask for them. */
		int st;

		sweep_unlock(sw);
		st = pwb__pcache_range_state(inode, p->index, pwb__page_nr(p));
		if (st < 0)	/* closing: its close frees the page */
			st = PWB_PAGE_DIRTY;
		dirty = st & PWB_PAGE_DIRTY;
		wb = st & PWB_PAGE_WRITEBACK;
	} else {
		if (sw->locked != inode || sw->held >= 64) {
			sweep_unlock(sw);
			pthread_mutex_lock(&inode->lock);
			sw->locked = inode;
			sw->held = 0;
		}
		sw->held++;
		if (caa_likely(!p->order)) {
			dirty = pwb__map_test(&inode->map, PWB__TAG_DIRTY,
					      p->index);
			wb = pwb__map_test(&inode->map, PWB__TAG_WRITEBACK,
					   p->index);
		} else {
			/* A folio goes whole, once no page of it is dirty
			 * or in flight. */
			int st = pwb__pcache_range_busy_locked(
				inode, p->index, pwb__page_nr(p));

			dirty = st & PWB_PAGE_DIRTY;
			wb = st & PWB_PAGE_WRITEBACK;
		}
	}
	if (dirty || wb) {
		__atomic_store_n(&p->ref, 0, __ATOMIC_RELEASE);
		return dirty ? V_DROP : V_KEEP;
	}
	/* Off the list an adder may have put it on since it was taken
	 * (a reader filling it, say, before dropping its reference). */
	pwb__pcache_lru_del(inode->bdi->pcache, p);
	cds_lfht_del(pages, &p->node);
	pwb__pcache_index_gone(inode->pcache, p);
	return V_FREED;		/* the caller frees and uncharges it, in a
				 * batch */
}

#define SWEEP_BATCH 32

/*
 * Free up to @want pages from list @idx, visiting each page on it at most
 * twice (a referenced page gets its second chance). @direct: the caller
 * needs room now (it may take the mark off pages read ahead, see
 * sweep_page). Return pages freed.
 */
static uint64_t lru_reclaim(struct pwb_bdi *bdi, unsigned int idx,
			    uint64_t want, bool direct)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb__pcache_lru *l = &pb->lru[idx];
	struct pwb__page *batch[SWEEP_BATCH], *dead = NULL;
	uint64_t len = pwb__aread(&l->len), freed = 0, budget = 2 * len;
	unsigned int n, i, kept, nr_dead;

	while (freed < want && budget) {
		struct sweep sw = { .direct = direct };
		bool late = budget <= len;
		uint64_t taken = 0;

		pthread_mutex_lock(&l->lock);
		/* No more pages than wanted: folios are few entries, and a
		 * batch that took them all would leave a reclaimer running
		 * beside this one nothing of this list to free. */
		for (n = 0; n < SWEEP_BATCH && n < budget &&
			    taken < want - freed &&
			    !cds_list_empty(&l->head);
		     n++) {
			struct pwb__page *p = cds_list_first_entry(
				&l->head, struct pwb__page, lru);

			taken += pwb__page_nr(p);
			cds_list_del(&p->lru);
			p->lru_linked = false;
			__atomic_store_n(&p->lru_idx, -1, __ATOMIC_RELEASE);
			batch[n] = p;
		}
		pwb__aset(&l->len, pwb__aread(&l->len) - n);
		uatomic_add(&l->sweeping, n);
		/* The read-side section starts before the lock ends: no page
		 * taken off can be freed by a kill before it. */
		rcu_read_lock();
		pthread_mutex_unlock(&l->lock);
		if (!n) {
			pwb__rcu_read_unlock();
			break;
		}
		/* Pages another sweep holds may be what this one wants: a
		 * caller does not take the mark off pages read ahead until
		 * they are back (pwb__pcache_charge() then looks again). */
		if (late && direct && pwb__aread(&l->sweeping) != n)
			sw.direct = false;
		budget -= n;
		nr_dead = 0;
		for (i = kept = 0; i < n; i++) {
			enum visit v = freed + nr_dead < want
					       ? sweep_page(&sw, batch[i], late)
					       : V_KEEP;

			if (v == V_FREED) {
				/* Linked behind the batch's first page. */
				if (!dead)
					CDS_INIT_LIST_HEAD(&batch[i]->lru);
				else
					cds_list_add_tail(&batch[i]->lru,
							  &dead->lru);
				if (!dead)
					dead = batch[i];
				nr_dead += pwb__page_nr(batch[i]);
			} else if (v == V_KEEP) {
				batch[kept++] = batch[i];
			}
		}
		sweep_unlock(&sw);
		if (dead) {
			/* Buffers first, then the charge: a writer that finds
			 * room finds a buffer in the pool too, and maps no
			 * new chunk. */
			pwb__pcache_batch_bufs_free(pb, dead);
			pwb__pcache_uncharge(pb, nr_dead);
			freed += nr_dead;
			/* After the links: the callback acquires it. */
			PWB__TSAN_RELEASE(dead);
			pwb__call_rcu(&dead->rcu, pwb__pcache_batch_free_rcu);
			dead = NULL;
		}
		/* Back at the tail, unless killed meanwhile (the join checks
		 * under the lock; the section still keeps their memory). */
		for (i = 0; i < kept; i++)
			pwb__pcache_lru_add(pb, batch[i], idx);
		uatomic_sub(&l->sweeping, n);
		pwb__rcu_read_unlock();
	}
	PWB_PROBE3(reclaim, idx, want, freed);
	return freed;
}

/*
 * Free up to @want clean pages from the reclaim list of context @idx
 * (and from the lists of contexts a re-shard retired, idx + k * nr), or
 * with @idx -1 from every list, starting at a different one each call.
 * Return the pages freed.
 */
static uint64_t reclaim(struct pwb_bdi *bdi, int idx, uint64_t want,
		       bool direct)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	unsigned int nctx = pwb__bdi_nr_wb_ctx(bdi), i, start;
	uint64_t freed = 0;

	if (!nctx)
		return 0;
	if (idx >= 0) {
		for (i = (unsigned int)idx; i < PWB_MAX_WB_CTX && freed < want;
		     i += nctx)
			if (pwb__aread(&pb->lru[i].len))
				freed += lru_reclaim(bdi, i, want - freed,
						     direct);
		return freed;
	}
	start = (unsigned int)uatomic_add_return(&pb->sweep_start, 1);
	for (i = 0; i < PWB_MAX_WB_CTX && freed < want; i++) {
		unsigned int k = (start + i) % PWB_MAX_WB_CTX;

		if (pwb__aread(&pb->lru[k].len))
			freed += lru_reclaim(bdi, k, want - freed, direct);
	}
	return freed;
}

/*
 * Free up to @want clean pages of the members of @bdi's domain, the
 * member that charged least recently first (pcache-domain.c). Return
 * the pages freed (each uncharged from its own member and the budget).
 */
static uint64_t dom_reclaim(struct pwb_bdi *bdi, uint64_t want, bool direct)
{
	struct pwb_bdi *order[64];
	uint64_t freed = 0;
	unsigned int n, i;

	/* The members found stay whole while we are in the section (a
	 * closing one leaves the list before its grace period). */
	rcu_read_lock();
	n = pwb__pcache_dom_order_rcu(bdi, order, 64);
	for (i = 0; i < n && freed < want; i++)
		freed += reclaim(order[i], -1, want - freed, direct);
	pwb__rcu_read_unlock();
	return freed;
}

/* Above the domain's high watermark: free clean pages of the members
 * down to its low one (a flusher of a member, after its passes). */
static void dom_reclaim_bg(struct pwb_bdi *bdi)
{
	struct pwb__pcache_dom *pd = bdi->pcache->dom;
	uint64_t low = pd->limit - pd->limit / 8;
	uint64_t used = pwb__aread(&pd->used);

	if (used > pd->limit - pd->limit / 16)
		pwb__aset(&pd->reclaiming, 1);
	if (!pwb__aread(&pd->reclaiming))
		return;
	if (used > low && dom_reclaim(bdi, (used - low) >> bdi->page_shift,
				     false))
		pwb__pcache_room(bdi);
	if (pwb__aread(&pd->used) <= low)
		pwb__aset(&pd->reclaiming, 0);
}

/* Wake the flusher of every context but @except, to reclaim. */
static void kick_flushers(struct pwb_bdi *bdi, int except)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i;

	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; arr && i < arr->nr; i++)
		if ((int)i != except)
			pwb__wb_kick_background(arr->ctx[i]);
	pwb__rcu_read_unlock();
}

/* The cache crossed its high watermark: wake every flusher to reclaim. */
static void kick_reclaim(struct pwb_bdi *bdi)
{
	if (uatomic_cmpxchg(&bdi->pcache->reclaiming, 0, 1) == 0)
		kick_flushers(bdi, -1);
}

/* ---------------------------------------------------------------------- */
/* The background reclaimer                                               */

/*
 * The flushers reclaim after their passes, but a background pass lasts as
 * long as a writer keeps dirtying, and on a device a flusher waits for its
 * writes: a writer streaming into a full cache freed most of the pages it
 * needed itself (direct reclaim, over half of them in pcache-stream),
 * taking the inode lock its flusher wanted at the same time. As the
 * kernel's kswapd does for memory, a thread of the page cache starts
 * freeing clean pages when the free room falls below a low watermark and
 * stops at a high one, so that a writer finds room and pays for reclaim
 * with a test. Direct reclaim stays for when the reclaimer falls behind
 * or finds nothing clean (everything dirty or being written: then the
 * writers wait for writeback, as before).
 *
 * The thread starts the first time it is wanted (like liburcu's call_rcu
 * worker: a process that opens a bdi and forks keeps working) and ends at
 * bdi close. It walks the reclaim lists directly, never the contexts (a
 * re-shard or the close may free those meanwhile); pages and inodes it
 * meets are kept by its read-side sections, as for a writer's direct
 * reclaim. In a domain with a cache budget it also keeps the budget's
 * free room above the same watermarks, taking pages from the members as
 * a writer's direct reclaim in the domain does (the members it finds
 * stay whole in its read-side section; a closing bdi has left the list
 * by then). Each member has its own reclaimer; they stop at the same
 * high watermark of the budget, so two at work at once free a batch
 * more at most.
 */
#define KSWAPD_LOW(limit) ((limit) / 8)			/* wake below */
#define KSWAPD_HIGH(limit) ((limit) / 8 + (limit) / 16)	/* stop at */
#define KSWAPD_BATCH 256u

/* The free room of the cache itself, in pages. */
static uint64_t free_room(const struct pwb__pcache_bdi *pb)
{
	uint64_t n = pwb__aread(&pb->nr_pages);

	return n < pb->limit_pages ? pb->limit_pages - n : 0;
}

/*
 * In a domain with a cache budget a page is charged to the budget too
 * (pcache-domain.c), and a writer finds no room when either is full: the
 * reclaimer keeps both above their watermarks. The budget's, in pages of
 * this bdi's size: its size and its free room.
 */
static uint64_t dom_limit_pages(const struct pwb__pcache_bdi *pb)
{
	return pb->dom->limit >> pb->page_shift;
}

static uint64_t dom_free_room(const struct pwb__pcache_bdi *pb)
{
	uint64_t used = pwb__aread(&pb->dom->used);

	return used < pb->dom->limit ? (pb->dom->limit - used) >> pb->page_shift
				     : 0;
}

/* A charge left @n pages in the cache: is the free room (of the cache,
 * or of the domain's budget) below the low watermark? */
static bool kswapd_below_low(const struct pwb__pcache_bdi *pb, uint64_t n)
{
	if (n > pb->limit_pages - KSWAPD_LOW(pb->limit_pages))
		return true;
	return caa_unlikely(pb->dom) &&
	       dom_free_room(pb) < KSWAPD_LOW(dom_limit_pages(pb));
}

/*
 * Free clean pages until the room is up to the high watermark, or there
 * is nothing clean to free. In a domain, the budget's room first, from
 * the members in the order the domain gives (the one that charged least
 * recently first, this bdi included), as a writer's direct reclaim in the
 * domain does: a bdi whose own bound is the whole budget (no cache_bytes
 * of its own) then never takes its own pages before an idle member's.
 * Then the cache's own room, from every list in turn, until a round over
 * all of them frees nothing.
 */
static void kswapd_balance(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t high;
	unsigned int i = 0, idle = 0;

	/* No further than the high watermarks: what is cached stays for
	 * readers. */
	if (caa_unlikely(pb->dom)) {
		high = KSWAPD_HIGH(dom_limit_pages(pb));
		for (;;) {
			uint64_t room = dom_free_room(pb), freed;

			if (room >= high)
				break;
			freed = dom_reclaim(bdi,
					    PWB__MIN(high - room,
						     (uint64_t)KSWAPD_BATCH),
					    false);
			if (!freed)
				break;	/* every member's lists walked */
			uatomic_add(&pb->kswapd_reclaims, freed);
			pwb__pcache_room(bdi);
		}
	}
	high = KSWAPD_HIGH(pb->limit_pages);
	for (;;) {
		uint64_t room = free_room(pb), freed = 0;

		if (room >= high || idle >= PWB_MAX_WB_CTX)
			break;
		if (pwb__aread(&pb->lru[i].len))
			freed = lru_reclaim(bdi, i,
					    PWB__MIN(high - room,
						     (uint64_t)KSWAPD_BATCH),
					    false);
		if (freed) {
			uatomic_add(&pb->reclaimed[i], freed);
			uatomic_add(&pb->kswapd_reclaims, freed);
			pwb__pcache_room(bdi);
			idle = 0;
		} else {
			idle++;
		}
		i = (i + 1) % PWB_MAX_WB_CTX;
	}
}

static void *kswapd_main(void *arg)
{
	struct pwb_bdi *bdi = arg;
	struct pwb__pcache_bdi *pb = bdi->pcache;

	pthread_mutex_lock(&pb->kswapd_lock);
	for (;;) {
		uint64_t seq;

		while (!pb->kswapd_kick && !pb->kswapd_stop)
			pthread_cond_wait(&pb->kswapd_cond, &pb->kswapd_lock);
		if (pb->kswapd_stop)
			break;
		pwb__aset(&pb->kswapd_kick, false);
		pwb__aset(&pb->kswapd_busy, 1);
		pthread_mutex_unlock(&pb->kswapd_lock);
		/* Read before the round: a write that ends after it may
		 * make pages clean that the round did not see. */
		seq = pwb__aread(&pb->room->seq);
		kswapd_balance(bdi);
		/* Nothing more to free for now: no kick until a write ends
		 * or pages are freed (room->seq moves), so writers of a
		 * cache full of dirty pages do not have it walk the lists
		 * over and over. */
		if (kswapd_below_low(pb, pwb__aread(&pb->nr_pages)))
			pwb__aset(&pb->kswapd_idle_seq, seq + 1);
		pthread_mutex_lock(&pb->kswapd_lock);
		pwb__aset(&pb->kswapd_busy, 0);
	}
	pthread_mutex_unlock(&pb->kswapd_lock);
	return NULL;
}

/* Start the reclaimer; on failure the writers reclaim themselves. */
static void kswapd_start(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	sigset_t all, old;
	int ret;

	if (uatomic_cmpxchg(&pb->kswapd_state, 0, 1) != 0)
		return;
	/* Every signal blocked, as the flushers: the application's
	 * handlers run on its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&pb->kswapd, NULL, kswapd_main, bdi);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pwb__aset(&pb->kswapd_state, ret ? -1 : 2);
}

/*
 * A page was charged and the free room is below the low watermark: wake
 * the reclaimer unless it is at work, or found nothing to free and no
 * write ended since. Any thread; a few loads when there is nothing to do.
 */
static void kswapd_wake(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	int state = pwb__aread(&pb->kswapd_state);

	if (state < 0 || pwb__aread(&pb->kswapd_busy) ||
	    pwb__aread(&pb->kswapd_kick) ||
	    pwb__aread(&pb->room->seq) + 1 ==
		    pwb__aread(&pb->kswapd_idle_seq))
		return;
	if (state == 0) {
		kswapd_start(bdi);
		if (pwb__aread(&pb->kswapd_state) != 2)
			return;
	} else if (state != 2) {
		return;		/* starting on another thread */
	}
	pthread_mutex_lock(&pb->kswapd_lock);
	if (!pb->kswapd_kick) {
		pwb__aset(&pb->kswapd_kick, true);
		pthread_cond_signal(&pb->kswapd_cond);
	}
	pthread_mutex_unlock(&pb->kswapd_lock);
}

void pwb__pcache_kswapd_stop(struct pwb__pcache_bdi *pb)
{
	if (pwb__aread(&pb->kswapd_state) != 2)
		return;
	pthread_mutex_lock(&pb->kswapd_lock);
	pb->kswapd_stop = true;
	pthread_cond_signal(&pb->kswapd_cond);
	pthread_mutex_unlock(&pb->kswapd_lock);
	pthread_join(pb->kswapd, NULL);
	pwb__aset(&pb->kswapd_state, 0);
	/* Its last batch's descriptors, queued after the close's own
	 * barrier if it freed a page of a closing inode. */
	rcu_barrier();
}

void pwb__pcache_reclaim_ctx(struct pwb_bdi *bdi, unsigned int idx)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t n, low, freed, t0;

	if (!pb || idx >= PWB_MAX_WB_CTX)
		return;
	if (caa_unlikely(pb->dom))
		dom_reclaim_bg(bdi);
	n = pwb__aread(&pb->nr_pages);
	low = pb->limit_pages - pb->limit_pages / 8;
	/* Hysteresis: reclaim starts above 15/16 of the limit and every
	 * context takes part (each from its own inodes) until the cache is
	 * down to 7/8. */
	if (n > pb->limit_pages - pb->limit_pages / 16)
		pwb__aset(&pb->reclaiming, 1);
	if (!pwb__aread(&pb->reclaiming))
		return;
	if (n <= low) {
		pwb__aset(&pb->reclaiming, 0);
		return;
	}
	uatomic_inc(&pb->reclaim_passes[idx]);
	t0 = pwb__clock_monotonic(NULL);
	freed = reclaim(bdi, (int)idx, n - low, false);
	uatomic_add(&pb->reclaim_ns[idx], pwb__clock_monotonic(NULL) - t0);
	if (freed) {
		uatomic_add(&pb->reclaimed[idx], freed);
		pwb__pcache_room(bdi);
	}
	if (pwb__aread(&pb->nr_pages) <= low)
		pwb__aset(&pb->reclaiming, 0);
	else if (freed)	/* the others' inodes hold the rest */
		kick_flushers(bdi, (int)idx);
}

/*
 * Sleep until pages were freed or a write ended since @seq was read (see
 * pwb__pcache_room), or @deadline (cfg.clock; 0: none) passed, at most
 * 10 ms of real time: the clock may be a test's, which does not move by
 * itself, and a sweep can miss what a concurrent CLOCK pass skipped.
 */
static void room_wait(struct pwb__pcache_room *r, uint64_t seq)
{
	struct timespec ts;

	uatomic_inc(&r->waiters);	/* a full barrier: see room() */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 10 * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&r->lock);
	while (pwb__aread(&r->seq) == seq &&
	       pthread_cond_timedwait(&r->cond, &r->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&r->lock);
	uatomic_dec(&r->waiters);
}

int pwb__pcache_charge_nowait(struct pwb_inode *inode, unsigned int n)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	bool reclaimed = false;
	uint64_t freed;

	for (;;) {
		uint64_t cur = pwb__aread(&pb->nr_pages);
		int r = 0;

		if (cur + n > pb->limit_pages)
			goto full;
		if (caa_unlikely(pb->dom)) {
			r = pwb__pcache_dom_charge(bdi, n);
			if (r < 0)
				goto full;
			if (r > 0)
				kick_flushers(bdi, -1);
		}
		if (uatomic_cmpxchg(&pb->nr_pages, cur, cur + n) != cur) {
			if (caa_unlikely(pb->dom))
				uatomic_sub(&pb->dom->used,
					    (uint64_t)n << pb->page_shift);
			continue;
		}
		if (kswapd_below_low(pb, cur + n))
			kswapd_wake(bdi);
		if (cur + n > pb->limit_pages - pb->limit_pages / 16)
			kick_reclaim(bdi);
		return 0;
full:
		/* Once, what a single page's charge would do for each of
		 * them: free clean pages, without waiting. */
		if (reclaimed)
			return -ENOBUFS;
		reclaimed = true;
		if (caa_likely(!pb->dom) || cur + n > pb->limit_pages)
			freed = reclaim(bdi, -1, n, true);
		else
			freed = dom_reclaim(bdi, n, true);
		if (!freed)
			return -ENOBUFS;
		uatomic_add(&pb->direct_reclaims, freed);
	}
}

/* Does a sweep hold pages it took off a reclaim list of @pb? */
static bool lists_swept(struct pwb__pcache_bdi *pb)
{
	unsigned int i;

	for (i = 0; i < PWB_MAX_WB_CTX; i++)
		if (pwb__aread(&pb->lru[i].sweeping))
			return true;
	return false;
}

/*
 * Whether writes of @bdi's pages are in flight: their ends bring room
 * (clean pages) to a writer waiting for it. Lock-free; a hint.
 */
static bool writes_in_flight(struct pwb_bdi *bdi)
{
	uint64_t n;

	rcu_read_lock();
	n = pwb__bdi_writeback_pages_rcu(bdi);
	pwb__rcu_read_unlock();
	return n != 0;
}

/*
 * Charge @nr pages against cache_bytes; when the cache is full, make room
 * as @room says (enum pwb__room). 0, -ENOBUFS, or -ETIMEDOUT.
 */
static int charge_pages(struct pwb_inode *inode, unsigned int nr,
			enum pwb__room room)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__pcache_bdi *pb = bdi->pcache;
	uint64_t deadline = 0, timeout, t_wait;
	unsigned int yields = 0;
	bool asked = false, dom_asked = false;

	timeout = bdi->cfg.throttle_timeout_ms * PWB__NSEC_PER_MSEC;
	for (;;) {
		uint64_t n = pwb__aread(&pb->nr_pages);
		uint64_t freed, seq;
		bool own_full = n + nr > pb->limit_pages;

		if (!own_full) {
			int r = 0;

			/* In a domain, its budget first: so the members'
			 * counts never add up to more than it. */
			if (caa_unlikely(pb->dom)) {
				r = pwb__pcache_dom_charge(bdi, nr);
				if (r > 0)
					kick_flushers(bdi, -1);
			}
			if (caa_likely(r >= 0)) {
				if (uatomic_cmpxchg(&pb->nr_pages, n, n + nr) !=
				    n) {
					if (caa_unlikely(pb->dom))
						uatomic_sub(&pb->dom->used,
							    (uint64_t)nr
							    << pb->page_shift);
					continue;
				}
				if (kswapd_below_low(pb, n + nr))
					kswapd_wake(bdi);
				if (n + nr > pb->limit_pages -
						     pb->limit_pages / 16)
					kick_reclaim(bdi);
				return 0;
			}
		}
		if (room == PWB__ROOM_NOW) {
			/* Room later: the reclaimer frees clean pages down to
			 * its low watermark. */
			kswapd_wake(bdi);
			return -ENOBUFS;	/* no message: not an error */
		}
		/* Read before looking: what ends after this wakes us. */
		seq = pwb__aread(&pb->room->seq);
		/* The bdi's own bound, or else its domain's budget. */
		if (caa_likely(!pb->dom) || own_full)
			freed = reclaim(bdi, -1, PWB__MAX(nr, 32u), true);
		else
			freed = dom_reclaim(bdi, PWB__MAX(nr, 32u), true);
		if (freed) {
			uatomic_add(&pb->direct_reclaims, freed);
			continue;
		}
		/*
		 * Another sweep (the background reclaimer's, another
		 * caller's) holds pages off the lists for a moment, which it
		 * frees or puts back: look again once it is done rather than
		 * give up (a readahead would stop short) or take the mark
		 * off pages read ahead (lru_reclaim does not meanwhile). A
		 * yield, not a sleep: PWB_RW_NOWAIT callers come here too.
		 */
		if (lists_swept(pb) && yields < 10000) {
			yields++;
			sched_yield();
			continue;
		}
		if (room != PWB__ROOM_WAIT)
			return -ENOBUFS;	/* no message: not an error */
		if (!deadline)
			deadline = pwb__now(bdi) + timeout;
		else if (timeout && pwb__now(bdi) >= deadline)
			return pwb__err(-ETIMEDOUT,
					"page cache full (cache_bytes %llu%s) "
					"and nothing written back within "
					"throttle_timeout_ms",
					(unsigned long long)(pb->dom && !own_full
						? pb->dom->limit
						: bdi->cfg.cache_bytes),
					pb->dom && !own_full ? " of the domain"
							     : "");
		/* Everything cached is dirty or in flight: have it written
		 * and wait for a write to end. Background writeback starts
		 * at half the cache (pwb__pcache_inode_init); below that, a
		 * pass over everything, asked again after 10 idle ms. While
		 * writes are in flight their ends bring the room, and a pass
		 * asked for now would end the one writing (queued work goes
		 * first) and have the flusher wait for everything in flight
		 * before starting it: the device would sit idle in between,
		 * at every wait of every writer. In a domain the other
		 * members' dirty pages may fill the budget: their
		 * background writeback too, whatever is in flight here. */
		if (!asked && !writes_in_flight(bdi)) {
			pwb__bdi_writeback(bdi, PWB_WB_ALL, 0);
			asked = true;
		}
		if (pb->dom && !dom_asked) {
			rcu_read_lock();
			pwb__pcache_dom_kick_rcu(bdi);
			pwb__rcu_read_unlock();
			dom_asked = true;
		}
		/* The cache is the bdi's (or its domain's): the wait is
		 * counted as the bdi's and the writer's tenant's, not a
		 * context's. */
		t_wait = pwb__now(bdi);
		room_wait(pb->room, seq);
		pwb__blocked_since(bdi, NULL, pwb__aread(&inode->tenant),
				   PWB_BLOCK_CACHE_FULL, t_wait);
		/* Nothing happened for 10 ms: ask again. */
		if (pwb__aread(&pb->room->seq) == seq)
			asked = dom_asked = false;
	}
}

int pwb__pcache_charge(struct pwb_inode *inode, enum pwb__room room)
{
	return charge_pages(inode, 1, room);
}

int pwb__pcache_charge_folio(struct pwb_inode *inode, unsigned int nr)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;
	uint64_t limit = pb->limit_pages;

	if (caa_unlikely(pb->dom))
		limit = PWB__MIN(limit, dom_limit_pages(pb));
	/* A folio that takes more than a quarter of the cache could wait
	 * for room single pages would find (or never find it whole). */
	if ((uint64_t)nr > limit / 4)
		return pwb__pcache_charge_nowait(inode, nr);
	return charge_pages(inode, nr, PWB__ROOM_WAIT);
}
