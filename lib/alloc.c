// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * alloc.c - the extent allocator (allocation groups, best fit, goals,
 * lock-free reservations); alloc.h says what each call promises.
 */
#include "pwb-internal.h"
#include "alloc.h"

#include <stdio.h>
#include <sched.h>
#include <stdlib.h>

/* A free extent: in its group's two trees. */
struct fext {
	struct pwb__avl_node off_node;	/* group->by_off */
	struct pwb__avl_node len_node;	/* group->by_len */
	uint64_t start, len;
};

#define OFF_FEXT(n) caa_container_of(n, struct fext, off_node)
#define LEN_FEXT(n) caa_container_of(n, struct fext, len_node)

static int cmp_off(const struct pwb__avl_node *a, const struct pwb__avl_node *b)
{
	const struct fext *x = OFF_FEXT(a), *y = OFF_FEXT(b);

	return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_len(const struct pwb__avl_node *a, const struct pwb__avl_node *b)
{
	const struct fext *x = LEN_FEXT(a), *y = LEN_FEXT(b);

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

static void bug(const char *what, uint64_t start, uint64_t nr)
{
	fprintf(stderr, "libpwb: allocator: %s (units %llu+%llu)\n", what,
		(unsigned long long)start, (unsigned long long)nr);
	abort();
}

/* Caller holds g->lock for all the helpers below. */
static void fext_link(struct pwb__alloc_group *g, struct fext *e)
{
	if (!pwb__avl_insert(&g->by_off, &e->off_node, cmp_off) ||
	    !pwb__avl_insert(&g->by_len, &e->len_node, cmp_len))
		bug("free extents overlap", e->start, e->len);
}

static void fext_unlink(struct pwb__alloc_group *g, struct fext *e)
{
	pwb__avl_remove(&g->by_off, &e->off_node);
	pwb__avl_remove(&g->by_len, &e->len_node);
}

/* The free extent holding @unit, or NULL. */
static struct fext *fext_holding(struct pwb__alloc_group *g, uint64_t unit)
{
	struct fext key = {.start = unit};
	struct pwb__avl_node *n;
	struct fext *e;

	n = pwb__avl_floor(&g->by_off, &key.off_node, cmp_off);
	if (!n)
		return NULL;
	e = OFF_FEXT(n);
	return unit < e->start + e->len ? e : NULL;
}

/*
 * Take units [@s, @s + @n) out of free extent @e, which holds them. A
 * piece from the middle needs a second node: *@spare, consumed (set to
 * NULL) if used; without one the caller must not ask for the middle.
 */
static void fext_take(struct pwb__alloc_group *g, struct fext *e, uint64_t s,
		      uint64_t n, struct fext **spare)
{
	uint64_t end = e->start + e->len;

	fext_unlink(g, e);
	pwb__aset(&g->free_units, g->free_units - n);
	if (s > e->start && s + n < end) {
		struct fext *t = *spare;

		if (!t)
			bug("split without a node", s, n);
		*spare = NULL;
		t->start = s + n;
		t->len = end - (s + n);
		e->len = s - e->start;
		fext_link(g, e);
		fext_link(g, t);
		return;
	}
	if (s == e->start) {
		e->start += n;
		e->len -= n;
	} else {
		e->len -= n;
	}
	if (e->len)
		fext_link(g, e);
	else
		free(e);
}

int pwb__alloc_init(struct pwb__alloc *a, uint64_t units, unsigned int unit_size,
		    unsigned int nr_groups)
{
	unsigned int i;

	if (!nr_groups) {
		/* One per GiB, 4 to 64, each at least 16 MiB: a few writers
		 * get a group each even on a small device. */
		uint64_t per_gib = (1ull << 30) / unit_size;
		uint64_t min_len = (16ull << 20) / unit_size;

		nr_groups = (unsigned int)PWB__MIN(
			PWB__MAX(units / per_gib, 4),
			PWB__MIN(units / (min_len ? min_len : 1), 64));
	}
	if (nr_groups > units)
		nr_groups = (unsigned int)units;
	if (!nr_groups)
		nr_groups = 1;
	a->units = units;
	a->nr_groups = nr_groups;
	a->group_units = units / nr_groups;
	a->avail = (int64_t)units;
	a->groups = calloc(nr_groups, sizeof(*a->groups));
	if (!a->groups)
		return -ENOMEM;
	for (i = 0; i < nr_groups; i++) {
		struct pwb__alloc_group *g = &a->groups[i];
		struct fext *e;

		pwb__mutex_init(&g->lock, PWB__LOCK_ALLOC_GROUP);
		pwb__avl_init(&g->by_off);
		pwb__avl_init(&g->by_len);
		g->start = i * a->group_units;
		g->len = i + 1 < nr_groups ? a->group_units
					   : units - g->start;
		if (!g->len)
			continue;
		e = malloc(sizeof(*e));
		if (!e) {
			a->nr_groups = i + 1;
			pwb__alloc_destroy(a);
			return -ENOMEM;
		}
		e->start = g->start;
		e->len = g->len;
		pwb__aset(&g->free_units, g->len);
		fext_link(g, e);
	}
	return 0;
}

void pwb__alloc_destroy(struct pwb__alloc *a)
{
	unsigned int i;

	if (!a->groups)
		return;
	for (i = 0; i < a->nr_groups; i++) {
		struct pwb__alloc_group *g = &a->groups[i];
		struct pwb__avl_node *n;

		while ((n = pwb__avl_first(&g->by_off))) {
			struct fext *e = OFF_FEXT(n);

			fext_unlink(g, e);
			free(e);
		}
		pthread_mutex_destroy(&g->lock);
	}
	free(a->groups);
	a->groups = NULL;
}

unsigned int pwb__alloc_group_of(const struct pwb__alloc *a, uint64_t unit)
{
	uint64_t g;

	if (!a->group_units)
		return 0;
	g = unit / a->group_units;
	return g >= a->nr_groups ? a->nr_groups - 1 : (unsigned int)g;
}

int pwb__alloc_reserve(struct pwb__alloc *a, uint64_t nr)
{
	int64_t old, cur = pwb__aread(&a->avail);

	if (!nr)
		return 0;
	if (nr > (uint64_t)INT64_MAX)
		return -ENOSPC;
	do {
		old = cur;
		if (old < (int64_t)nr)
			return -ENOSPC;
		cur = uatomic_cmpxchg(&a->avail, old, old - (int64_t)nr);
	} while (cur != old);
	return 0;
}

void pwb__alloc_unreserve(struct pwb__alloc *a, uint64_t nr)
{
	if (nr)
		uatomic_add(&a->avail, (int64_t)nr);
}

/* Best fit for @want in @g: take it from the smallest free extent that
 * holds it (*@start). Takes g->lock; false if no extent holds it. */
static bool take_best_fit(struct pwb__alloc_group *g, uint64_t want,
			  uint64_t *start)
{
	struct fext key = {.start = 0, .len = want};
	struct pwb__avl_node *n;
	struct fext *e;

	/* Not enough free units in all: no need for the lock. */
	if (pwb__aread(&g->free_units) < want)
		return false;
	pthread_mutex_lock(&g->lock);
	n = pwb__avl_lower_bound(&g->by_len, &key.len_node, cmp_len);
	if (n) {
		e = LEN_FEXT(n);
		*start = e->start;
		fext_take(g, e, e->start, want, NULL);
	}
	pthread_mutex_unlock(&g->lock);
	return n != NULL;
}

/*
 * Take up to @want units from the start of the largest free extent of
 * groups [@first, @first + @nr): true with *@start and *@got, false if
 * those groups had nothing (or lost their largest piece to another
 * thread between the look and the take: the caller looks again). Takes
 * the groups' locks one at a time.
 */
static bool take_largest_in(struct pwb__alloc *a, unsigned int first,
			    unsigned int nr, uint64_t want, uint64_t *start,
			    uint64_t *got)
{
	struct pwb__alloc_group *g;
	struct pwb__avl_node *n;
	uint64_t best_len = 0;
	unsigned int i, best = 0;

	for (i = first; i < first + nr; i++) {
		g = &a->groups[i];
		pthread_mutex_lock(&g->lock);
		n = pwb__avl_last(&g->by_len);
		if (n && LEN_FEXT(n)->len > best_len) {
			best_len = LEN_FEXT(n)->len;
			best = i;
		}
		pthread_mutex_unlock(&g->lock);
	}
	if (!best_len)
		return false;
	g = &a->groups[best];
	pthread_mutex_lock(&g->lock);
	n = pwb__avl_last(&g->by_len);
	if (n) {
		struct fext *e = LEN_FEXT(n);
		uint64_t len = PWB__MIN(want, e->len);

		*start = e->start;
		*got = len;
		fext_take(g, e, e->start, len, NULL);
	}
	pthread_mutex_unlock(&g->lock);
	return n != NULL;
}

int pwb__alloc_extent(struct pwb__alloc *a, uint64_t goal, unsigned int home,
		      uint64_t want, uint64_t *start, uint64_t *got)
{
	return pwb__alloc_extent_in(a, goal, home, 0, a->nr_groups, want,
				    start, got);
}

int pwb__alloc_extent_in(struct pwb__alloc *a, uint64_t goal,
			 unsigned int home, unsigned int set_first,
			 unsigned int set_len, uint64_t want, uint64_t *start,
			 uint64_t *got)
{
	struct fext *spare;
	unsigned int i, tries;

	if (!want)
		return -EINVAL;
	if (set_first >= a->nr_groups || !set_len ||
	    set_len > a->nr_groups - set_first) {
		set_first = 0;
		set_len = a->nr_groups;
	}
	if (goal < a->units) {
		struct pwb__alloc_group *g;
		struct fext *e;

		home = pwb__alloc_group_of(a, goal);
		g = &a->groups[home];
		spare = malloc(sizeof(*spare));
		pthread_mutex_lock(&g->lock);
		e = fext_holding(g, goal);
		if (e && (spare || goal == e->start)) {
			uint64_t n = PWB__MIN(want, e->start + e->len - goal);

			fext_take(g, e, goal, n, &spare);
			pthread_mutex_unlock(&g->lock);
			free(spare);
			*start = goal;
			*got = n;
			return 0;
		}
		pthread_mutex_unlock(&g->lock);
		free(spare);
	}
	if (home < set_first || home >= set_first + set_len)
		home = set_first;
	/*
	 * Best fit: the groups of the set from @home on (wrapping inside
	 * the set); with the whole device as the set, every group from
	 * @home on. A stream that finds no piece of @want in its set takes
	 * the set's largest piece before it looks outside: keeping streams
	 * apart is what the set is for. Only then the other groups, the
	 * freest first: another stream's set is likely the fuller one.
	 */
	for (i = 0; i < set_len; i++) {
		struct pwb__alloc_group *g =
			&a->groups[set_first + (home - set_first + i) % set_len];

		if (take_best_fit(g, want, start)) {
			*got = want;
			return 0;
		}
	}
	if (set_len < a->nr_groups) {
		unsigned int others = a->nr_groups - set_len, from = 0;
		uint64_t most = 0;

		if (take_largest_in(a, set_first, set_len, want, start, got))
			return 0;
		for (i = 0; i < others; i++) {
			uint64_t f = pwb__aread(
				&a->groups[(set_first + set_len + i) %
					   a->nr_groups].free_units);

			if (f > most) {
				most = f;
				from = i;
			}
		}
		for (i = 0; i < others; i++) {
			struct pwb__alloc_group *g =
				&a->groups[(set_first + set_len +
					    (from + i) % others) %
					   a->nr_groups];

			if (take_best_fit(g, want, start)) {
				*got = want;
				return 0;
			}
		}
	}
	/*
	 * No extent holds @want: the largest piece in the set, else the
	 * largest anywhere. Others may take it between the look and the
	 * take, and a look may even find nothing (a unit freed in a group
	 * already passed, the last free piece of a later one taken before
	 * we got there): look again then. The caller's reservation
	 * guarantees @want free units at every moment (the others allocate
	 * only what they reserved), so this ends as soon as the others stop
	 * racing us; only an empty look repeated 10000 times (a full device
	 * and a caller that reserved nothing) gives -ENOSPC.
	 */
	for (tries = 0;; tries++) {
		if (take_largest_in(a, set_first, set_len, want, start, got) ||
		    (set_len < a->nr_groups &&
		     take_largest_in(a, 0, a->nr_groups, want, start, got)))
			return 0;
		/* Only a caller without a reservation sees nothing for
		 * long: a full device. */
		if (tries > 10000)
			return -ENOSPC;
		sched_yield();
	}
}

/* Free [@s, @s + @n), all in group @g. */
static void free_in_group(struct pwb__alloc_group *g, uint64_t s, uint64_t n)
{
	struct fext key = {.start = s};
	struct pwb__avl_node *pn, *nn;
	struct fext *prev = NULL, *next = NULL, *e;

	e = malloc(sizeof(*e));	/* used if neither neighbour merges */
	pthread_mutex_lock(&g->lock);
	pn = pwb__avl_floor(&g->by_off, &key.off_node, cmp_off);
	if (pn) {
		prev = OFF_FEXT(pn);
		if (prev->start + prev->len > s)
			bug("freeing free units", s, n);
		nn = pwb__avl_next(pn);
	} else {
		nn = pwb__avl_first(&g->by_off);
	}
	if (nn) {
		next = OFF_FEXT(nn);
		if (next->start < s + n)
			bug("freeing free units", s, n);
	}
	if (prev && prev->start + prev->len != s)
		prev = NULL;
	if (next && next->start != s + n)
		next = NULL;
	if (prev && next) {
		fext_unlink(g, prev);
		fext_unlink(g, next);
		prev->len += n + next->len;
		fext_link(g, prev);
		free(next);
	} else if (prev) {
		fext_unlink(g, prev);
		prev->len += n;
		fext_link(g, prev);
	} else if (next) {
		fext_unlink(g, next);
		next->start = s;
		next->len += n;
		fext_link(g, next);
	} else if (e) {
		e->start = s;
		e->len = n;
		fext_link(g, e);
		e = NULL;
	} else {
		/* Out of memory for the node: the units stay lost to this
		 * run (they are neither free nor anyone's). */
		pthread_mutex_unlock(&g->lock);
		return;
	}
	pwb__aset(&g->free_units, g->free_units + n);
	pthread_mutex_unlock(&g->lock);
	free(e);
}

void pwb__alloc_free(struct pwb__alloc *a, uint64_t start, uint64_t nr)
{
	uint64_t s = start, end = start + nr;

	if (!nr)
		return;
	if (end > a->units || end < start)
		bug("freeing units past the device", start, nr);
	while (s < end) {
		unsigned int gi = pwb__alloc_group_of(a, s);
		struct pwb__alloc_group *g = &a->groups[gi];
		uint64_t gend = g->start + g->len;
		uint64_t n = PWB__MIN(end, gend) - s;

		free_in_group(g, s, n);
		s += n;
	}
	pwb__alloc_unreserve(a, nr);
}

int pwb__alloc_mark_used(struct pwb__alloc *a, uint64_t start, uint64_t nr)
{
	uint64_t s, end = start + nr;
	int ret;

	if (!nr || end > a->units || end < start)
		return -EINVAL;
	ret = pwb__alloc_reserve(a, nr);
	if (ret)
		return ret;
	for (s = start; s < end;) {
		unsigned int gi = pwb__alloc_group_of(a, s);
		struct pwb__alloc_group *g = &a->groups[gi];
		uint64_t n = PWB__MIN(end, g->start + g->len) - s;
		struct fext *e, *spare = malloc(sizeof(*spare));

		if (!spare) {
			ret = -ENOMEM;
			break;
		}
		pthread_mutex_lock(&g->lock);
		e = fext_holding(g, s);
		if (!e || e->start + e->len < s + n) {
			pthread_mutex_unlock(&g->lock);
			free(spare);
			ret = -EEXIST;
			break;
		}
		fext_take(g, e, s, n, &spare);
		pthread_mutex_unlock(&g->lock);
		free(spare);
		s += n;
	}
	if (ret) {
		/* Give back what this call took: the pieces before @s, and
		 * the avail of the rest. */
		if (s > start) {
			pwb__alloc_free(a, start, s - start);
			nr -= s - start;
		}
		pwb__alloc_unreserve(a, nr);
	}
	return ret;
}

void pwb__alloc_group_info(struct pwb__alloc *a, unsigned int group,
			   struct pwb__alloc_group_info *info)
{
	struct pwb__alloc_group *g = &a->groups[group];
	struct pwb__avl_node *n;

	pthread_mutex_lock(&g->lock);
	info->start = g->start;
	info->len = g->len;
	info->free_units = g->free_units;
	info->free_extents = g->by_off.count;
	n = pwb__avl_last(&g->by_len);
	info->largest = n ? LEN_FEXT(n)->len : 0;
	pthread_mutex_unlock(&g->lock);
}

uint64_t pwb__alloc_free_units(struct pwb__alloc *a, uint64_t *extents)
{
	uint64_t units = 0, ext = 0;
	unsigned int i;

	for (i = 0; i < a->nr_groups; i++) {
		struct pwb__alloc_group *g = &a->groups[i];

		pthread_mutex_lock(&g->lock);
		units += g->free_units;
		ext += g->by_off.count;
		pthread_mutex_unlock(&g->lock);
	}
	if (extents)
		*extents = ext;
	return units;
}

int pwb__alloc_check(struct pwb__alloc *a)
{
	unsigned int i;
	int ret = 0;

	for (i = 0; i < a->nr_groups && !ret; i++) {
		struct pwb__alloc_group *g = &a->groups[i];
		struct pwb__avl_node *n;
		uint64_t units = 0, last_end = 0;
		bool first = true;

		pthread_mutex_lock(&g->lock);
		if (pwb__avl_check(&g->by_off, cmp_off) < 0 ||
		    pwb__avl_check(&g->by_len, cmp_len) < 0 ||
		    g->by_off.count != g->by_len.count)
			ret = -1;
		for (n = pwb__avl_first(&g->by_off); n && !ret;
		     n = pwb__avl_next(n)) {
			struct fext *e = OFF_FEXT(n);

			/* Inside the group, not touching the previous one
			 * (touching extents must have been merged). */
			if (!e->len || e->start < g->start ||
			    e->start + e->len > g->start + g->len ||
			    (!first && e->start <= last_end))
				ret = -1;
			units += e->len;
			last_end = e->start + e->len;
			first = false;
		}
		if (units != g->free_units)
			ret = -1;
		pthread_mutex_unlock(&g->lock);
	}
	return ret;
}
