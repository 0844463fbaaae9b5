// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * devices.c - pwb-objd's devices: open, close, placement, and the list
 * the index records (examples/pwb-objd, README.md "Several devices")
 *
 * Each --device is a bdi. With several, all join one libpwb domain, so
 * that they share one dirty budget (--dirty-limit) and a slow device's
 * dirty pages cannot take the memory the fast ones need: each gets the
 * share of the budget that follows its share of recently completed
 * writeback. A new object goes to the device a hash of its key names;
 * its index record says which device it is on, so a GET or a DELETE
 * never hashes.
 *
 * Devices are numbered in the order of the --device options, and a
 * record names its device by that number: the index records the list of
 * devices (their real paths), and a start with the devices in another
 * order, or fewer of them, is refused. Devices may be added at the end.
 * A lone device may move (its path is not checked), as before there
 * were several.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "devices.h"

/* The smallest device taken: 256 pages of 4 KiB. */
#define OBJD_MIN_DEVICE (1u << 20)

struct objd_dev devs[OBJD_MAX_DEVICES];
unsigned int nr_devs;
struct pwb_domain *devs_domain;

int devs_add(const char *path)
{
	if (nr_devs == OBJD_MAX_DEVICES) {
		fprintf(stderr, "pwb-objd: more than %u --device options\n",
			OBJD_MAX_DEVICES);
		return -1;
	}
	devs[nr_devs].path = path;
	devs[nr_devs].lock_fd = -1;
	nr_devs++;
	return 0;
}

/*
 * One daemon per device: an exclusive flock() on the device (or image)
 * file, held until the process ends, so a second pwb-objd on the same
 * file, under any path or socket, is refused before it touches anything.
 * The kernel drops the lock when the holder dies, SIGKILL included. Only
 * pwb-objd takes it: other programs writing the device are not stopped.
 */
static int lock_device(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "pwb-objd: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno == EWOULDBLOCK)
			fprintf(stderr, "pwb-objd: %s: in use by another "
				"pwb-objd\n", path);
		else
			fprintf(stderr, "pwb-objd: %s: lock: %s\n", path,
				strerror(errno));
		close(fd);
		return -1;
	}
	return fd;	/* kept open: the lock lives as long as the process */
}

/* Tests: the fault @spec (PWB_FAULT's syntax, doc/faults.md; NULL or
 * empty: none) injected into every open device, as the other examples
 * do: 0, or 1 (error printed). */
static int devs_fault(const char *spec)
{
	struct pwb_fault f;
	int ret;

	if (!spec || !*spec)
		return 0;
	ret = pwb_fault_parse(spec, &f);
	for (unsigned int i = 0; !ret && i < nr_devs; i++)
		ret = pwb_bdi_inject_fault(devs[i].bdi, &f);
	if (ret) {
		fprintf(stderr, "pwb-objd: PWB_FAULT=%s: %s\n", spec,
			pwb_errmsg());
		return 1;
	}
	fprintf(stderr, "pwb-objd: fault injection: PWB_FAULT=%s\n", spec);
	return 0;
}

int devs_open(struct pwb_bdi_config *cfg, uint64_t dirty_bytes)
{
	struct pwb_domain_config dcfg;
	struct pwb_bdi_info info;
	int ret;

	/* The same file twice would take its own lock and fail as "in use
	 * by another pwb-objd": say what it is. */
	for (unsigned int i = 0; i < nr_devs; i++) {
		devs[i].real = realpath(devs[i].path, NULL);
		if (!devs[i].real) {
			fprintf(stderr, "pwb-objd: %s: %s\n", devs[i].path,
				strerror(errno));
			return 1;
		}
		for (unsigned int j = 0; j < i; j++) {
			if (strcmp(devs[i].real, devs[j].real))
				continue;
			fprintf(stderr, "pwb-objd: --device %s and --device "
				"%s are the same device\n", devs[j].path,
				devs[i].path);
			return 2;
		}
	}
	for (unsigned int i = 0; i < nr_devs; i++) {
		devs[i].lock_fd = lock_device(devs[i].path);
		if (devs[i].lock_fd < 0)
			return 1;
	}
	if (dirty_bytes) {
		cfg->dirty_bytes = dirty_bytes;
		cfg->dirty_background_bytes = dirty_bytes / 4;
	}
	if (nr_devs > 1) {
		pwb_domain_config_init(&dcfg);
		if (dirty_bytes) {
			dcfg.dirty_bytes = dirty_bytes;
			dcfg.dirty_background_bytes = dirty_bytes / 4;
		}
		ret = pwb_domain_create(&dcfg, &devs_domain);
		if (ret) {
			fprintf(stderr, "pwb-objd: domain: %s\n", pwb_errmsg());
			return 1;
		}
		cfg->domain = devs_domain;
	}
	for (unsigned int i = 0; i < nr_devs; i++) {
		const char *path = devs[i].path;

		ret = pwb_bdi_open(path, cfg, &devs[i].bdi);
		if (!ret)
			ret = pwb_bdi_info(devs[i].bdi, &info);
		if (ret) {
			fprintf(stderr, "pwb-objd: %s: %s\n", path,
				pwb_errmsg());
			return 1;
		}
		if (info.capacity < OBJD_MIN_DEVICE) {
			fprintf(stderr, "pwb-objd: %s holds %" PRIu64 " bytes, "
				"below the minimum of %u bytes (1M)\n", path,
				info.capacity, OBJD_MIN_DEVICE);
			return 2;
		}
	}
	return devs_fault(getenv("PWB_FAULT"));
}

int devs_close(void)
{
	int ret, first = 0;

	for (unsigned int i = 0; i < nr_devs; i++) {
		if (!devs[i].bdi)
			continue;
		ret = pwb_bdi_close(devs[i].bdi);
		if (ret) {
			fprintf(stderr, "pwb-objd: close of %s: %s\n",
				devs[i].path, pwb_strerror(ret));
			if (!first)
				first = ret;
		}
		devs[i].bdi = NULL;
	}
	/* -EBUSY only if a bdi did not close: then it is still in it. */
	if (devs_domain && !pwb_domain_destroy(devs_domain))
		devs_domain = NULL;
	for (unsigned int i = 0; i < nr_devs; i++) {
		free(devs[i].real);
		devs[i].real = NULL;
	}
	return first;
}

/* FNV-1a, 64 bits, then its high bits: the low bits of FNV-1a follow
 * the last byte closely (keys "a/1", "a/2", ... would alternate). */
unsigned int devs_place(const char *key, size_t klen)
{
	uint64_t h = 0xcbf29ce484222325ull;

	if (nr_devs == 1)
		return 0;
	for (size_t i = 0; i < klen; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3ull;
	}
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (unsigned int)(h % nr_devs);
}

/* Device @i's path in the recorded list @list (@len bytes, one path a
 * line): its start and length, or NULL past the end. */
static const char *recorded(const char *list, size_t len, unsigned int i,
			    size_t *plen)
{
	const char *p = list, *end = list + len, *nl;

	for (;;) {
		if (p >= end)
			return NULL;
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			nl = end;
		if (!i--) {
			*plen = (size_t)(nl - p);
			return p;
		}
		p = nl + 1;
	}
}

int devs_check_index(MDB_txn *txn, MDB_dbi meta, bool has_objects)
{
	MDB_val k = { .mv_size = 7, .mv_data = "devices" }, v;
	unsigned int n_rec = 0;
	char *list = NULL;
	size_t len = 0, plen = 0;
	FILE *f;
	int rc;

	rc = mdb_get(txn, meta, &k, &v);
	if (rc && rc != MDB_NOTFOUND)
		goto lmdb_fail;
	/* No list: a new index, or one of a pwb-objd from before several
	 * devices, whose objects are all on its one device: the first. */
	if (!rc) {
		while (recorded(v.mv_data, v.mv_size, n_rec, &plen))
			n_rec++;
	}
	if (!rc && has_objects && n_rec > nr_devs) {
		fprintf(stderr, "pwb-objd: the index holds objects of %u "
			"devices, %u given (--device, in the same order):\n",
			n_rec, nr_devs);
		for (unsigned int i = 0; i < n_rec; i++) {
			const char *p = recorded(v.mv_data, v.mv_size, i,
						 &plen);

			fprintf(stderr, "  %.*s\n", (int)plen, p);
		}
		return 2;
	}
	/* A lone device may have moved: its path is checked only when
	 * there are several. */
	for (unsigned int i = 0; !rc && has_objects &&
	     (n_rec > 1 || nr_devs > 1) && i < n_rec; i++) {
		const char *p = recorded(v.mv_data, v.mv_size, i, &plen);

		if (plen == strlen(devs[i].real) &&
		    !memcmp(p, devs[i].real, plen))
			continue;
		fprintf(stderr, "pwb-objd: device %u of the index is %.*s, "
			"but --device number %u is %s: give the devices in "
			"the order the index records\n", i + 1, (int)plen, p,
			i + 1, devs[i].real);
		return 2;
	}
	f = open_memstream(&list, &len);
	if (!f)
		return -1;
	for (unsigned int i = 0; i < nr_devs; i++)
		fprintf(f, "%s%s", i ? "\n" : "", devs[i].real);
	if (fclose(f)) {
		free(list);
		return -1;
	}
	v.mv_size = len;
	v.mv_data = list;
	rc = mdb_put(txn, meta, &k, &v, 0);
	free(list);
	if (rc)
		goto lmdb_fail;
	return 0;
lmdb_fail:
	fprintf(stderr, "pwb-objd: index: %s\n", mdb_strerror(rc));
	return -1;
}
