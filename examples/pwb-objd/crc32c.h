/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* crc32c.h - CRC-32C of a byte stream (crc32c.c). */
#ifndef OBJD_CRC32C_H
#define OBJD_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue @crc (0 to start) over @len bytes: crc32c_update(0, "123456789",
 * 9) is 0xE3069283. Hardware (SSE4.2) where the CPU has it. */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);
/* The same, always with the slice-by-8 tables (for the self-test). */
uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len);

#endif
