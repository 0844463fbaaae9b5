/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * policy-int.h - the shard policy glue (policy.c, policy-*.c)
 *
 * Not installed. Part of lib/pwb-internal.h; the lock order and the
 * locking rules are in lib/base.h.
 */
#ifndef PWB_POLICY_INT_H
#define PWB_POLICY_INT_H

#include "base.h"

struct pwb_bdi;
struct pwb_inode;

/* ---------------------------------------------------------------------- */
/* policy.c: the shard policy interface                                   */

/*
 * A shard policy decides which context an inode joins at its first
 * dirtying. Its ops table is the public struct pwb_policy_ops
 * (pwb-policy.h): built-ins (policy-*.c), registered tables and loaded
 * plugins alike, found by name in a process-wide registry whose entries
 * live until the process exits. Each bdi holds one instance.
 */
struct pwb__policy {
	/* Set by pwb__policy_create(), then read-only: */
	const struct pwb_policy_ops *ops;
	void *state;			/* the instance's, from ops->init */
	char spec[PWB_POLICY_SPEC_MAX + 1];	/* normalised "name[:args]" */
	unsigned int flags;		/* PWB_POLICY_F_* (ABI 2 tables) */
	unsigned int batch;		/* F_SHARED_LIST: inodes per claim */
	uint64_t nr_fallbacks;		/* uatomic: select() failed or gave an
					 * index out of range */
};

#define PWB__POLICY_BATCH_DEFAULT 16u
#define PWB__POLICY_BATCH_MAX 1024u

/* Parse "name[:args]" (NULL or "": inode-hash), find the policy and
 * instantiate it in @pol. Return 0 or -errno (message recorded). */
int pwb__policy_create(struct pwb_bdi *bdi, const char *spec,
		       struct pwb__policy *pol) PWB__INTERNAL;
/* Call fini; @pol may be zeroed or already destroyed. */
void pwb__policy_destroy(struct pwb__policy *pol) PWB__INTERNAL;
/* Tell the instance the bdi now has @nr contexts (live re-sharding);
 * call it after publishing the new array, before re-placing inodes. */
void pwb__policy_nr_changed(struct pwb__policy *pol,
			    unsigned int nr) PWB__INTERNAL;
/* The fallback index for @ino: inode-hash. */
static inline unsigned int pwb__policy_hash(uint64_t ino, unsigned int nr)
{
	return (unsigned int)(ino % nr);
}

/* The inode's ordering key under an F_ORDERED policy (0 otherwise).
 * Same calling rules as pwb__policy_select(). */
uint64_t pwb__policy_key(struct pwb__policy *pol, struct pwb_inode *inode,
			 uint64_t index) PWB__INTERNAL;

/* The built-in policies (policy-*.c). */
extern const struct pwb_policy_ops pwb__policy_inode_hash PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_alloc_group PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_least_loaded PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_hint PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_xarray PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_shared_list PWB__INTERNAL;
extern const struct pwb_policy_ops pwb__policy_region PWB__INTERNAL;

/* Helpers for built-in init functions; each records a message naming
 * policy @name on failure. -EINVAL unless @args is NULL: */
int pwb__policy_no_args(const char *name, const char *args) PWB__INTERNAL;
/* Call @fn(@arg, key, value) for each "key=value" of @args (NULL: none),
 * with NUL-terminated copies; stop at and return its first non-zero. */
int pwb__policy_args_each(const char *name, const char *args,
			  int (*fn)(void *arg, const char *key,
				    const char *val),
			  void *arg) PWB__INTERNAL;
/* pwb_policy_map_page() without messages: 0, -ERANGE or map_page's error. */
int pwb__policy_map_page(struct pwb_inode *inode, uint64_t index,
			 uint64_t *dev_off) PWB__INTERNAL;
/* Parse a byte count: decimal digits, then optionally K, M, G or T
 * (powers of 1024, either case). 0 or -EINVAL (no message). */
int pwb__parse_size(const char *str, uint64_t *bytes) PWB__INTERNAL;
/* Context index for @inode, whose first dirtied page is @index; always
 * valid: a failing or out-of-range answer falls back to inode-hash. Called
 * with no lock held (a policy may call the inode's map_page). */
unsigned int pwb__policy_select(struct pwb__policy *pol,
				struct pwb_inode *inode, uint64_t index,
				unsigned int nr_wb_ctx) PWB__INTERNAL;
/* The same for one page under a PWB_POLICY_F_PER_PAGE policy: the
 * context page @index should be written by. */
unsigned int pwb__policy_select_page(struct pwb__policy *pol,
				     struct pwb_inode *inode, uint64_t index,
				     unsigned int nr_wb_ctx) PWB__INTERNAL;

#endif /* PWB_POLICY_INT_H */
