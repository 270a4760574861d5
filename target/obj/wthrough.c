/* Write-through to remote buckets: the backend PUT/DELETE of an object, per-name write ordering, and superseding older cold fetches. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/hrw.h"
#include "obj/wthrough.h"
#include "protect/mirror.h"

/*
 * DESIGN
 * A PUT to a remote bucket is received into a work file as for an ais bucket (put.c); its finalize
 * step sends that file to the backend and publishes it locally only once the backend acknowledged
 * it; a DELETE deletes on the backend first, then the cached copy (delete.c).
 *
 * Ordering. Two writes of one name must reach the cache in the order the backend took them, or the
 * cache would keep the older one. A table of names being written (tgt_wthrough_lock) holds a
 * second write of a name back from its backend request until the first one's local step is done.
 * It is a per-name lock, not the put_locks stripe: a backend upload can take long, and the stripe
 * also serializes the publish of 1/64 of all other names.
 *
 * Older cold fetches. A cold GET (coldget.c) that started before the backend took a write may have
 * read the replaced content, and it publishes under the stripe lock whenever it ends, perhaps after
 * the write's local step. So once the backend request returned with the write possibly taken (an
 * acknowledgement, or no clear answer), and before the local step, tgt_coldget_supersede marks the
 * fetch in flight: it then publishes nothing, or it published before the mark and the local step
 * (under the same stripe, later) replaces or removes its copy. A fetch that starts after the mark
 * reads the backend after the write. Nothing waits for a fetch: the write answers as soon as its own
 * step is done. Superseding a fetch that read the new content costs one refetch, never correctness.
 *
 * Lock order: the name lock (held across the backend request), then the put_locks stripe, then
 * publish_lock. tgt_coldget_supersede takes only coldget.c's table and flight locks, briefly.
 *
 * OWNERSHIP
 * held_name_t entries are malloc'd by tgt_wthrough_lock and freed by tgt_wthrough_unlock.
 */

typedef struct held_name {
	struct held_name *next;
	char rel[TGT_REL_MAX];
} held_name_t;

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cond = PTHREAD_COND_INITIALIZER;
static held_name_t *held; /* guarded by held_lock */

static held_name_t **held_find(const char *rel)
{
	held_name_t **p;

	for (p = &held; *p != NULL; p = &(*p)->next)
		if (strcmp((*p)->rel, rel) == 0)
			break;
	return p;
}

int tgt_wthrough_lock(const tgt_obj_t *o)
{
	held_name_t *h = malloc(sizeof(*h));

	if (h == NULL)
		return -1;
	snprintf(h->rel, sizeof(h->rel), "%s", o->rel);
	pthread_mutex_lock(&held_lock);
	while (*held_find(o->rel) != NULL)
		pthread_cond_wait(&held_cond, &held_lock);
	h->next = held;
	held = h;
	pthread_mutex_unlock(&held_lock);
	return 0;
}

void tgt_wthrough_unlock(const tgt_obj_t *o)
{
	pthread_mutex_lock(&held_lock);
	held_name_t **p = held_find(o->rel);
	held_name_t *h = *p;
	if (h != NULL)
		*p = h->next;
	pthread_cond_broadcast(&held_cond);
	pthread_mutex_unlock(&held_lock);
	free(h);
}

/* ---- the backend requests ---- */

typedef struct {
	int fd;
	int64_t off;
} file_source_t;

static int64_t file_read(void *ctx, void *buf, size_t cap)
{
	file_source_t *s = ctx;
	ssize_t n;

	do {
		n = pread(s->fd, buf, cap, (off_t)s->off);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	s->off += n;
	return n;
}

static int file_rewind(void *ctx)
{
	((file_source_t *)ctx)->off = 0;
	return 0;
}

/* The bucket's backend, or NULL with err filled (also for a backend that cannot be opened). */
static ft_backend_t *backend_of(const tgt_obj_t *o, ft_backend_error_t *err)
{
	memset(err, 0, sizeof(*err));
	return tgt_backend_get(o, err);
}

/*
 * Whether the backend may have taken a write that returned code: an acknowledgement, or no clear
 * answer (the request may have been applied before the connection failed). A clear refusal is not.
 */
int tgt_wthrough_may_have_written(ft_backend_err_t code)
{
	switch (code) {
	case FT_BACKEND_OK:
	case FT_BACKEND_ECONNECT:
	case FT_BACKEND_ETIMEDOUT:
	case FT_BACKEND_ESERVER:
	case FT_BACKEND_ETRUNCATED:
	case FT_BACKEND_EPROTO:
	case FT_BACKEND_ECANCELED:
		return 1;
	default:
		return 0;
	}
}

ft_backend_err_t tgt_wthrough_put(const tgt_obj_t *o, const char *work, uint64_t size, const char *md5,
				  const char *ctype, ft_backend_meta_t *out, ft_backend_error_t *err)
{
	ft_backend_t *b = backend_of(o, err);
	file_source_t src = {.fd = -1};
	ft_backend_err_t rc;

	if (b == NULL)
		return err->code != FT_BACKEND_OK ? err->code : FT_BACKEND_ECONFIG;
	/* The work file was created write-only: read it back through a descriptor of its own. */
	src.fd = openat(o->mp->work_fd, work, O_RDONLY | O_CLOEXEC);
	if (src.fd < 0) {
		err->code = FT_BACKEND_ESOURCE;
		err->http_status = 0;
		snprintf(err->msg, sizeof(err->msg), "cannot reopen the work file: %s", strerror(errno));
		return FT_BACKEND_ESOURCE;
	}
	ft_backend_body_t body = {
		.read = file_read,
		.ctx = &src,
		.rewind = file_rewind,
		.length = (int64_t)size,
		.md5 = md5,
		.content_type = ctype,
	};
	rc = ft_backend_put(b, o->obj, &body, out, err);
	close(src.fd);
	if (tgt_wthrough_may_have_written(rc))
		tgt_coldget_supersede(o);
	return rc;
}

ft_backend_err_t tgt_wthrough_delete(const tgt_obj_t *o, ft_backend_error_t *err)
{
	ft_backend_t *b = backend_of(o, err);

	if (b == NULL)
		return err->code != FT_BACKEND_OK ? err->code : FT_BACKEND_ECONFIG;
	ft_backend_err_t rc = ft_backend_delete(b, o->obj, err);
	/* ENOTFOUND: gone from the backend all the same (and delete.c removes the cached copy). */
	if (rc == FT_BACKEND_ENOTFOUND || tgt_wthrough_may_have_written(rc))
		tgt_coldget_supersede(o);
	return rc;
}

void tgt_wthrough_lom_meta(ft_lom_t *lom, const ft_backend_meta_t *m)
{
	/* As coldget.c keeps them, so that a latest-ver revalidation finds this copy current. */
	lom->version[0] = '\0';
	if (m->version[0] && strlen(m->version) < sizeof(lom->version))
		snprintf(lom->version, sizeof(lom->version), "%s", m->version);
	if (m->etag[0] && strlen(m->etag) < sizeof(lom->etag))
		snprintf(lom->etag, sizeof(lom->etag), "%s", m->etag);
	if (m->mtime_ns > 0)
		lom->mtime_ns = m->mtime_ns;
}

/* ---- the cached copy ---- */

static pthread_mutex_t *stripe_of(const tgt_obj_t *o)
{
	uint64_t h = ft_hrw_name_hash(o->provider, o->bucket, o->obj, o->obj_len);

	return &o->t->put_locks[h % TGT_PUT_LOCKS];
}

static int is_cached(const tgt_obj_t *o)
{
	struct stat st;

	return fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Caller holds the stripe lock. */
static int uncache_locked(const tgt_obj_t *o)
{
	if (!is_cached(o))
		return 0;
	if (unlinkat(o->mp->root_fd, o->rel, 0) != 0)
		return errno == ENOENT ? 0 : -errno;
	tgt_parent_prune(o->mp, o->rel);
	return 1;
}

int tgt_wthrough_uncache(const tgt_obj_t *o)
{
	pthread_mutex_t *lock = stripe_of(o);

	pthread_mutex_lock(lock);
	int rc = uncache_locked(o);
	pthread_mutex_unlock(lock);
	if (rc == 1) {
		tgt_list_bump(o->t, o->provider, o->bucket);
		tgt_mirror_delete(o);
		tgt_ec_delete(o);
	}
	return rc;
}
