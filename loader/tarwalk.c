/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental TAR stream walker (ft-loader's GetBatch answers): headers checked and reported, data skipped. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/tarhdr.h"
#include "tarwalk.h"

/*
 * DESIGN
 * The stream arrives in pieces of any size, so the walker is a state machine over bytes: it gathers
 * one 512-byte header block at a time (the only bytes it copies, with an extension header's data),
 * checks its checksum (the unsigned sum POSIX asks for, or the signed one of old tars), reads the
 * size (octal, or GNU base-256 for 8 GiB and more) and the typeflag, and then skips the member's
 * data and padding without looking at it. PAX 'x' headers (path, size) and GNU 'L' long names apply
 * to the next member, as FastTier's own writer (target/shard/tar.c) uses them for names over 100
 * bytes; 'g' and 'K' headers are skipped. The archive ends with two zero blocks (then only zeros may
 * follow: tar pads to its record size) or, as tar accepts, with the stream after a member.
 */

enum { S_HEADER = 0, S_EXT, S_SKIP, S_END, S_BAD };

static uint64_t padded(uint64_t n)
{
	return (n + LD_TAR_BLOCK - 1) / LD_TAR_BLOCK * LD_TAR_BLOCK;
}

static int bad(ld_tarwalk_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes the stream bad with a message; returns -1. */
static int bad(ld_tarwalk_t *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->err, sizeof(t->err), fmt, ap);
	va_end(ap);
	t->state = S_BAD;
	return -1;
}

void ld_tarwalk_init(ld_tarwalk_t *t)
{
	t->state = S_HEADER;
	t->offset = t->members = t->skip = 0;
	t->have = 0;
	t->zero_seen = false;
	t->pending = t->have_name = t->have_size = false;
	t->ext_len = 0;
	t->err[0] = '\0';
}

/* The name of the ustar block h into t->name ("prefix/name" when the POSIX prefix field is set). */
static size_t block_name(ld_tarwalk_t *t, const uint8_t *h)
{
	size_t n = 0;

	if (memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') {
		n = strnlen((const char *)h + 345, 155);
		memcpy(t->name, h + 345, n);
		t->name[n++] = '/';
	}
	size_t k = strnlen((const char *)h, 100);
	memcpy(t->name + n, h, k);
	t->name[n + k] = '\0';
	return n + k;
}

/* A decimal PAX value of n bytes. 0, or -1 when malformed. */
static int decimal(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 19)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* PAX records "<len> <key>=<value>\n" of the extension header: path and size are kept. 0 or -1. */
static int pax_records(ld_tarwalk_t *t)
{
	size_t pos = 0;

	while (pos < t->ext_len && t->ext[pos] != '\0') {
		const char *rec = t->ext + pos;
		size_t left = t->ext_len - pos, digits = 0;
		uint64_t len = 0;

		while (digits < left && digits < 6 && rec[digits] >= '0' && rec[digits] <= '9')
			len = len * 10 + (uint64_t)(rec[digits++] - '0');
		if (digits == 0 || len > left || len < digits + 4 || rec[digits] != ' ' || rec[len - 1] != '\n')
			return bad(t, "malformed PAX record in the extension header at offset %llu",
				   (unsigned long long)t->pending_off);
		const char *key = rec + digits + 1, *end = rec + len - 1;
		const char *eq = memchr(key, '=', (size_t)(end - key));
		if (eq == NULL)
			return bad(t, "PAX record without '=' at offset %llu", (unsigned long long)t->pending_off);
		size_t klen = (size_t)(eq - key), vlen = (size_t)(end - eq - 1);
		if (klen == 4 && memcmp(key, "path", 4) == 0) {
			if (vlen == 0 || vlen > LD_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen) != NULL)
				return bad(t, "PAX path empty, longer than %d bytes or with a NUL byte",
					   LD_TAR_NAME_MAX);
			memcpy(t->name, eq + 1, vlen);
			t->name[vlen] = '\0';
			t->have_name = true;
		} else if (klen == 4 && memcmp(key, "size", 4) == 0) {
			if (decimal(eq + 1, vlen, &t->ext_size) != 0)
				return bad(t, "malformed PAX size at offset %llu", (unsigned long long)t->pending_off);
			t->have_size = true;
		}
		pos += (size_t)len;
	}
	return 0;
}

/* The extension header's data is all in t->ext: applies it to the next member. 0 or -1. */
static int ext_done(ld_tarwalk_t *t)
{
	if (t->ext_type == 'x')
		return pax_records(t);
	size_t n = strnlen(t->ext, t->ext_len);
	if (n == 0 || n > LD_TAR_NAME_MAX)
		return bad(t, "GNU long name at offset %llu empty or longer than %d bytes",
			   (unsigned long long)t->pending_off, LD_TAR_NAME_MAX);
	memcpy(t->name, t->ext, n);
	t->name[n] = '\0';
	t->have_name = true;
	return 0;
}

/* After a header: skip n bytes (data and padding) before the next one. */
static void skip_then_header(ld_tarwalk_t *t, uint64_t n)
{
	t->skip = n;
	t->state = n > 0 ? S_SKIP : S_HEADER;
}

/* A whole header block is in t->block: a member, an extension header or an end block. 0 or -1. */
static int header(ld_tarwalk_t *t, ld_tar_member_fn fn, void *ctx)
{
	const uint8_t *h = t->block;
	uint64_t off = t->offset - LD_TAR_BLOCK, size;
	char type = (char)h[156];

	if (ft_tar_zero_block(h)) {
		if (t->pending)
			return bad(t, "extension header at offset %llu has no member",
				   (unsigned long long)t->pending_off);
		if (t->zero_seen)
			t->state = S_END;
		t->zero_seen = true;
		return 0;
	}
	if (t->zero_seen)
		return bad(t, "a lone zero block at offset %llu inside the archive",
			   (unsigned long long)(off - LD_TAR_BLOCK));
	if (!ft_tar_checksum_ok(h))
		return bad(t, "bad header checksum at offset %llu", (unsigned long long)off);
	if (ft_tar_num(h + 124, 12, &size) != 0)
		return bad(t, "bad size field in the header at offset %llu", (unsigned long long)off);
	if (!t->pending && (type == 'x' || type == 'L' || type == 'K')) {
		t->pending = true;
		t->pending_off = off;
	}
	if (type == 'x' || type == 'L') {
		if (size > LD_TAR_EXT_MAX)
			return bad(t, "extension header of %llu bytes at offset %llu (at most %d read)",
				   (unsigned long long)size, (unsigned long long)off, LD_TAR_EXT_MAX);
		t->ext_type = type;
		t->ext_len = 0;
		t->ext_left = size;
		t->ext_pad = padded(size) - size;
		if (size > 0) {
			t->state = S_EXT;
			return 0;
		}
		if (ext_done(t) != 0)
			return -1;
		skip_then_header(t, 0);
		return 0;
	}
	if (type == 'g' || type == 'K') { /* global records, a long link name: nothing the walk needs */
		skip_then_header(t, padded(size));
		return 0;
	}
	ld_tar_member_t m = {.type = type, .index = t->members, .offset = t->pending ? t->pending_off : off};
	m.name_len = t->have_name ? strlen(t->name) : block_name(t, h);
	m.name = t->name;
	m.size = t->have_size ? t->ext_size : size;
	if (type == '1' || type == '2' || type == '3' || type == '4' || type == '6')
		m.size = 0; /* links, devices and FIFOs carry no data whatever the size field says */
	if (fn != NULL && fn(ctx, &m, t->err, sizeof(t->err)) != 0) {
		if (t->err[0] == '\0')
			snprintf(t->err, sizeof(t->err), "member %llu refused", (unsigned long long)m.index);
		t->state = S_BAD;
		return -1;
	}
	t->members++;
	t->pending = t->have_name = t->have_size = false;
	skip_then_header(t, padded(m.size));
	return 0;
}

int ld_tarwalk_feed(ld_tarwalk_t *t, const void *p, size_t n, ld_tar_member_fn fn, void *ctx)
{
	const uint8_t *b = p;

	while (n > 0 && t->state != S_BAD) {
		size_t k = n;

		switch (t->state) {
		case S_HEADER:
			k = LD_TAR_BLOCK - t->have < n ? LD_TAR_BLOCK - t->have : n;
			memcpy(t->block + t->have, b, k);
			t->have += k;
			t->offset += k;
			if (t->have == LD_TAR_BLOCK) {
				t->have = 0;
				header(t, fn, ctx);
			}
			break;
		case S_EXT:
			k = t->ext_left < n ? (size_t)t->ext_left : n;
			memcpy(t->ext + t->ext_len, b, k);
			t->ext_len += k;
			t->ext_left -= k;
			t->offset += k;
			if (t->ext_left == 0 && ext_done(t) == 0)
				skip_then_header(t, t->ext_pad);
			break;
		case S_SKIP:
			k = t->skip < n ? (size_t)t->skip : n;
			t->skip -= k;
			t->offset += k;
			if (t->skip == 0)
				t->state = S_HEADER;
			break;
		case S_END:
			for (size_t i = 0; i < n; i++)
				if (b[i] != 0)
					return bad(t, "data after the end-of-archive blocks, at offset %llu",
						   (unsigned long long)(t->offset + i));
			t->offset += n;
			break;
		}
		b += k;
		n -= k;
	}
	return t->state == S_BAD ? -1 : 0;
}

int ld_tarwalk_end(ld_tarwalk_t *t)
{
	switch (t->state) {
	case S_BAD:
		return -1;
	case S_END:
		return 0;
	case S_HEADER:
		if (t->have == 0 && !t->pending)
			return 0; /* between members (or after one zero block) */
		if (t->have == 0)
			return bad(t, "truncated: the extension header at offset %llu has no member",
				   (unsigned long long)t->pending_off);
		return bad(t, "truncated: a header cut at offset %llu after %zu of its 512 bytes",
			   (unsigned long long)t->offset, t->have);
	case S_EXT:
		return bad(t, "truncated: the extension header at offset %llu is cut",
			   (unsigned long long)t->pending_off);
	default:
		if (t->pending)
			return bad(t, "truncated: the extension header at offset %llu is cut",
				   (unsigned long long)t->pending_off);
		return bad(t, "truncated at offset %llu: %llu bytes of member %llu's data and padding missing",
			   (unsigned long long)t->offset, (unsigned long long)t->skip,
			   (unsigned long long)(t->members > 0 ? t->members - 1 : 0));
	}
}
