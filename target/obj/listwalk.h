/* SPDX-License-Identifier: Apache-2.0 */
/* Target-internal interface of list.c and rlist.c beyond target.h: local name walks for jobs, remote listing pages. */
#ifndef TGT_LISTWALK_H
#define TGT_LISTWALK_H

#include <stddef.h>

#include "target.h"

/* One local object found by a walk. */
typedef struct {
	char *name; /* owned by the array (tgt_list_items_free) */
	int mp;     /* index in t->mountpaths of the mountpath holding it */
} tgt_list_item_t;

/*
 * The names of provider/bucket's local objects starting with prefix (NULL or "" = all), in byte
 * order, each once, from the bucket's name snapshot (rebuilt first when stale). Only
 * "<mp>/<provider>/<bucket>/" is walked, never the hidden top-level directories of a mountpath.
 * Names are not checked against their metadata here (the caller opens the object anyway).
 * Returns 0 with *out (caller owns; tgt_list_items_free; NULL when *n is 0), or -1 on allocation failure.
 */
int tgt_list_items(tgt_t *t, const char *provider, const char *bucket, const char *prefix, tgt_list_item_t **out,
		   size_t *n);
void tgt_list_items_free(tgt_list_item_t *v, size_t n);

/*
 * Whether o (mp and rel filled from tgt_mountpath_pick) is held here as a valid object: a regular
 * file on its HRW mountpath with metadata matching its size. The cached test of remote listings.
 */
int tgt_list_holds(const tgt_obj_t *o);

/* ---- rlist.c: listing remote buckets through their backend (docs/api.md "List objects") ---- */
/* GET /v1/list?provider=P&bucket=B&remote=true&prefix=&token=&pagesize=: one page of the backend. */
void tgt_rlist_page(tgt_t *t, const char *provider, const char *bucket, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* GET /v1/list?provider=P&bucket=B with body {"names": [...]}: {"cached": [bool...]}, which names are held here. */
void tgt_rlist_cached(tgt_t *t, const char *provider, const char *bucket, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

#endif
