/* SPDX-License-Identifier: Apache-2.0 */
/* Control-port endpoint of the epoch order hints: install a target's share, list the hints, remove them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "http/util.h"
#include "xact/hint.h"

/*
 * DESIGN
 * /v1/hints is intra-cluster: it is served on the control port only (never the public port), and
 * only the proxy calls it, after it checked the request and split the names by HRW owner. The role
 * it needs is the cluster's own (a node of the Smap), as every control-port endpoint: the control
 * port is not for clients.
 *   POST   {"provider","bucket","job","epoch","ttl_s","objnames":[...]} -> 200 {"names","duplicates","bytes"}
 *   GET    -> {"hints": [...], "bytes", "max_bytes"}
 *   DELETE ?provider=P&bucket=B[&job=J[&epoch=N]] -> {"removed": n}
 */

static const char *const install_keys[] = {"provider", "bucket", "job", "epoch", "ttl_s", "objnames"};

/* A string member of j, or NULL. */
static const char *str_of(const json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* Fills s from msg (names borrowed from msg); 0, or 400 with why. */
static int install_spec(const json_t *msg, tgt_hint_spec_t *s, const char ***names, char *why, size_t cap)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)msg, key, v) {
		size_t i = 0;
		while (i < sizeof(install_keys) / sizeof(install_keys[0]) && strcmp(key, install_keys[i]) != 0)
			i++;
		if (i == sizeof(install_keys) / sizeof(install_keys[0])) {
			snprintf(why, cap, "unknown field \"%s\"", key);
			return 400;
		}
	}
	const json_t *arr = json_object_get(msg, "objnames");
	const json_t *epoch = json_object_get(msg, "epoch"), *ttl = json_object_get(msg, "ttl_s");
	s->provider = str_of(msg, "provider");
	s->bucket = str_of(msg, "bucket");
	s->job = str_of(msg, "job");
	if (!json_is_integer(epoch) || !json_is_integer(ttl) || !json_is_array(arr)) {
		snprintf(why, cap, "epoch and ttl_s must be integers, objnames an array");
		return 400;
	}
	s->epoch = json_integer_value(epoch);
	s->ttl_s = json_integer_value(ttl);
	s->n = json_array_size(arr);
	*names = malloc((s->n ? s->n : 1) * sizeof(**names));
	if (*names == NULL) {
		snprintf(why, cap, "out of memory");
		return 500;
	}
	for (size_t i = 0; i < s->n; i++)
		(*names)[i] = json_string_value(json_array_get(arr, i));
	s->names = *names;
	return 0;
}

static void install(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_error_t jerr;
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;
	tgt_hint_spec_t s = {0};
	const char **names = NULL;
	char why[300] = "";
	size_t dups = 0;
	int rc;

	if (!json_is_object(msg)) {
		ft_ctl_error(resp, 400, "hint: body is not a JSON object%s%s", msg ? "" : ": ", msg ? "" : jerr.text);
		goto out;
	}
	rc = install_spec(msg, &s, &names, why, sizeof(why));
	if (rc == 0) {
		ft_bmd_t *bmd = ft_bmd_current();
		bool known = s.provider && s.bucket && bmd && ft_bmd_find(bmd, s.provider, s.bucket) != NULL;
		ft_bmd_put(bmd);
		if (!known && s.provider && s.bucket) {
			ft_ctl_error(resp, 404, "hint: bucket %s/%s does not exist", s.provider, s.bucket);
			goto out;
		}
		rc = tgt_hint_install_at(t, &s, ft_mono_ms(), &dups, why, sizeof(why));
	}
	if (rc != 0) {
		ft_ctl_error(resp, rc, "hint: %s", why);
		goto out;
	}
	ft_info("hint %s/%s job %s epoch %lld: %zu names here (%zu listed twice), ttl %llds", s.provider, s.bucket,
		s.job, (long long)s.epoch, s.n - dups, dups, (long long)s.ttl_s);
	resp->status = 200;
	resp->json = json_pack("{s:I, s:I}", "names", (json_int_t)(s.n - dups), "duplicates", (json_int_t)dups);
out:
	free(names);
	json_decref(msg);
}

static void remove_hints(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *provider = ft_ctl_query(req, "provider"), *bucket = ft_ctl_query(req, "bucket");
	const char *epoch = ft_ctl_query(req, "epoch");
	char *end = NULL;
	long long e = epoch != NULL ? strtoll(epoch, &end, 10) : -1;

	if (provider == NULL || bucket == NULL) {
		ft_ctl_error(resp, 400, "hint: DELETE needs ?provider=P&bucket=B (and optionally &job=J, &epoch=N)");
		return;
	}
	if (epoch != NULL && (end == epoch || *end != '\0' || e < 0)) {
		ft_ctl_error(resp, 400, "hint: epoch must be a non-negative integer");
		return;
	}
	int n = tgt_hint_remove(t, provider, bucket, ft_ctl_query(req, "job"), (int64_t)e);
	resp->status = 200;
	resp->json = json_pack("{s:i}", "removed", n);
}

void tgt_hint_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	if (strcmp(req->path, "/v1/hints") != 0) {
		ft_ctl_error(resp, 404, "no such control endpoint: %s %s", req->method, req->path);
	} else if (strcmp(req->method, "POST") == 0) {
		install(t, req, resp);
	} else if (strcmp(req->method, "GET") == 0) {
		resp->status = 200;
		resp->json = tgt_hint_json_at(t, ft_mono_ms());
	} else if (strcmp(req->method, "DELETE") == 0) {
		remove_hints(t, req, resp);
	} else {
		ft_ctl_error(resp, 405, "method %s not allowed on %s (use POST, GET or DELETE)", req->method,
			     req->path);
	}
}
