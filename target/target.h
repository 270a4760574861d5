/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interface of the storage target daemon: shared state and what its files export to each other. */
#ifndef TGT_TARGET_H
#define TGT_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/cksum.h"
#include "base/config.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "core/lom.h"
#include "core/mountpath.h"
#include "core/namelock.h"
#include "core/node.h"
#include "core/obj.h"
#include "core/objmeta.h"
#include "core/publish.h"
#include "core/replica.h"
#include "http/http.h"
#include "rpc/ctl.h"

/*
 * A job's action on one object (jobs.c runs it on a job thread; blocking is fine). o is complete
 * (mp = the mountpath the object was found on, rel set, props filled). Returns 0 when done
 * (*bytes: bytes read, written or moved), 1 when there was nothing to do, -1 on failure with err.
 */
typedef int (*tgt_job_fn)(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

/* ---- auth.c: public-port authorization (docs/security.md) ---- */
/*
 * With auth on, an object request needs a valid signed URL (the proxy's redirect, bound to the
 * method, provider, bucket and object) or a Bearer token whose role allows it; 0 to go on, or -1
 * after answering 401/403. With auth off, 0. 1: an anonymous GET/HEAD with public access on (or
 * one the proxy marked ft_anon=1), to serve only if public-read (obj/acl.c).
 */
/*
 * With auth on, the endpoint table's role for a public path other than objects (/metrics, /v1/batch):
 * a Bearer token whose key is not limited to buckets (a batch names any bucket). 0, or -1 after
 * answering 401/403.
 */
int tgt_auth_endpoint(ft_req_t *r, const char *path, size_t len);
int tgt_auth_object(ft_req_t *r, const char *provider, const char *bucket, const char *obj, size_t obj_len);
/*
 * A second bucket an object request writes to (a copy's destination), after tgt_auth_object: with auth
 * on, a request that came with its bearer token (no signed URL, whose proxy checked it) must have
 * readwrite on bucket. 0, or -1 after answering 401/403.
 */
int tgt_auth_write_bucket(ft_req_t *r, const char *bucket);
/*
 * The Location for a redirect of an authorized object request to its owner: loc itself when auth
 * is off or the URL is already signed, else loc with a signature for this method and object
 * (request memory).
 */
char *tgt_auth_sign_redirect(ft_req_t *r, const tgt_obj_t *o, char *loc);

/* ---- obj/acl.c: object ACLs (docs/acl.md) ---- */
/* PUT /v1/objects/B/O?acl=private|public-read: sets the object's canned ACL (every replica). */
void tgt_acl_put(ft_req_t *r, tgt_obj_t *o);
/* An anonymous read that only a local copy may answer (not a cold GET, not a shard member) unless the bucket is public: 0, or -1 after answering 401. */
int tgt_acl_anonymous_gate(ft_req_t *r, tgt_obj_t *o);
/* Whether an anonymous read of o with metadata lom (NULL: unknown) must be refused. */
bool tgt_acl_denies(const tgt_obj_t *o, const ft_lom_t *lom);
/* Answers the refusal of an anonymous read: 401, the same whether the object exists or not. */
void tgt_acl_deny(ft_req_t *r, const tgt_obj_t *o);

/* ---- route.c: public port ---- */
/* ft_handler_fn of the public server; ctx is the tgt_t. */
void tgt_route_public(ft_req_t *r, void *ctx);
/* ---- put.c, get.c, delete.c: object handlers (each makes the one response call) ---- */
void tgt_put(ft_req_t *r, tgt_obj_t *o);
void tgt_get(ft_req_t *r, tgt_obj_t *o); /* GET and HEAD */
/*
 * Worker: o's main copy is missing or damaged (checksum checked when verify), found by a read: repaired
 * from a mirror copy, else restored from EC slices, replicas or its previous owner, as a GET does. 0
 * with a good replica open (*fd, the caller's; *lom; its mountpath's index in *mp_index);
 * TGT_RECOVER_REFETCH: a remote bucket's object to fetch again from its backend (h->aside names a
 * damaged copy set aside, to drop with tgt_replica_drop first); -EHOSTUNREACH: not here, and a target
 * that may hold it cannot be reached; -ENOENT: no such object; -EIO: damaged with nothing to repair
 * it from (counted and logged). err (cap bytes) says what a restore found; h what the repair found.
 */
#define TGT_RECOVER_REFETCH 1
int tgt_obj_recover(tgt_obj_t *o, bool verify, int *fd, ft_lom_t *lom, int *mp_index, tgt_heal_t *h, char *err,
		    size_t cap);
void tgt_delete(ft_req_t *r, tgt_obj_t *o);
/*
 * The deletion behind tgt_delete, for jobs too (blocking for remote buckets: the backend first).
 * 0 deleted; 1 there was no such object; -1 failed. Not 0: *status and msg say what to answer.
 */
int tgt_delete_do(tgt_obj_t *o, int *status, char *msg, size_t cap);

/* ---- coldget.c: remote buckets (provider aws|gcp|azure|ht), read through the cache ---- */
int tgt_is_remote(const tgt_obj_t *o);
/* For get.c, which decides once per request: whether o needs the backend (not cached, or latest-ver=true). */
int tgt_coldget_wanted(ft_req_t *r, const tgt_obj_t *o);
/*
 * Worker: revalidates (latest-ver), answers a HEAD of an uncached object from the backend, joins
 * the cold fetch of o in flight or starts one. Returns 0 after making the response call, 1 when
 * the cached copy is the one to serve (no response made: get.c serves it).
 */
int tgt_coldget_serve(ft_req_t *r, tgt_obj_t *o);
/*
 * The backend handle of o's bucket (uses o->provider, o->bucket, o->bucket_created only), opened on
 * first use and kept until tgt_coldget_fini; safe from any thread. NULL with err filled.
 */
ft_backend_t *tgt_backend_get(const tgt_obj_t *o, ft_backend_error_t *err);
/* Allocates t->coldget; 0 or -1. */
int tgt_coldget_init(tgt_t *t);
/* Closes the cached backend handles and frees t->coldget; after the public server stopped. */
void tgt_coldget_fini(tgt_t *t);
/*
 * Prefetch (jobs.c): fetches and publishes o (a remote-bucket object owned here) without a client,
 * or waits for the fetch in flight. Blocking. Returns 1 when it was cached already, 0 when fetched
 * now (*bytes: its size in both cases), or on failure (nothing cached) minus the HTTP status a
 * client would get (-404: the backend does not have it; -502, -504, -507, ...) with err filled.
 */
int tgt_coldget_prefetch(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/*
 * Opens o's main copy (a remote-bucket object owned here) that an open just found absent, fetched
 * first (blocking): 0 with *fd (the caller's) and *lom, or minus the HTTP status with err filled (404:
 * the backend does not have it either; 500: the cached copy cannot be read; the fetch's status).
 */
int tgt_coldget_open(tgt_obj_t *o, int *fd, ft_lom_t *lom, char *err, size_t cap);
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
/* Allocates t->mpu (before the servers start); 0 or -1. tgt_mpu_fini frees it after they stopped. */
int tgt_mpu_init(tgt_t *t);
void tgt_mpu_fini(tgt_t *t);
/* GET /v1/mpu on the control port: this target's uploads of a bucket. */
void tgt_mpu_list(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- xact/etl.c, obj/etl_get.c: transformers (docs/etl.md) ---- */
typedef enum {
	TGT_ETL_OK,
	TGT_ETL_UNKNOWN,  /* no such transformer in the BMD (404) */
	TGT_ETL_FAILED,   /* non-zero exit, signal, not runnable, HTTP error of a server (502) */
	TGT_ETL_TIMEOUT,  /* over its timeout_ms (504) */
	TGT_ETL_TOO_BIG,  /* output over its max_output (502) */
	TGT_ETL_INTERNAL, /* work file, memory (500) */
} tgt_etl_rc_t;
/*
 * Runs transformer name of the current BMD over in_size bytes of in_fd (from offset 0) and writes
 * its output to out_fd from offset 0 (*out_size bytes), within timeout_ms (0: the transformer's
 * own timeout_ms). Blocking (waits for one of the transformer's process slots on this target). On
 * any rc but TGT_ETL_OK, err says why and out_fd holds garbage the caller must drop.
 */
tgt_etl_rc_t tgt_etl_transform(const char *name, int in_fd, int64_t in_size, int out_fd, int64_t *out_size,
			       int64_t timeout_ms, char *err, size_t cap);
const char *tgt_etl_strerror(tgt_etl_rc_t rc);
int tgt_etl_http_status(tgt_etl_rc_t rc);
/* Whether the current BMD has transformer name. */
bool tgt_etl_known(const char *name);
/* A GET carrying ?etl=NAME: the object transformed, buffered whole in a work file first (makes the response call). */
void tgt_etl_get(ft_req_t *r, tgt_obj_t *o);

/* ---- shard/: members of TAR, TGZ, ZIP and TAR.LZ4 shards (docs/shards.md) ---- */
/* Whether an object request addresses members: archpath (GET, HEAD, PUT) or archregx (GET). */
bool tgt_shard_wanted(ft_req_t *r);
/* GET/HEAD ?archpath= (one member) or ?archregx= (matching members as a TAR stream); PUT ?archpath= (append). */
void tgt_shard_get(ft_req_t *r, tgt_obj_t *o);
void tgt_shard_put(ft_req_t *r, tgt_obj_t *o);
/* POST /v1/batch (GetBatch): the items, from any targets and buckets, as one TAR stream in order. */
void tgt_batch(ft_req_t *r, tgt_t *t);
/* AIStore's GetBatch: GET /v1/ml/moss[/<bucket>] with a MossReq body (base/moss.h), answered as tgt_batch. */
void tgt_batch_moss(ft_req_t *r, tgt_t *t, const char *bucket);
/* Allocates t->shards (the index cache); 0 or -1. tgt_shard_fini frees it after the servers stopped. */
int tgt_shard_init(tgt_t *t);
void tgt_shard_fini(tgt_t *t);
/*
 * Listing with archive=true (list.c): the members of an object whose name is a shard's, open on
 * mountpath mp, in name order. NULL when the name is no shard's or it cannot be read (logged).
 * Blocking (builds the index on first use). Members whose names cannot be addressed are left out.
 */
#define TGT_SHARD_NAME_MAX 4096 /* longest member name (shard/walk.h) */
typedef struct tgt_shard_list tgt_shard_list_t;
tgt_shard_list_t *tgt_shard_list_open(tgt_t *t, const char *provider, const char *bucket, const char *obj,
				      const tgt_mountpath_t *mp);
size_t tgt_shard_list_count(const tgt_shard_list_t *l);
/* The i-th member in name order (its size in *size). */
const char *tgt_shard_list_name(const tgt_shard_list_t *l, size_t i, uint64_t *size);
/* The first position whose member name is > key. */
size_t tgt_shard_list_after(const tgt_shard_list_t *l, const char *key);
void tgt_shard_list_close(tgt_shard_list_t *l);

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
/* Bytes the cache holds at its low watermark, all mountpaths together (what staging ahead may fill). */
uint64_t tgt_lru_low_bytes(tgt_t *t);

/* ---- hint.c, hint_prefetch.c: epoch order hints (docs/epoch-hints.md) ---- */
/* Allocates t->hints and starts the staging threads (after tgt_lru_start); 0 or -1. */
int tgt_hint_start(tgt_t *t);
/* Stops the staging threads (before tgt_lru_stop and tgt_coldget_fini: they fetch); idempotent. */
void tgt_hint_stop(tgt_t *t);
/* Frees the hints after everything that reads them stopped (the servers, the LRU sweeper); idempotent. */
void tgt_hint_fini(tgt_t *t);
/* A GET of o (hit: served from the cache); moves the cursors of the hints that list it. No I/O. */
void tgt_hint_note(const tgt_obj_t *o, bool hit);
/* Whether any hint is live (a lock-free check). */
bool tgt_hint_any(tgt_t *t);
/* The next use of name hash h of provider/bucket in the live hints (names to be read before it), -1: none. */
int64_t tgt_hint_next_use(tgt_t *t, const char *provider, const char *bucket, uint64_t h);
/* Control port, /v1/hints: POST installs this target's share, GET lists, DELETE removes. */
void tgt_hint_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- list.c: per-bucket name snapshots and the control-port listing ---- */
int tgt_list_init(tgt_t *t);
void tgt_list_fini(tgt_t *t);
/* Invalidates the bucket's snapshot (after a publish, a delete or the bucket's removal). */
void tgt_list_bump(tgt_t *t, const char *provider, const char *bucket);
/* Invalidates and frees the bucket's snapshot (the bucket is gone). */
void tgt_list_forget(tgt_t *t, const char *provider, const char *bucket);
/* GET /v1/list on the control port. */
void tgt_list_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- obj/rbuckets.c: the buckets of a remote provider's account ---- */
/* GET /v1/buckets?provider=aws|gcp|azure on the control port: {"provider", "endpoint", "buckets": [names]}. */
void tgt_rbuckets_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- jobs.c: prefetch and evict jobs sent by the proxy (docs/api.md "Jobs") ---- */
/* POST /v1/jobs, GET /v1/jobs[/<id>], DELETE /v1/jobs/<id> on the control port. */
void tgt_jobs_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* Whether a DELETE asks to evict (evict=true|1): remove only the cached copy of a remote object. */
int tgt_evict_wanted(ft_req_t *r);
/* DELETE ...?evict=true of a remote-bucket object: 200 when its cached copy was removed, 404 when none. */
void tgt_evict_object(ft_req_t *r, tgt_obj_t *o);
/* PUT ?obj_to=<provider>/@#/<bucket>/<name> (xact/copy_one.c): o copied there, answered when stored. */
void tgt_copy_one(ft_req_t *r, tgt_obj_t *o);
/*
 * After the join starts: a thread waits for the bucket metadata and resumes the jobs a stop cut
 * short (their journals under <state_dir>/jobs). 0, or -1 when the thread cannot start.
 */
int tgt_jobs_resume(tgt_t *t);
/* Aborts, joins and frees every job and refuses new ones (first in the shutdown); idempotent. */
void tgt_jobs_fini(tgt_t *t);
/* Allocates t->jobs (before the control server starts); 0 or -1. tgt_jobs_free frees it after the control server stopped. */
int tgt_jobs_init(tgt_t *t);
void tgt_jobs_free(tgt_t *t);

/*
 * Starts a job the target runs on its own (rebalance after a map change): fn over every local
 * object of provider/bucket, or of every bucket in the BMD when bucket is NULL. Its status is
 * served like any job's under id (GET /v1/jobs/<id>, also through the proxy). members: the proxy's
 * list of the targets it started the job on (NULL: the target's own job), so that the proxy's
 * status counts a silent one. 0, or -1 (the id exists, or the jobs are closed, or no thread).
 */
int tgt_jobs_start_local(tgt_t *t, const char *id, const char *kind, tgt_job_fn fn, const char *provider,
			 const char *bucket, const json_t *members);

/* ---- scrub.c: integrity: re-read, detect, repair from a mirror or EC ---- */
/* Job "scrub": verifies one object (size, metadata, checksum) and repairs it; -1 when it cannot. */
int tgt_scrub_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);

/* ---- ec.c: erasure coding (isa-l) of objects over other targets ---- */
/*
 * The bucket's EC for the version lom read from fd (open on that version): slices (or replicas)
 * sent to and held by other targets, without the name's lock:
 * a newer PUT may replace the object meanwhile, the holders keep the newest version. Blocking
 * until every holder stored its slice; 0, or -1 with err.
 */
int tgt_ec_put_fd(const tgt_obj_t *o, int fd, const ft_lom_t *lom, char *err, size_t cap);
/* Starts the fan-out threads EC sends slices on (t->fanout); 0 or -1. tgt_ec_fini stops them (NULL is fine). */
int tgt_ec_init(tgt_t *t);
void tgt_ec_fini(tgt_t *t);
/* After o's main copy was deleted: asks the holders to drop its slices/replicas, on a worker later. */
void tgt_ec_delete(const tgt_obj_t *o);
/* The same, blocking until every target of the map answered (worker or job thread); how many dropped one. */
int tgt_ec_delete_now(const tgt_obj_t *o);
/*
 * Rebuilds o's main copy here from the slices or replicas other targets hold, and publishes it.
 * Blocking (worker thread). 0 when restored (the caller reopens it), -ENOENT when no holder knows
 * o (or the bucket has no EC), another -errno with err on failure.
 */
int tgt_ec_restore(tgt_obj_t *o, char *err, size_t cap);
/* tgt_ec_restore only when the main copy is missing here (*restored says whether it was). 0, or -errno with err. */
int tgt_ec_restore_missing(tgt_obj_t *o, bool *restored, char *err, size_t cap);
/* POST /v1/ec/held?provider&bucket (xact/held.c): owners of what is held here rebuild a main copy they lack. */
void tgt_ec_held_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/*
 * Scrub of o's slices or replicas on the other targets: verifies every one and re-creates those
 * missing or damaged. 0 all good (or no EC), 1 some re-created, -1 with err.
 */
int tgt_ec_check(tgt_obj_t *o, char *err, size_t cap);
/* Job "ec-encode": encodes one object stored before EC was set. */
int tgt_ec_job_obj(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap);
/* Control port, paths under /v1/ec (slice transfer between targets). */
void tgt_ec_ctl(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* Public port, PUT /v1/ec/slice (protect/ec_recv.c): one whole slice from another target, streamed into place. */
void tgt_ec_slice_put(ft_req_t *r, tgt_t *t);

/* ---- rebalance.c: objects follow the map; mountpath attach/detach (resilver) ---- */
/* cluster.c, after installing a Smap whose set of targets differs from the one before. */
void tgt_rebalance_smap_changed(tgt_t *t, const ft_smap_t *prev, const ft_smap_t *cur);
/*
 * GET of an object this target owns but does not have while a rebalance may still be moving it:
 * fetches it from the target that held it before and publishes it here. Blocking (worker thread).
 * 0 when restored (the caller reopens it), -ENOENT when no one had it, -EHOSTUNREACH when every
 * answer was "not here" but a target that may hold it could not be reached, another -errno with err.
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
/* ---- cluster.c: join, keepalive, metasync, control-port dispatcher ---- */
int tgt_cluster_start(tgt_t *t);
void tgt_cluster_stop(tgt_t *t);
/* Allocates the cluster state before the control server starts (metasync needs it). */
int tgt_cluster_init(tgt_t *t);
void tgt_cluster_fini(tgt_t *t);
/* ft_ctl_handler_fn of the control server; ctx is the tgt_t. */
void tgt_control_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

#endif
