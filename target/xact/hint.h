/* SPDX-License-Identifier: Apache-2.0 */
/* Internal header of the epoch order hints (hint.c: the order store and cursor; hint_prefetch.c: staging ahead). */
#ifndef TGT_XACT_HINT_H
#define TGT_XACT_HINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/names.h"
#include "target.h"

#define TGT_HINT_JOB_MAX FT_JOB_NAME_MAX /* job names: ft_name_check_job */
#define TGT_HINT_ACTIVE_MAX 32           /* hints held at once (all buckets and jobs) */
#define TGT_HINT_REORDER 256    /* a name not read once a read this many places later was seen counts as skipped */
#define TGT_HINT_TTL_MAX 604800 /* ttl_s at most a week */
/* Memory of one hint, per name: at most this many bytes plus the name and its NUL (see tgt_hint_cost). */
#define TGT_HINT_BYTES_PER_NAME 29

/* A hint to install: the names this target owns, in the order they will be read (borrowed for the call). */
typedef struct {
	const char *provider, *bucket, *job;
	int64_t epoch;
	int64_t ttl_s;
	const char *const *names;
	size_t n;
} tgt_hint_spec_t;

/*
 * Bytes a hint of n names whose lengths (without NUL) add up to name_bytes holds while installed:
 * hashes (8 per name), name offsets (4), the index (4 per slot, 2n to 4n slots), the read bits, the
 * names with their NULs, and the hint itself.
 */
uint64_t tgt_hint_cost(size_t n, size_t name_bytes);

/* Allocates t->hints (no thread); 0 or -1. tgt_hint_free frees it (tolerates NULL). */
int tgt_hint_store_init(tgt_t *t);
void tgt_hint_store_free(tgt_t *t);

/*
 * Installs s at now_ms (monotonic), replacing the hint of the same provider, bucket and job.
 * Returns 0, or the HTTP status to answer with why filled: 400 (bad spec), 409 (an older epoch than
 * the one installed), 413 (over hint_max_bytes), 429 (TGT_HINT_ACTIVE_MAX hints already), 500.
 * *dups: names listed more than once (only the first place counts).
 */
int tgt_hint_install_at(tgt_t *t, const tgt_hint_spec_t *s, int64_t now_ms, size_t *dups, char *why, size_t cap);
/* Removes the hints of provider/bucket (of job only unless NULL, of that epoch only unless < 0); returns how many. */
int tgt_hint_remove(tgt_t *t, const char *provider, const char *bucket, const char *job, int64_t epoch);
/* Frees the hints whose ttl ran out by now_ms; returns how many. */
int tgt_hint_expire_at(tgt_t *t, int64_t now_ms);

/*
 * A GET of the name with hash h in provider/bucket at now_ms (hit: served from the cache): moves
 * the cursor of every live hint that lists it. No I/O; the store's lock only.
 */
void tgt_hint_note_at(tgt_t *t, const char *provider, const char *bucket, uint64_t h, bool hit, int64_t now_ms);
/*
 * The next use of name hash h of provider/bucket: how many names of its hint are still to be read
 * before it (0: it is the next one), the smallest over the live hints that list it; -1 when no live
 * hint expects it (not listed, read already this epoch, or skipped).
 */
int64_t tgt_hint_next_use_at(tgt_t *t, const char *provider, const char *bucket, uint64_t h, int64_t now_ms);
/* Whether a live hint covers provider/bucket at now_ms. */
bool tgt_hint_active_at(tgt_t *t, const char *provider, const char *bucket, int64_t now_ms);
/* The live hints with their cursors (new reference). */
json_t *tgt_hint_json_at(tgt_t *t, int64_t now_ms);

/*
 * Eviction order under hints: a cached object's age (at: newest access, ns) and next use (-1: none).
 * Objects no hint expects go first, oldest first (exactly LRU when no hint is active), then those a
 * hint expects, furthest next use first (Belady's MIN over the hinted order).
 */
typedef struct {
	int64_t at;
	int64_t next;
} tgt_hint_rank_t;
int tgt_hint_rank_cmp(const tgt_hint_rank_t *a, const tgt_hint_rank_t *b);

/* ---- staging ahead (hint_prefetch.c takes names from the store) ---- */
/* One name to stage: copied out of the store, so no hint is held while it is fetched. */
typedef struct {
	uint64_t hint_id;
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char name[FT_OBJ_NAME_MAX + 1];
} tgt_hint_pick_t;

/* How much the window may hold: bytes (the cache's share for staging) and the lead in seconds of reads. */
typedef struct {
	uint64_t budget_bytes; /* the cache's bytes at its low watermark, shared by the hints that stage */
	int lead_s;            /* stage what the observed rate reads in this many seconds */
	int min_items;         /* staged ahead at least (before any read: the first ones) */
} tgt_hint_window_t;

/*
 * The next name to stage at now_ms: the live hints take turns; a hint stages the name
 * after its last staged one while its window (names between the cursor and there) is below both the
 * rate's and the bytes' limit of w. 1 with p filled, 0 when no hint has room.
 */
int tgt_hint_stage_next(tgt_t *t, const tgt_hint_window_t *w, int64_t now_ms, tgt_hint_pick_t *p);
/*
 * The staging of p ended: rc < 0 failed, 0 fetched now, 1 nothing to stage, 2 a stored copy read ahead
 * into the page cache; size of the object, -1 unknown.
 */
void tgt_hint_stage_done(tgt_t *t, const tgt_hint_pick_t *p, int rc, int64_t size);
/* Waits up to ms for a note or an install that may open a window, or for tgt_hint_stage_close. 1 when closed. */
int tgt_hint_stage_wait(tgt_t *t, int ms);
/* Wakes every waiter for good (shutdown). */
void tgt_hint_stage_close(tgt_t *t);
/* Starts hint_prefetch_inflight staging threads (t->stager); 0, or -1 (tgt_hint_prefetch_stop still joins). */
int tgt_hint_prefetch_start(tgt_t *t);
/* Closes the store's staging and joins the threads; idempotent. */
void tgt_hint_prefetch_stop(tgt_t *t);

#endif
