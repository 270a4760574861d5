/* SPDX-License-Identifier: Apache-2.0 */
/* TAR header fields (see base/tarhdr.h): the target's archives and GetBatch parts, ft-loader's GetBatch answers. */
#include "base/tarhdr.h"

int ft_tar_num(const uint8_t *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) { /* base-256, big-endian */
		if (f[0] & 0x40)
			return -1;
		for (v = f[0] & 0x3fu, i = 1; i < len; i++) {
			if (v >> 56)
				return -1;
			v = (v << 8) | f[i];
		}
		*out = v;
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 61)
			return -1;
		v = (v << 3) | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	*out = v;
	return 0;
}

bool ft_tar_checksum_ok(const uint8_t *h)
{
	uint64_t want, usum = 0;
	int64_t ssum = 0;

	if (ft_tar_num(h + 148, 8, &want) != 0)
		return false;
	for (int i = 0; i < FT_TAR_BLOCK; i++) {
		uint8_t c = i >= 148 && i < 156 ? ' ' : h[i];
		usum += c;
		ssum += (int8_t)c;
	}
	return usum == want || (ssum >= 0 && (uint64_t)ssum == want);
}

bool ft_tar_zero_block(const uint8_t *h)
{
	for (int i = 0; i < FT_TAR_BLOCK; i++)
		if (h[i] != 0)
			return false;
	return true;
}
