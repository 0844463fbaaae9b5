/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pwbvfs.h - the "pwb" SQLite VFS (README.md in this directory).
 *
 * Programs that link pwbvfs.c (compiled with -DSQLITE_CORE) instead of
 * loading libpwbvfs.so call pwbvfs_register(); the loadable extension's
 * entry point is sqlite3_pwbvfs_init().
 */
#ifndef PWBVFS_H
#define PWBVFS_H

#include <sqlite3.h>

/* Register the "pwb" VFS once (later calls do nothing); @make_default
 * makes it SQLite's default VFS. Return: SQLITE_OK or an SQLite error. */
int pwbvfs_register(int make_default);

/* The loadable extension's entry point (".load libpwbvfs"). */
int sqlite3_pwbvfs_init(sqlite3 *db, char **err,
			const sqlite3_api_routines *api);

#endif /* PWBVFS_H */
