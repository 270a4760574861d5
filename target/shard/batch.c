/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch (POST /v1/batch): many objects and shard members, from any targets and buckets, as one TAR stream in order. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/urlsig.h"
#include "base/codec.h"
#include "base/fdio.h"
#include "base/log.h"
#include "core/replica.h"
#include "http/util.h"
#include "rpc/client.h"
#include "shard/shard.h"

/*
 * DESIGN
 * The proxy redirects the request to the owner of its first item, which assembles the answer: a
 * chunked TAR stream, one member per item in the order asked. Items are taken in windows of
 * WINDOW, resolved in parallel on the fan-out threads: the items other targets own are fetched
 * (GET on the owner's public port, archpath passed on), those owned here are opened and, up to
 * SMALL_MAX, read; then the window's items are sent in order, larger local ones with sendfile(2)
 * from their files, the rest through one output buffer (OUT_MAX) in large writes. Memory: at most
 * WINDOW remote items at once, each at most ITEM_MAX (larger ones are an error), so the bound is
 * WINDOW x ITEM_MAX (16 x 64 MiB) and in practice WINDOW item sizes plus OUT_MAX.
 * Every window is resolved (local files opened, remote items fetched) before any of it is sent,
 * so a missing item of the first window fails the request with a clean 404; one found missing
 * later cuts the stream (never completed). With continue_on_error it becomes an empty member
 * "__404__/<bucket>/<name>". start/length select a byte range of the item (of the member with
 * archpath); a remote item's range is cut from the whole item fetched. Members of compressed shards
 * owned here are not served in a batch (GET ?archpath= decodes them).
 */

#define BODY_MAX (4u << 20)
#define ITEMS_MAX 100000
#define WINDOW 16
#define ITEM_MAX ((uint64_t)64 << 20)
#define FETCH_TIMEOUT_MS 60000
/*
 * Local items up to SMALL_MAX go out as copies read in parallel (pread on the fan-out threads): a
 * sendfile range with another fd waits until the previous file's bytes left, one loop round trip
 * per item, which small items cannot afford; larger ones use sendfile.
 */
#define SMALL_MAX (64 * 1024)
#define OUT_MAX (256 * 1024)

typedef struct {
	const char *provider, *bucket, *objname, *archpath; /* borrowed from the parsed body */
	uint64_t start, length;                             /* length 0: to the end */
	const ft_node_t *owner;                             /* NULL: here */
	char *url;                                          /* remote: the owner's URL (owned) */
	ft_strbuf_t body;                                   /* remote: the fetched bytes */
	long status;
	int state;         /* resolved: 1 there, 0 missing, -errno (err) */
	int fd;            /* local: the file to send from (-1 once handed on) */
	uint64_t off, len; /* what to send: of the file (local) or of body (remote) */
	char err[200];
} item_t;

typedef struct {
	tgt_t *t;
	json_t *doc;
	item_t *v;
	size_t n;
	bool continue_on_error, only_names;
	ft_smap_t *smap;
	uint8_t *hdr;
	size_t hdr_cap;
	int prev_fd;  /* kept open until the next file is queued (the stream's fd number must change) */
	bool started; /* the 200 and its stream began (with the first member sent) */
	uint8_t *out; /* OUT_MAX bytes of the stream not handed to the server yet (fewer, larger writes) */
	size_t out_len;
} batch_t;

static void batch_free(void *arg)
{
	batch_t *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].url);
		ft_strbuf_free(&b->v[i].body);
		if (b->v[i].fd >= 0)
			close(b->v[i].fd);
	}
	free(b->v);
	free(b->hdr);
	free(b->out);
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	ft_smap_put(b->smap);
	json_decref(b->doc);
}

/* Hands the buffered bytes to the server. 0 or -errno. */
static int flush(ft_req_t *r, batch_t *b)
{
	int rc = b->out_len ? ft_resp_stream_write(r, b->out, b->out_len) : 0;

	b->out_len = 0;
	return rc;
}

/* Appends len bytes to the stream through the buffer (large pieces go straight). 0 or -errno. */
static int emit(ft_req_t *r, batch_t *b, const void *p, size_t len)
{
	if (b->out_len + len > OUT_MAX) {
		int rc = flush(r, b);
		if (rc != 0)
			return rc;
		if (len > OUT_MAX)
			return ft_resp_stream_write(r, p, len);
	}
	memcpy(b->out + b->out_len, p, len);
	b->out_len += len;
	return 0;
}

/* With auth on, url (taken) signed for a GET of the item, as a redirect is; NULL on allocation failure. */
static char *sign_url(const item_t *it, char *url)
{
	const ft_auth_t *a = ft_auth();
	ft_strbuf_t b = {0};

	if (!a->enabled)
		return url;
	ft_strbuf_addf(&b, "%s", url);
	ft_urlsig_append(&b, true, a->url_key, "GET", it->provider, it->bucket, it->objname, strlen(it->objname),
			 time(NULL));
	free(url);
	if (b.failed) {
		ft_strbuf_free(&b);
		return NULL;
	}
	return b.p;
}

/* The owner's URL of a remote item; NULL on allocation failure. */
static char *item_url(const item_t *it)
{
	char *eb = ft_pct_encode_dup(it->bucket, strlen(it->bucket), 0);
	char *eo = ft_pct_encode_dup(it->objname, strlen(it->objname), FT_PCT_KEEP_SLASH);
	char *ea = it->archpath ? ft_pct_encode_dup(it->archpath, strlen(it->archpath), 0) : NULL;
	char *url = NULL;

	if (eb && eo && (ea || !it->archpath) &&
	    asprintf(&url, "%s/v1/objects/%s/%s?provider=%s%s%s", it->owner->public_url, eb, eo, it->provider,
		     ea ? "&archpath=" : "", ea ? ea : "") < 0)
		url = NULL;
	free(eb);
	free(eo);
	free(ea);
	return url != NULL ? sign_url(it, url) : NULL;
}

/* Parses and checks the request. 0, or -1 with why (a 400). */
static int parse(batch_t *b, const char *body, size_t len, char *why, size_t cap)
{
	json_error_t je;
	json_t *in;

	b->doc = json_loadb(body, len, 0, &je);
	if (!json_is_object(b->doc) || !json_is_array(in = json_object_get(b->doc, "in"))) {
		snprintf(why, cap, "expected {\"in\":[{\"bucket\",\"objname\",...}...]}");
		return -1;
	}
	const char *fmt = json_string_value(json_object_get(b->doc, "format"));
	if (fmt && strcmp(fmt, ".tar") != 0 && strcmp(fmt, "tar") != 0) {
		snprintf(why, cap, "format \"%s\": only .tar is produced", fmt);
		return -1;
	}
	b->continue_on_error = json_is_true(json_object_get(b->doc, "continue_on_error"));
	b->only_names = json_is_true(json_object_get(b->doc, "only_names"));
	b->n = json_array_size(in);
	if (b->n == 0 || b->n > ITEMS_MAX) {
		snprintf(why, cap, "\"in\" holds %zu items (1..%d)", b->n, ITEMS_MAX);
		return -1;
	}
	b->v = calloc(b->n, sizeof(*b->v));
	if (b->v == NULL) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < b->n; i++) {
		json_t *e = json_array_get(in, i);
		item_t *it = &b->v[i];
		const char *w = NULL;
		it->provider = json_string_value(json_object_get(e, "provider"));
		it->bucket = json_string_value(json_object_get(e, "bucket"));
		it->objname = json_string_value(json_object_get(e, "objname"));
		it->archpath = json_string_value(json_object_get(e, "archpath"));
		json_t *s = json_object_get(e, "start"), *l = json_object_get(e, "length");
		if (it->archpath && !*it->archpath)
			it->archpath = NULL;
		if (!it->provider || !*it->provider)
			it->provider = "ais";
		if (!it->bucket || ft_name_check_bucket(it->bucket, &w) != 0 || !it->objname ||
		    ft_name_check_object(it->objname, strlen(it->objname), &w) != 0 ||
		    (it->archpath && tgt_shard_member_check(it->archpath, &w) != 0) ||
		    (s && (!json_is_integer(s) || json_integer_value(s) < 0)) ||
		    (l && (!json_is_integer(l) || json_integer_value(l) < 0))) {
			snprintf(why, cap, "item %zu: bad bucket, objname, archpath, start or length%s%s", i,
				 w ? ": " : "", w ? w : "");
			return -1;
		}
		it->fd = -1;
		it->start = s ? (uint64_t)json_integer_value(s) : 0;
		it->length = l ? (uint64_t)json_integer_value(l) : 0;
	}
	return 0;
}

/* Places every item: here or on its owner (and its URL). 0, or -1 with why. */
static int place(batch_t *b, char *why, size_t cap)
{
	b->smap = ft_smap_current();
	if (b->smap == NULL) {
		snprintf(why, cap, "no cluster map");
		return -1;
	}
	for (size_t i = 0; i < b->n; i++) {
		item_t *it = &b->v[i];
		const ft_node_t *o = ft_smap_owner(b->smap, it->provider, it->bucket, it->objname, strlen(it->objname));
		if (o == NULL) {
			snprintf(why, cap, "no targets in the cluster map");
			return -1;
		}
		if (strcmp(o->id, b->t->id) == 0)
			continue;
		it->owner = o;
		if ((it->url = item_url(it)) == NULL) {
			snprintf(why, cap, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* The name of an item in the TAR: "<bucket>/<objname>[/<archpath>]", "__404__/" first when missing. */
static void item_name(const item_t *it, bool missing, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s/%s%s%s", missing ? "__404__/" : "", it->bucket, it->objname, it->archpath ? "/" : "",
		 it->archpath ? it->archpath : "");
}

/* The range [*off, *off + *len) of an item of size bytes after start/length. -1 when start is past the end. */
static int item_range(const item_t *it, uint64_t size, uint64_t *off, uint64_t *len)
{
	if (it->start > size || (it->start == size && size > 0))
		return -1;
	*off = it->start;
	*len = it->length && it->length < size - it->start ? it->length : size - it->start;
	return 0;
}

static int send_header(ft_req_t *r, batch_t *b, const item_t *it, bool missing, uint64_t size)
{
	char name[TGT_SHARD_NAME_MAX + 1];

	item_name(it, missing, name, sizeof(name));
	if (!b->started) {
		ft_resp_stream_start(r, 200, "application/x-tar", -1);
		b->started = true;
	}
	ssize_t h = tgt_tar_header(name, size, ft_now_ns() / 1000000000, b->hdr, b->hdr_cap);
	return h < 0 ? -EINVAL : emit(r, b, b->hdr, (size_t)h);
}

static int send_padding(ft_req_t *r, batch_t *b, uint64_t size)
{
	static const uint8_t zeros[512];
	size_t pad = (size_t)((512 - size % 512) % 512);

	return pad ? emit(r, b, zeros, pad) : 0;
}

/* Queues len bytes of fd at off; fd is then the stream's file (the previous one is closed now). */
static int send_file(ft_req_t *r, batch_t *b, int fd, uint64_t off, uint64_t len)
{
	int rc = flush(r, b);

	if (rc == 0 && len)
		rc = ft_resp_stream_sendfile(r, fd, off, len);
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	b->prev_fd = fd;
	return rc;
}

/* Resolves an item owned here: its file, offset and length (fd kept open in the item). Sets it->state. */
static void resolve_local(batch_t *b, item_t *it)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *bk = bmd ? ft_bmd_find(bmd, it->provider, it->bucket) : NULL;
	tgt_obj_t o;
	tgt_replica_t main_copy = {0};
	ft_lom_t lom;
	uint64_t base = 0, size;
	int fd = -1, rc = 0;

	it->state = 0;
	if (bk == NULL || tgt_obj_init(&o, b->t, bk, it->objname, strlen(it->objname)) != 0) {
		ft_bmd_put(bmd);
		return;
	}
	ft_bmd_put(bmd);
	main_copy.mp_index = (int)(o.mp - b->t->mountpaths);
	if (tgt_replica_open(&o, &main_copy, false, &fd, &lom, NULL) != TGT_REPLICA_OK)
		return;
	size = lom.size;
	if (it->archpath) {
		tgt_shard_fmt_t fmt = tgt_shard_fmt_of_name(it->objname);
		tgt_shard_index_t *ix = NULL;
		const tgt_shard_member_t *m = NULL;
		if (fmt == TGT_SHARD_NONE) {
			snprintf(it->err, sizeof(it->err), "\"%s\" is not an archive", it->objname);
			rc = -EINVAL;
		} else if ((rc = tgt_shard_index_get(&o, fd, &lom, fmt, true, &ix, it->err, sizeof(it->err))) == 0) {
			m = tgt_shard_index_find(ix, it->archpath);
			if (m != NULL && m->off < 0) {
				snprintf(it->err, sizeof(it->err), "a compressed member: read it with GET ?archpath=");
				rc = -ENOTSUP;
			} else if (m != NULL) {
				base = (uint64_t)m->off;
				size = m->size;
			}
			tgt_shard_index_put(b->t, ix);
		}
		if (rc != 0 || m == NULL) {
			close(fd);
			it->state = rc;
			return;
		}
	}
	if (item_range(it, size, &it->off, &it->len) != 0) {
		snprintf(it->err, sizeof(it->err), "start %" PRIu64 " past the end (%" PRIu64 " bytes)", it->start,
			 size);
		close(fd);
		it->state = -ERANGE;
		return;
	}
	it->off += base;
	it->fd = fd;
	it->state = 1;
}

/* Resolves a fetched item. Sets it->state. */
static void resolve_remote(item_t *it)
{
	if (it->status == 404) {
		it->state = 0;
	} else if (it->status != 200 || it->body.failed) {
		if (!it->err[0])
			snprintf(it->err, sizeof(it->err), "%s answered %ld", it->owner->id, it->status);
		it->state = -EIO;
	} else if (item_range(it, it->body.len, &it->off, &it->len) != 0) {
		snprintf(it->err, sizeof(it->err), "start past the end");
		it->state = -ERANGE;
	} else {
		it->state = 1;
	}
}

/* A window's job for a fan-out thread. */
typedef struct {
	batch_t *b;
	item_t *it;
} job_t;

/*
 * Fan-out thread: resolves one item of the window: a remote one fetched from its owner, a local
 * one opened (and read, when small: the copies of a window are made in parallel too).
 */
static void resolve_one(void *arg, int i)
{
	job_t *j = &((job_t *)arg)[i];
	item_t *it = j->it;

	if (it->owner != NULL) {
		if (ft_client_get_bytes(it->url, FETCH_TIMEOUT_MS, &it->status, &it->body, it->err, sizeof(it->err)) !=
		    0)
			it->status = 0;
		resolve_remote(it);
		return;
	}
	resolve_local(j->b, it);
	if (it->state != 1 || it->len > SMALL_MAX || j->b->only_names)
		return;
	int rc = ft_strbuf_reserve(&it->body, (size_t)it->len);
	if (rc == 0)
		rc = ft_pread_all(it->fd, it->body.p, (size_t)it->len, (off_t)it->off);
	if (rc == 0) {
		it->body.len = (size_t)it->len;
		it->off = 0; /* now of the copy */
	} else {
		snprintf(it->err, sizeof(it->err), "read: %s", rc == -1 ? "out of memory" : strerror(-rc));
		it->state = -EIO;
	}
	close(it->fd);
	it->fd = -1;
}

static void resolve_window(batch_t *b, size_t from, size_t to)
{
	job_t jobs[WINDOW];
	int n = 0;

	for (size_t i = from; i < to; i++)
		jobs[n++] = (job_t){.b = b, .it = &b->v[i]};
	ft_fanout_run(b->t->fanout, resolve_one, jobs, n);
}

/* Sends a resolved item (state 1), or its __404__ member. 0 or -errno (the stream is cut). */
static int send_item(ft_req_t *r, batch_t *b, item_t *it)
{
	uint64_t len = b->only_names || it->state != 1 ? 0 : it->len;
	int rc = send_header(r, b, it, it->state != 1, len);

	if (rc == 0 && len > 0) {
		if (it->fd < 0) { /* fetched, or a small local item read by resolve_one */
			rc = emit(r, b, it->body.p + it->off, len);
		} else {
			rc = send_file(r, b, it->fd, it->off, len);
			it->fd = -1; /* send_file keeps it */
		}
	}
	if (rc == 0)
		rc = send_padding(r, b, len);
	ft_strbuf_free(&it->body);
	return rc;
}

static void batch_work(ft_req_t *r, void *arg)
{
	batch_t *b = arg;
	int rc = 0;

	b->hdr_cap = tgt_tar_header_max(3 * TGT_SHARD_NAME_MAX);
	b->hdr = malloc(b->hdr_cap);
	b->out = malloc(OUT_MAX);
	if (b->hdr == NULL || b->out == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	for (size_t from = 0; from < b->n && rc == 0; from += WINDOW) {
		size_t to = from + WINDOW < b->n ? from + WINDOW : b->n;
		resolve_window(b, from, to);
		/* the whole window is resolved before any of it is sent: a failure before the stream began is a clean error */
		for (size_t i = from; i < to; i++) {
			item_t *it = &b->v[i];
			if (it->state == 1 || (it->state == 0 && b->continue_on_error))
				continue;
			if (!b->started) {
				ft_resp_error(r,
					      it->state == 0         ? 404
					      : it->state == -ERANGE ? 416
								     : 502,
					      "batch item %zu (%s/%s%s%s): %s", i, it->bucket, it->objname,
					      it->archpath ? "/" : "", it->archpath ? it->archpath : "",
					      it->state == 0 ? "does not exist" : it->err);
				return;
			}
			ft_warn("batch: item %zu (%s/%s): %s; the TAR stream is cut", i, it->bucket, it->objname,
				it->state == 0 ? "does not exist" : it->err);
			rc = -EIO;
			break;
		}
		for (size_t i = from; i < to && rc == 0; i++)
			rc = send_item(r, b, &b->v[i]);
	}
	if (rc == 0) {
		static const uint8_t eof[1024];
		if (!b->started) {
			ft_resp_stream_start(r, 200, "application/x-tar", -1);
			b->started = true;
		}
		rc = emit(r, b, eof, sizeof(eof));
		if (rc == 0)
			rc = flush(r, b);
	}
	ft_resp_stream_end(r, rc);
}

static void on_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	batch_t *b = arg;
	char why[300];

	if (err) {
		ft_resp_error(r, 400, "batch request body incomplete");
		return;
	}
	if (parse(b, body, len, why, sizeof(why)) != 0 || place(b, why, sizeof(why)) != 0) {
		ft_resp_error(r, 400, "batch: %s", why);
		return;
	}
	ft_req_defer(r, batch_work, b);
}

void tgt_batch(ft_req_t *r, tgt_t *t)
{
	batch_t *b = ft_req_alloc(r, sizeof(*b));

	memset(b, 0, sizeof(*b));
	b->t = t;
	b->prev_fd = -1;
	if (ft_req_method(r) != FT_HTTP_POST) {
		ft_resp_header(r, "Allow", "POST");
		ft_resp_error(r, 405, "method %s not allowed on /v1/batch", ft_req_method_name(r));
		return;
	}
	ft_req_on_done(r, batch_free, b);
	ft_req_read_body_all(r, BODY_MAX, on_body, b);
}
