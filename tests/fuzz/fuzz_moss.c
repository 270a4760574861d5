/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of AIStore's GetBatch request read as a batch request (common/base/moss.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/moss.h"

/* A translation is a batch of items that each name a bucket, a provider and an object; a refusal says why. */
static void check(const json_t *doc, int status, const char *why)
{
	const json_t *in = json_object_get(doc, "in");

	if (doc == NULL) {
		if ((status != 400 && status != 501 && status != 500) || why[0] == '\0') {
			fprintf(stderr, "refused with status %d, why \"%s\"\n", status, why);
			abort();
		}
		return;
	}
	if (status != 0 || json_array_size(in) == 0) {
		fprintf(stderr, "accepted with status %d, %zu items\n", status, json_array_size(in));
		abort();
	}
	for (size_t i = 0; i < json_array_size(in); i++) {
		const json_t *e = json_array_get(in, i);
		const char *b = json_string_value(json_object_get(e, "bucket"));
		if (b == NULL || b[0] == '\0' || json_string_value(json_object_get(e, "provider")) == NULL ||
		    json_string_value(json_object_get(e, "objname")) == NULL) {
			fprintf(stderr, "item %zu lacks bucket, provider or objname\n", i);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[300] = "";
	int status = -1;
	const char *bucket = size > 0 && (data[0] & 1) ? "ds" : NULL; /* with and without the URL's bucket */
	json_t *doc = ft_moss_to_batch((const char *)data, size, bucket, NULL, &status, why, sizeof(why));

	check(doc, status, why);
	json_decref(doc);
	return 0;
}
