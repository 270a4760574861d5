/* SPDX-License-Identifier: Apache-2.0 */
/* The endpoint-to-role table: one row per endpoint and method set; what no row lists needs admin. */
#include "auth/policy.h"

#include <string.h>

/*
 * DESIGN
 * A new public endpoint gets its role by one row here. Rows are tried in order, so a more specific
 * row goes first. Anything not listed (a new endpoint nobody gave a row, an unexpected method)
 * falls to the default row: admin. docs/security.md carries the same table for readers.
 */
static const ft_policy_rule_t table[] = {
	{"/v1/health", "GET HEAD", FT_POLICY_OPEN, FT_ROLE_ANONYMOUS, false},
	{"/v1/tokens", "POST", FT_POLICY_OPEN, FT_ROLE_ANONYMOUS, false},
	{"/v1/objects/", "GET HEAD", FT_POLICY_ROLE, FT_ROLE_READONLY, true},
	{"/v1/objects/", "PUT DELETE POST", FT_POLICY_ROLE, FT_ROLE_READWRITE, true},
	{"/v1/buckets/", "GET HEAD", FT_POLICY_ROLE, FT_ROLE_READONLY, true},
	{"/v1/buckets/", "POST PUT", FT_POLICY_ROLE, FT_ROLE_READWRITE, true},
	{"/v1/buckets/", "DELETE", FT_POLICY_ROLE, FT_ROLE_ADMIN, true},
	{"/v1/jobs/", "GET HEAD", FT_POLICY_ROLE, FT_ROLE_READONLY, false},
	{"/v1/jobs/", "POST PUT DELETE", FT_POLICY_ROLE, FT_ROLE_READWRITE, false},
	{"/v1/etl/", "GET HEAD", FT_POLICY_ROLE, FT_ROLE_READONLY, false},
	{"/v1/etl/", "POST DELETE", FT_POLICY_ROLE, FT_ROLE_ADMIN, false}, /* a transformer runs programs on targets */
	{"/v1/cluster", "GET HEAD", FT_POLICY_ROLE, FT_ROLE_READONLY, false},
	{"/v1/cluster", "PUT", FT_POLICY_ROLE, FT_ROLE_ADMIN,
	 false}, /* maintenance, decommission (AIStore's job stop) */
	{"/v1/cluster/mountpaths", "GET POST", FT_POLICY_ROLE, FT_ROLE_ADMIN, false},
	{"/v1/batch", "POST", FT_POLICY_ROLE, FT_ROLE_READONLY, false},   /* targets: keys not limited to buckets */
	{"/v1/ml/moss/", "GET", FT_POLICY_ROLE, FT_ROLE_READONLY, false}, /* AIStore's GetBatch: as /v1/batch */
	{"/v1/daemon", "GET HEAD", FT_POLICY_OPEN_IF, FT_ROLE_READONLY, false},
	{"/metrics", "GET HEAD", FT_POLICY_OPEN_IF, FT_ROLE_READONLY, false},
	{"/s3/", "*", FT_POLICY_OWN, FT_ROLE_READONLY, false},
};

static const ft_policy_rule_t default_rule = {"", "*", FT_POLICY_ROLE, FT_ROLE_ADMIN, false};

#define N_ROWS (sizeof(table) / sizeof(table[0]))

static bool method_in(const char *methods, const char *method)
{
	size_t n = strlen(method);

	if (strcmp(methods, "*") == 0)
		return true;
	for (const char *p = methods; (p = strstr(p, method)) != NULL; p += n) {
		if ((p == methods || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
			return true;
	}
	return false;
}

static bool path_matches(const char *rule, const char *path, size_t len)
{
	size_t n = strlen(rule);

	if (n > 0 && rule[n - 1] == '/') {
		if (len == n - 1 && memcmp(path, rule, n - 1) == 0)
			return true;
		return len >= n && memcmp(path, rule, n) == 0;
	}
	return len == n && memcmp(path, rule, n) == 0;
}

const ft_policy_rule_t *ft_policy_find(const char *method, const char *path, size_t len)
{
	for (size_t i = 0; i < N_ROWS; i++) {
		if (path_matches(table[i].path, path, len) && method_in(table[i].methods, method))
			return &table[i];
	}
	return &default_rule;
}

const ft_policy_rule_t *ft_policy_table(size_t *n)
{
	*n = N_ROWS;
	return table;
}

void ft_policy_bucket(const ft_policy_rule_t *rule, const char *path, size_t len, char *out, size_t cap)
{
	size_t n = strlen(rule->path), seg;
	const char *slash;

	out[0] = '\0';
	if (!rule->bucket || len <= n || cap == 0)
		return;
	slash = memchr(path + n, '/', len - n);
	seg = slash != NULL ? (size_t)(slash - (path + n)) : len - n;
	if (seg >= cap)
		seg = cap - 1;
	memcpy(out, path + n, seg);
	out[seg] = '\0';
}
