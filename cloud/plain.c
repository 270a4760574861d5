/* SPDX-License-Identifier: Apache-2.0 */
/* Backend GETs over plain http:// on sockets of our own: bodies received straight into the caller's buffer or spliced to a file, one wakeup per chunk, idle connections pooled. */
#include "cloud/internal.h"

#include "http/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * DESIGN
 * A provider that reads from a plain HTTP origin (ht) marks its GET transfer plain_ok; the engine
 * (transfer.c) then runs it here instead of through libcurl. What libcurl costs on that path, per
 * network chunk: a receive into its own buffer, a copy into ours, and a poll/recv round per TCP
 * wakeup, which on a link slower than the target (a real origin) means one per few packets. Here
 * the body is received with recv(2) straight into the caller's buffer, after a poll(2) that
 * SO_RCVLOWAT holds back until a whole read's worth (the caller's buffer, or what is left of the
 * body) is queued: one wakeup, one poll and one recv per read, whatever the link's pace.
 * SO_RCVLOWAT is never above the bytes still to come, so the last read cannot wait for bytes that
 * will never arrive; the kernel also wakes the poll early under memory pressure or a closing
 * window, so a low-water mark cannot stall the sender. A read waits at most GATHER_MS for that
 * much; then it takes what is there (an origin that sends in dribs, or pauses, still has every
 * byte passed on at once, and the stall timeout counts from there as before).
 *
 * ft_be_plain_splice moves body bytes to a file instead, splice(2) from the socket to a pipe of the
 * connection's (PIPE_BYTES) and from there to the file: the socket buffers' pages are handed
 * over, and the only copy is the file write's, into the page cache.
 *
 * Scope: GET without a request body. The response is HTTP/1.x with a Content-Length, or a body
 * delimited by the connection's close. A chunked response (Transfer-Encoding) is not decoded
 * here: its connection is closed and the engine sends the request again through libcurl
 * (ft_be_plain_start's *fallback), which only costs the repeated request for such origins.
 *
 * Timeouts as in the engine: the connect gets connect_timeout_ms; every wait for the response
 * then fails after stall_timeout_ms without a byte (the first one, the response headers, gets
 * connect_timeout_ms on top). Cancellation (x->cancel) is polled every POLL_SLICE_MS.
 *
 * Connections: a connection whose response body was read to its end (Content-Length) and that
 * the origin did not mark "Connection: close" goes back to a process-wide idle list of POOL_MAX
 * (keyed by host[:port]); a request on a reused connection that finds it closed before any
 * response byte is sent again once on a new one (GET is idempotent). Every take from and put to
 * the list first drops the idle connections the origin has closed and those idle for IDLE_MAX_MS:
 * an origin that went away, or one no longer asked, would otherwise keep its sockets and pipes
 * open in the list for good.
 */

#define POOL_MAX 16
#define IDLE_MAX_MS 30000   /* an idle connection older than this is closed rather than reused */
#define HEAD_MAX (16 << 10) /* response status line and headers */
#define POLL_SLICE_MS 250
#define PIPE_BYTES (1 << 20) /* ft_be_plain_splice: the most one call moves (the default pipe-max-size) */
#define GATHER_MS 50         /* how long a read waits for a whole read's worth before taking what is there */

struct ft_be_plain {
	int fd;
	int reused;            /* the connection came from the idle list */
	char key[FT_HOST_MAX]; /* host[:port] it is connected to */
	char *head;            /* HEAD_MAX: the response head, then body bytes that came with it */
	size_t off, len;       /* buffered body bytes: head[off, off + len) */
	int64_t left;          /* body bytes still on the socket; -1 until the close */
	int lowat;             /* the socket's SO_RCVLOWAT */
	int keep;              /* reusable once the body is read to its end */
	int http10;            /* the response is HTTP/1.0 */
	int chunked;           /* Transfer-Encoding: chunked (the engine asks libcurl then) */
	int64_t clen;          /* Content-Length, -1 without one */
	int eof;
	int pipe_rd, pipe_wr; /* ft_be_plain_splice's pipe, -1 until first used; empty between calls */
	size_t pipe_cap;
	int64_t idle_since;  /* now_ms() when it went on the idle list */
	ft_be_plain_t *next; /* on the idle list */
};

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static ft_be_plain_t *idle_head;
static int idle_count;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_free(ft_be_plain_t *p)
{
	if (p == NULL)
		return;
	if (p->fd >= 0)
		close(p->fd);
	if (p->pipe_rd >= 0) {
		close(p->pipe_rd);
		close(p->pipe_wr);
	}
	free(p->head);
	free(p);
}

static const char *prov_name(const ft_be_xfer_t *x)
{
	return ft_backend_provider_name(x->backend->cfg.provider);
}

/* Marks x dead with code and fills err (as the engine's xfer_die). */
static ft_backend_err_t die(ft_be_xfer_t *x, ft_backend_err_t code, ft_backend_error_t *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static ft_backend_err_t die(ft_be_xfer_t *x, ft_backend_err_t code, ft_backend_error_t *err, const char *fmt, ...)
{
	char why[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	x->dead = code;
	return ft_be_fail(err, code, x->headers_done ? x->status : 0, "%s %s %s: %s", prov_name(x), x->op, x->what,
			  why);
}

/* ---- connections ---- */

/* Whether idle connection p can carry another request: no EOF, error or stray bytes on it. */
static bool idle_usable(ft_be_plain_t *p)
{
	char c;
	ssize_t n = recv(p->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Unlinks the idle connections the origin closed or that waited longer than IDLE_MAX_MS and returns
 * them as a list for conn_free; idle_lock held. */
static ft_be_plain_t *idle_reap_locked(int64_t now)
{
	ft_be_plain_t *gone = NULL, **pp = &idle_head;

	while (*pp != NULL) {
		ft_be_plain_t *p = *pp;

		if (now - p->idle_since <= IDLE_MAX_MS && idle_usable(p)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		idle_count--;
		p->next = gone;
		gone = p;
	}
	return gone;
}

static void conn_free_list(ft_be_plain_t *p)
{
	while (p != NULL) {
		ft_be_plain_t *next = p->next;

		conn_free(p);
		p = next;
	}
}

/* An idle connection to key that is still open, or NULL. */
static ft_be_plain_t *idle_take(const char *key)
{
	ft_be_plain_t *p = NULL, **pp, *gone;

	pthread_mutex_lock(&idle_lock);
	gone = idle_reap_locked(now_ms());
	for (pp = &idle_head; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->key, key) == 0) {
			p = *pp;
			*pp = p->next;
			idle_count--;
			break;
		}
	}
	pthread_mutex_unlock(&idle_lock);
	conn_free_list(gone);
	if (p != NULL)
		p->reused = 1;
	return p;
}

static void idle_put(ft_be_plain_t *p)
{
	ft_be_plain_t *gone;

	p->next = NULL;
	p->off = p->len = 0;
	p->idle_since = now_ms();
	pthread_mutex_lock(&idle_lock);
	gone = idle_reap_locked(p->idle_since);
	if (idle_count < POOL_MAX) {
		p->next = idle_head;
		idle_head = p;
		idle_count++;
		p = NULL;
	}
	pthread_mutex_unlock(&idle_lock);
	conn_free_list(gone);
	conn_free(p);
}

void ft_be_plain_cleanup(void)
{
	ft_be_plain_t *p;

	pthread_mutex_lock(&idle_lock);
	p = idle_head;
	idle_head = NULL;
	idle_count = 0;
	pthread_mutex_unlock(&idle_lock);
	conn_free_list(p);
}

/* Splits "host[:port]" / "[v6][:port]" into host and port (default 80); 0 or -1. */
static int split_host(const char *hostport, char *host, size_t cap, char *port, size_t pcap)
{
	const char *colon;
	size_t n;

	if (hostport[0] == '[') {
		const char *end = strchr(hostport, ']');

		if (end == NULL)
			return -1;
		n = (size_t)(end - hostport - 1);
		colon = end[1] == ':' ? end + 1 : NULL;
		hostport++;
	} else {
		colon = strrchr(hostport, ':');
		n = colon != NULL ? (size_t)(colon - hostport) : strlen(hostport);
	}
	if (n == 0 || n >= cap)
		return -1;
	memcpy(host, hostport, n);
	host[n] = '\0';
	snprintf(port, pcap, "%s", colon != NULL && colon[1] != '\0' ? colon + 1 : "80");
	return 0;
}

/* Waits for events on fd within ms, in slices that watch x->cancel. 1 ready, 0 timeout, -1 canceled. */
static int wait_fd(ft_be_xfer_t *x, int fd, short events, int64_t ms)
{
	int64_t end = now_ms() + ms;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = events};
		int64_t wait = end - now_ms();
		int n;

		if (atomic_load(&x->cancel))
			return -1;
		if (wait <= 0)
			return 0;
		n = poll(&pfd, 1, (int)(wait < POLL_SLICE_MS ? wait : POLL_SLICE_MS));
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return 1; /* let the following call report the error */
	}
}

/* A new connection to x's host within connect_timeout_ms; NULL with err filled (x dead). */
static ft_be_plain_t *conn_open(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	char host[FT_HOST_MAX], port[16];
	ft_be_plain_t *p;
	int rc, one = 1, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (split_host(x->host, host, sizeof(host), port, sizeof(port)) != 0) {
		die(x, FT_BACKEND_ECONFIG, err, "bad host \"%s\"", x->host);
		return NULL;
	}
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc != 0) {
		die(x, FT_BACKEND_ECONNECT, err, "cannot resolve %s: %s", host, gai_strerror(rc));
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL || (p->head = malloc(HEAD_MAX)) == NULL) {
		free(p);
		freeaddrinfo(ai);
		die(x, FT_BACKEND_ENOMEM, err, "out of memory");
		return NULL;
	}
	p->fd = p->pipe_rd = p->pipe_wr = -1;
	snprintf(p->key, sizeof(p->key), "%s", x->host);
	p->lowat = 1;
	p->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		rc = errno;
		goto fail;
	}
	setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(p->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	if (connect(p->fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
		rc = errno;
		goto fail;
	}
	switch (wait_fd(x, p->fd, POLLOUT, x->backend->cfg.connect_timeout_ms)) {
	case -1:
		freeaddrinfo(ai);
		conn_free(p);
		die(x, FT_BACKEND_ECANCELED, err, "canceled");
		return NULL;
	case 0:
		freeaddrinfo(ai);
		conn_free(p);
		die(x, FT_BACKEND_ETIMEDOUT, err, "connect to %s timed out after %d ms", x->host,
		    x->backend->cfg.connect_timeout_ms);
		return NULL;
	}
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
		rc = soerr != 0 ? soerr : errno;
		goto fail;
	}
	freeaddrinfo(ai);
	return p;
fail:
	freeaddrinfo(ai);
	conn_free(p);
	die(x, FT_BACKEND_ECONNECT, err, "connect to %s: %s", x->host, strerror(rc));
	return NULL;
}

/* ---- request and response head ---- */

static int send_all(ft_be_xfer_t *x, int fd, const char *buf, size_t len, int64_t ms)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			int w = wait_fd(x, fd, POLLOUT, ms);

			if (w <= 0)
				return w < 0 ? -ECANCELED : -ETIMEDOUT;
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int build_request(const ft_be_xfer_t *x, ft_strbuf_t *req)
{
	ft_strbuf_addf(req, "GET %s%s%s HTTP/1.1\r\nHost: %s\r\n", x->path, x->query[0] != '\0' ? "?" : "", x->query,
		       x->host);
	for (int i = 0; i < x->n_hdr; i++)
		ft_strbuf_addf(req, "%s: %s\r\n", x->hdr[i].name, x->hdr[i].value);
	ft_strbuf_adds(req, "\r\n");
	return req->failed ? -1 : 0;
}

static void resp_headers_clear(ft_be_xfer_t *x)
{
	for (int i = 0; i < x->n_rhdr; i++) {
		free(x->rhdr[i].name);
		free(x->rhdr[i].value);
	}
	x->n_rhdr = 0;
}

/* Copies the parsed headers into x (strings of its own). 0, or -1 out of memory. */
static int keep_headers(ft_be_xfer_t *x, const ft_hp_header_t *h, size_t n)
{
	resp_headers_clear(x);
	for (size_t i = 0; i < n; i++) {
		x->rhdr[i].name = strndup(h[i].name, h[i].name_len);
		x->rhdr[i].value = strndup(h[i].value, h[i].value_len);
		x->n_rhdr = (int)i + 1;
		if (x->rhdr[i].name == NULL || x->rhdr[i].value == NULL)
			return -1;
	}
	return 0;
}

/*
 * Receives the final response head (1xx heads skipped) within the stall budget and parses it with
 * the server's own response-head parser (http/parse.h, under libFuzzer). OK, or the failure (x
 * dead). *none: the connection closed before any byte of a response (a stale reused connection).
 * *odd: a head that parser does not take (a transfer coding other than chunked, say), which the
 * engine then asks libcurl for.
 */
static ft_backend_err_t read_head(ft_be_xfer_t *x, ft_be_plain_t *p, ft_backend_error_t *err, int *none, int *odd)
{
	const ft_backend_config_t *cfg = &x->backend->cfg;
	int64_t budget = (int64_t)cfg->stall_timeout_ms + cfg->connect_timeout_ms;
	ft_hp_header_t hdrs[FT_BE_MAX_RESP_HEADERS];
	ft_hp_resp_head_t rh;
	ft_hp_result_t r;
	size_t have = 0;
	int any = 0;

	*none = 0;
	*odd = 0;
	for (;;) {
		while ((r = ft_hp_parse_resp_head(p->head, have, HEAD_MAX, hdrs, FT_BE_MAX_RESP_HEADERS, &rh)) ==
		       FT_HP_AGAIN) {
			ssize_t n = recv(p->fd, p->head + have, HEAD_MAX - have, MSG_DONTWAIT);

			if (n > 0) {
				have += (size_t)n;
				any = 1;
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
				int w = wait_fd(x, p->fd, POLLIN, budget);

				if (w < 0)
					return die(x, FT_BACKEND_ECANCELED, err, "canceled");
				if (w == 0)
					return die(x, FT_BACKEND_ETIMEDOUT, err, "no response for %lld ms",
						   (long long)budget);
				continue;
			}
			*none = !any;
			return die(x, FT_BACKEND_ECONNECT, err, "connection lost before the response: %s",
				   n == 0 ? "closed by the origin" : strerror(errno));
		}
		if (r != FT_HP_DONE) {
			*odd = r == FT_HP_BAD;
			return die(x, FT_BACKEND_EPROTO, err, "%s",
				   r == FT_HP_TOO_LARGE ? "response head longer than 16 KiB or with too many headers"
				   : r == FT_HP_VERSION ? "not an HTTP/1.x response"
							: "malformed response head");
		}
		x->status = rh.status;
		if (keep_headers(x, hdrs, rh.nheaders) != 0)
			return die(x, FT_BACKEND_ENOMEM, err, "out of memory");
		p->http10 = rh.version_minor == 0;
		p->keep = rh.keep_alive;
		p->chunked = rh.chunked;
		p->clen = rh.content_length;
		memmove(p->head, p->head + rh.head_len, have - rh.head_len);
		have -= rh.head_len;
		if (x->status >= 200)
			break;
		budget = cfg->stall_timeout_ms; /* 1xx: the final head follows */
	}
	p->off = 0;
	p->len = have;
	p->eof = 0;
	return FT_BACKEND_OK;
}

/* Body framing from the head: 1 when the body is chunked (not handled here), else 0 with p->left set. */
static int plan_body(ft_be_xfer_t *x, ft_be_plain_t *p)
{
	int64_t cl = p->clen;

	if (p->chunked)
		return 1;
	if (x->status == 204 || x->status == 304)
		cl = 0;
	if (cl < 0) {
		p->left = -1;
		p->keep = 0; /* the close ends the body */
		return 0;
	}
	if ((int64_t)p->len > cl) { /* bytes after the body: the connection is out of step */
		p->len = (size_t)cl;
		p->keep = 0;
	}
	p->left = cl - (int64_t)p->len;
	return 0;
}

ft_backend_err_t ft_be_plain_start(ft_be_xfer_t *x, ft_backend_error_t *err, int *fallback)
{
	ft_strbuf_t req = {0};
	ft_backend_err_t rc = FT_BACKEND_OK;
	int none = 0, odd = 0;

	*fallback = 0;
	if (build_request(x, &req) != 0) {
		ft_strbuf_free(&req);
		return die(x, FT_BACKEND_ENOMEM, err, "out of memory building the request");
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		ft_be_plain_t *p = attempt == 0 ? idle_take(x->host) : NULL;

		if (p == NULL && (p = conn_open(x, err)) == NULL) {
			rc = x->dead;
			break;
		}
		x->plain = p;
		int s = send_all(x, p->fd, req.p, req.len, x->backend->cfg.stall_timeout_ms);
		if (s == 0) {
			rc = read_head(x, p, err, &none, &odd);
		} else {
			none = s != -ECANCELED && s != -ETIMEDOUT;
			rc = die(x,
				 s == -ECANCELED   ? FT_BACKEND_ECANCELED
				 : s == -ETIMEDOUT ? FT_BACKEND_ETIMEDOUT
						   : FT_BACKEND_ECONNECT,
				 err, "sending the request: %s", strerror(-s));
		}
		if (rc == FT_BACKEND_OK || !p->reused || !none)
			break;
		/* A reused connection the origin had closed: once more on a new one. */
		conn_free(p);
		x->plain = NULL;
		x->dead = FT_BACKEND_OK;
		resp_headers_clear(x);
	}
	ft_strbuf_free(&req);
	if (rc != FT_BACKEND_OK && odd) { /* a head the strict parser refused: libcurl has the last word */
		conn_free(x->plain);
		x->plain = NULL;
		x->dead = FT_BACKEND_OK;
		x->status = 0;
		resp_headers_clear(x);
		*fallback = 1;
		return FT_BACKEND_OK;
	}
	if (rc != FT_BACKEND_OK)
		return rc;
	x->connected = 1;
	x->headers_done = 1;
	if (plan_body(x, x->plain)) {
		/* Chunked: the engine asks again through libcurl. */
		conn_free(x->plain);
		x->plain = NULL;
		x->headers_done = 0;
		x->status = 0;
		resp_headers_clear(x);
		*fallback = 1;
	}
	return FT_BACKEND_OK;
}

/* ---- body ---- */

/* Sets SO_RCVLOWAT to want (when it differs); a failure only costs wakeups. */
static void set_lowat(ft_be_plain_t *p, int want)
{
	if (want < 1)
		want = 1;
	if (want != p->lowat && setsockopt(p->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof(want)) == 0)
		p->lowat = want;
}

/*
 * Body bytes to ask the socket for (cap cut at what is left), with the low-water mark set for
 * them; *gather says whether the wait holds out for all of them. 0: the body is complete.
 */
static size_t body_plan(ft_be_plain_t *p, size_t cap, int *gather)
{
	if (p->eof || p->left == 0) {
		p->eof = 1;
		return 0;
	}
	if (p->left > 0 && (int64_t)cap > p->left)
		cap = (size_t)p->left;
	*gather = p->left > 0 && cap > 1;
	set_lowat(p, *gather ? (int)(cap < (1u << 30) ? cap : (1u << 30)) : 1);
	return cap;
}

/* Waits until the socket is readable: briefly for the low-water mark, then for any byte. OK or the failure. */
static ft_backend_err_t body_wait(ft_be_xfer_t *x, ft_be_plain_t *p, int *gather, ft_backend_error_t *err)
{
	for (;;) {
		int w = wait_fd(x, p->fd, POLLIN, *gather ? GATHER_MS : x->backend->cfg.stall_timeout_ms);

		if (w < 0)
			return die(x, FT_BACKEND_ECANCELED, err, "canceled");
		if (w > 0)
			return FT_BACKEND_OK;
		if (!*gather)
			return die(x, FT_BACKEND_ETIMEDOUT, err, "no progress for %d ms",
				   x->backend->cfg.stall_timeout_ms);
		*gather = 0; /* take what is there */
		set_lowat(p, 1);
	}
}

/* The socket's end (n == 0) or error (n < 0) while body bytes were wanted: the end of a close-delimited body, or the failure. */
static ft_backend_err_t body_end(ft_be_xfer_t *x, ft_be_plain_t *p, ssize_t n, ft_backend_error_t *err)
{
	if (n < 0)
		return die(x, FT_BACKEND_ETRUNCATED, err, "receiving the body: %s", strerror(errno));
	if (p->left < 0) {
		p->eof = 1;
		return FT_BACKEND_OK;
	}
	return die(x, FT_BACKEND_ETRUNCATED, err, "connection closed with %lld body bytes missing", (long long)p->left);
}

static void body_got(ft_be_xfer_t *x, ft_be_plain_t *p, size_t n)
{
	if (p->left > 0)
		p->left -= (int64_t)n;
	x->body_bytes += (int64_t)n;
}

ft_backend_err_t ft_be_plain_read(ft_be_xfer_t *x, void *buf, size_t cap, size_t *got, ft_backend_error_t *err)
{
	ft_be_plain_t *p = x->plain;
	int gather = 0;
	ft_backend_err_t rc;

	*got = 0;
	if (p->len > 0) {
		size_t n = p->len < cap ? p->len : cap;

		memcpy(buf, p->head + p->off, n);
		p->off += n;
		p->len -= n;
		x->body_bytes += (int64_t)n;
		*got = n;
		return FT_BACKEND_OK;
	}
	cap = body_plan(p, cap, &gather);
	if (cap == 0)
		return FT_BACKEND_OK;
	for (;;) {
		if ((rc = body_wait(x, p, &gather, err)) != FT_BACKEND_OK)
			return rc;
		ssize_t n = recv(p->fd, buf, cap, MSG_DONTWAIT);
		if (n > 0) {
			body_got(x, p, (size_t)n);
			*got = (size_t)n;
			return FT_BACKEND_OK;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return body_end(x, p, n, err);
	}
}

/* The connection's pipe (created on first use, PIPE_BYTES when the system allows); 0 or -errno. */
static int pipe_ready(ft_be_plain_t *p)
{
	int fds[2];

	if (p->pipe_rd >= 0)
		return 0;
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return -errno;
	p->pipe_rd = fds[0];
	p->pipe_wr = fds[1];
	int sz = fcntl(p->pipe_wr, F_SETPIPE_SZ, PIPE_BYTES);
	if (sz <= 0)
		sz = fcntl(p->pipe_wr, F_GETPIPE_SZ);
	p->pipe_cap = sz > 0 ? (size_t)sz : 65536;
	return 0;
}

/* Moves n bytes from the pipe to fd at off; 0 or -errno (a short write without an error is -EIO). */
static int pipe_drain(ft_be_plain_t *p, int fd, int64_t off, size_t n)
{
	loff_t o = (loff_t)off;

	while (n > 0) {
		ssize_t m = splice(p->pipe_rd, NULL, fd, &o, n, SPLICE_F_MOVE);

		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			return m < 0 ? -errno : -EIO;
		n -= (size_t)m;
	}
	return 0;
}

ft_backend_err_t ft_be_plain_splice(ft_be_xfer_t *x, int fd, int64_t off, size_t cap, size_t *got, int *fd_errno,
				    ft_backend_error_t *err)
{
	ft_be_plain_t *p = x->plain;
	int gather = 0, e;
	ft_backend_err_t rc;

	*got = 0;
	*fd_errno = 0;
	if (p->len > 0) { /* body bytes that came with the head */
		size_t n = p->len < cap ? p->len : cap;

		for (size_t done = 0; done < n;) {
			ssize_t w = pwrite(fd, p->head + p->off + done, n - done, (off_t)(off + (int64_t)done));

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				*fd_errno = w < 0 ? errno : EIO;
				return die(x, FT_BACKEND_ECANCELED, err, "writing the body: %s", strerror(*fd_errno));
			}
			done += (size_t)w;
		}
		p->off += n;
		p->len -= n;
		x->body_bytes += (int64_t)n;
		*got = n;
		return FT_BACKEND_OK;
	}
	if ((e = pipe_ready(p)) != 0) {
		*fd_errno = -e;
		return die(x, FT_BACKEND_ECANCELED, err, "cannot make a pipe: %s", strerror(-e));
	}
	cap = body_plan(p, cap < p->pipe_cap ? cap : p->pipe_cap, &gather);
	if (cap == 0)
		return FT_BACKEND_OK;
	for (;;) {
		if ((rc = body_wait(x, p, &gather, err)) != FT_BACKEND_OK)
			return rc;
		ssize_t n = splice(p->fd, NULL, p->pipe_wr, NULL, cap, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			if ((e = pipe_drain(p, fd, off, (size_t)n)) != 0) {
				*fd_errno = -e;
				return die(x, FT_BACKEND_ECANCELED, err, "writing the body: %s", strerror(-e));
			}
			body_got(x, p, (size_t)n);
			*got = (size_t)n;
			return FT_BACKEND_OK;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return body_end(x, p, n, err);
	}
}

void ft_be_plain_free(ft_be_xfer_t *x)
{
	ft_be_plain_t *p = x->plain;

	if (p == NULL)
		return;
	x->plain = NULL;
	if (p->keep && p->eof && x->dead == FT_BACKEND_OK && !atomic_load(&x->cancel)) {
		set_lowat(p, 1);
		p->reused = 0;
		idle_put(p);
	} else {
		conn_free(p);
	}
}
