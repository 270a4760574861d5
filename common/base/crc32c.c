/* SPDX-License-Identifier: Apache-2.0 */
/* CRC-32C (Castagnoli) through isa-l's crc32_iscsi, which uses the CPU's CRC instructions. */
#include "base/crc32c.h"

#include <isa-l/crc.h>

#define STEP (1u << 30) /* crc32_iscsi takes an int length */

/* isa-l neither pre- nor post-inverts; the standard CRC-32C does both. */
uint32_t ft_crc32c(uint32_t crc, const void *buf, size_t len)
{
	unsigned char *p = (unsigned char *)buf;

	crc = ~crc;
	while (len > 0) {
		size_t n = len < STEP ? len : STEP;

		crc = crc32_iscsi(p, (int)n, crc);
		p += n;
		len -= n;
	}
	return ~crc;
}
