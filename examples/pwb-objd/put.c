// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * put.c - pwb-objd's PUT (examples/pwb-objd): the body kept in memory up
 * to --inline-max and in its index record then, else written to a new
 * inode in whole units as it arrives; then through the group commit
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "objd.h"
#include "crc32c.h"
#include "buckets.h"
#include "devices.h"

/* A new inode for @p's body, on the device its key hashes to, in its
 * bucket's tenant: 0 or -errno. */
static int put_open_inode(struct req *p)
{
	uint64_t t0 = now_ns();
	struct pwb_bdi_info info;
	int ret;

	p->dev = devs_place(p->key, p->klen);
	p->ino = __atomic_fetch_add(&next_ino, 1, __ATOMIC_RELAXED);
	p->unit = pwb_bdi_info(dev_bdi(p->dev), &info) ? 0 :
		  (OBJD_STAGE_BYTES + info.page_size - 1) / info.page_size *
		  info.page_size;
	ret = pwb_inode_open(dev_bdi(p->dev), p->ino, &alloc_ops, NULL,
			     &p->inode);
	if (!ret) {
		ret = bucket_attach(p->bucket, p->inode);
		if (ret) {
			fprintf(stderr, "pwb-objd: tenant of inode %" PRIu64
				": %s\n", p->ino, pwb_errmsg());
			inode_free(p->dev, p->ino, p->inode, false);
		}
	} else {
		fprintf(stderr, "pwb-objd: inode open: %s\n", pwb_errmsg());
	}
	CNT_ADD(open_ns, now_ns() - t0);
	if (ret)
		p->inode = NULL;
	return ret;
}

/* The client waits for "100 Continue" before it sends the body. */
static bool expects_continue(struct MHD_Connection *c)
{
	const char *e = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_EXPECT);

	return e && !strncasecmp(e, "100-continue", 12);
}

/* Start the PUT @p of @url: 0, or the HTTP status refusing it; *@early
 * then says to answer before the body (not worth reading). */
unsigned int put_begin(struct MHD_Connection *c, const char *url,
		       struct req *p, bool *early)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					MHD_HTTP_HEADER_CONTENT_LENGTH);
	unsigned long long v = 0;
	unsigned int status;
	size_t klen;
	int ret;

	if (cl) {
		char *end;

		errno = 0;
		v = strtoull(cl, &end, 10);
		if (errno || end == cl || *end || cl[0] == '-') {
			*early = true;	/* no telling where the body ends */
			return 400;
		}
	}
	/* Large or of unknown size, and not sent yet: not worth reading
	 * only to refuse it. */
	*early = cl ? v > OBJD_DRAIN_MAX : expects_continue(c);
	status = check_key(url, &klen);
	if (status)
		return status;
	if (cl && v > opt.max_object)
		return 413;
	ret = bucket_of(url + 1, klen, &p->bucket);
	if (ret == -ENOSPC)
		return 507;	/* --max-buckets reached */
	if (ret)
		return 500;
	if (!(p->key = strndup(url + 1, klen)))
		return 500;
	p->klen = klen;
	p->kind = REQ_PUT;
	/* Known to be larger than --inline-max: on the device from the
	 * start. Otherwise in memory until (unless) it grows past it. */
	if (cl && v > opt.inline_max)
		return put_open_inode(p) ? 500 : 0;
	return 0;
}

/* @len bytes to the inode at @off: 0 or -errno. */
static int put_write(struct req *p, const char *data, size_t len,
		     uint64_t off)
{
	ssize_t n;

	while (len) {
		n = pwb_write(p->inode, data, len, off);
		if (n <= 0) {
			if (!n)
				return -EIO;
			fprintf(stderr, "pwb-objd: write: %s\n",
				errtext((int)n));
			return (int)n;
		}
		off += (uint64_t)n;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The next @len bytes of the body to the inode, in whole units of
 * OBJD_STAGE_BYTES at offsets that are multiples of it.
 * libmicrohttpd's chunks end wherever the socket's data did, mostly in the
 * middle of a page: written as they come, each such page would be written
 * twice, the first time zero-filled up to its end. And libpwb makes a run
 * of whole pages that starts on a multiple of its size (64 KiB at least)
 * one folio, with one lookup, one reservation wait and one dirtying for
 * all of them; the chunks (64 KiB at most, where the socket's data ended)
 * seldom hold one, and page by page the write cost about 4,500
 * instructions a page, five times the copy (callgrind, 1 MiB PUTs). So a
 * chunk's last part unit waits in p->tail for the next chunk, which
 * completes it, or for the end of the body (put_tail()); whole units
 * inside a chunk go to the inode without the copy. 0 or -errno.
 */
static int put_body(struct req *p, const char *data, size_t len)
{
	uint64_t woff = p->off - p->tail_len;	/* written: whole units */
	size_t pg = p->unit, n;
	int ret;

	if (!pg) {
		ret = put_write(p, data, len, p->off);
		if (!ret)
			p->off += len;
		return ret;
	}
	if (p->tail_len) {
		n = len < pg - p->tail_len ? len : pg - p->tail_len;
		memcpy(p->tail + p->tail_len, data, n);
		p->tail_len += n;
		p->off += n;
		data += n;
		len -= n;
		if (p->tail_len < pg)
			return 0;
		ret = put_write(p, p->tail, pg, woff);
		if (ret)
			return ret;
		woff += pg;
		p->tail_len = 0;
	}
	n = len - len % pg;
	if (n) {
		ret = put_write(p, data, n, woff);
		if (ret)
			return ret;
		p->off += n;
		data += n;
		len -= n;
	}
	if (len) {
		if (!p->tail && !(p->tail = malloc(pg)))
			return -ENOMEM;
		memcpy(p->tail, data, len);
		p->tail_len = len;
		p->off += len;
	}
	return 0;
}

/*
 * p->tail written with PWB_RW_NOWAIT (--threads): 0 (written, the tail
 * empty), -EAGAIN (p->tail_done bytes of it written, the rest would have
 * waited) or -errno (p->err set).
 */
static int put_tail_nowait(struct req *p)
{
	uint64_t off = p->off - p->tail_len;

	while (p->tail_done < p->tail_len) {
		ssize_t n = pwb_write2(p->inode, p->tail + p->tail_done,
				       p->tail_len - p->tail_done,
				       off + p->tail_done, PWB_RW_NOWAIT);

		if (n == -EAGAIN)
			return -EAGAIN;
		if (n <= 0) {
			p->err = n ? (int)n : -EIO;
			fprintf(stderr, "pwb-objd: write: %s\n",
				errtext(p->err));
			return p->err;
		}
		p->tail_done += (size_t)n;
	}
	p->tail_len = 0;
	p->tail_done = 0;
	return 0;
}

/* What p->tail holds and is not written yet (all of it but tail_done
 * bytes, which only --threads writes ahead) to the inode, waiting as
 * needed: at the body's end, or by a stage worker for a write that would
 * have waited. The tail is empty after; p->err is set if the write
 * failed. */
static void put_tail(struct req *p)
{
	uint64_t off = p->off - p->tail_len + p->tail_done;
	int ret = put_write(p, p->tail + p->tail_done,
			    p->tail_len - p->tail_done, off);

	if (ret && !p->err)
		p->err = ret;
	p->tail_len = 0;
	p->tail_done = 0;
}

/*
 * put_body() on libmicrohttpd's pool (--threads): the body gathers in
 * p->tail, and each whole unit is written with PWB_RW_NOWAIT, so that a
 * pool thread never waits for the bucket's dirty limit, for room in the
 * cache or for a page lock while other connections wait for it. A write
 * that would have waited sets p->tail_wait and takes no more bytes: the
 * caller suspends the connection and a stage worker writes the rest
 * (put_tail_stage()); libmicrohttpd hands the bytes not taken again once
 * the connection is resumed. Returns the bytes of @data taken.
 */
static size_t put_body_pool(struct req *p, const char *data, size_t len)
{
	size_t pg = p->unit, taken = 0, n;

	while (taken < len) {
		if (!p->tail && !(p->tail = malloc(pg))) {
			p->err = -ENOMEM;
			return len;
		}
		n = len - taken < pg - p->tail_len ? len - taken
						   : pg - p->tail_len;
		memcpy(p->tail + p->tail_len, data + taken, n);
		p->tail_len += n;
		p->off += n;
		taken += n;
		if (p->tail_len < pg)
			break;
		if (put_tail_nowait(p) == -EAGAIN) {
			p->tail_wait = true;
			break;
		}
		if (p->err)
			return len;
	}
	return taken;
}

/* The inline body grew past --inline-max: move it to an inode. */
static int put_spill(struct req *p)
{
	uint64_t len = p->off;
	int ret;

	ret = put_open_inode(p);
	if (!ret) {
		p->off = 0;
		ret = put_body(p, p->buf, len);
	}
	free(p->buf);
	p->buf = NULL;
	return ret;
}

/* The next @len bytes of a PUT's body: the bytes taken, all of them
 * unless p->tail_wait is set (--threads: the connection is to wait). */
size_t put_data(struct req *p, const char *data, size_t len)
{
	uint64_t t0;
	size_t taken;

	if (p->err || p->too_big)
		return len;
	if (p->off + len > opt.max_object) {
		p->too_big = true;	/* chunked, without Content-Length */
		return len;
	}
	t0 = now_ns();
	if (!p->inode && p->off + len <= opt.inline_max) {
		p->crc = crc32c_update(p->crc, data, len);
		if (!p->buf) {
			p->cap = opt.inline_max;
			p->buf = malloc(p->cap);
			if (!p->buf) {
				p->err = -ENOMEM;
				return len;
			}
		}
		memcpy(p->buf + p->off, data, len);
		p->off += len;
		CNT_ADD(write_ns, now_ns() - t0);
		return len;
	}
	if (!p->inode) {
		p->err = put_spill(p);
		if (p->err)
			return len;
	}
	if (opt.threads && p->unit) {
		taken = put_body_pool(p, data, len);
	} else {
		p->err = put_body(p, data, len);
		taken = len;
	}
	p->crc = crc32c_update(p->crc, data, taken);
	CNT_ADD(write_ns, now_ns() - t0);
	return taken;
}

/* An inline PUT's record: the head and the bytes. */
static struct rec *inline_rec(const struct req *p, size_t *rsz)
{
	struct rec *r;

	*rsz = sizeof(*r) + p->off;
	r = calloc(1, *rsz);
	if (!r)
		return NULL;
	r->version = REC_INLINE;
	r->crc = p->crc;
	r->size = p->off;
	if (p->off)
		memcpy(r->ext, p->buf, p->off);
	return r;
}

/* A suspended PUT's data stage, on a stage worker: its data durable,
 * then its record to the committer, whose end resumes the connection
 * (req_commit()). */
static void put_stage(struct stage_job *job)
{
	struct req *p = STAGE_JOB_OWNER(job, struct req, job);

	if (p->tail_len)	/* the body's last part, which would wait */
		put_tail(p);
	req_commit(p, p->err ? p->err : put_durable(&p->cq));
}

/* A suspended PUT's body write that would have waited (put_body_pool()),
 * on a stage worker. */
static void put_tail_stage(struct stage_job *job)
{
	struct req *p = STAGE_JOB_OWNER(job, struct req, job);

	put_tail(p);
	p->tail_wait = false;
	suspend_end(p->conn);
}

/* p->tail_wait: suspend @c while a stage worker writes the tail (or, at
 * shutdown, write it here). */
void put_wait_tail(struct MHD_Connection *c, struct req *p)
{
	if (!suspend_begin(c)) {
		put_tail(p);
		p->tail_wait = false;
		return;
	}
	p->conn = c;
	CNT_ADD(stage_writes, 1);
	req_stage(p, put_tail_stage);
}

static enum MHD_Result put_fail(struct MHD_Connection *c, struct req *p)
{
	free(p->cq.r);
	p->cq.r = NULL;
	return reply(c, errno_status(p->err), "PUT failed: %s\n",
		     pwb_strerror(p->err));
}

/* The PUT's stages are over (p->cq.ret says how): the table and the
 * counters, then the reply. */
static enum MHD_Result put_reply(struct MHD_Connection *c, struct req *p)
{
	struct commit_req *q = &p->cq;
	struct obj *o = p->obj;
	uint64_t t0;

	CNT_ADD(commit_ns, now_ns() - p->t_commit);
	if (q->ret) {
		if (o) {
			table_kill(p->dev, p->ino);
			table_put(o);
		}
		p->err = q->ret;
		return put_fail(c, p);
	}
	p->committed = true;	/* inline: nothing to free any more */
	t0 = now_ns();
	if (q->old)
		table_kill(q->old_dev, q->old);
	if (o && keep_open)
		table_pin(o);
	else if (o)
		table_put(o);	/* closes it, unless a GET has it already */
	CNT_ADD(close_ns, now_ns() - t0);
	free(q->r);
	q->r = NULL;
	CNT_ADD(puts, 1);
	if (!o)
		CNT_ADD(inline_puts, 1);
	CNT_ADD(bytes_in, p->off);
	bucket_put_done(p->bucket, p->off);
	vlog("PUT %s: ino %" PRIu64 ", %" PRIu64 " bytes, crc %08x",
	     p->key, p->ino, p->off, p->crc);
	{
		struct MHD_Response *resp =
			MHD_create_response_from_buffer(0, "",
				MHD_RESPMEM_PERSISTENT);
		char etag[16];
		enum MHD_Result mret;

		if (!resp)
			return MHD_NO;
		snprintf(etag, sizeof(etag), "\"%08x\"", p->crc);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
		mret = MHD_queue_response(c, q->existed ? 204 : 201, resp);
		MHD_destroy_response(resp);
		CNT_ADD(put_ns, now_ns() - p->t_begin);
		return mret;
	}
}

/*
 * The body is complete: data durable, then the index, then the reply,
 * through the group commit. A body on the device goes through the sync
 * stage first; an inline one straight to the index commit, which makes
 * it durable with the record that holds it. With --threads the
 * connection is suspended meanwhile and put_reply() answers once the
 * stages are over (req_suspend()); otherwise this thread waits for them.
 */
enum MHD_Result put_finish(struct MHD_Connection *c, struct req *p)
{
	struct commit_req *q = &p->cq;
	int ret;

	if (p->too_big)
		return reply(c, 413, "object larger than %" PRIu64 " bytes\n",
			     opt.max_object);
	/* The body's last part: with --threads, what would wait is written
	 * by the data stage's worker (put_stage()). */
	if (!p->err && p->inode) {
		if (opt.threads && p->unit)
			put_tail_nowait(p);
		else
			put_tail(p);
	}
	if (p->err)
		return put_fail(c, p);
	*q = (struct commit_req){ .key = p->key, .klen = p->klen };
	if (!p->inode) {
		q->r = inline_rec(p, &q->rsz);
		if (!q->r) {
			p->err = -ENOMEM;
			return put_fail(c, p);
		}
	} else {
		q->inode = p->inode;
		q->dev = p->dev;
		q->ino = p->ino;
		q->size = p->off;
		q->crc = p->crc;
		/* In the table before the key can name it: a GET right
		 * after the commit finds it open. Nobody else knows the
		 * ino yet. */
		ret = table_insert(p->dev, p->ino, p->inode, &p->obj);
		if (ret) {
			p->err = ret;
			return put_fail(c, p);
		}
		p->committed = true;	/* the table owns the inode now */
	}
	p->t_commit = now_ns();
	if (req_suspend(c, p, put_reply)) {
		if (p->inode) {
			CNT_ADD(stage_puts, 1);
			req_stage(p, put_stage);
		} else {
			req_commit(p, 0);
		}
		return MHD_YES;
	}
	if (p->tail_len)	/* --threads, shutting down: wait here */
		put_tail(p);
	ret = p->err ? p->err : commit_wait(q);
	q->ret = ret;
	return put_reply(c, p);
}
