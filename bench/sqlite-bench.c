// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * sqlite-bench.c - pwb-bench --workload sqlite: the same SQL on the "pwb"
 * VFS (examples/sqlite-vfs, its image in --dir) and on SQLite's default
 * VFS (a plain file in --dir), in one run, and the ratio of their rates.
 *
 * A run: a fresh database with 4096-byte pages, a table with an index and
 * 2,000 rows (not timed), then for the run's seconds transactions of ten
 * INSERTs of 100-byte rows and one UPDATE of a random row, each committed.
 * Rows: journal_mode DELETE and WAL, each with synchronous=FULL and
 * NORMAL. Each figure is the median of the runs, the two VFSes taking
 * turns so that drift of the machine hits both alike.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "pwbvfs.h"
#include "sqlite-bench.h"

/* CPU seconds of this process (every thread: SQLite's and libpwb's, not
 * the busy-loop children). Less moved by other load than the wall clock. */
static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void print_loadavg(FILE *out, const char *when)
{
	double la[3];

	if (getloadavg(la, 3) == 3)
		fprintf(out, "load average %s: %.2f %.2f %.2f (%ld CPUs)\n",
			when, la[0], la[1], la[2],
			sysconf(_SC_NPROCESSORS_ONLN));
}

static int run_sql(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);

	if (rc) {
		fprintf(stderr, "pwb-bench sqlite: %s: %s\n", sql,
			err ? err : sqlite3_errstr(rc));
		sqlite3_free(err);
	}
	return rc;
}

static void remove_files(const char *dir, int pwb)
{
	char cmd[1200];

	if (pwb)
		snprintf(cmd, sizeof(cmd), "rm -f '%s/pwb-bench-sqlite.img' "
			 "'%s/pwb-bench-sqlite.img'.pwb-*", dir, dir);
	else
		snprintf(cmd, sizeof(cmd), "rm -f '%s/pwb-bench-sqlite.db' "
			 "'%s/pwb-bench-sqlite.db'-*", dir, dir);
	if (system(cmd))
		fprintf(stderr, "pwb-bench sqlite: %s failed\n", cmd);
}

/* The database of a run: a fresh image (pwb) or file (unix) in @dir. */
static sqlite3 *open_db(const char *dir, int pwb)
{
	char uri[1200];
	sqlite3 *db;
	int rc;

	remove_files(dir, pwb);
	if (pwb)
		snprintf(uri, sizeof(uri), "file:bench.db?vfs=pwb&device=%s/"
			 "pwb-bench-sqlite.img&device_size=1G", dir);
	else
		snprintf(uri, sizeof(uri), "file:%s/pwb-bench-sqlite.db", dir);
	rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL);
	if (rc) {
		fprintf(stderr, "pwb-bench sqlite: open %s: %s\n", uri,
			sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/* One timed run; transactions per second, or -1; *@cpu_txn gets the
 * process's CPU seconds per transaction. */
static double one_run(const char *dir, int pwb, const char *mode,
		      const char *sync, double seconds, double *cpu_txn)
{
	char sql[256];
	sqlite3 *db = open_db(dir, pwb);
	sqlite3_stmt *ins, *upd;
	double t0, t = 0, c0;
	long n = 0, id = 2000;
	unsigned int seed = 12345;

	if (!db)
		return -1;
	snprintf(sql, sizeof(sql), "PRAGMA page_size=4096;"
		 "PRAGMA journal_mode=%s; PRAGMA synchronous=%s", mode, sync);
	if (run_sql(db, sql) ||
	    run_sql(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT, v TEXT);"
			"CREATE INDEX t_k ON t(k);"
			"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1"
			" FROM n WHERE i < 2000) INSERT INTO t SELECT i, "
			"abs(random()) % 100000, hex(randomblob(50)) FROM n") ||
	    sqlite3_prepare_v2(db, "INSERT INTO t(k, v) VALUES(?, "
			       "hex(randomblob(50)))", -1, &ins, NULL) ||
	    sqlite3_prepare_v2(db, "UPDATE t SET k = k + 1 WHERE id = ?", -1,
			       &upd, NULL)) {
		sqlite3_close(db);
		return -1;
	}
	c0 = cpu_now();
	t0 = bench_now_s();
	do {
		if (run_sql(db, "BEGIN"))
			break;
		for (int i = 0; i < 10; i++) {
			sqlite3_bind_int(ins, 1, (int)(rand_r(&seed) % 100000));
			if (sqlite3_step(ins) != SQLITE_DONE)
				goto fail;
			sqlite3_reset(ins);
		}
		id += 10;
		sqlite3_bind_int64(upd, 1, 1 + (long)rand_r(&seed) % id);
		if (sqlite3_step(upd) != SQLITE_DONE)
			goto fail;
		sqlite3_reset(upd);
		if (run_sql(db, "COMMIT"))
			goto fail;
		n++;
		t = bench_now_s();
	} while (t - t0 < seconds);
	*cpu_txn = (cpu_now() - c0) / (double)(n ? n : 1);
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	if (sqlite3_close(db))
		return -1;
	remove_files(dir, pwb);
	return (double)n / (t - t0);
fail:
	fprintf(stderr, "pwb-bench sqlite: %s\n", sqlite3_errmsg(db));
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	sqlite3_close(db);
	return -1;
}

int pwb_bench_sqlite(FILE *out, const char *dir, double seconds,
		     unsigned int runs)
{
	static const char *const rows[][2] = {{"DELETE", "FULL"},
					      {"DELETE", "NORMAL"},
					      {"WAL", "FULL"},
					      {"WAL", "NORMAL"}};
	double p[16], u[16], pc[16], uc[16];
	int ret = 0;

	if (runs < 1)
		runs = 1;
	if (runs > 15)
		runs = 15;
	if (pwbvfs_register(0)) {
		fprintf(stderr, "pwb-bench sqlite: cannot register the VFS\n");
		return -1;
	}
	fprintf(out, "sqlite: txn = 10 INSERTs + 1 UPDATE, 4096-byte pages, "
		"%.1f s per run, median of %u\n", seconds, runs);
	print_loadavg(out, "at start");
	fprintf(out, "%-8s %-7s %12s %12s %7s %-6s %9s %9s %7s\n", "journal",
		"sync", "pwb txn/s", "unix txn/s", "pwb/unix", "goal",
		"pwb cpu", "unix cpu", "cpu u/p");
	for (unsigned int r = 0; r < 4; r++) {
		double mp, mu, mpc, muc;
		bool full = !strcmp(rows[r][1], "FULL");

		for (unsigned int k = 0; k < runs; k++) {
			u[k] = one_run(dir, 0, rows[r][0], rows[r][1],
				       seconds, &uc[k]);
			p[k] = one_run(dir, 1, rows[r][0], rows[r][1],
				       seconds, &pc[k]);
			if (u[k] < 0 || p[k] < 0)
				return -1;
		}
		mp = bench_median(p, runs);
		mu = bench_median(u, runs);
		mpc = bench_median(pc, runs) * 1e3;
		muc = bench_median(uc, runs) * 1e3;
		fprintf(out, "%-8s %-7s %12.0f %12.0f %7.2f %-6s %6.3f ms "
			"%6.3f ms %7.2f\n", rows[r][0], rows[r][1], mp, mu,
			mp / mu, full ? ">= 1.2" : ">= 0.9", mpc, muc,
			muc / mpc);
		fflush(out);
		if (mp / mu < (full ? 1.2 : 0.9))
			ret = 1;
	}
	print_loadavg(out, "at end");
	return ret;
}

/* ------------------------------------------------------------ bulk */

/*
 * A bulk load: BULK_TXNS transactions of BULK_ROWS INSERTs each into a
 * table with one or three secondary indexes on random keys, so every
 * transaction adds pages to the table's end and changes pages all over
 * each index. Rows are about 100 bytes (three integers and 80 characters).
 */
#define BULK_ROWS 50000
#define BULK_TXNS 5

/* One timed bulk run; rows per second, or -1; *@cpu_txn gets the
 * process's CPU seconds per transaction. */
static double bulk_run(const char *dir, int pwb, const char *mode,
		       int indexes, double *cpu_txn)
{
	static const char *const idx[] = {
		"CREATE INDEX t_a ON t(a)", "CREATE INDEX t_b ON t(b)",
		"CREATE INDEX t_c ON t(c)",
	};
	char sql[256], v[81];
	sqlite3 *db = open_db(dir, pwb);
	sqlite3_stmt *ins = NULL;
	unsigned int seed = 4242;
	double t0, t, c0;

	if (!db)
		return -1;
	snprintf(sql, sizeof(sql), "PRAGMA page_size=4096;"
		 "PRAGMA journal_mode=%s; PRAGMA synchronous=FULL", mode);
	if (run_sql(db, sql) ||
	    run_sql(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, a INT, b INT,"
			" c INT, v TEXT)"))
		goto fail;
	for (int i = 0; i < indexes; i++)
		if (run_sql(db, idx[i]))
			goto fail;
	if (sqlite3_prepare_v2(db, "INSERT INTO t(a, b, c, v) VALUES(?, ?, ?,"
			       " ?)", -1, &ins, NULL))
		goto fail;
	c0 = cpu_now();
	t0 = bench_now_s();
	for (int k = 0; k < BULK_TXNS; k++) {
		if (run_sql(db, "BEGIN"))
			goto fail;
		for (int i = 0; i < BULK_ROWS; i++) {
			for (int j = 0; j < 80; j++)
				v[j] = (char)('a' + rand_r(&seed) % 26);
			v[80] = 0;
			sqlite3_bind_int(ins, 1, rand_r(&seed));
			sqlite3_bind_int(ins, 2, rand_r(&seed));
			sqlite3_bind_int(ins, 3, rand_r(&seed));
			sqlite3_bind_text(ins, 4, v, 80, SQLITE_STATIC);
			if (sqlite3_step(ins) != SQLITE_DONE)
				goto fail;
			sqlite3_reset(ins);
		}
		if (run_sql(db, "COMMIT"))
			goto fail;
	}
	t = bench_now_s();
	*cpu_txn = (cpu_now() - c0) / BULK_TXNS;
	sqlite3_finalize(ins);
	if (sqlite3_close(db))
		return -1;
	remove_files(dir, pwb);
	return (double)BULK_ROWS * BULK_TXNS / (t - t0);
fail:
	fprintf(stderr, "pwb-bench sqlite-bulk: %s\n", sqlite3_errmsg(db));
	sqlite3_finalize(ins);
	sqlite3_close(db);
	return -1;
}

/* Start @n processes that spin until killed (the CPU-bound load). */
static int load_start(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			return -1;
		if (pids[i] == 0) {
			volatile unsigned long x = 0;

			for (;;)
				x++;
		}
	}
	return 0;
}

static void load_stop(pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		if (pids[i] <= 0)
			continue;
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
		pids[i] = 0;
	}
}

int pwb_bench_sqlite_bulk(FILE *out, const char *dir, unsigned int runs)
{
	static const char *const modes[] = {"DELETE", "WAL"};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double p[16], u[16], pc[16], uc[16];
	pid_t pids[64] = {0};
	int ret = 0;

	if (runs < 1)
		runs = 1;
	if (runs > 15)
		runs = 15;
	if (ncpu < 1)
		ncpu = 1;
	if (ncpu > 64)
		ncpu = 64;
	if (pwbvfs_register(0)) {
		fprintf(stderr, "pwb-bench sqlite: cannot register the VFS\n");
		return -1;
	}
	fprintf(out, "sqlite-bulk: %d txns of %d INSERTs (~100-byte rows, "
		"random index keys), synchronous=FULL, 4096-byte pages, "
		"median of %u\n", BULK_TXNS, BULK_ROWS, runs);
	print_loadavg(out, "at start");
	fprintf(out, "%-8s %-4s %-9s %11s %11s %7s %-6s %9s %9s %7s\n",
		"journal", "idx", "cpu load", "pwb rows/s", "unix rows/s",
		"pwb/unix", "goal", "pwb cpu", "unix cpu", "cpu u/p");
	for (int load = 0; load < 2; load++) {
		for (unsigned int r = 0; r < 4; r++) {
			const char *mode = modes[r / 2];
			int indexes = r % 2 ? 3 : 1;
			double mp, mu, mpc, muc, goal = load ? 1.0 : 1.2;

			for (unsigned int k = 0; k < runs; k++) {
				if (load && load_start(pids, (int)ncpu)) {
					load_stop(pids, (int)ncpu);
					return -1;
				}
				/* Taking turns at going first. */
				if (k % 2) {
					p[k] = bulk_run(dir, 1, mode, indexes,
							&pc[k]);
					u[k] = bulk_run(dir, 0, mode, indexes,
							&uc[k]);
				} else {
					u[k] = bulk_run(dir, 0, mode, indexes,
							&uc[k]);
					p[k] = bulk_run(dir, 1, mode, indexes,
							&pc[k]);
				}
				load_stop(pids, (int)ncpu);
				if (u[k] < 0 || p[k] < 0)
					return -1;
			}
			mp = bench_median(p, runs);
			mu = bench_median(u, runs);
			mpc = bench_median(pc, runs) * 1e3;
			muc = bench_median(uc, runs) * 1e3;
			fprintf(out, "%-8s %-4d %-9s %11.0f %11.0f %7.2f >= %.1f"
				" %6.0f ms %6.0f ms %7.2f\n", mode, indexes,
				load ? "1/CPU" : "none", mp, mu, mp / mu, goal,
				mpc, muc, muc / mpc);
			fflush(out);
			if (mp / mu < goal)
				ret = 1;
		}
	}
	print_loadavg(out, "at end");
	return ret;
}
