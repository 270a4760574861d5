/* SPDX-License-Identifier: Apache-2.0 */
/* Roles and principals: names, parsing and the one check of a role and a bucket grant. */
#include "auth/role.h"

#include <string.h>

static const char *const role_names[] = {
	[FT_ROLE_ANONYMOUS] = "anonymous",
	[FT_ROLE_READONLY] = "readonly",
	[FT_ROLE_READWRITE] = "readwrite",
	[FT_ROLE_ADMIN] = "admin",
};

const char *ft_role_name(ft_role_t r)
{
	return r >= FT_ROLE_ANONYMOUS && r <= FT_ROLE_ADMIN ? role_names[r] : "?";
}

int ft_role_parse(const char *s, ft_role_t *out)
{
	for (int r = FT_ROLE_READONLY; s != NULL && r <= FT_ROLE_ADMIN; r++) {
		if (strcmp(s, role_names[r]) == 0) {
			*out = (ft_role_t)r;
			return 0;
		}
	}
	return -1;
}

void ft_principal_clear(ft_principal_t *p)
{
	json_decref(p->buckets);
	p->buckets = NULL;
}

static bool granted(const json_t *buckets, const char *bucket)
{
	size_t i;
	json_t *b;

	json_array_foreach(buckets, i, b) {
		if (json_is_string(b) && strcmp(json_string_value(b), bucket) == 0)
			return true;
	}
	return false;
}

bool ft_principal_allows(const ft_principal_t *p, ft_role_t need, const char *bucket)
{
	if (need == FT_ROLE_ANONYMOUS)
		return true;
	if (p == NULL || p->role < need)
		return false;
	if (p->role == FT_ROLE_ADMIN || p->buckets == NULL)
		return true;
	if (bucket == NULL || bucket[0] == '\0')
		return need <= FT_ROLE_READONLY;
	return granted(p->buckets, bucket);
}
