/* SPDX-License-Identifier: Apache-2.0 */
/* S3 GetObject and HeadObject relayed from the owning target: bodies spliced from the relay client, the rest through libcurl. */
#include "s3/object.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/names.h"
#include "base/redact.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * S3 clients do not follow redirects, so the proxy carries object bytes itself. A GET goes from
 * the loop thread to a relay loop (relay_loop.c), which asks the owner on a kept-alive connection
 * and answers a body or error of up to PX_S3_RLOOP_SMALL in one response call
 * (px_s3_get_answer). A larger 200/206 with a Content-Length is moved by that loop thread from the
 * target's socket to the client's in kernel pages (px_s3_get_stream, ft_resp_socket: the pipe bounds
 * what is in flight, and a slow client slows the target read). Any other answer comes to a worker
 * with the connection and its head (px_s3_get_handoff), which relays it the same way with
 * ft_resp_stream_splice when it can. HEAD goes on a worker through the relay client
 * (relay.c), as does every GET the loops could not take or lost before a whole answer. What the
 * relay client does not take (a redirect after a map change, a chunked or unbounded body) is
 * asked again through libcurl, whose write callback feeds ft_resp_stream_write; 304 and error
 * answers are relayed from the first exchange. Conditional headers and Range go to the target,
 * which evaluates them against the stored ETag and mtime (target/get.c); the stored Content-Type
 * and x-amz-meta-* come back as its headers.
 */

/* ---- GET and HEAD ---- */

#define GET_COPY_MAX (64 * 1024) /* bodies up to this size are read whole and sent in one call, larger ones spliced */
#define GET_ERRBODY_READ \
	(256 * 1024) /* error bodies up to this size are read by the relay client, larger ones by libcurl */

typedef struct {
	px_s3_req_t *q;
	bool head;
	px_s3_target_head_t t;
	px_s3_head_lines_t lines; /* the head curl is handing over */
	bool started;             /* ft_resp_stream_start was called: stream_end is owed */
	int client_err;           /* the client went away */
} get_ctx_t;

/* Response headers S3 lets a (presigned) GET override with response-* query parameters. */
static const struct {
	const char *query, *header;
} overrides[] = {
	{"response-content-type", "Content-Type"},         {"response-content-disposition", "Content-Disposition"},
	{"response-content-encoding", "Content-Encoding"}, {"response-content-language", "Content-Language"},
	{"response-cache-control", "Cache-Control"},       {"response-expires", "Expires"},
};

/*
 * Whether a stored user metadata value is UTF-8 beyond ASCII: S3 sends such a value RFC 2047
 * encoded ("=?UTF-8?B?<base64>?="), which clients decode; bytes that are no UTF-8 (a client that
 * sent Latin-1, as Node's HTTP client does) go back as they came.
 */
static bool needs_rfc2047(const char *v)
{
	bool high;

	return ft_utf8_valid(v, &high) && high;
}

/* Sends the user metadata header name with value RFC 2047 encoded. */
static void meta_header_rfc2047(px_s3_req_t *q, const char *name, const char *value)
{
	size_t n = strlen(value);
	char *out = ft_req_alloc(q->r, FT_BASE64_LEN(n) + 16);

	memcpy(out, "=?UTF-8?B?", 10);
	size_t k = ft_base64_encode(value, n, out + 10);
	memcpy(out + 10 + k, "?=", 3);
	ft_resp_header(q->r, name, out);
}

/* Whether a response-* query parameter replaces the stored header name. */
static bool overridden(px_s3_req_t *q, const char *name)
{
	for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++)
		if (strcasecmp(overrides[i].header, name) == 0)
			return ft_req_query(q->r, overrides[i].query) != NULL;
	return false;
}

/*
 * Whether the stored checksum goes with the answer: asked for (x-amz-checksum-mode: ENABLED) and
 * the whole object served (a range has no checksum of its own).
 */
static bool checksum_wanted(px_s3_req_t *q, const px_s3_target_head_t *t)
{
	const char *mode = ft_req_header(q->r, "x-amz-checksum-mode");

	return mode != NULL && strcasecmp(mode, "ENABLED") == 0 && t->content_range[0] == '\0';
}

/* Sends the stored x-amz-meta-* and standard header lines of t (and its checksum when wanted) as response headers. */
static void meta_headers(px_s3_req_t *q, px_s3_target_head_t *t)
{
	bool ck = checksum_wanted(q, t);

	for (char *p = t->meta; *p != '\0';) {
		char *nl = strchr(p, '\n');
		char *colon = memchr(p, ':', (size_t)(nl - p));
		*nl = '\0';
		if (colon != NULL) {
			char *v = colon + 1;
			*colon = '\0';
			while (*v == ' ' || *v == '\t')
				v++;
			if (strncasecmp(p, "x-amz-meta-", PX_S3_UMETA_PREFIX_LEN) == 0 && needs_rfc2047(v))
				meta_header_rfc2047(q, p, v);
			else if ((ck || strncasecmp(p, "x-amz-checksum-", PX_S3_CK_PREFIX_LEN) != 0) &&
				 !overridden(q, p))
				ft_resp_header(q->r, p, v);
		}
		p = nl + 1;
	}
	t->meta[0] = '\0'; /* consumed */
}

/* Headers of a successful GET/HEAD/304; returns the Content-Type to use (the stored one by default). */
static const char *object_headers(px_s3_req_t *q, px_s3_target_head_t *t)
{
	const char *ctype = t->content_type[0] ? t->content_type : "application/octet-stream";

	ft_resp_header(q->r, "x-amz-request-id", q->request_id);
	if (t->etag[0])
		ft_resp_header(q->r, "ETag", t->etag);
	if (t->last_modified[0])
		ft_resp_header(q->r, "Last-Modified", t->last_modified);
	if (t->content_range[0])
		ft_resp_header(q->r, "Content-Range", t->content_range);
	ft_resp_header(q->r, "Accept-Ranges", "bytes");
	if (t->meta_cut)
		ft_warn("s3 GET %s: the target sent more user metadata than the relay keeps", q->resource);
	meta_headers(q, t);
	for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++) {
		const char *v = ft_req_query(q->r, overrides[i].query);
		if (v == NULL)
			continue;
		if (strcmp(overrides[i].header, "Content-Type") == 0)
			ctype = v;
		else
			ft_resp_header(q->r, overrides[i].header, v);
	}
	return ctype;
}

static void start_stream(get_ctx_t *c)
{
	const char *ctype = object_headers(c->q, &c->t);

	c->started = true;
	c->client_err = ft_resp_stream_start(c->q->r, (int)c->t.status, ctype, c->t.length);
}

static size_t get_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	get_ctx_t *c = arg;
	size_t n = size * nitems;

	if (px_s3_target_head_line(&c->t, &c->lines, buf, n) && !c->head && !c->started &&
	    (c->t.status == 200 || c->t.status == 206))
		start_stream(c);
	return n;
}

static size_t get_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	get_ctx_t *c = arg;
	size_t n = size * nitems;

	if (!c->started) {
		px_s3_keep_errbody(c->t.errbody, &c->t.errlen, buf, n);
		return n;
	}
	if (c->client_err != 0)
		return 0; /* aborts the transfer: nobody is listening */
	c->client_err = ft_resp_stream_write(c->q->r, buf, n);
	return c->client_err != 0 ? 0 : n;
}

/* The answer when the target sent no body to stream: HEAD, 304 and errors. */
static void get_finish_unstarted(get_ctx_t *c)
{
	px_s3_req_t *q = c->q;
	px_s3_target_reply_t reply = {.status = c->t.status};

	if (c->t.status == 304 || (c->head && (c->t.status == 200 || c->t.status == 206))) {
		const char *ctype = object_headers(q, &c->t);
		ft_resp_stream_start(q->r, (int)c->t.status, c->t.status == 304 ? NULL : ctype,
				     c->t.status == 304 ? -1 : c->t.length);
		ft_resp_stream_end(q->r, 0);
		return;
	}
	if (c->t.status == 416 && c->t.content_range[0])
		ft_resp_header(q->r, "Content-Range", c->t.content_range);
	px_s3_error_reply(c->t.errbody, c->t.errlen, &reply);
	px_s3_error_from_target(q, &reply);
}

/*
 * A small body read whole from the target and sent with one response call: no pipe to set up and
 * one hand-over to the loop thread, where a stream takes three. 0, or the -errno of the read (then
 * nothing went to the client and the connection is spent).
 */
static int get_copied(get_ctx_t *c, px_s3_relay_t *rl)
{
	size_t len = (size_t)rl->resp.content_length;
	char *body = malloc(len > 0 ? len : 1);
	int err;

	if (body == NULL)
		return -ENOMEM;
	err = px_s3_relay_read_body(rl, body, len);
	if (err == 0)
		ft_resp_bytes(c->q->r, (int)c->t.status, object_headers(c->q, &c->t), body, len);
	free(body);
	return err;
}

/* A body of len bytes spliced from the target's socket to the client: the response is started here and ended. */
static bool get_spliced(get_ctx_t *c, px_s3_relay_t *rl, const char *url)
{
	int err;

	uint64_t pre = rl->pre_end - rl->pre_off; /* body bytes the relay loop read with the head */

	start_stream(c);
	err = c->client_err;
	if (err == 0 && pre > 0) {
		err = ft_resp_stream_write(c->q->r, rl->pre + rl->pre_off, (size_t)pre);
		rl->pre_off = rl->pre_end;
	}
	if (err == 0)
		err = ft_resp_stream_splice(c->q->r, rl->fd, (uint64_t)rl->resp.content_length - pre);
	if (err != 0 && err != -ECONNRESET) {
		char shown[FT_REDACT_URL_MAX];
		ft_warn("s3 GET %s: relay from %s broke: %s", c->q->resource, ft_redact_url(url, shown, sizeof(shown)),
			strerror(-err));
	}
	/* A cut relay aborts the client's response: never a short body taken for a whole one. */
	ft_resp_stream_end(c->q->r, err == 0 ? 0 : -EIO);
	return err == 0;
}

/*
 * An answer with no object body to relay (HEAD, 304, an error): its error body, if any, read into
 * c->t.errbody (the first PX_S3_ERRBODY_MAX bytes), then answered. False, with nothing sent, when
 * the body could not be read whole.
 */
static bool get_unstarted(get_ctx_t *c, px_s3_relay_t *rl)
{
	int64_t len = c->head || c->t.status == 304 || c->t.status == 204 ? 0 : rl->resp.content_length;
	char *body = NULL;

	if (len > 0) {
		body = malloc((size_t)len);
		if (body == NULL || px_s3_relay_read_body(rl, body, (size_t)len) != 0) {
			free(body);
			return false;
		}
		px_s3_keep_errbody(c->t.errbody, &c->t.errlen, body, (size_t)len);
		free(body);
	}
	get_finish_unstarted(c);
	return true;
}

/* A GET the relay loop handed to a worker (px_s3_get_handoff), in q->op. */
typedef struct {
	int fd;    /* the loop's connection, its head read (blocking); -1 = none: ask again */
	char *buf; /* what was read from it, malloc'd; taken by px_s3_relay_adopt */
	size_t len;
	char hostport[272];
} get_handoff_t;

/*
 * A GET or HEAD through the relay client (relay.c). Returns false, with nothing sent to the client,
 * when the target's answer is not one it relays: a redirect (the map changed), a chunked or
 * unbounded body, an error body over GET_ERRBODY_READ, or a body that broke off before the client
 * saw any of it (the caller then asks again through libcurl); *unreachable when no connection
 * could be had at all.
 */
static bool get_relayed(get_ctx_t *c, const char *url, const char *const *lines, bool *unreachable, get_handoff_t *ho)
{
	px_s3_relay_t *rl = malloc(sizeof(*rl));
	bool done = false, body_read = false;
	long status;
	int64_t len;

	if (ho != NULL && ho->fd >= 0) { /* the relay loop's connection, its head read: taken over once */
		int fd = ho->fd;
		char *buf = ho->buf;

		ho->fd = -1;
		ho->buf = NULL;
		if (rl == NULL || px_s3_relay_adopt(rl, fd, ho->hostport, buf, ho->len) != 0) {
			if (rl == NULL) {
				close(fd);
				free(buf);
			} else {
				px_s3_relay_done(rl, false);
			}
			free(rl);
			return false;
		}
	} else if (rl == NULL || px_s3_relay_get(rl, c->head, url, lines) != 0) {
		*unreachable = rl != NULL && rl->unreachable;
		free(rl);
		return false;
	}
	status = rl->resp.status;
	len = rl->resp.content_length;
	if (rl->resp.chunked || (len < 0 && !c->head && status != 304 && status != 204) ||
	    (status >= 300 && status < 400 && status != 304) || status < 200)
		goto out; /* not relayed here: libcurl follows redirects and reads any framing */
	px_s3_target_head_fill(&c->t, &rl->resp, rl->hdrs);
	if ((status == 200 || status == 206) && !c->head) {
		if (len <= GET_COPY_MAX) {
			done = body_read = get_copied(c, rl) == 0;
		} else {
			body_read = get_spliced(c, rl, url);
			done = true; /* started: ended there, whole or cut */
		}
	} else if (c->head || status == 304 || status == 204 || len <= GET_ERRBODY_READ) {
		done = body_read = get_unstarted(c, rl);
	}
	if (!done)
		c->t = (px_s3_target_head_t){.length = -1};
out:
	px_s3_relay_done(rl, body_read);
	free(rl);
	return done;
}

/*
 * Whether a GET that found its target unreachable (nothing sent to the client yet) should go again: the daemon
 * took the target out of the map, so the object has a new owner (which rebuilds it from EC slices or replicas).
 */
static bool get_retry(px_s3_req_t *q, const char *id, int attempt)
{
	if (attempt >= PX_S3_GET_RETRIES || id[0] == '\0' || q->host->target_unreachable == NULL ||
	    q->host->target_unreachable(q->host->ctx, id) != 0)
		return false;
	ft_info("s3 GET %s: target %s unreachable and taken out of the map: retrying on the new owner", q->resource,
		id);
	ft_metric_inc(FT_M_S3_RELAY_RETRIES);
	return true;
}

/* "archpath=<member>" when the GET reads one member of a shard (docs/shards.md), else NULL; request memory. */
static const char *archpath_query(px_s3_req_t *q)
{
	const char *member = ft_req_query(q->r, "archpath");
	char *enc, *out;

	if (member == NULL || (enc = ft_pct_encode_dup(member, strlen(member), 0)) == NULL)
		return NULL;
	out = ft_req_alloc(q->r, strlen(enc) + sizeof("archpath="));
	sprintf(out, "archpath=%s", enc);
	free(enc);
	return out;
}

/* The owner's URL for a GET/HEAD: signed, or for an anonymous read of public data unsigned and marked (acl.c). */
static char *get_url(px_s3_req_t *q, const char *query, char *id)
{
	char *url, *both;

	if (!q->public_anon)
		return px_s3_owner_url_id(q->provider, q->bucket, q->key, q->key_len, query, id);
	if (query == NULL || query[0] == '\0')
		return px_s3_owner_url_unsigned(q->provider, q->bucket, q->key, q->key_len, "ft_anon=1", id);
	both = malloc(strlen(query) + sizeof("&ft_anon=1"));
	if (both == NULL)
		return NULL;
	sprintf(both, "%s&ft_anon=1", query);
	url = px_s3_owner_url_unsigned(q->provider, q->bucket, q->key, q->key_len, both, id);
	free(both);
	return url;
}

/* "etl=<name>" when the GET asks for the object through a transformer (docs/etl.md), else NULL; request memory. */
static const char *etl_query(px_s3_req_t *q)
{
	const char *name = ft_req_query(q->r, "etl");
	char *enc, *out;

	if (name == NULL || (enc = ft_pct_encode_dup(name, strlen(name), 0)) == NULL)
		return NULL;
	out = ft_req_alloc(q->r, strlen(enc) + sizeof("etl="));
	sprintf(out, "etl=%s", enc);
	free(enc);
	return out;
}

/*
 * The query the target gets for q: "s3part=N" for a partNumber, the shard member (archpath), or for a
 * GET an ETL; NULL for none. Request memory.
 */
static const char *get_query(px_s3_req_t *q, bool head)
{
	const char *part = ft_req_query(q->r, "partNumber");
	const char *query;

	if (part != NULL) {
		char *pq = ft_req_alloc(q->r, 32);
		snprintf(pq, 32, "s3part=%s", part); /* checked: 1..10000 */
		return pq;
	}
	query = archpath_query(q);
	if (query == NULL && !head)
		query = etl_query(q);
	return query;
}

/* The request's Range and conditional headers that go to the target, as "Name: value" lines (NULL-terminated, request memory). */
static const char **get_lines(px_s3_req_t *q)
{
	static const char *const fwd[] = {"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"};
	const char **lines = ft_req_alloc(q->r, 6 * sizeof(*lines));
	const char *range = ft_req_header(q->r, "Range"), *v;
	uint64_t off, len;
	int n = 0;

	/* S3 ignores a Range it cannot parse (and multiple ranges) and sends the whole object. */
	if (range != NULL && ft_range_parse(range, UINT64_MAX, &off, &len) != FT_RANGE_BAD) {
		char *l = ft_req_alloc(q->r, strlen(range) + sizeof("Range: "));
		sprintf(l, "Range: %s", range);
		lines[n++] = l;
	}
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++) {
		if ((v = ft_req_header(q->r, fwd[i])) == NULL)
			continue;
		char *l = ft_req_alloc(q->r, strlen(fwd[i]) + strlen(v) + 3);
		sprintf(l, "%s: %s", fwd[i], v);
		lines[n++] = l;
	}
	lines[n] = NULL;
	return lines;
}

/*
 * Worker: q's GET or HEAD; ho is the relay loop's hand-over (NULL: none): its connection and buffer
 * are released here, ho itself is the caller's (never request memory: it is read after the response).
 */
static void get_run(px_s3_req_t *q, get_handoff_t *ho)
{
	get_ctx_t c = {.q = q, .head = ft_req_method(q->r) == FT_HTTP_HEAD, .t = {.length = -1}};
	struct curl_slist *hdrs = NULL;
	char id[FT_ID_MAX], shown[FT_REDACT_URL_MAX];
	const char **lines = get_lines(q);
	const char *query = get_query(q, c.head);
	char *url = get_url(q, query, id);
	CURL *h;
	CURLcode rc;
	int attempt = 0;

	if (url == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to serve the object");
		goto out;
	}
	for (const char **l = lines; *l != NULL; l++) {
		struct curl_slist *n = curl_slist_append(hdrs, *l);
		if (n != NULL)
			hdrs = n;
	}
again : {
	bool unreachable = false;

	if (get_relayed(&c, url, lines, &unreachable, ho))
		goto out;
	if (unreachable && get_retry(q, id, attempt++)) {
		free(url);
		url = get_url(q, query, id);
		if (url == NULL) {
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to serve the object");
			goto out;
		}
		goto again;
	}
}
	/* what the relay client does not take: libcurl follows redirects and reads any framing */
	h = px_s3_curl();
	if (h == NULL) {
		px_s3_error(q, PX_S3_INTERNAL, "no HTTP client to reach the target");
		goto out;
	}
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (c.head)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, get_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &c);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, get_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)PX_S3_CHUNK_MAX);
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	if (!c.started && rc == CURLE_COULDNT_CONNECT && get_retry(q, id, attempt++)) {
		free(url);
		url = get_url(q, query, id);
		if (url == NULL) {
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to serve the object");
			goto out;
		}
		c.t = (px_s3_target_head_t){.length = -1};
		goto again;
	}
	if (c.started) {
		if (rc != CURLE_OK && c.client_err == 0)
			ft_warn("s3 GET %s: relay from %s broke: %s", q->resource,
				ft_redact_url(url, shown, sizeof(shown)), curl_easy_strerror(rc));
		/* A cut relay aborts the client's response: never a short body taken for a whole one. */
		ft_resp_stream_end(q->r, rc == CURLE_OK && c.client_err == 0 ? 0 : -EIO);
	} else if (rc != CURLE_OK) {
		ft_warn("s3 %s %s: relay from %s failed: %s", ft_req_method_name(q->r), q->resource,
			ft_redact_url(url, shown, sizeof(shown)), curl_easy_strerror(rc));
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
	} else {
		get_finish_unstarted(&c);
	}
out:
	if (ho != NULL && ho->fd >= 0)
		close(ho->fd);
	if (ho != NULL)
		free(ho->buf);
	curl_slist_free_all(hdrs);
	free(url);
}

static void get_work(px_s3_req_t *q)
{
	get_run(q, NULL);
}

static void get_work_handoff(px_s3_req_t *q)
{
	get_handoff_t *ho = q->op; /* malloc'd: get_run releases its parts after the response, when q is gone */

	get_run(q, ho);
	free(ho);
}

void px_s3_get_handoff(px_s3_req_t *q, int fd, const char *hostport, char *buf, size_t len)
{
	get_handoff_t *ho = malloc(sizeof(*ho));

	ft_metric_add(FT_M_S3_RELAY_GETS, FT_M_RELAY_WORKER, 0, 1);

	if (ho == NULL) { /* nothing went to the client: a worker asks again */
		if (fd >= 0)
			close(fd);
		free(buf);
		px_s3_defer(q, get_work);
		return;
	}
	ho->fd = fd;
	ho->buf = buf;
	ho->len = len;
	snprintf(ho->hostport, sizeof(ho->hostport), "%s", hostport);
	q->op = ho;
	px_s3_defer(q, get_work_handoff);
}

/* The target's head that the relay loop read into buf, into t; false, q answered, when it does not parse. */
static bool loop_head(px_s3_req_t *q, const char *buf, size_t head_len, px_s3_target_head_t *t)
{
	ft_hp_header_t hdrs[PX_S3_TARGET_HEADERS_MAX];
	ft_hp_resp_head_t h;

	if (ft_hp_parse_resp_head(buf, head_len, PX_S3_TARGET_HEAD_MAX, hdrs, PX_S3_TARGET_HEADERS_MAX, &h) !=
	    FT_HP_DONE) { /* parsed once already by the loop: cannot happen */
		px_s3_error(q, PX_S3_INTERNAL, "unreadable answer from the target");
		return false;
	}
	px_s3_target_head_fill(t, &h, hdrs);
	return true;
}

void px_s3_get_stream(px_s3_req_t *q, const char *buf, size_t head_len, size_t len, int fd,
		      void (*done)(void *arg, int err), void *arg)
{
	px_s3_target_head_t t = {.length = -1};
	ft_resp_socket_t b = {.fd = fd, .pre = buf + head_len, .pre_len = len - head_len, .done = done, .arg = arg};

	ft_metric_add(FT_M_S3_RELAY_GETS, FT_M_RELAY_SPLICED, 0, 1);
	if (!loop_head(q, buf, head_len, &t)) {
		done(arg, -ECANCELED);
		return;
	}
	b.len = (uint64_t)t.length;
	b.timeout_ms = px_s3_relay_timeout_ms();
	ft_resp_socket(q->r, (int)t.status, object_headers(q, &t), &b);
}

void px_s3_get_answer(px_s3_req_t *q, const char *buf, size_t head_len, size_t len)
{
	get_ctx_t c = {.q = q, .t = {.length = -1}};

	ft_metric_add(FT_M_S3_RELAY_GETS, FT_M_RELAY_SMALL, 0, 1);
	if (!loop_head(q, buf, head_len, &c.t))
		return;
	if (c.t.status == 200 || c.t.status == 206) {
		ft_resp_bytes(q->r, (int)c.t.status, object_headers(q, &c.t), buf + head_len, len - head_len);
		return;
	}
	px_s3_keep_errbody(c.t.errbody, &c.t.errlen, buf + head_len, len - head_len);
	get_finish_unstarted(&c);
}

/*
 * Loop thread: a plain GET goes to a relay loop (relay_loop.c) with its request text made here; false
 * when it cannot (no loop running, no target, a target URL the relay client does not take).
 */
static bool get_submit(px_s3_req_t *q)
{
	char id[FT_ID_MAX], hostport[272];
	char *url, *req;
	size_t len;

	if (ft_req_method(q->r) != FT_HTTP_GET)
		return false;
	url = get_url(q, get_query(q, false), id);
	if (url == NULL)
		return false;
	bool local_only;
	req = px_s3_relay_request(url, false, get_lines(q), hostport, sizeof(hostport), &len, &local_only);
	free(url);
	return req != NULL && px_s3_rloop_submit(q, hostport, local_only, req, len);
}

void px_s3_object_get(px_s3_req_t *q)
{
	const char *part = ft_req_query(q->r, "partNumber");
	if (part != NULL) {
		char *end = NULL;
		long n = strtol(part, &end, 10);
		if (!*part || *end != '\0' || n < 1 || n > 10000 || strlen(part) > 5) {
			px_s3_error(q, PX_S3_INVALID_ARGUMENT,
				    "Part number must be an integer between 1 and 10000, inclusive");
			return;
		}
		if (ft_req_header(q->r, "Range") != NULL) {
			px_s3_error(q, PX_S3_INVALID_REQUEST,
				    "Cannot specify both Range header and partNumber query parameter");
			return;
		}
	}
	if (!get_submit(q)) {
		if (ft_req_method(q->r) == FT_HTTP_GET)
			ft_metric_add(FT_M_S3_RELAY_GETS, FT_M_RELAY_WORKER, 0, 1);
		px_s3_defer(q, get_work);
	}
}
