/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * check_crc32c.c - examples/pwb-objd/crc32c.c: the check value, and the
 * hardware path (three interleaved chains joined per round, one chain for
 * the rest) against the table path for every length around the round
 * size, every start alignment and pieces fed in any split.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "test-util.h"

/* Longer than a few rounds of the hardware path (3 x 1 KiB each). */
#define BUF_LEN (64u << 10)

static unsigned char *random_buf(void)
{
	unsigned char *b = malloc(BUF_LEN + 8);
	uint64_t x = 0x9E3779B97F4A7C15ull;

	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < BUF_LEN + 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
	return b;
}

START_TEST(test_check_value)
{
	static const unsigned char zeros[32];
	unsigned char ones[32];

	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(crc32c_update(0, "123456789", 9), 0xE3069283u);
	ck_assert_uint_eq(crc32c_update_sw(0, "123456789", 9), 0xE3069283u);
	/* RFC 3720 (iSCSI), B.4 */
	ck_assert_uint_eq(crc32c_update(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(crc32c_update(0, ones, 32), 0x62A8AB43u);
	ck_assert_uint_eq(crc32c_update(0, "", 0), 0);
}
END_TEST

/* Every length up to past two rounds, and then some longer ones, from
 * each of the 8 alignments. */
START_TEST(test_lengths)
{
	unsigned char *b = random_buf();

	for (size_t a = 0; a < 8; a++) {
		for (size_t n = 0; n <= 2 * 3 * 1024 + 64; n++)
			ck_assert_msg(crc32c_update(0, b + a, n) ==
				      crc32c_update_sw(0, b + a, n),
				      "length %zu at alignment %zu", n, a);
		for (size_t n = 8000; n <= BUF_LEN; n = n * 3 / 2 + 5)
			ck_assert_msg(crc32c_update(0, b + a, n) ==
				      crc32c_update_sw(0, b + a, n),
				      "length %zu at alignment %zu", n, a);
	}
	free(b);
}
END_TEST

/* A stream fed in pieces (as a PUT's body arrives) gives the CRC of the
 * whole, whatever the cut. */
START_TEST(test_pieces)
{
	unsigned char *b = random_buf();
	uint32_t whole = crc32c_update_sw(0, b, BUF_LEN);
	uint64_t x = 88172645463325252ull;

	for (int round = 0; round < 200; round++) {
		uint32_t c = 0;
		size_t off = 0;

		while (off < BUF_LEN) {
			size_t n;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			n = (size_t)(x % (round < 100 ? 10000 : 200));
			if (n > BUF_LEN - off)
				n = BUF_LEN - off;
			c = crc32c_update(c, b + off, n);
			off += n;
		}
		ck_assert_uint_eq(c, whole);
	}
	free(b);
}
END_TEST

static Suite *crc32c_suite(void)
{
	Suite *s = suite_create("crc32c");
	TCase *tc = tcase_create("crc32c");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_check_value);
	tcase_add_test(tc, test_lengths);
	tcase_add_test(tc, test_pieces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(crc32c_suite(), false);
}
