// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-folio.c - library-owned pages: folios, runs of 1 << order pages
 * of one inode (naturally aligned, 2^4 pages up to a chunk or the bdi's
 * max_io_bytes) kept as one unit: one descriptor, one entry in the index,
 * one buffer, one lock, one place on a reclaim list, one charge. A write
 * that covers such a run whole, with nothing of it cached, makes one
 * (pwb_write's slow path); everything else still makes single pages.
 *
 * What stays per page is what must: the dirty, writeback and TOWRITE tags
 * and the LSNs are the engine's (inode->map, a bit per page), the space
 * layer's reservations and extents are per block. A folio's flags are the
 * whole folio's: it is made up to date by the write that makes it (it is
 * in the index, locked and latched, until that write has copied all of
 * it), so a folio is never filled from the device and never read ahead;
 * PWB__PG_READING, _FRESH and _READAHEAD are single pages' only.
 *
 * A folio is never partly freed: reclaim and a PWB_RW_DONTCACHE drop free
 * it when no page of it is dirty or in flight, and a truncate or discard
 * that cuts through one splits it first (pwb__pcache_folio_split_dead):
 * single pages take its place in the index, each owning its share of the
 * buffer (whose pages are page buffers of one chunk, so each goes back
 * to the pool on its own), then the folio leaves the index.
 *
 * The index holds at most one entry for a page: inserts (of pages and of
 * folios) check and add under inode->lock; lookups take no lock and
 * probe the folio orders in use (pc->orders) before single pages (see
 * pwb__pcache_lookup_rcu()).
 */
#include "pcache.h"
#include "space.h"

#include <stdlib.h>
#include <string.h>

/* The smallest folio: 16 pages (64 KiB of 4 KiB pages). Fewer orders in
 * use mean fewer probes per lookup; the gain below this is small. */
#define FOLIO_MIN_ORDER 4

unsigned int pwb__pcache_folio_order(struct pwb_inode *inode, uint64_t index,
				     uint64_t pages)
{
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t most = PWB__MIN((uint64_t)bdi->cfg.max_io_bytes,
				 (uint64_t)PWB__PCACHE_CHUNK_BYTES) >>
			bdi->page_shift;
	unsigned int k;

	most = PWB__MIN(most, pages);
	if (most < (1u << FOLIO_MIN_ORDER))
		return 0;
	k = 63 - (unsigned int)__builtin_clzll(most);
	if (k >= PWB__FOLIO_ORDERS)
		k = PWB__FOLIO_ORDERS - 1;
	/* Naturally aligned. */
	if (index)
		k = PWB__MIN(k, (unsigned int)__builtin_ctzll(index));
	return k >= FOLIO_MIN_ORDER ? k : 0;
}

/* The entry holding page @index among those keyed @key, or NULL. Two
 * entries share a key only during a split (the folio and its first page):
 * either holds @index, or neither. */
static struct pwb__page *probe_rcu(struct cds_lfht *pages, uint64_t key,
				   uint64_t index)
{
	struct cds_lfht_iter iter;
	struct pwb__page *p;

	cds_lfht_lookup(pages, pwb__page_hash(key), pwb__page_match, &key,
			&iter);
	p = pwb__page_of(cds_lfht_iter_get_node(&iter));
	if (p && index - p->index >= pwb__page_nr(p)) {
		/* The first page of a split folio: look at the other. */
		cds_lfht_next_duplicate(pages, pwb__page_match, &key, &iter);
		p = pwb__page_of(cds_lfht_iter_get_node(&iter));
		if (p && index - p->index >= pwb__page_nr(p))
			p = NULL;
	}
	return p;
}

/*
 * Folio orders are probed from the largest down and single pages last: a
 * split adds the folio's pages before it deletes the folio, so a lookup
 * never misses both.
 */
struct pwb__page *pwb__pcache_lookup_folios_rcu(struct cds_lfht *pages,
						unsigned int orders,
						uint64_t index)
{
	struct pwb__page *p;

	while (orders) {
		unsigned int k = 31 - (unsigned int)__builtin_clz(orders);

		p = probe_rcu(pages, index & ~((1ull << k) - 1), index);
		if (p)
			return p;
		orders &= ~(1u << k);
		/* The folio's removal seen: see the pages added before. */
		cmm_smp_rmb();
	}
	return probe_rcu(pages, index, index);
}

/*
 * Whether no page of the @nr pages from @first is in @pc's index (dead
 * or alive). Caller holds inode->lock, in a read-side section.
 */
static bool range_empty_rcu(struct pwb__pcache_inode *pc,
			    struct cds_lfht *pages, uint64_t first,
			    uint64_t nr)
{
	unsigned int orders = pwb__aread(&pc->orders);
	struct cds_lfht_iter iter;
	uint64_t i;

	/* Any entry keyed at a folio's start that overlaps the range. */
	while (orders) {
		unsigned int k = 31 - (unsigned int)__builtin_clz(orders);
		uint64_t step = 1ull << k;

		for (i = first & ~(step - 1); i < first + nr; i += step) {
			cds_lfht_lookup(pages, pwb__page_hash(i),
					pwb__page_match, &i, &iter);
			if (cds_lfht_iter_get_node(&iter))
				return false;
		}
		orders &= ~(1u << k);
	}
	if (!pwb__aread(&pc->nr_small))
		return true;
	for (i = first; i < first + nr; i++) {
		cds_lfht_lookup(pages, pwb__page_hash(i), pwb__page_match, &i,
				&iter);
		if (cds_lfht_iter_get_node(&iter))
			return false;
	}
	return true;
}

bool pwb__pcache_range_free(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht *pages;
	bool free_ = false;

	rcu_read_lock();
	pages = PWB__RCU_DEREF(pc->pages);
	if (pages)
		free_ = range_empty_rcu(pc, pages, first, nr);
	pwb__rcu_read_unlock();
	return free_;
}

int pwb__pcache_index_add_page(struct pwb_inode *inode, struct pwb__page *np)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct cds_lfht_node *node;
	struct pwb__page *p;
	int ret = 0;

	pthread_mutex_lock(&inode->lock);
	rcu_read_lock();
	p = pwb__pcache_lookup_rcu(pc->pages, pwb__aread(&pc->orders),
				   np->index);
	if (p) {
		ret = -EEXIST;
	} else {
		node = cds_lfht_add_unique(pc->pages, pwb__page_hash(np->index),
					   pwb__page_match, &np->index,
					   &np->node);
		if (node == &np->node)
			uatomic_inc(&pc->nr_small);
		else
			ret = -EEXIST;	/* not reached: inserts are locked */
	}
	pwb__rcu_read_unlock();
	pthread_mutex_unlock(&inode->lock);
	return ret;
}

int pwb__pcache_folio_add(struct pwb_inode *inode, uint64_t index,
			  unsigned int order, struct pwb__page **pp)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t nr = 1ull << order;
	struct cds_lfht_node *node;
	struct pwb__page *f;
	bool added = false;

	f = calloc(1, sizeof(*f));
	if (f && !(f->data = pwb__pcache_folio_buf_alloc(bdi, order))) {
		free(f);
		f = NULL;
	}
	if (!f) {
		pwb__pcache_uncharge(bdi->pcache, nr);
		return -EBUSY;
	}
	f->index = index;
	f->inode = inode;
	f->order = (uint8_t)order;
	f->lru_idx = -1;
	f->ref = 1;
	/* Latched and locked before anyone can see it: a flusher's
	 * get_page leaves it alone and a reader waits for its data. */
	f->flags = PWB__PG_WLATCH;
	pwb__page_lock_init(f);
	pwb__page_lock(f);
	cds_lfht_node_init(&f->node);
	PWB__TSAN_RELEASE(&f->node);
	pthread_mutex_lock(&inode->lock);
	rcu_read_lock();
	/* Pages a truncate cut off read as zeros until written: a folio
	 * would have to take them out of that map after it is seen, which
	 * can fail. Single pages do it. */
	if ((inode->space || !pwb__extmap_count(&pc->zeroed)) &&
	    PWB__RCU_DEREF(pc->pages) &&
	    range_empty_rcu(pc, pc->pages, index, nr)) {
		if (!(pwb__aread(&pc->orders) & (1u << order)))
			uatomic_or(&pc->orders, 1u << order);
		node = cds_lfht_add_unique(pc->pages, pwb__page_hash(index),
					   pwb__page_match, &f->index,
					   &f->node);
		added = node == &f->node;
	}
	pwb__rcu_read_unlock();
	pthread_mutex_unlock(&inode->lock);
	if (!added) {
		pwb__page_unlock(f);
		pwb__page_lock_destroy(f);
		pwb__pcache_buf_free_order(bdi->pcache, f->data, order);
		free(f);
		pwb__pcache_uncharge(bdi->pcache, nr);
		return -EBUSY;
	}
	*pp = f;
	return 0;
}

/* A split folio's descriptor (its buffer went to its pages). */
static void folio_desc_free_rcu(struct rcu_head *head)
{
	struct pwb__page *f = caa_container_of(head, struct pwb__page, rcu);

	pwb__rcu_callback_begin(f);
	pwb__page_lock_destroy(f);
	free(f);
}

int pwb__pcache_folio_split_dead(struct pwb_inode *inode, struct pwb__page *f)
{
	struct pwb__pcache_inode *pc = inode->pcache;
	struct pwb__pcache_bdi *pb = inode->bdi->pcache;
	unsigned int nr = pwb__page_nr(f), shift = inode->bdi->page_shift, i;
	unsigned int keep = PWB__PG_UPTODATE | PWB__PG_REF | PWB__PG_DROP;
	int lru = pwb__aread(&f->lru_idx);
	struct pwb__page **v = calloc(nr, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		struct pwb__page *q = calloc(1, sizeof(*q));

		if (!q) {
			while (i--)
				free(v[i]);
			free(v);
			return -ENOMEM;
		}
		q->index = f->index + i;
		q->inode = inode;
		q->data = (char *)f->data + ((size_t)i << shift);
		q->lru_idx = -1;
		q->flags = pwb__aread(&f->flags) & keep;
		pwb__page_lock_init(q);
		cds_lfht_node_init(&q->node);
		PWB__TSAN_RELEASE(&q->node);
		v[i] = q;
	}
	pthread_mutex_lock(&inode->lock);
	rcu_read_lock();
	/* Not unique: the first shares its key with the folio until the
	 * folio leaves (inserts are under inode->lock and the folio covers
	 * the range, so nothing else holds these keys). */
	for (i = 0; i < nr; i++)
		cds_lfht_add(pc->pages, pwb__page_hash(v[i]->index),
			     &v[i]->node);
	uatomic_add(&pc->nr_small, nr);
	/* After its pages are in: a lookup that misses the folio finds
	 * them (pwb__pcache_lookup_rcu()). */
	pwb__pcache_lru_del(pb, f);
	cds_lfht_del(pc->pages, &f->node);
	pwb__rcu_read_unlock();
	pthread_mutex_unlock(&inode->lock);
	PWB__TSAN_RELEASE(f);
	pwb__call_rcu(&f->rcu, folio_desc_free_rcu);
	/* Reclaimable where the folio was (a dirty one leaves its list at
	 * reclaim's next visit, as any page does). */
	for (i = 0; i < nr; i++)
		pwb__pcache_lru_add(pb, v[i],
				    lru >= 0 ? (unsigned int)lru
					     : pwb__pcache_owner_ctx(inode));
	uatomic_inc(&pb->folio_splits);
	free(v);
	return 0;
}
