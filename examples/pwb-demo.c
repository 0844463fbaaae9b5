/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-demo.c - libpwb end to end, in one program
 *
 * Plays a small storage engine on one device:
 *
 *  1. creates a device image (a sparse file, ./pwb-demo.img by default) or
 *     uses the file or block device given with --device;
 *  2. opens a bdi on it: several writeback contexts, one flusher thread each;
 *  3. registers --inodes inodes, each owning a contiguous region of the
 *     device and the page memory that mirrors it (the application owns the
 *     pages, libpwb owns the dirty state);
 *  4. lets --threads threads change pages of random inodes for a few rounds:
 *     new bytes go into the page memory first, then pwb_mark_dirty() tells
 *     libpwb; the flushers write in the background meanwhile;
 *  5. calls pwb_sync(), reads the whole region back with O_DIRECT and
 *     compares every byte with the page memory;
 *  6. prints what each writeback context wrote, and the throughput.
 *
 * With PWB_FAULT set in the environment ("eio:every=10", the syntax of
 * pwb_fault_parse()), some writes fail on purpose: the failed pages stay
 * dirty, pwb_sync() reports the error, and a second pwb_sync() after
 * injection is stopped writes them; the verification still has to pass.
 *
 * Every page holds a pattern derived from (inode, page, version), and its
 * first two words name them, so a mismatch says which version was lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <pwb.h>
#include <pwb-policy.h>

#define MIB ((uint64_t)1 << 20)
#define DEMO_IMAGE "pwb-demo.img"
#define DEMO_IMAGE_MIB 256u
#define DEMO_ROUNDS 4		/* round 0 fills every page, then random */
#define DEMO_MAX_RANGE 32	/* pages per random change, at most */
#define DEMO_READ_CHUNK (1u << 20)
#define DEMO_SHOW_MISMATCHES 5

struct demo_opts {
	const char *device;	/* --device, or NULL: create DEMO_IMAGE */
	const char *policy;	/* --policy, or NULL: the default */
	const char *plugin;	/* --plugin: policy plugin to load, or NULL */
	unsigned int contexts;
	unsigned int inodes;
	unsigned int threads;
	unsigned int mib;
	bool keep;
};

/* One application object: its page memory mirrors a device region. */
struct demo_inode {
	uint64_t ino;
	uint64_t base;		/* device offset of page 0 */
	uint64_t nr_pages;
	unsigned int page_size;
	uint8_t *mem;		/* nr_pages pages, 4096-aligned */
	struct pwb_inode *inode;

	/*
	 * Serialises the application's own writers of one inode, so that
	 * every page holds one whole version. libpwb itself needs no lock
	 * here: a page changed while a flusher writes it is marked dirty
	 * again afterwards, and written again.
	 */
	pthread_mutex_t lock;
	uint32_t *version;	/* per page, under lock */
};

struct demo {
	struct demo_opts opt;
	const char *path;
	bool created;		/* we made the image: remove it at the end */
	unsigned int page_size;
	uint64_t pages_per_inode;
	struct pwb_bdi *bdi;
	struct demo_inode *inodes;
	unsigned int nr_open;	/* entries of inodes[] with an open inode */
	const char *fault;	/* $PWB_FAULT, if injecting */
};

struct demo_thread {
	struct demo *d;
	unsigned int id;
	pthread_t tid;
	uint64_t rng;
	uint64_t pages_dirtied;
	int err;		/* first libpwb error, 0 if none */
};

/* ---------------------------------------------------------------------- */
/* Helpers                                                                */

/* The image to remove if a signal ends the demo (NULL: none, or --keep). */
static const char *volatile cleanup_path;

static void on_fatal_signal(int sig)
{
	const char *path = cleanup_path;

	if (path)
		unlink(path);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* SIGINT, SIGTERM and SIGHUP remove the image we created, then end the
 * demo as they would have. */
static void catch_fatal_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	unsigned int i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal_signal;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* The detail of the last failure pwb_fail() printed. */
static char last_errmsg[256];

/* Print a failed libpwb call: the errno text and the detailed message. */
static void pwb_fail(const char *what, int err)
{
	/*
	 * pwb_errmsg() stays valid until the thread's next libpwb call, and
	 * pwb_strerror() is one: copy the message first.
	 */
	snprintf(last_errmsg, sizeof(last_errmsg), "%s", pwb_errmsg());
	fprintf(stderr, "pwb-demo: %s: %s%s%s\n", what, pwb_strerror(err),
		last_errmsg[0] ? ": " : "", last_errmsg);
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: fast, and good enough for picking pages. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

/* splitmix64's finaliser: turns (inode, page, version) into a seed. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill_page(uint8_t *page, unsigned int size, uint64_t ino,
		      uint64_t index, uint32_t version)
{
	uint64_t *w = (uint64_t *)page;
	uint64_t x = mix(ino ^ mix(index ^ mix(version)));
	size_t i;

	w[0] = ino;
	w[1] = index << 32 | version;
	for (i = 2; i < size / sizeof(*w); i++)
		w[i] = x + i * 0x9e3779b97f4a7c15ull;
}

static bool parse_uint(const char *s, unsigned int min, unsigned int max,
		       unsigned int *out)
{
	unsigned long v;
	char *end;

	if (*s == '-')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return false;
	*out = (unsigned int)v;
	return true;
}

/* ---------------------------------------------------------------------- */
/* The application side of an inode; libpwb calls these on its flushers   */

static int demo_get_page(struct pwb_inode *inode, uint64_t index,
			 const void **data)
{
	struct demo_inode *di = pwb_inode_priv(inode);

	if (index >= di->nr_pages)
		return -ERANGE;
	*data = di->mem + index * di->page_size;
	return 0;
}

static int demo_map_page(struct pwb_inode *inode, uint64_t index,
			 uint64_t *dev_off)
{
	struct demo_inode *di = pwb_inode_priv(inode);

	if (index >= di->nr_pages)
		return -ERANGE;
	*dev_off = di->base + index * di->page_size;
	return 0;
}

static const struct pwb_inode_ops demo_ops = {
	.get_page = demo_get_page,
	.map_page = demo_map_page,
};

/* ---------------------------------------------------------------------- */
/* Dirtying threads                                                       */

/*
 * Change pages [first, first + nr) of @di: new contents into memory first,
 * then pwb_mark_dirty(). The order matters: a flusher may write the pages
 * as soon as they are marked.
 */
static int change_pages(struct demo_inode *di, uint64_t first, uint64_t nr)
{
	unsigned int ps = di->page_size;
	uint64_t i;

	pthread_mutex_lock(&di->lock);
	for (i = first; i < first + nr; i++)
		fill_page(di->mem + i * ps, ps, di->ino, i, ++di->version[i]);
	pthread_mutex_unlock(&di->lock);

	return pwb_mark_dirty(di->inode, first * ps, nr * ps);
}

static void *dirtier(void *arg)
{
	struct demo_thread *t = arg;
	struct demo *d = t->d;
	unsigned int n = d->opt.inodes;
	uint64_t budget = d->pages_per_inode * n / d->opt.threads;
	unsigned int i, round;
	int err;

	/* Round 0: every page of this thread's share of the inodes. */
	for (i = t->id; i < n; i += d->opt.threads) {
		err = change_pages(&d->inodes[i], 0, d->pages_per_inode);
		if (err) {
			t->err = err;
			return NULL;
		}
		t->pages_dirtied += d->pages_per_inode;
	}

	/* Then random ranges of random inodes, about budget pages a round. */
	for (round = 1; round < DEMO_ROUNDS; round++) {
		uint64_t done = 0;

		while (done < budget) {
			struct demo_inode *di = &d->inodes[rnd(&t->rng) % n];
			uint64_t first = rnd(&t->rng) % di->nr_pages;
			uint64_t max = di->nr_pages - first;
			uint64_t nr;

			if (max > DEMO_MAX_RANGE)
				max = DEMO_MAX_RANGE;
			/* Half single pages, half ranges. */
			nr = rnd(&t->rng) & 1 ? 1 : 1 + rnd(&t->rng) % max;
			err = change_pages(di, first, nr);
			if (err) {
				t->err = err;
				return NULL;
			}
			done += nr;
		}
		t->pages_dirtied += done;
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* Verification: read the device back and compare with memory             */

static long verify(struct demo *d)
{
	unsigned int ps = d->page_size;
	long bad = 0;
	uint8_t *buf;
	unsigned int i;
	int fd;

	if (posix_memalign((void **)&buf, 4096, DEMO_READ_CHUNK)) {
		fprintf(stderr, "pwb-demo: out of memory\n");
		return -1;
	}
	fd = open(d->path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "pwb-demo: cannot open %s to verify: %s\n",
			d->path, strerror(errno));
		free(buf);
		return -1;
	}

	for (i = 0; i < d->opt.inodes; i++) {
		struct demo_inode *di = &d->inodes[i];
		uint64_t idx = 0;

		while (idx < di->nr_pages) {
			uint64_t nr = DEMO_READ_CHUNK / ps, j;
			size_t len, got = 0;

			if (nr > di->nr_pages - idx)
				nr = di->nr_pages - idx;
			len = nr * ps;
			while (got < len) {
				ssize_t r = pread(fd, buf + got, len - got,
						  (off_t)(di->base + idx * ps +
							  got));
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					fprintf(stderr,
						"pwb-demo: reading %s: %s\n",
						d->path,
						r ? strerror(errno) :
						    "unexpected end of file");
					close(fd);
					free(buf);
					return -1;
				}
				got += (size_t)r;
			}
			for (j = 0; j < nr; j++) {
				const uint8_t *dev = buf + j * ps;
				const uint8_t *mem = di->mem + (idx + j) * ps;
				const uint64_t *hdr = (const uint64_t *)dev;

				if (!memcmp(dev, mem, ps))
					continue;
				if (bad++ < DEMO_SHOW_MISMATCHES)
					fprintf(stderr,
						"pwb-demo: inode %" PRIu64
						" page %" PRIu64
						": device holds version %" PRIu64
						" of inode %" PRIu64
						" page %" PRIu64
						", memory version %" PRIu32
						"\n",
						di->ino, idx + j,
						hdr[1] & 0xffffffffu, hdr[0],
						hdr[1] >> 32,
						di->version[idx + j]);
			}
			idx += nr;
		}
	}
	close(fd);
	free(buf);
	return bad;
}

/* ---------------------------------------------------------------------- */
/* Set-up and tear-down                                                   */

static int create_image(struct demo *d, uint64_t size)
{
	int fd = open(d->path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0) {
		fprintf(stderr, "pwb-demo: cannot create %s: %s\n", d->path,
			strerror(errno));
		return -1;
	}
	d->created = true;
	if (!d->opt.keep)
		cleanup_path = d->path;
	if (ftruncate(fd, (off_t)size)) {
		fprintf(stderr, "pwb-demo: cannot size %s to %" PRIu64
			" MiB: %s\n", d->path, size / MIB, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int setup_inodes(struct demo *d)
{
	unsigned int ps = d->page_size;
	unsigned int i;
	int err;

	d->inodes = calloc(d->opt.inodes, sizeof(*d->inodes));
	if (!d->inodes) {
		fprintf(stderr, "pwb-demo: out of memory\n");
		return -1;
	}
	for (i = 0; i < d->opt.inodes; i++) {
		struct demo_inode *di = &d->inodes[i];

		di->ino = i;
		di->nr_pages = d->pages_per_inode;
		di->base = (uint64_t)i * d->pages_per_inode * ps;
		di->page_size = ps;
		if (posix_memalign((void **)&di->mem, 4096,
				   di->nr_pages * ps)) {
			di->mem = NULL;
			fprintf(stderr, "pwb-demo: out of memory\n");
			return -1;
		}
		memset(di->mem, 0, di->nr_pages * ps);
		di->version = calloc(di->nr_pages, sizeof(*di->version));
		if (!di->version) {
			fprintf(stderr, "pwb-demo: out of memory\n");
			return -1;
		}
		pthread_mutex_init(&di->lock, NULL);
		err = pwb_inode_open(d->bdi, di->ino, &demo_ops, di,
				     &di->inode);
		if (err) {
			pwb_fail("pwb_inode_open", err);
			pthread_mutex_destroy(&di->lock);
			return -1;
		}
		d->nr_open++;
	}
	return 0;
}

/* Close every inode, then the bdi; free the memory. Return 0 or -1. */
static int teardown(struct demo *d)
{
	unsigned int i;
	int ret = 0, err;

	unsigned int reported = 0;

	for (i = 0; i < d->nr_open; i++) {
		err = pwb_inode_close(d->inodes[i].inode);
		/*
		 * An injected write error is reported once to pwb_sync() and
		 * once to each affected inode's pwb_fsync() or close: here.
		 */
		if (err && d->fault && (err == -EIO || err == -ENOSPC)) {
			reported++;
		} else if (err) {
			pwb_fail("pwb_inode_close", err);
			ret = -1;
		}
		pthread_mutex_destroy(&d->inodes[i].lock);
	}
	if (reported)
		printf("pwb_inode_close: %u inodes reported their injected "
		       "write error (once per inode, as pwb_fsync would)\n",
		       reported);
	if (d->bdi) {
		err = pwb_bdi_close(d->bdi);
		if (err) {
			pwb_fail("pwb_bdi_close", err);
			ret = -1;
		}
	}
	if (d->inodes) {
		for (i = 0; i < d->opt.inodes; i++) {
			free(d->inodes[i].mem);
			free(d->inodes[i].version);
		}
		free(d->inodes);
	}
	return ret;
}

/* ---------------------------------------------------------------------- */
/* The report                                                             */

static int print_table(struct demo *d, double elapsed)
{
	unsigned int nr_ctx = pwb_bdi_nr_wb_ctx(d->bdi);
	unsigned int *inodes = calloc(nr_ctx, sizeof(*inodes));
	struct pwb_stats st, total;
	unsigned int i;
	int err;

	if (!inodes) {
		fprintf(stderr, "pwb-demo: out of memory\n");
		return -1;
	}
	for (i = 0; i < d->opt.inodes; i++) {
		int idx = pwb_inode_wb_ctx(d->inodes[i].inode);

		if (idx >= 0 && (unsigned int)idx < nr_ctx)
			inodes[idx]++;
	}

	printf("\n%5s %8s %15s %12s\n", "ctx", "inodes", "pages written",
	       "MiB written");
	for (i = 0; i < nr_ctx; i++) {
		err = pwb_wb_ctx_stats(d->bdi, i, &st);
		if (err) {
			pwb_fail("pwb_wb_ctx_stats", err);
			free(inodes);
			return -1;
		}
		printf("%5u %8u %15" PRIu64 " %12.1f\n", i, inodes[i],
		       st.written_pages, (double)st.bytes_written / MIB);
	}
	free(inodes);

	err = pwb_bdi_stats(d->bdi, &total);
	if (err) {
		pwb_fail("pwb_bdi_stats", err);
		return -1;
	}
	printf("%5s %8u %15" PRIu64 " %12.1f\n\n", "all", d->opt.inodes,
	       total.written_pages, (double)total.bytes_written / MIB);
	printf("contexts: %u   write requests: %" PRIu64 " (%" PRIu64
	       " failed)   throughput: %.1f MiB/s   elapsed: %.3f s\n",
	       nr_ctx, total.io_submitted, total.io_errors,
	       elapsed > 0 ? (double)total.bytes_written / MIB / elapsed : 0.0,
	       elapsed);
	return 0;
}

/*
 * Start fault injection if $PWB_FAULT asks for it. Return 0 or -1.
 */
static int setup_faults(struct demo *d)
{
	const char *spec = getenv("PWB_FAULT");
	struct pwb_fault f;
	int err;

	if (!spec || !*spec)
		return 0;
	err = pwb_fault_parse(spec, &f);
	if (!err)
		err = pwb_bdi_inject_fault(d->bdi, &f);
	if (err) {
		pwb_fail("PWB_FAULT", err);
		return -1;
	}
	d->fault = spec;
	printf("fault injection: PWB_FAULT=%s\n", spec);
	return 0;
}

/*
 * pwb_sync(). When faults were injected, a failure is expected: report it,
 * stop injecting and sync again, which must write the pages that stayed
 * dirty. Return 0 or the error of the last pwb_sync().
 */
static int sync_all(struct demo *d)
{
	uint64_t hits = 0;
	int err = pwb_sync(d->bdi);

	if (!err || !d->fault)
		return err;
	printf("pwb_sync: %s", pwb_strerror(err));
	if (!pwb_fault_hits(d->bdi, &hits))
		printf(" (%" PRIu64 " writes hit by injection)", hits);
	printf("; the failed pages stay dirty\n");

	err = pwb_bdi_inject_fault(d->bdi, NULL);
	if (err)
		return err;
	err = pwb_sync(d->bdi);
	if (!err)
		printf("pwb_sync after stopping injection: OK\n");
	return err;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pwb-demo [OPTION]...\n"
		"Dirty pages of many inodes from several threads, let libpwb's\n"
		"writeback contexts write them with O_DIRECT, sync, and check\n"
		"every byte on the device.\n"
		"\n"
		"  --device PATH  use this file or block device (its data is\n"
		"                 overwritten) instead of creating ./%s\n"
		"  --contexts N   writeback contexts; 0 = automatic (default 0)\n"
		"  --inodes N     inodes (default 256)\n"
		"  --threads N    dirtying threads (default 4)\n"
		"  --mib N        MiB of data over all inodes (default 128)\n"
		"  --policy SPEC  shard policy, \"name[:key=value,...]\"\n"
		"                 (default inode-hash)\n"
		"  --plugin PATH  load a shard policy plugin first (see\n"
		"                 examples/policy-plugin), then name its policy\n"
		"                 with --policy, e.g. --policy stripe:size=64M\n"
		"  --keep         keep the image file afterwards\n"
		"  --help         show this text\n"
		"\n"
		"The image needs a file system that supports O_DIRECT (ext4,\n"
		"xfs, btrfs; tmpfs only since Linux 6.6). Every page is kept\n"
		"in memory: a --mib that does not fit in 3/4 of the available\n"
		"memory, or on the device, is refused. Exit status: 0 if every\n"
		"byte matches, 2 for a bad argument or a size that does not\n"
		"fit, 1 otherwise.\n"
		"\n"
		"Environment: PWB_FAULT=\"eio:every=10\" (see pwb_fault_parse)\n"
		"makes some writes fail on purpose.\n",
		DEMO_IMAGE);
}

static int parse_args(int argc, char **argv, struct demo_opts *o)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "contexts", required_argument, NULL, 'c' },
		{ "inodes", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 't' },
		{ "mib", required_argument, NULL, 'm' },
		{ "policy", required_argument, NULL, 'p' },
		{ "plugin", required_argument, NULL, 'P' },
		{ "keep", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, li = 0;

	o->contexts = 0;
	o->inodes = 256;
	o->threads = 4;
	o->mib = 128;
	while ((c = getopt_long(argc, argv, "", longopts, &li)) != -1) {
		bool ok = true;

		switch (c) {
		case 'd':
			o->device = optarg;
			break;
		case 'c':
			/* Values above PWB_MAX_WB_CTX are left to libpwb to
			 * refuse, to show its error reporting. */
			ok = parse_uint(optarg, 0, 1u << 20, &o->contexts);
			break;
		case 'i':
			ok = parse_uint(optarg, 1, 1u << 20, &o->inodes);
			break;
		case 't':
			ok = parse_uint(optarg, 1, 1024, &o->threads);
			break;
		case 'm':
			ok = parse_uint(optarg, 1, 1u << 20, &o->mib);
			break;
		case 'p':
			o->policy = optarg;
			break;
		case 'P':
			o->plugin = optarg;
			break;
		case 'k':
			o->keep = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
		if (!ok) {
			fprintf(stderr, "pwb-demo: bad value '%s' for --%s\n",
				optarg, longopts[li].name);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "pwb-demo: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	return 0;
}

/* /proc/meminfo's @key in bytes, or 0 if it cannot be read. */
static uint64_t meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kib;
	char line[128], name[64];
	uint64_t v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63[^:]: %llu kB", name, &kib) == 2 &&
		    !strcmp(name, key)) {
			v = (uint64_t)kib * 1024;
			break;
		}
	fclose(f);
	return v;
}

/*
 * Memory the demo may take without swapping or meeting the OOM killer:
 * MemAvailable (free pages when the kernel has no such line), and no more
 * than the cgroup v2 limit leaves. 0 if unknown.
 */
static uint64_t mem_available(void)
{
	long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t avail = meminfo("MemAvailable");
	unsigned long long max, cur;
	FILE *f;

	if (!avail && pages > 0 && psz > 0)
		avail = (uint64_t)pages * (uint64_t)psz;
	f = fopen("/sys/fs/cgroup/memory.max", "r");
	if (f) {
		if (fscanf(f, "%llu", &max) == 1) {
			fclose(f);
			f = fopen("/sys/fs/cgroup/memory.current", "r");
			if (f && fscanf(f, "%llu", &cur) == 1 && cur < max &&
			    (!avail || max - cur < avail))
				avail = max - cur;
		}
		if (f)
			fclose(f);
	}
	return avail;
}

/*
 * The demo keeps every page of every inode in memory (plus a version
 * number per page), and writes all of them to the device: refuse a --mib
 * that does not fit, before the image or any page exists. A size the
 * demo would only learn about from the OOM killer or from ENOSPC in a
 * flusher is refused here, with the figures. Return 0, or -1 with the
 * reason printed.
 */
static int check_sizes(const struct demo *d)
{
	uint64_t data = (uint64_t)d->opt.mib * MIB;
	uint64_t need = data + data / 1024;	/* + versions, one per page */
	uint64_t avail = mem_available();
	struct statvfs vfs;

	/* A quarter of what is available stays for everything else. */
	if (avail && need > avail / 4 * 3) {
		fprintf(stderr, "pwb-demo: --mib %u needs %" PRIu64 " MiB of "
			"memory (the demo keeps every page in memory), more "
			"than 3/4 of the %" PRIu64 " MiB available: lower "
			"--mib\n", d->opt.mib, (need + MIB - 1) / MIB,
			avail / MIB);
		return -1;
	}
	/* The image is sparse: what the demo writes must fit on its file
	 * system. (A --device is checked against its capacity once open.) */
	if (!d->opt.device && !statvfs(".", &vfs) &&
	    data > (uint64_t)vfs.f_bavail * vfs.f_frsize) {
		fprintf(stderr, "pwb-demo: --mib %u needs %" PRIu64 " MiB "
			"for %s, but its file system has %" PRIu64 " MiB free: "
			"lower --mib or pass --device\n", d->opt.mib,
			data / MIB, d->path,
			(uint64_t)vfs.f_bavail * vfs.f_frsize / MIB);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct demo d = { .path = "./" DEMO_IMAGE };
	struct demo_thread *threads = NULL;
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	unsigned int v = pwb_version(), i, started = 0;
	uint64_t data_bytes, dirtied = 0;
	double t0, elapsed;
	long bad = -1;
	int ret = 1, err;

	if (parse_args(argc, argv, &d.opt) || check_sizes(&d))
		return 2;
	catch_fatal_signals();

	if (d.opt.device) {
		d.path = d.opt.device;
	} else {
		uint64_t size = (uint64_t)DEMO_IMAGE_MIB * MIB;

		if ((uint64_t)d.opt.mib * MIB > size)
			size = (uint64_t)d.opt.mib * MIB;
		if (create_image(&d, size))
			goto out;
	}

	if (d.opt.plugin) {
		/* libpwb takes absolute paths only: resolve ours. */
		char *abs = realpath(d.opt.plugin, NULL);

		err = pwb_policy_load(abs ? abs : d.opt.plugin);
		free(abs);
		if (err) {
			pwb_fail("pwb_policy_load", err);
			goto out;
		}
	}
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = d.opt.contexts;
	cfg.policy = d.opt.policy;
	err = pwb_bdi_open(d.path, &cfg, &d.bdi);
	if (err) {
		pwb_fail("pwb_bdi_open", err);
		if (err == -EINVAL && strstr(last_errmsg, "O_DIRECT"))
			fprintf(stderr,
				"pwb-demo: libpwb writes with O_DIRECT, which "
				"this file system refuses (tmpfs does on older "
				"kernels): run pwb-demo from a directory on "
				"ext4, xfs or btrfs, or pass --device\n");
		d.bdi = NULL;
		goto out;
	}
	err = pwb_bdi_info(d.bdi, &info);
	if (err) {
		pwb_fail("pwb_bdi_info", err);
		goto out;
	}

	d.page_size = info.page_size;
	d.pages_per_inode = (uint64_t)d.opt.mib * MIB / d.page_size /
			    d.opt.inodes;
	if (!d.pages_per_inode) {
		fprintf(stderr, "pwb-demo: --mib %u is less than one page per "
			"inode for %u inodes\n", d.opt.mib, d.opt.inodes);
		goto out;
	}
	data_bytes = d.pages_per_inode * d.opt.inodes * d.page_size;
	if (data_bytes > info.capacity) {
		fprintf(stderr, "pwb-demo: %s holds %" PRIu64 " MiB, the demo "
			"needs %" PRIu64 " MiB (lower --mib)\n", d.path,
			info.capacity / MIB, (data_bytes + MIB - 1) / MIB);
		ret = 2;
		goto out;
	}

	printf("libpwb %u.%u.%u, device %s: %s, %" PRIu64 " MiB, logical "
	       "block %u B, %s\n", v >> 16, (v >> 8) & 0xff, v & 0xff, d.path,
	       info.is_blockdev ? "block device" : "file",
	       info.capacity / MIB, info.logical_block_size,
	       info.rotational == 1   ? "rotational" :
	       info.rotational == 0   ? "non-rotational" :
					"rotational: unknown");
	printf("writeback contexts: %u, policy %s, backend %s, page %u B\n",
	       info.nr_wb_ctx, info.policy, info.backend, info.page_size);
	printf("  contexts: %s\n  backend: %s\n", info.nr_wb_ctx_reason,
	       info.backend_reason);
	printf("%u inodes x %" PRIu64 " pages = %.1f MiB, %u threads, "
	       "%d rounds\n", d.opt.inodes, d.pages_per_inode,
	       (double)data_bytes / MIB, d.opt.threads, DEMO_ROUNDS);
	fflush(stdout);

	if (setup_faults(&d) || setup_inodes(&d))
		goto out;

	threads = calloc(d.opt.threads, sizeof(*threads));
	if (!threads) {
		fprintf(stderr, "pwb-demo: out of memory\n");
		goto out;
	}

	t0 = now_sec();
	for (i = 0; i < d.opt.threads; i++) {
		threads[i].d = &d;
		threads[i].id = i;
		threads[i].rng = mix(i + 1);
		err = pthread_create(&threads[i].tid, NULL, dirtier,
				     &threads[i]);
		if (err) {
			fprintf(stderr, "pwb-demo: pthread_create: %s\n",
				strerror(err));
			break;
		}
		started++;
	}
	err = 0;
	for (i = 0; i < started; i++) {
		pthread_join(threads[i].tid, NULL);
		dirtied += threads[i].pages_dirtied;
		if (threads[i].err && !err) {
			err = threads[i].err;
			fprintf(stderr, "pwb-demo: thread %u: pwb_mark_dirty: "
				"%s\n", i, pwb_strerror(err));
		}
	}
	if (started < d.opt.threads || err)
		goto out;

	err = sync_all(&d);
	elapsed = now_sec() - t0;
	if (err) {
		pwb_fail("pwb_sync", err);
		goto out;
	}
	printf("dirtied %" PRIu64 " pages (%.1f MiB) in %.3f s including "
	       "pwb_sync\n", dirtied, (double)dirtied * d.page_size / MIB,
	       elapsed);

	if (print_table(&d, elapsed))
		goto out;

	bad = verify(&d);
	if (bad == 0)
		printf("verify: OK: every byte on the device matches\n");
	else if (bad > 0)
		printf("verify: FAILED: %ld of %" PRIu64 " pages differ\n",
		       bad, d.pages_per_inode * d.opt.inodes);
	ret = bad == 0 ? 0 : 1;
out:
	free(threads);
	if (teardown(&d))
		ret = 1;
	if (d.created && !d.opt.keep) {
		cleanup_path = NULL;
		unlink(d.path);
	} else if (d.created)
		printf("kept %s\n", d.path);
	return ret;
}
