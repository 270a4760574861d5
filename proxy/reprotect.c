/* SPDX-License-Identifier: Apache-2.0 */
/* Re-creating EC slices and mirror copies on targets after one left the map: decommissioned, or lost for good. */
#include "proxy.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "http/util.h"
#include "rpc/client.h"

/*
 * DESIGN
 * A target that leaves the map takes with it the EC slices, EC replicas and mirror copies on
 * targets (mirror.scope "targets") it held for objects others own. px_reprotect re-creates them
 * for the map of now: an ec-encode job (target/xact/jobs.c) on every target for each bucket that
 * keeps such copies; each target re-encodes the objects it owns; the proxy follows every part to
 * its end and runs the job again where a part could not start or ended with errors (up to
 * REPROTECT_ROUNDS). A decommission runs it once the target is empty (maint.c). A target taken out
 * as dead (probes, relays' reports, missed keepalives) may only be restarting, so the primary
 * waits restore_after_s (default 300 s, 0: never) and runs it only if the target has not joined
 * again by then; meanwhile the objects stay readable (GETs rebuild from what is left) with one
 * copy or slice fewer. A restore first has every target walk what it holds of the bucket and ask
 * the owners of those objects to rebuild a main copy they lack (target/xact/held.c: the
 * objects the lost target owned), so the ec-encode runs then cover them too. A proxy that stops,
 * or stops being the primary, drops a wait.
 */

#define REPROTECT_ROUNDS 3         /* ec-encode runs on a bucket until every target's part ended clean */
#define REPROTECT_ASK_MS 5000      /* a target that does not answer this long counts as a failed part */
#define REPROTECT_POLL_MS 200      /* how often a part's status is read */
#define REPROTECT_LIMIT_MS 1800000 /* a part still running after this long counts as failed */

/* Starts job msg on target n: whether it runs (a 409 means it exists: it runs already). */
static bool ec_job_start(const ft_node_t *n, const json_t *msg, const char *what)
{
	char url[FT_URL_MAX + 16], err[256] = "";
	long status = 0;
	json_t *resp = NULL;

	snprintf(url, sizeof(url), "%s/v1/jobs", n->control_url);
	int rc = ft_client_json("POST", url, msg, REPROTECT_ASK_MS, &status, &resp, err, sizeof(err));
	json_decref(resp);
	if (rc == 0 && (status == 200 || status == 409))
		return true;
	ft_warn("%s: ec-encode on %s not started (HTTP %ld %s)", what, n->id, status, err);
	return false;
}

/*
 * Follows job id on target n until it ends: true when it finished with no error. A target that
 * cannot be asked for REPROTECT_ASK_MS counts as a failed part.
 */
static bool ec_job_clean(px_t *px, const ft_node_t *n, const char *id, const char *what)
{
	char url[FT_URL_MAX + FT_ID_MAX + 96], err[256] = "";
	int64_t start = ft_mono_ms(), heard = start;

	snprintf(url, sizeof(url), "%s/v1/jobs/%s", n->control_url, id);
	while (ft_mono_ms() - start < REPROTECT_LIMIT_MS) {
		long status = 0;
		json_t *resp = NULL;
		if (ft_client_json("GET", url, NULL, REPROTECT_ASK_MS, &status, &resp, err, sizeof(err)) == 0 &&
		    status == 200) {
			const char *state = json_string_value(json_object_get(resp, "state"));
			json_int_t errors = json_integer_value(json_object_get(resp, "errors"));
			bool running = state == NULL || strcmp(state, "running") == 0;
			bool clean = !running && strcmp(state, "finished") == 0 && errors == 0;
			if (!running && !clean)
				ft_warn("%s: ec-encode on %s: %s with %lld errors", what, n->id, state,
					(long long)errors);
			heard = ft_mono_ms();
			json_decref(resp);
			if (!running)
				return clean;
		} else {
			json_decref(resp);
			if (ft_mono_ms() - heard > REPROTECT_ASK_MS) {
				ft_warn("%s: ec-encode on %s: no status (HTTP %ld %s)", what, n->id, status, err);
				return false;
			}
		}
		if (px_stop_wait(px, REPROTECT_POLL_MS))
			return false;
	}
	return false;
}

/* One ec-encode run over bucket bk on every target of m, followed to its end: whether all parts ended clean. */
static bool ec_reencode_round(px_t *px, const ft_smap_t *m, const ft_bucket_t *bk, const char *id, const char *what)
{
	json_t *msg = json_pack("{s:s, s:s, s:s, s:s}", "id", id, "kind", "ec-encode", "provider", bk->provider,
				"bucket", bk->name);
	bool *started = calloc((size_t)m->n_targets + 1, sizeof(*started)), clean = msg != NULL && started != NULL;

	for (int k = 0; clean && k < m->n_targets && !px_stop_wait(px, 0); k++)
		started[k] = ec_job_start(&m->targets[k], msg, what);
	for (int k = 0; clean && k < m->n_targets; k++)
		if (!started[k] || !ec_job_clean(px, &m->targets[k], id, what))
			clean = false;
	free(started);
	json_decref(msg);
	return clean;
}

typedef struct {
	const ft_smap_t *m;
	const ft_bucket_t *bk;
	const char *what;
	int failed;
} held_t;

/* One target's walk of what it holds of the bucket (POST /v1/ec/held): owners restore their lost main copies. */
static void held_one(held_t *h, int i)
{
	const ft_node_t *n = &h->m->targets[i];
	char *b = ft_pct_encode_dup(h->bk->name, strlen(h->bk->name), 0), err[256] = "";
	char url[FT_URL_MAX + FT_BUCKET_NAME_MAX * 3 + 96];
	long status = 0;

	snprintf(url, sizeof(url), "%s/v1/ec/held?provider=%s&bucket=%s", n->control_url, h->bk->provider,
		 b != NULL ? b : "");
	if (b == NULL || ft_client_json("POST", url, NULL, REPROTECT_LIMIT_MS, &status, NULL, err, sizeof(err)) != 0 ||
	    status != 200) {
		ft_warn("%s: %s could not have the main copies of what it holds of %s/%s restored (HTTP %ld %s)",
			h->what, n->id, h->bk->provider, h->bk->name, status, err);
		h->failed++;
	}
	free(b);
}

void px_reprotect(px_t *px, const char *kind, const char *sid)
{
	char what[FT_ID_MAX + 32];

	snprintf(what, sizeof(what), "%s %s", kind, sid);
	ft_smap_t *m = ft_smap_current();
	ft_bmd_t *b = ft_bmd_current();

	for (int i = 0; m != NULL && b != NULL && i < b->n; i++) {
		const ft_bucket_t *bk = &b->buckets[i];
		char id[FT_ID_MAX + 64];
		bool clean = false;
		if (bk->ec_data == 0 && !ft_bucket_mirror_targets(bk)) /* mirror copies on targets: EC's replicas */
			continue;
		if (strcmp(kind, "restore") == 0) { /* the objects the lost target owned: main copies first */
			held_t h = {.m = m, .bk = bk, .what = what};
			for (int k = 0; k < m->n_targets && !px_stop_wait(px, 0);
			     k++) /* one at a time: see target/xact/held.c */
				held_one(&h, k);
		}
		for (int round = 1; !clean && round <= REPROTECT_ROUNDS && !px_stop_wait(px, round > 1 ? 1000 : 0);
		     round++) {
			snprintf(id, sizeof(id), "%s-%s-%lld-%d-%d", kind, sid, (long long)m->version, i, round);
			ft_info("%s: job %s re-creates the slices and copies of %s/%s", what, id, bk->provider,
				bk->name);
			clean = ec_reencode_round(px, m, bk, id, what);
		}
		if (clean)
			ft_info("%s: job %s ended clean on every target", what, id);
		else if (px_stop_wait(px, 0))
			ft_warn("%s: stopping before the slices and copies of %s/%s were all re-created", what,
				bk->provider, bk->name);
		else if (!clean)
			ft_error("%s: the slices and copies of %s/%s are not all re-created; a scrub or an ec-encode "
				 "job of the bucket completes them",
				 what, bk->provider, bk->name);
	}
	ft_bmd_put(b);
	ft_smap_put(m);
}

/* The delayed run after a loss: restore_after_s, then px_reprotect unless the target is back (or this proxy stopped). */
static void *restore_main(void *arg)
{
	px_task_t *d = arg;
	px_t *px = d->px;

	if (!px_stop_wait(px, (int64_t)px->cfg.restore_after_s * 1000) && px_is_primary(px)) {
		ft_smap_t *m = ft_smap_current();
		bool back = m != NULL && ft_smap_find(m, d->id) != NULL;
		ft_smap_put(m);
		if (back)
			ft_info("restore %s: the target is back in the cluster map; nothing to re-create", d->id);
		else
			px_reprotect(px, "restore", d->id);
	}
	px_task_end(d);
	return NULL;
}

void px_reprotect_after_loss(px_t *px, const char *id)
{
	if (px->cfg.restore_after_s <= 0)
		return;
	ft_info("restore %s: the slices and copies it held are re-created in %d s unless it joins again", id,
		px->cfg.restore_after_s);
	if (px_task_start(px, id, restore_main) != 0)
		ft_warn("restore %s: not scheduled (the proxy stops, or no thread); a scrub or an ec-encode job "
			"re-creates them",
			id);
}
