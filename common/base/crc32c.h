/* SPDX-License-Identifier: Apache-2.0 */
/* CRC-32C (Castagnoli), the checksum GCS reports for every object and a bucket checksum type. */
#ifndef FT_CRC32C_H
#define FT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over buf; ft_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t ft_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
