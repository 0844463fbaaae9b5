// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * handlers.c - pwb-objd's handlers of GET and HEAD of an object (Range,
 * ?verify), GET /?list, DELETE and POST /-/sync (examples/pwb-objd; PUT
 * is in put.c, /-/stats and /-/metrics in stats.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "objd.h"
#include "crc32c.h"
#include "devices.h"

/* GET and HEAD of an object: the response reads through pwb_read(). */
#define OBJD_GET_BLOCK (256u << 10)	/* the most one read asks for */

struct get_req {
	struct obj *o;
	uint64_t base;		/* object offset of response byte 0 (Range) */
	/*
	 * --threads: a read that would wait for the device is done by a
	 * stage worker (get_stage()) into buf while the connection is
	 * suspended, and served from there when libmicrohttpd asks again:
	 * the response's bytes [buf_pos, buf_pos + buf_len), or buf_err.
	 * want_*: what the worker is to read. The worker writes them
	 * before it resumes the connection, the pool's thread reads them
	 * after: libmicrohttpd's resume orders the two.
	 */
	struct MHD_Connection *conn;
	struct stage_job job;
	char *buf;
	uint64_t buf_pos, want_pos;
	size_t buf_len, want_len;
	ssize_t buf_err;
};

/* A stage worker's read for a suspended GET (get_read()): it may wait
 * for the device, and its readahead brings the next blocks in. */
static void get_stage(struct stage_job *job)
{
	struct get_req *g = STAGE_JOB_OWNER(job, struct get_req, job);
	ssize_t n = -ENOMEM;

	if (g->buf || (g->buf = malloc(OBJD_GET_BLOCK)))
		n = pwb_read(g->o->inode, g->buf, g->want_len,
			     g->base + g->want_pos);
	g->buf_pos = g->want_pos;
	g->buf_len = n > 0 ? (size_t)n : 0;
	g->buf_err = n > 0 ? 0 : n ? n : -EIO;	/* 0: shorter than said */
	suspend_end(g->conn);
}

static ssize_t get_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct get_req *g = cls;
	ssize_t n;

	if (max > OBJD_GET_BLOCK)
		max = OBJD_GET_BLOCK;
	if (g->buf_err) {
		fprintf(stderr, "pwb-objd: read: %s\n",
			pwb_strerror((int)g->buf_err));
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (g->buf_len && pos >= g->buf_pos && pos < g->buf_pos + g->buf_len) {
		/* What the worker read: served from its buffer, which is as
		 * new as the cache was then. */
		uint64_t left = g->buf_pos + g->buf_len - pos;

		n = (ssize_t)(left < max ? left : max);
		memcpy(buf, g->buf + (pos - g->buf_pos), (size_t)n);
		CNT_ADD(bytes_out, (uint64_t)n);
		return n;
	}
	if (opt.threads) {
		/* On the pool: what is cached now, or the rest by a worker. */
		n = pwb_read2(g->o->inode, buf, max, g->base + pos,
			      PWB_RW_NOWAIT);
		if (n == -EAGAIN && g->conn && suspend_begin(g->conn)) {
			g->want_pos = pos;
			g->want_len = max;
			g->job.run = get_stage;
			CNT_ADD(stage_reads, 1);
			stage_queue(&g->job);
			return 0;	/* asked again once resumed */
		}
		if (n == -EAGAIN)	/* shutting down: wait here */
			n = pwb_read(g->o->inode, buf, max, g->base + pos);
	} else {
		n = pwb_read(g->o->inode, buf, max, g->base + pos);
	}
	if (n < 0) {
		fprintf(stderr, "pwb-objd: read: %s\n", pwb_errmsg());
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (n == 0)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* shorter than said */
	CNT_ADD(bytes_out, (uint64_t)n);
	return n;
}

/* HEAD of an inline object: never called (HEAD has no body). */
static ssize_t get_none(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void get_free(void *cls)
{
	struct get_req *g = cls;

	table_put(g->o);
	free(g->buf);
	free(g);
}

/* Parse "bytes=a-b" for an object of @size: 0 (ok: [*a, *b]), 1 (no or
 * unsupported Range: the whole object) or 416. */
static int parse_range(const char *h, uint64_t size, uint64_t *a, uint64_t *b)
{
	unsigned long long x, y;
	char *end;

	if (!h)
		return 1;
	if (strncmp(h, "bytes=", 6))
		return 1;
	h += 6;
	if (strchr(h, ','))
		return 1;	/* several ranges: the whole object (allowed) */
	if (*h == '-') {
		errno = 0;
		y = strtoull(h + 1, &end, 10);
		if (errno || end == h + 1 || *end || h[1] == '-')
			return 416;
		if (y == 0 || size == 0)
			return 416;
		*a = y >= size ? 0 : size - y;
		*b = size - 1;
		return 0;
	}
	errno = 0;
	x = strtoull(h, &end, 10);
	if (errno || end == h || *end != '-' || *h == '-' || *h == '+')
		return 416;
	h = end + 1;
	if (*h == 0) {
		y = size ? size - 1 : 0;
	} else {
		errno = 0;
		y = strtoull(h, &end, 10);
		if (errno || end == h || *end || *h == '-' || *h == '+')
			return 416;
	}
	if (y < x || x >= size)
		return 416;
	if (y >= size)
		y = size - 1;
	*a = x;
	*b = y;
	return 0;
}

/* Drop what object_get() gave: the reference, or the inline bytes. */
static void object_put(struct obj *o, struct objinfo *oi)
{
	if (o)
		table_put(o);
	free(oi->data);
	oi->data = NULL;
}

/* GET ?verify reads an object on a device in pieces of this size. */
#define OBJD_VERIFY_BLOCK (1u << 20)

/* Read p->vf's object back through libpwb, which may wait for the
 * device: the bytes read, their CRC-32C and a read's error in p->vf; the
 * reference and the buffer dropped. On the request's thread, or a stage
 * worker's with the connection suspended. */
static void verify_read(struct req *p)
{
	ssize_t n = 0;

	p->vf.pos = 0;
	p->vf.got = 0;
	while (p->vf.pos < p->vf.size) {
		n = pwb_read(p->vf.o->inode, p->vf.buf, OBJD_VERIFY_BLOCK,
			     p->vf.pos);
		if (n <= 0)
			break;
		p->vf.got = crc32c_update(p->vf.got, p->vf.buf, (size_t)n);
		p->vf.pos += (uint64_t)n;
	}
	p->vf.err = n < 0 ? (int)n : 0;
	free(p->vf.buf);
	p->vf.buf = NULL;
	table_put(p->vf.o);
	p->vf.o = NULL;
}

/* A suspended GET ?verify's read, on a stage worker. */
static void verify_stage(struct stage_job *job)
{
	struct req *p = STAGE_JOB_OWNER(job, struct req, job);

	verify_read(p);
	req_resume(p);
}

/* GET ?verify's answer from p->vf: 200 "ok CRC SIZE", or 500 "read error"
 * or "mismatch ...". */
static enum MHD_Result verify_reply(struct MHD_Connection *c, struct req *p)
{
	if (p->vf.err)
		return reply(c, 500, "read error: %s\n",
			     pwb_strerror(p->vf.err));
	if (p->vf.pos != p->vf.size || p->vf.got != p->vf.crc)
		return reply(c, 500, "mismatch: read %" PRIu64 " bytes crc %08x,"
			     " index says %" PRIu64 " bytes crc %08x\n",
			     p->vf.pos, p->vf.got, p->vf.size, p->vf.crc);
	return reply(c, 200, "ok %08x %" PRIu64 "\n", p->vf.got, p->vf.size);
}

/* GET /KEY?verify: read the object back from libpwb (an inline one: from
 * the index) and compare its CRC-32C with the index's (verify_reply()).
 * With --threads a stage worker reads an object on a device while the
 * connection waits suspended. */
static enum MHD_Result do_verify(struct MHD_Connection *c, struct obj *o,
				 struct objinfo *oi, struct req *p)
{
	p->vf.size = oi->size;
	p->vf.crc = oi->crc;
	if (!o) {
		p->vf.got = crc32c_update(0, oi->data, oi->size);
		p->vf.pos = oi->size;
		object_put(o, oi);
		return verify_reply(c, p);
	}
	p->vf.buf = malloc(OBJD_VERIFY_BLOCK);
	if (!p->vf.buf) {
		table_put(o);
		return MHD_NO;
	}
	p->vf.o = o;
	if (req_suspend(c, p, verify_reply)) {
		CNT_ADD(stage_verifies, 1);
		req_stage(p, verify_stage);
		return MHD_YES;
	}
	verify_read(p);
	return verify_reply(c, p);
}

enum MHD_Result do_get(struct MHD_Connection *c, const char *url,
		       bool head, struct req *p)
{
	struct MHD_Response *resp;
	struct objinfo oi;
	struct get_req *g;
	struct obj *o;
	uint64_t a = 0, b = 0, len;
	unsigned int status;
	char hdr[96];
	size_t klen;
	int ret, rr;
	enum MHD_Result mret;

	status = check_key(url, &klen);
	if (status)
		return reply(c, status, "bad key\n");
	ret = object_get(url + 1, klen, &oi, &o, !head);
	if (ret)
		return reply(c, errno_status(ret), "%s\n",
			     ret == -ENOENT ? "no such key" : pwb_strerror(ret));
	if (!head && MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND,
			"verify", 6, NULL, NULL) == MHD_YES)
		return do_verify(c, o, &oi, p);
	rr = parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_RANGE),
			 oi.size, &a, &b);
	if (rr == 416) {
		object_put(o, &oi);
		resp = MHD_create_response_from_buffer(0, "",
						       MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return MHD_NO;
		snprintf(hdr, sizeof(hdr), "bytes */%" PRIu64, oi.size);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, hdr);
		CNT_ADD(errors, 1);
		mret = MHD_queue_response(c, 416, resp);
		MHD_destroy_response(resp);
		return mret;
	}
	len = rr == 0 ? b - a + 1 : oi.size;
	if (len == 0 || (!o && head)) {
		/* A HEAD of an inline object: its size without its bytes
		 * (libmicrohttpd sends no body for HEAD). */
		object_put(o, &oi);
		resp = len ? MHD_create_response_from_callback(len, 4096,
				get_none, NULL, NULL)
			   : MHD_create_response_from_buffer(0, "",
						MHD_RESPMEM_PERSISTENT);
	} else if (!o) {
		resp = MHD_create_response_from_buffer(len, oi.data + a,
						       MHD_RESPMEM_MUST_COPY);
		CNT_ADD(bytes_out, len);
		object_put(o, &oi);
	} else {
		g = calloc(1, sizeof(*g));
		if (!g) {
			table_put(o);
			return MHD_NO;
		}
		g->o = o;
		g->base = a;
		g->conn = c;
		resp = MHD_create_response_from_callback(len, OBJD_GET_BLOCK,
							 get_read, g, get_free);
		if (!resp) {
			get_free(g);
			return MHD_NO;
		}
	}
	if (!resp)
		return MHD_NO;
	snprintf(hdr, sizeof(hdr), "\"%08x\"", oi.crc);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, hdr);
	snprintf(hdr, sizeof(hdr), "%08x", oi.crc);
	MHD_add_response_header(resp, "X-Checksum-CRC32C", hdr);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	MHD_add_response_header(resp, "Content-Type",
				"application/octet-stream");
	if (rr == 0) {
		snprintf(hdr, sizeof(hdr), "bytes %" PRIu64 "-%" PRIu64
			 "/%" PRIu64, a, b, oi.size);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, hdr);
	}
	if (head)
		CNT_ADD(heads, 1);
	else
		CNT_ADD(gets, 1);
	mret = MHD_queue_response(c, rr == 0 ? 206 : 200, resp);
	MHD_destroy_response(resp);
	return mret;
}

/* GET /?list[&prefix=P]: the keys, one a line, in key order. */
enum MHD_Result do_list(struct MHD_Connection *c)
{
	const char *prefix = MHD_lookup_connection_value(c,
					MHD_GET_ARGUMENT_KIND, "prefix");
	size_t plen = prefix ? strlen(prefix) : 0, len = 0, cap = 4096;
	char *out = malloc(cap), *bigger;
	struct MHD_Response *resp;
	enum MHD_Result mret;
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_val k, v;
	int rc;

	if (!out)
		return MHD_NO;
	if (mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) {
		free(out);
		return reply(c, 500, "index unreadable\n");
	}
	if (mdb_cursor_open(txn, db_obj, &cur)) {
		mdb_txn_abort(txn);
		free(out);
		return reply(c, 500, "index unreadable\n");
	}
	k.mv_size = plen;
	k.mv_data = (void *)prefix;
	rc = mdb_cursor_get(cur, &k, &v, plen ? MDB_SET_RANGE : MDB_FIRST);
	while (rc == 0) {
		if (plen && (k.mv_size < plen || memcmp(k.mv_data, prefix, plen)))
			break;
		if (len + k.mv_size + 1 > cap) {
			cap = (len + k.mv_size + 1) * 2;
			bigger = realloc(out, cap);
			if (!bigger) {
				/* Never a partial list with 200. */
				mdb_cursor_close(cur);
				mdb_txn_abort(txn);
				free(out);
				return reply(c, 500, "out of memory\n");
			}
			out = bigger;
		}
		memcpy(out + len, k.mv_data, k.mv_size);
		len += k.mv_size;
		out[len++] = '\n';
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	resp = MHD_create_response_from_buffer(len, out, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(out);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/plain");
	CNT_ADD(lists, 1);
	mret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return mret;
}

/* POST /-/sync: every acknowledged PUT is durable already; this makes
 * whatever else is dirty (nothing, normally) durable too. */
int sync_all(void)
{
	int ret = 0, rc;

	for (unsigned int d = 0; d < nr_devs; d++) {
		rc = pwb_sync(dev_bdi(d));
		if (rc)
			fprintf(stderr, "pwb-objd: sync of %s: %s\n",
				devs[d].path, pwb_errmsg());
		if (rc && !ret)
			ret = rc;
	}
	rc = mdb_env_sync(env, 1);
	if (rc) {
		fprintf(stderr, "pwb-objd: index sync: %s\n", mdb_strerror(rc));
		if (!ret)
			ret = -EIO;
	}
	return ret;
}

/* POST /-/sync's answer from p->err, sync_all()'s result. */
static enum MHD_Result sync_reply(struct MHD_Connection *c, struct req *p)
{
	if (p->err)
		return reply(c, 500, "sync failed\n");
	CNT_ADD(syncs, 1);
	return reply(c, 200, "synced\n");
}

/* A suspended POST /-/sync's syncs, on a stage worker. */
static void sync_stage(struct stage_job *job)
{
	struct req *p = STAGE_JOB_OWNER(job, struct req, job);

	p->err = sync_all();
	req_resume(p);
}

/* POST /-/sync: every device and the index synced (sync_all()), then
 * sync_reply(); with --threads by a stage worker while the connection
 * waits suspended. */
enum MHD_Result do_sync(struct MHD_Connection *c, struct req *p)
{
	if (req_suspend(c, p, sync_reply)) {
		CNT_ADD(stage_syncs, 1);
		req_stage(p, sync_stage);
		return MHD_YES;
	}
	p->err = sync_all();
	return sync_reply(c, p);
}

/* DELETE's answer once the group commit took it (p->cq.ret says how):
 * the object it named dead, then 204, or the error. */
static enum MHD_Result delete_reply(struct MHD_Connection *c, struct req *p)
{
	struct commit_req *q = &p->cq;

	if (q->ret)
		return reply(c, errno_status(q->ret), "%s\n",
			     q->ret == -ENOENT ? "no such key"
					       : pwb_strerror(q->ret));
	if (q->old)
		table_kill(q->old_dev, q->old);
	CNT_ADD(deletes, 1);
	return reply(c, 204, "%s", "");
}

/* DELETE /KEY through the group commit, then delete_reply(); with
 * --threads the connection waits suspended for the committer. The key
 * is libmicrohttpd's URL, which lasts as long as the request. */
enum MHD_Result do_delete(struct MHD_Connection *c, const char *url,
			  struct req *p)
{
	struct commit_req *q = &p->cq;
	unsigned int status;
	size_t klen;

	status = check_key(url, &klen);
	if (status)
		return reply(c, status, "bad key\n");
	*q = (struct commit_req){ .key = url + 1, .klen = klen, .del = true };
	if (req_suspend(c, p, delete_reply)) {
		CNT_ADD(stage_deletes, 1);
		req_commit(p, 0);
		return MHD_YES;
	}
	q->ret = commit_wait(q);
	return delete_reply(c, p);
}
