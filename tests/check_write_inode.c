// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_write_inode.c - a failing write_inode op: the error is recorded on
 * the inode and the bdi, reported once to pwb_fsync() and once to
 * pwb_sync(), and the metadata stays dirty so a later pass writes it.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "test-util.h"

static int write_inode_rc;	/* what the op returns */
static int write_inode_calls;	/* in this (forked) test process */

static int failing_write_inode(struct pwb_inode *inode, int sync)
{
	write_inode_calls++;
	return write_inode_rc;
}

START_TEST(failing_write_inode_is_reported_once_and_retried)
{
	struct pwb_inode_ops ops = tu_ops;
	struct tu_store st;
	struct tu_env e;
	int rc;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 1024);
	ops.write_inode = failing_write_inode;
	tu_open_store(&e, &st, 1, 16, 0, &ops);

	/* The op fails: fsync says so. */
	write_inode_rc = -EIO;
	ck_assert_int_eq(pwb_mark_inode_dirty(st.inode, PWB_I_DIRTY_META), 0);
	rc = pwb_fsync(st.inode);
	ck_assert_msg(rc == -EIO, "pwb_fsync: %d (%s)", rc, pwb_strerror(rc));
	ck_assert_int_eq(write_inode_calls, 1);

	/* The metadata stayed dirty: the bdi's sync writes it again, now
	 * successfully, and reports the error it had not seen yet. */
	write_inode_rc = 0;
	rc = pwb_sync(e.bdi);
	ck_assert_msg(rc == -EIO, "pwb_sync: %d (%s)", rc, pwb_strerror(rc));
	ck_assert_int_eq(write_inode_calls, 2);

	/* Reported once to each: neither says it again. */
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_int_eq(pwb_sync(e.bdi), 0);

	/* Written now: nothing left for another pass. */
	rc = write_inode_calls;
	ck_assert_int_eq(pwb_fsync(st.inode), 0);
	ck_assert_int_eq(write_inode_calls, rc);

	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&st);
}
END_TEST

static Suite *write_inode_suite(void)
{
	Suite *s = suite_create("write_inode");
	TCase *tc = tcase_create("errors");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, failing_write_inode_is_reported_once_and_retried);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(write_inode_suite(), true);
}
