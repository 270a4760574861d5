/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's multi-object archive (PUT /v1/buckets/SRC, action archive) decoded into FastTier's archive job. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "http/util.h"

/*
 * DESIGN
 * ObjectGroup.archive() of AIStore's SDK sends PUT /v1/buckets/SRC with {"action": "archive",
 * "value": ArchiveMultiObj}: the selection (objnames or template), archname, isbn (the source
 * bucket's name in the members' names), aate (append to an archive that exists), coer, mime (the
 * format, absent: archname's extension) and tobck (the destination, absent: the source). This file
 * renames them into FastTier's archive value and hands it to px_archive_submit, the native archive's
 * one path; the answer is the bare job id, as AIStore's. An archive job writes the whole shard
 * (a re-run replaces it), so aate, appending the objects to an archive that exists, is refused
 * with 501 rather than dropped (PUT ?archpath= appends one member); so is a destination that is
 * not an ais bucket or sits in a namespace.
 */

typedef struct {
	px_t *px;
	const char *provider, *bucket; /* request-owned copies */
} arch_put_t;

/* AIStore's key -> FastTier's, for the keys that only change name. */
static const struct {
	const char *ais, *ft;
} renamed[] = {
	{"objnames", "objnames"},      {"template", "template"},
	{"archname", "archname"},      {"isbn", "include_src_bucket_name"},
	{"coer", "continue_on_error"}, {"mime", "format"},
};

/* tobck ({name, provider, namespace}) into out's to_bucket; 0, or -1 after responding. */
static int arch_tobck(ft_req_t *r, const json_t *to, json_t *out)
{
	const char *name = json_string_value(json_object_get(to, "name"));
	const char *provider = json_string_value(json_object_get(to, "provider"));
	const json_t *ns = json_object_get(to, "namespace");

	if (to == NULL || json_is_null(to))
		return 0;
	if (!json_is_object(to) || name == NULL || name[0] == '\0') {
		ft_resp_error(r, 400, "archive: \"tobck\" must name the destination bucket ({\"name\", \"provider\"})");
		return -1;
	}
	if ((provider != NULL && provider[0] != '\0' && strcmp(provider, "ais") != 0) ||
	    (json_is_object(ns) && (json_string_length(json_object_get(ns, "uuid")) > 0 ||
				    json_string_length(json_object_get(ns, "name")) > 0))) {
		ft_resp_error(r, 501, "archive: shards are written to ais buckets of the global namespace only");
		return -1;
	}
	json_object_set_new(out, "to_bucket", json_string(name));
	return 0;
}

/* AIStore's ArchiveMultiObj into FastTier's archive value (a new object), or NULL after responding. */
static json_t *arch_value(ft_req_t *r, const json_t *in)
{
	json_t *out = json_object(), *v;
	const char *key;

	if (!json_is_object(in)) {
		ft_resp_error(r, 400, "archive: the value must be an object (AIStore's ArchiveMultiObj)");
		json_decref(out);
		return NULL;
	}
	json_object_foreach((json_t *)in, key, v) {
		size_t i = 0;
		while (i < sizeof(renamed) / sizeof(renamed[0]) && strcmp(renamed[i].ais, key) != 0)
			i++;
		if (i < sizeof(renamed) / sizeof(renamed[0])) {
			if (strcmp(key, "mime") != 0 || json_string_length(v) > 0) /* "": archname's extension */
				json_object_set(out, renamed[i].ft, v);
		} else if (strcmp(key, "aate") == 0) {
			if (!json_is_boolean(v)) {
				ft_resp_error(r, 400, "archive: \"aate\" must be true or false");
				goto fail;
			}
			if (json_is_true(v)) {
				ft_resp_error(
					r, 501,
					"archive: appending to an archive that exists (aate) is not supported: the job "
					"writes the whole shard; PUT ?archpath= appends one member");
				goto fail;
			}
		} else if (strcmp(key, "tobck") == 0) {
			if (arch_tobck(r, v, out) != 0)
				goto fail;
		} else {
			ft_resp_error(r, 400,
				      "archive: unknown field \"%s\" (known: objnames, template, archname, isbn, aate, "
				      "coer, mime, tobck)",
				      key);
			goto fail;
		}
	}
	return out;
fail:
	json_decref(out);
	return NULL;
}

static void arch_put_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	arch_put_t *a = arg;
	json_t *in = NULL, *value = NULL;
	const char *action;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	in = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	action = json_string_value(json_object_get(in, "action"));
	if (action == NULL || strcmp(action, "archive") != 0) {
		ft_resp_header(r, "Allow", "GET, HEAD, POST, DELETE");
		ft_resp_error(r, 405, "PUT /v1/buckets/%s takes AIStore's archive action only (got %s%s%s)", a->bucket,
			      action != NULL ? "\"" : "", action != NULL ? action : "no action message",
			      action != NULL ? "\"" : "");
	} else if ((value = arch_value(r, json_object_get(in, "value"))) != NULL) {
		px_archive_submit(a->px, r, a->provider, a->bucket, value, true);
	}
	json_decref(value);
	json_decref(in); /* px_archive_submit keeps no pointer into them */
}

bool px_ais_archive(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	arch_put_t *a;

	if (ft_req_method(r) != FT_HTTP_PUT)
		return false;
	a = ft_req_alloc(r, sizeof(*a));
	a->px = px;
	a->provider = ft_req_strdup(r, provider);
	a->bucket = ft_req_strdup(r, bucket);
	ft_req_read_body_all(r, PX_BODY_MAX, arch_put_body, a);
	return true;
}
