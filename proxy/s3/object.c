/* SPDX-License-Identifier: Apache-2.0 */
/* S3 object operations relayed through the proxy to the owning target: GET/HEAD, PUT, DELETE, CopyObject, UploadPartCopy's data, DeleteObjects. */
#include "s3/s3.h"

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
 * ft_resp_stream_write (which blocks while ~256 KiB are unsent); HEAD always goes that way. PUT: curl's read callback pulls verified bytes from
 * px_s3_body_read. Conditional headers and Range go to the target, which evaluates them against
 * the stored ETag and mtime (target/get.c). Object metadata travels as headers: the request's
 * Content-Type and x-amz-meta-* with the PUT, the stored ones back from the target's GET/HEAD.
 *
 * CopyObject and UploadPartCopy run two transfers in one curl multi handle: a GET from the
 * source's owner (ranged for x-amz-copy-source-range) and a PUT to the destination's owner (the
 * object, or a part of an upload), joined by a 512 KiB ring; each side pauses when the ring is
 * full or empty. The PUT starts only after the GET's headers gave the length (and showed the
 * range fits the source), with the source's metadata (directive COPY) or the request's (REPLACE),
 * and the PUT sends exactly that many bytes, so a source that fails midway leaves the destination
 * untouched.
 *
 * Memory per request: curl's buffers, the response queue bound of the HTTP server, and for a copy
 * the ring - never a whole object.
 */

#define PUT_MAX_SIZE (5ull << 30) /* S3's limit for one PutObject; larger objects use multipart */
#define ERRBODY_MAX 1024
#define META_MAX 4096 /* the target's stored Content-Type and x-amz-meta-* lines */
#define COPY_RING (512 * 1024)
#define COPY_CHUNK_MAX (64 * 1024) /* curl never hands over more at once with this buffer size */
#define DELETE_TIMEOUT_MS 10000
#define DELETE_BODY_MAX PX_S3_XML_BODY_MAX

/* ---- small helpers ---- */

/* Appends "Name: value" to a curl header list when the request has the header (under from). */
static struct curl_slist *forward_header(struct curl_slist *l, ft_req_t *r, const char *from, const char *to)
{
	const char *v = ft_req_header(r, from);
	char *line = NULL;

	if (v == NULL || asprintf(&line, "%s: %s", to, v) < 0)
		return l;
	struct curl_slist *n = curl_slist_append(l, line);
	free(line);
	return n != NULL ? n : l;
}

static void keep_errbody(char *dst, size_t *len, const char *buf, size_t n)
{
	size_t take = n < ERRBODY_MAX - *len ? n : ERRBODY_MAX - *len;

	memcpy(dst + *len, buf, take);
	*len += take;
	dst[*len] = '\0';
}

/* The "message" and "code" of a target's JSON error body, into reply. */
static void error_reply(const char *body, size_t len, px_s3_target_reply_t *reply)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));
	const char *code = json_string_value(json_object_get(j, "code"));

	snprintf(reply->message, sizeof(reply->message), "%s", m != NULL ? m : "");
	snprintf(reply->code, sizeof(reply->code), "%s", code != NULL ? code : "");
	json_decref(j);
}

/* ---- GET and HEAD ---- */

#define UMETA_PREFIX_LEN 11 /* "x-amz-meta-" */
#define CK_PREFIX_LEN 15    /* "x-amz-checksum-" */

/* What the target answered so far (the current response; a redirect's headers are replaced). */
typedef struct {
	long status;
	int64_t length;
	char etag[PX_S3_ETAG_MAX];
	char last_modified[64];
	char content_range[128];
	char content_type[256];
	char meta[META_MAX]; /* "x-amz-meta-<name>: <value>\n" lines as the target sent them */
	size_t meta_len;
	bool meta_cut;     /* more than META_MAX: never the case for what a target stores */
	bool headers_done; /* the final response's header block ended */
	char errbody[ERRBODY_MAX + 1];
	size_t errlen;
} target_head_t;

/* A target's response head as curl hands it over, a line at a time, up to its empty line. */
typedef struct {
	char buf[PX_S3_TARGET_HEAD_MAX];
	size_t len;
	bool overflow;
} head_lines_t;

/* Copies the value of h into out (cap bytes; cut to fit, NUL-terminated). */
static void header_copy(char *out, size_t cap, const ft_hp_header_t *h)
{
	size_t len = h->value_len < cap ? h->value_len : cap - 1;

	memcpy(out, h->value, len);
	out[len] = '\0';
}

/* Appends the x-amz-meta-* header h to t->meta as the line "name: value\n". */
static void meta_add(target_head_t *t, const ft_hp_header_t *h)
{
	size_t len = h->name_len + 2 + h->value_len;

	if (len + 1 >= sizeof(t->meta) - t->meta_len) {
		t->meta_cut = true;
		return;
	}
	memcpy(t->meta + t->meta_len, h->name, h->name_len);
	memcpy(t->meta + t->meta_len + h->name_len, ": ", 2);
	memcpy(t->meta + t->meta_len + h->name_len + 2, h->value, h->value_len);
	t->meta_len += len;
	t->meta[t->meta_len++] = '\n';
	t->meta[t->meta_len] = '\0';
}

/* Whether h is one of the headers an object keeps that the S3 answer relays as they come. */
static bool kept_header(const ft_hp_header_t *h)
{
	static const char *const std[] = {"cache-control",    "content-disposition",
					  "content-encoding", "content-language",
					  "expires",          "x-amz-mp-parts-count"};

	if (h->name_len > UMETA_PREFIX_LEN && strncasecmp(h->name, "x-amz-meta-", UMETA_PREFIX_LEN) == 0)
		return true;
	if (h->name_len > CK_PREFIX_LEN && strncasecmp(h->name, "x-amz-checksum-", CK_PREFIX_LEN) == 0)
		return true;
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (ft_hp_token_eq(h->name, h->name_len, std[i]))
			return true;
	return false;
}

/* Replaces t with what GET, HEAD and the copy's source use of a target's parsed response head. */
static void target_head_fill(target_head_t *t, const ft_hp_resp_head_t *h, const ft_hp_header_t *hdrs)
{
	memset(t, 0, sizeof(*t));
	t->status = h->status;
	t->length = h->content_length;
	for (size_t i = 0; i < h->nheaders; i++) {
		const ft_hp_header_t *x = &hdrs[i];

		if (ft_hp_token_eq(x->name, x->name_len, "etag"))
			header_copy(t->etag, sizeof(t->etag), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "last-modified"))
			header_copy(t->last_modified, sizeof(t->last_modified), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "content-range"))
			header_copy(t->content_range, sizeof(t->content_range), x);
		else if (ft_hp_token_eq(x->name, x->name_len, "content-type"))
			header_copy(t->content_type, sizeof(t->content_type), x);
		else if (kept_header(x))
			meta_add(t, x);
	}
	/* interim (1xx) and redirect heads are followed by another */
	t->headers_done = t->status >= 200 && !(t->status >= 300 && t->status < 400);
}

/*
 * Header-callback work shared by GET and the copy's source: gathers the lines of a head in l and,
 * at its empty line, parses it into t (a head that does not parse leaves t with status 0). Returns
 * true at the end of a final head; lines after it (trailers) are ignored.
 */
static bool target_head_line(target_head_t *t, head_lines_t *l, const char *buf, size_t n)
{
	ft_hp_header_t hdrs[PX_S3_TARGET_HEADERS_MAX];
	ft_hp_resp_head_t h;

	if (t->headers_done)
		return false;
	if (n > sizeof(l->buf) - l->len) {
		l->overflow = true;
	} else {
		memcpy(l->buf + l->len, buf, n);
		l->len += n;
	}
	if (n == 0 || n > 2 || (buf[0] != '\r' && buf[0] != '\n'))
		return false; /* not the empty line yet */
	if (!l->overflow &&
	    ft_hp_parse_resp_head(l->buf, l->len, sizeof(l->buf), hdrs, PX_S3_TARGET_HEADERS_MAX, &h) == FT_HP_DONE) {
		target_head_fill(t, &h, hdrs);
	} else {
		ft_warn("s3: unreadable response head from a target");
		memset(t, 0, sizeof(*t));
		t->length = -1;
	}
	l->len = 0;
	l->overflow = false;
	return t->headers_done;
}

typedef struct {
	px_s3_req_t *q;
	bool head;
	target_head_t t;
	head_lines_t lines; /* the head curl is handing over */
	bool started;       /* ft_resp_stream_start was called: stream_end is owed */
	int client_err;     /* the client went away */
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
static bool checksum_wanted(px_s3_req_t *q, const target_head_t *t)
{
	const char *mode = ft_req_header(q->r, "x-amz-checksum-mode");

	return mode != NULL && strcasecmp(mode, "ENABLED") == 0 && t->content_range[0] == '\0';
}

/* Sends the stored x-amz-meta-* and standard header lines of t (and its checksum when wanted) as response headers. */
static void meta_headers(px_s3_req_t *q, target_head_t *t)
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
			if (strncasecmp(p, "x-amz-meta-", UMETA_PREFIX_LEN) == 0 && needs_rfc2047(v))
				meta_header_rfc2047(q, p, v);
			else if ((ck || strncasecmp(p, "x-amz-checksum-", CK_PREFIX_LEN) != 0) && !overridden(q, p))
				ft_resp_header(q->r, p, v);
		}
		p = nl + 1;
	}
	t->meta[0] = '\0'; /* consumed */
}

/* Headers of a successful GET/HEAD/304; returns the Content-Type to use (the stored one by default). */
static const char *object_headers(px_s3_req_t *q, target_head_t *t)
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

	if (target_head_line(&c->t, &c->lines, buf, n) && !c->head && !c->started &&
	    (c->t.status == 200 || c->t.status == 206))
		start_stream(c);
	return n;
}

static size_t get_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	get_ctx_t *c = arg;
	size_t n = size * nitems;

	if (!c->started) {
		keep_errbody(c->t.errbody, &c->t.errlen, buf, n);
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
	target_head_fill(&c->t, &rl->resp, rl->hdrs);
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
	error_reply(c->t.errbody, c->t.errlen, &reply);
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
		hdrs = forward_header(hdrs, q->r, "Range", "Range");
	hdrs = forward_header(hdrs, q->r, "If-Match", "If-Match");
	hdrs = forward_header(hdrs, q->r, "If-None-Match", "If-None-Match");
	hdrs = forward_header(hdrs, q->r, "If-Modified-Since", "If-Modified-Since");
	hdrs = forward_header(hdrs, q->r, "If-Unmodified-Since", "If-Unmodified-Since");
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
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, (long)COPY_CHUNK_MAX);
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	if (!c.started && rc == CURLE_COULDNT_CONNECT && get_retry(q, id, attempt++)) {
		free(url);
		url = get_url(q, query, id);
		if (url == NULL) {
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to serve the object");
			goto out;
		}
		c.t = (target_head_t){.length = -1};
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

/* ---- PUT ---- */

static void put_work(px_s3_req_t *q)
{
	px_s3_target_reply_t reply;
	char *url = px_s3_owner_url(q->bucket, q->key, q->key_len, "etag=md5");
	px_s3_err_t e;

	if (url == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target to store the object");
		return;
	}
	e = px_s3_put_to(q, url, q->op, &reply);
	free(url);
	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	if (reply.status != 200) {
		px_s3_error_from_target(q, &reply);
		return;
	}
	if (reply.etag[0])
		ft_resp_header(q->r, "ETag", reply.etag);
	px_s3_checksum_headers(q, &reply);
	px_s3_send_empty(q, 200);
}

/* px_s3_meta_lines, answering its error: 0, or -1 after responding. */
static int meta_lines_or_error(px_s3_req_t *q, const char ***lines)
{
	px_s3_err_t e = px_s3_meta_lines(q, lines);

	if (e == PX_S3_OK)
		return 0;
	px_s3_error(q, e,
		    e == PX_S3_INVALID_ARGUMENT ? "Content-Type and x-amz-meta-* values must be printable" : NULL);
	return -1;
}

/*
 * meta and the request's If-Match / If-None-Match, which the target checks under the object's name
 * lock as it publishes (conditional writes).
 */
static const char **with_conditions(px_s3_req_t *q, const char **meta)
{
	static const char *const names[] = {"If-Match", "If-None-Match"};
	size_t n = 0;
	const char **v;

	while (meta[n] != NULL)
		n++;
	v = ft_req_alloc(q->r, (n + 3) * sizeof(*v));
	memcpy(v, meta, n * sizeof(*v));
	for (size_t i = 0; i < 2; i++) {
		const char *val = ft_req_header(q->r, names[i]);
		if (val == NULL)
			continue;
		size_t len = strlen(names[i]) + strlen(val) + 3;
		char *line = ft_req_alloc(q->r, len);
		snprintf(line, len, "%s: %s", names[i], val);
		v[n++] = line;
	}
	v[n] = NULL;
	return v;
}

void px_s3_object_put(px_s3_req_t *q)
{
	int64_t len = px_s3_body_length(q);

	if (len < 0) {
		px_s3_error(q, PX_S3_MISSING_CONTENT_LENGTH, NULL);
		return;
	}
	if ((uint64_t)len > PUT_MAX_SIZE) {
		px_s3_error(q, PX_S3_ENTITY_TOO_LARGE, "One PutObject stores at most 5 GiB; use a multipart upload");
		return;
	}
	const char **meta = NULL;
	if (meta_lines_or_error(q, &meta) != 0)
		return;
	q->op = with_conditions(q, meta); /* put_work's extra header lines */
	px_s3_defer(q, put_work);
}

/* ---- DELETE ---- */

static size_t discard_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	(void)buf;
	(void)arg;
	return size * nitems;
}

static void delete_work(px_s3_req_t *q)
{
	char *url = px_s3_owner_url(q->bucket, q->key, q->key_len, NULL);
	CURL *h = px_s3_curl();
	long status = 0;
	CURLcode rc;

	if (url == NULL || h == NULL) {
		px_s3_error(q, url == NULL ? PX_S3_SERVICE_UNAVAILABLE : PX_S3_INTERNAL, "no target for the object");
		free(url);
		return;
	}
	struct curl_slist *hdrs = forward_header(NULL, q->r, "If-Match", "If-Match"); /* conditional delete */
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_cb);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdrs);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		ft_warn("s3 DELETE %s: %s: %s", q->resource, url, curl_easy_strerror(rc));
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
	} else if (status == 200 || status == 404) {
		px_s3_send_empty(q, 204); /* S3 answers 204 whether or not the key existed (also with If-Match) */
	} else if (status == 412) {
		px_s3_error(q, PX_S3_PRECONDITION_FAILED, "If-Match does not name the object's ETag: nothing deleted");
	} else if (status == 501) {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "conditional deletes are not supported in remote buckets");
	} else {
		px_s3_error(q, PX_S3_INTERNAL, "the target answered %ld", status);
	}
	free(url);
}

void px_s3_object_delete(px_s3_req_t *q)
{
	px_s3_defer(q, delete_work);
}

/* ---- DeleteObjects ---- */

typedef struct {
	const char *bucket;
	const char *key;
	size_t key_len;
	bool valid; /* a storable name: anything else cannot exist, so it counts as deleted */
	long status;
	int rc;
	char err[256];
} del_item_t;

static void delete_one(void *arg, int i)
{
	del_item_t *d = &((del_item_t *)arg)[i];
	char *url;

	if (!d->valid)
		return;
	url = px_s3_owner_url(d->bucket, d->key, d->key_len, NULL);
	if (url == NULL) {
		d->rc = -1;
		snprintf(d->err, sizeof(d->err), "no target for the object");
		return;
	}
	d->rc = ft_client_json("DELETE", url, NULL, DELETE_TIMEOUT_MS, &d->status, NULL, d->err, sizeof(d->err));
	free(url);
}

static void delete_result_xml(px_xml_t *x, const del_item_t *d, bool quiet)
{
	bool ok = !d->valid || (d->rc == 0 && (d->status == 200 || d->status == 404));

	if (ok && quiet)
		return;
	px_xml_open(x, ok ? "Deleted" : "Error");
	px_xml_elem_n(x, "Key", d->key, d->key_len);
	if (!ok) {
		px_xml_elem(x, "Code", d->rc != 0 ? "ServiceUnavailable" : "InternalError");
		if (d->rc != 0)
			px_xml_elem(x, "Message", d->err);
		else
			px_xml_elemf(x, "Message", "the target answered %ld", d->status);
	}
	px_xml_close(x, ok ? "Deleted" : "Error");
}

static void delete_objects_work(px_s3_req_t *q)
{
	px_s3_delete_req_t req = {0};
	del_item_t *items = NULL;
	const char *why = NULL;
	char *body = NULL;
	size_t len = 0;
	px_s3_err_t e = px_s3_body_all(q, DELETE_BODY_MAX, &body, &len);
	px_xml_t x;

	if (e != PX_S3_OK) {
		px_s3_error(q, e, NULL);
		return;
	}
	if (px_s3_parse_delete(body, len, &req, &why) != 0) {
		px_s3_error(q, PX_S3_MALFORMED_XML, "%s", why);
		goto out;
	}
	items = calloc((size_t)req.n, sizeof(*items));
	if (items == NULL) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < req.n; i++) {
		items[i].bucket = q->bucket;
		items[i].key = req.keys[i];
		items[i].key_len = req.key_lens[i];
		items[i].valid = ft_name_check_object(req.keys[i], req.key_lens[i], &why) == 0;
	}
	ft_fanout_run(q->host->fanout, delete_one, items, req.n);
	px_xml_init(&x);
	px_xml_open_ns(&x, "DeleteResult");
	for (int i = 0; i < req.n; i++)
		delete_result_xml(&x, &items[i], req.quiet);
	px_xml_close(&x, "DeleteResult");
	px_s3_send_xml(q, 200, &x);
out:
	free(items);
	px_s3_delete_req_free(&req);
	free(body);
}

void px_s3_delete_objects(px_s3_req_t *q)
{
	px_s3_defer(q, delete_objects_work);
}

/* ---- CopyObject and UploadPartCopy ---- */

/* The copy source of a request, parsed on the loop thread (request memory). */
typedef struct {
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char *key;
	size_t key_len;
	bool ranged;          /* UploadPartCopy with x-amz-copy-source-range */
	uint64_t first, last; /* inclusive byte offsets of the range */
	bool replace;         /* CopyObject: x-amz-metadata-directive REPLACE */
	const char **meta;    /* with replace: the request's metadata lines */
} copy_src_t;

typedef struct {
	px_s3_req_t *q;
	const copy_src_t *from;
	bool part; /* the destination is a part of an upload */
	uint8_t *ring;
	size_t rpos, rlen; /* read position and bytes held */
	CURL *get, *put;
	struct curl_slist *put_hdrs;
	target_head_t src;      /* the source GET's response */
	head_lines_t src_lines; /* the head curl is handing over */
	bool get_done, get_paused;
	CURLcode get_rc;
	bool put_added, put_done, put_paused;
	CURLcode put_rc;
	bool range_bad;    /* the range does not fit the source: nothing was sent */
	uint64_t src_size; /* the source's size, when known from Content-Range */
	int64_t moved;     /* bytes handed to the PUT */
	px_s3_target_reply_t reply;
	char put_errbody[ERRBODY_MAX + 1];
	size_t put_errlen;
} copy_t;

/* The status a usable source answers with: 206 for a range, else 200. */
static bool copy_src_ok(const copy_t *c)
{
	return c->src.status == (c->from->ranged ? 206 : 200);
}

static size_t copy_get_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	target_head_line(&c->src, &c->src_lines, buf, n);
	return n;
}

static size_t copy_get_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	if (!copy_src_ok(c)) {
		keep_errbody(c->src.errbody, &c->src.errlen, buf, n);
		return n;
	}
	if (COPY_RING - c->rlen < n) {
		c->get_paused = true;
		return CURL_WRITEFUNC_PAUSE; /* curl keeps the chunk and offers it again after unpausing */
	}
	size_t w = (c->rpos + c->rlen) % COPY_RING;
	size_t first = n < COPY_RING - w ? n : COPY_RING - w;
	memcpy(c->ring + w, buf, first);
	memcpy(c->ring, buf + first, n - first);
	c->rlen += n;
	return n;
}

static size_t copy_put_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t cap = size * nitems;

	if (c->rlen == 0) {
		if (!c->get_done) {
			c->put_paused = true;
			return CURL_READFUNC_PAUSE;
		}
		/* The source ended: complete only when it sent exactly what it announced. */
		return c->get_rc == CURLE_OK && c->moved == c->src.length ? 0 : CURL_READFUNC_ABORT;
	}
	size_t n = c->rlen < cap ? c->rlen : cap;
	size_t first = n < COPY_RING - c->rpos ? n : COPY_RING - c->rpos;
	memcpy(buf, c->ring + c->rpos, first);
	memcpy(buf + first, c->ring, n - first);
	c->rpos = (c->rpos + n) % COPY_RING;
	c->rlen -= n;
	c->moved += (int64_t)n;
	return n;
}

static size_t copy_put_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	copy_t *c = arg;
	size_t n = size * nitems;

	keep_errbody(c->put_errbody, &c->put_errlen, buf, n);
	return n;
}

static void copy_collect(copy_t *c, CURLM *m)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(m, &left)) != NULL) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		if (msg->easy_handle == c->get) {
			c->get_done = true;
			c->get_rc = msg->data.result;
		} else if (msg->easy_handle == c->put) {
			c->put_done = true;
			c->put_rc = msg->data.result;
		}
	}
}

/*
 * The range asked for fits the source: the target answered 206 for exactly first..last (it
 * shortens a range past the end, and answers 416 for one that starts past it).
 */
static bool copy_range_fits(copy_t *c)
{
	unsigned long long a, b, total;

	if (c->src.status == 416 && sscanf(c->src.content_range, "bytes */%llu", &total) == 1) {
		c->src_size = total;
		return false;
	}
	if (c->src.status != 206 || sscanf(c->src.content_range, "bytes %llu-%llu/%llu", &a, &b, &total) != 3)
		return true; /* another answer: an error of the source itself */
	c->src_size = total;
	return a == c->from->first && b == c->from->last;
}

/* Appends the line "name: value" to the destination's headers. */
static void put_header(copy_t *c, const char *line)
{
	struct curl_slist *l = curl_slist_append(c->put_hdrs, line);

	if (l != NULL)
		c->put_hdrs = l;
}

/*
 * A stored "x-amz-checksum-<alg>: ..." line of the source: the copy computes that algorithm
 * again over what it stores (a COMPOSITE value, or the part count, does not carry over).
 */
static void copy_checksum_header(copy_t *c, const char *line)
{
	char name[32], out[64];
	size_t n = strcspn(line, ":");

	if (n >= sizeof(name))
		return;
	memcpy(name, line, n);
	name[n] = '\0';
	ft_xsum_alg_t alg = ft_xsum_from_name(name);
	if (alg == FT_XSUM_NONE)
		return;
	snprintf(out, sizeof(out), "Ais-S3-Checksum: %s", ft_xsum_label(alg));
	put_header(c, out);
}

/*
 * The destination PUT's headers: an object gets the source's Content-Type and x-amz-meta-*
 * (directive COPY) or the request's (REPLACE); a part gets none.
 */
static void copy_put_headers(copy_t *c)
{
	char line[META_MAX];

	put_header(c, "Content-Type:"); /* none unless given below */
	if (c->part)
		return;
	static const char *const conds[] = {"If-Match", "If-None-Match"}; /* of the destination (conditional write) */
	for (size_t i = 0; i < 2; i++) {
		const char *v = ft_req_header(c->q->r, conds[i]);
		if (v != NULL && strlen(v) + 20 < sizeof(line)) {
			snprintf(line, sizeof(line), "%s: %s", conds[i], v);
			put_header(c, line);
		}
	}
	if (px_s3_acl_line(c->q) != NULL && !c->from->replace) /* REPLACE: among the meta lines */
		put_header(c, px_s3_acl_line(c->q));
	if (c->from->replace) {
		for (int i = 0; c->from->meta[i] != NULL; i++)
			put_header(c, c->from->meta[i]);
		return;
	}
	if (c->src.content_type[0]) {
		snprintf(line, sizeof(line), "Content-Type: %s", c->src.content_type);
		put_header(c, line);
	}
	for (const char *p = c->src.meta; *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t len = (size_t)(nl - p);
		while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl + 1;
		if (strncasecmp(line, "x-amz-checksum-", CK_PREFIX_LEN) == 0 ||
		    strncasecmp(line, "x-amz-mp-parts-count:", 21) == 0) {
			copy_checksum_header(c, line);
			continue;
		}
		if (len > 0 && line[len - 1] == ':')
			line[len - 1] = ';'; /* an empty value: curl's way to send one */
		put_header(c, line);
	}
}

/* Drives both transfers until the PUT finished or the source failed before the PUT started. */
static void copy_run(copy_t *c, CURLM *m, int64_t max_size)
{
	int running = 0;

	curl_multi_add_handle(m, c->get);
	for (;;) {
		curl_multi_perform(m, &running);
		copy_collect(c, m);
		if (!c->put_added) {
			if (!c->src.headers_done && !c->get_done) {
				curl_multi_poll(m, NULL, 0, 1000, NULL);
				continue;
			}
			if (c->from->ranged && !copy_range_fits(c)) {
				c->range_bad = true;
				return;
			}
			if (!copy_src_ok(c) || c->src.length < 0 || c->src.length > max_size)
				return; /* nothing was sent to the destination */
			copy_put_headers(c);
			curl_easy_setopt(c->put, CURLOPT_HTTPHEADER, c->put_hdrs);
			curl_easy_setopt(c->put, CURLOPT_INFILESIZE_LARGE, (curl_off_t)c->src.length);
			curl_multi_add_handle(m, c->put);
			c->put_added = true;
			continue;
		}
		if (c->put_done)
			return;
		bool kicked = false;
		if (c->get_paused && COPY_RING - c->rlen >= COPY_CHUNK_MAX) {
			c->get_paused = false;
			curl_easy_pause(c->get, CURLPAUSE_CONT);
			kicked = true;
		}
		if (c->put_paused && (c->rlen > 0 || c->get_done)) {
			c->put_paused = false;
			curl_easy_pause(c->put, CURLPAUSE_CONT);
			kicked = true;
		}
		if (!kicked)
			curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
}

/* Parses x-amz-copy-source ("[/]bucket/key[?versionId=null]", percent-encoded); *key is ft_req_alloc memory. */
static px_s3_err_t copy_source(px_s3_req_t *q, char *bucket, size_t bcap, char **key, size_t *key_len)
{
	const char *v = ft_req_header(q->r, "x-amz-copy-source");
	size_t n = strlen(v);
	char *dec = ft_req_alloc(q->r, n + 1);
	size_t dl;

	if (v[0] == '/') {
		v++;
		n--;
	}
	const char *qm = memchr(v, '?', n);
	if (qm != NULL) {
		if (strncmp(qm, "?versionId=", 11) != 0 || strcmp(qm + 11, "null") != 0)
			return PX_S3_NOT_IMPLEMENTED;
		n = (size_t)(qm - v);
	}
	long decoded = ft_pct_decode(v, n, dec, FT_PCT_STRICT);
	if (decoded < 0)
		return PX_S3_INVALID_ARGUMENT;
	dl = (size_t)decoded;
	char *slash = memchr(dec, '/', dl);
	if (slash == NULL || (size_t)(slash - dec) >= bcap || slash == dec)
		return PX_S3_INVALID_ARGUMENT;
	memcpy(bucket, dec, (size_t)(slash - dec));
	bucket[slash - dec] = '\0';
	*key = slash + 1;
	*key_len = dl - (size_t)(slash - dec) - 1;
	return PX_S3_OK;
}

/* The S3 error of a failed copy. */
static void copy_fail(copy_t *c)
{
	px_s3_req_t *q = c->q;
	px_s3_target_reply_t reply = {0};

	if (c->range_bad) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Range specified is not valid for source object of size: %llu",
			    (unsigned long long)c->src_size);
		return;
	}
	if (!c->put_added || (c->put_done && c->put_rc != CURLE_OK && (!c->get_done || c->get_rc != CURLE_OK))) {
		if (c->src.status == 0 || (c->get_done && c->get_rc != CURLE_OK && copy_src_ok(c))) {
			px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "reading the source object failed");
			return;
		}
		if (c->src.status == 304) { /* x-amz-copy-source-if-none-match / -if-modified-since */
			px_s3_error(q, PX_S3_PRECONDITION_FAILED, NULL);
			return;
		}
		if (copy_src_ok(c)) {
			if (c->part)
				px_s3_error(q, PX_S3_INVALID_REQUEST,
					    "A part copied from an object holds at most 5 GiB; "
					    "copy a range (x-amz-copy-source-range)");
			else
				px_s3_error(q, PX_S3_ENTITY_TOO_LARGE,
					    "CopyObject copies at most 5 GiB; use UploadPartCopy");
			return;
		}
		reply.status = c->src.status;
		error_reply(c->src.errbody, c->src.errlen, &reply);
		reply.code[0] = '\0'; /* a code the source's owner gave is about the source, not this request */
		px_s3_error_from_target(q, &reply);
		return;
	}
	if (c->put_rc != CURLE_OK) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "writing the destination failed");
		return;
	}
	error_reply(c->put_errbody, c->put_errlen, &c->reply);
	if (c->part && c->reply.status == 404 && c->reply.code[0] == '\0')
		px_s3_error(q, PX_S3_NO_SUCH_UPLOAD, NULL);
	else
		px_s3_error_from_target(q, &c->reply);
}

/* Sets up the source GET of c. */
static void copy_get_setup(copy_t *c, const char *url, struct curl_slist **hdrs)
{
	px_s3_req_t *q = c->q;
	char range[64];

	*hdrs = forward_header(*hdrs, q->r, "x-amz-copy-source-if-match", "If-Match");
	*hdrs = forward_header(*hdrs, q->r, "x-amz-copy-source-if-none-match", "If-None-Match");
	*hdrs = forward_header(*hdrs, q->r, "x-amz-copy-source-if-modified-since", "If-Modified-Since");
	*hdrs = forward_header(*hdrs, q->r, "x-amz-copy-source-if-unmodified-since", "If-Unmodified-Since");
	if (c->from->ranged) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)c->from->first,
			 (unsigned long long)c->from->last);
		struct curl_slist *l = curl_slist_append(*hdrs, range);
		*hdrs = l != NULL ? l : *hdrs;
	}
	px_s3_curl_common(c->get, url);
	curl_easy_setopt(c->get, CURLOPT_HTTPHEADER, *hdrs);
	curl_easy_setopt(c->get, CURLOPT_HEADERFUNCTION, copy_get_header_cb);
	curl_easy_setopt(c->get, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->get, CURLOPT_WRITEFUNCTION, copy_get_write_cb);
	curl_easy_setopt(c->get, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->get, CURLOPT_BUFFERSIZE, (long)COPY_CHUNK_MAX);
}

/* Sets up the destination PUT of c (its headers are set once the source answered). */
static void copy_put_setup(copy_t *c, const char *url)
{
	px_s3_curl_common(c->put, url);
	curl_easy_setopt(c->put, CURLOPT_FOLLOWLOCATION, 0L); /* a body already streamed cannot be replayed */
	curl_easy_setopt(c->put, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c->put, CURLOPT_READFUNCTION, copy_put_read_cb);
	curl_easy_setopt(c->put, CURLOPT_READDATA, c);
	curl_easy_setopt(c->put, CURLOPT_HEADERFUNCTION, px_s3_reply_header_cb);
	curl_easy_setopt(c->put, CURLOPT_HEADERDATA, &c->reply);
	curl_easy_setopt(c->put, CURLOPT_WRITEFUNCTION, copy_put_write_cb);
	curl_easy_setopt(c->put, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->put, CURLOPT_UPLOAD_BUFFERSIZE, (long)COPY_CHUNK_MAX);
}

/*
 * Worker: streams the source of q->op into put_url (an object, or a part when part) and
 * responds with CopyObjectResult / CopyPartResult or the S3 error.
 */
static void copy_to(px_s3_req_t *q, const char *put_url, bool part)
{
	const copy_src_t *src = q->op;
	copy_t c = {.q = q, .from = src, .part = part, .src = {.length = -1}};
	struct curl_slist *get_hdrs = NULL;
	char *get_url = px_s3_owner_url(src->bucket, src->key, src->key_len, NULL);
	CURLM *m = curl_multi_init();
	char date[40];

	c.ring = malloc(COPY_RING);
	c.get = curl_easy_init();
	c.put = curl_easy_init();
	ft_client_tls_apply(c.get);
	ft_client_tls_apply(c.put);
	if (get_url == NULL || put_url == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no targets in the cluster map");
		goto out;
	}
	if (m == NULL || c.ring == NULL || c.get == NULL || c.put == NULL) {
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		goto out;
	}
	copy_get_setup(&c, get_url, &get_hdrs);
	copy_put_setup(&c, put_url);
	copy_run(&c, m, (int64_t)PUT_MAX_SIZE);
	if (c.put_added)
		curl_easy_getinfo(c.put, CURLINFO_RESPONSE_CODE, &c.reply.status);
	if (!c.put_added || !c.put_done || c.put_rc != CURLE_OK || c.reply.status != 200 || !c.reply.etag[0]) {
		if (c.put_done && c.put_rc == CURLE_OK && c.reply.status == 200)
			px_s3_error(q, PX_S3_INTERNAL, "the target stored the copy but sent no ETag");
		else
			copy_fail(&c);
		goto out;
	}
	px_xml_t x;
	ft_date_format_iso8601(ft_now_ns(), date, sizeof(date));
	px_xml_init(&x);
	px_xml_open_ns(&x, part ? "CopyPartResult" : "CopyObjectResult");
	px_xml_elem(&x, "LastModified", date);
	px_xml_elem(&x, "ETag", c.reply.etag);
	px_xml_close(&x, part ? "CopyPartResult" : "CopyObjectResult");
	px_s3_send_xml(q, 200, &x);
out:
	if (m != NULL) {
		if (c.get != NULL)
			curl_multi_remove_handle(m, c.get);
		if (c.put != NULL && c.put_added)
			curl_multi_remove_handle(m, c.put);
		curl_multi_cleanup(m);
	}
	curl_easy_cleanup(c.put);
	curl_easy_cleanup(c.get);
	curl_slist_free_all(c.put_hdrs);
	curl_slist_free_all(get_hdrs);
	free(c.ring);
	free(get_url);
}

static void copy_work(px_s3_req_t *q)
{
	char *put_url = px_s3_owner_url(q->bucket, q->key, q->key_len, "etag=md5");

	copy_to(q, put_url, false);
	free(put_url);
}

void px_s3_copy_part(px_s3_req_t *q, const char *put_url)
{
	copy_to(q, put_url, true);
}

/*
 * x-amz-copy-source-range "bytes=first-last" (decimal, first <= last) into src. PX_S3_OK, or
 * InvalidArgument.
 */
static px_s3_err_t copy_range(const char *v, copy_src_t *src)
{
	char *end;

	if (strncmp(v, "bytes=", 6) != 0 || !isdigit((unsigned char)v[6]))
		return PX_S3_INVALID_ARGUMENT;
	errno = 0;
	src->first = strtoull(v + 6, &end, 10);
	if (errno != 0 || *end != '-' || !isdigit((unsigned char)end[1]))
		return PX_S3_INVALID_ARGUMENT;
	src->last = strtoull(end + 1, &end, 10);
	if (errno != 0 || *end != '\0' || src->first > src->last)
		return PX_S3_INVALID_ARGUMENT;
	src->ranged = true;
	return PX_S3_OK;
}

int px_s3_copy_source_prepare(px_s3_req_t *q, bool part)
{
	copy_src_t *src = ft_req_alloc(q->r, sizeof(*src));
	const char *why = NULL;
	const char *range = part ? ft_req_header(q->r, "x-amz-copy-source-range") : NULL;
	px_s3_err_t e;

	memset(src, 0, sizeof(*src));
	e = copy_source(q, src->bucket, sizeof(src->bucket), &src->key, &src->key_len);
	if (e != PX_S3_OK) {
		px_s3_error(q, e,
			    e == PX_S3_NOT_IMPLEMENTED ? "Object versions are not supported"
						       : "x-amz-copy-source must be <bucket>/<key>");
		return -1;
	}
	if (range != NULL && copy_range(range, src) != PX_S3_OK) {
		px_s3_error(
			q, PX_S3_INVALID_ARGUMENT,
			"The x-amz-copy-source-range value must be of the form bytes=first-last where first and last "
			"are the zero-based offsets of the first and last bytes to copy");
		return -1;
	}
	if (ft_name_check_bucket(src->bucket, &why) != 0) {
		px_s3_error(q, PX_S3_INVALID_BUCKET_NAME, "source bucket: %s", why);
		return -1;
	}
	ft_bmd_t *bmd = ft_bmd_current();
	bool exists = bmd != NULL && ft_bmd_find(bmd, "ais", src->bucket) != NULL;
	ft_bmd_put(bmd);
	if (!exists) {
		px_s3_error(q, PX_S3_NO_SUCH_BUCKET, "The source bucket does not exist");
		return -1;
	}
	if (ft_name_check_object(src->key, src->key_len, &why) != 0) {
		px_s3_error(q, PX_S3_NO_SUCH_KEY, "The source key does not exist");
		return -1;
	}
	q->op = src;
	return 0;
}

void px_s3_object_copy(px_s3_req_t *q)
{
	const char *directive = ft_req_header(q->r, "x-amz-metadata-directive");
	copy_src_t *src;

	if (directive != NULL && strcmp(directive, "COPY") != 0 && strcmp(directive, "REPLACE") != 0) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Unknown metadata directive (COPY or REPLACE)");
		return;
	}
	if (px_s3_copy_source_prepare(q, false) != 0)
		return;
	src = q->op;
	src->replace = directive != NULL && strcmp(directive, "REPLACE") == 0;
	if (strcmp(src->bucket, q->bucket) == 0 && src->key_len == q->key_len &&
	    memcmp(src->key, q->key, q->key_len) == 0 && !src->replace) {
		px_s3_error(q, PX_S3_INVALID_REQUEST,
			    "This copy request is illegal because it copies an object to itself without changing its "
			    "metadata (use x-amz-metadata-directive: REPLACE)");
		return;
	}
	if (src->replace && meta_lines_or_error(q, &src->meta) != 0)
		return;
	px_s3_defer(q, copy_work);
}

/* ---- subresources ---- */

/* ---- GetObjectAttributes ---- */

/* The first n bytes of s as a C string in buf (cut to fit); returns buf. */
static const char *strndup_na(const char *s, size_t n, char *buf, size_t cap)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return buf;
}

/* What a target's HEAD told of an object. */
typedef struct {
	char etag[PX_S3_ETAG_MAX];
	char last_modified[64];
	char size[24];
	char parts[12];
	px_s3_target_reply_t ck; /* its checksum lines (px_s3_reply_header_cb) */
} attrs_t;

static size_t attrs_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	attrs_t *a = arg;
	size_t n = size * nitems;
	static const struct {
		const char *name;
		size_t off, cap;
	} want[] = {
		{"ETag:", offsetof(attrs_t, etag), sizeof(((attrs_t *)0)->etag)},
		{"Last-Modified:", offsetof(attrs_t, last_modified), sizeof(((attrs_t *)0)->last_modified)},
		{"Ais-Size:", offsetof(attrs_t, size), sizeof(((attrs_t *)0)->size)},
		{"Ais-S3-Parts:", offsetof(attrs_t, parts), sizeof(((attrs_t *)0)->parts)},
	};

	px_s3_reply_header_cb(buf, size, nitems, &a->ck);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		size_t nl = strlen(want[i].name);
		if (n <= nl || strncasecmp(buf, want[i].name, nl) != 0)
			continue;
		const char *v = buf + nl;
		size_t len = n - nl;
		while (len > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			len--;
		}
		while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
			len--;
		if (len < want[i].cap) {
			memcpy((char *)a + want[i].off, v, len);
			((char *)a + want[i].off)[len] = '\0';
		}
	}
	return n;
}

/* Whether the comma list of x-amz-object-attributes names attr. */
static bool attr_wanted(const char *list, const char *attr)
{
	size_t n = strlen(attr);

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ",");
		size_t t = len;
		while (t > 0 && p[t - 1] == ' ')
			t--;
		if (t == n && strncmp(p, attr, n) == 0)
			return true;
		p += len;
	}
	return false;
}

/* Whether every name in list is one GetObjectAttributes knows. */
static bool attrs_valid(const char *list)
{
	static const char *const known[] = {"ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"};
	int named = 0;

	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t len = strcspn(p, ","), t = len;
		while (t > 0 && p[t - 1] == ' ')
			t--;
		bool ok = t == 0;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !ok; i++)
			ok = strlen(known[i]) == t && strncmp(p, known[i], t) == 0;
		if (!ok)
			return false;
		named += t > 0;
		p += len;
	}
	return named > 0;
}

static void attributes_work(px_s3_req_t *q)
{
	const char *list = ft_req_header(q->r, "x-amz-object-attributes");
	char *url = px_s3_owner_url(q->bucket, q->key, q->key_len, NULL);
	CURL *h = px_s3_curl();
	attrs_t a;
	long status = 0;

	memset(&a, 0, sizeof(a));
	if (url == NULL || h == NULL) {
		px_s3_error(q, PX_S3_SERVICE_UNAVAILABLE, "no target for the object");
		free(url);
		return;
	}
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, attrs_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &a);
	CURLcode rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
	free(url);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK || status != 200) {
		px_s3_error(q,
			    rc != CURLE_OK  ? PX_S3_SERVICE_UNAVAILABLE
			    : status == 404 ? PX_S3_NO_SUCH_KEY
					    : PX_S3_INTERNAL,
			    NULL);
		return;
	}
	px_xml_t x;
	px_xml_init(&x);
	px_xml_open_ns(&x, "GetObjectAttributesResponse");
	if (attr_wanted(list, "ETag")) {
		size_t n = strlen(a.etag);
		px_xml_elemf(&x, "ETag", "%.*s", (int)(n >= 2 ? n - 2 : 0), a.etag + (n >= 2)); /* without quotes */
	}
	const char *colon = strchr(a.ck.checksum, ':');
	if (attr_wanted(list, "Checksum") && colon != NULL) {
		char tag[32];
		ft_xsum_alg_t alg =
			ft_xsum_from_name(strndup_na(a.ck.checksum, (size_t)(colon - a.ck.checksum), tag, sizeof(tag)));
		px_xml_open(&x, "Checksum");
		snprintf(tag, sizeof(tag), "Checksum%s", ft_xsum_label(alg));
		px_xml_elem(&x, tag, colon + 2);
		if (a.ck.checksum_type[0])
			px_xml_elem(&x, "ChecksumType", a.ck.checksum_type);
		px_xml_close(&x, "Checksum");
	}
	if (attr_wanted(list, "ObjectParts") && a.parts[0]) {
		px_xml_open(&x, "ObjectParts");
		px_xml_elem(&x, "PartsCount", a.parts); /* TotalPartsCount in the SDKs' model */
		px_xml_close(&x, "ObjectParts");
	}
	if (attr_wanted(list, "StorageClass"))
		px_xml_elem(&x, "StorageClass", "STANDARD");
	if (attr_wanted(list, "ObjectSize"))
		px_xml_elem(&x, "ObjectSize", a.size[0] ? a.size : "0");
	px_xml_close(&x, "GetObjectAttributesResponse");
	if (a.last_modified[0])
		ft_resp_header(q->r, "Last-Modified", a.last_modified);
	px_s3_send_xml(q, 200, &x);
}

/* GetObjectAttributes: the attributes x-amz-object-attributes names, from a HEAD on the owner. */
static void object_attributes(px_s3_req_t *q)
{
	const char *list = ft_req_header(q->r, "x-amz-object-attributes");

	if (list == NULL || !attrs_valid(list)) {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT,
			    list == NULL
				    ? "The x-amz-object-attributes header specifying the attributes to be retrieved "
				      "is either missing or empty"
				    : "Invalid attribute name specified.");
		return;
	}
	px_s3_defer(q, attributes_work);
}

void px_s3_object_subresource(px_s3_req_t *q, const char *sub)
{
	ft_method_t m = ft_req_method(q->r);

	if (m == FT_HTTP_GET && strcmp(sub, "attributes") == 0) {
		object_attributes(q);
	} else if ((m == FT_HTTP_GET || m == FT_HTTP_PUT) && strcmp(sub, "acl") == 0) {
		px_s3_object_acl(q); /* acl.c */
	} else if (m == FT_HTTP_GET && strcmp(sub, "tagging") == 0) {
		px_xml_t x;
		px_xml_init(&x);
		px_xml_open_ns(&x, "Tagging");
		px_xml_open(&x, "TagSet");
		px_xml_close(&x, "TagSet");
		px_xml_close(&x, "Tagging");
		px_s3_send_xml(q, 200, &x); /* objects have no tags here */
	} else if (m == FT_HTTP_DELETE && strcmp(sub, "tagging") == 0) {
		px_s3_send_empty(q, 204);
	} else {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "%s ?%s is not implemented", ft_req_method_name(q->r), sub);
	}
}
