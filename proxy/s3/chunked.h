/* SPDX-License-Identifier: Apache-2.0 */
/* S3 aws-chunked request bodies (signed, signed with a trailer, unsigned with a trailer): decoding and signature checks. */
#ifndef PX_S3_CHUNKED_H
#define PX_S3_CHUNKED_H

#include <stddef.h>

#include "s3/sigv4.h"

/*
 * aws-chunked bodies: the decoder takes raw body bytes and yields payload bytes, checking every
 * chunk's signature (chained from the seed signature) in the signed forms.
 */
typedef struct ft_sigv4_chunked ft_sigv4_chunked_t;

/* x-amz-content-sha256 of the trailer forms (FT_SIGV4_STREAMING is the plain signed one). */
#define FT_SIGV4_STREAMING_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define FT_SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

typedef enum {
	FT_CHUNKED_SIGNED,          /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
	FT_CHUNKED_SIGNED_TRAILER,  /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
	FT_CHUNKED_UNSIGNED_TRAILER /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
} ft_chunked_mode_t;

#define FT_CHUNKED_TRAILER_MAX 160 /* longest trailer value kept */

/* The signed form (as ft_sigv4_chunked_new_mode(auth, FT_CHUNKED_SIGNED, NULL)). */
ft_sigv4_chunked_t *ft_sigv4_chunked_new(const ft_sigv4_auth_t *auth);
/*
 * A decoder of the given form. The signed forms need auth (its seed signature); the unsigned one
 * ignores it (may be NULL). The trailer forms need trailer: the one trailer name the request
 * announced in x-amz-trailer (compared case-insensitively). After the final zero-length chunk a
 * trailer form expects exactly that trailer line, then (signed) "x-amz-trailer-signature:<sig>",
 * then an empty line; any other line is a framing error. NULL on a bad argument or no memory.
 */
ft_sigv4_chunked_t *ft_sigv4_chunked_new_mode(const ft_sigv4_auth_t *auth, ft_chunked_mode_t mode, const char *trailer);
/* The trailer's value (spaces around it removed) once feed returned 1 in a trailer form; else NULL. */
const char *ft_sigv4_chunked_trailer(const ft_sigv4_chunked_t *c);
/*
 * Feeds len bytes; payload bytes are appended to out (capacity cap, which must be >= len) and
 * counted in *out_len. Returns 0 (more expected), 1 (final zero-length chunk verified, and in
 * the trailer forms the trailer read and its signature verified: body complete), -1 framing
 * error, -2 chunk or trailer signature mismatch.
 * Each call writes from out[0] and sets *out_len to this call's count (also on error). Payload
 * bytes come out before their chunk's signature is checked: keep the body only once 1 was
 * returned. Errors are sticky; a byte after the final chunk is -1; an input that ends before 1
 * is an incomplete body.
 */
int ft_sigv4_chunked_feed(ft_sigv4_chunked_t *c, const void *buf, size_t len, void *out, size_t cap, size_t *out_len);
void ft_sigv4_chunked_free(ft_sigv4_chunked_t *c);

#endif
