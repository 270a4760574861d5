/* SPDX-License-Identifier: Apache-2.0 */
/* ft cluster show: the cluster map, each node's health, and the targets' mountpaths (relayed by the proxy). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft.h"

/* GET of a node's own URL (not the endpoint): its JSON or NULL. */
static json_t *node_get(const char *base, const char *path)
{
	char url[2048];
	cli_resp_t r;
	json_t *j = NULL;

	snprintf(url, sizeof(url), "%s%s", base, path);
	if (cli_call("GET", url, NULL, &r) == 0 && r.status == 200)
		j = cli_resp_json(&r);
	cli_resp_free(&r);
	return j;
}

/* A target's mountpaths through the proxy's relay (a target's control port takes only signed requests): its JSON
 * or NULL (an error, or a role without admin). */
static json_t *mountpaths_get(const char *id)
{
	char path[512];
	cli_resp_t r;
	json_t *j = NULL;

	snprintf(path, sizeof(path), "/v1/cluster/mountpaths?sid=%s", id);
	if (cli_call("GET", path, NULL, &r) == 0 && r.status == 200)
		j = cli_resp_json(&r);
	cli_resp_free(&r);
	return j;
}

int cli_cluster(ft_cli_t *c)
{
	cli_resp_t r;
	int rc = FT_EXIT_OK;

	if (c->n_args != 2 || strcmp(c->args[1], "show") != 0)
		return cli_fail(FT_EXIT_USAGE, "cluster needs show (ft cluster --help)");
	if (cli_call("GET", "/v1/cluster?what=smap", NULL, &r) != 0 || r.status != 200) {
		rc = cli_resp_fail(&r, "cluster map");
		cli_resp_free(&r);
		return rc;
	}
	json_t *smap = cli_resp_json(&r);
	cli_resp_free(&r);
	json_t *nodes = json_array();
	const char *roles[] = {"proxies", "targets"};
	for (int k = 0; k < 2; k++) {
		size_t i;
		json_t *n;
		json_array_foreach(json_object_get(smap, roles[k]), i, n) {
			const char *id = json_string_value(json_object_get(n, "id"));
			json_t *health = node_get(json_string_value(json_object_get(n, "public_url")), "/v1/health");
			json_t *mps = k == 1 && id != NULL ? mountpaths_get(id) : NULL;
			json_t *doc = json_pack("{s:s, s:s, s:O, s:s}", "id", id ? id : "", "role",
						k ? "target" : "proxy", "public_url", json_object_get(n, "public_url"),
						"state", health != NULL ? "online" : "unreachable");
			if (k == 0)
				json_object_set_new(
					doc, "primary",
					json_boolean(
						id != NULL && json_string_value(json_object_get(smap, "primary")) &&
						strcmp(id, json_string_value(json_object_get(smap, "primary"))) == 0));
			if (mps != NULL)
				json_object_set(doc, "mountpaths", json_object_get(mps, "mountpaths"));
			json_array_append_new(nodes, doc);
			json_decref(health);
			json_decref(mps);
		}
	}
	if (c->json) {
		json_t *out = json_pack("{s:O, s:O, s:o}", "version", json_object_get(smap, "version"), "primary",
					json_object_get(smap, "primary"), "nodes", nodes);
		cli_print_json(out);
		json_decref(out);
	} else {
		printf("cluster map v%lld, primary %s, %zu proxies, %zu targets\n\n",
		       (long long)json_integer_value(json_object_get(smap, "version")),
		       json_string_value(json_object_get(smap, "primary")),
		       json_array_size(json_object_get(smap, "proxies")),
		       json_array_size(json_object_get(smap, "targets")));
		static const char *const head[] = {"NODE", "ROLE", "PUBLIC URL", "STATE", "MOUNTPATHS"};
		cli_table_t *t = cli_table_new(5, head);
		size_t i;
		json_t *d;
		json_array_foreach(nodes, i, d) {
			char mp[1024] = "-";
			json_t *list = json_object_get(d, "mountpaths");
			if (json_array_size(list) > 0) {
				size_t k;
				json_t *m;
				mp[0] = '\0';
				json_array_foreach(list, k, m)
					snprintf(mp + strlen(mp), sizeof(mp) - strlen(mp), "%s%s", k ? "," : "",
						 json_string_value(json_object_get(m, "path")));
			}
			char role[32];
			snprintf(role, sizeof(role), "%s%s", json_string_value(json_object_get(d, "role")),
				 json_is_true(json_object_get(d, "primary")) ? " (primary)" : "");
			const char *row[] = {json_string_value(json_object_get(d, "id")), role,
					     json_string_value(json_object_get(d, "public_url")),
					     json_string_value(json_object_get(d, "state")), mp};
			cli_table_row(t, row);
		}
		cli_table_print(t, stdout);
		json_decref(nodes);
	}
	json_decref(smap);
	return rc;
}
