/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * readahead.h - reads of library-owned pages from the device: on-demand
 * readahead, reads in flight, waiting for a page under read, and
 * pwb_fadvise() (readahead.c)
 *
 * A page under read has PWB__PG_READING set and holds a reference that
 * the read gives back when it ends; nobody holds page->lock meanwhile
 * (the read may end on any thread). Every path that changes or fills a
 * page's data takes page->lock and first waits for PWB__PG_READING to
 * clear (pwb__page_lock_settled), so a read never lands on data a writer
 * put there. The read sets PWB__PG_UPTODATE (on success) before it clears
 * PWB__PG_READING; a failed read leaves the page not up to date, and the
 * reader that needs it reads it again itself and gets the error.
 *
 * Not installed; part of the page cache (pcache.h includes it).
 */
#ifndef PWB_READAHEAD_H
#define PWB_READAHEAD_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;
struct pwb__page;
struct pwb__io_read_ops;
struct pwb__rd_ring;

/* Pages one device read of readahead.c fills, at most (and at most
 * max_io_bytes). */
#define PWB__READ_IO_MAX 64u

/* Readahead streams remembered per inode: as many sequential readers of
 * one file are told apart. */
#define PWB__RA_STREAMS 8

/*
 * One sequential reader (the kernel's struct file_ra_state, kept per
 * inode and keyed by where the reader goes next): the window read last is
 * [start, start + size), and its last async_size pages were read ahead of
 * the reader; the first of those carries PWB__PG_READAHEAD, the marker
 * whose reader starts the next window. size 0: a reader seen once, not
 * yet known to be sequential.
 */
struct pwb__ra_stream {
	uint64_t start;
	uint64_t next;		/* the page this reader asks for next */
	uint64_t used;		/* ra->clock at its last use (0: free) */
	uint32_t size;
	uint32_t async_size;
	bool counted;		/* in the bdi's nr_streams: it has a window
				 * that does not reach the end of the file */
};

struct pwb__ra_inode {
	pthread_mutex_t lock;
	unsigned int advice;	/* uatomic: PWB_FADV_NORMAL, _SEQUENTIAL or
				 * _RANDOM (pwb_fadvise) */
	uint64_t clock;		/* lock: ticks at each use of a stream */
	struct pwb__ra_stream s[PWB__RA_STREAMS];	/* lock */
};

/* Threads waiting for a page whose read is not (yet) on a ring: a
 * synchronous read on another thread, or one being queued. Hashed by
 * page. */
#define PWB__PAGE_WAIT_SLOTS 16u
struct pwb__page_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* with lock; CLOCK_MONOTONIC */
	unsigned int waiters;		/* uatomic, changed under lock */
} __attribute__((aligned(64)));

struct pwb__ra_bdi {
	const struct pwb__io_read_ops *ops;	/* read-only; NULL:
						 * synchronous reads */
	void *state;			/* read-only: the backend's */
	uint32_t max_pages;		/* read-only: readahead_bytes in
					 * pages, at most an eighth of the
					 * cache; 0: no readahead */
	uint64_t ra_pages;		/* uatomic: pages read ahead */
	unsigned int nr_streams;	/* uatomic: streams of the bdi's
					 * inodes with a window short of the
					 * end of the file (changed under the
					 * inode's ra.lock): the readers the
					 * cache is shared among */
	struct pwb__page_wait wait[PWB__PAGE_WAIT_SLOTS];
};

/* bdi open (after the page cache's own set-up) and close (after the last
 * page was freed). 0 or -errno (message set). */
int pwb__ra_bdi_init(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__ra_bdi_fini(struct pwb_bdi *bdi) PWB__INTERNAL;
void pwb__ra_inode_init(struct pwb__ra_inode *ra) PWB__INTERNAL;
void pwb__ra_inode_fini(struct pwb_bdi *bdi,
			struct pwb__ra_inode *ra) PWB__INTERNAL;

/*
 * pwb_read() found page @index not cached; it asks for @nr pages from
 * there. Start reading them, and with them the readahead the inode's
 * streams call for. The pages are created and under read (or read, or
 * left out when the cache has no room) when this returns; the caller
 * waits for the ones it needs. No lock held.
 *
 * @nowait (pwb_read2() with PWB_RW_NOWAIT): the same reads, started
 * without sleeping, on a backend with read rings (pwb__pcache_bdi.ra.ops;
 * without them nothing is started). A page is made only if the cache has room now
 * (PWB__ROOM_NOW), the reads go on a ring taken with a trylock, and a
 * read that could be queued only by waiting is ended unread (its pages
 * left not up to date, for a reader that may sleep to read them); no
 * read is made on the calling thread. Only the inode's readahead lock and
 * the short bookkeeping locks of making a page are met.
 */
void pwb__ra_miss(struct pwb_inode *inode, uint64_t index, uint64_t nr,
		  bool nowait) PWB__INTERNAL;
/* pwb_read() reached page @p, which carries the readahead marker, asking
 * for @nr pages from it: clear it and start the next window, without
 * waiting for it. @nowait: as for pwb__ra_miss(). No lock held. */
void pwb__ra_marker(struct pwb_inode *inode, struct pwb__page *p,
		    uint64_t nr, bool nowait) PWB__INTERNAL;
/* pcache-wait.c. Wake the threads waiting for pages under read of @pb, after the change
 * they wait for (a full barrier: pairs with the waiter's increment of the
 * slot's waiters). */
void pwb__page_wake_waiters(struct pwb__pcache_bdi *pb) PWB__INTERNAL;
/* Take @p->lock with no read of @p in flight (waiting for one, reaping
 * its ring, with the lock not held). */
void pwb__page_lock_settled(struct pwb_inode *inode,
			    struct pwb__page *p) PWB__INTERNAL;
/* The same without waiting (PWB_RW_NOWAIT): true with @p->lock taken and
 * no read of @p in flight, false (lock not held) if the lock is taken or
 * a read is in flight. */
bool pwb__page_trylock_settled(struct pwb__page *p) PWB__INTERNAL;
/* A PWB_RW_NOWAIT reader found @p (a reference held) under read: reap
 * the ring its read is on if that ring's lock is free, without waiting.
 * True if @p's read has ended (up to date, or failed); false if it is
 * still in flight, not on a ring yet, or the ring was taken. No lock
 * held: the reads reaped end here, under the ring's lock. */
bool pwb__page_read_poll(struct pwb_bdi *bdi,
			 struct pwb__page *p) PWB__INTERNAL;
/* Reap the read rings of @bdi without waiting (a thread that waits for
 * references of pages under read to go). No lock held. */
void pwb__ra_reap(struct pwb_bdi *bdi) PWB__INTERNAL;
/* Fill the readahead counters of @st. */
void pwb__ra_stats(struct pwb_bdi *bdi, struct pwb_stats *st) PWB__INTERNAL;

#endif /* PWB_READAHEAD_H */
