/* SPDX-License-Identifier: Apache-2.0 */
/* Lists that jobs read from objects of a bucket: names or URLs one a line, and dsort's order file. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* The next line of p[*at..len): its start and length without "\n" or "\r\n"; advances *at. */
static const char *next_line(const char *p, size_t len, size_t *at, size_t *n)
{
	const char *line = p + *at, *nl = memchr(line, '\n', len - *at);

	*n = nl != NULL ? (size_t)(nl - line) : len - *at;
	*at += *n + (nl != NULL);
	if (*n > 0 && line[*n - 1] == '\r')
		(*n)--;
	return line;
}

int px_text_lines(const char *p, size_t len, size_t max, json_t *out, size_t *line_no)
{
	size_t at = 0, n, no = 0;

	while (at < len) {
		const char *line = next_line(p, len, &at, &n);
		no++;
		if (n == 0)
			continue;
		*line_no = no;
		if (json_array_size(out) >= max)
			return -E2BIG;
		json_t *s = json_stringn(line, n); /* NULL: not UTF-8, or a NUL byte */
		if (s == NULL || memchr(line, '\0', n) != NULL) {
			json_decref(s);
			return -EILSEQ;
		}
		if (json_array_append_new(out, s) != 0)
			return -ENOMEM;
	}
	return 0;
}

/* A position of a JSON object's key: a number truncated toward zero, clamped inside int64 (a cast outside is undefined). */
static json_int_t position(double v)
{
	if (!(v > -9.2e18))
		return INT64_MIN + 1;
	if (v > 9.2e18)
		return INT64_MAX - 1;
	return (json_int_t)v;
}

int px_order_parse(const char *p, size_t len, json_t *pos)
{
	if (len == 0)
		return -ENOENT;
	json_t *doc = json_loadb(p, len, 0, NULL);

	if (json_is_array(doc)) {
		for (size_t i = 0; i < json_array_size(doc); i++)
			if (json_is_string(json_array_get(doc, i)) &&
			    json_object_get(pos, json_string_value(json_array_get(doc, i))) == NULL)
				json_object_set_new(pos, json_string_value(json_array_get(doc, i)),
						    json_integer((json_int_t)i));
	} else if (json_is_object(doc)) {
		const char *k;
		json_t *v;
		json_object_foreach(doc, k, v) {
			if (json_is_number(v))
				json_object_set_new(pos, k, json_integer(position(json_number_value(v))));
		}
	} else {
		json_int_t line = 0;
		size_t at = 0, n;
		while (at < len) {
			const char *l = next_line(p, len, &at, &n);
			size_t f = 0;
			while (f < n && l[f] != ',' && l[f] != '\t' && l[f] != '\0')
				f++;
			json_t *key = f > 0 ? json_stringn(l, f) : NULL; /* NULL: empty, or not UTF-8 */
			if (key != NULL && json_object_get(pos, json_string_value(key)) == NULL)
				json_object_set_new(pos, json_string_value(key), json_integer(line++));
			json_decref(key);
		}
	}
	json_decref(doc);
	return json_object_size(pos) > 0 ? 0 : -ENOENT;
}
