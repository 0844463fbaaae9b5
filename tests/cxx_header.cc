// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * cxx_header.cc - the installed headers compile and link as C++
 *
 * Built with the project's C++ compiler; also clean under
 * g++ -std=c++11 -Wall -Wextra -pedantic-errors. Uses a few declarations
 * so that a missing extern "C" shows up as a link error, not just a
 * compile-only success.
 */
#include <pwb.h>
#include <pwb-policy.h>
#include <pwb.h> /* twice: the include guard works */

#include <cerrno>
#include <cstdio>
#include <cstring>

static int check(bool ok, const char *what)
{
	if (!ok)
		std::fprintf(stderr, "cxx_header: FAIL: %s\n", what);
	return ok ? 0 : 1;
}

int main()
{
	struct pwb_bdi_config cfg;
	struct pwb_stats st = {};
	struct pwb_bdi_info info = {};
	struct pwb_inode_ops ops = {};
	int bad = 0;

	static_assert(PWB_VERSION_NUMBER ==
			      ((PWB_VERSION_MAJOR << 16) |
			       (PWB_VERSION_MINOR << 8) | PWB_VERSION_PATCH),
		      "PWB_VERSION_NUMBER");
	static_assert(PWB_MAX_WB_CTX >= PWB_AUTO_MAX_WB_CTX, "context caps");
	static_assert(PWB_POLICY_ABI_VERSION >= 1, "policy ABI");

	std::memset(&cfg, 0xff, sizeof(cfg));
	pwb_bdi_config_init(&cfg);
	pwb_bdi_config_init(nullptr);
	bad += check(cfg.page_size == 4096, "default page_size is 4096");
	bad += check(cfg.nr_wb_ctx == 0, "default nr_wb_ctx is 0");
	bad += check(cfg.policy == nullptr, "default policy is NULL");
	bad += check(cfg.dirty_expire_ms == 30000, "default dirty_expire_ms");
	bad += check(cfg.dirty_writeback_ms == 5000,
		     "default dirty_writeback_ms");

	bad += check(pwb_version() == PWB_VERSION_NUMBER,
		     "pwb_version() matches the header");
	bad += check(pwb_strerror(-EINVAL) != nullptr &&
			     pwb_strerror(-EINVAL)[0] != '\0',
		     "pwb_strerror(-EINVAL) has text");
	bad += check(pwb_strerror(-123456) != nullptr,
		     "pwb_strerror(unknown) is not NULL");
	bad += check(pwb_errmsg() != nullptr, "pwb_errmsg() is not NULL");
	bad += check(pwb_bdi_nr_wb_ctx(nullptr) == 0,
		     "pwb_bdi_nr_wb_ctx(NULL) == 0");
	bad += check(pwb_bdi_stats(nullptr, &st) == -EINVAL,
		     "pwb_bdi_stats(NULL) == -EINVAL");
	bad += check(pwb_bdi_info(nullptr, &info) == -EINVAL,
		     "pwb_bdi_info(NULL) == -EINVAL");
	bad += check(pwb_inode_priv(nullptr) == nullptr,
		     "pwb_inode_priv(NULL) == NULL");
	bad += check(ops.get_page == nullptr, "ops zero-initialise");
	bad += check(pwb_bdi_close(nullptr) == 0, "pwb_bdi_close(NULL) == 0");

	if (!bad)
		std::printf("cxx_header: pwb.h %u.%u.%u works from C++\n",
			    PWB_VERSION_MAJOR, PWB_VERSION_MINOR,
			    PWB_VERSION_PATCH);
	return bad ? 1 : 0;
}
