/* SPDX-License-Identifier: MIT */
/*
 * crash-util.h - helpers shared by the SIGKILL tests (crash-test.c,
 * wal-crash-test.c): plain C without Check, since those programs fork
 * children that write while the parent kills them.
 */
#ifndef PWB_CRASH_UTIL_H
#define PWB_CRASH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit mixer (splitmix64's finaliser): page checksums and seeds. */
uint64_t ct_mix64(uint64_t x);

/* Sleep @us microseconds, resuming after signals. */
void ct_sleep_us(unsigned int us);

/* Write @len zero bytes at the start of @path with O_DIRECT and
 * fdatasync it (@buf: an aligned scratch buffer of @len bytes), so the
 * writes that follow overwrite allocated blocks. 0 or -errno. */
int ct_zero_file(const char *path, size_t len, void *buf);

/* Read @len bytes from the start of @path with O_DIRECT into @buf
 * (aligned). 0 or -errno. */
int ct_read_file(const char *path, size_t len, void *buf);

#endif
