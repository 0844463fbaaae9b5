// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * crc32c.c - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum iSCSI, ext4 and Btrfs use: SSE4.2's crc32 instruction where the
 * CPU has it, slice-by-8 tables otherwise. The value is the usual one
 * (initial ~0, final xor ~0): crc32c("123456789") = 0xE3069283.
 *
 * The crc32 instruction takes three cycles to give its result and can
 * start one every cycle, so one dependent chain of them runs at a third
 * of the speed the CPU has. The hardware path therefore runs three
 * chains over three neighbouring blocks of STRIDE bytes and joins them:
 * the CRC register is linear, so the register after A then B is the one
 * after A moved past |B| zero bytes, xor the register after B started
 * from 0. Moving a register past STRIDE zero bytes is a fixed linear map
 * of 32 bits, kept as four tables of 256 entries (one per byte of the
 * register), built at start from the instruction itself.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

/* Bytes per chain and round of the hardware path (a multiple of 8). */
#define STRIDE 1024u

static uint32_t table[8][256];
/* The register moved past STRIDE zero bytes, by byte of the register. */
static uint32_t shift_table[4][256];
static int use_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
/* The raw register (no inversions) after @n bytes from @c: one chain. */
__attribute__((target("sse4.2"))) static uint32_t
hw_chain(uint32_t c, const unsigned char *p, size_t n)
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

static uint32_t shift_stride(uint32_t c)
{
	return shift_table[0][c & 0xff] ^ shift_table[1][(c >> 8) & 0xff] ^
	       shift_table[2][(c >> 16) & 0xff] ^ shift_table[3][c >> 24];
}

/* The map "register moved past STRIDE zero bytes" of each register bit,
 * then of each value of each register byte (xor of its bits' images). */
static void init_shift(void)
{
	static const unsigned char zeros[STRIDE];
	uint32_t bit[32];

	for (int i = 0; i < 32; i++)
		bit[i] = hw_chain(1u << i, zeros, STRIDE);
	for (int j = 0; j < 4; j++)
		for (unsigned int v = 0; v < 256; v++) {
			uint32_t x = 0;

			for (int b = 0; b < 8; b++)
				if (v & (1u << b))
					x ^= bit[8 * j + b];
			shift_table[j][v] = x;
		}
}

/* Three chains at once over rounds of 3 x STRIDE bytes, joined after each
 * round; the rest in one chain. */
__attribute__((target("sse4.2"))) static uint32_t
hw_update(uint32_t c, const unsigned char *p, size_t n)
{
	while (n >= 3 * STRIDE) {
		uint64_t a = c, b = 0, d = 0;

		for (size_t i = 0; i < STRIDE; i += 8) {
			uint64_t x, y, z;

			memcpy(&x, p + i, 8);
			memcpy(&y, p + STRIDE + i, 8);
			memcpy(&z, p + 2 * STRIDE + i, 8);
			a = __builtin_ia32_crc32di(a, x);
			b = __builtin_ia32_crc32di(b, y);
			d = __builtin_ia32_crc32di(d, z);
		}
		c = shift_stride(shift_stride((uint32_t)a) ^ (uint32_t)b) ^
		    (uint32_t)d;
		p += 3 * STRIDE;
		n -= 3 * STRIDE;
	}
	return hw_chain(c, p, n);
}
#endif

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
	if (use_hw)
		init_shift();
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
