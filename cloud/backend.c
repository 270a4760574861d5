/* SPDX-License-Identifier: Apache-2.0 */
/* Backend interface: error table, bucket configuration, dispatch by provider, and the verifying range reader. */
#include "cloud/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/cksum.h"
#include "base/crc32c.h"

#define DEFAULT_CONNECT_MS 5000
#define DEFAULT_STALL_MS 30000

/* ---- errors ---- */

typedef struct {
	const char *text;
	int status; /* what a client of the cluster sees */
	int retryable;
} err_info_t;

static const err_info_t errors[FT_BACKEND_ERR_COUNT] = {
	[FT_BACKEND_OK] = {"ok", 200, 0},
	[FT_BACKEND_ENOTFOUND] = {"object not found", 404, 0},
	[FT_BACKEND_ENOBUCKET] = {"bucket not found", 404, 0},
	[FT_BACKEND_EAUTH] = {"access denied by the backend", 403, 0},
	[FT_BACKEND_ERANGE] = {"range not satisfiable", 416, 0},
	[FT_BACKEND_ECHANGED] = {"object changed on the backend", 412, 0},
	[FT_BACKEND_ETHROTTLED] = {"backend throttled the request", 503, 1},
	[FT_BACKEND_ESERVER] = {"backend server error", 502, 1},
	[FT_BACKEND_EREQUEST] = {"backend refused the request", 502, 0},
	[FT_BACKEND_ECONNECT] = {"cannot connect to the backend", 502, 1},
	[FT_BACKEND_ETIMEDOUT] = {"backend timed out", 504, 1},
	[FT_BACKEND_ETRUNCATED] = {"backend body cut short", 502, 1},
	[FT_BACKEND_ECHECKSUM] = {"backend body checksum mismatch", 502, 1},
	[FT_BACKEND_EPROTO] = {"unexpected backend response", 502, 0},
	[FT_BACKEND_ENOTSUP] = {"not supported by this provider", 501, 0},
	[FT_BACKEND_ECONFIG] = {"bad backend configuration", 500, 0},
	[FT_BACKEND_ESOURCE] = {"upload body source failed", 500, 0},
	[FT_BACKEND_ECANCELED] = {"canceled", 500, 0},
	[FT_BACKEND_ENOMEM] = {"out of memory", 500, 1},
};

static const err_info_t *err_info(ft_backend_err_t e)
{
	if ((int)e < 0 || e >= FT_BACKEND_ERR_COUNT)
		return &errors[FT_BACKEND_EPROTO];
	return &errors[e];
}

const char *ft_backend_strerror(ft_backend_err_t e)
{
	return err_info(e)->text;
}

int ft_backend_http_status(ft_backend_err_t e)
{
	return err_info(e)->status;
}

int ft_backend_retryable(ft_backend_err_t e)
{
	return err_info(e)->retryable;
}

/* ---- providers ---- */

static const struct {
	const char *name;
	ft_backend_provider_t p;
} provider_names[] = {
	{"aws", FT_BACKEND_AWS}, {"s3", FT_BACKEND_AWS},      {"gcp", FT_BACKEND_GCP},  {"gs", FT_BACKEND_GCP},
	{"gcs", FT_BACKEND_GCP}, {"azure", FT_BACKEND_AZURE}, {"az", FT_BACKEND_AZURE}, {"ht", FT_BACKEND_HT},
};

const char *ft_backend_provider_name(ft_backend_provider_t p)
{
	switch (p) {
	case FT_BACKEND_AWS:
		return "aws";
	case FT_BACKEND_GCP:
		return "gcp";
	case FT_BACKEND_AZURE:
		return "azure";
	case FT_BACKEND_HT:
		return "ht";
	default:
		return "";
	}
}

int ft_backend_provider_parse(const char *s, ft_backend_provider_t *out)
{
	for (size_t i = 0; s != NULL && i < sizeof(provider_names) / sizeof(provider_names[0]); i++) {
		if (strcmp(s, provider_names[i].name) == 0) {
			*out = provider_names[i].p;
			return 0;
		}
	}
	return -1;
}

static const ft_be_ops_t *provider_ops(ft_backend_provider_t p)
{
	switch (p) {
	case FT_BACKEND_AWS:
		return &ft_be_aws_ops;
	case FT_BACKEND_GCP:
		return &ft_be_gcp_ops;
	case FT_BACKEND_AZURE:
		return &ft_be_azure_ops;
	case FT_BACKEND_HT:
		return &ft_be_ht_ops;
	default:
		return NULL;
	}
}

/* ---- configuration ---- */

void ft_backend_config_init(ft_backend_config_t *c, ft_backend_provider_t provider)
{
	memset(c, 0, sizeof(*c));
	c->provider = provider;
}

typedef struct {
	const char *key;
	size_t offset;
	size_t cap;
	int secret;
} str_field_t;

#define STR_FIELD(k, secret)                                                                        \
	{                                                                                           \
#k, offsetof(ft_backend_config_t, k), sizeof(((ft_backend_config_t *)0)->k), secret \
	}

static const str_field_t str_fields[] = {
	STR_FIELD(bucket, 0),           STR_FIELD(endpoint, 0),
	STR_FIELD(region, 0),           STR_FIELD(access_key, 0),
	STR_FIELD(secret_key, 1),       STR_FIELD(session_token, 1),
	STR_FIELD(credentials_file, 0), STR_FIELD(account, 0),
	STR_FIELD(account_key, 1),      STR_FIELD(sas, 1),
};

static ft_backend_err_t config_key(ft_backend_config_t *c, const char *key, const json_t *v, ft_backend_error_t *err)
{
	if (strcmp(key, "provider") == 0) {
		if (!json_is_string(v) || ft_backend_provider_parse(json_string_value(v), &c->provider) != 0)
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0,
					  "backend: provider must be aws, gcp, azure or ht");
		return FT_BACKEND_OK;
	}
	if (strcmp(key, "addressing") == 0) {
		const char *s = json_string_value(v);

		if (s != NULL && strcmp(s, "path") == 0)
			c->addressing = FT_BACKEND_ADDR_PATH;
		else if (s != NULL && strcmp(s, "virtual") == 0)
			c->addressing = FT_BACKEND_ADDR_VIRTUAL;
		else if (s != NULL && (strcmp(s, "auto") == 0 || *s == '\0'))
			c->addressing = FT_BACKEND_ADDR_AUTO;
		else
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0,
					  "backend: addressing must be path, virtual or auto");
		return FT_BACKEND_OK;
	}
	if (strcmp(key, "connect_timeout_ms") == 0 || strcmp(key, "stall_timeout_ms") == 0) {
		int *dst = key[0] == 'c' ? &c->connect_timeout_ms : &c->stall_timeout_ms;

		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 3600000)
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: %s must be 0..3600000", key);
		*dst = (int)json_integer_value(v);
		return FT_BACKEND_OK;
	}
	for (size_t i = 0; i < sizeof(str_fields) / sizeof(str_fields[0]); i++) {
		const str_field_t *f = &str_fields[i];
		const char *s;

		if (strcmp(key, f->key) != 0)
			continue;
		s = json_string_value(v);
		if (s == NULL)
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: %s must be a string", key);
		if (strlen(s) >= f->cap)
			return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: %s is too long", key);
		strcpy((char *)c + f->offset, s);
		return FT_BACKEND_OK;
	}
	return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: unknown property \"%s\"", key);
}

ft_backend_err_t ft_backend_config_from_json(ft_backend_config_t *c, const json_t *props, ft_backend_error_t *err)
{
	const char *key;
	json_t *v;

	ft_backend_config_init(c, FT_BACKEND_NONE);
	if (!json_is_object(props))
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: properties must be a JSON object");
	json_object_foreach((json_t *)props, key, v) {
		ft_backend_err_t rc = config_key(c, key, v, err);

		if (rc != FT_BACKEND_OK)
			return rc;
	}
	if (c->provider == FT_BACKEND_NONE)
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: provider is required");
	return FT_BACKEND_OK;
}

json_t *ft_backend_config_to_json(const ft_backend_config_t *c, int with_secrets)
{
	json_t *j = json_object();

	if (j == NULL)
		return NULL;
	json_object_set_new(j, "provider", json_string(ft_backend_provider_name(c->provider)));
	for (size_t i = 0; i < sizeof(str_fields) / sizeof(str_fields[0]); i++) {
		const str_field_t *f = &str_fields[i];
		const char *s = (const char *)c + f->offset;

		if (*s != '\0' && (with_secrets || !f->secret))
			json_object_set_new(j, f->key, json_string(s));
	}
	if (c->addressing != FT_BACKEND_ADDR_AUTO)
		json_object_set_new(j, "addressing",
				    json_string(c->addressing == FT_BACKEND_ADDR_PATH ? "path" : "virtual"));
	if (c->connect_timeout_ms != 0)
		json_object_set_new(j, "connect_timeout_ms", json_integer(c->connect_timeout_ms));
	if (c->stall_timeout_ms != 0)
		json_object_set_new(j, "stall_timeout_ms", json_integer(c->stall_timeout_ms));
	return j;
}

/* ---- handles ---- */

/* A handle for cfg's bucket, or with account set for its account (no bucket). NULL with err filled. */
static ft_backend_t *open_handle(const ft_backend_config_t *cfg, int account, ft_backend_error_t *err)
{
	const ft_be_ops_t *ops = provider_ops(cfg->provider);
	ft_backend_t *b;

	if (ops == NULL) {
		ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "backend: no provider given");
		return NULL;
	}
	if (ft_backend_global_init() != 0) {
		ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "backend: cannot initialize libcurl");
		return NULL;
	}
	b = calloc(1, sizeof(*b));
	if (b == NULL) {
		ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "backend: out of memory");
		return NULL;
	}
	b->cfg = *cfg;
	b->ops = ops;
	b->account = account;
	if (account)
		b->cfg.bucket[0] = '\0';
	if (b->cfg.connect_timeout_ms <= 0)
		b->cfg.connect_timeout_ms = DEFAULT_CONNECT_MS;
	if (b->cfg.stall_timeout_ms <= 0)
		b->cfg.stall_timeout_ms = DEFAULT_STALL_MS;
	if (ops->init(b, err) != FT_BACKEND_OK) {
		free(b);
		return NULL;
	}
	return b;
}

ft_backend_t *ft_backend_open(const ft_backend_config_t *cfg, ft_backend_error_t *err)
{
	return open_handle(cfg, 0, err);
}

void ft_backend_close(ft_backend_t *b)
{
	if (b == NULL)
		return;
	b->ops->fini(b);
	free(b);
}

const ft_backend_config_t *ft_backend_config(const ft_backend_t *b)
{
	return &b->cfg;
}

static int bad_name(const char *name)
{
	return name == NULL || *name == '\0';
}

ft_backend_err_t ft_backend_head(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	memset(out, 0, sizeof(*out));
	out->size = -1;
	if (bad_name(name))
		return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: empty object name");
	return b->ops->head(b, name, out, err);
}

ft_backend_err_t ft_backend_delete(ft_backend_t *b, const char *name, ft_backend_error_t *err)
{
	if (bad_name(name))
		return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: empty object name");
	return b->ops->del(b, name, err);
}

ft_backend_err_t ft_backend_list(ft_backend_t *b, const char *prefix, const char *token, int max,
				 ft_backend_page_t *out, ft_backend_error_t *err)
{
	ft_backend_list_args_t a = {.prefix = prefix, .token = token, .max = max};

	return ft_backend_list_page(b, &a, out, err);
}

static int entry_cmp(const void *x, const void *y)
{
	return strcmp(((const ft_backend_entry_t *)x)->name, ((const ft_backend_entry_t *)y)->name);
}

ft_backend_err_t ft_backend_list_page(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				      ft_backend_error_t *err)
{
	ft_backend_list_args_t n = {
		.prefix = a->prefix != NULL ? a->prefix : "",
		.delimiter = a->delimiter != NULL ? a->delimiter : "",
		.token = a->token != NULL && *a->token != '\0' ? a->token : NULL,
		.start_after = a->start_after != NULL ? a->start_after : "",
		.max = a->max <= 0 || a->max > 1000 ? 1000 : a->max,
	};
	ft_backend_err_t rc;

	memset(out, 0, sizeof(*out));
	rc = b->ops->list(b, &n, out, err);
	if (rc != FT_BACKEND_OK)
		ft_backend_page_free(out);
	else if (*n.delimiter != '\0' && out->n > 1) /* S3 and GCS answer the names, then the prefixes */
		qsort(out->entries, (size_t)out->n, sizeof(*out->entries), entry_cmp);
	return rc;
}

ft_backend_err_t ft_backend_list_buckets(const ft_backend_config_t *cfg, const char *token, ft_backend_page_t *out,
					 ft_backend_error_t *err)
{
	const ft_be_ops_t *ops = provider_ops(cfg->provider);
	ft_backend_t *b;
	ft_backend_err_t rc;

	memset(out, 0, sizeof(*out));
	if (ops != NULL && ops->list_buckets == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOTSUP, 0, "%s: no bucket listing (an HTTP origin has no buckets)",
				  ft_backend_provider_name(cfg->provider));
	b = open_handle(cfg, 1, err); /* per call: listing buckets is rare, and a handle makes no network call */
	if (b == NULL)
		return err->code;
	rc = b->ops->list_buckets(b, token != NULL && *token != '\0' ? token : NULL, out, err);
	if (rc != FT_BACKEND_OK)
		ft_backend_page_free(out);
	ft_backend_close(b);
	return rc;
}

int ft_backend_account_endpoint(const ft_backend_config_t *cfg, char *out, size_t cap)
{
	ft_backend_error_t err;
	ft_backend_t *b;

	if (cap > 0)
		out[0] = '\0';
	if (provider_ops(cfg->provider) == NULL || provider_ops(cfg->provider)->list_buckets == NULL)
		return -1;
	b = open_handle(cfg, 1, &err);
	if (b == NULL)
		return -1;
	int n = snprintf(out, cap, "%s", b->cfg.endpoint);
	ft_backend_close(b);
	return n >= 0 && (size_t)n < cap ? 0 : -1;
}

void ft_backend_page_free(ft_backend_page_t *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->n; i++)
		free(p->entries[i].name);
	free(p->entries);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

int ft_backend_meta_same(const ft_backend_meta_t *a, const ft_backend_meta_t *b)
{
	if (a->version[0] != '\0' && b->version[0] != '\0')
		return strcmp(a->version, b->version) == 0;
	if (a->etag[0] != '\0' && b->etag[0] != '\0')
		return strcmp(a->etag, b->etag) == 0;
	if (a->md5[0] != '\0' && b->md5[0] != '\0')
		return strcmp(a->md5, b->md5) == 0;
	return a->size == b->size && a->mtime_ns == b->mtime_ns;
}

/* ---- put ---- */

ft_backend_err_t ft_backend_put(ft_backend_t *b, const char *name, const ft_backend_body_t *body,
				ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_backend_meta_t scratch;

	if (out == NULL)
		out = &scratch;
	memset(out, 0, sizeof(*out));
	out->size = -1;
	if (bad_name(name))
		return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: empty object name");
	if (body == NULL || body->read == NULL || body->length < 0)
		return ft_be_fail(err, FT_BACKEND_ESOURCE, 0, "backend: put needs a body source and its length");
	if (body->md5 != NULL && *body->md5 != '\0') {
		uint8_t raw[16];

		if (ft_hex_decode(body->md5, strlen(body->md5), raw, sizeof(raw), 0) != (long)sizeof(raw))
			return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: md5 must be 32 hex digits");
	}
	return b->ops->put(b, name, body, out, err);
}

typedef struct {
	int fd;
	int64_t start, offset;
	const char *mem;
	size_t mem_len, mem_off;
} src_state_t;

static int64_t src_fd_read(void *ctx, void *buf, size_t cap)
{
	src_state_t *s = ctx;
	ssize_t n;

	do {
		n = pread(s->fd, buf, cap, (off_t)s->offset);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	s->offset += n;
	return n;
}

static int src_fd_rewind(void *ctx)
{
	src_state_t *s = ctx;

	s->offset = s->start;
	return 0;
}

static int src_mem_rewind(void *ctx)
{
	src_state_t *s = ctx;

	s->mem_off = 0;
	return 0;
}

static int64_t src_mem_read(void *ctx, void *buf, size_t cap)
{
	src_state_t *s = ctx;
	size_t n = s->mem_len - s->mem_off;

	if (n > cap)
		n = cap;
	memcpy(buf, s->mem + s->mem_off, n);
	s->mem_off += n;
	return (int64_t)n;
}

ft_backend_err_t ft_backend_put_fd(ft_backend_t *b, const char *name, int fd, int64_t offset, int64_t length,
				   const char *md5, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	src_state_t s = {.fd = fd, .start = offset, .offset = offset};
	ft_backend_body_t body = {
		.read = src_fd_read, .ctx = &s, .rewind = src_fd_rewind, .length = length, .md5 = md5};

	return ft_backend_put(b, name, &body, out, err);
}

ft_backend_err_t ft_backend_put_mem(ft_backend_t *b, const char *name, const void *buf, size_t len,
				    ft_backend_meta_t *out, ft_backend_error_t *err)
{
	src_state_t s = {.mem = buf, .mem_len = len};
	ft_backend_body_t body = {.read = src_mem_read, .ctx = &s, .rewind = src_mem_rewind, .length = (int64_t)len};

	return ft_backend_put(b, name, &body, out, err);
}

/* ---- the reader ---- */

/*
 * DESIGN
 * The provider starts the GET and fills the object's metadata from the response headers; the
 * reader then owns the byte accounting: want = bytes the caller asked for, as cut by the object's
 * end; skip = leading bytes to drop when an origin ignored Range and sent the whole object (200).
 * The end is reported only after the transport reported its own clean end (so a connection
 * closed early is never a success), except when we cut a 200 body short on purpose.
 */
struct ft_backend_reader {
	ft_backend_t *backend;
	ft_be_xfer_t *x;
	ft_backend_meta_t meta;
	int64_t want; /* bytes to deliver; -1 = until the transport ends */
	int64_t delivered;
	int64_t skip;
	int cut; /* stop after want bytes without draining (200 to a range request) */
	int eof;
	ft_backend_error_t error;
	/* verification of a whole-object read */
	int verify_md5, verify_crc;
	ft_cksum_t md5;
	uint32_t crc;
};

static ft_backend_err_t reader_fail(ft_backend_reader_t *r, ft_backend_err_t code, const ft_backend_error_t *from,
				    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static ft_backend_err_t reader_fail(ft_backend_reader_t *r, ft_backend_err_t code, const ft_backend_error_t *from,
				    const char *fmt, ...)
{
	va_list ap;

	if (r->error.code != FT_BACKEND_OK)
		return r->error.code;
	if (from != NULL && from->code != FT_BACKEND_OK) {
		r->error = *from;
		return from->code;
	}
	r->error.code = code;
	r->error.http_status = r->x != NULL ? r->x->status : 0;
	va_start(ap, fmt);
	vsnprintf(r->error.msg, sizeof(r->error.msg), fmt, ap);
	va_end(ap);
	return code;
}

/* Works out want/skip/cut from the response status and the request; returns OK or the error. */
static ft_backend_err_t reader_plan(ft_backend_reader_t *r, const ft_backend_get_opts_t *o, const char *name,
				    ft_backend_error_t *err)
{
	ft_be_xfer_t *x = r->x;
	const char *prov = ft_backend_provider_name(r->backend->cfg.provider);
	int ranged = o->offset != 0 || o->length != 0;

	if (x->status == 206) {
		int64_t first, last, total;

		if (ft_be_xfer_content_range(x, &first, &last, &total) != 0 || first != o->offset)
			return ft_be_fail(err, FT_BACKEND_EPROTO, 206,
					  "%s GET %s: Content-Range does not match the request", prov, name);
		r->want = last - first + 1;
		if (o->length > 0 && r->want > o->length) {
			/* More than asked (s3rver answers bytes=0-0 with everything): take the head, drop the rest. */
			r->want = o->length;
			r->cut = 1;
		}
		if (total >= 0)
			r->meta.size = total;
		return FT_BACKEND_OK;
	}
	if (x->status != 200)
		return ft_be_fail(err, FT_BACKEND_EPROTO, x->status, "%s GET %s: unexpected status %ld", prov, name,
				  x->status);
	r->want = ft_be_xfer_content_length(x);
	if (r->want >= 0 && r->meta.size < 0)
		r->meta.size = r->want;
	if (!ranged)
		return FT_BACKEND_OK;
	/* The origin ignored Range: drop the head and cut the tail ourselves. */
	if (r->meta.size >= 0 && o->offset >= r->meta.size)
		return ft_be_fail(err, FT_BACKEND_ERANGE, 200, "%s GET %s: range starts past the end (%lld bytes)",
				  prov, name, (long long)r->meta.size);
	r->skip = o->offset;
	if (o->length > 0) {
		r->want = o->length;
		if (r->meta.size >= 0 && o->offset + o->length > r->meta.size)
			r->want = r->meta.size - o->offset;
		r->cut = 1;
	} else if (r->want >= 0) {
		r->want -= o->offset;
	}
	return FT_BACKEND_OK;
}

static void reader_plan_verify(ft_backend_reader_t *r, const ft_backend_get_opts_t *o)
{
	int whole = o->offset == 0 && r->meta.size >= 0 && r->want == r->meta.size && r->skip == 0;

	if (!o->verify || !whole)
		return;
	if (r->meta.md5[0] != '\0' && ft_cksum_init(&r->md5, FT_CKSUM_MD5) == 0)
		r->verify_md5 = 1;
	else if (r->meta.crc32c[0] != '\0')
		r->verify_crc = 1;
}

ft_backend_err_t ft_backend_get(ft_backend_t *b, const char *name, const ft_backend_get_opts_t *opts,
				ft_backend_reader_t **out, ft_backend_error_t *err)
{
	static const ft_backend_get_opts_t whole = {0};
	ft_backend_reader_t *r;
	ft_backend_err_t rc;

	*out = NULL;
	if (opts == NULL)
		opts = &whole;
	if (bad_name(name))
		return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: empty object name");
	if (opts->offset < 0 || opts->length < 0)
		return ft_be_fail(err, FT_BACKEND_EREQUEST, 0, "backend: negative range");
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "backend: out of memory");
	r->backend = b;
	r->meta.size = -1;
	r->x = ft_be_xfer_new(b, "GET", name);
	if (r->x == NULL) {
		rc = ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "backend: out of memory");
		goto fail;
	}
	rc = b->ops->get(b, r->x, name, opts, &r->meta, err);
	if (rc != FT_BACKEND_OK)
		goto fail;
	rc = reader_plan(r, opts, name, err);
	if (rc != FT_BACKEND_OK)
		goto fail;
	reader_plan_verify(r, opts);
	*out = r;
	return FT_BACKEND_OK;
fail:
	ft_be_xfer_free(r->x);
	free(r);
	return rc;
}

const ft_backend_meta_t *ft_backend_reader_meta(const ft_backend_reader_t *r)
{
	return &r->meta;
}

int64_t ft_backend_reader_length(const ft_backend_reader_t *r)
{
	return r->want;
}

const ft_backend_error_t *ft_backend_reader_error(const ft_backend_reader_t *r)
{
	return &r->error;
}

void ft_backend_cancel(ft_backend_reader_t *r)
{
	ft_be_xfer_cancel(r->x);
}

/* The body is complete: checks the checksum, then reports the end. */
static ft_backend_err_t reader_end(ft_backend_reader_t *r)
{
	const char *prov = ft_backend_provider_name(r->backend->cfg.provider);

	if (r->verify_md5) {
		char hex[FT_CKSUM_HEX_MAX];

		ft_cksum_final(&r->md5, hex);
		r->verify_md5 = 0;
		if (strcmp(hex, r->meta.md5) != 0)
			return reader_fail(r, FT_BACKEND_ECHECKSUM, NULL, "%s GET %s: MD5 %s, backend says %s", prov,
					   r->x->what, hex, r->meta.md5);
	}
	if (r->verify_crc) {
		char hex[9];

		snprintf(hex, sizeof(hex), "%08x", r->crc);
		r->verify_crc = 0;
		if (strcmp(hex, r->meta.crc32c) != 0)
			return reader_fail(r, FT_BACKEND_ECHECKSUM, NULL, "%s GET %s: CRC32C %s, backend says %s", prov,
					   r->x->what, hex, r->meta.crc32c);
	}
	r->eof = 1;
	return FT_BACKEND_OK;
}

/* Drops r->skip leading bytes (an origin that ignored Range). */
static ft_backend_err_t reader_skip(ft_backend_reader_t *r)
{
	char scratch[16384];
	ft_backend_error_t e = {0};

	while (r->skip > 0) {
		size_t got, want = r->skip < (int64_t)sizeof(scratch) ? (size_t)r->skip : sizeof(scratch);
		ft_backend_err_t rc = ft_be_xfer_read(r->x, scratch, want, &got, &e);

		if (rc != FT_BACKEND_OK)
			return reader_fail(r, rc, &e, "read failed");
		if (got == 0)
			return reader_fail(r, FT_BACKEND_ETRUNCATED, NULL, "%s GET %s: body ended before the range",
					   ft_backend_provider_name(r->backend->cfg.provider), r->x->what);
		r->skip -= (int64_t)got;
	}
	return FT_BACKEND_OK;
}

/* All wanted bytes are in: confirm the transport ends here too (or cut on purpose). */
static ft_backend_err_t reader_finish(ft_backend_reader_t *r)
{
	ft_backend_error_t e = {0};
	char extra[1];
	size_t got;
	ft_backend_err_t rc;

	if (r->cut)
		return reader_end(r);
	rc = ft_be_xfer_read(r->x, extra, sizeof(extra), &got, &e);
	if (rc != FT_BACKEND_OK)
		return reader_fail(r, rc, &e, "read failed");
	if (got != 0)
		return reader_fail(r, FT_BACKEND_EPROTO, NULL, "%s GET %s: body longer than stated",
				   ft_backend_provider_name(r->backend->cfg.provider), r->x->what);
	return reader_end(r);
}

ft_backend_err_t ft_backend_read(ft_backend_reader_t *r, void *buf, size_t cap, size_t *got)
{
	ft_backend_error_t e = {0};
	ft_backend_err_t rc;

	*got = 0;
	if (r->error.code != FT_BACKEND_OK)
		return r->error.code;
	if (r->eof)
		return FT_BACKEND_OK;
	if (cap == 0)
		return reader_fail(r, FT_BACKEND_EREQUEST, NULL, "backend: read with an empty buffer");
	if (r->skip > 0 && (rc = reader_skip(r)) != FT_BACKEND_OK)
		return rc;
	if (r->want >= 0 && r->delivered >= r->want)
		return reader_finish(r);
	if (r->want >= 0 && (int64_t)cap > r->want - r->delivered)
		cap = (size_t)(r->want - r->delivered);
	rc = ft_be_xfer_read(r->x, buf, cap, got, &e);
	if (rc != FT_BACKEND_OK)
		return reader_fail(r, rc, &e, "read failed");
	if (*got == 0) {
		if (r->want >= 0 && r->delivered < r->want)
			return reader_fail(r, FT_BACKEND_ETRUNCATED, NULL,
					   "%s GET %s: body ended after %lld of %lld bytes",
					   ft_backend_provider_name(r->backend->cfg.provider), r->x->what,
					   (long long)r->delivered, (long long)r->want);
		return reader_end(r);
	}
	if (r->verify_md5)
		ft_cksum_update(&r->md5, buf, *got);
	if (r->verify_crc)
		r->crc = ft_crc32c(r->crc, buf, *got);
	r->delivered += (int64_t)*got;
	return FT_BACKEND_OK;
}

int ft_backend_reader_splices(const ft_backend_reader_t *r)
{
	return r->x->plain != NULL && !r->verify_md5 && !r->verify_crc && r->skip == 0 && !r->cut;
}

ft_backend_err_t ft_backend_read_to_fd(ft_backend_reader_t *r, int fd, int64_t off, size_t cap, size_t *got,
				       int *fd_errno)
{
	ft_backend_error_t e = {0};
	ft_backend_err_t rc;

	*got = 0;
	*fd_errno = 0;
	if (r->error.code != FT_BACKEND_OK)
		return r->error.code;
	if (r->eof)
		return FT_BACKEND_OK;
	if (!ft_backend_reader_splices(r))
		return reader_fail(r, FT_BACKEND_EREQUEST, NULL, "backend: this read cannot go to a file directly");
	if (cap == 0)
		return reader_fail(r, FT_BACKEND_EREQUEST, NULL, "backend: read with an empty buffer");
	if (r->want >= 0 && r->delivered >= r->want)
		return reader_finish(r);
	if (r->want >= 0 && (int64_t)cap > r->want - r->delivered)
		cap = (size_t)(r->want - r->delivered);
	rc = ft_be_plain_splice(r->x, fd, off, cap, got, fd_errno, &e);
	if (rc != FT_BACKEND_OK)
		return reader_fail(r, rc, &e, "read failed");
	if (*got == 0) {
		if (r->want >= 0 && r->delivered < r->want)
			return reader_fail(r, FT_BACKEND_ETRUNCATED, NULL,
					   "%s GET %s: body ended after %lld of %lld bytes",
					   ft_backend_provider_name(r->backend->cfg.provider), r->x->what,
					   (long long)r->delivered, (long long)r->want);
		return reader_end(r);
	}
	r->delivered += (int64_t)*got;
	return FT_BACKEND_OK;
}

void ft_backend_reader_close(ft_backend_reader_t *r)
{
	if (r == NULL)
		return;
	if (r->verify_md5)
		ft_cksum_abort(&r->md5);
	ft_be_xfer_free(r->x);
	free(r);
}

ft_backend_err_t ft_backend_get_to(ft_backend_t *b, const char *name, const ft_backend_get_opts_t *opts,
				   ft_backend_sink_fn sink, void *ctx, ft_backend_meta_t *meta, ft_backend_error_t *err)
{
	enum { CHUNK = 256 << 10 };
	ft_backend_reader_t *r = NULL;
	char *buf = NULL;
	ft_backend_err_t rc;

	rc = ft_backend_get(b, name, opts, &r, err);
	if (rc != FT_BACKEND_OK)
		goto out;
	if (meta != NULL)
		*meta = r->meta;
	buf = malloc(CHUNK);
	if (buf == NULL) {
		rc = ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "backend: out of memory");
		goto out;
	}
	for (;;) {
		size_t got;

		rc = ft_backend_read(r, buf, CHUNK, &got);
		if (rc != FT_BACKEND_OK) {
			if (err != NULL)
				*err = r->error;
			goto out;
		}
		if (got == 0)
			break;
		if (sink(ctx, buf, got) != 0) {
			rc = ft_be_fail(err, FT_BACKEND_ECANCELED, 0, "backend GET %s: the sink stopped the transfer",
					name);
			goto out;
		}
	}
	if (meta != NULL)
		*meta = r->meta;
out:
	free(buf);
	ft_backend_reader_close(r);
	return rc;
}
