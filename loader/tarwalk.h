/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental TAR stream walker: each member's name and size from bytes as they arrive, headers checked, data skipped. */
#ifndef LD_TARWALK_H
#define LD_TARWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LD_TAR_BLOCK 512
#define LD_TAR_NAME_MAX 4096 /* longest member name kept (a PAX path or a GNU long name) */
#define LD_TAR_EXT_MAX 8192  /* largest extension header ('x' PAX records, 'L' long name) read */

/* One member, as its header (and the extension headers before it) said. */
typedef struct {
	const char *name; /* NUL-terminated, valid during the callback only */
	size_t name_len;
	uint64_t size;   /* data bytes that follow the header (0 for links and devices) */
	char type;       /* the typeflag: '0' (or '\0') for a regular file */
	uint64_t index;  /* 0 for the first member */
	uint64_t offset; /* of its (first) header in the stream */
} ld_tar_member_t;

/*
 * Called once per member, when its header is complete and before its data. Returns 0 to go on;
 * anything else makes the stream bad, with err (errlen bytes) saying why.
 */
typedef int (*ld_tar_member_fn)(void *ctx, const ld_tar_member_t *m, char *err, size_t errlen);

/* The walker's state: a plain struct (about 13 KiB), no allocation; ld_tarwalk_init before each stream. */
typedef struct {
	int state;
	uint64_t offset;  /* stream bytes consumed */
	uint64_t members; /* members reported */
	uint64_t skip;    /* data and padding bytes still to skip */
	uint8_t block[LD_TAR_BLOCK];
	size_t have; /* bytes of block gathered */
	bool zero_seen;
	/* extension headers of the next member */
	char ext_type;
	uint64_t ext_left, ext_pad;
	size_t ext_len;
	bool pending; /* an extension header waits for its member */
	uint64_t pending_off;
	bool have_name, have_size;
	uint64_t ext_size;
	char ext[LD_TAR_EXT_MAX];
	char name[LD_TAR_NAME_MAX + 1];
	char err[200];
} ld_tarwalk_t;

void ld_tarwalk_init(ld_tarwalk_t *t);
/*
 * Walks n more bytes of the stream. Returns 0, or -1 when the stream is malformed (a bad header
 * checksum or number, a data block where the end marker's second block belongs, bytes other than
 * zeros after it, an extension header too large or without its member) or fn refused a member:
 * t->err says why, and every later call returns -1 too.
 */
int ld_tarwalk_feed(ld_tarwalk_t *t, const void *p, size_t n, ld_tar_member_fn fn, void *ctx);
/*
 * The stream ended. Returns 0 when it ended between members: after the end-of-archive blocks, or
 * (as tar accepts) right after a member's padding; else -1 with t->err (truncated, or malformed).
 */
int ld_tarwalk_end(ld_tarwalk_t *t);

#endif
