/* SPDX-License-Identifier: Apache-2.0 */
/* Archive jobs on a target: objects of any targets packed into one shard, or into WebDataset shards of a size. */
#ifndef TGT_XACT_ARCHIVE_H
#define TGT_XACT_ARCHIVE_H

#include <jansson.h>
#include <stddef.h>

#include "target.h"
#include "xact/runner.h"

typedef struct tgt_archive tgt_archive_t;

/*
 * Reads an archive job's message: the source provider/bucket, "objnames", "to_bucket" (in bmd),
 * "archname", "format", "include_src_bucket_name", "continue_on_error", "shard_size". NULL with
 * *status (400, 404 for an unknown destination, 500) and why.
 */
tgt_archive_t *tgt_archive_parse(const json_t *msg, const ft_bmd_t *bmd, int *status, char *why, size_t cap);
/*
 * The job's body on target t: the target owning the first output shard in smap packs every source
 * object into the shards and PUTs each to its owner; any other target has nothing to do.
 */
void tgt_archive_run(tgt_archive_t *a, tgt_t *t, const ft_smap_t *smap, tgt_run_t *r);
/* The job's fields for its status document (to, archname, shards written) into doc. */
void tgt_archive_json(tgt_archive_t *a, json_t *doc);
void tgt_archive_free(tgt_archive_t *a);

#endif
