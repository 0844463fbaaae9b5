/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* test-util.c - helpers shared by the Check suites (see test-util.h) */
#define _GNU_SOURCE
#include "test-util.h"
#include "odirect-probe.h"

#include <check.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

const char *tu_test_dir(void)
{
	const char *d = getenv("PWB_TEST_DIR");

	return d && *d ? d : "/var/tmp";
}

int tu_odirect_unsupported(void)
{
	return tu_odirect_refused(tu_test_dir());
}

int tu_uring_unsupported(void)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	char path[4096];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/pwb-uring-probe-XXXXXX",
		 tu_test_dir());
	fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, 1 << 20)) {
		if (fd >= 0)
			close(fd);
		unlink(path);
		return 0;	/* let the tests report it */
	}
	close(fd);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1;
	cfg.backend = "io_uring";
	rc = pwb_bdi_open(path, &cfg, &bdi);
	if (!rc)
		pwb_bdi_close(bdi);
	unlink(path);
	/* Both refusals say "io_uring backend" (io-uring.c). */
	if (rc && (rc == -EOPNOTSUPP ||
		   strstr(pwb_errmsg(), "io_uring backend"))) {
		printf("SKIP: no io_uring here: %s\n", pwb_errmsg());
		return 1;
	}
	return 0;
}

/* Where tu_skip() records skips: one byte per skipped test, appended by
 * the forked test processes and counted by tu_run_suite(). */
static char tu_skip_path[4096];

void tu_skip(const char *fmt, ...)
{
	va_list ap;
	int fd;

	printf("SKIP %s: ", tcase_name());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	fd = tu_skip_path[0] ? open(tu_skip_path, O_WRONLY | O_APPEND) : -1;
	ck_assert_msg(fd >= 0, "tu_skip outside tu_run_suite");
	ck_assert_int_eq(write(fd, "s", 1), 1);
	close(fd);
}

int tu_run_suite(Suite *s, bool needs_odirect)
{
	struct stat sb;
	SRunner *sr;
	int failed, run, fd;

	if (needs_odirect && tu_odirect_unsupported())
		return 77;
	snprintf(tu_skip_path, sizeof(tu_skip_path), "%s/pwb-skips-XXXXXX",
		 tu_test_dir());
	fd = mkstemp(tu_skip_path);
	if (fd < 0) {
		fprintf(stderr, "mkstemp %s: %s\n", tu_skip_path,
			strerror(errno));
		return EXIT_FAILURE;
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	run = srunner_ntests_run(sr);
	srunner_free(sr);
	if (fstat(fd, &sb))
		sb.st_size = 0;
	close(fd);
	unlink(tu_skip_path);
	if (failed)
		return EXIT_FAILURE;
	if (sb.st_size > 0 && sb.st_size >= run) {
		printf("all %d tests skipped\n", run);
		return 77;
	}
	if (sb.st_size > 0)
		printf("%lld of %d tests skipped\n", (long long)sb.st_size, run);
	return EXIT_SUCCESS;
}

char *tu_image_create(uint64_t size)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/pwb-test-XXXXXX.img", tu_test_dir()) < 0)
		ck_abort_msg("asprintf failed");
	fd = mkstemps(path, 4);
	ck_assert_msg(fd >= 0, "cannot create image in %s: %s", tu_test_dir(),
		      strerror(errno));
	ck_assert_msg(ftruncate(fd, (off_t)size) == 0, "ftruncate: %s",
		      strerror(errno));
	close(fd);
	return path;
}

void tu_image_remove(char *path)
{
	if (!path)
		return;
	unlink(path);
	free(path);
}

uint64_t tu_clock_read(void *arg)
{
	struct tu_clock *c = arg;

	return __atomic_load_n(&c->now, __ATOMIC_ACQUIRE);
}

void tu_clock_set(struct tu_clock *c, uint64_t ns)
{
	__atomic_store_n(&c->now, ns, __ATOMIC_RELEASE);
}

void tu_clock_advance_ms(struct tu_clock *c, uint64_t ms)
{
	__atomic_add_fetch(&c->now, ms * 1000000ull, __ATOMIC_ACQ_REL);
}

static int tu_get_page(struct pwb_inode *inode, uint64_t index,
		       const void **data)
{
	struct tu_store *st = pwb_inode_priv(inode);

	if (index >= st->nr_pages)
		return -ERANGE;
	*data = st->mem + index * st->page_size;
	return 0;
}

static int tu_map_page(struct pwb_inode *inode, uint64_t index,
		       uint64_t *dev_off)
{
	struct tu_store *st = pwb_inode_priv(inode);

	if (index >= st->nr_pages)
		return -ERANGE;
	if (st->map_err && index >= st->fail_from)
		return -st->map_err;
	*dev_off = st->base_off + index * st->page_size;
	return 0;
}

static void tu_end_write(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			 int err)
{
	struct tu_store *st = pwb_inode_priv(inode);
	pthread_t self = pthread_self();
	unsigned int i;

	pthread_mutex_lock(&st->lock);
	st->writes++;
	if (err)
		st->last_err = err;
	else
		st->pages_written += nr;
	for (i = 0; i < st->nr_writers; i++)
		if (pthread_equal(st->writers[i], self))
			break;
	if (i == st->nr_writers && i < TU_MAX_WRITERS)
		st->writers[st->nr_writers++] = self;
	pthread_mutex_unlock(&st->lock);
}

/* gcc says __SANITIZE_THREAD__, clang __has_feature(thread_sanitizer). */
#if defined(__SANITIZE_THREAD__)
#define PWB__TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PWB__TEST_TSAN 1
#endif
#endif

int tu_ident_map(struct pwb_inode *inode, uint64_t index, uint64_t *dev_off)
{
	if (index >= (uint64_t)(uintptr_t)pwb_inode_priv(inode))
		return -ERANGE;
	*dev_off = index * 4096u;
	return 0;
}

const struct pwb_inode_ops tu_ident_ops = { .map_page = tu_ident_map };

const struct pwb_inode_ops tu_ops = {
	.get_page = tu_get_page,
	.map_page = tu_map_page,
	.end_write = tu_end_write,
};

#if defined(PWB__TEST_TSAN)
void AnnotateBenignRaceSized(const char *file, int line,
			     const volatile void *mem, unsigned long size,
			     const char *desc);
#endif

void tu_store_init(struct tu_store *st, uint64_t ino, unsigned int page_size,
		   uint64_t nr_pages, uint64_t base_off)
{
	memset(st, 0, sizeof(*st));
	st->ino = ino;
	st->page_size = page_size;
	st->nr_pages = nr_pages;
	st->base_off = base_off;
	ck_assert(posix_memalign((void **)&st->mem, 4096,
				 nr_pages * page_size) == 0);
	memset(st->mem, 0, nr_pages * page_size);
#if defined(PWB__TEST_TSAN)
	/* The test plays an application that rewrites pages while a flusher
	 * writes them, as pwb_mark_dirty allows: the page is dirtied again
	 * and written again. Only the page bytes race, by design. */
	AnnotateBenignRaceSized(__FILE__, __LINE__, st->mem,
				nr_pages * page_size,
				"page memory rewritten during writeback");
#endif
	pthread_mutex_init(&st->lock, NULL);
}

void tu_store_destroy(struct tu_store *st)
{
	free(st->mem);
	st->mem = NULL;
	pthread_mutex_destroy(&st->lock);
}

int tu_store_open(struct tu_store *st, struct pwb_bdi *bdi)
{
	return pwb_inode_open(bdi, st->ino, &tu_ops, st, &st->inode);
}

/* Page layout: every 8-byte word holds ino ^ index ^ version mixes, and the
 * first word the version itself, so a torn or stale page never matches. */
void tu_fill_page(struct tu_store *st, uint64_t index, uint32_t version)
{
	uint64_t *w = (uint64_t *)(st->mem + index * st->page_size);
	uint64_t seed = (st->ino << 40) ^ (index << 8) ^ version;
	unsigned int i, n = st->page_size / 8;

	w[0] = version;
	for (i = 1; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		w[i] = seed;
	}
}

uint32_t tu_page_version(const struct tu_store *st, uint64_t index)
{
	const uint64_t *w =
		(const uint64_t *)(st->mem + index * st->page_size);

	return (uint32_t)w[0];
}

int tu_read_device(const char *path, uint64_t off, void *buf, unsigned len)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len, (off_t)off);
	close(fd);
	if (n < 0)
		return -errno;
	return n == (ssize_t)len ? 0 : -EIO;
}

long tu_verify_device(const char *path, struct tu_store *stores, unsigned n)
{
	struct tu_store **ptrs = malloc((n ? n : 1) * sizeof(*ptrs));
	unsigned int i;
	long bad;

	if (!ptrs)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		ptrs[i] = &stores[i];
	bad = tu_verify_stores(path, ptrs, n);
	free(ptrs);
	return bad;
}

long tu_verify_stores(const char *path, struct tu_store *const *stores,
		      unsigned n)
{
	long bad = 0;
	unsigned int s;
	void *buf;
	int fd;

	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0)
		return -errno;
	if (posix_memalign(&buf, 4096, 1 << 20)) {
		close(fd);
		return -ENOMEM;
	}
	for (s = 0; s < n; s++) {
		struct tu_store *st = stores[s];
		uint64_t per = (1 << 20) / st->page_size, i, j;

		for (i = 0; i < st->nr_pages; i += per) {
			uint64_t cnt = TU_MIN(per, st->nr_pages - i);
			ssize_t r = pread(fd, buf, cnt * st->page_size,
					  (off_t)(st->base_off +
						  i * st->page_size));

			if (r != (ssize_t)(cnt * st->page_size)) {
				bad = r < 0 ? -errno : -EIO;
				goto out;
			}
			for (j = 0; j < cnt; j++)
				if (memcmp((char *)buf + j * st->page_size,
					   st->mem + (i + j) * st->page_size,
					   st->page_size))
					bad++;
		}
	}
out:
	free(buf);
	close(fd);
	return bad;
}

/* ---------------------------------------------------------------------- */
/* The concurrent dirtying workload                                       */

uint64_t tu_stores_layout(struct tu_store *const *st, unsigned int n,
			  unsigned int page_size, uint64_t min_pages,
			  uint64_t max_pages, uint64_t seed)
{
	uint64_t total = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		uint64_t pages = min_pages +
				 tu_rand(&seed) % (max_pages - min_pages + 1);

		tu_store_init(st[i], 1 + i, page_size, pages,
			      total * page_size);
		total += pages;
	}
	return total;
}

void tu_stores_open_dirty(struct pwb_bdi *bdi, struct tu_store *const *st,
			  unsigned int n, const struct pwb_inode_ops *ops)
{
	unsigned int i;
	int rc;

	for (i = 0; i < n; i++) {
		uint64_t p;

		rc = pwb_inode_open(bdi, st[i]->ino, ops ? ops : &tu_ops,
				    st[i], &st[i]->inode);
		ck_assert_msg(rc == 0, "pwb_inode_open(%llu): %s",
			      (unsigned long long)st[i]->ino,
			      pwb_strerror(rc));
		for (p = 0; p < st[i]->nr_pages; p++)
			tu_fill_page(st[i], p, tu_page_version(st[i], p) + 1);
		rc = pwb_mark_dirty(st[i]->inode, 0,
				    st[i]->nr_pages * st[i]->page_size);
		ck_assert_msg(rc == 0, "pwb_mark_dirty: %s", pwb_strerror(rc));
	}
}

struct tu_wl_writer {
	struct tu_workload *wl;
	pthread_t tid;
	unsigned int id;
	uint64_t seed;
	uint64_t marks;		/* atomic */
	int mark_err;		/* first pwb_mark_dirty error */
	int fsync_err;		/* first pwb_fsync error */
};

static void *tu_wl_writer_main(void *arg)
{
	struct tu_wl_writer *w = arg;
	struct tu_workload *wl = w->wl;
	unsigned int owned = wl->nr_stores / wl->nr_writers;

	while (!__atomic_load_n(&wl->stop, __ATOMIC_ACQUIRE)) {
		unsigned int i = w->id + wl->nr_writers *
				 (unsigned int)(tu_rand(&w->seed) % owned);
		struct tu_store *st = wl->stores[i];
		uint64_t first = tu_rand(&w->seed) % st->nr_pages;
		uint64_t nr = 1 + tu_rand(&w->seed) % wl->max_range, p, marks;
		int rc;

		nr = TU_MIN(nr, st->nr_pages - first);
		for (p = first; p < first + nr; p++)
			tu_fill_page(st, p, tu_page_version(st, p) + 1);
		rc = pwb_mark_dirty(st->inode, first * st->page_size,
				    nr * st->page_size);
		if (rc && !w->mark_err)
			w->mark_err = rc;
		marks = __atomic_add_fetch(&w->marks, 1, __ATOMIC_RELEASE);
		if (wl->fsync_every && marks % wl->fsync_every == 0) {
			rc = pwb_fsync(st->inode);
			if (rc && !w->fsync_err)
				w->fsync_err = rc;
		}
	}
	return NULL;
}

static uint64_t tu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void tu_workload_run(struct tu_workload *wl)
{
	struct tu_wl_writer *w = calloc(wl->nr_writers, sizeof(*w));
	struct timespec nap = { 0, 5 * 1000 * 1000 };
	unsigned int i, created = 0;
	uint64_t t_end;
	bool enough = false;

	ck_assert_ptr_nonnull(w);
	ck_assert_uint_ge(wl->nr_stores, wl->nr_writers);
	wl->stop = 0;
	for (i = 0; i < wl->nr_writers; i++) {
		w[i].wl = wl;
		w[i].id = i;
		w[i].seed = 0x9e3779b97f4a7c15ull * (i + 1) + wl->seed;
		if (pthread_create(&w[i].tid, NULL, tu_wl_writer_main, &w[i]))
			break;
		created++;
	}
	/* Bounded wait for enough concurrent activity. Wall time only
	 * bounds the run; no assertion is about speed. */
	t_end = tu_now_ms() + wl->run_limit_ms;
	while (created == wl->nr_writers && !enough && tu_now_ms() < t_end) {
		struct pwb_stats s;

		nanosleep(&nap, NULL);
		enough = pwb_bdi_stats(wl->bdi, &s) == 0 &&
			 s.written_pages >= wl->min_flusher_pages;
		for (i = 0; i < wl->nr_writers; i++)
			enough = enough &&
				 __atomic_load_n(&w[i].marks,
						 __ATOMIC_ACQUIRE) >=
					 wl->min_marks;
	}
	__atomic_store_n(&wl->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < created; i++)
		pthread_join(w[i].tid, NULL);

	ck_assert_uint_eq(created, wl->nr_writers);
	for (i = 0; i < wl->nr_writers; i++) {
		ck_assert_msg(w[i].mark_err == 0, "writer %u: mark_dirty: %s",
			      i, pwb_strerror(w[i].mark_err));
		ck_assert_msg(w[i].fsync_err == 0, "writer %u: fsync: %s", i,
			      pwb_strerror(w[i].fsync_err));
	}
	free(w);
	ck_assert_msg(enough, "no concurrent writeback within %u ms",
		      wl->run_limit_ms);
}

/* ---------------------------------------------------------------------- */
/* tu_env                                                                 */

/* Image of the running test, removed at exit if the test failed early. */
static char *tu_env_img;

static void tu_env_remove_stale(void)
{
	if (tu_env_img)
		unlink(tu_env_img);
}

void tu_config_quiet(struct pwb_bdi_config *cfg, unsigned int nr_wb_ctx,
		     const char *backend, struct tu_clock *clock)
{
	pwb_bdi_config_init(cfg);
	cfg->nr_wb_ctx = nr_wb_ctx;
	if (backend)
		cfg->backend = backend;
	if (clock) {
		cfg->clock = tu_clock_read;
		cfg->clock_arg = clock;
	}
	cfg->dirty_writeback_ms = 0;
	cfg->dirty_background_bytes = 0;
	cfg->dirty_bytes = 0;
}

int tu_open_quiet(const char *img, unsigned int nr_wb_ctx, const char *backend,
		  const char *spec, uint32_t page_size,
		  unsigned int max_write_failures, struct pwb_bdi **bdip)
{
	struct pwb_bdi_config cfg;

	tu_config_quiet(&cfg, nr_wb_ctx, backend, NULL);
	cfg.policy = spec;
	if (page_size)
		cfg.page_size = page_size;
	if (max_write_failures)
		cfg.max_write_failures = max_write_failures;
	cfg.dirty_expire_ms = 3600000;
	return pwb_bdi_open(img, &cfg, bdip);
}

void tu_env_config(struct tu_env *e, unsigned int nr_wb_ctx,
		   const char *backend)
{
	memset(e, 0, sizeof(*e));
	tu_clock_set(&e->clock, TU_T0);
	tu_config_quiet(&e->cfg, nr_wb_ctx, backend, &e->clock);
	e->cfg.page_size = TU_PS;
	e->cfg.dirty_expire_ms = TU_EXPIRE_MS;
}

void tu_env_open(struct tu_env *e, uint64_t pages)
{
	static bool registered;
	int rc;

	if (!registered) {
		atexit(tu_env_remove_stale);
		registered = true;
	}
	if (tu_env_img) {
		unlink(tu_env_img);
		free(tu_env_img);
		tu_env_img = NULL;
	}
	e->img = tu_image_create(pages * TU_PS);
	tu_env_img = strdup(e->img);
	rc = pwb_bdi_open(e->img, &e->cfg, &e->bdi);
	ck_assert_msg(rc == 0, "pwb_bdi_open(%s): %s (%s)", e->img,
		      pwb_strerror(rc), pwb_errmsg());
	if (e->cfg.nr_wb_ctx)
		ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(e->bdi), e->cfg.nr_wb_ctx);
}

void tu_env_close_expect(struct tu_env *e, int want)
{
	int rc = 0;

	if (e->bdi)
		rc = pwb_bdi_close(e->bdi);
	e->bdi = NULL;
	ck_assert_msg(rc == want, "pwb_bdi_close: %s, expected %s",
		      pwb_strerror(rc), pwb_strerror(want));
	tu_image_remove(e->img);
	e->img = NULL;
	free(tu_env_img);
	tu_env_img = NULL;
}

void tu_env_close(struct tu_env *e)
{
	tu_env_close_expect(e, 0);
}

void tu_writeback_wait(struct tu_env *e, enum pwb_wb_reason reason)
{
	int rc = pwb_bdi_writeback(e->bdi, reason, PWB_WB_WAIT);

	ck_assert_msg(rc == 0, "pwb_bdi_writeback(%d): %s", (int)reason,
		      pwb_strerror(rc));
}

void tu_open_store(struct tu_env *e, struct tu_store *st, uint64_t ino,
		   uint64_t nr_pages, uint64_t base_page,
		   const struct pwb_inode_ops *ops)
{
	int rc;

	tu_store_init(st, ino, TU_PS, nr_pages, base_page * TU_PS);
	rc = pwb_inode_open(e->bdi, ino, ops ? ops : &tu_ops, st, &st->inode);
	ck_assert_msg(rc == 0, "pwb_inode_open(%" PRIu64 "): %s", ino,
		      pwb_strerror(rc));
}

void tu_dirty_range(struct tu_store *st, uint64_t first, uint64_t nr,
		    uint32_t version)
{
	uint64_t i;
	int rc;

	for (i = first; i < first + nr; i++)
		tu_fill_page(st, i, version);
	rc = pwb_mark_dirty(st->inode, first * st->page_size,
			    nr * st->page_size);
	ck_assert_msg(rc == 0, "pwb_mark_dirty: %s", pwb_strerror(rc));
}

uint64_t tu_dirty_pages(struct tu_store *st)
{
	uint64_t nr = ~0ull;

	ck_assert_int_eq(pwb_inode_dirty_pages(st->inode, &nr), 0);
	return nr;
}

long tu_verify(struct tu_env *e, struct tu_store *st, unsigned int n)
{
	long bad = tu_verify_device(e->img, st, n);

	ck_assert_msg(bad >= 0, "tu_verify_device: %s", strerror((int)-bad));
	return bad;
}
