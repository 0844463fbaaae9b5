/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * outside.c - a program that knows libpwb only through its installed files
 *
 * tests/outside-program.sh builds it with nothing but
 * `pkg-config --cflags --libs pwb` against a staged install. It uses only
 * the basic calls of pwb.h: a bdi with 4 writeback contexts, 64 inodes
 * whose pages are all dirtied, pwb_sync(), then it reads the device back
 * with O_DIRECT and compares every byte, and checks that every context
 * wrote pages. Exit 0 only if all of that holds.
 *
 * The image goes to $PWB_TEST_DIR, else /var/tmp (O_DIRECT needs a real
 * file system; if the first directory refuses it, /var/tmp is tried).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pwb.h>

#define NR_CTX 4
#define NR_INODES 64
#define PAGES_PER_INODE 16
#define PG_SIZE 4096u
#define INODE_BYTES ((uint64_t)PAGES_PER_INODE * PG_SIZE)
#define IMAGE_BYTES ((uint64_t)NR_INODES * INODE_BYTES)

struct obj {
	uint64_t ino;
	uint64_t base;		/* device offset of page 0 */
	unsigned char *mem;	/* PAGES_PER_INODE pages */
	struct pwb_inode *inode;
};

static int get_page(struct pwb_inode *inode, uint64_t index,
		    const void **data)
{
	struct obj *o = pwb_inode_priv(inode);

	if (index >= PAGES_PER_INODE)
		return -ERANGE;
	*data = o->mem + index * PG_SIZE;
	return 0;
}

static int map_page(struct pwb_inode *inode, uint64_t index,
		    uint64_t *dev_off)
{
	struct obj *o = pwb_inode_priv(inode);

	if (index >= PAGES_PER_INODE)
		return -ERANGE;
	*dev_off = o->base + index * PG_SIZE;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

static void fail(const char *what, int err)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", pwb_errmsg());
	fprintf(stderr, "outside: %s: %s (%s)\n", what, pwb_strerror(err),
		msg);
}

/* Create a zeroed image in @dir; return its malloc'd path or NULL. */
static char *make_image(const char *dir)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/pwb-outside-XXXXXX", dir) < 0)
		return NULL;
	fd = mkstemp(path);
	if (fd < 0) {
		fprintf(stderr, "outside: cannot create an image in %s: %s\n",
			dir, strerror(errno));
		free(path);
		return NULL;
	}
	if (ftruncate(fd, (off_t)IMAGE_BYTES)) {
		fprintf(stderr, "outside: ftruncate %s: %s\n", path,
			strerror(errno));
		close(fd);
		unlink(path);
		free(path);
		return NULL;
	}
	close(fd);
	return path;
}

/* Open a bdi on a new image, trying $PWB_TEST_DIR then /var/tmp. */
static int open_bdi(char **pathp, struct pwb_bdi **bdip)
{
	const char *env = getenv("PWB_TEST_DIR");
	const char *dirs[2] = { env && *env ? env : "/var/tmp", "/var/tmp" };
	struct pwb_bdi_config cfg;
	int i, err = -ENOENT;

	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = NR_CTX;
	for (i = 0; i < 2; i++) {
		char *path;

		if (i == 1 && !strcmp(dirs[0], dirs[1]))
			break;
		path = make_image(dirs[i]);
		if (!path)
			continue;
		err = pwb_bdi_open(path, &cfg, bdip);
		if (!err) {
			*pathp = path;
			return 0;
		}
		fail(path, err);
		unlink(path);
		free(path);
		if (err != -EINVAL)	/* -EINVAL: no O_DIRECT here */
			break;
	}
	return err;
}

/* Read the device back and count pages that differ from memory. */
static long verify(const char *path, struct obj *objs)
{
	unsigned char *buf;
	long bad = 0;
	int fd, i;

	if (posix_memalign((void **)&buf, 4096, INODE_BYTES))
		return -1;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "outside: open %s: %s\n", path,
			strerror(errno));
		free(buf);
		return -1;
	}
	for (i = 0; i < NR_INODES; i++) {
		size_t got = 0;
		int p;

		while (got < INODE_BYTES) {
			ssize_t r = pread(fd, buf + got, INODE_BYTES - got,
					  (off_t)(objs[i].base + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				fprintf(stderr, "outside: read %s: %s\n", path,
					r ? strerror(errno) : "short file");
				close(fd);
				free(buf);
				return -1;
			}
			got += (size_t)r;
		}
		for (p = 0; p < PAGES_PER_INODE; p++)
			if (memcmp(buf + p * PG_SIZE,
				   objs[i].mem + p * PG_SIZE, PG_SIZE))
				bad++;
	}
	close(fd);
	free(buf);
	return bad;
}

int main(void)
{
	struct obj objs[NR_INODES] = { { 0 } };
	struct pwb_bdi *bdi = NULL;
	struct pwb_stats st;
	char *path = NULL;
	unsigned int nr_ctx, c;
	int i, err, ok = 1, opened = 0;
	long bad;

	printf("outside: libpwb %u.%u.%u (built against %u.%u.%u)\n",
	       pwb_version() >> 16, (pwb_version() >> 8) & 0xff,
	       pwb_version() & 0xff, PWB_VERSION_MAJOR, PWB_VERSION_MINOR,
	       PWB_VERSION_PATCH);

	err = open_bdi(&path, &bdi);
	if (err)
		return 1;
	nr_ctx = pwb_bdi_nr_wb_ctx(bdi);
	printf("outside: %s: %u writeback contexts\n", path, nr_ctx);
	if (nr_ctx != NR_CTX) {
		fprintf(stderr, "outside: asked for %d contexts, got %u\n",
			NR_CTX, nr_ctx);
		ok = 0;
		goto out;
	}

	for (i = 0; i < NR_INODES; i++) {
		struct obj *o = &objs[i];
		uint64_t k;

		o->ino = 1000 + (uint64_t)i;
		o->base = (uint64_t)i * INODE_BYTES;
		if (posix_memalign((void **)&o->mem, 4096, INODE_BYTES)) {
			o->mem = NULL;
			fprintf(stderr, "outside: out of memory\n");
			ok = 0;
			goto out;
		}
		/* Every byte names its inode, page and position. */
		for (k = 0; k < INODE_BYTES; k++)
			o->mem[k] = (unsigned char)(o->ino * 31 +
						    k / PG_SIZE * 7 + k + 1);
		err = pwb_inode_open(bdi, o->ino, &ops, o, &o->inode);
		if (err) {
			fail("pwb_inode_open", err);
			ok = 0;
			goto out;
		}
		opened++;
		err = pwb_mark_dirty(o->inode, 0, INODE_BYTES);
		if (err) {
			fail("pwb_mark_dirty", err);
			ok = 0;
			goto out;
		}
	}

	err = pwb_sync(bdi);
	if (err) {
		fail("pwb_sync", err);
		ok = 0;
		goto out;
	}

	bad = verify(path, objs);
	if (bad == 0) {
		printf("outside: %d inodes x %d pages: every byte on the "
		       "device matches\n", NR_INODES, PAGES_PER_INODE);
	} else {
		if (bad > 0)
			fprintf(stderr, "outside: %ld of %d pages differ\n",
				bad, NR_INODES * PAGES_PER_INODE);
		ok = 0;
	}

	for (c = 0; c < nr_ctx; c++) {
		err = pwb_wb_ctx_stats(bdi, c, &st);
		if (err) {
			fail("pwb_wb_ctx_stats", err);
			ok = 0;
			continue;
		}
		printf("outside: context %u wrote %" PRIu64 " pages (%" PRIu64
		       " bytes)\n", c, st.written_pages, st.bytes_written);
		if (st.written_pages == 0) {
			fprintf(stderr, "outside: context %u wrote nothing\n",
				c);
			ok = 0;
		}
	}

out:
	for (i = 0; i < opened; i++) {
		err = pwb_inode_close(objs[i].inode);
		if (err) {
			fail("pwb_inode_close", err);
			ok = 0;
		}
	}
	err = pwb_bdi_close(bdi);
	if (err) {
		fail("pwb_bdi_close", err);
		ok = 0;
	}
	for (i = 0; i < NR_INODES; i++)
		free(objs[i].mem);
	unlink(path);
	free(path);
	printf("outside: %s\n", ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}
