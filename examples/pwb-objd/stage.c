// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * stage.c - pwb-objd's stage workers and suspended connections
 * (--threads)
 *
 * With --threads, a pool of libmicrohttpd threads on epoll serves every
 * connection, so no pool thread may wait for long: a request that would
 * (a PUT's data stage, whose pwb_fsync() waits for the device; a body
 * write that would wait for the bucket's dirty budget, room in the cache
 * or a page lock; a GET of pages not cached) suspends its connection and
 * queues a job here. The job's end resumes the connection, and
 * libmicrohttpd calls the request's handler or content reader again. An
 * inline PUT or a DELETE needs no job: its connection waits, suspended,
 * for the committer (commit.c), which resumes it. A request that replies
 * once its wait is over (a PUT, a DELETE, GET ?verify, POST /-/sync) does
 * so through req_suspend() and req_resume(), at the end of this file.
 *
 * OBJD_STAGE_WORKERS workers, so that as many jobs wait at once as 32
 * connections with a thread each would have (pwb_fsync() calls in flight
 * together share device flushes).
 *
 * libmicrohttpd forbids stopping a daemon with a connection suspended:
 * suspensions are counted, and suspend_drain() waits for the last one
 * before main() stops the daemons, and closes them to new ones (a
 * request that finds them closed waits on its own thread).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "objd.h"

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stage_work = PTHREAD_COND_INITIALIZER;
/* All stage_lock: the queue, and the flag that ends the workers. */
static struct stage_job *stage_head, **stage_tail = &stage_head;
static bool stage_stop;
/* Set by stage_start() before the first request, read by
 * stage_stop_all() after the last. */
static pthread_t *stage_threads;
static unsigned int nr_stage_threads;

static void *stage_main(void *arg)
{
	struct stage_job *job;

	(void)arg;
	pthread_mutex_lock(&stage_lock);
	for (;;) {
		while (!stage_head && !stage_stop)
			pthread_cond_wait(&stage_work, &stage_lock);
		job = stage_head;
		if (!job)
			break;	/* stopped, and the queue is empty */
		stage_head = job->next;
		if (!stage_head)
			stage_tail = &stage_head;
		pthread_mutex_unlock(&stage_lock);
		job->run(job);	/* job may be gone now */
		pthread_mutex_lock(&stage_lock);
	}
	pthread_mutex_unlock(&stage_lock);
	return NULL;
}

void stage_queue(struct stage_job *job)
{
	pthread_mutex_lock(&stage_lock);
	job->next = NULL;
	*stage_tail = job;
	stage_tail = &job->next;
	pthread_cond_signal(&stage_work);
	pthread_mutex_unlock(&stage_lock);
}

int stage_start(unsigned int n)
{
	stage_threads = calloc(n, sizeof(*stage_threads));
	if (!stage_threads)
		return ENOMEM;
	for (; nr_stage_threads < n; nr_stage_threads++) {
		int ret = pthread_create(&stage_threads[nr_stage_threads],
					 NULL, stage_main, NULL);

		if (ret)
			return ret;	/* the started ones stop at the end */
	}
	return 0;
}

void stage_stop_all(void)
{
	pthread_mutex_lock(&stage_lock);
	stage_stop = true;
	pthread_cond_broadcast(&stage_work);
	pthread_mutex_unlock(&stage_lock);
	for (unsigned int i = 0; i < nr_stage_threads; i++)
		pthread_join(stage_threads[i], NULL);
	free(stage_threads);
	stage_threads = NULL;
	nr_stage_threads = 0;
}

static pthread_mutex_t susp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t susp_idle = PTHREAD_COND_INITIALIZER;
static unsigned int nr_susp;	/* susp_lock: connections suspended */
static bool susp_closed;	/* susp_lock: suspend_drain() began */

bool suspend_begin(struct MHD_Connection *c)
{
	bool ok;

	pthread_mutex_lock(&susp_lock);
	ok = !susp_closed;
	if (ok) {
		nr_susp++;
		MHD_suspend_connection(c);
	}
	pthread_mutex_unlock(&susp_lock);
	return ok;
}

void suspend_end(struct MHD_Connection *c)
{
	MHD_resume_connection(c);
	pthread_mutex_lock(&susp_lock);
	if (!--nr_susp)
		pthread_cond_broadcast(&susp_idle);
	pthread_mutex_unlock(&susp_lock);
}

void suspend_drain(void)
{
	pthread_mutex_lock(&susp_lock);
	susp_closed = true;
	while (nr_susp)
		pthread_cond_wait(&susp_idle, &susp_lock);
	pthread_mutex_unlock(&susp_lock);
}

bool req_suspend(struct MHD_Connection *c, struct req *p,
		 req_reply_fn on_resume)
{
	if (!opt.threads || !suspend_begin(c))
		return false;
	p->conn = c;
	p->stage = REQ_WAITING;
	p->wait_reply = on_resume;
	return true;
}

void req_stage(struct req *p, void (*run)(struct stage_job *job))
{
	p->job.run = run;
	stage_queue(&p->job);
}

void req_resume(struct req *p)
{
	p->stage = REQ_DONE;
	suspend_end(p->conn);
}

/* p->cq.on_done: the committer took the request (p->cq.ret says how). */
static void req_committed(struct commit_req *q)
{
	req_resume(q->ctx);
}

void req_commit(struct req *p, int err)
{
	struct commit_req *q = &p->cq;

	if (!err) {
		q->on_done = req_committed;
		q->ctx = p;
		err = commit_queue(q);
	}
	if (err) {
		q->ret = err;
		q->old = 0;
		req_resume(p);
	}
}
