/* SPDX-License-Identifier: Apache-2.0 */
/* ft-loader engine: event-loop threads on epoll, each driving its workers over pooled keep-alive connections. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY /* XXH64_state_t by value: no allocation per request */
#include <xxhash.h>

#include "base/cksum.h"
#include "base/codec.h"
#include "base/redact.h"
#include "loader.h"

/*
 * DESIGN
 * A loop thread owns an epoll set, a read buffer, its share of the workers, a pool of idle
 * keep-alive connections per host, and its stats. A worker is one request in flight at a time
 * (-numworkers of them in all): it asks the job for a task, routes it to a host, takes an idle
 * connection to that host (or opens one), writes the head and body, parses the response as it
 * arrives, follows redirects by re-sending to the Location, records the result, and starts over.
 * Nothing crosses threads except the job's atomics, the object list and the stats mutex.
 *
 * Connections are level-triggered for input and get EPOLLOUT only while a write would block, so
 * a GET costs one write and usually one read. Nothing is allocated per request: connection
 * structs come from a free list, the request head is written into the worker, bodies are read into
 * the loop's buffer and dropped (or hashed with -verifyhash, with a hash state kept in the worker).
 * With -get-batchsize a worker's request is a GetBatch (batch.c): a POST of a JSON body built in
 * the worker's batch state, whose TAR answer is walked as it arrives, the body re-sent on a 307.
 *
 * An https host's connections speak TLS (tls.c): after connect a worker is W_HANDSHAKE until
 * OpenSSL says the handshake is done; then reads and writes go through SSL_read/SSL_write, whose
 * WANT_READ/WANT_WRITE become EPOLLIN (always registered: level-triggered) and EPOLLOUT. A read drains
 * OpenSSL and the socket into the loop's buffer, and is repeated while OpenSSL still holds bytes
 * (no readiness would announce them); a connection holding any goes back to no pool. A write that
 * blocked is repeated with the same buffer and length, as OpenSSL requires. Plain connections run
 * the same code as before (one writev, one read), the TLS branch on a NULL test.
 *
 * A connection closed during an epoll batch may still have events later in the same batch: it is
 * marked (fd = -1) and parked on a graveyard list that is recycled only after the batch. Workers
 * whose request ended are queued on a ready list that the loop drains after the batch, so a run of
 * immediate failures (connection refused) never recurses.
 */

#define RBUF_SIZE (256 * 1024)
#define MAX_EVENTS 256
#define TICK_MS 50
#define CONTINUE_WAIT_NS 1000000000ll /* send the body anyway if no 100 Continue came by then */
#define MAX_MSGS 8
#define MSG_MAX 512

typedef struct loop loop_t;
typedef struct worker worker_t;

typedef struct conn {
	int fd;
	int host;
	bool connecting;
	bool reused;           /* served a response before: a server may have closed it meanwhile */
	bool want_out;         /* EPOLLOUT registered */
	bool handshaking;      /* TLS: the handshake is not done */
	bool write_wants_read; /* TLS: a blocked write waits for input */
	bool read_wants_write; /* TLS: a blocked read waits for output room */
	ld_ssl_t *ssl;         /* TLS state of an https host's connection; NULL for plain HTTP */
	worker_t *w;           /* NULL while idle in the pool */
	struct conn *next, *prev;
} conn_t;

typedef enum { W_IDLE = 0, W_READY, W_CONNECTING, W_HANDSHAKE, W_SENDING, W_CONTINUE, W_RECEIVING } wphase_t;

struct worker {
	loop_t *L;
	wphase_t phase;
	conn_t *c;
	ld_task_t task;
	int host;
	const char *name; /* the object's own name (borrowed from the list), or name_buf */
	size_t name_len;
	char name_buf[LD_NAME_MAX + 1]; /* a generated name */
	char path[LD_PATH_MAX + 1];
	char head[LD_REQ_MAX];
	size_t head_len, head_off;
	uint64_t body_off; /* PUT body bytes sent on this hop */
	bool expect;       /* body held back until 100 Continue (or a timeout) */
	bool fresh;        /* take a new connection, not a pooled one */
	bool retried;
	int redirects;
	int64_t start_ns, continue_since;
	ld_resp_t resp;
	/* -verifyhash */
	bool verify, hash_started, use_other;
	XXH64_state_t xx;
	ft_cksum_t other; /* the bucket's checksum when it is not xxhash (md5, xxh3, crc32c, sha256, sha512) */
	uint64_t put_hash;
	ld_batch_t *batch; /* -get-batchsize: this worker's batch state; NULL otherwise */
	worker_t *next_ready;
};

struct loop {
	ld_engine_t *E;
	pthread_t tid;
	bool started;
	int ep;
	worker_t *workers;
	int nworkers;
	int active; /* workers not idle */
	conn_t *idle[LD_MAX_HOSTS];
	conn_t *free_conns;
	conn_t *graveyard;
	worker_t *ready_head, *ready_tail;
	char *rbuf;
	uint64_t rng;
	int64_t now;
	int64_t last_sweep;
	pthread_mutex_t mu; /* guards stats and msgs */
	ld_opstats_t stats[LD_NOPS];
	char msgs[MAX_MSGS][MSG_MAX];
	int nmsgs;
	uint64_t dropped_msgs;
};

struct ld_engine {
	ld_job_t *job;
	const ld_opts_t *o;
	loop_t *loops;
	int nloops;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int running;
};

int64_t ld_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- stats and messages ---- */
static void add_msg(loop_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_msg(loop_t *L, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&L->mu);
	if (L->nmsgs < MAX_MSGS) {
		va_start(ap, fmt);
		vsnprintf(L->msgs[L->nmsgs++], sizeof(L->msgs[0]), fmt, ap);
		va_end(ap);
	} else {
		L->dropped_msgs++;
	}
	pthread_mutex_unlock(&L->mu);
}

static void record(loop_t *L, ld_op_t op, bool ok, uint64_t bytes, uint64_t items, int64_t latency_ns)
{
	ld_opstats_t *s = &L->stats[op];

	pthread_mutex_lock(&L->mu);
	s->count++;
	if (ok) {
		s->bytes += bytes;
		s->items += items;
	} else {
		s->errors++;
	}
	ft_hist_record(&s->lat, latency_ns > 0 ? (uint64_t)latency_ns : 0);
	pthread_mutex_unlock(&L->mu);
}

/* ---- connections ---- */
static void set_out(loop_t *L, conn_t *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};

	if (c->want_out == on)
		return;
	c->want_out = on;
	epoll_ctl(L->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void pool_unlink(loop_t *L, conn_t *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		L->idle[c->host] = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void conn_close(loop_t *L, conn_t *c)
{
	if (c->fd < 0)
		return;
	if (c->ssl != NULL) {
		ld_tls_close(c->ssl);
		c->ssl = NULL;
	}
	close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->w = NULL;
	c->next = L->graveyard;
	L->graveyard = c;
}

static void pool_put(loop_t *L, conn_t *c)
{
	c->w = NULL;
	c->reused = true;
	c->prev = NULL;
	c->next = L->idle[c->host];
	if (c->next != NULL)
		c->next->prev = c;
	L->idle[c->host] = c;
}

/*
 * Opens a non-blocking connection to host (connect in progress or done; for an https host with its
 * TLS handshake still to do). NULL on error, err saying why.
 */
static conn_t *conn_open(loop_t *L, int host, char *err, size_t errlen)
{
	const ld_host_t *h = ld_host_at(host);
	conn_t *c = L->free_conns;
	int one = 1, fd;
	struct epoll_event ev;

	fd = socket(h->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "connect to %s: %s", h->authority, strerror(errno));
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (c != NULL) {
		L->free_conns = c->next;
	} else if ((c = malloc(sizeof(*c))) == NULL) {
		close(fd);
		snprintf(err, errlen, "connect to %s: out of memory", h->authority);
		return NULL;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->host = host;
	if (h->tls) {
		c->ssl = ld_tls_new(fd, h, err, errlen);
		if (c->ssl == NULL)
			goto fail_tls;
		c->handshaking = true;
	}
	if (connect(fd, (const struct sockaddr *)&h->addr, h->addrlen) != 0) {
		if (errno != EINPROGRESS)
			goto fail;
		c->connecting = true;
	}
	c->want_out = c->connecting;
	ev.events = EPOLLIN | (c->want_out ? EPOLLOUT : 0);
	ev.data.ptr = c;
	if (epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		goto fail;
	return c;
fail:
	snprintf(err, errlen, "connect to %s: %s", h->authority, strerror(errno));
fail_tls:
	if (c->ssl != NULL)
		ld_tls_close(c->ssl);
	c->ssl = NULL;
	close(fd);
	c->fd = -1;
	c->next = L->free_conns;
	L->free_conns = c;
	return NULL;
}

/* ---- worker life cycle ---- */
static void make_ready(loop_t *L, worker_t *w)
{
	w->phase = W_READY;
	w->next_ready = NULL;
	if (L->ready_tail != NULL)
		L->ready_tail->next_ready = w;
	else
		L->ready_head = w;
	L->ready_tail = w;
}

/* Ends the current request: records it and queues the worker for its next task. */
static void finish(worker_t *w, bool ok, uint64_t bytes)
{
	loop_t *L = w->L;
	uint64_t items = ok && w->task.op == LD_GETBATCH ? ld_batch_members(w->batch) : 0;

	record(L, w->task.op, ok, bytes, items, ld_mono_ns() - w->start_ns);
	make_ready(L, w);
}

static const char *task_label(worker_t *w)
{
	return ld_op_name(w->task.op);
}

/* What the request is about, for messages: the object's name, or the batch's items. */
static const char *what(worker_t *w)
{
	return w->task.op == LD_GETBATCH ? ld_batch_label(w->batch) : w->name;
}

/* Fails the request, closing its connection. */
static void fail(worker_t *w, const char *why)
{
	add_msg(w->L, "%s %s: %s", task_label(w), what(w), why);
	if (w->c != NULL) {
		conn_close(w->L, w->c);
		w->c = NULL;
	}
	finish(w, false, 0);
}

static void send_more(worker_t *w);
static void handshake(worker_t *w);

static bool is_put(const worker_t *w)
{
	return w->task.op == LD_PUT;
}

/* Whether the request carries a body (a PUT's payload, a batch's JSON; a PUT's may be empty). */
static bool has_body(const worker_t *w)
{
	return is_put(w) || w->task.op == LD_GETBATCH;
}

static uint64_t body_len(const worker_t *w)
{
	size_t n = 0;

	if (is_put(w))
		return w->task.size;
	if (w->task.op == LD_GETBATCH)
		ld_batch_body(w->batch, &n);
	return n;
}

/* Starts one hop (the first request, or a redirect, or a retry) of the worker's task. */
static void begin_hop(worker_t *w)
{
	loop_t *L = w->L;
	const ld_opts_t *o = L->E->o;
	static const char *const methods[LD_NOPS] = {
		[LD_GET] = "GET",
		[LD_PUT] = "PUT",
		[LD_DEL] = "DELETE",
		[LD_GETBATCH] = "POST",
	};
	ld_buf_t b = {w->head, 0, sizeof(w->head), false};
	ld_reqspec_t rs = {
		.method = methods[w->task.op],
		.authority = ld_host_at(w->host)->authority,
		.path = w->path,
		.content_length = has_body(w) ? (int64_t)body_len(w) : -1,
		.range = w->task.op == LD_GET && (o->readoff > 0 || o->readlen > 0),
		.range_off = o->readoff,
		.range_len = o->readlen,
		/* the proxy answers a PUT with a 307 before any body: do not send it there twice (it reads a
		 * batch's body to plan it, so that one is sent at once) */
		.expect_continue = is_put(w) && o->api == LD_API_NATIVE && !o->direct && w->redirects == 0,
		.s3_sign = o->api == LD_API_S3,
	};
	conn_t *c = NULL;
	char why[LD_AUTH_MAX + 512];

	if (ld_req_write(&b, &rs) != 0) {
		fail(w, "request head too long (or signing failed)");
		return;
	}
	w->head_len = b.len;
	w->head_off = 0;
	w->body_off = 0;
	w->expect = rs.expect_continue;
	ft_cksum_abort(&w->other); /* a body cut short left it running */
	w->hash_started = false;
	ld_resp_reset(&w->resp, false);
	if (w->task.op == LD_GETBATCH)
		ld_batch_answer_reset(w->batch);
	if (!w->fresh && (c = L->idle[w->host]) != NULL)
		pool_unlink(L, c);
	if (c == NULL && (c = conn_open(L, w->host, why, sizeof(why))) == NULL) {
		fail(w, why);
		return;
	}
	w->fresh = false;
	c->w = w;
	w->c = c;
	if (c->connecting) {
		w->phase = W_CONNECTING;
		return;
	}
	if (c->handshaking) {
		handshake(w);
		return;
	}
	send_more(w);
}

/* Fills iov with the unsent head and body; returns the count. */
static int unsent(worker_t *w, struct iovec *iov)
{
	const ld_job_t *j = w->L->E->job;
	int n = 0;

	if (w->head_off < w->head_len) {
		iov[n].iov_base = w->head + w->head_off;
		iov[n++].iov_len = w->head_len - w->head_off;
	}
	if (w->expect)
		return n;
	if (w->task.op == LD_GETBATCH) {
		size_t len;
		const char *body = ld_batch_body(w->batch, &len);
		if (w->body_off < len) {
			iov[n].iov_base = (void *)(body + w->body_off);
			iov[n++].iov_len = len - w->body_off;
		}
		return n;
	}
	if (!is_put(w))
		return n;
	uint64_t left = w->task.size - w->body_off;
	uint64_t pos = (w->task.payload_off + w->body_off) % j->payload_len;
	for (int k = 0; k < 2 && left > 0; k++) {
		uint64_t seg = j->payload_len - pos < left ? j->payload_len - pos : left;
		iov[n].iov_base = (void *)(j->payload + pos);
		iov[n++].iov_len = seg;
		left -= seg;
		pos = 0;
	}
	return n;
}

static void advance(worker_t *w, size_t n)
{
	size_t h = w->head_len - w->head_off;

	if (h > 0) {
		size_t k = n < h ? n : h;
		w->head_off += k;
		n -= k;
	}
	w->body_off += n;
}

static bool retry_stale(worker_t *w);

/*
 * send_more over TLS: SSL_write of each unsent piece. Returns true when all is out; false when it
 * must wait (EPOLLOUT or EPOLLIN as OpenSSL asked) or the request failed.
 */
static bool send_tls(worker_t *w)
{
	loop_t *L = w->L;
	conn_t *c = w->c;
	struct iovec iov[3];
	char err[LD_AUTH_MAX + 512];

	c->write_wants_read = false;
	while (unsent(w, iov) > 0) {
		ssize_t k =
			ld_tls_write(c->ssl, iov[0].iov_base, iov[0].iov_len, ld_host_at(c->host), err, sizeof(err));
		if (k > 0) {
			advance(w, (size_t)k);
			continue;
		}
		if (k == -LD_TLS_WANT_WRITE) {
			set_out(L, c, true);
			return false;
		}
		if (k == -LD_TLS_WANT_READ) {
			c->write_wants_read = true; /* EPOLLIN is always registered */
			set_out(L, c, false);
			return false;
		}
		if (retry_stale(w))
			return false;
		fail(w, k == -LD_TLS_CLOSED ? "send: connection closed" : err);
		return false;
	}
	return true;
}

/* Writes what is unsent; moves on to waiting for the response when all is out. */
static void send_more(worker_t *w)
{
	loop_t *L = w->L;
	conn_t *c = w->c;
	struct iovec iov[3];
	int n;

	w->phase = W_SENDING;
	if (c->ssl != NULL) {
		if (!send_tls(w))
			return;
		goto sent;
	}
	while ((n = unsent(w, iov)) > 0) {
		ssize_t k = writev(c->fd, iov, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				set_out(L, c, true);
				return;
			}
			if (retry_stale(w))
				return;
			char why[128];
			snprintf(why, sizeof(why), "send: %s", strerror(errno));
			fail(w, why);
			return;
		}
		advance(w, (size_t)k);
	}
sent:
	set_out(L, c, c->read_wants_write);
	if (w->expect) {
		w->phase = W_CONTINUE;
		w->continue_since = L->now;
	} else {
		w->phase = W_RECEIVING;
	}
}

/*
 * A reused connection that fails before any response byte was most likely closed by the server
 * while idle: the request is sent once more on a new connection.
 */
static bool retry_stale(worker_t *w)
{
	conn_t *c = w->c;

	if (c == NULL || !c->reused || w->retried || w->resp.state != LD_RESP_HEAD || w->resp.hlen != 0)
		return false;
	conn_close(w->L, c);
	w->c = NULL;
	w->retried = true;
	w->fresh = true;
	begin_hop(w);
	return true;
}

static void hash_body(void *ctx, const char *p, size_t n)
{
	worker_t *w = ctx;

	if (!w->hash_started) {
		/* first body bytes: the head is known, so is the bucket's checksum type */
		w->hash_started = true;
		XXH64_reset(&w->xx, 0);
		ft_cksum_type_t t;
		w->use_other = ft_cksum_parse(w->resp.cksum_type, &t) == 0 && t != FT_CKSUM_NONE &&
			       t != FT_CKSUM_XXHASH && ft_cksum_init(&w->other, t) == 0;
	}
	XXH64_update(&w->xx, p, n);
	if (w->use_other)
		ft_cksum_update(&w->other, p, n);
}

/* GetBatch answer bytes: walked as TAR (a 200), or kept for the message (an error). */
static void batch_body(void *ctx, const char *p, size_t n)
{
	worker_t *w = ctx;

	ld_batch_answer_feed(w->batch, w->resp.status, p, n);
}

static void xx_hex(uint64_t h, char out[17])
{
	XXH64_canonical_t c;

	XXH64_canonicalFromHash(&c, h);
	ft_hex_encode(c.digest, sizeof(c.digest), out);
}

/* -verifyhash of a whole-object GET body. Returns NULL when it matches, else why. */
static const char *verify_get(worker_t *w, char *why, size_t cap)
{
	char got[FT_CKSUM_HEX_MAX] = "";
	uint64_t h;

	if (!w->hash_started)
		hash_body(w, "", 0); /* empty body */
	h = XXH64_digest(&w->xx);
	if (w->use_other)
		ft_cksum_final(&w->other, got);
	else
		xx_hex(h, got);
	if ((w->use_other || strcmp(w->resp.cksum_type, "xxhash") == 0) && w->resp.cksum_value[0] &&
	    strcasecmp(got, w->resp.cksum_value) != 0) {
		snprintf(why, cap, "body hash %s != Ais-Checksum-Value %s", got, w->resp.cksum_value);
		return why;
	}
	if (w->task.obj != NULL && w->task.obj->has_hash && h != w->task.obj->hash) {
		char want[17];
		xx_hex(w->task.obj->hash, want);
		xx_hex(h, got);
		snprintf(why, cap, "body hash %s != %s recorded at PUT", got, want);
		return why;
	}
	return NULL;
}

/* Follows a redirect to Location. Returns true when a new hop started (or the request failed). */
static bool follow(worker_t *w)
{
	const char *auth, *path;
	size_t alen;
	char err[256];
	int host = w->host;
	bool tls;

	if (ld_url_split(w->resp.location, &auth, &alen, &path, &tls) != 0) {
		char shown[FT_REDACT_URL_MAX]; /* a Location carries its signature (ft_sig) in the query */
		snprintf(err, sizeof(err), "HTTP %d with unusable Location \"%.100s\"", w->resp.status,
			 ft_redact_url(w->resp.location, shown, sizeof(shown)));
		fail(w, err);
		return true;
	}
	if (auth != NULL && (host = ld_host_get(auth, alen, tls, err, sizeof(err))) < 0) {
		fail(w, err);
		return true;
	}
	if (strlen(path) > LD_PATH_MAX) {
		fail(w, "redirect path too long");
		return true;
	}
	strcpy(w->path, path);
	w->host = host;
	w->redirects++;
	begin_hop(w);
	return true;
}

/* The response is complete; keep tells whether the connection may serve another request. */
static void complete(worker_t *w, bool keep)
{
	loop_t *L = w->L;
	const ld_opts_t *o = L->E->o;
	ld_resp_t *r = &w->resp;
	conn_t *c = w->c;
	char why[LD_AUTH_MAX + 128];
	int st = r->status;
	bool ok;

	w->c = NULL;
	if (keep)
		pool_put(L, c);
	else
		conn_close(L, c);
	if ((st == 301 || st == 302 || st == 303 || st == 307 || st == 308) && r->location[0]) {
		if (w->redirects >= LD_MAX_REDIRECTS) {
			fail(w, "too many redirects");
			return;
		}
		follow(w);
		return;
	}
	switch (w->task.op) {
	case LD_GET:
		ok = st == 200 || st == 206;
		break;
	case LD_PUT:
		ok = st == 200 || st == 201 || st == 204;
		break;
	case LD_GETBATCH:
		ok = st == 200;
		break;
	case LD_DEL:
	default:
		ok = st == 200 || st == 204 || st == 404; /* cleanup: a PUT that never landed is fine */
		break;
	}
	if (!ok) {
		const char *text = w->task.op == LD_GETBATCH ? ld_batch_answer_text(w->batch) : "";
		add_msg(L, "%s %s: HTTP %d%s%s", task_label(w), what(w), st, text[0] ? ": " : "", text);
		finish(w, false, 0);
		return;
	}
	if (w->task.op == LD_GETBATCH) {
		const char *bad = ld_batch_answer_end(w->batch);
		if (bad != NULL) {
			add_msg(L, "GETBATCH %s: %s", what(w), bad);
			finish(w, false, 0);
			return;
		}
	}
	if (w->task.op == LD_GET && w->verify) {
		const char *bad = verify_get(w, why, sizeof(why));
		if (bad != NULL) {
			add_msg(L, "GET %s: %s", w->name, bad);
			finish(w, false, 0);
			return;
		}
	}
	if (w->task.op == LD_PUT) {
		if (o->verifyhash && strcmp(r->cksum_type, "xxhash") == 0 && r->cksum_value[0]) {
			char mine[17];
			xx_hex(w->put_hash, mine);
			if (strcasecmp(mine, r->cksum_value) != 0) {
				add_msg(L, "PUT %s: stored checksum %s != sent %s", w->name, r->cksum_value, mine);
				finish(w, false, 0);
				return;
			}
		}
		if (o->api != LD_API_URLS &&
		    ld_objs_add_put(w->task.seq, w->task.size, w->put_hash, o->verifyhash) != 0)
			add_msg(L, "PUT %s: object list: out of memory", w->name);
		finish(w, true, w->task.size);
		return;
	}
	finish(w, true, w->task.op == LD_GET || w->task.op == LD_GETBATCH ? r->body_bytes : 0);
}

/* Hashes the PUT payload the worker is about to send. */
static void hash_payload(worker_t *w)
{
	const ld_job_t *j = w->L->E->job;
	uint64_t left = w->task.size, pos = w->task.payload_off;

	XXH64_reset(&w->xx, 0);
	while (left > 0) {
		uint64_t seg = j->payload_len - pos < left ? j->payload_len - pos : left;
		XXH64_update(&w->xx, j->payload + pos, seg);
		left -= seg;
		pos = 0;
	}
	w->put_hash = XXH64_digest(&w->xx);
}

/* The worker has no more tasks. */
static void go_idle(worker_t *w)
{
	w->phase = W_IDLE;
	w->L->active--;
}

/* A new request begins now (L->now, read just before by the caller). */
static void begin_request(worker_t *w)
{
	w->start_ns = w->L->now;
	w->redirects = 0;
	w->retried = false;
	w->fresh = false;
}

/* The worker's next batch of GETs (-get-batchsize): one POST /v1/batch. */
static void start_batch(worker_t *w)
{
	loop_t *L = w->L;
	char err[256];
	int n = ld_batch_next(w->batch, L->E->job, L->now, &L->rng, &w->host, err, sizeof(err));

	if (n == 0) {
		go_idle(w);
		return;
	}
	w->task.op = LD_GETBATCH;
	w->task.obj = NULL;
	w->verify = false;
	begin_request(w);
	strcpy(w->path, "/v1/batch");
	if (n < 0) {
		fail(w, err);
		return;
	}
	begin_hop(w);
}

/* Takes the worker's next task from the job and starts it; an idle worker stays idle. */
static void start_task(worker_t *w)
{
	loop_t *L = w->L;
	const ld_opts_t *o = L->E->o;
	ld_buf_t pb = {w->path, 0, LD_PATH_MAX, false};
	char err[256];

	if (w->batch != NULL) {
		start_batch(w);
		return;
	}
	if (!ld_job_next(L->E->job, L->now, &L->rng, &w->task)) {
		go_idle(w);
		return;
	}
	begin_request(w);
	if ((w->task.op == LD_GET || (o->api == LD_API_URLS && w->task.obj != NULL)) && w->task.obj->name != NULL) {
		w->name = w->task.obj->name; /* no copy per request */
		w->name_len = strlen(w->name);
	} else if (w->task.op == LD_GET || (o->api == LD_API_URLS && w->task.obj != NULL)) {
		w->name_len = ld_obj_name(w->task.obj, w->name_buf, sizeof(w->name_buf));
		w->name = w->name_buf;
	} else {
		w->name_len = ld_seq_name(w->task.seq, w->name_buf, sizeof(w->name_buf));
		w->name = w->name_buf;
	}
	w->verify = o->verifyhash && w->task.op == LD_GET && o->readoff == 0 && o->readlen == 0;
	if (ld_route(o, w->task.obj, w->name, w->name_len, &w->host, &pb, err, sizeof(err)) != 0) {
		fail(w, err);
		return;
	}
	if (w->task.op == LD_PUT && o->verifyhash)
		hash_payload(w);
	begin_hop(w);
}

/* ---- events ---- */
static void on_connected(worker_t *w)
{
	conn_t *c = w->c;
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		err = errno;
	if (err != 0) {
		char why[LD_AUTH_MAX + 128];
		snprintf(why, sizeof(why), "connect to %s: %s", ld_host_at(c->host)->authority, strerror(err));
		fail(w, why);
		return;
	}
	c->connecting = false;
	if (c->handshaking) {
		handshake(w);
		return;
	}
	send_more(w);
}

/* One step of a TLS handshake; the request is sent once it is done. */
static void handshake(worker_t *w)
{
	conn_t *c = w->c;
	char err[LD_AUTH_MAX + 512];
	int rc = ld_tls_handshake(c->ssl, ld_host_at(c->host), err, sizeof(err));

	w->phase = W_HANDSHAKE;
	if (rc == LD_TLS_OK) {
		c->handshaking = false;
		send_more(w);
	} else if (rc == -LD_TLS_WANT_READ || rc == -LD_TLS_WANT_WRITE) {
		set_out(w->L, c, rc == -LD_TLS_WANT_WRITE);
	} else {
		if (rc == -LD_TLS_CLOSED)
			snprintf(err, sizeof(err), "TLS handshake with %s: connection closed",
				 ld_host_at(c->host)->authority);
		fail(w, err);
	}
}

/*
 * Reads from a TLS connection into the loop's buffer until it is full or OpenSSL and the socket are
 * drained. Returns bytes, 0 at the end of the stream, -1 with errno EAGAIN (nothing yet), or -2 with
 * err (a TLS error).
 */
static ssize_t recv_tls(loop_t *L, conn_t *c, char *err, size_t errlen)
{
	size_t got = 0;

	c->read_wants_write = false;
	while (got < RBUF_SIZE) {
		ssize_t k = ld_tls_read(c->ssl, L->rbuf + got, RBUF_SIZE - got, ld_host_at(c->host), err, errlen);
		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (got > 0)
			break; /* what stopped it comes again on the next read */
		if (k == -LD_TLS_CLOSED)
			return 0;
		if (k == -LD_TLS_WANT_WRITE) {
			c->read_wants_write = true;
			set_out(L, c, true);
		}
		if (k == -LD_TLS_WANT_READ || k == -LD_TLS_WANT_WRITE) {
			errno = EAGAIN;
			return -1;
		}
		return -2;
	}
	return (ssize_t)got;
}

/* Reads what arrived and feeds it to the response parser. */
static void read_once(worker_t *w)
{
	loop_t *L = w->L;
	conn_t *c = w->c;
	char err[LD_AUTH_MAX + 512];
	ssize_t n = c->ssl == NULL ? read(c->fd, L->rbuf, RBUF_SIZE) : recv_tls(L, c, err, sizeof(err)), off = 0;
	ld_body_fn body_fn = w->verify ? hash_body : w->task.op == LD_GETBATCH ? batch_body : NULL;
	const char *bad;

	if (n == -2) {
		if (!retry_stale(w))
			fail(w, err);
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		if (retry_stale(w))
			return;
		snprintf(err, sizeof(err), "receive: %s", strerror(errno));
		fail(w, err);
		return;
	}
	if (n == 0) {
		if (ld_resp_eof(&w->resp)) {
			complete(w, false);
			return;
		}
		if (retry_stale(w))
			return;
		fail(w, w->resp.state == LD_RESP_HEAD ? "connection closed before a response"
						      : "connection closed mid-body");
		return;
	}
	while (off < n) {
		ssize_t k = ld_resp_feed(&w->resp, L->rbuf + off, (size_t)(n - off), body_fn, w, err, sizeof(err));
		if (k < 0) {
			fail(w, err);
			return;
		}
		off += k;
		if (w->task.op == LD_GETBATCH && (bad = ld_batch_answer_error(w->batch)) != NULL) {
			fail(w, bad); /* a TAR gone wrong: the rest of it is not worth reading */
			return;
		}
		if (w->resp.state != LD_RESP_DONE)
			continue;
		if (w->resp.status >= 200) {
			bool body_sent = !has_body(w) || (!w->expect && w->body_off == body_len(w));
			bool drained = off == n && (c->ssl == NULL || !ld_tls_pending(c->ssl));
			complete(w, w->resp.keep_alive && drained && body_sent && w->phase != W_SENDING);
			return;
		}
		/* interim 1xx: 100 Continue releases a held-back body */
		int interim = w->resp.status;
		ld_resp_reset(&w->resp, false);
		if (interim == 100 && w->phase == W_CONTINUE) {
			w->expect = false;
			send_more(w);
			if (w->c != c)
				return; /* failed meanwhile */
		}
	}
}

/* Input on the worker's connection; over TLS repeated while OpenSSL holds bytes no event would announce. */
static void on_readable(worker_t *w)
{
	conn_t *c = w->c;

	do
		read_once(w);
	while (w->c == c && c->ssl != NULL && ld_tls_pending(c->ssl));
}

static void on_event(loop_t *L, conn_t *c, uint32_t events)
{
	worker_t *w = c->w;

	if (c->fd < 0)
		return;  /* closed earlier in this batch */
	if (w == NULL) { /* idle in the pool: the server closed it (or sent junk) */
		pool_unlink(L, c);
		conn_close(L, c);
		return;
	}
	if (w->phase == W_CONNECTING) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			on_connected(w);
		return;
	}
	if (w->phase == W_HANDSHAKE) {
		handshake(w);
		return;
	}
	if (w->phase == W_SENDING &&
	    ((events & EPOLLOUT) || (c->write_wants_read && (events & (EPOLLIN | EPOLLERR | EPOLLHUP))))) {
		send_more(w);
		if (w->c != c)
			return;
	}
	if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || (c->read_wants_write && (events & EPOLLOUT)))
		on_readable(w);
}

/* Timeouts of requests in flight, and bodies held back for a 100 Continue that does not come. */
static void sweep(loop_t *L)
{
	int64_t limit = L->E->o->timeout_ns;

	for (int i = 0; i < L->nworkers; i++) {
		worker_t *w = &L->workers[i];
		if (w->phase == W_IDLE || w->phase == W_READY)
			continue;
		if (limit > 0 && L->now - w->start_ns > limit) {
			fail(w, "timed out");
			continue;
		}
		if (w->phase == W_CONTINUE && L->now - w->continue_since > CONTINUE_WAIT_NS) {
			w->expect = false;
			send_more(w);
		}
	}
}

static void recycle(loop_t *L)
{
	while (L->graveyard != NULL) {
		conn_t *c = L->graveyard;
		L->graveyard = c->next;
		c->next = L->free_conns;
		L->free_conns = c;
	}
}

static void drain_ready(loop_t *L)
{
	while (L->ready_head != NULL) {
		worker_t *w = L->ready_head;
		L->ready_head = w->next_ready;
		if (L->ready_head == NULL)
			L->ready_tail = NULL;
		L->now = ld_mono_ns();
		start_task(w);
	}
}

static void close_all(loop_t *L)
{
	for (int i = 0; i < L->nworkers; i++) {
		worker_t *w = &L->workers[i];
		if (w->c != NULL) {
			conn_close(L, w->c);
			w->c = NULL;
		}
	}
	for (int h = 0; h < LD_MAX_HOSTS; h++) {
		while (L->idle[h] != NULL) {
			conn_t *c = L->idle[h];
			pool_unlink(L, c);
			conn_close(L, c);
		}
	}
	recycle(L);
}

/*
 * -sched batch: this thread under SCHED_BATCH, which the scheduler never lets preempt a running
 * thread when it wakes. A loader wakes once per reply or two; with the default policy each wakeup
 * took the CPU from the server it measures when both share the cores (ft-loader at 0.83-0.98x of
 * wrk's rate on nginx, 16 KiB, 2 cores; docs/loader.md). Needs no privilege; a refusal is reported.
 */
static void set_sched(loop_t *L)
{
	struct sched_param p = {.sched_priority = 0};

	if (L->E->o->sched_batch && sched_setscheduler(0, SCHED_BATCH, &p) != 0 && L == &L->E->loops[0])
		fprintf(stderr, "ft-loader: -sched batch: %s; the loop threads keep the default policy\n",
			strerror(errno));
}

static void *loop_main(void *arg)
{
	loop_t *L = arg;
	ld_engine_t *E = L->E;
	struct epoll_event ev[MAX_EVENTS];
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* signals are the main thread's */
	set_sched(L);
	L->now = ld_mono_ns();
	L->last_sweep = L->now;
	L->active = L->nworkers;
	for (int i = 0; i < L->nworkers; i++)
		make_ready(L, &L->workers[i]);
	drain_ready(L);
	while (L->active > 0 && !atomic_load(&E->job->abort)) {
		int n = epoll_wait(L->ep, ev, MAX_EVENTS, TICK_MS);
		L->now = ld_mono_ns();
		for (int i = 0; i < n; i++)
			on_event(L, ev[i].data.ptr, ev[i].events);
		if (L->now - L->last_sweep >= TICK_MS * 1000000ll) {
			L->last_sweep = L->now;
			sweep(L);
		}
		recycle(L);
		drain_ready(L);
	}
	close_all(L);
	pthread_mutex_lock(&E->mu);
	E->running--;
	pthread_cond_broadcast(&E->cond);
	pthread_mutex_unlock(&E->mu);
	return NULL;
}

/* ---- engine API ---- */
static void free_loop(loop_t *L)
{
	if (L->workers != NULL) {
		for (int i = 0; i < L->nworkers; i++) {
			ld_resp_free(&L->workers[i].resp);
			ft_cksum_abort(&L->workers[i].other);
			ld_batch_free(L->workers[i].batch);
		}
	}
	free(L->workers);
	while (L->free_conns != NULL) {
		conn_t *c = L->free_conns;
		L->free_conns = c->next;
		free(c);
	}
	free(L->rbuf);
	if (L->ep >= 0)
		close(L->ep);
	pthread_mutex_destroy(&L->mu);
}

static int init_loop(ld_engine_t *E, loop_t *L, int index, int nworkers)
{
	L->E = E;
	L->ep = epoll_create1(EPOLL_CLOEXEC);
	L->nworkers = nworkers;
	L->workers = calloc((size_t)nworkers, sizeof(worker_t));
	L->rbuf = malloc(RBUF_SIZE);
	L->rng = E->o->seed * 0x9E3779B97F4A7C15ull + (uint64_t)index * 0xBF58476D1CE4E5B9ull + 1;
	pthread_mutex_init(&L->mu, NULL);
	for (int k = 0; k < LD_NOPS; k++)
		ld_opstats_reset(&L->stats[k]);
	if (L->ep < 0 || L->workers == NULL || L->rbuf == NULL)
		return -1;
	for (int i = 0; i < nworkers; i++) {
		L->workers[i].L = L;
		/* GetBatch in the run only (a cleanup DELETEs one name at a time) */
		if (E->o->get_batchsize > 0 && E->job->kind == LD_JOB_RUN &&
		    (L->workers[i].batch = ld_batch_new(E->o)) == NULL)
			return -1;
	}
	return 0;
}

ld_engine_t *ld_engine_start(ld_job_t *j, int nthreads, int nworkers, char *err, size_t errlen)
{
	ld_engine_t *E = calloc(1, sizeof(*E));
	int i;

	if (E == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (nthreads > nworkers)
		nthreads = nworkers;
	E->job = j;
	E->o = j->o;
	E->nloops = nthreads;
	pthread_mutex_init(&E->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&E->cond, &ca);
	pthread_condattr_destroy(&ca);
	E->loops = calloc((size_t)nthreads, sizeof(loop_t));
	if (E->loops == NULL)
		goto fail;
	for (i = 0; i < nthreads; i++) {
		E->loops[i].ep = -1;
		/* workers spread evenly: the first (nworkers % nthreads) loops take one more */
		if (init_loop(E, &E->loops[i], i, nworkers / nthreads + (i < nworkers % nthreads)) != 0)
			goto fail;
	}
	for (i = 0; i < nthreads; i++) {
		pthread_mutex_lock(&E->mu);
		E->running++;
		pthread_mutex_unlock(&E->mu);
		if (pthread_create(&E->loops[i].tid, NULL, loop_main, &E->loops[i]) != 0) {
			pthread_mutex_lock(&E->mu);
			E->running--;
			pthread_mutex_unlock(&E->mu);
			atomic_store(&j->abort, true);
			snprintf(err, errlen, "cannot start a thread");
			ld_engine_free(E);
			return NULL;
		}
		E->loops[i].started = true;
	}
	return E;
fail:
	snprintf(err, errlen, "out of memory (or epoll)");
	ld_engine_free(E);
	return NULL;
}

bool ld_engine_wait(ld_engine_t *E, int64_t timeout_ns)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ns / 1000000000ll;
	ts.tv_nsec += timeout_ns % 1000000000ll;
	if (ts.tv_nsec >= 1000000000l) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000l;
	}
	pthread_mutex_lock(&E->mu);
	while (E->running > 0) {
		if (pthread_cond_timedwait(&E->cond, &E->mu, &ts) == ETIMEDOUT)
			break;
	}
	done = E->running == 0;
	pthread_mutex_unlock(&E->mu);
	return done;
}

void ld_engine_collect(ld_engine_t *E, ld_opstats_t out[LD_NOPS], FILE *errout)
{
	for (int i = 0; i < E->nloops; i++) {
		loop_t *L = &E->loops[i];
		pthread_mutex_lock(&L->mu);
		for (int k = 0; k < LD_NOPS; k++) {
			ld_opstats_merge(&out[k], &L->stats[k]);
			ld_opstats_reset(&L->stats[k]);
		}
		for (int m = 0; m < L->nmsgs && errout != NULL; m++)
			fprintf(errout, "error: %s\n", L->msgs[m]);
		if (L->dropped_msgs > 0 && errout != NULL)
			fprintf(errout, "error: ... and %llu more\n", (unsigned long long)L->dropped_msgs);
		L->nmsgs = 0;
		L->dropped_msgs = 0;
		pthread_mutex_unlock(&L->mu);
	}
}

void ld_engine_free(ld_engine_t *E)
{
	if (E == NULL)
		return;
	for (int i = 0; E->loops != NULL && i < E->nloops; i++) {
		if (E->loops[i].started)
			pthread_join(E->loops[i].tid, NULL);
	}
	for (int i = 0; E->loops != NULL && i < E->nloops; i++)
		free_loop(&E->loops[i]);
	free(E->loops);
	pthread_cond_destroy(&E->cond);
	pthread_mutex_destroy(&E->mu);
	free(E);
}
