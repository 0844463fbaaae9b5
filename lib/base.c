// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * base.c - the few functions of lib/base.h: which thread is a flusher,
 * call_rcu with signals blocked, the default clock
 *
 * Below every other file of lib/: calls nothing of libpwb's.
 */
#include "base.h"

#include <signal.h>
#include <time.h>

/* See pwb__synchronize_rcu(): only its address is used. */
char pwb__rcu_tsan_token;

PWB__TLS_FAST int pwb__flusher_idx = -1;

int pwb__flusher_ctx_idx(void)
{
	return pwb__flusher_idx;
}

/*
 * liburcu starts its call_rcu worker thread on the first call_rcu() of the
 * process, from whichever thread makes it (often an application thread
 * closing an inode), and the worker inherits that thread's signal mask.
 * The first call goes out with every signal blocked, so the worker, like
 * the flushers, never runs the application's handlers. (Starting the
 * worker at open instead would put it in processes that then fork, where
 * the child has the worker's state but not its thread.)
 */
void pwb__call_rcu(struct rcu_head *head, void (*fn)(struct rcu_head *))
{
	static int started;
	sigset_t all, old;

	if (caa_likely(pwb__aread(&started))) {
		call_rcu(head, fn);
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	call_rcu(head, fn);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pwb__aset(&started, 1);
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
