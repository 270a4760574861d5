/* SPDX-License-Identifier: Apache-2.0 */
/* S3 request authentication: AWS SigV4 verification of incoming requests, header and presigned forms. */
/*
 * DESIGN
 * - The canonical request and the signing key come from common/auth/sigv4.c, the code that signs
 *   our own requests to backends: what we sign is what we check (S3 canonicalization rules there).
 * - Query parameters are looked up by their decoded names ('+' is a space, as S3 reads a query).
 * - Payload line: x-amz-content-sha256 as sent (header form; else the caller's payload_hash),
 *   UNSIGNED-PAYLOAD for presigned URLs. Any value is accepted here: the caller checks the body.
 * - Time and key checks come before the (costlier) signature check; the signature comparison is
 *   constant-time (CRYPTO_memcmp).
 */
#include "s3/sigv4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "base/codec.h"
#include "base/strbuf.h"

#define MAX_SKEW_SECONDS (15 * 60)
#define MAX_PRESIGN_EXPIRES 604800L

/* ---- query lookups ---- */

/*
 * The query parameters verification reads, found in one pass over the query (each name decoded
 * once): for each, how often it occurs and the raw value of its first occurrence.
 */
enum {
	QP_ALGORITHM = 0,
	QP_CREDENTIAL,
	QP_SIGNATURE,
	QP_DATE,
	QP_EXPIRES,
	QP_SIGNED_HEADERS,
	QP_V2_KEY,
	QP_V2_SIGNATURE,
	QP_COUNT
};

static const char *const qp_names[QP_COUNT] = {
	[QP_ALGORITHM] = "X-Amz-Algorithm", [QP_CREDENTIAL] = "X-Amz-Credential",
	[QP_SIGNATURE] = "X-Amz-Signature", [QP_DATE] = "X-Amz-Date",
	[QP_EXPIRES] = "X-Amz-Expires",     [QP_SIGNED_HEADERS] = "X-Amz-SignedHeaders",
	[QP_V2_KEY] = "AWSAccessKeyId",     [QP_V2_SIGNATURE] = "Signature",
};

typedef struct {
	int count;
	const char *val; /* raw, not decoded; NULL for a piece without '=' */
	size_t val_len;
} qparam_t;

#define QP_NAME_MAX 32 /* longer than any name of qp_names */

static void query_scan(const char *query, qparam_t out[QP_COUNT])
{
	memset(out, 0, QP_COUNT * sizeof(out[0]));
	for (const char *p = query ? query : ""; *p;) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t name_len = eq ? (size_t)(eq - p) : len, i = 0, n = 0;
		char name[QP_NAME_MAX];

		while (i < name_len && n < sizeof(name))
			name[n++] = (char)ft_pct_next(p, name_len, &i, FT_PCT_PLUS_SPACE);
		if (i == name_len) { /* whole name decoded: one of ours? */
			for (int k = 0; k < QP_COUNT; k++) {
				if (strlen(qp_names[k]) != n || memcmp(qp_names[k], name, n) != 0)
					continue;
				if (out[k].count++ == 0 && eq != NULL) {
					out[k].val = eq + 1;
					out[k].val_len = len - name_len - 1;
				}
				break;
			}
		}
		p += len;
		if (*p == '&')
			p++;
	}
}

/* ---- verification ---- */

/* What a request claims about itself, from its Authorization header or its query. */
typedef struct {
	char access_key[128];
	char date8[9];
	char region[64];
	char service[64];
	char scope[128];
	char *signed_headers; /* owned */
	char signature[65];   /* lowercase hex */
	char amz_date[17];
	time_t when;
	long expires; /* presigned only */
	char payload_hash[128];
	int presigned;
} claim_t;

/* "AK/yyyymmdd/region/service/aws4_request" into c (split from the right). */
static int parse_credential(const char *s, size_t n, claim_t *c)
{
	const char *end = s + n, *cut[4];
	int found = 0;
	size_t ak_len, region_len, service_len;

	for (const char *p = end; p > s && found < 4; p--)
		if (p[-1] == '/')
			cut[found++] = p - 1;
	if (found < 4)
		return -1;
	/* cut[3] < cut[2] < cut[1] < cut[0]: AK | date | region | service | terminator */
	ak_len = (size_t)(cut[3] - s);
	region_len = (size_t)(cut[1] - cut[2] - 1);
	service_len = (size_t)(cut[0] - cut[1] - 1);
	if (ak_len == 0 || ak_len >= sizeof(c->access_key) || cut[2] - cut[3] - 1 != 8 || region_len == 0 ||
	    region_len >= sizeof(c->region) || service_len == 0 || service_len >= sizeof(c->service) ||
	    (size_t)(end - cut[0] - 1) != strlen(FT_SIGV4_TERMINATOR) ||
	    memcmp(cut[0] + 1, FT_SIGV4_TERMINATOR, strlen(FT_SIGV4_TERMINATOR)) != 0)
		return -1;
	memcpy(c->access_key, s, ak_len);
	c->access_key[ak_len] = '\0';
	memcpy(c->date8, cut[3] + 1, 8);
	c->date8[8] = '\0';
	for (int i = 0; i < 8; i++)
		if (c->date8[i] < '0' || c->date8[i] > '9')
			return -1;
	memcpy(c->region, cut[2] + 1, region_len);
	c->region[region_len] = '\0';
	memcpy(c->service, cut[1] + 1, service_len);
	c->service[service_len] = '\0';
	if ((size_t)snprintf(c->scope, sizeof(c->scope), "%s/%s/%s/%s", c->date8, c->region, c->service,
			     FT_SIGV4_TERMINATOR) >= sizeof(c->scope))
		return -1;
	return 0;
}

/* Exactly 64 hex digits, stored lowercase. */
int ft_sigv4_parse_signature(const char *s, size_t n, char out[65])
{
	if (n != 64)
		return -1;
	for (size_t i = 0; i < 64; i++) {
		if (ft_hex_digit((unsigned char)s[i]) < 0)
			return -1;
		out[i] = (char)((s[i] >= 'A' && s[i] <= 'F') ? s[i] + 32 : s[i]);
	}
	out[64] = '\0';
	return 0;
}

/* SignedHeaders: non-empty ';'-separated header names, host among them. */
static int set_signed_headers(claim_t *c, const char *s, size_t n)
{
	int has_host = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0, start = 0; i <= n; i++) {
		if (i < n && s[i] != ';') {
			if (!ft_sigv4_is_token_char(s[i]))
				return -1;
			continue;
		}
		if (i == start)
			return -1; /* empty name */
		if (i - start == 4 && strncasecmp(s + start, "host", 4) == 0)
			has_host = 1;
		start = i + 1;
	}
	if (!has_host)
		return -1;
	c->signed_headers = strndup(s, n);
	return c->signed_headers ? 0 : -1;
}

/* Parses "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." into c. */
static ft_sigv4_result_t parse_authorization(const char *v, claim_t *c)
{
	size_t scheme_len;
	int have_cred = 0, have_signed = 0, have_sig = 0;
	const char *p;

	while (ft_sigv4_is_space(*v))
		v++;
	scheme_len = strcspn(v, " \t");
	if (scheme_len == 0)
		return FT_SIGV4_MALFORMED;
	if (scheme_len != strlen(FT_SIGV4_ALGORITHM) || strncmp(v, FT_SIGV4_ALGORITHM, scheme_len) != 0)
		return FT_SIGV4_UNSUPPORTED; /* "AWS AK:sig" (SigV2), SigV4a, Basic, ... */
	for (p = v + scheme_len; *p;) {
		size_t len, key_len, val_len;
		const char *eq, *val;

		while (ft_sigv4_is_space(*p))
			p++;
		len = strcspn(p, ",");
		eq = memchr(p, '=', len);
		if (eq == NULL)
			return FT_SIGV4_MALFORMED;
		key_len = (size_t)(eq - p);
		while (key_len > 0 && ft_sigv4_is_space(p[key_len - 1]))
			key_len--;
		val = eq + 1;
		val_len = len - (size_t)(val - p);
		while (val_len > 0 && ft_sigv4_is_space(*val)) {
			val++;
			val_len--;
		}
		while (val_len > 0 && ft_sigv4_is_space(val[val_len - 1]))
			val_len--;
		if (key_len == 10 && strncmp(p, "Credential", 10) == 0 && !have_cred++) {
			if (parse_credential(val, val_len, c) != 0)
				return FT_SIGV4_MALFORMED;
		} else if (key_len == 13 && strncmp(p, "SignedHeaders", 13) == 0 && !have_signed++) {
			if (set_signed_headers(c, val, val_len) != 0)
				return FT_SIGV4_MALFORMED;
		} else if (key_len == 9 && strncmp(p, "Signature", 9) == 0 && !have_sig++) {
			if (ft_sigv4_parse_signature(val, val_len, c->signature) != 0)
				return FT_SIGV4_MALFORMED;
		} else {
			return FT_SIGV4_MALFORMED; /* unknown or repeated component */
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return have_cred && have_signed && have_sig ? FT_SIGV4_OK : FT_SIGV4_MALFORMED;
}

/* Header form: the claim from Authorization, the date from x-amz-date (or Date). */
static ft_sigv4_result_t claim_from_header(const ft_sigv4_request_t *req, const char *authorization, claim_t *c)
{
	ft_sigv4_result_t r = parse_authorization(authorization, c);
	const char *amz_date = ft_sigv4_header(req, "x-amz-date");
	const char *payload = ft_sigv4_header(req, "x-amz-content-sha256");
	char date[32];

	if (r != FT_SIGV4_OK)
		return r;
	if (amz_date != NULL) {
		if (ft_sigv4_copy_trimmed(amz_date, date, sizeof(date)) != 0 ||
		    ft_date_parse_exact(date, FT_DATE_AMZ, &c->when) != 0)
			return FT_SIGV4_MALFORMED;
	} else {
		const char *http_date = ft_sigv4_header(req, "date");

		if (http_date == NULL || ft_sigv4_copy_trimmed(http_date, date, sizeof(date)) != 0 ||
		    ft_date_parse_exact(date, FT_DATE_HTTP, &c->when) != 0)
			return FT_SIGV4_MALFORMED;
	}
	ft_date_format_amz(c->when, c->amz_date);
	if (payload == NULL)
		payload = req->payload_hash;
	if (payload == NULL || ft_sigv4_copy_trimmed(payload, c->payload_hash, sizeof(c->payload_hash)) != 0 ||
	    c->payload_hash[0] == '\0')
		return FT_SIGV4_MALFORMED;
	return FT_SIGV4_OK;
}

/* One required presigned parameter, exactly once, decoded into val. */
static int query_required(const qparam_t *qp, ft_strbuf_t *val)
{
	if (qp->count != 1)
		return -1;
	ft_strbuf_add(val, "", 0);
	if (qp->val != NULL)
		ft_pct_decode_buf(val, qp->val, qp->val_len, FT_PCT_PLUS_SPACE);
	return !val->failed && val->p != NULL ? 0 : -1;
}

/* Presigned form: everything from the X-Amz-* query parameters (qp, from query_scan). */
static ft_sigv4_result_t claim_from_query(const qparam_t qp[QP_COUNT], claim_t *c)
{
	ft_strbuf_t alg = {0}, cred = {0}, date = {0}, expires = {0}, signed_headers = {0}, sig = {0};
	ft_sigv4_result_t r = FT_SIGV4_MALFORMED;
	char *end = NULL;

	c->presigned = 1;
	if (query_required(&qp[QP_ALGORITHM], &alg) != 0)
		goto out;
	if (strcmp(alg.p, FT_SIGV4_ALGORITHM) != 0) {
		r = FT_SIGV4_UNSUPPORTED;
		goto out;
	}
	if (query_required(&qp[QP_CREDENTIAL], &cred) != 0 || query_required(&qp[QP_DATE], &date) != 0 ||
	    query_required(&qp[QP_EXPIRES], &expires) != 0 ||
	    query_required(&qp[QP_SIGNED_HEADERS], &signed_headers) != 0 ||
	    query_required(&qp[QP_SIGNATURE], &sig) != 0)
		goto out;
	if (parse_credential(cred.p, cred.len, c) != 0 || ft_date_parse_exact(date.p, FT_DATE_AMZ, &c->when) != 0 ||
	    set_signed_headers(c, signed_headers.p, signed_headers.len) != 0 ||
	    ft_sigv4_parse_signature(sig.p, sig.len, c->signature) != 0)
		goto out;
	if (expires.len == 0 || expires.len > 7 || strspn(expires.p, "0123456789") != expires.len)
		goto out;
	c->expires = strtol(expires.p, &end, 10);
	if (c->expires < 1 || c->expires > MAX_PRESIGN_EXPIRES)
		goto out;
	memcpy(c->amz_date, date.p, 17);
	memcpy(c->payload_hash, FT_SIGV4_UNSIGNED, sizeof(FT_SIGV4_UNSIGNED));
	r = FT_SIGV4_OK;
out:
	ft_strbuf_free(&sig);
	ft_strbuf_free(&signed_headers);
	ft_strbuf_free(&expires);
	ft_strbuf_free(&date);
	ft_strbuf_free(&cred);
	ft_strbuf_free(&alg);
	return r;
}

/* Clock checks: header form +-15 min; presigned not dated ahead by more than that, not expired. */
static ft_sigv4_result_t check_time(const claim_t *c, time_t now)
{
	if (c->presigned) {
		if (c->when - now > MAX_SKEW_SECONDS)
			return FT_SIGV4_SKEWED;
		if (now - c->when > c->expires)
			return FT_SIGV4_EXPIRED;
		return FT_SIGV4_OK;
	}
	if (c->when - now > MAX_SKEW_SECONDS || now - c->when > MAX_SKEW_SECONDS)
		return FT_SIGV4_SKEWED;
	return FT_SIGV4_OK;
}

/* Checks a parsed claim against the request: scope date, key, clock, then the signature. */
static ft_sigv4_result_t check_claim(const ft_sigv4_request_t *req, const claim_t *c, time_t now,
				     ft_sigv4_secret_fn secret_fn, void *ctx, ft_sigv4_auth_t *out)
{
	const char *secret;
	uint8_t key[32];
	ft_strbuf_t creq = {0};
	ft_sigv4_hmac_t h = {0};
	char sig[65];
	ft_sigv4_result_t r = FT_SIGV4_MALFORMED;

	if (memcmp(c->date8, c->amz_date, 8) != 0)
		goto out; /* credential scope date is not the request's day */
	secret = secret_fn ? secret_fn(ctx, c->access_key) : NULL;
	if (secret == NULL) {
		r = FT_SIGV4_UNKNOWN_KEY;
		goto out;
	}
	r = check_time(c, now);
	if (r != FT_SIGV4_OK)
		goto out;
	r = FT_SIGV4_MALFORMED; /* internal failures below: refuse, never accept */
	if (ft_sigv4_signing_key(&h, secret, c->date8, c->region, c->service, key) != 0 ||
	    ft_sigv4_canonical_request(&creq, req, c->signed_headers, c->presigned, c->payload_hash) != 0 ||
	    ft_sigv4_request_signature(&h, key, c->amz_date, c->scope, &creq, sig) != 0)
		goto out;
	if (CRYPTO_memcmp(sig, c->signature, 64) != 0) {
		r = FT_SIGV4_MISMATCH;
		goto out;
	}
	if (out != NULL) {
		memcpy(out->access_key, c->access_key, sizeof(out->access_key));
		memcpy(out->amz_date, c->amz_date, sizeof(out->amz_date));
		memcpy(out->scope, c->scope, sizeof(out->scope));
		memcpy(out->signing_key, key, sizeof(out->signing_key));
		memcpy(out->seed_signature, sig, sizeof(out->seed_signature));
	}
	r = FT_SIGV4_OK;
out:
	OPENSSL_cleanse(key, sizeof(key));
	ft_sigv4_hmac_done(&h);
	ft_strbuf_free(&creq);
	return r;
}

ft_sigv4_result_t ft_sigv4_verify(const ft_sigv4_request_t *req, time_t now, ft_sigv4_secret_fn secret, void *ctx,
				  ft_sigv4_auth_t *out)
{
	const char *authorization = ft_sigv4_header(req, "authorization");
	qparam_t qp[QP_COUNT];
	int presigned;
	claim_t claim;
	ft_sigv4_result_t r;

	query_scan(req->query, qp);
	/* any X-Amz-Algorithm/-Credential/-Signature in the query marks a presigned request */
	presigned = qp[QP_ALGORITHM].count != 0 || qp[QP_CREDENTIAL].count != 0 || qp[QP_SIGNATURE].count != 0;
	memset(&claim, 0, sizeof(claim));
	if (out != NULL) {
		memset(out, 0, sizeof(*out));
		out->presigned = presigned && authorization == NULL;
	}
	if (authorization != NULL && presigned)
		return FT_SIGV4_MALFORMED; /* two authentication mechanisms at once */
	if (authorization != NULL)
		r = claim_from_header(req, authorization, &claim);
	else if (presigned)
		r = claim_from_query(qp, &claim);
	else if (qp[QP_V2_KEY].count > 0 && qp[QP_V2_SIGNATURE].count > 0)
		return FT_SIGV4_UNSUPPORTED; /* SigV2 presigned URL */
	else
		return FT_SIGV4_ANONYMOUS;
	if (r == FT_SIGV4_OK)
		r = check_claim(req, &claim, now, secret, ctx, out);
	free(claim.signed_headers);
	return r;
}

/* ---- result names ---- */

static const char *const result_codes[] = {
	[FT_SIGV4_OK] = "",
	[FT_SIGV4_ANONYMOUS] = "AccessDenied",
	[FT_SIGV4_MALFORMED] = "AuthorizationHeaderMalformed",
	[FT_SIGV4_UNKNOWN_KEY] = "InvalidAccessKeyId",
	[FT_SIGV4_MISMATCH] = "SignatureDoesNotMatch",
	[FT_SIGV4_EXPIRED] = "AccessDenied",
	[FT_SIGV4_SKEWED] = "RequestTimeTooSkewed",
	[FT_SIGV4_UNSUPPORTED] = "AccessDenied",
};

static const char *const result_messages[] = {
	[FT_SIGV4_OK] = "ok",
	[FT_SIGV4_ANONYMOUS] = "Access denied: the request is not signed",
	[FT_SIGV4_MALFORMED] = "The authorization header or presigned query parameters are malformed",
	[FT_SIGV4_UNKNOWN_KEY] = "The access key id is not known to this service",
	[FT_SIGV4_MISMATCH] = "The request signature does not match the one computed with the secret key",
	[FT_SIGV4_EXPIRED] = "Request has expired",
	[FT_SIGV4_SKEWED] = "The request time is more than 15 minutes away from the server time",
	[FT_SIGV4_UNSUPPORTED] = "This authorization mechanism is not supported; use AWS4-HMAC-SHA256",
};

const char *ft_sigv4_error_code(ft_sigv4_result_t r)
{
	if ((unsigned)r >= sizeof(result_codes) / sizeof(result_codes[0]))
		return "InternalError";
	return result_codes[r];
}

const char *ft_sigv4_strerror(ft_sigv4_result_t r)
{
	if ((unsigned)r >= sizeof(result_messages) / sizeof(result_messages[0]))
		return "unknown signature verification result";
	return result_messages[r];
}
