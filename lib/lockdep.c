// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lockdep.c - the lock-order checker of ./configure --enable-lockdep
 *
 * The kernel's lockdep in spirit, far simpler: no dependency graph, only
 * the documented order. Each mutex gets its rank (enum pwb__lock_rank in
 * lib/base.h) when it is initialised, kept in a table by address; each
 * thread keeps the list of the mutexes it holds. An acquisition whose rank
 * is not above the rank of every held mutex is a violation of the order,
 * whether or not this run would have deadlocked: the checker prints both
 * mutexes, their ranks and where each was taken, then aborts.
 *
 * Only built with --enable-lockdep. Its own table lock is a plain pthread
 * mutex (the parenthesised calls below bypass the checking macros).
 */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *const rank_names[PWB__NR_LOCK_RANKS] = {
	[PWB__LOCK_UNRANKED] = "a mutex without a rank",
	[PWB__LOCK_BDI] = "bdi->lock",
	[PWB__LOCK_RESHARD] = "bdi->reshard_lock",
	[PWB__LOCK_FLUSH] = "bdi->flush_lock",
	[PWB__LOCK_PAGE] = "page->lock",
	[PWB__LOCK_ROUTE] = "region->route_lock",
	[PWB__LOCK_LIST] = "wb->list_lock",
	[PWB__LOCK_INODE] = "inode->lock",
	[PWB__LOCK_WORK] = "wb->work_lock",
	[PWB__LOCK_FLUSHER] = "flusher->lock",
	[PWB__LOCK_PARK] = "bdi->park_lock",
	[PWB__LOCK_INFLIGHT] = "bdi->inflight_lock",
	[PWB__LOCK_RATE] = "bdi->rate.lock",
	[PWB__LOCK_CURSOR] = "bdi->cursor_lock",
	[PWB__LOCK_COMPLETION] = "completion->lock",
	[PWB__LOCK_AUTOTUNE] = "autotune->lock",
	[PWB__LOCK_SPACE_RECORDS] = "space->records_lock",
	[PWB__LOCK_SPACE] = "space_inode->lock",
	[PWB__LOCK_ALLOC_GROUP] = "alloc_group->lock",
	[PWB__LOCK_REGISTRY] = "registry_lock",
	[PWB__LOCK_PAGE_POOL] = "pool->lock",
	[PWB__LOCK_PAGE_LRU] = "pcache->lru[i].lock",
	[PWB__LOCK_PAGE_ROOM] = "room->lock",
	[PWB__LOCK_PAGE_KSWAPD] = "pcache->kswapd_lock",
	[PWB__LOCK_CHUNK_RETAIN] = "pcache retain_lock",
};

/* A mutex and the rank it was given, found by address. */
struct lock_class {
	const pthread_mutex_t *m;
	enum pwb__lock_rank rank;
	const char *file;	/* where it was initialised */
	int line;
	struct lock_class *next;
};

#define NR_BUCKETS 4096u
static struct lock_class *table[NR_BUCKETS];	/* table_lock */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* A mutex the calling thread holds, and where it took it. */
struct held_lock {
	const pthread_mutex_t *m;
	enum pwb__lock_rank rank;
	const char *file;
	int line;
};

/* Deeper than any nesting in lib/: a read filling a run of pages holds
 * their locks, and a few more under them. */
#define MAX_HELD (PWB__FILL_RUN_MAX + 16)
/*
 * The list lives on the heap, not in TLS: libpwb's whole TLS block takes
 * static TLS room (some of its variables are initial-exec, see
 * PWB__TLS_FAST), and a dlopen()ed libpwb gets that room from glibc's small
 * surplus. 48 held locks in TLS were enough to make dlopen() fail with
 * "cannot allocate memory in static TLS block".
 */
static __thread struct held_lock *held;	/* MAX_HELD entries, or NULL */
static __thread unsigned int nr_held;
static pthread_key_t held_key;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;

/* At thread exit. A lock taken by a later destructor allocates again and
 * glibc calls this once more. */
static void held_free(void *p)
{
	free(p);
	held = NULL;
	nr_held = 0;
}

static void held_key_create(void)
{
	if (pthread_key_create(&held_key, held_free))
		abort();
}

static unsigned int bucket_of(const pthread_mutex_t *m)
{
	uintptr_t a = (uintptr_t)m;

	return (unsigned int)((a >> 4) ^ (a >> 16)) % NR_BUCKETS;
}

static const char *rank_name(enum pwb__lock_rank rank)
{
	if ((unsigned int)rank < PWB__NR_LOCK_RANKS && rank_names[rank])
		return rank_names[rank];
	return "a mutex of an unknown rank";
}

static void print_held(void)
{
	unsigned int i;

	if (!nr_held) {
		fprintf(stderr, "  this thread holds no libpwb mutex\n");
		return;
	}
	fprintf(stderr, "  mutexes this thread holds, outermost first:\n");
	for (i = 0; i < nr_held; i++)
		fprintf(stderr, "    %s (rank %d) %p, taken at %s:%d\n",
			rank_name(held[i].rank), (int)held[i].rank,
			(const void *)held[i].m, held[i].file, held[i].line);
}

/* Print the report's first line and the held list, then abort. */
static void __attribute__((noreturn, format(printf, 1, 2)))
report(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pwb lockdep: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  in thread %d; the order is enum pwb__lock_rank "
			"in lib/base.h\n",
		(int)gettid());
	print_held();
	fflush(stderr);
	abort();
}

void pwb__lockdep_set_rank(pthread_mutex_t *m, enum pwb__lock_rank rank,
			   const char *file, int line)
{
	unsigned int b = bucket_of(m);
	struct lock_class *c;

	(pthread_mutex_lock)(&table_lock);
	for (c = table[b]; c; c = c->next)
		if (c->m == m)
			break;
	if (!c) {
		c = malloc(sizeof(*c));
		if (!c)
			report("out of memory recording the rank of %p "
			       "initialised at %s:%d",
			       (void *)m, file, line);
		c->m = m;
		c->next = table[b];
		table[b] = c;
	}
	/* A mutex initialised again (memory reused without a destroy)
	 * takes the new rank. */
	c->rank = rank;
	c->file = file;
	c->line = line;
	(pthread_mutex_unlock)(&table_lock);
}

void pwb__lockdep_forget(pthread_mutex_t *m)
{
	struct lock_class **pc, *c = NULL;

	(pthread_mutex_lock)(&table_lock);
	for (pc = &table[bucket_of(m)]; *pc; pc = &(*pc)->next) {
		if ((*pc)->m == m) {
			c = *pc;
			*pc = c->next;
			break;
		}
	}
	(pthread_mutex_unlock)(&table_lock);
	free(c);
}

/* The class of @m (a copy), or false if @m was never given one. */
static bool class_of(const pthread_mutex_t *m, struct lock_class *out)
{
	struct lock_class *c;
	bool found = false;

	(pthread_mutex_lock)(&table_lock);
	for (c = table[bucket_of(m)]; c; c = c->next) {
		if (c->m == m) {
			*out = *c;
			found = true;
			break;
		}
	}
	(pthread_mutex_unlock)(&table_lock);
	return found;
}

void pwb__lockdep_acquire(pthread_mutex_t *m, bool nested, const char *file,
			  int line)
{
	struct lock_class c;
	unsigned int i;

	if (!class_of(m, &c))
		report("%p, locked at %s:%d, was not initialised with "
		       "pwb__mutex_init() and has no rank",
		       (void *)m, file, line);
	if (c.rank == PWB__LOCK_UNRANKED)
		report("%p, locked at %s:%d, was initialised at %s:%d with "
		       "pthread_mutex_init(): give it a rank with "
		       "pwb__mutex_init(&m, PWB__LOCK_...)",
		       (void *)m, file, line, c.file, c.line);
	for (i = 0; i < nr_held; i++) {
		const struct held_lock *h = &held[i];

		if (h->m == m)
			report("%s (rank %d) %p, locked at %s:%d, is already "
			       "held by this thread (taken at %s:%d)",
			       rank_name(c.rank), (int)c.rank, (void *)m,
			       file, line, h->file, h->line);
		if (h->rank > c.rank || (h->rank == c.rank && !nested))
			report("lock order violation: %s (rank %d) %p taken "
			       "at %s:%d while holding %s (rank %d) %p, "
			       "taken at %s:%d",
			       rank_name(c.rank), (int)c.rank, (void *)m, file,
			       line, rank_name(h->rank), (int)h->rank,
			       (const void *)h->m, h->file, h->line);
	}
	if (!held) {
		pthread_once(&held_once, held_key_create);
		held = calloc(MAX_HELD, sizeof(*held));
		if (!held || pthread_setspecific(held_key, held))
			report("no memory for the list of held mutexes (lock "
			       "at %s:%d)", file, line);
	}
	if (nr_held == MAX_HELD)
		report("%s (rank %d), locked at %s:%d: more than %d mutexes "
		       "held at once",
		       rank_name(c.rank), (int)c.rank, file, line, MAX_HELD);
	held[nr_held++] = (struct held_lock){
		.m = m, .rank = c.rank, .file = file, .line = line,
	};
}

void pwb__lockdep_release(pthread_mutex_t *m, const char *file, int line)
{
	unsigned int i = nr_held;

	/* Usually the innermost; any order of release is allowed. */
	while (i-- > 0) {
		if (held[i].m == m) {
			for (; i + 1 < nr_held; i++)
				held[i] = held[i + 1];
			nr_held--;
			return;
		}
	}
	report("%p is released (or waited on) at %s:%d but this thread does "
	       "not hold it",
	       (void *)m, file, line);
}

void pwb__lockdep_assert_held_at(const pthread_mutex_t *m, const char *file,
				 int line)
{
	struct lock_class c;
	unsigned int i;

	for (i = 0; i < nr_held; i++)
		if (held[i].m == m)
			return;
	if (!class_of(m, &c))
		c.rank = PWB__LOCK_UNRANKED;
	report("%s (rank %d) %p must be held at %s:%d but this thread does "
	       "not hold it",
	       rank_name(c.rank), (int)c.rank, (const void *)m, file, line);
}
