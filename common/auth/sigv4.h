/* SPDX-License-Identifier: Apache-2.0 */
/* AWS Signature Version 4 on OpenSSL: signing of outgoing requests, and the pieces verification shares with it. */
#ifndef FT_SIGV4_H
#define FT_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/strbuf.h"

#define FT_SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define FT_SIGV4_TERMINATOR "aws4_request"
#define FT_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define FT_SIGV4_STREAMING "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define FT_SHA256_HEX 65

typedef struct {
	const char *name;  /* any case; canonicalized to lowercase */
	const char *value; /* trimmed, inner runs of spaces folded, when canonicalized */
} ft_sigv4_header_t;

/* One request as seen on the wire (incoming) or about to be sent (outgoing). */
typedef struct {
	const char *method;
	const char *path;  /* raw, as sent on the wire (percent-encoded) */
	const char *query; /* raw query string without '?', "" if none */
	const ft_sigv4_header_t *headers;
	int n_headers;
	const char *payload_hash; /* hex sha256 of the body, FT_SIGV4_UNSIGNED or FT_SIGV4_STREAMING */
} ft_sigv4_request_t;

/*
 * Signs an outgoing request: fills authorization (the Authorization header value) for the given
 * headers (which must include host and x-amz-date; all given headers are signed). amz_date is the
 * x-amz-date value (ft_date_format_amz in base/codec.h).
 */
int ft_sigv4_sign(const ft_sigv4_request_t *req, const char *access_key, const char *secret_key, const char *region,
		  const char *service, const char *amz_date, char *authorization, size_t cap);

/* SHA-256 streaming, hex output. */
typedef struct {
	void *ctx;
} ft_sha256_t;
int ft_sha256_init(ft_sha256_t *h);
void ft_sha256_update(ft_sha256_t *h, const void *buf, size_t len);
/* Writes the lowercase hex digest ("" after a failed init) and releases h: also the way to abandon one. */
void ft_sha256_final(ft_sha256_t *h, char hex[FT_SHA256_HEX]);

/*
 * ---- building blocks shared with the verification of incoming requests ----
 * The S3 front end (proxy/s3/sigv4.c, proxy/s3/chunked.c) checks signatures with the same
 * canonicalization and key derivation as ft_sigv4_sign(): these are that common core.
 */

/* One operation's HMAC-SHA256 state: zero-initialize, use for any number of HMACs, then ft_sigv4_hmac_done. */
typedef struct {
	void *ctx; /* EVP_MAC_CTX, owned; NULL until the first HMAC */
} ft_sigv4_hmac_t;
/* out = HMAC-SHA256(key, msg); returns 0 or -1. */
int ft_sigv4_hmac(ft_sigv4_hmac_t *h, const void *key, size_t key_len, const void *msg, size_t len, uint8_t out[32]);
void ft_sigv4_hmac_done(ft_sigv4_hmac_t *h);

/*
 * The signing key HMAC(HMAC(HMAC(HMAC("AWS4" secret, date8), region), service), "aws4_request"),
 * from a small per-process cache (a key is valid for a whole day). Returns 0 or -1.
 */
int ft_sigv4_signing_key(ft_sigv4_hmac_t *h, const char *secret, const char *date8, const char *region,
			 const char *service, uint8_t key[32]);

/*
 * Appends the canonical request of req to b: method, canonical URI and query (S3 rules, see
 * sigv4.c), the headers named in signed_headers (';'-separated, in that order), signed_headers and
 * payload_hash. skip_signature leaves X-Amz-Signature out of the query (presigned URLs).
 * Returns 0 or -1 (allocation).
 */
int ft_sigv4_canonical_request(ft_strbuf_t *b, const ft_sigv4_request_t *req, const char *signed_headers,
			       int skip_signature, const char *payload_hash);
/* sig = lowercase hex HMAC(key, "AWS4-HMAC-SHA256\n" amz_date "\n" scope "\n" hex sha256(creq)); 0 or -1. */
int ft_sigv4_request_signature(ft_sigv4_hmac_t *h, const uint8_t key[32], const char *amz_date, const char *scope,
			       const ft_strbuf_t *creq, char sig[65]);

/* The value of the first header called name (any case; "" for a NULL value), or NULL. */
const char *ft_sigv4_header(const ft_sigv4_request_t *req, const char *name);
/* Copies v with leading and trailing whitespace trimmed into out (cap bytes); 0, or -1 when it does not fit. */
int ft_sigv4_copy_trimmed(const char *v, char *out, size_t cap);
/* The whitespace SigV4 trims and folds: space, tab, CR, LF. */
int ft_sigv4_is_space(char c);
/* Whether c may appear in a header name (an RFC 9110 token character). */
int ft_sigv4_is_token_char(char c);

#endif
