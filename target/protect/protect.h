/* SPDX-License-Identifier: Apache-2.0 */
/* A bucket's redundancy for a version just published: mirror copies under the name lock, EC slices after it. */
#ifndef TGT_PROTECT_PROTECT_H
#define TGT_PROTECT_PROTECT_H

#include <stddef.h>
#include "core/lom.h"
#include "core/obj.h"

/*
 * DESIGN
 * Every publisher (PUT, multipart completion, rebalance receiver) does the same two steps:
 * tgt_protect_local under the name lock, right after its publish: the mirror copies (local disks)
 * and, for an EC bucket, an fd opened on the version just published; then tgt_protect_remote once
 * the name lock is released: the EC slices of that version, sent to the other targets from the fd.
 * A newer write may replace the object meanwhile; EC holders keep the newest version.
 */

/* Under o's name lock, after its publish: mirror copies; *fd an fd on this version for EC, else -1. 0, or -1 with err. */
int tgt_protect_local(const tgt_obj_t *o, const ft_lom_t *lom, int *fd, char *err, size_t cap);
/* Without the name lock: the EC slices from fd (a no-op for -1), which it closes. Blocking. 0, or -1 with err. */
int tgt_protect_remote(const tgt_obj_t *o, int fd, const ft_lom_t *lom, char *err, size_t cap);

#endif
