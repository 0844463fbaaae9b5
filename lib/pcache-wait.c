// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-wait.c - waiting for a library-owned page under read, and reaping
 * the read rings its read may be on (readahead.h has the page protocol)
 *
 * Below the rest of the page cache: lookup (dropping pages), reads and
 * readahead all wait here, and nothing here calls them back.
 */
#include "pcache.h"
#include "readahead.h"
#include "io.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* The page lock's contended halves (pcache.h)                            */

#ifndef PWB_LOCKDEP
static long futex(uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

/* The lock was held: mark it waited for (2) and sleep until it is free,
 * then take it, still marked 2 (another waiter may sleep too: the unlock
 * that follows wakes one, which is only a spare wake-up if none). */
void pwb__page_lock_wait(uint32_t *l)
{
	while (__atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE) != 0)
		futex(l, FUTEX_WAIT_PRIVATE, 2);
}

/* An unlock found the lock marked 2: wake one sleeper. */
void pwb__page_unlock_wake(uint32_t *l)
{
	futex(l, FUTEX_WAKE_PRIVATE, 1);
}
#endif

/* ---------------------------------------------------------------------- */
/* Waiting for a page under read                                          */

static struct pwb__page_wait *wait_slot(struct pwb__pcache_bdi *pb,
					const struct pwb__page *p)
{
	return &pb->ra.wait[((uintptr_t)p >> 6) % PWB__PAGE_WAIT_SLOTS];
}

void pwb__page_wake_waiters(struct pwb__pcache_bdi *pb)
{
	cmm_smp_mb();
	for (unsigned int i = 0; i < PWB__PAGE_WAIT_SLOTS; i++) {
		struct pwb__page_wait *w = &pb->ra.wait[i];

		if (!pwb__aread(&w->waiters))
			continue;
		pthread_mutex_lock(&w->lock);
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
}

struct wait_arg {
	struct pwb__page *p;
	struct pwb__rd_ring *ring;
};

/* read_wait's test: the read of the page on that ring has ended. */
static bool read_done(void *arg)
{
	struct wait_arg *a = arg;

	return !(pwb__page_flags(a->p) & PWB__PG_READING) ||
	       __atomic_load_n(&a->p->rd_ring, __ATOMIC_ACQUIRE) != a->ring;
}

/* Wait until @p is not under read. The caller holds a reference. */
static void wait_read(struct pwb_bdi *bdi, struct pwb__page *p)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;

	while (pwb__page_flags(p) & PWB__PG_READING) {
		struct pwb__rd_ring *ring =
			__atomic_load_n(&p->rd_ring, __ATOMIC_ACQUIRE);
		struct pwb__page_wait *w;
		struct timespec ts;

		if (ring) {
			struct wait_arg a = { p, ring };

			pb->ra.ops->read_wait(ring, read_done, &a);
			continue;
		}
		/* Read on another thread, or not on a ring yet. At most 10 ms
		 * at a time: the wake-up is a broadcast to a hashed slot. */
		w = wait_slot(pb, p);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 10 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&w->lock);
		uatomic_inc(&w->waiters);	/* a full barrier */
		if ((pwb__page_flags(p) & PWB__PG_READING) &&
		    !__atomic_load_n(&p->rd_ring, __ATOMIC_ACQUIRE))
			pthread_cond_timedwait(&w->cond, &w->lock, &ts);
		uatomic_dec(&w->waiters);
		pthread_mutex_unlock(&w->lock);
	}
}

void pwb__page_lock_settled(struct pwb_inode *inode, struct pwb__page *p)
{
	for (;;) {
		uint64_t t0;

		pwb__page_lock(p);
		if (!(pwb__page_flags(p) & PWB__PG_READING))
			return;
		pwb__page_unlock(p);
		t0 = pwb__now(inode->bdi);
		wait_read(inode->bdi, p);
		pwb__blocked_since(inode->bdi, inode,
				   pwb__aread(&inode->tenant), PWB_BLOCK_READ,
				   t0);
	}
}

bool pwb__page_trylock_settled(struct pwb__page *p)
{
	if (pwb__page_trylock(p))
		return false;
	if (!(pwb__page_flags(p) & PWB__PG_READING))
		return true;
	pwb__page_unlock(p);
	return false;
}

bool pwb__page_read_poll(struct pwb_bdi *bdi, struct pwb__page *p)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;
	struct pwb__rd_ring *ring;

	if (!(pwb__page_flags(p) & PWB__PG_READING))
		return true;
	ring = __atomic_load_n(&p->rd_ring, __ATOMIC_ACQUIRE);
	/* A ring's memory lasts as long as the bdi: a ring the read has
	 * left meanwhile is reaped for nothing. */
	if (!ring || !pb->ra.ops || !pb->ra.ops->read_poll ||
	    !pb->ra.ops->read_poll(ring))
		return false;
	return !(pwb__page_flags(p) & PWB__PG_READING);
}

void pwb__ra_reap(struct pwb_bdi *bdi)
{
	struct pwb__pcache_bdi *pb = bdi->pcache;

	if (pb && pb->ra.ops)
		pb->ra.ops->read_reap(pb->ra.state);
}
