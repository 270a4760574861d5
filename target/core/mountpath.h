/* SPDX-License-Identifier: Apache-2.0 */
/* Mountpaths: opening, placement by HRW, work files, directories, bucket retirement, attach/detach at run time. */
#ifndef TGT_CORE_MOUNTPATH_H
#define TGT_CORE_MOUNTPATH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "core/node.h"

/* Creates and opens every configured mountpath (and its .work, emptied). 0, or -1 with err. */
int tgt_mountpaths_open(tgt_t *t, char *err, size_t errlen);
void tgt_mountpaths_close(tgt_t *t);
/* The mountpath an object lives on (HRW over the mountpath digests). */
const tgt_mountpath_t *tgt_mountpath_pick(const tgt_t *t, const char *provider, const char *bucket, const char *obj,
					  size_t obj_len);
/* The same for a name hash already computed (ft_hrw_name_hash, tgt_obj_t.hash). */
const tgt_mountpath_t *tgt_mountpath_pick_hash(const tgt_t *t, uint64_t name_hash);
/*
 * Writes "<provider>/<bucket>[/<obj>]" (obj may be NULL), or "<provider>/<bucket>/.ft-keys/<hh>/<hex>"
 * for a name that is no path (core/keymap.h); 0, or -1 if it does not fit.
 */
int tgt_rel_path(char *buf, size_t cap, const char *provider, const char *bucket, const char *obj);
/* Bytes a new object may still take on mp: free space minus reserve (0 if below). 0, or -errno. */
int tgt_mountpath_avail(const tgt_mountpath_t *mp, int64_t reserve, uint64_t *avail);
/* Creates a uniquely named work file in mp's .work (name written to name[cap]); fd or -errno. */
int tgt_work_create(const tgt_mountpath_t *mp, char *name, size_t cap);
/*
 * An unnamed read-write work file on mp (O_TMPFILE; else created and unlinked at once), so a crash
 * leaves nothing behind; fd or -errno.
 */
int tgt_work_anon(const tgt_mountpath_t *mp);
/* Closes *fd (when >= 0) and removes the work file name (when not "") from mp's .work; clears both. */
void tgt_work_drop(const tgt_mountpath_t *mp, int *fd, char *name);
/*
 * Opens (O_RDONLY|O_DIRECTORY) the parent directory of rel, creating missing components.
 * Returns an fd, or -errno: -ENOTDIR when a component is a file (an object).
 * *leaf points at rel's last component.
 */
int tgt_parent_open(const tgt_mountpath_t *mp, const char *rel, const char **leaf);
/* Removes now-empty directories above rel, deepest first, up to (excluding) the bucket dir. */
void tgt_parent_prune(const tgt_mountpath_t *mp, const char *rel);
/*
 * Moves "<provider>/<bucket>" of every mountpath into .work (so it vanishes at once) for the
 * janitor to delete, under the publish lock held exclusively. Returns how many trees were moved; the
 * caller then forgets the bucket's listing and kicks the janitor.
 */
int tgt_bucket_retire(tgt_t *t, const char *provider, const char *bucket);
/*
 * Deletes name (file or directory tree) under dirfd; 0, or -errno of the first failure.
 * Gives up early (-ECANCELED) once *cancel (may be NULL) becomes non-zero.
 */
int tgt_remove_tree(int dirfd, const char *name, const atomic_int *cancel);

/*
 * mountpath.c, mountpath changes at run time (rebalance.c drives them). Slots of t->mountpaths are
 * never moved or reused for another path; a detached slot stays in [0, n_mountpaths) with fds of
 * a removed directory (lookups there find nothing). Code choosing a mountpath for new data
 * (e.g. mirror copies) must skip slots that are not active.
 * slot_state: 0 active, 1 detaching (objects being moved away), 2 detached, -1 no such slot.
 */
int tgt_mountpath_slot_state(const tgt_t *t, int slot);
int tgt_mountpath_is_active(const tgt_t *t, const tgt_mountpath_t *mp);
/* Opens path (mkdir -p, .work) as a new active mountpath, or re-activates its detached slot. Slot or -errno with err. */
int tgt_mountpath_attach(tgt_t *t, const char *path, char *err, size_t cap);
/* Takes path out of placement (state detaching). Slot, or -errno with err (-EPERM: the last active one). */
int tgt_mountpath_detach_begin(tgt_t *t, const char *path, char *err, size_t cap);
/* Makes a detaching slot active again (its objects could not all be moved). */
void tgt_mountpath_detach_abort(tgt_t *t, int slot);
/*
 * Seals a detaching slot: under the publish lock exclusive, its fds are swapped for a removed
 * directory's; *real gets new fds of the real directories (for a last sweep). 0 or -errno.
 */
int tgt_mountpath_detach_seal(tgt_t *t, int slot, tgt_mountpath_t *real);
/* Empties real's .work, closes its fds, marks the slot detached. */
void tgt_mountpath_detach_end(tgt_t *t, int slot, tgt_mountpath_t *real);

#endif
