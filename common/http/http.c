/* Public-port HTTP/1.1 server on io_uring: loop threads, connections, request bodies, responses, defer. */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/codec.h"
#include "base/log.h"
#include "base/workpool.h"
#include "http/parse.h"

/*
 * DESIGN
 * Each loop thread owns an io_uring, a SO_REUSEPORT listener with a multishot accept, an eventfd
 * read kept armed (wake-ups from other threads), a periodic timeout (the timer sweep), and the
 * connections it accepted. Everything about a connection happens on its loop thread, except that a
 * worker thread may build a response in the request (or ask for the body) and hand the request over
 * through the loop's queue; the loop then sends the response (or reads the body and calls the body
 * callbacks on the loop thread).
 *
 * A connection serves one request at a time: the next pipelined request is parsed only once the
 * previous response is fully sent, so responses are always in order. The request (ft_req_t) is
 * embedded in the connection and copies what it needs out of the read buffer (method, target,
 * headers) into its arena, so the buffer can be reused for the body and the next request.
 *
 * Phases of a connection: HEAD (reading a request head; idle or header timeout), HANDLER (the
 * handler owns the request; the body may be read), SENDING (the response goes out), LINGER (after
 * a close-after-response with unread input: write side shut, input discarded for a while, so the
 * client gets the response instead of a reset).
 *
 * Callbacks into handler code (handler, on_data, on_end, body-all done) only run from the top of
 * the loop (a CQE, the kick list, the queue), never from inside an API call, so an API call never
 * re-enters the handler. Response calls only record the response and kick the connection.
 *
 * OWNERSHIP AND REFERENCES
 * A connection is freed when its reference count drops to zero. References: one while it is open
 * (dropped by conn_close), one per in-flight ring operation (recv, send, poll), one while it sits in
 * the kick list, and one from the start of a request to the end of its response (finish_request).
 * So a request outlives a dropped client until its response call, and the fd number is not reused
 * while the kernel may still complete an operation on it. Closing = shutdown(2) (which completes
 * pending operations) and dropping the open reference; close(2) happens when the count reaches 0.
 *
 * HAND-OVER
 * Whoever holds the request (the loop running the handler, or a worker after ft_req_defer) records
 * what it wants and calls req_notify() with event bits (EV_*). From another thread the bits go into
 * r->xev under the loop's queue lock and the loop takes them at dequeue time, in the same critical
 * section that marks r out of the queue. The response call is the last thing the holder does, so
 * once the loop has taken EV_RESPONDED (r->resp_ready) nobody else touches r and the loop may
 * finish it; the loop never acts on a response it learnt of any other way.
 *
 * BLOCKING STREAMS (ft_req_body_read, ft_resp_stream_*)
 * A worker relays bodies through two rings per request (STREAM_BUF each, taken on first use from
 * the server's bounded free list of rings, malloc'd when it is empty, and given back to the list by
 * finish_request: reused rings have their pages mapped already, so a stream costs no page faults):
 * - body: the loop de-chunks received bytes into b_ring and stops reading the socket (no recv
 *   armed, so no body timeout either) while the ring is full; the worker copies out and, once
 *   STREAM_RESUME bytes are free again, notifies EV_FEED so the loop resumes. So at most the
 *   connection's read buffer plus the ring is buffered per request.
 * - response: the head goes out of r->out, then the worker copies framed bytes (chunk head, data,
 *   CRLF) into s_ring and blocks while it is full; the loop sends from the ring, one send at a
 *   time, and wakes the worker as sends complete. The loop notes when it ran dry (s_idle) so only
 *   then does a write cost a wake-up.
 * - response from a file (ft_resp_stream_sendfile): instead of bytes, the worker queues a range of
 *   a file (sh.f_off, sh.f_len, of the request's own dup of the fd) that the loop sends after the
 *   ring's bytes with sendfile(2) on the non-blocking socket (POLLOUT on the ring when it is full):
 *   no copy through user memory. The queue is always [ring bytes][file range]: the worker adds
 *   ring bytes only while no file range is queued, and extends a range only contiguously, so the
 *   order of the body is the order of the calls. A queued range costs no memory, so it may be
 *   larger (STREAM_FILE_MAX) than the ring.
 * - response from a socket (ft_resp_stream_splice): the same queue, with a pipe in place of the
 *   file: the worker splice(2)s from its socket into the pipe's write end (blocking, at most
 *   STREAM_PIPE bytes in the pipe) and counts them in sh.f_len; the loop splices them from the
 *   read end (sf_fd, with sf_pipe set) to the client like a file range. The bytes stay in kernel
 *   pages all the way: no copy through user memory, and the pipe bounds what one request holds.
 * Ring indices and flags are in r->sh under c->smu (one mutex and condition variable per
 * connection); bytes are copied outside the lock, into free space only the producer writes and out
 * of filled space only the consumer frees. The loop holds smu only for a few assignments, never
 * across a copy or a callback, and never together with the queue lock. A closed connection sets
 * sh.gone and wakes the worker, so blocked calls return -ECONNRESET at once; the loop finishes the
 * request only after the worker's ft_resp_stream_end (the response call).
 */

#define RING_ENTRIES 1024
#define BUF_INITIAL (16 * 1024)
#define BUF_BODY (64 * 1024)
#define ARENA_INLINE 4096
#define ARENA_BLOCK 8192
#define LINGER_MS 2000
#define CQE_BATCH 256

#define DEF_MAX_HEADER_BYTES (32 * 1024)
#define DEF_MAX_HEADERS 100
#define DEF_IDLE_MS 60000
#define DEF_HEADER_MS 20000
#define DEF_BODY_MS 30000
#define DEF_WORKERS 64

#define STREAM_BUF (256 * 1024)      /* each ring of a blocking stream */
#define STREAM_END_RESERVE 8         /* ring bytes writes leave free, for the last chunk "0\r\n\r\n" */
#define STREAM_LOWAT (16 * 1024)     /* a blocked writer waits for this much room: fewer, larger chunks */
#define STREAM_RESUME (64 * 1024)    /* free body-ring bytes at which the loop is asked to read again */
#define CHUNK_HEAD_MAX 20            /* "%zx\r\n" of a size_t, with room to spare */
#define STREAM_FILE_MAX (16u << 20)  /* file bytes queued but unsent before a sendfile caller waits */
#define STREAM_FILE_LOWAT (1u << 20) /* a blocked sendfile caller waits for this much room */
#define STREAM_PIPE (256 * 1024)     /* pipe of a spliced stream: bytes queued before the worker waits */
#define STREAM_POOL_MAX 16           /* free rings kept for reuse (STREAM_BUF each: 4 MiB at most) */

enum { TAG_NONE = 0, TAG_ACCEPT, TAG_EVENT, TAG_TIMER, TAG_RECV, TAG_SEND, TAG_POLL };
#define TAG_MASK 7u

enum { PH_HEAD = 0, PH_HANDLER, PH_SENDING, PH_LINGER };
enum { BODY_NONE = 0, BODY_WANT, BODY_ACTIVE, BODY_DONE, BODY_FAILED };

/* Events handed to the loop by req_notify(). */
enum {
	EV_RESPONDED = 1, /* the response call was made (last thing the holder does) */
	EV_BODY = 2,      /* a body call was made */
	EV_FEED = 4,      /* a stream reader made room: read the body again */
	EV_STREAM = 8,    /* a stream head is ready in r->out */
	EV_SEND = 16,     /* stream bytes were queued while the loop had none to send */
};

/* How a response head frames the body. */
enum {
	FR_LENGTH = 0, /* Content-Length (for a status with a body) */
	FR_CHUNKED,    /* Transfer-Encoding: chunked */
	FR_NONE,       /* no body and no length header (HEAD of unknown length, or no body allowed) */
	FR_CLOSE,      /* body delimited by the close (HTTP/1.0 client, unknown length) */
};

static const char CONTINUE_MSG[] = "HTTP/1.1 100 Continue\r\n\r\n";

typedef struct loop loop_t;
typedef struct conn conn_t;

/* ---- per-request arena ---- */

typedef struct arena_blk {
	struct arena_blk *next;
	size_t cap, used;
	unsigned char data[];
} arena_blk_t;

typedef struct {
	arena_blk_t *blks; /* malloc'd blocks, the one being filled first */
	size_t inl_used;
	_Alignas(16) unsigned char inl[ARENA_INLINE];
} arena_t;

typedef struct hook {
	struct hook *next;
	void (*fn)(void *arg);
	void *arg;
} hook_t;

typedef struct resp_hdr {
	struct resp_hdr *next;
	char *line; /* "Name: value\r\n" */
	size_t len;
} resp_hdr_t;

/* Blocking-stream state shared by the worker and the loop, under c->smu (see DESIGN). */
typedef struct {
	bool gone;   /* the connection is closed: stream calls fail */
	int waiters; /* threads waiting on c->scv */
	/* request body: the loop fills b_ring, the worker drains it */
	size_t b_rd, b_len;
	bool b_eof;    /* the whole body is in the ring */
	bool b_paused; /* the loop stopped reading: ring full */
	int b_err;     /* -errno that ends the body after the ring's bytes */
	/* response: the worker fills s_ring, the loop sends it */
	size_t s_rd, s_len;
	bool s_idle; /* the loop found nothing to send: the next write notifies EV_SEND */
	/* response from a file: after the ring's bytes, [f_off, f_off + f_len) of the request's sf_fd */
	uint64_t f_off, f_len;
} stream_shared_t;

struct ft_req {
	conn_t *c;
	/* request head, all in the arena */
	ft_method_t method;
	const char *method_name;
	char *target;
	const char *query;
	char *path;
	size_t path_len;
	const char **hnames, **hvalues;
	int nhdrs;
	int minor;
	int64_t content_length;
	bool chunked, expect_continue, client_keep_alive;
	/* body */
	int body_state;
	ft_body_data_fn on_data;
	ft_body_end_fn on_end;
	ft_body_all_fn all_done;
	void *body_arg;
	size_t all_max, all_len, all_cap;
	char *all_buf; /* malloc'd, freed by finish_request */
	uint64_t body_left;
	ft_hp_chunked_t chunk;
	/* hand-over (see DESIGN): ev and resp_ready on the loop, xev under the loop's qmu */
	unsigned ev, xev;
	bool resp_ready;
	/* blocking streams: set by the holder before the event that tells the loop; read by the loop after */
	bool body_stream;               /* the body goes to b_ring (ft_req_body_read) */
	unsigned char *b_ring, *s_ring; /* STREAM_BUF each, from stream_buf_take, finish_request gives back */
	bool s_started, s_bad;          /* ft_resp_stream_start called; a write broke the framing */
	int s_frame;                    /* FR_* */
	int s_end_err;                  /* ft_resp_stream_end's err */
	uint64_t s_clen, s_written;
	int sf_fd, sf_src;  /* stream from a file: our dup (finish_request closes it), the caller's fd */
	bool sf_pipe;       /* sf_fd is the read end of the splice pipe (set under smu) */
	int sp_wr;          /* splice pipe's write end: the worker's (finish_request closes it) */
	size_t sp_cap;      /* splice pipe: bytes the worker queues at most */
	bool s_crlf_due;    /* chunked from a file: the chunk's CRLF goes before the next ring bytes */
	bool st_head;       /* loop: the stream is being sent */
	bool sf_failed;     /* loop: a sendfile failed or the file was short: the stream is cut */
	stream_shared_t sh; /* under c->smu */
	/* response */
	bool responded, body_called, close_req, keep_alive; /* the holder's: a response / body call was made */
	resp_hdr_t *rh_head, *rh_tail;
	size_t rh_bytes;
	char *out; /* head (and small body) in the arena */
	size_t out_len;
	int file_fd;
	off_t file_off;
	uint64_t file_left;
	/* defer and hand-over */
	ft_work_t work;
	void (*defer_fn)(ft_req_t *r, void *arg);
	void *defer_arg;
	ft_req_t *qnext;
	bool queued;   /* in the loop's hand-over queue (under qmu) */
	hook_t *hooks; /* newest first */
	arena_t arena; /* must stay last: req_clear() zeroes everything before it */
};

struct conn {
	loop_t *L;
	conn_t *prev, *next; /* the loop's connections */
	conn_t *kick_next;
	bool kicked;
	int fd;
	int refs;
	int phase;
	bool closed;     /* shut down; no new operations */
	bool must_close; /* close after the current response */
	bool linger;     /* unread input may follow: linger before closing */
	bool peer_eof;
	bool recv_inflight, send_inflight, poll_inflight;
	bool interim; /* the send in flight is "100 Continue" */
	bool head_started;
	size_t cont_off;
	char *buf;
	size_t cap, start, end, scanned;
	int64_t idle_since, head_since, body_since, send_since, linger_until;
	size_t send_off;
	char peer[64];
	pthread_mutex_t smu; /* blocking streams of the request (r->sh) */
	pthread_cond_t scv;
	ft_req_t req;
};

struct loop {
	ft_httpd_t *s;
	int idx;
	pthread_t th;
	bool th_started;
	struct io_uring ring;
	int lfd, efd;
	uint64_t efd_val;
	struct __kernel_timespec tick;
	conn_t *conns;
	int nconns;
	conn_t *kick_head, *kick_tail;
	ft_hp_header_t *hdrs; /* parse scratch, max_headers entries */
	pthread_mutex_t qmu;
	ft_req_t *qhead, *qtail;
	bool qsignaled;
	atomic_bool stop_req;
	bool stopping, accept_armed, accept_retry;
	int64_t now;
	int init_rc; /* ring setup result, 1 = pending */
};

struct ft_httpd {
	ft_httpd_opts_t o;
	int port;
	int nloops;
	loop_t *loops;
	ft_workpool_t *pool;
	atomic_bool stopping;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* free stream rings (see BLOCKING STREAMS): a list through their first bytes, under rmu */
	pthread_mutex_t rmu;
	void *ring_free;
	int ring_nfree;
};

static __thread loop_t *tls_loop;

static void head_process(conn_t *c);
static void send_more(conn_t *c);
static void server_error(conn_t *c, int status, const char *msg);
static void stream_gone(conn_t *c);
static void stream_send_more(conn_t *c);
static void stream_on_send(conn_t *c, int res);

/* ---- small helpers ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void oom(void)
{
	ft_error("http: out of memory");
	abort();
}

static uint64_t ud(const void *p, unsigned tag)
{
	return (uint64_t)(uintptr_t)p | tag;
}

static struct io_uring_sqe *get_sqe(loop_t *L)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);

	while (sqe == NULL) {
		io_uring_submit(&L->ring);
		sqe = io_uring_get_sqe(&L->ring);
	}
	return sqe;
}

/* RFC 9110 IMF-fixdate, cached per thread for the current second. */
static const char *http_date(void)
{
	static __thread time_t last;
	static __thread char buf[FT_DATE_HTTP_MAX];
	time_t now = time(NULL);

	if (now != last || buf[0] == 0) {
		ft_date_format_http(now, buf);
		last = now;
	}
	return buf;
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 202:
		return "Accepted";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 303:
		return "See Other";
	case 304:
		return "Not Modified";
	case 307:
		return "Temporary Redirect";
	case 308:
		return "Permanent Redirect";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 415:
		return "Unsupported Media Type";
	case 416:
		return "Range Not Satisfiable";
	case 417:
		return "Expectation Failed";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	case 507:
		return "Insufficient Storage";
	default:
		break;
	}
	if (status < 200)
		return "Informational";
	if (status < 300)
		return "Success";
	if (status < 400)
		return "Redirection";
	if (status < 500)
		return "Client Error";
	return "Server Error";
}

/* ---- arena ---- */

static void *align16(void *p)
{
	return (void *)(((uintptr_t)p + 15) & ~(uintptr_t)15);
}

static void *arena_alloc(arena_t *a, size_t size)
{
	unsigned char *p, *lim;
	arena_blk_t *b;
	size_t cap;

	if (size == 0)
		size = 1;
	p = align16(a->inl + a->inl_used);
	lim = a->inl + ARENA_INLINE;
	if (p <= lim && size <= (size_t)(lim - p)) {
		a->inl_used = (size_t)(p - a->inl) + size;
		return p;
	}
	b = a->blks;
	if (b != NULL) {
		p = align16(b->data + b->used);
		lim = b->data + b->cap;
		if (p <= lim && size <= (size_t)(lim - p)) {
			b->used = (size_t)(p - b->data) + size;
			return p;
		}
	}
	cap = size + 16 > ARENA_BLOCK ? size + 16 : ARENA_BLOCK;
	b = malloc(sizeof(*b) + cap);
	if (b == NULL)
		oom();
	b->cap = cap;
	p = align16(b->data);
	b->used = (size_t)(p - b->data) + size;
	if (cap > ARENA_BLOCK && a->blks != NULL) {
		/* a big one-off: keep filling the current block */
		b->next = a->blks->next;
		a->blks->next = b;
	} else {
		b->next = a->blks;
		a->blks = b;
	}
	return p;
}

static void arena_reset(arena_t *a)
{
	arena_blk_t *b, *n;

	for (b = a->blks; b != NULL; b = n) {
		n = b->next;
		free(b);
	}
	a->blks = NULL;
	a->inl_used = 0;
}

static char *arena_strndup(arena_t *a, const char *s, size_t n)
{
	char *d = arena_alloc(a, n + 1);

	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

static char *arena_vprintf(arena_t *a, const char *fmt, va_list ap)
{
	va_list aq;
	char *d;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		n = 0;
	d = arena_alloc(a, (size_t)n + 1);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	return d;
}

/* Zeroes the request for the next use; the arena must have been reset. */
static void req_clear(ft_req_t *r, conn_t *c)
{
	memset(r, 0, offsetof(ft_req_t, arena));
	r->c = c;
	r->file_fd = -1;
	r->sf_fd = r->sf_src = r->sp_wr = -1;
	r->method_name = "";
	r->query = "";
}

/* ---- connections ---- */

static void conn_free(conn_t *c)
{
	loop_t *L = c->L;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		L->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	L->nconns--;
	close(c->fd);
	arena_reset(&c->req.arena);
	pthread_cond_destroy(&c->scv);
	pthread_mutex_destroy(&c->smu);
	free(c->buf);
	free(c);
}

static void conn_unref(conn_t *c)
{
	if (--c->refs == 0)
		conn_free(c);
}

/*
 * Shuts the connection down: pending operations complete (with 0 or an error), nothing new is
 * started, the fd is closed once the last reference goes.
 */
static void conn_close(conn_t *c)
{
	struct io_uring_sqe *sqe;

	if (c->closed)
		return;
	c->closed = true;
	shutdown(c->fd, SHUT_RDWR);
	if (c->recv_inflight || c->send_inflight || c->poll_inflight) {
		sqe = get_sqe(c->L);
		io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, 0);
	}
	stream_gone(c);
	conn_unref(c);
}

/* Queues c to be looked at from the top of the loop (body start, local response). */
static void conn_kick(conn_t *c)
{
	loop_t *L = c->L;

	if (c->kicked)
		return;
	c->kicked = true;
	c->refs++;
	c->kick_next = NULL;
	if (L->kick_tail != NULL)
		L->kick_tail->kick_next = c;
	else
		L->kick_head = c;
	L->kick_tail = c;
}

static void recv_arm(conn_t *c)
{
	struct io_uring_sqe *sqe;

	if (c->recv_inflight || c->closed)
		return;
	if (c->start == c->end) {
		c->start = c->end = 0;
	} else if (c->end == c->cap && c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == c->cap)
		return; /* callers make room first */
	sqe = get_sqe(c->L);
	io_uring_prep_recv(sqe, c->fd, c->buf + c->end, c->cap - c->end, 0);
	io_uring_sqe_set_data64(sqe, ud(c, TAG_RECV));
	c->recv_inflight = true;
	c->refs++;
}

static void ring_send(conn_t *c, const void *p, size_t n, bool interim)
{
	struct io_uring_sqe *sqe = get_sqe(c->L);

	io_uring_prep_send(sqe, c->fd, p, n, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud(c, TAG_SEND));
	c->send_inflight = true;
	c->interim = interim;
	c->refs++;
}

static void poll_out(conn_t *c)
{
	struct io_uring_sqe *sqe = get_sqe(c->L);

	io_uring_prep_poll_add(sqe, c->fd, POLLOUT);
	io_uring_sqe_set_data64(sqe, ud(c, TAG_POLL));
	c->poll_inflight = true;
	c->refs++;
}

/* Grows the read buffer to at least want bytes (moving live bytes to the front). */
static void buf_grow(conn_t *c, size_t want)
{
	char *nb;

	if (c->cap >= want)
		return;
	if (c->start > 0) {
		memmove(c->buf, c->buf + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	nb = realloc(c->buf, want);
	if (nb == NULL)
		oom();
	c->buf = nb;
	c->cap = want;
}

/* ---- stream rings ---- */

/* A STREAM_BUF ring for a stream of a request of s: a reused one if any is free. Never NULL. */
static unsigned char *stream_buf_take(ft_httpd_t *s)
{
	void *p;

	pthread_mutex_lock(&s->rmu);
	p = s->ring_free;
	if (p != NULL) {
		memcpy(&s->ring_free, p, sizeof(void *));
		s->ring_nfree--;
	}
	pthread_mutex_unlock(&s->rmu);
	if (p == NULL && (p = malloc(STREAM_BUF)) == NULL)
		oom();
	return p;
}

/* Gives a ring back to s's free list, or frees it when the list holds STREAM_POOL_MAX. NULL is ignored. */
static void stream_buf_give(ft_httpd_t *s, unsigned char *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&s->rmu);
	if (s->ring_nfree < STREAM_POOL_MAX) {
		memcpy(p, &s->ring_free, sizeof(void *));
		s->ring_free = p;
		s->ring_nfree++;
		p = NULL;
	}
	pthread_mutex_unlock(&s->rmu);
	free(p);
}

/* ---- end of a request ---- */

/* Runs the on_done hooks, releases the request's memory and fd, drops the request reference. */
static void finish_request(conn_t *c)
{
	ft_req_t *r = &c->req;
	hook_t *h;

	for (h = r->hooks; h != NULL; h = h->next)
		h->fn(h->arg);
	if (r->file_fd >= 0)
		close(r->file_fd);
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	if (r->sp_wr >= 0)
		close(r->sp_wr);
	free(r->all_buf);
	stream_buf_give(c->L->s, r->b_ring);
	stream_buf_give(c->L->s, r->s_ring);
	arena_reset(&r->arena);
	req_clear(r, c);
	c->linger = false;
	conn_unref(c);
}

static void close_after_response(conn_t *c, bool linger)
{
	loop_t *L = c->L;

	if (c->closed)
		return;
	if (c->start < c->end)
		linger = true; /* pipelined input would turn into a reset */
	if (!linger || c->peer_eof || L->stopping) {
		conn_close(c);
		return;
	}
	c->phase = PH_LINGER;
	shutdown(c->fd, SHUT_WR);
	c->linger_until = L->now + LINGER_MS;
	c->start = c->end = 0;
	recv_arm(c);
}

/* The response is sent (ok) or failed; the caller holds a reference to c. */
static void response_done(conn_t *c, bool ok)
{
	ft_req_t *r = &c->req;
	bool keep = ok && r->keep_alive && !c->must_close && !c->closed && !c->L->stopping;
	bool linger = c->linger;

	finish_request(c);
	if (!ok) {
		conn_close(c);
		return;
	}
	if (!keep) {
		close_after_response(c, linger);
		return;
	}
	c->phase = PH_HEAD;
	c->head_started = false;
	c->scanned = 0;
	c->idle_since = c->L->now;
	head_process(c);
}

/* ---- sending ---- */

/* Header with MSG_MORE, then sendfile(2); polls the ring for POLLOUT when the socket is full. */
static void file_send(conn_t *c)
{
	ft_req_t *r = &c->req;
	size_t want;
	ssize_t n;

	while (c->send_off < r->out_len) {
		n = send(c->fd, r->out + c->send_off, r->out_len - c->send_off, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && !c->closed) {
				poll_out(c);
				return;
			}
			response_done(c, false);
			return;
		}
		c->send_off += (size_t)n;
	}
	while (r->file_left > 0) {
		want = r->file_left > (1u << 30) ? (1u << 30) : (size_t)r->file_left;
		n = sendfile(c->fd, r->file_fd, &r->file_off, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN && !c->closed) {
				poll_out(c);
				return;
			}
			if (errno != EPIPE && errno != ECONNRESET)
				ft_warn("http: sendfile to %s: %s", c->peer, strerror(errno));
			response_done(c, false);
			return;
		}
		if (n == 0) {
			ft_warn("http: file for %s ended %llu bytes early; closing", c->peer,
				(unsigned long long)r->file_left);
			response_done(c, false);
			return;
		}
		r->file_left -= (uint64_t)n;
		c->send_since = c->L->now;
	}
	response_done(c, true);
}

static void send_more(conn_t *c)
{
	ft_req_t *r = &c->req;

	if (r->file_left > 0) {
		file_send(c);
		return;
	}
	if (c->send_off < r->out_len) {
		if (c->closed) {
			response_done(c, false);
			return;
		}
		ring_send(c, r->out + c->send_off, r->out_len - c->send_off, false);
		return;
	}
	response_done(c, true);
}

static void start_send(conn_t *c)
{
	c->phase = PH_SENDING;
	c->send_off = 0;
	c->send_since = c->L->now;
	if (c->send_inflight)
		return; /* "100 Continue" still going out; its completion resumes us */
	send_more(c);
}

/* The handler made its response call; on the loop thread, caller holds a reference. */
static void on_responded(conn_t *c)
{
	ft_req_t *r = &c->req;

	if (c->phase != PH_HANDLER)
		return;
	if (r->st_head) {
		stream_send_more(c); /* finishes the request once the stream is out */
		return;
	}
	if (r->body_state == BODY_WANT || r->body_state == BODY_ACTIVE) {
		/* responded before the body was read: the rest of it must not become the next request */
		r->body_state = BODY_FAILED;
		c->must_close = true;
		c->linger = true;
	} else if (r->body_state == BODY_NONE && (r->chunked || r->content_length > 0)) {
		c->must_close = true;
		c->linger = true;
	}
	if (c->closed) {
		finish_request(c);
		return;
	}
	start_send(c);
}

static void on_send(conn_t *c, int res)
{
	size_t left;

	c->send_inflight = false;
	if (c->interim) {
		c->interim = false;
		if (res <= 0) {
			c->must_close = true;
			conn_close(c);
		} else {
			c->cont_off += (size_t)res;
			left = sizeof(CONTINUE_MSG) - 1 - c->cont_off;
			if (left > 0 && !c->closed) {
				ring_send(c, CONTINUE_MSG + c->cont_off, left, true);
				return;
			}
		}
		if (c->phase == PH_SENDING)
			send_more(c);
		else if (c->req.st_head)
			stream_send_more(c);
		return;
	}
	if (c->req.st_head) {
		stream_on_send(c, res);
		return;
	}
	if (c->phase != PH_SENDING)
		return;
	if (res <= 0) {
		response_done(c, false);
		return;
	}
	c->send_off += (size_t)res;
	c->send_since = c->L->now;
	send_more(c);
}

static void on_poll(conn_t *c)
{
	c->poll_inflight = false;
	if (c->req.st_head) {
		stream_send_more(c); /* a stream's file range waited for room in the socket */
		return;
	}
	if (c->phase != PH_SENDING)
		return;
	if (c->closed) {
		response_done(c, false);
		return;
	}
	file_send(c);
}

/* ---- blocking streams, loop side (see DESIGN) ---- */

/* Copies n bytes into a stream ring at pos, wrapping; returns the position after them. */
static size_t ring_put(unsigned char *ring, size_t pos, const void *src, size_t n)
{
	size_t first = STREAM_BUF - pos < n ? STREAM_BUF - pos : n;

	memcpy(ring + pos, src, first);
	memcpy(ring, (const unsigned char *)src + first, n - first);
	return (pos + n) % STREAM_BUF;
}

/* Copies n bytes out of a stream ring from pos, wrapping. */
static void ring_get(const unsigned char *ring, size_t pos, void *dst, size_t n)
{
	size_t first = STREAM_BUF - pos < n ? STREAM_BUF - pos : n;

	memcpy(dst, ring + pos, first);
	memcpy((unsigned char *)dst + first, ring, n - first);
}

static void stream_wake_locked(conn_t *c)
{
	if (c->req.sh.waiters > 0)
		pthread_cond_broadcast(&c->scv);
}

/* The connection closed: stream calls fail from now on, and a worker blocked in one wakes up. */
static void stream_gone(conn_t *c)
{
	stream_shared_t *sh = &c->req.sh;

	pthread_mutex_lock(&c->smu);
	sh->gone = true;
	if (!sh->b_eof && sh->b_err == 0)
		sh->b_err = -ECONNRESET;
	stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/* Free bytes in the body ring; none marks the loop paused, so the worker's reads resume it. */
static size_t stream_body_room(conn_t *c)
{
	stream_shared_t *sh = &c->req.sh;
	size_t room;

	pthread_mutex_lock(&c->smu);
	room = STREAM_BUF - sh->b_len;
	if (room == 0)
		sh->b_paused = true;
	pthread_mutex_unlock(&c->smu);
	return room;
}

/* Appends n de-chunked body bytes for the worker; n <= stream_body_room(). */
static void stream_body_put(conn_t *c, const char *p, size_t n)
{
	ft_req_t *r = &c->req;
	size_t pos;

	pthread_mutex_lock(&c->smu);
	pos = (r->sh.b_rd + r->sh.b_len) % STREAM_BUF;
	pthread_mutex_unlock(&c->smu);
	ring_put(r->b_ring, pos, p, n); /* free space: only the loop writes there */
	pthread_mutex_lock(&c->smu);
	r->sh.b_len += n;
	stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/* The body ended (err = 0) or failed; the worker sees it after the bytes already in the ring. */
static void stream_body_end(conn_t *c, int err)
{
	stream_shared_t *sh = &c->req.sh;

	pthread_mutex_lock(&c->smu);
	if (err == 0)
		sh->b_eof = true;
	else if (sh->b_err == 0)
		sh->b_err = err;
	stream_wake_locked(c);
	pthread_mutex_unlock(&c->smu);
}

/*
 * The worker ended the stream and everything queued is sent, or the connection is gone: finishes
 * the request. Keep-alive only for a properly ended body and a fully read request body.
 */
static void stream_finish(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool ok = !c->closed && r->s_end_err == 0 && !r->s_bad && !r->sf_failed &&
		  (r->s_frame != FR_LENGTH || r->s_written == r->s_clen);

	if (ok) {
		if (r->body_state == BODY_WANT || r->body_state == BODY_ACTIVE) {
			/* the rest of the body must not become the next request */
			r->body_state = BODY_FAILED;
			c->must_close = true;
			c->linger = true;
		} else if (r->body_state == BODY_NONE && (r->chunked || r->content_length > 0)) {
			c->must_close = true;
			c->linger = true;
		}
		if (r->s_frame == FR_CLOSE)
			c->must_close = true;
	} else if (!c->closed && r->s_end_err == 0 && !r->sf_failed) {
		ft_warn("http: stream to %s ended %llu bytes short of its Content-Length; closing", c->peer,
			(unsigned long long)(r->s_clen - r->s_written));
	}
	response_done(c, ok);
}

/*
 * Sends the queued file range with sendfile(2) until it is out or the socket is full. Returns true
 * when the range is all sent, false when a POLLOUT is armed or the stream was cut (connection closed).
 */
static bool stream_send_file(conn_t *c)
{
	ft_req_t *r = &c->req;
	uint64_t f_len;
	size_t ring;
	off_t off;
	int fd;
	bool pipe;
	ssize_t k;

	for (;;) {
		pthread_mutex_lock(&c->smu);
		off = (off_t)r->sh.f_off;
		f_len = r->sh.f_len;
		ring = r->sh.s_len;
		fd = r->sf_fd; /* set before the range was queued, under smu */
		pipe = r->sf_pipe;
		pthread_mutex_unlock(&c->smu);
		/* Ring bytes only come in while no range is queued: with some there, this range is a new
		 * one that goes after them (the caller sends the ring first). */
		if (f_len == 0 || ring > 0)
			return true;
		if (pipe)
			k = splice(fd, NULL, c->fd, NULL, f_len > (1u << 30) ? (1u << 30) : (size_t)f_len,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		else
			k = sendfile(c->fd, fd, &off, f_len > (1u << 30) ? (1u << 30) : (size_t)f_len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			poll_out(c);
			return false;
		}
		if (k <= 0) {
			if (k == 0)
				ft_warn("http: stream file for %s ended %llu bytes early; closing", c->peer,
					(unsigned long long)f_len);
			else if (errno != EPIPE && errno != ECONNRESET)
				ft_warn("http: %s to %s: %s", pipe ? "splice" : "sendfile", c->peer, strerror(errno));
			r->sf_failed = true;
			conn_close(c); /* the worker's calls fail from now on; the body is cut */
			return false;
		}
		c->send_since = c->L->now;
		pthread_mutex_lock(&c->smu);
		r->sh.f_off += (uint64_t)k;
		r->sh.f_len -= (uint64_t)k;
		/* a waiting worker wants the range drained, or STREAM_FILE_LOWAT of room: not every send
		 * (a pipe holds little: its worker wakes on every send) */
		if (pipe || r->sh.f_len == 0 || STREAM_FILE_MAX - r->sh.f_len >= STREAM_FILE_LOWAT)
			stream_wake_locked(c);
		pthread_mutex_unlock(&c->smu);
	}
}

/*
 * Sends the stream's next piece, one send at a time: the head, then whatever the ring holds, then
 * the queued file range. With nothing left to send and the worker's end seen, finishes the request.
 */
static void stream_send_more(conn_t *c)
{
	ft_req_t *r = &c->req;
	size_t pos = 0, n = 0;
	bool file = false;

	if (!r->st_head || c->send_inflight || c->poll_inflight)
		return; /* the completion comes back here */
	while (!c->closed) {
		if (c->send_off < r->out_len) {
			ring_send(c, r->out + c->send_off, r->out_len - c->send_off, false);
			c->send_since = c->L->now;
			return;
		}
		n = 0;
		file = false;
		if (r->s_ring != NULL) {
			pthread_mutex_lock(&c->smu);
			pos = r->sh.s_rd;
			n = r->sh.s_len < STREAM_BUF - pos ? r->sh.s_len : STREAM_BUF - pos;
			file = r->sh.f_len > 0;
			r->sh.s_idle = n == 0 && !file;
			pthread_mutex_unlock(&c->smu);
		}
		if (n > 0) {
			ring_send(c, r->s_ring + pos, n, false);
			c->send_since = c->L->now;
			return;
		}
		if (!file)
			break;
		if (!stream_send_file(c) && !c->closed)
			return; /* POLLOUT armed: on_poll comes back here */
				/* the range is out (or the stream cut): look again, the worker may have queued more */
	}
	if (r->resp_ready)
		stream_finish(c);
}

static void stream_on_send(conn_t *c, int res)
{
	ft_req_t *r = &c->req;

	if (res <= 0) {
		conn_close(c); /* the worker's calls fail from now on */
		stream_send_more(c);
		return;
	}
	c->send_since = c->L->now;
	if (c->send_off < r->out_len) {
		c->send_off += (size_t)res;
	} else {
		pthread_mutex_lock(&c->smu);
		r->sh.s_rd = (r->sh.s_rd + (size_t)res) % STREAM_BUF;
		r->sh.s_len -= (size_t)res;
		stream_wake_locked(c);
		pthread_mutex_unlock(&c->smu);
	}
	stream_send_more(c);
}

/* ---- request body ---- */

static void body_end(conn_t *c, int err)
{
	ft_req_t *r = &c->req;

	r->body_state = err != 0 ? BODY_FAILED : BODY_DONE;
	if (err != 0) {
		c->must_close = true;
		c->linger = err != -ECONNRESET;
	}
	if (r->all_done != NULL) {
		char *body = r->all_buf;

		if (body == NULL) {
			body = arena_alloc(&r->arena, 1);
			body[0] = 0;
		} else {
			body[r->all_len] = 0;
		}
		r->all_done(r, r->body_arg, body, r->all_len, err);
	} else if (r->body_stream) {
		stream_body_end(c, err);
	} else {
		r->on_end(r, r->body_arg, err);
	}
}

/* Hands body bytes to the handler; returns -1 when reading stops. */
static int deliver(conn_t *c, const char *p, size_t n)
{
	ft_req_t *r = &c->req;
	size_t want;
	int rc;

	if (r->body_stream) {
		stream_body_put(c, p, n);
		return 0;
	}
	if (r->all_done != NULL) {
		if (n > r->all_max - r->all_len) {
			r->body_state = BODY_FAILED;
			server_error(c, 413, "request body too large");
			return -1;
		}
		if (r->all_len + n + 1 > r->all_cap) {
			want = r->all_cap ? r->all_cap * 2 : 64 * 1024;
			if (want < r->all_len + n + 1)
				want = r->all_len + n + 1;
			if (want > r->all_max + 1)
				want = r->all_max + 1;
			r->all_buf = realloc(r->all_buf, want);
			if (r->all_buf == NULL)
				oom();
			r->all_cap = want;
		}
		memcpy(r->all_buf + r->all_len, p, n);
		r->all_len += n;
		return 0;
	}
	rc = r->on_data(r, r->body_arg, p, n);
	if (r->responded) {
		/* the handler answered from on_data: no more callbacks for this request */
		r->body_state = BODY_FAILED;
		c->must_close = true;
		c->linger = true;
		return -1;
	}
	if (rc != 0) {
		body_end(c, -ECANCELED);
		return -1;
	}
	return 0;
}

/* Feeds buffered body bytes to the handler, then reads more if the body is not complete. */
static void body_feed(conn_t *c)
{
	ft_req_t *r = &c->req;
	const char *p, *d;
	size_t avail, n, used, dl, room;
	ft_hp_chunk_result_t rc;

	while (r->body_state == BODY_ACTIVE && c->start < c->end) {
		p = c->buf + c->start;
		avail = c->end - c->start;
		if (r->body_stream) {
			/* never more than the worker's ring takes (de-chunked bytes <= input bytes) */
			room = stream_body_room(c);
			if (room == 0)
				return; /* paused: the worker's EV_FEED resumes */
			if (avail > room)
				avail = room;
		}
		if (r->chunked) {
			rc = ft_hp_chunked_decode(&r->chunk, p, avail, &used, &d, &dl);
			c->start += used;
			if (dl > 0 && deliver(c, d, dl) != 0)
				return;
			if (rc == FT_HP_CHUNK_DONE) {
				body_end(c, 0);
				return;
			}
			if (rc == FT_HP_CHUNK_BAD) {
				body_end(c, -EBADMSG);
				return;
			}
		} else {
			n = avail < r->body_left ? avail : (size_t)r->body_left;
			c->start += n;
			r->body_left -= n;
			if (deliver(c, p, n) != 0)
				return;
			if (r->body_left == 0) {
				body_end(c, 0);
				return;
			}
		}
	}
	if (r->body_state != BODY_ACTIVE)
		return;
	if (c->closed) {
		body_end(c, -ECONNRESET);
		return;
	}
	if (r->body_stream && stream_body_room(c) == 0)
		return; /* no more reading until the worker drains */
	recv_arm(c);
}

static void body_start(conn_t *c)
{
	ft_req_t *r = &c->req;
	bool large;

	r->body_state = BODY_ACTIVE;
	if (c->closed) {
		body_end(c, -ECONNRESET);
		return;
	}
	if (!r->chunked && r->content_length == 0) {
		body_end(c, 0);
		return;
	}
	if (r->all_done != NULL && !r->chunked && (uint64_t)r->content_length > r->all_max) {
		r->body_state = BODY_FAILED;
		server_error(c, 413, "request body too large");
		return;
	}
	r->body_left = r->chunked ? 0 : (uint64_t)r->content_length;
	ft_hp_chunked_init(&r->chunk);
	/* not after a stream's final head: a 100 must precede it */
	if (r->expect_continue && r->minor >= 1 && c->start == c->end && !c->send_inflight && !r->st_head) {
		c->cont_off = 0;
		ring_send(c, CONTINUE_MSG, sizeof(CONTINUE_MSG) - 1, true);
	}
	large = r->chunked || r->body_left > (uint64_t)(c->cap - (c->end - c->start));
	if (large && !c->recv_inflight)
		buf_grow(c, BUF_BODY);
	c->body_since = c->L->now;
	body_feed(c);
}

/* Acts on the events the request's holder handed over (see DESIGN), from the top of the loop. */
static void conn_process(conn_t *c)
{
	ft_req_t *r = &c->req;
	unsigned ev = r->ev;

	if (c->phase != PH_HANDLER)
		return;
	r->ev = 0;
	if (ev & EV_RESPONDED)
		r->resp_ready = true;
	if ((ev & EV_BODY) && r->body_state == BODY_NONE) {
		r->body_state = BODY_WANT;
		if (!r->resp_ready)
			body_start(c); /* before a stream head, so "100 Continue" can go first */
	} else if ((ev & EV_FEED) && r->body_state == BODY_ACTIVE && !c->recv_inflight) {
		c->body_since = c->L->now; /* the client was not late while we did not read */
		body_feed(c);
	}
	if ((ev & EV_STREAM) && !r->st_head) {
		r->st_head = true;
		c->send_off = 0;
		c->send_since = c->L->now;
	}
	if (r->resp_ready)
		on_responded(c);
	else if (ev & (EV_STREAM | EV_SEND))
		stream_send_more(c);
}

/* ---- request head ---- */

static ft_method_t method_of(const char *m, size_t n)
{
	static const struct {
		const char *name;
		ft_method_t m;
	} tab[] = {
		{"GET", FT_HTTP_GET},   {"HEAD", FT_HTTP_HEAD},     {"PUT", FT_HTTP_PUT},
		{"POST", FT_HTTP_POST}, {"DELETE", FT_HTTP_DELETE}, {"OPTIONS", FT_HTTP_OPTIONS},
	};
	size_t i;

	for (i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (strlen(tab[i].name) == n && memcmp(tab[i].name, m, n) == 0)
			return tab[i].m;
	return FT_HTTP_OTHER;
}

/* Splits r->target into the decoded path and the raw query. Returns -1 for a bad target. */
static int split_target(ft_req_t *r)
{
	const char *t = r->target, *p = t, *q;
	size_t plen;
	long n;

	if (strcmp(t, "*") == 0) {
		r->path = arena_strndup(&r->arena, "*", 1);
		r->path_len = 1;
		return r->method == FT_HTTP_OPTIONS ? 0 : -1;
	}
	if (t[0] != '/') {
		/* absolute-form: scheme://authority[/path][?query] */
		if (strncasecmp(t, "http://", 7) == 0)
			p = t + 7;
		else if (strncasecmp(t, "https://", 8) == 0)
			p = t + 8;
		else
			return -1;
		p += strcspn(p, "/?");
	}
	q = strchr(p, '?');
	plen = q != NULL ? (size_t)(q - p) : strlen(p);
	r->query = q != NULL ? q + 1 : "";
	if (plen == 0) {
		r->path = arena_strndup(&r->arena, "/", 1);
		r->path_len = 1;
		return 0;
	}
	r->path = arena_alloc(&r->arena, plen + 1);
	n = ft_pct_decode(p, plen, r->path, FT_PCT_STRICT);
	if (n < 0)
		return -1;
	r->path_len = (size_t)n;
	return 0;
}

/* Builds the request from a parsed head and calls the handler. */
static void request_begin(conn_t *c, const ft_hp_head_t *h, const ft_hp_header_t *hdrs)
{
	ft_httpd_t *s = c->L->s;
	ft_req_t *r = &c->req;
	ft_hp_info_t info;
	int st;
	size_t i;

	c->phase = PH_HANDLER;
	c->refs++; /* the request's reference, dropped by finish_request */
	c->head_started = false;
	r->method = method_of(h->method, h->method_len);
	r->method_name = arena_strndup(&r->arena, h->method, h->method_len);
	r->target = arena_strndup(&r->arena, h->target, h->target_len);
	r->minor = h->version_minor;
	r->nhdrs = (int)h->nheaders;
	r->hnames = arena_alloc(&r->arena, (h->nheaders + 1) * sizeof(char *));
	r->hvalues = arena_alloc(&r->arena, (h->nheaders + 1) * sizeof(char *));
	for (i = 0; i < h->nheaders; i++) {
		r->hnames[i] = arena_strndup(&r->arena, hdrs[i].name, hdrs[i].name_len);
		r->hvalues[i] = arena_strndup(&r->arena, hdrs[i].value, hdrs[i].value_len);
	}
	c->start += h->head_len;
	c->scanned = 0;
	st = ft_hp_analyze(h, hdrs, &info);
	if (st != 0) {
		server_error(c, st, st == 501 ? "unsupported transfer coding" : "bad request framing");
		return;
	}
	r->content_length = info.content_length;
	r->chunked = info.chunked;
	r->expect_continue = info.expect_continue;
	r->client_keep_alive = info.keep_alive;
	/*
	 * "Expect: 100-continue" with an empty body: nothing will be read, so body_start never sends the
	 * interim response; send it now, before anything the handler answers. Some clients (botocore
	 * 1.29) otherwise take the final status for the answer to their expectation and misread the
	 * next response on the connection.
	 */
	if (r->expect_continue && r->minor >= 1 && !r->chunked && r->content_length == 0) {
		c->cont_off = 0;
		ring_send(c, CONTINUE_MSG, sizeof(CONTINUE_MSG) - 1, true);
	}
	if (split_target(r) != 0) {
		/* the framing is known, but keep it simple: bad targets close like other 400s */
		server_error(c, 400, "invalid request target");
		return;
	}
	s->o.handler(r, s->o.ctx);
}

static void head_process(conn_t *c)
{
	loop_t *L = c->L;
	ft_httpd_t *s = L->s;
	size_t avail = c->end - c->start, limit = (size_t)s->o.max_header_bytes;
	ft_hp_result_t rc = FT_HP_AGAIN;
	ft_hp_head_t h;

	if (c->closed)
		return;
	if (avail == 0) {
		c->start = c->end = 0;
		c->scanned = 0;
		recv_arm(c);
		return;
	}
	if (!c->head_started) {
		c->head_started = true;
		c->head_since = L->now;
	}
	/* parse only when a new line end arrived (a byte-at-a-time client costs no re-parsing) */
	if (avail > limit || memchr(c->buf + c->start + c->scanned, '\n', avail - c->scanned) != NULL)
		rc = ft_hp_parse_head(c->buf + c->start, avail, limit, L->hdrs, (size_t)s->o.max_headers, &h);
	switch (rc) {
	case FT_HP_DONE:
		request_begin(c, &h, L->hdrs);
		return;
	case FT_HP_AGAIN:
		c->scanned = avail;
		if (c->end == c->cap) {
			if (c->start > 0) {
				memmove(c->buf, c->buf + c->start, avail);
				c->start = 0;
				c->end = avail;
			} else {
				buf_grow(c, c->cap * 2 < limit + 1 ? c->cap * 2 : limit + 1);
			}
		}
		recv_arm(c);
		return;
	case FT_HP_TOO_LARGE:
		server_error(c, 431, "request head too large");
		return;
	case FT_HP_VERSION:
		server_error(c, 505, "HTTP version not supported");
		return;
	default:
		server_error(c, 400, "malformed request head");
		return;
	}
}

/* The server answers on its own (parse errors, timeouts, 413) and closes after. */
static void server_error(conn_t *c, int status, const char *msg)
{
	ft_req_t *r = &c->req;

	if (c->phase != PH_HANDLER) {
		c->phase = PH_HANDLER;
		c->refs++;
		c->head_started = false;
	}
	c->must_close = true;
	c->linger = true;
	r->close_req = true;
	ft_resp_error(r, status, "%s", msg);
}

static void on_recv(conn_t *c, int res)
{
	ft_req_t *r = &c->req;

	c->recv_inflight = false;
	if (res <= 0) {
		c->peer_eof = true;
		if (c->phase == PH_SENDING) {
			c->must_close = true;
			return;
		}
		if (c->phase == PH_HANDLER && r->body_state == BODY_ACTIVE)
			body_end(c, -ECONNRESET);
		conn_close(c);
		return;
	}
	c->end += (size_t)res;
	switch (c->phase) {
	case PH_HEAD:
		c->idle_since = c->L->now;
		head_process(c);
		break;
	case PH_HANDLER:
		if (r->body_state == BODY_ACTIVE) {
			c->body_since = c->L->now;
			body_feed(c);
		} else if (c->must_close) {
			c->start = c->end = 0;
		}
		break;
	case PH_LINGER:
		c->start = c->end = 0;
		recv_arm(c);
		break;
	default:
		if (c->must_close)
			c->start = c->end = 0;
		break;
	}
}

/* ---- loop ---- */

static void arm_accept(loop_t *L)
{
	struct io_uring_sqe *sqe = get_sqe(L);

	io_uring_prep_multishot_accept(sqe, L->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(L, TAG_ACCEPT));
	L->accept_armed = true;
	L->accept_retry = false;
}

static void arm_event(loop_t *L)
{
	struct io_uring_sqe *sqe = get_sqe(L);

	io_uring_prep_read(sqe, L->efd, &L->efd_val, sizeof(L->efd_val), 0);
	io_uring_sqe_set_data64(sqe, ud(L, TAG_EVENT));
}

static void arm_timer(loop_t *L)
{
	struct io_uring_sqe *sqe = get_sqe(L);

	io_uring_prep_timeout(sqe, &L->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, ud(L, TAG_TIMER));
}

static void format_peer(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	snprintf(out, outlen, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(out, outlen, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(out, outlen, "[%s]:%u", ip, ntohs(a->sin6_port));
	}
}

static void conn_new(loop_t *L, int fd)
{
	conn_t *c = calloc(1, sizeof(*c));
	int one = 1;

	if (c == NULL || (c->buf = malloc(BUF_INITIAL)) == NULL) {
		free(c);
		close(fd);
		ft_warn("http: no memory for a connection");
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pthread_mutex_init(&c->smu, NULL);
	pthread_cond_init(&c->scv, NULL);
	c->L = L;
	c->fd = fd;
	c->cap = BUF_INITIAL;
	c->refs = 1; /* open */
	c->phase = PH_HEAD;
	c->idle_since = L->now;
	format_peer(fd, c->peer, sizeof(c->peer));
	req_clear(&c->req, c);
	c->next = L->conns;
	if (L->conns != NULL)
		L->conns->prev = c;
	L->conns = c;
	L->nconns++;
	recv_arm(c);
}

static void on_accept(loop_t *L, int res, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		L->accept_armed = false;
	if (res < 0) {
		if (res != -ECANCELED && !L->stopping)
			ft_warn("http: accept: %s", strerror(-res));
		if (!L->accept_armed && !L->stopping)
			L->accept_retry = true; /* re-armed by the timer, so EMFILE cannot spin */
		return;
	}
	if (L->stopping) {
		close(res);
		return;
	}
	conn_new(L, res);
	if (!L->accept_armed && !L->stopping)
		arm_accept(L);
}

/* Requests handed over by other threads (responses, body reads), and stop wake-ups. */
static void on_event(loop_t *L, int res)
{
	ft_req_t *r, *next;
	conn_t *c;

	if (res < 0 && res != -EINTR && res != -EAGAIN)
		ft_error("http: eventfd read: %s", strerror(-res));

	pthread_mutex_lock(&L->qmu);
	r = L->qhead;
	L->qhead = L->qtail = NULL;
	L->qsignaled = false;
	pthread_mutex_unlock(&L->qmu);
	for (; r != NULL; r = next) {
		/* r may be queued again as soon as it is marked out of the queue */
		pthread_mutex_lock(&L->qmu);
		next = r->qnext;
		r->queued = false;
		r->ev |= r->xev; /* see DESIGN, HAND-OVER */
		r->xev = 0;
		pthread_mutex_unlock(&L->qmu);
		c = r->c;
		c->refs++;
		conn_process(c);
		conn_unref(c);
	}
	arm_event(L);
}

/* Timeouts: idle, head, body stall, send stall, linger. */
static void on_timer(loop_t *L)
{
	ft_httpd_t *s = L->s;
	conn_t *c, *next;

	for (c = L->conns; c != NULL; c = next) {
		next = c->next;
		if (c->closed)
			continue;
		c->refs++;
		switch (c->phase) {
		case PH_HEAD:
			if (!c->head_started) {
				if (L->now - c->idle_since >= s->o.idle_timeout_ms)
					conn_close(c);
			} else if (L->now - c->head_since >= s->o.header_timeout_ms) {
				server_error(c, 408, "request head timeout");
			}
			break;
		case PH_HANDLER:
			if (c->req.body_state == BODY_ACTIVE && c->recv_inflight &&
			    L->now - c->body_since >= s->o.body_timeout_ms)
				body_end(c, -ETIMEDOUT);
			/* a stream the client stopped reading: close, which fails the worker's writes */
			if (c->req.st_head && (c->send_inflight || c->poll_inflight) && !c->interim &&
			    L->now - c->send_since >= s->o.idle_timeout_ms)
				conn_close(c);
			break;
		case PH_SENDING:
			if ((c->send_inflight || c->poll_inflight) && L->now - c->send_since >= s->o.idle_timeout_ms)
				conn_close(c);
			break;
		case PH_LINGER:
			if (L->now >= c->linger_until)
				conn_close(c);
			break;
		default:
			break;
		}
		conn_unref(c);
	}
	if (L->accept_retry && !L->stopping)
		arm_accept(L);
	arm_timer(L);
}

static void run_kicks(loop_t *L)
{
	conn_t *c;

	while ((c = L->kick_head) != NULL) {
		L->kick_head = c->kick_next;
		if (L->kick_head == NULL)
			L->kick_tail = NULL;
		c->kicked = false;
		conn_process(c);
		conn_unref(c);
	}
}

static void begin_stop(loop_t *L)
{
	struct io_uring_sqe *sqe;
	conn_t *c, *next;

	L->stopping = true;
	if (L->accept_armed) {
		sqe = get_sqe(L);
		io_uring_prep_cancel64(sqe, ud(L, TAG_ACCEPT), 0);
		io_uring_sqe_set_data64(sqe, 0);
	}
	for (c = L->conns; c != NULL; c = next) {
		next = c->next;
		c->refs++;
		conn_close(c);
		conn_unref(c);
	}
}

static void handle_cqe(loop_t *L, uint64_t data, int res, unsigned flags)
{
	void *p = (void *)(uintptr_t)(data & ~(uint64_t)TAG_MASK);
	conn_t *c = p;

	switch (data & TAG_MASK) {
	case TAG_ACCEPT:
		on_accept(L, res, flags);
		break;
	case TAG_EVENT:
		on_event(L, res);
		break;
	case TAG_TIMER:
		on_timer(L);
		break;
	case TAG_RECV:
		on_recv(c, res);
		conn_unref(c);
		break;
	case TAG_SEND:
		on_send(c, res);
		conn_unref(c);
		break;
	case TAG_POLL:
		on_poll(c);
		conn_unref(c);
		break;
	default:
		break;
	}
}

static int ring_init(loop_t *L)
{
	struct io_uring_params p;
	static const unsigned tries[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	size_t i;
	int rc = -EINVAL;

	for (i = 0; i < sizeof(tries) / sizeof(tries[0]); i++) {
		memset(&p, 0, sizeof(p));
		p.flags = tries[i];
		rc = io_uring_queue_init_params(RING_ENTRIES, &L->ring, &p);
		if (rc == 0)
			return 0;
	}
	return rc;
}

static void *loop_main(void *arg)
{
	loop_t *L = arg;
	ft_httpd_t *s = L->s;
	struct io_uring_cqe *cqes[CQE_BATCH];
	struct {
		uint64_t data;
		int res;
		unsigned flags;
	} batch[CQE_BATCH];
	unsigned n, i;
	int rc;

	tls_loop = L;
	rc = ring_init(L);
	pthread_mutex_lock(&s->mu);
	L->init_rc = rc;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (rc != 0)
		return NULL;
	L->now = mono_ms();
	arm_accept(L);
	arm_event(L);
	arm_timer(L);
	for (;;) {
		run_kicks(L);
		if (!L->stopping && atomic_load(&L->stop_req)) {
			begin_stop(L);
			continue;
		}
		if (L->stopping && L->nconns == 0)
			break;
		rc = io_uring_submit_and_wait(&L->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			ft_error("http: io_uring_submit_and_wait: %s", strerror(-rc));
			break;
		}
		L->now = mono_ms();
		n = io_uring_peek_batch_cqe(&L->ring, cqes, CQE_BATCH);
		for (i = 0; i < n; i++) {
			batch[i].data = cqes[i]->user_data;
			batch[i].res = cqes[i]->res;
			batch[i].flags = cqes[i]->flags;
		}
		io_uring_cq_advance(&L->ring, n);
		for (i = 0; i < n; i++)
			handle_cqe(L, batch[i].data, batch[i].res, batch[i].flags);
	}
	io_uring_queue_exit(&L->ring);
	return NULL;
}

/* ---- start / stop ---- */

/*
 * SO_REUSEPORT lets a second process of the same user share a port silently; a first bind
 * without it fails when anyone listens there already, so a port clash is an error at start.
 */
static int port_is_free(const struct addrinfo *ai)
{
	int fd, one = 1, rc;

	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno != EADDRINUSE;
	close(fd);
	return rc;
}

static int listen_on(const char *bind_addr, int port, int exclusive_checked, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *ai = NULL;
	char portstr[16];
	int fd = -1, one = 1, rc;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(bind_addr && *bind_addr ? bind_addr : NULL, portstr, &hints, &ai);
	if (rc != 0) {
		snprintf(err, errlen, "resolve %s: %s", bind_addr ? bind_addr : "*", gai_strerror(rc));
		return -1;
	}
	if (!exclusive_checked && port != 0 && !port_is_free(ai)) {
		snprintf(err, errlen, "bind %s:%d: %s", bind_addr ? bind_addr : "*", port, strerror(EADDRINUSE));
		goto fail;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
		snprintf(err, errlen, "SO_REUSEPORT: %s", strerror(errno));
		goto fail;
	}
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		snprintf(err, errlen, "bind %s:%d: %s", bind_addr ? bind_addr : "*", port, strerror(errno));
		goto fail;
	}
	if (listen(fd, 4096) != 0) {
		snprintf(err, errlen, "listen: %s", strerror(errno));
		goto fail;
	}
	freeaddrinfo(ai);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return -1;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void opts_defaults(ft_httpd_opts_t *o)
{
	if (o->max_header_bytes <= 0)
		o->max_header_bytes = DEF_MAX_HEADER_BYTES;
	if (o->max_headers <= 0)
		o->max_headers = DEF_MAX_HEADERS;
	if (o->idle_timeout_ms <= 0)
		o->idle_timeout_ms = DEF_IDLE_MS;
	if (o->header_timeout_ms <= 0)
		o->header_timeout_ms = DEF_HEADER_MS;
	if (o->body_timeout_ms <= 0)
		o->body_timeout_ms = DEF_BODY_MS;
	if (o->workers <= 0)
		o->workers = DEF_WORKERS;
	if (o->threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o->threads = n > 0 ? (int)n : 1;
	}
}

/* Tick of the timer sweep: a quarter of the shortest timeout, within [10 ms, 1 s]. */
static int64_t tick_ms(const ft_httpd_opts_t *o)
{
	int64_t t = o->idle_timeout_ms;

	if (o->header_timeout_ms < t)
		t = o->header_timeout_ms;
	if (o->body_timeout_ms < t)
		t = o->body_timeout_ms;
	t /= 4;
	if (t < 10)
		t = 10;
	if (t > 1000)
		t = 1000;
	return t;
}

static void free_server(ft_httpd_t *s)
{
	int i;

	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];

		if (L->lfd >= 0)
			close(L->lfd);
		if (L->efd >= 0)
			close(L->efd);
		pthread_mutex_destroy(&L->qmu);
		free(L->hdrs);
	}
	ft_workpool_destroy(s->pool);
	while (s->ring_free != NULL) {
		void *p = s->ring_free;

		memcpy(&s->ring_free, p, sizeof(void *));
		free(p);
	}
	pthread_mutex_destroy(&s->rmu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s->loops);
	free(s);
}

static void stop_loops(ft_httpd_t *s)
{
	uint64_t one = 1;
	int i;

	atomic_store(&s->stopping, true);
	for (i = 0; i < s->nloops; i++) {
		atomic_store(&s->loops[i].stop_req, true);
		if (write(s->loops[i].efd, &one, sizeof(one)) < 0)
			ft_warn("http: wake loop: %s", strerror(errno));
	}
	for (i = 0; i < s->nloops; i++)
		if (s->loops[i].th_started)
			pthread_join(s->loops[i].th, NULL);
}

ft_httpd_t *ft_httpd_start(const ft_httpd_opts_t *o, char *err, size_t errlen)
{
	ft_httpd_t *s;
	int i, rc;

	if (o->handler == NULL) {
		snprintf(err, errlen, "no handler");
		return NULL;
	}
	signal(SIGPIPE, SIG_IGN); /* sendfile(2) has no MSG_NOSIGNAL */
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		oom();
	s->o = *o;
	opts_defaults(&s->o);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->rmu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->loops = calloc((size_t)s->o.threads, sizeof(*s->loops));
	if (s->loops == NULL)
		oom();
	s->nloops = s->o.threads;
	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];

		L->s = s;
		L->idx = i;
		L->lfd = L->efd = -1;
		L->init_rc = 1;
		pthread_mutex_init(&L->qmu, NULL);
		L->tick.tv_sec = tick_ms(&s->o) / 1000;
		L->tick.tv_nsec = (tick_ms(&s->o) % 1000) * 1000000;
		L->hdrs = calloc((size_t)s->o.max_headers, sizeof(*L->hdrs));
		if (L->hdrs == NULL)
			oom();
	}
	s->pool = ft_workpool_create(s->o.workers, "ft-http-w");
	if (s->pool == NULL) {
		snprintf(err, errlen, "cannot start worker threads");
		goto fail;
	}
	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];

		L->lfd = listen_on(s->o.bind, i == 0 ? s->o.port : s->port, i > 0, err, errlen);
		if (L->lfd < 0)
			goto fail;
		if (i == 0)
			s->port = bound_port(L->lfd);
		L->efd = eventfd(0, EFD_CLOEXEC);
		if (L->efd < 0) {
			snprintf(err, errlen, "eventfd: %s", strerror(errno));
			goto fail;
		}
	}
	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];
		char name[16];

		if (pthread_create(&L->th, NULL, loop_main, L) != 0) {
			snprintf(err, errlen, "cannot start loop thread");
			goto fail_threads;
		}
		L->th_started = true;
		snprintf(name, sizeof(name), "ft-http-%d", i % 1000);
		pthread_setname_np(L->th, name);
		pthread_mutex_lock(&s->mu);
		while (L->init_rc == 1)
			pthread_cond_wait(&s->cv, &s->mu);
		rc = L->init_rc;
		pthread_mutex_unlock(&s->mu);
		if (rc != 0) {
			snprintf(err, errlen, "io_uring setup: %s", strerror(-rc));
			goto fail_threads;
		}
	}
	return s;
fail_threads:
	stop_loops(s);
fail:
	free_server(s);
	return NULL;
}

void ft_httpd_stop(ft_httpd_t *s)
{
	if (s == NULL)
		return;
	/* loops finish once every request got its response (deferred ones included: the pool still runs) */
	stop_loops(s);
	free_server(s);
}

int ft_httpd_port(const ft_httpd_t *s)
{
	return s->port;
}

/* ---- request accessors ---- */

ft_method_t ft_req_method(const ft_req_t *r)
{
	return r->method;
}

const char *ft_req_method_name(const ft_req_t *r)
{
	return r->method_name;
}

const char *ft_req_path(const ft_req_t *r, size_t *len)
{
	if (len != NULL)
		*len = r->path_len;
	return r->path != NULL ? r->path : "";
}

const char *ft_req_target(const ft_req_t *r)
{
	return r->target != NULL ? r->target : "";
}

const char *ft_req_query_string(const ft_req_t *r)
{
	return r->query;
}

const char *ft_req_query(const ft_req_t *r, const char *key)
{
	ft_req_t *w = (ft_req_t *)r; /* decoding allocates in the arena */
	const char *p = r->query, *amp, *eq;
	size_t klen = strlen(key), n, kn;
	char *tmp, *val;

	while (*p != 0) {
		amp = strchr(p, '&');
		n = amp != NULL ? (size_t)(amp - p) : strlen(p);
		eq = memchr(p, '=', n);
		kn = eq != NULL ? (size_t)(eq - p) : n;
		if (kn >= klen) {
			tmp = arena_alloc(&w->arena, kn + 1);
			if (ft_pct_decode(p, kn, tmp, FT_PCT_PLUS_SPACE) == (long)klen && memcmp(tmp, key, klen) == 0) {
				if (eq == NULL)
					return "";
				val = arena_alloc(&w->arena, n - kn);
				ft_pct_decode(eq + 1, n - kn - 1, val, FT_PCT_PLUS_SPACE);
				return val;
			}
		}
		p += n;
		if (*p == '&')
			p++;
	}
	return NULL;
}

const char *ft_req_header(const ft_req_t *r, const char *name)
{
	int i;

	for (i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hnames[i], name) == 0)
			return r->hvalues[i];
	return NULL;
}

int ft_req_header_count(const ft_req_t *r)
{
	return r->nhdrs;
}

void ft_req_header_at(const ft_req_t *r, int i, const char **name, const char **value)
{
	if (i < 0 || i >= r->nhdrs) {
		*name = NULL;
		*value = NULL;
		return;
	}
	*name = r->hnames[i];
	*value = r->hvalues[i];
}

int64_t ft_req_content_length(const ft_req_t *r)
{
	return r->chunked ? -1 : r->content_length;
}

const char *ft_req_peer(const ft_req_t *r)
{
	return r->c->peer;
}

void *ft_req_alloc(ft_req_t *r, size_t size)
{
	return arena_alloc(&r->arena, size);
}

char *ft_req_strdup(ft_req_t *r, const char *s)
{
	return arena_strndup(&r->arena, s, strlen(s));
}

void ft_req_on_done(ft_req_t *r, void (*fn)(void *arg), void *arg)
{
	hook_t *h = arena_alloc(&r->arena, sizeof(*h));

	h->fn = fn;
	h->arg = arg;
	h->next = r->hooks;
	r->hooks = h;
}

/*
 * Hands the events ev (EV_*) to r's loop, which then looks at r: directly on the loop thread,
 * through the loop's queue and eventfd from any other thread (see DESIGN, HAND-OVER).
 */
static void req_notify(ft_req_t *r, unsigned ev)
{
	loop_t *L = r->c->L;
	uint64_t one = 1;
	bool wake;

	if (tls_loop == L) {
		r->ev |= ev;
		conn_kick(r->c);
		return;
	}
	pthread_mutex_lock(&L->qmu);
	r->xev |= ev;
	if (r->queued) {
		pthread_mutex_unlock(&L->qmu);
		return;
	}
	r->queued = true;
	r->qnext = NULL;
	if (L->qtail != NULL)
		L->qtail->qnext = r;
	else
		L->qhead = r;
	L->qtail = r;
	wake = !L->qsignaled;
	L->qsignaled = true;
	/*
	 * Written under the lock: once it is released the loop may answer, finish and (at stop) close
	 * efd and free L, so this thread must not touch L afterwards.
	 */
	if (wake && write(L->efd, &one, sizeof(one)) < 0)
		ft_error("http: wake loop: %s", strerror(errno));
	pthread_mutex_unlock(&L->qmu);
}

/* ---- body API ---- */

static bool body_call_ok(ft_req_t *r, const char *what)
{
	if (r->body_called || r->responded) {
		ft_error("http: %s called twice or after the response", what);
		return false;
	}
	r->body_called = true;
	return true;
}

void ft_req_read_body(ft_req_t *r, ft_body_data_fn on_data, ft_body_end_fn on_end, void *arg)
{
	if (!body_call_ok(r, "ft_req_read_body"))
		return;
	r->on_data = on_data;
	r->on_end = on_end;
	r->body_arg = arg;
	req_notify(r, EV_BODY);
}

void ft_req_read_body_all(ft_req_t *r, size_t max, ft_body_all_fn done, void *arg)
{
	if (!body_call_ok(r, "ft_req_read_body_all"))
		return;
	r->all_done = done;
	r->all_max = max;
	r->body_arg = arg;
	req_notify(r, EV_BODY);
}

/* ---- defer ---- */

static void req_work_run(ft_work_t *w)
{
	ft_req_t *r = (ft_req_t *)((char *)w - offsetof(ft_req_t, work));

	r->defer_fn(r, r->defer_arg);
}

void ft_req_defer(ft_req_t *r, void (*fn)(ft_req_t *r, void *arg), void *arg)
{
	r->defer_fn = fn;
	r->defer_arg = arg;
	r->work.fn = req_work_run;
	ft_workpool_submit(r->c->L->s->pool, &r->work);
}

typedef struct {
	ft_work_t work; /* first: the item is freed through it */
	void (*fn)(void *arg);
	void *arg;
} plain_work_t;

static void plain_work_run(ft_work_t *w)
{
	plain_work_t *pw = (plain_work_t *)w;

	pw->fn(pw->arg);
	free(pw);
}

void ft_httpd_defer(ft_httpd_t *s, void (*fn)(void *arg), void *arg)
{
	plain_work_t *pw = malloc(sizeof(*pw));

	if (pw == NULL)
		oom();
	pw->fn = fn;
	pw->arg = arg;
	pw->work.fn = plain_work_run;
	ft_workpool_submit(s->pool, &pw->work);
}

/* ---- responses ---- */

static bool is_token(const char *s)
{
	size_t i;

	if (*s == 0)
		return false;
	for (i = 0; s[i] != 0; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", s[i]))
			return false;
	return true;
}

static bool is_field_value(const char *s)
{
	for (; *s != 0; s++)
		if ((unsigned char)*s < 0x20 ? *s != '\t' : (unsigned char)*s == 0x7f)
			return false;
	return true;
}

void ft_resp_header(ft_req_t *r, const char *name, const char *value)
{
	static const char *owned[] = {"content-length", "date", "server", "connection", "transfer-encoding"};
	size_t i, nl, vl;
	resp_hdr_t *h;

	if (!is_token(name) || !is_field_value(value)) {
		ft_warn("http: dropping invalid response header %s", name);
		return;
	}
	for (i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
		if (strcasecmp(name, owned[i]) == 0)
			return;
	nl = strlen(name);
	vl = strlen(value);
	h = arena_alloc(&r->arena, sizeof(*h));
	h->len = nl + vl + 4;
	h->line = arena_alloc(&r->arena, h->len + 1);
	memcpy(h->line, name, nl);
	memcpy(h->line + nl, ": ", 2);
	memcpy(h->line + nl + 2, value, vl);
	memcpy(h->line + nl + 2 + vl, "\r\n", 3);
	h->next = NULL;
	if (r->rh_tail != NULL)
		r->rh_tail->next = h;
	else
		r->rh_head = h;
	r->rh_tail = h;
	r->rh_bytes += h->len;
}

void ft_resp_headerf(ft_req_t *r, const char *name, const char *fmt, ...)
{
	va_list ap;
	char *v;

	va_start(ap, fmt);
	v = arena_vprintf(&r->arena, fmt, ap);
	va_end(ap);
	ft_resp_header(r, name, v);
}

static bool status_has_body(int status)
{
	return status >= 200 && status != 204 && status != 304;
}

/*
 * Whether the request body is out of the way, so the connection may be kept: no body, or all of it
 * read. A stream's head (tentative) may go out while a stream body is still arriving; if the body
 * then does not complete, the connection is closed after the response all the same.
 */
static bool body_settled(ft_req_t *r, bool tentative)
{
	conn_t *c = r->c;
	bool ok;

	if (!r->chunked && r->content_length == 0)
		return true;
	if (!r->body_stream)
		return r->body_state == BODY_DONE;
	pthread_mutex_lock(&c->smu);
	ok = r->sh.b_eof || (tentative && r->sh.b_err == 0);
	pthread_mutex_unlock(&c->smu);
	return ok;
}

/*
 * Writes the response head into arena memory with body_room bytes spare after it; frame (FR_*)
 * says which length header it carries; decides keep-alive. Returns the buffer, *head_len its head
 * length.
 */
static char *resp_head(ft_req_t *r, int status, const char *ctype, int frame, uint64_t clen, size_t body_room,
		       size_t *head_len)
{
	size_t cap, n;
	char *out;
	resp_hdr_t *h;
	bool body_ok = body_settled(r, r->s_started);

	if (ctype != NULL && !is_field_value(ctype))
		ctype = NULL;
	r->keep_alive = r->client_keep_alive && !r->close_req && body_ok && frame != FR_CLOSE &&
			!atomic_load(&r->c->L->s->stopping);
	cap = 256 + (ctype != NULL ? strlen(ctype) : 0) + r->rh_bytes;
	out = arena_alloc(&r->arena, cap + body_room);
	n = (size_t)snprintf(out, cap, "HTTP/1.1 %d %s\r\nServer: FastTier\r\nDate: %s\r\n", status,
			     reason_phrase(status), http_date());
	if (frame == FR_LENGTH && status_has_body(status))
		n += (size_t)snprintf(out + n, cap - n, "Content-Length: %llu\r\n", (unsigned long long)clen);
	else if (frame == FR_CHUNKED)
		n += (size_t)snprintf(out + n, cap - n, "Transfer-Encoding: chunked\r\n");
	if (ctype != NULL) {
		memcpy(out + n, "Content-Type: ", 14);
		n += 14;
		memcpy(out + n, ctype, strlen(ctype));
		n += strlen(ctype);
		memcpy(out + n, "\r\n", 2);
		n += 2;
	}
	if (!r->keep_alive) {
		memcpy(out + n, "Connection: close\r\n", 19);
		n += 19;
	} else if (r->minor == 0) {
		memcpy(out + n, "Connection: keep-alive\r\n", 24);
		n += 24;
	}
	for (h = r->rh_head; h != NULL; h = h->next) {
		memcpy(out + n, h->line, h->len);
		n += h->len;
	}
	memcpy(out + n, "\r\n", 2);
	n += 2;
	*head_len = n;
	return out;
}

/* Hands the recorded response to r's loop. After this r belongs to the server. */
static void resp_commit(ft_req_t *r)
{
	r->responded = true;
	req_notify(r, EV_RESPONDED);
}

static int clamp_status(int status)
{
	return status < 200 || status > 999 ? 500 : status;
}

/* A plain response call after ft_resp_stream_start: the head is out, so all that is left is to abort. */
static bool stream_misuse(ft_req_t *r, const char *what)
{
	if (!r->s_started)
		return false;
	ft_error("http: %s after ft_resp_stream_start; aborting the stream", what);
	ft_resp_stream_end(r, -EINVAL);
	return true;
}

void ft_resp_bytes(ft_req_t *r, int status, const char *content_type, const void *body, size_t len)
{
	bool send_body;
	size_t hl;
	char *out;

	if (stream_misuse(r, "ft_resp_bytes"))
		return;
	status = clamp_status(status);
	send_body = r->method != FT_HTTP_HEAD && status_has_body(status);
	out = resp_head(r, status, content_type, FR_LENGTH, len, send_body ? len : 0, &hl);
	if (send_body && len > 0)
		memcpy(out + hl, body, len);
	r->out = out;
	r->out_len = hl + (send_body ? len : 0);
	resp_commit(r);
}

void ft_resp_file(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len)
{
	size_t hl;

	if (stream_misuse(r, "ft_resp_file")) {
		close(fd);
		return;
	}
	status = clamp_status(status);
	r->out = resp_head(r, status, content_type, FR_LENGTH, len, 0, &hl);
	r->out_len = hl;
	if (r->method != FT_HTTP_HEAD && status_has_body(status) && len > 0) {
		r->file_fd = fd;
		r->file_off = off;
		r->file_left = len;
	} else {
		close(fd);
	}
	resp_commit(r);
}

/* Appends s as a JSON string body (quotes included) to out; out has room for 6 * strlen(s) + 3. */
static size_t json_escape(const char *s, char *out)
{
	size_t n = 0;
	unsigned char ch;

	out[n++] = '"';
	for (; (ch = (unsigned char)*s) != 0; s++) {
		if (ch == '"' || ch == '\\') {
			out[n++] = '\\';
			out[n++] = (char)ch;
		} else if (ch == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
		} else if (ch == '\r') {
			out[n++] = '\\';
			out[n++] = 'r';
		} else if (ch == '\t') {
			out[n++] = '\\';
			out[n++] = 't';
		} else if (ch < 0x20 || ch >= 0x7f) {
			/* bytes >= 0x7f are written as \u00XX so the body is valid JSON whatever they were */
			memcpy(out + n, "\\u00", 4);
			ft_hex_encode(&ch, 1, out + n + 4); /* its NUL lands where the next byte or the quote goes */
			n += 6;
		} else {
			out[n++] = (char)ch;
		}
	}
	out[n++] = '"';
	return n;
}

void ft_resp_error(ft_req_t *r, int status, const char *fmt, ...)
{
	va_list ap;
	char *msg, *body;
	size_t n;

	va_start(ap, fmt);
	msg = arena_vprintf(&r->arena, fmt, ap);
	va_end(ap);
	status = clamp_status(status);
	body = arena_alloc(&r->arena, 40 + 6 * strlen(msg) + 3);
	n = (size_t)sprintf(body, "{\"status\": %d, \"message\": ", status);
	n += json_escape(msg, body + n);
	body[n++] = '}';
	ft_resp_bytes(r, status, "application/json", body, n);
}

void ft_resp_redirect(ft_req_t *r, int status, const char *location)
{
	ft_resp_header(r, "Location", location);
	ft_resp_bytes(r, status, NULL, "", 0);
}

void ft_resp_close(ft_req_t *r)
{
	r->close_req = true;
}

/* ---- blocking streams, worker side (see DESIGN) ---- */

static bool on_loop_thread(const char *what)
{
	if (tls_loop == NULL)
		return false;
	ft_error("http: %s would block a loop thread; call it from a worker", what);
	return true;
}

/* Waits for the loop on the connection's condition variable; c->smu held. */
static void stream_wait(conn_t *c)
{
	c->req.sh.waiters++;
	pthread_cond_wait(&c->scv, &c->smu);
	c->req.sh.waiters--;
}

ssize_t ft_req_body_read(ft_req_t *r, void *buf, size_t cap)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	bool resume = false;
	size_t pos, n;
	ssize_t rc;

	if (on_loop_thread("ft_req_body_read"))
		return -EDEADLK;
	if (!r->body_stream) {
		if (!r->chunked && r->content_length == 0)
			return 0;
		if (!body_call_ok(r, "ft_req_body_read"))
			return -EINVAL;
		r->b_ring = stream_buf_take(c->L->s);
		r->body_stream = true;
		req_notify(r, EV_BODY); /* the loop starts reading (and sends "100 Continue") */
	}
	if (cap == 0)
		return -EINVAL;
	pthread_mutex_lock(&c->smu);
	while (sh->b_len == 0 && !sh->b_eof && sh->b_err == 0)
		stream_wait(c);
	if (sh->b_len == 0) {
		rc = sh->b_eof ? 0 : sh->b_err;
		pthread_mutex_unlock(&c->smu);
		return rc;
	}
	pos = sh->b_rd;
	n = sh->b_len < cap ? sh->b_len : cap;
	pthread_mutex_unlock(&c->smu);
	ring_get(r->b_ring, pos, buf, n); /* filled space: only this thread frees it */
	pthread_mutex_lock(&c->smu);
	sh->b_rd = (pos + n) % STREAM_BUF;
	sh->b_len -= n;
	if (sh->b_paused && STREAM_BUF - sh->b_len >= STREAM_RESUME) {
		sh->b_paused = false;
		resume = true;
	}
	pthread_mutex_unlock(&c->smu);
	if (resume)
		req_notify(r, EV_FEED);
	return (ssize_t)n;
}

static bool stream_is_gone(ft_req_t *r)
{
	bool gone;

	pthread_mutex_lock(&r->c->smu);
	gone = r->sh.gone;
	pthread_mutex_unlock(&r->c->smu);
	return gone;
}

int ft_resp_stream_start(ft_req_t *r, int status, const char *content_type, int64_t content_length)
{
	bool no_body;
	int head_frame;
	size_t hl;

	if (r->responded || r->s_started) {
		ft_error("http: ft_resp_stream_start called twice or after the response");
		return -EINVAL;
	}
	status = clamp_status(status);
	no_body = r->method == FT_HTTP_HEAD || !status_has_body(status);
	if (content_length >= 0) {
		head_frame = FR_LENGTH;
		r->s_frame = no_body ? FR_NONE : FR_LENGTH;
		r->s_clen = (uint64_t)content_length;
	} else if (no_body) {
		head_frame = r->s_frame = FR_NONE;
	} else {
		head_frame = r->s_frame = r->minor >= 1 ? FR_CHUNKED : FR_CLOSE;
	}
	r->s_started = true;
	r->out = resp_head(r, status, content_type, head_frame, r->s_clen, 0, &hl);
	r->out_len = hl;
	if (r->s_frame != FR_NONE) {
		r->s_ring = stream_buf_take(r->c->L->s);
	}
	req_notify(r, EV_STREAM);
	return stream_is_gone(r) ? -ECONNRESET : 0;
}

/* Queues one piece of at most room bytes of framing and data at pos; returns the data bytes taken. */
static size_t stream_put_piece(ft_req_t *r, size_t pos, size_t room, const unsigned char *p, size_t len, size_t *queued)
{
	char head[CHUNK_HEAD_MAX + 2];
	size_t n, hl = 0;

	if (r->s_frame == FR_CHUNKED) {
		n = len < room - CHUNK_HEAD_MAX - 4 ? len : room - CHUNK_HEAD_MAX - 4;
		hl = (size_t)snprintf(head, sizeof(head), "%s%zx\r\n", r->s_crlf_due ? "\r\n" : "", n);
		r->s_crlf_due = false;
		pos = ring_put(r->s_ring, pos, head, hl);
		pos = ring_put(r->s_ring, pos, p, n);
		ring_put(r->s_ring, pos, "\r\n", 2);
		*queued = hl + n + 2;
		return n;
	}
	n = len < room ? len : room;
	ring_put(r->s_ring, pos, p, n);
	*queued = n;
	return n;
}

/* Under c->smu, after queuing: wakes the loop thread when the stream was idle (the lock is dropped to notify). */
static void stream_kick(ft_req_t *r)
{
	conn_t *c = r->c;

	if (!r->sh.s_idle)
		return;
	r->sh.s_idle = false;
	pthread_mutex_unlock(&c->smu);
	req_notify(r, EV_SEND);
	pthread_mutex_lock(&c->smu);
}

/*
 * The checks every worker-thread stream call (write, sendfile, splice) makes first: a started
 * stream, not the loop thread, and no byte past a Content-Length. 0, or the -errno to return.
 */
static int stream_call_check(ft_req_t *r, const char *what, uint64_t len)
{
	if (!r->s_started || r->responded) {
		ft_error("http: %s without a started stream", what);
		return -EINVAL;
	}
	if (on_loop_thread(what))
		return -EDEADLK;
	if (r->s_frame == FR_LENGTH && len > r->s_clen - r->s_written) {
		ft_error("http: %s past its Content-Length of %llu", what, (unsigned long long)r->s_clen);
		r->s_bad = true;
		return -EMSGSIZE;
	}
	return 0;
}

int ft_resp_stream_write(ft_req_t *r, const void *buf, size_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	const unsigned char *p = buf;
	size_t need, room, pos, n, queued;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_write", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE)
		len = 0; /* HEAD, 204, 304: headers only */
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		need = (len < STREAM_LOWAT ? len : STREAM_LOWAT) + (r->s_frame == FR_CHUNKED ? CHUNK_HEAD_MAX + 4 : 0);
		room = STREAM_BUF - STREAM_END_RESERVE - sh->s_len;
		if (room < need || sh->f_len > 0) { /* ring bytes go after a queued file range only */
			stream_wait(c);
			continue;
		}
		pos = (sh->s_rd + sh->s_len) % STREAM_BUF;
		pthread_mutex_unlock(&c->smu);
		n = stream_put_piece(r, pos, room, p, len, &queued); /* free space: only this thread writes */
		p += n;
		len -= n;
		r->s_written += n;
		pthread_mutex_lock(&c->smu);
		sh->s_len += queued;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

/* Makes r's own dup of fd the stream's file, once no range of the previous one is queued. 0 or -errno. */
static int stream_file_set(ft_req_t *r, int fd)
{
	conn_t *c = r->c;
	int dup_fd;

	if (r->sf_fd >= 0 && !r->sf_pipe && r->sf_src == fd)
		return 0;
	pthread_mutex_lock(&c->smu);
	while (r->sh.f_len > 0 && !r->sh.gone)
		stream_wait(c);
	pthread_mutex_unlock(&c->smu);
	dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return -errno;
	pthread_mutex_lock(&c->smu); /* the loop reads sf_fd under smu while a range is queued */
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	r->sf_fd = dup_fd;
	r->sf_src = fd;
	r->sf_pipe = false;
	pthread_mutex_unlock(&c->smu);
	if (r->sp_wr >= 0) {
		close(r->sp_wr);
		r->sp_wr = -1;
	}
	return 0;
}

/* Makes the request's splice pipe the stream's source, once no file range is queued. 0 or -errno. */
static int stream_pipe_set(ft_req_t *r)
{
	conn_t *c = r->c;
	int p[2], sz;

	if (r->sf_pipe)
		return 0;
	pthread_mutex_lock(&c->smu);
	while (r->sh.f_len > 0 && !r->sh.gone)
		stream_wait(c);
	pthread_mutex_unlock(&c->smu);
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	/* the loop's end never blocks (a full socket is waited for with POLLOUT); a smaller pipe than
	 * asked for (the per-user pipe limit) only means smaller steps */
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	sz = fcntl(p[1], F_SETPIPE_SZ, STREAM_PIPE);
	if (sz <= 0)
		sz = fcntl(p[1], F_GETPIPE_SZ);
	r->sp_cap = sz > 0 ? (size_t)sz : 65536;
	if (r->sp_cap > STREAM_PIPE)
		r->sp_cap = STREAM_PIPE;
	pthread_mutex_lock(&c->smu);
	if (r->sf_fd >= 0)
		close(r->sf_fd);
	r->sf_fd = p[0];
	r->sf_src = -1;
	r->sf_pipe = true;
	pthread_mutex_unlock(&c->smu);
	r->sp_wr = p[1];
	return 0;
}

/* Chunked framing: queues the head of a chunk of n file bytes (and the previous chunk's CRLF); smu held. */
static void stream_file_chunk_head(ft_req_t *r, uint64_t n)
{
	char head[CHUNK_HEAD_MAX + 2];
	size_t hl, pos;

	hl = (size_t)snprintf(head, sizeof(head), "%s%llx\r\n", r->s_crlf_due ? "\r\n" : "", (unsigned long long)n);
	pos = (r->sh.s_rd + r->sh.s_len) % STREAM_BUF;
	ring_put(r->s_ring, pos, head, hl); /* free space: only this thread writes (a few bytes, under smu) */
	r->sh.s_len += hl;
	r->s_crlf_due = true;
}

int ft_resp_stream_sendfile(ft_req_t *r, int fd, uint64_t off, uint64_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	uint64_t room, n;
	bool chunked = r->s_frame == FR_CHUNKED;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_sendfile", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE || len == 0)
		return stream_is_gone(r) ? -ECONNRESET : 0; /* HEAD, 204, 304: headers only */
	rc = stream_file_set(r, fd);
	if (rc != 0) {
		r->s_bad = true; /* bytes the caller counted on are missing: the stream must not end well */
		return rc;
	}
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		room = STREAM_FILE_MAX - sh->f_len;
		if (sh->f_len > 0 && (chunked || sh->f_off + sh->f_len != off)) {
			stream_wait(c); /* not contiguous (or a chunk head must go first): the range drains */
			continue;
		}
		if (room < (len < STREAM_FILE_LOWAT ? len : STREAM_FILE_LOWAT) ||
		    (chunked && STREAM_BUF - STREAM_END_RESERVE - sh->s_len < CHUNK_HEAD_MAX + 4)) {
			stream_wait(c);
			continue;
		}
		n = len < room ? len : room;
		if (chunked)
			stream_file_chunk_head(r, n);
		if (sh->f_len == 0)
			sh->f_off = off;
		sh->f_len += n;
		off += n;
		len -= n;
		r->s_written += n;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

/* One splice(2) of up to n bytes from fd into the stream's pipe; the count, or -errno as ft_resp_stream_splice. */
static ssize_t stream_splice_in(ft_req_t *r, int fd, size_t n)
{
	ssize_t k;

	do
		k = splice(fd, NULL, r->sp_wr, NULL, n, SPLICE_F_MOVE);
	while (k < 0 && errno == EINTR);
	if (k > 0)
		return k;
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -ETIMEDOUT; /* the socket's SO_RCVTIMEO ran out */
	return -EPIPE;             /* the source ended (or failed) before len bytes */
}

int ft_resp_stream_splice(ft_req_t *r, int fd, uint64_t len)
{
	conn_t *c = r->c;
	stream_shared_t *sh = &r->sh;
	ssize_t k;
	size_t room;
	int rc;

	rc = stream_call_check(r, "ft_resp_stream_splice", len);
	if (rc != 0)
		return rc;
	if (r->s_frame == FR_NONE || len == 0)
		return stream_is_gone(r) ? -ECONNRESET : 0; /* HEAD, 204, 304: headers only */
	if (r->s_frame != FR_LENGTH) {
		ft_error("http: ft_resp_stream_splice needs a stream with a Content-Length");
		r->s_bad = true;
		return -EINVAL;
	}
	rc = stream_pipe_set(r);
	if (rc != 0) {
		r->s_bad = true;
		return rc;
	}
	pthread_mutex_lock(&c->smu);
	while (len > 0 && !sh->gone) {
		room = r->sp_cap - (size_t)sh->f_len;
		if (sh->f_len >= r->sp_cap || (sh->f_len > 0 && room < STREAM_LOWAT && room < len)) {
			stream_wait(c);
			continue;
		}
		pthread_mutex_unlock(&c->smu);
		k = stream_splice_in(r, fd, len < room ? (size_t)len : room); /* blocks on fd, not on the pipe */
		pthread_mutex_lock(&c->smu);
		if (k < 0) {
			r->s_bad = true; /* the body is cut: the stream must not end well */
			pthread_mutex_unlock(&c->smu);
			return (int)k;
		}
		sh->f_len += (uint64_t)k;
		len -= (uint64_t)k;
		r->s_written += (uint64_t)k;
		stream_kick(r);
	}
	rc = sh->gone ? -ECONNRESET : 0;
	pthread_mutex_unlock(&c->smu);
	return rc;
}

void ft_resp_stream_end(ft_req_t *r, int err)
{
	conn_t *c = r->c;
	size_t pos;

	if (r->responded) {
		ft_error("http: ft_resp_stream_end after the response");
		return;
	}
	if (!r->s_started) {
		ft_error("http: ft_resp_stream_end without ft_resp_stream_start");
		ft_resp_close(r);
		ft_resp_error(r, 500, "response stream ended before it started");
		return;
	}
	r->s_end_err = err;
	if (err == 0 && r->s_frame == FR_CHUNKED) {
		const char *last = r->s_crlf_due ? "\r\n0\r\n\r\n" : "0\r\n\r\n";

		pthread_mutex_lock(&c->smu);
		while (r->sh.f_len > 0 && !r->sh.gone && tls_loop == NULL)
			stream_wait(c); /* the last chunk goes after the queued file range */
		pos = (r->sh.s_rd + r->sh.s_len) % STREAM_BUF;
		pthread_mutex_unlock(&c->smu);
		ring_put(r->s_ring, pos, last, strlen(last)); /* writes leave STREAM_END_RESERVE free */
		pthread_mutex_lock(&c->smu);
		r->sh.s_len += strlen(last);
		pthread_mutex_unlock(&c->smu);
	}
	resp_commit(r); /* EV_RESPONDED: the loop sends what is left, then finishes r */
}
