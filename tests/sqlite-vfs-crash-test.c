// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * sqlite-vfs-crash-test.c - SIGKILL a writer on the "pwb" VFS at random
 * moments and check what the device holds afterwards.
 *
 * For each journal mode (DELETE, TRUNCATE, PERSIST, WAL) the parent starts
 * a child (this program again, exec()ed: libpwb must not be used across a
 * fork) that runs transactions in a loop with synchronous=FULL and writes
 * each transaction's id to a pipe after COMMIT returned. Transaction k
 * inserts n(k) = 1 + k % 5 rows tagged k, deletes the rows of k - 20 and
 * adds n(k) to a counter row. The parent kills the child after a random
 * delay (seeded; the seed is printed), reopens the database and requires:
 * PRAGMA integrity_check = ok; the highest transaction M is at least every
 * id ever reported (and at most one past the last); transactions M-19..M
 * are there whole, older ones gone whole; the counter equals the sum of
 * n(1..M). Then the next child continues from M + 1.
 *
 * Usage: sqlite-vfs-crash-test [--kills N] [--seed S]
 * (PWB_SQLVFS_KILLS and PWB_SQLVFS_SEED do the same; PWB_TEST_QUICK set
 * makes it 10 kills per mode, see README.md.) Exit 77 where the test
 * directory refuses O_DIRECT.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pwbvfs.h"

#define WINDOW 20

static int nrows(int64_t k)
{
	return 1 + (int)(k % 5);
}

static int64_t total_upto(int64_t m)
{
	int64_t s = 0;

	for (int64_t k = 1; k <= m; k++)
		s += nrows(k);
	return s;
}

static int open_db(const char *img, sqlite3 **db)
{
	char uri[1024];

	snprintf(uri, sizeof(uri), "file:crash.db?vfs=pwb&device=%s", img);
	return sqlite3_open_v2(uri, db,
			       SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				       SQLITE_OPEN_URI,
			       NULL);
}

static int64_t q_int(sqlite3 *db, const char *sql, int *err)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL)) {
		*err = 1;
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	else
		*err = 1;
	sqlite3_finalize(st);
	return v;
}

/* ------------------------------------------------------------- child */

static int child(const char *img, const char *mode, int fd)
{
	sqlite3 *db;
	sqlite3_stmt *ins;
	char sql[256];
	int64_t k, zero = 0;
	int err = 0;

	if (pwbvfs_register(0) || open_db(img, &db))
		return 2;
	sqlite3_busy_timeout(db, 10000);
	snprintf(sql, sizeof(sql), "PRAGMA journal_mode=%s;"
		 "PRAGMA synchronous=FULL", mode);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL))
		return 3;
	k = q_int(db, "SELECT coalesce(max(txn), 0) FROM t", &err);
	if (err)
		return 4;
	if (sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?, ?, "
				   "randomblob(100 + abs(random()) % 900))",
			       -1, &ins, NULL))
		return 5;
	if (write(fd, &zero, sizeof(zero)) != sizeof(zero))
		return 6;
	for (k++;; k++) {
		if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL))
			return 7;
		for (int i = 0; i < nrows(k); i++) {
			sqlite3_bind_int64(ins, 1, k);
			sqlite3_bind_int(ins, 2, i);
			if (sqlite3_step(ins) != SQLITE_DONE)
				return 8;
			sqlite3_reset(ins);
		}
		snprintf(sql, sizeof(sql),
			 "DELETE FROM t WHERE txn = %lld;"
			 "UPDATE c SET total = total + %d; COMMIT",
			 (long long)(k - WINDOW), nrows(k));
		if (sqlite3_exec(db, sql, NULL, NULL, NULL)) {
			fprintf(stderr, "child: %s\n", sqlite3_errmsg(db));
			return 9;
		}
		/* Only now is k committed. */
		if (write(fd, &k, sizeof(k)) != sizeof(k))
			return 10;
	}
}

/* ------------------------------------------------------------ parent */

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Check the database after a kill; return M or -1 (after saying why). */
static int64_t verify(const char *img, int64_t max_reported, int64_t last)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char sql[256];
	int64_t m, v;
	int err = 0;
	const char *res;

	if (open_db(img, &db)) {
		fprintf(stderr, "reopen failed: %s\n", sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) ||
	    sqlite3_step(st) != SQLITE_ROW) {
		fprintf(stderr, "integrity_check: %s\n", sqlite3_errmsg(db));
		sqlite3_close(db);
		return -1;
	}
	res = (const char *)sqlite3_column_text(st, 0);
	if (strcmp(res, "ok")) {
		fprintf(stderr, "integrity_check: %s\n", res);
		sqlite3_finalize(st);
		sqlite3_close(db);
		return -1;
	}
	sqlite3_finalize(st);
	m = q_int(db, "SELECT coalesce(max(txn), 0) FROM t", &err);
	if (!err && (m < max_reported || m > last + 1)) {
		fprintf(stderr, "max txn %lld: reported up to %lld, last %lld\n",
			(long long)m, (long long)max_reported, (long long)last);
		err = 1;
	}
	for (int64_t k = m > WINDOW ? m - WINDOW + 1 : 1; !err && k <= m;
	     k++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE "
			 "txn = %lld", (long long)k);
		v = q_int(db, sql, &err);
		if (!err && v != nrows(k)) {
			fprintf(stderr, "txn %lld has %lld rows, not %d\n",
				(long long)k, (long long)v, nrows(k));
			err = 1;
		}
	}
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM t WHERE txn <= %lld",
		 (long long)(m - WINDOW));
	if (!err && (v = q_int(db, sql, &err)) != 0) {
		fprintf(stderr, "%lld rows of deleted transactions\n",
			(long long)v);
		err = 1;
	}
	if (!err && (v = q_int(db, "SELECT total FROM c", &err)) !=
			    total_upto(m)) {
		fprintf(stderr, "counter %lld, not %lld\n", (long long)v,
			(long long)total_upto(m));
		err = 1;
	}
	sqlite3_close(db);
	return err ? -1 : m;
}

static int run_mode(const char *dir, const char *mode, int kills,
		    unsigned int *rounds_with_commits)
{
	char img[512], cmd[1200];
	sqlite3 *db;
	int64_t m = 0, max_reported = 0;
	int i, ret = 1;

	snprintf(img, sizeof(img), "%s/sqlvfs-crash-%d-%s.img", dir,
		 (int)getpid(), mode);
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'.pwb-*", img, img);
	if (system(cmd))
		return 1;
	/* The schema, and the journal mode (WAL sticks to the file). */
	if (open_db(img, &db)) {
		fprintf(stderr, "%s: cannot create: %s\n", mode,
			sqlite3_errmsg(db));
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "PRAGMA journal_mode=%s;"
		 "CREATE TABLE t(txn INT, i INT, pad BLOB);"
		 "CREATE INDEX t_txn ON t(txn);"
		 "CREATE TABLE c(total INT); INSERT INTO c VALUES(0)", mode);
	if (sqlite3_exec(db, cmd, NULL, NULL, NULL) || sqlite3_close(db)) {
		fprintf(stderr, "%s: schema: %s\n", mode, sqlite3_errmsg(db));
		return 1;
	}
	for (i = 0; i < kills; i++) {
		int p[2], st;
		int64_t id, last = m, got = 0;
		char fdstr[16];
		pid_t pid;
		struct timespec ts;

		if (pipe(p))
			return 1;
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			close(p[0]);
			snprintf(fdstr, sizeof(fdstr), "%d", p[1]);
			execl("/proc/self/exe", "sqlite-vfs-crash-test",
			      "--child", img, mode, fdstr, (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		/* Wait for "ready" (0), then let it commit for a while. */
		if (read(p[0], &id, sizeof(id)) != sizeof(id)) {
			waitpid(pid, &st, 0);
			fprintf(stderr, "%s: child died at start (status "
				"%#x)\n", mode, st);
			goto out;
		}
		ts.tv_sec = 0;
		ts.tv_nsec = (long)(rnd() % 40000000);
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		while (read(p[0], &id, sizeof(id)) == sizeof(id)) {
			if (id != last + 1) {
				fprintf(stderr, "%s: child reported %lld after "
					"%lld\n", mode, (long long)id,
					(long long)last);
				goto out;
			}
			last = id;
			got++;
		}
		close(p[0]);
		waitpid(pid, &st, 0);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			fprintf(stderr, "%s: child ended by itself (status "
				"%#x)\n", mode, st);
			goto out;
		}
		if (last > max_reported)
			max_reported = last;
		m = verify(img, max_reported, last);
		if (m < 0) {
			fprintf(stderr, "%s: kill %d failed the check\n", mode,
				i + 1);
			goto out;
		}
		if (got)
			(*rounds_with_commits)++;
	}
	printf("%s: %d kills, %lld transactions committed, all intact\n",
	       mode, kills, (long long)m);
	ret = 0;
out:
	snprintf(cmd, sizeof(cmd), "rm -f '%s' '%s'.pwb-*", img, img);
	if (ret == 0 && system(cmd))
		ret = 1;
	if (ret)
		fprintf(stderr, "image kept: %s\n", img);
	return ret;
}

static int odirect_ok(const char *dir)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "%s/sqlvfs-probe-%d", dir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {"DELETE", "TRUNCATE", "PERSIST",
					    "WAL"};
	const char *dir = getenv("PWB_TEST_DIR"), *e;
	int kills = 100, i;
	unsigned int with_commits = 0;
	uint64_t seed;

	if (argc == 5 && !strcmp(argv[1], "--child"))
		return child(argv[2], argv[3], atoi(argv[4]));
	seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	if ((e = getenv("PWB_TEST_QUICK")) && *e)
		kills = 10;
	if ((e = getenv("PWB_SQLVFS_KILLS")))
		kills = atoi(e);
	if ((e = getenv("PWB_SQLVFS_SEED")))
		seed = strtoull(e, NULL, 0);
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--kills") && i + 1 < argc)
			kills = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--kills N] [--seed S]\n",
				argv[0]);
			return 2;
		}
	}
	if (!dir || !*dir)
		dir = "/var/tmp";
	if (!odirect_ok(dir)) {
		printf("SKIP: %s refuses O_DIRECT\n", dir);
		return 77;
	}
	if (pwbvfs_register(0)) {
		fprintf(stderr, "cannot register the pwb VFS\n");
		return 1;
	}
	rng = seed ? seed : 1;
	printf("seed %llu (rerun: --seed %llu), %d kills per mode\n",
	       (unsigned long long)seed, (unsigned long long)seed, kills);
	fflush(stdout);
	for (i = 0; i < 4; i++) {
		unsigned int before = with_commits;

		if (run_mode(dir, modes[i], kills, &with_commits))
			return 1;
		printf("%s: %u of %d kills came after at least one commit\n",
		       modes[i], with_commits - before, kills);
		fflush(stdout);
	}
	return 0;
}
