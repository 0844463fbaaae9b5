// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_domain_cache.c - one page-cache budget for the bdis of a memory
 * domain (struct pwb_domain_config.cache_bytes; lib/pcache-domain.c)
 *
 * Every bdi writes and reads library-owned pages (pwb_write, pwb_read) of
 * one inode on an image of its own, in a domain whose budget is 4 MiB
 * (1024 pages). Without a background threshold and without periodic
 * writeback, a page is clean only once the test syncs it, so which pages
 * reclaim may take is the test's to say. White-box: the budget's count
 * (dom->pcache->used) and each cache's count (bdi->pcache->nr_pages) are
 * read directly. The domain's clock is the test's: it orders the members
 * by their last charge. The bdis' clock is the real one, so that a writer
 * that never gets room fails with -ETIMEDOUT after throttle_timeout_ms
 * instead of hanging.
 */
#include "pwb-internal.h"
#include "pcache.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PS 4096u
#define MIB (1ull << 20)
#define BUDGET (4 * MIB)
#define BUDGET_PAGES (BUDGET / PS)
#define IMG_PAGES 4096u

static struct tu_clock clk;

/* A bdi of the domain on an image of its own, one library-owned inode
 * over the image, and what the test wrote to it. */
struct mem {
	char *img;
	struct pwb_bdi *bdi;
	struct pwb_inode *inode;
	unsigned char *ref;	/* IMG_PAGES * PS: the expected content */
};

static struct pwb_domain *domain(uint64_t cache, uint64_t bg)
{
	struct pwb_domain_config dc;
	struct pwb_domain *dom;

	pwb_domain_config_init(&dc);
	dc.dirty_bytes = 0;		/* no throttling */
	dc.dirty_background_bytes = bg;
	dc.cache_bytes = cache;
	dc.clock = tu_clock_read;
	dc.clock_arg = &clk;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), 0);
	return dom;
}

static void mem_cfg(struct pwb_bdi_config *cfg, struct pwb_domain *dom)
{
	pwb_bdi_config_init(cfg);
	cfg->nr_wb_ctx = 1;
	cfg->backend = "psync";
	cfg->domain = dom;
	cfg->dirty_writeback_ms = 0;	/* no periodic writeback */
	cfg->readahead_bytes = 0;	/* reads charge what they read */
	cfg->throttle_timeout_ms = 5000;
}

/* Open a member with pwb_bdi_config.flags @flags. */
static void mem_open_flags(struct mem *m, struct pwb_domain *dom,
			   uint64_t ino, unsigned int flags)
{
	struct pwb_bdi_config cfg;

	memset(m, 0, sizeof(*m));
	mem_cfg(&cfg, dom);
	cfg.flags |= flags;
	m->img = tu_image_create((uint64_t)IMG_PAGES * PS);
	ck_assert_int_eq(pwb_bdi_open(m->img, &cfg, &m->bdi), 0);
	ck_assert_int_eq(pwb_inode_open(m->bdi, ino, &tu_ident_ops,
					tu_ident_pages(IMG_PAGES), &m->inode),
			 0);
	m->ref = calloc(IMG_PAGES, PS);
	ck_assert_ptr_nonnull(m->ref);
}

static void mem_open(struct mem *m, struct pwb_domain *dom, uint64_t ino)
{
	mem_open_flags(m, dom, ino, 0);
}

static void mem_close(struct mem *m)
{
	ck_assert_int_eq(pwb_inode_close(m->inode), 0);
	ck_assert_int_eq(pwb_bdi_close(m->bdi), 0);
	tu_image_remove(m->img);
	free(m->ref);
}

static uint64_t cached(const struct mem *m)
{
	return pwb__aread(&m->bdi->pcache->nr_pages);
}

static uint64_t dirty(const struct mem *m)
{
	uint64_t nr;

	ck_assert_int_eq(pwb_inode_dirty_pages(m->inode, &nr), 0);
	return nr;
}

static uint64_t used(struct pwb_domain *dom)
{
	return pwb__aread(&dom->pcache->used);
}

/* Write pages [first, first + n) of @m, 64 at a time, with fresh
 * content; after each call the members' caches together hold no more
 * than the budget. */
static void mem_write(struct mem *m, struct pwb_domain *dom,
		      struct mem *const *all, unsigned int nr_all,
		      uint64_t first, uint64_t n, uint64_t seed)
{
	uint64_t p, i;

	for (p = first; p < first + n; p += 64) {
		uint64_t len = TU_MIN(64, first + n - p) * PS, sum = 0;
		unsigned char *b = m->ref + p * PS;

		for (i = 0; i < len; i++)
			b[i] = (unsigned char)tu_rand(&seed);
		ck_assert_int_eq(pwb_write(m->inode, b, len, p * PS),
				 (ssize_t)len);
		for (i = 0; i < nr_all; i++)
			sum += cached(all[i]);
		ck_assert_uint_le(sum * PS, BUDGET);
		ck_assert_uint_le(used(dom), BUDGET);
	}
}

/* Read every page [0, n) of @m back and compare. */
static void mem_verify(struct mem *m, uint64_t n)
{
	unsigned char *buf = malloc(64 * PS);
	uint64_t p;

	ck_assert_ptr_nonnull(buf);
	for (p = 0; p < n; p += 64) {
		uint64_t len = TU_MIN(64, n - p) * PS;

		ck_assert_int_eq(pwb_read(m->inode, buf, len, p * PS),
				 (ssize_t)len);
		ck_assert_int_eq(memcmp(buf, m->ref + p * PS, len), 0);
	}
	free(buf);
}

static void mem_sync(struct mem *m)
{
	ck_assert_int_eq(pwb_sync(m->bdi), 0);
	ck_assert_uint_eq(dirty(m), 0);
}

/* ---------------------------------------------------------------------- */

START_TEST(budget_bad_values)
{
	struct pwb_domain_config dc;
	struct pwb_bdi_config cfg;
	struct pwb_domain *dom;
	struct pwb_bdi *bdi;
	char *img;

	/* No longer refused as unsupported; too small is refused. */
	pwb_domain_config_init(&dc);
	ck_assert_uint_eq(dc.cache_bytes, 0);
	dc.cache_bytes = 64 * 1024;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "cache_bytes 65536 is "
						   "below 1 MiB"));
	/* The background threshold is kept at half the budget. */
	dc.cache_bytes = BUDGET;
	dc.dirty_background_bytes = 64 * MIB;
	ck_assert_int_eq(pwb_domain_create(&dc, &dom), 0);
	ck_assert_uint_eq(dom->cfg.dirty_background_bytes, BUDGET / 2);

	img = tu_image_create(64 * MIB);
	/* A bdi's own cache above the budget. */
	mem_cfg(&cfg, dom);
	cfg.cache_bytes = 2 * BUDGET;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "cache_bytes 8388608 is "
						   "above the domain's "
						   "cache_bytes 4194304"));
	/* A budget of fewer than 16 of the bdi's pages. */
	mem_cfg(&cfg, dom);
	cfg.page_size = 512 * 1024;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), -EINVAL);
	ck_assert_ptr_nonnull(strstr(pwb_errmsg(), "fewer than 16 pages of "
						   "524288 bytes"));
	/* A smaller own cache is a bound within the budget. */
	mem_cfg(&cfg, dom);
	cfg.cache_bytes = BUDGET / 4;
	ck_assert_int_eq(pwb_bdi_open(img, &cfg, &bdi), 0);
	ck_assert_uint_eq(bdi->pcache->limit_pages, BUDGET_PAGES / 4);
	ck_assert_ptr_eq(bdi->pcache->dom, dom->pcache);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	/* The last member gone, so is the budget's state. */
	ck_assert_ptr_null(dom->pcache);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
	tu_image_remove(img);
}
END_TEST

/* One bdi alone in the domain may fill the whole budget, and then makes
 * room from its own clean pages. */
START_TEST(alone_uses_the_whole_budget)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct mem a;
	struct mem *all[] = { &a };

	mem_open(&a, dom, 1);
	ck_assert_uint_eq(a.bdi->pcache->limit_pages, BUDGET_PAGES);
	mem_write(&a, dom, all, 1, 0, BUDGET_PAGES, 1);
	ck_assert_uint_eq(cached(&a), BUDGET_PAGES);
	ck_assert_uint_eq(used(dom), BUDGET);
	mem_sync(&a);
	mem_write(&a, dom, all, 1, BUDGET_PAGES, BUDGET_PAGES / 2, 2);
	mem_sync(&a);
	mem_verify(&a, BUDGET_PAGES * 3 / 2);
	mem_close(&a);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/* PWB_BDI_CACHE_PREFAULT in a domain with a cache budget fills the
 * members' shared buffers to the budget once: a second member with the
 * flag maps nothing more, and both use the memory the first faulted in. */
START_TEST(prefault_fills_the_shared_pool_once)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct mem a, b;
	struct mem *all[] = { &a, &b };
	struct pwb__page_pool *pool;
	size_t chunks;

	mem_open_flags(&a, dom, 1, PWB_BDI_CACHE_PREFAULT);
	pool = a.bdi->pcache->pool;
	chunks = pool->nr_chunks;
	ck_assert_uint_eq(chunks, BUDGET / pool->chunk_bytes);
	mem_open_flags(&b, dom, 2, PWB_BDI_CACHE_PREFAULT);
	ck_assert_ptr_eq(b.bdi->pcache->pool, pool);
	ck_assert_uint_eq(pool->nr_chunks, chunks);
	mem_write(&a, dom, all, 2, 0, BUDGET_PAGES / 2, 1);
	mem_write(&b, dom, all, 2, 0, BUDGET_PAGES / 2, 2);
	mem_sync(&a);
	mem_sync(&b);
	mem_verify(&a, BUDGET_PAGES / 2);
	mem_verify(&b, BUDGET_PAGES / 2);
	mem_close(&a);
	mem_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/* Pages a PWB_RW_DONTCACHE write dropped once written give their room
 * back to the budget, not only to their own cache. */
START_TEST(dontcache_drop_uncharges_the_budget)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct mem a;
	unsigned char *b;
	uint64_t i, seed = 7;

	mem_open(&a, dom, 1);
	b = a.ref;
	for (i = 0; i < 256 * PS; i++)
		b[i] = (unsigned char)tu_rand(&seed);
	ck_assert_int_eq(pwb_write2(a.inode, b, 256 * PS, 0,
				    PWB_RW_DONTCACHE | PWB_RW_SYNC),
			 (ssize_t)(256 * PS));
	mem_sync(&a);
	/* Written back clean: dropped (none kept by reclaim either, far
	 * below the watermarks). */
	ck_assert_uint_lt(cached(&a), 256);
	ck_assert_uint_eq(used(dom), cached(&a) * PS);
	mem_verify(&a, 256);
	ck_assert_uint_eq(used(dom), cached(&a) * PS);
	mem_close(&a);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/*
 * A fills the budget: 768 clean pages and 256 dirty ones. B's writes,
 * then B's reads, take their room from A's clean pages; A's dirty pages
 * all stay cached and reach A's device intact.
 */
START_TEST(second_bdi_takes_room_from_the_first)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct mem a, b;
	struct mem *all[] = { &a, &b };
	unsigned char *buf = malloc(64 * PS);

	ck_assert_ptr_nonnull(buf);
	clk.now = 1000 * PWB__NSEC_PER_MSEC;
	mem_open(&a, dom, 1);
	mem_open(&b, dom, 2);
	/* B's file 1280 pages long, for the reads below. */
	mem_write(&b, dom, all, 2, 1279, 1, 4);
	mem_sync(&b);
	tu_clock_advance_ms(&clk, 10);
	mem_write(&a, dom, all, 2, 0, 768, 1);
	mem_sync(&a);
	mem_write(&a, dom, all, 2, 768, 256, 2);
	/* B's page went first; then, above the high watermark, the
	 * flusher's reclaim took some of A's clean pages (down to 7/8). */
	ck_assert_uint_eq(cached(&b), 0);
	ck_assert_uint_ge(cached(&a), 768);
	ck_assert_uint_eq(dirty(&a), 256);

	tu_clock_advance_ms(&clk, 10);
	mem_write(&b, dom, all, 2, 0, 512, 3);
	ck_assert_uint_eq(cached(&b), 512);
	ck_assert_uint_eq(dirty(&a), 256);
	ck_assert_uint_le(cached(&a), BUDGET_PAGES - 512);
	ck_assert_uint_ge(cached(&a), 256);

	/* Reads of pages B's cache does not hold take room too. */
	for (uint64_t p = 1024; p < 1024 + 256; p += 64) {
		ck_assert_int_eq(pwb_read(b.inode, buf, 64 * PS, p * PS),
				 64 * PS);
		ck_assert_uint_le((cached(&a) + cached(&b)) * PS, BUDGET);
	}
	/* Nothing of A's left but its dirty pages. */
	ck_assert_uint_eq(cached(&a), 256);
	ck_assert_uint_eq(dirty(&a), 256);

	mem_sync(&a);
	mem_sync(&b);
	mem_verify(&a, 1024);
	mem_verify(&b, 512);
	mem_close(&a);
	mem_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
	free(buf);
}
END_TEST

/* A cached first, B after it, both clean: C's room comes from A, the
 * member that charged least recently, and B keeps all of its pages. */
/*
 * The background reclaimer keeps the budget's free room above its
 * watermarks, not only its own cache's: A and B have 768-page caches of
 * their own in the 1024-page budget. B caches 600 clean pages, A dirties
 * 340: A's cache is far from full, the budget is 84 pages from full
 * (below the low watermark of 128, below the flushers' 15/16 too), and
 * nobody needed room yet. A's reclaimer frees B's clean pages (up to
 * 192 free pages of the budget).
 */
START_TEST(background_reclaim_keeps_budget_room)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct pwb_bdi_config cfg;
	struct mem a, b;
	struct mem *all[] = { &a, &b };
	struct mem *m[] = { &a, &b };
	struct timespec t0, t;
	unsigned int i;

	clk.now = 1000 * PWB__NSEC_PER_MSEC;
	for (i = 0; i < 2; i++) {
		memset(m[i], 0, sizeof(*m[i]));
		mem_cfg(&cfg, dom);
		cfg.cache_bytes = 768 * PS;
		m[i]->img = tu_image_create((uint64_t)IMG_PAGES * PS);
		ck_assert_int_eq(pwb_bdi_open(m[i]->img, &cfg, &m[i]->bdi), 0);
		ck_assert_int_eq(pwb_inode_open(m[i]->bdi, i + 1, &tu_ident_ops,
						tu_ident_pages(IMG_PAGES),
						&m[i]->inode),
				 0);
		m[i]->ref = calloc(IMG_PAGES, PS);
		ck_assert_ptr_nonnull(m[i]->ref);
		ck_assert_uint_eq(m[i]->bdi->pcache->limit_pages, 768);
	}
	mem_write(&b, dom, all, 2, 0, 600, 1);
	mem_sync(&b);
	ck_assert_uint_eq(cached(&b), 600);
	tu_clock_advance_ms(&clk, 10);
	mem_write(&a, dom, all, 2, 0, 340, 2);
	/* The reclaimer runs on its own thread: wait until it freed pages
	 * and went back to sleep, at most 20 s of real time (a busy
	 * machine). It may have started while A still wrote, and then
	 * stopped at 192 free pages with A charging more after: what is
	 * sure is that the budget is not left where A's writes put it. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (used(dom) >= 940 * PS ||
	       pwb__aread(&a.bdi->pcache->kswapd_busy) ||
	       pwb__aread(&a.bdi->pcache->kswapd_kick)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
		usleep(1000);
	}
	ck_assert_uint_lt(used(dom), 940 * PS);
	ck_assert_uint_gt(pwb__aread(&a.bdi->pcache->kswapd_reclaims), 0);
	ck_assert_uint_eq(cached(&a), 340);
	ck_assert_uint_eq(dirty(&a), 340);
	ck_assert_uint_lt(cached(&b), 600);
	/* Not much further than the high watermark. */
	ck_assert_uint_ge(cached(&b), 600 - 108 - 64);
	ck_assert_uint_eq(used(dom), (cached(&a) + cached(&b)) * PS);

	mem_sync(&a);
	mem_verify(&a, 340);
	mem_verify(&b, 600);
	mem_close(&a);
	mem_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

START_TEST(least_recently_charged_member_gives_first)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct mem a, b, c;
	struct mem *all[] = { &a, &b, &c };

	clk.now = 1000 * PWB__NSEC_PER_MSEC;
	mem_open(&a, dom, 1);
	mem_open(&b, dom, 2);
	mem_open(&c, dom, 3);
	mem_write(&a, dom, all, 3, 0, 512, 1);
	mem_sync(&a);
	tu_clock_advance_ms(&clk, 10);
	mem_write(&b, dom, all, 3, 0, 512, 2);
	mem_sync(&b);
	tu_clock_advance_ms(&clk, 10);
	mem_write(&c, dom, all, 3, 0, 256, 3);
	ck_assert_uint_eq(cached(&c), 256);
	ck_assert_uint_eq(cached(&b), 512);
	ck_assert_uint_le(cached(&a), 256);

	mem_sync(&c);
	mem_verify(&a, 512);
	mem_verify(&b, 512);
	mem_verify(&c, 256);
	mem_close(&a);
	mem_close(&b);
	mem_close(&c);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

struct one_write {
	struct mem *m;
	ssize_t ret;
	int done;			/* atomic */
};

static void *one_write_fn(void *arg)
{
	struct one_write *w = arg;

	memset(w->m->ref, 0x5a, PS);
	w->ret = pwb_write(w->m->inode, w->m->ref, PS, 0);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * The budget full of A's dirty pages: B's writer waits for room, on the
 * domain's room. A's writeback (the test's sync) is what makes room, and
 * A's events reach the domain's room, which wakes B.
 */
START_TEST(waiter_woken_by_another_member)
{
	struct pwb_domain *dom = domain(BUDGET, 0);
	struct pwb__pcache_room *room;
	struct one_write w = { 0 };
	struct mem a, b;
	struct mem *all[] = { &a, &b };
	uint64_t seq;
	pthread_t t;
	int i;

	mem_open(&a, dom, 1);
	mem_open(&b, dom, 2);
	room = &dom->pcache->room;
	ck_assert_ptr_eq(a.bdi->pcache->room, room);
	ck_assert_ptr_eq(b.bdi->pcache->room, room);
	mem_write(&a, dom, all, 2, 0, BUDGET_PAGES, 1);
	ck_assert_uint_eq(dirty(&a), BUDGET_PAGES);

	w.m = &b;
	ck_assert_int_eq(pthread_create(&t, NULL, one_write_fn, &w), 0);
	for (i = 0; i < 4000 && !pwb__aread(&room->waiters); i++)
		nap_ms(1);
	ck_assert_uint_ge(pwb__aread(&room->waiters), 1);
	ck_assert(!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));
	seq = pwb__aread(&room->seq);
	mem_sync(&a);
	/* A's writes ended: the domain's room heard of them. */
	ck_assert_uint_gt(pwb__aread(&room->seq), seq);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.ret, PS);
	ck_assert_uint_eq(cached(&b), 1);

	mem_sync(&b);
	mem_verify(&a, BUDGET_PAGES);
	mem_verify(&b, 1);
	mem_close(&a);
	mem_close(&b);
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

/* ---------------------------------------------------------------------- */

struct writer {
	struct mem *m;
	uint64_t pages, seed;
	int err;
	int done;			/* atomic */
};

/* Write @pages pages, 16 at a time, twice over (the second round
 * rewrites pages that may have left the cache). */
static void *writer_fn(void *arg)
{
	struct writer *w = arg;

	for (int round = 0; round < 2 && !w->err; round++)
		for (uint64_t p = 0; p < w->pages && !w->err; p += 16) {
			unsigned char *b = w->m->ref + p * PS;
			ssize_t r;

			for (size_t i = 0; i < 16 * PS; i++)
				b[i] = (unsigned char)tu_rand(&w->seed);
			r = pwb_write(w->m->inode, b, 16 * PS, p * PS);
			if (r != 16 * PS)
				w->err = r < 0 ? (int)-r : EIO;
		}
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Two bdis write twice the budget each at once, with background
 * writeback (at half the budget): the members' caches together never
 * hold more than the budget, sampled all along.
 */
START_TEST(budget_holds_under_concurrent_writers)
{
	struct pwb_domain *dom = domain(BUDGET, BUDGET / 2);
	struct writer w[2];
	struct mem m[2];
	pthread_t t[2];
	uint64_t max_used = 0, max_sum = 0, samples = 0;
	int i;

	for (i = 0; i < 2; i++) {
		mem_open(&m[i], dom, (uint64_t)i + 1);
		w[i] = (struct writer){ .m = &m[i], .pages = 2 * BUDGET_PAGES,
					.seed = (uint64_t)i + 7 };
	}
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, writer_fn, &w[i]),
				 0);
	while (!__atomic_load_n(&w[0].done, __ATOMIC_ACQUIRE) ||
	       !__atomic_load_n(&w[1].done, __ATOMIC_ACQUIRE)) {
		uint64_t u = used(dom), s = cached(&m[0]) + cached(&m[1]);

		max_used = u > max_used ? u : max_used;
		max_sum = s > max_sum ? s : max_sum;
		samples++;
		sched_yield();
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(w[i].err, 0);
	}
	ck_assert_uint_gt(samples, 0);
	ck_assert_uint_le(max_used, BUDGET);
	ck_assert_uint_le(max_sum * PS, BUDGET);
	/* The budget was used, not just respected. */
	ck_assert_uint_ge(max_sum, BUDGET_PAGES / 2);
	for (i = 0; i < 2; i++) {
		mem_sync(&m[i]);
		mem_verify(&m[i], 2 * BUDGET_PAGES);
		mem_close(&m[i]);
	}
	ck_assert_int_eq(pwb_domain_destroy(dom), 0);
}
END_TEST

static Suite *domain_cache_suite(void)
{
	Suite *s = suite_create("domain_cache");
	TCase *tc = tcase_create("budget");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, budget_bad_values);
	tcase_add_test(tc, alone_uses_the_whole_budget);
	tcase_add_test(tc, prefault_fills_the_shared_pool_once);
	tcase_add_test(tc, dontcache_drop_uncharges_the_budget);
	tcase_add_test(tc, second_bdi_takes_room_from_the_first);
	tcase_add_test(tc, least_recently_charged_member_gives_first);
	tcase_add_test(tc, background_reclaim_keeps_budget_room);
	tcase_add_test(tc, waiter_woken_by_another_member);
	tcase_add_test(tc, budget_holds_under_concurrent_writers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(domain_cache_suite(), true);
}
