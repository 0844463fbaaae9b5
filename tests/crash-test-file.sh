#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# crash-test's image-file variant (the loop device variant is its own test,
# crash-test-loop.sh, so that a machine without one reports a SKIP).
exec "${top_builddir:-.}/tests/crash-test" --no-loop
