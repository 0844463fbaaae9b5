/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-example-util.h - small helpers the example programs share
 * (examples/pwb-objd, examples/sqlite-vfs, bench/pwb-bench), built once
 * into the convenience library examples/common/libpwbexample.la.
 *
 * Not part of libpwb: nothing here is installed or exported. The
 * functions are hidden, so the SQLite extension that links them does not
 * export them either.
 */
#ifndef PWB_EXAMPLE_UTIL_H
#define PWB_EXAMPLE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <pwb.h>

#define PWBEX_HIDDEN __attribute__((visibility("hidden")))

/**
 * pwbex_parse_size() - parse a byte count such as "4096", "512M" or "4G"
 * @s: the text: decimal digits, then at most one suffix K, M or G (either
 *     case; times 2^10, 2^20, 2^30), then nothing
 * @out: set to the value on success, untouched otherwise
 *
 * No sign, no leading blank, no fraction, no other base: the first
 * character must be a digit. "0" is a size (callers that refuse it check).
 *
 * Context: any thread.
 * Return: 0; -EINVAL for NULL, an empty string or anything else that is
 *         not such a size ("", "-1", " 1", "+1", "1.5G", "0x10", "1KB",
 *         "K"); -ERANGE if the value does not fit in 64 bits.
 */
PWBEX_HIDDEN int pwbex_parse_size(const char *s, uint64_t *out);

/**
 * pwbex_inode_extents() - copy all of an allocator-mode inode's extents
 * @inode: an inode opened with neither get_page nor map_page
 * @extp: set to a malloc()ed array of the extents (NULL when there are
 *        none); the caller frees it
 * @nrp: set to how many there are
 *
 * pwb_inode_extents() into an array of the right size, asked again if the
 * inode gained extents between the count and the copy (background
 * writeback of pages dirtied meanwhile). The list is only a snapshot:
 * after a pwb_fsync() of the inode, and with nothing dirtying it, it
 * names exactly the durable data.
 *
 * Context: any thread.
 * Return: 0 (with *@extp and *@nrp set); pwb_inode_extents()'s errors, or
 *         -ENOMEM (*@extp and *@nrp untouched).
 */
PWBEX_HIDDEN int pwbex_inode_extents(struct pwb_inode *inode,
				     struct pwb_extent **extp, size_t *nrp);

#endif /* PWB_EXAMPLE_UTIL_H */
