/* SPDX-License-Identifier: Apache-2.0 */
/* An object's identity on this target: its bucket's properties, its name hash (computed once), its mountpath and path. */
#include "core/obj.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "cluster/hrw.h"
#include "core/mountpath.h"

void tgt_obj_props(tgt_obj_t *o, const ft_bucket_t *b)
{
	o->cksum = b->cksum;
	o->bucket_created = b->created_ns;
	o->mirror_copies = b->mirror_copies;
	o->mirror_targets = ft_bucket_mirror_targets(b);
	o->ec_data = b->ec_data;
	o->ec_parity = b->ec_parity;
	o->ec_objsize_limit = b->ec_objsize_limit;
	if (o->mirror_targets) { /* the copies are EC's whole replicas, on the targets after the owner */
		o->mirror_copies = 1;
		o->ec_data = 1;
		o->ec_parity = b->mirror_copies - 1;
		o->ec_objsize_limit = INT64_MAX;
	}
	o->validate_warm_get = b->validate_warm_get;
	o->public_read = b->public_read;
}

int tgt_obj_name(tgt_obj_t *o, const char *obj, size_t len)
{
	o->obj = obj;
	o->obj_len = len;
	o->hash = ft_hrw_name_hash(o->provider, o->bucket, obj, len);
	o->mp = tgt_mountpath_pick_hash(o->t, o->hash);
	return tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, obj);
}

int tgt_obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const char *obj, size_t len)
{
	memset(o, 0, sizeof(*o));
	o->t = t;
	snprintf(o->provider, sizeof(o->provider), "%s", b->provider);
	snprintf(o->bucket, sizeof(o->bucket), "%s", b->name);
	tgt_obj_props(o, b);
	return tgt_obj_name(o, obj, len);
}
