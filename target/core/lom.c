/* SPDX-License-Identifier: Apache-2.0 */
/* Object metadata (LOM) codec: versioned TLV records sealed by xxhash32, kept in one xattr. */
#include "core/lom.h"

#include <errno.h>
#include <string.h>
#include <sys/xattr.h>

#include <xxhash.h>

/*
 * Layout (see lom.h): [u8 format=1] {[u8 tag][u16 LE len][len bytes]}* [u32 LE xxhash32(all before)].
 * Record bodies:
 *   SIZE    u64 LE             required
 *   ATIME   i64 LE (ns)
 *   MTIME   i64 LE (ns)
 *   CKSUM   u8 type (ft_cksum_type_t), then the hex value (no NUL)   required
 *           (types 3..5, xxh3, crc32c and sha256, and 6, sha512, came later: a build before them
 *           refuses such a record)
 *   VERSION bytes (no NUL)
 *   ETAG    bytes (no NUL), written only when not empty
 *   CTYPE, UMETA, HDRS, PARTS   bytes (no NUL), each written only when not empty
 * A tag seen twice is corrupt. Unknown tags are skipped so that later writers may add fields.
 */
#define LOM_FORMAT 1
#define LOM_HDR 1
#define LOM_TRAILER 4
#define LOM_REC_HDR 3

enum {
	TAG_SIZE = 1,
	TAG_ATIME = 2,
	TAG_MTIME = 3,
	TAG_CKSUM = 4,
	TAG_VERSION = 5,
	TAG_ETAG = 6,
	TAG_CTYPE = 7,
	TAG_UMETA = 8,
	TAG_HDRS = 9,
	TAG_PARTS = 10,
	TAG_KNOWN_MAX = TAG_PARTS,
};

/* Fixed-size records, and string records (tag, length, bytes without the NUL) of a field of cap bytes. */
#define LOM_U64_REC (LOM_REC_HDR + 8)
#define LOM_STR_REC(cap) (LOM_REC_HDR + (cap)-1)
#define LOM_WORST                                                                                          \
	(LOM_HDR + 3 * LOM_U64_REC + 1 + LOM_STR_REC(FT_CKSUM_HEX_MAX) + LOM_STR_REC(FT_LOM_VERSION_MAX) + \
	 LOM_STR_REC(FT_LOM_ETAG_MAX) + LOM_STR_REC(FT_LOM_CTYPE_MAX) + LOM_STR_REC(FT_LOM_UMETA_MAX) +    \
	 LOM_STR_REC(FT_LOM_HDRS_MAX) + LOM_STR_REC(FT_LOM_PARTS_MAX) + LOM_TRAILER)
/* Any ft_lom_t the encoder accepts fits in FT_LOM_MAX (a longer checksum value or field must grow it). */
_Static_assert(LOM_WORST <= FT_LOM_MAX, "FT_LOM_MAX is below the longest encoding");

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Appends one record; returns the new offset, or -1 when it does not fit before the trailer. */
static long put_record(uint8_t *buf, size_t cap, long off, uint8_t tag, const void *a, size_t alen, const void *b,
		       size_t blen)
{
	size_t len = alen + blen;

	if (len > UINT16_MAX || (size_t)off + LOM_REC_HDR + len + LOM_TRAILER > cap)
		return -1;
	buf[off] = tag;
	put_u16(buf + off + 1, (uint16_t)len);
	if (alen > 0)
		memcpy(buf + off + LOM_REC_HDR, a, alen);
	if (blen > 0)
		memcpy(buf + off + LOM_REC_HDR + alen, b, blen);
	return off + LOM_REC_HDR + (long)len;
}

/* Also -1 for a field the decoder would refuse (unterminated string, unknown checksum type). */
int ft_lom_encode(const ft_lom_t *m, uint8_t *buf, size_t cap)
{
	uint8_t u64[8], atime[8], mtime[8], type;
	size_t cklen = strnlen(m->cksum, FT_CKSUM_HEX_MAX);
	size_t vlen = strnlen(m->version, FT_LOM_VERSION_MAX);
	size_t elen = strnlen(m->etag, FT_LOM_ETAG_MAX);
	size_t ctlen = strnlen(m->content_type, FT_LOM_CTYPE_MAX);
	size_t umlen = strnlen(m->user_meta, FT_LOM_UMETA_MAX);
	size_t hlen = strnlen(m->hdrs, FT_LOM_HDRS_MAX);
	size_t plen = strnlen(m->parts, FT_LOM_PARTS_MAX);
	long off = LOM_HDR;

	if (cklen >= FT_CKSUM_HEX_MAX || vlen >= FT_LOM_VERSION_MAX || elen >= FT_LOM_ETAG_MAX ||
	    ctlen >= FT_LOM_CTYPE_MAX || umlen >= FT_LOM_UMETA_MAX || hlen >= FT_LOM_HDRS_MAX ||
	    plen >= FT_LOM_PARTS_MAX)
		return -1; /* not NUL-terminated: the decoder could not read it back */
	if (!ft_cksum_valid((int)m->cksum_type))
		return -1;
	if (cap > FT_LOM_MAX)
		cap = FT_LOM_MAX;
	if (cap < LOM_HDR + LOM_TRAILER)
		return -1;
	buf[0] = LOM_FORMAT;
	put_u64(u64, m->size);
	put_u64(atime, (uint64_t)m->atime_ns);
	put_u64(mtime, (uint64_t)m->mtime_ns);
	type = (uint8_t)m->cksum_type;
	off = put_record(buf, cap, off, TAG_SIZE, u64, 8, NULL, 0);
	if (off >= 0)
		off = put_record(buf, cap, off, TAG_ATIME, atime, 8, NULL, 0);
	if (off >= 0)
		off = put_record(buf, cap, off, TAG_MTIME, mtime, 8, NULL, 0);
	if (off >= 0)
		off = put_record(buf, cap, off, TAG_CKSUM, &type, 1, m->cksum, cklen);
	if (off >= 0)
		off = put_record(buf, cap, off, TAG_VERSION, m->version, vlen, NULL, 0);
	if (off >= 0 && elen > 0)
		off = put_record(buf, cap, off, TAG_ETAG, m->etag, elen, NULL, 0);
	if (off >= 0 && ctlen > 0)
		off = put_record(buf, cap, off, TAG_CTYPE, m->content_type, ctlen, NULL, 0);
	if (off >= 0 && umlen > 0)
		off = put_record(buf, cap, off, TAG_UMETA, m->user_meta, umlen, NULL, 0);
	if (off >= 0 && hlen > 0)
		off = put_record(buf, cap, off, TAG_HDRS, m->hdrs, hlen, NULL, 0);
	if (off >= 0 && plen > 0)
		off = put_record(buf, cap, off, TAG_PARTS, m->parts, plen, NULL, 0);
	if (off < 0)
		return -1;
	put_u32(buf + off, XXH32(buf, (size_t)off, 0));
	return (int)(off + LOM_TRAILER);
}

/* Type byte, then the value: bytes without NUL, shorter than FT_CKSUM_HEX_MAX. */
static int decode_cksum(ft_lom_t *m, const uint8_t *v, size_t len)
{
	size_t hexlen;

	if (len < 1 || !ft_cksum_valid(v[0]))
		return -1;
	hexlen = len - 1;
	if (hexlen >= FT_CKSUM_HEX_MAX || memchr(v + 1, '\0', hexlen) != NULL)
		return -1;
	m->cksum_type = (ft_cksum_type_t)v[0];
	memcpy(m->cksum, v + 1, hexlen);
	m->cksum[hexlen] = '\0';
	return 0;
}

/* A string field: bytes without NUL, shorter than cap. */
static int decode_string(char *out, size_t cap, const uint8_t *v, size_t len)
{
	if (len >= cap || memchr(v, '\0', len) != NULL)
		return -1;
	memcpy(out, v, len);
	out[len] = '\0';
	return 0;
}

/* Decodes one known record into m; -1 when its body is malformed. */
static int decode_record(ft_lom_t *m, uint8_t tag, const uint8_t *v, size_t len)
{
	switch (tag) {
	case TAG_SIZE:
		if (len != 8)
			return -1;
		m->size = get_u64(v);
		return 0;
	case TAG_ATIME:
		if (len != 8)
			return -1;
		m->atime_ns = (int64_t)get_u64(v);
		return 0;
	case TAG_MTIME:
		if (len != 8)
			return -1;
		m->mtime_ns = (int64_t)get_u64(v);
		return 0;
	case TAG_CKSUM:
		return decode_cksum(m, v, len);
	case TAG_VERSION:
		return decode_string(m->version, FT_LOM_VERSION_MAX, v, len);
	case TAG_ETAG:
		return decode_string(m->etag, FT_LOM_ETAG_MAX, v, len);
	case TAG_CTYPE:
		return decode_string(m->content_type, FT_LOM_CTYPE_MAX, v, len);
	case TAG_UMETA:
		return decode_string(m->user_meta, FT_LOM_UMETA_MAX, v, len);
	case TAG_HDRS:
		return decode_string(m->hdrs, FT_LOM_HDRS_MAX, v, len);
	case TAG_PARTS:
		return decode_string(m->parts, FT_LOM_PARTS_MAX, v, len);
	}
	return 0; /* unknown: skipped */
}

int ft_lom_decode(ft_lom_t *m, const uint8_t *buf, size_t len)
{
	unsigned seen = 0;
	size_t off, end;

	memset(m, 0, sizeof(*m));
	if (buf == NULL || len < LOM_HDR + LOM_TRAILER || len > FT_LOM_MAX)
		return -1;
	end = len - LOM_TRAILER;
	if (XXH32(buf, end, 0) != get_u32(buf + end))
		return -1;
	if (buf[0] != LOM_FORMAT)
		return -1;
	for (off = LOM_HDR; off < end;) {
		if (end - off < LOM_REC_HDR)
			return -1;
		uint8_t tag = buf[off];
		size_t rlen = get_u16(buf + off + 1);
		off += LOM_REC_HDR;
		if (rlen > end - off)
			return -1;
		if (tag <= TAG_KNOWN_MAX) {
			if (tag == 0 || (seen & (1u << tag)) != 0)
				return -1;
			seen |= 1u << tag;
			if (decode_record(m, tag, buf + off, rlen) != 0)
				return -1;
		}
		off += rlen;
	}
	if ((seen & (1u << TAG_SIZE)) == 0 || (seen & (1u << TAG_CKSUM)) == 0)
		return -1;
	return 0;
}

int ft_lom_fget(int fd, ft_lom_t *m)
{
	uint8_t buf[FT_LOM_MAX];
	ssize_t n = fgetxattr(fd, FT_LOM_XATTR, buf, sizeof(buf));

	if (n < 0)
		return errno == ERANGE ? -EBADMSG : -errno; /* ERANGE: larger than we ever write */
	if (ft_lom_decode(m, buf, (size_t)n) != 0)
		return -EBADMSG;
	return 0;
}

int ft_lom_fset(int fd, const ft_lom_t *m)
{
	uint8_t buf[FT_LOM_MAX];
	int n = ft_lom_encode(m, buf, sizeof(buf));

	if (n < 0)
		return -EINVAL;
	if (fsetxattr(fd, FT_LOM_XATTR, buf, (size_t)n, 0) != 0)
		return -errno;
	return 0;
}
