/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-util.h - helpers shared by the Check suites
 *
 * A test device is a regular file in $PWB_TEST_DIR (the build tree's tests/
 * directory under make check; /var/tmp otherwise), because O_DIRECT needs a
 * file system that takes it (tmpfs refuses it before Linux 6.6).
 *
 * A tu_store plays the application: it owns page memory for one inode,
 * placed at a fixed device region, and records which threads wrote it.
 */
#ifndef PWB_TEST_UTIL_H
#define PWB_TEST_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pwb.h"

struct Suite;
/* Run every test of @s (Check's Suite) and return main()'s exit status:
 * 77 (skipped, after saying why) if @needs_odirect and the test directory
 * refuses O_DIRECT, else 0 if all passed, 1 otherwise. */
int tu_run_suite(struct Suite *s, bool needs_odirect);

/* Directory for test images; never NULL. */
const char *tu_test_dir(void);

/* 1 (after printing why) if tu_test_dir() refuses O_DIRECT, so a suite
 * can exit 77 (skipped); 0 otherwise. */
int tu_odirect_unsupported(void);

/* 1 in the io_uring twin of a suite (the same file built again with
 * -DTU_URING_VARIANT=1, e.g. tests/check_io_uring): it runs the io_uring
 * cases alone and exits 77 without io_uring; the plain program runs the
 * others. */
#ifndef TU_URING_VARIANT
#define TU_URING_VARIANT 0
#endif

/* In a test that cannot run on this machine: print "SKIP <test>: <why>" and
 * record it, then return from the test. tu_run_suite() exits 77 (Automake's
 * SKIP) when every test it ran skipped and none failed; so a case that may
 * skip lives in a program of its own (or with cases that skip with it),
 * never next to cases that would hide it by passing. */
void tu_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Non-zero in a twin of a suite built to run one environment-dependent
 * case (or group) alone, which tu_skip() can then report as Automake's
 * SKIP: -DTU_ENV_CASE=N in Makefile.am; each file says what N selects. */
#ifndef TU_ENV_CASE
#define TU_ENV_CASE 0
#endif

/* 1 (after printing why) if this machine cannot run the io_uring backend:
 * the kernel refuses io_uring, or the library was built without liburing.
 * Any other failure to open a probe image is left to the tests: 0. */
int tu_uring_unsupported(void);

/* Create a zero-filled image of @size bytes; return a malloc'd path. The
 * file is removed by tu_image_remove(). Aborts the test on failure. */
char *tu_image_create(uint64_t size);
void tu_image_remove(char *path);

/* A settable clock for pwb_bdi_config.clock (nanoseconds). */
struct tu_clock {
	uint64_t now;
};
uint64_t tu_clock_read(void *arg);
void tu_clock_set(struct tu_clock *c, uint64_t ns);
void tu_clock_advance_ms(struct tu_clock *c, uint64_t ms);

#define TU_MAX_WRITERS 8

/* One inode's application side. */
struct tu_store {
	unsigned int page_size;
	uint64_t nr_pages;	/* pages of the inode */
	uint64_t base_off;	/* device offset of page 0 */
	uint8_t *mem;		/* nr_pages * page_size, page aligned */
	struct pwb_inode *inode;
	uint64_t ino;

	pthread_mutex_t lock;	/* the fields below */
	uint64_t pages_written;	/* summed over end_write calls */
	uint64_t writes;	/* end_write calls */
	int last_err;		/* last non-zero err passed to end_write */
	pthread_t writers[TU_MAX_WRITERS];	/* distinct writer threads */
	unsigned int nr_writers;
	/* Optional: fail map_page with this errno for pages >= fail_from. */
	int map_err;
	uint64_t fail_from;
};

extern const struct pwb_inode_ops tu_ops;

/*
 * Library-owned pages (no get_page) mapped one to one onto the image:
 * page i is device byte i * 4096. The inode's priv is the image's size in
 * pages, tu_ident_pages(n); map_page gives -ERANGE at and past it.
 */
extern const struct pwb_inode_ops tu_ident_ops;
int tu_ident_map(struct pwb_inode *inode, uint64_t index, uint64_t *dev_off);
#define tu_ident_pages(n) ((void *)(uintptr_t)(n))

/* Allocate the page memory of @st (zeroed); aborts on failure. */
void tu_store_init(struct tu_store *st, uint64_t ino, unsigned int page_size,
		   uint64_t nr_pages, uint64_t base_off);
void tu_store_destroy(struct tu_store *st);
/* Open @st's inode on @bdi with tu_ops; return pwb_inode_open's result. */
int tu_store_open(struct tu_store *st, struct pwb_bdi *bdi);

/* Fill page @index of @st with a pattern naming (ino, index, version). */
void tu_fill_page(struct tu_store *st, uint64_t index, uint32_t version);
/* The version stored in page @index's memory. */
uint32_t tu_page_version(const struct tu_store *st, uint64_t index);

/* Compare the device image with the memory of @n stores, byte for byte.
 * Return the number of mismatching pages (0 = all equal), or -errno. */
long tu_verify_device(const char *path, struct tu_store *stores, unsigned n);

/* The same for stores that are not in one array. */
long tu_verify_stores(const char *path, struct tu_store *const *stores,
		      unsigned n);
/* Read one page of the device (O_DIRECT) into @buf (page aligned). */
int tu_read_device(const char *path, uint64_t off, void *buf, unsigned len);

/* Deterministic PRNG for tests (xorshift64*). */
static inline uint64_t tu_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

#define TU_MIN(a, b) ((a) < (b) ? (a) : (b))

/*
 * Lock and unlock one of lib/'s mutexes around a direct call of a *_locked
 * helper (white-box tests; include pwb-internal.h first). Under
 * ./configure --enable-lockdep this goes through the checker, which the
 * helper asks whether the thread holds the lock: a test's own pthread
 * calls are not seen by it.
 */
#ifdef PWB_LOCKDEP
#define tu_lib_lock(m) pwb__mutex_lock_at(m, false, __FILE__, __LINE__)
#define tu_lib_unlock(m) pwb__mutex_unlock_at(m, __FILE__, __LINE__)
#else
#define tu_lib_lock(m) pthread_mutex_lock(m)
#define tu_lib_unlock(m) pthread_mutex_unlock(m)
#endif

/*
 * The concurrent dirtying workload of the integrity suites: writer w owns
 * the stores i with i % nr_writers == w (no two threads write one page's
 * memory), dirties random ranges of up to max_range pages with the next
 * page version, and calls pwb_fsync every fsync_every marks. A flusher may
 * read a page while its owner rewrites it; the owner marks it dirty again
 * afterwards, so a later write carries the last version.
 */
struct tu_workload {
	struct pwb_bdi *bdi;
	struct tu_store *const *stores;	/* nr_stores, open on bdi */
	unsigned int nr_stores;
	unsigned int nr_writers;	/* at most nr_stores */
	unsigned int max_range;		/* pages per mark, at least 1 */
	unsigned int fsync_every;	/* 0: never */
	uint64_t min_marks;		/* per writer, before stopping */
	uint64_t min_flusher_pages;	/* written before stopping */
	unsigned int run_limit_ms;	/* stop after this at the latest */
	uint64_t seed;
	int stop;			/* atomic, the harness's */
};

/* Initialise @n stores of min_pages..max_pages pages (random, from @seed)
 * with inode numbers 1..n, back to back from device offset 0; return the
 * pages they cover. */
uint64_t tu_stores_layout(struct tu_store *const *st, unsigned int n,
			  unsigned int page_size, uint64_t min_pages,
			  uint64_t max_pages, uint64_t seed);
/* Open each store on @bdi with @ops (NULL: tu_ops; priv is the store) and
 * dirty all its pages with the next version. Asserts on failure. */
void tu_stores_open_dirty(struct pwb_bdi *bdi, struct tu_store *const *st,
			  unsigned int n, const struct pwb_inode_ops *ops);
/* Run the writers until each did min_marks marks and the flushers wrote
 * min_flusher_pages pages (or run_limit_ms passed), stop and join them,
 * then assert that every call succeeded and the activity happened. */
void tu_workload_run(struct tu_workload *wl);


/*
 * A test's device, as check_writeback and check_fault use it: one image,
 * one fake clock starting at TU_T0, one bdi with pages of TU_PS bytes.
 */
#define TU_PS 4096u
#define TU_T0 (1000ull * 1000000000ull)	/* fake clock at open: 1000 s */
#define TU_EXPIRE_MS 30000u			/* dirty_expire_ms */

struct tu_env {
	char *img;
	struct tu_clock clock;
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
};

/* pwb_bdi_config_init() plus: @nr_wb_ctx contexts, @backend (NULL: the
 * default), time from @clock (NULL: the real clock), no periodic timer, no
 * background writeback, no dirty limit. Page size and expiry stay the
 * library's defaults. */
/* Open @img with tu_config_quiet() (real clock), policy @spec and an
 * expiry of an hour: nothing is written unless the test asks. @page_size
 * and @max_write_failures 0 keep the defaults. Returns pwb_bdi_open()'s. */
int tu_open_quiet(const char *img, unsigned int nr_wb_ctx, const char *backend,
		  const char *spec, uint32_t page_size,
		  unsigned int max_write_failures, struct pwb_bdi **bdip);

void tu_config_quiet(struct pwb_bdi_config *cfg, unsigned int nr_wb_ctx,
		     const char *backend, struct tu_clock *clock);
/* Deterministic defaults: @nr_wb_ctx contexts, @backend (NULL: the
 * default), the fake clock at TU_T0, no periodic timer, no background
 * writeback, no dirty limit. The test may change e->cfg before opening. */
void tu_env_config(struct tu_env *e, unsigned int nr_wb_ctx,
		   const char *backend);
/* Create an image of @pages pages and open the bdi on it (asserts). The
 * image of a test that dies before tu_env_close() is removed at exit. */
void tu_env_open(struct tu_env *e, uint64_t pages);
/* Close the bdi expecting @want from pwb_bdi_close; remove the image. */
void tu_env_close_expect(struct tu_env *e, int want);
void tu_env_close(struct tu_env *e);
/* pwb_bdi_writeback(@reason, PWB_WB_WAIT), asserting it succeeds. */
void tu_writeback_wait(struct tu_env *e, enum pwb_wb_reason reason);

/* Open inode @ino of @nr_pages pages at device page @base_page with @ops
 * (NULL: tu_ops) over store @st (asserts). */
void tu_open_store(struct tu_env *e, struct tu_store *st, uint64_t ino,
		   uint64_t nr_pages, uint64_t base_page,
		   const struct pwb_inode_ops *ops);
/* Fill pages [@first, @first + @nr) with @version and mark them dirty. */
void tu_dirty_range(struct tu_store *st, uint64_t first, uint64_t nr,
		    uint32_t version);
/* pwb_inode_dirty_pages() of @st's inode (asserts). */
uint64_t tu_dirty_pages(struct tu_store *st);
/* Mismatching pages between @n stores' memory and the device (asserts
 * the device could be read). */
long tu_verify(struct tu_env *e, struct tu_store *st, unsigned int n);

#ifdef PWB_PCACHE_H
/* White-box tests that include lib/pcache.h: the chunks @bdi's page pool
 * has mapped (a pool gives its chunks back only when it ends, so this
 * never falls while the bdi is open). */
static inline uint64_t tu_pool_chunks(struct pwb_bdi *bdi)
{
	struct pwb__page_pool *pool = bdi->pcache->pool;
	uint64_t n;

	pthread_mutex_lock(&pool->lock);
	n = pool->nr_chunks;
	pthread_mutex_unlock(&pool->lock);
	return n;
}
#endif

#endif
