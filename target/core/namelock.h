/* SPDX-License-Identifier: Apache-2.0 */
/* Per-name locking of the target: the name lock, the publish lock, and holds kept across network I/O; the lock order. */
#ifndef TGT_CORE_NAMELOCK_H
#define TGT_CORE_NAMELOCK_H

#include <pthread.h>
#include <stdint.h>
#include "core/obj.h"

/*
 * DESIGN
 * The name lock serializes the local steps that change one object name: reading the stored
 * version and publishing the next one (PUT, multipart completion, cold GET, rebalance and EC
 * receivers), writing and repairing replicas, evicting, deleting a cached copy. It is a stripe of
 * mutexes picked by the name hash (tgt_obj_t.hash), so it is shared by 1/TGT_NAME_LOCKS of all
 * names: it covers local disk I/O only, never a network request.
 * The publish lock is held shared from a publisher's "bucket still exists" check through its
 * rename, and exclusively while a bucket is retired or a mountpath sealed: nothing lands in a
 * directory that was moved away. Writers are preferred, so a stream of PUTs never holds a
 * bucket's removal off.
 * A hold serializes one kind of long work on one exact name (a backend write, a rebalance move,
 * an EC restore): it may be kept across network I/O, and unrelated names never wait for it.
 *
 * LOCK ORDER (the only place it is written down)
 *   a hold  ->  the name lock  ->  the publish lock (shared)  ->  a module's own leaf locks
 *   (coldget flights, multipart uploads, listings, rebalance state), which are never held across
 *   I/O. A thread keeps at most one hold at a time, and takes no hold while it has the name lock.
 */

/* What a hold is for; holds of different kinds on one name do not exclude each other. */
typedef enum {
	TGT_HOLD_WRITE = 0, /* write-through: from the backend request through the local step */
	TGT_HOLD_MOVE,      /* rebalance: one sender of a name at a time */
	TGT_HOLD_RESTORE,   /* EC restore: one rebuild of a name at a time */
} tgt_hold_kind_t;

/* A hold, on the holder's stack from tgt_name_hold to tgt_name_release. */
typedef struct tgt_hold {
	struct tgt_hold *next;
	const tgt_obj_t *o;
	tgt_hold_kind_t kind;
} tgt_hold_t;

/* Allocates t->names; 0, or -1. tgt_namelock_fini frees it (no lock may be held); idempotent. */
int tgt_namelock_init(tgt_t *t);
void tgt_namelock_fini(tgt_t *t);

/* The name lock of o (its stripe, by o->hash). */
void tgt_name_lock(const tgt_obj_t *o);
void tgt_name_unlock(const tgt_obj_t *o);
/* The same for a name known by its hash only (ft_hrw_name_hash of provider, bucket, object). */
void tgt_name_lock_hash(tgt_t *t, uint64_t name_hash);
void tgt_name_unlock_hash(tgt_t *t, uint64_t name_hash);
/* tgt_name_lock_hash without waiting: 0 when taken, -1 when another thread holds the stripe (for a loop thread). */
int tgt_name_trylock_hash(tgt_t *t, uint64_t name_hash);

/* The publish lock: shared by publishers, exclusive to bucket retirement and mountpath sealing. */
void tgt_publish_lock_shared(tgt_t *t);
void tgt_publish_lock_exclusive(tgt_t *t);
void tgt_publish_unlock(tgt_t *t);

/* Waits until no other hold of kind is on o's name, then holds it (h: the caller's, kept until release). */
void tgt_name_hold(const tgt_obj_t *o, tgt_hold_kind_t kind, tgt_hold_t *h);
void tgt_name_release(tgt_hold_t *h);

#endif
