/* SPDX-License-Identifier: Apache-2.0 */
/* Bucket metadata (BMD): versioned JSON document of buckets and their properties, and the node's current copy. */
#ifndef FT_BMD_H
#define FT_BMD_H

#include <jansson.h>
#include <stdint.h>
#include "base/cksum.h"
#include "base/names.h"

typedef struct {
	char name[FT_BUCKET_NAME_MAX + 1];
	char provider[16];     /* "ais" */
	ft_cksum_type_t cksum; /* checksum of objects stored in it */
	int64_t created_ns;
	/*
	 * Remote buckets (provider aws|gcp|azure|ht): the backend properties as
	 * ft_backend_config_from_json takes them, secrets included (they travel in the BMD over the
	 * control plane and are persisted with it); NULL for "ais". Every BMD owns its own copy:
	 * ft_bmd_add and ft_bmd_clone deep-copy it (never shared between BMD versions, which live on
	 * different threads), remove/free release it.
	 */
	json_t *backend;
	/*
	 * Data protection (docs/data-protection.md); set at create-bck or with set-bprops, all 0 = off.
	 * JSON: "mirror": {"copies": N, "scope": "mountpaths"|"targets"},
	 * "ec": {"data_slices": D, "parity_slices": P, "objsize_limit": B},
	 * "checksum_validate_warm_get": bool (kept beside "checksum").
	 */
	int mirror_copies;        /* copies of every object; 0 or 1 = just the one */
	int mirror_scope;         /* where the extra copies live: FT_MIRROR_SCOPE_MOUNTPATHS or _TARGETS */
	int ec_data, ec_parity;   /* erasure coding D+P slices on other targets; 0 = off */
	int64_t ec_objsize_limit; /* objects smaller than this are replicated ec_parity times, not sliced */
	int validate_warm_get;    /* verify the checksum of every warm GET */
	/* canned ACL (docs/acl.md): 1 = "public-read" (anonymous GET/HEAD/list), 0 = "private"; JSON "acl" */
	int public_read;
} ft_bucket_t;

/*
 * Immutable once installed; shared by reference count.
 * JSON: {"version": N, "uuid": "...", "buckets": [{"name","provider","checksum":"xxhash|md5|xxh3|crc32c|sha256","created": ns,
 *       "backend": {...} (remote buckets only, with secrets), "mirror": {"copies": N},
 *       "ec": {"data_slices": D, "parity_slices": P, "objsize_limit": B},
 *       "checksum_validate_warm_get": bool, "acl": "public-read" (written only when set)}...],
 *   "etl": {"NAME": {...}} (optional)}
 * The protection members are always written (copies at least 1) and optional when read (absent = 0).
 */
typedef struct {
	int64_t version;
	char uuid[40];
	int n;
	ft_bucket_t *buckets; /* sorted by provider, then name */
	/*
	 * Transformers (ETL) by name, {"NAME": {"name", "command": [...] | "url", "timeout_ms",
	 * "max_output", "procs"}}, as the proxy checked them (docs/etl.md); NULL or empty = none. Owned
	 * like a bucket's backend: deep-copied by ft_bmd_clone, never shared between versions; read only.
	 */
	json_t *etl;
	int refs; /* atomic */
} ft_bmd_t;

ft_bmd_t *ft_bmd_new(void);
ft_bmd_t *ft_bmd_clone(const ft_bmd_t *b);
/* Adds a bucket; returns 0, 1 if it exists already, -1 on allocation failure. */
int ft_bmd_add(ft_bmd_t *b, const ft_bucket_t *bucket);
/* Removes; returns 0, or -1 if absent. */
int ft_bmd_remove(ft_bmd_t *b, const char *provider, const char *name);
const ft_bucket_t *ft_bmd_find(const ft_bmd_t *b, const char *provider, const char *name);
/*
 * The whole document, for the control plane and bmd.json: backend secrets and transformer URLs
 * sealed with the cluster key (auth/seal.h; AES-256-GCM bound to provider/bucket/field,
 * etl/NAME/url) when a cluster secret is loaded.
 * ft_bmd_from_json opens them again (and fails when they do not open).
 */
json_t *ft_bmd_to_json(const ft_bmd_t *b);
/* The public form (public ports): no backend secrets at all, transformers as ft_etl_spec_public shows them. */
json_t *ft_bmd_to_json_public(const ft_bmd_t *b);
/*
 * A transformer's spec (the BMD's "etl" member) as answers show it: its "url" and every argument of
 * its "command" that holds a URL through ft_redact_url (no user:password@, no query values), the
 * rest as it is. The stored spec is not changed (targets need the whole URL). New reference; NULL
 * on allocation failure.
 */
json_t *ft_etl_spec_public(const json_t *spec);
/*
 * A transformer's spec as the control plane and bmd.json carry it: its "url" (which may hold
 * user:password@ or a token) sealed like backend secrets, bound to "etl/NAME/url", when a cluster
 * secret is loaded; as it is otherwise. New reference; NULL on allocation failure.
 */
json_t *ft_etl_spec_sealed(const char *name, const json_t *spec);
/* Opens a sealed "url" of spec in place (ft_bmd_from_json does it for the registry); 0, or -1 with err. */
int ft_etl_spec_open(const char *name, json_t *spec, char *err, size_t errlen);

/* Bounds of the data protection properties (docs/data-protection.md). */
#define FT_MIRROR_COPIES_MAX 16
/*
 * mirror.scope: the extra copies on other mountpaths of the owner (the default, AIStore's meaning),
 * or on the next targets in the object's HRW order (whole replicas, as EC keeps for small objects).
 */
enum { FT_MIRROR_SCOPE_MOUNTPATHS = 0, FT_MIRROR_SCOPE_TARGETS = 1 };
/* Whether bk keeps copies on other targets (mirror.scope "targets" with copies >= 2). */
int ft_bucket_mirror_targets(const ft_bucket_t *bk);
#define FT_EC_SLICES_MAX 32
/*
 * Applies the data protection properties present in props (an object with any of "mirror",
 * "ec", "checksum_validate_warm_get", in the bucket JSON's format) and its "acl" ("private" or
 * "public-read") to bk; absent keys and absent
 * members of "mirror"/"ec" keep bk's values. Checks types and bounds: copies 1..16; scope
 * "mountpaths" or "targets" (not with ec: EC keeps its own replicas on other targets); data_slices
 * and parity_slices 0..32, both 0 (off) or both >= 1; objsize_limit >= 0. Other keys of props are
 * left to the caller. 0, or -1 with err filled (bk then partly changed: apply to a copy).
 */
int ft_bucket_props_apply(ft_bucket_t *bk, const json_t *props, char *err, size_t errlen);
/*
 * Public form: the backend properties without secrets (secret_key, session_token, account_key, sas),
 * the endpoint through ft_redact_url (no user:password@, no query values).
 */
json_t *ft_bucket_to_json(const ft_bucket_t *bucket);
/* One bucket with its backend secrets sealed, as in ft_bmd_to_json (a change sent to the primary proxy). */
json_t *ft_bucket_to_json_sealed(const ft_bucket_t *bucket);
/* Reads such a bucket back (secrets opened); bk->backend is the caller's reference. 0, or -1 with err. */
int ft_bucket_from_json(ft_bucket_t *bk, const json_t *o, char *err, size_t errlen);
ft_bmd_t *ft_bmd_from_json(const json_t *j, char *err, size_t errlen);

void ft_bmd_get(ft_bmd_t *b);
void ft_bmd_put(ft_bmd_t *b);
ft_bmd_t *ft_bmd_current(void);  /* +1 ref; NULL if none */
int ft_bmd_install(ft_bmd_t *b); /* same contract as ft_smap_install */

#endif
