/* SPDX-License-Identifier: Apache-2.0 */
/* Staging ahead under order hints: a few threads fetch or read ahead the next names of each hint's list before they are read. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/bmd.h"
#include "cluster/smap.h"
#include "http/util.h"
#include "xact/hint.h"

/*
 * DESIGN
 * hint_prefetch_inflight threads (0: no staging) take names from the store (tgt_hint_stage_next:
 * the live hints take turns). A name whose copy is stored here (warm) is read ahead into the page
 * cache: posix_fadvise(WILLNEED) starts the kernel's readahead of the whole file and returns, so the
 * GET that follows is served from memory. A remote bucket's name not stored yet (cold) is fetched
 * with the prefetch path jobs use (tgt_coldget_prefetch: joins a cold GET in flight, publishes like
 * one, makes room through the LRU), so at most that many fetches are in flight. A hint's window is the names between its
 * cursor and the last one staged; it may grow while it stays below both
 *   - the rate's limit: what the job reads in STAGE_LEAD_S seconds at the rate observed since its
 *     first read (at least hint_prefetch_inflight names, so an epoch starts warm), and
 *   - the bytes' limit: the cache's bytes at its low watermark (tgt_lru_low_bytes), shared evenly
 *     by the hints that stage, over the mean size of the objects staged so far (before one is known:
 *     no more than in flight).
 * Everything in a window is needed sooner than anything after it, and the eviction order under a
 * hint (lru.c) takes what no hint expects first, then the furthest: a window that fits under the low
 * watermark never makes the sweep evict something needed sooner than what it stages. The threads
 * wait on the store's condition (a GET that moved a cursor, an install) or STAGE_WAIT_MS, and leave
 * when tgt_hint_stage_close wakes them; a fetch in flight at shutdown finishes (or times out) first.
 */

#define STAGE_LEAD_S 4
#define STAGE_WAIT_MS 200
#define STAGE_THREADS_MAX 16

struct tgt_hint_stager {
	pthread_t threads[STAGE_THREADS_MAX];
	int n;
};

/* Whether this target owns o in the current map (the map may have changed since the hint came). */
static bool owned_here(const tgt_t *t, const tgt_obj_t *o)
{
	ft_smap_t *smap = ft_smap_current();
	const ft_node_t *owner = smap != NULL ? ft_smap_owner_hash(smap, o->hash) : NULL;
	bool mine = owner != NULL && strcmp(owner->id, t->id) == 0;

	ft_smap_put(smap);
	return mine;
}

/* Starts the readahead of o's stored copy; 2 when there is one (*bytes its size), 0 when none. */
static int warm(const tgt_obj_t *o, int64_t *bytes)
{
	struct stat st;
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return 0;
	int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 2 : 0;
	if (rc == 2) {
		*bytes = st.st_size;
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED); /* advice: a failure only means no readahead */
	}
	close(fd);
	return rc;
}

/* Reads p's stored copy ahead, or fetches it (remote buckets); reports to the store. */
static void stage_one(tgt_t *t, const tgt_hint_pick_t *p)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *b = bmd != NULL ? ft_bmd_find(bmd, p->provider, p->bucket) : NULL;
	tgt_obj_t *o = calloc(1, sizeof(*o));
	char err[256] = "";
	int64_t bytes = -1;
	int rc = -1;

	if (b == NULL || o == NULL || tgt_obj_init(o, t, b, p->name, strlen(p->name)) != 0) {
		snprintf(err, sizeof(err), "%s", b == NULL ? "the bucket is gone" : "cannot name the object");
		goto out;
	}
	if (!owned_here(t, o)) {
		rc = 1; /* no longer ours: nothing to stage */
		goto out;
	}
	rc = warm(o, &bytes);
	if (rc == 0)
		rc = tgt_is_remote(o) ? tgt_coldget_prefetch(o, &bytes, err, sizeof(err)) : 1;
out:
	if (rc < 0)
		ft_debug("hint: staging %s/%s/%s failed: %s", p->provider, p->bucket, p->name, err);
	tgt_hint_stage_done(t, p, rc, rc >= 0 ? bytes : -1);
	free(o);
	ft_bmd_put(bmd);
}

static void *stage_main(void *arg)
{
	tgt_t *t = arg;
	tgt_hint_pick_t p;

	for (;;) {
		tgt_hint_window_t w = {.budget_bytes = tgt_lru_low_bytes(t),
				       .lead_s = STAGE_LEAD_S,
				       .min_items = t->cfg.hint_prefetch_inflight};
		if (tgt_hint_stage_next(t, &w, ft_mono_ms(), &p)) {
			stage_one(t, &p);
			continue;
		}
		if (tgt_hint_stage_wait(t, STAGE_WAIT_MS))
			break;
		tgt_hint_expire_at(t, ft_mono_ms());
	}
	return NULL;
}

int tgt_hint_prefetch_start(tgt_t *t)
{
	tgt_hint_stager_t *s = calloc(1, sizeof(*s));
	int want = t->cfg.hint_prefetch_inflight;

	if (s == NULL)
		return -1;
	t->stager = s;
	if (want > STAGE_THREADS_MAX)
		want = STAGE_THREADS_MAX;
	for (s->n = 0; s->n < want; s->n++)
		if (pthread_create(&s->threads[s->n], NULL, stage_main, t) != 0)
			return -1; /* tgt_hint_prefetch_stop joins the ones started */
	return 0;
}

void tgt_hint_prefetch_stop(tgt_t *t)
{
	tgt_hint_stager_t *s = t->stager;

	if (s == NULL)
		return;
	tgt_hint_stage_close(t);
	for (int i = 0; i < s->n; i++)
		pthread_join(s->threads[i], NULL);
	t->stager = NULL;
	free(s);
}
