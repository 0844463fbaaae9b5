// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-lookup.c - library-owned pages: each inode's index of its pages
 * (lookup and insert), the page a flusher writes (get_page), dropping
 * pages, and the entry checks of the public calls. pcache.h describes the
 * index, the page lifetime and the stable-page protocol.
 *
 * The other pieces, from the top: pcache-owner.c (set-up, and the ops
 * through which the engine reaches the cache), pcache-write.c (pwb_write,
 * the file size, truncate), pcache-read.c (pwb_read), this file,
 * pcache-folio.c (folios: made, split),
 * pcache-reclaim.c (the memory bound and the reclaim lists),
 * pcache-domain.c (a domain's budget over several bdis' caches) and
 * pcache-pool.c (page buffers). Each calls only the ones below it.
 */
#include "pcache.h"

#include <sched.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------- */
/* Lookup and insert                                                      */

/* See pcache.h. */
int pwb__pcache_page_find(struct pwb_inode *inode, uint64_t index, bool create,
			  enum pwb__room room, struct pwb__page **pp)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__page *p, *np;
	int ret;

	for (;;) {
		rcu_read_lock();
		p = pwb__pcache_lookup_rcu(pc->pages, pwb__aread(&pc->orders),
					   index);
		if (p && pwb__page_get(p)) {
			pwb__rcu_read_unlock();
			*pp = p;
			return 0;
		}
		pwb__rcu_read_unlock();
		if (p) {	/* dying: gone after its remover's del */
			sched_yield();
			continue;
		}
		if (!create)
			return -ENOENT;
		ret = pwb__pcache_charge(inode, room);
		if (ret)
			return ret;
		np = calloc(1, sizeof(*np));
		if (np && !(np->data = pwb__pcache_buf_alloc(bdi))) {
			free(np);
			np = NULL;
		}
		if (!np) {
			pwb__pcache_uncharge(bdi->pcache, 1);
			return pwb__err(-ENOMEM, "page cache: out of memory");
		}
		np->index = index;
		np->inode = inode;
		np->lru_idx = -1;
		np->ref = 1;
		pwb__page_lock_init(np);
		cds_lfht_node_init(&np->node);
		PWB__TSAN_RELEASE(&np->node);
		if (!pwb__pcache_index_add_page(inode, np)) {
			*pp = np;
			return 0;
		}
		/* Someone else inserted it (or a folio holding it) first:
		 * use theirs. */
		pwb__page_lock_destroy(np);
		pwb__pcache_buf_free(bdi->pcache, np->data);
		free(np);
		pwb__pcache_uncharge(bdi->pcache, 1);
	}
}

/*
 * Free dead page @p, off its index and its reclaim list, whose writes
 * have all ended: its buffer back to the pool now, its descriptor after
 * a grace period. The caller saw no WRITEBACK or DIRTY tag on @p after it
 * killed it, or waited for them to go (drop_range): once dead nobody can
 * take a reference (and read or fill the data), and get_page refuses it,
 * so a flusher that tags the page after that never reads the buffer; a
 * lookup that still finds the page reads only the descriptor. A write in
 * flight is another matter: the flusher holds no read-side section while
 * the device reads the buffer, so no grace period would cover it, and the
 * buffer may go to another page (of another file) whose bytes would then
 * reach this page's place on the device. Every caller waits for such a write first (drop_range), as
 * the kernel's truncate_inode_pages_range() waits for a folio's
 * writeback. Giving the buffer back before the room (the uncharge)
 * keeps the memory mapped near cache_bytes: a writer that finds room
 * finds a buffer too.
 */
static void page_free_dead(struct pwb__pcache_bdi *pb, struct pwb__page *p)
{
	unsigned int nr = pwb__page_nr(p);

	PWB__TSAN_RELEASE(p);
	pwb__pcache_buf_free_order(pb, p->data, p->order);
	/* The last touch of @p: callers hold no read-side section, so the
	 * descriptor may be gone as soon as this returns. */
	pwb__call_rcu(&p->rcu, pwb__pcache_page_desc_free_rcu);
	pwb__pcache_uncharge(pb, nr);
}

/* Whether dead page @p is tagged in the engine's map, asked after the
 * kill: a write of it may be in flight (WRITEBACK), or a write dirtied it
 * after a discard dropped its range's tags (DIRTY). A page tagged neither
 * then is never written again (get_page refuses a dead page, and nobody
 * can dirty it: a writer needs a reference). Takes inode->lock or the
 * slices'. */
static bool page_tagged(struct pwb_inode *inode, struct pwb__page *p)
{
	bool tagged;

	if (p->order || PWB__RCU_DEREF(inode->region)) {
		int st = pwb__pcache_range_state(inode, p->index,
						 pwb__page_nr(p));

		return st < 0 ||
		       (st & (PWB_PAGE_WRITEBACK | PWB_PAGE_DIRTY));
	}
	pthread_mutex_lock(&inode->lock);
	tagged = pwb__map_test(&inode->map, PWB__TAG_WRITEBACK, p->index) ||
		 pwb__map_test(&inode->map, PWB__TAG_DIRTY, p->index);
	pthread_mutex_unlock(&inode->lock);
	return tagged;
}

static void page_remove_dead(struct pwb_inode *inode, struct pwb__page *p);

/*
 * Remove @p (reference count 0 -> dead): unlink it, free it, uncharge it.
 * @closing: the inode's close, after its last write (nothing in flight).
 * Return 0 (removed), -EBUSY (someone holds a reference: left alone) or
 * -EINPROGRESS: a write of @p may be in flight, so its buffer must stay,
 * or @p is dirty, so its tags must go; @p is left dead in the index
 * (lookups pass it by as dying, get_page refuses it), for the caller to
 * wait for that write outside any read-side section, drop the tags and
 * then remove it (page_remove_dead()).
 */
static int page_kill(struct pwb_inode *inode, struct pwb__page *p,
		     bool closing)
{
	if (pwb__page_ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return -EBUSY;
	if (!closing && page_tagged(inode, p))
		return -EINPROGRESS;
	page_remove_dead(inode, p);
	return 0;
}

/* The rest of a kill, once the count is dead and no write of @p is in
 * flight (page_free_dead()). */
static void page_remove_dead(struct pwb_inode *inode, struct pwb__page *p)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;

	pwb__pcache_lru_del(pb, p);
	rcu_read_lock();
	cds_lfht_del(inode->pcache->pages, &p->node);
	pwb__rcu_read_unlock();
	pwb__pcache_index_gone(inode->pcache, p);
	page_free_dead(pb, p);
}

/*
 * The end of a write of [first, last]: free the pages a PWB_RW_DONTCACHE
 * write marked, if they are clean and idle now. As in reclaim, dead
 * first and checked after: a writer needs a reference to dirty a page,
 * which it cannot take meanwhile. A page in use, dirtied again or in
 * flight again stays, for the end of its next write or for reclaim.
 */
void pwb__pcache_drop_written_rcu(struct pwb_inode *inode, uint64_t first,
				  uint64_t last)
{
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht *pages = PWB__RCU_DEREF(pc->pages);
	unsigned int orders = pwb__aread(&pc->orders);
	struct pwb__page *p;
	uint64_t index;
	bool freed = false;
	int st;

	if (!pages)
		return;		/* closing: the close frees them */
	for (index = first; index <= last; index++) {
		p = pwb__pcache_lookup_rcu(pages, orders, index);
		if (!p)
			continue;
		/* A folio once, at the last of its pages the write covers
		 * (or its own last). */
		if (p->order && index != PWB__MIN(last, p->index +
						  pwb__page_nr(p) - 1))
			continue;
		if (!(pwb__aread(&p->flags) & PWB__PG_DROP))
			continue;
		if (pwb__page_ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
			continue;
		/* A folio goes whole, once no page of it is dirty or in
		 * flight: its last write's end frees it. */
		st = p->order ? pwb__pcache_range_state(inode, p->index,
							 pwb__page_nr(p))
			      : pwb__page_state(inode, index);
		if (st & (PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK)) {
			__atomic_store_n(&p->ref, 0, __ATOMIC_RELEASE);
			continue;
		}
		pwb__pcache_lru_del(pb, p);
		cds_lfht_del(pages, &p->node);
		pwb__pcache_index_gone(pc, p);
		/* Neither dirty nor in flight once dead: the buffer at once.
		 * Uncharged from the domain's budget too. */
		page_free_dead(pb, p);
		freed = true;
	}
	if (freed)
		pwb__pcache_room(inode->bdi);
}

/* Pages a drop_range round killed with a write in flight or dirty, seen
 * to after the round's read-side section; more wait for the next round. */
#define DROP_INFLIGHT_MAX 16

/* Drop the cached pages [first, last] of @inode, waiting out short-lived
 * references (a reader's copy, a read in flight) and the writes in
 * flight of the pages it kills (page_kill()), and dropping their dirty
 * tags. */
void pwb__pcache_drop_range(struct pwb_inode *inode, uint64_t first,
			    uint64_t last, bool closing)
{
	struct pwb__page *p, *split_failed = NULL;
	struct pwb__page *inflight[DROP_INFLIGHT_MAX];
	struct cds_lfht_iter iter;
	unsigned int nr_inflight, i;
	bool again;

	do {
		again = false;
		nr_inflight = 0;
		rcu_read_lock();
		for (cds_lfht_first(inode->pcache->pages, &iter);
		     (p = pwb__page_of(cds_lfht_iter_get_node(&iter))) != NULL;
		     cds_lfht_next(inode->pcache->pages, &iter)) {
			uint64_t end = p->index + pwb__page_nr(p) - 1;

			if (end < first || p->index > last)
				continue;
			if (pwb__aread(&p->ref) < 0)
				continue;
			if (p->order && (p->index < first || end > last)) {
				/* Cut through: its pages take its place, and
				 * those in the range go at the next round. */
				if (pwb__page_ref_cmpxchg(p, 0,
							  PWB__PAGE_DEAD))
					again = true;
				else if (pwb__pcache_folio_split_dead(inode, p))
					split_failed = p;
				else
					again = true;
				if (split_failed)
					break;
				continue;
			}
			switch (page_kill(inode, p, closing)) {
			case -EBUSY:
				again = true;
				break;
			case -EINPROGRESS:
				inflight[nr_inflight++] = p;
				break;
			}
			if (nr_inflight == DROP_INFLIGHT_MAX) {
				again = true;
				break;
			}
		}
		pwb__rcu_read_unlock();
		if (split_failed) {
			/* Out of memory for the pages: alive again, and the
			 * next round tries again. */
			__atomic_store_n(&split_failed->ref, 0,
					 __ATOMIC_RELEASE);
			split_failed = NULL;
			again = true;
		}
		/*
		 * Dead, so only we remove them and nobody dirties them; the
		 * write in flight reads the buffer until it ends (the
		 * flusher holds no read-side section meanwhile). A write
		 * that dirtied one after the discard dropped the range's
		 * tags left it DIRTY: the tag goes with the page, or every
		 * later pass would ask for a page that is gone (-EIO). The
		 * drop waits for the writes too, until neither tag is left.
		 * While dead in the index a writer waits for it, so no new
		 * page's tags are dropped. The caller's reference keeps the
		 * inode (HOLD_REF).
		 */
		for (i = 0; i < nr_inflight; i++) {
			p = inflight[i];
			pwb__inode_drop_dirty_held(inode, p->index,
						   p->index +
						   pwb__page_nr(p) - 1);
			page_remove_dead(inode, p);
		}
		if (again) {
			/* Reads in flight hold their pages: end them. */
			pwb__ra_reap(inode->bdi);
			sched_yield();
		}
	} while (again);
	pwb__pcache_room(inode->bdi);
}

/* Remove @p if nobody holds it and it is neither dirty nor being written
 * (dead first, then checked: a writer needs a reference to dirty it).
 * 0: removed; -EBUSY: someone holds it (or is removing it); -EAGAIN:
 * dirty or being written, kept. */
static int page_try_kill_clean(struct pwb_inode *inode, struct pwb__page *p)
{
	bool busy;

	if (pwb__page_ref_cmpxchg(p, 0, PWB__PAGE_DEAD) != 0)
		return -EBUSY;
	if (p->order || PWB__RCU_DEREF(inode->region)) {
		int st = pwb__pcache_range_state(inode, p->index,
						 pwb__page_nr(p));

		busy = st < 0 || (st & (PWB_PAGE_DIRTY | PWB_PAGE_WRITEBACK));
	} else {
		pthread_mutex_lock(&inode->lock);
		busy = pwb__map_test(&inode->map, PWB__TAG_DIRTY, p->index) ||
		       pwb__map_test(&inode->map, PWB__TAG_WRITEBACK, p->index);
		pthread_mutex_unlock(&inode->lock);
	}
	if (busy) {
		__atomic_store_n(&p->ref, 0, __ATOMIC_RELEASE);
		return -EAGAIN;
	}
	page_remove_dead(inode, p);	/* idle: checked above */
	return 0;
}

/*
 * Drop the clean pages wholly inside [first, last] of @inode (a folio
 * that reaches past either end stays). @wait: look again at the pages
 * someone held (a fill, a copy, a write in progress) or was removing
 * (and may keep), until none is left; else leave them.
 */
static void drop_clean_range(struct pwb_inode *inode, uint64_t first,
			     uint64_t last, bool wait)
{
	struct cds_lfht_iter iter;
	struct pwb__page *p;
	bool again;

	do {
		again = false;
		rcu_read_lock();
		for (cds_lfht_first(inode->pcache->pages, &iter);
		     (p = pwb__page_of(cds_lfht_iter_get_node(&iter))) != NULL;
		     cds_lfht_next(inode->pcache->pages, &iter)) {
			if (p->index < first ||
			    p->index + pwb__page_nr(p) - 1 > last)
				continue;
			if (page_try_kill_clean(inode, p) == -EBUSY && wait)
				again = true;
		}
		pwb__rcu_read_unlock();
		if (again) {
			/* Reads in flight hold their pages: end them. */
			pwb__ra_reap(inode->bdi);
			sched_yield();
		}
	} while (again);
	pwb__pcache_room(inode->bdi);
}

void pwb__pcache_drop_clean(struct pwb_inode *inode, uint64_t first,
			    uint64_t last)
{
	/* The advice may leave pages cached: nobody waits. */
	drop_clean_range(inode, first, last, false);
}

void pwb__pcache_drop_refilled(struct pwb_inode *inode, uint64_t first,
			       uint64_t last)
{
	drop_clean_range(inode, first, last, true);
}

int pwb__pcache_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb__page *p;
	int ret = 0;

	rcu_read_lock();
	p = pwb__pcache_lookup_rcu(pc->pages, pwb__aread(&pc->orders), index);
	if (!p) {
		ret = -EIO;	/* dropped by a truncate racing a write */
	} else {
		/* Pairs with the full barrier of the writer's latch: the
		 * WRITEBACK tag was set before this call. */
		cmm_smp_mb();
		/* Acquire: a writer that just cleared its latch copied
		 * before (the data the device reads). */
		if (pwb__page_flags(p) & PWB__PG_WLATCH) {
			ret = -EAGAIN;
		} else if (caa_unlikely(pwb__aread(&p->ref) < 0)) {
			/* Dead: being removed (its buffer may be back in
			 * the pool already: page_free_dead()), or a removal
			 * that finds it dirty and keeps it. The full
			 * barrier above orders our tag before this load:
			 * a remover that killed it first and saw no tag
			 * is seen dead here. A later pass finds it alive
			 * again, or gone (-EIO). */
			ret = -EAGAIN;
		} else if (pwb__page_trylock(p)) {
			/* A writer between its latch and its copy, or a
			 * reader copying out: not now. The lock also orders
			 * the last copy before the device reads the data. */
			ret = -EAGAIN;
		} else {
			int idx = pwb__flusher_ctx_idx();

			pwb__page_unlock(p);
			/* Tagged WRITEBACK: kept (a folio's split hands
			 * its buffer to its pages). */
			*data = pwb__page_addr(p, index,
					       inode->bdi->page_shift);
			/* Clean once written: reclaimable by this context. */
			pwb__pcache_lru_add(
				inode->bdi->pcache, p,
				idx >= 0 ? (unsigned int)idx
					 : pwb__pcache_owner_ctx(inode));
		}
	}
	pwb__rcu_read_unlock();
	return ret;
}

/* Argument checks and the reference shared by the calls below. */
int pwb__pcache_enter(struct pwb_inode *inode, const char *who)
{
	int ret;

	if (!inode)
		return pwb__err(-EINVAL, "%s: NULL inode", who);
	ret = pwb__no_flusher(who);
	if (ret)
		return ret;
	if (!inode->pcache)
		return pwb__err(-EINVAL, "%s: inode %llu has application-owned "
					 "pages (opened with get_page)",
				who, (unsigned long long)inode->ino);
	return pwb__inode_enter(inode, PWB__HOLD_REF, who);
}

/* The device offset of page @index before it is read. User-map mode:
 * every page below the size exists, at map_page's offset. Allocator mode:
 * only pages whose blocks hold written data (-ENODATA: a hole, never
 * written, or a block allocated whose write has not ended: zeros); the
 * allocator's map_page would allocate. */
int pwb__pcache_dev_lookup(struct pwb_inode *inode, uint64_t index,
			   uint64_t *dev_off)
{
	bool zeroed;

	if (inode->space)
		return pwb__space_read_lookup(inode, index, dev_off);
	/* Cut off by a truncate and not written since: zeros. */
	pthread_mutex_lock(&inode->lock);
	zeroed = pwb__extmap_count(&inode->pcache->zeroed) &&
		 pwb__extmap_find(&inode->pcache->zeroed, index);
	pthread_mutex_unlock(&inode->lock);
	if (zeroed)
		return -ENODATA;
	return inode->ops.map_page(inode, index, dev_off);
}
