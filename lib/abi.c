// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * abi.c - the entry points that take a struct together with its size
 *
 * pwb.h's macros pass sizeof(struct ...) as the caller was compiled. A
 * caller's struct is a prefix of the library's (structs grow only at the
 * end), or, from a newer header, the library's struct followed by fields
 * this library does not know. Input structs are copied over a full struct
 * holding the defaults; unknown fields must be zero. Output structs are
 * filled in full here and the caller gets its own size's worth, with
 * unknown fields zeroed. The library itself works only on full structs.
 */
#include "base.h"
#include "bdi.h"
#include "inode.h"
#include "abi.h"
#include "space.h"
#include "domain.h"
#include "tenant.h"
#include "blocked.h"

#include <string.h>
PWB_API int pwb__sized_fault_parse(const char *spec, struct pwb_fault *fault,
				   size_t fault_sz);

/* Copy the caller's @usz-byte @src over the library's @ksz-byte @dst, which
 * holds the defaults of the fields the caller may not know. */
static int abi_copy_in(void *dst, size_t ksz, const void *src, size_t usz,
		       size_t first, const char *who, const char *type)
{
	const unsigned char *p = src;
	size_t i;

	if (usz < first)
		return pwb__err(-EINVAL,
				"%s: struct %s of %zu bytes is smaller "
				"than its first layout (%zu bytes)",
				who, type, usz, first);
	for (i = ksz; i < usz; i++)
		if (p[i])
			return pwb__err(-E2BIG,
					"%s: struct %s sets byte %zu, "
					"beyond the %zu bytes this "
					"library knows",
					who, type, i, ksz);
	memcpy(dst, src, PWB__MIN(usz, ksz));
	return 0;
}

static int abi_check_out(const void *dst, size_t usz, size_t first,
			 const char *who, const char *type)
{
	if (dst && usz < first)
		return pwb__err(-EINVAL,
				"%s: struct %s of %zu bytes is smaller "
				"than its first layout (%zu bytes)",
				who, type, usz, first);
	return 0;
}

/* Give the caller @usz bytes of the library's full @src. */
static void abi_copy_out(void *dst, size_t usz, const void *src, size_t ksz)
{
	memcpy(dst, src, PWB__MIN(usz, ksz));
	if (usz > ksz)
		memset((unsigned char *)dst + ksz, 0, usz - ksz);
}

PWB__SIZED(pwb__sized_bdi_config_init, pwb_bdi_config_init);
void pwb__sized_bdi_config_init(struct pwb_bdi_config *cfg, size_t cfg_sz)
{
	struct pwb_bdi_config full;

	if (!cfg)
		return;
	pwb__bdi_config_defaults(&full);
	abi_copy_out(cfg, cfg_sz, &full, sizeof(full));
}

PWB__SIZED(pwb__sized_bdi_open, pwb_bdi_open);
int pwb__sized_bdi_open(const char *path, const struct pwb_bdi_config *cfg,
			size_t cfg_sz, struct pwb_bdi **bdip)
{
	struct pwb_bdi_config full;
	int ret;

	if (!cfg)
		return pwb__bdi_open(path, NULL, bdip);
	pwb__err_clear();
	pwb__bdi_config_defaults(&full);
	ret = abi_copy_in(&full, sizeof(full), cfg, cfg_sz, PWB__CONFIG_SZ_0_1,
			  "pwb_bdi_open", "pwb_bdi_config");
	if (ret)
		return ret;
	return pwb__bdi_open(path, &full, bdip);
}

PWB__SIZED(pwb__sized_bdi_info, pwb_bdi_info);
int pwb__sized_bdi_info(const struct pwb_bdi *bdi, struct pwb_bdi_info *info,
			size_t info_sz)
{
	struct pwb_bdi_info full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(info, info_sz, PWB__INFO_SZ_0_1, "pwb_bdi_info",
			    "pwb_bdi_info");
	if (ret)
		return ret;
	/* A query: the bdi is not changed, the cast only meets the
	 * internal functions' plain pointers. */
	ret = pwb__bdi_info((struct pwb_bdi *)bdi, info ? &full : NULL);
	if (!ret)
		abi_copy_out(info, info_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_bdi_stats, pwb_bdi_stats);
int pwb__sized_bdi_stats(const struct pwb_bdi *bdi, struct pwb_stats *st,
			 size_t st_sz)
{
	struct pwb_stats full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(st, st_sz, PWB__STATS_SZ_0_1, "pwb_bdi_stats",
			    "pwb_stats");
	if (ret)
		return ret;
	ret = pwb__bdi_stats((struct pwb_bdi *)bdi, st ? &full : NULL);
	if (!ret)
		abi_copy_out(st, st_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_wb_ctx_stats, pwb_wb_ctx_stats);
int pwb__sized_wb_ctx_stats(const struct pwb_bdi *bdi, unsigned int idx,
			    struct pwb_stats *st, size_t st_sz)
{
	struct pwb_stats full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(st, st_sz, PWB__STATS_SZ_0_1, "pwb_wb_ctx_stats",
			    "pwb_stats");
	if (ret)
		return ret;
	ret = pwb__wb_ctx_stats((struct pwb_bdi *)bdi, idx, st ? &full : NULL);
	if (!ret)
		abi_copy_out(st, st_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_inode_open, pwb_inode_open);
int pwb__sized_inode_open(struct pwb_bdi *bdi, uint64_t ino,
			  const struct pwb_inode_ops *ops, size_t ops_sz,
			  void *priv, struct pwb_inode **inodep)
{
	struct pwb_inode_ops full = {0}; /* unknown ops: absent */
	int ret;

	if (!ops)
		return pwb__inode_open(bdi, ino, NULL, priv, inodep);
	pwb__err_clear();
	ret = abi_copy_in(&full, sizeof(full), ops, ops_sz, PWB__OPS_SZ_0_1,
			  "pwb_inode_open", "pwb_inode_ops");
	if (ret)
		return ret;
	return pwb__inode_open(bdi, ino, &full, priv, inodep);
}

PWB__SIZED(pwb__sized_bdi_inject_fault, pwb_bdi_inject_fault);
int pwb__sized_bdi_inject_fault(struct pwb_bdi *bdi,
				const struct pwb_fault *fault, size_t fault_sz)
{
	struct pwb_fault full = {0};
	int ret;

	if (!fault)
		return pwb__bdi_inject_fault(bdi, NULL);
	pwb__err_clear();
	ret = abi_copy_in(&full, sizeof(full), fault, fault_sz,
			  PWB__FAULT_SZ_0_1, "pwb_bdi_inject_fault",
			  "pwb_fault");
	if (ret)
		return ret;
	return pwb__bdi_inject_fault(bdi, &full);
}

PWB__SIZED(pwb__sized_fault_parse, pwb_fault_parse);
int pwb__sized_fault_parse(const char *spec, struct pwb_fault *fault,
			   size_t fault_sz)
{
	struct pwb_fault full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(fault, fault_sz, PWB__FAULT_SZ_0_1,
			    "pwb_fault_parse", "pwb_fault");
	if (ret)
		return ret;
	ret = pwb__fault_parse(spec, fault ? &full : NULL);
	if (!ret)
		abi_copy_out(fault, fault_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_bdi_alloc_group_stats, pwb_bdi_alloc_group_stats);
int pwb__sized_bdi_alloc_group_stats(const struct pwb_bdi *bdi,
				     unsigned int group,
				     struct pwb_alloc_group_stats *st,
				     size_t st_sz)
{
	struct pwb_alloc_group_stats full;
	int ret;

	pwb__err_clear();
	if (!st)
		return pwb__err(-EINVAL, "pwb_bdi_alloc_group_stats: NULL st");
	ret = abi_check_out(st, st_sz, PWB__AGSTATS_SZ_0_1_0,
			    "pwb_bdi_alloc_group_stats", "pwb_alloc_group_stats");
	if (ret)
		return ret;
	ret = pwb__bdi_alloc_group_stats((struct pwb_bdi *)bdi, group, &full);
	if (!ret)
		abi_copy_out(st, st_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_domain_config_init, pwb_domain_config_init);
void pwb__sized_domain_config_init(struct pwb_domain_config *cfg,
				   size_t cfg_sz)
{
	struct pwb_domain_config full;

	if (!cfg)
		return;
	pwb__domain_config_defaults(&full);
	abi_copy_out(cfg, cfg_sz, &full, sizeof(full));
}

PWB__SIZED(pwb__sized_domain_create, pwb_domain_create);
int pwb__sized_domain_create(const struct pwb_domain_config *cfg,
			     size_t cfg_sz, struct pwb_domain **domp)
{
	struct pwb_domain_config full;
	int ret;

	if (!cfg)
		return pwb__domain_create(NULL, domp);
	pwb__err_clear();
	pwb__domain_config_defaults(&full);
	ret = abi_copy_in(&full, sizeof(full), cfg, cfg_sz,
			  PWB__DOMAIN_CONFIG_SZ_0_1_0, "pwb_domain_create",
			  "pwb_domain_config");
	if (ret)
		return ret;
	return pwb__domain_create(&full, domp);
}

PWB__SIZED(pwb__sized_tenant_config_init, pwb_tenant_config_init);
void pwb__sized_tenant_config_init(struct pwb_tenant_config *cfg,
				   size_t cfg_sz)
{
	struct pwb_tenant_config full;

	if (!cfg)
		return;
	pwb__tenant_config_defaults(&full);
	abi_copy_out(cfg, cfg_sz, &full, sizeof(full));
}

PWB__SIZED(pwb__sized_tenant_create, pwb_tenant_create);
int pwb__sized_tenant_create(struct pwb_domain *domain, struct pwb_bdi *bdi,
			     const struct pwb_tenant_config *cfg,
			     size_t cfg_sz, struct pwb_tenant **out)
{
	struct pwb_tenant_config full;
	int ret;

	if (!cfg)
		return pwb__tenant_create(domain, bdi, NULL, out);
	pwb__err_clear();
	pwb__tenant_config_defaults(&full);
	ret = abi_copy_in(&full, sizeof(full), cfg, cfg_sz,
			  PWB__TENANT_CONFIG_SZ_0_1_0, "pwb_tenant_create",
			  "pwb_tenant_config");
	if (ret)
		return ret;
	return pwb__tenant_create(domain, bdi, &full, out);
}

PWB__SIZED(pwb__sized_tenant_stats, pwb_tenant_stats);
int pwb__sized_tenant_stats(const struct pwb_tenant *tenant,
			    struct pwb_tenant_stats *st, size_t st_sz)
{
	struct pwb_tenant_stats full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(st, st_sz, PWB__TENANT_STATS_SZ_0_1_0,
			    "pwb_tenant_stats", "pwb_tenant_stats");
	if (ret)
		return ret;
	/* A query: the cast only meets the internal function's pointer. */
	ret = pwb__tenant_stats((struct pwb_tenant *)tenant, st ? &full : NULL);
	if (!ret)
		abi_copy_out(st, st_sz, &full, sizeof(full));
	return ret;
}

PWB__SIZED(pwb__sized_bdi_histogram, pwb_bdi_histogram);
int pwb__sized_bdi_histogram(const struct pwb_bdi *bdi, unsigned int which,
			     struct pwb_histogram *h, size_t h_sz)
{
	struct pwb_histogram full;
	int ret;

	pwb__err_clear();
	ret = abi_check_out(h, h_sz, PWB__HIST_SZ_0_1_0, "pwb_bdi_histogram",
			    "pwb_histogram");
	if (ret)
		return ret;
	/* A query: the cast only meets the internal function's pointer. */
	ret = pwb__bdi_histogram((struct pwb_bdi *)bdi, which,
				 h ? &full : NULL);
	if (!ret)
		abi_copy_out(h, h_sz, &full, sizeof(full));
	return ret;
}
