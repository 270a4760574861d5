/* SPDX-License-Identifier: Apache-2.0 */
/* Per-name locking of the target: the name lock stripes, the publish lock, and exact-name holds (see namelock.h). */
#include <stdlib.h>
#include <string.h>

#include "core/namelock.h"

#define TGT_NAME_LOCKS 64   /* name lock stripes */
#define TGT_HOLD_BUCKETS 64 /* hold lists, by name hash */

/* The holds of the names hashed here. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	tgt_hold_t *held; /* guarded by mu */
} hold_bucket_t;

struct tgt_namelocks {
	pthread_mutex_t stripes[TGT_NAME_LOCKS];
	pthread_rwlock_t publish;
	hold_bucket_t holds[TGT_HOLD_BUCKETS];
};

int tgt_namelock_init(tgt_t *t)
{
	struct tgt_namelocks *n = calloc(1, sizeof(*n));
	pthread_rwlockattr_t attr;

	if (n == NULL)
		return -1;
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	int rc = pthread_rwlock_init(&n->publish, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc != 0) {
		free(n);
		return -1;
	}
	for (int i = 0; i < TGT_NAME_LOCKS; i++)
		pthread_mutex_init(&n->stripes[i], NULL);
	for (int i = 0; i < TGT_HOLD_BUCKETS; i++) {
		pthread_mutex_init(&n->holds[i].mu, NULL);
		pthread_cond_init(&n->holds[i].cond, NULL);
	}
	t->names = n;
	return 0;
}

void tgt_namelock_fini(tgt_t *t)
{
	struct tgt_namelocks *n = t->names;

	if (n == NULL)
		return;
	t->names = NULL;
	for (int i = 0; i < TGT_NAME_LOCKS; i++)
		pthread_mutex_destroy(&n->stripes[i]);
	for (int i = 0; i < TGT_HOLD_BUCKETS; i++) {
		pthread_mutex_destroy(&n->holds[i].mu);
		pthread_cond_destroy(&n->holds[i].cond);
	}
	pthread_rwlock_destroy(&n->publish);
	free(n);
}

void tgt_name_lock_hash(tgt_t *t, uint64_t name_hash)
{
	pthread_mutex_lock(&t->names->stripes[name_hash % TGT_NAME_LOCKS]);
}

int tgt_name_trylock_hash(tgt_t *t, uint64_t name_hash)
{
	return pthread_mutex_trylock(&t->names->stripes[name_hash % TGT_NAME_LOCKS]) == 0 ? 0 : -1;
}

void tgt_name_unlock_hash(tgt_t *t, uint64_t name_hash)
{
	pthread_mutex_unlock(&t->names->stripes[name_hash % TGT_NAME_LOCKS]);
}

void tgt_name_lock(const tgt_obj_t *o)
{
	tgt_name_lock_hash(o->t, o->hash);
}

void tgt_name_unlock(const tgt_obj_t *o)
{
	tgt_name_unlock_hash(o->t, o->hash);
}

void tgt_publish_lock_shared(tgt_t *t)
{
	pthread_rwlock_rdlock(&t->names->publish);
}

void tgt_publish_lock_exclusive(tgt_t *t)
{
	pthread_rwlock_wrlock(&t->names->publish);
}

void tgt_publish_unlock(tgt_t *t)
{
	pthread_rwlock_unlock(&t->names->publish);
}

/* Whether hold a is on o's name for kind. */
static int same_hold(const tgt_hold_t *a, const tgt_obj_t *o, tgt_hold_kind_t kind)
{
	return a->kind == kind && a->o->hash == o->hash && a->o->obj_len == o->obj_len &&
	       (o->obj_len == 0 || memcmp(a->o->obj, o->obj, o->obj_len) == 0) &&
	       strcmp(a->o->bucket, o->bucket) == 0 && strcmp(a->o->provider, o->provider) == 0;
}

void tgt_name_hold(const tgt_obj_t *o, tgt_hold_kind_t kind, tgt_hold_t *h)
{
	hold_bucket_t *b = &o->t->names->holds[o->hash % TGT_HOLD_BUCKETS];

	h->o = o;
	h->kind = kind;
	pthread_mutex_lock(&b->mu);
	for (;;) {
		const tgt_hold_t *p = b->held;
		while (p != NULL && !same_hold(p, o, kind))
			p = p->next;
		if (p == NULL)
			break;
		pthread_cond_wait(&b->cond, &b->mu);
	}
	h->next = b->held;
	b->held = h;
	pthread_mutex_unlock(&b->mu);
}

void tgt_name_release(tgt_hold_t *h)
{
	hold_bucket_t *b = &h->o->t->names->holds[h->o->hash % TGT_HOLD_BUCKETS];

	pthread_mutex_lock(&b->mu);
	for (tgt_hold_t **p = &b->held; *p != NULL; p = &(*p)->next) {
		if (*p == h) {
			*p = h->next;
			break;
		}
	}
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}
