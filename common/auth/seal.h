/* SPDX-License-Identifier: Apache-2.0 */
/* Sealed strings: AES-256-GCM (OpenSSL EVP) under a key derived from the cluster secret, for backend secrets at rest and in flight. */
#ifndef FT_AUTH_SEAL_H
#define FT_AUTH_SEAL_H

#include <stdbool.h>
#include <stdint.h>

#define FT_SEAL_PREFIX "enc:v1:"
#define FT_SEAL_KEY_LEN 32

/* Whether s is a sealed string (FT_SEAL_PREFIX ...). */
bool ft_seal_is_sealed(const char *s);
/*
 * Seals plain: FT_SEAL_PREFIX then base64 of a random 12-byte IV, the ciphertext and the 16-byte
 * tag; aad (e.g. "aws/bucket/secret_key") is authenticated, so a sealed value moved to another
 * bucket or field no longer opens. Returns a malloc'd string, or NULL.
 */
char *ft_seal(const uint8_t key[FT_SEAL_KEY_LEN], const char *aad, const char *plain);
/* Opens a sealed string: a malloc'd plain text, or NULL (not sealed, wrong key, tampered, moved). */
char *ft_unseal(const uint8_t key[FT_SEAL_KEY_LEN], const char *aad, const char *sealed);

#endif
