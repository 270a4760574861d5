/* SPDX-License-Identifier: Apache-2.0 */
/* Responses: heads, bytes and file bodies, errors and redirects, "100 Continue", and sending them on the loop. */
#include "http/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"

static const char CONTINUE_MSG[] = "HTTP/1.1 100 Continue\r\n\r\n";

struct resp_hdr {
	struct resp_hdr *next;
	char *line; /* "Name: value\r\n" */
	size_t len;
};

/* RFC 9110 IMF-fixdate, cached per thread for the current second. */
static const char *http_date(void)
{
	static __thread time_t last;
	static __thread char buf[FT_DATE_HTTP_MAX];
	time_t now = time(NULL);

	if (now != last || buf[0] == 0) {
		ft_date_format_http(now, buf);
		last = now;
	}
	return buf;
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 303:
		return "See Other";
	case 304:
		return "Not Modified";
	case 307:
		return "Temporary Redirect";
	case 308:
		return "Permanent Redirect";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 415:
		return "Unsupported Media Type";
	case 416:
		return "Range Not Satisfiable";
	case 417:
		return "Expectation Failed";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	case 507:
		return "Insufficient Storage";
	default:
		break;
	}
	if (status < 200)
		return "Informational";
	if (status < 300)
		return "Success";
	if (status < 400)
		return "Redirection";
	if (status < 500)
		return "Client Error";
	return "Server Error";
}

/* Starts sending "100 Continue" (completed by http_on_send). */
void http_send_continue(conn_t *c)
{
	c->cont_off = 0;
	http_ring_send(c, CONTINUE_MSG, sizeof(CONTINUE_MSG) - 1, true);
}

/* ---- sending ---- */

/*
 * Header (with MSG_MORE when body bytes follow at once: http_file_body_ready), then the file body
 * (filesend.c: sendfile(2) of the bytes in the page cache, an io_uring splice through a pipe for the
 * others, so the loop never waits for the disk; a socket body spliced through the pipe); polls the
 * ring for POLLOUT when the socket is full.
 */
static void file_send(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool more = c->send_off < r->out_len && http_file_body_ready(c);
	ssize_t n;

	while (c->send_off < r->out_len) {
		if (c->tls != NULL)
			n = http_tls_write_head(c, r->out + c->send_off, r->out_len - c->send_off, more);
		else
			n = send(c->fd, r->out + c->send_off, r->out_len - c->send_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && !c->closed) {
				http_poll_out(c);
				return;
			}
			http_response_done(c, false);
			return;
		}
		c->send_off += (size_t)n;
		r->m_sent += (uint64_t)n;
	}
	switch (http_file_body_send(c)) {
	case FILE_DONE:
		http_response_done(c, true);
		break;
	case FILE_POLL:
		http_poll_out(c);
		break;
	case FILE_CUT:
		http_response_done(c, false);
		break;
	default:
		break; /* FILE_WAIT: the splice's completion resumes */
	}
}

void http_file_resume(conn_t *c)
{
	if (c->closed) {
		http_response_done(c, false);
		return;
	}
	file_send(c);
}

static void send_more(conn_t *c)
{
	ft_req_t *r = &c->req;

	if (r->file_left > 0) {
		file_send(c);
		return;
	}
	if (c->send_off < r->out_len) {
		if (c->closed) {
			http_response_done(c, false);
			return;
		}
		http_ring_send(c, r->out + c->send_off, r->out_len - c->send_off, false);
		return;
	}
	http_response_done(c, true);
}

static void start_send(conn_t *c)
{
	c->phase = PH_SENDING;
	c->send_off = 0;
	c->send_since = c->L->now;
	if (c->send_inflight)
		return; /* "100 Continue" still going out; its completion resumes us */
	send_more(c);
}

/* The handler made its response call; on the loop thread, caller holds a reference. */
void http_on_responded(conn_t *c)
{
	ft_req_t *r = &c->req;

	if (c->phase != PH_HANDLER)
		return;
	if (r->st_head) {
		http_stream_send_more(c); /* finishes the request once the stream is out */
		return;
	}
	if (r->body_state == BODY_WANT || r->body_state == BODY_ACTIVE) {
		/* responded before the body was read: the rest of it must not become the next request */
		r->body_state = BODY_FAILED;
		c->must_close = true;
		c->linger = true;
	} else if (r->body_state == BODY_NONE && (r->chunked || r->content_length > 0)) {
		c->must_close = true;
		c->linger = true;
	}
	if (c->closed) {
		http_finish_request(c);
		return;
	}
	start_send(c);
}

void http_on_send(conn_t *c, int res)
{
	size_t left;

	c->send_inflight = false;
	if (c->interim) {
		c->interim = false;
		if (res <= 0) {
			c->must_close = true;
			http_conn_close(c);
		} else {
			c->cont_off += (size_t)res;
			left = sizeof(CONTINUE_MSG) - 1 - c->cont_off;
			if (left > 0 && !c->closed) {
				http_ring_send(c, CONTINUE_MSG + c->cont_off, left, true);
				return;
			}
		}
		if (c->phase == PH_SENDING)
			send_more(c);
		else if (c->req.st_head)
			http_stream_send_more(c);
		return;
	}
	if (c->req.st_head) {
		http_stream_on_send(c, res);
		return;
	}
	if (c->phase != PH_SENDING)
		return;
	if (res <= 0) {
		http_response_done(c, false);
		return;
	}
	c->send_off += (size_t)res;
	c->req.m_sent += (uint64_t)res;
	c->send_since = c->L->now;
	send_more(c);
}

void http_on_poll(conn_t *c)
{
	c->poll_inflight = false;
	if (c->req.st_head) {
		http_stream_send_more(c); /* a stream's file range waited for room in the socket */
		return;
	}
	if (c->phase != PH_SENDING)
		return;
	if (c->closed) {
		http_response_done(c, false);
		return;
	}
	file_send(c);
}

/* ---- responses ---- */

static bool is_token(const char *s)
{
	if (*s == 0)
		return false;
	for (; *s != 0; s++)
		if (!ft_hp_tchar[(unsigned char)*s])
			return false;
	return true;
}

static bool is_field_value(const char *s)
{
	for (; *s != 0; s++)
		if ((unsigned char)*s < 0x20 ? *s != '\t' : (unsigned char)*s == 0x7f)
			return false;
	return true;
}

/* Whether name (nl bytes) is a header the server writes itself, in any letter case. */
static bool server_owned(const char *name, size_t nl)
{
	switch (nl) {
	case 4:
		return strcasecmp(name, "date") == 0;
	case 6:
		return strcasecmp(name, "server") == 0;
	case 10:
		return strcasecmp(name, "connection") == 0;
	case 14:
		return strcasecmp(name, "content-length") == 0;
	case 17:
		return strcasecmp(name, "transfer-encoding") == 0;
	default:
		return false;
	}
}

/* Appends "name: value" of nl and vl bytes to r's response headers. */
static void add_header(ft_req_t *r, const char *name, size_t nl, const char *value, size_t vl)
{
	resp_hdr_t *h = http_arena_alloc(&r->arena, sizeof(*h));

	h->len = nl + vl + 4;
	h->line = http_arena_alloc(&r->arena, h->len + 1);
	memcpy(h->line, name, nl);
	memcpy(h->line + nl, ": ", 2);
	memcpy(h->line + nl + 2, value, vl);
	memcpy(h->line + nl + 2 + vl, "\r\n", 3);
	h->next = NULL;
	if (r->rh_tail != NULL)
		r->rh_tail->next = h;
	else
		r->rh_head = h;
	r->rh_tail = h;
	r->rh_bytes += h->len;
}

void ft_resp_header(ft_req_t *r, const char *name, const char *value)
{
	size_t nl;

	if (!is_token(name) || !is_field_value(value)) {
		ft_warn("http: dropping invalid response header %s", name);
		return;
	}
	nl = strlen(name);
	if (!server_owned(name, nl))
		add_header(r, name, nl, value, strlen(value));
}

void ft_resp_header_u64(ft_req_t *r, const char *name, uint64_t value)
{
	char digits[FT_U64_DEC_MAX];
	size_t n = ft_u64_dec(value, digits), nl;

	if (!is_token(name)) {
		ft_warn("http: dropping invalid response header %s", name);
		return;
	}
	nl = strlen(name);
	if (!server_owned(name, nl))
		add_header(r, name, nl, digits, n);
}

void ft_resp_headerf(ft_req_t *r, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *v;

	va_start(ap, fmt);
	v = http_arena_vprintf(&r->arena, fmt, ap);
	va_end(ap);
	ft_resp_header(r, name, v);
}

bool http_status_has_body(int status)
{
	return status >= 200 && status != 204 && status != 304;
}

/*
 * Whether the request body is out of the way, so the connection may be kept: no body, or all of it
 * read. A stream's head (tentative) may go out while a stream body is still arriving; if the body
 * then does not complete, the connection is closed after the response all the same.
 */
static bool body_settled(ft_req_t *r, bool tentative)
{
	conn_t *c = r->c;
	bool ok;

	if (!r->chunked && r->content_length == 0)
		return true;
	if (!r->body_stream)
		return r->body_state == BODY_DONE;
	pthread_mutex_lock(&c->smu);
	ok = r->sh.b_eof || (tentative && r->sh.b_err == 0);
	pthread_mutex_unlock(&c->smu);
	return ok;
}

/* Copies s to out + n; returns the new length. */
static size_t put_str(char *out, size_t n, const char *s)
{
	size_t l = strlen(s);

	memcpy(out + n, s, l);
	return n + l;
}

/*
 * Writes the response head into arena memory with body_room bytes spare after it; frame (FR_*)
 * says which length header it carries; decides keep-alive. Returns the buffer, *head_len its head
 * length.
 */
char *http_resp_head(ft_req_t *r, int status, const char *ctype, int frame, uint64_t clen, size_t body_room,
		     size_t *head_len)
{
	size_t cap, n;
	char *out;
	resp_hdr_t *h;
	bool body_ok = body_settled(r, r->s_started);

	if (ctype != NULL && !is_field_value(ctype))
		ctype = NULL;
	r->keep_alive = r->client_keep_alive && !r->close_req && body_ok && frame != FR_CLOSE &&
			!atomic_load(&r->c->L->s->stopping);
	cap = 256 + (ctype != NULL ? strlen(ctype) : 0) + r->rh_bytes;
	out = http_arena_alloc(&r->arena, cap + body_room);
	r->m_status = status;
	n = put_str(out, 0, "HTTP/1.1 ");
	n += ft_u64_dec((uint64_t)status, out + n);
	n = put_str(out, n, " ");
	n = put_str(out, n, reason_phrase(status));
	n = put_str(out, n, "\r\nServer: FastTier\r\nDate: ");
	n = put_str(out, n, http_date());
	n = put_str(out, n, "\r\n");
	if (frame == FR_LENGTH && http_status_has_body(status)) {
		n = put_str(out, n, "Content-Length: ");
		n += ft_u64_dec(clen, out + n);
		n = put_str(out, n, "\r\n");
	} else if (frame == FR_CHUNKED) {
		n = put_str(out, n, "Transfer-Encoding: chunked\r\n");
	}
	if (ctype != NULL) {
		memcpy(out + n, "Content-Type: ", 14);
		n += 14;
		memcpy(out + n, ctype, strlen(ctype));
		n += strlen(ctype);
		memcpy(out + n, "\r\n", 2);
		n += 2;
	}
	if (!r->keep_alive) {
		memcpy(out + n, "Connection: close\r\n", 19);
		n += 19;
	} else if (r->minor == 0) {
		memcpy(out + n, "Connection: keep-alive\r\n", 24);
		n += 24;
	}
	for (h = r->rh_head; h != NULL; h = h->next) {
		memcpy(out + n, h->line, h->len);
		n += h->len;
	}
	memcpy(out + n, "\r\n", 2);
	n += 2;
	*head_len = n;
	return out;
}

/* Hands the recorded response to r's loop. After this r belongs to the server. */
void http_resp_commit(ft_req_t *r)
{
	r->responded = true;
	http_req_notify(r, EV_RESPONDED);
}

int http_clamp_status(int status)
{
	return status < 200 || status > 999 ? 500 : status;
}

/* A plain response call after ft_resp_stream_start: the head is out, so all that is left is to abort. */
static bool stream_misuse(ft_req_t *r, const char *what)
{
	if (!r->s_started)
		return false;
	ft_error("http: %s after ft_resp_stream_start; aborting the stream", what);
	ft_resp_stream_end(r, -EINVAL);
	return true;
}

void ft_resp_bytes(ft_req_t *r, int status, const char *content_type, const void *body, size_t len)
{
	bool send_body;
	size_t hl;
	char *out;

	if (stream_misuse(r, "ft_resp_bytes"))
		return;
	status = http_clamp_status(status);
	send_body = r->method != FT_HTTP_HEAD && http_status_has_body(status);
	out = http_resp_head(r, status, content_type, FR_LENGTH, len, send_body ? len : 0, &hl);
	if (send_body && len > 0)
		memcpy(out + hl, body, len);
	r->out = out;
	r->out_len = hl + (send_body ? len : 0);
	http_resp_commit(r);
}

/* ft_resp_file and ft_resp_file_borrowed: fd closed here unless borrowed. */
static void resp_file(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len, bool borrowed)
{
	size_t hl;

	if (stream_misuse(r, "ft_resp_file")) {
		if (!borrowed)
			close(fd);
		return;
	}
	status = http_clamp_status(status);
	r->out = http_resp_head(r, status, content_type, FR_LENGTH, len, 0, &hl);
	r->out_len = hl;
	if (r->method != FT_HTTP_HEAD && http_status_has_body(status) && len > 0) {
		r->file_fd = fd;
		r->file_borrowed = borrowed;
		r->file_off = r->res_end = off;
		r->file_left = len;
	} else if (!borrowed) {
		close(fd);
	}
	http_resp_commit(r);
}

void ft_resp_file(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len)
{
	resp_file(r, status, content_type, fd, off, len, false);
}

void ft_resp_file_borrowed(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len)
{
	resp_file(r, status, content_type, fd, off, len, true);
}

void ft_resp_socket(ft_req_t *r, int status, const char *content_type, const ft_resp_socket_t *b)
{
	bool send_body;
	size_t hl;
	char *out;

	if (b->pre_len > b->len || http_tls_loop != r->c->L) { /* done must run on the caller's thread */
		ft_error("http: ft_resp_socket %s", b->pre_len > b->len ? "with more bytes read than the body has"
									: "off the request's loop thread");
		b->done(b->arg, -ECANCELED); /* first: b may live in r's memory, gone once r is answered */
		ft_resp_error(r, 500, "internal error");
		return;
	}
	if (stream_misuse(r, "ft_resp_socket")) {
		b->done(b->arg, -ECANCELED);
		return;
	}
	status = http_clamp_status(status);
	send_body = r->method != FT_HTTP_HEAD && http_status_has_body(status);
	out = http_resp_head(r, status, content_type, FR_LENGTH, b->len, send_body ? b->pre_len : 0, &hl);
	if (send_body && b->pre_len > 0)
		memcpy(out + hl, b->pre, b->pre_len);
	r->out = out;
	r->out_len = hl + (send_body ? b->pre_len : 0);
	r->sock_done = b->done;
	r->sock_arg = b->arg;
	r->sock_left = b->len - b->pre_len;
	if (send_body && r->sock_left > 0) {
		r->file_fd = b->fd;
		r->file_borrowed = true;
		r->file_sock = true;
		r->file_left = r->sock_left;
		r->sock_timeout_ms = b->timeout_ms > 0 ? b->timeout_ms : 1;
	} else if (send_body) {
		r->file_sock = true; /* the whole body came with pre: fd read whole */
	}
	http_resp_commit(r);
}

/* Appends s as a JSON string body (quotes included) to out; out has room for 6 * strlen(s) + 3. */
static size_t json_escape(const char *s, char *out)
{
	size_t n = 0;
	unsigned char ch;

	out[n++] = '"';
	for (; (ch = (unsigned char)*s) != 0; s++) {
		if (ch == '"' || ch == '\\') {
			out[n++] = '\\';
			out[n++] = (char)ch;
		} else if (ch == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else if (ch == '\r') {
			out[n++] = '\\';
			out[n++] = 'r';
		} else if (ch == '\t') {
			out[n++] = '\\';
			out[n++] = 't';
		} else if (ch < 0x20 || ch >= 0x7f) {
			/* bytes >= 0x7f are written as \u00XX so the body is valid JSON whatever they were */
			memcpy(out + n, "\\u00", 4);
			ft_hex_encode(&ch, 1, out + n + 4); /* its NUL lands where the next byte or the quote goes */
			n += 6;
		} else {
			out[n++] = (char)ch;
		}
	}
	out[n++] = '"';
	return n;
}

void ft_resp_error(ft_req_t *r, int status, const char *fmt, ...)
{
	va_list ap;
	char *msg, *body;
	size_t n;

	va_start(ap, fmt);
	msg = http_arena_vprintf(&r->arena, fmt, ap);
	va_end(ap);
	status = http_clamp_status(status);
	body = http_arena_alloc(&r->arena, 40 + 6 * strlen(msg) + 3);
	n = (size_t)sprintf(body, "{\"status\": %d, \"message\": ", status);
	n += json_escape(msg, body + n);
	body[n++] = '}';
	ft_resp_bytes(r, status, "application/json", body, n);
}

void ft_resp_redirect(ft_req_t *r, int status, const char *location)
{
	ft_resp_header(r, "Location", location);
	ft_resp_bytes(r, status, NULL, "", 0);
}

void ft_resp_close(ft_req_t *r)
{
	r->close_req = true;
}
