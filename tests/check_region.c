/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_region.c - the "region" policy: one inode's pages on several
 * contexts, white-box
 *
 * The bdi is opened "quiet" (no periodic or background writeback, nothing
 * expires), so per-context dirty counts stay put until the test syncs.
 * Stores map page i to base_off + i * PS, so the region of a page, hence
 * its context, is known in advance.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS 4096u
#define MIB (1ull << 20)

/* max_write_failures for the next open_quiet() (0: the default). */
static unsigned int g_max_failures;

static int open_quiet(const char *img, unsigned int nr, const char *spec,
		      struct pwb_bdi **bdip)
{
	return tu_open_quiet(img, nr, NULL, spec, PS, g_max_failures, bdip);
}

/* Dirty pages [first, first + n) of @st with new versions. */
static void dirty(struct tu_store *st, uint64_t first, uint64_t n)
{
	uint64_t i;

	for (i = first; i < first + n; i++)
		tu_fill_page(st, i, tu_page_version(st, i) + 1);
	ck_assert_int_eq(pwb_mark_dirty(st->inode, first * PS, n * PS), 0);
}

static struct pwb_stats ctx_stats(struct pwb_bdi *bdi, unsigned int i)
{
	struct pwb_stats s;

	ck_assert_int_eq(pwb_wb_ctx_stats(bdi, i, &s), 0);
	return s;
}

/* One bdi on a fresh 4 MiB image with one inode (a tu_store) open. */
struct fx {
	char *img;
	struct pwb_bdi *bdi;
	struct tu_store st;
};

static void fx_open(struct fx *f, unsigned int nr, const char *spec,
		    uint64_t ino, uint64_t pages)
{
	f->img = tu_image_create(4 * MIB);
	ck_assert_int_eq(open_quiet(f->img, nr, spec, &f->bdi), 0);
	tu_store_init(&f->st, ino, PS, pages, 0);
	ck_assert_int_eq(tu_store_open(&f->st, f->bdi), 0);
}

/* The device equals memory; close everything cleanly. */
static void fx_close(struct fx *f)
{
	ck_assert_int_eq(tu_verify_device(f->img, &f->st, 1), 0);
	ck_assert_int_eq(pwb_inode_close(f->st.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(f->bdi), 0);
	tu_store_destroy(&f->st);
	tu_image_remove(f->img);
}

/*
 * One inode over a 4 MiB device with 4 contexts and the default region
 * size (1 MiB): each context holds, then writes, exactly the 256 pages of
 * its region; the writes come from four flusher threads; one pwb_fsync
 * covers every context, with one device flush, and the device equals
 * memory.
 */
START_TEST(test_one_inode_written_by_every_context)
{
	struct fx f;
	struct pwb_stats s0, s1;
	uint64_t nr;
	unsigned int i;
	char spec[64];

	fx_open(&f, 4, "region", 7, 1024);
	ck_assert_int_eq(pwb_bdi_policy(f.bdi, spec, sizeof(spec)), 0);
	ck_assert_str_eq(spec, "region");
	dirty(&f.st, 0, 1024);
	for (i = 0; i < 4; i++) {
		s0 = ctx_stats(f.bdi, i);
		ck_assert_uint_eq(s0.dirty_pages, 256);
		ck_assert_uint_eq(s0.nr_dirty_inodes, 1);
	}
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 1024);
	ck_assert_int_eq(pwb_inode_wb_ctx(f.st.inode), 0);

	ck_assert_int_eq(pwb_bdi_stats(f.bdi, &s0), 0);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_int_eq(pwb_bdi_stats(f.bdi, &s1), 0);
	ck_assert_uint_eq(s1.device_flushes - s0.device_flushes, 1);
	ck_assert_uint_eq(s1.dirty_pages, 0);
	for (i = 0; i < 4; i++) {
		struct pwb_stats s = ctx_stats(f.bdi, i);

		ck_assert_msg(s.written_pages == 256,
			      "context %u wrote %" PRIu64 " pages", i,
			      s.written_pages);
		ck_assert_uint_eq(s.dirty_pages, 0);
	}
	ck_assert_uint_eq(f.st.pages_written, 1024);
	ck_assert_uint_eq(f.st.nr_writers, 4);
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 0);
	ck_assert_int_eq(tu_verify_device(f.img, &f.st, 1), 0);

	fx_close(&f);
}
END_TEST

/*
 * bytes=64K with 2 contexts: pages 0-15 are region 0 (context 0), 16-31
 * region 1 (context 1), 32-47 region 2 (context 0 again). Pages on both
 * sides of each boundary land on their own region's context; the inode
 * reports the context of its first page.
 */
START_TEST(test_region_boundaries)
{
	struct fx f;
	unsigned int i;

	fx_open(&f, 2, "region:bytes=64K", 3, 64);
	ck_assert_int_eq(pwb_inode_wb_ctx(f.st.inode), -ENODATA);
	dirty(&f.st, 16, 1);	/* ctx 1 */
	ck_assert_int_eq(pwb_inode_wb_ctx(f.st.inode), 1);
	dirty(&f.st, 15, 1);	/* ctx 0, now the first page */
	ck_assert_int_eq(pwb_inode_wb_ctx(f.st.inode), 0);
	dirty(&f.st, 31, 2);	/* 31: ctx 1, 32: ctx 0 */
	dirty(&f.st, 47, 2);	/* 47: ctx 0, 48: ctx 1 */
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 3);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 3);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	for (i = 0; i < 2; i++)
		ck_assert_uint_eq(ctx_stats(f.bdi, i).written_pages, 3);
	fx_close(&f);
}
END_TEST

/*
 * One holder per page: a page dirtied again while its slice holds it stays
 * there, even when its region now belongs to another context (here after
 * a switch from 64 KiB to 4 KiB regions); pages not held go by the new
 * regions.
 */
START_TEST(test_dirty_page_stays_with_its_holder)
{
	struct fx f;
	uint64_t nr;

	fx_open(&f, 2, "region:bytes=64K", 3, 64);
	dirty(&f.st, 16, 1);	/* region 1: ctx 1 */
	ck_assert_int_eq(pwb_bdi_set_policy(f.bdi, "region:bytes=4K"), 0);
	dirty(&f.st, 16, 2);	/* 16 stays on ctx 1; 17 is odd: ctx 1 */
	dirty(&f.st, 18, 1);	/* even: ctx 0 */
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 1);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 2);
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 3);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).written_pages, 1);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).written_pages, 2);
	fx_close(&f);
}
END_TEST

/* Arguments: bytes= must be a positive multiple of the page size within
 * the device, given once; nothing else is accepted. */
START_TEST(test_bytes_parsing)
{
	static const char *const bad[] = {
		"region:bytes=0",	"region:bytes=1000",
		"region:bytes=abc",	"region:bytes=",
		"region:size=1M",	"region:bytes=1M,bytes=2M",
		"region:bytes=8M",	"region:bytes=-4096",
	};
	char *img = tu_image_create(4 * MIB);
	struct pwb_bdi *bdi;
	unsigned int i;
	char spec[64];

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = open_quiet(img, 2, bad[i], &bdi);

		ck_assert_msg(rc == -EINVAL, "\"%s\" gave %d", bad[i], rc);
		ck_assert_msg(strstr(pwb_errmsg(), "region"),
			      "\"%s\": message \"%s\"", bad[i], pwb_errmsg());
	}
	ck_assert_int_eq(open_quiet(img, 2, "region:bytes=1M", &bdi), 0);
	ck_assert_int_eq(pwb_bdi_policy(bdi, spec, sizeof(spec)), 0);
	ck_assert_str_eq(spec, "region:bytes=1M");
	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "region:bytes=10K"),
			 -EINVAL);
	ck_assert_int_eq(pwb_bdi_set_policy(bdi, "region:bytes=4M"), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	tu_image_remove(img);
}
END_TEST

/*
 * Re-sharding and policy switches with pages on several contexts: 4 -> 2
 * contexts moves slice s to context s % 2 with its dirty pages; a switch
 * to inode-hash leaves the slices' pages where they are and puts new
 * pages on the inode's own context; back to region routes by page again.
 * After each step one pwb_fsync leaves nothing dirty and the device
 * equal to memory.
 */
START_TEST(test_reshard_with_region)
{
	struct fx f;
	struct pwb_stats s;
	uint64_t nr;

	fx_open(&f, 4, "region", 5, 1024);
	dirty(&f.st, 0, 1024);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(f.bdi, 2), 0);
	/* Slices 0 and 2 on context 0, 1 and 3 on context 1. */
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 512);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 512);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_int_eq(pwb_bdi_stats(f.bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	ck_assert_uint_eq(s.written_pages, 1024);
	ck_assert_int_eq(tu_verify_device(f.img, &f.st, 1), 0);

	/* Now 2 contexts: regions of 2 MiB. */
	dirty(&f.st, 500, 24);	/* 500-511 on ctx 0, 512-523 on ctx 1 */
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 12);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 12);
	ck_assert_int_eq(pwb_bdi_set_policy(f.bdi, "inode-hash"), 0);
	dirty(&f.st, 0, 8);	/* the inode itself: 5 % 2 = ctx 1 */
	dirty(&f.st, 510, 4);	/* already held by slices: stay there */
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 12);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 20);
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 32);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_int_eq(tu_verify_device(f.img, &f.st, 1), 0);

	ck_assert_int_eq(pwb_bdi_set_policy(f.bdi, "region:bytes=1M"), 0);
	ck_assert_int_eq(pwb_bdi_set_nr_wb_ctx(f.bdi, 4), 0);
	dirty(&f.st, 0, 1024);
	ck_assert_int_eq(pwb_bdi_stats(f.bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 1024);
	ck_assert_uint_eq(ctx_stats(f.bdi, 3).dirty_pages, 256);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_int_eq(pwb_bdi_stats(f.bdi, &s), 0);
	ck_assert_uint_eq(s.dirty_pages, 0);
	fx_close(&f);
}
END_TEST

/*
 * Errors stay the inode's: a write of one context's region fails, and
 * pwb_fsync of the inode reports it once, although the failing page
 * belonged to a slice; the other contexts' pages are on the device.
 */
START_TEST(test_error_of_one_context_reaches_fsync)
{
	struct pwb_fault fault;
	struct fx f;

	fx_open(&f, 4, "region", 9, 1024);
	ck_assert_int_eq(pwb_fault_parse("eio:every=1,start=2097152,"
					 "end=2101248,max_hits=1",
					 &fault),
			 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(f.bdi, &fault), 0);
	dirty(&f.st, 0, 1024);
	ck_assert_int_eq(pwb_fsync(f.st.inode), -EIO);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);	/* reported once */
	ck_assert_int_eq(pwb_sync(f.bdi), -EIO);	/* and once to pwb_sync */
	fx_close(&f);
}
END_TEST

/*
 * The failed mark is the inode's: after max_write_failures failed visits
 * of the slice writing region 2, pwb_inode_error() and every pwb_fsync()
 * of the inode report it until pwb_inode_clear_error(), which clears the
 * slice's mark too; then the pages are written.
 */
START_TEST(test_failed_slice_marks_the_inode)
{
	struct pwb_fault fault;
	struct fx f;

	g_max_failures = 1;
	fx_open(&f, 4, "region", 9, 1024);
	ck_assert_int_eq(pwb_fault_parse("eio:every=1,start=2097152,"
					 "end=3145728",
					 &fault),
			 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(f.bdi, &fault), 0);
	dirty(&f.st, 0, 1024);
	ck_assert_int_eq(pwb_inode_error(f.st.inode), 0);
	ck_assert_int_eq(pwb_fsync(f.st.inode), -EIO);
	ck_assert_int_eq(pwb_inode_error(f.st.inode), -EIO);
	ck_assert_int_eq(pwb_fsync(f.st.inode), -EIO);
	ck_assert_int_eq(pwb_fault_parse("none", &fault), 0);
	ck_assert_int_eq(pwb_bdi_inject_fault(f.bdi, &fault), 0);
	ck_assert_int_eq(pwb_inode_clear_error(f.st.inode), 0);
	ck_assert_int_eq(pwb_inode_error(f.st.inode), 0);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 2).dirty_pages, 0);
	ck_assert_int_eq(pwb_sync(f.bdi), -EIO);	/* once, bdi-wide */
	fx_close(&f);
}
END_TEST

/* The version page @index of @f's store has on the device (0: never
 * written). */
static uint32_t device_version(struct fx *f, uint64_t index)
{
	static uint64_t buf[PS / 8] __attribute__((aligned(4096)));

	ck_assert_int_eq(tu_read_device(f->img, index * PS, buf, PS), 0);
	return (uint32_t)buf[0];
}

/*
 * The write-ahead rule per slice: with bytes=64K on 2 contexts, page 16
 * (region 1, context 1) dirtied with LSN 10 is held back by its slice's
 * writeback until the log is durable up to 10, while page 0 (context 0,
 * plain) and page 17 (LSN 5, durable) are written; the held page counts
 * on context 1 only, and an fsync that cannot write it says -EBUSY (the
 * slice's integrity error is the inode's). Once the log catches up, the
 * next fsync writes it, from context 1.
 */
START_TEST(test_lsn_held_page_on_its_slice)
{
	struct fx f;
	uint64_t nr;

	fx_open(&f, 2, "region:bytes=64K", 6, 32);
	tu_fill_page(&f.st, 16, 1);
	ck_assert_int_eq(pwb_mark_dirty_lsn(f.st.inode, 16 * PS, PS, 10), 0);
	tu_fill_page(&f.st, 17, 1);
	ck_assert_int_eq(pwb_mark_dirty_lsn(f.st.inode, 17 * PS, PS, 5), 0);
	dirty(&f.st, 0, 1);
	ck_assert_int_eq(pwb_bdi_log_durable(f.bdi, 5), 0);
	ck_assert_int_eq(pwb_bdi_writeback(f.bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_uint_eq(device_version(&f, 0), 1);
	ck_assert_uint_eq(device_version(&f, 17), 1);
	ck_assert_uint_eq(device_version(&f, 16), 0);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 16), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 1);
	ck_assert_uint_ge(ctx_stats(f.bdi, 1).lsn_held_pages, 1);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).lsn_held_pages, 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).written_pages, 1);

	ck_assert_int_eq(pwb_fsync(f.st.inode), -EBUSY);
	ck_assert_uint_eq(device_version(&f, 16), 0);
	ck_assert_int_eq(pwb_bdi_log_durable(f.bdi, 10), 0);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_uint_eq(device_version(&f, 16), 1);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).written_pages, 2);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).written_pages, 1);
	ck_assert_int_eq(pwb_sync(f.bdi), -EBUSY);	/* once, bdi-wide */
	fx_close(&f);
}
END_TEST

/* A get_page that stops a flusher at one page until the test opens the
 * gate, then fails that page with gate_err. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t index;
	bool open, entered;	/* lock */
	int err;
} gate = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.index = UINT64_MAX,
};

static int gated_get_page(struct pwb_inode *inode, uint64_t index,
			  const void **data)
{
	int err = 0;

	if (index == gate.index) {
		pthread_mutex_lock(&gate.lock);
		gate.entered = true;
		pthread_cond_broadcast(&gate.cond);
		while (!gate.open)
			pthread_cond_wait(&gate.cond, &gate.lock);
		err = gate.err;
		pthread_mutex_unlock(&gate.lock);
	}
	return err ? err : tu_ops.get_page(inode, index, data);
}

/* Passes each context ended (PWB_EV_WB_END), for a test that must know
 * its pwb_bdi_writeback() kick is over on a context before it dirties
 * pages there: a flusher may start the kicked pass late on a busy machine
 * and write pages dirtied after the kick. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int ended[2];	/* lock; contexts 0 and 1 */
} passes = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static void count_pass_end(const struct pwb_event *ev, void *arg)
{
	(void)arg;
	if (ev->type != PWB_EV_WB_END || ev->ctx >= 2)
		return;
	pthread_mutex_lock(&passes.lock);
	passes.ended[ev->ctx]++;
	pthread_cond_broadcast(&passes.cond);
	pthread_mutex_unlock(&passes.lock);
}

/* Wait until context @ctx has ended @n passes in all. */
static void wait_passes_ended(unsigned int ctx, unsigned int n)
{
	pthread_mutex_lock(&passes.lock);
	while (passes.ended[ctx] < n)
		pthread_cond_wait(&passes.cond, &passes.lock);
	pthread_mutex_unlock(&passes.lock);
}

struct discarder {
	struct pwb_inode *inode;
	uint64_t off, len;
	int ret;
};

static void *discard_main(void *arg)
{
	struct discarder *d = arg;

	d->ret = pwb_inode_discard(d->inode, d->off, d->len);
	return NULL;
}

/*
 * A discard over pages two slices hold (bytes=64K, 2 contexts): pages
 * 16-23 are in flight on context 1, its flusher stopped at page 20, whose
 * write then fails; pages 8-15 are dirty on context 0. pwb_page_state
 * sees each page in its slice. The discard of 8-23 drops the dirty pages
 * of both slices before it waits, waits for context 1's writes, and
 * leaves nothing: no dirty page or count on either context, no page 8-15
 * ever written, and page 20's failure is nobody's (a discarded page).
 * The pages can be dirtied again and are written as usual.
 */
/* Spin until a pwb_inode_discard() running on @inode has claimed the
 * holder (the inode or a slice) where page @index is being written. */
static void wait_discard_claims(struct pwb_inode *inode, uint64_t index)
{
	struct pwb_inode *h[1 + PWB_MAX_WB_CTX];
	unsigned int i, nr;
	bool all;

	do {
		all = true;
		rcu_read_lock();
		nr = pwb__region_holders_rcu(inode, h);
		for (i = 0; i < nr; i++) {
			pthread_mutex_lock(&h[i]->lock);
			if (pwb__map_test(&h[i]->map, PWB__TAG_WRITEBACK,
					  index))
				all = all && h[i]->discarding;
			pthread_mutex_unlock(&h[i]->lock);
		}
		rcu_read_unlock();
		if (!all)
			sched_yield();
	} while (!all);
}

START_TEST(test_discard_and_page_state_across_slices)
{
	struct pwb_bdi_config cfg;
	struct pwb_inode_ops ops = tu_ops;
	struct discarder d = { 0 };
	pthread_t t;
	struct fx f;
	uint64_t nr;

	f.img = tu_image_create(4 * MIB);
	/* open_quiet(), with the passes counted. */
	tu_config_quiet(&cfg, 2, NULL, NULL);
	cfg.policy = "region:bytes=64K";
	cfg.page_size = PS;
	cfg.dirty_expire_ms = 3600000;
	cfg.event = count_pass_end;
	ck_assert_int_eq(pwb_bdi_open(f.img, &cfg, &f.bdi), 0);
	tu_store_init(&f.st, 8, PS, 32, 0);
	ops.get_page = gated_get_page;
	ck_assert_int_eq(pwb_inode_open(f.bdi, 8, &ops, &f.st, &f.st.inode),
			 0);

	dirty(&f.st, 16, 8);
	gate.index = 20;
	gate.err = -EIO;
	ck_assert_int_eq(pwb_bdi_writeback(f.bdi, PWB_WB_ALL, 0), 0);
	pthread_mutex_lock(&gate.lock);
	while (!gate.entered)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
	/* The kick queued a pass on context 0 too, with nothing to write
	 * yet: let it end, or it may write pages 8-15 dirtied below. */
	wait_passes_ended(0, 1);
	dirty(&f.st, 8, 8);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 8), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 15), PWB_PAGE_DIRTY);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 20), PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 23), PWB_PAGE_WRITEBACK);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 24), 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 8);

	d.inode = f.st.inode;
	d.off = 8 * PS;
	d.len = 16 * PS;
	ck_assert_int_eq(pthread_create(&t, NULL, discard_main, &d), 0);
	/* Both slices' dirty pages go before it waits for context 1. */
	do {
		ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	} while (nr);
	/* The gate opens only once the discard covers the holder of page
	 * 20 (the dirty pages can be gone while it has yet to claim it: a
	 * failure then is an error of the inode, not of a discarded page). */
	wait_discard_claims(f.st.inode, 20);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 0);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 8), 0);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 20), PWB_PAGE_WRITEBACK);
	pthread_mutex_lock(&gate.lock);
	gate.open = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(d.ret, 0);

	ck_assert_int_eq(pwb_page_state(f.st.inode, 15), 0);
	ck_assert_int_eq(pwb_page_state(f.st.inode, 20), 0);
	ck_assert_int_eq(pwb_inode_dirty_pages(f.st.inode, &nr), 0);
	ck_assert_uint_eq(nr, 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).dirty_pages, 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 1).dirty_pages, 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).written_pages, 0);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_int_eq(pwb_inode_error(f.st.inode), 0);
	ck_assert_uint_eq(device_version(&f, 8), 0);

	gate.index = UINT64_MAX;
	dirty(&f.st, 8, 16);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	ck_assert_uint_eq(ctx_stats(f.bdi, 0).written_pages, 8);
	fx_close(&f);
}
END_TEST

/* A plugin-style per-page policy: page index modulo the contexts. */
static int parity_select(void *state, const struct pwb_policy_inode *info,
			 unsigned int nr)
{
	(void)state;
	return (int)(info->index % nr);
}

static const struct pwb_policy_ops parity_ops = {
	.abi_version = 3,
	.name = "page-parity",
	.select = parity_select,
	.flags = PWB_POLICY_F_PER_PAGE,
	.select_page = parity_select,
};

/*
 * The policy ABI: a registered ABI 3 table with PWB_POLICY_F_PER_PAGE
 * spreads one inode's pages as its select_page says; the flag is refused
 * in an ABI 2 table (which has no select_page), without select_page, and
 * together with a shared list.
 */
START_TEST(test_registered_per_page_policy)
{
	struct pwb_policy_ops bad = parity_ops;
	struct fx f;
	unsigned int i;

	bad.name = "bad-per-page";
	bad.abi_version = 2;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad.abi_version = 3;
	bad.select_page = NULL;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	bad.select_page = parity_select;
	bad.flags |= PWB_POLICY_F_SHARED_LIST;
	ck_assert_int_eq(pwb_policy_register(&bad), -EINVAL);
	ck_assert_int_eq(pwb_policy_register(&parity_ops), 0);

	fx_open(&f, 2, "page-parity", 4, 16);
	dirty(&f.st, 0, 10);
	for (i = 0; i < 2; i++)
		ck_assert_uint_eq(ctx_stats(f.bdi, i).dirty_pages, 5);
	ck_assert_int_eq(pwb_fsync(f.st.inode), 0);
	for (i = 0; i < 2; i++)
		ck_assert_uint_eq(ctx_stats(f.bdi, i).written_pages, 5);
	fx_close(&f);
}
END_TEST

static Suite *region_suite(void)
{
	Suite *s = suite_create("region");
	TCase *tc = tcase_create("region");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_one_inode_written_by_every_context);
	tcase_add_test(tc, test_region_boundaries);
	tcase_add_test(tc, test_dirty_page_stays_with_its_holder);
	tcase_add_test(tc, test_bytes_parsing);
	tcase_add_test(tc, test_reshard_with_region);
	tcase_add_test(tc, test_error_of_one_context_reaches_fsync);
	tcase_add_test(tc, test_failed_slice_marks_the_inode);
	tcase_add_test(tc, test_registered_per_page_policy);
	tcase_add_test(tc, test_lsn_held_page_on_its_slice);
	tcase_add_test(tc, test_discard_and_page_state_across_slices);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(region_suite(), true);
}
