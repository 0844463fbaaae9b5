/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * space.h - the space layer: device space for allocator-mode inodes
 *
 * Not installed. An inode opened with neither get_page nor map_page gets
 * its device blocks from the bdi's extent allocator (alloc.h) with delayed
 * allocation, as XFS does:
 *
 *   pwb__space_reserve          page dirtied, no block yet: one unit is
 *     (writer's thread)         reserved (-ENOSPC here, at write time) and
 *                               the page joins the inode's delalloc runs
 *   pwb__space_map_page         a flusher writes the page: the whole run of
 *     (flusher, map_page op)    delalloc pages from it gets one extent if
 *                               free space allows, placed right after the
 *                               extent of the page before (the goal)
 *   pwb__space_punch            truncate/discard: blocks freed, unused
 *                               reservations given back
 *   pwb__space_inode_fini       close: the extents stay (the file exists)
 *                               in a per-bdi record by ino, taken over by
 *                               the next open of that ino
 *
 * Units are pages of the bdi. Each inode's maps are under its space lock
 * (PWB__LOCK_SPACE), which nests outside the group locks and inside every
 * other libpwb lock: no space function takes an engine lock.
 */
#ifndef PWB_SPACE_H
#define PWB_SPACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "alloc.h"
#include "avl.h"

struct pwb_bdi;
struct pwb_inode;

/* ---------------------------------------------------------------- extmap */

/*
 * A sorted map of non-overlapping runs of file pages (extmap.c). With
 * has_dev, each run maps to device units [dev, dev + len) and runs merge
 * when adjacent in the file and on the device; without, it is a set of
 * page runs (delalloc) and adjacent runs always merge. Protected by the
 * lock of whoever keeps it.
 */
struct pwb__extent {
	struct pwb__avl_node node;
	uint64_t file, len, dev;	/* units */
	bool unwritten;			/* has_dev maps: blocks allocated
					 * whose data was never written
					 * (read as zeros, not reported) */
};

struct pwb__extmap {
	struct pwb__avl_tree tree;
	uint64_t units;			/* pages covered */
	bool has_dev;
};

void pwb__extmap_init(struct pwb__extmap *m, bool has_dev)
	__attribute__((visibility("hidden")));
void pwb__extmap_destroy(struct pwb__extmap *m)
	__attribute__((visibility("hidden")));
static inline uint64_t pwb__extmap_count(const struct pwb__extmap *m)
{
	return m->tree.count;
}
/* The run holding @index, or NULL. */
struct pwb__extent *pwb__extmap_find(const struct pwb__extmap *m,
				     uint64_t index)
	__attribute__((visibility("hidden")));
/* The first run ending after @index (holding it or after it), or NULL. */
struct pwb__extent *pwb__extmap_next(const struct pwb__extmap *m,
				     uint64_t index)
	__attribute__((visibility("hidden")));
struct pwb__extent *pwb__extmap_first(const struct pwb__extmap *m)
	__attribute__((visibility("hidden")));
struct pwb__extent *pwb__extmap_after(const struct pwb__extent *e)
	__attribute__((visibility("hidden")));
/* Add pages [@file, @file + @len) (none of them in @m), mapped to @dev
 * and @unwritten or not; merged with neighbours of the same state.
 * 0 or -ENOMEM. */
int pwb__extmap_insert(struct pwb__extmap *m, uint64_t file, uint64_t len,
		       uint64_t dev, bool unwritten)
	__attribute__((visibility("hidden")));
/* The pages [@first, @first + @nr) that are mapped and unwritten become
 * written (their data reached the device). 0, or -ENOMEM with nothing
 * changed (a run cut in three needs two nodes). */
int pwb__extmap_mark_written(struct pwb__extmap *m, uint64_t first,
			     uint64_t nr) __attribute__((visibility("hidden")));
/* Remove pages [@first, @first + @nr) (@nr may run past the last page),
 * calling @fn for each piece removed (@piece describes it: file, len,
 * dev, unwritten; not a node of @m). Return the pages removed or -ENOMEM
 * (nothing removed: cutting the middle out of a run needs a node). */
int64_t pwb__extmap_remove(struct pwb__extmap *m, uint64_t first, uint64_t nr,
			   void (*fn)(void *arg, const struct pwb__extent *piece),
			   void *arg) __attribute__((visibility("hidden")));
/* Move @from's runs to @to (empty), leaving @from empty. */
void pwb__extmap_move(struct pwb__extmap *to, struct pwb__extmap *from)
	__attribute__((visibility("hidden")));

/* ------------------------------------------------------------ per bdi */

struct pwb__space {
	struct pwb__alloc alloc;
	unsigned int unit_shift;	/* read-only: page shift */
	uint64_t max_run;		/* read-only: units one map_page may
					 * allocate at once (64 MiB) */
	unsigned int next_home;		/* atomic: rotor of home groups */
	pthread_mutex_t records_lock;	/* PWB__LOCK_SPACE_RECORDS */
	struct pwb__avl_tree records;	/* records_lock: closed inodes by
					 * ino */
	/* uatomic, for the stats: extents of every allocator-mode inode
	 * (open or closed), and units reserved but not allocated. */
	int64_t nr_extents;
	int64_t reserved;
	/*
	 * Busy extents (XFS's name): blocks a truncate or discard freed
	 * stay out of the allocator until the application says that its
	 * saved index no longer names them (pwb_bdi_release_freed()), so
	 * a crash before it saves the new index cannot leave two files
	 * naming one block. Each free is tagged with the generation open
	 * when it happened; pwb_bdi_freed_cookie() closes that generation
	 * and returns it. Not kept with PWB_BDI_REUSE_FREED.
	 */
	bool reuse_freed;		/* read-only: PWB_BDI_REUSE_FREED */
	pthread_mutex_t busy_lock;	/* PWB__LOCK_SPACE_BUSY */
	struct pwb__busy *busy;		/* busy_lock: busy runs, in order of
					 * generation */
	size_t nr_busy, cap_busy;	/* busy_lock */
	uint64_t busy_gen;		/* busy_lock: the open generation */
	uint64_t busy_units;		/* uatomic, changed under busy_lock */
	uint64_t busy_lost;		/* uatomic: units kept out of use for
					 * good (no memory to note them) */
};

/* A run of busy units and the generation in which it was freed. */
struct pwb__busy {
	uint64_t gen, start, nr;
};

/* ---------------------------------------------------------- per inode */

struct pwb__space_inode {
	pthread_mutex_t lock;		/* PWB__LOCK_SPACE: the fields below */
	struct pwb__extmap ext;		/* lock: allocated pages */
	struct pwb__extmap dalloc;	/* lock: reserved, not allocated */
	uint64_t base;			/* lock: where page 0 would go when
					 * the inode has no blocks (set with
					 * home; UINT64_MAX: group start) */
	unsigned int home;		/* lock to set (once), pwb__aread:
					 * the inode's home group; UINT_MAX
					 * until the first reservation */
	unsigned int stream;		/* lock: write stream (0: none), see
					 * pwb_inode_set_stream() */
	uint64_t size;			/* lock: the file size in bytes, kept
					 * for the page cache across close */
};

/* ----------------------------------------------------- the contract */

int pwb__space_bdi_init(struct pwb_bdi *bdi) __attribute__((visibility("hidden")));
void pwb__space_bdi_fini(struct pwb_bdi *bdi) __attribute__((visibility("hidden")));
/* An allocator-mode inode: allocate its space state (before it is
 * registered), then take over its closed record (once registered: a close
 * of the same ino puts its record back before it unregisters). */
int pwb__space_inode_alloc(struct pwb_inode *inode) __attribute__((visibility("hidden")));
int pwb__space_inode_init(struct pwb_inode *inode) __attribute__((visibility("hidden")));
/* Close: keep the extents (and size) in the bdi's record of the ino; give
 * back the unused reservations. Before the inode is unregistered. */
void pwb__space_inode_fini(struct pwb_inode *inode) __attribute__((visibility("hidden")));
/* Free the (emptied) space state; from the inode's RCU free. */
void pwb__space_inode_free(struct pwb_inode *inode) __attribute__((visibility("hidden")));

/* Reserve a unit for each page of [@first, @first + @nr) that has neither
 * a block nor a reservation: 0 or -ENOSPC (message set), -ENOMEM. */
int pwb__space_reserve(struct pwb_inode *inode, uint64_t first, uint64_t nr)
	__attribute__((visibility("hidden")));
/* Reserve as pwb__space_reserve() does, under one lock for the range,
 * and set in @mask (@nr bits, zeroed by the caller) the pages this call
 * reserved (also on -ENOMEM part way, where what was recorded stays):
 * the caller's to give back with pwb__space_unreserve(). */
int pwb__space_reserve_mask(struct pwb_inode *inode, uint64_t first,
			    uint64_t nr, uint64_t *mask)
	__attribute__((visibility("hidden")));
/* Reserve page @index's unit, as above; *@newly tells whether this call
 * reserved it (the caller's to give back with pwb__space_unreserve()). */
int pwb__space_reserve_page(struct pwb_inode *inode, uint64_t index,
			    bool *newly) __attribute__((visibility("hidden")));
/* Give back page @index's reservation if it has one and no block. */
void pwb__space_unreserve(struct pwb_inode *inode, uint64_t index)
	__attribute__((visibility("hidden")));
int pwb__space_map_page(struct pwb_inode *app, uint64_t index,
			uint64_t *dev_off) __attribute__((visibility("hidden")));
/* The device offset of page @index's block, written or not: 0, or
 * -ENODATA (no block). */
int pwb__space_lookup(struct pwb_inode *inode, uint64_t index,
		      uint64_t *dev_off) __attribute__((visibility("hidden")));
/* As pwb__space_lookup(), for a read: -ENODATA also for a block whose
 * data was never written (it holds whatever the device had there). */
int pwb__space_read_lookup(struct pwb_inode *inode, uint64_t index,
			   uint64_t *dev_off)
	__attribute__((visibility("hidden")));
/* A write of pages [@first, @first + @nr) of @inode (the application's
 * inode) reached the device: their blocks hold data from now on. 0, or
 * -ENOMEM (nothing changed: the write counts as failed). */
int pwb__space_written(struct pwb_inode *inode, uint64_t first, uint64_t nr)
	__attribute__((visibility("hidden")));
void pwb__space_punch(struct pwb_inode *inode, uint64_t first, uint64_t nr)
	__attribute__((visibility("hidden")));
/* The allocation group of page @index of @inode: the group of its block if
 * it has one, else the inode's home group (chosen now if it has none). The
 * writeback context that owns it is the group modulo the contexts. */
unsigned int pwb__space_inode_group(struct pwb_inode *inode, uint64_t index)
	__attribute__((visibility("hidden")));
/* The size kept across close (the page cache's; 0 for a new file). */
uint64_t pwb__space_get_size(struct pwb_inode *inode)
	__attribute__((visibility("hidden")));
void pwb__space_set_size(struct pwb_inode *inode, uint64_t size)
	__attribute__((visibility("hidden")));
int pwb__bdi_alloc_group_stats(struct pwb_bdi *bdi, unsigned int group,
			       struct pwb_alloc_group_stats *st)
	__attribute__((visibility("hidden")));
/* For shard policies: the device byte offset of page @index's block, or
 * of the start of the inode's home group if it has none yet. Never
 * allocates. 0 always. */
int pwb__space_policy_offset(struct pwb_inode *app, uint64_t index,
			     uint64_t *dev_off)
	__attribute__((visibility("hidden")));
/* Fill the allocator's fields of @st (pwb_bdi_stats). */
void pwb__space_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
	__attribute__((visibility("hidden")));
/* Pages reserved and not allocated (delalloc) of @inode (tests). */
uint64_t pwb__space_delalloc_pages(struct pwb_inode *inode)
	__attribute__((visibility("hidden")));

#endif /* PWB_SPACE_H */
