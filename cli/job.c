/* SPDX-License-Identifier: Apache-2.0 */
/* ft job: start prefetch|evict|copy|transform|download|dsort|archive, ls, show, wait (progress), stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ft.h"

#define WAIT_INTERVAL_MS 500

/* "a,b,c" into a new JSON array of strings. */
static json_t *comma_list(const char *s)
{
	json_t *a = json_array();

	while (s != NULL && *s != '\0') {
		const char *comma = strchr(s, ',');
		size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
		if (n > 0)
			json_array_append_new(a, json_stringn(s, n));
		s = comma != NULL ? comma + 1 : NULL;
	}
	return a;
}

/* The names of a listrange job (--objnames, --template or --prefix) into value; 0, or an exit code. */
static int names_value(ft_cli_t *c, json_t *value, bool optional)
{
	const char *o = cli_opt(c, "objnames"), *t = cli_opt(c, "template"), *p = cli_opt(c, "prefix");

	if ((o != NULL) + (t != NULL) + (p != NULL) > 1)
		return cli_fail(FT_EXIT_USAGE, "give one of --objnames, --template and --prefix");
	if (o != NULL)
		json_object_set_new(value, "objnames", comma_list(o));
	else if (t != NULL)
		json_object_set_new(value, "template", json_string(t));
	else if (p != NULL)
		json_object_set_new(value, "prefix", json_string(p));
	else if (!optional)
		return cli_fail(FT_EXIT_USAGE,
				"name the objects: --objnames a,b | --template 'x-{000..099}' | --prefix P");
	return FT_EXIT_OK;
}

/* Job id started: printed, or with --wait followed to its end. */
static int started(ft_cli_t *c, const char *id)
{
	int rc;

	if (!cli_flag(c, "wait")) {
		if (c->json)
			printf("{\"job_id\": \"%s\"}\n", id);
		else
			printf("%s\n", id);
		return FT_EXIT_OK;
	}
	if (!c->json)
		printf("job %s\n", id);
	json_t *final = NULL;
	rc = cli_job_wait(c, id, &final);
	if (c->json)
		cli_print_json(final);
	json_decref(final);
	return rc;
}

/*
 * Sends msg (taken) with method to path, whose answer names a job: {"job_id"} (text_id false) or
 * the id as text (AIStore's PUT /v1/cluster); prints the id (or waits).
 */
static int call_job(ft_cli_t *c, const char *method, const char *path, json_t *msg, const char *what, bool text_id)
{
	char id[128] = "";
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (cli_call(method, path, msg, &r) != 0 || r.status != 200) {
		rc = cli_resp_fail(&r, what);
	} else if (text_id) {
		snprintf(id, sizeof(id), "%.*s", (int)(r.body != NULL ? strcspn(r.body, "\r\n") : 0),
			 r.body != NULL ? r.body : "");
	} else {
		json_t *ans = cli_resp_json(&r);
		const char *v = json_string_value(json_object_get(ans, "job_id"));
		snprintf(id, sizeof(id), "%s", v != NULL ? v : "");
		json_decref(ans);
	}
	cli_resp_free(&r);
	json_decref(msg);
	if (rc != FT_EXIT_OK)
		return rc;
	if (id[0] == '\0')
		return cli_fail(FT_EXIT_FAIL, "%s: the answer names no job", what);
	return started(c, id);
}

/* POSTs {"action", "value"} to bucket b; prints the job id (or waits). */
static int post_job(ft_cli_t *c, const cli_bucket_t *b, const char *action, json_t *value)
{
	char path[600];

	snprintf(path, sizeof(path), "/v1/buckets/%s?provider=%s", b->name, b->provider);
	return call_job(c, "POST", path, json_pack("{s:s, s:o}", "action", action, "value", value), action, false);
}

/* ft job start rebalance: PUT /v1/cluster {"action":"start"} (role admin). */
static int start_rebalance(ft_cli_t *c)
{
	if (c->n_args != 3)
		return cli_fail(FT_EXIT_USAGE, "job start rebalance takes no arguments");
	return call_job(c, "PUT", "/v1/cluster",
			json_pack("{s:s, s:{s:s}}", "action", "start", "value", "kind", "rebalance"), "rebalance",
			true);
}

/* ft job start dsort SRC DST ...: the dsort value (taken) from the options (docs/jobs.md "dsort"). */
static int start_dsort(ft_cli_t *c, json_t *value)
{
	const char *t = cli_opt(c, "template"), *p = cli_opt(c, "prefix"), *out = cli_opt(c, "output-template");
	const char *order = cli_opt(c, "order"), *file = cli_opt(c, "order-file");
	long size = cli_opt_int(c, "shard-size", -1, 1, 1L << 40), seed = cli_opt_int(c, "seed", 0, 0, 1L << 62);
	cli_bucket_t b, to;

	if (c->n_args != 5 || cli_bucket_parse(c->args[3], &b) != 0 || cli_bucket_parse(c->args[4], &to) != 0) {
		json_decref(value);
		return cli_fail(FT_EXIT_USAGE, "job start dsort needs SRC and DST buckets (ft job start --help)");
	}
	if ((t != NULL) == (p != NULL) || out == NULL || size < 1 || seed < 0) {
		json_decref(value);
		return cli_fail(FT_EXIT_USAGE,
				"dsort needs --template or --prefix, --output-template and --shard-size");
	}
	json_object_set_new(value, t != NULL ? "template" : "prefix", json_string(t != NULL ? t : p));
	json_object_set_new(value, "to", json_pack("{s:s}", "name", to.name));
	json_object_set_new(value, "output_template", json_string(out));
	json_object_set_new(value, "shard_size", json_integer(size));
	if (order != NULL)
		json_object_set_new(value, "order", json_string(order));
	if (cli_opt(c, "seed") != NULL)
		json_object_set_new(value, "seed", json_integer(seed));
	if (file != NULL)
		json_object_set_new(value, "order_file", json_string(file));
	return post_job(c, &b, "dsort", value);
}

/* archive BUCKET ARCHNAME: the names and options into value; 0, or an exit code. */
static int archive_value(ft_cli_t *c, json_t *value)
{
	const char *to = cli_opt(c, "to"), *fmt = cli_opt(c, "format");
	long size = cli_opt_int(c, "shard-size", 0, 1, 1L << 40);
	int rc = names_value(c, value, false);

	if (rc != FT_EXIT_OK)
		return rc;
	if (size < 0)
		return FT_EXIT_USAGE;
	json_object_set_new(value, "archname", json_string(c->args[4]));
	if (to != NULL)
		json_object_set_new(value, "to_bucket", json_string(to));
	if (fmt != NULL)
		json_object_set_new(value, "format", json_string(fmt));
	if (size > 0)
		json_object_set_new(value, "shard_size", json_integer(size));
	if (cli_flag(c, "include-src-bucket"))
		json_object_set_new(value, "include_src_bucket_name", json_true());
	if (cli_flag(c, "continue-on-error"))
		json_object_set_new(value, "continue_on_error", json_true());
	return FT_EXIT_OK;
}

/* --ext "jpg=png,cls=label" into value's "ext" map (the cluster checks the extensions); FT_EXIT_OK or a usage error. */
static int ext_value(const ft_cli_t *c, json_t *value)
{
	const char *s = cli_opt(c, "ext");
	json_t *ext;

	if (s == NULL)
		return FT_EXIT_OK;
	ext = json_object();
	while (*s != '\0') {
		size_t n = strcspn(s, ","), k = strcspn(s, "=");
		if (k >= n || k == 0 || k + 1 == n) {
			json_decref(ext);
			return cli_fail(FT_EXIT_USAGE,
					"--ext takes FROM=TO pairs separated by commas, e.g. jpg=png,cls=txt");
		}
		char *from = strndup(s, k), *to = strndup(s + k + 1, n - k - 1);
		json_object_set_new(ext, from, json_string(to));
		free(from);
		free(to);
		s += n + (s[n] == ',');
	}
	json_object_set_new(value, "ext", ext);
	return FT_EXIT_OK;
}

/* The value of job start copy|transform SRC DST into value, the source into *b; FT_EXIT_OK or a usage error. */
static int copy_value(ft_cli_t *c, const char *kind, cli_bucket_t *b, json_t *value)
{
	static const char *const flags[] = {"dry-run", "latest", "sync", "force"};
	const char *etl = cli_opt(c, "etl");
	long timeout = cli_opt_int(c, "etl-timeout", 0, 1, 3600000);
	cli_bucket_t to;
	int rc;

	if (c->n_args != 5 || cli_bucket_parse(c->args[3], b) != 0 || cli_bucket_parse(c->args[4], &to) != 0)
		return cli_fail(FT_EXIT_USAGE, "job start %s needs SRC and DST buckets (ft job start --help)", kind);
	if (etl == NULL && strcmp(kind, "transform") == 0)
		return cli_fail(FT_EXIT_USAGE, "job start transform needs --etl NAME (ft etl ls)");
	if (timeout < 0)
		return FT_EXIT_USAGE;
	if ((rc = names_value(c, value, true)) != FT_EXIT_OK || (rc = ext_value(c, value)) != FT_EXIT_OK)
		return rc;
	if (timeout > 0)
		json_object_set_new(value, "etl_timeout_ms", json_integer(timeout));
	if (etl != NULL)
		json_object_set_new(value, "etl", json_string(etl));
	if (cli_opt(c, "prepend") != NULL)
		json_object_set_new(value, "prepend", json_string(cli_opt(c, "prepend")));
	for (int i = 0; i < 4; i++)
		if (cli_flag(c, flags[i]))
			json_object_set_new(value, strcmp(flags[i], "dry-run") == 0 ? "dry_run" : flags[i],
					    json_true());
	json_object_set_new(value, "to", json_pack("{s:s, s:s}", "name", to.name, "provider", to.provider));
	return FT_EXIT_OK;
}

static int start(ft_cli_t *c)
{
	const char *kind = c->n_args > 2 ? c->args[2] : "";
	cli_bucket_t b;
	json_t *value = json_object();
	int rc;

	if (strcmp(kind, "prefetch") == 0 || strcmp(kind, "evict") == 0) {
		if (c->n_args != 4 || cli_bucket_parse(c->args[3], &b) != 0)
			rc = cli_fail(FT_EXIT_USAGE, "job start %s needs one BUCKET (ft job start --help)", kind);
		else if ((rc = names_value(c, value, false)) == FT_EXIT_OK)
			return post_job(c, &b, strcmp(kind, "prefetch") == 0 ? "prefetch-listrange" : "evict-listrange",
					value);
	} else if (strcmp(kind, "copy") == 0 || strcmp(kind, "transform") == 0) {
		if ((rc = copy_value(c, kind, &b, value)) == FT_EXIT_OK) {
			bool listrange = json_object_get(value, "objnames") || json_object_get(value, "template");
			return post_job(c, &b, listrange ? "copy-listrange" : "copy-bck", value);
		}
	} else if (strcmp(kind, "download") == 0) {
		const char *t = cli_opt(c, "template"), *l = cli_opt(c, "url-list");
		if (c->n_args < 4 || cli_bucket_parse(c->args[3], &b) != 0)
			rc = cli_fail(FT_EXIT_USAGE, "job start download needs a BUCKET (ft job start --help)");
		else if ((c->n_args > 4) + (t != NULL) + (l != NULL) != 1)
			rc = cli_fail(FT_EXIT_USAGE, "download takes URLs, --template or --url-list (one of them)");
		else {
			if (t != NULL)
				json_object_set_new(value, "template", json_string(t));
			else if (l != NULL)
				json_object_set_new(value, "url_list_object", json_string(l));
			else {
				json_t *urls = json_array();
				for (int i = 4; i < c->n_args; i++)
					json_array_append_new(urls, json_string(c->args[i]));
				json_object_set_new(value, "urls", urls);
			}
			return post_job(c, &b, "download", value);
		}
	} else if (strcmp(kind, "dsort") == 0) {
		return start_dsort(c, value);
	} else if (strcmp(kind, "rebalance") == 0) {
		json_decref(value);
		return start_rebalance(c);
	} else if (strcmp(kind, "archive") == 0) {
		if (c->n_args != 5 || cli_bucket_parse(c->args[3], &b) != 0)
			rc = cli_fail(FT_EXIT_USAGE,
				      "job start archive needs BUCKET and ARCHNAME (ft job start --help)");
		else if ((rc = archive_value(c, value)) == FT_EXIT_OK)
			return post_job(c, &b, "archive", value);
	} else {
		rc = cli_fail(FT_EXIT_USAGE,
			      "job start needs prefetch, evict, copy, transform, download, dsort, archive or rebalance "
			      "(ft job start --help)");
	}
	json_decref(value);
	return rc;
}

/* GET /v1/jobs[/id]: the JSON (new reference) or NULL with *rc. */
static json_t *get_jobs(const char *id, int *rc)
{
	char path[256];
	cli_resp_t r;
	json_t *j = NULL;

	snprintf(path, sizeof(path), "/v1/jobs%s%s", id ? "/" : "", id ? id : "");
	if (cli_call("GET", path, NULL, &r) != 0 || r.status != 200)
		*rc = cli_resp_fail(&r, id ? id : "listing jobs");
	else
		j = cli_resp_json(&r);
	cli_resp_free(&r);
	return j;
}

static const char *bucket_of(const json_t *job, char *buf, size_t cap)
{
	const char *p = json_string_value(json_object_get(job, "provider"));
	const char *b = json_string_value(json_object_get(job, "bucket"));

	snprintf(buf, cap, "%s%s%s", p && *p ? p : "", p && *p ? "://" : "", b && *b ? b : "*");
	return buf;
}

static int ls(ft_cli_t *c)
{
	int rc = FT_EXIT_OK;
	json_t *list = get_jobs(NULL, &rc);

	if (list == NULL)
		return rc;
	if (c->json) {
		cli_print_json(list);
	} else {
		static const char *const head[] = {"ID", "KIND", "BUCKET", "STATE", "OBJECTS", "BYTES", "ERRORS"};
		cli_table_t *t = cli_table_new(7, head);
		size_t i;
		json_t *j;
		json_array_foreach(list, i, j) {
			char bk[600], ob[64], by[32], er[32];
			snprintf(ob, sizeof(ob), "%lld/%lld",
				 (long long)json_integer_value(json_object_get(j, "objects")),
				 (long long)json_integer_value(json_object_get(j, "total")));
			snprintf(er, sizeof(er), "%lld", (long long)json_integer_value(json_object_get(j, "errors")));
			const char *row[] = {json_string_value(json_object_get(j, "id")),
					     json_string_value(json_object_get(j, "kind")),
					     bucket_of(j, bk, sizeof(bk)),
					     json_string_value(json_object_get(j, "state")),
					     ob,
					     cli_size(json_integer_value(json_object_get(j, "bytes")), by, sizeof(by)),
					     er};
			cli_table_row(t, row);
		}
		cli_table_print(t, stdout);
	}
	json_decref(list);
	return rc;
}

static int show(ft_cli_t *c, const char *id)
{
	int rc = FT_EXIT_OK;
	json_t *j = get_jobs(id, &rc);
	char bk[600], sz[32], rt[32], eta[32];

	if (j == NULL)
		return rc;
	if (c->json) {
		cli_print_json(j);
		json_decref(j);
		return rc;
	}
	printf("ID:       %s\nKIND:     %s\nBUCKET:   %s\nSTATE:    %s\n", json_string_value(json_object_get(j, "id")),
	       json_string_value(json_object_get(j, "kind")), bucket_of(j, bk, sizeof(bk)),
	       json_string_value(json_object_get(j, "state")));
	if (json_is_object(json_object_get(j, "to")))
		printf("TO:       %s://%s\n", json_string_value(json_object_get(json_object_get(j, "to"), "provider")),
		       json_string_value(json_object_get(json_object_get(j, "to"), "bucket")));
	if (json_is_string(json_object_get(json_object_get(j, "to"), "prepend")))
		printf("PREPEND:  %s\n", json_string_value(json_object_get(json_object_get(j, "to"), "prepend")));
	const json_t *ext = json_object_get(json_object_get(j, "to"), "ext");
	if (json_object_size(ext) > 0) {
		const char *k;
		json_t *v;
		const char *sep = "";
		printf("EXT:      ");
		json_object_foreach((json_t *)ext, k, v) {
			printf("%s%s->%s", sep, k, json_string_value(v));
			sep = ", ";
		}
		printf("\n");
	}
	printf("OBJECTS:  %lld of %lld (%lld skipped, %lld errors)\nBYTES:    %s\nRATE:     %s/s\nETA:      %s\n",
	       (long long)json_integer_value(json_object_get(j, "objects")),
	       (long long)json_integer_value(json_object_get(j, "total")),
	       (long long)json_integer_value(json_object_get(j, "skipped")),
	       (long long)json_integer_value(json_object_get(j, "errors")),
	       cli_size(json_integer_value(json_object_get(j, "bytes")), sz, sizeof(sz)),
	       cli_size(json_integer_value(json_object_get(j, "rate")), rt, sizeof(rt)),
	       cli_duration(json_integer_value(json_object_get(j, "eta_s")), eta, sizeof(eta)));
	static const char *const head[] = {"TARGET", "STATE", "OBJECTS", "BYTES", "ERRORS", "RATE"};
	cli_table_t *t = cli_table_new(6, head);
	size_t i;
	json_t *p, *s;
	json_array_foreach(json_object_get(j, "targets"), i, p) {
		char ob[64], er[32], rs[40];
		snprintf(rs, sizeof(rs), "%s/s",
			 cli_size(json_integer_value(json_object_get(p, "rate")), rt, sizeof(rt)));
		snprintf(ob, sizeof(ob), "%lld/%lld", (long long)json_integer_value(json_object_get(p, "objects")),
			 (long long)json_integer_value(json_object_get(p, "total")));
		snprintf(er, sizeof(er), "%lld", (long long)json_integer_value(json_object_get(p, "errors")));
		const char *row[] = {json_string_value(json_object_get(p, "node")),
				     json_string_value(json_object_get(p, "state")),
				     ob,
				     cli_size(json_integer_value(json_object_get(p, "bytes")), sz, sizeof(sz)),
				     er,
				     rs};
		cli_table_row(t, row);
	}
	printf("\n");
	cli_table_print(t, stdout);
	if (json_array_size(json_object_get(j, "error_samples")) > 0) {
		printf("\nERRORS:\n");
		json_array_foreach(json_object_get(j, "error_samples"), i, s)
			printf("  %s\n", json_string_value(s));
	}
	json_decref(j);
	return rc;
}

int cli_job_wait(ft_cli_t *c, const char *id, json_t **out)
{
	long interval = cli_opt_int(c, "interval", WAIT_INTERVAL_MS, 50, 60000);
	cli_progress_t pg;
	int rc = FT_EXIT_OK;
	char label[96];

	if (interval < 0)
		return FT_EXIT_USAGE;
	cli_progress_init(&pg, c);
	for (;;) {
		json_t *j = get_jobs(id, &rc);
		if (j == NULL)
			return rc;
		const char *state = json_string_value(json_object_get(j, "state"));
		bool running = state != NULL && strcmp(state, "running") == 0;
		snprintf(label, sizeof(label), "%s %s", json_string_value(json_object_get(j, "kind")),
			 running ? "running"
			 : state ? state
				 : "?");
		int64_t done = json_integer_value(json_object_get(j, "objects")) +
			       json_integer_value(json_object_get(j, "skipped")) +
			       json_integer_value(json_object_get(j, "errors"));
		cli_progress_show(
			&pg, label, done, json_integer_value(json_object_get(j, "total")),
			json_integer_value(json_object_get(j, "bytes")), json_integer_value(json_object_get(j, "rate")),
			json_object_get(j, "eta_s") ? json_integer_value(json_object_get(j, "eta_s")) : -1, !running);
		if (!running) {
			json_int_t errors = json_integer_value(json_object_get(j, "errors"));
			rc = strcmp(state, "finished") == 0 && errors == 0 ? FT_EXIT_OK : FT_EXIT_FAIL;
			if (!c->json)
				printf("%s: %s, %lld objects, %lld bytes, %lld errors\n", id, state,
				       (long long)json_integer_value(json_object_get(j, "objects")),
				       (long long)json_integer_value(json_object_get(j, "bytes")), (long long)errors);
			if (out != NULL)
				*out = j;
			else
				json_decref(j);
			return rc;
		}
		json_decref(j);
		usleep((useconds_t)interval * 1000);
	}
}

/*
 * ft job stop --kind KIND [BUCKET] | --all [BUCKET]: every running job of KIND (kind NULL: of every kind; of BUCKET)
 * through DELETE /v1/jobs?kind=K or ?all=true.
 */
static int stop_kind(ft_cli_t *c, const char *kind)
{
	char path[512];
	cli_resp_t r;
	cli_bucket_t b;
	json_t *out = NULL;
	int rc = FT_EXIT_OK;

	if (c->n_args > 3)
		return cli_fail(FT_EXIT_USAGE, "job stop --kind KIND or --all takes at most one BUCKET");
	if (c->n_args == 3 && cli_bucket_parse(c->args[2], &b) != 0)
		return FT_EXIT_USAGE;
	char k[192];
	cli_encode(kind != NULL ? kind : "", k, sizeof(k), false);
	int n = kind != NULL ? snprintf(path, sizeof(path), "/v1/jobs?kind=%s", k)
			     : snprintf(path, sizeof(path), "/v1/jobs?all=true");
	if (c->n_args == 3)
		snprintf(path + n, sizeof(path) - (size_t)n, "&provider=%s&bucket=%s", b.provider, b.name);
	if (cli_call("DELETE", path, NULL, &r) != 0 || r.status != 200 || (out = cli_resp_json(&r)) == NULL) {
		rc = cli_resp_fail(&r, kind != NULL ? kind : "jobs");
	} else if (c->json) {
		cli_print_json(out);
	} else {
		const json_t *ids = json_object_get(out, "stopped");
		for (size_t i = 0; i < json_array_size(ids); i++)
			printf("stopped %s\n", json_string_value(json_array_get(ids, i)));
		if (json_array_size(ids) == 0)
			printf("no running %s%sjob\n", kind != NULL ? kind : "", kind != NULL ? " " : "");
	}
	json_decref(out);
	cli_resp_free(&r);
	return rc;
}

int cli_job(ft_cli_t *c)
{
	const char *verb = c->n_args > 1 ? c->args[1] : "";

	if (strcmp(verb, "start") == 0)
		return start(c);
	if (strcmp(verb, "ls") == 0)
		return ls(c);
	if (strcmp(verb, "stop") == 0 && cli_opt(c, "kind") != NULL)
		return stop_kind(c, cli_opt(c, "kind"));
	if (strcmp(verb, "stop") == 0 && cli_flag(c, "all"))
		return stop_kind(c, NULL);
	if (strcmp(verb, "show") != 0 && strcmp(verb, "wait") != 0 && strcmp(verb, "stop") != 0)
		return cli_fail(FT_EXIT_USAGE, "job needs start, ls, show, wait or stop (ft job --help)");
	if (c->n_args != 3)
		return cli_fail(FT_EXIT_USAGE, "job %s needs one job ID", verb);
	if (strcmp(verb, "show") == 0)
		return show(c, c->args[2]);
	if (strcmp(verb, "wait") == 0) {
		json_t *final = NULL;
		int rc = cli_job_wait(c, c->args[2], &final);
		if (c->json && final != NULL)
			cli_print_json(final);
		json_decref(final);
		return rc;
	}
	char path[256];
	cli_resp_t r;
	int rc = FT_EXIT_OK;
	snprintf(path, sizeof(path), "/v1/jobs/%s", c->args[2]);
	if (cli_call("DELETE", path, NULL, &r) != 0 || r.status != 200)
		rc = cli_resp_fail(&r, c->args[2]);
	else if (c->json)
		printf("{\"stopped\": \"%s\"}\n", c->args[2]);
	else
		printf("stopped %s\n", c->args[2]);
	cli_resp_free(&r);
	return rc;
}
