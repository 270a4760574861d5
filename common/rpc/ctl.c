/* SPDX-License-Identifier: Apache-2.0 */
/* Control-port HTTP server on libmicrohttpd: buffers each request body, calls one JSON handler. */
#include "rpc/ctl.h"

#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include <arpa/inet.h>
#include <time.h>

#include "auth/auth.h"
#include "auth/reqsig.h"
#include "base/log.h"
#include "base/strbuf.h"

/*
 * DESIGN
 * libmicrohttpd calls on_request() several times per request: once with the headers (we set up a
 * ctl_conn_t), once per chunk of body (appended), and once more with no data when the body is
 * complete (we call the handler and queue its JSON, or the file range it chose: ft_ctl_send_fd). A body over FT_CTL_MAX_BODY gets 413: at once
 * when Content-Length says so, otherwise after the excess has been read and dropped.
 * With a cluster secret loaded (auth/auth.h) every request must carry a valid signature
 * (auth/reqsig.h) over its method, raw request target (captured by the URI log callback, before
 * libmicrohttpd decodes it), time, nonce and whole body; it is checked once the body is in, before
 * the handler runs, so every control endpoint is covered here. A refused request gets 401 and a
 * warning in the log naming the peer.
 * At stop the port first stops accepting, and requests under way (an answer still streaming, such as
 * a slice another target is fetching) get up to CTL_DRAIN_MS to finish before the connections close;
 * idle kept-alive connections just close (a client's next request on one is retried by libcurl on a
 * new connection, which is then refused).
 * The workers poll(): with epoll, a quiesce races the workers' own removal of the listening socket
 * from their epoll sets, and libmicrohttpd aborts the process when it loses that race (0.9.75 as in
 * Debian bookworm; about one stop in 500 under load). The control port holds few connections.
 * Everything libmicrohttpd wants to say goes through ft_log (it never prints by itself); the last
 * message is kept so that a failed start can report why (e.g. the port is in use).
 */

#define CTL_DEFAULT_THREADS 4
#define CTL_CONN_TIMEOUT_S 120
#define CTL_HTTP_TOO_LARGE 413
#define CTL_REPLAY_SLOTS (1u << 17) /* nonces of about 4000 requests/s over the replay window */
#define CTL_DRAIN_MS 3000           /* at stop, how long requests under way may take to finish */

struct ft_ctl {
	struct MHD_Daemon *daemon;
	ft_ctl_handler_fn fn;
	void *ctx;
	pthread_mutex_t log_lock;
	char last_log[256];  /* guarded by log_lock */
	ft_replay_t *replay; /* signed requests seen (with a cluster secret) */
	atomic_int inflight; /* requests begun and not completed (a ctl_conn_t each) */
};

/* Per-request state, owned by libmicrohttpd's con_cls slot; freed in on_completed(). */
typedef struct {
	ft_strbuf_t body; /* NUL-terminated; p stays NULL for an empty body */
	bool too_big;
	bool responded;
	bool started; /* on_request has seen the headers */
	char *uri;    /* the raw request target, as signed */
} ctl_conn_t;

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	ft_ctl_t *s = cls;
	char msg[256];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	pthread_mutex_lock(&s->log_lock);
	memcpy(s->last_log, msg, n + 1);
	pthread_mutex_unlock(&s->log_lock);
	ft_warn("ctl: %s", msg);
}

static void mhd_panic(void *cls, const char *file, unsigned int line, const char *reason)
{
	(void)cls;
	ft_error("ctl: libmicrohttpd panic at %s:%u: %s", file != NULL ? file : "?", line,
		 reason != NULL ? reason : "");
	abort();
}

/* Queues status with json (stolen; NULL = empty body). */
static enum MHD_Result send_json(struct MHD_Connection *conn, int status, json_t *json)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *text = NULL;

	if (json != NULL) {
		text = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY);
		json_decref(json);
		if (text == NULL)
			status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (status < 100 || status > 599)
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (text != NULL)
		resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	else
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	if (text != NULL)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = MHD_queue_response(conn, (unsigned int)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Queues status with len bytes of fd from off (fd stolen: libmicrohttpd closes it with the response). */
static enum MHD_Result send_file(struct MHD_Connection *conn, int status, int fd, uint64_t off, uint64_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, fd, off);
	enum MHD_Result ret;

	if (resp == NULL) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	ret = MHD_queue_response(conn, (unsigned int)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, int status, const char *message)
{
	return send_json(conn, status, json_pack("{s:i, s:s}", "status", status, "message", message));
}

/* The request's Content-Length, 0 when absent or malformed. */
static unsigned long long declared_length(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	char *end;
	unsigned long long n;

	if (cl == NULL)
		return 0;
	n = strtoull(cl, &end, 10);
	return end != cl ? n : 0;
}

static bool declared_too_big(struct MHD_Connection *conn)
{
	return declared_length(conn) > FT_CTL_MAX_BODY;
}

/* Appends a body chunk; returns -1 on allocation failure. Past the limit, drops the body. */
static int append_body(struct MHD_Connection *conn, ctl_conn_t *cc, const char *data, size_t n)
{
	if (cc->too_big)
		return 0;
	if (n > FT_CTL_MAX_BODY - cc->body.len) {
		cc->too_big = true;
		ft_strbuf_free(&cc->body);
		return 0;
	}
	if (cc->body.cap == 0) { /* room for the declared body at once: no copies as it grows (EC slices) */
		unsigned long long declared = declared_length(conn);
		if (declared > n && declared <= FT_CTL_MAX_BODY)
			ft_strbuf_reserve(&cc->body, (size_t)declared);
	}
	ft_strbuf_add(&cc->body, data, n);
	return cc->body.failed ? -1 : 0;
}

static void peer_name(struct MHD_Connection *conn, char *out, size_t cap)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (sa != NULL && sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
	} else if (sa != NULL && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
	}
	snprintf(out, cap, "%s:%d", host, port);
}

/* With a cluster secret: whether the request is signed, fresh and new; false after logging why. */
static bool request_signed(ft_ctl_t *s, struct MHD_Connection *conn, const char *method, ctl_conn_t *cc,
			   const char **why)
{
	const ft_auth_t *a = ft_auth();
	ft_reqsig_result_t r;
	char peer[64];

	if (!a->have_secret)
		return true;
	r = ft_reqsig_verify(a->ctl_key, method, cc->uri != NULL ? cc->uri : "", cc->body.p, cc->body.len,
			     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, FT_REQSIG_HEADER_TIME),
			     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, FT_REQSIG_HEADER_NONCE),
			     MHD_lookup_connection_value(conn, MHD_HEADER_KIND, FT_REQSIG_HEADER_SIG), time(NULL),
			     s->replay);
	if (r == FT_REQSIG_OK)
		return true;
	peer_name(conn, peer, sizeof(peer));
	ft_warn("ctl: refused %s %.200s from %s: %s", method, cc->uri != NULL ? cc->uri : "?", peer,
		ft_reqsig_strerror(r));
	*why = ft_reqsig_strerror(r);
	return false;
}

static enum MHD_Result call_handler(ft_ctl_t *s, struct MHD_Connection *conn, const char *url, const char *method,
				    ctl_conn_t *cc)
{
	ft_ctl_req_t req = {
		.method = method,
		.path = url,
		.body = cc->body.p,
		.body_len = cc->body.len,
		.conn = conn,
	};
	ft_ctl_resp_t resp = {.status = MHD_HTTP_OK, .json = NULL};
	const char *why = NULL;

	if (!request_signed(s, conn, method, cc, &why))
		return send_error(conn, MHD_HTTP_UNAUTHORIZED, why);
	s->fn(s->ctx, &req, &resp);
	if (resp.file_set) {
		json_decref(resp.json);
		return send_file(conn, resp.status, resp.file_fd, resp.file_off, resp.file_len);
	}
	return send_json(conn, resp.status, resp.json);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	ft_ctl_t *s = cls;
	ctl_conn_t *cc = *con_cls;

	(void)version;
	if (cc == NULL || !cc->started) {
		if (cc == NULL) {
			cc = calloc(1, sizeof(*cc));
			if (cc == NULL)
				return MHD_NO;
			atomic_fetch_add(&s->inflight, 1);
			*con_cls = cc;
		}
		cc->started = true;
		if (declared_too_big(conn)) {
			/* Answered before the body is read; libmicrohttpd then closes the connection. */
			cc->too_big = true;
			cc->responded = true;
			return send_error(conn, CTL_HTTP_TOO_LARGE, "request body too large");
		}
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		if (append_body(conn, cc, upload_data, *upload_data_size) != 0)
			return MHD_NO;
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (cc->responded)
		return MHD_YES;
	cc->responded = true;
	if (cc->too_big)
		return send_error(conn, CTL_HTTP_TOO_LARGE, "request body too large");
	return call_handler(s, conn, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode code)
{
	ft_ctl_t *s = cls;
	ctl_conn_t *cc = *con_cls;

	(void)conn;
	(void)code;
	if (cc == NULL)
		return;
	atomic_fetch_sub(&s->inflight, 1);
	ft_strbuf_free(&cc->body);
	free(cc->uri);
	free(cc);
	*con_cls = NULL;
}

/* The first callback of a request: keeps the raw request target (the signed form) in a new ctl_conn_t. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	ft_ctl_t *s = cls;
	ctl_conn_t *cc = calloc(1, sizeof(*cc));

	(void)conn;
	if (cc != NULL) {
		cc->uri = strdup(uri != NULL ? uri : "");
		atomic_fetch_add(&s->inflight, 1);
	}
	return cc;
}

/* The first address of bind (NULL or "" = any); libmicrohttpd derives the length from the family. */
static int resolve(const char *bind, int port, struct sockaddr_storage *ss, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL;
	char service[16];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%d", port);
	rc = getaddrinfo(bind != NULL && bind[0] != '\0' ? bind : NULL, service, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "control port: cannot resolve \"%s\": %s", bind, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* threads <= 0 means CTL_DEFAULT_THREADS. */
ft_ctl_t *ft_ctl_start(const char *bind, int port, int threads, ft_ctl_handler_fn fn, void *ctx, char *err,
		       size_t errlen)
{
	struct sockaddr_storage ss;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC; /* ITC: quiesce */
	ft_ctl_t *s;

	if (port < 1 || port > 65535) {
		snprintf(err, errlen, "control port: bad port %d", port);
		return NULL;
	}
	if (resolve(bind, port, &ss, err, errlen) != 0)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "control port: out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->log_lock, NULL);
	if (ft_auth()->have_secret && (s->replay = ft_replay_new(CTL_REPLAY_SLOTS)) == NULL) {
		snprintf(err, errlen, "control port: out of memory");
		pthread_mutex_destroy(&s->log_lock);
		free(s);
		return NULL;
	}
	s->fn = fn;
	s->ctx = ctx;
	if (threads <= 0)
		threads = CTL_DEFAULT_THREADS;
	flags |= MHD_USE_POLL; /* not epoll: see DESIGN */
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	MHD_set_panic_func(mhd_panic, NULL);
	s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
				     mhd_logger, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				     MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads, MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned int)CTL_CONN_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				     MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_END);
	if (s->daemon == NULL) {
		snprintf(err, errlen, "control port %s:%d: %s", bind, port,
			 s->last_log[0] != '\0' ? s->last_log : "cannot start libmicrohttpd");
		pthread_mutex_destroy(&s->log_lock);
		ft_replay_free(s->replay);
		free(s);
		return NULL;
	}
	return s;
}

void ft_ctl_stop(ft_ctl_t *s)
{
	MHD_socket lfd;
	int waited = 0;

	if (s == NULL)
		return;
	lfd = MHD_quiesce_daemon(s->daemon); /* no new connections; requests under way go on */
	while (atomic_load(&s->inflight) > 0 && waited < CTL_DRAIN_MS) {
		usleep(10000);
		waited += 10;
	}
	if (atomic_load(&s->inflight) > 0)
		ft_warn("control port: %d request(s) still under way after %d ms: cut at stop",
			atomic_load(&s->inflight), CTL_DRAIN_MS);
	MHD_stop_daemon(s->daemon);
	if (lfd != MHD_INVALID_SOCKET)
		close(lfd); /* ours after a quiesce, closed once the daemon's threads are gone */
	pthread_mutex_destroy(&s->log_lock);
	ft_replay_free(s->replay);
	free(s);
}

const char *ft_ctl_query(const ft_ctl_req_t *req, const char *key)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

void ft_ctl_send_fd(ft_ctl_resp_t *resp, int status, int fd, uint64_t off, uint64_t len)
{
	json_decref(resp->json);
	resp->json = NULL;
	resp->status = status;
	resp->file_set = 1;
	resp->file_fd = fd;
	resp->file_off = off;
	resp->file_len = len;
}

void ft_ctl_error(ft_ctl_resp_t *resp, int status, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_decref(resp->json);
	if (resp->file_set) { /* an error after all: the file range is not sent */
		close(resp->file_fd);
		resp->file_set = 0;
	}
	resp->status = status;
	resp->json = json_pack("{s:i, s:s}", "status", status, "message", msg);
}
