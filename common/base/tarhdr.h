/* SPDX-License-Identifier: Apache-2.0 */
/* TAR header fields read the same way everywhere: numbers (octal or base-256), the checksum, end blocks. */
#ifndef FT_TARHDR_H
#define FT_TARHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FT_TAR_BLOCK 512

/*
 * A numeric header field of len bytes: octal digits with spaces or NULs around them (none: 0), or
 * GNU base-256 when the first byte's top bit is set (a negative value is refused). 0, or -1 when
 * malformed or past 64 bits.
 */
int ft_tar_num(const uint8_t *f, size_t len, uint64_t *out);
/* Whether the 512-byte header h's checksum matches: the unsigned sum POSIX asks for, or old tars' signed one. */
bool ft_tar_checksum_ok(const uint8_t *h);
/* Whether the 512-byte block h is all zeros (an end-of-archive block). */
bool ft_tar_zero_block(const uint8_t *h);

#endif
