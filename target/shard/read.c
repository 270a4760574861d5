/* SPDX-License-Identifier: Apache-2.0 */
/* GET and HEAD of one shard member (?archpath=): a ranged sendfile of an indexed member, else decoded; dispatch of archregx. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/fcache.h"
#include "core/replica.h"
#include "http/util.h"
#include "shard/shard.h"

/*
 * DESIGN
 * Hot path (loop thread): open the shard's main copy (metadata and size checked on that fd),
 * find its index in the cache, and answer the member's byte range with ft_resp_file: one
 * sendfile(2), whatever the shard's size or the member's position. The open-file cache keeps the
 * shard open as it keeps small objects (core/fcache.h; any size here: a member read is small), so
 * a member read of a kept shard costs what a GET of a kept object does. Everything that blocks runs
 * on a worker: building the index on first access (or after a write), decoding a member of a
 * compressed shard, fetching a remote bucket's shard that is not cached yet. A decoded member of
 * at most BUFFER_MAX bytes is decoded whole before the answer starts, so a corrupt one is a clean
 * 422; a larger one streams, and a failure cuts the connection (never a short body that looks whole).
 */

#define BUFFER_MAX ((uint64_t)16 << 20)
#define STREAM_CHUNK (256 * 1024)

typedef struct {
	tgt_obj_t *o;
	tgt_shard_fmt_t fmt;
	const char *archpath;
	int fd;        /* the shard's main copy, -1 once handed on */
	bool borrowed; /* fd is the open-file cache's (core/fcache.h): never closed here */
	ft_lom_t lom;
} member_req_t;

bool tgt_shard_wanted(ft_req_t *r)
{
	return ft_req_query(r, "archpath") != NULL || ft_req_query(r, "archregx") != NULL;
}

static void close_fd_hook(void *arg)
{
	member_req_t *q = arg;

	if (q->fd >= 0 && !q->borrowed)
		close(q->fd);
	q->fd = -1;
}

void tgt_shard_fail(ft_req_t *r, const tgt_obj_t *o, int rc, const char *err)
{
	if (rc == -EFBIG)
		ft_resp_error(r, 422, "shard \"%s/%s\": %s (shard_max_decoded_bytes %" PRId64 ")", o->bucket, o->obj,
			      err, o->t->cfg.shard_max_decoded_bytes);
	else if (rc == -EBADMSG)
		ft_resp_error(r, 422, "shard \"%s/%s\" is corrupt or truncated: %s", o->bucket, o->obj, err);
	else
		ft_resp_error(r, 500, "shard \"%s/%s\": %s", o->bucket, o->obj, err[0] ? err : strerror(-rc));
}

int tgt_shard_open(ft_req_t *r, tgt_obj_t *o, bool worker, int *fd, ft_lom_t *lom)
{
	tgt_replica_t main_copy = {.mp_index = (int)(o->mp - o->t->mountpaths), .copy = false};
	tgt_replica_state_t s = tgt_replica_open(o, &main_copy, false, fd, lom, NULL);

	if (s == TGT_REPLICA_ABSENT && !worker && tgt_is_remote(o))
		return 1;
	if (s == TGT_REPLICA_ABSENT && tgt_is_remote(o)) {
		char err[400] = "";
		int rc = tgt_coldget_open(o, fd, lom, err, sizeof(err));
		if (rc < 0)
			ft_resp_error(r, -rc, "shard \"%s://%s/%s\": %s", o->provider, o->bucket, o->obj, err);
		return rc < 0 ? -1 : 0;
	}
	if (s == TGT_REPLICA_OK)
		return 0;
	if (s == TGT_REPLICA_ABSENT)
		ft_resp_error(r, 404, "object \"%s/%s\" does not exist", o->bucket, o->obj);
	else
		ft_resp_error(r, 500, "shard \"%s/%s\" cannot be read (%s); a plain GET repairs it from its redundancy",
			      o->bucket, o->obj, tgt_replica_state_name(s));
	return -1;
}

static void member_headers(ft_req_t *r, const member_req_t *q)
{
	ft_resp_header(r, "Accept-Ranges", "bytes");
	ft_resp_header(r, "Ais-Version", q->lom.version);
}

/*
 * The member's range to send: 0 with *off, *len and *status set (Content-Range added), or -1 after
 * responding 416 or 400.
 */
static int member_range(ft_req_t *r, const member_req_t *q, uint64_t size, uint64_t *off, uint64_t *len, int *status)
{
	const char *range = ft_req_header(r, "Range");

	*status = 200;
	*off = 0;
	*len = size;
	if (ft_req_method(r) == FT_HTTP_HEAD)
		return 0;
	switch (ft_range_parse(range, size, off, len)) {
	case FT_RANGE_NONE:
		return 0;
	case FT_RANGE_OK:
		*status = 206;
		ft_resp_headerf(r, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, *off, *off + *len - 1,
				size);
		return 0;
	case FT_RANGE_UNSAT:
		ft_resp_headerf(r, "Content-Range", "bytes */%" PRIu64, size);
		ft_resp_error(r, 416, "range \"%s\" not satisfiable for member \"%s\" of %" PRIu64 " bytes", range,
			      q->archpath, size);
		return -1;
	default:
		ft_resp_error(r, 400, "malformed Range header \"%s\" (expected one range: bytes=a-b, a- or -n)", range);
		return -1;
	}
}

/* Worker: a member without a data offset, decoded from the shard. */
static void serve_decoded(ft_req_t *r, member_req_t *q, const tgt_shard_member_t *m)
{
	const tgt_obj_t *o = q->o;
	char err[300] = "";
	uint64_t off, len;
	int status, rc;
	uint8_t *buf = NULL;

	if (member_range(r, q, m->size, &off, &len, &status) != 0)
		return;
	member_headers(r, q);
	if (ft_req_method(r) == FT_HTTP_HEAD) {
		ft_resp_stream_start(r, 200, "application/octet-stream", (int64_t)m->size);
		ft_resp_stream_end(r, 0);
		return;
	}
	tgt_shard_dec_t *d = tgt_shard_dec_open(q->fd, q->lom.size, q->fmt, (uint64_t)o->t->cfg.shard_max_decoded_bytes,
						err, sizeof(err));
	if (d == NULL) {
		tgt_shard_fail(r, o, -EBADMSG, err);
		return;
	}
	if ((rc = tgt_shard_dec_seek(d, m)) != 0) {
		snprintf(err, sizeof(err), "%s", rc == -ENOENT ? "member vanished" : tgt_shard_dec_error(d));
		goto fail;
	}
	if (m->size <= BUFFER_MAX) {       /* whole, then answered: a corrupt member is a clean error */
		buf = malloc(m->size + 1); /* one more: a member decoding to more than its size is caught */
		uint64_t got = 0;
		ssize_t n = 1;
		while (buf != NULL && n > 0) {
			uint64_t room = m->size + 1 - got;
			n = tgt_shard_dec_read(d, buf + got, room > STREAM_CHUNK ? STREAM_CHUNK : (size_t)room);
			if (n > 0)
				got += (uint64_t)n;
		}
		if (buf == NULL || n < 0) {
			rc = buf == NULL ? -ENOMEM : (int)n;
			snprintf(err, sizeof(err), "%s", buf == NULL ? "out of memory" : tgt_shard_dec_error(d));
			goto fail;
		}
		ft_resp_bytes(r, status, "application/octet-stream", buf + off, len);
		goto out;
	}
	/* Large: stream it; skip to off, send len, and cut the connection on any failure. */
	buf = malloc(STREAM_CHUNK);
	if (buf == NULL) {
		rc = -ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	ft_resp_stream_start(r, status, "application/octet-stream", (int64_t)len);
	uint64_t pos = 0, sent = 0;
	int werr = 0;
	while (sent < len && werr == 0) {
		ssize_t n = tgt_shard_dec_read(d, buf, STREAM_CHUNK);
		if (n <= 0) {
			ft_warn("shard %s/%s: member \"%s\" cut after %" PRIu64 " bytes: %s", o->bucket, o->obj,
				m->name, pos, n < 0 ? tgt_shard_dec_error(d) : "early end");
			werr = -EIO;
			break;
		}
		uint64_t a = pos, b = pos + (uint64_t)n;
		pos = b;
		if (b <= off)
			continue;
		uint64_t from = a < off ? off - a : 0, upto = b - a;
		if (upto - from > len - sent)
			upto = from + (len - sent);
		werr = ft_resp_stream_write(r, buf + from, upto - from);
		sent += upto - from;
	}
	ft_resp_stream_end(r, werr);
	goto out;
fail:
	tgt_shard_fail(r, o, rc, err);
out:
	free(buf);
	tgt_shard_dec_close(d);
}

/* The member from the index: ranged sendfile, or decoded on a worker. Takes the reference of ix. */
static void serve_member(ft_req_t *r, member_req_t *q, tgt_shard_index_t *ix, bool worker);

static void serve_worker(ft_req_t *r, void *arg)
{
	member_req_t *q = arg;
	tgt_shard_index_t *ix = NULL;
	char err[300] = "";

	if (q->fd < 0 && tgt_shard_open(r, q->o, true, &q->fd, &q->lom) != 0)
		return;
	int rc = tgt_shard_index_get(q->o, q->fd, &q->lom, q->fmt, true, &ix, err, sizeof(err));
	if (rc != 0) {
		tgt_shard_fail(r, q->o, rc, err);
		return;
	}
	serve_member(r, q, ix, true);
}

static void serve_member(ft_req_t *r, member_req_t *q, tgt_shard_index_t *ix, bool worker)
{
	const tgt_obj_t *o = q->o;
	tgt_t *t = o->t; /* q and o are request memory: gone once the response call returned */
	const tgt_shard_member_t *m = tgt_shard_index_find(ix, q->archpath);
	uint64_t off, len;
	int status;

	if (m == NULL) {
		tgt_shard_index_put(o->t, ix);
		ft_resp_error(r, 404, "shard \"%s/%s\" has no member \"%s\"", o->bucket, o->obj, q->archpath);
		return;
	}
	if (m->off < 0) {
		if (!worker) {
			tgt_shard_index_put(o->t, ix);
			ft_req_defer(r, serve_worker, q);
			return;
		}
		serve_decoded(r, q, m);
		tgt_shard_index_put(t, ix);
		return;
	}
	uint64_t moff = (uint64_t)m->off, msize = m->size;
	tgt_shard_index_put(o->t, ix);
	if (member_range(r, q, msize, &off, &len, &status) != 0)
		return;
	member_headers(r, q);
	int fd = q->fd;
	q->fd = -1; /* ft_resp_file takes it; a borrowed one stays the cache's */
	if (q->borrowed)
		ft_resp_file_borrowed(r, status, "application/octet-stream", fd, (off_t)(moff + off), len);
	else
		ft_resp_file(r, status, "application/octet-stream", fd, (off_t)(moff + off), len);
}

/*
 * Loop thread: the shard's main copy from the open-file cache, or opened and offered to it (q->fd,
 * q->lom, q->borrowed set). 0, or -1 after an error answer, or 1 for a worker (tgt_shard_open).
 */
static int open_cached(ft_req_t *r, member_req_t *q)
{
	tgt_obj_t *o = q->o;
	int mp_index = (int)(o->mp - o->t->mountpaths);
	tgt_replica_t main_copy = {.mp_index = mp_index, .copy = false};
	bool cache = !o->validate_warm_get && o->mirror_copies <= 1;
	tgt_fcache_ref_t *ref = cache ? tgt_fcache_get(o, mp_index, &q->fd, &q->lom) : NULL;
	struct stat st;

	if (ref == NULL && cache) {
		unsigned long gen = tgt_fcache_gen(o->t); /* before the open: a change after it retires the entry */
		if (tgt_replica_open_stat(o, &main_copy, false, &q->fd, &q->lom, NULL, &st) != TGT_REPLICA_OK)
			return tgt_shard_open(r, o, false, &q->fd, &q->lom); /* says why, or finds the hashed file */
		ref = tgt_fcache_put(o, mp_index, gen, q->fd, &q->lom, &st, true);
	} else if (ref == NULL) {
		return tgt_shard_open(r, o, false, &q->fd, &q->lom);
	}
	if (ref != NULL) {
		q->borrowed = true;
		ft_req_on_done(r, tgt_fcache_release, ref); /* the fd stays open until the response is done */
	}
	return 0;
}

static void select_worker(ft_req_t *r, void *arg)
{
	member_req_t *q = arg;

	tgt_shard_select(r, q->o, q->fmt);
}

void tgt_shard_get(ft_req_t *r, tgt_obj_t *o)
{
	member_req_t *q = ft_req_alloc(r, sizeof(*q));
	const char *why = NULL;
	tgt_shard_index_t *ix = NULL;
	char err[8];

	memset(q, 0, sizeof(*q));
	q->o = o;
	q->fd = -1;
	if (tgt_shard_fmt_req(r, o, &q->fmt) != 0)
		return;
	if (ft_req_query(r, "archpath") == NULL) {
		if (ft_req_method(r) == FT_HTTP_HEAD) {
			ft_resp_error(r, 400, "archregx is for GET only: HEAD takes archpath");
			return;
		}
		ft_req_defer(r, select_worker, q);
		return;
	}
	q->archpath = ft_req_query(r, "archpath");
	if (tgt_shard_member_check(q->archpath, &why) != 0) {
		ft_resp_error(r, 400, "invalid archpath \"%s\": %s", q->archpath, why);
		return;
	}
	ft_req_on_done(r, close_fd_hook, q);
	if (tgt_coldget_wanted(r, o)) { /* a remote shard not cached (or revalidated): fetched on a worker */
		ft_req_defer(r, serve_worker, q);
		return;
	}
	int rc = open_cached(r, q);
	if (rc == 1) { /* a remote shard evicted since tgt_coldget_wanted looked: fetched again */
		ft_req_defer(r, serve_worker, q);
		return;
	}
	if (rc != 0)
		return;
	tgt_lru_touch(o);
	if (tgt_shard_index_get(o, q->fd, &q->lom, q->fmt, false, &ix, err, sizeof(err)) != 0) {
		ft_req_defer(r, serve_worker, q);
		return;
	}
	serve_member(r, q, ix, false);
}
