/* SPDX-License-Identifier: Apache-2.0 */
/* Target PUT of an object: stream the body into a work file, then sync, set metadata and rename it into place (remote buckets: after the backend took it). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "base/xsum.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "core/cond.h"
#include "core/lom.h"
#include "http/util.h"
#include "obj/wthrough.h"
#include "protect/protect.h"
#include "target.h"

/*
 * DESIGN
 * The body is written on the loop thread (page-cache writes) into a work file of its own in
 * "<mp>/.work/", checksummed as it arrives. Only a complete body reaches the finalize step, which
 * runs on the worker pool because it may sync to disk: sync per policy, metadata xattr on the work
 * fd, then rename(2) over the final path. The rename is the only thing that makes data visible,
 * so readers see the old version or the new one, never a mix; a failed or cut-short PUT leaves
 * the old version untouched. Finalize steps of PUTs of one name are serialized by the name lock
 * (core/namelock.h) so that versions increase by one per PUT; the publish (core/publish.c) keeps a
 * PUT from landing in a bucket being retired.
 *
 * S3 ETAGS
 * With the query "etag=md5" (the proxy's S3 PUTs) the MD5 of the body is computed while it
 * streams, beside the bucket's checksum (or as it, for an MD5 bucket), and kept in the metadata as
 * the object's ETag: S3 clients compare ETags with MD5s.
 *
 * S3 CHECKSUMS
 * With "Ais-S3-Checksum: <CRC32|CRC32C|CRC64NVME|SHA1|SHA256>" (the proxy's PUTs whose client gave an
 * x-amz-checksum-*, which the proxy checks) that checksum is computed too and kept in the metadata
 * (x-amz-checksum-<alg> and x-amz-checksum-type FULL_OBJECT), served back on GET and HEAD.
 *
 * CLIENT CHECKSUMS
 * "Ais-Checksum-Type: T" with "Ais-Checksum-Value: V" (AIStore's PUT headers; T any bucket type, V
 * its hex, any case) asks the target to check the body: the bucket's own checksum when T is its
 * type, else T computed beside it. A mismatch answers 400 and stores nothing; type "none" checks
 * nothing. The stored checksum stays the bucket's type.
 *
 * CONDITIONAL WRITES
 * "If-None-Match: *" (create only) and "If-Match: <etag>" (replace only that version) are checked
 * in the publish step, under the name lock, against the version stored then (core/cond.h): two
 * racing conditional creates of one name cannot both succeed. A failed condition answers 412 (If-
 * Match on no object: 404) after the body was received, and stores nothing. Remote buckets refuse
 * conditions (501): the backend, not the cached copy, would have to decide.
 *
 * REMOTE BUCKETS (write-through, wthrough.c)
 * The body is received the same way, with its MD5 always computed (the backend checks it). The
 * finalize step then, under the object's write-through name lock, PUTs the work file to the
 * backend and publishes it only after the backend acknowledged it, with the backend's ETag,
 * version and mtime in the metadata (what a latest-ver revalidation compares). A backend failure
 * removes the work file and answers the status mapped from the backend's error: nothing cached.
 * The previous cached copy (if any) stays when the backend refused the write, and is removed when
 * the outcome is unknown (connection lost, timeout, 5xx: the backend may have stored it). If the
 * backend took the object but the local publish fails, the stale cached copy is removed and the
 * PUT answers 200 with "Ais-Cached: false": the object is stored where it belongs.
 *
 * OWNERSHIP
 * put_t lives in ft_req_alloc memory. It owns the work fd, the work file (until renamed) and the
 * checksum states; put_release() frees whatever is still held, explicitly before each error
 * response and, as a backstop, from an ft_req_on_done hook (which runs after the response call).
 */

typedef struct {
	tgt_obj_t *o;
	int fd;        /* work file, -1 once closed */
	char work[64]; /* its name in .work; "" once renamed or removed */
	ft_cksum_t ck;
	ft_cksum_type_t ck_type;
	int ck_live;    /* ck holds state to release */
	ft_cksum_t md5; /* etag=md5 over a non-MD5 bucket checksum */
	int md5_live;
	int want_etag;                  /* etag=md5 asked */
	int want_md5;                   /* etag=md5, or a remote bucket (sent to the backend) */
	char md5_hex[FT_CKSUM_HEX_MAX]; /* the body's MD5 once received (want_md5) */
	uint64_t received;
	int write_err;             /* errno of a failed write, 0 if none */
	const char *if_match;      /* conditions (request memory), NULL for none */
	const char *if_none_match; /* "*" */
	char hex[FT_CKSUM_HEX_MAX];
	ft_xsum_t xs; /* Ais-S3-Checksum asked */
	int xs_live;
	char xs_b64[FT_XSUM_B64_MAX]; /* its value once received, "" if none */
	ft_cksum_type_t cl_type;      /* Ais-Checksum-Type to check, NONE for none */
	const char *cl_want;          /* its Ais-Checksum-Value (request memory) */
	ft_cksum_t cl;                /* cl_type when it is not the bucket's */
	int cl_live;
} put_t;

static void put_release(put_t *p)
{
	if (p->ck_live) {
		ft_cksum_abort(&p->ck);
		p->ck_live = 0;
	}
	if (p->md5_live) {
		ft_cksum_abort(&p->md5);
		p->md5_live = 0;
	}
	if (p->xs_live) {
		ft_xsum_abort(&p->xs);
		p->xs_live = 0;
	}
	if (p->cl_live) {
		ft_cksum_abort(&p->cl);
		p->cl_live = 0;
	}
	tgt_work_drop(p->o->mp, &p->fd, p->work);
}

static void put_done_hook(void *arg)
{
	put_release(arg);
}

/* Releases everything and sends the error for an -errno from the disk. */
static void fail_errno(ft_req_t *r, put_t *p, int e, const char *what)
{
	const tgt_obj_t *o = p->o;

	put_release(p);
	if (e == ENOSPC || e == EDQUOT)
		ft_resp_error(r, 507, "object \"%s/%s\": mountpath %s is full", o->bucket, o->obj, o->mp->path);
	else
		ft_resp_error(r, 500, "object \"%s/%s\": %s: %s", o->bucket, o->obj, what, strerror(e));
}

static void respond_conflict(ft_req_t *r, put_t *p, int rc)
{
	const tgt_obj_t *o = p->o;

	put_release(p);
	/* its path was taken, and so was its hashed file (core/keymap.h): a directory put there by hand */
	ft_resp_error(r, 409, "cannot store \"%s/%s\": neither its path nor its hashed file can hold it (%s)",
		      o->bucket, o->obj, strerror(-rc));
}

/*
 * Under the name lock: version (ais buckets: the next one, and the mtime, so that a later
 * PUT of the name is always newer; remote: the backend's, set by the caller), metadata on the work
 * fd, publish, mirror copies (local disks). Then, without the lock, the EC slices of the version
 * just published, read from an fd opened under the lock: a newer PUT may replace the object
 * meanwhile, and the holders keep the newest version (ec_holder.c). The PUT is answered only after
 * both. 0, -EPIPE (stored, the redundancy failed: perr says why), -ESTALE (bucket gone), the
 * -errno of tgt_publish, or a positive tgt_cond_t when a condition of the write does not hold.
 */
static int publish_locked(put_t *p, ft_lom_t *lom, char *perr, size_t cap)
{
	tgt_obj_t *o = p->o;
	tgt_t *t = o->t;
	int rc, fd = -1;

	tgt_name_lock(o);
	tgt_cond_t cond = tgt_write_precondition(o, p->if_match, p->if_none_match);
	if (cond != TGT_COND_OK) {
		tgt_name_unlock(o);
		return (int)cond;
	}
	if (!tgt_is_remote(o)) {
		tgt_next_version(o, lom->version, sizeof(lom->version));
		lom->atime_ns = lom->mtime_ns = ft_now_ns();
	}
	rc = ft_lom_fset(p->fd, lom);
	if (rc == 0)
		rc = tgt_publish(o, p->work, t->cfg.sync);
	if (rc == 0 && tgt_protect_local(o, lom, &fd, perr, cap) != 0)
		rc = -EPIPE;
	tgt_name_unlock(o);
	if (tgt_protect_remote(o, fd, lom, perr, cap) != 0)
		rc = -EPIPE;
	return rc;
}

/* The 200 of a stored object. */
static void respond_stored(ft_req_t *r, put_t *p, const ft_lom_t *lom)
{
	const tgt_obj_t *o = p->o;

	put_release(p);
	tgt_list_bump(o->t, o->provider, o->bucket);
	ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(lom->cksum_type));
	ft_resp_header(r, "Ais-Checksum-Value", lom->cksum);
	if (lom->version[0])
		ft_resp_header(r, "Ais-Version", lom->version);
	ft_resp_headerf(r, "ETag", "\"%s\"", lom->etag[0] ? lom->etag : lom->cksum);
	if (p->xs_b64[0]) {
		ft_resp_header(r, ft_xsum_header(p->xs.alg), p->xs_b64);
		ft_resp_header(r, "x-amz-checksum-type", "FULL_OBJECT");
	}
	ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/* The error answer for a publish_locked failure (rc != 0). */
static void respond_publish_error(ft_req_t *r, put_t *p, int rc, const char *perr)
{
	const tgt_obj_t *o = p->o;

	if (rc == TGT_COND_FAILED || rc == TGT_COND_ABSENT) {
		put_release(p);
		if (rc == TGT_COND_ABSENT)
			ft_resp_error(r, 404, "object \"%s://%s/%s\" does not exist (If-Match): nothing stored",
				      o->provider, o->bucket, o->obj);
		else
			ft_resp_error(r, 412, "object \"%s/%s\": a precondition (%s) does not hold: nothing stored",
				      o->bucket, o->obj, p->if_none_match ? "If-None-Match" : "If-Match");
	} else if (rc == -EPIPE) {
		put_release(p);
		ft_resp_error(r, 500, "object \"%s/%s\" stored, but not with the bucket's redundancy: %s", o->bucket,
			      o->obj, perr);
	} else if (rc == -ENOTDIR || rc == -EISDIR) {
		respond_conflict(r, p, rc);
	} else if (rc == -ESTALE) {
		put_release(p);
		ft_resp_error(r, 404, "bucket \"%s\" was destroyed while \"%s\" was being stored", o->bucket, o->obj);
	} else {
		fail_errno(r, p, -rc, "cannot store");
	}
}

/* Remote bucket: the backend first, then the cached copy (see REMOTE BUCKETS). */
static void finalize_remote(ft_req_t *r, put_t *p, ft_lom_t *lom)
{
	tgt_obj_t *o = p->o;
	ft_backend_meta_t be;
	ft_backend_error_t err;
	char perr[256];
	tgt_hold_t hold;

	tgt_name_hold(o, TGT_HOLD_WRITE, &hold);
	ft_backend_err_t code = tgt_wthrough_put(o, p->work, p->received, p->md5_hex,
						 lom->content_type[0] ? lom->content_type : NULL, &be, &err);
	if (code != FT_BACKEND_OK) {
		if (tgt_wthrough_may_have_written(code) && tgt_wthrough_uncache(o) < 0)
			ft_warn("PUT %s: cannot remove the cached copy", o->rel);
		tgt_name_release(&hold);
		put_release(p);
		ft_warn("PUT %s: backend: %s", o->rel, err.msg);
		ft_resp_error(r, ft_backend_http_status(code),
			      "object \"%s/%s\": the %s backend did not take it (%s), nothing stored: %s", o->bucket,
			      o->obj, o->provider, ft_backend_strerror(code), err.msg);
		return;
	}
	tgt_wthrough_lom_meta(lom, &be);
	int rc = publish_locked(p, lom, perr, sizeof(perr));
	if (rc != 0 && rc != -EPIPE) { /* not published (-EPIPE: published without its redundancy) */
		/* The backend has the new content: an older cached copy must not stay. */
		int u = tgt_wthrough_uncache(o);
		ft_warn("PUT %s: stored on the backend, not cached: %s%s", o->rel,
			rc == -ESTALE ? "the bucket was destroyed meanwhile" : strerror(-rc),
			u < 0 ? "; the old cached copy could not be removed either" : "");
	}
	tgt_name_release(&hold);
	if (rc == 0) {
		tgt_lru_kick(o->t);
		respond_stored(r, p, lom);
	} else if (rc == -EPIPE) {
		respond_publish_error(r, p, rc, perr);
	} else {
		put_release(p);
		ft_resp_header(r, "Ais-Cached", "false");
		if (lom->version[0])
			ft_resp_header(r, "Ais-Version", lom->version);
		if (lom->etag[0])
			ft_resp_headerf(r, "ETag", "\"%s\"", lom->etag);
		ft_resp_bytes(r, 200, NULL, NULL, 0);
	}
}

/* Worker pool: sync, metadata, (remote: backend,) publish, respond. */
static void finalize(ft_req_t *r, void *arg)
{
	put_t *p = arg;
	tgt_obj_t *o = p->o;
	tgt_t *t = o->t;
	ft_lom_t lom;
	char perr[256];

	if (t->cfg.sync == FT_SYNC_DATA && fdatasync(p->fd) != 0) {
		fail_errno(r, p, errno, "fdatasync");
		return;
	}
	if (t->cfg.sync == FT_SYNC_FULL && fsync(p->fd) != 0) {
		fail_errno(r, p, errno, "fsync");
		return;
	}
	memset(&lom, 0, sizeof(lom));
	tgt_meta_from_req(r, &lom, perr, sizeof(perr)); /* checked in tgt_put */
	lom.size = p->received;
	lom.cksum_type = p->ck_type;
	memcpy(lom.cksum, p->hex, sizeof(lom.cksum));
	lom.atime_ns = lom.mtime_ns = ft_now_ns();
	if (p->want_etag)
		snprintf(lom.etag, sizeof(lom.etag), "%.32s", p->md5_hex); /* an MD5: 32 hex digits */
	if (p->xs_b64[0] && (tgt_meta_hdr_add(&lom, ft_xsum_header(p->xs.alg), p->xs_b64) != 0 ||
			     tgt_meta_hdr_add(&lom, "x-amz-checksum-type", "FULL_OBJECT") != 0)) {
		put_release(p);
		ft_resp_error(r, 400, "object \"%s/%s\": the standard headers leave no room for the checksum",
			      o->bucket, o->obj);
		return;
	}
	if (tgt_is_remote(o)) {
		finalize_remote(r, p, &lom);
		return;
	}
	int rc = publish_locked(p, &lom, perr, sizeof(perr));
	if (rc != 0) {
		respond_publish_error(r, p, rc, perr);
		return;
	}
	respond_stored(r, p, &lom);
}

/* Loop thread: append to the work file and the checksum. -1 stops the body on a write error. */
static int on_data(ft_req_t *r, void *arg, const void *buf, size_t len)
{
	put_t *p = arg;
	int rc;

	(void)r;
	rc = ft_write_all(p->fd, buf, len);
	if (rc != 0) {
		p->write_err = -rc;
		return -1;
	}
	ft_cksum_update(&p->ck, buf, len);
	if (p->md5_live)
		ft_cksum_update(&p->md5, buf, len);
	if (p->xs_live)
		ft_xsum_update(&p->xs, buf, len);
	if (p->cl_live)
		ft_cksum_update(&p->cl, buf, len);
	p->received += len;
	return 0;
}

/* The body's checksum of the client's type against its Ais-Checksum-Value; true after a 400 (nothing stored). */
static bool client_cksum_refused(ft_req_t *r, put_t *p)
{
	char mine[FT_CKSUM_HEX_MAX];

	if (p->cl_live) {
		ft_cksum_final(&p->cl, mine);
		p->cl_live = 0;
	} else {
		memcpy(mine, p->hex, sizeof(mine));
	}
	if (strcasecmp(mine, p->cl_want) == 0)
		return false;
	put_release(p);
	ft_resp_error(r, 400, "object \"%s/%s\": BadCksum: Ais-Checksum-Value %s, the body's %s is %s; nothing stored",
		      p->o->bucket, p->o->obj, p->cl_want, ft_cksum_name(p->cl_type), mine);
	return true;
}

/* Reads Ais-Checksum-Type/-Value into *type and *want; 0, or -1 after responding 400. */
static int client_cksum_headers(ft_req_t *r, const tgt_obj_t *o, ft_cksum_type_t *type, const char **want)
{
	const char *t = ft_req_header(r, "Ais-Checksum-Type"), *v = ft_req_header(r, "Ais-Checksum-Value");

	*type = FT_CKSUM_NONE;
	*want = v;
	if (t == NULL && v == NULL)
		return 0;
	if (t == NULL || ft_cksum_parse(t, type) != 0) {
		ft_resp_error(r, 400, "object \"%s/%s\": Ais-Checksum-Type \"%s\" is not one of none, " FT_CKSUM_NAMES,
			      o->bucket, o->obj, t != NULL ? t : "");
		return -1;
	}
	if (*type != FT_CKSUM_NONE && (v == NULL || v[0] == '\0')) {
		ft_resp_error(r, 400, "object \"%s/%s\": Ais-Checksum-Type %s without an Ais-Checksum-Value", o->bucket,
			      o->obj, t);
		return -1;
	}
	return 0;
}

/* Loop thread: a complete body goes to finalize; anything else removes the work file. */
static void on_end(ft_req_t *r, void *arg, int err)
{
	put_t *p = arg;
	const tgt_obj_t *o = p->o;

	if (p->write_err) {
		fail_errno(r, p, p->write_err, "write");
		return;
	}
	if (err) {
		ft_debug("PUT %s/%s from %s: body failed after %" PRIu64 " bytes: %s", o->bucket, o->obj,
			 ft_req_peer(r), p->received, strerror(-err));
		put_release(p);
		if (err == -ETIMEDOUT)
			ft_resp_error(r, 408, "object \"%s/%s\": request body stalled; nothing stored", o->bucket,
				      o->obj);
		else if (err == -EBADMSG)
			ft_resp_error(r, 400, "object \"%s/%s\": malformed chunked body; nothing stored", o->bucket,
				      o->obj);
		else
			ft_resp_error(r, 400, "object \"%s/%s\": request body incomplete; nothing stored", o->bucket,
				      o->obj);
		return;
	}
	ft_cksum_final(&p->ck, p->hex);
	p->ck_live = 0;
	if (p->md5_live) {
		ft_cksum_final(&p->md5, p->md5_hex);
		p->md5_live = 0;
	} else if (p->want_md5) {
		memcpy(p->md5_hex, p->hex, sizeof(p->md5_hex)); /* the bucket's checksum is the MD5 */
	}
	if (p->xs_live) {
		p->xs_live = 0;
		if (ft_xsum_final(&p->xs, p->xs_b64) != 0)
			p->xs_b64[0] = '\0';
	}
	if (p->cl_type != FT_CKSUM_NONE && client_cksum_refused(r, p))
		return;
	ft_req_defer(r, finalize, p);
}

/* Refuses what cannot be stored before any byte is read. Returns 0, or -1 after responding. */
static int precheck(ft_req_t *r, const tgt_obj_t *o)
{
	int64_t declared = ft_req_content_length(r);
	uint64_t avail = 0;

	if (declared == 0 && !ft_req_header(r, "Content-Length")) {
		ft_resp_error(r, 411, "PUT needs Content-Length or Transfer-Encoding: chunked");
		return -1;
	}
	if (declared <= 0)
		return 0;
	int rc = tgt_mountpath_avail(o->mp, o->t->cfg.reserve_bytes, &avail);
	if (rc != 0) {
		ft_resp_error(r, 500, "mountpath %s: cannot read free space: %s", o->mp->path, strerror(-rc));
		return -1;
	}
	if ((uint64_t)declared > avail) {
		ft_resp_error(r, 507,
			      "object \"%s/%s\" of %lld bytes does not fit: %" PRIu64
			      " bytes available on its mountpath",
			      o->bucket, o->obj, (long long)declared, avail);
		return -1;
	}
	return 0;
}

void tgt_put(ft_req_t *r, tgt_obj_t *o)
{
	const char *etag = ft_req_query(r, "etag");

	if (etag != NULL && strcmp(etag, "md5") != 0) {
		ft_resp_error(r, 400, "unknown etag=\"%s\" (expected etag=md5)", etag);
		return;
	}
	const char *im = ft_req_header(r, "If-Match"), *inm = ft_req_header(r, "If-None-Match");
	if (inm != NULL && strcmp(inm, "*") != 0) {
		ft_resp_error(r, 400, "object \"%s/%s\": a PUT takes only \"If-None-Match: *\"", o->bucket, o->obj);
		return;
	}
	if ((im != NULL || inm != NULL) && tgt_is_remote(o)) {
		ft_resp_error(r, 501, "object \"%s/%s\": conditional PUTs are not supported in remote buckets",
			      o->bucket, o->obj);
		return;
	}
	const char *xs = ft_req_header(r, "Ais-S3-Checksum");
	ft_xsum_alg_t xs_alg = ft_xsum_from_label(xs);
	if (xs != NULL && xs_alg == FT_XSUM_NONE) {
		ft_resp_error(r, 400, "unknown Ais-S3-Checksum \"%s\" (CRC32, CRC32C, CRC64NVME, SHA1 or SHA256)", xs);
		return;
	}
	ft_cksum_type_t cl_type;
	const char *cl_want;
	if (client_cksum_headers(r, o, &cl_type, &cl_want) != 0)
		return;
	if (precheck(r, o) != 0)
		return;
	ft_lom_t meta; /* validated now, stored by finalize */
	char why[200];
	if (tgt_meta_from_req(r, &meta, why, sizeof(why)) != 0) {
		ft_resp_error(r, 400, "object \"%s/%s\": %s", o->bucket, o->obj, why);
		return;
	}
	put_t *p = ft_req_alloc(r, sizeof(*p));
	memset(p, 0, sizeof(*p));
	p->o = o;
	p->if_match = im;
	p->if_none_match = inm;
	p->fd = tgt_work_create(o->mp, p->work, sizeof(p->work));
	if (p->fd < 0) {
		int e = -p->fd;
		p->work[0] = '\0';
		fail_errno(r, p, e, "cannot create work file");
		return;
	}
	p->ck_type = o->cksum == FT_CKSUM_NONE ? FT_CKSUM_XXHASH : o->cksum;
	if (ft_cksum_init(&p->ck, p->ck_type) != 0) {
		fail_errno(r, p, ENOMEM, "checksum");
		return;
	}
	p->ck_live = 1;
	p->want_etag = etag != NULL;
	p->want_md5 = p->want_etag || tgt_is_remote(o);
	if (p->want_md5 && p->ck_type != FT_CKSUM_MD5) {
		if (ft_cksum_init(&p->md5, FT_CKSUM_MD5) != 0) {
			fail_errno(r, p, ENOMEM, "checksum");
			return;
		}
		p->md5_live = 1;
	}
	if (xs_alg != FT_XSUM_NONE) {
		if (ft_xsum_init(&p->xs, xs_alg) != 0) {
			fail_errno(r, p, ENOMEM, "checksum");
			return;
		}
		p->xs_live = 1;
	}
	p->cl_type = cl_type;
	p->cl_want = cl_want;
	if (cl_type != FT_CKSUM_NONE && cl_type != p->ck_type) {
		if (ft_cksum_init(&p->cl, cl_type) != 0) {
			fail_errno(r, p, ENOMEM, "checksum");
			return;
		}
		p->cl_live = 1;
	}
	ft_req_on_done(r, put_done_hook, p);
	ft_req_read_body(r, on_data, on_end, p);
}
