/* SPDX-License-Identifier: Apache-2.0 */
/* What the shard files share: archive formats, member names and matching, the member index and its cache, decoding. */
#ifndef TGT_SHARD_SHARD_H
#define TGT_SHARD_SHARD_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "shard/walk.h"
#include "target.h"

/*
 * DESIGN
 * A shard is an ordinary object whose name ends in .tar, .tgz/.tar.gz, .zip or .tar.lz4 (or any
 * object read with an explicit archmime). Nothing is ever extracted to disk: members are read
 * from the shard file, so a member name (even "../x" or "/etc/x") never becomes a path.
 * Index (index.c): per shard version, the regular members with their size and, for uncompressed
 * TAR and ZIP's stored members, their data offset (walk.h); compressed formats are decoded once
 * through libarchive to list names and sizes. It is built on first access and cached in memory
 * keyed by the object's path and the version, mtime, size and checksum of its metadata: a write
 * publishes a new version, so the old index is never found again (and ages out of the cache).
 * Reads (read.c, select.c): a member with an offset is one ranged sendfile(2); one without is
 * decoded from the start of the shard up to it (decode.c), its decoded bytes bounded by
 * shard_max_decoded_bytes. Appends (append.c) build the new shard in a work file and publish it
 * like a PUT under the name lock.
 */

typedef enum {
	TGT_SHARD_NONE = 0,
	TGT_SHARD_TAR,
	TGT_SHARD_TGZ,
	TGT_SHARD_ZIP,
	TGT_SHARD_TLZ4,
} tgt_shard_fmt_t;

/* ---- format.c ---- */
/* The format an object name's extension says, TGT_SHARD_NONE for none. */
tgt_shard_fmt_t tgt_shard_fmt_of_name(const char *obj);
/* An archmime value (".tar", "tar", "application/x-tar", ".tgz", "application/gzip", ".zip", ".tar.lz4", ...). */
tgt_shard_fmt_t tgt_shard_fmt_parse(const char *mime);
const char *tgt_shard_fmt_name(tgt_shard_fmt_t f);
/* The request's format: archmime when given (400 when unknown), else the name's (400 when none). 0, or -1 after responding. */
int tgt_shard_fmt_req(ft_req_t *r, const tgt_obj_t *o, tgt_shard_fmt_t *f);

/* ---- member.c ---- */
/* Whether name may be addressed (and written) as a member: 0, or -1 with *why (empty, absolute, "..", NUL, length). */
int tgt_shard_member_check(const char *name, const char **why);
/* The WebDataset sample key of a member name: its length (the name up to the first '.' of its last segment). */
size_t tgt_shard_wdskey_len(const char *name);

typedef enum {
	TGT_MATCH_REGEXP = 0,
	TGT_MATCH_PREFIX,
	TGT_MATCH_SUFFIX,
	TGT_MATCH_SUBSTR,
	TGT_MATCH_WDSKEY,
} tgt_match_mode_t;

typedef struct {
	tgt_match_mode_t mode;
	const char *pattern; /* borrowed */
	size_t pattern_len;
	regex_t re;
	bool re_live;
} tgt_shard_match_t;

/* mode: regexp (default when NULL or ""), prefix, suffix, substr, wdskey. 0, or -1 with err (unknown mode, bad regexp). */
int tgt_shard_match_init(tgt_shard_match_t *m, const char *mode, const char *pattern, char *err, size_t cap);
bool tgt_shard_match(const tgt_shard_match_t *m, const char *name);
void tgt_shard_match_fini(tgt_shard_match_t *m);

/* ---- index.c ---- */
typedef struct {
	const char *name;
	uint64_t size;
	int64_t off;  /* data offset in the shard, -1: decode to read */
	uint32_t nth; /* which occurrence of the name in archive order this is (a name appended again wins) */
} tgt_shard_member_t;

typedef struct tgt_shard_index tgt_shard_index_t;
struct tgt_shard_index {
	tgt_shard_index_t *next_free; /* internal */
	int refs;                     /* under the cache lock */
	uint64_t used;                /* LRU clock */
	tgt_shard_fmt_t fmt;
	char rel[TGT_REL_MAX];
	char version[FT_LOM_VERSION_MAX];
	char cksum[FT_CKSUM_HEX_MAX];
	int64_t mtime_ns;
	uint64_t size;
	tgt_shard_member_t *m; /* the members, in archive order; a name listed once */
	uint32_t *by_name;     /* indexes into m, sorted by name */
	size_t n;
	uint64_t tar_end; /* TAR: offset of the end-of-archive marker (where an append goes) */
	size_t bytes;     /* memory held */
};

/* Errors of index and decode calls: -EBADMSG corrupt or truncated, -EFBIG over the decoded limit, -ENOMEM, -EIO. */
/*
 * The index of o's shard open on fd with metadata lom: from the cache, else built now (blocking:
 * worker or control thread) unless !may_build (then -EAGAIN). *out is a reference: put it back.
 */
int tgt_shard_index_get(const tgt_obj_t *o, int fd, const ft_lom_t *lom, tgt_shard_fmt_t fmt, bool may_build,
			tgt_shard_index_t **out, char *err, size_t cap);
void tgt_shard_index_put(tgt_t *t, tgt_shard_index_t *ix);
/* The member called name, NULL when none. */
const tgt_shard_member_t *tgt_shard_index_find(const tgt_shard_index_t *ix, const char *name);
/* Builds an index of the shard on fd (size bytes) without caching it (tgt_shard_index_free frees it). */
int tgt_shard_index_build(int fd, uint64_t size, tgt_shard_fmt_t fmt, uint64_t limit, tgt_shard_index_t **out,
			  char *err, size_t cap);
void tgt_shard_index_free(tgt_shard_index_t *ix);

/* ---- decode.c: libarchive reading of a shard ---- */
typedef struct tgt_shard_dec tgt_shard_dec_t;
/* A reader over fd (not taken; size bytes) for fmt, counting decoded bytes against limit. NULL with err. */
tgt_shard_dec_t *tgt_shard_dec_open(int fd, uint64_t size, tgt_shard_fmt_t fmt, uint64_t limit, char *err, size_t cap);
/* The next entry: 1 (name, size, regular set; valid until the next call), 0 at the end, or -errno (see above). */
int tgt_shard_dec_next(tgt_shard_dec_t *d, const char **name, uint64_t *size, bool *regular);
/* Up to cap bytes of the current entry: count, 0 at its end, or -errno. */
ssize_t tgt_shard_dec_read(tgt_shard_dec_t *d, void *buf, size_t cap);
/* Positions d at member m (its nth occurrence): 0, -ENOENT when not there, or -errno. */
int tgt_shard_dec_seek(tgt_shard_dec_t *d, const tgt_shard_member_t *m);
const char *tgt_shard_dec_error(const tgt_shard_dec_t *d);
void tgt_shard_dec_close(tgt_shard_dec_t *d);

/* ---- writer.c: libarchive writing of a shard ---- */
struct archive;
/* A writer of fmt appending to *fd (not taken; must stay valid until freed). NULL on failure. */
struct archive *tgt_shard_writer_new(tgt_shard_fmt_t fmt, int *fd);
/* The header of a regular member of size bytes; its data follows with archive_write_data. 0 or -1 (see archive_error_string). */
int tgt_shard_writer_header(struct archive *w, const char *name, uint64_t size, int64_t mtime_s);

/* ---- read.c ---- */
/* The error answer for an index or decode failure rc of o's shard (422 corrupt or over the limit, 500 else). */
void tgt_shard_fail(ft_req_t *r, const tgt_obj_t *o, int rc, const char *err);
/*
 * Opens o's main copy for a shard read (remote buckets: fetched first when not cached, blocking).
 * 0 with *fd and *lom; or -1 after responding (404, 500); or, not on a worker, 1 without an answer
 * when a remote shard is not cached (evicted since the request looked): to be opened on a worker.
 */
int tgt_shard_open(ft_req_t *r, tgt_obj_t *o, bool worker, int *fd, ft_lom_t *lom);

/* ---- select.c ---- */
/* Worker: GET ...?archregx=&archmode=: the matching members as one TAR stream. */
void tgt_shard_select(ft_req_t *r, tgt_obj_t *o, tgt_shard_fmt_t fmt);

/* ---- batch_pull.c: GetBatch's streamed part from one owner target ---- */
#define TGT_BATCH_PULL_RING ((size_t)1 << 20) /* bytes of an owner's part held at most */
typedef struct tgt_batch_pull tgt_batch_pull_t;
/*
 * Starts POSTing body (len bytes of JSON, taken) to the /v1/batch?part=true of the owner whose
 * public URL is public_url, with the cluster token, on a thread of its own: over the owner's Unix
 * socket (plain HTTP) when it runs on this machine (ft_local_dial), else over TCP (TLS when https).
 * NULL with err (body freed).
 */
tgt_batch_pull_t *tgt_batch_pull_start(const char *owner, const char *public_url, char *body, size_t len, char *err,
				       size_t cap);
/*
 * The next len bytes of the part, blocking: 0, or -EIO with err (the owner failed or the part ended
 * early), or -ECONNRESET once the batch's client r is gone (looked at every PULL_GONE_MS while
 * waiting; the pull is then cancelled).
 */
int tgt_batch_pull_read(tgt_batch_pull_t *p, ft_req_t *r, void *buf, size_t len, char *err, size_t cap);
/* The next member's header: the item's index in the part, its status and its size. 0, or -errno with err. */
int tgt_batch_pull_member(tgt_batch_pull_t *p, ft_req_t *r, size_t *index, int *status, uint64_t *size, char *err,
			  size_t cap);
/* Ends the exchange early and at once (its socket is shut down: the owner sees its client go), without waiting. */
void tgt_batch_pull_cancel(tgt_batch_pull_t *p);
/* Cancels the exchange when still running, joins its thread and frees p (NULL: nothing). */
void tgt_batch_pull_free(tgt_batch_pull_t *p);

#endif
