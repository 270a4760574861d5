/* SPDX-License-Identifier: Apache-2.0 */
/* Target LRU eviction: per-mountpath usage watermarks, in-memory access times, eviction of cached remote objects. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "cluster/hrw.h"
#include "core/fcache.h"
#include "core/keymap.h"
#include "core/lom.h"
#include "http/util.h"
#include "target.h"
#include "xact/hint.h"
#include "xact/runner.h"

/*
 * DESIGN
 * A service of runner.c (one background thread) checks every mountpath each lru_interval_ms (and
 * when kicked after a cold GET published). Usage is statvfs's (capacity minus reserve_bytes), or with lru_quota_bytes the
 * sum of the sizes of the published objects on the mountpath, found by walking it each time (no
 * running counter: simple, and test sizes are small). Above lru_high_pct it walks the mountpath's
 * remote-provider trees (never "ais"), sorts the cached objects by access time and unlinks the
 * oldest, each under its name lock (the lock PUT and cold GET publish under), until
 * usage is at or below lru_low_pct.
 * Access times: a GET notes (name hash -> now) in a direct-mapped in-memory table (no disk write
 * per GET); a victim's age is the newer of that and the atime_ns stored at publish. A collision
 * only loses recency (the object looks older). The table is not persisted: after a restart the
 * stored atimes rule. An object touched after the walk chose it is skipped.
 * sweep_lock serializes sweeps and tgt_lru_reserve (a cold GET making room for its object).
 * Order hints (hint.c): while a hint of an epoch's reading order is live for a bucket, the
 * watermarks stay the trigger but the victims are ranked by next use (tgt_hint_rank_cmp): first
 * what no live hint expects (other buckets, names read this epoch, skipped or unlisted), oldest
 * first, then the hinted ones, the furthest next use first (Belady's MIN over the hinted order).
 * Without a live hint every next use is "none" and the order is the access times' alone.
 * The state (table, locks, the sweeper) is t->lru, from tgt_lru_start to tgt_lru_stop.
 */

#define RECENT_SLOTS 8192
#define WALK_DEPTH 64

typedef struct {
	uint64_t h;
	int64_t at;
} recent_t;

typedef struct {
	char *rel;
	uint64_t size;
	uint64_t h; /* name hash (the name lock's), valid when named */
	int named;
	tgt_hint_rank_t rank; /* at: the newest access (ns); next: next use under the live hints, -1 none */
} victim_t;

/* The module's state, one per target (t->lru, tgt_lru_start .. tgt_lru_stop). */
struct tgt_lru {
	pthread_mutex_t recent_lock;
	recent_t recent[RECENT_SLOTS]; /* guarded by recent_lock */
	pthread_mutex_t sweep_lock;
	tgt_service_t sweeper;
};

typedef struct {
	tgt_t *t;
	tgt_lru_t *lru;
	bool hints; /* a hint was live when the walk started: rank by next use */
	victim_t *v;
	size_t n, cap;
	uint64_t used; /* bytes of every published object (ais included) */
	int collect;   /* gather victims */
	int oom;
} walk_t;

/* ---- access times ---- */

static void recent_note(tgt_lru_t *lru, uint64_t h, int64_t at)
{
	pthread_mutex_lock(&lru->recent_lock);
	lru->recent[h % RECENT_SLOTS].h = h;
	lru->recent[h % RECENT_SLOTS].at = at;
	pthread_mutex_unlock(&lru->recent_lock);
}

/* The noted access time of h, 0 if none. */
static int64_t recent_get(tgt_lru_t *lru, uint64_t h)
{
	int64_t at = 0;

	pthread_mutex_lock(&lru->recent_lock);
	if (lru->recent[h % RECENT_SLOTS].h == h)
		at = lru->recent[h % RECENT_SLOTS].at;
	pthread_mutex_unlock(&lru->recent_lock);
	return at;
}

void tgt_lru_touch(const tgt_obj_t *o)
{
	if (!tgt_is_remote(o) || !o->t->lru)
		return;
	recent_note(o->t->lru, o->hash, ft_now_ns());
}

/*
 * Splits "<provider>/<bucket>/<obj>" into buf (TGT_REL_MAX bytes; *bucket points into it, the
 * provider is buf) and hashes it like tgt_lru_touch: the object name is the path's, or for a hashed
 * file (core/keymap.h) the one its xattr holds (read from fd). -1 if malformed.
 */
static int rel_split(const char *rel, int fd, char *buf, const char **bucket, uint64_t *h)
{
	char *b, *obj, name[FT_OBJ_NAME_MAX + 1];
	long n;

	if (snprintf(buf, TGT_REL_MAX, "%s", rel) >= TGT_REL_MAX)
		return -1;
	b = strchr(buf, '/');
	if (b == NULL)
		return -1;
	*b++ = '\0';
	obj = strchr(b, '/');
	if (obj == NULL)
		return -1;
	*obj++ = '\0';
	*bucket = b;
	if (strncmp(obj, TGT_KEYS_DIR "/", sizeof(TGT_KEYS_DIR)) != 0) {
		*h = ft_hrw_name_hash(buf, b, obj, strlen(obj));
		return 0;
	}
	if ((n = tgt_key_fget(fd, name, sizeof(name))) < 0)
		return -1;
	*h = ft_hrw_name_hash(buf, b, name, (size_t)n);
	return 0;
}

/* ---- walking a mountpath ---- */

static void walk_add(walk_t *w, const char *rel, int fd, uint64_t size)
{
	char buf[TGT_REL_MAX];
	const char *bucket;
	ft_lom_t lom;
	uint64_t h;

	if (w->cap == w->n) {
		size_t cap = w->cap ? w->cap * 2 : 256;
		victim_t *v = realloc(w->v, cap * sizeof(*v));
		if (v == NULL) {
			w->oom = 1;
			return;
		}
		w->v = v;
		w->cap = cap;
	}
	victim_t *v = &w->v[w->n];
	v->rel = strdup(rel);
	if (v->rel == NULL) {
		w->oom = 1;
		return;
	}
	v->size = size;
	v->rank.at = ft_lom_fget(fd, &lom) == 0 ? lom.atime_ns : 0;
	v->rank.next = -1;
	v->named = 0;
	if (rel_split(rel, fd, buf, &bucket, &h) == 0) {
		v->h = h;
		v->named = 1;
		int64_t at = recent_get(w->lru, h);
		if (at > v->rank.at)
			v->rank.at = at;
		if (w->hints)
			v->rank.next = tgt_hint_next_use(w->t, buf, bucket, h);
	}
	w->n++;
}

/* Walks the directory dfd (consumed) whose path relative to the mountpath is rel. */
static void walk_dir(walk_t *w, int dfd, char *rel, size_t len, int depth, int remote)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (d == NULL) {
		close(dfd);
		return;
	}
	while ((de = readdir(d)) != NULL && !w->oom) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (depth == 0 && strcmp(de->d_name, TGT_WORK_DIR) == 0)
			continue;
		size_t nl = strlen(de->d_name);
		if (len + nl + 2 > TGT_REL_MAX)
			continue;
		size_t at = len;
		if (len > 0)
			rel[at++] = '/';
		memcpy(rel + at, de->d_name, nl + 1);
		int sub_remote = depth == 0 ? strcmp(de->d_name, "ais") != 0 : remote;
		int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0) {
			if (S_ISDIR(st.st_mode) && depth < WALK_DEPTH) {
				walk_dir(w, fd, rel, at + nl, depth + 1, sub_remote);
				fd = -1;
			} else if (S_ISREG(st.st_mode) && depth >= 2) {
				w->used += (uint64_t)st.st_size;
				if (w->collect && sub_remote)
					walk_add(w, rel, fd, (uint64_t)st.st_size);
			}
		}
		if (fd >= 0)
			close(fd);
		rel[len] = '\0';
	}
	closedir(d);
}

static void walk_free(walk_t *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].rel);
	free(w->v);
	memset(w, 0, sizeof(*w));
}

/* Walks mp: w->used, and with collect the cached remote objects (ages, next uses). 0 or -errno. */
static int walk_mountpath(tgt_t *t, const tgt_mountpath_t *mp, walk_t *w, int collect)
{
	char rel[TGT_REL_MAX] = "";
	int fd = openat(mp->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	memset(w, 0, sizeof(*w));
	w->t = t;
	w->lru = t->lru;
	w->hints = collect && tgt_hint_any(t);
	w->collect = collect;
	if (fd < 0)
		return -errno;
	walk_dir(w, fd, rel, 0, 0, 0);
	return w->oom ? -ENOMEM : 0;
}

/* Capacity and usage of mp's filesystem as the watermarks see them (no quota). 0 or -errno. */
static int fs_usage(const tgt_t *t, const tgt_mountpath_t *mp, uint64_t *cap, uint64_t *used)
{
	struct statvfs sv;

	if (fstatvfs(mp->root_fd, &sv) != 0)
		return -errno;
	/* As df: used = blocks - free; capacity = used + available to us (root-reserved blocks excluded). */
	uint64_t used_b = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	uint64_t total = used_b + (uint64_t)sv.f_bavail * sv.f_frsize;
	uint64_t res = t->cfg.reserve_bytes > 0 ? (uint64_t)t->cfg.reserve_bytes : 0;
	*cap = total > res ? total - res : 0;
	*used = used_b;
	return 0;
}

/* Capacity and usage of mp as the watermarks see them. 0 or -errno. */
static int mp_usage(tgt_t *t, const tgt_mountpath_t *mp, uint64_t *cap, uint64_t *used)
{
	walk_t w;

	if (t->cfg.lru_quota_bytes > 0) {
		int rc = walk_mountpath(t, mp, &w, 0);
		*used = w.used;
		walk_free(&w);
		*cap = (uint64_t)t->cfg.lru_quota_bytes;
		return rc;
	}
	return fs_usage(t, mp, cap, used);
}

uint64_t tgt_lru_low_bytes(tgt_t *t)
{
	uint64_t total = 0, cap, used;

	for (int i = 0; i < t->n_mountpaths; i++) {
		if (t->cfg.lru_quota_bytes > 0)
			cap = (uint64_t)t->cfg.lru_quota_bytes;
		else if (fs_usage(t, &t->mountpaths[i], &cap, &used) != 0)
			continue;
		total += cap / 100 * (uint64_t)t->cfg.lru_low_pct;
	}
	return total;
}

/* ---- eviction ---- */

/* Oldest first; under a live hint, by next use (tgt_hint_rank_cmp). */
static int by_rank(const void *a, const void *b)
{
	const victim_t *x = a, *y = b;

	return tgt_hint_rank_cmp(&x->rank, &y->rank);
}

/* Unlinks one victim under its name lock unless it was read since the walk. Returns bytes freed. */
static uint64_t evict_one(tgt_t *t, const tgt_mountpath_t *mp, const victim_t *v)
{
	char provider[TGT_PROVIDER_MAX], bucket[FT_BUCKET_NAME_MAX + 1];
	uint64_t h, freed = 0;
	struct stat st;

	if (!v->named || recent_get(t->lru, (h = v->h)) > v->rank.at)
		return 0;
	tgt_name_lock_hash(t, h);
	if (fstatat(mp->root_fd, v->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    unlinkat(mp->root_fd, v->rel, 0) == 0) {
		freed = (uint64_t)st.st_size;
		tgt_parent_prune(mp, v->rel);
	}
	tgt_name_unlock_hash(t, h);
	if (freed == 0)
		return 0;
	const char *slash = strchr(v->rel, '/');
	const char *slash2 = slash ? strchr(slash + 1, '/') : NULL;
	if (slash && slash2 && (size_t)(slash - v->rel) < sizeof(provider) &&
	    (size_t)(slash2 - slash - 1) < sizeof(bucket)) {
		snprintf(provider, sizeof(provider), "%.*s", (int)(slash - v->rel), v->rel);
		snprintf(bucket, sizeof(bucket), "%.*s", (int)(slash2 - slash - 1), slash + 1);
		tgt_list_bump(t, provider, bucket);
	}
	ft_debug("lru: evicted %s/%s (%" PRIu64 " bytes)", mp->path, v->rel, freed);
	if (freed > 0) {
		ft_metric_inc(FT_M_LRU_EVICTED_OBJECTS);
		ft_metric_add(FT_M_LRU_EVICTED_BYTES, 0, 0, freed);
	}
	return freed;
}

/* Evicts oldest-first until usage <= goal. Caller holds sweep_lock. Returns usage after. */
static uint64_t evict_to(tgt_t *t, const tgt_mountpath_t *mp, uint64_t used, uint64_t goal)
{
	walk_t w;
	size_t n_ev = 0;

	if (walk_mountpath(t, mp, &w, 1) != 0) {
		ft_warn("lru: mountpath %s: walk incomplete", mp->path);
		if (w.n == 0)
			goto out;
	}
	if (w.n > 0)
		qsort(w.v, w.n, sizeof(*w.v), by_rank);
	for (size_t i = 0; i < w.n && used > goal; i++) {
		uint64_t freed = evict_one(t, mp, &w.v[i]);
		used = used > freed ? used - freed : 0;
		n_ev += freed > 0;
	}
	if (n_ev > 0) {
		tgt_fcache_sweep_now(t); /* an evicted file the open-file cache kept would hold its space */
		ft_info("lru: mountpath %s: evicted %zu objects%s, usage now %" PRIu64 " bytes", mp->path, n_ev,
			w.hints ? " by next use under order hints" : "", used);
	}
out:
	walk_free(&w);
	return used;
}

static void sweep(tgt_t *t)
{
	pthread_mutex_lock(&t->lru->sweep_lock);
	for (int i = 0; i < t->n_mountpaths; i++) {
		const tgt_mountpath_t *mp = &t->mountpaths[i];
		uint64_t cap, used;
		if (mp_usage(t, mp, &cap, &used) != 0 || cap == 0)
			continue;
		if (used <= cap / 100 * (uint64_t)t->cfg.lru_high_pct)
			continue;
		evict_to(t, mp, used, cap / 100 * (uint64_t)t->cfg.lru_low_pct);
	}
	pthread_mutex_unlock(&t->lru->sweep_lock);
}

int tgt_lru_reserve(const tgt_obj_t *o, uint64_t size)
{
	tgt_t *t = o->t;
	uint64_t cap, used;
	int rc;

	pthread_mutex_lock(&t->lru->sweep_lock);
	rc = mp_usage(t, o->mp, &cap, &used);
	if (rc != 0)
		goto out;
	if (size > cap) {
		rc = -ENOSPC;
		goto out;
	}
	if (used + size > cap)
		used = evict_to(t, o->mp, used, cap - size);
	rc = used + size > cap ? -ENOSPC : 0;
out:
	pthread_mutex_unlock(&t->lru->sweep_lock);
	return rc;
}

/* ---- the background sweeper ---- */

static void sweep_service(void *arg)
{
	sweep(arg);
}

/*
 * Metrics collector: capacity and usage of every active mountpath as the filesystem reports them (statvfs: no
 * walk, so a scrape stays cheap even with lru_quota_bytes). Slots are never reused, so reading them without the
 * attach/detach lock sees a path and its fds or a slot about to turn active, never freed memory.
 */
static void usage_metrics(ft_strbuf_t *out, void *arg)
{
	static const char *const names[] = {"ft_mountpath_capacity_bytes", "ft_mountpath_used_bytes"};
	static const char *const helps[] = {"Capacity of a mountpath's filesystem for objects (available to us "
					    "plus used, minus reserve_bytes).",
					    "Bytes used on a mountpath's filesystem."};
	tgt_t *t = arg;
	int n = t->n_mountpaths;
	uint64_t cap[FT_MAX_MOUNTPATHS], used[FT_MAX_MOUNTPATHS];
	bool ok[FT_MAX_MOUNTPATHS];

	for (int i = 0; i < n; i++)
		ok[i] = tgt_mountpath_slot_state(t, i) == 0 && fs_usage(t, &t->mountpaths[i], &cap[i], &used[i]) == 0;
	for (int k = 0; k < 2; k++) {
		ft_metrics_family(out, names[k], helps[k], "gauge");
		for (int i = 0; i < n; i++) {
			if (!ok[i])
				continue;
			ft_strbuf_addf(out, "%s{mountpath=\"", names[k]);
			ft_metrics_escape(out, t->mountpaths[i].path);
			ft_strbuf_addf(out, "\"} %" PRIu64 "\n", k == 0 ? cap[i] : used[i]);
		}
	}
}

int tgt_lru_start(tgt_t *t)
{
	tgt_lru_t *lru = calloc(1, sizeof(*lru));

	if (lru == NULL)
		return -1;
	pthread_mutex_init(&lru->recent_lock, NULL);
	pthread_mutex_init(&lru->sweep_lock, NULL);
	t->lru = lru;
	ft_metrics_add_collector(usage_metrics, t);
	if (tgt_service_start(&lru->sweeper, t->cfg.lru_interval_ms, sweep_service, t) != 0) {
		tgt_lru_stop(t);
		return -1;
	}
	return 0;
}

void tgt_lru_kick(tgt_t *t)
{
	if (t->lru)
		tgt_service_kick(&t->lru->sweeper);
}

void tgt_lru_stop(tgt_t *t)
{
	tgt_lru_t *lru = t->lru;

	if (lru == NULL)
		return;
	ft_metrics_remove_collector(usage_metrics, t);
	tgt_service_stop(&lru->sweeper);
	t->lru = NULL;
	pthread_mutex_destroy(&lru->sweep_lock);
	pthread_mutex_destroy(&lru->recent_lock);
	free(lru);
}
