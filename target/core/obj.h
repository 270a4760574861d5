/* SPDX-License-Identifier: Apache-2.0 */
/* An object's identity on this target: its names, its bucket's properties, its name hash (once), mountpath and path. */
#ifndef TGT_CORE_OBJ_H
#define TGT_CORE_OBJ_H

#include <stddef.h>
#include <stdint.h>
#include "base/cksum.h"
#include "cluster/bmd.h"
#include "core/node.h"

/*
 * An object request after routing: names validated, bucket present in the BMD, owned by this
 * target. Lives in ft_req_alloc memory (valid until the response is finished).
 */
typedef struct {
	tgt_t *t;
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	int64_t bucket_created; /* identifies this incarnation of the bucket */
	ft_cksum_type_t cksum;  /* the bucket's checksum type */
	const char *obj;        /* NUL-terminated copy of the object name */
	size_t obj_len;
	const tgt_mountpath_t *mp;
	uint64_t hash;         /* ft_hrw_name_hash of provider, bucket, obj: set by tgt_obj_name, never recomputed */
	char rel[TGT_REL_MAX]; /* "<provider>/<bucket>/<obj>" relative to mp->root_fd */
	int keyed;             /* rel is the hashed file of the name (core/keymap.h), not its path */
	int located;           /* rel was looked up (tgt_obj_locate); 0 only after tgt_obj_name_unlocated */
	int refetched; /* times a GET found no good copy of this remote object and asked its backend (obj/get.c) */
	/*
	 * the bucket's data protection properties (common/bmd.h), copied by tgt_obj_props.
	 * mirror_copies: copies on the owner's mountpaths. ec_*: redundancy on other targets, made by
	 * protect/ec_owner.c: the bucket's EC, or for mirror.scope "targets" with N copies, 1 + (N-1)
	 * with every object below the limit: N-1 whole replicas on the next targets (mirror_targets set).
	 */
	int mirror_copies;
	int mirror_targets;
	int ec_data, ec_parity;
	int64_t ec_objsize_limit;
	int validate_warm_get;
	int public_read; /* the bucket's canned ACL is public-read */
	/* an anonymous read (public-read data only): never signs a redirect; needs public_read or the object's ACL */
	int anonymous;
} tgt_obj_t;

/* Copies b's created time, checksum type and protection properties into o. */
void tgt_obj_props(tgt_obj_t *o, const ft_bucket_t *b);
/*
 * Sets o's object name (obj: NUL-terminated, len bytes, kept alive by the caller), its name hash
 * and its place: the mountpath HRW picks now and the path there (tgt_obj_locate). o->t,
 * o->provider and o->bucket are set. 0, or -1 when the path does not fit (the name is too long).
 */
int tgt_obj_name(tgt_obj_t *o, const char *obj, size_t len);
/*
 * tgt_obj_name without the lookup: o->rel is the name's path (or, for a name that is no path, its
 * hashed file) and o->located 0 when that may be wrong. For a GET or HEAD whose open of o->rel is
 * the lookup (obj/get.c): the caller runs tgt_obj_locate before anything else uses o->rel. 0 or -1.
 */
int tgt_obj_name_unlocated(tgt_obj_t *o, const char *obj, size_t len);
/*
 * Sets o->rel and o->keyed for o's name on o->mp (after a caller moved o->mp): the name's path,
 * unless that is no file there and the name's hashed file is (the path was taken by another
 * object's directory or file: core/keymap.h). A name that is no path is always hashed. 0 or -1.
 */
int tgt_obj_locate(tgt_obj_t *o);
/* Points o->rel at the name's hashed file (its path is taken). 0 or -1. */
int tgt_obj_key(tgt_obj_t *o);
/* Writes the hashed file "<provider>/<bucket>/.ft-keys/<hh>/<hex>" of o's name. 0 or -1. */
int tgt_obj_rel_hashed(const tgt_obj_t *o, char *buf, size_t cap);
/* All of o at once: zeroed, node t, bucket b (names, properties), then tgt_obj_name. 0 or -1 (name too long). */
int tgt_obj_init(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const char *obj, size_t len);
/* The same with tgt_obj_name_unlocated: for a read whose open of o->rel is the lookup. */
int tgt_obj_init_unlocated(tgt_obj_t *o, tgt_t *t, const ft_bucket_t *b, const char *obj, size_t len);

#endif
