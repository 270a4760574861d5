/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/strbuf: appends, formatting across the growth boundary, take/free and the sticky failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/strbuf.h"

static void test_append_and_nul(void **state)
{
	ft_strbuf_t b = {0};

	(void)state;
	ft_strbuf_add(&b, "ab\0c", 4);
	ft_strbuf_adds(&b, "de");
	ft_strbuf_addc(&b, 'f');
	assert_false(b.failed);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.p, "ab\0cdef", 8); /* bytes kept as given, NUL after the last */
	ft_strbuf_free(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
}

static void test_empty_add_allocates(void **state)
{
	ft_strbuf_t b = {0};

	(void)state;
	ft_strbuf_add(&b, "", 0);
	assert_non_null(b.p);
	assert_string_equal(b.p, "");
	ft_strbuf_free(&b);
}

static void test_growth(void **state)
{
	ft_strbuf_t b = {0};

	(void)state;
	for (int i = 0; i < 10000; i++)
		ft_strbuf_addc(&b, (char)('a' + i % 26));
	assert_false(b.failed);
	assert_int_equal(b.len, 10000);
	assert_true(b.cap > b.len);
	assert_int_equal(strlen(b.p), 10000);
	assert_int_equal(b.p[9999], 'a' + 9999 % 26);
	ft_strbuf_free(&b);
}

static void test_addf(void **state)
{
	ft_strbuf_t b = {0};
	char big[3000];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ft_strbuf_addf(&b, "%d-%s", 42, "k");
	assert_string_equal(b.p, "42-k");
	/* Longer than the room left: formatted again after growing. */
	ft_strbuf_addf(&b, "[%s]", big);
	assert_false(b.failed);
	assert_int_equal(b.len, 4 + 2 + sizeof(big) - 1);
	assert_memory_equal(b.p, "42-k[xxx", 8);
	assert_int_equal(b.p[b.len - 1], ']');
	assert_int_equal(b.p[b.len], '\0');
	ft_strbuf_free(&b);
}

static void test_take(void **state)
{
	ft_strbuf_t b = {0};
	char *s;

	(void)state;
	assert_null(ft_strbuf_take(&b));
	ft_strbuf_adds(&b, "hello");
	s = ft_strbuf_take(&b);
	assert_string_equal(s, "hello");
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	free(s);
}

static void test_failure_is_sticky(void **state)
{
	ft_strbuf_t b = {0};

	(void)state;
	ft_strbuf_adds(&b, "keep");
	assert_int_equal(ft_strbuf_reserve(&b, SIZE_MAX - 2), -1); /* cannot be had: fails like an OOM */
	assert_true(b.failed);
	ft_strbuf_adds(&b, "more");
	ft_strbuf_addc(&b, 'c');
	ft_strbuf_addf(&b, "%s", "fmt");
	assert_int_equal(b.len, 4); /* contents left as they were */
	assert_string_equal(b.p, "keep");
	assert_int_equal(ft_strbuf_reserve(&b, 1), -1);
	ft_strbuf_free(&b);
	assert_false(b.failed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_and_nul), cmocka_unit_test(test_empty_add_allocates),
		cmocka_unit_test(test_growth),         cmocka_unit_test(test_addf),
		cmocka_unit_test(test_take),           cmocka_unit_test(test_failure_is_sticky),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
