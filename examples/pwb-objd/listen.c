// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * listen.c - pwb-objd's listeners (examples/pwb-objd): the Unix socket,
 * the TCP one on 127.0.0.1, and the libmicrohttpd daemon that serves each
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "objd.h"

/* Connections opened and closed (a client without keep-alive shows as
 * many connections as requests). */
static void conn_cb(void *cls, struct MHD_Connection *c, void **socket_ctx,
		    enum MHD_ConnectionNotificationCode code)
{
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		CNT_ADD(connections, 1);
	else
		CNT_ADD(connections_closed, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	if (!opt.verbose)
		return;
	fputs("pwb-objd: mhd: ", stderr);
	vfprintf(stderr, fmt, ap);
}

void mhd_panic(void *cls, const char *file, unsigned int line,
	       const char *reason)
{
	fprintf(stderr, "pwb-objd: libmicrohttpd failed at %s:%u: %s\n",
		file ? file : "?", line, reason ? reason : "?");
	abort();
}

/* The Unix socket: a stale one (nobody answers) is replaced, anything
 * else at the path is left alone and refused; the umask makes it 0600
 * from the start, chmod says so explicitly. */
int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "pwb-objd: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "pwb-objd: %s: another daemon answers there\n",
			path);
		close(fd);
		return -1;
	}
	close(fd);
	if (!lstat(path, &st) && !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "pwb-objd: %s: exists and is not a socket; "
			"not replacing it\n", path);
		return -1;
	}
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		umask(old);
		goto fail_fd;
	}
	umask(old);
	if (chmod(path, 0600) || listen(fd, 1024))
		goto fail_fd;
	return fd;
fail_fd:
	close(fd);
fail:
	fprintf(stderr, "pwb-objd: %s: %s\n", path, strerror(errno));
	return -1;
}

/*
 * The TCP listener on 127.0.0.1:@port, made here rather than by
 * libmicrohttpd so that a failure (the port in use, a privileged port)
 * is reported with its port and errno. Return the socket or -1.
 */
int listen_tcp(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd, one = 1;

	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	/* A restart may bind while connections of the last run linger in
	 * TIME_WAIT; a port someone listens on is still refused. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, 1024)) {
		int err = errno;

		close(fd);
		errno = err;
		goto fail;
	}
	return fd;
fail:
	fprintf(stderr, "pwb-objd: could not listen on TCP 127.0.0.1:%d: "
		"%s\n", port, strerror(errno));
	return -1;
}

/* Serve on the listening socket @fd; @where names it in a message. NULL
 * (message printed): no daemon, and @fd is closed. */
struct MHD_Daemon *start_mhd(int fd, const char *where)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			     MHD_USE_ERROR_LOG;
	struct MHD_Daemon *d;

	if (opt.threads)
		flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	/*
	 * --threads N: a pool of N threads on epoll serves every
	 * connection; what would wait (a PUT's durable stage, a body write
	 * over its bucket's budget, a GET's read of pages not cached) is
	 * done by the stage workers with the connection suspended
	 * (stage.c), so no pool thread sleeps in poll() before each request
	 * nor in the group commit (a DELETE's commit, ?verify and POST
	 * /-/sync wait suspended too). Without it, a thread per
	 * connection: a PUT sleeps in the group commit without holding up
	 * other clients. The connection's memory: libmicrohttpd reads into
	 * half of it, and clears all of it before each request of a kept
	 * connection. 128 KiB reads a 1 MiB body from curl in 19
	 * recv()s (256 KiB: 17, 64 KiB: 35) and clears half of what 256 KiB
	 * did (the clear was 8% of the daemon's time on 4 KiB PUTs).
	 */
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
			     MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, opt.max_conn,
			     MHD_OPTION_CONNECTION_TIMEOUT, opt.timeout_s,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)(128 << 10),
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20),
			     MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
			     MHD_OPTION_NOTIFY_CONNECTION, conn_cb, NULL,
			     MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
			     /* 0 (a thread per connection): no pool */
			     MHD_OPTION_THREAD_POOL_SIZE, opt.threads,
			     MHD_OPTION_END);
	if (!d) {
		close(fd);	/* ours to close: no daemon took it */
		fprintf(stderr, "pwb-objd: could not start the HTTP server on "
			"%s: %s\n", where,
			opt.verbose ? "libmicrohttpd's reason is above"
				    : "run with --verbose for "
				      "libmicrohttpd's reason");
	}
	return d;
}
