/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding, the sender of whole slices: one PUT per slice to the holder's public port, on kept-alive sockets. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/reqsig.h"
#include "auth/sigv4.h"
#include "base/fdio.h"
#include "cluster/local.h"
#include "protect/ec.h"

/*
 * DESIGN
 * A slice of an object encoded in memory (ec_send.c) goes to its holder as one HTTP/1.1 PUT on the
 * holder's public (io_uring) port, which streams it into its work file as it arrives (ec_recv.c).
 * The request is written with writev straight from the encode buffer: request head, framed slice
 * header, payload; no copy besides the kernel's into the socket (libcurl would copy the body into
 * its upload buffer first). The answer is a small JSON reply with a Content-Length.
 *
 * Idle connections are pooled per holder for the whole process (up to PUSH_IDLE_PER each, for
 * PUSH_HOLDERS holders; more are closed), so any sending thread (a fan-out thread or the worker
 * running the batch) reuses them and the pool stays as large as the sends in flight. A connection
 * is used by one request at a time and goes back to the pool only after a complete answer
 * without "Connection: close". A request on a reused connection that fails before any byte
 * of the answer (the holder closed it while idle) is sent once more on a fresh connection: the
 * PUT is idempotent (a new transfer id each time, the holder keeps the newest version).
 *
 * With a cluster secret the request is signed like the control plane's (auth/reqsig.h), over the
 * body's sha256 sent ahead in Ft-Body-Sha256: the holder checks the signature before the body and
 * the digest once it is in, before publishing anything.
 *
 * OWNERSHIP
 * The pool owns the idle sockets (kept until the process ends); a request owns its socket from
 * pool_take (or connect) to pool_put or close. The caller keeps every buffer.
 */

#define PUSH_HOLDERS 64  /* holders with idle connections kept */
#define PUSH_IDLE_PER 32 /* idle connections kept per holder */
#define PUSH_HEAD_MAX (EC_URL_MAX + 512)
#define PUSH_REPLY_MAX 8192

typedef struct {
	char key[FT_URL_MAX + 32]; /* "http(s)://host:port", "" = free */
	int fds[PUSH_IDLE_PER];
	int n;
} push_idle_t;

static struct {
	pthread_mutex_t lock;
	push_idle_t h[PUSH_HOLDERS];
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Takes an idle connection to key out of the pool; fd or -1. */
static int pool_take(const char *key)
{
	int fd = -1;

	pthread_mutex_lock(&pool.lock);
	for (int i = 0; i < PUSH_HOLDERS; i++) {
		if (pool.h[i].n > 0 && strcmp(pool.h[i].key, key) == 0) {
			fd = pool.h[i].fds[--pool.h[i].n];
			break;
		}
	}
	pthread_mutex_unlock(&pool.lock);
	return fd;
}

/* Keeps fd idle for key, or closes it when the pool has no room for it. */
static void pool_put(const char *key, int fd)
{
	push_idle_t *e = NULL, *free_slot = NULL;

	pthread_mutex_lock(&pool.lock);
	for (int i = 0; i < PUSH_HOLDERS && e == NULL; i++) {
		if (pool.h[i].key[0] && strcmp(pool.h[i].key, key) == 0)
			e = &pool.h[i];
		else if (free_slot == NULL && (!pool.h[i].key[0] || pool.h[i].n == 0))
			free_slot = &pool.h[i];
	}
	if (e == NULL && free_slot != NULL) { /* a new holder, or one whose connections all went */
		e = free_slot;
		snprintf(e->key, sizeof(e->key), "%s", key);
		e->n = 0;
	}
	if (e != NULL && e->n < PUSH_IDLE_PER) {
		e->fds[e->n++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&pool.lock);
	if (fd >= 0)
		close(fd);
}

/* "http://host:port[/...]" or "https://..." into host and port, *https set; 0, or -1 (malformed). */
static int url_split(const char *url, bool *https, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *h, *colon, *end;

	*https = strncmp(url, "https://", 8) == 0;
	if (!*https && strncmp(url, "http://", 7) != 0)
		return -1;
	h = url + (*https ? 8 : 7);
	end = h + strcspn(h, "/");
	if (*h == '[') { /* [v6]:port */
		const char *rb = memchr(h, ']', (size_t)(end - h));
		if (rb == NULL || rb[1] != ':')
			return -1;
		colon = rb + 1;
		h++;
		if ((size_t)(rb - h) >= hcap)
			return -1;
		memcpy(host, h, (size_t)(rb - h));
		host[rb - h] = '\0';
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
		if (colon == NULL || (size_t)(colon - h) >= hcap)
			return -1;
		memcpy(host, h, (size_t)(colon - h));
		host[colon - h] = '\0';
	}
	if ((size_t)(end - colon - 1) >= pcap || end == colon + 1)
		return -1;
	memcpy(port, colon + 1, (size_t)(end - colon - 1));
	port[end - colon - 1] = '\0';
	return 0;
}

/*
 * A new connection to host:port with send and receive timeouts; fd or -errno. A holder on this
 * machine is reached on its Unix socket (no loopback TCP on either side), an https one only there
 * (-EPROTONOSUPPORT otherwise: its TCP port speaks TLS).
 */
static int push_connect(const char *hostport, bool https, const char *host, const char *port, int timeout_ms)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	int fd = ft_local_dial(hostport, https, false), one = 1;

	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		return fd;
	}
	if (https)
		return -EPROTONOSUPPORT;
	fd = -ECONNREFUSED;
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		return -EHOSTUNREACH;
	for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		int e = errno;
		close(fd);
		fd = -e;
	}
	freeaddrinfo(ai);
	return fd;
}

/* Writes every byte of iov[0..n) (modified); 0 or -errno. */
static int push_writev(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		ft_iov_advance(&iov, &n, (size_t)w);
	}
	return 0;
}

/* The value of header name (lowercase, with ':') in the head [p, end), or NULL. */
static const char *head_value(const char *p, const char *end, const char *name)
{
	size_t nl = strlen(name);

	for (const char *line = p; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (eol == NULL)
			break;
		if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0) {
			const char *v = line + nl;
			while (*v == ' ' || *v == '\t')
				v++;
			return v;
		}
		line = eol + 1;
	}
	return NULL;
}

/*
 * Reads one answer on fd: *status, its JSON "message" into msg when not 200, *keep whether the
 * connection may carry another request. 0; -EAGAIN when the connection ended before any byte
 * (an idle one the holder closed); another -errno.
 */
static int push_read_reply(int fd, long *status, int *keep, char *msg, size_t cap)
{
	char buf[PUSH_REPLY_MAX + 1];
	size_t len = 0, head = 0;
	long clen = -1;

	*keep = 0;
	for (;;) {
		if (len == PUSH_REPLY_MAX)
			return -EBADMSG;
		ssize_t got = recv(fd, buf + len, PUSH_REPLY_MAX - len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return len == 0 && errno == ECONNRESET ? -EAGAIN : errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (got == 0)
			return len == 0 ? -EAGAIN : -ECONNRESET;
		len += (size_t)got;
		buf[len] = '\0';
		if (head == 0) {
			char *e = strstr(buf, "\r\n\r\n");
			if (e == NULL)
				continue;
			head = (size_t)(e - buf) + 4;
			if (sscanf(buf, "HTTP/1.%*d %ld", status) != 1)
				return -EBADMSG;
			const char *cl = head_value(buf, buf + head, "content-length:");
			const char *conn = head_value(buf, buf + head, "connection:");
			clen = cl ? strtol(cl, NULL, 10) : -1;
			if (clen < 0 || clen > PUSH_REPLY_MAX)
				return -EBADMSG;
			*keep = conn == NULL || strncasecmp(conn, "close", 5) != 0;
		}
		if (head > 0 && len >= head + (size_t)clen)
			break;
	}
	*keep = *keep && len == head + (size_t)clen;
	msg[0] = '\0';
	if (*status != 200) {
		json_t *j = json_loadb(buf + head, (size_t)clen, 0, NULL);
		const char *m = json_string_value(json_object_get(j, "message"));
		snprintf(msg, cap, "%s", m ? m : "");
		json_decref(j);
	}
	return 0;
}

/* The request head into out (the signature over the body's sha256 with a cluster secret); its length or -1. */
static int push_head(char *out, size_t cap, const char *host, const char *port, const char *target, const uint8_t *hdr,
		     size_t hlen, const uint8_t *payload, uint64_t slice_size)
{
	const ft_auth_t *a = ft_auth();
	char sigh[FT_REQSIG_BODY_HEX + 256] = "";
	int n;

	if (a->have_secret) {
		char body_hex[FT_SHA256_HEX];
		ft_sha256_t h;
		ft_reqsig_t sig;
		if (ft_sha256_init(&h) != 0)
			return -1;
		ft_sha256_update(&h, hdr, hlen);
		ft_sha256_update(&h, payload, (size_t)slice_size);
		ft_sha256_final(&h, body_hex);
		if (body_hex[0] == '\0' ||
		    ft_reqsig_sign_hashed(a->ctl_key, "PUT", target, body_hex, time(NULL), &sig) != 0)
			return -1;
		snprintf(sigh, sizeof(sigh), "%s: %s\r\n%s: %s\r\n%s: %s\r\n%s: %s\r\n", FT_REQSIG_HEADER_TIME,
			 sig.time, FT_REQSIG_HEADER_NONCE, sig.nonce, FT_REQSIG_HEADER_SIG, sig.sig,
			 FT_REQSIG_HEADER_BODY, body_hex);
	}
	n = snprintf(out, cap,
		     "PUT %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/octet-stream\r\n"
		     "Content-Length: %llu\r\n%s\r\n",
		     target, host, port, (unsigned long long)(hlen + slice_size), sigh);
	return n > 0 && (size_t)n < cap ? n : -1;
}

int ec_push_slice(const char *pub_url, const char *names, unsigned long long xfer, const uint8_t *hdr, size_t hlen,
		  const uint8_t *payload, uint64_t slice_size, int timeout_ms, long *status, char *msg, size_t cap)
{
	char host[FT_URL_MAX], port[16], hostport[FT_URL_MAX + 24], key[FT_URL_MAX + 32];
	char *head = NULL, *target = NULL;
	int rc = -1, hl;
	bool https;

	*status = 0;
	if (url_split(pub_url, &https, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(msg, cap, "public URL \"%s\" is not http(s)://host:port", pub_url);
		return 1;
	}
	snprintf(hostport, sizeof(hostport), "%s:%s", host, port);
	if (https && !ft_local_known(hostport, true)) {
		snprintf(msg, cap, "%s: no Unix socket to it, and its port speaks TLS", hostport);
		return 1; /* before the head: its signature hashes the whole slice */
	}
	/* the pool's key has the scheme: a plain connection never serves an https holder, nor one to its Unix socket */
	snprintf(key, sizeof(key), "%s://%s", https ? "https" : "http", hostport);
	head = malloc(PUSH_HEAD_MAX);
	target = malloc(EC_URL_MAX);
	if (head == NULL || target == NULL) {
		snprintf(msg, cap, "out of memory");
		goto out;
	}
	snprintf(target, EC_URL_MAX, "/v1/ec/slice?%s&xfer=%016llx", names, xfer);
	hl = push_head(head, PUSH_HEAD_MAX, host, port, target, hdr, hlen, payload, slice_size);
	if (hl < 0) {
		snprintf(msg, cap, "cannot build (or sign) the request");
		goto out;
	}
	/* pooled connections the holder closed while idle fail before any answer: each is dropped and the
	 * next tried, then a new one (so at most PUSH_IDLE_PER + 1 tries, unless others refill the pool) */
	for (int attempt = 0; attempt <= 2 * PUSH_IDLE_PER + 1; attempt++) {
		int fd = attempt <= 2 * PUSH_IDLE_PER ? pool_take(key) : -1, reused = fd >= 0, keep = 0, e;
		if (fd < 0 && (fd = push_connect(hostport, https, host, port, timeout_ms)) < 0) {
			rc = fd == -EPROTONOSUPPORT ? 1 : -1;
			snprintf(msg, cap, "connect to %s: %s", hostport,
				 rc == 1 ? "no Unix socket to it, and its port speaks TLS" : strerror(-fd));
			goto out;
		}
		struct iovec iov[3] = {{head, (size_t)hl}, {(void *)hdr, hlen}, {(void *)payload, (size_t)slice_size}};
		e = push_writev(fd, iov, 3);
		if (e == 0)
			e = push_read_reply(fd, status, &keep, msg, cap);
		else if ((e == -EPIPE || e == -ECONNRESET) && push_read_reply(fd, status, &keep, msg, cap) == 0)
			e = keep = 0; /* answered before reading the body (a refused signature), then closed */
		else if (e == -EPIPE || e == -ECONNRESET)
			e = -EAGAIN; /* nothing of an answer: the holder closed an idle connection */
		if (e == 0 && keep)
			pool_put(key, fd);
		else
			close(fd);
		if (e == 0) {
			rc = 0;
			goto out;
		}
		if (e != -EAGAIN || !reused) {
			snprintf(msg, cap, "PUT to %s: %s", hostport, strerror(e == -EAGAIN ? ECONNRESET : -e));
			goto out;
		}
	}
	snprintf(msg, cap, "PUT to %s: every connection was reset", hostport); /* not reached: the last try is new */
out:
	free(target);
	free(head);
	return rc;
}
