/* SPDX-License-Identifier: Apache-2.0 */
/* Internal header of the target's one job runner (runner.c), used by jobs.c, rebalance and LRU. */
#ifndef TGT_XACT_RUNNER_H
#define TGT_XACT_RUNNER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "target.h"

#define TGT_RUN_SAMPLES 5
#define TGT_RUN_THREADS_MAX 8
#define TGT_RUN_ID_MAX 64
#define TGT_RUN_KIND_MAX 32

enum { TGT_RUN_RUNNING = 0, TGT_RUN_FINISHED, TGT_RUN_FAILED, TGT_RUN_ABORTED };

/* What a run counts: objects done, their bytes, errors with the first TGT_RUN_SAMPLES messages. */
typedef struct {
	pthread_mutex_t lock; /* the samples */
	atomic_llong objects, bytes, errors;
	atomic_llong skipped; /* items with nothing to do (counted in total only) */
	char samples[TGT_RUN_SAMPLES][256];
	int n_samples;
} tgt_run_stats_t;

/* Initializes s (zero counters); tgt_run_stats_reset zeroes a live one, tgt_run_stats_destroy releases it. */
void tgt_run_stats_init(tgt_run_stats_t *s);
void tgt_run_stats_reset(tgt_run_stats_t *s);
void tgt_run_stats_destroy(tgt_run_stats_t *s);
/* Counts an error and keeps "<what>: <msg>" as a sample while there is room. */
void tgt_run_stats_error(tgt_run_stats_t *s, const char *what, const char *msg);
/* The samples as a JSON array (new reference). */
json_t *tgt_run_stats_samples(tgt_run_stats_t *s);

typedef struct tgt_run tgt_run_t;

typedef struct {
	char *name;                /* owned by the run */
	const tgt_mountpath_t *mp; /* the mountpath it was found on; NULL: the one HRW picks */
	int bucket;                /* index in the owner's BMD */
} tgt_run_item_t;

typedef struct {
	const char *id, *kind;
	int threads; /* 1 .. TGT_RUN_THREADS_MAX; without a collector, no more than the items */
	/*
	 * Adds the items (tgt_run_add) on the run's first thread while the others already run what
	 * was added. 0 when complete, 1 when it stopped early on abort, -1 failed (the run ends
	 * "failed"). NULL: every item was added before the start.
	 */
	int (*collect)(tgt_run_t *r, void *arg);
	/* One item, as a tgt_job_fn: 0 done (*bytes counted), 1 nothing to do, -1 failed with err. */
	int (*step)(tgt_run_t *r, const tgt_run_item_t *it, void *arg, int64_t *bytes, char *err, size_t cap);
	/* Optional: the "<what>" of an item's error sample (default: the item's name). */
	void (*label)(const tgt_run_item_t *it, void *arg, char *buf, size_t cap);
	/* Instead of items: the whole run on its one thread (collect, step and threads unused). */
	void (*body)(tgt_run_t *r, void *arg);
	/*
	 * Optional: called once by the last thread to leave with the final state it is about to set
	 * (the run still reads running meanwhile): clean-up that must be over when the end shows.
	 */
	void (*ending)(tgt_run_t *r, int state, void *arg);
	/* Optional: called once by the last thread to leave, after the final state is set. */
	void (*done)(tgt_run_t *r, void *arg);
	void *arg;
	tgt_run_stats_t *stats; /* where counts go (the owner's, outliving the run); NULL: the run's own */
} tgt_run_conf_t;

/* A new run (not started; c is copied, strings too). NULL on allocation failure. */
tgt_run_t *tgt_run_new(const tgt_run_conf_t *c);
/* Appends an item (name copied); 0, or -1 on allocation failure. Safe from the collector while the run runs. */
int tgt_run_add(tgt_run_t *r, const char *name, const tgt_mountpath_t *mp, int bucket);
/*
 * Starts the run's threads and returns. 0, or -1 when none started (the run is then "failed").
 * After a start, tgt_run_wait must be called before tgt_run_free.
 */
int tgt_run_start(tgt_run_t *r);
/* Starts the run and waits for its end; when no thread starts, runs it on the calling thread. */
void tgt_run_run(tgt_run_t *r);
/* Joins the run's threads (idempotent). */
void tgt_run_wait(tgt_run_t *r);
/* Frees a run never started or waited for. */
void tgt_run_free(tgt_run_t *r);
/* Asks the run to stop: the threads stop before their next item, the collector before its next step. */
void tgt_run_abort(tgt_run_t *r);
int tgt_run_aborted(const tgt_run_t *r);
/* Counts an error of the run (collector or body). */
void tgt_run_error(tgt_run_t *r, const char *what, const char *msg);
tgt_run_stats_t *tgt_run_stats(tgt_run_t *r);
int tgt_run_state(const tgt_run_t *r);
/*
 * Counts done before the run (a job resumed after a restart): objects and bytes added to the
 * counters and objects to the total, left out of the rate. Before the start.
 */
void tgt_run_preset(tgt_run_t *r, int64_t objects, int64_t bytes);
/* A body's total (the run's "total": what it has to do; items count themselves). */
void tgt_run_body_total(tgt_run_t *r, int64_t n);
/* A body's failure: the run ends "failed" (tell why with tgt_run_error). */
void tgt_run_body_fail(tgt_run_t *r);
/* A body that stopped early on abort: the run ends "aborted". */
void tgt_run_body_cut(tgt_run_t *r);
/*
 * The run's status document (new reference): id, node, kind, state, counts (objects, bytes,
 * errors, skipped), total, start, end, error_samples, and the progress: rate (bytes/s),
 * objects_rate (objects/s) over this run's time, eta_s (seconds left at that pace; -1 unknown:
 * nothing done yet, or still collecting).
 */
json_t *tgt_run_json(tgt_run_t *r, const char *node);

/*
 * A service: one background thread calling fn(arg) when kicked, and every interval_ms when not
 * 0. Kicks while fn runs make it run once more. The struct is the caller's, zeroed before start.
 */
typedef struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	atomic_int running; /* read without the lock by kicks */
	int stop, kicked;
	int64_t interval_ms;
	void (*fn)(void *arg);
	void *arg;
} tgt_service_t;

/* 0, or -1 when the thread cannot start. */
int tgt_service_start(tgt_service_t *s, int64_t interval_ms, void (*fn)(void *arg), void *arg);
void tgt_service_kick(tgt_service_t *s);
/* Stops the thread after the current fn returns and joins it; idempotent, tolerates "never started". */
void tgt_service_stop(tgt_service_t *s);

/* ---- walk.c: the object walker ---- */
/* Called for each published object found: name[0..len) of bmd->buckets[bucket] on mp. Non-zero stops the walk. */
typedef int (*tgt_walk_fn)(void *arg, const tgt_mountpath_t *mp, int bucket, const char *name, size_t len);
/*
 * Walks "<mp>/<provider>/<bucket>/" of every bucket of bmd (never .work, .copies or .ec), depth
 * first, on the calling thread. 0 when complete, 1 when fn stopped it.
 */
int tgt_walk_objects(const tgt_mountpath_t *mp, const ft_bmd_t *bmd, tgt_walk_fn fn, void *arg);
/* The same over "<mp>/.ec/<provider>/<bucket>/": the EC slices, replicas and mirror copies held for other owners. */
int tgt_walk_held(const tgt_mountpath_t *mp, const ft_bmd_t *bmd, tgt_walk_fn fn, void *arg);

#endif
