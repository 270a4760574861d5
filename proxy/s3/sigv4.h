/* SPDX-License-Identifier: Apache-2.0 */
/* S3 request authentication: AWS Signature Version 4 verification of incoming requests (header and presigned forms). */
#ifndef PX_S3_SIGV4_H
#define PX_S3_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth/sigv4.h"

typedef enum {
	FT_SIGV4_OK = 0,
	FT_SIGV4_ANONYMOUS,   /* no Authorization header and no X-Amz-Signature query */
	FT_SIGV4_MALFORMED,   /* AuthorizationHeaderMalformed / AuthorizationQueryParametersError */
	FT_SIGV4_UNKNOWN_KEY, /* InvalidAccessKeyId */
	FT_SIGV4_MISMATCH,    /* SignatureDoesNotMatch */
	FT_SIGV4_EXPIRED,     /* presigned URL past X-Amz-Expires: AccessDenied "Request has expired" */
	FT_SIGV4_SKEWED,      /* RequestTimeTooSkewed (more than 15 minutes off) */
	FT_SIGV4_UNSUPPORTED, /* SigV2 or another algorithm: AccessDenied / NotImplemented */
} ft_sigv4_result_t;

/* S3 error code for a result ("SignatureDoesNotMatch", ...), and a human message. */
const char *ft_sigv4_error_code(ft_sigv4_result_t r);
const char *ft_sigv4_strerror(ft_sigv4_result_t r);

/* Looks up the secret of an access key; returns it (borrowed) or NULL. */
typedef const char *(*ft_sigv4_secret_fn)(void *ctx, const char *access_key);

/* What a successful verification established, for chunk signatures and logging. */
typedef struct {
	char access_key[128];
	char amz_date[17]; /* yyyymmddThhmmssZ */
	char scope[128];   /* date/region/service/aws4_request */
	uint8_t signing_key[32];
	char seed_signature[65]; /* the request's signature: previous signature of the first chunk */
	int presigned;
} ft_sigv4_auth_t;

/*
 * Verifies the header form (Authorization: AWS4-HMAC-SHA256 ...) or the presigned query form
 * (X-Amz-Algorithm ... X-Amz-Signature) of req at time now. The payload hash is taken from
 * x-amz-content-sha256 (header form; presigned: UNSIGNED-PAYLOAD). Checking the body against a
 * hex payload hash is the caller's job (stream it through ft_sha256_*).
 * Header form without x-amz-content-sha256: req->payload_hash is used if non-NULL, else MALFORMED.
 * S3 rules: the path is not dot-normalized nor double-encoded, and in the query a raw '+' is a
 * space (as S3, the Go SDK and curl read it). out may be NULL; it is zeroed, out->presigned is set
 * even on failure (to choose AuthorizationQueryParametersError over ...HeaderMalformed), the rest
 * is filled only on FT_SIGV4_OK.
 */
ft_sigv4_result_t ft_sigv4_verify(const ft_sigv4_request_t *req, time_t now, ft_sigv4_secret_fn secret, void *ctx,
				  ft_sigv4_auth_t *out);

/* Exactly 64 hex digits (either case) into out, lowercase and NUL-terminated; 0 or -1. */
int ft_sigv4_parse_signature(const char *s, size_t n, char out[65]);

#endif
