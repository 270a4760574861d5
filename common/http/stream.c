/* SPDX-License-Identifier: Apache-2.0 */
/* Streamed responses from a worker thread: bytes (length or chunked), file ranges with sendfile, sockets with splice. */
#include "http/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log.h"

#define STREAM_END_RESERVE 8         /* ring bytes writes leave free, for the last chunk "0\r\n\r\n" */
#define STREAM_LOWAT (16 * 1024)     /* a blocked writer waits for this much room: fewer, larger chunks */
#define CHUNK_HEAD_MAX 20            /* "%zx\r\n" of a size_t, with room to spare */
#define STREAM_FILE_MAX (16u << 20)  /* file bytes queued but unsent before a sendfile caller waits */
#define STREAM_FILE_LOWAT (1u << 20) /* a blocked sendfile caller waits for this much room */
#define STREAM_PIPE (1024 * 1024)    /* pipe of a spliced stream: bytes queued before the worker waits */
#define STREAM_POOL_MAX 16           /* free rings kept for reuse (STREAM_BUF each: 4 MiB at most) */
#define STREAM_WARM_STEP (4u << 20)  /* file bytes a sendfile caller makes resident before queuing them */
/* data bytes of one piece a worker sends itself: what the socket does not take, framed, fits the empty ring */
#define STREAM_DIRECT_MAX (STREAM_BUF - STREAM_END_RESERVE - CHUNK_HEAD_MAX - 4)

/* ---- stream rings ---- */

/* A STREAM_BUF ring for a stream of a request of s: a reused one if any is free. Never NULL. */
unsigned char *http_stream_buf_take(ft_httpd_t *s)
{
	void *p;

	pthread_mutex_lock(&s->rmu);
	p = s->ring_free;
	if (p != NULL) {
		memcpy(&s->ring_free, p, sizeof(void *));
		s->ring_nfree--;
	}
	pthread_mutex_unlock(&s->rmu);
	if (p == NULL && (p = malloc(STREAM_BUF)) == NULL)
		http_oom();
	return p;
}

/* Gives a ring back to s's free list, or frees it when the list holds STREAM_POOL_MAX. NULL is ignored. */
void http_stream_buf_give(ft_httpd_t *s, unsigned char *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&s->rmu);
	if (s->ring_nfree < STREAM_POOL_MAX) {
		memcpy(p, &s->ring_free, sizeof(void *));
		s->ring_free = p;
		s->ring_nfree++;
		p = NULL;
	}
	pthread_mutex_unlock(&s->rmu);
	free(p);
}

/* ---- blocking streams, loop side (see DESIGN in internal.h) ---- */

/* Copies n bytes into a stream ring at pos, wrapping; returns the position after them. */
size_t http_stream_ring_put(unsigned char *ring, size_t pos, const void *src, size_t n)
{
	size_t first = STREAM_BUF - pos < n ? STREAM_BUF - pos : n;

	memcpy(ring + pos, src, first);
	memcpy(ring, (const unsigned char *)src + first, n - first);
	return (pos + n) % STREAM_BUF;
}

/* Copies n bytes out of a stream ring from pos, wrapping. */
void http_stream_ring_get(const unsigned char *ring, size_t pos, void *dst, size_t n)
{
	size_t first = STREAM_BUF - pos < n ? STREAM_BUF - pos : n;

	memcpy(dst, ring + pos, first);
	memcpy((unsigned char *)dst + first, ring, n - first);
}

void http_stream_wake_locked(conn_t *c)
{
	if (c->req.sh.waiters > 0)
		pthread_cond_broadcast(&c->scv);
}

bool ft_req_gone(ft_req_t *r)
{
	conn_t *c = r->c;
	bool gone;

	pthread_mutex_lock(&c->smu);
	gone = r->sh.gone;
	pthread_mutex_unlock(&c->smu);
	return gone;
}

/* The connection closed: stream calls fail from now on, and a worker blocked in one wakes up. */
void http_stream_gone(conn_t *c)
{
	stream_shared_t *sh = &c->req.sh;

	pthread_mutex_lock(&c->smu);
	sh->gone = true;
	if (!sh->b_eof && sh->b_err == 0)
		sh->b_err = -ECONNRESET;
	http_stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/*
 * The worker ended the stream and everything queued is sent, or the connection is gone: finishes
 * the request. Keep-alive only for a properly ended body and a fully read request body.
 */
static void stream_finish(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool ok = !c->closed && r->s_end_err == 0 && !r->s_bad && !r->sf_failed &&
		  (r->s_frame != FR_LENGTH || r->s_written == r->s_clen);

	pthread_mutex_lock(&c->smu);
	r->m_sent += r->sh.direct_sent; /* the worker's own sends (stream_put_direct) */
	r->sh.direct_sent = 0;
	pthread_mutex_unlock(&c->smu);

	if (ok) {
		if (r->body_state == BODY_WANT || r->body_state == BODY_ACTIVE) {
			/* the rest of the body must not become the next request */
			r->body_state = BODY_FAILED;
			c->must_close = true;
			c->linger = true;
		} else if (r->body_state == BODY_NONE && (r->chunked || r->content_length > 0)) {
			c->must_close = true;
			c->linger = true;
		}
		if (r->s_frame == FR_CLOSE)
			c->must_close = true;
	} else if (!c->closed && r->s_end_err == 0 && !r->sf_failed) {
		ft_warn("http: stream to %s ended %llu bytes short of its Content-Length; closing", c->peer,
			(unsigned long long)(r->s_clen - r->s_written));
	}
	http_response_done(c, ok);
}

/*
 * Sends the queued file range with sendfile(2) until it is out or the socket is full. Returns true
 * when the range is all sent, false when a POLLOUT is armed or the stream was cut (connection closed).
 */
static bool stream_send_file(conn_t *c)
{
	ft_req_t *r = &c->req;
	uint64_t f_len;
	size_t ring;
	off_t off;
	int fd;
	bool pipe;
	ssize_t k;

	for (;;) {
		pthread_mutex_lock(&c->smu);
		off = (off_t)r->sh.f_off;
		f_len = r->sh.f_len;
		ring = r->sh.s_len;
		fd = r->sf_fd; /* set before the range was queued, under smu */
		pipe = r->sf_pipe;
		pthread_mutex_unlock(&c->smu);
		/* Ring bytes only come in while no range is queued: with some there, this range is a new
		 * one that goes after them (the caller sends the ring first). */
		if (f_len == 0 || ring > 0)
			return true;
		if (c->tls != NULL)
			k = http_tls_sendfile(c, fd, &off, f_len > (1u << 30) ? (1u << 30) : (size_t)f_len, pipe);
		else if (pipe)
			k = splice(fd, NULL, c->fd, NULL, f_len > (1u << 30) ? (1u << 30) : (size_t)f_len,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		else
			k = sendfile(c->fd, fd, &off, f_len > (1u << 30) ? (1u << 30) : (size_t)f_len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			http_poll_out(c);
			return false;
		}
		if (k <= 0) {
			if (k == 0)
				ft_warn("http: stream file for %s ended %llu bytes early; closing", c->peer,
					(unsigned long long)f_len);
			else if (errno != EPIPE && errno != ECONNRESET)
				ft_warn("http: %s to %s: %s", pipe ? "splice" : "sendfile", c->peer, strerror(errno));
			r->sf_failed = true;
			http_conn_close(c); /* the worker's calls fail from now on; the body is cut */
			return false;
		}
		c->send_since = c->L->now;
		r->m_sent += (uint64_t)k;
		pthread_mutex_lock(&c->smu);
		r->sh.f_off += (uint64_t)k;
		r->sh.f_len -= (uint64_t)k;
		/* a waiting worker wants the range drained, or STREAM_FILE_LOWAT of room: not every send
		 * (a pipe holds little: its worker wakes on every send) */
		if (pipe || r->sh.f_len == 0 || STREAM_FILE_MAX - r->sh.f_len >= STREAM_FILE_LOWAT)
			http_stream_wake_locked(c);
		pthread_mutex_unlock(&c->smu);
	}
}

/*
 * Sends the stream's next piece, one send at a time: the head, then whatever the ring holds, then
 * the queued file range. With nothing left to send and the worker's end seen, finishes the request.
 */
void http_stream_send_more(conn_t *c)
{
	ft_req_t *r = &c->req;
	size_t pos = 0, n = 0;
	bool file = false;

	if (!r->st_head || c->send_inflight || c->poll_inflight)
		return; /* the completion comes back here */
	while (!c->closed) {
		if (c->send_off < r->out_len) {
			http_ring_send(c, r->out + c->send_off, r->out_len - c->send_off, false);
			c->send_since = c->L->now;
			return;
		}
		n = 0;
		file = false;
		if (r->s_ring != NULL) {
			pthread_mutex_lock(&c->smu);
			pos = r->sh.s_rd;
			n = r->sh.s_len < STREAM_BUF - pos ? r->sh.s_len : STREAM_BUF - pos;
			file = r->sh.f_len > 0;
			r->sh.s_idle = n == 0 && !file;
			pthread_mutex_unlock(&c->smu);
		}
		if (n > 0) {
			http_ring_send(c, r->s_ring + pos, n, false);
			c->send_since = c->L->now;
			return;
		}
		if (!file)
			break;
		if (!stream_send_file(c) && !c->closed)
			return; /* POLLOUT armed: http_on_poll comes back here */
				/* the range is out (or the stream cut): look again, the worker may have queued more */
	}
	if (r->resp_ready)
		stream_finish(c);
}

void http_stream_on_send(conn_t *c, int res)
{
	ft_req_t *r = &c->req;

	if (res <= 0) {
		http_conn_close(c); /* the worker's calls fail from now on */
		http_stream_send_more(c);
		return;
	}
	c->send_since = c->L->now;
	r->m_sent += (uint64_t)res;
	if (c->send_off < r->out_len) {
		c->send_off += (size_t)res;
	} else {
		pthread_mutex_lock(&c->smu);
		r->sh.s_rd = (r->sh.s_rd + (size_t)res) % STREAM_BUF;
		r->sh.s_len -= (size_t)res;
		http_stream_wake_locked(c);
		pthread_mutex_unlock(&c->smu);
	}
	http_stream_send_more(c);
}

/* ---- blocking streams, worker side (see DESIGN in internal.h) ---- */

bool http_on_loop_thread(const char *what)
{
	if (http_tls_loop == NULL)
		return false;
	ft_error("http: %s would block a loop thread; call it from a worker", what);
	return true;
}

/* Waits for the loop on the connection's condition variable; c->smu held. */
void http_stream_wait(conn_t *c)
{
	c->req.sh.waiters++;
	pthread_cond_wait(&c->scv, &c->smu);
	c->req.sh.waiters--;
}

static bool stream_is_gone(ft_req_t *r)
{
	bool gone;

	pthread_mutex_lock(&r->c->smu);
	gone = r->sh.gone;
	pthread_mutex_unlock(&r->c->smu);
	return gone;
}

int ft_resp_stream_start(ft_req_t *r, int status, const char *content_type, int64_t content_length)
{
	bool no_body;
	int head_frame;
	size_t hl;

	if (r->responded || r->s_started) {
		ft_error("http: ft_resp_stream_start called twice or after the response");
		return -EINVAL;
	}
	status = http_clamp_status(status);
	no_body = r->method == FT_HTTP_HEAD || !http_status_has_body(status);
	if (content_length >= 0) {
		head_frame = FR_LENGTH;
		r->s_frame = no_body ? FR_NONE : FR_LENGTH;
		r->s_clen = (uint64_t)content_length;
	} else if (no_body) {
		head_frame = r->s_frame = FR_NONE;
	} else {
		head_frame = r->s_frame = r->minor >= 1 ? FR_CHUNKED : FR_CLOSE;
	}
	r->s_started = true;
	r->out = http_resp_head(r, status, content_type, head_frame, r->s_clen, 0, &hl);
	r->out_len = hl;
	if (r->s_frame != FR_NONE) {
		r->s_ring = http_stream_buf_take(r->c->L->s);
	}
	http_req_notify(r, EV_STREAM);
	return stream_is_gone(r) ? -ECONNRESET : 0;
}

/* Queues one piece of at most room bytes of framing and data at pos; returns the data bytes taken. */
static size_t stream_put_piece(ft_req_t *r, size_t pos, size_t room, const unsigned char *p, size_t len, size_t *queued)
{
	char head[CHUNK_HEAD_MAX + 2];
	size_t n, hl = 0;

	if (r->s_frame == FR_CHUNKED) {
		n = len < room - CHUNK_HEAD_MAX - 4 ? len : room - CHUNK_HEAD_MAX - 4;
		hl = (size_t)snprintf(head, sizeof(head), "%s%zx\r\n", r->s_crlf_due ? "\r\n" : "", n);
		r->s_crlf_due = false;
		pos = http_stream_ring_put(r->s_ring, pos, head, hl);
		pos = http_stream_ring_put(r->s_ring, pos, p, n);
		http_stream_ring_put(r->s_ring, pos, "\r\n", 2);
		*queued = hl + n + 2;
		return n;
	}
	n = len < room ? len : room;
	http_stream_ring_put(r->s_ring, pos, p, n);
	*queued = n;
	return n;
}

/* Under c->smu, after queuing: wakes the loop thread when the stream was idle (the lock is dropped to notify). */
static void stream_kick(ft_req_t *r)
{
	conn_t *c = r->c;

	if (!r->sh.s_idle)
		return;
	r->sh.s_idle = false;
	pthread_mutex_unlock(&c->smu);
	http_req_notify(r, EV_SEND);
	pthread_mutex_lock(&c->smu);
}

/*
 * The checks every worker-thread stream call (write, sendfile, splice) makes first: a started
 * stream, not the loop thread, and no byte past a Content-Length. 0, or the -errno to return.
 */
static int stream_call_check(ft_req_t *r, const char *what, uint64_t len)
{
	if (!r->s_started || r->responded) {
		ft_error("http: %s without a started stream", what);
		return -EINVAL;
	}
	if (http_on_loop_thread(what))
		return -EDEADLK;
	if (r->s_frame == FR_LENGTH && len > r->s_clen - r->s_written) {
		ft_error("http: %s past its Content-Length of %llu", what, (unsigned long long)r->s_clen);
		r->s_bad = true;
		return -EMSGSIZE;
	}
	return 0;
}

/*
 * Under c->smu: the worker may send r's stream on the socket itself. The loop ran dry (s_idle: the
 * head is out, nothing is queued or in flight) and sends nothing more until notified; not over TLS
 * (its state belongs to the loop).
 */
static bool stream_direct_ok(const ft_req_t *r)
{
	return r->sh.s_idle && r->sh.s_len == 0 && r->sh.f_len == 0 && !r->sh.gone && r->c->tls == NULL;
}

/*
 * Sends the n bytes of data[0..cnt) (at most STREAM_DIRECT_MAX bytes, FT_STREAM_IOV_MAX pieces) as
 * one framed piece on the socket from the worker, non-blocking; stream_direct_ok held when smu was
 * dropped to call this. What the socket does not take (or all of it, on an error the loop's own
 * send then meets) goes into the empty ring, and the loop is notified as for a write. Returns with
 * smu held.
 */
static void stream_put_direct(ft_req_t *r, const struct iovec *data, int cnt, size_t n)
{
	conn_t *c = r->c;
	char head[CHUNK_HEAD_MAX + 2];
	struct iovec iov[FT_STREAM_IOV_MAX + 2];
	struct msghdr mh = {.msg_iov = iov};
	size_t total = 0, skip, pos = r->sh.s_rd; /* the ring is empty and the loop idle: only this thread moves it */
	ssize_t k;

	if (r->s_frame == FR_CHUNKED) {
		size_t hl = (size_t)snprintf(head, sizeof(head), "%s%zx\r\n", r->s_crlf_due ? "\r\n" : "", n);
		r->s_crlf_due = false;
		iov[mh.msg_iovlen++] = (struct iovec){.iov_base = head, .iov_len = hl};
	}
	for (int i = 0; i < cnt; i++)
		if (data[i].iov_len > 0)
			iov[mh.msg_iovlen++] = data[i];
	if (r->s_frame == FR_CHUNKED)
		iov[mh.msg_iovlen++] = (struct iovec){.iov_base = "\r\n", .iov_len = 2};
	for (size_t i = 0; i < mh.msg_iovlen; i++)
		total += iov[i].iov_len;
	do
		k = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		k = 0; /* EAGAIN; or the socket failed, which the loop's send finds and handles */
	skip = (size_t)k;
	for (size_t i = 0; i < mh.msg_iovlen; i++) {
		size_t part = iov[i].iov_len;
		if (skip >= part) {
			skip -= part;
			continue;
		}
		pos = http_stream_ring_put(r->s_ring, pos, (const char *)iov[i].iov_base + skip, part - skip);
		skip = 0;
	}
	pthread_mutex_lock(&c->smu);
	r->sh.direct_sent += (uint64_t)k;
	if ((size_t)k < total) {
		r->sh.s_len += total - (size_t)k;
		stream_kick(r);
	}
}

int ft_resp_stream_write(ft_req_t *r, const void *buf, size_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	const unsigned char *p = buf;
	size_t need, room, pos, n, queued;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_write", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE)
		len = 0; /* HEAD, 204, 304: headers only */
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		if (stream_direct_ok(r)) {
			n = len < STREAM_DIRECT_MAX ? len : STREAM_DIRECT_MAX;
			pthread_mutex_unlock(&c->smu);
			stream_put_direct(r, &(struct iovec){.iov_base = (void *)p, .iov_len = n}, 1, n);
			p += n;
			len -= n;
			r->s_written += n;
			continue;
		}
		need = (len < STREAM_LOWAT ? len : STREAM_LOWAT) + (r->s_frame == FR_CHUNKED ? CHUNK_HEAD_MAX + 4 : 0);
		room = STREAM_BUF - STREAM_END_RESERVE - sh->s_len;
		if (room < need || sh->f_len > 0) { /* ring bytes go after a queued file range only */
			http_stream_wait(c);
			continue;
		}
		pos = (sh->s_rd + sh->s_len) % STREAM_BUF;
		pthread_mutex_unlock(&c->smu);
		n = stream_put_piece(r, pos, room, p, len, &queued); /* free space: only this thread writes */
		p += n;
		len -= n;
		r->s_written += n;
		pthread_mutex_lock(&c->smu);
		sh->s_len += queued;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

int ft_resp_stream_writev(ft_req_t *r, const struct iovec *iov, int cnt)
{
	conn_t *c = r->c;
	size_t total = 0;
	int rc;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	rc = stream_call_check(r, "ft_resp_stream_writev", total);
	if (rc != 0)
		return rc;
	if (r->s_frame != FR_NONE && total > 0 && total <= STREAM_DIRECT_MAX && cnt <= FT_STREAM_IOV_MAX) {
		pthread_mutex_lock(&c->smu);
		if (stream_direct_ok(r)) {
			pthread_mutex_unlock(&c->smu);
			stream_put_direct(r, iov, cnt, total);
			r->s_written += total;
			rc = r->sh.gone ? -ECONNRESET : 0;
			pthread_mutex_unlock(&c->smu);
			return rc;
		}
		pthread_mutex_unlock(&c->smu);
	}
	for (int i = 0; i < cnt && rc == 0; i++)
		rc = ft_resp_stream_write(r, iov[i].iov_base, iov[i].iov_len);
	return rc;
}

/* Makes r's own dup of fd the stream's file, once no range of the previous one is queued. 0 or -errno. */
static int stream_file_set(ft_req_t *r, int fd)
{
	conn_t *c = r->c;
	int dup_fd;

	if (r->sf_fd >= 0 && !r->sf_pipe && r->sf_src == fd)
		return 0;
	pthread_mutex_lock(&c->smu);
	while (r->sh.f_len > 0 && !r->sh.gone)
		http_stream_wait(c);
	pthread_mutex_unlock(&c->smu);
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return -errno;
	pthread_mutex_lock(&c->smu); /* the loop reads sf_fd under smu while a range is queued */
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	r->sf_fd = dup_fd;
	r->sf_src = fd;
	r->sf_pipe = false;
	pthread_mutex_unlock(&c->smu);
	if (r->sp_wr >= 0) {
		close(r->sp_wr);
		r->sp_wr = -1;
	}
	return 0;
}

/* Makes the request's splice pipe the stream's source, once no file range is queued. 0 or -errno. */
static int stream_pipe_set(ft_req_t *r)
{
	conn_t *c = r->c;
	int p[2], sz;

	if (r->sf_pipe)
		return 0;
	pthread_mutex_lock(&c->smu);
	while (r->sh.f_len > 0 && !r->sh.gone)
		http_stream_wait(c);
	pthread_mutex_unlock(&c->smu);
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	/* the loop's end never blocks (a full socket is waited for with POLLOUT); a smaller pipe than
	 * asked for (the per-user pipe limit) only means smaller steps */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	sz = fcntl(p[1], F_SETPIPE_SZ, STREAM_PIPE);
	if (sz <= 0)
		sz = fcntl(p[1], F_GETPIPE_SZ);
	r->sp_cap = sz > 0 ? (size_t)sz : 65536;
	if (r->sp_cap > STREAM_PIPE)
		r->sp_cap = STREAM_PIPE;
	pthread_mutex_lock(&c->smu);
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	r->sf_fd = p[0];
	r->sf_src = -1;
	r->sf_pipe = true;
	pthread_mutex_unlock(&c->smu);
	r->sp_wr = p[1];
	return 0;
}

/* Chunked framing: queues the head of a chunk of n file bytes (and the previous chunk's CRLF); smu held. */
static void stream_file_chunk_head(ft_req_t *r, uint64_t n)
{
	char head[CHUNK_HEAD_MAX + 2];
	size_t hl, pos;

	hl = (size_t)snprintf(head, sizeof(head), "%s%llx\r\n", r->s_crlf_due ? "\r\n" : "", (unsigned long long)n);
	pos = (r->sh.s_rd + r->sh.s_len) % STREAM_BUF;
	http_stream_ring_put(r->s_ring, pos, head,
			     hl); /* free space: only this thread writes (a few bytes, under smu) */
	r->sh.s_len += hl;
	r->s_crlf_due = true;
}

int ft_resp_stream_sendfile(ft_req_t *r, int fd, uint64_t off, uint64_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	uint64_t room, n;
	bool chunked = r->s_frame == FR_CHUNKED;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_sendfile", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE || len == 0)
		return stream_is_gone(r) ? -ECONNRESET : 0; /* HEAD, 204, 304: headers only */
	rc = stream_file_set(r, fd);
	if (rc != 0) {
		r->s_bad = true; /* bytes the caller counted on are missing: the stream must not end well */
		return rc;
	}
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		room = STREAM_FILE_MAX - sh->f_len;
		if (sh->f_len > 0 && (chunked || sh->f_off + sh->f_len != off)) {
			http_stream_wait(c); /* not contiguous (or a chunk head must go first): the range drains */
			continue;
		}
		if (room < (len < STREAM_FILE_LOWAT ? len : STREAM_FILE_LOWAT) ||
		    (chunked && STREAM_BUF - STREAM_END_RESERVE - sh->s_len < CHUNK_HEAD_MAX + 4)) {
			http_stream_wait(c);
			continue;
		}
		n = len < room ? len : room;
		if (n > STREAM_WARM_STEP)
			n = STREAM_WARM_STEP;
		/* the disk is waited for here, not by the loop's sendfile; meanwhile the loop only
		 * drains what is queued, so the room (file and ring) and the contiguity checked above hold */
		pthread_mutex_unlock(&c->smu);
		http_file_make_resident(fd, off, n);
		pthread_mutex_lock(&c->smu);
		if (sh->gone)
			break;
		if (chunked)
			stream_file_chunk_head(r, n);
		if (sh->f_len == 0)
			sh->f_off = off;
		sh->f_len += n;
		off += n;
		len -= n;
		r->s_written += n;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

/*
 * For a Unix socket fd: waits until it has input (or its end), up to its SO_RCVTIMEO (none set: for
 * ever); false when that time ran out first, and at once for any other fd (its splice waited).
 */
static bool source_wait(int fd)
{
	struct timeval tv = {0};
	socklen_t tl = sizeof(tv);
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int ms = -1, k, domain = 0;
	socklen_t dl = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) != 0 || domain != AF_UNIX)
		return false;
	if (getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tl) == 0 && (tv.tv_sec > 0 || tv.tv_usec > 0))
		ms = tv.tv_sec >= INT_MAX / 1000 - 1 ? INT_MAX : (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
	do
		k = poll(&p, 1, ms);
	while (k < 0 && errno == EINTR);
	return k > 0;
}

/*
 * One splice(2) of up to n bytes from fd into the stream's pipe; the count, -EAGAIN when the pipe
 * is full, or -errno as ft_resp_stream_splice. The pipe side never blocks (SPLICE_F_NONBLOCK): a
 * socket hands over partial pages, so the pipe's slots can fill before its byte size, and a worker
 * blocked on them would never wake once the client left (the loop stops draining the pipe, and only
 * the worker's end of the stream releases it). The source waits up to its SO_RCVTIMEO: a TCP
 * socket in the splice itself; a Unix one takes SPLICE_F_NONBLOCK for itself too, so with the pipe
 * empty (a full pipe is not the reason) it is polled for input and spliced again.
 */
static ssize_t stream_splice_in(ft_req_t *r, int fd, size_t n, bool pipe_empty)
{
	ssize_t k;

	for (;;) {
		k = splice(fd, NULL, r->sp_wr, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (k > 0)
			return k;
		if (k == 0)
			return -EPIPE; /* the source ended before len bytes */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -EPIPE; /* the source failed */
		if (!pipe_empty)
			return -EAGAIN;
		if (!source_wait(fd))
			return -ETIMEDOUT;
	}
}

int ft_resp_stream_splice(ft_req_t *r, int fd, uint64_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	ssize_t k;
	size_t room;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_splice", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE || len == 0)
		return stream_is_gone(r) ? -ECONNRESET : 0; /* HEAD, 204, 304: headers only */
	if (r->s_frame != FR_LENGTH) {
		ft_error("http: ft_resp_stream_splice needs a stream with a Content-Length");
		r->s_bad = true;
		return -EINVAL;
	}
	rc = stream_pipe_set(r);
	if (rc != 0) {
		r->s_bad = true;
		return rc;
	}
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		room = r->sp_cap - (size_t)sh->f_len;
		if (sh->f_len >= r->sp_cap || (sh->f_len > 0 && room < STREAM_LOWAT && room < len)) {
			http_stream_wait(c);
			continue;
		}
		uint64_t queued = sh->f_len;
		pthread_mutex_unlock(&c->smu);
		k = stream_splice_in(r, fd, len < room ? (size_t)len : room,
				     queued == 0); /* blocks on fd, not on the pipe */
		pthread_mutex_lock(&c->smu);
		if (k == -EAGAIN) { /* the pipe's slots are full: once the loop sent some of it, again */
			while (sh->f_len >= queued && !sh->gone)
				http_stream_wait(c);
			continue;
		}
		if (k < 0) {
			r->s_bad = true; /* the body is cut: the stream must not end well */
			pthread_mutex_unlock(&c->smu);
			return (int)k;
		}
		sh->f_len += (uint64_t)k;
		len -= (uint64_t)k;
		r->s_written += (uint64_t)k;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

void ft_resp_stream_end(ft_req_t *r, int err)
{
	conn_t *c = r->c;
	size_t pos;

	if (r->responded) {
		ft_error("http: ft_resp_stream_end after the response");
		return;
	}
	if (!r->s_started) {
		ft_error("http: ft_resp_stream_end without ft_resp_stream_start");
		ft_resp_close(r);
		ft_resp_error(r, 500, "response stream ended before it started");
		return;
	}
	r->s_end_err = err;
	if (err == 0 && r->s_frame == FR_CHUNKED) {
		const char *last = r->s_crlf_due ? "\r\n0\r\n\r\n" : "0\r\n\r\n";

		pthread_mutex_lock(&c->smu);
		while (r->sh.f_len > 0 && !r->sh.gone && http_tls_loop == NULL)
			http_stream_wait(c); /* the last chunk goes after the queued file range */
		pos = (r->sh.s_rd + r->sh.s_len) % STREAM_BUF;
		pthread_mutex_unlock(&c->smu);
		http_stream_ring_put(r->s_ring, pos, last, strlen(last)); /* writes leave STREAM_END_RESERVE free */
		pthread_mutex_lock(&c->smu);
		r->sh.s_len += strlen(last);
		pthread_mutex_unlock(&c->smu);
	}
	http_resp_commit(r); /* EV_RESPONDED: the loop sends what is left, then finishes r */
}
