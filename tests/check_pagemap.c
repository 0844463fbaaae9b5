/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_pagemap.c - the sparse page-tag map (lib/pagemap.c)
 *
 * White-box: links libpwb-internal and uses pagemap.c's test hooks, which
 * are declared here because no other file needs them.
 */
#include <check.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "test-util.h"

/* lib/pagemap.c test hooks (see the comment above their definitions). */
extern long pwb__map_fail_alloc_after PWB__INTERNAL;
size_t pwb__map_memory(const struct pwb__map *map) PWB__INTERNAL;
const char *pwb__map_check(const struct pwb__map *map) PWB__INTERNAL;

#define DIRTY	  PWB__TAG_DIRTY
#define TOWRITE	  PWB__TAG_TOWRITE
#define WRITEBACK PWB__TAG_WRITEBACK
#define LEAF	  PWB__MAP_LEAF_PAGES

static struct pwb__map map;

static void setup(void)
{
	pwb__map_init(&map);
	pwb__map_fail_alloc_after = -1;
}

static void teardown(void)
{
	pwb__map_fail_alloc_after = -1;
	pwb__map_destroy(&map);
}

/* The structural invariants pagemap.c documents, after every mutation. */
#define ASSERT_MAP_OK(m)                                                       \
	do {                                                                   \
		const char *why_ = pwb__map_check(m);                          \
		ck_assert_msg(why_ == NULL, "map invariant broken: %s", why_); \
	} while (0)

/*
 * For loops. A passing ck_assert still reports its line to the parent
 * process (a write to a pipe in fork mode), which costs far more than the
 * map operation under test; EXPECT calls into Check only on failure.
 */
#define EXPECT(cond, ...)                                                      \
	do {                                                                   \
		if (!(cond))                                                   \
			ck_abort_msg(__VA_ARGS__);                             \
	} while (0)

/* Pages holding @tag in [first, last], counted with pwb__map_test. */
static uint64_t count_tested(enum pwb__tag tag, uint64_t first, uint64_t last)
{
	uint64_t i = first, n = 0;

	for (;;) {
		n += pwb__map_test(&map, tag, i);
		if (i == last)
			return n;
		i++;
	}
}

/* ---------------------------------------------------------------------- */

START_TEST(test_set_range_counts_new_pages_only)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 10, 20), 11);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 15, 30), 10);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 15, 30), 0);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 12, 12), 0);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 9, 9), 1);
	ck_assert_uint_eq(map.count[DIRTY], 22);
	ck_assert(!pwb__map_test(&map, DIRTY, 8));
	ck_assert_uint_eq(count_tested(DIRTY, 9, 30), 22);
	ck_assert(!pwb__map_test(&map, DIRTY, 31));
	ck_assert_uint_eq(map.count[TOWRITE], 0);
	ck_assert_uint_eq(map.count[WRITEBACK], 0);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_set_range_spans_words_and_leaves)
{
	/* Word and leaf edges: 63|64, 511|512, and a range over 8 leaves. */
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 63, 64), 2);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 511, 512), 2);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 1000, 5000), 4001);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 0, 6000), 6001 - 4005);
	ck_assert_uint_eq(map.count[DIRTY], 6001);
	ck_assert_uint_eq(count_tested(DIRTY, 0, 7000), 6001);
	ck_assert_uint_eq(map.nr_nodes, 1 + (6000 / LEAF + 1));
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_set_inverted_range_is_noop)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 10, 9), 0);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 10, 9), 0);
	ck_assert_int_eq(pwb__map_copy_tag(&map, DIRTY, TOWRITE, 10, 9), 0);
	ck_assert_uint_eq(map.nr_nodes, 0);
	ck_assert_ptr_null(map.root);
}
END_TEST

START_TEST(test_tags_are_independent)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 0, 99), 100);
	ck_assert(!pwb__map_test(&map, TOWRITE, 50));
	ck_assert_uint_eq(pwb__map_clear(&map, WRITEBACK, 0, 99), 0);
	ck_assert_int_eq(pwb__map_set(&map, WRITEBACK, 50, 60), 11);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 0, UINT64_MAX), 100);
	ck_assert_uint_eq(map.count[WRITEBACK], 11);
	ck_assert(pwb__map_test(&map, WRITEBACK, 55));
	ck_assert(!pwb__map_test(&map, DIRTY, 55));
	/* The leaf still holds WRITEBACK, so it must stay. */
	ck_assert_uint_eq(map.nr_nodes, 1);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_clear_range_spans_leaves)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 0, 4095), 4096);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 100, 3000), 2901);
	ck_assert(pwb__map_test(&map, DIRTY, 99));
	ck_assert(!pwb__map_test(&map, DIRTY, 100));
	ck_assert(!pwb__map_test(&map, DIRTY, 3000));
	ck_assert(pwb__map_test(&map, DIRTY, 3001));
	ck_assert_uint_eq(map.count[DIRTY], 4096 - 2901);
	ck_assert_uint_eq(count_tested(DIRTY, 0, 4095), 4096 - 2901);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 100, 3000), 0);
	/* Leaves 1-4 (pages 512-2559) lost every page and were freed. */
	ck_assert_uint_eq(map.nr_nodes, 1 + 4);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_clear_returns_only_pages_that_had_tag)
{
	uint64_t i, n = 0;

	for (i = 0; i < 3000; i += 3)
		n += pwb__map_set(&map, DIRTY, i, i);
	ck_assert_uint_eq(n, 1000);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 1, 2999), 999);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 0, UINT64_MAX), 1);
	ck_assert_uint_eq(map.count[DIRTY], 0);
	ck_assert_uint_eq(map.nr_nodes, 0);
}
END_TEST

/*
 * "Clean space" for one tag may be full of another: 4M WRITEBACK pages
 * (8192 leaves) are in the way below. The per-tag masks make each of the
 * 200,000 calls a few descents; a search or range walk that visits every
 * allocated leaf instead takes ~1000 times as long and blows the test's
 * timeout.
 */
#define BUSY_PAGES (4ull << 20)

START_TEST(test_find_skips_clean_space)
{
	const uint64_t far = 1ull << 62;
	uint64_t found = 0;
	int i;

	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 5, 5), 1);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, far, far), 1);
	ck_assert_int_eq(
		pwb__map_set(&map, DIRTY, UINT64_MAX - 3, UINT64_MAX - 3), 1);
	ck_assert(pwb__map_find(&map, DIRTY, 0, &found));
	ck_assert_uint_eq(found, 5);
	ck_assert(pwb__map_find(&map, DIRTY, 6, &found));
	ck_assert_uint_eq(found, far);
	ck_assert(pwb__map_find(&map, DIRTY, far + 1, &found));
	ck_assert_uint_eq(found, UINT64_MAX - 3);
	ck_assert(!pwb__map_find(&map, DIRTY, UINT64_MAX - 2, &found));
	ck_assert(!pwb__map_find(&map, TOWRITE, 0, &found));

	ck_assert_int_eq(pwb__map_set(&map, WRITEBACK, 6, BUSY_PAGES + 5),
			 (int64_t)BUSY_PAGES);
	for (i = 0; i < 200000; i++) {
		uint64_t start = 6 + i % 4096;

		EXPECT(pwb__map_find(&map, DIRTY, start, &found) &&
			       found == far,
		       "find(%" PRIu64 ") gave %" PRIu64, start, found);
	}
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_find_from_tagged_page_returns_it)
{
	uint64_t found = 0;

	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 700, 800), 101);
	ck_assert(pwb__map_find(&map, DIRTY, 700, &found));
	ck_assert_uint_eq(found, 700);
	ck_assert(pwb__map_find(&map, DIRTY, 777, &found));
	ck_assert_uint_eq(found, 777);
	ck_assert(pwb__map_find(&map, DIRTY, 800, &found));
	ck_assert_uint_eq(found, 800);
	ck_assert(!pwb__map_find(&map, DIRTY, 801, &found));
}
END_TEST

START_TEST(test_run_stops_at_gap)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 100, 199), 100);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 201, 300), 100);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 100, UINT64_MAX), 100);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 150, UINT64_MAX), 50);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 200, UINT64_MAX), 0);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 201, UINT64_MAX), 100);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 99, UINT64_MAX), 0);
	ck_assert_uint_eq(pwb__map_run(&map, TOWRITE, 100, UINT64_MAX), 0);
}
END_TEST

START_TEST(test_run_crosses_leaf_boundary)
{
	/* 500-2000 spans leaves 0-3; 2001-2047 ends leaf 3 clean. */
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 500, 2000), 1501);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 500, UINT64_MAX), 1501);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 511, UINT64_MAX), 1490);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 512, UINT64_MAX), 1489);
	/* A run that ends exactly at a leaf's end, before a missing leaf. */
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 2001, 2047), 47);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 600, UINT64_MAX), 1448);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 2047, UINT64_MAX), 1);
}
END_TEST

START_TEST(test_run_is_capped_at_max)
{
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 0, 9999), 10000);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 0, 10), 10);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 3, 600), 600);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 3, 0), 0);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, 3, 20000), 9997);
}
END_TEST

START_TEST(test_copy_tag_only_tagged_pages)
{
	uint64_t i, expect = 0, nodes;

	for (i = 0; i < 1024; i += 2)
		pwb__map_set(&map, DIRTY, i, i);
	pwb__map_set(&map, DIRTY, 5000, 5010);
	/* Some targets already hold TOWRITE: they are not counted again. */
	pwb__map_set(&map, TOWRITE, 10, 19);
	nodes = map.nr_nodes;
	for (i = 20; i <= 1022; i += 2)
		expect++;
	expect += 5005 - 5000 + 1;
	ck_assert_int_eq(pwb__map_copy_tag(&map, DIRTY, TOWRITE, 10, 5005),
			 (int64_t)expect);
	ck_assert_uint_eq(map.count[TOWRITE], expect + 10);
	for (i = 0; i < 6000; i++) {
		bool want =
			(i >= 10 && i <= 19) ||
			(i >= 10 && i <= 5005 && pwb__map_test(&map, DIRTY, i));

		if (pwb__map_test(&map, TOWRITE, i) != want)
			ck_abort_msg("page %" PRIu64 ": TOWRITE %d", i, !want);
	}
	ck_assert_int_eq(pwb__map_copy_tag(&map, DIRTY, TOWRITE, 10, 5005), 0);
	ck_assert_uint_eq(map.count[DIRTY], 512 + 11);
	ck_assert_uint_eq(map.nr_nodes, nodes);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_copy_and_clear_skip_untagged_subtrees)
{
	uint64_t found = 0;
	int i;

	/* The integrity-sync pattern, over the whole index space: tag what
	 * is dirty TOWRITE, then clear TOWRITE, next to BUSY_PAGES pages
	 * that hold neither tag. This checks the counts and the tree, twice
	 * so that the second round starts from the first's result; how fast
	 * the untagged subtrees are skipped is the bench's business, not a
	 * timeout's. */
	pwb__map_set(&map, DIRTY, 3, 3);
	pwb__map_set(&map, DIRTY, 1ull << 50, (1ull << 50) + 1000);
	pwb__map_set(&map, WRITEBACK, 6, BUSY_PAGES + 5);
	for (i = 0; i < 2; i++) {
		EXPECT(pwb__map_copy_tag(&map, DIRTY, TOWRITE, 0, UINT64_MAX) ==
			       1002,
		       "copy %d", i);
		EXPECT(pwb__map_clear(&map, TOWRITE, 0, UINT64_MAX) == 1002,
		       "clear %d", i);
	}
	ck_assert(!pwb__map_find(&map, TOWRITE, 0, &found));
	ASSERT_MAP_OK(&map);
}
END_TEST

/*
 * pwb__map_lsn_reset() over [0, 2^52), the range a whole-device discard
 * passes, with a few sparse pages carrying LSNs: the ones inside lose
 * their LSN, one the range leaves out keeps it. No time is measured; the
 * only guard on cost is Check's timeout, which is acceptable here only
 * because the old code walked the range leaf by leaf (2^43 lookups, so it
 * never finished) while the reset must visit only the leaves that exist.
 */
START_TEST(test_lsn_reset_over_2_52_touches_only_existing_leaves)
{
	const uint64_t end = 1ull << 52;
	const uint64_t pages[] = { 0, 7, 1ull << 30, (1ull << 51) + 3,
				   end - 1 };
	unsigned int i;

	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		ck_assert_int_eq(pwb__map_set_lsn(&map, pages[i], pages[i],
						  100 + i), 1);
	/* Beyond the range: keeps its LSN. */
	ck_assert_int_eq(pwb__map_set_lsn(&map, end, end, 999), 1);
	/* Set as asked. */
	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		ck_assert_uint_eq(pwb__map_lsn(&map, pages[i]), 100 + i);
	pwb__map_lsn_reset(&map, 0, end);
	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		EXPECT(pwb__map_lsn(&map, pages[i]) == 0, "page %u", i);
	ck_assert_uint_eq(pwb__map_lsn(&map, end), 999);
	/* The tags are not the reset's business. */
	ck_assert(pwb__map_test(&map, DIRTY, (1ull << 51) + 3));
	/* A range inside one leaf leaves the rest of that leaf alone. */
	ck_assert_int_eq(pwb__map_set_lsn(&map, 8, 9, 5), 2);
	pwb__map_lsn_reset(&map, 9, 1);
	ck_assert_uint_eq(pwb__map_lsn(&map, 8), 5);
	ck_assert_uint_eq(pwb__map_lsn(&map, 9), 0);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_range_beyond_tree_height)
{
	/* Height 1 covers leaves 0-63, pages 0-32767. Ranges that end past
	 * that must still reach the last page of the last leaf, whatever
	 * the offset of their own last page. */
	pwb__map_set(&map, DIRTY, 0, 0);
	pwb__map_set(&map, DIRTY, 32760, 32767);
	ck_assert_uint_eq(map.height, 1);
	ck_assert_int_eq(pwb__map_copy_tag(&map, DIRTY, TOWRITE, 1, 1ull << 40),
			 8);
	ck_assert_uint_eq(pwb__map_run(&map, TOWRITE, 32760, UINT64_MAX), 8);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 1, 1ull << 40), 8);
	ck_assert_uint_eq(pwb__map_clear(&map, TOWRITE, 32767, UINT64_MAX), 1);
	ck_assert_uint_eq(pwb__map_clear(&map, TOWRITE, 40000, UINT64_MAX), 0);
	ck_assert(!pwb__map_find(&map, DIRTY, 1, &(uint64_t){0}));
	ck_assert(!pwb__map_find(&map, DIRTY, 1ull << 40, &(uint64_t){0}));
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_indexes_near_uint64_max)
{
	const uint64_t top = UINT64_MAX;
	uint64_t found = 0;

	/* Page 0 too, so that a run or find that wraps would see it. */
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 0, 0), 1);
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, top - 1000, top), 1001);
	ck_assert_uint_eq(map.height, 10);
	ck_assert(pwb__map_test(&map, DIRTY, top));
	ck_assert(!pwb__map_test(&map, DIRTY, top - 1001));
	ck_assert_uint_eq(map.count[DIRTY], 1002);
	ck_assert(pwb__map_find(&map, DIRTY, 1, &found));
	ck_assert_uint_eq(found, top - 1000);
	ck_assert(pwb__map_find(&map, DIRTY, top, &found));
	ck_assert_uint_eq(found, top);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, top - 1000, UINT64_MAX),
			  1001);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, top, UINT64_MAX), 1);
	ck_assert_int_eq(
		pwb__map_copy_tag(&map, DIRTY, WRITEBACK, top - 5, top), 6);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, top, top), 1);
	ck_assert_uint_eq(pwb__map_run(&map, DIRTY, top - 1000, UINT64_MAX),
			  1000);
	ASSERT_MAP_OK(&map);
	ck_assert_uint_eq(pwb__map_clear(&map, DIRTY, 1, top), 1000);
	ck_assert_uint_eq(pwb__map_clear(&map, WRITEBACK, 0, top), 6);
	/* Only page 0 is left: back to a single leaf at height 0. */
	ck_assert_uint_eq(map.height, 0);
	ck_assert_uint_eq(map.nr_nodes, 1);
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_empty_leaves_are_freed)
{
	uint64_t nodes;

	pwb__map_set(&map, DIRTY, 0, 2000);
	pwb__map_set(&map, WRITEBACK, 1500, 1600);
	pwb__map_set(&map, DIRTY, 1ull << 40, (1ull << 40) + 10);
	nodes = map.nr_nodes;
	/* Leaf 0 loses its only tag; its sibling leaves keep theirs. */
	pwb__map_clear(&map, DIRTY, 0, 511);
	ck_assert_uint_eq(map.nr_nodes, nodes - 1);
	/* Leaf 1 goes too; leaves 2 and 3 (1024-2047) still hold
	 * WRITEBACK on 1500-1600, so they stay. */
	pwb__map_clear(&map, DIRTY, 0, 2000);
	ck_assert_uint_eq(map.nr_nodes, nodes - 2);
	ck_assert_uint_eq(map.count[WRITEBACK], 101);
	ASSERT_MAP_OK(&map);
	pwb__map_clear(&map, WRITEBACK, 0, UINT64_MAX);
	pwb__map_clear(&map, DIRTY, 1ull << 40, (1ull << 40) + 10);
	ck_assert_uint_eq(map.nr_nodes, 0);
	ck_assert_ptr_null(map.root);
	ck_assert_uint_eq(map.height, 0);
	ck_assert_uint_eq(pwb__map_memory(&map), 0);
}
END_TEST

START_TEST(test_tree_shrinks_when_high_pages_cleared)
{
	pwb__map_set(&map, DIRTY, 7, 7);
	pwb__map_set(&map, TOWRITE, 1ull << 40, 1ull << 40);
	ck_assert_uint_gt(map.height, 0);
	pwb__map_clear(&map, TOWRITE, 0, UINT64_MAX);
	ck_assert_uint_eq(map.height, 0);
	ck_assert_uint_eq(map.nr_nodes, 1);
	ck_assert(pwb__map_test(&map, DIRTY, 7));
	ASSERT_MAP_OK(&map);
}
END_TEST

START_TEST(test_destroy_frees_everything)
{
	pwb__map_set(&map, DIRTY, 0, 100000);
	pwb__map_set(&map, TOWRITE, 1ull << 33, (1ull << 33) + 5000);
	pwb__map_set(&map, WRITEBACK, UINT64_MAX, UINT64_MAX);
	pwb__map_destroy(&map);
	ck_assert_ptr_null(map.root);
	ck_assert_uint_eq(map.nr_nodes, 0);
	ck_assert_uint_eq(map.count[DIRTY], 0);
	ck_assert_uint_eq(map.height, 0);
	/* Still usable; valgrind and ASan report anything leaked. */
	ck_assert_int_eq(pwb__map_set(&map, DIRTY, 3, 4), 2);
	ASSERT_MAP_OK(&map);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* -ENOMEM: all or nothing                                                */

#define SNAP_MAX 4096

struct snapshot {
	uint64_t count[PWB__NR_TAGS];
	uint64_t nr_nodes;
	unsigned int height;
	size_t memory;
	unsigned int nr[PWB__NR_TAGS];
	uint64_t pages[PWB__NR_TAGS][SNAP_MAX];
};

static bool snapshot_equal(const struct snapshot *a, const struct snapshot *b)
{
	int t;

	if (a->nr_nodes != b->nr_nodes || a->height != b->height ||
	    a->memory != b->memory)
		return false;
	for (t = 0; t < PWB__NR_TAGS; t++)
		if (a->count[t] != b->count[t] || a->nr[t] != b->nr[t] ||
		    memcmp(a->pages[t], b->pages[t],
			   a->nr[t] * sizeof(a->pages[t][0])))
			return false;
	return true;
}

static void snapshot_take(struct snapshot *s)
{
	int t;

	memset(s, 0, sizeof(*s));
	for (t = 0; t < PWB__NR_TAGS; t++) {
		uint64_t at = 0, found;

		s->count[t] = map.count[t];
		while (pwb__map_find(&map, t, at, &found)) {
			EXPECT(s->nr[t] < SNAP_MAX, "snapshot too small");
			s->pages[t][s->nr[t]++] = found;
			if (found == UINT64_MAX)
				break;
			at = found + 1;
		}
	}
	s->nr_nodes = map.nr_nodes;
	s->height = map.height;
	s->memory = pwb__map_memory(&map);
}

struct enomem_case {
	const char *what;
	uint64_t pre[3][2];   /* DIRTY ranges present before, {1, 0} = none */
	uint64_t first, last; /* the failing pwb__map_set(TOWRITE) */
};

START_TEST(test_enomem_leaves_map_unchanged)
{
	// clang-format off
	static const struct enomem_case cases[] = {
		{ "empty map, one page", {{1, 0}, {1, 0}, {1, 0}}, 0, 0 },
		{ "empty map, far page", {{1, 0}, {1, 0}, {1, 0}},
		  1ull << 50, 1ull << 50 },
		{ "grow above a leaf, many leaves",
		  {{0, 5}, {1, 0}, {1, 0}}, 1000, 70000 },
		{ "existing leaves and new ones, across nodes",
		  {{(1ull << 21) - 700, (1ull << 21) + 700}, {1ull << 30,
		  1ull << 30}, {0, 0}}, (1ull << 21) - 40000,
		  (1ull << 21) + 40000 },
		{ "up to UINT64_MAX", {{0, 0}, {1ull << 30, 1ull << 30},
		  {1, 0}}, UINT64_MAX - 600, UINT64_MAX },
	};
	// clang-format on
	static struct snapshot before, after;
	unsigned int c;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct enomem_case *k = &cases[c];
		long budget, failures = 0;
		int64_t ret;
		int i;

		pwb__map_destroy(&map);
		for (i = 0; i < 3; i++)
			if (k->pre[i][0] <= k->pre[i][1])
				pwb__map_set(&map, DIRTY, k->pre[i][0],
					     k->pre[i][1]);
		/* TOWRITE on some pages already: the set must not touch them
		 * either when it fails. */
		pwb__map_copy_tag(&map, DIRTY, TOWRITE, k->first, k->last);
		snapshot_take(&before);

		for (budget = 0;; budget++) {
			pwb__map_fail_alloc_after = budget;
			ret = pwb__map_set(&map, TOWRITE, k->first, k->last);
			pwb__map_fail_alloc_after = -1;
			if (ret != -ENOMEM)
				break;
			failures++;
			ASSERT_MAP_OK(&map);
			snapshot_take(&after);
			EXPECT(snapshot_equal(&before, &after),
			       "%s: map changed by a failed set "
			       "(budget %ld)",
			       k->what, budget);
		}
		ck_assert_msg(failures > 0, "%s: never failed", k->what);
		ck_assert_int_ge(ret, 0);
		ck_assert_uint_eq(map.count[TOWRITE],
				  before.count[TOWRITE] + (uint64_t)ret);
		ck_assert_uint_eq(
			pwb__map_run(&map, TOWRITE, k->first, UINT64_MAX),
			k->last - k->first + 1);
		ASSERT_MAP_OK(&map);
	}
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Memory                                                                 */

START_TEST(test_dense_range_memory_per_page)
{
	const uint64_t nr = 1000000, base = (1ull << 40) + 17;
	uint64_t i;
	double per_page;

	/* As pwb_mark_dirty does it: a page at a time. */
	for (i = 0; i < nr; i++)
		EXPECT(pwb__map_set(&map, DIRTY, i, i) == 1, "page %" PRIu64,
		       i);
	/* 1954 leaves, 31 nodes under a root of height 2. */
	ck_assert_uint_eq(map.nr_nodes, (nr + LEAF - 1) / LEAF + 31 + 1);
	per_page = (double)pwb__map_memory(&map) / nr;
	ck_assert_msg(per_page <= 16.0, "%.2f bytes/page", per_page);

	/* Worst case for the layout: every tag set, range not aligned. */
	pwb__map_destroy(&map);
	for (i = 0; i < PWB__NR_TAGS; i++)
		ck_assert_int_eq(pwb__map_set(&map, i, base, base + nr - 1),
				 (int64_t)nr);
	per_page = (double)pwb__map_memory(&map) / nr;
	ck_assert_msg(per_page <= 16.0, "%.2f bytes/page", per_page);
	ASSERT_MAP_OK(&map);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Randomized comparison with a plain bitmap model                        */

/*
 * The model: a byte per page (bit t = tag t) over a few windows, one at 0,
 * one across the 2^32 boundary, one high and unaligned, one ending at
 * UINT64_MAX. Sets stay inside a window; clears, copies, finds and runs
 * may span the untagged space between windows.
 */
#define WIN_LEN 5000
#define NR_WIN	4
#define NR_OPS	50000

static const uint64_t win_base[NR_WIN] = {
	0,
	(1ull << 32) - 2345,
	(1ull << 47) + 123457,
	UINT64_MAX - WIN_LEN + 1,
};
static uint8_t model[NR_WIN][WIN_LEN];

static uint64_t model_apply(int op, enum pwb__tag tag, enum pwb__tag from,
			    uint64_t first, uint64_t last)
{
	uint64_t n = 0;
	int w;

	for (w = 0; w < NR_WIN; w++) {
		uint64_t lo = PWB__MAX(first, win_base[w]);
		uint64_t hi = PWB__MIN(last, win_base[w] + WIN_LEN - 1);
		uint64_t i;

		if (lo > hi)
			continue;
		for (i = lo - win_base[w]; i <= hi - win_base[w]; i++) {
			uint8_t *p = &model[w][i], bit = 1u << tag;

			if (op == 0 && !(*p & bit)) {
				*p |= bit;
				n++;
			} else if (op == 1 && (*p & bit)) {
				*p &= ~bit;
				n++;
			} else if (op == 2 && (*p & (1u << from)) &&
				   !(*p & bit)) {
				*p |= bit;
				n++;
			}
		}
	}
	return n;
}

static bool model_find(enum pwb__tag tag, uint64_t start, uint64_t *found)
{
	int w;

	for (w = 0; w < NR_WIN; w++) {
		uint64_t i;

		if (start > win_base[w] + WIN_LEN - 1)
			continue;
		i = start > win_base[w] ? start - win_base[w] : 0;
		for (; i < WIN_LEN; i++)
			if (model[w][i] & (1u << tag)) {
				*found = win_base[w] + i;
				return true;
			}
	}
	return false;
}

/* Windows never touch, so a run ends at its window's end at the latest. */
static uint64_t model_run(enum pwb__tag tag, uint64_t start, uint64_t max)
{
	uint64_t n = 0;
	int w;

	for (w = 0; w < NR_WIN; w++) {
		uint64_t i;

		if (start < win_base[w] || start > win_base[w] + WIN_LEN - 1)
			continue;
		for (i = start - win_base[w];
		     i < WIN_LEN && (model[w][i] & (1u << tag)); i++)
			n++;
	}
	return PWB__MIN(n, max);
}

static uint64_t model_count(enum pwb__tag tag)
{
	uint64_t n = 0;
	int w, i;

	for (w = 0; w < NR_WIN; w++)
		for (i = 0; i < WIN_LEN; i++)
			n += (model[w][i] >> tag) & 1;
	return n;
}

/* Every tagged page of the map, by find, equals the model's. */
static void model_compare_all(int op_nr)
{
	int t;

	ASSERT_MAP_OK(&map);
	for (t = 0; t < PWB__NR_TAGS; t++) {
		uint64_t at = 0, got, want;
		bool has_got, has_want;

		EXPECT(map.count[t] == model_count(t), "op %d: count[%d]",
		       op_nr, t);
		for (;;) {
			has_got = pwb__map_find(&map, t, at, &got);
			has_want = model_find(t, at, &want);
			EXPECT(has_got == has_want && (!has_got || got == want),
			       "op %d tag %d: find(%" PRIu64 ")", op_nr, t, at);
			if (!has_got || got == UINT64_MAX)
				break;
			at = got + 1;
		}
	}
}

/* A page in or near a window (a few pages off its edges). */
static uint64_t random_page(uint64_t *seed, int *win)
{
	int w = tu_rand(seed) % NR_WIN;
	uint64_t off = tu_rand(seed) % (WIN_LEN + 20);

	*win = w;
	if (w == NR_WIN - 1)
		return win_base[w] - 20 + off;
	return win_base[w] + off - (w ? 10 : 0);
}

START_TEST(test_random_ops_match_model)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	/* Evidence that the mix reached the interesting cases. */
	unsigned long finds_hit = 0, long_runs = 0, shrunk = 0;
	int op_nr, t;

	memset(model, 0, sizeof(model));
	for (op_nr = 0; op_nr < NR_OPS; op_nr++) {
		uint64_t r = tu_rand(&seed), first, last, len, got, want;
		enum pwb__tag tag = tu_rand(&seed) % PWB__NR_TAGS;
		enum pwb__tag from = tu_rand(&seed) % PWB__NR_TAGS;
		int op = r % 100, w, w2;
		bool has_got, has_want;

		/* Mostly small ranges, like writes; sometimes large ones. */
		switch (tu_rand(&seed) % 8) {
		case 0:
			len = 1 + tu_rand(&seed) % WIN_LEN;
			break;
		case 1:
		case 2:
			len = 1 + tu_rand(&seed) % 700;
			break;
		default:
			len = 1 + tu_rand(&seed) % 8;
			break;
		}
		w = tu_rand(&seed) % NR_WIN;
		first = win_base[w] + tu_rand(&seed) % WIN_LEN;
		last = PWB__MIN(first + len - 1, win_base[w] + WIN_LEN - 1);

		if (op < 30) {
			got = pwb__map_set(&map, tag, first, last);
			want = model_apply(0, tag, 0, first, last);
			EXPECT(got == want,
			       "op %d: set %" PRIu64 " != %" PRIu64, op_nr, got,
			       want);
		} else if (op < 55) {
			/* Clears and copies also span windows at times. */
			if (tu_rand(&seed) % 5 == 0) {
				first = random_page(&seed, &w);
				last = random_page(&seed, &w2);
				if (first > last) {
					uint64_t x = first;

					first = last;
					last = x;
				}
			}
			if (op < 45) {
				got = pwb__map_clear(&map, tag, first, last);
				want = model_apply(1, tag, 0, first, last);
			} else {
				got = pwb__map_copy_tag(&map, from, tag, first,
							last);
				want = model_apply(2, tag, from, first, last);
			}
			EXPECT(got == want, "op %d: %" PRIu64 " != %" PRIu64,
			       op_nr, got, want);
		} else if (op < 75) {
			first = tu_rand(&seed) % 4 ? random_page(&seed, &w)
						   : tu_rand(&seed);
			has_got = pwb__map_find(&map, tag, first, &got);
			has_want = model_find(tag, first, &want);
			EXPECT(has_got == has_want && (!has_got || got == want),
			       "op %d: find(%" PRIu64 ")", op_nr, first);
			finds_hit += has_got;
		} else if (op < 90) {
			first = random_page(&seed, &w);
			len = tu_rand(&seed) % 2 ? UINT64_MAX
						 : tu_rand(&seed) % 1000;
			got = pwb__map_run(&map, tag, first, len);
			want = model_run(tag, first, len);
			EXPECT(got == want,
			       "op %d: run(%" PRIu64 ") %" PRIu64
			       " != %" PRIu64,
			       op_nr, first, got, want);
			long_runs += got > 64;
		} else {
			first = random_page(&seed, &w);
			EXPECT(pwb__map_test(&map, tag, first) ==
				       (model_run(tag, first, 1) == 1),
			       "op %d: test(%" PRIu64 ")", op_nr, first);
		}
		if (op_nr % 500 == 499)
			model_compare_all(op_nr);
		/* Now and then empty the high windows, so that the tree
		 * shrinks and later ranges reach past its height. */
		if (op_nr % 3000 == 2999) {
			for (t = 0; t < PWB__NR_TAGS; t++) {
				got = pwb__map_clear(&map, t, win_base[1],
						     UINT64_MAX);
				want = model_apply(1, t, 0, win_base[1],
						   UINT64_MAX);
				EXPECT(got == want, "op %d: high clear", op_nr);
			}
			shrunk += map.height <= 1;
		}
	}
	model_compare_all(NR_OPS);
	/* The mix did exercise finds that hit and long runs. */
	ck_assert_uint_gt(finds_hit, 1000);
	ck_assert_uint_gt(long_runs, 500);
	ck_assert_uint_gt(shrunk, 0);
	for (t = 0; t < PWB__NR_TAGS; t++)
		pwb__map_clear(&map, t, 0, UINT64_MAX);
	ck_assert_uint_eq(map.nr_nodes, 0);
}
END_TEST

/* ---------------------------------------------------------------------- */

static Suite *pagemap_suite(void)
{
	Suite *s = suite_create("pagemap");
	TCase *tc = tcase_create("tags");
	TCase *tc_slow = tcase_create("model");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_set_range_counts_new_pages_only);
	tcase_add_test(tc, test_set_range_spans_words_and_leaves);
	tcase_add_test(tc, test_set_inverted_range_is_noop);
	tcase_add_test(tc, test_tags_are_independent);
	tcase_add_test(tc, test_clear_range_spans_leaves);
	tcase_add_test(tc, test_clear_returns_only_pages_that_had_tag);
	tcase_add_test(tc, test_find_skips_clean_space);
	tcase_add_test(tc, test_find_from_tagged_page_returns_it);
	tcase_add_test(tc, test_run_stops_at_gap);
	tcase_add_test(tc, test_run_crosses_leaf_boundary);
	tcase_add_test(tc, test_run_is_capped_at_max);
	tcase_add_test(tc, test_copy_tag_only_tagged_pages);
	tcase_add_test(tc, test_copy_and_clear_skip_untagged_subtrees);
	tcase_add_test(tc, test_range_beyond_tree_height);
	tcase_add_test(tc, test_lsn_reset_over_2_52_touches_only_existing_leaves);
	tcase_add_test(tc, test_indexes_near_uint64_max);
	tcase_add_test(tc, test_empty_leaves_are_freed);
	tcase_add_test(tc, test_tree_shrinks_when_high_pages_cleared);
	tcase_add_test(tc, test_destroy_frees_everything);
	tcase_add_test(tc, test_enomem_leaves_map_unchanged);
	tcase_add_test(tc, test_dense_range_memory_per_page);
	suite_add_tcase(s, tc);

	/* Sanitizer builds run the model several times slower. */
	tcase_add_checked_fixture(tc_slow, setup, teardown);
	tcase_set_timeout(tc_slow, 60);
	tcase_add_test(tc_slow, test_random_ops_match_model);
	suite_add_tcase(s, tc_slow);
	return s;
}

int main(void)
{
	return tu_run_suite(pagemap_suite(), false);
}
