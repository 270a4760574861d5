/* SPDX-License-Identifier: Apache-2.0 */
/* Validation of bucket, object and provider names before they reach a path or a map. */
#include "base/names.h"

#include <string.h>

#define SEGMENT_MAX 255 /* NAME_MAX of the file systems under a mountpath */

/* Checks one '/'-free segment of an object name. */
static int check_segment(const char *s, size_t len, const char **why)
{
	if (len == 0) {
		*why = "object name has an empty path segment";
		return -1;
	}
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) {
		*why = "object name has a \".\" or \"..\" path segment";
		return -1;
	}
	if (len > SEGMENT_MAX) {
		*why = "object name has a path segment longer than 255 bytes";
		return -1;
	}
	return 0;
}

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
	if (name[0] == '/') {
		*why = "object name starts with '/'";
		return -1;
	}
	/* Every segment, including the one after a trailing '/', must be non-empty. */
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || name[i] == '/') {
			if (check_segment(name + start, i - start, why) != 0)
				return -1;
			start = i + 1;
		}
	}
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
