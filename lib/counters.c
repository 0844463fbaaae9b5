// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * counters.c - a writeback context's counters (struct pwb__wb_stats and
 * the dirtying threads' slots, declared in wb_ctx.h)
 *
 * Lock-free adds and reads only: every layer that counts or reads pages
 * (dirtying, throttling, policies, stats, re-shards) calls these without
 * depending on the contexts' lists, work queues or flushers.
 */
#include "wb_ctx.h"
#include "blocked.h"

static unsigned long next_dirty_slot;
static PWB__TLS_FAST unsigned int my_dirty_slot;	/* slot + 1; 0: none yet */

void pwb__wb_account_dirtied(struct pwb__wb_ctx *wb, uint64_t n)
{
	struct pwb__dirty_slot *slot;

	if (caa_unlikely(!my_dirty_slot))
		my_dirty_slot = (unsigned int)(uatomic_add_return(
			&next_dirty_slot, 1) % PWB__NR_DIRTY_SLOTS) + 1;
	slot = &wb->dslot[my_dirty_slot - 1];
	uatomic_add(&slot->dirty_pages, n);
	uatomic_add(&slot->dirtied_pages, n);
}

uint64_t pwb__wb_dirty_pages(struct pwb__wb_ctx *wb)
{
	uint64_t sum = pwb__aread(&wb->stats.dirty_pages);
	unsigned int i;

	for (i = 0; i < PWB__NR_DIRTY_SLOTS; i++)
		sum += pwb__aread(&wb->dslot[i].dirty_pages);
	return sum;
}

void pwb__wb_fold_slots(struct pwb__wb_ctx *wb)
{
	unsigned int i;

	for (i = 0; i < PWB__NR_DIRTY_SLOTS; i++) {
		struct pwb__dirty_slot *slot = &wb->dslot[i];

		uatomic_add(&wb->stats.dirty_pages,
			    uatomic_xchg(&slot->dirty_pages, 0));
		uatomic_add(&wb->stats.dirtied_pages,
			    uatomic_xchg(&slot->dirtied_pages, 0));
	}
}

void pwb__wb_counters_read(const struct pwb__wb_stats *s, struct pwb_stats *st)
{
	st->nr_dirty_inodes += pwb__aread(&s->nr_dirty_inodes);
	st->dirty_pages += pwb__aread(&s->dirty_pages);
	st->writeback_pages += pwb__aread(&s->writeback_pages);
	st->dirtied_pages += pwb__aread(&s->dirtied_pages);
	st->written_pages += pwb__aread(&s->written_pages);
	st->io_submitted += pwb__aread(&s->io_submitted);
	st->io_errors += pwb__aread(&s->io_errors);
	st->bytes_written += pwb__aread(&s->bytes_written);
	st->nr_inodes += pwb__aread(&s->nr_inodes);
	st->nr_dirty_time_inodes += pwb__aread(&s->nr_dirty_time_inodes);
	st->wb_passes += pwb__aread(&s->wb_passes);
	st->periodic_passes += pwb__aread(&s->periodic_passes);
	st->background_passes += pwb__aread(&s->background_passes);
	st->sync_passes += pwb__aread(&s->sync_passes);
	st->inodes_written += pwb__aread(&s->inodes_written);
	st->device_flushes += pwb__aread(&s->device_flushes);
	st->flush_ns += pwb__aread(&s->flush_ns);
	st->io_extents += pwb__aread(&s->io_extents);
	st->rate_limited_ns += pwb__aread(&s->rate_limited_ns);
	st->log_forces += pwb__aread(&s->log_forces);
	st->lsn_held_pages += pwb__aread(&s->lsn_held_pages);
	st->latched_pages += pwb__aread(&s->latched_pages);
	st->busy_waits += pwb__aread(&s->busy_waits);
	pwb__blocked_read(&s->blk, st);
}

void pwb__wb_counters_add(struct pwb__wb_stats *dst,
			  const struct pwb__wb_stats *src)
{
	const uint64_t *from = (const uint64_t *)src;
	uint64_t *to = (uint64_t *)dst;
	size_t i;

	/* Every field is a uint64_t counter: add them word by word, so a
	 * field added to the struct is never forgotten here. */
	for (i = 0; i < sizeof(*src) / sizeof(uint64_t); i++)
		uatomic_add(&to[i], pwb__aread(&from[i]));
}

void pwb__wb_stats_read(struct pwb__wb_ctx *wb, struct pwb_stats *st)
{
	unsigned int i;

	pwb__wb_counters_read(&wb->stats, st);
	for (i = 0; i < PWB__NR_DIRTY_SLOTS; i++) {
		st->dirty_pages += pwb__aread(&wb->dslot[i].dirty_pages);
		st->dirtied_pages += pwb__aread(&wb->dslot[i].dirtied_pages);
	}
	st->write_bandwidth += pwb__aread(&wb->avg_write_bw);
}
