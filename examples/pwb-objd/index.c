// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * index.c - pwb-objd's index (examples/pwb-objd): the LMDB environment,
 * its opening and the loading of every object's extents at start, and
 * the look-up of a key (its records' format is in objd.h; changes go
 * through the group commit, commit.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "objd.h"
#include "devices.h"

/* LMDB's values are not aligned (they follow their keys in the page):
 * records are copied out, never read in place. 0, or -EIO for a value too
 * short to be a record. */
int rec_head(const MDB_val *v, struct rec *h)
{
	if (v->mv_size < sizeof(*h))
		return -EIO;
	memcpy(h, v->mv_data, sizeof(*h));
	return 0;
}

MDB_env *env;
MDB_dbi db_obj;		/* key -> struct rec */
MDB_dbi db_meta;	/* "next_ino" -> uint64_t, "devices" */

/* The next inode number: read from the index at start, then handed out
 * here (atomic) and stored with every commit that used one. */
uint64_t next_ino;

/* ----------------------------------------------------------- index access */

/* Look @key up: 0, -ENOENT, or another -errno. An inline object's bytes
 * are copied to oi->data when @want_data (the caller frees them). */
static int index_get(const char *key, size_t klen, struct objinfo *oi,
		     bool want_data)
{
	MDB_txn *txn;
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key }, v;
	struct rec r = { 0 };
	int rc;

	oi->data = NULL;
	rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return -EIO;
	rc = mdb_get(txn, db_obj, &k, &v);
	if (rc == 0) {
		rc = rec_head(&v, &r);
		oi->ino = r.ino;
		oi->dev = REC_DEV(r.version);
		oi->size = r.size;
		oi->crc = r.crc;
		if (!rc && oi->ino && oi->dev >= nr_devs)
			rc = -EIO;	/* load_index() refused it at start */
		if (!rc && REC_FORMAT(r.version) == REC_INLINE) {
			oi->ino = 0;
			if (v.mv_size != sizeof(r) + r.size)
				rc = -EIO;
			else if (want_data &&
				 !(oi->data = malloc(r.size ? r.size : 1)))
				rc = -ENOMEM;
			else if (want_data)
				memcpy(oi->data, (char *)v.mv_data + sizeof(r),
				       r.size);
		}
	} else {
		rc = rc == MDB_NOTFOUND ? -ENOENT : -EIO;
	}
	mdb_txn_abort(txn);
	return rc;
}

/* A reference to the object of @key as the index says now; retried when
 * a commit replaced it between the look-up and the reference. An inline
 * object needs none: *@op is NULL, its bytes in oi->data. */
int object_get(const char *key, size_t klen, struct objinfo *oi,
	       struct obj **op, bool want_data)
{
	struct objinfo again;

	*op = NULL;
	for (int tries = 0; tries < 1000; tries++) {
		int ret = index_get(key, klen, oi, want_data);

		if (ret || !oi->ino)
			return ret;
		ret = table_get(oi->dev, oi->ino, op);
		if (ret == -ENOENT)
			continue;	/* killed since the look-up */
		if (ret)
			return ret;
		/* Still the key's inode with our reference held: a kill
		 * comes after the commit that moves the key away, and
		 * finds the reference. (An inode freed before our
		 * table_get() was opened again empty: look again.) */
		ret = index_get(key, klen, &again, false);
		if (!ret && again.ino == oi->ino && again.dev == oi->dev)
			return 0;
		table_put(*op);
		*op = NULL;
		if (ret && ret != -ENOENT)
			return ret;
	}
	return -EAGAIN;
}

/* Open every object of the index and give it its extents and size. */
int load_index(void)
{
	MDB_cursor *cur;
	MDB_txn *txn;
	MDB_val k, v, mk = { .mv_size = 8, .mv_data = "next_ino" };
	uint64_t n = 0, max_ino = 0, stored = 1, on_dev[OBJD_MAX_DEVICES] = { 0 };
	unsigned int dev = 0;
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

		if (!rec_head(&v, &h) && r->version == REC_INLINE &&
		    !r->ino && !r->nr_ext &&
		    v.mv_size == sizeof(h) + r->size) {
			n++;	/* the bytes are in the record: nothing to load */
			continue;
		}
		dev = REC_DEV(r->version);
		if (!rec_head(&v, &h) && dev >= nr_devs) {
			fprintf(stderr, "pwb-objd: index: key %.*s is on device "
				"%u, and %u --device given\n", (int)k.mv_size,
				(const char *)k.mv_data, dev + 1, nr_devs);
			ret = -EINVAL;
			break;
		}
		if (rec_head(&v, &h) || REC_FORMAT(r->version) != REC_VERSION ||
		    r->nr_ext > (v.mv_size - sizeof(h)) / sizeof(r->ext[0]) ||
		    v.mv_size != sizeof(h) + r->nr_ext * sizeof(r->ext[0])) {
			fprintf(stderr, "pwb-objd: index: bad record for "
				"key %.*s\n", (int)k.mv_size,
				(const char *)k.mv_data);
			ret = -EINVAL;
			break;
		}
		ret = pwb_inode_open(dev_bdi(dev), r->ino, &alloc_ops, NULL,
				     &inode);
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

			ret = table_insert(dev, r->ino, inode, &o);
			if (!ret)
				o->pinned = true;
		} else if (!ret) {
			/* Closed: libpwb keeps the extents and the size. */
			ret = pwb_inode_close(inode);
		}
		if (ret) {
			fprintf(stderr, "pwb-objd: loading key %.*s (inode %"
				PRIu64 " on %s): %s\n", (int)k.mv_size,
				(const char *)k.mv_data, r->ino,
				devs[dev].path, pwb_errmsg());
			break;
		}
		if (r->ino > max_ino)
			max_ino = r->ino;
		n++;
		on_dev[dev]++;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (ret)
		return ret;
	next_ino = stored > max_ino ? stored : max_ino + 1;
	vlog("index: %" PRIu64 " objects, next inode %" PRIu64, n, next_ino);
	for (unsigned int d = 0; d < nr_devs; d++)
		vlog("%s: %" PRIu64 " objects", devs[d].path, on_dev[d]);
	return 0;
lmdb_fail:
	fprintf(stderr, "pwb-objd: index: %s\n", mdb_strerror(rc));
	return -EIO;
}

/* Open (or make) the index in @dir and check that it is the index of
 * the devices given: 0, -1 (printed) or 2 (the devices do not match). */
int open_index(const char *dir)
{
	MDB_stat ms = { 0 };
	MDB_txn *txn;
	int rc, ret;

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
	if (!rc)
		rc = mdb_stat(txn, db_obj, &ms);
	if (rc) {
		mdb_txn_abort(txn);
		goto fail;
	}
	ret = devs_check_index(txn, db_meta, ms.ms_entries > 0);
	if (ret) {
		mdb_txn_abort(txn);
		return ret;
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "pwb-objd: index %s: %s\n", dir, mdb_strerror(rc));
	return -1;
}
