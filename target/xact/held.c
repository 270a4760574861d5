/* SPDX-License-Identifier: Apache-2.0 */
/* After a target's loss: the objects whose slices or copies are held here get their main copy back on their owner. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/codec.h"
#include "base/log.h"
#include "cluster/smap.h"
#include "rpc/client.h"
#include "target.h"
#include "xact/runner.h"

/*
 * DESIGN
 * POST /v1/ec/held?provider=P&bucket=B (the primary proxy, restoring after a lost target:
 * proxy/reprotect.c). The objects a dead target owned have no main copy any more, only the slices
 * or copies other targets hold; their new owner rebuilds one on the first GET, but until then a
 * second loss may take the last copies. So every target walks what it holds of B (.ec) and asks
 * each object's owner in the current map (often itself: copies go to the next targets in HRW
 * order, which own the object once its owner is gone) to rebuild the main copy if it lacks
 * it (POST /v1/ec/encode?...&restore=only, or a direct call when it is this target; one stat when
 * the copy is there); the
 * ec-encode runs that follow re-create the slices and copies for the current map. One request per
 * object held here, on this control thread, answered when the walk ends with the counts. The
 * proxy walks one target at a time, so at most one walk's asks (and their slice probes) wait on a
 * target's control threads at once.
 */

#define HELD_ASK_MS 30000

typedef struct {
	tgt_t *t;
	const ft_smap_t *smap;
	const ft_bucket_t *bucket;
	long held, asked, restored, failed;
} held_t;

/* This target owns name: its main copy restored here when missing; counts the outcome. */
static void held_mine(held_t *h, const char *name, size_t len)
{
	tgt_obj_t *o = calloc(1, sizeof(*o));
	char err[512] = "";
	bool restored = false;

	if (o == NULL || tgt_obj_init(o, h->t, h->bucket, name, len) != 0 ||
	    tgt_ec_restore_missing(o, &restored, err, sizeof(err)) != 0) {
		h->failed++;
		ft_warn("ec held: %s/%s: not restored here: %s", h->bucket->name, name, o ? err : "out of memory");
	}
	h->restored += restored;
	h->asked++;
	free(o);
}

/* Asks name's owner (another target) to have its main copy; counts the outcome. */
static void held_ask(held_t *h, const ft_node_t *owner, const char *name)
{
	char *b = ft_pct_encode_dup(h->bucket->name, strlen(h->bucket->name), 0),
	     *o = ft_pct_encode_dup(name, strlen(name), 0), *url = NULL, err[256] = "";
	json_t *resp = NULL;
	long status = 0;

	if (b != NULL && o != NULL &&
	    asprintf(&url, "%s/v1/ec/encode?provider=%s&bucket=%s&obj=%s&restore=only", owner->control_url,
		     h->bucket->provider, b, o) > 0 &&
	    ft_client_json("POST", url, NULL, HELD_ASK_MS, &status, &resp, err, sizeof(err)) == 0 && status == 200) {
		h->restored += json_is_true(json_object_get(resp, "restored"));
	} else {
		h->failed++;
		ft_warn("ec held: %s/%s: the owner %s did not restore it (HTTP %ld %s)", h->bucket->name, name,
			owner->id, status, err);
	}
	h->asked++;
	json_decref(resp);
	free(url);
	free(b);
	free(o);
}

/* A tgt_walk_fn over the held slices and copies of the one bucket walked. */
static int held_visit(void *arg, const tgt_mountpath_t *mp, int bucket, const char *name, size_t len)
{
	held_t *h = arg;
	const ft_node_t *owner = ft_smap_owner(h->smap, h->bucket->provider, h->bucket->name, name, len);

	(void)mp;
	(void)bucket;
	h->held++;
	if (owner != NULL && strcmp(owner->id, h->t->id) == 0) /* often: copies go to the next targets in HRW order */
		held_mine(h, name, len);
	else if (owner != NULL)
		held_ask(h, owner, name);
	return 0;
}

void tgt_ec_held_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *p = ft_ctl_query(req, "provider"), *b = ft_ctl_query(req, "bucket");
	ft_bmd_t *bmd = ft_bmd_current();
	ft_smap_t *smap = ft_smap_current();
	const ft_bucket_t *bk = bmd != NULL && p != NULL && b != NULL ? ft_bmd_find(bmd, p, b) : NULL;

	if (p == NULL || b == NULL) {
		ft_ctl_error(resp, 400, "%s %s: provider and bucket are required", req->method, req->path);
	} else if (bmd == NULL || smap == NULL) {
		ft_ctl_error(resp, 503, "target %s has not joined a cluster yet", t->id);
	} else if (bk == NULL) {
		ft_ctl_error(resp, 404, "bucket \"%s\" does not exist", b);
	} else {
		/* one bucket only: a BMD with just it, so the walk never enters the others */
		ft_bmd_t one = {.n = 1, .buckets = (ft_bucket_t *)bk};
		held_t h = {.t = t, .smap = smap, .bucket = bk};
		for (int i = 0; i < t->n_mountpaths; i++)
			if (tgt_mountpath_slot_state(t, i) == 0)
				tgt_walk_held(&t->mountpaths[i], &one, held_visit, &h);
		ft_info("ec held: %s/%s: %ld held here, %ld owners asked, %ld main copies restored, %ld failed", p, b,
			h.held, h.asked, h.restored, h.failed);
		resp->status = 200;
		resp->json = json_pack("{s:I, s:I, s:I, s:I}", "held", (json_int_t)h.held, "asked", (json_int_t)h.asked,
				       "restored", (json_int_t)h.restored, "failed", (json_int_t)h.failed);
	}
	ft_smap_put(smap);
	ft_bmd_put(bmd);
}
