// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io-null.c - a backend that completes every write without doing it
 *
 * For measuring the engine's own cost per page (dirty tracking, list
 * moves, the application's callbacks, request building): every request
 * ends successfully inside submit() and the device is never touched, so
 * what a benchmark measures through it is CPU time in libpwb and in the
 * application's callbacks. Nothing written is durable: pwb_sync() still
 * flushes the (unchanged) device cache. Its writes take no time: each is
 * recorded in PWB_HIST_WRITE_IO as 0 ns, without reading the clock. Reads
 * of library-owned pages are real: synchronous preadv()s, as with psync
 * (no read ops). Fault injection does not apply: there is no write to hit.
 */
#include "base.h"
#include "io.h"
#include "wb_ctx.h"

static int null_submit(void *state, struct pwb__io *io)
{
	uatomic_inc(&io->wb->stats.io_submitted);
	/* Nothing is written, so the write takes no time: 0 ns in the
	 * write I/O histogram, and no clock read (two of them made a
	 * one-page write cost the engine about 40% more). */
	io->submitted_at = 0;
	pwb__io_end_at(io, 0, 0);
	return 0;
}

static int null_wait(void *state)
{
	return 0;
}

const struct pwb__io_backend pwb__io_null = {
	.version = 1,
	.name = "null",
	.submit = null_submit,
	.wait = null_wait,
};
