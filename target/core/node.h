/* SPDX-License-Identifier: Apache-2.0 */
/* The target's node state (one tgt_t per process), its mountpath slots and on-disk layout constants. */
#ifndef TGT_CORE_NODE_H
#define TGT_CORE_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "base/config.h"
#include "base/fanout.h"
#include "base/names.h"
#include "cluster/smap.h"
#include "http/http.h"
#include "rpc/ctl.h"

/*
 * DESIGN
 * One process-wide tgt_t, built by main.c and passed to every handler as its context.
 * On disk (per mountpath): "<mp>/<provider>/<bucket>/<object name>" holds published objects,
 * "<mp>/.work/" holds work files (PUT bodies before their rename, retired bucket trees before
 * their removal). All file access goes through directory fds relative to the mountpath root,
 * with paths built from validated names only.
 */

#define TGT_WORK_DIR ".work"
#define TGT_COPIES_DIR ".copies" /* mirror.c: "<mp>/.copies/<provider>/<bucket>/<obj>" extra copies */
#define TGT_EC_DIR ".ec"         /* ec.c: "<mp>/.ec/<provider>/<bucket>/<obj>" slices/replicas held for other owners */
#define TGT_PROVIDER_MAX 16
#define TGT_INTEGRITY_SLOTS 4 /* >= TGT_INTEGRITY_KINDS (core/replica.h) */
/* "<provider>/<bucket>/<object>" relative to a mountpath root, plus NUL. */
#define TGT_REL_MAX (TGT_PROVIDER_MAX + 1 + FT_BUCKET_NAME_MAX + 1 + FT_OBJ_NAME_MAX + 1)

typedef struct {
	char path[FT_PATH_MAX]; /* as configured */
	int root_fd;            /* the mountpath directory */
	int work_fd;            /* its .work directory */
} tgt_mountpath_t;

typedef struct tgt_namelocks tgt_namelocks_t;
typedef struct tgt_coldget tgt_coldget_t;
typedef struct tgt_jobs tgt_jobs_t;
typedef struct tgt_mpu tgt_mpu_t;
typedef struct tgt_mp_set tgt_mp_set_t;
typedef struct tgt_list_cache tgt_list_cache_t;
typedef struct tgt_cluster tgt_cluster_t;
typedef struct tgt_janitor tgt_janitor_t;
typedef struct tgt_rebalance tgt_rebalance_t;
typedef struct tgt_lru tgt_lru_t;
typedef struct tgt_hints tgt_hints_t;
typedef struct tgt_hint_stager tgt_hint_stager_t;
typedef struct tgt_shards tgt_shards_t;
typedef struct tgt_fcache_reg tgt_fcache_reg_t;

typedef struct {
	ft_config_t cfg;
	char id[FT_ID_MAX];
	char public_url[FT_URL_MAX];
	char control_url[FT_URL_MAX];
	char public_unix[FT_UNIX_PATH_MAX]; /* the public port's Unix socket (cluster/local.h), "" = none */
	int n_mountpaths;
	tgt_mountpath_t mountpaths[FT_MAX_MOUNTPATHS];
	uint64_t mountpath_digests[FT_MAX_MOUNTPATHS]; /* ft_hrw_digest(path), for ft_hrw_pick */
	/* core/mountpath.c: the active set placement reads, each slot's state, and the lock of attach/detach */
	_Atomic(tgt_mp_set_t *) mp_active;
	atomic_int mp_state[FT_MAX_MOUNTPATHS];
	pthread_mutex_t mp_change_lock;
	/* core/replica.c: integrity counters by tgt_integrity_kind_t, and "fewer mountpaths than copies" warned */
	atomic_llong integrity[TGT_INTEGRITY_SLOTS];
	atomic_int warned_few_mountpaths;
	tgt_namelocks_t *names; /* the name lock, the publish lock and holds (core/namelock.h) */
	atomic_int get_busy
		[FT_MAX_MOUNTPATHS]; /* GET bodies in flight per mountpath (get.c picks the least busy replica) */
	tgt_coldget_t *coldget;      /* backend handles, cold fetches in flight (obj/coldget.c) */
	tgt_list_cache_t *lists;
	tgt_janitor_t *janitor;
	tgt_rebalance_t *rebalance;
	tgt_lru_t *lru;
	tgt_hints_t *hints;        /* epoch order hints: orders, cursors (xact/hint.c) */
	tgt_hint_stager_t *stager; /* their staging threads (xact/hint_prefetch.c) */
	tgt_jobs_t *jobs;          /* the job table (xact/jobs.c) */
	tgt_mpu_t *mpu;            /* multipart uploads in completion, recent completions (obj/mpu.c) */
	tgt_shards_t *shards;      /* cached member indexes of shards (shard/index.c) */
	/* core/fcache.c: the per-loop open-file caches, and the generation that retires all their entries at once */
	tgt_fcache_reg_t *fcache;
	atomic_ulong fcache_gen;
	tgt_cluster_t *cluster;
	ft_fanout_t *fanout; /* parallel node-to-node sends: EC slices of a PUT (protect/ec_owner.c) */
	ft_httpd_t *httpd;
	ft_ctl_t *ctl;
} tgt_t;

#endif
