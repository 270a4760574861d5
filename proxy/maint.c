/* SPDX-License-Identifier: Apache-2.0 */
/* Target maintenance and decommission (PUT /v1/cluster), and the mountpath relay: control port, and public port for admins. */
#include "proxy.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * A target in maintenance or being decommissioned keeps its place in the map with a flag
 * (smap.h): HRW placement skips it, so it gets no new objects and GETs go to the owner among the
 * others, which pulls an object it lacks from the flagged target (rebalance_pull.c). Maintenance
 * moves nothing; decommission makes every target rebalance, and the flagged one sends all it holds
 * away. A thread then waits until the target lists nothing in any bucket of the BMD, asks it to
 * shut down (POST /v1/daemon) and removes it from the map; until then its objects stay readable.
 * Last, it runs ec-encode on every EC bucket (the slices it held are re-created from the moved
 * objects), follows every target's part to its end and runs it again where a part failed. A target
 * taken out as dead before it was empty gets the same ec-encode runs.
 */

#define MAINT_POLL_MS 200
#define MAINT_ASK_MS 5000
#define MAINT_DRAIN_LIMIT_MS (30 * 60 * 1000) /* gives up (the flag stays) after this long */

/* Sets the flags of target id in a new map version (persisted, installed, pushed). 0, or an HTTP status. */
static int set_flags(px_t *px, const char *id, unsigned flags, char *why, size_t cap)
{
	ft_smap_t *cur, *m = NULL;
	int status = 0;

	pthread_mutex_lock(&px->meta_lock);
	cur = ft_smap_current();
	const ft_node_t *n = ft_smap_find(cur, id);
	if (n == NULL || n->type != FT_NODE_TARGET) {
		snprintf(why, cap, "no target \"%s\" in the cluster map", id);
		status = 404;
		goto unlock;
	}
	if (flags != 0) {
		int others = 0;
		for (int i = 0; i < cur->n_targets; i++)
			others += cur->targets[i].flags == 0 && strcmp(cur->targets[i].id, id) != 0;
		if (others == 0) {
			snprintf(
				why, cap,
				"target \"%s\" is the last one without maintenance: no target would be left for new objects",
				id);
			status = 409;
			goto unlock;
		}
	}
	if (n->flags == flags) /* nothing to change */
		goto unlock;
	if ((n->flags & FT_NODE_DECOMMISSION) && !(flags & FT_NODE_DECOMMISSION)) {
		snprintf(why, cap, "target \"%s\" is being decommissioned", id);
		status = 409;
		goto unlock;
	}
	m = ft_smap_clone(cur);
	if (m == NULL) {
		snprintf(why, cap, "out of memory");
		status = 500;
		goto unlock;
	}
	m->targets[n - cur->targets].flags = flags;
	m->version = cur->version + 1;
	int prc = px_persist_smap(px, m);
	if (prc != 0) {
		snprintf(why, cap, "%s",
			 prc == -EAGAIN ? "this proxy cannot commit the cluster map now (not the "
					  "primary, or etcd unreachable): try again"
					: "cannot persist the cluster map");
		status = prc == -EAGAIN ? 503 : 500;
		ft_smap_put(m);
		m = NULL;
		goto unlock;
	}
	ft_smap_get(m);
	ft_smap_install(m);
unlock:
	pthread_mutex_unlock(&px->meta_lock);
	if (m != NULL) {
		ft_info("target %s: flags %u (maintenance %s%s), cluster map v%lld", id, flags,
			flags & FT_NODE_MAINTENANCE ? "on" : "off",
			flags & FT_NODE_DECOMMISSION ? ", decommission" : "", (long long)m->version);
		px_metasync(px, m, NULL, true, false, NULL);
		ft_smap_put(m);
	}
	ft_smap_put(cur);
	return status;
}

/* Whether target n lists no object in any bucket of the BMD: 1 empty, 0 not yet, -1 unreachable. */
static int target_empty(const ft_node_t *n)
{
	ft_bmd_t *b = ft_bmd_current();
	int rc = 1;

	for (int i = 0; b != NULL && i < b->n && rc == 1; i++) {
		char url[FT_URL_MAX + 512], err[256];
		long status = 0;
		json_t *resp = NULL;
		char *bucket = ft_pct_encode_dup(b->buckets[i].name, strlen(b->buckets[i].name), 0);
		snprintf(url, sizeof(url), "%s/v1/list?provider=%s&bucket=%s&pagesize=1", n->control_url,
			 b->buckets[i].provider, bucket ? bucket : "");
		free(bucket);
		if (ft_client_json("GET", url, NULL, MAINT_ASK_MS, &status, &resp, err, sizeof(err)) != 0)
			rc = -1;
		else if (status != 200 || json_array_size(json_object_get(resp, "entries")) > 0)
			rc = 0;
		json_decref(resp);
	}
	ft_bmd_put(b);
	return rc;
}

/*
 * Asks the decommissioned target to shut down. Done while it is still in the map (flagged, so no
 * request is sent its way): a target taken out first could send a keepalive in between, be told
 * it is not in the map and join again without its flags, owning objects while it exits. It stops
 * its keepalives before it answers (target/cluster.c).
 */
static void ask_shutdown(const ft_node_t *node, const char *id)
{
	char url[FT_URL_MAX + 32], err[256] = "";
	long status = 0;
	json_t *body = json_pack("{s:s}", "action", "shutdown"), *resp = NULL;

	snprintf(url, sizeof(url), "%s/v1/daemon", node->control_url);
	if (ft_client_json("POST", url, body, MAINT_ASK_MS, &status, &resp, err, sizeof(err)) != 0 || status != 200)
		ft_warn("decommission %s: the shutdown request failed (%s, HTTP %ld)", id, err, status);
	json_decref(body);
	json_decref(resp);
}

/*
 * Waits until the target is empty, then asks it to shut down, removes it from the map and has the
 * EC slices it held re-created.
 */
static void *drain_main(void *arg)
{
	px_task_t *d = arg;
	int64_t start = ft_mono_ms();
	int unreachable = 0;

	for (;;) {
		ft_smap_t *m = ft_smap_current();
		const ft_node_t *n = m ? ft_smap_find(m, d->id) : NULL;
		ft_node_t node;
		if (n == NULL) { /* taken out as dead meanwhile: what it held goes on being protected */
			ft_smap_put(m);
			ft_warn("decommission %s: left the cluster map before it was empty", d->id);
			px_reprotect(d->px, "decommission", d->id);
			goto out;
		}
		if (!(n->flags & FT_NODE_DECOMMISSION)) {
			ft_smap_put(m);
			goto out; /* maintenance stopped, or a new proxy state */
		}
		node = *n;
		ft_smap_put(m);
		if (px_stop_wait(d->px, 0))
			goto out;
		int e = target_empty(&node);
		if (e == 1 || (e < 0 && ++unreachable >= 25))
			break;
		if (ft_mono_ms() - start > MAINT_DRAIN_LIMIT_MS) {
			ft_error("decommission %s: still holds objects after %d s; it stays in the map in maintenance",
				 d->id, MAINT_DRAIN_LIMIT_MS / 1000);
			goto out;
		}
		usleep(MAINT_POLL_MS * 1000);
	}
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *n = m ? ft_smap_find(m, d->id) : NULL;
	ft_node_t node;
	if (n != NULL)
		node = *n;
	ft_smap_put(m);
	if (n == NULL || px_stop_wait(d->px, 0))
		goto out;
	ask_shutdown(&node, d->id);
	if (px_cluster_remove(d->px, d->id, "decommissioned") < 0) /* 1: taken out as dead meanwhile */
		goto out;
	px_reprotect(d->px, "decommission", d->id);
out:
	px_task_end(d);
	return NULL;
}

void px_maint_stop(px_t *px)
{
	pthread_mutex_lock(&px->stop_lock);
	px->stopping = true;
	pthread_cond_broadcast(&px->stop_cond);
	while (px->drains > 0)
		pthread_cond_wait(&px->stop_cond, &px->stop_lock);
	pthread_mutex_unlock(&px->stop_lock);
}

int px_task_start(px_t *px, const char *id, void *(*fn)(void *))
{
	px_task_t *d = calloc(1, sizeof(*d));
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	if (d == NULL)
		return -1;
	d->px = px;
	snprintf(d->id, sizeof(d->id), "%s", id);
	pthread_mutex_lock(&px->stop_lock);
	rc = px->stopping ? -1 : 0;
	px->drains += rc == 0;
	pthread_mutex_unlock(&px->stop_lock);
	if (rc == 0) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&th, &attr, fn, d);
		pthread_attr_destroy(&attr);
		if (rc != 0) {
			pthread_mutex_lock(&px->stop_lock);
			px->drains--;
			pthread_mutex_unlock(&px->stop_lock);
		}
	}
	if (rc != 0) {
		free(d);
		return -1;
	}
	return 0;
}

void px_task_end(px_task_t *d)
{
	px_t *px = d->px;

	free(d);
	pthread_mutex_lock(&px->stop_lock);
	px->drains--;
	pthread_cond_broadcast(&px->stop_cond);
	pthread_mutex_unlock(&px->stop_lock);
}

/* The "sid" of {"action": A, "value": {"sid": ID}}; NULL with a 400 in resp when missing. */
static const char *action_sid(const json_t *j, ft_ctl_resp_t *resp)
{
	const char *sid = json_string_value(json_object_get(json_object_get(j, "value"), "sid"));

	if (sid == NULL || sid[0] == '\0' || strlen(sid) >= FT_ID_MAX) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"%s\", \"value\": {\"sid\": \"<target id>\"}}",
			     json_string_value(json_object_get(j, "action")));
		return NULL;
	}
	return sid;
}

void px_maint_cluster_put(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *j = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(j, "action"));
	const char *sid = NULL;
	unsigned flags;
	char why[300] = "";
	int st;

	if (action == NULL) {
		ft_ctl_error(resp, 400,
			     "expected a JSON body {\"action\": \"start-maintenance\" | \"stop-maintenance\" | "
			     "\"decommission\", \"value\": {\"sid\": \"<target id>\"}}");
		goto out;
	}
	if (strcmp(action, "start-maintenance") == 0)
		flags = FT_NODE_MAINTENANCE;
	else if (strcmp(action, "stop-maintenance") == 0)
		flags = 0;
	else if (strcmp(action, "decommission") == 0 || strcmp(action, "decommission-node") == 0)
		flags = FT_NODE_MAINTENANCE | FT_NODE_DECOMMISSION;
	else {
		ft_ctl_error(resp, 400, "unknown action \"%s\" (start-maintenance, stop-maintenance, decommission)",
			     action);
		goto out;
	}
	sid = action_sid(j, resp);
	if (sid == NULL)
		goto out;
	if (px_meta_follower(px)) { /* the primary changes the map and runs the drain */
		ft_info("maintenance: %s of %s sent to the primary", action, sid);
		px_cluster_forward(px, "PUT", "/v1/cluster", j, resp);
		goto out;
	}
	st = set_flags(px, sid, flags, why, sizeof(why));
	if (st != 0) {
		ft_ctl_error(resp, st, "%s: %s", action, why);
		goto out;
	}
	if ((flags & FT_NODE_DECOMMISSION) && px_task_start(px, sid, drain_main) != 0) {
		ft_ctl_error(resp, 500, "%s: cannot start the drain thread", action);
		goto out;
	}
	resp->status = flags & FT_NODE_DECOMMISSION ? 202 : 200;
	ft_smap_t *m = ft_smap_current();
	resp->json = json_pack("{s:s, s:s, s:I}", "action", action, "sid", sid, "smap_version",
			       (json_int_t)(m != NULL ? m->version : 0));
	ft_smap_put(m);
out:
	json_decref(j);
}

static void mountpaths_do(px_t *px, const ft_ctl_req_t *req, const char *sid, ft_ctl_resp_t *resp);

/*
 * /v1/cluster/mountpaths?sid=ID: GET lists, POST {"action":"attach"|"detach","path":...} changes
 * the mountpaths of target ID; relayed to its control port, its answer returned as it is.
 */
void px_maint_mountpaths(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	mountpaths_do(px, req, ft_ctl_query(req, "sid"), resp);
}

/* The mountpath relay for target sid (req's method and body). */
static void mountpaths_do(px_t *px, const ft_ctl_req_t *req, const char *sid, ft_ctl_resp_t *resp)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *n = m && sid ? ft_smap_find(m, sid) : NULL;
	json_t *body = NULL, *answer = NULL;
	char url[FT_URL_MAX + 32], err[256];
	long status = 0;

	(void)px;
	if (sid == NULL || sid[0] == '\0') {
		ft_ctl_error(resp, 400, "missing query parameter \"sid\" (a target id)");
		goto out;
	}
	if (n == NULL || n->type != FT_NODE_TARGET) {
		ft_ctl_error(resp, 404, "no target \"%s\" in the cluster map", sid);
		goto out;
	}
	if (strcmp(req->method, "POST") == 0) {
		body = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
		if (!json_is_object(body)) {
			ft_ctl_error(resp, 400, "expected {\"action\": \"attach\" | \"detach\", \"path\": \"/dir\"}");
			goto out;
		}
	} else if (strcmp(req->method, "GET") != 0) {
		ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST)", req->method, req->path);
		goto out;
	}
	snprintf(url, sizeof(url), "%s/v1/mountpaths", n->control_url);
	if (ft_client_json(req->method, url, body, 10 * MAINT_ASK_MS, &status, &answer, err, sizeof(err)) != 0) {
		ft_ctl_error(resp, 502, "target %s: %s", sid, err);
		goto out;
	}
	resp->status = (int)status;
	resp->json = answer;
	answer = NULL;
out:
	json_decref(answer);
	json_decref(body);
	ft_smap_put(m);
}

/* ---- the same on the public port (admin role: common/auth/policy.c) ---- */

/* One public-port request, answered by a worker through the control-port handlers above. */
typedef struct {
	px_t *px;
	const char *sid; /* mountpaths only */
	ft_ctl_req_t req;
} public_op_t;

static void public_answer(ft_req_t *r, ft_ctl_resp_t *resp)
{
	ft_resp_json(r, resp->status != 0 ? resp->status : 200, resp->json);
}

static void public_put_work(ft_req_t *r, void *arg)
{
	public_op_t *op = arg;
	ft_ctl_resp_t resp = {.status = 200};

	px_maint_cluster_put(op->px, &op->req, &resp);
	public_answer(r, &resp);
}

bool px_maint_public_put(px_t *px, ft_req_t *r, const json_t *msg, const char *body, size_t len)
{
	static const char *const actions[] = {"start-maintenance", "stop-maintenance", "decommission",
					      "decommission-node"};
	const char *action = json_string_value(json_object_get(msg, "action"));
	size_t i = 0;

	while (action != NULL && i < sizeof(actions) / sizeof(actions[0]) && strcmp(action, actions[i]) != 0)
		i++;
	if (action == NULL || i == sizeof(actions) / sizeof(actions[0]))
		return false;
	public_op_t *op = ft_req_alloc(r, sizeof(*op));
	char *copy = ft_req_alloc(r, len + 1);
	memcpy(copy, body, len);
	copy[len] = '\0';
	*op = (public_op_t){.px = px, .req = {.method = "PUT", .path = "/v1/cluster", .body = copy, .body_len = len}};
	ft_info("maintenance: %s requested on the public port from %s", action, ft_req_peer(r));
	ft_req_defer(r, public_put_work, op);
	return true;
}

static void public_mountpaths_work(ft_req_t *r, void *arg)
{
	public_op_t *op = arg;
	ft_ctl_resp_t resp = {.status = 200};

	mountpaths_do(op->px, &op->req, op->sid, &resp);
	public_answer(r, &resp);
}

static void public_mountpaths_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	public_op_t *op = arg;

	if (err != 0) {
		ft_resp_error(r, 400, "cannot read the request body (error %d)", err);
		return;
	}
	char *copy = ft_req_alloc(r, len + 1);
	memcpy(copy, body, len);
	copy[len] = '\0';
	op->req.body = len > 0 ? copy : NULL;
	op->req.body_len = len;
	ft_req_defer(r, public_mountpaths_work, op);
}

void px_maint_public_mountpaths(px_t *px, ft_req_t *r)
{
	public_op_t *op = ft_req_alloc(r, sizeof(*op));
	const char *sid = ft_req_query(r, "sid");

	*op = (public_op_t){.px = px,
			    .sid = sid != NULL ? ft_req_strdup(r, sid) : NULL,
			    .req = {.method = ft_req_method_name(r), .path = "/v1/cluster/mountpaths"}};
	if (ft_req_method(r) == FT_HTTP_POST)
		ft_req_read_body_all(r, 64 * 1024, public_mountpaths_body, op);
	else
		ft_req_defer(r, public_mountpaths_work, op);
}
