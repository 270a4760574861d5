/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader blocking one-shot HTTP exchange (startup listing, cluster map, bucket create/destroy). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "loader.h"

/* ld_resp_feed sink: appends body bytes to the ft_strbuf_t in ctx (sticky failure on OOM). */
static void collect(void *ctx, const char *p, size_t n)
{
	ft_strbuf_add(ctx, p, n);
}

/* Waits for fd to become ready for events; returns 0, -1 on timeout or error. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	int64_t left;
	int rc;

	for (;;) {
		left = (deadline_ns - ld_mono_ns()) / 1000000;
		if (left <= 0)
			return -1;
		rc = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -1;
	}
}

static int connect_host(const ld_host_t *h, int64_t deadline_ns, char *err, size_t errlen)
{
	int fd = socket(h->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (const struct sockaddr *)&h->addr, h->addrlen) != 0 && errno != EINPROGRESS) {
		snprintf(err, errlen, "connect %s: %s", h->authority, strerror(errno));
		goto fail;
	}
	if (wait_fd(fd, POLLOUT, deadline_ns) != 0) {
		snprintf(err, errlen, "connect %s: timed out", h->authority);
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
		snprintf(err, errlen, "connect %s: %s", h->authority, strerror(soerr ? soerr : errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* One exchange's connection: the socket, and its TLS state for an https host. */
typedef struct {
	int fd;
	ld_ssl_t *ssl;
	const ld_host_t *h;
} sconn_t;

/* Waits as a TLS call asked (rc: -LD_TLS_WANT_*). Returns 0, or -1 with err (timeout, or rc an error). */
static int tls_wait(const sconn_t *c, ssize_t rc, int64_t deadline_ns, char *err, size_t errlen)
{
	if (rc == -LD_TLS_CLOSED) {
		snprintf(err, errlen, "TLS with %s: the server closed the connection", c->h->authority);
		return -1;
	}
	if (rc != -LD_TLS_WANT_READ && rc != -LD_TLS_WANT_WRITE)
		return -1; /* err filled by ld_tls_* */
	if (wait_fd(c->fd, rc == -LD_TLS_WANT_READ ? POLLIN : POLLOUT, deadline_ns) != 0) {
		snprintf(err, errlen, "TLS with %s: timed out", c->h->authority);
		return -1;
	}
	return 0;
}

/* The TLS handshake, verifying the server. Returns 0, or -1 with err naming the host and the reason. */
static int tls_start(sconn_t *c, int64_t deadline_ns, char *err, size_t errlen)
{
	int rc;

	c->ssl = ld_tls_new(c->fd, c->h, err, errlen);
	if (c->ssl == NULL)
		return -1;
	while ((rc = ld_tls_handshake(c->ssl, c->h, err, errlen)) != LD_TLS_OK) {
		if (tls_wait(c, rc, deadline_ns, err, errlen) != 0)
			return -1;
	}
	return 0;
}

static int send_all(const sconn_t *c, const char *p, size_t n, int64_t deadline_ns, char *err, size_t errlen)
{
	while (n > 0) {
		ssize_t k;
		if (c->ssl != NULL) {
			k = ld_tls_write(c->ssl, p, n, c->h, err, errlen);
			if (k < 0) {
				if (tls_wait(c, k, deadline_ns, err, errlen) != 0)
					return -1;
				continue;
			}
		} else {
			k = send(c->fd, p, n, MSG_NOSIGNAL);
		}
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(c->fd, POLLOUT, deadline_ns) != 0) {
				snprintf(err, errlen, "send to %s: timed out", c->h->authority);
				return -1;
			}
		} else {
			snprintf(err, errlen, "send to %s: %s", c->h->authority, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Reads what is there: bytes, 0 at the end of the stream, -1 with err; waits (poll) as needed. */
static ssize_t recv_some(const sconn_t *c, char *buf, size_t cap, int64_t deadline_ns, char *err, size_t errlen)
{
	for (;;) {
		ssize_t n;
		if (c->ssl != NULL) {
			n = ld_tls_read(c->ssl, buf, cap, c->h, err, errlen);
			if (n >= 0)
				return n;
			if (n == -LD_TLS_CLOSED)
				return 0;
			if (tls_wait(c, n, deadline_ns, err, errlen) != 0)
				return -1;
			continue;
		}
		n = recv(c->fd, buf, cap, 0);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EINTR) {
			snprintf(err, errlen, "recv from %s: %s", c->h->authority, strerror(errno));
			return -1;
		}
		if (wait_fd(c->fd, POLLIN, deadline_ns) != 0) {
			snprintf(err, errlen, "recv from %s: timed out", c->h->authority);
			return -1;
		}
	}
}

int ld_sync_do(int host, const ld_reqspec_t *rs, const void *body, size_t body_len, ld_sync_resp_t *out, int timeout_ms,
	       char *err, size_t errlen)
{
	const ld_host_t *h = ld_host_at(host);
	int64_t deadline = ld_mono_ns() + (int64_t)timeout_ms * 1000000;
	char head[LD_REQ_MAX], rbuf[64 * 1024];
	ld_buf_t b = {head, 0, sizeof(head), false};
	ld_resp_t resp = {0};
	ft_strbuf_t g = {0};
	sconn_t c = {.fd = -1, .ssl = NULL, .h = h};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (ld_req_write(&b, rs) != 0) {
		snprintf(err, errlen, "request head does not fit (or signing failed)");
		return -1;
	}
	ld_resp_reset(&resp, strcmp(rs->method, "HEAD") == 0);
	c.fd = connect_host(h, deadline, err, errlen);
	if (c.fd < 0)
		goto out;
	if (h->tls && tls_start(&c, deadline, err, errlen) != 0)
		goto out;
	if (send_all(&c, head, b.len, deadline, err, errlen) != 0 ||
	    (body_len > 0 && send_all(&c, body, body_len, deadline, err, errlen) != 0))
		goto out;
	for (;;) {
		ssize_t n = recv_some(&c, rbuf, sizeof(rbuf), deadline, err, errlen), off = 0;
		if (n < 0)
			goto out;
		if (n == 0) {
			if (ld_resp_eof(&resp))
				break;
			snprintf(err, errlen, "%s closed the connection mid-response", h->authority);
			goto out;
		}
		while (off < n) {
			ssize_t k = ld_resp_feed(&resp, rbuf + off, (size_t)(n - off), collect, &g, err, errlen);
			if (k < 0)
				goto out;
			off += k;
			if (resp.state == LD_RESP_DONE) {
				if (resp.status >= 200)
					goto done;
				ld_resp_reset(&resp, strcmp(rs->method, "HEAD") == 0); /* 1xx: the real one follows */
			}
		}
	}
done:
	ft_strbuf_reserve(&g, 0); /* an empty body is still a NUL-terminated "" */
	if (g.failed) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	out->status = resp.status;
	out->body_len = g.len;
	out->body = ft_strbuf_take(&g);
	snprintf(out->location, sizeof(out->location), "%s", resp.location);
	rc = 0;
out:
	ft_strbuf_free(&g);
	ld_resp_free(&resp);
	if (c.ssl != NULL)
		ld_tls_close(c.ssl);
	if (c.fd >= 0)
		close(c.fd);
	return rc;
}
