// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * http.c - how pwb-objd (examples/pwb-objd) takes a request: the
 * libmicrohttpd handler that dispatches it, its state from the headers to
 * the completion callback, keys, URL unescaping and plain replies
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "objd.h"
#include "buckets.h"

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

static struct req *req_new(enum req_kind kind, enum req_op op)
{
	struct req *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->kind = kind;
	q->op = op;
	q->t_begin = now_ns();
	return q;
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

/* The completion callback: a PUT that was not committed (an error, a
 * client gone mid-body, a shutdown) frees its inode and space; a request
 * whose reply went out whole counts in its operation's latency. */
static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *p = *con_cls;

	if (!p)
		return;
	*con_cls = NULL;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && p->op < OP_NR) {
		uint64_t ns = now_ns() - p->t_begin;

		hist_add(&lat[p->op], ns);
		if (p->kind == REQ_PUT && p->committed)
			bucket_put_latency(p->bucket, ns);
	}
	if (p->kind == REQ_PUT) {
		/* Failed, refused, or the client went away mid-body. */
		if (!p->committed) {
			CNT_ADD(aborted_puts, 1);
			if (p->inode)
				inode_free(p->dev, p->ino, p->inode, true);
		}
	}
	free(p->key);
	free(p->buf);
	free(p->tail);
	free(p);
}

static enum MHD_Result count_cl(void *cls, enum MHD_ValueKind kind,
				const char *key, const char *value)
{
	if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
		++*(unsigned int *)cls;
	return MHD_YES;
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

/* Which histogram a request counts in: the object operations only. */
static enum req_op op_of(const char *method, const char *url)
{
	if (!strcmp(url, "/") || !strncmp(url, "/-/", 3))
		return OP_OTHER;
	if (!strcmp(method, MHD_HTTP_METHOD_PUT))
		return OP_PUT;
	if (!strcmp(method, MHD_HTTP_METHOD_GET))
		return OP_GET;
	if (!strcmp(method, MHD_HTTP_METHOD_HEAD))
		return OP_HEAD;
	if (!strcmp(method, MHD_HTTP_METHOD_DELETE))
		return OP_DELETE;
	return OP_OTHER;
}

enum MHD_Result handle(void *cls, struct MHD_Connection *c,
		       const char *url, const char *method,
		       const char *version, const char *upload_data,
		       size_t *upload_data_size, void **con_cls)
{
	bool is_get = !strcmp(method, MHD_HTTP_METHOD_GET);
	bool is_head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	struct req *p = *con_cls;
	bool early = false;
	unsigned int status;

	if (p && p->kind != REQ_PUT) {
		if (*upload_data_size) {	/* a body nobody reads */
			p->dropped += *upload_data_size;
			*upload_data_size = 0;
			if (p->kind == REQ_REFUSED && !p->early &&
			    p->dropped > OBJD_DRAIN_MAX) {
				/* Chunked and without end: refuse now. */
				p->early = true;
				return reply(c, p->status, "PUT refused (%u)\n",
					     p->status);
			}
			return MHD_YES;
		}
		if (p->kind == REQ_WHOLE)
			goto whole;
		if (p->early)
			return MHD_YES;
		/* The refused request is whole: the connection stays. */
		return reply(c, p->status, "PUT refused (%u)\n", p->status);
	}
	if (p) {
		if (*upload_data_size) {
			put_data(p, upload_data, *upload_data_size);
			*upload_data_size = 0;
			return MHD_YES;
		}
		return put_finish(c, p);
	}
	p = req_new(REQ_WHOLE, op_of(method, url));
	if (!p)
		return MHD_NO;
	*con_cls = p;
	if (!strcmp(method, MHD_HTTP_METHOD_PUT)) {
		unsigned int ncl = 0;

		MHD_get_connection_values(c, MHD_HEADER_KIND, count_cl, &ncl);
		if (ncl > 1) {
			status = 400;
			early = true;	/* which length is the body's? */
		} else {
			status = put_begin(c, url, p, &early);
		}
		if (!status)
			return MHD_YES;
		p->kind = REQ_REFUSED;
		p->status = status;
		/*
		 * A refusal waits for the body and drops it (OBJD_DRAIN_MAX),
		 * so that the connection stays; libmicrohttpd sends "100
		 * Continue" to a client that waits for it. A body not worth
		 * reading is refused at once, and the connection closes.
		 */
		if (early) {
			p->early = true;
			return reply(c, status, "PUT refused (%u)\n", status);
		}
		return MHD_YES;
	}
	/*
	 * Everything else answers once the request is whole (the next call),
	 * any body dropped, for the same reason: answered then, a client's
	 * GETs share one connection as its PUTs do.
	 */
	return MHD_YES;
whole:
	if ((is_get || is_head) && !strcmp(url, "/") &&
	    MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "list", 4,
					  NULL, NULL) == MHD_YES)
		return do_list(c);
	if (is_get && !strcmp(url, "/-/stats"))
		return do_stats(c);
	if (is_get && !strcmp(url, "/-/metrics"))
		return do_metrics(c);
	if (!strcmp(method, MHD_HTTP_METHOD_POST)) {
		if (strcmp(url, "/-/sync"))
			return reply(c, 405, "POST is for /-/sync only\n");
		if (sync_all())
			return reply(c, 500, "sync failed\n");
		CNT_ADD(syncs, 1);
		return reply(c, 200, "synced\n");
	}
	if (is_get || is_head)
		return do_get(c, url, is_head);
	if (!strcmp(method, MHD_HTTP_METHOD_DELETE))
		return do_delete(c, url);
	return reply(c, 405, "method not allowed\n");
}

void done_cb(void *cls, struct MHD_Connection *c, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	request_done(cls, c, con_cls, toe);
}
