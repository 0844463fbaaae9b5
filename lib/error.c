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

PWB_API const char *pwb_strerror(int err)
{
	static const char *const unknown = "Unknown libpwb error";

	if (err == 0)
		return "Success";
	if (err > 0 || err < -4095)
		return unknown;
	/*
	 * strerror() may use a static buffer for unknown values, but for the
	 * errno range glibc returns a pointer into its constant table.
	 */
	return strerror(-err);
}

#define ERRSEQ_ERRMASK 0xfffu
#define ERRSEQ_SEEN 0x1000u
#define ERRSEQ_CTR_INC 0x2000u

void pwb__errseq_set(pwb__errseq_t *eseq, int err)
{
	uint32_t old, new;

	if (err >= 0 || err < -(int)ERRSEQ_ERRMASK)
		err = -EIO;
	old = uatomic_read(eseq);
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
	uint32_t cur = uatomic_read(eseq);

	if ((cur | ERRSEQ_SEEN) == (*cursor | ERRSEQ_SEEN))
		return 0;
	if (!(cur & ERRSEQ_SEEN)) {
		/* Mark it seen so that a later error bumps the counter. */
		uint32_t prev = uatomic_cmpxchg(eseq, cur, cur | ERRSEQ_SEEN);

		if (prev != cur)
			cur = prev;	/* a newer error: report that one */
		cur |= ERRSEQ_SEEN;
	}
	*cursor = cur;
	return -(int)(cur & ERRSEQ_ERRMASK);
}
