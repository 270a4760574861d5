/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the token parser (common/auth/jwt.c), the signed-URL and control-request signature checks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "auth/jwt.h"
#include "auth/reqsig.h"
#include "auth/urlsig.h"
#include "base/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t key[32] = "fuzz-key-fuzz-key-fuzz-key-fuzz";

/*
 * A verified token issues again, and the new token verifies to the same claims: what the parser
 * accepts is something the issuer could have made.
 */
static void check_roundtrip(const ft_principal_t *p, time_t exp)
{
	char *again = ft_jwt_issue(key, p, 1, exp);
	ft_principal_t q;

	if (again == NULL)
		abort();
	if (ft_jwt_verify(key, again, strlen(again), 0, &q, NULL) != FT_JWT_OK || strcmp(q.sub, p->sub) != 0 ||
	    q.role != p->role || (q.buckets == NULL) != (p->buckets == NULL))
		abort();
	ft_principal_clear(&q);
	free(again);
}

static void verify(const char *tok, size_t len)
{
	ft_principal_t p;
	time_t exp = 0;

	if (ft_jwt_verify(key, tok, len, 0, &p, &exp) == FT_JWT_OK) {
		check_roundtrip(&p, exp);
		ft_principal_clear(&p);
	}
}

/*
 * The input as a token (mostly stopped by the signature), then the input as "header.payload"
 * with a valid signature appended, so the header and claims parsers see every input.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char buf[FT_JWT_MAX + 64];
	uint8_t mac[32];
	unsigned int n = 32;
	char sig[64], nul[256];

	if (size > FT_JWT_MAX)
		return 0;
	verify((const char *)data, size);
	memcpy(buf, data, size);
	if (HMAC(EVP_sha256(), key, 32, data, size, mac, &n) == NULL)
		abort();
	buf[size] = '.';
	size_t len = size + 1 + ft_base64url_encode(mac, 32, sig);
	memcpy(buf + size + 1, sig, len - size - 1);
	verify(buf, len);

	/* The other two signature checks take header or query values: NUL-terminated pieces of the input. */
	size_t k = size < sizeof(nul) - 1 ? size : sizeof(nul) - 1;
	memcpy(nul, data, k);
	nul[k] = '\0';
	ft_urlsig_check(key, nul, nul, "GET", "ais", "b", nul, k, 1000);
	ft_reqsig_verify(key, "GET", nul, data, size, nul, nul, nul, 1000, NULL);
	return 0;
}
