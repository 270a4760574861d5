/* SPDX-License-Identifier: Apache-2.0 */
/* S3 flexible checksums (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256): computing them over a body as it streams. */
#ifndef FT_BASE_XSUM_H
#define FT_BASE_XSUM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	FT_XSUM_NONE = 0,
	FT_XSUM_CRC32,
	FT_XSUM_CRC32C,
	FT_XSUM_CRC64NVME,
	FT_XSUM_SHA1,
	FT_XSUM_SHA256,
} ft_xsum_alg_t;

#define FT_XSUM_B64_MAX 48 /* base64 of the longest digest (SHA-256: 44) and a NUL */

/* The algorithm of a header or trailer name ("x-amz-checksum-crc32", any case); NONE when it names none. */
ft_xsum_alg_t ft_xsum_from_name(const char *name);
/* The header name of alg ("x-amz-checksum-crc32") and its S3 name ("CRC32"). */
const char *ft_xsum_header(ft_xsum_alg_t alg);
const char *ft_xsum_label(ft_xsum_alg_t alg);
/* The algorithm of an S3 name ("CRC32", "crc64nvme": any case); NONE when it names none. */
ft_xsum_alg_t ft_xsum_from_label(const char *label);
/* The length of alg's digest in bytes (0 for NONE). */
size_t ft_xsum_digest_len(ft_xsum_alg_t alg);
/* Whether alg is a CRC (a full-object checksum of a multipart upload can be one). */
int ft_xsum_is_crc(ft_xsum_alg_t alg);
/* Whether value is the base64 of exactly one digest of alg (a computable algorithm). */
int ft_xsum_value_ok(ft_xsum_alg_t alg, const char *value);

/* A running checksum; state owned until ft_xsum_final or ft_xsum_abort. */
typedef struct {
	ft_xsum_alg_t alg;
	uint64_t crc; /* CRC32, CRC32C: the low 32 bits */
	void *md;     /* EVP_MD_CTX for the SHAs */
} ft_xsum_t;

/* 0, or -1 (no memory, or an algorithm that is not computed). */
int ft_xsum_init(ft_xsum_t *c, ft_xsum_alg_t alg);
void ft_xsum_update(ft_xsum_t *c, const void *buf, size_t len);
/* The base64 of the big-endian digest into out; releases the state. 0 or -1. */
int ft_xsum_final(ft_xsum_t *c, char out[FT_XSUM_B64_MAX]);
/* The raw big-endian digest into out (room for FT_XSUM_RAW_MAX); releases the state. Its length, or -1. */
int ft_xsum_final_raw(ft_xsum_t *c, unsigned char *out);
void ft_xsum_abort(ft_xsum_t *c);

#define FT_XSUM_RAW_MAX 32

/* CRC-64/NVME (reflected 0xad93d23594c93659, init and xorout all ones) of len bytes, chained from crc (0 to start). */
uint64_t ft_crc64nvme(uint64_t crc, const void *buf, size_t len);

#endif
