/* SPDX-License-Identifier: Apache-2.0 */
/* AES-256-GCM sealing of short secrets (OpenSSL EVP): random IV, authenticated context, base64 text form. */
#include "auth/seal.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base/codec.h"

#define IV_LEN 12
#define TAG_LEN 16
#define PLAIN_MAX 65536

bool ft_seal_is_sealed(const char *s)
{
	return s != NULL && strncmp(s, FT_SEAL_PREFIX, strlen(FT_SEAL_PREFIX)) == 0;
}

/* Encrypts (enc) or decrypts in[0..n) into out with iv and aad; for decryption tag is checked. n out bytes; 0 or -1. */
static int gcm(int enc, const uint8_t key[FT_SEAL_KEY_LEN], const uint8_t iv[IV_LEN], const char *aad,
	       const uint8_t *in, int n, uint8_t *out, uint8_t tag[TAG_LEN])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int len = 0, fin = 0, rc = -1;

	if (c == NULL)
		return -1;
	if (EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, IV_LEN, NULL) != 1 ||
	    EVP_CipherInit_ex(c, NULL, NULL, key, iv, enc) != 1 ||
	    EVP_CipherUpdate(c, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) != 1 ||
	    EVP_CipherUpdate(c, out, &len, in, n) != 1)
		goto out;
	if (!enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1)
		goto out;
	if (EVP_CipherFinal_ex(c, out + len, &fin) != 1) /* decryption: the tag check */
		goto out;
	if (enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1)
		goto out;
	rc = len + fin == n ? 0 : -1;
out:
	EVP_CIPHER_CTX_free(c);
	return rc;
}

char *ft_seal(const uint8_t key[FT_SEAL_KEY_LEN], const char *aad, const char *plain)
{
	size_t n = strlen(plain), raw_len = IV_LEN + n + TAG_LEN, pre = strlen(FT_SEAL_PREFIX);
	uint8_t *raw;
	char *out = NULL;

	if (n > PLAIN_MAX)
		return NULL;
	raw = malloc(raw_len);
	if (raw == NULL)
		return NULL;
	if (RAND_bytes(raw, IV_LEN) != 1 ||
	    gcm(1, key, raw, aad, (const uint8_t *)plain, (int)n, raw + IV_LEN, raw + IV_LEN + n) != 0)
		goto out;
	out = malloc(pre + FT_BASE64_LEN(raw_len) + 1);
	if (out == NULL)
		goto out;
	memcpy(out, FT_SEAL_PREFIX, pre);
	ft_base64_encode(raw, raw_len, out + pre);
out:
	OPENSSL_cleanse(raw, raw_len);
	free(raw);
	return out;
}

char *ft_unseal(const uint8_t key[FT_SEAL_KEY_LEN], const char *aad, const char *sealed)
{
	const char *b64;
	size_t b64_len, cap;
	uint8_t *raw = NULL;
	char *plain = NULL;
	long n;

	if (!ft_seal_is_sealed(sealed))
		return NULL;
	b64 = sealed + strlen(FT_SEAL_PREFIX);
	b64_len = strlen(b64);
	if (b64_len == 0 || b64_len % 4 != 0 || b64_len > FT_BASE64_LEN(PLAIN_MAX + IV_LEN + TAG_LEN))
		return NULL;
	cap = b64_len / 4 * 3;
	raw = malloc(cap);
	if (raw == NULL)
		return NULL;
	n = ft_base64_decode(b64, b64_len, raw, cap);
	if (n < IV_LEN + TAG_LEN)
		goto out;
	size_t len = (size_t)n - IV_LEN - TAG_LEN;
	plain = malloc(len + 1);
	if (plain == NULL)
		goto out;
	if (gcm(0, key, raw, aad, raw + IV_LEN, (int)len, (uint8_t *)plain, raw + IV_LEN + len) != 0 ||
	    memchr(plain, '\0', len) != NULL) {
		OPENSSL_cleanse(plain, len + 1);
		free(plain);
		plain = NULL;
		goto out;
	}
	plain[len] = '\0';
out:
	free(raw);
	return plain;
}
