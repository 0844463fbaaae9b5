/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * xarray.h - an ordered index by 64-bit key (xarray.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_XARRAY_H
#define PWB_XARRAY_H

#include "base.h"

/* ---------------------------------------------------------------------- */
/* xarray.c: an ordered index by 64-bit key                               */

/* Embedded in the indexed object; several items may share a key. */
struct pwb__xa_item {
	struct pwb__xa_item *next;	/* same key, the tree's use */
	uint64_t key;			/* set before insert, kept while in */
};

/* A radix tree of 64-slot nodes. Not thread-safe: the owner's lock. */
struct pwb__xa {
	void *root;
	unsigned int height;	/* levels; 0 when empty */
	uint64_t count;		/* items */
	uint64_t nr_nodes;	/* allocated nodes (memory figure) */
};

void pwb__xa_init(struct pwb__xa *xa) PWB__INTERNAL;
/* Free the nodes; the items are the caller's. */
void pwb__xa_destroy(struct pwb__xa *xa) PWB__INTERNAL;
/* Index @item under item->key: 0, or -ENOMEM (then nothing changed). */
int pwb__xa_insert(struct pwb__xa *xa, struct pwb__xa_item *item)
	PWB__INTERNAL;
/* Remove @item (a no-op if it is not in @xa under item->key). */
void pwb__xa_erase(struct pwb__xa *xa, struct pwb__xa_item *item)
	PWB__INTERNAL;
/* An item with the smallest key, or NULL if empty. */
struct pwb__xa_item *pwb__xa_first(const struct pwb__xa *xa) PWB__INTERNAL;

#endif /* PWB_XARRAY_H */
