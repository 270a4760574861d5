/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/auth: JWT issue and verification, identity store, roles and the endpoint table, URL and request signatures, replay cache. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <cmocka.h>

#include "auth/auth.h"
#include "auth/identity.h"
#include "auth/jwt.h"
#include "auth/policy.h"
#include "auth/reqsig.h"
#include "auth/seal.h"
#include "auth/urlsig.h"
#include "base/codec.h"

static const uint8_t key[32] = "0123456789abcdef0123456789abcdef";
static const uint8_t key2[32] = "fedcba9876543210fedcba9876543210";

static char *issue(const char *sub, ft_role_t role, json_t *buckets, time_t exp)
{
	ft_principal_t p = {.role = role, .buckets = buckets};

	snprintf(p.sub, sizeof(p.sub), "%s", sub);
	return ft_jwt_issue(key, &p, 1000, exp);
}

static ft_jwt_result_t verify(const char *tok, time_t now, ft_principal_t *p)
{
	return ft_jwt_verify(key, tok, strlen(tok), now, p, NULL);
}

static void test_jwt_round_trip(void **state)
{
	json_t *b = json_pack("[s]", "train");
	char *tok = issue("AK1", FT_ROLE_READWRITE, b, 5000);
	ft_principal_t p;
	time_t exp = 0;

	(void)state;
	assert_non_null(tok);
	assert_int_equal(ft_jwt_verify(key, tok, strlen(tok), 4999, &p, &exp), FT_JWT_OK);
	assert_string_equal(p.sub, "AK1");
	assert_int_equal(p.role, FT_ROLE_READWRITE);
	assert_int_equal(exp, 5000);
	assert_true(ft_principal_allows(&p, FT_ROLE_READWRITE, "train"));
	assert_false(ft_principal_allows(&p, FT_ROLE_READONLY, "other"));
	assert_false(ft_principal_allows(&p, FT_ROLE_ADMIN, "train"));
	ft_principal_clear(&p);
	assert_int_equal(verify(tok, 5000, &p), FT_JWT_EXPIRED);
	assert_int_equal(ft_jwt_verify(key2, tok, strlen(tok), 10, &p, NULL), FT_JWT_SIGNATURE);
	free(tok);
	json_decref(b);
}

/* A token with the header and payload given as JSON text, signed with key (or a bad signature). */
static char *forge(const char *header, const char *payload, bool sign)
{
	char h[512], pl[1024], *out = malloc(2048);
	uint8_t mac[32];
	unsigned int n = 32;
	char sig[64];

	ft_base64url_encode(header, strlen(header), h);
	ft_base64url_encode(payload, strlen(payload), pl);
	snprintf(out, 2048, "%s.%s", h, pl);
	HMAC(EVP_sha256(), key, 32, (const unsigned char *)out, strlen(out), mac, &n);
	if (!sign)
		mac[0] ^= 1;
	ft_base64url_encode(mac, 32, sig);
	strcat(out, ".");
	strcat(out, sig);
	return out;
}

static void test_jwt_rejects(void **state)
{
	static const struct {
		const char *header, *payload;
		bool sign;
		ft_jwt_result_t want;
	} cases[] = {
		{"{\"alg\":\"none\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":9999}", true,
		 FT_JWT_ALG},
		{"{\"alg\":\"HS512\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":9999}", true,
		 FT_JWT_ALG},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":9999}", false,
		 FT_JWT_SIGNATURE},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"other\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":9999}", true,
		 FT_JWT_CLAIMS},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"root\",\"exp\":9999}", true,
		 FT_JWT_CLAIMS},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":\"9999\"}",
		 true, FT_JWT_CLAIMS},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"\",\"role\":\"admin\",\"exp\":9999}", true,
		 FT_JWT_CLAIMS},
		{"{\"alg\":\"HS256\"}",
		 "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":9999,\"buckets\":[1]}", true,
		 FT_JWT_CLAIMS},
		{"{\"alg\":\"HS256\"}", "[1,2]", true, FT_JWT_MALFORMED},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"admin\",\"exp\":5}", true,
		 FT_JWT_EXPIRED},
		{"{\"alg\":\"HS256\"}", "{\"iss\":\"fasttier\",\"sub\":\"a\",\"role\":\"readonly\",\"exp\":9999}", true,
		 FT_JWT_OK},
	};
	ft_principal_t p;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *tok = forge(cases[i].header, cases[i].payload, cases[i].sign);
		ft_jwt_result_t r = verify(tok, 100, &p);
		if (r != cases[i].want)
			fail_msg("case %zu: got %s, want %s", i, ft_jwt_strerror(r), ft_jwt_strerror(cases[i].want));
		ft_principal_clear(&p);
		free(tok);
	}
	const char *bad[] = {"", "a", "a.b", "a.b.c.d", "...", "eyJhbGciOiJIUzI1NiJ9..", "!!.!!.!!"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(verify(bad[i], 100, &p), FT_JWT_OK);
	char *huge = malloc(FT_JWT_MAX + 2);
	memset(huge, 'a', FT_JWT_MAX + 1);
	huge[FT_JWT_MAX + 1] = '\0';
	assert_int_equal(verify(huge, 100, &p), FT_JWT_MALFORMED);
	free(huge);
}

static ft_ident_store_t *store_of(const char *text, char *err, size_t errlen)
{
	json_t *doc = json_loads(text, 0, NULL);

	assert_non_null(doc);
	return ft_ident_from_json(doc, "test", err, errlen);
}

static void test_identity_store(void **state)
{
	char err[256];
	ft_ident_store_t *s = store_of("{\"OLD\": \"old-secret\", \"RO\": {\"secret\": \"s1\", \"role\": \"readonly\"},"
				       " \"B\": {\"secret\": \"s2\", \"role\": \"readwrite\", \"buckets\": [\"b1\"]}}",
				       err, sizeof(err));
	ft_ident_t id;
	ft_principal_t p;

	(void)state;
	assert_non_null(s);
	assert_int_equal(ft_ident_count(s), 3);
	assert_int_equal(ft_ident_find(s, "OLD", &id), 0);
	assert_int_equal(id.role, FT_ROLE_ADMIN); /* the S3 key file of earlier versions */
	assert_string_equal(id.secret, "old-secret");
	assert_int_equal(ft_ident_check(s, "RO", "s1", &id), 0);
	assert_int_equal(id.role, FT_ROLE_READONLY);
	assert_int_equal(ft_ident_check(s, "RO", "s2", &id), -1);
	assert_int_equal(ft_ident_check(s, "RO", "s", &id), -1);
	assert_int_equal(ft_ident_check(s, "NOPE", "s1", &id), -1);
	assert_int_equal(ft_ident_check(s, "B", "s2", &id), 0);
	ft_ident_principal(&id, &p);
	assert_true(ft_principal_allows(&p, FT_ROLE_READWRITE, "b1"));
	assert_false(ft_principal_allows(&p, FT_ROLE_READONLY, "b2"));
	assert_true(ft_principal_allows(&p, FT_ROLE_READONLY, NULL));   /* listing buckets */
	assert_false(ft_principal_allows(&p, FT_ROLE_READWRITE, NULL)); /* bucket-less writes */
	ft_principal_clear(&p);
	ft_ident_free(s);

	const char *bad[] = {
		"[]",
		"{\"A\": 5}",
		"{\"A\": \"\"}",
		"{\"A\": {\"secret\": \"x\", \"role\": \"root\"}}",
		"{\"A\": {\"role\": \"admin\"}}",
		"{\"A\": {\"secret\": \"x\", \"buckets\": \"b\"}}",
		"{\"A\": {\"secret\": \"x\", \"buckets\": [\"../b\"]}}",
		"{\"\": \"x\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = store_of(bad[i], err, sizeof(err));
		if (s != NULL)
			fail_msg("case %zu accepted", i);
		assert_null(strstr(err, "\"x\"")); /* never a secret in a message */
	}
}

static void test_policy_table(void **state)
{
	static const struct {
		const char *method, *path;
		ft_policy_kind_t kind;
		ft_role_t role;
		const char *bucket;
	} cases[] = {
		{"GET", "/v1/health", FT_POLICY_OPEN, FT_ROLE_ANONYMOUS, ""},
		{"POST", "/v1/tokens", FT_POLICY_OPEN, FT_ROLE_ANONYMOUS, ""},
		{"GET", "/v1/tokens", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/objects/b1/x/y", FT_POLICY_ROLE, FT_ROLE_READONLY, "b1"},
		{"PUT", "/v1/objects/b1/x", FT_POLICY_ROLE, FT_ROLE_READWRITE, "b1"},
		{"PATCH", "/v1/objects/b1/x", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/buckets", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/v1/buckets/b2", FT_POLICY_ROLE, FT_ROLE_READONLY, "b2"},
		{"POST", "/v1/buckets/b2", FT_POLICY_ROLE, FT_ROLE_READWRITE, "b2"},
		{"DELETE", "/v1/buckets/b2", FT_POLICY_ROLE, FT_ROLE_ADMIN, "b2"},
		{"GET", "/v1/jobs/j1", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/v1/cluster", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/metrics", FT_POLICY_OPEN_IF, FT_ROLE_READONLY, ""},
		{"GET", "/v1/daemon", FT_POLICY_OPEN_IF, FT_ROLE_READONLY, ""},
		{"POST", "/v1/batch", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/v1/batch", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/ml/moss", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/v1/ml/moss/b3", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"POST", "/v1/ml/moss/b3", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/ml/mossx", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"POST", "/v1/etl", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/etl", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"GET", "/v1/etl/upper", FT_POLICY_ROLE, FT_ROLE_READONLY, ""},
		{"DELETE", "/v1/etl/upper", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/objectsx/b", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/v1/healthz", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
		{"GET", "/", FT_POLICY_ROLE, FT_ROLE_ADMIN, ""},
	};
	char bucket[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const ft_policy_rule_t *r = ft_policy_find(cases[i].method, cases[i].path, strlen(cases[i].path));
		ft_policy_bucket(r, cases[i].path, strlen(cases[i].path), bucket, sizeof(bucket));
		if (r->kind != cases[i].kind || r->role != cases[i].role || strcmp(bucket, cases[i].bucket) != 0)
			fail_msg("case %zu %s %s: kind %d role %s bucket \"%s\"", i, cases[i].method, cases[i].path,
				 r->kind, ft_role_name(r->role), bucket);
	}
}

static const char *query_value(const char *url, const char *name, char *out, size_t cap)
{
	char pat[32];
	const char *p;
	size_t n;

	snprintf(pat, sizeof(pat), "%s=", name);
	p = strstr(url, pat);
	if (p == NULL)
		return NULL;
	p += strlen(pat);
	n = strcspn(p, "&");
	snprintf(out, cap, "%.*s", (int)n, p);
	return out;
}

static void test_urlsig(void **state)
{
	ft_strbuf_t b = {0};
	char exp[32], sig[80];

	(void)state;
	ft_strbuf_addf(&b, "http://t/v1/objects/b/o?provider=ais");
	ft_urlsig_append(&b, true, key, "GET", "ais", "b", "dir/o", 5, 1000);
	assert_false(b.failed);
	assert_non_null(strstr(b.p, "?provider=ais&ft_exp=1120&ft_sig="));
	query_value(b.p, "ft_exp", exp, sizeof(exp));
	query_value(b.p, "ft_sig", sig, sizeof(sig));
	assert_int_equal(ft_urlsig_check(key, exp, sig, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_OK);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "GET", "ais", "b", "dir/o", 5, 1121), FT_URLSIG_EXPIRED);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "PUT", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "GET", "aws", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "GET", "ais", "c", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "GET", "ais", "b", "dir/p", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key2, exp, sig, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, "1121", sig, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, NULL, NULL, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_NONE);
	assert_int_equal(ft_urlsig_check(key, exp, NULL, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, "x", sig, "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, exp, "zz", "GET", "ais", "b", "dir/o", 5, 1000), FT_URLSIG_BAD);
	ft_strbuf_free(&b);
	/* an intra-cluster URL: any method */
	ft_strbuf_addf(&b, "http://t/v1/objects/b/o");
	ft_urlsig_append(&b, false, key, FT_URLSIG_ANY_METHOD, "ais", "b", "o", 1, 1000);
	query_value(b.p, "ft_exp", exp, sizeof(exp));
	query_value(b.p, "ft_sig", sig, sizeof(sig));
	assert_int_equal(ft_urlsig_check(key, exp, sig, "DELETE", "ais", "b", "o", 1, 1000), FT_URLSIG_OK);
	/* ... but not a copy (PUT ?obj_to=): its method names the destination */
	char m[64], m2[64];
	const char *copy = ft_urlsig_method("PUT", "ais/@#/dst/x", m, sizeof(m));
	assert_string_equal(copy, "COPY 12:ais/@#/dst/x");
	assert_string_equal(ft_urlsig_method("GET", "ais/@#/dst/x", m2, sizeof(m2)), "GET");
	assert_string_equal(ft_urlsig_method("PUT", NULL, m2, sizeof(m2)), "PUT");
	assert_null(ft_urlsig_method("PUT", "ais/@#/dst/x", m2, 8));
	assert_int_equal(ft_urlsig_check(key, exp, sig, copy, "ais", "b", "o", 1, 1000), FT_URLSIG_BAD);
	ft_strbuf_free(&b);
	/* a PUT's signature does not authorize a copy; a copy's, that copy only */
	ft_strbuf_addf(&b, "http://t/v1/objects/b/o");
	ft_urlsig_append(&b, false, key, "PUT", "ais", "b", "o", 1, 1000);
	query_value(b.p, "ft_exp", exp, sizeof(exp));
	query_value(b.p, "ft_sig", sig, sizeof(sig));
	assert_int_equal(ft_urlsig_check(key, exp, sig, copy, "ais", "b", "o", 1, 1000), FT_URLSIG_BAD);
	ft_strbuf_free(&b);
	ft_strbuf_addf(&b, "http://t/v1/objects/b/o");
	ft_urlsig_append(&b, false, key, copy, "ais", "b", "o", 1, 1000);
	query_value(b.p, "ft_exp", exp, sizeof(exp));
	query_value(b.p, "ft_sig", sig, sizeof(sig));
	assert_int_equal(ft_urlsig_check(key, exp, sig, copy, "ais", "b", "o", 1, 1000), FT_URLSIG_OK);
	assert_int_equal(ft_urlsig_check(key, exp, sig, "PUT", "ais", "b", "o", 1, 1000), FT_URLSIG_BAD);
	assert_int_equal(ft_urlsig_check(key, exp, sig, ft_urlsig_method("PUT", "ais/@#/evil/x", m2, sizeof(m2)), "ais",
					 "b", "o", 1, 1000),
			 FT_URLSIG_BAD);
	ft_strbuf_free(&b);
}

static void test_reqsig(void **state)
{
	ft_replay_t *cache = ft_replay_new(1024);
	ft_reqsig_t s;
	const char body[] = "{\"id\":\"t1\"}";

	(void)state;
	assert_non_null(cache);
	assert_int_equal(ft_reqsig_sign(key, "POST", "/v1/cluster/join", body, strlen(body), 1000, &s), 0);
	assert_int_equal(strlen(s.nonce), FT_REQSIG_NONCE_HEX);
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1010, cache),
			 FT_REQSIG_OK);
	/* the same request again: a replay */
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1011, cache),
			 FT_REQSIG_REPLAYED);
	/* anything changed: a bad signature */
	assert_int_equal(ft_reqsig_verify(key, "PUT", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1010, NULL),
			 FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join?x", body, strlen(body), s.time, s.nonce, s.sig,
					  1010, NULL),
			 FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body) - 1, s.time, s.nonce,
					  s.sig, 1010, NULL),
			 FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body), "1001", s.nonce, s.sig,
					  1010, NULL),
			 FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key2, "POST", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1010, NULL),
			 FT_REQSIG_BAD);
	/* outside the window, either way */
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1000 + FT_REQSIG_WINDOW + 1, NULL),
			 FT_REQSIG_SKEWED);
	assert_int_equal(ft_reqsig_verify(key, "POST", "/v1/cluster/join", body, strlen(body), s.time, s.nonce, s.sig,
					  1000 - FT_REQSIG_WINDOW - 1, NULL),
			 FT_REQSIG_SKEWED);
	/* missing or malformed headers */
	assert_int_equal(ft_reqsig_verify(key, "GET", "/", NULL, 0, NULL, NULL, NULL, 1000, cache), FT_REQSIG_MISSING);
	assert_int_equal(ft_reqsig_verify(key, "GET", "/", NULL, 0, "1000", NULL, s.sig, 1000, cache), FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key, "GET", "/", NULL, 0, "10x", s.nonce, s.sig, 1000, cache), FT_REQSIG_BAD);
	assert_int_equal(ft_reqsig_verify(key, "GET", "/", NULL, 0, "1000", "abc", s.sig, 1000, cache), FT_REQSIG_BAD);
	ft_replay_free(cache);
}

static void test_replay_cache_fills_and_expires(void **state)
{
	ft_replay_t *cache = ft_replay_new(64);
	ft_reqsig_t s[65];
	int ok = 0, busy = 0;

	(void)state;
	for (int i = 0; i < 65; i++) {
		assert_int_equal(ft_reqsig_sign(key, "GET", "/x", NULL, 0, 1000, &s[i]), 0);
		ft_reqsig_result_t r =
			ft_reqsig_verify(key, "GET", "/x", NULL, 0, s[i].time, s[i].nonce, s[i].sig, 1000, cache);
		ok += r == FT_REQSIG_OK;
		busy += r == FT_REQSIG_BUSY;
	}
	assert_int_equal(ok, 64);
	assert_int_equal(busy, 1); /* full: refused, never admitted unchecked */
	/* once the window has passed the slots are free again */
	ft_reqsig_t late;
	assert_int_equal(ft_reqsig_sign(key, "GET", "/x", NULL, 0, 1000 + 2 * FT_REQSIG_WINDOW + 2, &late), 0);
	assert_int_equal(ft_reqsig_verify(key, "GET", "/x", NULL, 0, late.time, late.nonce, late.sig,
					  1000 + 2 * FT_REQSIG_WINDOW + 2, cache),
			 FT_REQSIG_OK);
	ft_replay_free(cache);
}

static void test_seal(void **state)
{
	char *sealed = ft_seal(key, "aws/b/secret_key", "s3cr3t");
	char *plain, *other;

	(void)state;
	assert_non_null(sealed);
	assert_true(ft_seal_is_sealed(sealed));
	assert_null(strstr(sealed, "s3cr3t"));
	plain = ft_unseal(key, "aws/b/secret_key", sealed);
	assert_non_null(plain);
	assert_string_equal(plain, "s3cr3t");
	free(plain);
	other = ft_seal(key, "aws/b/secret_key", "s3cr3t");
	assert_string_not_equal(other, sealed); /* a fresh IV every time */
	free(other);
	assert_null(ft_unseal(key2, "aws/b/secret_key", sealed));   /* another cluster's key */
	assert_null(ft_unseal(key, "aws/c/secret_key", sealed));    /* moved to another bucket */
	assert_null(ft_unseal(key, "aws/b/session_token", sealed)); /* or field */
	sealed[strlen(FT_SEAL_PREFIX) + 20] ^= 1;
	assert_null(ft_unseal(key, "aws/b/secret_key", sealed)); /* tampered */
	free(sealed);
	assert_null(ft_unseal(key, "aws/b/secret_key", "plain"));
	assert_null(ft_unseal(key, "aws/b/secret_key", "enc:v1:"));
	assert_null(ft_unseal(key, "aws/b/secret_key", "enc:v1:AAAA"));
	assert_null(ft_unseal(key, "aws/b/secret_key", "enc:v1:!!!!"));
	sealed = ft_seal(key, "a", "");
	plain = ft_unseal(key, "a", sealed);
	assert_non_null(plain);
	assert_string_equal(plain, "");
	free(plain);
	free(sealed);
}

static void test_loopback(void **state)
{
	(void)state;
	assert_true(ft_auth_is_loopback("127.0.0.1"));
	assert_true(ft_auth_is_loopback("127.1.2.3"));
	assert_true(ft_auth_is_loopback("::1"));
	assert_true(ft_auth_is_loopback("localhost"));
	assert_false(ft_auth_is_loopback("0.0.0.0"));
	assert_false(ft_auth_is_loopback("::"));
	assert_false(ft_auth_is_loopback("10.0.0.1"));
	assert_false(ft_auth_is_loopback("myhost"));
}

/* A streamed body: signed over its claimed sha256; the same signature as over the body itself. */
static void test_reqsig_hashed(void **state)
{
	const char *body = "FTEC slice bytes";
	char hex[FT_REQSIG_BODY_HEX + 1], other[FT_REQSIG_BODY_HEX + 1];
	ft_reqsig_t s;
	ft_replay_t *cache = ft_replay_new(64);

	(void)state;
	assert_non_null(cache);
	assert_int_equal(ft_reqsig_body_hex(body, strlen(body), hex), 0);
	assert_int_equal(strlen(hex), FT_REQSIG_BODY_HEX);
	assert_int_equal(ft_reqsig_body_hex(body, strlen(body) - 1, other), 0);
	assert_string_not_equal(hex, other);
	assert_int_equal(ft_reqsig_sign_hashed(key, "PUT", "/v1/ec/slice?x=1", hex, 1000, &s), 0);
	/* the whole-body check accepts it: one scheme */
	assert_int_equal(ft_reqsig_verify(key, "PUT", "/v1/ec/slice?x=1", body, strlen(body), s.time, s.nonce, s.sig,
					  1000, NULL),
			 FT_REQSIG_OK);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", other, s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_BAD);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", NULL, s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_BAD);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", "abc", s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_BAD);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "POST", "/v1/ec/slice?x=1", hex, s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_BAD);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", hex, s.time, s.nonce, s.sig, 1100, cache),
		FT_REQSIG_SKEWED);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", hex, s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_OK);
	assert_int_equal(
		ft_reqsig_verify_hashed(key, "PUT", "/v1/ec/slice?x=1", hex, s.time, s.nonce, s.sig, 1000, cache),
		FT_REQSIG_REPLAYED);
	assert_int_equal(ft_reqsig_verify_hashed(key, "PUT", "/", NULL, NULL, NULL, NULL, 1000, cache),
			 FT_REQSIG_MISSING);
	ft_replay_free(cache);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jwt_round_trip), cmocka_unit_test(test_jwt_rejects),
		cmocka_unit_test(test_identity_store), cmocka_unit_test(test_policy_table),
		cmocka_unit_test(test_urlsig),         cmocka_unit_test(test_reqsig),
		cmocka_unit_test(test_reqsig_hashed),  cmocka_unit_test(test_replay_cache_fills_and_expires),
		cmocka_unit_test(test_seal),           cmocka_unit_test(test_loopback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
