// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * table.c - pwb-objd's table of open object inodes (examples/pwb-objd):
 * ino -> open inode with a reference count, the idle list, and the
 * freeing of an inode whose key moved away (inode_free())
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "objd.h"
#include "devices.h"

/*
 * The inodes open now, found by ino. An object's inode is opened by the
 * first request that needs it and closed by the last one (libpwb keeps a
 * closed allocator-mode inode's extents and size, so the reopen finds
 * them); with --keep-open every object in the index stays open, pinned by
 * a reference of the index's own. A killed object (its key now names
 * another inode, or none) is dead: the last reference gives its blocks
 * back (discard) before the close. All fields: table_lock.
 *
 * Idle objects: the last reference of a live object does not close it at
 * once. The object stays open, with no reference, on a list of at most
 * --idle-open (the least recently used closed first), so that the pages
 * libpwb caches for it survive until the next request: a hot object's
 * GETs are served from the cache. A request takes it off the list; a
 * kill does too (table_kill() holds a reference while it marks it).
 */

#define TABLE_BITS 16
static struct obj *table[1u << TABLE_BITS];
pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_cond = PTHREAD_COND_INITIALIZER;	/* state */
uint64_t nr_open;	/* table_lock */
bool keep_open;		/* set before the first request */
/* Idle objects, the most recently used first (all: table_lock). */
static struct obj *idle_head, *idle_tail;
static unsigned int nr_idle;
const struct pwb_inode_ops alloc_ops;	/* all NULL: allocator mode */

static unsigned int hash_ino(uint64_t ino)
{
	return (unsigned int)((ino * 0x9E3779B97F4A7C15ull) >> (64 - TABLE_BITS));
}

static struct obj *find_locked(uint64_t ino)
{
	struct obj *o;

	for (o = table[hash_ino(ino)]; o; o = o->next)
		if (o->ino == ino)
			return o;
	return NULL;
}

static struct obj *insert_locked(unsigned int dev, uint64_t ino,
				 struct pwb_inode *inode)
{
	struct obj *o = calloc(1, sizeof(*o));
	unsigned int h = hash_ino(ino);

	if (!o)
		return NULL;
	o->ino = ino;
	o->dev = dev;
	o->inode = inode;
	o->refs = 1;
	o->state = inode ? OBJ_OPEN : OBJ_OPENING;
	o->next = table[h];
	table[h] = o;
	nr_open++;
	return o;
}

static void remove_locked(struct obj *o)
{
	struct obj **pp;

	for (pp = &table[hash_ino(o->ino)]; *pp != o; pp = &(*pp)->next)
		;
	*pp = o->next;
	nr_open--;
	pthread_cond_broadcast(&table_cond);
}

static void idle_del_locked(struct obj *o)
{
	if (o->idle_prev)
		o->idle_prev->idle_next = o->idle_next;
	else
		idle_head = o->idle_next;
	if (o->idle_next)
		o->idle_next->idle_prev = o->idle_prev;
	else
		idle_tail = o->idle_prev;
	o->idle_prev = o->idle_next = NULL;
	o->idle = false;
	nr_idle--;
}

static void idle_add_locked(struct obj *o)
{
	o->idle = true;
	o->idle_prev = NULL;
	o->idle_next = idle_head;
	if (idle_head)
		idle_head->idle_prev = o;
	else
		idle_tail = o;
	idle_head = o;
	nr_idle++;
}

/* Register an inode the caller opened (a new PUT's, or one loaded at
 * start); the caller holds the one reference. */
int table_insert(unsigned int dev, uint64_t ino,
		 struct pwb_inode *inode, struct obj **op)
{
	pthread_mutex_lock(&table_lock);
	*op = insert_locked(dev, ino, inode);
	pthread_mutex_unlock(&table_lock);
	return *op ? 0 : -ENOMEM;
}

/* A reference to object @ino of device @dev, its inode opened if no
 * request has it open: 0, -ENOENT if it is dead, or pwb_inode_open()'s
 * error. */
int table_get(unsigned int dev, uint64_t ino, struct obj **op)
{
	struct pwb_inode *inode;
	struct obj *o;
	int ret;

	pthread_mutex_lock(&table_lock);
	for (;;) {
		o = find_locked(ino);
		if (!o)
			break;
		if (o->dead) {
			pthread_mutex_unlock(&table_lock);
			return -ENOENT;
		}
		if (o->state == OBJ_OPEN) {
			if (o->idle)
				idle_del_locked(o);
			o->refs++;
			pthread_mutex_unlock(&table_lock);
			*op = o;
			return 0;
		}
		pthread_cond_wait(&table_cond, &table_lock);
	}
	o = insert_locked(dev, ino, NULL);
	pthread_mutex_unlock(&table_lock);
	if (!o)
		return -ENOMEM;
	ret = pwb_inode_open(dev_bdi(dev), ino, &alloc_ops, NULL, &inode);
	if (ret)
		fprintf(stderr, "pwb-objd: open of inode %" PRIu64 ": %s\n",
			ino, pwb_errmsg());
	pthread_mutex_lock(&table_lock);
	if (ret) {
		remove_locked(o);
		pthread_mutex_unlock(&table_lock);
		free(o);
		return ret;
	}
	o->inode = inode;
	o->state = OBJ_OPEN;
	pthread_cond_broadcast(&table_cond);
	pthread_mutex_unlock(&table_lock);
	*op = o;
	return 0;
}

/*
 * Give an inode's blocks back (@discard) and close it.
 *
 * Busy extents (pwb_bdi_freed_cookie()): libpwb keeps freed blocks out of
 * use until we say that our index no longer names them. Every inode freed
 * here left the index first: its key was replaced or deleted by a
 * committed (durable) LMDB transaction, or its PUT never committed. So
 * once the discard has returned, a cookie taken now covers only blocks
 * that no durable index entry names, and releasing it at once is safe.
 */
void inode_free(unsigned int dev, uint64_t ino, struct pwb_inode *inode,
		bool discard)
{
	struct pwb_bdi *bdi = dev_bdi(dev);
	uint64_t cookie;
	int ret;

	if (discard) {
		ret = pwb_inode_discard(inode, 0, UINT64_MAX);
		if (ret)
			fprintf(stderr, "pwb-objd: discard of inode %" PRIu64
				": %s\n", ino, pwb_errmsg());
		CNT_ADD(freed, 1);
		if (pwb_bdi_freed_cookie(bdi, &cookie) ||
		    pwb_bdi_release_freed(bdi, cookie))
			fprintf(stderr, "pwb-objd: releasing freed blocks: "
				"%s\n", pwb_errmsg());
	}
	ret = pwb_inode_close(inode);
	if (ret)
		fprintf(stderr, "pwb-objd: close of inode %" PRIu64 ": %s\n",
			ino, pwb_errmsg());
}

/* Drop a reference; the last one closes the inode (freeing it if dead).
 * The entry stays, CLOSING, until the close is done: a request for the
 * same ino waits for it, then opens the inode again. */
static void table_close(struct obj *o)
{
	inode_free(o->dev, o->ino, o->inode, o->dead);
	pthread_mutex_lock(&table_lock);
	remove_locked(o);
	pthread_mutex_unlock(&table_lock);
	free(o);
}

void table_put(struct obj *o)
{
	struct obj *old = NULL;

	pthread_mutex_lock(&table_lock);
	if (--o->refs) {
		pthread_mutex_unlock(&table_lock);
		return;
	}
	if (!o->dead && opt.idle_open) {
		/* Kept open, its pages cached; the oldest idle one closes
		 * if there are too many. */
		idle_add_locked(o);
		if (nr_idle <= opt.idle_open) {
			pthread_mutex_unlock(&table_lock);
			return;
		}
		old = idle_tail;
		idle_del_locked(old);
		o = old;
	}
	o->state = OBJ_CLOSING;
	pthread_mutex_unlock(&table_lock);
	table_close(o);
}

/* --keep-open: the index's reference, taken over from the caller's;
 * dropped instead if the object was killed already (a later PUT of the
 * same key in the same group commit can kill it before its own PUT gets
 * here: pinned then, it would never be freed). */
void table_pin(struct obj *o)
{
	pthread_mutex_lock(&table_lock);
	if (!o->dead) {
		o->pinned = true;
		pthread_mutex_unlock(&table_lock);
		return;
	}
	pthread_mutex_unlock(&table_lock);
	table_put(o);
}

/* The key moved away from @ino (replaced or deleted): free its blocks once
 * the requests still reading it are done. */
void table_kill(unsigned int dev, uint64_t ino)
{
	struct obj *o;

	if (table_get(dev, ino, &o))
		return;		/* already dead, or cannot open: lost */
	pthread_mutex_lock(&table_lock);
	o->dead = true;
	if (o->pinned) {
		o->pinned = false;
		o->refs--;	/* never the last: ours is there */
	}
	pthread_mutex_unlock(&table_lock);
	table_put(o);
}

int close_all(void)
{
	int ret = 0;

	for (unsigned int h = 0; h < (1u << TABLE_BITS); h++) {
		struct obj *o;

		while ((o = table[h])) {
			table[h] = o->next;
			if (o->inode && pwb_inode_close(o->inode) && !ret) {
				fprintf(stderr, "pwb-objd: close: %s\n",
					pwb_errmsg());
				ret = -EIO;
			}
			free(o);
		}
	}
	return ret;
}
