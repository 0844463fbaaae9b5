// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * inode.c - inodes: registration, dirtying, fsync and close
 *
 * The dirtying path is the hot one: pwb_mark_dirty() takes only the inode's
 * own lock, sets the DIRTY tag over the range in one operation, and touches
 * the context's list lock only when a clean inode becomes dirty.
 */
#include "probes.h"
#include "base.h"
#include "pagemap.h"
#include "xarray.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "throttle.h"
#include "inode.h"
#include "region.h"
#include "writeback.h"
#include "page-owner.h"
#include "space.h"
#include "tenant.h"
#include "blocked.h"

#include <stdlib.h>
#include <string.h>

/* A 64-bit mix (the splitmix64 finaliser) so sequential numbers spread. */
static unsigned long ino_hash(uint64_t ino)
{
	ino ^= ino >> 30;
	ino *= 0xbf58476d1ce4e5b9ull;
	ino ^= ino >> 27;
	ino *= 0x94d049bb133111ebull;
	ino ^= ino >> 31;
	return (unsigned long)ino;
}

static int ino_match(struct cds_lfht_node *node, const void *key)
{
	struct pwb_inode *inode =
		caa_container_of(node, struct pwb_inode, hnode);

	return inode->ino == *(const uint64_t *)key;
}

struct pwb_inode *pwb__inode_lookup_rcu(struct pwb_bdi *bdi, uint64_t ino)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	cds_lfht_lookup(bdi->inodes, ino_hash(ino), ino_match, &ino, &iter);
	node = cds_lfht_iter_get_node(&iter);
	if (!node)
		return NULL;
	PWB__TSAN_ACQUIRE(node);	/* pairs with pwb_inode_open() */
	return caa_container_of(node, struct pwb_inode, hnode);
}

/* Free an inode's page-cache and space state (each may be absent), its
 * page map, its locks and its memory: the end of both a failed open and
 * the grace period after a close. */
static void inode_destroy(struct pwb_inode *inode)
{
	if (inode->pcache)
		inode->bdi->page_owner->inode_free(inode);
	pwb__space_inode_free(inode);
	pwb__map_destroy(&inode->map);
	pthread_cond_destroy(&inode->users_cond);
	pthread_cond_destroy(&inode->wb_cond);
	pthread_mutex_destroy(&inode->lock);
	free(inode);
}

/* Undo a pwb__inode_open() that failed after the inode was built (not
 * registered): its page cache, the inode, and the bdi reference the open
 * took. */
static void open_undo(struct pwb_inode *inode)
{
	struct pwb_bdi *bdi = inode->bdi;

	bdi->page_owner->inode_close(inode);
	inode_destroy(inode);
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
}

int pwb__inode_open(struct pwb_bdi *bdi, uint64_t ino,
		    const struct pwb_inode_ops *ops, void *priv,
		    struct pwb_inode **inodep)
{
	struct cds_lfht_node *node;
	struct pwb_inode *inode;

	pwb__err_clear();
	if (!bdi || !ops || !inodep)
		return pwb__err(-EINVAL, "pwb_inode_open: NULL %s",
				!bdi ? "bdi" : !ops ? "ops" : "inodep");
	/* get_page NULL: library-owned pages (pcache-*.c); map_page NULL
	 * too: device space from the built-in allocator (space.c). */
	if (ops->get_page && !ops->map_page)
		return pwb__err(-EINVAL, "pwb_inode_open: ops lack map_page "
					 "(an application's get_page needs its "
					 "map_page)");
	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_inode_open"))
		return -ESHUTDOWN;
	inode = calloc(1, sizeof(*inode));
	if (!inode) {
		pwb__bdi_exit(bdi, PWB__HOLD_REF);
		return pwb__err(-ENOMEM, "pwb_inode_open: out of memory");
	}
	inode->ino = ino;
	inode->bdi = bdi;
	inode->ops = *ops;
	inode->priv = priv;
	if (!ops->map_page) {
		/* Allocator mode: device space from the bdi's allocator,
		 * pages from the page cache (below). */
		inode->ops.map_page = pwb__space_map_page;
		if (pwb__space_inode_alloc(inode)) {
			free(inode);
			pwb__bdi_exit(bdi, PWB__HOLD_REF);
			return pwb__err(-ENOMEM,
					"pwb_inode_open: out of memory");
		}
	}
	inode->wb_hint = -1;
	pwb__mutex_init(&inode->lock, PWB__LOCK_INODE);
	pthread_cond_init(&inode->users_cond, NULL);
	pthread_cond_init(&inode->wb_cond, NULL);
	pwb__map_init(&inode->map);
	CDS_INIT_LIST_HEAD(&inode->io_list);
	cds_lfht_node_init(&inode->hnode);
	if (!ops->get_page) {
		inode->ops.get_page = bdi->page_owner->get_page;
		if (bdi->page_owner->inode_init(inode)) {
			open_undo(inode);
			return -ENOMEM;
		}
	}

	pthread_mutex_lock(&bdi->lock);
	if (bdi->closing) {
		pthread_mutex_unlock(&bdi->lock);
		goto fail_shutdown;
	}
	/* liburcu's hash table publishes the node with its own barriers,
	 * which TSan does not see: tell it (walkers acquire). */
	PWB__TSAN_RELEASE(&inode->hnode);
	rcu_read_lock();
	node = cds_lfht_add_unique(bdi->inodes, ino_hash(ino), ino_match,
				   &inode->ino, &inode->hnode);
	pwb__rcu_read_unlock();
	if (node != &inode->hnode) {
		pthread_mutex_unlock(&bdi->lock);
		open_undo(inode);
		return pwb__err(-EEXIST, "inode %llu is already open",
				(unsigned long long)ino);
	}
	bdi->nr_open_inodes++;
	pthread_mutex_unlock(&bdi->lock);
	/* Registered: a close of the same ino has put back its record
	 * (it does so before it unregisters). */
	if (inode->space) {
		pwb__space_inode_init(inode);
		bdi->page_owner->size_load(inode,
					   pwb__space_get_size(inode));
	}
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	*inodep = inode;
	return 0;

fail_shutdown:
	open_undo(inode);
	return pwb__err(-ESHUTDOWN, "pwb_inode_open: the bdi is closing");
}

static void inode_free_rcu(struct rcu_head *head)
{
	struct pwb_inode *inode = caa_container_of(head, struct pwb_inode, rcu);

	pwb__rcu_callback_begin(inode);

	pwb__region_free(inode);
	inode_destroy(inode);
}

/*
 * Ask the shard policy for @inode's context, before taking inode->lock: a
 * policy may call back into the application (map_page). Contexts live as
 * long as the bdi; the array is read under RCU.
 */
static struct pwb__wb_ctx *choose_wb(struct pwb_inode *inode, uint64_t index,
				     uint64_t *key)
{
	struct pwb_bdi *bdi = inode->bdi;
	struct pwb__wb_ctx_array *arr;
	struct pwb__policy *pol;
	struct pwb__wb_ctx *wb;

	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	pol = PWB__RCU_DEREF(bdi->policy);
	wb = arr->ctx[pwb__policy_select(pol, inode, index, arr->nr)];
	*key = pwb__policy_key(pol, inode, index);
	pwb__rcu_read_unlock();
	return wb;
}

/* Affine @inode to @wb unless a racing first dirtying did. Caller holds
 * inode->lock. */
static struct pwb__wb_ctx *assign_wb_locked(struct pwb_inode *inode,
					    struct pwb__wb_ctx *wb,
					    uint64_t key)
{
	pwb__lockdep_assert_held(&inode->lock);

	if (inode->wb)
		return inode->wb;
	/* Read under the list lock once the inode is on a list (xarray.c);
	 * it is on none yet. */
	inode->xa.key = key;
	uatomic_inc(&wb->stats.nr_inodes);
	PWB__RCU_ASSIGN(inode->wb, wb);
	return wb;
}

/*
 * Lock the list of @inode's context, then the inode, and return that
 * context: a re-shard may move the inode between our read of inode->wb and
 * getting the list lock, so check again under both locks.
 */
static struct pwb__wb_ctx *lock_inode_wb(struct pwb_inode *inode)
{
	for (;;) {
		struct pwb__wb_ctx *wb;

		/* RCU keeps a context that a re-shard retires from being
		 * freed before we hold its lock; once we hold it with the
		 * inode still on it, the re-shard waits for us. */
		rcu_read_lock();
		wb = PWB__RCU_DEREF(inode->wb);
		pthread_mutex_lock(&wb->list_lock);
		pthread_mutex_lock(&inode->lock);
		pwb__rcu_read_unlock();
		if (inode->wb == wb)
			return wb;
		pthread_mutex_unlock(&inode->lock);
		pthread_mutex_unlock(&wb->list_lock);
	}
}

void pwb__inode_attach_dirty(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb = lock_inode_wb(inode);

	/* A flusher holding it (I_SYNC) requeues it itself. */
	if (!(inode->state & (PWB__I_SYNC | PWB__I_FREEING))) {
		if (inode->state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META)) {
			if (inode->on_list == PWB__LIST_NONE ||
			    inode->on_list == PWB__LIST_DIRTY_TIME) {
				struct pwb_inode *tail;

				/* Keep b_dirty sorted by dirtied_when. */
				if (!cds_list_empty(&wb->b_dirty)) {
					tail = cds_list_entry(wb->b_dirty.prev,
							      struct pwb_inode,
							      io_list);
					uint64_t t = pwb__aread(
						&tail->dirtied_when);

					if (t > pwb__aread(
							&inode->dirtied_when))
						pwb__aset(&inode->dirtied_when,
							  t);
				}
				pwb__inode_move_locked(wb, inode,
						       PWB__LIST_DIRTY);
			}
		} else if ((inode->state & PWB__I_DIRTY_TIME) &&
			   inode->on_list == PWB__LIST_NONE) {
			pwb__inode_move_locked(wb, inode,
					       PWB__LIST_DIRTY_TIME);
		}
	}
	pthread_mutex_unlock(&inode->lock);
	pthread_mutex_unlock(&wb->list_lock);
}

void pwb__inode_requeue_clean(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb = lock_inode_wb(inode);
	enum pwb__list l = inode->on_list;

	if (!(inode->state & (PWB__I_SYNC | PWB__I_FREEING |
			      PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META)) &&
	    (l == PWB__LIST_DIRTY || l == PWB__LIST_IO ||
	     l == PWB__LIST_MORE_IO))
		pwb__inode_move_locked(wb, inode,
				       inode->state & PWB__I_DIRTY_TIME
					       ? PWB__LIST_DIRTY_TIME
					       : PWB__LIST_NONE);
	pthread_mutex_unlock(&inode->lock);
	pthread_mutex_unlock(&wb->list_lock);
}

/* The hot path's own copies, inlined into mark_dirty() (a call each
 * cost it 5% in instructions); region.c calls the exported wrappers. */
static inline __attribute__((always_inline)) int64_t
inode_dirty_locked(struct pwb_inode *inode, struct pwb__wb_ctx *wb,
		   uint64_t key, uint64_t first, uint64_t last, uint64_t lsn,
		   bool *attach)
{
	int64_t n;

	pwb__lockdep_assert_held(&inode->lock);

	/* Plain pages go straight to the tag: the LSN variant is a call and
	 * a range set-up more per pwb_mark_dirty(). */
	n = lsn ? pwb__map_set_lsn(&inode->map, first, last, lsn)
		: pwb__map_set(&inode->map, PWB__TAG_DIRTY, first, last);

	*attach = false;
	if (n <= 0)
		return n;
	*attach = !(inode->state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META));
	inode->state |= PWB__I_DIRTY_PAGES;
	if (*attach)
		pwb__aset(&inode->dirtied_when, pwb__now(inode->bdi));
	wb = assign_wb_locked(inode, wb, key);
	/* Counted under the lock, so the flusher's decrement comes after. */
	pwb__wb_account_dirtied(wb, (uint64_t)n);
	if (caa_unlikely(inode->tenant))
		pwb__tenant_dirtied(inode->tenant,
				    (uint64_t)n << inode->bdi->page_shift);
	return n;
}

/*
 * Pages this thread dirtied since it last compared the bdi's dirty pages
 * with the background threshold. Summing them reads every context's
 * dirtier slots, cache lines the other dirtiers keep writing, so a thread
 * looks only once it has dirtied 1/64 of the threshold since (at most
 * 32 pages), as the kernel's ratelimit does: background writeback starts
 * at most that many pages per dirtying thread late. A new page counts
 * when the call dirtied one; re-dirtying a dirty page adds nothing.
 */
static PWB__TLS_FAST uint32_t bg_ratelimit_pages;

static inline __attribute__((always_inline)) bool
bg_check_due(uint64_t bg, int64_t n)
{
	uint64_t rl = PWB__MIN(bg >> 6, 32);

	if (n <= 0)
		return false;
	if (bg_ratelimit_pages + (uint64_t)n <= rl) {
		bg_ratelimit_pages += (uint32_t)n;
		return false;
	}
	bg_ratelimit_pages = 0;
	return true;
}

static inline __attribute__((always_inline)) int
mark_dirty_tail(struct pwb_inode *inode, int64_t n)
{
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t bg = pwb__aread(&bdi->bg_thresh_pages);

	if (bg && !pwb__aread(&bdi->bg_active) && bg_check_due(bg, n) &&
	    pwb__bdi_dirty_pages_rcu(bdi) > bg)	/* in the call's section */
		pwb__kick_background(bdi);
	if (n > 0 && (bdi->cfg.flags & PWB_BDI_THROTTLE)) {
		pwb__throttle_account((uint64_t)n);
		/* Ends the section (it may sleep, holding the bdi). */
		if (!pwb__in_flusher())
			return pwb__balance_dirty_rcu(
				bdi, pwb__aread(&inode->tenant));
	}
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return 0;
}

int64_t pwb__inode_dirty_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb, uint64_t key,
				uint64_t first, uint64_t last, uint64_t lsn,
				bool *attach)
{
	return inode_dirty_locked(inode, wb, key, first, last, lsn, attach);
}

int pwb__mark_dirty_tail(struct pwb_inode *inode, int64_t n)
{
	return mark_dirty_tail(inode, n);
}

/*
 * Whether mark_dirty() must go page by page through the inode's region
 * (a per-page policy now, or ever since the inode was first dirtied under
 * one). Called twice: once before inode->lock, where @may_attach lets a
 * per-page policy attach the region (pwb__region_attach() takes that
 * lock), and once under inode->lock, the lock pwb__region_attach() sets
 * inode->region under: a region attached by another thread between the
 * two calls is seen by the second, so no page is tagged on the inode's
 * own lists once routing through slices may have begun.
 */
static inline bool by_region(struct pwb_inode *inode, bool may_attach)
{
	if (PWB__RCU_DEREF(inode->region))
		return true;
	return may_attach &&
	       (PWB__RCU_DEREF(inode->bdi->policy)->flags &
		PWB_POLICY_F_PER_PAGE) &&
	       !pwb__region_attach(inode);
}

/* The work of pwb_mark_dirty() and pwb_mark_dirty_lsn() (@lsn 0 is plain)
 * after their argument checks: @len is not 0 and the range does not wrap.
 * Inlined into each caller, so that pwb_mark_dirty() folds @lsn away and
 * makes no second call. */
static inline __attribute__((always_inline)) int
mark_dirty_range(struct pwb_inode *inode, uint64_t off, uint64_t len,
		 uint64_t lsn)
{
	unsigned long gen;
	struct pwb__wb_ctx *wb;
	struct pwb_bdi *bdi;
	uint64_t first, last, key = 0;
	bool attach;
	int64_t n;

	/*
	 * One read-side section over the whole call: it keeps the inode and
	 * the bdi alive after inode->lock is dropped (a close running now
	 * frees them after a grace period), and costs nothing more than the
	 * section the background check below needs anyway.
	 */
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_mark_dirty");
	bdi = inode->bdi;
	first = off >> bdi->page_shift;
	last = (off + (len - 1)) >> bdi->page_shift;
	/* More pages than the device holds cannot all be written; tracking
	 * them would only exhaust memory (found by the fuzzer). */
	if (last - first >= bdi->capacity >> bdi->page_shift) {
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return pwb__err(-EFBIG, "pwb_mark_dirty: range of %llu pages "
					"is larger than the device (%llu pages)",
				(unsigned long long)(last - first + 1),
				(unsigned long long)(bdi->capacity >>
						     bdi->page_shift));
	}
again:
	gen = pwb__aread(&bdi->reshard_gen);
	wb = PWB__RCU_DEREF(inode->wb);
	if (caa_unlikely(!wb)) {
		if (pwb__bdi_dead_rcu(bdi)) {
			pwb__inode_exit(inode, PWB__HOLD_RCU);
			return pwb__bdi_dead_err("pwb_mark_dirty");
		}
		if (by_region(inode, true))
			return pwb__region_mark_dirty(inode, first, last,
						      lsn);
		wb = choose_wb(inode, first, &key);
	}

	pthread_mutex_lock(&inode->lock);
	/* A re-shard may have retired the context we chose: choose again. */
	if (caa_unlikely(!inode->wb) &&
	    pwb__aread(&bdi->reshard_gen) != gen) {
		pthread_mutex_unlock(&inode->lock);
		goto again;
	}
	if (inode->state & PWB__I_FREEING) {
		uint64_t ino = inode->ino;	/* freed once we leave */

		pthread_mutex_unlock(&inode->lock);
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return pwb__err(-EBADF, "pwb_mark_dirty: inode %llu is "
					"being closed",
				(unsigned long long)ino);
	}
	/* Again, under the lock (see by_region()). */
	if (caa_unlikely(by_region(inode, false))) {
		pthread_mutex_unlock(&inode->lock);
		return pwb__region_mark_dirty(inode, first, last, lsn);
	}
	n = inode_dirty_locked(inode, wb, key, first, last, lsn, &attach);
	pthread_mutex_unlock(&inode->lock);
	if (n <= 0) {
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return n ? pwb__err(-ENOMEM, "pwb_mark_dirty: out of memory")
			 : 0;
	}
	if (attach)
		pwb__inode_attach_dirty(inode);
	return mark_dirty_tail(inode, n);
}

/* pwb_mark_dirty() and pwb_mark_dirty_lsn(): the argument checks, then
 * the work. */
static inline __attribute__((always_inline)) int
mark_dirty(struct pwb_inode *inode, uint64_t off, uint64_t len, uint64_t lsn)
{
	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_mark_dirty: NULL inode");
	if (!len)
		return 0;
	if (off > UINT64_MAX - (len - 1))
		return pwb__err(-EOVERFLOW, "pwb_mark_dirty: range %llu+%llu "
					    "wraps past 2^64",
				(unsigned long long)off,
				(unsigned long long)len);
	return mark_dirty_range(inode, off, len, lsn);
}

int pwb__mark_dirty(struct pwb_inode *inode, uint64_t off, uint64_t len)
{
	return mark_dirty_range(inode, off, len, 0);
}

PWB_API int pwb_mark_dirty(struct pwb_inode *inode, uint64_t off, uint64_t len)
{
	return mark_dirty(inode, off, len, 0);
}

PWB_API int pwb_mark_dirty_lsn(struct pwb_inode *inode, uint64_t off,
			       uint64_t len, uint64_t lsn)
{
	return mark_dirty(inode, off, len, lsn);
}

PWB_API int pwb_mark_inode_dirty(struct pwb_inode *inode, unsigned int flags)
{
	struct pwb__wb_ctx *wb;
	uint64_t ino;
	bool attach = false;
	uint64_t key = 0;

	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_mark_inode_dirty: NULL inode");
	if (!flags || (flags & ~(PWB_I_DIRTY_META | PWB_I_DIRTY_TIME)))
		return pwb__err(-EINVAL, "pwb_mark_inode_dirty: bad flags "
					 "0x%x",
				flags);
	/* Keeps the inode alive after its lock is dropped, as in
	 * pwb_mark_dirty(). */
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_mark_inode_dirty");
	ino = inode->ino;	/* for messages after the section */
	if (!inode->ops.write_inode) {
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return pwb__err(-EINVAL, "pwb_mark_inode_dirty: inode %llu "
					 "has no write_inode op",
				(unsigned long long)ino);
	}
	pthread_mutex_lock(&inode->lock);
	if (inode->state & PWB__I_FREEING) {
		pthread_mutex_unlock(&inode->lock);
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return pwb__err(-EBADF, "pwb_mark_inode_dirty: inode %llu is "
					"being closed",
				(unsigned long long)ino);
	}
	while (!inode->wb) {
		unsigned long gen = pwb__aread(&inode->bdi->reshard_gen);

		pthread_mutex_unlock(&inode->lock);
		wb = choose_wb(inode, 0, &key);
		pthread_mutex_lock(&inode->lock);
		if (pwb__aread(&inode->bdi->reshard_gen) == gen)
			assign_wb_locked(inode, wb, key);
	}
	if (flags & PWB_I_DIRTY_META) {
		if (!(inode->state & (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META))) {
			pwb__aset(&inode->dirtied_when,
				  pwb__now(inode->bdi));
			attach = true;
		}
		inode->state |= PWB__I_DIRTY_META;
	}
	if ((flags & PWB_I_DIRTY_TIME) &&
	    !(inode->state & PWB__I_DIRTY_TIME)) {
		inode->dirtied_time_when = pwb__now(inode->bdi);
		inode->state |= PWB__I_DIRTY_TIME;
		attach = true;
	}
	pthread_mutex_unlock(&inode->lock);
	if (attach)
		pwb__inode_attach_dirty(inode);
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return 0;
}

/*
 * pwb_inode_priv() and pwb_inode_ino() read fields fixed at open, and take
 * no entry helper: writeback calls get_page and map_page once per page, and
 * both callbacks usually begin with pwb_inode_priv(), so a read-side section
 * here (two TLS look-ups through __tls_get_addr in a shared library) was
 * four fifths of the engine's cost per dense page (issue 29). A section
 * opened inside the call would not protect the load anyway: a close whose
 * call_rcu() came before it need not wait for it. The caller's own hold on
 * the inode (open, or inside an ops callback) is what keeps it valid.
 */
PWB_API void *pwb_inode_priv(const struct pwb_inode *inode)
{
	return inode ? inode->priv : NULL;
}

PWB_API uint64_t pwb_inode_ino(const struct pwb_inode *inode)
{
	return inode ? inode->ino : 0;
}

/*
 * The context of a region inode's first page: the holder of its lowest
 * dirty or in-flight page, else the slice its first page ever went to,
 * else @wb (its own). Caller holds rcu_read_lock.
 */
static struct pwb__wb_ctx *region_first_wb_rcu(struct pwb_inode *inode,
					       struct pwb__wb_ctx *wb)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr = pwb__region_holders_rcu(inode, h);
	struct pwb__wb_ctx *best = NULL;
	uint64_t low = UINT64_MAX;
	int slot;

	for (i = 0; i < nr; i++) {
		uint64_t d = UINT64_MAX, w = UINT64_MAX;

		pthread_mutex_lock(&h[i]->lock);
		pwb__map_find(&h[i]->map, PWB__TAG_DIRTY, 0, &d);
		pwb__map_find(&h[i]->map, PWB__TAG_WRITEBACK, 0, &w);
		if (PWB__MIN(d, w) < low || !best) {
			low = PWB__MIN(d, w);
			best = h[i]->wb;
		}
		pthread_mutex_unlock(&h[i]->lock);
	}
	if (low != UINT64_MAX)
		return best;
	slot = pwb__aread(&inode->region->first_slot);
	if (slot >= 0 && PWB__RCU_DEREF(inode->region->slice[slot]))
		return PWB__RCU_DEREF(
			PWB__RCU_DEREF(inode->region->slice[slot])->wb);
	return wb ? wb : best;
}

PWB_API int pwb_inode_wb_ctx(const struct pwb_inode *inode)
{
	struct pwb_inode *in = (struct pwb_inode *)inode;
	struct pwb__wb_ctx *wb;
	uint64_t ino;
	int idx;

	pwb__err_clear();
	if (!in)
		return pwb__err(-EINVAL, "pwb_inode_wb_ctx: NULL inode");
	/* A context retired by a re-shard is freed after a grace period. */
	pwb__inode_enter(in, PWB__HOLD_RCU, "pwb_inode_wb_ctx");
	wb = PWB__RCU_DEREF(in->wb);
	if (PWB__RCU_DEREF(in->region))
		wb = region_first_wb_rcu(in, wb);
	idx = wb ? (int)wb->idx : -1;
	ino = in->ino;
	pwb__inode_exit(in, PWB__HOLD_RCU);
	if (idx < 0)
		return pwb__err(-ENODATA, "inode %llu was never dirtied: its "
					  "context is chosen at first "
					  "dirtying",
				(unsigned long long)ino);
	return idx;
}

/*
 * Walk @inode and its region slices (those with a context) as @h; caller
 * holds rcu_read_lock. A whole inode is its only holder.
 */
#define for_each_holder(inode, i, h, nh)                                      \
	struct pwb_inode *h##_all[1 + PWB_MAX_WB_CTX], *h;                     \
	unsigned int i, nh = holders_rcu((inode), h##_all);                    \
	for (i = 0; i < nh && ((h = h##_all[i]), 1); i++)

static unsigned int holders_rcu(struct pwb_inode *inode,
				struct pwb_inode **out)
{
	if (!PWB__RCU_DEREF(inode->region)) {
		out[0] = inode;
		return 1;
	}
	return pwb__region_holders_rcu(inode, out);
}

PWB_API int pwb_inode_dirty_pages(struct pwb_inode *inode, uint64_t *nr)
{
	pwb__err_clear();
	if (!inode || !nr)
		return pwb__err(-EINVAL, "pwb_inode_dirty_pages: NULL %s",
				!inode ? "inode" : "nr");
	*nr = 0;
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_inode_dirty_pages");
	for_each_holder(inode, i, h, nh) {
		pthread_mutex_lock(&h->lock);
		*nr += h->map.count[PWB__TAG_DIRTY];
		pthread_mutex_unlock(&h->lock);
	}
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return 0;
}

enum pwb__list pwb__inode_list(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb;
	enum pwb__list l;

	if (!PWB__RCU_DEREF(inode->wb))
		return PWB__LIST_NONE;
	wb = lock_inode_wb(inode);
	l = inode->on_list;
	pthread_mutex_unlock(&inode->lock);
	pthread_mutex_unlock(&wb->list_lock);
	return l;
}

/* True if nothing of @inode is dirty or in flight, and no end_write of it
 * is still running (a close must not free it under one). Caller holds
 * lock. */
static bool inode_idle_locked(const struct pwb_inode *inode)
{
	pwb__lockdep_assert_held(&inode->lock);

	return !(inode->state & (PWB__I_DIRTY_ANY | PWB__I_SYNC)) &&
	       !inode->map.count[PWB__TAG_WRITEBACK] &&
	       !pwb__aread(&inode->nr_ending);
}

uint64_t pwb__inode_write_epoch(struct pwb_inode *inode)
{
	uint64_t seq = 0;

	/* Page writes of a per-page policy are its slices'; metadata (and
	 * pages dirtied before the policy) are the inode's own. */
	rcu_read_lock();
	{
		for_each_holder(inode, i, h, nh) {
			pthread_mutex_lock(&h->lock);
			seq = PWB__MAX(seq, h->last_write_epoch);
			pthread_mutex_unlock(&h->lock);
		}
	}
	pwb__rcu_read_unlock();
	return seq;
}

/* Write @inode's dirty data and make it durable; return the work's own
 * error (write errors are reported through errseq) and the flush error. */
static int inode_sync(struct pwb_inode *inode, int *flush_err)
{
	bool idle = true;
	int err = 0;

	/* Under a per-page policy: every slice, then one device flush. */
	rcu_read_lock();
	{
		for_each_holder(inode, i, h, nh) {
			pthread_mutex_lock(&h->lock);
			idle = idle && inode_idle_locked(h);
			pthread_mutex_unlock(&h->lock);
		}
	}
	pwb__rcu_read_unlock();
	if (!idle)
		err = pwb__sync_and_wait(inode->bdi, inode);
	*flush_err = pwb__bdi_flush_device_for(inode->bdi, inode,
					       pwb__inode_write_epoch(inode));
	return err;
}

/* The failed mark (error.c) of any region slice of @inode, 0 if none.
 * Takes each slice's lock: the caller holds no inode lock. */
static int slices_failed_err(struct pwb_inode *inode)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr;
	int err = 0;

	if (!PWB__RCU_DEREF(inode->region))
		return 0;
	rcu_read_lock();
	nr = pwb__region_holders_rcu(inode, h);
	for (i = 1; i < nr && !err; i++) {
		pthread_mutex_lock(&h[i]->lock);
		err = h[i]->failed_err;
		pthread_mutex_unlock(&h[i]->lock);
	}
	pwb__rcu_read_unlock();
	return err;
}

int pwb__fsync(struct pwb_inode *inode)
{
	pwb__errseq_t since;
	int err, ferr, werr;
	uint64_t ino, t0, start;

	if (pwb__inode_enter(inode, PWB__HOLD_REF, "pwb_fsync"))
		return -EBADF;
	ino = inode->ino;	/* a closing inode is not ours to read after */
	t0 = pwb__clock_monotonic(NULL);
	start = pwb__now(inode->bdi);
	PWB_PROBE1(fsync_start, ino);
	pthread_mutex_lock(&inode->lock);
	/*
	 * Our own cursor, sampled now: every fsync that starts before an
	 * error was reported to an fsync gets it, even when another fsync
	 * running alongside reports it first. The shared cursor then moves
	 * on (always to the latest value, under inode->lock), so an fsync
	 * that starts after the report does not see it again.
	 */
	since = inode->fsync_cursor;
	pthread_mutex_unlock(&inode->lock);

	werr = inode_sync(inode, &ferr);

	pthread_mutex_lock(&inode->lock);
	err = pwb__errseq_check_and_advance(&inode->wb_err, &since);
	inode->fsync_cursor = since;
	/* A failed inode (error.c) stays failed until the application
	 * clears it, whatever later writes do. */
	if (!err)
		err = inode->failed_err;
	pthread_mutex_unlock(&inode->lock);
	if (!err)
		err = slices_failed_err(inode);
	{
		uint64_t now = pwb__now(inode->bdi);

		pwb__hist_add_inode(inode->bdi, inode, PWB_HIST_FSYNC,
				    now > start ? now - start : 0);
	}
	pwb__inode_exit(inode, PWB__HOLD_REF);
	if (!err)
		err = ferr;
	if (!err && werr == -ENOMEM)
		err = werr;
	if (err)
		pwb__err(err, "pwb_fsync of inode %llu: %s",
			 (unsigned long long)ino, pwb__strerror(err));
	PWB_PROBE3(fsync_end, ino, err, pwb__clock_monotonic(NULL) - t0);
	(void)t0;
	return err;
}

PWB_API int pwb_fsync(struct pwb_inode *inode)
{
	int err;

	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_fsync: NULL inode");
	err = pwb__no_flusher("pwb_fsync");
	if (err)
		return err;
	return pwb__fsync(inode);
}

void pwb__inode_unlink(struct pwb_inode *inode)
{
	struct pwb__wb_ctx *wb;

	if (!PWB__RCU_DEREF(inode->wb))
		return;
	/* A background pass may still hold it if a write failed. */
	for (;;) {
		uint64_t t0;

		wb = lock_inode_wb(inode);
		if (!(inode->state & PWB__I_SYNC))
			break;
		pthread_mutex_unlock(&inode->lock);
		t0 = pwb__now(inode->bdi);
		pthread_cond_wait(&wb->sync_cond, &wb->list_lock);
		pthread_mutex_unlock(&wb->list_lock);
		pwb__blocked_since(inode->bdi, inode, NULL, PWB_BLOCK_BUSY, t0);
	}
	/* Counted off under the locks: once they drop, a re-shard may
	 * retire and free @wb, and leaves a GONE inode alone. */
	pwb__inode_move_locked(wb, inode, PWB__LIST_NONE);
	uatomic_sub(&wb->stats.dirty_pages, inode->map.count[PWB__TAG_DIRTY]);
	if (inode->tenant)
		pwb__tenant_dropped(inode->tenant,
				    inode->map.count[PWB__TAG_DIRTY]
					    << inode->bdi->page_shift);
	uatomic_dec(&wb->stats.nr_inodes);
	inode->state |= PWB__I_GONE;
	pthread_mutex_unlock(&inode->lock);
	pthread_mutex_unlock(&wb->list_lock);
}

int pwb__inode_close(struct pwb_inode *inode)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	struct pwb_bdi *bdi = inode->bdi;
	unsigned int i, nh;
	int err, ferr, werr;

	/* Claimed (I_FREEING): later calls get -EBADF; wait for fsyncs. */
	pthread_mutex_lock(&inode->lock);
	while (inode->users) {
		uint64_t t0 = pwb__now(bdi);

		pthread_cond_wait(&inode->users_cond, &inode->lock);
		pwb__blocked_since(bdi, inode, inode->tenant, PWB_BLOCK_BUSY,
				   t0);
	}
	pthread_mutex_unlock(&inode->lock);

	if (PWB__RCU_DEREF(inode->region))
		pwb__region_freeze(inode);
	werr = inode_sync(inode, &ferr);

	/* Our close keeps the slices (freed with the inode); only their
	 * contexts need the read-side section, and pwb__inode_unlink()
	 * may sleep, so it runs outside it. */
	rcu_read_lock();
	nh = holders_rcu(inode, h);
	pwb__rcu_read_unlock();
	for (i = 0; i < nh; i++)
		pwb__inode_unlink(h[i]);
	/* No call and no write uses the pages any more. */
	bdi->page_owner->inode_close(inode);
	pwb__tenant_inode_closed(inode);
	err = pwb__errseq_check_and_advance(&inode->wb_err,
					    &inode->fsync_cursor);
	if (!err)
		err = inode->failed_err;	/* never cleared */
	if (!err)
		err = slices_failed_err(inode);
	/* Allocator mode: the extents stay, for the next open of the ino;
	 * before the unregistering (see pwb__space_inode_init). */
	if (inode->space)
		pwb__space_set_size(inode, bdi->page_owner->size(inode));
	pwb__space_inode_fini(inode);
	rcu_read_lock();
	cds_lfht_del(bdi->inodes, &inode->hnode);
	pwb__rcu_read_unlock();
	/* Lock-free lookups may still see it until a grace period passes. */
	PWB__TSAN_RELEASE(inode);
	pwb__call_rcu(&inode->rcu, inode_free_rcu);
	/* Last touch of the bdi: a pwb_bdi_close() waiting for this close
	 * may free it as soon as the lock is dropped. */
	pthread_mutex_lock(&bdi->lock);
	if (--bdi->nr_open_inodes == 0 || bdi->closing)
		pthread_cond_broadcast(&bdi->idle_cond);
	pthread_mutex_unlock(&bdi->lock);

	if (!err)
		err = ferr;
	if (!err && werr == -ENOMEM)
		err = werr;
	return err;
}

PWB_API int pwb_inode_close(struct pwb_inode *inode)
{
	int err;

	pwb__err_clear();
	if (!inode)
		return 0;
	err = pwb__no_flusher("pwb_inode_close");
	if (err)
		return err;
	if (pwb__inode_enter(inode, PWB__HOLD_CLOSE, "pwb_inode_close"))
		return -EBADF;
	err = pwb__inode_close(inode);
	if (err && !*pwb__errmsg())
		pwb__err(err, "closing inode: %s", pwb__strerror(err));
	return err;
}

PWB_API int pwb_inode_error(struct pwb_inode *inode)
{
	int err;

	pwb__err_clear();
	if (!inode)	/* -EINVAL could be a mark: see pwb.h */
		return pwb__err(-EBADF, "pwb_inode_error: NULL inode");
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_inode_error");
	pthread_mutex_lock(&inode->lock);
	err = inode->failed_err;
	pthread_mutex_unlock(&inode->lock);
	if (!err)
		err = slices_failed_err(inode);
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return err;
}

PWB_API int pwb_inode_clear_error(struct pwb_inode *inode)
{
	bool closing;
	uint64_t ino;

	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_inode_clear_error: NULL inode");
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_inode_clear_error");
	ino = inode->ino;
	pthread_mutex_lock(&inode->lock);
	closing = inode->state & PWB__I_FREEING;
	if (!closing)
		pwb__inode_clear_error_locked(inode);
	pthread_mutex_unlock(&inode->lock);
	if (!closing) {
		/* And every slice's (a per-page policy). */
		for_each_holder(inode, i, h, nh) {
			pthread_mutex_lock(&h->lock);
			pwb__inode_clear_error_locked(h);
			pthread_mutex_unlock(&h->lock);
		}
	}
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	if (closing)
		return pwb__err(-EBADF, "pwb_inode_clear_error: inode %llu is "
					"being closed",
				(unsigned long long)ino);
	return 0;
}

static struct cds_list_head *list_head(struct pwb__wb_ctx *wb,
				       enum pwb__list which)
{
	switch (which) {
	case PWB__LIST_DIRTY:
		return &wb->b_dirty;
	case PWB__LIST_IO:
		return &wb->b_io;
	case PWB__LIST_MORE_IO:
		return &wb->b_more_io;
	case PWB__LIST_DIRTY_TIME:
		return &wb->b_dirty_time;
	default:
		return NULL;
	}
}

static bool counts_as_dirty(enum pwb__list l)
{
	return l == PWB__LIST_DIRTY || l == PWB__LIST_IO ||
	       l == PWB__LIST_MORE_IO;
}

/*
 * Move @inode to the tail of list @to (or off every list), keeping the
 * nr_dirty_inodes and nr_dirty_time_inodes counters right.
 * Caller holds wb->list_lock.
 */
void pwb__inode_move_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			    enum pwb__list to)
{
	enum pwb__list from = inode->on_list;

	pwb__lockdep_assert_held(&wb->list_lock);

	if (from != PWB__LIST_NONE)
		cds_list_del_init(&inode->io_list);
	if (inode->in_tree) {
		pwb__xa_erase(&wb->io_tree, &inode->xa);
		inode->in_tree = false;
	}
	if (to != PWB__LIST_NONE)
		cds_list_add_tail(&inode->io_list, list_head(wb, to));
	/* Without memory for the tree the inode stays on the b_io list
	 * only, and first_io_inode() takes it after the indexed ones. */
	if (to == PWB__LIST_IO && wb->ordered)
		inode->in_tree = !pwb__xa_insert(&wb->io_tree, &inode->xa);
	inode->on_list = to;
	if (counts_as_dirty(from) != counts_as_dirty(to))
		uatomic_add(&wb->stats.nr_dirty_inodes,
			    counts_as_dirty(to) ? 1 : -1);
	if ((from == PWB__LIST_DIRTY_TIME) != (to == PWB__LIST_DIRTY_TIME))
		uatomic_add(&wb->stats.nr_dirty_time_inodes,
			    to == PWB__LIST_DIRTY_TIME ? 1 : -1);
}

PWB_API int pwb_inode_set_wb_hint(struct pwb_inode *inode, int ctx)
{
	unsigned int nr;

	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_inode_set_wb_hint: NULL inode");
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_inode_set_wb_hint");
	nr = pwb__bdi_nr_wb_ctx(inode->bdi);	/* 0 once the bdi is closing */
	if (ctx < -1 || (ctx >= 0 && (unsigned int)ctx >= nr)) {
		pwb__inode_exit(inode, PWB__HOLD_RCU);
		return pwb__err(-ERANGE, "pwb_inode_set_wb_hint: context %d "
					 "does not exist (the bdi has %u; -1 "
					 "clears the hint)",
				ctx, nr);
	}
	/* Read lock-free by select(); an int store is atomic. */
	pwb__aset(&inode->wb_hint, ctx);
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	return 0;
}

void pwb__inode_clear_error_locked(struct pwb_inode *inode)
{
	pwb__lockdep_assert_held(&inode->lock);

	inode->failed_err = 0;
	inode->wb_failures = 0;
	inode->backoff_ns = 0;
	inode->retry_after = 0;
}
