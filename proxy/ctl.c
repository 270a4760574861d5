/* SPDX-License-Identifier: Apache-2.0 */
/* Control-port dispatcher of the proxy: join, keepalive, cluster documents and actions, health. */
#include "proxy.h"

#include <string.h>

json_t *px_health_json(const px_t *px)
{
	return json_pack("{s:s,s:s,s:s,s:b}", "status", "ok", "role", "proxy", "id", px->id, "primary",
			 px_is_primary(px));
}

json_t *px_cluster_doc(const char *what, bool public_port)
{
	json_t *j = NULL;

	if (strcmp(what, "smap") == 0) {
		ft_smap_t *m = ft_smap_current();
		j = ft_smap_to_json(m);
		ft_smap_put(m);
	} else if (strcmp(what, "bmd") == 0) {
		ft_bmd_t *b = ft_bmd_current();
		j = public_port ? ft_bmd_to_json_public(b) : ft_bmd_to_json(b); /* never a secret on a public port */
		ft_bmd_put(b);
	}
	return j;
}

static void cluster_get(const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *what = ft_ctl_query(req, "what");

	if (what == NULL) {
		ft_ctl_error(resp, 400, "missing query parameter \"what\" (smap|bmd)");
		return;
	}
	resp->json = px_cluster_doc(what, false);
	if (resp->json == NULL)
		ft_ctl_error(resp, 400, "unknown what=\"%s\" (expected smap|bmd)", what);
	else
		resp->status = 200;
}

void px_ctl_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	px_t *px = ctx;
	bool get = strcmp(req->method, "GET") == 0;
	bool post = strcmp(req->method, "POST") == 0;

	if (strcmp(req->path, "/v1/cluster/join") == 0) {
		if (post)
			px_cluster_join(px, req, resp);
		else
			ft_ctl_error(resp, 405, "%s %s: use POST", req->method, req->path);
	} else if (strcmp(req->path, "/v1/cluster/keepalive") == 0) {
		if (post)
			px_cluster_keepalive(px, req, resp);
		else
			ft_ctl_error(resp, 405, "%s %s: use POST", req->method, req->path);
	} else if (strcmp(req->path, "/v1/cluster") == 0) {
		if (get)
			cluster_get(req, resp);
		else if (strcmp(req->method, "PUT") == 0)
			px_maint_cluster_put(px, req, resp);
		else
			ft_ctl_error(resp, 405, "%s %s: use GET, PUT", req->method, req->path);
	} else if (strcmp(req->path, "/v1/metasync") == 0) {
		if (post)
			px_cluster_metasync(px, req, resp);
		else
			ft_ctl_error(resp, 405, "%s %s: use POST", req->method, req->path);
	} else if (strcmp(req->path, "/v1/meta") == 0) {
		if (post)
			px_meta_handle(px, req, resp);
		else
			ft_ctl_error(resp, 405, "%s %s: use POST", req->method, req->path);
	} else if (strcmp(req->path, "/v1/cluster/mountpaths") == 0) {
		px_maint_mountpaths(px, req, resp);
	} else if (strcmp(req->path, "/v1/health") == 0) {
		if (get) {
			resp->status = 200;
			resp->json = px_health_json(px);
		} else {
			ft_ctl_error(resp, 405, "%s %s: use GET", req->method, req->path);
		}
	} else {
		ft_ctl_error(resp, 404, "no such control path: %s", req->path);
	}
}
