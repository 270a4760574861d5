/* SPDX-License-Identifier: Apache-2.0 */
/* Own header walks of uncompressed TAR and of ZIP's central directory: where each member's bytes lie in the file. */
#ifndef TGT_SHARD_WALK_H
#define TGT_SHARD_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * DESIGN
 * libarchive reads every format, but it does not tell where a member's data starts in the file:
 * its TAR reader folds GNU long-name and PAX extension headers into the entry and reports no data
 * offset, and its ZIP reader reports none either. The index of a shard (index.c) needs exactly
 * that offset, so that reading one member is one sendfile(2) of a byte range. These two walks
 * read only headers: TAR's 512-byte blocks (ustar, GNU 'L' long names, PAX 'x' path and size),
 * and ZIP's end-of-central-directory record (ZIP64 too), its central directory and each stored
 * member's local header. They trust nothing: every header checksum (TAR), every length and every
 * offset is checked against the file's size, and anything that does not add up is an error, so a
 * truncated or corrupt shard is refused before any member is served. Pure functions over a read
 * callback (no file system, no allocation kept): fuzzed by tests/fuzz/fuzz_shard_walk.c.
 */

#define TGT_SHARD_NAME_MAX 4096 /* longest member name accepted (PAX allows any length) */

/* Reads exactly len bytes at off into buf: 0, or -1 (short file or I/O error). */
typedef int (*tgt_walk_read_fn)(void *arg, void *buf, size_t len, uint64_t off);

/* One member found by a walk (name NUL-terminated, valid during the callback only). */
typedef struct {
	const char *name;
	uint64_t size;    /* bytes of the member's content */
	int64_t data_off; /* where they start in the file; -1: compressed (ZIP deflate: decode to read) */
	uint64_t hdr_off; /* TAR: the first header block of the member (extension headers included) */
	int regular;      /* 1 for a regular file; 0 for directories, links and the like (not members) */
} tgt_walk_member_t;

/* Called per entry in archive order; a non-zero return stops the walk with that value. */
typedef int (*tgt_walk_member_fn)(void *arg, const tgt_walk_member_t *m);

/*
 * Walks an uncompressed TAR of file_size bytes. *end (may be NULL) gets the offset of the end-of-archive
 * marker (where an appended member goes; file_size when the archive ends without one). Returns 0;
 * the callback's non-zero value; or -1 with err filled (bad checksum, truncated member, bad field).
 */
int tgt_tar_walk(tgt_walk_read_fn rd, void *rarg, uint64_t file_size, tgt_walk_member_fn fn, void *farg, uint64_t *end,
		 char *err, size_t cap);

/*
 * Walks a ZIP's central directory (entries in central-directory order). A stored, unencrypted
 * member gets its data offset from its local header; any other gets data_off -1. Returns as tgt_tar_walk.
 */
int tgt_zip_walk(tgt_walk_read_fn rd, void *rarg, uint64_t file_size, tgt_walk_member_fn fn, void *farg, char *err,
		 size_t cap);

/*
 * The TAR header block(s) of a regular member: one ustar block, preceded by a PAX 'x' header
 * (and its records) when the name does not fit ustar's name/prefix fields or the size needs
 * more than 11 octal digits. Writes at most cap bytes to out; returns the header length (a
 * multiple of 512), or -1 when cap is too small or the name is empty or too long.
 */
ssize_t tgt_tar_header(const char *name, uint64_t size, int64_t mtime_s, uint8_t *out, size_t cap);
/* Upper bound of tgt_tar_header's length for a name of name_len bytes. */
size_t tgt_tar_header_max(size_t name_len);

#endif
