/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-buffer file descriptor I/O: write, pwrite, pread and file-to-file copy loops over EINTR and short transfers. */
#ifndef FT_FDIO_H
#define FT_FDIO_H

#include <stddef.h>
#include <sys/types.h>

struct iovec;

/* write(2) until all of buf is written (retrying EINTR); 0 or -errno. */
int ft_write_all(int fd, const void *buf, size_t len);
/* pwrite(2) of all of buf at off (retrying EINTR); 0 or -errno. The file offset does not move. */
int ft_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* pread(2) of exactly len bytes at off (retrying EINTR); 0, -EIO when the file ends first, or -errno. */
int ft_pread_all(int fd, void *buf, size_t len, off_t off);
/* Moves the vector *iov of *cnt pieces past n bytes sent of it (the piece cut in the middle is modified). */
void ft_iov_advance(struct iovec **iov, int *cnt, size_t n);
/* pwritev(2) of every byte of iov[0..cnt) at off (retrying EINTR; iov is modified); 0 or -errno (-ENOSPC: nothing written). */
int ft_pwritev_all(int fd, struct iovec *iov, int cnt, off_t off);
/*
 * Copies len bytes of in from in_off to out at out_off (out_off < 0: at out's file offset, which
 * then moves past them): copy_file_range(2) (in the kernel, a reflink where the filesystem can),
 * else, where it is refused (across filesystems, unsupported), pread and write. 0, -EIO when in
 * ends first, or -errno.
 */
int ft_copy_range(int in, off_t in_off, int out, off_t out_off, size_t len);

#endif
