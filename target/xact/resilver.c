/* SPDX-License-Identifier: Apache-2.0 */
/* Resilver: objects follow the mountpath set (local moves, detach, /v1/mountpaths). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "core/fcache.h"
#include "core/lom.h"
#include "target.h"
#include "xact/rebalance.h"

/* ---- moving within this target (resilver) ---- */

/*
 * Copies src_fd (size bytes, metadata lom) into a new work file of dst, verifying the checksum.
 * The work name is written to work. 0, or -errno with err (-EBADMSG: the source is corrupt).
 */
static int copy_to_work(const tgt_t *t, int src_fd, const ft_lom_t *lom, const tgt_mountpath_t *dst, char *work,
			size_t wcap, char *err, size_t cap)
{
	char hex[FT_CKSUM_HEX_MAX];
	int fd = tgt_work_create(dst, work, wcap);
	int rc = 0;

	if (fd < 0) {
		snprintf(err, cap, "cannot create a work file on %s: %s", dst->path, strerror(-fd));
		work[0] = '\0';
		return fd;
	}
	rc = ft_copy_range(src_fd, 0, fd, 0, lom->size);
	if (rc == 0 && lom->cksum_type != FT_CKSUM_NONE) { /* what landed there, read back */
		int rfd = openat(dst->work_fd, work, O_RDONLY | O_CLOEXEC);
		rc = rfd < 0 ? -errno : rb_file_cksum(rfd, lom->size, lom->cksum_type, hex);
		if (rfd >= 0)
			close(rfd);
		if (rc == 0 && strcmp(hex, lom->cksum) != 0)
			rc = -EBADMSG;
	}
	if (rc == 0)
		rc = rb_sync_fd(t, fd);
	if (rc == 0)
		rc = ft_lom_fset(fd, lom);
	close(fd);
	if (rc != 0) {
		snprintf(err, cap, "copy to %s: %s", dst->path,
			 rc == -EBADMSG ? "checksum mismatch (source corrupt, left in place)" : strerror(-rc));
		unlinkat(dst->work_fd, work, 0);
		work[0] = '\0';
	}
	return rc;
}

/*
 * Moves o (on o->mp) to dst on this target. The copy already at dst wins when its mtime is newer
 * or equal (then o's copy is removed). 0 when moved or superseded, 1 when o is gone, -1 with err.
 */
int resilver_local_move(tgt_obj_t *o, const tgt_mountpath_t *dst, int64_t *bytes, char *err, size_t cap)
{
	tgt_t *t = o->t;
	tgt_obj_t d = *o;
	ft_lom_t slom, dlom;
	char work[64] = "";
	ino_t ino;
	int rc;

	d.mp = dst;
	tgt_name_lock(o);
	rc = rb_lom_at(o->mp, o->rel, &slom, &ino);
	if (rc == -ENOENT) {
		rc = 1;
		goto out;
	}
	if (rc != 0) {
		snprintf(err, cap, "on %s: %s, left in place", o->mp->path,
			 rc == -EBADMSG || rc == -ENODATA ? "damaged (metadata or size)" : strerror(-rc));
		rc = -1;
		goto out;
	}
	if (rb_lom_at(dst, o->rel, &dlom, NULL) == 0 && dlom.mtime_ns >= slom.mtime_ns) {
		unlinkat(o->mp->root_fd, o->rel, 0); /* superseded by the copy already in place */
		tgt_parent_prune(o->mp, o->rel);
		rc = 0;
		goto out;
	}
	snprintf(work, sizeof(work), "rb.local.%llu",
		 (unsigned long long)atomic_fetch_add(&t->rebalance->xfer_counter, 1));
	/*
	 * A second name, not a rename: until the source name is removed a crash leaves the object on both
	 * mountpaths, never only in .work, which is emptied at start.
	 */
	if (linkat(o->mp->root_fd, o->rel, dst->work_fd, work, 0) != 0) {
		if (errno != EXDEV && errno != EMLINK && errno != EPERM && errno != EOPNOTSUPP) { /* else: copy */
			snprintf(err, cap, "link to %s: %s", dst->path, strerror(errno));
			work[0] = '\0';
			rc = -1;
			goto out;
		}
		int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			snprintf(err, cap, "open: %s", strerror(errno));
			work[0] = '\0';
			rc = -1;
			goto out;
		}
		rc = copy_to_work(t, fd, &slom, dst, work, sizeof(work), err, cap);
		close(fd);
		if (rc != 0) {
			rc = -1;
			goto out;
		}
	}
	rc = tgt_publish(&d, work, t->cfg.sync);
	if (rc == 0) {
		unlinkat(o->mp->root_fd, o->rel, 0);
		tgt_parent_prune(o->mp, o->rel);
	}
	if (rc != 0) {
		snprintf(err, cap, "publish on %s: %s", dst->path, rc == -ESTALE ? "bucket destroyed" : strerror(-rc));
		if (work[0])
			unlinkat(dst->work_fd, work, 0);
		rc = rc == -ESTALE ? 1 : -1;
		goto out;
	}
	*bytes = (int64_t)slom.size;
out:
	tgt_fcache_invalidate(t); /* a file moved between mountpaths stays linked: kept fds of it must go */
	tgt_name_unlock(o);
	if (rc == 0)
		tgt_list_bump(t, o->provider, o->bucket);
	return rc;
}

/* Detaches slot after a complete walk: seal, sweep what was published meanwhile, close. */
void resilver_finish_detach(tgt_t *t, int slot)
{
	tgt_mountpath_t *mp = &t->mountpaths[slot];
	tgt_mountpath_t real;
	const tgt_mountpath_t *srcs[1];
	size_t left = rb_walk_count(t, mp);

	if (left > 0) { /* moves failed (no space, damaged objects): try once more, else keep it */
		srcs[0] = mp;
		rb_walk_move(t, srcs, 1, -1);
		left = rb_walk_count(t, mp);
	}
	if (left > 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%zu objects could not be moved away: the mountpath stays attached", left);
		rb_note_error(t, mp->path, msg);
		tgt_mountpath_detach_abort(t, slot);
		return;
	}
	int rc = tgt_mountpath_detach_seal(t, slot, &real);
	if (rc != 0) {
		rb_note_error(t, mp->path, strerror(-rc));
		tgt_mountpath_detach_abort(t, slot);
		return;
	}
	srcs[0] = &real;
	rb_walk_move(t, srcs, 1, -1);
	left = rb_walk_count(t, &real);
	if (left > 0) {
		char msg[256];
		snprintf(msg, sizeof(msg),
			 "%zu objects stored during the detach could not be moved and stay on disk, not served", left);
		rb_note_error(t, real.path, msg);
	}
	tgt_mountpath_detach_end(t, slot, &real);
}

static const char *mp_state_name(int st)
{
	return st == 0 ? "active" : st == 1 ? "detaching" : "detached";
}

json_t *resilver_mountpaths_json(tgt_t *t)
{
	json_t *list = json_array();
	int n = __atomic_load_n(&t->n_mountpaths, __ATOMIC_ACQUIRE);

	for (int i = 0; i < n; i++) {
		int st = tgt_mountpath_slot_state(t, i);
		if (st == 2)
			continue;
		json_array_append_new(
			list, json_pack("{s:s, s:s}", "path", t->mountpaths[i].path, "state", mp_state_name(st)));
	}
	return json_pack("{s:s, s:o, s:o}", "node", t->id, "mountpaths", list, "resilver", rb_status_json(t));
}

/* POST /v1/mountpaths {"action": "attach" | "detach", "path": "/abs/dir"}. */
void resilver_mountpath_action(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
	const char *action = json_string_value(json_object_get(msg, "action"));
	const char *path = json_string_value(json_object_get(msg, "path"));
	char err[512] = "", id[RB_ID_MAX];
	tgt_rebalance_t *rb = t->rebalance;
	int rc;

	if (!action || !path) {
		ft_ctl_error(resp, 400, "expected {\"action\": \"attach\" | \"detach\", \"path\": \"/dir\"}");
		goto out;
	}
	snprintf(id, sizeof(id), "resilver-%d", atomic_fetch_add(&rb->resilver_seq, 1) + 1);
	if (strcmp(action, "attach") == 0) {
		rc = tgt_mountpath_attach(t, path, err, sizeof(err));
		if (rc < 0) {
			ft_ctl_error(resp, rc == -EINVAL ? 400 : rc == -EEXIST || rc == -ENOSPC ? 409 : 500, "%s", err);
			goto out;
		}
		ft_info("mountpath %s attached: resilver %s", path, id);
		pthread_mutex_lock(&rb->lock);
		rb_request_walk_locked(t, "resilver", id);
		pthread_mutex_unlock(&rb->lock);
		resp->status = 200;
	} else if (strcmp(action, "detach") == 0) {
		rc = tgt_mountpath_detach_begin(t, path, err, sizeof(err));
		if (rc < 0) {
			ft_ctl_error(resp, rc == -ENOENT ? 404 : rc == -EBUSY || rc == -EPERM ? 409 : 500, "%s", err);
			goto out;
		}
		ft_info("mountpath %s detaching: resilver %s moves its objects away", path, id);
		pthread_mutex_lock(&rb->lock);
		rb->detach_pending[rc] = 1;
		rb_request_walk_locked(t, "resilver", id);
		pthread_mutex_unlock(&rb->lock);
		resp->status = 202;
	} else {
		ft_ctl_error(resp, 400, "unknown action \"%s\" (attach, detach)", action);
		goto out;
	}
	resp->json = resilver_mountpaths_json(t);
	if (resp->json)
		json_object_set_new(resp->json, "resilver_id", json_string(id));
out:
	json_decref(msg);
}
