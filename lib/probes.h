/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * probes.h - USDT probes at the points where the kernel has writeback
 * tracepoints
 *
 * Not installed. Built when <sys/sdt.h> (systemtap-sdt-dev) was found by
 * configure; otherwise every probe is nothing and its arguments are not
 * evaluated. A probe that is not being traced costs one nop and the
 * loading of its arguments. Provider "pwb"; the probes, their arguments
 * and a one-liner for each are in doc/design.md, "Probes", and
 * tests/usdt-probes.sh checks that list against the library.
 *
 *   wb_pass_start  (ctx, reason)                a writeback pass begins
 *   wb_pass_end    (ctx, reason, pages, ns)     and ends
 *   io_submit      (ctx, ino, dev_off, bytes)   a write goes to the backend
 *   io_complete    (ctx, ino, bytes, err)       and ends
 *   throttle_sleep (ns, hard)                   a dirtier slept
 *   fsync_start    (ino)                        pwb_fsync() begins
 *   fsync_end      (ino, err, ns)               and returns
 *   reclaim        (ctx, want, freed)           clean cached pages freed
 *   reshard        (old_nr, new_nr)             contexts changed
 */
#ifndef PWB_PROBES_H
#define PWB_PROBES_H

#include "config.h"

#ifdef HAVE_SYS_SDT_H
#include <sys/sdt.h>
#define PWB_PROBE1(n, a) STAP_PROBE1(pwb, n, a)
#define PWB_PROBE2(n, a, b) STAP_PROBE2(pwb, n, a, b)
#define PWB_PROBE3(n, a, b, c) STAP_PROBE3(pwb, n, a, b, c)
#define PWB_PROBE4(n, a, b, c, d) STAP_PROBE4(pwb, n, a, b, c, d)
#else
#define PWB_PROBE1(n, a) do { } while (0)
#define PWB_PROBE2(n, a, b) do { } while (0)
#define PWB_PROBE3(n, a, b, c) do { } while (0)
#define PWB_PROBE4(n, a, b, c, d) do { } while (0)
#endif

#endif /* PWB_PROBES_H */
