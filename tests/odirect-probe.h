/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* odirect-probe.h - does a test directory take O_DIRECT? Shared by the
 * Check suites (test-util.c) and the programs that use only pwb.h, such
 * as tests/datapath-model.c, so it needs neither Check nor libpwb. */
#ifndef PWB_TEST_ODIRECT_PROBE_H
#define PWB_TEST_ODIRECT_PROBE_H

/* 1, after saying why on stderr, if a file created in @dir cannot be
 * opened with O_DIRECT (EINVAL: tmpfs before Linux 6.6, for one), so the
 * caller exits 77 (skipped); 0 if it can, or if the probe itself could
 * not run (the test then fails on its own, with its own message). */
int tu_odirect_refused(const char *dir);

#endif
