/* Internal interface of the storage target daemon: shared state and what its files export to each other. */
#ifndef TGT_TARGET_H
#define TGT_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "base/cksum.h"
#include "base/config.h"
#include "base/fanout.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "core/lom.h"
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
/* "<provider>/<bucket>/<object>" relative to a mountpath root, plus NUL. */
#define TGT_REL_MAX (TGT_PROVIDER_MAX + 1 + FT_BUCKET_NAME_MAX + 1 + FT_OBJ_NAME_MAX + 1)
#define TGT_PUT_LOCKS 64 /* stripes serializing the finalize step of PUTs of one name */
#define TGT_CONTENT_TYPE "application/octet-stream"

typedef struct {
	char path[FT_PATH_MAX]; /* as configured */
	int root_fd;            /* the mountpath directory */
	int work_fd;            /* its .work directory */
} tgt_mountpath_t;

typedef struct tgt_list_cache tgt_list_cache_t;
typedef struct tgt_cluster tgt_cluster_t;
typedef struct tgt_janitor tgt_janitor_t;
typedef struct tgt_rebalance tgt_rebalance_t;
typedef struct tgt_lru tgt_lru_t;

typedef struct {
	ft_config_t cfg;
	char id[FT_ID_MAX];
	char public_url[FT_URL_MAX];
	char control_url[FT_URL_MAX];
	int n_mountpaths;
	tgt_mountpath_t mountpaths[FT_MAX_MOUNTPATHS];
	uint64_t mountpath_digests[FT_MAX_MOUNTPATHS]; /* ft_hrw_digest(path), for ft_hrw_pick */
	pthread_mutex_t put_locks[TGT_PUT_LOCKS];
	/*
	 * Shared by a PUT from its "bucket still exists" check through its rename, exclusive while a
	 * bucket is retired: no object lands in a bucket directory after it was moved away.
	 */
	pthread_rwlock_t publish_lock;
	int locks_ready; /* put_locks and publish_lock initialized */
	tgt_list_cache_t *lists;
	tgt_janitor_t *janitor;
	tgt_rebalance_t *rebalance;
	tgt_lru_t *lru;
	tgt_cluster_t *cluster;
	ft_fanout_t *fanout; /* parallel node-to-node sends: EC slices of a PUT */
	ft_httpd_t *httpd;
	ft_ctl_t *ctl;
} tgt_t;

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
	char rel[TGT_REL_MAX]; /* "<provider>/<bucket>/<obj>" relative to mp->root_fd */
	int local_only;        /* remote bucket: serve the cached copy as is (coldget.c decided) */
	/* the bucket's data protection properties (common/bmd.h), copied by tgt_obj_props */
	int mirror_copies;
	int ec_data, ec_parity;
	int64_t ec_objsize_limit;
	int validate_warm_get;
} tgt_obj_t;

/*
 * A job's action on one object (jobs.c runs it on a job thread; blocking is fine). o is complete
 * (mp = the mountpath the object was found on, rel set, props filled). Returns 0 when done
 * (*bytes: bytes read, written or moved), 1 when there was nothing to do, -1 on failure with err.
 */
typedef int (*tgt_job_fn)(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

/* ---- route.c: public port ---- */
/* ft_handler_fn of the public server; ctx is the tgt_t. */
void tgt_route_public(ft_req_t *r, void *ctx);
/* Copies b's created time, checksum type and protection properties into o. */
void tgt_obj_props(tgt_obj_t *o, const ft_bucket_t *b);

/* ---- put.c, get.c, delete.c: object handlers (each makes the one response call) ---- */
/* Initializes put_locks and publish_lock; 0 or -1. */
int tgt_put_init(tgt_t *t);
void tgt_put_fini(tgt_t *t);
void tgt_put(ft_req_t *r, tgt_obj_t *o);
/*
 * The publish step PUT and multipart completion share; callers hold the name's put_locks stripe
 * (versions) and, for tgt_put_bucket_alive and tgt_put_publish, publish_lock shared.
 * next_version: the version after the stored one (stored + 1, "1" without a readable numeric one).
 * bucket_alive: false once the bucket o was accepted into was destroyed (or re-created) meanwhile.
 * publish: renames the work file <mp>/.work/<work> over o's path, creating parent directories, and
 * clears work[0] once renamed. Returns 0 or -errno (-ENOTDIR: a path component is an object;
 * -EISDIR: the name is a directory of other objects).
 */
void tgt_put_next_version(const tgt_obj_t *o, char *out, size_t cap);
int tgt_put_bucket_alive(const tgt_obj_t *o);
int tgt_put_publish(const tgt_obj_t *o, char *work, ft_sync_policy_t sync);
/*
 * After a publish, under the name's put_locks stripe: the bucket's mirror copies, then its EC
 * slices (tgt_mirror_put, tgt_ec_put). 0, or -1 with err (the caller answers 500).
 */
int tgt_put_protect(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap);
void tgt_get(ft_req_t *r, tgt_obj_t *o); /* GET and HEAD */
void tgt_delete(ft_req_t *r, tgt_obj_t *o);

/* ---- objmeta.c: Content-Type and x-amz-meta-* given at PUT, kept in the LOM ---- */
/* Fills lom->content_type and lom->user_meta from r's headers. 0, or -1 with err (the PUT answers 400). */
int tgt_meta_from_req(ft_req_t *r, ft_lom_t *lom, char *err, size_t cap);
/* Adds the stored x-amz-meta-* headers to the response. */
void tgt_meta_headers(ft_req_t *r, const ft_lom_t *lom);
/* The Content-Type to serve: the stored one, else TGT_CONTENT_TYPE. */
const char *tgt_meta_ctype(const ft_lom_t *lom);

/* ---- coldget.c: remote buckets (provider aws|gcp|azure|ht), read through the cache ---- */
int tgt_is_remote(const tgt_obj_t *o);
/* GET/HEAD hook of get.c: whether o must go through coldget (not cached, or latest-ver=true). */
int tgt_coldget_wanted(ft_req_t *r, const tgt_obj_t *o);
/* Defers to a worker: coalesced cold fetch, revalidation, or back to tgt_get (makes the response call). */
void tgt_coldget(ft_req_t *r, tgt_obj_t *o);
/*
 * The backend handle of o's bucket (uses o->provider, o->bucket, o->bucket_created only), opened on
 * first use and kept until tgt_coldget_fini; safe from any thread. NULL with err filled.
 */
ft_backend_t *tgt_backend_get(const tgt_obj_t *o, ft_backend_error_t *err);
/* Closes the cached backend handles; after the public server stopped. */
void tgt_coldget_fini(tgt_t *t);
/*
 * Prefetch (jobs.c): fetches and publishes o (a remote-bucket object owned here) without a client,
 * or waits for the fetch in flight. Blocking. Returns 1 when it was cached already, 0 when fetched
 * now (*bytes: its size in both cases), -1 with err filled on failure (nothing cached).
 */
int tgt_coldget_prefetch(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/*
 * Write-through (wthrough.c), after the backend took a PUT or DELETE of o and before the local
 * publish or removal: the cold fetch of o running now (if any) may hold the replaced content; it
 * publishes nothing when it ends, and requests from now on no longer join it. Its readers (and a
 * prefetch waiting on it, which returns 0) get the body they asked for. Never blocks on the fetch.
 */
void tgt_coldget_supersede(const tgt_obj_t *o);

/* ---- mpu.c: multipart uploads, for the proxy's S3 API (docs/api.md "Multipart upload") ---- */
/* An object request carrying ?mpu=ID: start, part, complete, abort, parts (makes the response call). */
void tgt_mpu_handle(ft_req_t *r, tgt_obj_t *o);
/* GET /v1/mpu on the control port: this target's uploads of a bucket. */
void tgt_mpu_list(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- mountpath.c ---- */
/* Creates and opens every configured mountpath (and its .work, emptied). 0, or -1 with err. */
int tgt_mountpaths_open(tgt_t *t, char *err, size_t errlen);
void tgt_mountpaths_close(tgt_t *t);
/* The mountpath an object lives on (HRW over the mountpath digests). */
const tgt_mountpath_t *tgt_mountpath_pick(const tgt_t *t, const char *provider, const char *bucket, const char *obj,
					  size_t obj_len);
/* Writes "<provider>/<bucket>[/<obj>]" (obj may be NULL); 0, or -1 if it does not fit. */
int tgt_rel_path(char *buf, size_t cap, const char *provider, const char *bucket, const char *obj);
/* Bytes a new object may still take on mp: free space minus reserve (0 if below). 0, or -errno. */
int tgt_mountpath_avail(const tgt_mountpath_t *mp, int64_t reserve, uint64_t *avail);
/* Creates a uniquely named work file in mp's .work (name written to name[cap]); fd or -errno. */
int tgt_work_create(const tgt_mountpath_t *mp, char *name, size_t cap);
/* Closes *fd (when >= 0) and removes the work file name (when not "") from mp's .work; clears both. */
void tgt_work_drop(const tgt_mountpath_t *mp, int *fd, char *name);
/*
 * Opens (O_RDONLY|O_DIRECTORY) the parent directory of rel, creating missing components.
 * Returns an fd, or -errno: -ENOTDIR when a component is a file (an object).
 * *leaf points at rel's last component.
 */
int tgt_parent_open(const tgt_mountpath_t *mp, const char *rel, const char **leaf);
/* Removes now-empty directories above rel, deepest first, up to (excluding) the bucket dir. */
void tgt_parent_prune(const tgt_mountpath_t *mp, const char *rel);
/*
 * Moves "<provider>/<bucket>" of every mountpath into .work (so it vanishes at once) for the
 * janitor to delete, under publish_lock held exclusively. Returns how many trees were moved.
 */
int tgt_bucket_retire(tgt_t *t, const char *provider, const char *bucket);
/*
 * Deletes name (file or directory tree) under dirfd; 0, or -errno of the first failure.
 * Gives up early (-ECANCELED) once *cancel (may be NULL) becomes non-zero.
 */
int tgt_remove_tree(int dirfd, const char *name, const atomic_int *cancel);

/* ---- janitor.c: background removal of retired trees ---- */
int tgt_janitor_start(tgt_t *t);
void tgt_janitor_kick(tgt_t *t);
void tgt_janitor_stop(tgt_t *t);

/* ---- lru.c: eviction of cached remote objects above the high watermark (docs/backends.md) ---- */
int tgt_lru_start(tgt_t *t);
void tgt_lru_stop(tgt_t *t);
/* Asks for a usage check now (after a cold GET published). */
void tgt_lru_kick(tgt_t *t);
/* Notes an access of o in memory (no disk write); no-op for ais buckets. */
void tgt_lru_touch(const tgt_obj_t *o);
/* Makes room for size bytes on o's mountpath, evicting if needed. 0, or -ENOSPC if it cannot fit. */
int tgt_lru_reserve(const tgt_obj_t *o, uint64_t size);

/* ---- list.c: per-bucket name snapshots and the control-port listing ---- */
int tgt_list_init(tgt_t *t);
void tgt_list_fini(tgt_t *t);
/* Invalidates the bucket's snapshot (after a publish, a delete or the bucket's removal). */
void tgt_list_bump(tgt_t *t, const char *provider, const char *bucket);
/* Invalidates and frees the bucket's snapshot (the bucket is gone). */
void tgt_list_forget(tgt_t *t, const char *provider, const char *bucket);
/* GET /v1/list on the control port. */
void tgt_list_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- jobs.c: prefetch and evict jobs sent by the proxy (docs/api.md "Jobs") ---- */
/* POST /v1/jobs, GET /v1/jobs[/<id>], DELETE /v1/jobs/<id> on the control port. */
void tgt_jobs_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* Whether a DELETE asks to evict (evict=true|1): remove only the cached copy of a remote object. */
int tgt_evict_wanted(ft_req_t *r);
/* DELETE ...?evict=true of a remote-bucket object: 200 when its cached copy was removed, 404 when none. */
void tgt_evict_object(ft_req_t *r, tgt_obj_t *o);
/* Aborts, joins and frees every job and refuses new ones (first in the shutdown); idempotent. */
void tgt_jobs_fini(tgt_t *t);

/*
 * Starts a job the target runs on its own (rebalance after a map change): fn over every local
 * object of provider/bucket, or of every bucket in the BMD when bucket is NULL. Its status is
 * served like any job's under id (GET /v1/jobs/<id>, also through the proxy). 0, or -1 (the id
 * exists, or the jobs are closed, or no thread).
 */
int tgt_jobs_start_local(tgt_t *t, const char *id, const char *kind, tgt_job_fn fn, const char *provider,
			 const char *bucket);

/* ---- mirror.c: n-way mirroring on distinct mountpaths of the owner (docs/data-protection.md) ---- */
/*
 * After o's main copy was published (put.c, mpu.c; the caller holds o's put_locks stripe): makes
 * the bucket's extra copies durable (per the sync policy) before the PUT is acknowledged.
 * 0 (also when the bucket has no mirroring), or -1 with err: the PUT then answers 500.
 */
int tgt_mirror_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap);
/* After o's main copy was deleted (or found missing): removes its extra copies; returns how many. */
int tgt_mirror_delete(const tgt_obj_t *o);
/* Job "mirror": makes the missing copies of one object. */
int tgt_mirror_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

/* ---- scrub.c: integrity: re-read, detect, repair from a mirror or EC ---- */
/* Job "scrub": verifies one object (size, metadata, checksum) and repairs it; -1 when it cannot. */
int tgt_scrub_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

/* ---- ec.c: erasure coding (isa-l) of objects over other targets ---- */
/* Like tgt_mirror_put, for the bucket's EC: slices (or replicas) sent to and held by other targets. */
int tgt_ec_put(const tgt_obj_t *o, const ft_lom_t *lom, char *err, size_t cap);
/*
 * tgt_ec_put of the version lom read from fd (open on that version), without the name's lock:
 * a newer PUT may replace the object meanwhile, the holders keep the newest version. Blocking
 * until every holder stored its slice; 0, or -1 with err.
 */
int tgt_ec_put_fd(const tgt_obj_t *o, int fd, const ft_lom_t *lom, char *err, size_t cap);
/* After o's main copy was deleted: asks the holders to drop its slices/replicas. */
void tgt_ec_delete(const tgt_obj_t *o);
/*
 * Rebuilds o's main copy here from the slices or replicas other targets hold, and publishes it.
 * Blocking (worker thread). 0 when restored (the caller reopens it), -ENOENT when no holder knows
 * o (or the bucket has no EC), another -errno with err on failure.
 */
int tgt_ec_restore(tgt_obj_t *o, char *err, size_t cap);
/*
 * Scrub of o's slices or replicas on the other targets: verifies every one and re-creates those
 * missing or damaged. 0 all good (or no EC), 1 some re-created, -1 with err.
 */
int tgt_ec_check(tgt_obj_t *o, char *err, size_t cap);
/* Job "ec-encode": encodes one object stored before EC was set. */
int tgt_ec_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/* Control port, paths under /v1/ec (slice transfer between targets). */
void tgt_ec_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- rebalance.c: objects follow the map; mountpath attach/detach (resilver) ---- */
/* cluster.c, after installing a Smap whose set of targets differs from the one before. */
void tgt_rebalance_smap_changed(tgt_t *t, const ft_smap_t *prev, const ft_smap_t *cur);
/*
 * GET of an object this target owns but does not have while a rebalance may still be moving it:
 * fetches it from the target that held it before and publishes it here. Blocking (worker thread).
 * 0 when restored (the caller reopens it), -ENOENT when no one had it, another -errno with err.
 */
int tgt_rebalance_pull(tgt_obj_t *o, char *err, size_t cap);
/* Allocates the rebalance state (before the control server starts); 0 or -1. */
int tgt_rebalance_init(tgt_t *t);
/* Control port, paths under /v1/rebalance and /v1/mountpaths. */
void tgt_rebalance_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* Stops the walks and pulls, then frees the state; tolerates "never initialized". */
void tgt_rebalance_fini(tgt_t *t);
/*
 * Job "rebalance" (also the step of rebalance.c's own walker): moves o where the current map and
 * mountpath set place it: sent to its new owner and deleted here, or moved to its mountpath here.
 * 0 when moved (*bytes), 1 when already in place or gone, -1 with err (the object stays).
 */
int tgt_rebalance_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/*
 * mountpath.c, mountpath changes at run time (rebalance.c drives them). Slots of t->mountpaths are
 * never moved or reused for another path; a detached slot stays in [0, n_mountpaths) with fds of
 * a removed directory (lookups there find nothing). Code choosing a mountpath for new data
 * (e.g. mirror copies) must skip slots that are not active.
 * slot_state: 0 active, 1 detaching (objects being moved away), 2 detached, -1 no such slot.
 */
int tgt_mountpath_slot_state(const tgt_t *t, int slot);
int tgt_mountpath_is_active(const tgt_t *t, const tgt_mountpath_t *mp);
/* Opens path (mkdir -p, .work) as a new active mountpath, or re-activates its detached slot. Slot or -errno with err. */
int tgt_mountpath_attach(tgt_t *t, const char *path, char *err, size_t cap);
/* Takes path out of placement (state detaching). Slot, or -errno with err (-EPERM: the last active one). */
int tgt_mountpath_detach_begin(tgt_t *t, const char *path, char *err, size_t cap);
/* Makes a detaching slot active again (its objects could not all be moved). */
void tgt_mountpath_detach_abort(tgt_t *t, int slot);
/*
 * Seals a detaching slot: under publish_lock exclusive, its fds are swapped for a removed
 * directory's; *real gets new fds of the real directories (for a last sweep). 0 or -errno.
 */
int tgt_mountpath_detach_seal(tgt_t *t, int slot, tgt_mountpath_t *real);
/* Empties real's .work, closes its fds, marks the slot detached. */
void tgt_mountpath_detach_end(tgt_t *t, int slot, tgt_mountpath_t *real);

/* ---- cluster.c: join, keepalive, metasync, control-port dispatcher ---- */
int tgt_cluster_start(tgt_t *t);
void tgt_cluster_stop(tgt_t *t);
/* Allocates the cluster state before the control server starts (metasync needs it). */
int tgt_cluster_init(tgt_t *t);
void tgt_cluster_fini(tgt_t *t);
/* ft_ctl_handler_fn of the control server; ctx is the tgt_t. */
void tgt_control_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

#endif
