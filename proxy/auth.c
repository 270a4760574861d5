/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication of the proxy's native API: the endpoint table's verdict, Bearer tokens and SigV4; POST /v1/tokens. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "auth/auth.h"
#include "auth/jwt.h"
#include "auth/policy.h"
#include "base/log.h"
#include "http/util.h"
#include "s3/sigv4.h"

/*
 * DESIGN
 * px_auth_request runs on the loop thread before any native handler: it looks up what the
 * endpoint needs (auth/policy.c), authenticates the caller by a Bearer token (a JWT checked with
 * the cluster's token key) or a SigV4 signature with a key of the identity store, and answers
 * 401 (no or bad credentials) or 403 (role or bucket not allowed) itself. No I/O: HMACs only.
 * With SigV4 the payload hash is not checked against the body here (the native API streams
 * bodies to targets); the signature covers the method, path, query and signed headers.
 */

#define TOKEN_TTL_DEFAULT (24 * 3600)

static void unauthorized(ft_req_t *r, const char *why)
{
	ft_resp_header(r, "WWW-Authenticate", "Bearer realm=\"fasttier\"");
	ft_resp_error(r, 401, "%s", why);
}

static const char *secret_of(void *ctx, const char *access_key)
{
	ft_ident_t id;

	(void)ctx;
	return ft_ident_find(ft_auth()->ids, access_key, &id) == 0 ? id.secret : NULL;
}

/* SigV4 (header or presigned) with the identity store: 0 with *p, -1 with *why. */
static int sigv4(ft_req_t *r, ft_principal_t *p, const char **why)
{
	int n = ft_req_header_count(r);
	ft_sigv4_header_t *hdrs = ft_req_alloc(r, (size_t)(n > 0 ? n : 1) * sizeof(*hdrs));
	const char *sha = ft_req_header(r, "x-amz-content-sha256");
	const char *target = ft_req_target(r), *q = strchr(target, '?');
	size_t plen = q != NULL ? (size_t)(q - target) : strlen(target);
	char *path = ft_req_alloc(r, plen + 1);
	ft_sigv4_auth_t a;
	ft_sigv4_result_t res;
	ft_ident_t id;

	for (int i = 0; i < n; i++)
		ft_req_header_at(r, i, &hdrs[i].name, &hdrs[i].value);
	memcpy(path, target, plen);
	path[plen] = '\0';
	ft_sigv4_request_t req = {
		.method = ft_req_method_name(r),
		.path = path,
		.query = ft_req_query_string(r),
		.headers = hdrs,
		.n_headers = n,
		.payload_hash = sha != NULL ? sha : FT_SIGV4_UNSIGNED,
	};
	res = ft_sigv4_verify(&req, time(NULL), secret_of, NULL, &a);
	if (res != FT_SIGV4_OK || ft_ident_find(ft_auth()->ids, a.access_key, &id) != 0) {
		*why = ft_sigv4_strerror(res != FT_SIGV4_OK ? res : FT_SIGV4_UNKNOWN_KEY);
		return -1;
	}
	ft_ident_principal(&id, p);
	return 0;
}

/* Who sent r: 0 with *p, or -1 with *why. */
static int identify(ft_req_t *r, ft_principal_t *p, const char **why)
{
	const char *authz = ft_req_header(r, "Authorization");
	int rc;

	*why = "authentication required: send Authorization: Bearer <token> (POST /v1/tokens) or sign with SigV4";
	rc = ft_auth_bearer(authz, time(NULL), p, why);
	if (rc == 1 &&
	    ((authz != NULL && strncmp(authz, "AWS4-", 5) == 0) || ft_req_query(r, "X-Amz-Signature") != NULL))
		rc = sigv4(r, p, why);
	if (rc == 0)
		return 0;
	if (authz != NULL && rc == 1)
		*why = "unsupported Authorization scheme (expected Bearer or AWS4-HMAC-SHA256)";
	return -1;
}

/* Who sent r: 0 with *p, or -1 after answering 401. */
static int authenticate(ft_req_t *r, ft_principal_t *p)
{
	const char *why;

	if (identify(r, p, &why) == 0)
		return 0;
	ft_debug("auth: %s %s refused: %s", ft_req_method_name(r), ft_req_path(r, NULL), why);
	unauthorized(r, why);
	return -1;
}

bool px_auth_request(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	const ft_auth_t *a = ft_auth();
	const ft_policy_rule_t *rule;
	ft_principal_t p;
	char bucket[256];
	bool ok;

	(void)px;
	if (!a->enabled)
		return true;
	rule = ft_policy_find(ft_req_method_name(r), path, len);
	if (rule->kind == FT_POLICY_OPEN || rule->kind == FT_POLICY_OWN ||
	    (rule->kind == FT_POLICY_OPEN_IF && a->anonymous_metrics))
		return true;
	ft_policy_bucket(rule, path, len, bucket, sizeof(bucket));
	if (px_acl_anonymous(r) && px_acl_anonymous_ok(r, rule->path, bucket))
		return true; /* public-read data (acl.c) */
	if (authenticate(r, &p) != 0)
		return false;
	ok = ft_principal_allows(&p, rule->role, bucket);
	if (!ok) {
		ft_info("auth: %s %s by %s (%s) refused: needs %s%s%s", ft_req_method_name(r), ft_req_path(r, NULL),
			p.sub, ft_role_name(p.role), ft_role_name(rule->role), bucket[0] ? " on bucket " : "", bucket);
		ft_resp_error(r, 403, "access key %s (role %s) may not %s %s: needs role %s%s%s", p.sub,
			      ft_role_name(p.role), ft_req_method_name(r), ft_req_path(r, NULL),
			      ft_role_name(rule->role), bucket[0] ? " with a grant on bucket " : "", bucket);
	}
	ft_principal_clear(&p);
	return ok;
}

bool px_auth_bucket(ft_req_t *r, ft_role_t need, const char *bucket)
{
	ft_principal_t p;
	const char *why;
	bool ok;

	if (!ft_auth()->enabled)
		return true;
	if (identify(r, &p, &why) != 0) { /* px_auth_request let it in: not expected */
		unauthorized(r, why);
		return false;
	}
	ok = ft_principal_allows(&p, need, bucket);
	if (!ok) {
		ft_info("auth: %s %s by %s (%s) refused: needs %s on bucket %s", ft_req_method_name(r),
			ft_req_path(r, NULL), p.sub, ft_role_name(p.role), ft_role_name(need), bucket);
		ft_resp_error(r, 403, "access key %s (role %s) may not %s %s: needs role %s with a grant on bucket %s",
			      p.sub, ft_role_name(p.role), ft_req_method_name(r), ft_req_path(r, NULL),
			      ft_role_name(need), bucket);
	}
	ft_principal_clear(&p);
	return ok;
}

/* ---- POST /v1/tokens {"access_key", "secret_key", "ttl"?} ---- */

static void token_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	const ft_auth_t *a = ft_auth();
	const char *ak, *sk;
	json_t *msg, *ttl_j;
	ft_principal_t p;
	ft_ident_t id;
	time_t now = time(NULL);
	long long ttl = TOKEN_TTL_DEFAULT;
	char *token;

	(void)arg;
	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	msg = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	ak = json_string_value(json_object_get(msg, "access_key"));
	sk = json_string_value(json_object_get(msg, "secret_key"));
	ttl_j = json_object_get(msg, "ttl");
	if (!json_is_object(msg) || ak == NULL || sk == NULL || (ttl_j != NULL && !json_is_integer(ttl_j))) {
		ft_resp_error(r, 400,
			      "expected a JSON body {\"access_key\": ..., \"secret_key\": ..., \"ttl\": seconds}");
		goto out;
	}
	if (ttl_j != NULL)
		ttl = json_integer_value(ttl_j);
	if (ttl < 1 || ttl > a->token_ttl_max) {
		ft_resp_error(r, 400, "ttl must be 1..%d seconds", a->token_ttl_max);
		goto out;
	}
	if (ft_ident_check(a->ids, ak, sk, &id) != 0) {
		ft_info("auth: token refused: wrong key pair for access key \"%.64s\"", ak);
		unauthorized(r, "wrong access key or secret key");
		goto out;
	}
	ft_ident_principal(&id, &p);
	token = ft_jwt_issue(a->jwt_key, &p, now, now + (time_t)ttl);
	ft_principal_clear(&p);
	if (token == NULL) {
		ft_resp_error(r, 500, "cannot issue a token");
		goto out;
	}
	ft_info("auth: token issued to %s (role %s) for %llds", id.access_key, ft_role_name(id.role), ttl);
	ft_resp_json(r, 200,
		     json_pack("{s:s, s:s, s:s, s:I}", "token", token, "token_type", "Bearer", "role",
			       ft_role_name(id.role), "expires_at", (json_int_t)(now + ttl)));
	free(token);
out:
	json_decref(msg);
}

void px_tokens(px_t *px, ft_req_t *r)
{
	(void)px;
	if (ft_req_method(r) != FT_HTTP_POST) {
		ft_resp_header(r, "Allow", "POST");
		ft_resp_error(r, 405, "method %s not allowed on /v1/tokens (allowed: POST)", ft_req_method_name(r));
		return;
	}
	if (!ft_auth()->have_secret) {
		ft_resp_error(r, 501, "tokens need a cluster secret (cluster_secret) to sign them");
		return;
	}
	ft_req_read_body_all(r, 64 * 1024, token_body, NULL);
}
