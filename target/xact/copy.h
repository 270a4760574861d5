/* SPDX-License-Identifier: Apache-2.0 */
/* Copy jobs (copy-bck, copy-listrange) and download jobs on a target: one object each, for jobs.c's runs. */
#ifndef TGT_XACT_COPY_H
#define TGT_XACT_COPY_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "target.h"
#include "xact/runner.h"

/* A copy job's destination and flags, from the job message. */
typedef struct {
	char to_provider[TGT_PROVIDER_MAX];
	char to_bucket[FT_BUCKET_NAME_MAX + 1];
	int to_bidx; /* the destination's index in the job's BMD */
	bool dry_run, latest, sync, force;
	char etl[FT_BUCKET_NAME_MAX + 1]; /* "" or the transformer each object goes through (etl.c) */
	char prepend[FT_OBJ_NAME_MAX];    /* "" or the string put before each copy's name */
	size_t prepend_len;
	json_t *ext;            /* owned (tgt_copy_free); NULL or {"jpg": "png"}: a copy's extension replaced */
	const char *to_name;    /* borrowed; NULL, or the one copy's name (an object copy: copy_one.c) */
	int64_t etl_timeout_ms; /* 0, or the transformer's timeout for this job */
} tgt_copy_t;

/*
 * Reads "to_provider", "to_bucket", "dry_run", "latest", "sync", "force", "etl", "etl_timeout_ms",
 * "prepend", "ext" of msg; the destination (and the transformer) must be in bmd and differ from the
 * source provider/bucket. 0; -1 with why (400); -2 when the destination or the transformer is not
 * in bmd (404). tgt_copy_free releases what it took, whatever it returned.
 */
int tgt_copy_parse(tgt_copy_t *c, const json_t *msg, const ft_bmd_t *bmd, const char *provider, const char *bucket,
		   char *why, size_t cap);
void tgt_copy_free(tgt_copy_t *c);
/*
 * Copies source object o (owned or stored here; a remote one is fetched into the cache first) to
 * the destination's owner in smap as <prepend><name>, its extension replaced by the ext map (a
 * name past FT_OBJ_NAME_MAX then is an error
 * of that object), with its Content-Type and user metadata; the owner's checksum of
 * the copy must match the source's when both buckets use the same type. With a transformer, its
 * output (complete, from a work file) is what the owner stores, always sent (no HEAD, no checksum
 * comparison). 0 copied (*bytes), 1 the
 * destination holds the same object already (or, dry run, would be copied: *bytes), -1 with err,
 * or minus a status for the source: -404 when it does not exist, a remote fetch's (-502, -504, ...).
 */
int tgt_copy_obj(const tgt_copy_t *c, const ft_smap_t *smap, tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/*
 * Sync: o is a destination object stored here; removes it through its owner when the source
 * (src_provider/src_bucket, the name without the prepend) has no such object. 0 removed, 1 kept
 * (also a name that does not start with the prepend: no copy of this job's), -1 with err.
 */
int tgt_copy_sync_obj(const tgt_copy_t *c, const ft_smap_t *smap, const char *src_provider, const char *src_bucket,
		      tgt_obj_t *o, char *err, size_t cap);
/* The prefix a sync walks in the destination: <prepend><prefix> (prefix NULL: ""); malloc'd, NULL on OOM. */
char *tgt_copy_dest_prefix(const tgt_copy_t *c, const char *prefix);

/* One object of a download in flight: its name and the bytes received so far. */
typedef struct {
	_Atomic(const char *) name; /* NULL: slot free; the run's item name, alive until the run is freed */
	atomic_llong bytes;
} tgt_download_slot_t;

/*
 * Downloads url into o (owned here: fetched into a work file of o's mountpath, then PUT through
 * this target's public port), trying up to attempts times on errors worth a retry, with a growing
 * pause; stops between attempts when run was aborted. slot (may be NULL) shows the progress. 0 with
 * *bytes, -1 with err.
 */
int tgt_download_obj(tgt_obj_t *o, const char *url, int attempts, const tgt_run_t *run, tgt_download_slot_t *slot,
		     int64_t *bytes, char *err, size_t cap);

#endif
