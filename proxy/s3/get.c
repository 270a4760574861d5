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

#include <curl/curl.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/names.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * S3 clients do not follow redirects, so the proxy carries object bytes itself: a worker talks to
 * the owner's native API and streams. GET: the relay's own client (relay.c) sends the request
 * and reads the response head; a 200/206 with a Content-Length then goes to the client with
 * ft_resp_stream_splice, socket to socket in kernel pages (the pipe bounds what is in flight, and a
 * slow client slows the target read). Anything else (a redirect after a map change, 304, errors
 * with bodies, chunked) is asked again through libcurl, whose write callback feeds
 * ft_resp_stream_write (which blocks while ~256 KiB are unsent); HEAD always goes that way.
 * Conditional headers and Range go to the target, which evaluates them against the stored ETag
 * and mtime (target/get.c); the stored Content-Type and x-amz-meta-* come back as its headers.
 */

/* ---- GET and HEAD ---- */

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

/*
 * The fast path of a GET: the relay client, the head it parsed, the body spliced. Returns false,
 * with nothing sent to the client, when the target's answer is not a 200/206 with a Content-Length
 * (the caller then asks again through libcurl).
 */
static bool get_spliced(get_ctx_t *c, const char *url, const char *const *lines, bool *unreachable)
{
	px_s3_relay_t *rl = malloc(sizeof(*rl));
	int err;

	if (rl == NULL || px_s3_relay_get(rl, url, lines) != 0) {
		*unreachable = rl != NULL && rl->unreachable;
		free(rl);
		return false;
	}
	if ((rl->resp.status != 200 && rl->resp.status != 206) || rl->resp.content_length < 0 || rl->resp.chunked) {
		px_s3_relay_done(rl, false);
		free(rl);
		return false;
	}
	px_s3_target_head_fill(&c->t, &rl->resp, rl->hdrs);
	start_stream(c);
	err = c->client_err != 0 ? c->client_err
				 : ft_resp_stream_splice(c->q->r, rl->fd, (uint64_t)rl->resp.content_length);
	if (err != 0 && err != -ECONNRESET)
		ft_warn("s3 GET %s: relay from %s broke: %s", c->q->resource, url, strerror(-err));
	/* A cut relay aborts the client's response: never a short body taken for a whole one. */
	ft_resp_stream_end(c->q->r, err == 0 ? 0 : -EIO);
	px_s3_relay_done(rl, err == 0);
	free(rl);
	return true;
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
		return px_s3_owner_url_id(q->bucket, q->key, q->key_len, query, id);
	if (query == NULL || query[0] == '\0')
		return px_s3_owner_url_unsigned(q->bucket, q->key, q->key_len, "ft_anon=1", id);
	both = malloc(strlen(query) + sizeof("&ft_anon=1"));
	if (both == NULL)
		return NULL;
	sprintf(both, "%s&ft_anon=1", query);
	url = px_s3_owner_url_unsigned(q->bucket, q->key, q->key_len, both, id);
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

static void get_work(px_s3_req_t *q)
{
	get_ctx_t c = {.q = q, .head = ft_req_method(q->r) == FT_HTTP_HEAD, .t = {.length = -1}};
	struct curl_slist *hdrs = NULL;
	char id[FT_ID_MAX];
	char part_query[32];
	const char *part = ft_req_query(q->r, "partNumber");
	if (part != NULL)
		snprintf(part_query, sizeof(part_query), "s3part=%s", part); /* checked: 1..10000 */
	const char *query = part != NULL ? part_query : archpath_query(q);
	if (query == NULL && !c.head)
		query = etl_query(q);
	char *url = get_url(q, query, id);
	CURL *h = px_s3_curl();
	CURLcode rc;
	int attempt = 0;

	if (url == NULL || h == NULL) {
		px_s3_error(q, url == NULL ? PX_S3_SERVICE_UNAVAILABLE : PX_S3_INTERNAL,
			    "no target to serve the object");
		goto out;
	}
	const char *range = ft_req_header(q->r, "Range");
	uint64_t off, len;
	/* S3 ignores a Range it cannot parse (and multiple ranges) and sends the whole object. */
	if (range != NULL && ft_range_parse(range, UINT64_MAX, &off, &len) != FT_RANGE_BAD)
		hdrs = px_s3_forward_header(hdrs, q->r, "Range", "Range");
	hdrs = px_s3_forward_header(hdrs, q->r, "If-Match", "If-Match");
	hdrs = px_s3_forward_header(hdrs, q->r, "If-None-Match", "If-None-Match");
	hdrs = px_s3_forward_header(hdrs, q->r, "If-Modified-Since", "If-Modified-Since");
	hdrs = px_s3_forward_header(hdrs, q->r, "If-Unmodified-Since", "If-Unmodified-Since");
again:
	if (!c.head) {
		const char *lines[8];
		bool unreachable = false;
		int n = 0;

		for (struct curl_slist *l = hdrs; l != NULL && n < 7; l = l->next)
			lines[n++] = l->data;
		lines[n] = NULL;
		if (get_spliced(&c, url, lines, &unreachable))
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
			ft_warn("s3 GET %s: relay from %s broke: %s", q->resource, url, curl_easy_strerror(rc));
		/* A cut relay aborts the client's response: never a short body taken for a whole one. */
		ft_resp_stream_end(q->r, rc == CURLE_OK && c.client_err == 0 ? 0 : -EIO);
	} else if (rc != CURLE_OK) {
		ft_warn("s3 %s %s: relay from %s failed: %s", ft_req_method_name(q->r), q->resource, url,
			curl_easy_strerror(rc));
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
	} else {
		get_finish_unstarted(&c);
	}
out:
	curl_slist_free_all(hdrs);
	free(url);
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
	px_s3_defer(q, get_work);
}
