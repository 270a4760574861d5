/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/http/parse.c: request heads, framing analysis, chunked decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/parse.h"

#define MAXH 16

static ft_hp_header_t hdrs[MAXH];

static ft_hp_result_t parse(const char *s, ft_hp_head_t *h)
{
	return ft_hp_parse_head(s, strlen(s), 8192, hdrs, MAXH, h);
}

static int analyze(const char *s, ft_hp_info_t *info)
{
	ft_hp_head_t h;

	assert_int_equal(parse(s, &h), FT_HP_DONE);
	return ft_hp_analyze(&h, hdrs, info);
}

static void assert_span(const char *p, size_t n, const char *want)
{
	assert_int_equal(n, strlen(want));
	assert_memory_equal(p, want, n);
}

static void test_valid_head(void **state)
{
	const char *s = "GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Empty:\r\nX-Pad: \t v a l \t\r\n\r\nBODY";
	ft_hp_head_t h;

	(void)state;
	assert_int_equal(parse(s, &h), FT_HP_DONE);
	assert_span(h.method, h.method_len, "GET");
	assert_span(h.target, h.target_len, "/a/b?x=1");
	assert_int_equal(h.version_minor, 1);
	assert_int_equal(h.nheaders, 3);
	assert_span(hdrs[0].name, hdrs[0].name_len, "Host");
	assert_span(hdrs[0].value, hdrs[0].value_len, "h");
	assert_span(hdrs[1].name, hdrs[1].name_len, "X-Empty");
	assert_int_equal(hdrs[1].value_len, 0);
	assert_span(hdrs[2].value, hdrs[2].value_len, "v a l");
	assert_int_equal(h.head_len, strlen(s) - 4);
}

static void test_bare_lf_and_leading_empty_lines(void **state)
{
	const char *s = "\r\n\nPUT /x HTTP/1.0\nA: 1\n\n";
	ft_hp_head_t h;

	(void)state;
	assert_int_equal(parse(s, &h), FT_HP_DONE);
	assert_span(h.method, h.method_len, "PUT");
	assert_int_equal(h.version_minor, 0);
	assert_int_equal(h.nheaders, 1);
	assert_int_equal(h.head_len, strlen(s));
}

static void test_incomplete(void **state)
{
	const char *full = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
	ft_hp_head_t h;
	size_t i;

	(void)state;
	/* every strict prefix is incomplete, never an error */
	for (i = 0; i < strlen(full); i++)
		assert_int_equal(ft_hp_parse_head(full, i, 8192, hdrs, MAXH, &h), FT_HP_AGAIN);
	assert_int_equal(ft_hp_parse_head(full, strlen(full), 8192, hdrs, MAXH, &h), FT_HP_DONE);
}

static void test_malformed(void **state)
{
	static const char *bad[] = {
		"GET  / HTTP/1.1\r\n\r\n", /* two spaces */
		"GET / HTTP/1.1 \r\n\r\n", /* trailing space */
		" GET / HTTP/1.1\r\n\r\n", /* leading space */
		"GET /\r\n\r\n",           /* HTTP/0.9 style */
		"GET / http/1.1\r\n\r\n",  /* lowercase protocol */
		"GET / HTTP/1.10\r\n\r\n", /* two-digit minor */
		"GET / HTTP/1\r\n\r\n",
		"GET / HTTP/x.1\r\n\r\n",
		"G@T / HTTP/1.1\r\n\r\n",      /* not a token */
		"GET /a\x01 HTTP/1.1\r\n\r\n", /* control char in target */
		"GET /a\x7f HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : a\r\n\r\n", /* space before colon */
		"GET / HTTP/1.1\r\n: a\r\n\r\n",      /* empty name */
		"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", /* obs-fold */
		"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",   /* control char in value */
		"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",    /* bare CR in value */
		"GET / HTTP/1.1\rX\r\n\r\n",            /* bare CR after request line */
		"GET / HTTP/1.1\r\nA\x80: b\r\n\r\n",   /* non-token in name */
	};
	ft_hp_head_t h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ft_hp_result_t rc = parse(bad[i], &h);

		if (rc != FT_HP_BAD)
			fail_msg("case %zu (%s): got %d, want BAD", i, bad[i], rc);
	}
	/* NUL inside a value */
	assert_int_equal(ft_hp_parse_head("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 26, 8192, hdrs, MAXH, &h), FT_HP_BAD);
	/* bare CR seen before the line end arrived */
	assert_int_equal(ft_hp_parse_head("GET / HT\rTP", 11, 8192, hdrs, MAXH, &h), FT_HP_BAD);
}

static void test_version(void **state)
{
	ft_hp_head_t h;

	(void)state;
	assert_int_equal(parse("GET / HTTP/2.0\r\n\r\n", &h), FT_HP_VERSION);
	assert_int_equal(parse("GET / HTTP/0.9\r\n\r\n", &h), FT_HP_VERSION);
	assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &h), FT_HP_DONE);
	assert_int_equal(h.version_minor, 0);
}

static void test_limits(void **state)
{
	char buf[4096];
	ft_hp_head_t h;
	int i, n;

	(void)state;
	/* too many headers */
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	for (i = 0; i < MAXH + 1; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "H%d: v\r\n", i);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	assert_int_equal(ft_hp_parse_head(buf, (size_t)n, 8192, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	/* exactly MAXH is fine */
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\n");
	for (i = 0; i < MAXH; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "H%d: v\r\n", i);
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "\r\n");
	assert_int_equal(ft_hp_parse_head(buf, (size_t)n, 8192, hdrs, MAXH, &h), FT_HP_DONE);
	/* byte limit: complete head longer than max, and an incomplete one already past max */
	assert_int_equal(ft_hp_parse_head(buf, (size_t)n, (size_t)n - 1, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	assert_int_equal(ft_hp_parse_head(buf, (size_t)n, (size_t)n, hdrs, MAXH, &h), FT_HP_DONE);
	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "GET /", 5);
	assert_int_equal(ft_hp_parse_head(buf, 200, 100, hdrs, MAXH, &h), FT_HP_TOO_LARGE);
	assert_int_equal(ft_hp_parse_head(buf, 100, 100, hdrs, MAXH, &h), FT_HP_AGAIN);
}

static void test_analyze(void **state)
{
	ft_hp_info_t in;

	(void)state;
	assert_int_equal(analyze("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &in), 0);
	assert_int_equal(in.content_length, 0);
	assert_true(in.keep_alive);
	assert_false(in.chunked);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n", &in), 0);
	assert_int_equal(in.content_length, 42);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 7, 7\r\ncontent-length: 7\r\n\r\n", &in),
			 0);
	assert_int_equal(in.content_length, 7);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n", &in), 0);
	assert_true(in.chunked);
	assert_int_equal(in.content_length, -1);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nConnection: foo, Close\r\n\r\n", &in), 0);
	assert_false(in.keep_alive);
	assert_int_equal(analyze("GET / HTTP/1.0\r\n\r\n", &in), 0);
	assert_false(in.keep_alive);
	assert_int_equal(analyze("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &in), 0);
	assert_true(in.keep_alive);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", &in),
			 0);
	assert_true(in.expect_continue);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", &in), 0);
	assert_int_equal(in.content_length, INT64_MAX);

	/* framing errors */
	assert_int_equal(
		analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", &in),
		400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", &in),
			 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: ,\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", &in), 400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", &in), 501);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &in), 501);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", &in), 400);
	assert_int_equal(
		analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
			&in),
		400);
	assert_int_equal(analyze("PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", &in), 400);
	assert_int_equal(analyze("GET / HTTP/1.1\r\n\r\n", &in), 400); /* no Host */
	assert_int_equal(analyze("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &in), 400);
}

/* Decodes s fed in pieces of `step` bytes; returns the result and fills out/outlen/consumed. */
static ft_hp_chunk_result_t decode_steps(const char *s, size_t len, size_t step, char *out, size_t *outlen,
					 size_t *consumed_total)
{
	ft_hp_chunked_t c;
	ft_hp_chunk_result_t rc = FT_HP_CHUNK_OK;
	size_t off = 0, end, used, dl;
	const char *d;

	ft_hp_chunked_init(&c);
	*outlen = 0;
	while (off < len) {
		end = off + step < len ? off + step : len;
		while (off < end) {
			rc = ft_hp_chunked_decode(&c, s + off, end - off, &used, &d, &dl);
			assert_true(used <= end - off);
			if (dl > 0) {
				assert_true(d >= s + off && d + dl <= s + off + used);
				memcpy(out + *outlen, d, dl);
				*outlen += dl;
			}
			off += used;
			if (rc != FT_HP_CHUNK_OK) {
				*consumed_total = off;
				return rc;
			}
		}
	}
	*consumed_total = off;
	return rc;
}

static void test_chunked_splits(void **state)
{
	const char *s = "5\r\nhello\r\n1;name=val;x\r\n \r\n0a\r\n0123456789\r\n"
			"0\r\nTrailer: x\r\nT2: y\r\n\r\nNEXT";
	size_t len = strlen(s), step, outlen, used;
	char out[256];

	(void)state;
	for (step = 1; step <= len; step++) {
		assert_int_equal(decode_steps(s, len, step, out, &outlen, &used), FT_HP_CHUNK_DONE);
		assert_int_equal(outlen, 16);
		assert_memory_equal(out, "hello 0123456789", 16);
		assert_int_equal(used, len - 4); /* "NEXT" belongs to the next request */
	}
}

static void test_chunked_variants(void **state)
{
	size_t outlen, used;
	char out[256];
	const char *s;

	(void)state;
	/* bare LF line ends, upper-case hex, whitespace before an extension, no trailers */
	s = "A ;ext\nabcdefghij\n0\n\n";
	assert_int_equal(decode_steps(s, strlen(s), 3, out, &outlen, &used), FT_HP_CHUNK_DONE);
	assert_int_equal(outlen, 10);
	/* incomplete body is OK (more input needed), not DONE */
	s = "5\r\nhel";
	assert_int_equal(decode_steps(s, strlen(s), 100, out, &outlen, &used), FT_HP_CHUNK_OK);
	assert_int_equal(outlen, 3);
	/* leading zeros are fine */
	s = "0000000000000000000001\r\nx\r\n0\r\n\r\n";
	assert_int_equal(decode_steps(s, strlen(s), 1, out, &outlen, &used), FT_HP_CHUNK_DONE);
	assert_int_equal(outlen, 1);
}

static void test_chunked_bad(void **state)
{
	static const char *bad[] = {
		"x\r\n",            /* bad hex */
		"\r\n",             /* no digits */
		";ext\r\n",         /* extension without size */
		"5 x\r\nhello\r\n", /* junk after size */
		"5\rx",             /* CR not followed by LF */
		"5\r\nhelloX\r\n",  /* data not followed by CRLF */
		"5\r\nhello\rX",
		"10000000000000000\r\n", /* 17 significant hex digits: overflow */
		"fffffffffffffffff\r\n",
		"1\r\na\r\n0\r\nT: \x01\r\n\r\n", /* control char in trailer */
		"1;a\x01\r\n",                    /* control char in extension */
	};
	size_t i, outlen, used;
	char out[256];

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (decode_steps(bad[i], strlen(bad[i]), 1, out, &outlen, &used) != FT_HP_CHUNK_BAD)
			fail_msg("case %zu should be BAD", i);
		if (decode_steps(bad[i], strlen(bad[i]), 64, out, &outlen, &used) != FT_HP_CHUNK_BAD)
			fail_msg("case %zu should be BAD in one piece", i);
	}
}

static void test_chunked_limits(void **state)
{
	static char buf[FT_HP_TRAILER_MAX + 64];
	size_t n, outlen, used;
	char out[16];

	(void)state;
	/* an extension longer than the line limit */
	memset(buf, 'e', sizeof(buf));
	memcpy(buf, "1;", 2);
	assert_int_equal(decode_steps(buf, FT_HP_CHUNK_LINE_MAX + 8, 512, out, &outlen, &used), FT_HP_CHUNK_BAD);
	/* a trailer section longer than the limit */
	memcpy(buf, "0\r\nX: ", 6);
	n = sizeof(buf);
	assert_int_equal(decode_steps(buf, n, 1000, out, &outlen, &used), FT_HP_CHUNK_BAD);
	/* the largest size that fits in 64 bits parses (data then just needs to arrive) */
	assert_int_equal(decode_steps("ffffffffffffffff\r\nab", 20, 1, out, &outlen, &used), FT_HP_CHUNK_OK);
	assert_int_equal(outlen, 2);
}

static void test_token_eq(void **state)
{
	(void)state;
	assert_true(ft_hp_token_eq("Content-Length", 14, "content-length"));
	assert_false(ft_hp_token_eq("Content-Lengt", 13, "content-length"));
	assert_false(ft_hp_token_eq("Content-Lengthx", 15, "content-length"));
}

/* ft_hp_peek_target on a C string. */
static bool peek(const char *s, const char **t, size_t *n)
{
	return ft_hp_peek_target(s, strlen(s), t, n);
}

static void test_peek_target(void **state)
{
	const char *t = NULL;
	size_t n = 0;

	(void)state;
	assert_true(peek("GET /s3/b/k?x=1 HTTP/1.1 extra\r\n", &t, &n));
	assert_int_equal(n, 11);
	assert_memory_equal(t, "/s3/b/k?x=1", 11);
	assert_true(peek("\r\nPUT /a HTTP/9.9\r\nBad Header\r\n\r\n", &t, &n));
	assert_int_equal(n, 2);
	assert_true(peek("GET /cut-line ", &t, &n)); /* the version not seen yet */
	assert_false(peek("GET /cut-line", &t, &n));
	assert_false(peek("GARBAGE\r\n\r\n", &t, &n));
	assert_false(peek("GET  / HTTP/1.1\r\n", &t, &n));
	assert_false(peek("G(T / HTTP/1.1\r\n", &t, &n));
	assert_false(peek("", &t, &n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_head),       cmocka_unit_test(test_bare_lf_and_leading_empty_lines),
		cmocka_unit_test(test_incomplete),       cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_version),          cmocka_unit_test(test_limits),
		cmocka_unit_test(test_analyze),          cmocka_unit_test(test_chunked_splits),
		cmocka_unit_test(test_chunked_variants), cmocka_unit_test(test_chunked_bad),
		cmocka_unit_test(test_chunked_limits),   cmocka_unit_test(test_token_eq),
		cmocka_unit_test(test_peek_target),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
