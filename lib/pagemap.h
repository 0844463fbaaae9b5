/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pagemap.h - sparse per-inode page tags (pagemap.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_PAGEMAP_H
#define PWB_PAGEMAP_H

#include "base.h"

/* ---------------------------------------------------------------------- */
/* pagemap.c: sparse per-inode page tags                                  */

/*
 * A radix tree over page indexes whose leaves are bitmaps of 512 pages, one
 * bitmap per tag. Interior nodes keep, per tag, a 64-bit mask of children
 * holding that tag, so searches skip clean space and range operations touch
 * a word per 64 pages. Not thread-safe: the owner's lock (inode->lock)
 * protects it.
 */
enum pwb__tag {
	PWB__TAG_DIRTY = 0,	/* changed since last written */
	PWB__TAG_TOWRITE = 1,	/* selected by an integrity sync */
	PWB__TAG_WRITEBACK = 2,	/* a write of the page is in flight */
	PWB__NR_TAGS = 3,
};

#define PWB__MAP_LEAF_SHIFT 9
#define PWB__MAP_LEAF_PAGES (1u << PWB__MAP_LEAF_SHIFT)
#define PWB__MAP_FANOUT_SHIFT 6
#define PWB__MAP_FANOUT (1u << PWB__MAP_FANOUT_SHIFT)

struct pwb__map {
	void *root;		/* a node, or a leaf when height == 0 */
	unsigned int height;	/* interior levels above the leaves */
	uint64_t count[PWB__NR_TAGS];	/* pages holding each tag */
	uint64_t nr_nodes;	/* allocated nodes + leaves (memory figure) */
	uint64_t nr_lsn;	/* leaves with an LSN array (0: no LSNs) */
};

void pwb__map_init(struct pwb__map *map) PWB__INTERNAL;
void pwb__map_destroy(struct pwb__map *map) PWB__INTERNAL;
/* Set @tag on [first, last]; return pages newly tagged or -ENOMEM (then
 * nothing changed). */
int64_t pwb__map_set(struct pwb__map *map, enum pwb__tag tag, uint64_t first,
		     uint64_t last) PWB__INTERNAL;
/* Clear @tag on [first, last]; return pages that had it. Never fails. */
uint64_t pwb__map_clear(struct pwb__map *map, enum pwb__tag tag,
			uint64_t first, uint64_t last) PWB__INTERNAL;
/* Set @to on every page of [first, last] holding @from; return how many
 * pages newly got @to, or -ENOMEM. */
int64_t pwb__map_copy_tag(struct pwb__map *map, enum pwb__tag from,
			  enum pwb__tag to, uint64_t first,
			  uint64_t last) PWB__INTERNAL;
bool pwb__map_test(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t index) PWB__INTERNAL;
/* Find the first page >= @start holding @tag; store it in *@found and
 * return true, or return false. */
bool pwb__map_find(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t start, uint64_t *found) PWB__INTERNAL;
/* Length of the run of pages holding @tag from @start on, at most @max. */
uint64_t pwb__map_run(const struct pwb__map *map, enum pwb__tag tag,
		      uint64_t start, uint64_t max) PWB__INTERNAL;
/* Set DIRTY on [first, last] and raise each page's LSN to at least @lsn
 * (pwb_mark_dirty_lsn; @lsn 0 is pwb__map_set). Return pages newly dirty,
 * or -ENOMEM with no page newly dirty. */
int64_t pwb__map_set_lsn(struct pwb__map *map, uint64_t first, uint64_t last,
			 uint64_t lsn) PWB__INTERNAL;
/* The LSN of page @index (0: none recorded). */
uint64_t pwb__map_lsn(const struct pwb__map *map, uint64_t index)
	PWB__INTERNAL;
/* The highest LSN of pages [first, first + n); *@prefix gets how many
 * pages from @first have an LSN at or below @above. */
uint64_t pwb__map_lsn_max(const struct pwb__map *map, uint64_t first,
			  uint64_t n, uint64_t above,
			  uint64_t *prefix) PWB__INTERNAL;
/* Forget the LSNs of [first, first + n): writeback took those pages. */
void pwb__map_lsn_reset(struct pwb__map *map, uint64_t first,
			uint64_t n) PWB__INTERNAL;

#endif /* PWB_PAGEMAP_H */
