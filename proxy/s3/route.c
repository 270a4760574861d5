/* SPDX-License-Identifier: Apache-2.0 */
/* S3 API entry: routing (path style, root, virtual host), SigV4 authentication, errors, target relay helpers. */
#include "s3/s3.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "auth/auth.h"
#include "auth/urlsig.h"
#include "base/cksum.h"
#include "base/codec.h"
#include "base/log.h"
#include "base/names.h"
#include "base/redact.h"
#include "base/xsum.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"
#include "s3/chunked.h"

/*
 * DESIGN
 * px_s3_route runs on the loop thread: it recognizes the request, authenticates it (HMACs only,
 * no I/O), checks names and the bucket's existence, and dispatches. Handlers that need other
 * nodes defer to a worker.
 */

#define TARGET_ERRBODY_MAX 1024

struct px_s3 {
	px_s3_host_t host; /* what the daemon lends the front end */
	bool key_ready;    /* curl_key created */
	bool rloop_ready;  /* the GET relay loops run */
	pthread_key_t curl_key;
};

/* The daemon's S3 state, for px_s3_curl (set by px_s3_init before any request). */
static struct px_s3 *curl_owner;
static atomic_uint_fast64_t request_seq;
static int64_t start_ns;
static int relay_timeout_ms = 30000; /* s3_relay_timeout_ms, set by px_s3_init */

int px_s3_relay_timeout_ms(void)
{
	return relay_timeout_ms;
}

/* ---- keys ---- */

static void curl_handle_destroy(void *h)
{
	curl_easy_cleanup(h);
}

/* The keys are the identity store's (common/auth: auth_keys, else s3_keys), loaded at start. */
static void report_keys(const struct px_s3 *s)
{
	const ft_config_t *c = s->host.cfg;
	size_t n = ft_ident_count(ft_auth()->ids);

	if (n == 0 && !c->s3_anonymous)
		ft_warn("s3: no access keys and s3_anonymous off: every S3 request will be refused");
	else
		ft_info("s3: %zu access key(s)%s", n, c->s3_anonymous ? "; anonymous access on" : "");
}

px_s3_t *px_s3_init(const px_s3_host_t *host, char *err, size_t errlen)
{
	struct px_s3 *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->host = *host;
	start_ns = ft_now_ns();
	relay_timeout_ms = host->cfg->s3_relay_timeout_ms;
	if (pthread_key_create(&s->curl_key, curl_handle_destroy) != 0) {
		snprintf(err, errlen, "s3: cannot create a thread key");
		goto fail;
	}
	s->key_ready = true;
	/* the HTTP loop threads relay GETs themselves: small ones without a worker (relay_loop.c) */
	px_s3_rloop_start();
	s->rloop_ready = true;
	curl_owner = s;
	report_keys(s);
	return s;
fail:
	px_s3_fini(s);
	return NULL;
}

void px_s3_fini(px_s3_t *s)
{
	if (s == NULL)
		return;
	curl_owner = NULL;
	if (s->rloop_ready)
		px_s3_rloop_stop();
	if (s->key_ready)
		pthread_key_delete(s->curl_key);
	free(s);
}

static const char *secret_of(void *ctx, const char *access_key)
{
	ft_ident_t id;

	(void)ctx;
	return ft_ident_find(ft_auth()->ids, access_key, &id) == 0 ? id.secret : NULL;
}

static const char *bucket_sub(ft_req_t *r);

/*
 * The role an S3 request needs, as the native API's table gives it (common/auth/policy.c): reads
 * readonly, writes readwrite, DeleteBucket admin. A DELETE of a
 * bucket subresource (DeleteBucketTagging, -Policy, -Cors, ...) is a configuration write like its
 * PUT, not a bucket deletion: readwrite, as DeleteObjectTagging and PutObjectTagging are.
 */
static ft_role_t s3_need(const px_s3_req_t *q)
{
	ft_method_t m = ft_req_method(q->r);

	if (m == FT_HTTP_GET || m == FT_HTTP_HEAD)
		return FT_ROLE_READONLY;
	if (m == FT_HTTP_DELETE && q->bucket[0] != '\0' && q->key_len == 0 && bucket_sub(q->r) == NULL)
		return FT_ROLE_ADMIN;
	return FT_ROLE_READWRITE;
}

bool px_s3_key_allows(const px_s3_req_t *q, ft_role_t need, const char *bucket)
{
	ft_principal_t p;
	ft_ident_t id;
	bool ok;

	if (q->anonymous)
		return true;
	if (ft_ident_find(ft_auth()->ids, q->auth.access_key, &id) != 0)
		return false;
	ft_ident_principal(&id, &p);
	ok = ft_principal_allows(&p, need, bucket);
	ft_principal_clear(&p);
	return ok;
}

/* Whether the signed request's key may do it (role and bucket grants of the identity store). */
static bool s3_allowed(const px_s3_req_t *q)
{
	return px_s3_key_allows(q, s3_need(q), q->bucket);
}

/* ---- curl ---- */

void *px_s3_curl(void)
{
	struct px_s3 *s = curl_owner;
	CURL *h;

	if (s == NULL || ft_client_global_init() != 0)
		return NULL;
	h = pthread_getspecific(s->curl_key);
	if (h == NULL) {
		h = curl_easy_init();
		if (h == NULL)
			return NULL;
		if (pthread_setspecific(s->curl_key, h) != 0) {
			curl_easy_cleanup(h);
			return NULL;
		}
	}
	curl_easy_reset(h);
	ft_client_tls_apply(h);
	return h;
}

/* ---- responses ---- */

static void request_id_header(ft_req_t *r, const char *id)
{
	ft_resp_header(r, "x-amz-request-id", id);
}

/* The S3 error document of e with the given HTTP status. */
static void send_error_status(ft_req_t *r, int status, const char *resource, const char *request_id, px_s3_err_t e,
			      const char *msg)
{
	px_xml_t x;

	px_xml_error_doc(&x, e, msg, resource, request_id);
	request_id_header(r, request_id);
	if (x.failed)
		ft_resp_bytes(r, status, NULL, NULL, 0);
	else
		ft_resp_bytes(r, status, "application/xml", x.p, x.len);
	px_xml_free(&x);
}

static void send_error(ft_req_t *r, const char *resource, const char *request_id, px_s3_err_t e, const char *msg)
{
	send_error_status(r, px_s3_err_status(e), resource, request_id, e, msg);
}

static void make_request_id(char out[17])
{
	uint64_t n = atomic_fetch_add(&request_seq, 1) + 1;
	uint64_t v = ((uint64_t)start_ns ^ (n * 0x9E3779B97F4A7C15ull)) + n;

	snprintf(out, 17, "%016" PRIX64, v);
}

void px_s3_error_raw(ft_req_t *r, const char *resource, px_s3_err_t e, const char *msg)
{
	char id[17];

	make_request_id(id);
	send_error(r, resource, id, e, msg);
}

void px_s3_error(px_s3_req_t *q, px_s3_err_t e, const char *fmt, ...)
{
	char msg[512] = "";
	va_list ap;

	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	if (px_s3_err_status(e) >= 500)
		ft_warn("s3 %s %s: %s %s", ft_req_method_name(q->r), q->resource, px_s3_err_code(e),
			msg[0] ? msg : px_s3_err_message(e));
	else
		ft_debug("s3 %s %s: %s %s", ft_req_method_name(q->r), q->resource, px_s3_err_code(e), msg);
	send_error(q->r, q->resource, q->request_id, e, msg);
}

px_s3_err_t px_s3_err_of_code(const char *code)
{
	for (int e = PX_S3_OK + 1; code != NULL && e < PX_S3_ERR_COUNT; e++)
		if (strcmp(px_s3_err_code((px_s3_err_t)e), code) == 0)
			return (px_s3_err_t)e;
	return PX_S3_OK;
}

void px_s3_error_from_target(px_s3_req_t *q, const px_s3_target_reply_t *reply)
{
	const char *m = reply->message;
	px_s3_err_t e = px_s3_err_of_code(reply->code);

	if (e != PX_S3_OK) { /* the target named the S3 error (multipart endpoints do) */
		px_s3_error(q, e, "%s", m[0] ? m : px_s3_err_message(e));
		return;
	}
	switch (reply->status) {
	case 400:
		e = PX_S3_INVALID_ARGUMENT;
		break;
	case 401: /* an anonymous read of data that is not public (target/obj/acl.c) */
	case 403:
		e = PX_S3_ACCESS_DENIED;
		break;
	case 404:
		e = strstr(m, "bucket") != NULL && strstr(m, "does not exist") != NULL && strstr(m, "object") == NULL
			    ? PX_S3_NO_SUCH_BUCKET
			    : PX_S3_NO_SUCH_KEY;
		break;
	case 307:
		e = PX_S3_SERVICE_UNAVAILABLE;
		break; /* the map changed under the request: retry */
	case 408:
		e = PX_S3_REQUEST_TIMEOUT;
		break;
	case 409:
		e = PX_S3_INVALID_ARGUMENT;
		break; /* a name neither its path nor its hashed file can hold (target/core/keymap.h) */
	case 411:
		e = PX_S3_MISSING_CONTENT_LENGTH;
		break;
	case 412:
		e = PX_S3_PRECONDITION_FAILED;
		break;
	case 413:
		e = PX_S3_ENTITY_TOO_LARGE;
		break;
	case 416:
		e = PX_S3_INVALID_RANGE;
		break;
	case 503:
		e = PX_S3_SERVICE_UNAVAILABLE;
		break;
	case 507:
		e = PX_S3_INSUFFICIENT_STORAGE;
		break;
	case 501:
		e = PX_S3_NOT_IMPLEMENTED;
		break;
	default:
		e = reply->status >= 400 && reply->status < 500 ? PX_S3_INVALID_REQUEST : PX_S3_INTERNAL;
		break;
	}
	if (e == PX_S3_NO_SUCH_KEY || e == PX_S3_NO_SUCH_BUCKET || e == PX_S3_INVALID_RANGE ||
	    e == PX_S3_PRECONDITION_FAILED)
		px_s3_error(q, e, NULL);
	else
		px_s3_error(q, e, "%s", m[0] ? m : px_s3_err_message(e));
}

void px_s3_send_xml(px_s3_req_t *q, int status, px_xml_t *x)
{
	if (x->failed) {
		px_xml_free(x);
		px_s3_error(q, PX_S3_INTERNAL, "out of memory");
		return;
	}
	request_id_header(q->r, q->request_id);
	ft_resp_bytes(q->r, status, "application/xml", x->p, x->len);
	px_xml_free(x);
}

void px_s3_send_empty(px_s3_req_t *q, int status)
{
	request_id_header(q->r, q->request_id);
	ft_resp_bytes(q->r, status, NULL, NULL, 0);
}

/* ---- deferring ---- */

static void defer_trampoline(ft_req_t *r, void *arg)
{
	px_s3_req_t *q = arg;
	void (*fn)(px_s3_req_t * q) = q->deferred;

	(void)r;
	fn(q);
}

void px_s3_defer(px_s3_req_t *q, void (*fn)(px_s3_req_t *q))
{
	q->deferred = fn;
	ft_req_defer(q->r, defer_trampoline, q);
}

/* ---- URLs ---- */

char *px_s3_owner_url(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query)
{
	char id[FT_ID_MAX];

	return px_s3_owner_url_id(provider, bucket, key, key_len, query, id);
}

static char *owner_url(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query,
		       char *id, bool sign);

char *px_s3_owner_url_id(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query,
			 char *id)
{
	return owner_url(provider, bucket, key, key_len, query, id, true);
}

char *px_s3_owner_url_unsigned(const char *provider, const char *bucket, const char *key, size_t key_len,
			       const char *query, char *id)
{
	return owner_url(provider, bucket, key, key_len, query, id, false);
}

static char *owner_url(const char *provider, const char *bucket, const char *key, size_t key_len, const char *query,
		       char *id, bool sign)
{
	ft_smap_t *smap = ft_smap_current();
	const ft_node_t *owner = smap != NULL ? ft_smap_owner(smap, provider, bucket, key, key_len) : NULL;
	bool remote = strcmp(provider, "ais") != 0, has_query = query != NULL && query[0];
	char *eb = NULL, *ek = NULL, *url = NULL;

	id[0] = '\0';
	if (owner == NULL)
		goto out;
	snprintf(id, FT_ID_MAX, "%s", owner->id);
	eb = ft_pct_encode_dup(bucket, strlen(bucket), 0);
	ek = ft_pct_encode_dup(key, key_len, FT_PCT_KEEP_SLASH);
	if (eb == NULL || ek == NULL)
		goto out;
	ft_strbuf_t b = {0};
	ft_strbuf_addf(&b, "%s/v1/objects/%s/%s", owner->public_url, eb, ek);
	if (remote)
		ft_strbuf_addf(&b, "?provider=%s%s", provider, has_query ? "&" : "");
	else if (has_query)
		ft_strbuf_addf(&b, "?");
	ft_strbuf_addf(&b, "%s", has_query ? query : "");
	/* The proxy speaks for a client it authenticated: a URL any method may use (never leaves the cluster). */
	if (sign && ft_auth()->enabled)
		ft_urlsig_append(&b, remote || has_query, ft_auth()->url_key, FT_URLSIG_ANY_METHOD, provider, bucket,
				 key, key_len, time(NULL));
	if (b.failed)
		ft_strbuf_free(&b);
	url = b.p;
out:
	free(ek);
	free(eb);
	ft_smap_put(smap);
	return url;
}

/* ---- object metadata ---- */

#define UMETA_PREFIX "x-amz-meta-"
#define UMETA_MAX 2048 /* S3: names and values of the user metadata together */

/* A value the target can store and send back: no control characters but tab. */
static bool meta_value_ok(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 && *p != '\t')
			return false;
	return true;
}

/* Standard headers S3 keeps with an object (Content-Type aside). */
static const char *const std_headers[] = {"Cache-Control", "Content-Disposition", "Content-Encoding",
					  "Content-Language", "Expires"};

/* Content-Encoding without the aws-chunked token of the transfer framing, in the request's memory ("" if nothing else). */
static const char *content_encoding(px_s3_req_t *q, const char *v)
{
	size_t len = strlen(v);
	char *out = ft_req_alloc(q->r, len + 1), *o = out;

	for (const char *p = v; *p;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		const char *t = p;
		size_t tn = n;
		while (tn > 0 && (*t == ' ' || *t == '\t')) {
			t++;
			tn--;
		}
		while (tn > 0 && (t[tn - 1] == ' ' || t[tn - 1] == '\t'))
			tn--;
		if (tn > 0 && !(tn == 11 && strncasecmp(t, "aws-chunked", 11) == 0)) {
			if (o != out)
				*o++ = ',';
			memcpy(o, t, tn);
			o += tn;
		}
		p += n + (comma != NULL);
	}
	*o = '\0';
	return out;
}

/* Adds the standard headers of q to v from index *k. PX_S3_OK or INVALID_ARGUMENT. */
static px_s3_err_t std_lines(px_s3_req_t *q, const char **v, int *k)
{
	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++) {
		const char *val = ft_req_header(q->r, std_headers[i]);
		if (val != NULL && strcmp(std_headers[i], "Content-Encoding") == 0)
			val = content_encoding(q, val);
		if (val == NULL || val[0] == '\0')
			continue;
		if (!meta_value_ok(val))
			return PX_S3_INVALID_ARGUMENT;
		size_t len = strlen(std_headers[i]) + strlen(val) + 3;
		char *line = ft_req_alloc(q->r, len);
		snprintf(line, len, "%s: %s", std_headers[i], val);
		v[(*k)++] = line;
	}
	return PX_S3_OK;
}

px_s3_err_t px_s3_meta_lines(px_s3_req_t *q, const char ***lines)
{
	int n = ft_req_header_count(q->r), k = 0;
	const char **v = ft_req_alloc(q->r, ((size_t)n + 2 + 5 + 2) * sizeof(*v));
	const char *ct = ft_req_header(q->r, "Content-Type");
	size_t umeta = 0, plen = strlen(UMETA_PREFIX);

	if (ct != NULL && ct[0] != '\0') {
		if (!meta_value_ok(ct))
			return PX_S3_INVALID_ARGUMENT;
		size_t len = strlen(ct) + sizeof("Content-Type: ");
		char *line = ft_req_alloc(q->r, len);
		snprintf(line, len, "Content-Type: %s", ct);
		v[k++] = line;
	}
	for (int i = 0; i < n; i++) {
		const char *name, *value;
		ft_req_header_at(q->r, i, &name, &value);
		if (strncasecmp(name, UMETA_PREFIX, plen) != 0)
			continue;
		if (name[plen] == '\0' || !meta_value_ok(value))
			return PX_S3_INVALID_ARGUMENT;
		umeta += strlen(name) - plen + strlen(value);
		if (umeta > UMETA_MAX)
			return PX_S3_METADATA_TOO_LARGE;
		size_t len = strlen(name) + strlen(value) + 3;
		char *line = ft_req_alloc(q->r, len);
		/* curl drops "Name:" without a value; "Name;" is how it sends an empty one */
		snprintf(line, len, value[0] != '\0' ? "%s: %s" : "%s;", name, value);
		v[k++] = line;
	}
	px_s3_err_t e = std_lines(q, v, &k);
	if (e != PX_S3_OK)
		return e;
	static const char *const ck[] = {"x-amz-checksum-algorithm", "x-amz-checksum-type"}; /* for uploads */
	for (size_t i = 0; i < 2; i++) {
		const char *val = ft_req_header(q->r, ck[i]);
		if (val == NULL || val[0] == '\0' || !meta_value_ok(val))
			continue;
		size_t len = strlen(ck[i]) + strlen(val) + 3;
		char *line = ft_req_alloc(q->r, len);
		snprintf(line, len, "%s: %s", ck[i], val);
		v[k++] = line;
	}
	if (px_s3_acl_line(q) != NULL) /* checked by px_s3_acl_header (acl.c) */
		v[k++] = px_s3_acl_line(q);
	v[k] = NULL;
	*lines = v;
	return PX_S3_OK;
}

/* ---- relaying a body to a target ---- */

typedef struct {
	px_s3_req_t *q;
	px_s3_err_t body_err;
	int64_t sent;
	px_s3_target_reply_t *reply;
	char errbody[TARGET_ERRBODY_MAX + 1];
	size_t errlen;
} put_ctx_t;

static size_t put_read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	put_ctx_t *c = arg;
	ssize_t n = px_s3_body_read(c->q, buf, size * nitems);

	if (n < 0) {
		c->body_err = (px_s3_err_t)-n;
		return CURL_READFUNC_ABORT;
	}
	c->sent += n;
	return (size_t)n;
}

/* A redirect may replay the body only when none of it was read yet. */
static int put_seek_cb(void *arg, curl_off_t off, int origin)
{
	put_ctx_t *c = arg;

	return off == 0 && origin == SEEK_SET && c->sent == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_CANTSEEK;
}

/* The value of the header line buf (n bytes) after its name's colon, trimmed, into out; 0, or -1 if too long. */
static int header_value(const char *buf, size_t n, size_t name_len, char *out, size_t cap)
{
	const char *v = buf + name_len;
	size_t len = n - name_len;

	while (len > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		len--;
	}
	while (len > 0 && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
		len--;
	if (len >= cap)
		return -1;
	memcpy(out, v, len);
	out[len] = '\0';
	return 0;
}

size_t px_s3_reply_header_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	px_s3_target_reply_t *reply = arg;
	size_t n = size * nitems, plen = strlen("x-amz-checksum-");

	if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		reply->etag[0] = reply->checksum[0] = reply->checksum_type[0] = '\0';
	} else if (n > 5 && strncasecmp(buf, "ETag:", 5) == 0) {
		header_value(buf, n, 5, reply->etag, sizeof(reply->etag));
	} else if (n > plen && strncasecmp(buf, "x-amz-checksum-type:", plen + 5) == 0) {
		header_value(buf, n, plen + 5, reply->checksum_type, sizeof(reply->checksum_type));
	} else if (n > plen && strncasecmp(buf, "x-amz-checksum-", plen) == 0 && memchr(buf, ':', n) != NULL) {
		/* "x-amz-checksum-<alg>: <value>": kept as the line, name lowercased */
		size_t nl = (size_t)((const char *)memchr(buf, ':', n) - buf);
		char v[FT_XSUM_B64_MAX + 8];
		if (nl < 32 && header_value(buf, n, nl + 1, v, sizeof(v)) == 0) {
			char name[32];
			for (size_t i = 0; i < nl; i++)
				name[i] = (char)(buf[i] >= 'A' && buf[i] <= 'Z' ? buf[i] - 'A' + 'a' : buf[i]);
			name[nl] = '\0';
			snprintf(reply->checksum, sizeof(reply->checksum), "%s: %s", name, v);
		}
	}
	return n;
}

static size_t put_write_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	put_ctx_t *c = arg;
	size_t n = size * nitems, take = n;

	if (take > TARGET_ERRBODY_MAX - c->errlen)
		take = TARGET_ERRBODY_MAX - c->errlen;
	memcpy(c->errbody + c->errlen, buf, take);
	c->errlen += take;
	return n;
}

/* The "message" and "code" of a target's JSON error body, into reply. */
static void target_message(const char *body, size_t len, px_s3_target_reply_t *reply)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "message"));
	const char *code = json_string_value(json_object_get(j, "code"));

	snprintf(reply->message, sizeof(reply->message), "%s", m != NULL ? m : "");
	snprintf(reply->code, sizeof(reply->code), "%s", code != NULL ? code : "");
	json_decref(j);
}

void px_s3_curl_common(void *h, const char *url)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	/* No total timeout (objects may be large): a target sending nothing for this long fails. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)((px_s3_relay_timeout_ms() + 999) / 1000));
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L); /* the map changed: the target redirects */
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
}

px_s3_err_t px_s3_put_to(px_s3_req_t *q, const char *url, const char *const *extra, px_s3_target_reply_t *reply)
{
	CURL *h = px_s3_curl();
	struct curl_slist *hdrs = NULL;
	put_ctx_t c = {.q = q, .reply = reply};
	int64_t total = px_s3_body_length(q);
	CURLcode rc;

	memset(reply, 0, sizeof(*reply));
	if (total < 0)
		return PX_S3_MISSING_CONTENT_LENGTH;
	if (h == NULL)
		return PX_S3_INTERNAL;
	/* The target answers routing errors before it asks for the body, so a redirect can replay it. */
	hdrs = curl_slist_append(hdrs, "Expect: 100-continue");
	bool typed = false;
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
		typed = typed || strncasecmp(extra[i], "Content-Type:", 13) == 0;
		hdrs = curl_slist_append(hdrs, extra[i]);
	}
	if (!typed) /* curl would send its form default; the target keeps none */
		hdrs = curl_slist_append(hdrs, "Content-Type:");
	char ckline[64];
	if (px_s3_body_xsum(q) != FT_XSUM_NONE) { /* the target computes it too, and keeps it */
		snprintf(ckline, sizeof(ckline), "Ais-S3-Checksum: %s", ft_xsum_label(px_s3_body_xsum(q)));
		hdrs = curl_slist_append(hdrs, ckline);
	}
	px_s3_curl_common(h, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)total);
	curl_easy_setopt(h, CURLOPT_READFUNCTION, put_read_cb);
	curl_easy_setopt(h, CURLOPT_READDATA, &c);
	curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, put_seek_cb);
	curl_easy_setopt(h, CURLOPT_SEEKDATA, &c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, px_s3_reply_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, reply);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, put_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &c);
	curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, (long)PX_S3_BODY_BUF);
	rc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	if (c.body_err != PX_S3_OK)
		return c.body_err;
	if (rc != CURLE_OK) {
		char shown[FT_REDACT_URL_MAX];
		ft_warn("s3 PUT %s: relay to %s failed: %s", q->resource, ft_redact_url(url, shown, sizeof(shown)),
			curl_easy_strerror(rc));
		return PX_S3_SERVICE_UNAVAILABLE;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply->status);
	if (reply->status >= 300)
		target_message(c.errbody, c.errlen, reply);
	return PX_S3_OK;
}

void px_s3_checksum_headers(px_s3_req_t *q, const px_s3_target_reply_t *reply)
{
	char name[32];
	const char *colon = strchr(reply->checksum, ':');

	if (colon == NULL || (size_t)(colon - reply->checksum) >= sizeof(name))
		return;
	memcpy(name, reply->checksum, (size_t)(colon - reply->checksum));
	name[colon - reply->checksum] = '\0';
	ft_resp_header(q->r, name, colon[1] == ' ' ? colon + 2 : colon + 1);
	if (reply->checksum_type[0])
		ft_resp_header(q->r, "x-amz-checksum-type", reply->checksum_type);
}

/* ---- routing ---- */

/* Whether path (len bytes) is prefix exactly or prefix followed by '/'. */
static bool under(const char *path, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(path, prefix, n) == 0 && (len == n || path[n] == '/');
}

/* Host without the port, lowercased, into out; "" when absent or too long. */
static void host_name(ft_req_t *r, char *out, size_t cap)
{
	const char *h = ft_req_header(r, "Host");
	size_t n = 0;

	out[0] = '\0';
	if (h == NULL)
		return;
	if (h[0] == '[') /* IPv6 literal: never a virtual host */
		return;
	while (h[n] != '\0' && h[n] != ':')
		n++;
	if (n >= cap)
		return;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)(h[i] >= 'A' && h[i] <= 'Z' ? h[i] - 'A' + 'a' : h[i]);
	out[n] = '\0';
}

/* The raw path of the request target (percent-encoded, as signed), in ft_req_alloc memory. */
static const char *raw_path(ft_req_t *r)
{
	const char *t = ft_req_target(r), *p = t;

	if (t[0] != '/') {
		const char *s = strstr(t, "://");
		p = s != NULL ? s + 3 : t;
		p += strcspn(p, "/?");
	}
	size_t n = strcspn(p, "?");
	char *out = ft_req_alloc(r, n + 2);
	if (n == 0) {
		strcpy(out, "/");
		return out;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return out;
}

/*
 * Splits a decoded path-style rest "/<bucket>[/<key>]" ("" or "/" = service). Returns 0, or -1
 * when the bucket segment holds a NUL byte or is too long (InvalidBucketName).
 */
static int split_path(px_s3_req_t *q, const char *rest, size_t len)
{
	size_t i = 0, b;

	if (len > 0 && rest[0] == '/') {
		rest++;
		len--;
	}
	while (i < len && rest[i] != '/')
		i++;
	b = i;
	if (b >= sizeof(q->bucket) || memchr(rest, '\0', b) != NULL)
		return -1;
	memcpy(q->bucket, rest, b);
	q->bucket[b] = '\0';
	if (i < len) {
		q->key = rest + i + 1;
		q->key_len = len - i - 1;
	} else {
		q->key = "";
		q->key_len = 0;
	}
	return 0;
}

/* Recognizes an S3 request; fills style, bucket and key. False when r is not one. */
static bool recognize(const px_s3_t *s, ft_req_t *r, px_s3_req_t *q, bool *bad_bucket)
{
	const ft_config_t *c = s->host.cfg;
	size_t len;
	const char *path = ft_req_path(r, &len);
	char host[FT_HOST_MAX];

	*bad_bucket = false;
	if (c->s3_domain[0] != '\0') {
		size_t dl = strlen(c->s3_domain), hl;
		host_name(r, host, sizeof(host));
		hl = strlen(host);
		if (hl > dl + 1 && host[hl - dl - 1] == '.' && strcasecmp(host + hl - dl, c->s3_domain) == 0) {
			q->style = PX_S3_STYLE_VHOST;
			if (hl - dl - 1 >= sizeof(q->bucket)) {
				*bad_bucket = true;
				snprintf(q->bucket, sizeof(q->bucket), "%.*s", (int)(sizeof(q->bucket) - 1), host);
			} else {
				memcpy(q->bucket, host, hl - dl - 1);
				q->bucket[hl - dl - 1] = '\0';
			}
			q->key = len > 0 && path[0] == '/' ? path + 1 : path;
			q->key_len = len > 0 && path[0] == '/' ? len - 1 : len;
			return true;
		}
		if (strcasecmp(host, c->s3_domain) == 0 && !under(path, len, "/v1")) {
			q->style = PX_S3_STYLE_ROOT;
			*bad_bucket = split_path(q, path, len) != 0;
			return true;
		}
	}
	if (under(path, len, "/s3")) {
		q->style = PX_S3_STYLE_PATH;
		*bad_bucket = split_path(q, path + 3, len - 3) != 0;
		return true;
	}
	if (c->s3_root && !under(path, len, "/v1")) {
		q->style = PX_S3_STYLE_ROOT;
		*bad_bucket = split_path(q, path, len) != 0;
		return true;
	}
	return false;
}

bool px_s3_server_error(px_s3_t *s, ft_req_t *r, const char *target, int status, const char *msg)
{
	const char *path = target, *q;
	char *resource;
	size_t len;
	char id[17];
	px_s3_err_t e;

	if (target == NULL)
		return false;
	/* absolute form (RFC 9112 3.2.2): the path starts after the authority */
	if (strncasecmp(path, "http://", 7) == 0 || strncasecmp(path, "https://", 8) == 0) {
		path = strchr(strchr(path, ':') + 3, '/');
		if (path == NULL)
			path = "/";
	}
	q = strchr(path, '?');
	len = q != NULL ? (size_t)(q - path) : strlen(path);
	if (under(path, len, "/s3")) {
		path += 3;
		len -= 3;
	} else if (!s->host.cfg->s3_root || path[0] != '/' || under(path, len, "/v1")) {
		return false;
	}
	switch (status) {
	case 408:
		e = PX_S3_REQUEST_TIMEOUT;
		break;
	case 413:
		e = PX_S3_ENTITY_TOO_LARGE;
		break;
	case 431:
		e = PX_S3_HEADER_TOO_LARGE;
		break;
	case 501:
		e = PX_S3_NOT_IMPLEMENTED;
		break;
	default:
		e = PX_S3_INVALID_REQUEST;
		break;
	}
	resource = ft_req_alloc(r, len + 2);
	if (len > 0)
		snprintf(resource, len + 1, "%.*s", (int)len, path);
	else
		snprintf(resource, 2, "/");
	make_request_id(id);
	ft_debug("s3 %s: %d %s: %s", ft_req_peer(r), status, px_s3_err_code(e), msg);
	/* the status stays the server's: the connection closes after it whatever the code */
	send_error_status(r, status, resource, id, e, msg);
	return true;
}

/* "/<bucket>/<key>" for error bodies. */
static const char *resource_of(px_s3_req_t *q)
{
	size_t n = 1 + strlen(q->bucket) + 1 + q->key_len + 1;
	char *s = ft_req_alloc(q->r, n);

	if (q->key_len > 0)
		snprintf(s, n, "/%s/%.*s", q->bucket, (int)q->key_len, q->key);
	else if (q->bucket[0] != '\0')
		snprintf(s, n, "/%s", q->bucket);
	else
		snprintf(s, n, "/");
	return s;
}

/* ---- authentication ---- */

static px_s3_err_t auth_error(ft_sigv4_result_t res, bool presigned, const char **msg)
{
	*msg = ft_sigv4_strerror(res);
	switch (res) {
	case FT_SIGV4_OK:
		return PX_S3_OK;
	case FT_SIGV4_ANONYMOUS:
		*msg = "Anonymous access is not allowed: sign the request";
		return PX_S3_ACCESS_DENIED;
	case FT_SIGV4_MALFORMED:
		return presigned ? PX_S3_AUTH_QUERY_ERROR : PX_S3_AUTH_HEADER_MALFORMED;
	case FT_SIGV4_UNKNOWN_KEY:
		return PX_S3_INVALID_ACCESS_KEY;
	case FT_SIGV4_MISMATCH:
		return PX_S3_SIGNATURE_MISMATCH;
	case FT_SIGV4_EXPIRED:
		*msg = "Request has expired";
		return PX_S3_ACCESS_DENIED;
	case FT_SIGV4_SKEWED:
		return PX_S3_TIME_SKEWED;
	case FT_SIGV4_UNSUPPORTED:
	default:
		*msg = "Only AWS4-HMAC-SHA256 (Signature Version 4) is supported";
		return PX_S3_INVALID_REQUEST;
	}
}

/* Verifies q's signature. PX_S3_OK (q->auth or q->anonymous set) or the error, with *msg. */
static px_s3_err_t authenticate(px_s3_req_t *q, const char **msg)
{
	ft_req_t *r = q->r;
	struct px_s3 *s = q->s3;
	int n = ft_req_header_count(r);
	ft_sigv4_header_t *hdrs = ft_req_alloc(r, (size_t)(n > 0 ? n : 1) * sizeof(*hdrs));
	const char *authz = ft_req_header(r, "Authorization");
	bool presigned = ft_req_query(r, "X-Amz-Signature") != NULL || ft_req_query(r, "X-Amz-Algorithm") != NULL;
	const char *sha = ft_req_header(r, "x-amz-content-sha256");
	ft_sigv4_result_t res;

	*msg = NULL;
	q->content_sha256 = sha;
	ft_sigv4_result_t v2;
	const char *path = raw_path(r);
	if (px_s3_sigv2_verify(r, q->style == PX_S3_STYLE_VHOST ? q->bucket : NULL, path, time(NULL), secret_of, s, &v2,
			       q->auth.access_key, sizeof(q->auth.access_key)) != 0) {
		/* botocore signs the resource without the endpoint's path: "/b/k" for "/s3/b/k". */
		if (v2 == FT_SIGV4_MISMATCH && q->style == PX_S3_STYLE_PATH && strncmp(path, "/s3/", 4) == 0)
			px_s3_sigv2_verify(r, NULL, path + 3, time(NULL), secret_of, s, &v2, q->auth.access_key,
					   sizeof(q->auth.access_key));
		return auth_error(v2, authz == NULL, msg);
	}
	if (authz == NULL && !presigned) {
		if (!q->host->cfg->s3_anonymous)
			return auth_error(FT_SIGV4_ANONYMOUS, false, msg);
		q->anonymous = true;
		return PX_S3_OK;
	}
	if (authz != NULL && !presigned) {
		if (sha == NULL) {
			*msg = "Missing required header for this request: x-amz-content-sha256";
			return PX_S3_INVALID_REQUEST;
		}
	}
	if (sha != NULL && strcmp(sha, FT_SIGV4_UNSIGNED) != 0 && !px_s3_payload_hash_known(sha)) {
		if (strncmp(sha, "STREAMING-", 10) == 0) {
			*msg = "Supported streaming forms: STREAMING-AWS4-HMAC-SHA256-PAYLOAD, "
			       "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-UNSIGNED-PAYLOAD-TRAILER "
			       "(not the ECDSA ones)";
			return PX_S3_NOT_IMPLEMENTED;
		}
		*msg = "x-amz-content-sha256 must be a hex SHA-256, UNSIGNED-PAYLOAD or a STREAMING-... form";
		return PX_S3_INVALID_ARGUMENT;
	}
	for (int i = 0; i < n; i++)
		ft_req_header_at(r, i, &hdrs[i].name, &hdrs[i].value);
	ft_sigv4_request_t req = {
		.method = ft_req_method_name(r),
		.path = raw_path(r),
		.query = ft_req_query_string(r),
		.headers = hdrs,
		.n_headers = n,
		.payload_hash = presigned ? (sha != NULL ? sha : FT_SIGV4_UNSIGNED) : sha,
	};
	res = ft_sigv4_verify(&req, time(NULL), secret_of, s, &q->auth);
	return auth_error(res, presigned, msg);
}

/* Whether r carries no signature at all (neither SigV4 nor SigV2, header or query). */
static bool unsigned_request(ft_req_t *r)
{
	return ft_req_header(r, "Authorization") == NULL && ft_req_query(r, "X-Amz-Signature") == NULL &&
	       ft_req_query(r, "X-Amz-Algorithm") == NULL && ft_req_query(r, "Signature") == NULL &&
	       ft_req_query(r, "AWSAccessKeyId") == NULL;
}

/* ---- dispatch ---- */

/* Bucket subresources answered by px_s3_bucket_subresource (probes of configuration). */
static const char *const bucket_subs[] = {
	"acl",
	"accelerate",
	"analytics",
	"cors",
	"encryption",
	"intelligent-tiering",
	"inventory",
	"lifecycle",
	"logging",
	"metrics",
	"notification",
	"object-lock",
	"ownershipControls",
	"policy",
	"policyStatus",
	"publicAccessBlock",
	"replication",
	"requestPayment",
	"tagging",
	"versioning",
	"website",
	"versions",
};
static const char *const object_subs[] = {
	"acl", "tagging", "retention", "legal-hold", "torrent", "attributes", "restore", "select",
};

static const char *find_sub(ft_req_t *r, const char *const *subs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ft_req_query(r, subs[i]) != NULL)
			return subs[i];
	return NULL;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The bucket subresource r names (as dispatch_bucket finds it), NULL for none. */
static const char *bucket_sub(ft_req_t *r)
{
	return find_sub(r, bucket_subs, N_OF(bucket_subs));
}

static void dispatch_service(px_s3_req_t *q)
{
	ft_method_t m = ft_req_method(q->r);

	if (m == FT_HTTP_GET || m == FT_HTTP_HEAD)
		px_s3_list_buckets(q);
	else
		px_s3_error(q, PX_S3_METHOD_NOT_ALLOWED, NULL);
}

bool px_s3_remote(const px_s3_req_t *q)
{
	return strcmp(q->provider, "ais") != 0;
}

int px_s3_bucket_lookup(const char *name, char provider[16], char *all, size_t all_cap)
{
	ft_bmd_t *bmd = ft_bmd_current();
	bool ais = bmd != NULL && ft_bmd_find(bmd, "ais", name) != NULL;
	int remote = 0;

	snprintf(provider, 16, "%s", ais ? "ais" : "");
	snprintf(all, all_cap, "%s", provider);
	for (int i = 0; bmd != NULL && !ais && i < bmd->n; i++) { /* the remote ones, when no ais one */
		const ft_bucket_t *b = &bmd->buckets[i];
		size_t len = strlen(all);
		if (strcmp(b->name, name) != 0)
			continue;
		if (remote++ == 0)
			snprintf(provider, 16, "%s", b->provider);
		snprintf(all + len, all_cap - len, "%s%s", len > 0 ? ", " : "", b->provider);
	}
	ft_bmd_put(bmd);
	return ais ? 1 : remote;
}

/*
 * The bucket q names, found by its name alone as S3 clients know it (px_s3_bucket_lookup). Sets
 * q->provider; false after responding (NoSuchBucket; InvalidBucketState when remote buckets of
 * several providers share it).
 */
static bool bucket_resolve(px_s3_req_t *q)
{
	char providers[64];
	int found = px_s3_bucket_lookup(q->bucket, q->provider, providers, sizeof(providers));

	if (found == 1)
		return true;
	if (found == 0)
		px_s3_error(q, PX_S3_NO_SUCH_BUCKET, NULL);
	else
		px_s3_error(q, PX_S3_AMBIGUOUS_BUCKET,
			    "Remote buckets of several providers are named %s (%s): read them with the native API "
			    "(/v1/objects/%s/<key>?provider=...)",
			    q->bucket, providers, q->bucket);
	snprintf(q->provider, sizeof(q->provider), "ais");
	return false;
}

/* Writes to an ht bucket (an HTTP origin, read-only): NotImplemented; false then. */
static bool remote_write_ok(px_s3_req_t *q)
{
	if (strcmp(q->provider, "ht") != 0)
		return true;
	px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "ht bucket %s is read-only: an HTTP origin takes no writes", q->bucket);
	return false;
}

/* Whether q's bucket is a remote bucket that takes writes (aws, gcp, azure: written through; ht is read-only). */
static bool remote_writable(const px_s3_req_t *q)
{
	return px_s3_remote(q) && strcmp(q->provider, "ht") != 0;
}

/* Responds NotImplemented for what the S3 API does not do on a remote bucket; false then. */
static bool remote_ok(px_s3_req_t *q, bool allowed, const char *what)
{
	if (!px_s3_remote(q) || allowed)
		return true;
	px_s3_error(q, PX_S3_NOT_IMPLEMENTED,
		    "%s is not supported on %s bucket %s through the S3 API (remote buckets: GET, HEAD, list%s)", what,
		    q->provider, q->bucket,
		    remote_writable(q) ? ", PUT, DELETE, DeleteObjects and multipart uploads" : "");
	return false;
}

/* Sets up the body reader; false after responding with the error. */
static bool body_ok(px_s3_req_t *q)
{
	const char *msg = NULL;
	px_s3_err_t e = px_s3_body_prepare(q, &msg);

	if (e != PX_S3_OK) {
		px_s3_error(q, e, msg);
		return false;
	}
	return true;
}

/*
 * On a remote bucket: HEAD and listings, and unless read-only (ht) DeleteObjects and
 * ListMultipartUploads; false after responding.
 */
static bool remote_bucket_ok(px_s3_req_t *q, const char *sub)
{
	ft_req_t *r = q->r;
	ft_method_t m = ft_req_method(r);
	bool list = (m == FT_HTTP_HEAD || m == FT_HTTP_GET) &&
		    (ft_req_query(r, "uploads") == NULL || remote_writable(q)) &&
		    (sub == NULL || strcmp(sub, "versions") == 0);
	bool delete_objects = m == FT_HTTP_POST && sub == NULL && ft_req_query(r, "delete") != NULL;

	if (delete_objects && !remote_write_ok(q))
		return false;
	return remote_ok(q, list || delete_objects,
			 m == FT_HTTP_DELETE && sub == NULL ? "DeleteBucket"
			 : sub != NULL                      ? "This bucket subresource"
			 : m == FT_HTTP_GET                 ? "Listing multipart uploads"
							    : "This request");
}

static void dispatch_bucket(px_s3_req_t *q)
{
	ft_req_t *r = q->r;
	ft_method_t m = ft_req_method(r);
	const char *sub = bucket_sub(r);

	if (m == FT_HTTP_PUT && sub == NULL) {
		if (body_ok(q))
			px_s3_bucket_create(q);
		return;
	}
	if (q->public_anon && sub != NULL && strcmp(sub, "versions") != 0) {
		px_s3_error(q, PX_S3_ACCESS_DENIED, "anonymous requests may only read public-read data");
		return;
	}
	if (!bucket_resolve(q))
		return;
	if (!remote_bucket_ok(q, sub))
		return;
	switch (m) {
	case FT_HTTP_HEAD:
		px_s3_bucket_head(q);
		return;
	case FT_HTTP_GET:
		if (ft_req_query(r, "location") != NULL)
			px_s3_bucket_location(q);
		else if (ft_req_query(r, "uploads") != NULL)
			px_s3_multipart(q, PX_S3_MPU_LIST_UPLOADS);
		else if (ft_req_query(r, "versions") != NULL)
			px_s3_list_objects(q, PX_S3_LIST_VERSIONS);
		else if (sub != NULL)
			px_s3_bucket_subresource(q, sub);
		else
			px_s3_list_objects(q, ft_req_query(r, "list-type") != NULL ? 2 : 1);
		return;
	case FT_HTTP_DELETE:
		if (sub != NULL)
			px_s3_bucket_subresource(q, sub);
		else
			px_s3_bucket_delete(q);
		return;
	case FT_HTTP_POST:
		if (ft_req_query(r, "delete") != NULL) {
			if (body_ok(q))
				px_s3_delete_objects(q);
		} else {
			px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "POST on a bucket is implemented only for ?delete");
		}
		return;
	case FT_HTTP_PUT:
		if (sub != NULL && strcmp(sub, "acl") == 0 && !body_ok(q))
			return;
		px_s3_bucket_subresource(q, sub);
		return;
	default:
		px_s3_error(q, PX_S3_METHOD_NOT_ALLOWED, NULL);
		return;
	}
}

/* Checks the key of an object request; false after responding. */
static bool key_ok(px_s3_req_t *q)
{
	const char *why = NULL;
	ft_method_t m = ft_req_method(q->r);

	if (ft_name_check_object(q->key, q->key_len, &why) == 0)
		return true;
	if (q->key_len > FT_OBJ_NAME_MAX) {
		px_s3_error(q, PX_S3_KEY_TOO_LONG, "Keys are at most %d bytes", FT_OBJ_NAME_MAX);
	} else if (m == FT_HTTP_GET || m == FT_HTTP_HEAD) {
		px_s3_error(q, PX_S3_NO_SUCH_KEY, NULL); /* such a key can never be stored here */
	} else if (m == FT_HTTP_DELETE && ft_req_query(q->r, "uploadId") == NULL) {
		px_s3_send_empty(q, 204);
	} else {
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "Key not supported by this store: %s", why);
	}
	return false;
}

/*
 * On a remote bucket: a plain GET or HEAD; unless read-only (ht), PUT and DELETE of one object and
 * the multipart calls (CreateMultipartUpload, UploadPart, UploadPartCopy from an ais source,
 * ListParts, Complete, Abort), which the owning target writes through on completion. False after
 * responding.
 */
static bool remote_object_ok(px_s3_req_t *q, const char *sub, const char *upload)
{
	ft_req_t *r = q->r;
	ft_method_t m = ft_req_method(r);
	bool read = m == FT_HTTP_GET || m == FT_HTTP_HEAD, write = m == FT_HTTP_PUT || m == FT_HTTP_DELETE;
	bool by_part = ft_req_query(r, "partNumber") != NULL;
	bool plain = sub == NULL && upload == NULL && ft_req_query(r, "uploads") == NULL && !by_part;
	bool upload_call = sub == NULL && (upload != NULL || (m == FT_HTTP_POST && ft_req_query(r, "uploads") != NULL));
	bool acl = ft_req_header(r, "x-amz-acl") != NULL || px_s3_has_grant_header(r);

	if (!px_s3_remote(q))
		return true;
	if (plain && write && !remote_write_ok(q))
		return false;
	if (acl) /* the cached copy would carry it, the backend's object not, and an eviction would drop it */
		return remote_ok(q, false, "An ACL (x-amz-acl, x-amz-grant-*)");
	if (m == FT_HTTP_PUT && ft_req_header(r, "x-amz-copy-source") != NULL) /* a remote source: copy.c */
		return remote_ok(q, upload_call && remote_writable(q),
				 upload != NULL ? "UploadPartCopy" : "CopyObject");
	return remote_ok(q, (plain && (read || write)) || (upload_call && remote_writable(q)),
			 read && by_part && upload == NULL                                 ? "GetObject by partNumber"
			 : upload != NULL || ft_req_query(r, "uploads") != NULL || by_part ? "A multipart upload"
			 : sub != NULL                                                     ? "This object subresource"
											   : "This request");
}

static void dispatch_object(px_s3_req_t *q)
{
	ft_req_t *r = q->r;
	ft_method_t m = ft_req_method(r);
	const char *sub = find_sub(r, object_subs, N_OF(object_subs));
	const char *upload = ft_req_query(r, "uploadId");
	const char *version = ft_req_query(r, "versionId");

	if (!bucket_resolve(q) || !key_ok(q) || !remote_object_ok(q, sub, upload))
		return;
	if (version != NULL && strcmp(version, "null") != 0) {
		px_s3_error(q, PX_S3_NOT_IMPLEMENTED, "Object versions are not supported");
		return;
	}
	switch (m) {
	case FT_HTTP_GET:
	case FT_HTTP_HEAD:
		if (upload != NULL && m == FT_HTTP_GET)
			px_s3_multipart(q, PX_S3_MPU_LIST_PARTS);
		else if (sub != NULL)
			px_s3_object_subresource(q, sub);
		else
			px_s3_object_get(q);
		return;
	case FT_HTTP_PUT:
		if (sub != NULL) {
			if (strcmp(sub, "acl") != 0 || body_ok(q))
				px_s3_object_subresource(q, sub);
			return;
		}
		if (!body_ok(q) || (upload == NULL && ft_req_query(r, "partNumber") == NULL && !px_s3_acl_header(q)))
			return;
		if (upload != NULL || ft_req_query(r, "partNumber") != NULL)
			px_s3_multipart(q, PX_S3_MPU_UPLOAD_PART);
		else if (ft_req_header(r, "x-amz-copy-source") != NULL)
			px_s3_object_copy(q);
		else
			px_s3_object_put(q);
		return;
	case FT_HTTP_DELETE:
		if (upload != NULL)
			px_s3_multipart(q, PX_S3_MPU_ABORT);
		else if (sub != NULL)
			px_s3_object_subresource(q, sub);
		else
			px_s3_object_delete(q);
		return;
	case FT_HTTP_POST:
		if (!body_ok(q))
			return;
		if (ft_req_query(r, "uploads") != NULL) {
			if (px_s3_acl_header(q))
				px_s3_multipart(q, PX_S3_MPU_CREATE);
		} else if (upload != NULL)
			px_s3_multipart(q, PX_S3_MPU_COMPLETE);
		else
			px_s3_error(q, PX_S3_NOT_IMPLEMENTED,
				    "POST on an object is implemented only for multipart uploads");
		return;
	default:
		px_s3_error(q, PX_S3_METHOD_NOT_ALLOWED, NULL);
		return;
	}
}

bool px_s3_route(px_s3_t *s, ft_req_t *r)
{
	px_s3_req_t probe, *q;
	const char *why = NULL, *msg = NULL;
	bool bad_bucket;
	px_s3_err_t e;

	memset(&probe, 0, sizeof(probe));
	if (!recognize(s, r, &probe, &bad_bucket))
		return false;
	q = ft_req_alloc(r, sizeof(*q));
	*q = probe;
	snprintf(q->provider, sizeof(q->provider), "ais"); /* until bucket_resolve finds the bucket */
	q->host = &s->host;
	q->s3 = s;
	q->r = r;
	make_request_id(q->request_id);
	q->resource = resource_of(q);
	e = authenticate(q, &msg);
	if (e == PX_S3_ACCESS_DENIED && unsigned_request(r) && px_s3_acl_anonymous_ok(q)) {
		q->public_anon = q->anonymous = true; /* public-read data only (acl.c) */
		e = PX_S3_OK;
	}
	if (e == PX_S3_OK && !s3_allowed(q)) {
		e = PX_S3_ACCESS_DENIED;
		msg = "the access key's role or bucket grants do not allow this request";
	}
	if (e != PX_S3_OK) {
		ft_debug("s3 %s %s from %s: %s (%s)", ft_req_method_name(r), q->resource, ft_req_peer(r),
			 px_s3_err_code(e), msg ? msg : "");
		px_s3_error(q, e, "%s", msg != NULL ? msg : "");
		return true;
	}
	if (bad_bucket || (q->bucket[0] != '\0' && ft_name_check_bucket(q->bucket, &why) != 0)) {
		px_s3_error(q, PX_S3_INVALID_BUCKET_NAME, "%s", why != NULL ? why : "bucket name too long");
		return true;
	}
	if (strstr(ft_req_query_string(r), "%00") != NULL) { /* a value would end there, silently shorter */
		px_s3_error(q, PX_S3_INVALID_ARGUMENT, "a query parameter holds a NUL byte (%%00)");
		return true;
	}
	if (q->bucket[0] == '\0')
		dispatch_service(q);
	else if (q->key_len == 0)
		dispatch_bucket(q);
	else
		dispatch_object(q);
	return true;
}
