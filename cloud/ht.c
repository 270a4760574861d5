/* SPDX-License-Identifier: Apache-2.0 */
/* Backend provider ht: any HTTP(S) origin, objects addressed as <URL prefix><name>; read-only. */
#include "cloud/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/redact.h"

/*
 * DESIGN
 * The bucket's endpoint is a URL prefix; an object's URL is the prefix, a '/', and the name with
 * each path segment percent-encoded. Only GET (with Range) and HEAD exist; an origin that ignores
 * Range is handled by the reader (it skips and cuts). Redirects are not followed: a 3xx is
 * reported as a refused request naming the Location, so a moved origin is visible in logs; its
 * query values are left out (a redirect to a presigned URL carries the signature there).
 * An ETag is used for revalidation as is; it is never taken for an MD5.
 * GETs from an http:// origin run on the transfer engine's own sockets (plain.c), not libcurl.
 */

typedef struct {
	ft_be_endpoint_t ep;
} ht_t;

static ft_backend_err_t ht_init(ft_backend_t *b, ft_backend_error_t *err)
{
	ht_t *h;

	if (b->cfg.endpoint[0] == '\0')
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "ht: endpoint (the origin URL prefix) is required");
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "ht: out of memory");
	if (ft_be_endpoint_parse(b->cfg.endpoint, &h->ep) != 0) {
		free(h);
		char shown[FT_REDACT_URL_MAX];
		return ft_be_fail(err, FT_BACKEND_ECONFIG, 0, "ht: bad endpoint \"%s\"",
				  ft_redact_url(b->cfg.endpoint, shown, sizeof(shown)));
	}
	b->priv = h;
	return FT_BACKEND_OK;
}

static void ht_fini(ft_backend_t *b)
{
	free(b->priv);
	b->priv = NULL;
}

static int request(ft_backend_t *b, ft_be_xfer_t *x, const char *method, const char *name)
{
	const ht_t *h = b->priv;
	ft_strbuf_t path = {0};
	int rc;

	ft_strbuf_adds(&path, h->ep.path);
	ft_strbuf_adds(&path, "/");
	ft_pct_encode_buf(&path, name, strlen(name), FT_PCT_KEEP_SLASH);
	rc = path.failed ? -1 : ft_be_xfer_set(x, method, &h->ep, path.p, NULL);
	ft_strbuf_free(&path);
	return rc;
}

static ft_backend_err_t run(ft_be_xfer_t *x, ft_backend_error_t *err)
{
	ft_backend_err_t rc = ft_be_xfer_start(x, err);
	ft_strbuf_t body = {0};
	const char *location;
	char shown[FT_REDACT_URL_MAX];

	if (rc != FT_BACKEND_OK || (x->status >= 200 && x->status <= 299))
		return rc;
	location = ft_be_xfer_resp_header(x, "Location");
	ft_be_xfer_error_body(x, &body);
	ft_strbuf_free(&body);
	if (x->status >= 300 && x->status <= 399)
		return ft_be_fail(err, FT_BACKEND_EREQUEST, x->status, "ht %s %s: %ld redirect to %s not followed",
				  x->op, x->what, x->status,
				  location != NULL ? ft_redact_url(location, shown, sizeof(shown)) : "(no Location)");
	return ft_be_http_error(x, NULL, NULL, NULL, err);
}

static void meta_from_headers(const ft_be_xfer_t *x, ft_backend_meta_t *m)
{
	if (x->status != 206)
		m->size = ft_be_xfer_content_length(x);
	m->mtime_ns = ft_be_parse_http_date(ft_be_xfer_resp_header(x, "Last-Modified"));
	ft_be_copy_etag(m->etag, sizeof(m->etag), ft_be_xfer_resp_header(x, "ETag"));
}

static ft_backend_err_t ht_get(ft_backend_t *b, ft_be_xfer_t *x, const char *name, const ft_backend_get_opts_t *o,
			       ft_backend_meta_t *meta, ft_backend_error_t *err)
{
	ft_backend_err_t rc;

	if (request(b, x, "GET", name) != 0 || ft_be_add_range(x, o) != 0 || ft_be_add_if_match(x, o) != 0)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "ht GET %s: cannot build the request", name);
	x->plain_ok = 1; /* an http:// origin's body goes straight into the reader's buffer (plain.c) */
	rc = run(x, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, meta);
	return rc;
}

static ft_backend_err_t ht_head(ft_backend_t *b, const char *name, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_be_xfer_t *x = ft_be_xfer_new(b, "HEAD", name);
	ft_strbuf_t sink = {0};
	ft_backend_err_t rc;

	if (x == NULL)
		return ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "ht HEAD %s: out of memory", name);
	if (request(b, x, "HEAD", name) != 0)
		rc = ft_be_fail(err, FT_BACKEND_ENOMEM, 0, "ht HEAD %s: cannot build the request", name);
	else
		rc = run(x, err);
	if (rc == FT_BACKEND_OK)
		rc = ft_be_xfer_collect(x, 0, &sink, err);
	if (rc == FT_BACKEND_OK)
		meta_from_headers(x, out);
	ft_strbuf_free(&sink);
	ft_be_xfer_free(x);
	return rc;
}

static ft_backend_err_t ht_put(ft_backend_t *b, const char *name, const ft_backend_body_t *body, ft_backend_meta_t *out,
			       ft_backend_error_t *err)
{
	(void)b;
	(void)body;
	(void)out;
	return ft_be_fail(err, FT_BACKEND_ENOTSUP, 0, "ht PUT %s: an HTTP origin is read-only", name);
}

static ft_backend_err_t ht_del(ft_backend_t *b, const char *name, ft_backend_error_t *err)
{
	(void)b;
	return ft_be_fail(err, FT_BACKEND_ENOTSUP, 0, "ht DELETE %s: an HTTP origin is read-only", name);
}

static ft_backend_err_t ht_list(ft_backend_t *b, const ft_backend_list_args_t *a, ft_backend_page_t *out,
				ft_backend_error_t *err)
{
	(void)a;
	(void)out;
	char shown[FT_REDACT_URL_MAX];

	return ft_be_fail(err, FT_BACKEND_ENOTSUP, 0, "ht LIST %s: an HTTP origin cannot be listed",
			  ft_redact_url(b->cfg.endpoint, shown, sizeof(shown)));
}

const ft_be_ops_t ft_be_ht_ops = {
	.init = ht_init,
	.fini = ht_fini,
	.get = ht_get,
	.head = ht_head,
	.put = ht_put,
	.del = ht_del,
	.list = ht_list,
};
