/* SPDX-License-Identifier: Apache-2.0 */
/* Target side of cluster jobs: prefetch, evict, copy, download and jobs over local objects; status, abort, resume. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "obj/listwalk.h"
#include "protect/mirror.h"
#include "rpc/client.h"
#include "target.h"
#include "xact/archive.h"
#include "xact/copy.h"
#include "xact/dsort.h"
#include "xact/journal.h"
#include "xact/runner.h"

/*
 * DESIGN
 * A job is a run of runner.c (items: object name, the mountpath it was found on or NULL for the
 * HRW one, and its bucket) on JOB_THREADS threads of its own. Where the items come from:
 * - names the proxy sent (objnames, template): the ones this target owns (HRW in the Smap
 *   current at start), all known at submit;
 * - the backend's listing under a prefix (prefetch of a prefix): every target lists the whole
 *   prefix and keeps the names it owns, so all targets fetch in parallel;
 * - the local objects of a bucket, or of every bucket (jobs over local objects: mirror, ec-encode,
 *   scrub, rebalance, and evict of a prefix, which only ever concerns cached copies), from
 *   list.c's name snapshots.
 * For the last two, the run's collector (the first thread to start) collects while the others
 * already run what was collected. DELETE aborts the run: workers stop before their next object
 * and the collector before its next page or bucket. Jobs stay in the table (for status) until
 * job_expiry_s after their end, or until the daemon stops; tgt_jobs_fini aborts and joins all. A
 * job is read under jobs_lock by the control handlers only, so fini can free it safely.
 * Copy jobs (copy.c) take the source's objects like a prefetch (remote source: names or the
 * backend's listing) or a local job (ais source: the stored objects); with sync the collector
 * then adds the destination's stored objects (items of the destination bucket index), which the
 * step checks against the source. Download jobs (download.c) take the names the proxy derived
 * from the URLs, each with its URL. Dsort jobs (dsort.c) take the output shards of the proxy's plan
 * that they own in the output bucket; a part that ends aborted or with errors removes its outputs
 * in the run's ending hook, before its end shows, and a part that finished does when the whole job
 * is aborted while others still run (DELETE ?outputs=remove from the proxy).
 * A job the proxy sent keeps a journal (journal.c): its message, and a line per object done. It
 * is removed when the job ends; a target that stops keeps it, and at the next start
 * tgt_jobs_resume runs the job again under its id, skipping the objects done and counting them.
 * Until then (the resume waits for the map and bucket metadata of the join) the journals read at
 * start stand for their jobs: status answers "running" with the objects done so far, so the
 * proxy never reads a job as finished without this target's part, and DELETE drops the journal.
 *
 * LOCKING
 * jobs_lock (the table) is taken before a run's locks; the run's threads never take jobs_lock.
 */

#define JOB_THREADS 4
#define JOB_ID_MAX TGT_RUN_ID_MAX
#define JOB_KIND_MAX TGT_RUN_KIND_MAX
#define JOB_LIST_PAGE 1000

#define JOB_RESUME_WAIT_S 60 /* how long a restarted target waits for its bucket metadata to resume jobs */
#define DOWNLOAD_ATTEMPTS 4
#define JOB_ASK_MS 5000 /* a peer's answer about a job this target resumes */

enum {
	JOB_PREFETCH = 0,
	JOB_EVICT,
	JOB_EVICT_BUCKET,
	JOB_DELETE,
	JOB_LOCAL,
	JOB_COPY,
	JOB_DOWNLOAD,
	JOB_DSORT,
	JOB_ARCHIVE
};
enum { SRC_NAMES = 0, SRC_BACKEND, SRC_LOCAL };
static const char *const state_names[] = {[TGT_RUN_RUNNING] = "running",
					  [TGT_RUN_FINISHED] = "finished",
					  [TGT_RUN_FAILED] = "failed",
					  [TGT_RUN_ABORTED] = "aborted"};

/* The user-facing jobs over local objects: kind name -> action on one object. */
static const struct {
	const char *kind;
	tgt_job_fn fn;
} local_kinds[] = {
	{"mirror", tgt_mirror_job_obj},
	{"ec-encode", tgt_ec_job_obj},
	{"scrub", tgt_scrub_job_obj},
};

typedef struct job {
	struct job *next;
	tgt_t *t;
	char id[JOB_ID_MAX];
	int kind;
	char kind_name[JOB_KIND_MAX];
	tgt_job_fn fn; /* JOB_LOCAL */
	int src;
	int bidx;                               /* the bucket's index in bmd->buckets; -1 for every bucket */
	char provider[TGT_PROVIDER_MAX];        /* "" with bucket "": every provider */
	char bucket[FT_BUCKET_NAME_MAX + 1];    /* "": every bucket of the BMD */
	char *prefix;                           /* owned; NULL = no prefix */
	json_t *names;                          /* SRC_NAMES: the objnames (checked), added at the launch */
	ft_bmd_t *bmd;                          /* reference: bucket properties as of the start */
	ft_smap_t *smap;                        /* reference: ownership as of the start */
	tgt_run_t *run;                         /* created by job_launch */
	tgt_copy_t copy;                        /* JOB_COPY */
	json_t *urls;                           /* JOB_DOWNLOAD: object name -> URL */
	tgt_dsort_t *dsort;                     /* JOB_DSORT: the plan (items: its output shards owned here) */
	json_t *members;                        /* the proxy's "members" (the job's targets); NULL for local jobs */
	json_t *done;                           /* resumed: object name -> bytes, done before the restart */
	tgt_journal_t *journal;                 /* closed by job_done (or job_free) */
	tgt_download_slot_t slots[JOB_THREADS]; /* JOB_DOWNLOAD: objects in flight */
	tgt_archive_t *archive;                 /* JOB_ARCHIVE (archive.c) */
	int withdrawn;                          /* JOB_DSORT, under jobs_lock: a finished part's outputs removed */
} job_t;

/* t->jobs: this target's job table. */
struct tgt_jobs {
	pthread_mutex_t lock;
	job_t *list;         /* guarded by lock */
	int closed;          /* guarded by lock: set by tgt_jobs_fini, refuses new jobs */
	atomic_int stopping; /* read by the runs' done: the daemon stops, journals stay for the resume */
	pthread_t resumer;   /* tgt_jobs_resume's thread */
	int resumer_started;
	json_t *pending; /* guarded by lock: id -> {"msg","done"} of journals not resumed yet */
};

/* Frees j (its run joined first, when started). */
static void job_free(job_t *j)
{
	if (j->run) {
		tgt_run_wait(j->run);
		tgt_run_free(j->run);
	}
	tgt_journal_close(j->journal, 0);
	free(j->prefix);
	json_decref(j->names);
	json_decref(j->urls);
	tgt_dsort_free(j->dsort);
	tgt_copy_free(&j->copy);
	json_decref(j->members);
	json_decref(j->done);
	tgt_archive_free(j->archive);
	ft_bmd_put(j->bmd);
	ft_smap_put(j->smap);
	free(j);
}

/* A new job (not started) of kind on provider/bucket ("" = every bucket); NULL on allocation failure. */
static job_t *job_new(tgt_t *t, const char *id, int kind, const char *kind_name, const char *provider,
		      const char *bucket)
{
	job_t *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->t = t;
	j->kind = kind;
	j->copy.to_bidx = -1;
	snprintf(j->id, sizeof(j->id), "%s", id);
	snprintf(j->kind_name, sizeof(j->kind_name), "%s", kind_name);
	snprintf(j->provider, sizeof(j->provider), "%s", provider);
	snprintf(j->bucket, sizeof(j->bucket), "%s", bucket);
	return j;
}

static void job_error(job_t *j, const char *name, const char *msg)
{
	tgt_run_error(j->run, name, msg);
}

/* Fills o for item it (a complete tgt_obj_t: identity, props, mountpath, rel). */
static void job_obj(job_t *j, const tgt_run_item_t *it, tgt_obj_t *o)
{
	const ft_bucket_t *b = &j->bmd->buckets[it->bucket];

	tgt_obj_init(o, j->t, b, it->name, strlen(it->name)); /* the walk listed names that fit */
	if (it->mp) {
		o->mp = it->mp;
		tgt_obj_locate(o); /* its path or its hashed file, on that mountpath */
	}
}

/* Unlinks the cached copy of o under its name lock; 1 removed (*size set), 0 not cached, -errno. */
static int evict_one(tgt_obj_t *o, int64_t *size)
{
	tgt_t *t = o->t;
	struct stat st;
	int rc;

	tgt_name_lock(o);
	if (fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
		rc = 0;
	} else if (unlinkat(o->mp->root_fd, o->rel, 0) != 0) {
		rc = -errno;
	} else {
		*size = st.st_size;
		tgt_parent_prune(o->mp, o->rel);
		rc = 1;
	}
	tgt_name_unlock(o);
	if (rc == 1)
		tgt_list_bump(t, o->provider, o->bucket);
	return rc;
}

int tgt_evict_wanted(ft_req_t *r)
{
	const char *v = ft_req_query(r, "evict");

	return v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

void tgt_evict_object(ft_req_t *r, tgt_obj_t *o)
{
	int64_t size = 0;
	int rc = evict_one(o, &size);

	if (rc < 0)
		ft_resp_error(r, 500, "object \"%s://%s/%s\": cannot evict: %s", o->provider, o->bucket, o->obj,
			      strerror(-rc));
	else if (rc == 0)
		ft_resp_error(r, 404, "object \"%s://%s/%s\" is not cached", o->provider, o->bucket, o->obj);
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/* Whether o's file is still there (a job over local objects skips names deleted since the walk). */
static int still_there(const tgt_obj_t *o)
{
	struct stat st;

	return fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* One URL of a download job, shown in a free slot of j->slots while it runs. */
static int download_step(job_t *j, const tgt_run_item_t *it, tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	const char *url = json_string_value(json_object_get(j->urls, it->name));
	tgt_download_slot_t *slot = NULL;
	int rc;

	if (url == NULL) {
		snprintf(err, cap, "no URL for this name");
		return -1;
	}
	for (int i = 0; i < JOB_THREADS && slot == NULL; i++) {
		const char *none = NULL;
		if (atomic_compare_exchange_strong(&j->slots[i].name, &none, it->name))
			slot = &j->slots[i];
	}
	rc = tgt_download_obj(o, url, DOWNLOAD_ATTEMPTS, j->run, slot, bytes, err, cap);
	if (slot != NULL)
		atomic_store(&slot->name, NULL);
	return rc;
}

/* The run's step: one item, its outcome noted in the journal. */
static int job_item(job_t *j, const tgt_run_item_t *it, int64_t *bytes, char *err, size_t cap);

static int job_step(tgt_run_t *r, const tgt_run_item_t *it, void *arg, int64_t *bytes, char *err, size_t cap)
{
	job_t *j = arg;
	int rc;

	(void)r;
	rc = job_item(j, it, bytes, err, cap);
	if (rc == 0 && j->journal != NULL && !(j->kind == JOB_COPY && it->bucket == j->copy.to_bidx))
		tgt_journal_done(j->journal, it->name, *bytes);
	return rc;
}

/* One item of the job, as a tgt_job_fn. */
static int job_item(job_t *j, const tgt_run_item_t *it, int64_t *bytes, char *err, size_t cap)
{
	tgt_obj_t o;
	int rc;

	job_obj(j, it, &o);
	switch (j->kind) {
	case JOB_PREFETCH: /* cached already (1) counts like fetched now */
		rc = tgt_coldget_prefetch(&o, bytes, err, cap);
		return rc < 0 ? -1 : 0;
	case JOB_COPY:
		if (it->bucket == j->copy.to_bidx)
			return tgt_copy_sync_obj(&j->copy, j->smap, j->provider, j->bucket, &o, err, cap);
		return tgt_copy_obj(&j->copy, j->smap, &o, bytes, err, cap);
	case JOB_DOWNLOAD:
		return download_step(j, it, &o, bytes, err, cap);
	case JOB_DSORT:
		return tgt_dsort_obj(j->dsort, j->smap, &j->bmd->buckets[j->bidx], &o, j->run, bytes, err, cap);
	case JOB_LOCAL:
		if (!still_there(&o))
			return 1; /* deleted since the walk */
		return j->fn(&o, bytes, err, cap);
	case JOB_DELETE: { /* as a DELETE of the object does it (remote buckets: the backend's too) */
		int status;
		rc = tgt_delete_do(&o, &status, err, cap);
		return rc < 0 ? -1 : rc; /* 1: there was no such object, nothing to count */
	}
	default:
		rc = evict_one(&o, bytes);
		if (rc == 0)
			return 1; /* not cached: nothing to count */
		if (rc < 0)
			snprintf(err, cap, "%s", strerror(-rc));
		return rc < 0 ? -1 : 0;
	}
}

/* The run's last thread: the job's summary line. */
static void job_done(tgt_run_t *r, void *arg)
{
	job_t *j = arg;
	tgt_run_stats_t *st = tgt_run_stats(r);

	ft_info("job %s (%s %s/%s): %s, %lld objects, %lld bytes, %lld errors", j->id, j->kind_name, j->provider,
		j->bucket, state_names[tgt_run_state(r)], (long long)atomic_load(&st->objects),
		(long long)atomic_load(&st->bytes), (long long)atomic_load(&st->errors));
	/* A job that ended has nothing to resume; one cut by the daemon's stop resumes at its start. */
	tgt_journal_close(j->journal, !atomic_load(&j->t->jobs->stopping));
	j->journal = NULL;
}

/* A dsort's part that ends aborted, failed or with errors removes its outputs before the end shows. */
static void dsort_ending(tgt_run_t *r, int state, void *arg)
{
	job_t *j = arg;

	if (!atomic_load(&j->t->jobs->stopping) &&
	    (state != TGT_RUN_FINISHED || atomic_load(&tgt_run_stats(r)->errors) > 0))
		tgt_dsort_cleanup(j->dsort, j->t, j->smap);
}

/* Adds an item unless a resumed job did it before the restart (counted by the preset). 0 or -1 (OOM). */
static int job_add(job_t *j, const char *name, const tgt_run_item_t *like)
{
	if (j->done != NULL && like->bucket != j->copy.to_bidx && json_object_get(j->done, name) != NULL)
		return 0;
	return tgt_run_add(j->run, name, like->mp, like->bucket);
}

/* Collects the names of the backend's listing under the prefix that this target owns (a collect of runner.h). */
static int collect_backend(job_t *j)
{
	ft_backend_error_t err;
	ft_backend_page_t page;
	char *token = NULL;
	const char *why = NULL;
	tgt_obj_t o = {.t = j->t};
	int rc = 0;

	snprintf(o.provider, sizeof(o.provider), "%s", j->provider);
	snprintf(o.bucket, sizeof(o.bucket), "%s", j->bucket);
	tgt_obj_props(&o, &j->bmd->buckets[j->bidx]);
	ft_backend_t *b = tgt_backend_get(&o, &err);
	if (b == NULL) {
		job_error(j, "listing", err.msg);
		return -1;
	}
	do {
		if (tgt_run_aborted(j->run)) {
			rc = 1;
			break;
		}
		if (ft_backend_list(b, j->prefix, token, JOB_LIST_PAGE, &page, &err) != FT_BACKEND_OK) {
			job_error(j, "listing", err.msg);
			rc = -1;
			break;
		}
		free(token);
		token = page.next_token != NULL ? strdup(page.next_token) : NULL;
		for (int i = 0; i < page.n && rc == 0; i++) {
			const char *name = page.entries[i].name;
			size_t len = strlen(name);
			const ft_node_t *owner = ft_smap_owner(j->smap, j->provider, j->bucket, name, len);
			if (owner == NULL || strcmp(owner->id, j->t->id) != 0)
				continue;
			if (ft_name_check_object(name, len, &why) != 0) { /* reported by its owner only */
				job_error(j, name, why);
				continue;
			}
			if (job_add(j, name, &(tgt_run_item_t){.bucket = j->bidx}) != 0)
				rc = -1;
		}
		if (page.next_token != NULL && token == NULL)
			rc = -1; /* strdup failed */
		ft_backend_page_free(&page);
		if (rc < 0)
			job_error(j, "listing", "out of memory");
	} while (token != NULL && rc == 0);
	free(token);
	return rc;
}

/*
 * Collects the local objects under the prefix of provider/bucket (or every bucket of the BMD, or
 * of provider, when bucket is "").
 */
static int collect_local(job_t *j, const char *provider, const char *bucket, const char *prefix)
{
	for (int bi = 0; bi < j->bmd->n; bi++) {
		const ft_bucket_t *b = &j->bmd->buckets[bi];
		tgt_list_item_t *v = NULL;
		size_t n = 0;
		int failed = 0;

		if (bucket[0] != '\0' && (strcmp(b->name, bucket) != 0 || strcmp(b->provider, provider) != 0))
			continue;
		if (bucket[0] == '\0' && provider[0] != '\0' && strcmp(b->provider, provider) != 0)
			continue;
		if (tgt_run_aborted(j->run))
			return 1;
		if (tgt_list_items(j->t, b->provider, b->name, prefix, &v, &n) != 0) {
			job_error(j, b->name, "walking the local objects: out of memory");
			return -1;
		}
		for (size_t i = 0; i < n && !failed; i++)
			failed = job_add(j, v[i].name,
					 &(tgt_run_item_t){.mp = v[i].mp >= 0 ? &j->t->mountpaths[v[i].mp] : NULL,
							   .bucket = bi}) != 0;
		tgt_list_items_free(v, n);
		if (failed) {
			job_error(j, b->name, "walking the local objects: out of memory");
			return -1;
		}
	}
	return 0;
}

static int add_names(job_t *j);

/* The run's collector: the backend's listing or the local objects; then a copy's sync items. */
static int job_collect(tgt_run_t *r, void *arg)
{
	job_t *j = arg;
	int rc;

	(void)r;
	if (j->src == SRC_NAMES)
		rc = add_names(j) == 0 ? 0 : -1;
	else if (j->src == SRC_BACKEND)
		rc = collect_backend(j);
	else
		rc = collect_local(j, j->provider, j->bucket, j->prefix);
	if (rc == 0 && j->kind == JOB_COPY && j->copy.sync) { /* the copies: under <prepend><prefix> */
		char *dest_prefix = tgt_copy_dest_prefix(&j->copy, j->prefix);
		if (dest_prefix == NULL) {
			job_error(j, j->copy.to_bucket, "walking the local objects: out of memory");
			return -1;
		}
		rc = collect_local(j, j->copy.to_provider, j->copy.to_bucket, dest_prefix);
		free(dest_prefix);
	}
	return rc;
}

/* evict-bucket: every cached copy of the bucket goes at once (the janitor deletes the trees). */
static void evict_bucket_body(tgt_run_t *r, void *arg)
{
	job_t *j = arg;
	int n = tgt_bucket_retire(j->t, j->provider, j->bucket);

	tgt_list_forget(j->t, j->provider, j->bucket);
	tgt_janitor_kick(j->t);
	atomic_store(&tgt_run_stats(r)->objects, n > 0 ? n : 0); /* trees (one per mountpath) retired */
}

/* archive: the packing, on the run's one thread (archive.c). */
static void archive_body(tgt_run_t *r, void *arg)
{
	job_t *j = arg;

	tgt_archive_run(j->archive, j->t, j->smap, r);
}

/* This target's job document (new reference); jobs_lock held (j stays alive). */
static json_t *job_json(job_t *j)
{
	json_t *doc = tgt_run_json(j->run, j->t->id);

	if (doc != NULL) {
		json_object_set_new(doc, "provider", json_string(j->provider));
		json_object_set_new(doc, "bucket", json_string(j->bucket));
	}
	if (doc != NULL && j->prefix != NULL)
		json_object_set_new(doc, "prefix", json_string(j->prefix));
	if (doc != NULL && j->members != NULL)
		json_object_set(doc, "members", j->members);
	if (doc != NULL && j->kind == JOB_COPY) {
		json_t *to = json_pack("{s:s, s:s}", "provider", j->copy.to_provider, "bucket", j->copy.to_bucket);
		if (to != NULL && j->copy.etl[0] != '\0') /* a transform: each object goes through it (docs/etl.md) */
			json_object_set_new(to, "etl", json_string(j->copy.etl));
		if (to != NULL && j->copy.prepend_len > 0)
			json_object_set_new(to, "prepend", json_string(j->copy.prepend));
		if (to != NULL && j->copy.ext != NULL)
			json_object_set(to, "ext", j->copy.ext);
		json_object_set_new(doc, "to", to);
		json_object_set_new(doc, "dry_run", json_boolean(j->copy.dry_run));
	}
	if (doc != NULL && j->kind == JOB_DSORT)
		json_object_set_new(
			doc, "to", json_pack("{s:s, s:s}", "provider", "ais", "bucket", tgt_dsort_to_bucket(j->dsort)));
	if (doc != NULL && j->withdrawn)
		json_object_set_new(doc, "state", json_string("aborted"));
	if (doc != NULL && j->kind == JOB_ARCHIVE)
		tgt_archive_json(j->archive, doc);
	if (doc != NULL && j->kind == JOB_DOWNLOAD) {
		json_t *inflight = json_array();
		for (int i = 0; i < JOB_THREADS; i++) {
			const char *name = atomic_load(&j->slots[i].name); /* alive until the run is freed */
			if (name != NULL)
				json_array_append_new(inflight, json_pack("{s:s, s:I}", "name", name, "bytes",
									  (json_int_t)atomic_load(&j->slots[i].bytes)));
		}
		json_object_set_new(doc, "inflight", inflight);
	}
	return doc;
}

static job_t *job_find(tgt_jobs_t *js, const char *id)
{
	for (job_t *j = js->list; j != NULL; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

/* Checks the names of arr and keeps it for the launch; 0 or -1 (bad name: why set). */
static int job_names(job_t *j, json_t *arr, const char **why)
{
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const char *name = json_string_value(json_array_get(arr, i));
		if (name == NULL || ft_name_check_object(name, strlen(name), why) != 0) {
			if (name == NULL)
				*why = "objnames must be strings";
			return -1;
		}
	}
	j->names = json_incref(arr);
	return 0;
}

/* Adds the names of j->names this target owns in j->smap to the run (dsort: outputs); 0 or -1 (out of memory). */
static int add_names(job_t *j)
{
	const char *provider = j->dsort != NULL ? "ais" : j->provider;
	const char *bucket = j->dsort != NULL ? tgt_dsort_to_bucket(j->dsort) : j->bucket;
	int bidx = j->dsort != NULL ? tgt_dsort_to_bidx(j->dsort) : j->bidx;

	for (size_t i = 0; i < json_array_size(j->names); i++) {
		const char *name = json_string_value(json_array_get(j->names, i));
		const ft_node_t *owner = ft_smap_owner(j->smap, provider, bucket, name, strlen(name));
		if (owner == NULL || strcmp(owner->id, j->t->id) != 0)
			continue;
		if (job_add(j, name, &(tgt_run_item_t){.bucket = bidx}) != 0)
			return -1;
	}
	return 0;
}

static tgt_job_fn local_kind(const char *kind)
{
	for (size_t i = 0; i < sizeof(local_kinds) / sizeof(local_kinds[0]); i++)
		if (strcmp(kind, local_kinds[i].kind) == 0)
			return local_kinds[i].fn;
	return NULL;
}

/* Sets j's kind from the message's word; -1 when unknown. */
static int parse_kind(job_t *j, const char *kind)
{
	if (strcmp(kind, "prefetch") == 0)
		j->kind = JOB_PREFETCH;
	else if (strcmp(kind, "evict") == 0)
		j->kind = JOB_EVICT;
	else if (strcmp(kind, "evict-bucket") == 0)
		j->kind = JOB_EVICT_BUCKET;
	else if (strcmp(kind, "delete") == 0)
		j->kind = JOB_DELETE;
	else if (strcmp(kind, "copy") == 0)
		j->kind = JOB_COPY;
	else if (strcmp(kind, "download") == 0)
		j->kind = JOB_DOWNLOAD;
	else if (strcmp(kind, "dsort") == 0)
		j->kind = JOB_DSORT;
	else if (strcmp(kind, "archive") == 0)
		j->kind = JOB_ARCHIVE;
	else if ((j->fn = local_kind(kind)) != NULL)
		j->kind = JOB_LOCAL;
	else
		return -1;
	return 0;
}

/* A download's "urls", one per name of objnames, into j->urls; 0, or -1 after responding 400. */
static int parse_urls(job_t *j, const json_t *msg, ft_ctl_resp_t *resp)
{
	const json_t *urls = json_object_get(msg, "urls");

	if (!json_is_array(urls) || json_array_size(urls) != json_array_size(j->names)) {
		ft_ctl_error(resp, 400, "a download job needs a urls array as long as objnames");
		return -1;
	}
	j->urls = json_object();
	for (size_t i = 0; i < json_array_size(urls); i++) {
		const char *u = json_string_value(json_array_get(urls, i));
		if (u == NULL || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)) {
			ft_ctl_error(resp, 400, "urls[%zu] must be an http:// or https:// URL", i);
			return -1;
		}
		json_object_set_new(j->urls, json_string_value(json_array_get(j->names, i)), json_string(u));
	}
	return 0;
}

/* Where the items of a proxy's job come from (names, prefix); 0, or -1 after responding 400. */
static int parse_source(job_t *j, const json_t *msg, ft_ctl_resp_t *resp)
{
	json_t *names = json_object_get(msg, "objnames");
	const json_t *prefix = json_object_get(msg, "prefix");
	const char *why = NULL;

	if (prefix != NULL && (!json_is_string(prefix) || json_string_length(prefix) > FT_OBJ_NAME_MAX)) {
		ft_ctl_error(resp, 400, "prefix must be a string of at most %d bytes", FT_OBJ_NAME_MAX);
		return -1;
	}
	if (prefix != NULL && (j->prefix = strdup(json_string_value(prefix))) == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		return -1;
	}
	switch (j->kind) {
	case JOB_EVICT_BUCKET:
		j->src = SRC_NAMES; /* no items: evict_bucket_main */
		return 0;
	case JOB_LOCAL:
		j->src = SRC_LOCAL;
		return 0;
	case JOB_ARCHIVE:
		j->src = SRC_NAMES; /* no items: archive_body */
		return 0;
	default:
		break;
	}
	if (j->kind == JOB_DELETE && prefix != NULL) {
		ft_ctl_error(resp, 400, "delete takes objnames (or a template), not a prefix");
		return -1;
	}
	if ((names != NULL) == (prefix != NULL)) {
		ft_ctl_error(resp, 400, "job message needs either an objnames array or a prefix");
		return -1;
	}
	if (prefix != NULL && (j->kind == JOB_DOWNLOAD || j->kind == JOB_DSORT)) {
		ft_ctl_error(resp, 400, "a %s job needs objnames", j->kind_name);
		return -1;
	}
	if (prefix != NULL) {
		int remote = strcmp(j->provider, "ais") != 0;
		j->src = j->kind == JOB_PREFETCH || (j->kind == JOB_COPY && remote) ? SRC_BACKEND : SRC_LOCAL;
		if (j->src == SRC_BACKEND && strcmp(j->provider, "ht") == 0) {
			ft_ctl_error(resp, 400, "an ht bucket cannot be listed: %s needs objnames or a template",
				     j->kind_name);
			return -1;
		}
		return 0;
	}
	if (!json_is_array(names)) {
		ft_ctl_error(resp, 400, "objnames must be an array");
		return -1;
	}
	j->src = SRC_NAMES;
	if (job_names(j, names, &why) != 0) {
		ft_ctl_error(resp, 400, "bad object name: %s", why);
		return -1;
	}
	return j->kind == JOB_DOWNLOAD ? parse_urls(j, msg, resp) : 0;
}

/* Reads and checks the job message into a new job (not yet started); NULL after responding. */
static job_t *job_parse(tgt_t *t, const json_t *msg, ft_ctl_resp_t *resp)
{
	const char *id = json_string_value(json_object_get(msg, "id"));
	const char *kind = json_string_value(json_object_get(msg, "kind"));
	const char *provider = json_string_value(json_object_get(msg, "provider"));
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	job_t *j = NULL;

	if (id == NULL || kind == NULL || provider == NULL || bucket == NULL || strlen(id) >= JOB_ID_MAX ||
	    strlen(kind) >= JOB_KIND_MAX || strlen(provider) >= TGT_PROVIDER_MAX ||
	    strlen(bucket) > FT_BUCKET_NAME_MAX) {
		ft_ctl_error(resp, 400, "job message needs string id, kind, provider and bucket");
		return NULL;
	}
	j = job_new(t, id, JOB_PREFETCH, kind, provider, bucket);
	if (j == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		return NULL;
	}
	j->bmd = ft_bmd_current();
	j->smap = ft_smap_current();
	if (json_is_array(json_object_get(msg, "members")))
		j->members = json_incref(json_object_get(msg, "members"));
	const ft_bucket_t *b = j->bmd != NULL ? ft_bmd_find(j->bmd, provider, bucket) : NULL;
	if (b == NULL || j->smap == NULL) {
		ft_ctl_error(resp, 404, "bucket %s/%s is not known to target %s", provider, bucket, t->id);
		goto fail;
	}
	if (parse_kind(j, kind) != 0) {
		ft_ctl_error(
			resp, 400,
			"unknown job kind \"%s\" (prefetch, evict, evict-bucket, delete, copy, download, dsort, archive, mirror, "
			"ec-encode, scrub)",
			kind);
		goto fail;
	}
	if (j->kind != JOB_LOCAL && j->kind != JOB_DELETE && j->kind != JOB_COPY && j->kind != JOB_DOWNLOAD &&
	    j->kind != JOB_DSORT && j->kind != JOB_ARCHIVE && strcmp(provider, "ais") == 0) {
		ft_ctl_error(resp, 400, "%s works on remote buckets only", kind);
		goto fail;
	}
	j->bidx = (int)(b - j->bmd->buckets);
	j->copy.to_bidx = -1;
	if (j->kind == JOB_COPY) {
		char why[300];
		int rc = tgt_copy_parse(&j->copy, msg, j->bmd, provider, bucket, why, sizeof(why));
		if (rc != 0) {
			ft_ctl_error(resp, rc == -2 ? 404 : 400, "%s", why);
			goto fail;
		}
	}
	if (j->kind == JOB_DSORT) {
		char why[300];
		int st;
		if ((j->dsort = tgt_dsort_parse(msg, j->bmd, &st, why, sizeof(why))) == NULL) {
			ft_ctl_error(resp, st, "%s", why);
			goto fail;
		}
	}
	if (j->kind == JOB_ARCHIVE) {
		char why[600];
		int st;
		j->archive = tgt_archive_parse(msg, j->bmd, &st, why, sizeof(why));
		if (j->archive == NULL) {
			ft_ctl_error(resp, st, "archive: %s", why);
			goto fail;
		}
	}
	if (parse_source(j, msg, resp) != 0)
		goto fail;
	return j;
fail:
	job_free(j);
	return NULL;
}

/*
 * Puts j in the table and starts its run (t->jobs->lock held). 0; -EEXIST (the id exists),
 * -ESHUTDOWN (jobs closed), -ENOMEM: j is not taken then. A job none of whose threads started is
 * kept as failed.
 */
static int job_launch(job_t *j)
{
	tgt_run_conf_t c = {.id = j->id, .kind = j->kind_name, .threads = JOB_THREADS, .done = job_done, .arg = j};
	tgt_jobs_t *js = j->t->jobs;

	if (js->closed)
		return -ESHUTDOWN;
	if (job_find(js, j->id) != NULL)
		return -EEXIST;
	if (j->kind == JOB_EVICT_BUCKET) {
		c.body = evict_bucket_body;
	} else if (j->kind == JOB_ARCHIVE) {
		c.body = archive_body;
	} else {
		c.step = job_step;
		c.ending = j->kind == JOB_DSORT ? dsort_ending : NULL;
		c.collect = j->src == SRC_NAMES && !(j->kind == JOB_COPY && j->copy.sync) ? NULL : job_collect;
	}
	j->run = tgt_run_new(&c);
	if (j->run == NULL || (c.collect == NULL && j->names != NULL && add_names(j) != 0))
		return -ENOMEM;
	if (j->done != NULL) {
		int64_t bytes = 0;
		const char *k;
		json_t *v;
		json_object_foreach(j->done, k, v)
			bytes += json_integer_value(v);
		tgt_run_preset(j->run, (int64_t)json_object_size(j->done), bytes);
	}
	tgt_run_start(j->run);
	j->next = js->list;
	js->list = j;
	return 0;
}

/*
 * Joins the threads of the runs that ended and frees the jobs that ended more than expiry_s ago
 * (jobs_lock held). A run's threads have exited, or its last one is in the run's done (which never
 * takes jobs_lock), so the joins are short. Joined at once, not at the expiry: until then each
 * exited thread would keep its stack mapped, for job_expiry_s after every job.
 */
static void jobs_expire(tgt_jobs_t *js, int expiry_s)
{
	int64_t now = ft_now_ns();

	for (job_t **p = &js->list; *p != NULL;) {
		job_t *j = *p;
		int64_t end = 0;
		if (j->run != NULL && tgt_run_state(j->run) != TGT_RUN_RUNNING) {
			tgt_run_wait(j->run);
			json_t *doc = tgt_run_json(j->run, "");
			end = json_integer_value(json_object_get(doc, "end"));
			json_decref(doc);
		}
		if (end > 0 && now - end >= (int64_t)expiry_s * 1000000000LL) {
			*p = j->next;
			job_free(j);
		} else {
			p = &j->next;
		}
	}
}

/* POST /v1/jobs */
static void job_submit(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	json_error_t jerr;
	json_t *msg = req->body ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;
	job_t *j;

	if (!json_is_object(msg)) {
		ft_ctl_error(resp, 400, "job message must be a JSON object");
		goto out;
	}
	j = job_parse(t, msg, resp);
	if (j == NULL)
		goto out;
	pthread_mutex_lock(&t->jobs->lock);
	jobs_expire(t->jobs, t->cfg.job_expiry_s);
	if (j->kind != JOB_EVICT_BUCKET && job_find(t->jobs, j->id) == NULL && !t->jobs->closed)
		j->journal = tgt_journal_create(t->cfg.state_dir, j->id, msg);
	int rc = job_launch(j);
	if (rc == 0) {
		resp->status = 200;
		resp->json = job_json(j);
	}
	pthread_mutex_unlock(&t->jobs->lock);
	if (rc == -ESHUTDOWN)
		ft_ctl_error(resp, 503, "target %s is shutting down", t->id);
	else if (rc == -EEXIST)
		ft_ctl_error(resp, 409, "job %s exists", j->id);
	else if (rc != 0)
		ft_ctl_error(resp, 500, "out of memory");
	if (rc != 0) {
		tgt_journal_close(j->journal, rc != -EEXIST);
		j->journal = NULL;
		job_free(j);
	}
out:
	json_decref(msg);
}

/* ---- journals waiting for their resume ---- */

/* tgt_journal_load's callback at start: keeps msg and done under the job's id in pending. */
static void pending_add(void *arg, const json_t *msg, const json_t *done)
{
	const char *id = json_string_value(json_object_get(msg, "id"));

	if (id != NULL)
		json_object_set_new(arg, id, json_pack("{s:O, s:O}", "msg", msg, "done", done));
}

/* The status of a journaled job not resumed yet: running, with the objects done before the restart. */
static json_t *pending_json(tgt_t *t, const char *id, const json_t *p)
{
	const json_t *msg = json_object_get(p, "msg"), *done = json_object_get(p, "done");
	json_int_t bytes = 0;
	const char *name;
	json_t *v;

	json_object_foreach((json_t *)done, name, v)
		bytes += json_integer_value(v);
	json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:[], s:b}", "id", id, "node",
				t->id, "state", "running", "objects", (json_int_t)json_object_size(done), "bytes",
				bytes, "errors", (json_int_t)0, "skipped", (json_int_t)0, "total", (json_int_t)0,
				"start", (json_int_t)0, "end", (json_int_t)0, "error_samples", "resuming", 1);
	static const char *const copied[] = {"kind", "provider", "bucket", "prefix", "members"};
	for (size_t i = 0; doc != NULL && i < sizeof(copied) / sizeof(copied[0]); i++)
		if (json_object_get(msg, copied[i]) != NULL)
			json_object_set(doc, copied[i], json_object_get(msg, copied[i]));
	return doc;
}

/* DELETE of a journaled job not resumed yet (jobs_lock held): its journal goes, doc reads aborted. */
static void pending_drop(tgt_t *t, const char *id, json_t *doc)
{
	tgt_journal_close(tgt_journal_reopen(t->cfg.state_dir, id), 1);
	json_object_del(t->jobs->pending, id);
	json_object_set_new(doc, "state", json_string("aborted"));
	json_object_set_new(doc, "end", json_integer(ft_now_ns()));
	ft_info("job %s: aborted before its resume; journal removed", id);
}

/* Aborts j's run: workers stop before their next object, the collector before its next step. */
static void job_abort(job_t *j)
{
	if (j->run != NULL)
		tgt_run_abort(j->run);
}

/*
 * DELETE ?outputs=remove: the proxy aborts a dsort that still runs elsewhere. A part that finished
 * here removes its outputs too, as an aborted part does, and reads aborted from then on; so an
 * aborted dsort leaves no output on any target. jobs_lock held (the removals are DELETEs on this
 * target's own public port, which never takes it).
 */
static void dsort_withdraw(job_t *j)
{
	if (j->kind != JOB_DSORT || j->withdrawn || j->run == NULL || tgt_run_state(j->run) != TGT_RUN_FINISHED ||
	    atomic_load(&tgt_run_stats(j->run)->errors) > 0)
		return;
	tgt_dsort_cleanup(j->dsort, j->t, j->smap);
	j->withdrawn = 1;
	ft_info("job %s: finished here but aborted as a whole; its outputs on this target removed", j->id);
}

/* GET /v1/jobs, GET|DELETE /v1/jobs/<id>[?outputs=remove] on the control port. */
void tgt_jobs_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *id = req->path + strlen("/v1/jobs");
	int post = strcmp(req->method, "POST") == 0, get = strcmp(req->method, "GET") == 0,
	    del = strcmp(req->method, "DELETE") == 0;

	if (*id == '/')
		id++;
	pthread_mutex_lock(&t->jobs->lock);
	jobs_expire(t->jobs, t->cfg.job_expiry_s);
	pthread_mutex_unlock(&t->jobs->lock);
	if (*id == '\0') {
		if (post) {
			job_submit(t, req, resp);
		} else if (get) {
			json_t *list = json_array();
			pthread_mutex_lock(&t->jobs->lock);
			for (job_t *j = t->jobs->list; j != NULL; j = j->next)
				json_array_append_new(list, job_json(j));
			const char *pid;
			json_t *p;
			json_object_foreach(t->jobs->pending, pid, p)
				json_array_append_new(list, pending_json(t, pid, p));
			pthread_mutex_unlock(&t->jobs->lock);
			resp->status = 200;
			resp->json = list;
		} else {
			ft_ctl_error(resp, 405, "method %s not allowed on /v1/jobs (use GET, POST)", req->method);
		}
		return;
	}
	if (!get && !del) {
		ft_ctl_error(resp, 405, "method %s not allowed on /v1/jobs/<id> (use GET, DELETE)", req->method);
		return;
	}
	pthread_mutex_lock(&t->jobs->lock);
	job_t *j = job_find(t->jobs, id);
	json_t *p = j == NULL ? json_object_get(t->jobs->pending, id) : NULL;
	if (j != NULL) {
		if (del)
			job_abort(j);
		if (del && ft_ctl_query(req, "outputs") != NULL && strcmp(ft_ctl_query(req, "outputs"), "remove") == 0)
			dsort_withdraw(j);
		resp->status = 200;
		resp->json = job_json(j);
	} else if (p != NULL) {
		resp->status = 200;
		resp->json = pending_json(t, id, p);
		if (del)
			pending_drop(t, id, resp->json);
	}
	pthread_mutex_unlock(&t->jobs->lock);
	if (j == NULL && p == NULL)
		ft_ctl_error(resp, 404, "no job %s on target %s", id, t->id);
}

int tgt_jobs_init(tgt_t *t)
{
	tgt_jobs_t *js = calloc(1, sizeof(*js));

	if (js == NULL)
		return -1;
	pthread_mutex_init(&js->lock, NULL);
	t->jobs = js;
	js->pending = json_object();
	if (js->pending == NULL)
		return -1;
	tgt_journal_load(t->cfg.state_dir, pending_add, js->pending);
	return 0;
}

void tgt_jobs_fini(tgt_t *t)
{
	tgt_jobs_t *js = t->jobs;

	if (js == NULL)
		return;
	atomic_store(&js->stopping, 1);
	pthread_mutex_lock(&js->lock);
	job_t *list = js->list;
	js->list = NULL;
	js->closed = 1;
	int resumer = js->resumer_started;
	js->resumer_started = 0;
	pthread_mutex_unlock(&js->lock);
	if (resumer)
		pthread_join(js->resumer, NULL);
	for (job_t *j = list; j != NULL; j = j->next)
		job_abort(j);
	while (list != NULL) {
		job_t *j = list;
		list = j->next;
		job_free(j); /* joins the run first */
	}
}

/* After tgt_jobs_fini and once no control request can reach the table: frees it. */
void tgt_jobs_free(tgt_t *t)
{
	if (t->jobs == NULL)
		return;
	pthread_mutex_destroy(&t->jobs->lock);
	json_decref(t->jobs->pending);
	free(t->jobs);
	t->jobs = NULL;
}

/* ---- resume after a restart ---- */

/*
 * Whether another target of the map holds job id as aborted: a DELETE made while this target was away (out of the
 * map) reached the others only, and the journal must not bring the job back.
 */
static int aborted_elsewhere(tgt_t *t, const char *id)
{
	ft_smap_t *smap = ft_smap_current();
	int yes = 0;

	for (int i = 0; smap != NULL && !yes && i < smap->n_targets; i++) {
		const ft_node_t *n = &smap->targets[i];
		char url[FT_URL_MAX + JOB_ID_MAX + 16], msg[256];
		json_t *resp = NULL;
		long status = 0;
		if (strcmp(n->id, t->id) == 0)
			continue;
		snprintf(url, sizeof(url), "%s/v1/jobs/%s", n->control_url, id);
		if (ft_client_json("GET", url, NULL, JOB_ASK_MS, &status, &resp, msg, sizeof(msg)) == 0 &&
		    status == 200) {
			const char *st = json_string_value(json_object_get(resp, "state"));
			yes = st != NULL && strcmp(st, "aborted") == 0;
		}
		json_decref(resp);
	}
	ft_smap_put(smap);
	return yes;
}

/*
 * A journaled dsort aborted while this target was away: the outputs its part published before it stopped are
 * removed, as the abort removed the other targets' (an aborted dsort leaves no output).
 */
static void dsort_drop_outputs(tgt_t *t, const json_t *msg)
{
	const char *kind = json_string_value(json_object_get(msg, "kind"));
	ft_ctl_resp_t resp = {0};
	job_t *j;

	if (kind == NULL || strcmp(kind, "dsort") != 0)
		return;
	j = job_parse(t, msg, &resp);
	if (j != NULL && j->dsort != NULL) {
		tgt_dsort_cleanup(j->dsort, t, j->smap);
		ft_info("job %s: dsort aborted while this target was away; its outputs on this target removed", j->id);
	} else {
		ft_warn("job %s: dsort aborted while this target was away; its outputs cannot be removed (%s)",
			json_string_value(json_object_get(msg, "id")),
			resp.json != NULL ? json_string_value(json_object_get(resp.json, "message")) : "out of memory");
	}
	json_decref(resp.json);
	if (j != NULL)
		job_free(j);
}

/* One journal found at start: the job again under its id, its objects done skipped and counted. */
static void resume_one(tgt_t *t, const json_t *msg, const json_t *done)
{
	ft_ctl_resp_t resp = {0};
	const char *id = json_string_value(json_object_get(msg, "id"));
	job_t *j = NULL;
	int rc = -1;

	if (id != NULL && aborted_elsewhere(t, id)) {
		pthread_mutex_lock(&t->jobs->lock);
		json_object_del(t->jobs->pending, id);
		pthread_mutex_unlock(&t->jobs->lock);
		dsort_drop_outputs(t, msg);
		tgt_journal_close(tgt_journal_reopen(t->cfg.state_dir, id), 1);
		ft_info("job %s: aborted while this target was away; not resumed, journal removed", id);
		return;
	}
	j = job_parse(t, msg, &resp);
	if (j != NULL) {
		j->done = json_deep_copy(done);
		j->journal = tgt_journal_reopen(t->cfg.state_dir, id);
	}
	pthread_mutex_lock(&t->jobs->lock);
	int dropped = json_object_get(t->jobs->pending, id) == NULL; /* aborted meanwhile */
	if (j != NULL && !dropped)
		rc = job_launch(j);
	json_object_del(t->jobs->pending, id); /* from now on the job answers, or nothing does */
	pthread_mutex_unlock(&t->jobs->lock);
	if (rc == 0) {
		ft_info("job %s (%s): resumed after a restart, %zu objects done before", id, j->kind_name,
			json_object_size(done));
		return;
	}
	if (!dropped)
		ft_warn("job %s: cannot be resumed (%s); its journal is removed", id,
			resp.json != NULL ? json_string_value(json_object_get(resp.json, "message")) : "jobs closed");
	json_decref(resp.json);
	if (j != NULL) {
		tgt_journal_close(j->journal, 1);
		j->journal = NULL;
		job_free(j);
	} else {
		tgt_journal_close(tgt_journal_reopen(t->cfg.state_dir, id), 1);
	}
}

/* Resumes the journals still pending, one at a time (a DELETE may drop one meanwhile). */
static void resume_pending(tgt_t *t)
{
	for (;;) {
		pthread_mutex_lock(&t->jobs->lock);
		void *it = json_object_iter(t->jobs->pending);
		json_t *p = it != NULL ? json_incref(json_object_iter_value(it)) : NULL;
		pthread_mutex_unlock(&t->jobs->lock);
		if (p == NULL || atomic_load(&t->jobs->stopping)) {
			json_decref(p);
			return;
		}
		resume_one(t, json_object_get(p, "msg"), json_object_get(p, "done"));
		json_decref(p);
	}
}

/* Waits for the first bucket metadata and map (from the join), then resumes the journaled jobs. */
static void *resume_main(void *arg)
{
	tgt_t *t = arg;

	for (int i = 0; i < JOB_RESUME_WAIT_S * 10 && !atomic_load(&t->jobs->stopping); i++) {
		ft_bmd_t *bmd = ft_bmd_current();
		ft_smap_t *smap = ft_smap_current();
		int ready = 0;
		for (int k = 0; bmd != NULL && bmd->version > 0 && smap != NULL && k < smap->n_targets; k++)
			ready |= strcmp(smap->targets[k].id, t->id) == 0; /* joined */
		ft_bmd_put(bmd);
		ft_smap_put(smap);
		if (ready) {
			resume_pending(t);
			return NULL;
		}
		usleep(100 * 1000);
	}
	return NULL;
}

int tgt_jobs_resume(tgt_t *t)
{
	tgt_jobs_t *js = t->jobs;
	int rc = 0;

	pthread_mutex_lock(&js->lock);
	if (!js->closed && !js->resumer_started) {
		rc = pthread_create(&js->resumer, NULL, resume_main, t) == 0 ? 0 : -1;
		js->resumer_started = rc == 0;
	}
	pthread_mutex_unlock(&js->lock);
	return rc;
}

/* Whether id is usable as a job id (the proxy's /v1/jobs/<id> takes letters, digits and '-'). */
static int id_ok(const char *id)
{
	size_t n = id != NULL ? strlen(id) : 0;

	if (n == 0 || n >= JOB_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		      (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
			return 0;
	return 1;
}

/*
 * provider/bucket: one bucket (it must be in the current BMD); bucket NULL: every bucket of the
 * BMD, or every bucket of provider when provider is not NULL. Items are collected on the job's
 * first thread, so this returns at once.
 */
int tgt_jobs_start_local(tgt_t *t, const char *id, const char *kind, tgt_job_fn fn, const char *provider,
			 const char *bucket, const json_t *members)
{
	job_t *j = NULL;
	int rc = -1;

	if (!id_ok(id) || kind == NULL || strlen(kind) >= JOB_KIND_MAX || fn == NULL ||
	    (provider != NULL && strlen(provider) >= TGT_PROVIDER_MAX) || (bucket != NULL && provider == NULL) ||
	    (bucket != NULL && strlen(bucket) > FT_BUCKET_NAME_MAX)) {
		ft_warn("job %s (%s): bad arguments for a local job", id ? id : "(null)", kind ? kind : "(null)");
		return -1;
	}
	j = job_new(t, id, JOB_LOCAL, kind, provider != NULL ? provider : "", bucket != NULL ? bucket : "");
	if (j == NULL)
		goto out;
	j->fn = fn;
	j->src = SRC_LOCAL;
	j->bidx = -1;
	if (json_is_array(members))
		j->members = json_incref((json_t *)members);
	j->bmd = ft_bmd_current();
	j->smap = ft_smap_current();
	if (j->bmd == NULL || (bucket != NULL && ft_bmd_find(j->bmd, provider, bucket) == NULL)) {
		ft_warn("job %s (%s): bucket %s/%s is not in the BMD", id, kind, provider ? provider : "",
			bucket ? bucket : "");
		goto out;
	}
	pthread_mutex_lock(&t->jobs->lock);
	rc = job_launch(j);
	pthread_mutex_unlock(&t->jobs->lock);
	if (rc == 0) {
		ft_info("job %s: %s over the local objects of %s%s%s", id, kind, provider ? provider : "every provider",
			bucket ? "/" : "", bucket ? bucket : "");
		j = NULL;
	} else {
		ft_warn("job %s (%s): %s", id, kind,
			rc == -EEXIST   ? "the id exists"
			: rc == -ENOMEM ? "out of memory"
					: "jobs are closed (shutting down)");
		rc = -1;
	}
out:
	if (j != NULL)
		job_free(j);
	return rc;
}
