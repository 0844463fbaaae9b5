// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * avl.c - an intrusive AVL tree with parent pointers
 *
 * Heights are stored; after an insert or a removal the path to the root is
 * walked up, fixing heights and rotating where the two subtrees' heights
 * differ by 2. O(log n) for every operation.
 */
#include "avl.h"

static inline int height(const struct pwb__avl_node *n)
{
	return n ? n->height : 0;
}

static inline void fix_height(struct pwb__avl_node *n)
{
	int l = height(n->left), r = height(n->right);

	n->height = (l > r ? l : r) + 1;
}

/* Point whatever pointed at @old (its parent's child slot, or the root) at
 * @new. */
static void replace_child(struct pwb__avl_tree *t, struct pwb__avl_node *parent,
			  struct pwb__avl_node *old, struct pwb__avl_node *new)
{
	if (!parent)
		t->root = new;
	else if (parent->left == old)
		parent->left = new;
	else
		parent->right = new;
}

/*    x              y
 *   / \            / \
 *  a   y    ->    x   c
 *     / \        / \
 *    b   c      a   b
 */
static struct pwb__avl_node *rotate_left(struct pwb__avl_tree *t,
					 struct pwb__avl_node *x)
{
	struct pwb__avl_node *y = x->right, *b = y->left;

	replace_child(t, x->parent, x, y);
	y->parent = x->parent;
	y->left = x;
	x->parent = y;
	x->right = b;
	if (b)
		b->parent = x;
	fix_height(x);
	fix_height(y);
	return y;
}

static struct pwb__avl_node *rotate_right(struct pwb__avl_tree *t,
					  struct pwb__avl_node *x)
{
	struct pwb__avl_node *y = x->left, *b = y->right;

	replace_child(t, x->parent, x, y);
	y->parent = x->parent;
	y->right = x;
	x->parent = y;
	x->left = b;
	if (b)
		b->parent = x;
	fix_height(x);
	fix_height(y);
	return y;
}

/* Rebalance from @n up to the root. */
static void rebalance(struct pwb__avl_tree *t, struct pwb__avl_node *n)
{
	while (n) {
		int bal = height(n->left) - height(n->right);

		if (bal > 1) {
			if (height(n->left->left) < height(n->left->right))
				rotate_left(t, n->left);
			n = rotate_right(t, n);
		} else if (bal < -1) {
			if (height(n->right->right) < height(n->right->left))
				rotate_right(t, n->right);
			n = rotate_left(t, n);
		} else {
			fix_height(n);
		}
		n = n->parent;
	}
}

bool pwb__avl_insert(struct pwb__avl_tree *t, struct pwb__avl_node *n,
		     pwb__avl_cmp_fn cmp)
{
	struct pwb__avl_node *p = NULL, **link = &t->root;

	while (*link) {
		int c = cmp(n, *link);

		if (!c)
			return false;
		p = *link;
		link = c < 0 ? &p->left : &p->right;
	}
	n->left = n->right = NULL;
	n->parent = p;
	n->height = 1;
	*link = n;
	t->count++;
	rebalance(t, p);
	return true;
}

void pwb__avl_remove(struct pwb__avl_tree *t, struct pwb__avl_node *n)
{
	struct pwb__avl_node *from;

	if (n->left && n->right) {
		/* Put the successor s (leftmost of the right subtree, no left
		 * child) in n's place. */
		struct pwb__avl_node *s = n->right;

		while (s->left)
			s = s->left;
		if (s->parent == n) {
			from = s;
		} else {
			from = s->parent;
			from->left = s->right;
			if (s->right)
				s->right->parent = from;
			s->right = n->right;
			n->right->parent = s;
		}
		s->left = n->left;
		n->left->parent = s;
		replace_child(t, n->parent, n, s);
		s->parent = n->parent;
		s->height = n->height;
	} else {
		struct pwb__avl_node *c = n->left ? n->left : n->right;

		replace_child(t, n->parent, n, c);
		if (c)
			c->parent = n->parent;
		from = n->parent;
	}
	t->count--;
	rebalance(t, from);
}

struct pwb__avl_node *pwb__avl_first(const struct pwb__avl_tree *t)
{
	struct pwb__avl_node *n = t->root;

	while (n && n->left)
		n = n->left;
	return n;
}

struct pwb__avl_node *pwb__avl_last(const struct pwb__avl_tree *t)
{
	struct pwb__avl_node *n = t->root;

	while (n && n->right)
		n = n->right;
	return n;
}

struct pwb__avl_node *pwb__avl_next(const struct pwb__avl_node *n)
{
	if (n->right) {
		n = n->right;
		while (n->left)
			n = n->left;
		return (struct pwb__avl_node *)n;
	}
	while (n->parent && n->parent->right == n)
		n = n->parent;
	return n->parent;
}

struct pwb__avl_node *pwb__avl_prev(const struct pwb__avl_node *n)
{
	if (n->left) {
		n = n->left;
		while (n->right)
			n = n->right;
		return (struct pwb__avl_node *)n;
	}
	while (n->parent && n->parent->left == n)
		n = n->parent;
	return n->parent;
}

struct pwb__avl_node *pwb__avl_lower_bound(const struct pwb__avl_tree *t,
					   const struct pwb__avl_node *key,
					   pwb__avl_cmp_fn cmp)
{
	struct pwb__avl_node *n = t->root, *best = NULL;

	while (n) {
		if (cmp(n, key) >= 0) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best;
}

struct pwb__avl_node *pwb__avl_floor(const struct pwb__avl_tree *t,
				     const struct pwb__avl_node *key,
				     pwb__avl_cmp_fn cmp)
{
	struct pwb__avl_node *n = t->root, *best = NULL;

	while (n) {
		if (cmp(n, key) <= 0) {
			best = n;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return best;
}

static long check(const struct pwb__avl_node *n,
		  const struct pwb__avl_node *parent, int *h)
{
	long cl, cr;
	int hl, hr;

	if (!n) {
		*h = 0;
		return 0;
	}
	if (n->parent != parent)
		return -1;
	cl = check(n->left, n, &hl);
	cr = check(n->right, n, &hr);
	if (cl < 0 || cr < 0 || hl - hr > 1 || hr - hl > 1)
		return -1;
	*h = (hl > hr ? hl : hr) + 1;
	if (n->height != *h)
		return -1;
	return cl + cr + 1;
}

long pwb__avl_check(const struct pwb__avl_tree *t, pwb__avl_cmp_fn cmp)
{
	const struct pwb__avl_node *n, *prev = NULL;
	long count;
	int h;

	count = check(t->root, NULL, &h);
	if (count < 0 || (size_t)count != t->count)
		return -1;
	for (n = pwb__avl_first(t); n; n = pwb__avl_next(n)) {
		if (prev && cmp(prev, n) >= 0)
			return -1;
		prev = n;
	}
	return count;
}
