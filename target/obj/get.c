/* SPDX-License-Identifier: Apache-2.0 */
/* Target GET and HEAD of an object: checked replica, least busy mirror copy, self-healing; conditions; whole or one range. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "core/cond.h"
#include "core/fcache.h"
#include "core/lom.h"
#include "core/objmeta.h"
#include "core/replica.h"
#include "http/util.h"
#include "target.h"

/*
 * DESIGN
 * Hot path (loop thread): open the main copy, check type, metadata and size on the one fd, and
 * serve it with ft_resp_file; a small object read again soon is found in the loop's open-file
 * cache instead (core/fcache.h: one fstat, the fd lent to the response with
 * ft_resp_file_borrowed); a mirrored bucket may serve an extra copy instead, the one on the
 * mountpath with the fewest GET bodies in flight, when its metadata equals the main copy's (so a
 * reader never goes back to an older version). Buckets without mirroring pay two atomic
 * operations for the in-flight counter, no system call.
 * Everything that blocks runs on a worker (ft_req_defer): the checksum of a warm GET when the
 * bucket asks for it (checksum_validate_warm_get), and recovery when the main copy is missing or
 * damaged: repair from a good mirror copy (mirror.c), else restore from EC slices or from whole
 * replicas on other targets (EC's, or the mirror copies of mirror.scope "targets": ec_owner.c), else
 * fetch from the previous owner (rebalance.c), else, in a remote bucket, from its backend again
 * (coldget.c). A damaged object is never served: it answers 500 with a JSON error, is logged, and
 * counted (tgt_integrity_json); nothing found anywhere is 404.
 */

/* The object's entity tag without quotes: the S3 ETag when one was stored, else the checksum. */
/*
 * Conditional request checks (RFC 9110 13.2.2, as S3 applies them). Returns 0 to go on, 304 or
 * 412 for the status to answer.
 */
static int check_conditions(ft_req_t *r, const ft_lom_t *lom)
{
	const char *im = ft_req_header(r, "If-Match");
	const char *inm = ft_req_header(r, "If-None-Match");
	const char *ius = ft_req_header(r, "If-Unmodified-Since");
	const char *ims = ft_req_header(r, "If-Modified-Since");
	time_t mtime = (time_t)(lom->mtime_ns / 1000000000);
	time_t t;

	if (im) {
		if (!tgt_etag_listed(im, tgt_lom_etag(lom), false))
			return 412;
	} else if (ius && ft_date_parse(ius, FT_DATE_HTTP | FT_DATE_HTTP_OBSOLETE, &t) == 0 && mtime > t) {
		return 412;
	}
	if (inm) {
		if (tgt_etag_listed(inm, tgt_lom_etag(lom), true))
			return 304;
	} else if (ims && ft_date_parse(ims, FT_DATE_HTTP | FT_DATE_HTTP_OBSOLETE, &t) == 0 && mtime <= t) {
		return 304;
	}
	return 0;
}

static void meta_headers(ft_req_t *r, const ft_lom_t *lom)
{
	char date[FT_DATE_HTTP_MAX];
	const char *etag = tgt_lom_etag(lom);
	size_t el = strlen(etag);
	char quoted[(FT_LOM_ETAG_MAX > FT_CKSUM_HEX_MAX ? FT_LOM_ETAG_MAX : FT_CKSUM_HEX_MAX) + 2];

	ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(lom->cksum_type));
	ft_resp_header(r, "Ais-Checksum-Value", lom->cksum);
	ft_resp_header(r, "Ais-Version", lom->version);
	ft_resp_header_u64(r, "Ais-Atime", lom->atime_ns > 0 ? (uint64_t)lom->atime_ns : 0);
	if (el > 0) {
		quoted[0] = '"';
		memcpy(quoted + 1, etag, el);
		memcpy(quoted + 1 + el, "\"", 2);
		ft_resp_header(r, "ETag", quoted);
	}
	if (lom->mtime_ns > 0) {
		ft_date_format_http((time_t)(lom->mtime_ns / 1000000000), date);
		ft_resp_header(r, "Last-Modified", date);
	}
	ft_resp_header(r, "Accept-Ranges", "bytes");
	tgt_meta_headers(r, lom);
	uint64_t off, len;
	int parts = 0;
	if (lom->parts[0]) { /* a multipart object: its part count (S3's GetObjectAttributes) */
		tgt_parts_range(lom, 1, &off, &len, &parts);
		if (parts > 0)
			ft_resp_headerf(r, "Ais-S3-Parts", "%d", parts);
	}
}

static void busy_done(void *arg)
{
	atomic_fetch_sub((atomic_int *)arg, 1);
}

/* Closes fd unless the open-file cache lends it (borrowed). */
static void fd_done(int fd, bool borrowed)
{
	if (!borrowed)
		close(fd);
}

/* ft_resp_file, or ft_resp_file_borrowed of an fd the open-file cache lends. */
static void resp_file(ft_req_t *r, bool borrowed, int status, const ft_lom_t *lom, int fd, uint64_t off, uint64_t len)
{
	if (borrowed)
		ft_resp_file_borrowed(r, status, tgt_meta_ctype(lom), fd, (off_t)off, len);
	else
		ft_resp_file(r, status, tgt_meta_ctype(lom), fd, (off_t)off, len);
}

/* resp_file of a GET body, counted in flight on mountpath mp_index until the response is done. */
static void send_body(ft_req_t *r, tgt_t *t, const ft_lom_t *lom, int status, int fd, bool borrowed, uint64_t off,
		      uint64_t len, int mp_index)
{
	atomic_fetch_add(&t->get_busy[mp_index], 1);
	ft_req_on_done(r, busy_done, &t->get_busy[mp_index]);
	resp_file(r, borrowed, status, lom, fd, off, len);
}

/*
 * GET/HEAD ?s3part=N (S3's partNumber): the bytes of part N of a multipart object (an object
 * stored whole is its one part 1) as a 206 with Content-Range and x-amz-mp-parts-count; a part
 * that does not exist is 416 InvalidPartNumber. fd taken.
 */
static void serve_part(ft_req_t *r, tgt_obj_t *o, int fd, bool borrowed, const ft_lom_t *lom, int mp_index)
{
	const char *v = ft_req_query(r, "s3part");
	char *end = NULL;
	long n = strtol(v, &end, 10);
	uint64_t off = 0, len = 0;
	int count = 0;

	int rc = *v && end && *end == '\0' && n >= 1 && n <= 10000 ? tgt_parts_range(lom, n, &off, &len, &count)
								   : -EINVAL;
	if (rc != 0) {
		fd_done(fd, borrowed);
		if (rc == -ENODATA)
			ft_resp_error(r, 501, "object \"%s/%s\": its part layout was not kept", o->bucket, o->obj);
		else if (rc == -EINVAL)
			ft_resp_error(r, 400, "s3part must be an integer between 1 and 10000");
		else
			ft_resp_json(r, 416,
				     json_pack("{s:i, s:s, s:s}", "status", 416, "code", "InvalidPartNumber", "message",
					       "The requested partnumber is not satisfiable"));
		return;
	}
	meta_headers(r, lom);
	if (lom->parts[0])
		ft_resp_headerf(r, "x-amz-mp-parts-count", "%d", count);
	if (len == 0) { /* an empty object: its one part is empty */
		fd_done(fd, borrowed);
		ft_resp_bytes(r, 200, tgt_meta_ctype(lom), NULL, 0);
		return;
	}
	ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1, lom->size);
	if (ft_req_method(r) == FT_HTTP_HEAD)
		resp_file(r, borrowed, 206, lom, fd, off, len);
	else
		send_body(r, o->t, lom, 206, fd, borrowed, off, len, mp_index);
}

/*
 * Answers from a good replica: fd (taken, or lent by the open-file cache when borrowed) with lom, on mountpath mp_index. Conditions, HEAD,
 * whole or one range. Loop thread or worker.
 */
static void serve(ft_req_t *r, tgt_obj_t *o, int fd, bool borrowed, const ft_lom_t *lom, int mp_index)
{
	uint64_t off = 0, len = 0;

	if (tgt_acl_denies(o, lom)) { /* an anonymous read of an object that is not public (acl.c) */
		fd_done(fd, borrowed);
		tgt_acl_deny(r, o);
		return;
	}
	tgt_lru_touch(o);
	int cond = check_conditions(r, lom);
	if (cond == 304) {
		fd_done(fd, borrowed);
		meta_headers(r, lom);
		ft_resp_bytes(r, 304, NULL, NULL, 0);
		return;
	}
	if (cond == 412) {
		fd_done(fd, borrowed);
		ft_resp_error(r, 412,
			      "object \"%s/%s\": a precondition (If-Match or If-Unmodified-Since) does not hold",
			      o->bucket, o->obj);
		return;
	}
	if (ft_req_query(r, "s3part") != NULL) {
		serve_part(r, o, fd, borrowed, lom, mp_index);
		return;
	}
	if (ft_req_method(r) == FT_HTTP_HEAD) {
		meta_headers(r, lom);
		ft_resp_headerf(r, "Ais-Size", "%" PRIu64, lom->size);
		resp_file(r, borrowed, 200, lom, fd, 0, lom->size);
		return;
	}
	switch (ft_range_parse(ft_req_header(r, "Range"), lom->size, &off, &len)) {
	case FT_RANGE_NONE:
		meta_headers(r, lom);
		send_body(r, o->t, lom, 200, fd, borrowed, 0, lom->size, mp_index);
		return;
	case FT_RANGE_OK:
		meta_headers(r, lom);
		ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
				lom->size);
		send_body(r, o->t, lom, 206, fd, borrowed, off, len, mp_index);
		return;
	case FT_RANGE_UNSAT:
		fd_done(fd, borrowed);
		ft_resp_headerf(r, "Content-Range", "bytes */%" PRIu64, lom->size);
		ft_resp_error(r, 416, "range \"%s\" not satisfiable for object \"%s/%s\" of %" PRIu64 " bytes",
			      ft_req_header(r, "Range"), o->bucket, o->obj, lom->size);
		return;
	case FT_RANGE_BAD:
	default:
		fd_done(fd, borrowed);
		ft_resp_error(r, 400, "malformed Range header \"%s\" (expected one range: bytes=a-b, a- or -n)",
			      ft_req_header(r, "Range"));
		return;
	}
}

/*
 * Mirrored bucket, main copy good (fd, lom): the replica on the least busy mountpath. Returns the
 * fd to serve (fd itself, or the copy's after closing fd) and sets *mp_index.
 */
static int least_busy(const tgt_obj_t *o, int fd, const ft_lom_t *lom, int *mp_index)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	int n = tgt_mirror_replicas(o, reps), best = 0, cfd;
	ft_lom_t clom;

	for (int k = 1; k < n; k++)
		if (atomic_load(&o->t->get_busy[reps[k].mp_index]) < atomic_load(&o->t->get_busy[reps[best].mp_index]))
			best = k;
	if (best == 0)
		return fd;
	tgt_replica_state_t s = tgt_replica_open(o, &reps[best], false, &cfd, &clom, NULL);
	if (s != TGT_REPLICA_OK || !tgt_replica_same(lom, &clom)) {
		if (s == TGT_REPLICA_OK)
			close(cfd);
		ft_debug("object %s/%s: mirror copy on %s not used: %s", o->bucket, o->obj,
			 o->t->mountpaths[reps[best].mp_index].path,
			 s == TGT_REPLICA_OK ? "another version" : tgt_replica_state_name(s));
		return fd;
	}
	close(fd);
	*mp_index = reps[best].mp_index;
	return cfd;
}

/* What made an object with no good replica anywhere lost (h from tgt_obj_recover). */
static const char *lost_why(const tgt_heal_t *h)
{
	return h->main != TGT_REPLICA_ABSENT ? tgt_replica_state_name(h->main) : "main copy missing";
}

/* Counts and logs an object found damaged with nothing to repair it from. */
static void note_lost(tgt_obj_t *o, const tgt_heal_t *h, const char *restore_err)
{
	tgt_integrity_count(o->t, TGT_INTEGRITY_LOST);
	ft_metric_error(FT_ME_DAMAGED);
	ft_error("object %s/%s: damaged (%s), no good replica to repair it from%s%s; not served", o->bucket, o->obj,
		 lost_why(h), restore_err[0] ? ": " : "", restore_err);
}

/* The 404 or 500 of an object with no good replica anywhere (tgt_obj_recover's -ENOENT or -EIO). */
static void respond_lost(ft_req_t *r, tgt_obj_t *o, const tgt_heal_t *h, const char *restore_err)
{
	if (!h->existed) {
		ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist", o->provider, o->bucket, o->obj);
		return;
	}
	ft_resp_error(r, 500, "object \"%s/%s\" is damaged (%s) and cannot be served: no good replica%s%s", o->bucket,
		      o->obj, lost_why(h), restore_err[0] ? "; " : "", restore_err);
}

/* The 503 of an object not here whose previous holder cannot be reached: it may come back. */
static void respond_unreachable(ft_req_t *r, tgt_obj_t *o, const char *why)
{
	ft_warn("object %s/%s: not here, and a target that may hold it cannot be reached (%s)", o->bucket, o->obj, why);
	ft_resp_header(r, "Retry-After", "10");
	ft_resp_error(r, 503,
		      "object \"%s://%s/%s\" is not on its owner, and a target that may hold it cannot be reached "
		      "now (%s): try again later",
		      o->provider, o->bucket, o->obj, why);
}

/*
 * Worker: rebuilds o's main copy from EC slices or replicas (also the mirror copies of a bucket with
 * mirror.scope "targets": EC's replicas, core/obj.c), else from its previous owner. 0 when one of them
 * published it; else -errno with err filled (empty when neither knew the object).
 */
static int restore_remote(tgt_obj_t *o, char *err, size_t cap)
{
	char why[256] = "";
	int rc = tgt_ec_restore(o, why, sizeof(why));

	if (rc == 0) {
		ft_warn("object %s/%s: main copy restored from %s on other targets", o->bucket, o->obj,
			o->mirror_targets ? "mirror copies" : "erasure-coded slices or replicas");
		return 0;
	}
	bool used_ec = rc != -ENOENT; /* slices or replicas are known, but did not rebuild it */

	if (used_ec)
		snprintf(err, cap, "EC restore: %s", why[0] ? why : strerror(-rc));
	why[0] = '\0';
	rc = tgt_rebalance_pull(o, why, sizeof(why));
	if (rc == 0) {
		ft_info("object %s/%s: fetched from its previous owner", o->bucket, o->obj);
		return 0;
	}
	if (rc != -ENOENT) {
		size_t used = strlen(err);
		snprintf(err + used, cap - used, "%sfetch from the previous owner: %s", used ? "; " : "",
			 why[0] ? why : strerror(-rc));
	}
	if (rc == -EHOSTUNREACH && used_ec) /* the slices' answer counts too: not only unreachable */
		return -EIO;
	return rc;
}

static void get_remote(ft_req_t *r, void *arg);

#define REFETCH_MAX 3 /* fetches of a remote object a GET makes when it finds no good copy after each */

/*
 * Worker: a remote bucket's object with no good copy here (evicted after the GET found it cached,
 * or damaged, and nothing restored it): its backend has it, so it is fetched again and served (up
 * to REFETCH_MAX times a request: an eviction may strike again between the fetch and the open, or
 * between a restore and the open). A damaged copy set aside is dropped first: the backend's is the
 * one to keep.
 */
static void refetch(ft_req_t *r, tgt_obj_t *o, tgt_heal_t *h)
{
	if (h->existed)
		ft_warn("object %s/%s: no good cached copy (%s): fetched again from its backend", o->bucket, o->obj,
			tgt_replica_state_name(h->main));
	tgt_replica_drop(o, h->aside);
	o->refetched++;
	get_remote(r, o); /* serves the new copy; a failure there answers (the fetch's error, or recover's) */
}

/* Puts o's damaged main copy set aside (if any) back, under its name lock. */
static void put_back(tgt_obj_t *o, char *aside)
{
	tgt_name_lock(o);
	tgt_replica_put_back(o, aside);
	tgt_name_unlock(o);
}

int tgt_obj_recover(tgt_obj_t *o, bool verify, int *fd, ft_lom_t *lom, int *mp_index, tgt_heal_t *h, char *err,
		    size_t cap)
{
	tgt_replica_t reps[FT_MAX_MOUNTPATHS];
	int n = tgt_mirror_replicas(o, reps);
	tgt_heal_t again;

	err[0] = '\0';
	int k = tgt_replica_heal(o, reps, n, verify, fd, lom, h);
	if (k >= 0) {
		*mp_index = reps[k].mp_index;
		return 0;
	}
	int rc = restore_remote(o, err, cap);
	if (rc != 0 && tgt_is_remote(o) && o->refetched < REFETCH_MAX)
		return TGT_RECOVER_REFETCH;
	if (rc == -EHOSTUNREACH && !h->existed) { /* nothing here; a target that may hold it is down */
		put_back(o, h->aside);
		return -EHOSTUNREACH;
	}
	if (rc == 0) {
		n = tgt_mirror_replicas(o, reps); /* a pull may have found it on another mountpath: o->mp moved */
		k = tgt_replica_heal(o, reps, n, verify, fd, lom, &again); /* and the mirror copies from it */
		if (k >= 0) {
			tgt_replica_drop(o, h->aside);
			if (h->existed)
				tgt_integrity_count(o->t, TGT_INTEGRITY_REPAIRED);
			*mp_index = reps[k].mp_index;
			return 0;
		}
		if (tgt_is_remote(o) && o->refetched < REFETCH_MAX) { /* evicted again since: its backend has it */
			tgt_replica_drop(o, again.aside);
			return TGT_RECOVER_REFETCH;
		}
		snprintf(err, cap, "the restored copy is damaged too (%s)", tgt_replica_state_name(again.main));
		h->existed = true;
		tgt_replica_drop(o, again.aside);
	} else if (err[0]) {
		h->existed = true; /* slices or a previous owner know it, but it cannot be rebuilt */
	}
	put_back(o, h->aside);
	if (!h->existed)
		return -ENOENT;
	note_lost(o, h, err);
	return -EIO;
}

/*
 * Worker: the main copy is missing or damaged (tgt_obj_recover): served from what repaired or restored
 * it; else, in a remote bucket, fetched again (refetch); else 404 (nothing there), 503 (a target that
 * may hold it is down) or 500 (damaged).
 */
static void recover(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	bool verify = o->validate_warm_get && ft_req_method(r) != FT_HTTP_HEAD;
	ft_lom_t lom;
	tgt_heal_t h;
	char err[600];
	int fd = -1, mp_index = 0;

	if (tgt_acl_denies(o, NULL)) { /* anonymous: never say whether a private object exists */
		tgt_acl_deny(r, o);
		return;
	}
	int rc = tgt_obj_recover(o, verify, &fd, &lom, &mp_index, &h, err, sizeof(err));
	if (rc == 0)
		serve(r, o, fd, false, &lom, mp_index);
	else if (rc == TGT_RECOVER_REFETCH)
		refetch(r, o, &h);
	else if (rc == -EHOSTUNREACH)
		respond_unreachable(r, o, err);
	else
		respond_lost(r, o, &h, err);
}

/* Worker: checksum-validated warm GET (the bucket's checksum_validate_warm_get). */
static void get_validated(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	tgt_replica_t main_copy = {.mp_index = (int)(o->mp - o->t->mountpaths), .copy = false};
	ft_lom_t lom;
	int fd;

	if (tgt_replica_open(o, &main_copy, true, &fd, &lom, NULL) == TGT_REPLICA_OK)
		serve(r, o, fd, false, &lom, main_copy.mp_index);
	else
		recover(r, o);
}

/* Runs step now on a worker, or defers it to one from the loop thread. */
static void on_worker(ft_req_t *r, tgt_obj_t *o, bool worker, void (*step)(ft_req_t *, void *))
{
	if (worker)
		step(r, o);
	else
		ft_req_defer(r, step, o);
}

/* Whether o's warm GETs on this thread may use the open-file cache: its plain case only (core/fcache.h). */
static bool cacheable(const tgt_obj_t *o, bool worker)
{
	return !worker && !o->validate_warm_get && o->mirror_copies <= 1;
}

/* A hit of the open-file cache for o's main copy on mp_index: served (true), or nothing done. */
static bool serve_cached(ft_req_t *r, tgt_obj_t *o, int mp_index)
{
	ft_lom_t lom;
	int fd;
	tgt_fcache_ref_t *ref = tgt_fcache_get(o, mp_index, &fd, &lom);

	if (ref == NULL)
		return false;
	ft_req_on_done(r, tgt_fcache_release, ref); /* the fd stays open until the response is done */
	serve(r, o, fd, true, &lom, mp_index);
	return true;
}

/* Serves the stored copy (loop thread, or a worker when worker). */
static void get_local(ft_req_t *r, tgt_obj_t *o, bool worker)
{
	int mp_index = (int)(o->mp - o->t->mountpaths);
	tgt_replica_t main_copy = {.mp_index = mp_index, .copy = false};
	bool cache = cacheable(o, worker);
	ft_lom_t lom;
	int fd;

	if (!o->located && o->validate_warm_get && ft_req_method(r) != FT_HTTP_HEAD)
		tgt_obj_locate(o);
	if (o->validate_warm_get && ft_req_method(r) != FT_HTTP_HEAD) {
		on_worker(r, o, worker, get_validated);
		return;
	}
	if (cache && serve_cached(r, o, mp_index))
		return;
	unsigned long gen = tgt_fcache_gen(o->t); /* before the open: a change after it retires the entry */
	struct stat st;
	tgt_replica_state_t s = tgt_replica_open_stat(o, &main_copy, false, &fd, &lom, NULL, &st);
	if (s != TGT_REPLICA_OK && !o->located) {
		/* not a file at its path (route.c left the lookup to this open): its hashed file, if any */
		tgt_obj_locate(o);
		if (o->keyed && cache && serve_cached(r, o, mp_index))
			return;
		if (o->keyed)
			s = tgt_replica_open_stat(o, &main_copy, false, &fd, &lom, NULL, &st);
	}
	o->located = 1; /* a file at o->rel, or looked up */
	if (s != TGT_REPLICA_OK) {
		on_worker(r, o, worker, recover);
		return;
	}
	if (o->mirror_copies > 1 && ft_req_method(r) != FT_HTTP_HEAD)
		fd = least_busy(o, fd, &lom, &mp_index);
	tgt_fcache_ref_t *ref = cache ? tgt_fcache_put(o, mp_index, gen, fd, &lom, &st, false) : NULL;
	if (ref != NULL)
		ft_req_on_done(r, tgt_fcache_release, ref); /* the cache's fd now, lent to the response */
	serve(r, o, fd, ref != NULL, &lom, mp_index);
}

/* Worker: a remote-bucket object that needs its backend; coldget.c answers, or says to serve the stored copy. */
static void get_remote(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;

	if (tgt_coldget_serve(r, o) == 1)
		get_local(r, o, true);
}

void tgt_get(ft_req_t *r, tgt_obj_t *o)
{
	bool cold = tgt_coldget_wanted(r, o); /* the one decision: remote, not cached or revalidating */

	if (cold && !o->located) { /* not a file at its path: looked up, then decided again */
		tgt_obj_locate(o);
		cold = tgt_coldget_wanted(r, o);
	}

	if (ft_req_method(r) == FT_HTTP_GET)
		tgt_hint_note(o, !cold); /* the hints' cursors follow the reads, cached or cold (no I/O) */
	if (ft_req_method(r) == FT_HTTP_GET && tgt_is_remote(o))
		ft_metric_inc(cold ? FT_M_CACHE_MISSES : FT_M_CACHE_HITS);
	if (cold) {
		ft_req_mark_cold(r);
		ft_req_defer(r, get_remote, o);
	} else {
		get_local(r, o, false);
	}
}
