/* SPDX-License-Identifier: Apache-2.0 */
/* Proxy side of copy and download jobs: copy-bck, copy-listrange and download actions checked and sent to the targets. */
#include "proxy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/names.h"
#include "base/redact.h"
#include "cloud/backend.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * Both jobs run on every target like any other (jobs.c's submit): the proxy only checks the
 * value and turns it into the targets' message. Copy: {"to_provider","to_bucket", flags} plus
 * "objnames" or "prefix"; an absent ais destination is created on the worker, before the fan-out,
 * with the source's checksum type and protection properties (so every target has it in its BMD
 * when the job arrives). Download: the URLs and, for each, its object name (the last segment of
 * the URL's path), as two arrays of one length; a URL list stored in the bucket is read from its
 * owner on the worker.
 */

#define COPY_NAMES_MAX 100000
#define LIST_TIMEOUT_MS 30000

static const char *const copy_keys[] = {"to",   "prefix", "objnames", "template",       "dry_run", "latest",
					"sync", "force",  "etl",      "etl_timeout_ms", "prepend", "ext"};
static const char *const flag_keys[] = {"dry_run", "latest", "sync", "force"};

/* Whether key is one of keys[0..n). */
static int known(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return 1;
	return 0;
}

/* The destination of c into msg, its provider canonical; 0, or -1 after responding 400. */
static int copy_to(ft_req_t *r, const px_copy_t *c, const char *provider, const char *bucket, json_t *msg)
{
	const char *p = c->to_provider;
	const char *why = NULL;
	ft_backend_provider_t bp;

	if (ft_name_check_bucket(c->to_bucket, &why) != 0) {
		ft_resp_error(r, 400, "bad destination bucket name \"%s\": %s", c->to_bucket, why);
		return -1;
	}
	if (p == NULL || p[0] == '\0' || strcmp(p, "ais") == 0)
		p = "ais";
	else if (ft_backend_provider_parse(p, &bp) == 0)
		p = ft_backend_provider_name(bp);
	else {
		ft_resp_error(r, 400, "unknown destination provider \"%s\" (ais, aws, gcp, azure or ht)", p);
		return -1;
	}
	if (strcmp(p, provider) == 0 && strcmp(c->to_bucket, bucket) == 0) {
		ft_resp_error(r, 400, "cannot copy bucket %s/%s onto itself", provider, bucket);
		return -1;
	}
	if (!px_auth_bucket(r, FT_ROLE_READWRITE, c->to_bucket)) /* the destination is written too */
		return -1;
	json_object_set_new(msg, "to_provider", json_string(p));
	json_object_set_new(msg, "to_bucket", json_string(c->to_bucket));
	return 0;
}

/* Worker: the source must exist; an absent ais destination is created like the source. 0, or -1 after responding. */
static int copy_prepare(px_t *px, ft_req_t *r, json_t *msg)
{
	const char *provider = json_string_value(json_object_get(msg, "provider"));
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	const char *tp = json_string_value(json_object_get(msg, "to_provider"));
	const char *tb = json_string_value(json_object_get(msg, "to_bucket"));
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *src = bmd != NULL ? ft_bmd_find(bmd, provider, bucket) : NULL;
	char why[256] = "";
	int rc = -1;

	if (src == NULL) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		goto out;
	}
	if (ft_bmd_find(bmd, tp, tb) != NULL) {
		rc = 0;
		goto out;
	}
	if (strcmp(tp, "ais") != 0) {
		ft_resp_error(r, 404,
			      "destination bucket \"%s://%s\" does not exist (create it with its backend first)", tp,
			      tb);
		goto out;
	}
	if (json_is_true(json_object_get(msg, "dry_run"))) {
		ft_resp_error(r, 404, "destination bucket \"%s://%s\" does not exist (a dry run does not create it)",
			      tp, tb);
		goto out;
	}
	ft_bucket_t like = *src;
	int c = px_bucket_create_like(px, tb, &like, why, sizeof(why));
	if (c != 0 && c != -EEXIST) {
		ft_resp_error(r, c == -ERANGE ? 400 : 500, "creating destination bucket %s: %s", tb,
			      c == -ERANGE ? why : "cannot store the bucket metadata");
		goto out;
	}
	ft_info("copy %s/%s -> ais/%s: destination created with the source's properties", provider, bucket, tb);
	rc = 0;
out:
	ft_bmd_put(bmd);
	return rc;
}

/*
 * The prepend into msg (after the names): the prepend is a valid name's start and, for every name
 * given (or the prefix), <prepend><name> stays a valid object name. A name listed by prefix that
 * the prepend makes too long is an error of that object only (the target's). 0, or -1 after responding 400.
 */
static int copy_prepend(ft_req_t *r, const char *action, const char *prepend, json_t *msg)
{
	size_t plen = prepend != NULL ? strlen(prepend) : 0;
	const json_t *names = json_object_get(msg, "objnames");
	const char *prefix = json_string_value(json_object_get(msg, "prefix"));
	const char *why = NULL;

	if (plen == 0)
		return 0;
	if (ft_name_check_object(prepend, plen, &why) != 0 || plen >= FT_OBJ_NAME_MAX) {
		ft_resp_error(r, 400, "%s: bad prepend: %s", action,
			      why != NULL ? why : "it leaves no room for a name (at most 1023 bytes)");
		return -1;
	}
	if (prefix != NULL && plen + (prefix[0] != '\0' ? strlen(prefix) : 1) > FT_OBJ_NAME_MAX) {
		ft_resp_error(
			r, 400,
			"%s: prepend (%zu bytes) plus prefix (%zu bytes) leaves no copy a name of at most %d bytes",
			action, plen, strlen(prefix), FT_OBJ_NAME_MAX);
		return -1;
	}
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *n = json_string_value(json_array_get(names, i));
		if (plen + strlen(n) > FT_OBJ_NAME_MAX) {
			ft_resp_error(r, 400,
				      "%s: the copy of \"%.64s%s\" would be named past %d bytes (prepend + name)",
				      action, n, strlen(n) > 64 ? "..." : "", FT_OBJ_NAME_MAX);
			return -1;
		}
	}
	json_object_set_new(msg, "prepend", json_string(prepend));
	return 0;
}

/* s without its leading dots. */
static const char *undotted(const char *s)
{
	while (*s == '.')
		s++;
	return s;
}

/*
 * The ext map of c into msg, each side without its leading dots ({".jpg": ".png"} as {"jpg": "png"}):
 * extensions that are valid names with no dot or slash; not with sync (a copy's name would not tell
 * its source's). 0, or -1 after responding 400 (501 with sync).
 */
static int copy_ext(ft_req_t *r, const char *action, const px_copy_t *c, json_t *msg)
{
	json_t *ext = json_object();
	const char *k, *why = NULL;
	json_t *v;

	if (c->ext == NULL || json_object_size(c->ext) == 0) {
		json_decref(ext);
		return 0;
	}
	json_object_foreach((json_t *)c->ext, k, v) {
		const char *from = undotted(k), *to = undotted(json_is_string(v) ? json_string_value(v) : "");
		if (!json_is_string(v) || *from == '\0' || *to == '\0' || strpbrk(from, "./") != NULL ||
		    strpbrk(to, "./") != NULL || ft_name_check_object(from, strlen(from), &why) != 0 ||
		    ft_name_check_object(to, strlen(to), &why) != 0) {
			ft_resp_error(
				r, 400,
				"%s: ext maps an extension to another (e.g. {\"jpg\": \"png\"}), each without dots or "
				"slashes: \"%.64s\" does not",
				action, k);
			json_decref(ext);
			return -1;
		}
		json_object_set_new(ext, from, json_string(to));
	}
	if (c->sync) {
		ft_resp_error(r, 501, "%s: sync with ext is not supported (a copy's name would not tell its source's)",
			      action);
		json_decref(ext);
		return -1;
	}
	json_object_set_new(msg, "ext", ext);
	return 0;
}

/* The targets' message of copy c into msg (flags, destination, names); 0, or -1 after responding 400. */
static int copy_message(ft_req_t *r, const char *action, const char *provider, const char *bucket, const px_copy_t *c,
			json_t *msg)
{
	int listrange = strcmp(action, "copy-listrange") == 0;
	json_t *names = json_object();
	int rc;

	json_object_set_new(msg, "dry_run", json_boolean(c->dry_run));
	json_object_set_new(msg, "latest", json_boolean(c->latest));
	json_object_set_new(msg, "sync", json_boolean(c->sync));
	json_object_set_new(msg, "force", json_boolean(c->force));
	if (copy_to(r, c, provider, bucket, msg) != 0) {
		json_decref(names);
		return -1;
	}
	if (c->etl != NULL && !px_etl_known(c->etl)) {
		ft_resp_error(r, 404, "etl \"%s\" does not exist (register it with POST /v1/etl)", c->etl);
		json_decref(names);
		return -1;
	}
	if (c->etl != NULL)
		json_object_set_new(msg, "etl", json_string(c->etl));
	if (c->etl_timeout_ms != 0 && (c->etl == NULL || c->etl_timeout_ms < 1 || c->etl_timeout_ms > 3600000)) {
		ft_resp_error(r, 400, "%s: etl_timeout_ms needs an etl, and is 1 to 3600000", action);
		json_decref(names);
		return -1;
	}
	if (c->etl_timeout_ms != 0)
		json_object_set_new(msg, "etl_timeout_ms", json_integer(c->etl_timeout_ms));
	if (copy_ext(r, action, c, msg) != 0) {
		json_decref(names);
		return -1;
	}
	if (c->objnames != NULL)
		json_object_set(names, "objnames", (json_t *)c->objnames);
	if (c->template != NULL)
		json_object_set_new(names, "template", json_string(c->template));
	if (c->prefix != NULL || (!listrange && c->objnames == NULL && c->template == NULL))
		json_object_set_new(names, "prefix", json_string(c->prefix != NULL ? c->prefix : ""));
	rc = px_jobs_value_names(r, "ais", "copy", names, msg); /* "ais": copy by prefix lists any provider */
	json_decref(names);
	if (rc != 0 || copy_prepend(r, action, c->prepend, msg) != 0)
		return -1;
	if (c->sync && json_object_get(msg, "prefix") == NULL) {
		ft_resp_error(r, 400, "%s: sync needs a prefix (or copy-bck): with a list of names nothing is gone",
			      action);
		return -1;
	}
	if (strcmp(provider, "ht") == 0 && json_object_get(msg, "prefix") != NULL) {
		ft_resp_error(r, 400,
			      "an ht bucket cannot be listed, so it cannot be copied by prefix; use objnames or "
			      "template");
		return -1;
	}
	return 0;
}

void px_copy_submit(px_t *px, ft_req_t *r, const char *action, const char *provider, const char *bucket,
		    const px_copy_t *c, bool bare_id)
{
	char id[48];
	json_t *msg;

	px_jobs_new_id(id, sizeof(id));
	msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", "copy", "provider", provider, "bucket", bucket);
	if (msg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	if (copy_message(r, action, provider, bucket, c, msg) != 0) {
		json_decref(msg);
		return;
	}
	px_jobs_submit(px, r, msg, copy_prepare, bare_id);
}

/* A string field of FastTier's copy value into *out (absent: unchanged); 0, or -1 after responding 400. */
static int value_string(ft_req_t *r, const char *action, const json_t *value, const char *key, const char **out)
{
	const json_t *v = json_object_get(value, key);

	if (v == NULL)
		return 0;
	if (!json_is_string(v)) {
		ft_resp_error(r, 400, "%s: \"%s\" must be a string", action, key);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

/* FastTier's copy-bck, copy-listrange value into *c (strings borrowed from value); 0, or -1 after responding 400. */
static int copy_value(ft_req_t *r, const char *action, const json_t *value, px_copy_t *c)
{
	int listrange = strcmp(action, "copy-listrange") == 0;
	bool *flags[] = {&c->dry_run, &c->latest, &c->sync, &c->force};
	const json_t *to = json_object_get(value, "to");
	const char *key;
	json_t *v;

	if (!json_is_object(value)) {
		ft_resp_error(r, 400, "%s needs a value object with \"to\"", action);
		return -1;
	}
	json_object_foreach((json_t *)value, key, v) {
		if (!known(key, copy_keys, sizeof(copy_keys) / sizeof(copy_keys[0])) ||
		    (!listrange && (strcmp(key, "objnames") == 0 || strcmp(key, "template") == 0))) {
			ft_resp_error(
				r, 400,
				"%s: unknown field \"%s\" (known: to, %sprefix, dry_run, latest, sync, force, etl, "
				"etl_timeout_ms, prepend, ext)",
				action, key, listrange ? "objnames, template, " : "");
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof(flag_keys) / sizeof(flag_keys[0]); i++) {
		v = json_object_get(value, flag_keys[i]);
		if (v != NULL && !json_is_boolean(v)) {
			ft_resp_error(r, 400, "%s: \"%s\" must be true or false", action, flag_keys[i]);
			return -1;
		}
		*flags[i] = json_is_true(v);
	}
	c->to_bucket = json_string_value(json_object_get(to, "name"));
	if (!json_is_object(to) || c->to_bucket == NULL) {
		ft_resp_error(r, 400,
			      "copy needs \"to\": {\"name\": \"<bucket>\", \"provider\": \"ais|aws|gcp|azure|ht\"}");
		return -1;
	}
	c->to_provider = json_string_value(json_object_get(to, "provider"));
	c->objnames = json_object_get(value, "objnames");
	if (value_string(r, action, value, "prefix", &c->prefix) != 0 ||
	    value_string(r, action, value, "template", &c->template) != 0 ||
	    value_string(r, action, value, "etl", &c->etl) != 0 ||
	    value_string(r, action, value, "prepend", &c->prepend) != 0)
		return -1;
	v = json_object_get(value, "etl_timeout_ms");
	if (v != NULL && (!json_is_integer(v) || json_integer_value(v) <= 0)) {
		ft_resp_error(r, 400, "%s: \"etl_timeout_ms\" must be a positive integer", action);
		return -1;
	}
	c->etl_timeout_ms = json_integer_value(v);
	c->ext = json_object_get(value, "ext");
	if (c->ext != NULL && !json_is_object(c->ext)) {
		ft_resp_error(r, 400, "%s: \"ext\" must be an object, e.g. {\"jpg\": \"png\"}", action);
		return -1;
	}
	return 0;
}

/* ---- download ---- */

/*
 * The object name of url: the last segment of its path (before any query or fragment). 0, or -1
 * with why (not http(s), no name, a bad name).
 */
static int url_name(const char *url, char *name, size_t cap, const char **why)
{
	const char *p, *end, *slash;

	if (strncmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncmp(url, "https://", 8) == 0)
		p = url + 8;
	else {
		*why = "not an http:// or https:// URL";
		return -1;
	}
	end = p + strcspn(p, "?#");
	slash = memchr(p, '/', (size_t)(end - p));
	if (slash == NULL) {
		*why = "the URL has no path to name the object";
		return -1;
	}
	const char *seg = end;
	while (seg > slash + 1 && seg[-1] != '/')
		seg--;
	if (seg == end || (size_t)(end - seg) >= cap) {
		*why = "the URL's path does not end in a name";
		return -1;
	}
	long n = ft_pct_decode(seg, (size_t)(end - seg), name, 0);
	if (n <= 0 || ft_name_check_object(name, (size_t)n, why) != 0) {
		if (n <= 0)
			*why = "the URL's last segment is not a name";
		return -1;
	}
	return 0;
}

/* Adds urls (strings) and their names to msg; 0, or the status with why (400). */
static int add_urls(const json_t *urls, json_t *msg, char *why, size_t cap)
{
	json_t *names = json_array(), *list = json_array(), *seen = json_object();
	char name[FT_OBJ_NAME_MAX + 1];
	int st = 0;

	json_object_set_new(msg, "objnames", names);
	json_object_set_new(msg, "urls", list);
	if (json_array_size(urls) == 0 || json_array_size(urls) > COPY_NAMES_MAX) {
		snprintf(why, cap, "download needs 1 to %d URLs", COPY_NAMES_MAX);
		st = 400;
	}
	for (size_t i = 0; st == 0 && i < json_array_size(urls); i++) {
		const char *u = json_string_value(json_array_get(urls, i)), *w = NULL;
		if (u == NULL || url_name(u, name, sizeof(name), &w) != 0) {
			snprintf(why, cap, "urls[%zu]: %s", i, u == NULL ? "not a string" : w);
			st = 400;
		} else if (json_object_get(seen, name) != NULL) {
			snprintf(why, cap, "urls[%zu]: another URL names object \"%s\" too", i, name);
			st = 400;
		} else {
			json_object_set_new(seen, name, json_true());
			json_array_append_new(names, json_string(name));
			json_array_append_new(list, json_string(u));
		}
	}
	json_decref(seen);
	return st;
}

/* Worker: reads the URL list object (one URL a line) of the bucket from its owner. 0, or -1 after responding. */
static int download_prepare(px_t *px, ft_req_t *r, json_t *msg)
{
	const char *provider = json_string_value(json_object_get(msg, "provider"));
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	const char *obj = json_string_value(json_object_get(msg, "url_list_object"));
	ft_smap_t *smap = ft_smap_current();
	ft_strbuf_t body = {0};
	json_t *urls = json_array();
	char why[1400];
	int st;

	(void)px;
	st = px_object_read(smap, provider, bucket, obj, "url_list_object", LIST_TIMEOUT_MS, &body, why, sizeof(why));
	if (st != 0)
		goto out;
	size_t line = 0;
	int rc = px_text_lines(body.p, body.len, SIZE_MAX, urls, &line);
	if (rc != 0) {
		snprintf(why, sizeof(why), "url_list_object \"%s\": %s", obj,
			 rc == -EILSEQ ? "a line is not UTF-8 text" : "out of memory");
		if (rc == -EILSEQ)
			snprintf(why + strlen(why), sizeof(why) - strlen(why), " (line %zu)", line);
		st = rc == -EILSEQ ? 400 : 500;
		goto out;
	}
	json_object_del(msg, "url_list_object");
	st = add_urls(urls, msg, why, sizeof(why));
out:
	if (st != 0)
		ft_resp_error(r, st, "download: %s", why);
	json_decref(urls);
	ft_strbuf_free(&body);
	ft_smap_put(smap);
	return st == 0 ? 0 : -1;
}

/* download: the URLs and their names into msg (a URL list object: on the worker). 0, or -1 after responding 400. */
static int download_value(ft_req_t *r, const json_t *value, json_t *msg, px_job_prepare_fn *prepare)
{
	const json_t *urls = json_object_get(value, "urls"), *list = json_object_get(value, "url_list_object");
	const char *tpl = json_string_value(json_object_get(value, "template")), *w = NULL;
	char why[400];
	int st;

	if (!json_is_object(value) || json_object_size(value) != 1 || (urls == NULL && list == NULL && tpl == NULL)) {
		ft_resp_error(r, 400,
			      "download needs a value with one of \"urls\" (array), \"template\" (string) or "
			      "\"url_list_object\" (an object of the bucket, one URL a line)");
		return -1;
	}
	if (list != NULL) {
		if (!json_is_string(list) ||
		    ft_name_check_object(json_string_value(list), json_string_length(list), &w) != 0) {
			ft_resp_error(r, 400, "url_list_object must name an object of the bucket%s%s", w ? ": " : "",
				      w ? w : "");
			return -1;
		}
		json_object_set(msg, "url_list_object", (json_t *)list);
		*prepare = download_prepare;
		return 0;
	}
	json_t *expanded = NULL;
	if (tpl != NULL) {
		expanded = json_array();
		if (px_expand_template(tpl, COPY_NAMES_MAX, expanded, &w) != 0) {
			json_decref(expanded);
			char shown[FT_REDACT_URL_MAX]; /* a template of presigned URLs carries their query */
			ft_resp_error(r, 400, "bad template \"%s\": %s", ft_redact_url(tpl, shown, sizeof(shown)), w);
			return -1;
		}
		urls = expanded;
	} else if (!json_is_array(urls)) {
		ft_resp_error(r, 400, "urls must be an array of URLs");
		return -1;
	}
	st = add_urls(urls, msg, why, sizeof(why));
	json_decref(expanded);
	if (st != 0) {
		ft_resp_error(r, st, "download: %s", why);
		return -1;
	}
	return 0;
}

bool px_copy_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		    const json_t *value)
{
	int copy = action != NULL && (strcmp(action, "copy-bck") == 0 || strcmp(action, "copy-listrange") == 0);
	int download = action != NULL && strcmp(action, "download") == 0;
	px_job_prepare_fn prepare = NULL;
	px_copy_t c = {0};
	char id[48];
	json_t *msg;

	if (copy) {
		if (copy_value(r, action, value, &c) == 0)
			px_copy_submit(px, r, action, provider, bucket, &c, false);
		return true;
	}
	if (!download)
		return false;
	px_jobs_new_id(id, sizeof(id));
	msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", "download", "provider", provider, "bucket", bucket);
	if (msg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return true;
	}
	if (download_value(r, value, msg, &prepare) != 0) {
		json_decref(msg);
		return true;
	}
	px_jobs_submit(px, r, msg, prepare, false);
	return true;
}
