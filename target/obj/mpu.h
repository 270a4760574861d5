/* SPDX-License-Identifier: Apache-2.0 */
/* Multipart uploads inside target/obj: the layout, state and helpers mpu.c (uploads, parts) and mpu_complete.c share. */
#ifndef TGT_OBJ_MPU_H
#define TGT_OBJ_MPU_H

#include <stdatomic.h>
#include <stdint.h>
#include "base/xsum.h"
#include "target.h"

#define MPU_DIR ".mpu"
#define MPU_META "meta.json"
#define MPU_XATTR "user.ft.mpu"
#define MPU_CK_XATTR "user.ft.mpuck" /* a part's S3 checksum: "<ALG>:<base64>" */
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
	char hdrs[FT_LOM_HDRS_MAX]; /* the object's standard headers (Cache-Control, ...) */
	char ck_alg[16];            /* x-amz-checksum-algorithm given at start ("" = none) */
	char ck_type[16];           /* COMPOSITE or FULL_OBJECT when ck_alg is set */
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
	char xsum_alg[16];              /* the object's S3 checksum: algorithm ("" = none), */
	char xsum[FT_XSUM_B64_MAX + 8]; /* value ("...-N" for COMPOSITE) */
	char xsum_type[16];             /* and type */
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

/* Error in the native JSON shape plus the S3 error code the proxy answers with. */
void mpu_error(ft_req_t *r, int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The ETag a client sent, unquoted and lowercased into out[MD5_HEX]; -1 unless it is 32 hex digits. */
int mpu_etag_normalize(const char *in, char out[MD5_HEX]);
/*
 * Opens part N of the upload directory and checks that its record agrees with the file size.
 * Returns the fd with md5hex and *size filled, or -errno (-ENOENT: no such part; -EBADMSG: the
 * part is damaged).
 */
int mpu_part_open(int dir_fd, int part, char md5hex[MD5_HEX], uint64_t *size);
/* A part's S3 checksum ("<ALG>:<base64>") into out; 0, or -1 when it has none. */
int mpu_part_checksum(int fd, char *out, size_t cap);
/* Whether .mpu/<id> is still the directory dir_fd refers to (not aborted or completed). Under mpu_lock. */
int mpu_upload_present(const tgt_mountpath_t *mp, const char *id, int dir_fd);
/* Moves .mpu/<id> into .work as "rm.*" for the janitor. Under mpu_lock. 0 or -errno. */
int mpu_upload_retire(tgt_t *t, const tgt_mountpath_t *mp, const char *id);
/*
 * Opens the upload directory of id for object o and reads its meta. Returns the directory fd, or
 * -ENOENT when there is no such upload for this object (absent, aborted, completed, expired (it
 * is retired then), another key, or an earlier incarnation of the bucket), or another -errno.
 */
int mpu_upload_open(const tgt_obj_t *o, const char *id, mpu_meta_t *m);
/* The 404 NoSuchUpload of id. */
void mpu_no_such_upload(ft_req_t *r, const tgt_obj_t *o, const char *id);
/* Responds to a failed mpu_upload_open. */
void mpu_upload_open_failed(ft_req_t *r, const tgt_obj_t *o, const char *id, int rc);

/* ---- mpu_complete.c ---- */
/* POST ?mpu=ID: CompleteMultipartUpload of o (makes the response call). */
void mpu_complete_upload(ft_req_t *r, tgt_obj_t *o, const char *id);

#endif
