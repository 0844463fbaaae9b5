// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * stats.c - pwb-objd's counters and latency histograms (examples/pwb-objd),
 * and the pages that show them with libpwb's: GET /-/stats (JSON) and
 * GET /-/metrics (Prometheus)
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objd.h"
#include "buckets.h"
#include "devices.h"

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
	C(connections) C(connections_closed) C(stage_puts) C(stage_writes)    \
	C(stage_reads) C(stage_verifies) C(stage_syncs) C(stage_deletes)

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
