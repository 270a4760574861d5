/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's bucket and multi-object copies and transforms decoded into FastTier's copy job; move-bck refused. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "base/codec.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "http/util.h"

/*
 * DESIGN
 * AIStore names the destination in the query, bck_to=<provider>/@<uuid>#<namespace>/<name>/
 * ("@#" is the global namespace, the only one FastTier has), and sends the flags as the value of
 * its ActMsg: {prefix, prepend, dry_run, force, latest-ver, synchronize} plus, when set, ext,
 * num-workers, coer, and an ETL's id, request_timeout, pipeline. This file only decodes them into
 * a px_copy_t and hands it to px_copy_submit, the native copy's one path; the answer is the bare
 * job id, as AIStore's. prepend and ext name each copy as AIStore's TCBMsg.ToName does. etl-bck
 * is the same copy through a transformer: id names one of FastTier's registry (docs/etl.md), its
 * request_timeout (a Go duration, "5m") bounds each object's transform in this job. What FastTier
 * cannot do (a pipeline of several transformers, a namespace) is refused with 501 rather than
 * dropped; num-workers only tunes speed and is ignored, coer is what the copy job always does (an
 * object's error is counted, the job goes on). The multi-object forms (copy-listrange and
 * etl-listrange, POST /v1/buckets/SRC with no bck_to) carry the same keys plus the selection
 * (objnames or template) and the destination as "tobck": {name, provider, namespace}.
 */

static void bck_to_body(ft_req_t *r, void *arg, char *body, size_t len, int err);
static int bck_to_parse(ft_req_t *r, const char *s, char *provider, size_t pcap, char *name, size_t ncap);
static int copy_decode(ft_req_t *r, const char *action, const json_t *value, px_copy_t *c);

typedef struct {
	px_t *px;
	const char *provider, *bucket; /* request-owned copies */
} bck_to_t;

bool px_ais_bck_to(px_t *px, ft_req_t *r, const char *provider, const char *bucket)
{
	bck_to_t *b;

	if (ft_req_method(r) != FT_HTTP_POST || ft_req_query(r, "bck_to") == NULL)
		return false;
	b = ft_req_alloc(r, sizeof(*b));
	b->px = px;
	b->provider = ft_req_strdup(r, provider);
	b->bucket = ft_req_strdup(r, bucket);
	ft_req_read_body_all(r, PX_BODY_MAX, bck_to_body, b);
	return true;
}

/* The ActMsg of a POST with bck_to: copy-bck and etl-bck go to the copy job, move-bck is refused. */
static void bck_to_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	bck_to_t *b = arg;
	json_t *in = NULL;
	const char *action;
	char to_provider[16], to_bucket[FT_BUCKET_NAME_MAX + 1];
	px_copy_t c = {0};

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	in = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	action = json_string_value(json_object_get(in, "action"));
	if (action == NULL) {
		ft_resp_error(r, 400, "bck_to needs an action message {\"action\": \"copy-bck\", \"value\": {...}}");
	} else if (strcmp(action, "move-bck") == 0) {
		ft_resp_error(r, 501,
			      "renaming bucket %s://%s (move-bck) is not built: FastTier has no bucket rename; copy it "
			      "(copy-bck) and destroy the source",
			      b->provider, b->bucket);
	} else if (strcmp(action, "copy-bck") != 0 && strcmp(action, "etl-bck") != 0) {
		ft_resp_error(r, 400, "unknown action \"%s\" with bck_to (expected copy-bck, move-bck or etl-bck)",
			      action);
	} else if (bck_to_parse(r, ft_req_query(r, "bck_to"), to_provider, sizeof(to_provider), to_bucket,
				sizeof(to_bucket)) == 0 &&
		   copy_decode(r, action, json_object_get(in, "value"), &c) == 0) {
		c.to_provider = to_provider;
		c.to_bucket = to_bucket;
		px_copy_submit(b->px, r, "copy-bck", b->provider, b->bucket, &c, true);
	}
	json_decref(in); /* px_copy_submit keeps no pointer into in or the buffers above */
}

/* bck_to "<provider>/@#/<name>/" (the trailing '/' optional) into provider and name; 0, or -1 after responding. */
static int bck_to_parse(ft_req_t *r, const char *s, char *provider, size_t pcap, char *name, size_t ncap)
{
	const char *slash = strchr(s, '/'), *ns, *n, *end;

	if (slash == NULL || slash == s || (size_t)(slash - s) >= pcap)
		goto bad;
	snprintf(provider, pcap, "%.*s", (int)(slash - s), s);
	ns = slash + 1;
	n = ns;
	if (ns[0] == '@') {
		const char *nsend = strchr(ns, '/');
		if (nsend == NULL)
			goto bad;
		if (nsend - ns != 2 || ns[1] != '#') {
			ft_resp_error(r, 501, "bck_to \"%s\": namespaces are not supported (only the global \"@#\")",
				      s);
			return -1;
		}
		n = nsend + 1;
	}
	end = n + strcspn(n, "/");
	if (end == n || (end[0] == '/' && end[1] != '\0') || (size_t)(end - n) >= ncap)
		goto bad;
	snprintf(name, ncap, "%.*s", (int)(end - n), n);
	return 0;
bad:
	ft_resp_error(r, 400, "bad bck_to \"%s\" (expected <provider>/@#/<bucket>/, e.g. ais/@#/photos-bak/)", s);
	return -1;
}

/* AIStore's TCBckMsg value keys with what FastTier does with them. */
typedef enum {
	K_PREFIX,
	K_FLAG,
	K_PREPEND,
	K_EXT,
	K_NUM_WORKERS,
	K_COER,
	K_ETL_ID,
	K_ETL_TIMEOUT,
	K_PIPELINE
} key_use_t;

static const struct {
	const char *key;
	key_use_t use;
} copy_keys[] = {
	{"prefix", K_PREFIX},
	{"dry_run", K_FLAG},
	{"force", K_FLAG},
	{"latest-ver", K_FLAG},
	{"synchronize", K_FLAG},
	{"prepend", K_PREPEND},
	{"ext", K_EXT},
	{"num-workers", K_NUM_WORKERS},
	{"coer", K_COER},
	{"id", K_ETL_ID},
	{"request_timeout", K_ETL_TIMEOUT},
	{"pipeline", K_PIPELINE},
};

/* The flag of c a boolean key sets. */
static bool *copy_flag(px_copy_t *c, const char *key)
{
	if (strcmp(key, "dry_run") == 0)
		return &c->dry_run;
	if (strcmp(key, "force") == 0)
		return &c->force;
	if (strcmp(key, "latest-ver") == 0)
		return &c->latest;
	return &c->sync;
}

/*
 * request_timeout (a Go duration string, or nanoseconds) into *ms, rounded up to a whole ms ("0" or
 * 0: the transformer's own). 0, or -1 (malformed).
 */
static int etl_timeout(const json_t *v, int64_t *ms)
{
	int64_t ns = 0;

	if (json_is_integer(v))
		ns = json_integer_value(v);
	else if (!json_is_string(v) || ft_duration_parse(json_string_value(v), &ns) != 0)
		return -1;
	if (ns < 0)
		return -1;
	*ms = ns / 1000000 + (ns % 1000000 != 0);
	return 0;
}

/* Whether action is one of AIStore's transforms (etl-bck, etl-listrange). */
static bool etl_action(const char *action)
{
	return strcmp(action, "etl-bck") == 0 || strcmp(action, "etl-listrange") == 0;
}

/*
 * One key of the value of action (copy-bck, etl-bck, or their -listrange forms) into c; 0, or -1 after responding 400 (bad
 * type, unknown) or 501 (not supported). An ETL's fields are etl-bck's: with copy-bck, as in AIStore,
 * they are not used, and one that asks for a transform is refused rather than dropped.
 */
static int copy_key(ft_req_t *r, const char *action, const char *key, const json_t *v, px_copy_t *c)
{
	bool etl = etl_action(action);
	size_t i = 0;

	while (i < sizeof(copy_keys) / sizeof(copy_keys[0]) && strcmp(copy_keys[i].key, key) != 0)
		i++;
	if (i == sizeof(copy_keys) / sizeof(copy_keys[0])) {
		ft_resp_error(r, 400,
			      "%s: unknown field \"%s\" (known: prefix, prepend, dry_run, force, latest-ver, "
			      "synchronize, ext, num-workers, coer, id, request_timeout, pipeline)",
			      action, key);
		return -1;
	}
	switch (copy_keys[i].use) {
	case K_PREFIX:
		if (!json_is_string(v))
			break;
		c->prefix = json_string_value(v);
		return 0;
	case K_FLAG:
	case K_COER:
		if (!json_is_boolean(v))
			break;
		if (copy_keys[i].use == K_FLAG)
			*copy_flag(c, key) = json_is_true(v);
		return 0;
	case K_PREPEND:
		if (!json_is_string(v))
			break;
		c->prepend = json_string_value(v); /* checked by px_copy_submit */
		return 0;
	case K_EXT:
		if (!json_is_object(v) && !json_is_null(v))
			break;
		c->ext = json_is_object(v) ? v : NULL; /* checked by px_copy_submit */
		return 0;
	case K_NUM_WORKERS:
		if (!json_is_integer(v))
			break;
		return 0; /* a speed hint: FastTier's copy job sizes its own workers */
	case K_ETL_ID:
		if (!json_is_string(v) && !json_is_null(v))
			break;
		if (etl) {
			c->etl = json_string_value(v);
			return 0;
		}
		if (json_is_null(v) || json_string_length(v) == 0)
			return 0;
		ft_resp_error(
			r, 501,
			"%s: \"id\" names an ETL: transform with etl-bck or etl-listrange (or FastTier's \"etl\")",
			action);
		return -1;
	case K_ETL_TIMEOUT:
		if (json_is_null(v))
			return 0;
		if (etl_timeout(v, &c->etl_timeout_ms) != 0) {
			ft_resp_error(r, 400, "%s: request_timeout must be a duration such as \"5m\" or \"30s\"",
				      action);
			return -1;
		}
		return 0;
	case K_PIPELINE:
		if (!json_is_array(v) && !json_is_null(v))
			break;
		if (json_array_size(v) == 0)
			return 0;
		ft_resp_error(r, 501, "%s: an ETL pipeline is not supported (one transformer a job: \"id\")", action);
		return -1;
	}
	ft_resp_error(r, 400, "%s: \"%s\" has the wrong type", action, key);
	return -1;
}

/*
 * AIStore's copy or transform value into c (strings borrowed from value), for action (copy-bck,
 * etl-bck, copy-listrange, etl-listrange); with listrange, the selection and "tobck" are the
 * caller's and skipped here. 0, or -1 after responding.
 */
static int copy_decode(ft_req_t *r, const char *action, const json_t *value, px_copy_t *c)
{
	bool listrange = strstr(action, "-listrange") != NULL;
	const char *key;
	json_t *v;

	if (value != NULL && !json_is_null(value) && !json_is_object(value)) {
		ft_resp_error(r, 400, "%s: the value must be an object (AIStore's %s)", action,
			      listrange ? "TCOMsg" : "TCBckMsg");
		return -1;
	}
	json_object_foreach((json_t *)value, key, v) {
		if (listrange &&
		    (strcmp(key, "tobck") == 0 || strcmp(key, "objnames") == 0 || strcmp(key, "template") == 0))
			continue;
		if (copy_key(r, action, key, v, c) != 0)
			return -1;
	}
	if (etl_action(action) && (c->etl == NULL || c->etl[0] == '\0')) {
		ft_resp_error(r, 400, "%s: \"id\" must name a transformer (POST /v1/etl registers one)", action);
		return -1;
	}
	if (!etl_action(action))
		c->etl_timeout_ms = 0;
	return 0;
}

/* AIStore's "tobck" ({name, provider, namespace}) into c's destination; 0, or -1 after responding. */
static int tobck_decode(ft_req_t *r, const char *action, const json_t *to, px_copy_t *c)
{
	const json_t *ns = json_object_get(to, "namespace");
	const char *name = json_string_value(json_object_get(to, "name"));

	if (!json_is_object(to) || name == NULL || name[0] == '\0') {
		ft_resp_error(r, 400, "%s: \"tobck\" must name the destination bucket ({\"name\", \"provider\"})",
			      action);
		return -1;
	}
	if (ns != NULL && !json_is_null(ns) &&
	    (json_string_length(json_object_get(ns, "uuid")) > 0 ||
	     json_string_length(json_object_get(ns, "name")) > 0)) {
		ft_resp_error(r, 501, "%s: namespaces are not supported (only the global one)", action);
		return -1;
	}
	c->to_bucket = name;
	c->to_provider = json_string_value(json_object_get(to, "provider")); /* checked by px_copy_submit */
	return 0;
}

bool px_ais_copy_objects(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
			 const json_t *value)
{
	px_copy_t c = {0};

	if (action == NULL || (strcmp(action, "copy-listrange") != 0 && strcmp(action, "etl-listrange") != 0))
		return false;
	if (strcmp(action, "copy-listrange") == 0 && json_object_get(value, "tobck") == NULL)
		return false; /* FastTier's own copy-listrange ("to") */
	if (tobck_decode(r, action, json_object_get(value, "tobck"), &c) != 0 || copy_decode(r, action, value, &c) != 0)
		return true;
	if (c.prefix != NULL && c.prefix[0] == '\0')
		c.prefix = NULL; /* CopyBckMsg's empty prefix: the selection is objnames or template */
	c.objnames = json_object_get(value, "objnames");
	c.template = json_string_value(json_object_get(value, "template"));
	if ((c.objnames != NULL && !json_is_array(c.objnames)) ||
	    (json_object_get(value, "template") != NULL && c.template == NULL)) {
		ft_resp_error(r, 400, "%s: objnames must be an array of names, template a string", action);
		return true;
	}
	if (c.objnames == NULL && (c.template == NULL || c.template[0] == '\0') && c.prefix == NULL) {
		ft_resp_error(r, 400, "%s: name the objects (objnames or template)", action);
		return true;
	}
	px_copy_submit(px, r, "copy-listrange", provider, bucket, &c, true);
	return true;
}

bool px_ais_object_copy_refused(ft_req_t *r)
{
	const char *to = ft_req_query(r, "obj_to"), *etl = ft_req_query(r, "etl_name"), *name, *why;
	char provider[16], bucket[FT_BUCKET_NAME_MAX + 1];
	ft_backend_provider_t bp;
	int rc;

	if (ft_req_method(r) != FT_HTTP_PUT || to == NULL)
		return false;
	rc = ft_name_parse_uname(to, provider, bucket, &name, &why);
	if (rc != 0) {
		ft_resp_error(r, rc == -2 ? 501 : 400, "obj_to: %s", rc == -2 ? "namespaces are not supported" : why);
		return true;
	}
	if (strcmp(provider, "ais") != 0 && ft_backend_provider_parse(provider, &bp) != 0) {
		ft_resp_error(r, 400, "obj_to: unknown provider \"%s\"", provider);
		return true;
	}
	if (ft_req_content_length(r) != 0) {
		ft_resp_error(r, 400, "a copy (obj_to) takes no body");
		return true;
	}
	if (!px_auth_bucket(r, FT_ROLE_READWRITE, bucket)) /* the destination is written too */
		return true;
	ft_bmd_t *bmd = ft_bmd_current();
	bool known =
		bmd != NULL &&
		ft_bmd_find(bmd, strcmp(provider, "ais") == 0 ? "ais" : ft_backend_provider_name(bp), bucket) != NULL;
	ft_bmd_put(bmd);
	if (!known) {
		ft_resp_error(r, 404, "destination bucket \"%s://%s\" does not exist", provider, bucket);
		return true;
	}
	if (etl != NULL && !px_etl_known(etl)) {
		ft_resp_error(r, 404, "etl \"%s\" does not exist (register it with POST /v1/etl)", etl);
		return true;
	}
	return false;
}
