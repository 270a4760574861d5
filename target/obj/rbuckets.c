/* SPDX-License-Identifier: Apache-2.0 */
/* The buckets of a remote provider's account, listed on a target for the proxy (GET /v1/buckets on the control port). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cloud/backend.h"
#include "target.h"

/*
 * DESIGN
 * Backend credentials live on the targets (their environment, docs/backends.md), never on the
 * proxy: the proxy asks one target (HRW by provider) and this file lists the account's buckets
 * with a configuration that names only the provider, so the environment decides the endpoint,
 * the credentials and (gcp) the project. Every page is fetched here, so the proxy gets the whole
 * list at once: {"provider", "endpoint", "buckets": [names]}. The endpoint (never a secret) lets
 * the proxy tell which cluster buckets front the same account. Errors carry the backend's status
 * and message (ft_backend_error_t messages never hold a credential).
 */

#define RBUCKETS_MAX 100000 /* names in one answer; more is refused rather than cut short */

/* Appends a page's names to names; -1 on allocation failure. */
static int add_names(json_t *names, const ft_backend_page_t *page)
{
	for (int i = 0; i < page->n; i++)
		if (json_array_append_new(names, json_string(page->entries[i].name)) != 0)
			return -1;
	return 0;
}

/*
 * Every name of cfg's account into names. 0, or the HTTP status to answer with why filled.
 */
static int list_all(const ft_backend_config_t *cfg, json_t *names, char *why, size_t cap)
{
	const char *provider = ft_backend_provider_name(cfg->provider);
	ft_backend_error_t err;
	ft_backend_page_t page;
	char *token = NULL;
	int status = 0;

	do {
		ft_backend_err_t code = ft_backend_list_buckets(cfg, token, &page, &err);
		free(token);
		token = NULL;
		if (code != FT_BACKEND_OK) {
			snprintf(why, cap, "listing the buckets of %s: %s", provider, err.msg);
			return ft_backend_http_status(code);
		}
		if (add_names(names, &page) != 0 ||
		    (page.next_token != NULL && (token = strdup(page.next_token)) == NULL))
			status = 500;
		ft_backend_page_free(&page);
		if (status == 0 && json_array_size(names) > RBUCKETS_MAX)
			status = 502;
	} while (status == 0 && token != NULL);
	free(token);
	if (status == 500)
		snprintf(why, cap, "listing the buckets of %s: out of memory", provider);
	else if (status == 502)
		snprintf(why, cap, "listing the buckets of %s: the account holds more than %d buckets", provider,
			 RBUCKETS_MAX);
	return status;
}

void tgt_rbuckets_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *given = ft_ctl_query(req, "provider");
	ft_backend_config_t *cfg = malloc(sizeof(*cfg)); /* large (tokens): not on the stack */
	ft_backend_provider_t p;
	char endpoint[FT_URL_MAX], why[512];
	json_t *names = json_array();
	int status;

	if (cfg == NULL || names == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		goto out;
	}
	if (given == NULL || ft_backend_provider_parse(given, &p) != 0) {
		ft_ctl_error(resp, 400, "provider must be aws, gcp or azure, got \"%s\"", given != NULL ? given : "");
		goto out;
	}
	ft_backend_config_init(cfg, p);
	status = list_all(cfg, names, why, sizeof(why));
	if (status != 0) {
		ft_warn("target %s: %s", t->id, why);
		ft_ctl_error(resp, status, "%s", why);
		goto out;
	}
	ft_backend_account_endpoint(cfg, endpoint, sizeof(endpoint));
	resp->status = 200;
	resp->json = json_pack("{s:s, s:s, s:O}", "provider", ft_backend_provider_name(p), "endpoint", endpoint,
			       "buckets", names);
	if (resp->json == NULL)
		ft_ctl_error(resp, 500, "out of memory");
out:
	json_decref(names);
	free(cfg);
}
