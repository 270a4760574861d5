/* SPDX-License-Identifier: Apache-2.0 */
/* The primary's cluster map: state at start, target join and keepalive, removal of silent targets. */
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "cluster/hrw.h"
#include "http/util.h"

/* A target not heard from for this many keepalive intervals leaves the map. */
#define PX_SILENT_INTERVALS 3

/* ---- last-seen table (meta_lock held) ---- */

static px_seen_t *seen_find(px_t *px, const char *id)
{
	for (int i = 0; i < px->n_seen; i++)
		if (strcmp(px->seen[i].id, id) == 0)
			return &px->seen[i];
	return NULL;
}

/* Records id as heard from at ms. Returns 0, -1 on allocation failure. */
static int seen_set(px_t *px, const char *id, int64_t ms)
{
	px_seen_t *s = seen_find(px, id);

	if (s == NULL) {
		if (px->n_seen == px->cap_seen) {
			int cap = px->cap_seen ? px->cap_seen * 2 : 16;
			px_seen_t *grown = realloc(px->seen, (size_t)cap * sizeof(*grown));
			if (grown == NULL)
				return -1;
			px->seen = grown;
			px->cap_seen = cap;
		}
		s = &px->seen[px->n_seen++];
		snprintf(s->id, sizeof(s->id), "%s", id);
	}
	s->last_seen_ms = ms;
	return 0;
}

static void seen_remove(px_t *px, const char *id)
{
	px_seen_t *s = seen_find(px, id);

	if (s != NULL)
		*s = px->seen[--px->n_seen];
}

void px_cluster_reset_seen(px_t *px, const ft_smap_t *m)
{
	int64_t now = ft_mono_ms();

	px->n_seen = 0;
	for (int i = 0; i < m->n_targets; i++)
		if (seen_set(px, m->targets[i].id, now) != 0)
			ft_error("out of memory recording %s", m->targets[i].id); /* it then drops out and re-joins */
}

void px_cluster_free(px_t *px)
{
	free(px->seen);
	px->seen = NULL;
	px->n_seen = px->cap_seen = 0;
}

/* ---- documents ---- */

/*
 * The map to start from: the persisted one with its version bumped (so it never goes back) and
 * only this proxy among the proxies, or a new one. Its targets count as not seen yet.
 */
static ft_smap_t *initial_smap(px_t *px, char *err, size_t errlen)
{
	json_t *j = NULL;
	ft_smap_t *m = NULL;
	int rc = px_persist_load(px->smap_path, &j, err, errlen);

	if (rc < 0)
		return NULL;
	if (rc == 0) {
		char why[256];
		m = ft_smap_from_json(j, why, sizeof(why));
		json_decref(j);
		if (m == NULL) {
			snprintf(err, errlen, "%s: %s", px->smap_path, why);
			return NULL;
		}
		for (int i = m->n_proxies - 1; i >= 0; i--) {
			char id[FT_ID_MAX];
			snprintf(id, sizeof(id), "%s", m->proxies[i].id);
			if (strcmp(id, px->id) != 0)
				ft_smap_remove(m, id);
		}
		ft_info("loaded cluster map v%lld with %d targets from %s", (long long)m->version, m->n_targets,
			px->smap_path);
	} else {
		m = ft_smap_new();
		if (m == NULL) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
	}
	if (px_smap_add_self(px, m) != 0) {
		snprintf(err, errlen, "out of memory");
		ft_smap_put(m);
		return NULL;
	}
	snprintf(m->primary, sizeof(m->primary), "%s", px->id);
	m->version++;
	return m;
}

static ft_bmd_t *initial_bmd(px_t *px, char *err, size_t errlen)
{
	json_t *j = NULL;
	ft_bmd_t *b;
	int rc = px_persist_load(px->bmd_path, &j, err, errlen);

	if (rc < 0)
		return NULL;
	if (rc == 1) {
		b = ft_bmd_new();
		if (b == NULL)
			snprintf(err, errlen, "out of memory");
		else
			b->version = 1;
		return b;
	}
	char why[256];
	b = ft_bmd_from_json(j, why, sizeof(why));
	json_decref(j);
	if (b == NULL)
		snprintf(err, errlen, "%s: %s", px->bmd_path, why);
	else
		ft_info("loaded bucket metadata v%lld with %d buckets from %s", (long long)b->version, b->n,
			px->bmd_path);
	return b;
}

int px_cluster_init(px_t *px, char *err, size_t errlen)
{
	ft_smap_t *m = NULL;
	ft_bmd_t *b = NULL;
	int64_t now = ft_mono_ms();

	m = initial_smap(px, err, errlen);
	if (m == NULL)
		goto fail;
	b = initial_bmd(px, err, errlen);
	if (b == NULL)
		goto fail;
	for (int i = 0; i < m->n_targets; i++) {
		if (seen_set(px, m->targets[i].id, now) != 0) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	}
	if (px_persist_smap(px, m) != 0 || px_persist_bmd(px, b) != 0) {
		snprintf(err, errlen, "cannot write the state files under %s", px->cfg.state_dir);
		goto fail;
	}
	ft_smap_install(m);
	ft_bmd_install(b);
	return 0;
fail:
	ft_bmd_put(b);
	ft_smap_put(m);
	return -1;
}

/* ---- join ---- */

/* Copies the non-empty string member key of o into dst; -1 when missing, not a string or too long. */
static int get_str(const json_t *o, const char *key, char *dst, size_t cap)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (s == NULL || s[0] == '\0' || strlen(s) >= cap)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

static bool is_http_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* Parses the request body as a JSON object; fills resp with a 400 and returns NULL otherwise. */
static json_t *parse_body(const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_error_t jerr;
	json_t *j;

	if (req->body == NULL || req->body_len == 0) {
		ft_ctl_error(resp, 400, "missing JSON body");
		return NULL;
	}
	j = json_loadb(req->body, req->body_len, 0, &jerr);
	if (j == NULL) {
		ft_ctl_error(resp, 400, "malformed JSON: %s", jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		ft_ctl_error(resp, 400, "JSON body must be an object");
		return NULL;
	}
	return j;
}

/* Reads the join body into n; fills resp with a 400 and returns -1 when invalid. */
static int join_node(const ft_ctl_req_t *req, ft_ctl_resp_t *resp, ft_node_t *n)
{
	json_t *j = parse_body(req, resp);
	int rc = -1;

	if (j == NULL)
		return -1;
	memset(n, 0, sizeof(*n));
	const char *role = json_string_value(json_object_get(j, "role"));
	if (role != NULL && strcmp(role, "proxy") != 0 && strcmp(role, "target") != 0) {
		ft_ctl_error(resp, 400, "join: \"role\" must be \"target\" or \"proxy\"");
		goto out;
	}
	n->type = role != NULL && strcmp(role, "proxy") == 0 ? FT_NODE_PROXY : FT_NODE_TARGET;
	if (get_str(j, "id", n->id, sizeof(n->id)) != 0) {
		ft_ctl_error(resp, 400, "join: \"id\" must be a non-empty string shorter than %d bytes", FT_ID_MAX);
		goto out;
	}
	if (get_str(j, "public_url", n->public_url, sizeof(n->public_url)) != 0 || !is_http_url(n->public_url) ||
	    get_str(j, "control_url", n->control_url, sizeof(n->control_url)) != 0 || !is_http_url(n->control_url)) {
		ft_ctl_error(resp, 400, "join: \"public_url\" and \"control_url\" must be http URLs");
		goto out;
	}
	char why[160];
	if (ft_node_local_from_json(j, n, true, why, sizeof(why)) != 0) {
		ft_ctl_error(resp, 400, "join: %s", why);
		goto out;
	}
	n->digest = ft_hrw_digest(n->id);
	rc = 0;
out:
	json_decref(j);
	return rc;
}

static bool same_node(const ft_node_t *a, const ft_node_t *b)
{
	return a->type == b->type && strcmp(a->public_url, b->public_url) == 0 &&
	       strcmp(a->control_url, b->control_url) == 0 && strcmp(a->host_id, b->host_id) == 0 &&
	       strcmp(a->public_unix, b->public_unix) == 0;
}

/*
 * Whether adding n changes cur: a new id, new URLs, or another target still listed at one of
 * n's addresses (a node restarted under a new id: the old entry is dead, it must not get traffic).
 */
static bool join_changes(const ft_smap_t *cur, const ft_node_t *n)
{
	const ft_node_t *old = ft_smap_find(cur, n->id);

	if (old == NULL || !same_node(old, n))
		return true;
	for (int i = 0; n->type == FT_NODE_TARGET && i < cur->n_targets; i++) {
		const ft_node_t *t = &cur->targets[i];
		if (strcmp(t->id, n->id) != 0 &&
		    (strcmp(t->public_url, n->public_url) == 0 || strcmp(t->control_url, n->control_url) == 0))
			return true;
	}
	return false;
}

/* The new map with n added and the targets at its addresses removed; NULL on allocation failure. */
static ft_smap_t *join_map(px_t *px, const ft_smap_t *cur, const ft_node_t *n)
{
	ft_smap_t *m = ft_smap_clone(cur);

	if (m == NULL)
		return NULL;
	for (int i = n->type == FT_NODE_TARGET ? m->n_targets - 1 : -1; i >= 0; i--) {
		const ft_node_t *t = &m->targets[i];
		if (strcmp(t->id, n->id) != 0 &&
		    (strcmp(t->public_url, n->public_url) == 0 || strcmp(t->control_url, n->control_url) == 0)) {
			char id[FT_ID_MAX];
			snprintf(id, sizeof(id), "%s", t->id);
			ft_info("target %s replaced by %s at %s", id, n->id, n->public_url);
			ft_smap_remove(m, id);
			seen_remove(px, id);
		}
	}
	ft_node_t joined = *n;
	const ft_node_t *old = ft_smap_find(cur, n->id);
	joined.flags = old != NULL ? old->flags : 0; /* maintenance outlives a restart */
	if (ft_smap_add(m, &joined) != 0) {
		ft_smap_put(m);
		return NULL;
	}
	m->version = cur->version + 1;
	return m;
}

void px_cluster_join(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	ft_node_t n;
	ft_smap_t *cur = NULL, *m = NULL;
	ft_bmd_t *bmd = NULL;
	bool changed = false;

	if (join_node(req, resp, &n) != 0)
		return;
	if (!px_was_primary(px)) {
		px_primary_not_primary(px, resp, "join");
		return;
	}
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_smap_current();
	const ft_node_t *old = ft_smap_find(cur, n.id);
	if (old != NULL && old->type != n.type) {
		pthread_mutex_unlock(&px->meta_lock);
		ft_ctl_error(resp, 409, "join: id \"%s\" belongs to a %s", n.id,
			     old->type == FT_NODE_PROXY ? "proxy" : "target");
		goto out;
	}
	changed = join_changes(cur, &n);
	bmd = ft_bmd_current();
	if (changed) {
		m = join_map(px, cur, &n);
		int prc = m != NULL ? px_persist_smap(px, m) : -1;
		if (prc != 0) {
			pthread_mutex_unlock(&px->meta_lock);
			if (prc == -EAGAIN)
				px_primary_not_primary(px, resp, "join");
			else
				ft_ctl_error(resp, 500, "join: cannot update the cluster map");
			goto out;
		}
		/*
		 * The joiner gets the map and the buckets before this proxy redirects any request to it:
		 * otherwise a GET could reach it before it knows the bucket (404) or itself (307 away).
		 * If the push fails, the join response below carries both all the same.
		 */
		if (px_metasync_node(ft_smap_find(m, n.id), m, bmd) != 0)
			ft_warn("join: %s did not take the new map before it went live", n.id);
		ft_smap_get(m);
		ft_smap_install(m);
	} else {
		m = cur;
		ft_smap_get(m);
	}
	if (n.type == FT_NODE_TARGET && seen_set(px, n.id, ft_mono_ms()) != 0)
		ft_error("join: out of memory recording %s", n.id); /* it then drops out and re-joins */
	pthread_mutex_unlock(&px->meta_lock);

	if (changed) {
		ft_info("%s %s joined (%s, control %s): cluster map v%lld, %d targets",
			n.type == FT_NODE_PROXY ? "proxy" : "target", n.id, n.public_url, n.control_url,
			(long long)m->version, m->n_targets);
		px_metasync(px, m, bmd, true, false, n.id);
	}
	resp->status = 200;
	resp->json = json_pack("{s:o,s:o}", "smap", ft_smap_to_json(m), "bmd", ft_bmd_to_json(bmd));
	if (resp->json == NULL)
		ft_ctl_error(resp, 500, "out of memory");
out:
	ft_bmd_put(bmd);
	ft_smap_put(m);
	ft_smap_put(cur);
}

/* ---- keepalive ---- */

void px_cluster_keepalive(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *j = parse_body(req, resp);
	ft_smap_t *smap = NULL;
	ft_bmd_t *bmd = NULL;
	char id[FT_ID_MAX];

	if (j == NULL)
		return;
	json_t *sv = json_object_get(j, "smap_version"), *bv = json_object_get(j, "bmd_version");
	if (get_str(j, "id", id, sizeof(id)) != 0 || (sv != NULL && !json_is_integer(sv)) ||
	    (bv != NULL && !json_is_integer(bv))) {
		ft_ctl_error(resp, 400,
			     "keepalive: expected {\"id\": string, \"smap_version\": int, \"bmd_version\": int}");
		goto out;
	}
	/* A missing version counts as older than any, so the reply carries the document. */
	int64_t smap_version = sv != NULL ? (int64_t)json_integer_value(sv) : -1;
	int64_t bmd_version = bv != NULL ? (int64_t)json_integer_value(bv) : -1;

	if (!px_was_primary(px)) { /* a primary cut off from etcd still answers: it only reads */
		px_primary_not_primary(px, resp, "keepalive");
		goto out;
	}
	pthread_mutex_lock(&px->meta_lock);
	smap = ft_smap_current();
	const ft_node_t *n = ft_smap_find(smap, id);
	if (n == NULL || n->type != FT_NODE_TARGET) {
		pthread_mutex_unlock(&px->meta_lock);
		ft_ctl_error(resp, 404, "target \"%s\" is not in the cluster map: join again", id);
		goto out;
	}
	seen_set(px, id, ft_mono_ms());
	bmd = ft_bmd_current();
	pthread_mutex_unlock(&px->meta_lock);

	resp->status = 200;
	resp->json = json_object();
	if (smap_version < smap->version)
		json_object_set_new(resp->json, "smap", ft_smap_to_json(smap));
	if (bmd_version < bmd->version)
		json_object_set_new(resp->json, "bmd", ft_bmd_to_json(bmd));
out:
	ft_bmd_put(bmd);
	ft_smap_put(smap);
	json_decref(j);
}

/* ---- a target found dead ---- */

int px_cluster_remove(px_t *px, const char *id, const char *why)
{
	ft_smap_t *cur, *m = NULL;
	int rc = -1;

	if (!px_is_primary(px))
		return -1;
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_smap_current();
	if (ft_smap_find(cur, id) == NULL) {
		rc = 1;
		goto unlock;
	}
	m = ft_smap_clone(cur);
	if (m == NULL || ft_smap_remove(m, id) != 0)
		goto unlock;
	m->version = cur->version + 1;
	if (px_persist_smap(px, m) != 0)
		goto unlock;
	ft_warn("%s %s %s: removed from the cluster map (v%lld, %d targets)",
		ft_smap_find(cur, id)->type == FT_NODE_PROXY ? "proxy" : "target", id, why, (long long)m->version,
		m->n_targets);
	seen_remove(px, id);
	ft_smap_get(m);
	ft_smap_install(m);
	rc = 0;
unlock:
	pthread_mutex_unlock(&px->meta_lock);
	if (rc == 0)
		px_metasync(px, m, NULL, true, false, NULL);
	ft_smap_put(m);
	ft_smap_put(cur);
	return rc;
}

/* ---- silent targets ---- */

/* Removes the targets not heard from in time: one new map version, persisted, installed, pushed. */
static void remove_silent(px_t *px)
{
	int64_t now = ft_mono_ms();
	int64_t limit = (int64_t)PX_SILENT_INTERVALS * px->cfg.keepalive_ms;
	ft_smap_t *cur, *m = NULL;
	int n_stale = 0;

	if (!px_is_primary(px))
		return;
	pthread_mutex_lock(&px->meta_lock);
	cur = ft_smap_current();
	for (int i = 0; i < cur->n_targets; i++) {
		px_seen_t *s = seen_find(px, cur->targets[i].id);
		if (s == NULL)
			seen_set(px, cur->targets[i].id, now); /* not expected: start its clock now */
		else if (now - s->last_seen_ms > limit)
			n_stale++;
	}
	if (n_stale == 0)
		goto unlock;
	m = ft_smap_clone(cur);
	if (m == NULL)
		goto unlock;
	for (int i = 0; i < cur->n_targets; i++) {
		const char *id = cur->targets[i].id;
		px_seen_t *s = seen_find(px, id);
		if (s != NULL && now - s->last_seen_ms > limit)
			ft_smap_remove(m, id);
	}
	m->version = cur->version + 1;
	if (px_persist_smap(px, m) != 0) { /* try again at the next tick */
		ft_smap_put(m);
		m = NULL;
		goto unlock;
	}
	for (int i = 0; i < cur->n_targets; i++) {
		const char *id = cur->targets[i].id;
		if (ft_smap_find(m, id) == NULL) {
			ft_warn("target %s silent for more than %lld ms: removed from the cluster map", id,
				(long long)limit);
			seen_remove(px, id);
		}
	}
	ft_smap_get(m);
	ft_smap_install(m);
unlock:
	pthread_mutex_unlock(&px->meta_lock);
	if (m != NULL) {
		ft_info("cluster map v%lld: %d targets", (long long)m->version, m->n_targets);
		px_metasync(px, m, NULL, true, false, NULL);
		for (int i = 0; i < cur->n_targets; i++)
			if (ft_smap_find(m, cur->targets[i].id) == NULL)
				px_reprotect_after_loss(px, cur->targets[i].id);
		ft_smap_put(m);
	}
	ft_smap_put(cur);
}

static void *checker_main(void *arg)
{
	px_t *px = arg;
	int64_t tick_ms = px->cfg.keepalive_ms / 2;

	if (tick_ms < 10)
		tick_ms = 10;
	while (!px_stop_wait(px, tick_ms))
		remove_silent(px);
	return NULL;
}

int px_smap_add_self(const px_t *px, ft_smap_t *m)
{
	ft_node_t self = {.type = FT_NODE_PROXY, .digest = ft_hrw_digest(px->id)};

	snprintf(self.id, sizeof(self.id), "%s", px->id);
	snprintf(self.public_url, sizeof(self.public_url), "%s", px->public_url);
	snprintf(self.control_url, sizeof(self.control_url), "%s", px->control_url);
	return ft_smap_add(m, &self);
}

bool px_stop_wait(px_t *px, int64_t ms)
{
	bool stopping;

	pthread_mutex_lock(&px->stop_lock);
	if (!px->stopping && ms > 0) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_sec += ms / 1000;
		t.tv_nsec += (ms % 1000) * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&px->stop_cond, &px->stop_lock, &t);
	}
	stopping = px->stopping;
	pthread_mutex_unlock(&px->stop_lock);
	return stopping;
}

int px_checker_start(px_t *px)
{
	if (pthread_create(&px->checker, NULL, checker_main, px) != 0)
		return -1;
	px->checker_started = true;
	return 0;
}

void px_checker_stop(px_t *px)
{
	if (!px->checker_started)
		return;
	pthread_mutex_lock(&px->stop_lock);
	px->stopping = true;
	pthread_cond_signal(&px->stop_cond);
	pthread_mutex_unlock(&px->stop_lock);
	pthread_join(px->checker, NULL);
	px->checker_started = false;
}

/* ---- documents pushed to a proxy that is not the primary ---- */

void px_cluster_metasync(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *j = parse_body(req, resp);
	char why[256];

	if (j == NULL)
		return;
	if (!px_was_primary(px)) { /* the primary's own documents come from its commits only */
		json_t *bj = json_object_get(j, "bmd"), *sj = json_object_get(j, "smap");
		ft_bmd_t *b = bj != NULL ? ft_bmd_from_json(bj, why, sizeof(why)) : NULL;
		ft_smap_t *m = sj != NULL ? ft_smap_from_json(sj, why, sizeof(why)) : NULL;
		if ((bj != NULL && b == NULL) || (sj != NULL && m == NULL)) {
			ft_bmd_put(b);
			ft_smap_put(m);
			ft_ctl_error(resp, 400, "metasync: invalid document: %s", why);
			json_decref(j);
			return;
		}
		if (b != NULL)
			ft_bmd_install(b);
		if (m != NULL)
			ft_smap_install(m);
	}
	json_decref(j);
	ft_smap_t *m = ft_smap_current();
	ft_bmd_t *b = ft_bmd_current();
	resp->status = 200;
	resp->json = json_pack("{s:I,s:I}", "smap_version", (json_int_t)(m ? m->version : 0), "bmd_version",
			       (json_int_t)(b ? b->version : 0));
	ft_bmd_put(b);
	ft_smap_put(m);
}
