/* SPDX-License-Identifier: Apache-2.0 */
/* Publishing an object version: what PUT, multipart completion, cold GET, repair, restore and rebalance share. */
#ifndef TGT_CORE_PUBLISH_H
#define TGT_CORE_PUBLISH_H

#include <stddef.h>
#include "base/config.h"
#include "core/obj.h"

/*
 * DESIGN
 * A version becomes visible by one rename(2) of a complete work file (data, metadata xattr,
 * synced per policy) over the object's path: readers see the old version or the new one. The
 * caller holds the name lock (core/namelock.h) from reading the stored version through the
 * publish, so that versions of one name increase by one per write.
 */

/* The version after the stored one (stored + 1, "1" without a readable numeric one). Name lock held. */
void tgt_next_version(const tgt_obj_t *o, char *out, size_t cap);
/* Whether the bucket o was accepted into still exists (not destroyed nor re-created meanwhile). */
int tgt_bucket_alive(const tgt_obj_t *o);
/*
 * Renames the work file <o->mp>/.work/<work> over o's path, creating parent directories, and
 * clears work[0] once renamed. When the path is taken (a component is another object, or the
 * name is a directory of others) the name goes to its hashed file instead and o->rel and
 * o->keyed say so (core/keymap.h). The caller holds the name lock and the publish lock shared,
 * and checked tgt_bucket_alive under it. 0 or -errno.
 */
int tgt_publish_rename(tgt_obj_t *o, char *work, ft_sync_policy_t sync);
/*
 * Removes a version of o's name in the place o->rel is not (its path or its hashed file, per
 * o->keyed): after a write or a delete at o->rel, an older version left there (a write that raced
 * the delete freeing the path, a crash between the two steps, a mirror copy in a copies directory
 * where the other place was the free one) must not come back. A directory there (other names'
 * path) stays. Called by tgt_publish_rename; the name lock held.
 */
void tgt_publish_drop_other(const tgt_obj_t *o);
/* The usual publish: under the publish lock shared, -ESTALE when the bucket is gone, else tgt_publish_rename. */
int tgt_publish(tgt_obj_t *o, char *work, ft_sync_policy_t sync);

#endif
