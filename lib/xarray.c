// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * xarray.c - an ordered index of items by 64-bit key (a radix tree)
 *
 * The container behind PWB_POLICY_F_ORDERED: a writeback pass of such a
 * policy holds its inodes here and takes the one with the smallest key
 * next. Nodes have 64 slots and a bitmap of the slots in use, so finding
 * the smallest key is one count-trailing-zeros per level, and the tree is
 * as high as the largest key needs (6 bits per level, 11 levels for the
 * whole 64-bit space):
 *
 *	height 2:        root [0 .. 63]            keys 0 .. 4095
 *	                  /      |      \
 *	leaves:     [0..63]  [64..127] ... [4032..4095]  -> item chains
 *
 * Items are intrusive (struct pwb__xa_item inside the indexed object);
 * several items may share a key (they chain from the leaf slot, newest
 * first). Only interior nodes and leaves are allocated, so an insert can
 * fail with -ENOMEM and an erase never fails. Every linked node has at
 * least one slot in use; an erase frees nodes it empties.
 *
 * Not thread-safe: the owner's lock protects it (wb->list_lock).
 */
#include "base.h"
#include "xarray.h"

#include <stdlib.h>
#include <string.h>

#define XA_SHIFT 6
#define XA_SLOTS (1u << XA_SHIFT)
#define XA_MAX_HEIGHT 11	/* 11 * 6 = 66 bits >= 64 */

struct xa_node {
	uint64_t present;	/* bit i: slot[i] in use */
	void *slot[XA_SLOTS];	/* child nodes, or item chains in leaves */
};

static unsigned int slot_of(uint64_t key, unsigned int level)
{
	unsigned int shift = level * XA_SHIFT;

	return shift >= 64 ? 0 : (unsigned int)(key >> shift) & (XA_SLOTS - 1);
}

/* Levels needed for @key: the smallest h >= 1 with key < 2^(6h). */
static unsigned int height_for(uint64_t key)
{
	unsigned int bits = key ? 64 - (unsigned int)__builtin_clzll(key) : 1;

	return (bits + XA_SHIFT - 1) / XA_SHIFT;
}

static struct xa_node *node_alloc(struct pwb__xa *xa)
{
	struct xa_node *n = calloc(1, sizeof(*n));

	if (n)
		xa->nr_nodes++;
	return n;
}

void pwb__xa_init(struct pwb__xa *xa)
{
	memset(xa, 0, sizeof(*xa));
}

static void free_subtree(struct pwb__xa *xa, struct xa_node *n,
			 unsigned int level)
{
	uint64_t bits = n->present;

	if (level > 0) {
		while (bits) {
			unsigned int i = (unsigned int)__builtin_ctzll(bits);

			bits &= bits - 1;
			free_subtree(xa, n->slot[i], level - 1);
		}
	}
	free(n);
	xa->nr_nodes--;
}

void pwb__xa_destroy(struct pwb__xa *xa)
{
	if (xa->root)
		free_subtree(xa, xa->root, xa->height - 1);
	pwb__xa_init(xa);
}

/*
 * Walk from the root towards @key, recording the nodes in @path
 * (path[level]); stop at the first missing one. Return the lowest level
 * reached (0 means the leaf was found).
 */
static unsigned int walk(struct pwb__xa *xa, uint64_t key,
			 struct xa_node **path)
{
	unsigned int level = xa->height - 1;
	struct xa_node *n = xa->root;

	for (;;) {
		path[level] = n;
		if (level == 0)
			return 0;
		if (!(n->present & (1ull << slot_of(key, level))))
			return level;
		n = n->slot[slot_of(key, level)];
		level--;
	}
}

/* Free the empty nodes on @path from @level up; shrink nothing else. */
static void prune(struct pwb__xa *xa, uint64_t key, struct xa_node **path,
		  unsigned int level)
{
	for (; level < xa->height && !path[level]->present; level++) {
		free(path[level]);
		xa->nr_nodes--;
		if (level + 1 == xa->height) {
			xa->root = NULL;
			xa->height = 0;
			return;
		}
		path[level + 1]->present &= ~(1ull << slot_of(key, level + 1));
	}
}

int pwb__xa_insert(struct pwb__xa *xa, struct pwb__xa_item *item)
{
	struct xa_node *path[XA_MAX_HEIGHT];
	uint64_t key = item->key;
	unsigned int need = height_for(key), level, i;

	if (!xa->root) {
		xa->root = node_alloc(xa);
		if (!xa->root)
			return -ENOMEM;
		xa->height = need;
	}
	/* Grow: the old root becomes slot 0 of a new one (it is not empty,
	 * and its keys have zeros in the new top bits). */
	while (xa->height < need) {
		struct xa_node *top = node_alloc(xa);

		if (!top)
			return -ENOMEM;	/* nothing linked yet: still valid */
		top->slot[0] = xa->root;
		top->present = 1;
		xa->root = top;
		xa->height++;
	}
	level = walk(xa, key, path);
	while (level > 0) {
		struct xa_node *child = node_alloc(xa);

		if (!child) {
			/* Unlink what this insert added and is still empty. */
			prune(xa, key, path, level);
			return -ENOMEM;
		}
		i = slot_of(key, level);
		path[level]->slot[i] = child;
		path[level]->present |= 1ull << i;
		path[--level] = child;
	}
	i = slot_of(key, 0);
	item->next = path[0]->slot[i];
	path[0]->slot[i] = item;
	path[0]->present |= 1ull << i;
	xa->count++;
	return 0;
}

void pwb__xa_erase(struct pwb__xa *xa, struct pwb__xa_item *item)
{
	struct xa_node *path[XA_MAX_HEIGHT];
	struct pwb__xa_item **pp;
	unsigned int i;

	if (!xa->root || height_for(item->key) > xa->height ||
	    walk(xa, item->key, path) != 0)
		return;
	i = slot_of(item->key, 0);
	for (pp = (struct pwb__xa_item **)&path[0]->slot[i]; *pp;
	     pp = &(*pp)->next) {
		if (*pp == item) {
			*pp = item->next;
			item->next = NULL;
			xa->count--;
			break;
		}
	}
	if (!path[0]->slot[i]) {
		path[0]->present &= ~(1ull << i);
		prune(xa, item->key, path, 0);
	}
}

struct pwb__xa_item *pwb__xa_first(const struct pwb__xa *xa)
{
	const struct xa_node *n = xa->root;
	unsigned int level;

	if (!n)
		return NULL;
	for (level = xa->height - 1;; level--) {
		unsigned int i = (unsigned int)__builtin_ctzll(n->present);

		if (level == 0)
			return n->slot[i];
		n = n->slot[i];
	}
}
