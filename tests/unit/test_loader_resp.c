/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of ft-loader's response reader: heads, Content-Length and chunked bodies in any split, bad framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "loader.h"

typedef struct {
	char buf[256];
	size_t len;
} body_t;

static void collect(void *ctx, const char *p, size_t n)
{
	body_t *b = ctx;

	assert_true(b->len + n <= sizeof(b->buf));
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

/* Feeds msg in pieces of step bytes; returns 0 when the response completed, -1 on an error (err set). */
static int feed(ld_resp_t *r, const char *msg, size_t step, body_t *b, char *err, size_t cap)
{
	size_t len = strlen(msg), off = 0;

	while (off < len && r->state != LD_RESP_DONE) {
		size_t n = len - off < step ? len - off : step;
		ssize_t used = ld_resp_feed(r, msg + off, n, collect, b, err, cap);
		if (used < 0)
			return -1;
		off += (size_t)used;
		if ((size_t)used < n && r->state != LD_RESP_DONE)
			return -1; /* a reader that stops early must be done */
	}
	return r->state == LD_RESP_DONE ? 0 : -1;
}

static const char CHUNKED[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nAis-Checksum-Type: xxhash\r\n\r\n"
			      "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";

static void test_chunked_any_split(void **state)
{
	(void)state;
	for (size_t step = 1; step <= sizeof(CHUNKED); step++) {
		ld_resp_t r = {0};
		body_t b = {.len = 0};
		char err[128] = "";

		ld_resp_reset(&r, false);
		assert_int_equal(feed(&r, CHUNKED, step, &b, err, sizeof(err)), 0);
		assert_int_equal(r.status, 200);
		assert_true(r.keep_alive);
		assert_string_equal(r.cksum_type, "xxhash");
		assert_int_equal(b.len, 12);
		assert_memory_equal(b.buf, "hello, world", 12);
		assert_int_equal(r.body_bytes, 12);
		ld_resp_free(&r);
	}
}

static void test_chunked_bad(void **state)
{
	static const char *const bad[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",        /* not hex */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", /* no CRLF after the data */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", /* size overflows */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ld_resp_t r = {0};
		body_t b = {.len = 0};
		char err[128] = "";

		ld_resp_reset(&r, false);
		assert_int_equal(feed(&r, bad[i], 3, &b, err, sizeof(err)), -1);
		assert_string_equal(err, "malformed chunked body");
		ld_resp_free(&r);
	}
}

static void test_content_length_and_head(void **state)
{
	ld_resp_t r = {0};
	body_t b = {.len = 0};
	char err[128] = "";

	(void)state;
	ld_resp_reset(&r, false);
	assert_int_equal(feed(&r, "HTTP/1.1 206 Partial\r\nContent-Length: 3\r\n\r\nabc", 2, &b, err, sizeof(err)), 0);
	assert_int_equal(r.status, 206);
	assert_int_equal(b.len, 3);
	ld_resp_reset(&r, true); /* HEAD: no body whatever the length says */
	b.len = 0;
	assert_int_equal(feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", 5, &b, err, sizeof(err)), 0);
	assert_int_equal(b.len, 0);
	ld_resp_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chunked_any_split),
		cmocka_unit_test(test_chunked_bad),
		cmocka_unit_test(test_content_length_and_head),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
