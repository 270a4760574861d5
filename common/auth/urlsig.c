/* SPDX-License-Identifier: Apache-2.0 */
/* Signed object URLs: HMAC-SHA256 over method, provider, bucket, expiry and object name. */
#include "auth/urlsig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/codec.h"

/*
 * DESIGN
 * The MAC input is "ft-url-v1\n" METHOD "\n" provider "\n" bucket "\n" expiry "\n" object: the names
 * that come first cannot hold a newline, and the object name (which can) is last, so no two
 * requests share an input. The key is derived from the cluster secret for this use only.
 */

static int sign(const uint8_t key[FT_URLSIG_KEY_LEN], const char *method, const char *provider, const char *bucket,
		long long exp, const char *obj, size_t obj_len, uint8_t out[32])
{
	ft_strbuf_t msg = {0};
	unsigned int len = 32;
	int rc = -1;

	ft_strbuf_addf(&msg, "ft-url-v1\n%s\n%s\n%s\n%lld\n", method, provider, bucket, exp);
	ft_strbuf_add(&msg, obj, obj_len);
	if (!msg.failed &&
	    HMAC(EVP_sha256(), key, FT_URLSIG_KEY_LEN, (const unsigned char *)msg.p, msg.len, out, &len) != NULL &&
	    len == 32)
		rc = 0;
	ft_strbuf_free(&msg);
	return rc;
}

void ft_urlsig_append(ft_strbuf_t *b, bool has_query, const uint8_t key[FT_URLSIG_KEY_LEN], const char *method,
		      const char *provider, const char *bucket, const char *obj, size_t obj_len, time_t now)
{
	long long exp = (long long)now + FT_URLSIG_TTL;
	uint8_t mac[32];
	char hex[65];

	if (sign(key, method, provider, bucket, exp, obj, obj_len, mac) != 0) {
		b->failed = true;
		return;
	}
	ft_hex_encode(mac, sizeof(mac), hex);
	ft_strbuf_addf(b, "%sft_exp=%lld&ft_sig=%s", has_query ? "&" : "?", exp, hex);
}

ft_urlsig_result_t ft_urlsig_check(const uint8_t key[FT_URLSIG_KEY_LEN], const char *exp, const char *sig,
				   const char *method, const char *provider, const char *bucket, const char *obj,
				   size_t obj_len, time_t now)
{
	uint8_t want[32], got[32];
	long long e;
	char *end;

	if (exp == NULL && sig == NULL)
		return FT_URLSIG_NONE;
	if (exp == NULL || sig == NULL || exp[0] == '\0' || strlen(sig) != 64 ||
	    ft_hex_decode(sig, 64, got, sizeof(got), 0) != 32)
		return FT_URLSIG_BAD;
	e = strtoll(exp, &end, 10);
	if (*end != '\0' || e <= 0)
		return FT_URLSIG_BAD;
	if (sign(key, method, provider, bucket, e, obj, obj_len, want) != 0)
		return FT_URLSIG_BAD;
	if (CRYPTO_memcmp(want, got, 32) != 0) {
		if (strncmp(method, "COPY ", 5) == 0 ||
		    sign(key, FT_URLSIG_ANY_METHOD, provider, bucket, e, obj, obj_len, want) != 0 ||
		    CRYPTO_memcmp(want, got, 32) != 0)
			return FT_URLSIG_BAD;
	}
	/* Checked after the MAC, so an expired answer is given only for a URL we made. */
	if (e < (long long)now || e > (long long)now + 24 * 3600)
		return FT_URLSIG_EXPIRED;
	return FT_URLSIG_OK;
}

const char *ft_urlsig_method(const char *method, const char *obj_to, char *buf, size_t cap)
{
	int n;

	if (obj_to == NULL || strcmp(method, "PUT") != 0)
		return method;
	n = snprintf(buf, cap, "COPY %zu:%s", strlen(obj_to), obj_to); /* its length: one reading, whatever it holds */
	return n < 0 || (size_t)n >= cap ? NULL : buf;
}
