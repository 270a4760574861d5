/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 on OpenSSL: canonical requests, signing keys, signing of outgoing requests, SHA-256. */
/*
 * DESIGN
 * - One canonicalization serves both directions: ft_sigv4_sign() here and the verifier of incoming
 *   S3 requests (proxy/s3/sigv4.c) build the canonical request with ft_sigv4_canonical_request(),
 *   so what we sign for a backend is what we check from a client.
 * - S3 rules, not the generic SigV4 ones: the canonical URI is the path as sent, never dot-normalized
 *   and never double-encoded. Each '/'-separated segment is percent-decoded once and re-encoded
 *   (ft_pct_recode_buf: RFC 3986 unreserved kept, everything else %XX uppercase), so "~", "%7e"
 *   and "%7E" all canonicalize alike and "%2F" inside a segment stays "%2F". In the path '+' is a
 *   plus ("%2B").
 * - Query: '&'-separated, empty pieces ignored, split at the first '=', a piece without '=' gets an
 *   empty value; names and values recoded like path segments (with '/' encoded), then sorted by
 *   name, then value, bytewise. In the query a raw '+' is a space (form encoding, as S3 reads it:
 *   the Go SDK and curl send spaces as '+' and sign them as "%20"); a plus is sent as "%2B".
 * - Headers: only the listed signed headers, in the list's order, names lowercased; all values of
 *   one name joined with ',', each trimmed with inner whitespace runs folded to one space.
 * - Signing keys are derived once per (secret, date, region, service) and kept in a small cache
 *   (KEY_CACHE_SLOTS entries, under a mutex, oldest replaced first): a key is valid for a whole
 *   day, and deriving it costs four HMACs per request otherwise.
 */
#include "auth/sigv4.h"
#include "base/codec.h"
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

#define KEY_CACHE_SLOTS 16
#define KEY_CACHE_SECRET_MAX 128 /* longer secrets are not cached (derived each time) */

/* ---- hashing ---- */

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
	ft_hex_encode(md, 32, hex);
	return 0;
}

/*
 * One operation's HMAC context (h->ctx, an EVP_MAC_CTX): copied from the template on first use,
 * then re-keyed for every HMAC of the operation (about 3x cheaper than a fresh copy each time).
 */
int ft_sigv4_hmac(ft_sigv4_hmac_t *h, const void *key, size_t key_len, const void *msg, size_t len, uint8_t out[32])
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

void ft_sigv4_hmac_done(ft_sigv4_hmac_t *h)
{
	EVP_MAC_CTX_free(h->ctx);
	h->ctx = NULL;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date8), region), service), "aws4_request"). */
static int derive_signing_key(ft_sigv4_hmac_t *h, const char *secret, const char *date8, const char *region,
			      const char *service, uint8_t key[32])
{
	ft_strbuf_t k_secret = {0};
	uint8_t k[32];
	int rc = -1;

	ft_strbuf_adds(&k_secret, "AWS4");
	ft_strbuf_adds(&k_secret, secret);
	if (k_secret.failed)
		goto out;
	if (ft_sigv4_hmac(h, k_secret.p, k_secret.len, date8, strlen(date8), k) != 0 ||
	    ft_sigv4_hmac(h, k, 32, region, strlen(region), k) != 0 ||
	    ft_sigv4_hmac(h, k, 32, service, strlen(service), k) != 0 ||
	    ft_sigv4_hmac(h, k, 32, FT_SIGV4_TERMINATOR, strlen(FT_SIGV4_TERMINATOR), key) != 0)
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
int ft_sigv4_signing_key(ft_sigv4_hmac_t *h, const char *secret, const char *date8, const char *region,
			 const char *service, uint8_t key[32])
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

		ft_pct_recode_buf(b, seg, n, 0);
		if (slash == NULL)
			break;
		ft_strbuf_addc(b, '/');
		seg = slash + 1;
	}
}

typedef struct {
	size_t name, value; /* offsets of the encoded, NUL-terminated name and value in the text buffer */
	const char *name_p, *value_p;
} qparam_t;

static int qparam_cmp(const void *a, const void *b)
{
	const qparam_t *x = a, *y = b;
	int c = strcmp(x->name_p, y->name_p);

	return c != 0 ? c : strcmp(x->value_p, y->value_p);
}

/*
 * Appends the canonical query string; skip_signature drops X-Amz-Signature. Returns 0 or -1. The
 * pieces are recoded into one buffer (two allocations a query, not two a parameter), then sorted.
 */
static int add_canonical_query(ft_strbuf_t *b, const char *query, int skip_signature)
{
	ft_strbuf_t text = {0};
	qparam_t *params = NULL;
	size_t n = 0, max = 1;
	int rc = -1;

	if (query == NULL || *query == '\0')
		return 0;
	for (const char *p = query; *p; p++)
		max += *p == '&';
	params = calloc(max, sizeof(*params));
	if (params == NULL || ft_strbuf_reserve(&text, 3 * strlen(query) + 2 * max) != 0)
		goto out;
	for (const char *p = query; *p;) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);
		size_t name_len = eq ? (size_t)(eq - p) : len, at = text.len;

		if (len > 0) {
			params[n].name = at;
			ft_pct_recode_buf(&text, p, name_len, FT_PCT_PLUS_SPACE);
			ft_strbuf_add(&text, "", 1);
			params[n].value = text.len;
			if (eq)
				ft_pct_recode_buf(&text, eq + 1, len - name_len - 1, FT_PCT_PLUS_SPACE);
			ft_strbuf_add(&text, "", 1);
			if (text.failed)
				goto out;
			if (skip_signature && strcmp(text.p + at, "X-Amz-Signature") == 0)
				text.len = at; /* dropped */
			else
				n++;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	for (size_t i = 0; i < n; i++) {
		params[i].name_p = text.p + params[i].name;
		params[i].value_p = text.p + params[i].value;
	}
	qsort(params, n, sizeof(*params), qparam_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			ft_strbuf_addc(b, '&');
		ft_strbuf_adds(b, params[i].name_p);
		ft_strbuf_addc(b, '=');
		ft_strbuf_adds(b, params[i].value_p);
	}
	rc = b->failed ? -1 : 0;
out:
	ft_strbuf_free(&text);
	free(params);
	return rc;
}

int ft_sigv4_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * Appends v trimmed, with every inner run of whitespace folded to one space. A value that is not
 * UTF-8 is taken as Latin-1 and recoded to UTF-8: the JavaScript SDK signs a header's text as
 * UTF-8 while Node's HTTP client sends it as Latin-1 ("café" as the byte 0xe9).
 */
static void add_header_value(ft_strbuf_t *b, const char *v)
{
	int pending_space = 0, started = 0, latin1 = v != NULL && !ft_utf8_valid(v, NULL);

	for (; v && *v; v++) {
		if (ft_sigv4_is_space(*v)) {
			pending_space = started;
			continue;
		}
		if (pending_space)
			ft_strbuf_addc(b, ' ');
		pending_space = 0;
		started = 1;
		if (latin1 && (unsigned char)*v >= 0x80) {
			ft_strbuf_addc(b, (char)(0xc0 | ((unsigned char)*v >> 6)));
			ft_strbuf_addc(b, (char)(0x80 | ((unsigned char)*v & 0x3f)));
		} else {
			ft_strbuf_addc(b, *v);
		}
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
int ft_sigv4_canonical_request(ft_strbuf_t *b, const ft_sigv4_request_t *req, const char *signed_headers,
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
int ft_sigv4_request_signature(ft_sigv4_hmac_t *h, const uint8_t key[32], const char *amz_date, const char *scope,
			       const ft_strbuf_t *creq, char sig[65])
{
	char creq_hash[FT_SHA256_HEX];
	ft_strbuf_t sts = {0};
	uint8_t mac[32];
	int rc = -1;

	if (sha256_hex(creq->p ? creq->p : "", creq->len, creq_hash) != 0)
		goto out;
	ft_strbuf_adds(&sts, FT_SIGV4_ALGORITHM "\n");
	ft_strbuf_adds(&sts, amz_date);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, scope);
	ft_strbuf_addc(&sts, '\n');
	ft_strbuf_adds(&sts, creq_hash);
	if (sts.failed || ft_sigv4_hmac(h, key, 32, sts.p, sts.len, mac) != 0)
		goto out;
	ft_hex_encode(mac, 32, sig);
	rc = 0;
out:
	ft_strbuf_free(&sts);
	return rc;
}

/* ---- request lookups ---- */

const char *ft_sigv4_header(const ft_sigv4_request_t *req, const char *name)
{
	for (int i = 0; i < req->n_headers; i++)
		if (req->headers[i].name != NULL && strcasecmp(req->headers[i].name, name) == 0)
			return req->headers[i].value ? req->headers[i].value : "";
	return NULL;
}

/* Copies v trimmed into out (cap bytes); returns 0, or -1 when it does not fit. */
int ft_sigv4_copy_trimmed(const char *v, char *out, size_t cap)
{
	size_t n;

	while (ft_sigv4_is_space(*v))
		v++;
	n = strlen(v);
	while (n > 0 && ft_sigv4_is_space(v[n - 1]))
		n--;
	if (n >= cap)
		return -1;
	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

int ft_sigv4_is_token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
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
			if (!ft_sigv4_is_token_char(name[i]))
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
	ft_sigv4_hmac_t h = {0};
	const char *host, *date_header;
	char date8[9], scope[256], sig[65], date[32];
	uint8_t key[32];
	time_t when;
	int n, rc = -1;

	if (req == NULL || access_key == NULL || secret_key == NULL || region == NULL || service == NULL ||
	    authorization == NULL || req->payload_hash == NULL ||
	    ft_date_parse_exact(amz_date, FT_DATE_AMZ, &when) != 0)
		return -1;
	host = ft_sigv4_header(req, "host");
	date_header = ft_sigv4_header(req, "x-amz-date");
	if (host == NULL || date_header == NULL || ft_sigv4_copy_trimmed(date_header, date, sizeof(date)) != 0 ||
	    strcmp(date, amz_date) != 0)
		goto out;
	memcpy(date8, amz_date, 8);
	date8[8] = '\0';
	if ((size_t)snprintf(scope, sizeof(scope), "%s/%s/%s/%s", date8, region, service, FT_SIGV4_TERMINATOR) >=
	    sizeof(scope))
		goto out;
	if (signed_header_list(req, &list) != 0 ||
	    ft_sigv4_signing_key(&h, secret_key, date8, region, service, key) != 0 ||
	    ft_sigv4_canonical_request(&creq, req, list.p, 0, req->payload_hash) != 0 ||
	    ft_sigv4_request_signature(&h, key, amz_date, scope, &creq, sig) != 0)
		goto out;
	n = snprintf(authorization, cap, FT_SIGV4_ALGORITHM " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		     access_key, scope, list.p, sig);
	if (n < 0 || (size_t)n >= cap)
		goto out;
	rc = 0;
out:
	OPENSSL_cleanse(key, sizeof(key));
	ft_sigv4_hmac_done(&h);
	ft_strbuf_free(&creq);
	ft_strbuf_free(&list);
	return rc;
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
		ft_hex_encode(md, 32, hex);
	EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}
