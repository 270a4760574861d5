/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding, the holder's receiver of whole slices on the public port: streamed into a work file, checked, published. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/reqsig.h"
#include "auth/sigv4.h"
#include "base/fdio.h"
#include "base/log.h"
#include "http/util.h"
#include "protect/ec.h"
#include "target.h"

/*
 * DESIGN
 * PUT /v1/ec/slice?provider&bucket&obj&xfer on the public port (sent by ec_push.c) carries one
 * whole slice: framed header, then payload (ec_codec.h). The body is written on the loop thread
 * into "<mp>/.work/ec.<xfer>" chunk by chunk as it arrives, and hashed while the chunk is still in
 * the cache: the header is collected until it decodes, then every payload byte goes through the
 * slice's xxhash64. Once the body is complete, its length and checksum are checked against the
 * header, and the slice is published as a control-port one is (ec_slice_store: the name lock, the
 * newer-version rule, rename). Nothing else makes it visible: a body cut short, a corrupt header,
 * a wrong checksum or a refused signature leave no file behind (the work file is removed when the
 * request ends, whatever happened).
 *
 * With a cluster secret, the request must be signed like a control-plane request, over the
 * body's sha256 claimed in Ft-Body-Sha256: the signature, time and nonce are checked from the
 * headers, before a byte of the body is read (401); the body is hashed as it streams and a
 * digest other than the claimed one is refused (401) before anything is published.
 *
 * The publish (rename) runs on the loop thread with sync "none" when the name's lock stripe is
 * free (tried, never waited for: a publisher may hold it through a long mirror copy); otherwise on
 * the worker pool (which also syncs per the policy).
 *
 * OWNERSHIP
 * recv_t lives in request memory; it owns the work fd, the work file (until renamed) and the
 * running checksums. recv_release, from an ft_req_on_done hook, frees whatever is still held.
 */

#define RECV_MAX_TOTAL (1ull << 36) /* a slice body larger than this is refused */
#define RECV_REPLAY_SLOTS (1u << 16)

typedef struct {
	tgt_t *t;
	ec_name_t n;
	char work[64];  /* its name in n.mp's .work; "" once renamed or removed */
	int fd;         /* -1 once closed */
	uint64_t total; /* Content-Length */
	uint64_t got;
	uint8_t *hdr; /* FT_EC_HDR_MAX bytes while the header is collected */
	size_t hdr_have, hlen;
	ft_ec_meta_t *m; /* decoded header (hlen > 0) */
	ft_cksum_t ck;   /* the payload's xxhash64 */
	int ck_live;
	ft_sha256_t sha; /* the whole body, with a cluster secret */
	int sha_live;
	const char *body_hex; /* its claimed digest */
	int status;           /* the error to answer once the body ends, 0 none */
	char msg[FT_OBJ_NAME_MAX + 256];
} recv_t;

static ft_replay_t *replay;
static pthread_once_t replay_once = PTHREAD_ONCE_INIT;

static void replay_init(void)
{
	replay = ft_replay_new(RECV_REPLAY_SLOTS);
}

static void recv_release(void *arg)
{
	recv_t *x = arg;
	char hex[FT_SHA256_HEX];

	if (x->ck_live)
		ft_cksum_abort(&x->ck);
	if (x->sha_live)
		ft_sha256_final(&x->sha, hex);
	x->ck_live = x->sha_live = 0;
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	if (x->work[0])
		unlinkat(x->n.mp->work_fd, x->work, 0);
	x->work[0] = '\0';
	free(x->hdr);
	free(x->m);
	x->hdr = NULL;
	x->m = NULL;
}

/* Records the first error (answered when the body ends); returns -1 to stop reading. */
static int recv_fail(recv_t *x, int status, const char *fmt, const char *arg)
{
	if (x->status == 0) {
		x->status = status;
		snprintf(x->msg, sizeof(x->msg), fmt, arg);
	}
	return -1;
}

/* The header bytes of a chunk: collected until it decodes. Returns how many of len it took, or -1. */
static ssize_t recv_header(recv_t *x, const uint8_t *p, size_t len)
{
	size_t room = FT_EC_HDR_MAX - x->hdr_have, take = len < room ? len : room;
	int rc;

	memcpy(x->hdr + x->hdr_have, p, take);
	x->hdr_have += take;
	rc = ft_ec_hdr_decode(x->m, x->hdr, x->hdr_have, &x->hlen);
	if (rc == 1 && x->hdr_have < FT_EC_HDR_MAX && x->got + take < x->total)
		return (ssize_t)take; /* read more */
	if (rc != 0 || x->hlen > x->hdr_have || x->m->slice_size > x->total || x->total != x->hlen + x->m->slice_size)
		return recv_fail(x, 400, "slice of \"%s\" is corrupt (bad header, or a length other than it says)",
				 x->n.obj);
	/* the bytes past the header are payload */
	ft_cksum_update(&x->ck, x->hdr + x->hlen, x->hdr_have - x->hlen);
	free(x->hdr);
	x->hdr = NULL;
	return (ssize_t)take;
}

static int on_data(ft_req_t *r, void *arg, const void *buf, size_t len)
{
	recv_t *x = arg;
	const uint8_t *p = buf;

	(void)r;
	if (x->status != 0)
		return -1;
	if (len > x->total - x->got)
		return recv_fail(x, 400, "slice of \"%s\": more bytes than Content-Length", x->n.obj);
	int e = ft_write_all(x->fd, p, len);
	if (e != 0)
		return recv_fail(x, e == -ENOSPC ? 507 : 500, "write: %s", strerror(-e));
	if (x->sha_live)
		ft_sha256_update(&x->sha, p, len);
	if (x->hdr != NULL) {
		ssize_t took = recv_header(x, p, len);
		if (took < 0)
			return -1;
		p += took;
		len -= (size_t)took;
		x->got += (uint64_t)took;
	}
	if (len > 0)
		ft_cksum_update(&x->ck, p, len);
	x->got += len;
	return 0;
}

/* Answers the outcome of the publish, after releasing the transfer. */
static void recv_respond(ft_req_t *r, recv_t *x, const ec_store_t *st)
{
	recv_release(x); /* the work file is gone once renamed; removed otherwise */
	ec_sweep_stale(x->t);
	if (st->status != 200) {
		ft_resp_error(r, st->status, "%s", st->msg);
		return;
	}
	ft_resp_json(r, 200,
		     st->kept ? json_pack("{s:i, s:b, s:b}", "idx", st->idx, "replica", st->replica, "kept", 1)
			      : json_pack("{s:i, s:b}", "idx", st->idx, "replica", st->replica));
}

/* Publishes the checked slice and answers, on a worker (it may wait for the name lock, and sync). */
static void recv_publish(ft_req_t *r, void *arg)
{
	recv_t *x = arg;
	ec_store_t st;

	ec_slice_store(x->t, &x->n, x->fd, x->work, x->m, 0, &st);
	recv_respond(r, x, &st);
}

/*
 * On the loop thread: publishes at once when no sync is due and the name's lock stripe is free;
 * else on a worker (a publisher may hold the stripe for long: a mirror copy of a large object).
 */
static void recv_publish_here(ft_req_t *r, recv_t *x)
{
	ec_store_t st;

	if (x->t->cfg.sync != FT_SYNC_NONE) {
		ft_req_defer(r, recv_publish, x);
		return;
	}
	ec_slice_store(x->t, &x->n, x->fd, x->work, x->m, 1, &st);
	if (st.status == 0) {
		ft_req_defer(r, recv_publish, x);
		return;
	}
	recv_respond(r, x, &st);
}

static void on_end(ft_req_t *r, void *arg, int err)
{
	recv_t *x = arg;
	char hex[FT_CKSUM_HEX_MAX], sha[FT_SHA256_HEX];

	if (x->status == 0 && err != 0)
		recv_fail(x, 400, "slice body ended early: %s", strerror(-err));
	if (x->status == 0 && (x->got != x->total || x->hdr != NULL))
		recv_fail(x, 400, "slice of \"%s\" is shorter than its header says", x->n.obj);
	if (x->status == 0 && x->sha_live) {
		ft_sha256_final(&x->sha, sha);
		x->sha_live = 0;
		if (strcmp(sha, x->body_hex) != 0) {
			ft_warn("ec: refused slice PUT %.200s from %s: the body is not the one signed",
				ft_req_target(r), ft_req_peer(r));
			recv_fail(x, 401, "%s", "the body is not the one signed (Ft-Body-Sha256)");
		}
	}
	if (x->status == 0) {
		ft_cksum_final(&x->ck, hex);
		x->ck_live = 0;
		if (strcmp(hex, x->m->slice_cksum) != 0)
			recv_fail(x, 400, "slice of \"%s\" is corrupt (payload checksum mismatch)", x->n.obj);
	}
	if (x->status != 0) {
		recv_release(x);
		ft_resp_error(r, x->status, "%s", x->msg);
		return;
	}
	recv_publish_here(r, x);
}

/* With a cluster secret: whether the headers carry a good signature over the claimed body; 0, or -1 after 401. */
static int recv_signed(ft_req_t *r, recv_t *x)
{
	const ft_auth_t *a = ft_auth();
	ft_reqsig_result_t res;

	if (!a->have_secret)
		return 0;
	pthread_once(&replay_once, replay_init);
	x->body_hex = ft_req_header(r, FT_REQSIG_HEADER_BODY);
	res = replay == NULL ? FT_REQSIG_BUSY
			     : ft_reqsig_verify_hashed(a->ctl_key, "PUT", ft_req_target(r), x->body_hex,
						       ft_req_header(r, FT_REQSIG_HEADER_TIME),
						       ft_req_header(r, FT_REQSIG_HEADER_NONCE),
						       ft_req_header(r, FT_REQSIG_HEADER_SIG), time(NULL), replay);
	if (res == FT_REQSIG_OK)
		return 0;
	ft_warn("ec: refused slice PUT %.200s from %s: %s", ft_req_target(r), ft_req_peer(r), ft_reqsig_strerror(res));
	ft_resp_error(r, 401, "%s", ft_reqsig_strerror(res));
	return -1;
}

void tgt_ec_slice_put(ft_req_t *r, tgt_t *t)
{
	recv_t *x = ft_req_alloc(r, sizeof(*x));
	const char *xfer = ft_req_query(r, "xfer");
	int64_t cl = ft_req_content_length(r);
	char why[256];

	memset(x, 0, sizeof(*x));
	x->t = t;
	x->fd = -1;
	if (ft_req_method(r) != FT_HTTP_PUT) {
		ft_resp_header(r, "Allow", "PUT");
		ft_resp_error(r, 405, "method %s not allowed on /v1/ec/slice of the public port",
			      ft_req_method_name(r));
		return;
	}
	if (recv_signed(r, x) != 0)
		return;
	if (ec_names_parse(t, ft_req_query(r, "provider"), ft_req_query(r, "bucket"), ft_req_query(r, "obj"), &x->n,
			   why, sizeof(why)) != 0) {
		ft_resp_error(r, 400, "PUT /v1/ec/slice: %s", why);
		return;
	}
	if (!xfer || strlen(xfer) == 0 || strlen(xfer) > 32 || strspn(xfer, "0123456789abcdef") != strlen(xfer)) {
		ft_resp_error(r, 400, "PUT /v1/ec/slice: xfer (hex) is required");
		return;
	}
	if (cl <= 0 || (uint64_t)cl > RECV_MAX_TOTAL) {
		ft_resp_error(r, cl < 0 ? 411 : 400,
			      "PUT /v1/ec/slice: a Content-Length of 1 to %llu bytes is required",
			      (unsigned long long)RECV_MAX_TOTAL);
		return;
	}
	x->total = (uint64_t)cl;
	x->hdr = malloc(FT_EC_HDR_MAX);
	x->m = malloc(sizeof(*x->m));
	ft_req_on_done(r, recv_release, x);
	if (x->hdr == NULL || x->m == NULL || ft_cksum_init(&x->ck, FT_CKSUM_XXHASH) != 0) {
		ft_resp_error(r, 500, "out of memory");
		return;
	}
	x->ck_live = 1;
	if (ft_auth()->have_secret) {
		if (ft_sha256_init(&x->sha) != 0) {
			ft_resp_error(r, 500, "out of memory");
			return;
		}
		x->sha_live = 1;
	}
	snprintf(x->work, sizeof(x->work), "ec.%s", xfer);
	x->fd = openat(x->n.mp->work_fd, x->work, O_RDWR | O_CLOEXEC | O_CREAT | O_TRUNC, 0644);
	if (x->fd < 0) {
		int e = errno;
		x->work[0] = '\0';
		ft_resp_error(r, e == ENOSPC ? 507 : 500, "PUT /v1/ec/slice: work file: %s", strerror(e));
		return;
	}
	ft_req_read_body(r, on_data, on_end, x);
}
