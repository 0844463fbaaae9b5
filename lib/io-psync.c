// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io-psync.c - the synchronous backend: one pwritev() per request
 *
 * The request completes inside submit(). Under atomic writes it leaves as
 * naturally aligned RWF_ATOMIC pieces (pwb__io_next_write). A short write
 * is continued from where it stopped, EINTR and EAGAIN are retried, any other error ends the
 * request with that error (the pages stay dirty, see pwb__io_end). Each
 * request first asks the fault-injection layer (pwb__io_fault_check).
 * Reads of library-owned pages are synchronous preadv()s (pwb__rd_sync).
 */
#include "base.h"
#include "io.h"
#include "bdi.h"
#include "inode.h"

#include <limits.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

ssize_t (*pwb__psync_pwritev2)(int fd, const struct iovec *iov, int cnt,
			       off_t off, int flags) = pwritev2;

static int psync_submit(void *state, struct pwb__io *io)
{
	struct pwb_bdi *bdi = io->inode->bdi;
	int fd = bdi->fd;
	struct iovec *iov = io->iov;
	unsigned int cnt = io->iovcnt;
	uint64_t off = io->dev_off, limit, rem = io->nr << bdi->page_shift;
	int err = 0;

	/* Before the fault check: an injected delay is the device's. */
	io->submitted_at = pwb__now(bdi);
	uatomic_inc(&io->wb->stats.io_submitted);
	if (pwb__io_fault_check(io, &err, &limit) == PWB__FAULT_FAIL) {
		pwb__io_end(io, err);
		return 0;
	}
	while (cnt) {
		unsigned int n_iov = PWB__MIN(cnt, (unsigned int)IOV_MAX);
		size_t cut = 0;
		uint64_t wlen;
		int flags;
		ssize_t n;

		/* Under atomic writes, the next naturally aligned piece. */
		err = pwb__io_next_write(bdi, off, rem, &wlen, &flags);
		if (err)
			break;
		/* An injected short write: only this attempt is cut (torn
		 * on purpose, so not atomic). */
		if (limit) {
			wlen = limit;
			flags = 0;
			limit = 0;
		}
		if (wlen < rem)
			n_iov = pwb__iov_cut(iov, n_iov, wlen, &cut);
		n = flags ? pwb__psync_pwritev2(fd, iov, (int)n_iov, (off_t)off,
						flags)
			  : pwritev(fd, iov, (int)n_iov, (off_t)off);
		iov[n_iov - 1].iov_len += cut;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			err = -errno;
			break;
		}
		if (n == 0) {
			/* No progress and no error: treat as out of space. */
			err = -ENOSPC;
			break;
		}
		off += (uint64_t)n;
		rem -= (uint64_t)n;
		iov = pwb__iov_advance(iov, &cnt, (size_t)n);
	}
	pwb__io_end(io, err);
	return 0;
}

/*
 * Reads of library-owned pages: one preadv() per request on the caller's
 * thread (the null backend reads the same way: it skips writes only). A
 * short read is continued; the end of the device file reads as zeros.
 */
void pwb__rd_sync(struct pwb_bdi *bdi, struct pwb__rd *rd)
{
	int err;

	/* Checked against the whole request, as a write is. */
	{
		uint64_t len = 0;

		for (unsigned int i = 0; i < rd->iovcnt; i++)
			len += rd->iov[i].iov_len;
		err = pwb__fault_check_read(bdi, rd->dev_off, len);
	}
	while (!err && rd->iovcnt) {
		ssize_t n = preadv(bdi->fd, rd->iov,
				   (int)PWB__MIN(rd->iovcnt,
						 (unsigned int)IOV_MAX),
				   (off_t)rd->dev_off);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			err = -errno;
			break;
		}
		if (n == 0) {
			/* Past the end of the file: zeros. */
			for (unsigned int i = 0; i < rd->iovcnt; i++)
				memset(rd->iov[i].iov_base, 0,
				       rd->iov[i].iov_len);
			break;
		}
		rd->dev_off += (uint64_t)n;
		rd->iov = pwb__iov_advance(rd->iov, &rd->iovcnt, (size_t)n);
	}
	rd->end(rd, err);
}

static int psync_wait(void *state)
{
	return 0;
}

const struct pwb__io_backend pwb__io_psync = {
	.version = 1,
	.name = "psync",
	.submit = psync_submit,
	.wait = psync_wait,
};
