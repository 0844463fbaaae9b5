// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * commit.c - pwb-objd's group commit (examples/pwb-objd): each PUT's data
 * made durable on its own thread, then every queued record (PUTs and
 * DELETEs) in one LMDB transaction by the committer thread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objd.h"
#include "pwb-example-util.h"

/*
 * Group commit, data first:
 *
 *   PUT, body in the cache --[its own thread: pwb_fsync() of its inode,
 *                             then its extents into its record]
 *                                  |
 *   inline PUT, DELETE -------> commit queue --[committer: one LMDB
 *                                               transaction] --> replies
 *
 * Each PUT makes its own data durable (put_durable()): concurrent ones
 * share device flushes, and none waits for another's data. The committer
 * takes everything queued into one LMDB transaction (which syncs twice)
 * and wakes the requests. It does not wait for company: on an idle
 * daemon a lone PUT goes through at once; under load the queue fills
 * while it commits, so batches grow with the load, and the data of the
 * next batch is flushed while it commits this one. Data is durable
 * before the commit that names it (README.md, "Group commit", argues the
 * order).
 */

static pthread_mutex_t commit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t commit_work = PTHREAD_COND_INITIALIZER;
/* All commit_lock: */
static struct commit_req *commit_head, **commit_tail = &commit_head;
static bool commit_stop;
static pthread_t committer;

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
		q->existed = rc == 0;
		if (rc == 0 && !rec_head(&v, &h) &&
		    REC_FORMAT(h.version) != REC_INLINE) {
			q->old = h.ino;
			q->old_dev = REC_DEV(h.version);
		} else if (rc && rc != MDB_NOTFOUND) {
			return rc;
		}
		if (q->del) {
			/* In order: a PUT earlier in the batch is seen. */
			if (rc == MDB_NOTFOUND)
				continue;
			rc = mdb_del(txn, db_obj, &k, NULL);
			if (rc)
				return rc;
			continue;
		}
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

static int commit_result(const struct commit_req *q, int rc)
{
	if (rc)
		return lmdb_errno(rc);
	return q->del && !q->existed ? -ENOENT : 0;
}

static void *committer_main(void *arg)
{
	struct commit_req *batch, *q, *next;
	uint64_t n, puts, max;
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
		CNT_ADD(index_commits, 1);
		if (rc && batch->next) {
			/* One bad record (a full map) must not fail the
			 * others: commit each alone. */
			for (q = batch; q; q = next) {
				next = q->next;
				q->next = NULL;
				q->ret = commit_result(q, commit_batch(q));
				q->next = next;
				CNT_ADD(index_commits, 1);
			}
		} else {
			for (q = batch; q; q = q->next)
				q->ret = commit_result(q, rc);
		}
		if (rc)
			fprintf(stderr, "pwb-objd: index commit: %s\n",
				mdb_strerror(rc));
		n = puts = 0;
		for (q = batch; q; q = q->next) {
			n++;
			puts += !q->del && !q->ret;
		}
		CNT_ADD(index_records, n);
		CNT_ADD(index_puts, puts);
		max = CNT_GET(batch_max);
		if (n > max)	/* this thread is its only writer */
			__atomic_store_n(&cnt.batch_max, n, __ATOMIC_RELAXED);
		for (q = batch; q; q = next) {
			next = q->next;
			/* q may be gone after either */
			if (q->on_done)
				q->on_done(q);
			else
				sem_post(&q->done);
		}
		pthread_mutex_lock(&commit_lock);
	}
	pthread_mutex_unlock(&commit_lock);
	return NULL;
}

/* The record of a PUT whose data is durable now: its extents are final
 * (libpwb allocates at writeback). 0 or -errno. */
static int build_rec(struct commit_req *q)
{
	struct pwb_extent *ext = NULL;
	size_t total = 0;
	struct rec *r;
	int ret;

	ret = pwbex_inode_extents(q->inode, &ext, &total);
	if (ret)
		return ret;
	q->rsz = sizeof(*r) + total * sizeof(struct pwb_extent);
	r = calloc(1, q->rsz);
	if (!r) {
		free(ext);
		return -ENOMEM;
	}
	r->version = REC_VERSION | (uint32_t)q->dev << 16;
	r->crc = q->crc;
	r->ino = q->ino;
	r->size = q->size;
	r->nr_ext = total;
	if (total)
		memcpy(r->ext, ext, total * sizeof(*ext));
	free(ext);
	q->r = r;
	return 0;
}

/*
 * The data stage of a PUT with an inode, on the request's own thread (a
 * stage worker with --threads):
 * its data durable, then its record built from its extents (final now:
 * libpwb allocates at writeback). pwb_fsync() writes this object's pages
 * and no other's, so a PUT never waits for the dirty data of another
 * bucket (one pwb_sync() of the device for a batch did: a flooded
 * bucket's PUTs stalled every other bucket's). Concurrent fsyncs still
 * share device flushes: a flush that starts after a PUT's writes ended
 * covers it (libpwb's flush epochs). 0 or -errno.
 */
int put_durable(struct commit_req *q)
{
	uint64_t t0 = now_ns();
	int ret = pwb_fsync(q->inode);

	CNT_ADD(data_syncs, 1);
	CNT_ADD(data_sync_puts, 1);
	CNT_ADD(fsync_ns, now_ns() - t0);
	if (ret) {
		fprintf(stderr, "pwb-objd: fsync: %s\n", errtext(ret));
		return ret;
	}
	return build_rec(q);
}

int commit_queue(struct commit_req *q)
{
	pthread_mutex_lock(&commit_lock);
	if (commit_stop) {
		pthread_mutex_unlock(&commit_lock);
		return -ESHUTDOWN;
	}
	if (!q->on_done)
		sem_init(&q->done, 0, 0);
	q->next = NULL;
	*commit_tail = q;
	commit_tail = &q->next;
	pthread_cond_signal(&commit_work);
	pthread_mutex_unlock(&commit_lock);
	return 0;
}

/* Run @q through the group commit (the data stage first if it has an
 * inode) and wait for it: 0 or -errno; q->old, q->existed, q->r set. */
int commit_wait(struct commit_req *q)
{
	int ret;

	if (q->inode) {
		q->ret = put_durable(q);
		if (q->ret) {
			q->old = 0;
			return q->ret;
		}
	}
	ret = commit_queue(q);
	if (ret)
		return ret;
	while (sem_wait(&q->done))
		;	/* EINTR */
	sem_destroy(&q->done);
	if (q->ret)
		q->old = 0;
	return q->ret;
}

int commit_start(void)
{
	return pthread_create(&committer, NULL, committer_main, NULL);
}

/* The committer drains its queue, then stops. */
void commit_stop_all(void)
{
	pthread_mutex_lock(&commit_lock);
	commit_stop = true;
	pthread_cond_signal(&commit_work);
	pthread_mutex_unlock(&commit_lock);
	pthread_join(committer, NULL);
}
