/* SPDX-License-Identifier: Apache-2.0 */
/* S3 flexible checksums: CRC32 and CRC32C through isa-l, CRC-64/NVME by table, SHA-1 and SHA-256 through OpenSSL, as base64 of the digest. */
/*
 * DESIGN
 * - S3 sends a checksum as the base64 of its big-endian digest; the comparison is done on that
 *   text after the given value was checked to decode to exactly one digest.
 * - isa-l's crc32_gzip_refl is the reflected CRC-32 of zlib and S3 (it inverts in and out, so it
 *   chains like zlib's crc32); CRC-32C is base/crc32c.h's (isa-l's crc32_iscsi with the inversions).
 * - CRC-64/NVME is computed here (slicing by 8 over tables built once): the isa-l of Debian 12
 *   (2.30) has no CRC-64/NVME (its Rocksoft functions came later).
 */
#include "base/xsum.h"

#include <pthread.h>
#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include "base/codec.h"
#include "base/crc32c.h"

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
	[FT_XSUM_CRC64NVME] = {"x-amz-checksum-crc64nvme", "CRC64NVME", 8},
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

ft_xsum_alg_t ft_xsum_from_label(const char *label)
{
	if (label == NULL)
		return FT_XSUM_NONE;
	for (size_t i = 1; i < N_ALGS; i++)
		if (strcasecmp(label, algs[i].label) == 0)
			return (ft_xsum_alg_t)i;
	return FT_XSUM_NONE;
}

size_t ft_xsum_digest_len(ft_xsum_alg_t alg)
{
	return (size_t)alg < N_ALGS ? algs[alg].digest_len : 0;
}

int ft_xsum_is_crc(ft_xsum_alg_t alg)
{
	return alg == FT_XSUM_CRC32 || alg == FT_XSUM_CRC32C || alg == FT_XSUM_CRC64NVME;
}

/* ---- CRC-64/NVME ---- */

#define CRC64NVME_POLY 0x9a6c9329ac4bc9b5ull /* 0xad93d23594c93659 reflected */

static uint64_t crc64_table[8][256];
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

static void crc64_tables(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC64NVME_POLY : c >> 1;
		crc64_table[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc64_table[t][i] = (crc64_table[t - 1][i] >> 8) ^ crc64_table[0][crc64_table[t - 1][i] & 0xff];
}

uint64_t ft_crc64nvme(uint64_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;

	pthread_once(&crc64_once, crc64_tables);
	while (len >= 8) {
		uint64_t v = c;
		for (int i = 0; i < 8; i++)
			v ^= (uint64_t)p[i] << (8 * i);
		c = crc64_table[7][v & 0xff] ^ crc64_table[6][(v >> 8) & 0xff] ^ crc64_table[5][(v >> 16) & 0xff] ^
		    crc64_table[4][(v >> 24) & 0xff] ^ crc64_table[3][(v >> 32) & 0xff] ^
		    crc64_table[2][(v >> 40) & 0xff] ^ crc64_table[1][(v >> 48) & 0xff] ^ crc64_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		c = crc64_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return ~c;
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
	unsigned char raw[FT_XSUM_RAW_MAX + 4]; /* the digest and the 2 bytes padding may stand for */
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
			c->crc = crc32_gzip_refl((uint32_t)c->crc, p, n);
		else if (c->alg == FT_XSUM_CRC32C)
			c->crc = ft_crc32c((uint32_t)c->crc, p, n);
		else
			c->crc = ft_crc64nvme(c->crc, p, n);
		p += n;
		len -= n;
	}
}

int ft_xsum_final_raw(ft_xsum_t *c, unsigned char *out)
{
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (c->md != NULL) {
		int ok = EVP_DigestFinal_ex(c->md, digest, &n) == 1;

		ft_xsum_abort(c);
		if (!ok || n > FT_XSUM_RAW_MAX)
			return -1;
		memcpy(out, digest, n);
		return (int)n;
	}
	n = (unsigned)ft_xsum_digest_len(c->alg);
	if (n == 0 || n > 8)
		return -1;
	for (unsigned i = 0; i < n; i++)
		out[i] = (unsigned char)(c->crc >> (8 * (n - 1 - i)));
	return (int)n;
}

int ft_xsum_final(ft_xsum_t *c, char out[FT_XSUM_B64_MAX])
{
	unsigned char digest[FT_XSUM_RAW_MAX];
	int n = ft_xsum_final_raw(c, digest);

	out[0] = '\0';
	if (n < 0)
		return -1;
	ft_base64_encode(digest, (size_t)n, out);
	return 0;
}

void ft_xsum_abort(ft_xsum_t *c)
{
	if (c->md != NULL)
		EVP_MD_CTX_free(c->md);
	c->md = NULL;
}
