/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-buffer file descriptor I/O: write, pwrite and pread loops over EINTR and short transfers. */
#ifndef FT_FDIO_H
#define FT_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/* write(2) until all of buf is written (retrying EINTR); 0 or -errno. */
int ft_write_all(int fd, const void *buf, size_t len);
/* pwrite(2) of all of buf at off (retrying EINTR); 0 or -errno. The file offset does not move. */
int ft_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* pread(2) of exactly len bytes at off (retrying EINTR); 0, -EIO when the file ends first, or -errno. */
int ft_pread_all(int fd, void *buf, size_t len, off_t off);

#endif
