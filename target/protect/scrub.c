/* SPDX-License-Identifier: Apache-2.0 */
/* Integrity scrub of stored objects: re-read, verify size, metadata and checksum, repair from a mirror or EC. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/replica.h"
#include "target.h"

/*
 * DESIGN
 * One object per call, on a job thread (jobs.c runs job kind "scrub" over the local objects of a
 * bucket). Every replica the bucket's mirror.copies asks for is read whole and checked (size,
 * metadata, checksum) and a bad one is rewritten from a good one (tgt_replica_heal, under the
 * name lock, like a PUT). With no good replica left, the damaged main copy is moved
 * aside and the object rebuilt from its EC slices (tgt_ec_restore); when that fails too, the
 * damaged copy goes back in place (GETs keep answering 500 for it) and the object is reported in
 * the job's error samples.
 */

/* The good main copy's EC slices or replicas on other targets: verified, re-created when bad. */
static int scrub_slices(tgt_obj_t *o, char *err, size_t cap)
{
	char why[256] = "";

	if (o->ec_data <= 0)
		return 0;
	if (tgt_ec_check(o, why, sizeof(why)) < 0) {
		snprintf(err, cap, "EC slices: %s", why);
		return -1;
	}
	return 0;
}

int tgt_scrub_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	int n = tgt_mirror_replicas(o, reps), fd = -1;
	ft_lom_t lom;
	tgt_heal_t h, again;
	char why[256] = "";

	int k = tgt_replica_heal(o, reps, n, true, &fd, &lom, &h);
	*bytes += h.bytes;
	if (k >= 0) {
		close(fd);
		if (h.failed > 0) {
			snprintf(err, cap,
				 "%d damaged or missing replica(s) could not be rewritten (see the target log)",
				 h.failed);
			return -1;
		}
		return scrub_slices(o, err, cap);
	}
	if (!h.existed)
		return 1; /* removed since the job listed it */
	int rc = tgt_ec_restore(o, why, sizeof(why));
	if (rc == 0) {
		k = tgt_replica_heal(o, reps, n, true, &fd, &lom, &again);
		*bytes += again.bytes;
		if (k >= 0) {
			close(fd);
			tgt_replica_drop(o, h.aside);
			tgt_integrity_count(o->t, TGT_INTEGRITY_REPAIRED);
			ft_warn("object %s/%s: main copy restored from erasure-coded slices", o->bucket, o->obj);
			return 0;
		}
		snprintf(why, sizeof(why), "the restored copy is damaged too (%s)", tgt_replica_state_name(again.main));
		tgt_replica_drop(o, again.aside);
	}
	tgt_name_lock(o);
	tgt_replica_put_back(o, h.aside);
	tgt_name_unlock(o);
	tgt_integrity_count(o->t, TGT_INTEGRITY_LOST);
	const char *main_state = h.main != TGT_REPLICA_ABSENT ? tgt_replica_state_name(h.main) : "main copy missing";
	snprintf(err, cap, "unrepairable: %s, no good mirror copy, EC restore: %s", main_state,
		 rc == -ENOENT ? "no slices"
		 : why[0]      ? why
			       : strerror(-rc));
	ft_error("object %s/%s: %s", o->bucket, o->obj, err);
	return -1;
}
