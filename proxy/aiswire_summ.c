/* SPDX-License-Identifier: Apache-2.0 */
/* AIStore's bucket summary at the proxy (HEAD ?bsumm_remote, GET summary-bck): walks in the background under the summary's id. */
#include "proxy.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/util.h"

/*
 * DESIGN
 * AIStore computes a summary as a job: the first request answers 202 with its id, the client asks
 * again with the id until it gets 200 and the result. Here the first request starts one walk on a
 * thread of its own: the bucket's merged listing (what the cluster holds; of a remote bucket, its
 * cached objects), and, when asked, the remote bucket's own listing page by page, which may take
 * as long as listing a large bucket. A request with the id answers 202 while the walk runs, then
 * the result (or the walk's error) for SUMM_KEEP_S. An id is answered only for the bucket, prefix
 * and kind it was started for; one this proxy does not know (another proxy took the first request,
 * or the result expired) starts a walk under it. At most SUMM_SLOTS walks run at once (503 past
 * them; a new one takes the slot of the oldest finished one); a bucket not in the bucket metadata
 * is 404. px_ais_summ_stop waits for the walks at shutdown, which end at their next page.
 */

#define SUMM_SLOTS 32
#define SUMM_KEEP_S 600
#define SUMM_ID_MAX 64

typedef struct {
	int64_t count, bytes, min, max;     /* what the cluster holds */
	int64_t remote_count, remote_bytes; /* a remote bucket's own listing, when asked for */
} summ_t;

typedef enum { SLOT_FREE = 0, SLOT_RUNNING, SLOT_DONE } slot_state_t;

typedef struct {
	slot_state_t state;
	px_t *px; /* the proxy the walk lists through */
	char id[SUMM_ID_MAX];
	char provider[16];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	char *prefix;
	bool remote;    /* the remote bucket's own listing counted too */
	json_t *result; /* SLOT_DONE: the BsummResult, or NULL with status and why */
	int status;
	char why[512];
	int64_t done_ns;
} slot_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static slot_t slots[SUMM_SLOTS];
static int running;
static bool stopping;

/* Sums one page of listing entries into s: what the cluster holds, or (remote) the backend's listing. */
static void add_page(summ_t *s, const json_t *entries, bool remote)
{
	for (size_t i = 0; i < json_array_size(entries); i++) {
		int64_t size = json_integer_value(json_object_get(json_array_get(entries, i), "size"));
		if (remote) {
			s->remote_count++;
			s->remote_bytes += size;
			continue;
		}
		s->min = s->count == 0 || size < s->min ? size : s->min;
		s->max = size > s->max ? size : s->max;
		s->count++;
		s->bytes += size;
	}
}

static bool stop_asked(void)
{
	pthread_mutex_lock(&mu);
	bool v = stopping;
	pthread_mutex_unlock(&mu);
	return v;
}

/*
 * Sums the bucket's listing into s, page by page: the cluster's (what it holds), or with remote a
 * remote bucket's own (its backend's). 0, or -1 with *status and why.
 */
static int walk(const slot_t *w, bool remote, summ_t *s, int *status, char *why, size_t cap)
{
	char *token = strdup("");
	int rc = 0;

	while (rc == 0 && token != NULL && !stop_asked()) {
		px_rlist_args_t a = {.prefix = w->prefix, .token = token, .pagesize = 10000};
		json_t *entries = NULL;
		char *next = NULL;
		rc = remote ? px_rlist_page(w->px, w->provider, w->bucket, &a, &entries, &next, status, why, cap)
			    : px_list_page_of(w->px, w->provider, w->bucket, w->prefix, token, 10000, &entries, &next,
					      status, why, cap);
		if (rc == 0)
			add_page(s, entries, remote);
		json_decref(entries);
		free(token);
		token = rc == 0 && next != NULL && next[0] != '\0' ? next : NULL;
		if (token == NULL)
			free(next);
	}
	free(token);
	return rc;
}

/* AIStore's BsummResult (its bucket and the sums flattened into one object). */
static json_t *summ_json(const char *provider, const char *bucket, const summ_t *s)
{
	char count[24], bytes[24], rcount[24], rbytes[24];

	snprintf(count, sizeof(count), "%" PRId64, s->count);
	snprintf(bytes, sizeof(bytes), "%" PRId64, s->bytes);
	snprintf(rcount, sizeof(rcount), "%" PRId64, s->remote_count);
	snprintf(rbytes, sizeof(rbytes), "%" PRId64, s->remote_bytes);
	return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:{s:I, s:I, s:I}, s:{s:s, s:s, s:s, s:s}, s:i, s:b}",
			 "name", bucket, "provider", provider, "namespace", "uname", "", "name", "", "ObjCount",
			 "obj_count_present", count, "obj_count_remote", rcount, "ObjSize", "obj_min_size",
			 (json_int_t)s->min, "obj_avg_size", (json_int_t)(s->count ? s->bytes / s->count : 0),
			 "obj_max_size", (json_int_t)s->max, "TotalSize", "size_on_disk", bytes,
			 "size_all_present_objs", bytes, "size_all_remote_objs", rbytes, "total_disks_size", "0",
			 "used_pct", 0, "is_present", 1);
}

/* The walk's thread: arg is its slot, whose request fields no one changes while it runs. */
static void *walk_main(void *arg)
{
	slot_t *w = arg;
	summ_t s = {0};
	int status = 500;
	char why[512] = "";
	int rc = walk(w, false, &s, &status, why, sizeof(why));

	if (rc == 0 && w->remote)
		rc = walk(w, true, &s, &status, why, sizeof(why));
	json_t *result = rc == 0 ? summ_json(w->provider, w->bucket, &s) : NULL;
	pthread_mutex_lock(&mu);
	if (rc == 0 && stopping) {
		json_decref(result);
		result = NULL;
		status = 503;
		snprintf(why, sizeof(why), "the proxy is stopping");
	}
	w->result = result;
	w->status = result != NULL ? 200 : status;
	snprintf(w->why, sizeof(w->why), "%s", result != NULL || why[0] ? why : "out of memory");
	w->done_ns = ft_now_ns();
	w->state = SLOT_DONE;
	if (--running == 0)
		pthread_cond_broadcast(&idle_cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void slot_clear(slot_t *w)
{
	json_decref(w->result);
	free(w->prefix);
	memset(w, 0, sizeof(*w));
}

/*
 * The slot of id summarizing what the request asks (mu held), NULL when none: an id is only ever
 * answered for its own bucket, prefix and kind. Results older than SUMM_KEEP_S are dropped first.
 */
static slot_t *slot_find(const char *id, const char *provider, const char *bucket, const char *prefix, bool remote)
{
	int64_t now = ft_now_ns();

	for (int i = 0; i < SUMM_SLOTS; i++)
		if (slots[i].state == SLOT_DONE && now - slots[i].done_ns > (int64_t)SUMM_KEEP_S * 1000000000)
			slot_clear(&slots[i]);
	for (int i = 0; i < SUMM_SLOTS; i++) {
		const slot_t *w = &slots[i];
		if (w->state != SLOT_FREE && strcmp(w->id, id) == 0 && strcmp(w->provider, provider) == 0 &&
		    strcmp(w->bucket, bucket) == 0 && strcmp(w->prefix, prefix) == 0 && w->remote == remote)
			return &slots[i];
	}
	return NULL;
}

/* A slot for a new walk (mu held): a free one, else the oldest finished one; NULL when all run. */
static slot_t *slot_take(void)
{
	slot_t *oldest = NULL;

	for (int i = 0; i < SUMM_SLOTS; i++) {
		if (slots[i].state == SLOT_FREE)
			return &slots[i];
		if (slots[i].state == SLOT_DONE && (oldest == NULL || slots[i].done_ns < oldest->done_ns))
			oldest = &slots[i];
	}
	if (oldest != NULL)
		slot_clear(oldest);
	return oldest;
}

/* Starts the walk of a new slot for id (mu held). 0, or -1 with *status and why. */
static int walk_start(px_t *px, const char *id, const char *provider, const char *bucket, const char *prefix,
		      bool remote, int *status, char *why, size_t cap)
{
	slot_t *w = stopping ? NULL : slot_take();
	pthread_attr_t attr;
	pthread_t th;

	*status = 503;
	if (stopping || w == NULL) {
		snprintf(why, cap, "%s", stopping ? "the proxy is stopping" : "too many bucket summaries under way");
		return -1;
	}
	w->px = px;
	snprintf(w->id, sizeof(w->id), "%s", id);
	snprintf(w->provider, sizeof(w->provider), "%s", provider);
	snprintf(w->bucket, sizeof(w->bucket), "%s", bucket);
	w->prefix = strdup(prefix);
	w->remote = remote;
	w->state = SLOT_RUNNING;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = w->prefix != NULL ? pthread_create(&th, &attr, walk_main, w) : ENOMEM;
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		slot_clear(w);
		*status = 500;
		snprintf(why, cap, "cannot start the summary: %s", strerror(rc));
		return -1;
	}
	running++;
	return 0;
}

/* 202 with the summary's id, as AIStore's first answer and its answers while the job runs. */
static void answer_accepted(ft_req_t *r, const char *id, bool head)
{
	char body[SUMM_ID_MAX + 4];
	int n = snprintf(body, sizeof(body), "\"%s\"", id);

	if (head) {
		ft_resp_header(r, "Ais-Xaction-Id", id);
		ft_resp_bytes(r, 202, NULL, NULL, 0);
	} else {
		ft_resp_bytes(r, 202, "application/json", body, (size_t)n);
	}
}

/* The result: HEAD in the Ais-Bucket-Summ header, GET as a one-element JSON list. result is borrowed. */
static void answer_result(ft_req_t *r, const json_t *result, bool head)
{
	if (!head) {
		ft_resp_json(r, 200, json_pack("[O]", result));
		return;
	}
	char *text = json_dumps(result, JSON_COMPACT);
	ft_resp_header(r, "Ais-Bucket-Summ", text != NULL ? text : "{}");
	free(text);
	ft_resp_bytes(r, 200, NULL, NULL, 0);
}

/* Whether provider/bucket is in the cluster's bucket metadata. */
static bool bucket_known(const char *provider, const char *bucket)
{
	ft_bmd_t *bmd = ft_bmd_current();
	bool known = bmd != NULL && ft_bmd_find(bmd, provider, bucket) != NULL;

	ft_bmd_put(bmd);
	return known;
}

void px_ais_summary(px_t *px, ft_req_t *r, const char *provider, const char *bucket, const char *prefix,
		    const char *uuid, bool head, bool remote)
{
	char id[SUMM_ID_MAX], why[512];
	int status = 0, rc = 0;

	if (uuid != NULL && uuid[0] != '\0' && (strlen(uuid) >= SUMM_ID_MAX || !px_jobs_id_chars_ok(uuid))) {
		ft_resp_error(r, 400, "bad summary id \"%.64s\"", uuid);
		return;
	}
	if (uuid != NULL && uuid[0] != '\0')
		snprintf(id, sizeof(id), "%s", uuid);
	else
		px_jobs_new_id(id, sizeof(id));
	remote = remote && strcmp(provider, "ais") != 0 && strcmp(provider, "ht") != 0; /* ht: no listing */
	prefix = prefix != NULL ? prefix : "";
	if (!bucket_known(provider, bucket)) {
		if (strcmp(provider, "ais") == 0)
			ft_resp_error(r, 404, "bucket \"ais://%s\" does not exist", bucket);
		else
			ft_resp_error(r, 404, "%s bucket \"%s://%s\" does not exist", provider, provider, bucket);
		return;
	}
	pthread_mutex_lock(&mu);
	slot_t *w = slot_find(id, provider, bucket, prefix, remote);
	if (w == NULL)
		rc = walk_start(px, id, provider, bucket, prefix, remote, &status, why, sizeof(why));
	/* a copy: the slot's result may be dropped by another request once mu is released */
	json_t *result = w != NULL && w->state == SLOT_DONE && w->result != NULL ? json_deep_copy(w->result) : NULL;
	if (w != NULL && w->state == SLOT_DONE && result == NULL) {
		status = w->result != NULL ? 500 : w->status;
		snprintf(why, sizeof(why), "%s", w->result != NULL ? "out of memory" : w->why);
	}
	bool done = w != NULL && w->state == SLOT_DONE;
	pthread_mutex_unlock(&mu);
	if (rc != 0 || (done && result == NULL))
		ft_resp_error(r, status, "summary of bucket \"%s://%s\": %s", provider, bucket, why);
	else if (done)
		answer_result(r, result, head);
	else
		answer_accepted(r, id, head);
	json_decref(result);
}

void px_ais_summ_stop(void)
{
	pthread_mutex_lock(&mu);
	stopping = true;
	while (running > 0)
		pthread_cond_wait(&idle_cv, &mu);
	for (int i = 0; i < SUMM_SLOTS; i++)
		slot_clear(&slots[i]);
	pthread_mutex_unlock(&mu);
}
