/* SPDX-License-Identifier: Apache-2.0 */
/* Public-port dispatcher of the proxy: maps method and path to the handler modules (loop thread). */
#include "proxy.h"

#include <string.h>

#include "base/names.h"
#include "cloud/backend.h"
#include "http/metrics.h"
#include "http/util.h"
#include "s3/s3.h"

int px_provider(ft_req_t *r, const char **provider)
{
	const char *p = ft_req_query(r, "provider");
	ft_backend_provider_t bp;

	if (p == NULL || p[0] == '\0' || ft_name_check_provider(p) == 0) {
		*provider = "ais";
		return 0;
	}
	if (ft_backend_provider_parse(p, &bp) == 0) { /* canonical name: aws, gcp, azure, ht */
		*provider = ft_backend_provider_name(bp);
		return 0;
	}
	ft_resp_error(r, 400, "unknown provider \"%s\" (expected ais, aws, gcp, azure or ht)", p);
	return -1;
}

/* Whether path (len bytes) is prefix exactly or prefix followed by '/'. */
static bool under(const char *path, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && memcmp(path, prefix, n) == 0 && (len == n || path[n] == '/');
}

static void method_not_allowed(ft_req_t *r, const char *allow)
{
	ft_resp_header(r, "Allow", allow);
	ft_resp_error(r, 405, "method %s not allowed on %s (allowed: %s)", ft_req_method_name(r), ft_req_path(r, NULL),
		      allow);
}

static void health(px_t *px, ft_req_t *r)
{
	ft_method_t m = ft_req_method(r);

	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD) {
		method_not_allowed(r, "GET, HEAD");
		return;
	}
	ft_resp_json(r, 200, px_health_json(px));
}

static void cluster(px_t *px, ft_req_t *r)
{
	ft_method_t m = ft_req_method(r);
	const char *what = ft_req_query(r, "what");
	json_t *doc;

	if (px_ais_cluster(px, r, what)) /* AIStore's job queries */
		return;
	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD) {
		method_not_allowed(r, "GET, HEAD");
		return;
	}
	if (what == NULL) {
		ft_resp_error(r, 400, "missing query parameter \"what\" (smap|bmd)");
		return;
	}
	doc = px_cluster_doc(what, true);
	if (doc == NULL) {
		ft_resp_error(r, 400, "unknown what=\"%s\" (expected smap|bmd)", what);
		return;
	}
	ft_resp_json(r, 200, doc);
}

/* A remote bucket: create, destroy and HEAD work on the BMD; GET lists through the backend (list.c). */
static void remote_bucket(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	switch (ft_req_method(r)) {
	case FT_HTTP_POST:
		px_bucket_create_remote(px, r, provider, bucket);
		break;
	case FT_HTTP_DELETE:
		px_bucket_destroy_remote(px, r, provider, bucket);
		break;
	case FT_HTTP_HEAD:
		px_bucket_head_provider(px, r, provider, bucket);
		break;
	case FT_HTTP_GET:
		px_list_objects_provider(px, r, provider, bucket);
		break;
	default:
		method_not_allowed(r, "GET, HEAD, POST, DELETE");
		break;
	}
}

static void buckets(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	ft_method_t m = ft_req_method(r);
	const char *provider, *why;
	char *bucket;
	const char *obj;
	size_t obj_len;

	/* The prefix matched already (px_route): the split fails only for a NUL in the bucket name. */
	if (ft_path_split(r, path, len, "/v1/buckets", &bucket, &obj, &obj_len) != 0) {
		ft_resp_error(r, 400, "invalid bucket name: contains a NUL byte");
		return;
	}
	if (px_provider(r, &provider) != 0)
		return;
	if (bucket[0] == '\0') {
		if ((m == FT_HTTP_GET || m == FT_HTTP_HEAD) && strcmp(provider, "ais") != 0)
			px_buckets_list_remote(px, r, provider); /* rbuckets.c: the provider's account */
		else if (m == FT_HTTP_GET || m == FT_HTTP_HEAD)
			px_buckets_list(px, r);
		else
			ft_resp_error(r, 400, "%s /v1/buckets: missing bucket name", ft_req_method_name(r));
		return;
	}
	if (obj_len > 0) {
		ft_resp_error(r, 400, "unexpected path after the bucket name (objects are under /v1/objects/)");
		return;
	}
	if (ft_name_check_bucket(bucket, &why) != 0) {
		ft_resp_error(r, 400, "invalid bucket name: %s", why);
		return;
	}
	if (px_ais_bucket(px, r, provider, bucket))
		return;
	if (strcmp(provider, "ais") != 0) {
		remote_bucket(px, r, provider, bucket);
		return;
	}
	switch (m) {
	case FT_HTTP_POST:
		px_bucket_create(px, r, bucket);
		break;
	case FT_HTTP_DELETE:
		px_bucket_destroy(px, r, bucket);
		break;
	case FT_HTTP_HEAD:
		px_bucket_head(px, r, bucket);
		break;
	case FT_HTTP_GET:
		px_list_objects(px, r, bucket);
		break;
	default:
		method_not_allowed(r, "GET, HEAD, POST, DELETE");
		break;
	}
}

static void objects(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	const char *provider, *why;
	char *bucket;
	const char *obj;
	size_t obj_len;

	if (ft_path_split(r, path, len, "/v1/objects", &bucket, &obj, &obj_len) != 0) {
		ft_resp_error(r, 400, "invalid bucket name: contains a NUL byte");
		return;
	}
	if (px_provider(r, &provider) != 0)
		return;
	if (ft_name_check_bucket(bucket, &why) != 0) {
		ft_resp_error(r, 400, "invalid bucket name: %s", why);
		return;
	}
	if (ft_name_check_object(obj, obj_len, &why) != 0) {
		ft_resp_error(r, 400, "invalid object name: %s", why);
		return;
	}
	if (px_ais_object_mpu(px, r, provider, bucket, obj, obj_len) || px_ais_object_copy_refused(r))
		return;
	px_object_redirect_provider(px, r, provider, bucket, obj, obj_len);
}

void px_server_error(ft_req_t *r, const char *target, int status, const char *msg, void *ctx)
{
	px_t *px = ctx;

	if (!px_s3_server_error(px->s3, r, target, status, msg))
		ft_resp_error(r, status, "%s", msg);
}

void px_route(ft_req_t *r, void *ctx)
{
	px_t *px = ctx;
	size_t len;
	const char *path = ft_req_path(r, &len);

	/* /metrics before S3, which may be served at /; the endpoint table's role first (auth.c) */
	if (len == strlen(FT_METRICS_PATH) && memcmp(path, FT_METRICS_PATH, len) == 0 &&
	    !px_auth_request(px, r, path, len))
		return;
	if (ft_metrics_route(r))
		return;
	if (px_s3_route(px->s3, r)) /* /s3/..., and / or virtual hosts when configured */
		return;
	if (!px_auth_request(px, r, path, len)) /* the endpoint table's role (auth.c); 401/403 answered */
		return;
	if (strstr(ft_req_query_string(r), "%00") != NULL) { /* a value would end there, silently shorter */
		ft_resp_error(r, 400, "the query holds a NUL byte (%%00)");
		return;
	}
	if (under(path, len, "/v1/objects"))
		objects(px, r, path, len);
	else if (under(path, len, "/v1/buckets"))
		buckets(px, r, path, len);
	else if (under(path, len, "/v1/jobs"))
		px_jobs_route(px, r, path, len);
	else if (under(path, len, "/v1/etl"))
		px_etl_route(px, r, path, len); /* etl.c: the transformer registry */
	else if (len == strlen("/v1/batch") && memcmp(path, "/v1/batch", len) == 0)
		px_batch(px, r); /* batch.c: GetBatch */
	else if (under(path, len, "/v1/ml/moss"))
		px_moss(px, r, path, len); /* batch.c: AIStore's GetBatch */
	else if (len == strlen("/v1/health") && memcmp(path, "/v1/health", len) == 0)
		health(px, r);
	else if (len == strlen("/v1/tokens") && memcmp(path, "/v1/tokens", len) == 0)
		px_tokens(px, r);
	else if (len == strlen("/v1/cluster") && memcmp(path, "/v1/cluster", len) == 0)
		cluster(px, r);
	else if (len == strlen("/v1/cluster/mountpaths") && memcmp(path, "/v1/cluster/mountpaths", len) == 0)
		px_maint_public_mountpaths(px, r); /* maint.c (admin) */
	else if (len == strlen("/v1/daemon") && memcmp(path, "/v1/daemon", len) == 0)
		px_ais_daemon(px, r);
	else
		ft_resp_error(r, 404, "no such path: %s %s", ft_req_method_name(r), path);
}
