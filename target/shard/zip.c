/* SPDX-License-Identifier: Apache-2.0 */
/* ZIP's central directory walk: every member's name and size, and the data offset of stored members (read by sendfile). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard/walk.h"

#define EOCD_SIG 0x06054b50u
#define EOCD_LEN 22
#define LOC64_SIG 0x07064b50u
#define LOC64_LEN 20
#define EOCD64_SIG 0x06064b50u
#define EOCD64_LEN 56
#define CEN_SIG 0x02014b50u
#define CEN_LEN 46
#define LOC_SIG 0x04034b50u
#define LOC_LEN 30
#define TAIL_MAX (EOCD_LEN + 65535)
#define CD_MAX (256u << 20) /* largest central directory read (about 3 million members) */

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Where the central directory is: from the end record, or the ZIP64 one it points to. 0, or -1 with err. */
static int find_cd(tgt_walk_read_fn rd, void *rarg, uint64_t file_size, uint64_t *cd_off, uint64_t *cd_size,
		   uint64_t *count, char *err, size_t cap)
{
	size_t tail = file_size < TAIL_MAX ? (size_t)file_size : TAIL_MAX;
	uint8_t *buf = malloc(tail ? tail : 1);
	int rc = -1;
	size_t at;

	if (buf == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (tail < EOCD_LEN || rd(rarg, buf, tail, file_size - tail) != 0) {
		snprintf(err, cap, "not a ZIP: no end of central directory record");
		goto out;
	}
	for (at = tail - EOCD_LEN + 1; at-- > 0;)
		if (le32(buf + at) == EOCD_SIG && at + EOCD_LEN + le16(buf + at + 20) <= tail)
			break;
	if (at == (size_t)-1) {
		snprintf(err, cap, "not a ZIP, or truncated: no end of central directory record");
		goto out;
	}
	const uint8_t *e = buf + at;
	uint64_t eocd_off = file_size - tail + at;
	*count = le16(e + 10);
	*cd_size = le32(e + 12);
	*cd_off = le32(e + 16);
	if (le16(e + 4) != 0 || le16(e + 6) != 0) {
		snprintf(err, cap, "multi-disk ZIP archives are not supported");
		goto out;
	}
	if (*count == 0xffff || *cd_size == 0xffffffffu || *cd_off == 0xffffffffu) {
		uint8_t loc[LOC64_LEN], e64[EOCD64_LEN];
		if (eocd_off < LOC64_LEN || rd(rarg, loc, LOC64_LEN, eocd_off - LOC64_LEN) != 0 ||
		    le32(loc) != LOC64_SIG) {
			snprintf(err, cap, "ZIP64 end of central directory locator missing");
			goto out;
		}
		uint64_t off64 = le64(loc + 8);
		if (off64 > file_size - EOCD64_LEN || rd(rarg, e64, EOCD64_LEN, off64) != 0 ||
		    le32(e64) != EOCD64_SIG) {
			snprintf(err, cap, "ZIP64 end of central directory record missing");
			goto out;
		}
		*count = le64(e64 + 32);
		*cd_size = le64(e64 + 40);
		*cd_off = le64(e64 + 48);
		eocd_off = off64;
	}
	if (*cd_off > eocd_off || *cd_size > eocd_off - *cd_off) {
		snprintf(err, cap, "corrupt ZIP: central directory outside the file");
		goto out;
	}
	if (*cd_size > CD_MAX) {
		snprintf(err, cap, "ZIP central directory of %llu bytes is too large", (unsigned long long)*cd_size);
		goto out;
	}
	rc = 0;
out:
	free(buf);
	return rc;
}

/* Applies a ZIP64 extra field (id 1) to the sizes and offset marked 0xffffffff. 0, or -1 if it is missing or short. */
static int zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *lho)
{
	uint64_t *want[3] = {*usize == 0xffffffffu ? usize : NULL, *csize == 0xffffffffu ? csize : NULL,
			     *lho == 0xffffffffu ? lho : NULL};

	if (!want[0] && !want[1] && !want[2])
		return 0;
	for (size_t p = 0; p + 4 <= xlen;) {
		uint16_t id = le16(x + p), len = le16(x + p + 2);
		if (p + 4 + len > xlen)
			return -1;
		if (id == 1) {
			size_t q = p + 4;
			for (int i = 0; i < 3; i++) {
				if (!want[i])
					continue;
				if (q + 8 > p + 4 + len)
					return -1;
				*want[i] = le64(x + q);
				q += 8;
			}
			return 0;
		}
		p += 4 + (size_t)len;
	}
	return -1;
}

/* The data offset of a stored member from its local header; -1 with err when it does not add up. */
static int64_t local_data(tgt_walk_read_fn rd, void *rarg, uint64_t lho, uint64_t csize, uint64_t cd_off, char *err,
			  size_t cap)
{
	uint8_t loc[LOC_LEN];

	if (lho > cd_off || cd_off - lho < LOC_LEN || rd(rarg, loc, LOC_LEN, lho) != 0 || le32(loc) != LOC_SIG) {
		snprintf(err, cap, "corrupt ZIP: no local header at offset %llu", (unsigned long long)lho);
		return -1;
	}
	uint64_t data = lho + LOC_LEN + le16(loc + 26) + le16(loc + 28);
	if (data > cd_off || csize > cd_off - data) {
		snprintf(err, cap, "corrupt or truncated ZIP: member at offset %llu runs past its end",
			 (unsigned long long)lho);
		return -1;
	}
	return (int64_t)data;
}

int tgt_zip_walk(tgt_walk_read_fn rd, void *rarg, uint64_t file_size, tgt_walk_member_fn fn, void *farg, char *err,
		 size_t cap)
{
	uint64_t cd_off, cd_size, count;
	uint8_t *cd = NULL;
	char *name = NULL;
	int rc = -1;

	if (find_cd(rd, rarg, file_size, &cd_off, &cd_size, &count, err, cap) != 0)
		return -1;
	cd = malloc(cd_size ? cd_size : 1);
	name = malloc(TGT_SHARD_NAME_MAX + 1);
	if (cd == NULL || name == NULL) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	if (cd_size > 0 && rd(rarg, cd, cd_size, cd_off) != 0) {
		snprintf(err, cap, "truncated ZIP: central directory cut");
		goto out;
	}
	size_t p = 0;
	for (uint64_t i = 0; i < count; i++) {
		if (p + CEN_LEN > cd_size || le32(cd + p) != CEN_SIG) {
			snprintf(err, cap, "corrupt ZIP: central directory entry %llu", (unsigned long long)i);
			goto out;
		}
		const uint8_t *c = cd + p;
		uint16_t flags = le16(c + 8), method = le16(c + 10), nlen = le16(c + 28), xlen = le16(c + 30);
		uint64_t csize = le32(c + 20), usize = le32(c + 24), lho = le32(c + 42);
		size_t rec = CEN_LEN + (size_t)nlen + xlen + le16(c + 32);
		if (rec > cd_size - p || nlen == 0 || nlen > TGT_SHARD_NAME_MAX || memchr(c + CEN_LEN, '\0', nlen)) {
			snprintf(err, cap, "corrupt ZIP: central directory entry %llu", (unsigned long long)i);
			goto out;
		}
		memcpy(name, c + CEN_LEN, nlen);
		name[nlen] = '\0';
		if (zip64_extra(c + CEN_LEN + nlen, xlen, &usize, &csize, &lho) != 0) {
			snprintf(err, cap, "corrupt ZIP: ZIP64 field of \"%.200s\"", name);
			goto out;
		}
		int regular = name[nlen - 1] != '/';
		int64_t data = -1;
		if (regular && method == 0 && !(flags & 1)) {
			if (csize != usize) {
				snprintf(err, cap, "corrupt ZIP: stored member \"%.200s\" with two sizes", name);
				goto out;
			}
			data = local_data(rd, rarg, lho, csize, cd_off, err, cap);
			if (data < 0)
				goto out;
		}
		tgt_walk_member_t m = {
			.name = name, .size = usize, .data_off = data, .hdr_off = lho, .regular = regular};
		int cb = fn ? fn(farg, &m) : 0;
		if (cb != 0) {
			rc = cb;
			goto out;
		}
		p += rec;
	}
	rc = 0;
out:
	free(name);
	free(cd);
	return rc;
}
