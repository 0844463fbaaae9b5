// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pwb-objd - an object store over HTTP/1.1 on libpwb (examples/pwb-objd)
 *
 *   PUT /KEY        store the body (201 new, 204 replaced), durable on reply
 *   GET /KEY        the object (Range: bytes=a-b, a-, -n; one range)
 *   HEAD /KEY       its size and checksum, no body
 *   DELETE /KEY     204, or 404
 *   GET /?list      the keys, one a line (?list&prefix=P: those starting P)
 *   GET /-/stats    libpwb's and the daemon's counters as JSON
 *   POST /-/sync    pwb_sync() and an LMDB sync
 *
 * Data lives on one bdi (a device or image) in allocator-mode inodes: each
 * object one inode, written with pwb_write() as the body arrives. The
 * index (key -> ino, size, CRC-32C, extents) lives in LMDB and is changed
 * only after the object's data is durable (pwb_fsync()): data before
 * metadata. A PUT of an existing key writes a new inode and switches the
 * key to it in one LMDB transaction; the old inode is freed after that
 * commit, so a crash shows the old object or the new one, never a mix.
 * On start every object in the index gets its extents back
 * (pwb_inode_set_extents()); space of inodes that never reached the index
 * is not loaded, hence free: that is the garbage collection.
 *
 * Inodes are open on demand: the first request on an object opens it, the
 * last one closes it (libpwb keeps a closed allocator-mode inode's extents
 * and size); --keep-open keeps every object open (about 10 KiB each, most
 * of it the inode's page table). An in-memory table maps ino -> open inode
 * with a reference count, so a GET that still streams an object replaced
 * or deleted meanwhile keeps reading the old inode; the last reference
 * frees it. README.md next to this file has the details.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <lmdb.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "pwb.h"
#include "crc32c.h"
#include "pwb-example-util.h"

/* ---------------------------------------------------------------- options */

/* The smallest --cache-size and device taken: 256 pages of 4 KiB. */
#define OBJD_MIN_BYTES (1u << 20)

static struct {
	const char *device;
	const char *index;	/* LMDB directory; default DEVICE.index */
	const char *socket;	/* default DEVICE.sock */
	int tcp_port;		/* 0: no TCP listener */
	unsigned int contexts;
	const char *policy;
	const char *backend;
	uint64_t cache_bytes;
	uint64_t max_object;
	unsigned int max_key;
	unsigned int max_conn;
	unsigned int timeout_s;
	uint64_t index_map;
	bool verbose;
} opt = {
	.max_object = 256ull << 20,
	.max_key = 1024,
	.max_conn = 1024,
	.timeout_s = 60,
	.index_map = 1ull << 30,
};

/* ------------------------------------------------------------ the index */

/* One object's record in LMDB, native byte order (an example daemon, not
 * a portable format; the version word lets a later one convert). */
#define REC_VERSION 1u
struct rec {
	uint32_t version;
	uint32_t crc;		/* CRC-32C of the whole object */
	uint64_t ino;
	uint64_t size;
	uint64_t nr_ext;
	struct pwb_extent ext[];
};

/* LMDB's values are not aligned (they follow their keys in the page):
 * records are copied out, never read in place. 0, or -EIO for a value too
 * short to be a record. */
static int rec_head(const MDB_val *v, struct rec *h)
{
	if (v->mv_size < sizeof(*h))
		return -EIO;
	memcpy(h, v->mv_data, sizeof(*h));
	return 0;
}

static MDB_env *env;
static MDB_dbi db_obj;		/* key -> struct rec */
static MDB_dbi db_meta;		/* "next_ino" -> uint64_t */
static struct pwb_bdi *bdi;
static const struct pwb_inode_ops alloc_ops;	/* all NULL: allocator mode */

/* The next inode number: read from the index at start, then handed out
 * here (atomic) and stored with every commit that used one. */
static uint64_t next_ino;

/* --------------------------------------------------------- counters (atomic) */

static struct {
	uint64_t puts, gets, heads, deletes, lists, syncs;
	uint64_t bytes_in, bytes_out, errors, aborted_puts, freed;
	/* time PUTs spent, summed over requests, ns */
	uint64_t write_ns, fsync_ns, commit_ns;
	/* ... in opening and closing their inodes, and in all (from the
	 * headers to the queued reply), ns */
	uint64_t open_ns, close_ns, put_ns;
	uint64_t index_commits;
} cnt;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define CNT_ADD(f, v) __atomic_add_fetch(&cnt.f, (v), __ATOMIC_RELAXED)
#define CNT_GET(f) __atomic_load_n(&cnt.f, __ATOMIC_RELAXED)

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...)
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
static const char *errtext(int err)
{
	const char *m = pwb_errmsg();

	return m && *m ? m : pwb_strerror(err);
}

/* ------------------------------------------------------ open-object table */

/*
 * The inodes open now, found by ino. An object's inode is opened by the
 * first request that needs it and closed by the last one (libpwb keeps a
 * closed allocator-mode inode's extents and size, so the reopen finds
 * them); with --keep-open every object in the index stays open, pinned by
 * a reference of the index's own. A killed object (its key now names
 * another inode, or none) is dead: the last reference gives its blocks
 * back (discard) before the close. All fields: table_lock.
 */
enum obj_state { OBJ_OPENING, OBJ_OPEN, OBJ_CLOSING };

struct obj {
	struct obj *next;
	uint64_t ino;
	struct pwb_inode *inode;	/* NULL while OPENING */
	unsigned int refs;
	enum obj_state state;
	bool dead;
	bool pinned;		/* one of refs is the index's (--keep-open) */
};

#define TABLE_BITS 16
static struct obj *table[1u << TABLE_BITS];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_cond = PTHREAD_COND_INITIALIZER;	/* state */
static uint64_t nr_open;	/* table_lock */
static bool keep_open;		/* set before the first request */

static unsigned int hash_ino(uint64_t ino)
{
	return (unsigned int)((ino * 0x9E3779B97F4A7C15ull) >> (64 - TABLE_BITS));
}

static struct obj *find_locked(uint64_t ino)
{
	struct obj *o;

	for (o = table[hash_ino(ino)]; o; o = o->next)
		if (o->ino == ino)
			return o;
	return NULL;
}

static struct obj *insert_locked(uint64_t ino, struct pwb_inode *inode)
{
	struct obj *o = calloc(1, sizeof(*o));
	unsigned int h = hash_ino(ino);

	if (!o)
		return NULL;
	o->ino = ino;
	o->inode = inode;
	o->refs = 1;
	o->state = inode ? OBJ_OPEN : OBJ_OPENING;
	o->next = table[h];
	table[h] = o;
	nr_open++;
	return o;
}

static void remove_locked(struct obj *o)
{
	struct obj **pp;

	for (pp = &table[hash_ino(o->ino)]; *pp != o; pp = &(*pp)->next)
		;
	*pp = o->next;
	nr_open--;
	pthread_cond_broadcast(&table_cond);
}

/* Register an inode the caller opened (a new PUT's, or one loaded at
 * start); the caller holds the one reference. */
static int table_insert(uint64_t ino, struct pwb_inode *inode, struct obj **op)
{
	pthread_mutex_lock(&table_lock);
	*op = insert_locked(ino, inode);
	pthread_mutex_unlock(&table_lock);
	return *op ? 0 : -ENOMEM;
}

/* A reference to object @ino, its inode opened if no request has it
 * open: 0, -ENOENT if it is dead, or pwb_inode_open()'s error. */
static int table_get(uint64_t ino, struct obj **op)
{
	struct pwb_inode *inode;
	struct obj *o;
	int ret;

	pthread_mutex_lock(&table_lock);
	for (;;) {
		o = find_locked(ino);
		if (!o)
			break;
		if (o->dead) {
			pthread_mutex_unlock(&table_lock);
			return -ENOENT;
		}
		if (o->state == OBJ_OPEN) {
			o->refs++;
			pthread_mutex_unlock(&table_lock);
			*op = o;
			return 0;
		}
		pthread_cond_wait(&table_cond, &table_lock);
	}
	o = insert_locked(ino, NULL);
	pthread_mutex_unlock(&table_lock);
	if (!o)
		return -ENOMEM;
	ret = pwb_inode_open(bdi, ino, &alloc_ops, NULL, &inode);
	if (ret)
		fprintf(stderr, "pwb-objd: open of inode %" PRIu64 ": %s\n",
			ino, pwb_errmsg());
	pthread_mutex_lock(&table_lock);
	if (ret) {
		remove_locked(o);
		pthread_mutex_unlock(&table_lock);
		free(o);
		return ret;
	}
	o->inode = inode;
	o->state = OBJ_OPEN;
	pthread_cond_broadcast(&table_cond);
	pthread_mutex_unlock(&table_lock);
	*op = o;
	return 0;
}

/*
 * Give an inode's blocks back (@discard) and close it.
 *
 * Busy extents (pwb_bdi_freed_cookie()): libpwb keeps freed blocks out of
 * use until we say that our index no longer names them. Every inode freed
 * here left the index first: its key was replaced or deleted by a
 * committed (durable) LMDB transaction, or its PUT never committed. So
 * once the discard has returned, a cookie taken now covers only blocks
 * that no durable index entry names, and releasing it at once is safe.
 */
static void inode_free(uint64_t ino, struct pwb_inode *inode, bool discard)
{
	uint64_t cookie;
	int ret;

	if (discard) {
		ret = pwb_inode_discard(inode, 0, UINT64_MAX);
		if (ret)
			fprintf(stderr, "pwb-objd: discard of inode %" PRIu64
				": %s\n", ino, pwb_errmsg());
		CNT_ADD(freed, 1);
		if (pwb_bdi_freed_cookie(bdi, &cookie) ||
		    pwb_bdi_release_freed(bdi, cookie))
			fprintf(stderr, "pwb-objd: releasing freed blocks: "
				"%s\n", pwb_errmsg());
	}
	ret = pwb_inode_close(inode);
	if (ret)
		fprintf(stderr, "pwb-objd: close of inode %" PRIu64 ": %s\n",
			ino, pwb_errmsg());
}

/* Drop a reference; the last one closes the inode (freeing it if dead).
 * The entry stays, CLOSING, until the close is done: a request for the
 * same ino waits for it, then opens the inode again. */
static void table_put(struct obj *o)
{
	bool dead;

	pthread_mutex_lock(&table_lock);
	if (--o->refs) {
		pthread_mutex_unlock(&table_lock);
		return;
	}
	o->state = OBJ_CLOSING;
	dead = o->dead;
	pthread_mutex_unlock(&table_lock);
	inode_free(o->ino, o->inode, dead);
	pthread_mutex_lock(&table_lock);
	remove_locked(o);
	pthread_mutex_unlock(&table_lock);
	free(o);
}

/* --keep-open: the index's reference, taken over from the caller's;
 * dropped instead if the object was killed already (a later PUT of the
 * same key in the same group commit can kill it before its own PUT gets
 * here: pinned then, it would never be freed). */
static void table_pin(struct obj *o)
{
	pthread_mutex_lock(&table_lock);
	if (!o->dead) {
		o->pinned = true;
		pthread_mutex_unlock(&table_lock);
		return;
	}
	pthread_mutex_unlock(&table_lock);
	table_put(o);
}

/* The key moved away from @ino (replaced or deleted): free its blocks once
 * the requests still reading it are done. */
static void table_kill(uint64_t ino)
{
	struct obj *o;

	if (table_get(ino, &o))
		return;		/* already dead, or cannot open: lost */
	pthread_mutex_lock(&table_lock);
	o->dead = true;
	if (o->pinned) {
		o->pinned = false;
		o->refs--;	/* never the last: ours is there */
	}
	pthread_mutex_unlock(&table_lock);
	table_put(o);
}

/* ----------------------------------------------------------- index access */

struct objinfo {
	uint64_t ino, size;
	uint32_t crc;
};

/* Look @key up: 0, -ENOENT, or another -errno. */
static int index_get(const char *key, size_t klen, struct objinfo *oi)
{
	MDB_txn *txn;
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key }, v;
	struct rec r = { 0 };
	int rc;

	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return -EIO;
	rc = mdb_get(txn, db_obj, &k, &v);
	if (rc == 0) {
		rc = rec_head(&v, &r);
		oi->ino = r.ino;
		oi->size = r.size;
		oi->crc = r.crc;
	} else {
		rc = rc == MDB_NOTFOUND ? -ENOENT : -EIO;
	}
	mdb_txn_abort(txn);
	return rc;
}

/* A reference to the object of @key as the index says now; retried when
 * a commit replaced it between the look-up and the reference. */
static int object_get(const char *key, size_t klen, struct objinfo *oi,
		      struct obj **op)
{
	struct objinfo again;

	for (int tries = 0; tries < 1000; tries++) {
		int ret = index_get(key, klen, oi);

		if (ret)
			return ret;
		ret = table_get(oi->ino, op);
		if (ret == -ENOENT)
			continue;	/* killed since the look-up */
		if (ret)
			return ret;
		/* Still the key's inode with our reference held: a kill
		 * comes after the commit that moves the key away, and
		 * finds the reference. (An inode freed before our
		 * table_get() was opened again empty: look again.) */
		ret = index_get(key, klen, &again);
		if (!ret && again.ino == oi->ino)
			return 0;
		table_put(*op);
		if (ret && ret != -ENOENT)
			return ret;
	}
	return -EAGAIN;
}

/*
 * Group commit. LMDB runs one write transaction at a time and syncs twice
 * per commit, so one transaction per PUT caps the daemon at a few hundred
 * PUTs a second whatever the device does. A PUT whose data is durable
 * queues its record here and sleeps; the committer thread takes every
 * record queued so far into one transaction, commits it (durable) and
 * wakes them all with their results. A record waits for at most one
 * commit in progress plus its own.
 */
struct commit_req {
	struct commit_req *next;
	const char *key;
	size_t klen;
	const struct rec *r;
	size_t rsz;
	uint64_t old;		/* out: the ino the key named before */
	int ret;		/* out */
	bool done;		/* commit_lock */
};

static pthread_mutex_t commit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t commit_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t commit_done = PTHREAD_COND_INITIALIZER;
static struct commit_req *commit_head, **commit_tail = &commit_head;
static bool commit_stop;		/* commit_lock */
static pthread_t committer;
static uint64_t nr_commits, nr_committed;	/* committer thread only */

/* Put @batch's records into @txn: 0 or an LMDB error. */
static int commit_batch_txn(MDB_txn *txn, struct commit_req *batch)
{
	MDB_val mk = { .mv_size = 8, .mv_data = "next_ino" }, k, v;
	uint64_t next = 0, cur = 0;
	struct rec h;
	int rc;

	for (struct commit_req *q = batch; q; q = q->next) {
		k.mv_size = q->klen;
		k.mv_data = (void *)q->key;
		q->old = 0;
		rc = mdb_get(txn, db_obj, &k, &v);
		if (rc == 0 && !rec_head(&v, &h))
			q->old = h.ino;
		else if (rc && rc != MDB_NOTFOUND)
			return rc;
		v.mv_size = q->rsz;
		v.mv_data = (void *)q->r;
		rc = mdb_put(txn, db_obj, &k, &v, 0);
		if (rc)
			return rc;
		if (q->r->ino + 1 > next)
			next = q->r->ino + 1;
	}
	/* The counter only grows: inodes stay unique across restarts. */
	rc = mdb_get(txn, db_meta, &mk, &v);
	if (rc == 0 && v.mv_size == 8)
		memcpy(&cur, v.mv_data, 8);
	if (next > cur) {
		v.mv_size = 8;
		v.mv_data = &next;
		rc = mdb_put(txn, db_meta, &mk, &v, 0);
		if (rc)
			return rc;
	}
	return 0;
}

static int commit_batch(struct commit_req *batch)
{
	MDB_txn *txn;
	int rc;

	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = commit_batch_txn(txn, batch);
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

static int lmdb_errno(int rc)
{
	return rc == MDB_MAP_FULL ? -ENOSPC : -EIO;
}

static void *committer_main(void *arg)
{
	struct commit_req *batch, *q, *next;
	int rc;

	pthread_mutex_lock(&commit_lock);
	for (;;) {
		while (!commit_head && !commit_stop)
			pthread_cond_wait(&commit_work, &commit_lock);
		if (!commit_head)
			break;
		batch = commit_head;
		commit_head = NULL;
		commit_tail = &commit_head;
		pthread_mutex_unlock(&commit_lock);

		rc = commit_batch(batch);
		nr_commits++;
		CNT_ADD(index_commits, 1);
		if (rc && batch->next) {
			/* One bad record (a full map) must not fail the
			 * others: commit each alone. */
			for (q = batch; q; q = next) {
				next = q->next;
				q->next = NULL;
				int r1 = commit_batch(q);

				q->ret = r1 ? lmdb_errno(r1) : 0;
				q->next = next;
				nr_commits++;
			}
		} else {
			for (q = batch; q; q = q->next)
				q->ret = rc ? lmdb_errno(rc) : 0;
		}
		if (rc)
			fprintf(stderr, "pwb-objd: index commit: %s\n",
				mdb_strerror(rc));
		pthread_mutex_lock(&commit_lock);
		for (q = batch; q; q = next) {
			next = q->next;
			if (!q->ret)
				nr_committed++;
			q->done = true;
		}
		pthread_cond_broadcast(&commit_done);
	}
	pthread_mutex_unlock(&commit_lock);
	return NULL;
}

/* Make @key name the new inode of @r (whose data is durable), through the
 * committer; the old ino, if any, in *@old. 0 or -errno. */
static int index_commit(const char *key, size_t klen, const struct rec *r,
			size_t rsz, uint64_t *old)
{
	struct commit_req q = {
		.key = key, .klen = klen, .r = r, .rsz = rsz,
	};

	pthread_mutex_lock(&commit_lock);
	if (commit_stop) {
		pthread_mutex_unlock(&commit_lock);
		return -ESHUTDOWN;
	}
	*commit_tail = &q;
	commit_tail = &q.next;
	pthread_cond_signal(&commit_work);
	while (!q.done)
		pthread_cond_wait(&commit_done, &commit_lock);
	pthread_mutex_unlock(&commit_lock);
	*old = q.ret ? 0 : q.old;
	return q.ret;
}

static void committer_stop(void)
{
	pthread_mutex_lock(&commit_lock);
	commit_stop = true;
	pthread_cond_signal(&commit_work);
	pthread_mutex_unlock(&commit_lock);
	pthread_join(committer, NULL);
}

static int index_delete(const char *key, size_t klen, uint64_t *old)
{
	struct rec h;
	MDB_txn *txn;
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key }, v;
	int rc;

	rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return -EIO;
	rc = mdb_get(txn, db_obj, &k, &v);
	if (rc) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND ? -ENOENT : -EIO;
	}
	if (rec_head(&v, &h)) {
		mdb_txn_abort(txn);
		return -EIO;
	}
	*old = h.ino;
	rc = mdb_del(txn, db_obj, &k, NULL);
	if (rc) {
		mdb_txn_abort(txn);
		return -EIO;
	}
	rc = mdb_txn_commit(txn);
	return rc ? -EIO : 0;
}

/* -------------------------------------------------------------- responses */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
			     const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
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

static unsigned int errno_status(int err)
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

/* --------------------------------------------------------------- requests */

enum req_kind { REQ_PUT = 1, REQ_SKIP };

/* The state of one PUT, from its first call to the completion callback. */
struct put_req {
	enum req_kind kind;
	char *key;
	size_t klen;
	uint64_t ino;
	struct pwb_inode *inode;
	uint64_t off;
	uint32_t crc;
	int err;		/* first error; the rest of the body is dropped */
	bool committed;		/* the inode belongs to the table now */
	bool too_big;
	uint64_t t_begin;	/* now_ns() when the headers arrived */
};

/* Keys: 1..max_key bytes after the leading '/', no control characters,
 * not starting with "-/" (the daemon's own paths). 0 or an HTTP status. */
static unsigned int check_key(const char *url, size_t *klen)
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

static struct put_req *put_begin(struct MHD_Connection *c, const char *url,
				 unsigned int *status)
{
	const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct put_req *p;
	size_t klen;
	int ret;

	*status = check_key(url, &klen);
	if (*status)
		return NULL;
	if (cl) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(cl, &end, 10);
		if (errno || end == cl || *end || cl[0] == '-') {
			*status = 400;
			return NULL;
		}
		if (v > opt.max_object) {
			*status = 413;
			return NULL;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->key = strndup(url + 1, klen))) {
		free(p);
		*status = 500;
		return NULL;
	}
	p->kind = REQ_PUT;
	p->klen = klen;
	p->t_begin = now_ns();
	p->ino = __atomic_fetch_add(&next_ino, 1, __ATOMIC_RELAXED);
	ret = pwb_inode_open(bdi, p->ino, &alloc_ops, NULL, &p->inode);
	CNT_ADD(open_ns, now_ns() - p->t_begin);
	if (ret) {
		fprintf(stderr, "pwb-objd: inode open: %s\n", pwb_errmsg());
		free(p->key);
		free(p);
		*status = 500;
		return NULL;
	}
	return p;
}

static void put_data(struct put_req *p, const char *data, size_t len)
{
	ssize_t n;

	if (p->err || p->too_big)
		return;
	if (p->off + len > opt.max_object) {
		p->too_big = true;	/* chunked, without Content-Length */
		return;
	}
	uint64_t t0 = now_ns();

	p->crc = crc32c_update(p->crc, data, len);
	while (len) {
		n = pwb_write(p->inode, data, len, p->off);
		if (n < 0) {
			fprintf(stderr, "pwb-objd: write: %s\n",
				errtext((int)n));
			p->err = (int)n;
			return;
		}
		if (n == 0) {
			p->err = -EIO;
			return;
		}
		p->off += (uint64_t)n;
		data += n;
		len -= (size_t)n;
	}
	CNT_ADD(write_ns, now_ns() - t0);
}

/* The body is complete: data durable, then the index, then the reply. */
static enum MHD_Result put_finish(struct MHD_Connection *c, struct put_req *p)
{
	struct pwb_extent *ext = NULL;
	struct rec *r = NULL;
	size_t total = 0, rsz;
	uint64_t old = 0, t0;
	struct obj *o;
	int ret;

	if (p->too_big)
		return reply(c, 413, "object larger than %" PRIu64 " bytes\n",
			     opt.max_object);
	if (p->err)
		goto fail;
	t0 = now_ns();
	ret = pwb_fsync(p->inode);
	CNT_ADD(fsync_ns, now_ns() - t0);
	if (!ret)
		ret = pwbex_inode_extents(p->inode, &ext, &total);
	if (ret) {
		fprintf(stderr, "pwb-objd: fsync: %s\n", errtext(ret));
		p->err = ret;
		goto fail;
	}
	rsz = sizeof(*r) + total * sizeof(struct pwb_extent);
	r = calloc(1, rsz);
	if (!r) {
		free(ext);
		p->err = -ENOMEM;
		goto fail;
	}
	r->version = REC_VERSION;
	r->crc = p->crc;
	r->ino = p->ino;
	r->size = p->off;
	r->nr_ext = total;
	if (total)
		memcpy(r->ext, ext, total * sizeof(*ext));
	free(ext);
	/* In the table before the key can name it: a GET right after the
	 * commit finds it open. Nobody else knows the ino yet. */
	ret = table_insert(p->ino, p->inode, &o);
	if (ret) {
		p->err = ret;
		goto fail;
	}
	p->committed = true;	/* the table owns the inode now */
	t0 = now_ns();
	ret = index_commit(p->key, p->klen, r, rsz, &old);
	CNT_ADD(commit_ns, now_ns() - t0);
	if (ret) {
		table_kill(p->ino);
		table_put(o);
		p->err = ret;
		goto fail;
	}
	t0 = now_ns();
	if (old)
		table_kill(old);
	if (keep_open)
		table_pin(o);
	else
		table_put(o);	/* closes it, unless a GET has it already */
	CNT_ADD(close_ns, now_ns() - t0);
	free(r);
	CNT_ADD(puts, 1);
	CNT_ADD(bytes_in, p->off);
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
		mret = MHD_queue_response(c, old ? 204 : 201, resp);
		MHD_destroy_response(resp);
		CNT_ADD(put_ns, now_ns() - p->t_begin);
		return mret;
	}
fail:
	free(r);
	return reply(c, errno_status(p->err), "PUT failed: %s\n",
		     pwb_strerror(p->err));
}

/* The completion callback: a PUT that was not committed (an error, a
 * client gone mid-body, a shutdown) frees its inode and space. */
static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct put_req *p = *con_cls;

	if (!p)
		return;
	*con_cls = NULL;
	if (p->kind == REQ_PUT) {
		/* Failed, refused, or the client went away mid-body. */
		if (!p->committed) {
			CNT_ADD(aborted_puts, 1);
			inode_free(p->ino, p->inode, true);
		}
		free(p->key);
	}
	free(p);
}

/* GET and HEAD of an object: the response reads through pwb_read(). */
struct get_req {
	struct obj *o;
	uint64_t base;		/* object offset of response byte 0 (Range) */
};

static ssize_t get_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct get_req *g = cls;
	ssize_t n = pwb_read(g->o->inode, buf, max, g->base + pos);

	if (n < 0) {
		fprintf(stderr, "pwb-objd: read: %s\n", pwb_errmsg());
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (n == 0)
		return MHD_CONTENT_READER_END_WITH_ERROR; /* shorter than said */
	CNT_ADD(bytes_out, (uint64_t)n);
	return n;
}

static void get_free(void *cls)
{
	struct get_req *g = cls;

	table_put(g->o);
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

/* GET /KEY?verify: read the object back from libpwb and compare its
 * CRC-32C with the index's: 200 "ok CRC SIZE" or 500 "mismatch ...". */
static enum MHD_Result do_verify(struct MHD_Connection *c, struct obj *o,
				 const struct objinfo *oi)
{
	size_t bsz = 1 << 20;
	char *buf = malloc(bsz);
	uint64_t pos = 0;
	uint32_t crc = 0;
	ssize_t n = 0;

	if (!buf) {
		table_put(o);
		return MHD_NO;
	}
	while (pos < oi->size) {
		n = pwb_read(o->inode, buf, bsz, pos);
		if (n <= 0)
			break;
		crc = crc32c_update(crc, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	free(buf);
	table_put(o);
	if (n < 0)
		return reply(c, 500, "read error: %s\n", pwb_strerror((int)n));
	if (pos != oi->size || crc != oi->crc)
		return reply(c, 500, "mismatch: read %" PRIu64 " bytes crc %08x,"
			     " index says %" PRIu64 " bytes crc %08x\n", pos, crc,
			     oi->size, oi->crc);
	return reply(c, 200, "ok %08x %" PRIu64 "\n", crc, oi->size);
}

static enum MHD_Result do_get(struct MHD_Connection *c, const char *url,
			      bool head)
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
	ret = object_get(url + 1, klen, &oi, &o);
	if (ret)
		return reply(c, errno_status(ret), "%s\n",
			     ret == -ENOENT ? "no such key" : pwb_strerror(ret));
	if (!head && MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND,
			"verify", 6, NULL, NULL) == MHD_YES)
		return do_verify(c, o, &oi);
	rr = parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_RANGE),
			 oi.size, &a, &b);
	if (rr == 416) {
		table_put(o);
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
	if (len == 0) {
		table_put(o);
		resp = MHD_create_response_from_buffer(0, "",
						       MHD_RESPMEM_PERSISTENT);
	} else {
		g = malloc(sizeof(*g));
		if (!g) {
			table_put(o);
			return MHD_NO;
		}
		g->o = o;
		g->base = a;
		resp = MHD_create_response_from_callback(len, 256 << 10,
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
static enum MHD_Result do_list(struct MHD_Connection *c)
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

#define PWB_STATS_FIELDS                                                       \
	X(nr_dirty_inodes) X(dirty_pages) X(writeback_pages)                   \
	X(dirtied_pages) X(written_pages) X(io_submitted) X(io_errors)         \
	X(bytes_written) X(nr_inodes) X(nr_dirty_time_inodes) X(wb_passes)     \
	X(periodic_passes) X(background_passes) X(sync_passes)                 \
	X(inodes_written) X(device_flushes) X(flush_ns) X(write_bandwidth)     \
	X(throttle_ns) X(throttle_events) X(io_extents) X(imbalance_milli)     \
	X(auto_nr_wb_ctx) X(auto_reason) X(auto_steps) X(auto_windows)         \
	X(auto_best_bw) X(auto_best_nr_wb_ctx) X(rate_limited_ns)              \
	X(log_forces) X(lsn_held_pages) X(latched_pages) X(busy_waits)         \
	X(cache_pages) X(reclaimed_pages) X(reclaim_passes)                    \
	X(direct_reclaimed_pages) X(extents) X(alloc_groups)                   \
	X(reserved_bytes) X(free_bytes) X(reclaim_ns) X(read_ios)              \
	X(read_pages)

/* GET /-/stats: {"objects": .., "objd": {..}, "pwb": {..}}. */
static enum MHD_Result do_stats(struct MHD_Connection *c)
{
	struct pwb_stats st;
	MDB_stat ms = { 0 };
	MDB_txn *txn;
	uint64_t open_now;
	char *buf = NULL;
	size_t sz = 0;
	FILE *f;
	int ret;

	ret = pwb_bdi_stats(bdi, &st);
	if (ret)
		return reply(c, 500, "stats: %s\n", pwb_errmsg());
	if (!mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) {
		mdb_stat(txn, db_obj, &ms);
		mdb_txn_abort(txn);
	}
	pthread_mutex_lock(&table_lock);
	open_now = nr_open;
	pthread_mutex_unlock(&table_lock);
	f = open_memstream(&buf, &sz);
	if (!f)
		return MHD_NO;
	fprintf(f, "{\n  \"objects\": %zu,\n  \"open_inodes\": %" PRIu64
		",\n  \"objd\": {", ms.ms_entries, open_now);
#define C(name) fprintf(f, "%s\"" #name "\": %" PRIu64, first ? "" : ", ", \
			CNT_GET(name)), first = false;
	{
		bool first = true;

		C(puts) C(gets) C(heads) C(deletes) C(lists) C(syncs)
		C(bytes_in) C(bytes_out) C(errors) C(aborted_puts) C(freed)
		C(write_ns) C(fsync_ns) C(commit_ns) C(index_commits)
		C(open_ns) C(close_ns) C(put_ns)
	}
#undef C
	fprintf(f, "},\n  \"pwb\": {");
	{
		bool first = true;
#define X(name) fprintf(f, "%s\n    \"" #name "\": %" PRIu64,              \
			first ? "" : ",", st.name), first = false;
		PWB_STATS_FIELDS
#undef X
	}
	fprintf(f, "\n  }\n}\n");
	if (fclose(f)) {
		free(buf);
		return MHD_NO;
	}
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(sz, buf, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result mret;

	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	mret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return mret;
}

/* POST /-/sync: every acknowledged PUT is durable already; this makes
 * whatever else is dirty (nothing, normally) durable too. */
static int sync_all(void)
{
	int ret = pwb_sync(bdi), rc;

	if (ret)
		fprintf(stderr, "pwb-objd: sync: %s\n", pwb_errmsg());
	rc = mdb_env_sync(env, 1);
	if (rc) {
		fprintf(stderr, "pwb-objd: index sync: %s\n", mdb_strerror(rc));
		if (!ret)
			ret = -EIO;
	}
	return ret;
}

static enum MHD_Result do_delete(struct MHD_Connection *c, const char *url)
{
	unsigned int status;
	uint64_t old = 0;
	size_t klen;
	int ret;

	status = check_key(url, &klen);
	if (status)
		return reply(c, status, "bad key\n");
	ret = index_delete(url + 1, klen, &old);
	if (ret)
		return reply(c, errno_status(ret), "%s\n",
			     ret == -ENOENT ? "no such key" : pwb_strerror(ret));
	table_kill(old);
	CNT_ADD(deletes, 1);
	return reply(c, 204, "%s", "");
}

/* *con_cls of a request whose body is dropped (after an early reply), and
 * of one answered only once its request is whole (every method but PUT). */
static int skip_marker, whole_marker;

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
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	bool is_get = !strcmp(method, MHD_HTTP_METHOD_GET);
	bool is_head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	struct put_req *p = *con_cls;
	unsigned int status;

	if (p == (void *)&skip_marker) {
		/* A body we do not want (after an early reply): drop it. */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (p == (void *)&whole_marker) {
		if (*upload_data_size) {	/* a body nobody reads */
			*upload_data_size = 0;
			return MHD_YES;
		}
		*con_cls = NULL;
		goto whole;
	}
	if (p) {
		if (*upload_data_size) {
			put_data(p, upload_data, *upload_data_size);
			*upload_data_size = 0;
			return MHD_YES;
		}
		return put_finish(c, p);
	}
	if (!strcmp(method, MHD_HTTP_METHOD_PUT)) {
		unsigned int ncl = 0;

		MHD_get_connection_values(c, MHD_HEADER_KIND, count_cl, &ncl);
		p = ncl > 1 ? (status = 400, NULL) : put_begin(c, url, &status);
		if (!p) {
			*con_cls = &skip_marker;
			return reply(c, status, "PUT refused (%u)\n", status);
		}
		*con_cls = p;
		return MHD_YES;
	}
	/*
	 * Everything else answers once the request is whole (the next call),
	 * any body dropped: libmicrohttpd closes the connection after a
	 * reply queued at the first call, since it cannot know where the
	 * next request starts. Answered then, a client's GETs share one
	 * connection as its PUTs do.
	 */
	*con_cls = &whole_marker;
	return MHD_YES;
whole:
	if ((is_get || is_head) && !strcmp(url, "/") &&
	    MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, "list", 4,
					  NULL, NULL) == MHD_YES)
		return do_list(c);
	if (is_get && !strcmp(url, "/-/stats"))
		return do_stats(c);
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

static void done_cb(void *cls, struct MHD_Connection *c, void **con_cls,
		    enum MHD_RequestTerminationCode toe)
{
	if (*con_cls == (void *)&skip_marker ||
	    *con_cls == (void *)&whole_marker) {
		*con_cls = NULL;
		return;
	}
	request_done(cls, c, con_cls, toe);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (!opt.verbose)
		return;
	fputs("pwb-objd: mhd: ", stderr);
	vfprintf(stderr, fmt, ap);
}

static void mhd_panic(void *cls, const char *file, unsigned int line,
		      const char *reason)
{
	fprintf(stderr, "pwb-objd: libmicrohttpd failed at %s:%u: %s\n",
		file ? file : "?", line, reason ? reason : "?");
	abort();
}

/* ---------------------------------------------------------------- start */

/* Open every object of the index and give it its extents and size. */
static int load_index(void)
{
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_val k, v, mk = { .mv_size = 8, .mv_data = "next_ino" };
	uint64_t n = 0, max_ino = 0, stored = 1;
	int rc, ret = 0;

	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (rc)
		goto lmdb_fail;
	if (!mdb_get(txn, db_meta, &mk, &v) && v.mv_size == 8)
		memcpy(&stored, v.mv_data, 8);
	rc = mdb_cursor_open(txn, db_obj, &cur);
	if (rc) {
		mdb_txn_abort(txn);
		goto lmdb_fail;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct rec h, *r = &h;
		const char *ext = (const char *)v.mv_data + sizeof(h);
		struct pwb_inode *inode;

		if (rec_head(&v, &h) || r->version != REC_VERSION ||
		    r->nr_ext > (v.mv_size - sizeof(h)) / sizeof(r->ext[0]) ||
		    v.mv_size != sizeof(h) + r->nr_ext * sizeof(r->ext[0])) {
			fprintf(stderr, "pwb-objd: index: bad record for "
				"key %.*s\n", (int)k.mv_size,
				(const char *)k.mv_data);
			ret = -EINVAL;
			break;
		}
		ret = pwb_inode_open(bdi, r->ino, &alloc_ops, NULL, &inode);
		if (!ret && r->nr_ext) {
			struct pwb_extent *e = malloc(r->nr_ext * sizeof(*e));

			ret = -ENOMEM;
			if (e) {
				memcpy(e, ext, r->nr_ext * sizeof(*e));
				ret = pwb_inode_set_extents(inode, e,
							    r->nr_ext);
				free(e);
			}
		}
		if (!ret)
			ret = pwb_inode_set_size(inode, r->size);
		if (!ret && keep_open) {
			struct obj *o;

			ret = table_insert(r->ino, inode, &o);
			if (!ret)
				o->pinned = true;
		} else if (!ret) {
			/* Closed: libpwb keeps the extents and the size. */
			ret = pwb_inode_close(inode);
		}
		if (ret) {
			fprintf(stderr, "pwb-objd: loading key %.*s (inode %"
				PRIu64 "): %s\n", (int)k.mv_size,
				(const char *)k.mv_data, r->ino, pwb_errmsg());
			break;
		}
		if (r->ino > max_ino)
			max_ino = r->ino;
		n++;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (ret)
		return ret;
	next_ino = stored > max_ino ? stored : max_ino + 1;
	vlog("index: %" PRIu64 " objects, next inode %" PRIu64, n, next_ino);
	return 0;
lmdb_fail:
	fprintf(stderr, "pwb-objd: index: %s\n", mdb_strerror(rc));
	return -EIO;
}

static int open_index(const char *dir)
{
	MDB_txn *txn;
	int rc;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "pwb-objd: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	rc = mdb_env_create(&env);
	if (!rc)
		rc = mdb_env_set_maxdbs(env, 4);
	if (!rc)
		rc = mdb_env_set_mapsize(env, opt.index_map);
	if (!rc)
		rc = mdb_env_set_maxreaders(env, 2 * opt.max_conn + 16);
	/* MDB_NOTLS: read transactions are not tied to threads (MHD's
	 * threads come and go). Writes sync at every commit (the default). */
	if (!rc)
		rc = mdb_env_open(env, dir, MDB_NOTLS, 0600);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		goto fail;
	rc = mdb_dbi_open(txn, "objects", MDB_CREATE, &db_obj);
	if (!rc)
		rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &db_meta);
	if (rc) {
		mdb_txn_abort(txn);
		goto fail;
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "pwb-objd: index %s: %s\n", dir, mdb_strerror(rc));
	return -1;
}

/*
 * One daemon per device: an exclusive flock() on the device (or image)
 * file, held until the process ends, so a second pwb-objd on the same
 * file, under any path or socket, is refused before it touches anything.
 * The kernel drops the lock when the holder dies, SIGKILL included. Only
 * pwb-objd takes it: other programs writing the device are not stopped.
 */
static int lock_device(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "pwb-objd: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno == EWOULDBLOCK)
			fprintf(stderr, "pwb-objd: %s: in use by another "
				"pwb-objd\n", path);
		else
			fprintf(stderr, "pwb-objd: %s: lock: %s\n", path,
				strerror(errno));
		close(fd);
		return -1;
	}
	return fd;	/* kept open: the lock lives as long as the process */
}

/* The Unix socket: a stale one (nobody answers) is replaced, anything
 * else at the path is left alone and refused; the umask makes it 0600
 * from the start, chmod says so explicitly. */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "pwb-objd: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "pwb-objd: %s: another daemon answers there\n",
			path);
		close(fd);
		return -1;
	}
	close(fd);
	if (!lstat(path, &st) && !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "pwb-objd: %s: exists and is not a socket; "
			"not replacing it\n", path);
		return -1;
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		umask(old);
		goto fail_fd;
	}
	umask(old);
	if (chmod(path, 0600) || listen(fd, 1024))
		goto fail_fd;
	return fd;
fail_fd:
	close(fd);
fail:
	fprintf(stderr, "pwb-objd: %s: %s\n", path, strerror(errno));
	return -1;
}

/*
 * The TCP listener on 127.0.0.1:@port, made here rather than by
 * libmicrohttpd so that a failure (the port in use, a privileged port)
 * is reported with its port and errno. Return the socket or -1.
 */
static int listen_tcp(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd, one = 1;

	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* A restart may bind while connections of the last run linger in
	 * TIME_WAIT; a port someone listens on is still refused. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, 1024)) {
		int err = errno;

		close(fd);
		errno = err;
		goto fail;
	}
	return fd;
fail:
	fprintf(stderr, "pwb-objd: could not listen on TCP 127.0.0.1:%d: "
		"%s\n", port, strerror(errno));
	return -1;
}

/* Serve on the listening socket @fd; @where names it in a message. NULL
 * (message printed): no daemon, and @fd is closed. */
static struct MHD_Daemon *start_mhd(int fd, const char *where)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			     MHD_USE_ERROR_LOG;
	struct MHD_Daemon *d;

	/* Thread per connection: a PUT sleeps in pwb_fsync() and the index
	 * commit without holding up other clients. */
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, opt.max_conn,
			     MHD_OPTION_CONNECTION_TIMEOUT, opt.timeout_s,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)(256 << 10),
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20),
			     MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
			     MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
			     MHD_OPTION_END);
	if (!d) {
		close(fd);	/* ours to close: no daemon took it */
		fprintf(stderr, "pwb-objd: could not start the HTTP server on "
			"%s: %s\n", where,
			opt.verbose ? "libmicrohttpd's reason is above"
				    : "run with --verbose for "
				      "libmicrohttpd's reason");
	}
	return d;
}

static int close_all(void)
{
	int ret = 0;

	for (unsigned int h = 0; h < (1u << TABLE_BITS); h++) {
		struct obj *o;

		while ((o = table[h])) {
			table[h] = o->next;
			if (o->inode && pwb_inode_close(o->inode) && !ret) {
				fprintf(stderr, "pwb-objd: close: %s\n",
					pwb_errmsg());
				ret = -EIO;
			}
			free(o);
		}
	}
	return ret;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: pwb-objd --device PATH [options]\n"
"An object store over HTTP/1.1 on libpwb: PUT, GET (Range), HEAD, DELETE\n"
"/KEY; GET /?list; GET /-/stats; POST /-/sync. SIGTERM flushes everything\n"
"and exits 0 (1 if that flush fails).\n"
"\n"
"  -d, --device PATH     block device or image file (required, must exist)\n"
"  -i, --index DIR       LMDB directory of the index (default PATH.index)\n"
"  -s, --socket PATH     Unix socket, mode 0600 (default PATH.sock)\n"
"  -p, --tcp-port N      also listen on 127.0.0.1:N (default: no TCP)\n"
"  -c, --contexts N      writeback contexts (default 0: libpwb chooses)\n"
"  -P, --policy SPEC     shard policy (default: libpwb's)\n"
"  -b, --backend NAME    io_uring, psync or null (default: libpwb's)\n"
"  -C, --cache-size N    page cache bytes, K/M/G suffixes (default: libpwb's)\n"
"  -m, --max-object N    largest object, bytes (default 256M)\n"
"  -k, --max-key N       longest key, bytes (default 1024)\n"
"  -n, --max-connections N  connections at once, per listener (default 1024)\n"
"  -t, --timeout SEC     idle connection timeout (default 60)\n"
"  -K, --keep-open       keep every object's inode open (default: open on\n"
"                        demand, closed after the last request)\n"
"  -v, --verbose         log requests and libmicrohttpd's errors\n"
"  -h, --help            this text\n");
}

static int parse_uint(const char *s, unsigned int max, unsigned int *out)
{
	uint64_t v;

	if (pwbex_parse_size(s, &v) || v > max)
		return -1;
	*out = (unsigned int)v;
	return 0;
}

static char *with_suffix(const char *path, const char *suffix)
{
	char *s = NULL;

	if (asprintf(&s, "%s%s", path, suffix) < 0)
		return NULL;
	return s;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "index", required_argument, NULL, 'i' },
		{ "socket", required_argument, NULL, 's' },
		{ "tcp-port", required_argument, NULL, 'p' },
		{ "contexts", required_argument, NULL, 'c' },
		{ "policy", required_argument, NULL, 'P' },
		{ "backend", required_argument, NULL, 'b' },
		{ "cache-size", required_argument, NULL, 'C' },
		{ "max-object", required_argument, NULL, 'm' },
		{ "max-key", required_argument, NULL, 'k' },
		{ "max-connections", required_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ "keep-open", no_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct MHD_Daemon *d_unix = NULL, *d_tcp = NULL;
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	char tcp_where[32];
	char *index_dir = NULL, *sock_path = NULL;
	unsigned int port = 0;
	bool committer_started = false;
	sigset_t sigs;
	int c, fd, tcp_fd = -1, sig, ret, status = 1;

	while ((c = getopt_long(argc, argv, "d:i:s:p:c:P:b:C:m:k:n:t:Kvh",
				longopts, NULL)) != -1) {
		switch (c) {
		case 'd': opt.device = optarg; break;
		case 'i': opt.index = optarg; break;
		case 's': opt.socket = optarg; break;
		case 'p':
			if (parse_uint(optarg, 65535, &port) || !port)
				goto bad;
			opt.tcp_port = (int)port;
			break;
		case 'c':
			if (parse_uint(optarg, PWB_MAX_WB_CTX, &opt.contexts))
				goto bad;
			break;
		case 'P': opt.policy = optarg; break;
		case 'b': opt.backend = optarg; break;
		case 'C':
			if (pwbex_parse_size(optarg, &opt.cache_bytes))
				goto bad;
			break;
		case 'm':
			if (pwbex_parse_size(optarg, &opt.max_object))
				goto bad;
			break;
		case 'k':
			if (parse_uint(optarg, 65536, &opt.max_key) ||
			    !opt.max_key)
				goto bad;
			break;
		case 'n':
			if (parse_uint(optarg, 100000, &opt.max_conn) ||
			    !opt.max_conn)
				goto bad;
			break;
		case 't':
			if (parse_uint(optarg, 86400, &opt.timeout_s))
				goto bad;
			break;
		case 'K': keep_open = true; break;
		case 'v': opt.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pwb-objd: unexpected argument: %s\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!opt.device) {
		fprintf(stderr, "pwb-objd: --device is required\n");
		usage(stderr);
		return 2;
	}
	/* libpwb would take any size (raising it to 16 pages): a cache that
	 * small makes every request wait for writeback. 0 is libpwb's
	 * default. */
	if (opt.cache_bytes && opt.cache_bytes < OBJD_MIN_BYTES) {
		fprintf(stderr, "pwb-objd: --cache-size %" PRIu64 " is below "
			"the minimum of %u bytes (1M)\n", opt.cache_bytes,
			OBJD_MIN_BYTES);
		return 2;
	}
	/* The check value of CRC-32C, by both implementations: a wrong
	 * checksum would fail every verify after the fact. */
	if (crc32c_update(0, "123456789", 9) != 0xE3069283u ||
	    crc32c_update_sw(0, "123456789", 9) != 0xE3069283u) {
		fprintf(stderr, "pwb-objd: CRC-32C self-test failed\n");
		return 1;
	}
	index_dir = opt.index ? strdup(opt.index)
			      : with_suffix(opt.device, ".index");
	sock_path = opt.socket ? strdup(opt.socket)
			       : with_suffix(opt.device, ".sock");
	if (!index_dir || !sock_path)
		goto out;

	/* SIGTERM and SIGINT are taken by sigwait() below: blocked in every
	 * thread (libpwb's and MHD's inherit the mask). */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	MHD_set_panic_func(mhd_panic, NULL);

	if (lock_device(opt.device) < 0)
		goto out;
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = opt.contexts;
	cfg.policy = opt.policy;
	cfg.backend = opt.backend;
	cfg.cache_bytes = opt.cache_bytes;
	ret = pwb_bdi_open(opt.device, &cfg, &bdi);
	if (ret) {
		fprintf(stderr, "pwb-objd: %s: %s\n", opt.device, pwb_errmsg());
		goto out;
	}
	ret = pwb_bdi_info(bdi, &info);
	if (ret) {
		fprintf(stderr, "pwb-objd: %s: %s\n", opt.device, pwb_errmsg());
		goto out_bdi;
	}
	if (info.capacity < OBJD_MIN_BYTES) {
		fprintf(stderr, "pwb-objd: %s holds %" PRIu64 " bytes, below "
			"the minimum of %u bytes (1M)\n", opt.device,
			info.capacity, OBJD_MIN_BYTES);
		status = 2;
		goto out_bdi;
	}
	if (open_index(index_dir) || load_index())
		goto out_bdi;
	ret = pthread_create(&committer, NULL, committer_main, NULL);
	if (ret) {
		fprintf(stderr, "pwb-objd: committer thread: %s\n",
			strerror(ret));
		goto out_bdi;
	}
	committer_started = true;
	fd = listen_unix(sock_path);
	if (fd < 0)
		goto out_bdi;
	d_unix = start_mhd(fd, sock_path);
	if (!d_unix)
		goto out_bdi;
	snprintf(tcp_where, sizeof(tcp_where), "TCP 127.0.0.1:%d",
		 opt.tcp_port);
	if (opt.tcp_port) {
		tcp_fd = listen_tcp(opt.tcp_port);
		if (tcp_fd < 0)
			goto out_mhd;
		d_tcp = start_mhd(tcp_fd, tcp_where);
		if (!d_tcp)
			goto out_mhd;
	}
	printf("pwb-objd: serving %s on %s%s%s\n", opt.device, sock_path,
	       opt.tcp_port ? " and " : "", opt.tcp_port ? tcp_where : "");
	fflush(stdout);

	do
		ret = sigwait(&sigs, &sig);
	while (ret == EINTR);
	vlog("signal %d: stopping", sig);
	status = 0;
out_mhd:
	/* Stops accepting, ends every connection and joins its thread: the
	 * completion callbacks free the PUTs that did not finish. */
	if (d_tcp)
		MHD_stop_daemon(d_tcp);
	if (d_unix) {
		MHD_stop_daemon(d_unix);
		close(fd);
		unlink(sock_path);
	}
out_bdi:
	if (committer_started)
		committer_stop();
	if (close_all())
		status = 1;
	if (env && sync_all())
		status = 1;
	ret = pwb_bdi_close(bdi);
	if (ret) {
		fprintf(stderr, "pwb-objd: close: %s\n", pwb_strerror(ret));
		status = 1;
	}
	if (env)
		mdb_env_close(env);
out:
	free(index_dir);
	free(sock_path);
	return status;
bad:
	fprintf(stderr, "pwb-objd: bad value for option -%c: %s\n", c, optarg);
	usage(stderr);
	return 2;
}
