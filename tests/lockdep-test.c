// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * lockdep-test.c - the lock-order checker (./configure --enable-lockdep)
 * catches what it must, and only that.
 *
 * Each case runs in a forked child that takes ranked mutexes the way lib/
 * does (this file is compiled as a library source, so its pthread calls
 * are the checking macros) and either exits 0 without a word or, for a
 * broken order, must die of SIGABRT with a report naming both mutexes and
 * their ranks. Exits 77 (skipped) in a build without --enable-lockdep.
 */
#define PWB_LIB_SOURCE 1
#include "pwb-internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PWB_LOCKDEP

int main(void)
{
	printf("SKIP: built without ./configure --enable-lockdep: no "
	       "lock-order checker to test\n");
	return 77;
}

#else

static pthread_mutex_t list_a, list_b, ino;
static pthread_cond_t cond;

static void setup(void)
{
	pwb__mutex_init(&list_a, PWB__LOCK_LIST);
	pwb__mutex_init(&list_b, PWB__LOCK_LIST);
	pwb__mutex_init(&ino, PWB__LOCK_INODE);
	pthread_cond_init(&cond, NULL);
}

/* A wait that times out at once. */
static void wait_briefly(pthread_mutex_t *m)
{
	struct timespec ts = { 0, 0 };

	pthread_cond_timedwait(&cond, m, &ts);
}

/* The order as documented: list_lock, then inode->lock. */
static void ordered(void)
{
	pthread_mutex_lock(&list_a);
	pthread_mutex_lock(&ino);
	pthread_mutex_unlock(&ino);
	pthread_mutex_unlock(&list_a);
}

static void inverted(void)
{
	pthread_mutex_lock(&ino);
	pthread_mutex_lock(&list_a);
}

/* A wait gives list_a back and takes it again: fine alone... */
static void wait_then_inner(void)
{
	pthread_mutex_lock(&list_a);
	wait_briefly(&list_a);
	pthread_mutex_lock(&ino);
	pthread_mutex_unlock(&ino);
	pthread_mutex_unlock(&list_a);
}

/* ...but not while a higher rank stays held across the wait (the mistake
 * pwb__inode_close() avoids by dropping inode->lock first). */
static void wait_under_inner(void)
{
	pthread_mutex_lock(&list_a);
	pthread_mutex_lock(&ino);
	wait_briefly(&list_a);
}

static void same_rank(void)
{
	pthread_mutex_lock(&list_a);
	pthread_mutex_lock(&list_b);
}

static void same_rank_nested(void)
{
	pthread_mutex_lock(&list_a);
	pwb__mutex_lock_nested(&list_b);
	pthread_mutex_unlock(&list_b);
	pthread_mutex_unlock(&list_a);
}

static void recursive(void)
{
	pthread_mutex_lock(&list_a);
	pthread_mutex_lock(&list_a);
}

static void unranked(void)
{
	static pthread_mutex_t m;

	pthread_mutex_init(&m, NULL);
	pthread_mutex_lock(&m);
}

static void destroyed(void)
{
	pthread_mutex_destroy(&list_b);
	pthread_mutex_lock(&list_b);
}

static void not_held(void)
{
	pthread_mutex_unlock(&list_a);
}

/* A *_locked helper's first statement, with its lock held... */
static void assert_held(void)
{
	pthread_mutex_lock(&list_a);
	pthread_mutex_lock(&ino);
	pwb__lockdep_assert_held(&list_a);
	pwb__lockdep_assert_held(&ino);
	pthread_mutex_unlock(&ino);
	pthread_mutex_unlock(&list_a);
}

/* ...and without: another lock held, or this one given back by a wait. */
static void assert_not_held(void)
{
	pthread_mutex_lock(&list_a);
	pwb__lockdep_assert_held(&ino);
}

static void assert_after_unlock(void)
{
	pthread_mutex_lock(&ino);
	pthread_mutex_unlock(&ino);
	pwb__lockdep_assert_held(&ino);
}

struct test_case {
	const char *name;
	void (*fn)(void);
	bool aborts;
	const char *needle[3];	/* in the report, when it aborts */
};

static char list_name[64], ino_name[64];

static const struct test_case cases[] = {
	{ "list_lock then inode->lock", ordered, false, { NULL } },
	{ "inode->lock then list_lock", inverted, true,
	  { "lock order violation", list_name, ino_name } },
	{ "wait on list_lock, then inode->lock", wait_then_inner, false,
	  { NULL } },
	{ "wait on list_lock holding inode->lock", wait_under_inner, true,
	  { "lock order violation", list_name, ino_name } },
	{ "two list_locks", same_rank, true,
	  { "lock order violation", list_name, "lockdep-test.c:" } },
	{ "two list_locks, the second _nested", same_rank_nested, false,
	  { NULL } },
	{ "list_lock twice", recursive, true,
	  { "is already held", list_name, NULL } },
	{ "a mutex without a rank", unranked, true,
	  { "give it a rank", "lockdep-test.c:", NULL } },
	{ "a destroyed mutex", destroyed, true, { "has no rank", NULL } },
	{ "unlock of a mutex not held", not_held, true,
	  { "does not hold it", NULL } },
	{ "assert held, held", assert_held, false, { NULL } },
	{ "assert held, another lock held", assert_not_held, true,
	  { "must be held at", ino_name, "lockdep-test.c:" } },
	{ "assert held after its unlock", assert_after_unlock, true,
	  { "does not hold it", ino_name, "lockdep-test.c:" } },
};

/* Run @tc in a child; return true if it behaved. */
static bool run_case(const struct test_case *tc)
{
	char out[8192];
	size_t len = 0;
	int fds[2], status;
	ssize_t n;
	pid_t pid;
	bool ok;

	if (pipe(fds)) {
		perror("pipe");
		return false;
	}
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return false;
	}
	if (pid == 0) {
		struct rlimit no_core = { 0, 0 };

		setrlimit(RLIMIT_CORE, &no_core);
		dup2(fds[1], 2);
		close(fds[0]);
		close(fds[1]);
		setup();
		tc->fn();
		_exit(0);
	}
	close(fds[1]);
	while (len < sizeof(out) - 1 &&
	       (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);

	if (tc->aborts) {
		unsigned int i;

		ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
		     !strncmp(out, "pwb lockdep: ", 13);
		for (i = 0; ok && i < 3 && tc->needle[i]; i++)
			ok = strstr(out, tc->needle[i]) != NULL;
	} else {
		ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !len;
	}
	printf("%s - %s: %s\n", ok ? "ok" : "not ok", tc->name,
	       tc->aborts ? "reported and aborted" : "accepted silently");
	if (!ok) {
		printf("  status 0x%x; its stderr:\n%s\n", status, out);
		for (unsigned int i = 0; tc->aborts && i < 3 && tc->needle[i];
		     i++)
			printf("  expected in it: \"%s\"\n", tc->needle[i]);
	}
	return ok;
}

int main(void)
{
	unsigned int i, failed = 0;

	snprintf(list_name, sizeof(list_name), "wb->list_lock (rank %d)",
		 (int)PWB__LOCK_LIST);
	snprintf(ino_name, sizeof(ino_name), "inode->lock (rank %d)",
		 (int)PWB__LOCK_INODE);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!run_case(&cases[i]))
			failed++;
	printf("lockdep-test: %u of %u cases misbehaved\n", failed,
	       (unsigned int)(sizeof(cases) / sizeof(cases[0])));
	return failed ? 1 : 0;
}

#endif /* PWB_LOCKDEP */
