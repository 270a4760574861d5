/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-buffer file descriptor I/O: write, pwrite and pread loops over EINTR and short transfers. */
#include "base/fdio.h"

#include <errno.h>
#include <unistd.h>

typedef enum { FDIO_WRITE, FDIO_PWRITE, FDIO_PREAD } fdio_op_t;

/*
 * The one transfer loop behind the three calls: repeats op until len bytes have moved. buf is
 * only read by the write ops (their callers pass a const buffer). 0, -EIO when pread hits the end
 * of the file first, or -errno.
 */
static int fdio_all(fdio_op_t op, int fd, char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n;

		if (op == FDIO_WRITE)
			n = write(fd, buf, len);
		else if (op == FDIO_PWRITE)
			n = pwrite(fd, buf, len, off);
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
