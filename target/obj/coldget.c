/* SPDX-License-Identifier: Apache-2.0 */
/* Target reads of remote-bucket objects: per-bucket backend handles, one coalesced cold fetch per object streamed to every reader while it is cached, revalidation. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/metrics.h"
#include "cloud/backend.h"
#include "cluster/bmd.h"
#include "cluster/hrw.h"
#include "core/lom.h"
#include "core/replica.h"
#include "http/util.h"
#include "target.h"

/*
 * DESIGN
 * A GET of a remote-bucket object that is not cached (or with latest-ver=true) runs here on a
 * worker thread: get.c decides so once per request (tgt_coldget_wanted) and serves the stored
 * copy itself when tgt_coldget_serve finds it current (revalidated, or fetched meanwhile). Per object there is at most one in-flight fetch (a "flight", keyed by the
 * object's path relative to its mountpath). The first request becomes the fetcher: it reads the
 * whole object from the backend (verify on) in chunks of up to CHUNK, appends each chunk to a
 * work file (preallocated to the object's size when the backend states it: no per-block delayed
 * allocation on the hot path, and no space is found missing halfway), bumps the flight's byte
 * counter and queues the new range of the work file to its own client. Later requests join:
 * they queue the ranges already in the work file and wait on the flight's condvar for more.
 * Every client is served from the work file with ft_resp_stream_sendfile (sendfile(2) from the
 * page cache on the loop thread); no copy is made per client. Where the backend can hand its
 * socket's bytes to a file (ft_backend_reader_splices: an ht GET from an http:// origin) and the
 * size is known, the body is spliced socket -> pipe -> work file in reads of up to SPLICE_CHUNK and
 * checksummed right after each read lands, read back from the work file into our buffer: a byte is
 * copied into the page cache once, then, still in the CPU cache, into the buffer the checksum reads.
 * Otherwise it is read into our buffer (one copy from the socket, another inside libcurl for
 * providers on it), written with pwrite (a copy) and checksummed from the buffer. Only after the
 * end of body was verified (size, and MD5/CRC32C where the backend states one) is the work file
 * renamed into place with its metadata; the flight then turns DONE. On any failure it turns
 * FAILED, the work file is removed and every response is aborted (ft_resp_stream_end with an
 * error). To make sure no client can mistake a cut body for a whole one, every response holds
 * back the last byte of its window until the flight is DONE.
 * Range GETs of a cold object fetch (or join the fetch of) the whole object, so it gets cached,
 * and serve their window from it.
 * A flight is removed from the table only after the rename (or the failure, or when a write
 * supersedes it: below), under fl_lock, so a request that finds no flight and no file really has
 * to fetch. fl_lock guards only the table and the references; a flight's progress is under its
 * own mutex (taken after fl_lock when both are needed), so the per-chunk bookkeeping of one fetch
 * never waits behind another's.
 *
 * Superseded flights. A write-through PUT or DELETE (wthrough.c) that the backend took (or may
 * have taken) calls tgt_coldget_supersede before its own local step: a flight running then may
 * have read the content the write replaced. It is marked superseded and taken out of the table at once, so
 * a request arriving from then on starts a fetch of its own (of the new content) instead of
 * joining it. Its finalize step reads the mark under the name lock (core/namelock.h), the lock every
 * publish and removal of the name takes: marked, it drops the work file and publishes nothing;
 * not marked yet, it publishes, and the write's local step, which takes the name lock after the
 * mark, replaces or removes that copy. Either way the cache ends with the backend's last write.
 * The superseded flight's readers still get the whole body they joined for, from the unlinked
 * work file's descriptor: it is what the backend had when they asked.
 *
 * OWNERSHIP
 * Backend handles live in be_list from first use until tgt_coldget_fini (a re-created bucket
 * gets a new handle; the old one stays until then, since readers may still use it). A flight is
 * reference-counted (fetcher + joiners, under fl_lock); the last reference closes its fd.
 */

/*
 * The backend read buffer, one per fetch in flight. A read returns what the transfer has (up to
 * this), then costs one pwrite, one checksum update and one lock: at 256 KiB those per-read costs
 * are well under 1% of the bytes' cost, so a larger buffer would only cost memory.
 */
#define CHUNK (256 * 1024)
/*
 * A spliced read (body_spliced) moves up to this (the backend's pipe holds as much): no buffer of
 * ours, and per-read costs (wakeups, the flight's lock, a send queued per client) a quarter of CHUNK's.
 */
#define OPEN_TRIES 3 /* fetches of an object evicted before its reader opened it (tgt_coldget_open) */
#define SPLICE_CHUNK (1024 * 1024)

enum { FL_RUNNING = 0, FL_DONE, FL_FAILED };

typedef struct be_entry {
	struct be_entry *next;
	char provider[TGT_PROVIDER_MAX];
	char bucket[FT_BUCKET_NAME_MAX + 1];
	int64_t created;
	ft_backend_t *b;
} be_entry_t;

typedef struct flight flight_t;

/* t->coldget: the target's backend handles and cold fetches in flight. */
struct tgt_coldget {
	pthread_mutex_t be_lock;
	be_entry_t *be_list; /* guarded by be_lock */
	pthread_mutex_t fl_lock;
	flight_t *flights; /* guarded by fl_lock */
};

struct flight {
	struct flight *next;
	tgt_coldget_t *cg; /* the table it is (or was) in */
	char *rel;         /* key: "<provider>/<bucket>/<obj>" */
	int refs;
	int state;       /* FL_* */
	int have_meta;   /* size and meta are set, fd is readable */
	int64_t size;    /* object size, -1 unknown */
	int64_t written; /* bytes in the work file so far */
	int fd;          /* the work file (read side, what clients are sent from), -1 until have_meta */
	int status;      /* FL_FAILED: the HTTP status for a client not answered yet */
	int superseded;  /* a write the backend took after this fetch started: publish nothing (out of the table) */
	char msg[400];
	ft_backend_meta_t meta;
	pthread_mutex_t mu;  /* guards state and the fields after it (next and refs: fl_lock; rel: fixed) */
	pthread_cond_t cond; /* with mu: more bytes, the metadata, or the end */
};

int tgt_is_remote(const tgt_obj_t *o)
{
	return strcmp(o->provider, "ais") != 0;
}

/* ---- backend handles ---- */

/* The backend of o's bucket (this incarnation), opened on first use. NULL with err filled. */
ft_backend_t *tgt_backend_get(const tgt_obj_t *o, ft_backend_error_t *err)
{
	ft_backend_t *b = NULL;
	ft_backend_config_t *cfg = NULL;
	ft_bmd_t *bmd = NULL;
	be_entry_t *e;
	tgt_coldget_t *cg = o->t->coldget;

	pthread_mutex_lock(&cg->be_lock);
	for (e = cg->be_list; e != NULL; e = e->next) {
		if (e->created == o->bucket_created && strcmp(e->provider, o->provider) == 0 &&
		    strcmp(e->bucket, o->bucket) == 0) {
			b = e->b;
			goto out;
		}
	}
	bmd = ft_bmd_current();
	const ft_bucket_t *bk = bmd ? ft_bmd_find(bmd, o->provider, o->bucket) : NULL;
	if (bk == NULL || bk->created_ns != o->bucket_created || bk->backend == NULL) {
		err->code = FT_BACKEND_ECONFIG;
		err->http_status = 0;
		snprintf(err->msg, sizeof(err->msg), "bucket %s/%s has no backend properties", o->provider, o->bucket);
		goto out;
	}
	cfg = malloc(sizeof(*cfg));
	e = calloc(1, sizeof(*e));
	if (cfg == NULL || e == NULL) {
		free(e);
		err->code = FT_BACKEND_ENOMEM;
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		goto out;
	}
	if (ft_backend_config_from_json(cfg, bk->backend, err) != FT_BACKEND_OK ||
	    (e->b = ft_backend_open(cfg, err)) == NULL) {
		free(e);
		goto out;
	}
	snprintf(e->provider, sizeof(e->provider), "%s", o->provider);
	snprintf(e->bucket, sizeof(e->bucket), "%s", o->bucket);
	e->created = o->bucket_created;
	e->next = cg->be_list;
	cg->be_list = e;
	b = e->b;
out:
	pthread_mutex_unlock(&cg->be_lock);
	free(cfg);
	ft_bmd_put(bmd);
	return b;
}

int tgt_coldget_init(tgt_t *t)
{
	tgt_coldget_t *cg = calloc(1, sizeof(*cg));

	if (cg == NULL)
		return -1;
	pthread_mutex_init(&cg->be_lock, NULL);
	pthread_mutex_init(&cg->fl_lock, NULL);
	t->coldget = cg;
	return 0;
}

void tgt_coldget_fini(tgt_t *t)
{
	tgt_coldget_t *cg = t->coldget;

	if (cg != NULL) {
		while (cg->be_list != NULL) {
			be_entry_t *e = cg->be_list;
			cg->be_list = e->next;
			ft_backend_close(e->b);
			free(e);
		}
		pthread_mutex_destroy(&cg->be_lock);
		pthread_mutex_destroy(&cg->fl_lock);
		free(cg);
		t->coldget = NULL;
	}
	ft_backend_global_cleanup();
}

/* ---- flights (fl_lock held by the caller) ---- */

/*
 * A flight's key: the name's own path (tgt_rel_path), the same for every request of the name
 * whether o->rel is that path or the name's hashed file (core/keymap.h), which a publish may
 * change while the flight runs.
 */
static const char *flight_key(const tgt_obj_t *o, char *buf, size_t cap)
{
	return tgt_rel_path(buf, cap, o->provider, o->bucket, o->obj) == 0 ? buf : o->rel;
}

static flight_t *flight_find(tgt_coldget_t *cg, const char *rel)
{
	for (flight_t *f = cg->flights; f != NULL; f = f->next)
		if (strcmp(f->rel, rel) == 0)
			return f;
	return NULL;
}

static flight_t *flight_new(tgt_coldget_t *cg, const char *rel)
{
	flight_t *f = calloc(1, sizeof(*f));

	if (f == NULL || (f->rel = strdup(rel)) == NULL) {
		free(f);
		return NULL;
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->refs = 1;
	f->fd = -1;
	f->size = -1;
	f->cg = cg;
	f->next = cg->flights;
	cg->flights = f;
	return f;
}

static void flight_unlink(flight_t *f)
{
	for (flight_t **p = &f->cg->flights; *p != NULL; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			return;
		}
	}
}

/* Drops a reference (takes fl_lock). */
static void flight_put(flight_t *f)
{
	pthread_mutex_lock(&f->cg->fl_lock);
	int last = --f->refs == 0;
	pthread_mutex_unlock(&f->cg->fl_lock);
	if (!last)
		return;
	if (f->fd >= 0)
		close(f->fd);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->mu);
	free(f->rel);
	free(f);
}

/* Ends the flight: state, status for unanswered readers, out of the table, everyone woken. */
static void flight_end(flight_t *f, int state, int status, const char *msg)
{
	pthread_mutex_lock(&f->cg->fl_lock);
	pthread_mutex_lock(&f->mu);
	f->state = state;
	f->status = status;
	if (msg != NULL)
		snprintf(f->msg, sizeof(f->msg), "%s", msg);
	flight_unlink(f);
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->mu);
	pthread_mutex_unlock(&f->cg->fl_lock);
}

/* ---- one client's response window ---- */

enum { SINK_NONE = 0, SINK_STREAMING, SINK_DONE };

typedef struct {
	ft_req_t *r;
	int state;    /* SINK_* */
	int gone;     /* the client went away: writes are skipped */
	uint64_t off; /* window: [off, off + len); len_known = 0 means to the end (unknown size) */
	uint64_t len;
	int len_known;
	int fd;        /* the flight's work file (read side): what the window is sent from */
	uint64_t held; /* offset of the window's last byte, sent only once the object is verified */
	int has_held;
} sink_t;

/* What the backend states of an object, as the headers of a stored one: ETag, Ais-Version, Last-Modified. */
static void backend_meta_headers(ft_req_t *r, const ft_backend_meta_t *m)
{
	char date[FT_DATE_HTTP_MAX];

	if (m->etag[0])
		ft_resp_headerf(r, "ETag", "\"%s\"", m->etag);
	if (m->version[0])
		ft_resp_header(r, "Ais-Version", m->version);
	if (m->mtime_ns > 0) {
		ft_date_format_http((time_t)(m->mtime_ns / 1000000000), date);
		ft_resp_header(r, "Last-Modified", date);
	}
}

/*
 * Starts the response for an object of size (-1 unknown), sent from fd: 200, 206 for a Range, or
 * 416/400 (then done).
 */
static void sink_start(sink_t *s, ft_req_t *r, const tgt_obj_t *o, int fd, int64_t size, const ft_backend_meta_t *m)
{
	const char *range = r != NULL ? ft_req_header(r, "Range") : NULL;
	uint64_t off = 0, len = 0;
	int status = 200;

	memset(s, 0, sizeof(*s));
	s->r = r;
	s->fd = fd;
	if (r == NULL) { /* prefetch: no client */
		s->state = SINK_DONE;
		return;
	}
	s->len_known = size >= 0;
	s->len = size >= 0 ? (uint64_t)size : 0;
	if (size >= 0 && range != NULL) {
		switch (ft_range_parse(range, (uint64_t)size, &off, &len)) {
		case FT_RANGE_NONE:
			break;
		case FT_RANGE_OK:
			s->off = off;
			s->len = len;
			status = 206;
			ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRId64, off,
					off + len - 1, size);
			break;
		case FT_RANGE_UNSAT:
			ft_resp_headerf(r, "Content-Range", "bytes */%" PRId64, size);
			ft_resp_error(r, 416, "range \"%s\" not satisfiable for object \"%s/%s\" of %" PRId64 " bytes",
				      range, o->bucket, o->obj, size);
			s->state = SINK_DONE;
			return;
		default:
			ft_resp_error(r, 400, "malformed Range header \"%s\" (expected one range: bytes=a-b, a- or -n)",
				      range);
			s->state = SINK_DONE;
			return;
		}
	}
	backend_meta_headers(r, m);
	ft_resp_header(r, "Accept-Ranges", "bytes");
	s->state = SINK_STREAMING;
	if (ft_resp_stream_start(r, status, TGT_CONTENT_TYPE, s->len_known ? (int64_t)s->len : -1) != 0)
		s->gone = 1;
}

/* Queues the work file's bytes [pos, pos + n) (already written) to the client. */
static void sink_send(sink_t *s, uint64_t pos, uint64_t n)
{
	if (n > 0 && !s->gone && ft_resp_stream_sendfile(s->r, s->fd, pos, n) != 0)
		s->gone = 1;
}

/* Object bytes [pos, pos + n) are in the work file: sends the part inside the window, holding back its last byte. */
static void sink_data(sink_t *s, uint64_t pos, uint64_t n)
{
	if (s->state != SINK_STREAMING)
		return;
	uint64_t lo = pos > s->off ? pos : s->off, hi = pos + n;
	if (s->len_known && hi > s->off + s->len)
		hi = s->off + s->len;
	if (hi <= lo)
		return;
	if (s->len_known && hi == s->off + s->len) {
		s->held = hi - 1;
		s->has_held = 1;
		hi--;
	}
	sink_send(s, lo, hi - lo);
}

/* The object is verified and in place (the work file fd still reads it): the held byte, then the proper end. */
static void sink_finish(sink_t *s)
{
	if (s->state == SINK_STREAMING) {
		if (s->has_held)
			sink_send(s, s->held, 1);
		ft_resp_stream_end(s->r, 0);
	}
	s->state = SINK_DONE;
}

/* Failure: an error response if none was started, else an aborted body. */
static void sink_fail(sink_t *s, int status, const char *msg)
{
	if (s->r != NULL && s->state == SINK_NONE) /* r NULL: prefetch, no client */
		ft_resp_error(s->r, status, "%s", msg);
	else if (s->r != NULL && s->state == SINK_STREAMING)
		ft_resp_stream_end(s->r, -EIO);
	s->state = SINK_DONE;
}

/* ---- the fetcher ---- */

typedef struct {
	tgt_obj_t *o;
	flight_t *f;
	sink_t sink;
	int fd;        /* work file (write side) */
	char work[64]; /* its name in .work; "" once renamed or removed */
	ft_cksum_t ck;
	int ck_live;
	ft_cksum_type_t ck_type;
	ft_backend_reader_t *rd;
	ft_backend_meta_t meta;
	int64_t size;
	uint64_t pos;
	unsigned char *buf;
} fetch_t;

static void fetch_release(fetch_t *x)
{
	ft_backend_reader_close(x->rd);
	x->rd = NULL;
	if (x->ck_live)
		ft_cksum_abort(&x->ck);
	x->ck_live = 0;
	tgt_work_drop(x->o->mp, &x->fd, x->work);
	free(x->buf);
	x->buf = NULL;
}

/* Under the object's name lock: whether a write superseded the flight (see DESIGN). */
static int superseded_locked(flight_t *f)
{
	pthread_mutex_lock(&f->mu);
	int s = f->superseded;
	pthread_mutex_unlock(&f->mu);
	return s;
}

/*
 * Metadata from the verified fetch, sync per policy, rename under the object's name lock. 0 when
 * published, 1 when superseded (nothing published; the work file stays for fetch_release), or -errno.
 */
static int finalize(fetch_t *x)
{
	tgt_obj_t *o = x->o;
	tgt_t *t = o->t;
	ft_lom_t lom;
	int rc;

	memset(&lom, 0, sizeof(lom));
	lom.size = x->pos;
	lom.cksum_type = x->ck_type;
	ft_cksum_final(&x->ck, lom.cksum);
	x->ck_live = 0;
	lom.atime_ns = ft_now_ns();
	lom.mtime_ns = x->meta.mtime_ns > 0 ? x->meta.mtime_ns : lom.atime_ns;
	/* The backend's identity of this content, for revalidation (too long to keep: left out). */
	if (strlen(x->meta.version) < sizeof(lom.version))
		snprintf(lom.version, sizeof(lom.version), "%s", x->meta.version);
	if (strlen(x->meta.etag) < sizeof(lom.etag))
		snprintf(lom.etag, sizeof(lom.etag), "%s", x->meta.etag);
	if (t->cfg.sync != FT_SYNC_NONE && fdatasync(x->fd) != 0)
		return -errno;
	rc = ft_lom_fset(x->fd, &lom);
	if (rc != 0)
		return rc;
	tgt_name_lock(o);
	if (superseded_locked(x->f)) {
		tgt_name_unlock(o);
		return 1;
	}
	rc = tgt_publish(o, x->work, t->cfg.sync);
	tgt_name_unlock(o);
	if (rc == 0) {
		tgt_list_bump(t, o->provider, o->bucket);
		tgt_lru_kick(t);
	}
	return rc;
}

/* Fails the flight and the fetcher's own response with status and a message. */
static void fetch_fail(fetch_t *x, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fetch_fail(fetch_t *x, int status, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ft_warn("cold GET %s: %s", x->o->rel, msg);
	ft_metric_error(status == 507 || status == 500 ? FT_ME_DISK : FT_ME_BACKEND);
	fetch_release(x); /* work file removed before anyone can see the flight ended */
	flight_end(x->f, FL_FAILED, status, msg);
	sink_fail(&x->sink, status, msg);
}

/* Opens the backend, the work file and the GET; publishes size and meta to the flight. 0 or -1 (failed). */
static int fetch_open(fetch_t *x)
{
	tgt_obj_t *o = x->o;
	ft_backend_error_t err;
	ft_backend_get_opts_t opts = {.verify = 1};
	ft_backend_t *b = tgt_backend_get(o, &err);

	if (b == NULL) {
		fetch_fail(x, 500, "bucket %s/%s: backend: %s", o->provider, o->bucket, err.msg);
		return -1;
	}
	x->fd = tgt_work_create(o->mp, x->work, sizeof(x->work));
	if (x->fd < 0) {
		int e = -x->fd;
		x->work[0] = '\0';
		fetch_fail(x, e == ENOSPC ? 507 : 500, "cannot create a work file: %s", strerror(e));
		return -1;
	}
	x->ck_type = o->cksum == FT_CKSUM_NONE ? FT_CKSUM_XXHASH : o->cksum;
	if (ft_cksum_init(&x->ck, x->ck_type) != 0) {
		fetch_fail(x, 500, "out of memory");
		return -1;
	}
	x->ck_live = 1;
	ft_backend_err_t code = ft_backend_get(b, o->obj, &opts, &x->rd, &err);
	if (code != FT_BACKEND_OK) {
		fetch_fail(x, ft_backend_http_status(code), "%s/%s: %s", o->bucket, o->obj, err.msg);
		return -1;
	}
	x->meta = *ft_backend_reader_meta(x->rd);
	x->size = ft_backend_reader_length(x->rd);
	if (x->size < 0)
		x->size = x->meta.size;
	/* Nothing is cached (or streamed) for an object that cannot fit even after eviction. */
	if (x->size >= 0 && tgt_lru_reserve(o, (uint64_t)x->size) != 0) {
		fetch_fail(x, 507, "%s/%s of %" PRId64 " bytes does not fit on mountpath %s, even after eviction",
			   o->bucket, o->obj, x->size, o->mp->path);
		return -1;
	}
	/* Blocks allocated up front: pwrite then skips ext4's per-block delayed allocation (about half its cost). */
	if (x->size > 0 && fallocate(x->fd, 0, 0, (off_t)x->size) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
		int e = errno;
		fetch_fail(x, e == ENOSPC || e == EDQUOT ? 507 : 500,
			   "cannot allocate %" PRId64 " bytes for the work file: %s", x->size, strerror(e));
		return -1;
	}
	int rfd = openat(o->mp->work_fd, x->work, O_RDONLY | O_CLOEXEC);
	if (rfd < 0) {
		fetch_fail(x, 500, "cannot reopen the work file: %s", strerror(errno));
		return -1;
	}
	pthread_mutex_lock(&x->f->mu);
	x->f->fd = rfd;
	x->f->size = x->size;
	x->f->meta = x->meta;
	x->f->have_meta = 1;
	pthread_cond_broadcast(&x->f->cond);
	pthread_mutex_unlock(&x->f->mu);
	return 0;
}

/* got more bytes are at x->pos in the work file (and in the checksum): to the flight and the client. */
static void fetch_landed(fetch_t *x, size_t got)
{
	pthread_mutex_lock(&x->f->mu);
	x->f->written += (int64_t)got;
	pthread_cond_broadcast(&x->f->cond);
	pthread_mutex_unlock(&x->f->mu);
	ft_metric_add(FT_M_COLDGET_BYTES, ft_metric_label_index(FT_M_COLDGET_BYTES, x->o->provider), 0, got);
	sink_data(&x->sink, x->pos, got);
	x->pos += got;
}

static void fetch_read_failed(fetch_t *x, ft_backend_err_t code)
{
	fetch_fail(x, ft_backend_http_status(code), "%s/%s: after %" PRIu64 " bytes: %s", x->o->bucket, x->o->obj,
		   x->pos, ft_backend_reader_error(x->rd)->msg);
}

static void fetch_write_failed(fetch_t *x, int e)
{
	fetch_fail(x, e == ENOSPC || e == EDQUOT ? 507 : 500, "write: %s", strerror(e));
}

/* x->buf, allocated on first use (freed with x). 0 or -1 (failed). */
static int fetch_buf(fetch_t *x)
{
	if (x->buf == NULL && (x->buf = malloc(CHUNK)) == NULL) {
		fetch_fail(x, 500, "out of memory");
		return -1;
	}
	return 0;
}

/* The body through our buffer: read, pwrite, checksum. 0 or -1 (failed). */
static int body_copied(fetch_t *x)
{
	if (fetch_buf(x) != 0)
		return -1;
	for (;;) {
		size_t got = 0;
		ft_backend_err_t code = ft_backend_read(x->rd, x->buf, CHUNK, &got);
		if (code != FT_BACKEND_OK) {
			fetch_read_failed(x, code);
			return -1;
		}
		if (got == 0)
			return 0;
		for (size_t done = 0; done < got;) {
			ssize_t n = pwrite(x->fd, x->buf + done, got - done, (off_t)(x->pos + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fetch_write_failed(x, n < 0 ? errno : EIO);
				return -1;
			}
			done += (size_t)n;
		}
		ft_cksum_update(&x->ck, x->buf, got);
		fetch_landed(x, got);
	}
}

/*
 * Checksums the len bytes of the work file at x->pos, which a splice has just written: read back in
 * CHUNK pieces into our buffer, from pages still in the CPU cache. Cheaper than reading them through
 * a mapping of the file, whose page faults cost three times the copy on a paravirtualized machine
 * (bench/datapath.md, "Cold GET on this machine"). 0, or an errno.
 */
static int cksum_landed(fetch_t *x, size_t len)
{
	for (size_t done = 0; done < len;) {
		size_t want = len - done < CHUNK ? len - done : CHUNK;
		ssize_t n = pread(x->f->fd, x->buf, want, (off_t)(x->pos + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		ft_cksum_update(&x->ck, x->buf, (size_t)n);
		done += (size_t)n;
	}
	return 0;
}

/*
 * The body spliced from the backend's socket into the work file: its bytes move from the socket
 * buffers into the page cache, then are checksummed from there (cksum_landed); none passes through
 * user space on its way to a client. 0 or -1 (failed).
 */
static int body_spliced(fetch_t *x)
{
	if (fetch_buf(x) != 0)
		return -1;
	for (;;) {
		size_t got = 0;
		int werr = 0;
		ft_backend_err_t code = ft_backend_read_to_fd(x->rd, x->fd, (int64_t)x->pos, SPLICE_CHUNK, &got, &werr);
		if (werr != 0) {
			fetch_write_failed(x, werr);
			return -1;
		}
		if (code != FT_BACKEND_OK) {
			fetch_read_failed(x, code);
			return -1;
		}
		if (got == 0)
			return 0;
		int rerr = cksum_landed(x, got);
		if (rerr != 0) {
			fetch_fail(x, 500, "reading back the work file: %s", strerror(rerr));
			return -1;
		}
		fetch_landed(x, got);
	}
}

/* Pulls the body into the work file and the flight, streaming to the fetcher's client. 0 or -1 (failed). */
static int fetch_body(fetch_t *x)
{
	/* Spliced where the backend can and the size is known. */
	int rc = x->size > 0 && ft_backend_reader_splices(x->rd) ? body_spliced(x) : body_copied(x);
	if (rc != 0)
		return -1;
	if (x->size >= 0 && (int64_t)x->pos != x->size) {
		fetch_fail(x, 502, "%s/%s: got %" PRIu64 " bytes, the backend declared %" PRId64, x->o->bucket,
			   x->o->obj, x->pos, x->size);
		return -1;
	}
	return 0;
}

/* The fetcher: f is a new flight (one reference, ours). Makes r's response call. */
static void run_fetch(ft_req_t *r, tgt_obj_t *o, flight_t *f)
{
	fetch_t x;

	memset(&x, 0, sizeof(x));
	x.o = o;
	x.f = f;
	x.fd = -1;
	x.sink.r = r;
	if (fetch_open(&x) != 0)
		goto out;
	sink_start(&x.sink, r, o, f->fd, x.size, &x.meta);
	if (fetch_body(&x) != 0)
		goto out;
	int rc = finalize(&x);
	if (rc < 0) {
		fetch_fail(&x,
			   rc == -ESTALE   ? 404
			   : rc == -ENOSPC ? 507
					   : 500,
			   "%s/%s: cannot store: %s", o->bucket, o->obj,
			   rc == -ESTALE ? "the bucket was destroyed meanwhile" : strerror(-rc));
		goto out;
	}
	if (rc == 1)
		ft_info("cold GET %s: a write reached the backend during the fetch; %" PRIu64
			" bytes served, not cached",
			o->rel, x.pos);
	else
		ft_debug("cold GET %s: %" PRIu64 " bytes fetched and cached", o->rel, x.pos);
	fetch_release(&x); /* removes the work file when it was not published */
	flight_end(f, FL_DONE, 200, NULL);
	sink_finish(&x.sink);
out:
	flight_put(f);
}

/* ---- joiners ---- */

/* A request joining flight f (holds a reference, dropped here). Makes r's response call. */
static void run_join(ft_req_t *r, tgt_obj_t *o, flight_t *f)
{
	ft_backend_meta_t meta;
	sink_t s;
	int64_t size;

	memset(&s, 0, sizeof(s));
	s.r = r;
	pthread_mutex_lock(&f->mu);
	while (!f->have_meta && f->state == FL_RUNNING)
		pthread_cond_wait(&f->cond, &f->mu);
	if (!f->have_meta) {
		int status = f->status;
		char msg[400];
		snprintf(msg, sizeof(msg), "%s", f->msg);
		pthread_mutex_unlock(&f->mu);
		sink_fail(&s, status, msg);
		goto out;
	}
	size = f->size;
	meta = f->meta;
	pthread_mutex_unlock(&f->mu);

	/* f->fd is set once have_meta is, and stays open while we hold our reference. */
	sink_start(&s, r, o, f->fd, size, &meta);
	uint64_t pos = s.off;
	int state = FL_RUNNING;
	for (;;) {
		pthread_mutex_lock(&f->mu);
		while (f->state == FL_RUNNING && (uint64_t)f->written <= pos)
			pthread_cond_wait(&f->cond, &f->mu);
		state = f->state;
		uint64_t written = (uint64_t)f->written;
		pthread_mutex_unlock(&f->mu);
		if (state == FL_FAILED || s.state != SINK_STREAMING)
			break;
		uint64_t end = s.len_known ? s.off + s.len : written;
		if (pos >= end && state == FL_DONE)
			break;
		if (pos >= end) { /* window complete: wait for the verdict */
			pthread_mutex_lock(&f->mu);
			while (f->state == FL_RUNNING)
				pthread_cond_wait(&f->cond, &f->mu);
			state = f->state;
			pthread_mutex_unlock(&f->mu);
			if (state == FL_DONE)
				break;
			continue;
		}
		uint64_t upto = written < end ? written : end;
		sink_data(&s, pos, upto - pos); /* in the work file already: sent from there */
		pos = upto;
	}
	/* f->status and f->msg are final once the state is (read under f->mu above). */
	if (s.state == SINK_STREAMING && state == FL_DONE)
		sink_finish(&s);
	else
		sink_fail(&s, f->status ? f->status : 500, f->msg);
out:
	flight_put(f);
}

/* ---- entry points ---- */

static int cached(const tgt_obj_t *o)
{
	struct stat st;

	return fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

static int latest_ver(ft_req_t *r)
{
	const char *v = ft_req_query(r, "latest-ver");

	return v != NULL && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

int tgt_coldget_wanted(ft_req_t *r, const tgt_obj_t *o)
{
	return tgt_is_remote(o) && (latest_ver(r) || !cached(o));
}

/* Removes the cached copy (the backend no longer has the object). */
static void uncache(tgt_obj_t *o)
{
	tgt_t *t = o->t;

	tgt_name_lock(o);
	if (unlinkat(o->mp->root_fd, o->rel, 0) == 0)
		tgt_parent_prune(o->mp, o->rel);
	tgt_name_unlock(o);
	tgt_list_bump(t, o->provider, o->bucket);
}

/*
 * latest-ver=true on a cached object: HEAD the backend. Returns 1 when the cached copy is current
 * (serve it), 0 when it must be refetched, -1 after responding (404 deleted, backend error).
 */
static int revalidate(ft_req_t *r, tgt_obj_t *o)
{
	ft_backend_error_t err;
	ft_backend_meta_t now, have;
	ft_lom_t lom;
	ft_backend_t *b = tgt_backend_get(o, &err);

	if (b == NULL) {
		ft_resp_error(r, 500, "bucket %s/%s: backend: %s", o->provider, o->bucket, err.msg);
		return -1;
	}
	ft_backend_err_t code = ft_backend_head(b, o->obj, &now, &err);
	if (code == FT_BACKEND_ENOTFOUND) {
		uncache(o);
		ft_resp_error(r, 404,
			      "object \"%s://%s/%s\" does not exist (deleted from the backend; cached copy removed)",
			      o->provider, o->bucket, o->obj);
		return -1;
	}
	if (code != FT_BACKEND_OK) {
		ft_resp_error(r, ft_backend_http_status(code), "%s/%s: revalidation failed: %s", o->bucket, o->obj,
			      err.msg);
		return -1;
	}
	int fd = openat(o->mp->root_fd, o->rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc = fd >= 0 ? ft_lom_fget(fd, &lom) : -errno;
	if (fd >= 0)
		close(fd);
	if (rc != 0)
		return 0; /* gone or damaged meanwhile: fetch again */
	memset(&have, 0, sizeof(have));
	have.size = (int64_t)lom.size;
	have.mtime_ns = lom.mtime_ns;
	snprintf(have.etag, sizeof(have.etag), "%s", lom.etag);
	snprintf(have.version, sizeof(have.version), "%s", lom.version);
	return ft_backend_meta_same(&have, &now) ? 1 : 0;
}

/* HEAD of an object not cached: the backend's metadata, nothing fetched. */
static void head_remote(ft_req_t *r, tgt_obj_t *o)
{
	ft_backend_error_t err;
	ft_backend_meta_t m;
	ft_backend_t *b = tgt_backend_get(o, &err);

	if (b == NULL) {
		ft_resp_error(r, 500, "bucket %s/%s: backend: %s", o->provider, o->bucket, err.msg);
		return;
	}
	ft_backend_err_t code = ft_backend_head(b, o->obj, &m, &err);
	if (code != FT_BACKEND_OK) {
		ft_resp_error(r, ft_backend_http_status(code), "%s/%s: %s", o->bucket, o->obj, err.msg);
		return;
	}
	backend_meta_headers(r, &m);
	if (m.size >= 0)
		ft_resp_headerf(r, "Ais-Size", "%" PRId64, m.size);
	ft_resp_header(r, "Ais-Cached", "false");
	ft_resp_stream_start(r, 200, TGT_CONTENT_TYPE, m.size);
	ft_resp_stream_end(r, 0);
}

int tgt_coldget_serve(ft_req_t *r, tgt_obj_t *o)
{
	char key[TGT_REL_MAX];
	int force = 0;

	if (latest_ver(r) && cached(o)) {
		int rc = revalidate(r, o);
		if (rc < 0)
			return 0;
		if (rc == 1)
			return 1;
		force = 1;
	}
	if (ft_req_method(r) == FT_HTTP_HEAD && !force) {
		if (cached(o))
			return 1;
		head_remote(r, o);
		return 0;
	}
	pthread_mutex_lock(&o->t->coldget->fl_lock);
	flight_t *f = flight_find(o->t->coldget, flight_key(o, key, sizeof(key)));
	if (f != NULL) {
		f->refs++;
		pthread_mutex_unlock(&o->t->coldget->fl_lock);
		run_join(r, o, f);
		return 0;
	}
	if (!force && cached(o)) { /* a fetch finished meanwhile */
		pthread_mutex_unlock(&o->t->coldget->fl_lock);
		return 1;
	}
	f = flight_new(o->t->coldget, flight_key(o, key, sizeof(key)));
	pthread_mutex_unlock(&o->t->coldget->fl_lock);
	if (f == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return 0;
	}
	run_fetch(r, o, f);
	return 0;
}

void tgt_coldget_supersede(const tgt_obj_t *o)
{
	char key[TGT_REL_MAX];

	pthread_mutex_lock(&o->t->coldget->fl_lock);
	flight_t *f = flight_find(o->t->coldget, flight_key(o, key, sizeof(key)));
	if (f != NULL) {
		flight_unlink(f); /* requests from now on fetch anew */
		pthread_mutex_lock(&f->mu);
		f->superseded = 1;
		pthread_mutex_unlock(&f->mu);
	}
	pthread_mutex_unlock(&o->t->coldget->fl_lock);
	if (f != NULL)
		ft_debug("cold GET %s: superseded by a write", o->rel);
}

/*
 * Waits until f (a reference held, dropped here) ends; 0, or minus its HTTP status with its message.
 * When fd is not NULL and the fetch published the object, *fd is a descriptor of its file (the
 * work file's, renamed into place): the caller reads what was fetched whatever evicts it since.
 */
static int flight_wait(flight_t *f, int64_t *bytes, int *fd, char *err, size_t cap)
{
	pthread_mutex_lock(&f->mu);
	while (f->state == FL_RUNNING)
		pthread_cond_wait(&f->cond, &f->mu);
	int rc = f->state == FL_DONE ? 0 : f->status >= 400 ? -f->status : -502;
	*bytes = f->written;
	snprintf(err, cap, "%s", f->msg);
	if (fd != NULL && rc == 0 && f->fd >= 0 && !f->superseded)
		*fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&f->mu);
	flight_put(f);
	return rc;
}

/* tgt_coldget_prefetch, with flight_wait's fd (-1 when it was cached already or none could be had). */
static int fetch_wait(tgt_obj_t *o, int64_t *bytes, int *fd, char *err, size_t cap)
{
	char key[TGT_REL_MAX];
	struct stat st;

	*bytes = 0;
	if (fd != NULL)
		*fd = -1;
	pthread_mutex_lock(&o->t->coldget->fl_lock);
	flight_t *f = flight_find(o->t->coldget, flight_key(o, key, sizeof(key)));
	if (f != NULL) {
		f->refs++;
		pthread_mutex_unlock(&o->t->coldget->fl_lock);
		return flight_wait(f, bytes, fd, err, cap);
	}
	if (fstatat(o->mp->root_fd, o->rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
		pthread_mutex_unlock(&o->t->coldget->fl_lock);
		*bytes = st.st_size;
		return 1;
	}
	f = flight_new(o->t->coldget, flight_key(o, key, sizeof(key)));
	if (f != NULL)
		f->refs++; /* ours, for the verdict after run_fetch dropped the fetcher's */
	pthread_mutex_unlock(&o->t->coldget->fl_lock);
	if (f == NULL) {
		snprintf(err, cap, "out of memory");
		return -500;
	}
	run_fetch(NULL, o, f);
	return flight_wait(f, bytes, fd, err, cap);
}

int tgt_coldget_prefetch(tgt_obj_t *o, int64_t *bytes, char *err, size_t cap)
{
	return fetch_wait(o, bytes, NULL, err, cap);
}

/* The fetched object's descriptor fd (taken) checked as an open of its path would be: 0 with *lom, or -1 (closed). */
static int fetched_check(int fd, ft_lom_t *lom)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ft_lom_fget(fd, lom) == 0 &&
	    (uint64_t)st.st_size == lom->size)
		return 0;
	close(fd);
	return -1;
}

int tgt_coldget_open(tgt_obj_t *o, int *fd, ft_lom_t *lom, char *err, size_t cap)
{
	tgt_replica_t main_copy = {.mp_index = (int)(o->mp - o->t->mountpaths), .copy = false};
	tgt_replica_state_t s = TGT_REPLICA_ABSENT; /* the caller's open found nothing */

	/* fetched (or a fetch joined) and read from its own descriptor; cached meanwhile but evicted
	 * before the open: a few more tries */
	for (int tries = 0; s == TGT_REPLICA_ABSENT && tries < OPEN_TRIES; tries++) {
		int64_t bytes = 0;
		int rc = fetch_wait(o, &bytes, fd, err, cap);
		if (rc < 0)
			return rc;
		if (*fd >= 0 && fetched_check(*fd, lom) == 0)
			return 0;
		s = tgt_replica_open(o, &main_copy, false, fd, lom, NULL);
	}
	if (s == TGT_REPLICA_OK)
		return 0;
	if (s == TGT_REPLICA_ABSENT) {
		snprintf(err, cap, "evicted again each time it was fetched");
		return -503;
	}
	snprintf(err, cap, "the cached copy cannot be read (%s); a plain GET fetches it again",
		 tgt_replica_state_name(s));
	return -500;
}
