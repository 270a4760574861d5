/* SPDX-License-Identifier: Apache-2.0 */
/* Backend HTTP transfer engine: pooled libcurl handles, streaming body handoff, stall timeouts, cancellation. */
#include "cloud/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rpc/client.h"

/*
 * DESIGN
 * Each transfer runs on a pooled pair of a curl multi handle and one easy handle. The multi
 * handle owns the connection cache, so keeping the pair together (instead of a fresh multi per
 * transfer) is what makes keep-alive reuse work; an idle pair goes back to a process-wide
 * free list (at most POOL_MAX), whichever thread used it.
 *
 * The calling thread drives the transfer itself (curl_multi_perform + curl_multi_poll) only
 * while it waits inside ft_be_xfer_start/read, so no background thread exists and nothing moves
 * while the caller is busy elsewhere: TCP backpressure throttles the backend. The write callback
 * copies into the caller's buffer, then into a stage of one network chunk; when both are full it
 * returns CURL_WRITEFUNC_PAUSE and curl keeps the chunk until the next read unpauses it.
 *
 * Timeouts: curl enforces the connect timeout. The stall timeout is ours, in milliseconds: a wait
 * fails when no byte moved (header, body, or upload) for stall_timeout_ms; the first wait of a
 * transfer gets connect_timeout_ms on top. Cancellation sets a flag and wakes the poll
 * (curl_multi_wakeup is safe from any thread).
 */

#define POOL_MAX 8 /* idle handles kept: each holds a STAGE_BYTES receive buffer */
/*
 * libcurl's receive buffer (CURLOPT_BUFFERSIZE: one recv, one write callback) and our stage. At
 * 256 KiB, the cold GET's read size (coldget.c), a full network chunk lands in the caller's buffer
 * with nothing staged; an 8 MiB cold object takes about 38 recvfrom and 29 poll calls instead of
 * 130 and 110 at 64 KiB, and the target's CPU per GiB cold drops by about 15%. 512 KiB (libcurl
 * takes up to 10 MiB since 7.88.0, 512 KiB before) saved no further CPU measurably, for twice the
 * memory per transfer (and, before libcurl 8.7, per idle pooled handle, which keeps its buffer).
 */
#define STAGE_BYTES (256 << 10)
#define POLL_SLICE_MS 1000

struct ft_be_handle {
	CURLM *multi;
	CURL *easy;
	ft_be_handle_t *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ft_be_handle_t *pool_head;
static int pool_count;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void handle_destroy(ft_be_handle_t *h)
{
	if (h == NULL)
		return;
	if (h->easy != NULL)
		curl_easy_cleanup(h->easy);
	if (h->multi != NULL)
		curl_multi_cleanup(h->multi);
	free(h);
}

static ft_be_handle_t *handle_get(void)
{
	ft_be_handle_t *h;

	pthread_mutex_lock(&pool_lock);
	h = pool_head;
	if (h != NULL) {
		pool_head = h->next;
		pool_count--;
	}
	pthread_mutex_unlock(&pool_lock);
	if (h != NULL)
		return h;
	if (ft_client_global_init() != 0)
		return NULL;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->multi = curl_multi_init();
	h->easy = curl_easy_init();
	if (h->multi == NULL || h->easy == NULL) {
		handle_destroy(h);
		return NULL;
	}
	return h;
}

/* Returns h to the pool (its options reset, its multi keeping the idle connection). */
static void handle_put(ft_be_handle_t *h)
{
	curl_easy_reset(h->easy);
	pthread_mutex_lock(&pool_lock);
	if (pool_count < POOL_MAX) {
		h->next = pool_head;
		pool_head = h;
		pool_count++;
		h = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	handle_destroy(h);
}

void ft_backend_global_cleanup(void)
{
	ft_be_handle_t *h;

	pthread_mutex_lock(&pool_lock);
	h = pool_head;
	pool_head = NULL;
	pool_count = 0;
	pthread_mutex_unlock(&pool_lock);
	ft_be_plain_cleanup();
	while (h != NULL) {
		ft_be_handle_t *next = h->next;

		handle_destroy(h);
		h = next;
	}
}

int ft_backend_global_init(void)
{
	return ft_client_global_init();
}

/* ---- building ---- */

ft_be_xfer_t *ft_be_xfer_new(ft_backend_t *b, const char *op, const char *what)
{
	ft_be_xfer_t *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return NULL;
	x->handle = handle_get();
	if (x->handle == NULL) {
		free(x);
		return NULL;
	}
	x->backend = b;
	x->op = op;
	x->what = what != NULL ? what : "";
	x->query = NULL;
	atomic_init(&x->cancel, 0);
	return x;
}

int ft_be_xfer_set(ft_be_xfer_t *x, const char *method, const ft_be_endpoint_t *ep, const char *path, const char *query)
{
	ft_strbuf_t origin = {0};

	snprintf(x->method, sizeof(x->method), "%s", method);
	ft_strbuf_addf(&origin, "%s://%s", ep->scheme, ep->host);
	free(x->origin);
	free(x->host);
	free(x->path);
	free(x->query);
	x->origin = origin.failed ? NULL : origin.p;
	x->host = strdup(ep->host);
	x->path = strdup(path != NULL && *path != '\0' ? path : "/");
	x->query = strdup(query != NULL ? query : "");
	if (x->origin == NULL || x->host == NULL || x->path == NULL || x->query == NULL) {
		x->oom = 1;
		return -1;
	}
	return 0;
}

int ft_be_xfer_header(ft_be_xfer_t *x, const char *name, const char *fmt, ...)
{
	char *value = NULL;
	va_list ap;
	int n;

	if (x->n_hdr >= FT_BE_MAX_HEADERS) {
		x->oom = 1;
		return -1;
	}
	va_start(ap, fmt);
	n = vasprintf(&value, fmt, ap);
	va_end(ap);
	if (n < 0) {
		x->oom = 1;
		return -1;
	}
	x->hdr[x->n_hdr].name = strdup(name);
	x->hdr[x->n_hdr].value = value;
	if (x->hdr[x->n_hdr].name == NULL) {
		free(value);
		x->oom = 1;
		return -1;
	}
	x->n_hdr++;
	return 0;
}

const char *ft_be_xfer_req_header(const ft_be_xfer_t *x, const char *name)
{
	for (int i = 0; i < x->n_hdr; i++)
		if (strcasecmp(x->hdr[i].name, name) == 0)
			return x->hdr[i].value;
	return NULL;
}

void ft_be_xfer_body(ft_be_xfer_t *x, const ft_backend_body_t *body)
{
	x->src = body->read;
	x->src_rewind = body->rewind;
	x->src_ctx = body->ctx;
	x->src_len = body->length;
}

/* ---- callbacks (run inside curl_multi_perform or curl_easy_pause on the driving thread) ---- */

static void resp_headers_clear(ft_be_xfer_t *x)
{
	for (int i = 0; i < x->n_rhdr; i++) {
		free(x->rhdr[i].name);
		free(x->rhdr[i].value);
	}
	x->n_rhdr = 0;
}

static void trim(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r' || (*s)[*n - 1] == '\n'))
		(*n)--;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
	ft_be_xfer_t *x = ud;
	size_t n = size * nitems;
	const char *colon;

	x->progress++;
	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		const char *sp = memchr(buf, ' ', n);

		resp_headers_clear(x);
		x->status = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
		return n;
	}
	if (n <= 2 && (n == 0 || buf[0] == '\r' || buf[0] == '\n')) {
		if (x->status >= 200)
			x->headers_done = 1;
		return n;
	}
	colon = memchr(buf, ':', n);
	if (colon == NULL || x->n_rhdr >= FT_BE_MAX_RESP_HEADERS)
		return n;
	{
		const char *name = buf, *value = colon + 1;
		size_t name_len = (size_t)(colon - buf), value_len = n - name_len - 1;

		trim(&name, &name_len);
		trim(&value, &value_len);
		x->rhdr[x->n_rhdr].name = strndup(name, name_len);
		x->rhdr[x->n_rhdr].value = strndup(value, value_len);
		if (x->rhdr[x->n_rhdr].name == NULL || x->rhdr[x->n_rhdr].value == NULL) {
			free(x->rhdr[x->n_rhdr].name);
			free(x->rhdr[x->n_rhdr].value);
			return 0; /* aborts with CURLE_WRITE_ERROR */
		}
		x->n_rhdr++;
	}
	return n;
}

static size_t on_write(char *buf, size_t size, size_t nmemb, void *ud)
{
	ft_be_xfer_t *x = ud;
	size_t n = size * nmemb, to_user = 0, user_room, stage_room;

	if (x->stage_len > 0 && x->stage_off > 0) {
		memmove(x->stage, x->stage + x->stage_off, x->stage_len);
		x->stage_off = 0;
	}
	user_room = x->user_buf != NULL ? x->user_cap - x->user_got : 0;
	stage_room = x->stage_cap - x->stage_off - x->stage_len;
	if (n > user_room + stage_room) {
		/* Progress is guaranteed: with nothing buffered, the stage grows to hold one chunk. */
		if (x->user_got > 0 || x->stage_len > 0) {
			x->paused = 1;
			return CURL_WRITEFUNC_PAUSE;
		}
		char *grown = realloc(x->stage, n);

		if (grown == NULL)
			return 0;
		x->stage = grown;
		x->stage_cap = n;
		x->stage_off = 0;
		stage_room = n;
	}
	if (user_room > 0) {
		to_user = n < user_room ? n : user_room;
		memcpy(x->user_buf + x->user_got, buf, to_user);
		x->user_got += to_user;
	}
	if (n > to_user) {
		memcpy(x->stage + x->stage_off + x->stage_len, buf + to_user, n - to_user);
		x->stage_len += n - to_user;
	}
	x->body_bytes += (int64_t)n;
	x->progress++;
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	ft_be_xfer_t *x = ud;
	size_t cap = size * nitems;
	int64_t left = x->src_len - x->src_sent, got;

	if (atomic_load(&x->cancel))
		return CURL_READFUNC_ABORT;
	if (left <= 0)
		return 0;
	if ((int64_t)cap > left)
		cap = (size_t)left;
	got = x->src(x->src_ctx, buf, cap);
	if (got <= 0 || got > (int64_t)cap) {
		x->src_failed = 1;
		return CURL_READFUNC_ABORT;
	}
	x->src_sent += got;
	x->progress++;
	return (size_t)got;
}

/*
 * libcurl rewinds an upload only to resend it from the start (a reused connection that died under
 * the request). A source without rewind makes that exchange fail instead.
 */
static int on_seek(void *ud, curl_off_t offset, int origin)
{
	ft_be_xfer_t *x = ud;

	if (offset != 0 || origin != SEEK_SET || x->src_rewind == NULL)
		return CURL_SEEKFUNC_CANTSEEK;
	if (x->src_rewind(x->src_ctx) != 0)
		return CURL_SEEKFUNC_FAIL;
	x->src_sent = 0;
	return CURL_SEEKFUNC_OK;
}

/* ---- driving ---- */

ft_backend_err_t ft_be_fail(ft_backend_error_t *err, ft_backend_err_t code, long status, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return code;
	err->code = code;
	err->http_status = status;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

static const char *prov_name(const ft_be_xfer_t *x)
{
	return ft_backend_provider_name(x->backend->cfg.provider);
}

static ft_backend_err_t curl_code_err(const ft_be_xfer_t *x, CURLcode c)
{
	switch (c) {
	case CURLE_OK:
		return FT_BACKEND_OK;
	case CURLE_OPERATION_TIMEDOUT:
		return FT_BACKEND_ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return FT_BACKEND_ENOMEM;
	case CURLE_ABORTED_BY_CALLBACK:
	case CURLE_READ_ERROR:
		return x->src_failed ? FT_BACKEND_ESOURCE : FT_BACKEND_ECANCELED;
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_TOO_MANY_REDIRECTS:
		return FT_BACKEND_EPROTO;
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
		return x->headers_done ? FT_BACKEND_ETRUNCATED : FT_BACKEND_ECONNECT;
	default:
		return x->headers_done ? FT_BACKEND_ETRUNCATED : FT_BACKEND_ECONNECT;
	}
}

/* Marks x dead with code and fills err. */
static ft_backend_err_t xfer_die(ft_be_xfer_t *x, ft_backend_err_t code, ft_backend_error_t *err, const char *why)
{
	x->dead = code;
	return ft_be_fail(err, code, x->headers_done ? x->status : 0, "%s %s %s: %s", prov_name(x), x->op, x->what,
			  why);
}

static void collect_done(ft_be_xfer_t *x)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(x->handle->multi, &left)) != NULL) {
		if (m->msg == CURLMSG_DONE && m->easy_handle == x->handle->easy) {
			x->done = 1;
			x->result = m->data.result;
		}
	}
}

/* The transfer ended: turns curl's result into ours. */
static ft_backend_err_t finish_result(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_backend_err_t code;

	if (x->result == CURLE_OK) {
		if (!x->headers_done)
			return xfer_die(x, FT_BACKEND_EPROTO, err, "no response headers");
		return FT_BACKEND_OK;
	}
	code = curl_code_err(x, x->result);
	return xfer_die(x, code, err,
			code == FT_BACKEND_ESOURCE ? "the body source failed or ended early"
			: x->curl_err[0] != '\0'   ? x->curl_err
						   : curl_easy_strerror(x->result));
}

/* Whether the request is on a connection (new or reused) and about to be or being sent. */
static int is_connected(const ft_be_xfer_t *x)
{
	curl_off_t t = 0;

	return curl_easy_getinfo(x->handle->easy, CURLINFO_PRETRANSFER_TIME_T, &t) == CURLE_OK && t > 0;
}

/*
 * Runs the transfer until ready(x) holds or it ends, failing on cancel or stall.
 * Returns OK (check x->done), or the failure (x dead, err filled).
 */
static ft_backend_err_t drive(ft_be_xfer_t *x, int (*ready)(const ft_be_xfer_t *), ft_backend_error_t *err)
{
	const ft_backend_config_t *cfg = &x->backend->cfg;
	int64_t budget = cfg->stall_timeout_ms, last = now_ms();
	uint64_t seen = x->progress;

	if (!x->connected)
		budget += cfg->connect_timeout_ms;
	for (;;) {
		int running = 0;
		int64_t now, wait;
		CURLMcode mc;

		if (atomic_load(&x->cancel))
			return xfer_die(x, FT_BACKEND_ECANCELED, err, "canceled");
		mc = curl_multi_perform(x->handle->multi, &running);
		if (mc != CURLM_OK)
			return xfer_die(x, FT_BACKEND_ENOMEM, err, curl_multi_strerror(mc));
		collect_done(x);
		if (x->done || ready(x))
			return FT_BACKEND_OK;
		now = now_ms();
		if (!x->connected && is_connected(x)) {
			/* The connect allowance ends with the connection: from here on only the stall budget. */
			x->connected = 1;
			budget = cfg->stall_timeout_ms;
			last = now;
		}
		if (x->progress != seen) {
			seen = x->progress;
			last = now;
		}
		if (now - last >= budget) {
			char why[96];

			snprintf(why, sizeof(why), "no progress for %lld ms", (long long)(now - last));
			return xfer_die(x, FT_BACKEND_ETIMEDOUT, err, why);
		}
		wait = budget - (now - last);
		if (wait > POLL_SLICE_MS)
			wait = POLL_SLICE_MS;
		mc = curl_multi_poll(x->handle->multi, NULL, 0, (int)wait, NULL);
		if (mc != CURLM_OK)
			return xfer_die(x, FT_BACKEND_ENOMEM, err, curl_multi_strerror(mc));
	}
}

static int ready_headers(const ft_be_xfer_t *x)
{
	return x->headers_done;
}

static int ready_data(const ft_be_xfer_t *x)
{
	return x->user_got > 0 || x->stage_len > 0 || x->paused;
}

static void set_method(ft_be_xfer_t *x, CURL *h)
{
	if (x->src != NULL) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->src_len);
		if (strcmp(x->method, "PUT") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
	} else if (strcmp(x->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (strcmp(x->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
	}
}

/* Builds the curl header list: our headers, and an empty Expect (no 100-continue round trip). */
static int build_slist(ft_be_xfer_t *x)
{
	struct curl_slist *l = NULL, *t;
	ft_strbuf_t line = {0};

	for (int i = 0; i < x->n_hdr; i++) {
		line.len = 0;
		ft_strbuf_addf(&line, "%s: %s", x->hdr[i].name, x->hdr[i].value);
		if (line.failed)
			goto fail;
		t = curl_slist_append(l, line.p);
		if (t == NULL)
			goto fail;
		l = t;
	}
	t = curl_slist_append(l, "Expect:");
	if (t == NULL)
		goto fail;
	l = t;
	ft_strbuf_free(&line);
	x->slist = l;
	return 0;
fail:
	ft_strbuf_free(&line);
	curl_slist_free_all(l);
	return -1;
}

ft_backend_err_t ft_be_xfer_start(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	const ft_backend_config_t *cfg = &x->backend->cfg;
	ft_strbuf_t url = {0};
	CURL *h = x->handle->easy;
	ft_backend_err_t rc;

	if (x->oom || x->origin == NULL)
		return xfer_die(x, FT_BACKEND_ENOMEM, err, "out of memory building the request");
	if (x->plain_ok && x->src == NULL && strcmp(x->method, "GET") == 0 && strncmp(x->origin, "http://", 7) == 0) {
		int fallback = 0;

		rc = ft_be_plain_start(x, err, &fallback);
		if (!fallback)
			return rc;
	}
	if (build_slist(x) != 0)
		return xfer_die(x, FT_BACKEND_ENOMEM, err, "out of memory building the request");
	ft_strbuf_addf(&url, "%s%s%s%s", x->origin, x->path, x->query[0] != '\0' ? "?" : "", x->query);
	x->stage = malloc(STAGE_BYTES);
	if (url.failed || x->stage == NULL) {
		ft_strbuf_free(&url);
		return xfer_die(x, FT_BACKEND_ENOMEM, err, "out of memory building the request");
	}
	x->stage_cap = STAGE_BYTES;
	curl_easy_setopt(h, CURLOPT_URL, url.p);
	ft_strbuf_free(&url); /* libcurl copies the URL */
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)STAGE_BYTES);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->curl_err);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->slist);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	set_method(x, h);
	if (curl_multi_add_handle(x->handle->multi, h) != CURLM_OK)
		return xfer_die(x, FT_BACKEND_ENOMEM, err, "cannot add the transfer");
	x->added = 1;
	x->started = 1;
	rc = drive(x, ready_headers, err);
	if (rc != FT_BACKEND_OK)
		return rc;
	/* With the headers in, a transfer that already failed reports it on the read after the staged bytes. */
	if (x->done && !x->headers_done)
		return finish_result(x, err);
	return FT_BACKEND_OK;
}

/* Moves staged bytes to buf. */
static size_t take_stage(ft_be_xfer_t *x, char *buf, size_t cap)
{
	size_t n = x->stage_len < cap ? x->stage_len : cap;

	memcpy(buf, x->stage + x->stage_off, n);
	x->stage_off += n;
	x->stage_len -= n;
	if (x->stage_len == 0)
		x->stage_off = 0;
	return n;
}

ft_backend_err_t ft_be_xfer_read(ft_be_xfer_t *x, void *buf, size_t cap, size_t *got, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	*got = 0;
	if (x->dead != FT_BACKEND_OK)
		return ft_be_fail(err, x->dead, x->status, "%s %s %s: %s", prov_name(x), x->op, x->what,
				  ft_backend_strerror(x->dead));
	if (x->plain != NULL)
		return ft_be_plain_read(x, buf, cap, got, err);
	if (!x->started)
		return xfer_die(x, FT_BACKEND_EPROTO, err, "read before start");
	if (x->stage_len > 0) {
		*got = take_stage(x, buf, cap);
		return FT_BACKEND_OK;
	}
	if (x->done)
		return finish_result(x, err);
	x->user_buf = buf;
	x->user_cap = cap;
	x->user_got = 0;
	if (x->paused) {
		x->paused = 0;
		/* Redelivers the held chunk through on_write, into buf and the stage. */
		if (curl_easy_pause(x->handle->easy, CURLPAUSE_CONT) != CURLE_OK) {
			x->user_buf = NULL;
			return xfer_die(x, FT_BACKEND_EPROTO, err, "cannot resume the transfer");
		}
	}
	rc = FT_BACKEND_OK;
	if (x->user_got == 0 && x->stage_len == 0)
		rc = drive(x, ready_data, err);
	*got = x->user_got;
	x->user_buf = NULL;
	x->user_cap = x->user_got = 0;
	if (rc != FT_BACKEND_OK)
		return rc;
	if (*got == 0 && x->stage_len > 0)
		*got = take_stage(x, buf, cap);
	if (*got == 0 && x->done)
		return finish_result(x, err);
	return FT_BACKEND_OK;
}

ft_backend_err_t ft_be_xfer_collect(ft_be_xfer_t *x, size_t max, ft_strbuf_t *out, ft_backend_error_t *err)
{
	char chunk[16384];

	for (;;) {
		size_t got;
		ft_backend_err_t rc = ft_be_xfer_read(x, chunk, sizeof(chunk), &got, err);

		if (rc != FT_BACKEND_OK)
			return rc;
		if (got == 0)
			return out->failed ? xfer_die(x, FT_BACKEND_ENOMEM, err, "out of memory") : FT_BACKEND_OK;
		if (out->len + got > max)
			return xfer_die(x, FT_BACKEND_EPROTO, err, "response body too large");
		ft_strbuf_add(out, chunk, got);
	}
}

void ft_be_xfer_error_body(ft_be_xfer_t *x, ft_strbuf_t *out)
{
	(void)ft_be_xfer_collect(x, FT_BE_ERROR_BODY_MAX, out, NULL);
}

const char *ft_be_xfer_resp_header(const ft_be_xfer_t *x, const char *name)
{
	for (int i = x->n_rhdr - 1; i >= 0; i--)
		if (strcasecmp(x->rhdr[i].name, name) == 0)
			return x->rhdr[i].value;
	return NULL;
}

int ft_be_xfer_content_range(const ft_be_xfer_t *x, int64_t *first, int64_t *last, int64_t *total)
{
	const char *v = ft_be_xfer_resp_header(x, "Content-Range");
	long long a, b;
	int n = 0;

	if (v == NULL || sscanf(v, "bytes %lld-%lld/%n", &a, &b, &n) != 2 || n == 0 || a < 0 || b < a)
		return -1;
	*first = a;
	*last = b;
	if (v[n] == '*')
		*total = -1;
	else if (ft_be_parse_i64(v + n, total) != 0 || *total <= b)
		return -1;
	return 0;
}

int64_t ft_be_xfer_content_length(const ft_be_xfer_t *x)
{
	const char *v = ft_be_xfer_resp_header(x, "Content-Length");
	int64_t n;

	if (v == NULL || ft_be_parse_i64(v, &n) != 0 || n < 0)
		return -1;
	return n;
}

void ft_be_xfer_cancel(ft_be_xfer_t *x)
{
	atomic_store(&x->cancel, 1);
	curl_multi_wakeup(x->handle->multi);
}

void ft_be_xfer_free(ft_be_xfer_t *x)
{
	if (x == NULL)
		return;
	ft_be_plain_free(x);
	if (x->added)
		curl_multi_remove_handle(x->handle->multi, x->handle->easy);
	if (x->done && x->result == CURLE_OK && x->dead == FT_BACKEND_OK)
		handle_put(x->handle);
	else if (x->started)
		handle_destroy(x->handle); /* its connection is in an unknown state */
	else
		handle_put(x->handle);
	curl_slist_free_all(x->slist);
	resp_headers_clear(x);
	for (int i = 0; i < x->n_hdr; i++) {
		free(x->hdr[i].name);
		free(x->hdr[i].value);
	}
	free(x->stage);
	free(x->origin);
	free(x->host);
	free(x->path);
	free(x->query);
	free(x);
}

/* ---- errors ---- */

static int is_bucket_code(const char *code, const char *const *bucket_codes)
{
	if (code == NULL || bucket_codes == NULL)
		return 0;
	for (; *bucket_codes != NULL; bucket_codes++)
		if (strcmp(code, *bucket_codes) == 0)
			return 1;
	return 0;
}

ft_backend_err_t ft_be_http_error(ft_be_xfer_t *x, const char *code, const char *message,
				  const char *const *bucket_codes, ft_backend_error_t *err)
{
	long s = x->status;
	ft_backend_err_t e;

	if (s == 404)
		e = is_bucket_code(code, bucket_codes) ? FT_BACKEND_ENOBUCKET : FT_BACKEND_ENOTFOUND;
	else if (s == 401 || s == 403)
		e = FT_BACKEND_EAUTH;
	else if (s == 416)
		e = FT_BACKEND_ERANGE;
	else if (s == 412)
		e = FT_BACKEND_ECHANGED;
	else if (s == 429 || s == 503)
		e = FT_BACKEND_ETHROTTLED;
	else if (s >= 500)
		e = FT_BACKEND_ESERVER;
	else
		e = FT_BACKEND_EREQUEST;
	return ft_be_fail(err, e, s, "%s %s %s: %ld%s%s%s%s", prov_name(x), x->op, x->what, s,
			  code != NULL && *code ? " " : "", code != NULL ? code : "",
			  message != NULL && *message ? ": " : "", message != NULL ? message : "");
}

int ft_be_add_range(ft_be_xfer_t *x, const ft_backend_get_opts_t *o)
{
	if (o == NULL || (o->offset == 0 && o->length == 0))
		return 0;
	if (o->length > 0)
		return ft_be_xfer_header(x, "Range", "bytes=%lld-%lld", (long long)o->offset,
					 (long long)(o->offset + o->length - 1));
	return ft_be_xfer_header(x, "Range", "bytes=%lld-", (long long)o->offset);
}

int ft_be_add_if_match(ft_be_xfer_t *x, const ft_backend_get_opts_t *o)
{
	if (o == NULL || o->match == NULL || o->match->etag[0] == '\0')
		return 0;
	return ft_be_xfer_header(x, "If-Match", "\"%s\"", o->match->etag);
}
