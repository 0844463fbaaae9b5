// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * stats.c - statistics, per context and summed over a bdi
 *
 * Counters are plain uatomic words in each context; readers never lock.
 */
#include "base.h"
#include "wb_ctx.h"
#include "autotune.h"
#include "bdi.h"
#include "page-owner.h"
#include "space.h"
#include "domain.h"
#include "blocked.h"

#include <string.h>

int pwb__bdi_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	struct pwb__wb_ctx_array *arr;
	uint64_t max_dirty = 0;
	unsigned int i;

	pwb__err_clear();
	if (!bdi || !st)
		return pwb__err(-EINVAL, "pwb_bdi_stats: NULL %s",
				!bdi ? "bdi" : "st");
	memset(st, 0, sizeof(*st));
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_stats"))
		return -ESHUTDOWN;
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; i < arr->nr; i++) {
		uint64_t before = st->dirty_pages;

		pwb__wb_stats_read(arr->ctx[i], st);
		max_dirty = PWB__MAX(max_dirty, st->dirty_pages - before);
	}
	/* max / mean = max * nr / sum */
	if (st->dirty_pages)
		st->imbalance_milli = max_dirty * arr->nr * 1000 /
				      st->dirty_pages;
	/* Device flushes belong to the bdi, not to one context. Read
	 * without flush_lock, which a flush holds for its whole fdatasync. */
	st->device_flushes += pwb__aread(&bdi->nr_device_flushes);
	/* What contexts retired by re-shards had done. */
	pwb__wb_counters_read(&bdi->retired_stats, st);
	st->throttle_ns = pwb__aread(&bdi->throttle_ns);
	st->throttle_events = pwb__aread(&bdi->throttle_events);
	pwb__blocked_read(&bdi->blk, st);
	pwb__autotune_stats(bdi, st);
	if (bdi->page_owner)
		bdi->page_owner->stats(bdi, -1, st);
	pwb__space_stats(bdi, st);
	st->dirty_limit_bytes = pwb__aread(&bdi->dirty_limit_pages)
				<< bdi->page_shift;
	st->dirty_background_limit_bytes =
		pwb__aread(&bdi->bg_thresh_pages) << bdi->page_shift;
	if (bdi->dom)
		st->domain_share_ppm = pwb__aread(&bdi->dom->share_ppm);
	/* The section keeps the bdi alive against a pwb_bdi_close(). */
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}

int pwb__wb_ctx_stats(struct pwb_bdi *bdi, unsigned int idx,
		      struct pwb_stats *st)
{
	struct pwb__wb_ctx_array *arr;
	int ret = 0;

	pwb__err_clear();
	if (!bdi || !st)
		return pwb__err(-EINVAL, "pwb_wb_ctx_stats: NULL %s",
				!bdi ? "bdi" : "st");
	memset(st, 0, sizeof(*st));
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_wb_ctx_stats"))
		return -ESHUTDOWN;
	arr = PWB__RCU_DEREF(bdi->ctxs);
	if (idx >= arr->nr)
		ret = pwb__err(-ERANGE, "context %u does not exist (the bdi "
					"has %u)",
			       idx, arr->nr);
	else
		pwb__wb_stats_read(arr->ctx[idx], st);
	if (!ret && bdi->page_owner)
		bdi->page_owner->stats(bdi, (int)idx, st);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return ret;
}
