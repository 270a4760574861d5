/* The rebalance walker: finds the objects the current map and mountpath set place elsewhere, and moves them. */
#include <dirent.h>
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
#include "cluster/smap.h"
#include "target.h"
#include "xact/rebalance.h"

/* ---- the walker ---- */

typedef struct {
	int src;    /* index in run_t.srcs */
	int bucket; /* index in run_t.bmd->buckets */
	char *name; /* owned */
} item_t;

typedef struct {
	tgt_t *t;
	const tgt_mountpath_t **srcs;
	int n_src;
	ft_bmd_t *bmd;
	ft_smap_t *smap;
	item_t *items;
	size_t n, cap;
	atomic_size_t next;
	int gen; /* -1: not abortable (only stop ends it) */
	int oom;
	size_t on_src[FT_MAX_MOUNTPATHS]; /* items found per source */
} run_t;

static int run_aborted(const run_t *r)
{
	if (atomic_load(&r->t->rebalance->stopping))
		return 1;
	return r->gen >= 0 && atomic_load(&r->t->rebalance->gen) != r->gen;
}

/* Whether name (of bucket b, found on srcs[src]) is placed elsewhere now. */
static int misplaced(const run_t *r, int src, const ft_bucket_t *b, const char *name, size_t len)
{
	const ft_node_t *owner = ft_smap_owner(r->smap, b->provider, b->name, name, len);

	if (owner && strcmp(owner->id, r->t->id) != 0)
		return 1;
	return tgt_mountpath_pick(r->t, b->provider, b->name, name, len) != r->srcs[src];
}

static void collect(run_t *r, int dfd, char *name, size_t len, int src, int bucket)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (!r->oom && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t leaf = strlen(de->d_name), sep = len ? 1 : 0;
		if (len + sep + leaf > FT_OBJ_NAME_MAX)
			continue;
		if (sep)
			name[len] = '/';
		memcpy(name + len + sep, de->d_name, leaf + 1);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(st.st_mode)) {
				int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0)
					collect(r, sub, name, len + sep + leaf, src, bucket);
			} else if (S_ISREG(st.st_mode)) {
				atomic_fetch_add(&r->t->rebalance->scanned, 1);
				if (misplaced(r, src, &r->bmd->buckets[bucket], name, len + sep + leaf)) {
					if (r->n == r->cap) {
						size_t cap = r->cap ? r->cap * 2 : 1024;
						item_t *v = realloc(r->items, cap * sizeof(*v));
						if (!v) {
							r->oom = 1;
							break;
						}
						r->items = v;
						r->cap = cap;
					}
					item_t *it = &r->items[r->n];
					it->src = src;
					it->bucket = bucket;
					it->name = strdup(name);
					if (!it->name) {
						r->oom = 1;
						break;
					}
					r->n++;
					r->on_src[src]++;
				}
			}
		}
		name[len] = '\0';
	}
	closedir(d);
}

static void *mover_main(void *arg)
{
	run_t *r = arg;
	char err[400];

	for (;;) {
		if (run_aborted(r))
			break;
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->n)
			break;
		item_t *it = &r->items[i];
		const ft_bucket_t *b = &r->bmd->buckets[it->bucket];
		tgt_obj_t o;
		int64_t bytes = 0;
		if (rb_obj_init(&o, r->t, b, r->srcs[it->src], it->name) != 0)
			continue;
		err[0] = '\0';
		int rc = tgt_rebalance_job_obj(&o, &bytes, err, sizeof(err));
		if (rc == 0) {
			atomic_fetch_add(&r->t->rebalance->objects, 1);
			atomic_fetch_add(&r->t->rebalance->bytes, bytes);
		} else if (rc < 0) {
			char what[FT_BUCKET_NAME_MAX + FT_OBJ_NAME_MAX + 8];
			snprintf(what, sizeof(what), "%s/%s", b->name, it->name);
			rb_note_error(r->t, what, err);
		}
	}
	return NULL;
}

/*
 * Walks srcs and moves what is misplaced. gen: the generation this walk belongs to (-1: it cannot
 * be aborted by a newer request, only by the daemon stopping). Returns 0 when complete, 1 when aborted.
 */
int rb_walk_move(tgt_t *t, const tgt_mountpath_t **srcs, int n_src, int gen)
{
	char rel[TGT_REL_MAX], name[FT_OBJ_NAME_MAX + 1];
	run_t r = {.t = t, .srcs = srcs, .n_src = n_src, .gen = gen};
	pthread_t th[RB_THREADS];
	int n_th = 0, aborted;

	r.bmd = ft_bmd_current();
	r.smap = ft_smap_current();
	if (!r.bmd || !r.smap)
		goto done;
	for (int s = 0; s < n_src && !r.oom && !run_aborted(&r); s++) {
		for (int b = 0; b < r.bmd->n && !r.oom; b++) {
			const ft_bucket_t *bk = &r.bmd->buckets[b];
			if (tgt_rel_path(rel, sizeof(rel), bk->provider, bk->name, NULL) != 0)
				continue;
			int fd = openat(srcs[s]->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0)
				continue;
			name[0] = '\0';
			collect(&r, fd, name, 0, s, b);
		}
	}
	if (r.oom)
		rb_note_error(t, "walk", "out of memory: the walk is incomplete");
	atomic_store(&t->rebalance->total, (long long)r.n);
	for (int i = 0; i < RB_THREADS && r.n > 0; i++)
		if (pthread_create(&th[n_th], NULL, mover_main, &r) == 0)
			n_th++;
	if (r.n > 0 && n_th == 0)
		mover_main(&r);
	for (int i = 0; i < n_th; i++)
		pthread_join(th[i], NULL);
done:
	aborted = run_aborted(&r) || r.oom;
	for (size_t i = 0; i < r.n; i++)
		free(r.items[i].name);
	free(r.items);
	ft_bmd_put(r.bmd);
	ft_smap_put(r.smap);
	return aborted;
}

/* Objects still stored on mp (for a detach: what the walk could not move). */
size_t rb_walk_count(tgt_t *t, const tgt_mountpath_t *mp)
{
	char rel[TGT_REL_MAX], name[FT_OBJ_NAME_MAX + 1];
	const tgt_mountpath_t *srcs[1] = {mp};
	/* A run whose placement test always says "misplaced": nothing on a detached mountpath stays. */
	run_t r = {.t = t, .srcs = srcs, .n_src = 1, .gen = -1};
	size_t n = 0;

	r.bmd = ft_bmd_current();
	r.smap = ft_smap_current();
	for (int b = 0; r.bmd && r.smap && b < r.bmd->n && !r.oom; b++) {
		const ft_bucket_t *bk = &r.bmd->buckets[b];
		if (tgt_rel_path(rel, sizeof(rel), bk->provider, bk->name, NULL) != 0)
			continue;
		int fd = openat(mp->root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		name[0] = '\0';
		collect(&r, fd, name, 0, 0, b);
	}
	n = r.n + (size_t)r.oom;
	for (size_t i = 0; i < r.n; i++)
		free(r.items[i].name);
	free(r.items);
	ft_bmd_put(r.bmd);
	ft_smap_put(r.smap);
	return n;
}
