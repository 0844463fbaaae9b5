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
#include "pwb-internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char pwb__msg[256];

int pwb__err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pwb__msg, sizeof(pwb__msg), fmt, ap);
	va_end(ap);
	return err;
}

void pwb__err_clear(void)
{
	pwb__msg[0] = '\0';
}

PWB_API const char *pwb_errmsg(void)
{
	return pwb__msg;
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

PWB_API const char *pwb_strerror(int err)
{
	static const char *const unknown = "Unknown libpwb error";

	if (err == 0)
		return "Success";
	if (err > 0 || err < -4095)
		return unknown;
	return pwb__errno_desc(-err, unknown);
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

/* ---------------------------------------------------------------------- */
/* Write failures: bounded retry back-off and failed inodes               */

static uint64_t next_backoff(uint64_t cur)
{
	return cur ? PWB__MIN(cur * 2, PWB__WB_BACKOFF_MAX_NS)
		   : PWB__WB_BACKOFF_MIN_NS;
}

void pwb__wb_write_result_locked(struct pwb_inode *inode,
				 struct pwb__wb_ctx *wb, int err)
{
	uint64_t now;

	if (!err) {
		/* The device takes writes again: end an ENOSPC pause. */
		wb->nospc_backoff_ns = 0;
		wb->nospc_until = 0;
		/* All data landed: the failure run is over. */
		if (!inode->map.count[PWB__TAG_DIRTY] &&
		    !inode->map.count[PWB__TAG_WRITEBACK]) {
			inode->wb_failures = 0;
			inode->backoff_ns = 0;
			inode->retry_after = 0;
		}
		return;
	}
	now = pwb__now(inode->bdi);
	inode->fail_pass = pwb__aread(&wb->stats.wb_passes);
	if (err == -ENOSPC) {
		/* A full file system fails every inode alike: pause the
		 * whole context, not each inode after its own failure. */
		wb->nospc_backoff_ns = next_backoff(wb->nospc_backoff_ns);
		wb->nospc_until = now + wb->nospc_backoff_ns;
	}
	/* A visit that writes many requests fails once, not per request. */
	if (inode->wb_failures && inode->fail_visit == inode->wb_visit)
		return;
	inode->fail_visit = inode->wb_visit;
	inode->wb_failures++;
	inode->backoff_ns = next_backoff(inode->backoff_ns);
	inode->retry_after = now + inode->backoff_ns;
	if (inode->bdi->cfg.max_write_failures &&
	    inode->wb_failures >= inode->bdi->cfg.max_write_failures &&
	    !inode->failed_err)
		inode->failed_err = err;
}

bool pwb__wb_visit_end_locked(struct pwb_inode *inode, uint64_t written)
{
	bool failed = inode->wb_failures &&
		      inode->fail_visit == inode->wb_visit;

	/*
	 * A visit that wrote and saw no failure breaks the run of
	 * consecutive failures, unless writes are still in flight (an
	 * asynchronous backend): their failure would belong to this visit.
	 */
	if (!failed && written && !inode->map.count[PWB__TAG_WRITEBACK]) {
		inode->wb_failures = 0;
		inode->backoff_ns = 0;
		inode->retry_after = 0;
	}
	return failed;
}

bool pwb__wb_backing_off_locked(struct pwb_inode *inode,
				struct pwb__wb_ctx *wb, bool periodic)
{
	if (!inode->wb_failures)
		return false;
	/* Failed in this very pass: retrying at once would spin. */
	if (inode->fail_pass == pwb__aread(&wb->stats.wb_passes))
		return true;
	return periodic && pwb__now(inode->bdi) < inode->retry_after;
}

void pwb__inode_clear_error_locked(struct pwb_inode *inode)
{
	inode->failed_err = 0;
	inode->wb_failures = 0;
	inode->backoff_ns = 0;
	inode->retry_after = 0;
}
