/* SPDX-License-Identifier: Apache-2.0 */
/* Replicas of an object on its owner (main copy and mirror copies): placement, checks, writes, repair; for GET, scrub and mirroring. */
#ifndef TGT_CORE_REPLICA_H
#define TGT_CORE_REPLICA_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include "core/lom.h"
#include "core/namelock.h"
#include "core/obj.h"

/*
 * DESIGN
 * An object of a bucket with mirror.copies = N has up to N replicas on its owner: the main copy at
 * "<o->mp>/<rel>" and N - 1 extra copies at "<mp>/.copies/<rel>" on the mountpaths that follow
 * o->mp in HRW order for the object's name (as many as there are other mountpaths). Every replica
 * carries the same LOM xattr as the main copy; a replica is good when it is a regular file whose
 * metadata decodes and whose size matches, and (when verified) whose checksum matches.
 * Writes of replicas (tgt_replica_write) happen under the name lock (core/namelock.h), like PUTs.
 */

typedef struct {
	int mp_index; /* in t->mountpaths */
	bool copy;    /* false: the main copy (o->mp, o->rel) */
} tgt_replica_t;

/* What a replica was found to be; names in tgt_replica_state_name (logs, error bodies, job samples). */
typedef enum {
	TGT_REPLICA_OK = 0,
	TGT_REPLICA_ABSENT,    /* no such file (or a directory of other objects) */
	TGT_REPLICA_NO_META,   /* no metadata xattr */
	TGT_REPLICA_BAD_META,  /* metadata does not decode */
	TGT_REPLICA_BAD_SIZE,  /* file size differs from the metadata's */
	TGT_REPLICA_BAD_CKSUM, /* content differs from the metadata's checksum */
	TGT_REPLICA_STALE,     /* an extra copy whose metadata differs from the main copy's */
	TGT_REPLICA_IO,        /* cannot open or read it */
} tgt_replica_state_t;

const char *tgt_replica_state_name(tgt_replica_state_t s);

/*
 * o's replicas per its bucket's mirror.copies: out[0] the main copy, then the extra copies in HRW
 * order. Returns the count, at least 1, at most min(copies, number of mountpaths).
 */
int tgt_mirror_replicas(const tgt_obj_t *o, tgt_replica_t out[FT_MAX_MOUNTPATHS]);

/*
 * Opens replica rp of o and checks it (see DESIGN); verify adds the checksum, which reads the
 * whole file (blocking: workers and job threads only). On TGT_REPLICA_OK *fd (the caller closes
 * it) and *lom are set; otherwise *fd is -1. *size (may be NULL) gets the bytes read to verify.
 */
tgt_replica_state_t tgt_replica_open(const tgt_obj_t *o, const tgt_replica_t *rp, bool verify, int *fd, ft_lom_t *lom,
				     int64_t *size);

/* tgt_replica_open that also fills *st, the fstat of the file (when TGT_REPLICA_OK). */
tgt_replica_state_t tgt_replica_open_stat(const tgt_obj_t *o, const tgt_replica_t *rp, bool verify, int *fd,
					  ft_lom_t *lom, int64_t *size, struct stat *st);

/* Whether two replicas hold the same version of the object (size, checksum, version, mtime). */
bool tgt_replica_same(const ft_lom_t *a, const ft_lom_t *b);

/*
 * Writes replica rp of o from src_fd, a good replica with metadata lom: copy into a work file on
 * rp's mountpath, same metadata, sync per the sync policy, rename into place (replacing what is
 * there). The caller holds the name lock (tgt_name_lock). 0; -ESTALE when the bucket is gone; -ENOSPC when
 * the mountpath is full; another -errno.
 */
int tgt_replica_write(const tgt_obj_t *o, const tgt_replica_t *rp, int src_fd, const ft_lom_t *lom);

/* Removes the extra copy of o on mountpath mp_index (if any) and the directories it leaves empty. 1 removed, 0 none. */
int tgt_replica_remove(const tgt_obj_t *o, int mp_index);

/*
 * Moves o's damaged main copy into its mountpath's .work (name written to aside[cap]) so that a
 * restore sees none. tgt_replica_put_back renames it back when no main copy appeared meanwhile
 * (else drops it); tgt_replica_drop removes it. Caller holds the name lock (tgt_name_lock). 0 or -errno.
 */
int tgt_replica_set_aside(const tgt_obj_t *o, char *aside, size_t cap);
void tgt_replica_put_back(const tgt_obj_t *o, char *aside);
void tgt_replica_drop(const tgt_obj_t *o, char *aside);

/* What tgt_replica_heal found and did. */
typedef struct {
	tgt_replica_state_t main; /* the main copy's state before any repair */
	bool existed;             /* some replica was there (good or damaged) */
	int damaged;              /* replicas found damaged (stale copies not counted) */
	int repaired;             /* replicas rewritten (missing copies included) */
	int failed;               /* rewrites that failed (logged) */
	char aside[64];           /* the damaged main copy moved aside into .work ("" = none) */
	int64_t bytes;            /* read to verify plus written */
} tgt_heal_t;

/*
 * Repairs o under the name lock (tgt_name_lock) (taken here): checks every replica (checksums verified when
 * verify_main, always for the extra copies), rewrites the bad ones from the main copy when it is
 * good, else from the newest good extra copy. Returns the index in reps[] of a good replica with
 * *fd and *lom set (caller closes *fd), or -1 when none is good: then, if the main copy was
 * damaged, h->aside names it, moved aside for the caller to restore from EC or a peer (and to put
 * back or drop). Logs and counts what it finds.
 */
int tgt_replica_heal(tgt_obj_t *o, tgt_replica_t reps[FT_MAX_MOUNTPATHS], int n, bool verify_main, int *fd,
		     ft_lom_t *lom, tgt_heal_t *h);

/* ---- this target's integrity counters (logged as they change) ---- */
typedef enum {
	TGT_INTEGRITY_DAMAGED = 0, /* damaged replicas found (GET or scrub) */
	TGT_INTEGRITY_REPAIRED,    /* replicas rewritten from a good one, or restored */
	TGT_INTEGRITY_LOST,        /* objects found damaged with nothing to repair them from */
	TGT_INTEGRITY_KINDS,
} tgt_integrity_kind_t;

void tgt_integrity_count(tgt_t *t, tgt_integrity_kind_t kind);
/* {"damaged_replicas": N, "repaired_replicas": N, "unrepairable_objects": N} (new reference). */
json_t *tgt_integrity_json(tgt_t *t);

#endif
