/* SPDX-License-Identifier: Apache-2.0 */
/* Uncompressed TAR: the header walk that finds each member's data offset, and the header writer of appends and TAR streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tarhdr.h"
#include "shard/walk.h"

#define BLOCK 512
#define PAX_MAX (64 * 1024) /* largest PAX extension header read (records for one member) */

static uint64_t round_block(uint64_t n)
{
	return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* Copies a fixed-width field (NUL-terminated when shorter) to out at its length; returns that length. */
static size_t field(char *out, const uint8_t *f, size_t len)
{
	size_t n = strnlen((const char *)f, len);
	memcpy(out, f, n);
	out[n] = '\0';
	return n;
}

/* What extension headers said about the next member. */
typedef struct {
	char name[TGT_SHARD_NAME_MAX + 1];
	int have_name;
	uint64_t size;
	int have_size;
	uint64_t first_hdr; /* offset of the first extension header of the member */
	int pending;
} ext_t;

/* Parses PAX records "<len> <key>=<value>\n" for path and size. 0, or -1 if malformed. */
static int pax_parse(const char *p, size_t n, ext_t *x, char *err, size_t cap)
{
	size_t pos = 0;

	while (pos < n) {
		if (p[pos] == '\0')
			break; /* padding */
		size_t len = 0, i = pos;
		while (i < n && p[i] >= '0' && p[i] <= '9' && len < PAX_MAX)
			len = len * 10 + (size_t)(p[i++] - '0');
		if (i == pos || i >= n || p[i] != ' ' || len < 5 || len > n - pos || p[pos + len - 1] != '\n') {
			snprintf(err, cap, "malformed PAX record");
			return -1;
		}
		const char *kv = p + i + 1, *rec_end = p + pos + len - 1;
		const char *eq = memchr(kv, '=', (size_t)(rec_end - kv));
		if (eq == NULL) {
			snprintf(err, cap, "malformed PAX record (no '=')");
			return -1;
		}
		size_t klen = (size_t)(eq - kv), vlen = (size_t)(rec_end - eq - 1);
		if (klen == 4 && memcmp(kv, "path", 4) == 0) {
			if (vlen == 0 || vlen > TGT_SHARD_NAME_MAX || memchr(eq + 1, '\0', vlen) != NULL) {
				snprintf(err, cap, "PAX path empty, too long or with a NUL byte");
				return -1;
			}
			memcpy(x->name, eq + 1, vlen);
			x->name[vlen] = '\0';
			x->have_name = 1;
		} else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
			uint64_t v = 0;
			if (vlen == 0 || vlen > 19) {
				snprintf(err, cap, "malformed PAX size");
				return -1;
			}
			for (size_t k = 0; k < vlen; k++) {
				char c = eq[1 + k];
				if (c < '0' || c > '9') {
					snprintf(err, cap, "malformed PAX size");
					return -1;
				}
				v = v * 10 + (uint64_t)(c - '0');
			}
			x->size = v;
			x->have_size = 1;
		}
		pos += len;
	}
	return 0;
}

/* Reads an extension header's data (n bytes at off) into a fresh buffer (caller frees); NULL with err. */
static char *read_ext(tgt_walk_read_fn rd, void *rarg, uint64_t off, uint64_t n, char *err, size_t cap)
{
	if (n > PAX_MAX) {
		snprintf(err, cap, "extension header of %llu bytes at offset %llu is too large", (unsigned long long)n,
			 (unsigned long long)off);
		return NULL;
	}
	char *buf = malloc(n + 1);
	if (buf == NULL) {
		snprintf(err, cap, "out of memory");
		return NULL;
	}
	if (n > 0 && rd(rarg, buf, n, off) != 0) {
		free(buf);
		snprintf(err, cap, "truncated: extension header at offset %llu is cut", (unsigned long long)off);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* Handles an extension header (GNU 'L' long name, PAX 'x'); others ('K', 'g') are skipped. 0 or -1 with err. */
static int extension(tgt_walk_read_fn rd, void *rarg, uint8_t type, uint64_t data_off, uint64_t size, ext_t *x,
		     char *err, size_t cap)
{
	if (type != 'L' && type != 'x')
		return 0;
	char *buf = read_ext(rd, rarg, data_off, size, err, cap);
	int rc = 0;

	if (buf == NULL)
		return -1;
	if (type == 'L') {
		size_t n = strnlen(buf, size);
		if (n == 0 || n > TGT_SHARD_NAME_MAX) {
			snprintf(err, cap, "GNU long name empty or too long");
			rc = -1;
		} else {
			memcpy(x->name, buf, n);
			x->name[n] = '\0';
			x->have_name = 1;
		}
	} else {
		rc = pax_parse(buf, size, x, err, cap);
	}
	free(buf);
	return rc;
}

/* The member's name from its ustar block (prefix "/" name for POSIX ustar), unless an extension gave one. */
static void block_name(const uint8_t *h, ext_t *x)
{
	if (x->have_name)
		return;
	size_t n = 0;
	if (memcmp(h + 257, "ustar\0", 6) == 0 && h[345] != '\0') { /* POSIX ustar: prefix field */
		n = field(x->name, h + 345, 155);
		x->name[n++] = '/';
	}
	field(x->name + n, h, 100);
}

int tgt_tar_walk(tgt_walk_read_fn rd, void *rarg, uint64_t file_size, tgt_walk_member_fn fn, void *farg, uint64_t *end,
		 char *err, size_t cap)
{
	uint8_t h[BLOCK];
	ext_t *x = calloc(1, sizeof(*x));
	uint64_t off = 0;
	int rc = -1;

	if (x == NULL) {
		snprintf(err, cap, "out of memory");
		return -1;
	}
	if (end)
		*end = file_size;
	for (;;) {
		if (off == file_size && !x->pending) { /* no end-of-archive marker: accepted */
			rc = 0;
			break;
		}
		if (off + BLOCK > file_size || rd(rarg, h, BLOCK, off) != 0) {
			snprintf(err, cap, "truncated: header at offset %llu is cut", (unsigned long long)off);
			break;
		}
		if (ft_tar_zero_block(h)) {
			if (x->pending) {
				snprintf(err, cap, "extension header at offset %llu has no member",
					 (unsigned long long)x->first_hdr);
				break;
			}
			if (end)
				*end = off;
			rc = 0;
			break;
		}
		if (!ft_tar_checksum_ok(h)) {
			snprintf(err, cap, "bad header checksum at offset %llu", (unsigned long long)off);
			break;
		}
		uint64_t size;
		if (ft_tar_num(h + 124, 12, &size) != 0) {
			snprintf(err, cap, "bad size field at offset %llu", (unsigned long long)off);
			break;
		}
		uint8_t type = h[156];
		if (!x->pending) {
			x->first_hdr = off;
			x->pending = 1;
		}
		if (type == 'x' || type == 'L' || type == 'K' || type == 'g') {
			if (size > file_size - off - BLOCK) {
				snprintf(err, cap, "truncated: extension header at offset %llu is cut",
					 (unsigned long long)off);
				break;
			}
			if (extension(rd, rarg, type, off + BLOCK, size, x, err, cap) != 0)
				break;
			if (type == 'g') /* global records: not about the next member */
				x->pending = 0;
			off += BLOCK + round_block(size);
			continue;
		}
		if (x->have_size)
			size = x->size;
		block_name(h, x);
		/* Links and devices carry no data; directories and GNU sparse files are no members. */
		int regular = type == '0' || type == '\0' || type == '7';
		uint64_t body = size;
		if (type == '1' || type == '2' || type == '3' || type == '4' || type == '6')
			body = 0;
		if (body > file_size - off - BLOCK) {
			snprintf(err, cap, "truncated: member \"%.200s\" at offset %llu is cut", x->name,
				 (unsigned long long)off);
			break;
		}
		tgt_walk_member_t m = {.name = x->name,
				       .size = size,
				       .data_off = (int64_t)(off + BLOCK),
				       .hdr_off = x->first_hdr,
				       .regular = regular && x->name[0] != '\0'};
		int cb = fn ? fn(farg, &m) : 0;
		if (cb != 0) {
			rc = cb;
			break;
		}
		x->pending = x->have_name = x->have_size = 0;
		off += BLOCK + round_block(body);
	}
	free(x);
	return rc;
}

/* Writes v as octal into a field of len bytes (len - 1 digits and a NUL). 0, or -1 if it does not fit. */
static int put_octal(uint8_t *f, size_t len, uint64_t v)
{
	f[len - 1] = '\0';
	for (size_t i = len - 1; i-- > 0;) {
		f[i] = (uint8_t)('0' + (v & 7));
		v >>= 3;
	}
	return v == 0 ? 0 : -1;
}

static void put_checksum(uint8_t *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < BLOCK; i++)
		sum += h[i];
	put_octal(h + 148, 7, sum);
	h[155] = ' ';
}

/* One ustar block: name (truncated when a PAX header carries the full one), size, type. */
static void ustar_block(uint8_t *h, const char *name, uint64_t size, int64_t mtime_s, char type)
{
	memset(h, 0, BLOCK);
	size_t n = strlen(name);
	memcpy(h, name, n > 100 ? 100 : n);
	put_octal(h + 100, 8, 0644);
	put_octal(h + 108, 8, 0);
	put_octal(h + 116, 8, 0);
	if (put_octal(h + 124, 12, size) != 0)
		put_octal(h + 124, 12, 0); /* the PAX size record carries it */
	put_octal(h + 136, 12, mtime_s > 0 && mtime_s < 077777777777LL ? (uint64_t)mtime_s : 0);
	h[156] = (uint8_t)type;
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
}

/* Appends one PAX record "<len> key=value\n" to out at *pos (the length counts its own digits). */
static void pax_record(char *out, size_t *pos, const char *key, const char *value)
{
	size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, len = body + 1;
	while (snprintf(NULL, 0, "%zu", len) + body != len)
		len++;
	*pos += (size_t)sprintf(out + *pos, "%zu %s=%s\n", len, key, value);
}

size_t tgt_tar_header_max(size_t name_len)
{
	return BLOCK + round_block(name_len + 64) + BLOCK;
}

ssize_t tgt_tar_header(const char *name, uint64_t size, int64_t mtime_s, uint8_t *out, size_t cap)
{
	size_t n = strlen(name);
	int need_size = size > 077777777777ULL;

	if (n == 0 || n > TGT_SHARD_NAME_MAX || cap < tgt_tar_header_max(n))
		return -1;
	if (n <= 100 && !need_size) {
		ustar_block(out, name, size, mtime_s, '0');
		put_checksum(out);
		return BLOCK;
	}
	char *pax = (char *)out + BLOCK, num[24];
	size_t plen = 0;
	if (n > 100)
		pax_record(pax, &plen, "path", name);
	if (need_size) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
		pax_record(pax, &plen, "size", num);
	}
	size_t padded = round_block(plen);
	memset(pax + plen, 0, padded - plen);
	ustar_block(out, "././@PaxHeader", plen, mtime_s, 'x');
	put_checksum(out);
	ustar_block(out + BLOCK + padded, name, size, mtime_s, '0');
	put_checksum(out + BLOCK + padded);
	return (ssize_t)(BLOCK + padded + BLOCK);
}
