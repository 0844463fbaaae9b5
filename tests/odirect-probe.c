/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* odirect-probe.c - see odirect-probe.h */
#define _GNU_SOURCE
#include "odirect-probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int tu_odirect_refused(const char *dir)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/pwb-probe-XXXXXX", dir);
	fd = mkstemp(path);
	if (fd < 0)
		return 0;
	close(fd);
	fd = open(path, O_RDWR | O_DIRECT);
	unlink(path);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != EINVAL)
		return 0;
	fprintf(stderr, "SKIP: %s refuses O_DIRECT (tmpfs before Linux 6.6?); "
		"set PWB_TEST_DIR to a directory on a real file system\n", dir);
	return 1;
}
