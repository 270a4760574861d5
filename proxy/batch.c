/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch at the proxy (POST /v1/batch): checks the request and redirects it to the target that assembles the answer. */
#include "proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

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

static void on_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	json_error_t je;
	json_t *doc = err ? NULL : json_loadb(body, len, 0, &je);
	json_t *in = json_object_get(doc, "in");
	json_t *first = json_array_get(in, 0);
	ft_smap_t *smap = NULL;

	(void)arg;
	if (json_string_value(json_object_get(first, "bucket")) == NULL ||
	    json_string_value(json_object_get(first, "objname")) == NULL) {
		ft_resp_error(r, 400, "batch: expected {\"in\":[{\"bucket\",\"objname\",...}...]}");
		goto out;
	}
	smap = ft_smap_current();
	const ft_node_t *owner = smap ? plan(smap, in) : NULL;
	if (owner == NULL) {
		ft_resp_error(r, 503, "no targets in the cluster map");
		goto out;
	}
	char loc[FT_URL_MAX + 16];
	snprintf(loc, sizeof(loc), "%s/v1/batch", owner->public_url);
	ft_resp_redirect(r, 307, loc);
out:
	ft_smap_put(smap);
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
