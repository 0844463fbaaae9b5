// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * crc32c.c - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum iSCSI, ext4 and Btrfs use: SSE4.2's crc32 instruction where the
 * CPU has it, slice-by-8 tables otherwise. The value is the usual one
 * (initial ~0, final xor ~0): crc32c("123456789") = 0xE3069283.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[8][256];
static int use_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
	for (unsigned int i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & -(c & 1));
		table[0][i] = c;
	}
	for (unsigned int i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				      table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t sw_update(uint32_t c, const unsigned char *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		    table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		    table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
hw_update(uint32_t c, const unsigned char *p, size_t n)
{
	uint64_t c64 = c;

	while (n && ((uintptr_t)p & 7)) {
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
	return (uint32_t)c64;
}
#endif

uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&once, init_tables);
#if defined(__x86_64__)
	if (use_hw)
		return ~hw_update(c, buf, len);
#endif
	return ~sw_update(c, buf, len);
}

uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init_tables);
	return ~sw_update(~crc, buf, len);
}
