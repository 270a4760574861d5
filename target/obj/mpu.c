/* SPDX-License-Identifier: Apache-2.0 */
/* Target multipart uploads: parts under <mp>/.mpu/<upload id>/, abort, listings, expiry; completion is mpu_complete.c. */
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
#include <strings.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/fdio.h"
#include "base/log.h"
#include "base/xsum.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "core/lom.h"
#include "http/util.h"
#include "obj/mpu.h"
#include "protect/protect.h"
#include "target.h"

/*
 * DESIGN
 * An upload lives on its object's mountpath (HRW, as the object will), so parts, work file and
 * object share one filesystem: "<mp>/.mpu/<id>/meta.json" ({provider, bucket, key, initiated,
 * bucket_created}) plus "part.NNNNN" files, each carrying the xattr user.ft.mpu = "<md5 hex>
 * <size>". Every state change is a rename: start renames a staged directory holding meta.json
 * into .mpu (an upload directory never lacks its meta.json); a part streams into a work file in
 * .work and is renamed over part.NNNNN, so a re-upload replaces it atomically and a cut body
 * leaves nothing; abort renames the upload directory into .work as "rm.*" for the janitor.
 * Uploads survive a restart (.mpu is kept, only .work is emptied) and are never listed as
 * objects (listing walks "<provider>/<bucket>" only).
 *
 * Completion runs on a worker: it checks the list (ascending part numbers, every part present
 * with the given ETag, every part but the last >= 5 MiB), then per part hashes it (the bucket's
 * checksum over the whole object; the binary part MD5s feed "<md5 of md5s>-N") and appends it to
 * a work file with copy_file_range (in-kernel, a reflink where the filesystem can). Each part's
 * xattr is checked again on the very fd it is copied from, so a part replaced meanwhile fails
 * the completion instead of mixing data. Nothing is published unless the work file holds
 * exactly the sum of the listed part sizes. Publishing (rename into place) and retiring the
 * upload directory happen in one critical section, so an abort and a completion never both
 * succeed. A crash before the rename leaves the upload whole (complete again); after it the
 * object is whole.
 *
 * Clients retry a completion whose answer they did not get (timeout, reset). A completion of an
 * upload that is being completed waits for the first one; the last MPU_RECENT completions are
 * remembered (upload, digest of the part list, result), so a retry with the same part list gets
 * the same 200 instead of NoSuchUpload. A restart forgets them (the retry then gets NoSuchUpload).
 *
 * LOCKING
 * mpu_lock guards renames into and out of .mpu, the list of completions in progress (mpu_cond
 * signals an end) and the recent completions; it is held for a few metadata calls only, never
 * while data moves. mpu_lock comes after the name and publish locks (core/namelock.h).
 */

/* ---- small helpers ---- */

void mpu_error(ft_req_t *r, int status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ft_resp_header(r, "Ais-Error-Code", code);
	ft_resp_json(r, status, json_pack("{s:i, s:s, s:s}", "status", status, "message", msg, "code", code));
}

/* Upload ids are made by the proxy: 16..128 URL-safe characters, so they are safe file names. */
static int id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n < MPU_ID_MIN || n > MPU_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
		      c == '_'))
			return 0;
	}
	return 1;
}

/* Strict decimal in [lo, hi]; -1 when s is not one. */
static long parse_num(const char *s, long lo, long hi)
{
	long v = 0;

	if (!s || !*s || strlen(s) > 9)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v < lo || v > hi ? -1 : v;
}

static void part_name(char *buf, size_t cap, int part)
{
	snprintf(buf, cap, "part.%05d", part);
}

/* The part number of a "part.NNNNN" directory entry, or -1 for any other name. */
static int part_of_name(const char *name)
{
	if (strncmp(name, "part.", 5) != 0 || strlen(name) != 10)
		return -1;
	return (int)parse_num(name + 5, 1, MPU_PARTS_MAX);
}

static void upload_rel(char *buf, size_t cap, const char *id)
{
	snprintf(buf, cap, MPU_DIR "/%s", id);
}

/* The ETag a client sent, unquoted and lowercased into out[MD5_HEX]; -1 unless it is 32 hex digits. */
int mpu_etag_normalize(const char *in, char out[MD5_HEX])
{
	size_t n = strlen(in);

	if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
		in++;
		n -= 2;
	}
	if (n != 2 * MD5_LEN)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (ft_hex_digit((unsigned char)in[i]) < 0)
			return -1;
		out[i] = (char)tolower((unsigned char)in[i]);
	}
	out[n] = '\0';
	return 0;
}

/* ---- part records (xattr) ---- */

static int part_record_set(int fd, const char *md5hex, uint64_t size)
{
	char v[80];
	int n = snprintf(v, sizeof(v), "%s %" PRIu64, md5hex, size);

	return fsetxattr(fd, MPU_XATTR, v, (size_t)n, 0) == 0 ? 0 : -errno;
}

/* Reads a part's record: 0, -errno, or -EBADMSG when it is malformed. */
static int part_record_get(int fd, char md5hex[MD5_HEX], uint64_t *size)
{
	char v[80], *end = NULL;
	ssize_t n = fgetxattr(fd, MPU_XATTR, v, sizeof(v) - 1);

	if (n < 0)
		return errno == ENODATA ? -EBADMSG : -errno;
	v[n] = '\0';
	if (n < 2 * MD5_LEN + 2 || v[2 * MD5_LEN] != ' ')
		return -EBADMSG;
	v[2 * MD5_LEN] = '\0';
	if (mpu_etag_normalize(v, md5hex) != 0)
		return -EBADMSG;
	errno = 0;
	unsigned long long s = strtoull(v + 2 * MD5_LEN + 1, &end, 10);
	if (errno != 0 || !end || *end != '\0' || end == v + 2 * MD5_LEN + 1)
		return -EBADMSG;
	*size = s;
	return 0;
}

int mpu_part_checksum(int fd, char *out, size_t cap)
{
	ssize_t n = fgetxattr(fd, MPU_CK_XATTR, out, cap - 1);

	if (n <= 0)
		return -1;
	out[n] = '\0';
	return strchr(out, ':') != NULL ? 0 : -1;
}

/*
 * Opens part N of the upload directory and checks that its record agrees with the file size.
 * Returns the fd with md5hex and *size filled, or -errno (-ENOENT: no such part; -EBADMSG: the
 * part is damaged).
 */
int mpu_part_open(int dir_fd, int part, char md5hex[MD5_HEX], uint64_t *size)
{
	char name[16];
	struct stat st;

	part_name(name, sizeof(name), part);
	int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = part_record_get(fd, md5hex, size);
	if (rc == 0 && fstat(fd, &st) != 0)
		rc = -errno;
	if (rc == 0 && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != *size))
		rc = -EBADMSG;
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* ---- upload directories ---- */

static json_t *meta_to_json(const mpu_meta_t *m)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:s, s:s}", "provider", m->provider, "bucket",
			 m->bucket, "key", m->key, "initiated", (json_int_t)m->initiated, "bucket_created",
			 (json_int_t)m->bucket_created, "content_type", m->content_type, "user_meta", m->user_meta,
			 "hdrs", m->hdrs, "ck_alg", m->ck_alg, "ck_type", m->ck_type);
}

/* Whether an upload started at initiated (ns) has expired by now (mpu_expire_hours; 0 = never). */
static int expired(const tgt_t *t, int64_t initiated, int64_t now)
{
	int64_t hours = t->cfg.mpu_expire_hours;
	return hours > 0 && now - initiated > hours * NS_PER_HOUR;
}

static int copy_str(char *dst, size_t cap, const json_t *j)
{
	const char *s = json_string_value(j);
	if (!s || strlen(s) >= cap)
		return -1;
	strcpy(dst, s);
	return 0;
}

/* Reads meta.json of an upload directory: 0, -errno, or -EBADMSG when it is corrupt. */
static int meta_read(int dir_fd, mpu_meta_t *m)
{
	char *buf = malloc(MPU_META_MAX);
	json_t *j = NULL;
	ssize_t n = 0, got;
	int rc = -EBADMSG;

	if (!buf)
		return -ENOMEM;
	int fd = openat(dir_fd, MPU_META, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	while (n < (ssize_t)MPU_META_MAX && (got = read(fd, buf + n, MPU_META_MAX - (size_t)n)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		n += got;
	}
	j = json_loadb(buf, (size_t)n, 0, NULL);
	if (!j || copy_str(m->provider, sizeof(m->provider), json_object_get(j, "provider")) != 0 ||
	    copy_str(m->bucket, sizeof(m->bucket), json_object_get(j, "bucket")) != 0 ||
	    copy_str(m->key, sizeof(m->key), json_object_get(j, "key")) != 0)
		goto out;
	m->initiated = json_integer_value(json_object_get(j, "initiated"));
	m->bucket_created = json_integer_value(json_object_get(j, "bucket_created"));
	/* Uploads started before metadata was kept have none. */
	m->content_type[0] = m->user_meta[0] = '\0';
	if ((json_object_get(j, "content_type") != NULL &&
	     copy_str(m->content_type, sizeof(m->content_type), json_object_get(j, "content_type")) != 0) ||
	    (json_object_get(j, "user_meta") != NULL &&
	     copy_str(m->user_meta, sizeof(m->user_meta), json_object_get(j, "user_meta")) != 0))
		goto out;
	m->hdrs[0] = m->ck_alg[0] = m->ck_type[0] = '\0';
	if ((json_object_get(j, "hdrs") != NULL &&
	     copy_str(m->hdrs, sizeof(m->hdrs), json_object_get(j, "hdrs")) != 0) ||
	    (json_object_get(j, "ck_alg") != NULL &&
	     copy_str(m->ck_alg, sizeof(m->ck_alg), json_object_get(j, "ck_alg")) != 0) ||
	    (json_object_get(j, "ck_type") != NULL &&
	     copy_str(m->ck_type, sizeof(m->ck_type), json_object_get(j, "ck_type")) != 0))
		goto out;
	rc = 0;
out:
	json_decref(j);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

static int meta_matches(const mpu_meta_t *m, const tgt_obj_t *o)
{
	return strcmp(m->provider, o->provider) == 0 && strcmp(m->bucket, o->bucket) == 0 &&
	       strcmp(m->key, o->obj) == 0 && m->bucket_created == o->bucket_created;
}

/* Whether .mpu/<id> is still the directory dir_fd refers to (not aborted or completed). Under mpu_lock. */
int mpu_upload_present(const tgt_mountpath_t *mp, const char *id, int dir_fd)
{
	char rel[sizeof(MPU_DIR) + MPU_ID_MAX + 2];
	struct stat a, b;

	upload_rel(rel, sizeof(rel), id);
	if (fstatat(mp->root_fd, rel, &a, AT_SYMLINK_NOFOLLOW) != 0 || fstat(dir_fd, &b) != 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Moves .mpu/<id> into .work as "rm.*" for the janitor. Under mpu_lock. 0 or -errno. */
int mpu_upload_retire(tgt_t *t, const tgt_mountpath_t *mp, const char *id)
{
	char rel[sizeof(MPU_DIR) + MPU_ID_MAX + 2], name[MPU_ID_MAX + 64];

	upload_rel(rel, sizeof(rel), id);
	snprintf(name, sizeof(name), "rm.mpu.%llu.%s", (unsigned long long)atomic_fetch_add(&t->mpu->counter, 1), id);
	if (renameat(mp->root_fd, rel, mp->work_fd, name) != 0)
		return -errno;
	tgt_janitor_kick(t);
	return 0;
}

/* Retires the expired upload id (directory dir_fd) unless it is gone already. */
static void upload_expire(tgt_t *t, const tgt_mountpath_t *mp, const char *id, int dir_fd, const mpu_meta_t *m)
{
	pthread_mutex_lock(&t->mpu->lock);
	if (mpu_upload_present(mp, id, dir_fd) && mpu_upload_retire(t, mp, id) == 0)
		ft_info("upload %s of %s/%s/%s expired (started %lld s ago); its parts are deleted", id, m->provider,
			m->bucket, m->key, (long long)((ft_now_ns() - m->initiated) / 1000000000LL));
	pthread_mutex_unlock(&t->mpu->lock);
}

/*
 * Opens the upload directory of id for object o and reads its meta. Returns the directory fd, or
 * -ENOENT when there is no such upload for this object (absent, aborted, completed, expired (it
 * is retired then), another key, or an earlier incarnation of the bucket), or another -errno.
 */
int mpu_upload_open(const tgt_obj_t *o, const char *id, mpu_meta_t *m)
{
	char rel[sizeof(MPU_DIR) + MPU_ID_MAX + 2];

	upload_rel(rel, sizeof(rel), id);
	int fd = openat(o->mp->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOENT : -errno;
	int rc = meta_read(fd, m);
	if (rc == 0 && !meta_matches(m, o))
		rc = -ENOENT;
	if (rc == 0 && expired(o->t, m->initiated, ft_now_ns())) {
		upload_expire(o->t, o->mp, id, fd, m);
		rc = -ENOENT;
	}
	if (rc != 0) {
		close(fd);
		return rc == -EBADMSG ? -ENOENT : rc;
	}
	return fd;
}

void mpu_no_such_upload(ft_req_t *r, const tgt_obj_t *o, const char *id)
{
	mpu_error(r, 404, "NoSuchUpload",
		  "upload \"%s\" of \"%s/%s\" does not exist (aborted, completed or never started)", id, o->bucket,
		  o->obj);
}

/* Responds to a failed mpu_upload_open. */
void mpu_upload_open_failed(ft_req_t *r, const tgt_obj_t *o, const char *id, int rc)
{
	if (rc == -ENOENT)
		mpu_no_such_upload(r, o, id);
	else
		mpu_error(r, 500, "InternalError", "upload \"%s\": %s", id, strerror(-rc));
}

/* ---- start ---- */

/* Writes meta.json into the staging directory fd; 0 or -errno. */
static int meta_write(int dir_fd, const mpu_meta_t *m, ft_sync_policy_t sync)
{
	json_t *j = meta_to_json(m);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int rc = -ENOMEM;

	json_decref(j);
	if (!s)
		return rc;
	int fd = openat(dir_fd, MPU_META, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	size_t len = strlen(s), off = 0;
	rc = 0;
	while (off < len && rc == 0) {
		ssize_t n = write(fd, s + off, len - off);
		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			off += (size_t)n;
	}
	if (rc == 0 && sync != FT_SYNC_NONE && fsync(fd) != 0)
		rc = -errno;
	close(fd);
out:
	free(s);
	return rc;
}

static void mpu_sweep_maybe(tgt_t *t);

/*
 * The upload's checksum from x-amz-checksum-algorithm and x-amz-checksum-type, as S3 takes them:
 * the type defaults to COMPOSITE (FULL_OBJECT for CRC64NVME); FULL_OBJECT only for the CRCs,
 * COMPOSITE not for CRC64NVME. 0, or -1 with why.
 */
static int start_checksum(ft_req_t *r, mpu_meta_t *m, char *why, size_t cap)
{
	const char *a = ft_req_header(r, "x-amz-checksum-algorithm"), *t = ft_req_header(r, "x-amz-checksum-type");
	ft_xsum_alg_t alg = ft_xsum_from_label(a);

	if (a == NULL) {
		if (t != NULL) {
			snprintf(why, cap, "x-amz-checksum-type needs x-amz-checksum-algorithm");
			return -1;
		}
		return 0;
	}
	if (alg == FT_XSUM_NONE) {
		snprintf(why, cap, "Checksum algorithm provided is unsupported: \"%.32s\"", a);
		return -1;
	}
	if (t == NULL)
		t = alg == FT_XSUM_CRC64NVME ? "FULL_OBJECT" : "COMPOSITE";
	if (strcasecmp(t, "FULL_OBJECT") != 0 && strcasecmp(t, "COMPOSITE") != 0) {
		snprintf(why, cap, "x-amz-checksum-type must be COMPOSITE or FULL_OBJECT");
		return -1;
	}
	bool full = strcasecmp(t, "FULL_OBJECT") == 0;
	if ((full && !ft_xsum_is_crc(alg)) || (!full && alg == FT_XSUM_CRC64NVME)) {
		snprintf(why, cap, "The %s checksum type cannot be used with the %s checksum algorithm.",
			 full ? "FULL_OBJECT" : "COMPOSITE", ft_xsum_label(alg));
		return -1;
	}
	snprintf(m->ck_alg, sizeof(m->ck_alg), "%s", ft_xsum_label(alg));
	snprintf(m->ck_type, sizeof(m->ck_type), "%s", full ? "FULL_OBJECT" : "COMPOSITE");
	return 0;
}

/* Worker: stage "<.work>/mpu.N" with meta.json, then rename it to .mpu/<id> (never over another). */
static void start_upload(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	const tgt_mountpath_t *mp = o->mp;
	const char *id = ft_req_query(r, "mpu");
	char stage[64] = "", rel[sizeof(MPU_DIR) + MPU_ID_MAX + 2];
	mpu_meta_t m;
	ft_lom_t meta;
	char why[256];
	int rc, dfd = -1;

	mpu_sweep_maybe(o->t);
	if (tgt_meta_from_req(r, &meta, why, sizeof(why)) != 0) {
		mpu_error(r, 400, "InvalidArgument", "upload of \"%s/%s\": %s", o->bucket, o->obj, why);
		return;
	}
	memset(&m, 0, sizeof(m));
	if (start_checksum(r, &m, why, sizeof(why)) != 0) {
		mpu_error(r, 400, "InvalidRequest", "upload of \"%s/%s\": %s", o->bucket, o->obj, why);
		return;
	}
	memcpy(m.content_type, meta.content_type, sizeof(m.content_type));
	memcpy(m.user_meta, meta.user_meta, sizeof(m.user_meta));
	memcpy(m.hdrs, meta.hdrs, sizeof(m.hdrs));
	strcpy(m.provider, o->provider);
	strcpy(m.bucket, o->bucket);
	strcpy(m.key, o->obj);
	m.initiated = ft_now_ns();
	m.bucket_created = o->bucket_created;

	if (mkdirat(mp->root_fd, MPU_DIR, 0755) != 0 && errno != EEXIST) {
		rc = -errno;
		goto fail;
	}
	snprintf(stage, sizeof(stage), "mpu.%ld.%llu", (long)getpid(),
		 (unsigned long long)atomic_fetch_add(&o->t->mpu->counter, 1));
	if (mkdirat(mp->work_fd, stage, 0755) != 0) {
		rc = -errno;
		stage[0] = '\0';
		goto fail;
	}
	dfd = openat(mp->work_fd, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = meta_write(dfd, &m, o->t->cfg.sync);
	if (rc != 0)
		goto fail;
	upload_rel(rel, sizeof(rel), id);
	pthread_mutex_lock(&o->t->mpu->lock);
	rc = renameat2(mp->work_fd, stage, mp->root_fd, rel, RENAME_NOREPLACE) == 0 ? 0 : -errno;
	if (rc == -EINVAL) /* a filesystem without RENAME_NOREPLACE: a non-empty target fails anyway */
		rc = renameat(mp->work_fd, stage, mp->root_fd, rel) == 0 ? 0 : -errno;
	pthread_mutex_unlock(&o->t->mpu->lock);
	if (rc != 0)
		goto fail;
	close(dfd);
	if (o->t->cfg.sync == FT_SYNC_FULL) {
		int mfd = openat(mp->root_fd, MPU_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (mfd < 0 || fsync(mfd) != 0)
			ft_warn("upload %s: fsync of %s/%s failed: %s", id, mp->path, MPU_DIR, strerror(errno));
		if (mfd >= 0)
			close(mfd);
	}
	ft_debug("upload %s of %s/%s started on %s", id, o->bucket, o->obj, mp->path);
	if (m.ck_alg[0]) {
		ft_resp_header(r, "x-amz-checksum-algorithm", m.ck_alg);
		ft_resp_header(r, "x-amz-checksum-type", m.ck_type);
	}
	ft_resp_json(r, 200,
		     json_pack("{s:s, s:I, s:s, s:s}", "upload_id", id, "initiated", (json_int_t)m.initiated,
			       "checksum_algorithm", m.ck_alg, "checksum_type", m.ck_type));
	return;
fail:
	if (dfd >= 0)
		close(dfd);
	if (stage[0])
		tgt_remove_tree(mp->work_fd, stage, NULL);
	if (rc == -EEXIST || rc == -ENOTEMPTY)
		mpu_error(r, 409, "InvalidRequest", "upload id \"%s\" is already in use", id);
	else if (rc == -ENOSPC || rc == -EDQUOT)
		mpu_error(r, 507, "InsufficientStorage", "mountpath %s is full", mp->path);
	else
		mpu_error(r, 500, "InternalError", "cannot start upload \"%s\": %s", id, strerror(-rc));
}

/* ---- upload part ---- */

typedef struct {
	tgt_obj_t *o;
	const char *id;
	int part;
	int updir;     /* the upload directory, -1 once closed */
	int fd;        /* work file, -1 once closed */
	char work[64]; /* its name in .work; "" once renamed or removed */
	ft_cksum_t md5;
	int md5_live;
	uint64_t received;
	int write_err; /* errno of a failed write; EFBIG past the largest part */
	char hex[FT_CKSUM_HEX_MAX];
	ft_xsum_t xs; /* the upload's S3 checksum, or the one the part came with */
	int xs_live;
	char xs_b64[FT_XSUM_B64_MAX]; /* its value once received, "" if none */
} part_t;

static void part_release(part_t *p)
{
	if (p->md5_live) {
		ft_cksum_abort(&p->md5);
		p->md5_live = 0;
	}
	if (p->xs_live) {
		ft_xsum_abort(&p->xs);
		p->xs_live = 0;
	}
	tgt_work_drop(p->o->mp, &p->fd, p->work);
	if (p->updir >= 0) {
		close(p->updir);
		p->updir = -1;
	}
}

static void part_done_hook(void *arg)
{
	part_release(arg);
}

static void part_fail_errno(ft_req_t *r, part_t *p, int e, const char *what)
{
	const tgt_obj_t *o = p->o;

	part_release(p);
	if (e == ENOSPC || e == EDQUOT)
		mpu_error(r, 507, "InsufficientStorage", "part %d of \"%s/%s\": mountpath %s is full", p->part,
			  o->bucket, o->obj, o->mp->path);
	else
		mpu_error(r, 500, "InternalError", "part %d of \"%s/%s\": %s: %s", p->part, o->bucket, o->obj, what,
			  strerror(e));
}

/* Worker: sync, record, rename over part.NNNNN while the upload is still there. */
static void part_finalize(ft_req_t *r, void *arg)
{
	part_t *p = arg;
	const tgt_obj_t *o = p->o;
	char name[16];
	int rc;

	if (o->t->cfg.sync == FT_SYNC_DATA && fdatasync(p->fd) != 0) {
		part_fail_errno(r, p, errno, "fdatasync");
		return;
	}
	if (o->t->cfg.sync == FT_SYNC_FULL && fsync(p->fd) != 0) {
		part_fail_errno(r, p, errno, "fsync");
		return;
	}
	rc = part_record_set(p->fd, p->hex, p->received);
	if (rc == 0 && p->xs_b64[0]) {
		char v[64];
		int n = snprintf(v, sizeof(v), "%s:%s", ft_xsum_label(p->xs.alg), p->xs_b64);
		rc = fsetxattr(p->fd, MPU_CK_XATTR, v, (size_t)n, 0) == 0 ? 0 : -errno;
	}
	if (rc != 0) {
		part_fail_errno(r, p, -rc, "cannot record part");
		return;
	}
	part_name(name, sizeof(name), p->part);
	pthread_mutex_lock(&o->t->mpu->lock);
	if (!mpu_upload_present(o->mp, p->id, p->updir))
		rc = -ENOENT;
	else
		rc = renameat(o->mp->work_fd, p->work, p->updir, name) == 0 ? 0 : -errno;
	pthread_mutex_unlock(&o->t->mpu->lock);
	if (rc == -ENOENT) {
		part_release(p);
		mpu_no_such_upload(r, o, p->id);
		return;
	}
	if (rc != 0) {
		part_fail_errno(r, p, -rc, "cannot store part");
		return;
	}
	p->work[0] = '\0';
	if (o->t->cfg.sync == FT_SYNC_FULL && fsync(p->updir) != 0)
		ft_warn("upload %s: directory fsync failed: %s", p->id, strerror(errno));
	part_release(p);
	ft_resp_headerf(r, "ETag", "\"%s\"", p->hex);
	if (p->xs_b64[0])
		ft_resp_header(r, ft_xsum_header(p->xs.alg), p->xs_b64);
	ft_resp_json(r, 200,
		     json_pack("{s:i, s:s, s:I}", "part", p->part, "etag", p->hex, "size", (json_int_t)p->received));
}

static int part_on_data(ft_req_t *r, void *arg, const void *buf, size_t len)
{
	part_t *p = arg;
	int rc;

	(void)r;
	if (p->received + len > MPU_PART_MAX_SIZE) {
		p->write_err = EFBIG;
		return -1;
	}
	rc = ft_write_all(p->fd, buf, len);
	if (rc != 0) {
		p->write_err = -rc;
		return -1;
	}
	ft_cksum_update(&p->md5, buf, len);
	if (p->xs_live)
		ft_xsum_update(&p->xs, buf, len);
	p->received += len;
	return 0;
}

static void part_on_end(ft_req_t *r, void *arg, int err)
{
	part_t *p = arg;
	const tgt_obj_t *o = p->o;

	if (p->write_err == EFBIG) {
		part_release(p);
		mpu_error(r, 400, "EntityTooLarge", "part %d of \"%s/%s\" exceeds %llu bytes", p->part, o->bucket,
			  o->obj, (unsigned long long)MPU_PART_MAX_SIZE);
		return;
	}
	if (p->write_err) {
		part_fail_errno(r, p, p->write_err, "write");
		return;
	}
	if (err) {
		part_release(p);
		if (err == -ETIMEDOUT)
			mpu_error(r, 408, "RequestTimeout", "part %d of \"%s/%s\": body stalled; nothing stored",
				  p->part, o->bucket, o->obj);
		else
			mpu_error(r, 400, "IncompleteBody", "part %d of \"%s/%s\": body incomplete; nothing stored",
				  p->part, o->bucket, o->obj);
		return;
	}
	ft_cksum_final(&p->md5, p->hex);
	p->md5_live = 0;
	if (p->xs_live) {
		p->xs_live = 0;
		if (ft_xsum_final(&p->xs, p->xs_b64) != 0)
			p->xs_b64[0] = '\0';
	}
	ft_req_defer(r, part_finalize, p);
}

/*
 * The S3 checksum of a part: the upload's algorithm, else the one the part came with
 * (Ais-S3-Checksum); a part with another algorithm than the upload's is refused. 0, or -1 after
 * responding.
 */
static int part_checksum_start(ft_req_t *r, part_t *p, const mpu_meta_t *m)
{
	const char *given = ft_req_header(r, "Ais-S3-Checksum");
	ft_xsum_alg_t up = ft_xsum_from_label(m->ck_alg), alg = ft_xsum_from_label(given);

	if (given != NULL && alg == FT_XSUM_NONE) {
		part_release(p);
		mpu_error(r, 400, "InvalidRequest", "unknown Ais-S3-Checksum \"%.32s\"", given);
		return -1;
	}
	if (up != FT_XSUM_NONE && alg != FT_XSUM_NONE && alg != up) {
		part_release(p);
		mpu_error(r, 400, "InvalidRequest",
			  "Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s",
			  ft_xsum_label(up), ft_xsum_label(alg));
		return -1;
	}
	if (up != FT_XSUM_NONE)
		alg = up;
	if (alg == FT_XSUM_NONE)
		return 0;
	if (ft_xsum_init(&p->xs, alg) != 0) {
		part_fail_errno(r, p, ENOMEM, "checksum");
		return -1;
	}
	p->xs_live = 1;
	return 0;
}

/* Loop thread: checks, then streams the body into a work file. */
static void upload_part(ft_req_t *r, tgt_obj_t *o, const char *id)
{
	long part = parse_num(ft_req_query(r, "part"), 1, MPU_PARTS_MAX);
	int64_t declared = ft_req_content_length(r);
	uint64_t avail = 0;
	mpu_meta_t m;

	if (part < 0) {
		mpu_error(r, 400, "InvalidArgument", "part number must be an integer between 1 and %d", MPU_PARTS_MAX);
		return;
	}
	if (declared == 0 && !ft_req_header(r, "Content-Length")) {
		mpu_error(r, 411, "MissingContentLength", "a part needs Content-Length or Transfer-Encoding: chunked");
		return;
	}
	if (declared > (int64_t)MPU_PART_MAX_SIZE) {
		mpu_error(r, 400, "EntityTooLarge", "part of %lld bytes exceeds %llu bytes", (long long)declared,
			  (unsigned long long)MPU_PART_MAX_SIZE);
		return;
	}
	if (declared > 0 && tgt_mountpath_avail(o->mp, o->t->cfg.reserve_bytes, &avail) == 0 &&
	    (uint64_t)declared > avail) {
		mpu_error(r, 507, "InsufficientStorage", "part of %lld bytes does not fit: %" PRIu64 " bytes available",
			  (long long)declared, avail);
		return;
	}
	part_t *p = ft_req_alloc(r, sizeof(*p));
	memset(p, 0, sizeof(*p));
	p->o = o;
	p->id = id;
	p->part = (int)part;
	p->fd = -1;
	p->updir = mpu_upload_open(o, id, &m);
	if (p->updir < 0) {
		mpu_upload_open_failed(r, o, id, p->updir);
		return;
	}
	ft_req_on_done(r, part_done_hook, p);
	p->fd = tgt_work_create(o->mp, p->work, sizeof(p->work));
	if (p->fd < 0) {
		int e = -p->fd;
		p->work[0] = '\0';
		part_fail_errno(r, p, e, "cannot create work file");
		return;
	}
	if (ft_cksum_init(&p->md5, FT_CKSUM_MD5) != 0) {
		part_fail_errno(r, p, ENOMEM, "md5");
		return;
	}
	p->md5_live = 1;
	if (part_checksum_start(r, p, &m) != 0)
		return;
	ft_req_read_body(r, part_on_data, part_on_end, p);
}

/* ---- abort ---- */

/* Loop thread: a rename under mpu_lock; the janitor deletes the files. */
static void abort_upload(ft_req_t *r, tgt_obj_t *o, const char *id)
{
	mpu_meta_t m;
	int dfd = mpu_upload_open(o, id, &m);
	int rc;

	if (dfd < 0) {
		mpu_upload_open_failed(r, o, id, dfd);
		return;
	}
	pthread_mutex_lock(&o->t->mpu->lock);
	rc = mpu_upload_present(o->mp, id, dfd) ? mpu_upload_retire(o->t, o->mp, id) : -ENOENT;
	pthread_mutex_unlock(&o->t->mpu->lock);
	close(dfd);
	if (rc == -ENOENT) {
		mpu_no_such_upload(r, o, id);
		return;
	}
	if (rc != 0) {
		mpu_error(r, 500, "InternalError", "cannot abort upload \"%s\": %s", id, strerror(-rc));
		return;
	}
	ft_debug("upload %s of %s/%s aborted", id, o->bucket, o->obj);
	ft_resp_json(r, 200, json_pack("{s:s}", "upload_id", id));
}

/* ---- list parts ---- */

typedef struct {
	int part;
	char etag[MD5_HEX];
	uint64_t size;
	int64_t mtime_ns;
} part_info_t;

static int part_info_cmp(const void *a, const void *b)
{
	const part_info_t *x = a, *y = b;
	return (x->part > y->part) - (x->part < y->part);
}

/*
 * Reads the parts of an upload directory (fd borrowed) with number > marker into *out
 * (malloc'd, sorted). Returns the count or -errno. Damaged parts are skipped (logged).
 */
static int parts_read(int dir_fd, const char *id, int marker, part_info_t **out)
{
	int dup_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	part_info_t *v = NULL;
	int n = 0, cap = 0;

	*out = NULL;
	if (dup_fd < 0)
		return -errno;
	DIR *d = fdopendir(dup_fd);
	if (!d) {
		int e = -errno;
		close(dup_fd);
		return e;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		int part = part_of_name(de->d_name);
		if (part <= marker)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			part_info_t *nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		part_info_t *pi = &v[n];
		struct stat st;
		int fd = mpu_part_open(dir_fd, part, pi->etag, &pi->size);
		if (fd < 0) {
			if (fd != -ENOENT) /* ENOENT: replaced or removed meanwhile */
				ft_warn("upload %s: part %d unreadable: %s", id, part, strerror(-fd));
			continue;
		}
		pi->part = part;
		pi->mtime_ns = fstat(fd, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec : 0;
		close(fd);
		n++;
	}
	closedir(d);
	if (n > 1) /* v is NULL when there is no part, which qsort must not be given */
		qsort(v, (size_t)n, sizeof(*v), part_info_cmp);
	*out = v;
	return n;
}

/* Worker: the parts after part_marker, at most max_parts of them. */
static void list_parts(ft_req_t *r, void *arg)
{
	tgt_obj_t *o = arg;
	const char *id = ft_req_query(r, "mpu");
	const char *qmax = ft_req_query(r, "max_parts"), *qmarker = ft_req_query(r, "part_marker");
	long max = qmax && *qmax ? parse_num(qmax, 0, MPU_PARTS_MAX) : MPU_LIST_PARTS_DEFAULT;
	long marker = qmarker && *qmarker ? parse_num(qmarker, 0, MPU_PARTS_MAX) : 0;
	part_info_t *v = NULL;
	mpu_meta_t m;

	if (max < 0 || marker < 0) {
		mpu_error(r, 400, "InvalidArgument", "max_parts and part_marker must be integers between 0 and %d",
			  MPU_PARTS_MAX);
		return;
	}
	int dfd = mpu_upload_open(o, id, &m);
	if (dfd < 0) {
		mpu_upload_open_failed(r, o, id, dfd);
		return;
	}
	int n = parts_read(dfd, id, (int)marker, &v);
	close(dfd);
	if (n < 0) {
		mpu_error(r, 500, "InternalError", "upload \"%s\": cannot read parts: %s", id, strerror(-n));
		return;
	}
	json_t *parts = json_array();
	int shown = n < max ? n : (int)max;
	for (int i = 0; i < shown; i++)
		json_array_append_new(parts,
				      json_pack("{s:i, s:s, s:I, s:I}", "part", v[i].part, "etag", v[i].etag, "size",
						(json_int_t)v[i].size, "mtime", (json_int_t)v[i].mtime_ns));
	int truncated = n > shown;
	int next = shown > 0 ? v[shown - 1].part : 0;
	free(v);
	ft_resp_json(r, 200,
		     json_pack("{s:s, s:s, s:s, s:I, s:o, s:b, s:i}", "bucket", m.bucket, "key", m.key, "upload_id", id,
			       "initiated", (json_int_t)m.initiated, "parts", parts, "truncated", truncated,
			       "next_part_marker", next));
}

/* ---- dispatch ---- */

void tgt_mpu_handle(ft_req_t *r, tgt_obj_t *o)
{
	ft_method_t m = ft_req_method(r);
	const char *id = ft_req_query(r, "mpu");
	const char *action = ft_req_query(r, "action");

	if (!id || !id_valid(id)) {
		mpu_error(r, 400, "InvalidArgument", "upload id must be %d..%d characters of [A-Za-z0-9_-]", MPU_ID_MIN,
			  MPU_ID_MAX);
		return;
	}
	if (m == FT_HTTP_PUT && ft_req_query(r, "part")) {
		upload_part(r, o, id);
		return;
	}
	if (m == FT_HTTP_POST && action && strcmp(action, "start") == 0) {
		ft_req_defer(r, start_upload, o);
		return;
	}
	if (m == FT_HTTP_POST && action && strcmp(action, "complete") == 0) {
		mpu_complete_upload(r, o, id);
		return;
	}
	if (m == FT_HTTP_POST && action && strcmp(action, "abort") == 0) {
		abort_upload(r, o, id);
		return;
	}
	if (m == FT_HTTP_GET && action && strcmp(action, "parts") == 0) {
		ft_req_defer(r, list_parts, o);
		return;
	}
	mpu_error(
		r, 400, "InvalidRequest",
		"multipart: expected PUT ?mpu=ID&part=N, POST ?mpu=ID&action=start|complete|abort or GET ?mpu=ID&action=parts");
}

/* ---- control port: GET /v1/mpu ---- */

/*
 * Appends this mountpath's uploads of provider/bucket (any bucket when NULL) under prefix to out
 * (when not NULL), and retires every upload that expired or whose bucket is gone.
 */
static void list_mountpath(tgt_t *t, const tgt_mountpath_t *mp, const char *provider, const char *bucket,
			   const char *prefix, ft_bmd_t *bmd, json_t *out)
{
	int64_t now = ft_now_ns();
	int fd = openat(mp->root_fd, MPU_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t plen = strlen(prefix);

	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		mpu_meta_t m;
		if (!id_valid(de->d_name))
			continue;
		int ufd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd < 0)
			continue;
		int rc = meta_read(ufd, &m);
		if (rc == 0) {
			const ft_bucket_t *b = bmd ? ft_bmd_find(bmd, m.provider, m.bucket) : NULL;
			if (bmd && (!b || b->created_ns != m.bucket_created)) {
				/* Its bucket was destroyed (or re-created): the upload is garbage. */
				pthread_mutex_lock(&t->mpu->lock);
				if (mpu_upload_present(mp, de->d_name, ufd) &&
				    mpu_upload_retire(t, mp, de->d_name) == 0)
					ft_info("upload %s of removed bucket %s/%s deleted", de->d_name, m.provider,
						m.bucket);
				pthread_mutex_unlock(&t->mpu->lock);
			} else if (expired(t, m.initiated, now)) {
				upload_expire(t, mp, de->d_name, ufd, &m);
			} else if (out && strcmp(m.provider, provider) == 0 &&
				   (!bucket || strcmp(m.bucket, bucket) == 0) && strncmp(m.key, prefix, plen) == 0) {
				json_array_append_new(out,
						      json_pack("{s:s, s:s, s:s, s:s, s:I}", "provider", m.provider,
								"bucket", m.bucket, "key", m.key, "upload_id",
								de->d_name, "initiated", (json_int_t)m.initiated));
			}
		}
		close(ufd);
	}
	closedir(d);
}

/* Retires the expired uploads (and those of removed buckets) of every mountpath. Any thread. */
static void mpu_sweep(tgt_t *t)
{
	ft_bmd_t *bmd = ft_bmd_current();

	for (int i = 0; i < t->n_mountpaths; i++)
		list_mountpath(t, &t->mountpaths[i], "", NULL, "", bmd, NULL);
	ft_bmd_put(bmd);
}

/* Runs mpu_sweep when none ran for MPU_SWEEP_EVERY_NS (the first start after a restart sweeps). Worker. */
static void mpu_sweep_maybe(tgt_t *t)
{
	int64_t now = ft_now_ns(), last = atomic_load(&t->mpu->last_sweep);

	if (last != 0 && now - last < MPU_SWEEP_EVERY_NS)
		return;
	if (!atomic_compare_exchange_strong(&t->mpu->last_sweep, &last, now))
		return; /* another start sweeps */
	mpu_sweep(t);
}

void tgt_mpu_list(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *provider = ft_ctl_query(req, "provider");
	const char *bucket = ft_ctl_query(req, "bucket");
	const char *prefix = ft_ctl_query(req, "prefix");
	json_t *uploads = json_array();

	if (!provider || !*provider)
		provider = "ais";
	if (bucket && !*bucket)
		bucket = NULL;
	ft_bmd_t *bmd = ft_bmd_current();
	for (int i = 0; i < t->n_mountpaths; i++)
		list_mountpath(t, &t->mountpaths[i], provider, bucket, prefix ? prefix : "", bmd, uploads);
	ft_bmd_put(bmd);
	resp->status = 200;
	resp->json = json_pack("{s:o}", "uploads", uploads);
}

int tgt_mpu_init(tgt_t *t)
{
	tgt_mpu_t *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return -1;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	t->mpu = m;
	return 0;
}

void tgt_mpu_fini(tgt_t *t)
{
	tgt_mpu_t *m = t->mpu;

	if (m == NULL)
		return;
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
	t->mpu = NULL;
}
