/* SPDX-License-Identifier: Apache-2.0 */
/* Bucket metadata changes asked of a follower proxy: made by the primary, then seen here before the answer. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "proxy.h"
#include "rpc/client.h"

/*
 * DESIGN
 * With several proxies only the primary commits the BMD (docs/multi-proxy.md). A follower asked
 * for a change (create, destroy, bucket properties and ACLs, the ETL registry; native, S3 or
 * AIStore's wire) sends it, already checked for the client's role, as one JSON operation to the
 * primary's control port (POST /v1/meta, signed like every control-plane request). The primary
 * runs it with the same functions a request on its own ports runs and answers the outcome as a
 * negative errno, the reason, and the BMD version that holds the change. The follower then waits
 * (at most META_SEE_MS) until its own BMD reaches that version, from the primary's push or its
 * etcd poll, so the client reads its own change on this proxy at once. Secrets in a bucket's
 * backend travel sealed with the cluster key, as in every BMD on the control plane. Failures keep
 * today's answers: no primary known or the primary unreachable is -EAGAIN (503, try again).
 */

#define META_ASK_MS 30000
#define META_SEE_MS 3000

bool px_meta_follower(const px_t *px)
{
	return px->cfg.etcd[0] != '\0' && !px_was_primary(px);
}

/* The primary's control URL + path from this proxy's map; 0, or -1 when none is known (or it is this proxy). */
static int primary_url(const px_t *px, const char *path, char *url, size_t cap)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *p = m != NULL && m->primary[0] ? ft_smap_find(m, m->primary) : NULL;
	int rc = p != NULL && strcmp(p->id, px->id) != 0 ? 0 : -1;

	if (rc == 0)
		snprintf(url, cap, "%s%s", p->control_url, path);
	ft_smap_put(m);
	return rc;
}

/* Waits until this proxy's BMD holds version (or the wait ends). */
static void see_version(int64_t version)
{
	for (int waited = 0; waited < META_SEE_MS; waited += 20) {
		ft_bmd_t *b = ft_bmd_current();
		bool seen = b != NULL && b->version >= version;
		ft_bmd_put(b);
		if (seen)
			return;
		usleep(20 * 1000);
	}
	ft_warn("metadata: the primary's BMD v%lld is not here after %d ms; reads here may lag", (long long)version,
		META_SEE_MS);
}

int px_meta_forward(px_t *px, json_t *op, char *why, size_t cap)
{
	char url[FT_URL_MAX + 16], err[256];
	json_t *resp = NULL;
	long status = 0;
	int rc = -EAGAIN;

	if (op == NULL) {
		snprintf(why, cap, "out of memory");
		return -EIO;
	}
	if (primary_url(px, "/v1/meta", url, sizeof(url)) != 0) {
		snprintf(why, cap, "no primary proxy is known (an election is under way)");
	} else if (ft_client_json("POST", url, op, META_ASK_MS, &status, &resp, err, sizeof(err)) != 0) {
		snprintf(why, cap, "the primary proxy cannot be reached: %s", err);
	} else if (status == 200 && json_is_integer(json_object_get(resp, "rc"))) {
		const char *w = json_string_value(json_object_get(resp, "why"));
		rc = (int)json_integer_value(json_object_get(resp, "rc"));
		snprintf(why, cap, "%s", w != NULL ? w : "");
		if (rc == 0)
			see_version(json_integer_value(json_object_get(resp, "version")));
	} else {
		const char *m = json_string_value(json_object_get(resp, "message"));
		snprintf(why, cap, "the primary proxy answered %ld: %s", status, m != NULL ? m : "");
		rc = status == 503 ? -EAGAIN : -EIO;
	}
	if (rc == -EAGAIN || rc == -EIO)
		ft_warn("metadata change %s not made: %s",
			json_string_value(json_object_get(op, "op")) ? json_string_value(json_object_get(op, "op"))
								     : "?",
			why);
	json_decref(op);
	json_decref(resp);
	return rc;
}

/* POST /v1/meta on the primary's control port: one operation a follower sends (px_meta_forward). */
void px_meta_handle(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *op = req->body != NULL ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *name = json_string_value(json_object_get(op, "op"));
	char why[512] = "";
	int rc;

	if (name == NULL) {
		ft_ctl_error(resp, 400, "a metadata operation is a JSON object with \"op\"");
		json_decref(op);
		return;
	}
	if (!px_is_primary(px)) {
		px_primary_not_primary(px, resp, "a bucket metadata change");
		json_decref(op);
		return;
	}
	if (strncmp(name, "etl-", 4) == 0)
		rc = px_etl_meta_apply(px, op, why, sizeof(why));
	else
		rc = px_bucket_meta_apply(px, op, why, sizeof(why));
	ft_bmd_t *b = ft_bmd_current();
	resp->status = 200;
	resp->json = json_pack("{s:i, s:s, s:I}", "rc", rc, "why", why, "version", (json_int_t)(b ? b->version : 0));
	ft_bmd_put(b);
	json_decref(op);
}

/* Waits until this proxy's map is at least version (or the wait ends). */
static void see_smap_version(int64_t version)
{
	for (int waited = 0; waited < META_SEE_MS; waited += 20) {
		ft_smap_t *m = ft_smap_current();
		bool seen = m != NULL && m->version >= version;
		ft_smap_put(m);
		if (seen)
			return;
		usleep(20 * 1000);
	}
	ft_warn("cluster action: the primary's map v%lld is not here after %d ms; reads here may lag",
		(long long)version, META_SEE_MS);
}

void px_cluster_forward(px_t *px, const char *method, const char *path, const json_t *body, ft_ctl_resp_t *resp)
{
	char url[FT_URL_MAX + 64], err[256];
	json_t *answer = NULL;
	long status = 0;

	if (primary_url(px, path, url, sizeof(url)) != 0) {
		ft_ctl_error(resp, 503, "no primary proxy is known (an election is under way): try again");
		return;
	}
	if (ft_client_json(method, url, body, META_ASK_MS, &status, &answer, err, sizeof(err)) != 0) {
		ft_ctl_error(resp, 503, "the primary proxy cannot be reached: %s; try again", err);
		return;
	}
	if (status >= 200 && status < 300 && json_is_integer(json_object_get(answer, "smap_version")))
		see_smap_version(json_integer_value(json_object_get(answer, "smap_version")));
	if (!json_is_object(answer)) {
		json_decref(answer);
		ft_ctl_error(resp, status >= 400 ? (int)status : 502,
			     "the primary proxy answered %ld without a JSON body", status);
		return;
	}
	resp->status = (int)status;
	resp->json = answer;
}
