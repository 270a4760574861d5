/* SPDX-License-Identifier: Apache-2.0 */
/* Roles and principals: who a request speaks for, and whether that allows a role on a bucket. */
#ifndef FT_AUTH_ROLE_H
#define FT_AUTH_ROLE_H

#include <stdbool.h>

#include <jansson.h>

/* Ordered: a higher role includes every lower one. */
typedef enum {
	FT_ROLE_ANONYMOUS = 0, /* no credentials needed */
	FT_ROLE_READONLY,      /* GET/HEAD of objects, listings, cluster and job status */
	FT_ROLE_READWRITE,     /* + PUT/DELETE of objects, bucket actions, jobs */
	FT_ROLE_ADMIN,         /* + bucket destroy, everything not listed in the endpoint table */
} ft_role_t;

/* "anonymous", "readonly", "readwrite", "admin". */
const char *ft_role_name(ft_role_t r);
/* Parses a role name (readonly|readwrite|admin); 0, or -1 for another word. "anonymous" is not a key's role. */
int ft_role_parse(const char *s, ft_role_t *out);

/* An authenticated caller. */
typedef struct {
	char sub[128]; /* access key id */
	ft_role_t role;
	json_t *buckets; /* array of bucket names the caller is limited to; NULL = every bucket (owned) */
} ft_principal_t;

/* Drops p's bucket list. */
void ft_principal_clear(ft_principal_t *p);
/*
 * Whether p may do what needs role need on bucket (NULL or "" = not a bucket request). A caller
 * limited to some buckets may not use bucket-less endpoints above readonly (listing all buckets is
 * readonly). Admins are never limited.
 */
bool ft_principal_allows(const ft_principal_t *p, ft_role_t need, const char *bucket);

#endif
