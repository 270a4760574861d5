/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the lists jobs read from objects (proxy/textlist.c): name/URL lines and dsort's order file. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

#define MAX_LINES 64

/* Every line kept is non-empty text without a '\n' or NUL (one '\r' before a line end goes), at most MAX_LINES. */
static void check_lines(const json_t *out, int rc)
{
	if (json_array_size(out) > MAX_LINES || (rc != 0 && rc != -E2BIG && rc != -EILSEQ)) {
		fprintf(stderr, "%zu lines, rc %d\n", json_array_size(out), rc);
		abort();
	}
	for (size_t i = 0; i < json_array_size(out); i++) {
		const json_t *s = json_array_get(out, i);
		size_t n = json_string_length(s);
		const char *v = json_string_value(s);
		if (n == 0 || memchr(v, '\n', n) != NULL || memchr(v, '\0', n) != NULL) {
			fprintf(stderr, "line %zu kept as \"%s\"\n", i, v);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *out = json_array(), *pos = json_object();
	size_t line = 0;

	if (out != NULL && pos != NULL) {
		check_lines(out, px_text_lines((const char *)data, size, MAX_LINES, out, &line));
		int rc = px_order_parse((const char *)data, size, pos);
		if ((rc == 0) != (json_object_size(pos) > 0)) {
			fprintf(stderr, "order file: rc %d with %zu keys\n", rc, json_object_size(pos));
			abort();
		}
	}
	json_decref(out);
	json_decref(pos);
	return 0;
}
