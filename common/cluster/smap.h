/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster map (Smap): versioned JSON document of proxies and targets, and the node's current copy. */
#ifndef FT_SMAP_H
#define FT_SMAP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include "base/config.h"

typedef enum { FT_NODE_PROXY = 0, FT_NODE_TARGET = 1 } ft_node_type_t;

/* Node flags (JSON "flags", a bit set; absent when 0). A flagged target gets no new objects. */
#define FT_NODE_MAINTENANCE 0x1u  /* in maintenance: its objects stay, reads of them are still served */
#define FT_NODE_DECOMMISSION 0x2u /* being decommissioned: rebalance moves its objects away */

#define FT_HOST_ID_MAX 64    /* ft_host_id: a boot id (36 characters), "/", a mount namespace */
#define FT_UNIX_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path) */

typedef struct {
	char id[FT_ID_MAX];
	ft_node_type_t type;
	unsigned flags;                     /* FT_NODE_MAINTENANCE | FT_NODE_DECOMMISSION */
	char public_url[FT_URL_MAX];        /* http://host:port of the public (io_uring) port */
	char control_url[FT_URL_MAX];       /* http://host:port of the control (libmicrohttpd) port */
	char host_id[FT_HOST_ID_MAX];       /* its machine and mount namespace (ft_host_id), "" = not told */
	char public_unix[FT_UNIX_PATH_MAX]; /* its public port's Unix socket on that machine, "" = none */
	uint64_t digest;                    /* ft_hrw_digest(id), filled by the codec */
} ft_node_t;

/*
 * An immutable snapshot once installed; shared by reference count.
 * JSON: {"version": N, "uuid": "...", "primary": "<proxy id>",
 *        "proxies": [{"id","public_url","control_url"}...], "targets": [...]}; a node with flags
 *        also has "flags": N.
 * Targets are kept sorted by id.
 */
typedef struct {
	int64_t version;
	char uuid[40];
	char primary[FT_ID_MAX];
	int n_proxies, n_targets;
	ft_node_t *proxies;
	ft_node_t *targets;
	int refs;                 /* atomic */
	uint64_t *target_digests; /* n_targets digests in targets[] order, for ft_hrw_pick */
} ft_smap_t;

/* New empty map (version 0, fresh uuid), refs = 1. */
ft_smap_t *ft_smap_new(void);
/* Deep copy with refs = 1 (to modify before installing). */
ft_smap_t *ft_smap_clone(const ft_smap_t *m);
/* Adds or replaces (by id) a node; keeps targets sorted. Returns 0, -1 on allocation failure. */
int ft_smap_add(ft_smap_t *m, const ft_node_t *n);
/* Removes a node by id; returns 0, or -1 if absent. */
int ft_smap_remove(ft_smap_t *m, const char *id);
const ft_node_t *ft_smap_find(const ft_smap_t *m, const char *id);
/*
 * HRW owner of an object (by its ft_hrw_name_hash in the _hash form) among the targets without flags
 * (all targets when every one is flagged); NULL when the map has no targets. target_digests still
 * lists every target: code that ranks all holders (EC slices, pulls, listing) sees flagged ones too.
 */
const ft_node_t *ft_smap_owner_hash(const ft_smap_t *m, uint64_t name_hash);
const ft_node_t *ft_smap_owner(const ft_smap_t *m, const char *provider, const char *bucket, const char *obj,
			       size_t obj_len);
/* JSON codec. from_json returns NULL and fills err on bad input; the result has refs = 1. */
json_t *ft_smap_to_json(const ft_smap_t *m);
ft_smap_t *ft_smap_from_json(const json_t *j, char *err, size_t errlen);
/* Adds n's optional "host_id" and "public_unix" to o when set; 0, -1 on allocation failure. */
int ft_node_local_to_json(const ft_node_t *n, json_t *o);
/*
 * Reads o's optional "host_id" and "public_unix" (an absolute path) into n. strict (a join): 0, or
 * -1 with err for a bad value; else (a map from another node, maybe a newer release) a bad value
 * leaves both empty, the node then reached over TCP, and 0.
 */
int ft_node_local_from_json(const json_t *o, ft_node_t *n, bool strict, char *err, size_t errlen);

void ft_smap_get(ft_smap_t *m); /* +1 ref */
void ft_smap_put(ft_smap_t *m); /* -1 ref, frees at 0; NULL is ignored */

/* The process-wide current map (starts as NULL until the first install). */
ft_smap_t *ft_smap_current(void); /* +1 ref for the caller; NULL if none */
/*
 * Installs m (takes the caller's reference) if its version is higher than the current one,
 * or if there is none. Returns 0 when installed, 1 when refused as not newer (m released).
 */
int ft_smap_install(ft_smap_t *m);

#endif
