/* SPDX-License-Identifier: Apache-2.0 */
/* S3 Signature Version 2 verification (HMAC-SHA1), header and presigned-query forms: boto3's default presigned URLs use it. */
#include "s3/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/codec.h"

/*
 * DESIGN
 * botocore 1.29 (Debian 12) still presigns S3 URLs with SigV2 by default
 * (?AWSAccessKeyId=..&Expires=..&Signature=..), and some older clients sign headers with
 * "Authorization: AWS KEY:SIG". Both sign the same string:
 *   METHOD \n Content-MD5 \n Content-Type \n (Date | Expires) \n x-amz-* headers \n resource
 * where the resource is the raw request path (prefixed with "/<bucket>" for virtual-host style)
 * plus the sub-resource query parameters S3 defines, sorted, with decoded values. The payload
 * is not signed in SigV2 (as in SigV4 with UNSIGNED-PAYLOAD).
 */

#define V2_SKEW_SECONDS (15 * 60)
#define V2_MAX_STS 16384

/* Query parameters that are part of the signed resource (S3's list). */
static const char *const sub_resources[] = {
	"accelerate",
	"acl",
	"analytics",
	"cors",
	"delete",
	"inventory",
	"lifecycle",
	"location",
	"logging",
	"metrics",
	"notification",
	"object-lock",
	"partNumber",
	"policy",
	"replication",
	"requestPayment",
	"response-cache-control",
	"response-content-disposition",
	"response-content-encoding",
	"response-content-language",
	"response-content-type",
	"response-expires",
	"restore",
	"select",
	"select-type",
	"storageClass",
	"tagging",
	"torrent",
	"uploadId",
	"uploads",
	"versionId",
	"versioning",
	"versions",
	"website",
};

typedef struct {
	char *buf;
	size_t len, cap;
	bool overflow;
} sts_t;

static void put(sts_t *s, const char *p, size_t n)
{
	if (s->overflow || s->len + n + 1 > s->cap) {
		s->overflow = true;
		return;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	s->buf[s->len] = '\0';
}

static void puts_(sts_t *s, const char *p)
{
	put(s, p, strlen(p));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Lowercased names "x-amz-...:value" of the request's x-amz-* headers, sorted, duplicates joined by ','. */
static void amz_headers(ft_req_t *r, sts_t *s)
{
	int n = ft_req_header_count(r), k = 0;
	char **lines = ft_req_alloc(r, (size_t)(n > 0 ? n : 1) * sizeof(char *));

	for (int i = 0; i < n; i++) {
		const char *name, *value;
		ft_req_header_at(r, i, &name, &value);
		if (strncasecmp(name, "x-amz-", 6) != 0)
			continue;
		size_t nl = strlen(name), vl = strlen(value);
		char *line = ft_req_alloc(r, nl + 1 + vl + 1);
		for (size_t j = 0; j < nl; j++)
			line[j] = (char)(name[j] >= 'A' && name[j] <= 'Z' ? name[j] - 'A' + 'a' : name[j]);
		line[nl] = ':';
		memcpy(line + nl + 1, value, vl + 1);
		lines[k++] = line;
	}
	qsort(lines, (size_t)k, sizeof(*lines), cmp_str);
	for (int i = 0; i < k; i++) {
		size_t nl = (size_t)(strchr(lines[i], ':') - lines[i]);
		if (i > 0 && strncmp(lines[i - 1], lines[i], nl + 1) == 0) {
			put(s, ",", 1);
			puts_(s, lines[i] + nl + 1); /* same name again: values joined */
			continue;
		}
		if (i > 0)
			put(s, "\n", 1);
		puts_(s, lines[i]);
	}
	if (k > 0)
		put(s, "\n", 1);
}

static bool is_sub_resource(const char *k, size_t n)
{
	for (size_t i = 0; i < sizeof(sub_resources) / sizeof(sub_resources[0]); i++)
		if (strlen(sub_resources[i]) == n && memcmp(sub_resources[i], k, n) == 0)
			return true;
	return false;
}

/* Appends the percent-decoded v[0..n) ('+' stays '+', as the signers do). */
static void put_decoded(sts_t *s, const char *v, size_t n)
{
	for (size_t i = 0; i < n;) {
		char c = (char)ft_pct_next(v, n, &i, 0);
		put(s, &c, 1);
	}
}

typedef struct {
	const char *k, *v; /* raw; v NULL when the parameter has no '=' */
	size_t kn, vn;
} param_t;

static int cmp_param(const void *a, const void *b)
{
	const param_t *x = a, *y = b;
	size_t n = x->kn < y->kn ? x->kn : y->kn;
	int c = memcmp(x->k, y->k, n);

	return c != 0 ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

/* "?k=v&k2" of the signed sub-resources of the raw query (sorted by key, values decoded). */
static void resource_query(ft_req_t *r, sts_t *s)
{
	const char *q = ft_req_query_string(r);
	size_t max = 1, n = 0;

	for (const char *p = q; *p; p++)
		max += *p == '&';
	param_t *v = ft_req_alloc(r, max * sizeof(*v));
	while (*q) {
		size_t len = strcspn(q, "&");
		const char *eq = memchr(q, '=', len);
		size_t kn = eq != NULL ? (size_t)(eq - q) : len;
		if (is_sub_resource(q, kn))
			v[n++] = (param_t){q, eq != NULL ? eq + 1 : NULL, kn, eq != NULL ? len - kn - 1 : 0};
		q += len;
		if (*q == '&')
			q++;
	}
	/* A stable sort: repeated keys keep their order (insertion sort; there are few). */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && cmp_param(&v[j - 1], &v[j]) > 0; j--) {
			param_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		put(s, i == 0 ? "?" : "&", 1);
		put(s, v[i].k, v[i].kn);
		if (v[i].v != NULL) {
			put(s, "=", 1);
			put_decoded(s, v[i].v, v[i].vn);
		}
	}
}

static bool sign_equals(const char *secret, const sts_t *s, const char *given)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;
	char b64[FT_BASE64_LEN(EVP_MAX_MD_SIZE) + 1];

	if (HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)s->buf, s->len, mac, &maclen) == NULL)
		return false;
	size_t n = ft_base64_encode(mac, maclen, b64);
	return strlen(given) == n && CRYPTO_memcmp(b64, given, n) == 0;
}

int px_s3_sigv2_verify(ft_req_t *r, const char *vhost_bucket, const char *raw_path, time_t now,
		       ft_sigv4_secret_fn secret_fn, void *ctx, ft_sigv4_result_t *res, char *access, size_t access_cap)
{
	const char *authz = ft_req_header(r, "Authorization");
	const char *qkey = ft_req_query(r, "AWSAccessKeyId");
	const char *qsig = ft_req_query(r, "Signature");
	const char *expires = ft_req_query(r, "Expires");
	const char *key, *sig, *date;
	char keybuf[256];
	sts_t s = {0};
	bool presigned;

	if (authz != NULL && strncmp(authz, "AWS ", 4) == 0) {
		const char *colon = strrchr(authz + 4, ':');
		if (colon == NULL || (size_t)(colon - authz - 4) >= sizeof(keybuf)) {
			*res = FT_SIGV4_MALFORMED;
			return 1;
		}
		memcpy(keybuf, authz + 4, (size_t)(colon - authz - 4));
		keybuf[colon - authz - 4] = '\0';
		key = keybuf;
		sig = colon + 1;
		presigned = false;
	} else if (authz == NULL && qkey != NULL && qsig != NULL) {
		key = qkey;
		sig = qsig;
		presigned = true;
	} else {
		return 0; /* not a SigV2 request */
	}
	snprintf(access, access_cap, "%s", key);
	const char *secret = secret_fn(ctx, key);
	if (secret == NULL) {
		*res = FT_SIGV4_UNKNOWN_KEY;
		return 1;
	}
	if (presigned) {
		char *end = NULL;
		long long e = expires != NULL ? strtoll(expires, &end, 10) : 0;
		if (expires == NULL || end == expires || *end != '\0') {
			*res = FT_SIGV4_MALFORMED;
			return 1;
		}
		date = expires;
		if ((long long)now > e) {
			*res = FT_SIGV4_EXPIRED;
			return 1;
		}
	} else {
		const char *amz = ft_req_header(r, "x-amz-date");
		const char *d = ft_req_header(r, "Date");
		time_t t;
		if (ft_date_parse(amz != NULL ? amz : d != NULL ? d : "", FT_DATE_HTTP | FT_DATE_AMZ, &t) != 0) {
			*res = FT_SIGV4_MALFORMED;
			return 1;
		}
		if (t > now + V2_SKEW_SECONDS || t < now - V2_SKEW_SECONDS) {
			*res = FT_SIGV4_SKEWED;
			return 1;
		}
		date = amz != NULL ? "" : d; /* x-amz-date is signed among the amz headers instead */
	}
	s.cap = V2_MAX_STS;
	s.buf = malloc(s.cap);
	if (s.buf == NULL) {
		*res = FT_SIGV4_MISMATCH;
		return 1;
	}
	const char *md5 = ft_req_header(r, "Content-MD5");
	const char *ctype = ft_req_header(r, "Content-Type");
	puts_(&s, ft_req_method_name(r));
	put(&s, "\n", 1);
	puts_(&s, md5 != NULL ? md5 : "");
	put(&s, "\n", 1);
	puts_(&s, ctype != NULL ? ctype : "");
	put(&s, "\n", 1);
	puts_(&s, date);
	put(&s, "\n", 1);
	amz_headers(r, &s);
	if (vhost_bucket != NULL) {
		put(&s, "/", 1);
		puts_(&s, vhost_bucket);
	}
	puts_(&s, raw_path);
	resource_query(r, &s);
	*res = !s.overflow && sign_equals(secret, &s, sig) ? FT_SIGV4_OK : FT_SIGV4_MISMATCH;
	free(s.buf);
	return 1;
}
