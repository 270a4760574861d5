/* SPDX-License-Identifier: Apache-2.0 */
/* The identity store: access keys with their secret, role and optional bucket grants, for the native and S3 APIs. */
#ifndef FT_AUTH_IDENTITY_H
#define FT_AUTH_IDENTITY_H

#include <stddef.h>

#include "auth/role.h"

/*
 * The file is one JSON object keyed by access key id. A value is either the secret (a string: the
 * S3 key file of earlier versions; such a key is an admin) or an object
 *   {"secret": "...", "role": "admin|readwrite|readonly", "buckets": ["b1", ...]}
 * where "buckets" (optional) limits a non-admin key to those buckets.
 */
typedef struct ft_ident_store ft_ident_store_t;

typedef struct {
	const char *access_key;
	const char *secret;
	ft_role_t role;
	json_t *buckets; /* borrowed from the store; NULL = every bucket */
} ft_ident_t;

/* Loads path; NULL with err filled (the message never contains a secret). */
ft_ident_store_t *ft_ident_load(const char *path, char *err, size_t errlen);
/* Parses a document already in memory (stolen reference); NULL with err filled. */
ft_ident_store_t *ft_ident_from_json(json_t *doc, const char *where, char *err, size_t errlen);
void ft_ident_free(ft_ident_store_t *s);
/* Number of keys. */
size_t ft_ident_count(const ft_ident_store_t *s);
/* Fills *out for access_key and returns 0; -1 when unknown. Valid while the store lives. */
int ft_ident_find(const ft_ident_store_t *s, const char *access_key, ft_ident_t *out);
/* Checks a key pair in constant time over the secret; 0 with *out, -1 when the pair is wrong. */
int ft_ident_check(const ft_ident_store_t *s, const char *access_key, const char *secret, ft_ident_t *out);
/* Makes a principal of an identity (the bucket list is shared by reference). */
void ft_ident_principal(const ft_ident_t *id, ft_principal_t *p);

#endif
