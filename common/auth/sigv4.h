/* AWS Signature Version 4: signing of outgoing requests and verification of incoming ones, on OpenSSL. */
#ifndef FT_SIGV4_H
#define FT_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

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

/*
 * Signs an outgoing request: fills authorization (the Authorization header value) for the given
 * headers (which must include host and x-amz-date; all given headers are signed).
 */
int ft_sigv4_sign(const ft_sigv4_request_t *req, const char *access_key, const char *secret_key, const char *region,
		  const char *service, const char *amz_date, char *authorization, size_t cap);
/* Formats t as yyyymmddThhmmssZ. */
void ft_sigv4_amz_date(time_t t, char out[17]);

/*
 * aws-chunked bodies (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): the decoder takes raw body bytes and
 * yields payload bytes, checking every chunk's signature (chained from the seed signature).
 */
typedef struct ft_sigv4_chunked ft_sigv4_chunked_t;
ft_sigv4_chunked_t *ft_sigv4_chunked_new(const ft_sigv4_auth_t *auth);
/*
 * Feeds len bytes; payload bytes are appended to out (capacity cap, which must be >= len) and
 * counted in *out_len. Returns 0 (more expected), 1 (final zero-length chunk verified: body
 * complete), -1 framing error, -2 chunk signature mismatch.
 * Each call writes from out[0] and sets *out_len to this call's count (also on error). Payload
 * bytes come out before their chunk's signature is checked: keep the body only once 1 was
 * returned. Errors are sticky; a byte after the final chunk is -1; an input that ends before 1
 * is an incomplete body.
 */
int ft_sigv4_chunked_feed(ft_sigv4_chunked_t *c, const void *buf, size_t len, void *out, size_t cap, size_t *out_len);
void ft_sigv4_chunked_free(ft_sigv4_chunked_t *c);

/* SHA-256 streaming, hex output. */
typedef struct {
	void *ctx;
} ft_sha256_t;
int ft_sha256_init(ft_sha256_t *h);
void ft_sha256_update(ft_sha256_t *h, const void *buf, size_t len);
/* Writes the lowercase hex digest ("" after a failed init) and releases h: also the way to abandon one. */
void ft_sha256_final(ft_sha256_t *h, char hex[FT_SHA256_HEX]);

#endif
