// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pwbvfs.c - the "pwb" SQLite VFS: database, journal and WAL files kept as
 * allocator-mode inodes of one libpwb bdi (a device image or block device).
 * README.md in this directory has the design; the short version:
 *
 *   device:  [ slot 0 | slot 1 ][ data: libpwb's allocator ...          ]
 *            0        1 MiB    2 MiB
 *
 * A slot holds the directory (name -> ino, size, extents) with a generation
 * and a CRC; the valid slot with the higher generation wins, a new
 * directory goes to the other slot. The first 2 MiB belong to a pseudo-inode
 * (DIR_INO) that is never written, so the allocator never hands them out.
 *
 * Every file in the directory is open as a pwb inode for as long as the
 * image is mounted in this process (whether SQLite has it open or not), so
 * this process's allocator knows every used block. The directory records
 * for each file only its durable state: the size and extents seen right
 * after a pwb_fsync() of it, or what a truncate or delete made durable.
 *
 * Several processes: a side file "<image>.pwb-lock" carries an OFD write
 * lock (the image-wide writer lock) and, mapped shared, an epoch counter.
 * A writer bumps the epoch when it takes the lock, before each directory
 * write and when it lets go; anyone who sees the epoch move reloads the
 * directory and drops its cached pages. Locks of a database are SQLite's
 * own unix VFS locks on "<image>.pwb-<hash of name>" (and its "-shm").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT, F_OFD_SETLK */
#endif
#ifdef SQLITE_CORE
#include <sqlite3.h>
#define SQLITE_EXTENSION_INIT1
#define SQLITE_EXTENSION_INIT2(api) (void)(api)
#else
#include <sqlite3ext.h>
#endif
SQLITE_EXTENSION_INIT1

#include <pwb.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pwb-example-util.h"
#include "pwbvfs.h"

#define PAGE 4096u
#define SLOT_BYTES (1u << 20)
#define DIR_RESERVED (2u * SLOT_BYTES)
/* The smallest device: the directory and 16 pages. */
#define MIN_IMAGE_BYTES ((uint64_t)DIR_RESERVED + 16 * PAGE)
#define DIR_MAGIC 0x3173667662777000ull /* "\0pwbvfs1" */
#define DIR_INO 1
#define FIRST_INO 16
#define MAX_NAME 255
#define DEFAULT_IMAGE_BYTES (256ull << 20)
#define LAZY_LOCK_MS 10000
/* A WAL grows in steps of this many bytes of written zeros (wal_grow()). */
#define WAL_CHUNK_BYTES (1u << 20)
/* Bounds of the bdi's cache (cache_config()). */
#define CACHE_MIN_BYTES (64ull << 20)
#define CACHE_MAX_BYTES (512ull << 20)

/* On-disk slot header; entries follow (little-endian, packed by hand). */
struct slot_hdr {
	uint64_t magic;
	uint64_t gen;
	uint32_t nent;
	uint32_t len;	/* bytes after the header */
	uint32_t crc;	/* CRC-32 of the bytes after the header */
	uint32_t pad;
	uint64_t next_ino; /* never reused */
};

/* One file of the directory. Fields under its mount's lock, except
 * written (atomic: set by xWrite without the lock) and the inode's own
 * calls (libpwb is thread-safe; reload_lock orders them against reloads). */
struct ent {
	struct ent *next;
	char name[MAX_NAME + 1];
	uint64_t ino;
	struct pwb_inode *inode;	/* open while the image is mounted */
	int nopen;			/* SQLite files on it */
	bool gone;			/* deleted, still open */
	bool zombie;			/* deleted, blocks held until a flush */
	bool written;			/* pwb_write/truncate since last sync */
	/* Durable state: what the directory on the device says. */
	uint64_t size;
	size_t next_ext;
	struct pwb_extent *ext;
};

/* One device image mounted in this process; on the global list. */
struct mount {
	struct mount *next;		/* under vfs_lock */
	int refs;			/* under vfs_lock */
	dev_t st_dev;
	ino_t st_ino;
	char *path;			/* realpath */
	char *lockbase;			/* prefix of the side files */
	/* Everything below is under m->lock. */
	pthread_mutex_t lock;
	/* Read-held around pwb_read/pwb_write/pwb_inode_size of SQLite
	 * files; write-held by dir_reload() (with m->lock), so another
	 * connection of this process never reads an inode half reloaded. */
	pthread_rwlock_t reload_lock;
	struct pwb_bdi *bdi;
	struct pwb_inode *dir_inode;
	int fd;				/* O_DIRECT, for the slots */
	unsigned char *buf;		/* SLOT_BYTES, aligned */
	int lockfd;			/* image lock + epoch */
	uint64_t *epoch;		/* mapped shared; atomic */
	uint64_t seen;			/* epoch of our view */
	uint64_t gen;			/* generation of our view */
	int slot;			/* slot holding gen */
	uint64_t next_ino;
	struct ent *ents;
	bool wlocked;			/* we hold the image lock */
	bool dir_dirty;			/* a created file not yet persisted */
	bool dir_unflushed;		/* last directory write not flushed */
	int nwriters;			/* files at RESERVED or above */
	int ndb;			/* main database files open */
	bool wal_hold;			/* image lock kept for a WAL database */
};

/* A file of the pwb VFS. Files SQLite does not keep on the device (temp
 * files, sub-journals) are opened by the unix VFS in the same memory.
 * Used by one connection at a time (SQLite's rule for a sqlite3_file);
 * level changes under the mount's lock. */
struct pfile {
	const sqlite3_io_methods *methods;
	struct mount *m;
	struct ent *e;
	int flags;
	int level;			/* SQLite lock level */
	sqlite3_file *lockf;		/* unix file: locks and shm (main db) */
	sqlite3_filename lockname;	/* sqlite3_create_filename() */
};

static pthread_mutex_t vfs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mount *mounts;	/* under vfs_lock */
static sqlite3_vfs *unix_vfs;

/* ------------------------------------------------------------ helpers */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_buf(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	pthread_once(&crc_once, crc_init);
	while (n--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static uint64_t fnv64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void vlog(int rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* sqlite3_log() (the shell shows it with -cmd ".log stderr"). */
static void vlog(int rc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sqlite3_log(rc, "pwbvfs: %s", msg);
}

static int map_err(int err, int io_rc)
{
	if (err == -ENOSPC)
		return SQLITE_FULL;
	if (err == -ENOMEM)
		return SQLITE_IOERR_NOMEM;
	return io_rc;
}

/* --------------------------------------------------------- directory */

static void ent_free(struct ent *e)
{
	free(e->ext);
	free(e);
}

/*
 * libpwb keeps the blocks a discard or truncate frees busy (out of use)
 * until we say that the durable directory no longer names them
 * (pwb_bdi_freed_cookie()). Every free of this VFS comes after the
 * directory write that stopped naming the blocks was flushed (a truncate
 * persists first, a delete waits as a zombie, a reload frees only what
 * the newer directory dropped or claims again), so each caller releases
 * everything freed so far right after its discards. Caller holds m->lock.
 */
static void release_freed(struct mount *m)
{
	uint64_t cookie;

	if (pwb_bdi_freed_cookie(m->bdi, &cookie) ||
	    pwb_bdi_release_freed(m->bdi, cookie))
		vlog(SQLITE_IOERR, "releasing freed blocks of %s: %s",
		     m->path, pwb_errmsg());
}

/*
 * The blocks of a file deleted without dirSync stay with its inode until
 * the directory write that deleted it is flushed: until then a crash may
 * bring the file back, and its blocks must still hold its data (the way
 * ext4 does not reuse freed blocks before its journal commits). Called
 * after a flush of the image.
 */
static void free_zombies(struct mount *m)
{
	struct ent *e, **pp;

	for (pp = &m->ents; (e = *pp);) {
		if (e->zombie) {
			pwb_inode_discard(e->inode, 0, UINT64_MAX);
			release_freed(m);
			e->zombie = false;
			if (!e->nopen) {
				*pp = e->next;
				pwb_inode_close(e->inode);
				ent_free(e);
				continue;
			}
		}
		pp = &e->next;
	}
}

/* Copy @inode's size and extents (both may move under background writeback
 * of pages dirtied later; the caller has just synced or holds them still). */
static int capture(struct pwb_inode *inode, uint64_t *size,
		   struct pwb_extent **ext, size_t *nr)
{
	int ret;

	ret = pwb_inode_size(inode, size);
	if (ret)
		return ret;
	return pwbex_inode_extents(inode, ext, nr);
}

/* Drop extents wholly at or past @size (rounded up to a page), clip the
 * last one. */
static void clip_extents(struct pwb_extent *x, size_t *nr, uint64_t size)
{
	uint64_t end = (size + PAGE - 1) / PAGE * PAGE;
	size_t i, n = 0;

	for (i = 0; i < *nr; i++) {
		if (x[i].file_off >= end)
			continue;
		x[n] = x[i];
		if (x[n].file_off + x[n].len > end)
			x[n].len = end - x[n].file_off;
		n++;
	}
	*nr = n;
}

static bool same_extents(const struct pwb_extent *a, size_t na,
			 const struct pwb_extent *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na * sizeof(*a)));
}

static bool same_state(const struct ent *e, uint64_t size,
		       const struct pwb_extent *x, size_t nr)
{
	return e->size == size && e->next_ext == nr &&
	       (!nr || !memcmp(e->ext, x, nr * sizeof(*x)));
}

static void put64(unsigned char **p, uint64_t v)
{
	memcpy(*p, &v, 8);
	*p += 8;
}

static uint64_t get64(const unsigned char **p)
{
	uint64_t v;

	memcpy(&v, *p, 8);
	*p += 8;
	return v;
}

/* Write the durable state of every live entry to the other slot, then
 * (with @flush) fdatasync. Caller holds m->lock and the image lock. */
static int dir_persist(struct mount *m, bool flush)
{
	struct slot_hdr h = {.magic = DIR_MAGIC, .gen = m->gen + 1,
			     .next_ino = m->next_ino};
	unsigned char *p = m->buf + sizeof(h);
	const unsigned char *end = m->buf + SLOT_BYTES;
	size_t len;
	int slot = !m->slot;
	struct ent *e;

	for (e = m->ents; e; e = e->next) {
		size_t nl = strlen(e->name);

		if (e->gone)
			continue;
		if ((size_t)(end - p) < 2 + nl + 8 * 3 + 8 + 24 * e->next_ext) {
			vlog(SQLITE_FULL, "directory full at %s", e->name);
			return SQLITE_FULL;
		}
		*p++ = (unsigned char)(nl & 0xff);
		*p++ = (unsigned char)(nl >> 8);
		memcpy(p, e->name, nl);
		p += nl;
		put64(&p, e->ino);
		put64(&p, e->size);
		put64(&p, e->next_ext);
		for (size_t i = 0; i < e->next_ext; i++) {
			put64(&p, e->ext[i].file_off);
			put64(&p, e->ext[i].dev_off);
			put64(&p, e->ext[i].len);
		}
		h.nent++;
	}
	h.len = (uint32_t)(p - m->buf - sizeof(h));
	h.crc = crc32_buf(m->buf + sizeof(h), h.len);
	memcpy(m->buf, &h, sizeof(h));
	len = (size_t)(p - m->buf);
	len = (len + PAGE - 1) / PAGE * PAGE;
	memset(p, 0, len - (size_t)(p - m->buf));
	/* Readers that saw the old epoch must look again. */
	__atomic_store_n(&m->seen, __atomic_add_fetch(m->epoch, 1,
						       __ATOMIC_SEQ_CST),
			 __ATOMIC_RELAXED);
	if (pwrite(m->fd, m->buf, len, (off_t)slot * SLOT_BYTES) !=
		    (ssize_t)len ||
	    (flush && fdatasync(m->fd))) {
		vlog(SQLITE_IOERR, "directory write: %s", strerror(errno));
		return SQLITE_IOERR_WRITE;
	}
	m->gen++;
	m->slot = slot;
	m->dir_dirty = false;
	m->dir_unflushed = !flush;
	if (flush)
		free_zombies(m);
	return SQLITE_OK;
}

/* A parsed directory entry (before it is merged into m->ents). */
struct pent {
	char name[MAX_NAME + 1];
	uint64_t ino, size;
	size_t next;
	struct pwb_extent *ext;
};

/* Read and check slot @s; on success fill *@h and leave the slot in
 * m->buf. */
static int slot_read(struct mount *m, int s, struct slot_hdr *h)
{
	ssize_t n = pread(m->fd, m->buf, SLOT_BYTES, (off_t)s * SLOT_BYTES);

	if (n != (ssize_t)SLOT_BYTES)
		return -EIO;
	memcpy(h, m->buf, sizeof(*h));
	if (h->magic != DIR_MAGIC || h->len > SLOT_BYTES - sizeof(*h) ||
	    crc32_buf(m->buf + sizeof(*h), h->len) != h->crc)
		return -EINVAL;
	return 0;
}

static bool region_zero(struct mount *m)
{
	for (int s = 0; s < 2; s++) {
		if (pread(m->fd, m->buf, SLOT_BYTES, (off_t)s * SLOT_BYTES) !=
		    (ssize_t)SLOT_BYTES)
			return false;
		for (size_t i = 0; i < SLOT_BYTES; i++)
			if (m->buf[i])
				return false;
	}
	return true;
}

/* Read the newest valid slot into @pe (array of *@np). -ENODATA: no valid
 * slot. */
static int dir_read(struct mount *m, uint64_t *gen, int *slot,
		    struct pent **pe, size_t *np, uint64_t *next_ino)
{
	struct slot_hdr h[2];
	int ok[2], best;
	const unsigned char *p, *end;
	struct pent *v;

	ok[0] = !slot_read(m, 0, &h[0]);
	ok[1] = !slot_read(m, 1, &h[1]);
	if (!ok[0] && !ok[1])
		return -ENODATA;
	best = !ok[0] || (ok[1] && h[1].gen > h[0].gen);
	if (best == 0 && ok[1] && slot_read(m, 0, &h[0]))
		return -EAGAIN;	/* changed under us: try again */
	v = calloc(h[best].nent + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	p = m->buf + sizeof(struct slot_hdr);
	end = p + h[best].len;
	for (uint32_t i = 0; i < h[best].nent; i++) {
		size_t nl;

		if (end - p < 2)
			goto bad;
		nl = p[0] | (size_t)p[1] << 8;
		p += 2;
		if (nl > MAX_NAME || (size_t)(end - p) < nl + 24)
			goto bad;
		memcpy(v[i].name, p, nl);
		p += nl;
		v[i].ino = get64(&p);
		v[i].size = get64(&p);
		v[i].next = get64(&p);
		if (v[i].next > (size_t)(end - p) / 24)
			goto bad;
		if (v[i].next) {
			v[i].ext = malloc(v[i].next * sizeof(*v[i].ext));
			if (!v[i].ext)
				goto bad;
		}
		for (size_t k = 0; k < v[i].next; k++) {
			v[i].ext[k].file_off = get64(&p);
			v[i].ext[k].dev_off = get64(&p);
			v[i].ext[k].len = get64(&p);
		}
	}
	*gen = h[best].gen;
	*next_ino = h[best].next_ino;
	*slot = best;
	*pe = v;
	*np = h[best].nent;
	return 0;
bad:
	for (uint32_t i = 0; i <= h[best].nent; i++)
		free(v[i].ext);
	free(v);
	return -EINVAL;
}

static int inode_open(struct mount *m, uint64_t ino, struct pwb_inode **ip)
{
	static const struct pwb_inode_ops ops; /* allocator mode */

	return pwb_inode_open(m->bdi, ino, &ops, NULL, ip);
}

/*
 * Make our view the device's: drop every cached page (another process may
 * have changed any file in place) and load sizes and extents from the
 * newest slot. Caller holds m->lock, not the image lock's dirty state: we
 * have no dirty pages (they were written before the image lock went).
 */
static int dir_apply(struct mount *m, struct pent *pe, size_t np,
		     uint64_t nino);

static int dir_reload(struct mount *m)
{
	uint64_t epoch = __atomic_load_n(m->epoch, __ATOMIC_SEQ_CST), gen;
	uint64_t nino;
	struct pent *pe = NULL;
	size_t np = 0, i;
	int slot, ret, tries = 0;

	while ((ret = dir_read(m, &gen, &slot, &pe, &np, &nino)) == -EAGAIN &&
	       ++tries < 100)
		;
	if (!ret)
		ret = dir_apply(m, pe, np, nino);
	else
		vlog(SQLITE_IOERR, "cannot read the directory of %s", m->path);
	for (i = 0; i < np; i++)
		free(pe[i].ext);
	free(pe);
	if (ret) {
		m->seen = epoch - 1;	/* try again next time */
		return ret == -EIO ? SQLITE_IOERR_READ :
				     map_err(ret, SQLITE_IOERR_READ);
	}
	m->gen = gen;
	m->slot = slot;
	m->seen = epoch;
	return SQLITE_OK;
}

/* Merge the parsed directory @pe into our view. */
static int dir_apply(struct mount *m, struct pent *pe, size_t np,
		     uint64_t nino)
{
	struct ent *e, **pp;
	size_t i;
	int ret;

	pthread_rwlock_wrlock(&m->reload_lock);
	/* First free every block of our old view, then claim the new. */
	for (e = m->ents; e; e = e->next) {
		ret = pwb_inode_discard(e->inode, 0, UINT64_MAX);
		if (ret)
			goto fail;
		e->gone = true;
		e->zombie = false;
	}
	/* The new directory names what it keeps: free for it to claim. */
	release_freed(m);
	for (i = 0; i < np; i++)
		for (e = m->ents; e; e = e->next)
			if (e->ino == pe[i].ino && !strcmp(e->name, pe[i].name))
				e->gone = false;
	/* Deleted by someone else: forget the ones nobody has open. */
	for (pp = &m->ents; (e = *pp);) {
		if (e->gone && !e->nopen) {
			*pp = e->next;
			pwb_inode_close(e->inode);
			ent_free(e);
		} else {
			pp = &e->next;
		}
	}
	for (i = 0; i < np; i++) {
		for (e = m->ents; e; e = e->next)
			if (!e->gone && e->ino == pe[i].ino)
				break;
		if (!e) {
			e = calloc(1, sizeof(*e));
			if (!e) {
				ret = -ENOMEM;
				goto fail;
			}
			memcpy(e->name, pe[i].name, sizeof(e->name));
			e->ino = pe[i].ino;
			ret = inode_open(m, e->ino, &e->inode);
			if (ret) {
				free(e);
				goto fail;
			}
			e->next = m->ents;
			m->ents = e;
		}
		e->written = false;
		if (pe[i].next) {
			ret = pwb_inode_set_extents(e->inode, pe[i].ext,
						    pe[i].next);
			if (ret)
				goto fail;
		}
		ret = pwb_inode_set_size(e->inode, pe[i].size);
		if (ret)
			goto fail;
		free(e->ext);
		e->ext = pe[i].ext;
		pe[i].ext = NULL;
		e->next_ext = pe[i].next;
		e->size = pe[i].size;
		if (e->ino >= nino)
			nino = e->ino + 1;
	}
	if (nino > m->next_ino)
		m->next_ino = nino;
	pthread_rwlock_unlock(&m->reload_lock);
	return 0;
fail:
	pthread_rwlock_unlock(&m->reload_lock);
	vlog(SQLITE_IOERR, "reloading the directory of %s: %s (%s)",
	     m->path, pwb_strerror(ret), pwb_errmsg());
	return ret;
}

/* Reload if another process wrote since we looked. Caller holds m->lock. */
static int dir_refresh(struct mount *m)
{
	if (m->wlocked ||
	    __atomic_load_n(m->epoch, __ATOMIC_SEQ_CST) == m->seen)
		return SQLITE_OK;
	return dir_reload(m);
}

static struct ent *ent_find(struct mount *m, const char *name)
{
	struct ent *e;

	for (e = m->ents; e; e = e->next)
		if (!e->gone && !strcmp(e->name, name))
			return e;
	return NULL;
}

/* ------------------------------------------------------ image lock */

static int ofd_lock(int fd, short type, bool wait)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET,
			   .l_start = 0, .l_len = 1};

	return fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) ? -errno : 0;
}

/*
 * Take the image-wide writer lock; @wait_ms > 0 retries that long. Caller
 * holds m->lock. Anything another writer did since our view goes first.
 */
static int wlock_get(struct mount *m, int wait_ms)
{
	int ret;

	if (m->wlocked)
		return SQLITE_OK;
	while ((ret = ofd_lock(m->lockfd, F_WRLCK, false)) == -EAGAIN &&
	       wait_ms > 0) {
		struct timespec ts = {0, 1000000};

		pthread_mutex_unlock(&m->lock);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&m->lock);
		if (m->wlocked)
			return SQLITE_OK;
		wait_ms--;
	}
	if (ret == -EAGAIN || ret == -EACCES)
		return SQLITE_BUSY;
	if (ret)
		return SQLITE_IOERR_LOCK;
	if (__atomic_load_n(m->epoch, __ATOMIC_SEQ_CST) != m->seen) {
		int rc = dir_reload(m);

		/* Another process's last directory write (a delete, say) is
		 * durable before we hand out the blocks it freed. */
		if (!rc && fdatasync(m->fd))
			rc = SQLITE_IOERR_FSYNC;
		if (rc) {
			ofd_lock(m->lockfd, F_UNLCK, false);
			return rc;
		}
	}
	/* A crash from here on leaves the epoch moved: others reload. */
	m->seen = __atomic_add_fetch(m->epoch, 1, __ATOMIC_SEQ_CST);
	m->wlocked = true;
	return SQLITE_OK;
}

/* Make file @e durable and its directory entry current (no persist). */
static int ent_sync(struct mount *m, struct ent *e)
{
	struct pwb_extent *x = NULL;
	uint64_t size;
	size_t nr = 0;
	int ret;

	(void)m;
	__atomic_store_n(&e->written, false, __ATOMIC_SEQ_CST);
	ret = pwb_fsync(e->inode);
	if (!ret)
		ret = capture(e->inode, &size, &x, &nr);
	if (ret) {
		__atomic_store_n(&e->written, true, __ATOMIC_SEQ_CST);
		vlog(SQLITE_IOERR, "sync of %s: %s (%s)", e->name,
		     pwb_strerror(ret), pwb_errmsg());
		return map_err(ret, SQLITE_IOERR_FSYNC);
	}
	if (same_state(e, size, x, nr)) {
		free(x);
		return SQLITE_OK;
	}
	free(e->ext);
	e->ext = x;
	e->next_ext = nr;
	e->size = size;
	return SQLITE_DONE;	/* changed: persist */
}

/* Write back everything we dirtied, persist the directory, let go. */
static int wlock_put(struct mount *m)
{
	bool changed = false;
	int rc = SQLITE_OK;
	struct ent *e;

	if (!m->wlocked)
		return SQLITE_OK;
	for (e = m->ents; e; e = e->next) {
		int r;

		if (e->gone || !__atomic_load_n(&e->written, __ATOMIC_SEQ_CST))
			continue;
		r = ent_sync(m, e);
		if (r == SQLITE_DONE)
			changed = true;
		else if (r && !rc)
			rc = r;
	}
	if (changed || m->dir_dirty) {
		int r = dir_persist(m, true);

		if (r && !rc)
			rc = r;
	}
	if (rc)
		return rc;	/* keep the lock: nobody may see half */
	m->seen = __atomic_add_fetch(m->epoch, 1, __ATOMIC_SEQ_CST);
	ofd_lock(m->lockfd, F_UNLCK, false);
	m->wlocked = false;
	return SQLITE_OK;
}

/* ----------------------------------------------------------- mounts */

static void mount_free(struct mount *m)
{
	struct ent *e;

	while ((e = m->ents)) {
		m->ents = e->next;
		if (e->inode)
			pwb_inode_close(e->inode);
		ent_free(e);
	}
	if (m->dir_inode)
		pwb_inode_close(m->dir_inode);
	if (m->bdi)
		pwb_bdi_close(m->bdi);
	if (m->epoch)
		munmap(m->epoch, PAGE);
	if (m->lockfd >= 0)
		close(m->lockfd);
	if (m->fd >= 0)
		close(m->fd);
	free(m->buf);
	free(m->path);
	free(m->lockbase);
	pthread_mutex_destroy(&m->lock);
	pthread_rwlock_destroy(&m->reload_lock);
	free(m);
}

/* Format an all-zero image or load its directory. */
static int mount_load(struct mount *m)
{
	int rc, tries;

	for (tries = 0; tries < LAZY_LOCK_MS; tries++) {
		struct pent *pe;
		size_t np;
		uint64_t gen, nino;
		int slot, ret = dir_read(m, &gen, &slot, &pe, &np, &nino);

		if (ret == 0) {
			for (size_t i = 0; i < np; i++)
				free(pe[i].ext);
			free(pe);
			m->seen = __atomic_load_n(m->epoch, __ATOMIC_SEQ_CST) -
				  1;
			return dir_reload(m);
		}
		if (ret != -ENODATA && ret != -EAGAIN)
			return SQLITE_IOERR_READ;
		if (ret == -ENODATA && !region_zero(m)) {
			/* Not ours, or a format in progress elsewhere. */
			if (ofd_lock(m->lockfd, F_WRLCK, false) == 0) {
				ofd_lock(m->lockfd, F_UNLCK, false);
				if (dir_read(m, &gen, &slot, &pe, &np, &nino) ==
				    -ENODATA) {
					vlog(SQLITE_NOTADB, "%s holds no pwb "
					     "directory", m->path);
					return SQLITE_NOTADB;
				}
			}
		} else if (ret == -ENODATA &&
			   ofd_lock(m->lockfd, F_WRLCK, false) == 0) {
			if (region_zero(m)) {
				m->gen = 0;
				m->slot = 1;
				m->wlocked = true;
				rc = dir_persist(m, true);
				m->wlocked = false;
				m->seen = __atomic_add_fetch(m->epoch, 1,
							     __ATOMIC_SEQ_CST);
				ofd_lock(m->lockfd, F_UNLCK, false);
				if (rc)
					return rc;
			} else {
				ofd_lock(m->lockfd, F_UNLCK, false);
			}
			continue;
		}
		{
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
		}
	}
	return SQLITE_BUSY;
}

/*
 * The bdi's cache and dirty limits: a sixteenth of RAM, between 64 MiB and
 * 512 MiB; background writeback at a quarter of it, the dirty limit at
 * half. A large transaction makes SQLite spill pages from its own small
 * cache (2 MB by default) over and over, and a WAL frame or database page
 * is written many times before the commit: below the background threshold
 * each reaches the device once, at the commit's xSync, as with the
 * kernel's page cache. With the former 8 MiB threshold a 50,000-row
 * transaction on three indexes sent eight times the pages to the device
 * and made the writer wait for pages in flight (bench/README.md, "Bulk
 * inserts").
 */
static void cache_config(struct pwb_bdi_config *cfg)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
					    : 0;
	uint64_t c = ram / 16;

	if (c < CACHE_MIN_BYTES)
		c = CACHE_MIN_BYTES;
	if (c > CACHE_MAX_BYTES)
		c = CACHE_MAX_BYTES;
	c &= ~(uint64_t)(PAGE - 1);
	cfg->cache_bytes = c;
	cfg->dirty_background_bytes = c / 4;
	cfg->dirty_bytes = c / 2;
}

/* Mount @dev (created with @create_bytes if missing and @create_bytes). */
static int mount_get(const char *dev, uint64_t create_bytes,
		     struct mount **mp)
{
	struct pwb_bdi_config cfg;
	struct pwb_extent resv = {0, 0, DIR_RESERVED};
	struct mount *m;
	struct stat st;
	char *real = NULL, *lockname = NULL;
	const char *ldir;
	int rc = SQLITE_CANTOPEN, ret;
	bool created = false;

	pthread_mutex_lock(&vfs_lock);
	if (stat(dev, &st) && errno == ENOENT && create_bytes &&
	    create_bytes < MIN_IMAGE_BYTES) {
		/* Not made at all, rather than made and then refused. */
		vlog(SQLITE_CANTOPEN, "cannot create %s of %llu bytes: an "
		     "image needs at least %llu (the 2 MiB directory and 16 "
		     "pages)", dev, (unsigned long long)create_bytes,
		     (unsigned long long)MIN_IMAGE_BYTES);
		goto out;
	}
	if (stat(dev, &st) && errno == ENOENT && create_bytes) {
		/*
		 * Sized under a temporary name, then linked into place: a
		 * process opening the same new image at the same moment sees
		 * it whole or not at all (it once saw it empty: "too
		 * small"). link() fails with EEXIST if another won the race.
		 */
		size_t n = strlen(dev) + 32;
		char *tmp = malloc(n);
		int fd = -1;

		if (tmp) {
			snprintf(tmp, n, "%s.new.%ld", dev, (long)getpid());
			fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
				  0644);
		}
		if (fd >= 0) {
			if (ftruncate(fd, (off_t)create_bytes))
				vlog(SQLITE_CANTOPEN, "cannot size %s: %s",
				     dev, strerror(errno));
			else if (!link(tmp, dev))
				created = true;
			else if (errno != EEXIST)
				vlog(SQLITE_CANTOPEN, "cannot create %s: %s",
				     dev, strerror(errno));
			close(fd);
			unlink(tmp);
		}
		free(tmp);
	}
	if (stat(dev, &st)) {
		vlog(SQLITE_CANTOPEN, "device %s: %s", dev, strerror(errno));
		goto out;
	}
	for (m = mounts; m; m = m->next) {
		if (m->st_dev == st.st_dev && m->st_ino == st.st_ino) {
			m->refs++;
			*mp = m;
			rc = SQLITE_OK;
			goto out;
		}
	}
	real = realpath(dev, NULL);
	if (!real) {
		vlog(SQLITE_CANTOPEN, "device %s: %s", dev, strerror(errno));
		goto out;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		rc = SQLITE_NOMEM;
		goto out;
	}
	pthread_mutex_init(&m->lock, NULL);
	pthread_rwlock_init(&m->reload_lock, NULL);
	m->fd = m->lockfd = -1;
	m->path = real;
	real = NULL;
	m->st_dev = st.st_dev;
	m->st_ino = st.st_ino;
	m->next_ino = FIRST_INO;
	ldir = getenv("PWB_VFS_LOCKDIR");
	if (ldir && *ldir) {
		const char *b = strrchr(m->path, '/');

		m->lockbase = sqlite3_mprintf("%s/%s", ldir, b ? b + 1 : m->path);
	} else {
		m->lockbase = sqlite3_mprintf("%s", m->path);
	}
	lockname = sqlite3_mprintf("%s.pwb-lock", m->lockbase);
	if (!m->lockbase || !lockname) {
		rc = SQLITE_NOMEM;
		goto fail;
	}
	{	/* keep lockbase in malloc memory, like the rest */
		char *c = strdup(m->lockbase);

		sqlite3_free(m->lockbase);
		m->lockbase = c;
		if (!c) {
			rc = SQLITE_NOMEM;
			goto fail;
		}
	}
	if (posix_memalign((void **)&m->buf, PAGE, SLOT_BYTES)) {
		rc = SQLITE_NOMEM;
		goto fail;
	}
	m->fd = open(m->path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (m->fd < 0) {
		vlog(SQLITE_CANTOPEN, "device %s: %s", m->path,
		     strerror(errno));
		goto fail;
	}
	if ((S_ISREG(st.st_mode) ? (uint64_t)st.st_size : DIR_RESERVED * 2) <
	    MIN_IMAGE_BYTES) {
		vlog(SQLITE_CANTOPEN, "device %s is too small (it needs more "
		     "than the 2 MiB directory)", m->path);
		goto fail;
	}
	m->lockfd = open(lockname, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (m->lockfd < 0 || (fstat(m->lockfd, &st) == 0 &&
			      st.st_size < PAGE &&
			      ftruncate(m->lockfd, PAGE))) {
		vlog(SQLITE_CANTOPEN, "lock file %s: %s", lockname,
		     strerror(errno));
		goto fail;
	}
	m->epoch = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
			m->lockfd, 0);
	if (m->epoch == MAP_FAILED) {
		m->epoch = NULL;
		goto fail;
	}
	pwb_bdi_config_init(&cfg);
	cfg.page_size = PAGE;
	/* One context: a database's two or three files gain nothing from
	 * parallel writeback, and each context is a flusher thread and an
	 * io_uring (the tuner would start two and add its own thread). */
	cfg.nr_wb_ctx = 1;
	cache_config(&cfg);
	ret = pwb_bdi_open(m->path, &cfg, &m->bdi);
	if (ret) {
		m->bdi = NULL;
		vlog(SQLITE_CANTOPEN, "pwb_bdi_open(%s): %s (%s)", m->path,
		     pwb_strerror(ret), pwb_errmsg());
		goto fail;
	}
	ret = inode_open(m, DIR_INO, &m->dir_inode);
	if (!ret)
		ret = pwb_inode_set_extents(m->dir_inode, &resv, 1);
	if (ret) {
		vlog(SQLITE_CANTOPEN, "reserving the directory of %s: %s (%s)",
		     m->path, pwb_strerror(ret), pwb_errmsg());
		goto fail;
	}
	pthread_mutex_lock(&m->lock);
	rc = mount_load(m);
	pthread_mutex_unlock(&m->lock);
	if (rc)
		goto fail;
	m->refs = 1;
	m->next = mounts;
	mounts = m;
	*mp = m;
	rc = SQLITE_OK;
	goto out;
fail:
	mount_free(m);
	/* An image made by this call and refused leaves nothing behind. */
	if (created) {
		unlink(dev);
		if (lockname)
			unlink(lockname);
	}
out:
	pthread_mutex_unlock(&vfs_lock);
	sqlite3_free(lockname);
	free(real);
	return rc;
}

static int mount_put(struct mount *m)
{
	struct mount **pp;
	int rc = SQLITE_OK;

	pthread_mutex_lock(&vfs_lock);
	if (--m->refs > 0) {
		pthread_mutex_unlock(&vfs_lock);
		return SQLITE_OK;
	}
	for (pp = &mounts; *pp != m; pp = &(*pp)->next)
		;
	*pp = m->next;
	pthread_mutex_lock(&m->lock);
	rc = wlock_put(m);
	if (rc && m->wlocked)
		ofd_lock(m->lockfd, F_UNLCK, false);
	pthread_mutex_unlock(&m->lock);
	mount_free(m);
	pthread_mutex_unlock(&vfs_lock);
	return rc;
}

/* The mount whose directory has @name (refreshed), with a reference. */
static struct mount *mount_of_name(const char *name, struct ent **ep)
{
	struct mount *m;

	pthread_mutex_lock(&vfs_lock);
	for (m = mounts; m; m = m->next) {
		struct ent *e;

		pthread_mutex_lock(&m->lock);
		dir_refresh(m);
		e = ent_find(m, name);
		pthread_mutex_unlock(&m->lock);
		if (e) {
			m->refs++;
			*ep = e;
			break;
		}
	}
	pthread_mutex_unlock(&vfs_lock);
	return m;
}

/* ------------------------------------------------------- io methods */

static int x_close(sqlite3_file *f)
{
	struct pfile *p = (struct pfile *)f;
	struct mount *m = p->m;
	int rc = SQLITE_OK, r;

	pthread_mutex_lock(&m->lock);
	if (p->level > SQLITE_LOCK_SHARED)
		m->nwriters--;
	if ((p->flags & SQLITE_OPEN_MAIN_DB) && --m->ndb == 0 &&
	    !m->nwriters) {
		m->wal_hold = false;
		rc = wlock_put(m);	/* WAL mode held it until now */
	} else if (p->level > SQLITE_LOCK_SHARED && !m->nwriters &&
		   !m->wal_hold) {
		rc = wlock_put(m);
	}
	p->level = SQLITE_LOCK_NONE;
	if (--p->e->nopen == 0 && p->e->gone && !p->e->zombie) {
		struct ent **pp;

		for (pp = &m->ents; *pp != p->e; pp = &(*pp)->next)
			;
		*pp = p->e->next;
		pwb_inode_close(p->e->inode);
		ent_free(p->e);
	}
	pthread_mutex_unlock(&m->lock);
	if (p->lockf) {
		if (p->lockf->pMethods)
			p->lockf->pMethods->xClose(p->lockf);
		sqlite3_free(p->lockf);
	}
	sqlite3_free_filename(p->lockname);
	r = mount_put(m);
	return rc ? rc : r;
}

static int x_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	struct pfile *p = (struct pfile *)f;
	ssize_t n;

	pthread_rwlock_rdlock(&p->m->reload_lock);
	n = pwb_read(p->e->inode, buf, (size_t)amt, (uint64_t)off);
	pthread_rwlock_unlock(&p->m->reload_lock);

	if (n < 0) {
		vlog(SQLITE_IOERR, "read of %s: %s (%s)", p->e->name,
		     pwb_strerror((int)n), pwb_errmsg());
		return map_err((int)n, SQLITE_IOERR_READ);
	}
	if (n < amt) {
		memset((char *)buf + n, 0, (size_t)(amt - n));
		return SQLITE_IOERR_SHORT_READ;
	}
	return SQLITE_OK;
}

/* Writing needs the image lock; rollback modes took it at RESERVED, WAL
 * mode takes it here and keeps it until the database closes. */
static int need_wlock(struct pfile *p)
{
	int rc;

	if (__atomic_load_n(&p->m->wlocked, __ATOMIC_RELAXED))
		return SQLITE_OK;
	pthread_mutex_lock(&p->m->lock);
	rc = wlock_get(p->m, LAZY_LOCK_MS);
	pthread_mutex_unlock(&p->m->lock);
	return rc;
}

static int x_write(sqlite3_file *f, const void *buf, int amt,
		   sqlite3_int64 off)
{
	struct pfile *p = (struct pfile *)f;
	ssize_t n;
	int rc = need_wlock(p);

	if (rc)
		return rc;
	__atomic_store_n(&p->e->written, true, __ATOMIC_SEQ_CST);
	pthread_rwlock_rdlock(&p->m->reload_lock);
	n = pwb_write(p->e->inode, buf, (size_t)amt, (uint64_t)off);
	pthread_rwlock_unlock(&p->m->reload_lock);
	if (n == amt)
		return SQLITE_OK;
	if (n >= 0)
		return SQLITE_FULL;
	if (n != -ENOSPC)
		vlog(SQLITE_IOERR, "write of %s: %s (%s)", p->e->name,
		     pwb_strerror((int)n), pwb_errmsg());
	return map_err((int)n, SQLITE_IOERR_WRITE);
}

static int x_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct pfile *p = (struct pfile *)f;
	struct mount *m = p->m;
	struct ent *e = p->e;
	struct pwb_extent *x = NULL;
	uint64_t cur, sz;
	size_t nr = 0;
	bool frees;
	int rc, ret;

	if (size < 0)
		return SQLITE_IOERR_TRUNCATE;
	rc = need_wlock(p);
	if (rc)
		return rc;
	pthread_mutex_lock(&m->lock);
	ret = pwb_inode_size(e->inode, &cur);
	if (ret)
		goto err;
	if ((uint64_t)size >= cur) {
		ret = pwb_inode_set_size(e->inode, (uint64_t)size);
		if (ret)
			goto err;
		__atomic_store_n(&e->written, true, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&m->lock);
		return SQLITE_OK;
	}
	/* Shrink: the directory first, so the blocks the truncate frees are
	 * not handed to another file while the device still maps them here.
	 * What stays must be durable before the directory says so. */
	if (size > 0) {
		ret = pwb_fsync(e->inode);
		if (!ret)
			ret = capture(e->inode, &sz, &x, &nr);
		if (ret)
			goto err;
		clip_extents(x, &nr, (uint64_t)size);
	}
	{
		/* Does the truncate free blocks? (The device may map more than
		 * the directory says: extents allocated since the last sync.) */
		struct pwb_extent *all = NULL;
		size_t nall = 0;
		uint64_t s2;

		ret = capture(e->inode, &s2, &all, &nall);
		if (ret) {
			free(x);
			goto err;
		}
		frees = !same_extents(all, nall, x, nr);
		free(all);
	}
	free(e->ext);
	e->ext = x;
	e->next_ext = nr;
	e->size = (uint64_t)size;
	/* Blocks it frees may be reused at once: the directory that no
	 * longer maps them must be durable first. A truncate that frees
	 * nothing is flushed by the xSync SQLite sends after a truncate
	 * that matters, like the unix VFS's ftruncate. */
	rc = dir_persist(m, frees);
	if (rc) {
		pthread_mutex_unlock(&m->lock);
		return rc;
	}
	ret = pwb_inode_discard(e->inode, (uint64_t)size, UINT64_MAX);
	if (ret)
		goto err;
	if (frees)
		release_freed(m);
	if (size % PAGE)
		__atomic_store_n(&e->written, true, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&m->lock);
	return SQLITE_OK;
err:
	pthread_mutex_unlock(&m->lock);
	vlog(SQLITE_IOERR, "truncate of %s: %s (%s)", e->name,
	     pwb_strerror(ret), pwb_errmsg());
	return map_err(ret, SQLITE_IOERR_TRUNCATE);
}

/* Does the database header say WAL (read and write versions 2)? */
static bool is_wal(struct pfile *p)
{
	unsigned char v[2];

	return pwb_read(p->e->inode, v, 2, 18) == 2 && v[0] == 2 && v[1] == 2;
}

/*
 * A WAL that grew past its durable size grows to the next multiple of
 * WAL_CHUNK_BYTES, the new part written with zeros, before it is synced.
 * Otherwise every commit that appends frames moves the WAL's size and
 * extents, and its xSync pays a directory write and a second flush after
 * pwb_fsync(); with the chunk, only the commit that crosses into a new
 * chunk does. The zeros are data like any other (written and flushed
 * before the directory names them), and SQLite reads a WAL only up to its
 * first frame that does not check (zeros never do: page number 0, salts
 * and checksums that do not match), as it does when it reuses a WAL after
 * a checkpoint and old frames follow the new ones. Caller holds m->lock.
 */
static int wal_grow(struct pfile *p)
{
	static const unsigned char zeros[64 * 1024];
	struct ent *e = p->e;
	uint64_t cur, end;
	ssize_t n = 0;
	int ret;

	pthread_rwlock_rdlock(&p->m->reload_lock);
	ret = pwb_inode_size(e->inode, &cur);
	if (ret || cur <= e->size) {
		pthread_rwlock_unlock(&p->m->reload_lock);
		return ret ? SQLITE_IOERR_FSTAT : SQLITE_OK;
	}
	end = (cur + WAL_CHUNK_BYTES - 1) / WAL_CHUNK_BYTES * WAL_CHUNK_BYTES;
	while (cur < end) {
		size_t len = end - cur < sizeof(zeros) ? (size_t)(end - cur)
						       : sizeof(zeros);

		n = pwb_write(e->inode, zeros, len, cur);
		if (n <= 0)
			break;
		cur += (uint64_t)n;
	}
	pthread_rwlock_unlock(&p->m->reload_lock);
	if (n < 0) {
		if (n != -ENOSPC)
			vlog(SQLITE_IOERR, "write of %s: %s (%s)", e->name,
			     pwb_strerror((int)n), pwb_errmsg());
		return map_err((int)n, SQLITE_IOERR_WRITE);
	}
	return n ? SQLITE_OK : SQLITE_FULL;
}

/* Data first (pwb_fsync), then the directory if the size or the extents
 * moved (its own write + fdatasync). */
static int x_sync(sqlite3_file *f, int flags)
{
	struct pfile *p = (struct pfile *)f;
	struct mount *m = p->m;
	int rc = SQLITE_OK;

	(void)flags;
	pthread_mutex_lock(&m->lock);
	if (p->flags & SQLITE_OPEN_WAL)
		rc = wal_grow(p);
	if (!rc)
		rc = ent_sync(m, p->e);
	if (rc == SQLITE_DONE || (!rc && m->dir_dirty)) {
		/*
		 * A rollback-mode database's new size and extents need no
		 * flush of their own: until the journal's deletion (or
		 * truncation, or zeroed header) is durable, a crash rolls
		 * the database back to its old size from the journal, and
		 * every later directory write (whole, a higher generation)
		 * holds them too. Its data is durable already (pwb_fsync).
		 * A journal, a WAL, or a database in WAL mode (whose WAL a
		 * later write may reset) is flushed.
		 */
		bool flush = !(p->flags & SQLITE_OPEN_MAIN_DB) || is_wal(p);

		rc = wlock_get(m, LAZY_LOCK_MS);
		if (!rc)
			rc = dir_persist(m, flush);
	} else if (!rc && m->dir_unflushed) {
		/* A truncate or delete wrote it; pwb_fsync() flushes only if
		 * libpwb wrote something. */
		if (fdatasync(m->fd)) {
			rc = SQLITE_IOERR_FSYNC;
		} else {
			m->dir_unflushed = false;
			free_zombies(m);
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static int x_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct pfile *p = (struct pfile *)f;
	uint64_t s;
	int ret;

	pthread_rwlock_rdlock(&p->m->reload_lock);
	ret = pwb_inode_size(p->e->inode, &s);
	pthread_rwlock_unlock(&p->m->reload_lock);

	if (ret)
		return SQLITE_IOERR_FSTAT;
	*size = (sqlite3_int64)s;
	return SQLITE_OK;
}

static int x_lock(sqlite3_file *f, int level)
{
	struct pfile *p = (struct pfile *)f;
	struct mount *m = p->m;
	int rc, old = p->level;

	if (!p->lockf)
		return SQLITE_OK;
	rc = p->lockf->pMethods->xLock(p->lockf, level);
	if (rc)
		return rc;
	pthread_mutex_lock(&m->lock);
	if (old == SQLITE_LOCK_NONE && level >= SQLITE_LOCK_SHARED)
		rc = dir_refresh(m);
	if (!rc && old == SQLITE_LOCK_NONE && !m->wlocked && is_wal(p)) {
		/* A WAL database is one process's at a time (x_shm_map()):
		 * say so here, where SQLite's busy handler waits for it. */
		rc = wlock_get(m, 0);
		if (!rc)
			m->wal_hold = true;
	}
	if (!rc && old < SQLITE_LOCK_RESERVED &&
	    level >= SQLITE_LOCK_RESERVED) {
		rc = wlock_get(m, 0);
		if (!rc)
			m->nwriters++;
	}
	if (rc) {
		pthread_mutex_unlock(&m->lock);
		p->lockf->pMethods->xUnlock(p->lockf, old);
		return rc;
	}
	p->level = level;
	pthread_mutex_unlock(&m->lock);
	return SQLITE_OK;
}

static int x_unlock(sqlite3_file *f, int level)
{
	struct pfile *p = (struct pfile *)f;
	struct mount *m = p->m;
	int rc = SQLITE_OK;

	if (!p->lockf)
		return SQLITE_OK;
	pthread_mutex_lock(&m->lock);
	/* Our writes reach the device, and the directory names them, before
	 * another process may take the lock. */
	if (p->level > SQLITE_LOCK_SHARED && level <= SQLITE_LOCK_SHARED) {
		if (--m->nwriters == 0 && !m->wal_hold)
			rc = wlock_put(m);
	} else if (level == SQLITE_LOCK_NONE && !m->nwriters &&
		   !m->wal_hold) {
		rc = wlock_put(m);
	}
	if (level < p->level)
		p->level = level;
	pthread_mutex_unlock(&m->lock);
	if (rc) {
		vlog(rc, "unlock of %s failed", p->e->name);
		return SQLITE_IOERR_UNLOCK;
	}
	return p->lockf->pMethods->xUnlock(p->lockf, level);
}

static int x_check_reserved(sqlite3_file *f, int *out)
{
	struct pfile *p = (struct pfile *)f;

	if (!p->lockf) {
		*out = 0;
		return SQLITE_OK;
	}
	return p->lockf->pMethods->xCheckReservedLock(p->lockf, out);
}

/* The counters PRAGMA pwb_stats shows, in struct pwb_stats order. */
#define STAT(f) { #f, offsetof(struct pwb_stats, f) }
static const struct {
	const char *name;
	size_t off;
} stat_fields[] = {
	STAT(nr_dirty_inodes), STAT(dirty_pages), STAT(writeback_pages),
	STAT(dirtied_pages), STAT(written_pages), STAT(io_submitted),
	STAT(io_errors), STAT(bytes_written), STAT(nr_inodes),
	STAT(wb_passes), STAT(periodic_passes), STAT(background_passes),
	STAT(sync_passes), STAT(inodes_written), STAT(device_flushes),
	STAT(flush_ns), STAT(write_bandwidth), STAT(throttle_ns),
	STAT(throttle_events), STAT(io_extents), STAT(auto_nr_wb_ctx),
	STAT(cache_pages), STAT(reclaimed_pages), STAT(extents),
	STAT(reserved_bytes), STAT(free_bytes), STAT(read_ios),
	STAT(read_pages), STAT(busy_bytes),
};
#undef STAT

/*
 * PRAGMA pwb_stats: libpwb's counters of the database's bdi, one
 * "name value" line each; PRAGMA pwb_stats = NAME: that counter's value
 * alone. @a is SQLite's array: a[1] the pragma, a[2] its value or NULL,
 * a[0] where the result (or an error message) goes.
 */
static int pragma_pwb_stats(struct pfile *p, char **a)
{
	struct pwb_stats st;
	sqlite3_str *out;
	size_t i;
	int rc;

	rc = pwb_bdi_stats(p->m->bdi, &st);
	if (rc) {
		a[0] = sqlite3_mprintf("pwb_bdi_stats: %s", pwb_strerror(rc));
		return SQLITE_ERROR;
	}
	out = sqlite3_str_new(NULL);
	for (i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)&st + stat_fields[i].off, sizeof(v));
		if (a[2]) {
			if (!strcmp(a[2], stat_fields[i].name)) {
				sqlite3_str_appendf(out, "%llu",
						    (unsigned long long)v);
				break;
			}
			continue;
		}
		sqlite3_str_appendf(out, "%s%s %llu", i ? "\n" : "",
				    stat_fields[i].name, (unsigned long long)v);
	}
	if (a[2] && i == sizeof(stat_fields) / sizeof(stat_fields[0])) {
		sqlite3_free(sqlite3_str_finish(out));
		a[0] = sqlite3_mprintf("pwb_stats: no counter named \"%s\"",
				       a[2]);
		return SQLITE_ERROR;
	}
	a[0] = sqlite3_str_finish(out);
	return a[0] ? SQLITE_OK : SQLITE_NOMEM;
}

static int x_file_control(sqlite3_file *f, int op, void *arg)
{
	struct pfile *p = (struct pfile *)f;

	if (op == SQLITE_FCNTL_VFSNAME) {
		*(char **)arg = sqlite3_mprintf("pwb");
		return SQLITE_OK;
	}
	if (op == SQLITE_FCNTL_PRAGMA) {
		char **a = arg;

		if (!sqlite3_stricmp(a[1], "pwb_stats"))
			return pragma_pwb_stats(p, a);
	}
	return SQLITE_NOTFOUND;
}

/* Every write is whole 4096-byte pages at 4096-aligned device offsets
 * (O_DIRECT); SQLite's 4096-byte pages map 1:1 onto them. */
static int x_sector_size(sqlite3_file *f)
{
	(void)f;
	return PAGE;
}

static int x_device_characteristics(sqlite3_file *f)
{
	(void)f;
	/* README.md, "Device characteristics", says why these two and no
	 * others. */
	return SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_SAFE_APPEND;
}

static int x_shm_map(sqlite3_file *f, int pg, int pgsz, int extend,
		     void volatile **pp)
{
	struct pfile *p = (struct pfile *)f;
	int rc = SQLITE_OK;

	if (!p->lockf)
		return SQLITE_IOERR_SHMMAP;
	/* WAL mode is one process at a time (README.md): the wal-index names
	 * frames that may still sit in the writer's cache. The first process
	 * to map it takes the image lock until the database closes; another
	 * gets SQLITE_BUSY rather than a wrong page. */
	pthread_mutex_lock(&p->m->lock);
	if (!p->m->wlocked)
		rc = wlock_get(p->m, 0);
	if (!rc)
		p->m->wal_hold = true;
	pthread_mutex_unlock(&p->m->lock);
	if (rc)
		return rc;
	return p->lockf->pMethods->xShmMap(p->lockf, pg, pgsz, extend, pp);
}

static int x_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	struct pfile *p = (struct pfile *)f;

	if (!p->lockf)
		return SQLITE_IOERR_SHMLOCK;
	return p->lockf->pMethods->xShmLock(p->lockf, off, n, flags);
}

static void x_shm_barrier(sqlite3_file *f)
{
	struct pfile *p = (struct pfile *)f;

	if (p->lockf)
		p->lockf->pMethods->xShmBarrier(p->lockf);
}

static int x_shm_unmap(sqlite3_file *f, int del)
{
	struct pfile *p = (struct pfile *)f;

	if (!p->lockf)
		return SQLITE_OK;
	return p->lockf->pMethods->xShmUnmap(p->lockf, del);
}

static const sqlite3_io_methods pwb_io = {
	.iVersion = 2,
	.xClose = x_close,
	.xRead = x_read,
	.xWrite = x_write,
	.xTruncate = x_truncate,
	.xSync = x_sync,
	.xFileSize = x_file_size,
	.xLock = x_lock,
	.xUnlock = x_unlock,
	.xCheckReservedLock = x_check_reserved,
	.xFileControl = x_file_control,
	.xSectorSize = x_sector_size,
	.xDeviceCharacteristics = x_device_characteristics,
	.xShmMap = x_shm_map,
	.xShmLock = x_shm_lock,
	.xShmBarrier = x_shm_barrier,
	.xShmUnmap = x_shm_unmap,
};

/* --------------------------------------------------------- vfs methods */

/* The unix VFS file that carries the locks (and shm) of database @name. */
static int open_lockfile(struct pfile *p, const char *name)
{
	char *base = sqlite3_mprintf("%s.pwb-%016llx", p->m->lockbase,
				     (unsigned long long)fnv64(name));
	char *j, *w;
	int rc, out;

	if (!base)
		return SQLITE_NOMEM;
	j = sqlite3_mprintf("%s-journal", base);
	w = sqlite3_mprintf("%s-wal", base);
	if (j && w)
		p->lockname = sqlite3_create_filename(base, j, w, 0, NULL);
	sqlite3_free(base);
	sqlite3_free(j);
	sqlite3_free(w);
	p->lockf = sqlite3_malloc(unix_vfs->szOsFile);
	if (!p->lockname || !p->lockf)
		return SQLITE_NOMEM;
	memset(p->lockf, 0, (size_t)unix_vfs->szOsFile);
	rc = unix_vfs->xOpen(unix_vfs, p->lockname, p->lockf,
			     SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE |
				     SQLITE_OPEN_CREATE,
			     &out);
	if (rc)
		vlog(rc, "cannot open the lock file of %s", name);
	return rc;
}

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f,
		  int flags, int *out_flags)
{
	struct pfile *p = (struct pfile *)f;
	const char *dev, *size, *size_from;
	struct mount *m = NULL;
	struct ent *e;
	uint64_t create;
	int rc, ret;

	(void)vfs;
	if (!name || !(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL |
				SQLITE_OPEN_WAL)))
		return unix_vfs->xOpen(unix_vfs, name, f, flags, out_flags);
	memset(p, 0, sizeof(*p));
	if (strlen(name) > MAX_NAME) {
		vlog(SQLITE_CANTOPEN, "name too long (more than 255 bytes): "
		     "%.64s...", name);
		return SQLITE_CANTOPEN;
	}
	dev = sqlite3_uri_parameter(name, "device");
	if (!dev)
		dev = getenv("PWB_VFS_DEVICE");
	if (!dev || !*dev) {
		vlog(SQLITE_CANTOPEN, "%s: no device (URI parameter device= "
		     "or PWB_VFS_DEVICE)", name);
		return SQLITE_CANTOPEN;
	}
	size = sqlite3_uri_parameter(name, "device_size");
	size_from = "device_size";
	if (!size) {
		size = getenv("PWB_VFS_DEVICE_SIZE");
		size_from = "PWB_VFS_DEVICE_SIZE";
	}
	create = DEFAULT_IMAGE_BYTES;
	if (size && pwbex_parse_size(size, &create)) {
		vlog(SQLITE_CANTOPEN, "%s: %s=%s is not a size (bytes, or "
		     "with K, M or G)", name, size_from, size);
		return SQLITE_CANTOPEN;
	}
	if (!(flags & SQLITE_OPEN_CREATE))
		create = 0;
	rc = mount_get(dev, create, &m);
	if (rc)
		return rc;
	p->m = m;
	pthread_mutex_lock(&m->lock);
	rc = dir_refresh(m);
	e = rc ? NULL : ent_find(m, name);
	if (!rc && e && (flags & SQLITE_OPEN_EXCLUSIVE))
		rc = SQLITE_CANTOPEN;
	if (!rc && !e && !(flags & SQLITE_OPEN_CREATE))
		rc = SQLITE_CANTOPEN;
	if (!rc && !e) {
		rc = wlock_get(m, LAZY_LOCK_MS);
		e = rc ? NULL : calloc(1, sizeof(*e));
		if (!rc && !e)
			rc = SQLITE_NOMEM;
		if (e) {
			strcpy(e->name, name);
			e->ino = m->next_ino++;
			ret = inode_open(m, e->ino, &e->inode);
			if (ret) {
				vlog(SQLITE_CANTOPEN, "pwb_inode_open(%s): "
				     "%s (%s)", name, pwb_strerror(ret),
				     pwb_errmsg());
				free(e);
				e = NULL;
				rc = SQLITE_CANTOPEN;
			} else {
				/* Persisted at its first xSync (or when the
				 * image lock goes): a file nobody synced may
				 * vanish in a crash, as SQLite allows. */
				e->next = m->ents;
				m->ents = e;
				m->dir_dirty = true;
			}
		}
	}
	if (e && !rc) {
		e->nopen++;
		p->e = e;
	}
	pthread_mutex_unlock(&m->lock);
	if (rc) {
		mount_put(m);
		return rc;
	}
	p->flags = flags;
	if (flags & SQLITE_OPEN_MAIN_DB) {
		pthread_mutex_lock(&m->lock);
		m->ndb++;
		pthread_mutex_unlock(&m->lock);
		rc = open_lockfile(p, name);
		if (rc) {
			p->methods = &pwb_io;
			x_close(f);
			p->methods = NULL;
			return rc;
		}
	}
	p->methods = &pwb_io;
	if (out_flags)
		*out_flags = flags;
	return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int dir_sync)
{
	struct ent *e = NULL;
	struct mount *m = mount_of_name(name, &e);
	int rc, ret;

	(void)vfs;
	/* Without @dir_sync (synchronous=EXTRA) the unix VFS does not sync
	 * the directory after an unlink either: the next flush does it. */
	if (!m)
		return SQLITE_IOERR_DELETE_NOENT;
	pthread_mutex_lock(&m->lock);
	rc = wlock_get(m, LAZY_LOCK_MS);
	if (!rc && (e = ent_find(m, name))) {
		e->gone = true;
		/* Before the blocks go free. */
		rc = dir_persist(m, dir_sync != 0);
		if (rc) {
			e->gone = false;
		} else if (!dir_sync) {
			e->written = false;
			e->zombie = true;	/* free_zombies() frees it */
		} else {
			ret = pwb_inode_discard(e->inode, 0, UINT64_MAX);
			if (ret)
				rc = SQLITE_IOERR_DELETE;
			else
				release_freed(m);
			e->written = false;
			if (!e->nopen) {
				struct ent **pp;

				for (pp = &m->ents; *pp != e; pp = &(*pp)->next)
					;
				*pp = e->next;
				pwb_inode_close(e->inode);
				ent_free(e);
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
	mount_put(m);
	return rc;
}

static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *res)
{
	struct ent *e = NULL;
	struct mount *m = mount_of_name(name, &e);

	(void)vfs;
	(void)flags;
	*res = 0;
	if (!m)
		return SQLITE_OK;
	pthread_mutex_lock(&m->lock);
	*res = ent_find(m, name) != NULL;
	pthread_mutex_unlock(&m->lock);
	mount_put(m);
	return SQLITE_OK;
}

/* Names are keys in the image's directory, not paths: kept as given. */
static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int n,
			   char *out)
{
	(void)vfs;
	if ((int)strlen(name) >= n)
		return SQLITE_CANTOPEN;
	strcpy(out, name);
	return SQLITE_OK;
}

static void *v_dlopen(sqlite3_vfs *v, const char *f)
{
	(void)v;
	return unix_vfs->xDlOpen(unix_vfs, f);
}

static void v_dlerror(sqlite3_vfs *v, int n, char *msg)
{
	(void)v;
	unix_vfs->xDlError(unix_vfs, n, msg);
}

static void (*v_dlsym(sqlite3_vfs *v, void *h, const char *s))(void)
{
	(void)v;
	return unix_vfs->xDlSym(unix_vfs, h, s);
}

static void v_dlclose(sqlite3_vfs *v, void *h)
{
	(void)v;
	unix_vfs->xDlClose(unix_vfs, h);
}

static int v_randomness(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return unix_vfs->xRandomness(unix_vfs, n, out);
}

static int v_sleep(sqlite3_vfs *v, int us)
{
	(void)v;
	return unix_vfs->xSleep(unix_vfs, us);
}

static int v_current_time(sqlite3_vfs *v, double *t)
{
	(void)v;
	return unix_vfs->xCurrentTime(unix_vfs, t);
}

static int v_get_last_error(sqlite3_vfs *v, int n, char *msg)
{
	(void)v;
	return unix_vfs->xGetLastError(unix_vfs, n, msg);
}

static int v_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *t)
{
	(void)v;
	return unix_vfs->xCurrentTimeInt64(unix_vfs, t);
}

static sqlite3_vfs pwb_vfs = {
	.iVersion = 2,
	.mxPathname = MAX_NAME + 1,
	.zName = "pwb",
	.xOpen = v_open,
	.xDelete = v_delete,
	.xAccess = v_access,
	.xFullPathname = v_full_pathname,
	.xDlOpen = v_dlopen,
	.xDlError = v_dlerror,
	.xDlSym = v_dlsym,
	.xDlClose = v_dlclose,
	.xRandomness = v_randomness,
	.xSleep = v_sleep,
	.xCurrentTime = v_current_time,
	.xGetLastError = v_get_last_error,
	.xCurrentTimeInt64 = v_current_time_int64,
};

int pwbvfs_register(int make_default)
{
	static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
	int rc = SQLITE_OK;

	pthread_mutex_lock(&reg_lock);
	if (!unix_vfs) {
		sqlite3_vfs *u = sqlite3_vfs_find("unix");

		if (!u || u->iVersion < 2 || u->szOsFile < 0) {
			rc = SQLITE_ERROR;
			goto out;
		}
		unix_vfs = u;
		pwb_vfs.szOsFile = u->szOsFile > (int)sizeof(struct pfile) ?
					   u->szOsFile :
					   (int)sizeof(struct pfile);
		rc = sqlite3_vfs_register(&pwb_vfs, make_default);
		if (rc)
			unix_vfs = NULL;
	}
out:
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_pwbvfs_init(sqlite3 *db, char **err,
			const sqlite3_api_routines *api)
{
	int rc;

	(void)db;
	SQLITE_EXTENSION_INIT2(api);
	rc = pwbvfs_register(0);
	if (rc) {
		if (err)
			*err = sqlite3_mprintf("pwbvfs: cannot register the "
					       "\"pwb\" VFS");
		return rc;
	}
	/* The VFS outlives the connection that loaded it. */
	return SQLITE_OK_LOAD_PERMANENTLY;
}
