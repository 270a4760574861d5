/* SPDX-License-Identifier: Apache-2.0 */
/* Proxy side of cluster jobs: prefetch/evict and local-object job actions, templates, fan-out to targets, status. */
#include "proxy.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/names.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * The proxy keeps no job state: a job is the set of per-target jobs of one id. Submitting POSTs
 * {"id","kind","provider","bucket"} plus "objnames" or "prefix" to every target of the current
 * Smap (each target keeps the names it owns, or lists the prefix itself); status and abort ask
 * every target of the current Smap for that id and add up the answers. So a proxy restart loses
 * nothing, and jobs a target starts on its own (rebalance) show up like any other.
 * The message names the job's targets ("members", the Smap at submit) and every part repeats
 * them: a member absent from the Smap or not answering is "missing". A job with a missing member
 * reads "running" until job_missing_grace_s (default 120) after the other parts ended (a restarted target answers again well within
 * it, from its journal while its resume waits), then "incomplete": never "finished" without
 * every part.
 */

#define JOB_TIMEOUT_MS 10000
#define JOB_NAMES_MAX 100000
#define JOB_MSG_MAX (15u << 20) /* below the targets' control-port body limit */

/* One fan-out: a call per target, results in per-index slots. Lives on the worker's stack. */
typedef struct {
	const ft_smap_t *smap;
	const char *method;
	char path[128];
	const json_t *body;
	long *status;
	json_t **resp;
	char (*err)[200];
} fanout_t;

static void fanout_one(void *arg, int i)
{
	fanout_t *f = arg;
	char url[FT_URL_MAX + 160];

	snprintf(url, sizeof(url), "%s%s", f->smap->targets[i].control_url, f->path);
	if (ft_client_json(f->method, url, f->body, JOB_TIMEOUT_MS, &f->status[i], &f->resp[i], f->err[i],
			   sizeof(f->err[i])) != 0)
		f->status[i] = 0;
}

/* Runs method path on every target; arrays allocated in f (free with fanout_free). -1 on OOM. */
static int fanout(px_t *px, fanout_t *f)
{
	int n = f->smap->n_targets;

	f->status = calloc((size_t)n + 1, sizeof(*f->status));
	f->resp = calloc((size_t)n + 1, sizeof(*f->resp));
	f->err = calloc((size_t)n + 1, sizeof(*f->err));
	if (f->status == NULL || f->resp == NULL || f->err == NULL)
		return -1;
	ft_fanout_run(px->fanout, fanout_one, f, n);
	return 0;
}

static void fanout_free(fanout_t *f)
{
	for (int i = 0; f->resp != NULL && i < f->smap->n_targets; i++)
		json_decref(f->resp[i]);
	free(f->err);
	free(f->resp);
	free(f->status);
}

/* ---- submit ---- */

typedef struct {
	px_t *px;
	json_t *msg; /* owned: the message for the targets; released by submit_done */
	px_job_prepare_fn prepare;
	const char *path; /* on the targets' control port: /v1/jobs, or a job of its own endpoint */
	bool bare_id;     /* AIStore's action message: the answer is the job id as text */
} submit_t;

static void submit_done(void *arg)
{
	submit_t *s = arg;

	json_decref(s->msg);
	s->msg = NULL;
}

static void submit_work(ft_req_t *r, void *arg)
{
	submit_t *s = arg;
	ft_smap_t *smap = ft_smap_current();
	fanout_t f = {.smap = smap, .method = "POST", .body = s->msg};
	const char *id = json_string_value(json_object_get(s->msg, "id"));
	int bad = -1;

	snprintf(f.path, sizeof(f.path), "%s", s->path);

	if (smap == NULL || smap->n_targets == 0) {
		ft_resp_error(r, 503, "the cluster map has no targets");
		goto out;
	}
	if (s->prepare != NULL && s->prepare(s->px, r, s->msg) != 0)
		goto out;
	json_t *members = json_array();
	for (int i = 0; i < smap->n_targets; i++)
		json_array_append_new(members, json_string(smap->targets[i].id));
	json_object_set_new(s->msg, "members", members);
	if (fanout(s->px, &f) != 0) {
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	for (int i = 0; i < smap->n_targets && bad < 0; i++)
		if (f.status[i] != 200)
			bad = i;
	if (bad >= 0) {
		const char *m = json_string_value(json_object_get(f.resp[bad], "message"));
		int st = f.status[bad] >= 400 && f.status[bad] < 500 ? (int)f.status[bad] : 502;
		ft_resp_error(r, st, "job %s: target %s: %s", id, smap->targets[bad].id,
			      m != NULL            ? m
			      : f.status[bad] == 0 ? f.err[bad]
						   : "failed");
		goto out;
	}
	ft_info("job %s: %s %s/%s on %d targets", id, json_string_value(json_object_get(s->msg, "kind")),
		json_string_value(json_object_get(s->msg, "provider")),
		json_string_value(json_object_get(s->msg, "bucket")), smap->n_targets);
	if (s->bare_id)
		ft_resp_bytes(r, 200, "text/plain", id, strlen(id));
	else
		ft_resp_json(r, 200, json_pack("{s:s}", "job_id", id));
out:
	fanout_free(&f);
	ft_smap_put(smap);
}

/*
 * The objects of a listrange value into msg: "objnames" (expanded from a template) or "prefix".
 * 0, or -1 after responding 400.
 */
int px_jobs_value_names(ft_req_t *r, const char *provider, const char *kind, const json_t *value, json_t *msg)
{
	const json_t *names = json_object_get(value, "objnames"), *prefix = json_object_get(value, "prefix");
	const char *tpl = json_string_value(json_object_get(value, "template"));
	const char *why = NULL;
	json_t *arr;

	if ((names != NULL) + (tpl != NULL) + (prefix != NULL) > 1) {
		ft_resp_error(r, 400, "value must hold one of \"objnames\", \"template\" and \"prefix\"");
		return -1;
	}
	if (prefix != NULL) {
		if (!json_is_string(prefix) || json_string_length(prefix) > FT_OBJ_NAME_MAX) {
			ft_resp_error(r, 400, "prefix must be a string of at most %d bytes", FT_OBJ_NAME_MAX);
			return -1;
		}
		if (strcmp(kind, "prefetch") == 0 && strcmp(provider, "ht") == 0) {
			ft_resp_error(r, 400,
				      "an ht bucket cannot be listed, so it cannot be prefetched by prefix; "
				      "use objnames or template");
			return -1;
		}
		json_object_set_new(msg, "prefix", json_string(json_string_value(prefix)));
		return 0;
	}
	if (names == NULL && tpl == NULL) {
		ft_resp_error(r, 400,
			      "value must hold \"objnames\" (array), \"template\" (string) or \"prefix\" (string)");
		return -1;
	}
	arr = json_array();
	json_object_set_new(msg, "objnames", arr);
	if (names != NULL) {
		if (!json_is_array(names)) {
			ft_resp_error(r, 400, "objnames must be an array of names");
			return -1;
		}
		if (json_array_size(names) > JOB_NAMES_MAX) {
			ft_resp_error(r, 400, "too many objnames (at most %d)", JOB_NAMES_MAX);
			return -1;
		}
		for (size_t i = 0; i < json_array_size(names); i++) {
			const char *n = json_string_value(json_array_get(names, i));
			if (n == NULL || ft_name_check_object(n, strlen(n), &why) != 0) {
				ft_resp_error(r, 400, "bad objnames[%zu]: %s", i, n == NULL ? "not a string" : why);
				return -1;
			}
			json_array_append_new(arr, json_string(n));
		}
		return 0;
	}
	if (px_expand_template(tpl, JOB_NAMES_MAX, arr, &why) != 0) {
		ft_resp_error(r, 400, "bad template \"%s\": %s", tpl, why);
		return -1;
	}
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *n = json_string_value(json_array_get(arr, i));
		if (ft_name_check_object(n, strlen(n), &why) != 0) {
			ft_resp_error(r, 400, "bad template \"%s\": name \"%s\": %s", tpl, n, why);
			return -1;
		}
	}
	return 0;
}

/* Bucket actions that start jobs: the action word, the job kind, and whether it takes remote buckets only. */
static const struct {
	const char *action;
	const char *kind;
	bool remote_only;
	bool listrange; /* value names the objects (objnames, template, prefix) */
} job_actions[] = {
	{"prefetch-listrange", "prefetch", true, true},
	{"evict-listrange", "evict", true, true},
	{"evict-remote-bucket", "evict-bucket", true, false},
	{"evict-remote-bck", "evict-bucket", true, false}, /* AIStore's word for it */
	{"delete-listrange", "delete", false, true},
	{"make-n-copies", "mirror", false, false},
	{"ec-encode", "ec-encode", false, false},
	{"scrub", "scrub", false, false},
};

static int job_action(const char *a)
{
	for (size_t i = 0; a != NULL && i < sizeof(job_actions) / sizeof(job_actions[0]); i++)
		if (strcmp(a, job_actions[i].action) == 0)
			return (int)i;
	return -1;
}

/* The optional value of a job over local objects: absent, or {"prefix": "..."}. 0, or -1 after responding 400. */
static int value_local(ft_req_t *r, const char *action, const json_t *value, json_t *msg)
{
	const json_t *prefix = json_object_get(value, "prefix");

	if (value == NULL || json_is_null(value))
		return 0;
	if (!json_is_object(value) || json_object_size(value) != (prefix != NULL ? 1u : 0u)) {
		ft_resp_error(r, 400,
			      "%s takes no value, or {\"prefix\": \"...\"} (the bucket's properties say what to do)",
			      action);
		return -1;
	}
	if (prefix != NULL && (!json_is_string(prefix) || json_string_length(prefix) > FT_OBJ_NAME_MAX)) {
		ft_resp_error(r, 400, "prefix must be a string of at most %d bytes", FT_OBJ_NAME_MAX);
		return -1;
	}
	if (prefix != NULL)
		json_object_set_new(msg, "prefix", json_string(json_string_value(prefix)));
	return 0;
}

void px_jobs_new_id(char *id, size_t cap)
{
	static atomic_uint seq;

	snprintf(id, cap, "j-%" PRIx64 "-%x", (uint64_t)ft_now_ns(), atomic_fetch_add(&seq, 1));
}

void px_jobs_submit_to(px_t *px, ft_req_t *r, const char *path, json_t *msg, px_job_prepare_fn prepare, bool bare_id)
{
	submit_t *s = ft_req_alloc(r, sizeof(*s));

	s->px = px;
	s->msg = msg;
	s->prepare = prepare;
	s->path = path;
	s->bare_id = bare_id;
	ft_req_on_done(r, submit_done, s);
	ft_req_defer(r, submit_work, s);
}

void px_jobs_submit(px_t *px, ft_req_t *r, json_t *msg, px_job_prepare_fn prepare, bool bare_id)
{
	px_jobs_submit_to(px, r, "/v1/jobs", msg, prepare, bare_id);
}

bool px_jobs_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *body, size_t len)
{
	json_t *in = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(in, "action"));
	const json_t *value = json_object_get(in, "value");
	int a = job_action(action);
	json_t *msg = NULL, *blob = NULL;
	char id[48];

	if (action != NULL && strcmp(action, "blob-download") == 0) {
		/* AIStore's Object.blob_download(): the object named in the message fetched into the cache, as a
		 * prefetch of it (its chunk-size and num-workers are speed hints) */
		const char *name = json_string_value(json_object_get(in, "name"));
		if (name == NULL || name[0] == '\0') {
			ft_resp_error(r, 400, "blob-download names its object in \"name\"");
			goto out;
		}
		value = blob = json_pack("{s:[s]}", "objnames", name);
		a = job_action("prefetch-listrange");
	}

	if (a < 0 && px_dsort_action(px, r, provider, bucket, action, value)) {
		json_decref(in);
		return true;
	}
	if (a < 0 && (px_ais_copy_objects(px, r, provider, bucket, action, value) ||
		      px_copy_action(px, r, provider, bucket, action, value) ||
		      px_archive_action(px, r, provider, bucket, action, value))) {
		json_decref(in);
		return true;
	}
	if (a < 0) {
		json_decref(in);
		return false;
	}
	const char *kind = job_actions[a].kind;
	if (job_actions[a].remote_only && strcmp(provider, "ais") == 0) {
		ft_resp_error(r, 400,
			      "%s works on remote buckets only (provider=aws|gcp|azure|ht); \"%s\" is an ais bucket",
			      action, bucket);
		goto out;
	}
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && ft_bmd_find(bmd, provider, bucket) != NULL;
	ft_bmd_put(bmd);
	if (!known) {
		ft_resp_error(r, 404, "bucket \"%s://%s\" does not exist", provider, bucket);
		goto out;
	}
	px_jobs_new_id(id, sizeof(id));
	msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", kind, "provider", provider, "bucket", bucket);
	if (msg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		goto out;
	}
	if (job_actions[a].listrange) {
		if (!json_is_object(value)) {
			ft_resp_error(r, 400, "%s needs a value object (objnames, template or prefix)", action);
			goto out;
		}
		if (px_jobs_value_names(r, provider, kind, value, msg) != 0)
			goto out;
	} else if (strcmp(kind, "evict-bucket") != 0 && value_local(r, action, value, msg) != 0) {
		goto out;
	}
	px_jobs_submit(px, r, msg, NULL, px_ais_actmsg(in));
	msg = NULL;
out:
	json_decref(msg);
	json_decref(blob);
	json_decref(in);
	return true;
}

/* ---- status, list, abort ---- */

typedef struct {
	px_t *px;
	char id[64];
	bool del;
} query_t;

static void add_int(json_t *agg, const char *key, const json_t *part)
{
	json_int_t v = json_integer_value(json_object_get(agg, key)) + json_integer_value(json_object_get(part, key));

	json_object_set_new(agg, key, json_integer(v));
}

/* Folds one target's job document into agg (created on the first part). */
static json_t *job_fold(json_t *agg, const json_t *part)
{
	static const char *const order[] = {"running", "failed", "aborted", "finished"};

	if (agg == NULL) {
		agg = json_pack("{s:O, s:O, s:O, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:[], s:[]}", "id",
				json_object_get(part, "id"), "kind", json_object_get(part, "kind"), "bucket",
				json_object_get(part, "bucket"), "state", "finished", "objects", (json_int_t)0, "bytes",
				(json_int_t)0, "errors", (json_int_t)0, "total", (json_int_t)0, "start",
				(json_int_t)INT64_MAX, "end", (json_int_t)0, "error_samples", "targets");
		if (agg == NULL)
			return NULL;
		if (json_is_string(json_object_get(part, "provider")))
			json_object_set(agg, "provider", json_object_get(part, "provider"));
		if (json_is_string(json_object_get(part, "prefix")))
			json_object_set(agg, "prefix", json_object_get(part, "prefix"));
		if (json_is_object(json_object_get(part, "to")))
			json_object_set(agg, "to", json_object_get(part, "to"));
		if (json_is_boolean(json_object_get(part, "dry_run")))
			json_object_set(agg, "dry_run", json_object_get(part, "dry_run"));
		if (json_is_string(json_object_get(part, "archname"))) /* archive: the packer names its shards */
			json_object_set_new(agg, "archname", json_deep_copy(json_object_get(part, "archname")));
	}
	if (json_object_get(agg, "members") == NULL && json_is_array(json_object_get(part, "members")))
		json_object_set(agg, "members", json_object_get(part, "members"));
	if (json_array_size(json_object_get(part, "shards")) > 0)
		json_object_set(agg, "shards", json_object_get(part, "shards"));
	add_int(agg, "skipped", part);
	add_int(agg, "rate", part);
	json_t *inflight = json_object_get(part, "inflight");
	for (size_t i = 0; i < json_array_size(inflight); i++) {
		if (json_object_get(agg, "inflight") == NULL)
			json_object_set_new(agg, "inflight", json_array());
		json_array_append(json_object_get(agg, "inflight"), json_array_get(inflight, i));
	}
	/* The job's ETA is its slowest target's; -1 (unknown) wins over any estimate. */
	json_int_t eta = json_integer_value(json_object_get(part, "eta_s")),
		   agg_eta = json_object_get(agg, "eta_s") ? json_integer_value(json_object_get(agg, "eta_s")) : 0;
	if (json_object_get(part, "eta_s") != NULL && agg_eta != -1 && (eta == -1 || eta > agg_eta))
		agg_eta = eta;
	json_object_set_new(agg, "eta_s", json_integer(agg_eta));
	add_int(agg, "objects", part);
	add_int(agg, "bytes", part);
	add_int(agg, "errors", part);
	add_int(agg, "total", part);
	json_int_t st = json_integer_value(json_object_get(part, "start")),
		   en = json_integer_value(json_object_get(part, "end"));
	if (st < json_integer_value(json_object_get(agg, "start")))
		json_object_set_new(agg, "start", json_integer(st));
	if (en > json_integer_value(json_object_get(agg, "end")))
		json_object_set_new(agg, "end", json_integer(en));
	/* The job's state is the first of running, failed, aborted, finished that some target is in. */
	const char *ps = json_string_value(json_object_get(part, "state"));
	const char *as = json_string_value(json_object_get(agg, "state"));
	for (size_t i = 0; ps != NULL && i < sizeof(order) / sizeof(order[0]); i++) {
		if (strcmp(as, order[i]) == 0)
			break;
		if (strcmp(ps, order[i]) == 0) {
			json_object_set_new(agg, "state", json_string(ps));
			break;
		}
	}
	json_t *samples = json_object_get(agg, "error_samples"), *ps_arr = json_object_get(part, "error_samples");
	for (size_t i = 0; i < json_array_size(ps_arr) && json_array_size(samples) < 10; i++)
		json_array_append(samples, json_array_get(ps_arr, i));
	json_t *tp = json_pack("{s:O, s:O, s:O, s:O}", "node", json_object_get(part, "node"), "state",
			       json_object_get(part, "state"), "objects", json_object_get(part, "objects"), "bytes",
			       json_object_get(part, "bytes"));
	static const char *const more[] = {"errors", "skipped", "total", "rate", "eta_s", "collecting"};
	for (size_t i = 0; tp != NULL && i < sizeof(more) / sizeof(more[0]); i++)
		if (json_object_get(part, more[i]) != NULL)
			json_object_set(tp, more[i], json_object_get(part, more[i]));
	json_array_append_new(json_object_get(agg, "targets"), tp);
	return agg;
}

/*
 * The job's members that did not answer (answered: node id -> true) become parts of state
 * "missing"; while any is, a job the others ended reads running (within the grace) or incomplete.
 */
static void job_missing(json_t *agg, const json_t *answered, int grace_s)
{
	json_t *members = json_object_get(agg, "members"), *missing = json_array();
	size_t i;
	json_t *m;

	json_array_foreach(members, i, m) {
		const char *id = json_string_value(m);
		if (id == NULL || json_object_get(answered, id) != NULL)
			continue;
		json_array_append(missing, m);
		json_array_append_new(json_object_get(agg, "targets"),
				      json_pack("{s:s, s:s}", "node", id, "state", "missing"));
	}
	const char *st = json_string_value(json_object_get(agg, "state"));
	if (json_array_size(missing) > 0 && strcmp(st, "running") != 0 && strcmp(st, "aborted") != 0) {
		int64_t since = ft_now_ns() - json_integer_value(json_object_get(agg, "end"));
		if (since < (int64_t)grace_s * 1000000000LL) {
			json_object_set_new(agg, "state", json_string("running"));
		} else {
			json_object_set_new(agg, "state", json_string("incomplete"));
			json_array_append_new(
				json_object_get(agg, "error_samples"),
				json_string(
					"a target of the job never reported its part (it left the cluster or does not answer): see missing"));
		}
	}
	if (json_array_size(missing) > 0)
		json_object_set_new(agg, "missing", missing);
	else
		json_decref(missing);
}

/* Completes a folded job: its missing members; a job still running reports end 0. */
static void job_finish_doc(json_t *agg, const json_t *answered, int grace_s)
{
	job_missing(agg, answered, grace_s);
	if (strcmp(json_string_value(json_object_get(agg, "state")), "running") == 0)
		json_object_set_new(agg, "end", json_integer(0));
}

/* Whether job id is a dsort that some target still runs: aborting it then removes the outputs of the parts that
 * finished too, so an aborted dsort leaves no output (docs/jobs.md). */
static bool dsort_running(px_t *px, const char *id)
{
	json_t *doc = NULL;
	int status;
	char why[256];
	bool yes = false;

	if (px_jobs_query(px, id, false, &doc, &status, why, sizeof(why)) == 0) {
		const char *kind = json_string_value(json_object_get(doc, "kind")),
			   *state = json_string_value(json_object_get(doc, "state"));
		yes = kind != NULL && state != NULL && strcmp(kind, "dsort") == 0 && strcmp(state, "running") == 0;
	}
	json_decref(doc);
	return yes;
}

int px_jobs_query(px_t *px, const char *id, bool del, json_t **out, int *status, char *why, size_t cap)
{
	ft_smap_t *smap = ft_smap_current();
	fanout_t f = {.smap = smap, .method = del ? "DELETE" : "GET"};
	json_t *answered = json_object(); /* targets that answered: 200 or 404 */
	int rc = -1;

	*out = NULL;
	*status = 500;
	if (smap == NULL || smap->n_targets == 0) {
		*status = 503;
		snprintf(why, cap, "the cluster map has no targets");
		goto done;
	}
	snprintf(f.path, sizeof(f.path), "/v1/jobs%s%s%s", id[0] ? "/" : "", id,
		 del && id[0] && dsort_running(px, id) ? "?outputs=remove" : "");
	if (fanout(px, &f) != 0) {
		snprintf(why, cap, "out of memory");
		goto done;
	}
	for (int i = 0; i < smap->n_targets; i++) {
		if (f.status[i] == 200 || f.status[i] == 404)
			json_object_set_new(answered, smap->targets[i].id, json_true());
		else if (f.status[i] == 0 && !del)
			continue; /* not answering: its part is missing (see job_missing) */
		if (f.status[i] == 0 || (f.status[i] != 200 && f.status[i] != 404)) {
			*status = 502;
			snprintf(why, cap, "target %s: %s", smap->targets[i].id,
				 f.status[i] == 0 ? f.err[i] : "job status failed");
			goto done;
		}
	}
	if (id[0]) { /* one job: fold the targets' parts */
		for (int i = 0; i < smap->n_targets; i++)
			if (f.status[i] == 200)
				*out = job_fold(*out, f.resp[i]);
		if (*out == NULL) {
			*status = 404;
			snprintf(why, cap, "no job %s", id);
			goto done;
		}
		job_finish_doc(*out, answered, px->cfg.job_missing_grace_s);
		rc = 0;
		goto done;
	}
	json_t *byid = json_object(); /* all jobs: fold by id */
	for (int i = 0; i < smap->n_targets; i++) {
		for (size_t k = 0; k < json_array_size(f.resp[i]); k++) {
			json_t *part = json_array_get(f.resp[i], k);
			const char *pid = json_string_value(json_object_get(part, "id"));
			if (pid == NULL)
				continue;
			json_t *agg = json_object_get(byid, pid);
			json_t *n = job_fold(agg != NULL ? json_incref(agg) : NULL, part);
			if (n != NULL)
				json_object_set_new(byid, pid, n);
		}
	}
	*out = json_array();
	const char *key;
	json_t *val;
	json_object_foreach(byid, key, val) {
		job_finish_doc(val, answered, px->cfg.job_missing_grace_s);
		json_array_append(*out, val);
	}
	json_decref(byid);
	rc = 0;
done:
	json_decref(answered);
	fanout_free(&f);
	ft_smap_put(smap);
	return rc;
}

static void query_work(ft_req_t *r, void *arg)
{
	query_t *q = arg;
	json_t *out;
	int status;
	char why[512];

	if (px_jobs_query(q->px, q->id, q->del, &out, &status, why, sizeof(why)) != 0)
		ft_resp_error(r, status, "%s", why);
	else
		ft_resp_json(r, 200, out);
}

bool px_jobs_id_chars_ok(const char *id)
{
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

void px_jobs_route(px_t *px, ft_req_t *r, const char *path, size_t len)
{
	ft_method_t m = ft_req_method(r);
	size_t base = strlen("/v1/jobs");
	query_t *q;

	if (len > base + 1 + 63) {
		ft_resp_error(r, 400, "job id too long");
		return;
	}
	q = ft_req_alloc(r, sizeof(*q));
	memset(q, 0, sizeof(*q));
	q->px = px;
	if (len > base + 1)
		memcpy(q->id, path + base + 1, len - base - 1);
	if (len > base + 1 && strlen(q->id) != len - base - 1) { /* "%00": the id would end there */
		ft_resp_error(r, 400, "bad job id: contains a NUL byte");
		return;
	}
	if (!px_jobs_id_chars_ok(q->id)) {
		ft_resp_error(r, 400, "bad job id \"%s\"", q->id);
		return;
	}
	if (m == FT_HTTP_DELETE && q->id[0]) {
		q->del = true;
	} else if (m == FT_HTTP_DELETE) {
		px_jobs_stop_route(px, r); /* every job of a kind */
		return;
	} else if (m != FT_HTTP_GET) {
		ft_resp_header(r, "Allow", "GET, DELETE");
		ft_resp_error(r, 405, "method %s not allowed on %.*s", ft_req_method_name(r), (int)len, path);
		return;
	}
	ft_req_defer(r, query_work, q);
}
