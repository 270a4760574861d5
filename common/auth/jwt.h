/* SPDX-License-Identifier: Apache-2.0 */
/* Access tokens: JWTs signed with HS256 (OpenSSL HMAC), carrying the caller, role, bucket grants and expiry. */
#ifndef FT_AUTH_JWT_H
#define FT_AUTH_JWT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth/role.h"

#define FT_JWT_MAX 4096   /* longest token accepted */
#define FT_JWT_KEY_LEN 32 /* HMAC key bytes */
#define FT_JWT_ISSUER "fasttier"

typedef enum {
	FT_JWT_OK = 0,
	FT_JWT_MALFORMED, /* not three base64url parts of JSON, or too long */
	FT_JWT_ALG,       /* header alg is not HS256 (alg "none" included) */
	FT_JWT_SIGNATURE, /* signature does not match */
	FT_JWT_EXPIRED,   /* exp at or before now */
	FT_JWT_CLAIMS,    /* missing or bad sub, role, exp, iss, buckets */
} ft_jwt_result_t;

/* A message for a result ("token expired", ...). */
const char *ft_jwt_strerror(ft_jwt_result_t r);

/*
 * Issues a token for p valid until exp (unix seconds), issued at iat. Returns a malloc'd
 * NUL-terminated token (the caller frees it), or NULL on allocation failure.
 */
char *ft_jwt_issue(const uint8_t key[FT_JWT_KEY_LEN], const ft_principal_t *p, time_t iat, time_t exp);
/*
 * Verifies token (len bytes, need not be NUL-terminated) at time now. On FT_JWT_OK fills *p
 * (the caller clears it with ft_principal_clear) and *exp when exp is not NULL; on failure *p is
 * left empty.
 */
ft_jwt_result_t ft_jwt_verify(const uint8_t key[FT_JWT_KEY_LEN], const char *token, size_t len, time_t now,
			      ft_principal_t *p, time_t *exp);

#endif
