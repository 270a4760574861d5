/* SPDX-License-Identifier: Apache-2.0 */
/* Erasure coding, the owner's PUT of a small object: encoded in one pooled buffer, each slice POSTed straight from it. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/codec.h"
#include "base/fanout.h"
#include "http/util.h"
#include "protect/ec.h"
#include "protect/ec_codec.h"
#include "protect/ec_xfer.h"

/*
 * DESIGN
 * An object whose D+P slices together fit EC_MEMFD_MAX is encoded in memory: the data slices are
 * read from the published object (the page cache) into one buffer, the parity computed beside them
 * (ec_codec.c). Each slice sits after FT_EC_HDR_MAX bytes of headroom, where its framed header is
 * written just before the payload, so header and payload go out as one contiguous POST body
 * (/v1/ec/slice, the holder stores it when the last chunk arrives) straight from the buffer: no
 * work file, no read back, no copy besides libcurl's into the socket. The POSTs run all at once on
 * the target's fan-out threads, each on its thread's kept-alive connection to its holder
 * (common/client.c), so the PUT waits for the slowest holder, not for the sum.
 *
 * The buffers come from a small pool: a fresh allocation of a megabyte or more is a fresh mapping,
 * and faulting its pages in (zeroed) cost more than the encoding itself. At most EC_POOL_KEEP
 * buffers of at most EC_POOL_BYTES in all stay idle; others are freed on return.
 *
 * OWNERSHIP
 * ec_send_mem owns its buffer from ec_buf_get to ec_buf_put; the fan-out calls only borrow it and
 * have all returned before it goes back. The caller keeps the object's fd.
 */

#define EC_POOL_KEEP 8
#define EC_POOL_BYTES (32u << 20)

typedef struct {
	uint8_t *p;
	size_t cap;
} ec_buf_t;

static struct {
	pthread_mutex_t lock;
	ec_buf_t idle[EC_POOL_KEEP];
	int n;
	size_t bytes;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ulong send_counter;

/* A buffer of at least want bytes (an idle one when one is big enough); b->p NULL when out of memory. */
static void ec_buf_get(ec_buf_t *b, size_t want)
{
	b->p = NULL;
	pthread_mutex_lock(&pool.lock);
	for (int i = 0; i < pool.n; i++) {
		if (pool.idle[i].cap >= want) {
			*b = pool.idle[i];
			pool.idle[i] = pool.idle[--pool.n];
			pool.bytes -= b->cap;
			break;
		}
	}
	pthread_mutex_unlock(&pool.lock);
	if (b->p == NULL) {
		b->cap = want;
		b->p = malloc(want);
	}
}

/* Returns b to the pool, or frees it when the pool is full (a smaller idle one makes room). */
static void ec_buf_put(ec_buf_t *b)
{
	uint8_t *drop = b->p;

	pthread_mutex_lock(&pool.lock);
	if (pool.n == EC_POOL_KEEP) { /* the smallest idle one goes */
		int k = 0;
		for (int i = 1; i < pool.n; i++)
			k = pool.idle[i].cap < pool.idle[k].cap ? i : k;
		if (pool.idle[k].cap < b->cap) {
			drop = pool.idle[k].p;
			pool.bytes -= pool.idle[k].cap;
			pool.idle[k] = pool.idle[--pool.n];
		}
	}
	if (pool.n < EC_POOL_KEEP && pool.bytes + b->cap <= EC_POOL_BYTES) {
		pool.idle[pool.n++] = *b;
		pool.bytes += b->cap;
		if (drop == b->p)
			drop = NULL;
	}
	pthread_mutex_unlock(&pool.lock);
	free(drop);
	b->p = NULL;
}

typedef struct {
	const ec_node_t *node;
	const char *names; /* "provider=..&bucket=..&obj=.." */
	ft_ec_meta_t m;
	uint8_t *payload; /* m.slice_size bytes, FT_EC_HDR_MAX of headroom before */
	int rc;
	char err[512];
} ec_post_t;

/* POSTs slice s (header written into the headroom) in chunks below the control port's body limit. */
static void ec_post_one(void *arg, int i)
{
	ec_post_t *s = (ec_post_t *)arg + i;
	uint8_t hdr[FT_EC_HDR_MAX];
	int hlen = ft_ec_hdr_encode(&s->m, hdr, sizeof(hdr));
	char url[EC_URL_MAX];

	s->rc = -1;
	if (hlen < 0) {
		snprintf(s->err, sizeof(s->err), "slice metadata does not encode");
		return;
	}
	const uint8_t *body = s->payload - hlen;
	uint64_t total = (uint64_t)hlen + s->m.slice_size;
	unsigned long long xfer = XXH64(s->m.slice_cksum, strlen(s->m.slice_cksum), (uint64_t)ft_now_ns()) ^
				  ((unsigned long long)getpid() << 32) ^ atomic_fetch_add(&send_counter, 1);

	memcpy(s->payload - hlen, hdr, (size_t)hlen);
	/* the public port, streamed in there (ec_push.c); an https one through its Unix socket, else the control port */
	long status = 0;
	char msg[200];
	int pushed = ec_push_slice(s->node->pub, s->names, xfer, body, (size_t)hlen, s->payload, s->m.slice_size,
				   EC_TIMEOUT_MS, &status, msg, sizeof(msg));
	if (pushed != 1) {
		if (pushed != 0) {
			snprintf(s->err, sizeof(s->err), "target %s did not store slice %d: %s", s->node->id, s->m.idx,
				 msg);
			return;
		}
		if (status == 200) {
			s->rc = 0;
			return;
		}
		if (status != 404) {
			snprintf(s->err, sizeof(s->err), "target %s did not store slice %d: HTTP %ld %s", s->node->id,
				 s->m.idx, status, msg);
			return;
		}
		/* a holder of an older release (no such route on its public port): the control port, as before */
		ft_debug("ec: target %s has no public slice PUT (%s): slice %d by the control port", s->node->id, msg,
			 s->m.idx);
	}
	for (uint64_t off = 0; off < total;) {
		size_t len = total - off < EC_XFER_CHUNK ? (size_t)(total - off) : EC_XFER_CHUNK;
		long status = 0;
		json_t *resp = NULL;
		snprintf(url, sizeof(url), "%s/v1/ec/slice?%s&xfer=%016llx&off=%" PRIu64 "&total=%" PRIu64,
			 s->node->url, s->names, xfer, off, total);
		if (ft_ec_xfer_post(url, body + off, len, EC_TIMEOUT_MS, &status, &resp, s->err, sizeof(s->err)) != 0)
			return;
		if (status != 200) {
			const char *msg = json_string_value(json_object_get(resp, "message"));
			snprintf(s->err, sizeof(s->err), "target %s did not store slice %d: HTTP %ld %s", s->node->id,
				 s->m.idx, status, msg ? msg : "");
			json_decref(resp);
			return;
		}
		json_decref(resp);
		off += len;
	}
	s->rc = 0;
}

int ec_send_mem(ft_fanout_t *fanout, const ec_node_t *holders, const ft_ec_meta_t *base, int fd, char *err, size_t cap)
{
	int d = base->data, n = base->data + base->parity, rc = -1;
	uint64_t s = base->slice_size;
	size_t stride = FT_EC_HDR_MAX + (size_t)((s + 63) & ~(uint64_t)63); /* payloads 64-byte aligned */
	char ck[FT_EC_MAX_SLICES][FT_CKSUM_HEX_MAX];
	uint8_t *slices[FT_EC_MAX_SLICES];
	char *esc = ft_pct_encode_dup(base->obj, strlen(base->obj), 0), *names = NULL;
	ec_post_t *posts = calloc((size_t)n, sizeof(*posts));
	ec_buf_t b = {0};

	if (esc != NULL && asprintf(&names, "provider=%s&bucket=%s&obj=%s", base->provider, base->bucket, esc) < 0)
		names = NULL;
	if (names != NULL && posts != NULL)
		ec_buf_get(&b, stride * (size_t)n);
	if (b.p == NULL) {
		snprintf(err, cap, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		slices[i] = b.p + (size_t)i * stride + FT_EC_HDR_MAX;
	if (ft_ec_encode_mem(fd, base->lom.size, d, base->parity, slices, ck, err, cap) != 0)
		goto out;
	for (int i = 0; i < n; i++) {
		posts[i].node = &holders[i];
		posts[i].names = names;
		posts[i].m = *base;
		posts[i].m.idx = i;
		memcpy(posts[i].m.slice_cksum, ck[i], sizeof(posts[i].m.slice_cksum));
		posts[i].payload = slices[i];
	}
	ft_fanout_run(fanout, ec_post_one, posts, n);
	rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		if (posts[i].rc != 0) {
			snprintf(err, cap, "%s", posts[i].err);
			rc = -1;
		}
	}
out:
	if (b.p != NULL)
		ec_buf_put(&b);
	free(posts);
	free(names);
	free(esc);
	return rc;
}
