/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for SigV4 signing, verification and aws-chunked: AWS vectors, S3 examples, presigned, tampering, botocore. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <cmocka.h>

#include "auth/sigv4.h"
#include "base/codec.h"
#include "base/xsum.h"
#include "s3/chunked.h"
#include "s3/sigv4.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_HEADERS 24

/* ---- keys ---- */

/* The AWS test suite's and the S3 documentation's example credentials, plus a second S3 key. */
static const char *const known_keys[][2] = {
	{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"},
	{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	{"AKIAOTHERKEY0EXAMPLE", "another/secret/key+for/tests/0000000000"},
};

static const char *lookup_secret(void *ctx, const char *access_key)
{
	(void)ctx;
	for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++)
		if (strcmp(known_keys[i][0], access_key) == 0)
			return known_keys[i][1];
	return NULL;
}

static time_t at(const char *amz_date)
{
	struct tm tm = {0};

	assert_int_equal(sscanf(amz_date, "%4d%2d%2dT%2d%2d%2dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
				&tm.tm_min, &tm.tm_sec),
			 6);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm);
}

/* ---- a mutable request for building variants ---- */

typedef struct {
	ft_sigv4_request_t r;
	ft_sigv4_header_t h[MAX_HEADERS];
} treq_t;

static void treq_init(treq_t *t, const char *method, const char *path, const char *query, const char *payload_hash)
{
	memset(t, 0, sizeof(*t));
	t->r.method = method;
	t->r.path = path;
	t->r.query = query;
	t->r.headers = t->h;
	t->r.payload_hash = payload_hash;
}

static void add_header(treq_t *t, const char *name, const char *value)
{
	assert_true(t->r.n_headers < MAX_HEADERS);
	t->h[t->r.n_headers].name = name;
	t->h[t->r.n_headers].value = value;
	t->r.n_headers++;
}

/* Replaces the value of the first header called name (any case), or adds it. */
static void set_header(treq_t *t, const char *name, const char *value)
{
	for (int i = 0; i < t->r.n_headers; i++) {
		if (strcasecmp(t->h[i].name, name) == 0) {
			t->h[i].value = value;
			return;
		}
	}
	add_header(t, name, value);
}

static void del_header(treq_t *t, const char *name)
{
	int n = 0;

	for (int i = 0; i < t->r.n_headers; i++)
		if (strcasecmp(t->h[i].name, name) != 0)
			t->h[n++] = t->h[i];
	t->r.n_headers = n;
}

static ft_sigv4_result_t verify_at(const treq_t *t, time_t now, ft_sigv4_auth_t *auth)
{
	return ft_sigv4_verify(&t->r, now, lookup_secret, NULL, auth);
}

#define assert_verify(t, now, expected)                                                                    \
	do {                                                                                               \
		ft_sigv4_result_t got_ = verify_at((t), (now), NULL);                                      \
		if (got_ != (expected))                                                                    \
			fail_msg("%s:%d: verify gave %d (%s), expected %d", __FILE__, __LINE__, (int)got_, \
				 ft_sigv4_strerror(got_), (int)(expected));                                \
	} while (0)

/* ---- AWS SigV4 test suite (service "service", us-east-1, 20150830T123600Z) ---- */
/*
 * The "aws-sig-v4-test-suite" cases (as kept in aws-c-auth's tests/aws-signing-test-suite/v4): the
 * request as signed (headers in wire order, the obs-folded line of get-header-value-multiline
 * joined with spaces), the payload hash of its canonical request and the published Authorization.
 * s3_rule is 0 for the "-normalized" cases: those expect dot segments and slash runs removed,
 * which S3 does not do, so under S3 rules their published signature must NOT verify.
 */
typedef struct {
	const char *name;
	int s3_rule;
	const char *method, *path, *query;
	const char *headers[12][2];
	const char *payload_hash;
	const char *authorization;
} suite_case_t;

#define UNRESERVED "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/* post-sts-header-*: the session token of the suite. */
#define STS_TOKEN                                                                                              \
	"AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRq" \
	"TflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75Y" \
	"U9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9K" \
	"SYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="

#define SUITE_AUTH(signed_headers, signature)                                               \
	"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " \
	"SignedHeaders=" signed_headers ", Signature=" signature

static const suite_case_t suite[] = {
	{"get-header-key-duplicate",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", "value2"},
		 {"My-Header1", "value2"},
		 {"My-Header1", "value1"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea")},
	{"get-header-value-multiline",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", "value1   value2      value3"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;x-amz-date", "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd")},
	{"get-header-value-order",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", "value4"},
		 {"My-Header1", "value1"},
		 {"My-Header1", "value3"},
		 {"My-Header1", "value2"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;x-amz-date", "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01")},
	{"get-header-value-trim",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", " value1"},
		 {"My-Header2", " \"a   b   c\""},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;my-header2;x-amz-date",
		    "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736")},
	{"get-relative-normalized",
	 0,
	 "GET",
	 "/example/..",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-relative-relative-normalized",
	 0,
	 "GET",
	 "/example1/example2/../..",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-relative-relative-unnormalized",
	 1,
	 "GET",
	 "/example1/example2/../..",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b")},
	{"get-relative-unnormalized",
	 1,
	 "GET",
	 "/example/..",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "eca7ead57bb5aa5c8e28007acd4ff04e1ff9a0ff3b237ec1554a184887ff9282")},
	{"get-slash-dot-slash-normalized",
	 0,
	 "GET",
	 "/./",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-slash-dot-slash-unnormalized",
	 1,
	 "GET",
	 "/./",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "68714168e6557f8f2de0ef956fc24dc2593a4bd2961f8df51898d8a134695145")},
	{"get-slash-normalized",
	 0,
	 "GET",
	 "//",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-slash-pointless-dot-normalized",
	 0,
	 "GET",
	 "/./example",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5")},
	{"get-slash-pointless-dot-unnormalized",
	 1,
	 "GET",
	 "/./example",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "beb03f223f7deae4146464f06e29eebbee9c8afbe15c290cf07aa8b119e14cff")},
	{"get-slash-unnormalized",
	 1,
	 "GET",
	 "//",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "c88bcd3d312d75078c0cd961d6deae3f4c754924b01669efcfcb439fd5e5b76e")},
	{"get-slashes-normalized",
	 0,
	 "GET",
	 "//example//",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84")},
	{"get-slashes-unnormalized",
	 1,
	 "GET",
	 "//example//",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5")},
	{"get-space-normalized",
	 1,
	 "GET",
	 "/example space/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741")},
	{"get-space-unnormalized",
	 1,
	 "GET",
	 "/example space/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741")},
	{"get-unreserved",
	 1,
	 "GET",
	 "/" UNRESERVED,
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f")},
	{"get-utf8",
	 1,
	 "GET",
	 "/\xe1"
	 "\x88"
	 "\xb4"
	 "",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85")},
	{"get-vanilla",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-vanilla-empty-query-key",
	 1,
	 "GET",
	 "/",
	 "Param1=value1",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb")},
	{"get-vanilla-query",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")},
	{"get-vanilla-query-order-encoded",
	 1,
	 "GET",
	 "/",
	 "Param-3=Value3&Param=Value2&%E1%88%B4=Value1",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac")},
	{"get-vanilla-query-order-key-case",
	 1,
	 "GET",
	 "/",
	 "Param2=value2&Param1=value1",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")},
	{"get-vanilla-query-unreserved",
	 1,
	 "GET",
	 "/",
	 UNRESERVED "=" UNRESERVED,
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197")},
	{"get-vanilla-utf8-query",
	 1,
	 "GET",
	 "/",
	 "\xe1"
	 "\x88"
	 "\xb4"
	 "=bar",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04")},
	{"get-vanilla-with-session-token",
	 1,
	 "GET",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date;x-amz-security-token",
		    "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8")},
	{"post-header-key-case",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b")},
	{"post-header-key-sort",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", "value1"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;x-amz-date", "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c")},
	{"post-header-value-case",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"My-Header1", "VALUE1"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;my-header1;x-amz-date", "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d")},
	{"post-sts-header-after",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Security-Token", STS_TOKEN},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b")},
	{"post-sts-header-before",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Security-Token", STS_TOKEN},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date;x-amz-security-token",
		    "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead")},
	{"post-vanilla",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b")},
	{"post-vanilla-empty-query-value",
	 1,
	 "POST",
	 "/",
	 "Param1=value1",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11")},
	{"post-vanilla-query",
	 1,
	 "POST",
	 "/",
	 "Param1=value1",
	 {
		 {"Host", "example.amazonaws.com"},
		 {"X-Amz-Date", "20150830T123600Z"},
	 },
	 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	 SUITE_AUTH("host;x-amz-date", "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11")},
	{"post-x-www-form-urlencoded",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Content-Type", "application/x-www-form-urlencoded"},
		 {"Host", "example.amazonaws.com"},
		 {"Content-Length", "13"},
		 {"X-Amz-Date", "20150830T123600Z"},
		 {"x-amz-content-sha256", "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"},
	 },
	 "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
	 SUITE_AUTH("content-length;content-type;host;x-amz-content-sha256;x-amz-date",
		    "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b")},
	{"post-x-www-form-urlencoded-parameters",
	 1,
	 "POST",
	 "/",
	 "",
	 {
		 {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
		 {"Host", "example.amazonaws.com"},
		 {"Content-Length", "13"},
		 {"X-Amz-Date", "20150830T123600Z"},
		 {"x-amz-content-sha256", "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"},
	 },
	 "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
	 SUITE_AUTH("content-length;content-type;host;x-amz-content-sha256;x-amz-date",
		    "328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422")},
};

#define SUITE_DATE "20150830T123600Z"

static void suite_request(const suite_case_t *c, treq_t *t, int with_authorization)
{
	treq_init(t, c->method, c->path, c->query, c->payload_hash);
	for (int i = 0; i < 12 && c->headers[i][0] != NULL; i++)
		add_header(t, c->headers[i][0], c->headers[i][1]);
	if (with_authorization)
		add_header(t, "Authorization", c->authorization);
}

/* The signed-header list of a published Authorization value. */
static void signed_list(const char *authorization, char *out, size_t cap)
{
	const char *p = strstr(authorization, "SignedHeaders=");
	size_t n;

	assert_non_null(p);
	p += strlen("SignedHeaders=");
	n = strcspn(p, ",");
	assert_true(n < cap);
	memcpy(out, p, n);
	out[n] = '\0';
}

static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p;) {
		size_t len = strcspn(p, ";");

		if (len == n && strncasecmp(p, name, n) == 0)
			return 1;
		p += len + (p[len] == ';');
	}
	return 0;
}

static void test_suite_sign(void **state)
{
	int checked = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++) {
		const suite_case_t *c = &suite[i];
		char list[256], auth[512];
		treq_t t;

		/* Sign with exactly the headers the suite signed (post-sts-header-after adds one later). */
		signed_list(c->authorization, list, sizeof(list));
		treq_init(&t, c->method, c->path, c->query, c->payload_hash);
		for (int k = 0; k < 12 && c->headers[k][0] != NULL; k++)
			if (in_list(list, c->headers[k][0]))
				add_header(&t, c->headers[k][0], c->headers[k][1]);
		assert_int_equal(ft_sigv4_sign(&t.r, "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
					       "us-east-1", "service", SUITE_DATE, auth, sizeof(auth)),
				 0);
		if (c->s3_rule && strcmp(auth, c->authorization) != 0)
			fail_msg("%s: signed\n  %s\nexpected\n  %s", c->name, auth, c->authorization);
		if (!c->s3_rule && strcmp(auth, c->authorization) == 0)
			fail_msg("%s: a normalized path was signed as if S3 normalized it", c->name);
		checked += c->s3_rule;
	}
	assert_int_equal(checked, 32);
}

static void test_suite_verify(void **state)
{
	const time_t now = at(SUITE_DATE);
	int checked = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++) {
		const suite_case_t *c = &suite[i];
		ft_sigv4_auth_t auth;
		ft_sigv4_result_t r;
		treq_t t;

		suite_request(c, &t, 1);
		r = verify_at(&t, now, &auth);
		if (!c->s3_rule) {
			if (r != FT_SIGV4_MISMATCH)
				fail_msg("%s: expected a mismatch under S3 rules, got %d", c->name, (int)r);
			continue;
		}
		if (r != FT_SIGV4_OK)
			fail_msg("%s: verify gave %d (%s)", c->name, (int)r, ft_sigv4_strerror(r));
		assert_string_equal(auth.access_key, "AKIDEXAMPLE");
		assert_string_equal(auth.amz_date, SUITE_DATE);
		assert_string_equal(auth.scope, "20150830/us-east-1/service/aws4_request");
		assert_string_equal(auth.seed_signature, strstr(c->authorization, "Signature=") + 10);
		assert_int_equal(auth.presigned, 0);

		/* Every part of the request is covered by the signature. */
		t.r.method = strcmp(c->method, "GET") == 0 ? "HEAD" : "PUT";
		assert_verify(&t, now, FT_SIGV4_MISMATCH);
		suite_request(c, &t, 1);
		t.r.path = "/tampered";
		assert_verify(&t, now, FT_SIGV4_MISMATCH);
		suite_request(c, &t, 1);
		t.r.query = c->query[0] ? "Param1=value1&extra=1" : "extra";
		assert_verify(&t, now, FT_SIGV4_MISMATCH);
		suite_request(c, &t, 1);
		set_header(&t, "Host", "example.amazonaws.com.evil");
		assert_verify(&t, now, FT_SIGV4_MISMATCH);
		suite_request(c, &t, 1);
		t.r.payload_hash = "UNSIGNED-PAYLOAD";
		for (int k = 0; k < t.r.n_headers; k++)
			if (strcasecmp(t.h[k].name, "x-amz-content-sha256") == 0)
				t.h[k].value = EMPTY_SHA256;
		assert_verify(&t, now, FT_SIGV4_MISMATCH);
		checked++;
	}
	assert_int_equal(checked, 32);
}

/* ---- S3 documentation examples (examplebucket, 20130524T000000Z) ---- */

#define S3_AK "AKIAIOSFODNN7EXAMPLE"
#define S3_SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define S3_DATE "20130524T000000Z"
#define S3_HOST "examplebucket.s3.amazonaws.com"
#define S3_CRED "Credential=" S3_AK "/20130524/us-east-1/s3/aws4_request"

typedef struct {
	const char *name, *method, *path, *query;
	const char *headers[6][2];
	const char *signed_headers, *signature;
} s3_case_t;

static const s3_case_t s3_examples[] = {
	{"GET object with Range",
	 "GET",
	 "/test.txt",
	 "",
	 {{"Host", S3_HOST}, {"Range", "bytes=0-9"}, {"x-amz-content-sha256", EMPTY_SHA256}, {"x-amz-date", S3_DATE}},
	 "host;range;x-amz-content-sha256;x-amz-date",
	 "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"},
	{"PUT object",
	 "PUT",
	 "/test$file.text",
	 "",
	 {{"Host", S3_HOST},
	  {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
	  {"x-amz-date", S3_DATE},
	  {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
	  {"x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"}},
	 "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
	 "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"},
	{"GET bucket lifecycle",
	 "GET",
	 "/",
	 "lifecycle",
	 {{"Host", S3_HOST}, {"x-amz-date", S3_DATE}, {"x-amz-content-sha256", EMPTY_SHA256}},
	 "host;x-amz-content-sha256;x-amz-date",
	 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
	{"list objects",
	 "GET",
	 "/",
	 "max-keys=2&prefix=J",
	 {{"Host", S3_HOST}, {"x-amz-date", S3_DATE}, {"x-amz-content-sha256", EMPTY_SHA256}},
	 "host;x-amz-content-sha256;x-amz-date",
	 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
};

/* The S3 documentation writes the Authorization value without spaces after the commas. */
static void s3_request(const s3_case_t *c, treq_t *t, char *auth, size_t cap)
{
	treq_init(t, c->method, c->path, c->query, NULL);
	for (int i = 0; i < 6 && c->headers[i][0] != NULL; i++)
		add_header(t, c->headers[i][0], c->headers[i][1]);
	snprintf(auth, cap, "AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=%s,Signature=%s", c->signed_headers,
		 c->signature);
	add_header(t, "Authorization", auth);
}

static void test_s3_examples(void **state)
{
	const time_t now = at(S3_DATE);

	(void)state;
	for (size_t i = 0; i < sizeof(s3_examples) / sizeof(s3_examples[0]); i++) {
		const s3_case_t *c = &s3_examples[i];
		char auth[512], signed_auth[512], expected[512];
		ft_sigv4_auth_t out;
		ft_sigv4_result_t r;
		treq_t t;

		s3_request(c, &t, auth, sizeof(auth));
		r = verify_at(&t, now, &out);
		if (r != FT_SIGV4_OK)
			fail_msg("%s: verify gave %d (%s)", c->name, (int)r, ft_sigv4_strerror(r));
		assert_string_equal(out.seed_signature, c->signature);
		assert_string_equal(out.scope, "20130524/us-east-1/s3/aws4_request");

		/* Signing the same request (payload hash given explicitly) gives the same signature. */
		del_header(&t, "Authorization");
		for (int k = 0; k < t.r.n_headers; k++)
			if (strcasecmp(t.h[k].name, "x-amz-content-sha256") == 0)
				t.r.payload_hash = t.h[k].value;
		assert_int_equal(
			ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", S3_DATE, signed_auth, sizeof(signed_auth)),
			0);
		snprintf(expected, sizeof(expected), "AWS4-HMAC-SHA256 " S3_CRED ", SignedHeaders=%s, Signature=%s",
			 c->signed_headers, c->signature);
		assert_string_equal(signed_auth, expected);
	}
}

/* The same request, written the ways different clients put it on the wire, verifies alike. */
static void test_s3_wire_forms(void **state)
{
	const time_t now = at(S3_DATE);
	const s3_case_t *put = &s3_examples[1], *lifecycle = &s3_examples[2], *list = &s3_examples[3];
	char auth[512];
	treq_t t;

	(void)state;
	s3_request(put, &t, auth, sizeof(auth));
	t.r.path = "/test%24file.text"; /* how botocore sends it */
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.path = "/test%24file%2etext"; /* an unreserved character sent encoded */
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.path = "/test%2524file.text"; /* encoded twice: a different key */
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	t.r.path = "/test%24file.text/";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);

	s3_request(lifecycle, &t, auth, sizeof(auth));
	t.r.query = "lifecycle=";
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.query = "lifecycle&";
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.query = "lifecycle=x";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	t.r.query = "";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);

	s3_request(list, &t, auth, sizeof(auth));
	t.r.query = "prefix=J&max-keys=2"; /* any order on the wire */
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.query = "max-keys=2&prefix=%4A";
	assert_verify(&t, now, FT_SIGV4_OK);
	t.r.query = "max-keys=2&prefix=J&prefix=K";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	t.r.query = "max-keys=3&prefix=J";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
}

/* What the canonicalization treats as equal and as different, seen through signatures. */
static void sign_simple(const char *path, const char *query, char *auth, size_t cap)
{
	treq_t t;

	treq_init(&t, "GET", path, query, EMPTY_SHA256);
	add_header(&t, "Host", S3_HOST);
	add_header(&t, "X-Amz-Date", S3_DATE);
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", S3_DATE, auth, cap), 0);
}

static void assert_same_signing(const char *p1, const char *q1, const char *p2, const char *q2, int same)
{
	char a[512], b[512];

	sign_simple(p1, q1, a, sizeof(a));
	sign_simple(p2, q2, b, sizeof(b));
	if ((strcmp(a, b) == 0) != same)
		fail_msg("'%s?%s' and '%s?%s' should sign %s", p1, q1, p2, q2, same ? "alike" : "differently");
}

static void test_canonical_forms(void **state)
{
	(void)state;
	assert_same_signing("/a~b", "", "/a%7eb", "", 1);
	assert_same_signing("/a~b", "", "/a%7Eb", "", 1);
	assert_same_signing("/\xe1\x88\xb4", "", "/%e1%88%b4", "", 1);
	assert_same_signing("/a b", "", "/a%20b", "", 1);
	assert_same_signing("/a+b", "", "/a%2Bb", "", 1);
	assert_same_signing("/a+b", "", "/a%20b", "", 0); /* '+' in a path is a plus */
	assert_same_signing("/a/b", "", "/a%2Fb", "", 0);
	assert_same_signing("/a//b", "", "/a/b", "", 0);
	assert_same_signing("/a/./b", "", "/a/b", "", 0);
	assert_same_signing("/a/../b", "", "/b", "", 0);
	assert_same_signing("/a%zz", "", "/a%25zz", "", 1); /* a stray '%' is a literal */
	assert_same_signing("", "", "/", "", 1);
	assert_same_signing("/", "b=2&a=1", "/", "a=1&b=2", 1);
	assert_same_signing("/", "a=2&a=1", "/", "a=1&a=2", 1);
	assert_same_signing("/", "a", "/", "a=", 1);
	assert_same_signing("/", "a&&b", "/", "a=&b=", 1);
	/* In the query a raw '+' is a space (form encoding); a plus travels as %2B. */
	assert_same_signing("/", "a=b+c", "/", "a=b%20c", 1);
	assert_same_signing("/", "a=b+c", "/", "a=b%2Bc", 0);
	assert_same_signing("/", "a+b=1", "/", "a%20b=1", 1);
	assert_same_signing("/", "a=x/y", "/", "a=x%2fy", 1);
	assert_same_signing("/", "k=a=b", "/", "k=a%3Db", 1);
	assert_same_signing("/", "A=1", "/", "a=1", 0);
	/* Sort by encoded name: "a-b" (%2D-free) vs "a.b" vs "a_b" order is bytewise on the encoding. */
	assert_same_signing("/", "a_b=1&a.b=2&a-b=3", "/", "a-b=3&a.b=2&a_b=1", 1);
}

/* ---- presigned URL example ---- */

#define PRESIGNED_SIG "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
#define PRESIGNED_QUERY(alg, cred, date, expires, signed_headers, sig)                                 \
	"X-Amz-Algorithm=" alg "&X-Amz-Credential=" cred "&X-Amz-Date=" date "&X-Amz-Expires=" expires \
	"&X-Amz-SignedHeaders=" signed_headers "&X-Amz-Signature=" sig
#define PS_CRED "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"

static void presigned_request(treq_t *t, const char *query)
{
	treq_init(t, "GET", "/test.txt", query, NULL);
	add_header(t, "Host", S3_HOST);
}

static void test_presigned_example(void **state)
{
	const time_t date = at(S3_DATE);
	const char *good = PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG);
	ft_sigv4_auth_t auth;
	treq_t t;

	(void)state;
	presigned_request(&t, good);
	assert_int_equal(verify_at(&t, date + 3600, &auth), FT_SIGV4_OK);
	assert_int_equal(auth.presigned, 1);
	assert_string_equal(auth.access_key, S3_AK);
	assert_string_equal(auth.seed_signature, PRESIGNED_SIG);
	assert_verify(&t, date, FT_SIGV4_OK);
	assert_verify(&t, date + 86400, FT_SIGV4_OK);
	assert_verify(&t, date + 86401, FT_SIGV4_EXPIRED);
	assert_verify(&t, date - 14 * 60, FT_SIGV4_OK);     /* client clock a little ahead */
	assert_verify(&t, date - 16 * 60, FT_SIGV4_SKEWED); /* dated too far in the future */
	/* Parameter order on the wire does not matter; the canonical query is sorted. */
	presigned_request(&t,
			  "X-Amz-Signature=" PRESIGNED_SIG "&X-Amz-Expires=86400&X-Amz-Date=" S3_DATE
			  "&X-Amz-SignedHeaders=host&X-Amz-Credential=" PS_CRED "&X-Amz-Algorithm=AWS4-HMAC-SHA256");
	assert_verify(&t, date, FT_SIGV4_OK);
	/* A raw '/' in the credential is the same value (the canonical query re-encodes it). */
	presigned_request(&t,
			  PRESIGNED_QUERY("AWS4-HMAC-SHA256", "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request",
					  S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, date, FT_SIGV4_OK);
}

static const char *rotated_secret(void *ctx, const char *access_key)
{
	(void)ctx;
	return strcmp(access_key, "AKIAIOSFODNN7EXAMPLE") == 0 ? "a/rotated/secret/for/the/same/key/id0000" : NULL;
}

/*
 * Every request is verified in full even with its signing key cached: a bad signature after good
 * ones, and a good one after the key id's secret changed, are refused; the query is read in one
 * pass, so a repeated parameter and names spelled with escapes are checked there.
 */
static void test_presigned_after_cached_key(void **state)
{
	const time_t now = at(S3_DATE) + 60;
	treq_t t;

	(void)state;
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_OK);
	assert_verify(&t, now, FT_SIGV4_OK); /* the key is cached now */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d40f"));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_int_equal(ft_sigv4_verify(&t.r, now, rotated_secret, NULL, NULL), FT_SIGV4_MISMATCH);
	assert_verify(&t, now, FT_SIGV4_OK);
	/* a parameter given twice is malformed, even with the same value */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      PRESIGNED_SIG) "&X-Amz-Expires=86400");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	/* names are compared decoded: "X-Amz-%44ate" is X-Amz-Date (then the canonical query differs) */
	presigned_request(&t, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" PS_CRED "&X-Amz-%44ate=" S3_DATE
			      "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_OK);
	presigned_request(&t, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" PS_CRED "&X-Amz-Date%00=" S3_DATE
			      "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* "X-Amz-Date\0" is not X-Amz-Date: no date */
	/* one presigned parameter alone marks the request presigned (and malformed) */
	presigned_request(&t, "X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=abc&Expires=1");
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	presigned_request(&t, "x-amz-signature=" PRESIGNED_SIG); /* names are case-sensitive: anonymous */
	assert_verify(&t, now, FT_SIGV4_ANONYMOUS);
}

static void test_presigned_tampering(void **state)
{
	const time_t now = at(S3_DATE) + 60;
	treq_t t;

	(void)state;
	/* Each signed part changed: a mismatch. */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86401", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(
		&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, "20130524T000001Z", "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256",
					      "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-west-2%2Fs3%2Faws4_request",
					      S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d405"));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      PRESIGNED_SIG) "&response-content-type=text%2Fhtml");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	t.r.path = "/test.txt2";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	t.r.path = "/test.txt";
	t.r.method = "PUT";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	t.r.method = "GET";
	set_header(&t, "Host", "otherbucket.s3.amazonaws.com");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	/* A second, unsigned header is fine: only SignedHeaders count. */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	add_header(&t, "Range", "bytes=0-9");
	assert_verify(&t, now, FT_SIGV4_OK);
	/* Another known key: a mismatch; an unknown one: unknown key. */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256",
					      "AKIAOTHERKEY0EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request",
					      S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256",
					      "AKIANOBODYEXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request", S3_DATE,
					      "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_UNKNOWN_KEY);

	/* Malformed parameters; out->presigned tells which S3 error code applies. */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "0", "host", PRESIGNED_SIG));
	{
		ft_sigv4_auth_t auth;

		assert_int_equal(verify_at(&t, now, &auth), FT_SIGV4_MALFORMED);
		assert_int_equal(auth.presigned, 1);
		assert_string_equal(auth.seed_signature, "");
	}
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "604801", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "-5", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "1e3", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(
		&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, "20130525T000000Z", "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* credential day != X-Amz-Date day */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, "2013-05-24T00:00:00Z", "86400", "host",
					      PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "range", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* host not signed */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d4"));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256",
					      "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws5_request",
					      S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	presigned_request(&t, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" PS_CRED "&X-Amz-Date=" S3_DATE
			      "&X-Amz-SignedHeaders=host&X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* no X-Amz-Expires */
	presigned_request(&t, "X-Amz-Credential=" PS_CRED "&X-Amz-Date=" S3_DATE
			      "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* no X-Amz-Algorithm */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host",
					      PRESIGNED_SIG) "&X-Amz-Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED); /* repeated */
	presigned_request(&t,
			  PRESIGNED_QUERY("AWS4-ECDSA-P256-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	/* Presigned parameters and an Authorization header together. */
	presigned_request(&t, PRESIGNED_QUERY("AWS4-HMAC-SHA256", PS_CRED, S3_DATE, "86400", "host", PRESIGNED_SIG));
	add_header(&t, "Authorization", "AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=host,Signature=" PRESIGNED_SIG);
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	/* SigV2 query authentication. */
	presigned_request(&t, "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889120"
			      "&Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4%3D");
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	/* Nothing at all. */
	presigned_request(&t, "prefix=a");
	assert_verify(&t, now, FT_SIGV4_ANONYMOUS);
}

/* ---- header form: parsing, clock, key, dates ---- */

#define RANGE_AUTH(sep, sig) \
	"AWS4-HMAC-SHA256 " S3_CRED sep "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date" sep "Signature=" sig
#define RANGE_SIG "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"

static void range_request(treq_t *t, const char *authorization)
{
	treq_init(t, "GET", "/test.txt", "", NULL);
	add_header(t, "Host", S3_HOST);
	add_header(t, "Range", "bytes=0-9");
	add_header(t, "x-amz-content-sha256", EMPTY_SHA256);
	add_header(t, "x-amz-date", S3_DATE);
	if (authorization != NULL)
		add_header(t, "Authorization", authorization);
}

static void test_header_parsing(void **state)
{
	const time_t now = at(S3_DATE);
	treq_t t;

	(void)state;
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	assert_verify(&t, now, FT_SIGV4_OK);
	range_request(&t, RANGE_AUTH(", ", RANGE_SIG));
	assert_verify(&t, now, FT_SIGV4_OK);
	range_request(&t, "  AWS4-HMAC-SHA256   " S3_CRED " ,  SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"
			  " ,\tSignature=" RANGE_SIG "  ");
	assert_verify(&t, now, FT_SIGV4_OK);
	range_request(&t, "AWS4-HMAC-SHA256 Signature=" RANGE_SIG ", " S3_CRED
			  ", SignedHeaders=host;range;x-amz-content-sha256;x-amz-date");
	assert_verify(&t, now, FT_SIGV4_OK); /* any component order */
	range_request(&t, RANGE_AUTH(",", "F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41"));
	assert_verify(&t, now, FT_SIGV4_OK); /* hex case */

	/* Tampered values and headers. */
	range_request(&t, RANGE_AUTH(",", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb42"));
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	set_header(&t, "Range", "bytes=0-10");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	set_header(&t, "x-amz-content-sha256", "UNSIGNED-PAYLOAD");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	add_header(&t, "Range", "bytes=20-29"); /* a second value joins the first */
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	set_header(&t, "x-amz-content-sha256", "  " EMPTY_SHA256 " "); /* as a lax parser may hand it over */
	assert_verify(&t, now, FT_SIGV4_OK);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	add_header(&t, "x-amz-meta-unsigned", "1"); /* not signed: ignored */
	assert_verify(&t, now, FT_SIGV4_OK);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	del_header(&t, "Range");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, "AWS4-HMAC-SHA256 Credential=" S3_AK "/20130524/us-west-2/s3/aws4_request,"
			  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, "AWS4-HMAC-SHA256 Credential=" S3_AK "/20130524/us-east-1/s4/aws4_request,"
			  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, "AWS4-HMAC-SHA256 Credential=AKIAOTHERKEY0EXAMPLE/20130524/us-east-1/s3/aws4_request,"
			  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	range_request(&t, "AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
			  "Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_MISMATCH); /* a signed header dropped from the list */

	/* Malformed. */
	static const char *const malformed[] = {
		"AWS4-HMAC-SHA256",
		"AWS4-HMAC-SHA256 ",
		"",
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date",
		"AWS4-HMAC-SHA256 " S3_CRED ",Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		RANGE_AUTH(",", RANGE_SIG) ",Signature=" RANGE_SIG,
		RANGE_AUTH(",", RANGE_SIG) ",Extra=1",
		RANGE_AUTH(",", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb4"),
		RANGE_AUTH(",", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb4g"),
		"AWS4-HMAC-SHA256 Credential=" S3_AK "/20130524/us-east-1/s3/aws4_requests,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 Credential=" S3_AK "/2013052/us-east-1/s3/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 Credential=" S3_AK "/20130525/us-east-1/s3/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 Credential=/20130524/us-east-1/s3/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 Credential=" S3_AK "/20130524/us-east-1/aws4_request,"
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=host;;range,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=host range,Signature=" RANGE_SIG,
		"AWS4-HMAC-SHA256 " S3_CRED " SignedHeaders=host,Signature=" RANGE_SIG,
	};
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		ft_sigv4_result_t r;

		range_request(&t, malformed[i]);
		r = verify_at(&t, now, NULL);
		if (r != FT_SIGV4_MALFORMED)
			fail_msg("malformed[%zu] '%s' gave %d", i, malformed[i], (int)r);
	}

	/* Other schemes. */
	range_request(&t, "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=");
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	range_request(&t, "AWS4-ECDSA-P256-SHA256 " S3_CRED ",SignedHeaders=host,Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	range_request(&t, "Basic dXNlcjpwYXNz");
	assert_verify(&t, now, FT_SIGV4_UNSUPPORTED);
	range_request(&t, NULL);
	assert_verify(&t, now, FT_SIGV4_ANONYMOUS);

	/* Unknown key. */
	range_request(&t, "AWS4-HMAC-SHA256 Credential=AKIANOBODY/20130524/us-east-1/s3/aws4_request,"
			  "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" RANGE_SIG);
	assert_verify(&t, now, FT_SIGV4_UNKNOWN_KEY);
}

static void test_header_dates(void **state)
{
	const time_t now = at(S3_DATE);
	treq_t t;

	(void)state;
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	assert_verify(&t, now + 14 * 60, FT_SIGV4_OK);
	assert_verify(&t, now - 14 * 60, FT_SIGV4_OK);
	assert_verify(&t, now + 15 * 60, FT_SIGV4_OK);
	assert_verify(&t, now + 15 * 60 + 1, FT_SIGV4_SKEWED);
	assert_verify(&t, now - 15 * 60 - 1, FT_SIGV4_SKEWED);
	assert_verify(&t, now + 86400 * 365, FT_SIGV4_SKEWED);
	/* A bad signature at a skewed time: the clock is reported, as S3 does. */
	range_request(&t, RANGE_AUTH(",", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb42"));
	assert_verify(&t, now + 3600, FT_SIGV4_SKEWED);

	/* x-amz-date required (or Date), well-formed. */
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	del_header(&t, "x-amz-date");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	set_header(&t, "x-amz-date", "20130524T000000");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "x-amz-date", "20131324T000000Z");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "x-amz-date", "Fri, 24 May 2013 00:00:00 GMT");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "x-amz-date", "20130524T000001Z"); /* same day, other second: signed value changed */
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	set_header(&t, "x-amz-date", "20130523T235959Z"); /* other day than the credential scope */
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "x-amz-date", " " S3_DATE " ");
	assert_verify(&t, now, FT_SIGV4_OK);

	/* Date instead of x-amz-date: a request signed that way (computed independently). */
	treq_init(&t, "GET", "/test.txt", "", NULL);
	add_header(&t, "Host", S3_HOST);
	add_header(&t, "Date", "Fri, 24 May 2013 00:00:00 GMT");
	add_header(&t, "x-amz-content-sha256", EMPTY_SHA256);
	add_header(&t, "Authorization",
		   "AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=date;host;x-amz-content-sha256,"
		   "Signature=f51e643fca75b7c8fd918b44dd7f5de20a60f46a456fd2170e1e8248a77144e1");
	assert_verify(&t, now, FT_SIGV4_OK);
	assert_verify(&t, now + 16 * 60, FT_SIGV4_SKEWED);
	set_header(&t, "Date", "Fri, 24 May 2013 00:00:01 GMT");
	assert_verify(&t, now, FT_SIGV4_MISMATCH);
	set_header(&t, "Date", "Friday, 24-May-13 00:00:00 GMT");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "Date", "Fri, 24 May 2013 00:00:00 +0100");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	set_header(&t, "Date", "Fri, 24 Mai 2013 00:00:00 GMT");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	/* Python's formatdate() writes the zone as -0000: the same instant, the same signed string. */
	set_header(&t, "Date", "Fri, 24 May 2013 00:00:00 -0000");
	assert_verify(&t, now, FT_SIGV4_MISMATCH); /* the signed Date value itself differs */
	/* Without x-amz-content-sha256 and without a caller-given payload hash: malformed. */
	range_request(&t, RANGE_AUTH(",", RANGE_SIG));
	del_header(&t, "x-amz-content-sha256");
	assert_verify(&t, now, FT_SIGV4_MALFORMED);
	t.r.payload_hash = EMPTY_SHA256;
	assert_verify(&t, now, FT_SIGV4_MISMATCH); /* x-amz-content-sha256 was a signed header */
}

/* A request signed by ft_sigv4_sign verifies, at any time within the window. */
static void test_sign_then_verify(void **state)
{
	const time_t now = 1700000000;
	char date[17], auth[1024];
	ft_sigv4_auth_t out;
	treq_t t;

	(void)state;
	ft_date_format_amz(now, date);
	assert_string_equal(date, "20231114T221320Z");
	treq_init(&t, "PUT", "/s3/bucket/dir%20a/%E2%82%AC%2B=~x", "uploadId=abc%2Fdef&partNumber=3", EMPTY_SHA256);
	add_header(&t, "Host", "127.0.0.1:51080");
	add_header(&t, "X-Amz-Date", date);
	add_header(&t, "x-amz-content-sha256", EMPTY_SHA256);
	add_header(&t, "X-Amz-Meta-Note", "  two   words ");
	add_header(&t, "x-amz-meta-note", "second");
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", date, auth, sizeof(auth)), 0);
	assert_non_null(strstr(auth, "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-meta-note,"));
	add_header(&t, "Authorization", auth);
	assert_int_equal(verify_at(&t, now + 60, &out), FT_SIGV4_OK);
	assert_string_equal(out.amz_date, date);
	assert_verify(&t, now + 16 * 60, FT_SIGV4_SKEWED);
	t.h[4].value = "third";
	assert_verify(&t, now, FT_SIGV4_MISMATCH);

	/* Sign refuses what it cannot sign. */
	treq_init(&t, "GET", "/", "", EMPTY_SHA256);
	add_header(&t, "X-Amz-Date", date);
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", date, auth, sizeof(auth)), -1);
	add_header(&t, "Host", "h");
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", date, auth, 40), -1);
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", "20231114T221321Z", auth, sizeof(auth)),
			 -1);
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", date, auth, sizeof(auth)), 0);
	t.r.payload_hash = NULL;
	assert_int_equal(ft_sigv4_sign(&t.r, S3_AK, S3_SK, "us-east-1", "s3", date, auth, sizeof(auth)), -1);
}

/* ---- signing key cache: keyed by secret, date, region and service; safe across threads ---- */

#define CACHE_SECRETS 6
#define CACHE_REGIONS 5 /* with CACHE_SECRETS: more pairs than the cache holds, so entries get replaced */

static const char *const cache_secret[CACHE_SECRETS] = {S3_SK, S3_SK "x", "a", "b", "AWS4", "wJalrXUtnFEMI"};
static const char *const cache_region[CACHE_REGIONS] = {"us-east-1", "eu-west-1", "us-east-2", "ap-south-1", "x"};
static char cache_want[CACHE_SECRETS][CACHE_REGIONS][1024];

static int cache_sign(int si, int ri, const char *date, char *auth, size_t cap)
{
	treq_t t;

	treq_init(&t, "GET", "/b/k", "", FT_SIGV4_UNSIGNED);
	add_header(&t, "Host", "h");
	add_header(&t, "X-Amz-Date", date);
	return ft_sigv4_sign(&t.r, S3_AK, cache_secret[si], cache_region[ri], "s3", date, auth, cap);
}

static void *cache_thread(void *arg)
{
	long id = (long)arg, bad = 0;
	char auth[1024];
	int i;

	for (i = 0; i < 400; i++) {
		int si = (int)((i + id) % CACHE_SECRETS), ri = (int)((i * 7 + id) % CACHE_REGIONS);

		if (cache_sign(si, ri, "20231114T221320Z", auth, sizeof(auth)) != 0 ||
		    strcmp(auth, cache_want[si][ri]) != 0)
			bad++;
	}
	return (void *)bad;
}

static void test_signing_key_cache(void **state)
{
	char auth[1024], other_day[1024];
	pthread_t th[4];
	int si, ri, i;

	(void)state;
	for (si = 0; si < CACHE_SECRETS; si++)
		for (ri = 0; ri < CACHE_REGIONS; ri++) {
			assert_int_equal(
				cache_sign(si, ri, "20231114T221320Z", cache_want[si][ri], sizeof(cache_want[si][ri])),
				0);
			/* every secret and region gives its own signature: none taken from another's key */
			for (i = 0; i < si * CACHE_REGIONS + ri; i++)
				assert_string_not_equal(cache_want[si][ri],
							cache_want[i / CACHE_REGIONS][i % CACHE_REGIONS]);
		}
	/* the same inputs again (cached or replaced by now) sign the same */
	for (si = CACHE_SECRETS - 1; si >= 0; si--)
		for (ri = 0; ri < CACHE_REGIONS; ri++) {
			assert_int_equal(cache_sign(si, ri, "20231114T221320Z", auth, sizeof(auth)), 0);
			assert_string_equal(auth, cache_want[si][ri]);
		}
	/* another day is another key: its signature differs */
	assert_int_equal(cache_sign(0, 0, "20231115T221320Z", other_day, sizeof(other_day)), 0);
	assert_int_equal(cache_sign(0, 0, "20231114T221320Z", auth, sizeof(auth)), 0);
	assert_string_equal(auth, cache_want[0][0]);
	assert_string_not_equal(strstr(other_day, "Signature="), strstr(auth, "Signature="));
	for (i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, cache_thread, (void *)(long)i), 0);
	for (i = 0; i < 4; i++) {
		void *bad;

		assert_int_equal(pthread_join(th[i], &bad), 0);
		assert_int_equal((long)bad, 0);
	}
}

/* ---- aws-chunked example (66560 bytes of 'a' in chunks of 65536, 1024 and 0) ---- */

#define SEED_SIG "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define CHUNK1_SIG "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
#define CHUNK2_SIG "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
#define FINAL_SIG "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
#define PAYLOAD_LEN 66560

static void chunked_seed(ft_sigv4_auth_t *auth)
{
	treq_t t;

	treq_init(&t, "PUT", "/examplebucket/chunkObject.txt", "", NULL);
	add_header(&t, "Host", "s3.amazonaws.com");
	add_header(&t, "x-amz-date", S3_DATE);
	add_header(&t, "x-amz-storage-class", "REDUCED_REDUNDANCY");
	add_header(&t, "x-amz-content-sha256", FT_SIGV4_STREAMING);
	add_header(&t, "Content-Encoding", "aws-chunked");
	add_header(&t, "x-amz-decoded-content-length", "66560");
	add_header(&t, "Content-Length", "66824");
	add_header(
		&t, "Authorization",
		"AWS4-HMAC-SHA256 " S3_CRED ",SignedHeaders=content-encoding;content-length;host;"
		"x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=" SEED_SIG);
	assert_int_equal(verify_at(&t, at(S3_DATE), auth), FT_SIGV4_OK);
	assert_string_equal(auth->seed_signature, SEED_SIG);
}

/* The documented body; returns its length (malloc'ed into *body). */
static size_t chunked_body(uint8_t **body)
{
	size_t cap = PAYLOAD_LEN + 1024, n = 0;
	uint8_t *b = malloc(cap);

	assert_non_null(b);
	n += (size_t)sprintf((char *)b + n, "10000;chunk-signature=" CHUNK1_SIG "\r\n");
	memset(b + n, 'a', 65536);
	n += 65536;
	n += (size_t)sprintf((char *)b + n, "\r\n400;chunk-signature=" CHUNK2_SIG "\r\n");
	memset(b + n, 'a', 1024);
	n += 1024;
	n += (size_t)sprintf((char *)b + n, "\r\n0;chunk-signature=" FINAL_SIG "\r\n\r\n");
	assert_int_equal(n, 66824); /* the example's Content-Length */
	*body = b;
	return n;
}

/*
 * Feeds body in pieces (step 0: one piece; else sizes cycling from 1 up to step) and returns the
 * last feed result; the decoded payload goes to *payload (malloc'ed), its length to *payload_len.
 */
static int feed_all(const ft_sigv4_auth_t *auth, const uint8_t *body, size_t len, size_t step, uint8_t **payload,
		    size_t *payload_len)
{
	ft_sigv4_chunked_t *c = ft_sigv4_chunked_new(auth);
	uint8_t *out = malloc(len + 1);
	size_t off = 0, total = 0, piece = 1;
	int rc = 0;

	assert_non_null(c);
	assert_non_null(out);
	while (off < len) {
		size_t n = step == 0 ? len - off : piece, produced = 0;

		if (n > len - off)
			n = len - off;
		rc = ft_sigv4_chunked_feed(c, body + off, n, out + total, n, &produced);
		assert_true(produced <= n);
		total += produced;
		off += n;
		if (step > 0)
			piece = piece % step + 1;
		if (rc < 0)
			break; /* after 1, further bytes are fed too: they must be refused */
	}
	ft_sigv4_chunked_free(c);
	*payload = out;
	*payload_len = total;
	return rc;
}

static int all_a(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 'a')
			return 0;
	return 1;
}

static void test_chunked_example(void **state)
{
	static const size_t steps[] = {0, 1, 2, 3, 7, 64, 97, 100, 4096, 65537};
	ft_sigv4_auth_t auth;
	uint8_t *body, *payload;
	size_t len, payload_len;

	(void)state;
	chunked_seed(&auth);
	len = chunked_body(&body);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int rc = feed_all(&auth, body, len, steps[i], &payload, &payload_len);

		if (rc != 1)
			fail_msg("step %zu: feed gave %d", steps[i], rc);
		assert_int_equal(payload_len, PAYLOAD_LEN);
		assert_true(all_a(payload, payload_len));
		free(payload);
	}
	/* Uppercase hex sizes are hex too. */
	memcpy(body, "10000", 5);
	assert_int_equal(feed_all(&auth, body, len, 0, &payload, &payload_len), 1);
	free(payload);
	free(body);
}

/* Applies edit to a fresh copy of the documented body and checks the decoder's verdict. */
static void chunked_case(const ft_sigv4_auth_t *auth, const char *what, void (*edit)(uint8_t *b, size_t *len),
			 int expected)
{
	uint8_t *body, *payload;
	size_t len, payload_len;
	static const size_t steps[] = {0, 1, 13};

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int rc;

		len = chunked_body(&body);
		body = realloc(body, len + 4096);
		assert_non_null(body);
		edit(body, &len);
		rc = feed_all(auth, body, len, steps[i], &payload, &payload_len);
		free(payload);
		free(body);
		if (rc != expected)
			fail_msg("%s (step %zu): feed gave %d, expected %d", what, steps[i], rc, expected);
	}
}

static size_t find(const uint8_t *b, size_t len, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(b + i, s, n) == 0)
			return i;
	fail_msg("'%s' not in body", s);
	return 0;
}

static void edit_data_byte(uint8_t *b, size_t *len)
{
	b[find(b, *len, "\r\n400;") - 5] = 'b';
}

static void edit_second_data_byte(uint8_t *b, size_t *len)
{
	b[*len - 100 - 64] = 'b';
}

static void edit_chunk_sig(uint8_t *b, size_t *len)
{
	b[find(b, *len, CHUNK2_SIG) + 10] ^= 1;
}

static void edit_final_sig(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, FINAL_SIG);

	b[at_] = b[at_] == 'b' ? 'c' : 'b';
}

static void edit_bad_hex(uint8_t *b, size_t *len)
{
	b[find(b, *len, "400;")] = 'g';
}

static void edit_no_signature(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, "400;chunk-signature=");
	size_t cut = strlen(";chunk-signature=") + 64;

	memmove(b + at_ + 3, b + at_ + 3 + cut, *len - at_ - 3 - cut);
	*len -= cut;
}

static void edit_other_extension(uint8_t *b, size_t *len)
{
	memcpy(b + find(b, *len, "400;chunk-signature="), "400;chunk-signaturE=", 20);
}

static void edit_oversize_header(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, "400;"), pad = 200;

	memmove(b + at_ + pad, b + at_, *len - at_);
	memset(b + at_, '0', pad);
	*len += pad;
}

static void edit_trailing_garbage(uint8_t *b, size_t *len)
{
	memcpy(b + *len, "x", 1);
	*len += 1;
}

static void edit_trailing_chunk(uint8_t *b, size_t *len)
{
	*len += (size_t)sprintf((char *)b + *len, "0;chunk-signature=" FINAL_SIG "\r\n\r\n");
}

static void edit_truncated(uint8_t *b, size_t *len)
{
	(void)b;
	*len -= 2; /* the final CRLF missing: not complete, not an error yet */
}

static void edit_no_crlf_after_data(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, "\r\n400;");

	memmove(b + at_, b + at_ + 2, *len - at_ - 2);
	*len -= 2;
}

static void edit_bare_lf_header(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, CHUNK2_SIG "\r\n") + 64;

	memmove(b + at_, b + at_ + 1, *len - at_ - 1);
	*len -= 1;
}

static void edit_short_chunk(uint8_t *b, size_t *len)
{
	memcpy(b + find(b, *len, "400;"), "3ff;", 4); /* one byte shorter: framing breaks */
}

static void edit_long_chunk(uint8_t *b, size_t *len)
{
	memcpy(b + find(b, *len, "400;"), "401;", 4);
}

static void edit_huge_size(uint8_t *b, size_t *len)
{
	size_t at_ = find(b, *len, "400;");

	memmove(b + at_ + 14, b + at_, *len - at_);
	memcpy(b + at_, "ffffffffffffffff", 17 - 1);
	b[at_ + 16] = '0';
	*len += 14; /* 17 hex digits */
}

static void edit_swap_chunks(uint8_t *b, size_t *len)
{
	/* the 1024-byte chunk first, signed with the first chunk's signature: chain broken */
	size_t n = 0;

	(void)b;
	n += (size_t)sprintf((char *)b + n, "400;chunk-signature=" CHUNK1_SIG "\r\n");
	memset(b + n, 'a', 1024);
	n += 1024;
	n += (size_t)sprintf((char *)b + n, "\r\n0;chunk-signature=" FINAL_SIG "\r\n\r\n");
	*len = n;
}

static void edit_skip_to_final(uint8_t *b, size_t *len)
{
	*len = (size_t)sprintf((char *)b, "0;chunk-signature=" FINAL_SIG "\r\n\r\n");
}

static void test_chunked_errors(void **state)
{
	ft_sigv4_auth_t auth, other;
	uint8_t out[16];
	size_t produced = 99;
	ft_sigv4_chunked_t *c;

	(void)state;
	chunked_seed(&auth);
	chunked_case(&auth, "flipped data byte (first chunk)", edit_data_byte, -2);
	chunked_case(&auth, "flipped data byte (second chunk)", edit_second_data_byte, -2);
	chunked_case(&auth, "chunk signature changed", edit_chunk_sig, -2);
	chunked_case(&auth, "final signature changed", edit_final_sig, -2);
	chunked_case(&auth, "chunks swapped", edit_swap_chunks, -2);
	chunked_case(&auth, "body cut to the final chunk", edit_skip_to_final, -2);
	chunked_case(&auth, "bad hex size", edit_bad_hex, -1);
	chunked_case(&auth, "no chunk signature", edit_no_signature, -1);
	chunked_case(&auth, "other extension", edit_other_extension, -1);
	chunked_case(&auth, "oversize header", edit_oversize_header, -1);
	chunked_case(&auth, "17 hex digits", edit_huge_size, -1);
	chunked_case(&auth, "trailing garbage", edit_trailing_garbage, -1);
	chunked_case(&auth, "a chunk after the final one", edit_trailing_chunk, -1);
	chunked_case(&auth, "no CRLF after data", edit_no_crlf_after_data, -1);
	chunked_case(&auth, "bare LF after a header", edit_bare_lf_header, -1);
	chunked_case(&auth, "declared size too small", edit_short_chunk, -1);
	chunked_case(&auth, "declared size too large", edit_long_chunk, -1);
	chunked_case(&auth, "truncated", edit_truncated, 0);

	/* Another seed (here: another request's signature) fails the first chunk. */
	other = auth;
	other.seed_signature[0] = other.seed_signature[0] == '4' ? '5' : '4';
	{
		uint8_t *body, *payload;
		size_t len = chunked_body(&body), payload_len;

		assert_int_equal(feed_all(&other, body, len, 0, &payload, &payload_len), -2);
		free(payload);
		free(body);
	}

	/* Errors are sticky; an empty feed changes nothing; no seed, no decoder. */
	c = ft_sigv4_chunked_new(&auth);
	assert_non_null(c);
	assert_int_equal(ft_sigv4_chunked_feed(c, "", 0, out, sizeof(out), &produced), 0);
	assert_int_equal(produced, 0);
	assert_int_equal(ft_sigv4_chunked_feed(c, "zz\r\n", 4, out, sizeof(out), &produced), -1);
	assert_int_equal(ft_sigv4_chunked_feed(c, "0", 1, out, sizeof(out), &produced), -1);
	ft_sigv4_chunked_free(c);
	/* A header line that never ends is refused once it is too long, before any newline. */
	c = ft_sigv4_chunked_new(&auth);
	assert_non_null(c);
	{
		char zeros[200], sink[200];

		memset(zeros, '0', sizeof(zeros));
		assert_int_equal(ft_sigv4_chunked_feed(c, zeros, sizeof(zeros), sink, sizeof(sink), &produced), -1);
	}
	ft_sigv4_chunked_free(c);
	ft_sigv4_chunked_free(NULL);
	other.seed_signature[0] = '\0';
	assert_null(ft_sigv4_chunked_new(&other));
	assert_null(ft_sigv4_chunked_new(NULL));
}

/* ---- trailer forms ---- */

/* One-shot OpenSSL signing, written from the format, independent of the decoder's code. */
static void ref_sign(const ft_sigv4_auth_t *auth, const char *algorithm, const char *prev, const char *middle,
		     const void *data, size_t n, char out[65])
{
	uint8_t md[32], mac[32];
	char hash[65], sts[640];
	unsigned int mac_len = 32;

	SHA256(data, n, md);
	ft_hex_encode(md, 32, hash);
	snprintf(sts, sizeof(sts), "%s\n%s\n%s\n%s\n%s%s", algorithm, auth->amz_date, auth->scope, prev, middle, hash);
	assert_non_null(HMAC(EVP_sha256(), auth->signing_key, 32, (const uint8_t *)sts, strlen(sts), mac, &mac_len));
	ft_hex_encode(mac, 32, out);
}

/*
 * A signed-trailer body of payload p[0..n) in chunks of at most step bytes, then the trailer
 * "name:value" and its signature (sig_override replaces it when non-NULL). Returns the length.
 */
static size_t signed_trailer_body(const ft_sigv4_auth_t *auth, const char *p, size_t n, size_t step, const char *name,
				  const char *value, const char *sig_override, char *out)
{
	char prev[65], sig[65], canon[256];
	size_t len = 0, off = 0;

	memcpy(prev, auth->seed_signature, sizeof(prev));
	for (;;) {
		size_t c = n - off < step ? n - off : step;

		ref_sign(auth, "AWS4-HMAC-SHA256-PAYLOAD", prev, EMPTY_SHA256 "\n", p + off, c, sig);
		len += (size_t)sprintf(out + len, "%zx;chunk-signature=%s\r\n", c, sig);
		memcpy(prev, sig, sizeof(prev));
		if (c == 0)
			break;
		memcpy(out + len, p + off, c);
		len += c;
		len += (size_t)sprintf(out + len, "\r\n");
		off += c;
	}
	snprintf(canon, sizeof(canon), "%s:%s\n", name, value);
	ref_sign(auth, "AWS4-HMAC-SHA256-TRAILER", prev, "", canon, strlen(canon), sig);
	len += (size_t)sprintf(out + len, "%s:%s\r\nx-amz-trailer-signature:%s\r\n\r\n", name, value,
			       sig_override ? sig_override : sig);
	return len;
}

/* Feeds body to a new decoder of mode in pieces of step bytes (0: one piece); the trailer into trailer. */
static int feed_mode(const ft_sigv4_auth_t *auth, ft_chunked_mode_t mode, const char *body, size_t len, size_t step,
		     char *payload, size_t *payload_len, char trailer[FT_CHUNKED_TRAILER_MAX + 1])
{
	ft_sigv4_chunked_t *c = ft_sigv4_chunked_new_mode(auth, mode, "x-amz-checksum-crc32");
	size_t off = 0, total = 0;
	int rc = 0;

	assert_non_null(c);
	trailer[0] = '\0';
	while (off < len) {
		size_t n = step == 0 || step > len - off ? len - off : step, produced = 0;

		rc = ft_sigv4_chunked_feed(c, body + off, n, payload + total, n, &produced);
		total += produced;
		off += n;
		if (rc < 0)
			break; /* after 1, further bytes are fed too: they must be refused */
	}
	if (rc == 1) {
		assert_non_null(ft_sigv4_chunked_trailer(c));
		snprintf(trailer, FT_CHUNKED_TRAILER_MAX + 1, "%s", ft_sigv4_chunked_trailer(c));
	} else {
		assert_null(ft_sigv4_chunked_trailer(c));
	}
	ft_sigv4_chunked_free(c);
	*payload_len = total;
	return rc;
}

static void unsigned_case(const char *what, const char *body, int expected)
{
	char payload[256], trailer[FT_CHUNKED_TRAILER_MAX + 1];
	size_t n;

	for (size_t step = 0; step < 4; step++) {
		int rc = feed_mode(NULL, FT_CHUNKED_UNSIGNED_TRAILER, body, strlen(body), step, payload, &n, trailer);

		if (rc != expected)
			fail_msg("%s (step %zu): got %d, expected %d", what, step, rc, expected);
	}
}

static void test_chunked_unsigned_trailer(void **state)
{
	static const char good[] = "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
	char payload[256], trailer[FT_CHUNKED_TRAILER_MAX + 1];
	size_t n;

	(void)state;
	for (size_t step = 0; step < 8; step++) {
		assert_int_equal(
			feed_mode(NULL, FT_CHUNKED_UNSIGNED_TRAILER, good, strlen(good), step, payload, &n, trailer),
			1);
		assert_int_equal(n, 11);
		assert_memory_equal(payload, "hello world", 11);
		assert_string_equal(trailer, "DUoRhQ==");
	}
	/* The name is matched case-insensitively, spaces around the value are dropped; an empty body. */
	unsigned_case("mixed-case name", "0\r\nX-Amz-Checksum-CRC32: AAAAAA== \r\n\r\n", 1);
	unsigned_case("no trailer", "5\r\nhello\r\n0\r\n\r\n", -1);
	unsigned_case("another trailer", "5\r\nhello\r\n0\r\nx-amz-checksum-sha1:AAAA\r\n\r\n", -1);
	unsigned_case("trailer twice", "0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
		      -1);
	unsigned_case("signature line in the unsigned form",
		      "0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-trailer-signature:"
		      "0000000000000000000000000000000000000000000000000000000000000000\r\n\r\n",
		      -1);
	unsigned_case("empty value", "0\r\nx-amz-checksum-crc32:\r\n\r\n", -1);
	unsigned_case("no colon", "0\r\nx-amz-checksum-crc32\r\n\r\n", -1);
	unsigned_case("chunk extension", "5;chunk-signature=00\r\nhello\r\n0\r\nx-amz-checksum-crc32:A\r\n\r\n", -1);
	unsigned_case("bare LF in the trailer", "0\r\nx-amz-checksum-crc32:A\n\r\n", -1);
	unsigned_case("garbage after the end", "0\r\nx-amz-checksum-crc32:A\r\n\r\nx", -1);
	unsigned_case("cut in the trailer", "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:A\r\n", 0);
	unsigned_case("cut before the trailer", "5\r\nhello\r\n0\r\n", 0);
	unsigned_case("short data", "5\r\nhell\r\n0\r\nx-amz-checksum-crc32:A\r\n\r\n", -1);
	{
		char longline[400];
		snprintf(longline, sizeof(longline), "0\r\nx-amz-checksum-crc32:%0300d\r\n\r\n", 0);
		unsigned_case("oversize trailer line", longline, -1);
	}
	/* No trailer name, no decoder; a bad one neither. */
	assert_null(ft_sigv4_chunked_new_mode(NULL, FT_CHUNKED_UNSIGNED_TRAILER, NULL));
	assert_null(ft_sigv4_chunked_new_mode(NULL, FT_CHUNKED_UNSIGNED_TRAILER, "a b"));
	assert_null(ft_sigv4_chunked_new_mode(NULL, FT_CHUNKED_SIGNED_TRAILER, "x-amz-checksum-crc32"));
}

static void test_chunked_signed_trailer(void **state)
{
	static const char bad_sig[] = "0000000000000000000000000000000000000000000000000000000000000000";
	ft_sigv4_auth_t auth;
	char payload[2048], data[1000], trailer[FT_CHUNKED_TRAILER_MAX + 1], *body = malloc(8192);
	size_t len, n;

	(void)state;
	assert_non_null(body);
	chunked_seed(&auth);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	for (size_t step = 0; step < 5; step++) {
		len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL,
					  body);
		assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len, step * 7, payload, &n, trailer),
				 1);
		assert_int_equal(n, sizeof(data));
		assert_memory_equal(payload, data, n);
		assert_string_equal(trailer, "sOO8/Q==");
	}
	/* A changed trailer value, a wrong signature, a changed data byte: -2. */
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	*strstr(body, "sOO8") = 't';
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len, 0, payload, &n, trailer), -2);
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", bad_sig, body);
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len, 0, payload, &n, trailer), -2);
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	body[strstr(body, "\r\n") - body + 5] ^= 1;
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len, 0, payload, &n, trailer), -2);
	/* The final chunk's signature is checked before the trailer. */
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	{
		char *fin = strstr(body, "\r\n0;chunk-signature=") + 20;
		fin[0] = fin[0] == '0' ? '1' : '0';
	}
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len, 0, payload, &n, trailer), -2);
	/* The trailer without its signature; a line after the signature; the plain final CRLF. */
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	len = (size_t)(strstr(body, "x-amz-trailer-signature") - body);
	memcpy(body + len, "\r\n", 2);
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len + 2, 0, payload, &n, trailer), -1);
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	memcpy(body + len - 2, "x:y\r\n\r\n", 7);
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len + 5, 0, payload, &n, trailer), -1);
	len = signed_trailer_body(&auth, data, sizeof(data), 300, "x-amz-checksum-crc32", "sOO8/Q==", NULL, body);
	len = (size_t)(strstr(body, "x-amz-checksum-crc32:") - body);
	memcpy(body + len, "\r\n", 2);
	assert_int_equal(feed_mode(&auth, FT_CHUNKED_SIGNED_TRAILER, body, len + 2, 0, payload, &n, trailer), -1);
	free(body);
}

/* ---- x-amz-checksum-* ---- */

/* The checksum of s fed in pieces of step bytes (0: at once). */
static void ck_of(ft_xsum_alg_t alg, const char *s, size_t step, char out[FT_XSUM_B64_MAX])
{
	ft_xsum_t c;
	size_t n = strlen(s), off = 0;

	assert_int_equal(ft_xsum_init(&c, alg), 0);
	while (off < n) {
		size_t k = step == 0 || step > n - off ? n - off : step;
		ft_xsum_update(&c, s + off, k);
		off += k;
	}
	assert_int_equal(ft_xsum_final(&c, out), 0);
}

static void test_checksums(void **state)
{
	static const struct {
		ft_xsum_alg_t alg;
		const char *in, *b64;
	} vec[] = {
		{FT_XSUM_CRC32, "123456789", "y/Q5Jg=="},  /* CRC-32 check value 0xcbf43926 */
		{FT_XSUM_CRC32C, "123456789", "4waSgw=="}, /* CRC-32C check value 0xe3069283 */
		{FT_XSUM_SHA1, "abc", "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="},
		{FT_XSUM_SHA256, "abc", "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="},
		{FT_XSUM_CRC32, "", "AAAAAA=="},
		{FT_XSUM_CRC32, "hello world", "DUoRhQ=="},
		/* CRC-64/NVME check value 0xae8b14860a799888 */
		{FT_XSUM_CRC64NVME, "123456789", "rosUhgp5mIg="},
		{FT_XSUM_CRC64NVME, "", "AAAAAAAAAAA="},
		/* longer than one 8-byte step, fed in odd pieces */
		{FT_XSUM_CRC64NVME, "The quick brown fox jumps over the lazy dog", NULL},
	};
	char out[FT_XSUM_B64_MAX];
	ft_xsum_t c;

	(void)state;
	for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
		char first[FT_XSUM_B64_MAX];
		ck_of(vec[i].alg, vec[i].in, 0, first);
		for (size_t step = 0; step < 12; step++) {
			ck_of(vec[i].alg, vec[i].in, step, out);
			assert_string_equal(out, vec[i].b64 != NULL ? vec[i].b64 : first);
		}
		assert_true(ft_xsum_value_ok(vec[i].alg, out));
	}
	assert_int_equal(ft_xsum_from_name("X-Amz-Checksum-CRC32"), FT_XSUM_CRC32);
	assert_int_equal(ft_xsum_from_name("x-amz-checksum-crc32c"), FT_XSUM_CRC32C);
	assert_int_equal(ft_xsum_from_name("x-amz-checksum-crc64nvme"), FT_XSUM_CRC64NVME);
	assert_int_equal(ft_xsum_from_name("x-amz-checksum-sha1"), FT_XSUM_SHA1);
	assert_int_equal(ft_xsum_from_name("x-amz-checksum-sha256"), FT_XSUM_SHA256);
	assert_int_equal(ft_xsum_from_name("x-amz-checksum-md5"), FT_XSUM_NONE);
	assert_int_equal(ft_xsum_from_name(NULL), FT_XSUM_NONE);
	assert_string_equal(ft_xsum_label(FT_XSUM_SHA256), "SHA256");
	/* Values: one digest's base64, exactly. */
	assert_false(ft_xsum_value_ok(FT_XSUM_CRC32, "y/Q5Jg="));
	assert_false(ft_xsum_value_ok(FT_XSUM_CRC32, "y/Q5Jg==AAAA"));
	assert_false(ft_xsum_value_ok(FT_XSUM_CRC32, "y/Q5J!=="));
	assert_false(ft_xsum_value_ok(FT_XSUM_SHA1, "y/Q5Jg=="));
	assert_false(ft_xsum_value_ok(FT_XSUM_SHA256, "qZk+NkcGgWq6PiVxeFDCbJzQ2J0="));
	assert_true(ft_xsum_value_ok(FT_XSUM_CRC64NVME, "AAAAAAAAAAA="));
	assert_false(ft_xsum_value_ok(FT_XSUM_CRC64NVME, "y/Q5Jg=="));
	assert_int_equal(ft_crc64nvme(0, "123456789", 9), 0xae8b14860a799888ull);
	assert_int_equal(ft_crc64nvme(ft_crc64nvme(0, "1234", 4), "56789", 5), 0xae8b14860a799888ull);
	assert_int_equal(ft_xsum_from_label("crc64nvme"), FT_XSUM_CRC64NVME);
	assert_int_equal(ft_xsum_from_label("MD5"), FT_XSUM_NONE);
	assert_int_equal(ft_xsum_digest_len(FT_XSUM_SHA1), 20);
	assert_false(ft_xsum_value_ok(FT_XSUM_CRC32, NULL));
	/* NONE is not computed; abort releases a SHA state. */
	assert_int_equal(ft_xsum_init(&c, FT_XSUM_NONE), -1);
	assert_int_equal(ft_xsum_init(&c, FT_XSUM_SHA256), 0);
	ft_xsum_update(&c, "x", 1);
	ft_xsum_abort(&c);
	ft_xsum_abort(&c);
}

/* ---- small pieces ---- */

/* A header value that is not UTF-8 is canonicalized as Latin-1 recoded to UTF-8 (what the JavaScript SDK signed). */
static void test_latin1_header_value(void **state)
{
	ft_sigv4_header_t h1[] = {{"host", "h"}, {"x-amz-meta-note", "caf\xe9"}};
	ft_sigv4_header_t h2[] = {{"host", "h"}, {"x-amz-meta-note", "caf\xc3\xa9"}};
	ft_sigv4_request_t a = {.method = "PUT", .path = "/b/k", .query = "", .headers = h1, .n_headers = 2};
	ft_sigv4_request_t b = a;
	ft_strbuf_t ca = {0}, cb = {0};

	(void)state;
	b.headers = h2;
	assert_int_equal(ft_sigv4_canonical_request(&ca, &a, "host;x-amz-meta-note", 0, "UNSIGNED-PAYLOAD"), 0);
	assert_int_equal(ft_sigv4_canonical_request(&cb, &b, "host;x-amz-meta-note", 0, "UNSIGNED-PAYLOAD"), 0);
	assert_string_equal(ca.p, cb.p);
	assert_non_null(strstr(ca.p, "x-amz-meta-note:caf\xc3\xa9\n"));
	ft_strbuf_free(&ca);
	ft_strbuf_free(&cb);
}

static void test_sha256_and_names(void **state)
{
	char hex[FT_SHA256_HEX], date[17];
	ft_sha256_t h;

	(void)state;
	assert_int_equal(ft_sha256_init(&h), 0);
	ft_sha256_final(&h, hex);
	assert_string_equal(hex, EMPTY_SHA256);
	assert_int_equal(ft_sha256_init(&h), 0);
	ft_sha256_update(&h, "a", 1);
	ft_sha256_update(&h, "", 0);
	ft_sha256_update(&h, "bc", 2);
	ft_sha256_final(&h, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"); /* FIPS 180-2 */
	ft_sha256_final(&h, hex); /* after final: released, empty result */
	assert_string_equal(hex, "");
	assert_int_equal(ft_sha256_init(&h), 0);
	ft_sha256_update(&h, "Welcome to Amazon S3.", 21);
	ft_sha256_final(&h, hex);
	assert_string_equal(hex, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");

	ft_date_format_amz(0, date);
	assert_string_equal(date, "19700101T000000Z");
	ft_date_format_amz(at(S3_DATE), date);
	assert_string_equal(date, S3_DATE);

	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_MISMATCH), "SignatureDoesNotMatch");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_UNKNOWN_KEY), "InvalidAccessKeyId");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_SKEWED), "RequestTimeTooSkewed");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_EXPIRED), "AccessDenied");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_MALFORMED), "AuthorizationHeaderMalformed");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_UNSUPPORTED), "AccessDenied");
	assert_string_equal(ft_sigv4_error_code(FT_SIGV4_ANONYMOUS), "AccessDenied");
	assert_string_equal(ft_sigv4_error_code((ft_sigv4_result_t)99), "InternalError");
	for (int r = FT_SIGV4_OK; r <= FT_SIGV4_UNSUPPORTED; r++)
		assert_true(strlen(ft_sigv4_strerror((ft_sigv4_result_t)r)) > 0);
	assert_string_equal(ft_sigv4_strerror(FT_SIGV4_EXPIRED), "Request has expired");
}

/* ---- requests signed by botocore (FT_SIGV4_CASES=<json>, written by tests/integration/test_sigv4_boto.py) ---- */

static json_t *cases_keys; /* the file's {"access key": "secret"} */

static const char *lookup_case_secret(void *ctx, const char *access_key)
{
	json_t *v = json_object_get(cases_keys, access_key);

	(void)ctx;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int result_by_name(const char *name)
{
	static const char *const names[] = {
		[FT_SIGV4_OK] = "OK",
		[FT_SIGV4_ANONYMOUS] = "ANONYMOUS",
		[FT_SIGV4_MALFORMED] = "MALFORMED",
		[FT_SIGV4_UNKNOWN_KEY] = "UNKNOWN_KEY",
		[FT_SIGV4_MISMATCH] = "MISMATCH",
		[FT_SIGV4_EXPIRED] = "EXPIRED",
		[FT_SIGV4_SKEWED] = "SKEWED",
		[FT_SIGV4_UNSUPPORTED] = "UNSUPPORTED",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (name != NULL && strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

/* Hex-decodes a JSON string into a malloc'ed buffer. */
static uint8_t *hex_field(json_t *c, const char *key, size_t *len)
{
	const char *s = json_string_value(json_object_get(c, key));
	size_t n = s ? strlen(s) : 0;
	uint8_t *out = malloc(n / 2 + 1);

	assert_non_null(out);
	for (size_t i = 0; i + 1 < n; i += 2) {
		unsigned v;

		assert_int_equal(sscanf(s + i, "%2x", &v), 1);
		out[i / 2] = (uint8_t)v;
	}
	*len = n / 2;
	return out;
}

/* The body checks behind an accepted request: payload hash, or the aws-chunked stream. */
static int check_case_body(json_t *c, const ft_sigv4_request_t *req, const ft_sigv4_auth_t *auth)
{
	const char *content_sha = NULL;
	size_t body_len, want_len, got_len;
	uint8_t *body, *want, *got;
	int ok = 1;

	if (json_object_get(c, "body_hex") == NULL)
		return 1;
	for (int i = 0; i < req->n_headers; i++)
		if (strcasecmp(req->headers[i].name, "x-amz-content-sha256") == 0)
			content_sha = req->headers[i].value;
	body = hex_field(c, "body_hex", &body_len);
	if (content_sha != NULL && strcmp(content_sha, FT_SIGV4_STREAMING) == 0) {
		int rc = feed_all(auth, body, body_len, 5, &got, &got_len);

		want = hex_field(c, "payload_hex", &want_len);
		ok = rc == 1 && got_len == want_len && memcmp(got, want, want_len) == 0;
		if (!ok)
			printf("   aws-chunked body: feed gave %d, %zu bytes (want %zu)\n", rc, got_len, want_len);
		free(got);
		free(want);
	} else if (content_sha != NULL && strlen(content_sha) == 64) {
		char hex[FT_SHA256_HEX];
		ft_sha256_t h;

		assert_int_equal(ft_sha256_init(&h), 0);
		for (size_t off = 0; off < body_len; off += 1000)
			ft_sha256_update(&h, body + off, body_len - off < 1000 ? body_len - off : 1000);
		ft_sha256_final(&h, hex);
		ok = strcmp(hex, content_sha) == 0;
		if (!ok)
			printf("   body sha256 %s != x-amz-content-sha256 %s\n", hex, content_sha);
	}
	free(body);
	return ok;
}

/* Verifies one case; returns 1 when the result is the expected one. */
static int run_case(json_t *c)
{
	const char *name = json_string_value(json_object_get(c, "name"));
	int expected = result_by_name(json_string_value(json_object_get(c, "expect")));
	json_t *headers = json_object_get(c, "headers");
	ft_sigv4_header_t *h;
	ft_sigv4_request_t req = {0};
	ft_sigv4_auth_t auth;
	ft_sigv4_result_t r;
	int ok;

	if (name == NULL || expected < 0 || !json_is_array(headers))
		fail_msg("case without name, known expect or headers");
	h = calloc(json_array_size(headers) + 1, sizeof(*h));
	assert_non_null(h);
	for (size_t i = 0; i < json_array_size(headers); i++) {
		h[i].name = json_string_value(json_array_get(json_array_get(headers, i), 0));
		h[i].value = json_string_value(json_array_get(json_array_get(headers, i), 1));
		assert_non_null(h[i].name);
		assert_non_null(h[i].value);
	}
	req.method = json_string_value(json_object_get(c, "method"));
	req.path = json_string_value(json_object_get(c, "path"));
	req.query = json_string_value(json_object_get(c, "query"));
	req.headers = h;
	req.n_headers = (int)json_array_size(headers);
	assert_non_null(req.method);
	assert_non_null(req.path);
	assert_non_null(req.query);
	r = ft_sigv4_verify(&req, (time_t)json_integer_value(json_object_get(c, "now")), lookup_case_secret, NULL,
			    &auth);
	ok = (int)r == expected;
	if (!ok)
		printf("FAIL %s: got %d (%s), expected %d\n   %s %s?%s\n", name, (int)r, ft_sigv4_strerror(r), expected,
		       req.method, req.path, req.query);
	if (ok && r == FT_SIGV4_OK) {
		/* "expect_body": "bad" marks a tampered body: its check must fail. */
		int body_ok = check_case_body(c, &req, &auth);
		const char *want = json_string_value(json_object_get(c, "expect_body"));
		int want_ok = want == NULL || strcmp(want, "bad") != 0;

		ok = body_ok == want_ok;
		if (!ok)
			printf("FAIL %s: body check %s, expected it to %s\n", name, body_ok ? "passed" : "failed",
			       want_ok ? "pass" : "fail");
	}
	free(h);
	return ok;
}

static void test_external_cases(void **state)
{
	const char *file = getenv("FT_SIGV4_CASES");
	json_error_t err;
	json_t *root, *cases;
	size_t checked = 0, failed = 0;

	(void)state;
	assert_non_null(file);
	root = json_load_file(file, 0, &err);
	if (root == NULL)
		fail_msg("%s:%d: %s", file, err.line, err.text);
	cases_keys = json_object_get(root, "keys");
	cases = json_object_get(root, "cases");
	assert_true(json_is_object(cases_keys));
	assert_true(json_is_array(cases));
	for (size_t i = 0; i < json_array_size(cases); i++) {
		checked++;
		failed += !run_case(json_array_get(cases, i));
	}
	printf("sigv4 cases: %zu checked, %zu failed\n", checked, failed);
	fflush(stdout);
	json_decref(root);
	cases_keys = NULL;
	assert_true(checked > 0);
	assert_int_equal(failed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suite_sign),
		cmocka_unit_test(test_suite_verify),
		cmocka_unit_test(test_s3_examples),
		cmocka_unit_test(test_s3_wire_forms),
		cmocka_unit_test(test_canonical_forms),
		cmocka_unit_test(test_presigned_example),
		cmocka_unit_test(test_presigned_tampering),
		cmocka_unit_test(test_presigned_after_cached_key),
		cmocka_unit_test(test_header_parsing),
		cmocka_unit_test(test_header_dates),
		cmocka_unit_test(test_sign_then_verify),
		cmocka_unit_test(test_signing_key_cache),
		cmocka_unit_test(test_chunked_example),
		cmocka_unit_test(test_chunked_errors),
		cmocka_unit_test(test_chunked_unsigned_trailer),
		cmocka_unit_test(test_chunked_signed_trailer),
		cmocka_unit_test(test_checksums),
		cmocka_unit_test(test_latin1_header_value),
		cmocka_unit_test(test_sha256_and_names),
	};
	const struct CMUnitTest external[] = {
		cmocka_unit_test(test_external_cases),
	};

	/* With FT_SIGV4_CASES set (by the boto integration test) only those cases run. */
	if (getenv("FT_SIGV4_CASES") != NULL)
		return cmocka_run_group_tests_name("sigv4_boto_cases", external, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
