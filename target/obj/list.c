/* SPDX-License-Identifier: Apache-2.0 */
/* Target object listing: per-bucket sorted name snapshots, the control-port GET /v1/list, local name walks for jobs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/names.h"
#include "cloud/backend.h"
#include "core/keymap.h"
#include "core/lom.h"
#include "obj/listwalk.h"
#include "target.h"

/*
 * DESIGN
 * Listing pages through a bucket (page size 1 over 10,000 objects means 10,000 calls), so each
 * bucket keeps a sorted snapshot of its object names built by one walk of
 * "<mp>/<provider>/<bucket>/" on every mountpath. A per-bucket generation counter, bumped by every
 * publish and delete, invalidates it: the snapshot records the generation read before its walk,
 * and a call finding a different generation rebuilds. A page is then two binary searches plus
 * one metadata read per returned entry. The walk uses openat/fdopendir/readdir with d_type and one
 * name buffer and opens no file, so a rebuild stays cheap while PUTs keep invalidating it.
 * Names that are no path (core/keymap.h) come from the xattrs of "<bucket>/.ft-keys/" (one open
 * each) and sort with the others by their real names.
 * A regular file counts as an object only with valid metadata matching its size; that is checked
 * when a page reaches it (an invalid one is logged once per snapshot and skipped).
 * Remote buckets (the cached objects) are listed exactly as GET sees them: a name counts only on
 * its HRW mountpath (where GET looks), never a stray copy left on another one.
 * The same snapshot feeds jobs over local objects (tgt_list_items: a copy of the names).
 *
 * LOCKING
 * cache->lock guards the chain of bucket entries (entries live until tgt_list_fini);
 * entry->lock guards its snapshot and serializes rebuilds; entry->gen is atomic.
 */

#define PAGE_DEFAULT 1000
#define PAGE_MAX 10000

typedef struct {
	uint8_t mp;    /* index of the mountpath holding it */
	uint8_t bad;   /* found without valid metadata (set under the bucket lock) */
	uint8_t keyed; /* found as a hashed file (core/keymap.h), not at its path */
	char name[];
} list_ent_t;

typedef struct bucket_list {
	struct bucket_list *next;
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	atomic_uint_fast64_t gen;
	pthread_mutex_t lock;
	int have_snap;
	uint64_t snap_gen;
	list_ent_t **ents; /* sorted by strcmp of the name, unique */
	size_t n;
} bucket_list_t;

struct tgt_list_cache {
	pthread_mutex_t lock;
	bucket_list_t *head;
};

/* Accumulator of one walk. */
typedef struct {
	list_ent_t **v;
	size_t n, cap;
	size_t strays;
	int oom;
} collect_t;

int tgt_list_init(tgt_t *t)
{
	tgt_list_cache_t *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	pthread_mutex_init(&c->lock, NULL);
	t->lists = c;
	return 0;
}

static void snap_free(bucket_list_t *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->ents[i]);
	free(b->ents);
	b->ents = NULL;
	b->n = 0;
	b->have_snap = 0;
}

void tgt_list_fini(tgt_t *t)
{
	tgt_list_cache_t *c = t->lists;
	if (!c)
		return;
	bucket_list_t *b = c->head;
	while (b) {
		bucket_list_t *next = b->next;
		snap_free(b);
		pthread_mutex_destroy(&b->lock);
		free(b);
		b = next;
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
	t->lists = NULL;
}

/* The bucket's entry, created on first use; NULL only on allocation failure. */
static bucket_list_t *bucket_entry(tgt_t *t, const char *provider, const char *bucket)
{
	tgt_list_cache_t *c = t->lists;
	bucket_list_t *b;

	pthread_mutex_lock(&c->lock);
	for (b = c->head; b; b = b->next)
		if (strcmp(b->bucket, bucket) == 0 && strcmp(b->provider, provider) == 0)
			goto out;
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out;
	strncpy(b->provider, provider, sizeof(b->provider) - 1);
	strncpy(b->bucket, bucket, sizeof(b->bucket) - 1);
	atomic_init(&b->gen, 0);
	pthread_mutex_init(&b->lock, NULL);
	b->next = c->head;
	c->head = b;
out:
	pthread_mutex_unlock(&c->lock);
	return b;
}

void tgt_list_bump(tgt_t *t, const char *provider, const char *bucket)
{
	bucket_list_t *b = bucket_entry(t, provider, bucket);
	if (b)
		atomic_fetch_add(&b->gen, 1);
}

void tgt_list_forget(tgt_t *t, const char *provider, const char *bucket)
{
	bucket_list_t *b = bucket_entry(t, provider, bucket);
	if (!b)
		return;
	atomic_fetch_add(&b->gen, 1);
	pthread_mutex_lock(&b->lock);
	snap_free(b);
	pthread_mutex_unlock(&b->lock);
}

static int push(collect_t *c, const char *name, size_t name_len, int mp, int keyed)
{
	list_ent_t *e;

	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		list_ent_t **v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return -1;
		c->v = v;
		c->cap = cap;
	}
	e = malloc(sizeof(*e) + name_len + 1);
	if (!e)
		return -1;
	e->mp = (uint8_t)mp;
	e->bad = 0;
	e->keyed = (uint8_t)keyed;
	memcpy(e->name, name, name_len + 1);
	c->v[c->n++] = e;
	return 0;
}

/*
 * Walks the directory fd (consumed); name[0..len) is its path relative to the bucket directory.
 * The name buffer has room for FT_OBJ_NAME_MAX + 1 bytes.
 */
static void walk(int fd, char *name, size_t len, int mp, collect_t *c)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;

	if (!d) {
		close(fd);
		return;
	}
	while (!c->oom && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t leaf_len = strlen(de->d_name), sep = len ? 1 : 0;
		if (len == 0 && strcmp(de->d_name, TGT_KEYS_DIR) == 0)
			continue; /* hashed names: key_push */
		if (len + sep + leaf_len > FT_OBJ_NAME_MAX) {
			c->strays++;
			continue;
		}
		if (sep)
			name[len] = '/';
		memcpy(name + len + sep, de->d_name, leaf_len + 1);
		unsigned char type = de->d_type;
		if (type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				type = DT_UNKNOWN;
			else
				type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type == DT_DIR) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				walk(sub, name, len + sep + leaf_len, mp, c);
		} else if (type == DT_REG) {
			if (push(c, name, len + sep + leaf_len, mp, 0) != 0)
				c->oom = 1;
		} else {
			c->strays++;
		}
		name[len] = '\0';
	}
	closedir(d);
}

typedef struct {
	collect_t *c;
	int mp;
} key_arg_t;

/* A tgt_key_walk_fn: a hashed object's real name joins the walk. */
static int key_push(void *arg, int dfd, const char *leaf, const char *name, size_t len)
{
	key_arg_t *k = arg;

	(void)dfd;
	(void)leaf;
	if (push(k->c, name, len, k->mp, 1) != 0) {
		k->c->oom = 1;
		return 1;
	}
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	const list_ent_t *x = *(list_ent_t *const *)a, *y = *(list_ent_t *const *)b;
	int c = strcmp(x->name, y->name);

	/* one name at its path and in a hashed file (a write raced a delete): the path is the object */
	return c != 0 ? c : (int)x->keyed - (int)y->keyed;
}

/* Rebuilds b's snapshot from disk (b->lock held). 0, or -1 on allocation failure. */
static int snap_build(tgt_t *t, bucket_list_t *b)
{
	char rel[TGT_REL_MAX];
	char name[FT_OBJ_NAME_MAX + 1];
	collect_t c = {0};

	snap_free(b);
	if (tgt_rel_path(rel, sizeof(rel), b->provider, b->bucket, NULL) != 0)
		return -1;
	for (int i = 0; i < t->n_mountpaths && !c.oom; i++) {
		int fd = openat(t->mountpaths[i].root_fd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue; /* nothing stored there yet */
		key_arg_t k = {.c = &c, .mp = i};
		tgt_key_walk(fd, key_push, &k);
		name[0] = '\0';
		walk(fd, name, 0, i, &c);
	}
	if (c.oom) {
		for (size_t i = 0; i < c.n; i++)
			free(c.v[i]);
		free(c.v);
		return -1;
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof(*c.v), ent_cmp);
	/* One name on two mountpaths (after a mountpath change): keep the first. */
	size_t w = 0;
	for (size_t i = 0; i < c.n; i++) {
		if (w > 0 && strcmp(c.v[w - 1]->name, c.v[i]->name) == 0)
			free(c.v[i]);
		else
			c.v[w++] = c.v[i];
	}
	if (c.strays > 0)
		ft_warn("bucket %s/%s: ignored %zu entries that are neither files nor directories", b->provider,
			b->bucket, c.strays);
	b->ents = c.v;
	b->n = w;
	b->have_snap = 1;
	return 0;
}

/* First index whose name is > key (strict) or >= key. */
static size_t bound(const bucket_list_t *b, const char *key, int strict)
{
	size_t lo = 0, hi = b->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(b->ents[mid]->name, key);
		if (cmp < 0 || (strict && cmp == 0))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Reads the metadata of the object at rel on mp: 0 when it is a regular file whose metadata matches its size. */
static int obj_meta(const tgt_mountpath_t *mp, const char *rel, ft_lom_t *lom)
{
	struct stat st;
	int fd, ok;

	fd = openat(mp->root_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ok = ft_lom_fget(fd, lom) == 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	     (uint64_t)st.st_size == lom->size;
	close(fd);
	return ok ? 0 : -1;
}

int tgt_list_holds(const tgt_obj_t *o)
{
	ft_lom_t lom;

	return obj_meta(o->mp, o->rel, &lom) == 0;
}

static int is_ais(const char *provider)
{
	return strcmp(provider, "ais") == 0;
}

/* The path of name's file below a mountpath root: its path, or its hashed file when keyed. 0 or -1. */
static int ent_rel(const bucket_list_t *b, const char *name, int keyed, char *rel, size_t cap)
{
	int n;

	if (!keyed)
		return tgt_rel_path(rel, cap, b->provider, b->bucket, name);
	n = snprintf(rel, cap, "%s/%s/", b->provider, b->bucket);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	return tgt_key_path_hashed(rel + n, cap - (size_t)n, name, strlen(name));
}

/*
 * Reads an entry's metadata: 0, or -1 when it is gone (deleted since the walk) or not a valid
 * object (marked bad and logged once per snapshot). A remote bucket's entry is read on its HRW
 * mountpath: a copy elsewhere is not listed (GET would not find it either).
 */
static int ent_meta(tgt_t *t, const bucket_list_t *b, list_ent_t *e, ft_lom_t *lom)
{
	char rel[TGT_REL_MAX];
	const tgt_mountpath_t *mp = &t->mountpaths[e->mp];

	char other[TGT_REL_MAX];
	struct stat st;

	if (e->bad || ent_rel(b, e->name, e->keyed, rel, sizeof(rel)) != 0)
		return -1;
	if (!is_ais(b->provider))
		mp = tgt_mountpath_pick(t, b->provider, b->bucket, e->name, strlen(e->name));
	if (obj_meta(mp, rel, lom) == 0)
		return 0;
	/* moved to the name's other place since the walk: a restore or a write found that one free */
	if (!tgt_key_hashed(e->name, strlen(e->name)) && ent_rel(b, e->name, !e->keyed, other, sizeof(other)) == 0 &&
	    obj_meta(mp, other, lom) == 0) {
		e->keyed = !e->keyed;
		return 0;
	}
	if (mp != &t->mountpaths[e->mp])
		return -1; /* not on its HRW mountpath: not cached */
	if (fstatat(mp->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
		return -1; /* deleted since the walk (a directory there is other names' path) */
	e->bad = 1;
	ft_warn("bucket %s/%s: %s on %s has no valid object metadata: not listed", b->provider, b->bucket, e->name,
		mp->path);
	return -1;
}

/* The JSON entry of an object. NULL when its name is not valid UTF-8 (logged). */
static json_t *ent_json(const bucket_list_t *b, const char *name, const ft_lom_t *lom)
{
	json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:I}", "name", name, "size", (json_int_t)lom->size, "checksum",
			      lom->cksum, "version", lom->version, "atime", (json_int_t)lom->atime_ns, "mtime",
			      (json_int_t)lom->mtime_ns);
	if (o && lom->etag[0]) /* the S3 ETag, when one was stored (see put.c) */
		json_object_set_new(o, "etag", json_string(lom->etag));
	if (!o)
		ft_warn("bucket %s: object name not representable in JSON, not listed", b->bucket);
	return o;
}

static json_t *page_json(tgt_t *t, const bucket_list_t *b, const char *prefix, const char *token, size_t pagesize)
{
	json_t *entries = json_array();
	size_t plen = strlen(prefix);
	size_t i = bound(b, token, 1), j = bound(b, prefix, 0);
	ft_lom_t lom;

	if (!entries)
		return NULL;
	for (i = i > j ? i : j; i < b->n && json_array_size(entries) < pagesize; i++) {
		list_ent_t *e = b->ents[i];
		if (strncmp(e->name, prefix, plen) != 0)
			break;
		if (ent_meta(t, b, e, &lom) != 0)
			continue;
		json_t *o = ent_json(b, e->name, &lom);
		if (!o)
			continue;
		json_array_append_new(entries, o);
	}
	return json_pack("{s:o}", "entries", entries);
}

/*
 * ARCHIVE LISTING (archive=true)
 * Every member of a shard is listed as "<shard>/<member>" with its size, "in_archive": true and "shard" (shard/list.c), in the same
 * strcmp order as the names, so that the proxy merges and pages it exactly like plain names: a
 * shard's members follow it, after any name that sorts between ("a.tar.bak" < "a.tar/x"). A page
 * merges the snapshot's names with the member lists of the shards already passed (pending); a
 * token inside a shard's members resumes that shard's list after it.
 */
typedef struct {
	tgt_shard_list_t *l;
	size_t pos;
	const char *shard; /* the snapshot entry's name */
} pending_t;

typedef struct {
	pending_t *v;
	size_t n, cap;
} pendings_t;

/* The mountpath an entry is read on (as ent_meta reads it). */
static const tgt_mountpath_t *ent_mp(tgt_t *t, const bucket_list_t *b, const list_ent_t *e)
{
	if (is_ais(b->provider))
		return &t->mountpaths[e->mp];
	return tgt_mountpath_pick(t, b->provider, b->bucket, e->name, strlen(e->name));
}

/* Adds the members of entry e after member name `after` ("" = all) to p, unless e is no shard or is there already. */
static void pending_add(tgt_t *t, const bucket_list_t *b, const list_ent_t *e, const char *after, pendings_t *p)
{
	for (size_t k = 0; k < p->n; k++)
		if (strcmp(p->v[k].shard, e->name) == 0)
			return;
	tgt_shard_list_t *l = tgt_shard_list_open(t, b->provider, b->bucket, e->name, ent_mp(t, b, e));
	if (l == NULL)
		return;
	size_t pos = *after ? tgt_shard_list_after(l, after) : 0;
	if (pos >= tgt_shard_list_count(l)) {
		tgt_shard_list_close(l);
		return;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		pending_t *v = realloc(p->v, cap * sizeof(*v));
		if (v == NULL) {
			tgt_shard_list_close(l);
			return;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (pending_t){.l = l, .pos = pos, .shard = e->name};
}

/*
 * The shards whose members may sort after key although the shard itself does not: those named by
 * a prefix of key followed by a byte <= '/' (by "<shard>/" only when slash_only, for the prefix).
 */
static void pending_from(tgt_t *t, const bucket_list_t *b, const char *key, bool slash_only, pendings_t *p)
{
	size_t n = strlen(key);
	char *name = malloc(n + 1);

	if (name == NULL)
		return;
	for (size_t k = 1; k <= n; k++) {
		if (k < n ? (slash_only ? key[k] != '/' : (unsigned char)key[k] > '/') : slash_only)
			continue;
		memcpy(name, key, k);
		name[k] = '\0';
		size_t i = bound(b, name, 0);
		if (i < b->n && strcmp(b->ents[i]->name, name) == 0)
			pending_add(t, b, b->ents[i], !slash_only && k < n && key[k] == '/' ? key + k + 1 : "", p);
	}
	free(name);
}

static void pending_drop(pendings_t *p, size_t k)
{
	tgt_shard_list_close(p->v[k].l);
	p->v[k] = p->v[--p->n];
}

#define FULL_MAX (FT_OBJ_NAME_MAX + 1 + TGT_SHARD_NAME_MAX + 1)

/*
 * Pending list k's next member name that is listable (after token, with the prefix) into full;
 * 0, or -1 when the list is exhausted (dropped: the caller looks at index k again).
 */
static int pending_head(pendings_t *p, size_t k, const char *prefix, const char *token, char *full, uint64_t *size)
{
	pending_t *q = &p->v[k];

	for (; q->pos < tgt_shard_list_count(q->l); q->pos++) {
		const char *m = tgt_shard_list_name(q->l, q->pos, size);
		if (snprintf(full, FULL_MAX, "%s/%s", q->shard, m) >= FULL_MAX)
			continue;
		if (strncmp(full, prefix, strlen(prefix)) == 0 && strcmp(full, token) > 0)
			return 0;
	}
	pending_drop(p, k);
	return -1;
}

static json_t *page_json_archive(tgt_t *t, const bucket_list_t *b, const char *prefix, const char *token,
				 size_t pagesize)
{
	json_t *entries = json_array();
	size_t plen = strlen(prefix);
	size_t i = bound(b, token, 1), j = bound(b, prefix, 0);
	pendings_t p = {0};
	char *cand = malloc(FULL_MAX), *best_name = malloc(FULL_MAX);
	ft_lom_t lom;

	if (!entries || !cand || !best_name) {
		json_decref(entries);
		entries = NULL;
		goto out;
	}
	pending_from(t, b, token, false, &p);
	pending_from(t, b, prefix, true, &p);
	for (i = i > j ? i : j; json_array_size(entries) < pagesize;) {
		list_ent_t *e = i < b->n && strncmp(b->ents[i]->name, prefix, plen) == 0 ? b->ents[i] : NULL;
		int best = -1;
		uint64_t best_size = 0, size;
		for (size_t k = 0; k < p.n;) {
			if (pending_head(&p, k, prefix, token, cand, &size) != 0)
				continue; /* dropped: k now holds another list */
			if (best < 0 || strcmp(cand, best_name) < 0) {
				best = (int)k;
				best_size = size;
				memcpy(best_name, cand, strlen(cand) + 1);
			}
			k++;
		}
		if (e == NULL && best < 0)
			break;
		if (best >= 0 && (e == NULL || strcmp(best_name, e->name) < 0)) {
			json_t *o = json_pack("{s:s, s:I, s:b, s:s}", "name", best_name, "size", (json_int_t)best_size,
					      "in_archive", 1, "shard", p.v[best].shard);
			if (o)
				json_array_append_new(entries, o);
			p.v[best].pos++;
			continue;
		}
		i++;
		if (ent_meta(t, b, e, &lom) != 0)
			continue;
		json_t *o = ent_json(b, e->name, &lom);
		if (o)
			json_array_append_new(entries, o);
		pending_add(t, b, e, "", &p);
	}
out:
	while (p.n > 0)
		pending_drop(&p, 0);
	free(p.v);
	free(cand);
	free(best_name);
	return entries ? json_pack("{s:o}", "entries", entries) : NULL;
}

/* Parses pagesize: "" or absent or "0" -> default; > max -> max. 0, or -1 when malformed. */
static int parse_pagesize(const char *s, size_t *out)
{
	char *end = NULL;
	long long v;

	*out = PAGE_DEFAULT;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0)
		return -1;
	if (v > 0)
		*out = v > PAGE_MAX ? PAGE_MAX : (size_t)v;
	return 0;
}

/* The bucket's entry with a current snapshot, its lock held; NULL (unlocked) on allocation failure. */
static bucket_list_t *snap_fresh(tgt_t *t, const char *provider, const char *bucket)
{
	bucket_list_t *b = bucket_entry(t, provider, bucket);

	if (!b)
		return NULL;
	pthread_mutex_lock(&b->lock);
	uint64_t gen = atomic_load(&b->gen);
	if ((!b->have_snap || b->snap_gen != gen) && snap_build(t, b) == 0)
		b->snap_gen = gen;
	if (!b->have_snap) {
		pthread_mutex_unlock(&b->lock);
		return NULL;
	}
	return b;
}

void tgt_list_items_free(tgt_list_item_t *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].name);
	free(v);
}

int tgt_list_items(tgt_t *t, const char *provider, const char *bucket, const char *prefix, tgt_list_item_t **out,
		   size_t *n)
{
	size_t plen = prefix ? strlen(prefix) : 0;
	bucket_list_t *b = snap_fresh(t, provider, bucket);
	tgt_list_item_t *v = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (!b)
		return -1;
	size_t first = plen ? bound(b, prefix, 0) : 0, last = first;
	while (last < b->n && (plen == 0 || strncmp(b->ents[last]->name, prefix, plen) == 0))
		last++;
	if (last > first && (v = calloc(last - first, sizeof(*v))) == NULL)
		goto fail;
	for (size_t i = first; i < last; i++, k++) {
		v[k].mp = b->ents[i]->mp;
		if ((v[k].name = strdup(b->ents[i]->name)) == NULL)
			goto fail;
	}
	pthread_mutex_unlock(&b->lock);
	*out = v;
	*n = k;
	return 0;
fail:
	pthread_mutex_unlock(&b->lock);
	tgt_list_items_free(v, k);
	return -1;
}

/* The provider query word: absent, "" or "ais" -> "ais"; a remote provider (or alias) -> its canonical name. */
static const char *list_provider(const char *p)
{
	ft_backend_provider_t bp;

	if (!p || !*p || ft_name_check_provider(p) == 0)
		return "ais";
	if (ft_backend_provider_parse(p, &bp) == 0)
		return ft_backend_provider_name(bp);
	return NULL;
}

static int query_true(const ft_ctl_req_t *req, const char *key)
{
	const char *v = ft_ctl_query(req, key);

	return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/*
 * GET /v1/list on the control port: this target's local names (default); with remote=true, one
 * page of a remote bucket's backend (rlist.c); with a body {"names"}, which of them are held here.
 */
void tgt_list_handle(tgt_t *t, const ft_ctl_req_t *req, ft_ctl_resp_t *resp)
{
	const char *provider = list_provider(ft_ctl_query(req, "provider"));
	const char *bucket = ft_ctl_query(req, "bucket");
	const char *prefix = ft_ctl_query(req, "prefix");
	const char *token = ft_ctl_query(req, "token");
	const char *why = NULL;
	size_t pagesize;

	if (!provider) {
		ft_ctl_error(resp, 400, "unknown provider \"%s\"", ft_ctl_query(req, "provider"));
		return;
	}
	if (!bucket || !*bucket) {
		ft_ctl_error(resp, 400, "query argument \"bucket\" is required");
		return;
	}
	if (ft_name_check_bucket(bucket, &why) != 0) {
		ft_ctl_error(resp, 400, "invalid bucket name: %s", why ? why : "not allowed");
		return;
	}
	if (req->body && req->body_len > 0) {
		tgt_rlist_cached(t, provider, bucket, req, resp);
		return;
	}
	if (query_true(req, "remote")) {
		tgt_rlist_page(t, provider, bucket, req, resp);
		return;
	}
	if (parse_pagesize(ft_ctl_query(req, "pagesize"), &pagesize) != 0) {
		ft_ctl_error(resp, 400, "invalid pagesize \"%s\": expected a number 0..%d",
			     ft_ctl_query(req, "pagesize"), PAGE_MAX);
		return;
	}
	bucket_list_t *b = snap_fresh(t, provider, bucket);
	json_t *page = NULL;
	if (b && query_true(req, "archive")) /* members of shards too (see ARCHIVE LISTING) */
		page = page_json_archive(t, b, prefix ? prefix : "", token ? token : "", pagesize);
	else if (b)
		page = page_json(t, b, prefix ? prefix : "", token ? token : "", pagesize);
	if (b)
		pthread_mutex_unlock(&b->lock);
	if (!page) {
		ft_ctl_error(resp, 500, "bucket \"%s\": listing failed (out of memory)", bucket);
		return;
	}
	resp->status = 200;
	resp->json = page;
}
