/* SPDX-License-Identifier: Apache-2.0 */
/* Open-file cache of warm GETs (see core/fcache.h): per-loop tables, validation, sweep, shutdown. */
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

struct fc_entry {
	struct fc_entry *hnext;       /* hash chain */
	struct fc_entry *prev, *next; /* use order, most recent first */
	uint64_t hash;
	int mp_index;
	int fd;
	int refs;    /* responses reading fd */
	bool cached; /* in its table; false: dropped, closed and freed at the last release */
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
	struct fc_entry **table;
	unsigned mask;  /* table size - 1 */
	uint64_t *seen; /* admission: the key hashes of recent misses, direct-mapped */
	unsigned seen_mask;
	struct fc_entry *head, *tail;
	int count;
	unsigned long gen; /* the generation the entries were checked against */
	atomic_uint tick;  /* sweeps so far (written by the loop, read by tgt_fcache_sweep_now's wait too) */
	int timer_fd;
} fc_cache_t;

struct tgt_fcache_reg {
	pthread_mutex_t lock; /* the list only: taken once per loop thread and at stop */
	fc_cache_t *caches;
	int cap; /* entries per loop thread; 0 = off */
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
		long budget = (long)(rl.rlim_cur / 4) / loops_of(t);
		if (budget < cap) {
			ft_warn("open_file_cache %ld per loop thread is more than a quarter of RLIMIT_NOFILE (%llu) "
				"allows over %d loop threads: %ld",
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

/* ---- one loop's table ---- */

static void entry_free(struct fc_entry *e)
{
	close(e->fd);
	free(e);
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

/* The timer: closes the entries of an older generation, idle ones, and those whose file changed. */
static void sweep(void *arg)
{
	fc_cache_t *c = arg;
	uint64_t n;
	struct stat st;

	if (read(c->timer_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		ft_debug("open-file cache: timerfd read: %s", strerror(errno));
	unsigned tick = atomic_load_explicit(&c->tick, memory_order_relaxed) + 1;
	if (!check_gen(c)) {
		for (struct fc_entry *e = c->tail, *prev; e != NULL; e = prev) {
			prev = e->prev;
			if (tick - e->last_tick > IDLE_TICKS || fstat(e->fd, &st) != 0 || !same_file(e, &st))
				drop(c, e);
		}
	}
	atomic_store_explicit(&c->tick, tick, memory_order_release); /* after the drops: sweep_now waits for it */
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

/* This loop thread's cache, made at its first use; NULL when off or off a loop thread. */
static fc_cache_t *cache_here(tgt_t *t)
{
	fc_cache_t *c = tls_cache;
	unsigned size = 16;
	struct itimerspec every = {.it_interval = {.tv_sec = SWEEP_MS / 1000, .tv_nsec = (SWEEP_MS % 1000) * 1000000L}};

	if (c != NULL)
		return c->t == t ? c : NULL;
	if (tls_none || t->fcache == NULL || t->fcache->cap <= 0) {
		tls_none = true;
		return NULL;
	}
	every.it_value = every.it_interval;
	while (size < 2u * (unsigned)t->fcache->cap)
		size <<= 1;
	c = calloc(1, sizeof(*c));
	if (c != NULL)
		c->timer_fd = -1;
	if (c == NULL || (c->table = calloc(size, sizeof(*c->table))) == NULL ||
	    (c->seen = calloc(size / 2, sizeof(*c->seen))) == NULL)
		goto fail;
	c->t = t;
	c->mask = size - 1;
	c->seen_mask = size / 2 - 1;
	c->gen = atomic_load(&t->fcache_gen);
	c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->timer_fd < 0 || timerfd_settime(c->timer_fd, 0, &every, NULL) != 0 ||
	    ft_httpd_watch(c->timer_fd, sweep, c) != 0) /* -1 off a loop thread: workers get no cache */
		goto fail;
	pthread_mutex_lock(&t->fcache->lock);
	c->next = t->fcache->caches;
	t->fcache->caches = c;
	pthread_mutex_unlock(&t->fcache->lock);
	tls_cache = c;
	return c;
fail:
	if (c != NULL) {
		if (c->timer_fd >= 0)
			close(c->timer_fd);
		free(c->seen);
		free(c->table);
		free(c);
	}
	tls_none = true;
	return NULL;
}

static uint64_t key_hash(const tgt_obj_t *o, int mp_index)
{
	return o->hash ^ ((uint64_t)(unsigned)mp_index * 0x9e3779b97f4a7c15ull);
}

tgt_fcache_ref_t *tgt_fcache_get(const tgt_obj_t *o, int mp_index, int *fd, ft_lom_t *lom)
{
	fc_cache_t *c = cache_here(o->t);
	struct stat st;

	if (c == NULL)
		return NULL;
	check_gen(c);
	uint64_t h = key_hash(o, mp_index);
	struct fc_entry *e = c->table[h & c->mask];
	while (e != NULL && (e->hash != h || e->mp_index != mp_index || strcmp(e->rel, o->rel) != 0))
		e = e->hnext;
	if (e == NULL)
		return NULL;
	if (fstat(e->fd, &st) != 0 || !same_file(e, &st)) {
		drop(c, e);
		ft_metric_inc(FT_M_OPEN_FILE_STALE);
		return NULL;
	}
	const char *enc = e->rel + strlen(e->rel) + 1;
	if (ft_lom_decode(lom, (const uint8_t *)enc, e->lom_len) != 0) { /* it decoded when kept: never */
		drop(c, e);
		return NULL;
	}
	unlink_order(c, e);
	to_front(c, e);
	e->last_tick = atomic_load_explicit(&c->tick, memory_order_relaxed);
	e->refs++;
	ft_metric_inc(FT_M_OPEN_FILE_HITS);
	*fd = e->fd;
	return e;
}

/*
 * Admission: a file is kept at its second miss while the first is still remembered (seen[], as many
 * slots as entries). An object read again only after more other misses than the cache holds would
 * be evicted before its next read anyway: it is never kept, and its GETs cost what they did before.
 */
static bool admit(fc_cache_t *c, uint64_t h)
{
	uint64_t *slot = &c->seen[h & c->seen_mask];

	if (*slot == h)
		return true;
	*slot = h;
	return false;
}

tgt_fcache_ref_t *tgt_fcache_put(const tgt_obj_t *o, int mp_index, unsigned long gen, int fd, const ft_lom_t *lom,
				 const struct stat *st, bool any_size)
{
	fc_cache_t *c = cache_here(o->t);
	uint8_t enc[FT_LOM_MAX];
	size_t rel_len;
	int enc_len;
	uint64_t h;

	if (c == NULL || (lom->size > FCACHE_MAX_BYTES && !any_size))
		return NULL;
	check_gen(c);
	if (gen != c->gen || !S_ISREG(st->st_mode) || st->st_nlink == 0 || (uint64_t)st->st_size != lom->size)
		return NULL; /* an invalidation since the open, or the file changed already */
	h = key_hash(o, mp_index);
	if (!admit(c, h) || (enc_len = ft_lom_encode(lom, enc, sizeof(enc))) < 0)
		return NULL;
	rel_len = strlen(o->rel);
	struct fc_entry *e = malloc(sizeof(*e) + rel_len + 1 + (size_t)enc_len);
	if (e == NULL)
		return NULL;
	if (c->count >= c->t->fcache->cap)
		drop(c, c->tail);
	*e = (struct fc_entry){.hash = h,
			       .mp_index = mp_index,
			       .fd = fd,
			       .refs = 1,
			       .cached = true,
			       .last_tick = atomic_load_explicit(&c->tick, memory_order_relaxed),
			       .dev = st->st_dev,
			       .ino = st->st_ino,
			       .size = st->st_size,
			       .ctim = st->st_ctim,
			       .mtim = st->st_mtim,
			       .lom_len = (uint16_t)enc_len};
	memcpy(e->rel, o->rel, rel_len + 1);
	memcpy(e->rel + rel_len + 1, enc, (size_t)enc_len);
	/* an older entry of the same key (its file replaced since) goes first */
	for (struct fc_entry *x = c->table[h & c->mask]; x != NULL; x = x->hnext) {
		if (x->hash == h && x->mp_index == mp_index && strcmp(x->rel, e->rel) == 0) {
			drop(c, x);
			break;
		}
	}
	e->hnext = c->table[h & c->mask];
	c->table[h & c->mask] = e;
	to_front(c, e);
	c->count++;
	return e;
}

void tgt_fcache_release(void *ref)
{
	struct fc_entry *e = ref;

	if (--e->refs == 0 && !e->cached)
		entry_free(e);
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
		free(c->seen);
		free(c->table);
		free(c);
	}
	pthread_mutex_destroy(&t->fcache->lock);
	free(t->fcache);
	t->fcache = NULL;
}
