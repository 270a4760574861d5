/* SPDX-License-Identifier: Apache-2.0 */
/* Bucket requests at the proxy: list buckets, create, set properties, destroy, HEAD (BMD mutations and their push). */
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cloud/backend.h"
#include "http/util.h"

/* One create, set-bprops or destroy request: lives in ft_req_alloc memory until the response. */
typedef struct {
	px_t *px;
	char bucket[FT_BUCKET_NAME_MAX + 1];
	ft_cksum_type_t cksum; /* create only */
	const char *provider;  /* static string: "ais" or a canonical remote provider name */
	json_t *backend;       /* remote create: validated properties (owned; released by op_done) */
	ft_bucket_t props;     /* create: the protection properties given (other fields unused) */
	json_t *set;           /* set-bprops: the value object (owned; released by op_done) */
	char why[256];         /* the worker's reason for a 400 */
} bucket_op_t;

static void op_done(void *arg)
{
	bucket_op_t *op = arg;

	json_decref(op->backend);
	op->backend = NULL;
	json_decref(op->set);
	op->set = NULL;
}

/* ---- read-only ---- */

void px_buckets_list(px_t *px, ft_req_t *r)
{
	ft_bmd_t *bmd = ft_bmd_current();
	json_t *list = json_array();

	(void)px;
	for (int i = 0; bmd != NULL && i < bmd->n; i++)
		json_array_append_new(list, ft_bucket_to_json(&bmd->buckets[i]));
	ft_bmd_put(bmd);
	ft_resp_json(r, 200, list);
}

void px_bucket_head(px_t *px, ft_req_t *r, const char *bucket)
{
	px_bucket_head_provider(px, r, "ais", bucket);
}

void px_bucket_head_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd != NULL ? ft_bmd_find(bmd, provider, bucket) : NULL;

	(void)px;
	if (b == NULL) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
	} else {
		json_t *j = ft_bucket_to_json(b);
		char *props = json_dumps(j, JSON_COMPACT);
		ft_resp_header(r, "Ais-Bucket-Props", props != NULL ? props : "{}");
		free(props);
		json_decref(j);
		ft_resp_bytes(r, 200, NULL, NULL, 0);
	}
	ft_bmd_put(bmd);
}

/* ---- action messages ---- */

/*
 * Parses an action message {"action": want, "value": ...}. Returns the message (caller owns it),
 * or NULL after responding 400. An empty body is accepted (returns a new empty object) only when
 * optional is set.
 */
static json_t *action_message(ft_req_t *r, const char *body, size_t len, const char *want, bool optional)
{
	json_error_t jerr;
	json_t *msg;

	if (len == 0) {
		if (optional)
			return json_object();
		ft_resp_error(r, 400, "missing action message (expected {\"action\": \"%s\"})", want);
		return NULL;
	}
	msg = json_loadb(body, len, 0, &jerr);
	if (msg == NULL) {
		ft_resp_error(r, 400, "malformed JSON action message: %s", jerr.text);
		return NULL;
	}
	const char *action = json_string_value(json_object_get(msg, "action"));
	if (!json_is_object(msg) || action == NULL) {
		ft_resp_error(r, 400, "action message must be an object with a string \"action\"");
		goto fail;
	}
	if (strcmp(action, want) != 0) {
		ft_resp_error(r, 400, "unknown action \"%s\" for %s (expected \"%s\")", action, ft_req_method_name(r),
			      want);
		goto fail;
	}
	return msg;
fail:
	json_decref(msg);
	return NULL;
}

/*
 * The checksum type of a create-bck or set-bprops value, {"checksum": {"type": NAME}}: *out keeps
 * its value when absent. 0, or -1 with why filled (a 400 that lists the valid names).
 */
static int value_cksum(const json_t *value, ft_cksum_type_t *out, char *why, size_t cap)
{
	const json_t *cksum = json_is_object(value) ? json_object_get(value, "checksum") : NULL;
	const json_t *type;
	ft_cksum_type_t t;

	if (cksum == NULL || json_is_null(cksum))
		return 0;
	type = json_is_object(cksum) ? json_object_get(cksum, "type") : NULL;
	if (json_is_object(cksum) && (type == NULL || json_is_null(type)))
		return 0;
	const char *name = json_string_value(type);
	if (name == NULL || ft_cksum_parse(name, &t) != 0 || t == FT_CKSUM_NONE) {
		snprintf(
			why, cap,
			"bad \"checksum\" %s%s%s (expected {\"checksum\": {\"type\": T}} with T one of: " FT_CKSUM_NAMES
			")",
			name != NULL ? "type \"" : "value", name != NULL ? name : "", name != NULL ? "\"" : "");
		return -1;
	}
	*out = t;
	return 0;
}

/* Reads the checksum type from the create-bck value; 0, or -1 after responding 400. */
static int create_cksum(ft_req_t *r, const json_t *msg, ft_cksum_type_t *out)
{
	const json_t *value = json_object_get(msg, "value");
	char why[256];

	*out = FT_CKSUM_XXHASH;
	if (value != NULL && !json_is_null(value) && !json_is_object(value)) {
		ft_resp_error(r, 400, "bad create-bck value (expected an object)");
		return -1;
	}
	if (value_cksum(value, out, why, sizeof(why)) != 0) {
		ft_resp_error(r, 400, "bad create-bck value: %s", why);
		return -1;
	}
	return 0;
}

/* ---- protection properties ---- */

/*
 * Cluster-wide bounds of b's protection properties that need the Smap: EC needs D+P targets
 * besides the object's owner, mirror.scope "targets" one target for each copy. 0, or -1 with why
 * filled (the request answers 400).
 */
static int props_fit_cluster(const ft_bucket_t *b, const ft_smap_t *smap, char *why, size_t cap)
{
	int n = smap != NULL ? smap->n_targets : 0;

	if (b->ec_data > 0 && b->ec_data + b->ec_parity > n - 1) {
		snprintf(
			why, cap,
			"ec with %d data + %d parity slices needs at least %d targets (one more than D+P); the cluster "
			"has %d",
			b->ec_data, b->ec_parity, b->ec_data + b->ec_parity + 1, n);
		return -1;
	}
	if (ft_bucket_mirror_targets(b) && b->mirror_copies > n) {
		snprintf(why, cap,
			 "mirror with %d copies on distinct targets (scope \"targets\") needs at least %d targets; the "
			 "cluster has %d",
			 b->mirror_copies, b->mirror_copies, n);
		return -1;
	}
	return 0;
}

/* ---- create ---- */

/* A copy of cur with the next version, to modify and install; NULL on allocation failure. */
static ft_bmd_t *next_bmd(const ft_bmd_t *cur)
{
	ft_bmd_t *b = ft_bmd_clone(cur);

	if (b != NULL)
		b->version = cur->version + 1;
	return b;
}

/*
 * Adds (provider, name) with backend (borrowed; NULL for ais) and the protection properties of
 * props (NULL: none) to a new BMD, persists, installs, pushes. -ERANGE (why filled) when props do
 * not fit the cluster.
 */
static int create_do(px_t *px, const char *provider, const char *name, ft_cksum_type_t cksum, json_t *backend,
		     const ft_bucket_t *props, char *why, size_t cap)
{
	ft_bmd_t *cur, *b = NULL;
	ft_smap_t *smap = NULL;
	ft_bucket_t bucket = {.cksum = cksum, .created_ns = ft_now_ns(), .backend = backend};
	int rc = 0;

	snprintf(bucket.name, sizeof(bucket.name), "%s", name);
	snprintf(bucket.provider, sizeof(bucket.provider), "%s", provider);
	if (props != NULL) {
		bucket.mirror_copies = props->mirror_copies;
		bucket.mirror_scope = props->mirror_scope;
		bucket.ec_data = props->ec_data;
		bucket.ec_parity = props->ec_parity;
		bucket.ec_objsize_limit = props->ec_objsize_limit;
		bucket.validate_warm_get = props->validate_warm_get;
	}
	if (px_meta_follower(px))
		return px_meta_forward(
			px, json_pack("{s:s, s:o}", "op", "create", "bucket", ft_bucket_to_json_sealed(&bucket)), why,
			cap);
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_bmd_current();
	if (ft_bmd_find(cur, provider, name) != NULL) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = -EEXIST;
		goto out;
	}
	smap = ft_smap_current();
	if (props_fit_cluster(&bucket, smap, why, cap) != 0) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = -ERANGE;
		goto out;
	}
	ft_smap_put(smap);
	smap = NULL;
	b = next_bmd(cur);
	if (b == NULL || ft_bmd_add(b, &bucket) != 0 || (rc = px_persist_bmd(px, b)) != 0) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = rc == -EAGAIN ? -EAGAIN : -EIO;
		goto out;
	}
	ft_bmd_get(b);
	ft_bmd_install(b);
	smap = ft_smap_current();
	pthread_mutex_unlock(&px->meta_lock);

	ft_info("bucket %s/%s created (checksum %s): bucket metadata v%lld", provider, name, ft_cksum_name(cksum),
		(long long)b->version);
	px_metasync(px, smap, b, false, true, NULL);
out:
	ft_smap_put(smap);
	ft_bmd_put(b);
	ft_bmd_put(cur);
	return rc;
}

int px_bucket_create_do(px_t *px, const char *name, ft_cksum_type_t cksum)
{
	char why[256];

	return create_do(px, "ais", name, cksum, NULL, NULL, why, sizeof(why));
}

int px_bucket_create_like(px_t *px, const char *name, const ft_bucket_t *like, char *why, size_t cap)
{
	return create_do(px, "ais", name, like->cksum, NULL, like, why, cap);
}

/* 503 for a metadata change that cannot be committed now (several proxies: docs/multi-proxy.md). */
static void px_resp_not_primary(ft_req_t *r, px_t *px)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *p = m != NULL && m->primary[0] ? ft_smap_find(m, m->primary) : NULL;

	if (px_was_primary(px))
		ft_resp_error(r, 503,
			      "cannot change the bucket metadata now: the metadata store (etcd) cannot be "
			      "reached; try again");
	else
		ft_resp_error(r, 503, "cannot change the bucket metadata now: %s; try again",
			      p != NULL ? "the primary proxy cannot make the change (etcd unreachable, or the primary "
					  "changing)"
					: "no primary proxy is known (an election is under way)");
	ft_smap_put(m);
}

/* Worker thread: adds the bucket to a new BMD, persists, installs, pushes, then responds. */
static void create_work(ft_req_t *r, void *arg)
{
	bucket_op_t *op = arg;
	int rc = create_do(op->px, op->provider, op->bucket, op->cksum, op->backend, &op->props, op->why,
			   sizeof(op->why));

	if (rc == -EEXIST)
		ft_resp_error(r, 409, "bucket \"%s://%s\" already exists", op->provider, op->bucket);
	else if (rc == -ERANGE)
		ft_resp_error(r, 400, "bucket \"%s\": %s", op->bucket, op->why);
	else if (rc == -EAGAIN)
		px_resp_not_primary(r, op->px);
	else if (rc != 0)
		ft_resp_error(r, 500, "cannot update the bucket metadata");
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/*
 * Remote create: value.backend must be valid backend properties for op->provider (its "provider"
 * key, if any, must agree). Sets op->backend; 0, or -1 after responding 400.
 */
static int create_backend(ft_req_t *r, bucket_op_t *op, const json_t *msg)
{
	const json_t *props = json_object_get(json_object_get(msg, "value"), "backend");
	const char *given;
	ft_backend_config_t *cfg = NULL;
	ft_backend_error_t berr;
	int rc = -1;

	if (!json_is_object(props)) {
		ft_resp_error(r, 400, "create-bck of a %s bucket needs {\"value\": {\"backend\": {...properties...}}}",
			      op->provider);
		return -1;
	}
	given = json_string_value(json_object_get(props, "provider"));
	op->backend = json_deep_copy(props);
	cfg = malloc(sizeof(*cfg)); /* large (tokens): not on a loop thread's stack */
	if (op->backend == NULL || cfg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	json_object_set_new(op->backend, "provider", json_string(op->provider));
	ft_backend_provider_t bp;
	if (given != NULL &&
	    (ft_backend_provider_parse(given, &bp) != 0 || strcmp(ft_backend_provider_name(bp), op->provider) != 0)) {
		ft_resp_error(r, 400, "backend provider \"%s\" does not match provider=%s", given, op->provider);
		goto out;
	}
	if (ft_backend_config_from_json(cfg, op->backend, &berr) != FT_BACKEND_OK) {
		ft_resp_error(r, 400, "bad backend properties: %s", berr.msg);
		goto out;
	}
	rc = 0;
out:
	free(cfg);
	return rc;
}

/* Reads the protection properties of the create-bck value into op->props; 0, or -1 after responding 400. */
static int create_props(ft_req_t *r, bucket_op_t *op, const json_t *msg)
{
	const json_t *value = json_object_get(msg, "value");
	char why[200];

	if (!json_is_object(value))
		return 0;
	if (ft_bucket_props_apply(&op->props, value, why, sizeof(why)) != 0) {
		ft_resp_error(r, 400, "bad create-bck value: %s", why);
		return -1;
	}
	return 0;
}

static void setprops_start(ft_req_t *r, bucket_op_t *op, const char *body, size_t len);

static void create_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	bucket_op_t *op = arg;
	json_t *msg;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	if (px_hints_action(op->px, r, op->provider, op->bucket, body, len))
		return;
	if (px_jobs_action(op->px, r, op->provider, op->bucket, body, len))
		return;
	json_t *peek = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	int set = json_is_string(json_object_get(peek, "action")) &&
		  strcmp(json_string_value(json_object_get(peek, "action")), "set-bprops") == 0;
	json_decref(peek);
	if (set) {
		setprops_start(r, op, body, len);
		return;
	}
	msg = action_message(r, body, len, "create-bck", false);
	if (msg == NULL)
		return;
	int rc = create_cksum(r, msg, &op->cksum);
	if (rc == 0)
		rc = create_props(r, op, msg);
	if (rc == 0 && strcmp(op->provider, "ais") != 0)
		rc = create_backend(r, op, msg);
	json_decref(msg);
	if (rc == 0)
		ft_req_defer(r, create_work, op);
}

/* ---- set-bprops ---- */

/*
 * Changes the protection properties of (provider, name) as op->set says: new BMD, persist,
 * install, push. 0; -ENOENT (no such bucket); -EINVAL or -ERANGE with op->why (400); -EIO.
 */
static int setprops_do(bucket_op_t *op)
{
	px_t *px = op->px;
	ft_bmd_t *cur, *b = NULL;
	ft_smap_t *smap = NULL;
	ft_bucket_t bucket;
	int rc = 0;

	if (px_meta_follower(px))
		return px_meta_forward(px,
				       json_pack("{s:s, s:s, s:s, s:O}", "op", "setprops", "provider", op->provider,
						 "bucket", op->bucket, "set", op->set),
				       op->why, sizeof(op->why));
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_bmd_current();
	const ft_bucket_t *found = cur != NULL ? ft_bmd_find(cur, op->provider, op->bucket) : NULL;
	if (found == NULL) {
		rc = -ENOENT;
		goto unlock;
	}
	bucket =
		*found; /* borrows cur's backend properties (cur stays current under meta_lock); ft_bmd_add copies them */
	if (ft_bucket_props_apply(&bucket, op->set, op->why, sizeof(op->why)) != 0 ||
	    value_cksum(op->set, &bucket.cksum, op->why, sizeof(op->why)) != 0) {
		rc = -EINVAL;
		goto unlock;
	}
	smap = ft_smap_current();
	if (props_fit_cluster(&bucket, smap, op->why, sizeof(op->why)) != 0) {
		rc = -ERANGE;
		goto unlock;
	}
	b = next_bmd(cur);
	rc = b == NULL || ft_bmd_remove(b, op->provider, op->bucket) != 0 || ft_bmd_add(b, &bucket) != 0
		     ? -EIO
		     : px_persist_bmd(px, b);
	if (rc != 0 && rc != -EAGAIN)
		rc = -EIO;
	if (rc != 0)
		goto unlock;
	ft_bmd_get(b);
	ft_bmd_install(b);
	ft_smap_put(smap);
	smap = ft_smap_current();
	pthread_mutex_unlock(&px->meta_lock);

	ft_info("bucket %s/%s: checksum %s mirror.copies=%d scope=%s ec=%d+%d (objsize_limit %lld) validate_warm_get=%d: "
		"bucket metadata v%lld",
		op->provider, op->bucket, ft_cksum_name(bucket.cksum),
		bucket.mirror_copies > 1 ? bucket.mirror_copies : 1,
		bucket.mirror_scope == FT_MIRROR_SCOPE_TARGETS ? "targets" : "mountpaths", bucket.ec_data,
		bucket.ec_parity, (long long)bucket.ec_objsize_limit, bucket.validate_warm_get, (long long)b->version);
	px_metasync(px, smap, b, false, true, NULL);
	goto out;
unlock:
	pthread_mutex_unlock(&px->meta_lock);
out:
	ft_smap_put(smap);
	ft_bmd_put(b);
	ft_bmd_put(cur);
	return rc;
}

int px_bucket_set_acl(px_t *px, const char *provider, const char *bucket, bool public_read)
{
	bucket_op_t op = {.px = px, .provider = provider};

	snprintf(op.bucket, sizeof(op.bucket), "%s", bucket);
	op.set = json_pack("{s:s}", "acl", public_read ? "public-read" : "private");
	if (op.set == NULL)
		return -EIO;
	int rc = setprops_do(&op);
	json_decref(op.set);
	return rc == -ENOENT ? rc : rc != 0 ? -EIO : 0;
}

static void setprops_work(ft_req_t *r, void *arg)
{
	bucket_op_t *op = arg;
	int rc = setprops_do(op);

	if (rc == -ENOENT)
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", op->provider, op->bucket);
	else if (rc == -EINVAL || rc == -ERANGE)
		ft_resp_error(r, 400, "set-bprops of bucket \"%s\": %s", op->bucket, op->why);
	else if (rc == -EAGAIN)
		px_resp_not_primary(r, op->px);
	else if (rc != 0)
		ft_resp_error(r, 500, "cannot update the bucket metadata");
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/*
 * {"action": "set-bprops", "value": {"checksum": {"type": T}, "mirror": {...}, "ec": {...},
 * "checksum_validate_warm_get": b, "acl": A}} (loop thread): checks the keys, then defers the change.
 * Responds 400 for any other key in value. A new checksum type applies to objects stored from then on;
 * stored objects keep (and are validated by) their own.
 */
static void setprops_start(ft_req_t *r, bucket_op_t *op, const char *body, size_t len)
{
	static const char *const settable[] = {"checksum", "mirror", "ec", "checksum_validate_warm_get", "acl"};
	json_t *msg = action_message(r, body, len, "set-bprops", false);
	const char *key;
	json_t *v;

	if (msg == NULL)
		return;
	json_t *value = json_object_get(msg, "value");
	if (!json_is_object(value) || json_object_size(value) == 0) {
		ft_resp_error(r, 400,
			      "set-bprops needs a value object with \"checksum\", \"mirror\", \"ec\", "
			      "\"checksum_validate_warm_get\" or \"acl\"");
		goto out;
	}
	json_object_foreach(value, key, v) {
		size_t i = 0;
		while (i < sizeof(settable) / sizeof(settable[0]) && strcmp(key, settable[i]) != 0)
			i++;
		if (i == sizeof(settable) / sizeof(settable[0])) {
			ft_resp_error(r, 400,
				      "set-bprops: property \"%s\" cannot be changed (settable: checksum, mirror, "
				      "ec, checksum_validate_warm_get, acl)",
				      key);
			goto out;
		}
	}
	if (px_acl_refused(r, json_string_value(json_object_get(value, "acl")))) /* acl.c: allow_public_read */
		goto out;
	/* Types and bounds are checked by the worker, merged with the current values. */
	op->set = json_incref(value);
	ft_req_on_done(r, op_done, op);
	ft_req_defer(r, setprops_work, op);
out:
	json_decref(msg);
}

void px_bucket_create(px_t *px, ft_req_t *r, const char *bucket)
{
	bucket_op_t *op = ft_req_alloc(r, sizeof(*op));

	memset(op, 0, sizeof(*op));
	op->px = px;
	op->provider = "ais";
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	ft_req_read_body_all(r, PX_HINT_BODY_MAX, create_body, op);
}

void px_bucket_create_remote(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	bucket_op_t *op = ft_req_alloc(r, sizeof(*op));

	memset(op, 0, sizeof(*op));
	op->px = px;
	op->provider = provider;
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	ft_req_on_done(r, op_done, op);
	ft_req_read_body_all(r, PX_HINT_BODY_MAX, create_body, op);
}

/* ---- destroy ---- */

static int destroy_do(px_t *px, const char *provider, const char *name)
{
	ft_bmd_t *cur, *b = NULL;
	ft_smap_t *smap = NULL;
	int rc = 0;

	if (px_meta_follower(px)) {
		char why[256];
		return px_meta_forward(
			px, json_pack("{s:s, s:s, s:s}", "op", "destroy", "provider", provider, "bucket", name), why,
			sizeof(why));
	}
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_bmd_current();
	if (ft_bmd_find(cur, provider, name) == NULL) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = -ENOENT;
		goto out;
	}
	b = next_bmd(cur);
	if (b == NULL || ft_bmd_remove(b, provider, name) != 0 || (rc = px_persist_bmd(px, b)) != 0) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = rc == -EAGAIN ? -EAGAIN : -EIO;
		goto out;
	}
	ft_bmd_get(b);
	ft_bmd_install(b);
	smap = ft_smap_current();
	pthread_mutex_unlock(&px->meta_lock);

	ft_info("bucket %s/%s destroyed: bucket metadata v%lld", provider, name, (long long)b->version);
	px_metasync(px, smap, b, false, true, NULL);
out:
	ft_smap_put(smap);
	ft_bmd_put(b);
	ft_bmd_put(cur);
	return rc;
}

int px_bucket_destroy_do(px_t *px, const char *name)
{
	return destroy_do(px, "ais", name);
}

static void destroy_work(ft_req_t *r, void *arg)
{
	bucket_op_t *op = arg;
	int rc = destroy_do(op->px, op->provider, op->bucket);

	if (rc == -ENOENT)
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", op->provider, op->bucket);
	else if (rc == -EAGAIN)
		px_resp_not_primary(r, op->px);
	else if (rc != 0)
		ft_resp_error(r, 500, "cannot update the bucket metadata");
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

static void destroy_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	bucket_op_t *op = arg;
	json_t *msg;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	/* AIStore's DELETE actions: evict or delete a list or range (jobs), evict a remote bucket */
	json_t *peek = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	bool forget = px_ais_evict_forgets(r, op->provider, peek);
	json_decref(peek);
	if (forget) {
		ft_req_defer(r, destroy_work, op);
		return;
	}
	if (px_jobs_action(op->px, r, op->provider, op->bucket, body, len))
		return;
	msg = action_message(r, body, len, "destroy-bck", true);
	if (msg == NULL)
		return;
	json_decref(msg);
	ft_req_defer(r, destroy_work, arg);
}

void px_bucket_destroy(px_t *px, ft_req_t *r, const char *bucket)
{
	bucket_op_t *op = ft_req_alloc(r, sizeof(*op));

	memset(op, 0, sizeof(*op));
	op->px = px;
	op->provider = "ais";
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	if (ft_req_content_length(r) == 0) /* no body to read: straight to the worker */
		ft_req_defer(r, destroy_work, op);
	else
		ft_req_read_body_all(r, PX_BODY_MAX, destroy_body, op);
}

void px_bucket_destroy_remote(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	bucket_op_t *op = ft_req_alloc(r, sizeof(*op));

	memset(op, 0, sizeof(*op));
	op->px = px;
	op->provider = provider;
	snprintf(op->bucket, sizeof(op->bucket), "%s", bucket);
	if (ft_req_content_length(r) == 0)
		ft_req_defer(r, destroy_work, op);
	else
		ft_req_read_body_all(r, PX_BODY_MAX, destroy_body, op);
}

/* The primary's side of px_meta_forward for buckets: "create" (a sealed bucket), "destroy", "setprops". */
int px_bucket_meta_apply(px_t *px, const json_t *op, char *why, size_t cap)
{
	const char *name = json_string_value(json_object_get(op, "op")),
		   *provider = json_string_value(json_object_get(op, "provider")),
		   *bucket = json_string_value(json_object_get(op, "bucket"));
	int rc;

	if (strcmp(name, "create") == 0) {
		ft_bucket_t bk;
		if (ft_bucket_from_json(&bk, json_object_get(op, "bucket"), why, cap) != 0)
			return -EINVAL;
		rc = create_do(px, bk.provider, bk.name, bk.cksum, bk.backend, &bk, why, cap);
		json_decref(bk.backend);
		return rc;
	}
	if (provider == NULL || bucket == NULL || strlen(bucket) > FT_BUCKET_NAME_MAX) {
		snprintf(why, cap, "metadata operation %s needs \"provider\" and \"bucket\"", name);
		return -EINVAL;
	}
	if (strcmp(name, "destroy") == 0)
		return destroy_do(px, provider, bucket);
	if (strcmp(name, "setprops") == 0 && json_is_object(json_object_get(op, "set"))) {
		bucket_op_t bo = {.px = px, .provider = provider, .set = json_object_get(op, "set")};
		snprintf(bo.bucket, sizeof(bo.bucket), "%s", bucket);
		rc = setprops_do(&bo);
		snprintf(why, cap, "%s", bo.why);
		return rc;
	}
	snprintf(why, cap, "unknown metadata operation %s", name);
	return -EINVAL;
}
