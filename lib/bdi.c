// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * bdi.c - the backing device: open (config checks, geometry, backend,
 * contexts), its public queries, close
 *
 * The top floor: it opens and tears down every layer below. The engine
 * never calls back here; what it asks of a running bdi is in
 * bdi-state.c, and pwb_bdi_writeback(), pwb_sync() and device flushes
 * are writeback's (writeback.c).
 */
#include "base.h"
#include "completion.h"
#include "io.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "pacing.h"
#include "autotune.h"
#include "bdi.h"
#include "inode.h"
#include "writeback.h"
#include "page-owner.h"
#include "space.h"
#include "domain.h"
#include "blocked.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_LINUX_FS_H
#include <linux/fs.h>
#endif

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif
/* Linux 6.11 uapi; Debian 12's headers stop before these. */
#ifndef STATX_WRITE_ATOMIC
#define STATX_WRITE_ATOMIC 0x00010000U
#endif
#ifndef STATX_ATTR_WRITE_ATOMIC
#define STATX_ATTR_WRITE_ATOMIC 0x00400000
#endif
/* Where the kernel puts stx_atomic_write_unit_min, _max and
 * _segments_max in its 256-byte struct statx: after stx_subvol (0xa0). */
#define STX_AWU_MIN_OFF 0xa8
#define STX_AWU_MAX_OFF 0xac
#define STX_AWU_SEGS_OFF 0xb0
_Static_assert(sizeof(struct statx) == 0x100, "struct statx is 256 bytes");
_Static_assert(offsetof(struct statx, stx_dio_offset_align) == 0x9c,
	       "struct statx has the kernel's layout");

#define MAX_PAGE_SIZE (1u << 20)
#define MAX_IO_BYTES (64u << 20)

PWB_API unsigned int pwb_version(void)
{
	return PWB_VERSION_NUMBER;
}

void pwb__bdi_config_defaults(struct pwb_bdi_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->nr_wb_ctx = 0;
	cfg->policy = NULL;
	cfg->page_size = 4096;
	cfg->dirty_background_bytes = 64ull << 20;
	cfg->dirty_bytes = 256ull << 20;
	cfg->dirty_expire_ms = 30000;
	cfg->dirty_writeback_ms = 5000;
	cfg->max_io_bytes = 1u << 20;
	cfg->dirtytime_expire_ms = 12u * 3600u * 1000u;
	cfg->backend = NULL;
	cfg->clock = NULL;
	cfg->clock_arg = NULL;
	cfg->flags = 0;
	cfg->io_depth = 32;
	cfg->throttle_timeout_ms = 30000;
	cfg->max_write_failures = 8;
	cfg->cache_bytes = 0;
	cfg->readahead_bytes = 2u << 20;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Checks that need no device. */
static int check_config(const struct pwb_bdi_config *cfg)
{
	if (!is_pow2(cfg->page_size))
		return pwb__err(-EINVAL, "page_size %u is %s", cfg->page_size,
				cfg->page_size ? "not a power of two" : "zero");
	if (cfg->page_size > MAX_PAGE_SIZE)
		return pwb__err(-EINVAL, "page_size %u is above 1 MiB",
				cfg->page_size);
	if (cfg->max_io_bytes < cfg->page_size ||
	    cfg->max_io_bytes % cfg->page_size)
		return pwb__err(-EINVAL, "max_io_bytes %u is not a positive "
					 "multiple of page_size %u",
				cfg->max_io_bytes, cfg->page_size);
	if (cfg->max_io_bytes > MAX_IO_BYTES)
		return pwb__err(-EINVAL, "max_io_bytes %u is above 64 MiB",
				cfg->max_io_bytes);
	if (cfg->nr_wb_ctx > PWB_MAX_WB_CTX)
		return pwb__err(-EINVAL, "nr_wb_ctx %u is above the limit %u",
				cfg->nr_wb_ctx, PWB_MAX_WB_CTX);
	if (cfg->nr_flushers > PWB_MAX_WB_CTX)
		return pwb__err(-EINVAL, "nr_flushers %u is above the limit %u",
				cfg->nr_flushers, PWB_MAX_WB_CTX);
	if (cfg->dirty_bytes &&
	    cfg->dirty_bytes < cfg->dirty_background_bytes)
		return pwb__err(-EINVAL, "dirty_bytes %llu is below "
					 "dirty_background_bytes %llu",
				(unsigned long long)cfg->dirty_bytes,
				(unsigned long long)cfg->dirty_background_bytes);
	if (cfg->io_depth < 1 || cfg->io_depth > 4096)
		return pwb__err(-EINVAL, "io_depth %u is outside 1..4096",
				cfg->io_depth);
	if (cfg->nr_alloc_groups > 4096)
		return pwb__err(-EINVAL, "nr_alloc_groups %u is above 4096",
				cfg->nr_alloc_groups);
	if (cfg->flags & ~PWB_BDI_FLAGS_ALL)
		return pwb__err(-EINVAL, "unknown flags 0x%x",
				cfg->flags & ~PWB_BDI_FLAGS_ALL);
	return pwb__autotune_check(cfg);
}

/* 1 if device maj:min (or, for a partition, its disk) is rotational, 0 if
 * not, -1 if unknown. */
static int read_rotational(unsigned int maj, unsigned int min)
{
	int i;

	for (i = 0; i < 2; i++) {
		char path[128];
		FILE *f;
		int v;

		snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%squeue/"
			 "rotational", maj, min, i ? "../" : "");
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
		return v;
	}
	return -1;
}

/* Fill in lbs, capacity, rotational, is_blockdev of @bdi from its fd. */
static int probe_geometry(struct pwb_bdi *bdi, const char *path)
{
	struct stat st;

	if (fstat(bdi->fd, &st))
		return pwb__err(-errno, "fstat %s: %s", path, strerror(errno));
	if (S_ISBLK(st.st_mode)) {
#if defined(BLKSSZGET) && defined(BLKGETSIZE64)
		int lbs;
		uint64_t size;

		if (ioctl(bdi->fd, BLKSSZGET, &lbs))
			return pwb__err(-errno, "BLKSSZGET on %s: %s", path,
					strerror(errno));
		if (ioctl(bdi->fd, BLKGETSIZE64, &size))
			return pwb__err(-errno, "BLKGETSIZE64 on %s: %s", path,
					strerror(errno));
		bdi->lbs = (unsigned int)lbs;
		bdi->capacity = size;
		bdi->is_blockdev = 1;
		bdi->rotational = read_rotational(major(st.st_rdev),
						  minor(st.st_rdev));
#else
		return pwb__err(-ENOTSUP, "no block-device ioctls here");
#endif
	} else if (S_ISREG(st.st_mode)) {
		struct statx stx;

		bdi->lbs = 0;
		if (!statx(bdi->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
		    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align)
			bdi->lbs = stx.stx_dio_offset_align;
		if (!bdi->lbs)	/* older kernels: the block size is safe */
			bdi->lbs = (unsigned int)st.st_blksize;
		bdi->capacity = (uint64_t)st.st_size;
		bdi->is_blockdev = 0;
		bdi->rotational = read_rotational(major(st.st_dev),
						  minor(st.st_dev));
	} else {
		return pwb__err(-ENOTBLK, "%s is neither a block device nor "
					  "a regular file",
				path);
	}
	if (!is_pow2(bdi->lbs))
		return pwb__err(-EINVAL, "%s: odd logical block size %u",
				path, bdi->lbs);
	return 0;
}

/* Read one block with O_DIRECT: some file systems accept the open flag
 * but refuse the I/O. */
static int probe_direct_io(struct pwb_bdi *bdi, const char *path)
{
	void *buf;
	ssize_t n;

	if (posix_memalign(&buf, PWB__MAX(bdi->lbs, 4096u), bdi->lbs))
		return pwb__err(-ENOMEM, "out of memory");
	n = pread(bdi->fd, buf, bdi->lbs, 0);
	free(buf);
	if (n < 0 && errno == EINVAL)
		return pwb__err(-EINVAL, "%s: the file system refuses O_DIRECT "
					 "reads; libpwb never falls back to "
					 "buffered I/O",
				path);
	if (n < 0)
		return pwb__err(-errno, "%s: O_DIRECT read failed: %s", path,
				strerror(errno));
	return 0;
}

static unsigned int statx_u32(const struct statx *stx, size_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)stx + off, sizeof(v));
	return v;
}

/*
 * Torn pages: ask statx what the device writes untorn. Pages go out with
 * RWF_ATOMIC when that range holds page_size; PWB_BDI_ATOMIC_WRITES makes
 * it a requirement (-EOPNOTSUPP otherwise).
 */
static int probe_atomic_writes(struct pwb_bdi *bdi, const char *path)
{
	unsigned int ps = bdi->cfg.page_size;
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	if (!statx(bdi->fd, "", AT_EMPTY_PATH, STATX_WRITE_ATOMIC, &stx) &&
	    (stx.stx_mask & STATX_WRITE_ATOMIC) &&
	    (stx.stx_attributes & STATX_ATTR_WRITE_ATOMIC)) {
		bdi->awu_min = statx_u32(&stx, STX_AWU_MIN_OFF);
		bdi->awu_max = statx_u32(&stx, STX_AWU_MAX_OFF);
		bdi->awu_segs = statx_u32(&stx, STX_AWU_SEGS_OFF);
	}
	bdi->atomic = bdi->awu_min && bdi->awu_min <= ps &&
		      bdi->awu_max >= ps;
	if ((bdi->cfg.flags & PWB_BDI_ATOMIC_WRITES) && !bdi->atomic) {
		if (!bdi->awu_max)
			return pwb__err(-EOPNOTSUPP, "%s reports no atomic "
						     "writes (statx "
						     "STATX_WRITE_ATOMIC, Linux "
						     "6.11+): pages could be "
						     "torn by a crash",
					path);
		return pwb__err(-EOPNOTSUPP, "%s writes %u to %u bytes "
					     "atomically, which does not hold "
					     "a page of %u bytes",
				path, bdi->awu_min, bdi->awu_max, ps);
	}
	return 0;
}

/* The backends a bdi may be opened with (cfg.backend names one). */
static const struct pwb__io_backend *const backends[] = {
	&pwb__io_psync,
	&pwb__io_uring,	/* registered even when built without liburing:
			 * its ctx_init then explains, with -EOPNOTSUPP */
	&pwb__io_null,
};

/* The backend called @name, or NULL. */
static const struct pwb__io_backend *backend_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(backends) / sizeof(*backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

/* The backend @cfg asks for; backend = NULL picks io_uring where this
 * process may use it (a ring of io_depth entries can be set up), psync
 * otherwise. Records why in bdi->backend_reason. NULL for an unknown
 * name. */
static const struct pwb__io_backend *
choose_backend(struct pwb_bdi *bdi, const struct pwb_bdi_config *cfg)
{
	char *why = bdi->backend_reason;
	size_t len = sizeof(bdi->backend_reason);
	int ret;

	if (cfg->backend) {
		snprintf(why, len, "asked for (backend = \"%s\")",
			 cfg->backend);
		return backend_find(cfg->backend);
	}
	ret = pwb__io_uring_probe(cfg->io_depth);
	if (!ret) {
		snprintf(why, len, "default: io_uring_queue_init works here");
		return &pwb__io_uring;
	}
	if (ret == -EOPNOTSUPP)
		snprintf(why, len, "default: psync (built without liburing)");
	else
		snprintf(why, len, "default: psync, io_uring refused (%s)",
			 strerror(-ret));
	return &pwb__io_psync;
}

/* The context count to open with. nr_wb_ctx = 0 turns the tuner on
 * (cfg.flags in @bdi's copy) and starts from pwb__auto_nr_wb_ctx().
 * Records why in bdi->nr_wb_ctx_reason. */
static unsigned int choose_nr_wb_ctx(struct pwb_bdi *bdi)
{
	char *why = bdi->nr_wb_ctx_reason;
	size_t len = sizeof(bdi->nr_wb_ctx_reason);
	unsigned int nr;

	if (!bdi->cfg.nr_wb_ctx) {
		bdi->cfg.flags |= PWB_BDI_AUTO_WB_CTX;
		nr = pwb__autotune_start_nr(bdi);
		snprintf(why, len, "default: %u to start, then the tuner "
				   "on measured bandwidth; the rotational "
				   "flag is not trusted",
			 nr);
		return nr;
	}
	if (bdi->cfg.flags & PWB_BDI_AUTO_WB_CTX) {
		nr = pwb__autotune_start_nr(bdi);
		snprintf(why, len, "PWB_BDI_AUTO_WB_CTX: %u to start, then "
				   "the tuner on measured bandwidth",
			 nr);
		return nr;
	}
	snprintf(why, len, "asked for (nr_wb_ctx = %u)", bdi->cfg.nr_wb_ctx);
	return bdi->cfg.nr_wb_ctx;
}

/* Destroy the first @nr contexts of @arr, and @arr (no flusher runs). */
static void free_ctxs(struct pwb__wb_ctx_array *arr, unsigned int nr)
{
	unsigned int i;

	for (i = 0; i < nr; i++) {
		pwb__wb_ctx_destroy(arr->ctx[i]);
		free(arr->ctx[i]);
	}
	free(arr);
}

static void stop_flushers(struct pwb_bdi *bdi)
{
	unsigned int i;

	for (i = 0; i < PWB_MAX_WB_CTX; i++)
		pwb__flusher_stop(bdi, i);
}

static void free_flushers(struct pwb_bdi *bdi)
{
	unsigned int i;

	for (i = 0; i < PWB_MAX_WB_CTX; i++) {
		struct pwb__flusher *fl = bdi->flushers[i];

		if (!fl)
			continue;
		pthread_cond_destroy(&fl->cond);
		pthread_mutex_destroy(&fl->lock);
		free(fl);
		bdi->flushers[i] = NULL;
	}
}

static int create_ctxs(struct pwb_bdi *bdi, unsigned int nr)
{
	unsigned int i, nf = pwb__nr_flushers_for(bdi, nr);
	struct pwb__wb_ctx_array *arr;
	int ret = 0;

	arr = pwb__ctx_array_alloc(bdi, NULL, nr, &ret);
	if (!arr)
		return ret;
	PWB__RCU_ASSIGN(bdi->ctxs, arr);
	pwb__aset(&bdi->nr_flushers, nf);
	for (i = 0; i < nf; i++) {
		ret = pwb__flusher_start(bdi, i);
		if (ret) {
			stop_flushers(bdi);
			free_flushers(bdi);
			bdi->ctxs = NULL;
			free_ctxs(arr, nr);
			return ret;
		}
	}
	return 0;
}

static void destroy_locks(struct pwb_bdi *bdi)
{
	pthread_cond_destroy(&bdi->idle_cond);
	pthread_cond_destroy(&bdi->inflight_cond);
	pthread_mutex_destroy(&bdi->inflight_lock);
	pthread_mutex_destroy(&bdi->reshard_lock);
	pthread_cond_destroy(&bdi->park_cond);
	pthread_mutex_destroy(&bdi->park_lock);
	pthread_mutex_destroy(&bdi->flush_lock);
	pthread_mutex_destroy(&bdi->cursor_lock);
	pthread_mutex_destroy(&bdi->lock);
	pwb__rate_destroy(&bdi->rate);
}

int pwb__bdi_open(const char *path, const struct pwb_bdi_config *cfg,
		  struct pwb_bdi **bdip)
{
	struct pwb_bdi_config defaults;
	struct pwb_bdi *bdi;
	unsigned int nr;
	int ret;

	pwb__err_clear();
	if (!path || !bdip)
		return pwb__err(-EINVAL, "pwb_bdi_open: NULL %s",
				!path ? "path" : "bdip");
	if (!cfg) {
		pwb__bdi_config_defaults(&defaults);
		cfg = &defaults;
	}
	ret = check_config(cfg);
	if (ret)
		return ret;

	bdi = calloc(1, sizeof(*bdi));
	if (!bdi)
		return pwb__err(-ENOMEM, "out of memory");
	bdi->cfg = *cfg;
	bdi->write_epoch = 1;		/* 0 is "never written" */
	bdi->cfg.policy = NULL;		/* not kept: copied below */
	bdi->cfg.backend = NULL;
	if (!bdi->cfg.clock)
		bdi->cfg.clock = pwb__clock_monotonic;
	bdi->page_shift = (unsigned int)__builtin_ctz(cfg->page_size);
	bdi->dirty_expire_ns = cfg->dirty_expire_ms * PWB__NSEC_PER_MSEC;
	bdi->dirtytime_expire_ns =
		cfg->dirtytime_expire_ms * PWB__NSEC_PER_MSEC;
	bdi->writeback_interval_ns =
		cfg->dirty_writeback_ms * PWB__NSEC_PER_MSEC;
	bdi->bg_thresh_pages = cfg->dirty_background_bytes >> bdi->page_shift;
	if (cfg->dirty_background_bytes && !bdi->bg_thresh_pages)
		bdi->bg_thresh_pages = 1;
	bdi->max_io_pages = cfg->max_io_bytes >> bdi->page_shift;
	bdi->dirty_limit_pages = cfg->dirty_bytes >> bdi->page_shift;
	if (cfg->dirty_bytes && !bdi->dirty_limit_pages)
		bdi->dirty_limit_pages = 1;
	pwb__mutex_init(&bdi->lock, PWB__LOCK_BDI);
	{
		pthread_condattr_t attr;

		pthread_condattr_init(&attr);
		pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
		pthread_cond_init(&bdi->idle_cond, &attr);
		pthread_condattr_destroy(&attr);
	}
	pwb__mutex_init(&bdi->flush_lock, PWB__LOCK_FLUSH);
	pwb__mutex_init(&bdi->cursor_lock, PWB__LOCK_CURSOR);
	pwb__mutex_init(&bdi->park_lock, PWB__LOCK_PARK);
	pthread_cond_init(&bdi->park_cond, NULL);
	pwb__mutex_init(&bdi->reshard_lock, PWB__LOCK_RESHARD);
	pwb__mutex_init(&bdi->inflight_lock, PWB__LOCK_INFLIGHT);
	pthread_cond_init(&bdi->inflight_cond, NULL);
	pwb__rate_init(&bdi->rate, cfg->rate_limit_bytes_per_sec,
		       cfg->max_io_bytes, pwb__now(bdi));
	bdi->fd = -1;

	bdi->io = choose_backend(bdi, cfg);
	if (!bdi->io) {
		ret = pwb__err(-ENOENT, "unknown I/O backend \"%s\"",
			       cfg->backend);
		goto fail;
	}
	bdi->path = strdup(path);
	if (!bdi->path) {
		ret = pwb__err(-ENOMEM, "out of memory");
		goto fail;
	}
	/* The type first: O_DIRECT on a character device or FIFO fails with
	 * EINVAL, which would read as "file system refuses O_DIRECT". */
	{
		struct stat pst;

		if (stat(path, &pst)) {
			int e = errno;

			ret = pwb__err(-e, "cannot open %s: %s", path,
				       strerror(e));
			goto fail;
		}
		if (!S_ISBLK(pst.st_mode) && !S_ISREG(pst.st_mode)) {
			ret = pwb__err(-ENOTBLK, "%s is neither a block device "
						 "nor a regular file",
				       path);
			goto fail;
		}
	}
	bdi->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (bdi->fd < 0) {
		int e = errno;

		if (e == EISDIR)
			ret = pwb__err(-ENOTBLK, "%s is a directory, not a "
						 "block device or file",
				       path);
		else if (e == EINVAL)
			ret = pwb__err(-EINVAL, "%s: the file system refuses "
						"O_DIRECT; libpwb never falls "
						"back to buffered I/O",
				       path);
		else
			ret = pwb__err(-e, "cannot open %s: %s", path,
				       strerror(e));
		goto fail;
	}
	ret = probe_geometry(bdi, path);
	if (ret)
		goto fail;
	if (cfg->page_size < bdi->lbs) {
		ret = pwb__err(-EINVAL, "page_size %u is below the logical "
					"block size %u of %s",
			       cfg->page_size, bdi->lbs, path);
		goto fail;
	}
	bdi->capacity &= ~((uint64_t)cfg->page_size - 1);
	if (!bdi->capacity) {
		ret = pwb__err(-EINVAL, "%s is smaller than one page (%u "
					"bytes)",
			       path, cfg->page_size);
		goto fail;
	}
	ret = probe_direct_io(bdi, path);
	if (!ret)
		ret = probe_atomic_writes(bdi, path);
	if (ret)
		goto fail;
	ret = pwb__domain_attach(bdi, cfg);
	if (ret)
		goto fail;
	ret = pwb__pcache_bdi_init(bdi);
	if (ret)
		goto fail;
	bdi->inodes = cds_lfht_new(64, 64, 0,
				   CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				   NULL);
	if (!bdi->inodes) {
		ret = pwb__err(-ENOMEM, "cannot create the inode table");
		goto fail;
	}
	ret = pwb__space_bdi_init(bdi);
	if (ret) {
		ret = pwb__err(ret, "cannot set up the allocator");
		goto fail_table;
	}
	nr = choose_nr_wb_ctx(bdi);
	ret = create_ctxs(bdi, nr);
	if (ret)
		goto fail_table;
	/* Last, so that a policy's init sees a whole bdi (pwb_bdi_info,
	 * pwb_wb_ctx_stats); no inode exists yet to be placed. */
	bdi->policy = calloc(1, sizeof(*bdi->policy));
	ret = bdi->policy ? pwb__policy_create(bdi, cfg->policy, bdi->policy)
			  : pwb__err(-ENOMEM, "out of memory");
	if (ret) {
		free(bdi->policy);
		goto fail_ctxs;
	}
	pwb__ctxs_apply_policy(bdi->ctxs, bdi->policy);
	/* After the policy: the tuner may re-shard at once. */
	ret = pwb__autotune_start(bdi);
	if (ret) {
		pwb__policy_destroy(bdi->policy);
		free(bdi->policy);
		goto fail_ctxs;
	}
	/* Whole now: the domain's other bdis may read its contexts. */
	pwb__domain_publish(bdi);
	*bdip = bdi;
	return 0;

fail_ctxs:
	stop_flushers(bdi);
	free_flushers(bdi);
	free_ctxs(bdi->ctxs, bdi->ctxs->nr);
	bdi->ctxs = NULL;
fail_table:
	pwb__space_bdi_fini(bdi);
	cds_lfht_destroy(bdi->inodes, NULL);
fail:
	pwb__domain_leave(bdi);		/* never published: no reader */
	pwb__domain_member_free(bdi);
	pwb__pcache_bdi_fini(bdi);
	if (bdi->fd >= 0)
		close(bdi->fd);
	free(bdi->path);
	destroy_locks(bdi);
	free(bdi);
	return ret;
}

PWB_API unsigned int pwb_bdi_nr_wb_ctx(const struct pwb_bdi *bdi)
{
	pwb__err_clear();
	if (!bdi) {
		pwb__err(-EINVAL, "pwb_bdi_nr_wb_ctx: NULL bdi");
		return 0;
	}
	return pwb__bdi_nr_wb_ctx(bdi);
}

int pwb__bdi_info(struct pwb_bdi *bdi, struct pwb_bdi_info *info)
{
	pwb__err_clear();
	if (!bdi || !info)
		return pwb__err(-EINVAL, "pwb_bdi_info: NULL %s",
				!bdi ? "bdi" : "info");
	memset(info, 0, sizeof(*info));
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_info"))
		return -ESHUTDOWN;
	info->capacity = bdi->capacity;
	info->logical_block_size = bdi->lbs;
	info->page_size = pwb__page_size(bdi);
	info->nr_wb_ctx = PWB__RCU_DEREF(bdi->ctxs)->nr;
	info->rotational = bdi->rotational;
	info->nr_flushers = pwb__aread(&bdi->nr_flushers);
	info->is_blockdev = bdi->is_blockdev;
	/* A policy replaced meanwhile is freed after a grace period. */
	snprintf(info->policy, sizeof(info->policy), "%s",
		 PWB__RCU_DEREF(bdi->policy)->ops->name);
	snprintf(info->backend, sizeof(info->backend), "%s", bdi->io->name);
	info->atomic_write_unit_min = bdi->awu_min;
	info->atomic_write_unit_max = bdi->awu_max;
	info->atomic_write_segments_max = bdi->awu_segs;
	info->atomic_writes = bdi->atomic;
	snprintf(info->backend_reason, sizeof(info->backend_reason), "%s",
		 bdi->backend_reason);
	snprintf(info->nr_wb_ctx_reason, sizeof(info->nr_wb_ctx_reason), "%s",
		 bdi->nr_wb_ctx_reason);
	info->auto_wb_ctx = (bdi->cfg.flags & PWB_BDI_AUTO_WB_CTX) != 0;
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}

PWB_API int pwb_bdi_log_durable(struct pwb_bdi *bdi, uint64_t lsn)
{
	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_log_durable: NULL bdi");
	/* Lock-free like the queries: the section keeps @bdi alive. */
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_log_durable"))
		return -ESHUTDOWN;
	pwb__bdi_log_durable_raise(bdi, lsn);
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}

/*
 * Close every inode still open: the ones the application left open, and
 * wait for those an application thread is closing right now (their
 * pwb_inode_close() unregisters them last, then signals idle_cond). A
 * failed allocation only means more rounds.
 */
static void close_inodes(struct pwb_bdi *bdi)
{
	for (;;) {
		struct pwb_inode **inodes;
		size_t i, nr, busy = 0;
		uint64_t left;

		/*
		 * Claim them in the section that found them: an inode that
		 * another thread closes is freed after a grace period, so it
		 * must not be touched after the section (its close is that
		 * thread's, and we wait for it below).
		 */
		rcu_read_lock();
		inodes = pwb__bdi_collect_inodes(bdi, &nr);
		for (i = 0; i < nr; i++) {
			if (!pwb__inode_claim_close_rcu(inodes[i])) {
				inodes[i] = NULL;
				busy++;	/* another thread closes it */
			}
		}
		pwb__rcu_read_unlock();
		for (i = 0; i < nr; i++)
			if (inodes[i])
				pwb__inode_close(inodes[i]);
		free(inodes);
		pthread_mutex_lock(&bdi->lock);
		left = bdi->nr_open_inodes;
		/* Only others' closes may be left: wait for one to finish.
		 * The time limit only guards against a snapshot that missed
		 * inodes for want of memory. */
		if (left && left <= busy) {
			uint64_t t0 = pwb__now(bdi);
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += 50 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&bdi->idle_cond, &bdi->lock, &ts);
			pwb__blocked_since(bdi, NULL, NULL, PWB_BLOCK_BUSY, t0);
		}
		pthread_mutex_unlock(&bdi->lock);
		if (!left)
			return;
	}
}

PWB_API int pwb_bdi_close(struct pwb_bdi *bdi)
{
	int err, ferr, werr;
	unsigned int i;

	pwb__err_clear();
	if (!bdi)
		return 0;
	err = pwb__no_flusher("pwb_bdi_close");
	if (err)
		return err;
	/* Calls that wait and began before us finish first (a sync in
	 * progress returns its own result); later ones get -ESHUTDOWN. */
	if (pwb__bdi_enter(bdi, PWB__HOLD_CLOSE, "pwb_bdi_close"))
		return -EBADF;
	pthread_mutex_lock(&bdi->lock);
	while (bdi->users) {
		uint64_t t0 = pwb__now(bdi);

		pthread_cond_wait(&bdi->idle_cond, &bdi->lock);
		pwb__blocked_since(bdi, NULL, NULL, PWB_BLOCK_BUSY, t0);
	}
	pthread_mutex_unlock(&bdi->lock);
	/* No automatic re-shard from here on. */
	pwb__autotune_stop(bdi);

	werr = pwb__sync_and_wait(bdi, NULL);
	ferr = pwb__bdi_flush_device(bdi, pwb__bdi_written_epoch(bdi));
	close_inodes(bdi);

	/*
	 * Lock-free calls (stats, info, first dirtyings) that began before
	 * this store finish within the grace period below; those after it
	 * see dead and fail. Only then is anything they read freed.
	 */
	pwb__aset(&bdi->dead, true);
	/* Off its domain's members: walks of the domain that still see
	 * the bdi end within the grace period. */
	pwb__domain_leave(bdi);
	/* Its tenants outlive it, detached (tenant.c). */
	pwb__tenant_scope_release(&bdi->tn);
	pwb__synchronize_rcu();

	/* No re-shard runs (it holds a reference); the lock orders
	 * us after the last one's own clean-up. */
	pthread_mutex_lock(&bdi->reshard_lock);
	stop_flushers(bdi);
	free_flushers(bdi);
	/* Work queued without waiting (pwb_bdi_writeback) that no flusher
	 * ran: completed and freed. */
	for (i = 0; i < bdi->ctxs->nr; i++)
		pwb__wb_ctx_retire(bdi->ctxs->ctx[i]);
	free_ctxs(bdi->ctxs, bdi->ctxs->nr);
	bdi->ctxs = NULL;
	pthread_mutex_unlock(&bdi->reshard_lock);
	/* No flusher left to consult the rule; replaced rules are freed by
	 * the rcu_barrier() below. */
	pwb__fault_destroy(bdi);
	pwb__policy_destroy(bdi->policy);
	free(bdi->policy);
	cds_lfht_destroy(bdi->inodes, NULL);
	/* Run the inodes' delayed frees before the caller can exit. */
	rcu_barrier();
	pwb__pcache_bdi_fini(bdi);
	pwb__space_bdi_fini(bdi);
	pwb__domain_member_free(bdi);

	err = pwb__errseq_check_and_advance(&bdi->wb_err, &bdi->sync_cursor);
	if (!err)
		err = ferr;
	if (!err && werr == -ENOMEM)
		err = werr;
	close(bdi->fd);
	free(bdi->path);
	destroy_locks(bdi);
	free(bdi);
	if (err)
		pwb__err(err, "pwb_bdi_close: %s", pwb__strerror(err));
	return err;
}
