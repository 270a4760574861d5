/* SPDX-License-Identifier: Apache-2.0 */
/* RS256 JSON Web Tokens: signing with an RSA private key and verification, on OpenSSL EVP. */
#include "cloud/jwt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "base/codec.h"

#define JWT_HEADER "{\"alg\":\"RS256\",\"typ\":\"JWT\"}"

/* base64url without padding of buf, malloc'd; NULL when out of memory. */
static char *b64url_dup(const void *buf, size_t len)
{
	char *out = malloc(FT_BASE64_LEN(len) + 1);

	if (out != NULL)
		ft_base64url_encode(buf, len, out);
	return out;
}

/* Decodes base64url (no padding) into a malloc'd buffer; NULL on bad input. */
static uint8_t *b64url_decode(const char *s, size_t n, size_t *out_len)
{
	size_t cap = n / 4 * 3 + 3;
	uint8_t *out = malloc(cap);
	long len = out != NULL ? ft_base64url_decode(s, n, out, cap) : -1;

	if (len < 0) {
		free(out);
		return NULL;
	}
	*out_len = (size_t)len;
	return out;
}

static EVP_PKEY *load_private(const char *pem)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key;

	if (bio == NULL)
		return NULL;
	key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	return key;
}

static EVP_PKEY *load_public(const char *pem)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key;

	if (bio == NULL)
		return NULL;
	key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	return key;
}

char *ft_jwt_sign_rs256(const char *pem_private_key, const char *claims_json, char *err, size_t errlen)
{
	EVP_PKEY *key = NULL;
	EVP_MD_CTX *md = NULL;
	char *head = NULL, *claims = NULL, *input = NULL, *sig64 = NULL, *token = NULL;
	unsigned char *sig = NULL;
	size_t sig_len = 0, input_len;

	key = load_private(pem_private_key);
	if (key == NULL || EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
		snprintf(err, errlen, "jwt: not an RSA private key in PEM");
		goto out;
	}
	head = b64url_dup(JWT_HEADER, strlen(JWT_HEADER));
	claims = b64url_dup(claims_json, strlen(claims_json));
	if (head == NULL || claims == NULL || asprintf(&input, "%s.%s", head, claims) < 0) {
		input = NULL;
		snprintf(err, errlen, "jwt: out of memory");
		goto out;
	}
	input_len = strlen(input);
	md = EVP_MD_CTX_new();
	if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, &sig_len, (const unsigned char *)input, input_len) != 1 ||
	    (sig = malloc(sig_len)) == NULL ||
	    EVP_DigestSign(md, sig, &sig_len, (const unsigned char *)input, input_len) != 1) {
		snprintf(err, errlen, "jwt: signing failed");
		goto out;
	}
	sig64 = b64url_dup(sig, sig_len);
	if (sig64 == NULL || asprintf(&token, "%s.%s", input, sig64) < 0) {
		token = NULL;
		snprintf(err, errlen, "jwt: out of memory");
	}
out:
	free(sig64);
	free(sig);
	EVP_MD_CTX_free(md);
	free(input);
	free(claims);
	free(head);
	EVP_PKEY_free(key);
	return token;
}

int ft_jwt_verify_rs256(const char *token, const char *pem_public_key)
{
	const char *dot2 = strrchr(token, '.');
	EVP_PKEY *key = NULL;
	EVP_MD_CTX *md = NULL;
	uint8_t *sig = NULL;
	size_t sig_len = 0;
	int rc = -1;

	if (dot2 == NULL || memchr(token, '.', (size_t)(dot2 - token)) == NULL)
		return -1;
	key = load_public(pem_public_key);
	sig = b64url_decode(dot2 + 1, strlen(dot2 + 1), &sig_len);
	md = EVP_MD_CTX_new();
	if (key == NULL || sig == NULL || md == NULL || EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) != 1)
		goto out;
	if (EVP_DigestVerify(md, sig, sig_len, (const unsigned char *)token, (size_t)(dot2 - token)) == 1)
		rc = 0;
out:
	EVP_MD_CTX_free(md);
	free(sig);
	EVP_PKEY_free(key);
	return rc;
}
