/* SPDX-License-Identifier: Apache-2.0 */
/* Target DELETE of an object: unlink, then prune the directories it leaves empty (remote buckets: the backend's copy first). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/cond.h"
#include "obj/wthrough.h"
#include "protect/mirror.h"
#include "target.h"

/*
 * Pruning races with a PUT that has just created (or opened) one of the directories: the PUT
 * retries its mkdir + rename when the rename finds the directory gone (see put.c).
 *
 * REMOTE BUCKETS (write-through, wthrough.c; docs/backends.md "Writes")
 * On a worker, under the object's write-through name lock: DELETE on the backend, then the cached
 * copy. A backend failure changes nothing locally (the backend still has the object, so the cached
 * copy is still right) and answers the backend's status. When the backend says the object was not
 * there, a cached copy is removed all the same and the answer is 404, as a latest-ver revalidation
 * answers for an object deleted on the backend. S3 does not tell a missing key from a deleted one:
 * its DELETE of a missing key succeeds, and so does ours. "?evict=true" is not handled here: it
 * removes only the cached copy (jobs.c).
 *
 * CONDITIONAL DELETE
 * "If-Match: <etag>" deletes only that version: on a worker, under the name lock, so that no PUT
 * publishes between the check and the unlink. Another ETag is 412; no object is 404 (S3 answers
 * that with 204, as for any delete of a missing key). Remote buckets refuse it (501), as they refuse
 * conditional PUTs.
 */

/* The remote bucket's case of tgt_delete_do: under the write-through hold, the backend first. */
static int delete_remote_do(tgt_obj_t *o, int *status, char *msg, size_t cap)
{
	ft_backend_error_t err;
	tgt_hold_t hold;

	tgt_name_hold(o, TGT_HOLD_WRITE, &hold);
	ft_backend_err_t code = tgt_wthrough_delete(o, &err);
	if (code != FT_BACKEND_OK && code != FT_BACKEND_ENOTFOUND) {
		tgt_name_release(&hold);
		ft_warn("DELETE %s: backend: %s", o->rel, err.msg);
		*status = ft_backend_http_status(code);
		snprintf(msg, cap, "object \"%s/%s\": the %s backend did not delete it (%s), nothing removed: %s",
			 o->bucket, o->obj, o->provider, ft_backend_strerror(code), err.msg);
		return -1;
	}
	int rc = tgt_wthrough_uncache(o);
	tgt_name_release(&hold);
	if (rc < 0) {
		*status = 500;
		snprintf(msg, cap,
			 "object \"%s/%s\": deleted on the backend, but its cached copy cannot be removed: %s",
			 o->bucket, o->obj, strerror(-rc));
		return -1;
	}
	if (code == FT_BACKEND_ENOTFOUND) {
		*status = 404;
		if (rc == 1)
			snprintf(msg, cap,
				 "object \"%s://%s/%s\" does not exist on the backend (its cached copy was removed)",
				 o->provider, o->bucket, o->obj);
		else
			snprintf(msg, cap, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
		return 1;
	}
	return 0;
}

/* Unlinks the main copy: 0 or errno. */
static int unlink_main(tgt_obj_t *o)
{
	tgt_obj_locate(o); /* where the name is now: its path, or its hashed file (core/keymap.h) */
	return unlinkat(o->mp->root_fd, o->rel, 0) == 0 ? 0 : errno;
}

/*
 * After unlink_main gave e: the mirror copies and EC slices go too, the slices and replicas on other
 * targets before it returns (blocking for a bucket that has them: a worker). 0 (deleted), 1 (no such
 * object, *status 404) or -1 (*status, msg). Takes the name lock (tgt_mirror_delete): never call it
 * holding it.
 */
static int unlink_rest(tgt_obj_t *o, int e, int *status, char *msg, size_t cap)
{
	if (e != 0) {
		/*
		 * A lost main copy whose mirror copies, slices or replicas remain is still an object (a
		 * GET would rebuild it: a new owner after its owner died): delete those.
		 */
		if (e == ENOENT) {
			int local = tgt_mirror_delete(o);
			if (local + tgt_ec_delete_now(o) > 0) {
				if (local > 0)
					tgt_list_bump(o->t, o->provider, o->bucket);
				return 0;
			}
		}
		/* EISDIR: the name is a directory of other objects, not an object. */
		if (e == ENOENT || e == ENOTDIR || e == EISDIR) {
			*status = 404;
			snprintf(msg, cap, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
			return 1;
		}
		*status = 500;
		snprintf(msg, cap, "object \"%s/%s\": cannot delete: %s", o->bucket, o->obj, strerror(e));
		return -1;
	}
	tgt_list_bump(o->t, o->provider, o->bucket);
	tgt_parent_prune(o->mp, o->rel);
	tgt_publish_drop_other(o);
	tgt_mirror_delete(o);
	tgt_ec_delete_now(o);
	return 0;
}

/* The ais bucket's case of tgt_delete_do. */
static int delete_local_do(tgt_obj_t *o, int *status, char *msg, size_t cap)
{
	return unlink_rest(o, unlink_main(o), status, msg, cap);
}

int tgt_delete_do(tgt_obj_t *o, int *status, char *msg, size_t cap)
{
	*status = 200;
	msg[0] = '\0';
	return tgt_is_remote(o) ? delete_remote_do(o, status, msg, cap) : delete_local_do(o, status, msg, cap);
}

static void respond(ft_req_t *r, tgt_obj_t *o)
{
	char msg[1024];
	int status;

	if (tgt_delete_do(o, &status, msg, sizeof(msg)) == 0)
		ft_resp_bytes(r, 200, NULL, NULL, 0);
	else
		ft_resp_error(r, status, "%s", msg);
}

/* Worker: a DELETE that blocks (a remote bucket's backend, the copies on other targets). */
static void delete_blocking(ft_req_t *r, void *arg)
{
	respond(r, arg);
}

/*
 * Worker: If-Match checked and the main copy removed under the name lock, so that no PUT publishes
 * in between; the copies after it (released before answering).
 */
static void delete_conditional(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	char msg[1024];
	int status;

	tgt_name_lock(o);
	tgt_cond_t c = tgt_write_precondition(o, ft_req_header(r, "If-Match"), NULL);
	int e = c == TGT_COND_OK ? unlink_main(o) : 0;
	tgt_name_unlock(o);
	if (c == TGT_COND_FAILED)
		ft_resp_error(r, 412, "object \"%s/%s\": If-Match does not name its ETag: nothing deleted", o->bucket,
			      o->obj);
	else if (c == TGT_COND_ABSENT)
		ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
	else if (unlink_rest(o, e, &status, msg, sizeof(msg)) == 0)
		ft_resp_bytes(r, 200, NULL, NULL, 0);
	else
		ft_resp_error(r, status, "%s", msg);
}

void tgt_delete(ft_req_t *r, tgt_obj_t *o)
{
	bool cond = ft_req_header(r, "If-Match") != NULL;

	if (cond && tgt_is_remote(o)) {
		ft_resp_error(r, 501, "object \"%s/%s\": conditional deletes are not supported in remote buckets",
			      o->bucket, o->obj);
		return;
	}
	if (tgt_is_remote(o)) {
		ft_req_defer(r, delete_blocking, o); /* blocks on the backend */
		return;
	}
	if (cond)
		ft_req_defer(r, delete_conditional, o); /* the name lock may wait */
	else if (o->ec_data > 0)
		ft_req_defer(r, delete_blocking, o); /* the copies on other targets go before the answer */
	else
		respond(r, o);
}
