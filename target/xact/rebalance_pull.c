/* SPDX-License-Identifier: Apache-2.0 */
/* Rebalance pull: a GET miss on the owner fetches the object from where it was before. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "rpc/client.h"
#include "target.h"
#include "xact/rebalance.h"

/* ---- pull: a GET missed on the owner ---- */

/* Whether remote targets may still hold objects this one owns (a map change not long ago, a flagged target). */
static int pull_window_open(tgt_t *t)
{
	tgt_rebalance_t *rb = t->rebalance;

	pthread_mutex_lock(&rb->lock);
	int open = rb->last_change_ns > 0 && ft_now_ns() - rb->last_change_ns < RB_PULL_WINDOW_NS;
	open = open || atomic_load(&rb->state) == ST_RUNNING;
	pthread_mutex_unlock(&rb->lock);
	/* A target in maintenance or being decommissioned holds objects others own now. */
	ft_smap_t *m = ft_smap_current();
	for (int i = 0; m && !open && i < m->n_targets; i++)
		open = m->targets[i].flags != 0;
	ft_smap_put(m);
	return open;
}

/*
 * Asks the target at url to move o here now. 0 moved, -ENOENT not there, -EHOSTUNREACH no answer,
 * another -errno with err.
 */
static int ask_send(tgt_t *t, const tgt_obj_t *o, const char *url, int64_t smap_v, char *err, size_t cap)
{
	char extra[FT_ID_MAX + FT_URL_MAX + 96], msg[256];
	char *me = ft_pct_encode_dup(t->id, strlen(t->id), 0),
	     *my_url = ft_pct_encode_dup(t->control_url, strlen(t->control_url), 0);
	json_t *resp = NULL;
	long status = 0;
	int rc = -ENOMEM;

	if (me && my_url) {
		snprintf(extra, sizeof(extra), "&to=%s&url=%s&smap=%lld", me, my_url, (long long)smap_v);
		char *u = rb_obj_url(url, "send", o, extra);
		if (u && ft_client_json("POST", u, NULL, RB_ASK_MS, &status, &resp, msg, sizeof(msg)) != 0) {
			snprintf(err, cap, "%s: %s", url, msg);
			rc = -EHOSTUNREACH;
		} else if (u) {
			const char *m = json_string_value(json_object_get(resp, "message"));
			rc = status == 200 ? 0 : status == 404 ? -ENOENT : -EIO;
			if (rc == -EIO)
				snprintf(err, cap, "%s: HTTP %ld: %s", url, status, m ? m : "");
		}
		free(u);
	}
	json_decref(resp);
	free(me);
	free(my_url);
	return rc;
}

/* Control URLs to ask for o: next targets in HRW order now, then the owners in earlier maps. */
static int pull_candidates(tgt_t *t, const tgt_obj_t *o, char urls[][FT_URL_MAX], int max, int64_t *smap_v)
{
	ft_smap_t *cur = ft_smap_current();
	char ids[RB_RANKED + RB_HISTORY][FT_ID_MAX];
	tgt_rebalance_t *rb = t->rebalance;
	int n = 0;

	*smap_v = cur ? cur->version : 0;
	if (cur && cur->n_targets > 0) {
		uint64_t h = o->hash;
		uint64_t *d = malloc((size_t)cur->n_targets * sizeof(*d));
		int *map = malloc((size_t)cur->n_targets * sizeof(*map));
		int left = cur->n_targets;
		for (int i = 0; d && map && i < left; i++) {
			d[i] = cur->target_digests[i];
			map[i] = i;
		}
		for (int rank = 0; d && map && left > 0 && n < max && rank < RB_RANKED + 1; rank++) {
			int k = ft_hrw_pick(h, d, left);
			const ft_node_t *node = &cur->targets[map[k]];
			d[k] = d[left - 1];
			map[k] = map[left - 1];
			left--;
			if (strcmp(node->id, t->id) == 0)
				continue;
			snprintf(ids[n], FT_ID_MAX, "%s", node->id);
			snprintf(urls[n++], FT_URL_MAX, "%s", node->control_url);
		}
		free(d);
		free(map);
	}
	pthread_mutex_lock(&rb->lock);
	for (int i = 0; i < RB_HISTORY && n < max; i++) {
		const ft_node_t *owner =
			rb->hist[i] ? ft_smap_owner(rb->hist[i], o->provider, o->bucket, o->obj, o->obj_len) : NULL;
		int dup = !owner || strcmp(owner->id, t->id) == 0;
		for (int j = 0; j < n && !dup; j++)
			dup = strcmp(ids[j], owner->id) == 0;
		if (dup)
			continue;
		snprintf(ids[n], FT_ID_MAX, "%s", owner->id);
		snprintf(urls[n++], FT_URL_MAX, "%s", owner->control_url);
	}
	pthread_mutex_unlock(&rb->lock);
	ft_smap_put(cur);
	return n;
}

int tgt_rebalance_pull(tgt_obj_t *o, char *err, size_t cap)
{
	tgt_t *t = o->t;
	tgt_rebalance_t *rb = t->rebalance;
	const tgt_mountpath_t *dst = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
	char urls[RB_RANKED + RB_HISTORY][FT_URL_MAX], lerr[300] = "";
	struct stat st;
	int64_t bytes, smap_v;
	int rc = -ENOENT;

	err[0] = '\0';
	/* Another local mountpath (resilver not done yet). */
	for (int i = 0; i < t->n_mountpaths; i++) {
		const tgt_mountpath_t *mp = &t->mountpaths[i];
		int state = tgt_mountpath_slot_state(t, i);
		if (mp == dst || state < 0 || state > 1)
			continue;
		if (fstatat(mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
			continue;
		tgt_obj_t src = *o;
		src.mp = mp;
		if (resilver_local_move(&src, dst, &bytes, lerr, sizeof(lerr)) == 0) {
			o->mp = dst;
			atomic_fetch_add(&rb->pulled, 1);
			return 0;
		}
	}
	if (!pull_window_open(t))
		return -ENOENT;
	int n = pull_candidates(t, o, urls, RB_RANKED + RB_HISTORY, &smap_v);
	for (int i = 0; i < n; i++) {
		int r = ask_send(t, o, urls[i], smap_v, lerr, sizeof(lerr));
		if (r == 0 && fstatat(dst->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			o->mp = dst;
			atomic_fetch_add(&rb->pulled, 1);
			ft_debug("pull %s/%s from %s", o->bucket, o->obj, urls[i]);
			return 0;
		}
		if (r != 0 && r != -ENOENT && (rc == -ENOENT || rc == -EHOSTUNREACH)) {
			snprintf(err, cap, "%s", lerr); /* an answered error outranks an unreachable target */
			rc = r;
		}
	}
	/* A walker may have delivered it while we asked. */
	if (fstatat(dst->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		o->mp = dst;
		return 0;
	}
	atomic_fetch_add(&rb->pull_misses, 1);
	return rc;
}

typedef struct {
	tgt_obj_t o;
	char name[FT_OBJ_NAME_MAX + 1]; /* o.obj points here */
} pull_req_t;

static void *pull_main(void *arg)
{
	pull_req_t *p = arg;
	tgt_rebalance_t *rb = p->o.t->rebalance;
	char err[400] = "";
	int rc = tgt_rebalance_pull(&p->o, err, sizeof(err));

	if (rc == 0)
		ft_info("pull %s/%s: stored here", p->o.bucket, p->name);
	else if (rc == -ENOENT)
		ft_info("pull %s/%s: no target has it", p->o.bucket, p->name);
	else
		rb_note_error(p->o.t, p->name, err);
	free(p);
	atomic_fetch_sub(&rb->pulls_running, 1);
	return NULL;
}

/*
 * POST /v1/rebalance/pull?provider=&bucket=&obj=: what a GET miss does, on demand. Answers 202 and
 * pulls on a thread of its own: the object comes in through this same control server, whose
 * thread must not be the one waiting for it. Outcome: the object appears, or "pull_misses" grows.
 */
void rb_pull_now(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	tgt_rebalance_t *rb = t->rebalance;
	pthread_attr_t attr;
	pthread_t th;
	pull_req_t *p;
	struct stat st;
	tgt_obj_t o;

	if (rb_query_obj(t, req, resp, &o) != 0)
		return;
	if (fstatat(o.mp->root_fd, o.rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		resp->status = 200;
		resp->json = json_pack("{s:s}", "result", "present");
		return;
	}
	p = malloc(sizeof(*p));
	if (!p) {
		ft_ctl_error(resp, 500, "out of memory");
		return;
	}
	p->o = o;
	snprintf(p->name, sizeof(p->name), "%s", o.obj);
	p->o.obj = p->name;
	atomic_fetch_add(&rb->pulls_running, 1);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = atomic_load(&rb->stopping) ? EAGAIN : pthread_create(&th, &attr, pull_main, p);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		atomic_fetch_sub(&rb->pulls_running, 1);
		free(p);
		ft_ctl_error(resp, 503, "cannot start a pull now: %s", strerror(rc));
		return;
	}
	resp->status = 202;
	resp->json = json_pack("{s:s}", "result", "started");
}
