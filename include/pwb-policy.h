/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-policy.h - libpwb shard policies: the interface for policy authors
 *
 * A bdi has several writeback contexts (dirty lists + a flusher thread
 * each). A *shard policy* decides, once per inode at its first dirtying,
 * which context the inode is affined to; from then on that context's
 * flusher alone writes the inode's pages (except under
 * PWB_POLICY_F_SHARED_LIST, below, where flushers take turns, and
 * PWB_POLICY_F_PER_PAGE, where each page is placed on its own). The application chooses a policy
 * by the string pwb_bdi_config.policy, "name[:key=value,...]", for example
 * "alloc-group:ag_size=1G".
 *
 * Built in (always registered):
 *
 *	inode-hash	inode number modulo the number of contexts
 *			(the default); no arguments.
 *	alloc-group	the device is cut into allocation groups,
 *			"groups=N" of equal size or "ag_size=SIZE" bytes
 *			each (suffix K, M, G or T; default groups=64). An
 *			inode belongs to the group holding the device
 *			offset of its first dirtied page (or to the context
 *			it was hinted to, see pwb_inode_set_wb_hint);
 *			group g goes to context g % nr_wb_ctx, so one
 *			region of the device is always written by one
 *			thread. An inode whose first page cannot be mapped
 *			falls back to inode-hash.
 *	least-loaded	the context with the fewest dirty pages at the
 *			inode's first dirtying (ties: inode-hash order); no
 *			arguments.
 *	hint		the context set with pwb_inode_set_wb_hint(),
 *			modulo the number of contexts; inode-hash if none
 *			was set; no arguments.
 *	xarray		each context owns a contiguous range of keys, the
 *			key being the device page of the inode's first
 *			dirtied page ("key=offset", the default) or its
 *			inode number ("key=ino", contexts splitting
 *			0 .. "ino_range=N" - 1, default 2^32); a pass
 *			writes the chosen inodes in key order (so in device
 *			order), kept in a radix tree instead of a FIFO.
 *	shared-list	one dirty list for the whole bdi (kept on context
 *			0); every flusher claims "batch=N" inodes at a time
 *			from it (default 16, 1 to 1024), writes each whole
 *			and releases them when their writes have landed.
 *	region		one inode on many contexts: each dirty *page*
 *			goes to the context owning the region of the
 *			device its map_page offset falls in, region r
 *			(bytes=SIZE each, suffix K/M/G/T, a multiple of the
 *			page size; default the device size divided by the
 *			number of contexts, rounded down to 1 MiB) to context
 *			r % nr_wb_ctx. An inode's pages may then sit on
 *			several contexts, each writing its own in one
 *			sequential stream; pwb_fsync() waits for all of
 *			them. Hints are ignored; a page that cannot be
 *			mapped goes where inode-hash puts the inode.
 *
 * More policies come from the application: an ops table registered in
 * process with pwb_policy_register(), or a shared object loaded at run time
 * with pwb_policy_load(). doc/policy-guide.md is the author's guide, and
 * examples/policy-plugin/ a complete plugin built out of tree.
 *
 * Everything in pwb.h's conventions holds here too: functions return 0 or a
 * negative errno and leave a message for pwb_errmsg(); every function is
 * thread-safe.
 */
#ifndef PWB_POLICY_H
#define PWB_POLICY_H

#include "pwb.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The policy ABI this header describes. A plugin's ops table says which
 * version it was written for; the library accepts versions 1 ..
 * PWB_POLICY_ABI_VERSION of the library it runs in, and reads only the
 * fields valid in the table's version. A later version only appends fields
 * (to struct pwb_policy_ops and struct pwb_policy_inode), marked "valid
 * from ABI N"; a change that is not an append is a new major ABI, which
 * old plugins fail to load with -EPROTONOSUPPORT instead of misbehaving.
 */
#define PWB_POLICY_ABI_VERSION 3

/** Longest policy name, in bytes, without the terminating NUL. */
#define PWB_POLICY_NAME_MAX 47
/** Longest spec "name[:args]" a bdi accepts, without the NUL. */
#define PWB_POLICY_SPEC_MAX 127

/**
 * struct pwb_policy_inode - what a policy may look at when it places an inode
 *
 * Built by the library for one select() call, on the caller's stack: valid
 * only during that call. Fields are appended in later ABI versions.
 */
struct pwb_policy_inode {
	/* ---- valid from ABI 1 ---- */
	/** The bdi the inode belongs to. */
	struct pwb_bdi *bdi;
	/** The inode; pass it to pwb_policy_map_page() or pwb_inode_priv(). */
	struct pwb_inode *inode;
	/** The application's inode number. */
	uint64_t ino;
	/** The first page dirtied (the page index, not a byte offset). Pages
	 *  dirtied only by pwb_mark_inode_dirty() count as page 0. */
	uint64_t index;
	/** The application's hint (pwb_inode_set_wb_hint), or -1 for none.
	 *  May be >= the current number of contexts if the count shrank since
	 *  it was set. */
	int hint;
};

/**
 * struct pwb_policy_ops - a shard policy
 *
 * A policy is a static, constant table: the library keeps the pointer (it
 * is not copied) for the rest of the process, so it must never change or be
 * freed. Each bdi using the policy gets its own instance: init() creates the
 * instance's state and fini() frees it.
 */
struct pwb_policy_ops {
	/* ---- valid from ABI 1 ---- */
	/** PWB_POLICY_ABI_VERSION when the policy was compiled. */
	unsigned int abi_version;
	/** Unique name: 1 to PWB_POLICY_NAME_MAX characters of [A-Za-z0-9_.-].
	 *  The table's own string, kept (not copied). */
	const char *name;
	/** Optional. Create an instance for @bdi with the text after "name:"
	 *  (@args, or NULL when the spec has none; already checked to be
	 *  "key=value[,key=value...]"). Store the instance's state in *@state
	 *  (NULL is fine). Return 0, or a negative errno (-EINVAL for bad
	 *  arguments), after recording nothing and freeing what it allocated;
	 *  pwb_bdi_open() then fails with that value. Runs on the thread
	 *  opening the bdi, whose contexts and flushers already exist: it may
	 *  call pwb_bdi_info(), pwb_bdi_nr_wb_ctx() and pwb_wb_ctx_stats(). */
	int (*init)(struct pwb_bdi *bdi, const char *args, void **state);
	/** Optional. Free the instance's state; called once, when the bdi
	 *  closes (or switches to another policy), after the last select(). */
	void (*fini)(void *state);
	/** Required. Return the context index, 0 .. @nr_wb_ctx - 1, for the
	 *  inode @info describes. Called at most once per inode and bdi
	 *  instance in the ordinary course, from whichever application thread
	 *  dirties the inode first (inside pwb_mark_dirty or
	 *  pwb_mark_inode_dirty), and for every dirtied inode again on the
	 *  thread that re-shards (pwb_bdi_set_nr_wb_ctx, pwb_bdi_set_policy,
	 *  the automatic tuner) while the flushers are parked and that
	 *  thread holds the bdi's re-shard lock. Otherwise no library lock is
	 *  held. Concurrent with other select() calls on the same state,
	 *  possibly inside an urcu-bp read-side critical section: it must be
	 *  thread-safe, fast, and must not sleep for long or call a function
	 *  that waits for writeback or re-shards (pwb_sync, pwb_fsync,
	 *  pwb_bdi_set_nr_wb_ctx, pwb_bdi_set_policy, close functions). It
	 *  may call
	 *  pwb_policy_map_page(), pwb_bdi_info(), pwb_wb_ctx_stats() and the
	 *  inode query functions. A negative errno or an index out of range is
	 *  not fatal: that inode is placed by inode-hash and the bdi counts the
	 *  failure and reports it once on stderr. @nr_wb_ctx is authoritative
	 *  even if nr_wb_ctx_changed() has announced another count; with a
	 *  single context the library places the inode without asking. */
	int (*select)(void *state, const struct pwb_policy_inode *info,
		      unsigned int nr_wb_ctx);
	/** Optional. The bdi's number of contexts became @nr (live
	 *  re-sharding, pwb_bdi_set_nr_wb_ctx); select() calls that follow
	 *  may be asked to re-place existing inodes for the new count. Called
	 *  on the re-sharding thread, possibly while select() runs. */
	void (*nr_wb_ctx_changed)(void *state, unsigned int nr);

	/* ---- valid from ABI 2 ---- */
	/** PWB_POLICY_F_* bits below; 0 for the plain per-context FIFO
	 *  lists. Unknown bits make registration fail with -EINVAL. */
	unsigned int flags;
	/** Optional, used with PWB_POLICY_F_ORDERED: store in *@key the
	 *  inode's ordering key (smaller keys are written first in a pass;
	 *  equal keys are allowed). Called next to select(), under the same
	 *  rules. A negative errno (or no function) gives key 0. */
	int (*key)(void *state, const struct pwb_policy_inode *info,
		   uint64_t *key);
	/** Optional, used with PWB_POLICY_F_SHARED_LIST: how many inodes a
	 *  flusher claims at a time, 1 to 1024 (other values, or no
	 *  function, give 16). Called when the instance is installed. */
	unsigned int (*batch)(void *state);

	/* ---- valid from ABI 3 ---- */
	/** Required with PWB_POLICY_F_PER_PAGE (registration fails with
	 *  -EINVAL without it), ignored otherwise: return the context index,
	 *  0 .. @nr_wb_ctx - 1, that should write page @info->index of
	 *  @info->inode. Called when the page becomes dirty (again after it
	 *  was written), under select()'s rules; a failure places the page
	 *  where inode-hash would place the inode. select() is still asked
	 *  for the inode as a whole (where its metadata is written). */
	int (*select_page)(void *state, const struct pwb_policy_inode *info,
			   unsigned int nr_wb_ctx);
};

/**
 * PWB_POLICY_F_ORDERED - write each pass in key order
 *
 * The inodes a pass picks (expired ones for periodic writeback, every
 * dirty one for background writeback and sync) are held per context in a
 * radix tree keyed by ops->key() instead of the b_io FIFO, and written in
 * ascending key order. Which inodes a pass picks does not change: an inode
 * dirty for longer than dirty_expire_ms is still written by the next
 * periodic pass.
 */
#define PWB_POLICY_F_ORDERED 0x1u
/**
 * PWB_POLICY_F_SHARED_LIST - one dirty list, many flushers ("farm out")
 *
 * Every inode is affined to context 0, whose lists all flushers share;
 * select() is not asked. The flusher of each context claims ops->batch()
 * inodes at a time, writes each one whole through its own context's I/O
 * queue, waits for those writes and releases the batch: an inode is written
 * by one thread at a time. Per-context written_pages show how the work
 * spread; dirty pages and dirty inodes are all counted on context 0 (so
 * imbalance_milli reads nr_wb_ctx * 1000 whenever anything is dirty), and
 * pwb_fsync() of any inode runs on context 0's flusher.
 */
#define PWB_POLICY_F_SHARED_LIST 0x2u
/**
 * PWB_POLICY_F_PER_PAGE - place each dirty page, not each inode (ABI 3)
 *
 * ops->select_page() is asked for every page as it becomes dirty, and an
 * inode's pages may sit on several contexts: the library keeps, per inode
 * and context, a slice (its own dirty pages, dirtied_when and place on
 * that context's lists), and each context's flusher writes only its
 * slices. A page dirtied again while it is dirty or being written stays
 * where it is. pwb_fsync() waits for every context holding the inode's
 * pages, then flushes the device once. Not with PWB_POLICY_F_SHARED_LIST.
 */
#define PWB_POLICY_F_PER_PAGE 0x4u
/** Every flag this ABI knows. */
#define PWB_POLICY_F_ALL                                                       \
	(PWB_POLICY_F_ORDERED | PWB_POLICY_F_SHARED_LIST | PWB_POLICY_F_PER_PAGE)

/*
 * A plugin (a shared object for pwb_policy_load) defines this function. The
 * library calls it once per load with its own PWB_POLICY_ABI_VERSION; the
 * plugin returns its ops table (whose abi_version may be lower, never
 * higher), or NULL if it cannot serve that version. Declared here so the
 * compiler checks the plugin's definition, and exported even when the
 * plugin builds with -fvisibility=hidden.
 */
#define PWB_POLICY_ENTRY "pwb_policy_entry"
typedef const struct pwb_policy_ops *
pwb_policy_entry_fn(unsigned int abi_version);
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const struct pwb_policy_ops *pwb_policy_entry(unsigned int abi_version);

/**
 * pwb_policy_register() - make a policy available to every bdi opened later
 * @ops: the ops table; kept, not copied (see struct pwb_policy_ops)
 *
 * Registration is process-wide and permanent: there is no unregistration
 * in any policy ABI version so far, so a policy in use can never disappear
 * under a bdi.
 *
 * Context: any thread; not from inside a policy's own callbacks.
 * Return: 0;
 *  -EINVAL: NULL @ops, a NULL, empty, too long or malformed name, or no
 *           select;
 *  -EPROTONOSUPPORT: abi_version is 0 or above PWB_POLICY_ABI_VERSION of
 *           this library;
 *  -EEXIST: a policy of that name (built in or registered) exists;
 *  -ENOMEM.
 */
PWB_API int pwb_policy_register(const struct pwb_policy_ops *ops);

/**
 * pwb_policy_set_dir() - where pwb_policy_load() finds bare file names
 * @dir: an absolute directory path, copied; NULL forgets the directory
 *
 * Without a directory, pwb_policy_load() accepts absolute paths only. With
 * one, it also accepts a bare file name (no '/') and loads it from @dir.
 * The directory is not checked for existence here.
 *
 * Context: any thread (process-wide setting).
 * Return: 0; -EINVAL if @dir is empty or not absolute; -ENAMETOOLONG if it
 *         is PATH_MAX bytes or longer; -ENOMEM.
 */
PWB_API int pwb_policy_set_dir(const char *dir);

/**
 * pwb_policy_load() - load a policy plugin and register its policy
 * @path: an absolute path of a shared object, or a bare file name inside
 *        the directory set with pwb_policy_set_dir()
 *
 * dlopen()s the object with RTLD_NOW | RTLD_LOCAL, looks up its
 * pwb_policy_entry symbol, calls it with PWB_POLICY_ABI_VERSION, checks the
 * table and registers it as pwb_policy_register() does. The object stays
 * loaded for the rest of the process. Loading an object whose table is
 * already registered (the same file again) succeeds and changes nothing.
 * On failure nothing stays loaded or registered and pwb_errmsg() names the
 * file and the reason (dlerror()'s text where there is one). The name of
 * the policy is whatever the plugin's table says; its documentation tells.
 *
 * Context: any thread; may sleep (file I/O, the plugin's constructors),
 * so not from an ops or policy callback.
 * Return: 0;
 *  -EINVAL: NULL or empty @path; the table the plugin returned is malformed
 *           (no name, bad name, no select);
 *  -EPERM: @path is relative and not a bare file name, or no directory
 *          was set with pwb_policy_set_dir();
 *  -ENAMETOOLONG: the resulting path exceeds PATH_MAX;
 *  -ENOENT: the file does not exist (or another stat() errno, such as
 *           -EACCES, -ENOTDIR);
 *  -ENOEXEC: the file exists but dlopen() refused it (not a shared object,
 *            wrong architecture, unresolved symbols, a directory);
 *  -ENOSYS: the object has no pwb_policy_entry symbol;
 *  -EPROTONOSUPPORT: pwb_policy_entry returned NULL, or a table whose
 *           abi_version is 0 or above this library's PWB_POLICY_ABI_VERSION;
 *  -EEXIST: another table of that name is already registered;
 *  -ENOMEM.
 */
PWB_API int pwb_policy_load(const char *path);

/**
 * pwb_policy_map_page() - a page's device offset, for a policy's select()
 * @inode: the inode being placed (struct pwb_policy_inode.inode)
 * @index: a page index of the inode
 * @dev_off: filled with the device byte offset on success
 *
 * Calls the inode's map_page op: the application's code, which may be
 * slow or fail for a page that has no place yet. It then runs on the
 * caller's thread, inside the application's pwb_mark_dirty() or re-shard
 * (see struct pwb_inode_ops in pwb.h for what map_page must not do there).
 *
 * Context: any thread, with no libpwb lock held (true inside select()).
 * Return: 0; -EINVAL for a NULL argument; -ERANGE if the application
 *         returned an offset outside the device or not aligned to the
 *         logical block size; otherwise the map_page op's negative errno.
 */
PWB_API int pwb_policy_map_page(struct pwb_inode *inode, uint64_t index,
				uint64_t *dev_off);

/**
 * pwb_inode_set_wb_hint() - suggest the writeback context of an inode
 * @inode: an open inode
 * @ctx: a context index below pwb_bdi_nr_wb_ctx(), or -1 to clear the hint
 *
 * The hint is read by the policy when it places the inode, at the first
 * dirtying (and again when live re-sharding re-places it): set it before.
 * Policies "hint" and "alloc-group" obey it; "inode-hash" and
 * "least-loaded" ignore it; a plugin sees it in struct
 * pwb_policy_inode.hint. Setting it never moves an inode already placed.
 *
 * Context: any thread; lock-free.
 * Return: 0; -EINVAL for a NULL @inode; -ERANGE if @ctx is below -1 or
 *         not below the current number of contexts.
 */
PWB_API int pwb_inode_set_wb_hint(struct pwb_inode *inode, int ctx);

/**
 * pwb_bdi_policy() - the policy spec a bdi uses
 * @bdi: the bdi
 * @buf: filled with "name" or "name:args", NUL-terminated
 * @len: size of @buf; PWB_POLICY_SPEC_MAX + 1 always suffices
 *
 * The spec as given to pwb_bdi_open() (NULL or "" reads "inode-hash", and
 * a trailing ':' with no arguments is dropped).
 *
 * Context: any thread; does not wait for a re-shard or policy switch in
 * progress (it answers with the spec in force before the switch ends).
 * Return: 0; -EINVAL for a NULL @bdi or @buf, or @len 0; -ERANGE if the
 *         spec does not fit (@buf then holds as much as fits); -ESHUTDOWN
 *         if pwb_bdi_close() has begun.
 */
PWB_API int pwb_bdi_policy(struct pwb_bdi *bdi, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PWB_POLICY_H */
