/* SPDX-License-Identifier: Apache-2.0 */
/* JWT (HS256) issue and verification: base64url parts, HMAC-SHA256 over "header.payload", strict claims. */
#include "auth/jwt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/codec.h"
#include "base/strbuf.h"

/*
 * DESIGN
 * The verifier trusts nothing before the signature checks out: it splits on the two dots, checks
 * the header's alg is exactly HS256 (so "none" and algorithm confusion are refused), recomputes the
 * HMAC over the first two parts as received and compares in constant time, and only then parses
 * the claims. Claims: iss "fasttier", sub (access key), role, exp, iat, and optional buckets.
 */

#define SIG_LEN 32
#define PART_MAX (FT_JWT_MAX * 3 / 4 + 4)

static const char header_b64[] = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"; /* {"alg":"HS256","typ":"JWT"} */

static const char *const messages[] = {
	[FT_JWT_OK] = "ok",
	[FT_JWT_MALFORMED] = "malformed token",
	[FT_JWT_ALG] = "token algorithm must be HS256",
	[FT_JWT_SIGNATURE] = "token signature does not match",
	[FT_JWT_EXPIRED] = "token expired",
	[FT_JWT_CLAIMS] = "token claims are missing or invalid",
};

const char *ft_jwt_strerror(ft_jwt_result_t r)
{
	return r >= FT_JWT_OK && r <= FT_JWT_CLAIMS ? messages[r] : "?";
}

static int mac(const uint8_t key[FT_JWT_KEY_LEN], const char *msg, size_t len, uint8_t out[SIG_LEN])
{
	unsigned int n = SIG_LEN;

	return HMAC(EVP_sha256(), key, FT_JWT_KEY_LEN, (const unsigned char *)msg, len, out, &n) != NULL && n == SIG_LEN
		       ? 0
		       : -1;
}

static void add_b64url(ft_strbuf_t *b, const void *in, size_t n)
{
	char *out = malloc(FT_BASE64_LEN(n) + 1);

	if (out == NULL) {
		b->failed = true;
		return;
	}
	ft_strbuf_add(b, out, ft_base64url_encode(in, n, out));
	free(out);
}

char *ft_jwt_issue(const uint8_t key[FT_JWT_KEY_LEN], const ft_principal_t *p, time_t iat, time_t exp)
{
	json_t *claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", FT_JWT_ISSUER, "sub", p->sub, "role",
				   ft_role_name(p->role), "iat", (json_int_t)iat, "exp", (json_int_t)exp);
	ft_strbuf_t b = {0};
	uint8_t sig[SIG_LEN];
	char *text = NULL;

	if (claims == NULL)
		return NULL;
	if (p->buckets != NULL && json_object_set(claims, "buckets", p->buckets) != 0)
		goto out;
	text = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
	if (text == NULL)
		goto out;
	ft_strbuf_addf(&b, "%s.", header_b64);
	add_b64url(&b, text, strlen(text));
	if (b.failed || mac(key, b.p, b.len, sig) != 0)
		goto out;
	ft_strbuf_add(&b, ".", 1);
	add_b64url(&b, sig, sizeof(sig));
out:
	free(text);
	json_decref(claims);
	if (b.failed || b.p == NULL || strchr(b.p, '.') == strrchr(b.p, '.')) {
		ft_strbuf_free(&b);
		return NULL;
	}
	return b.p;
}

/* Decodes one base64url part as a JSON object (new reference), or NULL. */
static json_t *decode_json(const char *s, size_t n)
{
	char *buf;
	long len;
	json_t *j;

	if (n == 0 || n > FT_JWT_MAX)
		return NULL;
	buf = malloc(PART_MAX);
	if (buf == NULL)
		return NULL;
	len = ft_base64url_decode(s, n, buf, PART_MAX);
	j = len > 0 ? json_loadb(buf, (size_t)len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	free(buf);
	if (j != NULL && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

static ft_jwt_result_t check_header(const char *s, size_t n)
{
	json_t *h = decode_json(s, n);
	const char *alg = h != NULL ? json_string_value(json_object_get(h, "alg")) : NULL;
	ft_jwt_result_t r = h == NULL ? FT_JWT_MALFORMED : FT_JWT_OK;

	if (r == FT_JWT_OK && (alg == NULL || strcmp(alg, "HS256") != 0))
		r = FT_JWT_ALG;
	json_decref(h);
	return r;
}

static bool buckets_ok(const json_t *b)
{
	size_t i;
	json_t *v;

	if (!json_is_array(b) || json_array_size(b) > 1024)
		return false;
	json_array_foreach(b, i, v) {
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 255)
			return false;
	}
	return true;
}

static ft_jwt_result_t read_claims(json_t *c, time_t now, ft_principal_t *p, time_t *exp)
{
	const char *iss = json_string_value(json_object_get(c, "iss"));
	const char *sub = json_string_value(json_object_get(c, "sub"));
	const char *role = json_string_value(json_object_get(c, "role"));
	json_t *e = json_object_get(c, "exp");
	json_t *b = json_object_get(c, "buckets");

	if (iss == NULL || strcmp(iss, FT_JWT_ISSUER) != 0 || sub == NULL || sub[0] == '\0' ||
	    strlen(sub) >= sizeof(p->sub) || role == NULL || ft_role_parse(role, &p->role) != 0 ||
	    !json_is_integer(e) || (b != NULL && !buckets_ok(b)))
		return FT_JWT_CLAIMS;
	if (json_integer_value(e) <= (json_int_t)now)
		return FT_JWT_EXPIRED;
	snprintf(p->sub, sizeof(p->sub), "%s", sub);
	p->buckets = b != NULL ? json_incref(b) : NULL;
	if (exp != NULL)
		*exp = (time_t)json_integer_value(e);
	return FT_JWT_OK;
}

ft_jwt_result_t ft_jwt_verify(const uint8_t key[FT_JWT_KEY_LEN], const char *token, size_t len, time_t now,
			      ft_principal_t *p, time_t *exp)
{
	const char *dot1, *dot2, *end = token + len;
	uint8_t want[SIG_LEN], got[SIG_LEN + 3];
	ft_jwt_result_t r;
	json_t *claims;

	memset(p, 0, sizeof(*p));
	if (len == 0 || len > FT_JWT_MAX)
		return FT_JWT_MALFORMED;
	dot1 = memchr(token, '.', len);
	dot2 = dot1 != NULL ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
	if (dot2 == NULL || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)) != NULL)
		return FT_JWT_MALFORMED;
	r = check_header(token, (size_t)(dot1 - token));
	if (r != FT_JWT_OK)
		return r;
	if (ft_base64url_decode(dot2 + 1, (size_t)(end - dot2 - 1), got, sizeof(got)) != SIG_LEN)
		return FT_JWT_SIGNATURE;
	if (mac(key, token, (size_t)(dot2 - token), want) != 0 || CRYPTO_memcmp(want, got, SIG_LEN) != 0)
		return FT_JWT_SIGNATURE;
	claims = decode_json(dot1 + 1, (size_t)(dot2 - dot1 - 1));
	if (claims == NULL)
		return FT_JWT_MALFORMED;
	r = read_claims(claims, now, p, exp);
	json_decref(claims);
	return r;
}
