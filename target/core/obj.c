/* SPDX-License-Identifier: Apache-2.0 */
/* An object's identity on this target: its bucket's properties, its name hash (computed once), its mountpath and path. */
#include "core/obj.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cluster/hrw.h"
#include "core/keymap.h"
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

int tgt_obj_name_unlocated(tgt_obj_t *o, const char *obj, size_t len)
{
	o->obj = obj;
	o->obj_len = len;
	o->hash = ft_hrw_name_hash(o->provider, o->bucket, obj, len);
	o->mp = tgt_mountpath_pick_hash(o->t, o->hash);
	o->keyed = tgt_key_hashed(obj, len);
	o->located = o->keyed; /* a name that is no path has one place */
	return tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, obj);
}

int tgt_obj_name(tgt_obj_t *o, const char *obj, size_t len)
{
	if (tgt_obj_name_unlocated(o, obj, len) != 0)
		return -1;
	return tgt_obj_locate(o);
}

int tgt_obj_rel_hashed(const tgt_obj_t *o, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s/", o->provider, o->bucket);

	if (n < 0 || (size_t)n >= cap)
		return -1;
	return tgt_key_path_hashed(buf + n, cap - (size_t)n, o->obj, o->obj_len);
}

int tgt_obj_key(tgt_obj_t *o)
{
	if (tgt_obj_rel_hashed(o, o->rel, sizeof(o->rel)) != 0)
		return -1;
	o->keyed = 1;
	return 0;
}

int tgt_obj_locate(tgt_obj_t *o)
{
	char hashed[TGT_REL_MAX];
	struct stat st;

	o->keyed = 0;
	o->located = 1;
	if (o->obj == NULL || tgt_key_hashed(o->obj, o->obj_len)) {
		o->keyed = o->obj != NULL;
		return tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, o->obj);
	}
	if (tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, o->obj) != 0)
		return -1;
	/* The common case costs one stat: the path is a file. */
	if (o->mp == NULL || (fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)))
		return 0;
	if (tgt_obj_rel_hashed(o, hashed, sizeof(hashed)) == 0 &&
	    faccessat(o->mp->root_fd, hashed, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		memcpy(o->rel, hashed, strlen(hashed) + 1);
		o->keyed = 1;
	}
	return 0;
}

int tgt_obj_init_unlocated(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const char *obj, size_t len)
{
	memset(o, 0, sizeof(*o));
	o->t = t;
	snprintf(o->provider, sizeof(o->provider), "%s", b->provider);
	snprintf(o->bucket, sizeof(o->bucket), "%s", b->name);
	tgt_obj_props(o, b);
	return tgt_obj_name_unlocated(o, obj, len);
}

int tgt_obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const char *obj, size_t len)
{
	if (tgt_obj_init_unlocated(o, t, b, obj, len) != 0)
		return -1;
	return tgt_obj_locate(o);
}
