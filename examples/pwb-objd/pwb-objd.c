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
 * Data lives on one or more bdis (devices or images, one libpwb domain)
 * in allocator-mode inodes: each object one inode, on the device a hash
 * of its key picks (devices.c), written with pwb_write() as the body
 * arrives, in the tenant of its bucket, the key's first path segment
 * (buckets.c); objects up to --inline-max live in their index record
 * instead. The index (key -> device, ino, size, CRC-32C, extents) lives
 * in LMDB and is changed only after the object's data is durable (a
 * pwb_fsync() of its inode, then one LMDB commit per batch: the group
 * commit): data before metadata. A PUT of an existing key writes a new
 * inode and switches the
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
#include <semaphore.h>
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
#include "hist.h"
#include "buckets.h"
#include "devices.h"
#include "pwb-example-util.h"

#include "objd.h"

/* ---------------------------------------------------------------- options */

/* The smallest --cache-size taken: 256 pages of 4 KiB. */
#define OBJD_MIN_BYTES (1u << 20)

struct objd_opt opt = {
	.max_buckets = 1000,
	.idle_open = 256,
	.max_object = 256ull << 20,
	.max_key = 1024,
	.max_conn = 1024,
	.timeout_s = 60,
	.index_map = 1ull << 30,
	.inline_max = 16 << 10,
};

/* The largest --inline-max: LMDB keeps a larger value in overflow pages
 * that every commit writes whole, and the index map (1 GiB) fills. */
#define OBJD_MAX_INLINE (128u << 10)

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

/* --------------------------------------------------------- counters (atomic) */

struct objd_counters cnt;

const char *const op_name[OP_NR] = { "put", "get", "head", "delete" };
struct hist lat[OP_NR];

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* The daemon's counters, as C(name) for the JSON and the metrics. */
#define OBJD_COUNTERS                                                          \
	C(puts) C(gets) C(heads) C(deletes) C(lists) C(syncs)                  \
	C(bytes_in) C(bytes_out) C(errors) C(aborted_puts) C(freed)            \
	C(write_ns) C(fsync_ns) C(commit_ns) C(index_commits)                  \
	C(open_ns) C(close_ns) C(put_ns) C(index_records) C(index_puts)        \
	C(batch_max) C(data_syncs) C(data_sync_puts) C(inline_puts)            \
	C(connections) C(connections_closed)

/*
 * libpwb's counters of every device, added up into @sum (with one device,
 * its own; with several, fields that are not counts, such as
 * imbalance_milli or the auto_* choices, add up to nothing meaningful:
 * the devices' own are in /-/stats "devices"). 0, or 1 with the
 * failing device's message in pwb_errmsg().
 */
static int stats_sum(struct pwb_stats *sum)
{
	struct pwb_stats st;

	memset(sum, 0, sizeof(*sum));
	for (unsigned int d = 0; d < nr_devs; d++) {
		if (pwb_bdi_stats(dev_bdi(d), &st))
			return 1;
#define X(name) sum->name += st.name;
		PWB_STATS_FIELDS
#undef X
	}
	return 0;
}

/* @s as JSON string contents: '"', '\\' and control bytes escaped. */
static void json_str(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
}

/* One histogram snapshot at a time (they are large for a stack). */
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

/* A response of @sz bytes at @buf (freed with it) and @type, queued. */
static enum MHD_Result reply_text(struct MHD_Connection *c, char *buf,
				  size_t sz, const char *type)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(sz, buf, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result mret;

	if (!resp) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", type);
	mret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return mret;
}

/* The objects in the index and the inodes open now. */
static void count_objects(size_t *objects, uint64_t *open_now)
{
	MDB_stat ms = { 0 };
	MDB_txn *txn;

	if (!mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) {
		mdb_stat(txn, db_obj, &ms);
		mdb_txn_abort(txn);
	}
	*objects = ms.ms_entries;
	pthread_mutex_lock(&table_lock);
	*open_now = nr_open;
	pthread_mutex_unlock(&table_lock);
}

/*
 * GET /-/metrics: the Prometheus text format (version 0.0.4). The
 * daemon's counters as objd_NAME_total, the objects and open inodes as
 * gauges, the latency of each operation as the histogram
 * objd_request_duration_seconds{op=...} (one bucket per power of two of
 * nanoseconds, from 1.024 us), and struct pwb_stats as pwb_NAME (untyped:
 * counters and gauges mixed).
 */
enum MHD_Result do_metrics(struct MHD_Connection *c)
{
	static struct hist snap;	/* stats_lock */
	struct pwb_stats st;
	uint64_t open_now, n, cum;
	size_t objects, sz = 0;
	char *buf = NULL;
	FILE *f;

	if (stats_sum(&st))
		return reply(c, 500, "stats: %s\n", pwb_errmsg());
	count_objects(&objects, &open_now);
	f = open_memstream(&buf, &sz);
	if (!f)
		return MHD_NO;
	fprintf(f, "# HELP objd_objects Objects in the index.\n"
		"# TYPE objd_objects gauge\nobjd_objects %zu\n"
		"# HELP objd_open_inodes Object inodes open now.\n"
		"# TYPE objd_open_inodes gauge\nobjd_open_inodes %" PRIu64
		"\n", objects, open_now);
#define C(name) fprintf(f, "# HELP objd_" #name "_total pwb-objd counter " \
			#name " (README.md).\n# TYPE objd_" #name           \
			"_total counter\nobjd_" #name "_total %" PRIu64 "\n", \
			CNT_GET(name));
	OBJD_COUNTERS
#undef C
	fprintf(f, "# HELP objd_request_duration_seconds Time from a "
		"request's headers to the end of its reply.\n"
		"# TYPE objd_request_duration_seconds histogram\n");
	pthread_mutex_lock(&stats_lock);
	for (unsigned int i = 0; i < OP_NR; i++) {
		n = hist_snapshot(&lat[i], &snap);
		cum = 0;
		for (unsigned int b = 0; b < HIST_NR - 1; b++) {
			cum += snap.b[b];
			/* The last sub-bucket of each power of two. */
			if (b % HIST_SUB)
				continue;
			fprintf(f, "objd_request_duration_seconds_bucket{op=\"%s\""
				",le=\"%.9g\"} %" PRIu64 "\n", op_name[i],
				(double)hist_upper_ns(b) / 1e9, cum);
		}
		fprintf(f, "objd_request_duration_seconds_bucket{op=\"%s\","
			"le=\"+Inf\"} %" PRIu64 "\n"
			"objd_request_duration_seconds_sum{op=\"%s\"} %.9f\n"
			"objd_request_duration_seconds_count{op=\"%s\"} %" PRIu64
			"\n", op_name[i], n, op_name[i],
			(double)snap.sum_ns / 1e9, op_name[i], n);
	}
	pthread_mutex_unlock(&stats_lock);
#define X(name) fprintf(f, "# TYPE pwb_" #name " untyped\npwb_" #name      \
			" %" PRIu64 "\n", (uint64_t)st.name);
	PWB_STATS_FIELDS
#undef X
	buckets_metrics(f);
	if (fclose(f)) {
		free(buf);
		return MHD_NO;
	}
	return reply_text(c, buf, sz, "text/plain; version=0.0.4");
}

/* GET /-/stats: {"objects": .., "objd": {..}, "latency": {..},
 * "pwb": {..} (the devices' sum), "buckets": {NAME: {..}, ..},
 * "devices": [{"path": .., "pwb": {..}}, ..]}. */
enum MHD_Result do_stats(struct MHD_Connection *c)
{
	struct pwb_stats st;
	uint64_t open_now;
	size_t objects, sz = 0;
	char *buf = NULL;
	FILE *f;
	int ret;

	ret = stats_sum(&st);
	if (ret)
		return reply(c, 500, "stats: %s\n", pwb_errmsg());
	count_objects(&objects, &open_now);
	f = open_memstream(&buf, &sz);
	if (!f)
		return MHD_NO;
	fprintf(f, "{\n  \"objects\": %zu,\n  \"open_inodes\": %" PRIu64
		",\n  \"objd\": {", objects, open_now);
#define C(name) fprintf(f, "%s\"" #name "\": %" PRIu64, first ? "" : ", ", \
			CNT_GET(name)), first = false;
	{
		bool first = true;

		OBJD_COUNTERS
	}
#undef C
	fprintf(f, "},\n  \"puts_per_commit\": %.2f,\n  \"latency\": {",
		CNT_GET(index_commits) ?
		(double)CNT_GET(index_puts) / (double)CNT_GET(index_commits) :
		0.0);
	for (unsigned int i = 0; i < OP_NR; i++) {
		static struct hist snap;	/* stats_lock */
		uint64_t n;

		pthread_mutex_lock(&stats_lock);
		n = hist_snapshot(&lat[i], &snap);
		fprintf(f, "%s\n    \"%s\": {\"count\": %" PRIu64
			", \"mean_us\": %.1f, \"p50_us\": %.1f, "
			"\"p99_us\": %.1f, \"p999_us\": %.1f}",
			i ? "," : "", op_name[i], n,
			n ? (double)snap.sum_ns / (double)n / 1e3 : 0.0,
			hist_quantile(&snap, n, 500000) / 1e3,
			hist_quantile(&snap, n, 990000) / 1e3,
			hist_quantile(&snap, n, 999000) / 1e3);
		pthread_mutex_unlock(&stats_lock);
	}
	fprintf(f, "\n  },\n  \"pwb\": {");
	{
		bool first = true;
#define X(name) fprintf(f, "%s\n    \"" #name "\": %" PRIu64,              \
			first ? "" : ",", st.name), first = false;
		PWB_STATS_FIELDS
#undef X
	}
	fprintf(f, "\n  },\n  \"buckets\": {");
	buckets_json(f);
	fprintf(f, "\n  },\n  \"devices\": [");
	for (unsigned int d = 0; d < nr_devs; d++) {
		bool first = true;

		if (pwb_bdi_stats(dev_bdi(d), &st))
			memset(&st, 0, sizeof(st));
		fprintf(f, "%s\n    {\"path\": \"", d ? "," : "");
		json_str(f, devs[d].path);
		fprintf(f, "\", \"pwb\": {");
#define X(name) fprintf(f, "%s\"" #name "\": %" PRIu64, first ? "" : ", ",   \
			(uint64_t)st.name), first = false;
		PWB_STATS_FIELDS
#undef X
		fprintf(f, "}}");
	}
	fprintf(f, "\n  ]\n}\n");
	if (fclose(f)) {
		free(buf);
		return MHD_NO;
	}
	return reply_text(c, buf, sz, "application/json");
}

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

/* The body is whole: its last part page to the inode. 0 or -errno. */
static int put_tail(struct req *p)
{
	int ret;

	if (!p->tail_len)
		return 0;
	ret = put_write(p, p->tail, p->tail_len, p->off - p->tail_len);
	p->tail_len = 0;
	return ret;
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

void put_data(struct req *p, const char *data, size_t len)
{
	if (p->err || p->too_big)
		return;
	if (p->off + len > opt.max_object) {
		p->too_big = true;	/* chunked, without Content-Length */
		return;
	}
	uint64_t t0 = now_ns();

	p->crc = crc32c_update(p->crc, data, len);
	if (!p->inode && p->off + len <= opt.inline_max) {
		if (!p->buf) {
			p->cap = opt.inline_max;
			p->buf = malloc(p->cap);
			if (!p->buf) {
				p->err = -ENOMEM;
				return;
			}
		}
		memcpy(p->buf + p->off, data, len);
		p->off += len;
		CNT_ADD(write_ns, now_ns() - t0);
		return;
	}
	if (!p->inode) {
		p->err = put_spill(p);
		if (p->err)
			return;
	}
	p->err = put_body(p, data, len);
	CNT_ADD(write_ns, now_ns() - t0);
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

/*
 * The body is complete: data durable, then the index, then the reply,
 * through the group commit. A body on the device goes through the sync
 * stage first; an inline one straight to the index commit, which makes
 * it durable with the record that holds it.
 */
enum MHD_Result put_finish(struct MHD_Connection *c, struct req *p)
{
	struct commit_req q = { .key = p->key, .klen = p->klen };
	struct obj *o = NULL;
	uint64_t t0;
	int ret;

	if (p->too_big)
		return reply(c, 413, "object larger than %" PRIu64 " bytes\n",
			     opt.max_object);
	if (!p->err && p->inode)
		p->err = put_tail(p);
	if (p->err)
		goto fail;
	if (!p->inode) {
		q.r = inline_rec(p, &q.rsz);
		if (!q.r) {
			p->err = -ENOMEM;
			goto fail;
		}
	} else {
		q.inode = p->inode;
		q.dev = p->dev;
		q.ino = p->ino;
		q.size = p->off;
		q.crc = p->crc;
		/* In the table before the key can name it: a GET right
		 * after the commit finds it open. Nobody else knows the
		 * ino yet. */
		ret = table_insert(p->dev, p->ino, p->inode, &o);
		if (ret) {
			p->err = ret;
			goto fail;
		}
		p->committed = true;	/* the table owns the inode now */
	}
	t0 = now_ns();
	ret = commit_wait(&q);
	CNT_ADD(commit_ns, now_ns() - t0);
	if (ret) {
		if (o) {
			table_kill(p->dev, p->ino);
			table_put(o);
		}
		p->err = ret;
		goto fail;
	}
	p->committed = true;	/* inline: nothing to free any more */
	t0 = now_ns();
	if (q.old)
		table_kill(q.old_dev, q.old);
	if (o && keep_open)
		table_pin(o);
	else if (o)
		table_put(o);	/* closes it, unless a GET has it already */
	CNT_ADD(close_ns, now_ns() - t0);
	free(q.r);
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
		mret = MHD_queue_response(c, q.existed ? 204 : 201, resp);
		MHD_destroy_response(resp);
		CNT_ADD(put_ns, now_ns() - p->t_begin);
		return mret;
	}
fail:
	free(q.r);
	return reply(c, errno_status(p->err), "PUT failed: %s\n",
		     pwb_strerror(p->err));
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

/* HEAD of an inline object: never called (HEAD has no body). */
static ssize_t get_none(void *cls, uint64_t pos, char *buf, size_t max)
{
	return MHD_CONTENT_READER_END_WITH_ERROR;
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

/* Drop what object_get() gave: the reference, or the inline bytes. */
static void object_put(struct obj *o, struct objinfo *oi)
{
	if (o)
		table_put(o);
	free(oi->data);
	oi->data = NULL;
}

/* GET /KEY?verify: read the object back from libpwb (an inline one: from
 * the index) and compare its CRC-32C with the index's: 200 "ok CRC SIZE"
 * or 500 "mismatch ...". */
static enum MHD_Result do_verify(struct MHD_Connection *c, struct obj *o,
				 struct objinfo *oi)
{
	size_t bsz = 1 << 20;
	char *buf = o ? malloc(bsz) : NULL;
	uint64_t pos = 0;
	uint32_t crc = 0;
	ssize_t n = 0;

	if (!o) {
		crc = crc32c_update(0, oi->data, oi->size);
		pos = oi->size;
		object_put(o, oi);
		goto check;
	}
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
check:
	if (pos != oi->size || crc != oi->crc)
		return reply(c, 500, "mismatch: read %" PRIu64 " bytes crc %08x,"
			     " index says %" PRIu64 " bytes crc %08x\n", pos, crc,
			     oi->size, oi->crc);
	return reply(c, 200, "ok %08x %" PRIu64 "\n", crc, oi->size);
}

enum MHD_Result do_get(struct MHD_Connection *c, const char *url,
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
	ret = object_get(url + 1, klen, &oi, &o, !head);
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

enum MHD_Result do_delete(struct MHD_Connection *c, const char *url)
{
	unsigned int status, old_dev = 0;
	uint64_t old = 0;
	size_t klen;
	int ret;

	status = check_key(url, &klen);
	if (status)
		return reply(c, status, "bad key\n");
	ret = index_delete(url + 1, klen, &old, &old_dev);
	if (ret)
		return reply(c, errno_status(ret), "%s\n",
			     ret == -ENOENT ? "no such key" : pwb_strerror(ret));
	if (old)
		table_kill(old_dev, old);
	CNT_ADD(deletes, 1);
	return reply(c, 204, "%s", "");
}

/* Connections opened and closed (a client without keep-alive shows as
 * many connections as requests). */
static void conn_cb(void *cls, struct MHD_Connection *c, void **socket_ctx,
		    enum MHD_ConnectionNotificationCode code)
{
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		CNT_ADD(connections, 1);
	else
		CNT_ADD(connections_closed, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (!opt.verbose)
		return;
	fputs("pwb-objd: mhd: ", stderr);
	vfprintf(stderr, fmt, ap);
}

void mhd_panic(void *cls, const char *file, unsigned int line,
	       const char *reason)
{
	fprintf(stderr, "pwb-objd: libmicrohttpd failed at %s:%u: %s\n",
		file ? file : "?", line, reason ? reason : "?");
	abort();
}

/* The Unix socket: a stale one (nobody answers) is replaced, anything
 * else at the path is left alone and refused; the umask makes it 0600
 * from the start, chmod says so explicitly. */
int listen_unix(const char *path)
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
int listen_tcp(int port)
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
struct MHD_Daemon *start_mhd(int fd, const char *where)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			     MHD_USE_ERROR_LOG;
	struct MHD_Daemon *d;

	/*
	 * Thread per connection: a PUT sleeps in the group commit without
	 * holding up other clients. The connection's memory: libmicrohttpd
	 * reads into half of it, and clears all of it before each request
	 * of a kept connection. 128 KiB reads a 1 MiB body from curl in 19
	 * recv()s (256 KiB: 17, 64 KiB: 35) and clears half of what 256 KiB
	 * did (the clear was 8% of the daemon's time on 4 KiB PUTs).
	 */
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, opt.max_conn,
			     MHD_OPTION_CONNECTION_TIMEOUT, opt.timeout_s,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)(128 << 10),
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20),
			     MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
			     MHD_OPTION_NOTIFY_CONNECTION, conn_cb, NULL,
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

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fprintf(f,
"Usage: pwb-objd --device PATH [--device PATH]... [options]\n"
"An object store over HTTP/1.1 on libpwb: PUT, GET (Range), HEAD, DELETE\n"
"/KEY; GET /?list; GET /-/stats; POST /-/sync. SIGTERM flushes everything\n"
"and exits 0 (1 if that flush fails).\n"
"\n"
"  -d, --device PATH     block device or image file (required, must exist);\n"
"                        again for more devices (up to 64), in one memory\n"
"                        domain, objects placed by a hash of the key\n"
"  -i, --index DIR       LMDB directory of the index (default PATH.index,\n"
"                        of the first --device)\n"
"  -s, --socket PATH     Unix socket, mode 0600 (default PATH.sock)\n"
"  -p, --tcp-port N      also listen on 127.0.0.1:N (default: no TCP)\n"
"  -c, --contexts N      writeback contexts (default 0: libpwb chooses)\n"
"  -P, --policy SPEC     shard policy (default: libpwb's)\n"
"  -b, --backend NAME    io_uring, psync or null (default: libpwb's)\n"
"  -C, --cache-size N    page cache bytes, K/M/G suffixes (default: libpwb's)\n"
"  -F, --lazy-cache      map the page cache's memory as it fills (default:\n"
"                        all of it faulted in at start, so the first\n"
"                        requests do not pay for fresh memory)\n"
"  -m, --max-object N    largest object, bytes (default 256M)\n"
"  -k, --max-key N       longest key, bytes (default 1024)\n"
"  -n, --max-connections N  connections at once, per listener (default 1024)\n"
"  -t, --timeout SEC     idle connection timeout (default 60)\n"
"  -K, --keep-open       keep every object's inode open (default: open on\n"
"                        demand, closed after the last request)\n"
"  -O, --idle-open N     inodes kept open after their last request, their\n"
"                        pages cached for the next (default 256; 0:\n"
"                        closed at once)\n"
"  -I, --inline-max N    objects up to N bytes live in the index, not on\n"
"                        the device (default 16K, at most 128K; 0: none)\n"
"  -w, --bucket-weight NAME=W  weight of bucket NAME (the first segment of\n"
"                        its keys), 1 to 10000; again for more buckets;\n"
"                        the others weigh 100\n"
"  -R, --bucket-rate NAME=N  cap on bucket NAME's writeback, bytes per\n"
"                        second, K/M/G suffixes; again for more buckets\n"
"  -B, --bucket-dirty N  each bucket's own limit on its dirty bytes, K/M/G\n"
"                        suffixes (default 0: its share of --dirty-limit)\n"
"  -L, --dirty-limit N   dirty bytes of all the devices together at which\n"
"                        writers wait (default: libpwb's, 256M a device)\n"
"  -M, --max-buckets N   buckets at most; a PUT that would make one more\n"
"                        gets 507 (default 1000)\n"
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
		{ "lazy-cache", no_argument, NULL, 'F' },
		{ "inline-max", required_argument, NULL, 'I' },
		{ "idle-open", required_argument, NULL, 'O' },
		{ "bucket-weight", required_argument, NULL, 'w' },
		{ "bucket-rate", required_argument, NULL, 'R' },
		{ "bucket-dirty", required_argument, NULL, 'B' },
		{ "dirty-limit", required_argument, NULL, 'L' },
		{ "max-buckets", required_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct MHD_Daemon *d_unix = NULL, *d_tcp = NULL;
	struct pwb_bdi_config cfg;
	char tcp_where[32];
	char *index_dir = NULL, *sock_path = NULL;
	unsigned int port = 0;
	bool committer_started = false;
	sigset_t sigs;
	int c, fd, tcp_fd = -1, sig, ret, status = 1;

	while ((c = getopt_long(argc, argv,
				"d:i:s:p:c:P:b:C:Fm:k:n:t:KO:I:w:R:B:L:M:vh",
				longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (devs_add(optarg))
				return 2;
			break;
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
		case 'F': opt.lazy_cache = true; break;
		case 'O':
			if (parse_uint(optarg, 1000000, &opt.idle_open))
				goto bad;
			break;
		case 'I':
			if (pwbex_parse_size(optarg, &opt.inline_max) ||
			    opt.inline_max > OBJD_MAX_INLINE)
				goto bad;
			break;
		case 'w':
			if (buckets_weight_arg(optarg))
				return 2;
			break;
		case 'R':
			if (buckets_rate_arg(optarg))
				return 2;
			break;
		case 'B':
			if (pwbex_parse_size(optarg, &opt.bucket_dirty))
				goto bad;
			break;
		case 'L':
			if (pwbex_parse_size(optarg, &opt.dirty_limit))
				goto bad;
			break;
		case 'M':
			if (parse_uint(optarg, 100000, &opt.max_buckets) ||
			    !opt.max_buckets)
				goto bad;
			break;
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
	if (!nr_devs) {
		fprintf(stderr, "pwb-objd: --device is required\n");
		usage(stderr);
		return 2;
	}
	/* Below a few pages the throttle would stop every writer at once. */
	if (opt.dirty_limit && opt.dirty_limit < OBJD_MIN_BYTES) {
		fprintf(stderr, "pwb-objd: --dirty-limit %" PRIu64 " is below "
			"the minimum of %u bytes (1M)\n", opt.dirty_limit,
			OBJD_MIN_BYTES);
		return 2;
	}
	if (opt.bucket_dirty && opt.bucket_dirty < (256u << 10)) {
		fprintf(stderr, "pwb-objd: --bucket-dirty %" PRIu64 " is below "
			"the minimum of %u bytes (256K)\n", opt.bucket_dirty,
			256u << 10);
		return 2;
	}
	buckets_config(opt.bucket_dirty, opt.max_buckets);
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
			      : with_suffix(devs[0].path, ".index");
	sock_path = opt.socket ? strdup(opt.socket)
			       : with_suffix(devs[0].path, ".sock");
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

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = opt.contexts;
	cfg.policy = opt.policy;
	cfg.backend = opt.backend;
	cfg.cache_bytes = opt.cache_bytes;
	/* Writers wait for writeback at the dirty limits: each bucket's at
	 * its tenant's, so that a flooded bucket holds up only itself. */
	cfg.flags |= PWB_BDI_THROTTLE;
	if (!opt.lazy_cache)
		cfg.flags |= PWB_BDI_CACHE_PREFAULT;
	ret = devs_open(&cfg, opt.dirty_limit);
	if (ret) {
		status = ret;
		goto out_bdi;
	}
	if (buckets_start(devs_domain, dev_bdi(0)))
		goto out_bdi;
	ret = open_index(index_dir);
	if (ret) {
		status = ret > 0 ? ret : 1;
		goto out_bdi;
	}
	if (load_index())
		goto out_bdi;
	ret = commit_start();
	if (ret) {
		fprintf(stderr, "pwb-objd: committer threads: %s\n",
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
	printf("pwb-objd: serving ");
	for (unsigned int d = 0; d < nr_devs; d++)
		printf("%s%s", d ? ", " : "", devs[d].path);
	printf(" on %s%s%s\n", sock_path, opt.tcp_port ? " and " : "",
	       opt.tcp_port ? tcp_where : "");
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
		commit_stop_all();
	if (close_all())
		status = 1;
	if (env && sync_all())
		status = 1;
	if (devs_close())
		status = 1;
	buckets_destroy();
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
