/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness of the LOM decoder (target/core/lom.c): the object metadata read back from an xattr. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/lom.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A decoded LOM encodes again, and that encoding decodes to the same fields (ft_lom_decode zeroes the struct first,
 * so the whole struct compares).
 */
static void check_roundtrip(const ft_lom_t *m)
{
	uint8_t buf[FT_LOM_MAX];
	ft_lom_t again;
	int n = ft_lom_encode(m, buf, sizeof(buf));

	if (n < 0)
		abort(); /* everything the decoder accepts fits and is encodable */
	if (ft_lom_decode(&again, buf, (size_t)n) != 0)
		abort();
	if (memcmp(m, &again, sizeof(again)) != 0)
		abort();
}

/*
 * The input as it is (mostly stopped by the xxhash32 seal), then the input resealed: its bytes followed by their
 * xxhash32, so the record parser sees every input.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t sealed[FT_LOM_MAX + 4];
	ft_lom_t m;
	uint32_t h;

	if (ft_lom_decode(&m, data, size) == 0)
		check_roundtrip(&m);
	if (size > FT_LOM_MAX)
		return 0;
	memcpy(sealed, data, size);
	h = XXH32(data, size, 0);
	for (int i = 0; i < 4; i++)
		sealed[size + (size_t)i] = (uint8_t)(h >> (8 * i));
	if (ft_lom_decode(&m, sealed, size + 4) == 0)
		check_roundtrip(&m);
	return 0;
}
