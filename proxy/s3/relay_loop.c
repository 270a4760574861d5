/* SPDX-License-Identifier: Apache-2.0 */
/* The S3 GET relay's event loop: GETs exchanged with the targets on non-blocking keep-alive connections, small answers given without a worker. */
#include "s3/object.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/log.h"
#include "cluster/local.h"
#include "http/http.h"
#include "http/util.h"

/*
 * DESIGN
 * A GET relayed by a worker costs the proxy three thread switches per request (the hand-over to
 * the worker, its blocking wait for the target, the hand-back to the loop thread): at 16 KiB that
 * is most of its CPU. Here the HTTP server's loop threads carry the GETs themselves: each keeps a
 * relay loop of its own (an epoll set, made on its first GET, that the loop's ring watches through
 * ft_httpd_watch), so the loop thread that parsed and verified a request sends it to the target at
 * once on a kept-alive connection of its own (px_s3_rloop_submit) and reads the answer as it
 * comes, and the answer goes to the client from the same thread: no hand-over to another thread
 * and back, no wake-up, no lock on the way. A 200/206 whose body is at most PX_S3_RLOOP_SMALL, and
 * a small error answer, is answered in one response call (px_s3_get_answer). The answer is read
 * into the job's buffer from the first byte (no peek: one receive takes a small answer whole). A
 * larger 200/206 with a Content-Length is answered from here too (px_s3_get_stream): the head and
 * the first body bytes read so far, then the rest moved from the connection to the client by the
 * HTTP server on this same thread (ft_resp_socket, splice through a pipe), the connection back in
 * the idle pool once its body was read whole (stream_done). Anything else - a redirect, a chunked
 * answer - goes on a worker with the connection and the bytes read so far (px_s3_get_handoff). A
 * connection that failed before a whole head goes to a worker with none, which asks again (and
 * retries on a new owner when the target is dead); nothing reaches the client before a whole head,
 * so every fallback may repeat the GET. A timerfd in each epoll set sweeps the jobs of a silent
 * target once a second (a streamed body has the HTTP server's timeout instead).
 *
 * OWNERSHIP
 * A relay loop (rloop_t) belongs to its loop thread; it is listed in loops[] so that workers can
 * give connections back (under its mu) and px_s3_rloop_stop can free it once the HTTP server
 * stopped. A submitted job (rjob_t, malloc'd) belongs to its loop until it is answered (then
 * freed here) or handed off (its buffer and connection then belong to the worker); a streamed one
 * is off the active list, its connection lent to the HTTP server, until stream_done frees it. Idle
 * connections belong to the loop that last used them (RLOOP_IDLE_MAX per loop, oldest closed
 * first); a worker gives a connection it took over back to the loops once its answer was read
 * whole (px_s3_rloop_give).
 */

#define RLOOP_LOOPS_MAX 64 /* loop threads with a relay loop */
#define RLOOP_IDLE_MAX 256
#define RLOOP_BUF0 (32 * 1024) /* first buffer of a job: a head and a 16 KiB body (> PX_S3_TARGET_HEAD_MAX) */
#define RLOOP_EVENTS 64
#define RLOOP_HOSTPORT 272
#define RLOOP_BACK_MAX 64 /* connections given back by workers, waiting for their loop */
#define RLOOP_BUFS_MAX 64 /* RLOOP_BUF0 buffers a loop keeps for its next jobs */

typedef enum { ST_CONNECTING = 0, ST_SENDING, ST_READING } rjob_stage_t;

typedef struct rjob {
	struct rjob *next, *prev; /* the thread's active list (or the submission queue: next only) */
	px_s3_req_t *q;
	char hostport[RLOOP_HOSTPORT];
	char *req; /* the request text, malloc'd */
	size_t req_len, req_sent;
	int fd;
	bool local_only; /* an https target of this machine: its Unix socket, never TCP (plain) */
	bool reused;     /* fd came from the idle pool: a close before any byte means stale, not dead */
	bool retried;    /* already once on a new connection */
	rjob_stage_t stage;
	char *buf; /* what the target sent so far */
	size_t len, cap;
	size_t head_len; /* > 0 once the head parsed */
	size_t want;     /* head_len + body length, once known */
	bool keep_alive;
	int64_t deadline_ns;
} rjob_t;

typedef struct {
	int fd;
	char hostport[RLOOP_HOSTPORT];
} rloop_idle_t;

typedef struct {
	int ep, tfd;    /* the epoll set (watched by the loop thread's ring), its sweep timer */
	rjob_t **owner; /* by fd: the job of a registered connection, NULL while idle */
	uint32_t *gen;  /* by fd: the registration its events carry (a number closed and reused is another) */
	int nowner;
	uint32_t next_gen;
	pthread_mutex_t mu;
	rloop_idle_t back[RLOOP_BACK_MAX]; /* connections workers gave back (under mu) */
	atomic_int nback;
	rjob_t *active;
	rloop_idle_t idle[RLOOP_IDLE_MAX];
	int nidle;
	char *bufs[RLOOP_BUFS_MAX]; /* free job buffers of RLOOP_BUF0 bytes: no malloc, no page faults per GET */
	int nbufs;
} rloop_t;

static pthread_mutex_t loops_mu = PTHREAD_MUTEX_INITIALIZER;
static rloop_t *loops[RLOOP_LOOPS_MAX]; /* under loops_mu */
static int nloops;
static __thread rloop_t *my_loop;    /* this loop thread's */
static __thread bool my_loop_failed; /* this thread cannot have one (not a loop thread, no memory) */
static atomic_uint next_back;        /* round-robin of connections given back */
static atomic_bool running;

/* ---- connections ---- */

/* Grows L's by-fd tables to hold fd. */
static bool tables_fit(rloop_t *L, int fd)
{
	int n = L->nowner > 0 ? L->nowner : 64;
	rjob_t **no;
	uint32_t *ng;

	if (fd < L->nowner)
		return true;
	while (n <= fd)
		n *= 2;
	no = realloc(L->owner, (size_t)n * sizeof(*no));
	if (no == NULL)
		return false;
	L->owner = no;
	ng = realloc(L->gen, (size_t)n * sizeof(*ng));
	if (ng == NULL)
		return false;
	L->gen = ng;
	memset(no + L->nowner, 0, (size_t)(n - L->nowner) * sizeof(*no));
	memset(ng + L->nowner, 0, (size_t)(n - L->nowner) * sizeof(*ng));
	L->nowner = n;
	return true;
}

/*
 * A connection is registered in L's epoll set once, edge-triggered for input, output and the
 * peer's close, and stays registered while it is idle between GETs: a GET on a kept connection
 * costs no epoll_ctl. Events carry the fd and the registration's number (gen[fd]): an event of a
 * connection closed within the same epoll_wait batch, whose number a new one already took, is
 * dropped; owner[fd] says whose they are (NULL: an idle one).
 */
static bool conn_watch(rloop_t *L, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

	if (!tables_fit(L, fd))
		return false;
	L->owner[fd] = NULL;
	if (++L->next_gen == 0) /* 0 is the timer's */
		L->next_gen = 1;
	L->gen[fd] = L->next_gen;
	ev.data.u64 = (uint64_t)L->gen[fd] << 32 | (uint32_t)fd;
	return epoll_ctl(L->ep, EPOLL_CTL_ADD, fd, &ev) == 0;
}

static void idle_give(rloop_t *L, int fd, const char *hostport);

/* Moves the connections workers gave back (px_s3_rloop_give) into L's idle pool. */
static void take_back(rloop_t *L)
{
	rloop_idle_t back[RLOOP_BACK_MAX];
	int n;

	if (atomic_load(&L->nback) == 0)
		return;
	pthread_mutex_lock(&L->mu);
	n = atomic_load(&L->nback);
	memcpy(back, L->back, (size_t)n * sizeof(back[0]));
	atomic_store(&L->nback, 0);
	pthread_mutex_unlock(&L->mu);
	for (int i = 0; i < n; i++) {
		if (conn_watch(L, back[i].fd))
			idle_give(L, back[i].fd, back[i].hostport);
		else
			close(back[i].fd);
	}
}

static int idle_take(rloop_t *L, const char *hostport)
{
	take_back(L);
	for (int i = L->nidle - 1; i >= 0; i--) {
		if (strcmp(L->idle[i].hostport, hostport) != 0)
			continue;
		int fd = L->idle[i].fd;
		memmove(&L->idle[i], &L->idle[i + 1], (size_t)(L->nidle - i - 1) * sizeof(L->idle[0]));
		L->nidle--;
		return fd;
	}
	return -1;
}

/* An idle connection's event: the target closed it (or sent what nobody asked for): it goes. */
static void idle_event(rloop_t *L, int fd, uint32_t events)
{
	char c;

	if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return; /* writable: nothing to say */
	if (!(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK))
		return; /* an event of an earlier connection with this number */
	for (int i = 0; i < L->nidle; i++) {
		if (L->idle[i].fd != fd)
			continue;
		close(fd);
		memmove(&L->idle[i], &L->idle[i + 1], (size_t)(L->nidle - i - 1) * sizeof(L->idle[0]));
		L->nidle--;
		return;
	}
}

/* fd (registered, see conn_watch) joins the idle pool; the oldest idle one closes when it is full. */
static void idle_give(rloop_t *L, int fd, const char *hostport)
{
	if (L->nidle == RLOOP_IDLE_MAX) {
		close(L->idle[0].fd);
		memmove(&L->idle[0], &L->idle[1], (size_t)(RLOOP_IDLE_MAX - 1) * sizeof(L->idle[0]));
		L->nidle--;
	}
	L->idle[L->nidle].fd = fd;
	snprintf(L->idle[L->nidle].hostport, sizeof(L->idle[0].hostport), "%s", hostport);
	L->nidle++;
}

/*
 * A non-blocking connect to hostport ("host:port", numeric port) started; the fd, or -1. A target
 * on this machine is dialed on its Unix socket (ft_local_dial: no TCP on either side); an https
 * target (local_only) only there, as the loops speak plain HTTP. Only a
 * numeric address is dialed here otherwise: a name's lookup can wait on the resolver, which must not stall
 * the loop thread, so a target advertised by name is dialed by a worker (job_handoff), whose
 * connection comes back to the loops kept alive (px_s3_rloop_give).
 */
static int dial(const char *hostport, bool local_only)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV | AI_NUMERICHOST}, *ai = NULL;
	int ms = px_s3_relay_timeout_ms();
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	int fd, one = 1;

	fd = ft_local_dial(hostport, local_only, true);
	if (fd < 0 && local_only)
		return -1;
	if (fd < 0) {
		if (colon == NULL || (size_t)(colon - hostport) >= sizeof(host))
			return -1;
		memcpy(host, hostport, (size_t)(colon - hostport));
		host[colon - hostport] = '\0';
		if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
			return -1;
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
			close(fd);
			fd = -1;
		}
		freeaddrinfo(ai);
		if (fd < 0)
			return -1;
	}
	/* the timeouts count once a worker takes the connection over in blocking mode */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* ---- jobs ---- */

/* A RLOOP_BUF0 buffer for a job of L, or NULL. */
static char *buf_take(rloop_t *L)
{
	return L->nbufs > 0 ? L->bufs[--L->nbufs] : malloc(RLOOP_BUF0);
}

static void job_free(rloop_t *L, rjob_t *j)
{
	if (j->buf != NULL && j->cap == RLOOP_BUF0 && L->nbufs < RLOOP_BUFS_MAX)
		L->bufs[L->nbufs++] = j->buf;
	else
		free(j->buf);
	free(j->req);
	free(j);
}

static void active_unlink(rloop_t *L, rjob_t *j)
{
	if (j->prev != NULL)
		j->prev->next = j->next;
	else
		L->active = j->next;
	if (j->next != NULL)
		j->next->prev = j->prev;
	j->next = j->prev = NULL;
}

/* Takes j's connection from j, still registered (closing it unregisters it): -1 when it had none. */
static int job_detach_fd(rloop_t *L, rjob_t *j)
{
	int fd = j->fd;

	if (fd >= 0)
		L->owner[fd] = NULL;
	j->fd = -1;
	return fd;
}

/*
 * Ends j: q goes to a worker with the connection (fd >= 0, switched to blocking) and the response
 * head read from it (j->len bytes: 0 when still unread), or with none.
 */
static void job_handoff(rloop_t *L, rjob_t *j, bool with_conn)
{
	int fd = job_detach_fd(L, j);

	active_unlink(L, j);
	if (!with_conn && fd >= 0) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		epoll_ctl(L->ep, EPOLL_CTL_DEL, fd, NULL);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	}
	px_s3_get_handoff(j->q, fd, j->hostport, fd >= 0 ? j->buf : NULL, fd >= 0 ? j->len : 0);
	if (fd >= 0)
		j->buf = NULL; /* the worker's now */
	job_free(L, j);
}

/* Ends j with its whole answer in j->buf: q answered here, the connection kept when it can carry another. */
static void job_answer(rloop_t *L, rjob_t *j)
{
	int fd = job_detach_fd(L, j);

	active_unlink(L, j);
	px_s3_get_answer(j->q, j->buf, j->head_len, j->want);
	if (j->keep_alive && j->len == j->want && atomic_load(&running))
		idle_give(L, fd, j->hostport);
	else
		close(fd);
	job_free(L, j);
}

static void job_broken(rloop_t *L, rjob_t *j);

/* Sends what is left of j's request: 1 all sent, 0 the socket is full (an EPOLLOUT edge follows), -1 failed. */
static int job_send(rjob_t *j)
{
	while (j->req_sent < j->req_len) {
		ssize_t k = send(j->fd, j->req + j->req_sent, j->req_len - j->req_sent, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k <= 0)
			return -1;
		j->req_sent += (size_t)k;
	}
	return 1;
}

/*
 * Connects j (a kept connection when there is one, its request sent at once) and owns the
 * connection. False when no connection could be started; a kept one that fails the send is
 * broken (job_broken), which ends or retries j: true then too.
 */
static bool job_connect(rloop_t *L, rjob_t *j, bool fresh)
{
	int sent;

	j->fd = fresh ? -1 : idle_take(L, j->hostport);
	j->reused = j->fd >= 0;
	j->req_sent = 0;
	j->len = j->head_len = j->want = 0;
	if (j->fd < 0) {
		j->fd = dial(j->hostport, j->local_only);
		if (j->fd < 0)
			return false;
		if (!conn_watch(L, j->fd)) {
			close(j->fd);
			j->fd = -1;
			return false;
		}
		j->stage = ST_CONNECTING; /* the EPOLLOUT edge of the connect comes next */
		L->owner[j->fd] = j;
		return true;
	}
	L->owner[j->fd] = j;
	j->stage = ST_SENDING;
	sent = job_send(j); /* a kept connection: the request normally goes out at once */
	if (sent > 0)
		j->stage = ST_READING;
	else if (sent < 0)
		job_broken(L, j);
	return true;
}

/*
 * The body of j's answer (a 200/206) comes from its connection: the HTTP server's loop, this same
 * thread, moves it to the client (px_s3_get_stream). The connection leaves the epoll set meanwhile
 * (the server polls it) and j, off the active list, lives on until stream_done.
 */
static void stream_done(void *arg, int err);

static void job_stream(rloop_t *L, rjob_t *j)
{
	int fd = job_detach_fd(L, j);

	active_unlink(L, j);
	epoll_ctl(L->ep, EPOLL_CTL_DEL, fd, NULL);
	j->fd = fd;
	px_s3_get_stream(j->q, j->buf, j->head_len, j->len, fd, stream_done, j); /* j may be gone on return */
}

/* The end of j's streamed answer (this loop thread): the connection kept when its answer was read whole. */
static void stream_done(void *arg, int err)
{
	rjob_t *j = arg;
	rloop_t *L = my_loop;

	if (err != 0 && err != -ECONNRESET && err != -ECANCELED)
		ft_warn("s3 relay: the body from %s broke off: %s", j->hostport, strerror(-err));
	if (err == 0 && j->keep_alive && atomic_load(&running) && conn_watch(L, j->fd))
		idle_give(L, j->fd, j->hostport);
	else
		close(j->fd);
	j->fd = -1;
	job_free(L, j);
}

/* The connection of j ended or failed before its answer was whole: again on a new one, or to a worker. */
static void job_broken(rloop_t *L, rjob_t *j)
{
	if (j->reused && j->len == 0 && !j->retried) {
		/* a kept connection the target closed meanwhile: once more on a new one */
		ft_debug("s3 relay: the kept connection to %s was closed; on a new one", j->hostport);
		close(job_detach_fd(L, j));
		j->retried = true;
		if (job_connect(L, j, true))
			return;
	}
	job_handoff(L, j, false); /* nothing went to the client: the worker asks again */
}

/*
 * After the head parsed: whether the answer is one this loop gives whole (a body, or an error
 * body, of at most PX_S3_RLOOP_SMALL with a Content-Length). Sets j->want and grows the buffer.
 */
static bool job_small(rjob_t *j, const ft_hp_resp_head_t *h)
{
	bool bodyless = h->status == 304 || h->status == 204;

	if (h->chunked || h->status < 200 || (h->status >= 300 && h->status < 400 && h->status != 304))
		return false;
	if (!bodyless && (h->content_length < 0 || h->content_length > PX_S3_RLOOP_SMALL))
		return false;
	j->want = h->head_len + (bodyless ? 0 : (size_t)h->content_length);
	j->keep_alive = h->keep_alive;
	if (j->want > j->cap) {
		char *nb = realloc(j->buf, j->want);
		if (nb == NULL)
			return false;
		j->buf = nb;
		j->cap = j->want;
	}
	return true;
}

/*
 * Reads what is there into j->buf until the head is whole. A small answer then needs only the
 * rest of its body; any other (a large body, a redirect, a chunked answer) goes to a worker with
 * the connection and the bytes read so far, its head and maybe the first body bytes (the worker
 * gives those before the socket's, px_s3_relay_adopt). 1 = the head parsed (j->head_len, j->want
 * set), 0 = wait for more, -1 = j was ended.
 */
static int job_read_head(rloop_t *L, rjob_t *j)
{
	ft_hp_header_t hdrs[PX_S3_TARGET_HEADERS_MAX];
	ft_hp_resp_head_t h;
	ft_hp_result_t hp;
	ssize_t k;

	for (;;) {
		do
			k = recv(j->fd, j->buf + j->len, j->cap - j->len, MSG_DONTWAIT);
		while (k < 0 && errno == EINTR);
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k <= 0) {
			job_broken(L, j);
			return -1;
		}
		j->len += (size_t)k;
		hp = ft_hp_parse_resp_head(j->buf, j->len, PX_S3_TARGET_HEAD_MAX, hdrs, PX_S3_TARGET_HEADERS_MAX, &h);
		if (hp != FT_HP_AGAIN || j->len == j->cap)
			break;
	}
	if (hp != FT_HP_DONE) {
		job_handoff(L, j, false); /* the worker's client asks again and says what is wrong */
		return -1;
	}
	j->head_len = h.head_len;
	if (!job_small(j, &h)) {
		bool within = h.content_length < 0 || j->len - j->head_len <= (uint64_t)h.content_length;

		if (within && (h.status == 200 || h.status == 206) && !h.chunked && h.content_length >= 0) {
			j->keep_alive = h.keep_alive;
			job_stream(L, j);
			return -1;
		}
		/* the worker takes what was read (the head, maybe body bytes) and relays the rest; bytes
		 * beyond a declared length are no answer to this request: the worker asks again */
		job_handoff(L, j, within);
		return -1;
	}
	if (j->len > j->want) { /* more than the answer (a target that misbehaves): the connection is not kept */
		j->len = j->want;
		j->keep_alive = false;
	}
	return 1;
}

/* Reads what the target sent; answers, hands off, or waits for more. */
static void job_read(rloop_t *L, rjob_t *j)
{
	if (j->head_len == 0) {
		int rc = job_read_head(L, j);
		if (rc <= 0)
			return;
	}
	while (j->len < j->want) {
		ssize_t k = recv(j->fd, j->buf + j->len, j->want - j->len, MSG_DONTWAIT);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* more later */
		if (k <= 0) {
			job_handoff(L, j, false); /* cut before the client saw any of it: a worker asks again */
			return;
		}
		j->len += (size_t)k;
	}
	job_answer(L, j);
}

static void job_event(rloop_t *L, rjob_t *j, uint32_t events)
{
	if (j->stage == ST_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);

		getsockopt(j->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
			job_handoff(L, j, false); /* refused: the worker's own connect decides about a retry */
			return;
		}
		j->stage = ST_SENDING;
	}
	if (j->stage == ST_SENDING) {
		int sent = job_send(j);

		if (sent < 0)
			job_broken(L, j);
		if (sent <= 0)
			return;
		j->stage = ST_READING;
	}
	job_read(L, j);
}

/* Fails the jobs whose target stayed silent past the relay timeout (the timer ticks once a second). */
static void sweep(rloop_t *L)
{
	int64_t now = ft_now_ns();
	rjob_t *j, *next;
	uint64_t ticks;

	if (read(L->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		ft_debug("s3 relay loop: timerfd read: %s", strerror(errno));
	for (j = L->active; j != NULL; j = next) {
		next = j->next;
		if (now < j->deadline_ns)
			continue;
		ft_warn("s3 GET %s: the target %s did not answer in %.1f s", j->q->resource, j->hostport,
			px_s3_relay_timeout_ms() / 1000.0);
		close(job_detach_fd(L, j));
		active_unlink(L, j);
		px_s3_error(j->q, PX_S3_SERVICE_UNAVAILABLE, "the target holding the object did not answer");
		job_free(L, j);
	}
}

/* The loop thread's ring saw L's epoll set readable: runs every event there is (ft_httpd_watch). */
static void rloop_run(void *arg)
{
	rloop_t *L = arg;
	struct epoll_event evs[RLOOP_EVENTS];
	int n;

	do {
		n = epoll_wait(L->ep, evs, RLOOP_EVENTS, 0);
		for (int i = 0; i < n; i++) {
			int fd = (int)(uint32_t)evs[i].data.u64;
			uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);

			if (gen == 0 && fd == L->tfd)
				sweep(L);
			else if (fd >= L->nowner || L->gen[fd] != gen)
				continue; /* a closed connection's, its number since taken by another */
			else if (L->owner[fd] != NULL)
				job_event(L, L->owner[fd], evs[i].events);
			else
				idle_event(L, fd, evs[i].events);
		}
	} while (n == RLOOP_EVENTS);
}

static void rloop_free(rloop_t *L)
{
	while (L->active != NULL) { /* none once the HTTP server stopped: its requests were all answered */
		rjob_t *j = L->active;

		close(job_detach_fd(L, j));
		active_unlink(L, j);
		job_free(L, j);
	}
	for (int k = 0; k < L->nidle; k++)
		close(L->idle[k].fd);
	for (int k = 0; k < atomic_load(&L->nback); k++)
		close(L->back[k].fd);
	while (L->nbufs > 0)
		free(L->bufs[--L->nbufs]);
	if (L->ep >= 0)
		close(L->ep);
	if (L->tfd >= 0)
		close(L->tfd);
	free(L->owner);
	free(L->gen);
	pthread_mutex_destroy(&L->mu);
	free(L);
}

/* This loop thread's relay loop, made and watched on first use; NULL off a loop thread. */
static rloop_t *rloop_mine(void)
{
	struct itimerspec tick = {.it_interval = {.tv_sec = 1}, .it_value = {.tv_sec = 1}};
	struct epoll_event ev = {.events = EPOLLIN};
	rloop_t *L;

	if (my_loop != NULL || my_loop_failed)
		return my_loop;
	my_loop_failed = true;
	if ((L = calloc(1, sizeof(*L))) == NULL)
		return NULL;
	pthread_mutex_init(&L->mu, NULL);
	L->ep = epoll_create1(EPOLL_CLOEXEC);
	L->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ev.data.u64 = (uint32_t)L->tfd;
	if (L->ep < 0 || L->tfd < 0 || timerfd_settime(L->tfd, 0, &tick, NULL) != 0 ||
	    epoll_ctl(L->ep, EPOLL_CTL_ADD, L->tfd, &ev) != 0)
		goto fail;
	pthread_mutex_lock(&loops_mu);
	if (nloops == RLOOP_LOOPS_MAX || ft_httpd_watch(L->ep, rloop_run, L) != 0) {
		pthread_mutex_unlock(&loops_mu);
		goto fail;
	}
	loops[nloops++] = L;
	pthread_mutex_unlock(&loops_mu);
	my_loop = L;
	my_loop_failed = false;
	return L;
fail:
	rloop_free(L);
	return NULL;
}

/* ---- interface ---- */

void px_s3_rloop_start(void)
{
	atomic_store(&running, true);
}

void px_s3_rloop_stop(void)
{
	atomic_store(&running, false);
	pthread_mutex_lock(&loops_mu);
	for (int i = 0; i < nloops; i++)
		rloop_free(loops[i]);
	nloops = 0;
	pthread_mutex_unlock(&loops_mu);
}

bool px_s3_rloop_submit(px_s3_req_t *q, const char *hostport, bool local_only, char *req, size_t len)
{
	rjob_t *j;
	rloop_t *L;

	if (!atomic_load(&running) || strlen(hostport) >= RLOOP_HOSTPORT || (L = rloop_mine()) == NULL ||
	    (j = calloc(1, sizeof(*j))) == NULL) {
		free(req);
		return false;
	}
	j->q = q;
	j->req = req;
	j->req_len = len;
	j->local_only = local_only;
	j->fd = -1;
	snprintf(j->hostport, sizeof(j->hostport), "%s", hostport);
	j->next = L->active;
	if (L->active != NULL)
		L->active->prev = j;
	L->active = j;
	j->deadline_ns = ft_now_ns() + (int64_t)px_s3_relay_timeout_ms() * 1000000;
	j->buf = buf_take(L);
	j->cap = RLOOP_BUF0;
	if (j->buf == NULL || !job_connect(L, j, false))
		job_handoff(L, j, false);
	return true;
}

bool px_s3_rloop_give(int fd, const char *hostport)
{
	rloop_t *L;
	bool taken = false;

	if (!atomic_load(&running) || strlen(hostport) >= RLOOP_HOSTPORT)
		return false;
	pthread_mutex_lock(&loops_mu);
	if (nloops > 0) {
		L = loops[atomic_fetch_add(&next_back, 1) % (unsigned)nloops];
		pthread_mutex_lock(&L->mu);
		int n = atomic_load(&L->nback);
		if (n < RLOOP_BACK_MAX) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			L->back[n].fd = fd;
			snprintf(L->back[n].hostport, sizeof(L->back[n].hostport), "%s", hostport);
			atomic_store(&L->nback, n + 1);
			taken = true;
		}
		pthread_mutex_unlock(&L->mu);
	}
	pthread_mutex_unlock(&loops_mu);
	return taken;
}
