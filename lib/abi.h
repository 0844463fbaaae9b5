/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * abi.h - the first layouts of the structs that cross the ABI
 *
 * Not installed. A struct of pwb.h that crosses the ABI only grows at the
 * end (see "Structs that cross the ABI" in pwb.h), so the layout a program
 * was built with is a prefix of the library's. The sizes below are those
 * of the first layout each struct had in a shipped header: the pre-release
 * snapshots (version node PWB_0.1), which the first release still serves.
 * They are the smallest size a sized entry point accepts and the size the
 * PWB_0.1 entry points of compat.c pass. They never change: a field
 * appended later lies beyond them.
 */
#ifndef PWB_ABI_H
#define PWB_ABI_H

#include <stddef.h>

#include "pwb.h"

#define PWB__OFFSETOFEND(type, member)                                         \
	(offsetof(type, member) + sizeof(((type *)0)->member))

#define PWB__CONFIG_SZ_0_1 PWB__OFFSETOFEND(struct pwb_bdi_config, event_arg)
#define PWB__OPS_SZ_0_1 PWB__OFFSETOFEND(struct pwb_inode_ops, write_inode)
#define PWB__STATS_SZ_0_1 PWB__OFFSETOFEND(struct pwb_stats, rate_limited_ns)
#define PWB__INFO_SZ_0_1 PWB__OFFSETOFEND(struct pwb_bdi_info, atomic_writes)
#define PWB__FAULT_SZ_0_1 PWB__OFFSETOFEND(struct pwb_fault, max_hits)
#define PWB__AGSTATS_SZ_0_1_0                                                  \
	PWB__OFFSETOFEND(struct pwb_alloc_group_stats, largest_free)
#define PWB__DOMAIN_CONFIG_SZ_0_1_0                                            \
	PWB__OFFSETOFEND(struct pwb_domain_config, clock_arg)
#define PWB__TENANT_CONFIG_SZ_0_1_0                                            \
	PWB__OFFSETOFEND(struct pwb_tenant_config, rate_limit_bytes_per_sec)
#define PWB__TENANT_STATS_SZ_0_1_0                                             \
	PWB__OFFSETOFEND(struct pwb_tenant_stats, weight)
#define PWB__HIST_SZ_0_1_0 PWB__OFFSETOFEND(struct pwb_histogram, bucket)

/*
 * The sized entry points are defined as pwb__sized_<name> and bound to
 * <name>@@PWB_0.1.0 (the default version: what programs link to now); the
 * size-less <name>@PWB_0.1 of compat.c stays for older programs. Two
 * internal names because one object cannot define both versions of a
 * name. A static link resolves <name> to the default version. The check
 * keeps each definition's type equal to pwb.h's declaration, which the
 * compiler would otherwise not compare.
 */
#define PWB__SIZED(impl, name)                                                 \
	_Static_assert(__builtin_types_compatible_p(__typeof__(impl),          \
						    __typeof__(name)),         \
		       #impl " does not match pwb.h's " #name);                \
	__asm__(".symver " #impl ", " #name "@@PWB_0.1.0")

PWB_API void pwb__sized_bdi_config_init(struct pwb_bdi_config *cfg,
					size_t cfg_sz);
PWB_API int pwb__sized_bdi_open(const char *path,
				const struct pwb_bdi_config *cfg, size_t cfg_sz,
				struct pwb_bdi **bdip);
PWB_API int pwb__sized_bdi_info(const struct pwb_bdi *bdi,
				struct pwb_bdi_info *info, size_t info_sz);
PWB_API int pwb__sized_bdi_stats(const struct pwb_bdi *bdi,
				 struct pwb_stats *st, size_t st_sz);
PWB_API int pwb__sized_wb_ctx_stats(const struct pwb_bdi *bdi, unsigned int idx,
				    struct pwb_stats *st, size_t st_sz);
PWB_API int pwb__sized_inode_open(struct pwb_bdi *bdi, uint64_t ino,
				  const struct pwb_inode_ops *ops,
				  size_t ops_sz, void *priv,
				  struct pwb_inode **inodep);
PWB_API int pwb__sized_bdi_inject_fault(struct pwb_bdi *bdi,
					const struct pwb_fault *fault,
					size_t fault_sz);
PWB_API int pwb__sized_bdi_alloc_group_stats(
	const struct pwb_bdi *bdi, unsigned int group,
	struct pwb_alloc_group_stats *st, size_t st_sz);
PWB_API int pwb__sized_fault_parse(const char *spec, struct pwb_fault *fault,
				   size_t fault_sz);
PWB_API void pwb__sized_domain_config_init(struct pwb_domain_config *cfg,
					   size_t cfg_sz);
PWB_API int pwb__sized_domain_create(const struct pwb_domain_config *cfg,
				     size_t cfg_sz, struct pwb_domain **domp);
PWB_API void pwb__sized_tenant_config_init(struct pwb_tenant_config *cfg,
					   size_t cfg_sz);
PWB_API int pwb__sized_tenant_create(struct pwb_domain *domain,
				     struct pwb_bdi *bdi,
				     const struct pwb_tenant_config *cfg,
				     size_t cfg_sz, struct pwb_tenant **out);
PWB_API int pwb__sized_tenant_stats(const struct pwb_tenant *tenant,
				    struct pwb_tenant_stats *st, size_t st_sz);
PWB_API int pwb__sized_bdi_histogram(const struct pwb_bdi *bdi,
				     unsigned int which,
				     struct pwb_histogram *h, size_t h_sz);

#endif /* PWB_ABI_H */
