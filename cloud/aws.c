/* SPDX-License-Identifier: Apache-2.0 */
/* Backend provider aws: S3 and S3-compatible stores over REST, signed with SigV4 (common/sigv4). */
#include "cloud/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/sigv4.h"
#include "base/redact.h"

/*
 * DESIGN
 * Requests carry host, x-amz-date, x-amz-content-sha256 (the empty body's hash, or
 * UNSIGNED-PAYLOAD for uploads, so a body of known length streams without being hashed first),
 * an optional x-amz-security-token, and every other header we send; all of them are signed.
 * Content-Length is left to curl and unsigned. Without credentials requests go unsigned
 * (public buckets). The ETag is taken as the MD5 only when it looks like one and the object is
 * not multipart (no "-N") nor encrypted with KMS or a customer key.
 */

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct {
	ft_be_endpoint_t ep; /* the endpoint the requests go to (bucket host for virtual-host) */
	int virtual_host;
} aws_t;

static const char *const bucket_codes[] = {"NoSuchBucket", NULL};

static ft_backend_err_t aws_init(ft_backend_t *b, ft_backend_error_t *err)
{
	ft_backend_config_t *c = &b->cfg;
	char url[FT_URL_MAX];
	int default_endpoint = 0;
	aws_t *a;

	if (c->access_key[0] == '\0' &&
	    (ft_be_fill_env(c->access_key, sizeof(c->access_key), "AWS_ACCESS_KEY_ID") != 0 ||
	     ft_be_fill_env(c->secret_key, sizeof(c->secret_key), "AWS_SECRET_ACCESS_KEY") != 0 ||
	     ft_be_fill_env(c->session_token, sizeof(c->session_token), "AWS_SESSION_TOKEN") != 0))
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: a credential in the environment is too long");
	if (ft_be_fill_env(c->region, sizeof(c->region), "AWS_REGION") != 0 ||
	    ft_be_fill_env(c->region, sizeof(c->region), "AWS_DEFAULT_REGION") != 0 ||
	    ft_be_fill(c->region, sizeof(c->region), "us-east-1") != 0 ||
	    ft_be_fill_env(c->endpoint, sizeof(c->endpoint), "AWS_ENDPOINT_URL_S3") != 0 ||
	    ft_be_fill_env(c->endpoint, sizeof(c->endpoint), "AWS_ENDPOINT_URL") != 0)
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: region or endpoint in the environment is too long");
	if (c->bucket[0] == '\0' && !b->account)
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: bucket is required");
	if ((c->access_key[0] == '\0') != (c->secret_key[0] == '\0'))
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: access_key and secret_key go together");
	if (c->endpoint[0] == '\0') {
		snprintf(c->endpoint, sizeof(c->endpoint), "https://s3.%s.amazonaws.com", c->region);
		default_endpoint = 1;
	}
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws: out of memory");
	a->virtual_host =
		!b->account &&
		(c->addressing == FT_BACKEND_ADDR_VIRTUAL ||
		 (c->addressing == FT_BACKEND_ADDR_AUTO && default_endpoint && strchr(c->bucket, '.') == NULL));
	char shown[FT_REDACT_URL_MAX]; /* a bad endpoint may still hold user:password@ */
	if (ft_be_endpoint_parse(c->endpoint, &a->ep) != 0) {
		free(a);
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: bad endpoint \"%s\"",
				  ft_redact_url(c->endpoint, shown, sizeof(shown)));
	}
	if (a->virtual_host) {
		if ((size_t)snprintf(url, sizeof(url), "%s.%s", c->bucket, a->ep.host) >= sizeof(a->ep.host)) {
			free(a);
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "aws: bucket host name too long");
		}
		strcpy(a->ep.host, url);
	}
	b->priv = a;
	return FT_BACKEND_OK;
}

static void aws_fini(ft_backend_t *b)
{
	free(b->priv);
	b->priv = NULL;
}

/* The encoded path of name (NULL: the bucket itself; the service root on an account handle) for the addressing style. */
static int object_path(const ft_backend_t *b, const char *name, ft_strbuf_t *path)
{
	const aws_t *a = b->priv;

	ft_strbuf_adds(path, a->ep.path);
	if (b->account) {
		ft_strbuf_adds(path, "/");
		return path->failed ? -1 : 0;
	}
	if (!a->virtual_host) {
		ft_strbuf_adds(path, "/");
		ft_pct_encode_buf(path, b->cfg.bucket, strlen(b->cfg.bucket), 0);
	}
	if (name != NULL) {
		ft_strbuf_adds(path, "/");
		ft_pct_encode_buf(path, name, strlen(name), FT_PCT_KEEP_SLASH);
	} else if (a->virtual_host) {
		ft_strbuf_adds(path, "/");
	}
	return path->failed ? -1 : 0;
}

/* Sets method and URL and adds the headers every request carries. */
static int request(ft_backend_t *b, ft_be_xfer_t *x, const char *method, const char *name, const char *query,
		   const char *payload_hash)
{
	const aws_t *a = b->priv;
	ft_strbuf_t path = {0};
	char amz_date[17];
	int rc = -1;

	if (object_path(b, name, &path) != 0 || ft_be_xfer_set(x, method, &a->ep, path.p, query) != 0)
		goto out;
	ft_date_format_amz(time(NULL), amz_date);
	if (ft_be_xfer_header(x, "Host", "%s", a->ep.host) != 0 ||
	    ft_be_xfer_header(x, "x-amz-date", "%s", amz_date) != 0 ||
	    ft_be_xfer_header(x, "x-amz-content-sha256", "%s", payload_hash) != 0)
		goto out;
	if (b->cfg.session_token[0] != '\0' &&
	    ft_be_xfer_header(x, "x-amz-security-token", "%s", b->cfg.session_token) != 0)
		goto out;
	rc = 0;
out:
	ft_strbuf_free(&path);
	return rc;
}

/* Adds Authorization over every header added so far; a no-op without credentials. */
static int sign(ft_backend_t *b, ft_be_xfer_t *x)
{
	ft_sigv4_header_t hdrs[FT_BE_MAX_HEADERS];
	ft_sigv4_request_t req = {0};
	char auth[1024];

	if (b->cfg.access_key[0] == '\0')
		return 0;
	for (int i = 0; i < x->n_hdr; i++) {
		hdrs[i].name = x->hdr[i].name;
		hdrs[i].value = x->hdr[i].value;
	}
	req.method = x->method;
	req.path = x->path;
	req.query = x->query;
	req.headers = hdrs;
	req.n_headers = x->n_hdr;
	req.payload_hash = ft_be_xfer_req_header(x, "x-amz-content-sha256");
	if (ft_sigv4_sign(&req, b->cfg.access_key, b->cfg.secret_key, b->cfg.region, "s3",
			  ft_be_xfer_req_header(x, "x-amz-date"), auth, sizeof(auth)) != 0)
		return -1;
	return ft_be_xfer_header(x, "Authorization", "%s", auth);
}

/* Fills meta from S3 object response headers. */
static void meta_from_headers(const ft_be_xfer_t *x, ft_backend_meta_t *m)
{
	const char *etag = ft_be_xfer_resp_header(x, "ETag");
	const char *version = ft_be_xfer_resp_header(x, "x-amz-version-id");
	const char *sse = ft_be_xfer_resp_header(x, "x-amz-server-side-encryption");
	int md5_ok = ft_be_xfer_resp_header(x, "x-amz-server-side-encryption-customer-algorithm") == NULL &&
		     (sse == NULL || strcmp(sse, "aws:kms") != 0);
	uint8_t raw[16];

	if (x->status != 206)
		m->size = ft_be_xfer_content_length(x);
	m->mtime_ns = ft_be_parse_http_date(ft_be_xfer_resp_header(x, "Last-Modified"));
	ft_be_copy_etag(m->etag, sizeof(m->etag), etag);
	if (version != NULL && strcmp(version, "null") != 0)
		snprintf(m->version, sizeof(m->version), "%s", version);
	if (md5_ok && ft_hex_decode(m->etag, strlen(m->etag), raw, sizeof(raw), 0) == (long)sizeof(raw))
		ft_hex_encode(raw, sizeof(raw), m->md5);
}

/* Reads the error document of a non-2xx response and maps it. */
static ft_backend_err_t response_error(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_strbuf_t body = {0};
	char code[64], message[200];
	ft_backend_err_t rc;

	ft_be_xfer_error_body(x, &body);
	ft_be_xml_error(body.p, body.len, code, sizeof(code), message, sizeof(message));
	rc = ft_be_http_error(x, code, message, bucket_codes, err);
	ft_strbuf_free(&body);
	return rc;
}

static ft_backend_err_t oom(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws %s %s: cannot build the request", x->op, x->what);
}

/* Signs and starts x; OK only for a 2xx. */
static ft_backend_err_t run(ft_backend_t *b, ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (sign(b, x) != 0)
		return oom(x, err);
	rc = ft_be_xfer_start(x, err);
	if (rc != FT_BACKEND_OK)
		return rc;
	if (x->status < 200 || x->status > 299)
		return response_error(x, err);
	return FT_BACKEND_OK;
}

static ft_backend_err_t aws_get(ft_backend_t *b, ft_be_xfer_t *x, const char *name, const ft_backend_get_opts_t *o,
				ft_backend_meta_t *meta, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (request(b, x, "GET", name, NULL, EMPTY_SHA256) != 0 || ft_be_add_range(x, o) != 0 ||
	    ft_be_add_if_match(x, o) != 0)
		return oom(x, err);
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, meta);
	return rc;
}

static ft_backend_err_t aws_head(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "HEAD", name);
	ft_strbuf_t sink = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws HEAD %s: out of memory", name);
	if (request(b, x, "HEAD", name, NULL, EMPTY_SHA256) != 0) {
		rc = oom(x, err);
		goto out;
	}
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, 0, &sink, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, out);
out:
	ft_strbuf_free(&sink);
	ft_be_xfer_free(x);
	return rc;
}

static ft_backend_err_t aws_put(ft_backend_t *b, const char *name, const ft_backend_body_t *body,
				ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "PUT", name);
	ft_strbuf_t resp = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws PUT %s: out of memory", name);
	if (request(b, x, "PUT", name, NULL, FT_SIGV4_UNSIGNED) != 0) {
		rc = oom(x, err);
		goto out;
	}
	if (body->md5 != NULL && *body->md5 != '\0') {
		char b64[32];

		if (ft_be_md5_b64(body->md5, b64) != 0 || ft_be_xfer_header(x, "Content-MD5", "%s", b64) != 0) {
			rc = oom(x, err);
			goto out;
		}
	}
	if (body->content_type != NULL && ft_be_xfer_header(x, "Content-Type", "%s", body->content_type) != 0) {
		rc = oom(x, err);
		goto out;
	}
	ft_be_xfer_body(x, body);
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, FT_BE_ERROR_BODY_MAX, &resp, err);
	if (rc == FT_BACKEND_OK) {
		const char *version = ft_be_xfer_resp_header(x, "x-amz-version-id");

		ft_be_copy_etag(out->etag, sizeof(out->etag), ft_be_xfer_resp_header(x, "ETag"));
		if (version != NULL && strcmp(version, "null") != 0)
			snprintf(out->version, sizeof(out->version), "%s", version);
		out->size = body->length;
		if (body->md5 != NULL && *body->md5 != '\0')
			snprintf(out->md5, sizeof(out->md5), "%s", body->md5);
	}
out:
	ft_strbuf_free(&resp);
	ft_be_xfer_free(x);
	return rc;
}

static ft_backend_err_t aws_del(ft_backend_t *b, const char *name, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "DELETE", name);
	ft_strbuf_t resp = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws DELETE %s: out of memory", name);
	if (request(b, x, "DELETE", name, NULL, EMPTY_SHA256) != 0) {
		rc = oom(x, err);
		goto out;
	}
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, FT_BE_ERROR_BODY_MAX, &resp, err);
out:
	ft_strbuf_free(&resp);
	ft_be_xfer_free(x);
	return rc;
}

/* A GET of the bucket (the service on an account handle) with query, its whole body (a listing) into body. */
static ft_backend_err_t get_listing(ft_backend_t *b, ft_be_xfer_t *x, const ft_strbuf_t *query, ft_strbuf_t *body,
				    ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (query->failed || request(b, x, "GET", NULL, ft_be_buf_str(query), EMPTY_SHA256) != 0)
		return oom(x, err);
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, 64 << 20, body, err);
	return rc;
}

/* ---- ListObjectsV2 ---- */

typedef struct {
	ft_backend_page_t *page;
	int cap;
	int in_entry;
	int truncated;
	int oom;
} list_ctx_t;

static int on_list(void *ctx, const char *path, const char *text, size_t len)
{
	list_ctx_t *l = ctx;
	ft_backend_entry_t *e = l->in_entry ? &l->page->entries[l->page->n - 1] : NULL;

	if (strcmp(path, "ListBucketResult/Contents") == 0) {
		if (text != NULL) { /* the end of an entry */
			l->in_entry = 0;
			return e != NULL && e->name[0] != '\0' ? 0 : -1;
		}
		if (ft_be_page_add(l->page, &l->cap, "", 0) != 0) {
			l->oom = 1;
			return 1;
		}
		l->in_entry = 1;
		return 0;
	}
	if (text == NULL)
		return 0;
	if (strcmp(path, "ListBucketResult/CommonPrefixes/Prefix") == 0) { /* a delimited listing's "directory" */
		int rc = ft_be_page_add_dir(l->page, &l->cap, text, len);

		l->oom = rc == -2;
		return rc == -2 ? 1 : rc;
	}
	if (e != NULL && strcmp(path, "ListBucketResult/Contents/Key") == 0) {
		char *name = strndup(text, len);

		if (name == NULL) {
			l->oom = 1;
			return 1;
		}
		free(e->name);
		e->name = name;
	} else if (e != NULL && strcmp(path, "ListBucketResult/Contents/Size") == 0) {
		if (ft_be_parse_i64(text, &e->size) != 0)
			return -1;
	} else if (e != NULL && strcmp(path, "ListBucketResult/Contents/ETag") == 0) {
		ft_be_copy_etag(e->etag, sizeof(e->etag), text);
	} else if (e != NULL && strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
		e->mtime_ns = ft_be_parse_iso8601(text);
	} else if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
		l->truncated = strcmp(text, "true") == 0;
	} else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0 && len > 0) {
		free(l->page->next_token);
		l->page->next_token = strndup(text, len);
		if (l->page->next_token == NULL) {
			l->oom = 1;
			return 1;
		}
	}
	return 0;
}

ft_backend_err_t ft_be_aws_list_parse(const char *doc, size_t len, ft_backend_page_t *page, int *truncated)
{
	list_ctx_t l = {.page = page};

	if (ft_be_xml_parse(doc, len, on_list, &l) != 0)
		return l.oom ? FT_BACKEND_ENOMEM : FT_BACKEND_EPROTO;
	*truncated = l.truncated;
	return FT_BACKEND_OK;
}

/* The list query of a, its parameters in the sorted order the signed canonical query has. */
static void aws_list_query(ft_strbuf_t *q, const ft_backend_list_args_t *a)
{
	if (a->token != NULL) {
		ft_strbuf_adds(q, "continuation-token=");
		ft_pct_encode_buf(q, a->token, strlen(a->token), 0);
		ft_strbuf_adds(q, "&");
	}
	if (*a->delimiter != '\0') {
		ft_strbuf_adds(q, "delimiter=");
		ft_pct_encode_buf(q, a->delimiter, strlen(a->delimiter), 0);
		ft_strbuf_adds(q, "&");
	}
	ft_strbuf_addf(q, "list-type=2&max-keys=%d", a->max);
	ft_be_query_add(q, "prefix", a->prefix);
	if (a->token == NULL) /* with a token S3 ignores it */
		ft_be_query_add(q, "start-after", a->start_after);
}

static ft_backend_err_t aws_list(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				 ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "LIST", b->cfg.bucket);
	ft_strbuf_t query = {0}, body = {0};
	int truncated = 0;
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws LIST: out of memory");
	aws_list_query(&query, a);
	rc = get_listing(b, x, &query, &body, err);
	if (rc != FT_BACKEND_OK)
		goto out;
	rc = ft_be_aws_list_parse(body.p, body.len, out, &truncated);
	if (rc != FT_BACKEND_OK) {
		rc = rc == FT_BACKEND_ENOMEM ? ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws LIST: out of memory")
					     : ft_be_fail(err, FT_BACKEND_EPROTO, x->status,
							  "aws LIST %s: malformed ListBucketResult", b->cfg.bucket);
		goto out;
	}
	if (truncated && out->next_token == NULL) {
		rc = ft_be_fail(err, FT_BACKEND_EPROTO, x->status, "aws LIST %s: truncated listing without a token",
				b->cfg.bucket);
		goto out;
	}
	if (!truncated) {
		free(out->next_token);
		out->next_token = NULL;
	}
out:
	ft_strbuf_free(&body);
	ft_strbuf_free(&query);
	ft_be_xfer_free(x);
	return rc;
}

/* ---- ListBuckets ---- */

static ft_backend_err_t aws_list_buckets(ft_backend_t *b, const char *token, ft_backend_page_t *out,
					 ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "LIST-BUCKETS", "(account)");
	ft_strbuf_t query = {0}, body = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "aws LIST-BUCKETS: out of memory");
	if (token != NULL) { /* without one the service answers every bucket (up to its own limit) */
		ft_strbuf_adds(&query, "continuation-token=");
		ft_pct_encode_buf(&query, token, strlen(token), 0);
	}
	rc = get_listing(b, x, &query, &body, err);
	if (rc != FT_BACKEND_OK)
		goto out;
	rc = ft_be_xml_names_parse(body.p, body.len, "ListAllMyBucketsResult/Buckets/Bucket/Name",
				   "ListAllMyBucketsResult/ContinuationToken", out);
	if (rc != FT_BACKEND_OK)
		rc = ft_be_fail(err, rc, x->status, "aws LIST-BUCKETS: %s",
				rc == FT_BACKEND_ENOMEM ? "out of memory" : "malformed ListAllMyBucketsResult");
out:
	ft_strbuf_free(&body);
	ft_strbuf_free(&query);
	ft_be_xfer_free(x);
	return rc;
}

const ft_be_ops_t ft_be_aws_ops = {
	.init = aws_init,
	.fini = aws_fini,
	.get = aws_get,
	.head = aws_head,
	.put = aws_put,
	.del = aws_del,
	.list = aws_list,
	.list_buckets = aws_list_buckets,
};
