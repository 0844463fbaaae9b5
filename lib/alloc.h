/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * alloc.h - the extent allocator: allocation groups and reservations
 *
 * Not installed. Units are pages of the bdi (unit u is device bytes
 * [u * page_size, (u + 1) * page_size)). The device's units are split into
 * nr_groups consecutive groups; each group has its own lock and indexes its
 * free extents twice, by offset (to merge neighbours on free and to find
 * the extent holding a goal) and by (length, offset) (best fit). Groups are
 * independent: a free extent never crosses a group boundary.
 *
 * Reservation: @avail counts free units not promised to anyone. Dirtying a
 * page that has no device block yet reserves one unit (pwb__alloc_reserve,
 * lock-free); allocating it later takes the unit from the groups without
 * touching @avail (it was taken at reservation); freeing blocks and
 * dropping unused reservations give units back. So at every moment
 *	avail = sum of the groups' free units - units reserved, not allocated
 * and an allocation for reserved pages always finds space.
 */
#ifndef PWB_ALLOC_H
#define PWB_ALLOC_H

#include <pthread.h>
#include <stdint.h>

#include "avl.h"

struct pwb__alloc_group {
	pthread_mutex_t lock;		/* PWB__LOCK_ALLOC_GROUP: the rest */
	uint64_t start;			/* read-only: first unit */
	uint64_t len;			/* read-only: units */
	struct pwb__avl_tree by_off;	/* lock: free extents by offset */
	struct pwb__avl_tree by_len;	/* lock: by (length, offset) */
	uint64_t free_units;		/* lock to write (pwb__aset);
					 * pwb__aread without it: placement
					 * hints and stats */
} __attribute__((aligned(64)));

struct pwb__alloc {
	uint64_t units;			/* read-only: device size in units */
	unsigned int nr_groups;		/* read-only */
	uint64_t group_units;		/* read-only: units of every group but
					 * the last (which takes the rest) */
	struct pwb__alloc_group *groups;
	/* uatomic: free units not reserved; may be read racily. Its own
	 * cache line: every dirtier of a new page updates it. */
	int64_t avail __attribute__((aligned(64)));
};

struct pwb__alloc_group_info {
	uint64_t start, len;		/* units */
	uint64_t free_units, free_extents, largest;
};

/* Split @units into @nr_groups groups (0: one per GiB of @unit_size units,
 * 4 to 64, each at least 16 MiB; never more groups than units), all
 * free. */
int pwb__alloc_init(struct pwb__alloc *a, uint64_t units, unsigned int unit_size,
		    unsigned int nr_groups) __attribute__((visibility("hidden")));
void pwb__alloc_destroy(struct pwb__alloc *a)
	__attribute__((visibility("hidden")));

/* The group holding @unit (@unit < a->units). */
unsigned int pwb__alloc_group_of(const struct pwb__alloc *a, uint64_t unit)
	__attribute__((visibility("hidden")));

/* Take @nr units from avail, lock-free: 0, or -ENOSPC (nothing taken). */
int pwb__alloc_reserve(struct pwb__alloc *a, uint64_t nr)
	__attribute__((visibility("hidden")));
/* Give back @nr reserved units that will not be allocated. */
void pwb__alloc_unreserve(struct pwb__alloc *a, uint64_t nr)
	__attribute__((visibility("hidden")));

/*
 * Allocate one extent of 1 to @want reserved units (the caller holds a
 * reservation of at least @want; avail is not changed). Where:
 *  1. @goal (a unit, or UINT64_MAX for none) if it is free: from there,
 *     as far as the free extent holding it and @want go;
 *  2. best fit: the smallest free extent of at least @want units, in
 *     @home's group first (the goal's group if there is a goal), then
 *     in the following groups in turn;
 *  3. the largest free extent of any group (the caller asks again for the
 *     rest).
 * Takes the groups' locks one at a time. Return 0 with *@start and *@got,
 * or -ENOSPC if no group has a free unit (only when reservations were not
 * honoured).
 */
int pwb__alloc_extent(struct pwb__alloc *a, uint64_t goal, unsigned int home,
		      uint64_t want, uint64_t *start, uint64_t *got)
	__attribute__((visibility("hidden")));
/*
 * As pwb__alloc_extent(), with a set of groups preferred: [@set_first,
 * @set_first + @set_len) (a write stream's, or every group). A goal is
 * taken wherever it is (the caller passes one inside the set); the best
 * fit looks in the set first, from @home if @home is in it, and only then
 * in the other groups; the largest-piece fallback also prefers the set.
 * An empty or out-of-range set means every group.
 */
int pwb__alloc_extent_in(struct pwb__alloc *a, uint64_t goal,
			 unsigned int home, unsigned int set_first,
			 unsigned int set_len, uint64_t want, uint64_t *start,
			 uint64_t *got) __attribute__((visibility("hidden")));
/* Free units [@start, @start + @nr), allocated (they may cross groups):
 * merged with free neighbours, and given back to avail. */
void pwb__alloc_free(struct pwb__alloc *a, uint64_t start, uint64_t nr)
	__attribute__((visibility("hidden")));
/*
 * Mark units [@start, @start + @nr) used (rebuilding saved state): they
 * must all be free; they are taken from avail as well. Return 0; -EEXIST
 * if one of them is not free; -ENOSPC if avail cannot cover them (free
 * but reserved by dirty pages); -EINVAL past the device; -ENOMEM. Nothing
 * is changed on failure.
 */
int pwb__alloc_mark_used(struct pwb__alloc *a, uint64_t start, uint64_t nr)
	__attribute__((visibility("hidden")));
/* A group's numbers (takes its lock). */
void pwb__alloc_group_info(struct pwb__alloc *a, unsigned int group,
			   struct pwb__alloc_group_info *info)
	__attribute__((visibility("hidden")));
/* Free units of all groups, and free extents (takes each lock in turn). */
uint64_t pwb__alloc_free_units(struct pwb__alloc *a, uint64_t *extents)
	__attribute__((visibility("hidden")));
/* Check every group's trees against each other (tests): 0 or -1. */
int pwb__alloc_check(struct pwb__alloc *a)
	__attribute__((visibility("hidden")));

#endif /* PWB_ALLOC_H */
