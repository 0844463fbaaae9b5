/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * buckets.h - pwb-objd's buckets, each a libpwb tenant (examples/pwb-objd)
 *
 * The first path segment of a key names its bucket ("photos" for
 * "photos/2026/1.jpg"; a key without '/' is in the root bucket, named
 * ""). Each bucket is a tenant (pwb_tenant_create()), made the first time
 * a PUT names it, of the devices' domain, or of the one device: every
 * inode a PUT writes is attached to its bucket's tenant, so a bucket's
 * writers are throttled by that bucket's dirty pages only, and a
 * saturated device's writeback is shared among the buckets by weight
 * (--bucket-weight NAME=W; 100 for the others); --bucket-rate NAME=N
 * caps a bucket's writeback rate. A bucket lives until the daemon exits.
 */
#ifndef OBJD_BUCKETS_H
#define OBJD_BUCKETS_H

#include <stdint.h>
#include <stdio.h>

#include "pwb.h"
#include "hist.h"

struct bucket {
	struct bucket *next;	/* buckets_lock: the hash chain */
	char *name;		/* not NUL-terminated inside: len bytes */
	size_t len;
	unsigned int weight;
	uint64_t rate;		/* writeback cap, bytes/s; 0: none */
	struct pwb_tenant *tenant;	/* set before the bucket is found */
	/* PUTs stored and their bytes; the PUTs' latency (atomic) */
	uint64_t puts, bytes;
	struct hist lat;
};

/* --bucket-weight NAME=W, --bucket-rate NAME=BYTES_PER_SEC: 0, or -1
 * with the reason printed. Before buckets_start() only. */
int buckets_weight_arg(const char *arg);
int buckets_rate_arg(const char *arg);

/* Each bucket's own dirty limit (--bucket-dirty; 0: its share only), and
 * the most buckets (--max-buckets). Before buckets_start() only. */
void buckets_config(uint64_t dirty_bytes, unsigned int max_buckets);

/* Make the tenants of the buckets --bucket-weight named, in the domain
 * @dom, or of @bdi without one: 0, or 1 with the reason printed. */
int buckets_start(struct pwb_domain *dom, struct pwb_bdi *bdi);

/* The bucket of @key, made (with its tenant) if it is new: 0, -ENOSPC
 * (--max-buckets reached), -ENOMEM, or pwb_tenant_create()'s error. Any
 * thread. */
int bucket_of(const char *key, size_t klen, struct bucket **bp);

/* Attach @inode, which nothing dirtied yet, to @b's tenant. */
int bucket_attach(struct bucket *b, struct pwb_inode *inode);

/* A PUT of @bytes into @b was stored; it took @ns from its headers. */
void bucket_put_done(struct bucket *b, uint64_t bytes);
void bucket_put_latency(struct bucket *b, uint64_t ns);

/* The buckets as the members of a JSON object (without the braces), and
 * as Prometheus samples. */
void buckets_json(FILE *f);
void buckets_metrics(FILE *f);

/* Destroy every tenant (after every inode was closed) and bucket. */
void buckets_destroy(void);

#endif /* OBJD_BUCKETS_H */
