/* SPDX-License-Identifier: Apache-2.0 */
/* GetBatch (POST /v1/batch): many objects and shard members, from any targets and buckets, as one TAR stream in order. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/fdio.h"
#include "base/log.h"
#include "base/moss.h"
#include "cloud/backend.h"
#include "core/fcache.h"
#include "core/mountpath.h"
#include "core/replica.h"
#include "http/util.h"
#include "shard/shard.h"

/*
 * DESIGN
 * The proxy sends the request to the target owning most of its items, which assembles the
 * answer: a chunked TAR stream, one member per item in the order asked. At the start it sends, to
 * every other target owning items, ONE sub-request (POST /v1/batch?part=true, with the cluster
 * token) naming that target's items in their global order; each answers a "part": a TAR stream of
 * only those items, read there from its own disk (range applied), one member per item named
 * "<index in the part>.<status>" (200: the bytes; 404: empty; another status: the error's text).
 * A part is read by a thread of its own into a ring of TGT_BATCH_PULL_RING bytes (batch_pull.c)
 * while the sender walks the items in order; as each part follows the global order, the walk is
 * a merge, and every owner streams from the start, in parallel with the others and with the
 * sender, held back only by TCP when its ring is full.
 * Local items go through a window of WINDOW slots: up to READERS fan-out threads and the sender
 * itself take the next items in order (never more than WINDOW past the oldest slot still in use)
 * and prepare each in its slot: opened (its metadata checked) and, up to SMALL_MAX, its whole
 * member (TAR header, bytes, padding) read into the slot. So the opens, metadata reads and page
 * cache copies of several items run on several threads (and disk reads overlap), while the sender
 * only gathers ready members, in order, into one stream write of up to SEND_MAX bytes (a single
 * system call when the client keeps up: ft_resp_stream_writev), with no copy of them in user
 * space. The sender never waits for an item nobody took: it prepares it itself, so a batch goes on
 * when every fan-out thread is busy. Larger items are sent from their file with sendfile(2); a
 * remote item is copied from its owner's ring to the output buffer as it arrives.
 * Memory: one ring per remote owner, WINDOW x SLOT_BYTES of slots and the SEND_MAX output buffer:
 * owners x 1 MiB + about 2.3 MiB (2.6 MiB with the HTTP server's stream ring), whatever the items'
 * sizes and count; no item larger than SMALL_MAX is ever held whole. The item table costs ~100
 * bytes an item (at most ITEMS_MAX). The slot memory of two finished batches is kept for reuse
 * (its pages stay mapped): about 4.3 MiB a process at most.
 * Errors: the 200 and the stream start with the first SEND_MAX bytes handed to the server (or the
 * first sendfile), so a missing item (or a failed owner) met before that fails the request cleanly
 * (404, 416, 502); one met later cuts the stream (the chunked answer is never completed: no TAR
 * that looks whole). With continue_on_error a missing item becomes an empty member
 * "__404__/<bucket>/<name>". start/length select a byte range of the item (of the member with
 * archpath). Members of compressed shards are not served in a batch (GET ?archpath= decodes them).
 * An item of a remote bucket that is not cached is fetched from its backend (and kept), as a cold
 * GET would: by FETCHERS more fan-out threads walking ahead of the window, else by the thread
 * preparing it (a fetch in flight is joined, never repeated).
 * AIStore's GET /v1/ml/moss (a MossReq: base/moss.h) is read into the same request and answered
 * the same way, or, buffered ("strm" not true: AIStore's default), as multipart/mixed: a part
 * "metadata" (MossResp JSON: one {"objname", "archpath", "bucket", "provider", "err_msg", "opaque",
 * "size"} per item, in order) and a part "archive" (the TAR). The TAR is then written into an
 * unnamed work file on a mountpath instead of the stream (the same walk, the same memory bound),
 * at most batch_max_buffered_bytes (else 413), and sent from there with sendfile once the metadata
 * is known; a failure anywhere is then a clean error answer, never a cut one.
 */

#define BODY_MAX (4u << 20)
#define ITEMS_MAX 100000
/* Local items up to SMALL_MAX are read into their slot: a sendfile range with another fd waits
 * until the previous file's bytes left, one loop round trip per item; larger ones use sendfile. */
#define SMALL_MAX (64 * 1024)
#define SEND_MAX (192 * 1024)         /* bytes gathered (output buffer and slots) for one stream write */
#define PART_ERR_MAX 512              /* bytes of an error member's text read */
#define WINDOW 32                     /* slots: local items prepared ahead of the sender */
#define READERS 3                     /* fan-out threads preparing items besides the sender */
#define RUN 4                         /* items a reader takes at once */
#define FETCHERS 8                    /* fan-out threads fetching a batch's uncached remote-bucket items ahead */
#define FETCH_CACHED_QUIT 32          /* remote-bucket items found cached in a row after which the fetchers stop */
#define SLOT_BYTES (SMALL_MAX + 4096) /* a member of SMALL_MAX bytes with a header for a name of ~3.5 KB */
#define IOV_BATCH FT_STREAM_IOV_MAX

typedef struct {
	const char *provider, *bucket, *objname, *archpath; /* borrowed from the parsed body */
	const char *opaque;                                 /* MossIn's, echoed in a buffered answer; NULL: none */
	uint64_t start, length;                             /* length 0: to the end */
	const ft_node_t *owner;                             /* NULL: here */
	int pull;                                           /* remote: index into b->pulls */
	size_t part_index;                                  /* remote: its index in the owner's part */
} item_t;

/* What resolving an item found: the open file and range (local), or its size (remote). */
typedef struct {
	int state;             /* 1 there, 0 missing, -errno (err says why) */
	int fd;                /* the file (-1: none); the open-file cache's while ref is set */
	tgt_fcache_ref_t *ref; /* fd borrowed from the cache: only for a read, never for sendfile */
	uint64_t off, len;
	char err[200];
} found_t;

/* One local item prepared ahead: what resolving it found and, when small, its whole member. */
typedef struct {
	found_t f;           /* f.fd open (taken by the sender): its bytes are sent from the file */
	size_t bytes;        /* > 0: the member (header, bytes, padding) is in buf, f.fd closed */
	_Atomic size_t done; /* the item last prepared in this slot (SIZE_MAX: none yet) */
	uint8_t *buf;        /* SLOT_BYTES of b->slot_mem */
} slot_t;

typedef struct {
	const ft_node_t *owner;
	tgt_batch_pull_t *p;
	size_t n; /* items */
} pull_t;

typedef struct {
	tgt_t *t;
	ft_req_t *r; /* for the sender, when it runs on a fan-out thread */
	json_t *doc;
	item_t *v;
	size_t n;
	bool continue_on_error, only_names;
	bool only_objname;   /* members named "<objname>[/<archpath>]" (AIStore's "onob") */
	bool part;           /* ?part=true: a sub-request of an assembling target, every item local */
	bool moss;           /* AIStore's GET /v1/ml/moss: the body is a MossReq (base/moss.h) */
	bool buffered;       /* a MossReq without "strm": multipart answer, the TAR spooled first */
	int spool_fd;        /* buffered: the work file the TAR goes to (-1: the stream) */
	uint64_t spool_len;  /* bytes in it */
	uint64_t spool_room; /* bytes its mountpath had above its reserve at the last look, less those since */
	const tgt_mountpath_t *spool_mp;
	json_t *outs;            /* buffered: the MossOut of every item sent so far */
	const char *moss_bucket; /* its URL's bucket ("" when none), in request memory */
	ft_smap_t *smap;
	pull_t *pulls;
	size_t npulls;
	uint8_t *hdr;
	size_t hdr_cap;
	int prev_fd;  /* kept open until the next file is queued (the stream's fd number must change) */
	bool started; /* the 200 and its stream began (with the first bytes handed to the server) */
	/* what the next stream write sends, in order: regions of out and members in slots */
	uint8_t *out; /* SEND_MAX bytes: [0, out_mark) are in iov already, [out_mark, out_len) not yet */
	size_t out_len, out_mark;
	struct iovec iov[IOV_BATCH];
	int niov;
	size_t pend;       /* bytes in iov */
	bool slots_queued; /* iov points into slots: they stay in use until it is sent */
	int fail_status;   /* the answer when the batch fails before the stream started */
	int rc;            /* the sender's result */
	/* the window (see DESIGN); under mu but the slots' contents, owned by whoever took the item */
	pthread_mutex_t mu;
	pthread_cond_t ready_cv, space_cv;
	bool mu_init;
	slot_t *slots;
	uint8_t *slot_mem;
	_Atomic size_t taken;        /* items [0, taken) were taken by a reader or the sender */
	_Atomic size_t released;     /* the slots of items [0, released) may be reused (the sender moves it) */
	size_t consumed;             /* items [0, consumed) are done with by the sender */
	_Atomic size_t waiting;      /* the item the sender waits for (SIZE_MAX: none) */
	_Atomic int readers_waiting; /* for room in the window */
	_Atomic bool stop;
	int roles_taken;           /* fan-out calls that took a role: sender, reader, fetcher; under mu */
	int readers;               /* reader roles */
	_Atomic size_t fetch_next; /* the next item a fetcher looks at */
	_Atomic int fetch_cached;  /* remote-bucket items the fetchers found cached since their last fetch */
	char err[PART_ERR_MAX + 64];
} batch_t;

/* Slot memory of finished batches, kept for the next (its pages are mapped already). */
static pthread_mutex_t spare_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *spare_slots[2];

static uint8_t *slot_mem_take(void)
{
	uint8_t *p = NULL;

	pthread_mutex_lock(&spare_mu);
	for (size_t k = 0; k < 2 && p == NULL; k++) {
		p = spare_slots[k];
		spare_slots[k] = NULL;
	}
	pthread_mutex_unlock(&spare_mu);
	return p != NULL ? p : malloc((size_t)WINDOW * SLOT_BYTES);
}

static void slot_mem_give(uint8_t *p)
{
	pthread_mutex_lock(&spare_mu);
	for (size_t k = 0; k < 2 && p != NULL; k++)
		if (spare_slots[k] == NULL) {
			spare_slots[k] = p;
			p = NULL;
		}
	pthread_mutex_unlock(&spare_mu);
	free(p);
}

static void batch_free(void *arg)
{
	batch_t *b = arg;

	for (size_t i = 0; i < b->npulls; i++)
		tgt_batch_pull_free(b->pulls[i].p);
	free(b->pulls);
	free(b->slots);
	if (b->slot_mem != NULL)
		slot_mem_give(b->slot_mem);
	if (b->mu_init) {
		pthread_mutex_destroy(&b->mu);
		pthread_cond_destroy(&b->ready_cv);
		pthread_cond_destroy(&b->space_cv);
	}
	free(b->v);
	free(b->hdr);
	free(b->out);
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	if (b->spool_fd >= 0)
		close(b->spool_fd);
	json_decref(b->outs);
	ft_smap_put(b->smap);
	json_decref(b->doc);
}

/* Wakes one reader waiting on cv (mu taken for the signal only, so no wake-up is lost). */
static void wake_one(batch_t *b, pthread_cond_t *cv)
{
	pthread_mutex_lock(&b->mu);
	pthread_cond_signal(cv);
	pthread_mutex_unlock(&b->mu);
}

/* Free room in the window for items from taken on. */
static size_t window_room(batch_t *b)
{
	size_t end = atomic_load(&b->released) + WINDOW, taken = atomic_load(&b->taken);

	return end > taken ? end - taken : 0;
}

/* Frees the slots of items before upto for the readers (the sender only). */
static void release_upto(batch_t *b, size_t upto)
{
	if (upto <= atomic_load(&b->released))
		return;
	atomic_store(&b->released, upto);
	/* a waiting reader wakes once half the window is free, not on every slot (it wakes another) */
	if (atomic_load(&b->readers_waiting) > 0 && window_room(b) >= WINDOW / 2)
		wake_one(b, &b->space_cv);
}

/*
 * Room for len more bytes in the spool: at most batch_max_buffered_bytes (else 413), and never into
 * its mountpath's reserve_bytes (else 507; the free space is looked at again whenever the room
 * counted since the last look runs out). 0, or -EFBIG / -ENOSPC with the answer in b.
 */
static int spool_room(batch_t *b, uint64_t len)
{
	int64_t max = b->t->cfg.batch_max_buffered_bytes;
	int rc = 0;

	if (b->spool_len + len > (uint64_t)max) {
		b->fail_status = 413;
		snprintf(b->err, sizeof(b->err),
			 "the buffered answer would exceed batch_max_buffered_bytes (%" PRId64
			 "): ask for the streamed one (\"strm\": true) or fewer items",
			 max);
		return -EFBIG;
	}
	if (len > b->spool_room)
		rc = tgt_mountpath_avail(b->spool_mp, b->t->cfg.reserve_bytes, &b->spool_room);
	if (rc == 0 && len > b->spool_room) {
		b->fail_status = 507;
		snprintf(
			b->err, sizeof(b->err),
			"the buffered answer needs more room than the target's disk has above its reserve_bytes: ask for "
			"the streamed one (\"strm\": true) or fewer items");
		return -ENOSPC;
	}
	if (rc != 0) {
		b->fail_status = 500;
		snprintf(b->err, sizeof(b->err), "buffered answer: free space: %s", strerror(-rc));
		return rc;
	}
	b->spool_room -= len;
	return 0;
}

/* A failed spool write: -errno, with the answer in b (507 when the disk is full). */
static int spool_failed(batch_t *b, int err)
{
	b->fail_status = err == ENOSPC || err == EDQUOT ? 507 : 500;
	snprintf(b->err, sizeof(b->err), "buffered answer: work file: %s", strerror(err));
	return -err;
}

/* Appends the cnt pieces to the spool. 0 or -errno (b->err). */
static int spool_writev(batch_t *b, struct iovec *iov, int cnt)
{
	uint64_t total = 0;
	int rc;

	for (int k = 0; k < cnt; k++)
		total += iov[k].iov_len;
	if ((rc = spool_room(b, total)) != 0)
		return rc;
	if ((rc = ft_pwritev_all(b->spool_fd, iov, cnt, (off_t)b->spool_len)) != 0)
		return spool_failed(b, -rc);
	b->spool_len += total;
	return 0;
}

/* Appends len bytes of fd at off to the spool (in the kernel where it can). 0 or -errno (b->err). */
static int spool_copy(batch_t *b, int fd, uint64_t off, uint64_t len)
{
	int rc = spool_room(b, len);

	if (rc != 0)
		return rc;
	rc = ft_copy_range(fd, (off_t)off, b->spool_fd, (off_t)b->spool_len, (size_t)len);
	if (rc == 0)
		b->spool_len += len;
	else if (rc == -EIO)
		snprintf(b->err, sizeof(b->err), "read: short file");
	else
		return spool_failed(b, -rc);
	return rc;
}

/*
 * Hands what is gathered (iov, then the output buffer's rest) to the server in one stream write,
 * starting the 200 stream first (or to the spool); the slots it pointed into are free again. 0 or -errno.
 */
static int flush(ft_req_t *r, batch_t *b)
{
	int rc = 0;

	if (!b->started && b->spool_fd < 0) {
		rc = ft_resp_stream_start(r, 200, "application/x-tar", -1);
		b->started = true;
	}
	if (b->out_len > b->out_mark)
		b->iov[b->niov++] =
			(struct iovec){.iov_base = b->out + b->out_mark, .iov_len = b->out_len - b->out_mark};
	if (rc == 0 && b->niov > 0)
		rc = b->spool_fd >= 0 ? spool_writev(b, b->iov, b->niov) : ft_resp_stream_writev(r, b->iov, b->niov);
	b->niov = 0;
	b->pend = b->out_len = b->out_mark = 0;
	if (b->slots_queued) {
		b->slots_queued = false;
		release_upto(b, b->consumed);
	}
	return rc;
}

/* Room for len more bytes gathered (at most SEND_MAX): what is gathered is sent first when needed. 0 or -errno. */
static int room_for(ft_req_t *r, batch_t *b, size_t len)
{
	return b->pend + (b->out_len - b->out_mark) + len > SEND_MAX ? flush(r, b) : 0;
}

/* Appends len bytes to the stream through the output buffer (larger pieces than it go straight). 0 or -errno. */
static int emit(ft_req_t *r, batch_t *b, const void *p, size_t len)
{
	int rc = room_for(r, b, len);

	if (rc != 0)
		return rc;
	if (len > SEND_MAX && b->spool_fd >= 0)
		return spool_writev(b, &(struct iovec){.iov_base = (void *)p, .iov_len = len}, 1);
	if (len > SEND_MAX)
		return ft_resp_stream_write(r, p, len); /* room_for sent what was gathered */
	memcpy(b->out + b->out_len, p, len);
	b->out_len += len;
	return 0;
}

/* Gathers the member prepared in slot s for the next stream write (no copy). 0 or -errno. */
static int queue_slot(ft_req_t *r, batch_t *b, const slot_t *s)
{
	int rc = room_for(r, b, s->bytes);

	if (rc == 0 && b->niov + 3 > IOV_BATCH)
		rc = flush(r, b);
	if (rc != 0)
		return rc;
	if (b->out_len > b->out_mark) {
		b->iov[b->niov++] =
			(struct iovec){.iov_base = b->out + b->out_mark, .iov_len = b->out_len - b->out_mark};
		b->pend += b->out_len - b->out_mark;
		b->out_mark = b->out_len;
	}
	b->iov[b->niov++] = (struct iovec){.iov_base = s->buf, .iov_len = s->bytes};
	b->pend += s->bytes;
	b->slots_queued = true;
	return 0;
}

/*
 * Parses and checks the request (a MossReq first read as a batch: base/moss.h). 0, or -1 with why
 * and *status (400, or 501 for what a MossReq asks that is not built).
 */
static int parse(ft_req_t *r, batch_t *b, const char *body, size_t len, int *status, char *why, size_t cap)
{
	json_t *in;

	*status = 400;
	if (b->moss) {
		b->doc = ft_moss_to_batch(body, len, b->moss_bucket, ft_req_query(r, "provider"), status, why, cap);
		if (b->doc == NULL)
			return -1;
		*status = 400;
	} else {
		b->doc = json_loadb(body, len, 0, NULL);
	}
	if (!json_is_object(b->doc) || !json_is_array(in = json_object_get(b->doc, "in"))) {
		snprintf(why, cap, "expected {\"in\":[{\"bucket\",\"objname\",...}...]}");
		return -1;
	}
	const char *fmt = json_string_value(json_object_get(b->doc, "format"));
	if (fmt && strcmp(fmt, ".tar") != 0 && strcmp(fmt, "tar") != 0) {
		snprintf(why, cap, "format \"%s\": only .tar is produced", fmt);
		return -1;
	}
	static const char *const flags[] = {"continue_on_error", "only_names", "only_objname", "buffered"};
	for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
		const json_t *f = json_object_get(b->doc, flags[k]);
		if (f != NULL && !json_is_boolean(f)) {
			snprintf(why, cap, "\"%s\" must be true or false", flags[k]);
			return -1;
		}
	}
	b->continue_on_error = json_is_true(json_object_get(b->doc, "continue_on_error"));
	b->only_names = json_is_true(json_object_get(b->doc, "only_names"));
	b->only_objname = json_is_true(json_object_get(b->doc, "only_objname"));
	b->buffered = b->moss && json_is_true(json_object_get(b->doc, "buffered"));
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
		it->opaque = json_string_value(json_object_get(e, "opaque"));
		json_t *s = json_object_get(e, "start"), *l = json_object_get(e, "length");
		if (it->archpath && !*it->archpath)
			it->archpath = NULL;
		if (!it->provider || !*it->provider) {
			it->provider = "ais";
		} else if (strcmp(it->provider, "ais") != 0) {
			ft_backend_provider_t bp;
			if (ft_backend_provider_parse(it->provider, &bp) != 0) {
				snprintf(why, cap,
					 "item %zu: unknown provider \"%.32s\" (expected ais, aws, gcp, azure or ht)",
					 i, it->provider);
				return -1;
			}
			it->provider = ft_backend_provider_name(bp);
		}
		if (!it->bucket || ft_name_check_bucket(it->bucket, &w) != 0 || !it->objname ||
		    ft_name_check_object(it->objname, strlen(it->objname), &w) != 0 ||
		    (it->archpath && tgt_shard_member_check(it->archpath, &w) != 0) ||
		    (s && (!json_is_integer(s) || json_integer_value(s) < 0)) ||
		    (l && (!json_is_integer(l) || json_integer_value(l) < 0))) {
			snprintf(why, cap, "item %zu: bad bucket, objname, archpath, start or length%s%s", i,
				 w ? ": " : "", w ? w : "");
			return -1;
		}
		it->start = s ? (uint64_t)json_integer_value(s) : 0;
		it->length = l ? (uint64_t)json_integer_value(l) : 0;
		it->pull = -1;
	}
	return 0;
}

/* The pull of owner o (added when new): its index, or -1 when out of memory. */
static int pull_of(batch_t *b, const ft_node_t *o)
{
	for (size_t k = 0; k < b->npulls; k++)
		if (b->pulls[k].owner == o)
			return (int)k;
	pull_t *np = realloc(b->pulls, (b->npulls + 1) * sizeof(*np));
	if (np == NULL)
		return -1;
	b->pulls = np;
	b->pulls[b->npulls] = (pull_t){.owner = o};
	return (int)b->npulls++;
}

/*
 * Places every item: here, or on its owner (whose part it joins, in order). In a part every item
 * is expected here: one that is not keeps its owner and is answered 503. 0, or -1 with why.
 */
static int place(batch_t *b, int *status, char *why, size_t cap)
{
	b->smap = ft_smap_current();
	if (b->smap == NULL) {
		*status = 503; /* started, not joined yet: the client tries again */
		snprintf(why, cap, "target %s has not joined a cluster yet", b->t->id);
		return -1;
	}
	for (size_t i = 0; i < b->n; i++) {
		item_t *it = &b->v[i];
		const ft_node_t *o = ft_smap_owner(b->smap, it->provider, it->bucket, it->objname, strlen(it->objname));
		if (o == NULL) {
			*status = 503;
			snprintf(why, cap, "no targets in the cluster map");
			return -1;
		}
		if (strcmp(o->id, b->t->id) == 0)
			continue;
		it->owner = o;
		if (b->part)
			continue;
		if ((it->pull = pull_of(b, o)) < 0) {
			snprintf(why, cap, "out of memory");
			return -1;
		}
		it->part_index = b->pulls[it->pull].n++;
	}
	return 0;
}

/* The body of the part request to pull k's owner: its items in order. NULL when out of memory. */
static char *part_body(const batch_t *b, size_t k)
{
	json_t *doc = json_object(), *in = json_array();
	char *out = NULL;

	if (doc == NULL || in == NULL || json_object_set_new(doc, "in", in) != 0) {
		json_decref(in);
		goto out;
	}
	json_object_set_new(doc, "only_names", json_boolean(b->only_names));
	for (size_t i = 0; i < b->n; i++) {
		const item_t *it = &b->v[i];
		if (it->pull != (int)k)
			continue;
		json_t *e = json_pack("{s:s, s:s, s:s}", "provider", it->provider, "bucket", it->bucket, "objname",
				      it->objname);
		if (e == NULL || json_array_append_new(in, e) != 0)
			goto out;
		if (it->archpath)
			json_object_set_new(e, "archpath", json_string(it->archpath));
		if (it->start)
			json_object_set_new(e, "start", json_integer((json_int_t)it->start));
		if (it->length)
			json_object_set_new(e, "length", json_integer((json_int_t)it->length));
	}
	out = json_dumps(doc, JSON_COMPACT);
out:
	json_decref(doc);
	return out;
}

/* Starts every owner's part. 0, or -1 with b->err. */
static int start_pulls(batch_t *b)
{
	for (size_t k = 0; k < b->npulls; k++) {
		const ft_node_t *o = b->pulls[k].owner;
		char *body = part_body(b, k);
		if (body == NULL) {
			snprintf(b->err, sizeof(b->err), "out of memory");
			return -1;
		}
		b->pulls[k].p = tgt_batch_pull_start(o->id, o->public_url, body, strlen(body), b->err, sizeof(b->err));
		if (b->pulls[k].p == NULL)
			return -1;
	}
	return 0;
}

/*
 * The name of an item in the TAR: "<bucket>/<objname>[/<archpath>]" ("<objname>[/<archpath>]" with
 * only_objname), "__404__/" first when missing.
 */
static void item_name(const batch_t *b, const item_t *it, bool missing, char *out, size_t cap)
{
	snprintf(out, cap, "%s%s%s%s%s%s", missing ? "__404__/" : "", b->only_objname ? "" : it->bucket,
		 b->only_objname ? "" : "/", it->objname, it->archpath ? "/" : "", it->archpath ? it->archpath : "");
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

static int send_header(ft_req_t *r, batch_t *b, const char *name, uint64_t size)
{
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
		rc = b->spool_fd >= 0 ? spool_copy(b, fd, off, len) : ft_resp_stream_sendfile(r, fd, off, len);
	if (b->prev_fd >= 0)
		close(b->prev_fd);
	b->prev_fd = fd;
	return rc;
}

/* Lets go of f's file: the open-file cache's reference, or the descriptor. */
static void found_close(found_t *f)
{
	if (f->ref != NULL)
		tgt_fcache_release(f->ref);
	else if (f->fd >= 0)
		close(f->fd);
	f->ref = NULL;
	f->fd = -1;
}

/*
 * o for item it (owned here) with its bucket's properties now: its place looked up (locate), or
 * left to the open (tgt_obj_init_unlocated). 0, or -1 when the bucket is gone or the name does not fit.
 */
static int item_obj(const batch_t *b, const item_t *it, tgt_obj_t *o, bool locate)
{
	ft_bmd_t *bmd = ft_bmd_current();
	const ft_bucket_t *bk = bmd ? ft_bmd_find(bmd, it->provider, it->bucket) : NULL;
	size_t len = strlen(it->objname);
	int rc = bk == NULL ? -1
		 : locate   ? tgt_obj_init(o, b->t, bk, it->objname, len)
			    : tgt_obj_init_unlocated(o, b->t, bk, it->objname, len);

	ft_bmd_put(bmd);
	return rc != 0 ? -1 : 0;
}

/*
 * Opens o's main copy for an item: from the open-file cache when it keeps it (*ref set, *fd
 * borrowed), else opened (its checksum checked when the bucket validates warm GETs), and kept
 * there for the next batch when it qualifies (core/fcache.h: a bucket without mirroring or
 * checksum-validated warm GETs; a shard whatever its size). The state.
 */
static tgt_replica_state_t open_item(tgt_obj_t *o, bool shard, int *fd, ft_lom_t *lom, tgt_fcache_ref_t **ref)
{
	tgt_replica_t main_copy = {.mp_index = (int)(o->mp - o->t->mountpaths)};
	bool cache = !o->validate_warm_get && o->mirror_copies <= 1;
	unsigned long gen = tgt_fcache_gen(o->t); /* before the open: a change after it retires the entry */
	struct stat st;
	tgt_replica_state_t s;

	*ref = NULL;
	if (cache && (*ref = tgt_fcache_get_shared(o, main_copy.mp_index, fd, lom)) != NULL)
		return TGT_REPLICA_OK;
	/* the open is the lookup: at its path in the common case, else its hashed file (core/keymap.h) */
	s = tgt_replica_open_stat(o, &main_copy, o->validate_warm_get, fd, lom, NULL, &st);
	if (s != TGT_REPLICA_OK && !o->located && tgt_obj_locate(o) == 0 && o->keyed) {
		if (cache && (*ref = tgt_fcache_get_shared(o, main_copy.mp_index, fd, lom)) != NULL)
			return TGT_REPLICA_OK;
		s = tgt_replica_open_stat(o, &main_copy, o->validate_warm_get, fd, lom, NULL, &st);
	}
	if (s == TGT_REPLICA_OK && cache)
		*ref = tgt_fcache_put_shared(o, main_copy.mp_index, gen, *fd, lom, &st, shard);
	return s;
}

/*
 * f's descriptor of its own when the cache lent it one and the bytes go out with sendfile (the
 * stream keeps the file until they left). 0, or -EIO with f->err.
 */
static int found_own(found_t *f)
{
	int fd;

	if (f->ref == NULL || f->len <= SMALL_MAX)
		return 0;
	fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		snprintf(f->err, sizeof(f->err), "dup: %s", strerror(errno));
	tgt_fcache_release(f->ref);
	f->ref = NULL;
	f->fd = fd;
	return fd < 0 ? -EIO : 0;
}

/*
 * An item whose main copy is missing or damaged, as a GET finds it (tgt_obj_recover): repaired or
 * restored (1, f->fd open), else missing (0) or not servable (-EIO, f->err says why), or
 * TGT_RECOVER_REFETCH + 1 for a remote bucket's object to fetch again (a damaged copy dropped).
 */
static int recover_item(const item_t *it, tgt_obj_t *o, found_t *f, ft_lom_t *lom)
{
	tgt_heal_t h;
	char err[600];
	int mp_index, rc = tgt_obj_recover(o, o->validate_warm_get, &f->fd, lom, &mp_index, &h, err, sizeof(err));

	if (rc == 0)
		return 1;
	f->fd = -1;
	if (rc == TGT_RECOVER_REFETCH) {
		tgt_replica_drop(o, h.aside);
		return TGT_RECOVER_REFETCH + 1;
	}
	if (rc == -ENOENT)
		return 0;
	if (rc == -EHOSTUNREACH)
		snprintf(f->err, sizeof(f->err),
			 "\"%s\" is not here, and a target that may hold it cannot be reached (%.100s)", it->objname,
			 err);
	else
		snprintf(f->err, sizeof(f->err), "\"%s\" is damaged (%s) and cannot be served: no good replica%s%.100s",
			 it->objname,
			 h.main != TGT_REPLICA_ABSENT ? tgt_replica_state_name(h.main) : "main copy missing",
			 err[0] ? "; " : "", err);
	return -EIO;
}

/* Resolves an item owned here: f's file, offset and length (fd open when f->state is 1), f->err on errors. */
static void resolve_local(batch_t *b, const item_t *it, found_t *f)
{
	tgt_obj_t o;
	ft_lom_t lom;
	uint64_t base = 0, size;
	int rc = 0;

	*f = (found_t){.state = 0, .fd = -1};
	if (item_obj(b, it, &o, false) != 0)
		return;
	bool shard = it->archpath != NULL && tgt_shard_fmt_of_name(it->objname) != TGT_SHARD_NONE;
	tgt_replica_state_t s = open_item(&o, shard, &f->fd, &lom, &f->ref);
	bool remote = tgt_is_remote(&o), cold = s == TGT_REPLICA_ABSENT && remote;
	if (s != TGT_REPLICA_OK && !cold) { /* damaged, or not at its place: repaired or restored as a GET would */
		rc = recover_item(it, &o, f, &lom);
		if (rc != 1 && rc != TGT_RECOVER_REFETCH + 1) {
			f->state = rc;
			return;
		}
		cold = rc != 1;
	}
	if (cold) { /* not cached (or its copy lost): fetched from the backend */
		rc = tgt_coldget_open(&o, &f->fd, &lom, f->err, sizeof(f->err));
		if (rc != 0) {
			f->state = rc == -404 ? 0 : -EIO;
			return;
		}
	}
	size = lom.size;
	if (it->archpath) {
		tgt_shard_fmt_t fmt = tgt_shard_fmt_of_name(it->objname);
		tgt_shard_index_t *ix = NULL;
		const tgt_shard_member_t *m = NULL;
		if (fmt == TGT_SHARD_NONE) {
			snprintf(f->err, sizeof(f->err), "\"%s\" is not an archive", it->objname);
			rc = -EINVAL;
		} else if ((rc = tgt_shard_index_get(&o, f->fd, &lom, fmt, true, &ix, f->err, sizeof(f->err))) == 0) {
			m = tgt_shard_index_find(ix, it->archpath);
			if (m != NULL && m->off < 0) {
				snprintf(f->err, sizeof(f->err), "a compressed member: read it with GET ?archpath=");
				rc = -ENOTSUP;
			} else if (m != NULL) {
				base = (uint64_t)m->off;
				size = m->size;
			}
			tgt_shard_index_put(b->t, ix);
		}
		if (rc != 0 || m == NULL) {
			found_close(f);
			f->state = rc;
			return;
		}
	}
	if (item_range(it, size, &f->off, &f->len) != 0) {
		snprintf(f->err, sizeof(f->err), "start %" PRIu64 " past the end (%" PRIu64 " bytes)", it->start, size);
		found_close(f);
		f->state = -ERANGE;
		return;
	}
	f->off += base;
	if ((rc = found_own(f)) != 0) {
		f->state = rc;
		return;
	}
	f->state = 1;
}

/* The member name of local item i as prepared: "<i>.200" in a part, else "<bucket>/<objname>[/<archpath>]". */
static void member_name(const batch_t *b, size_t i, const item_t *it, char *out, size_t cap)
{
	if (b->part)
		snprintf(out, cap, "%zu.200", i);
	else
		item_name(b, it, false, out, cap);
}

/*
 * Prepares local item i in slot s (on a reader or the sender): resolved and, when small, its whole
 * member written into the slot (s->bytes) and its file closed; else s->f as resolve_local left it
 * (a large item's file open, a missing or failed one's state and reason). An item owned elsewhere
 * is left failed (-EIO).
 */
static void slot_fill(batch_t *b, size_t i, slot_t *s)
{
	const item_t *it = &b->v[i];
	char name[3 * TGT_SHARD_NAME_MAX + 16];
	found_t *f = &s->f;

	s->bytes = 0;
	*f = (found_t){.state = -EIO, .fd = -1};
	if (it->owner != NULL)
		return;
	resolve_local(b, it, f);
	if (f->state != 1 || b->only_names || f->len > SMALL_MAX)
		return;
	member_name(b, i, it, name, sizeof(name));
	size_t hmax = tgt_tar_header_max(strlen(name)), pad = (size_t)((512 - f->len % 512) % 512);
	if (hmax + f->len + pad > SLOT_BYTES)
		return; /* a very long name: the sender sends it through the output buffer */
	ssize_t h = tgt_tar_header(name, f->len, ft_now_ns() / 1000000000, s->buf, hmax);
	if (h < 0)
		return;
	int rc = ft_pread_all(f->fd, s->buf + h, (size_t)f->len, (off_t)f->off);
	found_close(f);
	if (rc != 0) {
		snprintf(f->err, sizeof(f->err), "read: %s", rc == -1 ? "short file" : strerror(-rc));
		f->state = -EIO;
		return;
	}
	memset(s->buf + h + f->len, 0, pad);
	s->bytes = (size_t)h + (size_t)f->len + pad;
}

/*
 * Reader (fan-out thread): takes the next RUN items in order and prepares them, while the window
 * has room for them; waits for half the window to be free otherwise.
 */
static void window_read_ahead(batch_t *b)
{
	for (;;) {
		size_t j0 = atomic_load(&b->taken), k = b->n - j0 < RUN ? b->n - j0 : RUN;
		if (atomic_load(&b->stop) || j0 >= b->n || ft_req_gone(b->r))
			break;
		if (window_room(b) < k) {
			pthread_mutex_lock(&b->mu);
			atomic_fetch_add(&b->readers_waiting, 1);
			while (!atomic_load(&b->stop) && atomic_load(&b->taken) == j0 && window_room(b) < k)
				pthread_cond_wait(&b->space_cv, &b->mu);
			atomic_fetch_sub(&b->readers_waiting, 1);
			pthread_mutex_unlock(&b->mu);
			continue;
		}
		if (!atomic_compare_exchange_weak(&b->taken, &j0, j0 + k))
			continue;
		if (atomic_load(&b->readers_waiting) > 0 && window_room(b) >= WINDOW / 2)
			wake_one(b, &b->space_cv); /* room for more: one more reader */
		for (size_t j = j0; j < j0 + k; j++) {
			slot_t *s = &b->slots[j % WINDOW];
			if (b->v[j].owner != NULL && !b->part)
				continue;        /* the sender copies it from its owner's part */
			if (ft_req_gone(b->r)) { /* taken, so marked done, but not read or fetched for nobody */
				s->bytes = 0;
				s->f = (found_t){.state = -ECONNRESET, .fd = -1};
				snprintf(s->f.err, sizeof(s->f.err), "the client left");
			} else {
				slot_fill(b, j, s);
			}
			atomic_store(&s->done, j);
			if (atomic_load(&b->waiting) == j)
				wake_one(b, &b->ready_cv);
		}
	}
}

/*
 * The sender's slot of local item i, prepared: by a reader (waited for) or, when nobody took it
 * yet, by the sender itself. A slot still gathered for the next write is sent first. NULL with
 * the stream's error in *rc.
 */
static slot_t *window_get(ft_req_t *r, batch_t *b, size_t i, int *rc)
{
	slot_t *s = &b->slots[i % WINDOW];

	if (!b->slots_queued)
		release_upto(b, i); /* every slot before i is done with */
	else if (i >= atomic_load(&b->released) + WINDOW && (*rc = flush(r, b)) != 0)
		return NULL; /* i's slot is still gathered: send it first */
	size_t t = atomic_load(&b->taken);
	while (t <= i)
		if (atomic_compare_exchange_weak(&b->taken, &t, i + 1)) { /* nobody took it: the sender does */
			slot_fill(b, i, s);
			return s;
		}
	if (atomic_load(&s->done) != i) {
		pthread_mutex_lock(&b->mu);
		atomic_store(&b->waiting, i);
		while (atomic_load(&s->done) != i)
			pthread_cond_wait(&b->ready_cv, &b->mu);
		atomic_store(&b->waiting, SIZE_MAX);
		pthread_mutex_unlock(&b->mu);
	}
	return s;
}

/*
 * Sends len bytes of a local item's file (taken) at f->off: up to SMALL_MAX read straight into the
 * output buffer, larger with sendfile (a descriptor of its own: found_own). 0 or -errno (b->err
 * set on a read error).
 */
static int send_found(ft_req_t *r, batch_t *b, found_t *f, uint64_t len)
{
	int rc = 0, fd = f->fd;

	if (len > SMALL_MAX) {
		f->fd = -1;
		return send_file(r, b, fd, f->off, len);
	}
	if (len > 0 && (rc = room_for(r, b, (size_t)len)) == 0 &&
	    (rc = ft_pread_all(fd, b->out + b->out_len, (size_t)len, (off_t)f->off)) != 0)
		snprintf(b->err, sizeof(b->err), "read: %s", rc == -1 ? "short file" : strerror(-rc));
	else if (len > 0 && rc == 0)
		b->out_len += (size_t)len;
	found_close(f);
	return rc == 0 ? 0 : -EIO;
}

/* Buffered: item it's MossOut (size bytes sent; err NULL, or why it is missing). 0, or -ENOMEM. */
static int note_out(batch_t *b, const item_t *it, uint64_t size, const char *err)
{
	json_t *o;

	if (!b->buffered)
		return 0;
	o = json_pack("{s:s, s:s, s:s}", "objname", it->objname, "bucket", it->bucket, "provider", it->provider);
	if (o != NULL && it->archpath != NULL)
		json_object_set_new(o, "archpath", json_string(it->archpath));
	if (o != NULL && err != NULL)
		json_object_set_new(o, "err_msg", json_string(err));
	if (o != NULL && it->opaque != NULL)
		json_object_set_new(o, "opaque", json_string(it->opaque));
	if (o != NULL)
		json_object_set_new(o, "size", json_integer((json_int_t)size));
	if (o == NULL || json_array_append_new(b->outs, o) != 0) {
		b->fail_status = 500;
		snprintf(b->err, sizeof(b->err), "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/*
 * An item that is not there (state 0) or failed (b->err says why): with continue_on_error a
 * missing one becomes an empty "__404__/" member (0); else the batch fails: -EIO with the answer's
 * status and message in b.
 */
static int item_failed(ft_req_t *r, batch_t *b, size_t i, const item_t *it, int state)
{
	char name[3 * TGT_SHARD_NAME_MAX + 16], why[256];

	if (state == 0 && b->continue_on_error) {
		item_name(b, it, true, name, sizeof(name));
		snprintf(why, sizeof(why), "%s/%s%s%s: does not exist", it->bucket, it->objname,
			 it->archpath ? "/" : "", it->archpath ? it->archpath : "");
		return note_out(b, it, 0, why) != 0 ? -ENOMEM : send_header(r, b, name, 0);
	}
	b->fail_status = state == 0 ? 404 : state == -ERANGE ? 416 : 502;
	snprintf(why, sizeof(why), "%.255s", state == 0 ? "does not exist" : b->err);
	snprintf(b->err, sizeof(b->err), "batch item %zu (%s/%s%s%s): %s", i, it->bucket, it->objname,
		 it->archpath ? "/" : "", it->archpath ? it->archpath : "", why);
	return -EIO;
}

/* Sends an item owned here. 0 or -errno (b->err says why). */
static int send_local(ft_req_t *r, batch_t *b, size_t i, const item_t *it)
{
	char name[3 * TGT_SHARD_NAME_MAX + 16];
	int rc = 0;
	slot_t *s = window_get(r, b, i, &rc);

	if (s == NULL)
		return rc;
	if (s->bytes > 0)
		return note_out(b, it, s->f.len, NULL) != 0 ? -ENOMEM : queue_slot(r, b, s);
	if (s->f.state != 1) {
		snprintf(b->err, sizeof(b->err), "%s", s->f.err);
		return item_failed(r, b, i, it, s->f.state);
	}
	uint64_t len = b->only_names ? 0 : s->f.len;
	item_name(b, it, false, name, sizeof(name));
	if (note_out(b, it, len, NULL) != 0)
		return -ENOMEM;
	rc = send_header(r, b, name, len);
	if (rc == 0)
		rc = send_found(r, b, &s->f, len);
	return rc == 0 ? send_padding(r, b, len) : rc;
}

/* Copies len bytes of pull p into the stream through the output buffer. 0 or -errno (b->err). */
static int copy_pulled(ft_req_t *r, batch_t *b, tgt_batch_pull_t *p, uint64_t len)
{
	while (len > 0) {
		size_t k = SEND_MAX - b->pend - (b->out_len - b->out_mark);
		if (k == 0) {
			int rc = flush(r, b);
			if (rc != 0)
				return rc;
			k = SEND_MAX;
		}
		if (k > len)
			k = (size_t)len;
		int rc = tgt_batch_pull_read(p, r, b->out + b->out_len, k, b->err, sizeof(b->err));
		if (rc != 0)
			return rc;
		b->out_len += k;
		len -= k;
	}
	return 0;
}

/* Sends the next member of an item's owner's part, checked to be that item's. 0 or -errno (b->err). */
static int send_remote(ft_req_t *r, batch_t *b, size_t i, const item_t *it)
{
	tgt_batch_pull_t *p = b->pulls[it->pull].p;
	char name[3 * TGT_SHARD_NAME_MAX + 16], msg[PART_ERR_MAX + 512];
	uint64_t size;
	size_t idx;
	int status, rc;

	b->fail_status = 502;
	if ((rc = tgt_batch_pull_member(p, r, &idx, &status, &size, b->err, sizeof(b->err))) != 0)
		return rc;
	size_t pad = (size_t)((512 - size % 512) % 512);
	if (idx != it->part_index || (status != 200 && size > PART_ERR_MAX)) {
		snprintf(b->err, sizeof(b->err), "the part from %s is out of step (member %zu, expected %zu)",
			 b->pulls[it->pull].owner->id, idx, it->part_index);
		return -EIO;
	}
	if (status != 200) {
		if ((rc = tgt_batch_pull_read(p, r, msg, (size_t)size + pad, b->err, sizeof(b->err))) != 0)
			return rc;
		snprintf(b->err, sizeof(b->err), "%s: %.*s", b->pulls[it->pull].owner->id, (int)size, msg);
		return item_failed(r, b, i, it, status == 404 ? 0 : status == 416 ? -ERANGE : -EIO);
	}
	item_name(b, it, false, name, sizeof(name));
	if ((rc = note_out(b, it, size, NULL)) != 0 || (rc = send_header(r, b, name, size)) != 0 ||
	    (rc = copy_pulled(r, b, p, size)) != 0)
		return rc;
	if (pad && (rc = tgt_batch_pull_read(p, r, msg, pad, b->err, sizeof(b->err))) != 0)
		return rc;
	return send_padding(r, b, size);
}

/*
 * Part mode: item i as member "<i>.<status>": 200 with its bytes, 404 empty, another status with
 * the error's text. 0 or -errno.
 */
static int send_part_item(ft_req_t *r, batch_t *b, size_t i, const item_t *it)
{
	char name[48];
	int status, rc = 0;
	slot_t *s = window_get(r, b, i, &rc);

	if (s == NULL)
		return rc;
	if (s->bytes > 0)
		return queue_slot(r, b, s);
	found_t *f = &s->f;
	if (it->owner != NULL)
		snprintf(f->err, sizeof(f->err), "not owned by %s (the cluster map changed)", b->t->id);
	status = f->state == 1 ? 200 : f->state == 0 ? 404 : f->state == -ERANGE ? 416 : it->owner ? 503 : 500;
	snprintf(name, sizeof(name), "%zu.%d", i, status);
	if (status != 200) {
		size_t len = status == 404 ? 0 : strnlen(f->err, sizeof(f->err));
		rc = send_header(r, b, name, len);
		if (rc == 0 && len)
			rc = emit(r, b, f->err, len);
		return rc == 0 ? send_padding(r, b, len) : rc;
	}
	uint64_t len = b->only_names ? 0 : f->len;
	rc = send_header(r, b, name, len);
	if (rc == 0)
		rc = send_found(r, b, f, len);
	return rc == 0 ? send_padding(r, b, len) : rc;
}

/*
 * The buffered answer: multipart/mixed, the part "metadata" (MossResp) then the part "archive" (the
 * spooled TAR, sent from the work file). 0, or -errno once the client is gone.
 */
static int send_buffered(ft_req_t *r, batch_t *b)
{
	char boundary[FT_RANDOM_ID_LEN + 1], id[FT_RANDOM_ID_LEN + 1], ctype[96], tail[FT_RANDOM_ID_LEN + 16];
	char head[FT_RANDOM_ID_LEN + 96], mid[2 * FT_RANDOM_ID_LEN + 192];
	json_t *resp;
	char *meta;
	int rc;

	ft_random_id(boundary);
	ft_random_id(id);
	id[16] = '\0';
	resp = json_pack("{s:s+, s:O}", "uuid", "batch-", id, "out", b->outs);
	meta = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
	json_decref(resp);
	if (meta == NULL) {
		b->fail_status = 500;
		snprintf(b->err, sizeof(b->err), "out of memory");
		return -ENOMEM;
	}
	snprintf(ctype, sizeof(ctype), "multipart/mixed; boundary=%s", boundary);
	int n0 = snprintf(head, sizeof(head), "--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n",
			  boundary);
	int n1 =
		snprintf(mid, sizeof(mid),
			 "\n\r\n--%s\r\nContent-Disposition: form-data; name=\"archive\"; filename=\"batch-%s.tar\"\r\n"
			 "Content-Type: application/octet-stream\r\n\r\n",
			 boundary, id);
	int n2 = snprintf(tail, sizeof(tail), "\r\n--%s--\r\n", boundary);
	struct iovec iov[3] = {{head, (size_t)n0}, {meta, strlen(meta)}, {mid, (size_t)n1}};
	rc = ft_resp_stream_start(
		r, 200, ctype, (int64_t)(iov[0].iov_len + iov[1].iov_len + iov[2].iov_len + b->spool_len + (size_t)n2));
	b->started = true;
	if (rc == 0)
		rc = ft_resp_stream_writev(r, iov, 3);
	free(meta);
	if (rc == 0 && b->spool_len > 0)
		rc = ft_resp_stream_sendfile(r, b->spool_fd, 0, b->spool_len);
	if (rc == 0)
		rc = ft_resp_stream_write(r, tail, (size_t)n2);
	return rc;
}

/* Ends the answer: the stream's end, or (nothing sent yet) a clean error. */
static void finish(ft_req_t *r, batch_t *b, int rc)
{
	if (rc == 0 && b->buffered)
		rc = send_buffered(r, b);
	if (rc == 0) {
		ft_resp_stream_end(r, 0);
	} else if (!b->started) {
		/* a client that left: 499 in the request metrics, as nginx logs it (nobody reads the answer) */
		int status = rc == -ECONNRESET && ft_req_gone(r) ? 499 : b->fail_status ? b->fail_status : 500;
		ft_resp_error(r, status, "%s", b->err[0] ? b->err : strerror(-rc));
	} else {
		ft_warn("batch: %s; the TAR stream is cut", b->err[0] ? b->err : strerror(-rc));
		ft_resp_stream_end(r, rc);
	}
}

/* The sender: every item in order, then the TAR's end; b->rc. The readers are stopped when it returns. */
static void batch_send(ft_req_t *r, batch_t *b)
{
	static const uint8_t eof[1024];
	int rc = 0;

	for (size_t i = 0; i < b->n && rc == 0; i++) {
		const item_t *it = &b->v[i];
		if (ft_req_gone(r)) { /* nobody to send the rest to (a buffered answer is not sent until it is whole) */
			snprintf(b->err, sizeof(b->err), "the client left after %zu of %zu items", i, b->n);
			rc = -ECONNRESET;
			break;
		}
		b->fail_status = 0; /* each failure sets its own; none set: 500 */
		rc = b->part     ? send_part_item(r, b, i, it)
		     : it->owner ? send_remote(r, b, i, it)
				 : send_local(r, b, i, it);
		b->consumed = i + 1;
	}
	if (rc == 0)
		b->fail_status = 0;
	if (rc == 0 && (rc = emit(r, b, eof, sizeof(eof))) == 0)
		rc = flush(r, b);
	b->rc = rc;
	pthread_mutex_lock(&b->mu);
	atomic_store(&b->stop, true);
	pthread_cond_broadcast(&b->space_cv);
	pthread_mutex_unlock(&b->mu);
	for (size_t k = 0; rc != 0 && k < b->npulls; k++) /* failed: the owners stop now, not at the answer's end */
		if (b->pulls[k].p != NULL)
			tgt_batch_pull_cancel(b->pulls[k].p);
}

/*
 * Fetcher (fan-out thread): fetches the local items of remote buckets that are not cached (and
 * keeps them), ahead of the readers, so that a batch over an uncached dataset waits for its
 * backend FETCHERS + 1 + READERS objects at a time, not only as many as prepare items. An item a
 * reader or the sender took already is theirs to fetch; a failure is left to them to meet again.
 * A warm dataset costs them little: after FETCH_CACHED_QUIT items in a row found cached they stop
 * (each look is a stat the reader's open repeats), leaving any later cold item to the readers.
 */
static void window_fetch_ahead(batch_t *b)
{
	for (;;) {
		size_t i = atomic_fetch_add(&b->fetch_next, 1);
		if (i >= b->n || atomic_load(&b->stop) || atomic_load(&b->fetch_cached) >= FETCH_CACHED_QUIT ||
		    ft_req_gone(b->r))
			break;
		const item_t *it = &b->v[i];
		tgt_obj_t o;
		char err[200];
		int64_t bytes;
		if ((it->owner != NULL && !b->part) || i < atomic_load(&b->taken) || item_obj(b, it, &o, true) != 0 ||
		    !tgt_is_remote(&o))
			continue;
		if (tgt_coldget_prefetch(&o, &bytes, err, sizeof(err)) == 1) /* joins a fetch in flight */
			atomic_fetch_add(&b->fetch_cached, 1);
		else
			atomic_store(&b->fetch_cached, 0);
	}
}

/* A fan-out call: the first one to run is the sender, the next b->readers read ahead for it, the rest fetch. */
static void window_main(void *arg, int k)
{
	batch_t *b = arg;
	int role;

	(void)k;
	pthread_mutex_lock(&b->mu);
	role = b->roles_taken++;
	pthread_mutex_unlock(&b->mu);
	if (role == 0)
		batch_send(b->r, b);
	else if (role <= b->readers)
		window_read_ahead(b);
	else
		window_fetch_ahead(b);
}

/* Local items of the batch (every item of a part); *remote: whether some are in a remote bucket. */
static size_t local_items(const batch_t *b, bool *remote)
{
	size_t k = 0;

	*remote = false;
	for (size_t i = 0; i < b->n; i++) {
		bool here = b->part || b->v[i].owner == NULL;
		k += here;
		*remote = *remote || (here && strcmp(b->v[i].provider, "ais") != 0);
	}
	return k;
}

/* Buffered: the work file for the TAR, on the mountpath of the first item's name. 0, or -1 with the answer in b. */
static int spool_open(batch_t *b)
{
	const item_t *it = &b->v[0];
	const tgt_mountpath_t *mp =
		tgt_mountpath_pick(b->t, it->provider, it->bucket, it->objname, strlen(it->objname));
	int fd = mp ? tgt_work_anon(mp) : -ENOENT;

	b->outs = json_array();
	if (fd < 0 || b->outs == NULL) {
		b->fail_status = 500;
		snprintf(b->err, sizeof(b->err), "buffered answer: work file: %s", strerror(fd < 0 ? -fd : ENOMEM));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	b->spool_fd = fd;
	b->spool_mp = mp;
	return 0;
}

static void batch_work(ft_req_t *r, void *arg)
{
	batch_t *b = arg;
	bool remote;
	int readers = local_items(b, &remote) >= 4 && b->t->fanout != NULL ? READERS : 0;
	int fetchers = readers > 0 && remote ? FETCHERS : 0;

	b->hdr_cap = tgt_tar_header_max(3 * TGT_SHARD_NAME_MAX + 16);
	b->hdr = malloc(b->hdr_cap);
	b->out = malloc(SEND_MAX);
	b->slots = calloc(WINDOW, sizeof(*b->slots));
	b->slot_mem = slot_mem_take();
	if (b->hdr == NULL || b->out == NULL || b->slots == NULL || b->slot_mem == NULL) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	for (size_t j = 0; j < WINDOW; j++) {
		b->slots[j].f.fd = -1;
		b->slots[j].buf = b->slot_mem + j * SLOT_BYTES;
		atomic_init(&b->slots[j].done, SIZE_MAX);
	}
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->ready_cv, NULL);
	pthread_cond_init(&b->space_cv, NULL);
	b->mu_init = true;
	b->waiting = SIZE_MAX;
	b->r = r;
	if (b->buffered && spool_open(b) != 0) {
		ft_resp_error(r, b->fail_status, "%s", b->err);
		return;
	}
	if (start_pulls(b) != 0) {
		b->fail_status = 500;
		b->rc = -EIO;
	} else if (readers > 0) {
		b->readers = readers;
		ft_fanout_run(b->t->fanout, window_main, b, 1 + readers + fetchers);
	} else {
		batch_send(r, b);
	}
	/* the readers are done: close what items prepared but never sent hold open */
	for (size_t j = 0; j < WINDOW; j++)
		found_close(&b->slots[j].f);
	finish(r, b, b->rc);
}

static void on_body(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	batch_t *b = arg;
	char why[300];
	int status = 400;

	if (err) {
		ft_resp_error(r, 400, "batch request body incomplete");
		return;
	}
	if (parse(r, b, body, len, &status, why, sizeof(why)) != 0 || place(b, &status, why, sizeof(why)) != 0) {
		ft_resp_error(r, status, "batch: %s", why);
		return;
	}
	ft_req_defer(r, batch_work, b);
}

/* A batch of r for t, in request memory (freed with it). */
static batch_t *batch_new(ft_req_t *r, tgt_t *t)
{
	batch_t *b = ft_req_alloc(r, sizeof(*b));

	memset(b, 0, sizeof(*b));
	b->t = t;
	b->prev_fd = -1;
	b->spool_fd = -1;
	return b;
}

void tgt_batch(ft_req_t *r, tgt_t *t)
{
	const char *part = ft_req_query(r, "part");
	batch_t *b;

	if (ft_req_method(r) != FT_HTTP_POST) {
		ft_resp_header(r, "Allow", "POST");
		ft_resp_error(r, 405, "method %s not allowed on /v1/batch", ft_req_method_name(r));
		return;
	}
	tgt_fcache_share(t); /* the items' open-file cache: made by a loop thread, which sweeps it */
	b = batch_new(r, t);
	b->part = part != NULL && strcmp(part, "true") == 0;
	ft_req_on_done(r, batch_free, b);
	ft_req_read_body_all(r, BODY_MAX, on_body, b);
}

void tgt_batch_moss(ft_req_t *r, tgt_t *t, const char *bucket)
{
	batch_t *b;

	if (ft_req_method(r) != FT_HTTP_GET) {
		ft_resp_header(r, "Allow", "GET");
		ft_resp_error(r, 405, "method %s not allowed on %s", ft_req_method_name(r), FT_MOSS_PATH);
		return;
	}
	tgt_fcache_share(t);
	b = batch_new(r, t);
	b->moss = true;
	b->moss_bucket = bucket;
	ft_req_on_done(r, batch_free, b);
	ft_req_read_body_all(r, BODY_MAX, on_body, b);
}
