// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * completion.c - a counter that callers wait on until work items finish
 *
 * pwb_sync() queues one work item per context and waits once for all of
 * them: one completion with pending = number of contexts.
 */
#include "base.h"
#include "completion.h"

void pwb__completion_init(struct pwb__completion *c, unsigned int pending)
{
	pwb__mutex_init(&c->lock, PWB__LOCK_COMPLETION);
	pthread_cond_init(&c->cond, NULL);
	c->pending = pending;
	c->err = 0;
	c->log_force_ns = 0;
}

void pwb__completion_destroy(struct pwb__completion *c)
{
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

void pwb__completion_done(struct pwb__completion *c, int err)
{
	pwb__completion_done_ns(c, err, 0);
}

void pwb__completion_done_ns(struct pwb__completion *c, int err,
			     uint64_t log_force_ns)
{
	pthread_mutex_lock(&c->lock);
	if (err && !c->err)
		c->err = err;
	if (log_force_ns > c->log_force_ns)
		c->log_force_ns = log_force_ns;
	if (--c->pending == 0)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

int pwb__completion_wait(struct pwb__completion *c)
{
	int err;

	pthread_mutex_lock(&c->lock);
	while (c->pending)
		pthread_cond_wait(&c->cond, &c->lock);
	err = c->err;
	pthread_mutex_unlock(&c->lock);
	return err;
}
