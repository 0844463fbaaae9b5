/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * avl.h - an intrusive AVL tree (the space layer's free-space and extent
 * indexes)
 *
 * Not thread-safe: every tree belongs to one lock, named where it is kept.
 * A node is embedded in the caller's struct; the tree never allocates.
 * Ordering comes from a comparison function given to the calls that need
 * it; nodes that compare equal are not allowed in one tree (insert says so).
 */
#ifndef PWB_AVL_H
#define PWB_AVL_H

#include <stdbool.h>
#include <stddef.h>

struct pwb__avl_node {
	struct pwb__avl_node *left, *right, *parent;
	int height;			/* of the subtree: a leaf is 1 */
};

struct pwb__avl_tree {
	struct pwb__avl_node *root;
	size_t count;
};

/* <0, 0, >0 as @a sorts before, equal to, after @b. */
typedef int (*pwb__avl_cmp_fn)(const struct pwb__avl_node *a,
			       const struct pwb__avl_node *b);

static inline void pwb__avl_init(struct pwb__avl_tree *t)
{
	t->root = NULL;
	t->count = 0;
}

/* Insert @n. Return false (tree unchanged) if a node equal to it is
 * already there. */
bool pwb__avl_insert(struct pwb__avl_tree *t, struct pwb__avl_node *n,
		     pwb__avl_cmp_fn cmp) __attribute__((visibility("hidden")));
/* Remove @n, which is in @t. */
void pwb__avl_remove(struct pwb__avl_tree *t, struct pwb__avl_node *n)
	__attribute__((visibility("hidden")));
struct pwb__avl_node *pwb__avl_first(const struct pwb__avl_tree *t)
	__attribute__((visibility("hidden")));
struct pwb__avl_node *pwb__avl_last(const struct pwb__avl_tree *t)
	__attribute__((visibility("hidden")));
struct pwb__avl_node *pwb__avl_next(const struct pwb__avl_node *n)
	__attribute__((visibility("hidden")));
struct pwb__avl_node *pwb__avl_prev(const struct pwb__avl_node *n)
	__attribute__((visibility("hidden")));
/* The first node that does not sort before @key (NULL: none). @key need
 * not be in the tree. */
struct pwb__avl_node *pwb__avl_lower_bound(const struct pwb__avl_tree *t,
					   const struct pwb__avl_node *key,
					   pwb__avl_cmp_fn cmp)
	__attribute__((visibility("hidden")));
/* The last node that does not sort after @key (NULL: none). */
struct pwb__avl_node *pwb__avl_floor(const struct pwb__avl_tree *t,
				     const struct pwb__avl_node *key,
				     pwb__avl_cmp_fn cmp)
	__attribute__((visibility("hidden")));
/* Check the AVL invariants and the order (tests); return the node count
 * or -1. */
long pwb__avl_check(const struct pwb__avl_tree *t, pwb__avl_cmp_fn cmp)
	__attribute__((visibility("hidden")));

#endif /* PWB_AVL_H */
