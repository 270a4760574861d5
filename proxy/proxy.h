/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interface of the ft-proxy daemon: shared state and the entry points of its modules. */
#ifndef PX_PROXY_H
#define PX_PROXY_H

/*
 * DESIGN
 * The proxy is the primary: it owns the cluster map (Smap) and the bucket metadata (BMD).
 * - Every mutation of either document (join, removal of a silent target, bucket create/destroy)
 *   runs under px_t.meta_lock: clone the current document, change it, bump its version, persist
 *   it to state_dir, install it. Persisting comes before installing so that a version that was
 *   ever pushed is always on disk (a restarted proxy never reuses a version number).
 * - Pushes to other nodes (metasync) run after the lock is released, in parallel on the fan-out threads (base/fanout.h).
 *   Nodes ignore older versions, so pushes racing each other still converge on the newest.
 * - Public-port handlers (route.c and the modules it calls) run on io_uring loop threads and
 *   never wait on the network: anything that talks to other nodes goes through ft_req_defer.
 * - Control-port handlers run on libmicrohttpd pool threads and may block.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/role.h"
#include "base/config.h"
#include "base/fanout.h"
#include "base/strbuf.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/http.h"
#include "rpc/ctl.h"

/* Timeouts of node-to-node calls. */
#define PX_PUSH_TIMEOUT_MS 2000      /* metasync: a dead node delays a mutation by at most this */
#define PX_LIST_TIMEOUT_MS 10000     /* one target's list page (at most 10000 names from local disks) */
#define PX_BODY_MAX (1u << 20)       /* largest JSON body accepted on the public port */
#define PX_HINT_BODY_MAX (64u << 20) /* but a bucket POST may be an order hint (hints.c): this large */

/* ---- the daemon ---- */
typedef struct {
	char id[FT_ID_MAX];
	int64_t last_seen_ms; /* ft_mono_ms() of the last join or keepalive */
} px_seen_t;

typedef struct px {
	ft_config_t cfg;
	char id[FT_ID_MAX];
	char public_url[FT_URL_MAX];
	char control_url[FT_URL_MAX];
	char smap_path[FT_PATH_MAX + 16];
	char bmd_path[FT_PATH_MAX + 16];

	pthread_mutex_t meta_lock; /* serializes Smap/BMD mutations; guards seen[] */
	px_seen_t *seen;           /* one entry per target of the current map */
	int n_seen, cap_seen;

	ft_fanout_t *fanout; /* metasync pushes, list, job and S3 fan-outs */

	pthread_t checker;
	bool checker_started;
	pthread_t prober; /* health.c */
	bool prober_started;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond; /* CLOCK_MONOTONIC */
	bool stopping;
	int drains; /* px_task_t threads running: decommissions, restores (stop_lock) */

	/* primary.c: several proxies on etcd (cfg.etcd set); the rest of the daemon asks px_is_primary */
	pthread_t elector;
	bool elector_started;
	bool primary;              /* holds the primary key (atomic) */
	int64_t lease;             /* this proxy's etcd lease, 0 = none (written under meta_lock) */
	int64_t lease_ok_ms;       /* ft_mono_ms() when the last renewal etcd confirmed was sent (atomic) */
	int64_t lease_sent_ms;     /* the last renewal sent (elector thread) */
	int64_t smap_rev, bmd_rev; /* etcd mod_revision of the documents last read or committed (meta_lock) */
	bool etcd_resync;          /* a commit failed: re-read before the next (atomic) */
	int64_t proxy_join_ms;     /* last join of the primary as a proxy (elector thread) */
	char etcd_key_primary[FT_PATH_MAX + 16];
	char etcd_key_smap[FT_PATH_MAX + 16];
	char etcd_key_bmd[FT_PATH_MAX + 16];
	char etcd_key_proxies[FT_PATH_MAX + 16]; /* "<prefix>/proxies/": one key per live proxy, with its lease */
	int64_t presence_lease;                  /* the lease this proxy's key was put with (elector thread) */
	int64_t proxy_check_ms;                  /* the primary's last look at the proxies' keys (elector thread) */

	ft_ctl_t *ctl;
	ft_httpd_t *httpd;
	struct px_s3 *s3; /* the S3 front end (s3/s3.h), started with what it needs from here (main.c) */
} px_t;

/* ---- persist.c: state_dir documents, written atomically ---- */
/* Writes j to path (mode 0600) via a temp file, fsync and rename (and fsyncs the directory). 0 or -errno. */
int px_persist_save(const char *path, const json_t *j);
/* Loads path: 0 and *out set; 1 when the file does not exist; -1 (err filled) when unreadable or corrupt. */
int px_persist_load(const char *path, json_t **out, char *err, size_t errlen);
/*
 * Persist the documents to smap.json / bmd.json, or with etcd commit them there (primary.c); 0, -1 (logged)
 * on failure, -EAGAIN when this proxy may not commit (not the primary, or etcd unreachable).
 */
int px_persist_smap(px_t *px, const ft_smap_t *m);
int px_persist_bmd(px_t *px, const ft_bmd_t *b);

/* ---- primary.c: several proxies with the primary elected on etcd (docs/multi-proxy.md) ---- */
/* Whether this proxy may commit metadata now: always with no etcd; else it holds the primary key and its lease is fresh. */
bool px_is_primary(const px_t *px);
/* Whether this proxy holds (or held until it lost etcd) the primary key; always true with no etcd. */
bool px_was_primary(const px_t *px);
/* Startup with etcd: lease, campaign, then the documents (as primary: taken over; else read). 0, -1 with err. */
int px_primary_init(px_t *px, char *err, size_t errlen);
/* The elector thread (nothing with no etcd); stop revokes the lease so another proxy takes over at once. */
int px_primary_start(px_t *px);
void px_primary_stop(px_t *px);
/* Fenced compare-and-swap commits of the documents to etcd (meta_lock held): 0, -EAGAIN (not the primary). */
int px_primary_commit_smap(px_t *px, const ft_smap_t *m);
int px_primary_commit_bmd(px_t *px, const ft_bmd_t *b);
/* A 503 for a control-port request only the primary serves, naming the primary and its URLs when known. */
void px_primary_not_primary(px_t *px, ft_ctl_resp_t *resp, const char *what);

/* ---- cluster.c: the primary's map: state at start, join, keepalive, silent targets ---- */
/* Loads or creates the Smap (with this proxy as primary) and BMD, persists and installs them. */
int px_cluster_init(px_t *px, char *err, size_t errlen);
void px_cluster_join(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
void px_cluster_keepalive(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* The thread that removes targets not heard from for 3 keepalive intervals. */
int px_checker_start(px_t *px);
/* Adds this proxy (id, public and control URL) to m. 0, or -1 as ft_smap_add. */
int px_smap_add_self(const px_t *px, ft_smap_t *m);
/* Waits up to ms (none when ms <= 0) or until the daemon stops; whether it stops. */
bool px_stop_wait(px_t *px, int64_t ms);
void px_checker_stop(px_t *px);
/*
 * Takes target id out of the map at once (new version, persisted, installed, then pushed to every node before
 * returning), logging why. 0 removed, 1 not in the map, -1 failed (out of memory, state file not written).
 */
int px_cluster_remove(px_t *px, const char *id, const char *why);
/* Frees the last-seen table. */
void px_cluster_free(px_t *px);
/* A new primary: every target of m counts as heard from now (meta_lock held). */
void px_cluster_reset_seen(px_t *px, const ft_smap_t *m);
/* POST /v1/metasync on a proxy that is not the primary: installs what is newer. */
void px_cluster_metasync(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- health.c: dead targets out of the map within about a second ---- */
/* The probe thread (not started when probe_interval_ms is 0); stop before px_checker_stop. */
int px_prober_start(px_t *px);
void px_prober_stop(px_t *px);
/*
 * A relay could not connect to target id: confirms with a probe and takes the target out of the map (pushed to
 * every node before returning). 0 when id is out of the map (now, or already), -1 when it answered the probe.
 * Blocks (up to the probe and a push): call from a worker.
 */
int px_target_unreachable(px_t *px, const char *id);

/* ---- metasync.c: pushing documents to the nodes ---- */
/*
 * POSTs {control_url}/v1/metasync to every node of smap except this proxy, in parallel, with
 * PX_PUSH_TIMEOUT_MS. Body: {"smap"} when smap_all, plus {"bmd"} when bmd_all (either may be
 * combined); the node with id extra_id (may be NULL) gets both documents. Failures are logged.
 * Returns the number of nodes that did not answer 200.
 */
int px_metasync(px_t *px, const ft_smap_t *smap, const ft_bmd_t *bmd, bool smap_all, bool bmd_all,
		const char *extra_id);
/* Pushes smap and bmd to one node now (blocking); 0 when it answered 200. */
int px_metasync_node(const ft_node_t *node, const ft_smap_t *smap, const ft_bmd_t *bmd);

/* ---- ctl.c: control-port dispatcher ---- */
void px_ctl_handler(void *ctx, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);

/* ---- maint.c ---- */
/* PUT /v1/cluster {"action": "start-maintenance" | "stop-maintenance" | "decommission", "value": {"sid": ID}}. */
void px_maint_cluster_put(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/* GET|POST /v1/cluster/mountpaths?sid=ID: relayed to target ID's /v1/mountpaths. */
void px_maint_mountpaths(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/*
 * The same on the public port (the endpoint table gives them the admin role). px_maint_public_put:
 * PUT /v1/cluster whose body msg (raw: body, len) names a maintenance action: true when it took r
 * (a worker answers), false for another action (AIStore's job stop, aiswire_jobs.c).
 */
bool px_maint_public_put(px_t *px, ft_req_t *r, const json_t *msg, const char *body, size_t len);
/* Stops the decommission and restore threads: they end their current request and leave the rest; waits for them. */
void px_maint_stop(px_t *px);
/* A detached thread of the proxy about node id (a decommission, a restore), counted so px_maint_stop waits for it. */
typedef struct {
	px_t *px;
	char id[FT_ID_MAX];
} px_task_t;
/* Runs fn with a new px_task_t, which fn ends with px_task_end. 0, or -1 (stopping, no memory, no thread). */
int px_task_start(px_t *px, const char *id, void *(*fn)(void *));
void px_task_end(px_task_t *d);

/* ---- reprotect.c: slices and copies re-created after a target left the map ---- */
/* ec-encode runs on every target for each bucket with slices or copies on targets, followed to their end; blocking. */
void px_reprotect(px_t *px, const char *kind, const char *sid);
/* Target id was taken out as dead: px_reprotect in restore_after_s unless it joins again (a thread of its own). */
void px_reprotect_after_loss(px_t *px, const char *id);
/* GET|POST /v1/cluster/mountpaths?sid=ID on the public port. */
void px_maint_public_mountpaths(px_t *px, ft_req_t *r);
/* {"status":"ok","role":"proxy","id":...} (new reference). */
json_t *px_health_json(const px_t *px);
/*
 * The document for what=smap|bmd (new reference), NULL for another word. public_port: the BMD
 * without backend secrets (else with them sealed, for members).
 */
json_t *px_cluster_doc(const char *what, bool public_port);

/* ---- route.c: public-port dispatcher ---- */
void px_route(ft_req_t *r, void *ctx);
/* The public server's own refusals (ft_httpd_opts_t.server_error): S3 XML on S3 paths, JSON elsewhere. */
void px_server_error(ft_req_t *r, const char *target, int status, const char *msg, void *ctx);
/* batch.c: POST /v1/batch (GetBatch), redirected to the owner of its first item, which assembles the TAR. */
void px_batch(px_t *px, ft_req_t *r);
/* AIStore's GetBatch, GET /v1/ml/moss[/<bucket>] with a MossReq body (batch.c): redirected like px_batch. */
void px_moss(px_t *px, ft_req_t *r, const char *path, size_t len);
/*
 * Checks the "provider" query parameter: absent, empty or "ais" -> 0 with *provider = "ais";
 * a remote provider (or its alias s3, gs, gcs, az) -> 0 with its canonical name (aws, gcp, azure, ht);
 * otherwise responds 400 and returns -1. Handlers that do not serve remote buckets answer 501.
 */
int px_provider(ft_req_t *r, const char **provider);

/* ---- auth.c: the native API's authentication (docs/security.md) ---- */
/*
 * Whether r may go on: true when auth is off, the endpoint is open, or the caller's credentials
 * (Bearer token or SigV4) carry the role the endpoint table (common/auth/policy.c) asks for on the
 * bucket; false after answering 401 or 403. Loop thread, no I/O.
 */
bool px_auth_request(px_t *px, ft_req_t *r, const char *path, size_t len);
/*
 * Whether r's caller (already let in by px_auth_request) may also act with role need on a second
 * bucket the request names in its body (a copy's or an archive's destination, dsort's output);
 * true when auth is off, false after answering 403. Loop thread, no I/O.
 */
bool px_auth_bucket(ft_req_t *r, ft_role_t need, const char *bucket);
/* POST /v1/tokens: a token for a key pair of the identity store. */
void px_tokens(px_t *px, ft_req_t *r);

/* ---- buckets.c ---- */
void px_buckets_list(px_t *px, ft_req_t *r);
void px_bucket_create(px_t *px, ft_req_t *r, const char *bucket);
void px_bucket_destroy(px_t *px, ft_req_t *r, const char *bucket);
void px_bucket_head(px_t *px, ft_req_t *r, const char *bucket);
/* HEAD of a bucket of provider (its props, backend secrets left out). */
void px_bucket_head_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * Remote buckets (provider aws|gcp|azure|ht): create-bck with {"value": {"backend": {...}}} (the
 * properties of ft_backend_config_from_json, validated here, stored in the BMD) and destroy (BMD only:
 * the backend's data is untouched).
 */
void px_bucket_create_remote(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
void px_bucket_destroy_remote(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * The BMD mutations behind create and destroy, for other front-ends (S3). Blocking: call from a
 * worker. Return 0; -EEXIST (create: the bucket exists), -ENOENT (destroy: it does not), or -EIO
 * when the metadata could not be updated.
 */
int px_bucket_create_do(px_t *px, const char *bucket, ft_cksum_type_t cksum);
/*
 * Creates ais bucket name with like's checksum type and protection properties (a copy job's
 * absent destination). 0, -EEXIST, -ERANGE (why: the properties do not fit the cluster) or -EIO.
 */
int px_bucket_create_like(px_t *px, const char *name, const ft_bucket_t *like, char *why, size_t cap);
int px_bucket_destroy_do(px_t *px, const char *bucket);
/* Sets the canned ACL of a bucket (a new BMD, pushed). Blocking: a worker. 0, -ENOENT or -EIO. */
int px_bucket_set_acl(px_t *px, const char *provider, const char *bucket, bool public_read);
/* The primary's side of a follower's bucket change ({"op": "create"|"destroy"|"setprops", ...}): as the *_do. */
int px_bucket_meta_apply(px_t *px, const json_t *op, char *why, size_t cap);

/* ---- rbuckets.c: the buckets of a remote provider's account ---- */
/*
 * GET /v1/buckets?provider=aws|gcp|azure|ht[&presence=N] (provider canonical): the account's
 * buckets as one target lists them, each {"name", "provider", "present"} (plus "cluster_buckets":
 * the cluster buckets fronting it); presence 2..4 the cluster's buckets of provider, 5 only those
 * not present; ht without presence 2..4 is 400 (an HTTP origin has no buckets).
 */
void px_buckets_list_remote(px_t *px, ft_req_t *r, const char *provider);

/* ---- textlist.c: lists jobs read from objects of a bucket ---- */
/*
 * Appends the lines of p[0..len) to out as strings, one a line ("\n" or "\r\n"; empty lines
 * skipped). 0; -E2BIG when more than max; -EILSEQ when a line is not UTF-8 text (a NUL byte
 * counts as not); -ENOMEM. *line_no: the line (from 1) that failed, or the last one read.
 */
int px_text_lines(const char *p, size_t len, size_t max, json_t *out, size_t *line_no);
/*
 * dsort's order file into pos (key -> position): a JSON array of keys, a JSON object key -> number,
 * or text/CSV with the key as the first field (up to ',' or a tab) of each line. A key listed
 * twice keeps its first position. 0, or -ENOENT when it lists no key.
 */
int px_order_parse(const char *p, size_t len, json_t *pos);

/* ---- metafwd.c: a follower's bucket metadata changes, made by the primary (docs/multi-proxy.md) ---- */
/* Whether this proxy sends its metadata changes to the primary (several proxies, and it is not the primary). */
bool px_meta_follower(const px_t *px);
/*
 * Has the primary make op (stolen; NULL: out of memory) and waits until this proxy's BMD holds it.
 * Blocking: a worker. The primary's outcome (0 or a -errno of the operation, why filled), or -EAGAIN
 * when no primary can make it now (why says why).
 */
int px_meta_forward(px_t *px, json_t *op, char *why, size_t cap);
/* POST /v1/meta on the control port: a follower's operation, made here when this proxy is the primary. */
void px_meta_handle(px_t *px, const ft_ctl_req_t *req, ft_ctl_resp_t *resp);
/*
 * A cluster action (method path body, as on the control port) asked of a follower: sent to the
 * primary's control port, its answer (status and JSON) put in resp; after a 2xx carrying
 * "smap_version", waits until this proxy's map holds that version. Blocking: a worker. 503 when no
 * primary is known or it cannot be reached.
 */
void px_cluster_forward(px_t *px, const char *method, const char *path, const json_t *body, ft_ctl_resp_t *resp);

/* ---- acl.c: anonymous reads of public-read data on the native API (docs/acl.md) ---- */
/* Whether r carries no credentials at all (no Authorization header, no presigned query). */
bool px_acl_anonymous(ft_req_t *r);
/*
 * Whether an anonymous r may go on under the endpoint table's rule (auth.c asks): public access on
 * (allow_public_read), GET or HEAD, and an object (its target decides on the object's ACL) or a
 * bucket whose ACL is public-read (HEAD, or a listing without a body).
 */
bool px_acl_anonymous_ok(ft_req_t *r, const char *rule_path, const char *bucket);
/* Whether acl (may be NULL) is a value to refuse: public-read with public access off; true after answering 403. */
bool px_acl_refused(ft_req_t *r, const char *acl);

/* ---- list.c ---- */
/* Sends one listing page: entries (borrowed; the targets' entry objects) and the next token ("" at the end). */
typedef void (*px_list_encode_fn)(ft_req_t *r, const json_t *entries, const char *token, void *arg);
/* The options of one listing, decoded from FastTier's query or from AIStore's list message (aiswire.c). */
typedef struct {
	const char *prefix;       /* NULL: "" */
	const char *token;        /* NULL: from the start */
	int pagesize;             /* 0: the default; above the maximum: the maximum */
	bool cached_only;         /* remote buckets: only what the cluster holds */
	bool archive;             /* archive=true: members of shards listed too (docs/shards.md) */
	px_list_encode_fn encode; /* NULL: FastTier's {"entries","continuation_token"} */
	void *encode_arg;
} px_list_args_t;
void px_list_objects(px_t *px, ft_req_t *r, const char *bucket);
/* The one listing, whatever the request's shape: checks the bucket, then defers the fan-out. */
void px_list_start(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const px_list_args_t *a);
/*
 * GET /v1/buckets/B?provider=P: for a remote provider, one page of the backend's listing (through
 * one target) with each entry marked "cached"; with cached=true (any provider) the objects held in
 * the cluster; ht without cached=true is 400 (an HTTP origin cannot be listed).
 */
void px_list_objects_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * One merged page, for other front-ends (S3): the names of bucket starting with prefix and
 * greater than token (byte order), at most pagesize (1..10000), fetched from every target in
 * parallel. Blocking: call from a worker. Returns 0 with *entries (a JSON array of the targets'
 * entries, caller owns) and *more (some target may hold further names); -1 with why filled when
 * a target failed or there are no targets (*status: 503) or on allocation failure (500).
 */
int px_list_page(px_t *px, const char *bucket, const char *prefix, const char *token, int pagesize, json_t **entries,
		 bool *more, int *status, char *why, size_t cap);
/*
 * The same for a bucket of provider (of a remote bucket, the objects the cluster holds), with *next the token
 * the next page starts at ("" at the end; caller frees; a page may be empty while more follows).
 */
int px_list_page_of(px_t *px, const char *provider, const char *bucket, const char *prefix, const char *token,
		    int pagesize, json_t **entries, char **next, int *status, char *why, size_t cap);
/* What px_rlist_page lists ("" or NULL: none). */
typedef struct {
	const char *prefix;
	const char *delimiter;   /* the backend rolls names up at it */
	const char *start_after; /* the first backend page (token ""): names after it where the backend can (aws) */
	const char *token;       /* the backend's page token, "" for the first page */
	int pagesize;            /* 1..10000 */
} px_rlist_args_t;
/*
 * One page of a remote bucket's own listing (its backend's, through one target), for other front-ends (S3): the
 * names starting with a->prefix from the backend's page a->token, at most a->pagesize; with a delimiter, the
 * backend's common prefixes come as entries {"name": P, "dir": true}.
 * Blocking: call from a worker. 0 with *entries (caller owns) and *next (the backend's token of the next page, ""
 * at the end; caller frees); -1 with *status and why.
 */
int px_rlist_page(px_t *px, const char *provider, const char *bucket, const px_rlist_args_t *a, json_t **entries,
		  char **next, int *status, char *why, size_t cap);

/* ---- jobs.c: prefetch, evict and jobs over local objects (docs/api.md "Jobs") ---- */
/*
 * A bucket POST body (loop thread): when its action is prefetch-listrange, evict-listrange,
 * evict-remote-bucket (remote buckets only: 400 for an ais bucket), make-n-copies, ec-encode or
 * scrub, handles it (400 for bad input, else defers the fan-out to the targets and answers
 * {"job_id"}) and returns true; otherwise returns false untouched.
 */
bool px_jobs_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *body, size_t len);
/*
 * Blocking (worker): asks every target of the current map for job id (aborts it first when del)
 * and folds their parts into one job document, or every job they know (an array) when id is "".
 * 0 with *out (caller owns); -1 with *status (404 no target knows the job, 502, 503) and why.
 */
int px_jobs_query(px_t *px, const char *id, bool del, json_t **out, int *status, char *why, size_t cap);
/* Runs on the worker before the fan-out (creates a destination, reads a URL list): 0, or -1 after responding. */
typedef int (*px_job_prepare_fn)(px_t *px, ft_req_t *r, json_t *msg);
/*
 * Defers the fan-out of msg (taken) to every target, after prepare (may be NULL); answers {"job_id"},
 * or the bare job id as text when bare_id (AIStore's action messages).
 */
void px_jobs_submit(px_t *px, ft_req_t *r, json_t *msg, px_job_prepare_fn prepare, bool bare_id);
/* The same, POSTed to path (a string that outlives r) on the targets' control ports instead of /v1/jobs. */
void px_jobs_submit_to(px_t *px, ft_req_t *r, const char *path, json_t *msg, px_job_prepare_fn prepare, bool bare_id);
/* Whether id holds only what job ids hold: ASCII letters, digits and '-' ("" passes). */
bool px_jobs_id_chars_ok(const char *id);
/* A new job id ("j-<hex time>-<seq>") into id. */
void px_jobs_new_id(char *id, size_t cap);
/*
 * The objects of a listrange value (objnames, template or prefix; exactly one) into msg as
 * "objnames" (checked, a template expanded) or "prefix". 0, or -1 after responding 400.
 */
int px_jobs_value_names(ft_req_t *r, const char *provider, const char *kind, const json_t *value, json_t *msg);
/* GET /v1/jobs, GET|DELETE /v1/jobs/<id>, DELETE /v1/jobs?kind=K: asks every target and adds up their parts. */
void px_jobs_route(px_t *px, ft_req_t *r, const char *path, size_t len);

/* ---- jobs_stop.c: stopping every running job of a kind (docs/api.md "Jobs") ---- */
/* The i-th job kind of FastTier's (prefetch, copy, ..., rebalance, resilver), NULL past the last. */
const char *px_jobs_kind_at(size_t i);
/* The canonical name of provider p ("ais", "aws", "gcp", "azure", "ht"; an alias such as s3 too); "" for NULL or
 * "", NULL when unknown. */
const char *px_jobs_provider(const char *p);
/*
 * Blocking (worker): aborts every running job of kind (NULL or "": of every kind) whose bucket is
 * provider/bucket (NULL or "": any), each as DELETE /v1/jobs/ID does. 0 with *stopped (caller owns): the array of the ids
 * aborted, [] when none ran; -1 with *status (502, 503, 500) and why (the jobs aborted before the
 * failure stay aborted).
 */
int px_jobs_stop_kind(px_t *px, const char *kind, const char *provider, const char *bucket, json_t **stopped,
		      int *status, char *why, size_t cap);
/* DELETE /v1/jobs?kind=K[&provider=P][&bucket=B] (loop thread): checks the query (400), defers the stop, answers
 * {"kind","stopped":[ids]}. */
void px_jobs_stop_route(px_t *px, ft_req_t *r);

/* ---- jobs_copy.c: copy-bck, copy-listrange and download (docs/jobs.md) ---- */
/* A copy job as asked, decoded from FastTier's value or from AIStore's (aiswire.c); strings borrowed. */
typedef struct {
	const char *to_provider; /* NULL or "" for ais; checked and made canonical by px_copy_submit */
	const char *to_bucket;
	const char *prefix;     /* NULL: not given (copy-bck copies the whole bucket) */
	const char *template;   /* copy-listrange only, or NULL */
	const json_t *objnames; /* copy-listrange only, or NULL */
	bool dry_run, latest, sync, force;
	const char *etl;        /* NULL, or a transformer of the registry (etl.c) each object goes through */
	int64_t etl_timeout_ms; /* 0, or the transformer's timeout per object for this job (with etl) */
	const char *prepend;    /* NULL or "", or the string each copy's name starts with: <prepend><name> */
	const json_t *ext;      /* NULL, or {"jpg": "png"}: a copy's extension replaced (AIStore's TCBMsg.Ext) */
} px_copy_t;
/*
 * The one path of a copy job: checks c for action (copy-bck or copy-listrange; 400), defers the
 * job (an absent ais destination is created on the worker) and answers {"job_id"}, or the bare
 * job id as text when bare_id.
 */
void px_copy_submit(px_t *px, ft_req_t *r, const char *action, const char *provider, const char *bucket,
		    const px_copy_t *c, bool bare_id);
/*
 * Called by px_jobs_action for actions it does not know: when action is copy-bck, copy-listrange
 * or download, checks value (400), defers the job and returns true; otherwise false untouched.
 */
bool px_copy_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		    const json_t *value);

/* ---- jobs_dsort.c: dsort, resharding (docs/jobs.md "dsort") ---- */
/*
 * Called by px_jobs_action for actions it does not know: when action is dsort, checks value (400,
 * 404), defers the plan (listed, ordered and packed on the worker) and the fan-out, and returns
 * true; otherwise false untouched.
 */
bool px_dsort_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		     const json_t *value);
/* ---- etl.c: the transformer registry, kept in the BMD (docs/etl.md) ---- */
/* /v1/etl (POST registers, GET lists) and /v1/etl/NAME (GET shows, DELETE removes). */
void px_etl_route(px_t *px, ft_req_t *r, const char *path, size_t len);
/* Whether the current BMD has transformer name. */
bool px_etl_known(const char *name);
/* The primary's side of a follower's registry change ({"op": "etl-set", "name", "spec"} or "etl-rm"). */
int px_etl_meta_apply(px_t *px, const json_t *op, char *why, size_t cap);
/* ---- jobs_archive.c: the archive action (docs/archive.md) ---- */
/*
 * Called by px_jobs_action for actions it does not know: when action is archive, checks value
 * (400, 404), defers the job (a prefix listed on the worker) and returns true; else false untouched.
 */
bool px_archive_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
		       const json_t *value);
/* The archive job of value (FastTier's keys) over provider/bucket: checked (400, 404), deferred, answered
 * {"job_id"}, or the bare id as text when bare_id. */
void px_archive_submit(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const json_t *value,
		       bool bare_id);

/* ---- hints.c: epoch order hints (docs/epoch-hints.md) ---- */
/*
 * A bucket POST body (loop thread): when its action is order-hint, or it is over PX_BODY_MAX (only
 * an order hint may be), defers checking it, splitting its names by owner and installing the shares
 * on the targets, and returns true (the response follows); otherwise returns false untouched.
 */
bool px_hints_action(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *body, size_t len);

/* ---- aiswire.c, aiswire_copy.c, aiswire_jobs.c, aiswire_mpu.c: AIStore's wire shapes over the operations above ---- */
/* Whether an action message is AIStore's (its ActMsg always carries "name"): answers then take AIStore's shape. */
bool px_ais_actmsg(const json_t *msg);
/* ns since the epoch as AIStore's JSON time (RFC 3339, UTC); 0 or less: Go's zero time. */
void px_ais_time(int64_t ns, char *out, size_t cap);
/*
 * A bucket request in AIStore's shape (loop thread): GET with an action message or asking for
 * msgpack (list, summary-bck), HEAD ?bsumm_remote / ?uuid (summary), POST ?bck_to (copy: 501).
 * Handles it and returns true; otherwise returns false untouched.
 */
bool px_ais_bucket(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * aiswire_summ.c: AIStore's bucket summary (BsummResult) of provider/bucket under prefix (NULL: all): the
 * request without uuid starts it and answers 202 with its id; with the id, 202 while it runs, then the result
 * (head: in Ais-Bucket-Summ, else a JSON list). remote: a remote bucket's own listing counted too.
 */
void px_ais_summary(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *prefix,
		    const char *uuid, bool head, bool remote);
/* Stops taking summaries and waits for those under way (each ends at its next page). */
void px_ais_summ_stop(void);
/*
 * POST /v1/buckets/B?bck_to=...: AIStore's copy-bck and etl-bck decoded into px_copy_submit (answers
 * the bare job id), move-bck answered 501; returns true. Any other request: false untouched.
 */
bool px_ais_bck_to(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * PUT /v1/buckets/B: AIStore's multi-object archive (ObjectGroup.archive) decoded into
 * px_archive_submit (answers the bare job id), another action 405; returns true. Any other
 * method: false untouched.
 */
bool px_ais_archive(px_t *px, ft_req_t *r, const char *provider, const char *bucket);
/*
 * PUT /v1/objects/B/O?obj_to=<provider>/@#/<bucket>/<name> (AIStore's Object.copy): checks the
 * destination (its name 400, a namespace 501, the caller's readwrite on its bucket 403, the bucket and
 * an etl_name known 404) and answers when it refuses (true); false lets the PUT be redirected to the
 * source's owner, which copies (the redirect's signature names the destination). Other requests: false.
 */
bool px_ais_object_copy_refused(ft_req_t *r);
/*
 * AIStore's multi-object copy and transform (ObjectGroup.copy/transform: action copy-listrange or
 * etl-listrange, a TCOMsg value naming its destination in "tobck") decoded into px_copy_submit
 * (answers the bare job id); returns true. Any other action or value: false untouched.
 */
bool px_ais_copy_objects(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *action,
			 const json_t *value);
/*
 * Whether a bucket DELETE's action message (parsed) is AIStore's evict-remote-bck without
 * keep_bck_md=true: AIStore then forgets the bucket, which is FastTier's destroy-bck of it.
 */
bool px_ais_evict_forgets(ft_req_t *r, const char *provider, const json_t *msg);
/* GET /v1/daemon?what=smap|bmd|snode: AIStore's documents of this proxy's map and BMD. */
void px_ais_daemon(px_t *px, ft_req_t *r);
/* AIStore's Smap {pmap, tmap, proxy_si, uuid, version} (new reference). */
json_t *px_ais_smap(const ft_smap_t *m);
/* GET /v1/cluster?what=status|qryxstats|status_all|running_all and PUT /v1/cluster (stop); false for other words. */
bool px_ais_cluster(px_t *px, ft_req_t *r, const char *what);
/* AIStore's multipart (mpt-upload, ?uploadId parts, complete, abort); true when handled. */
bool px_ais_object_mpu(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *obj,
		       size_t obj_len);

/* ---- template.c ---- */
/*
 * Expands "pre{A..B}post" (A and B decimal; zero padded to A's width when A and B have the same
 * width) into arr (names not checked). 0; -1 malformed, -2 more than max names; why set.
 */
int px_expand_template(const char *tpl, size_t max, json_t *arr, const char **why);

/* ---- objects.c ---- */
void px_object_redirect(px_t *px, ft_req_t *r, const char *bucket, const char *obj, size_t obj_len);
/* The same for a bucket of provider (canonical name from px_provider). */
void px_object_redirect_provider(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *obj,
				 size_t obj_len);
/*
 * Worker: reads object obj of provider/bucket whole from its owner in smap (a signed URL when
 * authentication is on) into body (the caller frees it). 0, or the status to answer with why set,
 * "<what> \"obj\": <reason>" (404 no such object, 502 unreadable, 503 no targets).
 */
int px_object_read(const ft_smap_t *smap, const char *provider, const char *bucket, const char *obj, const char *what,
		   long timeout_ms, ft_strbuf_t *body, char *why, size_t cap);

#endif
