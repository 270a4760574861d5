/* SPDX-License-Identifier: Apache-2.0 */
/* CompleteMultipartUpload on the target: the part list checked, parts joined into one object, published once. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "base/codec.h"
#include "base/fdio.h"
#include "base/log.h"
#include "base/xsum.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "core/cond.h"
#include "core/lom.h"
#include "http/util.h"
#include "obj/mpu.h"
#include "obj/wthrough.h"
#include "protect/protect.h"
#include "target.h"

/*
 * REMOTE BUCKETS (aws, gcp, azure; docs/backends.md "Writes")
 * The parts are kept and joined as for an ais bucket. Before the object is published, the joined
 * work file goes to the backend in one PUT (wthrough.c, as a single PUT's write-through), under the
 * name's write hold; so an object larger than the backend's single-request limit is refused before
 * any data moves. A backend failure answers the backend's status, caches nothing and leaves the
 * upload as it was, for the client to complete again. Once the backend took the object it is
 * published with the multipart ETag ("<md5 of md5s>-N", what S3 answers; the backend's own ETag of
 * its single PUT differs) and the backend's version and mtime; if that publish fails the object is
 * where it belongs: the old cached copy is removed, the upload retired, and the answer is 200 with
 * "Ais-Cached: false".
 */

/* complete_publish's answers when a condition of the write does not hold (If-Match: no object; any other). */
#define RC_COND_ABSENT (-100001)
#define RC_COND_FAILED (-100002)

typedef struct {
	int part;
	char etag[MD5_HEX];       /* as the client listed it, normalized */
	uint64_t size;            /* from the stored record */
	char ck[FT_XSUM_B64_MAX]; /* the part's S3 checksum as the client listed it, "" if not */
} want_t;

typedef struct {
	tgt_obj_t *o;
	const char *id;
	want_t *want;
	int n;
	uint64_t total;
	const char *body; /* the request body (request memory) */
	int updir;        /* upload directory, -1 once closed */
	int fd;           /* work file, -1 once closed */
	char work[64];    /* its name in .work; "" once renamed or removed */
	ft_cksum_t ck, md5s;
	int ck_live, md5s_live;
	char *buf; /* copy buffer (malloc) */
	completing_t mark;
	int marked;
	char list_md5[FT_CKSUM_HEX_MAX]; /* identifies the requested part list */
	mpu_meta_t meta;                 /* the upload's meta.json: the object's Content-Type and user metadata */
	ft_lom_t lom;
	char etag[FT_LOM_ETAG_MAX]; /* "<md5 hex>-N" */
	char perr[256];             /* why tgt_protect_local/remote failed */
	/* S3 checksum (the upload's algorithm, c->meta.ck_alg): */
	ft_xsum_alg_t xalg;
	bool xfull;   /* FULL_OBJECT: over the data; else COMPOSITE: over the parts' digests */
	ft_xsum_t xs; /* running */
	int xs_live;
	const char *xwant;                    /* the value the request expects (request memory), NULL if none */
	char xsum[FT_XSUM_B64_MAX + 8];       /* the result ("...-N" for COMPOSITE) */
	const char *if_match, *if_none_match; /* conditions of the write (request memory) */
	/* remote buckets: */
	ft_cksum_t body_md5; /* MD5 of the joined object, sent for the backend to check */
	int body_md5_live;
	int not_cached; /* on the backend, but not published here */
} complete_t;

static void complete_release(complete_t *c)
{
	if (c->marked) {
		pthread_mutex_lock(&c->o->t->mpu->lock);
		for (completing_t **pp = &c->o->t->mpu->completing; *pp; pp = &(*pp)->next) {
			if (*pp == &c->mark) {
				*pp = c->mark.next;
				break;
			}
		}
		pthread_cond_broadcast(&c->o->t->mpu->cond);
		pthread_mutex_unlock(&c->o->t->mpu->lock);
		c->marked = 0;
	}
	if (c->ck_live) {
		ft_cksum_abort(&c->ck);
		c->ck_live = 0;
	}
	if (c->md5s_live) {
		ft_cksum_abort(&c->md5s);
		c->md5s_live = 0;
	}
	if (c->xs_live) {
		ft_xsum_abort(&c->xs);
		c->xs_live = 0;
	}
	if (c->body_md5_live) {
		ft_cksum_abort(&c->body_md5);
		c->body_md5_live = 0;
	}
	free(c->buf);
	c->buf = NULL;
	tgt_work_drop(c->o->mp, &c->fd, c->work);
	if (c->updir >= 0) {
		close(c->updir);
		c->updir = -1;
	}
}

static void complete_done_hook(void *arg)
{
	complete_release(arg);
}

/*
 * Parses {"parts":[{"part":N,"etag":"..."}...]} into c->want. Returns 0, or -1 after
 * responding (400 MalformedXML / InvalidArgument / InvalidPart for an unusable ETag).
 * Order is checked by the caller, after the upload is known to exist.
 */
static int complete_parse(ft_req_t *r, complete_t *c, const char *body, size_t len)
{
	json_error_t jerr;
	json_t *j = json_loadb(body, len, 0, &jerr);
	json_t *parts = j ? json_object_get(j, "parts") : NULL;
	ft_cksum_t digest;
	int rc = -1, digest_live = 0;

	if (!json_is_array(parts)) {
		mpu_error(r, 400, "MalformedXML", "complete: expected {\"parts\":[{\"part\":N,\"etag\":\"...\"}]}");
		goto out;
	}
	size_t n = json_array_size(parts);
	if (n == 0 || n > MPU_PARTS_MAX) {
		mpu_error(r, 400, "MalformedXML", "complete: the part list must hold 1..%d parts, not %zu",
			  MPU_PARTS_MAX, n);
		goto out;
	}
	if (ft_cksum_init(&digest, FT_CKSUM_MD5) != 0) {
		mpu_error(r, 500, "InternalError", "complete: out of memory");
		goto out;
	}
	digest_live = 1;
	c->want = ft_req_alloc(r, n * sizeof(*c->want));
	memset(c->want, 0, n * sizeof(*c->want));
	c->n = (int)n;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(parts, i);
		json_t *num = json_object_get(e, "part");
		const char *etag = json_string_value(json_object_get(e, "etag"));
		json_int_t pn = json_is_integer(num) ? json_integer_value(num) : -1;
		if (pn < 1 || pn > MPU_PARTS_MAX || !etag) {
			mpu_error(r, 400, "InvalidArgument",
				  "complete: entry %zu needs a part number 1..%d and an ETag", i, MPU_PARTS_MAX);
			goto out;
		}
		c->want[i].part = (int)pn;
		const char *ck = json_string_value(json_object_get(e, "checksum"));
		if (ck != NULL && strlen(ck) < sizeof(c->want[i].ck))
			strcpy(c->want[i].ck, ck);
		if (mpu_etag_normalize(etag, c->want[i].etag) != 0) {
			mpu_error(r, 400, "InvalidPart", "part %d: ETag \"%.64s\" does not match the stored part",
				  (int)pn, etag);
			goto out;
		}
		char line[48];
		int len = snprintf(line, sizeof(line), "%d %s\n", c->want[i].part, c->want[i].etag);
		ft_cksum_update(&digest, line, (size_t)len);
	}
	ft_cksum_final(&digest, c->list_md5);
	digest_live = 0;
	const char *xw = json_string_value(json_object_get(j, "checksum"));
	if (xw != NULL) {
		char *copy = ft_req_alloc(r, strlen(xw) + 1);
		strcpy(copy, xw);
		c->xwant = copy;
	}
	rc = 0;
out:
	if (digest_live)
		ft_cksum_abort(&digest);
	json_decref(j);
	return rc;
}

static int completing_now(const tgt_t *t, const tgt_mountpath_t *mp, const char *id)
{
	for (completing_t *x = t->mpu->completing; x; x = x->next)
		if (x->mp == mp && strcmp(x->id, id) == 0)
			return 1;
	return 0;
}

/* Registers the completion, after waiting for one of the same upload in progress to end. */
static void complete_mark(complete_t *c)
{
	pthread_mutex_lock(&c->o->t->mpu->lock);
	while (completing_now(c->o->t, c->o->mp, c->id))
		pthread_cond_wait(&c->o->t->mpu->cond, &c->o->t->mpu->lock);
	c->mark.mp = c->o->mp;
	c->mark.id = c->id;
	c->mark.next = c->o->t->mpu->completing;
	c->o->t->mpu->completing = &c->mark;
	c->marked = 1;
	pthread_mutex_unlock(&c->o->t->mpu->lock);
}

/* The S3 checksum of c into e (none when the upload has none). */
static void completed_xsum(const complete_t *c, completed_t *e)
{
	e->xsum_alg[0] = e->xsum[0] = e->xsum_type[0] = '\0';
	if (!c->xsum[0])
		return;
	snprintf(e->xsum_alg, sizeof(e->xsum_alg), "%s", ft_xsum_label(c->xalg));
	snprintf(e->xsum, sizeof(e->xsum), "%s", c->xsum);
	snprintf(e->xsum_type, sizeof(e->xsum_type), "%s", c->xfull ? "FULL_OBJECT" : "COMPOSITE");
}

/* Remembers a successful completion. Under mpu_lock. */
static void recent_add(const complete_t *c)
{
	tgt_mpu_t *m = c->o->t->mpu;
	completed_t *e = &m->recent[m->recent_next];

	m->recent_next = (m->recent_next + 1) % MPU_RECENT;
	memset(e, 0, sizeof(*e));
	e->mp = c->o->mp;
	snprintf(e->id, sizeof(e->id), "%s", c->id);
	memcpy(e->list_md5, c->list_md5, sizeof(e->list_md5));
	memcpy(e->etag, c->etag, sizeof(e->etag));
	e->size = c->total;
	e->parts = c->n;
	e->cksum_type = c->lom.cksum_type;
	memcpy(e->cksum, c->lom.cksum, sizeof(e->cksum));
	memcpy(e->version, c->lom.version, sizeof(e->version));
	completed_xsum(c, e);
}

/* Finds the completion of this upload with this part list; 0 and *out filled, or -1. */
static int recent_find(const complete_t *c, completed_t *out)
{
	tgt_mpu_t *m = c->o->t->mpu;
	int rc = -1;

	pthread_mutex_lock(&m->lock);
	for (int i = 0; i < MPU_RECENT && rc != 0; i++) {
		const completed_t *e = &m->recent[i];
		if (e->mp == c->o->mp && strcmp(e->id, c->id) == 0 && strcmp(e->list_md5, c->list_md5) == 0) {
			*out = *e;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

/* The reply of a successful completion (also for a retry of it). */
static void complete_respond(ft_req_t *r, const completed_t *e)
{
	ft_resp_header(r, "Ais-Checksum-Type", ft_cksum_name(e->cksum_type));
	ft_resp_header(r, "Ais-Checksum-Value", e->cksum);
	ft_resp_header(r, "Ais-Version", e->version);
	ft_resp_headerf(r, "ETag", "\"%s\"", e->etag);
	json_t *j = json_pack("{s:s, s:s, s:I, s:i, s:s, s:s, s:s}", "upload_id", e->id, "etag", e->etag, "size",
			      (json_int_t)e->size, "parts", e->parts, "checksum_type", ft_cksum_name(e->cksum_type),
			      "checksum", e->cksum, "version", e->version);
	if (j != NULL && e->xsum_alg[0])
		json_object_set_new(
			j, "s3_checksum",
			json_pack("{s:s, s:s, s:s}", "algorithm", e->xsum_alg, "value", e->xsum, "type", e->xsum_type));
	ft_resp_json(r, 200, j);
}

/*
 * The S3 checksum of part w (fd): the one the client listed must be the stored one; with the
 * upload's algorithm set every part has one of it, and a COMPOSITE checksum takes in its digest.
 * 0, or -1 after releasing c and responding.
 */
static int part_xsum_check(ft_req_t *r, complete_t *c, const want_t *w, int fd)
{
	char stored[64], want_label[16] = "";
	const char *colon = NULL;
	unsigned char raw[FT_XSUM_RAW_MAX + 4];

	if (mpu_part_checksum(fd, stored, sizeof(stored)) == 0)
		colon = strchr(stored, ':');
	if (w->ck[0] && (colon == NULL || strcmp(colon + 1, w->ck) != 0)) {
		complete_release(c);
		mpu_error(r, 400, "InvalidPart", "part %d: the checksum listed does not match the stored part's",
			  w->part);
		return -1;
	}
	if (c->xalg == FT_XSUM_NONE)
		return 0;
	snprintf(want_label, sizeof(want_label), "%s:", ft_xsum_label(c->xalg));
	if (colon == NULL || strncmp(stored, want_label, strlen(want_label)) != 0) {
		complete_release(c);
		mpu_error(r, 400, "InvalidPart", "part %d has no %s checksum", w->part, ft_xsum_label(c->xalg));
		return -1;
	}
	if (!c->xfull) {
		long n = ft_base64_decode(colon + 1, strlen(colon + 1), raw, sizeof(raw));
		if (n != (long)ft_xsum_digest_len(c->xalg)) {
			complete_release(c);
			mpu_error(r, 400, "InvalidPart", "part %d: its stored checksum is damaged", w->part);
			return -1;
		}
		ft_xsum_update(&c->xs, raw, (size_t)n);
	}
	return 0;
}

/*
 * Every listed part exists with the listed ETag (InvalidPart), then every part but the last is
 * large enough (EntityTooSmall). Fills sizes and the total. Returns 0, or -1 after releasing c and
 * responding (release first: once the response is out, the loop thread may free the request and c).
 */
static int complete_check_parts(ft_req_t *r, complete_t *c)
{
	char md5hex[MD5_HEX];
	uint64_t size = 0;

	c->total = 0;
	for (int i = 0; i < c->n; i++) {
		want_t *w = &c->want[i];
		int fd = mpu_part_open(c->updir, w->part, md5hex, &size);
		if (fd == -ENOENT) {
			complete_release(c);
			mpu_error(r, 400, "InvalidPart", "part %d was not uploaded", w->part);
			return -1;
		}
		if (fd < 0) {
			complete_release(c);
			mpu_error(r, fd == -EBADMSG ? 400 : 500, fd == -EBADMSG ? "InvalidPart" : "InternalError",
				  "part %d cannot be used: %s", w->part, fd == -EBADMSG ? "damaged" : strerror(-fd));
			return -1;
		}
		int ckrc = part_xsum_check(r, c, w, fd);
		close(fd);
		if (ckrc != 0)
			return -1;
		if (strcmp(md5hex, w->etag) != 0) {
			complete_release(c);
			mpu_error(r, 400, "InvalidPart", "part %d: ETag \"%s\" does not match the stored part", w->part,
				  w->etag);
			return -1;
		}
		w->size = size;
		c->total += size;
	}
	for (int i = 0; i + 1 < c->n; i++) {
		if (c->want[i].size < MPU_PART_MIN_SIZE) {
			complete_release(c);
			mpu_error(r, 400, "EntityTooSmall",
				  "part %d is %" PRIu64 " bytes: every part but the last must be at least %llu bytes",
				  c->want[i].part, c->want[i].size, (unsigned long long)MPU_PART_MIN_SIZE);
			return -1;
		}
	}
	return 0;
}

/*
 * Appends len bytes of the part fd in (from offset 0) to the work file: each chunk is read and
 * hashed, then copied in-kernel (the bytes just hashed are written from the buffer where the
 * filesystem cannot copy). Returns 0, -ENODATA when the part is shorter than len, or -errno.
 */
static int append_part(complete_t *c, int in, uint64_t len)
{
	loff_t off = 0;

	while ((uint64_t)off < len) {
		size_t want = len - (uint64_t)off < MPU_COPY_CHUNK ? (size_t)(len - (uint64_t)off) : MPU_COPY_CHUNK;
		ssize_t n = pread(in, c->buf, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA; /* shorter than its record */
		ft_cksum_update(&c->ck, c->buf, (size_t)n);
		if (c->xs_live && c->xfull)
			ft_xsum_update(&c->xs, c->buf, (size_t)n);
		if (c->body_md5_live)
			ft_cksum_update(&c->body_md5, c->buf, (size_t)n);
		loff_t in_off = off, end = off + n;
		while (in_off < end) {
			ssize_t k = copy_file_range(in, &in_off, c->fd, NULL, (size_t)(end - in_off), 0);
			if (k > 0)
				continue;
			if (k < 0 && errno == EINTR)
				continue;
			if (k == 0 || errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
				int rc = ft_write_all(c->fd, c->buf + (in_off - off), (size_t)(end - in_off));
				if (rc != 0)
					return rc;
				in_off = end;
				continue;
			}
			return -errno;
		}
		off = end;
	}
	return 0;
}

/*
 * Concatenates the listed parts into the work file, re-checking each part's record on the fd it
 * copies from. Returns 0; -EBADMSG (a part changed since the check: *bad_part set), or -errno.
 */
static int complete_concat(complete_t *c, int *bad_part)
{
	char md5hex[MD5_HEX];
	uint8_t bin[MD5_LEN];
	uint64_t size = 0;

	for (int i = 0; i < c->n; i++) {
		const want_t *w = &c->want[i];
		int fd = mpu_part_open(c->updir, w->part, md5hex, &size);
		if (fd < 0 || strcmp(md5hex, w->etag) != 0 || size != w->size ||
		    ft_hex_decode(md5hex, 2 * MD5_LEN, bin, MD5_LEN, 0) != MD5_LEN) {
			if (fd >= 0)
				close(fd);
			*bad_part = w->part;
			return fd < 0 && fd != -ENOENT && fd != -EBADMSG ? fd : -EBADMSG;
		}
		int rc = append_part(c, fd, size);
		close(fd);
		if (rc == -ENODATA) {
			*bad_part = w->part;
			return -EBADMSG;
		}
		if (rc != 0)
			return rc;
		ft_cksum_update(&c->md5s, bin, sizeof(bin));
	}
	return 0;
}

/* Records the S3 ETag in the object's metadata (GET/HEAD send it; see common/lom.h). */
static void lom_set_etag(ft_lom_t *lom, const char etag[FT_LOM_ETAG_MAX])
{
	memcpy(lom->etag, etag, FT_LOM_ETAG_MAX);
}

/*
 * Metadata, rename into place and retirement of the upload directory, serialized with PUTs of
 * the same name (versions) and with bucket removal; the request's If-Match / If-None-Match are
 * checked under the name lock first (RC_COND_*). Returns 0, -ESTALE (bucket gone), -ENOENT
 * (upload aborted meanwhile), -EPIPE (stored, the redundancy failed: c->perr says why), or
 * another -errno. The EC slices go out after the name lock is released (protect/protect.h).
 */
static int complete_publish(complete_t *c)
{
	tgt_obj_t *o = c->o;
	tgt_t *t = o->t;
	int rc, fd = -1;

	tgt_name_lock(o);
	tgt_cond_t cond = tgt_write_precondition(o, c->if_match, c->if_none_match);
	if (cond != TGT_COND_OK) {
		tgt_name_unlock(o);
		return cond == TGT_COND_ABSENT ? RC_COND_ABSENT : RC_COND_FAILED;
	}
	if (!tgt_is_remote(o)) /* a remote bucket's object has the backend's version */
		tgt_next_version(o, c->lom.version, sizeof(c->lom.version));
	rc = ft_lom_fset(c->fd, &c->lom);
	if (rc == 0) {
		tgt_publish_lock_shared(t);
		pthread_mutex_lock(&c->o->t->mpu->lock);
		if (!tgt_bucket_alive(o))
			rc = -ESTALE;
		else if (!mpu_upload_present(o->mp, c->id, c->updir))
			rc = -ENOENT;
		else
			rc = tgt_publish_rename(o, c->work, t->cfg.sync);
		if (rc == 0 && mpu_upload_retire(t, o->mp, c->id) != 0)
			ft_warn("upload %s: completed, but its directory could not be retired: %s", c->id,
				strerror(errno));
		if (rc == 0)
			recent_add(c);
		pthread_mutex_unlock(&c->o->t->mpu->lock);
		tgt_publish_unlock(t);
	}
	if (rc == 0 && tgt_protect_local(o, &c->lom, &fd, c->perr, sizeof(c->perr)) != 0)
		rc = -EPIPE;
	tgt_name_unlock(o);
	if (tgt_protect_remote(o, fd, &c->lom, c->perr, sizeof(c->perr)) != 0)
		rc = -EPIPE;
	return rc;
}

/* Responds to a failure of the data phase (after the part checks passed). */
static void complete_fail(ft_req_t *r, complete_t *c, int rc, int bad_part)
{
	const tgt_obj_t *o = c->o;

	complete_release(c);
	if (rc == RC_COND_ABSENT)
		mpu_error(r, 404, "NoSuchKey", "\"%s/%s\" does not exist (If-Match): nothing stored", o->bucket,
			  o->obj);
	else if (rc == RC_COND_FAILED)
		mpu_error(r, 412, "PreconditionFailed", "\"%s/%s\": a precondition (%s) does not hold: nothing stored",
			  o->bucket, o->obj, c->if_none_match ? "If-None-Match" : "If-Match");
	else if (rc == -EBADMSG)
		mpu_error(r, 400, "InvalidPart",
			  "part %d changed or was damaged while completing \"%s/%s\"; nothing stored", bad_part,
			  o->bucket, o->obj);
	else if (rc == -ENOENT)
		mpu_no_such_upload(r, o, c->id);
	else if (rc == -ESTALE)
		mpu_error(r, 404, "NoSuchBucket", "bucket \"%s\" was destroyed while \"%s\" was being completed",
			  o->bucket, o->obj);
	else if (rc == -ENOTDIR)
		mpu_error(r, 409, "InvalidRequest",
			  "cannot store \"%s/%s\": a component of its path is an existing object", o->bucket, o->obj);
	else if (rc == -EISDIR)
		mpu_error(r, 409, "InvalidRequest", "cannot store \"%s/%s\": the name is a directory of other objects",
			  o->bucket, o->obj);
	else if (rc == -ENOSPC || rc == -EDQUOT)
		mpu_error(r, 507, "InsufficientStorage", "mountpath %s is full", o->mp->path);
	else if (rc == -EPIPE)
		mpu_error(r, 500, "InternalError", "\"%s/%s\" stored, but not with the bucket's redundancy: %s",
			  o->bucket, o->obj, c->perr);
	else
		mpu_error(r, 500, "InternalError", "completing \"%s/%s\": %s", o->bucket, o->obj, strerror(-rc));
}

/*
 * The object's S3 checksum once the data is joined: FULL_OBJECT over the bytes, COMPOSITE over the
 * parts' digests with "-<parts>"; checked against the value the request expects (BadDigest,
 * nothing stored). 0, or -1 after responding.
 */
static int xsum_finish(ft_req_t *r, complete_t *c)
{
	if (!c->xs_live) {
		if (c->xwant != NULL) {
			complete_release(c);
			mpu_error(r, 400, "InvalidRequest",
				  "the upload was created without a checksum algorithm: no checksum to compare");
			return -1;
		}
		return 0;
	}
	c->xs_live = 0;
	if (ft_xsum_final(&c->xs, c->xsum) != 0) {
		complete_fail(r, c, -ENOMEM, 0);
		return -1;
	}
	if (!c->xfull) {
		size_t len = strlen(c->xsum);
		snprintf(c->xsum + len, sizeof(c->xsum) - len, "-%d", c->n);
	}
	if (c->xwant != NULL && strcmp(c->xwant, c->xsum) != 0) {
		complete_release(c);
		mpu_error(r, 400, "BadDigest", "The %s you specified did not match the calculated checksum (%s)",
			  ft_xsum_header(c->xalg), c->xsum);
		return -1;
	}
	return 0;
}

/*
 * The part layout kept with the object (GET/HEAD by partNumber): runs of equal sizes,
 * "<size>*<count>,...", in part order; "#<parts>" when it does not fit.
 */
static void parts_layout(const complete_t *c, char *out, size_t cap)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < c->n;) {
		int k = 1;
		while (i + k < c->n && c->want[i + k].size == c->want[i].size)
			k++;
		int w = snprintf(out + used, cap - used, "%s%" PRIu64 "*%d", used ? "," : "", c->want[i].size, k);
		if (w < 0 || (size_t)w >= cap - used) {
			snprintf(out, cap, "#%d", c->n);
			return;
		}
		used += (size_t)w;
		i += k;
	}
}

/* The S3 error code the proxy answers for a backend's refusal mapped to status (as its single PUT's). */
static const char *backend_s3_code(int status)
{
	switch (status) {
	case 403:
		return "AccessDenied";
	case 404:
		return "NoSuchBucket";
	case 501:
		return "NotImplemented";
	case 503:
		return "ServiceUnavailable";
	default:
		return status >= 400 && status < 500 ? "InvalidRequest" : "InternalError";
	}
}

/* Under mpu_lock: the upload retired (if still there) and the completion remembered, for an object not cached. */
static void complete_forget(complete_t *c)
{
	tgt_t *t = c->o->t;

	pthread_mutex_lock(&t->mpu->lock);
	if (mpu_upload_present(c->o->mp, c->id, c->updir) && mpu_upload_retire(t, c->o->mp, c->id) != 0)
		ft_warn("upload %s: completed, but its directory could not be retired: %s", c->id, strerror(errno));
	recent_add(c);
	pthread_mutex_unlock(&t->mpu->lock);
}

/*
 * Remote bucket (see REMOTE BUCKETS): the backend PUT of the joined object, then the publish.
 * Returns 0 (published, or c->not_cached set: on the backend only), -EPIPE as complete_publish, or
 * -1 after responding to a backend failure (nothing cached, the upload kept).
 */
static int complete_remote(ft_req_t *r, complete_t *c)
{
	tgt_obj_t *o = c->o;
	char md5_hex[FT_CKSUM_HEX_MAX];
	ft_backend_meta_t be;
	ft_backend_error_t err;
	tgt_hold_t hold;

	ft_cksum_final(&c->body_md5, md5_hex);
	c->body_md5_live = 0;
	tgt_name_hold(o, TGT_HOLD_WRITE, &hold);
	ft_backend_err_t code = tgt_wthrough_put(o, c->work, c->total, md5_hex,
						 c->lom.content_type[0] ? c->lom.content_type : NULL, &be, &err);
	if (code != FT_BACKEND_OK) {
		if (tgt_wthrough_may_have_written(code) && tgt_wthrough_uncache(o) < 0)
			ft_warn("upload %s of %s: cannot remove the cached copy", c->id, o->rel);
		tgt_name_release(&hold);
		complete_release(c);
		int status = ft_backend_http_status(code);
		ft_warn("upload %s of %s: backend: %s", c->id, o->rel, err.msg);
		mpu_error(r, status, backend_s3_code(status),
			  "\"%s/%s\": the %s backend did not take the object (%s), nothing stored; the upload is kept, "
			  "complete it again: %s",
			  o->bucket, o->obj, o->provider, ft_backend_strerror(code), err.msg);
		return -1;
	}
	tgt_wthrough_lom_meta(&c->lom, &be);
	lom_set_etag(&c->lom, c->etag); /* S3's multipart ETag, not the backend's of its single PUT */
	int rc = complete_publish(c);
	if (rc != 0 && rc != -EPIPE) { /* not published (-EPIPE: published without its redundancy) */
		/* The backend has the new content: an older cached copy must not stay. */
		int u = tgt_wthrough_uncache(o);
		ft_warn("upload %s of %s: stored on the backend, not cached: %s%s", c->id, o->rel,
			rc == -ESTALE ? "the bucket was destroyed meanwhile" : strerror(-rc),
			u < 0 ? "; the old cached copy could not be removed either" : "");
		complete_forget(c);
		c->not_cached = 1;
		rc = 0;
	}
	tgt_name_release(&hold);
	return rc;
}

/* The answer of a completed upload (published, or on the backend only: c->not_cached). */
static void complete_succeeded(ft_req_t *r, complete_t *c)
{
	const tgt_obj_t *o = c->o;
	completed_t e;

	complete_release(c);
	tgt_list_bump(o->t, o->provider, o->bucket);
	ft_info("upload %s completed: %s/%s, %d parts, %" PRIu64 " bytes", c->id, o->bucket, o->obj, c->n, c->total);
	if (recent_find(c, &e) != 0) { /* pushed out of the ring already by 64 other completions */
		memset(&e, 0, sizeof(e));
		snprintf(e.id, sizeof(e.id), "%s", c->id);
		memcpy(e.etag, c->etag, sizeof(e.etag));
		e.size = c->total;
		e.parts = c->n;
		e.cksum_type = c->lom.cksum_type;
		memcpy(e.cksum, c->lom.cksum, sizeof(e.cksum));
		memcpy(e.version, c->lom.version, sizeof(e.version));
		completed_xsum(c, &e);
	}
	if (c->not_cached)
		ft_resp_header(r, "Ais-Cached", "false");
	complete_respond(r, &e);
}

/*
 * A remote bucket's object goes to its backend in one request: refused (400 EntityTooLarge, nothing
 * stored, the upload kept) above the backend's limit. 0, or -1 after responding.
 */
static int complete_size_ok(ft_req_t *r, complete_t *c)
{
	const tgt_obj_t *o = c->o;
	uint64_t max = tgt_is_remote(o) ? tgt_wthrough_put_max(o) : 0;

	if (max == 0 || c->total <= max)
		return 0;
	complete_release(c);
	mpu_error(r, 400, "EntityTooLarge",
		  "\"%s/%s\" would be %" PRIu64 " bytes: the %s backend takes at most %" PRIu64
		  " bytes in one write, and a completion writes the object through in one; nothing stored",
		  o->bucket, o->obj, c->total, o->provider, max);
	return -1;
}

/* Worker: concatenate, verify the size, (remote: write through,) publish. */
static void complete_data(ft_req_t *r, complete_t *c)
{
	const tgt_obj_t *o = c->o;
	ft_cksum_type_t ck_type = o->cksum == FT_CKSUM_NONE ? FT_CKSUM_XXHASH : o->cksum;
	char md5s_hex[FT_CKSUM_HEX_MAX];
	uint64_t avail = 0;
	struct stat st;
	int bad_part = 0, rc;

	if (complete_size_ok(r, c) != 0)
		return;
	if (tgt_mountpath_avail(o->mp, o->t->cfg.reserve_bytes, &avail) == 0 && c->total > avail) {
		complete_fail(r, c, -ENOSPC, 0);
		return;
	}
	c->buf = malloc(MPU_COPY_CHUNK);
	if (!c->buf || ft_cksum_init(&c->ck, ck_type) != 0) {
		complete_fail(r, c, -ENOMEM, 0);
		return;
	}
	c->ck_live = 1;
	if (ft_cksum_init(&c->md5s, FT_CKSUM_MD5) != 0) {
		complete_fail(r, c, -ENOMEM, 0);
		return;
	}
	c->md5s_live = 1;
	if (tgt_is_remote(o)) {
		if (ft_cksum_init(&c->body_md5, FT_CKSUM_MD5) != 0) {
			complete_fail(r, c, -ENOMEM, 0);
			return;
		}
		c->body_md5_live = 1;
	}
	c->fd = tgt_work_create(o->mp, c->work, sizeof(c->work));
	if (c->fd < 0) {
		rc = c->fd;
		c->work[0] = '\0';
		complete_fail(r, c, rc, 0);
		return;
	}
	rc = complete_concat(c, &bad_part);
	/* Never publish anything but exactly the listed parts. */
	if (rc == 0 && fstat(c->fd, &st) != 0)
		rc = -errno;
	if (rc == 0 && (uint64_t)st.st_size != c->total) {
		ft_error("upload %s of %s/%s: concatenation holds %lld bytes, the parts %" PRIu64 "; not published",
			 c->id, o->bucket, o->obj, (long long)st.st_size, c->total);
		rc = -EIO;
	}
	if (rc == 0 && o->t->cfg.sync == FT_SYNC_DATA && fdatasync(c->fd) != 0)
		rc = -errno;
	if (rc == 0 && o->t->cfg.sync == FT_SYNC_FULL && fsync(c->fd) != 0)
		rc = -errno;
	if (rc != 0) {
		complete_fail(r, c, rc, bad_part);
		return;
	}
	if (xsum_finish(r, c) != 0)
		return;
	memset(&c->lom, 0, sizeof(c->lom));
	memcpy(c->lom.content_type, c->meta.content_type, sizeof(c->lom.content_type));
	memcpy(c->lom.user_meta, c->meta.user_meta, sizeof(c->lom.user_meta));
	memcpy(c->lom.hdrs, c->meta.hdrs, sizeof(c->lom.hdrs));
	parts_layout(c, c->lom.parts, sizeof(c->lom.parts));
	if (c->xsum[0] &&
	    (tgt_meta_hdr_add(&c->lom, ft_xsum_header(c->xalg), c->xsum) != 0 ||
	     tgt_meta_hdr_add(&c->lom, "x-amz-checksum-type", c->xfull ? "FULL_OBJECT" : "COMPOSITE") != 0)) {
		complete_fail(r, c, -E2BIG, 0);
		return;
	}
	c->lom.size = c->total;
	c->lom.cksum_type = ck_type;
	ft_cksum_final(&c->ck, c->lom.cksum);
	c->ck_live = 0;
	ft_cksum_final(&c->md5s, md5s_hex);
	c->md5s_live = 0;
	snprintf(c->etag, sizeof(c->etag), "%.32s-%d", md5s_hex, c->n);
	lom_set_etag(&c->lom, c->etag);
	c->lom.atime_ns = c->lom.mtime_ns = ft_now_ns();
	if (tgt_is_remote(o)) {
		rc = complete_remote(r, c);
		if (rc == -1)
			return; /* answered */
	} else {
		rc = complete_publish(c);
	}
	if (rc != 0) {
		complete_fail(r, c, rc, 0);
		return;
	}
	complete_succeeded(r, c);
}

/*
 * A part listed twice in a row with the same ETag counts once (a client that retried an upload of
 * it lists it again); listed twice with different ETags, one of them is not the stored part and the
 * check of the parts refuses it.
 */
static void drop_repeated_parts(complete_t *c)
{
	int k = 0;

	for (int i = 0; i < c->n; i++) {
		if (k > 0 && c->want[i].part == c->want[k - 1].part &&
		    strcmp(c->want[i].etag, c->want[k - 1].etag) == 0)
			continue;
		c->want[k++] = c->want[i];
	}
	c->n = k;
}

/* Worker: parse, find the upload, check order, parts and sizes; then the data phase. */
static void complete_run(ft_req_t *r, void *arg)
{
	complete_t *c = arg;
	const tgt_obj_t *o = c->o;
	completed_t done;

	if (complete_parse(r, c, c->body, strlen(c->body)) != 0)
		return;
	complete_mark(c);
	c->updir = mpu_upload_open(o, c->id, &c->meta);
	if (c->updir < 0) {
		int rc = c->updir;
		complete_release(c);
		if (rc == -ENOENT && recent_find(c, &done) == 0) {
			ft_info("upload %s: completion repeated, answering with its result", c->id);
			complete_respond(r, &done);
			return;
		}
		mpu_upload_open_failed(r, o, c->id, rc);
		return;
	}
	drop_repeated_parts(c);
	for (int i = 1; i < c->n; i++) {
		/* equal numbers left here have different ETags: the part check refuses one (InvalidPart) */
		if (c->want[i].part < c->want[i - 1].part) {
			complete_release(c);
			mpu_error(r, 400, "InvalidPartOrder",
				  "the part list is not in ascending order: part %d follows part %d", c->want[i].part,
				  c->want[i - 1].part);
			return;
		}
	}
	c->xalg = ft_xsum_from_label(c->meta.ck_alg);
	c->xfull = strcmp(c->meta.ck_type, "FULL_OBJECT") == 0;
	if (c->xalg != FT_XSUM_NONE) {
		if (ft_xsum_init(&c->xs, c->xalg) != 0) {
			complete_release(c);
			mpu_error(r, 500, "InternalError", "complete: out of memory");
			return;
		}
		c->xs_live = 1;
	}
	if (complete_check_parts(r, c) != 0)
		return;
	complete_data(r, c);
}

static void complete_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	complete_t *c = arg;

	(void)len;
	if (err) {
		mpu_error(r, 400, "IncompleteBody", "complete: request body incomplete");
		return;
	}
	c->body = body;
	ft_req_defer(r, complete_run, c);
}

void mpu_complete_upload(ft_req_t *r, tgt_obj_t *o, const char *id)
{
	complete_t *c = ft_req_alloc(r, sizeof(*c));

	memset(c, 0, sizeof(*c));
	c->o = o;
	c->id = id;
	c->if_match = ft_req_header(r, "If-Match");
	c->if_none_match = ft_req_header(r, "If-None-Match");
	if (c->if_none_match != NULL && strcmp(c->if_none_match, "*") != 0) {
		mpu_error(r, 501, "NotImplemented", "a completion takes only \"If-None-Match: *\"");
		return;
	}
	if ((c->if_match != NULL || c->if_none_match != NULL) && tgt_is_remote(o)) {
		mpu_error(r, 501, "NotImplemented", "\"%s/%s\": conditional writes are not supported in remote buckets",
			  o->bucket, o->obj);
		return;
	}
	c->updir = c->fd = -1;
	ft_req_on_done(r, complete_done_hook, c);
	ft_req_read_body_all(r, MPU_COMPLETE_BODY_MAX, complete_body, c);
}
