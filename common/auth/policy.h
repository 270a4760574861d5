/* SPDX-License-Identifier: Apache-2.0 */
/* The endpoint-to-role table of the public ports: which role each method and path needs (default deny: admin). */
#ifndef FT_AUTH_POLICY_H
#define FT_AUTH_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "auth/role.h"

typedef enum {
	FT_POLICY_ROLE = 0, /* needs rule.role */
	FT_POLICY_OPEN,     /* anonymous (health; the token endpoint checks its own key pair) */
	FT_POLICY_OPEN_IF,  /* anonymous when auth_anonymous_metrics is on, else rule.role */
	FT_POLICY_OWN,      /* authenticated by its own front end (the S3 API's SigV4) */
} ft_policy_kind_t;

typedef struct {
	const char *path;    /* exact path, or a prefix when it ends in '/' (the bare path matches too) */
	const char *methods; /* "GET HEAD", ... ; "*" = any method */
	ft_policy_kind_t kind;
	ft_role_t role;
	bool bucket; /* the segment after path is a bucket name (grants apply) */
} ft_policy_rule_t;

/*
 * The rule for method and path (len bytes): the first row of the table that matches; a path or
 * method that no row lists gets the default rule (admin). Never NULL.
 */
const ft_policy_rule_t *ft_policy_find(const char *method, const char *path, size_t len);
/* The whole table (for docs and tests): *n rows. */
const ft_policy_rule_t *ft_policy_table(size_t *n);
/*
 * The bucket a request under rule names (the path segment after the rule's prefix), copied to out
 * (cap bytes); "" when the rule has no bucket or the path stops before it.
 */
void ft_policy_bucket(const ft_policy_rule_t *rule, const char *path, size_t len, char *out, size_t cap);

#endif
