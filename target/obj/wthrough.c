/* SPDX-License-Identifier: Apache-2.0 */
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
 * cache would keep the older one. A write hold on the name (TGT_HOLD_WRITE, core/namelock.h) keeps
 * a second write of a name back from its backend request until the first one's local step is
 * done; it is exact per name, so a long backend upload holds up no other name.
 *
 * Older cold fetches. A cold GET (coldget.c) that started before the backend took a write may have
 * read the replaced content, and it publishes under the name lock whenever it ends, perhaps after
 * the write's local step. So once the backend request returned with the write possibly taken (an
 * acknowledgement, or no clear answer), and before the local step, tgt_coldget_supersede marks the
 * fetch in flight: it then publishes nothing, or it published before the mark and the local step
 * (under the same name lock, later) replaces or removes its copy. A fetch that starts after the mark
 * reads the backend after the write. Nothing waits for a fetch: the write answers as soon as its own
 * step is done. Superseding a fetch that read the new content costs one refetch, never correctness.
 *
 * tgt_coldget_supersede takes only coldget.c's table and flight locks, briefly.
 */

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

uint64_t tgt_wthrough_put_max(const tgt_obj_t *o)
{
	static const struct {
		const char *provider;
		uint64_t max;
	} limits[] = {{"aws", 5ull << 30}, {"azure", 5000ull << 20}, {"gcp", 5ull << 40}};

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (strcmp(o->provider, limits[i].provider) == 0)
			return limits[i].max;
	return 0;
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

static int is_cached(const tgt_obj_t *o)
{
	struct stat st;

	return fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Caller holds the name lock. */
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
	tgt_name_lock(o);
	int rc = uncache_locked(o);
	tgt_name_unlock(o);
	if (rc == 1) {
		tgt_list_bump(o->t, o->provider, o->bucket);
		tgt_mirror_delete(o);
		tgt_ec_delete(o);
	}
	return rc;
}
