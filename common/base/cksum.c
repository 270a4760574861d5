/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming object checksums: xxhash64 and xxh3 (libxxhash), md5, sha256 and sha512 (OpenSSL EVP), crc32c (isa-l). */
#include "base/cksum.h"

#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>
#if defined(__x86_64__)
/*
 * XXH3 through libxxhash's run-time dispatch: its plain XXH3 functions are built for the baseline
 * (SSE2), the _dispatch ones pick AVX2 or AVX-512 where the CPU has them: 8.5 -> 28 GiB/s of a
 * core on the bench machine's AVX2 (bench/cksum_speed.c, bench/datapath.md). Same values.
 */
#include <xxh_x86dispatch.h>
#endif

#include "base/codec.h"
#include "base/crc32c.h"

static const char *const cksum_names[] = {
	[FT_CKSUM_NONE] = "none",     [FT_CKSUM_XXHASH] = "xxhash", [FT_CKSUM_MD5] = "md5",
	[FT_CKSUM_XXH3] = "xxh3",     [FT_CKSUM_CRC32C] = "crc32c", [FT_CKSUM_SHA256] = "sha256",
	[FT_CKSUM_SHA512] = "sha512",
};

int ft_cksum_valid(int type)
{
	return type >= FT_CKSUM_NONE && type <= FT_CKSUM_LAST;
}

static int evp_init(ft_cksum_t *c, const EVP_MD *md)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (ctx == NULL)
		return -1;
	if (EVP_DigestInit_ex(ctx, md, NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		return -1;
	}
	c->state = ctx;
	return 0;
}

int ft_cksum_init(ft_cksum_t *c, ft_cksum_type_t type)
{
	c->type = type;
	c->crc = 0;
	c->state = NULL;
	switch (type) {
	case FT_CKSUM_NONE:
	case FT_CKSUM_CRC32C:
		return 0;
	case FT_CKSUM_XXHASH: {
		XXH64_state_t *st = XXH64_createState();
		if (st == NULL)
			return -1;
		XXH64_reset(st, 0);
		c->state = st;
		return 0;
	}
	case FT_CKSUM_XXH3: {
		XXH3_state_t *st = XXH3_createState();
		if (st == NULL)
			return -1;
		XXH3_64bits_reset(st);
		c->state = st;
		return 0;
	}
	case FT_CKSUM_MD5:
		return evp_init(c, EVP_md5());
	case FT_CKSUM_SHA256:
		return evp_init(c, EVP_sha256());
	case FT_CKSUM_SHA512:
		return evp_init(c, EVP_sha512());
	}
	return -1;
}

void ft_cksum_update(ft_cksum_t *c, const void *buf, size_t len)
{
	if (len == 0)
		return;
	switch (c->type) {
	case FT_CKSUM_XXHASH:
		if (c->state != NULL)
			XXH64_update(c->state, buf, len);
		break;
	case FT_CKSUM_XXH3:
		if (c->state != NULL)
			XXH3_64bits_update(c->state, buf, len);
		break;
	case FT_CKSUM_MD5:
	case FT_CKSUM_SHA256:
	case FT_CKSUM_SHA512:
		if (c->state != NULL)
			EVP_DigestUpdate(c->state, buf, len);
		break;
	case FT_CKSUM_CRC32C:
		c->crc = ft_crc32c(c->crc, buf, len);
		break;
	case FT_CKSUM_NONE:
		break;
	}
}

/* A 64-bit xxhash value as its canonical (big-endian) bytes in hex. */
static void hex64(XXH64_hash_t h, char hex[FT_CKSUM_HEX_MAX])
{
	XXH64_canonical_t canon;

	XXH64_canonicalFromHash(&canon, h);
	ft_hex_encode(canon.digest, sizeof(canon.digest), hex);
}

void ft_cksum_final(ft_cksum_t *c, char hex[FT_CKSUM_HEX_MAX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	hex[0] = '\0';
	switch (c->type) {
	case FT_CKSUM_XXHASH:
		if (c->state != NULL)
			hex64(XXH64_digest(c->state), hex);
		break;
	case FT_CKSUM_XXH3:
		if (c->state != NULL)
			hex64(XXH3_64bits_digest(c->state), hex);
		break;
	case FT_CKSUM_MD5:
	case FT_CKSUM_SHA256:
	case FT_CKSUM_SHA512:
		if (c->state != NULL && EVP_DigestFinal_ex(c->state, md, &n) == 1 && 2 * (size_t)n < FT_CKSUM_HEX_MAX)
			ft_hex_encode(md, n, hex);
		break;
	case FT_CKSUM_CRC32C:
		md[0] = (unsigned char)(c->crc >> 24);
		md[1] = (unsigned char)(c->crc >> 16);
		md[2] = (unsigned char)(c->crc >> 8);
		md[3] = (unsigned char)c->crc;
		ft_hex_encode(md, 4, hex);
		break;
	case FT_CKSUM_NONE:
		break;
	}
	ft_cksum_abort(c);
}

void ft_cksum_abort(ft_cksum_t *c)
{
	if (c->state != NULL) {
		if (c->type == FT_CKSUM_XXHASH)
			XXH64_freeState(c->state);
		else if (c->type == FT_CKSUM_XXH3)
			XXH3_freeState(c->state);
		else if (c->type == FT_CKSUM_MD5 || c->type == FT_CKSUM_SHA256 || c->type == FT_CKSUM_SHA512)
			EVP_MD_CTX_free(c->state);
	}
	c->state = NULL;
	c->type = FT_CKSUM_NONE; /* a second final gives "", a second abort does nothing */
}

const char *ft_cksum_name(ft_cksum_type_t type)
{
	return ft_cksum_valid((int)type) ? cksum_names[type] : "unknown";
}

int ft_cksum_parse(const char *name, ft_cksum_type_t *out)
{
	if (name == NULL)
		return -1;
	for (int i = FT_CKSUM_NONE; i <= FT_CKSUM_LAST; i++) {
		if (strcmp(name, cksum_names[i]) == 0) {
			*out = (ft_cksum_type_t)i;
			return 0;
		}
	}
	return -1;
}
