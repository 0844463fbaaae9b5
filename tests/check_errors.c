// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_errors.c - error reporting: pwb_strerror, pwb_errmsg, errseq
 *
 * White-box: links libpwb-internal.la to reach pwb__err*, pwb__errseq_*.
 *
 * Worker threads never call ck_assert: they record what they saw into a
 * struct, the main thread joins them and asserts.
 */
#define _GNU_SOURCE
#include "pwb-internal.h"
#include "test-util.h"

#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_MAX 512

/* Copy at most MSG_MAX - 1 bytes of @s into @dst. */
static void copy_msg(char *dst, const char *s)
{
	if (!s) {
		strcpy(dst, "(NULL)");
		return;
	}
	snprintf(dst, MSG_MAX, "%s", s);
}

/* ------------------------------------------------------------------ */
/* pwb_strerror                                                        */

/* Errnos the library documents as return values. */
static const int known_errnos[] = {
	EINVAL, ENOENT, ENOTBLK, ENOMEM, EEXIST,  ESHUTDOWN, EDEADLK,
	EBADF,	EIO,	ENOSPC,	 ERANGE, ENODATA, EOVERFLOW,
};
#define NR_KNOWN (sizeof(known_errnos) / sizeof(known_errnos[0]))

START_TEST(strerror_of_zero_is_nonempty_text)
{
	const char *s = pwb_strerror(0);

	ck_assert_ptr_nonnull(s);
	ck_assert_msg(s[0] != '\0', "pwb_strerror(0) is empty");
}
END_TEST

START_TEST(strerror_of_known_errnos_is_distinct_text)
{
	unsigned int i, j;

	for (i = 0; i < NR_KNOWN; i++) {
		const char *s = pwb_strerror(-known_errnos[i]);

		ck_assert_msg(s != NULL, "pwb_strerror(-%d) is NULL",
			      known_errnos[i]);
		ck_assert_msg(s[0] != '\0', "pwb_strerror(-%d) is empty",
			      known_errnos[i]);
		ck_assert_msg(strcmp(s, pwb_strerror(0)) != 0,
			      "pwb_strerror(-%d) reads like success: \"%s\"",
			      known_errnos[i], s);
		ck_assert_msg(strcmp(s, pwb_strerror(-100000)) != 0,
			      "pwb_strerror(-%d) is the unknown-error text "
			      "\"%s\"",
			      known_errnos[i], s);
	}
	/* Different errors, different texts (no catch-all text). */
	for (i = 0; i < NR_KNOWN; i++)
		for (j = i + 1; j < NR_KNOWN; j++) {
			char a[MSG_MAX];

			copy_msg(a, pwb_strerror(-known_errnos[i]));
			ck_assert_msg(strcmp(a, pwb_strerror(-known_errnos[j])),
				      "-%d and -%d share the text \"%s\"",
				      known_errnos[i], known_errnos[j], a);
		}
}
END_TEST

/* Negative values that are no errno, and positive values. */
static const int odd_values[] = {
	-300, -4095, -4096, -100000, INT_MIN, 1, EINVAL, 4096, INT_MAX,
};
#define NR_ODD (sizeof(odd_values) / sizeof(odd_values[0]))

START_TEST(strerror_of_unknown_or_positive_is_generic_text)
{
	unsigned int i, k;

	for (i = 0; i < NR_ODD; i++) {
		const char *s = pwb_strerror(odd_values[i]);

		ck_assert_msg(s != NULL, "pwb_strerror(%d) is NULL",
			      odd_values[i]);
		ck_assert_msg(s[0] != '\0', "pwb_strerror(%d) is empty",
			      odd_values[i]);
		/* Not mistaken for a real error's or success's text. */
		for (k = 0; k < NR_KNOWN; k++)
			ck_assert_msg(strcmp(s, strerror(known_errnos[k])),
				      "pwb_strerror(%d) = \"%s\", the text of "
				      "-%d",
				      odd_values[i], s, known_errnos[k]);
	}
}
END_TEST

/*
 * pwb.h: "Return: a static string". The text must not change when the same
 * thread asks about another value (strerror()'s per-thread buffer for unknown
 * numbers would), nor vanish when the thread that asked exits.
 */
static const int stable_values[] = {-EIO, -ENOSPC, -300, -301, -4095, 5, 0};
#define NR_STABLE (sizeof(stable_values) / sizeof(stable_values[0]))

START_TEST(strerror_text_stays_valid_after_other_calls)
{
	const char *p[NR_STABLE];
	char copy[NR_STABLE][MSG_MAX];
	unsigned int i;

	for (i = 0; i < NR_STABLE; i++) {
		p[i] = pwb_strerror(stable_values[i]);
		copy_msg(copy[i], p[i]);
	}
	/* Ask again about everything, in another order, and about more. */
	for (i = NR_STABLE; i-- > 0;)
		(void)pwb_strerror(stable_values[i] - 7);
	for (i = 0; i < NR_STABLE; i++)
		ck_assert_msg(strcmp(p[i], copy[i]) == 0,
			      "pwb_strerror(%d) text changed from \"%s\" to "
			      "\"%s\" after other calls",
			      stable_values[i], copy[i], p[i]);
}
END_TEST

struct strerror_thread {
	const char *p[NR_STABLE];
	char copy[NR_STABLE][MSG_MAX];
};

static void *strerror_thread_fn(void *arg)
{
	struct strerror_thread *t = arg;
	unsigned int i;

	for (i = 0; i < NR_STABLE; i++) {
		t->p[i] = pwb_strerror(stable_values[i]);
		copy_msg(t->copy[i], t->p[i]);
	}
	return NULL;
}

START_TEST(strerror_text_outlives_the_calling_thread)
{
	struct strerror_thread t;
	pthread_t th;
	unsigned int i;

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(pthread_create(&th, NULL, strerror_thread_fn, &t), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	for (i = 0; i < NR_STABLE; i++)
		ck_assert_msg(t.p[i] && strcmp(t.p[i], t.copy[i]) == 0,
			      "pwb_strerror(%d) from an exited thread no "
			      "longer reads \"%s\"",
			      stable_values[i], t.copy[i]);
}
END_TEST

/* ------------------------------------------------------------------ */
/* pwb_errmsg                                                          */

static char *image;

static void image_setup(void)
{
	image = tu_image_create(8u << 20);
}

static void image_teardown(void)
{
	tu_image_remove(image);
	image = NULL;
}

/* pwb_bdi_open of the test image with page_size @ps; must fail. */
static int open_with_page_size(unsigned int ps)
{
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi = NULL;
	int rc;

	pwb_bdi_config_init(&cfg);
	cfg.page_size = ps;
	rc = pwb_bdi_open(image, &cfg, &bdi);
	if (rc == 0)
		pwb_bdi_close(bdi);
	return rc;
}

struct fresh_thread {
	int was_null;
	char msg[MSG_MAX];
};

static void *fresh_thread_fn(void *arg)
{
	struct fresh_thread *t = arg;
	const char *m = pwb_errmsg();

	t->was_null = m == NULL;
	copy_msg(t->msg, m);
	return NULL;
}

START_TEST(errmsg_is_empty_in_a_fresh_thread)
{
	struct fresh_thread t;
	pthread_t th;

	/* Make the creating thread's message non-empty first. */
	ck_assert_int_eq(pwb_bdi_open(NULL, NULL, NULL), -EINVAL);
	ck_assert_str_ne(pwb_errmsg(), "");

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(pthread_create(&th, NULL, fresh_thread_fn, &t), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_msg(!t.was_null, "pwb_errmsg() is NULL in a new thread");
	ck_assert_msg(strcmp(t.msg, "") == 0,
		      "pwb_errmsg() in a new thread: \"%s\"", t.msg);
}
END_TEST

START_TEST(errmsg_names_the_bad_page_size)
{
	char msg[MSG_MAX];
	int rc = open_with_page_size(3000);

	ck_assert_int_eq(rc, -EINVAL);
	copy_msg(msg, pwb_errmsg());
	ck_assert_msg(strstr(msg, "page_size") != NULL,
		      "pwb_errmsg() after page_size 3000: \"%s\"", msg);
	ck_assert_msg(strchr(msg, '\n') == NULL,
		      "pwb_errmsg() is more than one line: \"%s\"", msg);
	/* Reading it does not clear it. */
	ck_assert_str_eq(pwb_errmsg(), msg);
}
END_TEST

START_TEST(errmsg_is_cleared_by_a_successful_call)
{
	struct pwb_bdi *bdi = NULL;
	struct pwb_bdi_info info;

	ck_assert_int_eq(open_with_page_size(3000), -EINVAL);
	ck_assert_str_ne(pwb_errmsg(), "");

	ck_assert_int_eq(pwb_bdi_open(image, NULL, &bdi), 0);
	ck_assert_str_eq(pwb_errmsg(), "");

	/* Fail again, then succeed with a different function. */
	ck_assert_int_eq(pwb_bdi_info(bdi, NULL), -EINVAL);
	ck_assert_str_ne(pwb_errmsg(), "");
	ck_assert_int_eq(pwb_bdi_info(bdi, &info), 0);
	ck_assert_str_eq(pwb_errmsg(), "");

	ck_assert_int_eq(pwb_bdi_close(bdi), 0);
	ck_assert_str_eq(pwb_errmsg(), "");
}
END_TEST

START_TEST(errmsg_differs_between_failures)
{
	char a[MSG_MAX], b[MSG_MAX];
	struct pwb_bdi *bdi;
	struct pwb_bdi_config cfg;

	ck_assert_int_eq(open_with_page_size(3000), -EINVAL);
	copy_msg(a, pwb_errmsg());
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = PWB_MAX_WB_CTX + 1;
	ck_assert_int_eq(pwb_bdi_open(image, &cfg, &bdi), -EINVAL);
	copy_msg(b, pwb_errmsg());
	ck_assert_msg(strcmp(a, b) != 0,
		      "page_size and nr_wb_ctx failures share \"%s\"", a);
	ck_assert_msg(strstr(b, "nr_wb_ctx") != NULL || strstr(b, "65") != NULL,
		      "pwb_errmsg() after nr_wb_ctx %u: \"%s\"",
		      PWB_MAX_WB_CTX + 1, b);
}
END_TEST

/* pwb__err / pwb__err_clear directly. */
START_TEST(err_records_formatted_message_and_returns_err)
{
	char big[2000];

	ck_assert_int_eq(pwb__err(-ENOSPC, "device %s is full at %d", "x", 42),
			 -ENOSPC);
	ck_assert_msg(strstr(pwb_errmsg(), "device x is full at 42") != NULL,
		      "pwb_errmsg() = \"%s\"", pwb_errmsg());
	pwb__err_clear();
	ck_assert_str_eq(pwb_errmsg(), "");

	/* An over-long message is cut, not overflowed (valgrind checks). */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(pwb__err(-EIO, "%s", big), -EIO);
	ck_assert_msg(strlen(pwb_errmsg()) > 0 &&
			      strlen(pwb_errmsg()) < sizeof(big),
		      "length %zu", strlen(pwb_errmsg()));
	ck_assert_msg(strncmp(pwb_errmsg(), big, strlen(pwb_errmsg())) == 0,
		      "cut message is not a prefix");
}
END_TEST

/*
 * Per-thread: the main thread fails, a second thread then sees "" (its own
 * last call did not fail), fails differently itself, and the main thread's
 * message is unchanged afterwards.
 */
struct errmsg_thread {
	char before[MSG_MAX]; /* pwb_errmsg() on entry */
	int rc;		      /* of its own failing call */
	char after[MSG_MAX];  /* pwb_errmsg() after it */
	int rc_ok;	      /* of a successful call */
	char after_ok[MSG_MAX];
};

static void *errmsg_thread_fn(void *arg)
{
	struct errmsg_thread *t = arg;
	struct pwb_bdi *bdi;

	copy_msg(t->before, pwb_errmsg());
	t->rc = pwb_bdi_open(NULL, NULL, &bdi);
	copy_msg(t->after, pwb_errmsg());
	t->rc_ok = pwb_bdi_open(image, NULL, &bdi);
	if (t->rc_ok == 0) {
		copy_msg(t->after_ok, pwb_errmsg());
		pwb_bdi_close(bdi);
	}
	return NULL;
}

START_TEST(errmsg_is_per_thread)
{
	struct errmsg_thread t;
	char mine[MSG_MAX];
	pthread_t th;

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(open_with_page_size(3000), -EINVAL);
	copy_msg(mine, pwb_errmsg());
	ck_assert_str_ne(mine, "");

	ck_assert_int_eq(pthread_create(&th, NULL, errmsg_thread_fn, &t), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);

	ck_assert_msg(strcmp(t.before, "") == 0,
		      "main thread's failure shows in another thread: \"%s\"",
		      t.before);
	ck_assert_int_eq(t.rc, -EINVAL);
	ck_assert_msg(strcmp(t.after, "") != 0,
		      "other thread's failure left no message");
	ck_assert_int_eq(t.rc_ok, 0);
	ck_assert_str_eq(t.after_ok, "");

	/* The other thread's failure and success did not touch ours. */
	ck_assert_msg(strcmp(pwb_errmsg(), mine) == 0,
		      "main thread's message changed from \"%s\" to \"%s\"",
		      mine, pwb_errmsg());
}
END_TEST

/* ------------------------------------------------------------------ */
/* errseq                                                              */

START_TEST(errseq_reports_nothing_when_nothing_happened)
{
	pwb__errseq_t eseq = 0, cursor = 0;

	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
}
END_TEST

START_TEST(errseq_reports_a_new_error_once_per_cursor)
{
	pwb__errseq_t eseq = 0, cursor = 0;

	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
}
END_TEST

START_TEST(errseq_reports_an_error_to_each_cursor)
{
	pwb__errseq_t eseq = 0, c1 = 0, c2 = 0;

	pwb__errseq_set(&eseq, -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c1), -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c2), -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c1), 0);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c2), 0);
}
END_TEST

START_TEST(errseq_reports_an_error_again_after_it_was_seen)
{
	pwb__errseq_t eseq = 0, cursor = 0;

	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), -EIO);
	/* The same errno again: a new event, reported again. */
	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
	/* A different errno: reported with its own value. */
	pwb__errseq_set(&eseq, -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor),
			 -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
}
END_TEST

START_TEST(errseq_reports_an_error_recorded_twice_unseen_once)
{
	pwb__errseq_t eseq = 0, cursor = 0;

	pwb__errseq_set(&eseq, -EIO);
	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);

	/* Two different errors before anyone looked: one report. */
	pwb__errseq_set(&eseq, -EIO);
	pwb__errseq_set(&eseq, -ENOSPC);
	{
		int e = pwb__errseq_check_and_advance(&eseq, &cursor);

		ck_assert_msg(e == -EIO || e == -ENOSPC, "got %d", e);
	}
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &cursor), 0);
}
END_TEST

/*
 * A cursor that saw the first error, and one that did not: after a second
 * error, each gets exactly one report.
 */
START_TEST(errseq_lagging_cursor_gets_one_report)
{
	pwb__errseq_t eseq = 0, fast = 0, slow = 0;

	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &fast), -EIO);
	pwb__errseq_set(&eseq, -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &fast), -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &slow), -ENOSPC);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &slow), 0);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &fast), 0);
}
END_TEST

/* A cursor that caught up is not handed the same error by a later check
 * made through a fresh copy of that cursor. */
START_TEST(errseq_advanced_cursor_copy_sees_nothing)
{
	pwb__errseq_t eseq = 0, c1 = 0, c2;

	pwb__errseq_set(&eseq, -EIO);
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c1), -EIO);
	c2 = c1;
	ck_assert_int_eq(pwb__errseq_check_and_advance(&eseq, &c2), 0);
}
END_TEST

static Suite *errors_suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc;

	tc = tcase_create("strerror");
	tcase_add_test(tc, strerror_of_zero_is_nonempty_text);
	tcase_add_test(tc, strerror_of_known_errnos_is_distinct_text);
	tcase_add_test(tc, strerror_of_unknown_or_positive_is_generic_text);
	tcase_add_test(tc, strerror_text_stays_valid_after_other_calls);
	tcase_add_test(tc, strerror_text_outlives_the_calling_thread);
	suite_add_tcase(s, tc);

	tc = tcase_create("errmsg");
	tcase_add_unchecked_fixture(tc, image_setup, image_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, errmsg_is_empty_in_a_fresh_thread);
	tcase_add_test(tc, errmsg_names_the_bad_page_size);
	tcase_add_test(tc, errmsg_is_cleared_by_a_successful_call);
	tcase_add_test(tc, errmsg_differs_between_failures);
	tcase_add_test(tc, err_records_formatted_message_and_returns_err);
	tcase_add_test(tc, errmsg_is_per_thread);
	suite_add_tcase(s, tc);

	tc = tcase_create("errseq");
	tcase_add_test(tc, errseq_reports_nothing_when_nothing_happened);
	tcase_add_test(tc, errseq_reports_a_new_error_once_per_cursor);
	tcase_add_test(tc, errseq_reports_an_error_to_each_cursor);
	tcase_add_test(tc, errseq_reports_an_error_again_after_it_was_seen);
	tcase_add_test(tc, errseq_reports_an_error_recorded_twice_unseen_once);
	tcase_add_test(tc, errseq_lagging_cursor_gets_one_report);
	tcase_add_test(tc, errseq_advanced_cursor_copy_sees_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(errors_suite(), false);
}
