// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * bdi-state.c - the running bdi's state that the engine asks for: the
 * starting context count, flusher counts, dirty-page totals, flush epochs
 * of finished writes, the log's durable LSN, a snapshot of the open inodes
 *
 * Open and close (bdi.c) sit above the engine and call down into it; the
 * engine's files (writeback.c, io.c, inode.c, reshard.c, autotune.c, ...)
 * call back only into this file, which calls nothing above the contexts'
 * counters.
 */
#include "base.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "inode.h"

#include <stdlib.h>
#include <string.h>

/*
 * The rotational flag alone says little: virtio and many RAID or cloud
 * disks report rotational=1 and take gigabytes a second. Telling a slow
 * disk from them at open would take a measurement, and an honest one is
 * not cheap: reads of a regular file's holes never reach the device, and
 * a write probe would change the application's device. So the start is 2
 * everywhere, and the tuner, which prefers fewer contexts unless more are
 * measurably faster, goes down to 1 where parallel writeback does not pay
 * (it cost a hard disk 15% in the kernel series) and up where it does.
 */
#define AUTO_START_NR_WB_CTX 2u

unsigned int pwb__auto_nr_wb_ctx(const struct pwb_bdi *bdi)
{
	(void)bdi;
	return PWB__MIN(AUTO_START_NR_WB_CTX, (unsigned int)PWB_MAX_WB_CTX);
}

/* Flusher threads for @nr_ctx contexts. */
unsigned int pwb__nr_flushers_for(const struct pwb_bdi *bdi,
				  unsigned int nr_ctx)
{
	unsigned int f = bdi->cfg.nr_flushers;

	return f ? PWB__MIN(f, nr_ctx) : nr_ctx;
}

void pwb__bdi_log_durable_raise(struct pwb_bdi *bdi, uint64_t lsn)
{
	uint64_t cur = pwb__aread(&bdi->log_durable);

	/* A monotonic maximum: a report older than one already made is no
	 * news, and must not lower what writeback relies on. */
	while (cur < lsn) {
		uint64_t prev = uatomic_cmpxchg(&bdi->log_durable, cur, lsn);

		if (prev == cur)
			break;
		cur = prev;
	}
}

uint64_t pwb__bdi_dirty_pages_rcu(struct pwb_bdi *bdi)
{
	struct pwb__wb_ctx_array *arr = PWB__RCU_DEREF(bdi->ctxs);
	uint64_t sum = 0;
	unsigned int i;

	for (i = 0; i < arr->nr; i++)
		sum += pwb__wb_dirty_pages(arr->ctx[i]);
	return sum;
}

uint64_t pwb__bdi_held_pages_rcu(struct pwb_bdi *bdi)
{
	struct pwb__wb_ctx_array *arr = PWB__RCU_DEREF(bdi->ctxs);
	uint64_t sum = 0;
	unsigned int i;

	for (i = 0; i < arr->nr; i++)
		sum += pwb__wb_dirty_pages(arr->ctx[i]) +
		       pwb__aread(&arr->ctx[i]->stats.writeback_pages);
	return sum;
}

uint64_t pwb__bdi_writeback_pages_rcu(struct pwb_bdi *bdi)
{
	struct pwb__wb_ctx_array *arr = PWB__RCU_DEREF(bdi->ctxs);
	uint64_t sum = 0;
	unsigned int i;

	for (i = 0; i < arr->nr; i++)
		sum += pwb__aread(&arr->ctx[i]->stats.writeback_pages);
	return sum;
}

uint64_t pwb__bdi_dirty_pages(struct pwb_bdi *bdi)
{
	uint64_t sum;

	rcu_read_lock();
	sum = pwb__bdi_dirty_pages_rcu(bdi);
	pwb__rcu_read_unlock();
	return sum;
}

void pwb__bdi_write_done_locked(struct pwb_bdi *bdi, struct pwb_inode *inode)
{
	uint64_t e, old, prev;

	pwb__lockdep_assert_held(&inode->lock);

	/* The write finished (its syscall or completion returned) before
	 * the epoch is read: a flush that has not yet advanced it will. A
	 * full fence; GCC makes it a locked no-op on the stack on x86,
	 * cheaper there than the mfence of liburcu's cmm_smp_mb(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	e = pwb__aread(&bdi->write_epoch);
	inode->last_write_epoch = e;
	/* Raise written_epoch to e; never lower it (a thread that read the
	 * epoch before a flush advanced it may get here after one that read
	 * it after). */
	old = pwb__aread(&bdi->written_epoch);
	while (old < e) {
		prev = uatomic_cmpxchg(&bdi->written_epoch, old, e);
		if (prev == old)
			break;
		old = prev;
	}
}

/* Collect every open inode (the table cannot be walked under RCU while
 * doing things that sleep). */
struct pwb_inode **pwb__bdi_collect_inodes(struct pwb_bdi *bdi, size_t *nr)
{
	struct pwb_inode **v = NULL;
	struct cds_lfht_node *node;
	struct cds_lfht_iter iter;
	size_t n = 0, cap = 0;

	rcu_read_lock();
	/*
	 * Not cds_lfht_for_each_entry(): at the end of the table it takes
	 * caa_container_of() of a NULL node, pointer arithmetic on NULL that
	 * UBSan rejects. Convert only nodes that exist.
	 */
	for (cds_lfht_first(bdi->inodes, &iter);
	     (node = cds_lfht_iter_get_node(&iter)) != NULL;
	     cds_lfht_next(bdi->inodes, &iter)) {
		struct pwb_inode *inode =
			caa_container_of(node, struct pwb_inode, hnode);

		PWB__TSAN_ACQUIRE(node);	/* pairs with pwb_inode_open() */
		if (n == cap) {
			struct pwb_inode **nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				break;
			v = nv;
		}
		v[n++] = inode;
	}
	pwb__rcu_read_unlock();
	*nr = n;
	return v;
}

unsigned int pwb__bdi_nr_wb_ctx(const struct pwb_bdi *bdi)
{
	unsigned int nr = 0;

	if (pwb__bdi_enter((struct pwb_bdi *)bdi, PWB__HOLD_RCU,
			   "pwb_bdi_nr_wb_ctx"))
		return 0;
	nr = PWB__RCU_DEREF(bdi->ctxs)->nr;
	pwb__bdi_exit((struct pwb_bdi *)bdi, PWB__HOLD_RCU);
	return nr;
}

void pwb__bdi_wb_counters(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i;

	memset(st, 0, sizeof(*st));
	rcu_read_lock();
	arr = PWB__RCU_DEREF(bdi->ctxs);
	for (i = 0; i < arr->nr; i++)
		pwb__wb_stats_read(arr->ctx[i], st);
	/* What contexts retired by re-shards had done. */
	pwb__wb_counters_read(&bdi->retired_stats, st);
	pwb__rcu_read_unlock();
}
