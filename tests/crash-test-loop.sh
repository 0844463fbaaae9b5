#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# crash-test on a loop device; exits 77 (SKIP) where none can be attached
# (not root, no losetup, no loop module).
exec "${top_builddir:-.}/tests/crash-test" --loop-only
