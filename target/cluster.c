/* SPDX-License-Identifier: Apache-2.0 */
/* Target cluster membership: join and keepalive thread, metadata installs, control-port dispatcher. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/local.h"
#include "cluster/smap.h"
#include "core/replica.h"
#include "rpc/client.h"
#include "target.h"

/*
 * DESIGN
 * One thread joins the primary proxy (POST /v1/cluster/join, retried every JOIN_RETRY_MS until it
 * answers 200), then sends a keepalive every keepalive_ms; a 404 keepalive means the proxy dropped
 * us, so we join again. Both replies may carry a newer Smap/BMD, and the proxy pushes them through
 * POST /v1/metasync as well; every path installs through apply_docs(), which only ever installs a
 * newer version. Installs are serialized so that each one is compared with its predecessor:
 * buckets that disappear (or were re-created, a new "created" stamp) are retired on every mountpath;
 * a map whose set of targets changed starts a rebalance (rebalance.c).
 *
 * Several proxies (docs/multi-proxy.md): proxy_url may list several control URLs, comma-separated.
 * Joins and keepalives go to the primary the current map names; a proxy that is not the primary
 * answers 503 naming it ("primary_url"), which the next attempt uses; when the proxy tried does not
 * answer, the next attempt (after JOIN_RETRY_MS) tries the next candidate: the map's other proxies,
 * then the configured URLs. A keepalive that fails is retried after JOIN_RETRY_MS, not a full interval.
 */

#define JOIN_RETRY_MS 500
#define CLIENT_TIMEOUT_MS 3000
#define KEEPALIVE_DEFAULT_MS 2000
#define SHUTDOWN_GRACE_MS 2000 /* a decommissioned target answers this long after the proxy's shutdown request */

struct tgt_cluster {
	pthread_t thread;
	int running;
	pthread_mutex_t lock; /* guards stop; cond waits on it */
	pthread_cond_t cond;
	int stop;
	pthread_mutex_t install_lock; /* serializes BMD and Smap installs + comparison */
	/* cluster thread only: where joins and keepalives go */
	char hint[FT_URL_MAX]; /* a proxy's 503 named this primary */
	int rot;               /* failed attempts in a row: which candidate to try */
	char used[FT_URL_MAX]; /* the URL of the last attempt */
};

int tgt_cluster_init(tgt_t *t)
{
	tgt_cluster_t *c = calloc(1, sizeof(*c));
	pthread_condattr_t attr;

	if (!c)
		return -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->install_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &attr);
	pthread_condattr_destroy(&attr);
	t->cluster = c;
	return 0;
}

void tgt_cluster_fini(tgt_t *t)
{
	tgt_cluster_t *c = t->cluster;
	tgt_jobs_fini(t); /* idempotent: shutdown_all ran it once the control port stopped */
	if (!c)
		return;
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->install_lock);
	pthread_mutex_destroy(&c->lock);
	free(c);
	t->cluster = NULL;
}

/* Sleeps up to ms; returns non-zero when asked to stop. */
static int wait_ms(tgt_cluster_t *c, int ms)
{
	struct timespec ts;
	int stop;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (!c->stop && pthread_cond_timedwait(&c->cond, &c->lock, &ts) != ETIMEDOUT)
		;
	stop = c->stop;
	pthread_mutex_unlock(&c->lock);
	return stop;
}

static void current_versions(int64_t *smap_v, int64_t *bmd_v)
{
	ft_smap_t *m = ft_smap_current();
	ft_bmd_t *b = ft_bmd_current();

	*smap_v = m ? m->version : 0;
	*bmd_v = b ? b->version : 0;
	ft_smap_put(m);
	ft_bmd_put(b);
}

/* Retires the buckets of old that nb lacks (or holds as a new incarnation). */
static void retire_removed(tgt_t *t, const ft_bmd_t *old, const ft_bmd_t *nb)
{
	for (int i = 0; old && i < old->n; i++) {
		const ft_bucket_t *ob = &old->buckets[i];
		const ft_bucket_t *b = ft_bmd_find(nb, ob->provider, ob->name);
		if (b && b->created_ns == ob->created_ns)
			continue;
		int n = tgt_bucket_retire(t, ob->provider, ob->name);
		tgt_list_forget(t, ob->provider, ob->name);
		if (n > 0)
			tgt_janitor_kick(t);
		ft_info("bucket %s/%s removed from BMD v%lld: deleting its objects (%d mountpaths)", ob->provider,
			ob->name, (long long)nb->version, n);
	}
}

static int install_bmd(tgt_t *t, const json_t *j, char *err, size_t errlen)
{
	tgt_cluster_t *c = t->cluster;
	ft_bmd_t *nb = ft_bmd_from_json(j, err, errlen);

	if (!nb)
		return -1;
	pthread_mutex_lock(&c->install_lock);
	ft_bmd_t *old = ft_bmd_current();
	ft_bmd_get(nb); /* keep it for the comparison; install takes the other reference */
	if (ft_bmd_install(nb) == 0) {
		ft_info("installed BMD v%lld (%d buckets)", (long long)nb->version, nb->n);
		retire_removed(t, old, nb);
	}
	ft_bmd_put(nb);
	ft_bmd_put(old);
	pthread_mutex_unlock(&c->install_lock);
	return 0;
}

/* Whether the two maps list different targets (by id or flags); a first map (old NULL) counts as a change. */
static int targets_differ(const ft_smap_t *old, const ft_smap_t *nm)
{
	if (!old || old->n_targets != nm->n_targets)
		return 1;
	for (int i = 0; i < nm->n_targets; i++) /* both sorted by id */
		if (strcmp(old->targets[i].id, nm->targets[i].id) != 0 || old->targets[i].flags != nm->targets[i].flags)
			return 1;
	return 0;
}

/* Installs a newer Smap; when its targets differ from the previous map's, objects follow (rebalance.c). */
static int install_smap(tgt_t *t, const json_t *j, char *err, size_t errlen)
{
	tgt_cluster_t *c = t->cluster;
	ft_smap_t *m = ft_smap_from_json(j, err, errlen);

	if (!m)
		return -1;
	pthread_mutex_lock(&c->install_lock);
	ft_smap_t *old = ft_smap_current();
	ft_smap_get(m); /* keep it for the comparison; install takes the other reference */
	if (ft_smap_install(m) == 0) {
		ft_info("installed Smap v%lld (%d targets)", (long long)m->version, m->n_targets);
		if (targets_differ(old, m))
			tgt_rebalance_smap_changed(t, old, m);
	}
	ft_smap_put(m);
	ft_smap_put(old);
	pthread_mutex_unlock(&c->install_lock);
	return 0;
}

/* Installs the "smap" and/or "bmd" members of msg when newer. 0, or -1 with err on a bad document. */
static int apply_docs(tgt_t *t, const json_t *msg, char *err, size_t errlen)
{
	const json_t *smap = json_object_get(msg, "smap");
	const json_t *bmd = json_object_get(msg, "bmd");

	/* The BMD first: a rebalance started by the map walks the buckets of the BMD that came with it. */
	if (bmd && !json_is_null(bmd) && install_bmd(t, bmd, err, errlen) != 0)
		return -1;
	if (smap && !json_is_null(smap) && install_smap(t, smap, err, errlen) != 0)
		return -1;
	return 0;
}

/* Appends base (n bytes, trailing slashes dropped) to the candidates when new and non-empty. */
static void add_candidate(char (*cand)[FT_URL_MAX], int *n, int cap, const char *base, size_t len)
{
	while (len > 0 && (base[len - 1] == '/' || base[len - 1] == ' '))
		len--;
	while (len > 0 && base[0] == ' ') {
		base++;
		len--;
	}
	if (len == 0 || len >= FT_URL_MAX || *n >= cap)
		return;
	for (int i = 0; i < *n; i++)
		if (strlen(cand[i]) == len && strncmp(cand[i], base, len) == 0)
			return;
	memcpy(cand[*n], base, len);
	cand[*n][len] = '\0';
	(*n)++;
}

#define MAX_CANDIDATES 16

/* Builds "<proxy control URL><path>" for the next attempt: the hint, the map's primary, its other proxies, proxy_url. */
static void proxy_endpoint(tgt_t *t, const char *path, char *url, size_t cap)
{
	tgt_cluster_t *c = t->cluster;
	char cand[MAX_CANDIDATES][FT_URL_MAX];
	int n = 0;
	ft_smap_t *m = ft_smap_current();

	add_candidate(cand, &n, MAX_CANDIDATES, c->hint, strlen(c->hint));
	if (m != NULL) {
		const ft_node_t *p = m->primary[0] ? ft_smap_find(m, m->primary) : NULL;
		if (p != NULL)
			add_candidate(cand, &n, MAX_CANDIDATES, p->control_url, strlen(p->control_url));
		for (int i = 0; i < m->n_proxies; i++)
			add_candidate(cand, &n, MAX_CANDIDATES, m->proxies[i].control_url,
				      strlen(m->proxies[i].control_url));
	}
	ft_smap_put(m);
	for (const char *s = t->cfg.proxy_url; *s != '\0';) {
		const char *e = strchr(s, ',');
		size_t len = e != NULL ? (size_t)(e - s) : strlen(s);
		add_candidate(cand, &n, MAX_CANDIDATES, s, len);
		s += len + (e != NULL);
	}
	snprintf(c->used, sizeof(c->used), "%s", n > 0 ? cand[c->rot % n] : "");
	snprintf(url, cap, "%s%s", c->used, path);
}

/* After an attempt: a 503 naming the primary points the next one there; any failure moves to the next candidate. */
static void attempt_done(tgt_t *t, bool ok, const json_t *resp)
{
	tgt_cluster_t *c = t->cluster;
	const char *primary = json_string_value(json_object_get(resp, "primary_url"));

	if (ok) {
		c->rot = 0;
		c->hint[0] = '\0';
	} else if (primary != NULL && strcmp(primary, c->used) != 0) {
		snprintf(c->hint, sizeof(c->hint), "%s", primary);
		c->rot = 0;
	} else {
		c->hint[0] = '\0';
		c->rot++;
	}
}

/* One join attempt; returns 0 once joined. *failures counts attempts since the last success (for logging). */
static int join_once(tgt_t *t, int *failures)
{
	char url[FT_URL_MAX + 64], err[256] = "";
	long status = 0;
	json_t *resp = NULL;
	json_t *body =
		json_pack("{s:s, s:s, s:s}", "id", t->id, "public_url", t->public_url, "control_url", t->control_url);
	ft_node_t self = {0};
	int rc = -1;

	proxy_endpoint(t, "/v1/cluster/join", url, sizeof(url));
	if (!body)
		return -1;
	if (t->public_unix[0] != '\0') {
		snprintf(self.host_id, sizeof(self.host_id), "%s", ft_host_id());
		snprintf(self.public_unix, sizeof(self.public_unix), "%s", t->public_unix);
	}
	if (ft_node_local_to_json(&self, body) != 0)
		goto out;
	if (ft_client_json("POST", url, body, CLIENT_TIMEOUT_MS, &status, &resp, err, sizeof(err)) != 0)
		goto out;
	if (status != 200) {
		snprintf(err, sizeof(err), "HTTP %ld", status);
		goto out;
	}
	if (resp && apply_docs(t, resp, err, sizeof(err)) != 0)
		goto out;
	rc = 0;
out:
	attempt_done(t, rc == 0, resp);
	if (rc == 0) {
		int64_t sv, bv;
		current_versions(&sv, &bv);
		ft_info("joined the cluster at %s as %s (Smap v%lld, BMD v%lld)", t->cluster->used, t->id,
			(long long)sv, (long long)bv);
		*failures = 0;
	} else if ((*failures)++ % 20 == 0) {
		ft_warn("join %s failed: %s (retrying every %d ms)", url, err, JOIN_RETRY_MS);
	}
	json_decref(resp);
	json_decref(body);
	return rc;
}

/* One keepalive; returns 0 when acknowledged, 1 when the proxy wants a new join, -1 on failure. */
static int keepalive_once(tgt_t *t)
{
	char url[FT_URL_MAX + 64], err[256] = "";
	long status = 0;
	json_t *resp = NULL;
	int64_t sv, bv;
	int rc = -1;

	current_versions(&sv, &bv);
	json_t *body = json_pack("{s:s, s:I, s:I}", "id", t->id, "smap_version", (json_int_t)sv, "bmd_version",
				 (json_int_t)bv);
	proxy_endpoint(t, "/v1/cluster/keepalive", url, sizeof(url));
	if (!body)
		return -1;
	if (ft_client_json("POST", url, body, CLIENT_TIMEOUT_MS, &status, &resp, err, sizeof(err)) != 0) {
		ft_warn("keepalive %s failed: %s", url, err);
		goto out;
	}
	if (status == 404) {
		ft_warn("proxy %s does not know %s any more: joining again", t->cluster->used, t->id);
		rc = 1;
		goto out;
	}
	if (status != 200) {
		ft_warn("keepalive %s: HTTP %ld", url, status);
		goto out;
	}
	if (resp && apply_docs(t, resp, err, sizeof(err)) != 0)
		ft_warn("keepalive %s: bad metadata in reply: %s", url, err);
	rc = 0;
out:
	attempt_done(t, rc >= 0, resp);
	json_decref(resp);
	json_decref(body);
	return rc;
}

static void *cluster_main(void *arg)
{
	tgt_t *t = arg;
	tgt_cluster_t *c = t->cluster;
	int interval = t->cfg.keepalive_ms > 0 ? t->cfg.keepalive_ms : KEEPALIVE_DEFAULT_MS;
	int joined = 0, failures = 0, pause;

	do {
		if (!joined) {
			joined = join_once(t, &failures) == 0;
			pause = joined ? interval : JOIN_RETRY_MS;
		} else {
			int rc = keepalive_once(t);
			joined = rc != 1;
			pause = rc == 0 ? interval : rc == 1 ? 0 : JOIN_RETRY_MS;
		}
	} while (!wait_ms(c, pause));
	return NULL;
}

int tgt_cluster_start(tgt_t *t)
{
	tgt_cluster_t *c = t->cluster;

	if (!t->cfg.proxy_url[0]) {
		ft_warn("no --proxy_url: running standalone, not joining a cluster");
		return 0;
	}
	if (pthread_create(&c->thread, NULL, cluster_main, t) != 0)
		return -1;
	c->running = 1;
	return 0;
}

/* Asks the cluster thread to end: no join or keepalive is sent once its current one returns. */
static void leave(tgt_cluster_t *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void tgt_cluster_stop(tgt_t *t)
{
	tgt_cluster_t *c = t->cluster;

	if (!c || !c->running)
		return;
	leave(c);
	pthread_join(c->thread, NULL);
	c->running = 0;
}

/* POST /v1/metasync: install what is newer, reply with the versions now held. */
static void metasync(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_error_t jerr;
	char err[256] = "";
	int64_t sv, bv;
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;

	if (!msg) {
		ft_ctl_error(resp, 400, "metasync: body is not JSON: %s", req->body ? jerr.text : "empty body");
		return;
	}
	if (!json_is_object(msg)) {
		ft_ctl_error(resp, 400, "metasync: expected a JSON object with \"smap\" and/or \"bmd\"");
		json_decref(msg);
		return;
	}
	if (apply_docs(t, msg, err, sizeof(err)) != 0) {
		ft_ctl_error(resp, 400, "metasync: invalid document: %s", err);
		json_decref(msg);
		return;
	}
	json_decref(msg);
	current_versions(&sv, &bv);
	resp->status = 200;
	resp->json = json_pack("{s:I, s:I}", "smap_version", (json_int_t)sv, "bmd_version", (json_int_t)bv);
}

/* Sends this process SIGTERM after SHUTDOWN_GRACE_MS (a detached thread). */
static void *exit_later(void *arg)
{
	struct timespec ts = {.tv_sec = SHUTDOWN_GRACE_MS / 1000, .tv_nsec = (SHUTDOWN_GRACE_MS % 1000) * 1000000L};

	(void)arg;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	kill(getpid(), SIGTERM);
	return NULL;
}

/*
 * POST /v1/daemon {"action":"shutdown"}: the proxy ends a decommissioned target. The cluster thread
 * is told to end before the answer: the proxy takes the target out of the map once answered, and a
 * keepalive told "not in the map" must not join it again (back without its flags, it would own
 * objects while it exits). The SIGTERM, which main's sigwait takes as any other, comes
 * SHUTDOWN_GRACE_MS later: a client following a redirect the proxy gave just before the target was
 * flagged finds it still answering (with a redirect to the object's new owner, its map having it
 * flagged) rather than a refused or reset connection.
 */
static void daemon_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));

	if (!action || strcmp(action, "shutdown") != 0) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"shutdown\"}");
	} else {
		ft_info("shutdown requested over the control port");
		if (t->cluster)
			leave(t->cluster);
		resp->status = 200;
		resp->json = json_pack("{s:s, s:s}", "id", t->id, "result", "shutting down");
		pthread_attr_t attr;
		pthread_t th;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &attr, exit_later, NULL) != 0)
			kill(getpid(), SIGTERM); /* no thread: at once */
		pthread_attr_destroy(&attr);
	}
	json_decref(msg);
}

void tgt_control_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	tgt_t *t = ctx;
	const char *want = NULL;

	if (strcmp(req->path, "/v1/health") == 0) {
		want = "GET";
		if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0) {
			resp->status = 200;
			resp->json = json_pack("{s:s, s:s, s:s, s:o}", "status", "ok", "role", "target", "id", t->id,
					       "integrity", tgt_integrity_json(t));
			return;
		}
	} else if (strcmp(req->path, "/v1/metasync") == 0) {
		want = "POST";
		if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0) {
			metasync(t, req, resp);
			return;
		}
	} else if (strcmp(req->path, "/v1/list") == 0) {
		want = "GET";
		if (strcmp(req->method, "GET") == 0) {
			tgt_list_handle(t, req, resp);
			return;
		}
	} else if (strcmp(req->path, "/v1/buckets") == 0) {
		want = "GET";
		if (strcmp(req->method, "GET") == 0) {
			tgt_rbuckets_handle(t, req, resp); /* the proxy's GET /v1/buckets?provider=aws|gcp|azure */
			return;
		}
	} else if (strncmp(req->path, "/v1/jobs", 8) == 0 && (req->path[8] == '\0' || req->path[8] == '/')) {
		tgt_jobs_handle(t, req, resp);
		return;
	} else if (strcmp(req->path, "/v1/ec/held") == 0) {
		if (strcmp(req->method, "POST") == 0)
			tgt_ec_held_ctl(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use POST)", req->method, req->path);
		return;
	} else if (strncmp(req->path, "/v1/ec", 6) == 0 && (req->path[6] == '\0' || req->path[6] == '/')) {
		tgt_ec_ctl(t, req, resp);
		return;
	} else if ((strncmp(req->path, "/v1/rebalance", 13) == 0 && (req->path[13] == '\0' || req->path[13] == '/')) ||
		   (strncmp(req->path, "/v1/mountpaths", 14) == 0 && (req->path[14] == '\0' || req->path[14] == '/'))) {
		tgt_rebalance_ctl(t, req, resp);
		return;
	} else if (strcmp(req->path, "/v1/hints") == 0) {
		tgt_hint_ctl(t, req, resp); /* intra-cluster: the proxy installs each target's share of an order hint */
		return;
	} else if (strcmp(req->path, "/v1/daemon") == 0) {
		want = "POST";
		if (strcmp(req->method, "POST") == 0) {
			daemon_action(t, req, resp);
			return;
		}
	} else if (strcmp(req->path, "/v1/mpu") == 0) {
		want = "GET";
		if (strcmp(req->method, "GET") == 0) {
			tgt_mpu_list(t, req, resp);
			return;
		}
	}
	if (want)
		ft_ctl_error(resp, 405, "method %s not allowed on %s (use %s)", req->method, req->path, want);
	else
		ft_ctl_error(resp, 404, "no such control endpoint: %s %s", req->method, req->path);
}
