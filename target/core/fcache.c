/* SPDX-License-Identifier: Apache-2.0 */
/* Open-file cache of warm GETs and batch items (see core/fcache.h): tables, validation, sweep, shutdown. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/log.h"
#include "base/metrics.h"
#include "core/fcache.h"

#define FCACHE_MAX_BYTES (1u << 20) /* larger objects are not kept: their open is a small part of a GET */
#define SWEEP_MS 1000               /* the sweep's period */
#define IDLE_TICKS 30               /* an entry unused for this many sweeps is closed */
#define SWEEP_WAIT_MS 1000          /* tgt_fcache_sweep_now waits for the loops' sweeps at most this long */
#define SWEEP_WAIT_LOOPS 64         /* ... and for at most this many loops (the others are asked, not awaited) */
#define SEEN_WAYS 4                 /* admission: misses remembered per set (direct-mapped lost ~1/3 of them) */

struct fc_entry {
	struct fc_entry *hnext;       /* hash chain */
	struct fc_entry *prev, *next; /* use order, most recent first */
	uint64_t hash;
	int mp_index;
	int fd;
	int refs;               /* responses (or batch items, or the sweep) reading fd */
	bool stale;             /* the sweep's finding, between its two passes */
	bool cached;            /* in its table; false: dropped, closed and freed at the last release */
	struct fc_cache *cache; /* its table's: a shared one is locked for refs and cached */
	unsigned last_tick;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec ctim, mtim;
	uint16_t lom_len; /* the encoded LOM after rel's NUL (~100-200 bytes: a decoded one is 4 KiB) */
	char rel[];       /* o->rel, then the LOM as ft_lom_encode wrote it */
};

typedef struct fc_cache {
	struct fc_cache *next; /* the registry's list */
	tgt_t *t;
	bool shared;        /* the batch items' table: every use under mu (a loop's own needs no lock) */
	pthread_mutex_t mu; /* shared only */
	struct fc_entry **table;
	unsigned mask;              /* table size - 1 */
	struct fc_entry **sweeping; /* the sweep's entries to check (cap of them) */
	uint64_t *seen;             /* admission: the key hashes of recent misses, SEEN_WAYS-way sets */
	unsigned seen_mask;
	unsigned seen_next; /* the way the next remembered miss takes in its set */
	struct fc_entry *head, *tail;
	int count;
	unsigned long gen; /* the generation the entries were checked against */
	atomic_uint tick;  /* sweeps so far (written by the loop, read by tgt_fcache_sweep_now's wait too) */
	int timer_fd;
} fc_cache_t;

struct tgt_fcache_reg {
	pthread_mutex_t lock; /* the list only: taken once per loop thread and at stop */
	fc_cache_t *caches;
	_Atomic(fc_cache_t *) shared; /* the batch items' table (tgt_fcache_share), in caches too */
	atomic_bool share_failed;     /* making it failed once (logged): batches go on without it */
	int cap;                      /* entries per table; 0 = off */
};

static __thread fc_cache_t *tls_cache;
static __thread bool tls_none; /* this thread has no cache (off, or not a loop thread) */

static int loops_of(const tgt_t *t)
{
	long n = t->cfg.loop_threads > 0 ? t->cfg.loop_threads : sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

int tgt_fcache_init(tgt_t *t)
{
	struct rlimit rl;
	long cap = t->cfg.open_file_cache;

	t->fcache = calloc(1, sizeof(*t->fcache));
	if (t->fcache == NULL)
		return -1;
	pthread_mutex_init(&t->fcache->lock, NULL);
	if (cap > 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		long budget = (long)(rl.rlim_cur / 4) / (loops_of(t) + 1); /* + 1: the batch items' table */
		if (budget < cap) {
			ft_warn("open_file_cache %ld per table is more than a quarter of RLIMIT_NOFILE (%llu) "
				"allows over %d loop threads and the batch items: %ld",
				cap, (unsigned long long)rl.rlim_cur, loops_of(t), budget);
			cap = budget;
		}
	}
	t->fcache->cap = (int)cap;
	atomic_store(&t->fcache_gen, 1);
	return 0;
}

unsigned long tgt_fcache_gen(tgt_t *t)
{
	return atomic_load(&t->fcache_gen);
}

void tgt_fcache_invalidate(tgt_t *t)
{
	atomic_fetch_add(&t->fcache_gen, 1);
}

/* ---- one table ---- */

static void lock(fc_cache_t *c)
{
	if (c->shared)
		pthread_mutex_lock(&c->mu);
}

static void unlock(fc_cache_t *c)
{
	if (c->shared)
		pthread_mutex_unlock(&c->mu);
}

static void entry_free(struct fc_entry *e)
{
	close(e->fd);
	free(e);
}

/* Drops a reference under c's lock: the entry is freed (its fd closed) at the last one once dropped. */
static void ref_put(struct fc_entry *e)
{
	if (--e->refs == 0 && !e->cached)
		entry_free(e);
}

static void unlink_order(fc_cache_t *c, struct fc_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
}

/* Takes e out of c (closed now, or at its last release). */
static void drop(fc_cache_t *c, struct fc_entry *e)
{
	struct fc_entry **p = &c->table[e->hash & c->mask];

	while (*p != e)
		p = &(*p)->hnext;
	*p = e->hnext;
	unlink_order(c, e);
	c->count--;
	e->cached = false;
	if (e->refs == 0)
		entry_free(e);
}

static void drop_all(fc_cache_t *c)
{
	while (c->tail)
		drop(c, c->tail);
}

static void to_front(fc_cache_t *c, struct fc_entry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (c->tail == NULL)
		c->tail = e;
}

/* Whether st still shows the file e kept (see DESIGN in core/fcache.h). */
static bool same_file(const struct fc_entry *e, const struct stat *st)
{
	return st->st_nlink > 0 && st->st_ino == e->ino && st->st_dev == e->dev && st->st_size == e->size &&
	       st->st_ctim.tv_sec == e->ctim.tv_sec && st->st_ctim.tv_nsec == e->ctim.tv_nsec &&
	       st->st_mtim.tv_sec == e->mtim.tv_sec && st->st_mtim.tv_nsec == e->mtim.tv_nsec;
}

/* Drops everything when the generation moved; true when it did. */
static bool check_gen(fc_cache_t *c)
{
	unsigned long g = atomic_load(&c->t->fcache_gen);

	if (g == c->gen)
		return false;
	drop_all(c);
	c->gen = g;
	return true;
}

/*
 * The timer: closes the entries of an older generation, idle ones, and those whose file changed.
 * The files are looked at (fstat) outside the lock, each entry held by a reference meanwhile, so
 * the threads preparing batch items do not wait for a thousand system calls.
 */
static void sweep(void *arg)
{
	fc_cache_t *c = arg;
	uint64_t ticks;
	struct stat st;
	int n = 0;

	if (read(c->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		ft_debug("open-file cache: timerfd read: %s", strerror(errno));
	lock(c);
	unsigned tick = atomic_load_explicit(&c->tick, memory_order_relaxed) + 1;
	if (!check_gen(c)) {
		for (struct fc_entry *e = c->tail, *prev; e != NULL; e = prev) {
			prev = e->prev;
			if (tick - e->last_tick > IDLE_TICKS) {
				drop(c, e);
			} else {
				e->refs++;
				c->sweeping[n++] = e;
			}
		}
	}
	unlock(c);
	for (int i = 0; i < n; i++)
		c->sweeping[i]->stale = fstat(c->sweeping[i]->fd, &st) != 0 || !same_file(c->sweeping[i], &st);
	lock(c);
	for (int i = 0; i < n; i++) {
		struct fc_entry *e = c->sweeping[i];
		if (e->stale && e->cached)
			drop(c, e);
		ref_put(e);
	}
	atomic_store_explicit(&c->tick, tick, memory_order_release); /* after the drops: sweep_now waits for it */
	unlock(c);
}

void tgt_fcache_sweep_now(tgt_t *t)
{
	struct itimerspec soon = {.it_value = {.tv_nsec = 1},
				  .it_interval = {.tv_sec = SWEEP_MS / 1000, .tv_nsec = (SWEEP_MS % 1000) * 1000000L}};
	fc_cache_t *cs[SWEEP_WAIT_LOOPS];
	unsigned before[SWEEP_WAIT_LOOPS];
	int n = 0;

	if (t->fcache == NULL)
		return;
	pthread_mutex_lock(&t->fcache->lock);
	for (fc_cache_t *c = t->fcache->caches; c != NULL; c = c->next) {
		if (n < SWEEP_WAIT_LOOPS) {
			cs[n] = c;
			before[n++] = atomic_load(&c->tick);
		}
		if (timerfd_settime(c->timer_fd, 0, &soon, NULL) != 0)
			ft_debug("open-file cache: timerfd_settime: %s", strerror(errno));
	}
	pthread_mutex_unlock(&t->fcache->lock);
	/* the caches live until tgt_fcache_stop, which comes after the LRU's stop */
	for (int waited = 0, i = 0; i < n && waited < SWEEP_WAIT_MS;) {
		if (atomic_load(&cs[i]->tick) != before[i]) {
			i++;
			continue;
		}
		usleep(1000);
		waited++;
	}
}

/*
 * A new table swept by the loop thread calling, for the caller to register; shared: the batch items'
 * one. NULL when off a loop thread (ft_httpd_watch refuses) or out of memory.
 */
static fc_cache_t *cache_new(tgt_t *t, bool shared)
{
	fc_cache_t *c = calloc(1, sizeof(*c));
	unsigned size = 16;
	struct itimerspec every = {.it_interval = {.tv_sec = SWEEP_MS / 1000, .tv_nsec = (SWEEP_MS % 1000) * 1000000L}};

	every.it_value = every.it_interval;
	while (size < 2u * (unsigned)t->fcache->cap)
		size <<= 1;
	if (c != NULL)
		c->timer_fd = -1;
	if (c == NULL || (c->table = calloc(size, sizeof(*c->table))) == NULL ||
	    (c->seen = calloc(size, sizeof(*c->seen))) == NULL ||
	    (c->sweeping = calloc((size_t)t->fcache->cap, sizeof(*c->sweeping))) == NULL)
		goto fail;
	c->t = t;
	c->shared = shared;
	c->mask = size - 1;
	c->seen_mask = size - 1;
	c->gen = atomic_load(&t->fcache_gen);
	if (shared)
		pthread_mutex_init(&c->mu, NULL);
	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->timer_fd < 0 || timerfd_settime(c->timer_fd, 0, &every, NULL) != 0 ||
	    ft_httpd_watch(c->timer_fd, sweep, c) != 0) /* -1 off a loop thread: workers get no cache */
		goto fail;
	return c;
fail:
	if (c != NULL) {
		if (c->timer_fd >= 0)
			close(c->timer_fd);
		if (shared && c->sweeping != NULL)
			pthread_mutex_destroy(&c->mu);
		free(c->sweeping);
		free(c->seen);
		free(c->table);
		free(c);
	}
	return NULL;
}

/* This loop thread's cache, made at its first use; NULL when off or off a loop thread. */
static fc_cache_t *cache_here(tgt_t *t)
{
	fc_cache_t *c = tls_cache;

	if (c != NULL)
		return c->t == t ? c : NULL;
	if (tls_none || t->fcache == NULL || t->fcache->cap <= 0 || (c = cache_new(t, false)) == NULL) {
		tls_none = true;
		return NULL;
	}
	pthread_mutex_lock(&t->fcache->lock);
	c->next = t->fcache->caches;
	t->fcache->caches = c;
	pthread_mutex_unlock(&t->fcache->lock);
	tls_cache = c;
	return c;
}

void tgt_fcache_share(tgt_t *t)
{
	struct tgt_fcache_reg *reg = t->fcache;
	fc_cache_t *c;

	if (reg == NULL || reg->cap <= 0 || atomic_load_explicit(&reg->shared, memory_order_acquire) != NULL ||
	    atomic_load(&reg->share_failed))
		return;
	pthread_mutex_lock(&reg->lock);
	if (atomic_load(&reg->shared) == NULL && !atomic_load(&reg->share_failed)) {
		if ((c = cache_new(t, true)) != NULL) {
			c->next = reg->caches;
			reg->caches = c;
			atomic_store_explicit(&reg->shared, c, memory_order_release);
		} else {
			atomic_store(&reg->share_failed, true);
			ft_warn("open-file cache: no table for GetBatch items (%s): their files are opened every time",
				strerror(errno));
		}
	}
	pthread_mutex_unlock(&reg->lock);
}

/* The batch items' table, once a loop thread made it (tgt_fcache_share); NULL before or when off. */
static fc_cache_t *cache_shared(tgt_t *t)
{
	return t->fcache == NULL ? NULL : atomic_load_explicit(&t->fcache->shared, memory_order_acquire);
}

static uint64_t key_hash(const tgt_obj_t *o, int mp_index)
{
	return o->hash ^ ((uint64_t)(unsigned)mp_index * 0x9e3779b97f4a7c15ull);
}

/*
 * A kept, still valid entry of c for o: referenced, its fd in *fd and its LOM decoded. The check
 * (fstat) runs outside c's lock: the reference keeps the entry and its fd meanwhile.
 */
static struct fc_entry *get_in(fc_cache_t *c, const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom)
{
	uint64_t h = key_hash(o, mp_index);
	struct stat st;
	struct fc_entry *e;

	lock(c);
	check_gen(c);
	e = c->table[h & c->mask];
	while (e != NULL && (e->hash != h || e->mp_index != mp_index || strcmp(e->rel, o->rel) != 0))
		e = e->hnext;
	if (e != NULL) {
		unlink_order(c, e);
		to_front(c, e);
		e->last_tick = atomic_load_explicit(&c->tick, memory_order_relaxed);
		e->refs++;
	}
	unlock(c);
	if (e == NULL)
		return NULL;
	const char *enc = e->rel + strlen(e->rel) + 1;
	bool stale = fstat(e->fd, &st) != 0 || !same_file(e, &st);
	if (stale || ft_lom_decode(lom, (const uint8_t *)enc, e->lom_len) != 0) { /* decoded when kept: never */
		lock(c);
		if (e->cached)
			drop(c, e);
		ref_put(e);
		unlock(c);
		if (stale)
			ft_metric_inc(FT_M_OPEN_FILE_STALE);
		return NULL;
	}
	ft_metric_inc(FT_M_OPEN_FILE_HITS);
	*fd = e->fd;
	return e;
}

tgt_fcache_ref_t *tgt_fcache_get(const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom)
{
	fc_cache_t *c = cache_here(o->t);

	return c == NULL ? NULL : get_in(c, o, mp_index, fd, lom);
}

tgt_fcache_ref_t *tgt_fcache_get_shared(const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom)
{
	fc_cache_t *c = cache_shared(o->t);

	return c == NULL ? NULL : get_in(c, o, mp_index, fd, lom);
}

/*
 * Admission: a file is kept at its second miss while the first is still remembered (seen[]: twice
 * as many slots as entries, in sets of SEEN_WAYS; a new miss takes a free slot of its set, else one
 * in turn). An object read again only after more other misses than the cache holds would be
 * evicted before its next read anyway: it is never kept, and its GETs cost what they did before.
 * With one slot per key (direct-mapped), keys sharing a slot forgot each other: a third of 1,000
 * objects read in turn never got in.
 */
static bool admit(fc_cache_t *c, uint64_t h)
{
	uint64_t *set = &c->seen[h & c->seen_mask & ~(uint64_t)(SEEN_WAYS - 1)];

	int free_way = -1;

	for (int k = 0; k < SEEN_WAYS; k++) {
		if (set[k] == h)
			return true;
		if (set[k] == 0 && free_way < 0)
			free_way = k;
	}
	set[free_way >= 0 ? (unsigned)free_way : c->seen_next++ % SEEN_WAYS] = h;
	return false;
}

/* A new entry of o for c (not linked in), or NULL without memory. */
static struct fc_entry *entry_new(fc_cache_t *c, const tgt_obj_t *o, int mp_index, uint64_t h, int fd,
				  const uint8_t *enc, int enc_len, const struct stat *st)
{
	size_t rel_len = strlen(o->rel);
	struct fc_entry *e = malloc(sizeof(*e) + rel_len + 1 + (size_t)enc_len);

	if (e == NULL)
		return NULL;
	*e = (struct fc_entry){.hash = h,
			       .mp_index = mp_index,
			       .fd = fd,
			       .refs = 1,
			       .cached = true,
			       .cache = c,
			       .last_tick = atomic_load_explicit(&c->tick, memory_order_relaxed),
			       .dev = st->st_dev,
			       .ino = st->st_ino,
			       .size = st->st_size,
			       .ctim = st->st_ctim,
			       .mtim = st->st_mtim,
			       .lom_len = (uint16_t)enc_len};
	memcpy(e->rel, o->rel, rel_len + 1);
	memcpy(e->rel + rel_len + 1, enc, (size_t)enc_len);
	return e;
}

/* Links e into c (under its lock), after any older entry of its key (its file replaced since). */
static void link_in(fc_cache_t *c, struct fc_entry *e)
{
	if (c->count >= c->t->fcache->cap)
		drop(c, c->tail);
	for (struct fc_entry *x = c->table[e->hash & c->mask]; x != NULL; x = x->hnext) {
		if (x->hash == e->hash && x->mp_index == e->mp_index && strcmp(x->rel, e->rel) == 0) {
			drop(c, x);
			break;
		}
	}
	e->hnext = c->table[e->hash & c->mask];
	c->table[e->hash & c->mask] = e;
	to_front(c, e);
	c->count++;
}

static struct fc_entry *put_in(fc_cache_t *c, const tgt_obj_t *o, int mp_index, unsigned long gen, int fd,
			       const ft_lom_t *lom, const struct stat *st, bool any_size)
{
	uint8_t enc[FT_LOM_MAX];
	uint64_t h = key_hash(o, mp_index);
	struct fc_entry *e = NULL;
	int enc_len;

	if ((lom->size > FCACHE_MAX_BYTES && !any_size) || !S_ISREG(st->st_mode) || st->st_nlink == 0 ||
	    (uint64_t)st->st_size != lom->size)
		return NULL; /* large, or the file changed already */
	lock(c);
	check_gen(c);
	/* gen: an invalidation since the open leaves the file out; encoded only once admitted */
	if (gen == c->gen && admit(c, h) && (enc_len = ft_lom_encode(lom, enc, sizeof(enc))) >= 0 &&
	    (e = entry_new(c, o, mp_index, h, fd, enc, enc_len, st)) != NULL)
		link_in(c, e);
	unlock(c);
	return e;
}

tgt_fcache_ref_t *tgt_fcache_put(const tgt_obj_t *o, int mp_index, unsigned long gen, int fd, const ft_lom_t *lom,
				 const struct stat *st, bool any_size)
{
	fc_cache_t *c = cache_here(o->t);

	return c == NULL ? NULL : put_in(c, o, mp_index, gen, fd, lom, st, any_size);
}

tgt_fcache_ref_t *tgt_fcache_put_shared(const tgt_obj_t *o, int mp_index, unsigned long gen, int fd,
					const ft_lom_t *lom, const struct stat *st, bool any_size)
{
	fc_cache_t *c = cache_shared(o->t);

	return c == NULL ? NULL : put_in(c, o, mp_index, gen, fd, lom, st, any_size);
}

void tgt_fcache_release(void *ref)
{
	struct fc_entry *e = ref;
	fc_cache_t *c = e->cache;

	lock(c);
	ref_put(e);
	unlock(c);
}

void tgt_fcache_stop(tgt_t *t)
{
	fc_cache_t *c, *next;

	if (t->fcache == NULL)
		return;
	for (c = t->fcache->caches; c != NULL; c = next) {
		next = c->next;
		while (c->tail) {
			c->tail->refs = 0; /* the loops ended: no response reads any more */
			drop(c, c->tail);
		}
		close(c->timer_fd);
		if (c->shared)
			pthread_mutex_destroy(&c->mu);
		free(c->sweeping);
		free(c->seen);
		free(c->table);
		free(c);
	}
	pthread_mutex_destroy(&t->fcache->lock);
	free(t->fcache);
	t->fcache = NULL;
}
