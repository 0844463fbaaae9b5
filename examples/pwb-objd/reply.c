// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * reply.c - what pwb-objd's handlers (examples/pwb-objd) read a request
 * and answer with: the key of a URL (unescaped by libmicrohttpd through
 * unescape(), checked by check_key()), plain text replies and the HTTP
 * status of an -errno
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objd.h"

/* -------------------------------------------------------------- responses */

enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
		      const char *fmt, ...)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (n < 0)
		return MHD_NO;
	r = MHD_create_response_from_buffer((size_t)n, body,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/plain");
	if (status == 405)
		MHD_add_response_header(r, "Allow",
					"GET, HEAD, PUT, DELETE, POST");
	if (status >= 400)
		CNT_ADD(errors, 1);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

unsigned int errno_status(int err)
{
	switch (err) {
	case -ENOENT:
		return 404;
	case -ENOSPC:
		return 507;
	case -EFBIG:
		return 413;
	default:
		return 500;
	}
}

/* Keys: 1..max_key bytes after the leading '/', no control characters,
 * not starting with "-/" (the daemon's own paths). 0 or an HTTP status. */
unsigned int check_key(const char *url, size_t *klen)
{
	size_t n;

	if (url[0] != '/')
		return 400;
	n = strlen(url + 1);
	if (n > opt.max_key)
		return 414;
	if (n == 0 || !strncmp(url + 1, "-/", 2))
		return 400;
	for (size_t i = 1; i <= n; i++)
		if ((unsigned char)url[i] < 0x20 || url[i] == 0x7f)
			return 400;
	*klen = n;
	return 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* MHD's unescaping, except that an escaped control character (%00 above
 * all, which would cut the key short) becomes 0x01, which check_key()
 * refuses. */
size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *w = s;

	for (const char *r = s; *r; ) {
		int hi, lo;

		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 &&
		    (lo = hexval(r[2])) >= 0) {
			unsigned char ch = (unsigned char)(hi << 4 | lo);

			*w++ = ch < 0x20 || ch == 0x7f ? 0x01 : (char)ch;
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return (size_t)(w - s);
}
