/* SPDX-License-Identifier: Apache-2.0 */
/* The loop threads: one io_uring each, with its listener, eventfd and timer sweep; start, stop, hand-over, defer. */
#include "http/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define RING_ENTRIES 1024
#define CQE_BATCH 256

#define DEF_MAX_HEADER_BYTES (32 * 1024)
#define DEF_MAX_HEADERS 100
#define DEF_IDLE_MS 60000
#define DEF_HEADER_MS 20000
#define DEF_BODY_MS 30000
#define DEF_WORKERS 64
#define STOP_DRAIN_MS 5000 /* at stop, how long the requests under way get to be answered */

__thread loop_t *http_tls_loop;

/* ---- small helpers ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct io_uring_sqe *http_get_sqe(loop_t *L)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&L->ring);

	while (sqe == NULL) {
		io_uring_submit(&L->ring);
		sqe = io_uring_get_sqe(&L->ring);
	}
	return sqe;
}

/* ---- loop ---- */

static void arm_accept(loop_t *L, http_listener_t *a)
{
	struct io_uring_sqe *sqe = http_get_sqe(L);

	io_uring_prep_multishot_accept(sqe, a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, http_ud(a, TAG_ACCEPT));
	a->armed = true;
	a->retry = false;
}

static void arm_event(loop_t *L)
{
	struct io_uring_sqe *sqe = http_get_sqe(L);

	io_uring_prep_read(sqe, L->efd, &L->efd_val, sizeof(L->efd_val), 0);
	io_uring_sqe_set_data64(sqe, http_ud(L, TAG_EVENT));
}

static void arm_timer(loop_t *L)
{
	struct io_uring_sqe *sqe = http_get_sqe(L);

	io_uring_prep_timeout(sqe, &L->tick, 0, 0);
	io_uring_sqe_set_data64(sqe, http_ud(L, TAG_TIMER));
}

/*
 * The Unix socket has no SO_REUSEPORT: every loop's accept waits on the one listener and the first
 * waiter takes every connection. The loop that accepted one therefore gives it to the next loop in
 * turn (a short queue under that loop's qmu, read at its eventfd wake-up); false when it should keep
 * it (its own turn, one loop, that queue full, or a stop under way).
 */
static bool unix_hand_over(loop_t *L, int fd)
{
	ft_httpd_t *s = L->s;
	loop_t *T = &s->loops[atomic_fetch_add(&s->unext, 1) % (unsigned)s->nloops];
	uint64_t one = 1;
	bool wake;

	if (T == L || atomic_load(&s->stopping))
		return false; /* at a stop the accepting loop closes it or serves it itself */
	pthread_mutex_lock(&T->qmu);
	if (T->nfdq == HTTP_FDQ_MAX) {
		pthread_mutex_unlock(&T->qmu);
		return false;
	}
	T->fdq[T->nfdq++] = fd;
	wake = !T->qsignaled;
	T->qsignaled = true;
	if (wake && write(T->efd, &one, sizeof(one)) < 0) /* under the lock: see http_req_notify */
		ft_error("http: wake loop: %s", strerror(errno));
	pthread_mutex_unlock(&T->qmu);
	return true;
}

static void on_accept(loop_t *L, http_listener_t *a, int res, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		a->armed = false;
	if (res < 0) {
		/* the shared Unix listener is shut by the first loop that stops: quiet for the others */
		if (res != -ECANCELED && !L->stopping && !atomic_load(&L->s->stopping))
			ft_warn("http: accept: %s", strerror(-res));
		if (!a->armed && !L->stopping)
			a->retry = true; /* re-armed by the timer, so EMFILE cannot spin */
		return;
	}
	if (L->stopping) {
		close(res);
		return;
	}
	if (a != &L->acc[1] || !unix_hand_over(L, res))
		http_conn_new(L, res, a == &L->acc[1]);
	if (!a->armed && !L->stopping)
		arm_accept(L, a);
}

/* ---- watches (ft_httpd_watch) ---- */

typedef struct http_watch {
	struct http_watch *next; /* the loop's list */
	int fd;
	void (*fn)(void *arg);
	void *arg;
	unsigned failed; /* polls in a row that ended with an error: armed again by the timer sweep */
	bool armed;      /* a poll is in the ring */
} http_watch_t;

static void arm_watch(loop_t *L, http_watch_t *w)
{
	struct io_uring_sqe *sqe = http_get_sqe(L);

	io_uring_prep_poll_multishot(sqe, w->fd, POLLIN);
	io_uring_sqe_set_data64(sqe, http_ud(w, TAG_WATCH));
	w->armed = true;
}

int ft_httpd_watch(int fd, void (*fn)(void *arg), void *arg)
{
	loop_t *L = http_tls_loop;
	http_watch_t *w;

	if (L == NULL || (w = calloc(1, sizeof(*w))) == NULL)
		return -1;
	w->fd = fd;
	w->fn = fn;
	w->arg = arg;
	w->next = L->watches;
	L->watches = w;
	arm_watch(L, w);
	return 0;
}

/*
 * A watched fd turned readable; a poll that ended (no IORING_CQE_F_MORE) without an error is armed
 * again at once. One that ended with an error (but the cancel at stop) is armed again by the next
 * timer sweep, not at once (an error that repeats would spin the loop), and fn runs then too, so
 * that whatever waits on the fd is still served, at the sweep's pace at worst.
 */
static void on_watch(loop_t *L, http_watch_t *w, int res, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		w->armed = false;
	if (res < 0) {
		if (res == -ECANCELED)
			return;
		if (w->failed++ == 0)
			ft_error("http: poll of a watched fd %d: %s; polled again at every timer sweep until it works",
				 w->fd, strerror(-res));
		return;
	}
	if (w->failed > 0) {
		ft_info("http: poll of watched fd %d works again (%u failed polls)", w->fd, w->failed);
		w->failed = 0;
	}
	w->fn(w->arg);
	if (!(flags & IORING_CQE_F_MORE))
		arm_watch(L, w);
}

/* Timer sweep: the watches whose poll failed run and are armed again. */
static void watches_retry(loop_t *L)
{
	for (http_watch_t *w = L->watches; w != NULL; w = w->next) {
		if (w->failed == 0 || w->armed)
			continue;
		w->fn(w->arg);
		arm_watch(L, w);
	}
}

/* Requests handed over by other threads (responses, body reads), and stop wake-ups. */
static void on_event(loop_t *L, int res)
{
	ft_req_t *r, *next;
	conn_t *c;

	if (res < 0 && res != -EINTR && res != -EAGAIN)
		ft_error("http: eventfd read: %s", strerror(-res));

	int fds[HTTP_FDQ_MAX], nfds;

	pthread_mutex_lock(&L->qmu);
	r = L->qhead;
	L->qhead = L->qtail = NULL;
	L->qsignaled = false;
	nfds = L->nfdq;
	memcpy(fds, L->fdq, (size_t)nfds * sizeof(int));
	L->nfdq = 0;
	pthread_mutex_unlock(&L->qmu);
	for (int i = 0; i < nfds; i++) { /* connections of the Unix socket another loop accepted */
		if (L->stopping)
			close(fds[i]);
		else
			http_conn_new(L, fds[i], true);
	}
	for (; r != NULL; r = next) {
		/* r may be queued again as soon as it is marked out of the queue */
		pthread_mutex_lock(&L->qmu);
		next = r->qnext;
		r->queued = false;
		r->ev |= r->xev; /* see DESIGN in internal.h, HAND-OVER */
		r->xev = 0;
		pthread_mutex_unlock(&L->qmu);
		c = r->c;
		c->refs++;
		http_conn_process(c);
		http_conn_unref(c);
	}
	arm_event(L);
}

/*
 * Whether c's client closed its side or reset the connection while its response waits for a socket
 * body's source (nothing is sent meanwhile, so no send finds out): a peek of one byte reads 0 or
 * fails. Bytes pipelined behind the request are no sign of leaving.
 */
static bool client_left(conn_t *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Timeouts: idle, head, body stall, send stall, linger. */
static void on_timer(loop_t *L)
{
	ft_httpd_t *s = L->s;
	conn_t *c, *next;

	watches_retry(L);
	for (c = L->conns; c != NULL; c = next) {
		next = c->next;
		if (c->closed)
			continue;
		c->refs++;
		switch (c->phase) {
		case PH_HEAD:
			if (!c->head_started) {
				if (L->now - c->idle_since >= s->o.idle_timeout_ms)
					http_conn_close(c);
			} else if (L->now - c->head_since >= s->o.header_timeout_ms) {
				http_server_error(c, 408, "request head timeout");
			}
			break;
		case PH_HANDLER:
			if (c->req.body_state == BODY_ACTIVE && c->recv_inflight &&
			    L->now - c->body_since >= s->o.body_timeout_ms)
				http_body_end(c, -ETIMEDOUT);
			/* a stream the client stopped reading: close, which fails the worker's writes */
			if (c->req.st_head && (c->send_inflight || c->poll_inflight) && !c->interim &&
			    L->now - c->send_since >= s->o.idle_timeout_ms)
				http_conn_close(c);
			break;
		case PH_SENDING:
			if ((c->send_inflight || c->poll_inflight) && L->now - c->send_since >= s->o.idle_timeout_ms)
				http_conn_close(c);
			/* a socket body whose source stopped sending (ft_resp_socket): cut */
			if (c->rd_poll && c->rd_gen == c->req_gen && L->now - c->send_since >= c->req.sock_timeout_ms) {
				c->req.sock_timed_out = true;
				http_conn_close(c);
			} else if (c->rd_poll && c->rd_gen == c->req_gen && client_left(c)) {
				http_conn_close(c); /* nobody to wait for the source for */
			}
			break;
		case PH_LINGER:
			if (L->now >= c->linger_until)
				http_conn_close(c);
			break;
		default:
			break;
		}
		if (L->stopping && L->now >= L->stop_deadline)
			http_conn_close(c); /* still under way when the stop's drain ended */
		http_conn_unref(c);
	}
	for (int i = 0; i < 2; i++)
		if (L->acc[i].retry && !L->stopping)
			arm_accept(L, &L->acc[i]);
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
		http_conn_process(c);
		http_conn_unref(c);
	}
}

/*
 * Whether c carries no request and has nothing more to send: idle between requests. A lingering
 * one is left to end its linger: its last answer may still be in the socket, which a reset
 * (unread input at close) would drop.
 */
static bool conn_idle(const conn_t *c)
{
	return c->phase == PH_HEAD && !c->head_started;
}

/*
 * The stop: the listener stops listening at once, so a new connection is refused (its client
 * knows nothing was sent) rather than queued and reset when the socket closes; idle connections
 * close; a request under way is answered (Connection: close) and its connection closed after it
 * (lingering, close_after_response), so a client is not cut off in the middle of an answer. The loop ends when no connection is
 * left; connections still under way after STOP_DRAIN_MS are closed (on_timer).
 */
static void begin_stop(loop_t *L)
{
	struct io_uring_sqe *sqe;
	conn_t *c, *next;

	L->stopping = true;
	L->stop_deadline = L->now + STOP_DRAIN_MS;
	for (int i = 0; i < 2; i++) {
		http_listener_t *a = &L->acc[i];

		if (a->armed) {
			sqe = http_get_sqe(L);
			io_uring_prep_cancel64(sqe, http_ud(a, TAG_ACCEPT), 0);
			io_uring_sqe_set_data64(sqe, 0);
		}
		if (a->fd >= 0)
			shutdown(a->fd, SHUT_RDWR); /* closed with the server (free_server) */
	}
	for (c = L->conns; c != NULL; c = next) {
		next = c->next;
		if (!conn_idle(c) && !c->closed)
			continue;
		c->refs++;
		http_conn_close(c);
		http_conn_unref(c);
	}
}

static void handle_cqe(loop_t *L, uint64_t data, int res, unsigned flags)
{
	void *p = (void *)(uintptr_t)(data & ~(uint64_t)TAG_MASK);
	conn_t *c = p;

	switch (data & TAG_MASK) {
	case TAG_WATCH:
		if (p != NULL)
			on_watch(L, p, res, flags);
		break;
	case TAG_ACCEPT:
		if (p != NULL)
			on_accept(L, p, res, flags);
		break;
	case TAG_EVENT:
		on_event(L, res);
		break;
	case TAG_TIMER:
		on_timer(L);
		break;
	case TAG_RECV:
		if (c->tls == NULL || http_tls_on_recv(c, &res))
			http_on_recv(c, res);
		http_conn_unref(c);
		break;
	case TAG_SEND:
		if (c->tls == NULL || http_tls_on_send(c, &res))
			http_on_send(c, res);
		http_conn_unref(c);
		break;
	case TAG_POLL:
		http_on_poll(c);
		http_conn_unref(c);
		break;
	case TAG_READ:
		http_on_file_read(c, res);
		http_conn_unref(c);
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

	http_tls_loop = L;
	rc = ring_init(L);
	pthread_mutex_lock(&s->mu);
	L->init_rc = rc;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (rc != 0)
		return NULL;
	L->now = mono_ms();
	for (int i = 0; i < 2; i++)
		if (L->acc[i].fd >= 0)
			arm_accept(L, &L->acc[i]);
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
	while (L->watches != NULL) {
		http_watch_t *w = L->watches;

		L->watches = w->next;
		free(w);
	}
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

/*
 * Makes the socket file just bound at path 0600, not following a symlink; *st is then its stat.
 * Without /proc, glibc cannot chmod without following (EOPNOTSUPP): bind never follows a final
 * symlink, so once lstat finds a socket there, chmod is safe.
 */
static bool chmod_socket(const char *path, struct stat *st)
{
	if (fchmodat(AT_FDCWD, path, 0600, AT_SYMLINK_NOFOLLOW) == 0)
		return lstat(path, st) == 0;
	if ((errno != EOPNOTSUPP && errno != ENOTSUP) || lstat(path, st) != 0 || !S_ISSOCK(st->st_mode))
		return false;
	return chmod(path, 0600) == 0 && lstat(path, st) == 0;
}

/*
 * The Unix stream listener at path, made 0600 (the same user's processes: the node's peers on this
 * host); *ino and *dev identify the socket file, removed at stop only if it is still this one. A
 * socket file left by a server that died (the connect is refused) is replaced; a live listener
 * there, one that cannot be checked (EACCES, ...), or a file that is not a socket is an error.
 */
static int listen_unix(const char *path, ino_t *ino, dev_t *dev, char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, errlen, "unix socket path %.40s...: longer than %zu bytes", path, sizeof(a.sun_path) - 1);
		return -1;
	}
	memcpy(a.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "unix socket path %s: exists and is not a socket", path);
			return -1;
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			snprintf(err, errlen, "socket: %s", strerror(errno));
			return -1;
		}
		int rc = connect(fd, (struct sockaddr *)&a, sizeof(a)), e = errno;
		close(fd);
		if (rc == 0 || e == EAGAIN) {
			snprintf(err, errlen, "unix socket path %s: another server listens there", path);
			return -1;
		}
		if (e != ECONNREFUSED && e != ENOENT) {
			snprintf(err, errlen, "unix socket path %s: cannot tell whether it is in use: %s", path,
				 strerror(e));
			return -1;
		}
		unlink(path); /* a dead server's (ENOENT: gone meanwhile) */
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		snprintf(err, errlen, "unix socket %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if (!chmod_socket(path, &st) || listen(fd, 4096) != 0) {
		snprintf(err, errlen, "unix socket %s: %s", path, strerror(errno));
		unlink(path);
		close(fd);
		return -1;
	}
	*ino = st.st_ino;
	*dev = st.st_dev;
	return fd;
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

		if (L->acc[0].fd >= 0)
			close(L->acc[0].fd);
		if (L->efd >= 0)
			close(L->efd);
		pthread_mutex_destroy(&L->qmu);
		free(L->hdrs);
		free(L->probe_buf);
	}
	if (s->ufd >= 0) {
		struct stat st;

		/* compared while ours is open, so its inode number cannot be a successor's file's yet */
		if (lstat(s->upath, &st) == 0 && st.st_ino == s->uino && st.st_dev == s->udev)
			unlink(s->upath);
		close(s->ufd);
		for (i = 0; i < s->nloops; i++)
			while (s->loops[i].nfdq > 0)
				close(s->loops[i].fdq[--s->loops[i].nfdq]); /* handed over after that loop ended */
	}
	ft_workpool_destroy(s->pool);
	http_tls_ctx_free(s);
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
		http_oom();
	s->o = *o;
	s->ufd = -1;
	opts_defaults(&s->o);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->rmu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->loops = calloc((size_t)s->o.threads, sizeof(*s->loops));
	if (s->loops == NULL)
		http_oom();
	s->nloops = s->o.threads;
	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];

		L->s = s;
		L->idx = i;
		L->acc[0].fd = L->acc[1].fd = L->efd = -1;
		L->init_rc = 1;
		pthread_mutex_init(&L->qmu, NULL);
		L->tick.tv_sec = tick_ms(&s->o) / 1000;
		L->tick.tv_nsec = (tick_ms(&s->o) % 1000) * 1000000;
		L->hdrs = calloc((size_t)s->o.max_headers, sizeof(*L->hdrs));
		if (L->hdrs == NULL)
			http_oom();
	}
	if (http_tls_ctx_init(s, err, errlen) != 0)
		goto fail;
	s->pool = ft_workpool_create(s->o.workers, "ft-http-w");
	if (s->pool == NULL) {
		snprintf(err, errlen, "cannot start worker threads");
		goto fail;
	}
	if (o->unix_path != NULL && o->unix_path[0] != '\0') {
		s->ufd = listen_unix(o->unix_path, &s->uino, &s->udev, err, errlen);
		if (s->ufd < 0)
			goto fail;
		snprintf(s->upath, sizeof(s->upath), "%s", o->unix_path);
	}
	for (i = 0; i < s->nloops; i++) {
		loop_t *L = &s->loops[i];

		L->acc[0].fd = listen_on(s->o.bind, i == 0 ? s->o.port : s->port, i > 0, err, errlen);
		if (L->acc[0].fd < 0)
			goto fail;
		if (i == 0)
			s->port = bound_port(L->acc[0].fd);
		L->acc[1].fd = s->ufd;
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

/* ---- hand-over ---- */

/*
 * Hands the events ev (EV_*) to r's loop, which then looks at r: directly on the loop thread,
 * through the loop's queue and eventfd from any other thread (see DESIGN in internal.h, HAND-OVER).
 */
void http_req_notify(ft_req_t *r, unsigned ev)
{
	loop_t *L = r->c->L;
	uint64_t one = 1;
	bool wake;

	if (http_tls_loop == L) {
		r->ev |= ev;
		http_conn_kick(r->c);
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
		http_oom();
	pw->fn = fn;
	pw->arg = arg;
	pw->work.fn = plain_work_run;
	ft_workpool_submit(s->pool, &pw->work);
}
