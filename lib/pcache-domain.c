// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-domain.c - library-owned pages: one cache budget for the bdis of
 * a memory domain (struct pwb_domain_config.cache_bytes)
 *
 * Each member's cache keeps its own count and bound (nr_pages and
 * limit_pages: the bdi's cache_bytes, or else the whole budget, so that a
 * bdi alone may use all of it), and every page it charges is charged, in
 * bytes, to the domain's budget too (pages of different sizes mix). A
 * member that finds the budget full takes room from clean pages anywhere
 * in the domain, as the kernel's reclaim takes clean pages of every disk
 * from one LRU: reclaim (pcache-reclaim.c) asks here for the members in
 * the order they give, the one that brought no page into its cache for
 * longest first, and frees from each by its own CLOCK lists (a page read
 * since the last visit gets its second chance; dirty pages and pages being
 * written are never freed). A charge stamps its member with the domain's
 * clock (a store at most every millisecond); between two members stamped
 * within the same millisecond, the larger cache gives first. Cache hits
 * do not stamp (they cost nothing more in a domain): a member whose pages
 * are read but that brings none in keeps them by their second chance.
 *
 *   charge ---> bdi's nr_pages < limit_pages ---> domain used + page
 *                       |                          <= cache_bytes --> ok
 *                       | no                             | no
 *                       v                                v
 *                reclaim the bdi's own         reclaim the members, oldest
 *                clean pages                   stamp first (self included)
 *                       \________________ nothing clean _____/
 *                                           v
 *                       write back; sleep on the domain's room
 *
 * Every member's room events (pages freed, writes ended) wake the
 * writers of all members, who sleep on the domain's room. The free page
 * buffers of the members are pooled in the domain, one pool per page
 * size, so that what one member frees serves the next: the memory held
 * stays within the budget plus a chunk per page size in use, not a budget
 * per member. The budget lives from the first member's cache set-up to the
 * last one's tear-down.
 */
#include "pcache.h"

#include <stdlib.h>
#include <time.h>
#include <urcu/rculist.h>

/* The most members one reclaim orders; further ones are left alone (a
 * process with more bdis in one domain reclaims the first found). */
#define MAX_ORDER 64

void pwb__pcache_room_init(struct pwb__pcache_room *r)
{
	pthread_condattr_t attr;

	r->seq = 0;
	r->waiters = 0;
	pwb__mutex_init(&r->lock, PWB__LOCK_PAGE_ROOM);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &attr);
	pthread_condattr_destroy(&attr);
}

void pwb__pcache_room_fini(struct pwb__pcache_room *r)
{
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
}

static struct pwb__pcache_dom *dom_cache_new(struct pwb_domain *dom)
{
	struct pwb__pcache_dom *pd = calloc(1, sizeof(*pd));
	unsigned int i;

	if (!pd)
		return NULL;
	pd->domain = dom;
	pd->limit = dom->cfg.cache_bytes;
	pwb__pcache_room_init(&pd->room);
	for (i = 0; i < PWB__PAGE_POOLS; i++)
		pwb__page_pool_init(&pd->pools[i], (size_t)1 << i);
	return pd;
}

static void dom_cache_free(struct pwb__pcache_dom *pd)
{
	unsigned int i;

	for (i = 0; i < PWB__PAGE_POOLS; i++)
		pwb__page_pool_fini(&pd->pools[i]);
	pwb__pcache_room_fini(&pd->room);
	free(pd);
}

int pwb__pcache_dom_join(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb_domain *dom = bdi->dom->dom;
	struct pwb__pcache_dom *pd, *fresh = NULL;

	/* Made outside the domain's lock, which is a leaf (the pools'
	 * locks rank below it); dropped if another member was first. */
	if (!pwb__aread(&dom->pcache)) {
		fresh = dom_cache_new(dom);
		if (!fresh)
			return pwb__err(-ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&dom->lock);
	pd = dom->pcache;
	if (!pd && fresh) {
		pd = fresh;
		fresh = NULL;
		pwb__aset(&dom->pcache, pd);
	}
	if (pd)
		pd->users++;
	pthread_mutex_unlock(&dom->lock);
	if (fresh)
		dom_cache_free(fresh);
	if (!pd)	/* the last member left between the look and the lock */
		return pwb__pcache_dom_join(bdi);
	pb->dom = pd;
	pb->room = &pd->room;
	pb->pool = &pd->pools[bdi->page_shift];
	return 0;
}

void pwb__pcache_dom_leave(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb__pcache_dom *pd = pb->dom, *last = NULL;
	/* Not bdi->dom: a failed open frees the member first. */
	struct pwb_domain *dom = pd->domain;

	pthread_mutex_lock(&dom->lock);
	if (!--pd->users) {
		last = pd;
		pwb__aset(&dom->pcache, NULL);
	}
	pthread_mutex_unlock(&dom->lock);
	pb->dom = NULL;
	pb->room = &pb->own_room;
	pb->pool = &pb->own_pool;
	/* Every page of every member is freed (each member's close ran
	 * rcu_barrier() after its last page): the chunks go back. */
	if (last)
		dom_cache_free(last);
}

int pwb__pcache_dom_charge(struct pwb_bdi *bdi, unsigned int n)
{
	struct pwb__pcache_dom *pd = bdi->pcache->dom;
	struct pwb__dom_member *m = bdi->dom;
	uint64_t bytes = (uint64_t)n << bdi->page_shift;
	uint64_t used = pwb__aread(&pd->used), prev, now;

	for (;;) {
		if (used + bytes > pd->limit)
			return -ENOBUFS;
		prev = uatomic_cmpxchg(&pd->used, used, used + bytes);
		if (prev == used)
			break;
		used = prev;
	}
	now = pwb__domain_now(pd->domain) / PWB__NSEC_PER_MSEC;
	if (pwb__aread(&m->cache_stamp) != now)
		pwb__aset(&m->cache_stamp, now);
	/* Above the high watermark (15/16): once, until reclaim brought
	 * the budget down to the low one. */
	if (used + bytes > pd->limit - pd->limit / 16 &&
	    !pwb__aread(&pd->reclaiming) &&
	    uatomic_cmpxchg(&pd->reclaiming, 0, 1) == 0)
		return 1;
	return 0;
}

unsigned int pwb__pcache_dom_order_rcu(struct pwb_bdi *bdi,
				       struct pwb_bdi **out, unsigned int max)
{
	struct pwb_domain *dom = bdi->dom->dom;
	struct pwb__pcache_dom *pd = bdi->pcache->dom;
	uint64_t stamp[MAX_ORDER], pages[MAX_ORDER];
	struct pwb__dom_member *m;
	unsigned int n = 0, i;

	max = PWB__MIN(max, (unsigned int)MAX_ORDER);
	cds_list_for_each_entry_rcu(m, &dom->members, node) {
		struct pwb__pcache_bdi *mpb = m->bdi->pcache;
		uint64_t s, np;

		if (n == max)
			break;
		/* A member without a cache, or one leaving (its close
		 * frees the cache after the grace period we are in). */
		if (!mpb || mpb->dom != pd)
			continue;
		np = pwb__aread(&mpb->nr_pages);
		if (!np)
			continue;
		s = pwb__aread(&m->cache_stamp);
		/* Insertion by (stamp up, pages down): a handful. */
		for (i = n; i > 0 && (stamp[i - 1] > s ||
				      (stamp[i - 1] == s && pages[i - 1] < np));
		     i--) {
			stamp[i] = stamp[i - 1];
			pages[i] = pages[i - 1];
			out[i] = out[i - 1];
		}
		stamp[i] = s;
		pages[i] = np;
		out[i] = m->bdi;
		n++;
	}
	return n;
}

void pwb__pcache_dom_kick_rcu(struct pwb_bdi *bdi)
{
	struct pwb__dom_member *m;

	cds_list_for_each_entry_rcu(m, &bdi->dom->dom->members, node)
		if (m->bdi != bdi && pwb__bdi_dirty_pages_rcu(m->bdi))
			pwb__kick_background(m->bdi);
}
