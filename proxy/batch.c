/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch at the proxy (POST /v1/batch, AIStore's GET /v1/ml/moss): checks it and redirects it to the assembling target. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/moss.h"
#include "http/util.h"

#define BATCH_BODY_MAX (4u << 20)

/* The owner of item e of the batch, NULL when e names no object or the map has no targets. */
static const ft_node_t *item_owner(const ft_smap_t *smap, const json_t *e)
{
	const char *provider = json_string_value(json_object_get(e, "provider"));
	const char *bucket = json_string_value(json_object_get(e, "bucket"));
	const char *obj = json_string_value(json_object_get(e, "objname"));

	if (bucket == NULL || obj == NULL)
		return NULL;
	return ft_smap_owner(smap, provider && *provider ? provider : "ais", bucket, obj, strlen(obj));
}

/*
 * The plan: the assembling target is the one owning most items (the first item's owner on a tie),
 * which reads those from its own disk while every other owner streams its items to it as one part
 * (target/shard/batch.c). NULL when the first item names no object or the map has no targets.
 */
static const ft_node_t *plan(const ft_smap_t *smap, const json_t *in)
{
	const ft_node_t *best = item_owner(smap, json_array_get(in, 0));
	size_t n = json_array_size(in), *count = calloc((size_t)smap->n_targets + 1, sizeof(*count));

	for (size_t i = 0; i < n && count != NULL && best != NULL; i++) {
		const ft_node_t *o = item_owner(smap, json_array_get(in, i));
		if (o != NULL && ++count[o - smap->targets] > count[best - smap->targets])
			best = o;
	}
	free(count);
	return best;
}

/* Redirects r to the target assembling the batch doc ({"in": [...]}) at where (a path, with its query). */
static void redirect(ft_req_t *r, const json_t *doc, const char *where)
{
	json_t *in = json_object_get(doc, "in");
	json_t *first = json_array_get(in, 0);
	ft_smap_t *smap = NULL;

	if (json_string_value(json_object_get(first, "bucket")) == NULL ||
	    json_string_value(json_object_get(first, "objname")) == NULL) {
		ft_resp_error(r, 400, "batch: expected {\"in\":[{\"bucket\",\"objname\",...}...]}");
		return;
	}
	smap = ft_smap_current();
	const ft_node_t *owner = smap ? plan(smap, in) : NULL;
	if (owner == NULL) {
		ft_resp_error(r, 503, "no targets in the cluster map");
	} else {
		char loc[FT_URL_MAX + 2048];
		int n = snprintf(loc, sizeof(loc), "%s%s", owner->public_url, where);
		if (n < 0 || (size_t)n >= sizeof(loc))
			ft_resp_error(r, 414, "batch: the request's URL is too long");
		else
			ft_resp_redirect(r, 307, loc);
	}
	ft_smap_put(smap);
}

static void on_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	json_t *doc = err ? NULL : json_loadb(body, len, 0, NULL);

	(void)arg;
	redirect(r, doc, "/v1/batch");
	json_decref(doc);
}

void px_batch(px_t *px, ft_req_t *r)
{
	(void)px;
	if (ft_req_method(r) != FT_HTTP_POST) {
		ft_resp_header(r, "Allow", "POST");
		ft_resp_error(r, 405, "method %s not allowed on /v1/batch", ft_req_method_name(r));
		return;
	}
	ft_req_read_body_all(r, BATCH_BODY_MAX, on_body, NULL);
}

/* AIStore's GetBatch: the MossReq read as a batch, for the plan; the target reads it the same way. */
static void on_moss_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	const char *bucket = arg, *provider = ft_req_query(r, "provider");
	char why[300];
	int status = 400;
	json_t *doc = err ? NULL : ft_moss_to_batch(body, len, bucket, provider, &status, why, sizeof(why));

	if (doc == NULL) {
		ft_resp_error(r, status, "GetBatch: %s", err ? "request body incomplete" : why);
		return;
	}
	redirect(r, doc, ft_req_target(r)); /* the same path and query, as sent (still encoded) */
	json_decref(doc);
}

void px_moss(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	char *bucket;
	const char *obj;
	size_t obj_len;

	(void)px;
	if (ft_req_method(r) != FT_HTTP_GET) {
		ft_resp_header(r, "Allow", "GET");
		ft_resp_error(r, 405, "method %s not allowed on %s (AIStore's GetBatch is a GET with a JSON body)",
			      ft_req_method_name(r), FT_MOSS_PATH);
		return;
	}
	if (ft_path_split(r, path, len, FT_MOSS_PATH, &bucket, &obj, &obj_len) != 0 || obj_len > 0) {
		ft_resp_error(r, 400, "GetBatch: expected %s or %s/<bucket>", FT_MOSS_PATH, FT_MOSS_PATH);
		return;
	}
	ft_req_read_body_all(r, BATCH_BODY_MAX, on_moss_body, bucket);
}
