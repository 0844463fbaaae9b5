/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwb-internal.h - every private header of libpwb, for the core files and
 * the white-box tests
 *
 * Not installed. White-box tests include it and link libpwb-internal.la.
 * The lock order, the RCU rules and the picture of an inode's lists are
 * in lib/base.h; doc/design.md ("Source layout") says which header holds
 * what and who may include it.
 */
#ifndef PWB_INTERNAL_H
#define PWB_INTERNAL_H

#include "base.h"
#include "pagemap.h"
#include "xarray.h"
#include "completion.h"
#include "io.h"
#include "policy-int.h"
#include "wb_ctx.h"
#include "pacing.h"
#include "autotune.h"
#include "bdi.h"
#include "throttle.h"
#include "tenant.h"
#include "domain.h"
#include "inode.h"
#include "region.h"
#include "writeback.h"
#include "blocked.h"

#endif /* PWB_INTERNAL_H */
