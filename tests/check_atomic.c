// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_atomic.c - the psync backend's RWF_ATOMIC path: a request leaves as
 * naturally aligned power-of-two pieces within the device's atomic write
 * unit, each with RWF_ATOMIC.
 *
 * No device here offers atomic writes, so the bdi is told it does (its
 * awu_* fields, as statx would fill them) and pwb__psync_pwritev2 stands in
 * for the system call: it records each piece and writes it without the
 * flag, so the data still lands and can be checked.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "pwb-internal.h"
#include "test-util.h"

#define PS TU_PS
#define MAX_PIECES 16

struct piece {
	uint64_t off, len;
	int flags;
};

/* Written by the flusher thread only; read after pwb_fsync() returned. */
static struct piece pieces[MAX_PIECES];
static unsigned int nr_pieces;

static ssize_t record_pwritev2(int fd, const struct iovec *iov, int cnt,
			       off_t off, int flags)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (nr_pieces < MAX_PIECES)
		pieces[nr_pieces] = (struct piece){ (uint64_t)off, len, flags };
	nr_pieces++;
	return pwritev(fd, iov, cnt, off);
}

START_TEST(request_leaves_as_aligned_rwf_atomic_pieces)
{
	/* Pages 1-9 of an inode at device offset 0: 36 KiB at 4 KiB, with
	 * atomic units of 4-16 KiB, goes out as 4 + 8 + 16 + 8 KiB. */
	static const struct piece want[] = {
		{ 1 * PS, 1 * PS, RWF_ATOMIC },
		{ 2 * PS, 2 * PS, RWF_ATOMIC },
		{ 4 * PS, 4 * PS, RWF_ATOMIC },
		{ 8 * PS, 2 * PS, RWF_ATOMIC },
	};
	struct tu_store st;
	struct tu_env e;
	unsigned int i;

	tu_env_config(&e, 1, "psync");
	tu_env_open(&e, 1024);
	/* Nothing is dirty: the flusher reads these only once woken. */
	e.bdi->atomic = true;
	e.bdi->awu_min = PS;
	e.bdi->awu_max = 4 * PS;
	e.bdi->awu_segs = 0;
	pwb__psync_pwritev2 = record_pwritev2;

	tu_open_store(&e, &st, 1, 16, 0, NULL);
	tu_dirty_range(&st, 1, 9, 7);
	ck_assert_int_eq(pwb_fsync(st.inode), 0);

	ck_assert_uint_eq(nr_pieces, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < nr_pieces; i++)
		ck_assert_msg(pieces[i].off == want[i].off &&
			      pieces[i].len == want[i].len &&
			      pieces[i].flags == want[i].flags,
			      "piece %u: %" PRIu64 "+%" PRIu64 " flags %#x, want "
			      "%" PRIu64 "+%" PRIu64 " flags %#x", i,
			      pieces[i].off, pieces[i].len, pieces[i].flags,
			      want[i].off, want[i].len, want[i].flags);

	/* Every byte landed where it belongs. */
	ck_assert_int_eq(tu_verify(&e, &st, 1), 0);
	ck_assert_int_eq(pwb_inode_close(st.inode), 0);
	tu_env_close(&e);
	tu_store_destroy(&st);
}
END_TEST

static Suite *atomic_suite(void)
{
	Suite *s = suite_create("atomic");
	TCase *tc = tcase_create("psync");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, request_leaves_as_aligned_rwf_atomic_pieces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(atomic_suite(), true);
}
