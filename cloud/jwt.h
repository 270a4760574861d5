/* SPDX-License-Identifier: Apache-2.0 */
/* RS256 JSON Web Tokens (RFC 7519 compact form), as Google's OAuth2 service-account grant wants them, on OpenSSL. */
#ifndef FT_JWT_H
#define FT_JWT_H

#include <stddef.h>

/*
 * Signs claims_json (a JSON object text, used verbatim) with the RSA private key in PEM
 * (PKCS#8 or PKCS#1): returns "base64url(header).base64url(claims).base64url(signature)" with
 * header {"alg":"RS256","typ":"JWT"}; malloc'd. NULL with a message in err on a bad key or failure.
 */
char *ft_jwt_sign_rs256(const char *pem_private_key, const char *claims_json, char *err, size_t errlen);
/* Checks token's RS256 signature with the public key in PEM; returns 0 when valid, -1 otherwise. */
int ft_jwt_verify_rs256(const char *token, const char *pem_public_key);

#endif
