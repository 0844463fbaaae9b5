// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * error.c - error codes, per-thread messages and errseq
 *
 * Every public call that fails returns a negative errno and leaves a line of
 * detail in a thread-local buffer (pwb_errmsg), in the spirit of dlerror().
 *
 * errseq follows the kernel's errseq_t: one 32-bit word per error source
 * (inode, bdi) and one cursor per reader (pwb_fsync of the inode, pwb_sync of
 * the bdi). A reader gets an error once: the first check after the error was
 * recorded returns it and moves the cursor past it.
 */
#include "base.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

PWB__TLS_FAST char pwb__msg[PWB__MSG_MAX];

int pwb__err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pwb__msg, sizeof(pwb__msg), fmt, ap);
	va_end(ap);
	return err;
}

const char *pwb__errmsg(void)
{
	return pwb__msg;
}

PWB_API const char *pwb_errmsg(void)
{
	return pwb__errmsg();
}

#ifdef HAVE_STRERRORDESC_NP
/*
 * glibc 2.32 and later: a pointer into the C library's constant table, valid
 * for the life of the process and the same in every thread. strerror() would
 * format unknown values into a per-thread buffer that its next call reuses.
 */
static const char *pwb__errno_desc(int errnum, const char *unknown)
{
	const char *desc = strerrordesc_np(errnum);

	return desc ? desc : unknown;
}
#else
/*
 * Other C libraries: the descriptions of the errno range are copied once,
 * with strerror_r(), into a process-wide table that is never written again,
 * so the strings are as static as glibc's. Values past it are "unknown".
 */
#include <pthread.h>

#define PWB__NR_ERRNO_TEXT 134
static char pwb__errno_text[PWB__NR_ERRNO_TEXT][64];
static pthread_once_t pwb__errno_once = PTHREAD_ONCE_INIT;

static void pwb__errno_fill(void)
{
	size_t n = sizeof(pwb__errno_text[0]);

	for (int i = 1; i < PWB__NR_ERRNO_TEXT; i++) {
		char *b = pwb__errno_text[i];
#ifdef STRERROR_R_CHAR_P
		const char *s = strerror_r(i, b, n);

		if (s != b)
			snprintf(b, n, "%s", s);
#else
		if (strerror_r(i, b, n))
			b[0] = '\0';
#endif
	}
}

static const char *pwb__errno_desc(int errnum, const char *unknown)
{
	if (errnum <= 0 || errnum >= PWB__NR_ERRNO_TEXT)
		return unknown;
	pthread_once(&pwb__errno_once, pwb__errno_fill);
	return pwb__errno_text[errnum][0] ? pwb__errno_text[errnum] : unknown;
}
#endif

const char *pwb__strerror(int err)
{
	static const char *const unknown = "Unknown libpwb error";

	if (err == 0)
		return "Success";
	if (err > 0 || err < -4095)
		return unknown;
	return pwb__errno_desc(-err, unknown);
}

PWB_API const char *pwb_strerror(int err)
{
	return pwb__strerror(err);
}

#define ERRSEQ_ERRMASK 0xfffu
#define ERRSEQ_SEEN 0x1000u
#define ERRSEQ_CTR_INC 0x2000u

void pwb__errseq_set(pwb__errseq_t *eseq, int err)
{
	uint32_t old, new;

	if (err >= 0 || err < -(int)ERRSEQ_ERRMASK)
		err = -EIO;
	old = pwb__aread(eseq);
	for (;;) {
		uint32_t prev;

		new = (old & ~(ERRSEQ_ERRMASK | ERRSEQ_SEEN)) | (uint32_t)-err;
		/* Someone saw the last error: this one is new to everybody. */
		if (old & ERRSEQ_SEEN)
			new += ERRSEQ_CTR_INC;
		if (new == old)
			return;	/* the same error, still unseen */
		prev = uatomic_cmpxchg(eseq, old, new);
		if (prev == old)
			return;
		old = prev;
	}
}

int pwb__errseq_check_and_advance(pwb__errseq_t *eseq, pwb__errseq_t *cursor)
{
	uint32_t cur = pwb__aread(eseq);

	if ((cur | ERRSEQ_SEEN) == (*cursor | ERRSEQ_SEEN))
		return 0;
	/*
	 * Mark what we report seen, so that a later error bumps the counter.
	 * If a newer error raced in, report that one, and mark it too: left
	 * unseen, the next identical error would merge into it (errseq_set's
	 * "same error, still unseen") and this cursor would miss it.
	 */
	while (!(cur & ERRSEQ_SEEN)) {
		uint32_t prev = uatomic_cmpxchg(eseq, cur, cur | ERRSEQ_SEEN);

		if (prev == cur)
			cur |= ERRSEQ_SEEN;
		else
			cur = prev;
	}
	*cursor = cur;
	return -(int)(cur & ERRSEQ_ERRMASK);
}

int pwb__no_flusher(const char *who)
{
	if (!pwb__in_flusher())
		return 0;
	return pwb__err(-EDEADLK, "%s called from an ops callback (a flusher "
				  "thread)",
			who);
}
