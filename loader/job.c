/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader job: picks each worker's next request (GET/PUT mix, epochs, limits) and decides when the run stops. */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "loader.h"

uint64_t ld_rand(uint64_t *state)
{
	/* xorshift64*: fast, good enough for picks and sizes; state must not be 0 */
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static bool epoch_mode(const ld_opts_t *o)
{
	return o->epochs > 0 || o->uniquegets;
}

/* This loader's share of the objects when -loadernum > 1: numeric -loaderid modulo, else its hash. */
static uint64_t share_of(const ld_opts_t *o)
{
	char *end;
	unsigned long long id = strtoull(o->loaderid, &end, 10);

	if (*end != '\0')
		id = XXH64(o->loaderid, strlen(o->loaderid), 0);
	return id % (uint64_t)o->loadernum;
}

static bool mine(const ld_opts_t *o, const ld_obj_t *obj, uint64_t share)
{
	char name[LD_NAME_MAX + 1];
	size_t n;

	if (o->loadernum <= 1)
		return true;
	n = ld_obj_name(obj, name, sizeof(name));
	return XXH64(name, n, 0) % (uint64_t)o->loadernum == share;
}

/* Builds a new random permutation of this loader's share of every object now known (caller holds mu). */
static int reshuffle(ld_job_t *j, uint64_t *rng)
{
	uint64_t n = ld_objs_count(), k = 0, share = share_of(j->o);
	uint64_t *p = realloc(j->perm, (n ? n : 1) * sizeof(uint64_t));

	if (p == NULL)
		return -1;
	j->perm = p;
	for (uint64_t i = 0; i < n; i++) {
		if (mine(j->o, ld_objs_at(i), share))
			p[k++] = i;
	}
	for (uint64_t i = k; i > 1; i--) { /* Fisher-Yates */
		uint64_t r = ld_rand(rng) % i, t = p[i - 1];
		p[i - 1] = p[r];
		p[r] = t;
	}
	j->perm_len = k;
	j->perm_pos = 0;
	return 0;
}

int ld_job_init(ld_job_t *j, const ld_opts_t *o, ld_job_kind_t kind, uint64_t seq_first)
{
	uint64_t rng = o->seed ^ 0x9E3779B97F4A7C15ull;

	memset(j, 0, sizeof(*j));
	j->o = o;
	j->kind = kind;
	j->seq_first = seq_first;
	atomic_init(&j->seq_next, seq_first);
	atomic_init(&j->stop, false);
	atomic_init(&j->abort, false);
	if (pthread_mutex_init(&j->mu, NULL) != 0)
		return -1;
	if (kind == LD_JOB_RUN && epoch_mode(o)) {
		if (reshuffle(j, &rng) != 0) {
			pthread_mutex_destroy(&j->mu);
			return -1;
		}
		j->gets_available = j->perm_len;
	} else {
		j->gets_available = ld_objs_count();
	}
	return 0;
}

void ld_job_destroy(ld_job_t *j)
{
	free(j->perm);
	j->perm = NULL;
	pthread_mutex_destroy(&j->mu);
}

void ld_job_stop(ld_job_t *j, const char *reason)
{
	pthread_mutex_lock(&j->mu);
	if (j->stop_reason == NULL)
		j->stop_reason = reason;
	pthread_mutex_unlock(&j->mu);
	atomic_store(&j->stop, true);
}

/*
 * The next objects in epoch order, up to max of them and none past the epoch's end, into objs:
 * returns their count; 0 when the last epoch is done (the job is then stopped); -1 when there is
 * nothing to read yet but PUTs may add something (the caller PUTs instead).
 */
static int next_in_epoch(ld_job_t *j, uint64_t *rng, const ld_obj_t **objs, size_t max)
{
	const char *why = NULL;
	int rc = 1;

	pthread_mutex_lock(&j->mu);
	if (j->perm_len == 0 && j->o->pctput > 0) {
		/* an empty start: look again for objects this run wrote meanwhile */
		if (reshuffle(j, rng) != 0)
			why = "out of memory";
		else if (j->perm_len == 0)
			rc = -1;
	} else if (j->perm_pos == j->perm_len) {
		j->epoch++;
		if (j->o->epochs > 0 && j->epoch >= j->o->epochs)
			why = "epochs done";
		else if (reshuffle(j, rng) != 0)
			why = "out of memory";
		else if (j->perm_len == 0)
			why = "no objects to GET";
	} else if (j->perm_len == 0) {
		why = "no objects to GET";
	}
	if (why == NULL && rc == 1) {
		size_t k = 0;
		while (k < max && j->perm_pos < j->perm_len)
			objs[k++] = ld_objs_at(j->perm[j->perm_pos++]);
		rc = (int)k;
	}
	pthread_mutex_unlock(&j->mu);
	if (why != NULL) {
		ld_job_stop(j, why);
		return 0;
	}
	return rc;
}

static bool next_put(ld_job_t *j, uint64_t *rng, ld_task_t *t)
{
	const ld_opts_t *o = j->o;
	uint64_t span = o->maxsize - o->minsize;

	if (o->maxputs > 0 && atomic_fetch_add(&j->puts_issued, 1) >= o->maxputs) {
		ld_job_stop(j, "maxputs reached");
		return false;
	}
	t->size = o->minsize + (span == 0 ? 0 : ld_rand(rng) % (span + 1));
	if (o->totalputsize > 0 && atomic_fetch_add(&j->put_bytes_issued, t->size) >= o->totalputsize) {
		ld_job_stop(j, "totalputsize reached");
		return false;
	}
	t->op = LD_PUT;
	/* -url-list: PUT to one of the listed URLs (e.g. nginx WebDAV); else a new generated name */
	t->obj = o->api == LD_API_URLS ? ld_objs_at(ld_rand(rng) % ld_objs_count()) : NULL;
	t->seq = atomic_fetch_add(&j->seq_next, 1);
	t->payload_off = ld_rand(rng) % j->payload_len;
	return true;
}

/* Whether the run is over: stopped, or (stopping it) past its deadline. */
static bool run_over(ld_job_t *j, int64_t now_ns)
{
	if (j->deadline_ns != 0 && now_ns >= j->deadline_ns)
		ld_job_stop(j, "duration reached");
	return atomic_load_explicit(&j->stop, memory_order_relaxed);
}

bool ld_job_next(ld_job_t *j, int64_t now_ns, uint64_t *rng, ld_task_t *t)
{
	const ld_opts_t *o = j->o;
	bool put;
	const ld_obj_t *obj;

	if (atomic_load_explicit(&j->stop, memory_order_relaxed))
		return false;
	if (j->kind == LD_JOB_CLEANUP) {
		uint64_t seq = j->seq_first + atomic_fetch_add(&j->del_next, 1);
		if (seq >= j->seq_end)
			return false;
		t->op = LD_DEL;
		t->seq = seq;
		t->obj = NULL;
		return true;
	}
	if (run_over(j, now_ns))
		return false;
	put = o->pctput == 100 || (o->pctput > 0 && (int)(ld_rand(rng) % 100) < o->pctput);
	if (put)
		return next_put(j, rng, t);
	if (epoch_mode(o)) {
		int rc = next_in_epoch(j, rng, &obj, 1);
		if (rc == 0)
			return false;
		if (rc < 0)
			return next_put(j, rng, t);
	} else {
		uint64_t n = ld_objs_count();
		if (n == 0) {
			if (o->pctput > 0)
				return next_put(j, rng, t); /* nothing to read yet: write first */
			ld_job_stop(j, "no objects to GET");
			return false;
		}
		obj = ld_objs_at(ld_rand(rng) % n);
	}
	t->op = LD_GET;
	t->obj = obj;
	return true;
}

size_t ld_job_next_gets(ld_job_t *j, int64_t now_ns, uint64_t *rng, const ld_obj_t **objs, size_t max)
{
	uint64_t n;

	if (j->kind != LD_JOB_RUN || max == 0 || run_over(j, now_ns))
		return 0;
	if (epoch_mode(j->o)) {
		int rc = next_in_epoch(j, rng, objs, max);
		return rc > 0 ? (size_t)rc : 0; /* -1 (wait for PUTs) needs -pctput, which batches exclude */
	}
	n = ld_objs_count();
	if (n == 0) {
		ld_job_stop(j, "no objects to GET");
		return 0;
	}
	for (size_t k = 0; k < max; k++)
		objs[k] = ld_objs_at(ld_rand(rng) % n);
	return max;
}
