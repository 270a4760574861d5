/* SPDX-License-Identifier: Apache-2.0 */
/* One object copied to a name of its own (AIStore's PUT ?obj_to=), in any bucket, maybe through a transformer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "xact/copy.h"

/*
 * DESIGN
 * AIStore's Object.copy() sends PUT /v1/objects/SRC/NAME?obj_to=<provider>/@#/<bucket>/<name> with
 * no body (etl_name to copy through a transformer, latest to revalidate a remote source first); the
 * proxy checked the destination (its bucket known, the caller's role on it) and redirected the PUT
 * to the source's owner, here. The copy is the copy job's, for one object (copy.c, tgt_copy_obj): the
 * source (a remote one fetched into the cache first) goes to the destination's owner in one PUT that
 * stores it like any PUT, checked against the source's checksum, or the transformer's whole output.
 * It runs on a worker and answers when the copy is stored: 200 {"provider", "bucket", "name",
 * "bytes"}, 404 when the source does not exist, 502 when the destination's owner or a transformer
 * failed. A provider's alias (s3 for aws, ...) is read as the proxy reads it.
 */

typedef struct {
	tgt_obj_t *o;
	tgt_copy_t c;
	char to_provider[16], to_bucket[FT_BUCKET_NAME_MAX + 1];
} copy_one_t;

static void copy_one_work(ft_req_t *r, void *arg)
{
	copy_one_t *w = arg;
	ft_smap_t *smap = ft_smap_current();
	char err[600] = "";
	int64_t bytes = 0;
	int rc = smap == NULL ? -1 : tgt_copy_obj(&w->c, smap, w->o, &bytes, err, sizeof(err));

	ft_smap_put(smap);
	tgt_copy_free(&w->c);
	if (rc >= 0) {
		json_t *doc = json_pack("{s:s, s:s, s:s, s:I}", "provider", w->to_provider, "bucket", w->to_bucket,
					"name", w->c.to_name, "bytes", (json_int_t)bytes);
		ft_resp_json(r, 200, doc);
	} else if (rc == -404) {
		ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist", w->o->provider, w->o->bucket, w->o->obj);
	} else {
		ft_resp_error(r, rc < -1 ? -rc : 502, "copy of \"%s://%s/%s\" to \"%s://%s/%s\": %s", w->o->provider,
			      w->o->bucket, w->o->obj, w->to_provider, w->to_bucket, w->c.to_name, err);
	}
}

/* The copy's destination and options from r's query into w->c; 0, or -1 after answering. */
static int copy_one_parse(ft_req_t *r, copy_one_t *w)
{
	const char *etl = ft_req_query(r, "etl_name"), *name = NULL, *why = NULL;
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b;
	int rc = ft_name_parse_uname(ft_req_query(r, "obj_to"), w->to_provider, w->to_bucket, &name, &why);

	if (rc != 0) {
		ft_resp_error(r, rc == -2 ? 501 : 400, "obj_to: %s", rc == -2 ? "namespaces are not supported" : why);
		goto fail;
	}
	if (strcmp(w->to_provider, "ais") != 0) {
		ft_backend_provider_t bp;
		if (ft_backend_provider_parse(w->to_provider, &bp) != 0) {
			ft_resp_error(r, 400, "obj_to: unknown provider \"%s\"", w->to_provider);
			goto fail;
		}
		snprintf(w->to_provider, sizeof(w->to_provider), "%s", ft_backend_provider_name(bp));
	}
	if (strcmp(w->to_provider, w->o->provider) == 0 && strcmp(w->to_bucket, w->o->bucket) == 0 &&
	    strcmp(name, w->o->obj) == 0) {
		ft_resp_error(r, 400, "obj_to names the object itself");
		goto fail;
	}
	b = bmd != NULL ? ft_bmd_find(bmd, w->to_provider, w->to_bucket) : NULL;
	if (b == NULL) {
		ft_resp_error(r, 404, "destination bucket \"%s://%s\" does not exist", w->to_provider, w->to_bucket);
		goto fail;
	}
	if (tgt_auth_write_bucket(r, w->to_bucket) != 0)
		goto fail;
	if (strcmp(w->to_provider, "ht") == 0) {
		ft_resp_error(r, 501, "destination bucket \"ht://%s\": the ht provider (an HTTP origin) is read-only",
			      w->to_bucket);
		goto fail;
	}
	if (etl != NULL && (strlen(etl) >= sizeof(w->c.etl) || json_object_get(bmd->etl, etl) == NULL)) {
		ft_resp_error(r, 404, "etl \"%s\" does not exist (register it with POST /v1/etl)", etl);
		goto fail;
	}
	snprintf(w->c.to_provider, sizeof(w->c.to_provider), "%s", w->to_provider);
	snprintf(w->c.to_bucket, sizeof(w->c.to_bucket), "%s", w->to_bucket);
	snprintf(w->c.etl, sizeof(w->c.etl), "%s", etl != NULL ? etl : "");
	w->c.to_bidx = (int)(b - bmd->buckets);
	w->c.to_name = name;
	w->c.latest = ft_req_query(r, "latest") != NULL && strcmp(ft_req_query(r, "latest"), "true") == 0;
	ft_bmd_put(bmd);
	return 0;
fail:
	ft_bmd_put(bmd);
	return -1;
}

void tgt_copy_one(ft_req_t *r, tgt_obj_t *o)
{
	copy_one_t *w = ft_req_alloc(r, sizeof(*w));
	const char *sync = ft_req_query(r, "sync");

	memset(w, 0, sizeof(*w));
	w->o = o;
	if (ft_req_content_length(r) != 0) {
		ft_resp_error(r, 400, "a copy (obj_to) takes no body");
		return;
	}
	if (sync != NULL && strcmp(sync, "true") == 0) {
		ft_resp_error(r, 501, "a copy with sync (removing the destination of a source gone) is not supported");
		return;
	}
	if (copy_one_parse(r, w) != 0)
		return;
	ft_req_defer(r, copy_one_work, w); /* blocks on the destination's owner, a backend or a transformer */
}
