/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-buffer file descriptor I/O: write, pwrite, pread and file-to-file copy loops over EINTR and short transfers. */
#include "base/fdio.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

typedef enum { FDIO_WRITE, FDIO_PWRITE, FDIO_PREAD } fdio_op_t;

/*
 * Writes go to the kernel in pieces of at most FDIO_WRITE_MAX bytes. One write(2) of a large buffer
 * into a new file makes the page cache allocate large folios for it, and filling those cost about
 * twice the CPU per byte of the same bytes written 64 KiB at a time (a 512 KiB write into a new
 * ext4 file: 1.1-2.3 ms of CPU per MiB against 0.6-0.9 ms in 64 KiB writes on the bench machine);
 * an EC holder stores every slice with one such write. The extra system calls cost far less.
 */
#define FDIO_WRITE_MAX ((size_t)64 << 10)

/*
 * The one transfer loop behind the three calls: repeats op until len bytes have moved. buf is
 * only read by the write ops (their callers pass a const buffer). 0, -EIO when pread hits the end
 * of the file first, or -errno.
 */
static int fdio_all(fdio_op_t op, int fd, char *buf, size_t len, off_t off)
{
	while (len > 0) {
		size_t w = len < FDIO_WRITE_MAX ? len : FDIO_WRITE_MAX;
		ssize_t n;

		if (op == FDIO_WRITE)
			n = write(fd, buf, w);
		else if (op == FDIO_PWRITE)
			n = pwrite(fd, buf, w, off);
		else
			n = pread(fd, buf, len, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0 && op == FDIO_PREAD)
			return -EIO;
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

int ft_write_all(int fd, const void *buf, size_t len)
{
	return fdio_all(FDIO_WRITE, fd, (char *)buf, len, 0);
}

int ft_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	return fdio_all(FDIO_PWRITE, fd, (char *)buf, len, off);
}

int ft_pread_all(int fd, void *buf, size_t len, off_t off)
{
	return fdio_all(FDIO_PREAD, fd, buf, len, off);
}

#define COPY_CHUNK ((size_t)1 << 20) /* the buffer of a copy copy_file_range refused */

/* The rest of a copy through user memory: pread, then write or pwrite. 0 or -errno (-EIO: in ended). */
static int copy_plain(int in, off_t in_off, int out, off_t out_off, size_t len)
{
	char *buf = malloc(len < COPY_CHUNK ? len : COPY_CHUNK);
	int rc = buf != NULL ? 0 : -ENOMEM;

	while (rc == 0 && len > 0) {
		size_t k = len < COPY_CHUNK ? len : COPY_CHUNK;
		rc = ft_pread_all(in, buf, k, in_off);
		if (rc == 0)
			rc = out_off < 0 ? ft_write_all(out, buf, k) : ft_pwrite_all(out, buf, k, out_off);
		in_off += (off_t)k;
		out_off = out_off < 0 ? out_off : out_off + (off_t)k;
		len -= k;
	}
	free(buf);
	return rc;
}

int ft_copy_range(int in, off_t in_off, int out, off_t out_off, size_t len)
{
	loff_t ioff = in_off, ooff = out_off;

	while (len > 0) {
		ssize_t n = copy_file_range(in, &ioff, out, out_off < 0 ? NULL : &ooff, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
			return copy_plain(in, ioff, out, out_off < 0 ? -1 : ooff, len);
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		len -= (size_t)n;
	}
	return 0;
}

void ft_iov_advance(struct iovec **iov, int *cnt, size_t n)
{
	while (*cnt > 0 && n >= (*iov)->iov_len) {
		n -= (*iov)->iov_len;
		(*iov)++;
		(*cnt)--;
	}
	if (*cnt > 0) {
		(*iov)->iov_base = (char *)(*iov)->iov_base + n;
		(*iov)->iov_len -= n;
	}
}

int ft_pwritev_all(int fd, struct iovec *iov, int cnt, off_t off)
{
	while (cnt > 0) {
		ssize_t n = pwritev(fd, iov, cnt, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENOSPC;
		off += n;
		ft_iov_advance(&iov, &cnt, (size_t)n);
	}
	return 0;
}
