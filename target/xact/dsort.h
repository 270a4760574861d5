/* SPDX-License-Identifier: Apache-2.0 */
/* dsort (reshard) on a target: the output shards it owns, each built from records pulled from the input shards' owners. */
#ifndef TGT_XACT_DSORT_H
#define TGT_XACT_DSORT_H

#include <jansson.h>
#include <stdint.h>

#include "target.h"
#include "xact/runner.h"

typedef struct tgt_dsort tgt_dsort_t;

/*
 * Reads the plan of a dsort job message: "to_bucket" (an ais bucket of bmd), "inputs" (the input
 * shard names) and "outputs" (output shard name -> [[input index, member, size], ...]), every name
 * of "objnames" one of the outputs. NULL with
 * why and *status (400 malformed, 404 the output bucket is not in bmd, 500 out of memory).
 */
tgt_dsort_t *tgt_dsort_parse(const json_t *msg, const ft_bmd_t *bmd, int *status, char *why, size_t cap);
void tgt_dsort_free(tgt_dsort_t *d);
/* The output bucket's name and its index in the bmd given to tgt_dsort_parse. */
const char *tgt_dsort_to_bucket(const tgt_dsort_t *d);
int tgt_dsort_to_bidx(const tgt_dsort_t *d);
/*
 * Builds output shard o (owned here): every member of its records read from its input shard (of
 * bucket src) when this target stores it uncompressed, else fetched from the shard's owner in smap
 * into an unnamed work file; written in order through the shard writer into a second work file,
 * which is then PUT through this target's public port. Stops with "aborted" when run is aborted.
 * 0 with *bytes (the members' bytes), -1 with err.
 */
int tgt_dsort_obj(const tgt_dsort_t *d, const ft_smap_t *smap, const ft_bucket_t *src, tgt_obj_t *o,
		  const tgt_run_t *run, int64_t *bytes, char *err, size_t cap);
/* Removes every output shard of the plan that this target (t, in smap) owns: an aborted or failed part. */
void tgt_dsort_cleanup(const tgt_dsort_t *d, tgt_t *t, const ft_smap_t *smap);

#endif
