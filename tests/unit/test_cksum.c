/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for streaming checksums: published vectors, chunked == one-shot, names, abort. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
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

static void test_xxh3_vectors(void **state)
{
	unsigned char buf[1024];
	char hex[FT_CKSUM_HEX_MAX], want[FT_CKSUM_HEX_MAX];

	(void)state;
	/* XXH3 64-bit, seed 0, of nothing (the published value), printed big-endian. */
	digest(FT_CKSUM_XXH3, "", 0, hex);
	assert_string_equal(hex, "2d06800538d394c2");
	/* Every length class of XXH3 (1-3, 4-8, 9-16, 17-128, 129-240, longer) against the one-shot call. */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (size_t len = 1; len <= sizeof(buf); len += len < 260 ? 1 : 97) {
		snprintf(want, sizeof(want), "%016llx", (unsigned long long)XXH3_64bits(buf, len));
		digest(FT_CKSUM_XXH3, buf, len, hex);
		assert_string_equal(hex, want);
	}
	/* Not the XXH64 value of the same bytes: a different type, never a silent switch. */
	digest(FT_CKSUM_XXHASH, "abc", 3, want);
	digest(FT_CKSUM_XXH3, "abc", 3, hex);
	assert_string_not_equal(hex, want);
}

static void test_crc32c_vectors(void **state)
{
	unsigned char buf[32];
	char hex[FT_CKSUM_HEX_MAX];

	(void)state;
	/* The CRC-32C check value, and RFC 3720 B.4 (32 bytes of zeros, of ones); 8 hex digits big-endian. */
	digest(FT_CKSUM_CRC32C, "123456789", 9, hex);
	assert_string_equal(hex, "e3069283");
	digest(FT_CKSUM_CRC32C, "", 0, hex);
	assert_string_equal(hex, "00000000");
	memset(buf, 0, sizeof(buf));
	digest(FT_CKSUM_CRC32C, buf, sizeof(buf), hex);
	assert_string_equal(hex, "8a9136aa");
	memset(buf, 0xff, sizeof(buf));
	digest(FT_CKSUM_CRC32C, buf, sizeof(buf), hex);
	assert_string_equal(hex, "62a8ab43");
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)i;
	digest(FT_CKSUM_CRC32C, buf, sizeof(buf), hex);
	assert_string_equal(hex, "46dd794e");
}

static void test_sha256_vectors(void **state)
{
	char hex[FT_CKSUM_HEX_MAX];

	(void)state;
	/* FIPS 180-2 appendix B. */
	digest(FT_CKSUM_SHA256, "", 0, hex);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	digest(FT_CKSUM_SHA256, "abc", 3, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	digest(FT_CKSUM_SHA256, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
	assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	assert_int_equal(strlen(hex), 64);
}

static void test_sha512_vectors(void **state)
{
	char hex[FT_CKSUM_HEX_MAX];

	(void)state;
	/* FIPS 180-2 appendix C (one block, two blocks), and the empty message. */
	digest(FT_CKSUM_SHA512, "", 0, hex);
	assert_string_equal(hex, "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
				 "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e");
	digest(FT_CKSUM_SHA512, "abc", 3, hex);
	assert_string_equal(hex, "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
				 "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
	digest(FT_CKSUM_SHA512,
	       "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
	       "mnopqrstnopqrstu",
	       112, hex);
	assert_string_equal(hex, "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
				 "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909");
	assert_int_equal(strlen(hex) + 1, FT_CKSUM_HEX_MAX); /* the longest value fits */
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
	check_chunked(FT_CKSUM_XXH3);
	check_chunked(FT_CKSUM_CRC32C);
	check_chunked(FT_CKSUM_SHA256);
	check_chunked(FT_CKSUM_SHA512);
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
	for (int t = FT_CKSUM_XXHASH; t <= FT_CKSUM_LAST; t++) {
		assert_int_equal(ft_cksum_init(&c, (ft_cksum_type_t)t), 0);
		ft_cksum_update(&c, "x", 1);
		ft_cksum_abort(&c);
		ft_cksum_update(&c, "x", 1); /* after abort: nothing */
		ft_cksum_final(&c, hex);
		assert_string_equal(hex, "");
		ft_cksum_abort(&c);
	}
	assert_int_equal(ft_cksum_init(&c, (ft_cksum_type_t)42), -1);
	assert_int_equal(ft_cksum_init(&c, (ft_cksum_type_t)(FT_CKSUM_LAST + 1)), -1);
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
	/* Every name reads back as its type; the numbers stored in object metadata do not move. */
	static const char *const names[] = {"none", "xxhash", "md5", "xxh3", "crc32c", "sha256", "sha512"};
	for (int i = 0; i < 7; i++) {
		assert_int_equal(ft_cksum_parse(names[i], &t), 0);
		assert_int_equal(t, i);
		assert_string_equal(ft_cksum_name(t), names[i]);
		assert_true(ft_cksum_valid(i));
		/* the list in error messages names every type a bucket can take (all but none) */
		assert_true((strstr(FT_CKSUM_NAMES, names[i]) != NULL) == (i != FT_CKSUM_NONE));
	}
	assert_int_equal(FT_CKSUM_LAST, 6);
	assert_false(ft_cksum_valid(7));
	assert_false(ft_cksum_valid(-1));
	assert_string_equal(ft_cksum_name((ft_cksum_type_t)7), "unknown");
	assert_int_equal(ft_cksum_parse("sha1", &t), -1);
	assert_int_equal(ft_cksum_parse("sha384", &t), -1);
	assert_int_equal(ft_cksum_parse("SHA512", &t), -1);
	assert_int_equal(ft_cksum_parse("xxhash3", &t), -1);
	assert_int_equal(ft_cksum_parse("CRC32C", &t), -1);
	assert_int_equal(ft_cksum_parse("MD5", &t), -1);
	assert_int_equal(ft_cksum_parse("", &t), -1);
	assert_int_equal(ft_cksum_parse(NULL, &t), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xxhash_vectors), cmocka_unit_test(test_md5_vectors),
		cmocka_unit_test(test_xxh3_vectors),   cmocka_unit_test(test_crc32c_vectors),
		cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_sha512_vectors),
		cmocka_unit_test(test_chunked),        cmocka_unit_test(test_none_and_abort),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
