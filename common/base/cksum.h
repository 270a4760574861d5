/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming object checksums: xxhash64 (default), md5, xxh3, crc32c, sha256 and sha512. */
#ifndef FT_CKSUM_H
#define FT_CKSUM_H

#include <stddef.h>
#include <stdint.h>

/*
 * The numbers are stored in object metadata (target/core/lom.c) and never change meaning: a new
 * type takes the next number.
 */
typedef enum {
	FT_CKSUM_NONE = 0,
	FT_CKSUM_XXHASH = 1, /* XXH64, seed 0 */
	FT_CKSUM_MD5 = 2,
	FT_CKSUM_XXH3 = 3,   /* XXH3 64-bit, seed 0 */
	FT_CKSUM_CRC32C = 4, /* CRC-32C (Castagnoli), as iSCSI, ext4 and GCS use it */
	FT_CKSUM_SHA256 = 5,
	FT_CKSUM_SHA512 = 6,
} ft_cksum_type_t;

#define FT_CKSUM_LAST FT_CKSUM_SHA512
#define FT_CKSUM_HEX_MAX 129 /* longest hex value (sha512's 128 digits) + NUL */
/* The names a bucket's checksum can take, for error messages. */
#define FT_CKSUM_NAMES "xxhash, md5, xxh3, crc32c, sha256, sha512"

/*
 * Values are the lowercase hex of the digest in big-endian byte order, the usual printed form:
 * 16 digits for xxhash and xxh3, 8 for crc32c (crc32c("123456789") is "e3069283"), 32 for md5,
 * 64 for sha256, 128 for sha512.
 */
typedef struct {
	ft_cksum_type_t type;
	uint32_t crc; /* crc32c's running value */
	void *state;  /* XXH64_state_t, XXH3_state_t or EVP_MD_CTX, owned */
} ft_cksum_t;

/* Returns 0, -1 on allocation failure or an unknown type. */
int ft_cksum_init(ft_cksum_t *c, ft_cksum_type_t type);
void ft_cksum_update(ft_cksum_t *c, const void *buf, size_t len);
/* Writes the lowercase hex digest ("" for NONE) and releases the state. */
void ft_cksum_final(ft_cksum_t *c, char hex[FT_CKSUM_HEX_MAX]);
/* Releases the state without a result (error paths); safe after final. */
void ft_cksum_abort(ft_cksum_t *c);
/* Whether type is one of the types above (stored metadata is checked with it). */
int ft_cksum_valid(int type);
/* "none", "xxhash", "md5", "xxh3", "crc32c", "sha256", "sha512"; "unknown" for another number. */
const char *ft_cksum_name(ft_cksum_type_t type);
/* Returns 0, or -1 for an unknown name (names are lowercase, as ft_cksum_name gives them). */
int ft_cksum_parse(const char *name, ft_cksum_type_t *out);

#endif
