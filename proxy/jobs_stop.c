/* SPDX-License-Identifier: Apache-2.0 */
/* Stopping every running job of a kind, or of every kind (optionally of one bucket): DELETE /v1/jobs?kind=K|all=true. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "http/util.h"

/*
 * DESIGN
 * The proxy keeps no job state (jobs.c), so stopping by kind is: list every job the targets know
 * (px_jobs_query with no id), keep the running ones of the kind (and bucket), and abort each as
 * DELETE /v1/jobs/ID does (px_jobs_query with del). A job that ends between the listing and its
 * abort is still aborted harmlessly (a target answers an ended job's abort with its document);
 * one no target knows any more (404) is left out of the answer. Jobs started after the listing
 * are not stopped: the answer names exactly the jobs that were.
 */

static const char *const kinds[] = {"prefetch", "evict",  "evict-bucket", "delete", "copy",      "download", "dsort",
				    "archive",  "mirror", "ec-encode",    "scrub",  "rebalance", "resilver"};

static bool kind_known(const char *kind)
{
	for (size_t i = 0; kind != NULL && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kind, kinds[i]) == 0)
			return true;
	return false;
}

const char *px_jobs_kind_at(size_t i)
{
	return i < sizeof(kinds) / sizeof(kinds[0]) ? kinds[i] : NULL;
}

const char *px_jobs_provider(const char *p)
{
	ft_backend_provider_t bp;

	if (p == NULL || p[0] == '\0')
		return "";
	if (strcmp(p, "ais") == 0)
		return "ais";
	return ft_backend_provider_parse(p, &bp) == 0 ? ft_backend_provider_name(bp) : NULL;
}

static bool str_is(const json_t *job, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(job, key));

	return v != NULL && strcmp(v, want) == 0;
}

/* Whether job (a folded document) is running and of kind, provider, bucket (NULL or "": any). */
static bool stoppable(const json_t *job, const char *kind, const char *provider, const char *bucket)
{
	return str_is(job, "state", "running") && (kind == NULL || kind[0] == '\0' || str_is(job, "kind", kind)) &&
	       (provider == NULL || provider[0] == '\0' || str_is(job, "provider", provider)) &&
	       (bucket == NULL || bucket[0] == '\0' || str_is(job, "bucket", bucket));
}

int px_jobs_stop_kind(px_t *px, const char *kind, const char *provider, const char *bucket, json_t **stopped,
		      int *status, char *why, size_t cap)
{
	json_t *jobs = NULL, *out = json_array();
	int rc = -1;

	*stopped = NULL;
	if (out == NULL) {
		*status = 500;
		snprintf(why, cap, "out of memory");
		return -1;
	}
	if (px_jobs_query(px, "", false, &jobs, status, why, cap) != 0)
		goto done;
	for (size_t i = 0; i < json_array_size(jobs); i++) {
		const json_t *job = json_array_get(jobs, i);
		const char *id = json_string_value(json_object_get(job, "id"));
		json_t *doc = NULL;
		if (id == NULL || !stoppable(job, kind, provider, bucket))
			continue;
		if (px_jobs_query(px, id, true, &doc, status, why, cap) != 0) {
			if (*status == 404)
				continue; /* ended and forgotten since the listing */
			goto done;
		}
		json_decref(doc);
		json_array_append_new(out, json_string(id));
	}
	if (json_array_size(out) > 0)
		ft_info("jobs of kind %s%s%s stopped: %zu", kind != NULL && kind[0] ? kind : "any",
			bucket != NULL && bucket[0] ? " of bucket " : "", bucket != NULL ? bucket : "",
			json_array_size(out));
	*stopped = out;
	out = NULL;
	rc = 0;
done:
	json_decref(out);
	json_decref(jobs);
	return rc;
}

/* ---- DELETE /v1/jobs?kind=K|all=true[&provider=P][&bucket=B] ---- */

typedef struct {
	px_t *px;
	const char *kind, *provider, *bucket; /* request-owned; kind NULL: every kind */
} stop_t;

static void stop_work(ft_req_t *r, void *arg)
{
	stop_t *s = arg;
	json_t *stopped = NULL;
	int status;
	char why[512];

	if (px_jobs_stop_kind(s->px, s->kind, s->provider, s->bucket, &stopped, &status, why, sizeof(why)) != 0)
		ft_resp_error(r, status, "%s", why);
	else
		ft_resp_json(r, 200, json_pack("{s:s?, s:o}", "kind", s->kind, "stopped", stopped));
}

/* The known kinds as "a, b, c" into buf. */
static const char *kinds_text(char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", kinds[i]);
	return buf;
}

void px_jobs_stop_route(px_t *px, ft_req_t *r)
{
	const char *kind = ft_req_query(r, "kind"), *provider = ft_req_query(r, "provider"),
		   *bucket = ft_req_query(r, "bucket");
	const char *w = NULL;
	char known[256];
	stop_t *s;

	const char *all = ft_req_query(r, "all");
	bool every = all != NULL && strcmp(all, "true") == 0;

	if (all != NULL && !every) {
		ft_resp_error(r, 400, "all takes only the value true (every running job of every kind), not \"%s\"",
			      all);
		return;
	}
	if (every && kind != NULL && kind[0] != '\0') {
		ft_resp_error(r, 400, "all=true (every running job of every kind) takes no kind");
		return;
	}
	if (!every && (kind == NULL || kind[0] == '\0')) {
		ft_resp_error(r, 400,
			      "DELETE /v1/jobs needs ?kind=K (every running job of kind K) or ?all=true (every running "
			      "job), or name the job: DELETE /v1/jobs/ID");
		return;
	}
	if (!every && !kind_known(kind)) {
		ft_resp_error(r, 400, "unknown job kind \"%s\" (known: %s)", kind, kinds_text(known, sizeof(known)));
		return;
	}
	const char *canonical = px_jobs_provider(provider);
	if (canonical == NULL) {
		ft_resp_error(r, 400, "unknown provider \"%s\" (ais, aws, gcp, azure or ht)", provider);
		return;
	}
	if (bucket != NULL && bucket[0] != '\0' && ft_name_check_bucket(bucket, &w) != 0) {
		ft_resp_error(r, 400, "bad bucket name \"%s\": %s", bucket, w);
		return;
	}
	s = ft_req_alloc(r, sizeof(*s));
	s->px = px;
	s->kind = every ? NULL : ft_req_strdup(r, kind);
	s->provider = canonical;
	s->bucket = bucket != NULL ? ft_req_strdup(r, bucket) : NULL;
	ft_req_defer(r, stop_work, s);
}
