/* SPDX-License-Identifier: Apache-2.0 */
/* Rebalance (objects follow the cluster map) and resilver (objects follow the mountpath set). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"
#include "core/lom.h"
#include "http/util.h"
#include "target.h"
#include "xact/rebalance.h"

/*
 * DESIGN
 * Placement is a function of the map and the mountpath set: the owner is ft_smap_owner over the
 * current Smap, the mountpath tgt_mountpath_pick over the active mountpaths. When either changes,
 * objects are moved to where they now belong by one per-object step, tgt_rebalance_job_obj:
 * another owner -> the object is sent to it over the control port and deleted here (with its
 * mirror copies); this owner but another mountpath -> it is moved locally (rename, or copy and
 * verify across filesystems). A map change first tries tgt_jobs_start_local (job
 * "rebalance-<smap version>", status in the job table); when the job framework refuses, and for
 * every mountpath change, a walk runs: the manager (a service of runner.c) runs one walk at a time
 * as a run of runner.c (walk.c) whose collector walks "<mp>/<provider>/<bucket>/" of every bucket
 * in the BMD (never .work, .copies or .ec) and keeps the misplaced objects, moved on RB_THREADS
 * threads. A newer request (map change, attach, detach) bumps a generation and aborts the running
 * walk; a new one starts with the new placement.
 * Status: GET /v1/rebalance on the control port.
 *
 * TRANSFER (control port, JSON answers only, bodies up to FT_CTL_MAX_BODY): the sender PUTs
 * /v1/rebalance/obj?provider=&bucket=&obj=&xfer=&offset=&total=&lom=N&smap=V in chunks of at most
 * RB_CHUNK bytes; the last chunk's body starts with the N bytes of the encoded LOM (the xattr
 * bytes: version, checksum, ETag, user metadata travel unchanged). The receiver appends to
 * ".work/rb.<xfer>" on the object's mountpath, and on the last chunk verifies the size and the
 * checksum against the LOM, sets the LOM, and publishes under the name lock like a
 * PUT; an object already there with a newer or equal mtime (a client PUT after the map change, or
 * an earlier move) wins and the incoming one is dropped. Only after a 200 does the sender delete
 * its copy, and only if it is still the version it sent (under its name lock).
 * A target that does not own an object in a map at least as new as the sender's refuses it (409);
 * one that does not know the bucket yet while the sender's BMD (&bmd=V) is newer answers 503 and
 * the sender retries the chunk for a while (a joining target gets the BMD just after the map).
 *
 * PULL: a GET that misses on the owner (get.c) calls tgt_rebalance_pull: first the other local
 * mountpaths (a resilver not done yet), then, within RB_PULL_WINDOW_NS of a map change, the next
 * targets in HRW order in the current map (with HRW, the owner before a target joined is the next
 * one in the new order) and the owners in the last RB_HISTORY maps: each is asked
 * (POST /v1/rebalance/send) to move the object here now, as its walker would. The pulling thread
 * must not be a control-port thread of this target (the object comes in through that server):
 * POST /v1/rebalance/pull, the on-demand form, pulls on a thread of its own and answers 202.
 *
 * DETACH: the mountpath leaves the active set at once (mountpath.c), a walk moves its objects
 * away; if some cannot be moved (damaged, no space) it is made active again and the run reports
 * them; else it is sealed (publishes there fail from then on), what was published there between
 * the walk and the seal is moved in a last sweep, and it is detached.
 *
 * Remote-bucket objects cached here move like the others (the cache stays warm); a miss for them
 * goes to the backend through coldget anyway.
 *
 * OWNERSHIP: the state is t->rebalance (tgt_rebalance_t, rebalance.h), allocated by
 * tgt_rebalance_init and freed by tgt_rebalance_fini; its Smap history holds one reference per
 * entry, released by tgt_rebalance_fini. A run owns its item list and BMD reference.
 * A sender holds the name with TGT_HOLD_MOVE (core/namelock.h); rb->lock is never held across I/O.
 */

static const char *const state_names[] = {
	[ST_IDLE] = "idle", [ST_RUNNING] = "running", [ST_FINISHED] = "finished", [ST_ABORTED] = "aborted"};

static void manager_run(void *arg);

int tgt_rebalance_init(tgt_t *t)
{
	tgt_rebalance_t *rb = calloc(1, sizeof(*rb));

	if (!rb)
		return -1;
	pthread_mutex_init(&rb->lock, NULL);
	tgt_run_stats_init(&rb->stats);
	t->rebalance = rb;
	if (tgt_service_start(&rb->manager, 0, manager_run, t) != 0) {
		ft_error("rebalance: cannot start its thread");
		tgt_rebalance_fini(t);
		return -1;
	}
	return 0;
}

void rb_note_error(tgt_t *t, const char *what, const char *msg)
{
	tgt_rebalance_t *rb = t->rebalance;

	tgt_run_stats_error(&rb->stats, what, msg);
	ft_warn("rebalance: %s: %s", what, msg);
}

/* Fills o for name of bucket b found on mp (rel built; -1 if it does not fit). */
int rb_obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const tgt_mountpath_t *mp, const char *name)
{
	int rc = tgt_obj_init(o, t, b, name, strlen(name));

	if (rc == 0 && mp != NULL) {
		o->mp = mp;
		rc = tgt_obj_locate(o); /* its path or its hashed file, on that mountpath */
	}
	return rc;
}

/* The LOM of rel on mp (and its inode); 0, or -errno (-ENOENT: no object there). */
int rb_lom_at(const tgt_mountpath_t *mp, const char *rel, ft_lom_t *lom, ino_t *ino)
{
	struct stat st;
	int fd = openat(mp->root_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	int rc = fstat(fd, &st) != 0 ? -errno : !S_ISREG(st.st_mode) ? -ENOENT : ft_lom_fget(fd, lom);
	if (rc == 0 && (uint64_t)st.st_size != lom->size)
		rc = -EBADMSG;
	if (rc == 0 && ino)
		*ino = st.st_ino;
	close(fd);
	return rc;
}

/* Checksum of fd's first size bytes, as type, into hex. 0 or -errno. */
int rb_file_cksum(int fd, uint64_t size, ft_cksum_type_t type, char hex[FT_CKSUM_HEX_MAX])
{
	static const size_t bufsz = 1 << 20;
	ft_cksum_t ck;
	uint64_t off = 0;
	char *buf = malloc(bufsz);

	if (!buf || ft_cksum_init(&ck, type) != 0) {
		free(buf);
		return -ENOMEM;
	}
	while (off < size) {
		size_t want = size - off < bufsz ? (size_t)(size - off) : bufsz;
		ssize_t n = pread(fd, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? -errno : -EIO;
			ft_cksum_abort(&ck);
			free(buf);
			return e;
		}
		ft_cksum_update(&ck, buf, (size_t)n);
		off += (uint64_t)n;
	}
	ft_cksum_final(&ck, hex);
	free(buf);
	return 0;
}

int rb_sync_fd(const tgt_t *t, int fd)
{
	if (t->cfg.sync == FT_SYNC_DATA && fdatasync(fd) != 0)
		return -errno;
	if (t->cfg.sync == FT_SYNC_FULL && fsync(fd) != 0)
		return -errno;
	return 0;
}

/* ---- the per-object step ---- */

int tgt_rebalance_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	tgt_t *t = o->t;
	ft_smap_t *smap = ft_smap_current();
	const ft_node_t *owner = smap ? ft_smap_owner(smap, o->provider, o->bucket, o->obj, o->obj_len) : NULL;
	int rc;

	const ft_node_t *self = smap ? ft_smap_find(smap, t->id) : NULL;

	*bytes = 0;
	/* In maintenance (not decommissioning) this target keeps what it holds: nothing moves for it. */
	if (!owner || (self && self->flags == FT_NODE_MAINTENANCE && strcmp(owner->id, t->id) != 0)) {
		rc = 1;
	} else if (strcmp(owner->id, t->id) != 0) {
		rc = rb_send_move(o, owner->control_url, smap->version, bytes, err, cap);
		if (rc < 0) {
			char tmp[300];
			snprintf(tmp, sizeof(tmp), "to %s: %s", owner->id, err);
			snprintf(err, cap, "%s", tmp);
		}
	} else {
		const tgt_mountpath_t *dst = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
		rc = dst == o->mp ? 1 : resilver_local_move(o, dst, bytes, err, cap);
	}
	ft_smap_put(smap);
	return rc;
}

/* One run: walk every live mountpath, then finish the detaches asked for. */
static void run_once(tgt_t *t, int gen, const int *detach)
{
	tgt_rebalance_t *rb = t->rebalance;
	const tgt_mountpath_t *srcs[FT_MAX_MOUNTPATHS];
	int n = 0, aborted;

	for (int i = 0; i < t->n_mountpaths; i++) {
		int st = tgt_mountpath_slot_state(t, i);
		if (st == 0 || st == 1) /* active or detaching */
			srcs[n++] = &t->mountpaths[i];
	}
	aborted = rb_walk_move(t, srcs, n, gen);
	for (int i = 0; i < FT_MAX_MOUNTPATHS && !aborted; i++) {
		if (!detach[i])
			continue;
		resilver_finish_detach(t, i);
		pthread_mutex_lock(&rb->lock);
		rb->detach_pending[i] = 0;
		pthread_mutex_unlock(&rb->lock);
	}
	pthread_mutex_lock(&rb->lock);
	rb->end_ns = ft_now_ns();
	atomic_store(&rb->state, aborted ? ST_ABORTED : ST_FINISHED);
	pthread_mutex_unlock(&rb->lock);
	ft_info("%s %s: %s, %lld objects scanned, %lld misplaced, %lld moved (%lld bytes), %lld errors", rb->kind,
		rb->id, aborted ? "aborted (a newer change restarts it)" : "finished",
		(long long)atomic_load(&rb->scanned), (long long)atomic_load(&rb->total),
		(long long)atomic_load(&rb->stats.objects), (long long)atomic_load(&rb->stats.bytes),
		(long long)atomic_load(&rb->stats.errors));
}

/* The manager service (runner.c): runs the walk requested last, if any. */
static void manager_run(void *arg)
{
	tgt_t *t = arg;
	tgt_rebalance_t *rb = t->rebalance;
	int detach[FT_MAX_MOUNTPATHS];

	pthread_mutex_lock(&rb->lock);
	if (rb->stop || !rb->want_walk) {
		pthread_mutex_unlock(&rb->lock);
		return;
	}
	rb->want_walk = 0;
	int gen = atomic_load(&rb->gen);
	memcpy(detach, rb->detach_pending, sizeof(detach));
	snprintf(rb->id, sizeof(rb->id), "%s", rb->want_id);
	snprintf(rb->kind, sizeof(rb->kind), "%s", rb->want_kind);
	snprintf(rb->mode, sizeof(rb->mode), "local");
	rb->note[0] = '\0';
	tgt_run_stats_reset(&rb->stats);
	rb->start_ns = ft_now_ns();
	rb->end_ns = 0;
	atomic_store(&rb->scanned, 0);
	atomic_store(&rb->total, 0);
	atomic_store(&rb->state, ST_RUNNING);
	pthread_mutex_unlock(&rb->lock);
	ft_info("%s %s: started", rb->kind, rb->id);
	run_once(t, gen, detach);
}

/* Asks the manager for a walk (rb->lock held): the walk running now, if abortable, stops. */
void rb_request_walk_locked(tgt_t *t, const char *kind, const char *id)
{
	tgt_rebalance_t *rb = t->rebalance;

	snprintf(rb->want_kind, sizeof(rb->want_kind), "%s", kind);
	snprintf(rb->want_id, sizeof(rb->want_id), "%s", id);
	rb->want_walk = 1;
	atomic_fetch_add(&rb->gen, 1);
	if (rb->run && rb->run_gen >= 0)
		tgt_run_abort(rb->run);
	tgt_service_kick(&rb->manager);
}

/*
 * Starts job id, a rebalance over every bucket (members: the proxy's targets of it, NULL for the
 * target's own). 0, or -1 (a bad id or one that exists, jobs closed, no BMD).
 */
static int start_rebalance_job(tgt_t *t, const char *id, const json_t *members)
{
	tgt_rebalance_t *rb = t->rebalance;

	if (strlen(id) >= sizeof(rb->id) ||
	    tgt_jobs_start_local(t, id, "rebalance", tgt_rebalance_job_obj, NULL, NULL, members) != 0)
		return -1;
	pthread_mutex_lock(&rb->lock);
	snprintf(rb->id, sizeof(rb->id), "%s", id);
	snprintf(rb->kind, sizeof(rb->kind), "rebalance");
	snprintf(rb->mode, sizeof(rb->mode), "job");
	atomic_store(&rb->state, ST_IDLE); /* the job table has its state */
	rb->start_ns = ft_now_ns();
	pthread_mutex_unlock(&rb->lock);
	ft_info("rebalance %s: started as a job (GET /v1/jobs/%s)", id, id);
	return 0;
}

/* Starts a rebalance for the current map: as a local job when the job framework takes it, else here. */
static void start_rebalance(tgt_t *t, int64_t version)
{
	tgt_rebalance_t *rb = t->rebalance;
	char id[RB_ID_MAX];

	snprintf(id, sizeof(id), "rebalance-%lld", (long long)version);
	if (start_rebalance_job(t, id, NULL) == 0)
		return;
	pthread_mutex_lock(&rb->lock);
	rb_request_walk_locked(t, "rebalance", id);
	pthread_mutex_unlock(&rb->lock);
}

void tgt_rebalance_smap_changed(tgt_t *t, const ft_smap_t *prev, const ft_smap_t *cur)
{
	tgt_rebalance_t *rb = t->rebalance;

	pthread_mutex_lock(&rb->lock);
	if (prev) {
		ft_smap_put(rb->hist[RB_HISTORY - 1]);
		memmove(&rb->hist[1], &rb->hist[0], (RB_HISTORY - 1) * sizeof(rb->hist[0]));
		rb->hist[0] = (ft_smap_t *)prev; /* only its reference count changes */
		ft_smap_get(rb->hist[0]);
	}
	rb->last_change_ns = ft_now_ns();
	int disabled = rb->disabled, stopping = rb->stop;
	if (disabled)
		rb->missed = 1;
	pthread_mutex_unlock(&rb->lock);
	ft_info("Smap v%lld: the set of targets changed (%d -> %d targets)%s", (long long)cur->version,
		prev ? prev->n_targets : 0, cur->n_targets, disabled ? ", rebalance disabled" : "");
	rb_recv_sweep(t, cur);
	if (!disabled && !stopping)
		start_rebalance(t, cur->version);
}

/* ---- control port ---- */

int rb_query_i64(const ft_ctl_req_t *req, const char *key, int64_t *out)
{
	const char *v = ft_ctl_query(req, key);
	char *end = NULL;

	if (!v || !*v)
		return -1;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < 0)
		return -1;
	*out = x;
	return 0;
}

/*
 * The object named by the query (provider, bucket, obj), its bucket in the current BMD; o->mp is
 * the mountpath it belongs on here. 0, or -1 after answering 400/404. The name lives in req.
 */
int rb_query_obj(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp, tgt_obj_t *o)
{
	const char *provider = ft_ctl_query(req, "provider"), *bucket = ft_ctl_query(req, "bucket");
	const char *obj = ft_ctl_query(req, "obj"), *why = NULL;
	ft_backend_provider_t bp;

	if (!provider || !bucket || !obj) {
		ft_ctl_error(resp, 400, "%s needs provider, bucket and obj", req->path);
		return -1;
	}
	if (strcmp(provider, "ais") != 0 &&
	    (ft_backend_provider_parse(provider, &bp) != 0 || strcmp(ft_backend_provider_name(bp), provider) != 0)) {
		ft_ctl_error(resp, 400, "unknown provider \"%s\"", provider);
		return -1;
	}
	if (ft_name_check_bucket(bucket, &why) != 0 || ft_name_check_object(obj, strlen(obj), &why) != 0) {
		ft_ctl_error(resp, 400, "invalid name: %s", why ? why : "not allowed");
		return -1;
	}
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, provider, bucket) : NULL;
	int rc = b ? rb_obj_init(o, t, b, NULL, obj) : -1;
	int64_t mine = bmd ? bmd->version : 0, peer = 0;
	ft_bmd_put(bmd);
	if (!b && rb_query_i64(req, "bmd", &peer) == 0 && peer > mine) {
		ft_ctl_error(resp, 503, "bucket %s/%s: target %s holds BMD v%lld, the sender v%lld: retry", provider,
			     bucket, t->id, (long long)mine, (long long)peer);
		return -1;
	}
	if (!b) {
		ft_ctl_error(resp, 404, "bucket %s/%s does not exist on target %s", provider, bucket, t->id);
		return -1;
	}
	if (rc != 0) {
		ft_ctl_error(resp, 400, "object name too long");
		return -1;
	}
	o->mp = tgt_mountpath_pick(t, o->provider, o->bucket, o->obj, o->obj_len);
	return 0;
}

/* Refuses (409) to take or give away o when this target owns it in a map at least as new as peer_v. */
int rb_ownership_conflict(tgt_t *t, const tgt_obj_t *o, int64_t peer_v, int want_owner, ft_ctl_resp_t *resp)
{
	ft_smap_t *m = ft_smap_current();
	const ft_node_t *owner = m ? ft_smap_owner_hash(m, o->hash) : NULL;
	int conflict = 0;

	if (owner && m->version >= peer_v && (strcmp(owner->id, t->id) == 0) != want_owner) {
		ft_ctl_error(resp, 409, "object %s/%s: owner in Smap v%lld is %s", o->bucket, o->obj,
			     (long long)m->version, owner->id);
		conflict = 1;
	}
	ft_smap_put(m);
	return conflict;
}

json_t *rb_status_json(tgt_t *t)
{
	tgt_rebalance_t *rb = t->rebalance;
	json_t *samples = tgt_run_stats_samples(&rb->stats);

	pthread_mutex_lock(&rb->lock);
	int st = atomic_load(&rb->state);
	json_t *j = json_pack(
		"{s:s, s:s, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "node", t->id, "id", rb->id,
		"kind", rb->kind[0] ? rb->kind : "rebalance", "mode", rb->mode[0] ? rb->mode : "local", "state",
		state_names[st], "enabled", !rb->disabled, "scanned", (json_int_t)atomic_load(&rb->scanned),
		"misplaced", (json_int_t)atomic_load(&rb->total), "objects",
		(json_int_t)atomic_load(&rb->stats.objects), "bytes", (json_int_t)atomic_load(&rb->stats.bytes),
		"errors", (json_int_t)atomic_load(&rb->stats.errors), "start", (json_int_t)rb->start_ns, "end",
		(json_int_t)rb->end_ns, "error_samples", samples);
	if (j) {
		json_object_set_new(j, "pulled", json_integer((json_int_t)atomic_load(&rb->pulled)));
		json_object_set_new(j, "pull_misses", json_integer((json_int_t)atomic_load(&rb->pull_misses)));
	}
	if (j && strcmp(rb->mode, "job") == 0)
		json_object_set_new(j, "job", json_string(rb->id));
	pthread_mutex_unlock(&rb->lock);
	return j;
}

/*
 * POST /v1/rebalance {"action": "start" | "enable" | "disable"}; a start with "id" (an operator's,
 * through the proxy) is a job of that id, whatever the map, or 409.
 */
static void rebalance_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));
	const char *id = json_string_value(json_object_get(msg, "id"));
	tgt_rebalance_t *rb = t->rebalance;
	int start = 0;

	if (!action) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"start\" | \"enable\" | \"disable\"}");
		goto out;
	}
	pthread_mutex_lock(&rb->lock);
	if (strcmp(action, "disable") == 0) {
		rb->disabled = 1;
	} else if (strcmp(action, "enable") == 0) {
		rb->disabled = 0;
		start = rb->missed;
		rb->missed = 0;
	} else if (strcmp(action, "start") == 0) {
		start = 1;
		rb->missed = 0;
	} else {
		pthread_mutex_unlock(&rb->lock);
		ft_ctl_error(resp, 400, "unknown action \"%s\" (start, enable, disable)", action);
		goto out;
	}
	pthread_mutex_unlock(&rb->lock);
	if (start && id != NULL) {
		if (start_rebalance_job(t, id, json_object_get(msg, "members")) != 0) {
			ft_ctl_error(resp, 409,
				     "rebalance job \"%.64s\" cannot start on %s: a bad id or one in use, or it is "
				     "shutting down",
				     id, t->id);
			goto out;
		}
	} else if (start) {
		ft_smap_t *m = ft_smap_current();
		start_rebalance(t, m ? m->version : 0);
		ft_smap_put(m);
	}
	resp->status = 200;
	resp->json = rb_status_json(t);
out:
	json_decref(msg);
}

void tgt_rebalance_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *p = req->path, *m = req->method;

	if (strcmp(p, "/v1/rebalance") == 0) {
		if (strcmp(m, "GET") == 0) {
			resp->status = 200;
			resp->json = rb_status_json(t);
		} else if (strcmp(m, "POST") == 0) {
			rebalance_action(t, req, resp);
		} else {
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST)", m, p);
		}
	} else if (strcmp(p, "/v1/rebalance/obj") == 0) {
		if (strcmp(m, "PUT") == 0)
			rb_recv_chunk(t, req, resp);
		else if (strcmp(m, "DELETE") == 0)
			rb_recv_abort(t, req, resp);
		else
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use PUT, DELETE)", m, p);
	} else if (strcmp(p, "/v1/rebalance/send") == 0 || strcmp(p, "/v1/rebalance/pull") == 0) {
		if (strcmp(m, "POST") != 0)
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use POST)", m, p);
		else if (p[14] == 's')
			rb_send_for_peer(t, req, resp);
		else
			rb_pull_now(t, req, resp);
	} else if (strcmp(p, "/v1/mountpaths") == 0) {
		if (strcmp(m, "GET") == 0) {
			resp->status = 200;
			resp->json = resilver_mountpaths_json(t);
		} else if (strcmp(m, "POST") == 0) {
			resilver_mountpath_action(t, req, resp);
		} else {
			ft_ctl_error(resp, 405, "method %s not allowed on %s (use GET, POST)", m, p);
		}
	} else {
		ft_ctl_error(resp, 404, "no such control endpoint: %s %s", m, p);
	}
}

void tgt_rebalance_fini(tgt_t *t)
{
	tgt_rebalance_t *rb = t->rebalance;

	if (!rb)
		return;
	pthread_mutex_lock(&rb->lock);
	rb->stop = 1;
	atomic_store(&rb->stopping, 1);
	atomic_fetch_add(&rb->gen, 1);
	if (rb->run)
		tgt_run_abort(rb->run);
	pthread_mutex_unlock(&rb->lock);
	tgt_service_stop(&rb->manager);
	while (atomic_load(&rb->pulls_running) > 0)
		usleep(10000);
	pthread_mutex_lock(&rb->lock);
	for (int i = 0; i < RB_HISTORY; i++) {
		ft_smap_put(rb->hist[i]);
		rb->hist[i] = NULL;
	}
	pthread_mutex_unlock(&rb->lock);
	tgt_run_stats_destroy(&rb->stats);
	pthread_mutex_destroy(&rb->lock);
	t->rebalance = NULL;
	free(rb);
}
