/* SPDX-License-Identifier: Apache-2.0 */
/* N-way mirroring (docs/data-protection.md): the copies a PUT makes, their removal, the "mirror" job. */
#ifndef TGT_PROTECT_MIRROR_H
#define TGT_PROTECT_MIRROR_H

#include "target.h"

/*
 * After o's main copy was published (put.c, mpu.c; the caller holds o's name lock): makes the
 * bucket's extra copies durable (per the sync policy) before the PUT is acknowledged.
 * 0 (also when the bucket has no mirroring), or -1 with err: the PUT then answers 500.
 */
int tgt_mirror_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap);
/* After o's main copy was deleted (or found missing): removes its extra copies; returns how many. */
int tgt_mirror_delete(const tgt_obj_t *o);
/* Job "mirror": makes the missing copies of one object (on the mountpaths or the targets its bucket's scope names). */
int tgt_mirror_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

#endif
