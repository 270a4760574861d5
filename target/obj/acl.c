/* SPDX-License-Identifier: Apache-2.0 */
/* Object ACLs at the target: PUT ?acl (set an object's canned ACL) and the gate of anonymous reads of public data. */
#include "target.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth/auth.h"
#include "base/log.h"
#include "core/acl.h"
#include "core/fcache.h"
#include "core/replica.h"

/*
 * DESIGN
 * An anonymous read (tgt_auth_object said so: GET/HEAD without credentials, public access on)
 * is served when the bucket's ACL is public-read, or else when the object's own ACL is: that one
 * is known only once the LOM is read, so get.c asks tgt_acl_denies just before answering. Paths
 * that answer without a local copy (a cold GET, a shard member, recovery) are refused to an
 * anonymous caller outright unless the bucket is public. Every refusal is the same 401 whether the
 * object exists or not.
 */

void tgt_acl_deny(ft_req_t *r, const tgt_obj_t *o)
{
	ft_debug("acl: anonymous %s of %s/%s from %s refused: not public", ft_req_method_name(r), o->bucket, o->obj,
		 ft_req_peer(r));
	ft_resp_header(r, "WWW-Authenticate", "Bearer realm=\"fasttier\"");
	ft_resp_error(r, 401, "authentication required: object \"%s/%s\" is not public-read", o->bucket, o->obj);
}

bool tgt_acl_denies(const tgt_obj_t *o, const ft_lom_t *lom)
{
	return o->anonymous && !o->public_read && (lom == NULL || !tgt_acl_public(lom));
}

int tgt_acl_anonymous_gate(ft_req_t *r, tgt_obj_t *o)
{
	if (!o->anonymous || o->public_read)
		return 0;
	if (tgt_shard_wanted(r) || tgt_coldget_wanted(r, o)) {
		tgt_acl_deny(r, o);
		return -1;
	}
	return 0;
}

/* Sets the ACL on every replica of o (the main copy first); 0, -ENOENT (no main copy) or -errno. */
static int set_replicas(tgt_obj_t *o, bool pub)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	int n = tgt_mirror_replicas(o, reps), rc = 0;

	for (int i = 0; i < n; i++) {
		ft_lom_t lom;
		int fd;
		if (tgt_replica_open(o, &reps[i], false, &fd, &lom, NULL) != TGT_REPLICA_OK) {
			if (i == 0)
				return -ENOENT;
			continue; /* a missing extra copy: the mirror job rebuilds it from the main one */
		}
		int e = tgt_acl_set(&lom, pub) != 0 ? -ENOSPC : ft_lom_fset(fd, &lom);
		close(fd);
		tgt_fcache_invalidate(o->t); /* metadata written in place: kept copies of the old one must go */
		if (e != 0 && i == 0)
			return e;
		if (e != 0)
			rc = e;
	}
	return rc;
}

/* Worker: the change under the object's name lock. */
static void put_work(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	bool pub = false;
	int rc;

	tgt_acl_parse(ft_req_query(r, "acl"), &pub); /* checked by tgt_acl_put */
	tgt_name_lock(o);
	rc = set_replicas(o, pub);
	tgt_name_unlock(o);
	if (rc == -ENOENT) {
		ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
		return;
	}
	if (rc != 0) {
		ft_resp_error(r, 500, "object \"%s/%s\": cannot store the ACL: %s", o->bucket, o->obj, strerror(-rc));
		return;
	}
	ft_info("acl: %s/%s is now %s", o->bucket, o->obj, pub ? "public-read" : "private");
	ft_resp_bytes(r, 200, NULL, NULL, 0);
}

void tgt_acl_put(ft_req_t *r, tgt_obj_t *o)
{
	const char *v = ft_req_query(r, "acl");
	bool pub = false;

	if (tgt_acl_parse(v, &pub) != 0) {
		ft_resp_error(r, 400, "acl=\"%s\": only the canned ACLs private and public-read are supported",
			      v != NULL ? v : "");
		return;
	}
	if (pub && !ft_auth()->public_read) {
		ft_resp_error(r, 403,
			      "public-read is not allowed on this cluster: public access is off "
			      "(config allow_public_read)");
		return;
	}
	ft_req_defer(r, put_work, o);
}
