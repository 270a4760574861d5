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

static int send_all(int fd, const char *p, size_t n, int64_t deadline_ns)
{
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, deadline_ns) != 0)
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
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
	int fd = -1, rc = -1;

	memset(out, 0, sizeof(*out));
	if (ld_req_write(&b, rs) != 0) {
		snprintf(err, errlen, "request head does not fit (or signing failed)");
		return -1;
	}
	ld_resp_reset(&resp, strcmp(rs->method, "HEAD") == 0);
	fd = connect_host(h, deadline, err, errlen);
	if (fd < 0)
		goto out;
	if (send_all(fd, head, b.len, deadline) != 0 || (body_len > 0 && send_all(fd, body, body_len, deadline) != 0)) {
		snprintf(err, errlen, "send to %s: %s", h->authority, errno ? strerror(errno) : "timed out");
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, rbuf, sizeof(rbuf), 0), off = 0;
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLIN, deadline) != 0) {
				snprintf(err, errlen, "%s %s%s: timed out", rs->method, h->authority, rs->path);
				goto out;
			}
			continue;
		}
		if (n < 0) {
			snprintf(err, errlen, "recv from %s: %s", h->authority, strerror(errno));
			goto out;
		}
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
	if (fd >= 0)
		close(fd);
	return rc;
}
