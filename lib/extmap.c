// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * extmap.c - sorted runs of file pages (an inode's extents, its delalloc
 * runs); space.h describes the calls.
 */
#include "pwb-internal.h"
#include "space.h"

#include <stdlib.h>

#define EXT(n) caa_container_of(n, struct pwb__extent, node)

static int cmp_file(const struct pwb__avl_node *a, const struct pwb__avl_node *b)
{
	const struct pwb__extent *x = EXT(a), *y = EXT(b);

	return x->file < y->file ? -1 : x->file > y->file;
}

void pwb__extmap_init(struct pwb__extmap *m, bool has_dev)
{
	pwb__avl_init(&m->tree);
	m->units = 0;
	m->has_dev = has_dev;
}

void pwb__extmap_destroy(struct pwb__extmap *m)
{
	struct pwb__avl_node *n;

	while ((n = pwb__avl_first(&m->tree))) {
		pwb__avl_remove(&m->tree, n);
		free(EXT(n));
	}
	m->units = 0;
}

static struct pwb__extent *floor_of(const struct pwb__extmap *m, uint64_t index)
{
	struct pwb__extent key = {.file = index};
	struct pwb__avl_node *n;

	n = pwb__avl_floor(&m->tree, &key.node, cmp_file);
	return n ? EXT(n) : NULL;
}

struct pwb__extent *pwb__extmap_find(const struct pwb__extmap *m,
				     uint64_t index)
{
	struct pwb__extent *e = floor_of(m, index);

	return e && index - e->file < e->len ? e : NULL;
}

struct pwb__extent *pwb__extmap_next(const struct pwb__extmap *m,
				     uint64_t index)
{
	struct pwb__extent *e = floor_of(m, index);
	struct pwb__extent key = {.file = index};
	struct pwb__avl_node *n;

	if (e && index - e->file < e->len)
		return e;
	n = pwb__avl_lower_bound(&m->tree, &key.node, cmp_file);
	return n ? EXT(n) : NULL;
}

struct pwb__extent *pwb__extmap_first(const struct pwb__extmap *m)
{
	struct pwb__avl_node *n = pwb__avl_first(&m->tree);

	return n ? EXT(n) : NULL;
}

struct pwb__extent *pwb__extmap_after(const struct pwb__extent *e)
{
	struct pwb__avl_node *n = pwb__avl_next(&e->node);

	return n ? EXT(n) : NULL;
}

static bool joins(const struct pwb__extmap *m, const struct pwb__extent *a,
		  uint64_t file, uint64_t dev, bool unwritten)
{
	/* a ends where (file, dev) begins, in the same state */
	return a->file + a->len == file &&
	       (!m->has_dev || (a->dev + a->len == dev &&
				a->unwritten == unwritten));
}

int pwb__extmap_insert(struct pwb__extmap *m, uint64_t file, uint64_t len,
		       uint64_t dev, bool unwritten)
{
	struct pwb__extent *prev, *next, *e;

	if (!len)
		return 0;
	prev = floor_of(m, file);
	next = pwb__extmap_next(m, file);
	if (next == prev)
		next = prev ? pwb__extmap_after(prev) : NULL;
	if (!m->has_dev)
		unwritten = false;
	if (prev && !joins(m, prev, file, dev, unwritten))
		prev = NULL;
	if (next && !joins(m, &(struct pwb__extent){ .file = file, .len = len,
						      .dev = dev,
						      .unwritten = unwritten },
			   next->file, next->dev, next->unwritten))
		next = NULL;
	m->units += len;
	if (prev && next) {
		prev->len += len + next->len;
		pwb__avl_remove(&m->tree, &next->node);
		free(next);
	} else if (prev) {
		prev->len += len;
	} else if (next) {
		/* The key changes, but stays between its neighbours. */
		next->file = file;
		next->dev = dev;
		next->len += len;
	} else {
		e = malloc(sizeof(*e));
		if (!e) {
			m->units -= len;
			return -ENOMEM;
		}
		e->file = file;
		e->len = len;
		e->dev = m->has_dev ? dev : 0;
		e->unwritten = unwritten;
		pwb__avl_insert(&m->tree, &e->node, cmp_file);
	}
	return 0;
}

/* Tell @fn of the piece [@s, @s + @n) of run @e. */
static void piece(const struct pwb__extmap *m, const struct pwb__extent *e,
		  uint64_t s, uint64_t n,
		  void (*fn)(void *arg, const struct pwb__extent *piece),
		  void *arg)
{
	struct pwb__extent p = { .file = s, .len = n,
				 .dev = m->has_dev ? e->dev + (s - e->file)
						   : 0,
				 .unwritten = e->unwritten };

	if (fn)
		fn(arg, &p);
}

int64_t pwb__extmap_remove(struct pwb__extmap *m, uint64_t first, uint64_t nr,
			   void (*fn)(void *arg, const struct pwb__extent *piece),
			   void *arg)
{
	uint64_t end = nr > UINT64_MAX - first ? UINT64_MAX : first + nr;
	struct pwb__extent *e = pwb__extmap_next(m, first);
	int64_t removed = 0;

	if (e && e->file < first && e->file + e->len > end) {
		/* The middle of one run: split it. */
		struct pwb__extent *t = malloc(sizeof(*t));

		if (!t)
			return -ENOMEM;
		t->file = end;
		t->len = e->file + e->len - end;
		t->dev = m->has_dev ? e->dev + (end - e->file) : 0;
		t->unwritten = e->unwritten;
		piece(m, e, first, end - first, fn, arg);
		e->len = first - e->file;
		pwb__avl_insert(&m->tree, &t->node, cmp_file);
		m->units -= end - first;
		return (int64_t)(end - first);
	}
	while (e && e->file < end) {
		struct pwb__extent *next = pwb__extmap_after(e);
		uint64_t s = PWB__MAX(e->file, first);
		uint64_t t = PWB__MIN(e->file + e->len, end);
		uint64_t n = t - s;

		piece(m, e, s, n, fn, arg);
		removed += (int64_t)n;
		m->units -= n;
		if (s == e->file && t == e->file + e->len) {
			pwb__avl_remove(&m->tree, &e->node);
			free(e);
		} else if (s == e->file) {
			/* Head cut: the key moves up, still before next. */
			e->file += n;
			if (m->has_dev)
				e->dev += n;
			e->len -= n;
		} else {
			e->len -= n;	/* tail cut */
		}
		e = next;
	}
	return removed;
}

/* Merge run @e with the run after it if they join (same state, adjacent
 * in the file and on the device). */
static void merge_next(struct pwb__extmap *m, struct pwb__extent *e)
{
	struct pwb__extent *n = pwb__extmap_after(e);

	if (n && joins(m, e, n->file, n->dev, n->unwritten)) {
		e->len += n->len;
		pwb__avl_remove(&m->tree, &n->node);
		free(n);
	}
}

/* Split run @e at page @at (inside it, not its first page) with node @t:
 * @e keeps the pages before @at, @t (inserted) the rest. */
static void split_at(struct pwb__extmap *m, struct pwb__extent *e,
		     uint64_t at, struct pwb__extent *t)
{
	t->file = at;
	t->len = e->file + e->len - at;
	t->dev = e->dev + (at - e->file);
	t->unwritten = e->unwritten;
	e->len = at - e->file;
	pwb__avl_insert(&m->tree, &t->node, cmp_file);
}

int pwb__extmap_mark_written(struct pwb__extmap *m, uint64_t first,
			     uint64_t nr)
{
	uint64_t end = nr > UINT64_MAX - first ? UINT64_MAX : first + nr;
	struct pwb__extent *e, *spare[2] = { NULL, NULL };
	struct pwb__avl_node *pn;
	unsigned int need = 0, used = 0;

	/* Nodes first, so nothing changes when there are none: only the
	 * first and the last run the range touches can be cut. */
	e = pwb__extmap_next(m, first);
	if (e && e->unwritten && e->file < first)
		need++;
	for (; e && e->file < end; e = pwb__extmap_after(e))
		if (e->unwritten && e->file + e->len > end)
			need++;
	for (unsigned int i = 0; i < need; i++)
		if (!(spare[i] = malloc(sizeof(*spare[i])))) {
			free(spare[0]);
			return -ENOMEM;
		}
	e = pwb__extmap_next(m, first);
	while (e && e->file < end) {
		if (!e->unwritten) {
			e = pwb__extmap_after(e);
			continue;
		}
		if (e->file < first) {	/* keep the head unwritten */
			split_at(m, e, first, spare[used++]);
			e = pwb__extmap_after(e);
		}
		if (e->file + e->len > end)	/* and the tail */
			split_at(m, e, end, spare[used++]);
		e->unwritten = false;
		/* Join the written neighbours, before and after. */
		pn = pwb__avl_prev(&e->node);
		if (pn) {
			struct pwb__extent *p = EXT(pn);

			if (joins(m, p, e->file, e->dev, false)) {
				merge_next(m, p);
				e = p;
			}
		}
		merge_next(m, e);
		e = pwb__extmap_after(e);
	}
	return 0;
}

void pwb__extmap_move(struct pwb__extmap *to, struct pwb__extmap *from)
{
	*to = *from;
	pwb__extmap_init(from, from->has_dev);
}
