/* SPDX-License-Identifier: Apache-2.0 */
/* Public-port accounting (requests, bytes, durations by method and status) and the GET /metrics response. */
#include "http/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "base/metrics.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/internal.h"

_Static_assert((int)FT_HTTP_GET == FT_M_OP_GET && (int)FT_HTTP_HEAD == FT_M_OP_HEAD &&
		       (int)FT_HTTP_PUT == FT_M_OP_PUT && (int)FT_HTTP_POST == FT_M_OP_POST &&
		       (int)FT_HTTP_DELETE == FT_M_OP_DELETE && (int)FT_HTTP_OPTIONS == FT_M_OP_OPTIONS &&
		       (int)FT_HTTP_OTHER == FT_M_OP_OTHER,
	       "the op label's values follow ft_method_t");

void ft_req_mark_cold(ft_req_t *r)
{
	r->m_cold = true;
}

/* Loop thread, from http_finish_request: a request without a response head (dropped before it) is not counted. */
void http_count_request(const ft_req_t *r)
{
	unsigned op = (unsigned)r->method, code;
	uint64_t now;

	if (r->m_status < 100)
		return;
	code = (unsigned)(r->m_status / 100 - 1);
	ft_metric_add(FT_M_HTTP_REQUESTS, op, code, 1);
	if (r->m_recv > 0)
		ft_metric_add(FT_M_HTTP_REQUEST_BYTES, op, code, r->m_recv);
	ft_metric_add(FT_M_HTTP_RESPONSE_BYTES, op, code, r->m_sent);
	now = http_now_ns();
	if (r->m_start_ns != 0 && now > r->m_start_ns)
		ft_metric_observe_ns(FT_M_HTTP_DURATION, op, r->m_cold ? FT_M_CACHE_COLD : FT_M_CACHE_WARM,
				     now - r->m_start_ns);
}

/* The cluster map and bucket metadata as this node holds them: a node whose versions lag the primary's missed
 * an update. */
static void cluster_metrics(ft_strbuf_t *out)
{
	ft_smap_t *smap = ft_smap_current();
	ft_bmd_t *bmd = ft_bmd_current();

	ft_metrics_family(out, "ft_smap_version", "Version of the cluster map this node holds.", "gauge");
	ft_metrics_sample(out, "ft_smap_version", "", smap != NULL ? (double)smap->version : 0);
	ft_metrics_family(out, "ft_smap_targets", "Targets in the cluster map this node holds.", "gauge");
	ft_metrics_sample(out, "ft_smap_targets", "", smap != NULL ? smap->n_targets : 0);
	ft_metrics_family(out, "ft_bmd_version", "Version of the bucket metadata this node holds.", "gauge");
	ft_metrics_sample(out, "ft_bmd_version", "", bmd != NULL ? (double)bmd->version : 0);
	ft_smap_put(smap);
	ft_bmd_put(bmd);
}

/* Worker: the collectors may take locks and look at disks, so the text is never built on a loop thread. */
static void render(ft_req_t *r, void *arg)
{
	ft_strbuf_t out = {0};

	(void)arg;
	ft_metrics_render(&out);
	cluster_metrics(&out);
	if (out.failed) {
		ft_strbuf_free(&out);
		ft_resp_error(r, 500, "out of memory rendering the metrics");
		return;
	}
	ft_resp_bytes(r, 200, FT_METRICS_CONTENT_TYPE, out.p != NULL ? out.p : "", out.len);
	ft_strbuf_free(&out);
}

bool ft_metrics_route(ft_req_t *r)
{
	size_t len;
	const char *path = ft_req_path(r, &len);
	ft_method_t m = ft_req_method(r);

	if (len != strlen(FT_METRICS_PATH) || memcmp(path, FT_METRICS_PATH, len) != 0)
		return false;
	if (m != FT_HTTP_GET && m != FT_HTTP_HEAD) {
		ft_resp_header(r, "Allow", "GET, HEAD");
		ft_resp_error(r, 405, "method %s not allowed on %s (allowed: GET, HEAD)", ft_req_method_name(r),
			      FT_METRICS_PATH);
		return true;
	}
	ft_req_defer(r, render, NULL);
	return true;
}
