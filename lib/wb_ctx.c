// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wb_ctx.c - writeback contexts and the flusher threads that serve them
 *
 * A context is the kernel's struct bdi_writeback: four inode lists under one
 * lock and a queue of work items. Flusher threads are apart from the lists
 * (as the LSFMM 2025 discussion asked): flusher f serves every context whose
 * index modulo nr_flushers is f, so one thread per context, one thread for
 * all (the legacy behaviour with one context), or anything between.
 *
 * A flusher sleeps until kicked (work queued, background kick) or until the
 * periodic interval (dirty_writeback_ms, real time) passes; then, for each
 * context it serves, it runs queued work first, then the periodic and
 * background checks, as wb_do_writeback() does in the kernel.
 *
 * Parking: a re-shard asks every flusher to stop between work items, with
 * no write in flight (each drains its contexts' backends), and to wait
 * until resumed. While parked, no flusher touches any context, so the
 * re-shard may move inodes between contexts and replace the array.
 */
#include "base.h"
#include "xarray.h"
#include "completion.h"
#include "io.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "inode.h"
#include "writeback.h"
#include "page-owner.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pwb__wb_ctx_init(struct pwb__wb_ctx *wb, struct pwb_bdi *bdi,
		     unsigned int idx)
{
	int ret;

	memset(wb, 0, sizeof(*wb));
	wb->bdi = bdi;
	wb->idx = idx;
	pwb__mutex_init(&wb->list_lock, PWB__LOCK_LIST);
	pwb__mutex_init(&wb->work_lock, PWB__LOCK_WORK);
	pthread_cond_init(&wb->sync_cond, NULL);
	CDS_INIT_LIST_HEAD(&wb->b_dirty);
	CDS_INIT_LIST_HEAD(&wb->b_io);
	CDS_INIT_LIST_HEAD(&wb->b_more_io);
	CDS_INIT_LIST_HEAD(&wb->b_dirty_time);
	CDS_INIT_LIST_HEAD(&wb->work_list);
	wb->lists = wb;
	wb->claim_batch = PWB__POLICY_BATCH_DEFAULT;
	wb->io_cache_max = pwb__io_cache_max(bdi);
	pwb__xa_init(&wb->io_tree);
	/* The kernel's initial estimate: 100 MiB/s. */
	wb->avg_write_bw = 100ull << 20;
	wb->last_old_flush = pwb__now(bdi);
	wb->bw_stamp = wb->last_old_flush;

	if (bdi->io->ctx_init) {
		ret = bdi->io->ctx_init(wb, &wb->io_state);
		if (ret) {
			pthread_cond_destroy(&wb->sync_cond);
			pthread_mutex_destroy(&wb->work_lock);
			pthread_mutex_destroy(&wb->list_lock);
			return ret;
		}
	}
	return 0;
}

void pwb__wb_ctx_destroy(struct pwb__wb_ctx *wb)
{
	if (wb->bdi->io->ctx_fini)
		wb->bdi->io->ctx_fini(wb->io_state);
	pwb__io_cache_drain(wb);
	pwb__xa_destroy(&wb->io_tree);
	pthread_cond_destroy(&wb->sync_cond);
	pthread_mutex_destroy(&wb->work_lock);
	pthread_mutex_destroy(&wb->list_lock);
}

static void finish_work(struct pwb__wb_work *work, int err)
{
	/* Once done is signalled the waiter may free @work: read first. */
	struct pwb__completion *done = work->done;
	bool auto_free = work->auto_free;

	if (done)
		pwb__completion_done_ns(done, err, work->log_force_ns);
	if (auto_free)
		free(work);
}

void pwb__wb_ctx_retire(struct pwb__wb_ctx *wb)
{
	struct pwb__wb_work *work, *tmp;
	CDS_LIST_HEAD(drained);

	pthread_mutex_lock(&wb->work_lock);
	wb->retired = true;
	cds_list_splice(&wb->work_list, &drained);
	CDS_INIT_LIST_HEAD(&wb->work_list);
	pthread_mutex_unlock(&wb->work_lock);
	cds_list_for_each_entry_safe(work, tmp, &drained, list)
		finish_work(work, -EAGAIN);
}

/* The flusher serving @wb now. Slot 0 always runs. */
static struct pwb__flusher *serving_flusher(struct pwb__wb_ctx *wb)
{
	struct pwb_bdi *bdi = wb->bdi;
	unsigned int nr = pwb__aread(&bdi->nr_flushers);

	return PWB__RCU_DEREF(bdi->flushers[nr ? wb->idx % nr : 0]);
}

void pwb__flusher_kick(struct pwb__flusher *fl)
{
	pthread_mutex_lock(&fl->lock);
	fl->kicked = true;
	pthread_cond_signal(&fl->cond);
	pthread_mutex_unlock(&fl->lock);
}

/* Service class of queued work: integrity first, then background (and
 * "write everything"), then periodic. */
static int work_rank(const struct pwb__wb_work *work)
{
	if (work->sync_mode == PWB__SYNC_ALL)
		return 0;
	return work->reason == PWB_WB_PERIODIC ? 2 : 1;
}

void pwb__wb_queue_work(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	struct cds_list_head *pos = &wb->work_list;
	struct pwb__wb_work *w;

	work->queued_at = pwb__now(wb->bdi);
	pthread_mutex_lock(&wb->work_lock);
	if (wb->retired) {
		pthread_mutex_unlock(&wb->work_lock);
		finish_work(work, -EAGAIN);
		return;
	}
	/* Sorted by class, arrival order within a class. */
	cds_list_for_each_entry(w, &wb->work_list, list) {
		if (work_rank(w) > work_rank(work)) {
			pos = &w->list;
			break;
		}
	}
	cds_list_add_tail(&work->list, pos);
	pthread_mutex_unlock(&wb->work_lock);
	/*
	 * A kick that reaches a flusher being retired by a re-shard is not
	 * lost: every flusher rescans all its contexts when resumed.
	 */
	pwb__flusher_kick(serving_flusher(wb));
}

void pwb__wb_kick_background(struct pwb__wb_ctx *wb)
{
	pthread_mutex_lock(&wb->work_lock);
	wb->bg_kick = true;
	pthread_mutex_unlock(&wb->work_lock);
	pwb__flusher_kick(serving_flusher(wb));
}

struct pwb__wb_work *pwb__wb_next_work_locked(struct pwb__wb_ctx *wb,
					      uint64_t now)
{
	struct pwb__wb_work *w, *oldest = NULL;

	pwb__lockdep_assert_held(&wb->work_lock);

	if (cds_list_empty(&wb->work_list))
		return NULL;
	/* No class starves: work that waited too long goes first. */
	cds_list_for_each_entry(w, &wb->work_list, list)
		if (now - w->queued_at > PWB__WORK_MAX_WAIT_NS &&
		    (!oldest || w->queued_at < oldest->queued_at))
			oldest = w;
	return oldest ? oldest : cds_list_first_entry(&wb->work_list,
						       struct pwb__wb_work,
						       list);
}

/* Park here if a re-shard asked. Returns true if the flusher parked. */
static bool park_point(struct pwb__flusher *fl)
{
	struct pwb_bdi *bdi = fl->bdi;
	bool parked = false;

	pthread_mutex_lock(&bdi->park_lock);
	if (bdi->park_req) {
		struct pwb__wb_ctx_array *arr = PWB__RCU_DEREF(bdi->ctxs);
		unsigned int nr = pwb__aread(&bdi->nr_flushers), c;

		/* Nothing of ours may be in flight while inodes move. A
		 * fresh flusher has nothing and must not touch the rings of
		 * contexts that others served. */
		pthread_mutex_unlock(&bdi->park_lock);
		for (c = fl->idx; !fl->fresh && c < arr->nr; c += nr)
			bdi->io->wait(arr->ctx[c]->io_state);
		pthread_mutex_lock(&bdi->park_lock);
		bdi->nr_parked++;
		pthread_cond_broadcast(&bdi->park_cond);
		while (bdi->park_req)
			pthread_cond_wait(&bdi->park_cond, &bdi->park_lock);
		bdi->nr_parked--;
		parked = true;
	}
	pthread_mutex_unlock(&bdi->park_lock);
	fl->fresh = false;
	return parked;
}

static bool park_requested(struct pwb_bdi *bdi)
{
	return pwb__aread(&bdi->park_req);
}

/*
 * Run @wb's queued work, then its background and periodic checks (in that
 * order). A steady stream of queued work does not starve the checks: they
 * also run after every PWB__WORK_BATCH items. Returns false if a park
 * request cut it short.
 */
static bool serve_ctx(struct pwb__flusher *fl, struct pwb__wb_ctx *wb)
{
	unsigned int served = 0;

	pwb__set_flusher_ctx((int)wb->idx);
	for (;;) {
		struct pwb__wb_work *work;
		bool bg, empty;

		if (park_requested(fl->bdi))
			return false;
		pthread_mutex_lock(&wb->work_lock);
		empty = cds_list_empty(&wb->work_list);
		if (!empty && served < PWB__WORK_BATCH) {
			work = pwb__wb_next_work_locked(wb,
							pwb__now(wb->bdi));
			cds_list_del(&work->list);
			pthread_mutex_unlock(&wb->work_lock);
			finish_work(work, pwb__wb_do_work(wb, work));
			served++;
			continue;
		}
		bg = wb->bg_kick;
		wb->bg_kick = false;
		pthread_mutex_unlock(&wb->work_lock);

		if (bg)
			pwb__wb_check_background_flush(wb);
		pwb__wb_check_old_data_flush(wb);
		/* Clean pages of this context's inodes, after its passes. */
		if (wb->bdi->page_owner)
			wb->bdi->page_owner->reclaim(wb->bdi, wb->idx);
		if (empty)
			return true;
		served = 0;
	}
}

static void *flusher_main(void *arg)
{
	struct pwb__flusher *fl = arg;
	struct pwb_bdi *bdi = fl->bdi;

	for (;;) {
		struct pwb__wb_ctx_array *arr;
		unsigned int nr, c;
		bool parked;

		parked = park_point(fl);

		pthread_mutex_lock(&fl->lock);
		if (parked)
			fl->kicked = true;	/* rescan everything after */
		if (!fl->kicked && !fl->stop && !park_requested(bdi)) {
			if (bdi->writeback_interval_ns) {
				struct timespec ts;
				uint64_t t = pwb__clock_monotonic(NULL) +
					     bdi->writeback_interval_ns;

				ts.tv_sec = (time_t)(t / PWB__NSEC_PER_SEC);
				ts.tv_nsec = (long)(t % PWB__NSEC_PER_SEC);
				pthread_cond_timedwait(&fl->cond, &fl->lock,
						       &ts);
			} else {
				pthread_cond_wait(&fl->cond, &fl->lock);
			}
		}
		if (fl->stop) {
			pthread_mutex_unlock(&fl->lock);
			break;
		}
		fl->kicked = false;
		pthread_mutex_unlock(&fl->lock);

		/* The array only changes while every flusher is parked. */
		arr = PWB__RCU_DEREF(bdi->ctxs);
		nr = pwb__aread(&bdi->nr_flushers);
		/* A flusher a re-shard is about to stop serves nothing. */
		if (fl->idx >= nr)
			continue;
		for (c = fl->idx; c < arr->nr; c += nr) {
			if (!serve_ctx(fl, arr->ctx[c])) {
				pwb__flusher_kick(fl);
				break;
			}
		}
		pwb__set_flusher_ctx(-1);
	}
	pwb__set_flusher_ctx(-1);
	return NULL;
}

int pwb__flusher_start(struct pwb_bdi *bdi, unsigned int idx)
{
	struct pwb__flusher *fl = bdi->flushers[idx];
	pthread_condattr_t attr;
	sigset_t all, old;
	int ret;

	if (!fl) {
		fl = calloc(1, sizeof(*fl));
		if (!fl)
			return pwb__err(-ENOMEM, "out of memory");
		fl->bdi = bdi;
		fl->idx = idx;
		pwb__mutex_init(&fl->lock, PWB__LOCK_FLUSHER);
		/* Timed waits measure the real periodic interval. */
		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&fl->cond, &attr);
		pthread_condattr_destroy(&attr);
		/* Published whole: kickers read the slot without a lock. */
		PWB__RCU_ASSIGN(bdi->flushers[idx], fl);
	}
	pthread_mutex_lock(&fl->lock);
	fl->stop = false;
	fl->kicked = true;	/* look at its contexts once at start */
	fl->fresh = true;
	pthread_mutex_unlock(&fl->lock);
	/*
	 * A flusher starts with every signal blocked (a new thread inherits
	 * its creator's mask): the application's handlers run on its own
	 * threads, and no EINTR reaches a write or a device flush here.
	 * Faults such as SIGSEGV are still delivered: they cannot be
	 * blocked.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&fl->thread, NULL, flusher_main, fl);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return pwb__err(-ret, "cannot start flusher thread %u: %s",
				idx, strerror(ret));
	fl->started = true;
	return 0;
}

void pwb__flusher_stop(struct pwb_bdi *bdi, unsigned int idx)
{
	struct pwb__flusher *fl = bdi->flushers[idx];

	if (!fl || !fl->started)
		return;
	pthread_mutex_lock(&fl->lock);
	fl->stop = true;
	pthread_cond_signal(&fl->cond);
	pthread_mutex_unlock(&fl->lock);
	pthread_join(fl->thread, NULL);
	fl->started = false;
}

void pwb__flushers_park(struct pwb_bdi *bdi)
{
	unsigned int i, nr = pwb__aread(&bdi->nr_flushers);

	pthread_mutex_lock(&bdi->park_lock);
	pwb__aset(&bdi->park_req, true);
	pthread_mutex_unlock(&bdi->park_lock);
	for (i = 0; i < nr; i++)
		pwb__flusher_kick(bdi->flushers[i]);
	pthread_mutex_lock(&bdi->park_lock);
	while (bdi->nr_parked < nr)
		pthread_cond_wait(&bdi->park_cond, &bdi->park_lock);
	pthread_mutex_unlock(&bdi->park_lock);
}

void pwb__flushers_resume(struct pwb_bdi *bdi)
{
	pthread_mutex_lock(&bdi->park_lock);
	pwb__aset(&bdi->park_req, false);
	pthread_cond_broadcast(&bdi->park_cond);
	pthread_mutex_unlock(&bdi->park_lock);
}

static void set_ordered_locked(struct pwb__wb_ctx *wb, bool ordered)
{
	struct pwb_inode *inode;

	pwb__lockdep_assert_held(&wb->list_lock);

	if (wb->ordered == ordered)
		return;
	wb->ordered = ordered;
	cds_list_for_each_entry(inode, &wb->b_io, io_list) {
		if (ordered)
			inode->in_tree =
				!pwb__xa_insert(&wb->io_tree, &inode->xa);
		else if (inode->in_tree)
			pwb__xa_erase(&wb->io_tree, &inode->xa);
		if (!ordered)
			inode->in_tree = false;
	}
}

void pwb__ctxs_apply_policy(struct pwb__wb_ctx_array *arr,
			    const struct pwb__policy *pol)
{
	bool shared = pol->flags & PWB_POLICY_F_SHARED_LIST;
	unsigned int i;

	for (i = 0; i < arr->nr; i++) {
		struct pwb__wb_ctx *wb = arr->ctx[i];

		pwb__aset(&wb->lists, shared ? arr->ctx[0] : wb);
		pwb__aset(&wb->shared, shared);
		pwb__aset(&wb->claim_batch,
			   pol->batch ? pol->batch : PWB__POLICY_BATCH_DEFAULT);
		pthread_mutex_lock(&wb->list_lock);
		set_ordered_locked(wb, pol->flags & PWB_POLICY_F_ORDERED);
		pthread_mutex_unlock(&wb->list_lock);
	}
}

bool pwb__wb_work_pending(struct pwb__wb_ctx *wb)
{
	bool pending;

	pthread_mutex_lock(&wb->work_lock);
	pending = !cds_list_empty(&wb->work_list);
	pthread_mutex_unlock(&wb->work_lock);
	return pending;
}

struct pwb__wb_ctx_array *pwb__ctx_array_alloc(struct pwb_bdi *bdi,
					       struct pwb__wb_ctx_array *old,
					       unsigned int nr, int *err)
{
	struct pwb__wb_ctx_array *arr;
	unsigned int i, keep = old ? PWB__MIN(old->nr, nr) : 0;
	int ret;

	arr = calloc(1, sizeof(*arr) + nr * sizeof(arr->ctx[0]));
	if (!arr) {
		*err = pwb__err(-ENOMEM, "out of memory");
		return NULL;
	}
	arr->nr = nr;
	for (i = 0; i < keep; i++)
		arr->ctx[i] = old->ctx[i];
	for (i = keep; i < nr; i++) {
		/* Aligned: its dirty slots each own a cache line. */
		arr->ctx[i] = aligned_alloc(_Alignof(struct pwb__wb_ctx),
					    sizeof(*arr->ctx[i]));
		ret = arr->ctx[i] ? pwb__wb_ctx_init(arr->ctx[i], bdi, i)
				  : pwb__err(-ENOMEM, "out of memory");
		if (ret) {
			free(arr->ctx[i]);
			while (i-- > keep) {
				pwb__wb_ctx_destroy(arr->ctx[i]);
				free(arr->ctx[i]);
			}
			free(arr);
			*err = ret;	/* e.g. the backend's ctx_init */
			return NULL;
		}
	}
	return arr;
}
