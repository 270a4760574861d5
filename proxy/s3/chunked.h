/* SPDX-License-Identifier: Apache-2.0 */
/* S3 aws-chunked request bodies (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): decoding with chunk signature checks. */
#ifndef PX_S3_CHUNKED_H
#define PX_S3_CHUNKED_H

#include <stddef.h>

#include "s3/sigv4.h"

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

#endif
