/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch at the proxy (POST /v1/batch): checks the request and redirects it to the target that assembles the answer. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#define BATCH_BODY_MAX (4u << 20)

/*
 * The assembling target is the owner of the first item: at least that item is read from its own
 * disk, the others come from their owners (target/shard/batch.c). The body is read here only to
 * check it and find that item; the client sends it again to the 307's Location.
 */
static void on_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	json_error_t je;
	json_t *doc = err ? NULL : json_loadb(body, len, 0, &je);
	json_t *first = json_array_get(json_object_get(doc, "in"), 0);
	const char *provider = json_string_value(json_object_get(first, "provider"));
	const char *bucket = json_string_value(json_object_get(first, "bucket"));
	const char *obj = json_string_value(json_object_get(first, "objname"));
	ft_smap_t *smap = NULL;

	(void)arg;
	if (bucket == NULL || obj == NULL) {
		ft_resp_error(r, 400, "batch: expected {\"in\":[{\"bucket\",\"objname\",...}...]}");
		goto out;
	}
	smap = ft_smap_current();
	const ft_node_t *owner =
		smap ? ft_smap_owner(smap, provider && *provider ? provider : "ais", bucket, obj, strlen(obj)) : NULL;
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
