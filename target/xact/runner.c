/* SPDX-License-Identifier: Apache-2.0 */
/* The target's one job runner: runs (items on threads of their own, a collector) and services (background loops). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/metrics.h"
#include "http/util.h"
#include "target.h"
#include "xact/runner.h"

/*
 * DESIGN
 * A run is a list of items run on conf.threads threads of its own: jobs.c's jobs (the proxy's and
 * the target's own, such as a rebalance after a map change), and the rebalance/resilver walks.
 * With a collector, the first thread to start collects while the others already run what was
 * collected (they wait on the run's condition variable when they catch up). Counters are atomics
 * in a tgt_run_stats_t (the run's own, or its owner's) so that a status reads them without
 * stopping the workers. An abort sets a flag: workers stop before their next item, the collector
 * checks tgt_run_aborted between its steps. The last worker to leave sets the final state and end.
 * Aborted means work was left (an abort after the last item changes nothing).
 * A service is one background thread woken by kicks or an interval (LRU sweeps, the rebalance
 * manager, which runs its walks as runs).
 *
 * LOCKING
 * mu guards items, next_item, collected and live_threads; a stats lock guards only its samples.
 * Nothing here calls out with mu held.
 */

struct tgt_run {
	tgt_run_conf_t conf;
	char id[TGT_RUN_ID_MAX];
	char kind[TGT_RUN_KIND_MAX];
	unsigned metric_kind; /* the kind's value of the job metrics' "kind" label */
	tgt_run_stats_t own;  /* conf.stats when the owner gave none */
	atomic_int collector; /* taken by the first thread to start */
	pthread_mutex_t mu;
	pthread_cond_t more;   /* items added, collection done, or abort */
	tgt_run_item_t *items; /* guarded by mu */
	size_t n_items, cap_items, next_item;
	int collected;    /* guarded by mu: no more items will come */
	int cut;          /* the collector stopped early on abort */
	int failed;       /* the collection failed: the run ends "failed" */
	int live_threads; /* guarded by mu */
	atomic_int abort;
	atomic_int state;
	atomic_llong start_ns, end_ns;
	pthread_t threads[TGT_RUN_THREADS_MAX];
	int n_threads;
	int joined;
	int64_t preset_objects, preset_bytes; /* done before a restart: in the counts, not in the rate */
	atomic_llong body_total;              /* a body's own count of what it has to do (in total) */
};

/* ---- stats ---- */

void tgt_run_stats_init(tgt_run_stats_t *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
}

void tgt_run_stats_reset(tgt_run_stats_t *s)
{
	pthread_mutex_lock(&s->lock);
	s->n_samples = 0;
	atomic_store(&s->objects, 0);
	atomic_store(&s->bytes, 0);
	atomic_store(&s->errors, 0);
	atomic_store(&s->skipped, 0);
	pthread_mutex_unlock(&s->lock);
}

void tgt_run_stats_destroy(tgt_run_stats_t *s)
{
	pthread_mutex_destroy(&s->lock);
}

void tgt_run_stats_error(tgt_run_stats_t *s, const char *what, const char *msg)
{
	atomic_fetch_add(&s->errors, 1);
	pthread_mutex_lock(&s->lock);
	if (s->n_samples < TGT_RUN_SAMPLES)
		snprintf(s->samples[s->n_samples++], sizeof(s->samples[0]), "%s: %s", what, msg);
	pthread_mutex_unlock(&s->lock);
}

json_t *tgt_run_stats_samples(tgt_run_stats_t *s)
{
	json_t *a = json_array();

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n_samples; i++)
		json_array_append_new(a, json_string(s->samples[i]));
	pthread_mutex_unlock(&s->lock);
	return a;
}

/* ---- runs ---- */

tgt_run_t *tgt_run_new(const tgt_run_conf_t *c)
{
	tgt_run_t *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->conf = *c;
	snprintf(r->id, sizeof(r->id), "%s", c->id ? c->id : "");
	snprintf(r->kind, sizeof(r->kind), "%s", c->kind ? c->kind : "");
	r->conf.id = r->id;
	r->conf.kind = r->kind;
	r->metric_kind = ft_metric_label_index(FT_M_JOB_OBJECTS, r->kind);
	if (r->conf.threads < 1)
		r->conf.threads = 1;
	if (r->conf.threads > TGT_RUN_THREADS_MAX)
		r->conf.threads = TGT_RUN_THREADS_MAX;
	tgt_run_stats_init(&r->own);
	if (!r->conf.stats)
		r->conf.stats = &r->own;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->more, NULL);
	return r;
}

int tgt_run_add(tgt_run_t *r, const char *name, const tgt_mountpath_t *mp, int bucket)
{
	char *copy = strdup(name);
	int rc = -1;

	if (!copy)
		return -1;
	pthread_mutex_lock(&r->mu);
	if (r->n_items == r->cap_items) {
		size_t cap = r->cap_items ? r->cap_items * 2 : 64;
		tgt_run_item_t *v = realloc(r->items, cap * sizeof(*v));
		if (!v)
			goto out;
		r->items = v;
		r->cap_items = cap;
	}
	r->items[r->n_items++] = (tgt_run_item_t){.name = copy, .mp = mp, .bucket = bucket};
	copy = NULL;
	rc = 0;
	pthread_cond_broadcast(&r->more);
out:
	pthread_mutex_unlock(&r->mu);
	free(copy);
	return rc;
}

void tgt_run_error(tgt_run_t *r, const char *what, const char *msg)
{
	tgt_run_stats_error(r->conf.stats, what, msg);
	ft_metric_add(FT_M_JOB_ERRORS, r->metric_kind, 0, 1);
	ft_warn("%s %s: %s: %s", r->kind, r->id, what, msg);
}

/* Takes the next item into *it; 0 when there is none left (or the run was aborted). Waits for the collector. */
static int claim(tgt_run_t *r, tgt_run_item_t *it)
{
	int got = 0;

	pthread_mutex_lock(&r->mu);
	while (!atomic_load(&r->abort) && r->next_item >= r->n_items && !r->collected)
		pthread_cond_wait(&r->more, &r->mu);
	if (!atomic_load(&r->abort) && r->next_item < r->n_items) {
		*it = r->items[r->next_item++]; /* the name stays owned by the run until tgt_run_free */
		got = 1;
	}
	pthread_mutex_unlock(&r->mu);
	return got;
}

static void run_one(tgt_run_t *r, const tgt_run_item_t *it)
{
	int64_t bytes = 0;
	char err[400] = "", what[FT_BUCKET_NAME_MAX + FT_OBJ_NAME_MAX + 8];
	int rc = r->conf.step(r, it, r->conf.arg, &bytes, err, sizeof(err));

	if (rc > 0) {
		atomic_fetch_add(&r->conf.stats->skipped, 1); /* nothing to do */
		return;
	}
	if (rc < 0) {
		if (r->conf.label)
			r->conf.label(it, r->conf.arg, what, sizeof(what));
		else
			snprintf(what, sizeof(what), "%s", it->name);
		tgt_run_error(r, what, err[0] ? err : "failed");
		return;
	}
	atomic_fetch_add(&r->conf.stats->objects, 1);
	atomic_fetch_add(&r->conf.stats->bytes, bytes);
	ft_metric_add(FT_M_JOB_OBJECTS, r->metric_kind, 0, 1);
	ft_metric_add(FT_M_JOB_BYTES, r->metric_kind, 0, bytes > 0 ? (uint64_t)bytes : 0);
}

static void leave(tgt_run_t *r)
{
	pthread_mutex_lock(&r->mu);
	int last = --r->live_threads == 0;
	int left = r->next_item < r->n_items || r->cut, failed = r->failed;
	pthread_mutex_unlock(&r->mu);
	if (!last)
		return;
	int st = failed ? TGT_RUN_FAILED : atomic_load(&r->abort) && left ? TGT_RUN_ABORTED : TGT_RUN_FINISHED;
	if (r->conf.ending)
		r->conf.ending(r, st, r->conf.arg);
	atomic_store(&r->end_ns, ft_now_ns());
	atomic_store(&r->state, st);
	ft_metric_add(FT_M_JOBS_RUNNING, r->metric_kind, 0, (uint64_t)-1);
	if (r->conf.done)
		r->conf.done(r, r->conf.arg);
}

static void *run_main(void *arg)
{
	tgt_run_t *r = arg;
	tgt_run_item_t it;

	if (r->conf.body) {
		r->conf.body(r, r->conf.arg);
		leave(r);
		return NULL;
	}
	if (r->conf.collect && atomic_exchange(&r->collector, 1) == 0) {
		int rc = r->conf.collect(r, r->conf.arg);
		pthread_mutex_lock(&r->mu);
		r->cut = rc == 1;
		r->failed = rc < 0;
		r->collected = 1;
		pthread_cond_broadcast(&r->more);
		pthread_mutex_unlock(&r->mu);
	}
	while (claim(r, &it))
		run_one(r, &it);
	leave(r);
	return NULL;
}

int tgt_run_start(tgt_run_t *r)
{
	int want = r->conf.body ? 1 : r->conf.threads;

	atomic_store(&r->start_ns, ft_now_ns());
	pthread_mutex_lock(&r->mu);
	if (!r->conf.collect && !r->conf.body) { /* every item is known: no more threads than items */
		r->collected = 1;
		if (r->n_items < (size_t)want)
			want = r->n_items > 0 ? (int)r->n_items : 1;
	}
	r->live_threads = 1; /* the starter's, until every thread is started: none can be last before */
	pthread_mutex_unlock(&r->mu);
	ft_metric_add(FT_M_JOBS_RUNNING, r->metric_kind, 0, 1); /* leave() of the last thread takes it back */
	for (int i = 0; i < want; i++) {
		pthread_mutex_lock(&r->mu);
		r->live_threads++;
		pthread_mutex_unlock(&r->mu);
		if (pthread_create(&r->threads[i], NULL, run_main, r) != 0) {
			pthread_mutex_lock(&r->mu);
			r->live_threads--;
			pthread_mutex_unlock(&r->mu);
			break;
		}
		r->n_threads++;
	}
	if (r->n_threads == 0) { /* nothing started: it failed at once */
		pthread_mutex_lock(&r->mu);
		r->live_threads = 0;
		pthread_mutex_unlock(&r->mu);
		atomic_store(&r->state, TGT_RUN_FAILED);
		atomic_store(&r->end_ns, ft_now_ns());
		ft_metric_add(FT_M_JOBS_RUNNING, r->metric_kind, 0, (uint64_t)-1);
		return -1;
	}
	leave(r); /* the starter's share: the last one out sets the final state */
	return 0;
}

void tgt_run_run(tgt_run_t *r)
{
	if (tgt_run_start(r) == 0) {
		tgt_run_wait(r);
		return;
	}
	atomic_store(&r->state, TGT_RUN_RUNNING);
	ft_metric_add(FT_M_JOBS_RUNNING, r->metric_kind, 0, 1);
	pthread_mutex_lock(&r->mu);
	r->live_threads = 1;
	pthread_mutex_unlock(&r->mu);
	run_main(r);
}

void tgt_run_wait(tgt_run_t *r)
{
	if (r->joined)
		return;
	for (int i = 0; i < r->n_threads; i++)
		pthread_join(r->threads[i], NULL);
	r->joined = 1;
}

void tgt_run_free(tgt_run_t *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_items; i++)
		free(r->items[i].name);
	free(r->items);
	tgt_run_stats_destroy(&r->own);
	pthread_cond_destroy(&r->more);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void tgt_run_abort(tgt_run_t *r)
{
	atomic_store(&r->abort, 1);
	pthread_mutex_lock(&r->mu);
	pthread_cond_broadcast(&r->more);
	pthread_mutex_unlock(&r->mu);
}

int tgt_run_aborted(const tgt_run_t *r)
{
	return atomic_load(&r->abort);
}

tgt_run_stats_t *tgt_run_stats(tgt_run_t *r)
{
	return r->conf.stats;
}

int tgt_run_state(const tgt_run_t *r)
{
	return atomic_load(&r->state);
}

void tgt_run_preset(tgt_run_t *r, int64_t objects, int64_t bytes)
{
	r->preset_objects = objects;
	r->preset_bytes = bytes;
	atomic_fetch_add(&r->conf.stats->objects, objects);
	atomic_fetch_add(&r->conf.stats->bytes, bytes);
}

void tgt_run_body_total(tgt_run_t *r, int64_t n)
{
	atomic_store(&r->body_total, n);
}

void tgt_run_body_fail(tgt_run_t *r)
{
	pthread_mutex_lock(&r->mu);
	r->failed = 1;
	pthread_mutex_unlock(&r->mu);
}

void tgt_run_body_cut(tgt_run_t *r)
{
	pthread_mutex_lock(&r->mu);
	r->cut = 1;
	pthread_mutex_unlock(&r->mu);
}

/* rate, objects_rate and eta_s of doc, over this run's time (the preset counts left out). */
static void progress_json(tgt_run_t *r, json_t *doc, size_t total, int collecting)
{
	tgt_run_stats_t *s = r->conf.stats;
	int64_t start = atomic_load(&r->start_ns), end = atomic_load(&r->end_ns);
	int64_t now = end > 0 ? end : ft_now_ns();
	double secs = start > 0 && now > start ? (double)(now - start) / 1e9 : 0;
	int64_t objs = atomic_load(&s->objects) - r->preset_objects, bytes = atomic_load(&s->bytes) - r->preset_bytes;
	int64_t seen = objs + atomic_load(&s->errors) + atomic_load(&s->skipped);
	double rate = secs > 0 ? (double)bytes / secs : 0, orate = secs > 0 ? (double)seen / secs : 0;
	int64_t left = (int64_t)total - seen - r->preset_objects, eta = -1;

	if (atomic_load(&r->state) != TGT_RUN_RUNNING)
		eta = 0;
	else if (!collecting && orate > 0)
		eta = (int64_t)((double)(left > 0 ? left : 0) / orate + 0.5);
	json_object_set_new(doc, "rate", json_integer((json_int_t)rate));
	json_object_set_new(doc, "objects_rate", json_real(orate));
	json_object_set_new(doc, "eta_s", json_integer(eta));
}

json_t *tgt_run_json(tgt_run_t *r, const char *node)
{
	static const char *const names[] = {[TGT_RUN_RUNNING] = "running",
					    [TGT_RUN_FINISHED] = "finished",
					    [TGT_RUN_FAILED] = "failed",
					    [TGT_RUN_ABORTED] = "aborted"};
	tgt_run_stats_t *s = r->conf.stats;

	pthread_mutex_lock(&r->mu);
	size_t total = r->n_items + (size_t)r->preset_objects + (size_t)atomic_load(&r->body_total);
	int collecting = r->conf.collect && !r->collected;
	pthread_mutex_unlock(&r->mu);
	json_t *doc =
		json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "id", r->id, "node", node,
			  "kind", r->kind, "state", names[atomic_load(&r->state)], "objects",
			  (json_int_t)atomic_load(&s->objects), "bytes", (json_int_t)atomic_load(&s->bytes), "errors",
			  (json_int_t)atomic_load(&s->errors), "skipped", (json_int_t)atomic_load(&s->skipped), "total",
			  (json_int_t)total, "start", (json_int_t)atomic_load(&r->start_ns), "end",
			  (json_int_t)atomic_load(&r->end_ns), "error_samples", tgt_run_stats_samples(s));
	if (doc && collecting)
		json_object_set_new(doc, "collecting", json_true());
	if (doc)
		progress_json(r, doc, total, collecting);
	return doc;
}

/* ---- services ---- */

static void *service_main(void *arg)
{
	tgt_service_t *s = arg;
	struct timespec deadline;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		if (s->interval_ms > 0) {
			clock_gettime(CLOCK_REALTIME, &deadline);
			int64_t ns = deadline.tv_nsec + s->interval_ms * 1000000;
			deadline.tv_sec += ns / 1000000000;
			deadline.tv_nsec = ns % 1000000000;
		}
		while (!s->stop && !s->kicked) {
			if (s->interval_ms <= 0)
				pthread_cond_wait(&s->cond, &s->lock);
			else if (pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == ETIMEDOUT)
				break;
		}
		if (s->stop)
			break;
		s->kicked = 0;
		pthread_mutex_unlock(&s->lock);
		s->fn(s->arg);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int tgt_service_start(tgt_service_t *s, int64_t interval_ms, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->stop = 0;
	s->kicked = 0;
	s->interval_ms = interval_ms;
	s->fn = fn;
	s->arg = arg;
	int ok = pthread_create(&s->thread, NULL, service_main, s) == 0;
	atomic_store(&s->running, ok);
	return ok ? 0 : -1;
}

void tgt_service_kick(tgt_service_t *s)
{
	if (!atomic_load(&s->running))
		return;
	pthread_mutex_lock(&s->lock);
	s->kicked = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void tgt_service_stop(tgt_service_t *s)
{
	if (!atomic_load(&s->running))
		return;
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	atomic_store(&s->running, 0); /* lock and cond stay usable: a late kick finds the service stopped */
}
