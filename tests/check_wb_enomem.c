// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_wb_enomem.c - pwb_bdi_writeback() reports a failed allocation
 *
 * The program replaces malloc() and calloc() with versions that fail the
 * Nth allocation of the calling thread once armed (the flushers and Check
 * are never armed). For every N up to a bound, a non-waiting
 * pwb_bdi_writeback() runs with the Nth allocation failing: whenever the
 * failure fired inside the call it must return -ENOMEM (it used to return
 * 0 with some contexts never asked), and the bdi must stay usable. Exit 77
 * under AddressSanitizer or ThreadSanitizer, whose allocators cannot be
 * replaced this way.
 */
#define _GNU_SOURCE
#include "pwb.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t nmemb, size_t n);

/* -1: not armed; else allocations of this thread left before one fails. */
static __thread long fail_after = -1;
static __thread int failed;

static int fail_now(void)
{
	if (fail_after < 0)
		return 0;
	if (fail_after-- > 0)
		return 0;
	failed = 1;
	return 1;
}

void *malloc(size_t n)
{
	return fail_now() ? NULL : __libc_malloc(n);
}

void *calloc(size_t nmemb, size_t n)
{
	return fail_now() ? NULL : __libc_calloc(nmemb, n);
}
#endif

#if !SANITIZED
START_TEST(writeback_reports_enomem)
{
	char *image = tu_image_create(8ull << 20);
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	struct tu_store st;
	int ret, fired = 0;
	long n;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 4;
	cfg.backend = "psync";
	cfg.dirty_writeback_ms = 0;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), 0);
	tu_store_init(&st, 1, 4096, 16, 0);
	ck_assert_int_eq(tu_store_open(&st, bdi), 0);
	for (n = 0; n < 16; n++) {
		tu_fill_page(&st, 0, (uint32_t)n + 1);
		ck_assert_int_eq(pwb_mark_dirty(st.inode, 0, 4096), 0);
		failed = 0;
		fail_after = n;
		ret = pwb_bdi_writeback(bdi, PWB_WB_ALL, 0);
		fail_after = -1;
		if (failed) {
			fired++;
			ck_assert_msg(ret == -ENOMEM,
				      "allocation %ld failed, returned %d", n,
				      ret);
		} else {
			ck_assert_int_eq(ret, 0);
		}
	}
	ck_assert_msg(fired > 0, "no allocation of pwb_bdi_writeback failed");
	/* Still usable: everything reaches the device. */
	ck_assert_int_eq(pwb_bdi_writeback(bdi, PWB_WB_ALL, PWB_WB_WAIT), 0);
	ck_assert_int_eq(pwb_sync(bdi), 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	{
		struct tu_store *stores[] = {&st};

		ck_assert_int_eq(tu_verify_stores(image, stores, 1), 0);
	}
	tu_store_destroy(&st);
	tu_image_remove(image);
}
END_TEST
#endif

int main(void)
{
#if SANITIZED
	printf("SKIP: built with a sanitizer whose allocator this test cannot "
	       "replace\n");
	return 77;
#else
	Suite *s = suite_create("wb_enomem");
	TCase *tc = tcase_create("writeback");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, writeback_reports_enomem);
	suite_add_tcase(s, tc);
	return tu_run_suite(s, true);
#endif
}
