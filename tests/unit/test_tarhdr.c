/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of TAR header fields (common/base/tarhdr.c): octal and base-256 numbers, checksums, end blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "base/tarhdr.h"

static int num(const char *f, size_t len, uint64_t *v)
{
	return ft_tar_num((const uint8_t *)f, len, v);
}

static void test_octal(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(num("00000001750\0", 12, &v), 0);
	assert_int_equal(v, 01750);
	assert_int_equal(num("   644 \0", 8, &v), 0); /* spaces and NULs around the digits */
	assert_int_equal(v, 0644);
	assert_int_equal(num("\0\0\0\0\0\0\0\0", 8, &v), 0); /* no digits: 0 */
	assert_int_equal(v, 0);
	assert_int_equal(num("77777777777\0", 12, &v), 0);
	assert_int_equal(v, 077777777777ull);
	assert_int_equal(num("0000008\0", 8, &v), -1);               /* not an octal digit */
	assert_int_equal(num("12 34\0\0\0", 8, &v), -1);             /* digits after the trailing space */
	assert_int_equal(num("7777777777777777777777", 22, &v), -1); /* past 64 bits */
	assert_int_equal(num("1777777777777777777777", 22, &v), 0);  /* 64 bits exactly */
	assert_true(v == UINT64_MAX);
}

static void test_base256(void **state)
{
	uint8_t f[12] = {0x80};
	uint64_t v = 0;

	(void)state;
	f[11] = 0x01;
	f[10] = 0x02;
	assert_int_equal(ft_tar_num(f, sizeof(f), &v), 0);
	assert_true(v == 0x0201);
	f[0] = 0xff; /* negative */
	assert_int_equal(ft_tar_num(f, sizeof(f), &v), -1);
	memset(f, 0xff, sizeof(f));
	f[0] = 0x80 | 0x01; /* more than 64 bits */
	assert_int_equal(ft_tar_num(f, sizeof(f), &v), -1);
}

static void test_checksum_and_zero(void **state)
{
	uint8_t h[FT_TAR_BLOCK] = {0};
	unsigned sum = 0;

	(void)state;
	assert_true(ft_tar_zero_block(h));
	assert_false(ft_tar_checksum_ok(h)); /* an empty checksum field is 0, the sum of its spaces is 256 */
	memcpy(h, "a.txt", 5);
	h[200] = 0xe9; /* a byte with its top bit: the unsigned and signed sums differ */
	memset(h + 148, ' ', 8);
	for (int i = 0; i < FT_TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	assert_true(ft_tar_checksum_ok(h));
	assert_false(ft_tar_zero_block(h));
	snprintf((char *)h + 148, 8, "%06o", sum - 256); /* the signed sum of old tars */
	assert_true(ft_tar_checksum_ok(h));
	snprintf((char *)h + 148, 8, "%06o", sum + 1);
	assert_false(ft_tar_checksum_ok(h));
	h[0] ^= 1;
	snprintf((char *)h + 148, 8, "%06o", sum);
	assert_false(ft_tar_checksum_ok(h));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_octal),
		cmocka_unit_test(test_base256),
		cmocka_unit_test(test_checksum_and_zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
