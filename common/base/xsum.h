/* SPDX-License-Identifier: Apache-2.0 */
/* S3 flexible checksums (x-amz-checksum-crc32, -crc32c, -sha1, -sha256): computing them over a body as it streams. */
#ifndef FT_BASE_XSUM_H
#define FT_BASE_XSUM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	FT_XSUM_NONE = 0,
	FT_XSUM_CRC32,
	FT_XSUM_CRC32C,
	FT_XSUM_CRC64NVME, /* known by name, not computed: answered with NotImplemented */
	FT_XSUM_SHA1,
	FT_XSUM_SHA256,
} ft_xsum_alg_t;

#define FT_XSUM_B64_MAX 48 /* base64 of the longest digest (SHA-256: 44) and a NUL */

/* The algorithm of a header or trailer name ("x-amz-checksum-crc32", any case); NONE when it names none. */
ft_xsum_alg_t ft_xsum_from_name(const char *name);
/* The header name of alg ("x-amz-checksum-crc32") and its S3 name ("CRC32"). */
const char *ft_xsum_header(ft_xsum_alg_t alg);
const char *ft_xsum_label(ft_xsum_alg_t alg);
/* Whether value is the base64 of exactly one digest of alg (a computable algorithm). */
int ft_xsum_value_ok(ft_xsum_alg_t alg, const char *value);

/* A running checksum; state owned until ft_xsum_final or ft_xsum_abort. */
typedef struct {
	ft_xsum_alg_t alg;
	uint32_t crc;
	void *md; /* EVP_MD_CTX for the SHAs */
} ft_xsum_t;

/* 0, or -1 (no memory, or an algorithm that is not computed). */
int ft_xsum_init(ft_xsum_t *c, ft_xsum_alg_t alg);
void ft_xsum_update(ft_xsum_t *c, const void *buf, size_t len);
/* The base64 of the big-endian digest into out; releases the state. 0 or -1. */
int ft_xsum_final(ft_xsum_t *c, char out[FT_XSUM_B64_MAX]);
void ft_xsum_abort(ft_xsum_t *c);

#endif
