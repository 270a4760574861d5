/* SPDX-License-Identifier: Apache-2.0 */
/* ft bucket: ls, create, rm, props (--set k=v). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft.h"

/* Nanoseconds since the epoch as "2026-11-24 20:15:00". */
static const char *when(json_int_t ns, char *buf, size_t cap)
{
	time_t s = (time_t)(ns / 1000000000LL);
	struct tm tm;

	if (ns <= 0 || gmtime_r(&s, &tm) == NULL)
		snprintf(buf, cap, "-");
	else
		strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

/*
 * The provider of "ft bucket ls PROVIDER" or --provider: "s3:", "s3://", "s3" or "aws" (gs/gcp/gcs, az/azure, ht,
 * ais alike) into *provider (canonical; NULL: neither given). 0, or an exit code after a usage error.
 */
static int ls_provider(const ft_cli_t *c, const char **provider)
{
	static const struct {
		const char *name, *provider;
	} names[] = {{"ais", "ais"}, {"s3", "aws"},   {"aws", "aws"},     {"gs", "gcp"}, {"gcp", "gcp"},
		     {"gcs", "gcp"}, {"az", "azure"}, {"azure", "azure"}, {"ht", "ht"}};
	const char *given[2] = {c->n_args > 2 ? c->args[2] : NULL, cli_opt(c, "provider")};

	*provider = NULL;
	for (int k = 0; k < 2; k++) {
		const char *arg = given[k], *found = NULL;
		if (arg == NULL)
			continue;
		size_t n = strcspn(arg, ":");
		if (arg[n] != '\0' && strcmp(arg + n, ":") != 0 && strcmp(arg + n, "://") != 0)
			n = 0; /* "s3:x": not a provider */
		for (size_t i = 0; n > 0 && i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == n && strncmp(arg, names[i].name, n) == 0)
				found = names[i].provider;
		if (found == NULL)
			return cli_fail(FT_EXIT_USAGE, "unknown provider \"%s\" (ais, s3:, gs:, az:, ht:)", arg);
		if (*provider != NULL && strcmp(*provider, found) != 0)
			return cli_fail(FT_EXIT_USAGE, "two providers given: %s and %s", *provider, found);
		*provider = found;
	}
	return FT_EXIT_OK;
}

/* The table of a remote provider's account: each bucket, whether the cluster has it, and as which buckets. */
static void print_remote(const json_t *list)
{
	static const char *const head[] = {"NAME", "PROVIDER", "PRESENT", "CLUSTER BUCKETS"};
	cli_table_t *t = cli_table_new(4, head);
	size_t i;
	json_t *b;

	json_array_foreach(list, i, b) {
		char *as = NULL;
		const json_t *front = json_object_get(b, "cluster_buckets");
		size_t k, len = 0;
		json_t *n;
		json_array_foreach(front, k, n) {
			const char *s = json_string_value(n);
			char *grown = s != NULL ? realloc(as, len + strlen(s) + 2) : NULL;
			if (grown == NULL)
				continue;
			as = grown;
			len += (size_t)sprintf(as + len, "%s%s", len > 0 ? "," : "", s);
		}
		const char *row[] = {json_string_value(json_object_get(b, "name")),
				     json_string_value(json_object_get(b, "provider")),
				     json_is_true(json_object_get(b, "present")) ? "yes" : "no", as != NULL ? as : "-"};
		cli_table_row(t, row);
		free(as);
	}
	cli_table_print(t, stdout);
}

static int bucket_ls(ft_cli_t *c)
{
	const char *provider;
	char path[128];
	cli_resp_t r;
	json_t *list;
	int rc = ls_provider(c, &provider);

	if (rc != FT_EXIT_OK)
		return rc;
	if (provider == NULL || strcmp(provider, "ais") == 0)
		snprintf(path, sizeof(path), "/v1/buckets");
	else /* the provider's account, or with --present what the cluster has of it (AIStore's presence filter) */
		snprintf(path, sizeof(path), "/v1/buckets?provider=%s%s", provider,
			 cli_flag(c, "present") ? "&presence=2" : "");
	if (cli_call("GET", path, NULL, &r) != 0 || r.status != 200) {
		rc = cli_resp_fail(&r, "listing buckets");
		cli_resp_free(&r);
		return rc;
	}
	list = cli_resp_json(&r);
	if (c->json) {
		cli_print_json(list);
	} else if (strchr(path, '?') != NULL && !cli_flag(c, "present")) {
		print_remote(list);
	} else {
		static const char *const head[] = {"NAME", "PROVIDER", "CHECKSUM", "CREATED"};
		cli_table_t *t = cli_table_new(4, head);
		size_t i;
		json_t *b;
		json_array_foreach(list, i, b) {
			char created[32];
			const char *row[] = {
				json_string_value(json_object_get(b, "name")),
				json_string_value(json_object_get(b, "provider")),
				json_string_value(json_object_get(b, "checksum")),
				when(json_integer_value(json_object_get(b, "created")), created, sizeof(created))};
			cli_table_row(t, row);
		}
		cli_table_print(t, stdout);
	}
	json_decref(list);
	cli_resp_free(&r);
	return rc;
}

static int bucket_create(ft_cli_t *c, const cli_bucket_t *b)
{
	const char *cksum = cli_opt(c, "checksum"), *backend = cli_opt(c, "backend");
	json_t *msg = json_pack("{s:s, s:{}}", "action", "create-bck", "value");
	json_t *value = json_object_get(msg, "value");
	char path[600];
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (cksum != NULL)
		json_object_set_new(value, "checksum", json_pack("{s:s}", "type", cksum));
	if (backend != NULL) {
		json_t *be = json_loads(backend, 0, NULL);
		if (!json_is_object(be)) {
			json_decref(msg);
			return cli_fail(FT_EXIT_USAGE, "--backend must be a JSON object");
		}
		json_object_set_new(value, "backend", be);
	} else if (strcmp(b->provider, "ais") != 0) {
		json_decref(msg);
		return cli_fail(FT_EXIT_USAGE, "a %s bucket needs --backend '{\"endpoint\": ...}'", b->provider);
	}
	snprintf(path, sizeof(path), "/v1/buckets/%s?provider=%s", b->name, b->provider);
	if (cli_call("POST", path, msg, &r) != 0 || r.status != 200)
		rc = cli_resp_fail(&r, "creating the bucket");
	else if (!c->json)
		printf("created %s://%s\n", b->provider, b->name);
	else
		printf("{\"created\": \"%s://%s\"}\n", b->provider, b->name);
	cli_resp_free(&r);
	json_decref(msg);
	return rc;
}

static int bucket_rm(ft_cli_t *c, const cli_bucket_t *b)
{
	char path[600];
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	snprintf(path, sizeof(path), "/v1/buckets/%s?provider=%s", b->name, b->provider);
	if (cli_call("DELETE", path, NULL, &r) != 0 || r.status != 200)
		rc = cli_resp_fail(&r, "destroying the bucket");
	else if (!c->json)
		printf("removed %s://%s\n", b->provider, b->name);
	else
		printf("{\"removed\": \"%s://%s\"}\n", b->provider, b->name);
	cli_resp_free(&r);
	return rc;
}

/* "a.b.c=v" into obj as {"a":{"b":{"c":v}}}; v a number, true/false, or else a string. 0 or -1. */
static int set_path(json_t *obj, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char key[256];
	json_t *at = obj, *v;
	char *end;

	if (eq == NULL || eq == kv || (size_t)(eq - kv) >= sizeof(key))
		return -1;
	memcpy(key, kv, (size_t)(eq - kv));
	key[eq - kv] = '\0';
	const char *val = eq + 1;
	long long n = strtoll(val, &end, 10);
	if (*val != '\0' && *end == '\0')
		v = json_integer(n);
	else if (strcmp(val, "true") == 0 || strcmp(val, "false") == 0)
		v = json_boolean(strcmp(val, "true") == 0);
	else
		v = json_string(val);
	char *part = key, *dot;
	while ((dot = strchr(part, '.')) != NULL) {
		*dot = '\0';
		json_t *next = json_object_get(at, part);
		if (!json_is_object(next)) {
			next = json_object();
			json_object_set_new(at, part, next);
		}
		at = next;
		part = dot + 1;
	}
	json_object_set_new(at, part, v);
	return 0;
}

static int bucket_props(ft_cli_t *c, const cli_bucket_t *b)
{
	char path[600];
	cli_resp_t r;
	json_t *set = NULL;
	int rc = FT_EXIT_OK;

	snprintf(path, sizeof(path), "/v1/buckets/%s?provider=%s", b->name, b->provider);
	for (int i = 0; i < c->n_opts; i++) {
		if (strcmp(c->opts[i].name, "set") != 0)
			continue;
		if (set == NULL)
			set = json_object();
		if (set_path(set, c->opts[i].value) != 0) {
			json_decref(set);
			return cli_fail(FT_EXIT_USAGE, "--set takes KEY=VALUE (e.g. mirror.copies=2), not \"%s\"",
					c->opts[i].value);
		}
	}
	if (set != NULL) {
		json_t *msg = json_pack("{s:s, s:o}", "action", "set-bprops", "value", set);
		int bad = cli_call("POST", path, msg, &r) != 0 || r.status != 200;
		json_decref(msg);
		if (bad) {
			rc = cli_resp_fail(&r, "setting properties");
			cli_resp_free(&r);
			return rc;
		}
		cli_resp_free(&r);
	}
	if (cli_call("HEAD", path, NULL, &r) != 0 || r.status != 200) {
		if (r.status == 404)
			snprintf(r.err, sizeof(r.err), "bucket %s://%s does not exist", b->provider, b->name);
		rc = cli_resp_fail(&r, "bucket properties");
		cli_resp_free(&r);
		return rc;
	}
	json_t *props = json_loads(r.props, 0, NULL);
	if (c->json) {
		cli_print_json(props);
	} else {
		static const char *const head[] = {"PROPERTY", "VALUE"};
		cli_table_t *t = cli_table_new(2, head);
		const char *k;
		json_t *v;
		json_object_foreach(props, k, v) {
			char *s = json_is_string(v) ? strdup(json_string_value(v))
						    : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			const char *row[] = {k, s};
			cli_table_row(t, row);
			free(s);
		}
		cli_table_print(t, stdout);
	}
	json_decref(props);
	cli_resp_free(&r);
	return rc;
}

int cli_bucket(ft_cli_t *c)
{
	const char *verb = c->n_args > 1 ? c->args[1] : NULL;
	cli_bucket_t b;

	if (verb == NULL)
		return cli_fail(FT_EXIT_USAGE, "bucket needs ls, create, rm or props (ft bucket --help)");
	if (strcmp(verb, "ls") == 0)
		return c->n_args <= 3 ? bucket_ls(c)
				      : cli_fail(FT_EXIT_USAGE, "bucket ls takes at most one PROVIDER (e.g. s3:)");
	if (strcmp(verb, "create") != 0 && strcmp(verb, "rm") != 0 && strcmp(verb, "props") != 0)
		return cli_fail(FT_EXIT_USAGE, "unknown bucket command \"%s\" (ls, create, rm, props)", verb);
	if (c->n_args != 3)
		return cli_fail(FT_EXIT_USAGE, "bucket %s needs one BUCKET (ft bucket %s --help)", verb, verb);
	if (cli_bucket_parse(c->args[2], &b) != 0)
		return FT_EXIT_USAGE;
	if (strcmp(verb, "create") == 0)
		return bucket_create(c, &b);
	if (strcmp(verb, "rm") == 0)
		return bucket_rm(c, &b);
	return bucket_props(c, &b);
}
