/* SPDX-License-Identifier: Apache-2.0 */
/* File bodies and the page cache: which bytes sendfile(2) may send without blocking, and io_uring reads for the rest. */
#include "http/internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log.h"

/*
 * DESIGN
 * sendfile(2) on a non-blocking socket never waits for the socket, but it does wait for the disk:
 * a page that is not in the page cache is read while the loop thread sits in the call, and every
 * other connection of that loop waits with it. So a file body is sent only from bytes known to be
 * resident (r->res_end: [file_off, res_end) was found in the cache or was just read into it).
 *
 * - Residency: cachestat(2) counts the pages of a range that are in the cache; a 1-byte
 *   preadv2(RWF_NOWAIT) at the range's last byte then checks that the last page is not still being
 *   read (cachestat counts a page under read-ahead I/O as cached, and sendfile would wait for it;
 *   read-ahead runs front to back, so a finished last page means the range is readable). Where
 *   cachestat(2) is missing (kernels before 6.5: ENOSYS; or filtered: EPERM), RWF_NOWAIT probes of
 *   the first and the last byte decide instead: a cheaper guess that can miss a hole in the middle
 *   (sendfile then waits for that one read, as it always did).
 * - A range that is not resident is read by the ring (IORING_OP_READ, a buffered read: the kernel
 *   fills the page cache and completes it without a thread of ours waiting) into the loop's sink,
 *   a buffer whose contents nobody looks at: the read is only there to bring the pages in, and the
 *   bytes still go out by sendfile from the cache, like resident ones (no copy through user memory
 *   on the way out, one code path for plain and TLS connections). Reads of several connections may
 *   fill the sink at once; that is harmless as nothing reads it.
 * - At most one read per connection is in flight (c->rd_*), covering the window after res_end; the
 *   next window is read while the current one is sent, up to AHEAD bytes past what is sent, so the
 *   disk and the socket work side by side. A read outlives its request when the response ends early;
 *   c->rd_gen tells the completion whether it still belongs to the request being sent.
 * - A read that fails (EIO) cuts the response (the connection is closed, never a short body left
 *   looking whole); a short read (the file shrank) lets sendfile find the end, which cuts it too.
 * Every call is on the connection's loop thread.
 */

#define READ_WIN (1024 * 1024)       /* one ring read; the sink's size */
#define AHEAD (2 * READ_WIN)         /* resident bytes kept ahead of the send offset */
#define CHECK_MAX (16 * 1024 * 1024) /* one residency check covers at most this */

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

/* True when [off, off + len) is in the page cache and readable now (len > 0). */
static bool resident(int fd, off_t off, uint64_t len)
{
	struct cachestat_range cr = {.off = (uint64_t)off, .len = len};
	struct cachestat cs;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t pages;
	off_t last = off + (off_t)len - 1;

	if (!atomic_load_explicit(&no_cachestat, memory_order_relaxed)) {
		if (syscall(__NR_cachestat, fd, &cr, &cs, 0) == 0) {
			pages = (uint64_t)(last / page - off / page + 1);
			return cs.nr_cache >= pages && probe_byte(fd, last);
		}
		if (errno != ENOSYS && errno != EPERM)
			return false; /* EBADF, EOPNOTSUPP (no page cache): the ring's read finds out */
		if (!atomic_exchange(&no_cachestat, true))
			ft_info("http: cachestat(2) unavailable (%s): page-cache residency by RWF_NOWAIT probes",
				strerror(errno));
	}
	return probe_byte(fd, off) && probe_byte(fd, last);
}

/* The loop's sink (READ_WIN bytes, freed with the loop); never NULL. */
static void *sink(loop_t *L)
{
	if (L->file_sink == NULL) {
		L->file_sink = malloc(READ_WIN);
		if (L->file_sink == NULL)
			http_oom();
	}
	return L->file_sink;
}

/* Submits the ring read of [r->res_end, +len) for c's request; the completion is http_on_file_read. */
static void read_submit(conn_t *c, uint64_t len)
{
	ft_req_t *r = &c->req;
	struct io_uring_sqe *sqe = http_get_sqe(c->L);

	io_uring_prep_read(sqe, r->file_fd, sink(c->L), (unsigned)len, (uint64_t)r->res_end);
	io_uring_sqe_set_data64(sqe, http_ud(c, TAG_READ));
	c->rd_inflight = true;
	c->rd_gen = c->req_gen;
	c->rd_off = r->res_end;
	c->rd_len = len;
	c->refs++;
}

/* Moves res_end over resident bytes, up to AHEAD past file_off; starts a read at the first that is not. */
static void advance(conn_t *c)
{
	ft_req_t *r = &c->req;
	uint64_t left, len;

	if (r->res_end < r->file_off)
		r->res_end = r->file_off;
	while (!c->rd_inflight && r->res_end < r->file_end && r->res_end - r->file_off < AHEAD) {
		left = (uint64_t)(r->file_end - r->res_end);
		len = left < CHECK_MAX ? left : CHECK_MAX;
		if (resident(r->file_fd, r->res_end, len)) {
			r->res_end += (off_t)len;
			continue;
		}
		if (len > READ_WIN) {
			len = READ_WIN;
			if (resident(r->file_fd, r->res_end, len)) {
				r->res_end += (off_t)len;
				continue;
			}
		}
		read_submit(c, len);
	}
}

uint64_t http_file_ready(conn_t *c)
{
	ft_req_t *r = &c->req;

	advance(c);
	if (r->res_end > r->file_off)
		return (uint64_t)(r->res_end - r->file_off);
	r->file_wait = true;
	return 0;
}

void http_on_file_read(conn_t *c, int res)
{
	ft_req_t *r = &c->req;
	bool ours = c->rd_gen == c->req_gen && c->phase == PH_SENDING && r->file_left > 0;

	c->rd_inflight = false;
	if (ours) {
		if (res < 0)
			r->file_err = -res;
		else if ((uint64_t)res < c->rd_len)
			r->res_end = r->file_end; /* the file shrank: sendfile meets its end and the response is cut */
		else
			r->res_end = c->rd_off + (off_t)res;
	}
	if (r->file_wait && c->phase == PH_SENDING) {
		r->file_wait = false;
		http_file_resume(c);
	}
}
