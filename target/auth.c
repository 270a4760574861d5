/* SPDX-License-Identifier: Apache-2.0 */
/* Target public-port authorization: a signed redirect URL or a Bearer token, so the target port is no bypass. */
#include "target.h"

#include <string.h>
#include <time.h>

#include "auth/auth.h"
#include "auth/policy.h"
#include "auth/urlsig.h"
#include "base/log.h"

static void unauthorized(ft_req_t *r, const char *why)
{
	ft_resp_header(r, "WWW-Authenticate", "Bearer realm=\"fasttier\"");
	ft_resp_error(r, 401, "%s", why);
}

/* The role the endpoint table gives this method on objects. */
static ft_role_t object_role(ft_req_t *r)
{
	return ft_policy_find(ft_req_method_name(r), "/v1/objects/", strlen("/v1/objects/"))->role;
}

/* GET or HEAD of an object, not a multipart call. */
static bool plain_read(ft_req_t *r)
{
	ft_method_t m = ft_req_method(r);

	return (m == FT_HTTP_GET || m == FT_HTTP_HEAD) && ft_req_query(r, "mpu") == NULL;
}

/*
 * ft_anon=1: the proxy relays an anonymous S3 read (unsigned, whatever auth is): 1 to serve it as
 * public data only, or -1 after answering 401 when public access is off or it is no plain read.
 */
static int marked_anonymous(ft_req_t *r, const char *bucket)
{
	if (ft_auth()->public_read && plain_read(r))
		return 1;
	ft_info("auth: anonymous %s %s from %s refused: public access is off or not a read", ft_req_method_name(r),
		bucket, ft_req_peer(r));
	unauthorized(r, "authentication required: anonymous access is only for GET/HEAD of public-read data");
	return -1;
}

int tgt_auth_object(ft_req_t *r, const char *provider, const char *bucket, const char *obj, size_t obj_len)
{
	const ft_auth_t *a = ft_auth();
	time_t now = time(NULL);
	const char *why = "authentication required: follow the proxy's redirect, or send Authorization: Bearer <token>";
	ft_urlsig_result_t u;
	ft_principal_t p;
	int rc;

	if (ft_req_query(r, "ft_anon") != NULL)
		return marked_anonymous(r, bucket);
	if (!a->enabled)
		return 0;
	char copy[FT_URLSIG_METHOD_MAX];
	const char *method = ft_urlsig_method(ft_req_method_name(r), ft_req_query(r, "obj_to"), copy, sizeof(copy));
	u = ft_urlsig_check(a->url_key, ft_req_query(r, "ft_exp"), ft_req_query(r, "ft_sig"),
			    method != NULL ? method : "COPY -", /* an obj_to too long: no proxy signs one */
			    provider, bucket, obj, obj_len, now);
	if (u == FT_URLSIG_OK)
		return 0;
	if (u == FT_URLSIG_NONE && ft_req_header(r, "Authorization") == NULL && a->public_read && plain_read(r))
		return 1; /* anonymous: public-read data only (obj/acl.c decides) */
	if (u != FT_URLSIG_NONE)
		why = u == FT_URLSIG_EXPIRED ? "the signed URL expired: ask the proxy again"
					     : "the signed URL does not match this request";
	rc = ft_auth_bearer(ft_req_header(r, "Authorization"), now, &p, &why);
	if (rc != 0) {
		ft_info("auth: %s %s from %s refused: %s", ft_req_method_name(r), bucket, ft_req_peer(r), why);
		unauthorized(r, why);
		return -1;
	}
	rc = ft_principal_allows(&p, object_role(r), bucket) ? 0 : -1;
	if (rc != 0)
		ft_resp_error(r, 403, "access key %s (role %s) may not %s objects of bucket %s", p.sub,
			      ft_role_name(p.role), ft_req_method_name(r), bucket);
	ft_principal_clear(&p);
	return rc;
}

int tgt_auth_endpoint(ft_req_t *r, const char *path, size_t len)
{
	const ft_auth_t *a = ft_auth();
	const ft_policy_rule_t *rule;
	const char *why = "authentication required: send Authorization: Bearer <token>";
	ft_principal_t p;
	int rc;

	if (!a->enabled)
		return 0;
	rule = ft_policy_find(ft_req_method_name(r), path, len);
	if (rule->kind == FT_POLICY_OPEN || (rule->kind == FT_POLICY_OPEN_IF && a->anonymous_metrics))
		return 0;
	if (ft_auth_bearer(ft_req_header(r, "Authorization"), time(NULL), &p, &why) != 0) {
		ft_info("auth: %s %.*s from %s refused: %s", ft_req_method_name(r), (int)len, path, ft_req_peer(r),
			why);
		unauthorized(r, why);
		return -1;
	}
	rc = p.buckets == NULL && ft_principal_allows(&p, rule->role, NULL) ? 0 : -1;
	if (rc != 0)
		ft_resp_error(r, 403, "access key %s (role %s) may not %s %.*s: needs role %s on every bucket", p.sub,
			      ft_role_name(p.role), ft_req_method_name(r), (int)len, path, ft_role_name(rule->role));
	ft_principal_clear(&p);
	return rc;
}

int tgt_auth_write_bucket(ft_req_t *r, const char *bucket)
{
	const char *why = "";
	ft_principal_t p;
	int rc;

	if (!ft_auth()->enabled || ft_req_query(r, "ft_sig") != NULL)
		return 0; /* a signed URL: the proxy checked the caller's role on it */
	if (ft_auth_bearer(ft_req_header(r, "Authorization"), time(NULL), &p, &why) != 0) {
		unauthorized(r, why);
		return -1;
	}
	rc = ft_principal_allows(&p, FT_ROLE_READWRITE, bucket) ? 0 : -1;
	if (rc != 0)
		ft_resp_error(r, 403, "access key %s (role %s) may not write to bucket %s", p.sub, ft_role_name(p.role),
			      bucket);
	ft_principal_clear(&p);
	return rc;
}

char *tgt_auth_sign_redirect(ft_req_t *r, const tgt_obj_t *o, char *loc)
{
	const ft_auth_t *a = ft_auth();
	ft_strbuf_t b = {0};
	char *out;

	if (!a->enabled || o->anonymous || ft_req_query(r, "ft_sig") != NULL)
		return loc; /* an anonymous read is passed on as it came: unsigned */
	ft_strbuf_addf(&b, "%s", loc);
	ft_urlsig_append(&b, strchr(loc, '?') != NULL, a->url_key, ft_req_method_name(r), o->provider, o->bucket,
			 o->obj, o->obj_len, time(NULL));
	if (b.failed) {
		ft_strbuf_free(&b);
		return loc;
	}
	out = ft_req_alloc(r, b.len + 1);
	memcpy(out, b.p, b.len + 1);
	ft_strbuf_free(&b);
	return out;
}
