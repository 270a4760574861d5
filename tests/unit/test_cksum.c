/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for streaming checksums: published vectors, chunked == one-shot, names, abort. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/cksum.h"

static void digest(ft_cksum_type_t type, const void *buf, size_t len, char hex[FT_CKSUM_HEX_MAX])
{
	ft_cksum_t c;

	assert_int_equal(ft_cksum_init(&c, type), 0);
	ft_cksum_update(&c, buf, len);
	ft_cksum_final(&c, hex);
	ft_cksum_abort(&c); /* safe after final */
}

static void test_xxhash_vectors(void **state)
{
	char hex[FT_CKSUM_HEX_MAX];

	(void)state;
	/* Reference XXH64 values with seed 0, printed big-endian (the canonical form). */
	digest(FT_CKSUM_XXHASH, "", 0, hex);
	assert_string_equal(hex, "ef46db3751d8e999");
	digest(FT_CKSUM_XXHASH, "abc", 3, hex);
	assert_string_equal(hex, "44bc2cf5ad770999");
}

static void test_md5_vectors(void **state)
{
	char hex[FT_CKSUM_HEX_MAX];

	(void)state;
	/* RFC 1321 appendix A.5. */
	digest(FT_CKSUM_MD5, "", 0, hex);
	assert_string_equal(hex, "d41d8cd98f00b204e9800998ecf8427e");
	digest(FT_CKSUM_MD5, "abc", 3, hex);
	assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
	digest(FT_CKSUM_MD5, "message digest", 14, hex);
	assert_string_equal(hex, "f96b697d7cb7938d525a2f31aaf161d0");
}

/* Feeding the same bytes in uneven chunks gives the one-shot digest. */
static void check_chunked(ft_cksum_type_t type)
{
	size_t len = (1u << 20) + 13;
	unsigned char *buf = malloc(len);
	char whole[FT_CKSUM_HEX_MAX], parts[FT_CKSUM_HEX_MAX];
	ft_cksum_t c;
	size_t off = 0, step = 1;

	assert_non_null(buf);
	srand(7);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)rand();
	digest(type, buf, len, whole);
	assert_int_equal(ft_cksum_init(&c, type), 0);
	while (off < len) {
		size_t n = step < len - off ? step : len - off;
		ft_cksum_update(&c, buf + off, n);
		off += n;
		step = step * 3 + 1; /* 1, 4, 13, 40, ... crosses every internal block boundary kind */
	}
	ft_cksum_update(&c, buf, 0);
	ft_cksum_final(&c, parts);
	assert_string_equal(whole, parts);
	/* One flipped byte changes the digest. */
	buf[len / 2] ^= 1;
	digest(type, buf, len, parts);
	assert_string_not_equal(whole, parts);
	free(buf);
}

static void test_chunked(void **state)
{
	(void)state;
	check_chunked(FT_CKSUM_XXHASH);
	check_chunked(FT_CKSUM_MD5);
}

static void test_none_and_abort(void **state)
{
	char hex[FT_CKSUM_HEX_MAX] = "junk";
	ft_cksum_t c;

	(void)state;
	digest(FT_CKSUM_NONE, "abc", 3, hex);
	assert_string_equal(hex, "");
	/* Abort without final releases the state (ASan checks the leak); twice is harmless. */
	assert_int_equal(ft_cksum_init(&c, FT_CKSUM_MD5), 0);
	ft_cksum_update(&c, "x", 1);
	ft_cksum_abort(&c);
	ft_cksum_abort(&c);
	assert_int_equal(ft_cksum_init(&c, FT_CKSUM_XXHASH), 0);
	ft_cksum_abort(&c);
	assert_int_equal(ft_cksum_init(&c, (ft_cksum_type_t)42), -1);
}

static void test_names(void **state)
{
	ft_cksum_type_t t;

	(void)state;
	assert_string_equal(ft_cksum_name(FT_CKSUM_NONE), "none");
	assert_string_equal(ft_cksum_name(FT_CKSUM_XXHASH), "xxhash");
	assert_string_equal(ft_cksum_name(FT_CKSUM_MD5), "md5");
	assert_int_equal(ft_cksum_parse("xxhash", &t), 0);
	assert_int_equal(t, FT_CKSUM_XXHASH);
	assert_int_equal(ft_cksum_parse("md5", &t), 0);
	assert_int_equal(t, FT_CKSUM_MD5);
	assert_int_equal(ft_cksum_parse("none", &t), 0);
	assert_int_equal(t, FT_CKSUM_NONE);
	assert_int_equal(ft_cksum_parse("sha256", &t), -1);
	assert_int_equal(ft_cksum_parse("MD5", &t), -1);
	assert_int_equal(ft_cksum_parse("", &t), -1);
	assert_int_equal(ft_cksum_parse(NULL, &t), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xxhash_vectors), cmocka_unit_test(test_md5_vectors),
		cmocka_unit_test(test_chunked),        cmocka_unit_test(test_none_and_abort),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
