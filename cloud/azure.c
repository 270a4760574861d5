/* SPDX-License-Identifier: Apache-2.0 */
/* Backend provider azure: Azure Blob Storage REST with Shared Key signing or a SAS token. */
#include "cloud/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/redact.h"

/*
 * DESIGN
 * URLs are <endpoint>/<container>/<blob> (the endpoint is https://<account>.blob.core.windows.net
 * by default, or e.g. azurite's http://127.0.0.1:PORT/devstoreaccount1). Shared Key: the
 * string-to-sign is the verb, the twelve standard header lines (Content-Length empty when 0), the
 * x-ms-* headers lowercased and sorted, and "/<account><path>" followed by each query parameter
 * lowercased, sorted and decoded; HMAC-SHA256 with the decoded account key. With a SAS token the
 * token's query is appended to every URL and nothing is signed. Objects are written with one
 * Put Blob (x-ms-blob-type: BlockBlob), which the service accepts up to 5000 MiB.
 */

#define API_VERSION "2021-08-06"
#define KEY_BYTES_MAX 128

typedef struct {
	ft_be_endpoint_t ep;
	uint8_t key[KEY_BYTES_MAX];
	int key_len; /* 0: SAS or anonymous */
} azure_t;

static const char *const bucket_codes[] = {"ContainerNotFound", NULL};

/* Copies "Name=value" fields of an Azure connection string into the unset config fields. */
static int apply_connection_string(ft_backend_config_t *c, const char *cs)
{
	char protocol[16] = "https", suffix[128] = "core.windows.net";
	int rc = 0;

	while (cs != NULL && *cs != '\0') {
		size_t n = strcspn(cs, ";");
		const char *eq = memchr(cs, '=', n);

		if (eq != NULL) {
			size_t klen = (size_t)(eq - cs), vlen = n - klen - 1;
			char value[FT_BACKEND_TOKEN_MAX];

			if (vlen >= sizeof(value))
				return -1;
			memcpy(value, eq + 1, vlen);
			value[vlen] = '\0';
			if (klen == 11 && strncmp(cs, "AccountName", klen) == 0)
				rc |= ft_be_fill(c->account, sizeof(c->account), value);
			else if (klen == 10 && strncmp(cs, "AccountKey", klen) == 0)
				rc |= ft_be_fill(c->account_key, sizeof(c->account_key), value);
			else if (klen == 12 && strncmp(cs, "BlobEndpoint", klen) == 0)
				rc |= ft_be_fill(c->endpoint, sizeof(c->endpoint), value);
			else if (klen == 21 && strncmp(cs, "SharedAccessSignature", klen) == 0)
				rc |= ft_be_fill(c->sas, sizeof(c->sas), value);
			else if (klen == 23 && strncmp(cs, "DefaultEndpointsProtocol", klen) == 0 &&
				 vlen < sizeof(protocol))
				strcpy(protocol, value);
			else if (klen == 14 && strncmp(cs, "EndpointSuffix", klen) == 0 && vlen < sizeof(suffix))
				strcpy(suffix, value);
		}
		cs += n;
		if (*cs == ';')
			cs++;
	}
	if (c->endpoint[0] == '\0' && c->account[0] != '\0' &&
	    (size_t)snprintf(c->endpoint, sizeof(c->endpoint), "%s://%s.blob.%s", protocol, c->account, suffix) >=
		    sizeof(c->endpoint))
		return -1;
	return rc;
}

static ft_backend_err_t azure_init(ft_backend_t *b, ft_backend_error_t *err)
{
	ft_backend_config_t *c = &b->cfg;
	int env_rc = 0;
	azure_t *a;

	if (c->account_key[0] == '\0' && c->sas[0] == '\0') {
		env_rc |= apply_connection_string(c, getenv("AZURE_STORAGE_CONNECTION_STRING"));
		env_rc |= ft_be_fill_env(c->account, sizeof(c->account), "AZURE_STORAGE_ACCOUNT");
		env_rc |= ft_be_fill_env(c->account_key, sizeof(c->account_key), "AZURE_STORAGE_KEY");
		env_rc |= ft_be_fill_env(c->account_key, sizeof(c->account_key), "AZURE_STORAGE_ACCESS_KEY");
		if (c->account_key[0] == '\0')
			env_rc |= ft_be_fill_env(c->sas, sizeof(c->sas), "AZURE_STORAGE_SAS_TOKEN");
	} else {
		env_rc |= ft_be_fill_env(c->account, sizeof(c->account), "AZURE_STORAGE_ACCOUNT");
	}
	if (env_rc != 0)
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: a setting in the environment is too long");
	if (c->bucket[0] == '\0' && !b->account)
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: bucket (the container) is required");
	if (c->account_key[0] != '\0' && c->account[0] == '\0')
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: account_key needs account");
	if (c->endpoint[0] == '\0') {
		if (c->account[0] == '\0')
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: account or endpoint is required");
		if ((size_t)snprintf(c->endpoint, sizeof(c->endpoint), "https://%s.blob.core.windows.net",
				     c->account) >= sizeof(c->endpoint))
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: account name too long");
	}
	if (c->sas[0] == '?')
		memmove(c->sas, c->sas + 1, strlen(c->sas));
	a = calloc(1, sizeof(*a));
	if (a == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "azure: out of memory");
	char shown[FT_REDACT_URL_MAX]; /* a bad endpoint may still hold user:password@ */
	if (ft_be_endpoint_parse(c->endpoint, &a->ep) != 0) {
		free(a);
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: bad endpoint \"%s\"",
				  ft_redact_url(c->endpoint, shown, sizeof(shown)));
	}
	if (c->account_key[0] != '\0') {
		a->key_len = (int)ft_base64_decode(c->account_key, strlen(c->account_key), a->key, sizeof(a->key));
		if (a->key_len <= 0) {
			free(a);
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "azure: account_key is not base64");
		}
	}
	b->priv = a;
	return FT_BACKEND_OK;
}

static void azure_fini(ft_backend_t *b)
{
	azure_t *a = b->priv;

	if (a != NULL)
		memset(a->key, 0, sizeof(a->key));
	free(a);
	b->priv = NULL;
}

/* ---- Shared Key ---- */

static int header_cmp(const void *pa, const void *pb)
{
	const ft_be_header_t *x = *(const ft_be_header_t *const *)pa, *y = *(const ft_be_header_t *const *)pb;

	return strcasecmp(x->name, y->name);
}

static void add_lower(ft_strbuf_t *b, const char *s)
{
	for (; *s != '\0'; s++) {
		char c = *s >= 'A' && *s <= 'Z' ? (char)(*s + 32) : *s;

		ft_strbuf_add(b, &c, 1);
	}
}

typedef struct {
	const char *name, *value;
	size_t name_len, value_len;
} qparam_t;

static int qparam_cmp(const void *pa, const void *pb)
{
	const qparam_t *x = pa, *y = pb;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = strncasecmp(x->name, y->name, n);

	return c != 0 ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* "\nname:value" per query parameter, names lowercased and sorted (our queries never repeat a name). */
static int add_canonical_query(ft_strbuf_t *b, const char *query)
{
	qparam_t params[16];
	size_t n = 0;

	for (const char *p = query; *p != '\0';) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);

		if (len > 0) {
			if (n == sizeof(params) / sizeof(params[0]))
				return -1;
			params[n].name = p;
			params[n].name_len = eq != NULL ? (size_t)(eq - p) : len;
			params[n].value = eq != NULL ? eq + 1 : p + len;
			params[n].value_len = eq != NULL ? len - params[n].name_len - 1 : 0;
			n++;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	qsort(params, n, sizeof(params[0]), qparam_cmp);
	for (size_t i = 0; i < n; i++) {
		char name[64];

		if (params[i].name_len >= sizeof(name))
			return -1;
		memcpy(name, params[i].name, params[i].name_len);
		name[params[i].name_len] = '\0';
		ft_strbuf_adds(b, "\n");
		add_lower(b, name);
		ft_strbuf_adds(b, ":");
		ft_pct_decode_buf(b, params[i].value, params[i].value_len, 0);
	}
	return 0;
}

/* Builds the Shared Key string-to-sign of x (exposed to the unit tests through the signature only). */
static int string_to_sign(const ft_backend_t *b, const ft_be_xfer_t *x, ft_strbuf_t *s)
{
	static const char *const standard[] = {"Content-Encoding",
					       "Content-Language",
					       "Content-Length",
					       "Content-MD5",
					       "Content-Type",
					       "Date",
					       "If-Modified-Since",
					       "If-Match",
					       "If-None-Match",
					       "If-Unmodified-Since",
					       "Range"};
	const ft_be_header_t *ms[FT_BE_MAX_HEADERS];
	int n_ms = 0;

	ft_strbuf_adds(s, x->method);
	ft_strbuf_adds(s, "\n");
	for (size_t i = 0; i < sizeof(standard) / sizeof(standard[0]); i++) {
		const char *v = ft_be_xfer_req_header(x, standard[i]);

		if (strcmp(standard[i], "Content-Length") == 0 && x->src != NULL && x->src_len > 0)
			ft_strbuf_addf(s, "%lld", (long long)x->src_len);
		else if (v != NULL && strcmp(standard[i], "Content-Length") != 0)
			ft_strbuf_adds(s, v);
		ft_strbuf_adds(s, "\n");
	}
	for (int i = 0; i < x->n_hdr; i++)
		if (strncasecmp(x->hdr[i].name, "x-ms-", 5) == 0)
			ms[n_ms++] = &x->hdr[i];
	qsort(ms, (size_t)n_ms, sizeof(ms[0]), header_cmp);
	for (int i = 0; i < n_ms; i++) {
		add_lower(s, ms[i]->name);
		ft_strbuf_adds(s, ":");
		ft_strbuf_adds(s, ms[i]->value);
		ft_strbuf_adds(s, "\n");
	}
	ft_strbuf_addf(s, "/%s%s", b->cfg.account, x->path);
	if (add_canonical_query(s, x->query) != 0)
		return -1;
	return s->failed ? -1 : 0;
}

/* Adds Authorization: SharedKey account:signature (a no-op with SAS or anonymous). */
static int sign(const ft_backend_t *b, ft_be_xfer_t *x)
{
	const azure_t *a = b->priv;
	ft_strbuf_t s = {0};
	unsigned char mac[32];
	unsigned int mac_len = 0;
	char sig[64];
	int rc = -1;

	if (a->key_len == 0)
		return 0;
	if (string_to_sign(b, x, &s) != 0)
		goto out;
	if (HMAC(EVP_sha256(), a->key, a->key_len, (const unsigned char *)s.p, s.len, mac, &mac_len) == NULL)
		goto out;
	ft_base64_encode(mac, mac_len, sig); /* 44 characters for the 32 bytes of a SHA-256 HMAC */
	rc = ft_be_xfer_header(x, "Authorization", "SharedKey %s:%s", b->cfg.account, sig);
out:
	ft_strbuf_free(&s);
	return rc;
}

/* ---- requests ---- */

static ft_backend_err_t oom(const char *op, const char *what, ft_backend_error_t *err)
{
	return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "azure %s %s: cannot build the request", op, what);
}

/* Sets the URL (the SAS appended to query) and the headers every request carries. */
static int request(ft_backend_t *b, ft_be_xfer_t *x, const char *method, const char *name, const char *query)
{
	const azure_t *a = b->priv;
	ft_strbuf_t path = {0}, q = {0};
	char date[FT_DATE_HTTP_MAX];
	time_t now = time(NULL);
	int rc = -1;

	ft_strbuf_adds(&path, a->ep.path);
	if (b->account) /* the service itself: "/" or the endpoint's path (azurite's /devstoreaccount1) */
		ft_strbuf_adds(&path, a->ep.path[0] == '\0' ? "/" : "");
	else
		ft_strbuf_adds(&path, "/");
	ft_pct_encode_buf(&path, b->cfg.bucket, strlen(b->cfg.bucket), 0);
	if (name != NULL) {
		ft_strbuf_adds(&path, "/");
		ft_pct_encode_buf(&path, name, strlen(name), FT_PCT_KEEP_SLASH);
	}
	ft_strbuf_adds(&q, query != NULL ? query : "");
	if (b->cfg.sas[0] != '\0') {
		if (q.len > 0)
			ft_strbuf_adds(&q, "&");
		ft_strbuf_adds(&q, b->cfg.sas);
	}
	ft_date_format_http(now, date);
	if (path.failed || q.failed || ft_be_xfer_set(x, method, &a->ep, path.p, ft_be_buf_str(&q)) != 0 ||
	    ft_be_xfer_header(x, "Host", "%s", a->ep.host) != 0 || ft_be_xfer_header(x, "x-ms-date", "%s", date) != 0 ||
	    ft_be_xfer_header(x, "x-ms-version", "%s", API_VERSION) != 0)
		goto out;
	rc = 0;
out:
	ft_strbuf_free(&q);
	ft_strbuf_free(&path);
	return rc;
}

static ft_backend_err_t response_error(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_strbuf_t body = {0};
	char code[64], message[200];
	const char *hcode = ft_be_xfer_resp_header(x, "x-ms-error-code");
	ft_backend_err_t rc;

	ft_be_xfer_error_body(x, &body);
	ft_be_xml_error(body.p, body.len, code, sizeof(code), message, sizeof(message));
	if (code[0] == '\0' && hcode != NULL)
		snprintf(code, sizeof(code), "%s", hcode);
	/* Azure's messages end with RequestId/Time lines: keep the first line. */
	message[strcspn(message, "\r\n")] = '\0';
	rc = ft_be_http_error(x, code, message, bucket_codes, err);
	ft_strbuf_free(&body);
	return rc;
}

static ft_backend_err_t run(ft_backend_t *b, ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (sign(b, x) != 0)
		return oom(x->op, x->what, err);
	rc = ft_be_xfer_start(x, err);
	if (rc != FT_BACKEND_OK)
		return rc;
	if (x->status < 200 || x->status > 299)
		return response_error(x, err);
	return FT_BACKEND_OK;
}

static void md5_b64_to_hex(const char *b64, char hex[33])
{
	uint8_t raw[16];

	hex[0] = '\0';
	if (b64 != NULL && ft_base64_decode(b64, strlen(b64), raw, sizeof(raw)) == 16)
		ft_hex_encode(raw, 16, hex);
}

static void meta_from_headers(const ft_be_xfer_t *x, ft_backend_meta_t *m)
{
	const char *version = ft_be_xfer_resp_header(x, "x-ms-version-id");
	const char *md5 = ft_be_xfer_resp_header(x, "x-ms-blob-content-md5");

	if (x->status != 206) {
		m->size = ft_be_xfer_content_length(x);
		if (md5 == NULL)
			md5 = ft_be_xfer_resp_header(x, "Content-MD5");
	}
	m->mtime_ns = ft_be_parse_http_date(ft_be_xfer_resp_header(x, "Last-Modified"));
	ft_be_copy_etag(m->etag, sizeof(m->etag), ft_be_xfer_resp_header(x, "ETag"));
	if (version != NULL)
		snprintf(m->version, sizeof(m->version), "%s", version);
	md5_b64_to_hex(md5, m->md5);
}

static ft_backend_err_t azure_get(ft_backend_t *b, ft_be_xfer_t *x, const char *name, const ft_backend_get_opts_t *o,
				  ft_backend_meta_t *meta, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (request(b, x, "GET", name, NULL) != 0 || ft_be_add_range(x, o) != 0 || ft_be_add_if_match(x, o) != 0)
		return oom("GET", name, err);
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, meta);
	return rc;
}

/* Runs a request whose response body is only drained. */
static ft_backend_err_t run_drain(ft_backend_t *b, ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_strbuf_t sink = {0};
	ft_backend_err_t rc = run(b, x, err);

	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, FT_BE_ERROR_BODY_MAX, &sink, err);
	ft_strbuf_free(&sink);
	return rc;
}

static ft_backend_err_t azure_head(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "HEAD", name);
	ft_backend_err_t rc;

	if (x == NULL)
		return oom("HEAD", name, err);
	rc = request(b, x, "HEAD", name, NULL) != 0 ? oom("HEAD", name, err) : run_drain(b, x, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, out);
	ft_be_xfer_free(x);
	return rc;
}

static ft_backend_err_t azure_put(ft_backend_t *b, const char *name, const ft_backend_body_t *body,
				  ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "PUT", name);
	ft_backend_err_t rc;

	if (x == NULL)
		return oom("PUT", name, err);
	if (request(b, x, "PUT", name, NULL) != 0 || ft_be_xfer_header(x, "x-ms-blob-type", "BlockBlob") != 0 ||
	    ft_be_xfer_header(x, "Content-Type", "%s",
			      body->content_type != NULL ? body->content_type : "application/octet-stream") != 0) {
		rc = oom("PUT", name, err);
		goto out;
	}
	if (body->md5 != NULL && *body->md5 != '\0') {
		char b64[32];

		if (ft_be_md5_b64(body->md5, b64) != 0 || ft_be_xfer_header(x, "Content-MD5", "%s", b64) != 0) {
			rc = oom("PUT", name, err);
			goto out;
		}
	}
	ft_be_xfer_body(x, body);
	rc = run_drain(b, x, err);
	if (rc == FT_BACKEND_OK) {
		const char *version = ft_be_xfer_resp_header(x, "x-ms-version-id");

		ft_be_copy_etag(out->etag, sizeof(out->etag), ft_be_xfer_resp_header(x, "ETag"));
		out->mtime_ns = ft_be_parse_http_date(ft_be_xfer_resp_header(x, "Last-Modified"));
		if (version != NULL)
			snprintf(out->version, sizeof(out->version), "%s", version);
		md5_b64_to_hex(ft_be_xfer_resp_header(x, "Content-MD5"), out->md5);
		out->size = body->length;
	}
out:
	ft_be_xfer_free(x);
	return rc;
}

static ft_backend_err_t azure_del(ft_backend_t *b, const char *name, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "DELETE", name);
	ft_backend_err_t rc;

	if (x == NULL)
		return oom("DELETE", name, err);
	rc = request(b, x, "DELETE", name, NULL) != 0 ? oom("DELETE", name, err) : run_drain(b, x, err);
	ft_be_xfer_free(x);
	return rc;
}

/* A GET of the container (the service on an account handle) with query, its whole body (a listing) into body. */
static ft_backend_err_t get_listing(ft_backend_t *b, ft_be_xfer_t *x, const ft_strbuf_t *query, ft_strbuf_t *body,
				    ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (query->failed || request(b, x, "GET", NULL, ft_be_buf_str(query)) != 0)
		return oom(x->op, x->what, err);
	rc = run(b, x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, 64 << 20, body, err);
	return rc;
}

/* ---- List Blobs ---- */

typedef struct {
	ft_backend_page_t *page;
	int cap;
	int in_blob;
	int oom;
} list_ctx_t;

static int on_list(void *ctx, const char *path, const char *text, size_t len)
{
	static const char blob[] = "EnumerationResults/Blobs/Blob";
	list_ctx_t *l = ctx;
	ft_backend_entry_t *e = l->in_blob ? &l->page->entries[l->page->n - 1] : NULL;
	const char *leaf;

	if (strcmp(path, blob) == 0) {
		if (text != NULL) {
			l->in_blob = 0;
			return e != NULL && e->name[0] != '\0' ? 0 : -1;
		}
		if (ft_be_page_add(l->page, &l->cap, "", 0) != 0) {
			l->oom = 1;
			return 1;
		}
		l->in_blob = 1;
		return 0;
	}
	if (text == NULL)
		return 0;
	if (strcmp(path, "EnumerationResults/Blobs/BlobPrefix/Name") == 0) { /* a delimited listing's "directory" */
		int rc = ft_be_page_add_dir(l->page, &l->cap, text, len);

		l->oom = rc == -2;
		return rc == -2 ? 1 : rc;
	}
	if (strcmp(path, "EnumerationResults/NextMarker") == 0) {
		if (len > 0) {
			free(l->page->next_token);
			l->page->next_token = strndup(text, len);
			if (l->page->next_token == NULL) {
				l->oom = 1;
				return 1;
			}
		}
		return 0;
	}
	if (e == NULL || strncmp(path, blob, sizeof(blob) - 1) != 0)
		return 0;
	leaf = path + sizeof(blob) - 1;
	if (strcmp(leaf, "/Name") == 0) {
		char *name = strndup(text, len);

		if (name == NULL) {
			l->oom = 1;
			return 1;
		}
		free(e->name);
		e->name = name;
	} else if (strcmp(leaf, "/Properties/Content-Length") == 0) {
		if (ft_be_parse_i64(text, &e->size) != 0)
			return -1;
	} else if (strcmp(leaf, "/Properties/Etag") == 0) {
		ft_be_copy_etag(e->etag, sizeof(e->etag), text);
	} else if (strcmp(leaf, "/Properties/Last-Modified") == 0) {
		e->mtime_ns = ft_be_parse_http_date(text);
	}
	return 0;
}

ft_backend_err_t ft_be_azure_list_parse(const char *doc, size_t len, ft_backend_page_t *page)
{
	list_ctx_t l = {.page = page};

	if (ft_be_xml_parse(doc, len, on_list, &l) != 0)
		return l.oom ? FT_BACKEND_ENOMEM : FT_BACKEND_EPROTO;
	return FT_BACKEND_OK;
}

/* start_after: Azure has no such query (its marker is opaque), callers skip. */
static ft_backend_err_t azure_list(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				   ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "LIST", b->cfg.bucket);
	ft_strbuf_t query = {0}, body = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return oom("LIST", b->cfg.bucket, err);
	ft_strbuf_addf(&query, "restype=container&comp=list&maxresults=%d", a->max);
	ft_be_query_add(&query, "prefix", a->prefix);
	ft_be_query_add(&query, "marker", a->token);
	ft_be_query_add(&query, "delimiter", a->delimiter);
	rc = get_listing(b, x, &query, &body, err);
	if (rc != FT_BACKEND_OK)
		goto out;
	rc = ft_be_azure_list_parse(body.p, body.len, out);
	if (rc != FT_BACKEND_OK)
		rc = rc == FT_BACKEND_ENOMEM ? ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "azure LIST: out of memory")
					     : ft_be_fail(err, FT_BACKEND_EPROTO, x->status,
							  "azure LIST %s: malformed EnumerationResults", b->cfg.bucket);
out:
	ft_strbuf_free(&body);
	ft_strbuf_free(&query);
	ft_be_xfer_free(x);
	return rc;
}

/* ---- List Containers ---- */

static ft_backend_err_t azure_list_buckets(ft_backend_t *b, const char *token, ft_backend_page_t *out,
					   ft_backend_error_t *err)
{
	ft_be_xfer_t *x =
		ft_be_xfer_new(b, "LIST-CONTAINERS", b->cfg.account[0] != '\0' ? b->cfg.account : "(account)");
	ft_strbuf_t query = {0}, body = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return oom("LIST-CONTAINERS", "", err);
	ft_strbuf_adds(&query, "comp=list&maxresults=5000");
	if (token != NULL) {
		ft_strbuf_adds(&query, "&marker=");
		ft_pct_encode_buf(&query, token, strlen(token), 0);
	}
	rc = get_listing(b, x, &query, &body, err);
	if (rc != FT_BACKEND_OK)
		goto out;
	rc = ft_be_xml_names_parse(body.p, body.len, "EnumerationResults/Containers/Container/Name",
				   "EnumerationResults/NextMarker", out);
	if (rc != FT_BACKEND_OK)
		rc = ft_be_fail(err, rc, x->status, "azure LIST-CONTAINERS %s: %s", x->what,
				rc == FT_BACKEND_ENOMEM ? "out of memory" : "malformed EnumerationResults");
out:
	ft_strbuf_free(&body);
	ft_strbuf_free(&query);
	ft_be_xfer_free(x);
	return rc;
}

const ft_be_ops_t ft_be_azure_ops = {
	.init = azure_init,
	.fini = azure_fini,
	.get = azure_get,
	.head = azure_head,
	.put = azure_put,
	.del = azure_del,
	.list = azure_list,
	.list_buckets = azure_list_buckets,
};
