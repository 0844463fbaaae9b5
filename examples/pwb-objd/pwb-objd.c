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
 *
 * The files: hist.c, crc32c.c, devices.c (the --device list), buckets.c
 * (tenants); table.c (the open inodes), index.c (LMDB, the records, the
 * start-up load), commit.c (the group commit); put.c (PUT), handlers.c
 * (GET, HEAD, ?list, DELETE, POST /-/sync), stats.c (the counters,
 * /-/stats, /-/metrics), reply.c (keys and plain replies), http.c (a
 * request's dispatch and state), listen.c (the sockets and
 * libmicrohttpd), log.c (messages), stage.c (--threads: the stage
 * workers and suspended connections); this file, the options and
 * main().
 * objd.h declares what they share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "objd.h"
#include "crc32c.h"
#include "buckets.h"
#include "devices.h"
#include "pwb-example-util.h"

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
"  -T, --threads N       serve every connection from a pool of N threads on\n"
"                        epoll; what would wait (a PUT or DELETE made\n"
"                        durable, a write over its bucket's budget, a read\n"
"                        from the device, POST /-/sync) goes to worker\n"
"                        threads meanwhile (default 0: a thread per\n"
"                        connection)\n"
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
		{ "threads", required_argument, NULL, 'T' },
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
				"d:i:s:p:c:P:b:C:Fm:k:n:t:T:KO:I:w:R:B:L:M:vh",
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
		case 'T':
			if (parse_uint(optarg, 1024, &opt.threads))
				goto bad;
			break;
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
	if (opt.threads) {
		ret = stage_start(OBJD_STAGE_WORKERS);
		if (ret) {
			fprintf(stderr, "pwb-objd: stage threads: %s\n",
				strerror(ret));
			goto out_bdi;
		}
	}
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
	/* No connection may be suspended when libmicrohttpd stops: let the
	 * requests in a stage finish (those that come now wait on their
	 * own threads). */
	if (committer_started)
		suspend_drain();
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
	/* The stage workers queue for the committer: they stop first. */
	stage_stop_all();
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
