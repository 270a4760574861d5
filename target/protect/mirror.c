/* SPDX-License-Identifier: Apache-2.0 */
/* N-way mirroring: copies on distinct mountpaths of an object's owner (PUT, DELETE, the "mirror" job) or on targets. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/replica.h"
#include "protect/mirror.h"

/*
 * DESIGN
 * The copies' placement, checks and writes are core/replica.c's; this file decides when they are
 * made (a PUT, the "mirror" job) and removed (a DELETE, a lower mirror.copies).
 *
 * mirror.scope "targets": the copies are whole replicas on the targets after the owner in the
 * object's HRW order, made, checked, served to a new owner and removed by protect/ec_owner.c, the
 * way EC keeps its replicas of small objects (core/obj.c maps the setting onto EC's 1+(N-1) with
 * every object replicated). This file only answers the "mirror" job for such a bucket.
 */

int tgt_mirror_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	int n, fd, rc = 0;

	if (o->mirror_copies <= 1)
		return 0;
	n = tgt_mirror_replicas(o, reps);
	if (n < 2)
		return 0;
	fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, cap, "cannot reopen the stored object to copy it: %s", strerror(errno));
		return -1;
	}
	for (int k = 1; k < n && rc == 0; k++) {
		rc = tgt_replica_write(o, &reps[k], fd, lom);
		if (rc != 0)
			snprintf(err, cap, "cannot write the mirror copy on %s: %s",
				 o->t->mountpaths[reps[k].mp_index].path,
				 rc == -ESTALE ? "the bucket was destroyed" : strerror(-rc));
	}
	close(fd);
	return rc == 0 ? 0 : -1;
}

/*
 * Every mountpath, whatever mirror.copies says now: a copy left from an earlier setting must not
 * outlive its object. Under the name lock, which a GET's repair holds from its check through
 * its rewrite: a main copy such a repair re-created between the DELETE's unlink and this call is
 * removed again (a mirrored bucket only: elsewhere nothing re-creates one).
 */
int tgt_mirror_delete(const tgt_obj_t *o)
{
	int removed = 0;

	tgt_name_lock(o);
	if (o->mirror_copies > 1 && unlinkat(o->mp->root_fd, o->rel, 0) == 0)
		tgt_parent_prune(o->mp, o->rel);
	for (int i = 0; i < o->t->n_mountpaths; i++)
		removed += tgt_replica_remove(o, i);
	tgt_name_unlock(o);
	return removed;
}

/*
 * The "mirror" job of a bucket with its copies on targets: the copies left on this target's
 * mountpaths (an earlier scope) go; the replicas on the other targets are checked and re-created.
 */
static int mirror_job_targets(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	int removed = 0, rc;

	tgt_name_lock(o);
	for (int i = 0; i < o->t->n_mountpaths; i++)
		removed += tgt_replica_remove(o, i);
	tgt_name_unlock(o);
	rc = tgt_ec_job_obj(o, bytes, err, cap);
	return rc == 1 && removed > 0 ? 0 : rc;
}

/*
 * Makes the copies mirror.copies asks for from a verified main copy and removes those it no longer
 * asks for. 0 when something was written or removed, 1 when all was in place.
 */
int tgt_mirror_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	bool wanted[FT_MAX_MOUNTPATHS] = {false};
	ft_lom_t lom, clom;
	int n, fd, cfd, rc = 1;

	if (o->mirror_targets)
		return mirror_job_targets(o, bytes, err, cap);
	n = tgt_mirror_replicas(o, reps);
	tgt_name_lock(o);
	tgt_replica_state_t s = tgt_replica_open(o, &reps[0], true, &fd, &lom, bytes);
	if (s != TGT_REPLICA_OK) {
		tgt_name_unlock(o);
		if (s == TGT_REPLICA_ABSENT)
			return 1; /* deleted meanwhile */
		snprintf(err, cap, "main copy on %s: %s; not copied (the scrub job repairs it)", o->mp->path,
			 tgt_replica_state_name(s));
		return -1;
	}
	wanted[reps[0].mp_index] = true;
	for (int k = 1; k < n; k++) {
		wanted[reps[k].mp_index] = true;
		if (tgt_replica_open(o, &reps[k], false, &cfd, &clom, NULL) == TGT_REPLICA_OK) {
			close(cfd);
			if (tgt_replica_same(&lom, &clom))
				continue;
		}
		int wrc = tgt_replica_write(o, &reps[k], fd, &lom);
		if (wrc != 0) {
			snprintf(err, cap, "cannot write the mirror copy on %s: %s",
				 o->t->mountpaths[reps[k].mp_index].path, strerror(-wrc));
			rc = -1;
			break;
		}
		*bytes += (int64_t)lom.size;
		rc = 0;
	}
	for (int i = 0; rc >= 0 && i < o->t->n_mountpaths; i++)
		if (!wanted[i] && tgt_replica_remove(o, i))
			rc = 0;
	tgt_name_unlock(o);
	close(fd);
	return rc;
}
