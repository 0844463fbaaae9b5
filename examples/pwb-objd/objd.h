/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * objd.h - what the files of pwb-objd (examples/pwb-objd) share
 *
 * The daemon's options, its counters and latency histograms (stats.c),
 * the format of its index records and the index (index.c), its group
 * commit (commit.c), the table of open object inodes (table.c), one
 * request's state (http.c, put.c), the stage workers of --threads
 * (stage.c), and the functions each of the files
 * offers the others. Each shared variable says what protects it: a lock,
 * atomic access, or "set before the first request, read-only after".
 */
#ifndef OBJD_H
#define OBJD_H

#include <lmdb.h>
#include <microhttpd.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pwb.h"
#include "hist.h"

/* ---------------------------------------------------------------- options */

/* The command line's options (pwb-objd.c): set while they are parsed,
 * read-only after. */
struct objd_opt {
	const char *index;	/* LMDB directory; default DEVICE.index */
	const char *socket;	/* default DEVICE.sock */
	int tcp_port;		/* 0: no TCP listener */
	unsigned int contexts;
	const char *policy;
	const char *backend;
	uint64_t cache_bytes;
	bool lazy_cache;		/* --lazy-cache */
	uint64_t max_object;
	unsigned int max_key;
	unsigned int max_conn;
	unsigned int timeout_s;
	uint64_t index_map;
	uint64_t inline_max;	/* bodies up to this live in the index */
	uint64_t dirty_limit;	/* 0: libpwb's */
	uint64_t bucket_dirty;	/* each bucket's own; 0: none */
	unsigned int max_buckets;
	unsigned int idle_open;	/* inodes kept open with no request */
	unsigned int threads;	/* --threads; 0: a thread per connection */
	bool verbose;
};
extern struct objd_opt opt;

/* Log a line to stderr with --verbose (log.c). */
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* libpwb's message for the calling thread's last failure, or @err's text
 * (log.c). */
const char *errtext(int err);

/* --------------------------------------------------------- counters (atomic) */

/* The daemon's counters (stats.c), each read and added to atomically
 * (CNT_GET, CNT_ADD). */
struct objd_counters {
	uint64_t puts, gets, heads, deletes, lists, syncs;
	uint64_t bytes_in, bytes_out, errors, aborted_puts, freed;
	/* time PUTs spent, summed over requests, ns */
	uint64_t write_ns, fsync_ns, commit_ns;
	/* ... in opening and closing their inodes, and in all (from the
	 * headers to the queued reply), ns */
	uint64_t open_ns, close_ns, put_ns;
	uint64_t index_commits;
	/* the group commit: records (PUTs and DELETEs) and PUTs committed,
	 * the largest batch; pwb_sync() calls of the data stage and the
	 * PUTs they covered; PUTs stored inline */
	uint64_t index_records, index_puts, batch_max;
	uint64_t data_syncs, data_sync_puts, inline_puts;
	/* connections accepted and closed */
	uint64_t connections, connections_closed;
	/* --threads: requests whose connection was suspended while a stage
	 * worker did what would have waited: PUTs' data stages, body writes
	 * and GETs' reads of pages not cached, GET ?verify's reads, POST
	 * /-/sync's syncs; and DELETEs suspended while the committer took
	 * them (no worker) */
	uint64_t stage_puts, stage_writes, stage_reads;
	uint64_t stage_verifies, stage_syncs, stage_deletes;
};
extern struct objd_counters cnt;

/* Request latency, from the headers to the last byte of the reply handed
 * to the socket, by operation. */
enum req_op { OP_PUT, OP_GET, OP_HEAD, OP_DELETE, OP_OTHER };
#define OP_NR OP_OTHER		/* OP_OTHER is not timed */
extern const char *const op_name[OP_NR];
extern struct hist lat[OP_NR];	/* lock-free (hist.h) */

/* CLOCK_MONOTONIC in nanoseconds (stats.c). */
uint64_t now_ns(void);
#define CNT_ADD(f, v) __atomic_add_fetch(&cnt.f, (v), __ATOMIC_RELAXED)
#define CNT_GET(f) __atomic_load_n(&cnt.f, __ATOMIC_RELAXED)

/* GET /-/metrics and GET /-/stats (stats.c); any request thread. */
enum MHD_Result do_metrics(struct MHD_Connection *c);
enum MHD_Result do_stats(struct MHD_Connection *c);

/* ------------------------------------------------------ open-object table */

/* An open object inode (table.c has the rules). All fields: table_lock. */
enum obj_state { OBJ_OPENING, OBJ_OPEN, OBJ_CLOSING };

struct obj {
	struct obj *next;
	uint64_t ino;		/* unique over all the devices */
	unsigned int dev;	/* the device it is on */
	struct pwb_inode *inode;	/* NULL while OPENING */
	unsigned int refs;
	enum obj_state state;
	bool dead;
	bool pinned;		/* one of refs is the index's (--keep-open) */
	bool idle;		/* on the idle list: OPEN, no reference */
	struct obj *idle_prev, *idle_next;	/* newer, older */
};

/* The table's lock; nr_open, the inodes open now, is under it. */
extern pthread_mutex_t table_lock;
extern uint64_t nr_open;	/* table_lock */
extern bool keep_open;		/* set before the first request */
/* The inode operations of every object: all NULL, allocator mode. */
extern const struct pwb_inode_ops alloc_ops;

/*
 * The table (table.c; each function's comment there says more), any
 * thread unless said: register an inode the caller opened, holding its
 * one reference (0 or -ENOMEM); take a reference to an object, opening
 * its inode if needed (0, -ENOENT if dead, or the open's error); give an
 * inode's blocks back (@discard) and close it; drop a reference; turn the
 * caller's reference into the index's (--keep-open); mark an object dead
 * once its key moved away; and, at the end with no request left, close
 * every inode still open (0 or -EIO).
 */
int table_insert(unsigned int dev, uint64_t ino, struct pwb_inode *inode,
		 struct obj **op);
int table_get(unsigned int dev, uint64_t ino, struct obj **op);
void inode_free(unsigned int dev, uint64_t ino, struct pwb_inode *inode,
		bool discard);
void table_put(struct obj *o);
void table_pin(struct obj *o);
void table_kill(unsigned int dev, uint64_t ino);
int close_all(void);

/* ------------------------------------------------------------ the index */

/* One object's record in LMDB, native byte order (an example daemon, not
 * a portable format; the version word lets a later one convert). An
 * object of --inline-max bytes or less is kept in its record (REC_INLINE:
 * ino 0, no extents, the bytes after the head); a larger one on the
 * device (REC_VERSION: its inode and extents). The version word's high
 * 16 bits are the object's device (the --device options in order, from
 * 0): 0 on one device, so its records are those of a pwb-objd from before
 * several devices, and a pwb-objd from then refuses a record of another
 * device instead of reading the wrong one. */
#define REC_VERSION 1u
#define REC_INLINE 2u
#define REC_FORMAT(v) ((v) & 0xffffu)
#define REC_DEV(v) ((v) >> 16)
struct rec {
	uint32_t version;
	uint32_t crc;		/* CRC-32C of the whole object */
	uint64_t ino;		/* 0: inline */
	uint64_t size;
	uint64_t nr_ext;
	struct pwb_extent ext[];	/* REC_INLINE: the object's bytes */
};

/* Copy a record's head out of @v: 0 or -EIO (index.c). */
int rec_head(const MDB_val *v, struct rec *h);

/* The index (index.c): opened by open_index() before the first request,
 * closed after the last; LMDB's transactions do the locking. */
extern MDB_env *env;
extern MDB_dbi db_obj;		/* key -> struct rec */
extern MDB_dbi db_meta;		/* "next_ino" -> uint64_t, "devices" */
/* The next inode number (index.c): set by load_index(), then handed out
 * with atomic increments. */
extern uint64_t next_ino;

struct objinfo {
	uint64_t ino, size;	/* ino 0: inline */
	unsigned int dev;	/* with ino */
	uint32_t crc;
	char *data;		/* inline and asked for: a malloc()ed copy */
};

/* A reference to the object of @key as the index says now (*@op NULL for
 * an inline one, its bytes in oi->data with @want_data): 0, -ENOENT,
 * -EAGAIN or another -errno (index.c); any request thread. */
int object_get(const char *key, size_t klen, struct objinfo *oi,
	       struct obj **op, bool want_data);
/* At start, before any request (index.c): open (or make) the index in
 * @dir and check its devices, 0, -1 or 2 (open_index()); then give every
 * object its extents and size, 0 or -errno (load_index()). */
int load_index(void);
int open_index(const char *dir);

/* ------------------------------------------------------- the group commit */

/* One request to the group commit (commit.c, whose head comment has the
 * picture). */
struct commit_req {
	struct commit_req *next;
	const char *key;
	size_t klen;
	bool del;		/* DELETE the key (r unused) */
	struct pwb_inode *inode; /* data to make durable first, or NULL */
	unsigned int dev;	/* with inode: its device */
	uint64_t ino, size;	/* with inode: what its record says */
	uint32_t crc;
	struct rec *r;		/* the record: the caller's, or built from
				 * the inode (the caller frees it) */
	size_t rsz;
	uint64_t old;		/* out: the ino the key named (0: none/inline) */
	unsigned int old_dev;	/* out: with old, its device */
	bool existed;		/* out: the key was there */
	int ret;		/* out */
	/* With --threads: called by the stage that finishes the request
	 * instead of posting done, after its last touch of it (the
	 * request's connection is suspended, no thread waits); ctx is its
	 * struct req. */
	void (*on_done)(struct commit_req *q);
	void *ctx;
	/* Posted once by the stage that finishes the request, after its
	 * last touch of it (the waiter may free it at once): only the
	 * requests of a batch wake, each once, and they do not wait for
	 * commit_lock on the way out. */
	sem_t done;
};

/* Run @q through the group commit and wait for it: 0 or -errno
 * (commit.c); any request thread. */
int commit_wait(struct commit_req *q);
/* Queue @q (its data durable already, or inline) for the committer
 * without waiting: 0, or -ESHUTDOWN once the committer stops (then @q is
 * not queued). Without q->on_done, q->done is set up here (commit.c). */
int commit_queue(struct commit_req *q);
/* The data stage of a PUT with an inode: its data durable (pwb_fsync()
 * waits for the device), its record built; 0 or -errno (commit.c). */
int put_durable(struct commit_req *q);
/* Start the committer thread (0 or pthread_create()'s error); drain its
 * queue and stop it, once, at the end (commit.c). */
int commit_start(void);
void commit_stop_all(void);

/* ------------------------------------------- the stage workers (--threads) */

/*
 * stage.c: with --threads a pool of libmicrohttpd threads serves every
 * connection, and a request that would wait (for the device, a bucket's
 * dirty budget, room in the cache) suspends its connection and hands a
 * job to the stage workers; the job's end resumes the connection. The
 * jobs run in queue order on OBJD_STAGE_WORKERS threads.
 */
#define OBJD_STAGE_WORKERS 32u

struct stage_job {
	struct stage_job *next;		/* stage.c's queue lock */
	void (*run)(struct stage_job *job);
};
/* The request of type @type whose member @member is the job @job. */
#define STAGE_JOB_OWNER(job, type, member)                                     \
	((type *)((char *)(job) - offsetof(type, member)))

/* Queue @job (any thread; it may run before this returns); start @n
 * workers before the first request (0 or an errno); stop them, once the
 * queue is empty, at the end. */
void stage_queue(struct stage_job *job);
int stage_start(unsigned int n);
void stage_stop_all(void);
/* Suspend @c (from its handler or content reader) for a stage: false,
 * not suspended, once suspend_drain() began; resume it (any thread; what
 * its request owns may be freed from then on); and, before the daemons
 * stop, wait until none is suspended and suspend none after. */
bool suspend_begin(struct MHD_Connection *c);
void suspend_end(struct MHD_Connection *c);
void suspend_drain(void);

/*
 * A request whose end would wait, and that replies once it has (a PUT
 * after its stages, a DELETE after its commit, GET ?verify after reading
 * the object back, POST /-/sync after the syncs), all in stage.c:
 *
 *   req_suspend()  on the pool (--threads): suspend @c for @p, which is
 *                  to reply with @on_resume once resumed; false without
 *                  --threads or once suspend_drain() began: the caller
 *                  waits on its own thread and replies itself;
 *   req_stage()    then hand @run to a stage worker (the job p->job);
 *   req_commit()   or queue p->cq for the committer, unless @err says the
 *                  request failed already (0: queue it);
 *   req_resume()   whoever ends the wait (the job, the committer through
 *                  p->cq.on_done, a failed req_commit()): mark @p done
 *                  and resume its connection, after its last touch of @p;
 *
 * and libmicrohttpd calls the handler again, which calls @on_resume
 * (http.c). A connection closed meanwhile (a shutdown after the resume)
 * ends without it: what only @on_resume would let go of must be let go
 * of by the completion callback, or at exit (close_all()).
 */
struct req;
typedef enum MHD_Result (*req_reply_fn)(struct MHD_Connection *c,
					struct req *p);
bool req_suspend(struct MHD_Connection *c, struct req *p,
		 req_reply_fn on_resume);
void req_stage(struct req *p, void (*run)(struct stage_job *job));
void req_commit(struct req *p, int err);
void req_resume(struct req *p);

/* --------------------------------------------------------------- requests */

/*
 * One request's state, from its first call to the completion callback
 * (every request has one: its start time is what the latency histograms
 * measure from).
 *
 *   REQ_PUT      a PUT being received: the body goes into buf while it
 *                fits --inline-max, else (or once it grows past) into a
 *                new inode;
 *   REQ_REFUSED  a request answered with status once its body (dropped)
 *                is read, so that the connection stays open for the next
 *                one; early: answered already, before the body;
 *   REQ_WHOLE    every other method, answered once the request is whole.
 */
enum req_kind { REQ_PUT = 1, REQ_REFUSED, REQ_WHOLE };

/*
 * A large body goes to its inode in units of this size, at offsets that
 * are multiples of it (put_body()): libpwb writes each as one folio.
 * 256 KiB: a quarter of the writes of 64 KiB units (libpwb's smallest
 * folio) for the same copy; the buffer is the request's while its body
 * arrives.
 */
#define OBJD_STAGE_BYTES (256u << 10)

struct req {
	enum req_kind kind;
	enum req_op op;
	unsigned int status;	/* REQ_REFUSED */
	bool early;		/* REQ_REFUSED: answered before the body */
	uint64_t dropped;	/* REQ_REFUSED: body bytes read and dropped */
	uint64_t t_begin;	/* now_ns() when the headers arrived */
	/* --threads: the request waits suspended (REQ_WAITING, req_suspend())
	 * until whoever ends the wait marks it REQ_DONE and resumes it; then
	 * libmicrohttpd calls the handler, which calls wait_reply. The pool
	 * thread writes stage, conn and wait_reply before the suspension, the
	 * thread that ends the wait writes what it found before the resume:
	 * libmicrohttpd's resume orders the two. */
	enum { REQ_RUNNING, REQ_WAITING, REQ_DONE } stage;
	req_reply_fn wait_reply;
	struct MHD_Connection *conn;	/* with stage or tail_wait */
	struct stage_job job;	/* a body write, the data stage, a verify's
				 * read, a sync */
	/* REQ_PUT: */
	char *key;
	size_t klen;
	struct bucket *bucket;	/* the key's */
	unsigned int dev;	/* with inode: the device it is on */
	uint64_t ino;		/* with inode */
	struct pwb_inode *inode;	/* NULL while the body is inline */
	char *buf;		/* the inline body so far */
	size_t cap;		/* buf's size */
	/* With inode: the body's last bytes, short of a whole unit (unit:
	 * OBJD_STAGE_BYTES rounded up to the bdi's page size, 0 if that is
	 * unknown), wait in tail (unit bytes) until the next chunk
	 * completes the unit or the body ends (put_body()). */
	char *tail;
	size_t tail_len, unit;
	/* --threads: tail_done bytes of a whole tail are written; tail_wait:
	 * the rest would have waited, and a stage worker writes it while the
	 * connection is suspended (put.c, put_body_pool()) */
	size_t tail_done;
	bool tail_wait;
	uint64_t off;		/* body bytes received */
	uint32_t crc;
	int err;		/* first error; the rest of the body is dropped
				 * (POST /-/sync: sync_all()'s result) */
	bool committed;		/* the inode belongs to the table now */
	bool too_big;
	/* The body is whole: its trip through the group commit (cq; a
	 * DELETE's too), the open object it made (obj, with an inode), when
	 * it began. */
	struct commit_req cq;
	struct obj *obj;
	uint64_t t_commit;
	/* GET ?verify of an object on a device (handlers.c): its
	 * reference and the read's buffer (both dropped once it is read),
	 * its size and CRC-32C as the index says, then the bytes read, their
	 * CRC-32C and the read's error. */
	struct {
		struct obj *o;
		char *buf;
		uint64_t size, pos;
		uint32_t crc, got;
		int err;
	} vf;
};

/*
 * A refused request's body up to this size is read and dropped, so that
 * the refusal keeps the connection (a reply queued before the body makes
 * libmicrohttpd close it: it cannot know where the next request starts).
 * A larger one is refused before it is read, and the connection closes.
 */
#define OBJD_DRAIN_MAX (1u << 20)

/*
 * reply.c, on libmicrohttpd's connection threads: queue a text/plain
 * reply (a status of 400 or more counts as an error); the HTTP status of
 * an -errno; check the key of @url (0 or an HTTP status, its length in
 * *@klen); libmicrohttpd's URL unescaping.
 */
enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
		      const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
unsigned int errno_status(int err);
unsigned int check_key(const char *url, size_t *klen);
size_t unescape(void *cls, struct MHD_Connection *c, char *s);

/* http.c, libmicrohttpd's callbacks on its connection threads: the
 * request handler, which dispatches to the handlers below, and the
 * completion callback. */
enum MHD_Result handle(void *cls, struct MHD_Connection *c,
		       const char *url, const char *method,
		       const char *version, const char *upload_data,
		       size_t *upload_data_size, void **con_cls);
void done_cb(void *cls, struct MHD_Connection *c, void **con_cls,
	     enum MHD_RequestTerminationCode toe);

/* The PUT path (put.c), on the request's connection thread: start it
 * (0, or the HTTP status refusing it; *@early: refuse before the body);
 * take the body's next bytes (the bytes taken: all of them unless
 * p->tail_wait is set, which put_wait_tail() then answers by suspending
 * the connection while a stage worker writes); and finish it once the
 * body is whole (data durable, then the index, then the reply). */
unsigned int put_begin(struct MHD_Connection *c, const char *url,
		       struct req *p, bool *early);
size_t put_data(struct req *p, const char *data, size_t len);
void put_wait_tail(struct MHD_Connection *c, struct req *p);
enum MHD_Result put_finish(struct MHD_Connection *c, struct req *p);

/* GET and HEAD of an object, GET /?list, DELETE, POST /-/sync
 * (handlers.c), on a connection thread, @p the request (GET ?verify,
 * DELETE and the sync may wait suspended: req_suspend()); sync_all(),
 * POST /-/sync's and the exit's: every device and the index synced, 0 or
 * the first -errno. */
enum MHD_Result do_get(struct MHD_Connection *c, const char *url, bool head,
		       struct req *p);
enum MHD_Result do_list(struct MHD_Connection *c);
enum MHD_Result do_delete(struct MHD_Connection *c, const char *url,
			  struct req *p);
enum MHD_Result do_sync(struct MHD_Connection *c, struct req *p);
int sync_all(void);

/* ------------------------------------------------------------- listeners */

/* listen.c, from main(): the listening Unix socket at @path, or the TCP
 * one on 127.0.0.1:@port (the socket, or -1 with a message printed); a
 * libmicrohttpd daemon serving @fd (NULL with a message printed, @fd
 * closed); and libmicrohttpd's panic function (prints, aborts). */
int listen_unix(const char *path);
int listen_tcp(int port);
struct MHD_Daemon *start_mhd(int fd, const char *where);
void mhd_panic(void *cls, const char *file, unsigned int line,
	       const char *reason);

#endif /* OBJD_H */
