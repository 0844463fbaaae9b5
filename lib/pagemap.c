/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pagemap.c - sparse per-inode page tags
 *
 * A radix tree over 64-bit page indexes, after the kernel's XArray: interior
 * nodes of 64 slots that keep, per tag, a mask of the slots whose subtree
 * holds the tag ("marks"), and leaves that are plain bitmaps of 512 pages,
 * one bitmap per tag. A page index splits into a leaf key and an offset:
 *
 *	 63                                       9 8         0
 *	+-------------------------------------------+-----------+
 *	| leaf key: 6-bit slot numbers, high first  | page in   |
 *	| (55 bits, so at most 10 interior levels)  | the leaf  |
 *	+-------------------------------------------+-----------+
 *
 * A tree of height h (interior levels) covers leaf keys [0, 64^h); height 0
 * means the root is the leaf of key 0 (pages 0-511) or NULL:
 *
 *	map->root --> node  mask[DIRTY]     = 0b...00101
 *	  (height 2)        mask[WRITEBACK] = 0b...00001
 *	                    slot[0]     slot[1] = NULL     slot[2]
 *	                      |                              |
 *	                    node  ...                      node  ...
 *	                      |                              |
 *	                    leaf: DIRTY bits[8], TOWRITE bits[8],
 *	                          WRITEBACK bits[8], count[3]
 *
 * Invariants, true between calls (pwb__map_check() verifies them):
 *  1. A leaf holds at least one tag and a node has at least one child:
 *     whatever becomes empty is freed at once. So the union of a node's
 *     masks is exactly its set of non-NULL slots.
 *  2. Bit s of node->mask[t] is set iff the subtree in slot s holds tag t.
 *     Searches and range operations descend only where the mask says so,
 *     which skips clean space in O(height).
 *  3. leaf->count[t] is the population of leaf->bits[t]; map->count[t] is
 *     the sum over the leaves.
 *  4. The height is the least that covers the highest leaf key present
 *     (the root node has a child outside slot 0), and an empty map is
 *     root == NULL, height == 0. Besides keeping the common small inode on
 *     the height-0 fast path, a canonical shape is what lets a failed
 *     pwb__map_set() restore the exact previous tree by pruning.
 *
 * Memory: a leaf is 208 bytes for 512 pages and a node 536 bytes for 64
 * children, so a dense range costs about 0.46 bytes a page with malloc's
 * overhead (pwb__map_memory()).
 *
 * Log sequence numbers (the write-ahead rule, pwb_mark_dirty_lsn): a leaf
 * may carry an array of 512 LSNs, allocated the first time a page of the
 * leaf is dirtied with an LSN and freed with the leaf. Maps that never see
 * an LSN pay one NULL pointer per leaf; a leaf with an array costs 8 more
 * bytes a page. The LSN of a page is the highest one it was dirtied with
 * since writeback last took it (pwb__map_lsn_reset), 0 without one.
 *
 * Not thread-safe: the owner's lock (inode->lock) protects the whole map.
 */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "pagemap.h"
#include "io.h"
#include "policy-int.h"

#define MAP_LEAF_WORDS (PWB__MAP_LEAF_PAGES / 64)
#define MAP_LEAF_MASK ((uint64_t)PWB__MAP_LEAF_PAGES - 1)
#define MAP_FANOUT_MASK ((uint64_t)PWB__MAP_FANOUT - 1)
/* 55 bits of leaf key in 6-bit levels. */
#define MAP_MAX_HEIGHT                                                         \
	((64 - PWB__MAP_LEAF_SHIFT + PWB__MAP_FANOUT_SHIFT - 1) /              \
	 PWB__MAP_FANOUT_SHIFT)

#define MAP_KEY(index) ((index) >> PWB__MAP_LEAF_SHIFT)
#define MAP_OFF(index) ((unsigned int)((index) & MAP_LEAF_MASK))

struct pwb__map_leaf {
	uint64_t bits[PWB__NR_TAGS][MAP_LEAF_WORDS];
	uint16_t count[PWB__NR_TAGS];	/* population of bits[tag], <= 512 */
	uint64_t *lsn;			/* NULL, or PWB__MAP_LEAF_PAGES LSNs */
};

struct pwb__map_node {
	uint64_t mask[PWB__NR_TAGS];	/* slots whose subtree holds the tag */
	void *slot[PWB__MAP_FANOUT];	/* a node, or a leaf at height 1 */
};

/*
 * A range operation's bounds. fkey and lkey are the leaf keys of first and
 * last, lkey clipped to what the tree covers; the recursions only enter
 * subtrees that intersect [fkey, lkey].
 */
struct map_range {
	uint64_t first;
	uint64_t last;
	uint64_t fkey;
	uint64_t lkey;
};

/*
 * Test hooks. They are declared here rather than in pwb-internal.h because
 * only tests/check_pagemap.c uses them (it declares them extern itself).
 *
 * pwb__map_fail_alloc_after: fault injection for the -ENOMEM paths. While it
 * is negative (the default) allocation is never faked; while it is N >= 0,
 * the next N node or leaf allocations succeed and every later one fails
 * until the test sets it back to -1. Not thread-safe; tests only.
 *
 * pwb__map_memory: heap bytes the map uses, counting glibc's chunk header and
 * 16-byte rounding per allocation.
 *
 * pwb__map_check: verify the invariants listed at the top of this file;
 * return NULL, or a description of the first one found broken.
 */
extern long pwb__map_fail_alloc_after PWB__INTERNAL;
size_t pwb__map_memory(const struct pwb__map *map) PWB__INTERNAL;
const char *pwb__map_check(const struct pwb__map *map) PWB__INTERNAL;

long pwb__map_fail_alloc_after = -1;

/* ---------------------------------------------------------------------- */
/* Small helpers                                                          */

/* Highest leaf key a tree of @height covers. The shift is at most 60. */
static inline uint64_t map_max_key(unsigned int height)
{
	return ((uint64_t)1 << (PWB__MAP_FANOUT_SHIFT * height)) - 1;
}

/* Bits lo..hi (inclusive, 0-63) of a word. */
static inline uint64_t bit_range(unsigned int lo, unsigned int hi)
{
	return (~(uint64_t)0 << lo) & (~(uint64_t)0 >> (63 - hi));
}

static inline uint64_t node_used(const struct pwb__map_node *node)
{
	return node->mask[PWB__TAG_DIRTY] | node->mask[PWB__TAG_TOWRITE] |
	       node->mask[PWB__TAG_WRITEBACK];
}

static inline bool leaf_empty(const struct pwb__map_leaf *leaf)
{
	return !(leaf->count[PWB__TAG_DIRTY] | leaf->count[PWB__TAG_TOWRITE] |
		 leaf->count[PWB__TAG_WRITEBACK]);
}

/* Does the subtree @p of @height hold @tag anywhere? */
static inline bool sub_holds(const void *p, unsigned int height,
			     enum pwb__tag tag)
{
	if (height == 0)
		return ((const struct pwb__map_leaf *)p)->count[tag] != 0;
	return ((const struct pwb__map_node *)p)->mask[tag] != 0;
}

static inline bool sub_empty(const void *p, unsigned int height)
{
	if (height == 0)
		return leaf_empty(p);
	return node_used(p) == 0;
}

/*
 * The slots of a node at @height (>= 1) covering leaf keys from @base on
 * that intersect @r, as a mask. The caller only asks for a node that
 * intersects @r, so the first slot is below 64.
 */
static inline uint64_t slot_range(const struct map_range *r, uint64_t base,
				  unsigned int height)
{
	unsigned int cs = PWB__MAP_FANOUT_SHIFT * (height - 1);
	uint64_t s0 = r->fkey > base ? (r->fkey - base) >> cs : 0;
	uint64_t s1 = (r->lkey - base) >> cs;

	if (s1 > MAP_FANOUT_MASK)
		s1 = MAP_FANOUT_MASK;
	return bit_range(s0, s1);
}

static inline uint64_t child_base(uint64_t base, unsigned int height,
				  unsigned int slot)
{
	return base +
	       ((uint64_t)slot << (PWB__MAP_FANOUT_SHIFT * (height - 1)));
}

/* First and last page offsets of @r inside the leaf of @key. */
static inline unsigned int leaf_lo(const struct map_range *r, uint64_t key)
{
	return r->fkey == key ? MAP_OFF(r->first) : 0;
}

static inline unsigned int leaf_hi(const struct map_range *r, uint64_t key)
{
	/* Not r->lkey: that one may be clipped to the tree. */
	return MAP_KEY(r->last) == key ? MAP_OFF(r->last)
				       : PWB__MAP_LEAF_PAGES - 1;
}

static void *map_alloc(struct pwb__map *map, size_t size)
{
	void *p;

	if (__builtin_expect(pwb__map_fail_alloc_after >= 0, 0)) {
		if (pwb__map_fail_alloc_after == 0)
			return NULL;
		pwb__map_fail_alloc_after--;
	}
	p = calloc(1, size);
	if (p)
		map->nr_nodes++;
	return p;
}

/* Free @p, a node or (at @height 0) a leaf with its LSN array. */
static void map_free(struct pwb__map *map, void *p, unsigned int height)
{
	if (height == 0 && ((struct pwb__map_leaf *)p)->lsn) {
		free(((struct pwb__map_leaf *)p)->lsn);
		map->nr_lsn--;
	}
	free(p);
	map->nr_nodes--;
}

/* The leaf of @key, or NULL. */
static inline struct pwb__map_leaf *leaf_lookup(const struct pwb__map *map,
						uint64_t key)
{
	void *p = map->root;
	unsigned int h = map->height;

	if (key > map_max_key(h))
		return NULL;
	while (h && p) {
		h--;
		p = ((struct pwb__map_node *)p)
			    ->slot[(key >> (PWB__MAP_FANOUT_SHIFT * h)) &
				   MAP_FANOUT_MASK];
	}
	return p;
}

/*
 * Bits set in @w, which is not 0. Without -mpopcnt __builtin_popcountll()
 * is a call into libgcc (~20 instructions); a single page, the common case
 * of pwb_mark_dirty() and of a write that ends, needs none of it.
 */
static inline unsigned int word_pages(uint64_t w)
{
	return w & (w - 1) ? (unsigned int)__builtin_popcountll(w) : 1;
}

/* ---------------------------------------------------------------------- */
/* Word-at-a-time leaf operations; each returns the pages it changed.     */

static inline unsigned int leaf_set(struct pwb__map_leaf *leaf,
				    enum pwb__tag tag, unsigned int lo,
				    unsigned int hi)
{
	uint64_t *w = leaf->bits[tag];
	unsigned int i = lo / 64, end = hi / 64, n = 0;
	uint64_t m = ~(uint64_t)0 << (lo % 64);

	for (;; i++) {
		uint64_t add;

		if (i == end)
			m &= ~(uint64_t)0 >> (63 - hi % 64);
		add = m & ~w[i];
		/* Re-dirtying dirty pages is the hot case: no store. */
		if (add) {
			w[i] |= add;
			n += word_pages(add);
		}
		if (i == end)
			break;
		m = ~(uint64_t)0;
	}
	leaf->count[tag] += n;
	return n;
}

static unsigned int leaf_clear(struct pwb__map_leaf *leaf, enum pwb__tag tag,
			       unsigned int lo, unsigned int hi)
{
	uint64_t *w = leaf->bits[tag];
	unsigned int i = lo / 64, end = hi / 64, n = 0;
	uint64_t m = ~(uint64_t)0 << (lo % 64);

	for (;; i++) {
		uint64_t del;

		if (i == end)
			m &= ~(uint64_t)0 >> (63 - hi % 64);
		del = m & w[i];
		if (del) {
			w[i] &= ~del;
			n += word_pages(del);
		}
		if (i == end)
			break;
		m = ~(uint64_t)0;
	}
	leaf->count[tag] -= n;
	return n;
}

static unsigned int leaf_copy(struct pwb__map_leaf *leaf, enum pwb__tag from,
			      enum pwb__tag to, unsigned int lo,
			      unsigned int hi)
{
	const uint64_t *src = leaf->bits[from];
	uint64_t *dst = leaf->bits[to];
	unsigned int i = lo / 64, end = hi / 64, n = 0;
	uint64_t m = ~(uint64_t)0 << (lo % 64);

	for (;; i++) {
		uint64_t add;

		if (i == end)
			m &= ~(uint64_t)0 >> (63 - hi % 64);
		add = m & src[i] & ~dst[i];
		if (add) {
			dst[i] |= add;
			n += word_pages(add);
		}
		if (i == end)
			break;
		m = ~(uint64_t)0;
	}
	leaf->count[to] += n;
	return n;
}

/* ---------------------------------------------------------------------- */
/* Shape: growing, pre-allocating, pruning, shrinking                     */

/*
 * Add levels on top until the tree covers @lkey. The old root becomes slot 0
 * of the new one, with its tags copied into the new masks (invariant 2). An
 * empty tree just gets taller: ensure_rec() allocates the path.
 */
static int map_grow(struct pwb__map *map, uint64_t lkey)
{
	while (lkey > map_max_key(map->height)) {
		struct pwb__map_node *node;
		int t;

		if (!map->root) {
			map->height++;
			continue;
		}
		node = map_alloc(map, sizeof(*node));
		if (!node)
			return -ENOMEM;
		for (t = 0; t < PWB__NR_TAGS; t++)
			if (sub_holds(map->root, map->height, t))
				node->mask[t] = 1;
		node->slot[0] = map->root;
		map->root = node;
		map->height++;
	}
	return 0;
}

/*
 * Drop root levels that only have a child in slot 0 (invariant 4). Relies
 * on invariant 1: the union of the masks is the set of children.
 */
static void map_shrink(struct pwb__map *map)
{
	while (map->height && map->root) {
		struct pwb__map_node *node = map->root;

		if (node_used(node) != 1)
			break;
		map->root = node->slot[0];
		map_free(map, node, map->height);
		map->height--;
	}
	if (!map->root)
		map->height = 0;
}

/*
 * Allocate every node and leaf that @r needs below *@pp. New ones hold no
 * tag and are in no mask yet, so until set_rec() runs the tree looks as it
 * did, plus empty nodes that prune_rec() can find and free.
 */
static int ensure_rec(struct pwb__map *map, void **pp, unsigned int height,
		      uint64_t base, const struct map_range *r)
{
	struct pwb__map_node *node;
	uint64_t m;

	if (!*pp) {
		*pp = map_alloc(map, height ? sizeof(struct pwb__map_node)
					    : sizeof(struct pwb__map_leaf));
		if (!*pp)
			return -ENOMEM;
	}
	if (height == 0)
		return 0;
	node = *pp;
	for (m = slot_range(r, base, height); m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		if (ensure_rec(map, &node->slot[s], height - 1,
			       child_base(base, height, s), r))
			return -ENOMEM;
	}
	return 0;
}

/*
 * Undo a failed ensure_rec(): free what holds no tag below *@pp in @r. Nodes
 * that existed before hold a tag (invariant 1) and stay; every new one is
 * empty once its new children are gone.
 */
static void prune_rec(struct pwb__map *map, void **pp, unsigned int height,
		      uint64_t base, const struct map_range *r)
{
	void *p = *pp;
	uint64_t m;

	if (!p)
		return;
	if (height) {
		struct pwb__map_node *node = p;

		for (m = slot_range(r, base, height); m; m &= m - 1) {
			unsigned int s = __builtin_ctzll(m);

			prune_rec(map, &node->slot[s], height - 1,
				  child_base(base, height, s), r);
		}
	}
	if (sub_empty(p, height)) {
		map_free(map, p, height);
		*pp = NULL;
	}
}

static void free_rec(void *p, unsigned int height)
{
	if (height) {
		struct pwb__map_node *node = p;
		unsigned int s;

		/* Scan the slots rather than trust the masks: destroy must
		 * free everything whatever state the tree is in. */
		for (s = 0; s < PWB__MAP_FANOUT; s++)
			if (node->slot[s])
				free_rec(node->slot[s], height - 1);
	} else {
		free(((struct pwb__map_leaf *)p)->lsn);
	}
	free(p);
}

/* ---------------------------------------------------------------------- */
/* Tag operations                                                         */

/* Set @tag on @r below @p, where ensure_rec() allocated everything. */
static uint64_t set_rec(void *p, unsigned int height, uint64_t base,
			enum pwb__tag tag, const struct map_range *r)
{
	struct pwb__map_node *node = p;
	uint64_t m, n = 0;

	if (height == 0)
		return leaf_set(p, tag, leaf_lo(r, base), leaf_hi(r, base));
	m = slot_range(r, base, height);
	/* Every slot in range will hold @tag: r is not empty there. */
	node->mask[tag] |= m;
	for (; m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		n += set_rec(node->slot[s], height - 1,
			     child_base(base, height, s), tag, r);
	}
	return n;
}

static uint64_t clear_rec(struct pwb__map *map, void *p, unsigned int height,
			  uint64_t base, enum pwb__tag tag,
			  const struct map_range *r)
{
	struct pwb__map_node *node = p;
	uint64_t m, n = 0;

	if (height == 0)
		return leaf_clear(p, tag, leaf_lo(r, base), leaf_hi(r, base));
	for (m = node->mask[tag] & slot_range(r, base, height); m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);
		void *child = node->slot[s];

		n += clear_rec(map, child, height - 1,
			       child_base(base, height, s), tag, r);
		if (sub_holds(child, height - 1, tag))
			continue;
		node->mask[tag] &= ~((uint64_t)1 << s);
		if (sub_empty(child, height - 1)) {
			map_free(map, child, height - 1);
			node->slot[s] = NULL;
		}
	}
	return n;
}

static uint64_t copy_rec(void *p, unsigned int height, uint64_t base,
			 enum pwb__tag from, enum pwb__tag to,
			 const struct map_range *r)
{
	struct pwb__map_node *node = p;
	uint64_t m, n = 0;

	if (height == 0)
		return leaf_copy(p, from, to, leaf_lo(r, base),
				 leaf_hi(r, base));
	for (m = node->mask[from] & slot_range(r, base, height); m;
	     m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);
		uint64_t k = copy_rec(node->slot[s], height - 1,
				      child_base(base, height, s), from, to, r);

		if (k)
			node->mask[to] |= (uint64_t)1 << s;
		n += k;
	}
	return n;
}

/*
 * First page >= @start holding @tag below @p. Only the subtree containing
 * @start can come back empty-handed; any later slot in the mask holds the
 * tag, so the search costs O(height) descents.
 */
static bool find_rec(const void *p, unsigned int height, uint64_t base,
		     enum pwb__tag tag, uint64_t start, uint64_t *found)
{
	const struct pwb__map_node *node = p;
	uint64_t skey = MAP_KEY(start), m;

	if (height == 0) {
		const uint64_t *w =
			((const struct pwb__map_leaf *)p)->bits[tag];
		unsigned int off = skey == base ? MAP_OFF(start) : 0;
		unsigned int i = off / 64;
		uint64_t word = w[i] & (~(uint64_t)0 << (off % 64));

		for (;;) {
			if (word) {
				*found = (base << PWB__MAP_LEAF_SHIFT) +
					 i * 64 + __builtin_ctzll(word);
				return true;
			}
			if (++i == MAP_LEAF_WORDS)
				return false;
			word = w[i];
		}
	}
	m = node->mask[tag];
	if (skey > base)
		m &= ~(uint64_t)0 << ((skey - base) >>
				      (PWB__MAP_FANOUT_SHIFT * (height - 1)));
	for (; m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		if (find_rec(node->slot[s], height - 1,
			     child_base(base, height, s), tag, start, found))
			return true;
	}
	return false;
}

/* Set @tag in every ancestor of the leaf of @key, which just got it. */
static void mark_path(struct pwb__map *map, enum pwb__tag tag, uint64_t key)
{
	struct pwb__map_node *node = map->root;
	unsigned int h = map->height;

	while (h) {
		unsigned int s;

		h--;
		s = (key >> (PWB__MAP_FANOUT_SHIFT * h)) & MAP_FANOUT_MASK;
		node->mask[tag] |= (uint64_t)1 << s;
		node = node->slot[s];
	}
}

/*
 * The leaf of @key just lost @tag altogether (its bits were cleared in
 * place): clear @tag in its ancestors' masks up to the first that still
 * holds it through another slot, and free the leaf and every node on the
 * way that holds no tag at all. What clear_rec() does for a range inside
 * that one leaf, in one descent and without the range arithmetic: a write
 * of one page ends by emptying its leaf's WRITEBACK bits, so this runs
 * once per I/O under random writes (issue 29). The caller handles the
 * root, as after clear_rec().
 */
static void unmark_path(struct pwb__map *map, enum pwb__tag tag,
			uint64_t key)
{
	struct pwb__map_node *path[MAP_MAX_HEIGHT];
	unsigned int slot[MAP_MAX_HEIGHT];
	unsigned int h = map->height, d, ch;
	void *child = map->root;

	/* path[d] is the node at height h - d; slot[d] leads to the leaf. */
	for (d = 0; d < h; d++) {
		path[d] = child;
		slot[d] = (key >> (PWB__MAP_FANOUT_SHIFT * (h - 1 - d))) &
			  MAP_FANOUT_MASK;
		child = path[d]->slot[slot[d]];
	}
	for (d = h, ch = 0; d-- > 0; ch++) {
		struct pwb__map_node *node = path[d];

		if (sub_holds(child, ch, tag))
			break;	/* so does every node above */
		node->mask[tag] &= ~((uint64_t)1 << slot[d]);
		if (sub_empty(child, ch)) {
			map_free(map, child, ch);
			node->slot[slot[d]] = NULL;
		}
		child = node;
	}
}

/* ---------------------------------------------------------------------- */
/* The interface                                                          */

void pwb__map_init(struct pwb__map *map)
{
	memset(map, 0, sizeof(*map));
}

void pwb__map_destroy(struct pwb__map *map)
{
	if (map->root)
		free_rec(map->root, map->height);
	pwb__map_init(map);
}

/*
 * The general case: the range spans leaves or needs allocation. Allocate
 * everything first so that a failure can be undone by pruning before any
 * tag changed, then set the tags, which cannot fail.
 */
static int64_t map_set_slow(struct pwb__map *map, enum pwb__tag tag,
			    uint64_t first, uint64_t last)
{
	struct map_range r = {
		.first = first,
		.last = last,
		.fkey = MAP_KEY(first),
		.lkey = MAP_KEY(last),
	};
	uint64_t n;

	if (map_grow(map, r.lkey)) {
		/* Only new root levels with the old root in slot 0. */
		map_shrink(map);
		return -ENOMEM;
	}
	if (ensure_rec(map, &map->root, map->height, 0, &r)) {
		prune_rec(map, &map->root, map->height, 0, &r);
		map_shrink(map);
		return -ENOMEM;
	}
	n = set_rec(map->root, map->height, 0, tag, &r);
	map->count[tag] += n;
	return (int64_t)n;
}

int64_t pwb__map_set(struct pwb__map *map, enum pwb__tag tag, uint64_t first,
		     uint64_t last)
{
	struct pwb__map_leaf *leaf;
	uint64_t key = MAP_KEY(first);
	unsigned int had, n;

	if (first > last)
		return 0;
	if (key != MAP_KEY(last))
		return map_set_slow(map, tag, first, last);
	/*
	 * The hot path (pwb_mark_dirty of a page or a few): one leaf that
	 * exists. One descent, no allocation, and no store at all when the
	 * pages already hold @tag. The ancestors' masks only change when the
	 * leaf gains @tag for the first time.
	 */
	leaf = leaf_lookup(map, key);
	if (!leaf)
		return map_set_slow(map, tag, first, last);
	had = leaf->count[tag];
	n = leaf_set(leaf, tag, MAP_OFF(first), MAP_OFF(last));
	if (n) {
		if (!had)
			mark_path(map, tag, key);
		map->count[tag] += n;
	}
	return n;
}

uint64_t pwb__map_clear(struct pwb__map *map, enum pwb__tag tag,
			uint64_t first, uint64_t last)
{
	struct map_range r = {
		.first = first,
		.last = last,
		.fkey = MAP_KEY(first),
		.lkey = PWB__MIN(MAP_KEY(last), map_max_key(map->height)),
	};
	uint64_t n, walked;

	if (first > last || !map->count[tag] || r.fkey > r.lkey)
		return 0;
	n = 0;
	if (r.fkey == MAP_KEY(last)) {
		/*
		 * One leaf, as when a write of a few pages ends: clear the
		 * bits directly. Only when the leaf loses @tag altogether do
		 * the masks above it change, and perhaps the leaf goes:
		 * unmark_path() does that.
		 */
		struct pwb__map_leaf *leaf = leaf_lookup(map, r.fkey);

		if (!leaf)
			return 0;
		n = leaf_clear(leaf, tag, MAP_OFF(first), MAP_OFF(last));
		map->count[tag] -= n;
		if (leaf->count[tag] || !n)
			return n;
		unmark_path(map, tag, r.fkey);
	} else {
		walked = clear_rec(map, map->root, map->height, 0, tag, &r);
		map->count[tag] -= walked;
		n += walked;
	}
	if (sub_empty(map->root, map->height)) {
		map_free(map, map->root, map->height);
		map->root = NULL;
		map->height = 0;
	} else {
		map_shrink(map);
	}
	return n;
}

/*
 * Pages holding @from already exist, so copying never allocates; the
 * -ENOMEM in the contract leaves room for a different layout.
 */
int64_t pwb__map_copy_tag(struct pwb__map *map, enum pwb__tag from,
			  enum pwb__tag to, uint64_t first, uint64_t last)
{
	struct map_range r = {
		.first = first,
		.last = last,
		.fkey = MAP_KEY(first),
		.lkey = PWB__MIN(MAP_KEY(last), map_max_key(map->height)),
	};
	uint64_t n;

	if (first > last || from == to || !map->count[from] || r.fkey > r.lkey)
		return 0;
	n = copy_rec(map->root, map->height, 0, from, to, &r);
	map->count[to] += n;
	return (int64_t)n;
}

bool pwb__map_test(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t index)
{
	const struct pwb__map_leaf *leaf = leaf_lookup(map, MAP_KEY(index));
	unsigned int off = MAP_OFF(index);

	return leaf && (leaf->bits[tag][off / 64] >> (off % 64)) & 1;
}

bool pwb__map_find(const struct pwb__map *map, enum pwb__tag tag,
		   uint64_t start, uint64_t *found)
{
	if (!map->count[tag] || MAP_KEY(start) > map_max_key(map->height))
		return false;
	return find_rec(map->root, map->height, 0, tag, start, found);
}

uint64_t pwb__map_run(const struct pwb__map *map, enum pwb__tag tag,
		      uint64_t start, uint64_t max)
{
	uint64_t index = start, n = 0;

	if (!map->count[tag])
		return 0;
	/* Leaf by leaf, a word at a time inside each; a full descent per
	 * leaf is one per 512 pages. */
	while (n < max) {
		const struct pwb__map_leaf *leaf;
		unsigned int off = MAP_OFF(index), i = off / 64;
		uint64_t key = MAP_KEY(index), gaps;

		leaf = leaf_lookup(map, key);
		if (!leaf)
			break;
		/* Bits set where the page lacks @tag, from @off on. */
		gaps = ~leaf->bits[tag][i] >> (off % 64);
		if (gaps)
			return PWB__MIN(n + __builtin_ctzll(gaps), max);
		n += 64 - off % 64;
		while (++i < MAP_LEAF_WORDS) {
			gaps = ~leaf->bits[tag][i];
			if (gaps)
				return PWB__MIN(n + __builtin_ctzll(gaps), max);
			n += 64;
		}
		if (key == MAP_KEY(UINT64_MAX))
			break;
		index = (key + 1) << PWB__MAP_LEAF_SHIFT;
	}
	return PWB__MIN(n, max);
}

/* ---------------------------------------------------------------------- */
/* Log sequence numbers                                                   */

/* Give every leaf below @p that intersects @r an LSN array. */
static int ensure_lsn_rec(struct pwb__map *map, void *p, unsigned int height,
			  uint64_t base, const struct map_range *r)
{
	struct pwb__map_node *node = p;
	uint64_t m;

	if (height == 0) {
		struct pwb__map_leaf *leaf = p;

		if (leaf->lsn)
			return 0;
		if (__builtin_expect(pwb__map_fail_alloc_after >= 0, 0)) {
			if (pwb__map_fail_alloc_after == 0)
				return -ENOMEM;
			pwb__map_fail_alloc_after--;
		}
		leaf->lsn = calloc(PWB__MAP_LEAF_PAGES, sizeof(*leaf->lsn));
		if (!leaf->lsn)
			return -ENOMEM;
		map->nr_lsn++;
		return 0;
	}
	for (m = slot_range(r, base, height); m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		if (ensure_lsn_rec(map, node->slot[s], height - 1,
				   child_base(base, height, s), r))
			return -ENOMEM;
	}
	return 0;
}

static void leaf_raise_lsn(struct pwb__map_leaf *leaf, unsigned int lo,
			   unsigned int hi, uint64_t lsn)
{
	unsigned int i;

	for (i = lo; i <= hi; i++)
		if (leaf->lsn[i] < lsn)
			leaf->lsn[i] = lsn;
}

/* Raise the LSNs of @r below @p, where ensure_lsn_rec() gave arrays. */
static void raise_lsn_rec(void *p, unsigned int height, uint64_t base,
			  const struct map_range *r, uint64_t lsn)
{
	struct pwb__map_node *node = p;
	uint64_t m;

	if (height == 0) {
		leaf_raise_lsn(p, leaf_lo(r, base), leaf_hi(r, base), lsn);
		return;
	}
	for (m = slot_range(r, base, height); m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		raise_lsn_rec(node->slot[s], height - 1,
			      child_base(base, height, s), r, lsn);
	}
}

int64_t pwb__map_set_lsn(struct pwb__map *map, uint64_t first, uint64_t last,
			 uint64_t lsn)
{
	struct map_range r = {
		.first = first,
		.last = last,
		.fkey = MAP_KEY(first),
		.lkey = MAP_KEY(last),
	};
	struct pwb__map_leaf *leaf;
	uint64_t n;

	if (first > last)
		return 0;
	if (!lsn)
		return pwb__map_set(map, PWB__TAG_DIRTY, first, last);
	/* The common case, as in pwb__map_set(): one leaf, with its array. */
	leaf = r.fkey == r.lkey ? leaf_lookup(map, r.fkey) : NULL;
	if (leaf && leaf->lsn) {
		int64_t k = pwb__map_set(map, PWB__TAG_DIRTY, first, last);

		leaf_raise_lsn(leaf, MAP_OFF(first), MAP_OFF(last), lsn);
		return k;
	}
	/* Allocate leaves and arrays first: a failure leaves no page dirty
	 * without its LSN (arrays given to leaves that existed stay). */
	if (map_grow(map, r.lkey)) {
		map_shrink(map);
		return -ENOMEM;
	}
	if (ensure_rec(map, &map->root, map->height, 0, &r) ||
	    ensure_lsn_rec(map, map->root, map->height, 0, &r)) {
		prune_rec(map, &map->root, map->height, 0, &r);
		map_shrink(map);
		return -ENOMEM;
	}
	n = set_rec(map->root, map->height, 0, PWB__TAG_DIRTY, &r);
	map->count[PWB__TAG_DIRTY] += n;
	raise_lsn_rec(map->root, map->height, 0, &r, lsn);
	return (int64_t)n;
}

uint64_t pwb__map_lsn(const struct pwb__map *map, uint64_t index)
{
	const struct pwb__map_leaf *leaf;

	if (!map->nr_lsn)
		return 0;
	leaf = leaf_lookup(map, MAP_KEY(index));
	return leaf && leaf->lsn ? leaf->lsn[MAP_OFF(index)] : 0;
}

uint64_t pwb__map_lsn_max(const struct pwb__map *map, uint64_t first,
			  uint64_t n, uint64_t above, uint64_t *prefix)
{
	uint64_t max = 0, i = 0;

	*prefix = n;
	if (!map->nr_lsn)
		return 0;
	/* Leaf by leaf; a leaf without an array holds LSN 0 throughout. */
	while (i < n) {
		uint64_t index = first + i, key = MAP_KEY(index);
		const struct pwb__map_leaf *leaf = leaf_lookup(map, key);
		unsigned int off = MAP_OFF(index);
		uint64_t in_leaf = PWB__MIN(n - i, (uint64_t)
					    (PWB__MAP_LEAF_PAGES - off));
		uint64_t j;

		if (leaf && leaf->lsn) {
			for (j = 0; j < in_leaf; j++) {
				uint64_t v = leaf->lsn[off + j];

				if (v > above && *prefix == n)
					*prefix = i + j;
				if (v > max)
					max = v;
			}
		}
		i += in_leaf;
	}
	return max;
}

/* Zero the LSNs of @r below @p, entering only the subtrees that exist. */
static void reset_lsn_rec(void *p, unsigned int height, uint64_t base,
			  const struct map_range *r)
{
	struct pwb__map_node *node = p;
	uint64_t m;

	if (height == 0) {
		struct pwb__map_leaf *leaf = p;
		unsigned int lo = leaf_lo(r, base), hi = leaf_hi(r, base);

		if (leaf->lsn)
			memset(&leaf->lsn[lo], 0,
			       (hi - lo + 1) * sizeof(*leaf->lsn));
		return;
	}
	for (m = slot_range(r, base, height); m; m &= m - 1) {
		unsigned int s = __builtin_ctzll(m);

		if (node->slot[s])
			reset_lsn_rec(node->slot[s], height - 1,
				      child_base(base, height, s), r);
	}
}

/* Costs the leaves of [first, first + n) that exist, not n: discard passes
 * ranges up to 2^52 pages. */
void pwb__map_lsn_reset(struct pwb__map *map, uint64_t first, uint64_t n)
{
	struct map_range r;

	if (!map->nr_lsn || !n || !map->root)
		return;
	r.first = first;
	r.last = n - 1 > UINT64_MAX - first ? UINT64_MAX : first + (n - 1);
	r.fkey = MAP_KEY(first);
	r.lkey = PWB__MIN(MAP_KEY(r.last), map_max_key(map->height));
	if (r.fkey > r.lkey)
		return;
	reset_lsn_rec(map->root, map->height, 0, &r);
}

/* ---------------------------------------------------------------------- */
/* Test hooks (see the declarations above)                                */

/* glibc's chunk for a request: an 8-byte header, rounded up to 16. */
static size_t chunk_size(size_t size)
{
	return (size + 8 + 15) & ~(size_t)15;
}

static size_t memory_rec(const void *p, unsigned int height)
{
	const struct pwb__map_node *node = p;
	size_t bytes;
	unsigned int s;

	if (height == 0)
		return chunk_size(sizeof(struct pwb__map_leaf)) +
		       (((const struct pwb__map_leaf *)p)->lsn
				? chunk_size(PWB__MAP_LEAF_PAGES *
					     sizeof(uint64_t))
				: 0);
	bytes = chunk_size(sizeof(*node));
	for (s = 0; s < PWB__MAP_FANOUT; s++)
		if (node->slot[s])
			bytes += memory_rec(node->slot[s], height - 1);
	return bytes;
}

size_t pwb__map_memory(const struct pwb__map *map)
{
	return map->root ? memory_rec(map->root, map->height) : 0;
}

static const char *check_rec(const void *p, unsigned int height,
			     uint64_t count[PWB__NR_TAGS], uint64_t *nodes)
{
	const struct pwb__map_node *node = p;
	unsigned int s;
	int t;

	++*nodes;
	if (height == 0) {
		const struct pwb__map_leaf *leaf = p;

		for (t = 0; t < PWB__NR_TAGS; t++) {
			unsigned int i, pop = 0;

			for (i = 0; i < MAP_LEAF_WORDS; i++)
				pop += __builtin_popcountll(leaf->bits[t][i]);
			if (pop != leaf->count[t])
				return "leaf count differs from its bitmap";
			count[t] += pop;
		}
		return leaf_empty(leaf) ? "empty leaf left allocated" : NULL;
	}
	if (!node_used(node))
		return "empty node left allocated";
	for (s = 0; s < PWB__MAP_FANOUT; s++) {
		const char *err;
		bool used = (node_used(node) >> s) & 1;

		if (!node->slot[s]) {
			if (used)
				return "mask bit set for an empty slot";
			continue;
		}
		if (!used)
			return "child in no mask";
		for (t = 0; t < PWB__NR_TAGS; t++)
			if (((node->mask[t] >> s) & 1) !=
			    sub_holds(node->slot[s], height - 1, t))
				return "mask bit disagrees with the child";
		err = check_rec(node->slot[s], height - 1, count, nodes);
		if (err)
			return err;
	}
	return NULL;
}

const char *pwb__map_check(const struct pwb__map *map)
{
	uint64_t count[PWB__NR_TAGS] = {0}, nodes = 0;
	const char *err;
	int t;

	if (map->height > MAP_MAX_HEIGHT)
		return "height above the maximum";
	if (!map->root) {
		if (map->height)
			return "empty map with a height";
	} else {
		if (map->height && !(node_used(map->root) & ~(uint64_t)1))
			return "root only uses slot 0: height not minimal";
		err = check_rec(map->root, map->height, count, &nodes);
		if (err)
			return err;
	}
	for (t = 0; t < PWB__NR_TAGS; t++)
		if (count[t] != map->count[t])
			return "map count differs from the leaves";
	if (nodes != map->nr_nodes)
		return "nr_nodes differs from the tree";
	return NULL;
}
