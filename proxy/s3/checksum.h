/* SPDX-License-Identifier: Apache-2.0 */
/* S3 flexible checksums (x-amz-checksum-crc32, -crc32c, -sha1, -sha256): computing them over a body as it streams. */
#ifndef PX_S3_CHECKSUM_H
#define PX_S3_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	PX_S3_CK_NONE = 0,
	PX_S3_CK_CRC32,
	PX_S3_CK_CRC32C,
	PX_S3_CK_CRC64NVME, /* known by name, not computed: answered with NotImplemented */
	PX_S3_CK_SHA1,
	PX_S3_CK_SHA256,
} px_s3_ck_alg_t;

#define PX_S3_CK_B64_MAX 48 /* base64 of the longest digest (SHA-256: 44) and a NUL */

/* The algorithm of a header or trailer name ("x-amz-checksum-crc32", any case); NONE when it names none. */
px_s3_ck_alg_t px_s3_ck_from_name(const char *name);
/* The header name of alg ("x-amz-checksum-crc32") and its S3 name ("CRC32"). */
const char *px_s3_ck_header(px_s3_ck_alg_t alg);
const char *px_s3_ck_label(px_s3_ck_alg_t alg);
/* Whether value is the base64 of exactly one digest of alg (a computable algorithm). */
int px_s3_ck_value_ok(px_s3_ck_alg_t alg, const char *value);

/* A running checksum; state owned until px_s3_ck_final or px_s3_ck_abort. */
typedef struct {
	px_s3_ck_alg_t alg;
	uint32_t crc;
	void *md; /* EVP_MD_CTX for the SHAs */
} px_s3_ck_t;

/* 0, or -1 (no memory, or an algorithm that is not computed). */
int px_s3_ck_init(px_s3_ck_t *c, px_s3_ck_alg_t alg);
void px_s3_ck_update(px_s3_ck_t *c, const void *buf, size_t len);
/* The base64 of the big-endian digest into out; releases the state. 0 or -1. */
int px_s3_ck_final(px_s3_ck_t *c, char out[PX_S3_CK_B64_MAX]);
void px_s3_ck_abort(px_s3_ck_t *c);

#endif
