/* SPDX-License-Identifier: Apache-2.0 */
/* Public-port HTTP/1.1 server on io_uring: the small request/response interface handlers see. */
#ifndef FT_HTTP_H
#define FT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * DESIGN
 * One loop thread per CPU (configurable), each with its own io_uring and its own SO_REUSEPORT
 * listener with multishot accept. A loop thread parses the request head and calls the handler
 * on that thread. Handlers must not wait on the network: work that does runs through
 * ft_req_defer() on the server's worker pool. Local disk I/O (open, pread/pwrite of page-cache
 * data, xattrs) is allowed on a loop thread.
 *
 * LIFECYCLE AND OWNERSHIP
 * - The server owns ft_req_t. Every request ends with exactly one response call (ft_resp_bytes,
 *   ft_resp_file, ft_resp_error, ft_resp_redirect); after it returns the handler must not touch r.
 *   This holds even when the client has gone away: the response call then only releases r.
 * - Response calls are thread-safe: from a worker thread they hand the response to r's loop.
 * - ft_req_read_body() may be called at most once, on the loop thread, before the response.
 *   The server sends "100 Continue" at that moment if the client asked for it (for a request
 *   with an empty body, before the handler runs). If a handler responds without reading a
 *   request body, the server closes the connection after the response.
 * - ft_req_alloc() memory and ft_req_on_done() hooks live until the response is finished
 *   (sent, or the connection dropped); the hooks run in reverse order of registration.
 */

typedef struct ft_req ft_req_t;
typedef struct ft_httpd ft_httpd_t;

typedef enum {
	FT_HTTP_GET = 0,
	FT_HTTP_HEAD,
	FT_HTTP_PUT,
	FT_HTTP_POST,
	FT_HTTP_DELETE,
	FT_HTTP_OPTIONS,
	FT_HTTP_OTHER,
} ft_method_t;

typedef void (*ft_handler_fn)(ft_req_t *r, void *ctx);

typedef struct {
	const char *bind; /* address to listen on */
	int port;
	/*
	 * Also listen on this Unix stream socket path, for clients on the same host: plain HTTP, also
	 * when the TCP port speaks TLS (only this user reaches it); a stale socket file there is
	 * replaced, the socket is made 0600 and unlinked at stop. NULL or "" = none.
	 */
	const char *unix_path;
	int threads;               /* loop threads; <= 0 = number of CPUs */
	int workers;               /* worker pool threads for ft_req_defer; <= 0 = 64 (see blocking streams) */
	int max_header_bytes;      /* request line + headers; larger -> 431 and close */
	int max_headers;           /* more -> 431 and close */
	int idle_timeout_ms;       /* keep-alive connection with no request */
	int header_timeout_ms;     /* from first byte to end of the head -> 408 and close */
	int body_timeout_ms;       /* longest gap between body bytes -> body error ETIMEDOUT */
	const char *tls_cert;      /* PEM certificate chain: the port speaks HTTPS; NULL or "" = plain HTTP */
	const char *tls_key;       /* PEM private key of tls_cert */
	const char *tls_client_ca; /* PEM CA(s): clients must present a certificate it signed; NULL = not asked */
	ft_handler_fn handler;     /* called for every request on a loop thread */
	void *ctx;
	/*
	 * Optional: answers what the server refuses on its own (a malformed, too large or late head, bad
	 * framing, a buffered body over its limit) in the application's error format; NULL = the JSON body
	 * of ft_resp_error. Called on a loop thread with ctx and the raw request target when the request
	 * line could be read (NULL otherwise); it must make exactly one response call on r, after which
	 * the server closes the connection. It must not read the body.
	 */
	void (*server_error)(ft_req_t *r, const char *target, int status, const char *msg, void *ctx);
} ft_httpd_opts_t;

/* Binds, starts the loop threads and the worker pool. NULL and err filled on failure. */
ft_httpd_t *ft_httpd_start(const ft_httpd_opts_t *o, char *err, size_t errlen);
/* True when o asks for TLS (any of the tls_* options set). */
int ft_httpd_opts_tls(const ft_httpd_opts_t *o);
/* Loads o's certificate, key and client CA as ft_httpd_start would, binding nothing. 0, or -1 with err. */
int ft_httpd_tls_check(const ft_httpd_opts_t *o, char *err, size_t errlen);
/*
 * Stops listening, closes idle connections, lets the requests under way be answered (for up to 5 s,
 * then closes what is left), joins threads, frees.
 */
void ft_httpd_stop(ft_httpd_t *s);
/* The bound TCP port (useful with port 0 = an ephemeral port). */
int ft_httpd_port(const ft_httpd_t *s);

/* ---- request ---- */
ft_method_t ft_req_method(const ft_req_t *r);
const char *ft_req_method_name(const ft_req_t *r);
/* Percent-decoded path without the query; *len (if non-NULL) = its length (it may hold "%00" as NUL). */
const char *ft_req_path(const ft_req_t *r, size_t *len);
/* The raw request target exactly as sent (path and query). */
const char *ft_req_target(const ft_req_t *r);
/* The raw query string after '?', "" if none. */
const char *ft_req_query_string(const ft_req_t *r);
/* Percent-decoded ('+' = space) value of the first query key, "" for a key without '=', NULL if absent. */
const char *ft_req_query(const ft_req_t *r, const char *key);
/* Header value (case-insensitive name, surrounding whitespace trimmed); NULL if absent. */
const char *ft_req_header(const ft_req_t *r, const char *name);
/* Number of headers and the i-th (name, value), for signing and forwarding. */
int ft_req_header_count(const ft_req_t *r);
void ft_req_header_at(const ft_req_t *r, int i, const char **name, const char **value);
/* Declared body length: Content-Length, -1 for chunked, 0 when there is no body. */
int64_t ft_req_content_length(const ft_req_t *r);
/* "ip:port" of the client. */
const char *ft_req_peer(const ft_req_t *r);

/* Memory that lives until the response is finished. Never NULL (aborts on OOM). */
void *ft_req_alloc(ft_req_t *r, size_t size);
char *ft_req_strdup(ft_req_t *r, const char *s);
/* Registers fn(arg) to run once the response is finished or the connection dropped. */
void ft_req_on_done(ft_req_t *r, void (*fn)(void *arg), void *arg);
/* Counts the request as cold in the duration histogram (a backend was read or written); any thread, before the
 * response call. */
void ft_req_mark_cold(ft_req_t *r);

/* ---- request body ---- */
/* Body bytes, de-chunked, on the loop thread. Return 0 to go on, -1 to stop reading (then respond). */
typedef int (*ft_body_data_fn)(ft_req_t *r, void *arg, const void *buf, size_t len);
/*
 * End of body on the loop thread: err = 0 when the whole body arrived; -ECONNRESET when the client
 * closed or the body was shorter than declared, -ETIMEDOUT on a stall, -EBADMSG on bad chunked
 * framing, -ECANCELED when on_data returned -1. After an error the connection will be closed.
 * The handler still owes one response call.
 */
typedef void (*ft_body_end_fn)(ft_req_t *r, void *arg, int err);
void ft_req_read_body(ft_req_t *r, ft_body_data_fn on_data, ft_body_end_fn on_end, void *arg);
/*
 * Convenience: buffers up to max bytes (more -> 413 sent by the server, done not called), then
 * done(r, arg, body, len, err) on the loop thread; body is NUL-terminated and lives as ft_req_alloc memory.
 * On err != 0 (as above) the handler still owes one response call.
 */
typedef void (*ft_body_all_fn)(ft_req_t *r, void *arg, char *body, size_t len, int err);
void ft_req_read_body_all(ft_req_t *r, size_t max, ft_body_all_fn done, void *arg);

/* ---- deferring ---- */
/* Runs fn(r, arg) on the worker pool; fn (or later code) makes the response call. */
void ft_req_defer(ft_req_t *r, void (*fn)(ft_req_t *r, void *arg), void *arg);
/*
 * Whether r's client is gone: its connection closed (the client closed it, or it failed), from any
 * thread, before r's response call (after it, r may be another request's). While a handler works
 * with no response yet, no request body left to read and no stream started, the loop watches the
 * connection (plain or TLS) for the client's close (a receive that sees the end of its input or a
 * TLS close_notify: like other servers, a client that half-closes after its request is taken to have left); a
 * started stream learns it from its sends. Long work for nobody can stop early; the response call
 * is still due (it then only releases r).
 */
bool ft_req_gone(ft_req_t *r);
/* Runs fn(arg) on the worker pool, with no request attached. */
void ft_httpd_defer(ft_httpd_t *s, void (*fn)(void *arg), void *arg);
/*
 * On a loop thread (in a handler, say): fn(arg) runs on this loop thread whenever fd turns readable
 * (a multishot poll on the loop's ring), until the loop ends; fd must stay open that long. fn runs
 * between the loop's completions, so it must not block, and should consume what made fd readable
 * (for an epoll fd: epoll_wait with a zero timeout until it has nothing more), since only a new
 * wake-up calls it again. Returns 0, or -1 off a loop thread or without memory.
 */
int ft_httpd_watch(int fd, void (*fn)(void *arg), void *arg);

/* ---- response ---- */
/* Adds a response header (copied). Content-Length, Date, Server and Connection are the server's. */
void ft_resp_header(ft_req_t *r, const char *name, const char *value);
void ft_resp_headerf(ft_req_t *r, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds a header whose value is value in decimal. */
void ft_resp_header_u64(ft_req_t *r, const char *name, uint64_t value);
/* Sends status with a copy of body (HEAD: headers only, Content-Length = len). content_type may be NULL. */
void ft_resp_bytes(ft_req_t *r, int status, const char *content_type, const void *body, size_t len);
/*
 * Sends len bytes of fd from off (HEAD: headers only). Takes ownership of fd, closes it when done.
 * If the file turns out shorter than len, the connection is closed (never a short body with a
 * longer Content-Length left open).
 */
void ft_resp_file(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len);
/*
 * ft_resp_file with an fd the caller keeps: never closed by the server, which reads it until the
 * response is finished; the caller keeps it open that long (an ft_req_on_done hook releases it).
 */
void ft_resp_file_borrowed(ft_req_t *r, int status, const char *content_type, int fd, off_t off, uint64_t len);
/*
 * A body read from another connection, for a response call on r's loop thread (a handler there, or
 * an ft_httpd_watch function of that thread): pre_len bytes already read from fd (copied), then
 * the len - pre_len bytes fd still holds. fd is connected and non-blocking; the loop thread moves
 * its bytes to the client with splice(2) through a pipe of the request, polling fd when it is empty
 * (no worker thread, no copy through user memory), and never reads past the body. fd stays the
 * caller's: the server reads it until done(arg, err) runs, on that loop thread, once the response is
 * finished (or at once, when the call is refused): err 0 when the whole body was read from fd (it may
 * carry another message), else -EPIPE (fd ended or failed first), -ETIMEDOUT (fd sent nothing for
 * timeout_ms), -ECONNRESET (the client was gone first: one that closes while fd is silent is noticed
 * within a second), -ECANCELED (no body to send: HEAD, a status without one). A body that could not be
 * sent whole closes the client's connection without a proper end (never a short body looking whole).
 */
typedef struct {
	int fd;
	const void *pre;
	size_t pre_len;
	uint64_t len; /* the whole body: pre_len + what fd still holds */
	int timeout_ms;
	void (*done)(void *arg, int err);
	void *arg;
} ft_resp_socket_t;
void ft_resp_socket(ft_req_t *r, int status, const char *content_type, const ft_resp_socket_t *b);
/* JSON error body {"status": status, "message": "..."}, Content-Type application/json. */
void ft_resp_error(ft_req_t *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* status (301/302/307/308) with Location and an empty body. */
void ft_resp_redirect(ft_req_t *r, int status, const char *location);
/* Asks the server to close the connection after this response. */
void ft_resp_close(ft_req_t *r);

/* ---- blocking streams, for a deferred handler on a worker thread ---- */
/*
 * For relaying bodies between a client and another server from a worker thread (after
 * ft_req_defer): the worker blocks, a loop thread never does. A request uses either these or the
 * loop-thread body/response calls, not both.
 *
 * ft_req_body_read: up to cap de-chunked body bytes into buf, blocking until some arrive. Returns
 * the count (> 0), 0 at the end of the body, or -errno as in ft_body_end_fn (-ECONNRESET,
 * -ETIMEDOUT, -EBADMSG). The first call sends "100 Continue" when the client asked for it.
 */
ssize_t ft_req_body_read(ft_req_t *r, void *buf, size_t cap);
/*
 * Streaming response: ft_resp_stream_start sends the status line and headers (content_length >= 0
 * sets Content-Length; -1 uses chunked transfer encoding; HEAD sends headers only and ignores
 * writes). ft_resp_stream_write queues len bytes, blocking while more than a bounded amount
 * (about 256 KiB) is unsent. Both return 0, or -errno once the client is gone (keep calling is
 * harmless). ft_resp_stream_end is the response call that ends r: err == 0 finishes the body
 * (with a Content-Length, fewer bytes than declared closes the connection instead); err != 0
 * aborts: the connection is closed without a proper end of body (chunked: no last chunk), so a
 * client never takes a cut body for a whole one.
 */
int ft_resp_stream_start(ft_req_t *r, int status, const char *content_type, int64_t content_length);
int ft_resp_stream_write(ft_req_t *r, const void *buf, size_t len);
/*
 * ft_resp_stream_write of the cnt pieces one after the other, returning as it does. Up to
 * FT_STREAM_IOV_MAX pieces of together at most about 256 KiB go out in one system call (one chunk)
 * when nothing else of the stream is unsent; the pieces may be reused once it returns.
 */
#define FT_STREAM_IOV_MAX 64
struct iovec;
int ft_resp_stream_writev(ft_req_t *r, const struct iovec *iov, int cnt);
/*
 * Streaming response from a file: queues len bytes of fd from off, sent after whatever the stream
 * queued before, with sendfile(2) (no copy through user memory). The bytes must already be in the
 * file (the caller may still be appending further on). The server keeps its own dup of fd until
 * the response is finished, so the caller may close fd after ft_resp_stream_end; pass the same fd
 * for every call of one stream (another fd waits until the previous one's bytes are out). Blocks
 * while more than about 16 MiB of file bytes are unsent (they cost no memory). Returns and errors as
 * ft_resp_stream_write; if the file turns out shorter than what was queued, the connection is
 * closed without a proper end of body (never a short response left looking whole).
 */
int ft_resp_stream_sendfile(ft_req_t *r, int fd, uint64_t off, uint64_t len);
/*
 * Streaming response from a socket: moves exactly len bytes from the connected socket fd to the
 * client with splice(2) through a pipe of the request (no copy through user memory; at most about
 * 256 KiB in the pipe), sent after whatever the stream queued before. Only for a stream started
 * with a Content-Length (else -EINVAL); blocks until all len bytes are queued. Returns 0;
 * -ECONNRESET once the client is gone; -EPIPE when fd ended (or failed) before len bytes and
 * -ETIMEDOUT when a read on fd timed out (its SO_RCVTIMEO): on those two the stream is cut, so
 * ft_resp_stream_end closes the connection without a proper end of body whatever its err (never
 * a short response left looking whole). Bytes read from fd but not yet sent belong to the stream.
 */
int ft_resp_stream_splice(ft_req_t *r, int fd, uint64_t len);
void ft_resp_stream_end(ft_req_t *r, int err);
/*
 * Details of the stream calls above:
 * - Threads: a worker blocked in one of them holds its pool thread, so opts.workers bounds how many
 *   requests can stream at once (the rest of the deferred work waits in the queue behind them).
 *   Never wait in a deferred function for other deferred work. On a loop thread ft_req_body_read
 *   and ft_resp_stream_write return -EDEADLK instead of blocking.
 * - Buffering per request: at most the connection's read buffer plus about 256 KiB of body, and
 *   about 256 KiB of response (plus a pipe of at most 256 KiB for ft_resp_stream_splice; rings are
 *   reused across requests from a bounded free list), whatever the speed of the client or of the
 *   worker. The body timeout (body_timeout_ms) runs only while the server waits for the client; a
 *   client that reads nothing for idle_timeout_ms is disconnected. Either way blocked calls return an error at once.
 * - ft_req_body_read returns 0 at once for a request without a body; it may be followed by any
 *   response call (ft_resp_bytes, ft_resp_error, ...); a response before the body's end closes the
 *   connection after it. It returns -EINVAL after ft_req_read_body(_all).
 * - After ft_resp_stream_start, ft_resp_stream_end(r, ...) is the response call, even when start
 *   returned an error; any other response call aborts the stream like ft_resp_stream_end(r, -EINVAL).
 *   ft_resp_stream_end without a start answers 500 and closes.
 * - A write past the declared Content-Length queues nothing and returns -EMSGSIZE; the connection
 *   is then closed at the end. Statuses 204 and 304 carry no body, like HEAD. For an HTTP/1.0
 *   client, content_length -1 sends the body unframed and closes the connection after it.
 */

#endif
