/* SPDX-License-Identifier: Apache-2.0 */
/* Open-file cache of warm GETs and batch items: small objects' main copies kept open with their metadata. */
#ifndef TGT_CORE_FCACHE_H
#define TGT_CORE_FCACHE_H

#include <stdbool.h>
#include <sys/stat.h>

#include "core/lom.h"
#include "core/obj.h"

/*
 * DESIGN
 * A warm GET of a small object spends most of its system calls finding the file again: openat,
 * fstat, fgetxattr (the LOM) and close. Each loop thread keeps up to cfg.open_file_cache entries
 * (0 = off) of (mountpath index, o->rel) -> (fd, encoded LOM, the file's identity), without locks:
 * only its own thread touches them. A hit costs one fstat of the kept fd, which must show the
 * same file as at insertion: still linked (st_nlink > 0: a PUT's publishing rename, a DELETE, an
 * eviction or any other unlink of the name leaves the old inode with none), the same inode, size,
 * ctime and mtime (an xattr written in place, such as an ACL, moves ctime). Holding the fd pins
 * the inode, so its number cannot be reused while cached.
 * What changes a path without unlinking its file (a bucket directory retired into .work, a
 * mountpath attached or detached, a resilver moving a file between mountpaths, a damaged main copy
 * set aside and put back) or writes an object's metadata in place (ACLs) bumps t->fcache_gen
 * (tgt_fcache_invalidate) after the change: every entry of an older generation is dropped at its
 * next lookup, and all of them within a second by the sweep. A reader takes the generation before
 * its open (tgt_fcache_gen), so an open racing such a change is never cached as current.
 * Only the main copy of a bucket without mirroring or checksum-validated warm GETs, opened on the
 * loop thread (or by a batch), of at most FCACHE_MAX_BYTES, is kept (a large object's open is a small part of it),
 * and only at its second miss while the first is remembered: a working set larger than the cache
 * (random reads of many objects) would only churn it, each insertion costing more than it saves.
 * The sweep (a timerfd on the loop's ring, every second) closes entries idle for half a minute
 * and those whose file was unlinked, so a deleted object's space is back within about a second;
 * after an LRU eviction the LRU has every loop sweep at once (tgt_fcache_sweep_now), since it
 * reads the space back from statvfs and a cold GET is waiting for it.
 * GetBatch items are prepared on fan-out threads (shard/batch.c), several per batch at once: they
 * share one more table, under a mutex (lookups, insertions, references; the fstat of a hit runs
 * outside it, the entry held by its reference), made by the first loop thread that receives a
 * batch (tgt_fcache_share) and swept by that loop like its own. The same rules decide what is
 * kept and when it is dropped. The entries of all tables stay under a quarter of RLIMIT_NOFILE.
 *
 * OWNERSHIP
 * An entry keeps the LOM encoded (~100 bytes; decoding it again costs ~60 ns a hit): decoded it is
 * 4 KiB, which 1,024 entries on each loop thread would add to the target's memory.
 * The cache owns every kept fd. A hit or an insertion returns a reference that keeps the fd open
 * (ft_resp_file_borrowed) until tgt_fcache_release, which is an ft_req_on_done hook; an entry
 * dropped while referenced is closed at its last release. tgt_fcache_get and tgt_fcache_put are
 * for loop threads only (a worker thread gets no cache: NULL), tgt_fcache_share too, and so is
 * tgt_fcache_release of their references (on the loop that took them); the _shared calls and the
 * release of their references are for any thread.
 */

typedef struct fc_entry tgt_fcache_ref_t;

/* Sets up t->fcache per cfg.open_file_cache (entries per loop thread, 0 = off). 0, or -1 without memory. */
int tgt_fcache_init(tgt_t *t);
/* Closes every kept file and frees the caches; after the loop threads ended (ft_httpd_stop). */
void tgt_fcache_stop(tgt_t *t);

/* The generation to pass to tgt_fcache_put: read before the open of the file to be kept. */
unsigned long tgt_fcache_gen(tgt_t *t);
/* Retires every entry of every loop (see DESIGN): after anything that moves or rewrites object files in place. */
void tgt_fcache_invalidate(tgt_t *t);
/*
 * Has every loop sweep now rather than within the second (any thread; waits up to 1 s for the sweeps):
 * the files of names unlinked meanwhile are closed, so the space they held is free when this returns (the
 * LRU after an eviction: statvfs, and the cold GET that made room, see it). Before tgt_fcache_stop.
 */
void tgt_fcache_sweep_now(tgt_t *t);

/*
 * A kept, still valid main copy of o on mountpath mp_index: *fd (the cache's) and *lom (decoded from
 * the entry's copy) and a reference to release; NULL on a miss (an entry found changed is dropped
 * and counted stale).
 */
tgt_fcache_ref_t *tgt_fcache_get(const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom);
/*
 * Keeps fd (o's main copy on mountpath mp_index, opened after gen was read, with metadata lom and
 * st its fstat at the open) when it qualifies: small (unless any_size: a shard, whose member reads
 * are small whatever its size), and missed before recently (see admit in fcache.c). On success the
 * cache owns fd and the reference is returned; NULL leaves fd with the caller.
 */
tgt_fcache_ref_t *tgt_fcache_put(const tgt_obj_t *o, int mp_index, unsigned long gen, int fd, const ft_lom_t *lom,
				 const struct stat *st, bool any_size);
/* Makes the batch items' table (once; a loop thread, else nothing is made): call before batches use it. */
void tgt_fcache_share(tgt_t *t);
/* tgt_fcache_get and tgt_fcache_put in the batch items' table, from any thread (NULL while it is not made). */
tgt_fcache_ref_t *tgt_fcache_get_shared(const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom);
tgt_fcache_ref_t *tgt_fcache_put_shared(const tgt_obj_t *o, int mp_index, unsigned long gen, int fd,
					const ft_lom_t *lom, const struct stat *st, bool any_size);
/* Drops a reference (ft_req_on_done hook; arg is the tgt_fcache_ref_t). */
void tgt_fcache_release(void *ref);

#endif
