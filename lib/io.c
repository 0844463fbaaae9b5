// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io.c - the I/O backend registry and the end of every write
 *
 * pwb__io_end() is the one place where a finished write changes page state:
 * the writeback tag goes, a failed page becomes dirty again (and its error
 * is recorded for fsync/sync callers), counters move, end_write is told.
 */
#include "pwb-internal.h"

#include <stdlib.h>
#include <string.h>

static const struct pwb__io_backend *const backends[] = {
	&pwb__io_psync,
};

const struct pwb__io_backend *pwb__io_backend_find(const char *name)
{
	size_t i;

	if (!name)
		name = "psync";
	for (i = 0; i < sizeof(backends) / sizeof(*backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

void pwb__io_complete(struct pwb__io *io, int err)
{
	struct pwb_inode *inode = io->inode;
	struct pwb__wb_ctx *wb = io->wb;
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t last = io->index + io->nr - 1;
	bool attach = false;

	pthread_mutex_lock(&inode->lock);
	pwb__map_clear(&inode->map, PWB__TAG_WRITEBACK, io->index, last);
	if (err) {
		int64_t redirtied = pwb__map_set(&inode->map, PWB__TAG_DIRTY,
						 io->index, last);

		/*
		 * The pages were set DIRTY before (the leaf exists), so this
		 * cannot fail for lack of memory; if it ever did, the error
		 * below still reaches fsync callers.
		 */
		if (redirtied > 0) {
			uatomic_add(&wb->stats.dirty_pages, redirtied);
			if (!(inode->state &
			      (PWB__I_DIRTY_PAGES | PWB__I_DIRTY_META))) {
				inode->dirtied_when = pwb__now(bdi);
				attach = !(inode->state & PWB__I_SYNC);
			}
			inode->state |= PWB__I_DIRTY_PAGES;
		}
		pwb__errseq_set(&inode->wb_err, err);
		pwb__errseq_set(&bdi->wb_err, err);
	} else {
		inode->last_write_seq = uatomic_add_return(&bdi->write_seq, 1);
	}
	pthread_mutex_unlock(&inode->lock);

	uatomic_sub(&wb->stats.writeback_pages, io->nr);
	if (err) {
		uatomic_inc(&wb->stats.io_errors);
	} else {
		uatomic_add(&wb->stats.written_pages, io->nr);
		uatomic_add(&wb->stats.bytes_written,
			    io->nr << bdi->page_shift);
	}
	if (attach)
		pwb__inode_attach_dirty(inode);
	if (inode->ops.end_write)
		inode->ops.end_write(inode, io->index, io->nr, err);
}

void pwb__io_end(struct pwb__io *io, int err)
{
	pwb__io_complete(io, err);
	free(io);
}
