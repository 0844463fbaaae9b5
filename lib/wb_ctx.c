// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * wb_ctx.c - writeback contexts and their flusher threads
 *
 * A context is the kernel's struct bdi_writeback: four inode lists under one
 * lock, a queue of work items and one flusher thread that runs them. The
 * flusher sleeps on work_cond until work arrives, a background kick comes,
 * or the periodic interval (dirty_writeback_ms, real time) passes; then it
 * runs queued work first, then the periodic and background checks, as
 * wb_do_writeback() does in the kernel.
 */
#include "pwb-internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static __thread int pwb__flusher_idx = -1;

bool pwb__in_flusher(void)
{
	return pwb__flusher_idx >= 0;
}

int pwb__flusher_ctx_idx(void)
{
	return pwb__flusher_idx;
}

void pwb__set_flusher_ctx(int idx)
{
	pwb__flusher_idx = idx;
}

uint64_t pwb__clock_monotonic(void *unused)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * PWB__NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

int pwb__wb_ctx_init(struct pwb__wb_ctx *wb, struct pwb_bdi *bdi,
		     unsigned int idx)
{
	pthread_condattr_t attr;
	int ret;

	memset(wb, 0, sizeof(*wb));
	wb->bdi = bdi;
	wb->idx = idx;
	pthread_mutex_init(&wb->list_lock, NULL);
	pthread_mutex_init(&wb->work_lock, NULL);
	pthread_cond_init(&wb->sync_cond, NULL);
	/* Timed waits measure the real periodic interval. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&wb->work_cond, &attr);
	pthread_condattr_destroy(&attr);
	CDS_INIT_LIST_HEAD(&wb->b_dirty);
	CDS_INIT_LIST_HEAD(&wb->b_io);
	CDS_INIT_LIST_HEAD(&wb->b_more_io);
	CDS_INIT_LIST_HEAD(&wb->b_dirty_time);
	CDS_INIT_LIST_HEAD(&wb->work_list);
	/* The kernel's initial estimate: 100 MiB/s. */
	wb->avg_write_bw = 100ull << 20;
	wb->last_old_flush = pwb__now(bdi);
	wb->bw_stamp = wb->last_old_flush;

	if (bdi->io->ctx_init) {
		ret = bdi->io->ctx_init(wb, &wb->io_state);
		if (ret)
			return ret;
	}
	return 0;
}

void pwb__wb_ctx_destroy(struct pwb__wb_ctx *wb)
{
	if (wb->bdi->io->ctx_fini)
		wb->bdi->io->ctx_fini(wb->io_state);
	pthread_cond_destroy(&wb->work_cond);
	pthread_cond_destroy(&wb->sync_cond);
	pthread_mutex_destroy(&wb->work_lock);
	pthread_mutex_destroy(&wb->list_lock);
}

static void finish_work(struct pwb__wb_work *work, int err)
{
	if (work->done)
		pwb__completion_done(work->done, err);
	if (work->auto_free)
		free(work);
}

static void *flusher_main(void *arg)
{
	struct pwb__wb_ctx *wb = arg;
	struct pwb_bdi *bdi = wb->bdi;

	pwb__set_flusher_ctx((int)wb->idx);
	pthread_mutex_lock(&wb->work_lock);
	for (;;) {
		struct pwb__wb_work *work;
		bool bg;

		if (!cds_list_empty(&wb->work_list)) {
			work = cds_list_first_entry(&wb->work_list,
						    struct pwb__wb_work, list);
			cds_list_del(&work->list);
			pthread_mutex_unlock(&wb->work_lock);
			finish_work(work, pwb__wb_do_work(wb, work));
			pthread_mutex_lock(&wb->work_lock);
			continue;
		}
		if (wb->stop)
			break;
		bg = wb->bg_kick;
		wb->bg_kick = false;
		pthread_mutex_unlock(&wb->work_lock);

		pwb__wb_check_old_data_flush(wb);
		if (bg)
			pwb__wb_check_background_flush(wb);

		pthread_mutex_lock(&wb->work_lock);
		if (!cds_list_empty(&wb->work_list) || wb->stop || wb->bg_kick)
			continue;
		if (bdi->writeback_interval_ns) {
			struct timespec ts;
			uint64_t t = pwb__clock_monotonic(NULL) +
				     bdi->writeback_interval_ns;

			ts.tv_sec = (time_t)(t / PWB__NSEC_PER_SEC);
			ts.tv_nsec = (long)(t % PWB__NSEC_PER_SEC);
			pthread_cond_timedwait(&wb->work_cond, &wb->work_lock,
					       &ts);
		} else {
			pthread_cond_wait(&wb->work_cond, &wb->work_lock);
		}
	}
	pthread_mutex_unlock(&wb->work_lock);
	pwb__set_flusher_ctx(-1);
	return NULL;
}

int pwb__wb_ctx_start(struct pwb__wb_ctx *wb)
{
	int ret = pthread_create(&wb->thread, NULL, flusher_main, wb);

	if (ret)
		return pwb__err(-ret, "cannot start flusher thread %u: %s",
				wb->idx, strerror(ret));
	wb->thread_started = true;
	return 0;
}

void pwb__wb_ctx_stop(struct pwb__wb_ctx *wb)
{
	if (!wb->thread_started)
		return;
	pthread_mutex_lock(&wb->work_lock);
	wb->stop = true;
	pthread_cond_signal(&wb->work_cond);
	pthread_mutex_unlock(&wb->work_lock);
	pthread_join(wb->thread, NULL);
	wb->thread_started = false;
}

void pwb__wb_queue_work(struct pwb__wb_ctx *wb, struct pwb__wb_work *work)
{
	struct cds_list_head *pos = &wb->work_list;

	pthread_mutex_lock(&wb->work_lock);
	/* Integrity work goes ahead of other work, in arrival order. */
	if (work->sync_mode == PWB__SYNC_ALL) {
		struct pwb__wb_work *w;

		cds_list_for_each_entry(w, &wb->work_list, list) {
			if (w->sync_mode != PWB__SYNC_ALL) {
				pos = &w->list;
				break;
			}
		}
	}
	cds_list_add_tail(&work->list, pos);
	pthread_cond_signal(&wb->work_cond);
	pthread_mutex_unlock(&wb->work_lock);
}

void pwb__wb_kick_background(struct pwb__wb_ctx *wb)
{
	pthread_mutex_lock(&wb->work_lock);
	wb->bg_kick = true;
	pthread_cond_signal(&wb->work_cond);
	pthread_mutex_unlock(&wb->work_lock);
}

void pwb__wb_stats_read(struct pwb__wb_ctx *wb, struct pwb_stats *st)
{
	struct pwb__wb_stats *s = &wb->stats;

	st->nr_dirty_inodes += uatomic_read(&s->nr_dirty_inodes);
	st->dirty_pages += uatomic_read(&s->dirty_pages);
	st->writeback_pages += uatomic_read(&s->writeback_pages);
	st->dirtied_pages += uatomic_read(&s->dirtied_pages);
	st->written_pages += uatomic_read(&s->written_pages);
	st->io_submitted += uatomic_read(&s->io_submitted);
	st->io_errors += uatomic_read(&s->io_errors);
	st->bytes_written += uatomic_read(&s->bytes_written);
	st->nr_inodes += uatomic_read(&s->nr_inodes);
	st->nr_dirty_time_inodes += uatomic_read(&s->nr_dirty_time_inodes);
	st->wb_passes += uatomic_read(&s->wb_passes);
	st->periodic_passes += uatomic_read(&s->periodic_passes);
	st->background_passes += uatomic_read(&s->background_passes);
	st->sync_passes += uatomic_read(&s->sync_passes);
	st->inodes_written += uatomic_read(&s->inodes_written);
	st->device_flushes += uatomic_read(&s->device_flushes);
	st->flush_ns += uatomic_read(&s->flush_ns);
	st->write_bandwidth += uatomic_read(&wb->avg_write_bw);
}
