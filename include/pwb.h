/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb.h - libpwb, parallel writeback for user-space storage software
 *
 * libpwb gives a program that writes its own data with O_DIRECT (a database,
 * an object store, a storage daemon) the Linux kernel's writeback machinery:
 * dirty-page tracking, periodic ("kupdate") flushing of expired data,
 * background flushing above a threshold, and livelock-free integrity sync.
 * Like the 2025 "parallelizing filesystem writeback" kernel series, each
 * backing device has several writeback contexts, each with its own dirty
 * lists and flusher thread, and every inode is affined to one context.
 *
 * The object model:
 *
 *	struct pwb_bdi			one backing device (block device or file),
 *	  |				opened with O_DIRECT
 *	  +-- writeback context 0	b_dirty, b_io, b_more_io, b_dirty_time,
 *	  +-- writeback context 1	a flusher thread, a work queue, statistics
 *	  +-- ...
 *	struct pwb_inode		an application object (64-bit number) whose
 *					pages the application owns and libpwb writes
 *
 * The application owns the page data: it hands libpwb two callbacks, one
 * that returns a page's memory and one that maps a page to a device offset.
 * libpwb owns the dirty state and decides when and by whom pages are written.
 * Or libpwb owns the pages too (a page cache: pwb_write(), pwb_read()), and
 * with them the device space (an extent allocator): pwb_inode_open() lists
 * the three modes.
 *
 * Conventions, for every function below unless its comment says otherwise:
 *  - It returns 0 on success or a negative errno value; pwb_strerror() turns
 *    one into text and pwb_errmsg() gives the calling thread's detailed
 *    message for the last failure of a libpwb call.
 *  - It is thread-safe: any thread may call it at any time, on any object,
 *    concurrently with other calls, including a close of that object: a
 *    close waits for the calls on its object that are already running
 *    (see pwb_bdi_close() and pwb_inode_close()): a call is running from
 *    the moment it first reads the object, however long its thread is
 *    preempted before its first lock. A call that *begins*
 *    after the close began is an application bug, as with free(); while
 *    the object still exists libpwb detects it and fails the call with
 *    -ESHUTDOWN (bdi functions) or -EBADF (inode functions), but it cannot
 *    detect calls that begin once the memory is gone.
 *  - A function that waits for writeback (pwb_fsync, pwb_sync, the close
 *    functions) must not be called from an inode ops callback, which runs on
 *    a flusher thread; it fails with -EDEADLK there instead of hanging.
 *  - Threads need no registration with liburcu: libpwb uses the "bulletproof"
 *    flavour (urcu-bp), meant for libraries that do not control their
 *    callers' threads.
 *
 * Caveats:
 *  - fork(): the flusher threads (and liburcu's helper thread) are not
 *    copied into a child, and locks they held at the fork stay held there.
 *    A child must not use, or close, a bdi or inode inherited from its
 *    parent, and must not call libpwb functions other than pwb_version()
 *    and pwb_strerror(), which take no lock; it should exec() or _exit().
 *    The parent is unaffected and its data stays intact. The device is
 *    opened O_CLOEXEC, so an exec()ed program does not inherit it.
 *  - Signals: flusher threads block every asynchronous signal, so the
 *    application's handlers run on its own threads only. A signal that
 *    interrupts an application thread inside pwb_sync(), pwb_fsync() or a
 *    close (even a handler installed without SA_RESTART) does not make the
 *    call fail: the waits inside are not interruptible and a device flush
 *    interrupted with EINTR is repeated.
 *
 * Structs that cross the ABI, and how they grow. struct pwb_bdi_config,
 * struct pwb_inode_ops, struct pwb_stats, struct pwb_bdi_info and struct
 * pwb_fault grow only at the end:
 *  - To add a field, append it after the last one. That is the whole rule:
 *    never insert, reorder, resize or remove a field, and never give one of
 *    these structs a new meaning for an existing field.
 *  - Every function that takes one of them also takes its size, and pwb.h
 *    passes that size for you: the function's name is also a macro that
 *    adds sizeof(struct ...) as your program was compiled, so calls read as
 *    if there were no size argument (pwb_bdi_stats(bdi, &st)). The library
 *    reads or writes only that many bytes. Fields a program's header does
 *    not know take their defaults (pwb_bdi_config_init()'s for the config,
 *    0 = "absent" for the others); a struct from a newer header than the
 *    library's must leave the fields this library does not know zero
 *    (-E2BIG otherwise), and output structs get them zeroed. (To call the
 *    function itself, or take its address, write (pwb_bdi_stats) and pass
 *    the size yourself.) A new function taking such a struct, or a new
 *    struct that may grow, follows the same pattern (lib/abi.c).
 *  - struct pwb_event (given to the event callback) and the policy
 *    structs of pwb-policy.h grow at the end too; a callback reads only
 *    the fields its header knows, and struct pwb_policy_ops carries
 *    abi_version.
 *  - lib/libpwb.sym has one version node per release that adds or changes
 *    functions: PWB_0.1 holds the symbols of the pre-release development
 *    snapshots (including, under the same names, the size-less variants of
 *    the functions above, for programs built against those headers), and
 *    PWB_0.1.0 the functions the first release added or changed (a
 *    function added before 0.1.0 ships goes there).
 *
 * Handles: a function takes a const handle when it reads the object
 * without a lock or reference of its own (fields fixed at open, counters,
 * RCU-published state): pwb_bdi_nr_wb_ctx(), pwb_bdi_info(), the stats and
 * fault-hit counters, pwb_inode_priv(), pwb_inode_ino(), pwb_inode_wb_ctx().
 * Every other function takes a plain pointer, even a query that locks the
 * object (pwb_inode_error()) or pins it (pwb_bdi_policy()).
 *
 * More: the man pages (libpwb(7), one page per function in section 3),
 * README.md, doc/api.md (a guide to the calls), doc/design.md (the
 * algorithm, lists, locking, RCU use), doc/faults.md (write errors).
 */
#ifndef PWB_H
#define PWB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PWB_BUILDING_LIB) && defined(__GNUC__)
#define PWB_API __attribute__((visibility("default")))
#else
#define PWB_API
#endif

/* ---------------------------------------------------------------------- */
/* Version                                                                */

#define PWB_VERSION_MAJOR 0
#define PWB_VERSION_MINOR 1
#define PWB_VERSION_PATCH 0
#define PWB_VERSION_NUMBER                                                     \
	((PWB_VERSION_MAJOR << 16) | (PWB_VERSION_MINOR << 8) |                \
	 PWB_VERSION_PATCH)

/**
 * pwb_version() - the version of the library the program runs against
 *
 * Context: any thread.
 * Return: PWB_VERSION_NUMBER of the library that was loaded, which may
 *         differ from the one the program was compiled with.
 */
PWB_API unsigned int pwb_version(void);

/* ---------------------------------------------------------------------- */
/* Errors                                                                 */

/**
 * pwb_strerror() - describe an error code
 * @err: a value returned by a libpwb function (negative errno), or 0
 *
 * Context: any thread.
 * Return: a static string, never NULL. Unknown values give a generic text.
 */
PWB_API const char *pwb_strerror(int err);

/**
 * pwb_errmsg() - the calling thread's message for its last libpwb failure
 *
 * Every function that fails with a negative errno also records one line
 * saying what exactly was wrong ("page_size 3000 is not a power of two").
 * The text belongs to the calling thread and stays valid until its next
 * libpwb call.
 *
 * Context: any thread.
 * Return: the message, or "" if the thread's last call did not fail.
 */
PWB_API const char *pwb_errmsg(void);

/* ---------------------------------------------------------------------- */
/* Handles                                                                */

struct pwb_bdi;
struct pwb_inode;
struct pwb_event;
struct pwb_domain;
struct pwb_tenant;

/* ---------------------------------------------------------------------- */
/* Configuration                                                          */

/** Largest number of writeback contexts one bdi accepts. */
#define PWB_MAX_WB_CTX 64
/** Default upper bound of the automatic tuner (auto_max_wb_ctx = 0). */
#define PWB_AUTO_MAX_WB_CTX 8

/**
 * struct pwb_bdi_config - how a bdi behaves
 *
 * Fill it with pwb_bdi_config_init(), then change what you need. Grows
 * only at the end (see "Structs that cross the ABI" at the top): a program
 * built against an older pwb.h passes its smaller size and gets defaults
 * for the fields it does not know.
 */
struct pwb_bdi_config {
	/** Writeback contexts (lists + flusher thread each). 1 is the legacy
	 *  single-threaded behaviour. 0 lets libpwb choose: it turns on the
	 *  automatic tuner (PWB_BDI_AUTO_WB_CTX, see there) and starts from
	 *  2 contexts, whatever the device's rotational flag says (virtio
	 *  and RAID disks often claim to rotate); the tuner goes down to 1
	 *  where 2 are not measurably faster, up to auto_max_wb_ctx where
	 *  more are. pwb_bdi_info() says what was chosen and why. A
	 *  non-zero count is used as given, without the tuner unless the
	 *  flag is set. At most PWB_MAX_WB_CTX. Default 0. */
	unsigned int nr_wb_ctx;
	/** Shard policy spec, "name[:key=value,...]"; NULL means the default
	 *  "inode-hash" (inode number modulo contexts). Also built in:
	 *  "alloc-group", "least-loaded", "hint", "xarray", "shared-list"
	 *  and "region" (one inode's pages on several contexts, by device
	 *  region); pwb-policy.h describes each. The string is copied. */
	const char *policy;
	/** Page size in bytes: a power of two, at least the device's logical
	 *  block size, at most 1 MiB and at most max_io_bytes. Default 4096. */
	unsigned int page_size;
	/** Background writeback starts when the bdi's dirty bytes exceed this;
	 *  0 disables background writeback, except while dirty + writeback
	 *  bytes are above the throttle's set point (half way to
	 *  dirty_bytes), where it runs whatever this is. A dirtying thread
	 *  compares every 1/64 of this (at most 32 pages) it dirties, as
	 *  the kernel's ratelimit does, so the start may come that many
	 *  pages per thread late. Default 64 MiB. */
	uint64_t dirty_background_bytes;
	/** Hard limit on dirty bytes, used by dirty throttling; 0 means no
	 *  limit. Must be 0 or >= dirty_background_bytes. Default 256 MiB. */
	uint64_t dirty_bytes;
	/** Dirty data older than this is written by periodic writeback.
	 *  Default 30000 (30 s). */
	unsigned int dirty_expire_ms;
	/** Interval of periodic writeback; 0 disables it. Default 5000. */
	unsigned int dirty_writeback_ms;

	/** Largest single write in bytes; contiguous dirty pages with
	 *  contiguous device offsets are merged up to this. A multiple of
	 *  page_size, at most 64 MiB. Default 1 MiB. */
	unsigned int max_io_bytes;
	/** An inode whose only dirty state is its timestamps is written after
	 *  this long (or by sync). Default 43200000 (12 h, the kernel's). */
	unsigned int dirtytime_expire_ms;
	/** I/O backend: "io_uring" (io_depth writes in flight per context;
	 *  needs liburing at build time and a kernel that allows io_uring);
	 *  "psync" (pwritev, one write in flight per context); "null"
	 *  (completes writes without doing them: measures the engine's own
	 *  cost, nothing is durable). NULL, the default, picks io_uring
	 *  where io_uring_queue_init() succeeds at open (built with
	 *  liburing, and neither kernel.io_uring_disabled, seccomp nor
	 *  RLIMIT_MEMLOCK refuse it), psync otherwise; pwb_bdi_info() says
	 *  which and why. */
	const char *backend;
	/** Clock used for every time decision (expiry, periodic interval,
	 *  bandwidth), in nanoseconds, monotonic. NULL means CLOCK_MONOTONIC.
	 *  Tests inject a fake clock here; it is called from any thread. */
	uint64_t (*clock)(void *clock_arg);
	void *clock_arg;
	/** Open flags, PWB_BDI_* below. Default 0. */
	unsigned int flags;
	/** Writes each context keeps in flight with an asynchronous backend
	 *  (io_uring); 1 to 4096. The psync backend has one. Default 32. */
	unsigned int io_depth;
	/** Longest a throttled dirtier waits for the device before
	 *  pwb_balance_dirty() gives -ETIMEDOUT; 0 waits forever.
	 *  Default 30000. */
	unsigned int throttle_timeout_ms;
	/** Flusher threads, apart from the contexts (lists): flusher f
	 *  serves the contexts whose index modulo nr_flushers is f. 0 means
	 *  one thread per context. nr_wb_ctx = 1 with nr_flushers = 1 is the
	 *  kernel's legacy single-threaded writeback. At most
	 *  PWB_MAX_WB_CTX. Default 0. */
	unsigned int nr_flushers;
	/** Cap on writes in flight for the whole bdi, over all contexts (for
	 *  network storage that cannot take more); 0 means no cap.
	 *  Default 0. */
	unsigned int max_inflight;
	/** Consecutive failed writeback visits of an inode after which it is
	 *  marked failed: pwb_fsync() and pwb_inode_close() then return the
	 *  error, even after later writes succeed, until
	 *  pwb_inode_clear_error(). 0 never marks an inode. Default 8. */
	unsigned int max_write_failures;
	/** With PWB_BDI_AUTO_WB_CTX: the fewest contexts the tuner may
	 *  choose; 0 means 1. At most PWB_MAX_WB_CTX (checked even without
	 *  the flag). Default 0. */
	unsigned int auto_min_wb_ctx;
	/** With PWB_BDI_AUTO_WB_CTX: the most contexts the tuner may choose;
	 *  0 means PWB_AUTO_MAX_WB_CTX, or auto_min_wb_ctx if that is more.
	 *  At most PWB_MAX_WB_CTX and not below auto_min_wb_ctx (checked
	 *  even without the flag). Default 0. */
	unsigned int auto_max_wb_ctx;
	/** With PWB_BDI_AUTO_WB_CTX: length of one measurement window in
	 *  milliseconds of cfg.clock; 0 means 200. Otherwise 10 .. 600000
	 *  (checked even without the flag). Default 0. */
	unsigned int auto_interval_ms;
	/** Cap on the write rate of background, periodic and
	 *  pwb_bdi_writeback() passes together, in bytes/s (a token bucket
	 *  holding a tenth of a second of the rate, at least max_io_bytes);
	 *  integrity sync (pwb_sync, pwb_fsync, close) is never capped. A
	 *  capped pass ends early (its pages stay dirty for the next one)
	 *  when other work is queued or a re-shard or policy switch begins.
	 *  0 means no cap. Default 0. */
	uint64_t rate_limit_bytes_per_sec;
	/** Optional. Called at the start and end of every writeback pass
	 *  (on the context's flusher thread) and after every sleep of a
	 *  throttled dirtier (on that thread, inside pwb_mark_dirty or
	 *  pwb_balance_dirty), with @event_arg. It runs with no libpwb lock
	 *  held, under the rules of the inode ops callbacks (struct
	 *  pwb_inode_ops: no pwb_fsync, pwb_sync or close; on the dirtier's
	 *  thread no lock the dirtier holds), and should return quickly: the
	 *  pass or the dirtier waits for it. NULL: no events. */
	void (*event)(const struct pwb_event *ev, void *event_arg);
	void *event_arg;
	/** Optional, for the write-ahead rule (pwb_mark_dirty_lsn()). Make
	 *  the application's log durable up to at least @lsn and return 0,
	 *  or return a negative errno. Writeback calls it, on a flusher
	 *  thread with no libpwb lock held, once before it submits a batch
	 *  of pages holding an LSN above the durable LSN
	 *  (pwb_bdi_log_durable()), with the batch's highest LSN; after a
	 *  0 the durable LSN is at least @lsn. It runs under the rules of
	 *  the inode ops callbacks: no pwb_fsync(), pwb_sync() or close,
	 *  and it must not wait for writeback of this bdi (a log kept as
	 *  an inode of the same bdi would deadlock: keep the log on another
	 *  bdi or file), nor for a thread that this bdi may throttle
	 *  (PWB_BDI_THROTTLE: that thread waits for this very flusher).
	 *  On an error the batch's held pages stay dirty; a
	 *  background or periodic pass does not record it, an integrity
	 *  sync reports it like a write error (-EAGAIN becomes -EBUSY).
	 *  NULL: pages whose LSN is not yet durable are left dirty until
	 *  pwb_bdi_log_durable() covers them. */
	int (*log_force)(uint64_t lsn, void *arg);
	void *log_force_arg;
	/** Most memory, in bytes, of the page cache of library-owned
	 *  inodes (pwb_write(), pwb_read()); clean pages are reclaimed by
	 *  the writeback contexts, and a writer that finds the cache full
	 *  waits for writeback (up to throttle_timeout_ms). Once an inode
	 *  with library-owned pages is open, background writeback starts
	 *  at half the cache if dirty_background_bytes is more. At least
	 *  16 pages are allowed. 0 means the larger of 256 MiB and twice
	 *  dirty_bytes. The memory mapped for the pages is cache_bytes
	 *  rounded up to 2 MiB, plus about one 2 MiB chunk per thread
	 *  adding pages at the same moment: the memory of a page that
	 *  leaves the cache (reclaim, close, truncate) serves the next one
	 *  at once. Default 0. */
	uint64_t cache_bytes;
	/** Allocation groups of the built-in allocator (inodes opened
	 *  without get_page and map_page): the device is split into this
	 *  many equal groups, each with its own free-space index and lock.
	 *  0 means one per GiB of device, at least 4 and at most 64, each
	 *  at least 16 MiB (so 1 to 3 on devices under 64 MiB); never
	 *  more than the device's pages. At most 4096. Default 0. */
	unsigned int nr_alloc_groups;
	/** The memory domain this bdi joins (pwb_domain_create()), or NULL
	 *  for none. In a domain, the bdi's dirty thresholds are its share
	 *  of the domain's dirty_bytes and dirty_background_bytes, and its
	 *  own dirty_bytes and dirty_background_bytes are not used (they are
	 *  still checked). In a domain with a cache_bytes budget, the
	 *  bdi's page cache draws from it: its own cache_bytes, if not 0,
	 *  bounds it further and must not be above the budget. The domain
	 *  must outlive the bdi: destroy it only after every bdi in it is
	 *  closed. Default NULL. */
	struct pwb_domain *domain;
	/** With a domain: the smallest share of the domain's limits this
	 *  bdi keeps, in parts per million, whatever its writeback; the
	 *  others divide what the floors leave. The floors of the bdis of a
	 *  domain add up to at most 1000000. 0 without a domain. Default 0. */
	unsigned int min_share_ppm;
	/** With a domain: the largest share this bdi may have, in parts per
	 *  million, at least min_share_ppm; 0 means 1000000 (no bound). 0
	 *  without a domain. Default 0. */
	unsigned int max_share_ppm;
	/** Most bytes read ahead of a sequential reader of library-owned
	 *  pages (pwb_read()): a reader detected as sequential gets a
	 *  window that starts at four times its request and doubles up to
	 *  this, read asynchronously (with the io_uring backend) while it
	 *  consumes the one before; random readers get none. At most a
	 *  eighth of the cache is used; PWB_FADV_SEQUENTIAL doubles it.
	 *  0 turns readahead off. Default 2 MiB. */
	uint64_t readahead_bytes;
};

/** pwb_mark_dirty() calls pwb_balance_dirty() itself (dirty throttling). */
#define PWB_BDI_THROTTLE 0x1u
/**
 * Automatic parallelism: a tuner thread measures the bdi's write bandwidth
 * in windows of auto_interval_ms and moves the number of contexts within
 * [auto_min_wb_ctx, auto_max_wb_ctx] by hill climbing, re-sharding live as
 * pwb_bdi_set_nr_wb_ctx() does. nr_wb_ctx = 0 turns it on without the
 * flag. It starts from nr_wb_ctx if that is not 0 (it must then lie within
 * the bounds), else from 2, moved into the bounds. Only windows in which
 * writeback had work all along (dirty or in-flight pages at both ends, at
 * least 64 pages written) count: an idle bdi is never tuned. A count must be more than
 * 5% faster than the fastest fewer-context count to be preferred, so noise
 * and flat curves settle on the smaller count; a settled bdi re-checks a
 * neighbouring count every 30 measured windows. pwb_bdi_set_nr_wb_ctx()
 * with a count pauses tuning (the caller's count wins); with 0 it resumes.
 * What the tuner chose and why is in pwb_bdi_stats() (auto_* fields, see
 * enum pwb_auto_reason). doc/design.md, "Automatic parallelism", has the
 * algorithm.
 */
#define PWB_BDI_AUTO_WB_CTX 0x2u
/**
 * PWB_BDI_ATOMIC_WRITES - require untorn pages
 *
 * Where the device or file reports atomic writes (statx with
 * STATX_WRITE_ATOMIC, Linux 6.11 and later) in a range that holds
 * page_size, every page goes out with RWF_ATOMIC, alone or in a larger
 * naturally aligned power-of-two piece the device accepts whole, so a
 * crash leaves each page old or new, never torn. libpwb does that
 * whenever the device offers it; this flag makes it a requirement:
 * pwb_bdi_open() fails with -EOPNOTSUPP where the device cannot, and a
 * page whose device offset is not aligned to page_size fails its write
 * with -EINVAL instead of going out without RWF_ATOMIC. A database learns
 * here whether it still needs its doublewrite buffer or full-page images.
 * pwb_bdi_info() reports what the device offers.
 */
#define PWB_BDI_ATOMIC_WRITES 0x4u
/**
 * PWB_BDI_REUSE_FREED - no busy extents: reuse freed blocks at once
 *
 * By default a block of an allocator-mode inode freed by a truncate or a
 * discard is busy: no allocation gets it until pwb_bdi_release_freed()
 * says that the application's saved index no longer names it (see
 * there). With this flag it is free at once, as for a program that keeps
 * no index across runs (scratch files, benchmarks). Unsafe for one that
 * does: after a crash its old index may name blocks another file took.
 */
#define PWB_BDI_REUSE_FREED 0x8u
/**
 * PWB_BDI_STRICT_SHARE - throttle at the bdi's own share of its domain
 *
 * In a domain (pwb_bdi_config.domain) a bdi's writers are paused by how
 * far its dirty and writeback bytes are above its share of the domain's
 * limits, but a bdi may borrow: its limit is at least an eighth of the
 * room the domain has left (within max_share_ppm), so a bdi whose share
 * is still small can start while the others leave room, but never more
 * than one writeback chunk of its own beyond its share (half a second of
 * what it completed lately, at least 4 MiB), so a slow device holds
 * little more than its share. With this flag
 * it never borrows: its writers are paused at its share even when the
 * domain is under its limits (a tenant held to its budget; the kernel's
 * strictlimit). In both cases writers wait while the domain as a whole
 * is at its limit. Needs PWB_BDI_THROTTLE's pauses to matter, and a
 * domain (-EINVAL without).
 */
#define PWB_BDI_STRICT_SHARE 0x10u
/**
 * PWB_BDI_CACHE_PREFAULT - fault the page cache's memory in at open
 *
 * pwb_bdi_open() maps the memory of the whole page cache (cache_bytes;
 * in a domain with a cache budget, this bdi's limit within it, added to
 * the domain's shared buffers) and faults it in, instead of mapping it
 * 2 MiB at a time as the cache first grows. Memory the process has not
 * touched costs the thread that first needs it the kernel's zeroing and,
 * in a virtual machine whose host takes back free memory, the host's
 * backing it again: with this flag the first reads and writes into an
 * empty cache cost the same as later ones, as a daemon that allocates its
 * buffer pool at start wants. The price: pwb_bdi_open() takes as long as
 * faulting the memory in, and the memory is resident from the start.
 * pwb_bdi_open() fails with -ENOMEM if it cannot be had.
 */
#define PWB_BDI_CACHE_PREFAULT 0x20u
/** Every flag this release knows; other bits give -EINVAL. */
#define PWB_BDI_FLAGS_ALL                                                      \
	(PWB_BDI_THROTTLE | PWB_BDI_AUTO_WB_CTX | PWB_BDI_ATOMIC_WRITES |      \
	 PWB_BDI_REUSE_FREED | PWB_BDI_STRICT_SHARE | PWB_BDI_CACHE_PREFAULT)

/**
 * pwb_bdi_config_init() - set every field of @cfg to its default
 * @cfg: the struct to fill; NULL is ignored
 * @cfg_sz: sizeof(struct pwb_bdi_config) as the caller was compiled; the
 *          macro of the same name passes it
 *
 * Fills the first @cfg_sz bytes of @cfg: the defaults of the fields this
 * library knows, zero beyond them.
 *
 * Context: any thread.
 */
PWB_API void pwb_bdi_config_init(struct pwb_bdi_config *cfg, size_t cfg_sz);
#define pwb_bdi_config_init(cfg)                                               \
	pwb_bdi_config_init((cfg), sizeof(struct pwb_bdi_config))

/* ---------------------------------------------------------------------- */
/* Memory domains                                                         */

/**
 * struct pwb_domain_config - one dirty-memory budget for several bdis
 *
 * A domain holds the dirty limits of every bdi that joins it (struct
 * pwb_bdi_config.domain), the way the kernel's global dirty limits hold
 * every disk. Each bdi gets a share of the domain's limits that follows
 * its share of the domain's recently completed writeback: a fast device
 * gets most of the memory, a slow one (a USB stick) little, so that a
 * slow device's dirty pages do not stall writers of the fast ones. The
 * share is a proportion that decays: every period_ms the counts of
 * written pages of every bdi are halved, so a device that stops or slows
 * down loses its share within a few periods. min_share_ppm and
 * max_share_ppm bound a bdi's share; PWB_BDI_STRICT_SHARE holds its
 * writers to it.
 *
 * Fill it with pwb_domain_config_init(), then change what you need. Grows
 * only at the end, like struct pwb_bdi_config.
 */
struct pwb_domain_config {
	/** Hard limit on the dirty and writeback bytes of all the domain's
	 *  bdis together (throttling, PWB_BDI_THROTTLE); 0 means no limit.
	 *  Must be 0 or >= dirty_background_bytes. Default 256 MiB. */
	uint64_t dirty_bytes;
	/** Background writeback starts on every bdi of the domain that has
	 *  dirty pages when the domain's dirty bytes exceed this, and on one
	 *  bdi when its own dirty bytes exceed its share of this; 0 disables
	 *  it (except above the throttle's set point). Default 64 MiB. */
	uint64_t dirty_background_bytes;
	/** One page-cache budget, in bytes, for the library-owned pages
	 *  (pwb_write(), pwb_read()) of all the domain's bdis together; 0
	 *  means none (each bdi has its own cache_bytes). With a budget, a
	 *  bdi whose own cache_bytes is 0 may use all of it, and one that
	 *  finds it full takes room from the clean pages of any bdi of the
	 *  domain, the bdi that brought a page into its cache least
	 *  recently first (never a dirty page or one being written); if
	 *  none is clean it waits, as for a full cache of its own, and is
	 *  woken by any bdi of the domain freeing room. Free page buffers
	 *  are shared by the bdis of one page size, so the memory held
	 *  stays within the budget (plus a 2 MiB chunk per page size).
	 *  dirty_background_bytes is lowered to half of it if above. The
	 *  reclaim statistics of a bdi (pwb_stats.reclaimed_pages,
	 *  direct_reclaimed_pages) count the pages its flushers and writers
	 *  freed, of any bdi of the domain. At least 1 MiB, and 16 pages
	 *  of each bdi that joins. Default 0. */
	uint64_t cache_bytes;
	/** Length in milliseconds of the period over which written pages
	 *  are counted: the counts are halved at the end of each. 0 means
	 *  3000; otherwise 10 .. 3600000. Default 0. */
	unsigned int period_ms;
	/** Clock of the periods, in nanoseconds, monotonic; NULL means
	 *  CLOCK_MONOTONIC. Tests inject a fake clock here (use the same as
	 *  the bdis'); it is called from any thread, under no libpwb lock
	 *  but the domain's own and, with cache_bytes, a page's. */
	uint64_t (*clock)(void *clock_arg);
	void *clock_arg;
};

/**
 * pwb_domain_config_init() - set every field of @cfg to its default
 * @cfg: the struct to fill; NULL is ignored
 * @cfg_sz: sizeof(struct pwb_domain_config) as the caller was compiled;
 *          the macro of the same name passes it
 *
 * Context: any thread.
 */
PWB_API void pwb_domain_config_init(struct pwb_domain_config *cfg,
				    size_t cfg_sz);
#define pwb_domain_config_init(cfg)                                            \
	pwb_domain_config_init((cfg), sizeof(struct pwb_domain_config))

/**
 * pwb_domain_create() - create a memory domain for several bdis
 * @cfg: configuration, copied; NULL means all defaults
 * @cfg_sz: sizeof(struct pwb_domain_config) as the caller was compiled;
 *          the macro of the same name passes it
 * @domp: on success, the new domain
 *
 * A bdi joins the domain at pwb_bdi_open() (pwb_bdi_config.domain) and
 * leaves it at pwb_bdi_close(). A bdi starts at its floor
 * (pwb_bdi_config.min_share_ppm) and earns its share by completing
 * writes (its first completion recomputes the shares at once); until
 * then its writers run on what it may borrow (PWB_BDI_STRICT_SHARE).
 *
 * Context: any thread. The caller owns the domain and must destroy it
 * with pwb_domain_destroy() after closing every bdi in it.
 * Return: 0; -EINVAL: NULL @domp, dirty_bytes below
 *         dirty_background_bytes, period_ms outside 10..3600000, or
 *         @cfg_sz smaller than the first layout of the struct; -E2BIG:
 *         @cfg is larger than this library's struct and sets a field this
 *         library does not know; -EINVAL also: cache_bytes neither 0 nor
 *         at least 1 MiB; -ENOMEM.
 */
PWB_API int pwb_domain_create(const struct pwb_domain_config *cfg,
			      size_t cfg_sz, struct pwb_domain **domp);
#define pwb_domain_create(cfg, domp)                                           \
	pwb_domain_create((cfg), sizeof(struct pwb_domain_config), (domp))

/**
 * pwb_domain_destroy() - free a domain that no bdi is in
 * @dom: the domain; NULL is a no-op returning 0
 *
 * Context: any thread; not concurrently with a pwb_bdi_open() or
 * pwb_bdi_close() of a bdi in @dom.
 * Return: 0 (@dom is freed); -EBUSY if a bdi is still in @dom (its
 *         pwb_bdi_close() has not returned): nothing is freed, close the
 *         bdis and call again.
 */
PWB_API int pwb_domain_destroy(struct pwb_domain *dom);

/* ---------------------------------------------------------------------- */
/* Tenants                                                                */

/**
 * struct pwb_tenant_config - a tenant's weight and limits
 *
 * A tenant groups inodes that share a budget, the way the kernel's cgroup
 * writeback groups a cgroup's files: its writers are throttled by its own
 * dirty and writeback bytes, never by another tenant's, and the flushers
 * of a saturated device share its writeback bandwidth among the tenants
 * with dirty pages in proportion to their weights (an idle tenant's share
 * goes to the busy ones). Fill it with pwb_tenant_config_init(), then
 * change what you need. Grows only at the end, like struct
 * pwb_bdi_config.
 */
struct pwb_tenant_config {
	/** Share of writeback bandwidth and of dirty memory, relative to
	 *  the other tenants of the same bdi or domain that hold dirty
	 *  pages (cgroup io.weight). 1 .. 10000; untenanted inodes weigh
	 *  100. Default 100. */
	unsigned int weight;
	/** The tenant's own limit on its dirty and writeback bytes; its
	 *  writers are paused from half of it up and wait at it. The
	 *  tenant's share of the bdi's (or domain's) dirty_bytes, by
	 *  weight among the tenants holding pages, applies too; the lower
	 *  wins. 0: no own limit. Default 0. */
	uint64_t dirty_bytes;
	/** Cap on the tenant's writeback rate in bytes per second: the
	 *  flushers pass its inodes over while its budget is spent and
	 *  write the other tenants' meanwhile. 0: none. Default 0. */
	uint64_t rate_limit_bytes_per_sec;
};

/**
 * pwb_tenant_config_init() - set every field of @cfg to its default
 * @cfg: the struct to fill; NULL is ignored
 * @cfg_sz: sizeof(struct pwb_tenant_config) as the caller was compiled;
 *          the macro of the same name passes it
 *
 * Context: any thread.
 */
PWB_API void pwb_tenant_config_init(struct pwb_tenant_config *cfg,
				    size_t cfg_sz);
#define pwb_tenant_config_init(cfg)                                            \
	pwb_tenant_config_init((cfg), sizeof(struct pwb_tenant_config))

/**
 * pwb_tenant_create() - create a tenant of a memory domain or of one bdi
 * @domain: the domain whose bdis the tenant's inodes may live on, or NULL
 * @bdi: the one bdi the tenant's inodes live on, or NULL
 * @cfg: configuration, copied; NULL means all defaults
 * @cfg_sz: sizeof(struct pwb_tenant_config) as the caller was compiled;
 *          the macro of the same name passes it
 * @out: on success, the new tenant
 *
 * Exactly one of @domain and @bdi is given: the scope the tenant's share
 * of dirty memory is taken from (the domain's dirty_bytes, or the bdi's
 * own, which in a domain is the bdi's share). Inodes join the tenant with
 * pwb_inode_set_tenant(). The tenant's limits apply to its writers on a
 * bdi opened with PWB_BDI_THROTTLE, like the bdi's own.
 *
 * Context: any thread. The caller owns the tenant and destroys it with
 * pwb_tenant_destroy() once no inode is attached to it; it may outlive
 * its bdi or domain (it is then detached from it and only its statistics
 * remain).
 * Return: 0; -EINVAL: NULL @out, both or neither of @domain and @bdi,
 *         weight 0 or above 10000, or @cfg_sz smaller than the first
 *         layout of the struct; -E2BIG: @cfg is larger than this
 *         library's struct and sets a field this library does not know;
 *         -ESHUTDOWN: @bdi is being closed; -ENOMEM.
 */
PWB_API int pwb_tenant_create(struct pwb_domain *domain, struct pwb_bdi *bdi,
			      const struct pwb_tenant_config *cfg,
			      size_t cfg_sz, struct pwb_tenant **out);
#define pwb_tenant_create(domain, bdi, cfg, out)                               \
	pwb_tenant_create((domain), (bdi), (cfg),                              \
			  sizeof(struct pwb_tenant_config), (out))

/**
 * pwb_tenant_destroy() - free a tenant that no inode is attached to
 * @tenant: the tenant; NULL is a no-op returning 0
 *
 * Context: any thread; not concurrently with pwb_inode_set_tenant() or a
 * close of an inode of @tenant. Sleeps for an RCU grace period.
 * Return: 0 (@tenant is freed); -EBUSY if an inode is still attached to
 *         it (move it with pwb_inode_set_tenant() or close it first):
 *         nothing is freed.
 */
PWB_API int pwb_tenant_destroy(struct pwb_tenant *tenant);

/**
 * pwb_inode_set_tenant() - attach an inode to a tenant, or detach it
 * @inode: an open inode
 * @tenant: the tenant, or NULL for none (the default: the inode is then
 *          throttled by its bdi's state and served with weight 100)
 *
 * The inode's dirty and writeback pages move to @tenant's account at
 * once. An inode under a per-page shard policy (PWB_POLICY_F_PER_PAGE)
 * can change its tenant only until its first pwb_mark_dirty().
 *
 * Context: any thread; not concurrently with pwb_tenant_destroy() of
 * the old or the new tenant.
 * Return: 0; -EINVAL: NULL @inode, or @tenant belongs to another bdi or
 *         to a domain @inode's bdi is not in, or to a bdi or domain that
 *         is gone; -EBUSY: a per-page policy already routes the inode's
 *         pages; -EBADF: @inode is being closed.
 */
PWB_API int pwb_inode_set_tenant(struct pwb_inode *inode,
				 struct pwb_tenant *tenant);

/** The size of the per-cause arrays of time blocked (enum
 *  pwb_block_cause, in the Statistics section); never changes. */
#define PWB_BLOCK_SLOTS 16

/**
 * struct pwb_tenant_stats - one tenant's counters and state
 *
 * Filled by pwb_tenant_stats(). Grows only at the end, like struct
 * pwb_stats.
 */
struct pwb_tenant_stats {
	/** Now: bytes dirty, not yet being written. */
	uint64_t dirty_bytes;
	/** Now: bytes being written. */
	uint64_t writeback_bytes;
	/** The most dirty + writeback bytes the tenant held at once. */
	uint64_t max_held_bytes;
	/** Bytes newly dirtied by its writers (since creation). */
	uint64_t dirtied_bytes;
	/** Bytes written to the device without error. */
	uint64_t written_bytes;
	/** Time its writers slept in the throttle, and how many sleeps. */
	uint64_t throttled_ns;
	uint64_t throttle_events;
	/** Time of writeback its rate cap held back. */
	uint64_t rate_limited_ns;
	/** Now: the limit its writers wait at (its share or its own
	 *  dirty_bytes, the lower), in bytes of the last bdi it was
	 *  throttled on; 0 before that or without a limit. */
	uint64_t limit_bytes;
	/** Now: inodes attached. */
	uint64_t nr_inodes;
	/** Its weight. */
	uint64_t weight;
	/** Time its inodes' callers slept in libpwb, by enum
	 *  pwb_block_cause, in ns of the bdi's cfg.clock, and how many
	 *  waits (see pwb_stats.blocked_ns). */
	uint64_t blocked_ns[PWB_BLOCK_SLOTS];
	uint64_t blocked_events[PWB_BLOCK_SLOTS];
};

/**
 * pwb_tenant_stats() - read a tenant's counters
 * @tenant: the tenant
 * @st: filled in
 * @st_sz: sizeof(struct pwb_tenant_stats) as the caller was compiled;
 *         the macro of the same name passes it
 *
 * Lock-free: the counters are read one by one, not as one snapshot.
 *
 * Context: any thread.
 * Return: 0; -EINVAL: NULL @tenant or @st, or @st_sz smaller than the
 *         first layout of the struct.
 */
PWB_API int pwb_tenant_stats(const struct pwb_tenant *tenant,
			     struct pwb_tenant_stats *st, size_t st_sz);
#define pwb_tenant_stats(tenant, st)                                           \
	pwb_tenant_stats((tenant), (st), sizeof(struct pwb_tenant_stats))

/* ---------------------------------------------------------------------- */
/* Backing device                                                         */

/**
 * pwb_bdi_open() - open a backing device and start its flusher threads
 * @path: a block device or a regular file; opened O_RDWR | O_DIRECT
 * @cfg: configuration, copied; NULL means all defaults
 * @cfg_sz: sizeof(struct pwb_bdi_config) as the caller was compiled; the
 *          macro of the same name passes it
 * @bdip: on success, the new bdi
 *
 * The logical block size comes from BLKSSZGET (block device) or statx's
 * direct-I/O alignment (file), the capacity from BLKGETSIZE64 or the file
 * size. One block is read with O_DIRECT to prove the filesystem supports it:
 * libpwb never falls back to buffered I/O.
 *
 * Context: any thread; sleeps. The caller owns the bdi and must close it
 * with pwb_bdi_close().
 * Return: 0;
 *  -EINVAL: NULL @path or @bdip; page_size zero, not a power of two, below
 *           the logical block size or above 1 MiB or max_io_bytes;
 *           max_io_bytes not a page multiple or above 64 MiB; nr_wb_ctx
 *           or nr_flushers above PWB_MAX_WB_CTX; io_depth outside
 *           1..4096; dirty_bytes below dirty_background_bytes;
 *           unknown flags; auto_min_wb_ctx or auto_max_wb_ctx above
 *           PWB_MAX_WB_CTX, auto_max_wb_ctx below auto_min_wb_ctx,
 *           auto_interval_ms outside 10..600000, or, with
 *           PWB_BDI_AUTO_WB_CTX, a nr_wb_ctx outside those bounds; a file
 *           system that refuses O_DIRECT; a device smaller than one page;
 *           @cfg_sz smaller than the first layout of the struct;
 *           min_share_ppm, max_share_ppm or PWB_BDI_STRICT_SHARE without
 *           a domain, a share bound above 1000000, max_share_ppm below
 *           min_share_ppm, or min_share_ppm that would bring the floors
 *           of the domain's bdis above 1000000 together; in a domain
 *           with a cache budget, cache_bytes above it, or a budget of
 *           fewer than 16 pages;
 *  -E2BIG: @cfg is larger than this library's struct and sets a field
 *           this library does not know;
 *  -ENOENT: unknown policy or backend name, or @path does not exist;
 *  -ENOTBLK: @path is neither a block device nor a regular file;
 *  -EOPNOTSUPP: backend "io_uring" but libpwb was built without liburing;
 *           or io_uring_queue_init()'s error (-ENOSYS, -EPERM, -ENOMEM)
 *           when the kernel refuses io_uring (use "psync"); or
 *           PWB_BDI_ATOMIC_WRITES on a device that reports no atomic
 *           write range holding page_size;
 *  -ENOMEM (also: PWB_BDI_CACHE_PREFAULT and the cache's memory could
 *           not be had); or the errno of open(), a device ioctl or
 *           pthread_create().
 */
PWB_API int pwb_bdi_open(const char *path, const struct pwb_bdi_config *cfg,
			 size_t cfg_sz, struct pwb_bdi **bdip);
#define pwb_bdi_open(path, cfg, bdip)                                          \
	pwb_bdi_open((path), (cfg), sizeof(struct pwb_bdi_config), (bdip))

/**
 * pwb_bdi_close() - write everything back, stop the flushers, free the bdi
 * @bdi: the bdi; NULL is a no-op returning 0
 *
 * Runs an integrity sync of every inode, flushes the device cache, stops the
 * flusher threads and frees the bdi. Inodes still open are written and freed
 * too: their handles become invalid. Nothing is left allocated even when a
 * write fails; the pages that could not be written are then dropped and the
 * error returned.
 *
 * Calls running when the close begins finish first, with their own result:
 * a pwb_sync(), pwb_bdi_writeback(), re-shard or pwb_fsync() in progress
 * completes (a pwb_balance_dirty() or throttled pwb_mark_dirty() stops
 * waiting and returns -ESHUTDOWN, its range dirty and written by the
 * close), and a pwb_inode_close() running on another thread completes
 * before the bdi is freed. Of the calls that begin after the close began
 * (see the conventions above), pwb_sync(), pwb_bdi_writeback(),
 * pwb_bdi_set_nr_wb_ctx(), pwb_bdi_set_policy(), pwb_bdi_policy(),
 * pwb_balance_dirty() and pwb_inode_open() fail with -ESHUTDOWN at once;
 * the queries (pwb_bdi_stats(), pwb_wb_ctx_stats(), pwb_bdi_info(),
 * pwb_balance_dirty_nowait(), the fault functions) keep answering while
 * the close writes back and fail with -ESHUTDOWN (pwb_bdi_nr_wb_ctx(): 0)
 * once it tears down; inode functions fail with -EBADF once the close
 * reached their inode.
 *
 * Context: any thread but a flusher (ops callback); sleeps.
 * Return: 0; -EDEADLK from an ops callback; -EBADF if a close of @bdi is
 *         already running; otherwise the first write or flush error not yet
 *         reported by pwb_sync() (-EIO, -ENOSPC, ...).
 */
PWB_API int pwb_bdi_close(struct pwb_bdi *bdi);

/**
 * pwb_bdi_nr_wb_ctx() - number of writeback contexts of @bdi
 *
 * Unlike most functions here it returns a count, not 0 or -errno: a bdi
 * always has at least one context, so 0 means failure, and pwb_errmsg()
 * then says why. (pwb_bdi_info() gives the count with an error code.)
 *
 * Context: any thread; lock-free (RCU).
 * Return: the count (at least 1), or 0 if @bdi is NULL or being torn down
 *         by pwb_bdi_close().
 */
PWB_API unsigned int pwb_bdi_nr_wb_ctx(const struct pwb_bdi *bdi);

/**
 * pwb_bdi_set_nr_wb_ctx() - change the number of writeback contexts live
 * @bdi: the bdi
 * @nr: the new count, 1 .. PWB_MAX_WB_CTX; 0 picks automatically as
 *      pwb_bdi_open() does
 *
 * Re-shards while writers and flushers run, like the kernel's
 * inode_switch_wbs(): the flushers are parked between work items (with no
 * write in flight), every affined inode is moved to the context the shard
 * policy now gives it, under both contexts' list locks, the new context
 * array is published with RCU, and retired contexts are freed after a grace
 * period. No inode is ever on two lists and no dirty page is lost; a
 * pwb_sync() or pwb_fsync() running meanwhile still covers everything
 * dirtied before it began (it repeats its work if a re-shard overtook it).
 * Cumulative counters of retired contexts stay in pwb_bdi_stats().
 * With nr_flushers = 0 (one thread per context) threads are started and
 * stopped to match.
 *
 * On a bdi opened with PWB_BDI_AUTO_WB_CTX the caller wins over the tuner:
 * a non-zero @nr pauses tuning (auto_reason PWB_AUTO_USER) after any
 * re-shard the tuner has begun, and @nr 0 resumes it with fresh
 * measurements, from the count pwb_bdi_open() would start with.
 *
 * Context: any thread but a flusher; sleeps. Calls are serialised.
 * Return: 0; -EINVAL for a NULL @bdi or @nr above PWB_MAX_WB_CTX; -EDEADLK
 *         from an ops callback; -ESHUTDOWN if pwb_bdi_close() has begun;
 *         -ENOMEM, or pthread_create()'s error (the bdi then keeps its old
 *         count).
 */
PWB_API int pwb_bdi_set_nr_wb_ctx(struct pwb_bdi *bdi, unsigned int nr);

/**
 * pwb_bdi_set_policy() - switch the shard policy live
 * @bdi: the bdi
 * @spec: "name[:key=value,...]" as in pwb_bdi_config.policy; NULL means
 *        "inode-hash". Copied.
 *
 * The new policy is created first (a bad spec changes nothing), then
 * installed the way pwb_bdi_set_nr_wb_ctx() re-shards: flushers parked,
 * every affined inode moved to the context the new policy gives it, the
 * policy published with RCU, the old one destroyed after a grace period.
 * Writers, syncs and fsyncs may run meanwhile and lose nothing.
 *
 * Context: any thread but a flusher; sleeps. Calls are serialised with
 * re-shards.
 * Return: 0; -EINVAL for a NULL @bdi or bad arguments in @spec; -ENOENT
 *         for an unknown policy name; -EDEADLK from an ops callback;
 *         -ESHUTDOWN if pwb_bdi_close() has begun; -ENOMEM; or the error
 *         of the policy's init.
 */
PWB_API int pwb_bdi_set_policy(struct pwb_bdi *bdi, const char *spec);

/** Size of the reason strings of struct pwb_bdi_info, with the NUL. */
#define PWB_REASON_MAX 96

/**
 * struct pwb_bdi_info - facts a bdi found about its device
 *
 * Grows only at the end (see "Structs that cross the ABI" at the top).
 */
struct pwb_bdi_info {
	uint64_t capacity;		/* bytes usable (page multiple) */
	unsigned int logical_block_size;	/* direct-I/O alignment */
	unsigned int page_size;
	unsigned int nr_wb_ctx;
	int rotational;			/* 1, 0, or -1 if unknown */
	unsigned int nr_flushers;	/* threads running now */
	int is_blockdev;
	char policy[64];		/* policy name in use */
	char backend[16];		/* I/O backend in use */
	/** What statx(STATX_WRITE_ATOMIC) reports: the smallest and largest
	 *  write the device performs untorn, in bytes, and how many iovec
	 *  segments one such write may have; all 0 where it reports none. */
	unsigned int atomic_write_unit_min;
	unsigned int atomic_write_unit_max;
	unsigned int atomic_write_segments_max;
	/** 1 if pages go out with RWF_ATOMIC (see PWB_BDI_ATOMIC_WRITES). */
	int atomic_writes;
	/** Why @backend: e.g. "asked for (backend = \"psync\")", or for
	 *  backend = NULL "default: io_uring_queue_init works here" or
	 *  "default: io_uring refused (Operation not permitted)". */
	char backend_reason[PWB_REASON_MAX];
	/** Why this many contexts: "asked for (nr_wb_ctx = 4)", or for
	 *  nr_wb_ctx = 0 that 2 was the start and the tuner chooses. */
	char nr_wb_ctx_reason[PWB_REASON_MAX];
	/** 1 if the automatic tuner (PWB_BDI_AUTO_WB_CTX) chooses the
	 *  number of contexts, which @nr_wb_ctx then reports at this
	 *  instant. */
	int auto_wb_ctx;
};

/**
 * pwb_bdi_info() - report device geometry and settings
 * @bdi: the bdi
 * @info: filled on success
 * @info_sz: sizeof(struct pwb_bdi_info) as the caller was compiled; the
 *           macro of the same name passes it
 *
 * Context: any thread; lock-free (RCU).
 * Return: 0; -EINVAL if an argument is NULL or @info_sz is smaller than
 *         the first layout of the struct; -ESHUTDOWN once pwb_bdi_close()
 *         tears the bdi down.
 */
PWB_API int pwb_bdi_info(const struct pwb_bdi *bdi, struct pwb_bdi_info *info,
			 size_t info_sz);
#define pwb_bdi_info(bdi, info)                                                \
	pwb_bdi_info((bdi), (info), sizeof(struct pwb_bdi_info))

/** Reasons for pwb_bdi_writeback(), named after the kernel's. */
enum pwb_wb_reason {
	/** Write inodes dirty for longer than dirty_expire_ms ("kupdate"). */
	PWB_WB_PERIODIC = 1,
	/** Write anything while dirty bytes exceed dirty_background_bytes. */
	PWB_WB_BACKGROUND = 2,
	/** Write everything dirty now, without waiting for the device cache
	 *  (WB_SYNC_NONE; "start writeback on everything"). */
	PWB_WB_ALL = 3,
	/** Only in events: an integrity sync pass (pwb_sync, pwb_fsync,
	 *  close). pwb_bdi_writeback() refuses it. */
	PWB_WB_SYNC = 4,
};

/** What a struct pwb_event reports. */
enum pwb_event_type {
	PWB_EV_WB_START = 1,	/* a writeback pass starts on a context */
	PWB_EV_WB_END = 2,	/* and ends: pages, duration_ns */
	PWB_EV_THROTTLE = 3,	/* a dirtier slept in pwb_balance_dirty */
};

/**
 * struct pwb_event - one event for pwb_bdi_config.event
 *
 * Every PWB_EV_WB_START is followed, on the same thread, by the
 * PWB_EV_WB_END of the same context and reason, with no other event of
 * that context between them. Fields may be appended in later releases.
 */
struct pwb_event {
	enum pwb_event_type type;
	unsigned int ctx;		/* WB_*: context index; THROTTLE: 0 */
	enum pwb_wb_reason reason;	/* WB_*: why the pass runs */
	uint64_t pages;			/* WB_END: pages written by the pass */
	uint64_t duration_ns;		/* WB_END: pass; THROTTLE: the sleep */
};

/** pwb_bdi_writeback() flag: wait until every context finished the pass. */
#define PWB_WB_WAIT 0x1u

/**
 * pwb_bdi_writeback() - start a writeback pass on every context
 * @bdi: the bdi
 * @reason: one of enum pwb_wb_reason
 * @flags: 0 or PWB_WB_WAIT
 *
 * Queues one work item per context, all at once. Flushers also do periodic
 * and background passes on their own; this lets a caller kick them (for
 * example right after advancing an injected clock). Write errors are not
 * returned here: they are kept for pwb_fsync()/pwb_sync().
 *
 * Context: any thread; with PWB_WB_WAIT not from an ops callback; sleeps.
 * Return: 0; -EINVAL for a NULL @bdi, unknown @reason or flags; -EDEADLK
 *         when waiting from an ops callback; -ESHUTDOWN if pwb_bdi_close()
 *         has begun; -ENOMEM (no context was asked: a pass starts on
 *         every context or on none).
 */
PWB_API int pwb_bdi_writeback(struct pwb_bdi *bdi, enum pwb_wb_reason reason,
			      unsigned int flags);

/**
 * pwb_bdi_log_durable() - report that the application's log is durable
 * @bdi: the bdi
 * @lsn: the log is durable up to and including this LSN
 *
 * The write-ahead rule (pwb_mark_dirty_lsn()): writeback submits a page
 * only when its LSN is at or below the durable LSN, the highest value
 * reported here or by a successful pwb_bdi_config.log_force call. Reports
 * lower than that are ignored (a monotonic maximum). Call it after the
 * application's own group commit made its log durable. Pages held back
 * meanwhile are written by a later pass (periodic, background, sync); this
 * call does not start one.
 *
 * Context: any thread, including ops and log_force callbacks; lock-free.
 * Return: 0; -EINVAL for a NULL @bdi; -ESHUTDOWN once pwb_bdi_close()
 *         tears the bdi down.
 */
PWB_API int pwb_bdi_log_durable(struct pwb_bdi *bdi, uint64_t lsn);

/* ---------------------------------------------------------------------- */
/* Inodes                                                                 */

/**
 * struct pwb_inode_ops - how libpwb reaches an inode's data
 *
 * Threads. Every callback runs with no libpwb lock held (except a re-shard's
 * own lock, inside pwb_bdi_set_nr_wb_ctx() and pwb_bdi_set_policy()), on
 * these threads:
 *
 *  - get_page, end_write, write_inode: flusher threads only (every pass,
 *    including the integrity work of pwb_fsync(), pwb_sync() and the close
 *    functions, which is queued to the flushers).
 *  - map_page: flusher threads, for every write; and also on the thread of
 *    the caller, inside the library, when the bdi's shard policy asks for a
 *    page's device offset to place an inode. Among the built-in policies
 *    that is "alloc-group" (unless a hint is set) and "xarray" with
 *    key=offset (its default), and it happens inside pwb_mark_dirty() and
 *    pwb_mark_inode_dirty() at an inode's first dirtying, inside
 *    pwb_bdi_set_nr_wb_ctx() and pwb_bdi_set_policy() for every dirtied
 *    inode (twice per inode under xarray), and on the automatic tuner's
 *    thread (PWB_BDI_AUTO_WB_CTX) when it re-shards. "region" places each
 *    page, so it calls map_page inside every pwb_mark_dirty() and
 *    pwb_mark_dirty_lsn() (once per page, before any libpwb lock), at
 *    pwb_mark_inode_dirty()'s first dirtying, and in re-shards for inodes
 *    that hold pages or metadata themselves (dirtied before the switch to
 *    "region"). A plugin policy that calls pwb_policy_map_page() does the
 *    same; a policy may call it at every dirtying. "inode-hash",
 *    "least-loaded", "hint", "shared-list" and "xarray:key=ino" never call
 *    map_page outside the flushers.
 *  - The event callback (pwb_bdi_config.event): flusher threads for
 *    PWB_EV_WB_START/END; the dirtier's own thread, inside pwb_mark_dirty()
 *    (PWB_BDI_THROTTLE) or pwb_balance_dirty(), for PWB_EV_THROTTLE.
 *  - A shard policy's select() and key() (pwb-policy.h): the caller's
 *    thread in the calls named for map_page, under every policy.
 *
 * What they must not do. On a flusher thread a callback may call
 * pwb_mark_dirty(), pwb_mark_inode_dirty() and the query functions
 * (pwb_page_state() included), never pwb_fsync(), pwb_sync(),
 * pwb_inode_discard(), pwb_wait_writeback(), pwb_bdi_writeback() with
 * PWB_WB_WAIT, pwb_balance_dirty(), a re-shard or a close function (they
 * fail with -EDEADLK there), and must not wait for a thread that is itself
 * waiting in one of those. Where map_page (or an event or a policy) runs on the
 * caller's thread, it must not take a lock that the caller holds around
 * the call it runs inside (a non-recursive mutex would deadlock the
 * thread; tests/check_policy.c shows where this happens), and must not
 * call any function that waits for writeback, re-shards or closes: the
 * flushers may be parked by the re-shard in progress, and select() runs
 * inside an RCU read-side section that such calls wait out. Callbacks
 * should return quickly: a pass, a re-shard or a dirtier waits for them.
 *
 * Grows only at the end (see "Structs that cross the ABI" at the top): a
 * field the caller's header does not know is "absent", as a NULL one is.
 */
struct pwb_inode_ops {
	/** Required. Store in *data the address of page @index: page_size
	 *  bytes, aligned to the logical block size (for O_DIRECT), which must
	 *  stay valid and unchanged in size until end_write for that page (or
	 *  the writepage call's return, if end_write is absent). Return 0 or a
	 *  negative errno, which is recorded as a write error of the page;
	 *  except -EAGAIN, which means "not now" (the page is latched or
	 *  pinned): the page stays dirty and is tried again in a later pass,
	 *  no error is recorded and end_write is not called for it. An
	 *  integrity sync retries such a page with a bounded back-off
	 *  (1 ms doubling to 64 ms, about 1 s in all) and then fails with
	 *  -EBUSY, the page still dirty (see pwb_fsync()). */
	int (*get_page)(struct pwb_inode *inode, uint64_t index,
			const void **data);
	/** Required. Store in *dev_off the device byte offset of page @index:
	 *  a multiple of the logical block size, with the whole page inside
	 *  the device. Return 0 or a negative errno (recorded as above). */
	int (*map_page)(struct pwb_inode *inode, uint64_t index,
			uint64_t *dev_off);
	/** Optional. Called once per finished write of pages
	 *  [@index, @index + @nr) with 0 or the negative errno of the write. */
	void (*end_write)(struct pwb_inode *inode, uint64_t index, uint64_t nr,
			  int err);
	/** Optional. Write the inode's own metadata (its "inode block");
	 *  @sync is 1 during integrity sync. Called by writeback when
	 *  pwb_mark_inode_dirty() set PWB_I_DIRTY_META or PWB_I_DIRTY_TIME. */
	int (*write_inode)(struct pwb_inode *inode, int sync);
};

/**
 * pwb_inode_open() - register an inode on a bdi
 * @bdi: the bdi
 * @ino: the application's number for it, unique on @bdi
 * @ops: callbacks; the struct is copied
 * @ops_sz: sizeof(struct pwb_inode_ops) as the caller was compiled; the
 *          macro of the same name passes it
 * @priv: the application's pointer, returned by pwb_inode_priv()
 * @inodep: on success, the new inode
 *
 * The inode is affined to a writeback context when it is first dirtied.
 *
 * Three ownership modes, by the ops given:
 *  - get_page and map_page: the application owns the page memory and the
 *    device layout, and dirties pages with pwb_mark_dirty();
 *  - map_page only (get_page NULL): libpwb owns the pages (a page cache,
 *    pwb_write() and pwb_read(), see "Library-owned pages" below), the
 *    application the layout;
 *  - neither: libpwb owns the pages and takes device space from the
 *    bdi's extent allocator (allocator mode, see pwb_inode_extents()).
 *    An inode closed earlier on the same bdi comes back with the size
 *    and extents it had (the bdi remembers closed allocator-mode inodes
 *    until it closes); a new bdi starts with none, and the application
 *    restores them with pwb_inode_set_extents() and pwb_inode_set_size().
 *
 * Context: any thread. The caller owns the inode and closes it with
 * pwb_inode_close() (or pwb_bdi_close()).
 *
 * Return: 0; -EINVAL for a NULL argument, an ops table with get_page but
 *         no map_page, or @ops_sz smaller than the first layout of the
 *         struct; -E2BIG if @ops is larger than this library's struct and
 *         sets an op this library does not know; -EEXIST if @ino is
 *         already open on @bdi; -ESHUTDOWN if @bdi is closing; -ENOMEM.
 */
PWB_API int pwb_inode_open(struct pwb_bdi *bdi, uint64_t ino,
			   const struct pwb_inode_ops *ops, size_t ops_sz,
			   void *priv, struct pwb_inode **inodep);
#define pwb_inode_open(bdi, ino, ops, priv, inodep)                            \
	pwb_inode_open((bdi), (ino), (ops), sizeof(struct pwb_inode_ops),      \
		       (priv), (inodep))

/**
 * pwb_inode_close() - write an inode back, wait, and free it
 * @inode: the inode; NULL is a no-op returning 0
 *
 * Like pwb_fsync(), then unregisters and frees the inode (after an RCU grace
 * period, so concurrent lock-free lookups stay safe). Calls on @inode already
 * running finish first (a pwb_fsync() with its own result) or fail with
 * -EBADF; writes of its pages still in flight, started by any pass, are
 * waited for, so no callback runs for @inode once this returns. Pages that
 * could not be written are dropped after the error is returned.
 *
 * Context: any thread but a flusher; sleeps. Calls on @inode that begin
 * after this began fail with -EBADF while the inode exists (see the
 * conventions at the top).
 * Return: 0; -EDEADLK from an ops callback; otherwise the first write error
 *         of this inode not yet reported by pwb_fsync().
 */
PWB_API int pwb_inode_close(struct pwb_inode *inode);

/**
 * pwb_inode_priv() - the application pointer given to pwb_inode_open()
 *
 * Context: any thread.
 * Return: the pointer, or NULL if @inode is NULL.
 */
PWB_API void *pwb_inode_priv(const struct pwb_inode *inode);

/**
 * pwb_inode_ino() - the inode's number
 *
 * Context: any thread.
 * Return: the number (0 for a NULL @inode).
 */
PWB_API uint64_t pwb_inode_ino(const struct pwb_inode *inode);

/**
 * pwb_inode_wb_ctx() - the writeback context the inode is affined to
 *
 * The shard policy picks the context when the inode is first dirtied; the
 * inode stays with it afterwards, clean or dirty, until a re-shard
 * (pwb_bdi_set_nr_wb_ctx) moves it. Under a shared-list policy
 * (PWB_POLICY_F_SHARED_LIST) every inode is on context 0, and its pages
 * are written by whichever flusher claims it, one at a time. Under a
 * per-page policy ("region", PWB_POLICY_F_PER_PAGE) an inode's pages may
 * sit on several contexts: this returns the context holding its lowest
 * dirty or in-flight page, or, when none is, the context its first dirtied
 * page went to (else the one its metadata is written by).
 *
 * Context: any thread.
 * Return: the context index (0 .. pwb_bdi_nr_wb_ctx() - 1); -EINVAL for a
 *         NULL @inode; -ENODATA if the inode was never dirtied.
 */
PWB_API int pwb_inode_wb_ctx(const struct pwb_inode *inode);

/**
 * pwb_inode_dirty_pages() - number of dirty pages of @inode
 * @inode: the inode
 * @nr: filled with the count of pages dirty and not yet being written
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL argument.
 */
PWB_API int pwb_inode_dirty_pages(struct pwb_inode *inode, uint64_t *nr);

/**
 * pwb_mark_dirty() - record that the application changed a byte range
 * @inode: the inode
 * @off: first byte changed
 * @len: number of bytes; the range is rounded out to whole pages
 *
 * Call it after the new bytes are in the page memory. A page already dirty
 * stays where it is; the first dirtying of a clean inode stamps its
 * dirtied_when and queues it at the tail of its context's b_dirty list. A
 * page being written is dirtied again, and written again later, so the last
 * contents always reach the device. @len == 0 does nothing.
 *
 * With PWB_BDI_THROTTLE set on the bdi it then calls pwb_balance_dirty()
 * (not from ops callbacks), and may sleep there.
 *
 * Context: any thread, including ops callbacks; never sleeps on I/O unless
 * PWB_BDI_THROTTLE is set.
 * Return: 0; -EINVAL for a NULL @inode; -EOVERFLOW if @off + @len wraps past
 *         2^64; -EFBIG if the range covers more pages than the device
 *         holds; -EBADF if @inode is being closed; -ESHUTDOWN if the bdi
 *         is being torn down and @inode was never dirtied; -ENOMEM; with
 *         PWB_BDI_THROTTLE, -ETIMEDOUT or -ESHUTDOWN as
 *         pwb_balance_dirty() (the range is dirty all the same).
 */
PWB_API int pwb_mark_dirty(struct pwb_inode *inode, uint64_t off, uint64_t len);

/**
 * pwb_mark_dirty_lsn() - pwb_mark_dirty() under the write-ahead rule
 * @inode: the inode
 * @off: first byte changed
 * @len: number of bytes; the range is rounded out to whole pages
 * @lsn: the log sequence number of the change (of the log record that
 *       describes it); 0 is pwb_mark_dirty()
 *
 * Like pwb_mark_dirty(), and each page of the range keeps the highest LSN
 * it was dirtied with since writeback last took it. Writeback never
 * submits a page whose LSN is above the bdi's durable LSN: before a batch
 * holding such pages it calls pwb_bdi_config.log_force with the batch's
 * highest LSN, or without log_force leaves those pages dirty (no error)
 * until pwb_bdi_log_durable() covers them. Integrity sync (pwb_fsync,
 * pwb_sync, close) forces the log first, up to the highest LSN among the
 * pages it will write; without log_force it waits about 1 s (bounded
 * back-off) for pwb_bdi_log_durable() to cover them, then fails with
 * -EBUSY leaving them dirty. Pages dirtied only with pwb_mark_dirty() have
 * LSN 0 and are never held back.
 *
 * Call it before get_page can hand libpwb the changed page (for example
 * while still holding the page's latch, get_page returning -EAGAIN
 * meanwhile): a page written between the change and this call would
 * carry an LSN libpwb has not seen. And change a page only after
 * pwb_wait_writeback() on it, with the latch held: writeback checks a
 * page's LSN when it takes the page and calls get_page after that, so a
 * change in between would go out under the old LSN; latched, the page
 * makes that get_page say -EAGAIN and the wait returns (this is what
 * pwb_write() does for library-owned pages). An inode pays for LSNs only once it
 * uses them: 8 bytes a page in each 512-page group it dirtied with one.
 *
 * Context: as pwb_mark_dirty().
 * Return: as pwb_mark_dirty(); on -ENOMEM no page of the range became
 *         dirty without its LSN.
 */
PWB_API int pwb_mark_dirty_lsn(struct pwb_inode *inode, uint64_t off,
			       uint64_t len, uint64_t lsn);

/**
 * pwb_inode_error() - the inode's failed mark, without consuming it
 *
 * A NULL @inode gives -EBADF (not a valid handle), never -EINVAL: the
 * mark itself is the error of a write or an ops callback (-EIO, -ENOSPC,
 * -EINVAL for a misaligned page, ...), so pwb_errmsg() tells the two apart
 * when a callback returned -EBADF itself.
 *
 * Context: any thread.
 * Return: 0 if the inode is not marked failed, else the -errno it was
 *         marked with (see max_write_failures); -EBADF for a NULL @inode.
 */
PWB_API int pwb_inode_error(struct pwb_inode *inode);

/**
 * pwb_inode_clear_error() - forget the failed mark and the failure count
 *
 * Errors recorded but not yet reported are still reported once by the next
 * pwb_fsync(). Writeback retries the inode's dirty pages from now on without
 * back-off.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL @inode; -EBADF if it is being closed.
 */
PWB_API int pwb_inode_clear_error(struct pwb_inode *inode);

/** pwb_mark_inode_dirty() flags. */
#define PWB_I_DIRTY_META 0x1u	/* metadata changed: written with the pages */
#define PWB_I_DIRTY_TIME 0x2u	/* only timestamps: lazily, b_dirty_time */

/**
 * pwb_mark_inode_dirty() - record that the inode's own metadata changed
 * @inode: the inode, whose ops must have write_inode
 * @flags: PWB_I_DIRTY_META and/or PWB_I_DIRTY_TIME
 *
 * Context: any thread, including ops callbacks.
 * Return: 0; -EINVAL for NULL, bad flags or no write_inode op; -EBADF if the
 *         inode is being closed.
 */
PWB_API int pwb_mark_inode_dirty(struct pwb_inode *inode, unsigned int flags);

/**
 * pwb_fsync() - make an inode's dirty data durable
 * @inode: an open inode
 *
 * Queues an integrity-sync work item on the inode's context and waits for
 * it: every page dirty when the flusher starts the item is written (pages
 * dirtied meanwhile are not waited for, so constant re-dirtying cannot
 * livelock it), every write in flight is waited for, then the device cache
 * is flushed (fdatasync). Dirty metadata is written through write_inode,
 * after the pages; the flush also covers metadata that write_inode wrote
 * since the last flush, in this call or in any earlier pass, even when no
 * page was written. Under a per-page policy ("region") the inode's pages
 * may sit on several contexts: an item is queued on every one of them at
 * once, all are waited for, and the device is flushed once at the end.
 *
 * Errors (the kernel's errseq_t model): a failed write, get_page, map_page,
 * write_inode or device flush is recorded on the inode. Each pwb_fsync()
 * takes its own cursor when it starts and returns the first error recorded
 * since the last one reported to an fsync of this inode: two fsyncs running
 * together both get an error that neither had seen, and an fsync that
 * starts after an error was returned does not get it again (pwb_sync() has
 * its own cursor and gets it too). pwb_inode_close() reports what no fsync
 * reported. After max_write_failures failed writeback visits in a row the
 * inode is marked failed: every pwb_fsync() then returns that error, even
 * when later writes succeed, until pwb_inode_clear_error().
 *
 * Context: any thread but a flusher; sleeps.
 * Return: 0; -EINVAL for a NULL @inode; -EBADF if @inode is being closed;
 *         -EDEADLK from an ops callback; -ENOMEM; or a write or flush error
 *         (-EIO, -ENOSPC, ...) of this inode that no earlier pwb_fsync()
 *         returned: each error is reported once. A page that map_page put
 *         (partly) outside the device fails with -ERANGE, one not aligned
 *         to the logical block size with -EINVAL. Pages whose write failed
 *         stay dirty. Under the write-ahead rule (pwb_mark_dirty_lsn())
 *         the log is forced first; log_force's error is reported here
 *         like a write error (-EAGAIN from it as -EBUSY), the pages it
 *         covered still dirty. -EBUSY: a page stayed "not now" (get_page
 *         -EAGAIN) or, without log_force, above the durable LSN through
 *         the bounded back-off (about 1 s); it stays dirty, and is
 *         reported once like a write error (pwb_sync() gets it too).
 */
PWB_API int pwb_fsync(struct pwb_inode *inode);

/**
 * pwb_sync() - make every inode's dirty data durable
 * @bdi: the bdi
 *
 * Queues integrity-sync work on every context at once, waits for all of them,
 * then flushes the device cache once. The flush is skipped only when no page
 * and no metadata (write_inode) was written since the last flush.
 *
 * Errors: the bdi records every error of every inode. Like pwb_fsync(),
 * each pwb_sync() takes its own cursor at the start and returns an error
 * recorded since the last one reported to a pwb_sync() of this bdi, once;
 * concurrent syncs each get it; fsync callers are not affected (they have
 * the inode's cursor). A failed inode mark does not make pwb_sync() fail.
 *
 * Context: any thread but a flusher; sleeps.
 * Return: 0; -EINVAL for a NULL @bdi; -EDEADLK from an ops callback;
 *         -ESHUTDOWN if pwb_bdi_close() has begun; -ENOMEM; or a write or
 *         flush error on @bdi that no earlier pwb_sync() returned (each
 *         reported once to pwb_sync callers), including a log_force error
 *         or -EBUSY as pwb_fsync() describes.
 */
PWB_API int pwb_sync(struct pwb_bdi *bdi);

/* ---------------------------------------------------------------------- */
/* Library-owned pages: write, read, size                                 */

/*
 * An inode opened with get_page == NULL (and a map_page) has its pages
 * owned by libpwb: a page cache of page_size pages aligned for O_DIRECT,
 * bounded by cache_bytes. The application calls pwb_write() and
 * pwb_read() instead of changing memory and calling pwb_mark_dirty();
 * map_page still gives each page's device offset, and end_write and
 * write_inode still apply. Stable pages: a pwb_write() into a page whose
 * write is in flight waits for that write, so the device never receives a
 * page that changes under it.
 */

/**
 * pwb_write() - copy bytes into a library-owned inode and dirty them
 * @inode: an inode opened without get_page
 * @buf: the bytes
 * @len: how many; any length (at most SSIZE_MAX are taken)
 * @off: file offset of the first byte; any offset
 *
 * Copies into the cached pages and marks them dirty for writeback. A page
 * the write covers in part and that lies below the inode's size is read
 * from the device first (map_page gives its place; in allocator mode a
 * page with no written block reads as zeros). The size grows to
 * @off + @len if that is more; the bytes between the old size and @off
 * read as zeros. A write that stops early (a short count or an error)
 * changed exactly the bytes it counts: the rest keep their old bytes, and
 * a page it did not dirty keeps no device space for it. Waits for a write in flight of a page it
 * changes (stable pages), and when the cache is full for writeback to
 * make clean pages it can reclaim. With PWB_BDI_THROTTLE it is throttled
 * like pwb_mark_dirty(). Concurrent calls on one inode are safe; each
 * page is changed atomically with respect to pwb_read().
 *
 * Context: any thread but a flusher (not from an ops callback); sleeps.
 * Return: the bytes written (@len, or fewer if an error stopped it after
 *         some pages: those are dirty); 0 for @len 0; -EINVAL for a NULL
 *         @inode, a NULL @buf with @len > 0 or an inode whose pages the
 *         application owns; -EFBIG if @off + @len wraps past 2^64 (checked
 *         before @len is cut to SSIZE_MAX); -EBADF if @inode is being
 *         closed; -EDEADLK from an ops callback (for cached pages too);
 *         -ETIMEDOUT if the cache stayed full for throttle_timeout_ms;
 *         -ENOSPC in allocator mode when the device has no free block
 *         left (the message says how much is busy, see
 *         pwb_bdi_freed_cookie()); -ENOMEM; -ERANGE if map_page gives an
 *         offset not aligned to the logical block size or past the
 *         device; the error of map_page or of the device read of a
 *         partial page.
 */
PWB_API ssize_t pwb_write(struct pwb_inode *inode, const void *buf,
			  size_t len, uint64_t off);

/**
 * pwb_read() - copy bytes out of a library-owned inode
 * @inode: an inode opened without get_page
 * @buf: where to copy
 * @len: how many; any length
 * @off: file offset; any offset
 *
 * Serves cached pages and reads the others from the device into the
 * cache (or, when the cache is full of dirty pages, through a bounce
 * buffer without caching them: a reader never waits for writeback).
 * Stops at the inode's size: 0 at or after it. Reads what every
 * pwb_write() that returned before it began wrote (read-your-writes).
 * A reader that goes through a file in order gets readahead
 * (readahead_bytes, pwb_fadvise()); with the io_uring backend the device
 * reads of one call and of its readahead are in flight together, and the
 * call waits only for the pages it copies. A device read that fails
 * leaves its pages uncached: only a reader that needs one of them gets
 * the error.
 *
 * Context: any thread but a flusher (not from an ops callback); sleeps.
 * Return: the bytes read (fewer than @len at the end of the file); 0 at
 *         or past the end; -EINVAL for a NULL @inode, a NULL @buf with
 *         @len > 0 or an application-owned inode; -EBADF if @inode is
 *         being closed; -EDEADLK from an ops callback (for cached pages
 *         too); -ENOMEM; -ERANGE if map_page gives an offset not aligned
 *         to the logical block size or past the device; or the error of
 *         map_page or of the device read.
 */
PWB_API ssize_t pwb_read(struct pwb_inode *inode, void *buf, size_t len,
			 uint64_t off);

/** pwb_fadvise() advice: no special treatment (the default). */
#define PWB_FADV_NORMAL 0
/** The file is read at random: no readahead. */
#define PWB_FADV_RANDOM 1
/** The file is read in order: windows up to twice readahead_bytes. */
#define PWB_FADV_SEQUENTIAL 2
/** The range will be read soon: start reading it now. */
#define PWB_FADV_WILLNEED 3
/** The range will not be read soon: drop its clean cached pages. */
#define PWB_FADV_DONTNEED 4

/**
 * pwb_fadvise() - say how a library-owned inode will be read
 * @inode: an inode opened without get_page
 * @off: first byte of the range (WILLNEED, DONTNEED)
 * @len: bytes in the range; 0 means to the end of the file
 * @advice: a PWB_FADV_* value
 *
 * posix_fadvise() for pwb_read(). PWB_FADV_NORMAL, _RANDOM and
 * _SEQUENTIAL set the readahead of the whole inode (the range is ignored,
 * as Linux does): the default windows, none, or windows up to twice
 * readahead_bytes. PWB_FADV_WILLNEED starts reading the pages of the
 * range below the file size that are not cached, as far as the cache has
 * room, and returns without waiting for them (with the psync backend the
 * reads are made before it returns); a failed read is not reported here
 * (a later pwb_read() of the page reads it again). PWB_FADV_DONTNEED
 * drops the cached pages wholly inside the range that are clean and not
 * in use; dirty pages, pages being written and pages being read stay
 * (pwb_fsync() first to drop everything). Advice changes performance,
 * never what pwb_read() returns.
 *
 * Context: any thread but a flusher (not from an ops callback).
 * Return: 0; -EINVAL for a NULL @inode, an unknown @advice or an inode
 *         whose pages the application owns; -EBADF if @inode is being
 *         closed; -EDEADLK from an ops callback.
 */
PWB_API int pwb_fadvise(struct pwb_inode *inode, uint64_t off, uint64_t len,
			int advice);
/** pwb_write2() and pwb_read2() flag: never wait (preadv2's RWF_NOWAIT). */
#define PWB_RW_NOWAIT 0x1u
/** pwb_write2() and pwb_read2() flag: do not keep the pages cached
 *  (RWF_DONTCACHE). */
#define PWB_RW_DONTCACHE 0x2u
/** pwb_write2() flag: durable on return (RWF_SYNC); pwb_read2() ignores
 *  it. */
#define PWB_RW_SYNC 0x4u

/**
 * pwb_write2() - pwb_write() with per-call flags, as pwritev2()
 * @inode: an inode opened without get_page
 * @buf: the bytes
 * @len: how many; any length (at most SSIZE_MAX are taken)
 * @off: file offset of the first byte; any offset
 * @flags: 0 or PWB_RW_* flags, or-ed
 *
 * With @flags 0 it is pwb_write(). The flags:
 *
 * PWB_RW_NOWAIT: never sleep. Where pwb_write() would wait (for a page's
 * lock, for the device read of a page written in part that lies below
 * the size, for a write in flight of a page it changes, for room in a
 * full cache, or in the dirty throttle of PWB_BDI_THROTTLE, checked before
 * each page as pwb_balance_dirty_nowait() does) it stops instead: the
 * bytes already written are returned, -EAGAIN if none. For an event
 * loop, which hands the rest to a thread that may sleep. What it may
 * still meet is another thread holding one of the library's short
 * bookkeeping locks for a moment (the page-buffer pool's, a context's
 * lists'), as the kernel's RWF_NOWAIT meets its spinlocks.
 *
 * PWB_RW_DONTCACHE: the pages this call dirties leave the cache once
 * written back (and clean; a page dirtied again stays until a write of it
 * ends clean), and the call starts writeback on every context
 * (PWB_WB_ALL, as pwb_bdi_writeback() without waiting) instead of
 * writing itself. For data written once and not read soon.
 *
 * PWB_RW_SYNC: on return the bytes are durable, as after pwb_fsync() of
 * @inode (which it runs: concurrent callers share device flushes).
 *
 * Context: any thread but a flusher (not from an ops callback); sleeps
 *          unless PWB_RW_NOWAIT.
 * Return: as pwb_write(); -EINVAL also for unknown @flags; -EAGAIN with
 *         PWB_RW_NOWAIT when it would wait before writing a byte; with
 *         PWB_RW_SYNC, the error pwb_fsync() gives (the bytes are then
 *         written to the cache, but not known to be durable).
 */
PWB_API ssize_t pwb_write2(struct pwb_inode *inode, const void *buf,
			   size_t len, uint64_t off, unsigned int flags);

/**
 * pwb_read2() - pwb_read() with per-call flags, as preadv2()
 * @inode: an inode opened without get_page
 * @buf: where to copy
 * @len: how many; any length
 * @off: file offset; any offset
 * @flags: 0 or PWB_RW_* flags, or-ed
 *
 * With @flags 0 it is pwb_read().
 *
 * PWB_RW_NOWAIT: serve only pages cached and up to date whose lock is
 * free; stop at the first other page (one not cached, one whose read from
 * the device is in flight, one being changed) and return the bytes
 * copied, -EAGAIN if none. The call never waits for the device: a caller
 * that gets -EAGAIN hands the read to a thread that may sleep, or calls
 * again later. With the "io_uring" backend it starts the reads pwb_read()
 * would start there, as preadv2()'s RWF_NOWAIT starts the kernel's
 * readahead, and returns without waiting for them: a page not cached is
 * read with the readahead window its reader's pattern calls for, and
 * reaching the readahead marker of a sequential reader's window starts
 * the next window. A later call, with or without the flag, finds those
 * pages under read or up to date (a NOWAIT call that finds its page's
 * read done but not yet collected collects it, without waiting). Reads
 * that could only be started by waiting (for a read ring another thread
 * holds, for room on a ring, or for room in a full cache, which is not
 * reclaimed for them) are not started, and their pages are left for a
 * later pwb_read() to read; that is not an error. With the "psync" and
 * "null" backends, which read on the calling thread, nothing is read
 * from the device and no readahead starts. An application's map_page is
 * called for the pages read. The library's short bookkeeping locks may
 * still be met, as with pwb_write2().
 *
 * PWB_RW_DONTCACHE: pages not cached are read from the device through a
 * bounce buffer and not cached, and no readahead is started; pages cached
 * stay (a page under read by another caller is waited for and copied).
 * With PWB_RW_NOWAIT as well, nothing is read. PWB_RW_SYNC changes
 * nothing for a read (with PWB_RW_NOWAIT alone, it is PWB_RW_NOWAIT).
 *
 * Context: any thread but a flusher (not from an ops callback); sleeps
 *          unless PWB_RW_NOWAIT.
 * Return: as pwb_read(); -EINVAL also for unknown @flags; -EAGAIN with
 *         PWB_RW_NOWAIT when it would wait before copying a byte.
 */
PWB_API ssize_t pwb_read2(struct pwb_inode *inode, void *buf, size_t len,
			  uint64_t off, unsigned int flags);

/**
 * pwb_inode_size() - the size of a library-owned inode
 * @inode: an inode opened without get_page
 * @size: filled with the size in bytes
 *
 * The size is the end of the furthest pwb_write(), or what
 * pwb_inode_set_size() or a truncate (pwb_inode_discard() with @len
 * UINT64_MAX) made it. With an application's map_page it starts at 0 when
 * the inode is opened: an application that reopens a file restores it
 * with pwb_inode_set_size(). In allocator mode an inode reopened on the
 * same bdi keeps the size (and extents) it had at its close; on a new bdi
 * it starts at 0.
 *
 * Context: any thread but a flusher.
 * Return: 0; -EINVAL for a NULL argument or an application-owned inode;
 *         -EBADF if @inode is being closed; -EDEADLK from an ops callback.
 */
PWB_API int pwb_inode_size(struct pwb_inode *inode, uint64_t *size);

/**
 * pwb_inode_set_size() - truncate or extend a library-owned inode
 * @inode: an inode opened without get_page
 * @size: the new size in bytes
 *
 * Shrinking is pwb_inode_discard(@inode, @size, UINT64_MAX): the pages
 * wholly past @size lose their dirty state and leave the cache, and the
 * bytes past @size in the last page become zeros, cached or not (that
 * page is read if it is not cached, and dirtied). In allocator mode the
 * blocks of the pages wholly past @size are freed: they read as zeros
 * when the file grows again, and stay busy until released (see
 * pwb_bdi_freed_cookie()). With an application's map_page, pages a
 * truncate cut off read as zeros, until written again, for as long as the
 * inode stays open. Growing only moves the size: in allocator mode the
 * new pages read as zeros until written; with an application's map_page
 * the other pages below the new size read what the device holds at
 * map_page's offsets (so reopening a file restores its size this way; an
 * application that gives such pages space that held other data must
 * write them before it grows the size over them).
 *
 * Context: any thread but a flusher; sleeps.
 * Return: 0; -EINVAL for a NULL @inode or an application-owned inode;
 *         -EBADF if @inode is being closed; -EDEADLK from an ops callback;
 *         when shrinking into a page, the errors of pwb_write() for that
 *         page's zeroing (-ETIMEDOUT, -ENOMEM, a read error): the size is
 *         then left as it was.
 */
PWB_API int pwb_inode_set_size(struct pwb_inode *inode, uint64_t size);

/* ---------------------------------------------------------------------- */
/* Discard and stable pages                                               */

/**
 * pwb_inode_discard() - drop the dirty state of a range of pages
 * @inode: the inode
 * @off: first byte of the range
 * @len: bytes; UINT64_MAX means "to the end" (truncate)
 *
 * The kernel's truncate_inode_pages_range() for the application's cache.
 * Only the pages wholly inside the range are discarded: a page the range
 * covers in part stays as it is (the application marks it dirty if it
 * changed it). For those pages the call clears the dirty state (including
 * an integrity sync's selection, so a pwb_fsync() running now skips the
 * pages it has not started), waits for their writes already in flight and
 * for every end_write call of @inode already begun, and returns. From then
 * on libpwb does not touch those pages' memory or device space (no
 * get_page, map_page or end_write for them) until they are dirtied again.
 * Until it returns, writes already started may still call get_page,
 * map_page and end_write for them, so their memory must stay valid until
 * then. Counters (dirty pages per context and in total) drop by the pages
 * that were dirty; an inode left with neither dirty pages nor dirty
 * metadata leaves its context's dirty lists. Dirty metadata
 * (pwb_mark_inode_dirty) is not touched.
 *
 * Deleting an inode's data is pwb_inode_discard(@inode, 0, UINT64_MAX)
 * followed by pwb_inode_close().
 *
 * On an inode with library-owned pages (pwb_write()) the pages wholly
 * inside the range also leave the cache, and @len UINT64_MAX truncates:
 * the size becomes @off if it was larger, and the bytes from @off to the
 * end of its page become zeros (pwb_inode_set_size()). What a discarded
 * page reads as afterwards: in allocator mode zeros (its block is freed,
 * and stays busy until released: see pwb_bdi_freed_cookie()); with an
 * application's map_page what the device holds at its offset (the
 * dirty data not yet written is gone, the last data written is not).
 *
 * Errors of discarded pages (errors are recorded per inode, not per page,
 * as in the kernel's errseq_t; see pwb_fsync()):
 *  - A write of discarded pages that fails while the call waits is not
 *    recorded: no pwb_fsync(), pwb_sync() or pwb_inode_close() returns it,
 *    it does not count towards max_write_failures, and the pages are not
 *    made dirty again (end_write still gets the error). A failed write
 *    that also held pages outside the range is recorded as usual.
 *  - An error recorded before the call cannot be told apart from errors of
 *    other pages: it is still reported once, as usual, unless the call
 *    discards every page (@off 0, @len UINT64_MAX). That drops the errors
 *    the inode recorded and no pwb_fsync() reported yet, and its failed
 *    mark (as pwb_inode_clear_error()): a later pwb_fsync() or
 *    pwb_inode_close() reports only errors of later writes (a pwb_fsync()
 *    already running may still return it). pwb_sync() has a cursor of its
 *    own over the whole bdi and still reports such an error once.
 *
 * Pages dirtied again while the call runs stay dirty and may be written;
 * the call also waits for such writes, so an application that keeps
 * dirtying the range can keep it waiting. One discard runs at a time per
 * inode (a second waits for the first).
 *
 * Context: any thread but a flusher (not from an ops callback); sleeps.
 * The caller must not hold anything that the inode's end_write callback
 * waits for.
 * Return: 0 (also when no whole page lies in the range, or @len is 0);
 *         -EINVAL for a NULL @inode; -EOVERFLOW if @off + @len wraps past
 *         2^64 and @len is not UINT64_MAX; -EBADF if @inode is being
 *         closed; -EDEADLK from an ops callback (a flusher thread); for a
 *         truncate into a page of a library-owned inode, the errors of
 *         pwb_inode_set_size().
 */
PWB_API int pwb_inode_discard(struct pwb_inode *inode, uint64_t off,
			      uint64_t len);

/**
 * pwb_wait_writeback() - wait until no page of a range is being written
 * @inode: the inode
 * @off: first byte of the range
 * @len: bytes; UINT64_MAX means "to the end"
 *
 * Stable pages (the kernel's folio_wait_stable()): returns once no write of
 * a page the range touches is in flight, so the application may change
 * those pages' memory (a checksummed page must not change while the device
 * reads it). A page dirty and not yet being written does not make it wait;
 * a write that starts after it returned is not waited for: the application
 * serialises its own changes against pwb_mark_dirty() (a flusher takes a
 * page for writing only if it is dirty). The end_write call of a write
 * that ended may still be running when it returns.
 *
 * Context: any thread but a flusher (not from an ops callback, where the
 * write waited for may be the calling flusher's own); sleeps.
 * Return: 0 (also for @len 0); -EINVAL for a NULL @inode; -EOVERFLOW if
 *         @off + @len wraps past 2^64 and @len is not UINT64_MAX; -EBADF if
 *         @inode is being closed; -EDEADLK from an ops callback.
 */
PWB_API int pwb_wait_writeback(struct pwb_inode *inode, uint64_t off,
			       uint64_t len);

/** pwb_page_state() bits. */
#define PWB_PAGE_DIRTY 0x1	/* changed since last written */
#define PWB_PAGE_WRITEBACK 0x2	/* a write of the page is in flight */

/**
 * pwb_page_state() - is a page dirty, or being written?
 * @inode: the inode
 * @index: page number (byte offset / page_size)
 *
 * A snapshot: a page that is 0 (clean and idle) may be evicted by the
 * application, unless it dirties it again. A page can be both dirty and
 * under writeback (dirtied again while written).
 *
 * Context: any thread, including ops callbacks; does not sleep on I/O.
 * Return: a bit mask of PWB_PAGE_DIRTY and PWB_PAGE_WRITEBACK (0 = clean
 *         and idle); -EINVAL for a NULL @inode.
 */
PWB_API int pwb_page_state(struct pwb_inode *inode, uint64_t index);

/* ---------------------------------------------------------------------- */
/* Dirty throttling                                                       */

/**
 * pwb_balance_dirty() - hold a dirtier back while the bdi has too much dirty
 * @bdi: the bdi
 *
 * The kernel's balance_dirty_pages() in spirit. Below
 * dirty_background_bytes it returns at once. Above it, background writeback
 * runs on every context. Between the set point (half way from the
 * background threshold to dirty_bytes) and dirty_bytes the caller sleeps,
 * at most 200 ms at a time, in proportion to how far dirty memory is above
 * the set point and to the contexts' measured write bandwidth, so writers
 * settle at the device's pace. At dirty_bytes it waits until dirty memory
 * falls below the limit. The caller never writes pages itself.
 *
 * Context: any thread but a flusher; sleeps.
 * Return: 0; -EINVAL for a NULL @bdi; -EDEADLK from an ops callback;
 *         -ETIMEDOUT if the device did not make room within
 *         throttle_timeout_ms; -ESHUTDOWN if pwb_bdi_close() began before
 *         or while it waited.
 */
PWB_API int pwb_balance_dirty(struct pwb_bdi *bdi);

/**
 * pwb_balance_dirty_nowait() - the non-blocking check, for event loops
 *
 * Context: any thread; never sleeps.
 * Return: 0 if a dirtier may go on now; -EAGAIN if pwb_balance_dirty()
 *         would sleep (background writeback has been started); -EINVAL for
 *         a NULL @bdi; -ESHUTDOWN once pwb_bdi_close() tears it down.
 */
PWB_API int pwb_balance_dirty_nowait(struct pwb_bdi *bdi);

/* ---------------------------------------------------------------------- */
/* Fault injection (testing)                                              */

/** What an injected fault does to a write. */
enum pwb_fault_kind {
	PWB_FAULT_NONE = 0,	/* no fault: clears injection */
	PWB_FAULT_EIO = 1,	/* the write fails with -EIO, nothing written */
	PWB_FAULT_ENOSPC = 2,	/* the write fails with -ENOSPC */
	PWB_FAULT_SHORT = 3,	/* the device takes only part of the write
				 * once; the backend must continue it */
	PWB_FAULT_DELAY = 4,	/* the write is delayed by delay_ms */
	PWB_FAULT_READ_EIO = 5,	/* a device read of library-owned pages
				 * (pwb_read(), readahead) fails with -EIO;
				 * it counts and hits reads only */
	PWB_FAULT_READ_DELAY = 6, /* such a read is delayed by delay_ms
				   * (a device that stalls reads); it
				   * counts and hits reads only */
};

/**
 * struct pwb_fault - which writes an injected fault hits
 *
 * A write is hit when it overlaps [dev_start, dev_end) (dev_end 0 means the
 * whole device) and one of: it is the @nth matching write counted from
 * pwb_bdi_inject_fault() (1-based; 0 = unused), or a multiple of @every
 * (0 = unused), or a pseudo-random draw (seeded by @seed) falls below
 * @ppm parts per million. At most @max_hits writes are hit (0 = no cap).
 * Faults wrap the real backend: unhit writes go to the device unchanged.
 * Grows only at the end (see "Structs that cross the ABI" at the top).
 */
struct pwb_fault {
	enum pwb_fault_kind kind;
	uint64_t nth;
	uint64_t every;
	uint32_t ppm;
	uint64_t seed;
	uint64_t dev_start;
	uint64_t dev_end;
	unsigned int delay_ms;
	uint64_t max_hits;
};

/**
 * pwb_bdi_inject_fault() - start, change or stop fault injection
 * @bdi: the bdi
 * @fault: the rule, copied; NULL or kind PWB_FAULT_NONE stops injection
 * @fault_sz: sizeof(struct pwb_fault) as the caller was compiled; the
 *            macro of the same name passes it
 *
 * Takes effect for writes submitted after the call. The examples also read
 * the environment variable PWB_FAULT ("eio:every=10", see doc/faults.md).
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL @bdi, an unknown kind, a rule that can
 *         never hit (no nth, every or ppm), or @fault_sz smaller than the
 *         first layout of the struct; -E2BIG if @fault is larger than this
 *         library's struct and sets a field this library does not know;
 *         -ENOMEM; -ESHUTDOWN once pwb_bdi_close() tears the bdi down.
 */
PWB_API int pwb_bdi_inject_fault(struct pwb_bdi *bdi,
				 const struct pwb_fault *fault,
				 size_t fault_sz);
#define pwb_bdi_inject_fault(bdi, fault)                                       \
	pwb_bdi_inject_fault((bdi), (fault), sizeof(struct pwb_fault))

/**
 * pwb_fault_parse() - turn a PWB_FAULT-style string into a rule
 * @spec: "kind[:key=value,...]", kind one of eio, enospc, short, delay,
 *        read_eio, read_delay, none; keys nth, every, ppm, seed, start,
 *        end, delay_ms, max_hits
 * @fault: filled on success
 * @fault_sz: sizeof(struct pwb_fault) as the caller was compiled; the
 *            macro of the same name passes it
 *
 * Context: any thread.
 * Return: 0; -EINVAL for NULL arguments, a malformed spec, or @fault_sz
 *         smaller than the first layout of the struct.
 */
PWB_API int pwb_fault_parse(const char *spec, struct pwb_fault *fault,
			    size_t fault_sz);
#define pwb_fault_parse(spec, fault)                                           \
	pwb_fault_parse((spec), (fault), sizeof(struct pwb_fault))

/**
 * pwb_bdi_fault_hits() - number of writes hit by injection since the bdi opened
 * @bdi: the bdi
 * @hits: filled with the count on success
 *
 * The name that matches pwb_bdi_inject_fault(); pwb_fault_hits() is the
 * same function under its older name.
 *
 * Context: any thread; lock-free.
 * Return: 0; -EINVAL for a NULL argument; -ESHUTDOWN once pwb_bdi_close()
 *         tears the bdi down.
 */
PWB_API int pwb_bdi_fault_hits(const struct pwb_bdi *bdi, uint64_t *hits);

/**
 * pwb_fault_hits() - the older name of pwb_bdi_fault_hits()
 * @bdi: the bdi
 * @hits: filled with the count on success
 *
 * Kept for existing programs; new code calls pwb_bdi_fault_hits().
 *
 * Context: any thread; lock-free.
 * Return: as pwb_bdi_fault_hits().
 */
PWB_API int pwb_fault_hits(const struct pwb_bdi *bdi, uint64_t *hits);

/* ---------------------------------------------------------------------- */
/* Statistics                                                             */

/**
 * enum pwb_block_cause - why a caller slept inside libpwb
 *
 * The index of pwb_stats.blocked_ns and blocked_events and of
 * pwb_tenant_stats' fields of the same names; pwb_block_cause_str() names
 * it. Values are only ever added, up to PWB_BLOCK_SLOTS - 1: the arrays
 * keep their size.
 */
enum pwb_block_cause {
	/** A dirtier paused by the dirty throttle (pwb_mark_dirty(),
	 *  pwb_write(), pwb_balance_dirty()). */
	PWB_BLOCK_THROTTLE = 0,
	/** A writer waited for room in a full page cache (cache_bytes). */
	PWB_BLOCK_CACHE_FULL = 1,
	/** The part of a sync wait a flusher spent in the application's
	 *  log_force for the waiting call (write-ahead rule). */
	PWB_BLOCK_LOG_FORCE = 2,
	/** A wait for writes of pages to end before the pages may change
	 *  (pwb_wait_writeback(), pwb_inode_discard()). */
	PWB_BLOCK_STABLE_PAGE = 3,
	/** pwb_fsync(), pwb_sync(), a close or pwb_bdi_writeback() with
	 *  PWB_WB_WAIT waiting for the flushers to write the pages. */
	PWB_BLOCK_SYNC_WAIT = 4,
	/** A device flush (fdatasync) of pwb_fsync(), pwb_sync() or a close,
	 *  its own or another call's it waited for. */
	PWB_BLOCK_DEVICE_FLUSH = 5,
	/** A throttle pause whose pace was a rate cap's: the tenant's
	 *  rate_limit_bytes_per_sec, or the bdi's while writeback runs at
	 *  that cap. Counted instead of PWB_BLOCK_THROTTLE. */
	PWB_BLOCK_RATE_CAP = 6,
	/** A device read of the page cache (pwb_read(), a pwb_write() of
	 *  part of a page not cached), or a wait for a read another call
	 *  started of the same page. */
	PWB_BLOCK_READ = 7,
	/** A wait for another call or a flusher to let go of the object:
	 *  a close waiting for calls still running on it, a close that
	 *  waits for a flusher's visit of the inode to end. */
	PWB_BLOCK_BUSY = 8,
};
/** Causes this header knows. */
#define PWB_BLOCK_NR_CAUSES 9

/**
 * pwb_block_cause_str() - name an enum pwb_block_cause value
 * @cause: an index of pwb_stats.blocked_ns
 *
 * Context: any thread.
 * Return: a static string ("throttle", "cache-full", ...), never NULL;
 *         "unknown" for values this release does not know.
 */
PWB_API const char *pwb_block_cause_str(unsigned int cause);

/**
 * struct pwb_stats - counters, of one context or summed over a bdi
 *
 * "now" fields are instantaneous; the others count since the bdi opened.
 * Grows only at the end (see "Structs that cross the ABI" at the top).
 */
struct pwb_stats {
	uint64_t nr_dirty_inodes;	/* now: inodes on b_dirty/b_io/b_more_io */
	uint64_t dirty_pages;		/* now: dirty, not yet being written */
	uint64_t writeback_pages;	/* now: being written */
	uint64_t dirtied_pages;		/* pages that went clean -> dirty */
	uint64_t written_pages;		/* pages written successfully */
	uint64_t io_submitted;		/* write requests issued */
	uint64_t io_errors;		/* write requests that failed */
	uint64_t bytes_written;		/* bytes written successfully */
	uint64_t nr_inodes;		/* now: inodes affined to the context */
	uint64_t nr_dirty_time_inodes;	/* now: on b_dirty_time */
	uint64_t wb_passes;		/* work items run by the flusher */
	uint64_t periodic_passes;	/* of which periodic (kupdate) */
	uint64_t background_passes;	/* of which background */
	uint64_t sync_passes;		/* of which integrity sync */
	uint64_t inodes_written;	/* inode visits that wrote something */
	uint64_t device_flushes;	/* fdatasync calls */
	uint64_t flush_ns;		/* time the flusher spent in passes */
	uint64_t write_bandwidth;	/* bytes/s, moving average */
	uint64_t throttle_ns;		/* time dirtiers slept in balance */
	uint64_t throttle_events;	/* sleeps in pwb_balance_dirty */
	uint64_t io_extents;		/* contiguous dirty extents written */
	/** Now, pwb_bdi_stats only: max over mean of the contexts' dirty
	 *  pages, times 1000 (1000 = perfectly even; 0 if nothing dirty). */
	uint64_t imbalance_milli;
	/* ---- automatic parallelism (PWB_BDI_AUTO_WB_CTX), pwb_bdi_stats
	 * only; all 0 without the flag ---- */
	uint64_t auto_nr_wb_ctx;	/* now: the count the tuner chose */
	uint64_t auto_reason;		/* now: enum pwb_auto_reason of its last
					 * decision (pwb_auto_reason_str) */
	uint64_t auto_steps;		/* re-shards the tuner made */
	uint64_t auto_windows;		/* windows measured (busy enough) */
	uint64_t auto_best_bw;		/* now: bytes/s of the fastest count
					 * measured in the current search */
	uint64_t auto_best_nr_wb_ctx;	/* now: that count (0: none yet) */
	/** Time the flusher slept to keep background and periodic writeback
	 *  under rate_limit_bytes_per_sec, in ns. */
	uint64_t rate_limited_ns;
	/* ---- the write-ahead rule (pwb_mark_dirty_lsn) ---- */
	/** Calls of pwb_bdi_config.log_force. */
	uint64_t log_forces;
	/** Pages writeback passed over because their LSN was above the
	 *  durable LSN (counted once per pass that passed a page over). */
	uint64_t lsn_held_pages;
	/** Pages writeback passed over because get_page returned -EAGAIN
	 *  (latched; counted once per attempt). */
	uint64_t latched_pages;
	/** Times an integrity pass over a context's lists (pwb_sync) found
	 *  an inode another flusher was writing and waited for that visit to
	 *  end (for example a pwb_fsync's visit under the shared-list
	 *  policy). */
	uint64_t busy_waits;
	/* ---- the page cache of library-owned inodes (pwb_write) ---- */
	/** Now: pages in the cache, the whole bdi's (also in
	 *  pwb_wb_ctx_stats()). */
	uint64_t cache_pages;
	/** Clean pages freed by the context's flusher after its passes
	 *  (pwb_bdi_stats: by every flusher and by writers). */
	uint64_t reclaimed_pages;
	/** Reclaim runs of the context's flusher (above the high
	 *  watermark). */
	uint64_t reclaim_passes;
	/** pwb_bdi_stats only: clean pages freed by writers and readers that
	 *  found the cache full (direct reclaim). */
	uint64_t direct_reclaimed_pages;
	/* ---- the built-in allocator, pwb_bdi_stats only (0 per context) */
	/** Now: extents of allocator-mode inodes, open or closed. */
	uint64_t extents;
	/** The number of allocation groups (pwb_bdi_alloc_group_stats). */
	uint64_t alloc_groups;
	/** Now: bytes reserved for dirty pages not yet given blocks. */
	uint64_t reserved_bytes;
	/** Now: bytes of the device not allocated (reserved included). */
	uint64_t free_bytes;
	/** Nanoseconds the context's flusher spent reclaiming clean pages
	 *  (pwb_bdi_stats: all flushers); reclaimed_pages minus
	 *  direct_reclaimed_pages over this is the reclaim rate. */
	uint64_t reclaim_ns;
	/** pwb_bdi_stats only: device reads the page cache made to fill
	 *  pages (pwb_read() of pages not cached and its readahead,
	 *  pwb_fadvise(), and a pwb_write() of part of one); one read
	 *  fills a run of pages the device holds one after another (up to
	 *  64, and at most max_io_bytes). */
	uint64_t read_ios;
	/** pwb_bdi_stats only: pages those reads filled; read_pages over
	 *  read_ios is the mean run. */
	uint64_t read_pages;
	/** Now, pwb_bdi_stats only: bytes freed by truncates and discards
	 *  of allocator-mode inodes and not yet reusable (busy extents,
	 *  see pwb_bdi_release_freed()). */
	uint64_t busy_bytes;
	/** Now, pwb_bdi_stats only: the dirty limit the throttle holds the
	 *  bdi to (dirty_bytes, or in a domain its share of the domain's),
	 *  and its background threshold, in bytes; 0: none. */
	uint64_t dirty_limit_bytes;
	uint64_t dirty_background_limit_bytes;
	/** Now, pwb_bdi_stats only: in a domain, the bdi's share of the
	 *  domain's limits in parts per million (its bounds applied); 0
	 *  without a domain. */
	uint64_t domain_share_ppm;
	/** pwb_bdi_stats only: pages read before a pwb_read() asked for
	 *  them (readahead, PWB_FADV_WILLNEED); included in read_pages. */
	uint64_t readahead_pages;
	/* ---- time callers slept in libpwb, by enum pwb_block_cause ---- */
	/** Nanoseconds of cfg.clock callers spent asleep for each cause,
	 *  timed only when a call really sleeps. pwb_wb_ctx_stats(): the
	 *  waits of calls about an inode of the context (its sync waits,
	 *  log forces, device flushes, stable-page and read waits);
	 *  pwb_bdi_stats(): every wait, also those of the bdi as a whole
	 *  (the throttle and the page cache's room judge all contexts
	 *  together) and of calls without an inode (pwb_sync(), closes). */
	uint64_t blocked_ns[PWB_BLOCK_SLOTS];
	/** How many such waits (a throttle pause, one fsync's wait for its
	 *  writes, one device flush, ...). */
	uint64_t blocked_events[PWB_BLOCK_SLOTS];
};

/**
 * enum pwb_auto_reason - why the tuner holds its current count
 *
 * The value of pwb_stats.auto_reason; pwb_auto_reason_str() names it.
 * Values may be added in later releases.
 */
enum pwb_auto_reason {
	/** Tuning is off (the bdi has no PWB_BDI_AUTO_WB_CTX). */
	PWB_AUTO_OFF = 0,
	/** Tuning is on; no window has been measured yet. */
	PWB_AUTO_START = 1,
	/** The last window had too little writeback to measure (nothing
	 *  dirty at one of its ends, or under 64 pages written): count kept. */
	PWB_AUTO_IDLE = 2,
	/** Trying more contexts than the fastest count measured so far. */
	PWB_AUTO_PROBE_UP = 3,
	/** Trying fewer contexts than the fastest count measured so far. */
	PWB_AUTO_PROBE_DOWN = 4,
	/** Both neighbouring counts measured no faster: holding the fastest
	 *  (the fewest contexts within 5% of the fastest). */
	PWB_AUTO_SETTLED = 5,
	/** The periodic re-check of a neighbour of the settled count. */
	PWB_AUTO_REPROBE = 6,
	/** pwb_bdi_set_nr_wb_ctx() set a count: tuning paused until it is
	 *  called with 0. */
	PWB_AUTO_USER = 7,
	/** The contexts were re-sharded by someone else (a policy switch) or
	 *  tuning resumed: measurements dropped, the search starts again. */
	PWB_AUTO_RESET = 8,
	/** A re-shard failed (-ENOMEM, thread creation): the count stays and
	 *  the next window decides again. */
	PWB_AUTO_FAILED = 9,
};

/**
 * pwb_auto_reason_str() - name an enum pwb_auto_reason value
 * @reason: a value of pwb_stats.auto_reason
 *
 * Context: any thread.
 * Return: a static string ("settled", "probe-up", ...), never NULL;
 *         "unknown" for values this release does not know.
 */
PWB_API const char *pwb_auto_reason_str(unsigned int reason);

/**
 * pwb_bdi_stats() - counters summed over every context of @bdi
 * @bdi: the bdi
 * @st: filled on success
 * @st_sz: sizeof(struct pwb_stats) as the caller was compiled; the macro
 *         of the same name passes it
 *
 * Context: any thread; lock-free (the counters of different contexts are
 * read one after another, so the sum is not an atomic snapshot).
 * Return: 0; -EINVAL for a NULL argument or @st_sz smaller than the first
 *         layout of the struct; -ESHUTDOWN once pwb_bdi_close() tears the
 *         bdi down.
 */
PWB_API int pwb_bdi_stats(const struct pwb_bdi *bdi, struct pwb_stats *st,
			  size_t st_sz);
#define pwb_bdi_stats(bdi, st)                                                 \
	pwb_bdi_stats((bdi), (st), sizeof(struct pwb_stats))

/**
 * pwb_wb_ctx_stats() - counters of context @idx
 * @bdi: the bdi
 * @idx: the context, 0 .. pwb_bdi_nr_wb_ctx() - 1
 * @st: filled on success
 * @st_sz: sizeof(struct pwb_stats) as the caller was compiled; the macro
 *         of the same name passes it
 *
 * Context: any thread; lock-free.
 * Return: 0; -EINVAL for a NULL argument or @st_sz smaller than the first
 *         layout of the struct; -ERANGE if @idx is not below
 *         pwb_bdi_nr_wb_ctx(); -ESHUTDOWN once pwb_bdi_close() tears the
 *         bdi down.
 */
PWB_API int pwb_wb_ctx_stats(const struct pwb_bdi *bdi, unsigned int idx,
			     struct pwb_stats *st, size_t st_sz);
#define pwb_wb_ctx_stats(bdi, idx, st)                                         \
	pwb_wb_ctx_stats((bdi), (idx), (st), sizeof(struct pwb_stats))

/**
 * enum pwb_hist - which latency pwb_bdi_histogram() reads
 */
enum pwb_hist {
	/** Write I/Os, from submission to the backend to completion
	 *  (the null backend's, which write nothing, as 0 ns). */
	PWB_HIST_WRITE_IO = 0,
	/** pwb_fsync() calls, from entry to return. */
	PWB_HIST_FSYNC = 1,
	/** Throttle pauses (PWB_BLOCK_THROTTLE and PWB_BLOCK_RATE_CAP),
	 *  each sleep as long as it lasted. */
	PWB_HIST_THROTTLE = 2,
};
/** Histograms this header knows. */
#define PWB_HIST_NR 3
/** Buckets of a struct pwb_histogram. */
#define PWB_HIST_BUCKETS 64

/**
 * struct pwb_histogram - a log2 histogram of latencies, in ns of cfg.clock
 *
 * Filled by pwb_bdi_histogram(). Grows only at the end, like struct
 * pwb_stats.
 */
struct pwb_histogram {
	/** Values recorded. */
	uint64_t count;
	/** Their sum, in ns. */
	uint64_t sum_ns;
	/** bucket[i] counts the values v with 2^i <= v < 2^(i+1) ns;
	 *  bucket[0] also counts 0. */
	uint64_t bucket[PWB_HIST_BUCKETS];
};

/**
 * pwb_bdi_histogram() - read a latency histogram of @bdi
 * @bdi: the bdi
 * @which: an enum pwb_hist value
 * @h: filled on success
 * @h_sz: sizeof(struct pwb_histogram) as the caller was compiled; the
 *        macro of the same name passes it
 *
 * Summed over every context of @bdi (and those a re-shard retired) since
 * the bdi opened. Each context keeps its own buckets, written by its
 * flusher or by calls about its inodes, so recording bounces no cache
 * line between contexts. Lock-free: the buckets are read one by one, not
 * as one snapshot, and count is their sum.
 *
 * Context: any thread; lock-free.
 * Return: 0; -EINVAL for a NULL argument, an unknown @which or @h_sz
 *         smaller than the first layout of the struct; -ESHUTDOWN once
 *         pwb_bdi_close() tears the bdi down.
 */
PWB_API int pwb_bdi_histogram(const struct pwb_bdi *bdi, unsigned int which,
			      struct pwb_histogram *h, size_t h_sz);
#define pwb_bdi_histogram(bdi, which, h)                                       \
	pwb_bdi_histogram((bdi), (which), (h), sizeof(struct pwb_histogram))

/*
 * The built-in allocator. An inode opened with neither get_page nor
 * map_page gets device space from the bdi's extent allocator: a page is
 * given a block when it is written back (delayed allocation), and the pages
 * one pass writes for one inode get one contiguous extent where free space
 * allows. libpwb keeps no on-disk metadata: to keep a file across runs the
 * application saves its extent list (pwb_inode_extents()) and loads it into
 * the freshly opened inode of the next run (pwb_inode_set_extents()).
 */

/** One extent of an allocator-mode inode; bytes, multiples of page_size. */
struct pwb_extent {
	uint64_t file_off;	/* offset in the inode */
	uint64_t dev_off;	/* offset on the device */
	uint64_t len;
};

/**
 * pwb_inode_extents() - list an allocator-mode inode's extents
 * @inode: an inode opened with neither get_page nor map_page
 * @ext: room for @nr extents (may be NULL if @nr is 0)
 * @nr: how many to copy at most
 * @total: set to how many extents the inode has (may be NULL)
 *
 * Copies the first min(@nr, *@total) extents in file order. Only blocks
 * that hold the file's data are listed: pages dirtied but not yet
 * written, and blocks allocated whose write has not ended (or failed),
 * have no extent yet; so extents read after a pwb_fsync() name durable
 * data only, which is what an application saves in its index (see
 * pwb_bdi_freed_cookie() for when freed blocks may be reused). Call with
 * @nr 0 to size @ext.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL @inode, a NULL @ext with @nr > 0, or an
 *         inode that is not in allocator mode; -EBADF if @inode is closing.
 */
PWB_API int pwb_inode_extents(struct pwb_inode *inode, struct pwb_extent *ext,
			      size_t nr, size_t *total);

/**
 * pwb_inode_set_extents() - load saved extents into an allocator-mode inode
 * @inode: a freshly opened allocator-mode inode (no extents, nothing dirty)
 * @ext: the extents, as pwb_inode_extents() gave them (any order)
 * @nr: how many
 *
 * Marks the extents' device blocks used and maps the inode's pages to
 * them: the way to rebuild the allocator's state after a restart.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL argument, an inode not in allocator mode,
 *         an extent of length 0, not page aligned, past the device, or
 *         overlapping another in the file; -EBUSY if the inode already has
 *         extents or dirty pages; -EEXIST if a block is already used
 *         (another inode's, or twice in @ext): nothing is changed then;
 *         -ENOSPC if free blocks are reserved by dirty pages; -ENOMEM.
 */
PWB_API int pwb_inode_set_extents(struct pwb_inode *inode,
				  const struct pwb_extent *ext, size_t nr);

/** Write stream sets of a bdi at most; see pwb_inode_set_stream(). */
#define PWB_WRITE_STREAM_SETS 8

/**
 * pwb_inode_set_stream() - keep an allocator-mode inode's data with its kind
 * @inode: an inode opened with neither get_page nor map_page
 * @id: the write stream; 0 (the default) for none
 *
 * Data of different lifetimes that shares allocation groups interleaves
 * on the device: once the short-lived files are deleted, the long-lived
 * ones are left in pieces between holes. Giving each lifetime its own
 * stream keeps them apart. The bdi's allocation groups are split into
 * min(pwb_stats.alloc_groups, PWB_WRITE_STREAM_SETS) sets of consecutive
 * groups; stream @id >= 1 allocates in set (@id - 1) modulo that number,
 * so streams 1 and 1 + PWB_WRITE_STREAM_SETS share a set. Stream 0 uses
 * every group. A set that is full spills into the other groups rather
 * than fail. Blocks the inode already has stay where they are; new ones
 * go to the stream's set, from a home group chosen at the next
 * allocation (the freest of the set). The stream is kept with the
 * inode's extents across a close on the same bdi.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL @inode or one not in allocator mode;
 *         -EBUSY if the inode has dirty pages that have no block yet (a
 *         change would move them under their writeback context; call
 *         pwb_fsync() first, or set the stream before writing);
 *         -EBADF if @inode is closing.
 */
PWB_API int pwb_inode_set_stream(struct pwb_inode *inode, unsigned int id);

/**
 * pwb_bdi_freed_cookie() - name the frees that have happened so far
 * @bdi: the bdi
 * @cookie: filled with a number that covers every block of an
 *          allocator-mode inode freed before this call
 *
 * Busy extents, as XFS keeps them: a block that a truncate or discard
 * (pwb_inode_set_size(), pwb_inode_discard()) takes from an
 * allocator-mode inode is busy: no allocation gets it, because the
 * application's saved index (the extents it stored with
 * pwb_inode_extents()) may still name it, and after a crash two files
 * would claim it, one showing the other's data. The rule:
 *  1. take a cookie with this call;
 *  2. then save your index as it is now: for every inode whose saved
 *     extents could name freed blocks, the extents pwb_inode_extents()
 *     gives after this call (after a pwb_fsync() of the inode, so that
 *     they name written data only), and the size;
 *  3. once that save is durable, pass the cookie to
 *     pwb_bdi_release_freed(): the blocks freed before step 1 become
 *     free.
 * Frees after step 1 stay busy until a later cookie is released. A
 * program that keeps no index sets PWB_BDI_REUSE_FREED instead. Blocks
 * allocated but never written (a write that failed and was dropped, a
 * page reserved but never dirtied) were never reported by
 * pwb_inode_extents() and are freed at once. Busy blocks count in
 * pwb_stats.busy_bytes; a write that finds no free space says how many
 * bytes are busy in its message.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL argument; -ESHUTDOWN if @bdi is closing.
 */
PWB_API int pwb_bdi_freed_cookie(struct pwb_bdi *bdi, uint64_t *cookie);

/**
 * pwb_bdi_release_freed() - let freed blocks be reused
 * @bdi: the bdi
 * @cookie: from pwb_bdi_freed_cookie() on @bdi
 *
 * Every block freed before @cookie was taken becomes free for new
 * allocations (see pwb_bdi_freed_cookie() for when that is safe).
 * Releasing a cookie again, or an older one after a newer, does nothing.
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL @bdi or a @cookie that
 *         pwb_bdi_freed_cookie() has not given yet; -ESHUTDOWN if @bdi is
 *         closing.
 */
PWB_API int pwb_bdi_release_freed(struct pwb_bdi *bdi, uint64_t cookie);

/**
 * struct pwb_alloc_group_stats - one allocation group (bytes)
 *
 * May grow at the end, like struct pwb_stats.
 */
struct pwb_alloc_group_stats {
	uint64_t start;		/* device offset of the group */
	uint64_t len;		/* its length */
	uint64_t free_bytes;	/* free (reserved or not) */
	uint64_t free_extents;	/* free extents (fragmentation) */
	uint64_t largest_free;	/* length of the largest free extent */
};

/**
 * pwb_bdi_alloc_group_stats() - free space of one allocation group
 * @bdi: the bdi
 * @group: 0 up to the number of groups (pwb_stats.alloc_groups) - 1
 * @st: filled in
 * @st_sz: sizeof(struct pwb_alloc_group_stats) as the caller was compiled;
 *         the macro of the same name passes it
 *
 * Context: any thread.
 * Return: 0; -EINVAL for a NULL argument or a too small @st_sz; -ENOENT
 *         past the last group; -ESHUTDOWN if @bdi is closing.
 */
PWB_API int pwb_bdi_alloc_group_stats(const struct pwb_bdi *bdi,
				      unsigned int group,
				      struct pwb_alloc_group_stats *st,
				      size_t st_sz);
#define pwb_bdi_alloc_group_stats(bdi, group, st)                              \
	pwb_bdi_alloc_group_stats((bdi), (group), (st),                        \
				  sizeof(struct pwb_alloc_group_stats))

#ifdef __cplusplus
}
#endif

#endif /* PWB_H */
