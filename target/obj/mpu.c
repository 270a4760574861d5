/* SPDX-License-Identifier: Apache-2.0 */
/* Target multipart uploads: parts under <mp>/.mpu/<upload id>/, completion into one object, abort, listings, expiry. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/fdio.h"
#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "core/lom.h"
#include "http/util.h"
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

#define MPU_DIR ".mpu"
#define MPU_META "meta.json"
#define MPU_XATTR "user.ft.mpu"
#define MPU_ID_MIN 16
#define MPU_ID_MAX 128
#define MPU_PARTS_MAX 10000
#define MPU_PART_MIN_SIZE (5ull << 20)   /* every part but the last (S3 EntityTooSmall) */
#define MPU_PART_MAX_SIZE (5ull << 30)   /* S3's largest part */
#define MPU_META_MAX (64u << 10)         /* key and user metadata, JSON-escaped */
#define MPU_COMPLETE_BODY_MAX (4u << 20) /* 10,000 parts of {"part":N,"etag":"..."} fit easily */
#define MPU_LIST_PARTS_DEFAULT 1000
#define MPU_COPY_CHUNK (1u << 20) /* hashed, then copied in-kernel, per chunk */
#define MD5_LEN 16
#define MD5_HEX (2 * MD5_LEN + 1)
#define MPU_RECENT 64 /* completions remembered for retried requests */
#define NS_PER_HOUR (3600LL * 1000000000LL)
#define MPU_SWEEP_EVERY_NS NS_PER_HOUR /* starts sweep expired uploads at most this often */

typedef struct {
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char key[FT_OBJ_NAME_MAX + 1];
	int64_t initiated;
	int64_t bucket_created;
	char content_type[FT_LOM_CTYPE_MAX]; /* the object's metadata, given at start ("" = none) */
	char user_meta[FT_LOM_UMETA_MAX];
} mpu_meta_t;

/* One completion in progress (in its request's memory), linked under mpu_lock. */
typedef struct completing {
	struct completing *next;
	const tgt_mountpath_t *mp;
	const char *id;
} completing_t;

/* The result of a completion, for a retry of the same request. */
typedef struct {
	const tgt_mountpath_t *mp; /* NULL: unused slot */
	char id[MPU_ID_MAX + 1];
	char list_md5[FT_CKSUM_HEX_MAX]; /* md5 of the normalized part list */
	char etag[FT_LOM_ETAG_MAX];
	uint64_t size;
	int parts;
	ft_cksum_type_t cksum_type;
	char cksum[FT_CKSUM_HEX_MAX];
	char version[FT_LOM_VERSION_MAX];
} completed_t;

/* t->mpu: this target's multipart state. */
struct tgt_mpu {
	pthread_mutex_t lock;           /* mpu_lock in the comments of this file */
	pthread_cond_t cond;            /* a completion ended */
	completing_t *completing;       /* under lock */
	completed_t recent[MPU_RECENT]; /* under lock; ring */
	int recent_next;                /* under lock */
	atomic_uint_fast64_t counter;   /* unique staging / retired names */
	atomic_int_fast64_t last_sweep; /* ft_now_ns of the last sweep a start ran */
};

/* ---- small helpers ---- */

/* Error in the native JSON shape plus the S3 error code the proxy answers with. */
static void mpu_error(ft_req_t *r, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void mpu_error(ft_req_t *r, int status, const char *code, const char *fmt, ...)
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
static int etag_normalize(const char *in, char out[MD5_HEX])
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
	if (etag_normalize(v, md5hex) != 0)
		return -EBADMSG;
	errno = 0;
	unsigned long long s = strtoull(v + 2 * MD5_LEN + 1, &end, 10);
	if (errno != 0 || !end || *end != '\0' || end == v + 2 * MD5_LEN + 1)
		return -EBADMSG;
	*size = s;
	return 0;
}

/*
 * Opens part N of the upload directory and checks that its record agrees with the file size.
 * Returns the fd with md5hex and *size filled, or -errno (-ENOENT: no such part; -EBADMSG: the
 * part is damaged).
 */
static int part_open(int dir_fd, int part, char md5hex[MD5_HEX], uint64_t *size)
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
	return json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "provider", m->provider, "bucket", m->bucket, "key",
			 m->key, "initiated", (json_int_t)m->initiated, "bucket_created", (json_int_t)m->bucket_created,
			 "content_type", m->content_type, "user_meta", m->user_meta);
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
static int upload_present(const tgt_mountpath_t *mp, const char *id, int dir_fd)
{
	char rel[sizeof(MPU_DIR) + MPU_ID_MAX + 2];
	struct stat a, b;

	upload_rel(rel, sizeof(rel), id);
	if (fstatat(mp->root_fd, rel, &a, AT_SYMLINK_NOFOLLOW) != 0 || fstat(dir_fd, &b) != 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Moves .mpu/<id> into .work as "rm.*" for the janitor. Under mpu_lock. 0 or -errno. */
static int upload_retire(tgt_t *t, const tgt_mountpath_t *mp, const char *id)
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
	if (upload_present(mp, id, dir_fd) && upload_retire(t, mp, id) == 0)
		ft_info("upload %s of %s/%s/%s expired (started %lld s ago); its parts are deleted", id, m->provider,
			m->bucket, m->key, (long long)((ft_now_ns() - m->initiated) / 1000000000LL));
	pthread_mutex_unlock(&t->mpu->lock);
}

/*
 * Opens the upload directory of id for object o and reads its meta. Returns the directory fd, or
 * -ENOENT when there is no such upload for this object (absent, aborted, completed, expired (it
 * is retired then), another key, or an earlier incarnation of the bucket), or another -errno.
 */
static int upload_open(const tgt_obj_t *o, const char *id, mpu_meta_t *m)
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

static void no_such_upload(ft_req_t *r, const tgt_obj_t *o, const char *id)
{
	mpu_error(r, 404, "NoSuchUpload",
		  "upload \"%s\" of \"%s/%s\" does not exist (aborted, completed or never started)", id, o->bucket,
		  o->obj);
}

/* Responds to a failed upload_open. */
static void upload_open_failed(ft_req_t *r, const tgt_obj_t *o, const char *id, int rc)
{
	if (rc == -ENOENT)
		no_such_upload(r, o, id);
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
	memcpy(m.content_type, meta.content_type, sizeof(m.content_type));
	memcpy(m.user_meta, meta.user_meta, sizeof(m.user_meta));
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
	ft_resp_json(r, 200, json_pack("{s:s, s:I}", "upload_id", id, "initiated", (json_int_t)m.initiated));
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
} part_t;

static void part_release(part_t *p)
{
	if (p->md5_live) {
		ft_cksum_abort(&p->md5);
		p->md5_live = 0;
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
	if (rc != 0) {
		part_fail_errno(r, p, -rc, "cannot record part");
		return;
	}
	part_name(name, sizeof(name), p->part);
	pthread_mutex_lock(&o->t->mpu->lock);
	if (!upload_present(o->mp, p->id, p->updir))
		rc = -ENOENT;
	else
		rc = renameat(o->mp->work_fd, p->work, p->updir, name) == 0 ? 0 : -errno;
	pthread_mutex_unlock(&o->t->mpu->lock);
	if (rc == -ENOENT) {
		part_release(p);
		no_such_upload(r, o, p->id);
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
	ft_req_defer(r, part_finalize, p);
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
	p->updir = upload_open(o, id, &m);
	if (p->updir < 0) {
		upload_open_failed(r, o, id, p->updir);
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
	ft_req_read_body(r, part_on_data, part_on_end, p);
}

/* ---- abort ---- */

/* Loop thread: a rename under mpu_lock; the janitor deletes the files. */
static void abort_upload(ft_req_t *r, tgt_obj_t *o, const char *id)
{
	mpu_meta_t m;
	int dfd = upload_open(o, id, &m);
	int rc;

	if (dfd < 0) {
		upload_open_failed(r, o, id, dfd);
		return;
	}
	pthread_mutex_lock(&o->t->mpu->lock);
	rc = upload_present(o->mp, id, dfd) ? upload_retire(o->t, o->mp, id) : -ENOENT;
	pthread_mutex_unlock(&o->t->mpu->lock);
	close(dfd);
	if (rc == -ENOENT) {
		no_such_upload(r, o, id);
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
		int fd = part_open(dir_fd, part, pi->etag, &pi->size);
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
	int dfd = upload_open(o, id, &m);
	if (dfd < 0) {
		upload_open_failed(r, o, id, dfd);
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

/* ---- complete ---- */

typedef struct {
	int part;
	char etag[MD5_HEX]; /* as the client listed it, normalized */
	uint64_t size;      /* from the stored record */
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
		if (etag_normalize(etag, c->want[i].etag) != 0) {
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
	ft_resp_json(r, 200,
		     json_pack("{s:s, s:s, s:I, s:i, s:s, s:s, s:s}", "upload_id", e->id, "etag", e->etag, "size",
			       (json_int_t)e->size, "parts", e->parts, "checksum_type", ft_cksum_name(e->cksum_type),
			       "checksum", e->cksum, "version", e->version));
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
		int fd = part_open(c->updir, w->part, md5hex, &size);
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
		close(fd);
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
		int fd = part_open(c->updir, w->part, md5hex, &size);
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
 * the same name (versions) and with bucket removal. Returns 0, -ESTALE (bucket gone), -ENOENT
 * (upload aborted meanwhile), -EPIPE (stored, the redundancy failed: c->perr says why), or
 * another -errno. The EC slices go out after the name lock is released (protect/protect.h).
 */
static int complete_publish(complete_t *c)
{
	tgt_obj_t *o = c->o;
	tgt_t *t = o->t;
	int rc, fd = -1;

	tgt_name_lock(o);
	tgt_next_version(o, c->lom.version, sizeof(c->lom.version));
	rc = ft_lom_fset(c->fd, &c->lom);
	if (rc == 0) {
		tgt_publish_lock_shared(t);
		pthread_mutex_lock(&c->o->t->mpu->lock);
		if (!tgt_bucket_alive(o))
			rc = -ESTALE;
		else if (!upload_present(o->mp, c->id, c->updir))
			rc = -ENOENT;
		else
			rc = tgt_publish_rename(o, c->work, t->cfg.sync);
		if (rc == 0 && upload_retire(t, o->mp, c->id) != 0)
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
	if (rc == -EBADMSG)
		mpu_error(r, 400, "InvalidPart",
			  "part %d changed or was damaged while completing \"%s/%s\"; nothing stored", bad_part,
			  o->bucket, o->obj);
	else if (rc == -ENOENT)
		no_such_upload(r, o, c->id);
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

/* Worker: concatenate, verify the size, publish. */
static void complete_data(ft_req_t *r, complete_t *c)
{
	const tgt_obj_t *o = c->o;
	ft_cksum_type_t ck_type = o->cksum == FT_CKSUM_NONE ? FT_CKSUM_XXHASH : o->cksum;
	char md5s_hex[FT_CKSUM_HEX_MAX];
	uint64_t avail = 0;
	struct stat st;
	int bad_part = 0, rc;

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
	memset(&c->lom, 0, sizeof(c->lom));
	memcpy(c->lom.content_type, c->meta.content_type, sizeof(c->lom.content_type));
	memcpy(c->lom.user_meta, c->meta.user_meta, sizeof(c->lom.user_meta));
	c->lom.size = c->total;
	c->lom.cksum_type = ck_type;
	ft_cksum_final(&c->ck, c->lom.cksum);
	c->ck_live = 0;
	ft_cksum_final(&c->md5s, md5s_hex);
	c->md5s_live = 0;
	snprintf(c->etag, sizeof(c->etag), "%.32s-%d", md5s_hex, c->n);
	lom_set_etag(&c->lom, c->etag);
	c->lom.atime_ns = c->lom.mtime_ns = ft_now_ns();
	rc = complete_publish(c);
	if (rc != 0) {
		complete_fail(r, c, rc, 0);
		return;
	}
	complete_release(c);
	tgt_list_bump(o->t, o->provider, o->bucket);
	ft_info("upload %s completed: %s/%s, %d parts, %" PRIu64 " bytes", c->id, o->bucket, o->obj, c->n, c->total);
	completed_t e;
	if (recent_find(c, &e) != 0) { /* pushed out of the ring already by 64 other completions */
		memset(&e, 0, sizeof(e));
		snprintf(e.id, sizeof(e.id), "%s", c->id);
		memcpy(e.etag, c->etag, sizeof(e.etag));
		e.size = c->total;
		e.parts = c->n;
		e.cksum_type = c->lom.cksum_type;
		memcpy(e.cksum, c->lom.cksum, sizeof(e.cksum));
		memcpy(e.version, c->lom.version, sizeof(e.version));
	}
	complete_respond(r, &e);
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
	c->updir = upload_open(o, c->id, &c->meta);
	if (c->updir < 0) {
		int rc = c->updir;
		complete_release(c);
		if (rc == -ENOENT && recent_find(c, &done) == 0) {
			ft_info("upload %s: completion repeated, answering with its result", c->id);
			complete_respond(r, &done);
			return;
		}
		upload_open_failed(r, o, c->id, rc);
		return;
	}
	for (int i = 1; i < c->n; i++) {
		if (c->want[i].part <= c->want[i - 1].part) {
			complete_release(c);
			mpu_error(r, 400, "InvalidPartOrder",
				  "the part list is not in ascending order: part %d follows part %d", c->want[i].part,
				  c->want[i - 1].part);
			return;
		}
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

static void complete_upload(ft_req_t *r, tgt_obj_t *o, const char *id)
{
	complete_t *c = ft_req_alloc(r, sizeof(*c));

	memset(c, 0, sizeof(*c));
	c->o = o;
	c->id = id;
	c->updir = c->fd = -1;
	ft_req_on_done(r, complete_done_hook, c);
	ft_req_read_body_all(r, MPU_COMPLETE_BODY_MAX, complete_body, c);
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
		complete_upload(r, o, id);
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
				if (upload_present(mp, de->d_name, ufd) && upload_retire(t, mp, de->d_name) == 0)
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
