/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_policy.c - shard policies: built-ins, spec parsing, the registry,
 * plugins good and bad, and data integrity under every policy, white-box
 *
 * Placement tests open the bdi "quiet" (no periodic or background
 * writeback, nothing expires), so per-context dirty counts stay put until
 * the test calls pwb_sync(). Plugins are the libtool modules built next to
 * this program in PWB_PLUGIN_DIR; this program is linked -export-dynamic
 * so that their pwb_ references resolve to the library linked in here.
 *
 * Every bad-plugin test ends by proving that a bdi still works: dirty
 * pages of several inodes, pwb_sync(), and read the device back.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pwb-internal.h"
#include "test-util.h"

#ifndef PWB_PLUGIN_DIR
#error "PWB_PLUGIN_DIR must name the directory of the test plugins"
#endif

#define PS 4096u
#define MIB (1ull << 20)
#define STRIPE_SO PWB_PLUGIN_DIR "/stripe.so"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                */

/* Open @img with @nr contexts and policy @spec; no writeback on its own. */
/* One write in flight (psync), as these tests were written for. */
static int open_quiet(const char *img, unsigned int nr, const char *spec,
		      struct pwb_bdi **bdip)
{
	return tu_open_quiet(img, nr, "psync", spec, 0, 0, bdip);
}

/* Dirty pages [first, first + n) of @st; return the inode's context. */
static int dirty_range(struct tu_store *st, uint64_t first, uint64_t n)
{
	uint64_t i;

	for (i = first; i < first + n; i++)
		tu_fill_page(st, i, tu_page_version(st, i) + 1);
	ck_assert_int_eq(pwb_mark_dirty(st->inode, first * st->page_size,
					n * st->page_size),
			 0);
	return pwb_inode_wb_ctx(st->inode);
}

/* pwb_sync, then every store's pages must be on the device. */
static void sync_and_verify(struct pwb_bdi *bdi, const char *img,
			    struct tu_store *st, unsigned int n)
{
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(tu_verify_device(img, st, n), 0);
}

static void close_stores(struct tu_store *st, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (st[i].inode)
			ck_assert_int_eq(pwb_inode_close(st[i].inode), 0);
		tu_store_destroy(&st[i]);
	}
}

#define WORKS_INODES 6
#define WORKS_PAGES 16

/*
 * A bdi with policy @spec (NULL: default) and @nr contexts works: several
 * inodes dirtied, synced, read back byte for byte, closed cleanly.
 */
static void bdi_works(const char *spec, unsigned int nr)
{
	struct tu_store st[WORKS_INODES];
	struct pwb_bdi *bdi;
	char *img = tu_image_create(WORKS_INODES * WORKS_PAGES * PS);
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, nr, spec, &bdi), 0);
	for (i = 0; i < WORKS_INODES; i++) {
		tu_store_init(&st[i], 700 + i, PS, WORKS_PAGES,
			      (uint64_t)i * WORKS_PAGES * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
		dirty_range(&st[i], 0, WORKS_PAGES);
		ck_assert_int_lt(pwb_inode_wb_ctx(st[i].inode), (int)nr);
	}
	sync_and_verify(bdi, img, st, WORKS_INODES);
	close_stores(st, WORKS_INODES);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}

static void load_stripe(void)
{
	int ret = pwb_policy_load(STRIPE_SO);

	ck_assert_msg(ret == 0, "loading %s: %d (%s)", STRIPE_SO, ret,
		      pwb_errmsg());
}

/* Run @fn with stderr sent to a file; return how many lines contain
 * @needle. */
static int count_stderr_lines(void (*fn)(void *), void *arg,
			      const char *needle)
{
	char path[] = "/tmp/pwb-policy-stderr-XXXXXX", line[512];
	int fd, saved, n = 0;
	FILE *f;

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(fd, 2), 0);
	fn(arg);
	fflush(stderr);
	ck_assert_int_ge(dup2(saved, 2), 0);
	close(saved);
	close(fd);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	unlink(path);
	return n;
}

/* ---------------------------------------------------------------------- */
/* Spec parsing                                                           */

START_TEST(test_spec_good)
{
	static const struct {
		const char *spec, *norm;
	} rows[] = {
		{ NULL, "inode-hash" },
		{ "", "inode-hash" },
		{ "inode-hash", "inode-hash" },
		{ "inode-hash:", "inode-hash" },
		{ "alloc-group", "alloc-group" },
		{ "alloc-group:groups=4", "alloc-group:groups=4" },
		{ "alloc-group:ag_size=4M", "alloc-group:ag_size=4M" },
		{ "alloc-group:ag_size=64k", "alloc-group:ag_size=64k" },
		{ "alloc-group:ag_size=1G", "alloc-group:ag_size=1G" },
		{ "least-loaded", "least-loaded" },
		{ "hint", "hint" },
	};
	char *img = tu_image_create(16 * MIB), buf[PWB_POLICY_SPEC_MAX + 1];
	struct pwb__policy pol;
	struct pwb_bdi *bdi;
	size_t i;

	ck_assert_int_eq(open_quiet(img, 4, NULL, &bdi), 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int ret = pwb__policy_create(bdi, rows[i].spec, &pol);

		ck_assert_msg(ret == 0, "spec \"%s\": %d %s",
			      rows[i].spec ? rows[i].spec : "(null)", ret,
			      pwb_errmsg());
		ck_assert_str_eq(pol.spec, rows[i].norm);
		pwb__policy_destroy(&pol);
		ck_assert_ptr_null(pol.ops);
	}
	ck_assert_int_eq(pwb_bdi_policy(bdi, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "inode-hash");
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	/* Through pwb_bdi_open, and the two ways to read it back. */
	ck_assert_int_eq(open_quiet(img, 4, "alloc-group:ag_size=4M", &bdi),
			 0);
	{
		struct pwb_bdi_info info;
		char small[8];

		ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
		ck_assert_str_eq(info.policy, "alloc-group");
		ck_assert_int_eq(pwb_bdi_policy(bdi, buf, sizeof(buf)), 0);
		ck_assert_str_eq(buf, "alloc-group:ag_size=4M");
		ck_assert_int_eq(pwb_bdi_policy(bdi, small, sizeof(small)),
				 -ERANGE);
		ck_assert_str_eq(small, "alloc-g");
		ck_assert_int_eq(pwb_bdi_policy(NULL, buf, sizeof(buf)),
				 -EINVAL);
		ck_assert_int_eq(pwb_bdi_policy(bdi, NULL, 1), -EINVAL);
		ck_assert_int_eq(pwb_bdi_policy(bdi, buf, 0), -EINVAL);
	}
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_spec_bad)
{
	static const char *const builtins[] = {
		"inode-hash", "alloc-group", "least-loaded", "hint",
		"xarray", "shared-list", "region",
	};
	char msg[256];
	static const struct {
		const char *spec;
		int err;
	} rows[] = {
		{ "nope", -ENOENT },
		{ "nope:a=1", -ENOENT },
		{ "inode-hash-ish", -ENOENT },
		{ ":a=1", -EINVAL },
		{ ":", -EINVAL },
		{ "inode-hash:x=1", -EINVAL },
		{ "inode-hash:a=b:c", -EINVAL },
		{ "hint:x=1", -EINVAL },
		{ "least-loaded:x=1", -EINVAL },
		{ "alloc-group:groups=0", -EINVAL },
		{ "alloc-group:groups=-1", -EINVAL },
		{ "alloc-group:groups=1M", -EINVAL },
		{ "alloc-group:groups=99999", -EINVAL },	/* > pages */
		{ "alloc-group:groups=4,ag_size=1M", -EINVAL },
		{ "alloc-group:groups=2,groups=4", -EINVAL },
		{ "alloc-group:ag_size=12Q", -EINVAL },
		{ "alloc-group:ag_size=1000", -EINVAL },	/* not pages */
		{ "alloc-group:ag_size=0", -EINVAL },
		{ "alloc-group:ag_size=99999999999999999999", -EINVAL },
		{ "alloc-group:ag_size=16777216T", -EINVAL },	/* 2^64 */
		{ "alloc-group:color=red", -EINVAL },
		{ "alloc-group:groups", -EINVAL },
		{ "alloc-group:groups=", -EINVAL },
		{ "alloc-group:=4", -EINVAL },
		{ "alloc-group:groups=4,", -EINVAL },
		{ "alloc-group:groups=4,,ag_size=1M", -EINVAL },
		{ "alloc-group:gr oups=4", -EINVAL },
	};
	char *img = tu_image_create(16 * MIB), longspec[300];
	struct pwb__policy pol;
	struct pwb_bdi *bdi, *bad = NULL;
	size_t i;

	ck_assert_int_eq(open_quiet(img, 4, NULL, &bdi), 0);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int ret;

		pwb__err_clear();
		ret = pwb__policy_create(bdi, rows[i].spec, &pol);
		ck_assert_msg(ret == rows[i].err, "spec \"%s\": %d, wanted %d",
			      rows[i].spec, ret, rows[i].err);
		ck_assert_msg(*pwb_errmsg(), "spec \"%s\": no message",
			      rows[i].spec);
	}
	memset(longspec, 0, sizeof(longspec));
	memcpy(longspec, "alloc-group:groups=4,", 21);
	memset(longspec + 21, 'x', sizeof(longspec) - 22);
	ck_assert_int_eq(pwb__policy_create(bdi, longspec, &pol), -EINVAL);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	/* pwb_bdi_open fails cleanly, after its contexts were started. */
	ck_assert_int_eq(open_quiet(img, 4, "nope", &bad), -ENOENT);
	ck_assert_ptr_null(bad);
	/* Its message names every built-in policy (it once missed one). */
	snprintf(msg, sizeof(msg), "%s", pwb_errmsg());
	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		ck_assert_msg(strstr(msg, builtins[i]) != NULL,
			      "\"%s\" not in \"%s\"", builtins[i], msg);
	ck_assert_int_eq(open_quiet(img, 4, "alloc-group:groups=0", &bad),
			 -EINVAL);
	ck_assert_ptr_null(bad);
	ck_assert(strstr(pwb_errmsg(), "alloc-group") != NULL);
	tu_image_remove(img);
	bdi_works(NULL, 2);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Built-in policies                                                      */

START_TEST(test_inode_hash)
{
	struct tu_store st[16];
	char *img = tu_image_create(16 * 4 * PS);
	struct pwb_bdi *bdi;
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, 4, "inode-hash", &bdi), 0);
	for (i = 0; i < 16; i++) {
		tu_store_init(&st[i], i, PS, 4, (uint64_t)i * 4 * PS);
		ck_assert_int_eq(tu_store_open(&st[i], bdi), 0);
		ck_assert_int_eq(pwb_inode_set_wb_hint(st[i].inode, 3), 0);
		ck_assert_int_eq(dirty_range(&st[i], i % 4, 1), (int)(i % 4));
	}
	sync_and_verify(bdi, img, st, 16);
	close_stores(st, 16);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/* Inode @ino of @nr_pages pages at @base: open it on @bdi. */
static void store_at(struct tu_store *st, struct pwb_bdi *bdi, uint64_t ino,
		     uint64_t nr_pages, uint64_t base)
{
	tu_store_init(st, ino, PS, nr_pages, base);
	ck_assert_int_eq(tu_store_open(st, bdi), 0);
}

START_TEST(test_alloc_group)
{
	/* 64 MiB in 8 groups of 8 MiB; 4 contexts: group g -> g % 4. All
	 * inode numbers are 3 mod 4, so inode-hash would say 3 for each. */
	enum { NR = 13 };
	struct tu_store st[NR];
	char *img = tu_image_create(64 * MIB);
	struct pwb_bdi *bdi;
	unsigned int g;

	ck_assert_int_eq(open_quiet(img, 4, "alloc-group:groups=8", &bdi), 0);
	/* One inode 1 MiB into every group: all contexts get some. */
	for (g = 0; g < 8; g++) {
		store_at(&st[g], bdi, 103 + 4 * g, 4, g * 8 * MIB + MIB);
		ck_assert_int_eq(dirty_range(&st[g], 0, 4), (int)(g % 4));
	}
	/* Same group as st[1], 1 MiB further: same context. */
	store_at(&st[8], bdi, 203, 4, 10 * MIB);
	ck_assert_int_eq(dirty_range(&st[8], 0, 4),
			 pwb_inode_wb_ctx(st[1].inode));
	/* Straddles groups 2 and 3; its first dirtied page is in group 3. */
	store_at(&st[9], bdi, 207, 16, 24 * MIB - 8 * PS);
	ck_assert_int_eq(dirty_range(&st[9], 10, 2), 3);
	ck_assert_int_eq(dirty_range(&st[9], 0, 2), 3);	/* stays */
	/* The last page of the device: group 7. */
	store_at(&st[10], bdi, 211, 1, 64 * MIB - PS);
	ck_assert_int_eq(dirty_range(&st[10], 0, 1), 3);
	/* A hint names the context and wins over the group (1). */
	store_at(&st[11], bdi, 215, 4, 8 * MIB + 64 * PS);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[11].inode, 0), 0);
	ck_assert_int_eq(dirty_range(&st[11], 0, 4), 0);
	/* A first page the application cannot map: inode-hash (3), and
	 * not counted as a policy failure. */
	store_at(&st[12], bdi, 219, 4, 16 * MIB + 64 * PS);
	st[12].map_err = EIO;
	st[12].fail_from = 0;
	ck_assert_int_eq(dirty_range(&st[12], 0, 4), 3);
	st[12].map_err = 0;	/* no flusher has looked at it yet */
	ck_assert_uint_eq(uatomic_read(&bdi->policy->nr_fallbacks), 0);
	sync_and_verify(bdi, img, st, NR);
	close_stores(st, NR);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);

	/* ag_size=16M: 4 groups; 3 contexts: group g -> g % 3. */
	ck_assert_int_eq(open_quiet(img, 3, "alloc-group:ag_size=16M", &bdi),
			 0);
	store_at(&st[0], bdi, 3, 4, 20 * MIB);	/* group 1 */
	store_at(&st[1], bdi, 3 + 3, 4, 31 * MIB);	/* group 1 */
	store_at(&st[2], bdi, 3 + 6, 4, 50 * MIB);	/* group 3 -> 0 */
	store_at(&st[3], bdi, 3 + 9, 4, 40 * MIB);	/* group 2 */
	ck_assert_int_eq(dirty_range(&st[0], 0, 4), 1);
	ck_assert_int_eq(dirty_range(&st[1], 0, 4), 1);
	ck_assert_int_eq(dirty_range(&st[2], 0, 4), 0);
	ck_assert_int_eq(dirty_range(&st[3], 0, 4), 2);
	sync_and_verify(bdi, img, st, 4);
	close_stores(st, 4);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_least_loaded)
{
	static const struct {
		unsigned int pages;	/* dirtied at the first dirtying */
		int ctx;		/* where it must go */
	} rows[] = {
		/* Idle bdi: equal loads follow inode-hash. */
		{ 10, 0 }, { 20, 1 }, { 5, 2 }, { 30, 3 },
		/* Loads 10 20 5 30: context 2 is the emptiest. */
		{ 50, 2 },
		/* Loads 10 20 55 30. */
		{ 1, 0 },
		/* Loads 11 20 55 30: still 0, although ino 6 hashes to 2. */
		{ 1, 0 },
	};
	enum { NR = sizeof(rows) / sizeof(rows[0]) };
	struct tu_store st[NR + 1];
	char *img = tu_image_create((NR + 1) * 64 * PS);
	struct pwb_bdi *bdi;
	struct pwb_stats s;
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, 4, "least-loaded", &bdi), 0);
	for (i = 0; i < NR; i++) {
		store_at(&st[i], bdi, i, 64, (uint64_t)i * 64 * PS);
		ck_assert_msg(dirty_range(&st[i], 0, rows[i].pages) ==
				      rows[i].ctx,
			      "inode %u went to %d, wanted %d", i,
			      pwb_inode_wb_ctx(st[i].inode), rows[i].ctx);
	}
	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, 2, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 55);
	/* Written: all loads 0 again, so inode 7 goes by its hash (3). */
	sync_and_verify(bdi, img, st, NR);
	store_at(&st[NR], bdi, NR, 64, (uint64_t)NR * 64 * PS);
	ck_assert_int_eq(dirty_range(&st[NR], 0, 3), 3);
	sync_and_verify(bdi, img, st, NR + 1);
	close_stores(st, NR + 1);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_hint)
{
	struct tu_store st[5];
	char *img = tu_image_create(5 * 8 * PS);
	struct pwb_bdi *bdi;
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, 4, "hint", &bdi), 0);
	for (i = 0; i < 5; i++)
		store_at(&st[i], bdi, i, 8, (uint64_t)i * 8 * PS);
	ck_assert_int_eq(pwb_inode_set_wb_hint(NULL, 0), -EINVAL);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[0].inode, 4), -ERANGE);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[0].inode, -2), -ERANGE);
	ck_assert(*pwb_errmsg());
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[0].inode, 3), 0);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[2].inode, 1), 0);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[2].inode, -1), 0);
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[4].inode, 0), 0);

	ck_assert_int_eq(dirty_range(&st[0], 0, 8), 3);	/* hinted */
	ck_assert_int_eq(dirty_range(&st[1], 0, 8), 1);	/* no hint */
	ck_assert_int_eq(dirty_range(&st[2], 0, 8), 2);	/* cleared */
	ck_assert_int_eq(dirty_range(&st[3], 0, 8), 3);	/* no hint */
	ck_assert_int_eq(dirty_range(&st[4], 0, 8), 0);	/* hinted */
	/* A later hint never moves a placed inode. */
	ck_assert_int_eq(pwb_inode_set_wb_hint(st[4].inode, 2), 0);
	ck_assert_int_eq(dirty_range(&st[4], 0, 8), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(dirty_range(&st[4], 0, 8), 0);
	sync_and_verify(bdi, img, st, 5);
	close_stores(st, 5);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* In-process registration                                                */

static unsigned long fixed_fini_calls;

static int fixed_init(struct pwb_bdi *bdi, const char *args, void **state)
{
	unsigned int ctx = 0;

	if (args && sscanf(args, "ctx=%u", &ctx) != 1)
		return -EINVAL;
	if (ctx >= pwb_bdi_nr_wb_ctx(bdi))	/* init sees the contexts */
		return -ERANGE;
	*state = (void *)(uintptr_t)ctx;
	return 0;
}

static void fixed_fini(void *state)
{
	uatomic_inc(&fixed_fini_calls);
}

static int fixed_select(void *state, const struct pwb_policy_inode *info,
			unsigned int nr_wb_ctx)
{
	return (int)(uintptr_t)state;
}

static const struct pwb_policy_ops fixed_ops = {
	.abi_version = PWB_POLICY_ABI_VERSION,
	.name = "test-fixed",
	.init = fixed_init,
	.fini = fixed_fini,
	.select = fixed_select,
};

START_TEST(test_register)
{
	struct pwb_policy_ops bad;
	struct tu_store st[6];
	char *img = tu_image_create(6 * 4 * PS);
	char longname[PWB_POLICY_NAME_MAX + 2];
	struct pwb_bdi *bdi = NULL;
	unsigned int i;

	ck_assert_int_eq(pwb_policy_register(NULL), -EINVAL);
	bad = fixed_ops;
	bad.name = NULL;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad.name = "";
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad.name = "with:colon";
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad.name = "with,comma";
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	bad.name = longname;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad = fixed_ops;
	bad.select = NULL;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad = fixed_ops;
	bad.abi_version = 0;
	ck_assert_int_eq(pwb_policy_register(&bad), -EPROTONOSUPPORT);
	bad.abi_version = PWB_POLICY_ABI_VERSION + 1;
	ck_assert_int_eq(pwb_policy_register(&bad), -EPROTONOSUPPORT);
	ck_assert(strstr(pwb_errmsg(), "ABI") != NULL);
	bad = fixed_ops;
	bad.name = "inode-hash";
	ck_assert_int_eq(pwb_policy_register(&bad), -EEXIST);

	ck_assert_int_eq(open_quiet(img, 4, "test-fixed", &bdi), -ENOENT);
	ck_assert_int_eq(pwb_policy_register(&fixed_ops), 0);
	ck_assert_int_eq(pwb_policy_register(&fixed_ops), -EEXIST);
	bad = fixed_ops;	/* another table, same name */
	ck_assert_int_eq(pwb_policy_register(&bad), -EEXIST);

	/* init's errors reach pwb_bdi_open, with a message; no fini. */
	ck_assert_int_eq(open_quiet(img, 4, "test-fixed:ctx=x", &bdi),
			 -EINVAL);
	ck_assert(strstr(pwb_errmsg(), "test-fixed") != NULL);
	ck_assert_int_eq(open_quiet(img, 4, "test-fixed:ctx=4", &bdi),
			 -ERANGE);
	ck_assert_uint_eq(uatomic_read(&fixed_fini_calls), 0);

	ck_assert_int_eq(open_quiet(img, 4, "test-fixed:ctx=2", &bdi), 0);
	for (i = 0; i < 6; i++) {
		store_at(&st[i], bdi, i, 4, (uint64_t)i * 4 * PS);
		ck_assert_int_eq(dirty_range(&st[i], 0, 4), 2);
	}
	sync_and_verify(bdi, img, st, 6);
	close_stores(st, 6);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_uint_eq(uatomic_read(&fixed_fini_calls), 1);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_map_page)
{
	struct tu_store st[2];
	char *img = tu_image_create(64 * PS);
	struct pwb_bdi *bdi;
	uint64_t off = 0;

	ck_assert_int_eq(open_quiet(img, 2, NULL, &bdi), 0);
	store_at(&st[0], bdi, 1, 8, 16 * PS);
	/* Pages 4..7 of this one lie past the end of the device. */
	store_at(&st[1], bdi, 2, 8, 60 * PS);
	ck_assert_int_eq(pwb_policy_map_page(st[0].inode, 3, &off), 0);
	ck_assert_uint_eq(off, 19 * PS);
	ck_assert_int_eq(pwb_policy_map_page(NULL, 0, &off), -EINVAL);
	ck_assert_int_eq(pwb_policy_map_page(st[0].inode, 0, NULL), -EINVAL);
	/* The application's own error. */
	ck_assert_int_eq(pwb_policy_map_page(st[0].inode, 8, &off), -ERANGE);
	st[0].map_err = ENXIO;
	ck_assert_int_eq(pwb_policy_map_page(st[0].inode, 2, &off), -ENXIO);
	ck_assert(*pwb_errmsg());
	st[0].map_err = 0;
	/* An offset off the device. */
	ck_assert_int_eq(pwb_policy_map_page(st[1].inode, 3, &off), 0);
	ck_assert_int_eq(pwb_policy_map_page(st[1].inode, 4, &off), -ERANGE);
	close_stores(st, 2);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Plugins                                                                */

START_TEST(test_plugin_stripe)
{
	char *img = tu_image_create(16 * MIB), buf[64];
	struct tu_store st[6];
	struct pwb_bdi_info info;
	struct pwb_bdi *bdi = NULL;
	static const uint64_t base[6] = { 0, 1, 2, 5, 7, 15 };	/* MiB */
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, 4, "stripe:size=1M", &bdi), -ENOENT);
	load_stripe();
	load_stripe();		/* the same object again: harmless */
	ck_assert_int_eq(open_quiet(img, 4, "stripe:size=1000", &bdi),
			 -EINVAL);
	ck_assert(strstr(pwb_errmsg(), "stripe") != NULL);
	ck_assert_int_eq(open_quiet(img, 4, "stripe:speed=1", &bdi), -EINVAL);

	ck_assert_int_eq(open_quiet(img, 4, "stripe:size=1M", &bdi), 0);
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_str_eq(info.policy, "stripe");
	ck_assert_int_eq(pwb_bdi_policy(bdi, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "stripe:size=1M");
	for (i = 0; i < 6; i++) {
		/* ino 4i: inode-hash would put every one on context 0. */
		store_at(&st[i], bdi, 4 * i, 8, base[i] * MIB);
		ck_assert_int_eq(dirty_range(&st[i], 0, 8),
				 (int)(base[i] % 4));
	}
	ck_assert_uint_eq(uatomic_read(&bdi->policy->nr_fallbacks), 0);
	sync_and_verify(bdi, img, st, 6);
	close_stores(st, 6);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_plugin_dir)
{
	ck_assert_int_eq(pwb_policy_load(NULL), -EINVAL);
	ck_assert_int_eq(pwb_policy_load(""), -EINVAL);
	ck_assert_int_eq(pwb_policy_set_dir("relative/dir"), -EINVAL);
	ck_assert_int_eq(pwb_policy_set_dir(""), -EINVAL);
	ck_assert_int_eq(pwb_policy_set_dir(NULL), 0);
	/* Without a directory, only absolute paths. */
	ck_assert_int_eq(pwb_policy_load("stripe.so"), -EPERM);
	ck_assert(strstr(pwb_errmsg(), "pwb_policy_set_dir") != NULL);
	ck_assert_int_eq(pwb_policy_load("./stripe.so"), -EPERM);
	ck_assert_int_eq(pwb_policy_set_dir(PWB_PLUGIN_DIR), 0);
	/* With one, bare names inside it, and nothing that climbs out. */
	ck_assert_int_eq(pwb_policy_load("../.libs/stripe.so"), -EPERM);
	ck_assert_int_eq(pwb_policy_load(".."), -EPERM);
	ck_assert_int_eq(pwb_policy_load("no-such-plugin.so"), -ENOENT);
	ck_assert_int_eq(pwb_policy_load("stripe.so"), 0);
	ck_assert_int_eq(pwb_policy_set_dir(NULL), 0);
	ck_assert_int_eq(pwb_policy_load("stripe.so"), -EPERM);
	bdi_works("stripe:size=16K", 4);
}
END_TEST

START_TEST(test_plugin_bad_abi)
{
	ck_assert_int_eq(pwb_policy_load(PWB_PLUGIN_DIR "/bad-abi.so"),
			 -EPROTONOSUPPORT);
	ck_assert(strstr(pwb_errmsg(), "ABI version") != NULL);
	ck_assert(strstr(pwb_errmsg(), "bad-abi.so") != NULL);
	/* Nothing registered: the name is unknown, the default works. */
	{
		char *img = tu_image_create(MIB);
		struct pwb_bdi *bdi = NULL;

		ck_assert_int_eq(open_quiet(img, 2, "bad-abi", &bdi),
				 -ENOENT);
		tu_image_remove(img);
	}
	bdi_works(NULL, 2);
}
END_TEST

START_TEST(test_plugin_missing_entry)
{
	ck_assert_int_eq(pwb_policy_load(PWB_PLUGIN_DIR "/missing-entry.so"),
			 -ENOSYS);
	ck_assert(strstr(pwb_errmsg(), PWB_POLICY_ENTRY) != NULL);
	bdi_works(NULL, 2);
	bdi_works("inode-hash", 8);
}
END_TEST

START_TEST(test_plugin_unloadable)
{
	char path[4096];
	FILE *f;

	/* A text file named like a plugin. */
	snprintf(path, sizeof(path), "%s/pwb-not-a-plugin-%d.so",
		 tu_test_dir(), (int)getpid());
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("this is not an ELF shared object\n", f);
	fclose(f);
	ck_assert_int_eq(pwb_policy_load(path), -ENOEXEC);
	ck_assert(strstr(pwb_errmsg(), path) != NULL);
	unlink(path);
	/* Gone now. */
	ck_assert_int_eq(pwb_policy_load(path), -ENOENT);
	ck_assert(strstr(pwb_errmsg(), path) != NULL);
	/* A directory. */
	ck_assert_int_eq(pwb_policy_load(PWB_PLUGIN_DIR), -ENOEXEC);
	/* Through a file where a directory should be. */
	snprintf(path, sizeof(path), "%s/stripe.so/x.so", PWB_PLUGIN_DIR);
	ck_assert_int_eq(pwb_policy_load(path), -ENOTDIR);
	bdi_works(NULL, 2);
}
END_TEST

struct bad_select_run {
	const char *spec;
	unsigned int nr;
	uint64_t fallbacks;
	int placed_wrong;
};

#define BS_INODES 12

/* Dirty BS_INODES inodes under a misbehaving policy; write, verify. */
static void bad_select_run(void *arg)
{
	struct bad_select_run *r = arg;
	struct tu_store st[BS_INODES];
	char *img = tu_image_create(BS_INODES * 8 * PS);
	struct pwb_bdi *bdi;
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, r->nr, r->spec, &bdi), 0);
	for (i = 0; i < BS_INODES; i++) {
		store_at(&st[i], bdi, 5 * i + 1, 8, (uint64_t)i * 8 * PS);
		if (dirty_range(&st[i], 0, 8) != (int)((5 * i + 1) % r->nr))
			r->placed_wrong++;
	}
	r->fallbacks = uatomic_read(&bdi->policy->nr_fallbacks);
	ck_assert_int_eq(uatomic_read(&bdi->policy_fallback_reported), 1);
	/* Each switch asks a new instance to place every inode again: it
	 * falls back again, but the bdi has said so already. */
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(pwb_bdi_set_policy(bdi, r->spec), 0);
		ck_assert_uint_eq(uatomic_read(&bdi->policy->nr_fallbacks),
				  BS_INODES);
	}
	sync_and_verify(bdi, img, st, BS_INODES);
	close_stores(st, BS_INODES);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}

START_TEST(test_plugin_bad_select)
{
	static const char *const specs[] = { "bad-select:mode=range",
					     "bad-select:mode=error",
					     "bad-select" };
	unsigned int i;

	ck_assert_int_eq(pwb_policy_load(PWB_PLUGIN_DIR "/bad-select.so"), 0);
	for (i = 0; i < 3; i++) {
		struct bad_select_run r = { specs[i], 4, 0, 0 };
		int lines = count_stderr_lines(bad_select_run, &r,
					       "bad-select");

		ck_assert_int_eq(r.placed_wrong, 0);
		ck_assert_uint_eq(r.fallbacks, BS_INODES);
		ck_assert_msg(lines == 1, "%s: %d stderr lines, wanted one "
				      "(once per bdi, across 3 switches)",
			      specs[i], lines);
	}
	/* Bad arguments fail init; the bdi is not opened. */
	{
		char *img = tu_image_create(MIB);
		struct pwb_bdi *bdi = NULL;

		ck_assert_int_eq(open_quiet(img, 2, "bad-select:mode=zzz",
					    &bdi),
				 -EINVAL);
		ck_assert(strstr(pwb_errmsg(), "bad-select") != NULL);
		tu_image_remove(img);
	}
	bdi_works(NULL, 4);
}
END_TEST

/*
 * ABI 2 appended flags, key and batch. A table that says ABI 1 is read only
 * up to nr_wb_ctx_changed: whatever lies beyond (here: flags asking for a
 * shared list) is ignored, so an old plugin keeps its own placement. An
 * ABI 2 table with flags this library does not know is refused.
 */
static const struct pwb_policy_ops abi1_ops = {
	.abi_version = 1,
	.name = "test-abi1",
	.init = fixed_init,
	.select = fixed_select,
	.flags = PWB_POLICY_F_SHARED_LIST,	/* not valid in ABI 1 */
};

START_TEST(test_register_abi1_table_ignores_abi2_fields)
{
	struct pwb_policy_ops bad = fixed_ops;
	struct tu_store st;
	struct pwb_bdi *bdi;
	char *img = tu_image_create(16 * PS);

	bad.name = "test-bad-flags";
	bad.flags = 0x80;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	ck_assert(strstr(pwb_errmsg(), "flags") != NULL);

	ck_assert_int_eq(pwb_policy_register(&abi1_ops), 0);
	ck_assert_int_eq(open_quiet(img, 4, "test-abi1:ctx=3", &bdi), 0);
	store_at(&st, bdi, 1, 4, 0);
	ck_assert_int_eq(dirty_range(&st, 0, 4), 3);	/* not 0 */
	ck_assert_ptr_eq(pwb__aread(&bdi->ctxs->ctx[1]->lists),
			 bdi->ctxs->ctx[1]);
	sync_and_verify(bdi, img, &st, 1);
	close_stores(&st, 1);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/* xarray: the key space (device pages) is cut into one contiguous range
 * per context, whatever the inode numbers. */
START_TEST(test_xarray_contexts_own_contiguous_ranges)
{
	enum { N = 16, PAGES = 8 };	/* 128 pages, 32 per context */
	struct tu_store st[N];
	char *img = tu_image_create(N * PAGES * PS);
	struct pwb_bdi *bdi;
	unsigned int i;

	ck_assert_int_eq(open_quiet(img, 4, "xarray", &bdi), 0);
	for (i = 0; i < N; i++) {
		store_at(&st[i], bdi, 4 * i + 1, PAGES,
			 (uint64_t)i * PAGES * PS);
		/* Inode i's first dirty page is device page i * 8. */
		ck_assert_int_eq(dirty_range(&st[i], 0, 2), (int)(i / 4));
	}
	sync_and_verify(bdi, img, st, N);
	close_stores(st, N);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);

	img = tu_image_create(N * PAGES * PS);
	ck_assert_int_eq(open_quiet(img, 2, "xarray:key=ino,ino_range=100",
				    &bdi),
			 0);
	store_at(&st[0], bdi, 49, PAGES, 0);
	store_at(&st[1], bdi, 50, PAGES, PAGES * PS);
	store_at(&st[2], bdi, 1000, PAGES, 2 * PAGES * PS);
	ck_assert_int_eq(dirty_range(&st[0], 0, 1), 0);
	ck_assert_int_eq(dirty_range(&st[1], 0, 1), 1);
	ck_assert_int_eq(dirty_range(&st[2], 0, 1), 1);	/* past the range */
	sync_and_verify(bdi, img, st, 3);
	close_stores(st, 3);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

START_TEST(test_xarray_and_shared_list_bad_args)
{
	static const char *const bad[] = {
		"xarray:key=inode", "xarray:key=ino,key=ino",
		"xarray:ino_range=10", "xarray:key=ino,ino_range=0",
		"xarray:key=ino,ino_range=1K", "xarray:depth=2",
		"shared-list:batch=0", "shared-list:batch=1025",
		"shared-list:batch=2,batch=3", "shared-list:batch=x",
		"shared-list:size=2",
	};
	char *img = tu_image_create(16 * PS);
	struct pwb_bdi *bdi;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(open_quiet(img, 2, bad[i], &bdi) == -EINVAL,
			      "%s was accepted", bad[i]);
		ck_assert_msg(strstr(pwb_errmsg(), "policy") != NULL,
			      "%s: message \"%s\"", bad[i], pwb_errmsg());
	}
	tu_image_remove(img);
	bdi_works("shared-list:batch=1024", 3);
	bdi_works("xarray:key=ino", 3);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Integrity under every policy                                           */

/*
 * NR_WRITERS threads dirty random ranges of their own inodes (writer w
 * owns inodes i % NR_WRITERS == w) while the flushers write on their own
 * (10 ms periodic passes, nothing waits to expire, a small background
 * threshold) and fsync now and then; then pwb_sync, and the device must
 * equal the page memory byte for byte. Each policy runs with 1, 2 and 8
 * contexts; where the policy is deterministic, every inode must be on the
 * context it prescribes for the first page its writer dirtied.
 */
#define INT_INODES 64
#define INT_PAGES 32
#define NR_WRITERS 4
#define INT_MARKS 3000
#define INT_RANGE 8
#define INT_FSYNC_EVERY 300

static const char *const int_specs[] = {
	"inode-hash", "alloc-group:groups=16", "least-loaded", "hint",
	"stripe:size=256K", "xarray", "xarray:key=ino,ino_range=2048",
	"shared-list:batch=4",
};
static const unsigned int int_nr[] = { 1, 2, 8 };
#define NR_INT_SPECS (sizeof(int_specs) / sizeof(int_specs[0]))
#define NR_INT_NR (sizeof(int_nr) / sizeof(int_nr[0]))

struct int_run {
	struct pwb_bdi *bdi;
	struct tu_store st[INT_INODES];
	int64_t first[INT_INODES];	/* first page dirtied, by its owner */
};

struct int_writer {
	struct int_run *r;
	pthread_t tid;
	unsigned int id;
	uint64_t seed;
	int err;		/* first failure */
};

static void *int_writer_main(void *arg)
{
	struct int_writer *w = arg;
	unsigned int n;

	for (n = 1; n <= INT_MARKS && !w->err; n++) {
		unsigned int i = (unsigned int)(tu_rand(&w->seed) %
						(INT_INODES / NR_WRITERS)) *
					 NR_WRITERS +
				 w->id;
		struct tu_store *st = &w->r->st[i];
		uint64_t first = tu_rand(&w->seed) % INT_PAGES;
		uint64_t len = 1 + tu_rand(&w->seed) % INT_RANGE, p;

		len = TU_MIN(len, INT_PAGES - first);
		for (p = first; p < first + len; p++)
			tu_fill_page(st, p, tu_page_version(st, p) + 1);
		if (w->r->first[i] < 0)
			w->r->first[i] = (int64_t)first;
		w->err = pwb_mark_dirty(st->inode, first * PS, len * PS);
		if (!w->err && n % INT_FSYNC_EVERY == 0)
			w->err = pwb_fsync(st->inode);
	}
	return NULL;
}

/* The context @spec prescribes, or -1 if it depends on timing. */
static int int_expected(const char *spec, unsigned int nr,
			const struct tu_store *st, int64_t first, int hint)
{
	uint64_t off = st->base_off + (uint64_t)first * PS;

	if (!strcmp(spec, "inode-hash"))
		return (int)(st->ino % nr);
	if (!strcmp(spec, "hint"))
		return hint >= 0 ? hint : (int)(st->ino % nr);
	if (!strncmp(spec, "alloc-group", 11))	/* 8 MiB / 16 groups */
		return (int)((off / (512 * 1024)) % nr);
	if (!strncmp(spec, "stripe", 6))
		return (int)((off / (256 * 1024)) % nr);
	/* The device has INT_INODES * INT_PAGES = 2048 pages. */
	if (!strcmp(spec, "xarray"))
		return (int)((off / PS) * nr / 2048);
	if (!strcmp(spec, "xarray:key=ino,ino_range=2048"))
		return (int)(st->ino * nr / 2048);
	if (!strncmp(spec, "shared-list", 11))
		return 0;
	return -1;
}

START_TEST(test_integrity)
{
	const char *spec = int_specs[_i / NR_INT_NR];
	unsigned int nr = int_nr[_i % NR_INT_NR], i;
	struct int_writer w[NR_WRITERS];
	struct pwb_bdi_config cfg;
	struct int_run *r;
	uint64_t written = 0;
	char *img;

	if (!strncmp(spec, "stripe", 6))
		load_stripe();
	r = calloc(1, sizeof(*r));
	ck_assert_ptr_nonnull(r);
	img = tu_image_create((uint64_t)INT_INODES * INT_PAGES * PS);
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = nr;
	cfg.policy = spec;
	cfg.dirty_writeback_ms = 10;
	cfg.dirty_expire_ms = 0;
	cfg.dirty_background_bytes = 256 * 1024;
	ck_assert_msg(pwb_bdi_open(img, &cfg, &r->bdi) == 0, "%s: %s", spec,
		      pwb_errmsg());
	for (i = 0; i < INT_INODES; i++) {
		tu_store_init(&r->st[i], 1000 + i, PS, INT_PAGES,
			      (uint64_t)i * INT_PAGES * PS);
		ck_assert_int_eq(tu_store_open(&r->st[i], r->bdi), 0);
		r->first[i] = -1;
		/* Every third inode gets a hint; only "hint" and
		 * "alloc-group" obey it, so alloc-group goes without. */
		if (!strcmp(spec, "hint") && i % 3 == 0)
			ck_assert_int_eq(pwb_inode_set_wb_hint(
						 r->st[i].inode,
						 (int)((i / 3) % nr)),
					 0);
	}
	for (i = 0; i < NR_WRITERS; i++) {
		w[i].r = r;
		w[i].id = i;
		w[i].seed = 0x9e3779b97f4a7c15ull * (i + 1) + _i;
		w[i].err = 0;
		ck_assert_int_eq(pthread_create(&w[i].tid, NULL,
						int_writer_main, &w[i]),
				 0);
	}
	for (i = 0; i < NR_WRITERS; i++)
		pthread_join(w[i].tid, NULL);
	for (i = 0; i < NR_WRITERS; i++)
		ck_assert_msg(w[i].err == 0, "writer %u: %d", i, w[i].err);

	ck_assert_int_eq(pwb_sync(r->bdi), 0);
	ck_assert_msg(tu_verify_device(img, r->st, INT_INODES) == 0,
		      "%s with %u contexts: the device differs", spec, nr);
	for (i = 0; i < INT_INODES; i++) {
		int ctx = pwb_inode_wb_ctx(r->st[i].inode);
		int hint = !strcmp(spec, "hint") && i % 3 == 0
				   ? (int)((i / 3) % nr)
				   : -1;
		int want;

		if (r->first[i] < 0)
			continue;	/* never picked */
		ck_assert_int_ge(ctx, 0);
		ck_assert_int_lt(ctx, (int)nr);
		want = int_expected(spec, nr, &r->st[i], r->first[i], hint);
		if (want >= 0)
			ck_assert_msg(ctx == want, "%s, %u contexts: inode %u "
				      "on %d, wanted %d", spec, nr, i, ctx,
				      want);
		written += r->st[i].pages_written;
	}
	ck_assert_uint_gt(written, 0);
	ck_assert_uint_eq(uatomic_read(&r->bdi->policy->nr_fallbacks), 0);
	for (i = 0; i < INT_INODES; i++)
		ck_assert_int_eq(pwb_inode_close(r->st[i].inode), 0);
	ck_assert_int_eq(pwb_bdi_close(r->bdi), 0);
	for (i = 0; i < INT_INODES; i++)
		tu_store_destroy(&r->st[i]);
	free(r);
	tu_image_remove(img);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* On which threads map_page runs                                         */

/*
 * The application's lock around its own dirtying: an error-checking
 * mutex, so that map_page taking it on a thread that already holds it
 * returns EDEADLK (counted) where a plain mutex would hang for ever.
 */
static struct {
	pthread_mutex_t lock;
	uint64_t self_deadlocks;	/* atomic: map_page under our lock */
	uint64_t calls;			/* atomic */
} app;

static int locking_map_page(struct pwb_inode *inode, uint64_t index,
			    uint64_t *dev_off)
{
	int ret = pthread_mutex_lock(&app.lock);

	uatomic_inc(&app.calls);
	if (ret == EDEADLK) {
		uatomic_inc(&app.self_deadlocks);
		return tu_ops.map_page(inode, index, dev_off);
	}
	ck_assert_int_eq(ret, 0);
	ret = tu_ops.map_page(inode, index, dev_off);
	pthread_mutex_unlock(&app.lock);
	return ret;
}

struct caller_lock_case {
	const char *spec;
	bool on_caller;	/* select()/key() call map_page on the caller */
	bool every_mark; /* select_page() does, at every dirtying; the pages
			  * live in slices, which re-shards place without
			  * asking (region) */
};

static const struct caller_lock_case caller_lock_cases[] = {
	{ "inode-hash", false, false },	  { "least-loaded", false, false },
	{ "hint", false, false },	  { "shared-list", false, false },
	{ "xarray:key=ino", false, false }, { "alloc-group", true, false },
	{ "xarray", true, false },	  { "region", true, true },
};

#define CL_INODES 4
#define CL_PAGES 8

/* Run @fn(@bdi, @arg) holding the application's lock; return how often
 * map_page ran on this thread meanwhile. */
static uint64_t under_app_lock(int (*fn)(struct pwb_bdi *, void *),
			       struct pwb_bdi *bdi, void *arg)
{
	uint64_t before;

	ck_assert_int_eq(pthread_mutex_lock(&app.lock), 0);
	before = uatomic_read(&app.self_deadlocks);
	ck_assert_int_eq(fn(bdi, arg), 0);
	pthread_mutex_unlock(&app.lock);
	return uatomic_read(&app.self_deadlocks) - before;
}

static int cl_mark_dirty(struct pwb_bdi *bdi, void *arg)
{
	struct tu_store *st = arg;

	(void)bdi;
	return pwb_mark_dirty(st->inode, 0, CL_PAGES * PS);
}

static int cl_set_nr(struct pwb_bdi *bdi, void *arg)
{
	return pwb_bdi_set_nr_wb_ctx(bdi, *(unsigned int *)arg);
}

static int cl_set_policy(struct pwb_bdi *bdi, void *arg)
{
	return pwb_bdi_set_policy(bdi, arg);
}

/*
 * An application that holds its own lock around pwb_mark_dirty() (first
 * dirtying), pwb_bdi_set_nr_wb_ctx() and pwb_bdi_set_policy() while its
 * map_page takes the same lock deadlocks itself exactly under the
 * policies whose select() or key() consult map_page: alloc-group, xarray
 * (key=offset) and region (whose select_page() does so at every
 * pwb_mark_dirty(), not only the first). pwb.h, the README and
 * doc/design.md forbid it;
 * this shows where it happens and that no other built-in policy does it.
 * On flusher threads map_page never meets the caller's lock.
 */
START_TEST(test_map_page_on_the_callers_thread)
{
	const struct caller_lock_case *c = &caller_lock_cases[_i];
	struct pwb_inode_ops ops = tu_ops;
	struct tu_store st[CL_INODES];
	pthread_mutexattr_t attr;
	struct pwb_bdi *bdi;
	char *img = tu_image_create(CL_INODES * CL_PAGES * PS);
	unsigned int i, three = 3;
	uint64_t marks = 0, n;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&app.lock, &attr);
	pthread_mutexattr_destroy(&attr);
	app.self_deadlocks = 0;
	app.calls = 0;
	ops.map_page = locking_map_page;

	ck_assert_int_eq(open_quiet(img, 2, c->spec, &bdi), 0);
	for (i = 0; i < CL_INODES; i++) {
		tu_store_init(&st[i], 40 + i, PS, CL_PAGES,
			      (uint64_t)i * CL_PAGES * PS);
		ck_assert_int_eq(pwb_inode_open(bdi, st[i].ino, &ops, &st[i],
						&st[i].inode),
				 0);
		for (n = 0; n < CL_PAGES; n++)
			tu_fill_page(&st[i], n, 1);
		marks += under_app_lock(cl_mark_dirty, bdi, &st[i]);
	}
	/* A mark of an inode already placed asks nothing, except under a
	 * per-page policy: each page is placed when it becomes dirty. */
	n = under_app_lock(cl_mark_dirty, bdi, &st[0]);
	if (c->every_mark)
		ck_assert_uint_ge(n, 1);
	else
		ck_assert_uint_eq(n, 0);
	if (c->on_caller)
		ck_assert_uint_ge(marks, CL_INODES);
	else
		ck_assert_uint_eq(marks, 0);

	/* A re-shard and a policy switch place every inode again; under a
	 * per-page policy these inodes hold no page themselves, and their
	 * slices stay with the contexts their pages were routed to. */
	n = under_app_lock(cl_set_nr, bdi, &three);
	if (c->on_caller && !c->every_mark)
		ck_assert_uint_ge(n, CL_INODES);
	else
		ck_assert_uint_eq(n, 0);
	n = under_app_lock(cl_set_policy, bdi, (void *)c->spec);
	if (c->on_caller && !c->every_mark)
		ck_assert_uint_ge(n, CL_INODES);
	else
		ck_assert_uint_eq(n, 0);

	/* The flushers' calls: never under the caller's lock. */
	n = uatomic_read(&app.self_deadlocks);
	sync_and_verify(bdi, img, st, CL_INODES);
	ck_assert_uint_eq(uatomic_read(&app.self_deadlocks), n);
	ck_assert_uint_ge(uatomic_read(&app.calls), CL_INODES);
	close_stores(st, CL_INODES);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	pthread_mutex_destroy(&app.lock);
	tu_image_remove(img);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc;

	tc = tcase_create("spec");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_spec_good);
	tcase_add_test(tc, test_spec_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("builtin");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_inode_hash);
	tcase_add_test(tc, test_alloc_group);
	tcase_add_test(tc, test_least_loaded);
	tcase_add_test(tc, test_hint);
	tcase_add_test(tc, test_xarray_contexts_own_contiguous_ranges);
	tcase_add_test(tc, test_xarray_and_shared_list_bad_args);
	tcase_add_loop_test(tc, test_map_page_on_the_callers_thread, 0,
			    (int)(sizeof(caller_lock_cases) /
				  sizeof(caller_lock_cases[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("register");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_register);
	tcase_add_test(tc, test_register_abi1_table_ignores_abi2_fields);
	tcase_add_test(tc, test_map_page);
	suite_add_tcase(s, tc);

	tc = tcase_create("plugin");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_plugin_stripe);
	tcase_add_test(tc, test_plugin_dir);
	tcase_add_test(tc, test_plugin_bad_abi);
	tcase_add_test(tc, test_plugin_missing_entry);
	tcase_add_test(tc, test_plugin_unloadable);
	tcase_add_test(tc, test_plugin_bad_select);
	suite_add_tcase(s, tc);

	tc = tcase_create("integrity");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_integrity, 0,
			    (int)(NR_INT_SPECS * NR_INT_NR));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(policy_suite(), false);
}
