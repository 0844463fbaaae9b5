/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dp-api.h - the data path's public API (issue 12) as tests/check_datapath.c
 * and bench/pwb-bench.c use it, written while the pcache and alloc branches
 * that implement it were still being built.
 *
 * With a pwb.h that has the data path (the allocator,
 * detected by the pwb_bdi_alloc_group_stats macro, which the alloc branch
 * adds) this header only maps a few field names. Without it, it declares
 * the allocator's functions weak, so that the programs build and report
 * "not there" at run time (exit 77 in the tests, a skipped row in the
 * bench): DP_HAVE_ALLOC() says which.
 * Once the data path is on main, this fallback half can go.
 */
#ifndef PWB_DP_API_H
#define PWB_DP_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pwb.h"

/* The page cache (pcache branch, merged): always there. */
#define DP_SET_CACHE_BYTES(cfg, v) ((cfg)->cache_bytes = (v))
/* Clean pages reclaimed by writeback contexts (struct pwb_stats). */
#define DP_STAT_RECLAIMED(st) ((st)->reclaimed_pages)
#define DP_STAT_CACHE_PAGES(st) ((st)->cache_pages)

#ifdef pwb_bdi_alloc_group_stats

#define DP_HAVE_ALLOC() 1
#define DP_SET_ALLOC_GROUPS(cfg, v) ((cfg)->nr_alloc_groups = (v))

#else

#define DP_HAVE_ALLOC() (pwb_inode_extents != NULL)
#define DP_SET_ALLOC_GROUPS(cfg, v) ((void)(cfg), (void)(v))

struct pwb_extent {
	uint64_t file_off;
	uint64_t dev_off;
	uint64_t len;
};

__attribute__((weak)) int pwb_inode_extents(struct pwb_inode *inode,
					    struct pwb_extent *ext, size_t nr,
					    size_t *total);
__attribute__((weak)) int pwb_inode_set_extents(struct pwb_inode *inode,
						const struct pwb_extent *ext,
						size_t nr);

#endif

#endif
