// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * fuzz_api.c - libFuzzer harness: bytes become a sequence of API calls
 *
 * Each input opens a bdi on a small image, then reads opcodes: open and
 * close inodes, dirty ranges (with hostile offsets and lengths), fsync,
 * sync, writeback kicks, re-shards, policy switches, fault rules, stats.
 * After every call that waits for the flushers the library's invariants
 * are checked: the bdi's dirty page count equals the sum over open inodes,
 * every result is 0 or a negative errno, and at the end, with faults off,
 * a sync puts every page's last contents on the device.
 *
 * Built by tests/fuzz/run-fuzz.sh with clang -fsanitize=fuzzer,address,
 * undefined; `make fuzz FUZZ_SECONDS=N` runs it. Without libFuzzer,
 * -DPWB_FUZZ_REPLAY builds a main() that replays files given as arguments
 * (the regression corpus).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pwb.h"
#include "pwb-policy.h"

#define PS 4096u
#define NR_SLOTS 8
#define PAGES_PER_INODE 16u
#define IMAGE_BYTES ((uint64_t)NR_SLOTS * PAGES_PER_INODE * PS)

struct slot {
	struct pwb_inode *inode;
	uint64_t ino;
	uint8_t *mem;
	uint8_t version;
};

static char image[256];
static struct slot slots[NR_SLOTS];

static int get_page(struct pwb_inode *inode, uint64_t index, const void **d)
{
	struct slot *s = pwb_inode_priv(inode);

	if (index >= PAGES_PER_INODE)
		return -ERANGE;
	*d = s->mem + index * PS;
	return 0;
}

static int map_page(struct pwb_inode *inode, uint64_t index, uint64_t *off)
{
	struct slot *s = pwb_inode_priv(inode);

	/* Pages beyond the slot map outside the device: a hostile app. */
	*off = ((uint64_t)(s - slots) * PAGES_PER_INODE + index) * PS;
	return 0;
}

static const struct pwb_inode_ops ops = {
	.get_page = get_page,
	.map_page = map_page,
};

static void check_ret(int ret)
{
	if (ret > 0 || ret < -4095) {
		fprintf(stderr, "fuzz: result %d is not 0 or -errno\n", ret);
		abort();
	}
}

/* Dirty pages of the bdi == sum over open inodes. Only when no flusher is
 * writing: every pass here is explicit and waited for. */
static void check_counts(struct pwb_bdi *bdi)
{
	struct pwb_stats st;
	uint64_t sum = 0, n;
	unsigned int i;

	check_ret(pwb_bdi_stats(bdi, &st));
	for (i = 0; i < NR_SLOTS; i++) {
		if (!slots[i].inode)
			continue;
		check_ret(pwb_inode_dirty_pages(slots[i].inode, &n));
		sum += n;
	}
	if (st.dirty_pages != sum || st.writeback_pages) {
		fprintf(stderr, "fuzz: bdi has %llu dirty, %llu writeback; "
				"inodes have %llu dirty\n",
			(unsigned long long)st.dirty_pages,
			(unsigned long long)st.writeback_pages,
			(unsigned long long)sum);
		abort();
	}
}

static uint64_t take(const uint8_t **p, size_t *left, unsigned int bytes)
{
	uint64_t v = 0;

	while (bytes-- && *left) {
		v = (v << 8) | **p;
		(*p)++;
		(*left)--;
	}
	return v;
}

static void setup_image(void)
{
	const char *dir = getenv("PWB_TEST_DIR");
	int fd;

	if (image[0])
		return;
	snprintf(image, sizeof(image), "%s/pwb-fuzz-%d.img",
		 dir && *dir ? dir : "/var/tmp", (int)getpid());
	fd = open(image, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)IMAGE_BYTES)) {
		perror("fuzz: image");
		abort();
	}
	close(fd);
	for (unsigned int i = 0; i < NR_SLOTS; i++)
		if (posix_memalign((void **)&slots[i].mem, 4096,
				   PAGES_PER_INODE * PS))
			abort();
}

static void verify(void)
{
	uint8_t *buf;
	int fd = open(image, O_RDONLY | O_DIRECT);
	unsigned int i;

	if (fd < 0 || posix_memalign((void **)&buf, 4096,
				     PAGES_PER_INODE * PS))
		abort();
	for (i = 0; i < NR_SLOTS; i++) {
		if (!slots[i].inode)
			continue;
		if (pread(fd, buf, PAGES_PER_INODE * PS,
			  (off_t)i * PAGES_PER_INODE * PS) !=
			    (ssize_t)(PAGES_PER_INODE * PS) ||
		    memcmp(buf, slots[i].mem, PAGES_PER_INODE * PS)) {
			fprintf(stderr, "fuzz: inode in slot %u lost data\n",
				i);
			abort();
		}
	}
	free(buf);
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const policies[] = {
		"inode-hash", "least-loaded", "hint", "alloc-group:groups=3",
		"no-such", "inode-hash:x=1", "alloc-group:groups=0", NULL,
	};
	static const char *const faults[] = {
		"none", "eio:every=2", "short:every=1", "enospc:nth=1",
		"eio:ppm=500000,seed=7", "bogus", "delay:every=1,delay_ms=0",
	};
	struct pwb_bdi_config cfg;
	struct pwb_bdi *bdi;
	const uint8_t *p = data;
	size_t left = size;
	unsigned int i;

	setup_image();
	pwb_bdi_config_init(&cfg);
	cfg.nr_wb_ctx = 1 + (unsigned int)take(&p, &left, 1) % 4;
	cfg.nr_flushers = (unsigned int)take(&p, &left, 1) % 3;
	cfg.dirty_writeback_ms = 0;	/* only explicit, waited-for passes */
	cfg.dirty_background_bytes = 0;
	cfg.dirty_bytes = 0;
	check_ret(pwb_bdi_open(image, &cfg, &bdi));

	while (left) {
		unsigned int op = (unsigned int)take(&p, &left, 1) % 12;
		struct slot *s = &slots[take(&p, &left, 1) % NR_SLOTS];
		struct pwb_fault rule;
		uint64_t off, len;

		switch (op) {
		case 0:	/* open */
			if (s->inode)
				break;
			s->ino = take(&p, &left, 2);
			memset(s->mem, 0, PAGES_PER_INODE * PS);
			/* The device holds zeros only if nothing was written
			 * there before: write the slot clean first. */
			check_ret(pwb_inode_open(bdi, s->ino, &ops, s,
						 &s->inode));
			if (s->inode) {
				check_ret(pwb_mark_dirty(s->inode, 0,
							 PAGES_PER_INODE * PS));
			}
			break;
		case 1:	/* close */
			if (!s->inode)
				break;
			check_ret(pwb_inode_close(s->inode));
			s->inode = NULL;
			break;
		case 2:	/* write bytes and dirty them */
			if (!s->inode)
				break;
			off = take(&p, &left, 2) % (PAGES_PER_INODE * PS);
			len = take(&p, &left, 2) % (PAGES_PER_INODE * PS - off);
			memset(s->mem + off, ++s->version, len);
			check_ret(pwb_mark_dirty(s->inode, off, len));
			break;
		case 3:	/* hostile range */
			if (!s->inode)
				break;
			off = take(&p, &left, 8);
			len = take(&p, &left, 8);
			check_ret(pwb_mark_dirty(s->inode, off, len));
			break;
		case 4:
			if (s->inode)
				check_ret(pwb_fsync(s->inode));
			break;
		case 5:
			check_ret(pwb_sync(bdi));
			break;
		case 6:
			check_ret(pwb_bdi_writeback(
				bdi,
				(enum pwb_wb_reason)(take(&p, &left, 1) % 5),
				PWB_WB_WAIT));
			break;
		case 7:
			check_ret(pwb_bdi_set_nr_wb_ctx(
				bdi, (unsigned int)take(&p, &left, 1) % 6));
			break;
		case 8:
			check_ret(pwb_bdi_set_policy(
				bdi, policies[take(&p, &left, 1) % 8]));
			break;
		case 9:
			if (pwb_fault_parse(faults[take(&p, &left, 1) % 7],
					    &rule) == 0)
				check_ret(pwb_bdi_inject_fault(bdi, &rule));
			break;
		case 10:
			if (s->inode)
				check_ret(pwb_inode_set_wb_hint(
					s->inode,
					(int)take(&p, &left, 1) % 8 - 1));
			break;
		default:
			check_ret(pwb_mark_inode_dirty(s->inode, 1));
			break;
		}
		check_counts(bdi);
	}

	/* Faults off: everything must land now. Pages whose writes kept
	 * failing were re-dirtied, so one sync writes them. */
	check_ret(pwb_bdi_inject_fault(bdi, NULL));
	for (i = 0; i < NR_SLOTS; i++)
		if (slots[i].inode)
			pwb_inode_clear_error(slots[i].inode);
	(void)pwb_sync(bdi);	/* may report errors from before */
	check_ret(pwb_sync(bdi));
	check_counts(bdi);
	verify();
	for (i = 0; i < NR_SLOTS; i++) {
		if (slots[i].inode)
			pwb_inode_close(slots[i].inode);
		slots[i].inode = NULL;
	}
	check_ret(pwb_bdi_close(bdi));
	return 0;
}

#ifdef PWB_FUZZ_REPLAY
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t buf[65536];
		size_t n;

		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	unlink(image);
	return 0;
}
#endif
