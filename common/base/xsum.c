/* SPDX-License-Identifier: Apache-2.0 */
/* S3 flexible checksums: CRC32 and CRC32C through isa-l, SHA-1 and SHA-256 through OpenSSL, as base64 of the digest. */
/*
 * DESIGN
 * - S3 sends a checksum as the base64 of its big-endian digest; the comparison is done on that
 *   text after the given value was checked to decode to exactly one digest.
 * - isa-l's crc32_gzip_refl is the reflected CRC-32 of zlib and S3 (it inverts in and out, so it
 *   chains like zlib's crc32); crc32_iscsi is CRC-32C without the inversions, applied here.
 * - CRC64NVME is known by name only: the isa-l of Debian 12 (2.30) has no CRC-64/NVME.
 */
#include "base/xsum.h"

#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include "base/codec.h"

#define CRC_STEP (1u << 30) /* isa-l takes an int length */

typedef struct {
	const char *header;
	const char *label;
	size_t digest_len; /* 0: not computed */
} alg_info_t;

static const alg_info_t algs[] = {
	[FT_XSUM_NONE] = {"", "", 0},
	[FT_XSUM_CRC32] = {"x-amz-checksum-crc32", "CRC32", 4},
	[FT_XSUM_CRC32C] = {"x-amz-checksum-crc32c", "CRC32C", 4},
	[FT_XSUM_CRC64NVME] = {"x-amz-checksum-crc64nvme", "CRC64NVME", 0},
	[FT_XSUM_SHA1] = {"x-amz-checksum-sha1", "SHA1", 20},
	[FT_XSUM_SHA256] = {"x-amz-checksum-sha256", "SHA256", 32},
};

#define N_ALGS (sizeof(algs) / sizeof(algs[0]))

ft_xsum_alg_t ft_xsum_from_name(const char *name)
{
	if (name == NULL)
		return FT_XSUM_NONE;
	for (size_t i = 1; i < N_ALGS; i++)
		if (strcasecmp(name, algs[i].header) == 0)
			return (ft_xsum_alg_t)i;
	return FT_XSUM_NONE;
}

const char *ft_xsum_header(ft_xsum_alg_t alg)
{
	return (size_t)alg < N_ALGS ? algs[alg].header : "";
}

const char *ft_xsum_label(ft_xsum_alg_t alg)
{
	return (size_t)alg < N_ALGS ? algs[alg].label : "";
}

int ft_xsum_value_ok(ft_xsum_alg_t alg, const char *value)
{
	unsigned char raw[36]; /* the digest and the 2 bytes padding may stand for */
	size_t n, want;

	if ((size_t)alg >= N_ALGS || algs[alg].digest_len == 0 || value == NULL)
		return 0;
	want = algs[alg].digest_len;
	n = strlen(value);
	if (n != FT_BASE64_LEN(want))
		return 0;
	return ft_base64_decode(value, n, raw, sizeof(raw)) == (long)want;
}

int ft_xsum_init(ft_xsum_t *c, ft_xsum_alg_t alg)
{
	const EVP_MD *md = NULL;

	memset(c, 0, sizeof(*c));
	if ((size_t)alg >= N_ALGS || algs[alg].digest_len == 0)
		return -1;
	c->alg = alg;
	if (alg == FT_XSUM_SHA1)
		md = EVP_sha1();
	else if (alg == FT_XSUM_SHA256)
		md = EVP_sha256();
	if (md == NULL)
		return 0;
	c->md = EVP_MD_CTX_new();
	if (c->md == NULL || EVP_DigestInit_ex(c->md, md, NULL) != 1) {
		ft_xsum_abort(c);
		return -1;
	}
	return 0;
}

void ft_xsum_update(ft_xsum_t *c, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (c->md != NULL) {
		EVP_DigestUpdate(c->md, buf, len);
		return;
	}
	while (len > 0) {
		size_t n = len < CRC_STEP ? len : CRC_STEP;

		if (c->alg == FT_XSUM_CRC32)
			c->crc = crc32_gzip_refl(c->crc, p, n);
		else if (c->alg == FT_XSUM_CRC32C)
			c->crc = ~crc32_iscsi((unsigned char *)p, (int)n, ~c->crc);
		p += n;
		len -= n;
	}
}

int ft_xsum_final(ft_xsum_t *c, char out[FT_XSUM_B64_MAX])
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	out[0] = '\0';
	if (c->md != NULL) {
		int ok = EVP_DigestFinal_ex(c->md, digest, &n) == 1;

		ft_xsum_abort(c);
		if (!ok)
			return -1;
	} else if (c->alg == FT_XSUM_CRC32 || c->alg == FT_XSUM_CRC32C) {
		digest[0] = (unsigned char)(c->crc >> 24);
		digest[1] = (unsigned char)(c->crc >> 16);
		digest[2] = (unsigned char)(c->crc >> 8);
		digest[3] = (unsigned char)c->crc;
		n = 4;
	} else {
		return -1;
	}
	ft_base64_encode(digest, n, out);
	return 0;
}

void ft_xsum_abort(ft_xsum_t *c)
{
	if (c->md != NULL)
		EVP_MD_CTX_free(c->md);
	c->md = NULL;
}
