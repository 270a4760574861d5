/* SPDX-License-Identifier: Apache-2.0 */
/* Proxy side of archive jobs: the archive action checked, a prefix listed into names, and sent to the targets. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "base/names.h"

/*
 * DESIGN
 * The archive job runs like any other (jobs.c's submit): every target gets the message, and the
 * owner of the first output shard packs (target/xact/archive.c). The proxy checks the value's
 * shape, turns a template into names (px_jobs_value_names) and, on the worker, a prefix into the
 * names of the merged listing, so the packer gets the whole, ordered list of sources. Names,
 * format and archname are checked again by the targets, whose 400 the submit passes on.
 */

#define ARCHIVE_NAMES_MAX 100000
#define ARCHIVE_LIST_PAGE 10000

static const char *const archive_keys[] = {"objnames",         "template", "prefix",     "to_bucket",
					   "archname",         "format",   "shard_size", "include_src_bucket_name",
					   "continue_on_error"};

static int archive_key(const char *key)
{
	for (size_t i = 0; i < sizeof(archive_keys) / sizeof(archive_keys[0]); i++)
		if (strcmp(key, archive_keys[i]) == 0)
			return 1;
	return 0;
}

/* Worker: a prefix becomes the names the listing holds under it (the outputs left out). 0, or -1 after responding. */
static int archive_prepare(px_t *px, ft_req_t *r, json_t *msg)
{
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	const char *prefix = json_string_value(json_object_get(msg, "prefix"));
	const char *to = json_string_value(json_object_get(msg, "to_bucket"));
	const char *arch = json_string_value(json_object_get(msg, "archname"));
	json_t *names = json_array();
	char token[FT_OBJ_NAME_MAX + 1] = "", why[300];
	bool more = true;
	int status = 0;

	json_object_set_new(msg, "objnames", names);
	while (more) {
		json_t *entries = NULL;
		if (px_list_page(px, bucket, prefix, token, ARCHIVE_LIST_PAGE, &entries, &more, &status, why,
				 sizeof(why)) != 0) {
			ft_resp_error(r, status, "archive: listing %s: %s", bucket, why);
			return -1;
		}
		for (size_t i = 0; i < json_array_size(entries); i++) {
			const char *n = json_string_value(json_object_get(json_array_get(entries, i), "name"));
			if (n == NULL)
				continue;
			snprintf(token, sizeof(token), "%s", n);
			if (strcmp(to, bucket) == 0 && strcmp(n, arch) == 0)
				continue; /* a run before wrote it */
			json_array_append_new(names, json_string(n));
		}
		json_decref(entries);
		if (json_array_size(names) > ARCHIVE_NAMES_MAX) {
			ft_resp_error(r, 400, "archive: more than %d objects under prefix \"%s\"", ARCHIVE_NAMES_MAX,
				      prefix);
			return -1;
		}
	}
	if (json_array_size(names) == 0) {
		ft_resp_error(r, 404, "archive: no objects under prefix \"%s\" in bucket %s", prefix, bucket);
		return -1;
	}
	json_object_del(msg, "prefix");
	return 0;
}

/* The value's options into msg; 0, or -1 after responding 400/404. */
static int archive_options(ft_req_t *r, const char *bucket, const json_t *value, json_t *msg)
{
	const json_t *to = json_object_get(value, "to_bucket"), *arch = json_object_get(value, "archname");
	const json_t *fmt = json_object_get(value, "format"), *size = json_object_get(value, "shard_size");
	const char *bools[] = {"include_src_bucket_name", "continue_on_error"};
	const char *tb = to != NULL ? json_string_value(to) : bucket;

	if (tb == NULL || !json_is_string(arch) || (fmt != NULL && !json_is_string(fmt))) {
		ft_resp_error(r, 400,
			      "archive: \"archname\" (string) is required; \"to_bucket\" and \"format\" are strings");
		return -1;
	}
	if (size != NULL && (!json_is_integer(size) || json_integer_value(size) < 1)) {
		ft_resp_error(r, 400, "archive: \"shard_size\" must be an integer number of bytes >= 1");
		return -1;
	}
	for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
		const json_t *v = json_object_get(value, bools[i]);
		if (v != NULL && !json_is_boolean(v)) {
			ft_resp_error(r, 400, "archive: \"%s\" must be true or false", bools[i]);
			return -1;
		}
		json_object_set_new(msg, bools[i], json_boolean(json_is_true(v)));
	}
	if (!px_auth_bucket(r, FT_ROLE_READWRITE, tb)) /* the destination is written too */
		return -1;
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && ft_bmd_find(bmd, "ais", tb) != NULL;
	ft_bmd_put(bmd);
	if (!known) {
		ft_resp_error(r, 404, "archive: destination bucket \"ais://%s\" does not exist", tb);
		return -1;
	}
	json_object_set_new(msg, "to_bucket", json_string(tb));
	json_object_set(msg, "archname", (json_t *)arch);
	if (fmt != NULL)
		json_object_set(msg, "format", (json_t *)fmt);
	if (size != NULL)
		json_object_set(msg, "shard_size", (json_t *)size);
	return 0;
}

bool px_archive_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		       const json_t *value)
{
	if (action == NULL || strcmp(action, "archive") != 0)
		return false;
	px_archive_submit(px, r, provider, bucket, value, false);
	return true;
}

void px_archive_submit(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const json_t *value,
		       bool bare_id)
{
	const char *key;
	json_t *v, *msg;
	char id[48];

	if (!json_is_object(value)) {
		ft_resp_error(r, 400, "archive needs a value object (objnames, template or prefix; archname; ...)");
		return;
	}
	json_object_foreach((json_t *)value, key, v) {
		if (!archive_key(key)) {
			ft_resp_error(r, 400,
				      "archive: unknown field \"%s\" (known: objnames, template, prefix, to_bucket, "
				      "archname, format, shard_size, include_src_bucket_name, continue_on_error)",
				      key);
			return;
		}
	}
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && ft_bmd_find(bmd, provider, bucket) != NULL;
	ft_bmd_put(bmd);
	if (!known) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		return;
	}
	if (json_object_get(value, "prefix") != NULL && strcmp(provider, "ais") != 0) {
		ft_resp_error(r, 400, "archive: a prefix lists ais buckets only; name the objects of %s://%s", provider,
			      bucket);
		return;
	}
	px_jobs_new_id(id, sizeof(id));
	msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", "archive", "provider", provider, "bucket", bucket);
	if (msg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	if (archive_options(r, bucket, value, msg) != 0 ||
	    px_jobs_value_names(r, provider, "archive", value, msg) != 0) {
		json_decref(msg);
		return;
	}
	if (json_object_get(msg, "objnames") != NULL && json_array_size(json_object_get(msg, "objnames")) == 0) {
		ft_resp_error(r, 400, "archive: objnames is empty");
		json_decref(msg);
		return;
	}
	px_jobs_submit(px, r, msg, json_object_get(msg, "prefix") != NULL ? archive_prepare : NULL, bare_id);
}
