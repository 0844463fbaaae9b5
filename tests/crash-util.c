/* SPDX-License-Identifier: MIT */
/*
 * crash-util.c - helpers shared by the SIGKILL tests (see crash-util.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "crash-util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t ct_mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void ct_sleep_us(unsigned int us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int ct_zero_file(const char *path, size_t len, void *buf)
{
	int fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	memset(buf, 0, len);
	if (pwrite(fd, buf, len, 0) != (ssize_t)len || fdatasync(fd))
		ret = -EIO;
	close(fd);
	return ret;
}

int ct_read_file(const char *path, size_t len, void *buf)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (pread(fd, buf, len, 0) != (ssize_t)len)
		ret = -EIO;
	close(fd);
	return ret;
}
