/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * old-program.c - a program built against the pre-release pwb.h runs
 * against this library
 *
 * tests/abi/pwb-0.1-pre.h is a copy of include/pwb.h as it was before the
 * structs that cross the ABI took sizes (commit d3ded75): no size
 * arguments, the struct layouts of then. A program built from it by the
 * libraries of then references every function at version node PWB_0.1; the
 * .symver lines below make this one do the same, so it calls exactly what
 * such a binary calls. It opens a bdi with the old config layout, opens
 * inodes with the old ops layout, dirties, syncs, reads stats and info
 * into old-size structs followed by canaries (the library must not write
 * past what the program knows), injects and counts a fault, closes, and
 * reads the image back to verify every page.
 *
 * Exit 0 if all of that holds, 1 otherwise, 77 if the test directory
 * refuses O_DIRECT (then nothing can be written).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pwb-0.1-pre.h"

/* Every function of the old header, bound to the old node. */
#define OLD(name) __asm__(".symver " #name ", " #name "@PWB_0.1")
OLD(pwb_bdi_config_init);
OLD(pwb_bdi_open);
OLD(pwb_bdi_close);
OLD(pwb_bdi_info);
OLD(pwb_bdi_stats);
OLD(pwb_wb_ctx_stats);
OLD(pwb_bdi_nr_wb_ctx);
OLD(pwb_inode_open);
OLD(pwb_inode_close);
OLD(pwb_inode_priv);
OLD(pwb_mark_dirty);
OLD(pwb_fsync);
OLD(pwb_sync);
OLD(pwb_bdi_inject_fault);
OLD(pwb_fault_parse);
OLD(pwb_fault_hits);
OLD(pwb_strerror);
OLD(pwb_errmsg);

#define NR_INODES 8
#define PAGES 8
#define PG 4096u
#define IMAGE_BYTES ((uint64_t)NR_INODES * PAGES * PG)
#define CANARY 0xa5

struct obj {
	uint64_t base;
	unsigned char *mem;
	struct pwb_inode *inode;
};

static int fails;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			fails++;                                               \
		}                                                              \
	} while (0)

static int get_page(struct pwb_inode *inode, uint64_t index,
		    const void **data)
{
	struct obj *o = pwb_inode_priv(inode);

	*data = o->mem + index * PG;
	return 0;
}

static int map_page(struct pwb_inode *inode, uint64_t index,
		    uint64_t *dev_off)
{
	struct obj *o = pwb_inode_priv(inode);

	*dev_off = o->base + index * PG;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

static int canary_intact(const unsigned char *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c[i] != CANARY)
			return 0;
	return 1;
}

/* The address the program calls is the PWB_0.1 version of @name. */
static void check_bound(void *fn, const char *name)
{
	void *old = dlvsym(RTLD_DEFAULT, name, "PWB_0.1");

	CHECK(old && fn == old, "%s is not bound to %s@PWB_0.1", name, name);
}

int main(void)
{
	const char *dir = getenv("PWB_TEST_DIR");
	struct {
		struct pwb_bdi_config cfg;
		unsigned char canary[256];
	} c;
	struct {
		struct pwb_stats st;
		unsigned char canary[256];
	} s;
	struct {
		struct pwb_bdi_info info;
		unsigned char canary[256];
	} in;
	struct {
		struct pwb_fault f;
		unsigned char canary[256];
	} f;
	struct obj objs[NR_INODES];
	struct pwb_bdi *bdi;
	char path[4096];
	unsigned char *buf;
	uint64_t hits;
	int fd, ret, i, p;

	check_bound((void *)pwb_bdi_open, "pwb_bdi_open");
	check_bound((void *)pwb_bdi_stats, "pwb_bdi_stats");
	check_bound((void *)pwb_inode_open, "pwb_inode_open");

	snprintf(path, sizeof(path), "%s/abi-old-program.%d.img",
		 dir && *dir ? dir : "/var/tmp", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)IMAGE_BYTES)) {
		perror(path);
		return 1;
	}
	close(fd);

	memset(&c, CANARY, sizeof(c));
	pwb_bdi_config_init(&c.cfg);
	CHECK(canary_intact(c.canary, sizeof(c.canary)),
	      "pwb_bdi_config_init wrote past the old struct");
	CHECK(c.cfg.page_size == 4096 && c.cfg.max_write_failures == 8,
	      "defaults not filled: page_size %u", c.cfg.page_size);
	c.cfg.nr_wb_ctx = 2;
	c.cfg.backend = "psync";
	c.cfg.dirty_writeback_ms = 0;
	ret = pwb_bdi_open(path, &c.cfg, &bdi);
	if (ret == -EINVAL && strstr(pwb_errmsg(), "O_DIRECT")) {
		printf("SKIP: %s refuses O_DIRECT: %s\n", path, pwb_errmsg());
		unlink(path);
		return 77;
	}
	if (ret) {
		fprintf(stderr, "FAIL: pwb_bdi_open: %s (%s)\n",
			pwb_strerror(ret), pwb_errmsg());
		unlink(path);
		return 1;
	}
	CHECK(pwb_bdi_nr_wb_ctx(bdi) == 2, "nr_wb_ctx %u",
	      pwb_bdi_nr_wb_ctx(bdi));

	for (i = 0; i < NR_INODES; i++) {
		objs[i].base = (uint64_t)i * PAGES * PG;
		if (posix_memalign((void **)&objs[i].mem, PG, PAGES * PG))
			return 1;
		for (p = 0; p < PAGES; p++)
			memset(objs[i].mem + p * PG, 'a' + (i * PAGES + p) % 26,
			       PG);
		ret = pwb_inode_open(bdi, (uint64_t)i + 1, &ops, &objs[i],
				     &objs[i].inode);
		CHECK(!ret, "pwb_inode_open: %s", pwb_strerror(ret));
		if (ret)
			return 1;
		ret = pwb_mark_dirty(objs[i].inode, 0, PAGES * PG);
		CHECK(!ret, "pwb_mark_dirty: %s", pwb_strerror(ret));
	}
	ret = pwb_fsync(objs[0].inode);
	CHECK(!ret, "pwb_fsync: %s", pwb_strerror(ret));
	ret = pwb_sync(bdi);
	CHECK(!ret, "pwb_sync: %s", pwb_strerror(ret));

	memset(&s, CANARY, sizeof(s));
	ret = pwb_bdi_stats(bdi, &s.st);
	CHECK(!ret, "pwb_bdi_stats: %s", pwb_strerror(ret));
	CHECK(canary_intact(s.canary, sizeof(s.canary)),
	      "pwb_bdi_stats wrote past the old struct");
	CHECK(s.st.written_pages == NR_INODES * PAGES,
	      "written_pages %llu, want %d",
	      (unsigned long long)s.st.written_pages, NR_INODES * PAGES);
	CHECK(s.st.dirty_pages == 0, "dirty_pages %llu",
	      (unsigned long long)s.st.dirty_pages);
	memset(&s, CANARY, sizeof(s));
	ret = pwb_wb_ctx_stats(bdi, 1, &s.st);
	CHECK(!ret, "pwb_wb_ctx_stats: %s", pwb_strerror(ret));
	CHECK(canary_intact(s.canary, sizeof(s.canary)),
	      "pwb_wb_ctx_stats wrote past the old struct");

	memset(&in, CANARY, sizeof(in));
	ret = pwb_bdi_info(bdi, &in.info);
	CHECK(!ret, "pwb_bdi_info: %s", pwb_strerror(ret));
	CHECK(canary_intact(in.canary, sizeof(in.canary)),
	      "pwb_bdi_info wrote past the old struct");
	CHECK(in.info.page_size == 4096 && in.info.nr_wb_ctx == 2 &&
		      in.info.capacity == IMAGE_BYTES &&
		      !strcmp(in.info.backend, "psync"),
	      "info: page_size %u nr_wb_ctx %u capacity %llu backend %s",
	      in.info.page_size, in.info.nr_wb_ctx,
	      (unsigned long long)in.info.capacity, in.info.backend);

	/* A fault on every write of inode 1's first page: one hit. */
	memset(&f, CANARY, sizeof(f));
	ret = pwb_fault_parse("eio:every=1,max_hits=1", &f.f);
	CHECK(!ret, "pwb_fault_parse: %s", pwb_strerror(ret));
	CHECK(canary_intact(f.canary, sizeof(f.canary)),
	      "pwb_fault_parse wrote past the old struct");
	f.f.dev_start = 0;
	f.f.dev_end = PG;
	ret = pwb_bdi_inject_fault(bdi, &f.f);
	CHECK(!ret, "pwb_bdi_inject_fault: %s (%s)", pwb_strerror(ret),
	      pwb_errmsg());
	pwb_mark_dirty(objs[0].inode, 0, PG);
	ret = pwb_fsync(objs[0].inode);
	CHECK(ret == -EIO, "fsync under the fault: %s", pwb_strerror(ret));
	ret = pwb_fault_hits(bdi, &hits);
	CHECK(!ret && hits == 1, "pwb_fault_hits: %s, %llu hits",
	      pwb_strerror(ret), (unsigned long long)hits);
	pwb_bdi_inject_fault(bdi, NULL);
	ret = pwb_fsync(objs[0].inode);	/* the page stayed dirty */
	CHECK(!ret, "fsync after the fault: %s", pwb_strerror(ret));
	ret = pwb_sync(bdi);		/* has its own cursor: sees it once */
	CHECK(ret == -EIO, "sync after the fault: %s", pwb_strerror(ret));

	for (i = 0; i < NR_INODES; i++)
		CHECK(!pwb_inode_close(objs[i].inode), "pwb_inode_close");
	ret = pwb_bdi_close(bdi);
	CHECK(!ret, "pwb_bdi_close: %s", pwb_strerror(ret));

	buf = malloc(IMAGE_BYTES);
	fd = open(path, O_RDONLY);
	if (!buf || fd < 0 ||
	    pread(fd, buf, IMAGE_BYTES, 0) != (ssize_t)IMAGE_BYTES) {
		perror(path);
		return 1;
	}
	close(fd);
	unlink(path);
	for (i = 0; i < NR_INODES; i++)
		for (p = 0; p < PAGES; p++)
			CHECK(!memcmp(buf + objs[i].base + p * PG,
				      objs[i].mem + p * PG, PG),
			      "inode %d page %d differs on the device", i + 1,
			      p);
	for (i = 0; i < NR_INODES; i++)
		free(objs[i].mem);
	free(buf);
	if (fails)
		return 1;
	printf("PASS: a program built against the pre-release pwb.h ran "
	       "against this library (PWB_0.1 symbols)\n");
	return 0;
}
