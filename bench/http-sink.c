/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * http-sink - the ceiling of an HTTP PUT path on this machine
 *
 * A server for bench/objd-bench's curl clients that stores nothing: it
 * accepts HTTP/1.1 on a Unix socket (or, with --tcp-port N, on
 * 127.0.0.1:N, for load tools that speak only TCP, as pwb-objd's
 * --tcp-port does), reads each request's body, drops it
 * and answers "201 Created" (with an ETag, as pwb-objd does) on the same
 * kept-alive connection. What pwb-objd does with these clients can be no
 * better than this, whatever its storage costs:
 *
 *   --mode mhd  libmicrohttpd set up exactly as pwb-objd sets it up (a
 *               thread per connection, poll(), 128 KiB of memory per
 *               connection, 1 MiB stacks, 1024 connections, 60 s
 *               timeout): what pwb-objd's HTTP library costs alone;
 *   --mode mhd-epoll  libmicrohttpd on epoll, with a pool of as many
 *               threads as CPUs, each serving many connections (no
 *               thread per connection, no sleep per request while
 *               requests keep coming): what pwb-objd's HTTP path could
 *               cost if it waited for its commits without a thread each
 *               (suspending the connection instead);
 *   --mode raw  no HTTP library: a thread per connection reads the
 *               request head, then Content-Length body bytes in recv()s
 *               of up to 64 KiB (--recv BYTES), and writes a fixed
 *               reply: about the least any HTTP server can spend on
 *               these clients here.
 *
 * --crc also runs pwb-objd's CRC-32C over every body (its price alone).
 * --check exits 0 if MODE is built in, 77 if not, without listening.
 * Prints "serving" on stdout once it listens; SIGTERM or SIGINT ends it
 * (exit 0), after printing the requests and body bytes it took.
 * Not installed: a measuring tool of bench/objd-bench.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "crc32c.h"

#ifdef HAVE_SINK_MHD
#include <microhttpd.h>
#endif

static bool use_crc;
static uint64_t nr_requests;	/* atomic */
static uint64_t nr_bytes;	/* atomic */

/* ------------------------------------------------------------ --mode mhd */
#ifdef HAVE_SINK_MHD

/* One request's state (pwb-objd keeps one too): its body's checksum. */
struct sink_req {
	uint32_t crc;
	uint64_t len;
};

/*
 * libmicrohttpd's request callback: the first call of a request makes its
 * state, every call with body bytes takes them all, and the last call
 * (no bytes left) queues the 201. Runs on the connection's own thread
 * (mhd), or on the pool thread that serves the connection (mhd-epoll).
 */
static enum MHD_Result sink_handle(void *cls, struct MHD_Connection *c,
				   const char *url, const char *method,
				   const char *version, const char *data,
				   size_t *data_size, void **con_cls)
{
	struct sink_req *q = *con_cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	char etag[16];

	(void)cls, (void)url, (void)method, (void)version;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		*con_cls = q;
		return MHD_YES;
	}
	if (*data_size) {
		if (use_crc)
			q->crc = crc32c_update(q->crc, data, *data_size);
		q->len += *data_size;
		*data_size = 0;
		return MHD_YES;
	}
	r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	snprintf(etag, sizeof(etag), "\"%08x\"", q->crc);
	MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
	ret = MHD_queue_response(c, 201, r);
	MHD_destroy_response(r);
	__atomic_fetch_add(&nr_requests, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&nr_bytes, q->len, __ATOMIC_RELAXED);
	return ret;
}

/* The completion callback: frees the request's state. */
static void sink_done(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)c, (void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

/* Serve @fd with libmicrohttpd as pwb-objd's start_mhd() does (@epoll
 * false), or on epoll with a pool of a thread per CPU: the daemon, or
 * NULL (message printed). */
static struct MHD_Daemon *sink_mhd_start(int fd, bool epoll)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD |
			     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
			     MHD_USE_ERROR_LOG;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int pool = 0;
	struct MHD_Daemon *d;

	if (epoll) {
		flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
			MHD_USE_ERROR_LOG;
		pool = cpus > 1 ? (unsigned int)cpus : 0;
	}

	d = MHD_start_daemon(flags, 0, NULL, NULL, sink_handle, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_LIMIT, 1024u,
			     MHD_OPTION_CONNECTION_TIMEOUT, 60u,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT,
			     (size_t)(128 << 10),
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20),
			     MHD_OPTION_THREAD_POOL_SIZE, pool,
			     MHD_OPTION_NOTIFY_COMPLETED, sink_done, NULL,
			     MHD_OPTION_END);
	if (!d)
		fprintf(stderr, "http-sink: libmicrohttpd did not start\n");
	return d;
}
#endif /* HAVE_SINK_MHD */

/* ------------------------------------------------------------ --mode raw */

/*
 * The raw mode's buffer per connection: the head, then the body in recv()s
 * of up to this size (--recv). 64 KiB: eight connections' buffers stay in
 * the CPU's cache. With 1 MiB buffers the sink spent about twice the CPU
 * per 1 MiB PUT (0.49-0.51 against 0.20-0.31 ms, eight curl clients): the
 * kernel's copy into them missed the cache.
 */
static size_t SINK_BUF = 64u << 10;

/* @n bytes of @p to @fd: 0 or -errno. */
static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The value of header @name (with its colon) in the head @h (NUL-ended),
 * or NULL. Case-insensitive, at the start of a line. */
static const char *head_value(const char *h, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = strstr(h, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		if (!strncasecmp(l + 2, name, n)) {
			const char *v = l + 2 + n;

			while (*v == ' ' || *v == '\t')
				v++;
			return v;
		}
	}
	return NULL;
}

/*
 * One connection, on its own thread: requests one after the other, each
 * a head (at most the buffer), its Content-Length bytes of body read and
 * dropped, then the reply. Ends when the client closes or sends what it
 * cannot read (no Content-Length on a request with a body: chunked is
 * not spoken). Owns and closes the socket (passed as the argument).
 */
static void *sink_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(SINK_BUF + 1);
	size_t have = 0;	/* bytes in buf not yet taken */

	if (!buf)
		goto out;
	for (;;) {
		char *end;
		const char *v;
		uint64_t left;
		size_t head;
		uint32_t crc = 0;
		uint64_t len;
		char reply[128];
		int n;

		buf[have] = 0;
		while (!(end = strstr(buf, "\r\n\r\n"))) {
			ssize_t r;

			if (have == SINK_BUF)
				goto out;	/* head too large */
			r = recv(fd, buf + have, SINK_BUF - have, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				goto out;
			have += (size_t)r;
			buf[have] = 0;
		}
		head = (size_t)(end - buf) + 4;
		v = head_value(buf, "Content-Length:");
		left = v ? strtoull(v, NULL, 10) : 0;
		if (!v && head_value(buf, "Transfer-Encoding:"))
			goto out;
		v = head_value(buf, "Expect:");
		if (v && !strncasecmp(v, "100-continue", 12) &&
		    have - head < left &&
		    write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
			goto out;
		len = left;
		/* The body bytes that came with the head. */
		{
			size_t take = have - head < left ? have - head
							   : (size_t)left;

			if (use_crc)
				crc = crc32c_update(crc, buf + head, take);
			left -= take;
			memmove(buf, buf + head + take, have - head - take);
			have -= head + take;
		}
		while (left) {
			size_t want = left < SINK_BUF ? (size_t)left : SINK_BUF;
			ssize_t r = recv(fd, buf, want, 0);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				goto out;
			if (use_crc)
				crc = crc32c_update(crc, buf, (size_t)r);
			left -= (uint64_t)r;
		}
		n = snprintf(reply, sizeof(reply),
			     "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n"
			     "ETag: \"%08x\"\r\n\r\n", crc);
		if (write_all(fd, reply, (size_t)n))
			goto out;
		__atomic_fetch_add(&nr_requests, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&nr_bytes, len, __ATOMIC_RELAXED);
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

/* Accepts on @fd and starts a detached thread (1 MiB stack) per connection.
 * Runs until the process ends. */
static void *sink_raw_accept(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1 << 20);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("http-sink: accept");
			return NULL;
		}
		/* Replies go out at once over TCP, as libmicrohttpd's do
		 * (a Unix socket refuses the option: nothing to do). */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 },
				 sizeof(int));
		if (pthread_create(&t, &attr, sink_conn, (void *)(intptr_t)fd))
			close(fd);
	}
}

/* ------------------------------------------------------------------ main */

/* A listening Unix socket at @path (replacing a stale one): fd or -1. */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "http-sink: socket path too long\n");
		return -1;
	}
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    chmod(path, 0600) || listen(fd, 1024)) {
		perror("http-sink: socket");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* A listening TCP socket on 127.0.0.1:@port: fd or -1. */
static int listen_tcp(unsigned int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1024)) {
		perror("http-sink: TCP socket");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: http-sink {--socket PATH | --tcp-port N} "
		   "[--mode mhd|mhd-epoll|raw] [--crc] [--recv BYTES]\n"
		   "       http-sink --mode MODE --check   (exit 0: built "
		   "with that mode, 77: not)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "tcp-port", required_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		{ "crc", no_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'k' },
		{ "recv", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *path = NULL, *mode = "raw";
	unsigned long port = 0;
	bool check = false;
	sigset_t set;
	int o, sig, fd;

	while ((o = getopt_long(argc, argv, "s:p:m:ckr:h", lo, NULL)) != -1) {
		switch (o) {
		case 's':
			path = optarg;
			break;
		case 'p':
			port = strtoul(optarg, NULL, 10);
			if (!port || port > 65535) {
				usage(stderr);
				return 2;
			}
			break;
		case 'm':
			mode = optarg;
			break;
		case 'c':
			use_crc = true;
			break;
		case 'k':
			check = true;
			break;
		case 'r':
			SINK_BUF = strtoul(optarg, NULL, 0);
			if (SINK_BUF < 4096) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if ((!path == !port && !check) ||
	    (strcmp(mode, "raw") && strcmp(mode, "mhd") &&
	     strcmp(mode, "mhd-epoll"))) {
		usage(stderr);
		return 2;
	}
#ifndef HAVE_SINK_MHD
	if (strcmp(mode, "raw")) {
		fprintf(stderr, "http-sink: built without libmicrohttpd\n");
		return 77;
	}
#endif
	if (check)
		return 0;	/* the mode is there */
	/* Every thread inherits the mask: only sigwait() below takes them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	fd = path ? listen_unix(path) : listen_tcp((unsigned int)port);
	if (fd < 0)
		return 1;
	if (strcmp(mode, "raw")) {
#ifdef HAVE_SINK_MHD
		if (!sink_mhd_start(fd, !strcmp(mode, "mhd-epoll")))
			return 1;
#endif
	} else {
		pthread_t t;

		if (pthread_create(&t, NULL, sink_raw_accept,
				   (void *)(intptr_t)fd)) {
			fprintf(stderr, "http-sink: no accept thread\n");
			return 1;
		}
	}
	if (path)
		printf("http-sink: %s mode%s, serving on %s\n", mode,
		       use_crc ? " with CRC-32C" : "", path);
	else
		printf("http-sink: %s mode%s, serving on TCP 127.0.0.1:%lu\n",
		       mode, use_crc ? " with CRC-32C" : "", port);
	fflush(stdout);
	sigwait(&set, &sig);
	printf("http-sink: %" PRIu64 " requests, %" PRIu64 " body bytes\n",
	       __atomic_load_n(&nr_requests, __ATOMIC_RELAXED),
	       __atomic_load_n(&nr_bytes, __ATOMIC_RELAXED));
	fflush(stdout);
	if (path)
		unlink(path);
	/* The connection threads still run: end them all with the process
	 * (nothing of theirs needs cleaning up). */
	_exit(0);
}
