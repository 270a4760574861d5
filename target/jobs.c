/* Target side of cluster jobs (prefetch, evict): per-job worker threads over the objects this target owns, status, abort. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bmd.h"
#include "hrw.h"
#include "httputil.h"
#include "log.h"
#include "smap.h"
#include "target.h"

/*
 * DESIGN
 * The proxy POSTs a job to every target's control port with the expanded object names. Each
 * target keeps only the names it owns (HRW in the Smap current at start) and runs them on
 * JOB_THREADS threads of its own, which take the next index from an atomic counter. Counters are
 * atomics so that GET /v1/jobs/<id> reads them without a lock. DELETE sets the abort flag;
 * workers stop before their next object. The last worker to leave sets the final state and end.
 * Jobs stay in the table (for status) until the daemon stops; tgt_jobs_fini aborts and joins all.
 * A job is only read under jobs_lock by the control handlers, so fini can free it safely.
 */

#define JOB_THREADS 4
#define JOB_SAMPLES 5
#define JOB_ID_MAX 64

enum { JOB_PREFETCH = 0, JOB_EVICT, JOB_EVICT_BUCKET };
enum { ST_RUNNING = 0, ST_FINISHED, ST_FAILED, ST_ABORTED };
static const char *const kind_names[] = { [JOB_PREFETCH] = "prefetch", [JOB_EVICT] = "evict",
					  [JOB_EVICT_BUCKET] = "evict-bucket" };
static const char *const state_names[] = { [ST_RUNNING] = "running", [ST_FINISHED] = "finished",
					   [ST_FAILED] = "failed", [ST_ABORTED] = "aborted" };

typedef struct job {
	struct job *next;
	tgt_t *t;
	char id[JOB_ID_MAX];
	int kind;
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	int64_t bucket_created;
	ft_cksum_type_t cksum;
	char **names; /* owned: the names this target owns */
	int n_names;
	atomic_int next_index;
	atomic_int abort;
	atomic_llong objects, bytes, errors;
	atomic_int state;
	atomic_llong start_ns, end_ns;
	int live_threads;           /* guarded by jobs_lock */
	pthread_t threads[JOB_THREADS];
	int n_threads;
	char samples[JOB_SAMPLES][256]; /* guarded by jobs_lock */
	int n_samples;
} job_t;

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static job_t *jobs; /* guarded by jobs_lock */
static int jobs_closed; /* guarded by jobs_lock: set by tgt_jobs_fini, refuses new jobs */

static void job_free(job_t *j)
{
	for (int i = 0; i < j->n_names; i++)
		free(j->names[i]);
	free(j->names);
	free(j);
}

static void job_error(job_t *j, const char *name, const char *msg)
{
	atomic_fetch_add(&j->errors, 1);
	pthread_mutex_lock(&jobs_lock);
	if (j->n_samples < JOB_SAMPLES)
		snprintf(j->samples[j->n_samples++], sizeof(j->samples[0]), "%s: %s", name, msg);
	pthread_mutex_unlock(&jobs_lock);
	ft_warn("job %s: %s: %s", j->id, name, msg);
}

/* Fills o for name of j's bucket (names were validated at submit). */
static void job_obj(job_t *j, const char *name, tgt_obj_t *o)
{
	memset(o, 0, sizeof(*o));
	o->t = j->t;
	snprintf(o->provider, sizeof(o->provider), "%s", j->provider);
	snprintf(o->bucket, sizeof(o->bucket), "%s", j->bucket);
	o->bucket_created = j->bucket_created;
	o->cksum = j->cksum;
	o->obj = name;
	o->obj_len = strlen(name);
	o->mp = tgt_mountpath_pick(j->t, o->provider, o->bucket, name, o->obj_len);
	tgt_rel_path(o->rel, sizeof(o->rel), o->provider, o->bucket, name);
}

/* Unlinks the cached copy of o under its stripe lock; 1 removed (*size set), 0 not cached, -errno. */
static int evict_one(tgt_obj_t *o, int64_t *size)
{
	tgt_t *t = o->t;
	uint64_t h = ft_hrw_name_hash(o->provider, o->bucket, o->obj, o->obj_len);
	pthread_mutex_t *lock = &t->put_locks[h % TGT_PUT_LOCKS];
	struct stat st;
	int rc;

	pthread_mutex_lock(lock);
	if (fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
		rc = 0;
	} else if (unlinkat(o->mp->root_fd, o->rel, 0) != 0) {
		rc = -errno;
	} else {
		*size = st.st_size;
		tgt_parent_prune(o->mp, o->rel);
		rc = 1;
	}
	pthread_mutex_unlock(lock);
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
		ft_resp_error(r, 500, "object \"%s/%s\": cannot evict: %s", o->bucket, o->obj, strerror(-rc));
	else if (rc == 0)
		ft_resp_error(r, 404, "object \"%s/%s\" is not cached", o->bucket, o->obj);
	else
		ft_resp_bytes(r, 200, NULL, NULL, 0);
}

static void run_one(job_t *j, const char *name)
{
	tgt_obj_t o;
	int64_t bytes = 0;
	char err[300] = "";
	int rc;

	job_obj(j, name, &o);
	if (j->kind == JOB_PREFETCH) {
		rc = tgt_coldget_prefetch(&o, &bytes, err, sizeof(err));
		if (rc < 0) {
			job_error(j, name, err);
			return;
		}
	} else {
		rc = evict_one(&o, &bytes);
		if (rc < 0) {
			job_error(j, name, strerror(-rc));
			return;
		}
		if (rc == 0)
			return; /* not cached: nothing to count */
	}
	atomic_fetch_add(&j->objects, 1);
	atomic_fetch_add(&j->bytes, bytes);
}

static void job_leave(job_t *j)
{
	pthread_mutex_lock(&jobs_lock);
	int last = --j->live_threads == 0;
	pthread_mutex_unlock(&jobs_lock);
	if (!last)
		return;
	/* Aborted only when names were left unclaimed (an abort after the last one changes nothing). */
	int st = atomic_load(&j->abort) && atomic_load(&j->next_index) < j->n_names ? ST_ABORTED : ST_FINISHED;
	atomic_store(&j->end_ns, ft_now_ns());
	atomic_store(&j->state, st);
	ft_info("job %s (%s %s/%s): %s, %lld objects, %lld bytes, %lld errors", j->id, kind_names[j->kind],
		j->provider, j->bucket, state_names[st], (long long)atomic_load(&j->objects),
		(long long)atomic_load(&j->bytes), (long long)atomic_load(&j->errors));
}

static void *job_main(void *arg)
{
	job_t *j = arg;

	for (;;) {
		if (atomic_load(&j->abort))
			break;
		int i = atomic_fetch_add(&j->next_index, 1);
		if (i >= j->n_names)
			break;
		run_one(j, j->names[i]);
	}
	job_leave(j);
	return NULL;
}

/* evict-bucket: every cached copy of the bucket goes at once (the janitor deletes the trees). */
static void *evict_bucket_main(void *arg)
{
	job_t *j = arg;
	int n = tgt_bucket_retire(j->t, j->provider, j->bucket);

	tgt_janitor_kick(j->t);
	tgt_list_bump(j->t, j->provider, j->bucket);
	atomic_store(&j->objects, n > 0 ? n : 0); /* trees (one per mountpath) retired */
	job_leave(j);
	return NULL;
}

/* This target's job document (new reference); jobs_lock held (j stays alive, samples are stable). */
static json_t *job_json(job_t *j)
{
	json_t *samples = json_array();

	for (int i = 0; i < j->n_samples; i++)
		json_array_append_new(samples, json_string(j->samples[i]));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "id", j->id, "node",
			 j->t->id, "kind", kind_names[j->kind], "bucket", j->bucket, "state",
			 state_names[atomic_load(&j->state)], "objects", (json_int_t)atomic_load(&j->objects),
			 "bytes", (json_int_t)atomic_load(&j->bytes), "errors",
			 (json_int_t)atomic_load(&j->errors), "total", (json_int_t)j->n_names, "start",
			 (json_int_t)atomic_load(&j->start_ns), "end", (json_int_t)atomic_load(&j->end_ns),
			 "error_samples", samples);
}

static job_t *job_find(const char *id)
{
	for (job_t *j = jobs; j != NULL; j = j->next)
		if (strcmp(j->id, id) == 0)
			return j;
	return NULL;
}

/* Keeps the names of arr this target owns in smap; 0 or -1 (bad name: why set). */
static int job_names(job_t *j, const json_t *arr, const ft_smap_t *smap, const char **why)
{
	size_t i, n = json_array_size(arr);

	j->names = calloc(n > 0 ? n : 1, sizeof(*j->names));
	if (j->names == NULL) {
		*why = "out of memory";
		return -1;
	}
	for (i = 0; i < n; i++) {
		const char *name = json_string_value(json_array_get(arr, i));
		if (name == NULL || ft_name_check_object(name, strlen(name), why) != 0) {
			if (name == NULL)
				*why = "objnames must be strings";
			return -1;
		}
		const ft_node_t *owner = ft_smap_owner(smap, j->provider, j->bucket, name, strlen(name));
		if (owner == NULL || strcmp(owner->id, j->t->id) != 0)
			continue;
		if ((j->names[j->n_names] = strdup(name)) == NULL) {
			*why = "out of memory";
			return -1;
		}
		j->n_names++;
	}
	return 0;
}

/* Reads and checks the job message into a new job (not yet started); NULL after responding. */
static job_t *job_parse(tgt_t *t, const json_t *msg, ft_ctl_resp_t *resp)
{
	const char *id = json_string_value(json_object_get(msg, "id"));
	const char *kind = json_string_value(json_object_get(msg, "kind"));
	const char *provider = json_string_value(json_object_get(msg, "provider"));
	const char *bucket = json_string_value(json_object_get(msg, "bucket"));
	const json_t *names = json_object_get(msg, "objnames");
	const char *why = NULL;
	ft_smap_t *smap = ft_smap_current();
	ft_bmd_t *bmd = ft_bmd_current();
	job_t *j = NULL;

	if (id == NULL || kind == NULL || provider == NULL || bucket == NULL || strlen(id) >= JOB_ID_MAX ||
	    strlen(provider) >= TGT_PROVIDER_MAX || strlen(bucket) > FT_BUCKET_NAME_MAX) {
		ft_ctl_error(resp, 400, "job message needs string id, kind, provider and bucket");
		goto fail;
	}
	const ft_bucket_t *b = bmd != NULL ? ft_bmd_find(bmd, provider, bucket) : NULL;
	if (b == NULL || smap == NULL) {
		ft_ctl_error(resp, 404, "bucket %s/%s is not known to target %s", provider, bucket, t->id);
		goto fail;
	}
	j = calloc(1, sizeof(*j));
	if (j == NULL) {
		ft_ctl_error(resp, 500, "out of memory");
		goto fail;
	}
	j->t = t;
	snprintf(j->id, sizeof(j->id), "%s", id);
	snprintf(j->provider, sizeof(j->provider), "%s", provider);
	snprintf(j->bucket, sizeof(j->bucket), "%s", bucket);
	j->bucket_created = b->created_ns;
	j->cksum = b->cksum;
	if (strcmp(kind, "prefetch") == 0)
		j->kind = JOB_PREFETCH;
	else if (strcmp(kind, "evict") == 0)
		j->kind = JOB_EVICT;
	else if (strcmp(kind, "evict-bucket") == 0)
		j->kind = JOB_EVICT_BUCKET;
	else {
		ft_ctl_error(resp, 400, "unknown job kind \"%s\" (prefetch, evict, evict-bucket)", kind);
		goto fail;
	}
	if (strcmp(provider, "ais") == 0) {
		ft_ctl_error(resp, 400, "jobs work on remote buckets only");
		goto fail;
	}
	if (j->kind != JOB_EVICT_BUCKET && !json_is_array(names)) {
		ft_ctl_error(resp, 400, "job message needs an objnames array");
		goto fail;
	}
	if (j->kind != JOB_EVICT_BUCKET && job_names(j, names, smap, &why) != 0) {
		ft_ctl_error(resp, 400, "bad object name: %s", why);
		goto fail;
	}
	ft_smap_put(smap);
	ft_bmd_put(bmd);
	return j;
fail:
	if (j != NULL)
		job_free(j);
	ft_smap_put(smap);
	ft_bmd_put(bmd);
	return NULL;
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
	pthread_mutex_lock(&jobs_lock);
	if (jobs_closed) {
		pthread_mutex_unlock(&jobs_lock);
		ft_ctl_error(resp, 503, "target %s is shutting down", t->id);
		job_free(j);
		goto out;
	}
	if (job_find(j->id) != NULL) {
		pthread_mutex_unlock(&jobs_lock);
		ft_ctl_error(resp, 409, "job %s exists", j->id);
		job_free(j);
		goto out;
	}
	atomic_store(&j->start_ns, ft_now_ns());
	int want = j->kind == JOB_EVICT_BUCKET ? 1 : JOB_THREADS;
	if (j->kind != JOB_EVICT_BUCKET && j->n_names < want)
		want = j->n_names > 0 ? j->n_names : 1;
	j->live_threads = want;
	for (int i = 0; i < want; i++) {
		void *(*fn)(void *) = j->kind == JOB_EVICT_BUCKET ? evict_bucket_main : job_main;
		if (pthread_create(&j->threads[i], NULL, fn, j) != 0) {
			j->live_threads -= want - i; /* the ones not started never leave */
			break;
		}
		j->n_threads++;
	}
	j->next = jobs;
	jobs = j;
	if (j->n_threads == 0) { /* nothing started: it failed at once */
		atomic_store(&j->state, ST_FAILED);
		atomic_store(&j->end_ns, ft_now_ns());
	}
	resp->status = 200;
	resp->json = job_json(j);
	pthread_mutex_unlock(&jobs_lock);
out:
	json_decref(msg);
}

/* GET /v1/jobs, GET|DELETE /v1/jobs/<id> on the control port. */
void tgt_jobs_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *id = req->path + strlen("/v1/jobs");
	int post = strcmp(req->method, "POST") == 0, get = strcmp(req->method, "GET") == 0,
	    del = strcmp(req->method, "DELETE") == 0;

	if (*id == '/')
		id++;
	if (*id == '\0') {
		if (post) {
			job_submit(t, req, resp);
		} else if (get) {
			json_t *list = json_array();
			pthread_mutex_lock(&jobs_lock);
			for (job_t *j = jobs; j != NULL; j = j->next)
				json_array_append_new(list, job_json(j));
			pthread_mutex_unlock(&jobs_lock);
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
	pthread_mutex_lock(&jobs_lock);
	job_t *j = job_find(id);
	if (j != NULL) {
		if (del)
			atomic_store(&j->abort, 1);
		resp->status = 200;
		resp->json = job_json(j);
	}
	pthread_mutex_unlock(&jobs_lock);
	if (j == NULL)
		ft_ctl_error(resp, 404, "no job %s on target %s", id, t->id);
}

void tgt_jobs_fini(tgt_t *t)
{
	(void)t;
	pthread_mutex_lock(&jobs_lock);
	job_t *list = jobs;
	jobs = NULL;
	jobs_closed = 1;
	pthread_mutex_unlock(&jobs_lock);
	for (job_t *j = list; j != NULL; j = j->next)
		atomic_store(&j->abort, 1);
	while (list != NULL) {
		job_t *j = list;
		list = j->next;
		for (int i = 0; i < j->n_threads; i++)
			pthread_join(j->threads[i], NULL);
		job_free(j);
	}
}

int tgt_jobs_start_local(tgt_t *t, const char *id, const char *kind, tgt_job_fn fn, const char *provider,
			 const char *bucket)
{
	(void)t;
	(void)fn;
	(void)provider;
	ft_warn("job %s (%s of %s): jobs over local objects are not built yet", id, kind, bucket ? bucket : "every bucket");
	return -1;
}
