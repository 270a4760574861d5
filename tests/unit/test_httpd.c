/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for the server of common/http/: the real server on an ephemeral loopback port, driven over raw sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/metrics.h"
#include "http/http.h"
#include "http/internal.h" /* http_file_residency_probes_only, http_file_make_resident */

#define FILE_SIZE (5 * 1024 * 1024)

static ft_httpd_t *srv;
static int srv_port;
static char file_path[64];
static unsigned char *file_data;

/* observations made on server threads */
static atomic_int g_end_err = 1; /* last on_end error (1 = none yet) */
static atomic_int g_on_data_calls;
static atomic_int g_hook_runs;
static atomic_int g_gone_released;
static char g_hook_order[8];
static atomic_int g_hook_len;

/* ---- handlers ---- */

typedef struct {
	char *buf;
	size_t len, cap;
} echo_t;

static void free_echo(void *arg)
{
	echo_t *e = arg;

	free(e->buf);
}

static int echo_data(ft_req_t *r, void *arg, const void *buf, size_t len)
{
	echo_t *e = arg;

	(void)r;
	atomic_fetch_add(&g_on_data_calls, 1);
	if (e->len + len > e->cap) {
		e->cap = (e->len + len) * 2;
		e->buf = realloc(e->buf, e->cap);
	}
	memcpy(e->buf + e->len, buf, len);
	e->len += len;
	return 0;
}

static void echo_end(ft_req_t *r, void *arg, int err)
{
	echo_t *e = arg;

	atomic_store(&g_end_err, err);
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	ft_resp_bytes(r, 200, "application/octet-stream", e->buf, e->len);
}

static void echo_all_done(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	(void)arg;
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	assert_int_equal(body[len], 0);
	ft_resp_bytes(r, 200, NULL, body, len);
}

static void defer_work(ft_req_t *r, void *arg)
{
	pthread_t *handler_thread = arg;

	usleep(20000);
	ft_resp_header(r, "X-Off-Loop", pthread_equal(pthread_self(), *handler_thread) ? "0" : "1");
	ft_resp_bytes(r, 200, "text/plain", "deferred", 8);
}

/* ---- ft_httpd_watch: an eventfd watched by the loop thread that handled /watch ---- */

static int g_watch_fd = -1;
static pthread_t g_watch_loop;      /* the thread that handled /watch */
static atomic_int g_watch_calls;    /* watch_fn calls that consumed a write */
static atomic_int g_watch_off_loop; /* watch_fn calls on another thread than g_watch_loop, or with another arg */

static void watch_fn(void *arg)
{
	uint64_t v;

	if (arg != &g_watch_fd || !pthread_equal(pthread_self(), g_watch_loop))
		atomic_fetch_add(&g_watch_off_loop, 1);
	if (read(g_watch_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		atomic_fetch_add(&g_watch_calls, 1);
}

/* A watch whose first polls fail: an O_PATH fd (no poll), replaced by an eventfd while watched. */
static int g_watch_bad_fd = -1;   /* open("/", O_PATH), made in setup; dup2'd onto by test_watch_retried */
static int g_watch_good_fd = -1;  /* the eventfd that then takes its number */
static atomic_int g_watch2_calls; /* watch2_fn calls that consumed a write */

static void watch2_fn(void *arg)
{
	uint64_t v;

	(void)arg;
	if (read(g_watch_bad_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		atomic_fetch_add(&g_watch2_calls, 1);
}

static void handle_watch_bad(ft_req_t *r)
{
	int rc = ft_httpd_watch(g_watch_bad_fd, watch2_fn, NULL);

	ft_resp_bytes(r, 200, "text/plain", rc == 0 ? "0" : "-1", rc == 0 ? 1 : 2);
}

static void handle_watch(ft_req_t *r)
{
	int rc;

	g_watch_loop = pthread_self();
	rc = ft_httpd_watch(g_watch_fd, watch_fn, &g_watch_fd);
	ft_resp_bytes(r, 200, "text/plain", rc == 0 ? "0" : "-1", rc == 0 ? 1 : 2);
}

static void gone_hook(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_gone_released, 1);
}

static atomic_int g_saw_gone; /* deferred handlers that saw their client gone (ft_req_gone) */

/* Works up to 5 s, stopping as soon as the client is gone; answers either way. */
static void defer_until_gone_work(ft_req_t *r, void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++) {
		if (ft_req_gone(r)) {
			atomic_fetch_add(&g_saw_gone, 1);
			break;
		}
		usleep(5000);
	}
	ft_resp_bytes(r, 200, "text/plain", "done", 4);
}

static void until_gone_body_done(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	(void)arg, (void)body, (void)len;
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	ft_req_defer(r, defer_until_gone_work, NULL);
}

/* Works 200 ms, then answers whether the client was gone meanwhile (it was not, when it waits). */
static void defer_gone_check_work(ft_req_t *r, void *arg)
{
	char out[16];

	(void)arg;
	usleep(200000);
	snprintf(out, sizeof(out), "gone=%d", ft_req_gone(r) ? 1 : 0);
	ft_resp_bytes(r, 200, "text/plain", out, strlen(out));
}

static void defer_slow_work(ft_req_t *r, void *arg)
{
	(void)arg;
	usleep(300000);
	ft_resp_bytes(r, 200, "text/plain", "late", 4);
}

/* The body is asked for from a worker; the callback must come on the loop thread. */
static void worker_body_done(ft_req_t *r, void *arg, char *body, size_t len, int err)
{
	pthread_t *worker = arg;

	ft_resp_header(r, "X-On-Worker", pthread_equal(pthread_self(), *worker) ? "1" : "0");
	if (err != 0) {
		ft_resp_error(r, 400, "body error %d", err);
		return;
	}
	ft_resp_bytes(r, 200, NULL, body, len);
}

static void defer_read_work(ft_req_t *r, void *arg)
{
	pthread_t *worker = arg;

	*worker = pthread_self();
	ft_req_read_body_all(r, 1 << 20, worker_body_done, worker);
}

static atomic_int g_plain_runs;

static void plain_work(void *arg)
{
	atomic_fetch_add(&g_plain_runs, *(int *)arg);
}

static void order_hook(void *arg)
{
	int i = atomic_fetch_add(&g_hook_len, 1);

	if (i < (int)sizeof(g_hook_order) - 1)
		g_hook_order[i] = *(const char *)arg;
	atomic_fetch_add(&g_hook_runs, 1);
}

static uint64_t query_u64(ft_req_t *r, const char *k, uint64_t def)
{
	const char *v = ft_req_query(r, k);

	return v != NULL ? strtoull(v, NULL, 10) : def;
}

/* ---- blocking-stream handlers (on the worker pool) ---- */

static atomic_llong g_s_written;   /* bytes the generator's writes accepted */
static atomic_int g_s_write_err;   /* first write error of the generator (0 = none) */
static atomic_llong g_s_err_ms;    /* when it came */
static atomic_int g_s_body_err;    /* last ft_req_body_read error (0 = none) */
static atomic_int g_s_released;    /* on_done hooks of stream requests */
static atomic_int g_s_paused;      /* /s/sum?pause: set while the worker is not reading */
static atomic_llong g_s_body_read; /* bytes /s/sum read so far */

static int64_t now_ms(void);

/* The generator's byte at offset i. */
static unsigned char pat(uint64_t i)
{
	return (unsigned char)(((uint32_t)i * 2654435761u) >> 24);
}

static void pat_fill(unsigned char *p, size_t n, uint64_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(off + i);
}

static void s_released_hook(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_s_released, 1);
}

/* Echoes the body: the first read comes before the head (so "100 Continue" goes first). */
static void s_echo(ft_req_t *r)
{
	size_t cap = (size_t)query_u64(r, "cap", 65536);
	bool chunked = query_u64(r, "chunked", 0) != 0;
	unsigned char *buf = malloc(cap);
	unsigned seed = 1;
	ssize_t n;
	int rc = 0;

	usleep((useconds_t)query_u64(r, "delay", 0) * 1000);
	n = ft_req_body_read(r, buf, cap);
	if (ft_resp_stream_start(r, 200, "application/octet-stream", chunked ? -1 : ft_req_content_length(r)) != 0)
		rc = -ECONNRESET;
	while (rc == 0 && n > 0) {
		rc = ft_resp_stream_write(r, buf, (size_t)n);
		if (rc == 0) {
			seed = seed * 1103515245u + 12345u; /* varying read sizes */
			n = ft_req_body_read(r, buf, 1 + (size_t)(seed >> 8) % cap);
		}
	}
	if (n < 0) {
		atomic_store(&g_s_body_err, (int)n);
		rc = (int)n;
	}
	free(buf);
	ft_resp_stream_end(r, rc);
}

/* Writes size pattern bytes in pieces; records the first error and when it came. */
static void s_gen(ft_req_t *r)
{
	uint64_t size = query_u64(r, "size", 0), piece = query_u64(r, "piece", 65536), off = 0, n;
	bool chunked = query_u64(r, "chunked", 0) != 0;
	unsigned char *buf = malloc(piece);
	int rc;

	rc = ft_resp_stream_start(r, 200, "application/octet-stream", chunked ? -1 : (int64_t)size);
	while (rc == 0 && off < size) {
		n = size - off < piece ? size - off : piece;
		pat_fill(buf, (size_t)n, off);
		rc = ft_resp_stream_write(r, buf, (size_t)n);
		if (rc == 0) {
			off += n;
			atomic_fetch_add(&g_s_written, (long long)n);
		}
	}
	if (rc != 0) {
		atomic_store(&g_s_err_ms, now_ms());
		atomic_store(&g_s_write_err, rc);
	}
	free(buf);
	ft_resp_stream_end(r, rc);
}

/* Writes size pattern bytes with ft_resp_stream_writev, four pieces a call (one of them empty). */
static void s_genv(ft_req_t *r)
{
	static const size_t sizes[] = {1, 0, 7000, 60000};
	uint64_t size = query_u64(r, "size", 0), off = 0;
	bool chunked = query_u64(r, "chunked", 0) != 0;
	unsigned char *buf = malloc(70000);
	int rc;

	rc = ft_resp_stream_start(r, 200, "application/octet-stream", chunked ? -1 : (int64_t)size);
	while (rc == 0 && off < size) {
		struct iovec iov[4];
		size_t used = 0;
		for (int k = 0; k < 4; k++) {
			size_t n = sizes[k] < size - off - used ? sizes[k] : (size_t)(size - off - used);
			pat_fill(buf + used, n, off + used);
			iov[k] = (struct iovec){.iov_base = buf + used, .iov_len = n};
			used += n;
		}
		rc = ft_resp_stream_writev(r, iov, 4);
		off += used;
	}
	if (rc != 0)
		atomic_store(&g_s_write_err, rc);
	free(buf);
	ft_resp_stream_end(r, rc);
}

/* 100 KiB of a declared 1 MiB (or chunked), then an abort, a short end, or a plain response call. */
static void s_abort(ft_req_t *r)
{
	bool chunked = query_u64(r, "chunked", 0) != 0;
	unsigned char *buf = malloc(100 * 1024);

	pat_fill(buf, 100 * 1024, 0);
	ft_resp_stream_start(r, 200, NULL, chunked ? -1 : 1024 * 1024);
	ft_resp_stream_write(r, buf, 100 * 1024);
	free(buf);
	if (query_u64(r, "misuse", 0))
		ft_resp_error(r, 500, "too late");
	else
		ft_resp_stream_end(r, query_u64(r, "short", 0) ? 0 : -EIO);
}

/* Declares 100 bytes, tries to write 150 (refused), then writes 100 and ends. */
static void s_over(ft_req_t *r)
{
	unsigned char buf[150];
	int rc;

	pat_fill(buf, sizeof(buf), 0);
	ft_resp_stream_start(r, 200, NULL, 100);
	rc = ft_resp_stream_write(r, buf, 150);
	atomic_store(&g_s_write_err, rc);
	ft_resp_stream_write(r, buf, 100);
	ft_resp_stream_end(r, 0);
}

/*
 * Reads the body (all, or stop= bytes) and answers with a plain response: "<bytes> <sum>". pause=ms:
 * stop reading that long after the first read; slow=ms: sleep after every read.
 */
static void s_sum(ft_req_t *r)
{
	uint64_t stop = query_u64(r, "stop", UINT64_MAX), total = 0, sum = 0;
	unsigned pause = (unsigned)query_u64(r, "pause", 0), slow = (unsigned)query_u64(r, "slow", 0);
	unsigned char buf[65536];
	char out[64];
	ssize_t n, i;

	atomic_store(&g_s_body_read, 0);
	while (total < stop) {
		n = ft_req_body_read(r, buf, stop - total < sizeof(buf) ? (size_t)(stop - total) : sizeof(buf));
		if (n <= 0) {
			if (n < 0) {
				atomic_store(&g_s_body_err, (int)n);
				ft_resp_error(r, 400, "body error %d", (int)n);
				return;
			}
			break;
		}
		for (i = 0; i < n; i++)
			sum = sum * 31 + buf[i];
		if (total == 0 && pause > 0) {
			/* the body is flowing now; stop reading for a while */
			atomic_store(&g_s_paused, 1);
			usleep(pause * 1000);
			atomic_store(&g_s_paused, 0);
		}
		total += (uint64_t)n;
		atomic_store(&g_s_body_read, (long long)total);
		if (slow > 0)
			usleep(slow * 1000);
	}
	snprintf(out, sizeof(out), "%llu %llu", (unsigned long long)total, (unsigned long long)sum);
	ft_resp_bytes(r, 200, "text/plain", out, strlen(out));
}

/*
 * Streams size pattern bytes from a file it writes as it goes (like a cold GET): each piece is
 * written, then queued with ft_resp_stream_sendfile. mix=1: every third piece goes through
 * ft_resp_stream_write instead (order check); short=1: from half way, queues bytes the file does
 * not have; abort=1: from half way, ends with an error.
 */
static void s_fgen(ft_req_t *r)
{
	uint64_t size = query_u64(r, "size", 0), piece = query_u64(r, "piece", 100000), off = 0, n;
	bool chunked = query_u64(r, "chunked", 0) != 0, mix = query_u64(r, "mix", 0) != 0;
	bool cut = query_u64(r, "short", 0) != 0, abort_ = query_u64(r, "abort", 0) != 0;
	char path[] = "/tmp/ft-httpd-fgen-XXXXXX";
	unsigned char *buf = malloc(piece);
	int fd = mkstemp(path), rc;
	unsigned k = 0;

	assert_true(fd >= 0);
	unlink(path);
	rc = ft_resp_stream_start(r, 200, "application/octet-stream", chunked ? -1 : (int64_t)size);
	while (rc == 0 && off < size && !((cut || abort_) && off >= size / 2)) {
		n = size - off < piece ? size - off : piece;
		pat_fill(buf, (size_t)n, off);
		if (mix && k++ % 3 == 1) {
			rc = ft_resp_stream_write(r, buf, (size_t)n);
		} else {
			assert_int_equal(pwrite(fd, buf, (size_t)n, (off_t)off), (ssize_t)n);
			rc = ft_resp_stream_sendfile(r, fd, off, n);
		}
		if (rc == 0)
			off += n;
	}
	if (cut && rc == 0)
		rc = ft_resp_stream_sendfile(r, fd, off, size - off); /* past the file's end */
	if (rc != 0)
		atomic_store(&g_s_write_err, rc);
	close(fd); /* the server sends from its own dup */
	free(buf);
	ft_resp_stream_end(r, rc != 0 ? rc : abort_ ? -EIO : 0);
}

/* ---- a stream from a socket (ft_resp_stream_splice) ---- */

typedef struct {
	int fd;
	uint64_t off, len; /* pattern bytes [off, off + len) to send */
	const char *tail;  /* then these bytes, when not NULL (the source's next message) */
	bool hold;         /* after them, keep the socket open until the other end closes */
} feeder_t;

/* Sends the feeder's pattern bytes, then closes (or holds until the reader's end is closed). */
static void *feeder_main(void *arg)
{
	feeder_t *f = arg;
	unsigned char buf[65536];
	uint64_t done = 0;

	while (done < f->len) {
		size_t n = f->len - done < sizeof(buf) ? (size_t)(f->len - done) : sizeof(buf);
		ssize_t k;

		pat_fill(buf, n, f->off + done);
		k = send(f->fd, buf, n, MSG_NOSIGNAL);
		if (k <= 0)
			break; /* the reader is gone */
		done += (uint64_t)k;
	}
	if (f->tail != NULL && done == f->len)
		send(f->fd, f->tail, strlen(f->tail), MSG_NOSIGNAL);
	if (f->hold)
		while (recv(f->fd, buf, sizeof(buf), 0) > 0)
			;
	close(f->fd);
	return NULL;
}

/* A connected loopback TCP pair: *rd (the relay's end) and *wr (the source's). */
static void tcp_pair(int *rd, int *wr)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
	*wr = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(*wr, (struct sockaddr *)&a, sizeof(a)), 0);
	*rd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(*rd >= 0);
	close(l);
}

/*
 * Streams size pattern bytes: pre of them written first, then spliced from a socket fed by another
 * thread, then post written. send: how many bytes the source has for the splice (default all of
 * them; fewer = it ends early); hold=1: the source then stays open without sending (read timeout
 * of 300 ms); chunked=1: a stream without a Content-Length (refused).
 */
static void s_splice(ft_req_t *r)
{
	uint64_t size = query_u64(r, "size", 0), pre = query_u64(r, "pre", 0), post = query_u64(r, "post", 0);
	uint64_t mid = size - pre - post;
	feeder_t f = {.off = pre, .len = query_u64(r, "send", mid), .hold = query_u64(r, "hold", 0) != 0};
	bool chunked = query_u64(r, "chunked", 0) != 0;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 300000};
	unsigned char *buf = malloc(pre + post + 1);
	pthread_t th;
	int rd, rc;

	tcp_pair(&rd, &f.fd);
	setsockopt(rd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(pthread_create(&th, NULL, feeder_main, &f), 0);
	rc = ft_resp_stream_start(r, 200, "application/octet-stream", chunked ? -1 : (int64_t)size);
	pat_fill(buf, (size_t)pre, 0);
	if (rc == 0 && pre > 0)
		rc = ft_resp_stream_write(r, buf, (size_t)pre);
	if (rc == 0)
		rc = ft_resp_stream_splice(r, rd, mid);
	pat_fill(buf, (size_t)post, pre + mid);
	if (rc == 0 && post > 0)
		rc = ft_resp_stream_write(r, buf, (size_t)post);
	atomic_store(&g_s_write_err, rc);
	close(rd); /* the feeder's sends fail or its hold ends */
	pthread_join(th, NULL);
	free(buf);
	ft_resp_stream_end(r, rc);
}

static void stream_work(ft_req_t *r, void *arg)
{
	const char *path = ft_req_path(r, NULL);

	(void)arg;
	if (strcmp(path, "/s/echo") == 0)
		s_echo(r);
	else if (strcmp(path, "/s/gen") == 0)
		s_gen(r);
	else if (strcmp(path, "/s/genv") == 0)
		s_genv(r);
	else if (strcmp(path, "/s/abort") == 0)
		s_abort(r);
	else if (strcmp(path, "/s/over") == 0)
		s_over(r);
	else if (strcmp(path, "/s/sum") == 0)
		s_sum(r);
	else if (strcmp(path, "/s/fgen") == 0)
		s_fgen(r);
	else if (strcmp(path, "/s/splice") == 0)
		s_splice(r);
	else
		ft_resp_stream_end(r, 0); /* never started: the server answers 500 */
}

/* ---- a body from a socket, moved by the loop thread (ft_resp_socket) ---- */

/* /sock's answer, set by the test, and what its done(arg, err) saw; all under mu. */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd, status, timeout_ms;
	const unsigned char *pre;
	size_t pre_len;
	uint64_t len;
	pthread_t caller;   /* the thread that called ft_resp_socket */
	int calls, err;     /* done's calls, its last err */
	bool on_caller;     /* done ran on the caller's thread */
	bool before_return; /* done had run when ft_resp_socket returned */
	bool returned;      /* ft_resp_socket returned (before_return is then set) */
} sock_body_t;

static sock_body_t g_sk = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .fd = -1};

static void sock_done(void *arg, int err)
{
	sock_body_t *k = arg;

	pthread_mutex_lock(&k->mu);
	k->calls++;
	k->err = err;
	k->on_caller = pthread_equal(pthread_self(), k->caller);
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

/* Answers r with the test's socket body, on this thread (a loop thread's handler, or a worker). */
static void sock_answer(ft_req_t *r)
{
	sock_body_t *k = &g_sk;
	ft_resp_socket_t b = {.done = sock_done, .arg = k};
	int status;

	pthread_mutex_lock(&k->mu);
	k->caller = pthread_self();
	b.fd = k->fd;
	b.pre = k->pre;
	b.pre_len = k->pre_len;
	b.len = k->len;
	b.timeout_ms = k->timeout_ms;
	status = k->status;
	pthread_mutex_unlock(&k->mu);
	ft_resp_socket(r, status, "application/octet-stream", &b);
	pthread_mutex_lock(&k->mu);
	k->before_return = k->calls > 0;
	k->returned = true;
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

static void sock_defer_work(ft_req_t *r, void *arg)
{
	(void)arg;
	sock_answer(r);
}

/* On the loop thread the blocking calls refuse instead of blocking. */
static void s_on_loop(ft_req_t *r)
{
	char b[8];
	ssize_t n = ft_req_body_read(r, b, sizeof(b));
	int w;

	ft_resp_stream_start(r, 200, "text/plain", -1);
	w = ft_resp_stream_write(r, "x", 1);
	ft_resp_stream_end(r, 0);
	atomic_store(&g_s_body_err, (int)n);
	atomic_store(&g_s_write_err, w);
}

static void handle_file(ft_req_t *r, bool short_file)
{
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);
	uint64_t off = query_u64(r, "off", 0), len = query_u64(r, "len", FILE_SIZE - off);

	if (fd < 0) {
		ft_resp_error(r, 500, "open: %s", strerror(errno));
		return;
	}
	if (short_file)
		len = FILE_SIZE + 1000;
	ft_resp_file(r, off > 0 || len < FILE_SIZE ? 206 : 200, "application/octet-stream", fd, (off_t)off, len);
}

/* ft_resp_file_borrowed of one fd the test keeps (opened at the first request), counted done by a hook. */
static int g_borrow_fd = -1;
static atomic_int g_borrow_done;

static void borrow_done(void *arg)
{
	(void)arg;
	atomic_fetch_add(&g_borrow_done, 1);
}

static void handle_borrowed(ft_req_t *r)
{
	if (g_borrow_fd < 0)
		g_borrow_fd = open(file_path, O_RDONLY | O_CLOEXEC);
	ft_req_on_done(r, borrow_done, NULL);
	ft_resp_file_borrowed(r, 200, "application/octet-stream", g_borrow_fd, 0, FILE_SIZE);
}

static void handler(ft_req_t *r, void *ctx)
{
	size_t plen;
	const char *path = ft_req_path(r, &plen);
	echo_t *e;
	char buf[512];
	int n;

	(void)ctx;
	if (strcmp(path, "/small") == 0) {
		ft_resp_header(r, "X-Test", "yes");
		ft_resp_bytes(r, 200, "text/plain", "hello world", 11);
	} else if (strcmp(path, "/echo") == 0) {
		e = ft_req_alloc(r, sizeof(*e));
		memset(e, 0, sizeof(*e));
		ft_req_on_done(r, free_echo, e);
		ft_req_read_body(r, echo_data, echo_end, e);
	} else if (strcmp(path, "/echoall") == 0) {
		ft_req_read_body_all(r, (size_t)query_u64(r, "max", 1 << 20), echo_all_done, NULL);
	} else if (strcmp(path, "/noread") == 0) {
		ft_resp_bytes(r, 200, "text/plain", "no", 2);
	} else if (strcmp(path, "/defer") == 0) {
		pthread_t *self = ft_req_alloc(r, sizeof(*self));

		*self = pthread_self();
		ft_req_defer(r, defer_work, self);
	} else if (strcmp(path, "/defer-read") == 0) {
		ft_req_defer(r, defer_read_work, ft_req_alloc(r, sizeof(pthread_t)));
	} else if (strcmp(path, "/defer-until-gone") == 0) {
		ft_req_defer(r, defer_until_gone_work, NULL);
	} else if (strcmp(path, "/defer-body-until-gone") == 0) {
		ft_req_read_body_all(r, 1 << 20, until_gone_body_done, NULL);
	} else if (strcmp(path, "/defer-gone-check") == 0) {
		ft_req_defer(r, defer_gone_check_work, NULL);
	} else if (strcmp(path, "/defer-slow") == 0) {
		ft_req_on_done(r, gone_hook, NULL);
		ft_req_defer(r, defer_slow_work, NULL);
	} else if (strcmp(path, "/file") == 0) {
		handle_file(r, false);
	} else if (strcmp(path, "/borrowed") == 0) {
		handle_borrowed(r);
	} else if (strcmp(path, "/file-short") == 0) {
		handle_file(r, true);
	} else if (strcmp(path, "/watch") == 0) {
		handle_watch(r);
	} else if (strcmp(path, "/watchbad") == 0) {
		handle_watch_bad(r);
	} else if (strcmp(path, "/query") == 0) {
		const char *a = ft_req_query(r, "a"), *b = ft_req_query(r, "b"), *c = ft_req_query(r, "c"),
			   *d = ft_req_query(r, "d");

		n = snprintf(buf, sizeof(buf), "a=%s|b=%s|c=%s|d=%s|qs=%s", a ? a : "NULL", b ? b : "NULL",
			     c ? c : "NULL", d ? d : "NULL", ft_req_query_string(r));
		ft_resp_bytes(r, 200, "text/plain", buf, (size_t)n);
	} else if (strncmp(path, "/path/", 6) == 0) {
		ft_resp_header(r, "X-Target", ft_req_target(r));
		ft_resp_bytes(r, 200, "text/plain", path, plen);
	} else if (strcmp(path, "/hooks") == 0) {
		ft_req_on_done(r, order_hook, "1");
		ft_req_on_done(r, order_hook, "2");
		ft_req_on_done(r, order_hook, "3");
		ft_resp_bytes(r, 200, NULL, "h", 1);
	} else if (strcmp(path, "/error") == 0) {
		ft_resp_error(r, 404, "no \"such\" thing\n%s", "\\");
	} else if (strcmp(path, "/redirect") == 0) {
		ft_resp_redirect(r, 307, "http://example.invalid/y?z=1");
	} else if (strcmp(path, "/headers") == 0) {
		const char *name, *value;

		ft_req_header_at(r, ft_req_header_count(r) - 1, &name, &value);
		n = snprintf(buf, sizeof(buf), "%d|%s|%s=%s|%s|%lld", ft_req_header_count(r),
			     ft_req_header(r, "x-MiXeD") ? ft_req_header(r, "x-MiXeD") : "NULL", name, value,
			     ft_req_method_name(r), (long long)ft_req_content_length(r));
		ft_resp_headerf(r, "X-Peer", "%s", ft_req_peer(r));
		ft_resp_header(r, "Content-Length", "999");     /* the server's: ignored */
		ft_resp_header(r, "X-Bad", "a\r\nInjected: 1"); /* dropped */
		ft_resp_bytes(r, 200, NULL, buf, (size_t)n);
	} else if (strcmp(path, "/close") == 0) {
		ft_resp_close(r);
		ft_resp_bytes(r, 200, NULL, "bye", 3);
	} else if (strcmp(path, "/empty") == 0) {
		ft_resp_bytes(r, 204, NULL, NULL, 0);
	} else if (strcmp(path, "/sock") == 0) {
		sock_answer(r);
	} else if (strcmp(path, "/sock-defer") == 0) {
		ft_req_defer(r, sock_defer_work, NULL);
	} else if (strcmp(path, "/s/loop") == 0) {
		s_on_loop(r);
	} else if (strncmp(path, "/s/", 3) == 0) {
		ft_req_on_done(r, s_released_hook, NULL);
		ft_req_defer(r, stream_work, NULL);
	} else {
		ft_resp_error(r, 404, "no route %s", path);
	}
}

/* ---- raw client ---- */

typedef struct {
	int fd;
	char *buf;
	size_t len, cap;
} cli_t;

typedef struct {
	int status;
	char head[8192];
	char *body;
	size_t body_len;
	long long clen;
} resp_t;

/* Connects to port; rcvbuf > 0 caps the socket's receive buffer (a slow reader's window). */
static int cli_open_opts(cli_t *c, int port, int rcvbuf)
{
	struct sockaddr_in a = {0};
	struct timeval tv = {.tv_sec = 5};

	memset(c, 0, sizeof(*c));
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c->fd >= 0);
	if (rcvbuf > 0)
		setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		fail_msg("connect: %s", strerror(errno));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	c->cap = 64 * 1024;
	c->buf = malloc(c->cap);
	return c->fd;
}

static int cli_open_port(cli_t *c, int port)
{
	return cli_open_opts(c, port, 0);
}

static void cli_open(cli_t *c)
{
	cli_open_port(c, srv_port);
}

static void cli_close(cli_t *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

static void cli_send(cli_t *c, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n > 0) {
		w = send(c->fd, s, n, MSG_NOSIGNAL);
		if (w < 0)
			fail_msg("send: %s", strerror(errno));
		s += w;
		n -= (size_t)w;
	}
}

static void cli_sends(cli_t *c, const char *s)
{
	cli_send(c, s, strlen(s));
}

/* Reads more bytes into the buffer; returns the count, 0 at EOF, -1 on error or timeout. */
static ssize_t cli_fill(cli_t *c)
{
	ssize_t n;

	if (c->len == c->cap) {
		c->cap *= 2;
		c->buf = realloc(c->buf, c->cap);
	}
	n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (n > 0)
		c->len += (size_t)n;
	return n;
}

static void cli_consume(cli_t *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

static const char *resp_header(const resp_t *r, const char *name, char *out, size_t outlen)
{
	const char *p = strstr(r->head, "\r\n");
	size_t nl = strlen(name);

	while (p != NULL && p[2] != '\r') {
		const char *line = p + 2, *eol = strstr(line, "\r\n");

		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			size_t vl;

			while (*v == ' ')
				v++;
			vl = (size_t)(eol - v);
			if (vl >= outlen)
				vl = outlen - 1;
			memcpy(out, v, vl);
			out[vl] = 0;
			return out;
		}
		p = eol;
	}
	return NULL;
}

/* Reads one response; head_only for HEAD requests. Returns 0, or -1 if the connection ended first. */
static int cli_read(cli_t *c, resp_t *r, bool head_only)
{
	char *end = NULL, v[64];
	size_t hl;

	memset(r, 0, sizeof(*r));
	r->clen = -1;
	while ((end = c->len > 0 ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL) == NULL)
		if (cli_fill(c) <= 0)
			return -1;
	hl = (size_t)(end - c->buf) + 4;
	assert_true(hl < sizeof(r->head));
	memcpy(r->head, c->buf, hl);
	r->head[hl] = 0;
	cli_consume(c, hl);
	if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1)
		fail_msg("bad status line: %.60s", r->head);
	if (resp_header(r, "Content-Length", v, sizeof(v)) != NULL)
		r->clen = atoll(v);
	if (head_only || r->status < 200 || r->status == 204 || r->status == 304 || r->clen <= 0)
		return 0;
	while (c->len < (size_t)r->clen)
		if (cli_fill(c) <= 0)
			return -1;
	r->body = malloc((size_t)r->clen + 1);
	memcpy(r->body, c->buf, (size_t)r->clen);
	r->body[r->clen] = 0;
	r->body_len = (size_t)r->clen;
	cli_consume(c, (size_t)r->clen);
	return 0;
}

static void resp_free(resp_t *r)
{
	free(r->body);
	r->body = NULL;
}

/* True when the server closes the connection (EOF or reset) with no further bytes. */
static bool cli_eof(cli_t *c)
{
	char b;
	ssize_t n = recv(c->fd, &b, 1, 0);

	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void get(cli_t *c, const char *target, resp_t *r)
{
	char req[1024];

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	cli_sends(c, req);
	assert_int_equal(cli_read(c, r, false), 0);
}

/* One request on a fresh connection; expects the status and a close. */
static void expect_status_close(const char *raw, size_t len, int status)
{
	cli_t c;
	resp_t r;
	char v[64];

	cli_open(&c);
	cli_send(&c, raw, len);
	if (cli_read(&c, &r, false) != 0)
		fail_msg("no response to %.40s", raw);
	if (r.status != status)
		fail_msg("status %d, want %d for %.60s", r.status, status, raw);
	assert_non_null(resp_header(&r, "Connection", v, sizeof(v)));
	assert_string_equal(v, "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void wait_atomic(atomic_int *v, int want, int ms)
{
	int i;

	for (i = 0; i < ms && atomic_load(v) != want; i++)
		usleep(1000);
	assert_int_equal(atomic_load(v), want);
}

/* ---- tests ---- */

static void test_get_small(void **state)
{
	cli_t c;
	resp_t r;
	char v[128];

	(void)state;
	cli_open(&c);
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello world");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "11");
	assert_string_equal(resp_header(&r, "Server", v, sizeof(v)), "FastTier");
	assert_string_equal(resp_header(&r, "Content-Type", v, sizeof(v)), "text/plain");
	assert_string_equal(resp_header(&r, "X-Test", v, sizeof(v)), "yes");
	assert_non_null(resp_header(&r, "Date", v, sizeof(v)));
	assert_true(strlen(v) == 29 && strcmp(v + 25, " GMT") == 0);
	assert_null(resp_header(&r, "Connection", v, sizeof(v)));
	resp_free(&r);
	cli_close(&c);
}

static void test_head(void **state)
{
	cli_t c;
	resp_t r;
	char v[64];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "HEAD /small HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "11");
	resp_free(&r);
	/* no body bytes followed: the next response starts right away */
	cli_sends(&c, "HEAD /file HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, FILE_SIZE);
	assert_int_equal(c.len, 0);
	resp_free(&r);
	get(&c, "/small", &r);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
	cli_close(&c);
}

static void test_keepalive_three(void **state)
{
	cli_t c;
	resp_t r;
	int i;

	(void)state;
	cli_open(&c);
	for (i = 0; i < 3; i++) {
		get(&c, "/small", &r);
		assert_int_equal(r.status, 200);
		assert_string_equal(r.body, "hello world");
		resp_free(&r);
	}
	cli_close(&c);
}

static void test_pipelined(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /query?a=1 HTTP/1.1\r\nHost: t\r\n\r\n"
		      "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nHELLO"
		      "GET /query?a=3 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "a=1|b=NULL|c=NULL|d=NULL|qs=a=1");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "HELLO");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "a=3|b=NULL|c=NULL|d=NULL|qs=a=3");
	resp_free(&r);
	cli_close(&c);
}

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}

static void test_put_streamed(void **state)
{
	enum { N = 200000 };
	unsigned char *data = malloc(N);
	char head[256];
	size_t off = 0, piece;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 7);
	atomic_store(&g_on_data_calls, 0);
	atomic_store(&g_end_err, 1);
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	cli_sends(&c, head);
	while (off < N) {
		piece = 1 + (off * 7919) % 30000;
		if (piece > N - off)
			piece = N - off;
		cli_send(&c, data + off, piece);
		off += piece;
		usleep(2000);
	}
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, N);
	assert_memory_equal(r.body, data, N);
	assert_int_equal(atomic_load(&g_end_err), 0);
	assert_true(atomic_load(&g_on_data_calls) > 1);
	resp_free(&r);
	/* the connection stays usable after a fully read body */
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
	free(data);
}

static void test_put_chunked(void **state)
{
	static const char body[] =
		"4;ext=1\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n";
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
	for (i = 0; i < sizeof(body) - 1; i += 5) {
		cli_send(&c, body + i, sizeof(body) - 1 - i < 5 ? sizeof(body) - 1 - i : 5);
		usleep(1000);
	}
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "Wikipedia in \r\n\r\nchunks.");
	resp_free(&r);
	/* bad framing -> on_end(-EBADMSG), handler answers 400, connection closes */
	atomic_store(&g_end_err, 1);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_int_equal(atomic_load(&g_end_err), -EBADMSG);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	/* read_body_all over chunked */
	cli_open(&c);
	cli_sends(&c, "POST /echoall HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "abc");
	resp_free(&r);
	cli_close(&c);
}

static void test_expect_continue(void **state)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	cli_t c;
	resp_t r;
	char v[64];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	/* the client waits for the interim response before sending the body */
	while (c.len < sizeof(cont) - 1)
		if (cli_fill(&c) <= 0)
			fail_msg("no 100 Continue");
	assert_memory_equal(c.buf, cont, sizeof(cont) - 1);
	cli_consume(&c, sizeof(cont) - 1);
	cli_sends(&c, "abcde");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "abcde");
	resp_free(&r);
	cli_close(&c);

	/* a handler that answers without reading: no 100, final response, close */
	cli_open(&c);
	cli_sends(&c, "PUT /noread HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);

	/* read_body_all with a declared length over max: 413 without 100 */
	cli_open(&c);
	cli_sends(&c, "PUT /echoall?max=10 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 413);
	resp_free(&r);
	cli_close(&c);
}

static void test_body_reset(void **state)
{
	cli_t c;

	(void)state;
	atomic_store(&g_end_err, 1);
	cli_open(&c);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789");
	usleep(50000);
	cli_close(&c);
	wait_atomic(&g_end_err, -ECONNRESET, 3000);
}

/* A watched fd calls its function on the loop thread that asked, once per wake-up, for as long as the loop runs. */
static void test_watch(void **state)
{
	cli_t c;
	resp_t r;
	uint64_t one = 1;

	(void)state;
	assert_true(g_watch_fd >= 0); /* made in setup, before the loop threads (ThreadSanitizer sees no io_uring) */
	assert_int_equal(ft_httpd_watch(g_watch_fd, watch_fn, &g_watch_fd), -1); /* not a loop thread */
	cli_open(&c);
	get(&c, "/watch", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "0");
	resp_free(&r);
	for (int i = 1; i <= 3; i++) { /* each write a new wake-up: the poll stays armed */
		assert_int_equal(write(g_watch_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		wait_atomic(&g_watch_calls, i, 3000);
	}
	assert_int_equal(atomic_load(&g_watch_off_loop), 0);
	get(&c, "/query?a=1", &r); /* the loop still serves requests */
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
}

/* A watch whose poll failed is polled again by the timer sweep: once its fd can be polled, it works. */
static void test_watch_retried(void **state)
{
	cli_t c;
	resp_t r;
	uint64_t one = 1;

	(void)state;
	assert_true(g_watch_bad_fd >= 0 && g_watch_good_fd >= 0);
	cli_open(&c);
	get(&c, "/watchbad", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "0");
	resp_free(&r);
	usleep(100000); /* its poll failed (an O_PATH fd) */
	assert_int_equal(dup2(g_watch_good_fd, g_watch_bad_fd), g_watch_bad_fd);
	for (int i = 1; i <= 2; i++) {
		assert_int_equal(write(g_watch_bad_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		wait_atomic(&g_watch2_calls, i, 3000); /* the sweep ticks every second here */
	}
	get(&c, "/query?a=1", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
}

static void test_defer(void **state)
{
	cli_t c;
	resp_t r;
	char v[16];
	int i;

	(void)state;
	cli_open(&c);
	for (i = 0; i < 2; i++) {
		get(&c, "/defer", &r);
		assert_int_equal(r.status, 200);
		assert_string_equal(r.body, "deferred");
		assert_string_equal(resp_header(&r, "X-Off-Loop", v, sizeof(v)), "1");
		resp_free(&r);
	}
	/* the body asked for from the worker, delivered on the loop, with 100-continue */
	cli_sends(&c, "PUT /defer-read HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 100);
	cli_sends(&c, "wxyz");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "wxyz");
	assert_string_equal(resp_header(&r, "X-On-Worker", v, sizeof(v)), "0");
	resp_free(&r);
	/* work with no request attached */
	static int seven = 7;

	atomic_store(&g_plain_runs, 0);
	ft_httpd_defer(srv, plain_work, &seven);
	ft_httpd_defer(srv, plain_work, &seven);
	wait_atomic(&g_plain_runs, 14, 2000);
	/* a deferred request pipelined ahead of a plain one: answered in order */
	cli_sends(&c, "GET /defer HTTP/1.1\r\nHost: t\r\n\r\nGET /small HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "deferred");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
	cli_close(&c);
}

static void test_defer_client_gone(void **state)
{
	cli_t c;
	resp_t r;
	int before = atomic_load(&g_gone_released);

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /defer-slow HTTP/1.1\r\nHost: t\r\n\r\n");
	usleep(20000);
	cli_close(&c);
	wait_atomic(&g_gone_released, before + 1, 3000);
	cli_open(&c);
	get(&c, "/small", &r);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
}

/* A deferred handler learns that its client left (ft_req_gone), with or without a request body; one that stays is not gone. */
static void test_defer_sees_client_gone(void **state)
{
	cli_t c;
	resp_t r;
	int before = atomic_load(&g_saw_gone);

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /defer-until-gone HTTP/1.1\r\nHost: t\r\n\r\n");
	usleep(50000);
	cli_close(&c);
	wait_atomic(&g_saw_gone, before + 1, 3000);
	cli_open(&c);
	cli_sends(&c, "POST /defer-body-until-gone HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd");
	usleep(50000);
	cli_close(&c);
	wait_atomic(&g_saw_gone, before + 2, 3000);
	cli_open(&c);
	get(&c, "/defer-gone-check", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "gone=0");
	resp_free(&r);
	/* a request pipelined behind a deferred one, sent while it works, is read then, and answered after it */
	cli_sends(&c, "GET /defer-gone-check HTTP/1.1\r\nHost: t\r\n\r\n");
	usleep(50000);
	cli_sends(&c, "GET /small HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "gone=0");
	resp_free(&r);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
	cli_close(&c);
	assert_int_equal(atomic_load(&g_saw_gone), before + 2);
}

static void test_file(void **state)
{
	cli_t c;
	resp_t r;
	char target[128];

	(void)state;
	cli_open(&c);
	get(&c, "/file", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, FILE_SIZE);
	assert_memory_equal(r.body, file_data, FILE_SIZE);
	resp_free(&r);
	snprintf(target, sizeof(target), "/file?off=%d&len=%d", 4097, 3 * 1024 * 1024 + 5);
	get(&c, target, &r);
	assert_int_equal(r.status, 206);
	assert_int_equal(r.body_len, 3 * 1024 * 1024 + 5);
	assert_memory_equal(r.body, file_data + 4097, r.body_len);
	resp_free(&r);
	get(&c, "/file?off=5242879&len=1", &r);
	assert_int_equal(r.body_len, 1);
	assert_int_equal((unsigned char)r.body[0], file_data[FILE_SIZE - 1]);
	resp_free(&r);
	cli_close(&c);
}

/* Pages of the test file in the page cache among [off, off + len) (mincore over a read-only mapping). */
static size_t resident_pages(int fd, off_t off, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (len + (size_t)page - 1) / (size_t)page, i, count = 0;
	unsigned char *vec = malloc(n);
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);

	assert_true(vec != NULL && map != MAP_FAILED);
	assert_int_equal(mincore(map, len, vec), 0);
	for (i = 0; i < n; i++)
		count += vec[i] & 1;
	munmap(map, len);
	free(vec);
	return count;
}

/*
 * Drops the test file from the page cache, so the next reads of it come from the disk. A page that a pipe of an earlier test's response still
 * holds (a splice's last pages, freed when that response's end has been processed) stays: asked
 * again until none is left, for up to 2 s (a slow machine, a sanitizer build).
 */
static void evict_file(void)
{
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fsync(fd), 0);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		if (resident_pages(fd, 0, FILE_SIZE) == 0)
			break;
		usleep(20000);
	}
	close(fd);
}

/* Pages [off, off + len) of the test file back in the page cache. */
static void warm_file(off_t off, size_t len)
{
	char *buf = malloc(len);
	int fd = open(file_path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0 && buf != NULL);
	assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
	free(buf);
}

/*
 * GETs of the file, whole and in ranges, each after an eviction, then with one MiB in the middle cached
 * (a range that starts there goes from sendfile to the pipe): the same bytes.
 */
static void file_gets_evicted(void)
{
	static const struct {
		uint64_t off, len;
	} ranges[] = {{0, FILE_SIZE},       {4097, 3 * 1024 * 1024 + 5}, {FILE_SIZE - 1, 1},
		      {1024 * 1024 - 1, 2}, {123, 2 * 1024 * 1024},      {1024 * 1024 + 100, 2 * 1024 * 1024}};
	cli_t c;
	resp_t r;
	char target[128];
	size_t i;
	int warm;

	cli_open(&c);
	for (warm = 0; warm < 2; warm++) {
		for (i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
			evict_file();
			if (warm)
				warm_file(1024 * 1024, 1024 * 1024); /* one MiB in the middle is cached */
			snprintf(target, sizeof(target), "/file?off=%llu&len=%llu", (unsigned long long)ranges[i].off,
				 (unsigned long long)ranges[i].len);
			get(&c, target, &r);
			assert_int_equal(r.status, ranges[i].len < FILE_SIZE ? 206 : 200);
			assert_int_equal(r.body_len, ranges[i].len);
			assert_memory_equal(r.body, file_data + ranges[i].off, ranges[i].len);
			resp_free(&r);
		}
	}
	cli_close(&c);
}

/* ft_resp_file_borrowed: the body is sent, and the fd is never closed by the server (GET and HEAD). */
static void test_file_borrowed(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	for (int i = 0; i < 3; i++) {
		get(&c, "/borrowed", &r);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.body_len, FILE_SIZE);
		assert_memory_equal(r.body, file_data, FILE_SIZE);
		resp_free(&r);
	}
	cli_sends(&c, "HEAD /borrowed HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
	for (int i = 0; i < 100 && atomic_load(&g_borrow_done) < 4; i++)
		usleep(10 * 1000);
	assert_int_equal(atomic_load(&g_borrow_done), 4);
	assert_true(fcntl(g_borrow_fd, F_GETFD) != -1); /* still the test's */
	close(g_borrow_fd);
	g_borrow_fd = -1;
}

static void test_file_evicted(void **state)
{
	(void)state;
	file_gets_evicted();
}

/*
 * A worker's step before queuing a stream's file range: an evicted range is read into the page cache
 * (all its pages resident afterwards), with cachestat(2) or with the probes alone, also when its first
 * and last pages stayed cached (a read-ahead in flight outlives an eviction); a range past the end of
 * the file returns.
 */
static void test_file_make_resident(void **state)
{
	int fd, probes;
	long page = sysconf(_SC_PAGESIZE);
	size_t want = 2 * 1024 * 1024 / (size_t)page;

	(void)state;
	for (probes = 0; probes < 4; probes++) {
		http_file_residency_probes_only(probes % 2);
		evict_file();
		if (probes >= 2) { /* the range's ends cached, its middle not */
			warm_file(1024 * 1024, (size_t)page);
			warm_file(3 * 1024 * 1024 - page, (size_t)page);
		}
		fd = open(file_path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_true(resident_pages(fd, 1024 * 1024, 2 * 1024 * 1024) < want / 2);
		http_file_make_resident(fd, 1024 * 1024, 2 * 1024 * 1024);
		assert_int_equal(resident_pages(fd, 1024 * 1024, 2 * 1024 * 1024), want);
		http_file_make_resident(fd, 1024 * 1024, 2 * 1024 * 1024); /* resident: nothing to read */
		http_file_make_resident(fd, FILE_SIZE - 10, 4096);         /* past the end: returns */
		http_file_make_resident(fd, 2 * FILE_SIZE, 4096);
		close(fd);
	}
	http_file_residency_probes_only(false);
}

/* The same with residency decided by RWF_NOWAIT probes alone, as on a kernel without cachestat(2). */
static void test_file_evicted_probes_only(void **state)
{
	(void)state;
	http_file_residency_probes_only(true);
	file_gets_evicted();
	http_file_residency_probes_only(false);
}

static void file_short(void)
{
	cli_t c;
	resp_t r;
	size_t total;

	cli_open(&c);
	cli_sends(&c, "GET /file-short HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, FILE_SIZE + 1000);
	total = c.len;
	for (;;) {
		c.len = 0;
		ssize_t n = cli_fill(&c);

		if (n <= 0) {
			assert_true(n == 0 || errno == ECONNRESET);
			break;
		}
		total += (size_t)n;
	}
	assert_int_equal(total, FILE_SIZE);
	resp_free(&r);
	cli_close(&c);
}

static void test_file_short(void **state)
{
	(void)state;
	file_short();
}

/* A file shorter than its response, not in the page cache: the pipe's way meets the end and cuts too. */
static void test_file_short_evicted(void **state)
{
	(void)state;
	evict_file();
	file_short();
}

static void test_limits_431(void **state)
{
	char *big = malloc(8192);
	int n, i;

	(void)state;
	n = snprintf(big, 8192, "GET /small HTTP/1.1\r\nHost: t\r\nX-Big: ");
	memset(big + n, 'a', 5000);
	n += 5000;
	n += snprintf(big + n, 8192 - (size_t)n, "\r\n\r\n");
	expect_status_close(big, (size_t)n, 431);
	/* head without an end, past the limit */
	expect_status_close(big, 6000, 431);
	n = snprintf(big, 8192, "GET /small HTTP/1.1\r\nHost: t\r\n");
	for (i = 0; i < 25; i++)
		n += snprintf(big + n, 8192 - (size_t)n, "X-H%d: v\r\n", i);
	n += snprintf(big + n, 8192 - (size_t)n, "\r\n");
	expect_status_close(big, (size_t)n, 431);
	free(big);
}

static void expect_s(const char *raw, int status)
{
	expect_status_close(raw, strlen(raw), status);
}

static void test_bad_requests(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	expect_s("GET  /small HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET /small HTTP/1.1\r\nHost t\r\n\r\n", 400);
	expect_s("GET /small HTTP/1.1\r\n\r\n", 400);
	expect_s("GET /a%zzb HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET /a%2 HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("GET nopath HTTP/1.1\r\nHost: t\r\n\r\n", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
	expect_s("PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501);
	expect_s("GET /small HTTP/2.0\r\nHost: t\r\n\r\n", 505);
	expect_s("GET /small HTTP/1.1\r\nHost: t\r\nA: \x01\r\n\r\n", 400);
	/* the error body is the JSON form */
	cli_open(&c);
	cli_sends(&c, "GET /bad%zz HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "{\"status\": 400, \"message\": \"invalid request target\"}");
	resp_free(&r);
	cli_close(&c);
}

static void test_http10(void **state)
{
	cli_t c;
	resp_t r;
	char v[32];

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /small HTTP/1.0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	cli_open(&c);
	cli_sends(&c, "GET /small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "keep-alive");
	resp_free(&r);
	cli_sends(&c, "GET /small HTTP/1.0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "hello world");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void test_query_path_headers(void **state)
{
	cli_t c;
	resp_t r;
	char v[256];

	(void)state;
	cli_open(&c);
	get(&c, "/query?a=1&b=x+y%20z&c&a=2&d=%zz", &r);
	assert_string_equal(r.body, "a=1|b=x y z|c=|d=%zz|qs=a=1&b=x+y%20z&c&a=2&d=%zz");
	resp_free(&r);
	/* the next request on the connection decodes its own query (none of the one before is kept); a name
	 * is compared decoded and whole: "%64" is d, "a%00" is not a */
	get(&c, "/query?%64=7&a%00=no&b", &r);
	assert_string_equal(r.body, "a=NULL|b=|c=NULL|d=7|qs=%64=7&a%00=no&b");
	resp_free(&r);
	get(&c, "/query", &r);
	assert_string_equal(r.body, "a=NULL|b=NULL|c=NULL|d=NULL|qs=");
	resp_free(&r);
	get(&c, "/path/a%00b%2Fc+d?x=1", &r);
	assert_int_equal(r.body_len, 13);
	assert_memory_equal(r.body, "/path/a\0b/c+d", 13);
	assert_string_equal(resp_header(&r, "X-Target", v, sizeof(v)), "/path/a%00b%2Fc+d?x=1");
	resp_free(&r);
	get(&c, "http://host:1/path/abs?q", &r);
	assert_string_equal(r.body, "/path/abs");
	resp_free(&r);
	cli_sends(&c, "PATCH /headers HTTP/1.1\r\nHost: t\r\nX-Mixed:  spaced value \r\nLast: one\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_string_equal(r.body, "3|spaced value|Last=one|PATCH|0");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "31");
	assert_null(resp_header(&r, "X-Bad", v, sizeof(v)));
	assert_null(resp_header(&r, "Injected", v, sizeof(v)));
	assert_non_null(resp_header(&r, "X-Peer", v, sizeof(v)));
	assert_true(strncmp(v, "127.0.0.1:", 10) == 0);
	resp_free(&r);
	get(&c, "/error", &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(r.body, "{\"status\": 404, \"message\": \"no \\\"such\\\" thing\\n\\\\\"}");
	assert_string_equal(resp_header(&r, "Content-Type", v, sizeof(v)), "application/json");
	resp_free(&r);
	get(&c, "/redirect", &r);
	assert_int_equal(r.status, 307);
	assert_string_equal(resp_header(&r, "Location", v, sizeof(v)), "http://example.invalid/y?z=1");
	assert_string_equal(resp_header(&r, "Content-Length", v, sizeof(v)), "0");
	resp_free(&r);
	get(&c, "/empty", &r);
	assert_int_equal(r.status, 204);
	assert_null(resp_header(&r, "Content-Length", v, sizeof(v)));
	resp_free(&r);
	get(&c, "/close", &r);
	assert_string_equal(r.body, "bye");
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void test_hooks_order(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_hook_len, 0);
	atomic_store(&g_hook_runs, 0);
	cli_open(&c);
	get(&c, "/hooks", &r);
	resp_free(&r);
	wait_atomic(&g_hook_runs, 3, 2000);
	assert_memory_equal(g_hook_order, "321", 3);
	cli_close(&c);
}

static void test_body_all_limit(void **state)
{
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(
		&c,
		"POST /echoall?max=4 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 413);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ft_httpd_t *start_server_workers(int idle, int header, int body, int workers, int *port)
{
	ft_httpd_opts_t o = {0};
	char err[256];
	ft_httpd_t *s;

	o.bind = "127.0.0.1";
	o.port = 0;
	o.threads = 2;
	o.workers = workers;
	o.max_header_bytes = 4096;
	o.max_headers = 20;
	o.idle_timeout_ms = idle;
	o.header_timeout_ms = header;
	o.body_timeout_ms = body;
	o.handler = handler;
	s = ft_httpd_start(&o, err, sizeof(err));
	if (s == NULL)
		fail_msg("start: %s", err);
	*port = ft_httpd_port(s);
	assert_true(*port > 0);
	return s;
}

static ft_httpd_t *start_server(int idle, int header, int body, int *port)
{
	return start_server_workers(idle, header, body, 4, port);
}

static void test_timeouts(void **state)
{
	int port, i;
	ft_httpd_t *s = start_server(300, 400, 300, &port);
	int64_t t0, dt;
	cli_t c;
	resp_t r;

	(void)state;
	/* idle: closed silently */
	cli_open_port(&c, port);
	t0 = now_ms();
	assert_true(cli_eof(&c));
	dt = now_ms() - t0;
	assert_true(dt >= 250 && dt < 2000);
	cli_close(&c);

	/* keep-alive idle after a response */
	cli_open_port(&c, port);
	get(&c, "/small", &r);
	resp_free(&r);
	t0 = now_ms();
	assert_true(cli_eof(&c));
	assert_true(now_ms() - t0 >= 250);
	cli_close(&c);

	/* incomplete head: 408 */
	cli_open_port(&c, port);
	cli_sends(&c, "GET /small HTTP/1.1\r\nHost: t\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 408);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);

	/* slowloris: a byte every 40 ms still gets 408 at the header deadline */
	cli_open_port(&c, port);
	t0 = now_ms();
	for (i = 0; i < 40; i++) {
		char b;

		if (send(c.fd, "X", 1, MSG_NOSIGNAL) != 1)
			break;
		usleep(40000);
		if (recv(c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 1)
			break; /* the answer arrived */
	}
	dt = now_ms() - t0;
	assert_true(dt >= 350 && dt < 1200);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 408);
	resp_free(&r);
	cli_close(&c);

	/* body stall: on_end(-ETIMEDOUT), then close */
	atomic_store(&g_end_err, 1);
	cli_open_port(&c, port);
	cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_int_equal(atomic_load(&g_end_err), -ETIMEDOUT);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	ft_httpd_stop(s);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_many_sequential(void **state)
{
	int base, i, now = 0;
	cli_t c;
	resp_t r;

	(void)state;
	usleep(100000);
	base = count_fds();
	for (i = 0; i < 1000; i++) {
		cli_open(&c);
		get(&c, i % 2 ? "/small" : "/file?len=16384", &r);
		assert_true(r.status == 200 || r.status == 206);
		resp_free(&r);
		cli_close(&c);
	}
	/* the server closes its side once it sees each EOF */
	for (i = 0; i < 200; i++) {
		now = count_fds();
		if (now <= base)
			break;
		usleep(10000);
	}
	if (now > base)
		fail_msg("fds: %d before, %d after", base, now);
}

static atomic_int g_mix_errors;

/* One client thread of the mixed load: keep-alive, defer, bodies, pipelining, abrupt closes. */
static void *mix_client(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char body[1000], req[256];
	cli_t c;
	resp_t r;
	int i, op;

	memset(body, 'b', sizeof(body));
	cli_open(&c);
	for (i = 0; i < 150; i++) {
		seed = seed * 1103515245u + 12345u;
		op = (int)((seed >> 16) % 6);
		switch (op) {
		case 0:
		case 1:
			snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", op ? "/defer" : "/small");
			cli_sends(&c, req);
			if (cli_read(&c, &r, false) != 0 || r.status != 200 ||
			    strcmp(r.body, op ? "deferred" : "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		case 2:
			cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
			cli_send(&c, body, sizeof(body));
			if (cli_read(&c, &r, false) != 0 || r.status != 200 || r.body_len != sizeof(body))
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		case 3:
			cli_sends(&c, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789");
			cli_close(&c);
			cli_open(&c);
			break;
		case 4:
			cli_sends(&c, "GET /small HTTP/1.1\r\nHost: t\r\n\r\nGET /defer HTTP/1.1\r\nHost: t\r\n\r\n"
				      "GET /small HTTP/1.1\r\nHost: t\r\n\r\n");
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "deferred") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			if (cli_read(&c, &r, false) != 0 || strcmp(r.body, "hello world") != 0)
				atomic_fetch_add(&g_mix_errors, 1);
			resp_free(&r);
			break;
		default:
			/* leave a deferred request behind */
			cli_sends(&c, "GET /defer HTTP/1.1\r\nHost: t\r\n\r\n");
			cli_close(&c);
			cli_open(&c);
			break;
		}
	}
	cli_close(&c);
	return NULL;
}

static void test_concurrent_mix(void **state)
{
	pthread_t th[8];
	int i;

	(void)state;
	atomic_store(&g_mix_errors, 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&th[i], NULL, mix_client, (void *)(uintptr_t)(i + 1)), 0);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&g_mix_errors), 0);
}

static void test_stop_with_live_connections(void **state)
{
	int port;
	ft_httpd_t *s = start_server(5000, 5000, 5000, &port);
	cli_t idle, slow, body, stream, sbody;
	int before = atomic_load(&g_gone_released), s_before = atomic_load(&g_s_released);

	(void)state;
	cli_open_port(&idle, port);
	cli_open_port(&slow, port);
	cli_open_port(&body, port);
	cli_sends(&slow, "GET /defer-slow HTTP/1.1\r\nHost: t\r\n\r\n");
	cli_sends(&body, "PUT /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
	/* a worker blocked in a stream write (nobody reads) and one blocked in a body read */
	cli_open_opts(&stream, port, 4096);
	cli_sends(&stream, "GET /s/gen?size=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n");
	cli_open_port(&sbody, port);
	cli_sends(&sbody, "PUT /s/sum HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nabc");
	usleep(300000);
	ft_httpd_stop(s);
	/* the deferred requests were answered (or released) before stop returned */
	assert_int_equal(atomic_load(&g_gone_released), before + 1);
	assert_int_equal(atomic_load(&g_s_released), s_before + 2);
	assert_true(cli_eof(&idle));
	cli_close(&idle);
	cli_close(&slow);
	cli_close(&body);
	cli_close(&stream);
	cli_close(&sbody);
}

/* ---- blocking streams ---- */

/* Reads n body bytes, comparing them with expect[off..] (NULL: pat(off..)); returns how many came before EOF. */
static uint64_t cli_read_cmp(cli_t *c, uint64_t n, const unsigned char *expect, uint64_t off, bool *bad)
{
	uint64_t got = 0;
	size_t k, i;

	while (got < n) {
		if (c->len == 0 && cli_fill(c) <= 0)
			break;
		k = c->len < n - got ? c->len : (size_t)(n - got);
		for (i = 0; i < k; i++)
			if ((unsigned char)c->buf[i] != (expect ? expect[off + got + i] : pat(off + got + i)))
				*bad = true;
		cli_consume(c, k);
		got += k;
	}
	return got;
}

/* Waits for a "\r\n" in the buffer; returns the line length, -1 at EOF. */
static ssize_t cli_line(cli_t *c)
{
	char *eol;

	while ((eol = c->len > 0 ? memmem(c->buf, c->len, "\r\n", 2) : NULL) == NULL)
		if (cli_fill(c) <= 0)
			return -1;
	return eol - c->buf;
}

/*
 * Reads a chunked body into *out (malloc'd, *len bytes, even when cut). Returns 0 after the last
 * chunk and the trailer section, -1 if the connection ended (or the framing broke) first.
 */
static int cli_read_chunked(cli_t *c, unsigned char **out, size_t *len)
{
	size_t cap = 1 << 20, sz, k;
	ssize_t ll;
	char *end;

	*out = malloc(cap);
	*len = 0;
	for (;;) {
		if ((ll = cli_line(c)) < 0)
			return -1;
		sz = (size_t)strtoull(c->buf, &end, 16);
		if (end == c->buf)
			return -1;
		cli_consume(c, (size_t)ll + 2);
		if (sz == 0)
			break;
		while (c->len < sz + 2 && cli_fill(c) > 0)
			;
		k = c->len < sz ? c->len : sz;
		if (*len + k > cap) {
			cap = (*len + k) * 2;
			*out = realloc(*out, cap);
		}
		memcpy(*out + *len, c->buf, k);
		*len += k;
		if (c->len < sz + 2 || memcmp(c->buf + sz, "\r\n", 2) != 0)
			return -1;
		cli_consume(c, sz + 2);
	}
	while ((ll = cli_line(c)) > 0) /* trailers */
		cli_consume(c, (size_t)ll + 2);
	if (ll < 0)
		return -1;
	cli_consume(c, 2);
	return 0;
}

/* A thread that sends a request head and a body (chunked in varying pieces, or as is). */
typedef struct {
	int fd;
	const char *head;
	const unsigned char *data;
	size_t len;
	bool chunked;
	atomic_llong sent; /* body bytes handed to the kernel */
	int err;
} sender_t;

static int send_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n > 0) {
		w = send(fd, s, n, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *sender_main(void *arg)
{
	sender_t *sd = arg;
	struct timeval tv = {.tv_sec = 10};
	size_t off = 0, piece;
	unsigned seed = 5;
	char ch[64];

	setsockopt(sd->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (send_all(sd->fd, sd->head, strlen(sd->head)) != 0)
		goto fail;
	while (off < sd->len) {
		seed = seed * 1103515245u + 12345u;
		piece = 1 + (seed >> 8) % 100000;
		if (piece > sd->len - off)
			piece = sd->len - off;
		if (sd->chunked && send_all(sd->fd, ch, (size_t)snprintf(ch, sizeof(ch), "%zx;ext=1\r\n", piece)) != 0)
			goto fail;
		if (send_all(sd->fd, sd->data + off, piece) != 0)
			goto fail;
		if (sd->chunked && send_all(sd->fd, "\r\n", 2) != 0)
			goto fail;
		off += piece;
		atomic_store(&sd->sent, (long long)off);
	}
	if (sd->chunked && send_all(sd->fd, "0\r\nX-T: v\r\n\r\n", 13) != 0)
		goto fail;
	return NULL;
fail:
	sd->err = errno ? errno : EIO;
	return NULL;
}

static long vm_rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void expect_small(cli_t *c)
{
	resp_t r;

	get(c, "/small", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "hello world");
	resp_free(&r);
}

/* 20 MiB echoed through ft_req_body_read + ft_resp_stream_*; request and response both framed by length. */
static void test_stream_echo_length(void **state)
{
	enum { N = 20 * 1024 * 1024 };
	unsigned char *data = malloc(N);
	char head[256], v[64];
	sender_t sd = {0};
	pthread_t th;
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 11);
	atomic_store(&g_s_body_err, 0);
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /s/echo HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	sd.fd = c.fd;
	sd.head = head;
	sd.data = data;
	sd.len = N;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.clen, N);
	assert_null(resp_header(&r, "Connection", v, sizeof(v)));
	assert_int_equal(cli_read_cmp(&c, N, data, 0, &bad), N);
	assert_false(bad);
	pthread_join(th, NULL);
	assert_int_equal(sd.err, 0);
	assert_int_equal(atomic_load(&g_s_body_err), 0);
	resp_free(&r);
	expect_small(&c); /* keep-alive after the stream */
	cli_close(&c);
	free(data);
}

/* 20 MiB echoed with a chunked request (varying chunks, extensions, trailer) and a chunked response. */
static void test_stream_echo_chunked(void **state)
{
	enum { N = 20 * 1024 * 1024 };
	unsigned char *data = malloc(N), *out = NULL;
	char v[64];
	sender_t sd = {0};
	pthread_t th;
	size_t len = 0;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 12);
	atomic_store(&g_s_body_err, 0);
	cli_open(&c);
	sd.fd = c.fd;
	sd.head = "POST /s/echo?chunked=1&cap=100000 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
	sd.data = data;
	sd.len = N;
	sd.chunked = true;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(resp_header(&r, "Transfer-Encoding", v, sizeof(v)), "chunked");
	assert_null(resp_header(&r, "Content-Length", v, sizeof(v)));
	assert_null(resp_header(&r, "Connection", v, sizeof(v)));
	assert_int_equal(cli_read_chunked(&c, &out, &len), 0); /* ends with the last chunk */
	assert_int_equal(len, N);
	assert_memory_equal(out, data, N);
	pthread_join(th, NULL);
	assert_int_equal(sd.err, 0);
	assert_int_equal(atomic_load(&g_s_body_err), 0);
	assert_int_equal(c.len, 0);
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);
	free(out);
	free(data);
}

/* A client reading slowly holds the worker back: bytes queued ahead of it and RSS stay bounded. */
static void test_stream_slow_reader(void **state)
{
	const uint64_t N = 50ull * 1024 * 1024;
	long long ahead, max_ahead = 0;
	long rss0, rss, rss_max;
	uint64_t off = 0;
	int64_t t0;
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_written, 0);
	atomic_store(&g_s_write_err, 0);
	cli_open_opts(&c, srv_port, 32 * 1024);
	rss0 = rss_max = vm_rss_kb();
	cli_sends(&c, "GET /s/gen?size=52428800 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, (long long)N);
	t0 = now_ms();
	while (now_ms() - t0 < 1500) {
		off += cli_read_cmp(&c, 8192, NULL, off, &bad);
		ahead = atomic_load(&g_s_written) - (long long)off;
		if (ahead > max_ahead)
			max_ahead = ahead;
		rss = vm_rss_kb();
		if (rss > rss_max)
			rss_max = rss;
		usleep(5000);
	}
	/* the ring (256 KiB) plus the kernel's socket buffers; unbounded would be ~50 MiB */
	print_message("slow reader: worker at most %lld bytes ahead, RSS +%ld kB\n", max_ahead, rss_max - rss0);
	if (max_ahead > 8ll * 1024 * 1024)
		fail_msg("the worker got %lld bytes ahead of a slow reader", max_ahead);
	if (rss_max - rss0 > 16 * 1024)
		fail_msg("RSS grew by %ld kB while streaming to a slow reader", rss_max - rss0);
	assert_true(off < N / 4);
	off += cli_read_cmp(&c, N - off, NULL, off, &bad);
	assert_int_equal(off, N);
	assert_false(bad);
	assert_int_equal(atomic_load(&g_s_write_err), 0);
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);
}

/*
 * A client that keeps up: the worker sends the stream's bytes on the socket itself while the loop
 * is dry (no hand-off), and those bytes are counted in the response-bytes metric like the loop's.
 */
static void test_stream_direct_counted(void **state)
{
	const uint64_t N = 8ull * 1024 * 1024;
	unsigned code = 200 / 100 - 1;
	int64_t before = ft_metric_value(FT_M_HTTP_RESPONSE_BYTES, FT_HTTP_GET, code), grown = 0;
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 0);
	cli_open(&c);
	cli_sends(&c, "GET /s/gen?size=8388608&piece=100000 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, (long long)N);
	assert_int_equal(cli_read_cmp(&c, N, NULL, 0, &bad), N);
	assert_false(bad);
	resp_free(&r);
	expect_small(&c);
	for (int64_t t0 = now_ms(); now_ms() - t0 < 2000; usleep(2000)) { /* counted once the loop finished r */
		grown = ft_metric_value(FT_M_HTTP_RESPONSE_BYTES, FT_HTTP_GET, code) - before;
		if (grown >= (int64_t)N)
			break;
	}
	if (grown < (int64_t)N || grown > (int64_t)N + 1024)
		fail_msg("response bytes counted %lld for a body of %llu", (long long)grown, (unsigned long long)N);
	assert_int_equal(atomic_load(&g_s_write_err), 0);
	cli_close(&c);
}

/*
 * ft_resp_stream_writev: pieces (an empty one among them) in order, whole, with a Content-Length and
 * chunked; to a client that keeps up (one system call a writev) and to one that reads slowly
 * through a small receive buffer (the pieces then go through the ring).
 */
static void test_stream_writev(void **state)
{
	const uint64_t N = 3000000;
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 0);
	for (int slow = 0; slow < 2; slow++) {
		unsigned char *out = NULL;
		size_t len = 0;

		if (slow)
			cli_open_opts(&c, srv_port, 16 * 1024);
		else
			cli_open(&c);
		cli_sends(&c, "GET /s/genv?size=3000000 HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, true), 0);
		assert_int_equal(r.clen, (long long)N);
		if (slow)
			usleep(200 * 1000); /* the socket fills: what it does not take goes to the ring */
		assert_int_equal(cli_read_cmp(&c, N, NULL, 0, &bad), N);
		assert_false(bad);
		resp_free(&r);
		expect_small(&c);
		cli_sends(&c, "GET /s/genv?size=3000000&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, true), 0);
		if (slow)
			usleep(200 * 1000);
		assert_int_equal(cli_read_chunked(&c, &out, &len), 0);
		assert_int_equal(len, N);
		for (size_t j = 0; j < len; j++)
			if (out[j] != pat(j))
				fail_msg("writev chunked (slow %d): bad byte at %zu", slow, j);
		free(out);
		resp_free(&r);
		expect_small(&c);
		cli_close(&c);
	}
	assert_int_equal(atomic_load(&g_s_write_err), 0);
}

/* The client goes away mid-stream: the blocked write fails within a second and r is released. */
static void test_stream_client_gone(void **state)
{
	int before = atomic_load(&g_s_released), err;
	int64_t t_close;
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 0);
	cli_open(&c);
	cli_sends(&c, "GET /s/gen?size=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(cli_read_cmp(&c, 1 << 20, NULL, 0, &bad), 1 << 20);
	assert_false(bad);
	usleep(200000); /* the worker blocks on a full ring */
	assert_int_equal(atomic_load(&g_s_write_err), 0);
	t_close = now_ms();
	cli_close(&c);
	wait_atomic(&g_s_released, before + 1, 3000);
	err = atomic_load(&g_s_write_err);
	assert_true(err == -ECONNRESET || err == -EPIPE);
	if (atomic_load(&g_s_err_ms) - t_close > 1000)
		fail_msg("the write failed %lld ms after the client left", atomic_load(&g_s_err_ms) - t_close);
	resp_free(&r);
}

/* Sends target, expects a 200 head, then a cut body of want bytes and the close. */
static void expect_cut(const char *target, bool chunked, size_t want)
{
	unsigned char *out = NULL;
	char req[256], v[64];
	size_t len = 0, i;
	bool bad = false;
	cli_t c;
	resp_t r;

	cli_open(&c);
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", target);
	cli_sends(&c, req);
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	if (chunked) {
		assert_string_equal(resp_header(&r, "Transfer-Encoding", v, sizeof(v)), "chunked");
		assert_int_equal(cli_read_chunked(&c, &out, &len), -1); /* no last chunk */
		assert_int_equal(len, want);
		for (i = 0; i < len; i++)
			if (out[i] != pat(i))
				fail_msg("bad byte at %zu", i);
		free(out);
	} else {
		assert_true(r.clen > (long long)want);
		assert_int_equal(cli_read_cmp(&c, (uint64_t)r.clen, NULL, 0, &bad), want);
		assert_false(bad);
	}
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

static void test_stream_abort(void **state)
{
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	expect_cut("/s/abort", false, 100 * 1024);          /* end(err) with a Content-Length */
	expect_cut("/s/abort?chunked=1", true, 100 * 1024); /* end(err), chunked: no last chunk */
	expect_cut("/s/abort?short=1", false, 100 * 1024);  /* end(0) short of the Content-Length */
	expect_cut("/s/abort?misuse=1", false, 100 * 1024); /* a plain response call after the start */
	/* a write past the Content-Length is refused; the connection closes after the 100 bytes */
	atomic_store(&g_s_write_err, 0);
	cli_open(&c);
	cli_sends(&c, "GET /s/over HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, 100);
	assert_int_equal(cli_read_cmp(&c, 100, NULL, 0, &bad), 100);
	assert_false(bad);
	assert_true(cli_eof(&c));
	assert_int_equal(atomic_load(&g_s_write_err), -EMSGSIZE);
	resp_free(&r);
	cli_close(&c);
	/* chunked end(0) is a whole body */
	{
		unsigned char *out = NULL;
		size_t len = 0;

		cli_open(&c);
		cli_sends(&c, "GET /s/abort?chunked=1&short=1 HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, true), 0);
		assert_int_equal(cli_read_chunked(&c, &out, &len), 0);
		assert_int_equal(len, 100 * 1024);
		free(out);
		resp_free(&r);
		expect_small(&c);
		cli_close(&c);
	}
}

/* A stream from a growing file (ft_resp_stream_sendfile), alone and mixed with ring writes. */
static void test_stream_sendfile(void **state)
{
	static const char *const targets[] = {
		"/s/fgen?size=20000000&piece=300000",
		"/s/fgen?size=20000000&piece=300000&mix=1",
		"/s/fgen?size=9000000&piece=5000000", /* pieces over the queue bound */
		"/s/fgen?size=7&piece=3&mix=1",
	};
	char req[256], v[64];
	bool bad = false;
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 0);
	cli_open(&c);
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", targets[i]);
		cli_sends(&c, req);
		assert_int_equal(cli_read(&c, &r, true), 0);
		assert_int_equal(r.status, 200);
		assert_null(resp_header(&r, "Connection", v, sizeof(v)));
		assert_int_equal(cli_read_cmp(&c, (uint64_t)r.clen, NULL, 0, &bad), (uint64_t)r.clen);
		if (bad)
			fail_msg("%s: the body differs from the pattern", targets[i]);
		resp_free(&r);
		expect_small(&c); /* keep-alive after each */
	}
	/* HEAD: headers only, the queued file bytes are ignored */
	cli_sends(&c, "HEAD /s/fgen?size=1000 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, 1000);
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);
	assert_int_equal(atomic_load(&g_s_write_err), 0);
	/* chunked, alone and mixed */
	for (i = 0; i < 2; i++) {
		unsigned char *out = NULL;
		size_t len = 0, j;

		cli_open(&c);
		cli_sends(&c, i == 0 ? "GET /s/fgen?size=3000000&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n"
				     : "GET /s/fgen?size=3000000&chunked=1&mix=1&piece=70000 HTTP/1.1\r\n"
				       "Host: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, true), 0);
		assert_string_equal(resp_header(&r, "Transfer-Encoding", v, sizeof(v)), "chunked");
		assert_int_equal(cli_read_chunked(&c, &out, &len), 0);
		assert_int_equal(len, 3000000);
		for (j = 0; j < len; j++)
			if (out[j] != pat(j))
				fail_msg("chunked %zu: bad byte at %zu", i, j);
		free(out);
		resp_free(&r);
		expect_small(&c);
		cli_close(&c);
	}
}

/* A stream from a socket (ft_resp_stream_splice): exact length, after and before ring bytes, keep-alive. */
static void test_stream_splice(void **state)
{
	static const char *const targets[] = {
		"/s/splice?size=20000000",
		"/s/splice?size=3000000&pre=70000&post=100001", /* ring, socket, ring: in order */
		"/s/splice?size=7&pre=3",
		"/s/splice?size=0",
	};
	char req[256], v[64];
	bool bad = false;
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	for (i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		atomic_store(&g_s_write_err, 1);
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", targets[i]);
		cli_sends(&c, req);
		assert_int_equal(cli_read(&c, &r, true), 0);
		assert_int_equal(r.status, 200);
		assert_null(resp_header(&r, "Connection", v, sizeof(v)));
		assert_int_equal(cli_read_cmp(&c, (uint64_t)r.clen, NULL, 0, &bad), (uint64_t)r.clen);
		if (bad)
			fail_msg("%s: the body differs from the pattern", targets[i]);
		resp_free(&r);
		expect_small(&c); /* keep-alive after each: the whole body and nothing more */
		assert_int_equal(atomic_load(&g_s_write_err), 0);
	}
	/* HEAD: headers only, nothing read from the socket */
	cli_sends(&c, "HEAD /s/splice?size=1000&send=0 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.clen, 1000);
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);
}

/* A socket that ends early or stalls, or a stream without a length: the client sees a cut body, never a whole one. */
static void test_stream_splice_cut(void **state)
{
	(void)state;
	expect_cut("/s/splice?size=1000000&send=500000", false, 500000); /* the source ends */
	assert_int_equal(atomic_load(&g_s_write_err), -EPIPE);
	expect_cut("/s/splice?size=1000000&pre=1000&send=0", false, 1000);
	assert_int_equal(atomic_load(&g_s_write_err), -EPIPE);
	expect_cut("/s/splice?size=1000000&send=500000&hold=1", false, 500000); /* the source stalls */
	assert_int_equal(atomic_load(&g_s_write_err), -ETIMEDOUT);
	expect_cut("/s/splice?size=1000&chunked=1", true, 0); /* refused without a length */
	assert_int_equal(atomic_load(&g_s_write_err), -EINVAL);
}

/* The client leaves during a splice: the call returns -ECONNRESET and the request is released. */
static void test_stream_splice_client_gone(void **state)
{
	int before = atomic_load(&g_s_released);
	bool bad = false;
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 1);
	cli_open(&c);
	cli_sends(&c, "GET /s/splice?size=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(cli_read_cmp(&c, 1 << 20, NULL, 0, &bad), 1 << 20);
	assert_false(bad);
	cli_close(&c);
	wait_atomic(&g_s_released, before + 1, 5000);
	assert_int_equal(atomic_load(&g_s_write_err), -ECONNRESET);
	resp_free(&r);
}

/* ---- a body from a socket, moved by the loop thread (ft_resp_socket) ---- */

/* A body's source: the server's end rd of a pair, the other end fed by a thread (feeder_main). */
typedef struct {
	int rd;
	feeder_t f;
	pthread_t th;
} src_t;

/* A connected pair, Unix or loopback TCP: *rd (the server's, non-blocking) and *wr (the source's). */
static void src_pair(bool tcp, int *rd, int *wr)
{
	int sv[2];

	if (tcp) {
		tcp_pair(rd, wr);
	} else {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		*rd = sv[0];
		*wr = sv[1];
	}
	assert_int_equal(fcntl(*rd, F_SETFL, fcntl(*rd, F_GETFL) | O_NONBLOCK), 0);
}

/* A source sending pattern bytes [off, off + len), then tail; then it holds the pair open (hold) or closes it. */
static void src_start(src_t *s, bool tcp, uint64_t off, uint64_t len, const char *tail, bool hold)
{
	s->f = (feeder_t){.off = off, .len = len, .tail = tail, .hold = hold};
	src_pair(tcp, &s->rd, &s->f.fd);
	assert_int_equal(pthread_create(&s->th, NULL, feeder_main, &s->f), 0);
}

/* Closes the server's end (a held source then ends, a blocked one fails) and joins the source's thread. */
static void src_stop(src_t *s)
{
	close(s->rd);
	pthread_join(s->th, NULL);
}

/* The server's end still holds exactly want (waiting up to 2 s for a first byte): the body was not read past. */
static void expect_source_holds(int rd, const char *want)
{
	struct pollfd p = {.fd = rd, .events = POLLIN};
	char out[64];
	size_t n = 0;
	ssize_t k;

	poll(&p, 1, 2000);
	while (n < sizeof(out) - 1 && (k = recv(rd, out + n, sizeof(out) - 1 - n, MSG_DONTWAIT)) > 0)
		n += (size_t)k;
	out[n] = 0;
	assert_string_equal(out, want);
}

/* Sets /sock's answer (status 200, a source fd, pre bytes, the body's length, the silence limit); done not run yet. */
static void sock_set(int fd, const unsigned char *pre, size_t pre_len, uint64_t len, int timeout_ms)
{
	pthread_mutex_lock(&g_sk.mu);
	g_sk.fd = fd;
	g_sk.status = 200;
	g_sk.pre = pre;
	g_sk.pre_len = pre_len;
	g_sk.len = len;
	g_sk.timeout_ms = timeout_ms;
	g_sk.calls = 0;
	g_sk.err = 1;
	g_sk.on_caller = g_sk.before_return = g_sk.returned = false;
	pthread_mutex_unlock(&g_sk.mu);
}

static void sock_set_status(int status)
{
	pthread_mutex_lock(&g_sk.mu);
	g_sk.status = status;
	pthread_mutex_unlock(&g_sk.mu);
}

/* Waits up to ms for done(arg, err); returns how many times it ran, its err in *err. */
static int sock_wait(int ms, int *err)
{
	struct timespec ts;
	int calls, rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&g_sk.mu);
	while (g_sk.calls == 0 && rc == 0)
		rc = pthread_cond_timedwait(&g_sk.cv, &g_sk.mu, &ts);
	calls = g_sk.calls;
	*err = g_sk.err;
	pthread_mutex_unlock(&g_sk.mu);
	return calls;
}

/* Waits up to ms for done(arg, err), which must run once, on the thread that made the call; returns err. */
static int sock_wait_done(int ms)
{
	int err, calls = sock_wait(ms, &err);
	bool on_caller;

	if (calls != 1)
		fail_msg("done ran %d times", calls);
	pthread_mutex_lock(&g_sk.mu);
	on_caller = g_sk.on_caller;
	pthread_mutex_unlock(&g_sk.mu);
	assert_true(on_caller);
	return err;
}

static int sock_calls(void)
{
	int n;

	pthread_mutex_lock(&g_sk.mu);
	n = g_sk.calls;
	pthread_mutex_unlock(&g_sk.mu);
	return n;
}

/* Sends "method target" on c and reads the answer's head. */
static void sock_request(cli_t *c, const char *method, const char *target, resp_t *r)
{
	char req[128];

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: t\r\n\r\n", method, target);
	cli_sends(c, req);
	assert_int_equal(cli_read(c, r, true), 0);
}

/* pre + 3 MiB of a Unix or TCP source arrive whole; done(0); the source's next bytes stay unread; keep-alive. */
static void test_resp_socket_whole(void **state)
{
	enum { PRE = 1000, LEN = 3 * 1024 * 1024 + 77 };
	unsigned char pre[PRE];
	char v[64];
	bool bad = false;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, PRE, 0);
	cli_open(&c);
	for (int tcp = 0; tcp < 2; tcp++) { /* both on one kept connection */
		src_start(&s, tcp, PRE, LEN - PRE, "NEXT", true);
		sock_set(s.rd, pre, PRE, LEN, 5000);
		sock_request(&c, "GET", "/sock", &r);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.clen, LEN);
		assert_null(resp_header(&r, "Connection", v, sizeof(v)));
		assert_int_equal(cli_read_cmp(&c, LEN, NULL, 0, &bad), LEN);
		assert_false(bad);
		resp_free(&r);
		assert_int_equal(sock_wait_done(5000), 0);
		expect_source_holds(s.rd, "NEXT"); /* never read past the body */
		expect_small(&c);                  /* the body and nothing more: the connection is kept */
		assert_int_equal(sock_calls(), 1);
		src_stop(&s);
	}
	cli_close(&c);
}

/* A source that ends before the body: the client gets what there was, then the close (not kept); done(-EPIPE). */
static void test_resp_socket_source_ends(void **state)
{
	enum { PRE = 10, SENT = 100000, LEN = 1000000 };
	unsigned char pre[PRE];
	bool bad = false;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, PRE, 0);
	src_start(&s, false, PRE, SENT, NULL, false);
	sock_set(s.rd, pre, PRE, LEN, 5000);
	cli_open(&c);
	sock_request(&c, "GET", "/sock", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.clen, LEN);
	assert_int_equal(cli_read_cmp(&c, LEN, NULL, 0, &bad), PRE + SENT);
	assert_false(bad);
	assert_true(cli_eof(&c));
	assert_int_equal(sock_wait_done(5000), -EPIPE);
	resp_free(&r);
	cli_close(&c);
	src_stop(&s);
}

/* A source silent for timeout_ms (300): the connection is closed within seconds, the body cut; done(-ETIMEDOUT). */
static void test_resp_socket_source_silent(void **state)
{
	enum { PRE = 10, SENT = 200000, LEN = 1000000 };
	unsigned char pre[PRE];
	bool bad = false;
	int64_t t0, dt;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, PRE, 0);
	src_start(&s, false, PRE, SENT, NULL, true);
	sock_set(s.rd, pre, PRE, LEN, 300);
	cli_open(&c);
	t0 = now_ms();
	sock_request(&c, "GET", "/sock", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.clen, LEN);
	assert_int_equal(cli_read_cmp(&c, LEN, NULL, 0, &bad), PRE + SENT);
	assert_false(bad);
	assert_true(cli_eof(&c));
	dt = now_ms() - t0;
	assert_true(dt >= 250 && dt < 4000); /* the timer ticks every second here */
	assert_int_equal(sock_wait_done(3000), -ETIMEDOUT);
	resp_free(&r);
	cli_close(&c);
	src_stop(&s);
}

/* The client leaves mid-body, the source holding much more (then silent): done(-ECONNRESET) before timeout_ms. */
static void test_resp_socket_client_gone(void **state)
{
	bool bad = false;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	src_start(&s, false, 0, 32 << 20, NULL, true); /* more than the pipe and the sockets hold */
	sock_set(s.rd, NULL, 0, 1ull << 30, 30000);
	cli_open_opts(&c, srv_port, 65536);
	sock_request(&c, "GET", "/sock", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(cli_read_cmp(&c, 1 << 20, NULL, 0, &bad), 1 << 20);
	assert_false(bad);
	cli_close(&c); /* with unread bytes: a reset */
	assert_int_equal(sock_wait_done(5000), -ECONNRESET);
	resp_free(&r);
	src_stop(&s); /* the source's blocked send fails */
}

/* The client resets while the server waits for a silent source: done(-ECONNRESET), long before timeout_ms. */
static void test_resp_socket_client_gone_source_silent(void **state)
{
	enum { SENT = 100000, LEN = 1000000 };
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	bool bad = false;
	int calls, err, err2 = 1;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	src_start(&s, false, 0, SENT, NULL, true);
	sock_set(s.rd, NULL, 0, LEN, 20000);
	cli_open(&c);
	sock_request(&c, "GET", "/sock", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(cli_read_cmp(&c, SENT, NULL, 0, &bad), SENT);
	assert_false(bad);
	usleep(100000); /* the server waits for the silent source */
	assert_int_equal(setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	cli_close(&c); /* a reset */
	calls = sock_wait(3000, &err);
	/* the source ends: a request still waiting on it ends now, not 20 s later while other tests run */
	shutdown(s.f.fd, SHUT_WR);
	if (calls == 0)
		sock_wait(5000, &err2);
	src_stop(&s);
	resp_free(&r);
	if (calls != 1 || err != -ECONNRESET)
		fail_msg("done within 3 s of the client's reset: %d call(s), err %d (want 1, %d); err %d once the "
			 "source ended",
			 calls, calls > 0 ? err : 0, -ECONNRESET, calls > 0 ? err : err2);
}

/* The server stops while a body waits for a silent source: cut after the drain, done(-ECONNRESET), not -ECANCELED. */
static void test_resp_socket_server_stop(void **state)
{
	enum { SENT = 100000, LEN = 1000000 };
	int port, err, calls;
	ft_httpd_t *s2 = start_server(10000, 10000, 10000, &port);
	bool bad = false;
	src_t s;
	cli_t c;
	resp_t r;

	(void)state;
	src_start(&s, false, 0, SENT, NULL, true);
	sock_set(s.rd, NULL, 0, LEN, 60000);
	cli_open_port(&c, port);
	sock_request(&c, "GET", "/sock", &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(cli_read_cmp(&c, SENT, NULL, 0, &bad), SENT);
	assert_false(bad);
	ft_httpd_stop(s2); /* the request under way is closed after the drain (5 s) */
	calls = sock_wait(3000, &err);
	assert_true(cli_eof(&c));
	cli_close(&c);
	src_stop(&s);
	resp_free(&r);
	if (calls != 1 || err != -ECONNRESET)
		fail_msg("done after the stop's cut: %d call(s), err %d (want 1, %d)", calls, calls > 0 ? err : 0,
			 -ECONNRESET);
}

/* HEAD (Content-Length = len) or a 204: the head only, the source not read; done(-ECANCELED); keep-alive. */
static void test_resp_socket_no_body(void **state)
{
	unsigned char pre[100];
	int rd, wr;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, sizeof(pre), 0);
	src_pair(false, &rd, &wr);
	cli_open(&c);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(send(wr, "NEXT", 4, MSG_NOSIGNAL), 4);
		sock_set(rd, pre, sizeof(pre), 5000, 5000);
		if (i == 1)
			sock_set_status(204);
		sock_request(&c, i == 0 ? "HEAD" : "GET", "/sock", &r);
		assert_int_equal(r.status, i == 0 ? 200 : 204);
		if (i == 0)
			assert_int_equal(r.clen, 5000);
		assert_int_equal(sock_wait_done(3000), -ECANCELED);
		assert_int_equal(c.len, 0);
		resp_free(&r);
		expect_small(&c); /* no body bytes came after the head */
		expect_source_holds(rd, "NEXT");
	}
	cli_close(&c);
	close(rd);
	close(wr);
}

/* The whole body in pre (pre_len == len, 5000 bytes or none): sent whole, done(0), the source not read; keep-alive. */
static void test_resp_socket_all_in_pre(void **state)
{
	static const size_t lens[] = {5000, 0};
	unsigned char pre[5000];
	int rd, wr;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, sizeof(pre), 0);
	src_pair(false, &rd, &wr);
	cli_open(&c);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_int_equal(send(wr, "NEXT", 4, MSG_NOSIGNAL), 4);
		sock_set(rd, pre, lens[i], lens[i], 5000);
		cli_sends(&c, "GET /sock HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, false), 0);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.clen, (long long)lens[i]);
		assert_int_equal(r.body_len, lens[i]);
		if (lens[i] > 0)
			assert_memory_equal(r.body, pre, lens[i]);
		assert_int_equal(sock_wait_done(3000), 0);
		resp_free(&r);
		expect_small(&c);
		expect_source_holds(rd, "NEXT");
	}
	cli_close(&c);
	close(rd);
	close(wr);
}

/* Called on a worker (ft_req_defer) or with pre_len > len: a 500, done(-ECANCELED) before the call returns. */
static void test_resp_socket_refused(void **state)
{
	static const char *const targets[] = {"/sock-defer", "/sock"};
	unsigned char pre[10];
	bool before, returned;
	int rd, wr;
	cli_t c;
	resp_t r;

	(void)state;
	pat_fill(pre, sizeof(pre), 0);
	src_pair(false, &rd, &wr);
	cli_open(&c);
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(send(wr, "NEXT", 4, MSG_NOSIGNAL), 4);
		sock_set(rd, pre, sizeof(pre), i == 0 ? 1000 : 5, 5000); /* /sock: 10 bytes read of a 5-byte body */
		cli_sends(&c, i == 0 ? "GET /sock-defer HTTP/1.1\r\nHost: t\r\n\r\n"
				     : "GET /sock HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&c, &r, false), 0);
		if (r.status != 500)
			fail_msg("%s: status %d, want 500", targets[i], r.status);
		assert_int_equal(sock_wait_done(3000), -ECANCELED); /* on the caller's thread */
		/* the client can have the 500 before the handler is back from ft_resp_socket: wait for that */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 3;
		pthread_mutex_lock(&g_sk.mu);
		while (!g_sk.returned && pthread_cond_timedwait(&g_sk.cv, &g_sk.mu, &until) == 0)
			;
		returned = g_sk.returned;
		before = g_sk.before_return;
		pthread_mutex_unlock(&g_sk.mu);
		assert_true(returned);
		assert_true(before);
		resp_free(&r);
		expect_small(&c);
		expect_source_holds(rd, "NEXT");
	}
	cli_close(&c);
	close(rd);
	close(wr);
}

/* A file stream that cannot complete never looks whole: short file, error end; with a length or chunked. */
static void test_stream_sendfile_cut(void **state)
{
	(void)state;
	expect_cut("/s/fgen?size=1000000&short=1", false, 500000); /* the file ends early */
	expect_cut("/s/fgen?size=1000000&short=1&chunked=1", true, 500000);
	expect_cut("/s/fgen?size=1000000&abort=1", false, 500000); /* end(err) */
	expect_cut("/s/fgen?size=1000000&abort=1&chunked=1", true, 500000);
}

/* "Expect: 100-continue" with an empty body: the interim response, then the answer; the connection stays. */
static void test_expect_continue_empty(void **state)
{
	static const char *const reqs[] = {
		"PUT /noread HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
		"PUT /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
		"PUT /s/sum HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
		"GET /small HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n\r\n",
	};
	static const char *const bodies[] = {"no", "", "0 0", "hello world"};
	char v[64];
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		cli_sends(&c, reqs[i]);
		assert_int_equal(cli_read(&c, &r, false), 0);
		if (r.status != 100)
			fail_msg("request %zu: status %d before the final response, want 100", i, r.status);
		resp_free(&r);
		assert_int_equal(cli_read(&c, &r, false), 0);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.body_len, strlen(bodies[i]));
		if (r.body_len > 0)
			assert_memory_equal(r.body, bodies[i], r.body_len);
		assert_null(resp_header(&r, "Connection", v, sizeof(v)));
		resp_free(&r);
	}
	/* HTTP/1.0 gets no interim response */
	cli_sends(&c, "PUT /noread HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n"
		      "Content-Length: 0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	resp_free(&r);
	cli_close(&c);
}

/* "100 Continue" goes out on the worker's first ft_req_body_read, not before. */
static void test_stream_continue(void **state)
{
	unsigned char body[5000];
	char b;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(body, sizeof(body), 3);
	cli_open(&c);
	cli_sends(&c,
		  "PUT /s/echo?delay=300 HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n");
	usleep(100000);
	assert_int_equal(recv(c.fd, &b, 1, MSG_DONTWAIT | MSG_PEEK), -1);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 100);
	assert_int_equal(c.len, 0);
	cli_send(&c, body, sizeof(body));
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, sizeof(body));
	assert_memory_equal(r.body, body, sizeof(body));
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);
}

/* HEAD with a stream: headers only, writes ignored, the connection goes on. */
static void test_stream_head(void **state)
{
	char v[64];
	cli_t c;
	resp_t r;

	(void)state;
	atomic_store(&g_s_write_err, 0);
	cli_open(&c);
	cli_sends(&c, "HEAD /s/gen?size=100000 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.clen, 100000);
	resp_free(&r);
	cli_sends(&c, "HEAD /s/gen?size=100000&chunked=1 HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_null(resp_header(&r, "Content-Length", v, sizeof(v)));
	assert_null(resp_header(&r, "Connection", v, sizeof(v)));
	resp_free(&r);
	usleep(50000);
	assert_int_equal(c.len, 0);
	expect_small(&c); /* no body bytes came in between */
	assert_int_equal(atomic_load(&g_s_write_err), 0);
	cli_close(&c);
}

/* ft_req_body_read followed by a plain response; partial reads; bad framing. */
static void test_stream_body_plain_response(void **state)
{
	enum { N = 3 * 1024 * 1024 };
	unsigned char *data = malloc(N);
	unsigned long long sum = 0;
	char head[256], want[64], v[64];
	sender_t sd = {0};
	pthread_t th;
	size_t i;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 13);
	for (i = 0; i < N; i++)
		sum = sum * 31 + data[i];
	snprintf(want, sizeof(want), "%d %llu", N, sum);
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /s/sum HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	sd.fd = c.fd;
	sd.head = head;
	sd.data = data;
	sd.len = N;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	assert_int_equal(cli_read(&c, &r, false), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, want);
	resp_free(&r);
	expect_small(&c);
	cli_close(&c);

	/* answered after 1000 of N bytes: the response, then the close */
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /s/sum?stop=1000 HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	memset(&sd, 0, sizeof(sd));
	sd.fd = c.fd;
	sd.head = head;
	sd.data = data;
	sd.len = N;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 200);
	assert_true(strncmp(r.body, "1000 ", 5) == 0);
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_true(cli_eof(&c));
	shutdown(c.fd, SHUT_RDWR);
	pthread_join(th, NULL);
	resp_free(&r);
	cli_close(&c);

	/* bad chunked framing -> -EBADMSG */
	atomic_store(&g_s_body_err, 0);
	cli_open(&c);
	cli_sends(&c, "PUT /s/sum HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\nzz\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_int_equal(atomic_load(&g_s_body_err), -EBADMSG);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
	free(data);
}

/* A worker that does not read holds the body back: the client cannot push it all into the server. */
static void test_stream_body_bounded(void **state)
{
	enum { N = 48 * 1024 * 1024 };
	unsigned char *data = malloc(N);
	char head[256];
	sender_t sd = {0};
	pthread_t th;
	long rss0, rss, rss_max;
	long long sent_in_pause = 0;
	cli_t c;
	resp_t r;

	(void)state;
	fill_pattern(data, N, 14);
	atomic_store(&g_s_paused, 0);
	cli_open(&c);
	snprintf(head, sizeof(head), "PUT /s/sum?pause=1000 HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	sd.fd = c.fd;
	sd.head = head;
	sd.data = data;
	sd.len = N;
	rss0 = rss_max = vm_rss_kb();
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	wait_atomic(&g_s_paused, 1, 2000);
	while (atomic_load(&g_s_paused) == 1) {
		sent_in_pause = atomic_load(&sd.sent);
		rss = vm_rss_kb();
		if (rss > rss_max)
			rss_max = rss;
		usleep(20000);
	}
	/* ring + read buffer + socket buffers; an unbounded server would have taken all 48 MiB */
	print_message("paused reader: %lld bytes sent, RSS +%ld kB\n", sent_in_pause, rss_max - rss0);
	if (sent_in_pause > 24ll * 1024 * 1024)
		fail_msg("%lld body bytes went in while the worker read nothing", sent_in_pause);
	if (rss_max - rss0 > 16 * 1024)
		fail_msg("RSS grew by %ld kB while the worker read nothing", rss_max - rss0);
	assert_int_equal(cli_read(&c, &r, false), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.status, 200);
	assert_true(strncmp(r.body, "50331648 ", 9) == 0);
	resp_free(&r);
	cli_close(&c);
	free(data);
}

/* Body timeouts: while the worker waits for a stalled client; never while the worker is the slow one. */
static void test_stream_body_timeouts(void **state)
{
	enum { N = 2 * 1024 * 1024 };
	unsigned char *data = malloc(N);
	int port;
	ft_httpd_t *s = start_server(2000, 2000, 300, &port);
	char head[256];
	sender_t sd = {0};
	pthread_t th;
	int64_t t0;
	cli_t c;
	resp_t r;

	(void)state;
	/* stalled client: -ETIMEDOUT after the body gap */
	atomic_store(&g_s_body_err, 0);
	cli_open_port(&c, port);
	cli_sends(&c, "PUT /s/sum HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
	t0 = now_ms();
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 400);
	assert_true(now_ms() - t0 >= 250);
	assert_int_equal(atomic_load(&g_s_body_err), -ETIMEDOUT);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);

	/* a worker slower than the body timeout, reading 64 KiB every 100 ms: no timeout */
	fill_pattern(data, N, 15);
	atomic_store(&g_s_body_err, 0);
	cli_open_port(&c, port);
	snprintf(head, sizeof(head), "PUT /s/sum?slow=100 HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", N);
	sd.fd = c.fd;
	sd.head = head;
	sd.data = data;
	sd.len = N;
	assert_int_equal(pthread_create(&th, NULL, sender_main, &sd), 0);
	assert_int_equal(cli_read(&c, &r, false), 0);
	pthread_join(th, NULL);
	assert_int_equal(r.status, 200);
	assert_true(strncmp(r.body, "2097152 ", 8) == 0);
	assert_int_equal(atomic_load(&g_s_body_err), 0);
	resp_free(&r);
	cli_close(&c);
	ft_httpd_stop(s);
	free(data);
}

/* HTTP/1.0 with an unknown length: unframed body, then the close. */
static void test_stream_http10(void **state)
{
	bool bad = false;
	char v[64];
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "GET /s/gen?size=100000&chunked=1 HTTP/1.0\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_null(resp_header(&r, "Transfer-Encoding", v, sizeof(v)));
	assert_null(resp_header(&r, "Content-Length", v, sizeof(v)));
	assert_string_equal(resp_header(&r, "Connection", v, sizeof(v)), "close");
	assert_int_equal(cli_read_cmp(&c, 200000, NULL, 0, &bad), 100000);
	assert_false(bad);
	resp_free(&r);
	cli_close(&c);
}

/* Misuse: blocking calls on a loop thread refuse; an end without a start answers 500. */
static void test_stream_misuse(void **state)
{
	unsigned char *out = NULL;
	size_t len = 0;
	cli_t c;
	resp_t r;

	(void)state;
	cli_open(&c);
	cli_sends(&c, "PUT /s/loop HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
	assert_int_equal(cli_read(&c, &r, true), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(cli_read_chunked(&c, &out, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(atomic_load(&g_s_body_err), -EDEADLK);
	assert_int_equal(atomic_load(&g_s_write_err), -EDEADLK);
	assert_true(cli_eof(&c)); /* the body was never read */
	free(out);
	resp_free(&r);
	cli_close(&c);
	cli_open(&c);
	cli_sends(&c, "GET /s/none HTTP/1.1\r\nHost: t\r\n\r\n");
	assert_int_equal(cli_read(&c, &r, false), 0);
	assert_int_equal(r.status, 500);
	assert_true(cli_eof(&c));
	resp_free(&r);
	cli_close(&c);
}

/* With the default pool, many streams blocked on clients that do not read starve nothing. */
static void test_stream_many_blocked(void **state)
{
	enum { NCLI = 40 };
	int port, i, before = atomic_load(&g_s_released);
	ft_httpd_t *s = start_server_workers(10000, 10000, 10000, 0, &port);
	cli_t cl[NCLI], c;
	resp_t r;
	int64_t t0;

	(void)state;
	for (i = 0; i < NCLI; i++) {
		cli_open_opts(&cl[i], port, 4096);
		cli_sends(&cl[i], "GET /s/gen?size=1073741824 HTTP/1.1\r\nHost: t\r\n\r\n");
		assert_int_equal(cli_read(&cl[i], &r, true), 0);
		assert_int_equal(r.status, 200);
	}
	usleep(300000);
	t0 = now_ms();
	cli_open_port(&c, port);
	get(&c, "/defer", &r);
	assert_string_equal(r.body, "deferred");
	resp_free(&r);
	get(&c, "/s/gen?size=1000", &r);
	assert_int_equal(r.body_len, 1000);
	resp_free(&r);
	if (now_ms() - t0 > 2000)
		fail_msg("deferred work waited %lld ms behind blocked streams", (long long)(now_ms() - t0));
	cli_close(&c);
	for (i = 0; i < NCLI; i++)
		cli_close(&cl[i]);
	wait_atomic(&g_s_released, before + NCLI + 1, 5000);
	ft_httpd_stop(s);
}

static int setup(void **state)
{
	int fd;

	(void)state;
	file_data = malloc(FILE_SIZE);
	fill_pattern(file_data, FILE_SIZE, 42);
	snprintf(file_path, sizeof(file_path), "/tmp/ft-httpd-test-XXXXXX");
	fd = mkstemp(file_path);
	if (fd < 0 || write(fd, file_data, FILE_SIZE) != FILE_SIZE)
		return -1;
	close(fd);
	g_watch_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	g_watch_good_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	g_watch_bad_fd = open("/", O_PATH | O_CLOEXEC);
	srv = start_server(10000, 10000, 10000, &srv_port);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ft_httpd_stop(srv);
	if (g_watch_fd >= 0)
		close(g_watch_fd); /* watched until the loops ended */
	if (g_watch_bad_fd >= 0)
		close(g_watch_bad_fd);
	if (g_watch_good_fd >= 0)
		close(g_watch_good_fd);
	unlink(file_path);
	free(file_data);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_small),
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_watch_retried),
		cmocka_unit_test(test_keepalive_three),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_put_streamed),
		cmocka_unit_test(test_put_chunked),
		cmocka_unit_test(test_expect_continue),
		cmocka_unit_test(test_body_reset),
		cmocka_unit_test(test_defer),
		cmocka_unit_test(test_defer_client_gone),
		cmocka_unit_test(test_defer_sees_client_gone),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_file_borrowed),
		cmocka_unit_test(test_file_short),
		cmocka_unit_test(test_file_evicted),
		cmocka_unit_test(test_file_evicted_probes_only),
		cmocka_unit_test(test_file_make_resident),
		cmocka_unit_test(test_file_short_evicted),
		cmocka_unit_test(test_limits_431),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_http10),
		cmocka_unit_test(test_query_path_headers),
		cmocka_unit_test(test_hooks_order),
		cmocka_unit_test(test_body_all_limit),
		cmocka_unit_test(test_timeouts),
		cmocka_unit_test(test_many_sequential),
		cmocka_unit_test(test_concurrent_mix),
		cmocka_unit_test(test_stop_with_live_connections),
		cmocka_unit_test(test_stream_echo_length),
		cmocka_unit_test(test_stream_echo_chunked),
		cmocka_unit_test(test_stream_slow_reader),
		cmocka_unit_test(test_stream_direct_counted),
		cmocka_unit_test(test_stream_writev),
		cmocka_unit_test(test_stream_client_gone),
		cmocka_unit_test(test_stream_abort),
		cmocka_unit_test(test_stream_continue),
		cmocka_unit_test(test_stream_sendfile),
		cmocka_unit_test(test_stream_sendfile_cut),
		cmocka_unit_test(test_stream_splice),
		cmocka_unit_test(test_stream_splice_cut),
		cmocka_unit_test(test_stream_splice_client_gone),
		cmocka_unit_test(test_resp_socket_whole),
		cmocka_unit_test(test_resp_socket_source_ends),
		cmocka_unit_test(test_resp_socket_source_silent),
		cmocka_unit_test(test_resp_socket_client_gone),
		cmocka_unit_test(test_resp_socket_client_gone_source_silent),
		cmocka_unit_test(test_resp_socket_server_stop),
		cmocka_unit_test(test_resp_socket_no_body),
		cmocka_unit_test(test_resp_socket_all_in_pre),
		cmocka_unit_test(test_resp_socket_refused),
		cmocka_unit_test(test_expect_continue_empty),
		cmocka_unit_test(test_stream_head),
		cmocka_unit_test(test_stream_body_plain_response),
		cmocka_unit_test(test_stream_body_bounded),
		cmocka_unit_test(test_stream_body_timeouts),
		cmocka_unit_test(test_stream_http10),
		cmocka_unit_test(test_stream_misuse),
		cmocka_unit_test(test_stream_many_blocked),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
