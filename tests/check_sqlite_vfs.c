// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * check_sqlite_vfs.c - SQL through the "pwb" VFS (examples/sqlite-vfs)
 * with the C API: tables, 100,000 inserts in transactions of several
 * sizes, updates, deletes, VACUUM and a reopen in each journal mode; two
 * processes taking turns on one database; bad input (no device, an
 * unwritable or too small device, a foreign image, a long name, a full
 * device).
 *
 * pwbvfs.c is linked in (built with -DSQLITE_CORE), so this also runs
 * under the sanitizers, where the stock shell cannot load an instrumented
 * extension.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pwbvfs.h"
#include "test-util.h"

static char img[512];
/* The last "pwbvfs: " line of sqlite3_log() (see log_line). */
static char vfs_log[1024];

static void setup(void)
{
	ck_assert_int_eq(pwbvfs_register(0), SQLITE_OK);
	snprintf(img, sizeof(img), "%s/sqlvfs-%d.img", tu_test_dir(),
		 (int)getpid());
	unlink(img);
}

static void rm_side_files(const char *base)
{
	char cmd[2600];

	/* The image, its image lock and the per-database lock files. */
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'.pwb-*", base, base);
	if (system(cmd))
		fprintf(stderr, "cleanup failed: %s\n", cmd);
}

static void teardown(void)
{
	rm_side_files(img);
}

static int open_db(const char *name, const char *dev, const char *extra,
		   sqlite3 **db)
{
	char uri[1024];

	snprintf(uri, sizeof(uri), "file:%s?vfs=pwb&device=%s%s", name, dev,
		 extra ? extra : "");
	return sqlite3_open_v2(uri, db,
			       SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				       SQLITE_OPEN_URI,
			       NULL);
}

static void exec_ok(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);

	ck_assert_msg(rc == SQLITE_OK, "%s: %d %s", sql, rc,
		      err ? err : "");
	sqlite3_free(err);
}

static sqlite3_int64 q_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	sqlite3_int64 v;

	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
			 SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void q_text(sqlite3 *db, const char *sql, char *out, size_t n)
{
	sqlite3_stmt *st;

	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL),
			 SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
}

static void check_integrity(sqlite3 *db)
{
	char res[256];

	q_text(db, "PRAGMA integrity_check", res, sizeof(res));
	ck_assert_str_eq(res, "ok");
}

static const char *const modes[] = {"DELETE", "TRUNCATE", "PERSIST", "WAL"};

/*
 * 100,000 inserts: 100 transactions of 1 row, 90 of 10, 90 of 100 and
 * 90 of 1000; then updates, deletes and VACUUM; then a reopen (a new
 * mount: everything comes from the device) must see the same table.
 * With PWB_TEST_QUICK (the CI's later runs, README.md) a tenth of the
 * transactions: 10,000 inserts.
 */
START_TEST(test_journal_mode)
{
	const char *mode = modes[_i];
	const char *quick = getenv("PWB_TEST_QUICK");
	const int div = quick && *quick ? 10 : 1;
	const sqlite3_int64 total = 100000 / div;
	static const int sizes[][2] = {{100, 1}, {90, 10}, {90, 100},
				       {90, 1000}};
	sqlite3 *db;
	sqlite3_stmt *ins;
	char sql[256], res[64];
	sqlite3_int64 id = 0, sum;

	ck_assert_int_eq(open_db("main.db", img, NULL, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s", mode);
	q_text(db, sql, res, sizeof(res));
	ck_assert_msg(!strcasecmp(res, mode), "journal_mode %s, not %s", res,
		      mode);
	exec_ok(db, "PRAGMA synchronous=NORMAL; PRAGMA page_size=4096;"
		    "CREATE TABLE t(id INTEGER PRIMARY KEY, v INT, s TEXT);"
		    "CREATE INDEX t_v ON t(v)");
	ck_assert_int_eq(sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?, ?, "
					    "printf('row-%08d', ?))",
					    -1, &ins, NULL),
			 SQLITE_OK);
	for (unsigned int k = 0; k < 4; k++) {
		for (int t = 0; t < sizes[k][0] / div; t++) {
			exec_ok(db, "BEGIN");
			for (int r = 0; r < sizes[k][1]; r++) {
				id++;
				sqlite3_bind_int64(ins, 1, id);
				sqlite3_bind_int64(ins, 2, (id * 7919) % 1000);
				sqlite3_bind_int64(ins, 3, id);
				ck_assert_int_eq(sqlite3_step(ins), SQLITE_DONE);
				sqlite3_reset(ins);
			}
			exec_ok(db, "COMMIT");
		}
	}
	sqlite3_finalize(ins);
	ck_assert_int_eq(id, total);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), total);
	exec_ok(db, "UPDATE t SET v = v + 1 WHERE id % 3 = 0");
	exec_ok(db, "DELETE FROM t WHERE id % 5 = 0");
	exec_ok(db, "VACUUM");
	check_integrity(db);
	sum = q_int(db, "SELECT sum(v) FROM t");
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), total / 5 * 4);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);

	/* The journal is gone (DELETE), empty (TRUNCATE) or kept with a
	 * zeroed header (PERSIST); WAL was checkpointed and deleted at
	 * close. Reopen: the device alone must hold all of it. */
	ck_assert_int_eq(open_db("main.db", img, NULL, &db), SQLITE_OK);
	check_integrity(db);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), total / 5 * 4);
	ck_assert_int_eq(q_int(db, "SELECT sum(v) FROM t"), sum);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t WHERE s = "
				   "printf('row-%08d', id)"),
			 total / 5 * 4);
	q_text(db, "PRAGMA journal_mode", res, sizeof(res));
	ck_assert_msg(!strcasecmp(res, strcmp(mode, "WAL") ? "delete" : "wal"),
		      "reopened in %s", res);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

/* Child of the turns test: @n transactions of BEGIN IMMEDIATE, read the
 * counter, insert a row naming this process and the counter, bump it. */
static int turns_child(const char *mode, int who, int n)
{
	sqlite3 *db;
	char sql[256];
	int i;

	if (open_db("shared.db", img, NULL, &db))
		return 10;
	sqlite3_busy_timeout(db, 20000);
	/* synchronous=OFF: no xSync at commit, so what the other process
	 * sees is what the VFS writes back when the write lock goes. */
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s;"
		 "PRAGMA synchronous=OFF", mode);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL))
		return 11;
	for (i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql),
			 "BEGIN IMMEDIATE;"
			 "INSERT INTO log VALUES(%d, (SELECT n FROM c), "
			 "randomblob(3000));"
			 "UPDATE c SET n = n + 1;"
			 "COMMIT",
			 who);
		if (sqlite3_exec(db, sql, NULL, NULL, NULL)) {
			fprintf(stderr, "child %d: %s\n", who,
				sqlite3_errmsg(db));
			return 12;
		}
		/* Let the other one in now and then. */
		if (i % 4 == 3)
			usleep(1000);
	}
	if (sqlite3_close(db))
		return 13;
	return 0;
}

static pid_t spawn(const char *mode, int who, int n)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(turns_child(mode, who, n));
	return pid;
}

static void reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "child status %#x", st);
}

/*
 * Two processes (each with its own libpwb cache and allocator) take turns
 * on one database: every transaction reads the counter the other may just
 * have bumped. A stale cache shows as a duplicate counter value, stale
 * extents as a corrupt file.
 */
START_TEST(test_two_processes)
{
	const char *mode = modes[_i];
	const int n = 150;
	sqlite3 *db;
	pid_t a, b;

	/* No libpwb in this process before the forks (pwb.h, fork()). */
	a = fork();
	ck_assert_int_ge(a, 0);
	if (a == 0) {
		if (open_db("shared.db", img, NULL, &db) ||
		    sqlite3_exec(db, "CREATE TABLE log(who INT, seq INT "
				     "UNIQUE, pad BLOB);"
				     "CREATE TABLE c(n INT); INSERT INTO c "
				     "VALUES(0)",
				     NULL, NULL, NULL) ||
		    sqlite3_close(db))
			_exit(1);
		_exit(0);
	}
	reap(a);
	a = spawn(mode, 1, n);
	b = spawn(mode, 2, n);
	reap(a);
	reap(b);
	ck_assert_int_eq(open_db("shared.db", img, NULL, &db), SQLITE_OK);
	check_integrity(db);
	ck_assert_int_eq(q_int(db, "SELECT n FROM c"), 2 * n);
	ck_assert_int_eq(q_int(db, "SELECT count(DISTINCT seq) FROM log"),
			 2 * n);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM log WHERE who = 1"),
			 n);
	ck_assert_int_eq(q_int(db, "SELECT max(seq) FROM log"), 2 * n - 1);
	/* They did take turns: the sequence changes hands. */
	ck_assert_int_gt(q_int(db, "SELECT count(*) FROM log a JOIN log b "
				   "ON b.seq = a.seq + 1 WHERE a.who != b.who"),
			 0);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

/*
 * Two connections of one process on one database share the mount (one
 * bdi, one inode per file): SQLite's locks still hold between them, and
 * each sees what the other committed. Meanwhile another process writes a
 * second database of the same image, which makes this process reload the
 * directory while its connections are open.
 */
START_TEST(test_two_connections)
{
	sqlite3 *a, *b, *o;
	pid_t pid;
	int i, rc, go[2];
	char c = 0;

	/* The other process is forked before this one uses libpwb (pwb.h,
	 * fork()), and waits for the pipe. */
	ck_assert_int_eq(pipe(go), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(go[1]);
		if (open_db("other.db", img, NULL, &o))
			_exit(1);
		sqlite3_busy_timeout(o, 10000);
		if (sqlite3_exec(o, "CREATE TABLE IF NOT EXISTS o(x)", NULL,
				 NULL, NULL) ||
		    read(go[0], &c, 1) != 1)
			_exit(2);
		for (i = 0; i < 50; i++)
			if (sqlite3_exec(o, "INSERT INTO o VALUES(randomblob("
					    "20000))", NULL, NULL, NULL))
				_exit(3);
		_exit(sqlite3_close(o) ? 4 : 0);
	}
	close(go[0]);
	ck_assert_int_eq(open_db("one.db", img, NULL, &a), SQLITE_OK);
	ck_assert_int_eq(open_db("one.db", img, NULL, &b), SQLITE_OK);
	sqlite3_busy_timeout(a, 10000);
	exec_ok(a, "CREATE TABLE t(x INTEGER PRIMARY KEY, y BLOB)");
	exec_ok(a, "BEGIN IMMEDIATE; INSERT INTO t VALUES(1, randomblob(9000))");
	rc = sqlite3_exec(b, "INSERT INTO t VALUES(2, 'b')", NULL, NULL, NULL);
	ck_assert_int_eq(rc, SQLITE_BUSY);
	ck_assert_int_eq(q_int(b, "SELECT count(*) FROM t"), 0);
	exec_ok(a, "COMMIT");
	ck_assert_int_eq(q_int(b, "SELECT count(*) FROM t"), 1);
	/* Now the other process writes other.db: the epoch moves under us. */
	ck_assert_int_eq(write(go[1], &c, 1), 1);
	close(go[1]);
	for (i = 0; i < 200; i++) {
		char sql[128];

		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES(%d, "
			 "randomblob(3000))", i + 10);
		sqlite3_busy_timeout(a, 10000);
		sqlite3_busy_timeout(b, 10000);
		exec_ok(i % 2 ? a : b, sql);
		ck_assert_int_eq(q_int(i % 2 ? b : a, "SELECT count(*) FROM t"),
				 i + 2);
	}
	reap(pid);
	check_integrity(a);
	ck_assert_int_eq(sqlite3_close(a), SQLITE_OK);
	ck_assert_int_eq(sqlite3_close(b), SQLITE_OK);
	ck_assert_int_eq(open_db("other.db", img, NULL, &o), SQLITE_OK);
	check_integrity(o);
	ck_assert_int_eq(q_int(o, "SELECT count(*) FROM o"), 50);
	ck_assert_int_eq(sqlite3_close(o), SQLITE_OK);
}
END_TEST

/*
 * WAL mode is one process at a time: while one process has a WAL database
 * open, another gets SQLITE_BUSY (not a page the wal-index names but the
 * device does not have yet); once the first closes, the second sees all.
 */
START_TEST(test_wal_one_process)
{
	int ready[2], go[2], rc;
	char c = 0;
	sqlite3 *db;
	pid_t a, b;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	a = fork();
	ck_assert_int_ge(a, 0);
	if (a == 0) {
		if (open_db("wal.db", img, NULL, &db) ||
		    sqlite3_exec(db, "PRAGMA journal_mode=WAL;"
				     "PRAGMA synchronous=NORMAL;"
				     "CREATE TABLE t(x);"
				     "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
				     "SELECT i + 1 FROM n WHERE i < 100) "
				     "INSERT INTO t SELECT randomblob(500) FROM n",
				     NULL, NULL, NULL) ||
		    write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(sqlite3_close(db) ? 2 : 0);
	}
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	b = fork();
	ck_assert_int_ge(b, 0);
	if (b == 0) {
		if (open_db("wal.db", img, NULL, &db))
			_exit(1);
		rc = sqlite3_exec(db, "SELECT count(*) FROM t", NULL, NULL,
				  NULL);
		sqlite3_close(db);
		if (rc != SQLITE_BUSY)
			fprintf(stderr, "second process: %d\n", rc);
		_exit(rc == SQLITE_BUSY ? 0 : 10);
	}
	reap(b);
	ck_assert_int_eq(write(go[1], &c, 1), 1);
	reap(a);
	ck_assert_int_eq(open_db("wal.db", img, NULL, &db), SQLITE_OK);
	check_integrity(db);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 100);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

static int open_rc(const char *uri, int flags)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(uri, &db, flags | SQLITE_OPEN_URI, "pwb");

	if (rc == SQLITE_OK)	/* opening is lazy: make it touch the file */
		rc = sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS x(a)", NULL,
				  NULL, NULL);
	sqlite3_close(db);
	return rc;
}

START_TEST(test_bad_input)
{
	const int rwc = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	char uri[1024], name[400], small[600];
	int fd;

	/* No device at all. */
	unsetenv("PWB_VFS_DEVICE");
	ck_assert_int_eq(open_rc("file:x.db", rwc), SQLITE_CANTOPEN);
	/* A device in a directory that does not exist (cannot create). */
	snprintf(uri, sizeof(uri), "file:x.db?device=%s/no/such/dir/img",
		 tu_test_dir());
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	/* Not there and no CREATE: not created. */
	snprintf(uri, sizeof(uri), "file:x.db?device=%s", img);
	ck_assert_int_eq(open_rc(uri, SQLITE_OPEN_READWRITE), SQLITE_CANTOPEN);
	ck_assert_int_ne(access(img, F_OK), 0);
	/* A device_size that is no size is refused, not ignored, and
	 * creates nothing; so is one too small, which once created the
	 * image, refused it and left it behind. */
	snprintf(uri, sizeof(uri), "file:x.db?device=%s&device_size=abc", img);
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	ck_assert_ptr_nonnull(strstr(vfs_log, "device_size=abc is not a size"));
	ck_assert_int_ne(access(img, F_OK), 0);
	setenv("PWB_VFS_DEVICE_SIZE", "12Q", 1);
	snprintf(uri, sizeof(uri), "file:x.db?device=%s", img);
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	unsetenv("PWB_VFS_DEVICE_SIZE");
	ck_assert_ptr_nonnull(strstr(vfs_log, "PWB_VFS_DEVICE_SIZE=12Q is not"));
	ck_assert_int_ne(access(img, F_OK), 0);
	snprintf(uri, sizeof(uri), "file:x.db?device=%s&device_size=1M", img);
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	ck_assert_ptr_nonnull(strstr(vfs_log, "an image needs at least"));
	ck_assert_int_ne(access(img, F_OK), 0);
	snprintf(small, sizeof(small), "%s.pwb-lock", img);
	ck_assert_int_ne(access(small, F_OK), 0);
	/* Too small for the directory. */
	snprintf(small, sizeof(small), "%s.small", img);
	fd = open(small, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	snprintf(uri, sizeof(uri), "file:x.db?device=%s", small);
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	/* A foreign image (not zeros, no directory): refused, untouched. */
	ck_assert_int_eq(ftruncate(fd, 8 << 20), 0);
	ck_assert_int_eq(pwrite(fd, "hello", 5, 100), 5);
	ck_assert_int_ne(open_rc(uri, rwc), SQLITE_OK);
	{
		char b[5];

		ck_assert_int_eq(pread(fd, b, 5, 100), 5);
		ck_assert_int_eq(memcmp(b, "hello", 5), 0);
	}
	close(fd);
	rm_side_files(small);
	/* The environment variable names the device when the URI does not. */
	setenv("PWB_VFS_DEVICE", img, 1);
	ck_assert_int_eq(open_rc("file:x.db", rwc), SQLITE_OK);
	unsetenv("PWB_VFS_DEVICE");
	/* A name longer than the directory keeps. */
	memset(name, 'n', 300);
	name[300] = 0;
	snprintf(uri, sizeof(uri), "file:%s?device=%s", name, img);
	ck_assert_int_eq(open_rc(uri, rwc), SQLITE_CANTOPEN);
	/* The image still works after all that. */
	snprintf(uri, sizeof(uri), "file:x.db?device=%s", img);
	ck_assert_int_eq(open_rc(uri, SQLITE_OPEN_READWRITE), SQLITE_OK);
}
END_TEST

/* A full device is SQLITE_FULL, and the database stays intact. */
START_TEST(test_device_full)
{
	sqlite3 *db;
	int rc = SQLITE_OK, i;
	sqlite3_int64 n;

	ck_assert_int_eq(open_db("full.db", img, "&device_size=6M", &db),
			 SQLITE_OK);
	exec_ok(db, "CREATE TABLE t(b BLOB)");
	for (i = 0; i < 200 && rc == SQLITE_OK; i++)
		rc = sqlite3_exec(db, "INSERT INTO t VALUES(randomblob(100000))",
				  NULL, NULL, NULL);
	ck_assert_msg(rc == SQLITE_FULL, "rc %d after %d inserts: %s", rc, i,
		      sqlite3_errmsg(db));
	n = q_int(db, "SELECT count(*) FROM t");
	ck_assert_int_gt(n, 0);
	check_integrity(db);
	/* (The database now fills the device: even a delete needs journal
	 * space and fails with SQLITE_FULL, as on a full file system.) */
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
	ck_assert_int_eq(open_db("full.db", img, NULL, &db), SQLITE_OK);
	check_integrity(db);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), n);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

/* Several databases on one image, deleted journals give their space back:
 * a loop that would need far more than the device holds if it did not. */
START_TEST(test_many_files)
{
	sqlite3 *db[3];
	char name[32];
	int i, k;

	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "db%d", i);
		ck_assert_int_eq(open_db(name, img, "&device_size=16M", &db[i]),
				 SQLITE_OK);
		exec_ok(db[i], "CREATE TABLE t(b BLOB)");
	}
	for (k = 0; k < 60; k++)
		for (i = 0; i < 3; i++) {
			exec_ok(db[i], "BEGIN; DELETE FROM t;"
				       "INSERT INTO t VALUES(randomblob(300000));"
				       "COMMIT");
		}
	for (i = 0; i < 3; i++) {
		check_integrity(db[i]);
		ck_assert_int_eq(sqlite3_close(db[i]), SQLITE_OK);
	}
	for (i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "db%d", i);
		ck_assert_int_eq(open_db(name, img, NULL, &db[i]), SQLITE_OK);
		check_integrity(db[i]);
		ck_assert_int_eq(q_int(db[i], "SELECT length(b) FROM t"),
				 300000);
		ck_assert_int_eq(sqlite3_close(db[i]), SQLITE_OK);
	}
}
END_TEST

/*
 * A transaction larger than SQLite's own cache (2 MB by default) spills
 * its pages to the VFS before the commit. Below the bdi's background
 * threshold (at least 16 MiB, examples/sqlite-vfs/README.md) they stay in
 * libpwb's cache until the commit's xSync writes each once: no background
 * pass runs during a 10 MB transaction. (With the former 8 MiB threshold
 * background writeback ran and wrote pages SQLite went on changing.)
 */
START_TEST(test_big_txn)
{
	sqlite3 *db;

	ck_assert_int_eq(open_db("big.db", img, NULL, &db), SQLITE_OK);
	exec_ok(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
		    "CREATE TABLE t(b BLOB)");
	exec_ok(db, "BEGIN; WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
		    "SELECT i + 1 FROM n WHERE i < 2500) INSERT INTO t "
		    "SELECT randomblob(4000) FROM n; COMMIT");
	ck_assert_int_eq(q_int(db, "PRAGMA pwb_stats = background_passes"),
			 0);
	ck_assert_int_gt(q_int(db, "PRAGMA pwb_stats = written_pages"),
			 2500);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 2500);
	check_integrity(db);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

/* The image's epoch (IMAGE.pwb-lock, 64 bits at offset 0): bumped before
 * every directory write (and when the image lock changes hands, which a
 * WAL database's connection does not do while it stays open). */
static uint64_t image_epoch(void)
{
	char path[600];
	uint64_t v = 0;
	int fd;

	snprintf(path, sizeof(path), "%s.pwb-lock", img);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &v, sizeof(v), 0), (ssize_t)sizeof(v));
	close(fd);
	return v;
}

/*
 * Small WAL commits: a WAL grows in 1 MiB steps of zeros (README.md), so
 * 200 commits that append about 1.6 MB of frames write the directory a
 * few times, not once per commit (each such write costs a flush of its
 * own). The WAL's size is a multiple of 1 MiB, and a new mount reads
 * every commit back.
 */
START_TEST(test_wal_growth)
{
	sqlite3_file *wal = NULL;
	sqlite3_int64 size = 0;
	uint64_t e0, e1;
	sqlite3 *db;

	ck_assert_int_eq(open_db("walgrow.db", img, NULL, &db), SQLITE_OK);
	exec_ok(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
		    "CREATE TABLE t(v BLOB); INSERT INTO t VALUES(1)");
	e0 = image_epoch();
	for (int i = 0; i < 200; i++)
		exec_ok(db, "INSERT INTO t VALUES(randomblob(6000))");
	e1 = image_epoch();
	ck_assert_msg(e1 - e0 <= 10, "%llu directory writes for 200 commits",
		      (unsigned long long)(e1 - e0));
	ck_assert_int_eq(sqlite3_file_control(db, "main",
					      SQLITE_FCNTL_JOURNAL_POINTER,
					      &wal),
			 SQLITE_OK);
	ck_assert_ptr_nonnull(wal);
	ck_assert_int_eq(wal->pMethods->xFileSize(wal, &size), SQLITE_OK);
	ck_assert_int_ge(size, 200 * 6000);
	ck_assert_int_eq(size % (1 << 20), 0);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);

	ck_assert_int_eq(open_db("walgrow.db", img, NULL, &db), SQLITE_OK);
	ck_assert_int_eq(q_int(db, "SELECT count(*) FROM t"), 201);
	check_integrity(db);
	ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sqlite_vfs");
	TCase *tc = tcase_create("sql");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, test_journal_mode, 0, 4);
	/* WAL is one process at a time (README.md): rollback modes only. */
	tcase_add_loop_test(tc, test_two_processes, 0, 3);
	tcase_add_test(tc, test_two_connections);
	tcase_add_test(tc, test_wal_one_process);
	tcase_add_test(tc, test_bad_input);
	tcase_add_test(tc, test_device_full);
	tcase_add_test(tc, test_many_files);
	tcase_add_test(tc, test_big_txn);
	tcase_add_test(tc, test_wal_growth);
	suite_add_tcase(s, tc);
	return s;
}

/* SQLite's and the VFS's sqlite3_log() lines go to the test's log; the
 * VFS's last one is kept in vfs_log. */
static void log_line(void *arg, int rc, const char *msg)
{
	(void)arg;
	fprintf(stderr, "sqlite3_log(%d): %s\n", rc, msg);
	if (!strncmp(msg, "pwbvfs: ", 8))
		snprintf(vfs_log, sizeof(vfs_log), "%s", msg);
}

int main(void)
{
	sqlite3_config(SQLITE_CONFIG_LOG, log_line, NULL);
	return tu_run_suite(suite(), true);
}
