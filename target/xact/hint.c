/* SPDX-License-Identifier: Apache-2.0 */
/* Epoch order hints on a target: the hinted order of the names it owns per bucket and job, the cursor, expiry. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/names.h"
#include "cluster/hrw.h"
#include "http/util.h"
#include "xact/hint.h"

/*
 * DESIGN
 * A hint is one job's order of one epoch over one bucket, cut down by the proxy to the names this
 * target owns: names[0..n) in reading order, each name's hash (ft_hrw_name_hash, what a GET has as
 * o->hash), an open-addressing index hash -> place, and one "read" bit per place. Memory is counted
 * exactly (tgt_hint_cost, at most TGT_HINT_BYTES_PER_NAME bytes plus the name per name) against
 * hint_max_bytes for all hints together; past it an install is refused (413).
 * The cursor follows the GETs the target receives, not the list: a read sets its place's bit; head
 * is the first place not yet decided. A place is decided when read, or skipped when a read at
 * least TGT_HINT_REORDER places later was seen (parallel readers reorder within that window, a
 * sampler may leave names out, a name may be unknown). A skipped name read late is still counted.
 * The next use of a name is its distance from head when not decided yet, else none. Several live
 * hints (other buckets, other jobs on one bucket) are merged by that distance in names, each hint
 * counted on its own cursor: every job gets the same standing whatever its speed or size.
 * A hint lives until its ttl_s runs out or another epoch of the same job replaces it.
 * LOCKING: one mutex over the store (the hints and their cursors), held for lookups only, never
 * across I/O; a GET takes it once when a hint is live and not at all otherwise (n_live).
 */

#define HINT_TABLE_MIN 16
#define HINT_JSON_NEXT 4 /* names at the cursor shown in the status */

typedef struct {
	uint64_t id; /* serial, for the stagers' picks */
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char job[TGT_HINT_JOB_MAX];
	int64_t epoch;
	int64_t ttl_s;
	int64_t expires_ms;
	size_t n;
	uint64_t *hash;  /* [n] */
	uint32_t *off;   /* [n] name offsets in names */
	char *names;     /* NUL-terminated names, back to back */
	uint32_t *slots; /* [mask + 1]: place + 1, 0 empty */
	uint32_t mask;
	uint8_t *read;   /* [(n + 7) / 8] */
	uint64_t cost;   /* bytes held, as tgt_hint_cost */
	size_t head;     /* every place before it is decided (read or skipped) */
	size_t max_read; /* furthest place read */
	size_t consumed; /* places read */
	size_t late;     /* reads of places already counted as skipped */
	size_t rereads;  /* reads of a place read before */
	uint64_t hits, misses;
	int64_t first_read_ms;
	/* staging */
	size_t staged; /* next place to consider */
	int inflight;
	uint64_t prefetched, warmed, prefetch_failed, staged_bytes;
	int64_t avg_size; /* of the objects staged so far; 0 unknown */
} hint_t;

struct tgt_hints {
	pthread_mutex_t lock;
	pthread_cond_t wake; /* stagers wait on it */
	hint_t *h[TGT_HINT_ACTIVE_MAX];
	int n;
	uint64_t bytes; /* sum of the hints' cost */
	uint64_t next_id;
	unsigned rr; /* staging turn */
	int closed;
	atomic_int n_live; /* n, for the GET path's lock-free check */
};

/* ---- one hint ---- */

static size_t table_slots(size_t n)
{
	size_t s = HINT_TABLE_MIN;

	while (s < 2 * n)
		s *= 2;
	return s;
}

uint64_t tgt_hint_cost(size_t n, size_t name_bytes)
{
	return sizeof(hint_t) + (uint64_t)n * (sizeof(uint64_t) + sizeof(uint32_t) + 1 /* NUL */) + (n + 7) / 8 +
	       (uint64_t)table_slots(n) * sizeof(uint32_t) + name_bytes;
}

static void hint_free(hint_t *h)
{
	if (h == NULL)
		return;
	free(h->hash);
	free(h->off);
	free(h->names);
	free(h->slots);
	free(h->read);
	free(h);
}

/* The place of hash v in h, or -1. */
static int64_t hint_find(const hint_t *h, uint64_t v)
{
	for (uint32_t i = (uint32_t)v & h->mask;; i = (i + 1) & h->mask) {
		uint32_t s = h->slots[i];
		if (s == 0)
			return -1;
		if (h->hash[s - 1] == v)
			return (int64_t)s - 1;
	}
}

static bool is_read(const hint_t *h, size_t p)
{
	return (h->read[p / 8] >> (p % 8)) & 1;
}

/* Builds the hint of s (names deduplicated, first place kept). NULL on allocation failure. */
static hint_t *hint_build(const tgt_hint_spec_t *s, size_t name_bytes, size_t *dups)
{
	hint_t *h = calloc(1, sizeof(*h));
	size_t slots = table_slots(s->n), at = 0;

	*dups = 0;
	if (h == NULL)
		return NULL;
	h->hash = malloc((s->n ? s->n : 1) * sizeof(*h->hash));
	h->off = malloc((s->n ? s->n : 1) * sizeof(*h->off));
	h->names = malloc(name_bytes + s->n + 1);
	h->slots = calloc(slots, sizeof(*h->slots));
	h->read = calloc((s->n + 7) / 8 + 1, 1);
	if (!h->hash || !h->off || !h->names || !h->slots || !h->read) {
		hint_free(h);
		return NULL;
	}
	h->mask = (uint32_t)(slots - 1);
	for (size_t i = 0; i < s->n; i++) {
		size_t len = strlen(s->names[i]);
		uint64_t v = ft_hrw_name_hash(s->provider, s->bucket, s->names[i], len);
		if (h->n > 0 && hint_find(h, v) >= 0) {
			(*dups)++;
			continue;
		}
		uint32_t k = (uint32_t)v & h->mask;
		while (h->slots[k] != 0)
			k = (k + 1) & h->mask;
		h->slots[k] = (uint32_t)h->n + 1;
		h->hash[h->n] = v;
		h->off[h->n] = (uint32_t)at;
		memcpy(h->names + at, s->names[i], len + 1);
		at += len + 1;
		h->n++;
	}
	snprintf(h->provider, sizeof(h->provider), "%s", s->provider);
	snprintf(h->bucket, sizeof(h->bucket), "%s", s->bucket);
	snprintf(h->job, sizeof(h->job), "%s", s->job);
	h->epoch = s->epoch;
	h->ttl_s = s->ttl_s;
	return h;
}

static bool hint_live(const hint_t *h, int64_t now_ms)
{
	return now_ms < h->expires_ms;
}

static bool hint_of(const hint_t *h, const char *provider, const char *bucket)
{
	return strcmp(h->bucket, bucket) == 0 && strcmp(h->provider, provider) == 0;
}

/* Moves head past the places read or skipped (those TGT_HINT_REORDER or more before the furthest read). */
static void cursor_advance(hint_t *h)
{
	while (h->head < h->n && (is_read(h, h->head) || h->head + TGT_HINT_REORDER <= h->max_read))
		h->head++;
}

static void cursor_note(hint_t *h, size_t p, bool hit, int64_t now_ms)
{
	if (h->first_read_ms == 0)
		h->first_read_ms = now_ms;
	if (hit)
		h->hits++;
	else
		h->misses++;
	if (is_read(h, p)) {
		h->rereads++;
		return;
	}
	h->read[p / 8] |= (uint8_t)(1u << (p % 8));
	h->consumed++;
	if (p < h->head)
		h->late++;
	if (p > h->max_read)
		h->max_read = p;
	cursor_advance(h);
}

/* Next use of place p: names still to be read before it, or -1 when decided. */
static int64_t cursor_distance(const hint_t *h, size_t p)
{
	if (p < h->head || is_read(h, p))
		return -1;
	return (int64_t)(p - h->head);
}

static json_t *hint_json(const hint_t *h, int64_t now_ms)
{
	size_t read_before_head = 0;

	json_t *next = json_array();

	for (size_t p = 0; p < h->head; p++)
		read_before_head += is_read(h, p);
	for (size_t p = h->head; p < h->n && json_array_size(next) < HINT_JSON_NEXT; p++)
		if (!is_read(h, p))
			json_array_append_new(next, json_string(h->names + h->off[p]));
	json_t *j =
		json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
			  "provider", h->provider, "bucket", h->bucket, "job", h->job, "epoch", (json_int_t)h->epoch,
			  "names", (json_int_t)h->n, "cursor", (json_int_t)h->head, "read", (json_int_t)h->consumed,
			  "skipped", (json_int_t)(h->head - read_before_head), "late", (json_int_t)h->late, "rereads",
			  (json_int_t)h->rereads, "hits", (json_int_t)h->hits, "misses", (json_int_t)h->misses,
			  "prefetched", (json_int_t)h->prefetched, "prefetch_failed", (json_int_t)h->prefetch_failed,
			  "bytes", (json_int_t)h->cost, "expires_in_ms", (json_int_t)(h->expires_ms - now_ms), "ttl_s",
			  (json_int_t)h->ttl_s, "done", h->head >= h->n);
	json_object_set_new(j, "warmed", json_integer((json_int_t)h->warmed)); /* stored copies read ahead */
	json_object_set_new(j, "next", next); /* the names expected next, for a look at the cursor */
	return j;
}

/* ---- the store ---- */

int tgt_hint_store_init(tgt_t *t)
{
	tgt_hints_t *s = calloc(1, sizeof(*s));
	pthread_condattr_t attr;

	if (s == NULL)
		return -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &attr);
	pthread_condattr_destroy(&attr);
	t->hints = s;
	return 0;
}

void tgt_hint_store_free(tgt_t *t)
{
	tgt_hints_t *s = t->hints;

	if (s == NULL)
		return;
	t->hints = NULL;
	for (int i = 0; i < s->n; i++)
		hint_free(s->h[i]);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Takes hint i out of the store (lock held) and returns it. */
static hint_t *store_take(tgt_hints_t *s, int i)
{
	hint_t *h = s->h[i];

	s->bytes -= h->cost;
	s->h[i] = s->h[--s->n];
	s->h[s->n] = NULL;
	atomic_store(&s->n_live, s->n);
	return h;
}

/* Takes out the hints expired by now_ms into out[] (lock held); returns how many. */
static int store_expire(tgt_hints_t *s, int64_t now_ms, hint_t **out)
{
	int k = 0;

	for (int i = s->n - 1; i >= 0; i--)
		if (!hint_live(s->h[i], now_ms))
			out[k++] = store_take(s, i);
	return k;
}

int tgt_hint_expire_at(tgt_t *t, int64_t now_ms)
{
	tgt_hints_t *s = t->hints;
	hint_t *gone[TGT_HINT_ACTIVE_MAX];

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->lock);
	int k = store_expire(s, now_ms, gone);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < k; i++) {
		ft_info("hint %s/%s job %s epoch %lld expired (cursor %zu of %zu)", gone[i]->provider, gone[i]->bucket,
			gone[i]->job, (long long)gone[i]->epoch, gone[i]->head, gone[i]->n);
		hint_free(gone[i]);
	}
	return k;
}

/* Checks s; 0, or 400 with why. *name_bytes: the names' lengths added up. */
static int spec_check(const tgt_hint_spec_t *s, size_t *name_bytes, char *why, size_t cap)
{
	const char *bad = NULL;

	*name_bytes = 0;
	if (s->provider == NULL || s->bucket == NULL || strlen(s->provider) >= TGT_PROVIDER_MAX ||
	    strlen(s->bucket) > FT_BUCKET_NAME_MAX) {
		snprintf(why, cap, "a hint needs a provider and a bucket");
		return 400;
	}
	if (s->job == NULL || ft_name_check_job(s->job) != 0) {
		snprintf(why, cap, "job must be 1..%d characters of [A-Za-z0-9._-]", TGT_HINT_JOB_MAX - 1);
		return 400;
	}
	if (s->epoch < 0) {
		snprintf(why, cap, "epoch must be a non-negative integer");
		return 400;
	}
	if (s->ttl_s < 1 || s->ttl_s > TGT_HINT_TTL_MAX) {
		snprintf(why, cap, "ttl_s must be 1..%d seconds", TGT_HINT_TTL_MAX);
		return 400;
	}
	if (s->n >= UINT32_MAX / 4) {
		snprintf(why, cap, "too many names");
		return 413;
	}
	for (size_t i = 0; i < s->n; i++) {
		size_t len = s->names[i] != NULL ? strlen(s->names[i]) : 0;
		if (s->names[i] == NULL || ft_name_check_object(s->names[i], len, &bad) != 0) {
			snprintf(why, cap, "objnames[%zu]: %s", i, s->names[i] == NULL ? "not a string" : bad);
			return 400;
		}
		*name_bytes += len;
	}
	if (*name_bytes + s->n >= UINT32_MAX) {
		snprintf(why, cap, "the names add up to more than 4 GiB");
		return 413;
	}
	return 0;
}

int tgt_hint_install_at(tgt_t *t, const tgt_hint_spec_t *s, int64_t now_ms, size_t *dups, char *why, size_t cap)
{
	tgt_hints_t *st = t->hints;
	hint_t *gone[TGT_HINT_ACTIVE_MAX + 1], *h;
	size_t name_bytes;
	int rc, k, same = -1;

	*dups = 0;
	rc = spec_check(s, &name_bytes, why, cap);
	if (rc != 0)
		return rc;
	uint64_t cost = tgt_hint_cost(s->n, name_bytes);
	uint64_t max = t->cfg.hint_max_bytes > 0 ? (uint64_t)t->cfg.hint_max_bytes : 0;
	if (cost > max) {
		snprintf(why, cap, "a hint of %zu names takes %llu bytes here, over hint_max_bytes %llu", s->n,
			 (unsigned long long)cost, (unsigned long long)max);
		return 413;
	}
	h = hint_build(s, name_bytes, dups);
	if (h == NULL) {
		snprintf(why, cap, "out of memory");
		return 500;
	}
	h->cost = cost;
	h->expires_ms = now_ms + s->ttl_s * 1000;
	pthread_mutex_lock(&st->lock);
	k = store_expire(st, now_ms, gone);
	for (int i = 0; i < st->n && same < 0; i++)
		if (hint_of(st->h[i], s->provider, s->bucket) && strcmp(st->h[i]->job, s->job) == 0)
			same = i;
	if (same >= 0 && st->h[same]->epoch > s->epoch) {
		snprintf(why, cap, "job %s already has epoch %lld of %s/%s (epochs only go forward)", s->job,
			 (long long)st->h[same]->epoch, s->provider, s->bucket);
		rc = 409;
	} else if (st->bytes - (same >= 0 ? st->h[same]->cost : 0) + cost > max) {
		snprintf(why, cap,
			 "%llu bytes for this hint's %zu names and %llu held by other hints exceed hint_max_bytes %llu",
			 (unsigned long long)cost, s->n,
			 (unsigned long long)(st->bytes - (same >= 0 ? st->h[same]->cost : 0)),
			 (unsigned long long)max);
		rc = 413;
	} else if (same < 0 && st->n >= TGT_HINT_ACTIVE_MAX) {
		snprintf(why, cap, "%d hints are live already (wait for one to expire or replace one)",
			 TGT_HINT_ACTIVE_MAX);
		rc = 429;
	} else {
		if (same >= 0)
			gone[k++] = store_take(st, same);
		h->id = ++st->next_id;
		st->h[st->n++] = h;
		st->bytes += cost;
		atomic_store(&st->n_live, st->n);
		h = NULL;
		pthread_cond_broadcast(&st->wake);
	}
	pthread_mutex_unlock(&st->lock);
	hint_free(h);
	for (int i = 0; i < k; i++)
		hint_free(gone[i]);
	return rc;
}

int tgt_hint_remove(tgt_t *t, const char *provider, const char *bucket, const char *job, int64_t epoch)
{
	tgt_hints_t *s = t->hints;
	hint_t *gone[TGT_HINT_ACTIVE_MAX];
	int k = 0;

	pthread_mutex_lock(&s->lock);
	for (int i = s->n - 1; i >= 0; i--)
		if (hint_of(s->h[i], provider, bucket) && (job == NULL || strcmp(s->h[i]->job, job) == 0) &&
		    (epoch < 0 || s->h[i]->epoch == epoch))
			gone[k++] = store_take(s, i);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < k; i++)
		hint_free(gone[i]);
	return k;
}

void tgt_hint_note_at(tgt_t *t, const char *provider, const char *bucket, uint64_t v, bool hit, int64_t now_ms)
{
	tgt_hints_t *s = t->hints;
	bool moved = false;

	if (s == NULL || atomic_load_explicit(&s->n_live, memory_order_relaxed) == 0)
		return;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++) {
		hint_t *h = s->h[i];
		if (!hint_live(h, now_ms) || !hint_of(h, provider, bucket))
			continue;
		int64_t p = hint_find(h, v);
		if (p >= 0) {
			cursor_note(h, (size_t)p, hit, now_ms);
			moved = true;
		}
	}
	if (moved)
		pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

int64_t tgt_hint_next_use_at(tgt_t *t, const char *provider, const char *bucket, uint64_t v, int64_t now_ms)
{
	tgt_hints_t *s = t->hints;
	int64_t best = -1;

	if (s == NULL || atomic_load_explicit(&s->n_live, memory_order_relaxed) == 0)
		return -1;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++) {
		hint_t *h = s->h[i];
		if (!hint_live(h, now_ms) || !hint_of(h, provider, bucket))
			continue;
		int64_t p = hint_find(h, v);
		int64_t d = p >= 0 ? cursor_distance(h, (size_t)p) : -1;
		if (d >= 0 && (best < 0 || d < best))
			best = d;
	}
	pthread_mutex_unlock(&s->lock);
	return best;
}

bool tgt_hint_active_at(tgt_t *t, const char *provider, const char *bucket, int64_t now_ms)
{
	tgt_hints_t *s = t->hints;
	bool found = false;

	if (s == NULL || atomic_load_explicit(&s->n_live, memory_order_relaxed) == 0)
		return false;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n && !found; i++)
		found = hint_live(s->h[i], now_ms) && hint_of(s->h[i], provider, bucket);
	pthread_mutex_unlock(&s->lock);
	return found;
}

json_t *tgt_hint_json_at(tgt_t *t, int64_t now_ms)
{
	tgt_hints_t *s = t->hints;
	json_t *arr = json_array();

	tgt_hint_expire_at(t, now_ms);
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++)
		json_array_append_new(arr, hint_json(s->h[i], now_ms));
	json_t *doc = json_pack("{s:o, s:I, s:I}", "hints", arr, "bytes", (json_int_t)s->bytes, "max_bytes",
				(json_int_t)t->cfg.hint_max_bytes);
	pthread_mutex_unlock(&s->lock);
	return doc;
}

int tgt_hint_rank_cmp(const tgt_hint_rank_t *a, const tgt_hint_rank_t *b)
{
	if ((a->next < 0) != (b->next < 0))
		return a->next < 0 ? -1 : 1;
	if (a->next >= 0 && a->next != b->next)
		return a->next > b->next ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* ---- staging ---- */

/* How many names h may have staged ahead of its cursor under w at now_ms (its share of the bytes). */
static size_t window_items(const hint_t *h, const tgt_hint_window_t *w, uint64_t share, int64_t now_ms)
{
	size_t by_rate = (size_t)w->min_items;

	if (h->first_read_ms > 0 && now_ms > h->first_read_ms) {
		double rate = (double)h->consumed * 1000.0 / (double)(now_ms - h->first_read_ms);
		size_t lead = (size_t)(rate * w->lead_s);
		if (lead > by_rate)
			by_rate = lead;
	}
	if (h->avg_size <= 0) /* sizes not known yet: no more than the ones in flight */
		return by_rate < (size_t)w->min_items ? by_rate : (size_t)w->min_items;
	size_t by_bytes = (size_t)(share / (uint64_t)h->avg_size);
	return by_rate < by_bytes ? by_rate : by_bytes;
}

int tgt_hint_stage_next(tgt_t *t, const tgt_hint_window_t *w, int64_t now_ms, tgt_hint_pick_t *p)
{
	tgt_hints_t *s = t->hints;
	int stagers = 0, found = 0;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++)
		stagers += hint_live(s->h[i], now_ms) && s->h[i]->head < s->h[i]->n;
	uint64_t share = stagers > 0 ? w->budget_bytes / (uint64_t)stagers : 0;
	for (int k = 0; k < s->n && !found; k++) {
		hint_t *h = s->h[(s->rr + (unsigned)k) % (unsigned)s->n];
		if (!hint_live(h, now_ms))
			continue;
		if (h->staged < h->head)
			h->staged = h->head;
		while (h->staged < h->n && is_read(h, h->staged))
			h->staged++;
		if (h->staged >= h->n || h->staged - h->head >= window_items(h, w, share, now_ms))
			continue;
		p->hint_id = h->id;
		snprintf(p->provider, sizeof(p->provider), "%s", h->provider);
		snprintf(p->bucket, sizeof(p->bucket), "%s", h->bucket);
		snprintf(p->name, sizeof(p->name), "%s", h->names + h->off[h->staged]);
		h->staged++;
		h->inflight++;
		found = 1;
		s->rr = (s->rr + (unsigned)k + 1) % (unsigned)s->n;
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

void tgt_hint_stage_done(tgt_t *t, const tgt_hint_pick_t *p, int rc, int64_t size)
{
	tgt_hints_t *s = t->hints;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < s->n; i++) {
		hint_t *h = s->h[i];
		if (h->id != p->hint_id)
			continue;
		h->inflight--;
		if (rc < 0)
			h->prefetch_failed++;
		h->prefetched += rc == 0;
		h->warmed += rc == 2;
		if (rc >= 0 && size >= 0) {
			h->staged_bytes += (uint64_t)size;
			h->avg_size = h->avg_size <= 0 ? (size > 0 ? size : 1) : (h->avg_size * 7 + size) / 8;
		}
		break;
	}
	pthread_mutex_unlock(&s->lock);
}

int tgt_hint_stage_wait(tgt_t *t, int ms)
{
	tgt_hints_t *s = t->hints;
	struct timespec ts;
	int closed;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&s->lock);
	if (!s->closed)
		pthread_cond_timedwait(&s->wake, &s->lock, &ts);
	closed = s->closed;
	pthread_mutex_unlock(&s->lock);
	return closed;
}

void tgt_hint_stage_close(tgt_t *t)
{
	tgt_hints_t *s = t->hints;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

/* ---- entry points (target.h) ---- */

int tgt_hint_start(tgt_t *t)
{
	if (tgt_hint_store_init(t) != 0)
		return -1;
	if (tgt_hint_prefetch_start(t) != 0) {
		tgt_hint_fini(t);
		return -1;
	}
	return 0;
}

void tgt_hint_stop(tgt_t *t)
{
	tgt_hint_prefetch_stop(t);
}

void tgt_hint_fini(tgt_t *t)
{
	tgt_hint_prefetch_stop(t);
	tgt_hint_store_free(t);
}

void tgt_hint_note(const tgt_obj_t *o, bool hit)
{
	tgt_hints_t *s = o->t->hints;

	if (s == NULL || atomic_load_explicit(&s->n_live, memory_order_relaxed) == 0)
		return;
	tgt_hint_note_at(o->t, o->provider, o->bucket, o->hash, hit, ft_mono_ms());
}

int64_t tgt_hint_next_use(tgt_t *t, const char *provider, const char *bucket, uint64_t h)
{
	return tgt_hint_next_use_at(t, provider, bucket, h, ft_mono_ms());
}

bool tgt_hint_any(tgt_t *t)
{
	return t->hints != NULL && atomic_load_explicit(&t->hints->n_live, memory_order_relaxed) > 0;
}
