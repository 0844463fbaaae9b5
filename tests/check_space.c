/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_space.c - the space layer (delayed allocation, extent maps,
 * closed-inode records) on a real bdi over a small image, white-box
 *
 * Inodes are opened in allocator mode (no get_page, no map_page) and the
 * internal space functions are called as the page cache and the flushers
 * will: reserve, then map_page page by page.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "space.h"
#include "test-util.h"

static const struct pwb_inode_ops alloc_ops; /* all NULL: allocator mode */

static struct pwb_inode *open_alloc(struct tu_env *e, uint64_t ino)
{
	struct pwb_inode *inode;

	ck_assert_int_eq(pwb_inode_open(e->bdi, ino, &alloc_ops, NULL, &inode),
			 0);
	ck_assert_ptr_nonnull(inode->space);
	return inode;
}

static void env_open(struct tu_env *e, uint64_t pages, unsigned int groups)
{
	tu_env_config(e, 1, "null");
	e->cfg.nr_alloc_groups = groups;
	tu_env_open(e, pages);
}

static uint64_t map(struct pwb_inode *inode, uint64_t index)
{
	uint64_t off = UINT64_MAX;

	ck_assert_int_eq(inode->ops.map_page(inode, index, &off), 0);
	ck_assert_uint_eq(off % TU_PS, 0);
	return off / TU_PS;
}

static uint64_t free_units(struct tu_env *e)
{
	return pwb__alloc_free_units(&e->bdi->space->alloc, NULL);
}

START_TEST(test_open_modes)
{
	struct tu_env e;
	struct pwb_inode_ops half = {0};
	struct pwb_inode *inode;

	env_open(&e, 256, 1);
	half.get_page = (void *)1;
	ck_assert_int_eq(pwb_inode_open(e.bdi, 1, &half, NULL, &inode),
			 -EINVAL);
	inode = open_alloc(&e, 1);
	ck_assert_ptr_eq((void *)inode->ops.map_page,
			 (void *)pwb__space_map_page);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_one_extent_per_delalloc_run)
{
	struct tu_env e;
	struct pwb_inode *inode;
	uint64_t d0, d20, off;
	unsigned int i;

	env_open(&e, 1024, 1);
	inode = open_alloc(&e, 7);
	ck_assert_int_eq(pwb__space_reserve(inode, 0, 10), 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 20, 5), 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 3, 4), 0); /* idempotent */
	ck_assert_uint_eq(pwb__space_delalloc_pages(inode), 15);
	ck_assert_int_eq(uatomic_read(&e.bdi->space->alloc.avail), 1024 - 15);
	ck_assert_int_eq(pwb__space_lookup(inode, 0, &off), -ENODATA);
	d0 = map(inode, 0);
	for (i = 1; i < 10; i++)
		ck_assert_uint_eq(map(inode, i), d0 + i);
	ck_assert_uint_eq(pwb__extmap_count(&inode->space->ext), 1);
	d20 = map(inode, 20);
	ck_assert_uint_eq(map(inode, 24), d20 + 4);
	ck_assert_uint_eq(pwb__extmap_count(&inode->space->ext), 2);
	ck_assert_uint_eq(pwb__space_delalloc_pages(inode), 0);
	ck_assert_int_eq(pwb__space_lookup(inode, 3, &off), 0);
	ck_assert_uint_eq(off, (d0 + 3) * TU_PS);
	ck_assert_int_eq(pwb__space_lookup(inode, 10, &off), -ENODATA);
	ck_assert_uint_eq(free_units(&e), 1024 - 15);
	ck_assert_int_eq(uatomic_read(&e.bdi->space->nr_extents), 2);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_growing_file_merges)
{
	struct tu_env e;
	struct pwb_inode *a, *b;
	uint64_t i;

	/* Two inodes growing side by side, 8 pages at a time, on 4 groups:
	 * each continues its own extent (goal), so each keeps one. */
	env_open(&e, 4096, 4);
	a = open_alloc(&e, 1);
	b = open_alloc(&e, 2);
	for (i = 0; i < 64; i += 8) {
		ck_assert_int_eq(pwb__space_reserve(a, i, 8), 0);
		ck_assert_int_eq(pwb__space_reserve(b, i, 8), 0);
		map(a, i);
		map(b, i);
	}
	ck_assert_uint_eq(pwb__extmap_count(&a->space->ext), 1);
	ck_assert_uint_eq(pwb__extmap_count(&b->space->ext), 1);
	ck_assert_uint_eq(a->space->ext.units, 64);
	ck_assert_uint_ne(pwb__space_inode_group(a, 0),
			  pwb__space_inode_group(b, 0));
	ck_assert_int_eq(pwb_inode_close(a), 0);
	ck_assert_int_eq(pwb_inode_close(b), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_goal_beats_best_fit)
{
	struct tu_env e;
	struct pwb_inode *a, *b;

	/* a holds [0,8); b, the second inode homed in the group, lays out
	 * from its middle: [128,188), with holes punched at device 128..136
	 * (8 units) and 148..152 (4 units). a growing by 4 pages continues
	 * at unit 8 (its goal), where best fit alone would take the 4-unit
	 * hole: still one extent. */
	env_open(&e, 256, 1);
	a = open_alloc(&e, 1);
	b = open_alloc(&e, 2);
	ck_assert_int_eq(pwb__space_reserve(a, 0, 8), 0);
	ck_assert_uint_eq(map(a, 0), 0);
	ck_assert_int_eq(pwb__space_reserve(b, 0, 60), 0);
	ck_assert_uint_eq(map(b, 0), 128);
	pwb__space_punch(b, 0, 8);
	pwb__space_punch(b, 20, 4);
	ck_assert_int_eq(pwb__space_reserve(a, 8, 4), 0);
	ck_assert_uint_eq(map(a, 8), 8);
	ck_assert_uint_eq(pwb__extmap_count(&a->space->ext), 1);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	ck_assert_int_eq(pwb_inode_close(b), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_random_order_writeback_lays_files_out_linearly)
{
	struct tu_env e;
	struct pwb_inode *in[2];
	uint64_t order[32], s = 7, i, k;

	/* Two inodes in one group, their 4-page runs written back in a
	 * random order, interleaved (as contexts writing pages as they
	 * were dirtied do): each page goes where a linear layout from its
	 * nearest allocated neighbour puts it, so each file ends as one
	 * extent. */
	env_open(&e, 1024, 1);
	in[0] = open_alloc(&e, 1);
	in[1] = open_alloc(&e, 2);
	for (i = 0; i < 32; i++)
		order[i] = i;
	for (i = 31; i > 0; i--) {
		uint64_t j = tu_rand(&s) % (i + 1), x = order[i];

		order[i] = order[j];
		order[j] = x;
	}
	for (i = 0; i < 32; i++)
		for (k = 0; k < 2; k++) {
			ck_assert_int_eq(pwb__space_reserve(in[k],
							    order[i] * 4, 4),
					 0);
			map(in[k], order[i] * 4);
		}
	for (k = 0; k < 2; k++) {
		ck_assert_uint_eq(pwb__extmap_count(&in[k]->space->ext), 1);
		ck_assert_uint_eq(in[k]->space->ext.units, 128);
		ck_assert_int_eq(pwb_inode_close(in[k]), 0);
	}
	tu_env_close(&e);
}
END_TEST

START_TEST(test_punch_frees)
{
	struct tu_env e;
	struct pwb_inode *inode;
	uint64_t ext;

	env_open(&e, 512, 2);
	inode = open_alloc(&e, 3);
	ck_assert_int_eq(pwb__space_reserve(inode, 0, 100), 0);
	map(inode, 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 200, 10), 0);
	ck_assert_uint_eq(free_units(&e), 512 - 100);
	/* A hole in the middle: two extents, 10 blocks free again. */
	pwb__space_punch(inode, 40, 10);
	ck_assert_uint_eq(pwb__extmap_count(&inode->space->ext), 2);
	ck_assert_uint_eq(free_units(&e), 512 - 90);
	ck_assert_int_eq(uatomic_read(&e.bdi->space->alloc.avail),
			 512 - 90 - 10);
	/* Truncate everything (nr huge): blocks and reservations back. */
	pwb__space_punch(inode, 0, UINT64_MAX);
	ck_assert_uint_eq(pwb__extmap_count(&inode->space->ext), 0);
	ck_assert_uint_eq(pwb__space_delalloc_pages(inode), 0);
	ck_assert_uint_eq(pwb__alloc_free_units(&e.bdi->space->alloc, &ext),
			  512);
	ck_assert_uint_eq(ext, 2);	/* merged: one per group */
	ck_assert_int_eq(uatomic_read(&e.bdi->space->alloc.avail), 512);
	ck_assert_int_eq(uatomic_read(&e.bdi->space->reserved), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_enospc_at_reserve)
{
	struct tu_env e;
	struct pwb_inode *a, *b;

	env_open(&e, 64, 1);
	a = open_alloc(&e, 1);
	b = open_alloc(&e, 2);
	ck_assert_int_eq(pwb__space_reserve(a, 0, 60), 0);
	ck_assert_int_eq(pwb__space_reserve(b, 0, 5), -ENOSPC);
	ck_assert_uint_eq(pwb__space_delalloc_pages(b), 0); /* none taken */
	ck_assert_int_eq(pwb__space_reserve(b, 0, 4), 0);
	ck_assert_int_eq(pwb__space_reserve(a, 0, 60), 0); /* already */
	ck_assert_int_eq(pwb__space_reserve(a, 60, 1), -ENOSPC);
	map(a, 0);
	ck_assert_int_eq(pwb__space_reserve(a, 59, 1), 0); /* allocated */
	/* Closing b gives its unused reservation back. */
	ck_assert_int_eq(pwb_inode_close(b), 0);
	ck_assert_int_eq(pwb__space_reserve(a, 60, 4), 0);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	tu_env_close(&e);
}
END_TEST

/* A pwb_write() of whole aligned pages that libpwb makes one folio reserves
 * the folio's space before it is dirtied, as page by page: with room for
 * fewer pages than the folio, the write stops where the room ends. */
START_TEST(test_folio_write_reserves)
{
	struct tu_env e;
	struct pwb_inode *a, *b;
	size_t len = 32 * TU_PS;
	char *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	memset(buf, 0x5a, len);
	env_open(&e, 64, 1);
	a = open_alloc(&e, 1);
	b = open_alloc(&e, 2);
	ck_assert_int_eq(pwb__space_reserve(b, 0, 40), 0);	/* 24 left */
	ck_assert_int_eq(pwb_write(a, buf, len, 0), (ssize_t)(24 * TU_PS));
	ck_assert_int_eq(pwb_write(a, buf, TU_PS, 24 * TU_PS), -ENOSPC);
	ck_assert_int_eq(pwb_inode_close(b), 0);
	ck_assert_int_eq(pwb_write(a, buf + 24 * TU_PS, 8 * TU_PS,
				   24 * TU_PS), (ssize_t)(8 * TU_PS));
	ck_assert_int_eq(pwb_fsync(a), 0);
	ck_assert_int_eq(pwb_inode_close(a), 0);
	tu_env_close(&e);
	free(buf);
}
END_TEST

START_TEST(test_close_reopen_keeps_extents)
{
	struct tu_env e;
	struct pwb_inode *inode;
	uint64_t d, off, used;

	env_open(&e, 1024, 2);
	inode = open_alloc(&e, 9);
	ck_assert_int_eq(pwb__space_reserve(inode, 0, 16), 0);
	d = map(inode, 0);
	/* The write of the 16 pages ended: their blocks hold data. */
	ck_assert_int_eq(pwb__space_written(inode, 0, 16), 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 100, 3), 0); /* unused */
	/* The page cache's size is what close records. */
	ck_assert_int_eq(pwb_inode_set_size(inode, 16 * TU_PS - 5), 0);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	used = 1024 - free_units(&e);
	ck_assert_uint_eq(used, 16);	/* the file still exists */
	ck_assert_int_eq(uatomic_read(&e.bdi->space->alloc.avail), 1024 - 16);

	inode = open_alloc(&e, 9);
	ck_assert_int_eq(pwb__space_lookup(inode, 15, &off), 0);
	ck_assert_uint_eq(off, (d + 15) * TU_PS);
	ck_assert_int_eq(pwb__space_lookup(inode, 100, &off), -ENODATA);
	ck_assert_uint_eq(pwb__space_get_size(inode), 16 * TU_PS - 5);
	ck_assert_uint_eq(pwb__space_delalloc_pages(inode), 0);
	/* Another ino starts empty. */
	{
		struct pwb_inode *other = open_alloc(&e, 10);

		ck_assert_int_eq(pwb__space_lookup(other, 0, &off), -ENODATA);
		ck_assert_uint_eq(pwb__space_get_size(other), 0);
		ck_assert_int_eq(pwb_inode_close(other), 0);
	}
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	tu_env_close(&e);
}
END_TEST

/* The group of unit @u on @e's allocator. */
static unsigned int group_of(struct tu_env *e, uint64_t u)
{
	return pwb__alloc_group_of(&e->bdi->space->alloc, u);
}

START_TEST(test_streams_keep_lifetimes_in_their_own_groups)
{
	struct tu_env e;
	struct pwb_inode *lng[4], *shrt[4];
	uint64_t i, u;
	unsigned int k, g;

	/* 8 groups, 8 stream sets: stream 1 owns group 0, stream 2 group 1.
	 * Eight inodes growing side by side, four per stream: every block
	 * of a stream's inodes lies in its group, whatever the freest group
	 * is (the other six are emptier). */
	env_open(&e, 8 * 512, 8);
	for (k = 0; k < 4; k++) {
		lng[k] = open_alloc(&e, 10 + k);
		shrt[k] = open_alloc(&e, 20 + k);
		ck_assert_int_eq(pwb_inode_set_stream(lng[k], 1), 0);
		ck_assert_int_eq(pwb_inode_set_stream(shrt[k], 2), 0);
	}
	for (i = 0; i < 64; i += 8)
		for (k = 0; k < 4; k++) {
			ck_assert_int_eq(pwb__space_reserve(lng[k], i, 8), 0);
			ck_assert_int_eq(pwb__space_reserve(shrt[k], i, 8), 0);
			for (u = i; u < i + 8; u++) {
				ck_assert_uint_eq(group_of(&e, map(lng[k], u)),
						  0);
				ck_assert_uint_eq(
					group_of(&e, map(shrt[k], u)), 1);
			}
		}
	/* Stream 9 wraps to set 0; a full set spills over, never fails:
	 * group 0 has 512 - 256 units left, a stream-1 inode takes 400. */
	{
		struct pwb_inode *big = open_alloc(&e, 30);
		unsigned int outside = 0;

		ck_assert_int_eq(pwb_inode_set_stream(big, 9), 0);
		ck_assert_int_eq(pwb__space_reserve(big, 0, 400), 0);
		for (u = 0; u < 400; u++) {
			g = group_of(&e, map(big, u));
			outside += g != 0;
			if (u < 256)
				ck_assert_uint_eq(g, 0);
		}
		ck_assert_uint_eq(outside, 400 - 256);
		ck_assert_int_eq(pwb_inode_close(big), 0);
	}
	for (k = 0; k < 4; k++) {
		ck_assert_int_eq(pwb_inode_close(lng[k]), 0);
		ck_assert_int_eq(pwb_inode_close(shrt[k]), 0);
	}
	tu_env_close(&e);
}
END_TEST

START_TEST(test_stream_change_needs_no_pending_pages)
{
	struct tu_env e;
	struct pwb_inode *inode;
	uint64_t d;

	env_open(&e, 8 * 256, 8);
	inode = open_alloc(&e, 5);
	ck_assert_int_eq(pwb_inode_set_stream(NULL, 1), -EINVAL);
	ck_assert_int_eq(pwb_inode_set_stream(inode, 3), 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 0, 4), 0);
	/* Pages waiting for a block were routed by the home: no move. */
	ck_assert_int_eq(pwb_inode_set_stream(inode, 4), -EBUSY);
	ck_assert_int_eq(pwb_inode_set_stream(inode, 3), 0); /* no change */
	d = map(inode, 0);
	map(inode, 1), map(inode, 2), map(inode, 3);
	ck_assert_uint_eq(group_of(&e, d), 2);
	ck_assert_int_eq(pwb__space_written(inode, 0, 4), 0);
	/* Nothing pending: the next blocks go to stream 4's group, not
	 * after the old extent (whose goal lies outside the set). */
	ck_assert_int_eq(pwb_inode_set_stream(inode, 4), 0);
	ck_assert_int_eq(pwb__space_reserve(inode, 4, 4), 0);
	ck_assert_uint_eq(group_of(&e, map(inode, 4)), 3);
	ck_assert_int_eq(pwb__space_written(inode, 4, 4), 0);
	/* The stream stays with the file across a close. */
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	inode = open_alloc(&e, 5);
	ck_assert_int_eq(pwb__space_reserve(inode, 100, 1), 0);
	ck_assert_uint_eq(group_of(&e, map(inode, 100)), 3);
	ck_assert_int_eq(pwb_inode_close(inode), 0);
	/* Not an allocator-mode inode: the application places its pages. */
	{
		struct tu_store st;

		tu_store_init(&st, 6, TU_PS, 4, 0);
		ck_assert_int_eq(tu_store_open(&st, e.bdi), 0);
		ck_assert_int_eq(pwb_inode_set_stream(st.inode, 1), -EINVAL);
		ck_assert_int_eq(pwb_inode_close(st.inode), 0);
		tu_store_destroy(&st);
	}
	tu_env_close(&e);
}
END_TEST

START_TEST(test_group_info_adds_up)
{
	struct tu_env e;
	struct pwb__alloc_group_info gi;
	uint64_t len = 0, next = 0;
	unsigned int i;

	env_open(&e, 1000, 7);
	ck_assert_uint_eq(e.bdi->space->alloc.nr_groups, 7);
	for (i = 0; i < 7; i++) {
		pwb__alloc_group_info(&e.bdi->space->alloc, i, &gi);
		ck_assert_uint_eq(gi.start, next);
		ck_assert_uint_eq(gi.free_units, gi.len);
		next = gi.start + gi.len;
		len += gi.len;
	}
	ck_assert_uint_eq(len, 1000);
	tu_env_close(&e);
}
END_TEST

START_TEST(test_public_extents_and_rebuild)
{
	struct tu_env e;
	struct pwb_inode *a, *b;
	struct pwb_extent ext[4], saved[4];
	struct pwb_alloc_group_stats gs;
	struct pwb_inode_ops ops = {0};
	uint64_t sum = 0, off;
	size_t total = 99, nsaved;
	unsigned int g;

	env_open(&e, 1024, 4);
	a = open_alloc(&e, 1);
	ck_assert_int_eq(pwb__space_reserve(a, 0, 10), 0);
	map(a, 0);
	ck_assert_int_eq(pwb__space_reserve(a, 50, 2), 0);
	map(a, 50);
	/* Blocks whose data was never written are not reported. */
	ck_assert_int_eq(pwb_inode_extents(a, NULL, 0, &total), 0);
	ck_assert_uint_eq(total, 0);
	ck_assert_int_eq(pwb__space_written(a, 0, 10), 0);
	ck_assert_int_eq(pwb__space_written(a, 50, 2), 0);
	ck_assert_int_eq(pwb_inode_extents(a, NULL, 0, &total), 0);
	ck_assert_uint_eq(total, 2);
	ck_assert_int_eq(pwb_inode_extents(a, saved, 4, &nsaved), 0);
	ck_assert_uint_eq(nsaved, 2);
	ck_assert_uint_eq(saved[0].file_off, 0);
	ck_assert_uint_eq(saved[0].len, 10 * TU_PS);
	ck_assert_uint_eq(saved[1].file_off, 50 * TU_PS);
	/* Laid out linearly: pages 10..49 keep their place free. */
	ck_assert_uint_eq(saved[1].dev_off, saved[0].dev_off + 50 * TU_PS);
	/* An inode with its own map_page is not in allocator mode. */
	tu_env_close(&e);

	/* A new run: rebuild from the saved list. */
	env_open(&e, 1024, 4);
	a = open_alloc(&e, 1);
	b = open_alloc(&e, 2);
	ck_assert_int_eq(pwb_inode_set_extents(a, saved, nsaved), 0);
	ck_assert_int_eq(pwb__space_lookup(a, 51, &off), 0);
	ck_assert_uint_eq(off, saved[1].dev_off + TU_PS);
	ck_assert_int_eq(pwb_inode_set_extents(a, saved, nsaved), -EBUSY);
	/* b claiming a's blocks: refused, nothing changed. */
	memcpy(ext, saved, sizeof(saved));
	ext[0].file_off = 100 * TU_PS;
	ext[0].dev_off = 900 * TU_PS;	/* free */
	ext[0].len = TU_PS;
	ext[1] = saved[0];
	ck_assert_int_eq(pwb_inode_set_extents(b, ext, 2), -EEXIST);
	ck_assert_int_eq(pwb_inode_extents(b, NULL, 0, &total), 0);
	ck_assert_uint_eq(total, 0);
	ck_assert_uint_eq(free_units(&e), 1024 - 12);
	ext[0].len = TU_PS + 1;
	ck_assert_int_eq(pwb_inode_set_extents(b, ext, 1), -EINVAL);
	/* Group stats add up to the device and its free space. */
	for (g = 0;; g++) {
		int rc = pwb_bdi_alloc_group_stats(e.bdi, g, &gs);

		if (rc == -ENOENT)
			break;
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(gs.start, sum);
		sum += gs.len;
		ck_assert_uint_le(gs.largest_free, gs.free_bytes);
	}
	ck_assert_uint_eq(g, 4);
	ck_assert_uint_eq(sum, 1024 * TU_PS);
	{
		struct pwb_stats st;

		ck_assert_int_eq(pwb__space_reserve(b, 0, 3), 0);
		ck_assert_int_eq(pwb_bdi_stats(e.bdi, &st), 0);
		ck_assert_uint_eq(st.extents, 2);
		ck_assert_uint_eq(st.alloc_groups, 4);
		ck_assert_uint_eq(st.reserved_bytes, 3 * TU_PS);
		ck_assert_uint_eq(st.free_bytes, (1024 - 12) * TU_PS);
	}
	/* Not allocator mode. */
	ops.get_page = (void *)1;
	ops.map_page = (void *)1;
	{
		struct pwb_inode *c;

		ck_assert_int_eq(pwb_inode_open(e.bdi, 3, &ops, NULL, &c), 0);
		ck_assert_int_eq(pwb_inode_extents(c, NULL, 0, &total),
				 -EINVAL);
		ck_assert_int_eq(pwb_inode_close(c), 0);
	}
	tu_env_close(&e);
}
END_TEST

START_TEST(test_alloc_group_policy_routes_by_allocator_group)
{
	struct tu_env e;
	struct pwb_inode *in[8];
	unsigned int i;

	/* 4 groups, 2 contexts: each inode's context is its home group
	 * modulo 2, and routing it allocates nothing. */
	tu_env_config(&e, 2, "null");
	e.cfg.nr_alloc_groups = 4;
	e.cfg.policy = "alloc-group";
	tu_env_open(&e, 1024);
	for (i = 0; i < 8; i++) {
		in[i] = open_alloc(&e, 100 + i);
		ck_assert_int_eq(pwb__space_reserve(in[i], 0, 1), 0);
		ck_assert_int_eq(pwb_mark_dirty(in[i], 0, TU_PS), 0);
		ck_assert_uint_eq(pwb__extmap_count(&in[i]->space->ext), 0);
		ck_assert_int_eq(pwb_inode_wb_ctx(in[i]),
				 (int)(pwb__space_inode_group(in[i], 0) % 2));
		ck_assert_int_eq(pwb_inode_discard(in[i], 0, UINT64_MAX), 0);
		ck_assert_int_eq(pwb_inode_close(in[i]), 0);
	}
	tu_env_close(&e);
}
END_TEST

static Suite *space_suite(void)
{
	Suite *s = suite_create("space");
	TCase *tc = tcase_create("space");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_open_modes);
	tcase_add_test(tc, test_one_extent_per_delalloc_run);
	tcase_add_test(tc, test_growing_file_merges);
	tcase_add_test(tc, test_goal_beats_best_fit);
	tcase_add_test(tc, test_random_order_writeback_lays_files_out_linearly);
	tcase_add_test(tc, test_punch_frees);
	tcase_add_test(tc, test_enospc_at_reserve);
	tcase_add_test(tc, test_folio_write_reserves);
	tcase_add_test(tc, test_close_reopen_keeps_extents);
	tcase_add_test(tc, test_group_info_adds_up);
	tcase_add_test(tc, test_streams_keep_lifetimes_in_their_own_groups);
	tcase_add_test(tc, test_stream_change_needs_no_pending_pages);
	tcase_add_test(tc, test_public_extents_and_rebuild);
	tcase_add_test(tc, test_alloc_group_policy_routes_by_allocator_group);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(space_suite(), false);
}
