/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's job queries at the proxy (/v1/cluster?what=status|qryxstats|status_all|running_all, stop, start): over px_jobs_query. */
#include "proxy.h"

#include <stdio.h>
#include <string.h>

#include "base/names.h"
#include "http/util.h"

/*
 * DESIGN
 * AIStore asks about jobs with GET /v1/cluster?what=... and a body naming the job (its xaction
 * args {"ID","Kind",...} or a query {"kind","node","show_active"}), and aborts them with
 * PUT /v1/cluster {"action":"stop","value":{"ID"}}, or every running job of a kind (of every kind
 * when it is empty too) with {"kind"[,"bck":{"name","provider"}]} (px_jobs_stop_kind; answered
 * with the JSON array of the ids stopped, which AIStore's clients, expecting no body, ignore). Each of the others is one
 * px_jobs_query (the targets' parts of one job, or every job, folded) re-encoded: JobStatus {uuid, kind, err,
 * end_time, aborted}, or the per-node snapshots {node: [{id, kind, start-time, end-time, bck,
 * stats, aborted, is_idle, abort-err}]}. Job kinds are named as AIStore names them.
 * PUT /v1/cluster {"action":"start","value":{"kind":"rebalance"}} (`ais start rebalance`) has every
 * target start a rebalance job under one new id (their control port's POST /v1/rebalance), answered
 * as text like AIStore's; the other known kinds start from their own requests (bucket actions, dsort,
 * download) and are 501 here, as are AIStore's cluster actions not built; an unknown word is 400.
 */

/* FastTier's job kinds under AIStore's names (the rest are the same word). */
static const struct {
	const char *ft, *ais;
} kinds[] = {
	{"prefetch", "prefetch-listrange"}, {"evict", "evict-listrange"},   {"evict-bucket", "evict-remote-bck"},
	{"mirror", "make-n-copies"},        {"delete", "delete-listrange"}, {"copy", "copy-bck"},
};

static const char *ais_kind(const char *ft)
{
	for (size_t i = 0; ft != NULL && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(ft, kinds[i].ft) == 0)
			return kinds[i].ais;
	return ft != NULL ? ft : "";
}

/* FastTier's kind of AIStore's kind ais, NULL when no job of FastTier's has that name. */
static const char *ft_kind(const char *ais)
{
	const char *k;

	for (size_t i = 0; (k = px_jobs_kind_at(i)) != NULL; i++)
		if (strcmp(ais_kind(k), ais) == 0)
			return k;
	return NULL;
}

/* AIStore's names of the known kinds as "a, b, c" into buf. */
static const char *ais_kinds_text(char *buf, size_t cap)
{
	const char *k;
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; (k = px_jobs_kind_at(i)) != NULL && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", ais_kind(k));
	return buf;
}

typedef enum { Q_STATUS, Q_SNAPS, Q_STATUS_ALL, Q_RUNNING, Q_STOP } query_kind_t;

typedef struct {
	px_t *px;
	query_kind_t kind;
	char id[64];
	char job_kind[64]; /* AIStore's kind to filter on, "" for any */
	bool only_running;
	/* stop by kind: FastTier's kind (NULL: every kind), and the bucket ("": any) */
	const char *stop_kind;
	const char *bck_provider;
	char bck_name[FT_BUCKET_NAME_MAX + 1];
} query_t;

static const char *state(const json_t *job)
{
	const char *s = json_string_value(json_object_get(job, "state"));

	return s != NULL ? s : "";
}

/* The job's error as AIStore reports it: set when it failed (the first sample says why). */
static const char *job_err(const json_t *job)
{
	const char *sample = json_string_value(json_array_get(json_object_get(job, "error_samples"), 0));

	if (strcmp(state(job), "failed") != 0)
		return "";
	return sample != NULL ? sample : "failed";
}

static bool kind_matches(const query_t *q, const json_t *job)
{
	return q->job_kind[0] == '\0' ||
	       strcmp(q->job_kind, ais_kind(json_string_value(json_object_get(job, "kind")))) == 0;
}

/* JobStatus of a folded job document. */
static json_t *job_status(const json_t *job)
{
	return json_pack("{s:O, s:s, s:s, s:I, s:b}", "uuid", json_object_get(job, "id"), "kind",
			 ais_kind(json_string_value(json_object_get(job, "kind"))), "err", job_err(job), "end_time",
			 json_integer_value(json_object_get(job, "end")), "aborted",
			 strcmp(state(job), "aborted") == 0);
}

static json_t *str_int(json_int_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_string(s);
}

/* One target's snapshot of job (its part: node, state, objects, bytes). */
static json_t *job_snap(const json_t *job, const json_t *part)
{
	char start[40], end[40];
	const char *st = json_string_value(json_object_get(part, "state"));
	bool running = st != NULL && strcmp(st, "running") == 0;

	px_ais_time(json_integer_value(json_object_get(job, "start")), start, sizeof(start));
	px_ais_time(running ? 0 : json_integer_value(json_object_get(job, "end")), end, sizeof(end));
	if (!running && strcmp(end, "0001-01-01T00:00:00Z") == 0) /* ended, but no end time: its start */
		snprintf(end, sizeof(end), "%s", start);
	return json_pack("{s:O, s:s, s:s, s:s, s:{s:O, s:s}, s:{s:o, s:o}, s:b, s:b, s:s, s:s, s:s}", "id",
			 json_object_get(job, "id"), "kind", ais_kind(json_string_value(json_object_get(job, "kind"))),
			 "start-time", start, "end-time", end, "bck", "name", json_object_get(job, "bucket"),
			 "provider", json_string_value(json_object_get(job, "provider")) ?: "ais", "stats", "loc-objs",
			 str_int(json_integer_value(json_object_get(part, "objects"))), "loc-bytes",
			 str_int(json_integer_value(json_object_get(part, "bytes"))), "aborted",
			 st != NULL && strcmp(st, "aborted") == 0, "is_idle", !running, "abort-err",
			 st != NULL && strcmp(st, "failed") == 0 ? job_err(job) : "", "err", "", "glob.id", "0");
}

/* Adds job's per-target snapshots to snaps {node: [...]}. */
static void add_snaps(json_t *snaps, const json_t *job)
{
	const json_t *parts = json_object_get(job, "targets");

	for (size_t i = 0; i < json_array_size(parts); i++) {
		const json_t *part = json_array_get(parts, i);
		const char *node = json_string_value(json_object_get(part, "node"));
		if (node == NULL)
			continue;
		json_t *list = json_object_get(snaps, node);
		if (list == NULL) {
			list = json_array();
			json_object_set_new(snaps, node, list);
		}
		json_array_append_new(list, job_snap(job, part));
	}
}

/* The answer for every job the targets know (filtered by kind, running). */
static json_t *answer_all(const query_t *q, const json_t *jobs)
{
	json_t *out = q->kind == Q_SNAPS ? json_object() : json_array();

	for (size_t i = 0; i < json_array_size(jobs); i++) {
		const json_t *job = json_array_get(jobs, i);
		bool running = strcmp(state(job), "running") == 0;
		if (!kind_matches(q, job) || (q->only_running && !running))
			continue;
		if (q->kind == Q_SNAPS)
			add_snaps(out, job);
		else if (q->kind == Q_RUNNING) {
			char s[160];
			snprintf(s, sizeof(s), "%s[%s]", ais_kind(json_string_value(json_object_get(job, "kind"))),
				 json_string_value(json_object_get(job, "id")));
			json_array_append_new(out, json_string(s));
		} else {
			json_array_append_new(out, job_status(job));
		}
	}
	return out;
}

static void query_work(ft_req_t *r, void *arg)
{
	query_t *q = arg;
	json_t *jobs = NULL, *out;
	int status;
	char why[512];
	bool one = q->id[0] != '\0';

	if (q->kind == Q_STOP && !one) {
		if (px_jobs_stop_kind(q->px, q->stop_kind, q->bck_provider, q->bck_name, &out, &status, why,
				      sizeof(why)) != 0)
			ft_resp_error(r, status, "%s", why);
		else
			ft_resp_json(r, 200, out);
		return;
	}
	if (px_jobs_query(q->px, q->id, q->kind == Q_STOP, &jobs, &status, why, sizeof(why)) != 0) {
		if (status == 404)
			ft_resp_error(r, 404, "job \"%s\" not found", q->id);
		else
			ft_resp_error(r, status, "%s", why);
		return;
	}
	if (q->kind == Q_STOP) {
		json_decref(jobs);
		ft_resp_bytes(r, 200, NULL, NULL, 0);
		return;
	}
	if (!one) {
		out = answer_all(q, jobs);
	} else if (q->kind == Q_STATUS) {
		out = job_status(jobs);
	} else if (q->kind == Q_SNAPS) {
		out = json_object();
		add_snaps(out, jobs);
	} else {
		json_t *arr = json_pack("[O]", jobs);
		out = answer_all(q, arr);
		json_decref(arr);
	}
	json_decref(jobs);
	ft_resp_json(r, 200, out);
}

/* The first string of keys found in o ("" when none). */
static const char *field(const json_t *o, const char *k1, const char *k2)
{
	const char *v = json_string_value(json_object_get(o, k1));

	if (v == NULL)
		v = json_string_value(json_object_get(o, k2));
	return v != NULL ? v : "";
}

/*
 * Stop without a job id: every running job of kind (AIStore's name; "": of every kind, `ais job stop
 * --all`), of the bucket args name ("bck" or the Python SDK's "Bck": {"name","provider"}; absent or
 * null: any). 0, or -1 after responding 400 (an unknown kind, a bad bucket).
 */
static int stop_decode(ft_req_t *r, query_t *q, const json_t *args, const char *kind)
{
	const json_t *bck = json_object_get(args, "bck");
	const char *w = NULL;
	char known[320];

	if (kind[0] == '\0') {
		q->stop_kind = NULL;
	} else if ((q->stop_kind = ft_kind(kind)) == NULL) {
		ft_resp_error(r, 400, "unknown job kind \"%s\" (known: %s)", kind,
			      ais_kinds_text(known, sizeof(known)));
		return -1;
	}
	if (bck == NULL)
		bck = json_object_get(args, "Bck");
	if (bck != NULL && !json_is_null(bck) && !json_is_object(bck)) {
		ft_resp_error(r, 400, "\"bck\" must be a bucket {\"name\", \"provider\"}");
		return -1;
	}
	const char *name = field(bck, "name", "Name"), *provider = field(bck, "provider", "Provider");
	if (name[0] != '\0' && ft_name_check_bucket(name, &w) != 0) {
		ft_resp_error(r, 400, "bad bucket name \"%s\": %s", name, w);
		return -1;
	}
	if ((q->bck_provider = px_jobs_provider(provider)) == NULL) {
		ft_resp_error(r, 400, "unknown provider \"%s\" (ais, aws, gcp, azure or ht)", provider);
		return -1;
	}
	snprintf(q->bck_name, sizeof(q->bck_name), "%s", name);
	return 0;
}

/* Whether word is in the NULL-terminated list. */
static bool listed(const char *const *list, const char *word)
{
	for (; word != NULL && *list != NULL; list++)
		if (strcmp(*list, word) == 0)
			return true;
	return false;
}

/* AIStore's job kinds that are no FastTier job: starting one is 501, an unknown word 400. */
static const char *const ais_only_kinds[] = {"lru",           "cleanup-store",  "move-bck",      "etl-bck",
					     "etl-listrange", "copy-listrange", "blob-download", "put-copies",
					     "promote",       "load-lom-cache", "election",      NULL};

/* PUT /v1/cluster {"action":"start","value":{"kind"}}: a rebalance job on every target (after responding). */
static void start_job(px_t *px, ft_req_t *r, const json_t *body)
{
	const json_t *args = json_object_get(body, "value");
	const char *kind = field(args, "Kind", "kind");
	char id[48], known[320];

	if (kind[0] == '\0') {
		ft_resp_error(r, 400, "PUT /v1/cluster start: the job kind (\"value\": {\"kind\"}) is missing");
		return;
	}
	if (ft_kind(kind) == NULL && !listed(ais_only_kinds, kind)) {
		ft_resp_error(r, 400, "PUT /v1/cluster start: unknown job kind \"%.64s\" (known: %s)", kind,
			      ais_kinds_text(known, sizeof(known)));
		return;
	}
	if (strcmp(kind, "rebalance") != 0) {
		ft_resp_error(r, 501,
			      "PUT /v1/cluster start: kind \"%.64s\" is not built: only \"rebalance\" starts here (the "
			      "other jobs start with their own requests: bucket actions, dsort, download)",
			      kind);
		return;
	}
	px_jobs_new_id(id, sizeof(id));
	json_t *msg = json_pack("{s:s, s:s, s:s, s:s, s:s}", "action", "start", "id", id, "kind", "rebalance",
				"provider", "", "bucket", "");
	if (msg == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	ft_info("rebalance %s requested on the public port from %s", id, ft_req_peer(r));
	px_jobs_submit_to(px, r, "/v1/rebalance", msg, NULL, true);
}

/* Decodes the body (xaction args or query) into q; 0, or -1 after responding 400. */
static int query_decode(ft_req_t *r, query_t *q, const json_t *body)
{
	const json_t *args = body;

	if (q->kind == Q_STOP) {
		/* AIStore's other PUT /v1/cluster actions: known, not built */
		static const char *const unbuilt[] = {"set-config",   "reset-config",  "rotate-logs",
						      "shutdown",     "shutdown-node", "reset-stats",
						      "clear-lcache", "reload-creds",  NULL};
		const char *action = json_string_value(json_object_get(body, "action"));
		if (action == NULL || strcmp(action, "stop") != 0) {
			if (listed(unbuilt, action))
				ft_resp_error(r, 501,
					      "PUT /v1/cluster: action \"%s\" is not built (start, stop and "
					      "the maintenance actions are)",
					      action);
			else
				ft_resp_error(r, 400,
					      "PUT /v1/cluster: %s action \"%.64s\" (start, stop, start-maintenance, "
					      "stop-maintenance, decommission, decommission-node)",
					      action != NULL ? "unknown" : "missing", action != NULL ? action : "");
			return -1;
		}
		args = json_object_get(body, "value");
	}
	const char *id = field(args, "ID", "id");
	const char *kind = field(args, "Kind", "kind");
	if (strlen(id) >= sizeof(q->id) || strlen(kind) >= sizeof(q->job_kind)) {
		ft_resp_error(r, 400, "job id or kind too long");
		return -1;
	}
	if (!px_jobs_id_chars_ok(id)) {
		ft_resp_error(r, 400, "bad job id \"%s\"", id);
		return -1;
	}
	if (q->kind == Q_STATUS && id[0] == '\0') {
		ft_resp_error(r, 400, "what=status needs a job id (\"ID\")");
		return -1;
	}
	if (q->kind == Q_STOP && id[0] == '\0' && stop_decode(r, q, args, kind) != 0)
		return -1;
	snprintf(q->id, sizeof(q->id), "%s", id);
	snprintf(q->job_kind, sizeof(q->job_kind), "%s", kind);
	q->only_running = q->kind == Q_RUNNING || json_is_true(json_object_get(args, "show_active"));
	return 0;
}

static void query_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	query_t *q = arg;
	json_error_t jerr;
	json_t *j = NULL;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	if (len > 0 && (j = json_loadb(body, len, 0, &jerr)) == NULL) {
		ft_resp_error(r, 400, "malformed JSON: %s", jerr.text);
		return;
	}
	/* PUT /v1/cluster: maintenance actions go to maint.c, the rest (job stop, start) stays here */
	const char *action = json_string_value(json_object_get(j, "action"));
	if (q->kind == Q_STOP && action != NULL && strcmp(action, "start") == 0)
		start_job(q->px, r, j);
	else if ((q->kind != Q_STOP || !px_maint_public_put(q->px, r, j, body, len)) && query_decode(r, q, j) == 0)
		ft_req_defer(r, query_work, q);
	json_decref(j);
}

bool px_ais_cluster(px_t *px, ft_req_t *r, const char *what)
{
	static const struct {
		const char *what;
		query_kind_t kind;
	} words[] = {
		{"status", Q_STATUS},
		{"qryxstats", Q_SNAPS},
		{"status_all", Q_STATUS_ALL},
		{"running_all", Q_RUNNING},
	};
	ft_method_t m = ft_req_method(r);
	query_t *q;
	int k = -1;

	if (m == FT_HTTP_PUT) {
		k = Q_STOP;
	} else {
		for (size_t i = 0; what != NULL && i < sizeof(words) / sizeof(words[0]); i++)
			if (strcmp(what, words[i].what) == 0)
				k = (int)words[i].kind;
		if (k < 0)
			return false;
		if (m != FT_HTTP_GET) {
			ft_resp_header(r, "Allow", "GET");
			ft_resp_error(r, 405, "method %s not allowed on /v1/cluster?what=%s (allowed: GET)",
				      ft_req_method_name(r), what);
			return true;
		}
	}
	q = ft_req_alloc(r, sizeof(*q));
	memset(q, 0, sizeof(*q));
	q->px = px;
	q->kind = (query_kind_t)k;
	if (ft_req_content_length(r) == 0)
		query_body(r, q, "", 0, 0);
	else
		ft_req_read_body_all(r, PX_BODY_MAX, query_body, q);
	return true;
}
