/* SPDX-License-Identifier: Apache-2.0 */
/* Object requests at the proxy: 307 redirect to the HRW owner's public URL (loop thread, no network). */
#include "proxy.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "auth/auth.h"
#include "auth/urlsig.h"
#include "base/codec.h"
#include "rpc/client.h"

/* The path-and-query part of a request target (an absolute-form target loses scheme and authority). */
static const char *origin_form(const char *target)
{
	const char *scheme_end = target[0] == '/' ? NULL : strstr(target, "://");
	const char *path;

	if (scheme_end == NULL)
		return target;
	path = strchr(scheme_end + 3, '/');
	return path != NULL ? path : "/";
}

void px_object_redirect(px_t *px, ft_req_t *r, const char *bucket, const char *obj, size_t obj_len)
{
	px_object_redirect_provider(px, r, "ais", bucket, obj, obj_len);
}

void px_object_redirect_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *obj,
				 size_t obj_len)
{
	ft_bmd_t *bmd = ft_bmd_current();
	ft_smap_t *smap = NULL;

	(void)px;
	if (bmd == NULL || ft_bmd_find(bmd, provider, bucket) == NULL) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		goto out;
	}
	smap = ft_smap_current();
	const ft_node_t *owner = smap != NULL ? ft_smap_owner(smap, provider, bucket, obj, obj_len) : NULL;
	if (owner == NULL) {
		ft_resp_error(r, 503, "no targets in the cluster map");
		goto out;
	}
	/* The raw target keeps the client's exact encoding of the path and the query. */
	const char *target = origin_form(ft_req_target(r));
	ft_strbuf_t loc = {0};
	ft_strbuf_addf(&loc, "%s%s", owner->public_url, target);
	/*
	 * Clients drop Authorization on a redirect to another port: the URL carries its own, short-lived.
	 * An anonymous read (public data, acl.c) goes unsigned: its target decides on the object's ACL.
	 */
	char copy[FT_URLSIG_METHOD_MAX];
	const char *method = ft_urlsig_method(ft_req_method_name(r), ft_req_query(r, "obj_to"), copy, sizeof(copy));
	if (method == NULL) { /* px_ais_object_copy checked obj_to: not reached */
		ft_strbuf_free(&loc);
		ft_resp_error(r, 400, "obj_to is too long");
		goto out;
	}
	if (ft_auth()->enabled && !px_acl_anonymous(r))
		ft_urlsig_append(&loc, strchr(target, '?') != NULL, ft_auth()->url_key, method, provider, bucket, obj,
				 obj_len, time(NULL));
	if (loc.failed) {
		ft_strbuf_free(&loc);
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	char *location = ft_req_alloc(r, loc.len + 1);
	memcpy(location, loc.p, loc.len + 1);
	ft_strbuf_free(&loc);
	ft_resp_redirect(r, 307, location);
out:
	ft_smap_put(smap);
	ft_bmd_put(bmd);
}

int px_object_read(const ft_smap_t *smap, const char *provider, const char *bucket, const char *obj, const char *what,
		   long timeout_ms, ft_strbuf_t *body, char *why, size_t cap)
{
	const ft_node_t *owner = smap != NULL ? ft_smap_owner(smap, provider, bucket, obj, strlen(obj)) : NULL;
	ft_strbuf_t url = {0};
	char err[256];
	long status = 0;
	int st = 0;

	if (owner == NULL) {
		snprintf(why, cap, "the cluster map has no targets");
		return 503;
	}
	ft_strbuf_addf(&url, "%s/v1/objects/%s/", owner->public_url, bucket);
	ft_pct_encode_buf(&url, obj, strlen(obj), FT_PCT_KEEP_SLASH);
	ft_strbuf_addf(&url, "?provider=%s", provider);
	if (ft_auth()->enabled)
		ft_urlsig_append(&url, true, ft_auth()->url_key, "GET", provider, bucket, obj, strlen(obj), time(NULL));
	if (url.failed || ft_client_get_bytes(url.p, timeout_ms, &status, body, err, sizeof(err)) != 0) {
		snprintf(why, cap, "%s \"%s\": %s", what, obj, url.failed ? "out of memory" : err);
		st = 502;
	} else if (status != 200) {
		snprintf(why, cap, "%s \"%s\": %s (status %ld)", what, obj,
			 status == 404 ? "no such object in the bucket" : "cannot be read", status);
		st = status == 404 ? 404 : 502;
	}
	ft_strbuf_free(&url);
	return st;
}
