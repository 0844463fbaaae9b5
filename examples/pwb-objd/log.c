// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * log.c - pwb-objd's messages (examples/pwb-objd): the --verbose log and
 * the text of a libpwb failure
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>

#include "objd.h"

void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!opt.verbose)
		return;
	va_start(ap, fmt);
	fputs("pwb-objd: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* libpwb's message for the calling thread's last failure, or the errno's
 * text when it left none. */
const char *errtext(int err)
{
	const char *m = pwb_errmsg();

	return m && *m ? m : pwb_strerror(err);
}
