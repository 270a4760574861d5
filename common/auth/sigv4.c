/* AWS Signature Version 4 on OpenSSL: canonical requests, signing, header/presigned verification, aws-chunked. */
/*
 * DESIGN
 * - One canonicalization serves both directions: ft_sigv4_sign() and ft_sigv4_verify() build the
 *   canonical request with the same code, so what we sign for a backend is what we check from a client.
 * - S3 rules, not the generic SigV4 ones: the canonical URI is the path as sent, never dot-normalized
 *   and never double-encoded. Each '/'-separated segment is percent-decoded once and re-encoded
 *   (RFC 3986 unreserved kept, everything else %XX uppercase), so "~", "%7e" and "%7E" all
 *   canonicalize alike and "%2F" inside a segment stays "%2F". In the path '+' is a plus ("%2B").
 * - Query: '&'-separated, empty pieces ignored, split at the first '=', a piece without '=' gets an
 *   empty value; names and values recoded like path segments (with '/' encoded), then sorted by
 *   name, then value, bytewise. In the query a raw '+' is a space (form encoding, as S3 reads it:
 *   the Go SDK and curl send spaces as '+' and sign them as "%20"); a plus is sent as "%2B".
 * - Headers: only the client's SignedHeaders, in its order, names lowercased; all values of one
 *   name joined with ',', each trimmed with inner whitespace runs folded to one space.
 * - Payload line: x-amz-content-sha256 as sent (header form; else the caller's payload_hash),
 *   UNSIGNED-PAYLOAD for presigned URLs. Any value is accepted here: the caller checks the body.
 * - Time and key checks come before the (costlier) signature check; the signature comparison is
 *   constant-time (CRYPTO_memcmp).
 * - Signing keys are derived once per (secret, date, region, service) and kept in a small cache
 *   (KEY_CACHE_SLOTS entries, under a mutex, oldest replaced first): a key is valid for a whole
 *   day, and deriving it costs four HMACs per request otherwise.
 * - The chunked decoder hands payload bytes out as they arrive and checks each chunk's signature
 *   when its trailing CRLF arrives: bytes from a chunk whose signature fails were already handed
 *   out, so callers write to a work file and keep it only once feed returned 1.
 */
#include "auth/sigv4.h"
#include "base/strbuf.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#define ALGORITHM "AWS4-HMAC-SHA256"
#define TERMINATOR "aws4_request"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_SKEW_SECONDS (15 * 60)
#define MAX_PRESIGN_EXPIRES 604800L
#define CHUNK_HEADER_MAX 128 /* "<16 hex>;chunk-signature=<64 hex>" is 97 bytes */
#define KEY_CACHE_SLOTS 16
#define KEY_CACHE_SECRET_MAX 128 /* longer secrets are not cached (derived each time) */

/* ---- hashing ---- */

static void hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * HMAC-SHA256 contexts are copied from one template and SHA-256 uses one fetched EVP_MD, both
 * made once per process and never freed (shared read-only by all threads): naming the digest on
 * every call makes OpenSSL 3 look it up again each time, which costs more than the hashing.
 */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static EVP_MAC_CTX *hmac_template;
static EVP_MD *sha256_md;

static void crypto_setup(void)
{
	static char digest[] = "SHA256";
	OSSL_PARAM params[2];
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	if (ctx != NULL && EVP_MAC_CTX_set_params(ctx, params) != 1) {
		EVP_MAC_CTX_free(ctx);
		ctx = NULL;
	}
	EVP_MAC_free(mac); /* the context keeps its own reference */
	hmac_template = ctx;
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* The SHA-256 implementation (NULL only if OpenSSL lacks it). */
static const EVP_MD *sha256_impl(void)
{
	pthread_once(&crypto_once, crypto_setup);
	return sha256_md;
}

/* Hex SHA-256 of buf; returns 0 or -1. */
static int sha256_hex(const void *buf, size_t len, char hex[FT_SHA256_HEX])
{
	uint8_t md[32];
	unsigned int n = 0;

	if (EVP_Digest(buf, len, md, &n, sha256_impl(), NULL) != 1 || n != 32)
		return -1;
	hex_encode(md, 32, hex);
	return 0;
}

/*
 * One operation's HMAC context: copied from the template on first use, then re-keyed for every
 * HMAC of the operation (about 3x cheaper than a fresh copy each time); hmac_done frees it.
 */
typedef struct {
	EVP_MAC_CTX *ctx;
} hmac_t;

/* out = HMAC-SHA256(key, msg); returns 0 or -1. */
static int hmac_sha256(hmac_t *h, const void *key, size_t key_len, const void *msg, size_t len, uint8_t out[32])
{
	size_t out_len = 0;

	if (h->ctx == NULL) {
		pthread_once(&crypto_once, crypto_setup);
		if (hmac_template == NULL)
			return -1;
		h->ctx = EVP_MAC_CTX_dup(hmac_template);
		if (h->ctx == NULL)
			return -1;
	}
	if (EVP_MAC_init(h->ctx, key, key_len, NULL) != 1 || EVP_MAC_update(h->ctx, msg, len) != 1 ||
	    EVP_MAC_final(h->ctx, out, &out_len, 32) != 1 || out_len != 32)
		return -1;
	return 0;
}

static void hmac_done(hmac_t *h)
{
	EVP_MAC_CTX_free(h->ctx);
	h->ctx = NULL;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date8), region), service), "aws4_request"). */
static int derive_signing_key(hmac_t *h, const char *secret, const char *date8, const char *region, const char *service,
			      uint8_t key[32])
{
	ft_strbuf_t k_secret = {0};
	uint8_t k[32];
	int rc = -1;

	ft_strbuf_adds(&k_secret, "AWS4");
	ft_strbuf_adds(&k_secret, secret);
	if (k_secret.failed)
		goto out;
	if (hmac_sha256(h, k_secret.p, k_secret.len, date8, strlen(date8), k) != 0 ||
	    hmac_sha256(h, k, 32, region, strlen(region), k) != 0 ||
	    hmac_sha256(h, k, 32, service, strlen(service), k) != 0 ||
	    hmac_sha256(h, k, 32, TERMINATOR, strlen(TERMINATOR), key) != 0)
		goto out;
	rc = 0;
out:
	if (k_secret.p != NULL)
		OPENSSL_cleanse(k_secret.p, k_secret.len);
	OPENSSL_cleanse(k, sizeof(k));
	ft_strbuf_free(&k_secret);
	return rc;
}

/* ---- signing key cache (see DESIGN) ---- */

typedef struct {
	bool used;
	char secret[KEY_CACHE_SECRET_MAX + 1];
	char date8[9];
	char region[64];
	char service[32];
	uint8_t key[32];
} key_slot_t;

static pthread_mutex_t key_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static key_slot_t key_cache[KEY_CACHE_SLOTS];
static unsigned key_cache_next; /* the slot replaced next */

static bool key_fits(const char *secret, const char *date8, const char *region, const char *service)
{
	return strlen(secret) <= KEY_CACHE_SECRET_MAX && strlen(date8) < sizeof(key_cache[0].date8) &&
	       strlen(region) < sizeof(key_cache[0].region) && strlen(service) < sizeof(key_cache[0].service);
}

/* derive_signing_key through the cache: the same result, four HMACs only on a miss. */
static int signing_key(hmac_t *h, const char *secret, const char *date8, const char *region, const char *service,
		       uint8_t key[32])
{
	key_slot_t *e;
	unsigned i;

	if (!key_fits(secret, date8, region, service))
		return derive_signing_key(h, secret, date8, region, service, key);
	pthread_mutex_lock(&key_cache_mu);
	for (i = 0; i < KEY_CACHE_SLOTS; i++) {
		e = &key_cache[i];
		if (e->used && strcmp(e->date8, date8) == 0 && strcmp(e->region, region) == 0 &&
		    strcmp(e->service, service) == 0 && strcmp(e->secret, secret) == 0) {
			memcpy(key, e->key, 32);
			pthread_mutex_unlock(&key_cache_mu);
			return 0;
		}
	}
	pthread_mutex_unlock(&key_cache_mu);
	if (derive_signing_key(h, secret, date8, region, service, key) != 0)
		return -1;
	pthread_mutex_lock(&key_cache_mu);
	e = &key_cache[key_cache_next];
	key_cache_next = (key_cache_next + 1) % KEY_CACHE_SLOTS;
	OPENSSL_cleanse(e, sizeof(*e));
	e->used = true;
	strcpy(e->secret, secret);
	strcpy(e->date8, date8);
	strcpy(e->region, region);
	strcpy(e->service, service);
	memcpy(e->key, key, 32);
	pthread_mutex_unlock(&key_cache_mu);
	return 0;
}

/* ---- percent-encoding ---- */

static int is_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Appends s[0..n) percent-decoded once and then URI-encoded (unreserved kept, uppercase hex, '/'
 * encoded too). A '%' not followed by two hex digits is a literal '%'. in_query: a raw '+' is a
 * space.
 */
static void add_recoded(ft_strbuf_t *b, const char *s, size_t n, int in_query)
{
	static const char digits[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[3];

		if (c == '%' && i + 2 < n && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
			c = (unsigned char)(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
			i += 2;
		} else if (c == '+' && in_query) {
			c = ' ';
		}
		if (is_unreserved(c)) {
			ft_strbuf_addc(b, (char)c);
			continue;
		}
		esc[0] = '%';
		esc[1] = digits[c >> 4];
		esc[2] = digits[c & 15];
		ft_strbuf_add(b, esc, 3);
	}
}

/* The byte at s[*i] of a query piece, percent-decoded, '+' as a space; advances *i past it. */
static char query_byte(const char *s, size_t n, size_t *i)
{
	char c = s[*i];

	if (c == '%' && *i + 2 < n && hex_value(s[*i + 1]) >= 0 && hex_value(s[*i + 2]) >= 0) {
		c = (char)(hex_value(s[*i + 1]) * 16 + hex_value(s[*i + 2]));
		*i += 3;
		return c;
	}
	*i += 1;
	return c == '+' ? ' ' : c;
}

/* Appends the query piece s[0..n) decoded. */
static void add_decoded(ft_strbuf_t *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		char c = query_byte(s, n, &i);

		ft_strbuf_addc(b, c);
	}
}

/* Whether the query piece s[0..n), decoded, is name (no allocation: this runs on every request). */
static int decoded_equals(const char *s, size_t n, const char *name)
{
	size_t i = 0;

	while (i < n) {
		if (*name == '\0' || query_byte(s, n, &i) != *name)
			return 0;
		name++;
	}
	return *name == '\0';
}

/* ---- canonical request ---- */

/* S3 canonical URI: the path as sent, segment by segment recoded, "/" when empty. */
static void add_canonical_uri(ft_strbuf_t *b, const char *path)
{
	const char *seg = path;

	if (path == NULL || *path == '\0') {
		ft_strbuf_addc(b, '/');
		return;
	}
	for (;;) {
		const char *slash = strchr(seg, '/');
		size_t n = slash ? (size_t)(slash - seg) : strlen(seg);

		add_recoded(b, seg, n, 0);
		if (slash == NULL)
			break;
		ft_strbuf_addc(b, '/');
		seg = slash + 1;
	}
}

typedef struct {
	char *name;  /* encoded, owned */
	char *value; /* encoded, owned */
} qparam_t;

static int qparam_cmp(const void *a, const void *b)
{
	const qparam_t *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c != 0 ? c : strcmp(x->value, y->value);
}

static char *recode_dup(const char *s, size_t n)
{
	ft_strbuf_t b = {0};

	add_recoded(&b, s, n, 1);
	if (b.failed) {
		ft_strbuf_free(&b);
		return NULL;
	}
	if (b.p == NULL)
		return calloc(1, 1);
	return b.p;
}

static void free_params(qparam_t *params, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(params[i].name);
		free(params[i].value);
	}
	free(params);
}

/* Appends the canonical query string; skip_signature drops X-Amz-Signature. Returns 0 or -1. */
static int add_canonical_query(ft_strbuf_t *b, const char *query, int skip_signature)
{
	qparam_t *params = NULL;
	size_t n = 0, max = 1;
	int rc = -1;

	if (query == NULL || *query == '\0')
		return 0;
	for (const char *p = query; *p; p++)
		max += *p == '&';
	params = calloc(max, sizeof(*params));
	if (params == NULL)
		return -1;
	for (const char *p = query; *p;) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t name_len = eq ? (size_t)(eq - p) : len;

		if (len > 0) {
			params[n].name = recode_dup(p, name_len);
			params[n].value = eq ? recode_dup(eq + 1, len - name_len - 1) : calloc(1, 1);
			if (params[n].name == NULL || params[n].value == NULL) {
				n++;
				goto out;
			}
			if (skip_signature && strcmp(params[n].name, "X-Amz-Signature") == 0) {
				free(params[n].name);
				free(params[n].value);
				params[n].name = params[n].value = NULL;
			} else {
				n++;
			}
		}
		p += len;
		if (*p == '&')
			p++;
	}
	qsort(params, n, sizeof(*params), qparam_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			ft_strbuf_addc(b, '&');
		ft_strbuf_adds(b, params[i].name);
		ft_strbuf_addc(b, '=');
		ft_strbuf_adds(b, params[i].value);
	}
	rc = 0;
out:
	free_params(params, n);
	return rc;
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Appends v trimmed, with every inner run of whitespace folded to one space. */
static void add_header_value(ft_strbuf_t *b, const char *v)
{
	int pending_space = 0, started = 0;

	for (; v && *v; v++) {
		if (is_space(*v)) {
			pending_space = started;
			continue;
		}
		if (pending_space)
			ft_strbuf_addc(b, ' ');
		pending_space = 0;
		started = 1;
		ft_strbuf_addc(b, *v);
	}
}

static int name_equals(const char *name, const char *s, size_t n)
{
	return name != NULL && strlen(name) == n && strncasecmp(name, s, n) == 0;
}

/* Appends "name:value[,value...]\n" for every name of the ';'-separated list, lowercase names. */
static void add_canonical_headers(ft_strbuf_t *b, const ft_sigv4_request_t *req, const char *list)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ";");
		int first = 1;

		for (size_t i = 0; i < n; i++)
			ft_strbuf_addc(b, (char)((p[i] >= 'A' && p[i] <= 'Z') ? p[i] + 32 : p[i]));
		ft_strbuf_addc(b, ':');
		for (int i = 0; i < req->n_headers; i++) {
			if (!name_equals(req->headers[i].name, p, n))
				continue;
			if (!first)
				ft_strbuf_addc(b, ',');
			add_header_value(b, req->headers[i].value);
			first = 0;
		}
		ft_strbuf_addc(b, '\n');
		p += n;
		if (*p == ';')
			p++;
	}
}

/* Builds the whole canonical request into b. Returns 0 or -1 (allocation). */
static int build_canonical_request(ft_strbuf_t *b, const ft_sigv4_request_t *req, const char *signed_headers,
				   int skip_signature, const char *payload_hash)
{
	ft_strbuf_adds(b, req->method ? req->method : "");
	ft_strbuf_addc(b, '\n');
	add_canonical_uri(b, req->path);
	ft_strbuf_addc(b, '\n');
	if (add_canonical_query(b, req->query, skip_signature) != 0)
		return -1;
	ft_strbuf_addc(b, '\n');
	add_canonical_headers(b, req, signed_headers);
	ft_strbuf_addc(b, '\n');
	ft_strbuf_adds(b, signed_headers);
	ft_strbuf_addc(b, '\n');
	ft_strbuf_adds(b, payload_hash);
	return b->failed ? -1 : 0;
}

/* signature = hex HMAC(key, "AWS4-HMAC-SHA256\n" date "\n" scope "\n" hex sha256(creq)). */
static int request_signature(hmac_t *h, const uint8_t key[32], const char *amz_date, const char *scope,
			     const ft_strbuf_t *creq, char sig[65])
{
	char creq_hash[FT_SHA256_HEX];
	ft_strbuf_t sts = {0};
	uint8_t mac[32];
	int rc = -1;

	if (sha256_hex(creq->p ? creq->p : "", creq->len, creq_hash) != 0)
		goto out;
	ft_strbuf_adds(&sts, ALGORITHM "\n");
	ft_strbuf_adds(&sts, amz_date);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, scope);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, creq_hash);
	if (sts.failed || hmac_sha256(h, key, 32, sts.p, sts.len, mac) != 0)
		goto out;
	hex_encode(mac, 32, sig);
	rc = 0;
out:
	ft_strbuf_free(&sts);
	return rc;
}

/* ---- dates ---- */

static int digits_value(const char *s, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

static int make_time(int year, int mon, int day, int hour, int min, int sec, time_t *t)
{
	struct tm tm = {0};

	if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
		return -1;
	tm.tm_year = year - 1900;
	tm.tm_mon = mon - 1;
	tm.tm_mday = day;
	tm.tm_hour = hour;
	tm.tm_min = min;
	tm.tm_sec = sec;
	*t = timegm(&tm);
	return *t == (time_t)-1 ? -1 : 0;
}

/* Exactly yyyymmddThhmmssZ. */
static int parse_amz_date(const char *s, time_t *t)
{
	int y, mo, d, h, mi, se;

	if (s == NULL || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
		return -1;
	if (digits_value(s, 4, &y) || digits_value(s + 4, 2, &mo) || digits_value(s + 6, 2, &d) ||
	    digits_value(s + 9, 2, &h) || digits_value(s + 11, 2, &mi) || digits_value(s + 13, 2, &se))
		return -1;
	return make_time(y, mo, d, h, mi, se, t);
}

/*
 * IMF-fixdate, as in "Fri, 24 May 2013 00:00:00 GMT" (locale-independent); the zone may also be
 * written "+0000" or "-0000" (Python's email.utils.formatdate, which botocore uses) or "UTC".
 */
static int parse_http_date(const char *s, time_t *t)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	int y, d, h, mi, se;
	const char *m, *zone;

	if (s == NULL || strlen(s) < 25 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
	    s[19] != ':' || s[22] != ':')
		return -1;
	zone = s + 25;
	if (strcmp(zone, " GMT") != 0 && strcmp(zone, " UTC") != 0 && strcmp(zone, " +0000") != 0 &&
	    strcmp(zone, " -0000") != 0)
		return -1;
	if (digits_value(s + 5, 2, &d) || digits_value(s + 12, 4, &y) || digits_value(s + 17, 2, &h) ||
	    digits_value(s + 20, 2, &mi) || digits_value(s + 23, 2, &se))
		return -1;
	for (m = months; *m; m += 3)
		if (strncmp(m, s + 8, 3) == 0)
			break;
	if (*m == '\0')
		return -1;
	return make_time(y, (int)(m - months) / 3 + 1, d, h, mi, se, t);
}

void ft_sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
		out[0] = '\0';
}

/* ---- request lookups ---- */

static const char *header_first(const ft_sigv4_request_t *req, const char *name)
{
	for (int i = 0; i < req->n_headers; i++)
		if (req->headers[i].name != NULL && strcasecmp(req->headers[i].name, name) == 0)
			return req->headers[i].value ? req->headers[i].value : "";
	return NULL;
}

/* Copies v trimmed into out (cap bytes); returns 0, or -1 when it does not fit. */
static int copy_trimmed(const char *v, char *out, size_t cap)
{
	size_t n;

	while (is_space(*v))
		v++;
	n = strlen(v);
	while (n > 0 && is_space(v[n - 1]))
		n--;
	if (n >= cap)
		return -1;
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

/*
 * Finds query parameter name (compared after decoding); stores the decoded value of the first
 * occurrence in val when val != NULL. Returns the number of occurrences, -1 on allocation failure.
 */
static int query_get(const char *query, const char *name, ft_strbuf_t *val)
{
	int count = 0;

	for (const char *p = query ? query : ""; *p;) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t name_len = eq ? (size_t)(eq - p) : len;

		if (decoded_equals(p, name_len, name) && count++ == 0 && val != NULL) {
			ft_strbuf_add(val, "", 0);
			if (eq)
				add_decoded(val, eq + 1, len - name_len - 1);
			if (val->failed)
				return -1;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	return count;
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
	    (size_t)(end - cut[0] - 1) != strlen(TERMINATOR) || memcmp(cut[0] + 1, TERMINATOR, strlen(TERMINATOR)) != 0)
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
	if ((size_t)snprintf(c->scope, sizeof(c->scope), "%s/%s/%s/%s", c->date8, c->region, c->service, TERMINATOR) >=
	    sizeof(c->scope))
		return -1;
	return 0;
}

/* Exactly 64 hex digits, stored lowercase. */
static int parse_signature(const char *s, size_t n, char out[65])
{
	if (n != 64)
		return -1;
	for (size_t i = 0; i < 64; i++) {
		if (hex_value(s[i]) < 0)
			return -1;
		out[i] = (char)((s[i] >= 'A' && s[i] <= 'F') ? s[i] + 32 : s[i]);
	}
	out[64] = '\0';
	return 0;
}

static int is_token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* SignedHeaders: non-empty ';'-separated header names, host among them. */
static int set_signed_headers(claim_t *c, const char *s, size_t n)
{
	int has_host = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0, start = 0; i <= n; i++) {
		if (i < n && s[i] != ';') {
			if (!is_token_char(s[i]))
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

	while (is_space(*v))
		v++;
	scheme_len = strcspn(v, " \t");
	if (scheme_len == 0)
		return FT_SIGV4_MALFORMED;
	if (scheme_len != strlen(ALGORITHM) || strncmp(v, ALGORITHM, scheme_len) != 0)
		return FT_SIGV4_UNSUPPORTED; /* "AWS AK:sig" (SigV2), SigV4a, Basic, ... */
	for (p = v + scheme_len; *p;) {
		size_t len, key_len, val_len;
		const char *eq, *val;

		while (is_space(*p))
			p++;
		len = strcspn(p, ",");
		eq = memchr(p, '=', len);
		if (eq == NULL)
			return FT_SIGV4_MALFORMED;
		key_len = (size_t)(eq - p);
		while (key_len > 0 && is_space(p[key_len - 1]))
			key_len--;
		val = eq + 1;
		val_len = len - (size_t)(val - p);
		while (val_len > 0 && is_space(*val)) {
			val++;
			val_len--;
		}
		while (val_len > 0 && is_space(val[val_len - 1]))
			val_len--;
		if (key_len == 10 && strncmp(p, "Credential", 10) == 0 && !have_cred++) {
			if (parse_credential(val, val_len, c) != 0)
				return FT_SIGV4_MALFORMED;
		} else if (key_len == 13 && strncmp(p, "SignedHeaders", 13) == 0 && !have_signed++) {
			if (set_signed_headers(c, val, val_len) != 0)
				return FT_SIGV4_MALFORMED;
		} else if (key_len == 9 && strncmp(p, "Signature", 9) == 0 && !have_sig++) {
			if (parse_signature(val, val_len, c->signature) != 0)
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
	const char *amz_date = header_first(req, "x-amz-date");
	const char *payload = header_first(req, "x-amz-content-sha256");
	char date[32];

	if (r != FT_SIGV4_OK)
		return r;
	if (amz_date != NULL) {
		if (copy_trimmed(amz_date, date, sizeof(date)) != 0 || parse_amz_date(date, &c->when) != 0)
			return FT_SIGV4_MALFORMED;
	} else {
		const char *http_date = header_first(req, "date");

		if (http_date == NULL || copy_trimmed(http_date, date, sizeof(date)) != 0 ||
		    parse_http_date(date, &c->when) != 0)
			return FT_SIGV4_MALFORMED;
	}
	ft_sigv4_amz_date(c->when, c->amz_date);
	if (payload == NULL)
		payload = req->payload_hash;
	if (payload == NULL || copy_trimmed(payload, c->payload_hash, sizeof(c->payload_hash)) != 0 ||
	    c->payload_hash[0] == '\0')
		return FT_SIGV4_MALFORMED;
	return FT_SIGV4_OK;
}

/* One required presigned parameter, exactly once, decoded into val. */
static int query_required(const char *query, const char *name, ft_strbuf_t *val)
{
	int n = query_get(query, name, val);

	return n == 1 && !val->failed && val->p != NULL ? 0 : -1;
}

/* Presigned form: everything from the X-Amz-* query parameters. */
static ft_sigv4_result_t claim_from_query(const ft_sigv4_request_t *req, claim_t *c)
{
	ft_strbuf_t alg = {0}, cred = {0}, date = {0}, expires = {0}, signed_headers = {0}, sig = {0};
	ft_sigv4_result_t r = FT_SIGV4_MALFORMED;
	char *end = NULL;

	c->presigned = 1;
	if (query_required(req->query, "X-Amz-Algorithm", &alg) != 0)
		goto out;
	if (strcmp(alg.p, ALGORITHM) != 0) {
		r = FT_SIGV4_UNSUPPORTED;
		goto out;
	}
	if (query_required(req->query, "X-Amz-Credential", &cred) != 0 ||
	    query_required(req->query, "X-Amz-Date", &date) != 0 ||
	    query_required(req->query, "X-Amz-Expires", &expires) != 0 ||
	    query_required(req->query, "X-Amz-SignedHeaders", &signed_headers) != 0 ||
	    query_required(req->query, "X-Amz-Signature", &sig) != 0)
		goto out;
	if (parse_credential(cred.p, cred.len, c) != 0 || parse_amz_date(date.p, &c->when) != 0 ||
	    set_signed_headers(c, signed_headers.p, signed_headers.len) != 0 ||
	    parse_signature(sig.p, sig.len, c->signature) != 0)
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
	hmac_t h = {0};
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
	if (signing_key(&h, secret, c->date8, c->region, c->service, key) != 0 ||
	    build_canonical_request(&creq, req, c->signed_headers, c->presigned, c->payload_hash) != 0 ||
	    request_signature(&h, key, c->amz_date, c->scope, &creq, sig) != 0)
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
	hmac_done(&h);
	ft_strbuf_free(&creq);
	return r;
}

/* Any X-Amz-Algorithm/-Credential/-Signature in the query marks a presigned request. */
static int has_presign_params(const char *query)
{
	return query_get(query, "X-Amz-Algorithm", NULL) != 0 || query_get(query, "X-Amz-Credential", NULL) != 0 ||
	       query_get(query, "X-Amz-Signature", NULL) != 0;
}

ft_sigv4_result_t ft_sigv4_verify(const ft_sigv4_request_t *req, time_t now, ft_sigv4_secret_fn secret, void *ctx,
				  ft_sigv4_auth_t *out)
{
	const char *authorization = header_first(req, "authorization");
	int presigned = has_presign_params(req->query);
	claim_t claim;
	ft_sigv4_result_t r;

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
		r = claim_from_query(req, &claim);
	else if (query_get(req->query, "AWSAccessKeyId", NULL) > 0 && query_get(req->query, "Signature", NULL) > 0)
		return FT_SIGV4_UNSUPPORTED; /* SigV2 presigned URL */
	else
		return FT_SIGV4_ANONYMOUS;
	if (r == FT_SIGV4_OK)
		r = check_claim(req, &claim, now, secret, ctx, out);
	free(claim.signed_headers);
	return r;
}

/* ---- signing ---- */

static int str_ptr_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted, de-duplicated, lowercase names of all headers joined with ';' into list. */
static int signed_header_list(const ft_sigv4_request_t *req, ft_strbuf_t *list)
{
	char **names = calloc((size_t)req->n_headers + 1, sizeof(*names));
	int n = 0, rc = -1;

	if (names == NULL)
		return -1;
	for (; n < req->n_headers; n++) {
		const char *name = req->headers[n].name;
		size_t len = name ? strlen(name) : 0;

		if (len == 0)
			goto out;
		for (size_t i = 0; i < len; i++)
			if (!is_token_char(name[i]))
				goto out;
		names[n] = strdup(name);
		if (names[n] == NULL)
			goto out;
		for (size_t i = 0; i < len; i++)
			if (names[n][i] >= 'A' && names[n][i] <= 'Z')
				names[n][i] = (char)(names[n][i] + 32);
	}
	qsort(names, (size_t)n, sizeof(*names), str_ptr_cmp);
	for (int i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
			continue;
		if (list->len > 0)
			ft_strbuf_addc(list, ';');
		ft_strbuf_adds(list, names[i]);
	}
	rc = list->failed ? -1 : 0;
out:
	for (int i = 0; i < req->n_headers; i++)
		free(names[i]);
	free(names);
	return rc;
}

int ft_sigv4_sign(const ft_sigv4_request_t *req, const char *access_key, const char *secret_key, const char *region,
		  const char *service, const char *amz_date, char *authorization, size_t cap)
{
	ft_strbuf_t list = {0}, creq = {0};
	hmac_t h = {0};
	const char *host, *date_header;
	char date8[9], scope[256], sig[65], date[32];
	uint8_t key[32];
	time_t when;
	int n, rc = -1;

	if (req == NULL || access_key == NULL || secret_key == NULL || region == NULL || service == NULL ||
	    authorization == NULL || req->payload_hash == NULL || parse_amz_date(amz_date, &when) != 0)
		return -1;
	host = header_first(req, "host");
	date_header = header_first(req, "x-amz-date");
	if (host == NULL || date_header == NULL || copy_trimmed(date_header, date, sizeof(date)) != 0 ||
	    strcmp(date, amz_date) != 0)
		goto out;
	memcpy(date8, amz_date, 8);
	date8[8] = '\0';
	if ((size_t)snprintf(scope, sizeof(scope), "%s/%s/%s/%s", date8, region, service, TERMINATOR) >= sizeof(scope))
		goto out;
	if (signed_header_list(req, &list) != 0 || signing_key(&h, secret_key, date8, region, service, key) != 0 ||
	    build_canonical_request(&creq, req, list.p, 0, req->payload_hash) != 0 ||
	    request_signature(&h, key, amz_date, scope, &creq, sig) != 0)
		goto out;
	n = snprintf(authorization, cap, ALGORITHM " Credential=%s/%s, SignedHeaders=%s, Signature=%s", access_key,
		     scope, list.p, sig);
	if (n < 0 || (size_t)n >= cap)
		goto out;
	rc = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	hmac_done(&h);
	ft_strbuf_free(&creq);
	ft_strbuf_free(&list);
	return rc;
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

/* ---- SHA-256 streaming ---- */

int ft_sha256_init(ft_sha256_t *h)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	h->ctx = NULL;
	if (ctx == NULL)
		return -1;
	if (EVP_DigestInit_ex(ctx, sha256_impl(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	h->ctx = ctx;
	return 0;
}

void ft_sha256_update(ft_sha256_t *h, const void *buf, size_t len)
{
	if (h->ctx != NULL && len > 0)
		EVP_DigestUpdate(h->ctx, buf, len);
}

void ft_sha256_final(ft_sha256_t *h, char hex[FT_SHA256_HEX])
{
	uint8_t md[32];
	unsigned int n = 0;

	hex[0] = '\0';
	if (h->ctx == NULL)
		return;
	if (EVP_DigestFinal_ex(h->ctx, md, &n) == 1 && n == 32)
		hex_encode(md, 32, hex);
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

/* ---- aws-chunked decoder ---- */

typedef enum {
	CHUNK_HEADER, /* reading "<hex>;chunk-signature=<sig>\r\n" */
	CHUNK_DATA,   /* passing remaining data bytes through */
	CHUNK_CR,     /* expecting the '\r' after the data */
	CHUNK_LF,     /* expecting the '\n'; then the chunk signature is checked */
	CHUNK_DONE,   /* final chunk verified: nothing more may come */
	CHUNK_FAILED, /* sticky error in rc */
} chunk_state_t;

struct ft_sigv4_chunked {
	chunk_state_t state;
	int rc; /* -1 or -2 once FAILED */
	char header[CHUNK_HEADER_MAX];
	size_t header_len;
	uint64_t remaining; /* data bytes left in this chunk */
	int final;          /* this chunk has size 0 */
	char chunk_sig[65]; /* claimed signature of this chunk */
	char prev_sig[65];  /* previous chunk's (or the seed) signature */
	uint8_t key[32];
	char amz_date[17];
	char scope[128];
	EVP_MD_CTX *hash; /* sha256 of this chunk's data, owned */
	hmac_t hmac;      /* owned */
};

ft_sigv4_chunked_t *ft_sigv4_chunked_new(const ft_sigv4_auth_t *auth)
{
	ft_sigv4_chunked_t *c;

	if (auth == NULL || strnlen(auth->seed_signature, sizeof(auth->seed_signature)) != 64)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->hash = EVP_MD_CTX_new();
	if (c->hash == NULL) {
		free(c);
		return NULL;
	}
	memcpy(c->key, auth->signing_key, sizeof(c->key));
	memcpy(c->prev_sig, auth->seed_signature, sizeof(c->prev_sig));
	memcpy(c->amz_date, auth->amz_date, sizeof(c->amz_date));
	c->amz_date[sizeof(c->amz_date) - 1] = '\0';
	memcpy(c->scope, auth->scope, sizeof(c->scope));
	c->scope[sizeof(c->scope) - 1] = '\0';
	c->state = CHUNK_HEADER;
	return c;
}

void ft_sigv4_chunked_free(ft_sigv4_chunked_t *c)
{
	if (c == NULL)
		return;
	hmac_done(&c->hmac);
	EVP_MD_CTX_free(c->hash);
	OPENSSL_cleanse(c, sizeof(*c));
	free(c);
}

/* Parses the header line (without CRLF): "<1-16 hex>;chunk-signature=<64 hex>". Returns 0 or -1. */
static int chunk_parse_header(ft_sigv4_chunked_t *c)
{
	static const char ext[] = ";chunk-signature=";
	size_t hex_len = 0;
	uint64_t size = 0;

	while (hex_len < c->header_len && hex_value(c->header[hex_len]) >= 0) {
		size = size * 16 + (uint64_t)hex_value(c->header[hex_len]);
		hex_len++;
	}
	if (hex_len == 0 || hex_len > 16)
		return -1;
	if (c->header_len != hex_len + strlen(ext) + 64 || memcmp(c->header + hex_len, ext, strlen(ext)) != 0)
		return -1;
	if (parse_signature(c->header + hex_len + strlen(ext), 64, c->chunk_sig) != 0)
		return -1;
	if (EVP_DigestInit_ex(c->hash, sha256_impl(), NULL) != 1)
		return -1;
	c->remaining = size;
	c->final = size == 0;
	return 0;
}

/* Checks the finished chunk's signature; it becomes the previous one. Returns 0, -1 or -2. */
static int chunk_verify(ft_sigv4_chunked_t *c)
{
	uint8_t md[32], mac[32];
	unsigned int n = 0;
	char data_hash[FT_SHA256_HEX], sig[65];
	ft_strbuf_t sts = {0};
	int rc = -1;

	if (EVP_DigestFinal_ex(c->hash, md, &n) != 1 || n != 32)
		goto out;
	hex_encode(md, 32, data_hash);
	ft_strbuf_adds(&sts, ALGORITHM "-PAYLOAD\n");
	ft_strbuf_adds(&sts, c->amz_date);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->scope);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, c->prev_sig);
	ft_strbuf_adds(&sts, "\n" EMPTY_SHA256 "\n");
	ft_strbuf_adds(&sts, data_hash);
	if (sts.failed || hmac_sha256(&c->hmac, c->key, 32, sts.p, sts.len, mac) != 0)
		goto out;
	hex_encode(mac, 32, sig);
	rc = CRYPTO_memcmp(sig, c->chunk_sig, 64) == 0 ? 0 : -2;
	if (rc == 0)
		memcpy(c->prev_sig, c->chunk_sig, sizeof(c->prev_sig));
out:
	ft_strbuf_free(&sts);
	return rc;
}

/* Consumes bytes of one state from in[*i..len); returns 0 or an error (-1, -2). */
static int chunk_step(ft_sigv4_chunked_t *c, const uint8_t *in, size_t len, size_t *i, uint8_t *out, size_t cap,
		      size_t *produced)
{
	uint8_t b;

	switch (c->state) {
	case CHUNK_HEADER:
		b = in[(*i)++];
		if (b != '\n') {
			if (c->header_len == sizeof(c->header))
				return -1; /* oversize chunk header */
			c->header[c->header_len++] = (char)b;
			return 0;
		}
		if (c->header_len == 0 || c->header[c->header_len - 1] != '\r')
			return -1;
		c->header_len--;
		if (chunk_parse_header(c) != 0)
			return -1;
		c->header_len = 0;
		c->state = c->final ? CHUNK_CR : CHUNK_DATA;
		return 0;
	case CHUNK_DATA: {
		size_t n = len - *i;

		if ((uint64_t)n > c->remaining)
			n = (size_t)c->remaining;
		if (*produced + n > cap)
			return -1; /* the caller broke cap >= len */
		memcpy(out + *produced, in + *i, n);
		if (EVP_DigestUpdate(c->hash, in + *i, n) != 1)
			return -1;
		*produced += n;
		*i += n;
		c->remaining -= n;
		if (c->remaining == 0)
			c->state = CHUNK_CR;
		return 0;
	}
	case CHUNK_CR:
		if (in[(*i)++] != '\r')
			return -1;
		c->state = CHUNK_LF;
		return 0;
	case CHUNK_LF: {
		int rc;

		if (in[(*i)++] != '\n')
			return -1;
		rc = chunk_verify(c);
		if (rc != 0)
			return rc;
		c->state = c->final ? CHUNK_DONE : CHUNK_HEADER;
		return 0;
	}
	case CHUNK_DONE:
	case CHUNK_FAILED:
		break;
	}
	return -1; /* bytes after the final chunk */
}

int ft_sigv4_chunked_feed(ft_sigv4_chunked_t *c, const void *buf, size_t len, void *out, size_t cap, size_t *out_len)
{
	const uint8_t *in = buf;
	size_t i = 0, produced = 0;

	if (out_len != NULL)
		*out_len = 0;
	if (c == NULL || out_len == NULL || (len > 0 && (buf == NULL || out == NULL)))
		return -1;
	if (c->state == CHUNK_FAILED)
		return c->rc;
	while (i < len) {
		int rc = chunk_step(c, in, len, &i, out, cap, &produced);

		if (rc != 0) {
			c->state = CHUNK_FAILED;
			c->rc = rc;
			*out_len = produced;
			return rc;
		}
	}
	*out_len = produced;
	return c->state == CHUNK_DONE ? 1 : 0;
}
