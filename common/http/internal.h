/* SPDX-License-Identifier: Apache-2.0 */
/* Private contract between the files of the public-port HTTP server: its state, constants and cross-file calls. */
#ifndef FT_HTTP_INTERNAL_H
#define FT_HTTP_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "base/metrics.h"
#include "base/workpool.h"
#include "http/http.h"
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
 * (dropped by http_conn_close), one per in-flight ring operation (recv, send, poll), one while it sits in
 * the kick list, and one from the start of a request to the end of its response (http_finish_request).
 * So a request outlives a dropped client until its response call, and the fd number is not reused
 * while the kernel may still complete an operation on it. Closing = shutdown(2) (which completes
 * pending operations) and dropping the open reference; close(2) happens when the count reaches 0.
 *
 * HAND-OVER
 * Whoever holds the request (the loop running the handler, or a worker after ft_req_defer) records
 * what it wants and calls http_req_notify() with event bits (EV_*). From another thread the bits go into
 * r->xev under the loop's queue lock and the loop takes them at dequeue time, in the same critical
 * section that marks r out of the queue. The response call is the last thing the holder does, so
 * once the loop has taken EV_RESPONDED (r->resp_ready) nobody else touches r and the loop may
 * finish it; the loop never acts on a response it learnt of any other way.
 *
 * BLOCKING STREAMS (ft_req_body_read, ft_resp_stream_*)
 * A worker relays bodies through two rings per request (STREAM_BUF each, taken on first use from
 * the server's bounded free list of rings, malloc'd when it is empty, and given back to the list by
 * http_finish_request: reused rings have their pages mapped already, so a stream costs no page faults):
 * - body: the loop de-chunks received bytes into b_ring and stops reading the socket (no recv
 *   armed, so no body timeout either) while the ring is full; the worker copies out and, once
 *   STREAM_RESUME bytes are free again, notifies EV_FEED so the loop resumes. So at most the
 *   connection's read buffer plus the ring is buffered per request.
 * - response: the head goes out of r->out, then the worker copies framed bytes (chunk head, data,
 *   CRLF) into s_ring and blocks while it is full; the loop sends from the ring, one send at a
 *   time, and wakes the worker as sends complete. The loop notes when it ran dry (s_idle) so only
 *   then does a write cost a wake-up. While the loop is dry (s_idle, nothing queued) it sends
 *   nothing until notified, so a write (plain TCP) sends its framed bytes on the socket itself
 *   (non-blocking) and only what the socket does not take goes into the ring and to the loop: a
 *   stream the client keeps up with costs no hand-off between the threads at all.
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

#define ARENA_INLINE 4096
#define STREAM_BUF (256 * 1024) /* each ring of a blocking stream */

/* TAG_WATCH: an ft_httpd_watch (0 with a NULL pointer: a completion nobody waits for, e.g. a cancel) */
enum { TAG_WATCH = 0, TAG_ACCEPT, TAG_EVENT, TAG_TIMER, TAG_RECV, TAG_SEND, TAG_POLL, TAG_READ };
#define TAG_MASK 7u

enum { PH_HEAD = 0, PH_HANDLER, PH_SENDING, PH_LINGER };
enum { BODY_NONE = 0, BODY_WANT, BODY_ACTIVE, BODY_DONE, BODY_FAILED };

/* Events handed to the loop by http_req_notify(). */
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

typedef struct loop loop_t;
typedef struct conn conn_t;
typedef struct http_tls_conn http_tls_conn_t; /* tls.c */
struct ssl_ctx_st;

/* ---- per-request arena ---- */

typedef struct arena_blk arena_blk_t; /* arena.c */

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

typedef struct resp_hdr resp_hdr_t; /* resp.c: one added response header */

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
	bool s_idle;          /* the loop found nothing to send: the next write notifies EV_SEND */
	uint64_t direct_sent; /* bytes the worker sent on the socket itself (stream_put_direct) */
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
	/* the query decoded once, on the first ft_req_query (in the arena): names[i] is name_lens[i] bytes */
	const char **q_names, **q_values;
	size_t *q_name_lens;
	int q_count; /* -1 until decoded */
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
	char *all_buf; /* malloc'd, freed by http_finish_request */
	uint64_t body_left;
	ft_hp_chunked_t chunk;
	/* hand-over (see DESIGN): ev and resp_ready on the loop, xev under the loop's qmu */
	unsigned ev, xev;
	bool resp_ready;
	/* blocking streams: set by the holder before the event that tells the loop; read by the loop after */
	bool body_stream;               /* the body goes to b_ring (ft_req_body_read) */
	unsigned char *b_ring, *s_ring; /* STREAM_BUF each, from http_stream_buf_take, http_finish_request gives back */
	bool s_started, s_bad;          /* ft_resp_stream_start called; a write broke the framing */
	int s_frame;                    /* FR_* */
	int s_end_err;                  /* ft_resp_stream_end's err */
	uint64_t s_clen, s_written;
	int sf_fd, sf_src;  /* stream from a file: our dup (http_finish_request closes it), the caller's fd */
	bool sf_pipe;       /* sf_fd is the read end of the splice pipe (set under smu) */
	int sp_wr;          /* splice pipe's write end: the worker's (http_finish_request closes it) */
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
	bool file_borrowed; /* file_fd is the caller's (ft_resp_file_borrowed): never closed here */
	off_t file_off;
	uint64_t file_left;
	off_t res_end;  /* [file_off, res_end) is in the page cache (filesend.c) */
	bool file_wait; /* the body waits for a splice into the pipe (filesend.c) */
	int file_err;   /* errno of a failed splice into the pipe: the body is cut */
	int fp_rd,
		fp_wr;   /* the body's pipe, made on the first byte not in the page cache; http_finish_request closes */
	size_t fp_cap;   /* the pipe's size */
	uint64_t fp_len; /* file bytes from file_off in the pipe */
	bool fp_short;   /* a splice into the pipe met the end of the file */
	/* a body from a socket (ft_resp_socket): file_fd is the caller's connected socket, read on the loop */
	bool file_sock;
	bool sock_timed_out; /* the socket stayed silent for sock_timeout_ms */
	int sock_timeout_ms;
	uint64_t sock_left; /* body bytes not yet read from the socket */
	void (*sock_done)(void *arg, int err);
	void *sock_arg;
	/* defer and hand-over */
	ft_work_t work;
	void (*defer_fn)(ft_req_t *r, void *arg);
	void *defer_arg;
	ft_req_t *qnext;
	bool queued;   /* in the loop's hand-over queue (under qmu) */
	hook_t *hooks; /* newest first */
	/* metrics (loop thread, except m_cold: the holder's, read after the hand-over) */
	int m_status;        /* the response's status, 0 before a response head */
	bool m_cold;         /* ft_req_mark_cold */
	uint64_t m_start_ns; /* CLOCK_MONOTONIC at the request head */
	uint64_t m_sent;     /* response bytes sent */
	uint64_t m_recv;     /* request body bytes received */
	arena_t arena;       /* must stay last: req_clear() zeroes everything before it */
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
	http_tls_conn_t *tls; /* NULL on a plain connection */
	/* the ring's splice of a file body into its pipe, or its poll of a socket body's source, in flight
	 * (filesend.c); it may outlive its request */
	bool rd_inflight;
	bool rd_poll;             /* the one in flight is a poll of a socket (ft_resp_socket) */
	unsigned req_gen, rd_gen; /* requests finished on c; req_gen when the splice was submitted */
	uint64_t rd_len;
	bool sndbuf_small; /* the socket's send buffer is PIPE_SNDBUF's while a body goes through a pipe */
	ft_req_t req;
};

#define HTTP_FDQ_MAX 64

/* A listening socket a loop accepts on with a multishot accept; its address tags the ring's TAG_ACCEPT. */
typedef struct {
	_Alignas(8) int fd; /* the TCP one is the loop's (SO_REUSEPORT); the Unix one the server's, shared */
	bool armed, retry;
} http_listener_t;

struct loop {
	ft_httpd_t *s;
	int idx;
	pthread_t th;
	bool th_started;
	struct io_uring ring;
	http_listener_t acc[2]; /* [0] TCP, [1] the Unix socket (fd -1 when none) */
	int efd;
	uint64_t efd_val;
	struct __kernel_timespec tick;
	conn_t *conns;
	int nconns;
	conn_t *kick_head, *kick_tail;
	ft_hp_header_t *hdrs;     /* parse scratch, max_headers entries */
	unsigned char *probe_buf; /* filesend.c's RWF_NOWAIT reads of small ranges, made on first use */
	pthread_mutex_t qmu;
	ft_req_t *qhead, *qtail;
	int fdq[HTTP_FDQ_MAX]; /* connections of the Unix socket another loop accepted for this one (under qmu) */
	int nfdq;
	bool qsignaled;
	atomic_bool stop_req;
	bool stopping;
	int64_t now;
	int64_t stop_deadline;      /* stopping: connections still under way are closed then */
	int init_rc;                /* ring setup result, 1 = pending */
	struct http_watch *watches; /* ft_httpd_watch's, freed when the loop ends */
};

struct ft_httpd {
	ft_httpd_opts_t o;
	int port;
	int ufd;         /* the Unix socket's listener (o.unix_path), -1 when none */
	char upath[108]; /* its path, unlinked at stop if it is still the socket file of (uino, udev) */
	ino_t uino;
	dev_t udev;
	atomic_uint unext; /* round-robin of the Unix socket's connections over the loops */
	int nloops;
	loop_t *loops;
	ft_workpool_t *pool;
	struct ssl_ctx_st *tls_ctx; /* NULL: plain HTTP */
	atomic_bool stopping;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* free stream rings (see BLOCKING STREAMS): a list through their first bytes, under rmu */
	pthread_mutex_t rmu;
	void *ring_free;
	int ring_nfree;
};

/* The loop of the calling thread; NULL on any other thread. */
extern __thread loop_t *http_tls_loop;

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t http_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ring user_data: a loop or connection pointer with a TAG_* in its low bits */
static inline uint64_t http_ud(const void *p, unsigned tag)
{
	return (uint64_t)(uintptr_t)p | tag;
}

/* ---- arena.c ---- */

/* Logs and aborts: the server does not run on without memory. */
_Noreturn void http_oom(void);
/* size bytes (16-aligned) that live until http_arena_reset; never NULL. */
void *http_arena_alloc(arena_t *a, size_t size);
/* Frees every block; the arena is empty again. */
void http_arena_reset(arena_t *a);
char *http_arena_strndup(arena_t *a, const char *s, size_t n);
char *http_arena_vprintf(arena_t *a, const char *fmt, va_list ap);

/* ---- loop.c ---- */

/* A submission entry of L's ring, submitting what is queued when the ring is full. */
struct io_uring_sqe *http_get_sqe(loop_t *L);
/* Hands the events ev (EV_*) to r's loop, from any thread (see DESIGN, HAND-OVER). */
void http_req_notify(ft_req_t *r, unsigned ev);

/* ---- conn.c ---- */

/* A new connection on L for the accepted fd (which it owns); on_unix: from the Unix socket's listener. */
void http_conn_new(loop_t *L, int fd, bool on_unix);
void http_conn_unref(conn_t *c);
/* Shuts c down; the fd is closed once the last reference goes. */
void http_conn_close(conn_t *c);
/* Queues c to be looked at from the top of the loop. */
void http_conn_kick(conn_t *c);
/* Acts on the events the request's holder handed over, from the top of the loop. */
void http_conn_process(conn_t *c);
/* The ring's completion of a recv on c. */
void http_on_recv(conn_t *c, int res);
/* Ring operations on c; each holds a reference to c until its completion. */
void http_recv_arm(conn_t *c);
/* While the handler works (no response yet, no body left to read): a receive that sees the client close. */
void http_watch_close(conn_t *c);
void http_ring_send(conn_t *c, const void *p, size_t n, bool interim);
void http_poll_out(conn_t *c);
/* Grows the read buffer to at least want bytes. */
void http_buf_grow(conn_t *c, size_t want);
/* Runs the on_done hooks, releases the request's memory and fds, drops the request reference. */
void http_finish_request(conn_t *c);
/* Counts a finished request in the metrics registry (status, bytes, duration); on the loop thread. */
void http_count_request(const ft_req_t *r);
/* The response is sent (ok) or failed: keep-alive or close; the caller holds a reference to c. */
void http_response_done(conn_t *c, bool ok);
/* The server answers on its own (parse errors, timeouts, 413) and closes after. */
void http_server_error(conn_t *c, int status, const char *msg);

/* ---- body.c ---- */

/* The body was asked for: starts reading it (and sends "100 Continue" when the client waits for it). */
void http_body_start(conn_t *c);
/* Feeds buffered body bytes to the reader, then reads more if the body is not complete. */
void http_body_feed(conn_t *c);
/* Ends the body with err (0 = complete) and tells the reader. */
void http_body_end(conn_t *c, int err);

/* ---- resp.c ---- */

/* Starts sending "100 Continue" on c. */
void http_send_continue(conn_t *c);
/* The handler made its response call; on the loop thread, caller holds a reference. */
void http_on_responded(conn_t *c);
/* The ring's completions of a send and of a POLLOUT poll on c. */
void http_on_send(conn_t *c, int res);
void http_on_poll(conn_t *c);
/* The response head of r in arena memory with body_room bytes spare after it (frame: FR_*). */
char *http_resp_head(ft_req_t *r, int status, const char *ctype, int frame, uint64_t clen, size_t body_room,
		     size_t *head_len);
/* Hands the recorded response to r's loop. After this r belongs to the server. */
void http_resp_commit(ft_req_t *r);
/* status, or 500 when it is not a final status. */
int http_clamp_status(int status);
bool http_status_has_body(int status);

/* Resumes a file body that waited for a splice into its pipe (filesend.c calls it). */
void http_file_resume(conn_t *c);

/* ---- filesend.c ---- */

/* What http_file_body_send left to do. */
enum {
	FILE_DONE = 0, /* the body is out */
	FILE_WAIT,     /* a splice into the pipe is in flight: its completion calls http_file_resume */
	FILE_POLL,     /* the socket is full: the caller arms POLLOUT */
	FILE_CUT,      /* the file failed or ended early, or the client is gone: close without the rest */
};
/*
 * Sends r's file body (file_fd from file_off, file_left bytes) until it is out or has to wait, never
 * waiting for the disk on the loop thread: bytes in the page cache by sendfile(2), the others through
 * the request's pipe, filled by an io_uring splice (see DESIGN in filesend.c).
 */
int http_file_body_send(conn_t *c);
/* The ring's completion of a splice into a file body's pipe, or of a socket body's poll, on c (TAG_READ). */
void http_on_file_read(conn_t *c, int res);
/*
 * Whether body bytes can follow r's head at once (the head then goes with MSG_MORE, or staged for
 * TLS): always for a file; for a socket body, once what the socket has is in the pipe (a head held
 * back for bytes that may be long in coming would wait with them).
 */
bool http_file_body_ready(conn_t *c);
/* A socket body's source poll in flight is cancelled (the connection closes: nothing else would end it). */
void http_file_sock_cancel(conn_t *c);
/* The end of a request with a socket body: done(arg, err) of its owner (ft_resp_socket). */
void http_file_sock_done(conn_t *c);
/* The end of a request whose body went through a pipe: gives c's socket back a send buffer for any body. */
void http_file_sndbuf_restore(conn_t *c);
/*
 * Worker thread: makes [off, off + len) of fd readable from the page cache, reading what is not there
 * (sendfile(2) to /dev/null: the pages are read, nothing is copied), so that the loop's sendfile of a
 * stream's file range does not wait for the disk. Best effort: a read error or an early end is left
 * for the loop's sendfile to meet (it cuts the stream).
 */
void http_file_make_resident(int fd, uint64_t off, uint64_t len);
/* Residency by RWF_NOWAIT probes alone, as where cachestat(2) is missing (on = true), or cachestat again (tests). */
void http_file_residency_probes_only(bool on);

/* ---- stream.c ---- */

/* A STREAM_BUF ring from s's free list (or malloc'd); never NULL. http_stream_buf_give takes it back (NULL ignored). */
unsigned char *http_stream_buf_take(ft_httpd_t *s);
void http_stream_buf_give(ft_httpd_t *s, unsigned char *p);
/* Copies n bytes into / out of a stream ring at pos, wrapping; http_stream_ring_put returns the position after them. */
size_t http_stream_ring_put(unsigned char *ring, size_t pos, const void *src, size_t n);
void http_stream_ring_get(const unsigned char *ring, size_t pos, void *dst, size_t n);
/* Wakes the threads waiting on c->scv (c->smu held); waits on it (c->smu held). */
void http_stream_wake_locked(conn_t *c);
void http_stream_wait(conn_t *c);
/* The connection closed: stream calls fail from now on, and a worker blocked in one wakes up. */
void http_stream_gone(conn_t *c);
/* Sends the stream's next piece; finishes the request once it is all out after the worker's end. */
void http_stream_send_more(conn_t *c);
/* The ring's completion of a stream send. */
void http_stream_on_send(conn_t *c, int res);
/* True (and logs) on a loop thread, where what would block. */
bool http_on_loop_thread(const char *what);

/* ---- tls.c ---- */

/* s->tls_ctx from s->o's certificate flags (NULL without them). 0, or -1 with err filled. */
int http_tls_ctx_init(ft_httpd_t *s, char *err, size_t errlen);
void http_tls_ctx_free(ft_httpd_t *s);
/* c->tls for a connection of a TLS server. 0, -1 when out of memory. */
int http_tls_conn_new(conn_t *c);
void http_tls_conn_free(conn_t *c);
/* A TLS close_notify, best effort, before the write side is shut. */
void http_tls_close_notify(conn_t *c);
/* http_recv_arm / http_ring_send of a TLS connection: the readiness wait under the same tag (see tls.c). */
void http_tls_recv_arm(conn_t *c);
void http_tls_send(conn_t *c, const void *p, size_t n);
/*
 * The ring's completion of a TLS connection's TAG_RECV / TAG_SEND: true with *res set as a plain
 * recv / send would have (bytes, 0, -errno); false when it waits again (the operation stays in flight).
 */
bool http_tls_on_recv(conn_t *c, int *res);
bool http_tls_on_send(conn_t *c, int *res);
/*
 * send(2) of a file response's head, whose file bytes follow with http_tls_sendfile (the head may
 * be staged to go out with them), and sendfile(2) / splice(2) (pipe) on a non-blocking socket, through
 * TLS: bytes, or -1 with errno. The head is staged only when may_stage (body bytes follow at once).
 */
ssize_t http_tls_write_head(conn_t *c, const void *p, size_t n, bool may_stage);
ssize_t http_tls_sendfile(conn_t *c, int fd, off_t *off, size_t n, bool pipe);

#endif
