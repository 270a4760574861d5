/* SPDX-License-Identifier: Apache-2.0 */
/* ft etl: init (register a command or a transformer server), ls, show, rm. */
#include <stdio.h>
#include <string.h>

#include "base/redact.h"
#include "ft.h"

/* Sets --name (a number) as key of spec when given; 0, or an exit code. */
static int number_opt(ft_cli_t *c, const char *name, const char *key, long hi, json_t *spec)
{
	long n;

	if (cli_opt(c, name) == NULL)
		return FT_EXIT_OK;
	n = cli_opt_int(c, name, 0, 1, hi);
	if (n < 0)
		return FT_EXIT_USAGE;
	json_object_set_new(spec, key, json_integer(n));
	return FT_EXIT_OK;
}

/* ft etl init NAME (--url URL | [--] ARGV...) [--timeout MS] [--max-output BYTES] [--procs N] */
static int init(ft_cli_t *c)
{
	const char *url = cli_opt(c, "url");
	json_t *spec;
	cli_resp_t r;
	int rc;

	if (c->n_args < 3 || (url != NULL) == (c->n_args > 3))
		return cli_fail(FT_EXIT_USAGE,
				"etl init needs NAME and either --url URL or a command (ft etl init --help)");
	spec = json_pack("{s:s}", "name", c->args[2]);
	if (url != NULL) {
		json_object_set_new(spec, "url", json_string(url));
	} else {
		json_t *argv = json_array();
		for (int i = 3; i < c->n_args; i++)
			json_array_append_new(argv, json_string(c->args[i]));
		json_object_set_new(spec, "command", argv);
	}
	if ((rc = number_opt(c, "timeout", "timeout_ms", 3600000, spec)) != FT_EXIT_OK ||
	    (rc = number_opt(c, "max-output", "max_output", 0x7fffffffL, spec)) != FT_EXIT_OK ||
	    (rc = number_opt(c, "procs", "procs", 64, spec)) != FT_EXIT_OK) {
		json_decref(spec);
		return rc;
	}
	if (cli_call("POST", "/v1/etl", spec, &r) != 0 || r.status != 200) {
		rc = cli_resp_fail(&r, "etl init");
	} else if (c->json) {
		json_t *j = cli_resp_json(&r);
		cli_print_json(j);
		json_decref(j);
	} else {
		printf("%s\n", c->args[2]);
	}
	cli_resp_free(&r);
	json_decref(spec);
	return rc;
}

/* "tr a-z A-Z" or the URL of a transformer (without user:password@ or query values) into buf. */
static const char *what_runs(const json_t *spec, char *buf, size_t cap)
{
	const json_t *cmd = json_object_get(spec, "command");
	size_t i, n = 0;
	json_t *a;

	if (cmd == NULL) {
		return ft_redact_url(json_string_value(json_object_get(spec, "url")) ?: "", buf, cap);
	}
	buf[0] = '\0';
	json_array_foreach(cmd, i, a) {
		const char *arg = json_string_value(a) ?: "";
		char shown[FT_REDACT_URL_MAX];
		if (strstr(arg, "://") != NULL) /* an argument that is (or ends with) a URL: as messages show URLs */
			arg = ft_redact_url(arg, shown, sizeof(shown));
		n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", i ? " " : "", arg);
		if (n >= cap)
			break;
	}
	return buf;
}

/* GET /v1/etl[/NAME] as a table (or JSON). */
static int show(ft_cli_t *c, const char *name)
{
	static const char *const head[] = {"NAME", "KIND", "RUNS", "TIMEOUT", "MAX OUTPUT", "PROCS"};
	char path[400];
	cli_resp_t r;
	json_t *j, *list, *spec;
	size_t i;
	int rc = FT_EXIT_OK;

	snprintf(path, sizeof(path), "/v1/etl%s%s", name ? "/" : "", name ? name : "");
	if (cli_call("GET", path, NULL, &r) != 0 || r.status != 200) {
		rc = cli_resp_fail(&r, name ? name : "listing transformers");
		cli_resp_free(&r);
		return rc;
	}
	j = cli_resp_json(&r);
	cli_resp_free(&r);
	if (c->json) {
		cli_print_json(j);
		json_decref(j);
		return rc;
	}
	list = name != NULL ? json_pack("[O]", j) : json_incref(j);
	cli_table_t *t = cli_table_new(6, head);
	json_array_foreach(list, i, spec) {
		char runs[512], to[32], mo[32], procs[16];
		snprintf(to, sizeof(to), "%lld ms", (long long)json_integer_value(json_object_get(spec, "timeout_ms")));
		snprintf(procs, sizeof(procs), "%lld", (long long)json_integer_value(json_object_get(spec, "procs")));
		const char *row[] = {json_string_value(json_object_get(spec, "name")),
				     json_object_get(spec, "command") ? "command" : "server",
				     what_runs(spec, runs, sizeof(runs)),
				     to,
				     cli_size(json_integer_value(json_object_get(spec, "max_output")), mo, sizeof(mo)),
				     procs};
		cli_table_row(t, row);
	}
	cli_table_print(t, stdout);
	json_decref(list);
	json_decref(j);
	return rc;
}

static int rm(ft_cli_t *c)
{
	char path[400];
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (c->n_args < 3)
		return cli_fail(FT_EXIT_USAGE, "etl rm needs NAME...");
	for (int i = 2; i < c->n_args; i++) {
		snprintf(path, sizeof(path), "/v1/etl/%s", c->args[i]);
		if (cli_call("DELETE", path, NULL, &r) != 0 || r.status != 200)
			rc = cli_resp_fail(&r, c->args[i]);
		cli_resp_free(&r);
	}
	return rc;
}

int cli_etl(ft_cli_t *c)
{
	const char *verb = c->n_args > 1 ? c->args[1] : "";

	if (strcmp(verb, "init") == 0)
		return init(c);
	if (strcmp(verb, "ls") == 0 && c->n_args == 2)
		return show(c, NULL);
	if (strcmp(verb, "show") == 0 && c->n_args == 3)
		return show(c, c->args[2]);
	if (strcmp(verb, "rm") == 0)
		return rm(c);
	return cli_fail(FT_EXIT_USAGE, "etl needs init, ls, show NAME or rm NAME (ft etl --help)");
}
