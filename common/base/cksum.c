/* SPDX-License-Identifier: Apache-2.0 */
/* Streaming object checksums: xxhash64 (libxxhash) and md5 (OpenSSL EVP). */
#include "base/cksum.h"

#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>

#include "base/codec.h"

static const char *const cksum_names[] = {
	[FT_CKSUM_NONE] = "none",
	[FT_CKSUM_XXHASH] = "xxhash",
	[FT_CKSUM_MD5] = "md5",
};

int ft_cksum_init(ft_cksum_t *c, ft_cksum_type_t type)
{
	c->type = type;
	c->state = NULL;
	switch (type) {
	case FT_CKSUM_NONE:
		return 0;
	case FT_CKSUM_XXHASH: {
		XXH64_state_t *st = XXH64_createState();
		if (st == NULL)
			return -1;
		XXH64_reset(st, 0);
		c->state = st;
		return 0;
	}
	case FT_CKSUM_MD5: {
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();
		if (ctx == NULL)
			return -1;
		if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1) {
			EVP_MD_CTX_free(ctx);
			return -1;
		}
		c->state = ctx;
		return 0;
	}
	}
	return -1;
}

void ft_cksum_update(ft_cksum_t *c, const void *buf, size_t len)
{
	if (c->state == NULL || len == 0)
		return;
	if (c->type == FT_CKSUM_XXHASH)
		XXH64_update(c->state, buf, len);
	else if (c->type == FT_CKSUM_MD5)
		EVP_DigestUpdate(c->state, buf, len);
}

void ft_cksum_final(ft_cksum_t *c, char hex[FT_CKSUM_HEX_MAX])
{
	hex[0] = '\0';
	if (c->state == NULL)
		return;
	if (c->type == FT_CKSUM_XXHASH) {
		XXH64_canonical_t canon; /* big-endian bytes: the usual printed form */
		XXH64_canonicalFromHash(&canon, XXH64_digest(c->state));
		ft_hex_encode(canon.digest, sizeof(canon.digest), hex);
	} else if (c->type == FT_CKSUM_MD5) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int n = 0;
		if (EVP_DigestFinal_ex(c->state, md, &n) == 1 && 2 * (size_t)n < FT_CKSUM_HEX_MAX)
			ft_hex_encode(md, n, hex);
	}
	ft_cksum_abort(c);
}

void ft_cksum_abort(ft_cksum_t *c)
{
	if (c->state == NULL)
		return;
	if (c->type == FT_CKSUM_XXHASH)
		XXH64_freeState(c->state);
	else if (c->type == FT_CKSUM_MD5)
		EVP_MD_CTX_free(c->state);
	c->state = NULL;
}

const char *ft_cksum_name(ft_cksum_type_t type)
{
	if ((int)type < FT_CKSUM_NONE || (int)type > FT_CKSUM_MD5)
		return "unknown";
	return cksum_names[type];
}

int ft_cksum_parse(const char *name, ft_cksum_type_t *out)
{
	if (name == NULL)
		return -1;
	for (int i = FT_CKSUM_NONE; i <= FT_CKSUM_MD5; i++) {
		if (strcmp(name, cksum_names[i]) == 0) {
			*out = (ft_cksum_type_t)i;
			return 0;
		}
	}
	return -1;
}
