// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * http.c - how pwb-objd (examples/pwb-objd) takes a request: the
 * libmicrohttpd handler that dispatches it to its handler, and its state
 * from the headers to the completion callback
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "objd.h"
#include "buckets.h"

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
	free(p->cq.r);
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

	/* Resumed after a wait (req_suspend()): the request is whole. */
	if (p && p->stage == REQ_DONE)
		return p->wait_reply(c, p);
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
			*upload_data_size -= put_data(p, upload_data,
						      *upload_data_size);
			if (p->tail_wait)
				put_wait_tail(c, p);
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
		return do_sync(c, p);
	}
	if (is_get || is_head)
		return do_get(c, url, is_head, p);
	if (!strcmp(method, MHD_HTTP_METHOD_DELETE))
		return do_delete(c, url, p);
	return reply(c, 405, "method not allowed\n");
}

void done_cb(void *cls, struct MHD_Connection *c, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	request_done(cls, c, con_cls, toe);
}
