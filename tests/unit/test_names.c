/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for object, bucket and provider name validation: every rule and its valid edges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/names.h"

static int obj_ok(const char *s)
{
	const char *why = NULL;
	int rc = ft_name_check_object(s, strlen(s), &why);

	if (rc != 0)
		assert_non_null(why);
	return rc == 0;
}

static int bucket_ok(const char *s)
{
	const char *why = NULL;
	int rc = ft_name_check_bucket(s, &why);

	if (rc != 0)
		assert_non_null(why);
	return rc == 0;
}

static void test_object_valid(void **state)
{
	(void)state;
	assert_true(obj_ok("a"));
	assert_true(obj_ok("a/b/c"));
	assert_true(obj_ok("...")); /* three dots is a normal name */
	assert_true(obj_ok(".hidden"));
	assert_true(obj_ok("a/..b/c.."));
	assert_true(obj_ok("a/.b"));
	assert_true(obj_ok("name with spaces and %41 and \xc3\xa9"));
	assert_true(obj_ok("a\\b"));
	assert_true(obj_ok("\x01\x7f"));
}

/* S3 keys: '/', "//", "." and ".." are plain characters (the target never takes them as a path). */
static void test_object_dots(void **state)
{
	(void)state;
	assert_true(obj_ok("."));
	assert_true(obj_ok(".."));
	assert_true(obj_ok("../a"));
	assert_true(obj_ok("a/../b"));
	assert_true(obj_ok("a/.."));
	assert_true(obj_ok("./a"));
	assert_true(obj_ok("a/./b"));
	assert_true(obj_ok("a/."));
}

static void test_object_slashes(void **state)
{
	(void)state;
	assert_true(obj_ok("/a"));
	assert_true(obj_ok("/"));
	assert_true(obj_ok("a//b"));
	assert_true(obj_ok("a/"));
	assert_true(obj_ok("a/b/"));
	assert_true(obj_ok("//"));
}

/* Keys are UTF-8: a stray continuation byte, a truncated sequence or an overlong lead is refused. */
static void test_object_utf8(void **state)
{
	(void)state;
	assert_true(obj_ok("caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"));
	assert_false(obj_ok("a\xff"
			    "b"));
	assert_false(obj_ok("a\x80"));
	assert_false(obj_ok("\xc3"));
	assert_false(obj_ok("x\xe2\x82"));
	assert_false(obj_ok("\xc0\xaf"));
}

static void test_object_empty_and_nul(void **state)
{
	const char *why = NULL;

	(void)state;
	assert_int_equal(ft_name_check_object("", 0, &why), -1);
	assert_non_null(why);
	why = NULL;
	assert_int_equal(ft_name_check_object("a\0b", 3, &why), -1);
	assert_non_null(why);
	assert_int_equal(ft_name_check_object("ab\0", 3, &why), -1);
	assert_int_equal(ft_name_check_object("\0", 1, &why), -1);
	/* The length given is authoritative: the same bytes without the NUL are fine. */
	assert_int_equal(ft_name_check_object("a\0b", 1, &why), 0);
	/* why may be NULL. */
	assert_int_equal(ft_name_check_object("", 0, NULL), -1);
}

/* Builds a name of total length len made of segments of seg bytes separated by '/'. */
static void fill_segments(char *buf, size_t len, size_t seg)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (i % (seg + 1) == seg) ? '/' : 'x';
	buf[len] = '\0';
}

static void test_object_lengths(void **state)
{
	char buf[FT_OBJ_NAME_MAX + 2];

	(void)state;
	/* 1024 bytes exactly is fine; 1025 is not. */
	fill_segments(buf, 1024, 100);
	assert_int_not_equal(buf[1023], '/');
	assert_true(obj_ok(buf));
	fill_segments(buf, 1025, 100);
	assert_int_not_equal(buf[1024], '/');
	assert_false(obj_ok(buf));

	/* A segment longer than a file name (255 bytes) is fine too: the target hashes such names. */
	memset(buf, 'y', 300);
	buf[300] = '\0';
	assert_true(obj_ok(buf));
	/* 1,024 bytes of two-byte characters is fine; one more byte is not. */
	for (size_t i = 0; i < 1024; i += 2)
		memcpy(buf + i, "\xc3\xa9", 2);
	buf[1024] = '\0';
	assert_true(obj_ok(buf));
	buf[1024] = 'z';
	buf[1025] = '\0';
	assert_false(obj_ok(buf));
}

static void test_bucket(void **state)
{
	char buf[FT_BUCKET_NAME_MAX + 2];

	(void)state;
	assert_true(bucket_ok("b"));
	assert_true(bucket_ok("my-bucket_1.v2"));
	assert_true(bucket_ok("B0"));
	assert_true(bucket_ok("_x"));
	assert_true(bucket_ok("0"));
	assert_true(bucket_ok("a.."));
	assert_false(bucket_ok(""));
	assert_false(bucket_ok(NULL));
	assert_false(bucket_ok(".b"));
	assert_false(bucket_ok(".."));
	assert_false(bucket_ok("."));
	assert_false(bucket_ok("-b"));
	assert_false(bucket_ok("a/b"));
	assert_false(bucket_ok("a b"));
	assert_false(bucket_ok("a%b"));
	assert_false(bucket_ok("a\\b"));
	assert_false(bucket_ok("caf\xc3\xa9"));
	assert_false(bucket_ok("a:b"));
	memset(buf, 'b', 64);
	buf[64] = '\0';
	assert_true(bucket_ok(buf));
	memset(buf, 'b', 65);
	buf[65] = '\0';
	assert_false(bucket_ok(buf));
	assert_int_equal(ft_name_check_bucket("..", NULL), -1);
}

static void test_provider(void **state)
{
	(void)state;
	assert_int_equal(ft_name_check_provider("ais"), 0);
	assert_int_equal(ft_name_check_provider("AIS"), -1);
	assert_int_equal(ft_name_check_provider(""), -1);
	assert_int_equal(ft_name_check_provider("nope"), -1);
	assert_int_equal(ft_name_check_provider(NULL), -1);
}

static void test_job(void **state)
{
	char longest[FT_JOB_NAME_MAX], too_long[FT_JOB_NAME_MAX + 1];

	(void)state;
	assert_int_equal(ft_name_check_job("default"), 0);
	assert_int_equal(ft_name_check_job("rank-3.worker_1"), 0);
	memset(longest, 'j', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	assert_int_equal(ft_name_check_job(longest), 0);
	memset(too_long, 'j', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	assert_int_equal(ft_name_check_job(too_long), -1);
	assert_int_equal(ft_name_check_job(""), -1);
	assert_int_equal(ft_name_check_job("a b"), -1);
	assert_int_equal(ft_name_check_job("a/b"), -1);
}

static void test_uname(void **state)
{
	char provider[16], bucket[FT_BUCKET_NAME_MAX + 1];
	const char *obj, *why;

	(void)state;
	assert_int_equal(ft_name_parse_uname("ais/@#/dst/a/b.jpg", provider, bucket, &obj, &why), 0);
	assert_string_equal(provider, "ais");
	assert_string_equal(bucket, "dst");
	assert_string_equal(obj, "a/b.jpg");
	assert_int_equal(ft_name_parse_uname("aws/photos/x", provider, bucket, &obj, &why), 0);
	assert_string_equal(provider, "aws");
	assert_string_equal(bucket, "photos");
	assert_string_equal(obj, "x");
	assert_int_equal(ft_name_parse_uname("ais/@uuid#ns/dst/x", provider, bucket, &obj, &why), -2);
	assert_int_equal(ft_name_parse_uname("ais/@#dst/x", provider, bucket, &obj, &why), -2);
	static const char *const bad[] = {"",
					  "ais",
					  "ais/",
					  "/dst/x",
					  "ais/dst",
					  "ais/dst/",
					  "ais/@#/dst/",
					  "ais//x",
					  "averyveryverylongprovider/dst/x",
					  "ais/bad name/x",
					  "ais/@#//x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ft_name_parse_uname(bad[i], provider, bucket, &obj, &why), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_object_valid),
		cmocka_unit_test(test_object_dots),
		cmocka_unit_test(test_object_slashes),
		cmocka_unit_test(test_object_utf8),
		cmocka_unit_test(test_object_empty_and_nul),
		cmocka_unit_test(test_object_lengths),
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_provider),
		cmocka_unit_test(test_job),
		cmocka_unit_test(test_uname),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
