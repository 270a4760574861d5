/* Tests for common/http.c: the real server on an ephemeral loopback port, driven over raw sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

#define FILE_SIZE (5 * 1024 * 1024)

static ft_httpd_t *srv;
static int srv_port;
static char file_path[64];
static unsigned char *file_data;

/* observations made on server threads */
static atomic_int g_end_err = 1;      /* last on_end error (1 = none yet) */
static atomic_int g_on_data_calls;
static atomic_int g_hook_runs;
static atomic_int g_gone_released;
static char g_hook_order[8];
static atomic_int g_hook_len;

/* ---- handlers ---- */

typedef struct {
	char *buf;
	size_t len, cap;
} echo_t;

static void free_echo(void *arg)
{
	echo_t *e = arg;

	free(e->buf);
}

static int echo_data(ft_req_t *r, void *arg, const void *buf, size_t len)
{
	echo_t *e = arg;

	(void)r;
	atomic_fetch_add(&g_on_data_calls, 1);
	if (e->len + len > e->cap) {
		e->cap = (e->len + len) * 2;
		e->buf = realloc(e->buf, e->cap);
	}
	memcpy(e->buf + e->len, buf, len);
	e->len += len;
	return 0;
}

static void echo_end(ft_req_t *r, void *arg, int err)
{
	echo_t *e = arg;

	atomic_store(&g_end_err, err);
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	ft_resp_bytes(r, 200, "application/octet-stream", e->buf, e->len);
}

static void echo_all_done(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	(void)arg;
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	assert_int_equal(body[len], 0);
	ft_resp_bytes(r, 200, NULL, body, len);
}

static void defer_work(ft_req_t *r, void *arg)
{
	pthread_t *handler_thread = arg;

	usleep(20000);
	ft_resp_header(r, "X-Off-Loop", pthread_equal(pthread_self(), *handler_thread) ? "0" : "1");
	ft_resp_bytes(r, 200, "text/plain", "deferred", 8);
}

static void gone_hook(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_gone_released, 1);
}

static void defer_slow_work(ft_req_t *r, void *arg)
{
	(void)arg;
	usleep(300000);
	ft_resp_bytes(r, 200, "text/plain", "late", 4);
}

/* The body is asked for from a worker; the callback must come on the loop thread. */
static void worker_body_done(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	pthread_t *worker = arg;

	ft_resp_header(r, "X-On-Worker", pthread_equal(pthread_self(), *worker) ? "1" : "0");
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	ft_resp_bytes(r, 200, NULL, body, len);
}

static void defer_read_work(ft_req_t *r, void *arg)
{
	pthread_t *worker = arg;

	*worker = pthread_self();
	ft_req_read_body_all(r, 1 << 20, worker_body_done, worker);
}

static atomic_int g_plain_runs;

static void plain_work(void *arg)
{
	atomic_fetch_add(&g_plain_runs, *(int *)arg);
}

static void order_hook(void *arg)
{
	int i = atomic_fetch_add(&g_hook_len, 1);

	if (i < (int)sizeof(g_hook_order) - 1)
		g_hook_order[i] = *(const char *)arg;
	atomic_fetch_add(&g_hook_runs, 1);
}

static uint64_t query_u64(ft_req_t *r, const char *k, uint64_t def)
{
	const char *v = ft_req_query(r, k);

	return v != NULL ? strtoull(v, NULL, 10) : def;
}

static void handle_file(ft_req_t *r, bool short_file)
{
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);
	uint64_t off = query_u64(r, "off", 0), len = query_u64(r, "len", FILE_SIZE - off);

	if (fd < 0) {
		ft_resp_error(r, 500, "open: %s", strerror(errno));
		return;
	}
	if (short_file)
		len = FILE_SIZE + 1000;
	ft_resp_file(r, off > 0 || len < FILE_SIZE ? 206 : 200, "application/octet-stream", fd, (off_t)off, len);
}

static void handler(ft_req_t *r, void *ctx)
{
	size_t plen;
	const char *path = ft_req_path(r, &plen);
	echo_t *e;
	char buf[512];
	int n;

	(void)ctx;
	if (strcmp(path, "/small") == 0) {
		ft_resp_header(r, "X-Test", "yes");
		ft_resp_bytes(r, 200, "text/plain", "hello world", 11);
	} else if (strcmp(path, "/echo") == 0) {
		e = ft_req_alloc(r, sizeof(*e));
		memset(e, 0, sizeof(*e));
		ft_req_on_done(r, free_echo, e);
		ft_req_read_body(r, echo_data, echo_end, e);
	} else if (strcmp(path, "/echoall") == 0) {
		ft_req_read_body_all(r, (size_t)query_u64(r, "max", 1 << 20), echo_all_done, NULL);
	} else if (strcmp(path, "/noread") == 0) {
		ft_resp_bytes(r, 200, "text/plain", "no", 2);
	} else if (strcmp(path, "/defer") == 0) {
		pthread_t *self = ft_req_alloc(r, sizeof(*self));

		*self = pthread_self();
		ft_req_defer(r, defer_work, self);
	} else if (strcmp(path, "/defer-read") == 0) {
		ft_req_defer(r, defer_read_work, ft_req_alloc(r, sizeof(pthread_t)));
	} else if (strcmp(path, "/defer-slow") == 0) {
		ft_req_on_done(r, gone_hook, NULL);
		ft_req_defer(r, defer_slow_work, NULL);
	} else if (strcmp(path, "/file") == 0) {
		handle_file(r, false);
	} else if (strcmp(path, "/file-short") == 0) {
		handle_file(r, true);
	} else if (strcmp(path, "/query") == 0) {
		const char *a = ft_req_query(r, "a"), *b = ft_req_query(r, "b"), *c = ft_req_query(r, "c"),
			   *d = ft_req_query(r, "d");

		n = snprintf(buf, sizeof(buf), "a=%s|b=%s|c=%s|d=%s|qs=%s", a ? a : "NULL", b ? b : "NULL",
			     c ? c : "NULL", d ? d : "NULL", ft_req_query_string(r));
		ft_resp_bytes(r, 200, "text/plain", buf, (size_t)n);
	} else if (strncmp(path, "/path/", 6) == 0) {
		ft_resp_header(r, "X-Target", ft_req_target(r));
		ft_resp_bytes(r, 200, "text/plain", path, plen);
	} else if (strcmp(path, "/hooks") == 0) {
		ft_req_on_done(r, order_hook, "1");
		ft_req_on_done(r, order_hook, "2");
		ft_req_on_done(r, order_hook, "3");
		ft_resp_bytes(r, 200, NULL, "h", 1);
	} else if (strcmp(path, "/error") == 0) {
		ft_resp_error(r, 404, "no \"such\" thing\n%s", "\\");
	} else if (strcmp(path, "/redirect") == 0) {
		ft_resp_redirect(r, 307, "http://example.invalid/y?z=1");
	} else if (strcmp(path, "/headers") == 0) {
		const char *name, *value;

		ft_req_header_at(r, ft_req_header_count(r) - 1, &name, &value);
		n = snprintf(buf, sizeof(buf), "%d|%s|%s=%s|%s|%lld", ft_req_header_count(r),
			     ft_req_header(r, "x-MiXeD") ? ft_req_header(r, "x-MiXeD") : "NULL", name, value,
			     ft_req_method_name(r), (long long)ft_req_content_length(r));
		ft_resp_headerf(r, "X-Peer", "%s", ft_req_peer(r));
		ft_resp_header(r, "Content-Length", "999"); /* the server's: ignored */
		ft_resp_header(r, "X-Bad", "a\r\nInjected: 1");  /* dropped */
		ft_resp_bytes(r, 200, NULL, buf, (size_t)n);
	} else if (strcmp(path, "/close") == 0) {
		ft_resp_close(r);
		ft_resp_bytes(r, 200, NULL, "bye", 3);
	} else if (strcmp(path, "/empty") == 0) {
		ft_resp_bytes(r, 204, NULL, NULL, 0);
	} else {
		ft_resp_error(r, 404, "no route %s", path);
	}
}

/* ---- raw client ---- */

typedef struct {
	int fd;
	char *buf;
	size_t len, cap;
} cli_t;

typedef struct {
	int status;
	char head[8192];
	char *body;
	size_t body_len;
	long long clen;
} resp_t;

static int cli_open_port(cli_t *c, int port)
{
	struct sockaddr_in a = { 0 };
	struct timeval tv = { .tv_sec = 5 };

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		fail_msg("connect: %s", strerror(errno));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	c->cap = 64 * 1024;
	c->buf = malloc(c->cap);
	return c->fd;
}

static void cli_open(cli_t *c)
{
	cli_open_port(c, srv_port);
}

static void cli_close(cli_t *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

static void cli_send(cli_t *c, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n > 0) {
		w = send(c->fd, s, n, MSG_NOSIGNAL);
		if (w < 0)
			fail_msg("send: %s", strerror(errno));
		s += w;
		n -= (size_t)w;
	}
}

static void cli_sends(cli_t *c, const char *s)
{
	cli_send(c, s, strlen(s));
}

/* Reads more bytes into the buffer; returns the count, 0 at EOF, -1 on error or timeout. */
static ssize_t cli_fill(cli_t *c)
{
	ssize_t n;

	if (c->len == c->cap) {
		c->cap *= 2;
		c->buf = realloc(c->buf, c->cap);
	}
	n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (n > 0)
		c->len += (size_t)n;
	return n;
}

static void cli_consume(cli_t *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

static const char *resp_header(const resp_t *r, const char *name, char *out, size_t outlen)
{
	const char *p = strstr(r->head, "\r\n");
	size_t nl = strlen(name);

	while (p != NULL && p[2] != '\r') {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t vl;

			while (*v == ' ')
				v++;
			vl = (size_t)(eol - v);
			if (vl >= outlen)
				vl = outlen - 1;
			memcpy(out, v, vl);
			out[vl] = 0;
			return out;
		}
		p = eol;
	}
	return NULL;
}

/* Reads one response; head_only for HEAD requests. Returns 0, or -1 if the connection ended first. */
static int cli_read(cli_t *c, resp_t *r, bool head_only)
{
	char *end = NULL, v[64];
	size_t hl;

	memset(r, 0, sizeof(*r));
	r->clen = -1;
	while ((end = c->len > 0 ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL) == NULL)
		if (cli_fill(c) <= 0)
			return -1;
	hl = (size_t)(end - c->buf) + 4;
	assert_true(hl < sizeof(r->head));
	memcpy(r->head, c->buf, hl);
	r->head[hl] = 0;
	cli_consume(c, hl);
	if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1)
		fail_msg("bad status line: %.60s", r->head);
	if (resp_header(r, "Content-Length", v, sizeof(v)) != NULL)
		r->clen = atoll(v);
	if (head_only || r->status < 200 || r->status == 204 || r->status == 304 || r->clen <= 0)
		return 0;
	while (c->len < (size_t)r->clen)
		if (cli_fill(c) <= 0)
			return -1;
	r->body = malloc((size_t)r->clen + 1);
	memcpy(r->body, c->buf, (size_t)r->clen);
	r->body[r->clen] = 0;
	r->body_len = (size_t)r->clen;
	cli_consume(c, (size_t)r->clen);
	return 0;
}

static void resp_free(resp_t *r)
{
	free(r->body);
	r->body = NULL;
}

/* True when the server closes the connection (EOF or reset) with no further bytes. */
static bool cli_eof(cli_t *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, 0);

	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void get(cli_t *c, const char *target, resp_t *r)
{
	char req[1024];

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	cli_sends(c, req);
	assert_int_equal(cli_read(c, r, false), 0);
}

/* One request on a fresh connection; expects the status and a close. */
static void expect_status_close(const char *raw, size_t len, int status)
{
	cli_t c;
	resp_t r;
	char v[64];

	cli_open(&c);
	cli_send(&c, raw, len);
	if (cli_read(&c, &r, false) != 0)
		fail_msg("no response to %.40s", raw);
	if (r.status != status)
		fail_msg("status %d, want %d for %.60s", r.status, status, raw);
	assert_non_null(resp_header(&r, "Connection", v, sizeof(v)));
	assert_string_equal(v, "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void wait_atomic(atomic_int *v, int want, int ms)
{
	int i;

	for (i = 0; i < ms && atomic_load(v) != want; i++)
		usleep(1000);
	assert_int_equal(atomic_load(v), want);
}

/* ---- tests ---- */

static void test_get_small(void **state)
{
	cli_t c;
	resp_t r;
	char v[128];

	(void)state;
	cli_open(&c);
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello world");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "11");
	assert_string_equal(resp_header(&r, "Server", v, sizeof(v)), "FastTier");
	assert_string_equal(resp_header(&r, "Content-Type", v, sizeof(v)), "text/plain");
	assert_string_equal(resp_header(&r, "X-Test", v, sizeof(v)), "yes");
	assert_non_null(resp_header(&r, "Date", v, sizeof(v)));
	assert_true(strlen(v) == 29 && strcmp(v + 25, " GMT") == 0);
	assert_null(resp_header(&r, "Connection", v, sizeof(v)));
	resp_free(&r);
	cli_close(&c);
}

static void test_head(void **state)
{
	cli_t c;
	resp_t r;
	char v[64];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "HEAD /small HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "11");
	resp_free(&r);
	/* no body bytes followed: the next response starts right away */
	cli_sends(&c, "HEAD /file HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, FILE_SIZE);
	assert_int_equal(c.len, 0);
	resp_free(&r);
	get(&c, "/small", &r);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
	cli_close(&c);
}

static void test_keepalive_three(void **state)
{
	cli_t c;
	resp_t r;
	int i;

	(void)state;
	cli_open(&c);
	for (i = 0; i < 3; i++) {
		get(&c, "/small", &r);
		assert_int_equal(r.status, 200);
		assert_string_equal(r.body, "hello world");
		resp_free(&r);
	}
	cli_close(&c);
}

static void test_pipelined(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /query?a=1 HTTP/1.1\r\nHost: t\r\n\r\n"
		      "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nHELLO"
		      "GET /query?a=3 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "a=1|b=NULL|c=NULL|d=NULL|qs=a=1");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "HELLO");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "a=3|b=NULL|c=NULL|d=NULL|qs=a=3");
	resp_free(&r);
	cli_close(&c);
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

static void test_put_streamed(void **state)
{
	enum { N = 200000 };
	unsigned char *data = malloc(N);
	char head[256];
	size_t off = 0, piece;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 7);
	atomic_store(&g_on_data_calls, 0);
	atomic_store(&g_end_err, 1);
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	cli_sends(&c, head);
	while (off < N) {
		piece = 1 + (off * 7919) % 30000;
		if (piece > N - off)
			piece = N - off;
		cli_send(&c, data + off, piece);
		off += piece;
		usleep(2000);
	}
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, N);
	assert_memory_equal(r.body, data, N);
	assert_int_equal(atomic_load(&g_end_err), 0);
	assert_true(atomic_load(&g_on_data_calls) > 1);
	resp_free(&r);
	/* the connection stays usable after a fully read body */
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
	free(data);
}

static void test_put_chunked(void **state)
{
	static const char body[] = "4;ext=1\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n";
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
	for (i = 0; i < sizeof(body) - 1; i += 5) {
		cli_send(&c, body + i, sizeof(body) - 1 - i < 5 ? sizeof(body) - 1 - i : 5);
		usleep(1000);
	}
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "Wikipedia in \r\n\r\nchunks.");
	resp_free(&r);
	/* bad framing -> on_end(-EBADMSG), handler answers 400, connection closes */
	atomic_store(&g_end_err, 1);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_int_equal(atomic_load(&g_end_err), -EBADMSG);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	/* read_body_all over chunked */
	cli_open(&c);
	cli_sends(&c, "POST /echoall HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "abc");
	resp_free(&r);
	cli_close(&c);
}

static void test_expect_continue(void **state)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	cli_t c;
	resp_t r;
	char v[64];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	/* the client waits for the interim response before sending the body */
	while (c.len < sizeof(cont) - 1)
		if (cli_fill(&c) <= 0)
			fail_msg("no 100 Continue");
	assert_memory_equal(c.buf, cont, sizeof(cont) - 1);
	cli_consume(&c, sizeof(cont) - 1);
	cli_sends(&c, "abcde");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "abcde");
	resp_free(&r);
	cli_close(&c);

	/* a handler that answers without reading: no 100, final response, close */
	cli_open(&c);
	cli_sends(&c, "PUT /noread HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);

	/* read_body_all with a declared length over max: 413 without 100 */
	cli_open(&c);
	cli_sends(&c, "PUT /echoall?max=10 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 413);
	resp_free(&r);
	cli_close(&c);
}

static void test_body_reset(void **state)
{
	cli_t c;

	(void)state;
	atomic_store(&g_end_err, 1);
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789");
	usleep(50000);
	cli_close(&c);
	wait_atomic(&g_end_err, -ECONNRESET, 3000);
}

static void test_defer(void **state)
{
	cli_t c;
	resp_t r;
	char v[16];
	int i;

	(void)state;
	cli_open(&c);
	for (i = 0; i < 2; i++) {
		get(&c, "/defer", &r);
		assert_int_equal(r.status, 200);
		assert_string_equal(r.body, "deferred");
		assert_string_equal(resp_header(&r, "X-Off-Loop", v, sizeof(v)), "1");
		resp_free(&r);
	}
	/* the body asked for from the worker, delivered on the loop, with 100-continue */
	cli_sends(&c, "PUT /defer-read HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 100);
	cli_sends(&c, "wxyz");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "wxyz");
	assert_string_equal(resp_header(&r, "X-On-Worker", v, sizeof(v)), "0");
	resp_free(&r);
	/* work with no request attached */
	static int seven = 7;

	atomic_store(&g_plain_runs, 0);
	ft_httpd_defer(srv, plain_work, &seven);
	ft_httpd_defer(srv, plain_work, &seven);
	wait_atomic(&g_plain_runs, 14, 2000);
	/* a deferred request pipelined ahead of a plain one: answered in order */
	cli_sends(&c, "GET /defer HTTP/1.1\r\nHost: t\r\n\r\nGET /small HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "deferred");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
	cli_close(&c);
}

static void test_defer_client_gone(void **state)
{
	cli_t c;
	resp_t r;
	int before = atomic_load(&g_gone_released);

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /defer-slow HTTP/1.1\r\nHost: t\r\n\r\n");
	usleep(20000);
	cli_close(&c);
	wait_atomic(&g_gone_released, before + 1, 3000);
	cli_open(&c);
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
}

static void test_file(void **state)
{
	cli_t c;
	resp_t r;
	char target[128];

	(void)state;
	cli_open(&c);
	get(&c, "/file", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, FILE_SIZE);
	assert_memory_equal(r.body, file_data, FILE_SIZE);
	resp_free(&r);
	snprintf(target, sizeof(target), "/file?off=%d&len=%d", 4097, 3 * 1024 * 1024 + 5);
	get(&c, target, &r);
	assert_int_equal(r.status, 206);
	assert_int_equal(r.body_len, 3 * 1024 * 1024 + 5);
	assert_memory_equal(r.body, file_data + 4097, r.body_len);
	resp_free(&r);
	get(&c, "/file?off=5242879&len=1", &r);
	assert_int_equal(r.body_len, 1);
	assert_int_equal((unsigned char)r.body[0], file_data[FILE_SIZE - 1]);
	resp_free(&r);
	cli_close(&c);
}

static void test_file_short(void **state)
{
	cli_t c;
	resp_t r;
	size_t total;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /file-short HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, FILE_SIZE + 1000);
	total = c.len;
	for (;;) {
		c.len = 0;
		ssize_t n = cli_fill(&c);

		if (n <= 0) {
			assert_true(n == 0 || errno == ECONNRESET);
			break;
		}
		total += (size_t)n;
	}
	assert_int_equal(total, FILE_SIZE);
	resp_free(&r);
	cli_close(&c);
}

static void test_limits_431(void **state)
{
	char *big = malloc(8192);
	int n, i;

	(void)state;
	n = snprintf(big, 8192, "GET /small HTTP/1.1\r\nHost: t\r\nX-Big: ");
	memset(big + n, 'a', 5000);
	n += 5000;
	n += snprintf(big + n, 8192 - (size_t)n, "\r\n\r\n");
	expect_status_close(big, (size_t)n, 431);
	/* head without an end, past the limit */
	expect_status_close(big, 6000, 431);
	n = snprintf(big, 8192, "GET /small HTTP/1.1\r\nHost: t\r\n");
	for (i = 0; i < 25; i++)
		n += snprintf(big + n, 8192 - (size_t)n, "X-H%d: v\r\n", i);
	n += snprintf(big + n, 8192 - (size_t)n, "\r\n");
	expect_status_close(big, (size_t)n, 431);
	free(big);
}

static void expect_s(const char *raw, int status)
{
	expect_status_close(raw, strlen(raw), status);
}

static void test_bad_requests(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	expect_s("GET  /small HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET /small HTTP/1.1\r\nHost t\r\n\r\n", 400);
	expect_s("GET /small HTTP/1.1\r\n\r\n", 400);
	expect_s("GET /a%zzb HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET /a%2 HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET nopath HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
	expect_s("GET /small HTTP/2.0\r\nHost: t\r\n\r\n", 505);
	expect_s("GET /small HTTP/1.1\r\nHost: t\r\nA: \x01\r\n\r\n", 400);
	/* the error body is the JSON form */
	cli_open(&c);
	cli_sends(&c, "GET /bad%zz HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "{\"status\": 400, \"message\": \"invalid request target\"}");
	resp_free(&r);
	cli_close(&c);
}

static void test_http10(void **state)
{
	cli_t c;
	resp_t r;
	char v[32];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /small HTTP/1.0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	cli_open(&c);
	cli_sends(&c, "GET /small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "keep-alive");
	resp_free(&r);
	cli_sends(&c, "GET /small HTTP/1.0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void test_query_path_headers(void **state)
{
	cli_t c;
	resp_t r;
	char v[256];

	(void)state;
	cli_open(&c);
	get(&c, "/query?a=1&b=x+y%20z&c&a=2&d=%zz", &r);
	assert_string_equal(r.body, "a=1|b=x y z|c=|d=%zz|qs=a=1&b=x+y%20z&c&a=2&d=%zz");
	resp_free(&r);
	get(&c, "/path/a%00b%2Fc+d?x=1", &r);
	assert_int_equal(r.body_len, 13);
	assert_memory_equal(r.body, "/path/a\0b/c+d", 13);
	assert_string_equal(resp_header(&r, "X-Target", v, sizeof(v)), "/path/a%00b%2Fc+d?x=1");
	resp_free(&r);
	get(&c, "http://host:1/path/abs?q", &r);
	assert_string_equal(r.body, "/path/abs");
	resp_free(&r);
	cli_sends(&c, "PATCH /headers HTTP/1.1\r\nHost: t\r\nX-Mixed:  spaced value \r\nLast: one\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "3|spaced value|Last=one|PATCH|0");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "31");
	assert_null(resp_header(&r, "X-Bad", v, sizeof(v)));
	assert_null(resp_header(&r, "Injected", v, sizeof(v)));
	assert_non_null(resp_header(&r, "X-Peer", v, sizeof(v)));
	assert_true(strncmp(v, "127.0.0.1:", 10) == 0);
	resp_free(&r);
	get(&c, "/error", &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.body, "{\"status\": 404, \"message\": \"no \\\"such\\\" thing\\n\\\\\"}");
	assert_string_equal(resp_header(&r, "Content-Type", v, sizeof(v)), "application/json");
	resp_free(&r);
	get(&c, "/redirect", &r);
	assert_int_equal(r.status, 307);
	assert_string_equal(resp_header(&r, "Location", v, sizeof(v)), "http://example.invalid/y?z=1");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "0");
	resp_free(&r);
	get(&c, "/empty", &r);
	assert_int_equal(r.status, 204);
	assert_null(resp_header(&r, "Content-Length", v, sizeof(v)));
	resp_free(&r);
	get(&c, "/close", &r);
	assert_string_equal(r.body, "bye");
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void test_hooks_order(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_hook_len, 0);
	atomic_store(&g_hook_runs, 0);
	cli_open(&c);
	get(&c, "/hooks", &r);
	resp_free(&r);
	wait_atomic(&g_hook_runs, 3, 2000);
	assert_memory_equal(g_hook_order, "321", 3);
	cli_close(&c);
}

static void test_body_all_limit(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "POST /echoall?max=4 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 413);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ft_httpd_t *start_server(int idle, int header, int body, int *port)
{
	ft_httpd_opts_t o = { 0 };
	char err[256];
	ft_httpd_t *s;

	o.bind = "127.0.0.1";
	o.port = 0;
	o.threads = 2;
	o.workers = 4;
	o.max_header_bytes = 4096;
	o.max_headers = 20;
	o.idle_timeout_ms = idle;
	o.header_timeout_ms = header;
	o.body_timeout_ms = body;
	o.handler = handler;
	s = ft_httpd_start(&o, err, sizeof(err));
	if (s == NULL)
		fail_msg("start: %s", err);
	*port = ft_httpd_port(s);
	assert_true(*port > 0);
	return s;
}

static void test_timeouts(void **state)
{
	int port, i;
	ft_httpd_t *s = start_server(300, 400, 300, &port);
	int64_t t0, dt;
	cli_t c;
	resp_t r;

	(void)state;
	/* idle: closed silently */
	cli_open_port(&c, port);
	t0 = now_ms();
	assert_true(cli_eof(&c));
	dt = now_ms() - t0;
	assert_true(dt >= 250 && dt < 2000);
	cli_close(&c);

	/* keep-alive idle after a response */
	cli_open_port(&c, port);
	get(&c, "/small", &r);
	resp_free(&r);
	t0 = now_ms();
	assert_true(cli_eof(&c));
	assert_true(now_ms() - t0 >= 250);
	cli_close(&c);

	/* incomplete head: 408 */
	cli_open_port(&c, port);
	cli_sends(&c, "GET /small HTTP/1.1\r\nHost: t\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 408);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);

	/* slowloris: a byte every 40 ms still gets 408 at the header deadline */
	cli_open_port(&c, port);
	t0 = now_ms();
	for (i = 0; i < 40; i++) {
		char b;

		if (send(c.fd, "X", 1, MSG_NOSIGNAL) != 1)
			break;
		usleep(40000);
		if (recv(c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1)
			break; /* the answer arrived */
	}
	dt = now_ms() - t0;
	assert_true(dt >= 350 && dt < 1200);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 408);
	resp_free(&r);
	cli_close(&c);

	/* body stall: on_end(-ETIMEDOUT), then close */
	atomic_store(&g_end_err, 1);
	cli_open_port(&c, port);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_int_equal(atomic_load(&g_end_err), -ETIMEDOUT);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	ft_httpd_stop(s);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_many_sequential(void **state)
{
	int base, i, now = 0;
	cli_t c;
	resp_t r;

	(void)state;
	usleep(100000);
	base = count_fds();
	for (i = 0; i < 1000; i++) {
		cli_open(&c);
		get(&c, i % 2 ? "/small" : "/file?len=16384", &r);
		assert_true(r.status == 200 || r.status == 206);
		resp_free(&r);
		cli_close(&c);
	}
	/* the server closes its side once it sees each EOF */
	for (i = 0; i < 200; i++) {
		now = count_fds();
		if (now <= base)
			break;
		usleep(10000);
	}
	if (now > base)
		fail_msg("fds: %d before, %d after", base, now);
}

static atomic_int g_mix_errors;

/* One client thread of the mixed load: keep-alive, defer, bodies, pipelining, abrupt closes. */
static void *mix_client(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char body[1000], req[256];
	cli_t c;
	resp_t r;
	int i, op;

	memset(body, 'b', sizeof(body));
	cli_open(&c);
	for (i = 0; i < 150; i++) {
		seed = seed * 1103515245u + 12345u;
		op = (int)((seed >> 16) % 6);
		switch (op) {
		case 0:
		case 1:
			snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", op ? "/defer" : "/small");
			cli_sends(&c, req);
			if (cli_read(&c, &r, false) != 0 || r.status != 200 ||
			    strcmp(r.body, op ? "deferred" : "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		case 2:
			cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
			cli_send(&c, body, sizeof(body));
			if (cli_read(&c, &r, false) != 0 || r.status != 200 || r.body_len != sizeof(body))
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		case 3:
			cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789");
			cli_close(&c);
			cli_open(&c);
			break;
		case 4:
			cli_sends(&c, "GET /small HTTP/1.1\r\nHost: t\r\n\r\nGET /defer HTTP/1.1\r\nHost: t\r\n\r\n"
				      "GET /small HTTP/1.1\r\nHost: t\r\n\r\n");
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "deferred") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		default:
			/* leave a deferred request behind */
			cli_sends(&c, "GET /defer HTTP/1.1\r\nHost: t\r\n\r\n");
			cli_close(&c);
			cli_open(&c);
			break;
		}
	}
	cli_close(&c);
	return NULL;
}

static void test_concurrent_mix(void **state)
{
	pthread_t th[8];
	int i;

	(void)state;
	atomic_store(&g_mix_errors, 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, mix_client, (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&g_mix_errors), 0);
}

static void test_stop_with_live_connections(void **state)
{
	int port;
	ft_httpd_t *s = start_server(5000, 5000, 5000, &port);
	cli_t idle, slow, body;
	int before = atomic_load(&g_gone_released);

	(void)state;
	cli_open_port(&idle, port);
	cli_open_port(&slow, port);
	cli_open_port(&body, port);
	cli_sends(&slow, "GET /defer-slow HTTP/1.1\r\nHost: t\r\n\r\n");
	cli_sends(&body, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
	usleep(50000);
	ft_httpd_stop(s);
	/* the deferred request was answered (or released) before stop returned */
	assert_int_equal(atomic_load(&g_gone_released), before + 1);
	assert_true(cli_eof(&idle));
	cli_close(&idle);
	cli_close(&slow);
	cli_close(&body);
}

static int setup(void **state)
{
	int fd;

	(void)state;
	file_data = malloc(FILE_SIZE);
	fill_pattern(file_data, FILE_SIZE, 42);
	snprintf(file_path, sizeof(file_path), "/tmp/ft-httpd-test-XXXXXX");
	fd = mkstemp(file_path);
	if (fd < 0 || write(fd, file_data, FILE_SIZE) != FILE_SIZE)
		return -1;
	close(fd);
	srv = start_server(10000, 10000, 10000, &srv_port);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ft_httpd_stop(srv);
	unlink(file_path);
	free(file_data);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_small),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_keepalive_three),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_put_streamed),
		cmocka_unit_test(test_put_chunked),
		cmocka_unit_test(test_expect_continue),
		cmocka_unit_test(test_body_reset),
		cmocka_unit_test(test_defer),
		cmocka_unit_test(test_defer_client_gone),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_file_short),
		cmocka_unit_test(test_limits_431),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_http10),
		cmocka_unit_test(test_query_path_headers),
		cmocka_unit_test(test_hooks_order),
		cmocka_unit_test(test_body_all_limit),
		cmocka_unit_test(test_timeouts),
		cmocka_unit_test(test_many_sequential),
		cmocka_unit_test(test_concurrent_mix),
		cmocka_unit_test(test_stop_with_live_connections),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
