// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * buckets.c - pwb-objd's buckets, each a libpwb tenant (see buckets.h;
 * README.md, "Buckets")
 *
 * A hash table of buckets under one mutex, taken once per PUT (to find
 * the bucket) and by the stats; buckets are never freed before the end,
 * so a PUT keeps its bucket's pointer without a reference.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buckets.h"
#include "pwb-example-util.h"

#define BUCKET_BITS 8
static struct bucket *bucket_table[1u << BUCKET_BITS];	/* buckets_lock */
static unsigned int nr_buckets;				/* buckets_lock */
static pthread_mutex_t buckets_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set before the first request, read without the lock after. */
static struct pwb_domain *scope_dom;
static struct pwb_bdi *scope_bdi;
static uint64_t bucket_dirty;
static unsigned int max_buckets = 1000;

static unsigned int hash_name(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)name[i];
		h *= 0x100000001b3ull;
	}
	return (unsigned int)(h >> (64 - BUCKET_BITS));
}

static struct bucket *find_locked(const char *name, size_t len)
{
	struct bucket *b;

	for (b = bucket_table[hash_name(name, len)]; b; b = b->next)
		if (b->len == len && !memcmp(b->name, name, len))
			return b;
	return NULL;
}

static struct bucket *insert_locked(const char *name, size_t len,
				    unsigned int weight)
{
	struct bucket *b = calloc(1, sizeof(*b));
	unsigned int h = hash_name(name, len);

	if (!b)
		return NULL;
	b->name = malloc(len ? len : 1);
	if (!b->name) {
		free(b);
		return NULL;
	}
	memcpy(b->name, name, len);
	b->len = len;
	b->weight = weight;
	b->next = bucket_table[h];
	bucket_table[h] = b;
	nr_buckets++;
	return b;
}

/* @b's tenant, with its weight and the bucket dirty limit. */
static int make_tenant(struct bucket *b)
{
	struct pwb_tenant_config cfg;

	pwb_tenant_config_init(&cfg);
	cfg.weight = b->weight;
	cfg.dirty_bytes = bucket_dirty;
	cfg.rate_limit_bytes_per_sec = b->rate;
	return pwb_tenant_create(scope_dom, scope_dom ? NULL : scope_bdi,
				 &cfg, &b->tenant);
}

/* --bucket-weight NAME=W or --bucket-rate NAME=N (@rate): 0, or -1
 * with the reason printed. */
static int bucket_arg(const char *arg, bool rate)
{
	const char *opt = rate ? "--bucket-rate" : "--bucket-weight";
	const char *eq = strrchr(arg, '=');
	struct bucket *b;
	unsigned long w = 0;
	uint64_t bps = 0;
	char *end;
	size_t len;

	if (!eq) {
		fprintf(stderr, "pwb-objd: %s %s: not NAME=%s\n", opt, arg,
			rate ? "BYTES_PER_SEC" : "WEIGHT");
		return -1;
	}
	len = (size_t)(eq - arg);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)arg[i];

		if (ch == '/' || ch < 0x20 || ch == 0x7f) {
			fprintf(stderr, "pwb-objd: %s %s: a bucket name has "
				"no '/' and no control character\n", opt,
				arg);
			return -1;
		}
	}
	if (rate) {
		if (pwbex_parse_size(eq + 1, &bps) || !bps) {
			fprintf(stderr, "pwb-objd: --bucket-rate %s: the rate "
				"is bytes per second, more than 0, with an "
				"optional K, M or G\n", arg);
			return -1;
		}
	} else {
		errno = 0;
		w = strtoul(eq + 1, &end, 10);
		if (eq[1] < '0' || eq[1] > '9' || *end || errno || w < 1 ||
		    w > 10000) {
			fprintf(stderr, "pwb-objd: --bucket-weight %s: the "
				"weight is a whole number from 1 to 10000\n",
				arg);
			return -1;
		}
	}
	b = find_locked(arg, len);
	if (b && (rate ? b->rate != 0 : b->weight != 0)) {
		fprintf(stderr, "pwb-objd: %s %s: bucket %.*s is named twice"
			"\n", opt, arg, (int)len, arg);
		return -1;
	}
	if (!b)
		b = insert_locked(arg, len, 0);
	if (!b) {
		fprintf(stderr, "pwb-objd: out of memory\n");
		return -1;
	}
	if (rate)
		b->rate = bps;
	else
		b->weight = (unsigned int)w;
	return 0;
}

int buckets_weight_arg(const char *arg)
{
	return bucket_arg(arg, false);
}

int buckets_rate_arg(const char *arg)
{
	return bucket_arg(arg, true);
}

void buckets_config(uint64_t dirty_bytes, unsigned int max)
{
	bucket_dirty = dirty_bytes;
	max_buckets = max;
}

int buckets_start(struct pwb_domain *dom, struct pwb_bdi *bdi)
{
	scope_dom = dom;
	scope_bdi = bdi;
	if (nr_buckets > max_buckets) {
		fprintf(stderr, "pwb-objd: %u buckets named by --bucket-weight,"
			" more than --max-buckets %u\n", nr_buckets,
			max_buckets);
		return 1;
	}
	for (unsigned int h = 0; h < (1u << BUCKET_BITS); h++) {
		for (struct bucket *b = bucket_table[h]; b; b = b->next) {
			if (!b->weight)
				b->weight = 100;	/* only a rate named */
			if (make_tenant(b)) {
				fprintf(stderr, "pwb-objd: bucket %.*s: %s\n",
					(int)b->len, b->name, pwb_errmsg());
				return 1;
			}
		}
	}
	return 0;
}

int bucket_of(const char *key, size_t klen, struct bucket **bp)
{
	const char *slash = memchr(key, '/', klen);
	size_t len = slash ? (size_t)(slash - key) : 0;
	struct bucket *b;
	int ret = 0;

	pthread_mutex_lock(&buckets_lock);
	b = find_locked(key, len);
	if (b)
		goto out;
	if (nr_buckets >= max_buckets) {
		ret = -ENOSPC;
		goto out;
	}
	b = insert_locked(key, len, 100);
	if (!b) {
		ret = -ENOMEM;
		goto out;
	}
	ret = make_tenant(b);
	if (ret) {
		fprintf(stderr, "pwb-objd: bucket %.*s: %s\n", (int)len, key,
			pwb_errmsg());
		bucket_table[hash_name(key, len)] = b->next;
		nr_buckets--;
		free(b->name);
		free(b);
		b = NULL;
	}
out:
	pthread_mutex_unlock(&buckets_lock);
	*bp = b;
	return ret;
}

int bucket_attach(struct bucket *b, struct pwb_inode *inode)
{
	return pwb_inode_set_tenant(inode, b->tenant);
}

void bucket_put_done(struct bucket *b, uint64_t bytes)
{
	__atomic_add_fetch(&b->puts, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&b->bytes, bytes, __ATOMIC_RELAXED);
}

void bucket_put_latency(struct bucket *b, uint64_t ns)
{
	hist_add(&b->lat, ns);
}

/* @b's name as JSON string contents (or a Prometheus label value: the
 * same escapes for '"' and '\\'; bytes above 0x7f as they are in a
 * label, as \u00XX in JSON, so that any name makes valid JSON). */
static void put_name(FILE *f, const struct bucket *b, bool json)
{
	for (size_t i = 0; i < b->len; i++) {
		unsigned char ch = (unsigned char)b->name[i];

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (json && ch >= 0x80)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
}

#define TENANT_FIELDS                                                          \
	T(dirty_bytes) T(writeback_bytes) T(max_held_bytes) T(dirtied_bytes)   \
	T(written_bytes) T(throttled_ns) T(throttle_events)                    \
	T(rate_limited_ns) T(limit_bytes) T(nr_inodes)

void buckets_json(FILE *f)
{
	static struct hist snap;	/* buckets_lock */
	struct pwb_tenant_stats st;
	bool first = true;
	uint64_t n;

	pthread_mutex_lock(&buckets_lock);
	for (unsigned int h = 0; h < (1u << BUCKET_BITS); h++) {
		for (struct bucket *b = bucket_table[h]; b; b = b->next) {
			memset(&st, 0, sizeof(st));
			pwb_tenant_stats(b->tenant, &st);
			n = hist_snapshot(&b->lat, &snap);
			fprintf(f, "%s\n    \"", first ? "" : ",");
			put_name(f, b, true);
			fprintf(f, "\": {\"weight\": %u, \"rate_limit\": %" PRIu64
				", \"puts\": %" PRIu64
				", \"bytes\": %" PRIu64 ", \"put_p50_us\": "
				"%.1f, \"put_p99_us\": %.1f", b->weight, b->rate,
				__atomic_load_n(&b->puts, __ATOMIC_RELAXED),
				__atomic_load_n(&b->bytes, __ATOMIC_RELAXED),
				hist_quantile(&snap, n, 500000) / 1e3,
				hist_quantile(&snap, n, 990000) / 1e3);
#define T(name) fprintf(f, ", \"" #name "\": %" PRIu64, (uint64_t)st.name);
			TENANT_FIELDS
#undef T
			fputc('}', f);
			first = false;
		}
	}
	pthread_mutex_unlock(&buckets_lock);
}

/* One sample line of metric objd_bucket_@name for @b. */
static void metric(FILE *f, const char *name, const struct bucket *b,
		   double v)
{
	fprintf(f, "objd_bucket_%s{bucket=\"", name);
	put_name(f, b, false);
	fprintf(f, "\"} %.9g\n", v);
}

void buckets_metrics(FILE *f)
{
	static const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "puts_total", "counter", "PUTs stored in the bucket." },
		{ "bytes_total", "counter", "Bytes of the PUTs stored." },
		{ "weight", "gauge", "The bucket's tenant weight." },
		{ "dirty_bytes", "gauge", "Its dirty bytes now." },
		{ "writeback_bytes", "gauge", "Its bytes being written now." },
		{ "dirtied_bytes_total", "counter", "Bytes its writers "
		  "dirtied." },
		{ "written_bytes_total", "counter", "Its bytes written." },
		{ "throttled_seconds_total", "counter", "Time its writers "
		  "slept in the throttle." },
		{ "throttle_events_total", "counter", "Its writers' "
		  "throttle sleeps." },
		{ "limit_bytes", "gauge", "The dirty limit its writers wait "
		  "at." },
	};
	struct pwb_tenant_stats st;

	pthread_mutex_lock(&buckets_lock);
	for (unsigned int i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		fprintf(f, "# HELP objd_bucket_%s %s\n# TYPE objd_bucket_%s "
			"%s\n", m[i].name, m[i].help, m[i].name, m[i].type);
		for (unsigned int h = 0; h < (1u << BUCKET_BITS); h++) {
			for (struct bucket *b = bucket_table[h]; b;
			     b = b->next) {
				double v[] = {
					(double)__atomic_load_n(&b->puts,
							__ATOMIC_RELAXED),
					(double)__atomic_load_n(&b->bytes,
							__ATOMIC_RELAXED),
					b->weight, 0, 0, 0, 0, 0, 0, 0,
				};

				memset(&st, 0, sizeof(st));
				if (i >= 3) {
					pwb_tenant_stats(b->tenant, &st);
					v[3] = (double)st.dirty_bytes;
					v[4] = (double)st.writeback_bytes;
					v[5] = (double)st.dirtied_bytes;
					v[6] = (double)st.written_bytes;
					v[7] = (double)st.throttled_ns / 1e9;
					v[8] = (double)st.throttle_events;
					v[9] = (double)st.limit_bytes;
				}
				metric(f, m[i].name, b, v[i]);
			}
		}
	}
	pthread_mutex_unlock(&buckets_lock);
}

void buckets_destroy(void)
{
	for (unsigned int h = 0; h < (1u << BUCKET_BITS); h++) {
		struct bucket *b;

		while ((b = bucket_table[h])) {
			bucket_table[h] = b->next;
			if (b->tenant && pwb_tenant_destroy(b->tenant))
				fprintf(stderr, "pwb-objd: bucket %.*s: %s\n",
					(int)b->len, b->name, pwb_errmsg());
			free(b->name);
			free(b);
		}
	}
	nr_buckets = 0;
}
