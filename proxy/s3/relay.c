/* SPDX-License-Identifier: Apache-2.0 */
/* The S3 GET/HEAD relay's own HTTP/1.1 client to the targets: keep-alive connections per worker, response heads read without touching the body. */
#include "s3/s3.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "cluster/local.h"
#include "http/util.h"

/*
 * DESIGN
 * A GET relayed through libcurl copies every body byte twice through user memory (curl's receive
 * buffer, then the HTTP server's response ring). This client only sends the request and reads the
 * response head, with MSG_PEEK first so that not one body byte leaves the socket: the caller then
 * hands the socket to ft_resp_stream_splice, which moves the body to the client in kernel pages.
 *
 * It is deliberately small: plain http:// targets, and https:// ones of this machine on their
 * Unix sockets (which speak plain HTTP), GET and HEAD, one request at a time per connection, and
 * no redirects or chunked bodies. A body with a Content-Length the caller either
 * splices, or (a small object, an error answer) reads whole with px_s3_relay_read_body. Whatever
 * it does not handle the caller sends through the libcurl path, before anything went to the
 * client (a GET or HEAD may be repeated).
 *
 * OWNERSHIP
 * Idle connections belong to the worker thread that used them (a small thread-local cache of
 * RELAY_IDLE_MAX, oldest closed first); a connection in use belongs to its px_s3_relay_t until
 * px_s3_relay_done() gives it back or closes it. A connection that carried a complete response
 * (the body fully read) is reused; any other is closed.
 */

#define RELAY_IDLE_MAX 4
#define RELAY_CONNECT_TIMEOUT_MS 5000

typedef struct {
	int fd;
	char hostport[sizeof(((px_s3_relay_t *)0)->hostport)];
} idle_conn_t;

static __thread idle_conn_t idle_conns[RELAY_IDLE_MAX];
static __thread int idle_count;

/* An idle connection to hostport of this thread, or -1. */
static int idle_take(const char *hostport)
{
	for (int i = idle_count - 1; i >= 0; i--) {
		if (strcmp(idle_conns[i].hostport, hostport) != 0)
			continue;
		int fd = idle_conns[i].fd;
		memmove(&idle_conns[i], &idle_conns[i + 1], (size_t)(idle_count - i - 1) * sizeof(idle_conns[0]));
		idle_count--;
		return fd;
	}
	return -1;
}

static void idle_give(int fd, const char *hostport)
{
	if (idle_count == RELAY_IDLE_MAX) {
		close(idle_conns[0].fd);
		memmove(&idle_conns[0], &idle_conns[1], (size_t)(RELAY_IDLE_MAX - 1) * sizeof(idle_conns[0]));
		idle_count--;
	}
	idle_conns[idle_count].fd = fd;
	snprintf(idle_conns[idle_count].hostport, sizeof(idle_conns[0].hostport), "%s", hostport);
	idle_count++;
}

/*
 * Splits "http://host:port/rest" (or https://, then *https) into host, port and the request target;
 * false for anything else.
 */
static bool split_url(const char *url, char *host, size_t hcap, char *port, size_t pcap, const char **path, bool *https)
{
	const char *h, *colon, *slash;

	*https = strncmp(url, "https://", 8) == 0;
	if (!*https && strncmp(url, "http://", 7) != 0)
		return false;
	h = url + (*https ? 8 : 7);
	slash = strchr(h, '/');
	colon = memchr(h, ':', slash != NULL ? (size_t)(slash - h) : strlen(h));
	if (slash == NULL || colon == NULL || h[0] == '[' || (size_t)(colon - h) >= hcap ||
	    (size_t)(slash - colon - 1) >= pcap || slash == colon + 1)
		return false;
	memcpy(host, h, (size_t)(colon - h));
	host[colon - h] = '\0';
	memcpy(port, colon + 1, (size_t)(slash - colon - 1));
	port[slash - colon - 1] = '\0';
	*path = slash;
	return true;
}

static void set_timeouts(int fd)
{
	int ms = px_s3_relay_timeout_ms();
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/*
 * A new connection to host:port (connect bounded by RELAY_CONNECT_TIMEOUT_MS), or -1: on the
 * target's Unix socket when it runs on this machine (ft_local_dial), else TCP; an https target
 * (local_only) on its socket only.
 */
static int dial(const char *host, const char *port, bool local_only)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL, *p;
	char hostport[sizeof(((px_s3_relay_t *)0)->hostport)];
	int fd = -1;

	if (snprintf(hostport, sizeof(hostport), "%s:%s", host, port) < (int)sizeof(hostport) &&
	    (fd = ft_local_dial(hostport, local_only, false)) >= 0) {
		set_timeouts(fd);
		return fd;
	}
	if (local_only)
		return -1;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -1;
	for (p = ai; p != NULL && fd < 0; p = p->ai_next) {
		struct timeval tv = {.tv_sec = RELAY_CONNECT_TIMEOUT_MS / 1000};

		fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)); /* bounds connect(2) too */
		if (connect(fd, p->ai_addr, p->ai_addrlen) != 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd >= 0)
		set_timeouts(fd);
	return fd;
}

/* Parses the head at the start of rl->head[0..n) into rl->resp and rl->hdrs. */
static ft_hp_result_t parse_head(px_s3_relay_t *rl, size_t n)
{
	return ft_hp_parse_resp_head(rl->head, n, sizeof(rl->head) - 1, rl->hdrs, PX_S3_TARGET_HEADERS_MAX, &rl->resp);
}

/*
 * Peeks until the whole head is in the socket, then reads exactly the head: the body stays in the
 * socket, rl->resp and rl->hdrs describe the head. 1 = done, 0 = the connection ended before any
 * byte, -1 = failure (timeout, ended midway), -2 = a malformed or too large head.
 */
static int read_head(px_s3_relay_t *rl)
{
	size_t have = 0, end;
	ft_hp_result_t hp;
	ssize_t k;

	for (;;) {
		k = recv(rl->fd, rl->head, sizeof(rl->head) - 1, MSG_PEEK);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k == 0 && have == 0 ? 0 : -1;
		hp = parse_head(rl, (size_t)k);
		if (hp == FT_HP_DONE)
			break;
		if (hp != FT_HP_AGAIN || (size_t)k >= sizeof(rl->head) - 1)
			return -2;
		if ((size_t)k == have) {
			/* nothing new since the last peek: wait for more instead of spinning */
			struct pollfd pf = {.fd = rl->fd, .events = POLLIN};
			if (poll(&pf, 1, px_s3_relay_timeout_ms()) <= 0)
				return -1;
		}
		have = (size_t)k;
	}
	/* all there already: this takes exactly the head, the same bytes rl->resp was parsed from */
	end = rl->resp.head_len;
	for (have = 0; have < end; have += (size_t)k) {
		k = recv(rl->fd, rl->head + have, end - have, 0);
		if (k < 0 && errno == EINTR)
			k = 0;
		else if (k <= 0)
			return -1;
	}
	rl->head[end] = '\0';
	return 1;
}

/*
 * Sends the request and reads the head on fd; 1 = head read, 0 = the connection was stale, -1 = failure,
 * -2 = a malformed or too large head.
 */
static int exchange(px_s3_relay_t *rl, const char *req, size_t len)
{
	if (send(rl->fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return errno == EPIPE || errno == ECONNRESET ? 0 : -1;
	int rc = read_head(rl);
	if (rc == -1 && errno == ECONNRESET)
		return 0;
	return rc;
}

/*
 * An https target's Unix socket is named in the map but cannot be had (its file gone, a listener of
 * another user): said at most once a minute, as every GET to it then pays a failed connect or two.
 */
static void socket_lost(const char *hostport)
{
	static _Atomic int64_t last_ns;
	int64_t now = ft_now_ns(), prev = atomic_load(&last_ns);

	if (now - prev >= 60 * (int64_t)1000000000 && atomic_compare_exchange_strong(&last_ns, &prev, now))
		ft_warn("s3 relay: the Unix socket of https target %s cannot be reached; relaying over TLS instead",
			hostport);
}

char *px_s3_relay_request(const char *url, bool head, const char *const *headers, char *hostport, size_t cap,
			  size_t *len, bool *local_only)
{
	char host[256], port[16];
	const char *path;
	ft_strbuf_t b = {0};

	if (!split_url(url, host, sizeof(host), port, sizeof(port), &path, local_only) ||
	    snprintf(hostport, cap, "%s:%s", host, port) >= (int)cap ||
	    (*local_only && !ft_local_known(hostport, true)))
		return NULL;
	ft_strbuf_addf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", head ? "HEAD" : "GET", path, hostport);
	for (; headers != NULL && *headers != NULL; headers++)
		ft_strbuf_addf(&b, "%s\r\n", *headers);
	ft_strbuf_adds(&b, "\r\n");
	if (b.failed) {
		ft_strbuf_free(&b);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

/* A fresh px_s3_relay_t: head, hdrs and resp are filled by the exchange, so their 24 KiB are not cleared. */
static void relay_init(px_s3_relay_t *rl)
{
	rl->fd = -1;
	rl->unreachable = false;
	rl->hostport[0] = '\0';
	rl->adopted = false;
	rl->pre = NULL;
	rl->pre_off = rl->pre_end = 0;
}

int px_s3_relay_adopt(px_s3_relay_t *rl, int fd, const char *hostport, char *buf, size_t len)
{
	relay_init(rl);
	rl->fd = fd;
	rl->adopted = true;
	snprintf(rl->hostport, sizeof(rl->hostport), "%s", hostport);
	if (len == 0) {
		free(buf);
		return read_head(rl) == 1 ? 0 : -1;
	}
	size_t n = len < sizeof(rl->head) - 1 ? len : sizeof(rl->head) - 1;

	memcpy(rl->head, buf, n);
	if (parse_head(rl, n) != FT_HP_DONE) {
		free(buf);
		return -1;
	}
	rl->head[rl->resp.head_len] = '\0';
	if (len > rl->resp.head_len) { /* body bytes read with the head: given before the socket's */
		rl->pre = buf;
		rl->pre_off = rl->resp.head_len;
		rl->pre_end = len;
	} else {
		free(buf);
	}
	return 0;
}

size_t px_s3_relay_take_pre(px_s3_relay_t *rl, void *buf, size_t cap)
{
	size_t n = rl->pre_end - rl->pre_off;

	if (n > cap)
		n = cap;
	if (n > 0)
		memcpy(buf, rl->pre + rl->pre_off, n);
	rl->pre_off += n;
	return n;
}

int px_s3_relay_get(px_s3_relay_t *rl, bool head, const char *url, const char *const *headers)
{
	ft_strbuf_t b = {0};
	int rc = -1;

	relay_init(rl);
	bool local_only;
	b.p = px_s3_relay_request(url, head, headers, rl->hostport, sizeof(rl->hostport), &b.len, &local_only);
	if (b.p == NULL)
		return -1;
	char host[256], port[16];
	const char *colon = strrchr(rl->hostport, ':');
	snprintf(host, sizeof(host), "%.*s", (int)(colon - rl->hostport), rl->hostport);
	snprintf(port, sizeof(port), "%s", colon + 1);
	/* A reused connection may have been closed by the target meanwhile: then once more on a new one. */
	for (int attempt = 0; attempt < 2 && rc != 1; attempt++) {
		bool reused = true;

		rl->fd = attempt == 0 ? idle_take(rl->hostport) : -1;
		if (rl->fd < 0) {
			rl->fd = dial(host, port, local_only);
			reused = false;
		}
		if (rl->fd < 0) {
			/* refused, or no answer to the connect; an https target's socket gone: libcurl's TLS next */
			rl->unreachable = !local_only;
			if (local_only)
				socket_lost(rl->hostport);
			break;
		}
		rc = exchange(rl, b.p, b.len);
		if (rc != 1) {
			close(rl->fd);
			rl->fd = -1;
			/* a new connection closed before any byte; on an https target's socket: libcurl's TLS next */
			rl->unreachable = !reused && rc == 0 && !local_only;
			if (!reused || rc < 0)
				break;
			ft_debug("s3 relay: the kept connection to %s was closed; on a new one", rl->hostport);
		}
	}
	if (rc == -2)
		ft_warn("s3 relay: unreadable response head from %s", rl->hostport);
	if (rl->unreachable)
		ft_metric_error(FT_ME_RELAY);
	ft_strbuf_free(&b);
	return rc == 1 ? 0 : -1;
}

int px_s3_relay_read_body(px_s3_relay_t *rl, void *buf, size_t len)
{
	size_t have = px_s3_relay_take_pre(rl, buf, len);
	ssize_t k;

	while (have < len) {
		k = recv(rl->fd, (char *)buf + have, len - have, MSG_WAITALL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k == 0 ? -EPIPE : (errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno);
		have += (size_t)k;
	}
	return 0;
}

void px_s3_relay_done(px_s3_relay_t *rl, bool body_read)
{
	free(rl->pre);
	rl->pre = NULL;
	rl->pre_off = rl->pre_end = 0;
	if (rl->fd < 0)
		return;
	if (!body_read || !rl->resp.keep_alive)
		close(rl->fd);
	else if (!rl->adopted || !px_s3_rloop_give(rl->fd, rl->hostport)) /* a loop's goes back to the loops */
		idle_give(rl->fd, rl->hostport);
	rl->fd = -1;
}
