#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""objd-index-hold.py - hold pwb-objd's index (an LMDB environment) busy:
begin a write transaction in it, print "held", and keep it until standard
input ends, then abort it. LMDB lets one writer in at a time over all the
processes that open an environment, so meanwhile the daemon's committer
waits for this one and every record queued to it (a PUT's, a DELETE's)
waits with it. For tests/objd-threads-test.sh.

Usage: objd-index-hold.py INDEX_DIR. Exit 0, 1 on an LMDB error, 77 if
liblmdb cannot be loaded."""
import ctypes
import ctypes.util
import sys


def main():
    name = ctypes.util.find_library("lmdb")
    try:
        lmdb = ctypes.CDLL(name or "liblmdb.so.0")
    except OSError as e:
        print("SKIP: liblmdb: %s" % e)
        return 77
    lmdb.mdb_strerror.restype = ctypes.c_char_p
    env = ctypes.c_void_p()
    txn = ctypes.c_void_p()

    def check(rc, what):
        if rc:
            print("FAIL: %s: %s" % (what, lmdb.mdb_strerror(rc).decode()))
            sys.exit(1)

    check(lmdb.mdb_env_create(ctypes.byref(env)), "mdb_env_create")
    check(lmdb.mdb_env_open(env, sys.argv[1].encode(), 0, 0o600),
          "mdb_env_open")
    check(lmdb.mdb_txn_begin(env, None, 0, ctypes.byref(txn)),
          "mdb_txn_begin")
    print("held", flush=True)
    sys.stdin.read()
    lmdb.mdb_txn_abort(txn)
    lmdb.mdb_env_close(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
