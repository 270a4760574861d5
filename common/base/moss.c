/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's GetBatch request (MossReq) translated into FastTier's batch request (see base/moss.h). */
#include "base/moss.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* AIStore's provider names that differ from FastTier's. */
static const char *provider_name(const char *p)
{
	if (p == NULL || p[0] == '\0')
		return "ais";
	return strcmp(p, "s3") == 0 ? "aws" : p;
}

static int fail(int *status, int code, char *why, size_t cap, const char *text)
{
	*status = code;
	snprintf(why, cap, "%s", text);
	return -1;
}

/* The request's own fields: only what FastTier answers. 0, or -1 with *status and why. */
static int check_request(const json_t *req, int *status, char *why, size_t cap)
{
	const char *mime = json_string_value(json_object_get(req, "mime"));

	if (!json_is_array(json_object_get(req, "in")) || json_array_size(json_object_get(req, "in")) == 0)
		return fail(status, 400, why, cap, "expected a MossReq: {\"in\":[{\"objname\",...}...],\"strm\":true}");
	static const char *const flags[] = {"coer", "onob", "strm"};
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		const json_t *f = json_object_get(req, flags[k]);
		if (f != NULL && !json_is_boolean(f)) {
			*status = 400;
			snprintf(why, cap, "\"%s\" must be true or false", flags[k]);
			return -1;
		}
	}
	if (mime != NULL && mime[0] != '\0' && strcmp(mime, ".tar") != 0 && strcmp(mime, "tar") != 0) {
		/* AIStore's other archive formats are known, not built; any other word is a bad value */
		static const char *const unbuilt[] = {".tgz", ".tar.gz", ".zip", ".tar.lz4",
						      "tgz",  "tar.gz",  "zip",  "tar.lz4"};
		size_t k = 0;

		while (k < sizeof(unbuilt) / sizeof(unbuilt[0]) && strcmp(mime, unbuilt[k]) != 0)
			k++;
		*status = k < sizeof(unbuilt) / sizeof(unbuilt[0]) ? 501 : 400;
		snprintf(why, cap, "output format \"%.32s\" is %s: only .tar is produced", mime,
			 *status == 501 ? "not built" : "unknown");
		return -1;
	}
	return 0;
}

/* One MossIn as a batch item, NULL with *status and why. */
static json_t *item_of(const json_t *in, size_t i, const char *bucket, const char *provider, int *status, char *why,
		       size_t cap)
{
	const char *obj = json_string_value(json_object_get(in, "objname"));
	const char *b = json_string_value(json_object_get(in, "bucket"));
	const char *p = json_string_value(json_object_get(in, "provider"));
	const char *arch = json_string_value(json_object_get(in, "archpath"));
	const char *opaque = json_string_value(json_object_get(in, "opaque"));
	const json_t *start = json_object_get(in, "start"), *length = json_object_get(in, "length");

	if (json_object_get(in, "uname") != NULL) {
		*status = 501;
		snprintf(why, cap, "item %zu: \"uname\" is not built: give objname, bucket and provider", i);
		return NULL;
	}
	if (b == NULL || b[0] == '\0')
		b = bucket;
	if (p == NULL || p[0] == '\0')
		p = provider;
	if (!json_is_object(in) || obj == NULL || b == NULL || b[0] == '\0') {
		*status = 400;
		snprintf(why, cap, "item %zu: needs \"objname\" and a bucket (its own \"bucket\" or the URL's)", i);
		return NULL;
	}
	json_t *e = json_pack("{s:s, s:s, s:s}", "bucket", b, "provider", provider_name(p), "objname", obj);
	if (e != NULL && arch != NULL && arch[0] != '\0')
		json_object_set_new(e, "archpath", json_string(arch));
	if (e != NULL && start != NULL)
		json_object_set(e, "start", (json_t *)start); /* checked by the batch's own parse */
	if (e != NULL && length != NULL && !(json_is_integer(length) && json_integer_value(length) == -1))
		json_object_set(e, "length", (json_t *)length); /* -1: to the end, as when absent */
	if (e != NULL && opaque != NULL)
		json_object_set_new(e, "opaque", json_string(opaque));
	if (e == NULL) {
		*status = 500;
		snprintf(why, cap, "out of memory");
	}
	return e;
}

json_t *ft_moss_to_batch(const char *body, size_t len, const char *bucket, const char *provider, int *status, char *why,
			 size_t cap)
{
	json_t *req = json_loadb(body, len, 0, NULL), *out = NULL, *items;

	*status = 0;
	if (!json_is_object(req)) {
		fail(status, 400, why, cap, "expected a MossReq: {\"in\":[{\"objname\",...}...],\"strm\":true}");
		goto done;
	}
	if (check_request(req, status, why, cap) != 0)
		goto done;
	out = json_pack("{s:o, s:b, s:b, s:b}", "in", json_array(), "continue_on_error",
			json_is_true(json_object_get(req, "coer")), "only_objname",
			json_is_true(json_object_get(req, "onob")), "buffered",
			!json_is_true(json_object_get(req, "strm")));
	items = json_object_get(out, "in");
	for (size_t i = 0; out != NULL && i < json_array_size(json_object_get(req, "in")); i++) {
		json_t *e =
			item_of(json_array_get(json_object_get(req, "in"), i), i, bucket, provider, status, why, cap);
		if (e == NULL || json_array_append_new(items, e) != 0) {
			json_decref(out);
			out = NULL;
		}
	}
	if (out == NULL && *status == 0)
		fail(status, 500, why, cap, "out of memory");
done:
	json_decref(req);
	return out;
}
