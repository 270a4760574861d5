/* SPDX-License-Identifier: Apache-2.0 */
/* Listing remote buckets on a target: pages of the backend's listing, and which of a page's names are cached here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "obj/listwalk.h"
#include "target.h"

/*
 * DESIGN
 * The proxy has no backend handles: it asks one target (HRW by bucket name) for a page of the
 * backend's listing, which this file fetches through the bucket's shared handle
 * (tgt_backend_get). A page of N names may take several backend calls (a backend may return
 * fewer than asked while more follow); the token handed back is the backend's own, so the
 * client's continuation token passes through unchanged. Whether a name is cached is decided by
 * its owner only: the proxy sends each owner the names it owns (tgt_rlist_cached) and the owner
 * answers from its HRW mountpath, the same test a GET makes.
 */

#define RLIST_PAGE_DEFAULT 1000
#define RLIST_PAGE_MAX 10000
#define RLIST_BACKEND_MAX 1000 /* entries one backend call returns at most */
#define RLIST_NAMES_MAX 100000
#define RLIST_DELIMITER_MAX 256

/* The bucket's tgt_obj_t identity (provider, bucket, created) from the current BMD; -1 when unknown. */
static int bucket_obj(tgt_t *t, const char *provider, const char *bucket, tgt_obj_t *o)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, provider, bucket) : NULL;

	memset(o, 0, sizeof(*o));
	if (b) {
		o->t = t;
		snprintf(o->provider, sizeof(o->provider), "%s", provider);
		snprintf(o->bucket, sizeof(o->bucket), "%s", bucket);
		tgt_obj_props(o, b);
	}
	ft_bmd_put(bmd);
	return b ? 0 : -1;
}

/* pagesize: absent, "" or 0 -> default, above the max -> max; -1 when not a number. */
static int rlist_pagesize(const char *s)
{
	long v = 0;

	if (!s || !*s)
		return RLIST_PAGE_DEFAULT;
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		if (v <= RLIST_PAGE_MAX)
			v = v * 10 + (*c - '0');
	}
	return v == 0 ? RLIST_PAGE_DEFAULT : v > RLIST_PAGE_MAX ? RLIST_PAGE_MAX : (int)v;
}

/* Appends the backend page's entries to arr; -1 on allocation failure. */
static int add_entries(json_t *arr, const ft_backend_page_t *p)
{
	for (int i = 0; i < p->n; i++) {
		const ft_backend_entry_t *e = &p->entries[i];
		json_t *o = e->dir ? json_pack("{s:s, s:b}", "name", e->name, "dir", 1)
				   : json_pack("{s:s, s:I}", "name", e->name, "size", (json_int_t)e->size);
		if (!o) {
			ft_warn("remote listing: name not representable in JSON, not listed");
			continue;
		}
		if (e->etag[0])
			json_object_set_new(o, "etag", json_string(e->etag));
		if (e->mtime_ns)
			json_object_set_new(o, "mtime", json_integer(e->mtime_ns));
		if (json_array_append_new(arr, o) != 0)
			return -1;
	}
	return 0;
}

void tgt_rlist_page(tgt_t *t, const char *provider, const char *bucket, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *prefix = ft_ctl_query(req, "prefix");
	const char *token = ft_ctl_query(req, "token");
	const char *delimiter = ft_ctl_query(req, "delimiter");
	const char *start_after = ft_ctl_query(req, "start_after"); /* the first page's, without token */
	int pagesize = rlist_pagesize(ft_ctl_query(req, "pagesize"));
	ft_backend_error_t err;
	ft_backend_page_t page;
	char *next = NULL;
	json_t *entries = NULL;
	tgt_obj_t o;

	if (strcmp(provider, "ais") == 0) {
		ft_ctl_error(resp, 400, "remote=true lists remote buckets only; \"%s\" is an ais bucket", bucket);
		return;
	}
	if (pagesize < 0) {
		ft_ctl_error(resp, 400, "invalid pagesize \"%s\"", ft_ctl_query(req, "pagesize"));
		return;
	}
	if (delimiter != NULL && strlen(delimiter) > RLIST_DELIMITER_MAX) {
		ft_ctl_error(resp, 400, "delimiter longer than %d bytes", RLIST_DELIMITER_MAX);
		return;
	}
	if (bucket_obj(t, provider, bucket, &o) != 0) {
		ft_ctl_error(resp, 404, "bucket %s/%s is not known to target %s", provider, bucket, t->id);
		return;
	}
	ft_backend_t *b = tgt_backend_get(&o, &err);
	if (!b) {
		ft_ctl_error(resp, 500, "bucket %s/%s: backend: %s", provider, bucket, err.msg);
		return;
	}
	entries = json_array();
	if (!entries)
		goto oom;
	if (token && *token && (next = strdup(token)) == NULL)
		goto oom;
	bool first = true;
	do {
		size_t have = json_array_size(entries);
		int want = pagesize - (int)have > RLIST_BACKEND_MAX ? RLIST_BACKEND_MAX : pagesize - (int)have;
		ft_backend_list_args_t args = {prefix, delimiter, next, start_after, want};
		ft_backend_err_t code = ft_backend_list_page(b, &args, &page, &err);
		if (code == FT_BACKEND_EREQUEST && first && token && *token) { /* refused the client's token */
			ft_ctl_error(resp, 400, "listing %s/%s: the backend refused the continuation token: %s",
				     provider, bucket, err.msg);
			goto out;
		}
		if (code != FT_BACKEND_OK) {
			ft_ctl_error(resp, ft_backend_http_status(code), "listing %s/%s: %s", provider, bucket,
				     err.msg);
			goto out;
		}
		first = false;
		free(next);
		next = NULL;
		int rc = add_entries(entries, &page);
		if (rc == 0 && page.next_token && (next = strdup(page.next_token)) == NULL)
			rc = -1;
		ft_backend_page_free(&page);
		if (rc != 0)
			goto oom;
	} while (next && (int)json_array_size(entries) < pagesize);
	resp->status = 200;
	resp->json = json_pack("{s:O, s:s}", "entries", entries, "continuation_token", next ? next : "");
	if (resp->json)
		goto out;
oom:
	ft_ctl_error(resp, 500, "out of memory");
out:
	json_decref(entries);
	free(next);
}

void tgt_rlist_cached(tgt_t *t, const char *provider, const char *bucket, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = json_loadb(req->body, req->body_len, 0, NULL);
	const json_t *names = json_object_get(msg, "names");
	const char *why = NULL;
	json_t *out = NULL;
	tgt_obj_t o;

	if (!json_is_array(names) || json_array_size(names) > RLIST_NAMES_MAX) {
		ft_ctl_error(resp, 400, "body must be {\"names\": [...]} (at most %d names)", RLIST_NAMES_MAX);
		goto done;
	}
	if (bucket_obj(t, provider, bucket, &o) != 0) {
		ft_ctl_error(resp, 404, "bucket %s/%s is not known to target %s", provider, bucket, t->id);
		goto done;
	}
	out = json_array();
	for (size_t i = 0; out && i < json_array_size(names); i++) {
		const char *name = json_string_value(json_array_get(names, i));
		if (!name) {
			ft_ctl_error(resp, 400, "names[%zu]: not a string", i);
			goto done;
		}
		/* A backend name the cluster cannot store (e.g. with ".." segments) is never held. */
		int held = ft_name_check_object(name, strlen(name), &why) == 0 &&
			   tgt_obj_name(&o, name, strlen(name)) == 0;
		if (held)
			held = tgt_list_holds(&o);
		if (json_array_append_new(out, json_boolean(held)) != 0) {
			json_decref(out);
			out = NULL;
		}
	}
	if (!out) {
		ft_ctl_error(resp, 500, "out of memory");
		goto done;
	}
	resp->status = 200;
	resp->json = json_pack("{s:o}", "cached", out);
	out = NULL;
done:
	json_decref(out);
	json_decref(msg);
}
