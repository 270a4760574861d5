/* SPDX-License-Identifier: Apache-2.0 */
/* File bodies: sendfile(2) of the bytes in the page cache, an io_uring splice through a pipe for the rest; socket bodies. */
#include "http/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log.h"

/*
 * DESIGN
 * sendfile(2) on a non-blocking socket never waits for the socket, but it does wait for the disk:
 * a page that is not in the page cache is read while the loop thread sits in the call, and every
 * other connection of that loop waits with it. So the bytes of a file body take one of two ways:
 *
 * - Resident bytes go by sendfile(2), as before. Residency: cachestat(2) counts the pages of a range
 *   that are in the cache, and a 1-byte preadv2(RWF_NOWAIT) of the range's last byte checks that the
 *   last page is not still being read (cachestat counts a page under read-ahead I/O as cached, and
 *   sendfile would wait for it; read-ahead runs front to back, so a readable last page means the range
 *   is). r->res_end remembers how far the bytes were found resident, so one check covers many
 *   sendfile calls. A range of at most SMALL_RANGE skips the probe (about a microsecond a warm GET)
 *   while no splice into a pipe is in flight in the process; while one is, it is read whole with
 *   RWF_NOWAIT instead (a page a pipe fill is reading, of an evicted small object that a second GET
 *   asks for meanwhile, is counted by cachestat but not readable). Where cachestat(2) is missing
 *   (kernels before 6.5: ENOSYS; or filtered: EPERM), RWF_NOWAIT probes of the first and the last
 *   byte decide instead: a cheaper guess that can miss a hole in the middle (sendfile then waits for
 *   that one read, as it always did).
 * - From the first byte that is not resident, the body goes through the request's pipe: the ring
 *   splices the file into it (IORING_OP_SPLICE, which the kernel runs on its io-wq threads, so the
 *   disk wait is theirs) and the loop splices the pipe into the socket (non-blocking, POLLOUT when it
 *   is full), as for a stream from a socket. The pages move by reference all the way: no copy through
 *   user memory. At most one splice into the pipe is in flight (c->rd_*), and only into an empty
 *   pipe, for all its room; the loop sends from the pipe only while none is in flight: the splice
 *   into the pipe holds the pipe's lock for as long as it waits for the disk, so a splice out of it
 *   meanwhile would wait for the disk too. The kernel's read-ahead keeps reading the file while the
 *   pipe is sent, so the next fill mostly finds its pages on the way. Once on this way, a response
 *   stays on it to its end: a residency check in the middle would trust pages that read-ahead has
 *   only started to read (cachestat counts them, and the probe of the last byte can find that page
 *   read while others are not yet), and sendfile would wait for them.
 * - While a body goes through the pipe, the socket's send buffer is held small (SO_SNDBUF, PIPE_SNDBUF),
 *   so the bytes read from the disk reach the client soon after the read instead of queueing in a send
 *   buffer that autotuning lets grow to tcp_wmem's maximum: GETs from disk of 8 MiB objects, 8 clients,
 *   cost the target and the client 15-21% less CPU a GiB (the client's copy out of the socket is
 *   cheaper while the bytes are fresh in the CPU caches), see bench/datapath.md (2026-11-28). The end
 *   of the request sets the buffer to tcp_wmem's maximum again (a set buffer is no longer autotuned),
 *   for the next requests of the connection. The kernel caps a set buffer at net.core.wmem_max, so
 *   where that is below tcp_wmem's maximum (its default is) the buffer is left alone: the connection
 *   would keep a smaller buffer than autotuning gives it for the rest of its life.
 * - Both ways read the file as it is at that moment, so a file that shrinks under the response ends
 *   it early: sendfile returns 0, or a splice into the pipe returns 0; the connection is then
 *   closed, never a short body left looking whole. A splice that fails (EIO) cuts it the same way.
 * - A splice into the pipe may outlive its request when the response ends early (the ring holds the
 *   pipe and the file until it completes); c->rd_gen tells the completion whether it still belongs to
 *   the request being sent.
 * - TLS: http_tls_sendfile sends both ways (kernel TLS: sendfile / splice; else through its staging
 *   buffer, reading the file or the pipe), and only ever asks for bytes that are resident or in the pipe.
 * - A worker's stream of file ranges (ft_resp_stream_sendfile) is sent by the loop with sendfile(2)
 *   too; the worker makes each range resident first (http_file_make_resident: the same check where
 *   cachestat(2) is there, then sendfile(2) to /dev/null of a range that is not; without cachestat
 *   always that), so the disk wait is the worker's.
 * - A body from a socket (ft_resp_socket: the S3 relay's answer from a target) takes the pipe's way
 *   on the loop thread alone: a socket never waits for a disk, so the loop splices it into the pipe
 *   itself without waiting (SPLICE_F_NONBLOCK; the caller's socket is non-blocking), as much as the
 *   pipe has room for and the body still needs (never a byte of the next message), and sends from the
 *   pipe as from a file's. Only when the pipe is empty and the socket has nothing does the ring poll
 *   the socket (IORING_OP_POLL_ADD, in c->rd_* like a fill, so "in flight" still means "the pipe is
 *   empty"); its completion resumes the body. No worker thread, no hand-over between threads: the
 *   bytes cost two splices on one thread. A socket silent for the caller's time, or a connection that
 *   closes meanwhile, cancels the poll; the body is then cut. The socket stays the caller's: its
 *   done(arg, err) runs when the request ends, with err 0 only when the whole body was read from it.
 * Every call but http_file_make_resident is on the connection's loop thread.
 */

#define PIPE_CAP (4 * 1024 * 1024)     /* the pipe's size (F_SETPIPE_SZ), when the kernel grants it */
#define PIPE_CAP_USER (1024 * 1024)    /* else this, pipe-max-size's default (above it needs CAP_SYS_RESOURCE) */
#define CHECK_MAX (16 * 1024 * 1024)   /* one residency check covers at most this */
#define CHECK_WIN (1024 * 1024)        /* the check after a larger one failed */
#define PIPE_SNDBUF (256 * 1024)       /* SO_SNDBUF while a body goes through the pipe (the kernel doubles it) */
#define WMEM_DEFAULT (4 * 1024 * 1024) /* tcp_wmem's maximum where it cannot be read */
#define SOCK_PIPE_MAX (1024 * 1024)    /* bytes of a socket body in its pipe at most */

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* the same number on every architecture */
#endif

struct cachestat_range {
	uint64_t off, len;
};

struct cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

static atomic_bool no_cachestat; /* cachestat(2) failed with ENOSYS / EPERM: probes only */

void http_file_residency_probes_only(bool on)
{
	atomic_store(&no_cachestat, on);
}

#define SMALL_RANGE (64 * 1024)

/* Splices into a pipe in flight in this process: while there are some, a page cachestat counts may be under read. */
static atomic_int fills_inflight;

/* True when all of [off, off + len) reads without waiting (len <= SMALL_RANGE): one RWF_NOWAIT read into L's scratch. */
static bool read_nowait(loop_t *L, int fd, off_t off, uint64_t len)
{
	struct iovec iov;
	ssize_t n;

	if (L->probe_buf == NULL && (L->probe_buf = malloc(SMALL_RANGE)) == NULL)
		return false; /* the pipe's way then: never a wait */
	iov.iov_base = L->probe_buf;
	iov.iov_len = (size_t)len;
	do
		n = preadv2(fd, &iov, 1, off, RWF_NOWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len;
}

/* True when the byte at pos can be read without waiting for the disk. */
static bool probe_byte(int fd, off_t pos)
{
	char b;
	struct iovec iov = {.iov_base = &b, .iov_len = 1};
	ssize_t n;

	do
		n = preadv2(fd, &iov, 1, pos, RWF_NOWAIT);
	while (n < 0 && errno == EINTR);
	return n == 1;
}

/*
 * True when [off, off + len) is in the page cache and readable now (len > 0). A range of at most
 * SMALL_RANGE (a small object, one read-ahead window) is judged by cachestat alone while no splice
 * into a pipe is in flight in the process: the probe (a read through the whole read path) would
 * cost every warm GET about a microsecond. While some are, a page cachestat counts may be one they
 * are reading (an evicted small object that another connection is already fetching: sendfile would
 * wait for the disk with it), so the whole range is read with RWF_NOWAIT, which fails on any page
 * that is not readable yet. L is NULL on a worker thread: a small range then gets the probe of its
 * last byte, as a larger one.
 */
static bool resident(loop_t *L, int fd, off_t off, uint64_t len)
{
	struct cachestat_range cr = {.off = (uint64_t)off, .len = len};
	struct cachestat cs;
	long page = sysconf(_SC_PAGESIZE);
	off_t last = off + (off_t)len - 1;

	if (!atomic_load_explicit(&no_cachestat, memory_order_relaxed)) {
		if (syscall(__NR_cachestat, fd, &cr, &cs, 0) == 0) {
			if (cs.nr_cache < (uint64_t)(last / page - off / page + 1))
				return false;
			if (len > SMALL_RANGE)
				return probe_byte(fd, last);
			if (L == NULL)
				return probe_byte(fd, last);
			return atomic_load_explicit(&fills_inflight, memory_order_relaxed) == 0 ||
			       read_nowait(L, fd, off, len);
		}
		if (errno != ENOSYS && errno != EPERM)
			return false; /* EBADF, EOPNOTSUPP (no page cache): the pipe's way finds out */
		if (!atomic_exchange(&no_cachestat, true))
			ft_info("http: cachestat(2) unavailable (%s): page-cache residency by RWF_NOWAIT probes",
				strerror(errno));
	}
	return probe_byte(fd, off) && probe_byte(fd, last);
}

void http_file_make_resident(int fd, uint64_t off, uint64_t len)
{
	off_t pos = (off_t)off;
	ssize_t n;
	int null_fd;

	/*
	 * With cachestat(2) a resident range returns at once (the probe of the first byte too for a
	 * small range: no scratch buffer here; see resident()). The probes alone see only the range's
	 * ends, which may be cached around an evicted middle: without cachestat the range is read (on
	 * this worker, where a wait is allowed; cached pages cost no disk).
	 */
	if (len == 0 || (!atomic_load_explicit(&no_cachestat, memory_order_relaxed) && resident(NULL, fd, pos, len) &&
			 (len > SMALL_RANGE || probe_byte(fd, pos))))
		return;
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd < 0)
		return;
	while (len > 0) {
		n = sendfile(null_fd, fd, &pos, len < (1u << 30) ? (size_t)len : (1u << 30));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len -= (uint64_t)n;
	}
	close(null_fd);
}

/* Resident bytes from r->file_off (0: the next byte is not resident). */
static uint64_t resident_ahead(ft_req_t *r)
{
	uint64_t left, len;

	if (r->res_end > r->file_off)
		return (uint64_t)(r->res_end - r->file_off);
	left = r->file_left;
	len = left < CHECK_MAX ? left : CHECK_MAX;
	if (!resident(r->c->L, r->file_fd, r->file_off, len)) {
		if (len <= CHECK_WIN || !resident(r->c->L, r->file_fd, r->file_off, CHECK_WIN))
			return 0;
		len = CHECK_WIN;
	}
	r->res_end = r->file_off + (off_t)len;
	return len;
}

/* The last of the numbers in /proc/sys file path, or dflt when it cannot be read. */
static long sysctl_last(const char *path, long dflt)
{
	long v = dflt, x;
	FILE *f = fopen(path, "r");

	if (f == NULL)
		return dflt;
	while (fscanf(f, "%ld", &x) == 1)
		v = x;
	fclose(f);
	return v > 0 && v <= (1L << 30) ? v : dflt;
}

/*
 * tcp_wmem's maximum (the most autotuning gives a send buffer) when a set buffer can have it back
 * (net.core.wmem_max allows it), else 0: the buffer is then never held small. Read once.
 */
static int tcp_wmem_max(void)
{
	static atomic_int cached; /* 0 unread, -1 no, else the value */
	int v = atomic_load_explicit(&cached, memory_order_relaxed);

	if (v != 0)
		return v > 0 ? v : 0;
	long tcp = sysctl_last("/proc/sys/net/ipv4/tcp_wmem", WMEM_DEFAULT);
	long core = sysctl_last("/proc/sys/net/core/wmem_max", 0);
	v = 2 * core >= tcp ? (int)tcp : -1; /* the kernel doubles what it is given */
	atomic_store_explicit(&cached, v, memory_order_relaxed);
	return v > 0 ? v : 0;
}

/* Holds c's send buffer small while its body goes through the pipe (see DESIGN). */
static void sndbuf_shrink(conn_t *c)
{
	int v = PIPE_SNDBUF;

	if (c->sndbuf_small || tcp_wmem_max() == 0)
		return;
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) == 0)
		c->sndbuf_small = true;
}

void http_file_sndbuf_restore(conn_t *c)
{
	int v = tcp_wmem_max() / 2; /* the kernel doubles it */

	if (!c->sndbuf_small || c->closed)
		return;
	c->sndbuf_small = false;
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0)
		ft_warn("http: send buffer of %s: %s", c->peer, strerror(errno));
}

/* The request's pipe, made on first use (non-blocking read end; as large as granted, up to PIPE_CAP). 0, or -errno. */
static int pipe_open(ft_req_t *r)
{
	int p[2], cap;

	if (r->fp_rd >= 0)
		return 0;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	cap = fcntl(p[1], F_SETPIPE_SZ, PIPE_CAP);
	if (cap < 0)
		cap = fcntl(p[1], F_SETPIPE_SZ, PIPE_CAP_USER);
	if (cap < 0)
		cap = fcntl(p[1], F_GETPIPE_SZ);
	if (cap <= 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) != 0) {
		close(p[0]);
		close(p[1]);
		return -EIO;
	}
	r->fp_rd = p[0];
	r->fp_wr = p[1];
	r->fp_cap = (size_t)cap;
	if (!r->file_sock)
		sndbuf_shrink(r->c); /* for bytes fresh from the disk (see DESIGN); a socket's are no fresher */
	return 0;
}

/* Starts the ring's splice of the file bytes after the pipe's into the pipe's room, when none is in flight. */
static void pipe_fill(conn_t *c)
{
	ft_req_t *r = &c->req;
	struct io_uring_sqe *sqe;
	uint64_t off = (uint64_t)r->file_off + r->fp_len, left = r->file_left - r->fp_len, room;

	if (c->rd_inflight || c->closed || r->fp_short || r->file_err != 0 || left == 0)
		return;
	if (r->fp_len > 0)
		return; /* only into an empty pipe: see DESIGN (the pipe's lock) */
	room = r->fp_cap;
	sqe = http_get_sqe(c->L);
	io_uring_prep_splice(sqe, r->file_fd, (int64_t)off, r->fp_wr, -1, (unsigned)(left < room ? left : room), 0);
	io_uring_sqe_set_data64(sqe, http_ud(c, TAG_READ));
	c->rd_inflight = true;
	c->rd_gen = c->req_gen;
	c->rd_len = left < room ? left : room;
	c->refs++;
	atomic_fetch_add_explicit(&fills_inflight, 1, memory_order_relaxed);
}

void http_on_file_read(conn_t *c, int res)
{
	ft_req_t *r = &c->req;
	bool ours = c->rd_gen == c->req_gen && c->phase == PH_SENDING && r->file_left > 0;
	bool poll = c->rd_poll;

	c->rd_inflight = c->rd_poll = false;
	if (!poll)
		atomic_fetch_sub_explicit(&fills_inflight, 1, memory_order_relaxed);
	if (ours) {
		if (poll) {
			/* bytes, or the socket's end: the resumed body splices them; cancelled: the connection closed */
			if (res < 0 && res != -ECANCELED)
				r->file_err = -res;
		} else if (res < 0) {
			r->file_err = -res;
		} else {
			r->fp_len += (uint64_t)res;
			if (res == 0)
				r->fp_short = true; /* the file ended early: the body is cut once the pipe is out */
			pipe_fill(c);
		}
	}
	if (r->file_wait && c->phase == PH_SENDING) {
		r->file_wait = false;
		http_file_resume(c);
	}
}

/* One send of up to n bytes of the body from the pipe (from_pipe) or the file: bytes, or -1 with errno. */
static ssize_t send_some(conn_t *c, bool from_pipe, size_t n)
{
	ft_req_t *r = &c->req;
	off_t off = r->file_off;

	if (n > (1u << 30))
		n = 1u << 30;
	if (c->tls != NULL)
		return http_tls_sendfile(c, from_pipe ? r->fp_rd : r->file_fd, &off, n, from_pipe);
	if (from_pipe)
		return splice(r->fp_rd, NULL, c->fd, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	return sendfile(c->fd, r->file_fd, &off, n);
}

/* What a failed send_some (-1 with errno) leaves to do: -1 try again (EINTR), FILE_POLL, or FILE_CUT. */
static int send_failed(conn_t *c, const char *what)
{
	if (errno == EINTR)
		return -1;
	if (errno == EAGAIN && !c->closed)
		return FILE_POLL;
	if (errno != EPIPE && errno != ECONNRESET)
		ft_warn("http: %s to %s: %s", what, c->peer, strerror(errno));
	return FILE_CUT;
}

/* ---- bodies from a socket (see DESIGN) ---- */

/*
 * Moves what r's socket has into the pipe without waiting: up to SOCK_PIPE_MAX in the pipe (a
 * file body's pipe holds references to pages of the page cache, a socket body's bytes are memory of
 * their own, held for as long as the client takes to read them) and the body's rest.
 */
static void sock_fill(ft_req_t *r)
{
	uint64_t cap = r->fp_cap < SOCK_PIPE_MAX ? r->fp_cap : SOCK_PIPE_MAX;
	ssize_t k;

	while (r->sock_left > 0 && r->fp_len < cap && !r->fp_short && r->file_err == 0) {
		uint64_t want = cap - r->fp_len;

		if (want > r->sock_left)
			want = r->sock_left;
		k = splice(r->file_fd, NULL, r->fp_wr, NULL, (size_t)want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (k > 0) {
			r->fp_len += (uint64_t)k;
			r->sock_left -= (uint64_t)k;
		} else if (k == 0) {
			r->fp_short = true; /* the socket ended before the body: cut once the pipe is out */
		} else if (errno != EINTR) {
			if (errno != EAGAIN)
				r->file_err = errno;
			return; /* EAGAIN: the socket is empty, or the pipe's buffers are all taken */
		}
	}
}

/* Asks the ring to tell when c's socket body has bytes (the pipe is empty); FILE_WAIT, or FILE_CUT. */
static int sock_poll(conn_t *c)
{
	ft_req_t *r = &c->req;
	struct io_uring_sqe *sqe;

	if (!c->rd_inflight) {
		if (c->closed)
			return FILE_CUT;
		sqe = http_get_sqe(c->L);
		io_uring_prep_poll_add(sqe, r->file_fd, POLLIN | POLLRDHUP);
		io_uring_sqe_set_data64(sqe, http_ud(c, TAG_READ));
		c->rd_inflight = c->rd_poll = true;
		c->rd_gen = c->req_gen;
		c->refs++;
	}
	r->file_wait = true; /* this poll's completion (or an older request's fill or poll) resumes */
	return FILE_WAIT;
}

/* http_file_body_send of a socket body: the pipe filled on this thread, the socket polled only when it is empty. */
static int sock_body_send(conn_t *c)
{
	ft_req_t *r = &c->req;
	ssize_t n;
	int rc;

	while (r->file_left > 0) {
		if (c->rd_inflight && c->rd_gen == c->req_gen) {
			r->file_wait = true; /* the pipe is empty and the socket polled */
			return FILE_WAIT;
		}
		rc = pipe_open(r);
		if (rc != 0)
			r->file_err = -rc;
		else
			sock_fill(r);
		if (r->fp_len == 0) {
			if (r->file_err != 0 || r->fp_short) {
				ft_warn("http: the body's source for %s %s with %llu bytes to go; closing", c->peer,
					r->file_err != 0 ? strerror(r->file_err) : "ended",
					(unsigned long long)r->file_left);
				return FILE_CUT;
			}
			return sock_poll(c);
		}
		n = send_some(c, true, r->fp_len < r->file_left ? (size_t)r->fp_len : (size_t)r->file_left);
		if (n < 0) {
			if ((rc = send_failed(c, "splice")) < 0)
				continue;
			return rc;
		}
		r->file_left -= (uint64_t)n;
		r->fp_len -= (uint64_t)n;
		r->m_sent += (uint64_t)n;
		c->send_since = c->L->now;
	}
	return FILE_DONE;
}

bool http_file_body_ready(conn_t *c)
{
	ft_req_t *r = &c->req;

	if (!r->file_sock)
		return true;
	if (pipe_open(r) == 0)
		sock_fill(r);
	return r->fp_len > 0;
}

void http_file_sock_cancel(conn_t *c)
{
	struct io_uring_sqe *sqe;

	if (!c->rd_inflight || !c->rd_poll)
		return;
	sqe = http_get_sqe(c->L);
	io_uring_prep_cancel64(sqe, http_ud(c, TAG_READ), 0);
	io_uring_sqe_set_data64(sqe, 0);
}

void http_file_sock_done(conn_t *c)
{
	ft_req_t *r = &c->req;
	int err = 0;

	if (r->sock_done == NULL)
		return;
	if (c->rd_inflight && c->rd_poll && c->rd_gen == c->req_gen)
		http_file_sock_cancel(c); /* never here (a poll in flight ends the request when it completes) */
	if (!r->file_sock)
		err = -ECANCELED;  /* no body sent (HEAD, a status without one): the socket was not read */
	else if (r->sock_left > 0) /* the source's own error was logged where the body was cut */
		err = r->sock_timed_out ? -ETIMEDOUT : r->file_err != 0 || r->fp_short ? -EPIPE : -ECONNRESET;
	r->sock_done(r->sock_arg, err);
	r->sock_done = NULL;
}

int http_file_body_send(conn_t *c)
{
	ft_req_t *r = &c->req;
	uint64_t ready;
	bool from_pipe;
	ssize_t n;
	int rc;

	if (r->file_sock)
		return sock_body_send(c);
	while (r->file_left > 0) {
		if (r->file_err != 0) {
			ft_warn("http: reading the file for %s: %s; closing", c->peer, strerror(r->file_err));
			return FILE_CUT;
		}
		from_pipe = r->fp_len > 0;
		if (c->rd_inflight && c->rd_gen == c->req_gen) {
			r->file_wait = true; /* the pipe is being filled: its lock is held until the read is done */
			return FILE_WAIT;
		} else if (from_pipe) {
			ready = r->fp_len;
		} else if (r->fp_short) {
			ft_warn("http: file for %s ended %llu bytes early; closing", c->peer,
				(unsigned long long)r->file_left);
			return FILE_CUT;
		} else if ((ready = resident_ahead(r)) == 0) {
			rc = pipe_open(r);
			if (rc != 0) {
				r->file_err = -rc;
				continue;
			}
			pipe_fill(c);
			if (!c->rd_inflight)
				return FILE_CUT; /* nothing would resume the body (the connection is closed) */
			r->file_wait = true;     /* the fill's completion (or an older one's) resumes */
			return FILE_WAIT;
		}
		n = send_some(c, from_pipe, ready < r->file_left ? (size_t)ready : (size_t)r->file_left);
		if (n < 0) {
			if ((rc = send_failed(c, from_pipe ? "splice" : "sendfile")) < 0)
				continue;
			return rc;
		}
		if (n == 0) {
			ft_warn("http: file for %s ended %llu bytes early; closing", c->peer,
				(unsigned long long)r->file_left);
			return FILE_CUT;
		}
		r->file_off += n;
		r->file_left -= (uint64_t)n;
		r->m_sent += (uint64_t)n;
		c->send_since = c->L->now;
		if (from_pipe) {
			r->fp_len -= (uint64_t)n;
			pipe_fill(c);
		}
	}
	return FILE_DONE;
}
