/* SPDX-License-Identifier: Apache-2.0 */
/* Connections: their life cycle and references, reading and parsing request heads, keep-alive, request accessors. */
#include "http/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"

#define BUF_INITIAL (16 * 1024)
#define LINGER_MS 2000

static void head_process(conn_t *c);

/* Zeroes the request for the next use; the arena must have been reset. */
static void req_clear(ft_req_t *r, conn_t *c)
{
	memset(r, 0, offsetof(ft_req_t, arena));
	r->c = c;
	r->file_fd = r->fp_rd = r->fp_wr = -1;
	r->sf_fd = r->sf_src = r->sp_wr = -1;
	r->method_name = "";
	r->query = "";
	r->q_count = -1;
}

/* ---- connections ---- */

static void conn_free(conn_t *c)
{
	loop_t *L = c->L;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		L->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	L->nconns--;
	ft_metric_add(FT_M_HTTP_OPEN_CONNECTIONS, 0, 0, (uint64_t)-1);
	http_tls_conn_free(c);
	close(c->fd);
	http_arena_reset(&c->req.arena);
	pthread_cond_destroy(&c->scv);
	pthread_mutex_destroy(&c->smu);
	free(c->buf);
	free(c);
}

void http_conn_unref(conn_t *c)
{
	if (--c->refs == 0)
		conn_free(c);
}

/*
 * Shuts the connection down: pending operations complete (with 0 or an error), nothing new is
 * started, the fd is closed once the last reference goes.
 */
void http_conn_close(conn_t *c)
{
	struct io_uring_sqe *sqe;

	if (c->closed)
		return;
	http_tls_close_notify(c);
	c->closed = true;
	shutdown(c->fd, SHUT_RDWR);
	if (c->recv_inflight || c->send_inflight || c->poll_inflight) {
		sqe = http_get_sqe(c->L);
		io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, 0);
	}
	http_file_sock_cancel(c);
	http_stream_gone(c);
	http_conn_unref(c);
}

/* Queues c to be looked at from the top of the loop (body start, local response). */
void http_conn_kick(conn_t *c)
{
	loop_t *L = c->L;

	if (c->kicked)
		return;
	c->kicked = true;
	c->refs++;
	c->kick_next = NULL;
	if (L->kick_tail != NULL)
		L->kick_tail->kick_next = c;
	else
		L->kick_head = c;
	L->kick_tail = c;
}

void http_recv_arm(conn_t *c)
{
	struct io_uring_sqe *sqe;

	if (c->recv_inflight || c->closed)
		return;
	if (c->start == c->end) {
		c->start = c->end = 0;
	} else if (c->end == c->cap && c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == c->cap)
		return; /* callers make room first */
	if (c->tls != NULL) {
		http_tls_recv_arm(c);
	} else {
		sqe = http_get_sqe(c->L);
		io_uring_prep_recv(sqe, c->fd, c->buf + c->end, c->cap - c->end, 0);
		io_uring_sqe_set_data64(sqe, http_ud(c, TAG_RECV));
	}
	c->recv_inflight = true;
	c->refs++;
}

void http_watch_close(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool body_left = r->body_state == BODY_NONE ? r->chunked || r->content_length > 0 : r->body_state != BODY_DONE;

	/* EV_RESPONDED: answered on the loop thread, its kick not run yet */
	if (c->phase != PH_HANDLER || r->resp_ready || (r->ev & EV_RESPONDED) || body_left)
		return;
	/* pipelined bytes wait in the buffer; the end of input closes (http_on_recv). Over TLS the same: its state
	 * is the loop's alone (workers never send on a TLS connection), and a close_notify reads as the end */
	http_recv_arm(c);
}

void http_ring_send(conn_t *c, const void *p, size_t n, bool interim)
{
	struct io_uring_sqe *sqe;

	c->send_inflight = true;
	c->interim = interim;
	c->refs++;
	if (c->tls != NULL) {
		http_tls_send(c, p, n);
		return;
	}
	sqe = http_get_sqe(c->L);
	io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, http_ud(c, TAG_SEND));
}

void http_poll_out(conn_t *c)
{
	struct io_uring_sqe *sqe = http_get_sqe(c->L);

	io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
	io_uring_sqe_set_data64(sqe, http_ud(c, TAG_POLL));
	c->poll_inflight = true;
	c->refs++;
}

/* Grows the read buffer to at least want bytes (moving live bytes to the front). */
void http_buf_grow(conn_t *c, size_t want)
{
	char *nb;

	if (c->cap >= want)
		return;
	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	nb = realloc(c->buf, want);
	if (nb == NULL)
		http_oom();
	c->buf = nb;
	c->cap = want;
}

/* ---- end of a request ---- */

/* Runs the on_done hooks, releases the request's memory and fd, drops the request reference. */
void http_finish_request(conn_t *c)
{
	ft_req_t *r = &c->req;
	hook_t *h;

	http_count_request(r);
	for (h = r->hooks; h != NULL; h = h->next)
		h->fn(h->arg);
	http_file_sock_done(c);
	if (r->file_fd >= 0 && !r->file_borrowed)
		close(r->file_fd);
	if (r->fp_rd >= 0) {
		close(r->fp_rd);
		close(r->fp_wr);
	}
	http_file_sndbuf_restore(c);
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	if (r->sp_wr >= 0)
		close(r->sp_wr);
	free(r->all_buf);
	http_stream_buf_give(c->L->s, r->b_ring);
	http_stream_buf_give(c->L->s, r->s_ring);
	http_arena_reset(&r->arena);
	req_clear(r, c);
	c->req_gen++; /* a splice into a file body's pipe still in flight no longer belongs to the request */
	c->linger = false;
	http_conn_unref(c);
}

static void close_after_response(conn_t *c, bool linger)
{
	loop_t *L = c->L;

	if (c->closed)
		return;
	/*
	 * Unread input at close(2) turns into a reset, which drops what the socket has not sent yet:
	 * the end of this very answer. Pipelined input is such input, and so is, at a stop, whatever a
	 * client that did not ask for the close has sent since (its next request). Lingering reads it
	 * away until the client closes too (the stop's drain bounds it, on_timer).
	 */
	if (c->start < c->end || L->stopping)
		linger = true;
	if (!linger || c->peer_eof) {
		http_conn_close(c);
		return;
	}
	c->phase = PH_LINGER;
	http_tls_close_notify(c);
	shutdown(c->fd, SHUT_WR);
	c->linger_until = L->now + LINGER_MS;
	if (!c->recv_inflight) /* one posted while the handler worked reads at c->end (discarded either way) */
		c->start = c->end = 0;
	http_recv_arm(c);
}

/* The response is sent (ok) or failed; the caller holds a reference to c. */
void http_response_done(conn_t *c, bool ok)
{
	ft_req_t *r = &c->req;
	bool keep = ok && r->keep_alive && !c->must_close && !c->closed && !c->L->stopping;
	bool linger = c->linger;

	if (!ok)
		ft_metric_error(FT_ME_CLIENT_GONE);

	http_finish_request(c);
	if (!ok) {
		http_conn_close(c);
		return;
	}
	if (!keep) {
		close_after_response(c, linger);
		return;
	}
	c->phase = PH_HEAD;
	c->head_started = false;
	c->scanned = 0;
	c->idle_since = c->L->now;
	head_process(c);
}

/* Acts on the events the request's holder handed over (see DESIGN in internal.h), from the top of the loop. */
void http_conn_process(conn_t *c)
{
	ft_req_t *r = &c->req;
	unsigned ev = r->ev;

	if (c->phase != PH_HANDLER)
		return;
	r->ev = 0;
	if (ev & EV_RESPONDED)
		r->resp_ready = true;
	if ((ev & EV_BODY) && r->body_state == BODY_NONE) {
		r->body_state = BODY_WANT;
		if (!r->resp_ready)
			http_body_start(c); /* before a stream head, so "100 Continue" can go first */
	} else if ((ev & EV_FEED) && r->body_state == BODY_ACTIVE && !c->recv_inflight) {
		c->body_since = c->L->now; /* the client was not late while we did not read */
		http_body_feed(c);
	}
	if ((ev & EV_STREAM) && !r->st_head) {
		r->st_head = true;
		c->send_off = 0;
		c->send_since = c->L->now;
	}
	if (r->resp_ready)
		http_on_responded(c);
	else if (ev & (EV_STREAM | EV_SEND))
		http_stream_send_more(c);
}

/* ---- request head ---- */

static ft_method_t method_of(const char *m, size_t n)
{
	static const struct {
		const char *name;
		ft_method_t m;
	} tab[] = {
		{"GET", FT_HTTP_GET},   {"HEAD", FT_HTTP_HEAD},     {"PUT", FT_HTTP_PUT},
		{"POST", FT_HTTP_POST}, {"DELETE", FT_HTTP_DELETE}, {"OPTIONS", FT_HTTP_OPTIONS},
	};
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strlen(tab[i].name) == n && memcmp(tab[i].name, m, n) == 0)
			return tab[i].m;
	return FT_HTTP_OTHER;
}

/* Splits r->target into the decoded path and the raw query. Returns -1 for a bad target. */
static int split_target(ft_req_t *r)
{
	const char *t = r->target, *p = t, *q;
	size_t plen;
	long n;

	if (strcmp(t, "*") == 0) {
		r->path = http_arena_strndup(&r->arena, "*", 1);
		r->path_len = 1;
		return r->method == FT_HTTP_OPTIONS ? 0 : -1;
	}
	if (t[0] != '/') {
		/* absolute-form: scheme://authority[/path][?query] */
		if (strncasecmp(t, "http://", 7) == 0)
			p = t + 7;
		else if (strncasecmp(t, "https://", 8) == 0)
			p = t + 8;
		else
			return -1;
		p += strcspn(p, "/?");
	}
	q = strchr(p, '?');
	plen = q != NULL ? (size_t)(q - p) : strlen(p);
	r->query = q != NULL ? q + 1 : "";
	if (plen == 0) {
		r->path = http_arena_strndup(&r->arena, "/", 1);
		r->path_len = 1;
		return 0;
	}
	r->path = http_arena_alloc(&r->arena, plen + 1);
	n = ft_pct_decode(p, plen, r->path, FT_PCT_STRICT);
	if (n < 0)
		return -1;
	r->path_len = (size_t)n;
	return 0;
}

/* Builds the request from a parsed head and calls the handler. */
static void request_begin(conn_t *c, const ft_hp_head_t *h, const ft_hp_header_t *hdrs)
{
	ft_httpd_t *s = c->L->s;
	ft_req_t *r = &c->req;
	ft_hp_info_t info;
	int st;
	size_t i;

	c->phase = PH_HANDLER;
	c->refs++; /* the request's reference, dropped by http_finish_request */
	c->head_started = false;
	r->m_start_ns = http_now_ns();
	r->method = method_of(h->method, h->method_len);
	r->method_name = http_arena_strndup(&r->arena, h->method, h->method_len);
	r->target = http_arena_strndup(&r->arena, h->target, h->target_len);
	r->minor = h->version_minor;
	r->nhdrs = (int)h->nheaders;
	r->hnames = http_arena_alloc(&r->arena, (h->nheaders + 1) * sizeof(char *));
	r->hvalues = http_arena_alloc(&r->arena, (h->nheaders + 1) * sizeof(char *));
	for (i = 0; i < h->nheaders; i++) {
		r->hnames[i] = http_arena_strndup(&r->arena, hdrs[i].name, hdrs[i].name_len);
		r->hvalues[i] = http_arena_strndup(&r->arena, hdrs[i].value, hdrs[i].value_len);
	}
	c->start += h->head_len;
	c->scanned = 0;
	st = ft_hp_analyze(h, hdrs, &info);
	if (st != 0) {
		http_server_error(c, st, st == 501 ? "unsupported transfer coding" : "bad request framing");
		return;
	}
	r->content_length = info.content_length;
	r->chunked = info.chunked;
	r->expect_continue = info.expect_continue;
	r->client_keep_alive = info.keep_alive;
	/*
	 * "Expect: 100-continue" with an empty body: nothing will be read, so http_body_start never sends the
	 * interim response; send it now, before anything the handler answers. Some clients (botocore
	 * 1.29) otherwise take the final status for the answer to their expectation and misread the
	 * next response on the connection.
	 */
	if (r->expect_continue && r->minor >= 1 && !r->chunked && r->content_length == 0)
		http_send_continue(c);
	if (split_target(r) != 0) {
		/* the framing is known, but keep it simple: bad targets close like other 400s */
		http_server_error(c, 400, "invalid request target");
		return;
	}
	c->refs++; /* the handler may answer and the connection end meanwhile */
	s->o.handler(r, s->o.ctx);
	if (!c->closed)
		http_watch_close(c);
	http_conn_unref(c);
}

static void head_process(conn_t *c)
{
	loop_t *L = c->L;
	ft_httpd_t *s = L->s;
	size_t avail = c->end - c->start, limit = (size_t)s->o.max_header_bytes;
	ft_hp_result_t rc = FT_HP_AGAIN;
	ft_hp_head_t h;

	if (c->closed)
		return;
	if (avail == 0) {
		if (!c->recv_inflight) /* one armed while the handler worked reads at c->end */
			c->start = c->end = 0;
		c->scanned = 0;
		http_recv_arm(c);
		return;
	}
	if (!c->head_started) {
		c->head_started = true;
		c->head_since = L->now;
	}
	/* parse only when a new line end arrived (a byte-at-a-time client costs no re-parsing) */
	if (avail > limit || memchr(c->buf + c->start + c->scanned, '\n', avail - c->scanned) != NULL)
		rc = ft_hp_parse_head(c->buf + c->start, avail, limit, L->hdrs, (size_t)s->o.max_headers, &h);
	switch (rc) {
	case FT_HP_DONE:
		request_begin(c, &h, L->hdrs);
		return;
	case FT_HP_AGAIN:
		c->scanned = avail;
		if (c->end == c->cap) {
			if (c->start > 0) {
				memmove(c->buf, c->buf + c->start, avail);
				c->start = 0;
				c->end = avail;
			} else {
				http_buf_grow(c, c->cap * 2 < limit + 1 ? c->cap * 2 : limit + 1);
			}
		}
		http_recv_arm(c);
		return;
	case FT_HP_TOO_LARGE:
		http_server_error(c, 431, "request head too large");
		return;
	case FT_HP_VERSION:
		http_server_error(c, 505, "HTTP version not supported");
		return;
	default:
		http_server_error(c, 400, "malformed request head");
		return;
	}
}

/* The server answers on its own (parse errors, timeouts, 413) and closes after. */
void http_server_error(conn_t *c, int status, const char *msg)
{
	ft_req_t *r = &c->req;
	ft_httpd_t *s = c->L->s;
	const char *target = NULL, *t;
	size_t tl;

	if (c->phase != PH_HANDLER) {
		/* no request yet: its target, if the request line in the buffer reads */
		if (s->o.server_error != NULL && ft_hp_peek_target(c->buf + c->start, c->end - c->start, &t, &tl))
			target = http_arena_strndup(&r->arena, t, tl);
		c->phase = PH_HANDLER;
		c->refs++;
		c->head_started = false;
	} else {
		target = r->target;
	}
	c->must_close = true;
	c->linger = true;
	r->close_req = true;
	if (r->m_start_ns == 0)
		r->m_start_ns = http_now_ns();
	ft_metric_error(FT_ME_FRAMING);
	if (s->o.server_error != NULL)
		s->o.server_error(r, target, http_clamp_status(status), msg, s->o.ctx);
	else
		ft_resp_error(r, status, "%s", msg);
}

void http_on_recv(conn_t *c, int res)
{
	ft_req_t *r = &c->req;

	c->recv_inflight = false;
	if (res <= 0) {
		c->peer_eof = true;
		/* an answer under way (a stream too: its client may have read it whole before the loop saw its end) */
		if (c->phase == PH_SENDING || (c->phase == PH_HANDLER && r->st_head && r->body_state != BODY_ACTIVE)) {
			c->must_close = true;
			return;
		}
		if (c->phase == PH_HANDLER && r->body_state == BODY_ACTIVE)
			http_body_end(c, -ECONNRESET);
		http_conn_close(c);
		return;
	}
	c->end += (size_t)res;
	switch (c->phase) {
	case PH_HEAD:
		c->idle_since = c->L->now;
		head_process(c);
		break;
	case PH_HANDLER:
		if (r->body_state == BODY_ACTIVE) {
			c->body_since = c->L->now;
			http_body_feed(c);
		} else if (c->must_close) {
			c->start = c->end = 0;
		}
		break;
	case PH_LINGER:
		c->start = c->end = 0;
		http_recv_arm(c);
		break;
	default:
		if (c->must_close)
			c->start = c->end = 0;
		break;
	}
}

static void format_peer(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	snprintf(out, outlen, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(out, outlen, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(out, outlen, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else if (ss.ss_family == AF_UNIX) {
		snprintf(out, outlen, "unix");
	}
}

void http_conn_new(loop_t *L, int fd, bool on_unix)
{
	conn_t *c = calloc(1, sizeof(*c));
	int one = 1;

	if (c == NULL || (c->buf = malloc(BUF_INITIAL)) == NULL) {
		free(c);
		close(fd);
		ft_warn("http: no memory for a connection");
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_mutex_init(&c->smu, NULL);
	pthread_cond_init(&c->scv, NULL);
	c->L = L;
	c->fd = fd;
	c->cap = BUF_INITIAL;
	c->refs = 1; /* open */
	c->phase = PH_HEAD;
	c->idle_since = L->now;
	format_peer(fd, c->peer, sizeof(c->peer));
	if (L->s->tls_ctx != NULL && !on_unix && http_tls_conn_new(c) != 0) {
		ft_warn("http: no memory for a TLS connection");
		pthread_cond_destroy(&c->scv);
		pthread_mutex_destroy(&c->smu);
		free(c->buf);
		free(c);
		close(fd);
		return;
	}
	req_clear(&c->req, c);
	c->next = L->conns;
	if (L->conns != NULL)
		L->conns->prev = c;
	L->conns = c;
	L->nconns++;
	ft_metric_add(FT_M_HTTP_CONNECTIONS, on_unix ? FT_M_LISTENER_UNIX : FT_M_LISTENER_TCP, 0, 1);
	ft_metric_add(FT_M_HTTP_OPEN_CONNECTIONS, 0, 0, 1);
	http_recv_arm(c);
}

/* ---- request accessors ---- */

ft_method_t ft_req_method(const ft_req_t *r)
{
	return r->method;
}

const char *ft_req_method_name(const ft_req_t *r)
{
	return r->method_name;
}

const char *ft_req_path(const ft_req_t *r, size_t *len)
{
	if (len != NULL)
		*len = r->path_len;
	return r->path != NULL ? r->path : "";
}

const char *ft_req_target(const ft_req_t *r)
{
	return r->target != NULL ? r->target : "";
}

const char *ft_req_query_string(const ft_req_t *r)
{
	return r->query;
}

/*
 * Decodes r's query once into (name, value) pairs in the arena ('+' is a space), so that the many
 * lookups of one request (the S3 router asks for about twenty subresource names) scan no text and
 * allocate nothing. A piece without '=' has the value "". q_count stays 0 when the arena is full.
 */
static void query_decode(ft_req_t *r)
{
	const char *p = r->query;
	int n = 1;

	r->q_count = 0;
	if (*p == '\0')
		return;
	for (const char *s = p; (s = strchr(s, '&')) != NULL; s++)
		n++;
	r->q_names = http_arena_alloc(&r->arena, (size_t)n * sizeof(*r->q_names));
	r->q_values = http_arena_alloc(&r->arena, (size_t)n * sizeof(*r->q_values));
	r->q_name_lens = http_arena_alloc(&r->arena, (size_t)n * sizeof(*r->q_name_lens));
	if (r->q_names == NULL || r->q_values == NULL || r->q_name_lens == NULL)
		return;
	while (*p != '\0') {
		const char *amp = strchr(p, '&');
		size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		size_t kn = eq != NULL ? (size_t)(eq - p) : len;
		char *name = http_arena_alloc(&r->arena, kn + 1);
		char *val = eq != NULL ? http_arena_alloc(&r->arena, len - kn) : (char *)"";
		long got;

		if (name == NULL || val == NULL)
			return;
		got = ft_pct_decode(p, kn, name, FT_PCT_PLUS_SPACE);
		if (eq != NULL)
			ft_pct_decode(eq + 1, len - kn - 1, val, FT_PCT_PLUS_SPACE);
		r->q_names[r->q_count] = name;
		r->q_name_lens[r->q_count] = (size_t)got;
		r->q_values[r->q_count] = val;
		r->q_count++;
		p += len;
		if (*p == '&')
			p++;
	}
}

const char *ft_req_query(const ft_req_t *r, const char *key)
{
	ft_req_t *w = (ft_req_t *)r; /* decoding once allocates in the arena */
	size_t klen = strlen(key);

	if (w->q_count < 0)
		query_decode(w);
	for (int i = 0; i < w->q_count; i++)
		if (w->q_name_lens[i] == klen && memcmp(w->q_names[i], key, klen) == 0)
			return w->q_values[i];
	return NULL;
}

const char *ft_req_header(const ft_req_t *r, const char *name)
{
	int i;

	for (i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hnames[i], name) == 0)
			return r->hvalues[i];
	return NULL;
}

int ft_req_header_count(const ft_req_t *r)
{
	return r->nhdrs;
}

void ft_req_header_at(const ft_req_t *r, int i, const char **name, const char **value)
{
	if (i < 0 || i >= r->nhdrs) {
		*name = NULL;
		*value = NULL;
		return;
	}
	*name = r->hnames[i];
	*value = r->hvalues[i];
}

int64_t ft_req_content_length(const ft_req_t *r)
{
	return r->chunked ? -1 : r->content_length;
}

const char *ft_req_peer(const ft_req_t *r)
{
	return r->c->peer;
}
