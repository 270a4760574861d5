/* SPDX-License-Identifier: Apache-2.0 */
/* The member index of a shard version (name -> size, data offset) and its in-memory cache, built on first access. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fdio.h"
#include "base/log.h"
#include "shard/shard.h"

/*
 * DESIGN
 * Uncompressed TAR and ZIP are indexed by their own header walks (walk.h), which read only
 * headers; TGZ and TAR.LZ4 are decoded once (decode.c), bounded by the decoded-size limit. The
 * index lists each name once: when a name occurs twice (a TAR appended to), the last one wins, as
 * tar(1) extracts it, and nth says which occurrence that is for a decoder walking the archive.
 * CACHE
 * At most CACHE_SLOTS indexes and CACHE_BYTES of them; the least recently used goes first. An
 * entry is keyed by the object's path and its metadata's version, mtime, size and checksum, so a
 * new version (any PUT or append) never finds the old index; the slot of a path is reused by its
 * next version. Users hold a reference (refs, under the cache lock), so an evicted index lives
 * until its last reader puts it back.
 */

#define CACHE_SLOTS 256
#define CACHE_BYTES ((size_t)512 << 20)

struct tgt_shards {
	pthread_mutex_t lock;
	tgt_shard_index_t *slot[CACHE_SLOTS];
	uint64_t clock;
	size_t bytes;
};

/* One entry found by a walk, before duplicates are folded. */
typedef struct {
	char *name;
	uint64_t size;
	int64_t off;
	uint64_t order; /* position in the archive (header offset, or entry number) */
} raw_t;

typedef struct {
	raw_t *v;
	size_t n, cap;
	int fd;
} collect_t;

int tgt_shard_init(tgt_t *t)
{
	tgt_shards_t *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return -1;
	pthread_mutex_init(&c->lock, NULL);
	t->shards = c;
	return 0;
}

void tgt_shard_index_free(tgt_shard_index_t *ix)
{
	if (ix == NULL)
		return;
	free(ix->by_name);
	free(ix->m);
	free(ix);
}

void tgt_shard_fini(tgt_t *t)
{
	tgt_shards_t *c = t->shards;

	if (c == NULL)
		return;
	for (int i = 0; i < CACHE_SLOTS; i++)
		tgt_shard_index_free(c->slot[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
	t->shards = NULL;
}

static int pread_cb(void *arg, void *buf, size_t len, uint64_t off)
{
	return ft_pread_all(*(int *)arg, buf, len, (off_t)off) == 0 ? 0 : -1;
}

static int push(collect_t *c, const char *name, uint64_t size, int64_t off, uint64_t order)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		raw_t *v = realloc(c->v, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	char *copy = strdup(name);
	if (copy == NULL)
		return -ENOMEM;
	c->v[c->n++] = (raw_t){.name = copy, .size = size, .off = off, .order = order};
	return 0;
}

static int walk_cb(void *arg, const tgt_walk_member_t *m)
{
	return m->regular ? push(arg, m->name, m->size, m->data_off, m->hdr_off) : 0;
}

/* TGZ, TAR.LZ4: every entry decoded once (its size is what it decodes to). */
static int walk_decoded(int fd, uint64_t size, tgt_shard_fmt_t fmt, uint64_t limit, collect_t *c, char *err, size_t cap)
{
	tgt_shard_dec_t *d = tgt_shard_dec_open(fd, size, fmt, limit, err, cap);
	char *scratch = malloc(64 * 1024);
	const char *name;
	uint64_t esize, seq = 0;
	bool regular;
	int rc = -ENOMEM;

	if (d == NULL || scratch == NULL) {
		rc = d == NULL ? -EBADMSG : -ENOMEM;
		goto out;
	}
	while ((rc = tgt_shard_dec_next(d, &name, &esize, &regular)) == 1) {
		if (!regular)
			continue;
		if (strlen(name) > TGT_SHARD_NAME_MAX) {
			snprintf(err, cap, "member name longer than %d bytes", TGT_SHARD_NAME_MAX);
			rc = -EBADMSG;
			goto out;
		}
		if ((rc = push(c, name, esize, -1, seq++)) != 0)
			goto out;
		ssize_t n;
		while ((n = tgt_shard_dec_read(d, scratch, 64 * 1024)) > 0)
			;
		if (n < 0) {
			rc = (int)n;
			break;
		}
	}
	if (rc < 0)
		snprintf(err, cap, "%s", tgt_shard_dec_error(d));
out:
	free(scratch);
	tgt_shard_dec_close(d);
	return rc;
}

static int raw_cmp(const void *a, const void *b)
{
	const raw_t *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c != 0 ? c : (x->order < y->order ? -1 : x->order > y->order);
}

/* An effective member while folding: its raw entry, which occurrence it is, its rank in name order. */
typedef struct {
	const raw_t *raw;
	uint32_t nth;
	uint32_t rank;
} eff_t;

static int eff_order_cmp(const void *a, const void *b)
{
	const eff_t *x = a, *y = b;

	return x->raw->order < y->raw->order ? -1 : x->raw->order > y->raw->order;
}

/* Folds duplicates (the last occurrence wins) and lays the members out in archive order, with by_name. */
static int fold(collect_t *c, tgt_shard_index_t *ix)
{
	size_t names = 0, k = 0;
	eff_t *eff = NULL;
	int rc = -ENOMEM;

	if (c->n > 1)
		qsort(c->v, c->n, sizeof(*c->v), raw_cmp);
	eff = malloc((c->n ? c->n : 1) * sizeof(*eff));
	if (eff == NULL)
		goto out;
	uint32_t nth = 0;
	for (size_t i = 0; i < c->n; i++) {
		if (i + 1 < c->n && strcmp(c->v[i].name, c->v[i + 1].name) == 0) {
			nth++;
			continue;
		}
		eff[k] = (eff_t){.raw = &c->v[i], .nth = nth, .rank = (uint32_t)k};
		names += strlen(c->v[i].name) + 1;
		nth = 0;
		k++;
	}
	if (k > 1)
		qsort(eff, k, sizeof(*eff), eff_order_cmp);
	/* One block: the members, then their names. */
	ix->m = malloc(k * sizeof(*ix->m) + names + 1);
	ix->by_name = malloc((k ? k : 1) * sizeof(*ix->by_name));
	if (ix->m == NULL || ix->by_name == NULL)
		goto out;
	char *arena = (char *)(ix->m + k);
	for (size_t j = 0; j < k; j++) {
		size_t len = strlen(eff[j].raw->name) + 1;
		memcpy(arena, eff[j].raw->name, len);
		ix->m[j] = (tgt_shard_member_t){
			.name = arena, .size = eff[j].raw->size, .off = eff[j].raw->off, .nth = eff[j].nth};
		ix->by_name[eff[j].rank] = (uint32_t)j;
		arena += len;
	}
	ix->n = k;
	ix->bytes = sizeof(*ix) + k * (sizeof(*ix->m) + sizeof(*ix->by_name)) + names;
	rc = 0;
out:
	free(eff);
	return rc;
}

static void collect_free(collect_t *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].name);
	free(c->v);
}

int tgt_shard_index_build(int fd, uint64_t size, tgt_shard_fmt_t fmt, uint64_t limit, tgt_shard_index_t **out,
			  char *err, size_t cap)
{
	collect_t c = {.fd = fd};
	tgt_shard_index_t *ix = calloc(1, sizeof(*ix));
	int rc;

	*out = NULL;
	if (ix == NULL)
		return -ENOMEM;
	ix->fmt = fmt;
	ix->tar_end = size;
	err[0] = '\0';
	if (fmt == TGT_SHARD_TAR)
		rc = tgt_tar_walk(pread_cb, &c.fd, size, walk_cb, &c, &ix->tar_end, err, cap);
	else if (fmt == TGT_SHARD_ZIP)
		rc = tgt_zip_walk(pread_cb, &c.fd, size, walk_cb, &c, err, cap);
	else
		rc = walk_decoded(fd, size, fmt, limit, &c, err, cap);
	if (rc == -1)
		rc = -EBADMSG; /* the walks' "corrupt" */
	if (rc > 0)
		rc = 0;
	if (rc == -ENOMEM && !err[0])
		snprintf(err, cap, "out of memory");
	if (rc == 0) {
		rc = fold(&c, ix);
		if (rc != 0)
			snprintf(err, cap, "out of memory");
	}
	collect_free(&c);
	if (rc != 0) {
		tgt_shard_index_free(ix);
		return rc;
	}
	*out = ix;
	return 0;
}

const tgt_shard_member_t *tgt_shard_index_find(const tgt_shard_index_t *ix, const char *name)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ix->m[ix->by_name[mid]].name, name);
		if (c == 0)
			return &ix->m[ix->by_name[mid]];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool same_version(const tgt_shard_index_t *ix, const tgt_obj_t *o, const ft_lom_t *lom, tgt_shard_fmt_t fmt)
{
	return ix->fmt == fmt && ix->size == lom->size && ix->mtime_ns == lom->mtime_ns &&
	       strcmp(ix->version, lom->version) == 0 && strcmp(ix->cksum, lom->cksum) == 0 &&
	       strcmp(ix->rel, o->rel) == 0;
}

/* Drops the cache's reference of slot i (cache lock held). */
static void slot_drop(tgt_shards_t *c, int i)
{
	tgt_shard_index_t *ix = c->slot[i];

	c->slot[i] = NULL;
	c->bytes -= ix->bytes;
	if (--ix->refs == 0)
		tgt_shard_index_free(ix);
}

/* Caches ix (one reference taken for the cache), replacing the path's older version and the least recently used. */
static void cache_insert(tgt_shards_t *c, tgt_shard_index_t *ix)
{
	int free_slot = -1, lru = -1;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CACHE_SLOTS; i++) {
		if (c->slot[i] != NULL && strcmp(c->slot[i]->rel, ix->rel) == 0)
			slot_drop(c, i);
		if (c->slot[i] == NULL) {
			if (free_slot < 0)
				free_slot = i;
		} else if (lru < 0 || c->slot[i]->used < c->slot[lru]->used) {
			lru = i;
		}
	}
	if (free_slot < 0) {
		free_slot = lru;
		slot_drop(c, lru);
	}
	ix->refs++;
	ix->used = ++c->clock;
	c->slot[free_slot] = ix;
	c->bytes += ix->bytes;
	while (c->bytes > CACHE_BYTES) {
		lru = -1;
		for (int i = 0; i < CACHE_SLOTS; i++)
			if (c->slot[i] != NULL && c->slot[i] != ix &&
			    (lru < 0 || c->slot[i]->used < c->slot[lru]->used))
				lru = i;
		if (lru < 0)
			break;
		slot_drop(c, lru);
	}
	pthread_mutex_unlock(&c->lock);
}

int tgt_shard_index_get(const tgt_obj_t *o, int fd, const ft_lom_t *lom, tgt_shard_fmt_t fmt, bool may_build,
			tgt_shard_index_t **out, char *err, size_t cap)
{
	tgt_shards_t *c = o->t->shards;
	tgt_shard_index_t *ix = NULL;

	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < CACHE_SLOTS; i++) {
		if (c->slot[i] != NULL && same_version(c->slot[i], o, lom, fmt)) {
			ix = c->slot[i];
			ix->refs++;
			ix->used = ++c->clock;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (ix != NULL) {
		*out = ix;
		return 0;
	}
	if (!may_build)
		return -EAGAIN;
	int rc = tgt_shard_index_build(fd, lom->size, fmt, (uint64_t)o->t->cfg.shard_max_decoded_bytes, &ix, err, cap);
	if (rc != 0)
		return rc;
	snprintf(ix->rel, sizeof(ix->rel), "%s", o->rel);
	snprintf(ix->version, sizeof(ix->version), "%s", lom->version);
	snprintf(ix->cksum, sizeof(ix->cksum), "%s", lom->cksum);
	ix->mtime_ns = lom->mtime_ns;
	ix->size = lom->size;
	ix->refs = 1; /* the caller's */
	cache_insert(c, ix);
	*out = ix;
	return 0;
}

void tgt_shard_index_put(tgt_t *t, tgt_shard_index_t *ix)
{
	tgt_shards_t *c = t->shards;

	if (ix == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	int last = --ix->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (last)
		tgt_shard_index_free(ix);
}
