/* SPDX-License-Identifier: Apache-2.0 */
/* Target public-port dispatcher: health, and object requests checked (names, bucket, ownership) before handling. */
#include <string.h>

#include "base/log.h"
#include "base/moss.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "core/replica.h"
#include "http/metrics.h"
#include "http/util.h"
#include "target.h"

#define OBJECTS_PREFIX "/v1/objects"
#define HEALTH_PATH "/v1/health"
#define EC_SLICE_PATH "/v1/ec/slice" /* whole EC slices from other targets */

static void health(ft_req_t *r, tgt_t *t)
{
	ft_method_t m = ft_req_method(r);
	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD) {
		ft_resp_header(r, "Allow", "GET, HEAD");
		ft_resp_error(r, 405, "method %s not allowed on %s", ft_req_method_name(r), HEALTH_PATH);
		return;
	}
	ft_resp_json(r, 200,
		     json_pack("{s:s, s:s, s:s, s:o}", "status", "ok", "role", "target", "id", t->id, "integrity",
			       tgt_integrity_json(t)));
}

/*
 * Resolves the provider query argument into o->provider: "ais" when absent, else the canonical name
 * of a remote provider (aliases s3, gs, gcs, az as the proxy accepts them). Returns 0, or -1 after
 * responding 400 for an unknown provider.
 */
static int check_provider(ft_req_t *r, tgt_obj_t *o)
{
	const char *p = ft_req_query(r, "provider");
	ft_backend_provider_t bp;

	if (!p || !*p || strcmp(p, "ais") == 0)
		p = "ais";
	else if (ft_backend_provider_parse(p, &bp) == 0)
		p = ft_backend_provider_name(bp);
	else {
		ft_resp_error(r, 400, "unknown provider \"%s\" (expected ais, aws, gcp, azure or ht)", p);
		return -1;
	}
	snprintf(o->provider, sizeof(o->provider), "%s", p);
	return 0;
}

/* Names first (400), then the bucket in the current BMD (404; 503 before the first one). 0, or -1 after responding. */
static int check_names(ft_req_t *r, tgt_obj_t *o, const char *bucket, const char *obj, size_t obj_len)
{
	const char *why = NULL;

	if (!*bucket) {
		ft_resp_error(r, 400, "bucket name is missing: expected /v1/objects/<bucket>/<object>");
		return -1;
	}
	if (ft_name_check_bucket(bucket, &why) != 0) {
		ft_resp_error(r, 400, "invalid bucket name: %s", why ? why : "not allowed");
		return -1;
	}
	if (obj_len == 0) {
		ft_resp_error(r, 400, "object name is missing: expected /v1/objects/%s/<object>", bucket);
		return -1;
	}
	if (ft_name_check_object(obj, obj_len, &why) != 0) {
		ft_resp_error(r, 400, "invalid object name: %s", why ? why : "not allowed");
		return -1;
	}
	strcpy(o->bucket, bucket);
	char *copy = ft_req_alloc(r, obj_len + 1);
	memcpy(copy, obj, obj_len);
	copy[obj_len] = '\0';
	if (tgt_obj_name_unlocated(o, copy, obj_len) != 0) { /* object() looks it up */
		ft_resp_error(r, 400, "object name too long");
		return -1;
	}

	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, o->provider, bucket) : NULL;
	bool joined = bmd != NULL;
	if (b)
		tgt_obj_props(o, b);
	ft_bmd_put(bmd);
	if (!joined) { /* started, not joined yet: no bucket is known, none is known to be missing */
		ft_resp_error(r, 503, "target %s has not joined a cluster yet", o->t->id);
		return -1;
	}
	if (!b) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", o->provider, bucket);
		return -1;
	}
	return 0;
}

/*
 * Ownership by HRW in the current Smap: returns 0 when this target owns the object, or -1 after
 * responding (307 to the owner's public URL with the same path and query, 503 without a map).
 */
static int check_owner(ft_req_t *r, tgt_t *t, tgt_obj_t *o)
{
	ft_smap_t *smap = ft_smap_current();
	const ft_node_t *owner = smap ? ft_smap_owner_hash(smap, o->hash) : NULL;
	int rc = -1;

	if (!owner) {
		if (smap)
			ft_resp_error(r, 503, "the cluster map has no targets");
		else
			ft_resp_error(r, 503, "target %s has not joined a cluster yet", t->id);
		goto out;
	}
	if (strcmp(owner->id, t->id) == 0) {
		rc = 0;
		goto out;
	}
	const char *target = ft_req_target(r);
	size_t ulen = strlen(owner->public_url), tlen = strlen(target);
	char *loc = ft_req_alloc(r, ulen + tlen + 1);
	memcpy(loc, owner->public_url, ulen);
	memcpy(loc + ulen, target, tlen + 1);
	loc = tgt_auth_sign_redirect(r, o, loc); /* a request authorized by its token: the URL carries it on */
	ft_resp_redirect(r, 307, loc);
out:
	ft_smap_put(smap);
	return rc;
}

static void object(ft_req_t *r, tgt_t *t, const char *bucket, const char *obj, size_t obj_len)
{
	ft_method_t m = ft_req_method(r);
	int mpu = ft_req_query(r, "mpu") != NULL; /* multipart upload (mpu.c); POST only there */

	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD && m != FT_HTTP_PUT && m != FT_HTTP_DELETE &&
	    !(mpu && m == FT_HTTP_POST)) {
		ft_resp_header(r, "Allow", "GET, HEAD, PUT, DELETE");
		ft_resp_error(r, 405, "method %s not allowed on objects", ft_req_method_name(r));
		return;
	}
	tgt_obj_t *o = ft_req_alloc(r, sizeof(*o));
	memset(o, 0, sizeof(*o));
	o->t = t;
	if (check_provider(r, o) != 0 || (o->anonymous = tgt_auth_object(r, o->provider, bucket, obj, obj_len)) < 0 ||
	    check_names(r, o, bucket, obj, obj_len) != 0 || check_owner(r, t, o) != 0)
		return;
	/*
	 * Where the name is stored (core/keymap.h): a plain GET or HEAD finds out by opening its path
	 * (obj/get.c), which saves a warm read a stat; every other request looks it up first.
	 */
	if (!(m == FT_HTTP_GET || m == FT_HTTP_HEAD) || mpu || o->anonymous || tgt_shard_wanted(r) ||
	    ft_req_query(r, "etl") != NULL)
		tgt_obj_locate(o);
	if (tgt_acl_anonymous_gate(r, o) != 0)
		return;
	if (tgt_is_remote(o) && m == FT_HTTP_DELETE && !mpu && tgt_evict_wanted(r)) {
		tgt_evict_object(r, o); /* jobs.c: the cached copy only */
		return;
	}
	if (m == FT_HTTP_PUT && !mpu && ft_req_query(r, "obj_to") != NULL) {
		tgt_copy_one(r, o); /* AIStore's object copy: o is the source (xact/copy_one.c) */
		return;
	}
	/* ht origins are read-only (common/backend_ht.c): refused before any body byte is read. */
	if (strcmp(o->provider, "ht") == 0 && (m == FT_HTTP_PUT || m == FT_HTTP_DELETE || mpu)) {
		ft_resp_header(r, "Allow", "GET, HEAD");
		ft_resp_error(r, 501,
			      "%s of objects in ht bucket \"%s\" is not supported: the ht provider "
			      "(an HTTP origin) is read-only",
			      mpu ? "multipart upload" : ft_req_method_name(r), o->bucket);
		return;
	}
	if (mpu) {
		tgt_mpu_handle(r, o);
		return;
	}
	if (m == FT_HTTP_PUT && ft_req_query(r, "acl") != NULL) {
		tgt_acl_put(r, o); /* obj/acl.c */
		return;
	}
	if (m != FT_HTTP_DELETE && tgt_shard_wanted(r)) { /* members of a shard (shard/) */
		if (m == FT_HTTP_PUT)
			tgt_shard_put(r, o);
		else
			tgt_shard_get(r, o);
		return;
	}
	if (m == FT_HTTP_GET && ft_req_query(r, "etl") != NULL) { /* through a transformer (obj/etl_get.c) */
		tgt_etl_get(r, o);
		return;
	}
	switch (m) {
	case FT_HTTP_PUT:
		tgt_put(r, o);
		break;
	case FT_HTTP_DELETE:
		tgt_delete(r, o);
		break;
	default:
		tgt_get(r, o);
		break;
	}
}

void tgt_route_public(ft_req_t *r, void *ctx)
{
	tgt_t *t = ctx;
	size_t len = 0;
	const char *path = ft_req_path(r, &len);
	char *bucket = NULL;
	const char *obj = NULL;
	size_t obj_len = 0;

	if (len == strlen(HEALTH_PATH) && memcmp(path, HEALTH_PATH, len) == 0) {
		health(r, t);
		return;
	}
	if (len == strlen(FT_METRICS_PATH) && memcmp(path, FT_METRICS_PATH, len) == 0) {
		if (tgt_auth_endpoint(r, path, len) == 0)
			ft_metrics_route(r);
		return;
	}
	if (strstr(ft_req_query_string(r), "%00") != NULL) { /* a value would end there, silently shorter */
		ft_resp_error(r, 400, "the query holds a NUL byte (%%00)");
		return;
	}
	if (len == strlen("/v1/batch") && memcmp(path, "/v1/batch", len) == 0) {
		if (tgt_auth_endpoint(r, path, len) == 0)
			tgt_batch(r, t); /* shard/batch.c */
		return;
	}
	if (ft_path_split(r, path, len, FT_MOSS_PATH, &bucket, &obj, &obj_len) == 0) {
		if (obj_len > 0)
			ft_resp_error(r, 400, "GetBatch: expected %s or %s/<bucket>", FT_MOSS_PATH, FT_MOSS_PATH);
		else if (tgt_auth_endpoint(r, path, len) == 0)
			tgt_batch_moss(r, t, bucket); /* shard/batch.c: AIStore's GetBatch */
		return;
	}
	if (len == strlen(EC_SLICE_PATH) && memcmp(path, EC_SLICE_PATH, len) == 0) {
		tgt_ec_slice_put(r, t); /* protect/ec_recv.c: signed like the control plane when auth is on */
		return;
	}
	if (ft_path_split(r, path, len, OBJECTS_PREFIX, &bucket, &obj, &obj_len) == 0) {
		object(r, t, bucket, obj, obj_len);
		return;
	}
	/* Under the prefix, a split fails only for a NUL byte in the bucket segment. */
	size_t plen = strlen(OBJECTS_PREFIX);
	if (len > plen && memcmp(path, OBJECTS_PREFIX "/", plen + 1) == 0) {
		ft_resp_error(r, 400, "invalid bucket name: contains a NUL byte");
		return;
	}
	/* the path only: the query may hold a signature (ft_sig, X-Amz-Signature) an answer must not repeat */
	ft_resp_error(r, 404, "no such endpoint: %s %.*s", ft_req_method_name(r), (int)len, path);
}
