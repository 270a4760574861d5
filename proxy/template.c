/* SPDX-License-Identifier: Apache-2.0 */
/* Name templates of job and hint values: prefix{0000..0099}suffix expanded into names. */
#include "proxy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"

int px_expand_template(const char *tpl, size_t max, json_t *arr, const char **why)
{
	const char *lb = strchr(tpl, '{'), *rb = lb != NULL ? strchr(lb, '}') : NULL;
	const char *dots = lb != NULL ? strstr(lb, "..") : NULL;
	char a[24], b[24];

	*why = "template must look like prefix{0000..0099}suffix (one brace range of decimal numbers)";
	if (lb == NULL || rb == NULL || dots == NULL || dots > rb || strchr(rb + 1, '{') != NULL)
		return -1;
	size_t la = (size_t)(dots - lb - 1), lbn = (size_t)(rb - dots - 2);
	if (la == 0 || lbn == 0 || la >= sizeof(a) - 4 || lbn >= sizeof(b) - 4)
		return -1;
	memcpy(a, lb + 1, la);
	a[la] = '\0';
	memcpy(b, dots + 2, lbn);
	b[lbn] = '\0';
	for (size_t i = 0; i < la; i++)
		if (!isdigit((unsigned char)a[i]))
			return -1;
	for (size_t i = 0; i < lbn; i++)
		if (!isdigit((unsigned char)b[i]))
			return -1;
	unsigned long long lo = strtoull(a, NULL, 10), hi = strtoull(b, NULL, 10);
	if (hi < lo) {
		*why = "template range is empty (end below start)";
		return -1;
	}
	if (hi - lo >= max) {
		*why = "template range holds more names than allowed";
		return -2;
	}
	int width = la == lbn ? (int)la : 0;
	for (unsigned long long v = lo; v <= hi; v++) {
		char name[FT_OBJ_NAME_MAX + 1];
		int n = snprintf(name, sizeof(name), "%.*s%0*llu%s", (int)(lb - tpl), tpl, width, v, rb + 1);
		if (n < 0 || (size_t)n >= sizeof(name)) {
			*why = "template expands to a name that is too long";
			return -1;
		}
		if (json_array_append_new(arr, json_string(name)) != 0) {
			*why = "template is not UTF-8 text";
			return -1;
		}
	}
	return 0;
}
