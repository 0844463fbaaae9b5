// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_bdi.c - opening, describing and closing backing devices
 *
 * Public API only: links the shared libpwb like any program.
 *
 * Two tests need more than a file in $PWB_TEST_DIR and skip, saying why,
 * when the machine cannot give it to them:
 *  - a file system that refuses O_DIRECT: /dev/shm when it is a tmpfs that
 *    refuses it (Linux < 6.6), else, as root, a ramfs mounted in a private
 *    mount namespace; or the directory named by $PWB_TEST_NODIRECT_DIR;
 *  - a block device: a loop device made with `losetup -f --show`.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

#define MiB (1024ull * 1024)

/*
 * The tcase's image: an unchecked fixture, so it is removed even when a test
 * fails. No test writes to it.
 */
static char *image;
static uint64_t image_size;

static void image_setup(void)
{
	/* Not a page multiple: capacity must round down. */
	image_size = 16 * MiB + 1536;
	image = tu_image_create(image_size);
}

static void image_teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

static int is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

static void cfg_quiet(struct pwb_bdi_config *cfg, struct tu_clock *clk)
{
	pwb_bdi_config_init(cfg);
	/* One context and one write in flight unless a test asks. */
	cfg->nr_wb_ctx = 1;
	cfg->backend = "psync";
	cfg->clock = tu_clock_read;
	cfg->clock_arg = clk;
	cfg->dirty_writeback_ms = 0;
}

/* ------------------------------------------------------------------ */

START_TEST(config_init_sets_documented_defaults)
{
	struct pwb_bdi_config cfg;

	memset(&cfg, 0xa5, sizeof(cfg));
	pwb_bdi_config_init(&cfg);
	ck_assert_uint_eq(cfg.nr_wb_ctx, 0);
	ck_assert_ptr_null(cfg.policy);
	ck_assert_uint_eq(cfg.page_size, 4096);
	ck_assert_uint_eq(cfg.dirty_background_bytes, 64 * MiB);
	ck_assert_uint_eq(cfg.dirty_bytes, 256 * MiB);
	ck_assert_uint_eq(cfg.dirty_expire_ms, 30000);
	ck_assert_uint_eq(cfg.dirty_writeback_ms, 5000);
	ck_assert_uint_eq(cfg.max_io_bytes, 1 * MiB);
	ck_assert_uint_eq(cfg.dirtytime_expire_ms, 43200000u);
	ck_assert_msg(cfg.backend == NULL || !strcmp(cfg.backend, "psync"),
		      "default backend is not NULL or \"psync\"");
	ck_assert_uint_eq(cfg.flags, 0);
	ck_assert_uint_eq(cfg.io_depth, 32);
	ck_assert_uint_eq(cfg.throttle_timeout_ms, 30000);
	ck_assert_uint_eq(cfg.nr_flushers, 0);
	ck_assert_uint_eq(cfg.max_inflight, 0);
	/* NULL is ignored. */
	pwb_bdi_config_init(NULL);
}
END_TEST

START_TEST(open_file_with_defaults_reports_geometry)
{
	struct pwb_bdi *bdi = NULL;
	struct pwb_bdi_info info;

	ck_assert_int_eq(pwb_bdi_open(image, NULL, &bdi), 0);
	ck_assert_ptr_nonnull(bdi);
	memset(&info, 0xa5, sizeof(info));
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);

	ck_assert_uint_eq(info.page_size, 4096);
	ck_assert_uint_eq(info.capacity, image_size / 4096 * 4096);
	ck_assert_msg(is_pow2(info.logical_block_size) &&
			      info.logical_block_size <= info.page_size,
		      "logical_block_size %u", info.logical_block_size);
	ck_assert_uint_ge(info.nr_wb_ctx, 1);
	ck_assert_uint_le(info.nr_wb_ctx, PWB_AUTO_MAX_WB_CTX);
	ck_assert_uint_eq(info.nr_wb_ctx, pwb_bdi_nr_wb_ctx(bdi));
	ck_assert_int_eq(info.is_blockdev, 0);
	ck_assert_msg(info.rotational >= -1 && info.rotational <= 1,
		      "rotational %d", info.rotational);
	ck_assert_str_eq(info.policy, "inode-hash");
	/* backend = NULL: io_uring where the kernel allows it. */
	ck_assert_msg(!strcmp(info.backend, "io_uring") ||
			      !strcmp(info.backend, "psync"),
		      "backend %s", info.backend);
	ck_assert_msg(!strncmp(info.backend_reason, "default", 7),
		      "backend_reason \"%s\"", info.backend_reason);

	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

START_TEST(capacity_rounds_down_to_a_larger_page_size)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct pwb_bdi_info info;
	char *img = tu_image_create(4 * MiB + 4096 + 512);

	pwb_bdi_config_init(&cfg);
	cfg.page_size = 65536;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(info.page_size, 65536);
	ck_assert_uint_eq(info.capacity, 4 * MiB);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(auto_nr_wb_ctx_starts_from_2_with_the_tuner_on)
{
	struct pwb_bdi *bdi;
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	unsigned int n;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 0;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	n = pwb_bdi_nr_wb_ctx(bdi);
	ck_assert_uint_eq(n, info.nr_wb_ctx);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_le(n, PWB_AUTO_MAX_WB_CTX);
	/* pwb.h: 2 whatever the rotational flag says, and the tuner on
	 * (an idle bdi is never tuned, so still 2 here). */
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(info.auto_wb_ctx, 1);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

static const unsigned int explicit_nr[] = {1, 2, 8, PWB_MAX_WB_CTX};

START_TEST(explicit_nr_wb_ctx_is_honoured)
{
	unsigned int want = explicit_nr[_i];
	struct pwb_bdi *bdi;
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	struct pwb_stats st;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = want;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), want);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(info.nr_wb_ctx, want);
	/* nr_flushers 0 (default): one flusher thread per context. */
	ck_assert_uint_eq(info.nr_flushers, want);
	/* Exactly @want contexts have statistics. */
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, want - 1, &st), 0);
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, want, &st), -ERANGE);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

START_TEST(nr_wb_ctx_of_null_is_0)
{
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(NULL), 0);
}
END_TEST

START_TEST(a_page_sized_device_opens)
{
	char *img = tu_image_create(4096);
	struct pwb_bdi *bdi;
	struct pwb_bdi_info info;

	ck_assert_int_eq(pwb_bdi_open(img, NULL, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(info.capacity, 4096);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(device_smaller_than_a_page_is_einval)
{
	static const uint64_t sizes[] = {0, 512, 2048, 4096 - 512};
	unsigned int i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *img = tu_image_create(sizes[i]);
		struct pwb_bdi *bdi = NULL;
		int rc = pwb_bdi_open(img, NULL, &bdi);

		if (rc == 0)
			pwb_bdi_close(bdi);
		ck_assert_msg(rc == -EINVAL, "size %llu: got %d (%s)",
			      (unsigned long long)sizes[i], rc,
			      pwb_strerror(rc));
		ck_assert_str_ne(pwb_errmsg(), "");
		tu_image_remove(img);
	}
}
END_TEST

START_TEST(directory_is_enotblk)
{
	struct pwb_bdi *bdi = NULL;
	int rc = pwb_bdi_open(tu_test_dir(), NULL, &bdi);

	if (rc == 0)
		pwb_bdi_close(bdi);
	ck_assert_msg(rc == -ENOTBLK, "%s: got %d (%s)", tu_test_dir(), rc,
		      pwb_strerror(rc));
	ck_assert_str_ne(pwb_errmsg(), "");
}
END_TEST

START_TEST(character_device_and_fifo_are_enotblk)
{
	struct pwb_bdi *bdi = NULL;
	char *fifo;
	int rc;

	if (access("/dev/null", R_OK | W_OK) == 0) {
		rc = pwb_bdi_open("/dev/null", NULL, &bdi);
		if (rc == 0)
			pwb_bdi_close(bdi);
		ck_assert_msg(rc == -ENOTBLK, "/dev/null: got %d (%s): %s", rc,
			      pwb_strerror(rc), pwb_errmsg());
	} else {
		printf("SKIP character device part: no usable /dev/null\n");
	}

	ck_assert_int_ge(asprintf(&fifo, "%s/pwb-fifo-%ld", tu_test_dir(),
				  (long)getpid()),
			 0);
	unlink(fifo);
	ck_assert_msg(mkfifo(fifo, 0600) == 0, "mkfifo %s: %s", fifo,
		      strerror(errno));
	bdi = NULL;
	rc = pwb_bdi_open(fifo, NULL, &bdi);
	if (rc == 0)
		pwb_bdi_close(bdi);
	unlink(fifo);
	free(fifo);
	ck_assert_msg(rc == -ENOTBLK, "FIFO: got %d (%s)", rc,
		      pwb_strerror(rc));
}
END_TEST

START_TEST(missing_path_is_enoent)
{
	struct pwb_bdi *bdi = NULL;
	char *path;
	int rc;

	ck_assert_int_ge(asprintf(&path, "%s/pwb-no-such-file-%ld.img",
				  tu_test_dir(), (long)getpid()),
			 0);
	unlink(path);
	rc = pwb_bdi_open(path, NULL, &bdi);
	if (rc == 0)
		pwb_bdi_close(bdi);
	ck_assert_msg(rc == -ENOENT, "got %d (%s)", rc, pwb_strerror(rc));
	ck_assert_str_ne(pwb_errmsg(), "");
	/* A failed open creates nothing. */
	ck_assert_int_ne(access(path, F_OK), 0);
	free(path);
}
END_TEST

START_TEST(close_null_is_0)
{
	ck_assert_int_eq(pwb_bdi_close(NULL), 0);
}
END_TEST

START_TEST(close_with_nothing_dirty_is_0)
{
	struct pwb_bdi *bdi;
	struct tu_store st;

	ck_assert_int_eq(pwb_bdi_open(image, NULL, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	/* Also with a clean inode still open: close frees it. */
	ck_assert_int_eq(pwb_bdi_open(image, NULL, &bdi), 0);
	tu_store_init(&st, 1, 4096, 4, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_uint_eq(st.writes, 0);
	tu_store_destroy(&st);
}
END_TEST

static void assert_stats_zero(const struct pwb_stats *st, const char *what)
{
#define Z(f)                                                                   \
	ck_assert_msg(st->f == 0, "%s: " #f " = %llu", what,                   \
		      (unsigned long long)st->f)
	Z(nr_dirty_inodes);
	Z(dirty_pages);
	Z(writeback_pages);
	Z(dirtied_pages);
	Z(written_pages);
	Z(io_submitted);
	Z(io_errors);
	Z(bytes_written);
	Z(nr_inodes);
	Z(nr_dirty_time_inodes);
	Z(wb_passes);
	Z(periodic_passes);
	Z(background_passes);
	Z(sync_passes);
	Z(inodes_written);
	Z(device_flushes);
#undef Z
}

START_TEST(stats_of_a_fresh_bdi_are_zero)
{
	struct tu_clock clk = {1000000000ull};
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct pwb_stats st;
	unsigned int i, n;

	cfg_quiet(&cfg, &clk);
	cfg.nr_wb_ctx = 4;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	memset(&st, 0xa5, sizeof(st));
	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	assert_stats_zero(&st, "bdi");
	n = pwb_bdi_nr_wb_ctx(bdi);
	for (i = 0; i < n; i++) {
		char what[32];

		snprintf(what, sizeof(what), "context %u", i);
		memset(&st, 0xa5, sizeof(st));
		ck_assert_int_eq(pwb_wb_ctx_stats(bdi, i, &st), 0);
		assert_stats_zero(&st, what);
	}
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

START_TEST(wb_ctx_stats_beyond_nr_is_erange)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct pwb_stats st;
	const unsigned int bad[] = {3, 4, PWB_MAX_WB_CTX, UINT_MAX};
	unsigned int i;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 3;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 2, &st), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(pwb_wb_ctx_stats(bdi, bad[i], &st), -ERANGE);
		ck_assert_str_ne(pwb_errmsg(), "");
	}
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A file system that refuses O_DIRECT                                 */

/* 1 if a file created in @dir cannot be opened O_DIRECT (EINVAL). */
static int dir_refuses_odirect(const char *dir)
{
	char path[PATH_MAX];
	int fd, refuses;

	snprintf(path, sizeof(path), "%s/pwb-probe-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return 0;
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	refuses = fd < 0 && errno == EINVAL;
	if (fd >= 0)
		close(fd);
	unlink(path);
	return refuses;
}

/*
 * Find a directory on a file system without O_DIRECT. Returns 1 and fills
 * @dir (and *@mounted if we mounted it, to unmount later), or 0 and fills
 * @why.
 */
static int find_nodirect_dir(char *dir, size_t len, int *mounted, char *why,
			     size_t wlen)
{
	const char *env = getenv("PWB_TEST_NODIRECT_DIR");
	struct statfs sfs;

	*mounted = 0;
	if (env && *env) {
		if (!dir_refuses_odirect(env)) {
			snprintf(why, wlen,
				 "$PWB_TEST_NODIRECT_DIR %s accepts O_DIRECT",
				 env);
			return 0;
		}
		snprintf(dir, len, "%s", env);
		return 1;
	}
	if (statfs("/dev/shm", &sfs) == 0 && sfs.f_type == TMPFS_MAGIC &&
	    dir_refuses_odirect("/dev/shm")) {
		snprintf(dir, len, "/dev/shm");
		return 1;
	}
	/*
	 * tmpfs supports O_DIRECT since Linux 6.6. ramfs never did: as root,
	 * mount one in a private mount namespace (of this thread only, and
	 * gone with the process if the test dies).
	 */
	if (geteuid() != 0) {
		snprintf(why, wlen,
			 "/dev/shm is missing or accepts O_DIRECT, and not "
			 "root to mount a ramfs");
		return 0;
	}
	if (unshare(CLONE_NEWNS) ||
	    mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, wlen,
			 "/dev/shm accepts O_DIRECT and no private mount "
			 "namespace for a ramfs: %s",
			 strerror(errno));
		return 0;
	}
	snprintf(dir, len, "%s/pwb-ramfs-XXXXXX", tu_test_dir());
	if (!mkdtemp(dir)) {
		snprintf(why, wlen, "mkdtemp: %s", strerror(errno));
		return 0;
	}
	if (mount("pwb-test", dir, "ramfs", 0, "mode=0700")) {
		snprintf(why, wlen,
			 "/dev/shm accepts O_DIRECT; mount ramfs: %s",
			 strerror(errno));
		rmdir(dir);
		return 0;
	}
	if (!dir_refuses_odirect(dir)) {
		snprintf(why, wlen, "both tmpfs and ramfs accept O_DIRECT");
		umount2(dir, MNT_DETACH);
		rmdir(dir);
		return 0;
	}
	*mounted = 1;
	return 1;
}

START_TEST(filesystem_refusing_odirect_is_einval)
{
	char dir[PATH_MAX], why[PATH_MAX + 128], msg[512], *path;
	struct pwb_bdi *bdi = NULL;
	int mounted, fd, rc;

	if (!find_nodirect_dir(dir, sizeof(dir), &mounted, why, sizeof(why))) {
		printf("SKIP filesystem_refusing_odirect_is_einval: %s\n", why);
		return;
	}
	ck_assert_int_ge(asprintf(&path, "%s/pwb-nodirect-XXXXXX.img", dir), 0);
	fd = mkstemps(path, 4);
	ck_assert_msg(fd >= 0, "mkstemps in %s: %s", dir, strerror(errno));
	ck_assert_int_eq(ftruncate(fd, 4 * MiB), 0);
	close(fd);

	rc = pwb_bdi_open(path, NULL, &bdi);
	snprintf(msg, sizeof(msg), "%s", pwb_errmsg());
	if (rc == 0)
		pwb_bdi_close(bdi);
	unlink(path);
	free(path);
	if (mounted) {
		umount2(dir, MNT_DETACH);
		rmdir(dir);
	}
	ck_assert_msg(rc == -EINVAL, "got %d (%s)", rc, pwb_strerror(rc));
	ck_assert_msg(strcasestr(msg, "direct") != NULL,
		      "message does not name O_DIRECT: \"%s\"", msg);
}
END_TEST

/* ------------------------------------------------------------------ */
/* A block device (loop)                                               */

static char *loop_image;
static char loop_dev[64];
static char loop_why[256];

/* Unchecked fixture (runs in the parent): the loop device outlives a
 * failing test, and is detached even then. */
static void loop_setup(void)
{
	char cmd[PATH_MAX + 64];
	FILE *p;
	int status;

	loop_dev[0] = '\0';
	loop_why[0] = '\0';
	loop_image = tu_image_create(16 * MiB);
	snprintf(cmd, sizeof(cmd), "losetup -f --show '%s' 2>&1", loop_image);
	p = popen(cmd, "r");
	if (!p) {
		snprintf(loop_why, sizeof(loop_why), "popen: %s",
			 strerror(errno));
		return;
	}
	if (!fgets(loop_dev, sizeof(loop_dev), p))
		loop_dev[0] = '\0';
	status = pclose(p);
	loop_dev[strcspn(loop_dev, "\n")] = '\0';
	if (status != 0 || strncmp(loop_dev, "/dev/", 5) != 0) {
		snprintf(loop_why, sizeof(loop_why),
			 "losetup -f --show failed (status %d): %s", status,
			 loop_dev);
		loop_dev[0] = '\0';
	}
}

static void loop_teardown(void)
{
	char cmd[128];

	if (loop_dev[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d '%s'", loop_dev);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: '%s' failed\n", cmd);
	}
	loop_dev[0] = '\0';
	tu_image_remove(loop_image);
	loop_image = NULL;
}

START_TEST(block_device_works_like_a_file)
{
	struct tu_clock clk = {1000000000ull};
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	struct pwb_bdi *bdi;
	struct pwb_stats st;
	struct tu_store store;
	int fd, ssz = 0;
	uint64_t i;

	if (!loop_dev[0]) {
		printf("SKIP block_device_works_like_a_file: %s\n", loop_why);
		return;
	}
	fd = open(loop_dev, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", loop_dev, strerror(errno));
	ck_assert_int_eq(ioctl(fd, BLKSSZGET, &ssz), 0);
	close(fd);

	cfg_quiet(&cfg, &clk);
	cfg.nr_wb_ctx = 2;
	ck_assert_int_eq(pwb_bdi_open(loop_dev, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_int_eq(info.is_blockdev, 1);
	ck_assert_uint_eq(info.capacity, 16 * MiB);
	ck_assert_uint_eq(info.logical_block_size, (unsigned int)ssz);
	ck_assert_uint_eq(info.page_size, 4096);
	ck_assert_uint_eq(info.nr_wb_ctx, 2);

	tu_store_init(&store, 3, 4096, 16, 1 * MiB);
	ck_assert_int_eq(tu_store_open(&store, bdi), 0);
	for (i = 0; i < store.nr_pages; i++)
		tu_fill_page(&store, i, 7);
	ck_assert_int_eq(pwb_mark_dirty(store.inode, 0, 16 * 4096), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);

	ck_assert_int_eq(pwb_bdi_stats(bdi, &st), 0);
	ck_assert_uint_eq(st.written_pages, 16);
	ck_assert_uint_eq(st.dirty_pages, 0);
	ck_assert_uint_ge(st.device_flushes, 1);
	ck_assert_int_eq(tu_verify_device(loop_dev, &store, 1), 0);

	ck_assert_int_eq(pwb_inode_close(store.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_store_destroy(&store);
}
END_TEST

/*
 * Torn pages. What statx(STATX_WRITE_ATOMIC) says about @path, read here
 * with the raw system call (the kernel's struct layout: unit min at 0xa8,
 * max at 0xac, segments at 0xb0), is what pwb_bdi_info() must report; and
 * PWB_BDI_ATOMIC_WRITES must open exactly where a page fits that range,
 * else fail with -EOPNOTSUPP and say why. Where the device offers atomic
 * writes, data written under the flag must read back.
 */
static void check_atomic_writes(const char *path, uint64_t pages)
{
	struct tu_clock clk = {1000000000ull};
	unsigned char stx[256] = {0};
	unsigned int min = 0, max = 0, segs = 0;
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;
	struct pwb_bdi *bdi;
	int fd, rc;

	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, 0x00010000u, stx) == 0 &&
	    (*(uint32_t *)stx & 0x00010000u) &&
	    (*(uint64_t *)(stx + 8) & 0x00400000u)) {
		memcpy(&min, stx + 0xa8, 4);
		memcpy(&max, stx + 0xac, 4);
		memcpy(&segs, stx + 0xb0, 4);
	}
	close(fd);

	cfg_quiet(&cfg, &clk);
	ck_assert_int_eq(pwb_bdi_open(path, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_uint_eq(info.atomic_write_unit_min, min);
	ck_assert_uint_eq(info.atomic_write_unit_max, max);
	ck_assert_uint_eq(info.atomic_write_segments_max, segs);
	ck_assert_int_eq(info.atomic_writes,
			 min && min <= info.page_size && max >= info.page_size);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	cfg.flags = PWB_BDI_ATOMIC_WRITES;
	rc = pwb_bdi_open(path, &cfg, &bdi);
	if (!info.atomic_writes) {
		printf("%s: no atomic writes for %u-byte pages (statx says "
		       "%u..%u): PWB_BDI_ATOMIC_WRITES must refuse\n",
		       path, info.page_size, min, max);
		ck_assert_int_eq(rc, -EOPNOTSUPP);
		ck_assert_msg(strstr(pwb_errmsg(), "atomic") != NULL,
			      "message: %s", pwb_errmsg());
		return;
	}
	ck_assert_int_eq(rc, 0);
	{
		struct tu_store store;
		uint64_t i;

		tu_store_init(&store, 5, info.page_size, pages, 0);
		ck_assert_int_eq(tu_store_open(&store, bdi), 0);
		for (i = 0; i < pages; i++)
			tu_fill_page(&store, i, 3);
		ck_assert_int_eq(pwb_mark_dirty(store.inode, 0,
						pages * info.page_size),
				 0);
		ck_assert_int_eq(pwb_sync(bdi), 0);
		ck_assert_int_eq(tu_verify_device(path, &store, 1), 0);
		ck_assert_int_eq(pwb_inode_close(store.inode), 0);
		tu_store_destroy(&store);
	}
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
}

START_TEST(atomic_writes_reported_and_required_as_the_file_offers)
{
	check_atomic_writes(image, 64);
}
END_TEST

START_TEST(atomic_writes_reported_and_required_as_the_device_offers)
{
	if (!loop_dev[0]) {
		printf("SKIP atomic_writes_..._device_offers: %s\n", loop_why);
		return;
	}
	check_atomic_writes(loop_dev, 64);
}
END_TEST

static Suite *bdi_suite(void)
{
	Suite *s = suite_create("bdi");
	TCase *tc;

	tc = tcase_create("open");
	tcase_add_unchecked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, config_init_sets_documented_defaults);
	tcase_add_test(tc, open_file_with_defaults_reports_geometry);
	tcase_add_test(tc, capacity_rounds_down_to_a_larger_page_size);
	tcase_add_test(tc, auto_nr_wb_ctx_starts_from_2_with_the_tuner_on);
	tcase_add_loop_test(tc, explicit_nr_wb_ctx_is_honoured, 0,
			    sizeof(explicit_nr) / sizeof(explicit_nr[0]));
	tcase_add_test(tc, nr_wb_ctx_of_null_is_0);
	tcase_add_test(tc, a_page_sized_device_opens);
	tcase_add_test(tc, device_smaller_than_a_page_is_einval);
	tcase_add_test(tc, directory_is_enotblk);
	tcase_add_test(tc, character_device_and_fifo_are_enotblk);
	tcase_add_test(tc, missing_path_is_enoent);
	tcase_add_test(tc, filesystem_refusing_odirect_is_einval);
	tcase_add_test(tc,
		atomic_writes_reported_and_required_as_the_file_offers);
	suite_add_tcase(s, tc);

	tc = tcase_create("close_and_stats");
	tcase_add_unchecked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, close_null_is_0);
	tcase_add_test(tc, close_with_nothing_dirty_is_0);
	tcase_add_test(tc, stats_of_a_fresh_bdi_are_zero);
	tcase_add_test(tc, wb_ctx_stats_beyond_nr_is_erange);
	suite_add_tcase(s, tc);

	tc = tcase_create("blockdev");
	tcase_add_unchecked_fixture(tc, loop_setup, loop_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, block_device_works_like_a_file);
	tcase_add_test(tc,
		atomic_writes_reported_and_required_as_the_device_offers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(bdi_suite(), false);
}
