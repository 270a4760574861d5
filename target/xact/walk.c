/* SPDX-License-Identifier: Apache-2.0 */
/* The object walker: every published object of a mountpath, by bucket; and the rebalance walk built on it. */
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
#include "core/keymap.h"
#include "target.h"
#include "xact/rebalance.h"
#include "xact/runner.h"

/* ---- the object walker ---- */

typedef struct {
	const tgt_mountpath_t *mp;
	int bucket;
	tgt_walk_fn fn;
	void *arg;
} walker_t;

/* Walks the directory dfd (consumed) whose objects' names start with name[0..len). 0, or 1 when fn stopped it. */
static int walk_dir(const walker_t *w, int dfd, char *name, size_t len)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int stop = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while (!stop && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t leaf = strlen(de->d_name), sep = len ? 1 : 0;
		if (len + sep + leaf > FT_OBJ_NAME_MAX || (len == 0 && strcmp(de->d_name, TGT_KEYS_DIR) == 0))
			continue; /* the hashed names: walk_key */
		if (sep)
			name[len] = '/';
		memcpy(name + len + sep, de->d_name, leaf + 1);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(st.st_mode)) {
				int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0)
					stop = walk_dir(w, sub, name, len + sep + leaf);
			} else if (S_ISREG(st.st_mode)) {
				stop = w->fn(w->arg, w->mp, w->bucket, name, len + sep + leaf) != 0;
			}
		}
		name[len] = '\0';
	}
	closedir(d);
	return stop;
}

/* A tgt_key_walk_fn: a hashed object, by its real name. */
static int walk_key(void *arg, int dfd, const char *leaf, const char *name, size_t len)
{
	const walker_t *w = arg;

	(void)dfd;
	(void)leaf;
	return w->fn(w->arg, w->mp, w->bucket, name, len) != 0;
}

/* tgt_walk_objects under top ("" for the objects, TGT_EC_DIR for what is held for other owners). */
static int walk_tree(const tgt_mountpath_t *mp, const ft_bmd_t *bmd, const char *top, tgt_walk_fn fn, void *arg)
{
	char rel[TGT_REL_MAX], path[TGT_REL_MAX + 8], name[FT_OBJ_NAME_MAX + 1];
	walker_t w = {.mp = mp, .fn = fn, .arg = arg};

	for (int b = 0; b < bmd->n; b++) {
		const ft_bucket_t *bk = &bmd->buckets[b];
		if (tgt_rel_path(rel, sizeof(rel), bk->provider, bk->name, NULL) != 0)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", top, top[0] ? "/" : "", rel);
		int fd = openat(mp->root_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		name[0] = '\0';
		w.bucket = b;
		if (tgt_key_walk(fd, walk_key, &w) != 0) {
			close(fd);
			return 1;
		}
		if (walk_dir(&w, fd, name, 0) != 0)
			return 1;
	}
	return 0;
}

int tgt_walk_objects(const tgt_mountpath_t *mp, const ft_bmd_t *bmd, tgt_walk_fn fn, void *arg)
{
	return walk_tree(mp, bmd, "", fn, arg);
}

int tgt_walk_held(const tgt_mountpath_t *mp, const ft_bmd_t *bmd, tgt_walk_fn fn, void *arg)
{
	return walk_tree(mp, bmd, TGT_EC_DIR, fn, arg);
}

/* ---- the rebalance walk: a run of runner.c over the misplaced objects ---- */

typedef struct {
	tgt_t *t;
	const tgt_mountpath_t **srcs;
	int n_src;
	ft_bmd_t *bmd;
	ft_smap_t *smap;
	tgt_run_t *run; /* NULL: only count (rb_walk_count) */
	size_t n;       /* misplaced objects found */
	int oom;
} walk_t;

/* Whether name (of bucket b, found on mp) is placed elsewhere now. */
static int misplaced(const walk_t *w, const tgt_mountpath_t *mp, const ft_bucket_t *b, const char *name, size_t len)
{
	const ft_node_t *owner = ft_smap_owner(w->smap, b->provider, b->name, name, len);

	if (owner && strcmp(owner->id, w->t->id) != 0)
		return 1;
	return tgt_mountpath_pick(w->t, b->provider, b->name, name, len) != mp;
}

/* A tgt_walk_fn: counts the object, and adds it to the run when misplaced. */
static int visit(void *arg, const tgt_mountpath_t *mp, int bucket, const char *name, size_t len)
{
	walk_t *w = arg;

	if (w->run && tgt_run_aborted(w->run))
		return 1;
	atomic_fetch_add(&w->t->rebalance->scanned, 1);
	if (!misplaced(w, mp, &w->bmd->buckets[bucket], name, len))
		return 0;
	w->n++;
	if (!w->run)
		return 0;
	if (tgt_run_add(w->run, name, mp, bucket) != 0) {
		w->oom = 1;
		return 1;
	}
	atomic_fetch_add(&w->t->rebalance->total, 1);
	return 0;
}

/* The run's collector: every source mountpath in turn. */
static int walk_collect(tgt_run_t *r, void *arg)
{
	walk_t *w = arg;

	for (int s = 0; s < w->n_src && !tgt_run_aborted(r); s++)
		if (tgt_walk_objects(w->srcs[s], w->bmd, visit, w) != 0)
			break;
	if (w->oom) {
		tgt_run_error(r, "walk", "out of memory: the walk is incomplete");
		return -1;
	}
	return tgt_run_aborted(r) ? 1 : 0;
}

/* The run's step: moves one object where it belongs now (tgt_rebalance_job_obj). */
static int walk_step(tgt_run_t *r, const tgt_run_item_t *it, void *arg, int64_t *bytes, char *err, size_t cap)
{
	walk_t *w = arg;
	tgt_obj_t o;

	(void)r;
	if (rb_obj_init(&o, w->t, &w->bmd->buckets[it->bucket], it->mp, it->name) != 0)
		return 1;
	return tgt_rebalance_job_obj(&o, bytes, err, cap);
}

static void walk_label(const tgt_run_item_t *it, void *arg, char *buf, size_t cap)
{
	walk_t *w = arg;

	snprintf(buf, cap, "%s/%s", w->bmd->buckets[it->bucket].name, it->name);
}

/*
 * Walks srcs and moves what is misplaced. gen: the generation this walk belongs to (-1: it cannot
 * be aborted by a newer request, only by the daemon stopping). Returns 0 when complete, 1 when aborted.
 */
int rb_walk_move(tgt_t *t, const tgt_mountpath_t **srcs, int n_src, int gen)
{
	tgt_rebalance_t *rb = t->rebalance;
	walk_t w = {.t = t, .srcs = srcs, .n_src = n_src};
	tgt_run_conf_t c = {.id = rb->id,
			    .kind = rb->kind,
			    .threads = RB_THREADS,
			    .collect = walk_collect,
			    .step = walk_step,
			    .label = walk_label,
			    .arg = &w,
			    .stats = &rb->stats};
	int aborted;

	w.bmd = ft_bmd_current();
	w.smap = ft_smap_current();
	if (!w.bmd || !w.smap) {
		aborted = atomic_load(&rb->stopping) || (gen >= 0 && atomic_load(&rb->gen) != gen);
		goto done;
	}
	w.run = tgt_run_new(&c);
	if (!w.run) {
		rb_note_error(t, "walk", "out of memory: no walk");
		aborted = 1;
		goto done;
	}
	pthread_mutex_lock(&rb->lock);
	rb->run = w.run;
	rb->run_gen = gen;
	int stale = atomic_load(&rb->stopping) || (gen >= 0 && atomic_load(&rb->gen) != gen);
	pthread_mutex_unlock(&rb->lock);
	if (stale)
		tgt_run_abort(w.run);
	tgt_run_run(w.run);
	pthread_mutex_lock(&rb->lock);
	rb->run = NULL;
	pthread_mutex_unlock(&rb->lock);
	aborted = tgt_run_aborted(w.run) || w.oom;
	tgt_run_free(w.run);
done:
	ft_bmd_put(w.bmd);
	ft_smap_put(w.smap);
	return aborted;
}

/* Objects still stored on mp (for a detach: what the walk could not move). */
size_t rb_walk_count(tgt_t *t, const tgt_mountpath_t *mp)
{
	/* Placement never picks a detaching mountpath: everything found there counts. */
	walk_t w = {.t = t, .srcs = &mp, .n_src = 1};

	w.bmd = ft_bmd_current();
	w.smap = ft_smap_current();
	if (w.bmd && w.smap)
		tgt_walk_objects(mp, w.bmd, visit, &w);
	ft_bmd_put(w.bmd);
	ft_smap_put(w.smap);
	return w.n;
}
