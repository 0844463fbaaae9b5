// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * compat.c - the PWB_0.1 entry points, for programs built against the
 * pre-release headers
 *
 * Before the first release the functions that take a struct had no size
 * argument, and the shared library exported them in version node PWB_0.1.
 * Programs built then still reference name@PWB_0.1; the functions below
 * answer those references with the struct sizes those headers had (the
 * first layouts of abi.h) and call the sized entry points of abi.c, which
 * programs built now reach as name@@PWB_0.1.0.
 *
 * Only in the shared library (libtool defines PIC for its objects): a
 * static link has no symbol versions and no old binaries to serve.
 */
#include "base.h"
#include "bdi.h"
#include "inode.h"
#include "abi.h"

#ifdef PIC

/* Define @impl as the PWB_0.1 version of @name. */
#define PWB__COMPAT_0_1(impl, name)                                            \
	__asm__(".symver " #impl ", " #name "@PWB_0.1")

PWB_API void pwb__compat_bdi_config_init(struct pwb_bdi_config *cfg);
PWB_API int pwb__compat_bdi_open(const char *path,
				 const struct pwb_bdi_config *cfg,
				 struct pwb_bdi **bdip);
PWB_API int pwb__compat_bdi_info(struct pwb_bdi *bdi,
				 struct pwb_bdi_info *info);
PWB_API int pwb__compat_bdi_stats(struct pwb_bdi *bdi, struct pwb_stats *st);
PWB_API int pwb__compat_wb_ctx_stats(struct pwb_bdi *bdi, unsigned int idx,
				     struct pwb_stats *st);
PWB_API int pwb__compat_inode_open(struct pwb_bdi *bdi, uint64_t ino,
				   const struct pwb_inode_ops *ops, void *priv,
				   struct pwb_inode **inodep);
PWB_API int pwb__compat_bdi_inject_fault(struct pwb_bdi *bdi,
					 const struct pwb_fault *fault);
PWB_API int pwb__compat_fault_parse(const char *spec, struct pwb_fault *fault);

PWB__COMPAT_0_1(pwb__compat_bdi_config_init, pwb_bdi_config_init);
void pwb__compat_bdi_config_init(struct pwb_bdi_config *cfg)
{
	pwb__sized_bdi_config_init(cfg, PWB__CONFIG_SZ_0_1);
}

PWB__COMPAT_0_1(pwb__compat_bdi_open, pwb_bdi_open);
int pwb__compat_bdi_open(const char *path, const struct pwb_bdi_config *cfg,
			 struct pwb_bdi **bdip)
{
	return pwb__sized_bdi_open(path, cfg, PWB__CONFIG_SZ_0_1, bdip);
}

PWB__COMPAT_0_1(pwb__compat_bdi_info, pwb_bdi_info);
int pwb__compat_bdi_info(struct pwb_bdi *bdi, struct pwb_bdi_info *info)
{
	return pwb__sized_bdi_info(bdi, info, PWB__INFO_SZ_0_1);
}

PWB__COMPAT_0_1(pwb__compat_bdi_stats, pwb_bdi_stats);
int pwb__compat_bdi_stats(struct pwb_bdi *bdi, struct pwb_stats *st)
{
	return pwb__sized_bdi_stats(bdi, st, PWB__STATS_SZ_0_1);
}

PWB__COMPAT_0_1(pwb__compat_wb_ctx_stats, pwb_wb_ctx_stats);
int pwb__compat_wb_ctx_stats(struct pwb_bdi *bdi, unsigned int idx,
			     struct pwb_stats *st)
{
	return pwb__sized_wb_ctx_stats(bdi, idx, st, PWB__STATS_SZ_0_1);
}

PWB__COMPAT_0_1(pwb__compat_inode_open, pwb_inode_open);
int pwb__compat_inode_open(struct pwb_bdi *bdi, uint64_t ino,
			   const struct pwb_inode_ops *ops, void *priv,
			   struct pwb_inode **inodep)
{
	return pwb__sized_inode_open(bdi, ino, ops, PWB__OPS_SZ_0_1, priv,
				     inodep);
}

PWB__COMPAT_0_1(pwb__compat_bdi_inject_fault, pwb_bdi_inject_fault);
int pwb__compat_bdi_inject_fault(struct pwb_bdi *bdi,
				 const struct pwb_fault *fault)
{
	return pwb__sized_bdi_inject_fault(bdi, fault, PWB__FAULT_SZ_0_1);
}

PWB__COMPAT_0_1(pwb__compat_fault_parse, pwb_fault_parse);
int pwb__compat_fault_parse(const char *spec, struct pwb_fault *fault)
{
	return pwb__sized_fault_parse(spec, fault, PWB__FAULT_SZ_0_1);
}

#endif /* PIC */
