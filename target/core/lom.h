/* SPDX-License-Identifier: Apache-2.0 */
/* Object metadata ("LOM") codec: stored in one extended attribute of the object file. */
#ifndef FT_LOM_H
#define FT_LOM_H

#include <stddef.h>
#include <stdint.h>
#include "base/cksum.h"

#define FT_LOM_XATTR "user.ft.lom"
#define FT_LOM_MAX 4160 /* largest encoded size: every field at its longest fits (lom.c checks) */
#define FT_LOM_VERSION_MAX 128
#define FT_LOM_ETAG_MAX 72    /* "<32 hex md5>" or "<32 hex>-<parts>", plus NUL */
#define FT_LOM_CTYPE_MAX 256  /* Content-Type given at PUT, plus NUL */
#define FT_LOM_UMETA_MAX 2304 /* user metadata lines (S3 allows 2 KiB of x-amz-meta-*), plus NUL */
#define FT_LOM_HDRS_MAX 768   /* standard headers and S3 checksum lines kept with an object, plus NUL */
#define FT_LOM_PARTS_MAX 400  /* the part layout of a multipart object, plus NUL */

/*
 * Encoding: byte 0 = format version (1); then records (u8 tag, u16 little-endian length, bytes)
 * for each field; last 4 bytes = xxhash32 (seed 0) of everything before them, little-endian.
 * Decoding skips unknown tags (later fields), and rejects a wrong format version, a truncated
 * record, a missing required field (size, cksum) or a checksum mismatch.
 */
typedef struct {
	uint64_t size;
	int64_t atime_ns; /* last access, ns since epoch */
	int64_t mtime_ns; /* when this version was stored */
	ft_cksum_type_t cksum_type;
	char cksum[FT_CKSUM_HEX_MAX];
	char version[FT_LOM_VERSION_MAX];    /* object version, "1", "2", ... */
	char etag[FT_LOM_ETAG_MAX];          /* S3 ETag without quotes ("" = none: the checksum serves) */
	char content_type[FT_LOM_CTYPE_MAX]; /* "" = none given (served as application/octet-stream) */
	/* "x-amz-meta-<name>:<value>\n" per user metadata header, names lowercase; "" = none */
	char user_meta[FT_LOM_UMETA_MAX];
	/*
	 * "<name>:<value>\n" per standard header given at PUT (cache-control, content-disposition,
	 * content-encoding, content-language, expires) and the S3 checksum kept with the object
	 * (x-amz-checksum-<alg>, x-amz-checksum-type); names lowercase; "" = none
	 */
	char hdrs[FT_LOM_HDRS_MAX];
	/* a multipart object's parts: "<size>*<count>" runs joined by ',' in part order; "" = not multipart */
	char parts[FT_LOM_PARTS_MAX];
} ft_lom_t;

/* Returns the encoded length, or -1 if cap is too small. */
int ft_lom_encode(const ft_lom_t *m, uint8_t *buf, size_t cap);
/* Returns 0, or -1 for corrupt input (m is then undefined). */
int ft_lom_decode(ft_lom_t *m, const uint8_t *buf, size_t len);
/* Read/write the xattr of an open file. Return 0, -errno, or -EBADMSG for corrupt metadata. */
int ft_lom_fget(int fd, ft_lom_t *m);
int ft_lom_fset(int fd, const ft_lom_t *m);

#endif
