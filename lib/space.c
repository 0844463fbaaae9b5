// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * space.c - delayed allocation for allocator-mode inodes; space.h has the
 * picture and the contract.
 */
#include "pwb-internal.h"
#include "space.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUN_BYTES (64ull << 20)

/* A closed allocator-mode inode's state, in space->records by ino. */
struct space_record {
	struct pwb__avl_node node;
	uint64_t ino;
	struct pwb__extmap ext;
	unsigned int home;
	unsigned int stream;
	uint64_t size;
};

#define REC(n) caa_container_of(n, struct space_record, node)

static int cmp_ino(const struct pwb__avl_node *a, const struct pwb__avl_node *b)
{
	return REC(a)->ino < REC(b)->ino ? -1 : REC(a)->ino > REC(b)->ino;
}

/* extmap_remove callback: give a piece's blocks back to the allocator. */
static void free_now(void *arg, const struct pwb__extent *piece)
{
	pwb__alloc_free(arg, piece->dev, piece->len);
}

/*
 * Blocks [@start, @start + @nr) left the file: free them now, or (busy
 * extents) note them as freed in the open generation. A block whose data
 * was never written was never in an index the application saved (see
 * pwb_inode_extents()), so it is free at once. Without memory to note
 * them, the blocks stay out of use until the bdi closes: space lost for
 * a while, never a block reused too early.
 */
static void busy_add(struct pwb__space *sp, uint64_t start, uint64_t nr)
{
	pthread_mutex_lock(&sp->busy_lock);
	if (sp->nr_busy && sp->busy[sp->nr_busy - 1].gen == sp->busy_gen &&
	    sp->busy[sp->nr_busy - 1].start + sp->busy[sp->nr_busy - 1].nr ==
		    start) {
		sp->busy[sp->nr_busy - 1].nr += nr;
	} else {
		if (sp->nr_busy == sp->cap_busy) {
			size_t cap = sp->cap_busy ? 2 * sp->cap_busy : 64;
			struct pwb__busy *v = realloc(sp->busy,
						      cap * sizeof(*v));

			if (!v) {
				uatomic_add(&sp->busy_lost, nr);
				pthread_mutex_unlock(&sp->busy_lock);
				return;
			}
			sp->busy = v;
			sp->cap_busy = cap;
		}
		sp->busy[sp->nr_busy++] = (struct pwb__busy){
			.gen = sp->busy_gen, .start = start, .nr = nr };
	}
	uatomic_add(&sp->busy_units, nr);
	pthread_mutex_unlock(&sp->busy_lock);
}

static void free_piece(void *arg, const struct pwb__extent *piece)
{
	struct pwb__space *sp = arg;

	if (piece->unwritten || sp->reuse_freed)
		pwb__alloc_free(&sp->alloc, piece->dev, piece->len);
	else
		busy_add(sp, piece->dev, piece->len);
}

int pwb__space_bdi_init(struct pwb_bdi *bdi)
{
	struct pwb__space *sp = calloc(1, sizeof(*sp));
	int ret;

	if (!sp)
		return -ENOMEM;
	ret = pwb__alloc_init(&sp->alloc, bdi->capacity >> bdi->page_shift,
			      pwb__page_size(bdi), bdi->cfg.nr_alloc_groups);
	if (ret) {
		free(sp);
		return ret;
	}
	sp->unit_shift = bdi->page_shift;
	sp->max_run = PWB__MAX(MAX_RUN_BYTES >> bdi->page_shift, 1);
	sp->reuse_freed = bdi->cfg.flags & PWB_BDI_REUSE_FREED;
	pwb__mutex_init(&sp->records_lock, PWB__LOCK_SPACE_RECORDS);
	pwb__mutex_init(&sp->busy_lock, PWB__LOCK_SPACE_BUSY);
	pwb__avl_init(&sp->records);
	bdi->space = sp;
	return 0;
}

void pwb__space_bdi_fini(struct pwb_bdi *bdi)
{
	struct pwb__space *sp = bdi->space;
	struct pwb__avl_node *n;

	if (!sp)
		return;
	/* After the rcu_barrier() that ran the inodes' frees. */
	PWB__TSAN_ACQUIRE(sp);
	while ((n = pwb__avl_first(&sp->records))) {
		pwb__avl_remove(&sp->records, n);
		pwb__extmap_destroy(&REC(n)->ext);
		free(REC(n));
	}
	pwb__alloc_destroy(&sp->alloc);
	pthread_mutex_destroy(&sp->records_lock);
	pthread_mutex_destroy(&sp->busy_lock);
	free(sp->busy);
	free(sp);
	bdi->space = NULL;
}

int pwb__space_inode_alloc(struct pwb_inode *inode)
{
	struct pwb__space_inode *si = calloc(1, sizeof(*si));

	if (!si)
		return -ENOMEM;
	pwb__mutex_init(&si->lock, PWB__LOCK_SPACE);
	pwb__extmap_init(&si->ext, true);
	pwb__extmap_init(&si->dalloc, false);
	si->home = UINT_MAX;
	si->base = UINT64_MAX;
	inode->space = si;
	return 0;
}

int pwb__space_inode_init(struct pwb_inode *inode)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	struct space_record key = {.ino = inode->ino}, *r = NULL;
	struct pwb__avl_node *n;

	if (!si && pwb__space_inode_alloc(inode))
		return -ENOMEM;
	si = inode->space;
	pthread_mutex_lock(&sp->records_lock);
	n = pwb__avl_floor(&sp->records, &key.node, cmp_ino);
	if (n && REC(n)->ino == inode->ino) {
		r = REC(n);
		pwb__avl_remove(&sp->records, n);
	}
	pthread_mutex_unlock(&sp->records_lock);
	if (r) {
		pthread_mutex_lock(&si->lock);
		pwb__extmap_destroy(&si->ext);
		pwb__extmap_move(&si->ext, &r->ext);
		si->home = r->home;
		si->stream = r->stream;
		si->size = r->size;
		pthread_mutex_unlock(&si->lock);
		free(r);
	}
	return 0;
}

/* Caller holds si->lock: free the blocks of the unwritten runs of @si. */
static void drop_unwritten_locked(struct pwb__space *sp,
				  struct pwb__space_inode *si)
{
	struct pwb__extent *e, *next;
	uint64_t before = pwb__extmap_count(&si->ext);

	pwb__lockdep_assert_held(&si->lock);

	for (e = pwb__extmap_first(&si->ext); e; e = next) {
		next = pwb__extmap_after(e);
		if (e->unwritten)
			pwb__extmap_remove(&si->ext, e->file, e->len,
					   free_now, &sp->alloc);
	}
	uatomic_add(&sp->nr_extents, (int64_t)pwb__extmap_count(&si->ext) -
					     (int64_t)before);
}

void pwb__space_inode_fini(struct pwb_inode *inode)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	struct space_record *r;
	uint64_t unused;

	if (!si)
		return;
	pthread_mutex_lock(&si->lock);
	unused = si->dalloc.units;
	pwb__extmap_destroy(&si->dalloc);
	pwb__alloc_unreserve(&sp->alloc, unused);
	uatomic_add(&sp->reserved, -(int64_t)unused);
	/* Every write has ended: blocks still unwritten hold no data of the
	 * file (pages reserved but never dirtied, or whose writes failed
	 * and were dropped). No index ever named them: free them now. */
	drop_unwritten_locked(sp, si);
	if (!pwb__extmap_count(&si->ext) && !si->size) {
		pthread_mutex_unlock(&si->lock);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		/* Without a record the blocks stay used but unreachable
		 * until the bdi closes; say so through the stats. */
		pthread_mutex_unlock(&si->lock);
		return;
	}
	r->ino = inode->ino;
	pwb__extmap_move(&r->ext, &si->ext);
	r->home = si->home;
	r->stream = si->stream;
	r->size = si->size;
	pthread_mutex_unlock(&si->lock);
	pthread_mutex_lock(&sp->records_lock);
	pwb__avl_insert(&sp->records, &r->node, cmp_ino);
	pthread_mutex_unlock(&sp->records_lock);
}

void pwb__space_inode_free(struct pwb_inode *inode)
{
	struct pwb__space_inode *si = inode->space;
	struct pwb__space *sp = inode->bdi->space;

	if (!si)
		return;
	/* Only a never-finished open gets here with extents. */
	if (pwb__extmap_count(&si->ext) && sp)
		uatomic_add(&sp->nr_extents,
			    -(int64_t)pwb__extmap_count(&si->ext));
	pwb__extmap_destroy(&si->ext);
	pwb__extmap_destroy(&si->dalloc);
	pthread_mutex_destroy(&si->lock);
	free(si);
	inode->space = NULL;
	/* Runs in the inode's RCU callback: pwb_bdi_close()'s rcu_barrier()
	 * orders it before pwb__space_bdi_fini(), which TSan cannot see. */
	if (sp)
		PWB__TSAN_RELEASE(sp);
}

/*
 * Write streams: the groups are split into min(groups, PWB_WRITE_STREAM_SETS)
 * sets of consecutive groups; stream s >= 1 allocates in set (s - 1) mod
 * that many, stream 0 (the default) in every group. Sets [*@first,
 * *@first + *@len) for @stream.
 */
static void stream_set(const struct pwb__space *sp, unsigned int stream,
		       unsigned int *first, unsigned int *len)
{
	unsigned int g = sp->alloc.nr_groups, sets, k;

	if (!stream || g < 2) {
		*first = 0;
		*len = g;
		return;
	}
	sets = PWB__MIN(g, (unsigned int)PWB_WRITE_STREAM_SETS);
	k = (stream - 1) % sets;
	*first = (unsigned int)((uint64_t)k * g / sets);
	*len = (unsigned int)((uint64_t)(k + 1) * g / sets) - *first;
}

/*
 * Whether device unit @unit may be a goal for groups [@first, @first +
 * @len): it lies in them, or they are full (a stream that spilled out of
 * its set keeps growing contiguously where it spilled).
 */
static bool in_set(const struct pwb__space *sp, uint64_t unit,
		   unsigned int first, unsigned int len)
{
	unsigned int g = pwb__alloc_group_of(&sp->alloc, unit), i;

	if (g >= first && g - first < len)
		return true;
	for (i = first; i < first + len; i++)
		if (pwb__aread(&sp->alloc.groups[i].free_units))
			return false;
	return true;
}

/* Caller holds si->lock: pick the home group once, the least full of the
 * inode's stream set. */
static unsigned int home_locked(struct pwb__space *sp,
				struct pwb__space_inode *si, uint64_t ino)
{
	unsigned int i, h, best, first, n;
	uint64_t best_free;

	pwb__lockdep_assert_held(&si->lock);

	if (si->home != UINT_MAX)
		return si->home;
	stream_set(sp, si->stream, &first, &n);
	/* The freest group; ties go to the next group of a rotor, so
	 * inodes placed at about the same time (their data still delayed,
	 * all groups equally free) get a group each. */
	unsigned int r, k, bit;
	uint64_t frac = 0;

	(void)ino;
	r = (unsigned int)uatomic_add_return(&sp->next_home, 1) - 1;
	h = first + r % n;
	best = h;
	best_free = pwb__aread(&sp->alloc.groups[h].free_units);
	for (i = 1; i < n; i++) {
		unsigned int g = first + (h - first + i) % n;
		uint64_t f = pwb__aread(&sp->alloc.groups[g].free_units);

		if (f > best_free) {
			best_free = f;
			best = g;
		}
	}
	/* The k-th inode homed in a round starts its layout at the k-th
	 * point of a van der Corput sequence through the group (0, 1/2,
	 * 1/4, 3/4, ...): inodes sharing a group lay out apart and grow
	 * into the space between them. */
	for (k = r / n, bit = 0; k; k >>= 1, bit++)
		frac |= (uint64_t)(k & 1) << (31 - bit);
	si->base = sp->alloc.groups[best].start +
		   (uint64_t)(((unsigned __int128)sp->alloc.groups[best].len *
			       frac) >> 32);
	pwb__aset(&si->home, best);
	return best;
}

/* Caller holds si->lock. Move *@idx past the pages that are allocated or
 * reserved and return the end of the run of pages that are neither from
 * there (at most @end); a return not above *@idx: none left before @end. */
static uint64_t next_gap_locked(const struct pwb__space_inode *si,
				uint64_t *idx, uint64_t end)
{
	pwb__lockdep_assert_held(&si->lock);

	while (*idx < end) {
		struct pwb__extent *a = pwb__extmap_next(&si->ext, *idx);
		struct pwb__extent *d = pwb__extmap_next(&si->dalloc, *idx);
		uint64_t stop = end;

		if (a && a->file <= *idx) {
			*idx = a->file + a->len;
			continue;
		}
		if (d && d->file <= *idx) {
			*idx = d->file + d->len;
			continue;
		}
		if (a)
			stop = PWB__MIN(stop, a->file);
		if (d)
			stop = PWB__MIN(stop, d->file);
		return stop;
	}
	return *idx;
}

/* pwb__space_reserve(); *@newly: the units this call reserved. */
static int reserve_range(struct pwb_inode *inode, uint64_t first, uint64_t nr,
			 uint64_t *newly, uint64_t *mask)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	uint64_t end, idx, stop, need = 0, total;
	int ret = 0;

	*newly = 0;
	if (!si)
		return -EINVAL;
	if (!nr)
		return 0;
	if (nr > UINT64_MAX - first)
		return -EINVAL;
	end = first + nr;
	pthread_mutex_lock(&si->lock);
	home_locked(sp, si, inode->ino);
	/* Count the pages neither allocated nor reserved. */
	for (idx = first; (stop = next_gap_locked(si, &idx, end)) > idx;
	     idx = stop)
		need += stop - idx;
	if (!need)
		goto out;
	total = need;
	ret = pwb__alloc_reserve(&sp->alloc, need);
	if (ret) {
		uint64_t busy = pwb__aread(&sp->busy_units);

		pthread_mutex_unlock(&si->lock);
		if (busy)
			return pwb__err(ret, "no free space on the device for "
					     "%llu more pages of inode %llu: "
					     "%llu bytes are busy (freed but "
					     "not yet released with "
					     "pwb_bdi_release_freed())",
					(unsigned long long)need,
					(unsigned long long)inode->ino,
					(unsigned long long)busy
						<< sp->unit_shift);
		return pwb__err(ret, "no free space on the device for %llu "
				     "more pages of inode %llu",
				(unsigned long long)need,
				(unsigned long long)inode->ino);
	}
	for (idx = first;
	     !ret && (stop = next_gap_locked(si, &idx, end)) > idx;
	     idx = stop) {
		ret = pwb__extmap_insert(&si->dalloc, idx, stop - idx, 0,
					 false);
		if (!ret) {
			need -= stop - idx;
			uatomic_add(&sp->reserved, (int64_t)(stop - idx));
			for (uint64_t b = idx - first; mask && b < stop - first;
			     b++)
				mask[b / 64] |= 1ull << (b % 64);
		}
	}
	/* Out of memory part way: keep what was recorded (reserve is
	 * idempotent: a retry reserves the rest), return the rest. */
	pwb__alloc_unreserve(&sp->alloc, need);
	*newly = total - need;
	if (ret)
		pwb__err(ret, "reserving space: out of memory");
out:
	pthread_mutex_unlock(&si->lock);
	return ret;
}

int pwb__space_reserve(struct pwb_inode *inode, uint64_t first, uint64_t nr)
{
	uint64_t newly;

	return reserve_range(inode, first, nr, &newly, NULL);
}

int pwb__space_reserve_mask(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr, uint64_t *mask)
{
	uint64_t newly;

	return reserve_range(inode, first, nr, &newly, mask);
}

int pwb__space_reserve_page(struct pwb_inode *inode, uint64_t index,
			    bool *newly)
{
	uint64_t n;
	int ret = reserve_range(inode, index, 1, &n, NULL);

	*newly = n != 0;
	return ret;
}

void pwb__space_unreserve(struct pwb_inode *inode, uint64_t index)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;

	if (!si)
		return;
	pthread_mutex_lock(&si->lock);
	/* Removing one page from a run may need a node: without one, the
	 * reservation stays until a truncate or the close gives it back. */
	if (pwb__extmap_remove(&si->dalloc, index, 1, NULL, NULL) > 0) {
		pwb__alloc_unreserve(&sp->alloc, 1);
		uatomic_add(&sp->reserved, -1);
	}
	pthread_mutex_unlock(&si->lock);
}

/*
 * Caller holds si->lock. Where page @index (not allocated) should go: where
 * a linear layout from its nearest allocated neighbour puts it (the last
 * extent before it, else the first after it), so the holes between extents
 * stay free for the pages that later fill them and the extents merge when
 * they do, whatever order the contexts write the pages in. A file with no
 * blocks yet starts at its base in its home group (see home_locked())
 * plus @index, when that is inside the group. The allocator falls back to
 * best fit when the goal is taken.
 */
static uint64_t goal_locked(const struct pwb__space *sp,
			    const struct pwb__space_inode *si, unsigned int home,
			    uint64_t index)
{
	const struct pwb__alloc_group *g = &sp->alloc.groups[home];
	struct pwb__extent *next = pwb__extmap_next(&si->ext, index);
	struct pwb__avl_node *n;
	unsigned int first, len;

	pwb__lockdep_assert_held(&si->lock);

	/* Neighbours placed before a change of stream may lie outside the
	 * stream's set: they are no goal then. */
	stream_set(sp, si->stream, &first, &len);
	n = next ? pwb__avl_prev(&next->node) : pwb__avl_last(&si->ext.tree);
	if (n) {
		const struct pwb__extent *prev =
			caa_container_of(n, struct pwb__extent, node);
		uint64_t goal = prev->dev + (index - prev->file);

		if (goal < sp->alloc.units &&
		    in_set(sp, goal, first, len))
			return goal;
	}
	if (next && next->dev >= next->file - index &&
	    in_set(sp, next->dev - (next->file - index), first, len))
		return next->dev - (next->file - index);
	if (si->base != UINT64_MAX && si->base + index < g->start + g->len)
		return si->base + index;
	return index < g->len ? g->start + index : g->start;
}

/* Caller holds si->lock. Allocate the delalloc run from @index (or, for
 * a page never reserved, reserve it now). */
static int allocate_locked(struct pwb__space *sp, struct pwb__space_inode *si,
			   uint64_t ino, uint64_t index, uint64_t *dev)
{
	struct pwb__extent *d = pwb__extmap_find(&si->dalloc, index);
	uint64_t want, goal, start, got;
	unsigned int home = home_locked(sp, si, ino), first, len;
	int ret;

	pwb__lockdep_assert_held(&si->lock);

	if (d) {
		want = PWB__MIN(d->file + d->len - index, sp->max_run);
	} else {
		/* Dirtied without pwb__space_reserve (a caller that marks
		 * pages itself): reserve the one page now. */
		ret = pwb__alloc_reserve(&sp->alloc, 1);
		if (ret)
			return ret;
		ret = pwb__extmap_insert(&si->dalloc, index, 1, 0, false);
		if (ret) {
			pwb__alloc_unreserve(&sp->alloc, 1);
			return ret;
		}
		uatomic_add(&sp->reserved, 1);
		want = 1;
	}
	goal = goal_locked(sp, si, home, index);
	stream_set(sp, si->stream, &first, &len);
	ret = pwb__alloc_extent_in(&sp->alloc, goal, home, first, len, want,
				   &start, &got);
	if (ret)
		return ret;
	{
		uint64_t before = pwb__extmap_count(&si->ext);

		/* Unwritten until its write ends (pwb__space_written): a
		 * read of the page meanwhile, or after the write failed,
		 * finds zeros, never what the block held before. */
		ret = pwb__extmap_insert(&si->ext, index, got, start, true);
		if (ret) {
			/* Give the blocks back, still reserved. */
			pwb__alloc_free(&sp->alloc, start, got);
			pwb__alloc_reserve(&sp->alloc, got);
			return ret;
		}
		uatomic_add(&sp->nr_extents,
			    (int64_t)pwb__extmap_count(&si->ext) -
				    (int64_t)before);
	}
	/* Cannot fail: the run starts or ends at @index, or holds it (then a
	 * split: after the insert above, so undoing is not possible; the
	 * node is small and the removal's failure leaves pages both
	 * allocated and delalloc, which punch and close handle). */
	if (pwb__extmap_remove(&si->dalloc, index, got, NULL, NULL) > 0)
		uatomic_add(&sp->reserved, -(int64_t)got);
	*dev = start;
	return 0;
}

int pwb__space_map_page(struct pwb_inode *app, uint64_t index,
			uint64_t *dev_off)
{
	struct pwb__space *sp = app->bdi->space;
	struct pwb__space_inode *si = app->space;
	struct pwb__extent *e;
	uint64_t dev;
	int ret = 0;

	if (!si)
		return -EINVAL;
	pthread_mutex_lock(&si->lock);
	e = pwb__extmap_find(&si->ext, index);
	if (e)
		dev = e->dev + (index - e->file);
	else
		ret = allocate_locked(sp, si, app->ino, index, &dev);
	pthread_mutex_unlock(&si->lock);
	if (!ret)
		*dev_off = dev << sp->unit_shift;
	return ret;
}

static int lookup(struct pwb_inode *inode, uint64_t index, uint64_t *dev_off,
		  bool written_only)
{
	struct pwb__space_inode *si = inode->space;
	struct pwb__extent *e;
	int ret = -ENODATA;

	if (!si)
		return -EINVAL;
	pthread_mutex_lock(&si->lock);
	e = pwb__extmap_find(&si->ext, index);
	if (e && !(written_only && e->unwritten)) {
		*dev_off = (e->dev + (index - e->file))
			   << inode->bdi->space->unit_shift;
		ret = 0;
	}
	pthread_mutex_unlock(&si->lock);
	return ret;
}

int pwb__space_lookup(struct pwb_inode *inode, uint64_t index,
		      uint64_t *dev_off)
{
	return lookup(inode, index, dev_off, false);
}

int pwb__space_read_lookup(struct pwb_inode *inode, uint64_t index,
			   uint64_t *dev_off)
{
	return lookup(inode, index, dev_off, true);
}

int pwb__space_written(struct pwb_inode *inode, uint64_t first, uint64_t nr)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	uint64_t before;
	int ret;

	if (!si)
		return 0;
	pthread_mutex_lock(&si->lock);
	before = pwb__extmap_count(&si->ext);
	ret = pwb__extmap_mark_written(&si->ext, first, nr);
	uatomic_add(&sp->nr_extents, (int64_t)pwb__extmap_count(&si->ext) -
					     (int64_t)before);
	pthread_mutex_unlock(&si->lock);
	return ret;
}

void pwb__space_punch(struct pwb_inode *inode, uint64_t first, uint64_t nr)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	uint64_t before;
	int64_t n;

	if (!si || !nr)
		return;
	pthread_mutex_lock(&si->lock);
	before = pwb__extmap_count(&si->ext);
	pwb__extmap_remove(&si->ext, first, nr, free_piece, sp);
	uatomic_add(&sp->nr_extents, (int64_t)pwb__extmap_count(&si->ext) -
					     (int64_t)before);
	n = pwb__extmap_remove(&si->dalloc, first, nr, NULL, NULL);
	if (n > 0) {
		pwb__alloc_unreserve(&sp->alloc, (uint64_t)n);
		uatomic_add(&sp->reserved, -n);
	}
	pthread_mutex_unlock(&si->lock);
}

unsigned int pwb__space_inode_group(struct pwb_inode *inode, uint64_t index)
{
	struct pwb__space *sp = inode->bdi->space;
	struct pwb__space_inode *si = inode->space;
	struct pwb__extent *e;
	unsigned int g;

	if (!si)
		return 0;
	pthread_mutex_lock(&si->lock);
	e = pwb__extmap_find(&si->ext, index);
	if (e)
		g = pwb__alloc_group_of(&sp->alloc, e->dev + (index - e->file));
	else
		g = home_locked(sp, si, inode->ino);
	pthread_mutex_unlock(&si->lock);
	return g;
}

uint64_t pwb__space_get_size(struct pwb_inode *inode)
{
	struct pwb__space_inode *si = inode->space;
	uint64_t size;

	if (!si)
		return 0;
	pthread_mutex_lock(&si->lock);
	size = si->size;
	pthread_mutex_unlock(&si->lock);
	return size;
}

void pwb__space_set_size(struct pwb_inode *inode, uint64_t size)
{
	struct pwb__space_inode *si = inode->space;

	if (!si)
		return;
	pthread_mutex_lock(&si->lock);
	si->size = size;
	pthread_mutex_unlock(&si->lock);
}

uint64_t pwb__space_delalloc_pages(struct pwb_inode *inode)
{
	struct pwb__space_inode *si = inode->space;
	uint64_t n;

	if (!si)
		return 0;
	pthread_mutex_lock(&si->lock);
	n = si->dalloc.units;
	pthread_mutex_unlock(&si->lock);
	return n;
}

/* ----------------------------------------------------------- public */

int pwb__bdi_alloc_group_stats(struct pwb_bdi *bdi, unsigned int group,
			       struct pwb_alloc_group_stats *st)
{
	struct pwb__alloc_group_info gi;
	unsigned int shift;

	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_alloc_group_stats: NULL bdi");
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_alloc_group_stats"))
		return -ESHUTDOWN;
	if (group >= bdi->space->alloc.nr_groups) {
		unsigned int nr = bdi->space->alloc.nr_groups;

		pwb__bdi_exit(bdi, PWB__HOLD_RCU);
		return pwb__err(-ENOENT, "pwb_bdi_alloc_group_stats: group %u "
					 "of %u", group, nr);
	}
	pwb__alloc_group_info(&bdi->space->alloc, group, &gi);
	shift = bdi->space->unit_shift;
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	st->start = gi.start << shift;
	st->len = gi.len << shift;
	st->free_bytes = gi.free_units << shift;
	st->free_extents = gi.free_extents;
	st->largest_free = gi.largest << shift;
	return 0;
}

/*
 * The checks every public allocator-mode call starts with: a NULL @inode
 * or one not in allocator mode is -EINVAL (message set, naming @who);
 * else the inode is entered (PWB__HOLD_REF: the caller exits it) and 0.
 */
static int space_enter(struct pwb_inode *inode, const char *who)
{
	if (!inode)
		return pwb__err(-EINVAL, "%s: NULL inode", who);
	if (!inode->space)
		return pwb__err(-EINVAL, "%s: inode %llu is not in allocator "
					 "mode", who,
				(unsigned long long)inode->ino);
	return pwb__inode_enter(inode, PWB__HOLD_REF, who);
}

PWB_API int pwb_inode_extents(struct pwb_inode *inode, struct pwb_extent *ext,
			      size_t nr, size_t *total)
{
	struct pwb__space_inode *si;
	struct pwb__extent *e;
	unsigned int shift;
	size_t i = 0;
	int ret;

	pwb__err_clear();
	if (!ext && nr)
		return pwb__err(-EINVAL, "pwb_inode_extents: NULL ext");
	ret = space_enter(inode, "pwb_inode_extents");
	if (ret)
		return ret;
	si = inode->space;
	shift = inode->bdi->space->unit_shift;
	pthread_mutex_lock(&si->lock);
	/* Only blocks that hold the file's data: an index that named a
	 * block still unwritten would show its old bytes after a restart. */
	for (e = pwb__extmap_first(&si->ext); e; e = pwb__extmap_after(e)) {
		if (e->unwritten)
			continue;
		if (i < nr) {
			ext[i].file_off = e->file << shift;
			ext[i].dev_off = e->dev << shift;
			ext[i].len = e->len << shift;
		}
		i++;
	}
	if (total)
		*total = i;
	pthread_mutex_unlock(&si->lock);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return 0;
}

static int cmp_ext_file(const void *a, const void *b)
{
	const struct pwb_extent *x = a, *y = b;

	return x->file_off < y->file_off ? -1 : x->file_off > y->file_off;
}

PWB_API int pwb_inode_set_extents(struct pwb_inode *inode,
				  const struct pwb_extent *ext, size_t nr)
{
	struct pwb__space *sp;
	struct pwb__space_inode *si;
	struct pwb_extent *v = NULL;
	uint64_t ps, dirty;
	size_t i, done = 0;
	int ret;

	pwb__err_clear();
	if (!inode || (!ext && nr))
		return pwb__err(-EINVAL, "pwb_inode_set_extents: NULL %s",
				!inode ? "inode" : "ext");
	if (!inode->space)
		return pwb__err(-EINVAL, "pwb_inode_set_extents: inode %llu "
					 "is not in allocator mode",
				(unsigned long long)inode->ino);
	sp = inode->bdi->space;
	ps = 1ull << sp->unit_shift;
	for (i = 0; i < nr; i++) {
		const struct pwb_extent *x = &ext[i];

		if (!x->len || (x->file_off | x->dev_off | x->len) & (ps - 1) ||
		    x->dev_off > inode->bdi->capacity ||
		    x->len > inode->bdi->capacity - x->dev_off ||
		    x->file_off + x->len < x->file_off)
			return pwb__err(-EINVAL, "pwb_inode_set_extents: "
						 "extent %zu is empty, not "
						 "page aligned or past the "
						 "device", i);
	}
	v = malloc(nr ? nr * sizeof(*v) : 1);
	if (!v)
		return pwb__err(-ENOMEM, "pwb_inode_set_extents: out of memory");
	if (nr)
		memcpy(v, ext, nr * sizeof(*v));
	qsort(v, nr, sizeof(*v), cmp_ext_file);
	for (i = 1; i < nr; i++)
		if (v[i - 1].file_off + v[i - 1].len > v[i].file_off) {
			free(v);
			return pwb__err(-EINVAL, "pwb_inode_set_extents: "
						 "extents overlap in the file");
		}
	ret = pwb__inode_enter(inode, PWB__HOLD_REF, "pwb_inode_set_extents");
	if (ret) {
		free(v);
		return ret;
	}
	pthread_mutex_lock(&inode->lock);
	dirty = inode->map.count[PWB__TAG_DIRTY] +
		inode->map.count[PWB__TAG_WRITEBACK];
	pthread_mutex_unlock(&inode->lock);
	si = inode->space;
	pthread_mutex_lock(&si->lock);
	if (dirty || pwb__extmap_count(&si->ext) || si->dalloc.units) {
		ret = pwb__err(-EBUSY, "pwb_inode_set_extents: inode %llu "
					"already has extents or dirty pages",
			       (unsigned long long)inode->ino);
		goto out;
	}
	for (i = 0; i < nr; i++) {
		uint64_t f = v[i].file_off >> sp->unit_shift;
		uint64_t d = v[i].dev_off >> sp->unit_shift;
		uint64_t n = v[i].len >> sp->unit_shift;

		ret = pwb__alloc_mark_used(&sp->alloc, d, n);
		if (!ret) {
			ret = pwb__extmap_insert(&si->ext, f, n, d, false);
			if (ret)
				pwb__alloc_free(&sp->alloc, d, n);
		}
		if (ret)
			break;
		done++;
	}
	if (ret) {
		/* Undo: free what was marked, forget the map. */
		struct pwb__extent *e;

		for (e = pwb__extmap_first(&si->ext); e;
		     e = pwb__extmap_after(e))
			pwb__alloc_free(&sp->alloc, e->dev, e->len);
		pwb__extmap_destroy(&si->ext);
		pwb__err(ret, "pwb_inode_set_extents: %s",
			 ret == -EEXIST ? "a block is already used"
					: pwb__strerror(ret));
	} else {
		uatomic_add(&sp->nr_extents,
			    (int64_t)pwb__extmap_count(&si->ext));
		if (si->home == UINT_MAX && nr)
			pwb__aset(&si->home,
				   pwb__alloc_group_of(&sp->alloc,
						       v[nr - 1].dev_off >>
							       sp->unit_shift));
	}
	(void)done;
out:
	pthread_mutex_unlock(&si->lock);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	free(v);
	return ret;
}

PWB_API int pwb_inode_set_stream(struct pwb_inode *inode, unsigned int id)
{
	struct pwb__space_inode *si;
	int ret;

	pwb__err_clear();
	ret = space_enter(inode, "pwb_inode_set_stream");
	if (ret)
		return ret;
	si = inode->space;
	pthread_mutex_lock(&si->lock);
	if (si->stream == id) {
		ret = 0;
	} else if (si->dalloc.units) {
		/*
		 * Pages waiting for their first block were routed to a
		 * writeback context by the home group (the alloc-group
		 * policies): moving the home under them would send their
		 * blocks elsewhere than their context expects.
		 */
		ret = pwb__err(-EBUSY, "pwb_inode_set_stream: inode %llu has "
				       "%llu pages waiting for their first "
				       "block; call pwb_fsync() first",
			       (unsigned long long)inode->ino,
			       (unsigned long long)si->dalloc.units);
	} else {
		si->stream = id;
		/* A new home inside the stream's set, chosen at the next
		 * allocation. */
		si->base = UINT64_MAX;
		pwb__aset(&si->home, UINT_MAX);
		ret = 0;
	}
	pthread_mutex_unlock(&si->lock);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return ret;
}

void pwb__space_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	struct pwb__space *sp = bdi->space;
	int64_t v;

	if (!sp)
		return;
	v = pwb__aread(&sp->nr_extents);
	st->extents = v > 0 ? (uint64_t)v : 0;
	st->alloc_groups = sp->alloc.nr_groups;
	v = pwb__aread(&sp->reserved);
	st->reserved_bytes = v > 0 ? (uint64_t)v << sp->unit_shift : 0;
	st->busy_bytes = (pwb__aread(&sp->busy_units) +
			  pwb__aread(&sp->busy_lost)) << sp->unit_shift;
	st->free_bytes = pwb__alloc_free_units(&sp->alloc, NULL)
			 << sp->unit_shift;
}

int pwb__space_policy_offset(struct pwb_inode *app, uint64_t index,
			     uint64_t *dev_off)
{
	struct pwb__space *sp = app->bdi->space;
	unsigned int g;

	if (!pwb__space_lookup(app, index, dev_off))
		return 0;
	g = pwb__space_inode_group(app, index);
	*dev_off = sp->alloc.groups[g].start << sp->unit_shift;
	return 0;
}

PWB_API int pwb_bdi_freed_cookie(struct pwb_bdi *bdi, uint64_t *cookie)
{
	struct pwb__space *sp;

	pwb__err_clear();
	if (!bdi || !cookie)
		return pwb__err(-EINVAL, "pwb_bdi_freed_cookie: NULL %s",
				!bdi ? "bdi" : "cookie");
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_freed_cookie"))
		return -ESHUTDOWN;
	sp = bdi->space;
	pthread_mutex_lock(&sp->busy_lock);
	/* Close the open generation: frees from now on are in the next. */
	*cookie = sp->busy_gen++;
	pthread_mutex_unlock(&sp->busy_lock);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}

PWB_API int pwb_bdi_release_freed(struct pwb_bdi *bdi, uint64_t cookie)
{
	struct pwb__space *sp;
	size_t i, keep = 0;
	int ret = 0;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_release_freed: NULL bdi");
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_release_freed"))
		return -ESHUTDOWN;
	sp = bdi->space;
	pthread_mutex_lock(&sp->busy_lock);
	if (cookie >= sp->busy_gen) {
		ret = pwb__err(-EINVAL, "pwb_bdi_release_freed: cookie %llu "
					"was not given by pwb_bdi_freed_cookie() "
					"(the next is %llu)",
			       (unsigned long long)cookie,
			       (unsigned long long)sp->busy_gen);
		goto out;
	}
	/* Runs are in order of generation: release a prefix. */
	for (i = 0; i < sp->nr_busy && sp->busy[i].gen <= cookie; i++) {
		pwb__alloc_free(&sp->alloc, sp->busy[i].start,
				sp->busy[i].nr);
		uatomic_add(&sp->busy_units, -(int64_t)sp->busy[i].nr);
	}
	keep = sp->nr_busy - i;
	if (i && keep)	/* sp->busy may be NULL when nothing was busy */
		memmove(sp->busy, sp->busy + i, keep * sizeof(*sp->busy));
	sp->nr_busy = keep;
out:
	pthread_mutex_unlock(&sp->busy_lock);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return ret;
}
