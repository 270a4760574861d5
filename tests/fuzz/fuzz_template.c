/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of job and hint name templates (proxy/template.c): bounded output, every name the prefix, a number, the suffix. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

#define MAX_NAMES 1000

/* Checks every expanded name of tpl: it starts with the text before '{' and ends with the text after '}'. */
static void check_names(const char *tpl, const json_t *arr)
{
	const char *lb = strchr(tpl, '{'), *rb = strchr(lb, '}');
	size_t pre = (size_t)(lb - tpl), post = strlen(rb + 1);

	if (json_array_size(arr) == 0 || json_array_size(arr) > MAX_NAMES) {
		fprintf(stderr, "%zu names for \"%s\"\n", json_array_size(arr), tpl);
		abort();
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *n = json_string_value(json_array_get(arr, i));
		size_t len = strlen(n);
		if (len < pre + post + 1 || strncmp(n, tpl, pre) != 0 || strcmp(n + len - post, rb + 1) != 0) {
			fprintf(stderr, "name \"%s\" does not follow \"%s\"\n", n, tpl);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *tpl = malloc(size + 1);
	json_t *arr = json_array();
	const char *why = NULL;

	if (tpl != NULL && arr != NULL && memchr(data, '\0', size) == NULL) {
		memcpy(tpl, data, size);
		tpl[size] = '\0';
		int rc = px_expand_template(tpl, MAX_NAMES, arr, &why);
		if (rc == 0)
			check_names(tpl, arr);
		else if (why == NULL || (rc != -1 && rc != -2))
			abort();
	}
	json_decref(arr);
	free(tpl);
	return 0;
}
