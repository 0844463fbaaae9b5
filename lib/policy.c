// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * policy.c - shard policies: the registry, spec parsing, plugins, select
 *
 * A policy is asked once per inode, at its first dirtying, which writeback
 * context the inode joins; the inode then stays affined to that context so
 * its pages are written by one thread and stay contiguous on the device.
 * The ops table is public (pwb-policy.h); the built-ins live in policy-*.c.
 *
 * The registry maps names to ops tables: the built-ins (a constant array)
 * followed by a list of tables registered in process or loaded from
 * plugins. Entries are never removed and plugin handles never closed, so a
 * table pointer, once found, is valid for the rest of the process: a bdi
 * needs no reference count on its policy. registry_lock protects the list
 * and the plugin directory; it is a leaf lock, and never held across
 * dlopen() or a policy's own code (a plugin's constructor or entry
 * function may call pwb_policy_register()).
 *
 * A select() that fails or answers out of range costs the inode its
 * preferred placement, never its data: the inode goes to the inode-hash
 * context, the instance counts the failure (nr_fallbacks) and the bdi says
 * so once on stderr, however often its policy is switched.
 */
#include "base.h"
#include "policy-int.h"
#include "bdi.h"
#include "inode.h"
#include "space.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct policy_entry {
	const struct pwb_policy_ops *ops;
	void *dl;			/* dlopen() handle, or NULL */
	struct policy_entry *next;
};

static const struct pwb_policy_ops *const builtin_policies[] = {
	&pwb__policy_inode_hash,	/* first: the default */
	&pwb__policy_alloc_group,
	&pwb__policy_least_loaded,
	&pwb__policy_hint,
	&pwb__policy_xarray,
	&pwb__policy_shared_list,
	&pwb__policy_region,
};

#define NR_BUILTINS (sizeof(builtin_policies) / sizeof(builtin_policies[0]))
#define DEFAULT_SPEC "inode-hash"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
PWB__MUTEX_RANK_STATIC(registry_lock, PWB__LOCK_REGISTRY);
static struct policy_entry *registry;	/* registry_lock: newest first */
static char *plugin_dir;		/* registry_lock: pwb_policy_set_dir */

/* ---------------------------------------------------------------------- */
/* Names, arguments, sizes                                                */

static bool name_char_ok(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.';
}

static bool key_char_ok(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* 0, or -EINVAL with a message if @name is not a valid policy name. */
static int check_name(const char *name)
{
	size_t i, len;

	if (!name || !*name)
		return pwb__err(-EINVAL, "shard policy table without a name");
	len = strnlen(name, PWB_POLICY_NAME_MAX + 1);
	if (len > PWB_POLICY_NAME_MAX)
		return pwb__err(-EINVAL, "shard policy name \"%.*s...\" is "
					 "longer than %d characters",
				PWB_POLICY_NAME_MAX, name,
				PWB_POLICY_NAME_MAX);
	for (i = 0; i < len; i++)
		if (!name_char_ok(name[i]))
			return pwb__err(-EINVAL, "shard policy name \"%s\" "
						 "has a character outside "
						 "[A-Za-z0-9_.-]",
					name);
	return 0;
}

/* 0, or -EINVAL if @args (non-empty) is not "key=value[,key=value...]". */
static int check_args_syntax(const char *spec, const char *args)
{
	const char *p = args;

	for (;;) {
		const char *key = p;

		while (key_char_ok(*p))
			p++;
		if (p == key || *p != '=')
			goto bad;
		if (!*++p || *p == ',')
			goto bad;	/* empty value */
		while (*p && *p != ',')
			p++;
		if (!*p)
			return 0;
		p++;	/* past ',': another pair must follow */
	}
bad:
	return pwb__err(-EINVAL, "policy spec \"%s\": arguments must be "
				 "key=value[,key=value...] (keys of "
				 "[A-Za-z0-9_-], values not empty)",
			spec);
}

int pwb__policy_no_args(const char *name, const char *args)
{
	if (args)
		return pwb__err(-EINVAL, "policy %s takes no arguments, got "
					 "\"%s\"",
				name, args);
	return 0;
}

int pwb__policy_args_each(const char *name, const char *args,
			  int (*fn)(void *arg, const char *key,
				    const char *val),
			  void *arg)
{
	char buf[PWB_POLICY_SPEC_MAX + 1], *save = NULL, *item;
	int ret;

	if (!args)
		return 0;
	if (strlen(args) >= sizeof(buf))
		return pwb__err(-EINVAL, "policy %s: arguments too long",
				name);
	strcpy(buf, args);
	for (item = strtok_r(buf, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (!eq)
			return pwb__err(-EINVAL, "policy %s: \"%s\" is not "
						 "key=value",
					name, item);
		*eq = '\0';
		ret = fn(arg, item, eq + 1);
		if (ret)
			return ret;
	}
	return 0;
}

int pwb__parse_size(const char *str, uint64_t *bytes)
{
	unsigned int shift = 0;
	uint64_t v = 0;
	const char *p;

	if (!str || !isdigit((unsigned char)*str))
		return -EINVAL;
	for (p = str; isdigit((unsigned char)*p); p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	case 't': case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*p && p[1])
		return -EINVAL;
	if (shift && v > UINT64_MAX >> shift)
		return -EINVAL;
	*bytes = v << shift;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The registry                                                           */

/* The table called @name (@len bytes, not NUL-terminated), or NULL.
 * Caller holds registry_lock. */
static const struct pwb_policy_ops *lookup_locked(const char *name,
						  size_t len)
{
	struct policy_entry *e;
	size_t i;

	pwb__lockdep_assert_held(&registry_lock);

	for (i = 0; i < NR_BUILTINS; i++)
		if (strlen(builtin_policies[i]->name) == len &&
		    !memcmp(builtin_policies[i]->name, name, len))
			return builtin_policies[i];
	for (e = registry; e; e = e->next)
		if (strlen(e->ops->name) == len &&
		    !memcmp(e->ops->name, name, len))
			return e->ops;
	return NULL;
}

static bool registered_locked(const struct pwb_policy_ops *ops)
{
	struct policy_entry *e;

	pwb__lockdep_assert_held(&registry_lock);

	for (e = registry; e; e = e->next)
		if (e->ops == ops)
			return true;
	return false;
}

/* The flags a table of its abi_version may set. */
static unsigned int known_flags(const struct pwb_policy_ops *ops)
{
	if (ops->abi_version < 3)
		return PWB_POLICY_F_ORDERED | PWB_POLICY_F_SHARED_LIST;
	return PWB_POLICY_F_ALL;
}

/* Check a table: 0 or -errno with a message naming @origin. */
static int check_ops(const struct pwb_policy_ops *ops, const char *origin)
{
	int ret;

	if (!ops)
		return pwb__err(-EINVAL, "%s: NULL ops table", origin);
	if (ops->abi_version == 0 || ops->abi_version > PWB_POLICY_ABI_VERSION)
		return pwb__err(-EPROTONOSUPPORT, "%s: shard policy ABI "
						  "version %u is not "
						  "supported (this libpwb "
						  "supports 1 to %u)",
				origin, ops->abi_version,
				PWB_POLICY_ABI_VERSION);
	ret = check_name(ops->name);
	if (ret)
		return ret;
	if (!ops->select)
		return pwb__err(-EINVAL, "%s: shard policy \"%s\" has no "
					 "select function",
				origin, ops->name);
	/* Valid from ABI 2; PWB_POLICY_F_PER_PAGE from ABI 3. */
	if (ops->abi_version >= 2 && (ops->flags & ~known_flags(ops)))
		return pwb__err(-EINVAL, "%s: shard policy \"%s\" sets "
					 "unknown flags 0x%x",
				origin, ops->name,
				ops->flags & ~known_flags(ops));
	if (ops->abi_version >= 3 && (ops->flags & PWB_POLICY_F_PER_PAGE) &&
	    (!ops->select_page || (ops->flags & PWB_POLICY_F_SHARED_LIST)))
		return pwb__err(-EINVAL, "%s: shard policy \"%s\" is per "
					 "page but %s",
				origin, ops->name,
				!ops->select_page ? "has no select_page"
						  : "also uses a shared list");
	return 0;
}

/* Add a checked table. Caller holds registry_lock. */
static int register_locked(const struct pwb_policy_ops *ops, void *dl)
{
	struct policy_entry *e;

	pwb__lockdep_assert_held(&registry_lock);

	if (lookup_locked(ops->name, strlen(ops->name)))
		return pwb__err(-EEXIST, "a shard policy named \"%s\" is "
					 "already registered",
				ops->name);
	e = malloc(sizeof(*e));
	if (!e)
		return pwb__err(-ENOMEM, "out of memory");
	e->ops = ops;
	e->dl = dl;
	e->next = registry;
	registry = e;
	return 0;
}

PWB_API int pwb_policy_register(const struct pwb_policy_ops *ops)
{
	int ret;

	pwb__err_clear();
	ret = check_ops(ops, "pwb_policy_register");
	if (ret)
		return ret;
	pthread_mutex_lock(&registry_lock);
	ret = register_locked(ops, NULL);
	pthread_mutex_unlock(&registry_lock);
	return ret;
}

PWB_API int pwb_policy_set_dir(const char *dir)
{
	char *copy = NULL, *old;

	pwb__err_clear();
	if (dir) {
		if (dir[0] != '/')
			return pwb__err(-EINVAL, "pwb_policy_set_dir: "
						 "\"%s\" is not an absolute "
						 "path",
					dir);
		if (strnlen(dir, PATH_MAX) >= PATH_MAX)
			return pwb__err(-ENAMETOOLONG, "pwb_policy_set_dir: "
						       "path too long");
		copy = strdup(dir);
		if (!copy)
			return pwb__err(-ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&registry_lock);
	old = plugin_dir;
	plugin_dir = copy;
	pthread_mutex_unlock(&registry_lock);
	free(old);
	return 0;
}

/* Resolve pwb_policy_load()'s argument to a path in @buf (PATH_MAX). */
static int plugin_path(const char *path, char *buf)
{
	int n;

	if (path[0] == '/') {
		if (strnlen(path, PATH_MAX) >= PATH_MAX)
			return pwb__err(-ENAMETOOLONG, "plugin path too long");
		strcpy(buf, path);
		return 0;
	}
	if (strchr(path, '/') || !strcmp(path, ".") || !strcmp(path, ".."))
		return pwb__err(-EPERM, "plugin \"%s\": give an absolute path, "
					"or a bare file name inside the "
					"directory set with "
					"pwb_policy_set_dir()",
				path);
	pthread_mutex_lock(&registry_lock);
	if (plugin_dir)
		n = snprintf(buf, PATH_MAX, "%s/%s", plugin_dir, path);
	else
		n = -1;
	pthread_mutex_unlock(&registry_lock);
	if (n < 0)
		return pwb__err(-EPERM, "plugin \"%s\": a bare name needs a "
					"plugin directory "
					"(pwb_policy_set_dir); none is set",
				path);
	if (n >= PATH_MAX)
		return pwb__err(-ENAMETOOLONG, "plugin path too long");
	return 0;
}

PWB_API int pwb_policy_load(const char *path)
{
	const struct pwb_policy_ops *ops;
	pwb_policy_entry_fn *entry;
	char *full, origin[PATH_MAX + 16];
	struct stat st;
	void *dl, *sym;
	int ret;

	pwb__err_clear();
	if (!path || !*path)
		return pwb__err(-EINVAL, "pwb_policy_load: %s path",
				path ? "empty" : "NULL");
	full = malloc(PATH_MAX);
	if (!full)
		return pwb__err(-ENOMEM, "out of memory");
	ret = plugin_path(path, full);
	if (ret)
		goto out;
	snprintf(origin, sizeof(origin), "plugin %s", full);
	if (stat(full, &st)) {
		ret = pwb__err(-errno, "cannot load %s: %s", origin,
			       strerror(errno));
		goto out;
	}
	/* Not under registry_lock: constructors may call back into us. */
	dl = dlopen(full, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		const char *why = dlerror();

		ret = pwb__err(-ENOEXEC, "cannot load %s: %s", origin,
			       why ? why : "dlopen failed");
		goto out;
	}
	dlerror();
	sym = dlsym(dl, PWB_POLICY_ENTRY);
	if (!sym) {
		ret = pwb__err(-ENOSYS, "%s has no %s symbol: not a libpwb "
					"shard policy plugin",
			       origin, PWB_POLICY_ENTRY);
		goto out_close;
	}
	/* POSIX guarantees that a function pointer survives this. */
	memcpy(&entry, &sym, sizeof(entry));
	ops = entry(PWB_POLICY_ABI_VERSION);
	if (!ops) {
		ret = pwb__err(-EPROTONOSUPPORT, "%s offers no shard policy "
						 "for ABI version %u",
			       origin, PWB_POLICY_ABI_VERSION);
		goto out_close;
	}
	ret = check_ops(ops, origin);
	if (ret)
		goto out_close;
	pthread_mutex_lock(&registry_lock);
	if (registered_locked(ops))
		ret = 1;	/* the same object again: keep one reference */
	else
		ret = register_locked(ops, dl);
	pthread_mutex_unlock(&registry_lock);
	if (ret == 0)
		goto out;
	if (ret == 1)
		ret = 0;
out_close:
	dlclose(dl);
out:
	free(full);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Instances                                                              */

/* "inode-hash, alloc-group, ...": every built-in policy, from the table
 * itself so that a message listing them cannot miss one. */
static void builtin_names(char *buf, size_t size)
{
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < NR_BUILTINS && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s",
					 i ? ", " : "",
					 builtin_policies[i]->name);
}

int pwb__policy_create(struct pwb_bdi *bdi, const char *spec,
		       struct pwb__policy *pol)
{
	const struct pwb_policy_ops *ops;
	const char *colon, *args = NULL;
	size_t len, name_len;
	void *state = NULL;
	int ret;

	if (!spec || !*spec)
		spec = DEFAULT_SPEC;
	len = strlen(spec);
	if (len > PWB_POLICY_SPEC_MAX)
		return pwb__err(-EINVAL, "policy spec longer than %d bytes",
				PWB_POLICY_SPEC_MAX);
	colon = strchr(spec, ':');
	name_len = colon ? (size_t)(colon - spec) : len;
	if (!name_len)
		return pwb__err(-EINVAL, "policy spec \"%s\" has no policy "
					 "name",
				spec);
	if (colon && colon[1]) {
		args = colon + 1;
		ret = check_args_syntax(spec, args);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&registry_lock);
	ops = lookup_locked(spec, name_len);
	pthread_mutex_unlock(&registry_lock);
	if (!ops) {
		char names[256];

		builtin_names(names, sizeof(names));
		return pwb__err(-ENOENT, "unknown shard policy \"%.*s\" (built "
					 "in: %s; others must be registered "
					 "or loaded first)",
				(int)name_len, spec, names);
	}

	/* Visible (pwb_bdi_info, pwb_bdi_policy) while init runs. */
	memset(pol, 0, sizeof(*pol));
	pol->ops = ops;
	memcpy(pol->spec, spec, args ? len : name_len);
	if (ops->init) {
		ret = ops->init(bdi, args, &state);
		if (ret) {
			if (ret > 0)
				ret = -EINVAL;
			/* Built-ins said why; a plugin cannot. */
			if (!*pwb__errmsg())
				pwb__err(ret, "shard policy \"%s\" refused "
					      "%s%s%s: %s",
					 ops->name, args ? "arguments \"" : "",
					 args ? args : "no arguments",
					 args ? "\"" : "", pwb__strerror(ret));
			memset(pol, 0, sizeof(*pol));
			return ret;
		}
	}
	pol->state = state;
	/* Valid from ABI 2: an older table has neither flags nor hooks. */
	if (ops->abi_version >= 2) {
		pol->flags = ops->flags;
		if (ops->flags & PWB_POLICY_F_SHARED_LIST) {
			pol->batch = ops->batch ? ops->batch(state) : 0;
			if (pol->batch < 1 || pol->batch > PWB__POLICY_BATCH_MAX)
				pol->batch = PWB__POLICY_BATCH_DEFAULT;
		}
	}
	return 0;
}

void pwb__policy_destroy(struct pwb__policy *pol)
{
	if (pol->ops && pol->ops->fini)
		pol->ops->fini(pol->state);
	pol->ops = NULL;
	pol->state = NULL;
}

void pwb__policy_nr_changed(struct pwb__policy *pol, unsigned int nr)
{
	/* Valid from ABI 1. */
	if (pol->ops && pol->ops->nr_wb_ctx_changed)
		pol->ops->nr_wb_ctx_changed(pol->state, nr);
}

/*
 * Count a misbehaving select() in the instance; say so once per bdi (not
 * per instance: each pwb_bdi_set_policy() makes a new one, and a policy
 * that fails once usually fails again after every switch).
 */
static void report_fallback(struct pwb__policy *pol, struct pwb_inode *inode,
			    int idx, unsigned int nr_wb_ctx)
{
	int *reported = &inode->bdi->policy_fallback_reported;

	uatomic_inc(&pol->nr_fallbacks);
	if (pwb__aread(reported) || uatomic_cmpxchg(reported, 0, 1) != 0)
		return;
	if (idx < 0)
		fprintf(stderr, "libpwb: shard policy \"%s\" failed to place "
				"inode %llu: %s; using inode-hash for it "
				"(reported once per bdi)\n",
			pol->ops->name, (unsigned long long)inode->ino,
			pwb__strerror(idx));
	else
		fprintf(stderr, "libpwb: shard policy \"%s\" chose context %d "
				"for inode %llu, but the bdi has %u; using "
				"inode-hash for it (reported once per bdi)\n",
			pol->ops->name, idx, (unsigned long long)inode->ino,
			nr_wb_ctx);
}

/* What select() and key() see of @inode, first dirtied at @index. */
static struct pwb_policy_inode policy_inode(struct pwb_inode *inode,
					    uint64_t index)
{
	return (struct pwb_policy_inode){
		.bdi = inode->bdi,
		.inode = inode,
		.ino = inode->ino,
		.index = index,
		.hint = pwb__aread(&inode->wb_hint),
	};
}

/* An answer @idx of select() or select_page(): itself if in range; else
 * (a policy can be wrong, writeback must still have a context) reported
 * and replaced by inode-hash. */
static inline unsigned int checked_index(struct pwb__policy *pol,
					 struct pwb_inode *inode, int idx,
					 unsigned int nr_wb_ctx)
{
	if (caa_likely(idx >= 0 && (unsigned int)idx < nr_wb_ctx))
		return (unsigned int)idx;
	report_fallback(pol, inode, idx, nr_wb_ctx);
	return pwb__policy_hash(inode->ino, nr_wb_ctx);
}

unsigned int pwb__policy_select(struct pwb__policy *pol,
				struct pwb_inode *inode, uint64_t index,
				unsigned int nr_wb_ctx)
{
	struct pwb_policy_inode info = policy_inode(inode, index);
	int idx;

	if (caa_unlikely(nr_wb_ctx <= 1))
		return 0;	/* nothing to choose */
	if (pol->flags & PWB_POLICY_F_SHARED_LIST)
		return 0;	/* the one list lives on context 0 */
	idx = pol->ops->select(pol->state, &info, nr_wb_ctx);
	return checked_index(pol, inode, idx, nr_wb_ctx);
}

unsigned int pwb__policy_select_page(struct pwb__policy *pol,
				     struct pwb_inode *inode, uint64_t index,
				     unsigned int nr_wb_ctx)
{
	struct pwb_policy_inode info = policy_inode(inode, index);
	int idx;

	if (caa_unlikely(nr_wb_ctx <= 1))
		return 0;
	/* Valid from ABI 3; check_ops() made sure it is there. */
	idx = pol->ops->select_page(pol->state, &info, nr_wb_ctx);
	return checked_index(pol, inode, idx, nr_wb_ctx);
}

uint64_t pwb__policy_key(struct pwb__policy *pol, struct pwb_inode *inode,
			 uint64_t index)
{
	struct pwb_policy_inode info;
	uint64_t key = 0;

	/* Valid from ABI 2 (flags is 0 for older tables). */
	if (!(pol->flags & PWB_POLICY_F_ORDERED) || !pol->ops->key)
		return 0;
	info = policy_inode(inode, index);
	if (pol->ops->key(pol->state, &info, &key))
		return 0;
	return key;
}

/* ---------------------------------------------------------------------- */
/* Public helpers                                                         */

int pwb__policy_map_page(struct pwb_inode *inode, uint64_t index,
			 uint64_t *dev_off)
{
	struct pwb_bdi *bdi = inode->bdi;
	uint64_t off = 0;
	int ret;

	/* Allocator mode: never allocate to route a page (that would undo
	 * delayed allocation); its block if it has one, else the start of
	 * the inode's home group. */
	if (pwb__inode_app(inode)->space)
		ret = pwb__space_policy_offset(pwb__inode_app(inode), index,
					       &off);
	else
		ret = inode->ops.map_page(pwb__inode_app(inode), index, &off);
	if (ret)
		return ret < 0 ? ret : -EIO;
	if (off % bdi->lbs || off > bdi->capacity ||
	    bdi->capacity - off < pwb__page_size(bdi))
		return -ERANGE;
	*dev_off = off;
	return 0;
}

PWB_API int pwb_policy_map_page(struct pwb_inode *inode, uint64_t index,
				uint64_t *dev_off)
{
	uint64_t ino;
	int ret;

	pwb__err_clear();
	if (!inode || !dev_off)
		return pwb__err(-EINVAL, "pwb_policy_map_page: NULL %s",
				!inode ? "inode" : "dev_off");
	pwb__inode_enter(inode, PWB__HOLD_RCU, "pwb_policy_map_page");
	ino = inode->ino;
	ret = pwb__policy_map_page(inode, index, dev_off);
	pwb__inode_exit(inode, PWB__HOLD_RCU);
	if (ret == -ERANGE)
		return pwb__err(ret, "map_page of inode %llu page %llu gave "
				     "an offset outside the device or not "
				     "block aligned",
				(unsigned long long)ino,
				(unsigned long long)index);
	if (ret)
		return pwb__err(ret, "map_page of inode %llu page %llu: %s",
				(unsigned long long)ino,
				(unsigned long long)index, pwb__strerror(ret));
	return 0;
}

PWB_API int pwb_bdi_policy(struct pwb_bdi *bdi, char *buf, size_t len)
{
	int n;

	pwb__err_clear();
	if (!bdi || !buf || !len)
		return pwb__err(-EINVAL, "pwb_bdi_policy: %s",
				!bdi ? "NULL bdi" : !buf ? "NULL buf"
							 : "len is 0");
	if (pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_bdi_policy"))
		return -ESHUTDOWN;
	/* A policy replaced by pwb_bdi_set_policy() is freed after a grace
	 * period, so no need to wait for a re-shard that may take seconds
	 * (it parks the flushers, which finish their passes first). */
	rcu_read_lock();
	n = snprintf(buf, len, "%s", PWB__RCU_DEREF(bdi->policy)->spec);
	pwb__rcu_read_unlock();
	pwb__bdi_exit(bdi, PWB__HOLD_REF);
	if ((size_t)n >= len)
		return pwb__err(-ERANGE, "pwb_bdi_policy: the spec needs %d "
					 "bytes, the buffer has %zu",
				n + 1, len);
	return 0;
}
