// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_api.c - the public contract: bad inputs, callbacks, version
 *
 * Public API only: links the shared libpwb like any program.
 *
 * The core is a table: each row makes one public call with one bad
 * argument and names the errno pwb.h documents for it. Each row runs as its
 * own test (a loop test) on a fresh bdi with two open inodes, and also
 * checks that a failing call left a message in pwb_errmsg() and that a
 * succeeding one left none.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB (1024ull * 1024)
#define IMAGE_SIZE (16 * MiB)
#define NR_CTX 2

static char *image;
static struct tu_clock clk;
static struct pwb_bdi *bdi;
static unsigned int lbs;	      /* logical block size of the image */
static struct tu_store st1;	      /* ino 1, tu_ops: no write_inode */
static struct tu_store st2;	      /* ino 2, meta_ops: has write_inode */
static struct pwb_bdi *extra_bdi;     /* a bad open that succeeded */
static struct pwb_inode *extra_inode; /* a bad inode open that succeeded */

static int meta_write_inode(struct pwb_inode *inode, int sync)
{
	return 0;
}

static struct pwb_inode_ops meta_ops;

static void cfg_quiet(struct pwb_bdi_config *cfg)
{
	pwb_bdi_config_init(cfg);
	cfg->clock = tu_clock_read;
	cfg->clock_arg = &clk;
	cfg->dirty_writeback_ms = 0;
	cfg->nr_wb_ctx = NR_CTX;
	/* One write in flight, as these tests were written for. */
	cfg->backend = "psync";
}

static void api_setup(void)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi_info info;

	tu_clock_set(&clk, 1000000000ull);
	image = tu_image_create(IMAGE_SIZE);
	cfg_quiet(&cfg);
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	lbs = info.logical_block_size;

	meta_ops = tu_ops;
	meta_ops.write_inode = meta_write_inode;
	tu_store_init(&st1, 1, 4096, 8, 0);
	tu_store_init(&st2, 2, 4096, 8, 8 * 4096);
	ck_assert_int_eq(tu_store_open(&st1, bdi), 0);
	ck_assert_int_eq(pwb_inode_open(bdi, 2, &meta_ops, &st2, &st2.inode),
			 0);
	extra_bdi = NULL;
	extra_inode = NULL;
}

static void api_teardown(void)
{
	if (extra_bdi)
		pwb_bdi_close(extra_bdi);
	if (extra_inode)
		pwb_inode_close(extra_inode);
	ck_assert_int_eq(pwb_inode_close(st1.inode), 0);
	ck_assert_int_eq(pwb_inode_close(st2.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	bdi = NULL;
	tu_store_destroy(&st1);
	tu_store_destroy(&st2);
	tu_image_remove(image);
	image = NULL;
}

/* ------------------------------------------------------------------ */
/* The table                                                           */

struct api_row {
	const char *name;
	int (*call)(void); /* makes exactly one libpwb call */
	int expect;
	void (*post)(const struct api_row *row); /* optional checks */
};

/* pwb_bdi_open of the image with a quiet config changed by @stmt. */
#define OPEN_ROW(fn, stmt)                                                     \
	static int fn(void)                                                    \
	{                                                                      \
		struct pwb_bdi_config cfg;                                     \
		cfg_quiet(&cfg);                                               \
		stmt;                                                          \
		return pwb_bdi_open(image, &cfg, &extra_bdi);                  \
	}

static int open_null_path(void)
{
	struct pwb_bdi_config cfg;

	cfg_quiet(&cfg);
	return pwb_bdi_open(NULL, &cfg, &extra_bdi);
}

static int open_null_bdip(void)
{
	struct pwb_bdi_config cfg;

	cfg_quiet(&cfg);
	return pwb_bdi_open(image, &cfg, NULL);
}

OPEN_ROW(open_page_size_0, cfg.page_size = 0)
OPEN_ROW(open_page_size_3000, cfg.page_size = 3000)
OPEN_ROW(open_page_size_below_lbs, cfg.page_size = lbs / 2)
OPEN_ROW(open_page_size_2mib, cfg.page_size = 2 * MiB;
	 cfg.max_io_bytes = 4 * MiB)
OPEN_ROW(open_page_size_above_max_io, cfg.page_size = 8192;
	 cfg.max_io_bytes = 4096)
OPEN_ROW(open_max_io_0, cfg.max_io_bytes = 0)
OPEN_ROW(open_max_io_not_page_multiple, cfg.max_io_bytes = 1 * MiB + 512)
OPEN_ROW(open_max_io_above_64mib, cfg.max_io_bytes = 64 * MiB + 4096)
OPEN_ROW(open_max_io_128mib, cfg.max_io_bytes = 128 * MiB)
OPEN_ROW(open_nr_wb_ctx_max_plus_1, cfg.nr_wb_ctx = PWB_MAX_WB_CTX + 1)
OPEN_ROW(open_nr_wb_ctx_1000000, cfg.nr_wb_ctx = 1000000)
OPEN_ROW(open_nr_wb_ctx_uint_max, cfg.nr_wb_ctx = ~0u)
OPEN_ROW(open_dirty_below_background, cfg.dirty_bytes = 1 * MiB;
	 cfg.dirty_background_bytes = 2 * MiB)
/* The lowest and the highest bit that PWB_BDI_FLAGS_ALL does not name. */
#define UNKNOWN_FLAG_LOW ((PWB_BDI_FLAGS_ALL + 1u) & ~PWB_BDI_FLAGS_ALL)
#define UNKNOWN_FLAG_HIGH (0x80000000u & ~PWB_BDI_FLAGS_ALL)
OPEN_ROW(open_unknown_flag_low, cfg.flags = UNKNOWN_FLAG_LOW)
OPEN_ROW(open_unknown_flag_high,
	 cfg.flags = PWB_BDI_FLAGS_ALL | UNKNOWN_FLAG_HIGH)
OPEN_ROW(open_io_depth_0, cfg.io_depth = 0)
OPEN_ROW(open_io_depth_4097, cfg.io_depth = 4097)
OPEN_ROW(open_nr_flushers_max_plus_1, cfg.nr_flushers = PWB_MAX_WB_CTX + 1)
OPEN_ROW(open_unknown_policy, cfg.policy = "no-such-policy")
OPEN_ROW(open_unknown_policy_with_args, cfg.policy = "no-such-policy:a=1")
OPEN_ROW(open_unknown_backend, cfg.backend = "no-such-backend")

static struct pwb_inode_ops ops_no_map;

static int iopen_null_bdi(void)
{
	return pwb_inode_open(NULL, 10, &tu_ops, &st1, &extra_inode);
}

static int iopen_null_ops(void)
{
	return pwb_inode_open(bdi, 10, NULL, &st1, &extra_inode);
}

static int iopen_no_map_page(void)
{
	ops_no_map = tu_ops;
	ops_no_map.map_page = NULL;
	return pwb_inode_open(bdi, 10, &ops_no_map, &st1, &extra_inode);
}

static int iopen_null_inodep(void)
{
	return pwb_inode_open(bdi, 10, &tu_ops, &st1, NULL);
}

static int iopen_duplicate(void)
{
	return pwb_inode_open(bdi, 1, &tu_ops, &st1, &extra_inode);
}

static int dirty_null(void)
{
	return pwb_mark_dirty(NULL, 0, 4096);
}

static int dirty_wraps_by_1(void)
{
	return pwb_mark_dirty(st1.inode, UINT64_MAX, 2);
}

static int dirty_wraps_by_page(void)
{
	return pwb_mark_dirty(st1.inode, UINT64_MAX - 4095, 8192);
}

static int dirty_huge_len(void)
{
	return pwb_mark_dirty(st1.inode, 4096, UINT64_MAX);
}

static int dirty_more_than_device(void)
{
	/* One page more than the device holds, far from page 0. */
	return pwb_mark_dirty(st1.inode, 1ull << 50, IMAGE_SIZE + 4096);
}

static int dirty_len_0(void)
{
	return pwb_mark_dirty(st1.inode, 4096, 0);
}

static int dirty_len_0_at_end(void)
{
	return pwb_mark_dirty(st1.inode, UINT64_MAX, 0);
}

static int idirty_null(void)
{
	return pwb_mark_inode_dirty(NULL, PWB_I_DIRTY_META);
}

static int idirty_bad_flag(void)
{
	return pwb_mark_inode_dirty(st2.inode, 0x4);
}

static int idirty_good_and_bad_flag(void)
{
	return pwb_mark_inode_dirty(st2.inode, PWB_I_DIRTY_META | 0x80000000u);
}

static int idirty_meta_no_write_inode(void)
{
	return pwb_mark_inode_dirty(st1.inode, PWB_I_DIRTY_META);
}

static int idirty_time_no_write_inode(void)
{
	return pwb_mark_inode_dirty(st1.inode, PWB_I_DIRTY_TIME);
}

static int fsync_null(void)
{
	return pwb_fsync(NULL);
}

static int sync_null(void)
{
	return pwb_sync(NULL);
}

static struct pwb_stats stats_buf;

static int stats_null_bdi(void)
{
	return pwb_bdi_stats(NULL, &stats_buf);
}

static int stats_null_st(void)
{
	return pwb_bdi_stats(bdi, NULL);
}

static int ctx_stats_null_bdi(void)
{
	return pwb_wb_ctx_stats(NULL, 0, &stats_buf);
}

static int ctx_stats_null_st(void)
{
	return pwb_wb_ctx_stats(bdi, 0, NULL);
}

static int ctx_stats_idx_nr(void)
{
	return pwb_wb_ctx_stats(bdi, NR_CTX, &stats_buf);
}

static int ctx_stats_idx_huge(void)
{
	return pwb_wb_ctx_stats(bdi, ~0u, &stats_buf);
}

static int wb_null_bdi(void)
{
	return pwb_bdi_writeback(NULL, PWB_WB_ALL, 0);
}

static int wb_reason_0(void)
{
	return pwb_bdi_writeback(bdi, (enum pwb_wb_reason)0, 0);
}

static int wb_reason_4(void)
{
	return pwb_bdi_writeback(bdi, (enum pwb_wb_reason)4, 0);
}

static int wb_reason_negative(void)
{
	return pwb_bdi_writeback(bdi, (enum pwb_wb_reason)(-1), 0);
}

static int wb_flag_2(void)
{
	return pwb_bdi_writeback(bdi, PWB_WB_ALL, 0x2);
}

static int wb_flag_high(void)
{
	return pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT | 0x80000000u);
}

static int wb_valid_wait(void)
{
	return pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT);
}

static int wbctx_null(void)
{
	return pwb_inode_wb_ctx(NULL);
}

static int wbctx_never_dirtied(void)
{
	return pwb_inode_wb_ctx(st1.inode);
}

static struct pwb_bdi_info info_buf;

static int info_null_bdi(void)
{
	return pwb_bdi_info(NULL, &info_buf);
}

static int info_null_info(void)
{
	return pwb_bdi_info(bdi, NULL);
}

static uint64_t nr_buf;

static int dpages_null_inode(void)
{
	return pwb_inode_dirty_pages(NULL, &nr_buf);
}

static int dpages_null_nr(void)
{
	return pwb_inode_dirty_pages(st1.inode, NULL);
}

static int setnr_null(void)
{
	return pwb_bdi_set_nr_wb_ctx(NULL, 2);
}

static int setnr_too_many(void)
{
	return pwb_bdi_set_nr_wb_ctx(bdi, PWB_MAX_WB_CTX + 1);
}

static int balance_null(void)
{
	return pwb_balance_dirty(NULL);
}

static int balance_nowait_null(void)
{
	return pwb_balance_dirty_nowait(NULL);
}

static struct pwb_fault fault_buf;

static int inject_null_bdi(void)
{
	memset(&fault_buf, 0, sizeof(fault_buf));
	fault_buf.kind = PWB_FAULT_EIO;
	fault_buf.every = 1;
	return pwb_bdi_inject_fault(NULL, &fault_buf);
}

static int inject_unknown_kind(void)
{
	memset(&fault_buf, 0, sizeof(fault_buf));
	fault_buf.kind = (enum pwb_fault_kind)99;
	fault_buf.every = 1;
	return pwb_bdi_inject_fault(bdi, &fault_buf);
}

static int inject_never_hits(void)
{
	memset(&fault_buf, 0, sizeof(fault_buf));
	fault_buf.kind = PWB_FAULT_EIO; /* no nth, every or ppm */
	return pwb_bdi_inject_fault(bdi, &fault_buf);
}

static int inject_null_stops(void)
{
	return pwb_bdi_inject_fault(bdi, NULL);
}

static int parse_null_spec(void)
{
	return pwb_fault_parse(NULL, &fault_buf);
}

static int parse_null_fault(void)
{
	return pwb_fault_parse("eio:every=10", NULL);
}

static int parse_unknown_kind(void)
{
	return pwb_fault_parse("melt:every=10", &fault_buf);
}

static int parse_unknown_key(void)
{
	return pwb_fault_parse("eio:sometimes=10", &fault_buf);
}

static int parse_no_value(void)
{
	return pwb_fault_parse("eio:every=", &fault_buf);
}

static int parse_not_a_number(void)
{
	return pwb_fault_parse("eio:every=ten", &fault_buf);
}

static int parse_valid(void)
{
	memset(&fault_buf, 0, sizeof(fault_buf));
	return pwb_fault_parse("enospc:every=10,max_hits=3", &fault_buf);
}

static int hits_null_bdi(void)
{
	return pwb_fault_hits(NULL, &nr_buf);
}

static int hits_null_hits(void)
{
	return pwb_fault_hits(bdi, NULL);
}

/* post: the context count did not change. */
static void post_nr_unchanged(const struct api_row *row)
{
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), NR_CTX);
}

static void post_parsed(const struct api_row *row)
{
	ck_assert_int_eq(fault_buf.kind, PWB_FAULT_ENOSPC);
	ck_assert_uint_eq(fault_buf.every, 10);
	ck_assert_uint_eq(fault_buf.max_hits, 3);
}

/* post: @st's inode is still clean and never affined. */
static void assert_store_untouched(struct tu_store *st, const char *row)
{
	struct pwb_stats s;
	uint64_t nr = 99;

	ck_assert_int_eq(pwb_inode_dirty_pages(st->inode, &nr), 0);
	ck_assert_msg(nr == 0, "%s: %llu pages dirty", row,
		      (unsigned long long)nr);
	ck_assert_msg(pwb_inode_wb_ctx(st->inode) == -ENODATA,
		      "%s: inode got affined (%d)", row,
		      pwb_inode_wb_ctx(st->inode));
	ck_assert_int_eq(pwb_bdi_stats(bdi, &s), 0);
	ck_assert_msg(s.dirty_pages == 0 && s.nr_dirty_inodes == 0 &&
			      s.nr_dirty_time_inodes == 0,
		      "%s: bdi has %llu dirty pages, %llu dirty inodes", row,
		      (unsigned long long)s.dirty_pages,
		      (unsigned long long)s.nr_dirty_inodes);
}

static void post_st1_untouched(const struct api_row *row)
{
	assert_store_untouched(&st1, row->name);
}

static void post_st2_untouched(const struct api_row *row)
{
	assert_store_untouched(&st2, row->name);
}

/* post: the inode a duplicate open collided with still works. */
static void post_original_still_works(const struct api_row *row)
{
	ck_assert_uint_eq(pwb_inode_ino(st1.inode), 1);
	ck_assert_ptr_eq(pwb_inode_priv(st1.inode), &st1);
	tu_fill_page(&st1, 0, 1);
	ck_assert_int_eq(pwb_mark_dirty(st1.inode, 0, 4096), 0);
	ck_assert_int_eq(pwb_fsync(st1.inode), 0);
	ck_assert_int_eq(tu_verify_device(image, &st1, 1), 0);
}

static const struct api_row rows[] = {
	/* pwb_bdi_open */
	{"bdi_open: NULL path", open_null_path, -EINVAL, NULL},
	{"bdi_open: NULL bdip", open_null_bdip, -EINVAL, NULL},
	{"bdi_open: page_size 0", open_page_size_0, -EINVAL, NULL},
	{"bdi_open: page_size 3000", open_page_size_3000, -EINVAL, NULL},
	{"bdi_open: page_size below logical block size",
	 open_page_size_below_lbs, -EINVAL, NULL},
	{"bdi_open: page_size 2 MiB", open_page_size_2mib, -EINVAL, NULL},
	{"bdi_open: page_size above max_io_bytes", open_page_size_above_max_io,
	 -EINVAL, NULL},
	{"bdi_open: max_io_bytes 0", open_max_io_0, -EINVAL, NULL},
	{"bdi_open: max_io_bytes not a page multiple",
	 open_max_io_not_page_multiple, -EINVAL, NULL},
	{"bdi_open: max_io_bytes 64 MiB + 4096", open_max_io_above_64mib,
	 -EINVAL, NULL},
	{"bdi_open: max_io_bytes 128 MiB", open_max_io_128mib, -EINVAL, NULL},
	{"bdi_open: nr_wb_ctx PWB_MAX_WB_CTX + 1", open_nr_wb_ctx_max_plus_1,
	 -EINVAL, NULL},
	{"bdi_open: nr_wb_ctx 1000000", open_nr_wb_ctx_1000000, -EINVAL, NULL},
	{"bdi_open: nr_wb_ctx UINT_MAX", open_nr_wb_ctx_uint_max, -EINVAL,
	 NULL},
	{"bdi_open: dirty_bytes < dirty_background_bytes",
	 open_dirty_below_background, -EINVAL, NULL},
	{"bdi_open: lowest unknown flag", open_unknown_flag_low, -EINVAL, NULL},
	{"bdi_open: known flags + 0x80000000", open_unknown_flag_high, -EINVAL,
	 NULL},
	{"bdi_open: io_depth 0", open_io_depth_0, -EINVAL, NULL},
	{"bdi_open: io_depth 4097", open_io_depth_4097, -EINVAL, NULL},
	{"bdi_open: nr_flushers PWB_MAX_WB_CTX + 1",
	 open_nr_flushers_max_plus_1, -EINVAL, NULL},
	{"bdi_open: unknown policy", open_unknown_policy, -ENOENT, NULL},
	{"bdi_open: unknown policy with arguments",
	 open_unknown_policy_with_args, -ENOENT, NULL},
	{"bdi_open: unknown backend", open_unknown_backend, -ENOENT, NULL},
	/* pwb_inode_open */
	{"inode_open: NULL bdi", iopen_null_bdi, -EINVAL, NULL},
	{"inode_open: NULL ops", iopen_null_ops, -EINVAL, NULL},
	{"inode_open: ops without map_page", iopen_no_map_page, -EINVAL, NULL},
	{"inode_open: NULL inodep", iopen_null_inodep, -EINVAL, NULL},
	{"inode_open: duplicate ino", iopen_duplicate, -EEXIST,
	 post_original_still_works},
	/* pwb_mark_dirty */
	{"mark_dirty: NULL inode", dirty_null, -EINVAL, NULL},
	{"mark_dirty: off + len = 2^64 + 1", dirty_wraps_by_1, -EOVERFLOW,
	 post_st1_untouched},
	{"mark_dirty: off + len = 2^64 + 4096", dirty_wraps_by_page, -EOVERFLOW,
	 post_st1_untouched},
	{"mark_dirty: len UINT64_MAX", dirty_huge_len, -EOVERFLOW,
	 post_st1_untouched},
	{"mark_dirty: more pages than the device", dirty_more_than_device,
	 -EFBIG, post_st1_untouched},
	{"mark_dirty: len 0 does nothing", dirty_len_0, 0, post_st1_untouched},
	{"mark_dirty: len 0 at UINT64_MAX does nothing", dirty_len_0_at_end, 0,
	 post_st1_untouched},
	/* pwb_mark_inode_dirty */
	{"mark_inode_dirty: NULL inode", idirty_null, -EINVAL, NULL},
	{"mark_inode_dirty: unknown flag", idirty_bad_flag, -EINVAL,
	 post_st2_untouched},
	{"mark_inode_dirty: known and unknown flag", idirty_good_and_bad_flag,
	 -EINVAL, post_st2_untouched},
	{"mark_inode_dirty: META without write_inode",
	 idirty_meta_no_write_inode, -EINVAL, post_st1_untouched},
	{"mark_inode_dirty: TIME without write_inode",
	 idirty_time_no_write_inode, -EINVAL, post_st1_untouched},
	/* sync */
	{"fsync: NULL", fsync_null, -EINVAL, NULL},
	{"sync: NULL", sync_null, -EINVAL, NULL},
	/* statistics and info */
	{"bdi_stats: NULL bdi", stats_null_bdi, -EINVAL, NULL},
	{"bdi_stats: NULL stats", stats_null_st, -EINVAL, NULL},
	{"wb_ctx_stats: NULL bdi", ctx_stats_null_bdi, -EINVAL, NULL},
	{"wb_ctx_stats: NULL stats", ctx_stats_null_st, -EINVAL, NULL},
	{"wb_ctx_stats: idx == nr", ctx_stats_idx_nr, -ERANGE, NULL},
	{"wb_ctx_stats: idx UINT_MAX", ctx_stats_idx_huge, -ERANGE, NULL},
	{"bdi_info: NULL bdi", info_null_bdi, -EINVAL, NULL},
	{"bdi_info: NULL info", info_null_info, -EINVAL, NULL},
	{"inode_dirty_pages: NULL inode", dpages_null_inode, -EINVAL, NULL},
	{"inode_dirty_pages: NULL nr", dpages_null_nr, -EINVAL, NULL},
	/* pwb_bdi_writeback */
	{"bdi_writeback: NULL bdi", wb_null_bdi, -EINVAL, NULL},
	{"bdi_writeback: reason 0", wb_reason_0, -EINVAL, NULL},
	{"bdi_writeback: reason 4", wb_reason_4, -EINVAL, NULL},
	{"bdi_writeback: reason -1", wb_reason_negative, -EINVAL, NULL},
	{"bdi_writeback: flag 0x2", wb_flag_2, -EINVAL, NULL},
	{"bdi_writeback: WAIT | 0x80000000", wb_flag_high, -EINVAL, NULL},
	{"bdi_writeback: ALL + WAIT is fine", wb_valid_wait, 0, NULL},
	/* pwb_bdi_set_nr_wb_ctx */
	{"bdi_set_nr_wb_ctx: NULL bdi", setnr_null, -EINVAL, NULL},
	{"bdi_set_nr_wb_ctx: PWB_MAX_WB_CTX + 1", setnr_too_many, -EINVAL,
	 post_nr_unchanged},
	/* throttling */
	{"balance_dirty: NULL", balance_null, -EINVAL, NULL},
	{"balance_dirty_nowait: NULL", balance_nowait_null, -EINVAL, NULL},
	/* fault injection */
	{"bdi_inject_fault: NULL bdi", inject_null_bdi, -EINVAL, NULL},
	{"bdi_inject_fault: unknown kind", inject_unknown_kind, -EINVAL, NULL},
	{"bdi_inject_fault: rule that never hits", inject_never_hits, -EINVAL,
	 NULL},
	{"bdi_inject_fault: NULL rule stops injection", inject_null_stops, 0,
	 NULL},
	{"fault_parse: NULL spec", parse_null_spec, -EINVAL, NULL},
	{"fault_parse: NULL fault", parse_null_fault, -EINVAL, NULL},
	{"fault_parse: unknown kind", parse_unknown_kind, -EINVAL, NULL},
	{"fault_parse: unknown key", parse_unknown_key, -EINVAL, NULL},
	{"fault_parse: key without value", parse_no_value, -EINVAL, NULL},
	{"fault_parse: value not a number", parse_not_a_number, -EINVAL, NULL},
	{"fault_parse: valid spec", parse_valid, 0, post_parsed},
	{"fault_hits: NULL bdi", hits_null_bdi, -EINVAL, NULL},
	{"fault_hits: NULL hits", hits_null_hits, -EINVAL, NULL},
	/* pwb_inode_wb_ctx */
	{"inode_wb_ctx: NULL", wbctx_null, -EINVAL, NULL},
	{"inode_wb_ctx: never dirtied", wbctx_never_dirtied, -ENODATA, NULL},
};

#define NR_ROWS ((int)(sizeof(rows) / sizeof(rows[0])))

START_TEST(bad_input_gives_documented_errno)
{
	const struct api_row *r = &rows[_i];
	char msg[512];
	int rc;

	rc = r->call();
	snprintf(msg, sizeof(msg), "%s", pwb_errmsg());
	ck_assert_msg(rc == r->expect, "%s: got %d (%s), want %d (%s)", r->name,
		      rc, pwb_strerror(rc), r->expect, pwb_strerror(r->expect));
	if (r->expect) {
		ck_assert_msg(msg[0] != '\0', "%s: pwb_errmsg() is empty",
			      r->name);
		ck_assert_msg(strchr(msg, '\n') == NULL,
			      "%s: pwb_errmsg() is not one line: \"%s\"",
			      r->name, msg);
	} else {
		ck_assert_msg(msg[0] == '\0',
			      "%s: succeeded but pwb_errmsg() = \"%s\"",
			      r->name, msg);
	}
	if (r->post)
		r->post(r);
}
END_TEST

/* ------------------------------------------------------------------ */

START_TEST(null_handles_are_harmless)
{
	ck_assert_ptr_null(pwb_inode_priv(NULL));
	ck_assert_uint_eq(pwb_inode_ino(NULL), 0);
	ck_assert_int_eq(pwb_inode_close(NULL), 0);
	ck_assert_int_eq(pwb_bdi_close(NULL), 0);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(NULL), 0);
	pwb_bdi_config_init(NULL);
}
END_TEST

START_TEST(version_matches_header)
{
	ck_assert_uint_eq(pwb_version(), PWB_VERSION_NUMBER);
}
END_TEST

/* Values at the edge of every documented limit are accepted. */
OPEN_ROW(ok_page_size_is_lbs, cfg.page_size = lbs)
OPEN_ROW(ok_page_size_1mib, cfg.page_size = 1 * MiB; cfg.max_io_bytes = 1 * MiB)
OPEN_ROW(ok_max_io_64mib, cfg.max_io_bytes = 64 * MiB)
OPEN_ROW(ok_max_io_one_page, cfg.max_io_bytes = 4096)
OPEN_ROW(ok_nr_wb_ctx_max, cfg.nr_wb_ctx = PWB_MAX_WB_CTX)
OPEN_ROW(ok_dirty_equals_background, cfg.dirty_bytes = 8 * MiB;
	 cfg.dirty_background_bytes = 8 * MiB)
OPEN_ROW(ok_dirty_0_is_no_limit, cfg.dirty_bytes = 0;
	 cfg.dirty_background_bytes = 64 * MiB)
OPEN_ROW(ok_background_0, cfg.dirty_background_bytes = 0)
OPEN_ROW(ok_policy_by_name, cfg.policy = "inode-hash")
OPEN_ROW(ok_backend_by_name, cfg.backend = "psync")
OPEN_ROW(ok_io_depth_1, cfg.io_depth = 1)
OPEN_ROW(ok_io_depth_4096, cfg.io_depth = 4096)
/* PWB_BDI_ATOMIC_WRITES depends on the device: check_bdi tests it. */
/* Every flag but those that need what a plain image lacks: atomic writes
 * from the device, a domain for the strict share. */
OPEN_ROW(ok_all_known_flags,
	 cfg.flags = PWB_BDI_FLAGS_ALL &
		     ~(PWB_BDI_ATOMIC_WRITES | PWB_BDI_STRICT_SHARE))
OPEN_ROW(ok_null_cfg_fields, cfg.policy = NULL; cfg.backend = NULL;
	 cfg.clock = NULL)

static const struct {
	const char *name;
	int (*call)(void);
} ok_rows[] = {
	{"page_size == logical block size", ok_page_size_is_lbs},
	{"page_size 1 MiB", ok_page_size_1mib},
	{"max_io_bytes 64 MiB", ok_max_io_64mib},
	{"max_io_bytes one page", ok_max_io_one_page},
	{"nr_wb_ctx PWB_MAX_WB_CTX", ok_nr_wb_ctx_max},
	{"dirty_bytes == dirty_background_bytes", ok_dirty_equals_background},
	{"dirty_bytes 0 (no limit)", ok_dirty_0_is_no_limit},
	{"dirty_background_bytes 0", ok_background_0},
	{"policy \"inode-hash\"", ok_policy_by_name},
	{"backend \"psync\"", ok_backend_by_name},
	{"io_depth 1", ok_io_depth_1},
	{"io_depth 4096", ok_io_depth_4096},
	{"flags PWB_BDI_FLAGS_ALL but ATOMIC_WRITES, STRICT_SHARE",
	 ok_all_known_flags},
	{"NULL policy, backend and clock", ok_null_cfg_fields},
};

START_TEST(limits_themselves_are_accepted)
{
	int rc = ok_rows[_i].call();

	ck_assert_msg(rc == 0, "%s: got %d (%s): %s", ok_rows[_i].name, rc,
		      pwb_strerror(rc), pwb_errmsg());
	ck_assert_str_eq(pwb_errmsg(), "");
	ck_assert_int_eq(pwb_bdi_close(extra_bdi), 0);
	extra_bdi = NULL;
}
END_TEST

/* ------------------------------------------------------------------ */
/* Callbacks                                                           */

/*
 * An inode whose callbacks do things. The tu_store comes first so that
 * tu_ops.end_write, which casts the priv pointer, keeps working.
 */
struct probe {
	struct tu_store st;
	int calls; /* get_page calls */
	/* What waiting calls returned inside get_page (first call). */
	int fsync_self_rc, fsync_other_rc, sync_rc, wb_wait_rc;
	int inode_close_rc, bdi_close_rc, set_nr_rc, balance_rc;
	char msg[256]; /* flusher thread's pwb_errmsg() after them */
	/* What get_page does on its first call besides its job. */
	enum { CB_NOTHING, CB_WAIT, CB_REDIRTY } on_first;
	int redirty_rc; /* of CB_REDIRTY's pwb_mark_dirty */
	/* map_page answers: 0 normal, else see map_modes[] */
	int map_mode;
	uint64_t capacity;
};

static int probe_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	struct probe *p = pwb_inode_priv(inode);
	int first = __atomic_add_fetch(&p->calls, 1, __ATOMIC_SEQ_CST) == 1;

	if (first && p->on_first == CB_WAIT) {
		p->fsync_self_rc = pwb_fsync(inode);
		p->fsync_other_rc = pwb_fsync(st1.inode);
		p->sync_rc = pwb_sync(bdi);
		p->wb_wait_rc = pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT);
		p->inode_close_rc = pwb_inode_close(inode);
		p->bdi_close_rc = pwb_bdi_close(bdi);
		p->set_nr_rc = pwb_bdi_set_nr_wb_ctx(bdi, NR_CTX + 1);
		p->balance_rc = pwb_balance_dirty(bdi);
		snprintf(p->msg, sizeof(p->msg), "%s", pwb_errmsg());
	}
	if (first && p->on_first == CB_REDIRTY)
		p->redirty_rc = pwb_mark_dirty(inode, index * p->st.page_size,
					       p->st.page_size);
	if (index >= p->st.nr_pages)
		return -ERANGE;
	*data = p->st.mem + index * p->st.page_size;
	return 0;
}

enum { MAP_OK, MAP_PAST_END, MAP_STRADDLES_END, MAP_FAR_AWAY, MAP_UNALIGNED };

static int probe_map_page(struct pwb_inode *inode, uint64_t index,
			  uint64_t *dev_off)
{
	struct probe *p = pwb_inode_priv(inode);

	switch (__atomic_load_n(&p->map_mode, __ATOMIC_SEQ_CST)) {
	case MAP_PAST_END:
		*dev_off = p->capacity + index * p->st.page_size;
		break;
	case MAP_STRADDLES_END:
		*dev_off = p->capacity - lbs;
		break;
	case MAP_FAR_AWAY:
		*dev_off = UINT64_MAX - p->st.page_size + 1;
		break;
	case MAP_UNALIGNED:
		*dev_off = p->st.base_off + index * p->st.page_size + lbs / 2;
		break;
	default:
		*dev_off = p->st.base_off + index * p->st.page_size;
	}
	return 0;
}

static struct pwb_inode_ops probe_ops;
static struct probe probe;

static void probe_open(uint64_t ino)
{
	struct pwb_bdi_info info;

	memset(&probe, 0, sizeof(probe));
	tu_store_init(&probe.st, ino, 4096, 4, 1 * MiB);
	probe_ops = tu_ops;
	probe_ops.get_page = probe_get_page;
	probe_ops.map_page = probe_map_page;
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	probe.capacity = info.capacity;
	ck_assert_int_eq(
		pwb_inode_open(bdi, ino, &probe_ops, &probe, &probe.st.inode),
		0);
}

static void probe_close(void)
{
	ck_assert_int_eq(pwb_inode_close(probe.st.inode), 0);
	tu_store_destroy(&probe.st);
}

START_TEST(waiting_inside_a_callback_is_edeadlk)
{
	probe_open(100);
	probe.on_first = CB_WAIT;
	tu_fill_page(&probe.st, 0, 1);
	ck_assert_int_eq(pwb_mark_dirty(probe.st.inode, 0, 4096), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);

	ck_assert_msg(probe.calls >= 1, "get_page was never called");
	ck_assert_int_eq(probe.fsync_self_rc, -EDEADLK);
	ck_assert_int_eq(probe.fsync_other_rc, -EDEADLK);
	ck_assert_int_eq(probe.sync_rc, -EDEADLK);
	ck_assert_int_eq(probe.wb_wait_rc, -EDEADLK);
	ck_assert_int_eq(probe.inode_close_rc, -EDEADLK);
	ck_assert_int_eq(probe.bdi_close_rc, -EDEADLK);
	ck_assert_int_eq(probe.set_nr_rc, -EDEADLK);
	ck_assert_int_eq(probe.balance_rc, -EDEADLK);
	ck_assert_msg(probe.msg[0] != '\0',
		      "flusher's pwb_errmsg() empty after -EDEADLK");

	/* Nothing was closed: the page reached the device, all still works. */
	ck_assert_int_eq(tu_verify_device(image, &probe.st, 1), 0);
	ck_assert_uint_eq(pwb_inode_ino(probe.st.inode), 100);
	ck_assert_uint_eq(pwb_bdi_nr_wb_ctx(bdi), NR_CTX);
	ck_assert_int_eq(pwb_fsync(probe.st.inode), 0);
	probe_close();
}
END_TEST

START_TEST(mark_dirty_inside_get_page_writes_the_page_again)
{
	uint64_t nr = 99;

	probe_open(101);
	probe.on_first = CB_REDIRTY;
	tu_fill_page(&probe.st, 0, 1);
	ck_assert_int_eq(pwb_mark_dirty(probe.st.inode, 0, 4096), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(probe.redirty_rc, 0);
	/* The re-dirty may or may not be covered by that sync; the next
	 * one covers it, and nothing is written a third time. */
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(probe.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 0);
	ck_assert_uint_eq(probe.st.pages_written, 2);
	ck_assert_int_eq(probe.calls, 2);
	probe_close();
}
END_TEST

static const struct {
	const char *name;
	int mode;
	int expect;
} map_modes[] = {
	{"page past the end of the device", MAP_PAST_END, -ERANGE},
	{"offset near 2^64", MAP_FAR_AWAY, -ERANGE},
	/* From here on, rows the device's logical block size may rule out:
	 * each runs alone in a twin of this program (TU_ENV_CASE = its row
	 * - 1), which exits 77 where it cannot run. */
	{"page straddling the end of the device", MAP_STRADDLES_END, -ERANGE},
	{"offset not a multiple of the logical block size", MAP_UNALIGNED,
	 -EINVAL},
};
#define NR_PLAIN_MAP_MODES 2

START_TEST(bad_map_page_offset_fails_fsync)
{
	int expect = map_modes[_i].expect;
	const char *name = map_modes[_i].name;
	struct stat sb;
	uint64_t nr = 0;
	int rc;

	if ((map_modes[_i].mode == MAP_UNALIGNED && lbs < 2) ||
	    (map_modes[_i].mode == MAP_STRADDLES_END && lbs >= 4096)) {
		tu_skip("%s: logical block size %u", name, lbs);
		return;
	}
	probe_open(102);
	probe.map_mode = map_modes[_i].mode;
	tu_fill_page(&probe.st, 0, 1);
	ck_assert_int_eq(pwb_mark_dirty(probe.st.inode, 0, 4096), 0);

	rc = pwb_fsync(probe.st.inode);
	ck_assert_msg(rc == expect, "%s: pwb_fsync gave %d (%s), want %d", name,
		      rc, pwb_strerror(rc), expect);
	/* Nothing was written outside the device: the file did not grow. */
	ck_assert_int_eq(stat(image, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, IMAGE_SIZE);
	/* The page whose write failed stays dirty. */
	ck_assert_int_eq(pwb_inode_dirty_pages(probe.st.inode, &nr), 0);
	ck_assert_msg(nr == 1, "%s: %llu dirty pages after the failure", name,
		      (unsigned long long)nr);
	/* Trying again fails again: a new failure is reported again. */
	rc = pwb_fsync(probe.st.inode);
	ck_assert_msg(rc == expect, "%s: second pwb_fsync gave %d (%s)", name,
		      rc, pwb_strerror(rc));

	/* The application fixes its mapping: the page is written. */
	__atomic_store_n(&probe.map_mode, MAP_OK, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(pwb_fsync(probe.st.inode), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(probe.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 0);
	ck_assert_int_eq(tu_verify_device(image, &probe.st, 1), 0);
	/* pwb_sync reports the bdi's error once, then all is clean. */
	rc = pwb_sync(bdi);
	ck_assert_msg(rc == expect, "%s: first pwb_sync gave %d (%s)", name, rc,
		      pwb_strerror(rc));
	ck_assert_int_eq(pwb_sync(bdi), 0);
	probe_close();
}
END_TEST

static Suite *api_suite(void)
{
	Suite *s = suite_create("api");
	TCase *tc;

	tc = tcase_create("bad_input");
	tcase_add_checked_fixture(tc, api_setup, api_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, bad_input_gives_documented_errno, 0, NR_ROWS);
	tcase_add_loop_test(tc, limits_themselves_are_accepted, 0,
			    (int)(sizeof(ok_rows) / sizeof(ok_rows[0])));
	tcase_add_test(tc, null_handles_are_harmless);
	tcase_add_test(tc, version_matches_header);
	suite_add_tcase(s, tc);

	tc = tcase_create("callbacks");
	tcase_add_checked_fixture(tc, api_setup, api_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, waiting_inside_a_callback_is_edeadlk);
	tcase_add_test(tc, mark_dirty_inside_get_page_writes_the_page_again);
	tcase_add_loop_test(tc, bad_map_page_offset_fails_fsync, 0,
			    NR_PLAIN_MAP_MODES);
	suite_add_tcase(s, tc);
	return s;
}

/* The twins: one map_modes row that the block size may rule out. */
static Suite *api_env_suite(int row)
{
	Suite *s = suite_create("api-env");
	TCase *tc;

	tc = tcase_create("callbacks");
	tcase_add_checked_fixture(tc, api_setup, api_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, bad_map_page_offset_fails_fsync, row, row + 1);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(TU_ENV_CASE ? api_env_suite(TU_ENV_CASE + 1) :
					  api_suite(), false);
}
