/* SPDX-License-Identifier: Apache-2.0 */
/* The transformer (ETL) registry at the proxy: POST/GET/DELETE /v1/etl, kept in the BMD that every node gets. */
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "http/util.h"

/*
 * DESIGN
 * A transformer is a small JSON document, checked here and stored under its name in the BMD's
 * "etl" object (cluster/bmd.h). Registering or removing one is a BMD mutation like a bucket
 * create (meta_lock, clone, next version, persist, install, metasync), so every target has the
 * registry the moment the answer is sent, a target that missed the push catches up through its
 * keepalive or its join, and the registry survives restarts of any node with bmd.json.
 * What a target does with it is target/xact/etl.c. Normalized form:
 * {"name", "command": ["argv0", ...] | "url": "http(s)://...", "timeout_ms", "max_output", "procs"}.
 */

#define ETL_ARGS_MAX 64
#define ETL_TIMEOUT_DEFAULT_MS 30000
#define ETL_TIMEOUT_MAX_MS 3600000
#define ETL_OUTPUT_DEFAULT (256LL << 20)
#define ETL_OUTPUT_MAX (64LL << 30)
#define ETL_PROCS_DEFAULT 4
#define ETL_PROCS_MAX 64

static const char *const spec_keys[] = {"name", "command", "url", "timeout_ms", "max_output", "procs"};

/* One registration or removal: lives in ft_req_alloc memory until the response. */
typedef struct {
	px_t *px;
	json_t *spec; /* owned (registration); NULL for a removal */
	char name[FT_BUCKET_NAME_MAX + 1];
} etl_op_t;

/* An integer field of in into out, with its default and bounds; 0, or -1 with why. */
static int spec_int(const json_t *in, const char *key, long long def, long long lo, long long hi, json_t *out,
		    char *why, size_t cap)
{
	const json_t *v = json_object_get(in, key);
	long long n = def;

	if (v != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
			snprintf(why, cap, "\"%s\" must be an integer from %lld to %lld", key, lo, hi);
			return -1;
		}
		n = json_integer_value(v);
	}
	json_object_set_new(out, key, json_integer(n));
	return 0;
}

/* The command (argv) of in into out; 0, or -1 with why. */
static int spec_command(const json_t *cmd, json_t *out, char *why, size_t cap)
{
	size_t i;
	const json_t *a;

	if (!json_is_array(cmd) || json_array_size(cmd) == 0 || json_array_size(cmd) > ETL_ARGS_MAX) {
		snprintf(why, cap, "\"command\" must be an array of 1 to %d strings (argv, run without a shell)",
			 ETL_ARGS_MAX);
		return -1;
	}
	json_array_foreach(cmd, i, a) {
		if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a) ||
		    (i == 0 && json_string_length(a) == 0)) {
			snprintf(why, cap, "command[%zu] must be a string without NUL bytes%s", i,
				 i == 0 ? " (and not empty)" : "");
			return -1;
		}
	}
	json_object_set_new(out, "command", json_deep_copy(cmd));
	return 0;
}

/* The checked, normalized transformer of in; NULL with why (400). */
static json_t *spec_parse(const json_t *in, char *why, size_t cap)
{
	const char *name = json_string_value(json_object_get(in, "name")), *w = NULL, *key;
	const json_t *cmd = json_object_get(in, "command"), *url = json_object_get(in, "url"), *v;
	json_t *out;

	if (!json_is_object(in)) {
		snprintf(why, cap, "the body must be a JSON object {\"name\", \"command\": [...] or \"url\"}");
		return NULL;
	}
	json_object_foreach((json_t *)in, key, v) {
		size_t k = 0;
		while (k < sizeof(spec_keys) / sizeof(spec_keys[0]) && strcmp(key, spec_keys[k]) != 0)
			k++;
		if (k == sizeof(spec_keys) / sizeof(spec_keys[0])) {
			snprintf(why, cap,
				 "unknown field \"%s\" (known: name, command, url, timeout_ms, max_output, procs)",
				 key);
			return NULL;
		}
	}
	if (name == NULL || ft_name_check_bucket(name, &w) != 0) {
		snprintf(why, cap, "\"name\" must be a name like a bucket's%s%s", w ? ": " : "", w ? w : "");
		return NULL;
	}
	if ((cmd == NULL) == (url == NULL)) {
		snprintf(why, cap, "give exactly one of \"command\" (argv array) and \"url\" (a transformer server)");
		return NULL;
	}
	out = json_pack("{s:s}", "name", name);
	if (cmd != NULL && spec_command(cmd, out, why, cap) != 0)
		goto fail;
	if (url != NULL) {
		const char *u = json_string_value(url);
		if (u == NULL || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) ||
		    strlen(u) >= FT_URL_MAX) {
			snprintf(why, cap, "\"url\" must be an http:// or https:// URL");
			goto fail;
		}
		json_object_set_new(out, "url", json_string(u));
	}
	if (spec_int(in, "timeout_ms", ETL_TIMEOUT_DEFAULT_MS, 1, ETL_TIMEOUT_MAX_MS, out, why, cap) != 0 ||
	    spec_int(in, "max_output", ETL_OUTPUT_DEFAULT, 1, ETL_OUTPUT_MAX, out, why, cap) != 0 ||
	    spec_int(in, "procs", ETL_PROCS_DEFAULT, 1, ETL_PROCS_MAX, out, why, cap) != 0)
		goto fail;
	return out;
fail:
	json_decref(out);
	return NULL;
}

/*
 * Sets (spec != NULL) or removes name in a new BMD, persisted, installed and pushed. 0; -EEXIST
 * (registering a name taken), -ENOENT (removing an unknown name), -EIO.
 */
static int registry_change(px_t *px, const char *name, const json_t *spec)
{
	ft_bmd_t *cur, *b = NULL;
	ft_smap_t *smap = NULL;
	int rc = 0;

	if (px_meta_follower(px)) {
		char why[256];
		/* to the primary over the control plane: the URL sealed, as in the BMD */
		json_t *op = spec != NULL ? json_pack("{s:s, s:s, s:o*}", "op", "etl-set", "name", name, "spec",
						      ft_etl_spec_sealed(name, spec))
					  : json_pack("{s:s, s:s}", "op", "etl-rm", "name", name);
		rc = px_meta_forward(px, op, why, sizeof(why));
		return rc == -EAGAIN ? -EIO : rc;
	}
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_bmd_current();
	bool have = cur != NULL && json_object_get(cur->etl, name) != NULL;
	if (cur == NULL || (spec != NULL && have) || (spec == NULL && !have)) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = cur == NULL ? -EIO : spec != NULL ? -EEXIST : -ENOENT;
		goto out;
	}
	b = ft_bmd_clone(cur);
	if (b != NULL && b->etl == NULL)
		b->etl = json_object();
	if (b == NULL || b->etl == NULL ||
	    (spec != NULL ? json_object_set_new(b->etl, name, json_deep_copy(spec)) : json_object_del(b->etl, name)) !=
		    0) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = -EIO;
		goto out;
	}
	b->version = cur->version + 1;
	if (px_persist_bmd(px, b) != 0) {
		pthread_mutex_unlock(&px->meta_lock);
		rc = -EIO;
		goto out;
	}
	ft_bmd_get(b);
	ft_bmd_install(b);
	smap = ft_smap_current();
	pthread_mutex_unlock(&px->meta_lock);
	ft_info("etl %s %s: bucket metadata v%lld", name, spec != NULL ? "registered" : "removed",
		(long long)b->version);
	px_metasync(px, smap, b, false, true, NULL);
out:
	ft_smap_put(smap);
	ft_bmd_put(b);
	ft_bmd_put(cur);
	return rc;
}

static void op_done(void *arg)
{
	etl_op_t *op = arg;

	json_decref(op->spec);
}

/* Worker: the registry change, then the answer. */
static void change_work(ft_req_t *r, void *arg)
{
	etl_op_t *op = arg;
	int rc = registry_change(op->px, op->name, op->spec);

	if (rc == -EEXIST)
		ft_resp_error(r, 409, "etl \"%s\" already exists (remove it first to change it)", op->name);
	else if (rc == -ENOENT)
		ft_resp_error(r, 404, "etl \"%s\" does not exist", op->name);
	else if (rc != 0)
		ft_resp_error(r, 500, "cannot update the bucket metadata");
	else if (op->spec != NULL)
		ft_resp_json(r, 200, ft_etl_spec_public(op->spec));
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/* Starts a registry change of name (spec stolen; NULL: removal) on a worker. */
static void change(px_t *px, ft_req_t *r, const char *name, json_t *spec)
{
	etl_op_t *op = ft_req_alloc(r, sizeof(*op));

	op->px = px;
	op->spec = spec;
	snprintf(op->name, sizeof(op->name), "%s", name);
	ft_req_on_done(r, op_done, op);
	ft_req_defer(r, change_work, op);
}

static void register_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	json_t *in = err == 0 && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	char why[300];
	json_t *spec;

	if (err != 0) {
		ft_resp_error(r, 400, "reading the request body failed");
		return;
	}
	spec = spec_parse(in, why, sizeof(why));
	json_decref(in);
	if (spec == NULL) {
		ft_resp_error(r, 400, "etl: %s", why);
		return;
	}
	change(arg, r, json_string_value(json_object_get(spec, "name")), spec);
}

/*
 * GET /v1/etl: every transformer, sorted by name; GET /v1/etl/NAME: one. Both as ft_etl_spec_public
 * shows them: a readonly caller never sees the user:password@ or query secrets of a transformer URL.
 */
static void show(ft_req_t *r, const char *name)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const json_t *etl = bmd != NULL ? bmd->etl : NULL;
	json_t *out;

	if (name != NULL) {
		const json_t *spec = json_object_get(etl, name);
		if (spec == NULL)
			ft_resp_error(r, 404, "etl \"%s\" does not exist", name);
		else
			ft_resp_json(r, 200, ft_etl_spec_public(spec));
		ft_bmd_put(bmd);
		return;
	}
	out = json_array();
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)etl, key, v) {
		size_t i = 0;
		while (i < json_array_size(out) &&
		       strcmp(json_string_value(json_object_get(json_array_get(out, i), "name")), key) < 0)
			i++;
		json_array_insert_new(out, i, ft_etl_spec_public(v));
	}
	ft_bmd_put(bmd);
	ft_resp_json(r, 200, out);
}

void px_etl_route(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	ft_method_t m = ft_req_method(r);
	char *name;
	const char *rest, *why = NULL;
	size_t rest_len;

	if (ft_path_split(r, path, len, "/v1/etl", &name, &rest, &rest_len) != 0 || rest_len > 0) {
		ft_resp_error(r, 400, "expected /v1/etl or /v1/etl/NAME");
		return;
	}
	if (name[0] != '\0' && ft_name_check_bucket(name, &why) != 0) {
		ft_resp_error(r, 400, "invalid etl name: %s", why);
		return;
	}
	if (name[0] == '\0' && m == FT_HTTP_POST) {
		ft_req_read_body_all(r, PX_BODY_MAX, register_body, px);
	} else if (m == FT_HTTP_GET || m == FT_HTTP_HEAD) {
		show(r, name[0] != '\0' ? name : NULL);
	} else if (name[0] != '\0' && m == FT_HTTP_DELETE) {
		change(px, r, name, NULL);
	} else {
		ft_resp_header(r, "Allow", name[0] != '\0' ? "GET, HEAD, DELETE" : "GET, HEAD, POST");
		ft_resp_error(r, 405, "%s not allowed on %s", ft_req_method_name(r),
			      name[0] ? "/v1/etl/NAME" : "/v1/etl");
	}
}

bool px_etl_known(const char *name)
{
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && json_object_get(bmd->etl, name) != NULL;

	ft_bmd_put(bmd);
	return known;
}

int px_etl_meta_apply(px_t *px, const json_t *op, char *why, size_t cap)
{
	const char *kind = json_string_value(json_object_get(op, "op")),
		   *name = json_string_value(json_object_get(op, "name"));
	const json_t *spec = json_object_get(op, "spec");

	if (name == NULL || (strcmp(kind, "etl-set") == 0 && !json_is_object(spec)) ||
	    (strcmp(kind, "etl-set") != 0 && strcmp(kind, "etl-rm") != 0)) {
		snprintf(why, cap, "bad etl operation %s", kind);
		return -EINVAL;
	}
	if (strcmp(kind, "etl-set") != 0)
		return registry_change(px, name, NULL);
	json_t *opened = json_deep_copy(spec); /* its url came sealed (ft_etl_spec_sealed) */
	int rc = opened == NULL ? -ENOMEM : ft_etl_spec_open(name, opened, why, cap) != 0 ? -EINVAL : 0;
	if (rc == -ENOMEM)
		snprintf(why, cap, "out of memory");
	if (rc == 0)
		rc = registry_change(px, name, opened);
	json_decref(opened);
	return rc;
}
