/* SPDX-License-Identifier: Apache-2.0 */
/* Internal contract between the backend modules: HTTP transfer engine, helpers and the provider operation tables. */
#ifndef FT_BACKEND_INT_H
#define FT_BACKEND_INT_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include <curl/curl.h>

#include "base/codec.h"
#include "base/strbuf.h"
#include "cloud/backend.h"

/* ---- helpers on growable strings (ft_strbuf_t of strbuf.h) ---- */

/* The text ("" when empty); NULL only when failed. */
const char *ft_be_buf_str(const ft_strbuf_t *b);

/* ---- small codecs (the codecs themselves: base/codec.h) ---- */

/* A hex MD5 (32 chars) as the base64 that Content-MD5 and its kin carry; returns 0 or -1. */
int ft_be_md5_b64(const char *hex, char b64[32]);
/* "Sun, 06 Nov 1994 08:49:37 GMT" -> ns since the epoch; 0 if unparseable. */
int64_t ft_be_parse_http_date(const char *s);
/* "2009-10-12T17:50:30.000Z" (fraction optional) -> ns since the epoch; 0 if unparseable. */
int64_t ft_be_parse_iso8601(const char *s);
/* Copies an ETag without surrounding quotes (and without a W/ prefix) into out. */
void ft_be_copy_etag(char *out, size_t cap, const char *etag);
/* Parses a decimal int64 that must fill the string; returns 0 or -1. */
int ft_be_parse_i64(const char *s, int64_t *out);

/* ---- endpoint URLs ---- */

typedef struct {
	char scheme[8];         /* "http" or "https" */
	char host[FT_HOST_MAX]; /* host[:port] exactly as in the URL (the Host header) */
	char path[FT_URL_MAX];  /* base path without a trailing '/', "" when none */
} ft_be_endpoint_t;

/* Parses "scheme://host[:port][/path]"; returns 0 or -1. */
int ft_be_endpoint_parse(const char *url, ft_be_endpoint_t *out);

/* ---- tiny XML reader (no DTD, no entities beyond the predefined and numeric ones) ---- */

/*
 * Called for each element start (text NULL) and end (text = the element's own character data,
 * decoded). path is "Root/Child/Leaf". A nonzero return stops the parse and is returned.
 */
typedef int (*ft_be_xml_fn)(void *ctx, const char *path, const char *text, size_t text_len);
/* Returns 0, -1 for a malformed or too deep document, or the callback's nonzero value. */
int ft_be_xml_parse(const char *doc, size_t len, ft_be_xml_fn fn, void *ctx);
/* Code and Message of an S3/Azure <Error> document ("" when absent or unparseable). */
void ft_be_xml_error(const char *doc, size_t len, char *code, size_t code_cap, char *message, size_t message_cap);
/*
 * The listing documents, into an empty page (entries appended, next_token set; free it with
 * ft_backend_page_free whatever the result): an S3 ListBucketResult (*truncated from IsTruncated,
 * aws.c) and an Azure EnumerationResults (azure.c). FT_BACKEND_OK, FT_BACKEND_EPROTO (malformed,
 * or an entry without a name) or FT_BACKEND_ENOMEM.
 */
ft_backend_err_t ft_be_aws_list_parse(const char *doc, size_t len, ft_backend_page_t *page, int *truncated);
ft_backend_err_t ft_be_azure_list_parse(const char *doc, size_t len, ft_backend_page_t *page);
/*
 * A list of names into an empty page (freed by the caller with ft_backend_page_free whatever the
 * result): an entry per element at name_path ("Root/.../Name"), next_token from the text at
 * token_path when not empty. The account listings: S3 ListAllMyBucketsResult, Azure's containers.
 * FT_BACKEND_OK, FT_BACKEND_EPROTO (malformed, or an empty name) or FT_BACKEND_ENOMEM.
 */
ft_backend_err_t ft_be_xml_names_parse(const char *doc, size_t len, const char *name_path, const char *token_path,
				       ft_backend_page_t *page);

/* ---- the transfer engine ---- */

#define FT_BE_MAX_HEADERS 24
#define FT_BE_MAX_RESP_HEADERS 96
#define FT_BE_ERROR_BODY_MAX (64 << 10)

typedef struct {
	char *name;
	char *value;
} ft_be_header_t;

typedef struct ft_be_handle ft_be_handle_t;
typedef struct ft_be_plain ft_be_plain_t;

/*
 * One HTTP exchange. Built by a provider (method, URL parts, headers, optional upload body),
 * signed from these fields, then started; the response body is pulled with ft_be_xfer_read.
 * Every string is owned by the transfer. One thread at a time, except the cancel flag.
 */
typedef struct {
	ft_backend_t *backend;
	ft_be_handle_t *handle; /* pooled curl multi + easy pair */
	const char *op;         /* "GET", "HEAD", ... for messages */
	const char *what;       /* object or bucket name for messages (borrowed) */
	/* request */
	char method[8];
	char *origin; /* scheme://host[:port] */
	char *host;   /* host[:port] */
	char *path;   /* encoded, starts with '/' */
	char *query;  /* raw encoded query without '?', "" none */
	ft_be_header_t hdr[FT_BE_MAX_HEADERS];
	int n_hdr;
	int oom; /* a request string could not be allocated */
	struct curl_slist *slist;
	/* upload */
	ft_backend_source_fn src;
	int (*src_rewind)(void *ctx);
	void *src_ctx;
	int64_t src_len, src_sent;
	int src_failed;
	/* response */
	long status;
	ft_be_header_t rhdr[FT_BE_MAX_RESP_HEADERS];
	int n_rhdr;
	int headers_done;
	int64_t body_bytes;
	/* body handoff: the write callback fills user_buf first, then the stage */
	char *user_buf;
	size_t user_cap, user_got;
	char *stage;
	size_t stage_off, stage_len, stage_cap;
	int paused;
	/* state */
	int started, done, added;
	int connected; /* the connect allowance of the stall timer is used up */
	CURLcode result;
	ft_backend_err_t dead; /* sticky failure once set */
	uint64_t progress;     /* bumped by every byte moved either way */
	atomic_int cancel;
	char curl_err[CURL_ERROR_SIZE];
	/* plain.c: a GET the provider allows on a socket of our own (http:// only), and that socket */
	int plain_ok;
	ft_be_plain_t *plain;
} ft_be_xfer_t;

/* A transfer on a pooled handle; NULL on allocation failure. */
ft_be_xfer_t *ft_be_xfer_new(ft_backend_t *b, const char *op, const char *what);
/* Sets method and URL (origin "scheme://host[:port]", encoded path, raw query or NULL). */
int ft_be_xfer_set(ft_be_xfer_t *x, const char *method, const ft_be_endpoint_t *ep, const char *path,
		   const char *query);
/* Adds a request header (value formatted); returns 0 or -1. */
int ft_be_xfer_header(ft_be_xfer_t *x, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The value of a request header (case-insensitive), NULL if absent. */
const char *ft_be_xfer_req_header(const ft_be_xfer_t *x, const char *name);
/* Sets an upload body: exactly body->length bytes from body->read (body->ctx must outlive x). */
void ft_be_xfer_body(ft_be_xfer_t *x, const ft_backend_body_t *body);
/*
 * Sends the request and waits for the response headers (or the end of the exchange).
 * OK: x->status is set and the body can be read. Else a transport error, err filled.
 */
ft_backend_err_t ft_be_xfer_start(ft_be_xfer_t *x, ft_backend_error_t *err);
/* Pulls body bytes: OK with *got > 0, OK with *got == 0 at the end of the exchange, or an error. */
ft_backend_err_t ft_be_xfer_read(ft_be_xfer_t *x, void *buf, size_t cap, size_t *got, ft_backend_error_t *err);
/* Reads the rest of the body into out (at most max bytes, else EPROTO). */
ft_backend_err_t ft_be_xfer_collect(ft_be_xfer_t *x, size_t max, ft_strbuf_t *out, ft_backend_error_t *err);
/* Response header value (case-insensitive, the last one wins), NULL if absent. */
const char *ft_be_xfer_resp_header(const ft_be_xfer_t *x, const char *name);
/* Content-Range "bytes a-b/total" of the response; returns 0 or -1 (total -1 when '*'). */
int ft_be_xfer_content_range(const ft_be_xfer_t *x, int64_t *first, int64_t *last, int64_t *total);
/* Content-Length of the response, -1 if absent. */
int64_t ft_be_xfer_content_length(const ft_be_xfer_t *x);
void ft_be_xfer_cancel(ft_be_xfer_t *x);
/* Releases x; the connection returns to the pool when the exchange was complete. NULL is a no-op. */
void ft_be_xfer_free(ft_be_xfer_t *x);

/*
 * plain.c, for the engine only: a GET (no body) to an http:// origin on a socket of our own.
 * ft_be_plain_start sends it and reads the response head into x (status, headers) as
 * ft_be_xfer_start does; *fallback = 1 (x back as it was) when the response is one plain.c does not
 * read (chunked): the engine then sends the request through libcurl. ft_be_plain_read is
 * ft_be_xfer_read for such a transfer; ft_be_plain_free releases (or pools) its connection;
 * ft_be_plain_cleanup closes the idle ones.
 */
ft_backend_err_t ft_be_plain_start(ft_be_xfer_t *x, ft_backend_error_t *err, int *fallback);
ft_backend_err_t ft_be_plain_read(ft_be_xfer_t *x, void *buf, size_t cap, size_t *got, ft_backend_error_t *err);
/*
 * ft_be_plain_read into fd at off (pwrite's sense) by splice(2), socket to pipe to file: no copy
 * in user space. A failed write to fd sets *fd_errno and kills x (FT_BACKEND_ECANCELED).
 */
ft_backend_err_t ft_be_plain_splice(ft_be_xfer_t *x, int fd, int64_t off, size_t cap, size_t *got, int *fd_errno,
				    ft_backend_error_t *err);
void ft_be_plain_free(ft_be_xfer_t *x);
void ft_be_plain_cleanup(void);

/*
 * Fills err for a non-2xx response: maps the status (and the provider's error code, e.g.
 * "NoSuchBucket") to a code. bucket_codes: NULL-terminated codes meaning "no such bucket".
 * Returns the code.
 */
ft_backend_err_t ft_be_http_error(ft_be_xfer_t *x, const char *code, const char *message,
				  const char *const *bucket_codes, ft_backend_error_t *err);
/* Fills err with code and a formatted message; returns code. */
ft_backend_err_t ft_be_fail(ft_backend_error_t *err, ft_backend_err_t code, long status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Adds "Range: bytes=a-b" for opts (none for a whole-object read). */
int ft_be_add_range(ft_be_xfer_t *x, const ft_backend_get_opts_t *o);
/* Adds If-Match: "<etag>" for opts->match (none without one); returns 0 or -1. */
int ft_be_add_if_match(ft_be_xfer_t *x, const ft_backend_get_opts_t *o);

/* ---- list pages ---- */

/* Appends an entry (name copied); returns 0 or -1. */
int ft_be_page_add(ft_backend_page_t *p, int *cap, const char *name, size_t name_len);
/* Appends "&name=value" (value percent-encoded) to a query when value is set (neither NULL nor ""). */
void ft_be_query_add(ft_strbuf_t *q, const char *name, const char *value);
/* ft_be_page_add of a delimited listing's common prefix (dir set): 0, -1 when empty (malformed), -2 out of memory. */
int ft_be_page_add_dir(ft_backend_page_t *p, int *cap, const char *name, size_t name_len);

/* ---- providers ---- */

typedef struct {
	/* Completes the config from the environment and defaults, validates it, sets b->priv. */
	ft_backend_err_t (*init)(ft_backend_t *b, ft_backend_error_t *err);
	void (*fini)(ft_backend_t *b);
	/* Builds, signs and starts a GET on x; OK only for a 2xx whose headers filled meta. */
	ft_backend_err_t (*get)(ft_backend_t *b, ft_be_xfer_t *x, const char *name, const ft_backend_get_opts_t *o,
				ft_backend_meta_t *meta, ft_backend_error_t *err);
	ft_backend_err_t (*head)(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err);
	ft_backend_err_t (*put)(ft_backend_t *b, const char *name, const ft_backend_body_t *body,
				ft_backend_meta_t *out, ft_backend_error_t *err);
	ft_backend_err_t (*del)(ft_backend_t *b, const char *name, ft_backend_error_t *err);
	/*
	 * a with every string set ("" = none; token NULL = the first page) and max 1..1000; entries may come out of
	 * byte order (ft_backend_list_page sorts)
	 */
	ft_backend_err_t (*list)(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				 ft_backend_error_t *err);
	/* One page of the account's buckets (b->account set); NULL: the provider has none to list. */
	ft_backend_err_t (*list_buckets)(ft_backend_t *b, const char *token, ft_backend_page_t *out,
					 ft_backend_error_t *err);
} ft_be_ops_t;

struct ft_backend {
	ft_backend_config_t cfg; /* effective configuration */
	const ft_be_ops_t *ops;
	void *priv;  /* provider state, owned by the provider (fini frees it) */
	int account; /* opened for the account (ft_backend_list_buckets): no bucket, no object calls */
};

extern const ft_be_ops_t ft_be_aws_ops;
extern const ft_be_ops_t ft_be_gcp_ops;
extern const ft_be_ops_t ft_be_azure_ops;
extern const ft_be_ops_t ft_be_ht_ops;

/* Copies src into dst (cap bytes) only if dst is empty and src is non-NULL/non-empty; -1 if too long. */
int ft_be_fill(char *dst, size_t cap, const char *src);
/* Like ft_be_fill from getenv(name). */
int ft_be_fill_env(char *dst, size_t cap, const char *name);

/* Drains a non-2xx response body (bounded) into out for error parsing; errors are ignored. */
void ft_be_xfer_error_body(ft_be_xfer_t *x, ft_strbuf_t *out);

#endif
