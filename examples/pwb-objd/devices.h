/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * devices.h - the devices of pwb-objd (examples/pwb-objd): one or more
 * --device, each a bdi, all of them in one libpwb memory domain when
 * there are several; an object's device chosen by a hash of its key.
 *
 * The list is filled while the options are parsed (devs_add()), opened
 * once (devs_open()) and closed once at the end (devs_close()); between
 * the two it does not change, so any thread reads it without a lock.
 */
#ifndef OBJD_DEVICES_H
#define OBJD_DEVICES_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pwb.h"

/* The most --device options taken. */
#define OBJD_MAX_DEVICES 64

struct objd_dev {
	const char *path;	/* as given */
	char *real;		/* realpath(): what the index records */
	struct pwb_bdi *bdi;
	int lock_fd;		/* holds the flock(); -1 before */
};

extern struct objd_dev devs[OBJD_MAX_DEVICES];
extern unsigned int nr_devs;
/* The domain of all the devices; NULL with one device (its bdi keeps its
 * own limits, as before there were several). */
extern struct pwb_domain *devs_domain;

/* Add a --device: 0, or -1 (message printed) when there are too many. */
int devs_add(const char *path);

/* Lock and open every device with @cfg (its domain set here), all with
 * dirty limits @dirty_bytes (0: libpwb's; with several devices, the
 * domain's, shared by all), and inject the fault the environment's
 * PWB_FAULT names, if any (tests; doc/faults.md): 0, 1 (error printed)
 * or 2 (a usage error: the same device twice, a device too small). */
int devs_open(struct pwb_bdi_config *cfg, uint64_t dirty_bytes);

/* Close every open device, then the domain: 0 or the first -errno. */
int devs_close(void);

/* The device an object of @key is placed on. */
unsigned int devs_place(const char *key, size_t klen);

/* Check the devices recorded in the index (meta "devices") against the
 * ones given, and record the list given, in @txn: 0, -1 (an LMDB error,
 * printed) or 2 (they do not match: printed). */
int devs_check_index(MDB_txn *txn, MDB_dbi meta, bool has_objects);

/* The bdi of device @dev (checked by the caller: dev < nr_devs). */
static inline struct pwb_bdi *dev_bdi(unsigned int dev)
{
	return devs[dev].bdi;
}

#endif /* OBJD_DEVICES_H */
