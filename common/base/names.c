/* SPDX-License-Identifier: Apache-2.0 */
/* Validation of bucket, object and provider names before they reach a map (object names never become paths as such). */
#include "base/names.h"

#include "base/codec.h"

#include <string.h>

int ft_name_check_object(const char *name, size_t len, const char **why)
{
	const char *dummy;

	if (why == NULL)
		why = &dummy;
	if (name == NULL || len == 0) {
		*why = "object name is empty";
		return -1;
	}
	if (len > FT_OBJ_NAME_MAX) {
		*why = "object name is longer than 1024 bytes";
		return -1;
	}
	if (memchr(name, '\0', len) != NULL) {
		*why = "object name contains a NUL byte";
		return -1;
	}
	if (!ft_utf8_valid_n(name, len, NULL)) {
		*why = "object name is not valid UTF-8";
		return -1;
	}
	/* '/', "//", "." and ".." are plain characters: the target stores such names under a hashed file name */
	return 0;
}

static int bucket_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-';
}

int ft_name_check_bucket(const char *name, const char **why)
{
	const char *dummy;

	if (why == NULL)
		why = &dummy;
	if (name == NULL || name[0] == '\0') {
		*why = "bucket name is empty";
		return -1;
	}
	size_t len = strnlen(name, FT_BUCKET_NAME_MAX + 1);
	if (len > FT_BUCKET_NAME_MAX) {
		*why = "bucket name is longer than 64 bytes";
		return -1;
	}
	if (name[0] == '.' || name[0] == '-') {
		*why = "bucket name starts with '.' or '-'";
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		if (!bucket_char_ok(name[i])) {
			*why = "bucket name may only hold letters, digits, '.', '_' and '-'";
			return -1;
		}
	}
	return 0;
}

int ft_name_check_provider(const char *provider)
{
	if (provider == NULL)
		return -1;
	return strcmp(provider, "ais") == 0 ? 0 : -1;
}

int ft_name_check_job(const char *job)
{
	size_t n = strlen(job);

	if (n == 0 || n >= FT_JOB_NAME_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = job[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return -1;
	}
	return 0;
}

int ft_name_parse_uname(const char *s, char provider[16], char bucket[FT_BUCKET_NAME_MAX + 1], const char **obj,
			const char **why)
{
	const char *p = strchr(s, '/'), *b, *n;

	*why = "expected <provider>/@#/<bucket>/<object>";
	if (p == NULL || p == s || p - s >= 16)
		return -1;
	memcpy(provider, s, (size_t)(p - s));
	provider[p - s] = '\0';
	b = p + 1;
	if (b[0] == '@') {
		if (b[1] != '#' || b[2] != '/')
			return -2;
		b += 3;
	}
	n = strchr(b, '/');
	if (n == NULL || n == b || n - b > FT_BUCKET_NAME_MAX || n[1] == '\0')
		return -1;
	memcpy(bucket, b, (size_t)(n - b));
	bucket[n - b] = '\0';
	*obj = n + 1;
	return ft_name_check_bucket(bucket, why) != 0 || ft_name_check_object(*obj, strlen(*obj), why) != 0 ? -1 : 0;
}
